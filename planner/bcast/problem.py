"""The Bcast reordering problem and its methods (002's DFT/BFT and more).

A :class:`BcastProblem` holds the allocation (node ids in allocation order =
the default node-leader communicator), the root rank, the message size and
the logical schedule. A method returns an ``assign`` array (tree position ->
local allocation index, position 0 = root, fixed to the root rank's node);
the plan key ``order`` is new communicator rank -> node id.

Example
-------
>>> from planner.bcast.allocation import cluster
>>> topo = cluster(4, 4)
>>> p = BcastProblem.build(topo, list(range(0, 16, 2)), root=0, bytes_B=1024, tree="binomial")
>>> solve(p, "bft").plan["order"][0]
0
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.bcast import delay as delay_mod
from planner.bcast import trees
from planner.bcast.model import CostModel, TimeModel, link_latency_s, per_hop_s
from planner.errors import TopoplanError
from planner.result import PlanResult, solve_with


@dataclass
class BcastProblem:
    """Inputs of one reordering.

    ``nodes``: allocation (node ids, allocation order); ``root``: root rank;
    ``delay``: matrix over ``nodes`` used by dft/bft/greedy; ``model`` scores
    an assignment; ``delay_kind`` names the delay source.
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

    @classmethod
    def build(cls, topology, nodes, *, root: int = 0, bytes_B: float = 1.0, tree: str = "knomial", k: int = 4,
              delay: str | np.ndarray = "hops", per_hop_delay_s: float | None = None,
              short_B: float = trees.SHORT_MSG_B, long_B: float = trees.LONG_MSG_B) -> "BcastProblem":
        """Build a problem; ``delay`` is ``hops``, ``speed``, a file path or a matrix."""
        nodes = np.asarray(nodes, dtype=np.int64)
        n = len(nodes)
        if n < 1:
            raise TopoplanError("--allocation: empty allocation")
        if not 0 <= root < n:
            raise TopoplanError(f"--root {root}: must be a rank between 0 and {n - 1}")
        if bytes_B < 0:
            raise TopoplanError(f"--bytes {bytes_B}: must be non-negative")
        sched = trees.build(tree, n, float(bytes_B), k=k, short_B=short_B, long_B=long_B)
        if isinstance(delay, np.ndarray):
            if delay.shape != (n, n):
                raise TopoplanError(f"delay matrix is {delay.shape}, the allocation has {n} nodes")
            dm, kind = delay.astype(np.float64), "matrix"
        else:
            dm, kind = delay_mod.delay_matrix(delay, topology, nodes), str(delay)
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


def default(problem: BcastProblem, *, time_limit=None, seed=None, **_) -> PlanResult:
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
    """Depth-first (pre-order) positions below the root, children in send order."""
    out, stack = [], [c for c, _ in reversed(schedule.sends[0])]
    while stack:
        p = stack.pop()
        out.append(p)
        stack.extend(c for c, _ in reversed(schedule.sends[p]))
    return out


def bft_visit(schedule) -> list[int]:
    """Breadth-first positions below the root, children in send order."""
    out, queue, i = [], [c for c, _ in schedule.sends[0]], 0
    while i < len(queue):
        p = queue[i]; i += 1
        out.append(p)
        queue.extend(c for c, _ in schedule.sends[p])
    return out


def dft(problem: BcastProblem, *, time_limit=None, seed=None, **_) -> PlanResult:
    """002's depth-first traversal heuristic."""
    return _result(problem, _closest_fill(problem, dft_visit(problem.schedule)))


def bft(problem: BcastProblem, *, time_limit=None, seed=None, **_) -> PlanResult:
    """002's breadth-first traversal heuristic."""
    return _result(problem, _closest_fill(problem, bft_visit(problem.schedule)))


def greedy_visit(schedule) -> list[int]:
    """Critical-subtree-first: among positions whose parent is placed, the largest subtree goes next.

    Ties go to the earlier send (then the lower position).
    """
    import heapq

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


def greedy(problem: BcastProblem, *, time_limit=None, seed=None, **_) -> PlanResult:
    """Largest pending subtree first gets the closest remaining node to its parent."""
    return _result(problem, _closest_fill(problem, greedy_visit(problem.schedule)))


def anneal(problem: BcastProblem, *, time_limit=None, seed=0, iterations: int | None = None,
           start: str = "best", t_start: float = 0.02, **_) -> PlanResult:
    """Simulated annealing over assignments (root fixed), swapping two positions per move.

    Starts from the best of default/dft/bft/greedy; the score adds a small
    multiple of the mean arrival so moves off the critical path still count.
    """
    assign, info = run_anneal(problem, time_limit=time_limit, seed=seed, iterations=iterations, start=start,
                              t_start=t_start)
    return _result(problem, assign, **info)


def run_anneal(problem: BcastProblem, *, time_limit=None, seed=0, iterations=None, start="best", t_start=0.02):
    """The annealing loop; returns (assign, info).

    Runs until ``time_limit`` (default min(10 s, 0.1 s per leader)) or ``iterations``;
    the temperature falls geometrically with the fraction of the budget used.
    """
    import time

    rng = np.random.default_rng(seed)
    n = problem.n
    starts = {"default": problem.default_assign()}
    if start in ("best", "dft"):
        starts["dft"] = _closest_fill(problem, dft_visit(problem.schedule))
    if start in ("best", "bft"):
        starts["bft"] = _closest_fill(problem, bft_visit(problem.schedule))
    if start in ("best", "greedy"):
        starts["greedy"] = _closest_fill(problem, greedy_visit(problem.schedule))
    if start != "best" and start not in starts:
        raise TopoplanError(f"anneal: start must be best, default, dft, bft or greedy, got {start!r}")
    model = problem.model

    def score(a):
        arr = model.arrivals(a)
        t = float(arr.max(initial=0.0)) + model.allgather_time(a)
        return t + 1e-3 * float(arr.mean()), t

    cands = {k: score(v) for k, v in starts.items()} if start == "best" else {start: score(starts[start])}
    first = min(cands, key=lambda k: cands[k][0])
    cur = starts[first].copy()
    cur_s, cur_t = cands[first]
    best, best_s, best_t = cur.copy(), cur_s, cur_t
    if n <= 2:
        return best, {"iterations": 0, "start": first}
    budget = min(10.0, 0.1 * n) if time_limit is None else float(time_limit)
    iters = iterations if iterations is not None else 10**9  # by default the time limit ends the run
    # interchangeable nodes (same switch and speed): swapping two of them changes nothing, so skip such moves
    cls = _swap_classes(problem)
    t_hi, t_lo = t_start * cur_s, 1e-5 * cur_s
    t0 = time.perf_counter()
    it, frac = 0, 0.0
    for it in range(iters):
        if it % 128 == 0:
            frac = max(it / iters, (time.perf_counter() - t0) / budget)
            if frac >= 1.0:
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
        else:
            cur[i], cur[j] = cur[j], cur[i]
    return best, {"iterations": it + 1, "start": first}


def _swap_classes(problem: BcastProblem) -> np.ndarray:
    """Class id per local node (interchangeable nodes share one); all distinct above 512 leaders (cost)."""
    if problem.n > 512:
        return np.arange(problem.n)
    from models.bcast_milp import node_classes

    return node_classes(problem.costs.latency_s, problem.costs.inv_bw_s_per_B)


def ilp(problem: BcastProblem, *, time_limit=None, seed=0, **options) -> PlanResult:
    """Exact CP-SAT model (models/bcast_milp.py): minimizes the latest arrival, with bound and gap."""
    from models.backends import call_isolated
    from models.bcast_milp import solve_exact

    warm = None
    for m in (dft, bft, greedy):
        r = m(problem)
        if warm is None or r.objective < warm.objective:
            warm = r
    out = call_isolated("ortools", solve_exact, problem, time_limit=time_limit, seed=seed,
                        hint=problem.assign_of(warm.plan["order"]), **options)
    res = _result(problem, out["assign"], status=out["status"], bound=out["bound"],
                  solver="cp-sat", classes=out["classes"])
    res.message = out.get("message", "")
    return res


METHODS = {"default": default, "dft": dft, "bft": bft, "greedy": greedy, "anneal": anneal, "ilp": ilp}

# The heuristics each method starts from: with score='simulated' their orders compete with the method's.
STARTS = {"anneal": ("default", "dft", "bft", "greedy"), "ilp": ("default", "dft", "bft", "greedy")}


# ---------------------------------------------------------------- scoring
def validate_plan(problem: BcastProblem, res: PlanResult) -> None:
    """The order must be a permutation of the allocation keeping the root on its node."""
    order = np.asarray(res.plan["order"], dtype=np.int64)
    if len(order) != problem.n or set(order.tolist()) != set([int(v) for v in problem.nodes]):
        raise TopoplanError(f"{res.method}: order is not a permutation of the allocation")
    if order[problem.root] != problem.nodes[problem.root]:
        raise TopoplanError(f"{res.method}: the root rank moved off its node")


def p2p_records(problem: BcastProblem) -> list[tuple]:
    """The Bcast as isend/irecv/waitall records over new ranks."""
    s, n, root = problem.schedule, problem.n, problem.root
    rank = lambda p: int((p + root) % n)  # noqa: E731
    recs: list[list[tuple]] = [[] for _ in range(n)]
    bytes_in = {c: b for lst in s.sends for c, b in lst}
    for p in range(n):
        r = rank(p)
        if s.parent[p] >= 0:
            recs[p] += [(r, "irecv", rank(s.parent[p]), bytes_in[p], -1, n, 0.0, 0.0),
                        (r, "waitall", -1, 0.0, -1, n, 0.0, 0.0)]
        for c, b in s.sends[p]:  # one send after another, as the time model (and a blocking send) has it
            recs[p] += [(r, "isend", rank(c), b, -1, n, 0.0, 0.0), (r, "waitall", -1, 0.0, -1, n, 0.0, 0.0)]
    for src, dst, nb, rep in s.allgather_pairs():
        for _ in range(rep):
            peer_in = {int(d): int(a) for a, d in zip(src, dst)}
            for a, d in zip(src, dst):
                recs[a].append((rank(a), "isend", rank(d), nb, -1, n, 0.0, 0.0))
            for d, a in peer_in.items():
                recs[d].append((rank(d), "irecv", rank(a), nb, -1, n, 0.0, 0.0))
            for p in set(src.tolist()) | set(dst.tolist()):
                recs[p].append((rank(p), "waitall", -1, 0.0, -1, n, 0.0, 0.0))
    return [r for lst in recs for r in lst]


def n_messages(problem: BcastProblem) -> int:
    return len(problem.schedule.edges["child"]) + sum(len(a) * rep for a, _, _, rep in problem.schedule.allgather_pairs())


def simulated_time(problem: BcastProblem, order, *, max_messages: float = 20000, sim_model=None) -> float | None:
    """Replay the Bcast in the simulator (:func:`sim.run.simulate_plan`); None when it has more than
    ``max_messages`` point-to-point messages. ``sim_model``: :class:`sim.model.SimModel` or its dict."""
    if n_messages(problem) > max_messages:
        return None
    from planner.placement import from_nodes
    from planner.trace import Trace
    from sim.run import simulate_plan

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
    under ``sim_model`` (whatever their size) and the fastest is returned.
    """
    sim_fn = None
    if score == "simulated":
        def sim_fn(plan):
            return simulated_time(problem, plan["order"], max_messages=np.inf, sim_model=sim_model)
    res = solve_with(METHODS, problem, method, problem_name="bcast", time_limit=time_limit, seed=seed,
                     validate=validate_plan, score=score, simulate=sim_fn, starts=STARTS, **options)
    default_t = problem.model.time(problem.default_assign())
    res.metrics["default_time_s"] = default_t
    res.metrics["speedup_vs_default"] = default_t / res.objective if res.objective > 0 else 1.0
    if "simulated_s" in res.metrics:
        res.metrics["simulated_time_s"] = res.metrics["simulated_s"]
    else:
        res.metrics["simulated_time_s"] = (simulated_time(problem, res.plan["order"], max_messages=max_sim_messages,
                                                          sim_model=sim_model) if simulate else None)
    if res.metrics["simulated_time_s"] is not None:
        from sim.model import SimModel

        res.options["sim_model"] = SimModel.coerce(sim_model).to_dict()
    res.metrics.update({"n_leaders": problem.n, "tree": problem.schedule.kind, "bytes": problem.bytes_B,
                        "delay": problem.delay_kind})
    res.plan["root"] = problem.root
    res.plan["allocation_nodes"] = [int(v) for v in problem.nodes]
    return res
