"""The circuit problem's view of an application's steps: per step type, the loads a plan does and does not move.

:class:`~topoplan.sim.steps.Steps` gives the step types of a trace (rank messages and how often each type
occurs). For circuit planning each type becomes, under the problem's placement and large-message
threshold, what the bulk problem holds for the whole traffic: the plan-independent loads (small,
intra-switch and intra-node messages on their EPS links) and the large inter-switch bytes of every node
pair of the problem's list, each type's traffic times its count. Their sum over the types is the whole
traffic's, so a plan's *step time*

    sum over step types k of  max over links l of  load(k, l) / bandwidth(l)

is at least its bulk communication-time bound (the one-bulk-phase objective) and equals it for one step
type. It is a lower bound on the time of the steps run one after another (separated as if by barriers,
each at its bottleneck), and an estimate of the application's communication time otherwise (steps that
overlap in a real run can take less; dynamic effects of sharing can take more). Two latency terms are
added to the estimate: each step's slowest EPS route latency times its count (fixed), and what relays add
to each step's slowest relayed message -- one chunk's serialization at every relay it crosses (pipelined
relays forward a chunk at a time, so a message smaller than a chunk is stored and forwarded whole),
which depends on the plan.

A long trace has many distinct step types (LU's wavefront, FT's all-to-all rounds). For planning they
are merged into at most ``max_types`` groups (:func:`merge_groups`): types with the same busiest link and
the same busiest switch pair merge first (on the EPS alone and on one circuit that costs nothing: the
bottleneck of their sum is the sum of their bottlenecks), then the pairs that lose least. Merging only adds traffic together, so the step time of
merged types is a lower bound of the unmerged one, and one group is the bulk problem.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.sparse import csr_matrix

from topoplan.core.errors import TopoplanError
from topoplan.problems.circuits.loads import node_loads

__all__ = ["StepLoads", "step_loads", "merge_groups", "MAX_STEP_TYPES"]

MAX_STEP_TYPES = 24   # step groups a circuit problem plans with (the exact model may merge further)


@dataclass(frozen=True)
class StepLoads:
    """Per step group, the loads of a circuit problem (bytes; each group's traffic times its count).

    Parameters
    ----------
    base_up_B, base_down_B, base_intra_B : numpy.ndarray
        K x N: plan-independent bytes on node links.
    base_uplink_up_B, base_uplink_down_B : numpy.ndarray
        K x S: the same on switch uplinks.
    large_B : numpy.ndarray
        K x P: large inter-switch bytes of every node pair of the problem's list (``large_src``,
        ``large_dst``).
    latency_s : float
        The fixed latency term: per step, its slowest EPS route latency (the simulator's: links, switch delays,
        the first packet stored and forwarded at every switch), summed over all steps.
    type_sizes_B : scipy.sparse.csr_matrix
        Types x large pairs (before merging): the largest message of the pair in one step of the type.
    type_count : numpy.ndarray
        Occurrences of each type.
    n_steps : int
        Steps of the trace.
    n_types : int
        Distinct step types before merging.
    source : str
        What the steps were found in.
    """

    base_up_B: np.ndarray
    base_down_B: np.ndarray
    base_intra_B: np.ndarray
    base_uplink_up_B: np.ndarray
    base_uplink_down_B: np.ndarray
    large_B: np.ndarray
    latency_s: float
    type_sizes_B: object
    type_count: np.ndarray
    n_steps: int
    n_types: int
    source: str = ""

    @property
    def n_groups(self) -> int:
        return int(self.large_B.shape[0])

    def merged(self, groups) -> "StepLoads":
        """Groups of groups summed: ``groups[i]`` is the new group of old group ``i``."""
        g = np.asarray(groups, dtype=np.int64)
        k = int(g.max(initial=-1)) + 1

        def add(a):
            out = np.zeros((k,) + a.shape[1:])
            np.add.at(out, g, a)
            return out

        return StepLoads(add(self.base_up_B), add(self.base_down_B), add(self.base_intra_B),
                         add(self.base_uplink_up_B), add(self.base_uplink_down_B), add(self.large_B),
                         self.latency_s, self.type_sizes_B, self.type_count, self.n_steps, self.n_types, self.source)

    def relay_latency_s(self, extra_s_per_B: np.ndarray, chunk_B: float) -> float:
        """The latency relays add to the steps: per step type, its slowest large message's relay hops times
        the serialization of one chunk (``min(size, chunk_B)``) at each, times the type's count.

        ``extra_s_per_B``: per large pair, the relay hops of its route divided by the bandwidth out of the
        relays (seconds per byte of chunk)."""
        if not len(extra_s_per_B) or not np.any(extra_s_per_B):
            return 0.0
        m = self.type_sizes_B.minimum(chunk_B).multiply(extra_s_per_B.reshape(1, -1)).tocsr()
        return float((m.max(axis=1).toarray().ravel() * self.type_count).sum())


def step_loads(problem, steps, *, max_types: int = MAX_STEP_TYPES) -> StepLoads:
    """The step types of ``steps`` as loads of ``problem`` (a bulk :class:`CircuitProblem`), merged.

    Parameters
    ----------
    problem : CircuitProblem
        Built for the whole traffic of ``steps`` (its large node pairs are the columns of ``large_B``).
    steps : topoplan.sim.steps.Steps
    max_types : int, optional
        Most groups kept (see :func:`merge_groups`).

    Returns
    -------
    StepLoads

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.sim.steps import trace_steps
    >>> from topoplan.traffic.generators import parse_spec
    >>> from topoplan.problems.circuits import CircuitProblem
    >>> tr = parse_spec("neighbor2d:rows=16,cols=16,bytes=4MB,iters=2")
    >>> prob = CircuitProblem.build(load_topology("paper003"), steps=trace_steps(tr))
    >>> sl = prob.step_loads
    >>> sl.n_groups, sl.n_steps, bool(np.allclose(sl.large_B.sum(axis=0), prob.large_bytes))
    (1, 2, True)
    """
    p = problem
    n, s = p.n_nodes, p.n_switches
    node = np.asarray(p.placement.rank_to_node, dtype=np.int64)
    key_of = {int(k): i for i, k in enumerate((p.large_src * n + p.large_dst).tolist())}
    K = steps.n_types
    up, down, intra = np.zeros((K, n)), np.zeros((K, n)), np.zeros((K, n))
    uu, ud = np.zeros((K, s)), np.zeros((K, s))
    large = np.zeros((K, len(p.large_bytes)))
    lat_type = np.zeros(K)
    ts_rows, ts_cols, ts_vals = [], [], []
    net = p.network()
    for k, (t, c) in enumerate(zip(steps.types, steps.count.tolist())):
        ld = node_loads(t, node, p.node_switch, n, s, p.threshold_B)
        up[k], down[k], intra[k] = ld["up"] * c, ld["down"] * c, ld["intra"] * c
        uu[k], ud[k] = ld["uplink_up"] * c, ld["uplink_down"] * c
        try:
            cols = np.array([key_of[int(x)] for x in (ld["large_src"] * n + ld["large_dst"]).tolist()],
                            dtype=np.int64)
        except KeyError:
            raise TopoplanError(f"field 'steps': found in other traffic than the problem's ({steps.source})") from None
        if len(cols):
            np.add.at(large[k], cols, ld["large_bytes"] * c)
            ts_rows.append(np.full(len(cols), k))
            ts_cols.append(cols)
            ts_vals.append(ld["large_max_B"])
        a, b = node[t.src], node[t.dst]
        off = a != b
        if off.any():
            ptr, links = net.eps_routes(a[off], b[off])
            # the simulator's own route latency: link latencies, switch delays and the store-and-forward of a
            # message's first packet at every switch (what a small message's step mostly costs)
            lat = net.route_latency(ptr, links, t.msg_bytes[off]) if len(links) else np.zeros(0)
            lat_type[k] = float(lat.max(initial=0.0))
    sizes = csr_matrix((np.concatenate(ts_vals) if ts_vals else np.zeros(0),
                        (np.concatenate(ts_rows) if ts_rows else np.zeros(0, np.int64),
                         np.concatenate(ts_cols) if ts_cols else np.zeros(0, np.int64))), shape=(K, len(p.large_bytes)))
    sl = StepLoads(up, down, intra, uu, ud, large, float((lat_type * steps.count).sum()), sizes,
                   np.asarray(steps.count, dtype=np.float64), int(steps.n_steps), K, steps.source)
    return sl.merged(merge_groups(p, sl, max_types))


def _features(problem, sl: StepLoads):
    """Per group, its times on the EPS-only network (node links, uplinks) and, a second block, per switch pair
    over one circuit."""
    p = problem
    n, s = p.n_nodes, p.n_switches
    src, dst = p.large_src, p.large_dst
    sa, sb = p.node_switch[src], p.node_switch[dst]
    K = sl.n_groups
    up = sl.base_up_B.copy()
    down = sl.base_down_B.copy()
    uu, ud = sl.base_uplink_up_B.copy(), sl.base_uplink_down_B.copy()
    pair = np.zeros((K, s * s))
    for k in range(K):
        w = sl.large_B[k]
        up[k] += np.bincount(src, weights=w, minlength=n)
        down[k] += np.bincount(dst, weights=w, minlength=n)
        uu[k] += np.bincount(sa, weights=w, minlength=s)
        ud[k] += np.bincount(sb, weights=w, minlength=s)
        pair[k] = np.bincount(np.minimum(sa, sb) * s + np.maximum(sa, sb), weights=w, minlength=s * s)
    bw = p.node_bw_Bps
    parts = [up / bw, down / bw, sl.base_intra_B / p.intra_bw_Bps]
    if p.uplinks_shared:
        parts += [uu / p.up_bw_Bps, ud / p.up_bw_Bps]
    return np.concatenate(parts, axis=1), pair / p.ocs_bw_Bps


def merge_groups(problem, sl: StepLoads, max_types: int) -> np.ndarray:
    """New group of every group of ``sl``: at most ``max_types`` groups, merged where it loses least.

    Features (:func:`_features`) come in two blocks: the EPS-only network's links, and the switch pairs
    (one circuit's worth of each). Groups with the same busiest link and the same busiest switch pair merge
    first: on the EPS alone, and on any one circuit, that loses nothing of the step time (the bottleneck of
    their sum is the sum of their bottlenecks). Then, while too many, the group with the least weight (its
    largest feature) joins the group whose sum loses least (``max(a) + max(b) - max(a + b)`` in each block).

    Parameters
    ----------
    problem : CircuitProblem
    sl : StepLoads
    max_types : int

    Returns
    -------
    numpy.ndarray of int64
        The new group of every group, numbered by first occurrence.
    """
    K = sl.n_groups
    if K <= 1:
        return np.zeros(K, dtype=np.int64)
    E, Q = _features(problem, sl)
    pair_arg = np.where(Q.max(axis=1) > 0, Q.argmax(axis=1), -1)
    _, sig = np.unique(np.stack([E.argmax(axis=1), pair_arg], axis=1), axis=0, return_inverse=True)
    sig = sig.ravel()
    G = int(sig.max()) + 1
    VE, VQ = np.zeros((G, E.shape[1])), np.zeros((G, Q.shape[1]))
    np.add.at(VE, sig, E)
    np.add.at(VQ, sig, Q)
    owner = np.arange(G)
    alive = np.ones(G, dtype=bool)

    def top(V, ids):
        return V[ids].max(axis=1) if V.shape[1] else np.zeros(len(ids))

    while alive.sum() > max(1, int(max_types)):
        ids = np.flatnonzero(alive)
        te, tq = top(VE, ids), top(VQ, ids)
        i = int(np.argmin(np.maximum(te, tq)))
        a, rest = ids[i], np.delete(np.arange(len(ids)), i)
        others = ids[rest]
        loss = te[rest] + te[i] - top(VE[others] + VE[a], np.arange(len(others)))
        if VQ.shape[1]:
            loss = loss + tq[rest] + tq[i] - (VQ[others] + VQ[a]).max(axis=1)
        b = others[int(np.argmin(loss))]
        VE[b] += VE[a]
        VQ[b] += VQ[a]
        alive[a] = False
        owner[owner == a] = b
    _, groups = np.unique(owner[sig], return_inverse=True)
    # number the groups by first occurrence (stable across runs)
    first = {}
    out = np.empty(K, dtype=np.int64)
    for i, g in enumerate(groups.tolist()):
        out[i] = first.setdefault(g, len(first))
    return out
