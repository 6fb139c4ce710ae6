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

from topoplan.sim.simmodel import DEFAULT_RELAY_CHUNK_B

__all__ = ["Evaluation", "evaluate", "evaluate_no_circuits", "better", "floor_s", "step_link_times", "plan_pair_links",
           "RELAY_CHUNK_B"]

# The chunk a pipelined relay forwards at a time (the default network model's, topoplan.sim.simmodel): a
# relayed message pays one chunk's serialization at every relay (the step time's relay latency term).
RELAY_CHUNK_B = DEFAULT_RELAY_CHUNK_B


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
    step_times_s: np.ndarray | None = None
    step_s: float | None = None
    step_relay_s: float = 0.0

    @property
    def objective_s(self) -> float:
        """What the circuit methods minimize: the step time with steps (fixed latency term included), else
        the bulk bound ``congestion_s``."""
        return self.congestion_s if self.step_s is None else self.step_s

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
        out = {
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
        if self.step_s is not None:
            sl = p.step_loads
            out.update(step_time_s=self.step_s, step_latency_s=sl.latency_s, step_compute_s=sl.compute_s,
                       step_relay_s=self.step_relay_s,
                       step_bottlenecks_s=float(self.step_times_s.sum()), steps=sl.n_steps,
                       step_types=sl.n_types, step_groups=sl.n_groups,
                       step_bottleneck_max_s=float(self.step_times_s.max(initial=0.0)))
        return out


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
    n_links = nfix + 2 * len(circuits)
    loads = np.concatenate([p.base_loads(), np.zeros(2 * len(circuits))])
    bw = np.concatenate([p.fixed_link_bw(), np.full(2 * len(circuits), p.ocs_bw_Bps)])
    src, dst, w = p.large_src, p.large_dst, p.large_bytes
    fallback = relayed = direct = 0.0
    max_hops = 0
    pair_links = None
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
        if p.step_loads is not None:
            pair_links = _pair_links(p, ginv, r, deliver, via, e, n_links)
            relay_hops = r.hops.n_relay_hops[ginv]
    t = loads / bw
    t = np.where(np.isfinite(bw), t, 0.0)
    step_times = step_s = None
    relay_s = 0.0
    if p.step_loads is not None:
        sl = p.step_loads
        step_times = step_link_times(p, pair_links, bw).max(axis=1, initial=0.0)
        if pair_links is not None and circuits:
            out_bw = min(p.ocs_bw_Bps, float(p.node_bw_Bps[p.is_ocs].min(initial=np.inf)))
            relay_s = sl.relay_latency_s(relay_hops / out_bw, RELAY_CHUNK_B)
        step_s = float(step_times.sum()) + sl.fixed_s + relay_s
    return Evaluation(problem=p, circuits=circuits, loads_B=loads, bw_Bps=bw,
                      congestion_s=float(t.max(initial=0.0)),
                      uplink_bytes=float(loads[ids["uplink_up"]].sum()),
                      ocs_bytes=float(loads[nfix:].sum()), fallback_bytes=fallback, relayed_bytes=relayed,
                      direct_bytes=direct, max_hops=max_hops, step_times_s=step_times, step_s=step_s,
                      step_relay_s=relay_s)


def _pair_links(p, ginv, r, deliver, via, end, n_links):
    """Sparse incidence (large pair x link) of every large pair's route under the plan: its group's walk,
    the delivery from where the walk ends, and the hop from the arrival node to the destination's switch."""
    from scipy.sparse import csr_matrix

    ids = p.link_ids()
    P = len(ginv)
    lens = np.diff(r.ptr)[ginv]
    rows = [np.repeat(np.arange(P), lens)]
    starts = r.ptr[:-1][ginv]
    cols = [r.links[np.repeat(starts, lens) + (np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens))]]
    rows += [np.flatnonzero(deliver), np.flatnonzero(via)]
    cols += [ids["down"][p.large_dst[deliver]], ids["up"][end[via]]]
    rr, cc = np.concatenate(rows), np.concatenate(cols).astype(np.int64)
    return csr_matrix((np.ones(len(rr)), (rr, cc)), shape=(P, n_links))


def plan_pair_links(problem, circuits, next_hop):
    """Sparse incidence (large pair x link) of every large pair's route under a plan (None: no large pairs).

    Parameters
    ----------
    problem : CircuitProblem
    circuits : sequence of (int, int)
    next_hop : numpy.ndarray

    Returns
    -------
    scipy.sparse.csr_matrix or None

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.matrix import from_arrays
    >>> from topoplan.problems.circuits.problem import CircuitProblem
    >>> p = CircuitProblem.build(load_topology("paper003", ["ocs.nodes_per_switch=1"]), from_arrays(256, [0], [64], [4e6]))
    >>> nh = np.full((64, 4), -1); nh[0, 1] = 16
    >>> m = plan_pair_links(p, [(0, 16)], nh)          # node 0 -> node 16 over their circuit
    >>> m.shape[0], [p.link_name(int(l), [(0, 16)]) for l in m.indices]
    (1, ['node0000=>node0016'])
    """
    p = problem
    if not len(p.large_bytes):
        return None
    circuits = [(int(a), int(b)) for a, b in circuits]
    s = p.n_switches
    dst = p.large_dst
    groups, ginv = np.unique(p.large_src * s + p.node_switch[dst], return_inverse=True)
    ginv = ginv.ravel()
    r = p.network().relay_routes(groups // s, groups % s, next_hop, circuits)
    e, f = r.end[ginv], r.fallback[ginv]
    return _pair_links(p, ginv, r, f | (dst != e), ~f & (dst != e), e, p.n_fixed_links() + 2 * len(circuits))


def step_link_times(problem, pair_links, bw_Bps) -> np.ndarray:
    """Per step group and link, seconds of traffic (``K x links``; unshared links count 0).

    Parameters
    ----------
    problem : CircuitProblem
        With ``step_loads``.
    pair_links : scipy.sparse matrix or None
        Large pair x link incidence of a plan's routes (None: no large traffic).
    bw_Bps : numpy.ndarray
        Per link (circuits last).

    Returns
    -------
    numpy.ndarray

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.problems.circuits.problem import CircuitProblem
    >>> from topoplan.sim.steps import trace_steps
    >>> from topoplan.traffic.generators import parse_spec
    >>> p = CircuitProblem.build(load_topology("paper003"), None, steps=trace_steps(parse_spec("ring:np=8,bytes=1MB,iters=2")))
    >>> t = step_link_times(p, None, p.fixed_link_bw())      # the loads no plan moves (no large pairs here)
    >>> t.shape == (p.step_loads.n_groups, p.n_fixed_links()), round(float(t.max()) * 1e3, 3)
    (True, 0.8)
    """
    p = problem
    sl = p.step_loads
    ids = p.link_ids()
    K, L = sl.n_groups, len(bw_Bps)
    loads = np.zeros((K, L))
    for key, arr in (("up", sl.base_up_B), ("down", sl.base_down_B), ("intra", sl.base_intra_B),
                     ("uplink_up", sl.base_uplink_up_B), ("uplink_down", sl.base_uplink_down_B)):
        loads[:, ids[key]] += arr
    if pair_links is not None:
        loads += np.asarray((pair_links.T @ sl.large_B.T).T)
    inv = np.where(np.isfinite(bw_Bps), 1.0 / bw_Bps, 0.0)
    return loads * inv


def evaluate_no_circuits(problem) -> Evaluation:
    """:func:`evaluate` of the plan without circuits: every large message on the EPS.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.problems.circuits.problem import CircuitProblem, solve
    >>> from topoplan.traffic.matrix import from_arrays
    >>> p = CircuitProblem.build(load_topology("paper003"), from_arrays(256, [0], [64], [4e6]))   # to node 16
    >>> ev = evaluate_no_circuits(p)
    >>> ev.uplink_bytes, ev.objective_s == solve(p, "none").objective
    (4000000.0, True)
    """
    return evaluate(problem, [], np.full((problem.n_nodes, problem.n_switches), -1, dtype=np.int64))


def better(a: Evaluation, b: Evaluation | None, rel_tol: float = 1e-9) -> bool:
    """Is ``a`` lexicographically better than ``b`` (bound first, ties within ``rel_tol``; then uplink bytes; then,
    for plans scored by the step time, the bytes on all links together)?

    The last key separates plans of an application's steps that tie on both (symmetric plans: the same
    bottleneck in every step): the one whose routes cross fewer links -- circuits that end at their messages'
    destinations rather than at a node that delivers them over the EPS -- leaves more room to the steps that
    overlap in a run (MG class B, 256 ranks, 003 with 32 OCS nodes: two plans of step time 5.33 ms and the
    same uplink bytes put 835 MB and 842 MB on the links, and simulate 5.80 ms and 6.10 ms). Plans of one
    bulk phase keep the first of equals (their bound is what the default model simulates).

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
    if a.objective_s < b.objective_s * (1 - rel_tol):
        return True
    if a.objective_s > b.objective_s * (1 + rel_tol):
        return False
    if a.uplink_bytes < b.uplink_bytes * (1 - rel_tol) - 1e-9:
        return True
    if a.uplink_bytes > b.uplink_bytes * (1 + rel_tol) + 1e-9:
        return False
    if a.step_s is None or b.step_s is None:
        return False
    return float(a.loads_B.sum()) < float(b.loads_B.sum()) * (1 - rel_tol) - 1e-9


def floor_s(problem) -> float:
    """Bound no plan can beat: fixed links (non-OCS nodes' own traffic, small-message uplink loads, intra-node);
    with steps, the sum over step groups of each group's floor plus the fixed latency term.

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
    if p.step_loads is None:
        return _floor(p, p.own_out(), p.own_in(), p.base_up_B, p.base_down_B, p.base_intra_B,
                      p.base_uplink_up_B, p.base_uplink_down_B)
    sl = p.step_loads
    sw_dst, sw_src = p.node_switch[p.large_dst], p.node_switch[p.large_src]
    total = sl.fixed_s
    for k in range(sl.n_groups):
        own_out = np.zeros((p.n_nodes, p.n_switches))
        own_in = np.zeros((p.n_nodes, p.n_switches))
        np.add.at(own_out, (p.large_src, sw_dst), sl.large_B[k])
        np.add.at(own_in, (p.large_dst, sw_src), sl.large_B[k])
        total += _floor(p, own_out, own_in, sl.base_up_B[k], sl.base_down_B[k], sl.base_intra_B[k],
                        sl.base_uplink_up_B[k], sl.base_uplink_down_B[k])
    return float(total)


def _floor(p, own_out_m, own_in_m, base_up, base_down, base_intra, base_uu, base_ud) -> float:
    """The fixed-link floor of one traffic (the whole, or one step group)."""
    up = base_up + own_out_m.sum(axis=1)
    down = base_down + own_in_m.sum(axis=1)
    k = p.ports
    # an OCS node can skip its EPS link only for traffic to/from the switches its circuits reach
    if p.is_ocs.any():
        o = p.ocs_nodes
        up = up.copy(); down = down.copy()
        up[o] -= -np.sort(-own_out_m[o], axis=1)[:, :k].sum(axis=1)
        down[o] -= -np.sort(-own_in_m[o], axis=1)[:, :k].sum(axis=1)
    bw = p.node_bw_Bps
    vals = [(up / bw).max(initial=0.0), (down / bw).max(initial=0.0), (base_intra / p.intra_bw_Bps).max(initial=0.0)]
    if p.uplinks_shared:
        vals += [base_uu.max(initial=0.0) / p.up_bw_Bps, base_ud.max(initial=0.0) / p.up_bw_Bps]
    return float(max(vals))
