"""The papers' circuit assignments, a matching baseline and EPS only.

Every method picks circuits (pairs of OCS nodes under different switches, at
most ``ports`` per node, at most ``max_circuits`` in all) from the *large*
inter-node traffic (messages of at least the threshold; 000 3.1, 001 3.2.1,
003 3.3.1), then builds the distance-vector forwarding tables of
:func:`topoplan.problems.circuits.forwarding.distance_vector` and is scored by the
communication-time bound.

- :func:`switch_partitioning` -- ``sp``, 000 section 3.2.
- :func:`three_step` -- ``three-step``, 001 section 3.2.2.
- :func:`greedy` -- ``greedy``, 003 section 3.3.2 / Fig. 3.
- :func:`matching` -- ``matching``, maximum-weight matching (c-Through/Helios style), exact.
- :func:`eps_only` -- ``none``.

A "rank" tie-break uses the smallest MPI rank placed on a node; a node pair
is ranked by its two nodes' smallest ranks, lower first.

Every method takes ``tables``: ``full`` (default), forwarding entries for every
node with a relay route (nodes x switches entries once circuits connect every
switch), or ``used``, only the entries the traffic's large messages use (same
circuits, routes and bound). The assignments keep their switch pairs in a heap
(a pair's key changes only when it gets a circuit; a pair without free OCS
nodes never reopens) and read each switch pair's node pairs once, so they grow
with the communicating pairs, not with pairs times circuits.
"""

from __future__ import annotations

import copy
import functools
import heapq
import time

import numpy as np

from topoplan.core import deadline
from topoplan.core.errors import TopoplanError
from topoplan.problems.circuits import blossom
from topoplan.problems.circuits.forwarding import distance_vector
from topoplan.problems.circuits.problem import result_from_plan
from topoplan.problems.circuits.registry import METHODS

__all__ = ["eps_only", "switch_partitioning", "three_step", "greedy", "matching", "matching_cost_s"]

def matching_cost_s(n_ocs: int) -> float:
    """Predicted CPU seconds of the ``matching`` heuristic on ``n_ocs`` OCS nodes: one matching
    (:func:`topoplan.problems.circuits.blossom.solve_cost_s`: interpreted on small graphs until its compiled
    functions are at hand, compiled otherwise, with Numba's import, their loading or their first compilation
    when this process or this machine lacks them).

    Parameters
    ----------
    n_ocs : int
        OCS nodes of the problem.

    Returns
    -------
    float

    Examples
    --------
    >>> from topoplan.problems.circuits import blossom
    >>> matching_cost_s(256) == blossom.solve_cost_s(256)
    True
    """
    return blossom.solve_cost_s(n_ocs)


class _Circuits:
    """Circuits being assigned: free ports per node and per switch, the pairs already joined, circuits per
    switch pair."""

    def __init__(self, problem):
        self.p = problem
        self.free = np.where(problem.is_ocs, problem.ports, 0).astype(np.int64).tolist()
        self.pairs: list[tuple[int, int]] = []
        self.joined: set[tuple[int, int]] = set()
        self.limit = problem.circuit_limit()
        self.per_switch: dict[tuple[int, int], int] = {}   # (A, B), A < B -> circuits
        self.sw = problem.node_switch.tolist()
        self.sw_free = np.bincount(problem.node_switch, weights=self.free,
                                   minlength=problem.n_switches).astype(np.int64).tolist()
        self.ocs_of = [o.tolist() for o in problem.ocs_of_switch()]

    def full(self) -> bool:
        return len(self.pairs) >= self.limit

    def count(self, a: int, b: int) -> int:
        """Circuits between switches ``a`` and ``b``."""
        return self.per_switch.get((a, b) if a < b else (b, a), 0)

    def can(self, u: int, v: int) -> bool:
        sw = self.sw
        return (not self.full() and self.free[u] > 0 and self.free[v] > 0 and sw[u] != sw[v]
                and (min(u, v), max(u, v)) not in self.joined)

    def add(self, u: int, v: int) -> None:
        u, v = int(u), int(v)
        self.free[u] -= 1
        self.free[v] -= 1
        self.pairs.append((min(u, v), max(u, v)))
        self.joined.add((min(u, v), max(u, v)))
        a, b = self.sw[u], self.sw[v]
        self.sw_free[a] -= 1
        self.sw_free[b] -= 1
        key = (a, b) if a < b else (b, a)
        self.per_switch[key] = self.per_switch.get(key, 0) + 1

    def free_pair(self, a: int, b: int, rng=None):
        """A free OCS node under switch ``a`` and one under ``b`` not yet joined: the smallest ids, or random."""
        if self.sw_free[a] <= 0 or self.sw_free[b] <= 0:
            return None
        free = self.free
        fa = [u for u in self.ocs_of[a] if free[u] > 0]
        fb = [v for v in self.ocs_of[b] if free[v] > 0]
        if rng is not None:
            rng.shuffle(fa)
            rng.shuffle(fb)
        for u in fa:
            for v in fb:
                if (min(u, v), max(u, v)) not in self.joined:
                    return u, v
        return None

    def switch_pair_open(self, a: int, b: int) -> bool:
        return not self.full() and self.free_pair(a, b) is not None


def _switch_pairs(problem):
    """Communicating switch pairs ``A < B`` (ascending) and their communication counts, as arrays."""
    count = problem.switch_pair_counts()
    a, b = np.nonzero(np.triu(count, 1))
    return a, b, count[a, b]


def _most_wanted(circ: _Circuits, a, b, c, pick, clock: "_Clock | None" = None) -> None:
    """While circuits remain: the open switch pair with the largest count minus circuits given (ties to the
    smaller switch ids) gets one more circuit, ``pick(a, b)``. One heap over the pairs: a pair's key
    changes only when it is picked, and a pair once closed (no free, unjoined OCS nodes on both sides)
    stays closed, so the heap's top that is open is the minimum over the open pairs."""
    free = np.asarray(circ.sw_free)
    keep = (free[a] > 0) & (free[b] > 0)
    heap = list(zip((-(c[keep] - [circ.count(x, y) for x, y in zip(a[keep].tolist(), b[keep].tolist())])).tolist(),
                    a[keep].tolist(), b[keep].tolist()))
    cnt = dict(zip(zip(a[keep].tolist(), b[keep].tolist()), c[keep].tolist()))
    heapq.heapify(heap)
    while heap and not circ.full() and not (clock is not None and clock.over()):
        _, x, y = heapq.heappop(heap)
        if not circ.switch_pair_open(x, y):
            continue
        pick(x, y)
        heapq.heappush(heap, (-(cnt[(x, y)] - circ.count(x, y)), x, y))


TABLES = ("full", "used")


def _tables_option(tables: str) -> None:
    if tables not in TABLES:
        raise TopoplanError(f"field 'tables': choose one of {', '.join(TABLES)}, got {tables!r}")


# The assignments look at the clock once every this many circuits or switch pairs tried (a look costs ~0.1 us).
CLOCK_EVERY = 256


class _Clock:
    """A heuristic's time limit (None: none): :meth:`over` is true once it is reached, looking at the clock only
    every :data:`CLOCK_EVERY` calls (and on ``now``)."""

    def __init__(self, time_limit):
        self.end = None if time_limit is None else time.perf_counter() + float(time_limit)
        self.calls, self.cut = 0, False

    def over(self, now: bool = False) -> bool:
        if self.end is None:
            return False
        self.calls += 1
        if now or self.calls % CLOCK_EVERY == 0:
            self.cut = self.cut or time.perf_counter() >= self.end
        return self.cut


def _finish_by(problem, circ: _Circuits, tables: str, clock: _Clock, name: str):
    """:func:`_finish` within the time limit: once it is reached (during the assignment, which then stopped, or
    before the forwarding tables, which take most of a heuristic's time), the plan without circuits (EPS only:
    the cheapest valid plan, its tables the EPS routes alone), with a message."""
    if clock.over(now=True) and circ.pairs:
        res = _finish(problem, _Circuits(problem), tables)
        res.message = (f"{name} reached its time limit before its forwarding tables ({len(circ.pairs)} circuits "
                       "chosen): the plan without circuits (EPS only)")
        return res
    return _finish(problem, circ, tables)


# Plans of problems up to this many forwarding entries (nodes x switches) are remembered in the problem's cache:
# the starts that ``--score simulated`` compares and the incumbents of ``ilp`` ask for the same heuristic plans
# (on 1,024 nodes each takes 0.5-2 s under load); larger plans would hold too much memory twice.
REMEMBER_MAX_ENTRIES = 1 << 17


def _remembered(method):
    """Keep ``method``'s plan in ``problem._cache`` (per seed and ``tables``) and return a copy on later calls;
    a plan cut short by its time limit (a message says so) is not kept."""
    @functools.wraps(method)
    def run(problem, *, time_limit=None, seed=0, tables: str = "full"):
        key = ("heuristic plan", method.__name__, seed, tables)
        if key in problem._cache:
            return copy.deepcopy(problem._cache[key])
        res = method(problem, time_limit=time_limit, seed=seed, tables=tables)
        if not res.message and problem.n_nodes * problem.n_switches <= REMEMBER_MAX_ENTRIES:
            problem._cache[key] = copy.deepcopy(res)
        return res
    return run


def _finish(problem, circ: _Circuits, tables: str = "full", **extra):
    _tables_option(tables)
    nh = distance_vector(problem, circ.pairs, full=tables == "full")
    return result_from_plan(problem, circ.pairs, nh, status="heuristic", **extra)


def _ocs_pairs(problem):
    """Communicating pairs of OCS nodes under different switches: ``(u, v, bytes, msgs, rank_key)``."""
    u, v, by, msgs = problem.node_pairs()
    sw, ocs = problem.node_switch, problem.is_ocs
    keep = ocs[u] & ocs[v] & (sw[u] != sw[v])
    u, v, by, msgs = u[keep], v[keep], by[keep], msgs[keep]
    r = problem.node_min_rank
    lo, hi = np.minimum(r[u], r[v]), np.maximum(r[u], r[v])
    return u, v, by, msgs, lo, hi


def _round_robin(problem, circ: _Circuits, primary: np.ndarray, u, v, lo, hi, clock: "_Clock | None" = None) -> None:
    """Round robin over switch pairs (ascending ids); per switch pair the free node pair with the largest
    ``primary``, ties to the pair with the smaller rank; rounds repeat while anything is assigned."""
    sw = problem.node_switch
    a, b = np.minimum(sw[u], sw[v]), np.maximum(sw[u], sw[v])
    order = np.lexsort((hi, lo, -primary, b, a))
    uu, vv = u[order].tolist(), v[order].tolist()
    key = a[order] * problem.n_switches + b[order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if len(key) else np.zeros(0, dtype=np.int64)
    pos = starts.tolist()
    ends = np.r_[starts[1:], len(key)].tolist()
    active = list(range(len(pos)))   # switch pairs (ascending) with node pairs left to try
    while not circ.full() and active:
        progress = False
        left = []
        for g in active:
            if clock is not None and clock.over():
                return
            p, e = pos[g], ends[g]
            while p < e:
                i = p
                p += 1
                if circ.can(uu[i], vv[i]):
                    circ.add(uu[i], vv[i])
                    progress = True
                    break
            pos[g] = p
            if p < e:
                left.append(g)
            if circ.full():
                break
        if not progress:
            break
        active = left


@METHODS.register("none")
@_remembered
def eps_only(problem, *, time_limit=None, seed=0, tables: str = "full"):
    """``none``: no circuits; every message takes the EPS.

    Parameters
    ----------
    problem : CircuitProblem
    time_limit : float, optional
        Not used (the method is fast); part of every method's signature.
    seed : int, optional
        Not used (the method is deterministic).
    tables : {"full", "used"}, optional
        ``full`` (default): every node with a relay route gets a forwarding entry towards every switch it
        can reach, so the tables serve any traffic (and another placement); ``used``: only the entries
        this traffic's large messages use (the same routes and bound; fewer entries on large systems).

    Returns
    -------
    PlanResult
        Circuits and forwarding tables, scored by the communication-time bound;
        :func:`topoplan.problems.circuits.problem.solve` fills in method, seed and wall time and validates it.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.matrix import from_arrays
    >>> from topoplan.problems.circuits.problem import CircuitProblem
    >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=4"])   # OCS nodes 0-3, 16-19, ...
    >>> traffic = from_arrays(64, range(4, 12), range(20, 28), [4e7] * 8)  # non-OCS nodes, switch 0 -> 1
    >>> prob = CircuitProblem.build(topo, traffic, placement=list(range(64)))
    >>> res = eps_only(prob)
    >>> res.plan["circuits"], round(res.objective, 3), res.metrics["bottleneck"]
    ([], 0.128, 'S0->top')
    """
    return _finish(problem, _Circuits(problem), tables)


@METHODS.register("sp")
@_remembered
def switch_partitioning(problem, *, time_limit=None, seed=0, tables: str = "full"):
    """``sp``: Switch Partitioning (000 section 3.2).

    Round robin over switch pairs; per switch pair, the communicating pair
    of OCS nodes with the most (large) messages, ties to the pair with the
    smallest rank; further rounds while circuits remain. Only node pairs
    that communicate get circuits.

    Parameters
    ----------
    problem : CircuitProblem
    time_limit : float, optional
        Seconds the call may take: once they are over (while assigning circuits, or before the forwarding
        tables are built), the plan is the one without circuits (EPS only, the cheapest valid plan), with a
        message.
    seed : int, optional
        Not used (the method is deterministic).
    tables : {"full", "used"}, optional
        ``full`` (default): every node with a relay route gets a forwarding entry towards every switch it
        can reach, so the tables serve any traffic (and another placement); ``used``: only the entries
        this traffic's large messages use (the same routes and bound; fewer entries on large systems).

    Returns
    -------
    PlanResult
        Circuits and forwarding tables, scored by the communication-time bound;
        :func:`topoplan.problems.circuits.problem.solve` fills in method, seed and wall time and validates it.

    References
    ----------
    000 section 3.2 (Switch Partitioning).

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.matrix import from_arrays
    >>> from topoplan.problems.circuits.problem import CircuitProblem
    >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=4"])   # OCS nodes 0-3, 16-19, ...
    >>> traffic = from_arrays(64, range(4, 12), range(20, 28), [4e7] * 8)  # non-OCS nodes, switch 0 -> 1
    >>> prob = CircuitProblem.build(topo, traffic, placement=list(range(64)))
    >>> switch_partitioning(prob).plan["circuits"]      # only OCS nodes that talk get circuits
    []
    """
    _tables_option(tables)
    clock = _Clock(time_limit)
    circ = _Circuits(problem)
    u, v, _, msgs, lo, hi = _ocs_pairs(problem)
    _round_robin(problem, circ, msgs, u, v, lo, hi, clock)
    return _finish_by(problem, circ, tables, clock, "sp")


@METHODS.register("three-step")
@_remembered
def three_step(problem, *, time_limit=None, seed=0, tables: str = "full"):
    """``three-step``: the circuit assignment of 001 section 3.2.2.

    1. Pairs of OCS nodes that communicate across switches, by volume
       (largest first, ties to the smaller rank), round robin over switch pairs.
    2. Switch pairs that communicate but have no circuit yet, by communication
       count (number of communicating node pairs; largest first, ties to the
       smaller switch ids): one circuit each between free OCS nodes.
    3. Further circuits to the switch pair with the largest count minus
       circuits already given (ties to the smaller switch ids), one at a time,
       while free OCS nodes remain on both sides.

    Steps 2 and 3 join the free OCS nodes with the smallest ids (the paper
    does not say which).

    Parameters
    ----------
    problem : CircuitProblem
    time_limit : float, optional
        Seconds the call may take: once they are over (while assigning circuits, or before the forwarding
        tables are built), the plan is the one without circuits (EPS only, the cheapest valid plan), with a
        message.
    seed : int, optional
        Not used (the method is deterministic).
    tables : {"full", "used"}, optional
        ``full`` (default): every node with a relay route gets a forwarding entry towards every switch it
        can reach, so the tables serve any traffic (and another placement); ``used``: only the entries
        this traffic's large messages use (the same routes and bound; fewer entries on large systems).

    Returns
    -------
    PlanResult
        Circuits and forwarding tables, scored by the communication-time bound;
        :func:`topoplan.problems.circuits.problem.solve` fills in method, seed and wall time and validates it.

    References
    ----------
    001 section 3.2.2.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.matrix import from_arrays
    >>> from topoplan.problems.circuits.problem import CircuitProblem
    >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=4"])   # OCS nodes 0-3, 16-19, ...
    >>> traffic = from_arrays(64, range(4, 12), range(20, 28), [4e7] * 8)  # non-OCS nodes, switch 0 -> 1
    >>> prob = CircuitProblem.build(topo, traffic, placement=list(range(64)))
    >>> res = three_step(prob)                         # step 2: relay through OCS nodes
    >>> res.plan["circuits"], round(res.objective, 3)
    ([[0, 16], [1, 17], [2, 18], [3, 19]], 0.032)
    """
    _tables_option(tables)
    clock = _Clock(time_limit)
    circ = _Circuits(problem)
    u, v, by, _, lo, hi = _ocs_pairs(problem)
    _round_robin(problem, circ, by, u, v, lo, hi, clock)
    a, b, c = _switch_pairs(problem)
    # step 2: by count, largest first (ties to the smaller ids), one circuit to each pair without one
    free = circ.sw_free
    for x, y in zip(*(arr[np.lexsort((b, a, -c))].tolist() for arr in (a, b))):
        if circ.full() or clock.over():
            break
        if free[x] > 0 and free[y] > 0 and circ.count(x, y) == 0:
            fp = circ.free_pair(x, y)
            if fp is not None:
                circ.add(*fp)
    # step 3: one at a time to the pair with the largest count minus circuits given
    _most_wanted(circ, a, b, c, lambda x, y: circ.add(*circ.free_pair(x, y)), clock)
    return _finish_by(problem, circ, tables, clock, "three-step")


@METHODS.register("greedy")
@_remembered
def greedy(problem, *, time_limit=None, seed=0, tables: str = "full"):
    """``greedy``: the circuit assignment of 003 Fig. 3.

    Repeat: choose a switch pair -- first every communicating switch pair
    once, in ascending order of communication count (ties to the smaller
    switch ids), then the pair with the largest count minus circuits
    assigned; join the pair of free OCS nodes under those switches that
    exchanges the most traffic, else a free OCS node under each chosen at
    random (``seed``). Stops when no communicating switch pair has a free
    OCS node on both sides (line 1 of Fig. 3: while OCS nodes remain), or at
    ``max_circuits``.

    Parameters
    ----------
    problem : CircuitProblem
    time_limit : float, optional
        Seconds the call may take: once they are over (while assigning circuits, or before the forwarding
        tables are built), the plan is the one without circuits (EPS only, the cheapest valid plan), with a
        message.
    seed : int, optional
        Seeds the random choice of OCS nodes.
    tables : {"full", "used"}, optional
        ``full`` (default): every node with a relay route gets a forwarding entry towards every switch it
        can reach, so the tables serve any traffic (and another placement); ``used``: only the entries
        this traffic's large messages use (the same routes and bound; fewer entries on large systems).

    Returns
    -------
    PlanResult
        Circuits and forwarding tables, scored by the communication-time bound;
        :func:`topoplan.problems.circuits.problem.solve` fills in method, seed and wall time and validates it.

    References
    ----------
    003 section 3.3.2 and Fig. 3.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.matrix import from_arrays
    >>> from topoplan.problems.circuits.problem import CircuitProblem
    >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=4"])   # OCS nodes 0-3, 16-19, ...
    >>> traffic = from_arrays(64, range(4, 12), range(20, 28), [4e7] * 8)  # non-OCS nodes, switch 0 -> 1
    >>> prob = CircuitProblem.build(topo, traffic, placement=list(range(64)))
    >>> res = greedy(prob, seed=0)
    >>> res.plan["circuits"], round(res.objective, 3)
    ([[2, 19], [0, 17], [1, 16], [3, 18]], 0.032)
    """
    _tables_option(tables)
    clock = _Clock(time_limit)
    rng = np.random.default_rng(seed)
    circ = _Circuits(problem)
    u, v, by = _ocs_pairs(problem)[:3]
    sw = problem.node_switch
    a_of, b_of = np.minimum(sw[u], sw[v]), np.maximum(sw[u], sw[v])
    # the communicating OCS node pairs of every switch pair, most bytes first (ties to the smaller ids)
    order = np.lexsort((v, u, -by, b_of, a_of))
    uu, vv = u[order].tolist(), v[order].tolist()
    key = a_of[order] * problem.n_switches + b_of[order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if len(key) else np.zeros(0, dtype=np.int64)
    ends = np.r_[starts[1:], len(key)]
    first = dict(zip(zip(a_of[order][starts].tolist(), b_of[order][starts].tolist()),
                     zip(starts.tolist(), ends.tolist())))
    pos = {k: p for k, (p, _) in first.items()}

    def pick(a, b):
        """Join the free OCS pair under switches a and b that exchanges the most, else a random free pair.
        A node pair that cannot be joined now never can (ports only fill), so each list is read once."""
        best = None
        if (a, b) in first:
            p, e = pos[(a, b)], first[(a, b)][1]
            while p < e:
                if circ.can(uu[p], vv[p]):
                    best = (uu[p], vv[p])
                    break
                p += 1
            pos[(a, b)] = p
        circ.add(*(best if best is not None else circ.free_pair(a, b, rng)))

    a, b, c = _switch_pairs(problem)
    # every communicating switch pair once, ascending count (ties to the smaller ids): a pair passed over
    # is closed and stays closed, so one pass in that order takes the unserved pair of smallest count
    for x, y in zip(*(arr[np.lexsort((b, a, c))].tolist() for arr in (a, b))):
        if circ.full() or clock.over():
            break
        if circ.switch_pair_open(x, y):
            pick(x, y)
    # then the pair with the largest count minus circuits assigned
    _most_wanted(circ, a, b, c, pick, clock)
    return _finish_by(problem, circ, tables, clock, "greedy")


def _matching_graph(problem, circ: _Circuits):
    """The graph ``matching`` solves: every pair ``a < b`` of free OCS nodes under different switches, not yet
    joined, weighing ``bytes(a, b) + (W[A, B] + W[B, A]) / min(k_A, k_B)`` > 0 (its direct traffic plus its
    share of the traffic it could relay). Returns ``(free nodes, a, b, weight)``.

    Built per switch pair: every pair of switches with traffic between them (those with a share; ``W``
    holds the direct traffic too, so every node pair with direct traffic is among them) joins all its free
    OCS nodes on both sides; the direct traffic is then added to the node pairs that have it.
    """
    sw = problem.node_switch
    n = problem.n_nodes
    W = problem.switch_bytes()
    k = np.array([len(o) for o in problem.ocs_of_switch()])
    share = (W + W.T) / np.maximum(1, np.minimum(k[:, None], k[None, :]))
    ocs = problem.ocs_nodes
    f = ocs[np.asarray(circ.free)[ocs] > 0]
    # the free OCS nodes grouped by switch: node_of[start[s]:start[s] + cnt[s]]
    by_sw = f[np.argsort(sw[f], kind="stable")]
    cnt = np.bincount(sw[f], minlength=problem.n_switches)
    start = np.r_[0, np.cumsum(cnt)[:-1]]
    A, B = np.nonzero(np.triu(share, 1))
    keep = (cnt[A] > 0) & (cnt[B] > 0)
    A, B = A[keep], B[keep]
    size = cnt[A] * cnt[B]
    pair = np.repeat(np.arange(len(A)), size)
    t = np.arange(int(size.sum())) - np.repeat(np.cumsum(size) - size, size)
    x = by_sw[start[A][pair] + t // cnt[B][pair]]
    y = by_sw[start[B][pair] + t % cnt[B][pair]]
    a, b = np.minimum(x, y), np.maximum(x, y)
    wgt = share[A, B][pair]
    key = a * n + b
    if circ.joined:
        fresh = ~np.isin(key, np.array([p * n + q for p, q in circ.joined], dtype=np.int64))
        a, b, key, wgt = a[fresh], b[fresh], key[fresh], wgt[fresh]
    u, v, by = _ocs_pairs(problem)[:3]
    dkey = u * n + v                     # the direct traffic of OCS node pairs u < v, keys ascending
    if len(dkey) and len(key):
        pos = np.minimum(np.searchsorted(dkey, key), len(dkey) - 1)
        wgt = wgt + np.where(dkey[pos] == key, by[pos], 0.0)
    ok = wgt > 0
    return f, a[ok], b[ok], wgt[ok]


@METHODS.register("matching")
@_remembered
def matching(problem, *, time_limit=None, seed=0, tables: str = "full"):
    """``matching``: maximum-weight matching on the OCS nodes (the c-Through / Helios approach).

    The weight of a possible circuit ``u``-``v`` (switches A, B) is the
    traffic it would carry directly, ``bytes(u, v)`` both ways, plus its
    share of the traffic it could relay, ``(W[A,B] + W[B,A]) / min(k_A, k_B)``
    (``k``: OCS nodes under a switch, the most circuits the pair could get).
    With several ports per node, matchings are repeated on the ports left until nothing can be added;
    ``max_circuits`` keeps the heaviest.

    Each matching is exact: a matching of largest total weight, by Edmonds' blossom algorithm
    (:func:`topoplan.problems.circuits.blossom.max_weight_matching`: compiled, ending with a dual certificate
    of optimality, dense graphs solved by pricing a sparse part). Where several matchings share the largest
    weight, which one is returned depends on the algorithm's order of work (deterministic: the same problem
    gives the same plan).

    Parameters
    ----------
    problem : CircuitProblem
    time_limit : float, optional
        Seconds the call may take. A matching predicted (:func:`matching_cost_s`, at the share of a CPU the
        command is getting) not to end within what is left of it is made greedily instead, heaviest edge
        first (at least half the largest weight), and the result's message says so. None: always exact.
    seed : int, optional
        Not used (the method is deterministic).
    tables : {"full", "used"}, optional
        ``full`` (default): every node with a relay route gets a forwarding entry towards every switch it
        can reach, so the tables serve any traffic (and another placement); ``used``: only the entries
        this traffic's large messages use (the same routes and bound; fewer entries on large systems).

    Returns
    -------
    PlanResult
        Circuits and forwarding tables, scored by the communication-time bound;
        :func:`topoplan.problems.circuits.problem.solve` fills in method, seed and wall time and validates it.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.matrix import from_arrays
    >>> from topoplan.problems.circuits.problem import CircuitProblem
    >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=4"])   # OCS nodes 0-3, 16-19, ...
    >>> traffic = from_arrays(64, range(4, 12), range(20, 28), [4e7] * 8)  # non-OCS nodes, switch 0 -> 1
    >>> prob = CircuitProblem.build(topo, traffic, placement=list(range(64)))
    >>> res = matching(prob)
    >>> len(res.plan["circuits"]), round(res.objective, 3)     # four circuits between switches 0 and 1
    (4, 0.032)
    """
    _tables_option(tables)
    t_end = None if time_limit is None else time.perf_counter() + float(time_limit)
    circ = _Circuits(problem)
    greedy_rounds = 0
    while not circ.full():
        f, a, b, wgt = _matching_graph(problem, circ)
        if len(a) == 0:
            break
        local = np.full(problem.n_nodes, -1, dtype=np.int64)
        local[f] = np.arange(len(f))
        if t_end is not None and deadline.scaled(matching_cost_s(len(f))) > t_end - time.perf_counter():
            mate = _greedy_mate(len(f), local[a], local[b], wgt)
            greedy_rounds += 1
        else:
            mate = blossom.max_weight_matching(len(f), local[a], local[b], wgt)
        hit = mate[local[a]] == local[b]
        if not hit.any():
            break
        a, b, wgt = a[hit], b[hit], wgt[hit]
        for i in np.lexsort((b, a, -wgt)).tolist():   # heaviest first (ties to the smaller ids)
            if circ.full():
                break
            circ.add(int(a[i]), int(b[i]))
    res = _finish(problem, circ, tables)
    if greedy_rounds:
        res.message = ("the exact matching would not end within the time limit: matched greedily, heaviest edge "
                       "first (at least half the largest weight)")
    return res


def _greedy_mate(n: int, u, v, w) -> np.ndarray:
    """A matching taken heaviest edge first (ties to the smaller ids): at least half the largest total weight.
    ``mate[x]`` as :func:`topoplan.problems.circuits.blossom.max_weight_matching` returns it.

    Examples
    --------
    >>> _greedy_mate(4, np.array([0, 1, 2]), np.array([1, 2, 3]), np.array([2.0, 3.0, 2.0])).tolist()
    [-1, 2, 1, -1]
    """
    mate = np.full(n, -1, dtype=np.int64)
    for i in np.lexsort((v, u, -np.asarray(w))).tolist():
        x, y = int(u[i]), int(v[i])
        if w[i] > 0 and mate[x] < 0 and mate[y] < 0:
            mate[x], mate[y] = y, x
    return mate
