"""Simulated annealing over circuit sets (``anneal``).

The state is a set of circuits; every state gets the distance-vector
forwarding tables of :func:`topoplan.problems.circuits.forwarding.distance_vector` and
is scored by the same objective as every other method: the
communication-time bound, then the uplink bytes (energy
``T / T0 + 1e-3 * uplink / large bytes``). Optionally (``energy='simulated'``)
the energy is the simulated makespan: a local search with the simulator as
objective (the trace, or the traffic as one bulk phase; ``sim_model``).

Moves: re-point one end of a circuit to another free OCS node (same or
other switch), swap the ends of two circuits, add a circuit between two
free OCS nodes (within ``max_circuits``), remove a circuit. The start is
the best of the papers' heuristics (``init=`` to choose); the temperature
falls geometrically from ``t0`` to ``t1`` (relative energy) over ``max_steps``
moves when they are given (then the plan does not depend on the machine's
load), else over the time budget (``time_limit``, default 10 s). Seeded.
"""

from __future__ import annotations

import math
import time

import numpy as np

from topoplan.problems.circuits import heuristics  # noqa: F401  (registers the starts)
from topoplan.problems.circuits.bound import better, evaluate
from topoplan.plans.circuits import array_from_tables
from topoplan.problems.circuits.forwarding import distance_vector
from topoplan.problems.circuits.problem import plan_dict, plan_simulator, result_from_plan
from topoplan.problems.circuits.registry import HEURISTICS, METHODS
from topoplan.core.errors import TopoplanError
from topoplan.core.interrupt import stop_requested
from topoplan.core.topology import check_count
from topoplan.core.progress import report

__all__ = ["DEFAULT_TIME_S", "STARTABLE", "anneal"]

DEFAULT_TIME_S = 10.0


STARTABLE = HEURISTICS + ("none",)


@METHODS.register("anneal")
def anneal(problem, *, time_limit=None, seed=0, init: str | None = None, max_steps: int | None = None,
           t0: float = 0.02, t1: float = 1e-4, energy: str = "bound", trace=None, sim_model=None):
    """Simulated annealing over circuit sets, started from the best heuristic (see the module docstring).

    Parameters
    ----------
    problem : :class:`topoplan.problems.circuits.problem.CircuitProblem`.
    time_limit : seconds (default 10; with ``max_steps`` the first to run out stops).
    seed : random seed.
    init : heuristic to start from (``sp``, ``three-step``, ``greedy``, ``matching`` or ``none``;
        default: the best of sp, three-step, greedy, matching).
    max_steps : number of moves.
    t0, t1 : start and end temperature, relative to the start energy.
    energy : ``bound`` (default) or ``simulated`` (the simulated makespan of ``trace``, default the
        traffic as one bulk phase, under ``sim_model``).
    trace, sim_model : what ``energy='simulated'`` replays, and under which network model
        (:func:`topoplan.problems.circuits.solve` passes its own).

    Returns
    -------
    PlanResult
        The best plan seen (status ``heuristic``).

    Raises
    ------
    TopoplanError
        For an unknown ``init`` or ``energy``.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.matrix import from_arrays
    >>> from topoplan.problems.circuits.problem import CircuitProblem
    >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=4"])   # OCS nodes 0-3, 16-19, ...
    >>> traffic = from_arrays(64, range(4, 12), range(20, 28), [4e7] * 8)  # non-OCS nodes, switch 0 -> 1
    >>> prob = CircuitProblem.build(topo, traffic, placement=list(range(64)))
    >>> res = anneal(prob, max_steps=200, seed=0)
    >>> res.plan["circuits"], round(res.objective, 3), res.metrics["circuits_used"]
    ([[0, 16], [1, 17], [2, 18], [3, 19]], 0.032, 4)
    """
    if energy not in ("bound", "simulated"):
        raise TopoplanError(f"field 'energy': 'bound' or 'simulated', got {energy!r}")
    sim_score = _sim_scorer(problem, trace, sim_model) if energy == "simulated" else None
    if max_steps is not None:
        max_steps = check_count(max_steps, "max_steps", minimum=0)
    rng = np.random.default_rng(seed)
    budget = DEFAULT_TIME_S if time_limit is None and max_steps is None else time_limit
    t_start = time.perf_counter()
    names = [init] if init else list(HEURISTICS)
    best_ev, cur, start_name = None, None, None
    for name in names:
        if name not in STARTABLE:
            raise TopoplanError(f"field 'init': unknown heuristic {name!r} ({', '.join(STARTABLE)})")
        # each start within what is left of the limit (the exact matching's first compilation took 105 s at a
        # load of 7 without one); none after the limit but the first
        left = None if budget is None else t_start + budget - time.perf_counter()
        if cur is not None and left is not None and left <= 0:
            break
        r = METHODS[name](problem, seed=seed, time_limit=None if left is None else max(left, 1e-3))
        circ = [tuple(c) for c in r.plan["circuits"]]
        ev = evaluate(problem, circ, array_from_tables(r.plan["forwarding"], problem.n_nodes, problem.n_switches))
        if better(ev, best_ev):
            best_ev, cur, start_name = ev, circ, name

    large = max(float(problem.large_bytes.sum()), 1.0)
    # energies relative to the start's objective without the trace's computation on the critical path: every
    # configuration has it, and at many times the communication it would flatten the energies the temperature
    # is relative to (the search would accept any move)
    fixed = 0.0 if problem.step_loads is None else float(problem.step_loads.compute_s)
    T0 = max(best_ev.objective_s - fixed, 1e-30)

    def energy_of(circ):
        nh = distance_vector(problem, circ)
        ev = evaluate(problem, circ, nh)
        e = (ev.objective_s - fixed) / T0 + 1e-3 * ev.uplink_bytes / large
        if sim_score is not None:
            e = sim_score(circ, nh) / max(sim_score.ref, 1e-30)
        return e, ev, nh

    e_cur, ev_cur, nh_cur = energy_of(cur)
    best = (e_cur, list(cur), ev_cur, nh_cur)
    state = _State(problem, cur)
    moves = accepted = 0
    while True:
        elapsed = time.perf_counter() - t_start
        if budget is not None and elapsed >= budget:
            break
        if max_steps is not None and moves >= max_steps:
            break
        if stop_requested():   # Ctrl-C: keep the best configuration found so far
            break
        # the cooling follows the moves when they are counted, so that the plan does not depend on the load
        frac = moves / max_steps if max_steps is not None else elapsed / budget
        temp = t0 * (t1 / t0) ** min(1.0, frac)
        cand = state.propose(rng)
        moves += 1
        if cand is None:
            continue
        e_new, ev_new, nh_new = energy_of(cand)
        if e_new <= e_cur or rng.random() < math.exp(-(e_new - e_cur) / temp):
            state.set(cand)
            e_cur = e_new
            accepted += 1
            if e_new < best[0] - 1e-15:
                best = (e_new, list(cand), ev_new, nh_new)
                report(incumbent=e_new)
    _, circ, ev, nh = best
    res = result_from_plan(problem, circ, nh, status="heuristic",
                           options={"init": start_name, "moves": moves, "accepted": accepted, "energy": energy,
                                    "t0": t0, "t1": t1})
    if sim_score is not None:
        res.metrics["annealed_simulated_s"] = sim_score(circ, nh)
    return res


class _State:
    """Circuit set with the bookkeeping the moves need (free ports, joined pairs)."""

    def __init__(self, problem, circuits):
        self.p = problem
        self.ocs = problem.ocs_nodes
        self.set(circuits)

    def set(self, circuits):
        self.c = [tuple(sorted(map(int, x))) for x in circuits]
        self.free = np.where(self.p.is_ocs, self.p.ports, 0).astype(np.int64)
        for a, b in self.c:
            self.free[a] -= 1
            self.free[b] -= 1

    def _ok(self, a, b, joined):
        sw = self.p.node_switch
        return a != b and sw[a] != sw[b] and (min(a, b), max(a, b)) not in joined

    def propose(self, rng):
        """A neighbouring circuit set, or None when the drawn move does not apply."""
        c = list(self.c)
        joined = set(c)
        limit = self.p.circuit_limit()
        kind = rng.choice(4, p=[0.45, 0.25, 0.15, 0.15])
        free_nodes = self.ocs[self.free[self.ocs] > 0]
        if kind == 0 and c:  # re-point one end
            i = int(rng.integers(len(c)))
            a, b = c[i]
            keep, drop = (a, b) if rng.random() < 0.5 else (b, a)
            if not len(free_nodes):
                return None
            w = int(rng.choice(free_nodes))
            if w == drop or not self._ok(keep, w, joined):
                return None
            c[i] = (min(keep, w), max(keep, w))
            return c
        if kind == 1 and len(c) >= 2:  # swap ends
            i, j = rng.choice(len(c), size=2, replace=False)
            (a, b), (x, y) = c[i], c[j]
            n1, n2 = ((a, y), (x, b)) if rng.random() < 0.5 else ((a, x), (b, y))
            joined -= {c[i], c[j]}
            if not (self._ok(*n1, joined) and self._ok(*n2, joined)) or n1 == n2:
                return None
            c[i], c[j] = tuple(sorted(n1)), tuple(sorted(n2))
            return c
        if kind == 2 and len(c) < limit and len(free_nodes) >= 2:  # add
            a, b = (int(x) for x in rng.choice(free_nodes, size=2, replace=False))
            if not self._ok(a, b, joined) or (a == b):
                return None
            c.append((min(a, b), max(a, b)))
            return c
        if kind == 3 and c:  # remove
            c.pop(int(rng.integers(len(c))))
            return c
        return None


def _sim_scorer(problem, trace, sim_model=None):
    """Simulated makespan of a plan (circuits, next-hop array) on the problem's network."""
    run = plan_simulator(problem, trace, sim_model)

    def score(circ, nh):
        return run(plan_dict(problem, circ, nh, ""))

    score.ref = score([], np.full((problem.n_nodes, problem.n_switches), -1, dtype=np.int64))
    return score
