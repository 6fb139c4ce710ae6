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
simulator's walk (:func:`topoplan.sim.network.follow_forwarding`), raising on loops
and non-neighbour hops.
"""

from __future__ import annotations

import heapq
import time as _time

import numpy as np

from topoplan.plans.circuits import array_from_tables, tables_from_array  # noqa: F401 (their home: the plan document)
from topoplan.problems.circuits.bound import evaluate, plan_pair_links, step_link_times
from topoplan.problems.circuits import _sharing

__all__ = ["LOAD_SHARING", "partners_of", "circuit_links", "Routes",
           "distance_vector", "polish_tables", "congestion_tables"]

LOAD_SHARING = ("least-loaded: among equal-cost next hops (optical first), each node's traffic to a destination "
                "switch, the largest first, goes to the next hop whose entry link (relay EPS down link or circuit) "
                "has the least load so far in seconds (bytes / bandwidth); remaining ties to the smaller node id. "
                "So parallel circuits between two switches serve different source nodes.")

_REL_TOL = 1e-9

# up to this many (node, switch) entries distance_vector runs the plain node-by-node version (same tables)
_SMALL = 256

# from this many (node, destination switch) groups of traffic the load sharing's traffic pass runs compiled
# (:mod:`topoplan.problems.circuits._sharing_jit`, the same tables); below, importing Numba and loading the
# kernel (0.5-1 s, 150 MB) cost about what they save (4,096 nodes: 32,768 groups)
COMPILED_MIN_GROUPS = 65_536
# ... and from this many where the pass is built ahead of time (:mod:`topoplan.problems.circuits._sharing`: no
# Numba to load): 4,096 nodes of random traffic (32,768 groups) 0.38-0.47 s against 0.71-1.28 s of CPU for the
# greedy method, 1,024 nodes (8,192) alike
AOT_MIN_GROUPS = 16_384


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
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.matrix import from_arrays
    >>> from topoplan.problems.circuits.problem import CircuitProblem
    >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=4"])   # OCS nodes 0-3, 16-19, ...
    >>> traffic = from_arrays(64, range(4, 12), range(20, 28), [4e7] * 8)  # non-OCS nodes, switch 0 -> 1
    >>> prob = CircuitProblem.build(topo, traffic, placement=list(range(64)))
    >>> circuits = [(0, 16), (1, 17)]
    >>> circuit_links(prob, circuits)
    {(0, 16): 200, (16, 0): 201, (1, 17): 202, (17, 1): 203}
    """
    cl = problem.network().circuit_links(circuits)
    return dict(zip(zip(cl.src.tolist(), cl.dst.tolist()), range(cl.first, cl.first + cl.n_links)))


class Routes:
    """Routes through forwarding tables, memoized per (node, destination switch).

    ``route(n, S)`` returns ``(links, end, fallback, circuits, relay_hops)``: the link ids
    the message crosses up to the end node (EPS hops: node up + node down;
    circuits: the directed circuit link; fallback: node up of ``end`` and the
    two uplinks), the node where it ends (under ``S``, or where it falls back),
    whether it falls back, the circuits crossed and the EPS hops to relays. Delivery from ``end`` to the
    destination node is left to the caller (it depends on the destination node). The walk is the
    simulator's (:meth:`topoplan.sim.network.Network.relay_routes`), which raises on loops and non-neighbour hops.

    Parameters
    ----------
    problem : CircuitProblem
    circuits : sequence of (int, int)
    next_hop : numpy.ndarray
        The tables; :meth:`set_entry` changes them in place.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.matrix import from_arrays
    >>> from topoplan.problems.circuits.problem import CircuitProblem
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

    Notes
    -----
    Per destination switch, in ascending order: the relay distances of the OCS
    nodes (a reversed Dijkstra from the OCS nodes under it; without a hop limit
    all destinations at once by relaxing to the fixpoint, which is the same
    distances bit for bit, as every distance is the same sum of the same terms),
    then every other node reaches a relay with one EPS hop, then nodes take
    their next hops in order of decreasing distance, larger own traffic first,
    then node id. Only nodes that carry traffic change link loads; they are
    taken one by one, so the Python work grows with the traffic's (node,
    destination switch) groups and the relays they use. The entries of the
    other nodes (``full``) are chosen with the loads at their place in that
    order, all at once with arrays.

    References
    ----------
    000 section 3.3 and 003 section 3.3.3 / Fig. 4 (distance vector, reciprocal
    bandwidth); 001 section 3.2.3 (ties prefer the optical path).

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.matrix import from_arrays
    >>> from topoplan.problems.circuits.problem import CircuitProblem
    >>> t = load_topology("paper003", ["ocs.nodes_per_switch=1"])
    >>> p = CircuitProblem.build(t, from_arrays(256, [4], [68], [4e6]))   # node 1 -> node 17
    >>> nh = distance_vector(p, [(0, 16)])
    >>> int(nh[1, 1]), int(nh[0, 1])    # node 1 relays via OCS node 0, which crosses its circuit
    (0, 16)
    """
    hop_limit = problem.hop_limit if hop_limit is None else hop_limit
    circuits = [(int(a), int(b)) for a, b in circuits]
    n, s = problem.n_nodes, problem.n_switches
    rel = _Relays(problem, circuits) if n * s > _SMALL else None
    if rel is None or not rel.ok:
        # small (the arrays cost more than they save) or a circuit with a non-OCS end or listed twice:
        # the plain version, which gives the same tables
        return _distance_vector_reference(problem, circuits, hop_limit=hop_limit, full=full, fallback=fallback)
    H = np.inf if hop_limit is None else int(hop_limit)
    if rel.K == 0:   # no relays: no routes
        return np.full((n, s), -1, dtype=np.int64)
    c_circ = 1.0 / problem.ocs_bw_Bps
    share = _Sharing(problem, rel, circuits, full, fallback)
    # destinations in blocks: the relaxation holds K x block distances at a time
    block = max(1, min(s, 4_000_000 // max(1, rel.K * max(1, rel.kmax))))
    for b0 in range(0, s, block):
        dsts = np.arange(b0, min(s, b0 + block))
        if np.isinf(H):
            D, ct, et = _relay_distances(rel, dsts, c_circ)
        else:
            D, ct, et = _relay_distances_limited(rel, dsts, problem, circuits, c_circ, H)
        D, ct, et = (np.ascontiguousarray(np.moveaxis(x, -1, 0)) for x in (D, ct, et))   # destination first
        for j, t in enumerate(dsts.tolist()):
            share.round(t, D[j], ct[j], et[j])
    return share.nh


class _Relays:
    """The relay graph of :func:`distance_vector` as arrays: OCS nodes (ascending), their circuit partners
    (in :func:`partners_of` order) and the OCS nodes of every switch in slots (ascending)."""

    def __init__(self, problem, circuits):
        n, s = problem.n_nodes, problem.n_switches
        sw = problem.node_switch
        self.ocs = problem.ocs_nodes.astype(np.int64)
        K = self.K = len(self.ocs)
        self.oi = np.full(n, -1, dtype=np.int64)
        self.oi[self.ocs] = np.arange(K)
        self.swo = sw[self.ocs]
        self.inv_o = 1.0 / problem.node_bw_Bps[self.ocs]
        c = np.asarray(circuits, dtype=np.int64).reshape(-1, 2)
        keys = np.minimum(c[:, 0], c[:, 1]) * n + np.maximum(c[:, 0], c[:, 1])
        self.ok = bool((self.oi[c.ravel()] >= 0).all() and (c[:, 0] != c[:, 1]).all()
                       and len(np.unique(keys)) == len(keys))
        if not self.ok:
            return
        partners = partners_of(n, circuits)
        P = self.P = max((len(partners[v]) for v in c.ravel().tolist()), default=0)
        self.PM = np.full((K, P), -1, dtype=np.int64)     # partner, as an OCS index
        self.PMn = np.full((K, P), -1, dtype=np.int64)    # partner node
        for v in np.unique(c.ravel()).tolist():
            row = partners[v]
            self.PMn[self.oi[v], :len(row)] = row
        has = self.PMn >= 0
        self.PM[has] = self.oi[self.PMn[has]]
        self.CL = np.full((K, P), -1, dtype=np.int64)     # directed circuit link to the partner
        rows = np.repeat(self.ocs[:, None], P, axis=1)
        self.CL[has] = problem.network().circuit_links(circuits).lookup(rows[has], self.PMn[has])
        self.has_p = has
        self.CLc = np.maximum(self.CL, 0)
        ocs_of = problem.ocs_of_switch()
        kmax = self.kmax = max((len(o) for o in ocs_of), default=0)
        self.SL = np.full((s, kmax), -1, dtype=np.int64)  # OCS index in slot j of switch S
        for k, o in enumerate(ocs_of):
            self.SL[k, :len(o)] = self.oi[o]
        self.slot_ok = self.SL >= 0
        self.SLc = np.maximum(self.SL, 0)
        self.SLn = np.where(self.slot_ok, self.ocs[self.SLc] if K else 0, -1)   # node in slot
        self.slot = np.zeros(K, dtype=np.int64)
        self.slot[self.SL[self.slot_ok]] = np.nonzero(self.slot_ok)[1]
        self.PMn_l, self.CL_l, self.SLn_l = self.PMn.tolist(), self.CL.tolist(), self.SLn.tolist()


def _relay_distances(rel: _Relays, dsts: np.ndarray, c_circ: float):
    """Relay distances of every OCS node towards every switch of ``dsts`` (K x B), with the circuit ties
    (K x P x B) and EPS ties (K x kmax x B) of :func:`_dijkstra` (no hop limit), by relaxing to the fixpoint.

    The fixpoint is Dijkstra's result: each distance is the minimum over its neighbours of the same float
    sums (``dist[p] + c`` over a circuit, ``dist[q] + inv[v] + inv[q]`` over an EPS hop). An EPS hop to a
    relay that does not cross a circuit next is never the minimum (two EPS hops cost more than one), so
    it may be relaxed too. Only entries that changed push to their neighbours: the work follows the
    number of changes, not the diameter of the relay graph times its size.
    """
    K, P, B = rel.K, rel.P, len(dsts)
    under = rel.swo[:, None] == dsts[None, :]
    flat = np.where(under, 0.0, np.inf).ravel()          # (OCS node k, destination j) at k * B + j
    inv = rel.inv_o
    # relax from the entries that changed (first the OCS nodes under each destination) until none does;
    # every step pushes the values of the last one, so the fixpoint is reached whatever the order
    front = np.flatnonzero(under.ravel())
    while front.size:
        k, j = np.divmod(front, B)
        d = flat[front]
        tgt, val = [], []
        for c in range(P):                                # over a circuit to the partner
            h = rel.has_p[k, c]
            u = rel.PM[k[h], c]
            tgt.append(u * B + j[h])
            val.append(d[h] + c_circ)
        eps = ~under[k, j]                                # an EPS hop from a relay not under the destination
        ke, je, de = k[eps], j[eps], d[eps]
        for c in range(rel.kmax):
            u = rel.SL[rel.swo[ke], c]
            h = (u >= 0) & (u != ke)
            uh = u[h]
            tgt.append(uh * B + je[h])
            val.append((de[h] + inv[uh]) + inv[ke[h]])
        tgt = np.concatenate(tgt) if tgt else np.zeros(0, dtype=np.int64)
        val = np.concatenate(val) if val else np.zeros(0)
        keep = (val < flat[tgt]) & ~under.ravel()[tgt]
        tgt, val = tgt[keep], val[keep]
        np.minimum.at(flat, tgt, val)
        front = np.unique(tgt)
    D = flat.reshape(K, B)
    lim = D * (1 + _REL_TOL)
    fin = np.isfinite(D) & ~under
    ct = np.zeros((K, P, B), dtype=bool)
    for j in range(P):
        h = rel.has_p[:, j]
        ct[h, j, :] = fin[h] & (D[rel.PM[h, j]] + c_circ <= lim[h])
    cross = ct.any(axis=1)
    et = np.zeros((K, rel.kmax, B), dtype=bool)
    for j in range(rel.kmax):
        q = rel.SL[rel.swo, j]
        h = (q >= 0) & (q != np.arange(K))
        qh = q[h]
        et[h, j, :] = fin[h] & cross[qh] & ((D[qh] + inv[h, None]) + inv[qh, None] <= lim[h])
    return D, ct, et


def _relay_distances_limited(rel: _Relays, dsts, problem, circuits, c_circ: float, H: int):
    """As :func:`_relay_distances` with a hop limit: :func:`_dijkstra` per destination switch."""
    K, P, B = rel.K, rel.P, len(dsts)
    D = np.full((K, B), np.inf)
    ct = np.zeros((K, P, B), dtype=bool)
    et = np.zeros((K, rel.kmax, B), dtype=bool)
    sw = problem.node_switch
    partners = partners_of(problem.n_nodes, circuits)
    ocs_of = problem.ocs_of_switch()
    inv_bw = 1.0 / problem.node_bw_Bps
    oi, slot = rel.oi, rel.slot
    for j, dst in enumerate(dsts.tolist()):
        dist, _, ties = _dijkstra(dst, sw, ocs_of, partners, inv_bw, c_circ, H)
        for v, d in dist.items():
            D[oi[v], j] = d
        for v, cands in ties.items():
            i = oi[v]
            for h, is_circ in cands:
                if is_circ:
                    ct[i, partners[v].index(h), j] = True
                else:
                    et[i, slot[oi[h]], j] = True
    return D, ct, et


class _Sharing:
    """The load-sharing pass of :func:`distance_vector`: link loads (seconds) across destination switches and
    the tables being filled (``nh``)."""

    def __init__(self, problem, rel: _Relays, circuits, full: bool, fallback):
        p = self.p = problem
        self.rel, self.full, self.fallback = rel, full, fallback
        n, s = p.n_nodes, p.n_switches
        self.n, self.s = n, s
        self.sw = p.node_switch
        self.inv = 1.0 / p.node_bw_Bps
        self.ocs_bw = p.ocs_bw_Bps
        idx = p.link_index()
        self.up, self.down = idx["up"], idx["down"]
        bw = np.concatenate([p.fixed_link_bw(), np.full(2 * len(circuits), p.ocs_bw_Bps)])
        self.load = np.concatenate([p.base_loads(), np.zeros(2 * len(circuits))]) / bw   # link loads in seconds
        self.nh = np.full((n, s), -1, dtype=np.int64)
        self.invc, self.cls = np.unique(self.inv, return_inverse=True)   # nodes by EPS link bandwidth
        self.cls = self.cls.ravel()
        # own traffic per (node, destination switch), summed as CircuitProblem.own_out sums it
        key = p.large_src * s + self.sw[p.large_dst]
        uniq, ginv = np.unique(key, return_inverse=True)
        # float64 also when there is none (an empty bincount is int64): the compiled pass's build takes float64
        own = np.bincount(ginv.ravel(), weights=p.large_bytes, minlength=len(uniq)).astype(np.float64)
        order = np.argsort(uniq % s, kind="stable")
        self.src_node, self.src_own = (uniq // s)[order], own[order]
        self.src_ptr = np.searchsorted((uniq % s)[order], np.arange(s + 1))
        self.is_ocs = p.is_ocs
        self.sw_l, self.oi_l, self.cls_l = self.sw.tolist(), rel.oi.tolist(), self.cls.tolist()
        self.inv_l = self.inv.tolist()
        groups = len(self.src_node)
        self.compiled = groups >= COMPILED_MIN_GROUPS or (groups >= AOT_MIN_GROUPS and _sharing.ready())

    # -- one destination switch ---------------------------------------
    def round(self, t: int, Dt, ct, et) -> None:
        rel, load, sw = self.rel, self.load, self.sw
        fin = np.isfinite(Dt) & (rel.swo != t)            # OCS nodes with a relay route (they have ties)
        cross = ct.any(axis=1)
        relay_ok = rel.slot_ok & cross[rel.SLc]             # crossing relays per switch slot
        R = np.where(relay_ok, Dt[rel.SLc] + rel.inv_o[rel.SLc], np.inf)
        has_relay = relay_ok.any(axis=1)
        Cg = R[:, None, :] + self.invc[None, :, None]       # (S, classes, kmax): relay cost + own EPS hop
        best_g = Cg.min(axis=2)
        tie_g = (Cg <= best_g[..., None] * (1 + _REL_TOL)) & relay_ok[:, None, :]
        fb = None if self.fallback is None else self.fallback[:, t]
        L0 = load[self.down + rel.ocs]
        cl0 = np.where(ct, load[rel.CLc], np.inf)
        minc0 = cl0.min(axis=1) if rel.P else np.full(rel.K, np.inf)
        traffic = self._traffic_compiled if self.compiled else self._traffic
        events, done = traffic(t, Dt, ct, et, fin, has_relay, best_g, tie_g, fb, minc0)
        if not self.full:
            return
        ocs_in = np.zeros(self.n, dtype=bool)
        ocs_in[rel.ocs[fin]] = True
        done_l, done = done, np.zeros(self.n, dtype=bool)
        done[done_l] = True
        # OCS nodes with a circuit tie take the least-loaded circuit (only they load it: any time will do)
        sel = cross & ~done[rel.ocs]
        if sel.any():
            bv = np.full(int(sel.sum()), np.inf)
            bh = np.full(len(bv), -1, dtype=np.int64)
            for j in range(rel.P):
                v = np.where(ct[sel, j], cl0[sel, j], np.inf)
                h = rel.PMn[sel, j]
                better = (v < bv) | ((v == bv) & (h < bh) & np.isfinite(v))
                bv, bh = np.where(better, v, bv), np.where(better, h, bh)
            self.nh[rel.ocs[sel], t] = bh
        V0 = np.maximum(L0, minc0)                          # EPS key of every relay with this round's loads at its start
        ev_q = events[:, 0].astype(np.int64)
        hit = np.zeros(rel.K, dtype=bool)
        hit[ev_q] = True
        # members: nodes that are not relays with a route, under a switch with relays
        mem = has_relay[sw] & ~ocs_in & ~done
        if fb is not None:
            mem &= ~fb
        members = np.flatnonzero(mem)
        # OCS nodes whose ties are all EPS hops
        eps_ocs = rel.ocs[fin & ~cross & ~done[rel.ocs]]
        if not len(members) and not len(eps_ocs):
            return
        Vs = np.where(relay_ok, V0[rel.SLc], np.inf)       # (S, kmax)
        hit_s = relay_ok & hit[rel.SLc]
        # (S, classes): a group with a choice among relays some of which saw traffic this round
        g_hit = (tie_g & hit_s[:, None, :]).any(axis=2) & (tie_g.sum(axis=2) > 1)
        choice_g = rel.SLn[np.arange(self.s)[:, None], np.argmin(np.where(tie_g, Vs[:, None, :], np.inf), axis=2)]
        ms, mc = sw[members], self.cls[members]
        if g_hit.any():
            # a group that saw traffic: its members share distance and ties and have no traffic, so an event
            # comes before all of them (farther, or as far with own traffic) or after all of them, unless it
            # is as far without own traffic (then the node ids interleave: those groups go one by one)
            gs, gc = np.nonzero(g_hit)
            gd = best_g[gs, gc]
            gcand, gq = tie_g[gs, gc], rel.SLc[gs]
            split = np.zeros(len(gs), dtype=bool)
            ev = events[:, :3]
            tied = ev[:, 2] == 0
            if tied.any():
                split = (np.isin(gq + 1j * gd[:, None], ev[tied, 0] + 1j * ev[tied, 1]) & gcand).any(axis=1)
            whole = np.flatnonzero(~split)
            gval = np.where(gcand[whole], V0[gq[whole]], np.inf)
            gneed = gcand[whole] & hit[gq[whole]]
            if len(whole):
                gval[gneed] = self._loads_at(np.full(len(whole), -1), gd[whole], gq[whole], gneed, events, L0, minc0)
            choice_g[gs[whole], gc[whole]] = rel.SLn[gs[whole], np.argmin(gval, axis=1)]
            g_hit[gs[whole], gc[whole]] = False
        quiet = ~g_hit[ms, mc]
        self.nh[members[quiet], t] = choice_g[ms[quiet], mc[quiet]]
        # the rest one by one (in arrays): members of groups split by events, OCS nodes with EPS ties
        loud = members[~quiet]
        u = np.concatenate([loud, eps_ocs])
        if not len(u):
            return
        cand = np.concatenate([tie_g[sw[loud], self.cls[loud]], et[rel.oi[eps_ocs]]])
        du = np.concatenate([best_g[sw[loud], self.cls[loud]], Dt[rel.oi[eps_ocs]]])
        q = rel.SLc[sw[u]]                                   # (m, kmax) OCS index of each slot
        val = np.where(cand, V0[q], np.inf)
        need = cand & hit[q] & (cand.sum(axis=1) > 1)[:, None]
        rows = np.flatnonzero(need.any(axis=1))
        if len(rows):
            sub = need[rows]
            v = self._loads_at(u[rows], du[rows], q[rows], sub, events, L0, minc0)
            vr = val[rows]
            vr[sub] = v
            val[rows] = vr
        self.nh[u, t] = rel.SLn[sw[u], np.argmin(val, axis=1)]

    def _traffic_compiled(self, t, Dt, ct, et, fin, has_relay, best_g, tie_g, fb, minc0):
        """:meth:`_traffic` compiled (:func:`topoplan.problems.circuits._sharing_jit.traffic_pass`, built ahead
        of time where it can be: :mod:`topoplan.problems.circuits._sharing`): the same tables, loads and events."""
        rel = self.rel
        lo, hi = self.src_ptr[t], self.src_ptr[t + 1]
        use_fb = fb is not None
        fb = np.ascontiguousarray(fb) if use_fb else np.zeros(self.n, dtype=bool)   # (a column: the build's type)
        return _sharing.traffic_pass(t, self.src_node[lo:hi], self.src_own[lo:hi], Dt, ct, et, fin, has_relay,
                                     best_g, tie_g, fb, use_fb, minc0, self.sw, rel.oi, self.cls, self.inv, rel.SLn,
                                     rel.PMn, rel.CL, self.load, self.down, self.up, float(self.ocs_bw), self.nh)

    def _traffic(self, t, Dt, ct, et, fin, has_relay, best_g, tie_g, fb, minc0):
        """Nodes with traffic towards switch ``t``, one by one in the order of the rules; returns the events
        on relays' EPS down links as rows ``(relay OCS index, dist, own, node, load after)`` (an array) and
        the nodes done (in order).

        A relay's circuits are loaded only when the relay itself is taken, after every node that considers
        an EPS hop to it (it is nearer the destination), so its least-loaded circuit is ``minc0``."""
        rel, load = self.rel, self.load
        sw, oi, cls, inv = self.sw_l, self.oi_l, self.cls_l, self.inv_l
        lo, hi = self.src_ptr[t], self.src_ptr[t + 1]
        own = dict(zip(self.src_node[lo:hi].tolist(), self.src_own[lo:hi].tolist()))
        events: list = []
        done_l: list = []
        if not own:
            return np.zeros((0, 5)), np.zeros(0, dtype=np.int64)
        sl, pmn, cl = rel.SLn_l, rel.PMn_l, rel.CL_l
        down, up, ocs_bw = self.down, self.up, self.ocs_bw

        fin_l, minc = fin.tolist(), minc0.tolist()
        heap = []
        for a, w in own.items():
            if oi[a] >= 0 and fin_l[oi[a]]:
                heap.append((-float(Dt[oi[a]]), -w, a))
            elif has_relay[sw[a]] and (fb is None or not fb[a]):
                heap.append((-float(best_g[sw[a], cls[a]]), -w, a))
        heapq.heapify(heap)
        queued = {a for _, _, a in heap}
        inflow: dict[int, float] = {}
        group_ties: dict = {}
        hops: list = []
        pop, push = heapq.heappop, heapq.heappush
        while heap:
            nd, nw, u = pop(heap)
            f = -nw + inflow.get(u, 0.0)
            su = sw[u]
            best, best_key = None, None
            i = oi[u]
            if i >= 0 and fin_l[i]:
                for j, x in enumerate(ct[i].tolist()):
                    if x:
                        h, link = pmn[i][j], cl[i][j]
                        key = (0, load[link], h)
                        if best_key is None or key < best_key:
                            best, best_key = (h, link), key
                ties = et[i].tolist() if best is None else ()
            else:
                g = (su, cls[u])
                ties = group_ties.get(g)
                if ties is None:
                    ties = group_ties[g] = tie_g[g].tolist()
            for j, x in enumerate(ties):   # (an optical tie always wins: its key starts with 0)
                if x:
                    h = sl[su][j]
                    key = (1, max(load[down + h], minc[oi[h]]), h)
                    if best_key is None or key < best_key:
                        best, best_key = (h, -1), key
            h, link = best
            done_l.append(u)
            if link >= 0:
                load[link] += f / ocs_bw
            else:
                load[up + u] += f * inv[u]
                load[down + h] += f * inv[h]
                events.append((oi[h], -nd, -nw, u, float(load[down + h])))
            hops.append(h)
            inflow[h] = inflow.get(h, 0.0) + f
            if h not in queued and sw[h] != t:
                queued.add(h)
                push(heap, (-float(Dt[oi[h]]), -own.get(h, 0.0), h))
        self.nh[done_l, t] = hops
        return np.array(events, dtype=np.float64).reshape(-1, 5), np.array(done_l, dtype=np.int64)

    @staticmethod
    def _loads_at(u, du, q, need, events, L0, minc0) -> np.ndarray:
        """EPS keys ``max(load of relay q's down link, its least-loaded circuit)`` that node ``u[i]`` (no traffic,
        distance ``du[i]``) sees at its place in the order, for the ``need`` (node, slot) pairs."""
        ev, ev_val = events[:, :4], events[:, 4]
        ne, m = len(events), len(u)
        # one order over events and nodes: (-dist, -own, node), as the pass takes them
        d = np.concatenate([ev[:, 1], du])
        w = np.concatenate([ev[:, 2], np.zeros(m)])
        node = np.concatenate([ev[:, 3], u.astype(np.float64)])
        rank = np.empty(ne + m, dtype=np.int64)
        rank[np.lexsort((node, -w, -d))] = np.arange(ne + m)
        evq = ev[:, 0].astype(np.int64)
        span = ne + m + 1
        ekey = evq * span + rank[:ne]
        eo = np.argsort(ekey, kind="stable")
        ekey, evq_s, eval_s = ekey[eo], evq[eo], ev_val[eo]
        rows, cols = np.nonzero(need)
        qq = q[rows, cols]
        pos = np.searchsorted(ekey, qq * span + rank[ne + rows])
        prev = pos - 1
        seen = (prev >= 0) & (evq_s[np.maximum(prev, 0)] == qq)
        L = np.where(seen, eval_s[np.maximum(prev, 0)], L0[qq])
        return np.maximum(L, minc0[qq])


def _distance_vector_reference(problem, circuits, *, hop_limit: int | None = None, full: bool = True,
                               fallback: np.ndarray | None = None) -> np.ndarray:
    """:func:`distance_vector` node by node, one destination switch at a time (the plain statement of the
    rules; the fast version must agree with it entry for entry, and it serves circuits with a non-OCS end)."""
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
    """Improve tables by local search on the exact objective (used to realize the exact model's plans): the
    communication-time bound, or with steps the step time (the sum of the step groups' bottlenecks).

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
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.matrix import from_arrays
    >>> from topoplan.problems.circuits.problem import CircuitProblem
    >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=4"])   # OCS nodes 0-3, 16-19, ...
    >>> traffic = from_arrays(64, range(4, 12), range(20, 28), [4e7] * 8)  # non-OCS nodes, switch 0 -> 1
    >>> prob = CircuitProblem.build(topo, traffic, placement=list(range(64)))
    >>> circuits = [(0, 16), (1, 17)]
    >>> from topoplan.problems.circuits.bound import evaluate
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
    # link times per step group (one row: the whole traffic as one phase); the objective is the sum of the
    # rows' maxima (see :mod:`topoplan.problems.circuits.steps`)
    t = step_times_of(p, ev, circuits, nh, bw)
    pair_w = _pair_weights(p)
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
    members = {int(k): (p.large_dst[order_g[bounds_g[g]:bounds_g[g + 1]]],
                        pair_w[:, order_g[bounds_g[g]:bounds_g[g + 1]]].T)
               for g, k in enumerate(groups.tolist())}
    gweight = dict(zip(groups.tolist(), gw.tolist()))
    gstep = {int(k): members[int(k)][1].sum(axis=0) for k in groups.tolist()}   # per step group
    routes.prefetch(groups // s, groups % s)

    path_nodes = routes.nodes

    through: dict[tuple[int, int], int] = {}
    for k in groups.tolist():
        a, dst = divmod(k, s)
        for x in path_nodes(a, dst)[1:]:
            through[(x, dst)] = through.get((x, dst), 0) + 1

    def contrib(k, links, end, fb):
        """Links the group's traffic crosses and its bytes there, per step group (rows: links)."""
        b, w = members[k]
        ids = [np.asarray(links, dtype=np.int64)]
        vals = [np.broadcast_to(gstep[k], (len(links), len(gstep[k])))]
        deliver = np.ones(len(b), bool) if fb else (b != end)
        ids.append(idx["down"] + b[deliver]); vals.append(w[deliver])
        if not fb:
            via = b != end
            if via.any():
                ids.append(np.array([idx["up"] + end])); vals.append(w[via].sum(axis=0, keepdims=True))
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
            T0 = float(t.max(axis=1).sum())
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
                dbytes = np.zeros((len(touched), dv.shape[1]))
                np.add.at(dbytes, pos, dv)
                new_t = t[:, touched] + (dbytes * inv[touched, None]).T
                tmp = t.copy()
                tmp[:, touched] = new_t
                mx = tmp.max(axis=1)
                T1 = float(mx.sum())
                at1 = int((tmp >= mx[:, None] * (1 - 1e-9)).sum())
                du = float(dbytes[(touched >= uu0) & (touched < uu1)].sum())
                dsq = float((new_t ** 2 - t[:, touched] ** 2).sum())
                key = (T1, at1, uplink + du, dsq)
                if best is None or _better_key(key, best[0]):
                    best = (key, h, touched, new_t, du)
            if best is None:
                continue
            (T1, at1, up1, dsq), h, touched, new_t, du = best
            at0 = int((t >= t.max(axis=1, keepdims=True) * (1 - 1e-9)).sum())
            if _better_key((T1, at1, up1, dsq), (T0, at0, uplink, base_sq)):
                for x in path_nodes(a, dst)[1:]:
                    through[(x, dst)] -= 1
                routes.set_entry(a, dst, h)
                for x in path_nodes(a, dst)[1:]:
                    through[(x, dst)] = through.get((x, dst), 0) + 1
                t[:, touched] = new_t
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


def congestion_tables(problem, circuits, *, max_circuits_per_route: int = 2,
                      time_limit: float | None = None) -> np.ndarray:
    """Forwarding tables by least-congested routing on the exact link loads (used to realize model plans).

    Source traffic groups (node, destination switch), largest first, each
    take the route that keeps the most loaded link it crosses (delivery
    included; with steps, summed over the step groups) lowest -- fall back, the own circuit, or an EPS hop to a relay
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
    time_limit : float, optional
        Seconds; the groups not routed when it runs out (the smallest) keep no entry, so their traffic falls
        back to the uplinks (valid tables, improved later by :func:`polish_tables`). None: route all.

    Returns
    -------
    numpy.ndarray
        ``next_hop``.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.matrix import from_arrays
    >>> from topoplan.problems.circuits.problem import CircuitProblem
    >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=4"])   # OCS nodes 0-3, 16-19, ...
    >>> traffic = from_arrays(64, range(4, 12), range(20, 28), [4e7] * 8)  # non-OCS nodes, switch 0 -> 1
    >>> prob = CircuitProblem.build(topo, traffic, placement=list(range(64)))
    >>> circuits = [(0, 16), (1, 17)]
    >>> from topoplan.problems.circuits.bound import evaluate
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
    t = _base_step_times(p, bw)          # per step group (one row without steps) and link
    pair_w = _pair_weights(p)
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

    deadline = None if time_limit is None else _time.perf_counter() + time_limit
    for g in np.argsort(-gw, kind="stable").tolist():
        if deadline is not None and _time.perf_counter() > deadline:
            break
        a, dst = divmod(int(groups[g]), s)
        sel = order[bounds[g]:bounds[g + 1]]
        b, w = p.large_dst[sel], pair_w[:, sel].T       # per pair and step group
        gk = w.sum(axis=0)
        best = None
        for entries, links, end, fb in routes(a, dst, H, False):
            nodes_seen = [a] + [h for _, h in entries if h >= 0]
            if len(set(nodes_seen)) != len(nodes_seen):
                continue  # would loop
            deliver = np.ones(len(b), bool) if fb else (b != end)
            ids = [np.asarray(links, dtype=np.int64), idx["down"] + b[deliver]]
            vals = [np.broadcast_to(gk, (len(links), len(gk))), w[deliver]]
            if not fb and (b != end).any():
                ids.append(np.array([idx["up"] + end]))
                vals.append(w[b != end].sum(axis=0, keepdims=True))
            ids = np.concatenate(ids)
            touched, pos = np.unique(ids, return_inverse=True)
            add = np.zeros((len(touched), len(gk)))
            np.add.at(add, pos, np.concatenate(vals) * inv[ids, None])
            # the most loaded link the route crosses, per step group, summed over the groups
            cost = float((t[:, touched] + add.T).max(axis=1).sum())
            up = gw[g] if fb else 0.0
            key = (cost, up, len(links))
            if best is None or key < best[0]:
                best = (key, entries, touched, add)
        _, entries, touched, add = best
        for node, h in entries:
            nh[node, dst] = h
            fixed[node, dst] = True
        t[:, touched] += add.T
    return nh


def _pair_weights(problem) -> np.ndarray:
    """Bytes of every large pair per step group (``K x P``; one row, the pairs' bytes, without steps)."""
    sl = problem.step_loads
    return problem.large_bytes.reshape(1, -1) if sl is None else sl.large_B


def _base_step_times(problem, bw) -> np.ndarray:
    """Seconds of the plan-independent loads per step group and link (one row without steps; circuits 0)."""
    inv = np.where(np.isfinite(bw), 1.0 / bw, 0.0)
    if problem.step_loads is None:
        base = np.concatenate([problem.base_loads(), np.zeros(len(bw) - problem.n_fixed_links())])
        return (base * inv).reshape(1, -1)
    return step_link_times(problem, None, bw)


def step_times_of(problem, ev, circuits, next_hop, bw) -> np.ndarray:
    """Seconds per step group and link of a plan (one row, the whole traffic's, without steps).

    Parameters
    ----------
    problem : CircuitProblem
    ev : Evaluation
        The plan's (:func:`topoplan.problems.circuits.bound.evaluate`).
    circuits : sequence of (int, int)
    next_hop : numpy.ndarray
    bw : numpy.ndarray
        Per link (circuits last).

    Returns
    -------
    numpy.ndarray
        ``K x links``.
    """
    inv = np.where(np.isfinite(bw), 1.0 / bw, 0.0)
    if problem.step_loads is None:
        return (ev.loads_B * inv).reshape(1, -1)
    return step_link_times(problem, plan_pair_links(problem, circuits, next_hop), bw)
