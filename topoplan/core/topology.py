"""The topology model: two-level EPS trees (plain, fat tree, hybrid EPS+OCS), mesh/torus and general switch graphs.

Every topology numbers its compute nodes ``0..n_nodes-1`` and answers the
same questions: which edge switch a node hangs under (:meth:`node_switch`),
how many cores it has, its host name, and the switch-hop distance between
nodes (:meth:`hop_matrix`). Units are in the field names (``bw_Bps`` bytes
per second, ``latency_s`` seconds, ``mtu_B`` bytes).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Union

import numpy as np

from topoplan.core.errors import TopoplanError, where

__all__ = ["OCSConfig", "TreeTopology", "TorusTopology", "GraphTopology", "Topology", "balanced_ocs_nodes",
           "MAX_NODES", "MAX_CORES_PER_NODE", "MAX_PORTS_PER_NODE", "MAX_HOST_NAME", "check_count", "check_number",
           "check_host_names"]

# Per-node arrays (and the simulator's per-link ones) are dense: a typo such as switches=1000000000 must be
# an error, not a hang. A million nodes is six times Fugaku.
MAX_NODES = 1 << 20
# Far above any real machine (Fugaku: 48 cores, a GPU node's lanes: a few thousand) and small enough that
# nodes x cores stays a modest int64.
MAX_CORES_PER_NODE = 1 << 16
# Optical ports of one OCS node: real ones have a handful.
MAX_PORTS_PER_NODE = 1 << 10
# RFC 1123 (a DNS name is at most 253 characters).
MAX_HOST_NAME = 253


@dataclass(frozen=True)
class OCSConfig:
    """The optical circuit switch of a hybrid network.

    ``nodes`` are the OCS nodes (node ids). ``ports_per_node`` optical ports
    each (one circuit per port). ``node_link_bw_Bps`` is the EPS link
    bandwidth of OCS nodes (fatter than the others' in 003's "Ours"; equal
    in "Ours (narrow)").

    Parameters
    ----------
    nodes : tuple of int
        The OCS nodes.
    bw_Bps, latency_s : float
        Bandwidth and latency of a circuit.
    setup_s : float, optional
        Time to set up the circuits (not charged per message).
    ports_per_node : int, optional
        Optical ports of every OCS node.
    node_link_bw_Bps : float, optional
        EPS link bandwidth of the OCS nodes; default the tree's ``down_bw_Bps``.
    mtu_B : float, optional

    References
    ----------
    001 section 2 (only some nodes are OCS nodes), 003 section 4.1.2 and
    Table 1 (the parameters; "Ours" vs "Ours (narrow)").

    Examples
    --------
    >>> o = OCSConfig(nodes=(0, 4), bw_Bps=2.5e9, latency_s=5e-7)
    >>> o.bdp_B    # the large-message threshold
    1250.0
    """

    nodes: tuple[int, ...]
    bw_Bps: float
    latency_s: float
    setup_s: float = 0.010
    ports_per_node: int = 1
    node_link_bw_Bps: float | None = None
    mtu_B: float = 4096.0

    @property
    def bdp_B(self) -> float:
        """Bandwidth-delay product: the large-message threshold of the papers."""
        return self.bw_Bps * self.latency_s


@dataclass
class TreeTopology:
    """Two-level EPS tree: edge switches under one top switch, optionally with an OCS (``kind='hybrid'``).

    ``kind`` is ``tree`` (uplinks shared: the bisection bottleneck),
    ``fat-tree`` (full bisection: no uplink contention) or ``hybrid``
    (tree plus :class:`OCSConfig`). Nodes are numbered switch by switch.

    Parameters
    ----------
    kind : {"tree", "fat-tree", "hybrid"}
    nodes_per_switch : tuple of int
        Nodes under every edge switch.
    cores_per_node : int, optional
    down_bw_Bps, down_latency_s : float, optional
        Node-to-edge-switch links.
    up_bw_Bps, up_latency_s : float, optional
        Edge-switch-to-top links.
    switch_delay_s, mtu_B : float, optional
        Per store-and-forward switch: delay and packet size.
    intra_node_bw_Bps, intra_node_latency_s : float, optional
        Between ranks on one node.
    ocs : OCSConfig, optional
    hostnames, switch_names : tuple of str, optional
    name : str, optional
    top_name : str, optional
        Name of the top switch (a Slurm topology.conf's spine); default ``top``.

    See Also
    --------
    topoplan.core.topology_io.load_topology : build one from a preset or file.

    References
    ----------
    000 section 2 and Fig. 1 (the hybrid EPS/OCS tree), Table 1 (its parameters).

    Examples
    --------
    >>> t = TreeTopology(kind="tree", nodes_per_switch=(2, 2))
    >>> t.n_nodes, t.node_switch().tolist(), t.hop_matrix().tolist()
    (4, [0, 0, 1, 1], [[0, 1, 3, 3], [1, 0, 3, 3], [3, 3, 0, 1], [3, 3, 1, 0]])
    >>> h = TreeTopology(kind="hybrid", nodes_per_switch=(2, 2),
    ...                  ocs=OCSConfig(nodes=(0, 2), bw_Bps=2.5e9, latency_s=5e-7))
    >>> h.validate(); h.is_ocs_node().tolist()
    [True, False, True, False]
    >>> TreeTopology(kind="hybrid", nodes_per_switch=(2, 2)).validate()
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: field 'ocs': a hybrid topology needs an 'ocs' section
    """

    kind: str
    nodes_per_switch: tuple[int, ...]
    cores_per_node: int = 1
    down_bw_Bps: float = 1.25e9
    down_latency_s: float = 5e-7
    up_bw_Bps: float = 2.5e9
    up_latency_s: float = 5e-7
    switch_delay_s: float = 0.0
    mtu_B: float = 4096.0
    intra_node_bw_Bps: float = 8.5e9
    intra_node_latency_s: float = 1e-7
    ocs: OCSConfig | None = None
    hostnames: tuple[str, ...] | None = None
    switch_names: tuple[str, ...] | None = None
    name: str = ""
    top_name: str | None = None

    @property
    def n_switches(self) -> int:
        return len(self.nodes_per_switch)

    @property
    def n_nodes(self) -> int:
        return int(sum(self.nodes_per_switch))

    def node_switch(self) -> np.ndarray:
        """Edge-switch id of every node."""
        return np.repeat(np.arange(self.n_switches), self.nodes_per_switch)

    def node_cores(self) -> np.ndarray:
        return np.full(self.n_nodes, self.cores_per_node, dtype=np.int64)

    def node_link_bw(self) -> np.ndarray:
        """EPS link bandwidth of every node (OCS nodes may have fatter links)."""
        bw = np.full(self.n_nodes, self.down_bw_Bps)
        if self.ocs is not None and self.ocs.node_link_bw_Bps is not None:
            bw[list(self.ocs.nodes)] = self.ocs.node_link_bw_Bps
        return bw

    def is_ocs_node(self) -> np.ndarray:
        mask = np.zeros(self.n_nodes, dtype=bool)
        if self.ocs is not None:
            mask[list(self.ocs.nodes)] = True
        return mask

    def hop_matrix(self) -> np.ndarray:
        """Switches traversed between nodes: 0 on one node, 1 under one switch, 3 across (edge, top, edge)."""
        sw = self.node_switch()
        hops = np.where(sw[:, None] == sw[None, :], 1, 3)
        np.fill_diagonal(hops, 0)
        return hops

    def host_names(self) -> list[str]:
        return list(self.hostnames) if self.hostnames else [f"node{i:04d}" for i in range(self.n_nodes)]

    def switch_labels(self) -> list[str]:
        """Display name of every edge switch, the one name every output uses for it.

        Returns
        -------
        list of str
            ``switch_names`` when the topology has them (a Slurm topology.conf's
            leaf names, a YAML ``switch_names`` list), else ``S0``, ``S1``, ...

        Examples
        --------
        >>> TreeTopology(kind="tree", nodes_per_switch=(2, 2)).switch_labels()
        ['S0', 'S1']
        >>> TreeTopology(kind="tree", nodes_per_switch=(2, 2), switch_names=("leaf1", "leaf2")).switch_labels()
        ['leaf1', 'leaf2']
        """
        return list(self.switch_names) if self.switch_names else [f"S{i}" for i in range(self.n_switches)]

    def top_label(self) -> str:
        """Display name of the top switch: ``top_name`` (a Slurm spine's name), else ``top``.

        Examples
        --------
        >>> TreeTopology(kind="tree", nodes_per_switch=(2, 2)).top_label()
        'top'
        >>> TreeTopology(kind="tree", nodes_per_switch=(2, 2), top_name="spine").top_label()
        'spine'
        """
        return self.top_name or "top"

    def validate(self) -> None:
        _positive(self, ("down_bw_Bps", "up_bw_Bps", "intra_node_bw_Bps", "mtu_B"))
        _nonneg(self, ("down_latency_s", "up_latency_s", "switch_delay_s", "intra_node_latency_s"))
        if self.kind not in ("tree", "fat-tree", "hybrid"):
            raise TopoplanError(f"field 'kind': unknown tree kind {self.kind!r} (tree, fat-tree, hybrid)")
        if not self.nodes_per_switch:
            raise TopoplanError("field 'nodes_per_switch': every switch needs at least one node")
        for i, n in enumerate(self.nodes_per_switch):
            check_count(n, f"nodes_per_switch[{i}]", maximum=MAX_NODES)
        if self.n_nodes > MAX_NODES:
            raise TopoplanError(f"field 'nodes_per_switch': gives {self.n_nodes:,} nodes, over the limit of "
                                f"{MAX_NODES:,}")
        check_count(self.cores_per_node, "cores_per_node", maximum=MAX_CORES_PER_NODE)
        if self.kind == "hybrid" and self.ocs is None:
            raise TopoplanError("field 'ocs': a hybrid topology needs an 'ocs' section")
        if self.ocs is not None:
            o = self.ocs
            _positive(o, ("bw_Bps", "mtu_B"), "ocs.")
            _nonneg(o, ("latency_s", "setup_s"), "ocs.")
            if o.node_link_bw_Bps is not None:
                _positive(o, ("node_link_bw_Bps",), "ocs.")
            check_count(o.ports_per_node, "ocs.ports_per_node", maximum=MAX_PORTS_PER_NODE)
            for i, n in enumerate(o.nodes):
                if not 0 <= check_count(n, f"ocs.nodes[{i}]", minimum=0) < self.n_nodes:
                    raise TopoplanError(f"field 'ocs.nodes': node {n} does not exist ({self.n_nodes} nodes)")
            if len(set(o.nodes)) != len(o.nodes):
                raise TopoplanError("field 'ocs.nodes': a node is listed twice")
        if self.hostnames is not None:
            if len(self.hostnames) != self.n_nodes:
                raise TopoplanError(f"field 'hostnames': {len(self.hostnames)} names for {self.n_nodes} nodes")
            check_host_names(self.hostnames, "hostnames")
        if self.switch_names is not None:
            if len(self.switch_names) != self.n_switches:
                raise TopoplanError(f"field 'switch_names': {len(self.switch_names)} names for "
                                    f"{self.n_switches} switches")
            _unique(self.switch_names, "switch_names", "switch")
        if self.top_name is not None and self.top_name in self.switch_labels():
            raise TopoplanError(f"field 'top_name': {self.top_name!r} is also the name of an edge switch")


@dataclass
class TorusTopology:
    """k-ary n-dimensional mesh/torus of routers, one compute node per router.

    ``dims`` sizes, ``wrap`` per dimension (True = torus ring), ``bw_Bps``
    per dimension (one value per direction of a link). Node id is
    row-major with the first dimension fastest (x, then y, then z).

    Parameters
    ----------
    dims : tuple of int
    wrap : tuple of bool
    bw_Bps : tuple of float
    latency_s, router_delay_s : float, optional
    cores_per_node : int, optional
    injection_bw_Bps : float, optional
        Node-to-router bandwidth; None: not modelled.
    mtu_B, intra_node_bw_Bps, intra_node_latency_s : float, optional
    hostnames : tuple of str, optional
    name : str, optional
    kind : {"torus", "mesh"}, optional

    References
    ----------
    004 (the K computer's Tofu torus; a 10x10x10 mesh for the all-to-all study).

    Examples
    --------
    >>> m = TorusTopology(dims=(3, 2), wrap=(True, False), bw_Bps=(1e9, 1e9))
    >>> m.n_nodes, m.coords().tolist()
    (6, [[0, 0], [1, 0], [2, 0], [0, 1], [1, 1], [2, 1]])
    >>> m.hop_matrix()[0].tolist()    # routers crossed from node 0
    [0, 2, 2, 2, 3, 3]
    """

    dims: tuple[int, ...]
    wrap: tuple[bool, ...]
    bw_Bps: tuple[float, ...]
    latency_s: float = 1e-7
    router_delay_s: float = 0.0
    cores_per_node: int = 1
    injection_bw_Bps: float | None = None
    mtu_B: float = 4096.0
    intra_node_bw_Bps: float = 8.5e9
    intra_node_latency_s: float = 1e-7
    hostnames: tuple[str, ...] | None = None
    name: str = ""
    kind: str = "torus"

    @property
    def n_nodes(self) -> int:
        return int(np.prod(self.dims))

    @property
    def n_switches(self) -> int:
        return self.n_nodes

    def coords(self) -> np.ndarray:
        """(n_nodes, n_dims) coordinates, first dimension fastest."""
        idx = np.arange(self.n_nodes)
        out = np.empty((self.n_nodes, len(self.dims)), dtype=np.int64)
        for d, k in enumerate(self.dims):
            out[:, d] = idx % k
            idx = idx // k
        return out

    def node_switch(self) -> np.ndarray:
        return np.arange(self.n_nodes)

    def node_cores(self) -> np.ndarray:
        return np.full(self.n_nodes, self.cores_per_node, dtype=np.int64)

    def hop_matrix(self) -> np.ndarray:
        """Router hops of dimension-order routing (+1 for the first router), shortest way round on rings."""
        c = self.coords()
        hops = np.zeros((self.n_nodes, self.n_nodes), dtype=np.int64)
        for d, k in enumerate(self.dims):
            diff = np.abs(c[:, None, d] - c[None, :, d])
            hops += np.minimum(diff, k - diff) if self.wrap[d] else diff
        return np.where(np.eye(self.n_nodes, dtype=bool), 0, hops + 1)

    def host_names(self) -> list[str]:
        return list(self.hostnames) if self.hostnames else [f"node{i:05d}" for i in range(self.n_nodes)]

    def switch_labels(self) -> list[str]:
        """Display name of every router (one per node), the one name every output uses for it.

        Returns
        -------
        list of str
            ``S0``, ``S1``, ... (a mesh/torus has no switch names of its own).

        Examples
        --------
        >>> TorusTopology(dims=(3,), wrap=(True,), bw_Bps=(1e9,)).switch_labels()
        ['S0', 'S1', 'S2']
        """
        return [f"S{i}" for i in range(self.n_switches)]

    def validate(self) -> None:
        n = len(self.dims)
        if n == 0:
            raise TopoplanError("field 'dims': need at least one dimension, each of size >= 1")
        size = 1
        for i, k in enumerate(self.dims):
            size *= check_count(k, f"dims[{i}]", maximum=MAX_NODES)
        if size > MAX_NODES:
            raise TopoplanError(f"field 'dims': gives {size:,} nodes, over the limit of {MAX_NODES:,}")
        if len(self.wrap) != n:
            raise TopoplanError(f"field 'wrap': {len(self.wrap)} values for {n} dimensions")
        if not all(isinstance(w, (bool, np.bool_)) for w in self.wrap):
            raise TopoplanError("field 'wrap': expected true/false per dimension")
        if len(self.bw_Bps) != n:
            raise TopoplanError(f"field 'bw_Bps': {len(self.bw_Bps)} values for {n} dimensions")
        for i, bw in enumerate(self.bw_Bps):
            _check_number(bw, f"bw_Bps[{i}]", positive=True)
        _positive(self, ("mtu_B", "intra_node_bw_Bps"))
        if self.injection_bw_Bps is not None:
            _positive(self, ("injection_bw_Bps",))
        _nonneg(self, ("latency_s", "router_delay_s", "intra_node_latency_s"))
        check_count(self.cores_per_node, "cores_per_node", maximum=MAX_CORES_PER_NODE)
        if self.kind not in ("torus", "mesh"):
            raise TopoplanError(f"field 'kind': unknown torus kind {self.kind!r} (torus, mesh)")
        if self.hostnames is not None:
            if len(self.hostnames) != self.n_nodes:
                raise TopoplanError(f"field 'hostnames': {len(self.hostnames)} names for {self.n_nodes} nodes")
            check_host_names(self.hostnames, "hostnames")


@dataclass
class GraphTopology:
    """A general switch graph with hosts attached to switches (Slurm multi-level trees, InfiniBand fabrics).

    ``host_switch[i]`` is the switch host ``i`` hangs under, over a link of
    ``host_bw_Bps[i]``. ``links`` are switch-switch links ``(a, b, bw_Bps)``
    (parallel links allowed); routes are shortest paths in switch hops.

    Parameters
    ----------
    switches, hosts : tuple of str
    host_switch : tuple of int
    host_bw_Bps : tuple of float
    links : tuple of (int, int, float)
    latency_s, switch_delay_s, mtu_B : float, optional
    cores_per_node : int, optional
    intra_node_bw_Bps, intra_node_latency_s : float, optional
    name : str, optional
    kind : str, optional
    switch_guids : tuple of str, optional
        InfiniBand GUIDs of the switches (fabrics read by :mod:`topoplan.fabric.ibfabric`).

    Examples
    --------
    >>> g = GraphTopology(switches=("s0", "s1", "top"), hosts=("a", "b", "c"), host_switch=(0, 0, 1),
    ...                   host_bw_Bps=(1.25e9,) * 3, links=((0, 2, 2.5e9), (1, 2, 2.5e9)))
    >>> g.validate(); g.hop_matrix().tolist()
    [[0, 1, 3], [1, 0, 3], [3, 3, 0]]
    >>> g.switch_hops().tolist()
    [[0, 2, 1], [2, 0, 1], [1, 1, 0]]
    """

    switches: tuple[str, ...]
    hosts: tuple[str, ...]
    host_switch: tuple[int, ...]
    host_bw_Bps: tuple[float, ...]
    links: tuple[tuple[int, int, float], ...]
    latency_s: float = 1e-7
    switch_delay_s: float = 1e-7
    cores_per_node: int = 1
    mtu_B: float = 4096.0
    intra_node_bw_Bps: float = 8.5e9
    intra_node_latency_s: float = 1e-7
    name: str = ""
    kind: str = "graph"
    switch_guids: tuple[str, ...] | None = None
    _hops: np.ndarray | None = field(default=None, repr=False, compare=False)

    @property
    def n_nodes(self) -> int:
        return len(self.hosts)

    @property
    def n_switches(self) -> int:
        return len(self.switches)

    def node_switch(self) -> np.ndarray:
        return np.asarray(self.host_switch, dtype=np.int64)

    def node_cores(self) -> np.ndarray:
        return np.full(self.n_nodes, self.cores_per_node, dtype=np.int64)

    def node_link_bw(self) -> np.ndarray:
        return np.asarray(self.host_bw_Bps, dtype=np.float64)

    def switch_graph(self):
        """NetworkX multigraph of switches with ``bw_Bps`` on each edge."""
        import networkx as nx

        g = nx.MultiGraph()
        g.add_nodes_from(range(self.n_switches))
        for a, b, bw in self.links:
            g.add_edge(a, b, bw_Bps=bw)
        return g

    def switch_hops(self) -> np.ndarray:
        """Switch-to-switch distance in switch hops (BFS), -1 when disconnected."""
        from scipy.sparse import coo_matrix
        from scipy.sparse.csgraph import shortest_path

        s = self.n_switches
        if self.links:
            a = np.array([l[0] for l in self.links]); b = np.array([l[1] for l in self.links])
            adj = coo_matrix((np.ones(len(a)), (a, b)), shape=(s, s)).tocsr()
        else:
            adj = coo_matrix((s, s)).tocsr()
        d = shortest_path(adj, directed=False, unweighted=True)
        return np.where(np.isinf(d), -1, d).astype(np.int64)

    def hop_matrix(self) -> np.ndarray:
        """Switches traversed between hosts (1 under one switch; 1 + switch distance otherwise)."""
        if self._hops is None:
            sh = self.switch_hops()
            sw = self.node_switch()
            hops = sh[sw[:, None], sw[None, :]] + 1
            np.fill_diagonal(hops, 0)
            self._hops = hops
        return self._hops

    def host_names(self) -> list[str]:
        return list(self.hosts)

    def switch_labels(self) -> list[str]:
        """Display name of every switch, the one name every output uses for it.

        Returns
        -------
        list of str
            ``switches`` (a graph topology always names its switches).

        Examples
        --------
        >>> g = GraphTopology(switches=("leaf1", "spine"), hosts=("a", "b"), host_switch=(0, 0),
        ...                   host_bw_Bps=(1.25e9,) * 2, links=((0, 1, 2.5e9),))
        >>> g.switch_labels()
        ['leaf1', 'spine']
        """
        return list(self.switches)

    def validate(self) -> None:
        if len(self.host_switch) != len(self.hosts) or len(self.host_bw_Bps) != len(self.hosts):
            raise TopoplanError("field 'hosts': host_switch and host_bw_Bps need one entry per host")
        if not self.switches:
            raise TopoplanError("field 'switches': a graph topology needs switches")
        if not self.hosts:
            raise TopoplanError("field 'hosts': a graph topology needs hosts")
        if self.n_nodes > MAX_NODES:
            raise TopoplanError(f"field 'hosts': {self.n_nodes:,} hosts, over the limit of {MAX_NODES:,}")
        _unique(self.switches, "switches", "switch")
        for i, s in enumerate(self.host_switch):
            if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or not 0 <= s < self.n_switches:
                raise TopoplanError(f"field 'hosts[{i}].switch': unknown switch {s!r}")
        for i, bw in enumerate(self.host_bw_Bps):
            _check_number(bw, f"hosts[{i}].bw", positive=True)
        for i, link in enumerate(self.links):
            if len(link) != 3:
                raise TopoplanError(f"field 'links[{i}]': expected (a, b, bw)")
            a, b, bw = link
            for end, s in (("a", a), ("b", b)):
                if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or not 0 <= s < self.n_switches:
                    raise TopoplanError(f"field 'links[{i}].{end}': unknown switch {s!r}")
            if a == b:
                raise TopoplanError(f"field 'links[{i}]': switch {self.switches[a]!r} is linked to itself")
            _check_number(bw, f"links[{i}].bw", positive=True)
        _positive(self, ("mtu_B", "intra_node_bw_Bps"))
        _nonneg(self, ("latency_s", "switch_delay_s", "intra_node_latency_s"))
        check_count(self.cores_per_node, "cores_per_node", maximum=MAX_CORES_PER_NODE)
        check_host_names(self.hosts, "hosts")
        if self.switch_guids is not None and len(self.switch_guids) != self.n_switches:
            raise TopoplanError(f"field 'switch_guids': {len(self.switch_guids)} GUIDs for {self.n_switches} "
                                "switches")
        self._check_connected()

    def _check_connected(self) -> None:
        """Every host must reach every other one: a hop count across a gap would read as 0."""
        used = sorted(set(int(s) for s in self.host_switch))
        if len(used) < 2:
            return
        from scipy.sparse import coo_matrix
        from scipy.sparse.csgraph import connected_components

        s = self.n_switches
        a = np.array([l[0] for l in self.links], dtype=np.int64)
        b = np.array([l[1] for l in self.links], dtype=np.int64)
        adj = coo_matrix((np.ones(len(a)), (a, b)), shape=(s, s))
        _, label = connected_components(adj, directed=False)
        first = used[0]
        other = next((k for k in used if label[k] != label[first]), None)
        if other is not None:
            raise TopoplanError(f"field 'links': switch {self.switches[first]!r} and switch "
                                f"{self.switches[other]!r} are not connected, so their hosts cannot reach each "
                                "other (plan each connected part separately)")


Topology = Union[TreeTopology, TorusTopology, GraphTopology]


def balanced_ocs_nodes(nodes_per_switch, per_switch: int) -> tuple[int, ...]:
    """The first ``per_switch`` nodes under every switch: OCS nodes balanced per switch (001, 003).

    Parameters
    ----------
    nodes_per_switch : sequence of int
    per_switch : int

    Returns
    -------
    tuple of int
        Node ids, switch by switch.

    Raises
    ------
    TopoplanError
        If a switch has fewer nodes than ``per_switch``.

    References
    ----------
    001 section 4.1 and 003 section 4.1.2 ("the OCS nodes per EPS switch are balanced").

    Examples
    --------
    >>> balanced_ocs_nodes((4, 4), 1)
    (0, 4)
    >>> balanced_ocs_nodes((16, 16, 16, 16), 2)
    (0, 1, 16, 17, 32, 33, 48, 49)
    """
    out, base = [], 0
    for n in nodes_per_switch:
        if per_switch > n:
            raise TopoplanError(f"field 'ocs.nodes_per_switch': {per_switch} OCS nodes per switch but a switch has "
                                f"{n} nodes")
        out.extend(range(base, base + per_switch))
        base += n
    return tuple(out)


def check_count(value, field: str, *, minimum: int = 1, maximum: int | None = None) -> int:
    """An integer count (cores, nodes, ports, a dimension) as an ``int``, or a one-line error naming ``field``.

    The one check of every integer field of a topology, whether read from a
    document or set in code: ``True``, text, ``inf``/``nan``, fractions and
    values out of range are errors, never coerced.

    Parameters
    ----------
    value : object
        The value read (an int, or a float with an integral value such as ``4.0``).
    field : str
        The field's name in the document (``cores_per_node``, ``dims[2]``).
    minimum : int, optional
        Smallest allowed value (default 1: a count that must be positive).
    maximum : int, optional
        Largest allowed value (default: none).

    Returns
    -------
    int

    Raises
    ------
    TopoplanError
        ``field '<field>': ...`` naming what is wrong.

    Examples
    --------
    >>> check_count(4, "cores_per_node"), check_count(8.0, "dims[0]")
    (4, 8)
    >>> check_count(float("inf"), "cores_per_node")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: field 'cores_per_node': expected an integer, got inf
    >>> check_count(True, "switches")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: field 'switches': expected an integer, got True
    >>> check_count(0, "cores_per_node")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: field 'cores_per_node': must be at least 1, got 0
    >>> check_count(1e30, "cores_per_node", maximum=MAX_CORES_PER_NODE)
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: field 'cores_per_node': 1e+30 is over the limit of 65,536
    """
    number = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))
    if not number or not math.isfinite(value) or value != math.floor(value):
        raise TopoplanError(f"field '{field}': expected an integer, got {value!r}")
    n = int(value)
    shown = f"{n:,}" if isinstance(value, (int, np.integer)) else repr(float(value))
    if n < minimum:
        raise TopoplanError(f"field '{field}': must be at least {minimum}, got {shown}")
    if maximum is not None and n > maximum:
        raise TopoplanError(f"field '{field}': {shown} is over the limit of {maximum:,}")
    return n


def check_number(value, field: str, *, minimum: float = 0.0) -> float:
    """A finite number (bytes, seconds) given in code as a ``float``, or a one-line error naming ``field``.

    The companion of :func:`check_count` for options that need not be integers: ``True``, text,
    ``inf``/``nan`` and values below ``minimum`` are errors, never coerced.

    Parameters
    ----------
    value : object
    field : str
        The option's name.
    minimum : float, optional
        Smallest allowed value (default 0).

    Returns
    -------
    float

    Raises
    ------
    TopoplanError
        ``field '<field>': ...`` naming what is wrong.

    Examples
    --------
    >>> check_number(1250, "threshold_B")
    1250.0
    >>> check_number("4MB", "threshold_B")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: field 'threshold_B': expected a number, got '4MB'
    >>> check_number(-1.0, "bytes_B")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: field 'bytes_B': must be at least 0, got -1.0
    """
    number = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))
    if not number or not math.isfinite(value):
        raise TopoplanError(f"field '{field}': expected a number, got {value!r}")
    if value < minimum:
        raise TopoplanError(f"field '{field}': must be at least {minimum:g}, got {value!r}")
    return float(value)


# Host names go verbatim into launcher files: ``rank N=host slot=S`` lines (Open MPI), one host per line
# (MPICH, SLURM_HOSTFILE). Whitespace, '=', a newline or a shell metacharacter in a name would rewrite
# those lines, so only RFC 1123 names are allowed, with '_' (common in cluster node names, and accepted by
# Slurm and by the MPI launchers).
_HOST_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")
_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
_HOST_RE = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")


def _shown(name: str) -> str:
    return repr(name) if len(name) <= 40 else repr(name[:40]) + "..."


def _host_name_problem(name) -> str | None:
    if not isinstance(name, str):
        return f"expected a host name (text), got {name!r}"
    if not name:
        return "empty host name"
    bad = next((c for c in name if c not in _HOST_CHARS), None)
    if bad is not None:
        return (f"host name {_shown(name)} contains {bad!r}; host names may only contain letters, digits, "
                "'-', '_' and '.'")
    if len(name) > MAX_HOST_NAME:
        return f"host name {_shown(name)} is longer than {MAX_HOST_NAME} characters"
    if not _HOST_RE.fullmatch(name):
        return (f"host name {_shown(name)} is malformed: '.'-separated labels of 1-63 characters, none "
                "starting or ending with '-'")
    return None


def check_host_names(names, field: str = "hostnames", *, source=None, lines=None) -> list[str]:
    """Check host names for launcher files: the RFC 1123 grammar (plus ``_``) and no name twice.

    Host names go verbatim into Open MPI rankfiles (``rank N=host slot=S``),
    MPICH machinefiles and ``SLURM_HOSTFILE`` (one host per line): a space,
    ``=``, a newline, a control or shell character would rewrite those lines,
    and two nodes with one name put their ranks on one machine. Allowed:
    ASCII letters, digits, ``-``, ``_``, ``.``; ``.``-separated labels of 1-63
    characters not starting or ending with ``-``; at most 253 characters.
    Names are compared without case (DNS ignores it).

    Parameters
    ----------
    names : sequence of str
        Host name of node 0, 1, ...
    field : str, optional
        The field they come from, for messages (``hostnames[3]``).
    source : str or path, optional
        The file they come from, for messages.
    lines : sequence of int, optional
        Line of every name in ``source``: messages then name the line
        (``hosts.txt:4: field 'host'``) instead of the index.

    Returns
    -------
    list of str
        The names.

    Raises
    ------
    TopoplanError
        Naming the file, line or index of the first bad or repeated name.

    See Also
    --------
    topoplan.reporting.export.read_hostfile : reads ``--hosts`` files with this check.

    Examples
    --------
    >>> check_host_names(["cn-01", "cn-02.cluster", "gpu_7"])
    ['cn-01', 'cn-02.cluster', 'gpu_7']
    >>> check_host_names(["n1", "x slot=9"])
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: field 'hostnames[1]': host name 'x slot=9' contains ' '; host names may only contain letters, digits, '-', '_' and '.'
    >>> check_host_names(["n1", "n2", "N1"], "hosts", source="hosts.txt", lines=[1, 2, 4])
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: hosts.txt:4: field 'hosts': host 'N1' is named for node 0 and node 2 (host names ignore case)
    """
    def loc(i):
        if lines is not None:
            return where(source, lines[i], field)
        return where(source, None, f"{field}[{i}]")

    seen: dict[str, int] = {}
    out = []
    for i, name in enumerate(names):
        problem = _host_name_problem(name)
        if problem:
            raise TopoplanError(f"{loc(i)}: {problem}")
        key = name.lower()
        if key in seen:
            raise TopoplanError(f"{loc(i)}: host {name!r} is named for node {seen[key]} and node {i} "
                                "(host names ignore case)")
        seen[key] = i
        out.append(name)
    return out


def _unique(names, field: str, what: str) -> None:
    seen: dict = {}
    for i, n in enumerate(names):
        if n in seen:
            raise TopoplanError(f"field '{field}[{i}]': {what} {n!r} is listed twice (also {field}[{seen[n]}])")
        seen[n] = i


def _check_number(v, field: str, *, positive: bool) -> float:
    number = isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))
    if not number or not math.isfinite(v) or not (v > 0 if positive else v >= 0):
        need = "a positive" if positive else "a non-negative"
        raise TopoplanError(f"field '{field}': must be {need} finite number, got {v!r}")
    return float(v)


def _positive(obj, names, prefix=""):
    for f in names:
        _check_number(getattr(obj, f), prefix + f, positive=True)


def _nonneg(obj, names, prefix=""):
    for f in names:
        _check_number(getattr(obj, f), prefix + f, positive=False)
