"""Compile a topology (plus placement and circuit plan) into directed links and routes.

Links are directed (full duplex: the two directions never share). A route
is a list of link ids. On a hybrid network a large inter-switch message
follows the circuit plan's forwarding tables through relay (OCS) nodes; how
a relay forwards is the model's ``relay`` choice (:class:`sim.model.SimModel`):

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

import numpy as np

from planner.errors import TopoplanError
from planner.topology import GraphTopology, TorusTopology, TreeTopology
from sim.model import SimModel

DIM_NAMES = "xyzabcdefghijklmnopqrstuvw"


@dataclass
class CircuitPlan:
    """Circuits (node pairs) and forwarding tables: ``forwarding[node][dst_switch] = next hop node``."""

    circuits: list[tuple[int, int]]
    forwarding: dict[int, dict[int, int]] = field(default_factory=dict)
    hop_limit: int | None = None

    @classmethod
    def from_dict(cls, doc: dict, where: str = "circuit plan") -> "CircuitPlan":
        try:
            circuits = [(int(a), int(b)) for a, b in doc.get("circuits", [])]
            fwd = {int(n): {int(s): int(h) for s, h in (tab or {}).items()}
                   for n, tab in (doc.get("forwarding") or {}).items()}
        except (TypeError, ValueError):
            raise TopoplanError(f"{where}: field 'circuits'/'forwarding': expected node-id pairs and "
                                f"{{node: {{switch: next_hop}}}}") from None
        return cls(circuits, fwd, doc.get("hop_limit"))


@dataclass
class Network:
    """Directed links and routing of one topology under one placement (and circuit plan).

    Attributes
    ----------
    bw_Bps, latency_s, shared : per directed link (``shared=False`` is a
        fat pipe: it caps a flow but is not shared, used for fat-tree uplinks).
    link_class, link_name : labels per link.
    switches_on : number of store-and-forward switches a link enters (for
        per-hop MTU serialization and switch delay).
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
    model: SimModel = field(default_factory=SimModel)
    _idx: dict = field(default_factory=dict, repr=False)

    @property
    def n_links(self) -> int:
        return len(self.bw_Bps)

    def linkset(self):
        from sim.maxmin import LinkSet

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
        i = self._idx
        hs = i["node_switch"]
        per_pair = []
        for a, b in zip(src.tolist(), dst.tolist()):
            if a == b:
                per_pair.append([i["intra"][a]])
                continue
            route = [i["up"][a]]
            sa, sb = hs[a], hs[b]
            while sa != sb:
                nxt = i["next_switch"][sa, sb]
                if nxt < 0:
                    raise TopoplanError(f"no route from host {a} to host {b}: switches not connected")
                route.append(i["sw_link"][(sa, nxt)])
                sa = nxt
            route.append(i["down"][b])
            per_pair.append(route)
        return _csr(per_pair)

    def message_segments(self, src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray):
        """Split messages (node pairs) into segments: one EPS route, or a relay chain on a hybrid network.

        Returns ``(msg_ptr, seg_src, seg_dst, route_ptr, route_links)``: message
        ``m`` is segments ``msg_ptr[m]:msg_ptr[m+1]``, segment ``s`` goes from
        node ``seg_src[s]`` to ``seg_dst[s]`` over route ``s`` of the CSR. With
        pipelined relays (the model's default) every message is one segment
        (a relayed one over the concatenated route); with store-and-forward
        relays a relayed message is one segment per hop of its relay chain.
        """
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        nbytes = np.asarray(nbytes, dtype=np.float64)
        relayed = np.zeros(len(src), dtype=bool)
        if self.circuits is not None and isinstance(self.topo, TreeTopology):
            sw = self._idx["node_switch"]
            relayed = (nbytes >= self.threshold_B) & (sw[src] != sw[dst])
        if not relayed.any():
            ptr, links = self.eps_routes(src, dst)
            return np.arange(len(src) + 1), src, dst, ptr, links
        segs: list[list[tuple[int, int, str]]] = [[(int(a), int(b), "eps")] for a, b in zip(src, dst)]
        cache: dict[tuple[int, int], list] = {}
        for m in np.flatnonzero(relayed):
            key = (int(src[m]), int(dst[m]))
            if key not in cache:
                cache[key] = self._relay_chain(*key)
            segs[m] = cache[key]
        counts = np.array([len(s) for s in segs])
        flat = [x for s in segs for x in s]
        seg_src = np.array([a for a, _, _ in flat], dtype=np.int64)
        seg_dst = np.array([b for _, b, _ in flat], dtype=np.int64)
        is_ocs = np.array([k == "ocs" for _, _, k in flat])
        ptr, links = self.eps_routes(seg_src, seg_dst)
        if is_ocs.any():
            lengths = np.diff(ptr)
            lengths[is_ocs] = 1
            new_ptr = np.concatenate([[0], np.cumsum(lengths)])
            new_links = np.empty(new_ptr[-1], dtype=np.int64)
            for s in range(len(flat)):
                if is_ocs[s]:
                    new_links[new_ptr[s]] = self._idx["ocs"][(int(seg_src[s]), int(seg_dst[s]))]
                else:
                    new_links[new_ptr[s]:new_ptr[s + 1]] = links[ptr[s]:ptr[s + 1]]
            ptr, links = new_ptr, new_links
        msg_ptr = np.concatenate([[0], np.cumsum(counts)])
        if self.model.relay == "pipelined":  # one transfer per message over the concatenated route
            first, last = msg_ptr[:-1], msg_ptr[1:] - 1
            msg_lengths = ptr[msg_ptr[1:]] - ptr[msg_ptr[:-1]]
            return (np.arange(len(src) + 1), seg_src[first], seg_dst[last],
                    np.concatenate([[0], np.cumsum(msg_lengths)]), links)
        return msg_ptr, seg_src, seg_dst, ptr, links

    def _relay_chain(self, a: int, b: int) -> list[tuple[int, int, str]]:
        """Follow the forwarding tables from node a towards node b's switch."""
        sw = self._idx["node_switch"]
        partner = self._idx["partner"]
        fwd = self.circuits.forwarding
        target = int(sw[b])
        chain, cur, seen = [], a, {a}
        while sw[cur] != target:
            nxt = fwd.get(cur, {}).get(target)
            if nxt is None:
                break  # no route: fall back to the EPS uplinks from here
            if nxt in partner.get(cur, ()):
                chain.append((cur, nxt, "ocs"))
            elif sw[nxt] == sw[cur] and nxt != cur:
                chain.append((cur, nxt, "eps"))
            else:
                raise TopoplanError(f"circuit plan: forwarding[{cur}][{target}] = {nxt} is not a neighbour of node {cur}")
            cur = nxt
            if cur in seen:
                raise TopoplanError(f"circuit plan: routing loop from node {a} towards switch {target}")
            seen.add(cur)
        if cur != b:
            chain.append((cur, b, "eps"))
        return chain

    def relay_positions(self, route_ptr, route_links) -> np.ndarray:
        """Per route position: is the link entered from a relay node (the previous link ends at a node that
        is not the route's end)? Only pipelined relay routes have such positions.

        Examples
        --------
        >>> from planner.topology_io import load_topology
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
        out[1:] = self._switches_in[route_links[:-1]] == 0
        out[route_ptr[:-1][np.diff(route_ptr) > 0]] = False  # a route's first link follows its source
        return out

    def paper_queues(self) -> np.ndarray:
        """Queue id per link for the paper model (:mod:`sim.paper`): the link itself (``link`` contention) or
        the device the link enters (``device``); ``-1`` for fat pipes, which never postpone a message."""
        if self.model.paper_contention == "link":
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
        sw_in = np.bincount(owner, weights=self._switches_in[route_links], minlength=len(lengths))
        first = np.zeros(len(route_links), dtype=bool)
        first[route_ptr[:-1][lengths > 0]] = True
        relay = self.relay_positions(route_ptr, route_links)
        unit = np.where(relay, self.model.relay_chunk_B, self.mtu_B)
        pkt = np.minimum(np.repeat(np.broadcast_to(nbytes, lengths.shape), lengths), unit)
        sf = np.bincount(owner, weights=np.where(first, 0.0, pkt / self.bw_Bps[route_links]), minlength=len(lengths))
        return lat + sw_in * self.switch_delay_s + sf

    @property
    def _switches_in(self):
        return self._idx["switch_in"]


def _csr(lists):
    lengths = np.array([len(r) for r in lists], dtype=np.int64)
    ptr = np.concatenate([[0], np.cumsum(lengths)])
    links = np.fromiter((x for r in lists for x in r), dtype=np.int64, count=int(ptr[-1]))
    return ptr, links


class _Builder:
    def __init__(self):
        self.bw, self.lat, self.shared, self.cls, self.name, self.ends, self.sw_in = [], [], [], [], [], [], []

    def add(self, bw, lat, cls, name, ends, *, shared=True, switch_in=0):
        self.bw.append(float(bw)); self.lat.append(float(lat)); self.shared.append(shared)
        self.cls.append(cls); self.name.append(name); self.ends.append(ends); self.sw_in.append(switch_in)
        return len(self.bw) - 1


def build_network(topo, circuits: CircuitPlan | dict | None = None, threshold_B: float | None = None,
                  model: SimModel | dict | None = None) -> Network:
    """Compile a topology (and optional circuit plan) into a :class:`Network`.

    Parameters
    ----------
    topo : TreeTopology (tree, fat-tree, hybrid), TorusTopology or GraphTopology.
    circuits : circuit plan (dict as in the plan JSON, or :class:`CircuitPlan`); only on hybrids.
    threshold_B : large-message threshold for using circuits (default: OCS bandwidth-delay product).
    model : :class:`sim.model.SimModel` (or its dict); decides how relays forward. Default: ``SimModel()``.

    Example
    -------
    >>> from planner.topology_io import load_topology
    >>> net = build_network(load_topology("paper003", ["ocs=null", "kind=tree"]))
    >>> ptr, links = net.eps_routes([0], [16])
    >>> [str(net.link_class[l]) for l in links]
    ['node-up', 'uplink-up', 'uplink-down', 'node-down']
    """
    b = _Builder()
    idx: dict = {}
    names = topo.host_names()
    n = topo.n_nodes
    idx["intra"] = np.array([b.add(topo.intra_node_bw_Bps, topo.intra_node_latency_s, "intra", f"{names[k]}:intra",
                                   (names[k], names[k])) for k in range(n)])
    if isinstance(topo, TreeTopology):
        bw = topo.node_link_bw()
        sw_names = list(topo.switch_names) if topo.switch_names else [f"S{s}" for s in range(topo.n_switches)]
        idx["node_switch"] = topo.node_switch()
        idx["up"] = np.array([b.add(bw[k], topo.down_latency_s, "node-up", f"{names[k]}->{sw_names[s]}",
                                    (names[k], sw_names[s]), switch_in=1)
                              for k, s in enumerate(idx["node_switch"])])
        idx["down"] = np.array([b.add(bw[k], topo.down_latency_s, "node-down", f"{sw_names[s]}->{names[k]}",
                                      (sw_names[s], names[k])) for k, s in enumerate(idx["node_switch"])])
        fat = topo.kind == "fat-tree"
        idx["sw_up"] = np.array([b.add(topo.up_bw_Bps, topo.up_latency_s, "uplink-up", f"{sw_names[s]}->top",
                                       (sw_names[s], "top"), shared=not fat, switch_in=1)
                                 for s in range(topo.n_switches)])
        idx["sw_down"] = np.array([b.add(topo.up_bw_Bps, topo.up_latency_s, "uplink-down", f"top->{sw_names[s]}",
                                         ("top", sw_names[s]), shared=not fat, switch_in=1)
                                   for s in range(topo.n_switches)])
        delay, mtu = topo.switch_delay_s, topo.mtu_B
    elif isinstance(topo, TorusTopology):
        c = topo.coords()
        stride = np.cumprod([1] + list(topo.dims[:-1]))
        idx["coords"], idx["stride"] = c, stride
        idx["dir_link"] = []
        for d, k in enumerate(topo.dims):
            plus = np.full(n, -1)
            minus = np.full(n, -1)
            dn = DIM_NAMES[d]
            for node in range(n):
                pos = c[node, d]
                if pos + 1 < k or (topo.wrap[d] and k > 1):
                    nb = node + ((pos + 1) % k - pos) * stride[d]
                    plus[node] = b.add(topo.bw_Bps[d], topo.latency_s, f"torus-{dn}+", f"{names[node]}->{names[nb]}",
                                       (names[node], names[nb]), switch_in=1)
                if pos - 1 >= 0 or (topo.wrap[d] and k > 1):
                    nb = node + ((pos - 1) % k - pos) * stride[d]
                    minus[node] = b.add(topo.bw_Bps[d], topo.latency_s, f"torus-{dn}-", f"{names[node]}->{names[nb]}",
                                        (names[node], names[nb]), switch_in=1)
            idx["dir_link"].append((plus, minus))
        if topo.injection_bw_Bps:
            idx["inject"] = np.array([b.add(topo.injection_bw_Bps, 0.0, "inject", f"{names[k]}:inject",
                                            (names[k], names[k]), switch_in=1) for k in range(n)])
            idx["eject"] = np.array([b.add(topo.injection_bw_Bps, 0.0, "eject", f"{names[k]}:eject",
                                           (names[k], names[k])) for k in range(n)])
        delay, mtu = topo.router_delay_s, topo.mtu_B
    elif isinstance(topo, GraphTopology):
        from scipy.sparse import coo_matrix
        from scipy.sparse.csgraph import shortest_path

        idx["node_switch"] = topo.node_switch()
        sw = topo.switches
        idx["up"] = np.array([b.add(bw, topo.latency_s, "node-up", f"{names[k]}->{sw[s]}", (names[k], sw[s]), switch_in=1)
                              for k, (s, bw) in enumerate(zip(topo.host_switch, topo.host_bw_Bps))])
        idx["down"] = np.array([b.add(bw, topo.latency_s, "node-down", f"{sw[s]}->{names[k]}", (sw[s], names[k]))
                                for k, (s, bw) in enumerate(zip(topo.host_switch, topo.host_bw_Bps))])
        idx["sw_link"] = {}
        for a, c2, bw in topo.links:
            for u, v in ((a, c2), (c2, a)):
                if (u, v) not in idx["sw_link"]:  # parallel links: the first carries the route
                    idx["sw_link"][(u, v)] = b.add(bw, topo.latency_s, "switch", f"{sw[u]}->{sw[v]}", (sw[u], sw[v]),
                                                   switch_in=1)
        s = topo.n_switches
        a = np.array([l[0] for l in topo.links] + [l[1] for l in topo.links], dtype=np.int64)
        c2 = np.array([l[1] for l in topo.links] + [l[0] for l in topo.links], dtype=np.int64)
        adj = coo_matrix((np.ones(len(a)), (a, c2)), shape=(s, s)).tocsr()
        _, pred = shortest_path(adj, directed=False, unweighted=True, return_predecessors=True)
        # next switch from u towards v = predecessor of u on the tree rooted at v
        idx["next_switch"] = np.where(pred.T >= 0, pred.T, -1)
        delay, mtu = topo.switch_delay_s, topo.mtu_B
    else:
        raise TopoplanError(f"cannot simulate topology kind {getattr(topo, 'kind', type(topo).__name__)!r}")

    plan = None
    if circuits is not None:
        plan = circuits if isinstance(circuits, CircuitPlan) else CircuitPlan.from_dict(circuits)
        if not isinstance(topo, TreeTopology) or topo.ocs is None:
            raise TopoplanError("a circuit plan needs a hybrid topology (with an 'ocs' section)")
        ocs = topo.ocs
        idx["ocs"], partner = {}, {}
        for a, c2 in plan.circuits:
            for u, v in ((a, c2), (c2, a)):
                idx["ocs"][(u, v)] = b.add(ocs.bw_Bps, ocs.latency_s, "ocs", f"{names[u]}=>{names[v]}",
                                           (names[u], names[v]))
                partner.setdefault(u, set()).add(v)
        idx["partner"] = partner
    thr = threshold_B if threshold_B is not None else (topo.ocs.bdp_B if getattr(topo, "ocs", None) else np.inf)
    net = Network(topo=topo, bw_Bps=np.array(b.bw), latency_s=np.array(b.lat), shared=np.array(b.shared),
                  link_class=np.array(b.cls), link_name=b.name, link_ends=b.ends, switch_delay_s=delay, mtu_B=mtu,
                  circuits=plan, threshold_B=thr, model=SimModel.coerce(model), _idx=idx)
    idx["switch_in"] = np.array(b.sw_in, dtype=np.float64)
    return net
