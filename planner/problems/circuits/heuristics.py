"""The papers' circuit assignments, a matching baseline and EPS only.

Every method picks circuits (pairs of OCS nodes under different switches, at
most ``ports`` per node, at most ``max_circuits`` in all) from the *large*
inter-node traffic (messages of at least the threshold; 000 3.1, 001 3.2.1,
003 3.3.1), then builds the distance-vector forwarding tables of
:func:`planner.problems.circuits.forwarding.distance_vector` and is scored by the
communication-time bound.

- :func:`switch_partitioning` -- ``sp``, 000 section 3.2.
- :func:`three_step` -- ``three-step``, 001 section 3.2.2.
- :func:`greedy` -- ``greedy``, 003 section 3.3.2 / Fig. 3.
- :func:`matching` -- ``matching``, maximum-weight matching (c-Through/Helios style).
- :func:`eps_only` -- ``none``.

A "rank" tie-break uses the smallest MPI rank placed on a node; a node pair
is ranked by its two nodes' smallest ranks, lower first.
"""

from __future__ import annotations

import numpy as np

from planner.problems.circuits.forwarding import distance_vector
from planner.problems.circuits.problem import result_from_plan
from planner.problems.circuits.registry import METHODS

__all__ = ["eps_only", "switch_partitioning", "three_step", "greedy", "matching"]


class _Circuits:
    """Circuits being assigned: free ports per node and the pairs already joined."""

    def __init__(self, problem):
        self.p = problem
        self.free = np.where(problem.is_ocs, problem.ports, 0).astype(np.int64)
        self.pairs: list[tuple[int, int]] = []
        self.joined: set[tuple[int, int]] = set()
        self.limit = problem.circuit_limit()
        self.per_switch = np.zeros((problem.n_switches, problem.n_switches), dtype=np.int64)

    def full(self) -> bool:
        return len(self.pairs) >= self.limit

    def can(self, u: int, v: int) -> bool:
        sw = self.p.node_switch
        return (not self.full() and self.free[u] > 0 and self.free[v] > 0 and sw[u] != sw[v]
                and (min(u, v), max(u, v)) not in self.joined)

    def add(self, u: int, v: int) -> None:
        u, v = int(u), int(v)
        self.free[u] -= 1
        self.free[v] -= 1
        self.pairs.append((min(u, v), max(u, v)))
        self.joined.add((min(u, v), max(u, v)))
        a, b = self.p.node_switch[u], self.p.node_switch[v]
        self.per_switch[a, b] += 1
        self.per_switch[b, a] += 1

    def free_pair(self, a: int, b: int, rng=None):
        """A free OCS node under switch ``a`` and one under ``b`` not yet joined: the smallest ids, or random."""
        ocs_of = self.p.ocs_of_switch()
        fa = [int(u) for u in ocs_of[a] if self.free[u] > 0]
        fb = [int(v) for v in ocs_of[b] if self.free[v] > 0]
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


def _finish(problem, circ: _Circuits, **extra):
    nh = distance_vector(problem, circ.pairs)
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


def _round_robin(problem, circ: _Circuits, primary: np.ndarray, u, v, lo, hi) -> None:
    """Round robin over switch pairs (ascending ids); per switch pair the free node pair with the largest
    ``primary``, ties to the pair with the smaller rank; rounds repeat while anything is assigned."""
    sw = problem.node_switch
    a, b = np.minimum(sw[u], sw[v]), np.maximum(sw[u], sw[v])
    order = np.lexsort((hi, lo, -primary, b, a))
    queues: dict[tuple[int, int], list[int]] = {}
    for i in order.tolist():
        queues.setdefault((int(a[i]), int(b[i])), []).append(i)
    pos = {k: 0 for k in queues}
    while not circ.full():
        progress = False
        for key in sorted(queues):
            q = queues[key]
            while pos[key] < len(q):
                i = q[pos[key]]
                pos[key] += 1
                if circ.can(int(u[i]), int(v[i])):
                    circ.add(u[i], v[i])
                    progress = True
                    break
            if circ.full():
                break
        if not progress:
            break


@METHODS.register("none")
def eps_only(problem, *, time_limit=None, seed=0):
    """``none``: no circuits; every message takes the EPS.

    Parameters
    ----------
    problem : CircuitProblem
    time_limit : float, optional
        Not used (the method is fast); part of every method's signature.
    seed : int, optional
        Not used (the method is deterministic).

    Returns
    -------
    PlanResult
        Circuits and forwarding tables, scored by the communication-time bound;
        :func:`planner.problems.circuits.problem.solve` fills in method, seed and wall time and validates it.

    Examples
    --------
    >>> from planner.core.topology_io import load_topology
    >>> from planner.traffic.matrix import from_arrays
    >>> from planner.problems.circuits.problem import CircuitProblem
    >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=4"])   # OCS nodes 0-3, 16-19, ...
    >>> traffic = from_arrays(64, range(4, 12), range(20, 28), [4e7] * 8)  # non-OCS nodes, switch 0 -> 1
    >>> prob = CircuitProblem.build(topo, traffic, placement=list(range(64)))
    >>> res = eps_only(prob)
    >>> res.plan["circuits"], round(res.objective, 3), res.metrics["bottleneck"]
    ([], 0.128, 'S0->top')
    """
    return _finish(problem, _Circuits(problem))


@METHODS.register("sp")
def switch_partitioning(problem, *, time_limit=None, seed=0):
    """``sp``: Switch Partitioning (000 section 3.2).

    Round robin over switch pairs; per switch pair, the communicating pair
    of OCS nodes with the most (large) messages, ties to the pair with the
    smallest rank; further rounds while circuits remain. Only node pairs
    that communicate get circuits.

    Parameters
    ----------
    problem : CircuitProblem
    time_limit : float, optional
        Not used (the method is fast); part of every method's signature.
    seed : int, optional
        Not used (the method is deterministic).

    Returns
    -------
    PlanResult
        Circuits and forwarding tables, scored by the communication-time bound;
        :func:`planner.problems.circuits.problem.solve` fills in method, seed and wall time and validates it.

    References
    ----------
    000 section 3.2 (Switch Partitioning).

    Examples
    --------
    >>> from planner.core.topology_io import load_topology
    >>> from planner.traffic.matrix import from_arrays
    >>> from planner.problems.circuits.problem import CircuitProblem
    >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=4"])   # OCS nodes 0-3, 16-19, ...
    >>> traffic = from_arrays(64, range(4, 12), range(20, 28), [4e7] * 8)  # non-OCS nodes, switch 0 -> 1
    >>> prob = CircuitProblem.build(topo, traffic, placement=list(range(64)))
    >>> switch_partitioning(prob).plan["circuits"]      # only OCS nodes that talk get circuits
    []
    """
    circ = _Circuits(problem)
    u, v, _, msgs, lo, hi = _ocs_pairs(problem)
    _round_robin(problem, circ, msgs, u, v, lo, hi)
    return _finish(problem, circ)


@METHODS.register("three-step")
def three_step(problem, *, time_limit=None, seed=0):
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
        Not used (the method is fast); part of every method's signature.
    seed : int, optional
        Not used (the method is deterministic).

    Returns
    -------
    PlanResult
        Circuits and forwarding tables, scored by the communication-time bound;
        :func:`planner.problems.circuits.problem.solve` fills in method, seed and wall time and validates it.

    References
    ----------
    001 section 3.2.2.

    Examples
    --------
    >>> from planner.core.topology_io import load_topology
    >>> from planner.traffic.matrix import from_arrays
    >>> from planner.problems.circuits.problem import CircuitProblem
    >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=4"])   # OCS nodes 0-3, 16-19, ...
    >>> traffic = from_arrays(64, range(4, 12), range(20, 28), [4e7] * 8)  # non-OCS nodes, switch 0 -> 1
    >>> prob = CircuitProblem.build(topo, traffic, placement=list(range(64)))
    >>> res = three_step(prob)                         # step 2: relay through OCS nodes
    >>> res.plan["circuits"], round(res.objective, 3)
    ([[0, 16], [1, 17], [2, 18], [3, 19]], 0.032)
    """
    circ = _Circuits(problem)
    u, v, by, _, lo, hi = _ocs_pairs(problem)
    _round_robin(problem, circ, by, u, v, lo, hi)
    count = problem.switch_pair_counts()
    s = problem.n_switches
    pairs = [(a, b) for a in range(s) for b in range(a + 1, s) if count[a, b] > 0]
    for a, b in sorted(pairs, key=lambda k: (-count[k], k)):
        if circ.full():
            break
        if circ.per_switch[a, b] == 0:
            fp = circ.free_pair(a, b)
            if fp is not None:
                circ.add(*fp)
    while not circ.full():
        open_ = [k for k in pairs if circ.switch_pair_open(*k)]
        if not open_:
            break
        a, b = min(open_, key=lambda k: (-(count[k] - circ.per_switch[k]), k))
        circ.add(*circ.free_pair(a, b))
    return _finish(problem, circ)


@METHODS.register("greedy")
def greedy(problem, *, time_limit=None, seed=0):
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
        Not used (the method is fast); part of every method's signature.
    seed : int, optional
        Seeds the random choice of OCS nodes.

    Returns
    -------
    PlanResult
        Circuits and forwarding tables, scored by the communication-time bound;
        :func:`planner.problems.circuits.problem.solve` fills in method, seed and wall time and validates it.

    References
    ----------
    003 section 3.3.2 and Fig. 3.

    Examples
    --------
    >>> from planner.core.topology_io import load_topology
    >>> from planner.traffic.matrix import from_arrays
    >>> from planner.problems.circuits.problem import CircuitProblem
    >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=4"])   # OCS nodes 0-3, 16-19, ...
    >>> traffic = from_arrays(64, range(4, 12), range(20, 28), [4e7] * 8)  # non-OCS nodes, switch 0 -> 1
    >>> prob = CircuitProblem.build(topo, traffic, placement=list(range(64)))
    >>> res = greedy(prob, seed=0)
    >>> res.plan["circuits"], round(res.objective, 3)
    ([[2, 19], [0, 17], [1, 16], [3, 18]], 0.032)
    """
    rng = np.random.default_rng(seed)
    circ = _Circuits(problem)
    u, v, by = _ocs_pairs(problem)[:3]
    sw = problem.node_switch
    a_of, b_of = np.minimum(sw[u], sw[v]), np.maximum(sw[u], sw[v])
    count = problem.switch_pair_counts()
    s = problem.n_switches
    pairs = [(a, b) for a in range(s) for b in range(a + 1, s) if count[a, b] > 0]
    while not circ.full():
        open_ = [k for k in pairs if circ.switch_pair_open(*k)]
        if not open_:
            break
        unserved = [k for k in open_ if circ.per_switch[k] == 0]
        if unserved:
            a, b = min(unserved, key=lambda k: (count[k], k))
        else:
            a, b = min(open_, key=lambda k: (-(count[k] - circ.per_switch[k]), k))
        cand = np.flatnonzero((a_of == a) & (b_of == b))
        best = None
        for i in cand[np.lexsort((v[cand], u[cand], -by[cand]))].tolist():
            if circ.can(int(u[i]), int(v[i])):
                best = (int(u[i]), int(v[i]))
                break
        circ.add(*(best if best is not None else circ.free_pair(a, b, rng)))
    return _finish(problem, circ)


@METHODS.register("matching")
def matching(problem, *, time_limit=None, seed=0):
    """``matching``: maximum-weight matching on the OCS nodes (the c-Through / Helios approach).

    The weight of a possible circuit ``u``-``v`` (switches A, B) is the
    traffic it would carry directly, ``bytes(u, v)`` both ways, plus its
    share of the traffic it could relay, ``(W[A,B] + W[B,A]) / min(k_A, k_B)``
    (``k``: OCS nodes under a switch, the most circuits the pair could get).
    With several ports per node, matchings are repeated on the ports left until nothing can be added.
    NetworkX ``max_weight_matching``; ``max_circuits`` keeps the heaviest.

    Parameters
    ----------
    problem : CircuitProblem
    time_limit : float, optional
        Not used (the method is fast); part of every method's signature.
    seed : int, optional
        Not used (the method is deterministic).

    Returns
    -------
    PlanResult
        Circuits and forwarding tables, scored by the communication-time bound;
        :func:`planner.problems.circuits.problem.solve` fills in method, seed and wall time and validates it.

    Examples
    --------
    >>> from planner.core.topology_io import load_topology
    >>> from planner.traffic.matrix import from_arrays
    >>> from planner.problems.circuits.problem import CircuitProblem
    >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=4"])   # OCS nodes 0-3, 16-19, ...
    >>> traffic = from_arrays(64, range(4, 12), range(20, 28), [4e7] * 8)  # non-OCS nodes, switch 0 -> 1
    >>> prob = CircuitProblem.build(topo, traffic, placement=list(range(64)))
    >>> res = matching(prob)
    >>> res.plan["circuits"], round(res.objective, 3)
    ([[0, 19], [1, 18], [2, 17], [3, 16]], 0.032)
    """
    import networkx as nx

    circ = _Circuits(problem)
    sw = problem.node_switch
    W = problem.switch_bytes()
    k = np.array([len(o) for o in problem.ocs_of_switch()])
    direct: dict[tuple[int, int], float] = {}
    u, v, by = _ocs_pairs(problem)[:3]
    for a, b, x in zip(u.tolist(), v.tolist(), by.tolist()):
        direct[(a, b)] = x
    share = (W + W.T) / np.maximum(1, np.minimum(k[:, None], k[None, :]))
    ocs = problem.ocs_nodes.tolist()
    while not circ.full():
        g = nx.Graph()
        for i, a in enumerate(ocs):
            if circ.free[a] <= 0:
                continue
            for b in ocs[i + 1:]:
                if circ.free[b] <= 0 or sw[a] == sw[b] or (a, b) in circ.joined:
                    continue
                wgt = direct.get((a, b), 0.0) + share[sw[a], sw[b]]
                if wgt > 0:
                    g.add_edge(a, b, weight=float(wgt))
        if g.number_of_edges() == 0:
            break
        m = nx.max_weight_matching(g, maxcardinality=False)
        if not m:
            break
        chosen = sorted(((g[a][b]["weight"], min(a, b), max(a, b)) for a, b in m), key=lambda t: (-t[0], t[1], t[2]))
        for _, a, b in chosen:
            if circ.full():
                break
            circ.add(a, b)
    return _finish(problem, circ)
