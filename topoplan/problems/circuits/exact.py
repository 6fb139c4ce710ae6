"""``ilp``: the exact circuit models as a circuit method -- the problem's side of them.

The formulations are in :mod:`topoplan.formulations` and read plain arrays: :mod:`topoplan.formulations.circuits_node` (exact for
the plans the simulator runs; small instances), :mod:`topoplan.formulations.circuits_switch` (aggregated: a lower
bound for every plan; its LP relaxation is :func:`lp_bound`) and :mod:`topoplan.formulations.circuits_common` (the
data they read, the two-objective solve). This module holds what is specific to a
:class:`~topoplan.problems.circuits.problem.CircuitProblem`:

- :func:`circuit_data` -- the problem as the arrays the formulations read;
- decoding into plans: a node solution's next hops become forwarding tables (:func:`extract_node_plan`),
  a switch solution's circuit counts become node pairs (:func:`decompose`) with congestion-aware tables;
- the incumbents (the papers' heuristics and matching, each a plan the model must beat);
- :func:`solve_exact`, the method, split by formulation: :func:`solve_node`, :func:`solve_switch`,
  :func:`solve_switch_rounding` (too large for the switch MILP) and :func:`solve_lp` (the bound only).

Returns the best plan found -- the model's plan, or an incumbent (after a table local search) when the
model could not beat it in time -- with the proven lower bound on ``T`` and the gap. Status ``optimal``
when the plan meets the bound (and, in lexicographic mode, the uplink-bytes bound), ``timeout`` when
the solver ran out of time, else ``feasible``.

Examples
--------
>>> from topoplan.problems.circuits import CircuitProblem, solve
>>> from topoplan.core.topology_io import load_topology
>>> from topoplan.traffic.matrix import from_arrays
>>> prob = CircuitProblem.build(load_topology("paper003", ["ocs.nodes_per_switch=1"]),
...                             from_arrays(256, [0, 64], [64, 0], [4e6, 4e6]))
>>> node_size(prob) <= NODE_MAX_VARS                     # small: the exact node formulation
True
>>> r = solve(prob, "ilp", time_limit=10)
>>> r.status, r.plan["circuits"], r.options["formulation"], r.objective == r.bound
('optimal', [[0, 16]], 'node', True)
>>> lp_bound(prob) <= r.objective                        # the switch LP: a bound for every plan
True
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

import numpy as np

from topoplan.core import deadline
from topoplan.core.errors import TopoplanError
from topoplan.core.interrupt import stop_requested
from topoplan.core.progress import report
from topoplan.core.units import format_bytes
from topoplan.formulations import circuits_node, circuits_switch
from topoplan.formulations.backends import available, check, MILP_BACKENDS, solve as backend_solve
from topoplan.formulations.circuits_common import CircuitArrays, CircuitData, Model, two_phase
from topoplan.plans.circuits import array_from_tables
from topoplan.problems.circuits import heuristics
from topoplan.problems.circuits.bound import better, evaluate, evaluate_no_circuits, floor_s
from topoplan.problems.circuits.forwarding import congestion_tables, distance_vector, LOAD_SHARING, polish_tables
from topoplan.problems.circuits.heuristics import matching_cost_s
from topoplan.problems.circuits.problem import CircuitProblem, result_from_plan
from topoplan.problems.circuits.registry import METHODS
from topoplan.problems.circuits.steps import MIN_STEP_TYPES, merge_groups
from topoplan.problems.result import PlanResult

__all__ = ["ilp", "solve_exact", "uplink_note", "solve_node", "solve_switch", "solve_switch_rounding", "solve_lp", "lp_bound",
           "circuit_data", "model_steps", "node_size", "switch_size", "candidate_pairs", "build_node_model", "build_switch_model",
           "extract_node_plan", "decompose", "fallback_sources", "auto_solver", "matching_cost_s", "NODE_MAX_VARS",
           "SWITCH_MAX_VARS", "REL_TOL", "BUILD_VARS_PER_S", "NODE_BUILD_VARS_PER_S", "HANDOVER_PER_BUILD",
           "TABLES_SHARE", "MODEL_TABLES_SHARE"]

NODE_MAX_VARS = 2_000  # the node formulation is used (auto) up to this many variables (one step group)
NODE_STEP_VARS = 20_000  # with steps, its step groups are halved until it has at most this many
SWITCH_MAX_VARS = 150_000  # beyond this (estimated) size the switch MILP gives way to LP rounding
REL_TOL = 1e-6  # relative tolerance of "the plan meets the bound"
# Measured costs that decide, before a stage starts, whether it fits the time left: a stage cannot be interrupted
# once started. They are CPU seconds of an idle core, scaled to the share of a CPU the command is getting
# (topoplan.core.deadline.scaled: under a load of 6-10 on 2 cores a stage takes about 3 times its CPU seconds).
# On 1,024 nodes (63,488 estimated, 68,977 real variables) PuLP built the switch model in 4.2 CPU s and wrote it
# for CBC (MPS) in 3.0 CPU s; on 512 nodes (7,680 estimated, 12,033 real) in 0.8 and 0.6: about 6,000 estimated
# variables per CPU second for both together, which every solve of the model pays (each writes the model).
BUILD_VARS_PER_S = 6_000       # estimated variables per CPU second: building a model and handing it to a solver
# The node model (node_size's estimate) built and written (MPS) on 256 ranks of random traffic at a load of 9:
# 7,708 estimated variables in 0.25 CPU s, 23,160 in 0.77, 77,296 in 4.0 (19,000-31,000 a CPU second); kept at half.
NODE_BUILD_VARS_PER_S = 10_000
HANDOVER_PER_BUILD = 0.8       # handing a built model to the solver (PuLP writes it) over the seconds it took to build
TABLES_SHARE = 0.3             # of the limit for the incumbents' congestion-aware tables (each run to convergence)
MODEL_TABLES_SHARE = 0.1       # of the limit for each table search on a model plan (switch MILP, LP rounding)
MIN_SOLVE_S = 0.5              # the least time a solve is started with (less finds nothing on a model this size)


@METHODS.register("ilp")
def ilp(problem, *, time_limit=None, seed=0, solver: str = "auto", formulation: str = "auto",
        objective: str = "lexicographic", threads: int | None = None, pairs: str = "auto") -> PlanResult:
    """The exact model: best plan found, proven bound and gap (see :func:`solve_exact`).

    Parameters
    ----------
    problem : :class:`topoplan.problems.circuits.CircuitProblem`.
    time_limit : seconds for the solver (None: until proven).
    seed : solver seed (and the heuristics' seed for the incumbents).
    solver : MILP back-end: ``auto`` (measured choice: HiGHS for the node formulation, CBC for the
        switch formulation; see :func:`auto_solver`), ``cbc``, ``highs``, ``ortools`` or ``gurobi``.
    formulation : ``auto``, ``node`` (exact tables), ``switch`` (aggregated) or ``lp`` (bound only).
    objective : ``lexicographic`` (the bound, then uplink bytes) or ``weighted``.
    threads : solver threads (None: the back-end's default).
    pairs : switch formulation: switch pairs that may get circuits, ``auto``, ``all`` or ``traffic``.

    Returns
    -------
    PlanResult (see :func:`solve_exact`).

    Examples
    --------
    >>> from topoplan.problems.circuits import CircuitProblem
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.matrix import from_arrays
    >>> prob = CircuitProblem.build(load_topology("paper003", ["ocs.nodes_per_switch=1"]),
    ...                             from_arrays(256, [0, 64], [64, 0], [4e6, 4e6]))
    >>> r = ilp(prob, time_limit=10)
    >>> r.status, r.plan["circuits"]
    ('optimal', [[0, 16]])
    """
    return solve_exact(problem, time_limit=time_limit, seed=seed, solver=solver, formulation=formulation,
                       objective=objective, threads=threads, pairs=pairs)


# -- the problem as the formulations' data ---------------------------------------

def circuit_data(problem: CircuitProblem, groups: int | None = None) -> CircuitData:
    """The arrays of ``problem`` the circuit formulations read (with its step groups, merged to at most
    ``groups``, as ``steps``).

    Parameters
    ----------
    problem : :class:`topoplan.problems.circuits.CircuitProblem`.
    groups : int, optional
        Most step groups the formulation gets (:func:`model_steps`).

    Returns
    -------
    :class:`topoplan.formulations.circuits_common.CircuitData`

    Examples
    --------
    >>> from topoplan.problems.circuits import CircuitProblem
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.matrix import from_arrays
    >>> prob = CircuitProblem.build(load_topology("paper003", ["ocs.nodes_per_switch=1"]),
    ...                             from_arrays(256, [0, 64], [64, 0], [4e6, 4e6]))
    >>> circuit_data(prob).n_switches
    4
    """
    p = problem
    data = CircuitData(**{f.name: getattr(p, f.name) for f in dataclasses.fields(CircuitArrays)},
                       n_switches=p.n_switches, circuit_limit=p.circuit_limit(), own_out=p.own_out(), own_in=p.own_in(),
                       switch_bytes=p.switch_bytes(), ocs_of_switch=p.ocs_of_switch())
    sl = model_steps(p, groups)
    if sl is None or sl.n_groups <= 1:
        return data
    n, s = p.n_nodes, p.n_switches
    sa, sb = p.node_switch[p.large_src], p.node_switch[p.large_dst]
    parts = []
    for k in range(sl.n_groups):
        w = sl.large_B[k]
        keep = w > 0
        own_out = np.zeros((n, s))
        own_in = np.zeros((n, s))
        np.add.at(own_out, (p.large_src, sb), w)
        np.add.at(own_in, (p.large_dst, sa), w)
        W = np.zeros((s, s))
        np.add.at(W, (sa, sb), w)
        parts.append(dataclasses.replace(
            data, base_up_B=sl.base_up_B[k], base_down_B=sl.base_down_B[k], base_intra_B=sl.base_intra_B[k],
            base_uplink_up_B=sl.base_uplink_up_B[k], base_uplink_down_B=sl.base_uplink_down_B[k],
            large_src=p.large_src[keep], large_dst=p.large_dst[keep], large_bytes=w[keep], own_out=own_out,
            own_in=own_in, switch_bytes=W))
    return dataclasses.replace(data, steps=tuple(parts))


def model_steps(problem, groups: int | None = None):
    """The problem's step groups merged to at most ``groups`` for a formulation (None: as the problem has
    them; no steps: None). Merging adds groups' traffic together, so a model over fewer groups is a
    relaxation of the step time over more.

    Parameters
    ----------
    problem : CircuitProblem
    groups : int, optional

    Returns
    -------
    topoplan.problems.circuits.steps.StepLoads or None

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.problems.circuits import CircuitProblem
    >>> from topoplan.traffic.matrix import from_arrays
    >>> model_steps(CircuitProblem.build(load_topology("paper003"), from_arrays(2, [0], [1], [8.0]))) is None
    True
    """
    sl = problem.step_loads
    if sl is None or groups is None or sl.n_groups <= groups:
        return sl
    key = ("model_steps", int(groups))
    if key not in problem._cache:
        problem._cache[key] = sl.merged(merge_groups(problem, sl, int(groups)))
    return problem._cache[key]


def node_size(problem, groups: int | None = 1) -> int:
    """Rough variable count of the node formulation (to choose the formulation).

    Parameters
    ----------
    problem : :class:`topoplan.problems.circuits.CircuitProblem`.
    groups : int, optional
        Step groups of the model (default 1: the traffic as one phase; None: all the problem has).

    Returns
    -------
    int

    Examples
    --------
    >>> from topoplan.problems.circuits import CircuitProblem
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.matrix import from_arrays
    >>> prob = CircuitProblem.build(load_topology("paper003", ["ocs.nodes_per_switch=1"]),
    ...                             from_arrays(256, [0, 64], [64, 0], [4e6, 4e6]))
    >>> node_size(prob) <= NODE_MAX_VARS
    True
    """
    return circuits_node.size(circuit_data(problem, groups))


def switch_size(problem, pairs: str = "auto", groups: int | None = 1) -> int:
    """Upper estimate of the switch formulation's flow variables (to choose MILP or LP rounding).

    Parameters
    ----------
    problem : the circuit problem; pairs : ``auto``, ``all`` or ``traffic`` (:func:`candidate_pairs`);
    groups : step groups of the model (default 1; None: all the problem has).

    Returns
    -------
    int

    Examples
    --------
    >>> from topoplan.problems.circuits import CircuitProblem
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.matrix import from_arrays
    >>> prob = CircuitProblem.build(load_topology("paper003", ["ocs.nodes_per_switch=1"]),
    ...                             from_arrays(256, [0, 64], [64, 0], [4e6, 4e6]))
    >>> switch_size(prob) <= SWITCH_MAX_VARS
    True
    """
    return circuits_switch.size(circuit_data(problem, groups), pairs)


def candidate_pairs(problem, which: str = "auto") -> list[tuple[int, int]]:
    """Switch pairs that may get circuits: all (small S) or the pairs that exchange large traffic.

    Parameters
    ----------
    problem : the circuit problem; which : ``auto``, ``all`` or ``traffic``.

    Returns
    -------
    list of ``(switch, switch)`` pairs.

    Examples
    --------
    >>> from topoplan.problems.circuits import CircuitProblem
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.matrix import from_arrays
    >>> prob = CircuitProblem.build(load_topology("paper003", ["ocs.nodes_per_switch=1"]),
    ...                             from_arrays(256, [0, 64], [64, 0], [4e6, 4e6]))
    >>> candidate_pairs(prob, "all")[:3]
    [(0, 1), (0, 2), (0, 3)]
    """
    return circuits_switch.candidate_pairs(circuit_data(problem), which)


def build_node_model(problem, *, T_max: float, T_floor: float = 0.0, groups: int | None = 1) -> Model:
    """The node formulation of ``problem`` (:func:`topoplan.formulations.circuits_node.build`); decode with
    :func:`extract_node_plan`.

    Parameters
    ----------
    problem : the circuit problem; T_max, T_floor : bounds on the time variable ``T`` (seconds; with steps,
    the step time without its fixed latency term); groups : step groups (default 1; None: all).

    Returns
    -------
    :class:`topoplan.formulations.circuits_common.Model`

    Examples
    --------
    >>> from topoplan.problems.circuits import CircuitProblem
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.matrix import from_arrays
    >>> prob = CircuitProblem.build(load_topology("paper003", ["ocs.nodes_per_switch=1"]),
    ...                             from_arrays(256, [0, 64], [64, 0], [4e6, 4e6]))
    >>> m = build_node_model(prob, T_max=1.0)
    >>> m.n_variables > 0
    True
    """
    return circuits_node.build(circuit_data(problem, groups), T_max=T_max, T_floor=T_floor)[0]


def build_switch_model(problem, *, T_max: float, T_floor: float = 0.0, pairs=None, relax: bool = False,
                       slots: bool | None = None, groups: int | None = 1) -> Model:
    """The switch formulation of ``problem`` (:func:`topoplan.formulations.circuits_switch.build`).

    Parameters
    ----------
    problem : the circuit problem; T_max, T_floor : bounds on ``T``; pairs : candidate switch pairs
    (None: all); relax : LP relaxation; slots : see :func:`topoplan.formulations.circuits_switch.build`;
    groups : step groups (default 1; None: all).

    Returns
    -------
    :class:`topoplan.formulations.circuits_common.Model`

    Examples
    --------
    >>> from topoplan.problems.circuits import CircuitProblem
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.matrix import from_arrays
    >>> prob = CircuitProblem.build(load_topology("paper003", ["ocs.nodes_per_switch=1"]),
    ...                             from_arrays(256, [0, 64], [64, 0], [4e6, 4e6]))
    >>> m = build_switch_model(prob, T_max=1.0, relax=True)
    >>> m.n_variables > 0
    True
    """
    return circuits_switch.build(circuit_data(problem, groups), T_max=T_max, T_floor=T_floor, pairs=pairs,
                                 relax=relax, slots=slots)[0]


# -- decoding into plans -----------------------------------------------------------

def extract_node_plan(problem, model: Model, with_carried: bool = False):
    """Circuits and next-hop array of a solved node model (and the carried mask with ``with_carried``).

    Entries only where traffic flows: a next hop chosen for a node that
    carries nothing is arbitrary (it may even close a cycle of empty entries).

    Parameters
    ----------
    problem : the circuit problem; model : a solved node model; with_carried : also return the mask.

    Returns
    -------
    ``(circuits, next_hop)`` or ``(circuits, next_hop, carried)``.

    Examples
    --------
    >>> from topoplan.problems.circuits import CircuitProblem
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.matrix import from_arrays
    >>> prob = CircuitProblem.build(load_topology("paper003", ["ocs.nodes_per_switch=1"]),
    ...                             from_arrays(256, [0, 64], [64, 0], [4e6, 4e6]))
    >>> from topoplan.formulations.backends import solve as backend_solve
    >>> m = build_node_model(prob, T_max=1.0)
    >>> backend_solve(m.prob, "cbc").status
    'optimal'
    >>> circuits, next_hop = extract_node_plan(prob, m)
    >>> next_hop.shape
    (64, 4)
    """
    sol = circuits_node.decode(model)
    return (sol.circuits, sol.next_hop, sol.carried) if with_carried else (sol.circuits, sol.next_hop)


def fallback_sources(problem, fallback_B: dict, circuits) -> np.ndarray:
    """Source entries to leave empty so that each switch pair falls back about as much as the model says.

    ``fallback_B``: the switch model's fall-back per (source switch, destination switch) in bytes
    (:attr:`topoplan.formulations.circuits_switch.SwitchSolution.fallback` times the model's ``byte_scale``). Per (source switch,
    destination switch), sources that host no circuit are sent to the uplinks, largest first, while the
    total stays within the model's fall-back bytes at the source switch.

    Parameters
    ----------
    problem : the circuit problem; fallback_B : as above; circuits : the plan's node pairs.

    Returns
    -------
    boolean ``(n_nodes, n_switches)`` mask.

    Examples
    --------
    >>> from topoplan.problems.circuits import CircuitProblem
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.matrix import from_arrays
    >>> prob = CircuitProblem.build(load_topology("paper003", ["ocs.nodes_per_switch=1"]),
    ...                             from_arrays(256, [0, 64], [64, 0], [4e6, 4e6]))
    >>> mask = fallback_sources(prob, {}, [(0, 16)])
    >>> mask.shape, bool(mask.any())
    ((64, 4), False)
    """
    p = problem
    sw = p.node_switch
    own = p.own_out()
    mask = np.zeros((p.n_nodes, p.n_switches), dtype=bool)
    hosts = {x for c in circuits for x in c}
    for (a, B), q in fallback_B.items():
        if q <= 1e-9 * max(1.0, own[:, B].sum()):
            continue
        cand = [u for u in np.flatnonzero((sw == a) & (own[:, B] > 0)).tolist() if u not in hosts]
        cand.sort(key=lambda u: (-own[u, B], u))
        total = 0.0
        for u in cand:
            if total + own[u, B] <= q * (1 + 1e-9) + 1e-6:
                mask[u, B] = True
                total += own[u, B]
    return mask


def decompose(problem, counts: dict[tuple[int, int], int]) -> list[tuple[int, int]]:
    """Switch-pair circuit counts -> node pairs.

    Communicating OCS node pairs first (largest volume first, within the
    counts and the ports), then, per switch, the free OCS nodes with the
    smallest base EPS load host the remaining circuits, the busiest switch
    pairs (most bytes per circuit) choosing first.

    Parameters
    ----------
    problem : the circuit problem; counts : circuits per ``(switch, switch)`` pair.

    Returns
    -------
    sorted list of node pairs.

    Examples
    --------
    >>> from topoplan.problems.circuits import CircuitProblem
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.matrix import from_arrays
    >>> prob = CircuitProblem.build(load_topology("paper003", ["ocs.nodes_per_switch=1"]),
    ...                             from_arrays(256, [0, 64], [64, 0], [4e6, 4e6]))
    >>> decompose(prob, {(0, 1): 1})
    [(0, 16)]
    """
    p = problem
    sw = p.node_switch
    free = np.where(p.is_ocs, p.ports, 0).astype(np.int64)
    left = dict(counts)
    out: set[tuple[int, int]] = set()
    u, v, by, _ = p.node_pairs()
    keep = p.is_ocs[u] & p.is_ocs[v] & (sw[u] != sw[v])
    for i in np.flatnonzero(keep)[np.argsort(-by[keep], kind="stable")].tolist():
        a, b = int(u[i]), int(v[i])
        key = (min(sw[a], sw[b]), max(sw[a], sw[b]))
        if left.get(key, 0) > 0 and free[a] > 0 and free[b] > 0:
            out.add((a, b))
            free[a] -= 1
            free[b] -= 1
            left[key] -= 1
    W = p.switch_bytes()
    base = p.base_up_B + p.base_down_B
    ocs_of = p.ocs_of_switch()
    order = sorted((q for q in left if left[q] > 0), key=lambda q: (-(W[q] + W[q[::-1]]) / max(counts[q], 1), q))
    while any(left[q] > 0 for q in order):
        progress = False
        for q in order:
            if left[q] <= 0:
                continue
            a, b = q
            own = p.own_out()
            fa = sorted((x for x in ocs_of[a].tolist() if free[x] > 0), key=lambda x: (base[x] - own[x, b], x))
            fb = sorted((x for x in ocs_of[b].tolist() if free[x] > 0), key=lambda x: (base[x] - own[x, a], x))
            pair = next(((x1, x2) for x1 in fa for x2 in fb if (min(x1, x2), max(x1, x2)) not in out), None)
            if pair is None:
                left[q] = 0
                continue
            x1, x2 = pair
            out.add((min(x1, x2), max(x1, x2)))
            free[x1] -= 1
            free[x2] -= 1
            left[q] -= 1
            progress = True
        if not progress:
            break
    return sorted(out)


# -- the LP bound ------------------------------------------------------------------

def lp_bound(problem, *, solver: str = "highs", T_max: float | None = None, time_limit: float | None = None,
             groups: int | None = 1) -> float:
    """LP-relaxation lower bound on the objective of every plan (switch formulation): the communication-time
    bound, or with steps the step time (over ``groups`` step groups, a relaxation of more).

    Valid for any circuit set and forwarding tables; cheap enough for
    instances far beyond what the MILPs solve.

    Parameters
    ----------
    problem : the circuit problem; solver : LP back-end; T_max : upper bound on the objective (None: the
    no-circuit plan's); time_limit : seconds for building and solving the LP (None: until solved); groups :
    step groups of the model (default 1; None: all the problem has).

    Returns
    -------
    float (seconds). With a ``time_limit`` the LP does not meet, or when Ctrl-C stops it: the fixed-link floor
    (still a bound).

    Examples
    --------
    >>> from topoplan.problems.circuits import CircuitProblem
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.matrix import from_arrays
    >>> prob = CircuitProblem.build(load_topology("paper003", ["ocs.nodes_per_switch=1"]),
    ...                             from_arrays(256, [0, 64], [64, 0], [4e6, 4e6]))
    >>> lp_bound(prob) > 0
    True
    """
    t0 = time.perf_counter()
    floor = floor_s(problem)
    lat = _latency(problem)
    if T_max is None:
        T_max = _incumbent_T(problem)
    m = build_switch_model(problem, T_max=_scale(max(T_max, floor), lat), T_floor=floor - lat, relax=True,
                           groups=groups)
    left = None if time_limit is None else time_limit - (time.perf_counter() - t0)
    if left is not None and left <= 0.05:
        return floor   # building used the time: the floor is the bound we have
    r = backend_solve(m.prob, solver, time_limit=left)
    if r.status != "optimal":
        if time_limit is not None or stop_requested():   # stopped at its limit or by Ctrl-C: the floor holds
            return floor
        raise TopoplanError(f"LP relaxation failed: {r.status} ({r.message})")
    return float(max(floor, lat + m.T.value() * m.info["T_scale"]))


def _incumbent_T(problem) -> float:
    return evaluate_no_circuits(problem).objective_s


def _latency(problem) -> float:
    """The step time's fixed terms (latency, and computation on the critical path; 0 without steps): the models
    leave them out, bounds add them back."""
    return 0.0 if problem.step_loads is None else problem.step_loads.fixed_s


def _scale(objective_s: float, lat: float) -> float:
    """A model's time scale for an objective of ``objective_s`` (its fixed latency term left out)."""
    return max(objective_s - lat, 1e-12)


# -- the method, by formulation ------------------------------------------------------

@dataclass
class _Run:
    """One run of ``ilp``: its options, its clock, the best plan so far and what it reports (``info``)."""

    problem: CircuitProblem
    time_limit: float | None
    seed: int | None
    solver: str
    objective: str
    threads: int | None
    pairs: str
    deadline: float | None
    best: "_Best"
    floor: float
    T_max: float = 0.0          # the models' time scale (the incumbent's objective, latency term left out)
    info: dict = field(default_factory=dict)
    realize_s: float = 0.0      # the longest table building (_realize) measured so far
    groups: int = 1             # step groups of the model (1: the traffic as one phase)
    lat: float = 0.0            # the step time's fixed latency term (0 without steps)

    @property
    def model_floor(self) -> float:
        """The floor as the models see it (latency term left out)."""
        return max(self.floor - self.lat, 0.0)

    def fits(self, cost_s: float, share: float = 1.0, *, measured_s: float = 0.0) -> bool:
        """Whether a stage predicted to take ``cost_s`` CPU seconds (scaled to the command's share of a CPU,
        :func:`topoplan.core.deadline.scaled`), plus ``measured_s`` wall seconds (stages timed in this run),
        fits in ``share`` of the time left (no limit: yes)."""
        if self.deadline is None:
            return True
        return deadline.scaled(cost_s) + measured_s <= share * (self.deadline - time.perf_counter())

    def left(self) -> float | None:
        """Seconds left of the time limit (at least 0.05; None: no limit; 0.05 once Ctrl-C asked to stop)."""
        if stop_requested():
            return 0.05
        return None if self.deadline is None else max(0.05, self.deadline - time.perf_counter())

    @property
    def large_bytes(self) -> float:
        return float(self.problem.large_bytes.sum())


def solve_exact(problem, *, time_limit=None, seed=0, solver="auto", formulation="auto", objective="lexicographic",
                threads=None, pairs: str = "auto") -> PlanResult:
    """The ``ilp`` method: the exact model, with the papers' heuristics (and matching) as incumbents.

    Returns the best plan found -- the model's plan, or an incumbent (after a
    table local search) when the model could not beat it in time -- with the
    proven lower bound on ``T`` and the gap. Status ``optimal`` when the plan
    meets the bound (and, in lexicographic mode, the uplink-bytes bound),
    ``timeout`` when the solver ran out of time, else ``feasible``.

    ``formulation``: ``node`` (:func:`solve_node`), ``switch`` (:func:`solve_switch`, or
    :func:`solve_switch_rounding` beyond :data:`SWITCH_MAX_VARS`), ``lp`` (:func:`solve_lp`) or ``auto``
    (node up to :data:`NODE_MAX_VARS` variables, else switch).

    ``pairs`` (switch formulation): switch pairs that may get circuits --
    ``all``, ``traffic`` (pairs that exchange large traffic) or ``auto``
    (all up to 8 switches). With ``traffic`` the bound comes from the LP
    relaxation over all pairs, so it stays valid for every plan.

    Parameters
    ----------
    problem : the circuit problem; the other options are those of :func:`ilp`.

    Returns
    -------
    PlanResult

    Examples
    --------
    >>> from topoplan.problems.circuits import CircuitProblem
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.matrix import from_arrays
    >>> prob = CircuitProblem.build(load_topology("paper003", ["ocs.nodes_per_switch=1"]),
    ...                             from_arrays(256, [0, 64], [64, 0], [4e6, 4e6]))
    >>> r = solve_exact(prob, time_limit=10)
    >>> r.status, r.options["formulation"], r.objective == r.bound
    ('optimal', 'node', True)
    """
    if objective not in ("lexicographic", "weighted"):
        raise TopoplanError(f"field 'objective': 'lexicographic' or 'weighted', got {objective!r}")
    if formulation not in ("auto", "node", "switch", "lp"):
        raise TopoplanError(f"field 'formulation': auto, node, switch or lp, got {formulation!r}")
    if pairs not in ("auto", "all", "traffic"):
        raise TopoplanError(f"field 'pairs': auto, all or traffic, got {pairs!r}")
    if solver != "auto":
        check(solver, MILP_BACKENDS)   # the one-line "unknown solver" / "not available" error
    t0 = time.perf_counter()
    run = _Run(problem, time_limit, seed, solver, objective, threads, pairs,
               deadline=None if time_limit is None else t0 + time_limit, best=_Best(), floor=floor_s(problem))
    best = run.best
    incs = []
    for name, circ, nh in _incumbents(problem, seed, run):
        best.offer(problem, circ, nh, name)
        incs.append((name, circ, best.last_key))
    if formulation == "auto":
        formulation = "node" if node_size(problem) <= NODE_MAX_VARS else "switch"
    run.lat = _latency(problem)
    run.groups = _model_groups(problem, formulation, pairs)
    if solver == "auto":
        solver = run.solver = auto_solver(formulation)
    if formulation != "node":
        # the heuristics' circuits with congestion-aware tables (the papers' tables relay everything), each
        # circuit set once, the most circuits first (the heuristic's own tables do not say which set the
        # tables will serve best: on 003's IS, matching's 16 circuits relay worst with its own tables and
        # best with these), each run to convergence within what is left of TABLES_SHARE of the limit: a table
        # search cut by the clock makes the plan depend on the machine's load
        tables_end = None if time_limit is None else t0 + TABLES_SHARE * time_limit
        seen = set()
        for name, circ, _ in sorted(incs, key=lambda x: (-len(x[1]), x[2])):
            if not circ or frozenset(circ) in seen:
                continue
            seen.add(frozenset(circ))
            guard = None if tables_end is None else tables_end - time.perf_counter()
            if guard is not None and guard <= 0:
                run.info.setdefault("tables_skipped", []).append(name)
                continue
            t_r = time.perf_counter()
            _realize(problem, circ, best, name + "+tables", guard)
            # what later stages reserve for a model plan's tables, which get at most MODEL_TABLES_SHARE of the limit
            took = time.perf_counter() - t_r
            cap = took if time_limit is None else min(took, MODEL_TABLES_SHARE * time_limit)
            run.realize_s = max(run.realize_s, cap)
    run.T_max = _scale(max(best.ev.objective_s, run.floor), run.lat)
    run.info = {"formulation": formulation, "incumbent": best.name, "solver": solver, **run.info}
    if problem.step_loads is not None:
        run.info.update(objective="step time", step_groups_model=run.groups)
    if formulation == "lp":
        bound_T, proven, message = solve_lp(run)
    elif formulation == "node":
        bound_T, proven, message = solve_node(run)
    elif switch_size(problem, pairs) > SWITCH_MAX_VARS:
        bound_T, proven, message = solve_switch_rounding(run)
    else:
        bound_T, proven, message = solve_switch(run)
    info = run.info
    status = "optimal" if proven else "feasible"
    if not proven:
        # local search on the tables of the best plan with the time left (never worse)
        circ, nh = best.plan
        best.offer(problem, circ, polish_tables(problem, circ, nh, time_limit=run.left()), best.name + "+polish")
        if "timeout" in info.get("solver_status", []):
            status = "timeout"
    info["plan_from"] = best.name
    info["wall_model_s"] = time.perf_counter() - t0
    circ, nh = best.plan
    lb = float(min(bound_T, best.ev.objective_s))
    exact_tables = formulation == "node" and best.name == "milp"
    res = result_from_plan(problem, circ, nh, status=status, bound=lb,
                           load_sharing=("exact: the model's own next hops (one per node and destination switch)"
                                         if exact_tables else LOAD_SHARING + " Then a local search on the bound."),
                           message=message, options=info)
    res.metrics["lower_bound_s"] = lb
    # the first objective is proven optimal when the plan meets the bound, whatever the uplink bytes
    res.metrics["bound_proven_optimal"] = bool(best.ev.objective_s <= bound_T * (1 + REL_TOL))
    note = uplink_note(problem, objective, res.metrics["bound_proven_optimal"], best.ev.uplink_bytes,
                       info.get("uplink_bound_bytes"))
    if note:
        res.add_note(note)
    return res


def uplink_note(problem, objective: str, first_proven: bool, uplink_B: float, uplink_lb_B: float | None) -> str:
    """What a plan's status leaves unsaid: ``optimal`` (which :func:`topoplan.problems.result.solve_with` gives a
    plan that meets its bound) is the first objective's; under the lexicographic objective, a plan whose uplink
    bytes are above their proven lower bound says so. Empty otherwise.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> bulk = SimpleNamespace(objective_name="communication-time bound")
    >>> uplink_note(bulk, "lexicographic", True, 8e6, 0.0)
    'optimal in its communication-time bound; its uplink bytes (8,000 KB) are above their lower bound (0 B), which no plan may reach'
    >>> uplink_note(bulk, "lexicographic", True, 0.0, 0.0), uplink_note(bulk, "weighted", True, 8e6, 0.0)
    ('', '')
    >>> uplink_note(bulk, "lexicographic", False, 8e6, 0.0), uplink_note(bulk, "lexicographic", True, 8e6, None)
    ('', '')
    """
    if objective != "lexicographic" or not first_proven or uplink_lb_B is None:
        return ""
    if uplink_B <= uplink_lb_B * (1 + REL_TOL) + 1.0:
        return ""
    return (f"optimal in its {problem.objective_name}; its uplink bytes ({format_bytes(uplink_B)}) are above their lower bound "
            f"({format_bytes(uplink_lb_B)}), which no plan may reach")


def solve_lp(run: _Run) -> tuple[float, bool, str]:
    """``formulation='lp'``: the LP-relaxation bound only; the plan is the best incumbent's.

    Called by :func:`solve_exact` (``formulation='lp'``).

    Parameters
    ----------
    run : the run state of :func:`solve_exact` (problem, options, clock, best plan so far).

    Returns
    -------
    ``(bound_T_s, proven, message)``.

    Examples
    --------
    >>> from topoplan.problems.circuits import CircuitProblem
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.matrix import from_arrays
    >>> prob = CircuitProblem.build(load_topology("paper003", ["ocs.nodes_per_switch=1"]),
    ...                             from_arrays(256, [0, 64], [64, 0], [4e6, 4e6]))
    >>> r = solve_exact(prob, formulation="lp", time_limit=10)
    >>> r.status, r.options["formulation"]
    ('feasible', 'lp')
    """
    bound_T = max(run.floor, lp_bound(run.problem, solver=_lp_solver(run.solver), T_max=run.T_max + run.lat,
                                      groups=run.groups, time_limit=None if run.deadline is None else run.left()))
    return bound_T, False, "LP-relaxation bound only; the plan is the best heuristic's after table local search"


def _not_built(formulation: str, variables: int, build_cpu_s: float) -> str:
    """The message of a model whose predicted build (``build_cpu_s`` CPU seconds, at the command's share of a CPU)
    does not fit the time left.

    Examples
    --------
    >>> _not_built("node", 12000, 2.0).split(":")[0]
    'the node model (12,000 variables, ~2.0 s to build) does not fit the time left'
    """
    return (f"the {formulation} model ({variables:,} variables, ~{deadline.scaled(build_cpu_s):.1f} s to build) does "
            "not fit the time left: the best heuristic plan, with the fixed-link floor as bound")


def solve_node(run: _Run) -> tuple[float, bool, str]:
    """The node formulation: its plan keeps the model's own next hops; proven when both objectives are.

    Called by :func:`solve_exact` (``formulation='node'``).

    Parameters
    ----------
    run : the run state of :func:`solve_exact` (problem, options, clock, best plan so far).

    Returns
    -------
    ``(bound_T_s, proven, message)``.

    Examples
    --------
    >>> from topoplan.problems.circuits import CircuitProblem
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.matrix import from_arrays
    >>> prob = CircuitProblem.build(load_topology("paper003", ["ocs.nodes_per_switch=1"]),
    ...                             from_arrays(256, [0, 64], [64, 0], [4e6, 4e6]))
    >>> r = solve_exact(prob, formulation="node", time_limit=10)
    >>> r.status, r.options["formulation"], r.objective == r.bound
    ('optimal', 'node', True)
    """
    problem, info = run.problem, run.info
    # the build is predicted before it starts (it cannot be stopped): it must fit 80% of the time left
    build_s = node_size(problem, run.groups) / NODE_BUILD_VARS_PER_S
    if not run.fits(build_s, 0.8):
        info["variables"] = node_size(problem, run.groups)
        return run.floor, False, _not_built("node", info["variables"], build_s)
    m = build_node_model(problem, T_max=run.T_max, T_floor=run.model_floor, groups=run.groups)
    info["variables"] = m.n_variables
    r1, r2, b, _ = two_phase(m, solver=run.solver, time_limit=run.left(), seed=run.seed, threads=run.threads,
                             objective=run.objective, large_bytes=run.large_bytes)
    info["solver_status"] = [r1.status] + ([r2.status] if r2 is not None and r2 is not r1 else [])
    bound_T = run.floor if b is None else max(run.floor, b + run.lat)
    if r2 is not None and r2.has_solution:
        circ, nh, carried = extract_node_plan(problem, m, with_carried=True)
        run.best.offer(problem, circ, _fill_tables(problem, circ, nh, carried), "milp")
    proven = r1.status == "optimal" and (run.objective == "weighted" or (r2 is not None and r2.status == "optimal"))
    # with merged step groups the model is a relaxation: its plan is optimal only where it meets the bound
    proven = proven and (problem.step_loads is None or run.groups >= problem.step_loads.n_groups
                         or run.best.ev.objective_s <= bound_T * (1 + REL_TOL))
    return bound_T, proven, ""


def solve_switch_rounding(run: _Run) -> tuple[float, bool, str]:
    """The switch formulation too large for the MILP in time: circuit counts from the LP relaxation of the
    single-circuit model (rounded within the ports), then congestion-aware tables and local search.

    Called by :func:`solve_exact` (``formulation='switch'`` beyond :data:`SWITCH_MAX_VARS`).

    Parameters
    ----------
    run : the run state of :func:`solve_exact` (problem, options, clock, best plan so far).

    Returns
    -------
    ``(bound_T_s, proven, message)``.

    Examples
    --------
    >>> from topoplan.problems.circuits import CircuitProblem
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.matrix import from_arrays
    >>> prob = CircuitProblem.build(load_topology("paper003", ["ocs.nodes_per_switch=1"]),
    ...                             from_arrays(256, [0, 64], [64, 0], [4e6, 4e6]))
    >>> import topoplan.problems.circuits.exact as ex
    >>> saved, ex.SWITCH_MAX_VARS = ex.SWITCH_MAX_VARS, 0     # pretend the instance is large
    >>> try:
    ...     r = solve_exact(prob, formulation="switch", time_limit=10)
    ... finally:
    ...     ex.SWITCH_MAX_VARS = saved
    >>> r.status, r.options["formulation"]
    ('feasible', 'switch-lp-rounding')
    """
    problem, info, best = run.problem, run.info, run.best
    info["formulation"] = "switch-lp-rounding"
    build_s = switch_size(problem, "traffic", run.groups) / BUILD_VARS_PER_S   # an upper estimate (hop limit 1 is smaller)
    if not run.fits(build_s, 0.8, measured_s=run.realize_s):
        return run.floor, False, (f"the LP relaxation (~{deadline.scaled(build_s):.1f} s to build) does not fit the "
                                  "time left: the best heuristic plan, with the fixed-link floor as bound")
    one = _hop_limit_one(circuit_data(problem, run.groups))
    m, decode = circuits_switch.build(one, T_max=run.T_max, T_floor=run.model_floor,
                                      pairs=circuits_switch.candidate_pairs(one, "traffic"), slots=False, relax=True)
    info["variables"] = m.n_variables
    lp_solver = _lp_solver(run.solver)
    r = backend_solve(m.prob, lp_solver, time_limit=None if run.deadline is None else 0.3 * run.left())
    info["solver_status"] = [r.status]
    # the LP optimum of T is the bound (hop limit 1), taken from this first solve: the second one below
    # optimizes the uplink bytes and its T is not a minimum
    T_lp = m.T.value() if r.status == "optimal" else None
    if r.has_solution and run.objective == "lexicographic":  # then fewest uplink bytes: circuits where traffic is
        T1, ub, obj_T = m.T.value(), m.T.upBound, m.prob.objective
        m.T.upBound = T1 * (1 + 1e-6)
        m.prob.setObjective(m.uplink)
        r2 = backend_solve(m.prob, lp_solver, time_limit=None if run.deadline is None else 0.3 * run.left())
        info["solver_status"].append(r2.status)
        m.T.upBound = ub
        if not r2.has_solution:  # back to the first objective, so the counts decoded are the T-optimal ones
            m.prob.setObjective(obj_T)
            r = backend_solve(m.prob, lp_solver)
    bound_T = run.floor
    if r.has_solution:
        circ = decompose(problem, circuits_switch.round_counts(one, decode()))
        _realize(problem, circ, best, "lp-rounding", None if run.deadline is None else 0.8 * run.left())
    if problem.hop_limit == 1 and T_lp is not None:
        bound_T = max(bound_T, run.lat + T_lp * m.info["T_scale"])
    message = ("large instance: circuits from the rounded LP relaxation; bound = "
               + ("its LP value" if problem.hop_limit == 1 else "the fixed-link floor (lp_bound() gives the LP bound)"))
    return bound_T, False, message


def solve_switch(run: _Run) -> tuple[float, bool, str]:
    """The switch formulation: its circuit counts become node pairs with congestion-aware tables (and the
    model's fall-backs); proven when the plan meets the model's bound (and the uplink bound).

    Called by :func:`solve_exact` (``formulation='switch'``).

    Parameters
    ----------
    run : the run state of :func:`solve_exact` (problem, options, clock, best plan so far).

    Returns
    -------
    ``(bound_T_s, proven, message)``.

    Examples
    --------
    >>> from topoplan.problems.circuits import CircuitProblem
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.matrix import from_arrays
    >>> prob = CircuitProblem.build(load_topology("paper003", ["ocs.nodes_per_switch=1"]),
    ...                             from_arrays(256, [0, 64], [64, 0], [4e6, 4e6]))
    >>> r = solve_exact(prob, formulation="switch", time_limit=10)
    >>> r.options["formulation"], r.options["pairs"]
    ('switch', 'all')
    """
    problem, info, best = run.problem, run.info, run.best
    bound_T = run.floor
    S = problem.n_switches
    mode = run.pairs if run.pairs != "auto" else ("all" if S <= 8 else "traffic")
    info["pairs"] = mode
    # every stage is predicted before it starts (it cannot be stopped once building): the MILP's build plus
    # two table buildings must fit 80% of the time left, and with the LP bound's build added, half of it
    milp_build_s = switch_size(problem, mode, run.groups) / BUILD_VARS_PER_S
    if not run.fits(milp_build_s, 0.8, measured_s=2 * run.realize_s):
        info["variables"] = switch_size(problem, mode, run.groups)
        return bound_T, False, _not_built("switch", info["variables"], milp_build_s)
    if mode == "traffic":  # the restricted model's optimum is no bound for every plan: take the full LP's
        if run.fits(switch_size(problem, "all", run.groups) / BUILD_VARS_PER_S + milp_build_s, 0.5,
                    measured_s=2 * run.realize_s):
            lp_left = None if run.deadline is None else 0.3 * run.left()
            bound_T = max(bound_T, lp_bound(problem, solver=_lp_solver(run.solver), T_max=run.T_max + run.lat,
                                            time_limit=lp_left, groups=run.groups))
        else:
            info["lp_bound"] = "skipped: its model would not fit the time left"
    data = circuit_data(problem, run.groups)
    t_build = time.perf_counter()
    m, decode = circuits_switch.build(data, T_max=run.T_max, T_floor=run.model_floor,
                                      pairs=circuits_switch.candidate_pairs(data, mode))
    info["variables"] = m.n_variables
    # the solver is handed the model (written for it) on every solve, as it was built: measured, not predicted
    handover_s = HANDOVER_PER_BUILD * (time.perf_counter() - t_build)
    info["wall_build_s"] = round(time.perf_counter() - t_build, 3)
    if not run.fits(0.0, 0.8, measured_s=handover_s + 2 * run.realize_s + MIN_SOLVE_S):
        return bound_T, False, (f"the switch model ({m.n_variables:,} variables) took {info['wall_build_s']:.1f} s to "
                                f"build; handing it to the solver (~{handover_s:.1f} s) and solving do not fit the "
                                "time left: the best heuristic plan")
    polish_s = None if run.time_limit is None else MODEL_TABLES_SHARE * run.time_limit

    def realize(model, tag):
        sol = decode()
        circ = decompose(problem, circuits_switch.integral_counts(sol))
        budget = None if polish_s is None else min(polish_s, run.left() / 4)
        fallback_B = {key: q * model.info["byte_scale"] for key, q in sol.fallback.items()}
        _realize(problem, circ, best, tag, budget, fallback_sources(problem, fallback_B, circ))

    # the solve leaves room for decoding and two table buildings (measured on the incumbents)
    solve_left = None if run.deadline is None else max(0.1, 0.8 * run.left() - 2 * run.realize_s)
    r1, r2, b, uplink_lb = two_phase(m, solver=run.solver, time_limit=solve_left, seed=run.seed, threads=run.threads,
                                     objective=run.objective, large_bytes=run.large_bytes,
                                     after_first=lambda mm: realize(mm, "milp"), handover_s=handover_s)
    info["solver_status"] = [r1.status] + ([r2.status] if r2 is not None and r2 is not r1 else [])
    if b is not None and mode == "all":
        bound_T = max(bound_T, b + run.lat)
    if r2 is not None and r2 is not r1 and r2.has_solution:
        realize(m, "milp")
    met_u = run.objective == "weighted" or (mode == "all" and uplink_lb is not None
                                            and best.ev.uplink_bytes <= uplink_lb * (1 + REL_TOL) + 1.0)
    proven = met_u and best.ev.objective_s <= bound_T * (1 + REL_TOL)
    info["uplink_bound_bytes"] = uplink_lb
    return bound_T, proven, ""


# -- incumbents and tables -------------------------------------------------------------

class _Best:
    """The best plan so far (lexicographic: bound, then uplink bytes)."""

    def __init__(self):
        self.ev = self.plan = self.name = self.last_key = None

    def offer(self, problem, circ, nh, name):
        ev = evaluate(problem, circ, nh)
        self.last_key = (ev.objective_s, ev.uplink_bytes)
        if better(ev, self.ev):
            self.ev, self.plan, self.name = ev, (list(circ), nh), name
            report(stage=f"ilp: incumbent from {name}", incumbent=ev.objective_s)


def _incumbents(problem, seed, run=None):
    """The heuristics' plans: three-step, greedy, sp, EPS only (the cheapest valid plan: always), and matching
    (up to 256 OCS nodes, and only when its predicted time, :func:`matching_cost_s`, fits in a quarter of the
    time left). Each gets what is left of the time limit (it then stops assigning circuits); one that would
    start past the limit is not run (``run.info["incumbents_skipped"]``)."""
    fns = [("three-step", heuristics.three_step), ("greedy", heuristics.greedy),
           ("sp", heuristics.switch_partitioning), ("none", heuristics.eps_only)]
    n_ocs = int(problem.is_ocs.sum())
    if n_ocs <= 256:
        fns.append(("matching", heuristics.matching))
    for name, fn in fns:
        if name == "matching" and run is not None and not run.fits(matching_cost_s(n_ocs), 0.25):
            run.info["matching"] = f"skipped: predicted {deadline.scaled(matching_cost_s(n_ocs)):.1f} s"
            continue
        if name != "none" and run is not None and run.deadline is not None and not run.fits(0.0):
            run.info.setdefault("incumbents_skipped", []).append(name)
            continue
        r = fn(problem, seed=seed, time_limit=None if run is None or run.deadline is None else run.left())
        if run is not None and name != "none" and r.message and not r.plan["circuits"]:   # cut: the EPS plan
            run.info.setdefault("incumbents_skipped", []).append(name)
            continue
        yield name, [tuple(c) for c in r.plan["circuits"]], array_from_tables(r.plan["forwarding"], problem.n_nodes,
                                                                            problem.n_switches)


def auto_solver(formulation: str) -> str:
    """The MILP back-end ``solver="auto"`` picks, by measurement (``benchmarks/bench_circuits.py --solvers``,
    docs/circuits.md, "Exact planning"): HiGHS for the exact node formulation (it proves in 1.4-9 s the 6-OCS-node
    cases CBC leaves at a 9.7-41.7% gap after 20 s), CBC for the switch formulation (on IS traffic HiGHS
    more often returns an equally optimal switch-level solution that becomes a worse plan). Falls back to
    whichever of the two is installed.

    Parameters
    ----------
    formulation : str
        ``node``, ``switch`` or ``lp``.

    Returns
    -------
    str

    Examples
    --------
    >>> auto_solver("node"), auto_solver("switch")
    ('highs', 'cbc')
    """
    want, other = ("highs", "cbc") if formulation == "node" else ("cbc", "highs")
    if available(want):
        return want
    check(other, MILP_BACKENDS)
    return other


def _hop_limit_one(data: CircuitData) -> CircuitData:
    """The data with hop limit 1, its step groups' too."""
    steps = tuple(dataclasses.replace(d, hop_limit=1) for d in data.steps)
    return dataclasses.replace(data, hop_limit=1, steps=steps)


def _model_groups(problem, formulation: str, pairs: str) -> int:
    """Step groups the model gets: as many as the problem has, at most
    :data:`~topoplan.problems.circuits.steps.MIN_STEP_TYPES` (the problem may keep more to score plans by),
    halved until the model fits its size budget (:data:`NODE_STEP_VARS` for the node formulation,
    :data:`SWITCH_MAX_VARS` for the switch one); 1 without steps."""
    sl = problem.step_loads
    if sl is None or sl.n_groups <= 1:
        return 1
    g = min(sl.n_groups, MIN_STEP_TYPES)
    while g > 1:
        size = node_size(problem, g) if formulation == "node" else switch_size(problem, pairs, g)
        if size <= (NODE_STEP_VARS if formulation == "node" else SWITCH_MAX_VARS):
            return g
        g //= 2
    return 1


def _lp_solver(solver: str) -> str:
    """LPs go to HiGHS when the MILP solver is CBC (faster on large LPs); otherwise the same solver."""
    return "highs" if solver == "cbc" and available("highs") else solver


def _realize(problem, circ, best, tag, polish_s, fallback=None):
    """Tables for a circuit set -- least-congested routing, and the model's fall-backs on distance-vector
    tables when given -- each improved by the table local search; the best is offered to ``best``.
    ``polish_s`` bounds the whole (None: no bound): each step gets what is left of it, and tables the
    clock leaves no time to improve are offered as they are."""
    end = None if polish_s is None else time.perf_counter() + polish_s

    def left():
        return None if end is None else max(end - time.perf_counter(), 0.0)

    cands = [congestion_tables(problem, circ, time_limit=left())]
    if fallback is not None:
        cands.append(distance_vector(problem, circ, fallback=fallback))
    for nh in cands:
        rest = left()
        best.offer(problem, circ, nh if rest == 0.0 else polish_tables(problem, circ, nh, time_limit=rest), tag)


def _fill_tables(problem, circuits, nh, carried):
    """Give nodes that carry no planned traffic the distance-vector entries (kept for completeness).

    Nodes that carry traffic keep the model's choice, including an empty
    entry (fall back). A filled entry is dropped if it would loop or cross
    more circuits than the hop limit.
    """
    dv = distance_vector(problem, circuits)
    out = nh.copy()
    fill = (out < 0) & (dv >= 0) & ~carried
    out[fill] = dv[fill]
    H = problem.hop_limit
    net = problem.network()
    links = net.circuit_links(circuits)
    rows, cols = np.nonzero(fill)
    # The filled entries are checked in order, each on the tables as the earlier checks left them: the
    # tables change only where an entry is dropped, so walk all entries not checked yet at once, drop the
    # first wrong one (loop, non-neighbour, too many circuits) and walk the rest again.
    i = 0
    while i < len(rows):
        w = net.relay_hops(rows[i:], cols[i:], out, links, errors="flag")
        wrong = w.bad | (w.n_circuits > H if H is not None else False)
        if not wrong.any():
            break
        j = i + int(np.flatnonzero(wrong)[0])
        out[rows[j], cols[j]] = -1
        i = j + 1
    return out
