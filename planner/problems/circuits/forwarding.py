"""Forwarding tables for large inter-switch messages, and the routes they produce.

Tables are per node and destination switch: ``next_hop[n, S]`` is the node a
large message at node ``n`` bound for a node under switch ``S`` goes to next
(``-1``: no entry, fall back to the EPS uplinks from ``n``). A next hop is
either a circuit partner of ``n`` (cross the circuit) or another node under
``n``'s switch (an EPS hop to a relay). At a node under ``S`` the message is
delivered over the EPS. The simulator follows the same tables with the same walk.

:func:`distance_vector` builds the tables of 000 section 3.3 and 003 Fig. 4:
a distance vector over the relay graph (EPS hops inside a switch and
circuits) with the reciprocal of link bandwidth as the metric, multi-hop
through intermediate switches, an optional limit on the circuits a route
crosses, and no entry (EPS fallback) where no route exists. The EPS uplink
path is not a candidate: the papers use it only when no relay route exists
(003 3.3.3, 000 3.3). Ties prefer the optical next hop (001 3.2.3); several
equal-cost next hops share the load as :data:`LOAD_SHARING` says.
:class:`Routes` expands tables into per-(node, switch) routes with the
simulator's walk (:func:`sim.network.follow_forwarding`), raising on loops
and non-neighbour hops.
"""

from __future__ import annotations

import heapq
import time as _time

import numpy as np

from planner.problems.circuits.bound import evaluate

__all__ = ["LOAD_SHARING", "partners_of", "circuit_links", "tables_from_array", "array_from_tables", "Routes",
           "distance_vector", "polish_tables", "congestion_tables"]

LOAD_SHARING = ("least-loaded: among equal-cost next hops (optical first), each node's traffic to a destination "
                "switch, the largest first, goes to the next hop whose entry link (relay EPS down link or circuit) "
                "has the least load so far in seconds (bytes / bandwidth); remaining ties to the smaller node id. "
                "So parallel circuits between two switches serve different source nodes.")

_REL_TOL = 1e-9


def partners_of(n_nodes: int, circuits) -> list[list[int]]:
    """Circuit partners of every node.

    Parameters
    ----------
    n_nodes : int
    circuits : iterable of (int, int)

    Returns
    -------
    list of list of int

    Examples
    --------
    >>> partners_of(4, [(0, 2), (1, 2)])
    [[2], [2], [0, 1], []]
    """
    p: list[list[int]] = [[] for _ in range(n_nodes)]
    for a, b in circuits:
        p[a].append(b)
        p[b].append(a)
    return p


def circuit_links(problem, circuits) -> dict[tuple[int, int], int]:
    """Directed circuit ``(u, v)`` -> link id, numbered as the problem's network numbers a plan's circuits.

    Parameters
    ----------
    problem : CircuitProblem
    circuits : sequence of (int, int)

    Returns
    -------
    dict of (int, int) to int

    Examples
    --------
    >>> from planner.core.topology_io import load_topology
    >>> from planner.traffic.matrix import from_arrays
    >>> from planner.problems.circuits.problem import CircuitProblem
    >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=4"])   # OCS nodes 0-3, 16-19, ...
    >>> traffic = from_arrays(64, range(4, 12), range(20, 28), [4e7] * 8)  # non-OCS nodes, switch 0 -> 1
    >>> prob = CircuitProblem.build(topo, traffic, placement=list(range(64)))
    >>> circuits = [(0, 16), (1, 17)]
    >>> circuit_links(prob, circuits)
    {(0, 16): 200, (16, 0): 201, (1, 17): 202, (17, 1): 203}
    """
    cl = problem.network().circuit_links(circuits)
    return dict(zip(zip(cl.src.tolist(), cl.dst.tolist()), range(cl.first, cl.first + cl.n_links)))


def tables_from_array(next_hop: np.ndarray) -> dict[str, dict[str, int]]:
    """``next_hop`` array -> the plan's JSON form ``{"node": {"switch": next_hop}}`` (entries only).

    Parameters
    ----------
    next_hop : numpy.ndarray
        (n_nodes x n_switches), -1 = no entry.

    Returns
    -------
    dict of str to dict of str to int

    See Also
    --------
    array_from_tables : the inverse.

    Examples
    --------
    >>> nh = np.full((3, 2), -1)
    >>> nh[0, 1], nh[2, 0] = 1, 0
    >>> tables_from_array(nh)
    {'0': {'1': 1}, '2': {'0': 0}}
    """
    rows, cols = np.nonzero(next_hop >= 0)
    out: dict[str, dict[str, int]] = {}
    for n, s in zip(rows.tolist(), cols.tolist()):
        out.setdefault(str(n), {})[str(s)] = int(next_hop[n, s])
    return out


def array_from_tables(tables: dict, n_nodes: int, n_switches: int) -> np.ndarray:
    """The plan's ``forwarding`` dict (string or int keys) -> ``next_hop`` array (-1 = no entry).

    Parameters
    ----------
    tables : dict
        ``{node: {switch: next_hop}}``.
    n_nodes, n_switches : int

    Returns
    -------
    numpy.ndarray of int64

    Examples
    --------
    >>> array_from_tables({"0": {"1": 1}, 2: {0: 0}}, 3, 2).tolist()
    [[-1, 1], [-1, -1], [0, -1]]
    """
    nh = np.full((n_nodes, n_switches), -1, dtype=np.int64)
    for n, row in (tables or {}).items():
        for s, h in row.items():
            nh[int(n), int(s)] = int(h)
    return nh


class Routes:
    """Routes through forwarding tables, memoized per (node, destination switch).

    ``route(n, S)`` returns ``(links, end, fallback, circuits, relay_hops)``: the link ids
    the message crosses up to the end node (EPS hops: node up + node down;
    circuits: the directed circuit link; fallback: node up of ``end`` and the
    two uplinks), the node where it ends (under ``S``, or where it falls back),
    whether it falls back, the circuits crossed and the EPS hops to relays. Delivery from ``end`` to the
    destination node is left to the caller (it depends on the destination node). The walk is the
    simulator's (:meth:`sim.network.Network.relay_routes`), which raises on loops and non-neighbour hops.

    Parameters
    ----------
    problem : CircuitProblem
    circuits : sequence of (int, int)
    next_hop : numpy.ndarray
        The tables; :meth:`set_entry` changes them in place.

    Examples
    --------
    >>> from planner.core.topology_io import load_topology
    >>> from planner.traffic.matrix import from_arrays
    >>> from planner.problems.circuits.problem import CircuitProblem
    >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=4"])   # OCS nodes 0-3, 16-19, ...
    >>> traffic = from_arrays(64, range(4, 12), range(20, 28), [4e7] * 8)  # non-OCS nodes, switch 0 -> 1
    >>> prob = CircuitProblem.build(topo, traffic, placement=list(range(64)))
    >>> circuits = [(0, 16), (1, 17)]
    >>> routes = Routes(prob, circuits, distance_vector(prob, circuits))
    >>> links, end, fallback, n_circuits, n_relay_hops = routes.route(4, 1)
    >>> [prob.link_name(l, circuits) for l in links], end, fallback, n_circuits, n_relay_hops
    (['node0004->S0', 'S0->node0000', 'node0000=>node0016'], 16, False, 1, 1)
    >>> routes.nodes(4, 1)
    (4, 0, 16)
    """

    def __init__(self, problem, circuits, next_hop: np.ndarray):
        self.p = problem
        self.nh = next_hop
        self.sw = problem.node_switch
        self.circuits = [(int(a), int(b)) for a, b in circuits]
        self.partners = partners_of(problem.n_nodes, self.circuits)
        self.clink = circuit_links(problem, self.circuits)
        self._links = problem.network().circuit_links(self.circuits)
        self._memo: dict[tuple[int, int], tuple] = {}
        self._nodes: dict[tuple[int, int], tuple] = {}

    def prefetch(self, nodes, switches) -> None:
        """Compute the routes of many ``(node, switch)`` pairs in one vectorized walk."""
        nodes = np.asarray(nodes, dtype=np.int64).ravel()
        switches = np.asarray(switches, dtype=np.int64).ravel()
        if not len(nodes):
            return
        r = self.p.network().relay_routes(nodes, switches, self.nh, self._links)
        links = r.links.tolist()
        ptr = r.ptr.tolist()
        hop_to, hptr = r.hops.dst.tolist(), r.hops.ptr.tolist()
        rows = zip(nodes.tolist(), switches.tolist(), r.end.tolist(), r.fallback.tolist(),
                   r.hops.n_circuits.tolist(), r.hops.n_relay_hops.tolist())
        for i, (a, s, end, fb, nc, nr) in enumerate(rows):
            self._memo[(a, s)] = (tuple(links[ptr[i]:ptr[i + 1]]), end, fb, nc, nr)
            self._nodes[(a, s)] = (a, *hop_to[hptr[i]:hptr[i + 1]])

    def route(self, n: int, dst: int):
        key = (int(n), int(dst))
        if key not in self._memo:
            self.prefetch([key[0]], [key[1]])
        return self._memo[key]

    def nodes(self, n: int, dst: int) -> tuple:
        """The nodes the walk from ``n`` towards switch ``dst`` visits, ``n`` first."""
        key = (int(n), int(dst))
        if key not in self._nodes:
            self.prefetch([key[0]], [key[1]])
        return self._nodes[key]

    def set_entry(self, n: int, dst: int, h: int) -> None:
        """Set ``next_hop[n, dst] = h`` and forget the memoized walks towards ``dst`` that pass ``n``."""
        n, dst = int(n), int(dst)
        self.nh[n, dst] = h
        stale = [k for k, path in self._nodes.items() if k[1] == dst and n in path]
        for k in stale:
            del self._memo[k], self._nodes[k]


def distance_vector(problem, circuits, *, hop_limit: int | None = None, full: bool = True,
                    fallback: np.ndarray | None = None) -> np.ndarray:
    """Forwarding tables by distance vector with reciprocal-bandwidth metric and least-loaded load sharing.

    Parameters
    ----------
    problem : CircuitProblem
    circuits : list of (int, int)
        OCS node pairs.
    hop_limit : int, optional
        Most circuits a route may cross (default: the problem's; None = no limit).
    full : bool, optional
        Give every node with a route an entry (True), or only nodes that carry planned traffic.
    fallback : numpy.ndarray of bool, optional
        (n_nodes x n_switches) mask of source entries left empty on purpose
        (their traffic takes the uplinks); used to realize a model's fall-back flows. Relays keep theirs.

    Returns
    -------
    numpy.ndarray
        ``next_hop`` (n_nodes x n_switches, -1 = no entry).

    References
    ----------
    000 section 3.3 and 003 section 3.3.3 / Fig. 4 (distance vector, reciprocal
    bandwidth); 001 section 3.2.3 (ties prefer the optical path).

    Examples
    --------
    >>> from planner.core.topology_io import load_topology
    >>> from planner.traffic.matrix import from_arrays
    >>> from planner.problems.circuits.problem import CircuitProblem
    >>> t = load_topology("paper003", ["ocs.nodes_per_switch=1"])
    >>> p = CircuitProblem.build(t, from_arrays(256, [4], [68], [4e6]))   # node 1 -> node 17
    >>> nh = distance_vector(p, [(0, 16)])
    >>> int(nh[1, 1]), int(nh[0, 1])    # node 1 relays via OCS node 0, which crosses its circuit
    (0, 16)
    """
    hop_limit = problem.hop_limit if hop_limit is None else hop_limit
    H = np.inf if hop_limit is None else int(hop_limit)
    n, s = problem.n_nodes, problem.n_switches
    sw = problem.node_switch
    inv_bw = 1.0 / problem.node_bw_Bps
    c_circ = 1.0 / problem.ocs_bw_Bps
    partners = partners_of(n, circuits)
    clink = circuit_links(problem, circuits)
    ocs_of = problem.ocs_of_switch()
    idx = problem.link_index()
    own = problem.own_out()
    nh = np.full((n, s), -1, dtype=np.int64)
    # time-load of every link (seconds), for load sharing
    bw = np.concatenate([problem.fixed_link_bw(), np.full(2 * len(circuits), problem.ocs_bw_Bps)])
    load = np.concatenate([problem.base_loads(), np.zeros(2 * len(circuits))]) / bw
    for dst in range(s):
        dist, _, ties = _dijkstra(dst, sw, ocs_of, partners, inv_bw, c_circ, H)
        # non-OCS nodes (and OCS nodes without a relay route) reach a relay with one EPS hop
        order_nodes = [v for v in dist if sw[v] != dst]
        for a_sw in range(s):
            if a_sw == dst:
                continue
            relays = [q for q in ocs_of[a_sw].tolist() if q in dist and _crosses(ties, q)]
            if not relays:
                continue
            rq = np.array(relays)
            rcost = np.array([dist[q] for q in relays]) + inv_bw[rq]
            members = np.flatnonzero(sw == a_sw)
            for a in members.tolist():
                if a in dist:
                    continue
                if fallback is not None and fallback[a, dst]:
                    continue
                if not full and own[a, dst] <= 0:
                    continue
                c = rcost + inv_bw[a]
                best = c.min()
                tie = rq[c <= best * (1 + _REL_TOL)]
                dist[a] = best
                ties[a] = [(int(q), False) for q in tie]
                order_nodes.append(a)
        inflow: dict[int, float] = {}
        order_nodes.sort(key=lambda v: (-dist[v], -(own[v, dst] + inflow.get(v, 0.0)), v))
        for u in order_nodes:
            cands = ties.get(u)
            if not cands:
                continue
            f = own[u, dst] + inflow.get(u, 0.0)
            if not full and f <= 0:
                continue
            best, best_key = None, None
            for h, is_circ in cands:
                if is_circ:
                    key = (0, load[clink[(u, h)]], h)
                else:
                    nxt = [load[clink[(h, v)]] for v, c2 in ties.get(h, ()) if c2]
                    key = (1, max(load[idx["down"] + h], min(nxt) if nxt else 0.0), h)
                if best_key is None or key < best_key:
                    best, best_key = (h, is_circ), key
            h, is_circ = best
            nh[u, dst] = h
            if f > 0:
                if is_circ:
                    load[clink[(u, h)]] += f / problem.ocs_bw_Bps
                else:
                    load[idx["up"] + u] += f * inv_bw[u]
                    load[idx["down"] + h] += f * inv_bw[h]
                inflow[h] = inflow.get(h, 0.0) + f
    return nh


def _dijkstra(dst, sw, ocs_of, partners, inv_bw, c_circ, H):
    """Shortest relay routes of OCS nodes towards switch ``dst`` (reversed Dijkstra from the OCS nodes under it).

    Returns ``dist``, ``kcirc`` (circuits crossed; the largest over the tie
    set so that any tie choice keeps upstream routes within the hop limit)
    and ``ties[node] = [(next_hop, is_circuit), ...]`` (equal-cost next hops).
    An EPS hop may only lead to a relay that crosses a circuit next (two EPS
    hops in a row are never shorter than one).
    """
    dist: dict[int, float] = {}
    kcirc: dict[int, float] = {}
    ties: dict[int, list] = {}
    heap = [(0.0, int(v)) for v in ocs_of[dst]]
    heapq.heapify(heap)
    while heap:
        d, v = heapq.heappop(heap)
        if v in dist:
            continue
        k = 0
        if sw[v] != dst:
            lim = d * (1 + _REL_TOL)
            cands = []
            for p in partners[v]:
                if p in dist and dist[p] + c_circ <= lim and kcirc[p] + 1 <= H:
                    cands.append((p, True))
                    k = max(k, kcirc[p] + 1)
            for q in ocs_of[sw[v]].tolist():
                if q != v and q in dist and dist[q] + inv_bw[v] + inv_bw[q] <= lim and _crosses(ties, q):
                    cands.append((q, False))
                    k = max(k, kcirc[q])
            if not cands:
                continue  # a cheaper route broke the hop limit; a longer push may still come
            ties[v] = cands
        dist[v], kcirc[v] = d, k
        if k + 1 <= H:
            for u in partners[v]:
                if sw[u] != dst and u not in dist:
                    heapq.heappush(heap, (d + c_circ, u))
        if sw[v] != dst and _crosses(ties, v):
            for u in ocs_of[sw[v]].tolist():
                if u != v and u not in dist:
                    heapq.heappush(heap, (d + inv_bw[u] + inv_bw[v], u))
    return dist, kcirc, ties


def _crosses(ties, q) -> bool:
    """Does relay ``q`` cross a circuit next (some tie is a circuit)?"""
    return any(c for _, c in ties.get(q, ()))


def polish_tables(problem, circuits, next_hop: np.ndarray, *, time_limit: float | None = None,
                  max_passes: int = 50) -> np.ndarray:
    """Improve tables by local search on the exact bound (used to realize the exact model's plans).

    A move changes the entry of a source node for one destination switch when
    no other node's route passes through it (so only its own traffic moves):
    to fall back, to another relay under its switch, or to its own circuit.
    A move is kept when it lowers the bound, or keeps it and lowers the
    uplink bytes, or keeps both and lowers the sum of squared link times (a
    better balance lets later moves lower the bound). Stops at a local
    optimum, after ``max_passes`` or at ``time_limit`` seconds.

    Parameters
    ----------
    problem : CircuitProblem
    circuits : sequence of (int, int)
    next_hop : numpy.ndarray
        The tables to start from (not changed).
    time_limit : float, optional
        Seconds.
    max_passes : int, optional

    Returns
    -------
    numpy.ndarray
        The improved ``next_hop``.

    Examples
    --------
    >>> from planner.core.topology_io import load_topology
    >>> from planner.traffic.matrix import from_arrays
    >>> from planner.problems.circuits.problem import CircuitProblem
    >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=4"])   # OCS nodes 0-3, 16-19, ...
    >>> traffic = from_arrays(64, range(4, 12), range(20, 28), [4e7] * 8)  # non-OCS nodes, switch 0 -> 1
    >>> prob = CircuitProblem.build(topo, traffic, placement=list(range(64)))
    >>> circuits = [(0, 16), (1, 17)]
    >>> from planner.problems.circuits.bound import evaluate
    >>> nh = distance_vector(prob, circuits)
    >>> round(evaluate(prob, circuits, nh).congestion_s, 3)
    0.064
    >>> round(evaluate(prob, circuits, polish_tables(prob, circuits, nh)).congestion_s, 3)
    0.048
    """
    t_end = None if time_limit is None else _time.perf_counter() + time_limit
    p = problem
    nh = next_hop.copy()
    H = np.inf if p.hop_limit is None else p.hop_limit
    ev = evaluate(p, circuits, nh)
    bw = ev.bw_Bps
    inv = np.where(np.isfinite(bw), 1.0 / bw, 0.0)
    t = ev.loads_B * inv
    uplink = ev.uplink_bytes
    idx = p.link_index()
    uu0, uu1 = idx["uplink_up"], idx["uplink_down"]
    sw = p.node_switch
    routes = Routes(p, circuits, nh)
    partners = routes.partners
    ocs_of = p.ocs_of_switch()
    s = p.n_switches
    gkey = p.large_src * s + sw[p.large_dst]
    groups, ginv = np.unique(gkey, return_inverse=True)
    order_g = np.argsort(ginv, kind="stable")
    bounds_g = np.searchsorted(ginv[order_g], np.arange(len(groups) + 1))
    gw = np.bincount(ginv, weights=p.large_bytes, minlength=len(groups))
    members = {int(k): (p.large_dst[order_g[bounds_g[g]:bounds_g[g + 1]]], p.large_bytes[order_g[bounds_g[g]:bounds_g[g + 1]]])
               for g, k in enumerate(groups.tolist())}
    gweight = dict(zip(groups.tolist(), gw.tolist()))
    routes.prefetch(groups // s, groups % s)

    path_nodes = routes.nodes

    through: dict[tuple[int, int], int] = {}
    for k in groups.tolist():
        a, dst = divmod(k, s)
        for x in path_nodes(a, dst)[1:]:
            through[(x, dst)] = through.get((x, dst), 0) + 1

    def contrib(k, links, end, fb):
        b, w = members[k]
        ids = [np.asarray(links, dtype=np.int64)]
        vals = [np.full(len(links), gweight[k])]
        deliver = np.ones(len(b), bool) if fb else (b != end)
        ids.append(idx["down"] + b[deliver]); vals.append(w[deliver])
        if not fb:
            via = b != end
            if via.any():
                ids.append(np.array([idx["up"] + end])); vals.append(np.array([w[via].sum()]))
        return np.concatenate(ids), np.concatenate(vals)

    def candidate_route(a, dst, h):
        """Route of a's traffic to dst if a's entry were h (None if not allowed)."""
        if h < 0:
            return (idx["up"] + a, idx["uplink_up"] + int(sw[a]), idx["uplink_down"] + dst), a, True, 0
        if h in partners[a]:
            head, extra = (routes.clink[(a, h)],), 1
        else:
            head, extra = (idx["up"] + a, idx["down"] + h), 0
        links, end, fb, nc, _ = routes.route(h, dst)
        if a in path_nodes(h, dst) or nc + extra > H or (extra == 0 and nc == 0):
            return None
        return head + tuple(links), end, fb, nc + extra

    keys = sorted(groups.tolist(), key=lambda k: -gweight[k])
    for _ in range(max_passes):
        improved = False
        for k in keys:
            if t_end is not None and _time.perf_counter() > t_end:
                return nh
            a, dst = divmod(k, s)
            if through.get((a, dst), 0) > 0:
                continue  # others' traffic passes through a: its entry is not a leaf move
            cur_h = int(nh[a, dst])
            links, end, fb, nc, _ = routes.route(a, dst)
            oi, ov = contrib(k, links, end, fb)
            T0 = t.max()
            base_sq = 0.0
            cands = [-1] + [int(q) for q in ocs_of[sw[a]] if q != a] + list(partners[a])
            best = None
            for h in cands:
                if h == cur_h:
                    continue
                r = candidate_route(a, dst, h)
                if r is None:
                    continue
                ni, nv = contrib(k, r[0], r[1], r[2])
                ids = np.concatenate([oi, ni])
                dv = np.concatenate([-ov, nv])
                touched, pos = np.unique(ids, return_inverse=True)
                delta = np.bincount(pos, weights=dv, minlength=len(touched)) * inv[touched]
                new_t = t[touched] + delta
                tmp = t.copy()
                tmp[touched] = new_t
                T1 = tmp.max()
                at1 = int((tmp >= T1 * (1 - 1e-9)).sum())
                du = float(np.bincount(pos, weights=dv, minlength=len(touched))[(touched >= uu0) & (touched < uu1)].sum())
                dsq = float((new_t ** 2 - t[touched] ** 2).sum())
                key = (T1, at1, uplink + du, dsq)
                if best is None or _better_key(key, best[0]):
                    best = (key, h, touched, new_t, du)
            if best is None:
                continue
            (T1, at1, up1, dsq), h, touched, new_t, du = best
            at0 = int((t >= T0 * (1 - 1e-9)).sum())
            if _better_key((T1, at1, up1, dsq), (T0, at0, uplink, base_sq)):
                for x in path_nodes(a, dst)[1:]:
                    through[(x, dst)] -= 1
                routes.set_entry(a, dst, h)
                for x in path_nodes(a, dst)[1:]:
                    through[(x, dst)] = through.get((x, dst), 0) + 1
                t[touched] = new_t
                uplink += du
                improved = True
        if not improved:
            break
    return nh


def _better_key(a, b, rel=1e-12) -> bool:
    """Lexicographic (bound, links at the bound, uplink bytes, balance) with tolerances."""
    if a[0] < b[0] * (1 - rel):
        return True
    if a[0] > b[0] * (1 + rel):
        return False
    if a[1] != b[1]:
        return a[1] < b[1]
    if a[2] < b[2] - 1e-9 * max(1.0, abs(b[2])):
        return True
    if a[2] > b[2] + 1e-9 * max(1.0, abs(b[2])):
        return False
    return a[3] < b[3] - 1e-30


def congestion_tables(problem, circuits, *, max_circuits_per_route: int = 2) -> np.ndarray:
    """Forwarding tables by least-congested routing on the exact link loads (used to realize model plans).

    Source traffic groups (node, destination switch), largest first, each
    take the route that keeps the most loaded link it crosses (delivery
    included) lowest -- fall back, the own circuit, or an EPS hop to a relay
    and its circuit, then the same choice again at an intermediate switch
    (up to ``max_circuits_per_route`` circuits and the problem's hop limit);
    ties go to fewer uplink bytes, then fewer links. Entries fixed by earlier
    groups are followed, so the tables stay one next hop per node and
    destination switch. Nodes no group passes through get no entry.

    Parameters
    ----------
    problem : CircuitProblem
    circuits : sequence of (int, int)
    max_circuits_per_route : int, optional

    Returns
    -------
    numpy.ndarray
        ``next_hop``.

    Examples
    --------
    >>> from planner.core.topology_io import load_topology
    >>> from planner.traffic.matrix import from_arrays
    >>> from planner.problems.circuits.problem import CircuitProblem
    >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=4"])   # OCS nodes 0-3, 16-19, ...
    >>> traffic = from_arrays(64, range(4, 12), range(20, 28), [4e7] * 8)  # non-OCS nodes, switch 0 -> 1
    >>> prob = CircuitProblem.build(topo, traffic, placement=list(range(64)))
    >>> circuits = [(0, 16), (1, 17)]
    >>> from planner.problems.circuits.bound import evaluate
    >>> round(evaluate(prob, circuits, congestion_tables(prob, circuits)).congestion_s, 3)
    0.048
    """
    p = problem
    H = max_circuits_per_route if p.hop_limit is None else min(max_circuits_per_route, p.hop_limit)
    sw = p.node_switch
    idx = p.link_index()
    partners = partners_of(p.n_nodes, circuits)
    clink = circuit_links(p, circuits)
    ocs_of = p.ocs_of_switch()
    bw = np.concatenate([p.fixed_link_bw(), np.full(2 * len(circuits), p.ocs_bw_Bps)])
    inv = np.where(np.isfinite(bw), 1.0 / bw, 0.0)
    t = np.concatenate([p.base_loads(), np.zeros(2 * len(circuits))]) * inv
    s = p.n_switches
    nh = np.full((p.n_nodes, s), -1, dtype=np.int64)
    fixed = np.zeros((p.n_nodes, s), dtype=bool)
    uu0, uu1 = idx["uplink_up"], idx["uplink_down"]
    gkey = p.large_src * s + sw[p.large_dst]
    groups, ginv = np.unique(gkey, return_inverse=True)
    gw = np.bincount(ginv, weights=p.large_bytes, minlength=len(groups))
    order = np.argsort(ginv, kind="stable")
    bounds = np.searchsorted(ginv[order], np.arange(len(groups) + 1))

    def routes(node, dst, left, after_eps):
        """Yield (entries, links, end, fallback) for the traffic at ``node`` bound for ``dst``."""
        if sw[node] == dst:
            yield (), (), node, False
            return
        if fixed[node, dst]:
            h = int(nh[node, dst])
            if h < 0:
                yield (), (idx["up"] + node, uu0 + int(sw[node]), uu1 + dst), node, True
            elif h in partners[node]:
                if left <= 0:
                    return  # the fixed route crosses more circuits than this path has left
                for e, l, end, fb in routes(h, dst, left - 1, False):
                    yield e, (clink[(node, h)],) + l, end, fb
            else:
                for e, l, end, fb in routes(h, dst, left, True):
                    yield e, (idx["up"] + node, idx["down"] + h) + l, end, fb
            return
        if not after_eps:
            yield ((node, -1),), (idx["up"] + node, uu0 + int(sw[node]), uu1 + dst), node, True
        if left > 0:
            for v in partners[node]:
                for e, l, end, fb in routes(v, dst, left - 1, False):
                    if not fb or sw[end] != sw[node]:
                        yield ((node, v),) + e, (clink[(node, v)],) + l, end, fb
            if not after_eps:
                for q in ocs_of[sw[node]].tolist():
                    if q != node and partners[q]:
                        for e, l, end, fb in routes(q, dst, left, True):
                            if not fb:
                                yield ((node, q),) + e, (idx["up"] + node, idx["down"] + q) + l, end, fb

    for g in np.argsort(-gw, kind="stable").tolist():
        a, dst = divmod(int(groups[g]), s)
        sel = order[bounds[g]:bounds[g + 1]]
        b, w = p.large_dst[sel], p.large_bytes[sel]
        best = None
        for entries, links, end, fb in routes(a, dst, H, False):
            nodes_seen = [a] + [h for _, h in entries if h >= 0]
            if len(set(nodes_seen)) != len(nodes_seen):
                continue  # would loop
            ids = list(links)
            vals = [gw[g]] * len(links)
            deliver = np.ones(len(b), bool) if fb else (b != end)
            ids += (idx["down"] + b[deliver]).tolist()
            vals += w[deliver].tolist()
            if not fb and (b != end).any():
                ids.append(idx["up"] + end)
                vals.append(float(w[b != end].sum()))
            ids = np.asarray(ids, dtype=np.int64)
            new = t[ids] + np.asarray(vals) * inv[ids]
            touched, pos = np.unique(ids, return_inverse=True)
            add = np.bincount(pos, weights=np.asarray(vals) * inv[ids], minlength=len(touched))
            cost = float((t[touched] + add).max())
            up = gw[g] if fb else 0.0
            key = (cost, up, len(links))
            if best is None or key < best[0]:
                best = (key, entries, touched, add)
            del new
        _, entries, touched, add = best
        for node, h in entries:
            nh[node, dst] = h
            fixed[node, dst] = True
        t[touched] += add
    return nh
