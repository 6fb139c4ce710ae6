"""Bcast time model: parents send to their children one after another.

A send from node a to node b of ``m`` bytes costs
``hops(a, b) * per_hop_s + link_latency_s + m / min(bw_a, bw_b)``; a child
receives when its parent's earlier sends and its own are done; the Bcast
completes at the latest arrival (plus, for scatter-allgather, the allgather
steps, each as long as its slowest pair). Evaluation is vectorized per tree
level so annealing can score thousands of orders per second.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from topoplan.problems.bcast.trees import Schedule

__all__ = ["link_latency_s", "per_hop_s", "CostModel", "TimeModel"]


def link_latency_s(topo) -> float:
    """One-way latency of a host link.

    Parameters
    ----------
    topo : Topology

    Returns
    -------
    float
        Seconds.

    Examples
    --------
    >>> from topoplan.problems.bcast.allocation import cluster
    >>> topo = cluster(2, 2)                         # 2 racks of 2 hosts
    >>> link_latency_s(topo)
    5e-07
    """
    for name in ("latency_s", "down_latency_s"):
        if hasattr(topo, name):
            return float(getattr(topo, name))
    return 0.0


def per_hop_s(topo) -> float:
    """Delay added by each switch hop: the switch delay, or the link latency when the topology gives none.

    Parameters
    ----------
    topo : Topology

    Returns
    -------
    float
        Seconds.

    Examples
    --------
    >>> from topoplan.problems.bcast.allocation import cluster
    >>> topo = cluster(2, 2)                         # 2 racks of 2 hosts
    >>> per_hop_s(topo)
    2e-07
    """
    d = float(getattr(topo, "switch_delay_s", 0.0) or getattr(topo, "router_delay_s", 0.0) or 0.0)
    return d if d > 0 else link_latency_s(topo)


@dataclass
class CostModel:
    """Pairwise send cost over the allocation's nodes (local indices 0..n-1).

    ``latency_s[a, b]`` and ``inv_bw_s_per_B[a, b]`` (1 / slower HCA).

    Parameters
    ----------
    latency_s : numpy.ndarray
    inv_bw_s_per_B : numpy.ndarray

    Build one with :meth:`build`.

    Examples
    --------
    >>> from topoplan.problems.bcast.allocation import cluster
    >>> topo = cluster(2, 2)                         # 2 racks of 2 hosts
    >>> from topoplan.problems.bcast.delay import hops, node_bw
    >>> nodes = [0, 1, 2]
    >>> cm = CostModel.build(hops(topo, nodes), node_bw(topo, nodes), per_hop_s(topo), link_latency_s(topo))
    >>> cm.latency_s.tolist()                    # 1 switch inside a rack, 3 across
    [[0.0, 7e-07, 1.1e-06], [7e-07, 0.0, 1.1e-06], [1.1e-06, 1.1e-06, 0.0]]
    >>> float(cm.cost(0, 2, 1e6))                # latency + 1 MB at 8 Gbps
    0.0010011
    """

    latency_s: np.ndarray
    inv_bw_s_per_B: np.ndarray

    @classmethod
    def build(cls, hops: np.ndarray, bw_Bps: np.ndarray, hop_s: float, link_s: float) -> "CostModel":
        lat = np.asarray(hops, dtype=np.float64) * hop_s + link_s
        inv = 1.0 / np.minimum(bw_Bps[:, None], bw_Bps[None, :])
        np.fill_diagonal(lat, 0.0)
        return cls(lat, inv)

    def cost(self, a, b, nbytes):
        return self.latency_s[a, b] + nbytes * self.inv_bw_s_per_B[a, b]


class TimeModel:
    """Scores assignments ``assign[position] = local node index`` for one schedule.

    Parameters
    ----------
    schedule : Schedule
        A Bcast schedule (:mod:`topoplan.problems.bcast.trees`): who sends to whom, level by level.
    costs : CostModel
        Send costs between the allocation's nodes.

    Examples
    --------
    >>> from topoplan.problems.bcast.trees import binomial
    >>> import numpy as np
    >>> cm = CostModel.build(np.ones((4, 4)), np.full(4, 1e9), 1e-6, 0.0)
    >>> round(TimeModel(binomial(4, 1000), cm).time(np.arange(4)) * 1e6, 3)   # 2 rounds of 1 us + 1 us
    4.0
    """

    def __init__(self, schedule: Schedule, costs: CostModel):
        self.s = schedule
        self.c = costs
        e = schedule.edges
        depth = np.zeros(schedule.n, dtype=np.int64)
        for d, lvl in enumerate(schedule.levels):
            depth[lvl] = d
        self._lvl_edges = [np.flatnonzero(depth[e["child"]] == d) for d in range(1, len(schedule.levels))]
        par = e["parent"]
        # start of each edge's parent group, to turn a global cumsum into per-parent cumsums
        self._group_start = np.zeros(len(par), dtype=np.int64)
        if len(par):
            starts = np.r_[0, np.flatnonzero(np.diff(par) != 0) + 1]
            lens = np.diff(np.r_[starts, len(par)])
            self._group_start = np.repeat(starts, lens)
        self._ag = schedule.allgather_pairs()

    def edge_costs(self, assign: np.ndarray) -> np.ndarray:
        e = self.s.edges
        return self.c.cost(assign[e["parent"]], assign[e["child"]], e["bytes"])

    def arrivals(self, assign: np.ndarray) -> np.ndarray:
        """Time each position holds its tree-phase data."""
        assign = np.asarray(assign)
        cost = self.edge_costs(assign)
        cs = np.cumsum(cost)
        cum = cs - cs[self._group_start] + cost[self._group_start]
        arr = np.zeros(self.s.n)
        child, parent = self.s.edges["child"], self.s.edges["parent"]
        for idx in self._lvl_edges:
            arr[child[idx]] = arr[parent[idx]] + cum[idx]
        return arr

    def allgather_time(self, assign: np.ndarray) -> float:
        t = 0.0
        for src, dst, nb, rep in self._ag:
            t += rep * float(self.c.cost(assign[src], assign[dst], nb).max(initial=0.0))
        return t

    def time(self, assign) -> float:
        """Completion time of the Bcast in seconds."""
        assign = np.asarray(assign)
        arr = self.arrivals(assign)
        return float(arr.max(initial=0.0)) + self.allgather_time(assign)
