"""Compile a topology (plus placement and circuit plan) into directed links and routes.

This module is the one network model of the project: the simulator, the
congestion bound of placements (:mod:`topoplan.analysis.linkload`) and the circuit
bound (:mod:`topoplan.problems.circuits.bound`) all number links and compute routes
here.

Links are directed (full duplex: the two directions never share). A route
is a list of link ids. Link numbering (:meth:`Network.link_ids`):

- tree, fat-tree, hybrid: intra-node links ``0..N-1``, node up links
  ``N..2N-1``, node down links ``2N..3N-1``, edge-switch uplinks up
  ``3N..3N+S-1`` and down ``3N+S..3N+2S-1``;
- torus / mesh: intra-node links, then per dimension and node its ``+``
  then its ``-`` link (those that exist), then inject and eject links
  when the topology gives an injection bandwidth;
- graph: intra-node, node up, node down, then the switch links (both
  directions of every link, in the topology's order); routes are shortest
  switch paths, and parallel links between two switches (a trunk) carry the
  routes to node ``d`` on their ``d mod k``-th link.

These are the *fixed* links (:attr:`Network.n_fixed_links`). A circuit plan's
circuits follow, two directed links per circuit in the plan's order: circuit
``i`` = ``(u, v)`` is link ``n_fixed_links + 2 i`` from u to v and the next
one back (:class:`CircuitLinks`).

On a hybrid network a large inter-switch message follows the circuit plan's
forwarding tables through relay (OCS) nodes (:func:`follow_forwarding`, the
one implementation of that walk; the circuit bound uses it too, through
:meth:`Network.relay_routes`); how a relay forwards is the model's ``relay``
choice (:class:`topoplan.sim.simmodel.SimModel`):

- ``pipelined``: the message is one transfer over the concatenated route;
  each relay adds one chunk's serialization (``relay_chunk_B`` / bandwidth
  of the link it sends on) to the route latency, as a switch adds one MTU;
- ``store-and-forward``: the message is a chain of *segments* (source ->
  relay, relay -> relay over a circuit, relay -> destination); a relay
  receives the whole segment before it sends the next, so each segment is
  its own flow.

Link classes (for reports and ``bytes_by_link_class``): ``node-up``,
``node-down`` (node EPS links), ``uplink-up``, ``uplink-down`` (edge switch
to top switch), ``intra`` (ranks on one node), ``ocs`` (circuits),
``torus-<dim><+|->`` and ``inject``/``eject`` on mesh/torus, ``switch`` on
graph topologies.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain

import numpy as np

from topoplan.core.errors import TopoplanError
from topoplan.core.topology import GraphTopology, TorusTopology, TreeTopology
from topoplan.plans.circuits import ForwardingTables
from topoplan.sim.routes import LinkSet, ranges
from topoplan.sim.simmodel import SimModel

__all__ = ["DIM_NAMES", "CircuitPlan", "CircuitLinks", "RelayHops", "RelayRoutes", "follow_forwarding", "Network",
           "build_network", "circuit_threshold_B"]

DIM_NAMES = "xyzabcdefghijklmnopqrstuvw"
@dataclass
class CircuitPlan:
    """Circuits (node pairs) and forwarding tables: ``forwarding[node][dst_switch] = next hop node``.

    Parameters
    ----------
    circuits : list of tuple of int
        The circuits as node pairs.
    forwarding : dict of int to dict of int to int, or ForwardingTables, optional
        ``forwarding[node][dst_switch]``: the next node of a large message towards ``dst_switch``; large
        tables as a :class:`topoplan.plans.circuits.ForwardingTables` (a next-hop array).
    hop_limit : int, optional
        Most circuits a route may cross (recorded; the plan's validator checks it).

    Examples
    --------
    >>> CircuitPlan.from_dict({"circuits": [[0, 16]], "forwarding": {"1": {"1": 0}, "0": {"1": 16}}})
    CircuitPlan(circuits=[(0, 16)], forwarding={1: {1: 0}, 0: {1: 16}}, hop_limit=None)
    """

    circuits: list[tuple[int, int]]
    forwarding: dict[int, dict[int, int]] | ForwardingTables = field(default_factory=dict)
    hop_limit: int | None = None

    @classmethod
    def from_dict(cls, doc: dict, where: str = "circuit plan") -> "CircuitPlan":
        fwd = doc.get("forwarding") or {}
        try:
            circuits = [(int(a), int(b)) for a, b in doc.get("circuits", [])]
            if not isinstance(fwd, ForwardingTables):   # (tables held as an array are kept as they are)
                fwd = {int(n): _int_row(tab) for n, tab in fwd.items()}
        except (TypeError, ValueError):
            raise TopoplanError(f"{where}: field 'circuits'/'forwarding': expected node-id pairs and "
                                f"{{node: {{switch: next_hop}}}}") from None
        return cls(circuits, fwd, doc.get("hop_limit"))


def _int_row(tab) -> dict[int, int]:
    """A forwarding row ``{switch: next_hop}`` with int keys and values. A row whose next hops are all plain
    ``int`` (every plan topoplan writes) is converted by compiled calls, 8 million entries in seconds; any
    other entry by entry, with the same result."""
    if not tab:
        return {}
    vals = tab.values()
    if set(map(type, vals)) == {int}:
        return dict(zip(map(int, tab), vals))
    return {int(s): int(h) for s, h in tab.items()}


@dataclass
class CircuitLinks:
    """The directed links of a list of circuits, numbered from ``first`` in the list's order.

    Circuit ``i`` = ``(u, v)`` is link ``first + 2 i`` from u to v and
    ``first + 2 i + 1`` from v to u; :func:`build_network` numbers a plan's
    circuits so with ``first`` = the number of fixed links. A circuit listed
    twice resolves to its last listing (a valid plan lists none twice).

    Parameters
    ----------
    n_nodes : int
    first : int
        Id of the first circuit link.
    src, dst : numpy.ndarray of int64
        Per circuit link (in id order), the node it leaves and the node it reaches.

    Build one with :meth:`number`.

    Examples
    --------
    >>> cl = CircuitLinks.number(64, [(0, 16), (32, 48)], first=200)
    >>> cl.lookup([0, 16, 48, 0], [16, 0, 32, 32]).tolist()
    [200, 201, 203, -1]
    >>> cl.ends(203), cl.n_links
    ((48, 32), 4)
    """

    n_nodes: int
    first: int
    src: np.ndarray
    dst: np.ndarray
    _keys: np.ndarray = field(repr=False)
    _links: np.ndarray = field(repr=False)

    @classmethod
    def number(cls, n_nodes: int, circuits, first: int) -> "CircuitLinks":
        """Number ``circuits`` (``(u, v)`` node pairs) after link ``first - 1``."""
        c = np.asarray(circuits, dtype=np.int64).reshape(-1, 2)
        src, dst = c.ravel(), c[:, ::-1].ravel()
        keys = src * n_nodes + dst
        order = np.argsort(keys, kind="stable")
        return cls(int(n_nodes), int(first), src, dst, keys[order], first + order.astype(np.int64))

    @property
    def n_links(self) -> int:
        return len(self.src)

    def lookup(self, u, v) -> np.ndarray:
        """Link id of the circuit from node ``u[i]`` to node ``v[i]``, ``-1`` where there is none."""
        key = np.asarray(u, dtype=np.int64) * self.n_nodes + np.asarray(v, dtype=np.int64)
        if not len(self._keys):
            return np.full(key.shape, -1, dtype=np.int64)
        pos = np.searchsorted(self._keys, key, side="right") - 1
        safe = np.maximum(pos, 0)
        return np.where((pos >= 0) & (self._keys[safe] == key), self._links[safe], -1)

    def ends(self, link: int) -> tuple[int, int]:
        """``(from node, to node)`` of circuit link ``link``."""
        j = int(link) - self.first
        if not 0 <= j < self.n_links:
            raise TopoplanError(f"field 'link': {link} is not a circuit link "
                                f"({self.first}..{self.first + self.n_links - 1})")
        return int(self.src[j]), int(self.dst[j])


@dataclass
class RelayHops:
    """Walks through forwarding tables, as CSR over walks: walk ``i`` is hops ``ptr[i]:ptr[i+1]``.

    Parameters
    ----------
    ptr : numpy.ndarray
        Hop offsets per walk.
    src, dst : numpy.ndarray
        Per hop, the node it leaves and the node it reaches.
    link : numpy.ndarray
        Per hop, the directed circuit link it crosses; ``-1`` for an EPS hop to a relay under the same switch.
    end : numpy.ndarray
        Per walk, the node where it stops: under the destination switch, or where an entry is missing.
    fallback : numpy.ndarray of bool
        Per walk, whether it stopped at a missing entry (from ``end`` it takes the EPS uplinks).
    bad : numpy.ndarray of bool
        Per walk, whether it stopped at a non-neighbour next hop or loops (only with ``errors='flag'``).

    See Also
    --------
    follow_forwarding : makes them.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=1"])   # OCS nodes 0, 16, 32, 48
    >>> next_hop = np.full((64, 4), -1)
    >>> next_hop[1, 1], next_hop[0, 1] = 0, 16      # node 1 -> relay 0 -> circuit -> 16 (switch 1)
    >>> hops = follow_forwarding(next_hop, topo.node_switch(), CircuitLinks.number(64, [(0, 16)], 200),
    ...                          start=[1, 2], target_switch=[1, 1])
    >>> hops.ptr.tolist(), hops.link.tolist(), hops.end.tolist(), hops.fallback.tolist()
    ([0, 2, 2], [-1, 200], [16, 2], [False, True])
    >>> hops.n_circuits.tolist(), hops.n_relay_hops.tolist()
    ([1, 0], [1, 0])
    """

    ptr: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    link: np.ndarray
    end: np.ndarray
    fallback: np.ndarray
    bad: np.ndarray

    def _per_walk(self, mask) -> np.ndarray:
        owner = np.repeat(np.arange(len(self.end)), np.diff(self.ptr))
        return np.bincount(owner, weights=mask, minlength=len(self.end)).astype(np.int64)

    @property
    def n_circuits(self) -> np.ndarray:
        """Circuits crossed per walk."""
        return self._per_walk(self.link >= 0)

    @property
    def n_relay_hops(self) -> np.ndarray:
        """EPS hops to relays per walk."""
        return self._per_walk(self.link < 0)


@dataclass
class RelayRoutes:
    """Routes of walks through forwarding tables (:meth:`Network.relay_routes`).

    Route ``i`` is ``links[ptr[i]:ptr[i+1]]``: the links the walk crosses up to
    its ``end`` node (an EPS hop: the node's up link and the relay's down link;
    a circuit: its directed link), plus, when it falls back, ``end``'s up link
    and the uplinks to the destination switch. Delivery from ``end`` to the
    destination node is the caller's (it depends on the node).

    Parameters
    ----------
    ptr : numpy.ndarray
        Link offsets per route.
    links : numpy.ndarray
        The routes' link ids, concatenated.
    hops : RelayHops
        The walks the routes follow.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=1"])   # OCS nodes 0, 16, 32, 48
    >>> net = build_network(topo, {"circuits": [[0, 16]], "forwarding": {"1": {"1": 0}, "0": {"1": 16}}})
    >>> routes = net.relay_routes([1], [1])
    >>> [net.link_name[l] for l in routes.links], routes.end.tolist(), routes.fallback.tolist()
    (['node0001->S0', 'S0->node0000', 'node0000=>node0016'], [16], [False])
    """

    ptr: np.ndarray
    links: np.ndarray
    hops: RelayHops

    @property
    def end(self) -> np.ndarray:
        return self.hops.end

    @property
    def fallback(self) -> np.ndarray:
        return self.hops.fallback


def follow_forwarding(next_hop, node_switch, circuit_links: CircuitLinks, start, target_switch, *,
                      errors: str = "raise") -> RelayHops:
    """Follow forwarding tables from nodes ``start[i]`` towards switches ``target_switch[i]`` (all walks at once).

    At node ``u`` the next hop is ``next_hop[u, target]``: a circuit partner of
    ``u`` (cross the circuit), another node under ``u``'s switch (an EPS hop to
    a relay), or ``-1`` (no entry: the walk stops and falls back to the EPS
    uplinks from ``u``). A walk stops at the first node under its target switch.

    Parameters
    ----------
    next_hop : numpy.ndarray
        (n_nodes x n_switches) integers, ``-1`` = no entry.
    node_switch : array_like of int
        Edge switch of every node.
    circuit_links : CircuitLinks
        The circuits and their link ids.
    start, target_switch : array_like of int
        The walks' start nodes and destination switches.
    errors : {"raise", "flag"}, optional
        ``flag``: mark such walks in ``bad`` (stopped where it went wrong) instead of raising.

    Returns
    -------
    RelayHops

    Raises
    ------
    TopoplanError
        on a next hop that is not a neighbour, and on a routing loop (a walk
        longer than the number of nodes revisits one), unless ``errors='flag'``.

    References
    ----------
    The route patterns of 001 section 3.2.3 (Fig. 3) and 003 section 3.3.3
    (Fig. 4): direct circuit, relay then circuit, circuit then relay.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=1"])   # OCS nodes 0, 16, 32, 48
    >>> next_hop = np.full((64, 4), -1)
    >>> next_hop[1, 1], next_hop[0, 1] = 0, 16      # node 1 -> relay 0 -> circuit -> 16 (switch 1)
    >>> hops = follow_forwarding(next_hop, topo.node_switch(), CircuitLinks.number(64, [(0, 16)], 200),
    ...                          start=[1, 2], target_switch=[1, 1])
    >>> hops.src.tolist(), hops.dst.tolist(), hops.end.tolist(), hops.fallback.tolist()
    ([1, 0], [0, 16], [16, 2], [False, True])
    >>> next_hop[16, 1] = 5                         # node 16 is already under switch 1: not consulted
    >>> next_hop[2, 1] = 40                         # not a neighbour of node 2
    >>> follow_forwarding(next_hop, topo.node_switch(), CircuitLinks.number(64, [(0, 16)], 200), [2], [1])
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: circuit plan: forwarding[2][1] = 40 is not a neighbour of node 2
    """
    if errors not in ("raise", "flag"):
        raise TopoplanError(f"field 'errors': 'raise' or 'flag', got {errors!r}")
    sw = np.asarray(node_switch, dtype=np.int64)
    n = len(sw)
    start = np.asarray(start, dtype=np.int64).ravel()
    target = np.asarray(target_switch, dtype=np.int64).ravel()
    m = len(start)
    cur = start.copy()
    fallback = np.zeros(m, dtype=bool)
    bad = np.zeros(m, dtype=bool)
    walk, hsrc, hdst, hlink = [], [], [], []
    active = np.flatnonzero(sw[cur] != target)
    steps = 0
    while active.size:
        if steps >= n:  # a walk over distinct nodes has at most n - 1 hops
            k = int(active[0])
            if errors == "flag":
                bad[active] = True
                break
            raise TopoplanError(f"circuit plan: routing loop from node {start[k]} towards switch {target[k]}")
        u, t = cur[active], target[active]
        h = np.asarray(next_hop[u, t], dtype=np.int64)
        has = h >= 0
        fallback[active[~has]] = True
        active, u, t, h = active[has], u[has], t[has], h[has]
        inside = h < n
        link = np.full(len(h), -1, dtype=np.int64)
        link[inside] = circuit_links.lookup(u[inside], h[inside])
        eps = np.zeros(len(h), dtype=bool)
        eps[inside] = (link[inside] < 0) & (sw[h[inside]] == sw[u[inside]]) & (h[inside] != u[inside])
        wrong = (link < 0) & ~eps
        if wrong.any():
            if errors == "raise":
                j = int(np.flatnonzero(wrong)[0])
                raise TopoplanError(f"circuit plan: forwarding[{u[j]}][{t[j]}] = {h[j]} is not a neighbour of "
                                    f"node {u[j]}")
            bad[active[wrong]] = True
            ok = ~wrong
            active, u, t, h, link = active[ok], u[ok], t[ok], h[ok], link[ok]
        walk.append(active); hsrc.append(u); hdst.append(h); hlink.append(link)
        cur[active] = h
        active = active[sw[h] != t]
        steps += 1
    if walk:
        w = np.concatenate(walk)
        order = np.argsort(w, kind="stable")  # hops were appended step by step: stable keeps their order
        hsrc, hdst, hlink = (np.concatenate(x)[order] for x in (hsrc, hdst, hlink))
        counts = np.bincount(w, minlength=m)
    else:
        hsrc = hdst = hlink = np.zeros(0, dtype=np.int64)
        counts = np.zeros(m, dtype=np.int64)
    ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return RelayHops(ptr=ptr, src=hsrc, dst=hdst, link=hlink, end=cur, fallback=fallback, bad=bad)


@dataclass
class Network:
    """Directed links and routing of one topology under one placement (and circuit plan).

    Parameters
    ----------
    topo : Topology
    bw_Bps, latency_s, shared : numpy.ndarray
        Per directed link (``shared=False`` is a fat pipe: it caps a flow but
        is not shared, used for fat-tree uplinks).
    link_class : numpy.ndarray of str
    link_name : list of str
        Labels per link.
    link_ends : list of tuple of str
        Per link, the names of the devices it joins.
    switch_delay_s, mtu_B : float
        Per store-and-forward switch a link enters: delay and the packet serialized.
    circuits : CircuitPlan, optional
    threshold_B : float, optional
        Messages of at least this size take the circuits.
    sim_model : SimModel, optional
        The modelling choices (:func:`build_network`'s ``model``).

    Build one with :func:`build_network`.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=1"])   # OCS nodes 0, 16, 32, 48
    >>> net = build_network(topo)
    >>> net.n_links, sorted(net.link_ids())
    (200, ['down', 'intra', 'up', 'uplink_down', 'uplink_up'])
    >>> ptr, links = net.eps_routes([0], [16])
    >>> [net.link_name[l] for l in links]
    ['node0000->S0', 'S0->top', 'top->S1', 'S1->node0016']
    """

    topo: object
    bw_Bps: np.ndarray
    latency_s: np.ndarray
    shared: np.ndarray
    link_class: np.ndarray
    link_name: list[str]
    link_ends: list[tuple[str, str]]
    switch_delay_s: float
    mtu_B: float
    circuits: CircuitPlan | None = None
    threshold_B: float = np.inf
    sim_model: SimModel = field(default_factory=SimModel)
    _idx: dict = field(default_factory=dict, repr=False)

    @property
    def n_links(self) -> int:
        return len(self.bw_Bps)

    @property
    def n_fixed_links(self) -> int:
        """Links that do not depend on a circuit plan (every link but the circuits, which come last)."""
        return int(self._idx["n_fixed"])

    def link_ids(self) -> dict[str, np.ndarray]:
        """Link ids by group (the numbering of the module docstring); do not modify the arrays.

        ``intra`` (per node) always; ``up``, ``down`` (per node) on trees and
        graphs; ``uplink_up``, ``uplink_down`` (per edge switch) on trees;
        ``inject``, ``eject`` (per node) on a torus with injection links.
        """
        keys = {"intra": "intra", "up": "up", "down": "down", "uplink_up": "sw_up", "uplink_down": "sw_down",
                "inject": "inject", "eject": "eject"}
        return {k: self._idx[v] for k, v in keys.items() if v in self._idx}

    def linkset(self):
        return LinkSet(bw_Bps=self.bw_Bps, latency_s=self.latency_s, shared=self.shared, names=self.link_name)

    # -- routes ---------------------------------------------------------
    def eps_routes(self, src: np.ndarray, dst: np.ndarray):
        """Routes over the packet network (no circuits) for node pairs; returns CSR ``(ptr, links)``."""
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        t = self.topo
        if isinstance(t, TreeTopology):
            return self._tree_routes(src, dst)
        if isinstance(t, TorusTopology):
            return self._torus_routes(src, dst)
        return self._graph_routes(src, dst)

    def _tree_routes(self, src, dst):
        i = self._idx
        sw = i["node_switch"]
        same_node = src == dst
        same_sw = (sw[src] == sw[dst]) & ~same_node
        across = ~same_node & ~same_sw
        length = np.where(same_node, 1, np.where(same_sw, 2, 4))
        ptr = np.concatenate([[0], np.cumsum(length)])
        links = np.empty(ptr[-1], dtype=np.int64)
        start = ptr[:-1]
        links[start[same_node]] = i["intra"][src[same_node]]
        links[start[same_sw]] = i["up"][src[same_sw]]
        links[start[same_sw] + 1] = i["down"][dst[same_sw]]
        s = start[across]
        links[s] = i["up"][src[across]]
        links[s + 1] = i["sw_up"][sw[src[across]]]
        links[s + 2] = i["sw_down"][sw[dst[across]]]
        links[s + 3] = i["down"][dst[across]]
        return ptr, links

    def _torus_routes(self, src, dst):
        """Dimension-order routing; on a ring the shorter way round (ties go the + way). Vectorized over pairs."""
        t = self.topo
        i = self._idx
        c, stride = i["coords"], i["stride"]
        inj = i.get("inject")
        m = len(src)
        same = src == dst
        pos = np.zeros(m, dtype=np.int64)
        rows_pair, rows_pos, rows_link = [np.flatnonzero(same)], [np.zeros(int(same.sum()), np.int64)], [i["intra"][src[same]]]
        moving = np.flatnonzero(~same)
        if inj is not None:
            rows_pair.append(moving); rows_pos.append(pos[moving].copy()); rows_link.append(inj[src[moving]])
            pos[moving] += 1
        cur = src.copy()
        for d, k in enumerate(t.dims):
            delta = c[dst, d] - c[cur, d]
            if t.wrap[d]:
                fwd = np.mod(delta, k)
                step = np.where(fwd <= k - fwd, 1, -1)
                nsteps = np.where(step == 1, fwd, k - fwd)
            else:
                step = np.where(delta >= 0, 1, -1)
                nsteps = np.abs(delta)
            nsteps[same] = 0
            plus, minus = i["dir_link"][d]
            for j in range(int(nsteps.max(initial=0))):
                act = np.flatnonzero(nsteps > j)
                node = cur[act]
                st = step[act]
                rows_pair.append(act); rows_pos.append(pos[act].copy())
                rows_link.append(np.where(st > 0, plus[node], minus[node]))
                pos[act] += 1
                cd = c[node, d]
                cur[act] = node + (np.mod(cd + st, k) - cd) * stride[d]
        if inj is not None:
            rows_pair.append(moving); rows_pos.append(pos[moving].copy()); rows_link.append(i["eject"][dst[moving]])
            pos[moving] += 1
        pair = np.concatenate(rows_pair); order = np.concatenate(rows_pos); link = np.concatenate(rows_link)
        srt = np.lexsort((order, pair))
        lengths = np.bincount(pair, minlength=m)
        return np.concatenate([[0], np.cumsum(lengths)]), link[srt].astype(np.int64)

    def _graph_routes(self, src, dst):
        """Host up link, the shortest switch path (one step of every unfinished pair at a time), host down link."""
        i = self._idx
        hs, nxt, swl = i["node_switch"], i["next_switch"], i["sw_link"]
        m = len(src)
        same = src == dst
        a, b = hs[src], hs[dst]
        moving = np.flatnonzero(~same)
        pair = [np.flatnonzero(same), moving]
        pos = [np.zeros(int(same.sum()), dtype=np.int64), np.zeros(len(moving), dtype=np.int64)]
        link = [i["intra"][src[same]], i["up"][src[moving]]]
        cur = a.copy()
        step_no = np.ones(m, dtype=np.int64)
        act = moving[cur[moving] != b[moving]]
        while act.size:
            nx = nxt[cur[act], b[act]]
            if (nx < 0).any():
                k = act[np.flatnonzero(nx < 0)[0]]
                raise TopoplanError(f"no route from host {src[k]} to host {dst[k]}: switches not connected")
            hop = swl[cur[act], nx]
            if "trunks" in i:   # a trunk's link by destination
                index, table, width = i["trunks"]
                r = index[cur[act], nx]
                on = np.flatnonzero(r >= 0)
                hop[on] = table[r[on], dst[act[on]] % width[r[on]]]
            pair.append(act); pos.append(step_no[act].copy()); link.append(hop)
            step_no[act] += 1
            cur[act] = nx
            act = act[cur[act] != b[act]]
        pair.append(moving); pos.append(step_no[moving]); link.append(i["down"][dst[moving]])
        pair = np.concatenate(pair); pos = np.concatenate(pos); link = np.concatenate(link)
        order = np.lexsort((pos, pair))
        ptr = np.concatenate([[0], np.cumsum(np.bincount(pair, minlength=m))])
        return ptr, link[order].astype(np.int64)

    def route_parts(self, nbytes: float = 0.0, *, max_pairs: int = 1 << 22):
        """The packet routes of messages of ``nbytes`` as parts, when they factor; else None.

        On a tree or a switch graph every route is the source's up link, a
        path that depends only on the two switches, and the destination's
        down link (the intra-node link when both ends are one node, no
        middle when they share a switch). Returns ``(switch, up, down, intra,
        mid_ptr, mid_links)``: per node its switch and links, and per switch
        pair ``a * n_switches + b`` the middle links, taken from
        :meth:`eps_routes` of one node under each switch. None on a torus, when
        messages of this size may take the circuits (relays do not factor),
        on a switch graph with parallel links (a trunk's link depends on the
        destination node), or with more than ``max_pairs`` switch pairs.

        Examples
        --------
        >>> from topoplan.core.topology_io import load_topology
        >>> net = build_network(load_topology("paper003", ["kind=tree", "ocs=null"]))
        >>> sw, up, down, intra, mid_ptr, mid_links = net.route_parts(1e6)
        >>> a, b = int(sw[0]), int(sw[16])
        >>> k = a * (int(sw.max()) + 1) + b                 # the switch pair's middle
        >>> [net.link_name[l] for l in [up[0], *mid_links[mid_ptr[k]:mid_ptr[k + 1]], down[16]]]
        ['node0000->S0', 'S0->top', 'top->S1', 'S1->node0016']
        """
        i = self._idx
        if isinstance(self.topo, TorusTopology) or "node_switch" not in i or "up" not in i or "trunks" in i:
            return None   # (on a trunk the middle of a route depends on the destination node)
        if self.circuits is not None and nbytes >= self.threshold_B:
            return None
        sw = np.asarray(i["node_switch"], dtype=np.int64)
        n_sw = int(sw.max(initial=-1)) + 1
        if n_sw * n_sw > max_pairs:
            return None
        if "route_parts" not in i:   # the same for every size that factors: made once per network
            i["route_parts"] = self._route_parts(sw, n_sw)
        return i["route_parts"]

    def _route_parts(self, sw, n_sw):
        i = self._idx
        rep = np.full(n_sw, -1, dtype=np.int64)
        rep[sw[::-1]] = np.arange(len(sw))[::-1]          # the first node under each switch
        a, b = np.divmod(np.arange(n_sw * n_sw), n_sw)
        pair = np.flatnonzero((a != b) & (rep[a] >= 0) & (rep[b] >= 0))
        ptr, links = self.eps_routes(rep[a[pair]], rep[b[pair]])
        inner = np.diff(ptr) - 2                          # without the up and down links
        keep = np.ones(len(links), dtype=bool)
        keep[ptr[:-1]] = False
        keep[ptr[1:] - 1] = False
        length = np.zeros(n_sw * n_sw, dtype=np.int64)
        length[pair] = inner
        mid_ptr = np.concatenate([[0], np.cumsum(length)])
        return sw, i["up"], i["down"], i["intra"], mid_ptr, links[keep]

    # -- circuits and forwarding tables -----------------------------------
    def circuit_links(self, circuits=None) -> CircuitLinks:
        """The links of ``circuits`` numbered after the fixed links, as :func:`build_network` numbers a plan's
        (default: the network's own plan)."""
        if isinstance(circuits, CircuitLinks):
            return circuits
        if circuits is None:
            if "circuit_links" not in self._idx:
                return CircuitLinks.number(self.topo.n_nodes, [], self.n_fixed_links)
            return self._idx["circuit_links"]
        return CircuitLinks.number(self.topo.n_nodes, circuits, self.n_fixed_links)

    def next_hop_table(self) -> np.ndarray:
        """The network's forwarding tables as an (n_nodes x n_switches) array, ``-1`` = no entry (built once).

        Entries for nodes or switches the topology does not have are never consulted and are left out."""
        if "next_hop" not in self._idx:
            n, s = self.topo.n_nodes, self.topo.n_switches
            fwd = self.circuits.forwarding if self.circuits is not None else {}
            nh = np.full((n, s), -1, dtype=np.int64 if n > np.iinfo(np.int32).max else np.int32)
            if isinstance(fwd, ForwardingTables):   # the array itself, cut to the topology
                r, c = min(n, fwd.next_hop.shape[0]), min(s, fwd.next_hop.shape[1])
                nh[:r, :c] = fwd.next_hop[:r, :c]
                fwd = {}
            rows = [(u, row) for u, row in fwd.items() if 0 <= u < n and row]
            if rows:   # every entry in three compiled passes (8 million at 16,384 nodes), then the range filter
                lens = [len(row) for _, row in rows]
                total = sum(lens)
                u = np.repeat(np.array([r for r, _ in rows], dtype=np.int64), lens)
                t = np.fromiter(chain.from_iterable(row.keys() for _, row in rows), dtype=np.int64, count=total)
                h = np.fromiter(chain.from_iterable(row.values() for _, row in rows), dtype=np.int64, count=total)
                ok = (t >= 0) & (t < s)
                nh[u[ok], t[ok]] = h[ok]
            self._idx["next_hop"] = nh
        return self._idx["next_hop"]

    def relay_hops(self, start, target_switch, next_hop=None, circuits=None, *, errors: str = "raise") -> RelayHops:
        """Walk the forwarding tables from nodes ``start[i]`` towards switches ``target_switch[i]``.

        Uses the network's own circuit plan, or ``next_hop`` (n_nodes x
        n_switches, ``-1`` = no entry) with ``circuits`` (a list of node pairs,
        whose links are numbered after the fixed links, or a :class:`CircuitLinks`
        from :meth:`circuit_links`). See :func:`follow_forwarding`.
        """
        if not isinstance(self.topo, TreeTopology):
            raise TopoplanError("forwarding tables need a hybrid topology (with an 'ocs' section)")
        if next_hop is None:
            next_hop, cl = self.next_hop_table(), self.circuit_links()
        else:
            cl = self.circuit_links([] if circuits is None else circuits)
        return follow_forwarding(next_hop, self._idx["node_switch"], cl, start, target_switch, errors=errors)

    def relay_routes(self, start, target_switch, next_hop=None, circuits=None, *,
                     errors: str = "raise") -> RelayRoutes:
        """Routes of walks through forwarding tables (:class:`RelayRoutes`); arguments as :meth:`relay_hops`.

        Examples
        --------
        >>> from topoplan.core.topology_io import load_topology
        >>> net = build_network(load_topology("paper003"))
        >>> nh = np.full((64, 4), -1); nh[1, 1], nh[0, 1] = 0, 16   # node 1 -> relay 0 => 16 under switch 1
        >>> r = net.relay_routes([1, 2], [1, 1], nh, [(0, 16)])
        >>> [net.link_label(l, [(0, 16)]) for l in r.links[r.ptr[0]:r.ptr[1]]], int(r.end[0])
        (['node0001->S0', 'S0->node0000', 'node0000=>node0016'], 16)
        >>> [net.link_label(l) for l in r.links[r.ptr[1]:r.ptr[2]]], bool(r.fallback[1])   # no entry at 2
        (['node0002->S0', 'S0->top', 'top->S1'], True)
        """
        hops = self.relay_hops(start, target_switch, next_hop, circuits, errors=errors)
        target = np.asarray(target_switch, dtype=np.int64).ravel()
        n_walks = len(hops.end)
        eps = np.flatnonzero(hops.link < 0)
        hop_len = np.ones(len(hops.link), dtype=np.int64)
        if eps.size:
            eptr, elinks = self.eps_routes(hops.src[eps], hops.dst[eps])
            hop_len[eps] = np.diff(eptr)
        owner = np.repeat(np.arange(n_walks), np.diff(hops.ptr))
        walk_len = np.bincount(owner, weights=hop_len, minlength=n_walks).astype(np.int64)
        fb = np.flatnonzero(hops.fallback)
        if fb.size:
            # falling back from `end`: the tree route from `end` to a node under the target switch, but its last link
            if "switch_node" not in self._idx:
                first = np.full(self.topo.n_switches, -1, dtype=np.int64)
                first[self._idx["node_switch"][::-1]] = np.arange(self.topo.n_nodes)[::-1]
                self._idx["switch_node"] = first
            tptr, tlinks = self.eps_routes(hops.end[fb], self._idx["switch_node"][target[fb]])
            tail_len = np.diff(tptr) - 1
            walk_len[fb] += tail_len
        ptr = np.concatenate([[0], np.cumsum(walk_len)]).astype(np.int64)
        links = np.empty(int(ptr[-1]), dtype=np.int64)
        before = np.concatenate([[0], np.cumsum(hop_len)]).astype(np.int64)  # link count of all earlier hops
        hop_start = ptr[owner] + before[:-1] - before[hops.ptr[owner]]
        circ = hops.link >= 0
        links[hop_start[circ]] = hops.link[circ]
        if eps.size:
            links[ranges(hop_start[eps], np.diff(eptr))] = elinks
        if fb.size:
            keep = np.ones(len(tlinks), dtype=bool)
            keep[tptr[1:] - 1] = False
            links[ranges(ptr[1:][fb] - tail_len, tail_len)] = tlinks[keep]
        return RelayRoutes(ptr=ptr, links=links, hops=hops)

    def link_label(self, link: int, circuits=None) -> str:
        """Name of ``link``; past the fixed links, the circuit links of ``circuits`` (default: the own plan)."""
        link = int(link)
        if circuits is None or link < self.n_fixed_links:
            return self.link_name[link]
        u, v = self.circuit_links(circuits).ends(link)
        return _circuit_name(self._idx["host_names"], u, v)

    def message_segments(self, src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray):
        """Split messages (node pairs) into segments: one EPS route, or a relay chain on a hybrid network.

        Returns ``(msg_ptr, seg_src, seg_dst, route_ptr, route_links)``: message
        ``m`` is segments ``msg_ptr[m]:msg_ptr[m+1]``, segment ``s`` goes from
        node ``seg_src[s]`` to ``seg_dst[s]`` over route ``s`` of the CSR. With
        pipelined relays (the model's default) every message is one segment
        (a relayed one over the concatenated route); with store-and-forward
        relays a relayed message is one segment per hop of its relay chain
        (the forwarding-table walk of :meth:`relay_hops`, then the delivery
        from where the walk ends, over the EPS uplinks when it fell back).
        """
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        nbytes = np.asarray(nbytes, dtype=np.float64)
        relayed = np.zeros(len(src), dtype=bool)
        sw = self._idx.get("node_switch")
        if self.circuits is not None and isinstance(self.topo, TreeTopology):
            relayed = (nbytes >= self.threshold_B) & (sw[src] != sw[dst])
        if not relayed.any():
            ptr, links = self.eps_routes(src, dst)
            return np.arange(len(src) + 1), src, dst, ptr, links
        r = np.flatnonzero(relayed)
        s_count = self.topo.n_switches
        walks, g = np.unique(src[r] * s_count + sw[dst[r]], return_inverse=True)
        g = g.ravel()
        hops = self.relay_hops(walks // s_count, walks % s_count)
        n_hops = np.diff(hops.ptr)[g]
        end = hops.end[g]
        deliver = end != dst[r]
        counts = np.ones(len(src), dtype=np.int64)
        counts[r] = n_hops + deliver
        msg_ptr = np.concatenate([[0], np.cumsum(counts)])
        total = int(msg_ptr[-1])
        seg_src = np.empty(total, dtype=np.int64)
        seg_dst = np.empty(total, dtype=np.int64)
        seg_link = np.full(total, -1, dtype=np.int64)
        direct = np.flatnonzero(~relayed)
        seg_src[msg_ptr[direct]], seg_dst[msg_ptr[direct]] = src[direct], dst[direct]
        at = ranges(msg_ptr[r], n_hops)
        hop = ranges(hops.ptr[g], n_hops)
        seg_src[at], seg_dst[at], seg_link[at] = hops.src[hop], hops.dst[hop], hops.link[hop]
        last = msg_ptr[r[deliver] + 1] - 1
        seg_src[last], seg_dst[last] = end[deliver], dst[r[deliver]]
        is_ocs = seg_link >= 0
        eps = np.flatnonzero(~is_ocs)
        eptr, elinks = self.eps_routes(seg_src[eps], seg_dst[eps])
        lengths = np.ones(total, dtype=np.int64)
        lengths[eps] = np.diff(eptr)
        ptr = np.concatenate([[0], np.cumsum(lengths)])
        links = np.empty(int(ptr[-1]), dtype=np.int64)
        links[ptr[:-1][is_ocs]] = seg_link[is_ocs]
        links[ranges(ptr[eps], np.diff(eptr))] = elinks
        if self.sim_model.relay == "pipelined":  # one transfer per message over the concatenated route
            first, last = msg_ptr[:-1], msg_ptr[1:] - 1
            msg_lengths = ptr[msg_ptr[1:]] - ptr[msg_ptr[:-1]]
            return (np.arange(len(src) + 1), seg_src[first], seg_dst[last],
                    np.concatenate([[0], np.cumsum(msg_lengths)]), links)
        return msg_ptr, seg_src, seg_dst, ptr, links

    def relay_positions(self, route_ptr, route_links) -> np.ndarray:
        """Per route position: is the link entered from a relay node (the previous link ends at a node that
        is not the route's end)? Only pipelined relay routes have such positions.

        Examples
        --------
        >>> from topoplan.core.topology_io import load_topology
        >>> t = load_topology("paper003")
        >>> net = build_network(t, {"circuits": [[0, 16]], "forwarding": {"1": {"1": 0}, "0": {"1": 16}}})
        >>> ptr, links = net.message_segments([1], [17], [4e6])[3:]
        >>> [str(net.link_class[l]) for l in links]
        ['node-up', 'node-down', 'ocs', 'node-up', 'node-down']
        >>> net.relay_positions(ptr, links).tolist()
        [False, False, True, True, False]
        """
        route_ptr = np.asarray(route_ptr, dtype=np.int64)
        route_links = np.asarray(route_links, dtype=np.int64)
        out = np.zeros(len(route_links), dtype=bool)
        if len(route_links) < 2:
            return out
        out[1:] = self.switches_in[route_links[:-1]] == 0
        out[route_ptr[:-1][np.diff(route_ptr) > 0]] = False  # a route's first link follows its source
        return out

    def paper_queues(self) -> np.ndarray:
        """Queue id per link for the paper model (:mod:`topoplan.sim.paper`): the link itself (``link`` contention) or
        the device the link enters (``device``); ``-1`` for fat pipes, which never postpone a message."""
        if self.sim_model.paper_contention == "link":
            q = np.arange(self.n_links)
        else:
            heads = {}
            q = np.array([heads.setdefault(head, len(heads)) for _, head in self.link_ends], dtype=np.int64)
        return np.where(self.shared, q, -1).astype(np.int64)

    def route_latency(self, route_ptr, route_links, nbytes):
        """Latency of each route for a message of ``nbytes``: link latencies, switch delays,
        store-and-forward of the first MTU packet at every switch after the first link, and of the first
        ``relay_chunk_B`` at every pipelined relay."""
        nbytes = np.asarray(nbytes, dtype=np.float64)
        route_ptr = np.asarray(route_ptr, dtype=np.int64)
        lengths = np.diff(route_ptr)
        owner = np.repeat(np.arange(len(lengths)), lengths)
        lat = np.bincount(owner, weights=self.latency_s[route_links], minlength=len(lengths))
        sw_in = np.bincount(owner, weights=self.switches_in[route_links], minlength=len(lengths))
        first = np.zeros(len(route_links), dtype=bool)
        first[route_ptr[:-1][lengths > 0]] = True
        relay = self.relay_positions(route_ptr, route_links)
        unit = np.where(relay, self.sim_model.relay_chunk_B, self.mtu_B)
        pkt = np.minimum(np.repeat(np.broadcast_to(nbytes, lengths.shape), lengths), unit)
        sf = np.bincount(owner, weights=np.where(first, 0.0, pkt / self.bw_Bps[route_links]), minlength=len(lengths))
        return lat + sw_in * self.switch_delay_s + sf

    @property
    def switches_in(self) -> np.ndarray:
        """Per link: the store-and-forward switches it enters (1 for a link into a switch, else 0).

        Examples
        --------
        >>> from topoplan.core.topology_io import load_topology
        >>> net = build_network(load_topology("paper003", ["kind=tree", "ocs=null"]))
        >>> ptr, links = net.eps_routes([0], [16])
        >>> net.switches_in[links].tolist()
        [1.0, 1.0, 1.0, 0.0]
        """
        return self._idx["switch_in"]


def _circuit_name(names, u: int, v: int) -> str:
    return f"{names[u]}=>{names[v]}"


class _Builder:
    """Collects links (one at a time or many at once) and numbers them in order."""

    def __init__(self):
        self.n = 0
        self.bw, self.lat, self.shared, self.sw_in = [], [], [], []
        self.cls, self.name, self.ends = [], [], []

    def add_many(self, bw, lat, cls, names, ends, *, shared=True, switch_in=0) -> np.ndarray:
        """Add ``len(names)`` links; ``bw``, ``lat``, ``cls``, ``shared`` and ``switch_in`` are per link or
        one for all. Returns their ids."""
        k = len(names)
        self.bw.append(np.broadcast_to(np.asarray(bw, dtype=np.float64), (k,)))
        self.lat.append(np.broadcast_to(np.asarray(lat, dtype=np.float64), (k,)))
        self.shared.append(np.broadcast_to(np.asarray(shared, dtype=bool), (k,)))
        self.sw_in.append(np.broadcast_to(np.asarray(switch_in, dtype=np.float64), (k,)))
        self.cls += [cls] * k if isinstance(cls, str) else list(cls)
        self.name += list(names)
        self.ends += list(ends)
        ids = np.arange(self.n, self.n + k, dtype=np.int64)
        self.n += k
        return ids

    def add(self, bw, lat, cls, name, ends, *, shared=True, switch_in=0) -> int:
        return int(self.add_many(bw, lat, cls, [name], [ends], shared=shared, switch_in=switch_in)[0])

    def arrays(self):
        cat = (lambda parts, dt: np.concatenate(parts).astype(dt) if parts else np.zeros(0, dtype=dt))
        return (cat(self.bw, np.float64), cat(self.lat, np.float64), cat(self.shared, bool),
                np.array(self.cls), cat(self.sw_in, np.float64))


def circuit_threshold_B(topo, threshold_B: float | None = None) -> float:
    """The size from which a message takes circuits: ``threshold_B`` when given, else the topology's OCS
    bandwidth-delay product (infinite without an OCS).

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> round(circuit_threshold_B(load_topology("paper003")), 6), circuit_threshold_B(load_topology("paper003"), 8192)
    (1250.0, 8192.0)
    """
    return float(threshold_B) if threshold_B is not None else (topo.ocs.bdp_B if getattr(topo, "ocs", None) else np.inf)


def build_network(topo, circuits: CircuitPlan | dict | None = None, threshold_B: float | None = None,
                  model: SimModel | dict | None = None) -> Network:
    """Compile a topology (and optional circuit plan) into a :class:`Network`.

    Parameters
    ----------
    topo : TreeTopology, TorusTopology or GraphTopology
        Tree, fat-tree, hybrid, mesh/torus or graph.
    circuits : dict or CircuitPlan, optional
        A circuit plan (dict as in the plan JSON); only on hybrids.
    threshold_B : float, optional
        Large-message threshold for using circuits (default: OCS bandwidth-delay product).
    model : SimModel or dict, optional
        Decides how relays forward. Default: ``SimModel()``.

    Returns
    -------
    Network

    Raises
    ------
    TopoplanError
        For a circuit plan on a topology without OCS, or a malformed plan.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> net = build_network(load_topology("paper003", ["ocs=null", "kind=tree"]))
    >>> ptr, links = net.eps_routes([0], [16])
    >>> [str(net.link_class[l]) for l in links]
    ['node-up', 'uplink-up', 'uplink-down', 'node-down']
    """
    b = _Builder()
    idx: dict = {}
    names = topo.host_names()
    idx["host_names"] = names
    n = topo.n_nodes
    idx["intra"] = b.add_many(topo.intra_node_bw_Bps, topo.intra_node_latency_s, "intra",
                              [f"{x}:intra" for x in names], [(x, x) for x in names])
    if isinstance(topo, TreeTopology):
        bw = topo.node_link_bw()
        sw_names = topo.switch_labels()
        idx["node_switch"] = topo.node_switch()
        at = [sw_names[s] for s in idx["node_switch"].tolist()]
        idx["up"] = b.add_many(bw, topo.down_latency_s, "node-up", [f"{x}->{y}" for x, y in zip(names, at)],
                               list(zip(names, at)), switch_in=1)
        idx["down"] = b.add_many(bw, topo.down_latency_s, "node-down", [f"{y}->{x}" for x, y in zip(names, at)],
                                 list(zip(at, names)))
        fat = topo.kind == "fat-tree"
        top = topo.top_label()
        idx["sw_up"] = b.add_many(topo.up_bw_Bps, topo.up_latency_s, "uplink-up", [f"{x}->{top}" for x in sw_names],
                                  [(x, top) for x in sw_names], shared=not fat, switch_in=1)
        idx["sw_down"] = b.add_many(topo.up_bw_Bps, topo.up_latency_s, "uplink-down", [f"{top}->{x}" for x in sw_names],
                                    [(top, x) for x in sw_names], shared=not fat, switch_in=1)
        delay, mtu = topo.switch_delay_s, topo.mtu_B
    elif isinstance(topo, TorusTopology):
        c = topo.coords()
        stride = np.cumprod([1] + list(topo.dims[:-1]))
        idx["coords"], idx["stride"] = c, stride
        idx["dir_link"] = []
        for d, k in enumerate(topo.dims):
            pos = c[:, d]
            ring = bool(topo.wrap[d]) and k > 1
            has_plus, has_minus = (pos + 1 < k) | ring, (pos - 1 >= 0) | ring
            count = has_plus.astype(np.int64) + has_minus
            first = b.n + np.concatenate([[0], np.cumsum(count)[:-1]])   # per node: its + link, then its - link
            node = np.repeat(np.arange(n), count)
            sign = np.where(has_plus[node] & (np.arange(len(node)) == (first - b.n)[node]), 1, -1)
            nb = node + (np.mod(pos[node] + sign, k) - pos[node]) * stride[d]
            dn = DIM_NAMES[d]
            b.add_many(topo.bw_Bps[d], topo.latency_s, [f"torus-{dn}{'+' if x > 0 else '-'}" for x in sign.tolist()],
                       [f"{names[x]}->{names[y]}" for x, y in zip(node.tolist(), nb.tolist())],
                       [(names[x], names[y]) for x, y in zip(node.tolist(), nb.tolist())], switch_in=1)
            idx["dir_link"].append((np.where(has_plus, first, -1), np.where(has_minus, first + has_plus, -1)))
        if topo.injection_bw_Bps:
            idx["inject"] = b.add_many(topo.injection_bw_Bps, 0.0, "inject", [f"{x}:inject" for x in names],
                                       [(x, x) for x in names], switch_in=1)
            idx["eject"] = b.add_many(topo.injection_bw_Bps, 0.0, "eject", [f"{x}:eject" for x in names],
                                      [(x, x) for x in names])
        delay, mtu = topo.router_delay_s, topo.mtu_B
    elif isinstance(topo, GraphTopology):
        from scipy.sparse import coo_matrix
        from scipy.sparse.csgraph import shortest_path

        idx["node_switch"] = topo.node_switch()
        sw = topo.switches
        at = [sw[s] for s in topo.host_switch]
        idx["up"] = b.add_many(topo.host_bw_Bps, topo.latency_s, "node-up", [f"{x}->{y}" for x, y in zip(names, at)],
                               list(zip(names, at)), switch_in=1)
        idx["down"] = b.add_many(topo.host_bw_Bps, topo.latency_s, "node-down",
                                 [f"{y}->{x}" for x, y in zip(names, at)], list(zip(at, names)))
        s = topo.n_switches
        sw_link = np.full((s, s), -1, dtype=np.int64)
        par: dict = {}   # (u, v) -> the links from switch u to switch v, in the order the topology lists them
        for a, c2, bw in topo.links:
            for u, v in ((a, c2), (c2, a)):
                k = len(par.setdefault((u, v), []))
                lid = b.add(bw, topo.latency_s, "switch", f"{sw[u]}->{sw[v]}" + (f"#{k + 1}" if k else ""),
                            (sw[u], sw[v]), switch_in=1)
                par[(u, v)].append(lid)
                if k == 0:
                    sw_link[u, v] = lid
        idx["sw_link"] = sw_link
        # Parallel links (a trunk) share a switch pair's routes by destination, as an InfiniBand subnet
        # manager's forwarding tables spread destinations over a trunk's ports: the route to node d takes the
        # (d mod k)-th of the k links.
        trunks = [(uv, ids) for uv, ids in par.items() if len(ids) > 1]
        if trunks:
            index = np.full((s, s), -1, dtype=np.int64)
            table = np.full((len(trunks), max(len(ids) for _, ids in trunks)), -1, dtype=np.int64)
            for r, ((u, v), ids) in enumerate(trunks):
                index[u, v] = r
                table[r, :len(ids)] = ids
            idx["trunks"] = (index, table, np.array([len(ids) for _, ids in trunks], dtype=np.int64))
        a = np.array([l[0] for l in topo.links] + [l[1] for l in topo.links], dtype=np.int64)
        c2 = np.array([l[1] for l in topo.links] + [l[0] for l in topo.links], dtype=np.int64)
        adj = coo_matrix((np.ones(len(a)), (a, c2)), shape=(s, s)).tocsr()
        _, pred = shortest_path(adj, directed=False, unweighted=True, return_predecessors=True)
        # next switch from u towards v = predecessor of u on the tree rooted at v
        idx["next_switch"] = np.where(pred.T >= 0, pred.T, -1)
        delay, mtu = topo.switch_delay_s, topo.mtu_B
    else:
        raise TopoplanError(f"cannot simulate topology kind {getattr(topo, 'kind', type(topo).__name__)!r}")

    idx["n_fixed"] = b.n
    plan = None
    if circuits is not None:
        plan = circuits if isinstance(circuits, CircuitPlan) else CircuitPlan.from_dict(circuits)
        if not isinstance(topo, TreeTopology) or topo.ocs is None:
            raise TopoplanError("a circuit plan needs a hybrid topology (with an 'ocs' section)")
        cl = CircuitLinks.number(n, plan.circuits, b.n)
        b.add_many(topo.ocs.bw_Bps, topo.ocs.latency_s, "ocs",
                   [_circuit_name(names, u, v) for u, v in zip(cl.src.tolist(), cl.dst.tolist())],
                   [(names[u], names[v]) for u, v in zip(cl.src.tolist(), cl.dst.tolist())])
        idx["circuit_links"] = cl
    thr = circuit_threshold_B(topo, threshold_B)
    bw_Bps, lat_s, shared, cls, sw_in = b.arrays()
    idx["switch_in"] = sw_in
    return Network(topo=topo, bw_Bps=bw_Bps, latency_s=lat_s, shared=shared, link_class=cls, link_name=b.name,
                   link_ends=b.ends, switch_delay_s=delay, mtu_B=mtu, circuits=plan, threshold_B=thr,
                   sim_model=SimModel.coerce(model), _idx=idx)
