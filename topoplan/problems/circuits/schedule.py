"""Circuit schedules: a circuit configuration per application phase.

A **schedule** is a list of entries, each a circuit configuration (circuits and forwarding tables)
that holds from one phase (:mod:`topoplan.traffic.phases`) on until the next entry; a static plan is
a one-entry schedule. The plan document::

    {"schedule": [{"from_phase": 0, "to_phase": 3, "from_s": 0.0, "circuits": [[a, b], ...],
                   "forwarding": {node: {switch: next_hop}}, "load_sharing": ..., "setup": null},
                  {"from_phase": 3, ..., "setup": {"changed_circuits": 6, "during": "wait"}}, ...],
     "n_phases": 5, "setup_s": 0.01, "blackout": "eps", "threshold_B": ..., "hop_limit": ...,
     "rank_to_node": [...]}

**Reconfiguration model.** An OCS sets up new circuits in ``ocs.setup_s`` (10 ms by default); all
changed ports are set up in parallel, so one change costs one set-up whatever the number of ports.
While it runs, the ports that change carry nothing; the circuits both configurations share keep
working. The first configuration is set up before the run, as a static plan's is. Two blackout
models (``blackout=``):

``eps`` (default)
    at a change, the next phase either *waits* for the new circuits (``setup_s`` of idle time, then
    the phase on the new configuration) or runs at once on the *surviving* circuits (those the two
    configurations share, with forwarding tables recomputed for them: every large message that
    would have used a changed port takes the EPS path) and the new circuits are used from the
    following phase on (if that phase ends before the set-up does, the rest of the set-up is idle
    time). The scheduler picks the faster of the two per change, and the plan records the choice
    (``setup.during`` = ``wait`` or ``surviving``); the simulator replays what the plan says.
    Moving traffic onto new circuits in the middle of a phase is not modelled: it could only help.
``stall``
    every change stalls the whole application for ``setup_s`` (the conservative reading).

Forwarding tables are software (the MPI library's relay tables): changing them costs nothing, so
every phase may use the tables of its configuration or tables recomputed for its own traffic
(:func:`~topoplan.problems.circuits.forwarding.distance_vector`) when those lower its bound by more
than :data:`RETABLE_GAIN` (1%).

**Phase times.** ``score='bound'`` (default) prices a phase under a configuration by the circuit
problem's communication-time bound (:func:`~topoplan.problems.circuits.bound.evaluate`) of the
phase's traffic; ``score='simulated'`` by simulating the phase's calls alone
(:func:`topoplan.sim.run.simulate_plan` on :meth:`~topoplan.traffic.phases.Phases.subtrace`). A schedule's
objective is the sum of its phase times plus its set-up time: phases run one after another, as if
separated by barriers.

**Schedulers** (:data:`SCHEDULERS`, run by :func:`schedule`):

``static``
    today's best single configuration: a circuit method (``circuit_method``, default ``ilp``) on
    the whole trace's traffic, for every phase; or (``pick``) the best of the candidates below used
    as one configuration for the whole run, by bound or by simulation.
``per-phase``
    greedy in time: every phase's best configuration (the circuit method on the phase's traffic,
    or any other candidate that serves the phase better), switched to only where that phase gains
    more than the change costs.
``exact``
    dynamic programming over phases x candidate configurations (every phase class's best
    configuration, the static one, the papers' heuristics on the whole trace and EPS only),
    minimizing the sum of phase times plus reconfiguration costs. **It is exact over its
    candidates, not over all circuit sets.** Its ``bound`` is the zero-set-up lower bound: every
    phase at a time no configuration can beat (the circuit ``ilp``'s proven lower bound for that
    phase's traffic, or the bound of the links no circuit can relieve), with no set-up; ``gap`` is
    measured against it. ``metrics.zero_setup_s``
    is the sum of every phase's best candidate time, no set-up. With ``score='simulated'`` the
    programme's schedule is then replayed as a whole (:func:`topoplan.sim.schedule.simulate_schedule`) and
    compared with the ``per-phase`` schedule and the best single configuration over the same
    candidates, each replayed as a whole; the fastest is returned (``metrics.picked``,
    ``simulated_s``, ``simulated_candidates_s``), so the schedule never simulates slower than the
    heuristic schedules it could have been. The programme sums phases simulated one at a time, the
    replay runs a configuration's phases in one piece, and the two can disagree.
``zero-setup``
    the reference, not a realizable schedule: every phase at its best candidate, set-up free
    (``setup_s: 0`` in the plan); no schedule over the candidates does better.
``solstice`` (and ``bvn``)
    circuits that change *inside* a phase: ``exact``'s programme with one more choice for every
    phase whose switch demand is all-to-all-like
    (:func:`~topoplan.problems.circuits.decompose.all_to_all_like`): its decomposition into a
    sequence of configurations with durations (:func:`~topoplan.problems.circuits.decompose.solstice`;
    ``bvn``: :func:`~topoplan.problems.circuits.decompose.bvn`), realized on OCS nodes by
    :func:`decomposed_option` and priced like a phase (its sub-phases, one per slot, plus the
    set-ups between slots). The programme takes the decomposition only where it is faster, set-ups
    in and out included; the other phases keep the exact scheduler's choice. A decomposed phase
    is one plan entry with ``slots`` (each a circuit plan with hop limit 1, ``duration_s``,
    ``bytes_B``: what it carries per directed switch pair), entered with a ``wait`` set-up;
    :mod:`topoplan.sim.schedule` replays it one sub-phase per slot. With ``score='simulated'`` it is checked
    against the ``per-phase`` schedule and the best single configuration as ``exact`` is.

Examples
--------
>>> from topoplan.core.topology_io import load_topology
>>> from topoplan.traffic.generators import halo_then_transpose
>>> topo = load_topology("paper003", ["ocs.nodes_per_switch=4"])
>>> prob = PhasedProblem.build(topo, halo_then_transpose(16, 16, 4e6, iters=5))
>>> len(prob.phases), prob.setup_s
(2, 0.01)
>>> static, best = (schedule(prob, m, circuit_method="greedy") for m in ("static", "exact"))
>>> [e["from_phase"] for e in best.plan["schedule"]], best.metrics["reconfigurations"]
([0, 1], 1)
>>> round(static.objective * 1e3), round(best.objective * 1e3), round(best.metrics["zero_setup_s"] * 1e3)
(336, 298, 288)
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field

import numpy as np

from topoplan.core.errors import TopoplanError
from topoplan.core.placement import Placement, from_nodes, sequential
from topoplan.core.topology import TreeTopology
from topoplan.plans.circuits import array_from_tables, tables_from_array
from topoplan.plans.schedule import BLACKOUTS, slot_fractions, validate_schedule
from topoplan.problems.circuits.bound import evaluate, floor_s
from topoplan.problems.circuits.decompose import DECOMPOSITIONS, all_to_all_like, chunk_traffic, inputs_of, slot_bytes
from topoplan.problems.circuits.exact import decompose as node_pairs_of
from topoplan.problems.circuits.forwarding import distance_vector
from topoplan.problems.circuits.problem import CircuitProblem, solve
from topoplan.problems.result import PlanResult, Registry, gap_of, solve_with
from topoplan.sim.run import simulate_plan
from topoplan.sim.schedule import simulate_schedule, simulate_segment, simulate_slots
from topoplan.sim.simmodel import SimModel
from topoplan.sim.steps import trace_steps
from topoplan.traffic.matrix import from_arrays, from_trace
from topoplan.traffic.phases import Phases, detect_phases
from topoplan.traffic.trace import Trace

__all__ = ["SCHEDULERS", "BLACKOUTS", "SCORES", "RETABLE_GAIN", "PhasedProblem", "Config", "schedule",
           "schedule_entries", "Decomposed", "decomposed_option",
           "DECOMPOSE_HOP_LIMIT"]

SCHEDULERS = Registry("schedule")
SCORES = ("bound", "simulated")
# Forwarding tables recomputed for a phase replace the configuration's own only when they lower the
# phase's bound by more than this share: every table change splits the replay into segments separated
# as if by barriers (topoplan.sim.schedule), which costs more than a gain below 1% of a phase's bound.
RETABLE_GAIN = 0.01


@dataclass
class Config:
    """One circuit configuration: circuits (sorted node pairs) and forwarding tables as a next-hop array.

    Parameters
    ----------
    circuits : tuple of tuple of int
        Sorted ``(u, v)`` pairs, ``u < v``.
    next_hop : numpy.ndarray
        ``next_hop[node, switch]``, -1 for no entry.
    source : str
        Where it came from (``static``, ``kind 2``, ``none``, ...).
    load_sharing : str, optional
    retable : bool, optional
        Whether a phase may use forwarding tables recomputed for its own traffic (False: the
        configuration's own tables throughout, as a static plan has).

    Examples
    --------
    >>> c = Config.of([(16, 0), (32, 48)], np.full((64, 4), -1), "demo")
    >>> c.circuits, c.key() == Config.of([(0, 16), (48, 32)], np.full((64, 4), -1), "x").key()
    (((0, 16), (32, 48)), True)
    """

    circuits: tuple
    next_hop: np.ndarray = field(repr=False)
    source: str = ""
    load_sharing: str = "least-loaded"
    retable: bool = True

    @classmethod
    def of(cls, circuits, next_hop, source: str = "", load_sharing: str | None = None) -> "Config":
        """A configuration from any circuit pairs (normalized)."""
        circ = tuple(sorted((int(min(a, b)), int(max(a, b))) for a, b in circuits))
        return cls(circ, np.asarray(next_hop, dtype=np.int64), source, load_sharing or "least-loaded")

    def key(self) -> tuple:
        """The circuit set (what a reconfiguration changes)."""
        return self.circuits


def _traffic_key(tr) -> str:
    h = hashlib.sha1()
    for a in (tr.src, tr.dst, tr.msg_bytes, tr.count):
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


@dataclass
class PhasedProblem:
    """Inputs of circuit scheduling: a hybrid topology, the phases of a trace, and the set-up model.

    Build one with :meth:`build`. Phases with identical traffic form a *class* (priced once);
    phases of one *kind* (similar pairs, :func:`~topoplan.traffic.phases.detect_phases`) share a
    candidate configuration when there are many classes.

    Parameters
    ----------
    topology : TreeTopology
    placement : Placement
    phases : Phases
    threshold_B : float
    setup_s : float
    blackout : str
        ``eps`` or ``stall`` (see the module docstring).
    score : str
        ``bound`` or ``simulated``.
    sim_model : SimModel or dict or None
    hop_limit, max_circuits : int or None
    total : CircuitProblem
        The whole trace's circuit problem.
    phase_class : list of int
        Class of every phase.
    class_problems : list of CircuitProblem
        One per class (its first phase's traffic).
    class_phase : list of int
        The first phase of every class.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.generators import ring
    >>> p = PhasedProblem.build(load_topology("paper003"), ring(256, 4e6, iters=3))
    >>> len(p.phases), p.phase_class, p.blackout, p.score
    (1, [0], 'eps', 'bound')
    """

    topology: object
    placement: object
    phases: object
    threshold_B: float
    setup_s: float
    blackout: str
    score: str
    sim_model: object
    hop_limit: int | None
    max_circuits: int | None
    total: object
    phase_class: list
    class_problems: list
    class_phase: list
    _cache: dict = field(default_factory=dict, repr=False)

    @classmethod
    def build(cls, topology, phases, placement=None, *, setup_s: float | None = None, blackout: str = "eps",
              score: str = "bound", sim_model=None, threshold_B: float | None = None, hop_limit: int | None = None,
              max_circuits: int | None = None, phase_options: dict | None = None,
              steps: bool = False, steps_time_limit: float | None = None) -> "PhasedProblem":
        """The scheduling problem of ``phases`` (a :class:`~topoplan.traffic.phases.Phases`, or a trace to split).

        Parameters
        ----------
        topology : TreeTopology
            Hybrid (with an ``ocs`` section).
        phases : Phases or Trace
            A trace is split with :func:`~topoplan.traffic.phases.detect_phases` (``phase_options``).
        placement : Placement or array_like of int, optional
            Default sequential.
        setup_s : float, optional
            Default the topology's ``ocs.setup``.
        blackout : {"eps", "stall"}, optional
        score : {"bound", "simulated"}, optional
        sim_model : SimModel or dict, optional
            For ``score='simulated'``.
        threshold_B, hop_limit, max_circuits : optional
            As for :meth:`~topoplan.problems.circuits.problem.CircuitProblem.build`.
        phase_options : dict, optional
            Options of :func:`~topoplan.traffic.phases.detect_phases`.
        steps : bool, optional
            Price each phase class's candidates by the step time of its phase (the steps of the class's
            first phase, :func:`topoplan.sim.steps.trace_steps`, without the computation every candidate
            shares) instead of its one-bulk-phase bound.
        steps_time_limit : float, optional
            Seconds the step clocks of all phase classes may take together (default: no limit).

        Returns
        -------
        PhasedProblem

        Raises
        ------
        TopoplanError
            For a topology without OCS, a bad option (naming its field), or phases of another trace size.
        topoplan.sim.steps.StepClockLimit
            When the phases' steps are not found within ``steps_time_limit``.

        Examples
        --------
        >>> from topoplan.core.topology_io import load_topology
        >>> from topoplan.traffic.generators import ring
        >>> PhasedProblem.build(load_topology("paper003"), ring(8, 1e6), blackout="wait")
        Traceback (most recent call last):
        ...
        topoplan.core.errors.TopoplanError: field 'blackout': choose one of eps, stall, got 'wait'
        """
        if not isinstance(topology, TreeTopology) or topology.ocs is None:
            raise TopoplanError(f"topology {getattr(topology, 'name', '') or getattr(topology, 'kind', '?')}: circuit "
                                "schedules need a hybrid topology (kind: hybrid with an 'ocs' section)")
        if blackout not in BLACKOUTS:
            raise TopoplanError(f"field 'blackout': choose one of {', '.join(BLACKOUTS)}, got {blackout!r}")
        if score not in SCORES:
            raise TopoplanError(f"field 'score': choose one of {', '.join(SCORES)}, got {score!r}")
        setup = float(topology.ocs.setup_s) if setup_s is None else float(setup_s)
        if not 0 <= setup < float("inf"):
            raise TopoplanError(f"field 'setup_s': must be a non-negative time, got {setup_s}")
        if isinstance(phases, Trace):
            trace = phases
            n = trace.n_ranks
            if placement is None:
                placement = sequential(n, topology)
            elif not isinstance(placement, Placement):
                placement = from_nodes(placement, topology)
            phases = detect_phases(trace, topology, placement, **(phase_options or {}))
        elif not isinstance(phases, Phases):
            raise TopoplanError(f"field 'phases': expected Phases or a Trace, got {type(phases).__name__}")
        n = phases.trace.n_ranks
        if placement is None:
            placement = sequential(n, topology)
        elif not isinstance(placement, Placement):
            placement = from_nodes(placement, topology)
        opts = dict(threshold_B=threshold_B, hop_limit=hop_limit, max_circuits=max_circuits)
        total = CircuitProblem.build(topology, from_trace(phases.trace), placement, **opts)
        thr = total.threshold_B
        opts["threshold_B"] = thr
        keys: dict = {}
        phase_class, class_problems, class_phase = [], [], []
        stop_at = None if steps_time_limit is None else time.monotonic() + float(steps_time_limit)
        for p in phases:
            k = _traffic_key(p.traffic)
            if k not in keys:
                keys[k] = len(class_problems)
                left = None if stop_at is None else stop_at - time.monotonic()
                # without the computation: the class's first phase stands for phases that compute for other
                # times, and a term every candidate shares would only dilute the schedule's relative gap
                st = trace_steps(phases.subtrace(p.index), time_limit=left, computation=False) if steps else None
                class_problems.append(CircuitProblem.build(topology, p.traffic, placement, steps=st, **opts))
                class_phase.append(p.index)
            phase_class.append(keys[k])
        return cls(topology=topology, placement=total.placement, phases=phases, threshold_B=thr, setup_s=setup,
                   blackout=blackout, score=score, sim_model=sim_model, hop_limit=hop_limit,
                   max_circuits=max_circuits, total=total, phase_class=phase_class, class_problems=class_problems,
                   class_phase=class_phase)

    def fingerprint(self) -> dict:
        """Fingerprints of the topology, whole traffic and placement (as circuit plans record them)."""
        return self.total.fingerprint()

    # -- pricing ----------------------------------------------------------
    def _dv(self, c: int, circuits: tuple) -> np.ndarray:
        key = ("dv", c, circuits)
        if key not in self._cache:
            self._cache[key] = distance_vector(self.class_problems[c], list(circuits))
        return self._cache[key]

    def _bound(self, c: int, circuits: tuple, next_hop: np.ndarray) -> float:
        return float(evaluate(self.class_problems[c], list(circuits), next_hop).objective_s)

    def price(self, c: int, cfg: Config) -> tuple[float, np.ndarray]:
        """Time of class ``c``'s phase under ``cfg``, with the forwarding tables that give it.

        The configuration's own tables or (``cfg.retable``) tables recomputed for the phase when they
        lower its time by more than :data:`RETABLE_GAIN`; the time is the bound, or the simulated time
        with ``score='simulated'``.

        Parameters
        ----------
        c : int
            A class (see ``phase_class``).
        cfg : Config

        Returns
        -------
        (float, numpy.ndarray)
            Seconds, and the next-hop array used.

        Examples
        --------
        >>> from topoplan.core.topology_io import load_topology
        >>> from topoplan.traffic.generators import ring
        >>> p = PhasedProblem.build(load_topology("paper003"), ring(256, 4e6))
        >>> t, nh = p.price(0, Config.of([], np.full((64, 4), -1), "none"))
        >>> round(t * 1e3, 3)                 # 4 MB over a 10 Gb/s node link
        3.2
        """
        key = ("price", c, cfg.circuits, cfg.next_hop.tobytes(), cfg.retable)
        got = self._cache.get(key)
        if got is None:
            sim = self.score == "simulated"
            own = self.simulate_class(c, cfg.circuits, cfg.next_hop) if sim else \
                self._bound(c, cfg.circuits, cfg.next_hop)
            nh, t = cfg.next_hop, own
            if cfg.retable:
                dv = self._dv(c, cfg.circuits)
                if not np.array_equal(dv, cfg.next_hop):
                    mine = self.simulate_class(c, cfg.circuits, dv) if sim else self._bound(c, cfg.circuits, dv)
                    if mine < own * (1 - RETABLE_GAIN):
                        nh, t = dv, mine
            got = self._cache[key] = (t, nh)
        return got

    def price_surviving(self, c: int, a: Config, b: Config) -> tuple[float, tuple, np.ndarray]:
        """Time of class ``c``'s phase on the circuits ``a`` and ``b`` share (forwarding recomputed for them).

        Parameters
        ----------
        c : int
        a, b : Config

        Returns
        -------
        (float, tuple, numpy.ndarray)
            Seconds, the surviving circuits, their next-hop array.

        Examples
        --------
        >>> from topoplan.core.topology_io import load_topology
        >>> from topoplan.traffic.generators import ring
        >>> p = PhasedProblem.build(load_topology("paper003"), ring(256, 4e6))
        >>> none = np.full((64, 4), -1)
        >>> t, circ, _ = p.price_surviving(0, Config.of([(0, 16)], none), Config.of([(0, 16), (1, 17)], none))
        >>> circ
        ((0, 16),)
        """
        circ = tuple(sorted(set(a.circuits) & set(b.circuits)))
        key = ("surv", c, circ)
        got = self._cache.get(key)
        if got is None:
            nh = self._dv(c, circ)
            t = self._bound(c, circ, nh) if self.score == "bound" else self.simulate_class(c, circ, nh)
            got = self._cache[key] = (t, circ, nh)
        return got

    def simulate_class(self, c: int, circuits: tuple, next_hop: np.ndarray) -> float:
        """Simulated time of class ``c``'s first phase alone under a configuration (see :mod:`topoplan.sim.schedule`).

        Parameters
        ----------
        c : int
        circuits : tuple
        next_hop : numpy.ndarray

        Returns
        -------
        float
            Seconds.

        Examples
        --------
        >>> from topoplan.core.topology_io import load_topology
        >>> from topoplan.traffic.generators import ring
        >>> p = PhasedProblem.build(load_topology("paper003"), ring(256, 4e6))
        >>> round(p.simulate_class(0, (), np.full((64, 4), -1)) * 1e3, 1)
        3.2
        """
        key = ("sim", c, circuits, next_hop.tobytes())
        if key not in self._cache:
            i = self.class_phase[c]
            plan = self.config_plan(Config(circuits, next_hop))
            self._cache[key] = simulate_segment(self.topology, self.phases, i, i + 1, plan,
                                                placement=self.placement, model=self.sim_model)["time_s"]
        return self._cache[key]

    def lower_bound(self, c: int) -> float:
        """A time no configuration gets class ``c``'s phase below: the best proven bound seen for it.

        Parameters
        ----------
        c : int

        Returns
        -------
        float
            Seconds: the links no circuit can relieve (:func:`~topoplan.problems.circuits.bound.floor_s`),
            or an exact circuit solve's lower bound for the phase when one ran.

        Examples
        --------
        >>> from topoplan.core.topology_io import load_topology
        >>> from topoplan.traffic.generators import ring
        >>> p = PhasedProblem.build(load_topology("paper003"), ring(256, 4e6))
        >>> round(p.lower_bound(0) * 1e3, 3)
        3.2
        """
        lb = self._cache.setdefault("lb", {})
        if c not in lb:
            lb[c] = float(floor_s(self.class_problems[c]))
        return lb[c]

    def _raise_lower_bound(self, c: int, value) -> None:
        if value is not None:
            lb = self._cache.setdefault("lb", {})
            lb[c] = max(self.lower_bound(c), float(value))

    def config_plan(self, cfg: Config) -> dict:
        """A circuit plan document for ``cfg`` (what :func:`topoplan.sim.run.simulate_plan` takes).

        Parameters
        ----------
        cfg : Config

        Returns
        -------
        dict

        Examples
        --------
        >>> from topoplan.core.topology_io import load_topology
        >>> from topoplan.traffic.generators import ring
        >>> p = PhasedProblem.build(load_topology("paper003"), ring(256, 4e6))
        >>> sorted(p.config_plan(Config.of([], np.full((64, 4), -1))))
        ['circuits', 'forwarding', 'hop_limit', 'load_sharing', 'rank_to_node', 'threshold_B']
        """
        return {"circuits": [list(c) for c in cfg.circuits], "forwarding": tables_from_array(cfg.next_hop),
                "load_sharing": cfg.load_sharing, "hop_limit": self.hop_limit, "threshold_B": self.threshold_B,
                "rank_to_node": self.placement.rank_to_node.tolist()}


# -- candidates ------------------------------------------------------------------

def _solve_config(problem, method: str, time_limit, seed, source: str):
    res = solve(problem, method, time_limit=time_limit if method in ("ilp", "anneal") else None, seed=seed)
    nh = array_from_tables(res.plan["forwarding"], problem.n_nodes, problem.n_switches)
    cfg = Config.of(res.plan["circuits"], nh, source, res.plan.get("load_sharing"))
    return cfg, res


def _kind_problem(prob: PhasedProblem, kind: int):
    ts = [p.traffic for p in prob.phases if p.kind == kind]
    tr = from_arrays(ts[0].n_ranks, np.concatenate([t.src for t in ts]), np.concatenate([t.dst for t in ts]),
                     np.concatenate([t.msg_bytes for t in ts]), np.concatenate([t.count for t in ts]),
                     name=f"kind {kind}")
    return CircuitProblem.build(prob.topology, tr, prob.placement, threshold_B=prob.threshold_B,
                                hop_limit=prob.hop_limit, max_circuits=prob.max_circuits)


class _Budget:
    """Splits a time limit over circuit solves; past the deadline the fast heuristic stands in.

    A solver may overrun the limit it is given (the circuit ``ilp`` computes its LP bound and polishes
    tables outside it); the largest overrun seen so far is kept back from every later share.
    """

    def __init__(self, time_limit, method: str, fallback: str = "greedy"):
        self.t0 = time.perf_counter()
        self.limit = time_limit
        self.method, self.fallback = method, fallback
        self.timed_out = False
        self.overrun = 0.0

    def left(self) -> float:
        return float("inf") if self.limit is None else self.limit - (time.perf_counter() - self.t0)

    def next(self, solves_left: int):
        """``(method, time_limit)`` for the next solve."""
        if self.method not in ("ilp", "anneal") or self.limit is None:
            return self.method, None
        share = self.left() / max(solves_left, 1) - self.overrun
        if share < 0.2:
            self.timed_out = True
            return self.fallback, None
        return self.method, 0.8 * share

    def solve(self, problem, seed, source: str, solves_left: int):
        """One configuration for ``problem`` within the budget: ``(Config, PlanResult)``."""
        m, tl = self.next(solves_left)
        t0 = time.perf_counter()
        got = _solve_config(problem, m, tl, seed, source)
        if tl is not None:
            self.overrun = max(self.overrun, time.perf_counter() - t0 - tl)
        return got


def _static(prob: PhasedProblem, budget: _Budget, seed, solves_left: int = 1):
    key = ("static", budget.method)
    if key not in prob._cache:
        cfg, res = budget.solve(prob.total, seed, "static", solves_left)
        prob._cache[key] = (cfg, res)
    return prob._cache[key]


WHOLE_TRACE_HEURISTICS = ("sp", "three-step", "greedy", "matching")


def _whole_trace_configs(prob: PhasedProblem, seed) -> list:
    """The papers' heuristics and the matching baseline on the whole trace's traffic (fast; cached)."""
    key = ("whole-heuristics", seed)
    if key not in prob._cache:
        prob._cache[key] = [_solve_config(prob.total, m, None, seed, f"static {m}")[0] for m in WHOLE_TRACE_HEURISTICS]
    return prob._cache[key]


def _candidates(prob: PhasedProblem, budget: _Budget, seed) -> list:
    """The static configuration (the circuit method on the whole trace), every unit's configuration, the
    heuristics' whole-trace plans and EPS only, in that order; duplicates (same circuits and tables) once.
    Candidates with the same circuits but other tables switch without a set-up."""
    units = _unit_configs(prob, budget, seed, extra_solves=1)
    st, _ = _static(prob, budget, seed)
    cands, seen = [], set()
    # the static configuration first: ties (equal times) go to it, today's plan
    for cfg in [st] + list(units.values()) + _whole_trace_configs(prob, seed) + [_none_config(prob)]:
        ident = (cfg.key(), cfg.next_hop.tobytes())     # same circuits, other tables: another candidate
        if ident not in seen:
            seen.add(ident)
            cands.append(cfg)
    return cands


def _units(prob: PhasedProblem, max_solves: int = 16):
    """What to solve one configuration for: every class, or every kind when there are more than ``max_solves``."""
    n_classes = len(prob.class_problems)
    if n_classes <= max_solves:
        return [("class", c) for c in range(n_classes)]
    return [("kind", k) for k in sorted(set(prob.phases.kinds()))]


def _unit_configs(prob: PhasedProblem, budget: _Budget, seed, extra_solves: int = 0) -> dict:
    """One configuration per unit (:func:`_units`): ``{unit: Config}``; exact lower bounds are kept."""
    out = {}
    units = _units(prob)
    for i, u in enumerate(units):
        key = ("unit", u, budget.method)
        if key not in prob._cache:
            left = len(units) - i + extra_solves
            if u[0] == "class":
                cfg, res = budget.solve(prob.class_problems[u[1]], seed, f"phase {prob.class_phase[u[1]]}", left)
                if res.bound is not None:
                    prob._raise_lower_bound(u[1], res.bound)
            else:
                cfg, res = budget.solve(_kind_problem(prob, u[1]), seed, f"kind {u[1]}", left)
            prob._cache[key] = cfg
        out[u] = prob._cache[key]
    return out


# -- the dynamic programme -----------------------------------------------------------

def _transition(prob: PhasedProblem, p: int, a: Config, b: Config):
    """Cost of phase ``p`` when the configuration changes from ``a`` to ``b`` before it, and how."""
    c = prob.phase_class[p]
    tb, _ = prob.price(c, b)
    wait = prob.setup_s + tb
    if prob.blackout == "stall":
        return wait, "wait"
    ts, _, _ = prob.price_surviving(c, a, b)
    surv = max(prob.setup_s, ts)
    return (surv, "surviving") if surv < wait * (1 - 1e-12) else (wait, "wait")


def _dp(prob: PhasedProblem, cands: list):
    """Exact minimum over ``cands`` per phase; returns ``(value, choice per phase, during per phase, T)``.

    Ties (within a relative 1e-12) go to the schedule with fewer reconfigurations, then to staying.
    """
    P, C = len(prob.phases), len(cands)
    T = np.array([[prob.price(prob.phase_class[p], cands[k])[0] for k in range(C)] for p in range(P)])
    V = T[0].copy()
    N = np.zeros(C, dtype=np.int64)        # reconfigurations on the best path to each state
    back = np.zeros((P, C), dtype=np.int64)
    how = [[None] * C for _ in range(P)]
    back[0] = np.arange(C)

    def better(v, nch, best, best_n):
        if v < best * (1 - 1e-12) - 1e-15:
            return True
        return v <= best * (1 + 1e-12) + 1e-15 and nch < best_n

    for p in range(1, P):
        newV, newN = np.empty(C), np.zeros(C, dtype=np.int64)
        for b in range(C):
            best, best_n, arg, h = V[b] + T[p, b], N[b], b, None
            for a in range(C):
                if a == b:
                    continue
                if cands[a].key() == cands[b].key():
                    cost, mode, nch = T[p, b], None, N[a]
                else:
                    # a change costs at least the set-up: skip pricing it when that cannot win
                    if not better(V[a] + prob.setup_s, N[a] + 1, best, best_n):
                        continue
                    cost, mode = _transition(prob, p, cands[a], cands[b])
                    nch = N[a] + 1
                if better(V[a] + cost, nch, best, best_n):
                    best, best_n, arg, h = V[a] + cost, nch, a, mode
            newV[b], newN[b], back[p, b], how[p][b] = best, best_n, arg, h
        V, N = newV, newN
    k = 0
    for j in range(1, C):
        if better(V[j], N[j], V[k], N[k]):
            k = j
    value = float(V[k])
    choice = [0] * P
    during = [None] * P
    for p in range(P - 1, -1, -1):
        choice[p] = k
        during[p] = how[p][k]
        k = int(back[p, k])
    return value, choice, during, T


def _evaluate_choice(prob: PhasedProblem, cands: list, choice: list):
    """Sum of phase times plus set-ups of a fixed choice (the blackout choice made per change as in the DP)."""
    total, during = 0.0, [None] * len(choice)
    for p, k in enumerate(choice):
        if p > 0 and cands[choice[p - 1]].key() != cands[k].key():
            cost, mode = _transition(prob, p, cands[choice[p - 1]], cands[k])
            total += cost
            during[p] = mode
        else:
            total += prob.price(prob.phase_class[p], cands[k])[0]
    return total, during


def schedule_entries(prob: PhasedProblem, cands: list, choice: list, during: list) -> list:
    """The ``schedule`` list of a plan: one entry per run of phases with the same circuits and tables.

    Parameters
    ----------
    prob : PhasedProblem
    cands : list of Config
    choice : list of int
        Candidate of every phase.
    during : list of str or None
        At every change, ``wait`` or ``surviving`` (None elsewhere).

    Returns
    -------
    list of dict

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.generators import ring
    >>> p = PhasedProblem.build(load_topology("paper003"), ring(256, 4e6))
    >>> e = schedule_entries(p, [Config.of([], np.full((64, 4), -1), "none")], [0], [None])
    >>> [(x["from_phase"], x["to_phase"], x["circuits"], x["setup"]) for x in e]
    [(0, 1, [], None)]
    """
    entries = []
    for p, k in enumerate(choice):
        c = prob.phase_class[p]
        _, nh = prob.price(c, cands[k])
        changed = p > 0 and cands[choice[p - 1]].key() != cands[k].key()
        same = entries and not changed and entries[-1]["_nh"] is nh
        if same:
            entries[-1]["to_phase"] = p + 1
            continue
        setup = None
        if changed:
            old, new = set(cands[choice[p - 1]].circuits), set(cands[k].circuits)
            setup = {"changed_circuits": len(old ^ new), "removed": len(old - new), "added": len(new - old),
                     "during": during[p] or "wait"}
            if setup["during"] == "surviving":
                _, circ, snh = prob.price_surviving(c, cands[choice[p - 1]], cands[k])
                setup["surviving_circuits"] = [list(x) for x in circ]
                setup["surviving_forwarding"] = tables_from_array(snh)
        entries.append({"from_phase": p, "to_phase": p + 1, "from_s": float(prob.phases[p].start_s),
                        "circuits": [list(x) for x in cands[k].circuits], "forwarding": tables_from_array(nh),
                        "load_sharing": cands[k].load_sharing, "source": cands[k].source, "setup": setup, "_nh": nh})
    for e in entries:
        del e["_nh"]
    return entries


def _result(prob: PhasedProblem, cands, choice, during, *, status="heuristic", bound=None, message="",
            extra=None) -> PlanResult:
    total, during2 = _evaluate_choice(prob, cands, choice)
    during = [d if d is not None else d2 for d, d2 in zip(during, during2)]
    entries = schedule_entries(prob, cands, choice, during)
    n_changes = sum(1 for e in entries if e["setup"] is not None)
    phase_s = [prob.price(prob.phase_class[p], cands[k])[0] for p, k in enumerate(choice)]
    lb = sum(prob.lower_bound(prob.phase_class[p]) for p in range(len(prob.phases)))
    bound = lb if bound is None else bound
    metrics = {"phases": len(prob.phases), "kinds": len(set(prob.phases.kinds())),
               "classes": len(prob.class_problems), "candidates": len(cands), "reconfigurations": n_changes,
               "setup_overhead_s": float(total - sum(phase_s)),
               "phase_time_s": float(sum(phase_s)), "lower_bound_s": float(lb), "score": prob.score,
               "entries": len(entries), "phase_config": [int(k) for k in choice],
               "candidate_sources": [c.source for c in cands], "blackout": prob.blackout, "setup_s": prob.setup_s}
    metrics.update(extra or {})
    plan = {"schedule": entries, "n_phases": len(prob.phases), "setup_s": prob.setup_s, "blackout": prob.blackout,
            "threshold_B": prob.threshold_B, "hop_limit": prob.hop_limit,
            "rank_to_node": prob.placement.rank_to_node.tolist()}
    return PlanResult(method="", objective=float(total), plan=plan, status=status, bound=float(bound),
                      gap=gap_of(float(total), float(bound)), metrics=metrics, message=message)


def _single_configs(prob: PhasedProblem, pool: list) -> list:
    """Every configuration of ``pool`` as a single configuration for the whole run: each with its own
    tables and with tables recomputed for the whole trace, one set of tables throughout (no re-tabling)."""
    own, seen = [], set()
    for c in pool:
        for nh, src in ((c.next_hop, c.source), (distance_vector(prob.total, list(c.circuits)),
                                                 f"{c.source}, tables for the whole trace")):
            ident = (c.circuits, nh.tobytes())
            if ident not in seen:
                seen.add(ident)
                own.append(Config(c.circuits, nh, src, c.load_sharing, retable=False))
    return own


def _simulated_single(prob: PhasedProblem, cfg: Config) -> float:
    """The whole trace replayed under one configuration (what a one-entry schedule simulates at); cached."""
    key = ("whole trace", cfg.circuits, cfg.next_hop.tobytes(), cfg.load_sharing)
    if key not in prob._cache:
        prob._cache[key] = float(simulate_plan(prob.topology, prob.phases.trace, prob.config_plan(cfg),
                                               placement=prob.placement, model=prob.sim_model)["makespan_s"])
    return prob._cache[key]


def _keep_fastest_replay(prob: PhasedProblem, cands: list, res: PlanResult) -> PlanResult:
    """``score='simulated'``: the programme's schedule, the ``per-phase`` schedule over the same candidates
    and the best single configuration over them (:func:`_single_configs`), each replayed as a whole
    (:func:`topoplan.sim.schedule.simulate_schedule`); the fastest is kept, ties in that order.

    The programme minimizes the sum of phases simulated one at a time; the replay runs consecutive phases of
    one configuration in one piece, where they overlap and carry each rank's waiting from phase to phase, so
    the two can rank schedules differently (001-16x16's MG: a phase-sum 0.3% lower than the best single
    configuration's, a replay 8.6% slower).
    """
    def replay(r):
        return float(simulate_schedule(prob.topology, prob.phases.trace, prob.phases, r.plan,
                                       placement=prob.placement, model=prob.sim_model)["makespan_s"])

    P = len(prob.phases)
    times_s = {"programme": replay(res)}
    alts = {"programme": res}
    greedy = _result(prob, cands, *_greedy_in_time(prob, cands), bound=res.bound)
    if greedy.plan["schedule"] != res.plan["schedule"]:
        times_s["per-phase"] = replay(greedy)
        alts["per-phase"] = greedy
    own = _single_configs(prob, cands)
    single = [_simulated_single(prob, c) for c in own]
    k = int(np.argmin(single))
    name = f"best single ({own[k].source})"
    times_s[name] = float(single[k])
    best = min(times_s, key=lambda n: times_s[n] * (1 + 1e-12) if n != "programme" else times_s[n])
    if best == "programme":
        res.metrics.update(simulated_s=times_s[best], simulated_candidates_s=times_s, picked=best)
        return res
    alt = alts.get(best) or _result(prob, [own[k]], [0] * P, [None] * P, bound=res.bound)
    metrics = {**res.metrics, **alt.metrics}
    if "decomposed_phases" in metrics:
        metrics["decomposed_phases"] = []
    metrics.update(candidates=res.metrics["candidates"], programme_s=float(res.objective),
                   programme_entries=res.metrics["entries"],
                   programme_reconfigurations=res.metrics["reconfigurations"], simulated_s=times_s[best],
                   simulated_candidates_s=times_s, picked=best)
    alt.metrics = metrics
    alt.status = "timeout" if res.status == "timeout" else "feasible"
    alt.message = res.message
    alt.add_note(f"kept the {best} schedule: replayed whole it simulates faster ({times_s[best]:.6g} s vs "
                 f"{times_s['programme']:.6g} s for the programme's)")
    return alt


# -- the schedulers --------------------------------------------------------------

def _none_config(prob: PhasedProblem) -> Config:
    return Config.of([], np.full((prob.total.n_nodes, prob.total.n_switches), -1), "none")


@SCHEDULERS.register("static")
def static(problem: PhasedProblem, *, time_limit=None, seed=0, circuit_method: str = "ilp",
           pick: str = "bound") -> PlanResult:
    """One configuration for the whole run: ``circuit_method`` on the whole trace's traffic.

    Parameters
    ----------
    problem : PhasedProblem
    time_limit : float, optional
        For the circuit method.
    seed : int, optional
    circuit_method : str, optional
        A method of :data:`topoplan.problems.circuits.METHODS`.
    pick : {"bound", "candidates", "simulated"}, optional
        ``bound``: the circuit method's plan for the whole trace's traffic (the whole-trace bound, today's
        static plan). The other two pick among the ``exact`` scheduler's candidates (that plan, the
        papers' heuristics on the whole trace, every phase class's best configuration, EPS only), each
        with its own forwarding tables or with tables recomputed for the whole trace, one set of tables
        throughout: ``candidates`` by the phase-sum of bounds,
        ``simulated`` by simulating the whole trace under each: the best static configuration in the
        simulator. The whole-trace bound can mislead: it spreads every link's bytes over the whole run,
        while phases load different links one after another.

    Returns
    -------
    PlanResult
        A one-entry schedule.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.generators import neighbor2d
    >>> p = PhasedProblem.build(load_topology("paper003"), neighbor2d(16, 16, 4e6, iters=2))
    >>> r = static(p, circuit_method="greedy")
    >>> len(r.plan["schedule"]), r.metrics["reconfigurations"]
    (1, 0)
    """
    if pick not in ("bound", "candidates", "simulated"):
        raise TopoplanError(f"field 'pick': choose bound, candidates or simulated, got {pick!r}")
    budget = _Budget(time_limit, circuit_method)
    pool = _candidates(problem, budget, seed) if pick != "bound" else None   # the units first: fair shares
    cfg, res = _static(problem, budget, seed)
    extra = {"whole_trace_bound_s": float(res.objective), "circuit_status": res.status}
    if pick != "bound":
        own = _single_configs(problem, pool)
        if pick == "candidates":
            score = [sum(problem.price(problem.phase_class[p], c)[0] for p in range(len(problem.phases)))
                     for c in own]
        else:
            score = [_simulated_single(problem, c) for c in own]
        k = int(np.argmin(score))
        cfg = own[k]
        extra.update(picked=cfg.source, pick=pick, pick_scores_s={c.source: float(x) for c, x in zip(own, score)},
                     whole_trace_bound_s=float(evaluate(problem.total, list(cfg.circuits), cfg.next_hop).congestion_s))
    cfg = Config(cfg.circuits, cfg.next_hop, cfg.source, cfg.load_sharing, retable=False)
    out = _result(problem, [cfg], [0] * len(problem.phases), [None] * len(problem.phases), extra=extra)
    if budget.timed_out:
        out.status = "timeout"
    return out


def _greedy_in_time(problem: PhasedProblem, pool: list):
    """The ``per-phase`` scheduler's choice over ``pool``: ``(choice per phase, during per phase)``."""
    P = len(problem.phases)

    def best_for(p):   # ties: the earlier candidate (the static configuration comes first)
        t = [problem.price(problem.phase_class[p], c)[0] for c in pool]
        return int(np.argmin(t))

    choice, during = [0] * P, [None] * P
    # the first configuration: the best of the first phase with large inter-switch traffic (phases before it
    # are indifferent to circuits, and their own "best" configuration is an arbitrary one)
    busy = [p for p in range(P) if problem.class_problems[problem.phase_class[p]].large_bytes.sum() > 0]
    cur = best_for(busy[0] if busy else 0)
    choice[0] = cur
    for p in range(1, P):
        best = best_for(p)
        if pool[best].key() != pool[cur].key():
            stay = problem.price(problem.phase_class[p], pool[cur])[0]
            move, mode = _transition(problem, p, pool[cur], pool[best])
            if move < stay * (1 - 1e-12):
                cur = best
                during[p] = mode
        choice[p] = cur
    return choice, during


@SCHEDULERS.register("per-phase")
def per_phase(problem: PhasedProblem, *, time_limit=None, seed=0, circuit_method: str = "ilp") -> PlanResult:
    """Greedy in time: switch to a phase's best configuration only where the switch pays for itself.

    A phase's best configuration is the fastest for it among the ``exact`` scheduler's candidates (its
    own circuit solve, the other phases', the whole trace's, EPS only). The run starts on the best
    configuration of the first phase with large inter-switch traffic (earlier phases do not use
    circuits); at every later phase, the schedule changes to that phase's best configuration when
    the phase's time there, set-up included (the blackout model), is below its time on the current
    configuration. Myopic: it never looks past the phase at hand.

    Parameters
    ----------
    problem : PhasedProblem
    time_limit : float, optional
        Shared by the circuit solves.
    seed : int, optional
    circuit_method : str, optional

    Returns
    -------
    PlanResult

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.generators import neighbor2d
    >>> p = PhasedProblem.build(load_topology("paper003"), neighbor2d(16, 16, 4e6, iters=2))
    >>> per_phase(p, circuit_method="greedy").metrics["reconfigurations"]
    0
    """
    budget = _Budget(time_limit, circuit_method)
    pool = _candidates(problem, budget, seed)
    choice, during = _greedy_in_time(problem, pool)
    out = _result(problem, pool, choice, during)
    if budget.timed_out:
        out.status = "timeout"
    return out


@SCHEDULERS.register("exact")
def exact(problem: PhasedProblem, *, time_limit=None, seed=0, circuit_method: str = "ilp") -> PlanResult:
    """Dynamic programming over phases x candidate configurations (exact over the candidates).

    Candidates: the static configuration, every unit's best configuration (per phase class, or per
    kind when there are many classes; ``circuit_method`` on that traffic), the papers' heuristics on
    the whole trace and EPS only. Ties go to fewer reconfigurations, then to the earlier candidate
    (the static one first). The time limit is shared by the circuit solves (past it, ``greedy``
    stands in and the status is ``timeout``); it holds up to the overrun of one circuit solve (the
    circuit ``ilp`` computes its LP bound outside its own limit: about 0.1 s on 003's system, several
    seconds on 001's 16 switches), and the largest overrun seen is kept back from later shares. The
    programme itself takes milliseconds and is exact over the candidates.

    With ``score='simulated'`` (phase times simulated), the result is also judged by a replay of the
    whole trace: the programme's schedule replayed as a whole against the ``per-phase`` schedule over
    the same candidates and against every candidate as one configuration for the whole run (with its
    own tables and with tables for the whole trace, as ``static`` with ``pick='simulated'``); when one
    of those simulates faster it is returned instead, status ``feasible``, its phase-sum ``objective``
    and the programme's (``programme_s``) both reported. These replays are outside the time limit, as
    the phase simulations are.

    Parameters
    ----------
    problem : PhasedProblem
    time_limit : float, optional
    seed : int, optional
    circuit_method : str, optional

    Returns
    -------
    PlanResult
        ``objective``: phase times plus set-ups; ``bound``: the zero-set-up lower bound;
        ``metrics``: ``zero_setup_s`` (every phase at its best candidate, no set-up), ``static_s``
        (the static candidate throughout), ``best_single_s`` (the best candidate throughout, by the
        phase-sum); with ``score='simulated'`` also
        ``simulated_s`` (the returned schedule replayed whole), ``simulated_candidates_s`` (the
        programme's schedule, the per-phase schedule where it differs, and the best single
        configuration, each replayed whole), ``picked``.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.generators import neighbor2d
    >>> p = PhasedProblem.build(load_topology("paper003"), neighbor2d(16, 16, 4e6, iters=2))
    >>> r = exact(p, circuit_method="greedy")
    >>> r.metrics["reconfigurations"], r.objective <= r.metrics["static_s"]
    (0, True)
    """
    budget = _Budget(time_limit, circuit_method)
    cands = _candidates(problem, budget, seed)
    st, _ = _static(problem, budget, seed)
    value, choice, during, T = _dp(problem, cands)
    k_static = next(i for i, c in enumerate(cands) if c.key() == st.key())
    zero = float(T.min(axis=1).sum())
    extra = {"zero_setup_s": zero, "static_s": float(T[:, k_static].sum()),
             "best_single_s": float(T.sum(axis=0).min()), "exact_over": f"{len(cands)} candidate configurations"}
    out = _result(problem, cands, choice, during, extra=extra,
                  message=f"exact over {len(cands)} candidate configurations (each phase class's best, the static "
                          "one, the heuristics' whole-trace plans, EPS only); bound: zero set-up, every phase at "
                          "its proven lower bound")
    out.status = "timeout" if budget.timed_out else ("optimal" if out.gap is not None and out.gap <= 1e-9
                                                     else "feasible")
    if abs(out.objective - value) > 1e-9 * max(1.0, value):
        raise AssertionError(f"schedule value {out.objective} differs from the programme's {value}")
    return _keep_fastest_replay(problem, cands, out) if problem.score == "simulated" else out


@SCHEDULERS.register("zero-setup")
def zero_setup(problem: PhasedProblem, *, time_limit=None, seed=0, circuit_method: str = "ilp") -> PlanResult:
    """The zero-set-up reference: every phase at its best ``exact`` candidate, set-up free.

    Not realizable with a set-up time above zero: the plan says ``setup_s: 0``, so
    :func:`topoplan.sim.schedule.simulate_schedule` replays it without blackouts. Its objective is
    ``exact``'s ``metrics.zero_setup_s``; no schedule over these candidates does better at any set-up time.

    Parameters
    ----------
    problem : PhasedProblem
    time_limit, seed, circuit_method : optional
        As for ``exact`` (the candidates are shared with it).

    Returns
    -------
    PlanResult

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.generators import halo_then_transpose
    >>> p = PhasedProblem.build(load_topology("paper003", ["ocs.nodes_per_switch=4"]),
    ...                         halo_then_transpose(16, 16, 4e6))
    >>> r = zero_setup(p, circuit_method="greedy")
    >>> round(r.objective * 1e3), r.plan["setup_s"], r.metrics["reconfigurations"]
    (288, 0.0, 1)
    """
    from dataclasses import replace

    free = replace(problem, setup_s=0.0, blackout="stall")
    budget = _Budget(time_limit, circuit_method)
    cands = _candidates(free, budget, seed)
    choice = []
    for p in range(len(free.phases)):
        t = [free.price(free.phase_class[p], c)[0] for c in cands]
        best = min(t)
        # ties: keep the previous phase's candidate (fewer segments to replay)
        k = choice[-1] if choice and t[choice[-1]] <= best * (1 + 1e-12) else int(np.argmin(t))
        choice.append(k)
    out = _result(free, cands, choice, [None] * len(choice),
                  message="reference only: every phase at its best candidate with no set-up time")
    out.status = "timeout" if budget.timed_out else "feasible"
    return out


# -- decomposed phases: circuits that change inside an all-to-all phase -------------------------

DECOMPOSE_HOP_LIMIT = 1


@dataclass
class Decomposed:
    """A phase class's decomposition realized as slot configurations, priced like a phase.

    Parameters
    ----------
    phase_class : int
    method : str
        ``solstice`` or ``bvn``.
    decomposition : Decomposition
        The switch-level decomposition (:mod:`topoplan.problems.circuits.decompose`).
    configs : list of Config
        Per slot: node circuits (:func:`~topoplan.problems.circuits.exact.decompose` of the slot's
        switch-pair counts) and tables (:func:`~topoplan.problems.circuits.forwarding.distance_vector`
        on the slot's traffic, hop limit 1).
    slots : list of dict
        The schedule entry's ``slots``.
    slot_price_s : list of float
        Per slot, its time under the problem's score (bound or simulated).
    cost_s : float
        The slots plus the set-ups between them.
    changes : int
        Reconfigurations between slots.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.generators import halo_then_transpose
    >>> p = PhasedProblem.build(load_topology("paper003", ["ocs.nodes_per_switch=4"]),
    ...                         halo_then_transpose(16, 16, 4e6, iters=5))
    >>> d = decomposed_option(p, 1)                  # a Decomposed: the transpose's slots, priced
    >>> d.method, len(d.slot_price_s) == len(d.slots), d.cost_s >= sum(d.slot_price_s)
    ('solstice', True, True)
    """

    phase_class: int
    method: str
    decomposition: object
    configs: list
    slots: list
    slot_price_s: list
    cost_s: float
    changes: int

    def summary(self) -> dict:
        d = self.decomposition
        return {"method": self.method, "slots": len(self.slots), "estimate_s": d.total_s, "slot_s": d.slot_s,
                "setup_total_s": d.setup_total_s, "residual_s": d.residual_s,
                "residual_B": float(d.residual_B.sum()), "demand_B": float(d.demand_B.sum()),
                "slot_price_s": [float(x) for x in self.slot_price_s], "price_s": float(self.cost_s),
                "circuits_per_slot": [len(c.circuits) for c in self.configs]}


def _triples(m) -> list:
    a, b = np.nonzero(np.asarray(m) > 0)
    return [[int(x), int(y), float(m[x, y])] for x, y in zip(a, b)]


def decomposed_option(prob: PhasedProblem, c: int, method: str = "solstice", *, force: bool = False):
    """Decompose phase class ``c`` (if its traffic is all-to-all-like) and price the slots as a phase.

    Parameters
    ----------
    prob : PhasedProblem
    c : int
        A phase class.
    method : {"solstice", "bvn"}, optional
    force : bool, optional
        Decompose even when the traffic is not all-to-all-like
        (:func:`~topoplan.problems.circuits.decompose.all_to_all_like`).

    Returns
    -------
    Decomposed or None
        None when the class is not all-to-all-like or its decomposition has no slot (all EPS).

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.generators import halo_then_transpose
    >>> p = PhasedProblem.build(load_topology("paper003", ["ocs.nodes_per_switch=4"]),
    ...                         halo_then_transpose(16, 16, 4e6, iters=5))
    >>> decomposed_option(p, 0) is None              # the halo exchange is not all-to-all-like
    True
    >>> d = decomposed_option(p, 1)                  # the transpose spreads over all four switches
    >>> len(d.slots), d.changes, [len(x.circuits) for x in d.configs]
    (2, 1, [8, 8])
    """
    if method not in DECOMPOSITIONS:
        raise TopoplanError(f"field 'decomposition': choose one of {', '.join(DECOMPOSITIONS)}, got {method!r}")
    key = ("decomposed", c, method, prob.setup_s, prob.score, bool(force))
    if key in prob._cache:
        return prob._cache[key]
    cp = prob.class_problems[c]
    x = inputs_of(cp)
    out = None
    if force or all_to_all_like(x["demand_B"]):
        dec = DECOMPOSITIONS[method](setup_s=prob.setup_s, **x)
        dec.check()
        if dec.slots:
            B = slot_bytes(dec)
            F, _ = slot_fractions(B, [s.duration_s for s in dec.slots])
            n = cp.traffic.n_ranks
            rank_sw = cp.node_switch[np.asarray(prob.placement.rank_to_node, dtype=np.int64)[:n]]
            parts = chunk_traffic(cp.traffic, rank_sw, F)
            configs, slots, bounds = [], [], []
            for k, s in enumerate(dec.slots):
                circ = node_pairs_of(cp, s.counts())
                sp = CircuitProblem.build(prob.topology, parts[k], prob.placement, threshold_B=prob.threshold_B,
                                          hop_limit=DECOMPOSE_HOP_LIMIT, max_circuits=None)
                nh = distance_vector(sp, circ, hop_limit=DECOMPOSE_HOP_LIMIT)
                cfg = Config.of(circ, nh, f"{method} slot {k}")
                cfg.retable = False
                configs.append(cfg)
                slots.append({"circuits": [list(p) for p in cfg.circuits], "forwarding": tables_from_array(nh),
                              "load_sharing": cfg.load_sharing, "hop_limit": DECOMPOSE_HOP_LIMIT,
                              "duration_s": float(s.duration_s), "bytes_B": _triples(B[k]),
                              "served_B": _triples(s.served_B),
                              "switch_circuits": [[a, b, n_] for (a, b), n_ in s.counts().items()]})
                if prob.score == "bound":
                    bounds.append(float(evaluate(sp, list(cfg.circuits), nh).congestion_s))
            changes = sum(1 for a, b in zip(configs, configs[1:]) if a.key() != b.key())
            if prob.score == "bound":
                prices = bounds
                cost = float(sum(bounds)) + prob.setup_s * changes
            else:
                i = prob.class_phase[c]
                sub = prob.phases.subtrace(i, i + 1)
                lead = float(sub.t_start.min()) if (len(sub) and sub is not prob.phases.trace) else 0.0
                doc = {"rank_to_node": prob.placement.rank_to_node.tolist(), "hop_limit": prob.hop_limit}
                r = simulate_slots(prob.topology, sub, {"slots": slots}, doc, rank_switch=rank_sw,
                                   placement=prob.placement, model=prob.sim_model, setup_s=prob.setup_s,
                                   threshold_B=prob.threshold_B, lead_s=lead)
                prices, cost = r["slot_time_s"], float(r["time_s"])
            out = Decomposed(phase_class=c, method=method, decomposition=dec, configs=configs, slots=slots,
                             slot_price_s=prices, cost_s=cost, changes=changes)
    prob._cache[key] = out
    return out


def _dp_options(prob: PhasedProblem, cands: list, options: dict):
    """The programme of ``exact`` with one more state at the phases of ``options`` (``{phase: Decomposed}``).

    A decomposed state is entered from a configuration with the same circuits as its first slot at
    no cost, else with a set-up (``wait``); it leaves from its last slot's configuration (the usual
    transitions, :func:`_transition`). Ties: fewer reconfigurations, then the earlier state (a
    candidate before the decomposition). Returns ``(value, states, during)``; a state is a candidate
    index or ``-1`` (decomposed).
    """
    P, C = len(prob.phases), len(cands)
    T = np.array([[prob.price(prob.phase_class[p], cands[k])[0] for k in range(C)] for p in range(P)])

    def states(p):
        return list(range(C)) + ([-1] if options.get(p) is not None else [])

    def exit_cfg(p, s):
        return cands[s] if s >= 0 else options[p].configs[-1]

    def entry_cfg(p, s):
        return cands[s] if s >= 0 else options[p].configs[0]

    def own(p, s):
        return T[p, s] if s >= 0 else options[p].cost_s

    def inner(p, s):
        return 0 if s >= 0 else options[p].changes

    def better(v, nch, best, best_n):
        if v < best * (1 - 1e-12) - 1e-15:
            return True
        return v <= best * (1 + 1e-12) + 1e-15 and nch < best_n

    V = {s: own(0, s) for s in states(0)}
    N = {s: inner(0, s) for s in states(0)}
    back, how = [{s: s for s in V}], [{s: None for s in V}]
    for p in range(1, P):
        newV, newN, bk, hw = {}, {}, {}, {}
        for b in states(p):
            best, best_n, arg, h = np.inf, np.iinfo(np.int64).max, None, None
            for a in V:
                ea, eb = exit_cfg(p - 1, a), entry_cfg(p, b)
                if ea.key() == eb.key():
                    cost, mode, nch = own(p, b), None, N[a] + inner(p, b)
                else:
                    if not better(V[a] + prob.setup_s, N[a] + 1, best, best_n):
                        continue
                    if b >= 0:
                        cost, mode = _transition(prob, p, ea, eb)
                    else:
                        cost, mode = prob.setup_s + own(p, b), "wait"
                    nch = N[a] + 1 + inner(p, b)
                if better(V[a] + cost, nch, best, best_n):
                    best, best_n, arg, h = V[a] + cost, nch, a, mode
            newV[b], newN[b], bk[b], hw[b] = best, best_n, arg, h
        V, N = newV, newN
        back.append(bk)
        how.append(hw)
    k = None
    for s in V:
        if k is None or better(V[s], N[s], V[k], N[k]):
            k = s
    value = float(V[k])
    choice, during = [0] * P, [None] * P
    for p in range(P - 1, -1, -1):
        choice[p] = k
        during[p] = how[p][k]
        k = back[p][k]
    return value, choice, during


def _entries_with_slots(prob: PhasedProblem, cands: list, options: dict, choice: list, during: list) -> list:
    """The ``schedule`` list: as :func:`schedule_entries`, with one entry with ``slots`` per decomposed phase."""
    entries = []
    prev_exit = None
    for p, k in enumerate(choice):
        c = prob.phase_class[p]
        if k >= 0:
            cfg = cands[k]
            _, nh = prob.price(c, cfg)
        else:
            cfg, nh = options[p].configs[0], options[p].configs[0].next_hop
        changed = p > 0 and prev_exit.key() != cfg.key()
        if (k >= 0 and entries and not changed and not entries[-1].get("slots")
                and entries[-1]["_nh"] is nh):
            entries[-1]["to_phase"] = p + 1
            prev_exit = cfg
            continue
        setup = None
        if changed:
            old, new = set(prev_exit.circuits), set(cfg.circuits)
            setup = {"changed_circuits": len(old ^ new), "removed": len(old - new), "added": len(new - old),
                     "during": (during[p] or "wait") if k >= 0 else "wait"}
            if setup["during"] == "surviving":
                _, circ, snh = prob.price_surviving(c, prev_exit, cfg)
                setup["surviving_circuits"] = [list(x) for x in circ]
                setup["surviving_forwarding"] = tables_from_array(snh)
        e = {"from_phase": p, "to_phase": p + 1, "from_s": float(prob.phases[p].start_s),
             "circuits": [list(x) for x in cfg.circuits], "forwarding": tables_from_array(nh),
             "load_sharing": cfg.load_sharing, "source": cfg.source, "setup": setup, "_nh": nh}
        if k < 0:
            opt = options[p]
            e["source"] = opt.method
            e["hop_limit"] = DECOMPOSE_HOP_LIMIT
            e["slots"] = opt.slots
            e["decomposition"] = opt.summary()
            prev_exit = opt.configs[-1]
        else:
            prev_exit = cfg
        entries.append(e)
    for e in entries:
        del e["_nh"]
    return entries


def _decomposing(problem: PhasedProblem, *, time_limit, seed, circuit_method: str, decomposition: str) -> PlanResult:
    budget = _Budget(time_limit, circuit_method)
    cands = _candidates(problem, budget, seed)
    P = len(problem.phases)
    by_class = {}
    for c in sorted(set(problem.phase_class)):
        by_class[c] = decomposed_option(problem, c, decomposition)
    options = {p: by_class[problem.phase_class[p]] for p in range(P) if by_class[problem.phase_class[p]] is not None}
    value, choice, during = _dp_options(problem, cands, options)
    plain, _, _, T = _dp(problem, cands)
    entries = _entries_with_slots(problem, cands, options, choice, during)
    n_changes = sum(1 for e in entries if e["setup"] is not None) + sum(
        options[p].changes for p in range(P) if choice[p] < 0)
    phase_s = [float(T[p, k]) if k >= 0 else float(options[p].cost_s) for p, k in enumerate(choice)]
    # a time-varying configuration can beat every single configuration's proven bound: decomposable phases
    # keep only the bound of the links no circuit relieves
    lb = sum(float(floor_s(problem.class_problems[problem.phase_class[p]])) if p in options
             else problem.lower_bound(problem.phase_class[p]) for p in range(P))
    metrics = {"phases": P, "kinds": len(set(problem.phases.kinds())), "classes": len(problem.class_problems),
               "candidates": len(cands), "reconfigurations": n_changes, "setup_overhead_s": float(value - sum(phase_s)),
               "phase_time_s": float(sum(phase_s)), "lower_bound_s": float(lb), "score": problem.score,
               "entries": len(entries), "phase_config": [int(k) for k in choice],
               "candidate_sources": [c.source for c in cands], "blackout": problem.blackout,
               "setup_s": problem.setup_s, "decomposition": decomposition,
               "all_to_all_phases": sorted(options), "decomposed_phases": [p for p in range(P) if choice[p] < 0],
               "without_decomposition_s": float(plain),
               "options": {str(c): {**o.summary(), "best_single_s": float(T[problem.class_phase[c]].min())}
                           for c, o in by_class.items() if o is not None}}
    plan = {"schedule": entries, "n_phases": P, "setup_s": problem.setup_s, "blackout": problem.blackout,
            "threshold_B": problem.threshold_B, "hop_limit": problem.hop_limit,
            "rank_to_node": problem.placement.rank_to_node.tolist()}
    used = metrics["decomposed_phases"]
    msg = (f"{decomposition}: {len(options)} all-to-all-like phase(s), decomposed in {len(used)}; the other phases "
           "and the choice between a decomposition and one configuration: the exact programme over its candidates")
    out = PlanResult(method="", objective=float(value), plan=plan, status="feasible", bound=float(lb),
                     gap=gap_of(float(value), float(lb)), metrics=metrics, message=msg)
    if budget.timed_out:
        out.status = "timeout"
    return _keep_fastest_replay(problem, cands, out) if problem.score == "simulated" else out


@SCHEDULERS.register("solstice")
def solstice(problem: PhasedProblem, *, time_limit=None, seed=0, circuit_method: str = "ilp",
             decomposition: str = "solstice") -> PlanResult:
    """``exact`` plus circuits that change inside all-to-all-like phases (a Solstice-like decomposition).

    Every phase class whose switch demand is all-to-all-like
    (:func:`~topoplan.problems.circuits.decompose.all_to_all_like`) is decomposed into a sequence of
    configurations with durations (:func:`~topoplan.problems.circuits.decompose.solstice`, or
    ``bvn`` for the Birkhoff-von Neumann decomposition), realized on OCS nodes
    (:func:`decomposed_option`) and priced like any phase (the sum of its slots' bounds or
    simulated sub-phases, plus the set-ups between slots). The ``exact`` programme then chooses, per
    phase, one of its candidate configurations or (for those phases) the decomposition: a
    decomposition is used only where it is faster, set-ups in and out included; every other phase
    keeps the exact scheduler's choice. The plan's decomposed entries carry ``slots``, replayed by
    :func:`topoplan.sim.schedule.simulate_schedule` one sub-phase per slot.

    Parameters
    ----------
    problem : PhasedProblem
    time_limit : float, optional
        Shared by the circuit solves (as for ``exact``).
    seed : int, optional
    circuit_method : str, optional
    decomposition : {"solstice", "bvn"}, optional

    Returns
    -------
    PlanResult
        ``bound``: the zero-set-up lower bound, where decomposable phases keep only the bound of the
        links no circuit relieves (a sequence of configurations can beat any single one's bound);
        ``metrics``: ``all_to_all_phases``, ``decomposed_phases``, ``options`` (per class: slots,
        the decomposition's estimate, its price, the best single configuration's),
        ``without_decomposition_s`` (the ``exact`` value).

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.generators import halo_then_transpose
    >>> p = PhasedProblem.build(load_topology("paper003", ["ocs.nodes_per_switch=4"]),
    ...                         halo_then_transpose(16, 16, 4e6, iters=5))
    >>> r = solstice(p, circuit_method="greedy")
    >>> r.metrics["all_to_all_phases"], r.objective <= r.metrics["without_decomposition_s"]
    ([1], True)
    """
    return _decomposing(problem, time_limit=time_limit, seed=seed, circuit_method=circuit_method,
                        decomposition=decomposition)


@SCHEDULERS.register("bvn")
def bvn(problem: PhasedProblem, *, time_limit=None, seed=0, circuit_method: str = "ilp") -> PlanResult:
    """The ``solstice`` scheduler with the Birkhoff-von Neumann decomposition (for comparison).

    Parameters
    ----------
    problem : PhasedProblem
    time_limit, seed, circuit_method : optional
        As for ``solstice``.

    Returns
    -------
    PlanResult

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.generators import halo_then_transpose
    >>> p = PhasedProblem.build(load_topology("paper003", ["ocs.nodes_per_switch=4"]),
    ...                         halo_then_transpose(16, 16, 4e6, iters=5))
    >>> bvn(p, circuit_method="greedy").metrics["options"]["1"]["slots"]
    3
    """
    return _decomposing(problem, time_limit=time_limit, seed=seed, circuit_method=circuit_method,
                        decomposition="bvn")


# -- entry point -------------------------------------------------------------------

def schedule(problem_phases: PhasedProblem, method: str = "exact", *, time_limit: float | None = None,
             seed: int | None = 0, **options) -> PlanResult:
    """Schedule circuit configurations over the phases with ``method`` (one of :data:`SCHEDULERS`).

    Parameters
    ----------
    problem_phases : PhasedProblem
    method : str, optional
        ``static``, ``per-phase``, ``exact`` (default), ``zero-setup`` (the lower-bound reference),
        ``solstice`` or ``bvn`` (``exact`` plus decomposed all-to-all phases).
    time_limit : float, optional
        Seconds, shared by the circuit solves.
    seed : int, optional
    **options
        The scheduler's options (``circuit_method``; ``pick`` for ``static``);
        an unknown one is refused, naming the known ones.

    Returns
    -------
    PlanResult
        ``plan`` = ``schedule`` (entries), ``n_phases``, ``setup_s``, ``blackout``, ``threshold_B``,
        ``hop_limit``, ``rank_to_node``; ``objective`` = phase times plus set-up (seconds);
        validated (:func:`topoplan.plans.schedule.validate_schedule`); ``options`` records the ``score`` and, scored by
        simulation, the network model (``sim_model``).

    Raises
    ------
    TopoplanError
        For an unknown method or option, a bad time limit or seed.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.generators import neighbor2d
    >>> p = PhasedProblem.build(load_topology("paper003"), neighbor2d(16, 16, 4e6, iters=2))
    >>> schedule(p, "static", circuit_method="greedy").problem
    'schedule'
    >>> schedule(p, "exact", circuit_methd="greedy")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: unknown option 'circuit_methd' for schedule method 'exact'; known: circuit_method
    """
    res = solve_with(SCHEDULERS, problem_phases, method, time_limit=time_limit, seed=seed,
                     validate=lambda prob, res: validate_schedule(res.plan, prob.topology, n_phases=len(prob.phases)),
                     **options)
    res.options["score"] = problem_phases.score
    if problem_phases.score == "simulated":
        res.options["sim_model"] = SimModel.coerce(problem_phases.sim_model).to_dict()
    return res
