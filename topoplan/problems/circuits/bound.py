"""The communication-time bound of a circuit plan: the objective every circuit method is scored by.

Every byte of the traffic is put on the directed links it crosses under the
plan: node EPS links (up and down, including those of relay nodes), the
edge switches' uplinks (both directions), intra-node links and the
circuits (both directions). Small and intra-switch messages take their EPS
routes; large inter-switch messages follow the forwarding tables with the
simulator's own walk (:meth:`topoplan.sim.network.Network.relay_routes`), then are
delivered over the EPS from the node where they arrive (not at all when they
arrive at their destination node). Links are numbered as the simulator
numbers them (:meth:`topoplan.problems.circuits.problem.CircuitProblem.network`), so
``loads_B`` compares link by link with a simulation's ``link_bytes``. The
bound is

    congestion_bound_s = max over links of bytes / bandwidth,

a lower bound on the communication time of any schedule of that traffic
(each link must carry its bytes; fat-tree uplinks are not shared and are
left out). The second objective is ``uplink_bytes``: bytes through the top
switch (sum over the uplinks going up).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Evaluation", "evaluate", "better", "floor_s"]


@dataclass
class Evaluation:
    """Loads of one plan. ``loads_B``/``bw_Bps`` per link in the simulator's numbering (circuits last).

    Made by :func:`evaluate`; the fields are the bound (``congestion_s``), the
    uplink bytes and the per-link loads, with the bytes by how they travel
    (direct circuit, relayed, fallback to the EPS).

    Parameters
    ----------
    problem : CircuitProblem
    circuits : list of (int, int)
    loads_B, bw_Bps : numpy.ndarray
        Per link: bytes and bandwidth (``inf`` on unshared links).
    congestion_s : float
        The bound.
    uplink_bytes, ocs_bytes, fallback_bytes, relayed_bytes, direct_bytes : float
        Bytes through the top switch, over circuits, of large messages falling
        back to the EPS, relayed, and sent over their own node's circuit.
    max_hops : int
        Most circuits a route crosses.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.matrix import from_arrays
    >>> from topoplan.problems.circuits.problem import CircuitProblem
    >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=4"])   # OCS nodes 0-3, 16-19, ...
    >>> traffic = from_arrays(64, range(4, 12), range(20, 28), [4e7] * 8)  # non-OCS nodes, switch 0 -> 1
    >>> prob = CircuitProblem.build(topo, traffic, placement=list(range(64)))
    >>> ev = evaluate(prob, [], np.full((64, 4), -1))     # no circuits
    >>> ev.congestion_s, ev.uplink_bytes, ev.bottleneck()
    (0.128, 320000000.0, 'S0->top')
    >>> ev.metrics()["large_fallback_bytes"]
    320000000.0
    """

    problem: object
    circuits: list
    loads_B: np.ndarray
    bw_Bps: np.ndarray
    congestion_s: float
    uplink_bytes: float
    ocs_bytes: float
    fallback_bytes: float
    relayed_bytes: float
    direct_bytes: float
    max_hops: int

    def times_s(self) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            t = self.loads_B / self.bw_Bps
        return np.nan_to_num(t, nan=0.0, posinf=0.0)

    def bottleneck(self) -> str:
        t = self.times_s()
        return self.problem.link_name(int(np.argmax(t)), self.circuits) if len(t) else ""

    def metrics(self) -> dict:
        """The problem's objectives and diagnostics, by name."""
        p = self.problem
        t = self.times_s()
        ids = p.link_ids()
        nfix = p.n_fixed_links()
        s = p.n_switches
        node_t = t[np.concatenate([ids["up"], ids["down"]])]
        return {
            "congestion_bound_s": self.congestion_s,
            "uplink_bytes": self.uplink_bytes,
            "circuits_used": len(self.circuits),
            "ocs_bytes": self.ocs_bytes,
            "large_fallback_bytes": self.fallback_bytes,
            "relayed_bytes": self.relayed_bytes,
            "direct_bytes": self.direct_bytes,
            "max_circuit_hops": self.max_hops,
            "node_link_max_s": float(node_t.max(initial=0.0)),
            "uplink_max_s": float(t[np.concatenate([ids["uplink_up"], ids["uplink_down"]])].max(initial=0.0)),
            "circuit_max_s": float(t[nfix:].max(initial=0.0)),
            "intra_node_max_s": float(t[ids["intra"]].max(initial=0.0)),
            "bottleneck": self.bottleneck(),
            "large_inter_switch_bytes": float(p.large_bytes.sum()),
            "switches": s,
        }


def evaluate(problem, circuits, next_hop: np.ndarray) -> Evaluation:
    """Link loads and the communication-time bound of a plan.

    Parameters
    ----------
    problem : CircuitProblem
    circuits : list of (int, int)
        Node pairs.
    next_hop : numpy.ndarray
        Forwarding tables as an array (``-1`` = no entry).

    Returns
    -------
    Evaluation
        ``congestion_s``, ``uplink_bytes``, loads per link, ...

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.matrix import from_arrays
    >>> from topoplan.problems.circuits.problem import CircuitProblem
    >>> t = load_topology("paper003", ["ocs.nodes_per_switch=1"])
    >>> p = CircuitProblem.build(t, from_arrays(256, [0], [64], [4e6]))   # node 0 -> node 16, both OCS
    >>> nh = np.full((64, 4), -1); nh[0, 1] = 16
    >>> ev = evaluate(p, [(0, 16)], nh)
    >>> ev.ocs_bytes, ev.uplink_bytes, round(ev.congestion_s * 1e3, 3)   # 4 MB at 20 Gbps
    (4000000.0, 0.0, 1.6)
    """
    circuits = [(int(a), int(b)) for a, b in circuits]
    p = problem
    ids = p.link_ids()
    nfix = p.n_fixed_links()
    loads = np.concatenate([p.base_loads(), np.zeros(2 * len(circuits))])
    bw = np.concatenate([p.fixed_link_bw(), np.full(2 * len(circuits), p.ocs_bw_Bps)])
    src, dst, w = p.large_src, p.large_dst, p.large_bytes
    fallback = relayed = direct = 0.0
    max_hops = 0
    if len(w):
        s = p.n_switches
        groups, ginv = np.unique(src * s + p.node_switch[dst], return_inverse=True)
        ginv = ginv.ravel()
        gw = np.bincount(ginv, weights=w, minlength=len(groups))
        r = p.network().relay_routes(groups // s, groups % s, next_hop, circuits)
        loads += np.bincount(r.links, weights=np.repeat(gw, np.diff(r.ptr)), minlength=len(loads))
        max_hops = int(r.hops.n_circuits.max(initial=0))
        relayed = float(gw[r.hops.n_relay_hops > 0].sum())
        e, f = r.end[ginv], r.fallback[ginv]
        deliver = f | (dst != e)       # over the EPS from where the walk ends
        loads += np.bincount(ids["down"][dst[deliver]], weights=w[deliver], minlength=len(loads))
        via = ~f & (dst != e)          # arrived under the destination switch at another node
        loads += np.bincount(ids["up"][e[via]], weights=w[via], minlength=len(loads))
        fallback = float(w[f].sum())
        direct = float(w[~f & (dst == e)].sum())
    t = loads / bw
    t = np.where(np.isfinite(bw), t, 0.0)
    return Evaluation(problem=p, circuits=circuits, loads_B=loads, bw_Bps=bw,
                      congestion_s=float(t.max(initial=0.0)),
                      uplink_bytes=float(loads[ids["uplink_up"]].sum()),
                      ocs_bytes=float(loads[nfix:].sum()), fallback_bytes=fallback, relayed_bytes=relayed,
                      direct_bytes=direct, max_hops=max_hops)


def better(a: Evaluation, b: Evaluation | None, rel_tol: float = 1e-9) -> bool:
    """Is ``a`` lexicographically better than ``b`` (bound first, ties within ``rel_tol``; then uplink bytes)?

    Parameters
    ----------
    a : Evaluation
    b : Evaluation or None
        None: ``a`` is better.
    rel_tol : float, optional

    Returns
    -------
    bool

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.matrix import from_arrays
    >>> from topoplan.problems.circuits.problem import CircuitProblem
    >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=4"])   # OCS nodes 0-3, 16-19, ...
    >>> traffic = from_arrays(64, range(4, 12), range(20, 28), [4e7] * 8)  # non-OCS nodes, switch 0 -> 1
    >>> prob = CircuitProblem.build(topo, traffic, placement=list(range(64)))
    >>> from topoplan.problems.circuits.forwarding import distance_vector
    >>> circuits = [(0, 16), (1, 17)]
    >>> none = evaluate(prob, [], np.full((64, 4), -1))
    >>> two = evaluate(prob, circuits, distance_vector(prob, circuits))
    >>> better(two, none), better(none, two), better(none, None)
    (True, False, True)
    """
    if b is None:
        return True
    if a.congestion_s < b.congestion_s * (1 - rel_tol):
        return True
    if a.congestion_s > b.congestion_s * (1 + rel_tol):
        return False
    return a.uplink_bytes < b.uplink_bytes * (1 - rel_tol) - 1e-9


def floor_s(problem) -> float:
    """Bound no plan can beat: fixed links (non-OCS nodes' own traffic, small-message uplink loads, intra-node).

    Parameters
    ----------
    problem : CircuitProblem

    Returns
    -------
    float
        Seconds.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.matrix import from_arrays
    >>> from topoplan.problems.circuits.problem import CircuitProblem
    >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=4"])   # OCS nodes 0-3, 16-19, ...
    >>> traffic = from_arrays(64, range(4, 12), range(20, 28), [4e7] * 8)  # non-OCS nodes, switch 0 -> 1
    >>> prob = CircuitProblem.build(topo, traffic, placement=list(range(64)))
    >>> floor_s(prob)           # 40 MB over a non-OCS node's 10 Gbps link
    0.032
    """
    p = problem
    own_out, own_in = p.own_out().sum(axis=1), p.own_in().sum(axis=1)
    up = p.base_up_B + own_out
    down = p.base_down_B + own_in
    k = p.ports
    # an OCS node can skip its EPS link only for traffic to/from the switches its circuits reach
    if p.is_ocs.any():
        o = p.ocs_nodes
        top_out = -np.sort(-p.own_out()[o], axis=1)[:, :k].sum(axis=1)
        top_in = -np.sort(-p.own_in()[o], axis=1)[:, :k].sum(axis=1)
        up = up.copy(); down = down.copy()
        up[o] -= top_out
        down[o] -= top_in
    bw = p.node_bw_Bps
    vals = [(up / bw).max(initial=0.0), (down / bw).max(initial=0.0), (p.base_intra_B / p.intra_bw_Bps).max(initial=0.0)]
    if p.uplinks_shared:
        vals += [p.base_uplink_up_B.max(initial=0.0) / p.up_bw_Bps, p.base_uplink_down_B.max(initial=0.0) / p.up_bw_Bps]
    return float(max(vals))
