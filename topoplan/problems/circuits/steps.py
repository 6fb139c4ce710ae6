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
added to the estimate: the latency of the application's longest chain of dependent messages (the latency
clock of :mod:`topoplan.sim.steps`, eager sends going at once as in the simulator: per level of the chain
the slowest EPS route latency of its messages; fixed), and what relays add
to each step's slowest relayed message -- one chunk's serialization at every relay it crosses (pipelined
relays forward a chunk at a time, so a message smaller than a chunk is stored and forwarded whole),
which depends on the plan. A trace that computes between its calls (a recorded one) adds its computation on
the critical path (:func:`topoplan.sim.steps.critical_compute_s`, fixed), so that the step time estimates
the run the simulator replays, computation included, and not its communication alone (FT class C recorded
at 64 ranks on 003's system: 66.6 s of computation on the critical path beside a step time of 0.72 s).

How close the step time comes to the simulated time is measured by ``benchmarks/bench_steps.py`` (the
papers' systems, NPB class B; docs/circuits.md): within 10% for CG, MG and FT and for most plans that
relay; not for IS and FT's heuristic plans that relay (throttled all-to-all batches of small eager
messages: ranks drift apart between batches, the drifted batches load a few uplinks at a time, and the
second half of every all-to-all runs with the uplinks half used: 0.70-0.85x) nor for LU (0.81-1.20x: on 000
the run overlaps the clock's steps; on 001 a rank sends its wavefront planes at once, eagerly, they share
its node link, and the plane the next rank needs first arrives with the last: the pipeline runs as a
sweep of bursts). Both are effects of when each rank runs under sharing; the terms measured for them (the
step time over the latency clock's levels, its chain charged with its route's or its ranks' node
links' load in each level) moved LU or IS on one system and broke them or MG on another
(docs/circuits.md). Charging a relay's delay only on the links its message crosses (so that
a relay off the step's bottleneck costs nothing) was measured and rejected: it fits CG's light relaying
(1.11x -> 1.00x) but lets the ilp choose plans that relay much, which it then underestimates by up to
0.78x (CG on 001-8x32 with 64 OCS nodes: a plan 24% slower than no circuits).

A long trace has many distinct step types (LU's wavefront, FT's all-to-all rounds). For planning they
are merged into at most ``max_types`` groups (:func:`merge_groups`): the lightest group joins the group
whose sum loses least, until few enough are left, so latency-bound steps merge first and heavy steps stay
apart. Merging only adds traffic together, so the step time of merged types is a lower bound of the
unmerged one, and one group is the bulk problem.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from topoplan.core.errors import TopoplanError
from topoplan.problems.circuits.loads import byte_sums

__all__ = ["StepLoads", "step_loads", "merge_groups", "default_max_types", "MAX_STEP_TYPES", "MIN_STEP_TYPES",
           "STEP_GROUP_CELLS"]

# Step groups a circuit problem scores plans by: as many as fit STEP_GROUP_CELLS (group, link) cells, between
# MIN_STEP_TYPES and MAX_STEP_TYPES (default_max_types); the exact model merges them further (to at most
# MIN_STEP_TYPES, fewer when its model would be too large).
MAX_STEP_TYPES = 64
MIN_STEP_TYPES = 24
STEP_GROUP_CELLS = 65_536
# Above this many feature comparisons (groups squared times features: about a second of NumPy), groups with
# the same busiest link and switch pair are merged before the search by loss (merge_groups).
PREMERGE_WORK = 4e8


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
        The fixed latency term: per level of the latency clock's longest chain, its slowest message's EPS route
        latency (the simulator's: links, switch delays, the first packet stored and forwarded at every
        switch); for steps without the chain (:attr:`topoplan.sim.steps.Steps.latency_types` None), per step.
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
    compute_s : float, optional
        The computation on the trace's critical path (:attr:`topoplan.sim.steps.Steps.compute_s`): no plan
        changes it; 0 for a trace without computation.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.sim.steps import trace_steps
    >>> from topoplan.traffic.generators import parse_spec
    >>> from topoplan.problems.circuits import CircuitProblem
    >>> p = CircuitProblem.build(load_topology("paper003"), None, steps=trace_steps(parse_spec("alltoall:np=16,bytes=1MB")))
    >>> sl = p.step_loads
    >>> sl.n_steps, sl.n_types, sl.n_groups <= sl.n_types, sl.merged([0] * sl.n_groups).n_groups
    (15, 15, True, 1)
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
    compute_s: float = 0.0

    @property
    def n_groups(self) -> int:
        return int(self.large_B.shape[0])

    @property
    def fixed_s(self) -> float:
        """The step time's terms no plan changes: the latency term and the computation on the critical path."""
        return float(self.latency_s) + float(self.compute_s)

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
                         self.latency_s, self.type_sizes_B, self.type_count, self.n_steps, self.n_types, self.source,
                         self.compute_s)

    def relay_latency_s(self, extra_s_per_B: np.ndarray, chunk_B: float) -> float:
        """The latency relays add to the steps: per step type, its slowest large message's relay hops times
        the serialization of one chunk (``min(size, chunk_B)``) at each, times the type's count.

        ``extra_s_per_B``: per large pair, the relay hops of its route divided by the bandwidth out of the
        relays (seconds per byte of chunk)."""
        if not len(extra_s_per_B) or not np.any(extra_s_per_B):
            return 0.0
        m = self.type_sizes_B.minimum(chunk_B).multiply(extra_s_per_B.reshape(1, -1)).tocsr()
        return float((m.max(axis=1).toarray().ravel() * self.type_count).sum())


def default_max_types(problem) -> int:
    """Step groups a problem keeps by default: as many as fit :data:`STEP_GROUP_CELLS` (group, link) cells of
    the per-group link loads every plan's step time is computed from, at least :data:`MIN_STEP_TYPES` and at
    most :data:`MAX_STEP_TYPES`. The more groups, the closer the step time of a plan is to its step time over
    all step types (LU class B at 256 ranks, 458 types, no circuits, 001's systems: 24 groups lose 11-15% of
    it, 48 groups 1-2%).

    Parameters
    ----------
    problem : CircuitProblem

    Returns
    -------
    int

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.problems.circuits import CircuitProblem
    >>> from topoplan.traffic.matrix import from_arrays
    >>> p = CircuitProblem.build(load_topology("paper003"), from_arrays(256, [0], [64], [4e6]))
    >>> p.n_fixed_links(), default_max_types(p)
    (200, 64)
    """
    return int(min(MAX_STEP_TYPES, max(MIN_STEP_TYPES, STEP_GROUP_CELLS // max(problem.n_fixed_links(), 1))))


def step_loads(problem, steps, *, max_types: int | None = None) -> StepLoads:
    """The step types of ``steps`` as loads of ``problem`` (a bulk :class:`CircuitProblem`), merged.

    Parameters
    ----------
    problem : CircuitProblem
        Built for the whole traffic of ``steps`` (its large node pairs are the columns of ``large_B``).
    steps : topoplan.sim.steps.Steps
    max_types : int, optional
        Most groups kept (see :func:`merge_groups`); default :func:`default_max_types`.

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
    >>> prob = CircuitProblem.build(load_topology("paper003"), None, steps=trace_steps(tr))
    >>> sl = prob.step_loads
    >>> sl.n_groups, sl.n_steps, bool(np.allclose(sl.large_B.sum(axis=0), prob.large_bytes))
    (1, 2, True)
    """
    p = problem
    n, s = p.n_nodes, p.n_switches
    node = np.asarray(p.placement.rank_to_node, dtype=np.int64)
    sw = p.node_switch
    K, P = steps.n_types, len(p.large_bytes)
    # every type's messages at once, each weighted by its type's count (one pass, whatever the types)
    kind = np.concatenate([np.full(len(t.src), k, dtype=np.int64) for k, t in enumerate(steps.types)]) \
        if K else np.zeros(0, np.int64)
    cat = (lambda f: np.concatenate([f(t) for t in steps.types]) if K else np.zeros(0))  # noqa: E731
    src, dst = cat(lambda t: t.src).astype(np.int64), cat(lambda t: t.dst).astype(np.int64)
    size = cat(lambda t: t.msg_bytes).astype(np.float64)
    cnt = np.asarray(steps.count, dtype=np.float64)
    by = cat(lambda t: t.bytes).astype(np.float64) * cnt[kind]
    a, b = node[src], node[dst]
    same_node, same_sw = a == b, sw[a] == sw[b]
    large = (size >= p.threshold_B) & ~same_sw
    eps = ~same_node & ~large
    cross = eps & ~same_sw
    intra_m = same_node & (src != dst)

    def per(mask, where, width):
        return byte_sums(kind[mask] * width + where[mask], by[mask], K * width).reshape(K, width)

    up, down, intra = per(eps, a, n), per(eps, b, n), per(intra_m, a, n)
    uu, ud = per(cross, sw[a], s), per(cross, sw[b], s)
    keys = p.large_src * n + p.large_dst            # sorted: the problem's pairs come from np.unique
    mk = a[large] * n + b[large]
    cols = np.searchsorted(keys, mk)
    if len(mk) and (cols >= P).any() or len(mk) and (keys[np.minimum(cols, P - 1)] != mk).any():
        raise TopoplanError(f"field 'steps': found in other traffic than the problem's ({steps.source})")
    kl = kind[large]
    large_B = byte_sums(kl * P + cols, by[large], K * P).reshape(K, P)
    cell, first = np.unique(kl * P + cols, return_index=True) if len(kl) else (np.zeros(0, np.int64), None)
    biggest = np.zeros(len(cell))
    if len(cell):
        np.maximum.at(biggest, np.searchsorted(cell, kl * P + cols), size[large])
    # SciPy's sparse matrices are imported here, not with the module: importing them takes 0.2-0.3 s (SciPy's
    # array API layer loads NumPy's f2py, testing and ma), and only a trace's steps need them
    from scipy.sparse import csr_matrix

    sizes = csr_matrix((biggest, (cell // max(P, 1), cell % max(P, 1))), shape=(K, P))
    # the latency term: per level of the latency clock's longest chain (eager sends go at once, as in the
    # simulator: a pipeline of eager messages pays its latency once, not at every step), its slowest message's
    # route latency; without the chain, per step
    if steps.latency_types is not None:
        latency_s = _levels_latency_s(p, steps.latency_types, steps.latency_count)
    else:
        latency_s = _levels_latency_s(p, steps.types, cnt)
    sl = StepLoads(up, down, intra, uu, ud, large_B, latency_s, sizes, cnt,
                   int(steps.n_steps), K, steps.source, float(steps.compute_s))
    return sl.merged(merge_groups(p, sl, default_max_types(p) if max_types is None else max_types))


def _route_latency_s(problem, src, dst, size) -> np.ndarray:
    """Per rank message, its route latency over the EPS under the problem's placement: the simulator's own (link
    latencies, switch delays, the first packet stored and forwarded at every switch); 0 on its own node."""
    p = problem
    node = np.asarray(p.placement.rank_to_node, dtype=np.int64)
    a, b = node[np.asarray(src, dtype=np.int64)], node[np.asarray(dst, dtype=np.int64)]
    size = np.asarray(size, dtype=np.float64)
    out = np.zeros(len(a))
    off = a != b
    if off.any():
        net = p.network()
        route_key, inv = np.unique(np.stack([a[off], b[off], size[off]]), axis=1, return_inverse=True)
        ptr, links = net.eps_routes(route_key[0].astype(np.int64), route_key[1].astype(np.int64))
        out[off] = net.route_latency(ptr, links, route_key[2])[inv.ravel()]
    return out


def _levels_latency_s(problem, types, count) -> float:
    """Sum over levels (``types``, each ``count`` times) of their slowest message's route latency."""
    if not types:
        return 0.0
    kind = np.concatenate([np.full(len(t.src), k, dtype=np.int64) for k, t in enumerate(types)])
    lat = _route_latency_s(problem, np.concatenate([t.src for t in types]), np.concatenate([t.dst for t in types]),
                           np.concatenate([t.msg_bytes for t in types]))
    per = np.zeros(len(types))
    np.maximum.at(per, kind, lat)
    return float((per * np.asarray(count, dtype=np.float64)).sum())


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
    (one circuit's worth of each). While there are too many groups, the group with the least weight (its
    largest feature) joins the group whose sum loses least (``max(a) + max(b) - max(a + b)`` in each block):
    light steps (latency-bound ones, a few bytes each) join first, and heavy steps stay apart as long as the
    limit allows. Groups are not merged before that by their busiest link and switch pair alone, unless
    there are so many that the pairwise search would be slow (:data:`PREMERGE_WORK`): such a merge loses
    nothing on the EPS alone and on one circuit per switch pair, but under a plan that relays, steps with
    the same busiest EPS link can load different relays, and their sum's bottleneck falls below the sum of
    theirs (FT class B on 003's system with 8 OCS nodes: the ilp plan's step time 72 ms over 16 such groups,
    109 ms over its 41 step types, which 24 groups merged by loss alone keep exactly).

    Parameters
    ----------
    problem : CircuitProblem
    sl : StepLoads
    max_types : int

    Returns
    -------
    numpy.ndarray of int64
        The new group of every group, numbered by first occurrence.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.sim.steps import trace_steps
    >>> from topoplan.traffic.generators import parse_spec
    >>> from topoplan.problems.circuits import CircuitProblem
    >>> p = CircuitProblem.build(load_topology("paper003"), None, steps=trace_steps(parse_spec("alltoall:np=16,bytes=1MB")),
    ...                          max_step_types=100)
    >>> g = merge_groups(p, p.step_loads, 3)
    >>> len(g) == p.step_loads.n_groups, int(g.max()) + 1 <= 3
    (True, True)
    """
    K = sl.n_groups
    if K <= max(1, int(max_types)):
        return np.arange(K, dtype=np.int64)
    E, Q = _features(problem, sl)
    if K * K * (E.shape[1] + Q.shape[1]) > PREMERGE_WORK:
        pair_arg = np.where(Q.max(axis=1) > 0, Q.argmax(axis=1), -1)
        _, sig = np.unique(np.stack([E.argmax(axis=1), pair_arg], axis=1), axis=0, return_inverse=True)
        sig = sig.ravel()
    else:
        sig = np.arange(K)
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
