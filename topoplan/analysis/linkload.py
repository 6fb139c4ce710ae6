"""Link loads under a topology's static routing, and the congestion bound.

Every topology is seen as a set of *directed* links (full duplex: the two
directions never share) with one fixed route per node pair. Links and
routes are the simulator's (:func:`topoplan.sim.network.build_network`: its link
numbering, :meth:`topoplan.sim.network.Network.eps_routes`), so the bound here is the
one the simulator can at best reach:

- tree / fat-tree / hybrid (EPS part, no circuits): node up link, edge
  switch uplink to the top switch, top switch down to the edge switch, node
  down link; pairs under one switch use only the two node links. Fat-tree
  uplinks have full bisection (the simulator's unshared links): they are
  listed with ``inf`` bandwidth so they never bind the bound.
- torus / mesh: dimension-order routing, the shorter way round a ring (ties
  go the ``+`` way), with injection/ejection links when the topology gives
  an injection bandwidth.
- graph: host links plus shortest switch paths (the predecessor tree of
  :func:`scipy.sparse.csgraph.shortest_path`; the first of parallel links).

Ranks on one node use the node's intra-node link (memory bandwidth).

Routes of many node pairs are built at once as CSR arrays ``(ptr, links)``
(route ``i`` is ``links[ptr[i]:ptr[i+1]]``), so loads are one ``bincount``.

Examples
--------
>>> from topoplan.core.topology_io import load_topology
>>> from topoplan.traffic.matrix import from_arrays
>>> from topoplan.core.placement import sequential
>>> t = load_topology("paper003", ["kind=tree", "ocs=null"])
>>> tr = from_arrays(256, [0], [64], [2.5e9])
>>> round(congestion_bound(t, tr, sequential(256, t)), 3)   # 2.5 GB over a 10 Gbps node link
2.0
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from topoplan.core.errors import TopoplanError
from topoplan.core.topology import GraphTopology, TorusTopology, TreeTopology
from topoplan.sim.network import build_network

__all__ = ["LinkGraph", "link_graph", "node_pair_bytes", "link_loads", "congestion_bound"]


@dataclass
class LinkGraph:
    """Directed links of a topology and its static routes (a view of the simulator's network).

    Parameters
    ----------
    topo : Topology
    bw_Bps : numpy.ndarray
        Bandwidth per directed link (``inf``: never a bottleneck).
    link_class : numpy.ndarray of str
        ``node-up``, ``node-down``, ``intra``, ``uplink-up``,
        ``uplink-down``, ``torus-<dim><+|->``, ``inject``, ``eject``, ``switch``.
    names : list of str
        Readable link names (``host->switch``...).

    Build one with :func:`link_graph`.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> t = load_topology("paper003", ["kind=tree", "ocs=null"])   # 64 nodes, 10 Gbps node links
    >>> g = link_graph(t)
    >>> loads = g.loads(src=[0, 0], dst=[16, 1], nbytes=[2.5e9, 1e9])
    >>> g.bound(loads)
    2.8
    >>> g.busiest(loads, 1)
    [{'link': 'node0000->S0', 'class': 'node-up', 'bytes': 3500000000.0, 'time_s': 2.8}]
    """

    topo: object
    bw_Bps: np.ndarray
    link_class: np.ndarray
    names: list
    _idx: dict = field(default_factory=dict, repr=False)

    @property
    def n_links(self) -> int:
        return len(self.bw_Bps)

    @property
    def network(self):
        """The :class:`topoplan.sim.network.Network` whose links and routes these are."""
        return self._idx["net"]

    def routes(self, src, dst):
        """Routes of node pairs ``src[i] -> dst[i]`` as CSR ``(ptr, links)``; ``src == dst`` uses the intra link.

        These are :meth:`topoplan.sim.network.Network.eps_routes`.
        """
        src = np.asarray(src, dtype=np.int64).ravel()
        dst = np.asarray(dst, dtype=np.int64).ravel()
        if len(src) != len(dst):
            raise ValueError("src and dst differ in length")
        return self.network.eps_routes(src, dst)

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


def link_graph(topo) -> LinkGraph:
    """The directed links of ``topo`` and their routes: the simulator's network without circuits.

    Link ids are :func:`topoplan.sim.network.build_network`'s (see :mod:`topoplan.sim.network`):
    tree kinds number intra ``0..N-1``, node up ``N..2N-1``, node down
    ``2N..3N-1``, uplink up ``3N..3N+S-1``, uplink down ``3N+S..3N+2S-1``.
    Unshared links (fat-tree uplinks) get ``inf`` bandwidth.

    Parameters
    ----------
    topo : TreeTopology, TorusTopology or GraphTopology

    Returns
    -------
    LinkGraph

    Raises
    ------
    TopoplanError
        For another kind of topology.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> t = load_topology("paper003", ["kind=tree", "ocs=null"])   # 64 nodes, 10 Gbps node links
    >>> g = link_graph(t)
    >>> g.n_links, g.names[64], str(g.link_class[64])
    (200, 'node0000->S0', 'node-up')
    """
    if not isinstance(topo, (TreeTopology, TorusTopology, GraphTopology)):
        raise TopoplanError(f"no link model for topology kind {getattr(topo, 'kind', type(topo).__name__)!r}")
    net = build_network(topo)
    bw = np.where(net.shared, net.bw_Bps, np.inf)
    return LinkGraph(topo, bw, net.link_class, net.link_name, {"net": net})


# -- placements -------------------------------------------------------------

def node_pair_bytes(traffic, rank_to_node, n_nodes: int | None = None):
    """Rank traffic aggregated to ordered node pairs ``(src_nodes, dst_nodes, bytes)`` (intra-node pairs kept).

    Parameters
    ----------
    traffic : Traffic
    rank_to_node : array_like of int
    n_nodes : int, optional
        Default: one more than the largest node used.

    Returns
    -------
    src_nodes, dst_nodes : numpy.ndarray of int64
    bytes : numpy.ndarray of float64
        Sorted by (src, dst); messages a rank sends itself are dropped.

    Examples
    --------
    >>> from topoplan.traffic.matrix import from_arrays
    >>> tr = from_arrays(8, src=[0, 1, 4], dst=[5, 2, 0], msg_bytes=[100.0, 10.0, 8.0])
    >>> [x.tolist() for x in node_pair_bytes(tr, [0, 0, 0, 0, 1, 1, 1, 1])]
    [[0, 0, 1], [0, 1, 0], [10.0, 100.0, 8.0]]
    """
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
    topo : Topology
    traffic : Traffic
    placement : Placement or array_like of int
        Or an array ``rank_to_node``.
    graph : LinkGraph, optional
        A prebuilt graph of ``topo`` (saves building it again).

    Returns
    -------
    numpy.ndarray
        Bytes per directed link.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> t = load_topology("paper003", ["kind=tree", "ocs=null"])   # 64 nodes, 10 Gbps node links
    >>> from topoplan.traffic.matrix import from_arrays
    >>> loads = link_loads(t, from_arrays(64, [0], [16], [1e9]), np.arange(64))
    >>> [link_graph(t).names[i] for i in np.flatnonzero(loads)]
    ['node0000->S0', 'S1->node0016', 'S0->top', 'top->S1']
    """
    g = graph if graph is not None else link_graph(topo)
    node = getattr(placement, "rank_to_node", placement)
    s, d, w = node_pair_bytes(traffic, node, topo.n_nodes)
    return g.loads(s, d, w)


def congestion_bound(topo, traffic, placement, graph: LinkGraph | None = None) -> float:
    """Lower bound on the communication time in seconds: the busiest link's bytes over its bandwidth.

    Parameters
    ----------
    topo : Topology
    traffic : Traffic
    placement : Placement or array_like of int
    graph : LinkGraph, optional

    Returns
    -------
    float
        Seconds.

    See Also
    --------
    topoplan.sim.run.simulate : the simulated time, which the bound never exceeds on bulk traffic.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> t = load_topology("paper003", ["kind=tree", "ocs=null"])   # 64 nodes, 10 Gbps node links
    >>> from topoplan.traffic.matrix import from_arrays
    >>> from topoplan.core.placement import sequential
    >>> tr = from_arrays(256, [0], [64], [2.5e9])
    >>> congestion_bound(t, tr, sequential(256, t))   # 2.5 GB over a 10 Gbps node link
    2.0
    """
    g = graph if graph is not None else link_graph(topo)
    return g.bound(link_loads(topo, traffic, placement, g))
