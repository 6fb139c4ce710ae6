"""The Bcast reordering problem and its methods (002's DFT/BFT and more).

A :class:`BcastProblem` holds the allocation (node ids in allocation order =
the default node-leader communicator), the root rank, the message size and
the logical schedule. A method returns an ``assign`` array (tree position ->
local allocation index, position 0 = root, fixed to the root rank's node);
the plan key ``order`` is new communicator rank -> node id.

The builder has the shape of every problem's, ``build(topology, traffic,
placement=None, **options)``: the Bcast's *placement* is the allocation
(rank i of the node-leader communicator sits on node ``placement[i]``: a
rank -> node map, which is what a placement is), and its *traffic* is the
Bcast itself, described by the options ``root``, ``bytes_B`` and ``tree``
(so ``traffic`` stays None).

The methods ``default``, ``dft``, ``bft``, ``greedy`` and ``anneal`` are
defined here, ``ilp`` in :mod:`topoplan.problems.bcast.exact` (the CP-SAT model of
:mod:`topoplan.formulations.bcast_cpsat`); all are registered in :data:`METHODS`
(:mod:`topoplan.problems.bcast.registry`).

Examples
--------
>>> from topoplan.problems.bcast.allocation import cluster
>>> topo = cluster(4, 4)
>>> p = BcastProblem.build(topo, placement=list(range(0, 16, 2)), root=0, bytes_B=1024, tree="binomial")
>>> solve(p, "bft").plan["order"][0]
0
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass

import numpy as np

from topoplan.formulations.bcast_cpsat import node_classes
from topoplan.problems.bcast import delay as delay_mod
from topoplan.problems.bcast import trees
from topoplan.problems.bcast.timing import CostModel, TimeModel, link_latency_s, per_hop_s
from topoplan.problems.bcast.registry import METHODS, STARTS
from topoplan.core.errors import TopoplanError
from topoplan.core.fingerprint import fingerprint
from topoplan.core.placement import Placement, from_nodes, int_array
from topoplan.core.topology import check_count, check_number
from topoplan.problems.result import check_inputs, PlanResult, replay_cost_s, solve_with, strict_options
from topoplan.traffic.trace import Trace
from topoplan.core.interrupt import stop_requested
from topoplan.core.progress import report
from topoplan.sim.simmodel import SimModel
from topoplan.sim.run import simulate_plan
from topoplan.traffic.collectives import schedule

__all__ = ["BcastProblem", "METHODS", "STARTS", "solve", "validate_plan", "simulated_time", "p2p_records",
           "dft_visit", "bft_visit", "greedy_visit"]


@dataclass
class BcastProblem:
    """Inputs of one reordering.

    ``nodes``: allocation (node ids, allocation order); ``root``: root rank;
    ``delay``: matrix over ``nodes`` used by dft/bft/greedy; ``model`` scores
    an assignment; ``delay_kind`` names the delay source.

    Parameters
    ----------
    topology, nodes, root, bytes_B, schedule, delay, delay_kind, costs, model : the fields above;
    build them with :meth:`BcastProblem.build`.

    Examples
    --------
    >>> from topoplan.problems.bcast.allocation import cluster
    >>> p = BcastProblem.build(cluster(4, 4), placement=list(range(0, 16, 2)), root=0, bytes_B=1024, tree="binomial")
    >>> p.n, p.schedule.kind, p.nodes[:3].tolist()
    (8, 'binomial', [0, 2, 4])
    """

    topology: object
    nodes: np.ndarray
    root: int
    bytes_B: float
    schedule: trees.Schedule
    delay: np.ndarray
    delay_kind: str
    costs: CostModel
    model: TimeModel

    def fingerprint(self) -> dict[str, str]:
        """Fingerprints of the topology and the allocation (node list) this problem was built from."""
        return fingerprint(topology=self.topology, allocation=np.asarray(self.nodes, np.int64))

    @classmethod
    @strict_options("BcastProblem.build")
    def build(cls, topology, traffic=None, placement=None, *, root: int = 0, bytes_B: float = 1.0,
              tree: str = "knomial", k: int = 4, delay: str | np.ndarray = "auto",
              per_hop_delay_s: float | None = None, short_B: float = trees.SHORT_MSG_B,
              long_B: float = trees.LONG_MSG_B) -> "BcastProblem":
        """Build a problem (the shape of every builder: ``build(topology, traffic, placement=None, **options)``).

        Parameters
        ----------
        topology : the machine (any topology kind with hosts).
        traffic : must be None: the traffic is the Bcast itself, given by ``root``, ``bytes_B`` and ``tree``.
        placement : the allocation, required: node ids in allocation order (rank i of the node-leader
            communicator on node ``placement[i]``), or a :class:`topoplan.core.placement.Placement` of those ranks.
        root : root rank (its node stays fixed).
        bytes_B : message size.
        tree : ``knomial``, ``binomial``, ``scatter-allgather``, ``scatter-ring``, ``scatter-rd`` or ``auto``.
        k : k-nomial factor.
        delay : what dft/bft/greedy call close: ``auto`` (``speed`` when the allocation's link rates differ,
            else ``hops``), ``hops``, ``speed``, a file path or an n x n matrix.
        per_hop_delay_s : per-switch-hop latency of the time model (default: the topology's).
        short_B, long_B : the MPICH size thresholds of ``auto`` / ``scatter-allgather``.

        Errors name the field (``placement``, ``root``, ``bytes_B``, ...); the CLI names its flags.
        """
        check_inputs(topology, None, traffic_optional=True)   # (its traffic is the Bcast itself: said below)
        if traffic is not None:
            raise TopoplanError("field 'traffic': a Bcast problem's traffic is the Bcast itself (options root, "
                                "bytes_B, tree); give the allocation as placement and leave traffic None")
        if placement is None:
            raise TopoplanError("field 'placement': the allocation is required (node ids in allocation order)")
        nodes = placement.rank_to_node if isinstance(placement, Placement) else int_array(placement,
                                                                                             "field 'placement'")
        nodes = np.asarray(nodes, dtype=np.int64).reshape(-1)
        n = len(nodes)
        if n < 1:
            raise TopoplanError("field 'placement': empty allocation")
        bad = np.flatnonzero((nodes < 0) | (nodes >= topology.n_nodes))
        if bad.size:
            raise TopoplanError(f"field 'placement': item {bad[0]}: node {nodes[bad[0]]} is not a node of the "
                                f"topology (0-{topology.n_nodes - 1})")
        if not 0 <= check_count(root, "root", minimum=0) < n:
            raise TopoplanError(f"field 'root': {root} must be a rank between 0 and {n - 1}")
        bytes_B = check_number(bytes_B, "bytes_B")
        sched = trees.build(tree, n, float(bytes_B), k=k, short_B=short_B, long_B=long_B)
        if isinstance(delay, np.ndarray):
            if delay.shape != (n, n):
                raise TopoplanError(f"field 'delay': the matrix is {delay.shape}, the allocation has {n} nodes")
            dm, kind = delay.astype(np.float64), "matrix"
        else:
            kind = delay_mod.resolve(str(delay), topology, nodes)
            dm = delay_mod.delay_matrix(kind, topology, nodes)
        hops = delay_mod.hops(topology, nodes)
        hop_s = per_hop_s(topology) if per_hop_delay_s is None else float(per_hop_delay_s)
        costs = CostModel.build(hops, delay_mod.node_bw(topology, nodes), hop_s, link_latency_s(topology))
        return cls(topology, nodes, int(root), float(bytes_B), sched, dm, kind, costs, TimeModel(sched, costs))

    @property
    def n(self) -> int:
        return len(self.nodes)

    def default_assign(self) -> np.ndarray:
        """Allocation order: position p holds rank (p + root) mod n on allocation[rank]."""
        return trees.rank_of(np.arange(self.n), self.root, self.n).astype(np.int64)

    def order_of(self, assign) -> np.ndarray:
        """New rank -> node id."""
        pos = trees.position_of(np.arange(self.n), self.root, self.n)
        return self.nodes[np.asarray(assign)[pos]]

    def assign_of(self, order) -> np.ndarray:
        local = {int(v): i for i, v in enumerate(self.nodes)}
        try:
            by_rank = np.array([local[int(v)] for v in order], dtype=np.int64)
        except KeyError as exc:
            raise TopoplanError(f"order: node {exc.args[0]} is not in the allocation") from None
        return by_rank[trees.rank_of(np.arange(self.n), self.root, self.n)]


# ---------------------------------------------------------------- methods
def _result(problem: BcastProblem, assign, status="heuristic", bound=None, **metrics) -> PlanResult:
    t = problem.model.time(assign)
    order = problem.order_of(assign)
    return PlanResult(method="", objective=t, plan={"order": order.tolist()}, status=status, bound=bound,
                      metrics={"predicted_time_s": t, **metrics})


@METHODS.register("default")
def default(problem: BcastProblem, *, time_limit=None, seed=None) -> PlanResult:
    """Ranks in allocation order (MVAPICH2 without topology information)."""
    return _result(problem, problem.default_assign())


def _closest_fill(problem: BcastProblem, visit) -> np.ndarray:
    """Give each visited position the unassigned node closest to its parent's node (ties: allocation order)."""
    n = problem.n
    assign = np.full(n, -1, dtype=np.int64)
    assign[0] = problem.root
    free = np.ones(n, dtype=bool)
    free[problem.root] = False
    par = problem.schedule.parent
    big = np.inf
    for p in visit:
        row = np.where(free, problem.delay[assign[par[p]]], big)
        j = int(np.argmin(row))  # argmin returns the first minimum: allocation order breaks ties
        assign[p] = j
        free[j] = False
    return assign


def dft_visit(schedule) -> list[int]:
    """Depth-first (pre-order) positions below the root, children in send order.

    Parameters
    ----------
    schedule : :class:`topoplan.problems.bcast.trees.Schedule`.

    Returns
    -------
    list of positions.

    Examples
    --------
    >>> from topoplan.problems.bcast.trees import binomial
    >>> dft_visit(binomial(8))
    [4, 6, 7, 5, 2, 3, 1]
    """
    out, stack = [], [c for c, _ in reversed(schedule.sends[0])]
    while stack:
        p = stack.pop()
        out.append(p)
        stack.extend(c for c, _ in reversed(schedule.sends[p]))
    return out


def bft_visit(schedule) -> list[int]:
    """Breadth-first positions below the root, children in send order.

    Parameters
    ----------
    schedule : :class:`topoplan.problems.bcast.trees.Schedule`.

    Returns
    -------
    list of positions.

    Examples
    --------
    >>> from topoplan.problems.bcast.trees import binomial
    >>> bft_visit(binomial(8))
    [4, 2, 1, 6, 5, 3, 7]
    """
    out, queue, i = [], [c for c, _ in schedule.sends[0]], 0
    while i < len(queue):
        p = queue[i]; i += 1
        out.append(p)
        queue.extend(c for c, _ in schedule.sends[p])
    return out


@METHODS.register("dft")
def dft(problem: BcastProblem, *, time_limit=None, seed=None) -> PlanResult:
    """002's depth-first traversal heuristic."""
    return _result(problem, _closest_fill(problem, dft_visit(problem.schedule)))


@METHODS.register("bft")
def bft(problem: BcastProblem, *, time_limit=None, seed=None) -> PlanResult:
    """002's breadth-first traversal heuristic."""
    return _result(problem, _closest_fill(problem, bft_visit(problem.schedule)))


def greedy_visit(schedule) -> list[int]:
    """Critical-subtree-first: among positions whose parent is placed, the largest subtree goes next.

    Ties go to the earlier send (then the lower position).

    Parameters
    ----------
    schedule : :class:`topoplan.problems.bcast.trees.Schedule`.

    Returns
    -------
    list of positions.

    Examples
    --------
    >>> from topoplan.problems.bcast.trees import binomial
    >>> greedy_visit(binomial(8))
    [4, 6, 2, 3, 7, 5, 1]
    """
    size = schedule.subtree_sizes()
    heap = [(-int(size[c]), j, c) for j, (c, _) in enumerate(schedule.sends[0])]
    heapq.heapify(heap)
    out = []
    while heap:
        _, _, p = heapq.heappop(heap)
        out.append(p)
        for j, (c, _) in enumerate(schedule.sends[p]):
            heapq.heappush(heap, (-int(size[c]), j, c))
    return out


@METHODS.register("greedy")
def greedy(problem: BcastProblem, *, time_limit=None, seed=None) -> PlanResult:
    """Largest pending subtree first gets the closest remaining node to its parent."""
    return _result(problem, _closest_fill(problem, greedy_visit(problem.schedule)))


HEURISTICS = ("default", "dft", "bft", "greedy")


def _start_names(init, default=HEURISTICS) -> list[str]:
    """The heuristics an ``init`` option names: None (``default``), one name or several."""
    names = list(default) if init is None else [init] if isinstance(init, str) else list(init)
    bad = [x for x in names if x not in HEURISTICS]
    if bad or not names:
        raise TopoplanError(f"field 'init': unknown start {bad[0] if bad else init!r} "
                            f"(one or more of {', '.join(HEURISTICS)})")
    return names


def _heuristic_assign(problem: BcastProblem, name: str) -> np.ndarray:
    if name == "default":
        return problem.default_assign()
    visit = {"dft": dft_visit, "bft": bft_visit, "greedy": greedy_visit}[name]
    return _closest_fill(problem, visit(problem.schedule))


@METHODS.register("anneal")
def anneal(problem: BcastProblem, *, time_limit=None, seed=0, init: str | tuple | None = None,
           max_steps: int | None = None, t0: float = 0.02) -> PlanResult:
    """Simulated annealing over assignments (root fixed), swapping two positions per move.

    Parameters
    ----------
    problem : :class:`BcastProblem`.
    time_limit : seconds (default min(10 s, 0.1 s per leader)); with ``max_steps`` the first to run out stops.
    seed : random seed.
    init : heuristic(s) to start from: one or more of default, dft, bft, greedy (default: the best of all four).
    max_steps : number of moves.
    t0 : start temperature, relative to the start score.

    The score adds a small multiple of the mean arrival to the Bcast time so
    moves off the critical path still count.
    """
    assign, info = run_anneal(problem, time_limit=time_limit, seed=seed, max_steps=max_steps, init=init, t0=t0)
    return _result(problem, assign, **info)


def run_anneal(problem: BcastProblem, *, time_limit=None, seed=0, max_steps=None, init=None, t0=0.02):
    """The annealing loop; returns (assign, info).

    Runs until ``time_limit`` (default min(10 s, 0.1 s per leader)) or ``max_steps`` moves;
    the temperature falls geometrically with the fraction of the budget used.
    """
    rng = np.random.default_rng(seed)
    n = problem.n
    starts = {name: _heuristic_assign(problem, name) for name in _start_names(init)}
    model = problem.model

    def score(a):
        arr = model.arrivals(a)
        t = float(arr.max(initial=0.0)) + model.allgather_time(a)
        return t + 1e-3 * float(arr.mean()), t

    cands = {k: score(v) for k, v in starts.items()}
    first = min(cands, key=lambda k: cands[k][0])
    cur = starts[first].copy()
    cur_s, cur_t = cands[first]
    best, best_s, best_t = cur.copy(), cur_s, cur_t
    if n <= 2:
        return best, {"steps": 0, "init": first}
    budget = min(10.0, 0.1 * n) if time_limit is None else float(time_limit)
    iters = max_steps if max_steps is not None else 10**9  # by default the time limit ends the run
    # interchangeable nodes (same switch and speed): swapping two of them changes nothing, so skip such moves
    cls = _swap_classes(problem)
    t_hi, t_lo = t0 * cur_s, 1e-5 * cur_s
    t_begin = time.perf_counter()
    it, frac = 0, 0.0
    for it in range(iters):
        if it % 128 == 0:
            frac = max(it / iters, (time.perf_counter() - t_begin) / budget)
            if frac >= 1.0 or stop_requested():   # Ctrl-C: keep the best order found so far
                break
        temp = t_hi * (t_lo / t_hi) ** frac
        i = int(rng.integers(1, n))
        for _ in range(8):
            j = int(rng.integers(1, n))
            if cls[cur[i]] != cls[cur[j]]:
                break
        if cls[cur[i]] == cls[cur[j]]:
            continue
        cur[i], cur[j] = cur[j], cur[i]
        s, t = score(cur)
        if s <= cur_s or rng.random() < np.exp((cur_s - s) / temp):
            cur_s, cur_t = s, t
            if s < best_s:
                best, best_s, best_t = cur.copy(), s, t
                report(incumbent=best_t)
        else:
            cur[i], cur[j] = cur[j], cur[i]
    return best, {"steps": it + 1, "init": first}


def _swap_classes(problem: BcastProblem) -> np.ndarray:
    """Class id per local node (interchangeable nodes share one); all distinct above 512 leaders (cost)."""
    if problem.n > 512:
        return np.arange(problem.n)
    return node_classes(problem.costs.latency_s, problem.costs.inv_bw_s_per_B)


# ---------------------------------------------------------------- scoring
def validate_plan(problem: BcastProblem, res: PlanResult) -> None:
    """The order must be a permutation of the allocation keeping the root on its node.

    Parameters
    ----------
    problem : :class:`BcastProblem`; res : a method's PlanResult.

    Returns
    -------
    None; raises TopoplanError when the plan is invalid.

    Examples
    --------
    >>> from topoplan.problems.bcast.allocation import cluster
    >>> p = BcastProblem.build(cluster(4, 4), placement=list(range(0, 16, 2)), root=0, bytes_B=1024, tree="binomial")
    >>> validate_plan(p, solve(p, "bft", simulate=False))
    """
    order = np.asarray(res.plan["order"], dtype=np.int64)
    if len(order) != problem.n or set(order.tolist()) != set([int(v) for v in problem.nodes]):
        raise TopoplanError(f"{res.method}: order is not a permutation of the allocation")
    if order[problem.root] != problem.nodes[problem.root]:
        raise TopoplanError(f"{res.method}: the root rank moved off its node")


def p2p_records(problem: BcastProblem) -> list[tuple]:
    """The Bcast as isend/irecv/waitall records over new ranks: every rank's steps of
    :func:`topoplan.traffic.collectives.schedule` for this tree (one step, then wait for it, as the replayer runs a
    collective; a parent sends to its children one after another, as the time model has it).

    Parameters
    ----------
    problem : :class:`BcastProblem`.

    Returns
    -------
    list of trace records ``(rank, op, peer, bytes, root, comm_size, t_start, t_end)``.

    Examples
    --------
    >>> from topoplan.problems.bcast.allocation import cluster
    >>> p = BcastProblem.build(cluster(4, 4), placement=list(range(0, 16, 2)), root=0, bytes_B=1024, tree="binomial")
    >>> recs = p2p_records(p)
    >>> len(recs), recs[0]
    (28, (0, 'isend', 4, 1024.0, -1, 8, 0.0, 0.0))
    """
    s, n, root = problem.schedule, problem.n, problem.root
    recs: list[tuple] = []
    for r in range(n):
        for st in schedule("bcast", n, r, root, s.bytes_B, algorithm=s.kind, k=s.k):
            recs += [(r, "irecv", int(peer), float(b), -1, n, 0.0, 0.0) for peer, b in st.recvs]
            recs += [(r, "isend", int(peer), float(b), -1, n, 0.0, 0.0) for peer, b in st.sends]
            recs.append((r, "waitall", -1, 0.0, -1, n, 0.0, 0.0))
    return recs


def n_messages(problem: BcastProblem) -> int:
    return len(problem.schedule.edges["child"]) + sum(len(a) * rep for a, _, _, rep in problem.schedule.allgather_pairs())


def simulated_time(problem: BcastProblem, order, *, max_messages: float = 20000, sim_model=None) -> float | None:
    """Replay the Bcast in the simulator (:func:`topoplan.sim.run.simulate_plan`); None when it has more than
    ``max_messages`` point-to-point messages. ``sim_model``: :class:`topoplan.sim.simmodel.SimModel` or its dict.

    Parameters
    ----------
    problem : :class:`BcastProblem`; order : new rank -> node id; max_messages : size limit;
    sim_model : simulator model (None: the default).

    Returns
    -------
    float (seconds) or None.

    Examples
    --------
    >>> from topoplan.problems.bcast.allocation import cluster
    >>> p = BcastProblem.build(cluster(4, 4), placement=list(range(0, 16, 2)), root=0, bytes_B=1024, tree="binomial")
    >>> simulated_time(p, p.nodes) > 0
    True
    >>> simulated_time(p, p.nodes, max_messages=3) is None
    True
    """
    if n_messages(problem) > max_messages:
        return None
    trace = Trace.from_records(p2p_records(problem), problem.n, source="bcast")
    placement = from_nodes(np.asarray(order, dtype=np.int64), problem.topology)
    return float(simulate_plan(problem.topology, trace, placement=placement, model=sim_model)["makespan_s"])


def solve(problem: BcastProblem, method: str = "bft", *, time_limit: float | None = None, seed: int | None = 0,
          simulate: bool = True, max_sim_messages: int = 20000, score: str = "bound", sim_model=None,
          **options) -> PlanResult:
    """Reorder the node-leader communicator of ``problem`` with ``method`` (see :data:`METHODS`).

    Returns a PlanResult with plan key ``order`` (new rank -> node id) and
    metrics ``predicted_time_s`` and ``simulated_time_s`` (None when the
    Bcast has more than ``max_sim_messages`` point-to-point messages or
    ``simulate`` is False). With ``score='simulated'`` the method's order and
    the orders of the heuristics it starts from (:data:`STARTS`) are replayed
    under ``sim_model`` (whatever their size) and the fastest is returned; inside a command with a deadline
    (:mod:`topoplan.core.deadline`) these replays share its limit with the method
    (:func:`topoplan.problems.result.solve_with`'s ``sim_cost``).
    ``options`` are the method's own (``METHODS.options(method)``, e.g. ``init`` and
    ``max_steps`` for ``anneal``); an option the method does not declare is refused,
    naming the known ones.

    Parameters
    ----------
    problem : :class:`BcastProblem`; method : a name in :data:`METHODS`; time_limit, seed : method budget
    and seed; simulate, max_sim_messages, score, sim_model : simulation and scoring (above);
    options : the method's own options.

    Returns
    -------
    PlanResult

    Examples
    --------
    >>> from topoplan.problems.bcast.allocation import cluster
    >>> p = BcastProblem.build(cluster(4, 4), placement=list(range(0, 16, 2)), root=0, bytes_B=1024, tree="binomial")
    >>> r = solve(p, "bft", simulate=False)
    >>> r.plan["order"][0], r.metrics["simulated_time_s"] is None
    (0, True)
    """
    sim_fn = None
    if score == "simulated":
        def sim_fn(plan):
            return simulated_time(problem, plan["order"], max_messages=np.inf, sim_model=sim_model)
    # one replay: about three calls a message (its isend and irecv, and the waitalls of the steps)
    res = solve_with(METHODS, problem, method, time_limit=time_limit, seed=seed, validate=validate_plan,
                     score=score, simulate=sim_fn, starts=STARTS,
                     sim_cost=lambda: replay_cost_s(3 * n_messages(problem)), **options)
    default_t = problem.model.time(problem.default_assign())
    res.metrics["default_time_s"] = default_t
    res.metrics["speedup_vs_default"] = default_t / res.objective if res.objective > 0 else 1.0
    if "simulated_s" in res.metrics:
        res.metrics["simulated_time_s"] = res.metrics["simulated_s"]
    else:
        res.metrics["simulated_time_s"] = (simulated_time(problem, res.plan["order"], max_messages=max_sim_messages,
                                                          sim_model=sim_model) if simulate else None)
    if res.metrics["simulated_time_s"] is not None:
        res.options["sim_model"] = SimModel.coerce(sim_model).to_dict()
    res.metrics.update({"n_leaders": problem.n, "tree": problem.schedule.kind, "bytes": problem.bytes_B,
                        "delay": problem.delay_kind})
    res.plan["root"] = problem.root
    res.plan["allocation_nodes"] = [int(v) for v in problem.nodes]
    return res
