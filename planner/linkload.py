"""Link loads under a topology's static routing, and the congestion bound.

Every topology is seen as a set of *directed* links (full duplex: the two
directions never share) with one fixed route per node pair:

- tree / fat-tree / hybrid (EPS part, no circuits): node up link, edge
  switch uplink to the top switch, top switch down to the edge switch, node
  down link; pairs under one switch use only the two node links. Fat-tree
  uplinks have full bisection: they are listed with ``inf`` bandwidth so
  they never bind the bound.
- torus / mesh: dimension-order routing, the shorter way round a ring (ties
  go the ``+`` way), with injection/ejection links when the topology gives
  an injection bandwidth.
- graph: host links plus shortest switch paths (the predecessor tree of
  :func:`scipy.sparse.csgraph.shortest_path`; the first of parallel links).

Ranks on one node use the node's intra-node link (memory bandwidth). These
are the same conventions as the simulator's network compiler, so the bound
here is the one the simulator can at best reach.

Routes of many node pairs are built at once as CSR arrays ``(ptr, links)``
(route ``i`` is ``links[ptr[i]:ptr[i+1]]``), so loads are one ``bincount``.

Example
-------
>>> from planner.topology_io import load_topology
>>> from planner.traffic import from_arrays
>>> from planner.placement import sequential
>>> t = load_topology("paper003", ["kind=tree", "ocs=null"])
>>> tr = from_arrays(256, [0], [64], [2.5e9])
>>> round(congestion_bound(t, tr, sequential(256, t)), 3)   # 2.5 GB over a 10 Gbps node link
2.0
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from planner.errors import TopoplanError
from planner.topology import GraphTopology, TorusTopology, TreeTopology


@dataclass
class LinkGraph:
    """Directed links of a topology and its static routes.

    Attributes
    ----------
    bw_Bps : bandwidth per directed link (``inf``: never a bottleneck).
    link_class : ``node-up``, ``node-down``, ``intra``, ``uplink-up``,
        ``uplink-down``, ``torus-<dim><+|->``, ``inject``, ``eject``, ``switch``.
    names : readable link names (``host->switch``...).
    """

    topo: object
    bw_Bps: np.ndarray
    link_class: np.ndarray
    names: list
    _idx: dict = field(default_factory=dict, repr=False)

    @property
    def n_links(self) -> int:
        return len(self.bw_Bps)

    def routes(self, src, dst):
        """Routes of node pairs ``src[i] -> dst[i]`` as CSR ``(ptr, links)``; ``src == dst`` uses the intra link."""
        src = np.asarray(src, dtype=np.int64).ravel()
        dst = np.asarray(dst, dtype=np.int64).ravel()
        if len(src) != len(dst):
            raise ValueError("src and dst differ in length")
        kind = self._idx["kind"]
        if kind == "tree":
            return self._tree_routes(src, dst)
        if kind == "torus":
            return self._torus_routes(src, dst)
        return self._graph_routes(src, dst)

    def loads(self, src, dst, nbytes) -> np.ndarray:
        """Bytes on every directed link when node pair ``i`` sends ``nbytes[i]``."""
        ptr, links = self.routes(src, dst)
        w = np.repeat(np.asarray(nbytes, dtype=np.float64).ravel(), np.diff(ptr))
        return np.bincount(links, weights=w, minlength=self.n_links)

    def times(self, loads) -> np.ndarray:
        """``bytes / bandwidth`` per link (0 on infinite links)."""
        return np.asarray(loads, dtype=np.float64) / self.bw_Bps

    def bound(self, loads) -> float:
        """The congestion bound: ``max over links of bytes / bandwidth`` in seconds."""
        return float(self.times(loads).max(initial=0.0))

    def busiest(self, loads, k: int = 5) -> list[dict]:
        """The ``k`` links with the longest ``bytes / bandwidth`` (for reports)."""
        t = self.times(loads)
        top = np.argsort(-t, kind="stable")[:k]
        return [{"link": self.names[i], "class": str(self.link_class[i]), "bytes": float(loads[i]),
                 "time_s": float(t[i])} for i in top if loads[i] > 0]

    # -- routing per kind -------------------------------------------------
    def _tree_routes(self, src, dst):
        i = self._idx
        sw = i["node_switch"]
        n = len(sw)
        same_node = src == dst
        same_sw = (sw[src] == sw[dst]) & ~same_node
        across = ~same_node & ~same_sw
        length = np.where(same_node, 1, np.where(same_sw, 2, 4))
        ptr = np.concatenate([[0], np.cumsum(length)])
        links = np.empty(ptr[-1], dtype=np.int64)
        start = ptr[:-1]
        links[start[same_node]] = 2 * n + src[same_node]
        links[start[same_sw]] = src[same_sw]
        links[start[same_sw] + 1] = n + dst[same_sw]
        s = start[across]
        links[s] = src[across]
        links[s + 1] = 3 * n + sw[src[across]]
        links[s + 2] = 3 * n + i["n_switches"] + sw[dst[across]]
        links[s + 3] = n + dst[across]
        return ptr, links

    def _torus_routes(self, src, dst):
        t = self.topo
        i = self._idx
        c, stride = i["coords"], i["stride"]
        m = len(src)
        same = src == dst
        pair = [np.flatnonzero(same)]
        pos = [np.zeros(int(same.sum()), dtype=np.int64)]
        link = [i["intra"][src[same]]]
        step_no = np.zeros(m, dtype=np.int64)
        moving = np.flatnonzero(~same)
        if "inject" in i:
            pair.append(moving); pos.append(step_no[moving].copy()); link.append(i["inject"][src[moving]])
            step_no[moving] += 1
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
                node, st = cur[act], step[act]
                pair.append(act); pos.append(step_no[act].copy())
                link.append(np.where(st > 0, plus[node], minus[node]))
                step_no[act] += 1
                cd = c[node, d]
                cur[act] = node + (np.mod(cd + st, k) - cd) * stride[d]
        if "eject" in i:
            pair.append(moving); pos.append(step_no[moving].copy()); link.append(i["eject"][dst[moving]])
            step_no[moving] += 1
        pair = np.concatenate(pair); pos = np.concatenate(pos); link = np.concatenate(link)
        order = np.lexsort((pos, pair))
        ptr = np.concatenate([[0], np.cumsum(np.bincount(pair, minlength=m))])
        return ptr, link[order].astype(np.int64)

    def _graph_routes(self, src, dst):
        i = self._idx
        hs, nxt, swl = i["node_switch"], i["next_switch"], i["sw_link"]
        n = len(hs)
        m = len(src)
        same = src == dst
        a, b = hs[src], hs[dst]
        pair = [np.flatnonzero(same), np.flatnonzero(~same)]
        pos = [np.zeros(int(same.sum()), dtype=np.int64), np.zeros(int((~same).sum()), dtype=np.int64)]
        link = [2 * n + src[same], src[~same]]
        cur = a.copy()
        step_no = np.ones(m, dtype=np.int64)
        act = np.flatnonzero(~same & (cur != b))
        while act.size:
            nx = nxt[cur[act], b[act]]
            if (nx < 0).any():
                k = act[np.flatnonzero(nx < 0)[0]]
                raise TopoplanError(f"topology {self.topo.name or 'graph'}: no route from host {src[k]} to host "
                                    f"{dst[k]} (switches not connected)")
            pair.append(act); pos.append(step_no[act].copy()); link.append(swl[cur[act], nx])
            step_no[act] += 1
            cur[act] = nx
            act = act[cur[act] != b[act]]
        moving = np.flatnonzero(~same)
        pair.append(moving); pos.append(step_no[moving]); link.append(n + dst[moving])
        pair = np.concatenate(pair); pos = np.concatenate(pos); link = np.concatenate(link)
        order = np.lexsort((pos, pair))
        ptr = np.concatenate([[0], np.cumsum(np.bincount(pair, minlength=m))])
        return ptr, link[order].astype(np.int64)


def link_graph(topo) -> LinkGraph:
    """Number the directed links of ``topo`` and prepare its routing (see the module docstring).

    Tree kinds: node up ``0..N-1``, node down ``N..2N-1``, intra ``2N..3N-1``,
    uplink up ``3N..3N+S-1``, uplink down ``3N+S..3N+2S-1``. Torus: intra,
    then per node and dimension the ``+``/``-`` links, then inject/eject.
    Graph: node up, node down, intra, then switch links in both directions.
    """
    n = topo.n_nodes
    names = topo.host_names()
    intra_bw = float(topo.intra_node_bw_Bps)
    if isinstance(topo, TreeTopology):
        s = topo.n_switches
        sw = topo.node_switch()
        sw_names = list(topo.switch_names) if topo.switch_names else [f"S{k}" for k in range(s)]
        nb = topo.node_link_bw().astype(np.float64)
        up = np.inf if topo.kind == "fat-tree" else float(topo.up_bw_Bps)
        bw = np.concatenate([nb, nb, np.full(n, intra_bw), np.full(2 * s, up)])
        cls = np.array(["node-up"] * n + ["node-down"] * n + ["intra"] * n + ["uplink-up"] * s + ["uplink-down"] * s)
        lname = ([f"{names[k]}->{sw_names[sw[k]]}" for k in range(n)] + [f"{sw_names[sw[k]]}->{names[k]}" for k in range(n)]
                 + [f"{names[k]}:intra" for k in range(n)] + [f"{x}->top" for x in sw_names] + [f"top->{x}" for x in sw_names])
        return LinkGraph(topo, bw, cls, lname, {"kind": "tree", "node_switch": sw, "n_switches": s})
    if isinstance(topo, TorusTopology):
        return _torus_graph(topo, names, intra_bw)
    if isinstance(topo, GraphTopology):
        return _graph_graph(topo, names, intra_bw)
    raise TopoplanError(f"no link model for topology kind {getattr(topo, 'kind', type(topo).__name__)!r}")


DIM_NAMES = "xyzabcdefghijklmnopqrstuvw"


def _torus_graph(topo, names, intra_bw) -> LinkGraph:
    n = topo.n_nodes
    c = topo.coords()
    stride = np.cumprod([1] + list(topo.dims[:-1])).astype(np.int64)
    bw, cls, lname = [np.full(n, intra_bw)], [np.full(n, "intra")], [f"{x}:intra" for x in names]
    idx = {"kind": "torus", "coords": c, "stride": stride, "intra": np.arange(n), "dir_link": []}
    nxt = n
    for d, k in enumerate(topo.dims):
        pos = c[:, d]
        pair = []
        for sign, exists in ((1, (pos + 1 < k) | (topo.wrap[d] and k > 1)),
                             (-1, (pos - 1 >= 0) | (topo.wrap[d] and k > 1))):
            ids = np.full(n, -1, dtype=np.int64)
            have = np.flatnonzero(exists)
            ids[have] = nxt + np.arange(len(have))
            nxt += len(have)
            nb = have + (np.mod(pos[have] + sign, k) - pos[have]) * stride[d]
            tag = f"torus-{DIM_NAMES[d]}{'+' if sign > 0 else '-'}"
            bw.append(np.full(len(have), float(topo.bw_Bps[d]))); cls.append(np.full(len(have), tag))
            lname += [f"{names[a]}->{names[b]}" for a, b in zip(have.tolist(), nb.tolist())]
            pair.append(ids)
        idx["dir_link"].append(tuple(pair))
    if topo.injection_bw_Bps:
        idx["inject"] = nxt + np.arange(n); idx["eject"] = nxt + n + np.arange(n)
        bw += [np.full(2 * n, float(topo.injection_bw_Bps))]
        cls += [np.full(n, "inject"), np.full(n, "eject")]
        lname += [f"{x}:inject" for x in names] + [f"{x}:eject" for x in names]
    return LinkGraph(topo, np.concatenate(bw), np.concatenate(cls), lname, idx)


def _graph_graph(topo, names, intra_bw) -> LinkGraph:
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import shortest_path

    n, s = topo.n_nodes, topo.n_switches
    hs = topo.node_switch()
    hb = topo.node_link_bw()
    sw = topo.switches
    sw_link = np.full((s, s), -1, dtype=np.int64)
    bw = [hb, hb, np.full(n, intra_bw)]
    cls = ["node-up"] * n + ["node-down"] * n + ["intra"] * n
    lname = ([f"{names[k]}->{sw[hs[k]]}" for k in range(n)] + [f"{sw[hs[k]]}->{names[k]}" for k in range(n)]
             + [f"{x}:intra" for x in names])
    nxt, extra = 3 * n, []
    for a, b, w in topo.links:
        for u, v in ((a, b), (b, a)):
            if sw_link[u, v] < 0:  # parallel links: the first carries the route
                sw_link[u, v] = nxt
                nxt += 1
                extra.append(float(w)); cls.append("switch"); lname.append(f"{sw[u]}->{sw[v]}")
    bw.append(np.asarray(extra, dtype=np.float64))
    a = np.array([l[0] for l in topo.links] + [l[1] for l in topo.links], dtype=np.int64)
    b = np.array([l[1] for l in topo.links] + [l[0] for l in topo.links], dtype=np.int64)
    adj = coo_matrix((np.ones(len(a)), (a, b)), shape=(s, s)).tocsr()
    _, pred = shortest_path(adj, directed=False, unweighted=True, return_predecessors=True)
    # next switch from u towards v = u's predecessor on the shortest-path tree rooted at v
    next_switch = np.where(pred.T >= 0, pred.T, -1)
    idx = {"kind": "graph", "node_switch": hs, "next_switch": next_switch, "sw_link": sw_link}
    return LinkGraph(topo, np.concatenate(bw), np.array(cls), lname, idx)


# -- placements -------------------------------------------------------------

def node_pair_bytes(traffic, rank_to_node, n_nodes: int | None = None):
    """Rank traffic aggregated to ordered node pairs ``(src_nodes, dst_nodes, bytes)`` (intra-node pairs kept)."""
    node = np.asarray(rank_to_node, dtype=np.int64)
    keep = traffic.src != traffic.dst
    a, b = node[traffic.src[keep]], node[traffic.dst[keep]]
    w = traffic.bytes[keep].astype(np.float64)
    n = int(n_nodes if n_nodes is not None else (node.max(initial=0) + 1))
    uniq, inv = np.unique(a * n + b, return_inverse=True)
    return uniq // n, uniq % n, np.bincount(inv.ravel(), weights=w, minlength=len(uniq))


def link_loads(topo, traffic, placement, graph: LinkGraph | None = None) -> np.ndarray:
    """Bytes per directed link of ``traffic`` under ``placement`` (see :func:`link_graph` for the numbering).

    Parameters
    ----------
    topo : any topology.
    traffic : :class:`planner.traffic.Traffic`.
    placement : :class:`planner.placement.Placement` (or an array ``rank_to_node``).
    graph : a prebuilt :class:`LinkGraph` of ``topo`` (saves building it again).
    """
    g = graph if graph is not None else link_graph(topo)
    node = getattr(placement, "rank_to_node", placement)
    s, d, w = node_pair_bytes(traffic, node, topo.n_nodes)
    return g.loads(s, d, w)


def congestion_bound(topo, traffic, placement, graph: LinkGraph | None = None) -> float:
    """Lower bound on the communication time in seconds: the busiest link's bytes over its bandwidth."""
    g = graph if graph is not None else link_graph(topo)
    return g.bound(link_loads(topo, traffic, placement, g))
