"""MPI collectives as point-to-point steps, following MPICH's default algorithms and thresholds
(Thakur, Rabenseifner, Gropp 2005).

:func:`schedule` gives the steps one rank runs: in each step it posts its
sends and receives together and moves on when all complete. The steps of
all members match up exactly, so the simulator's replay can run them.
Peers are communicator-local indices.

Algorithms: bcast (binomial for short messages or fewer than 8 ranks;
scatter + recursive-doubling allgather for medium messages on a power of
two; scatter + ring allgather otherwise), reduce (binomial), allreduce
(recursive doubling for short; reduce-scatter + allgather, Rabenseifner,
for long; ranks beyond the largest power of two fold in first), allgather
(recursive doubling on a power of two and short; ring otherwise), alltoall
(isend/irecv spread for short and medium, pairwise exchange for long),
alltoallv (spread), gather and scatter (binomial), reduce_scatter
(pairwise), barrier (dissemination, 0-byte messages). Bruck's algorithms
are replaced by recursive doubling / spread (same partners' volume,
different step count): noted in the README.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from planner.errors import TopoplanError


@dataclass(frozen=True)
class MPICHThresholds:
    """MPICH's default switch-over sizes (bytes)."""

    bcast_short_B: float = 12288
    bcast_long_B: float = 524288
    bcast_min_procs: int = 8
    allreduce_short_B: float = 2048
    allgather_long_B: float = 524288
    alltoall_medium_B: float = 32768


@dataclass
class Step:
    """What one rank sends and receives in one step: ``(peer, bytes)`` pairs."""

    sends: list = field(default_factory=list)
    recvs: list = field(default_factory=list)


def _pof2(p: int) -> int:
    return 1 << (p.bit_length() - 1)


def _binomial_tree(p: int, me: int, root: int):
    """(parent, children in send order) of ``me`` in MPICH's binomial tree rooted at ``root``."""
    rel = (me - root) % p
    parent = None
    mask = 1
    while mask < p:
        if rel & mask:
            parent = ((rel - mask) + root) % p
            break
        mask <<= 1
    children = []
    mask >>= 1
    while mask > 0:
        if rel + mask < p:
            children.append(((rel + mask) + root) % p)
        mask >>= 1
    return parent, children


def _subtree_size(p: int, node_rel: int) -> int:
    """Ranks in the binomial subtree of relative rank ``node_rel`` (itself included)."""
    low = node_rel & -node_rel if node_rel else 1 << (p - 1).bit_length()
    return min(low, p - node_rel)


def _tree_bcast(p, me, root, n):
    parent, children = _binomial_tree(p, me, root)
    steps = []
    if parent is not None:
        steps.append(Step(recvs=[(parent, n)]))
    for c in children:
        steps.append(Step(sends=[(c, n)]))
    return steps


def _tree_reduce(p, me, root, n):
    parent, children = _binomial_tree(p, me, root)
    steps = [Step(recvs=[(c, n)]) for c in reversed(children)]
    if parent is not None:
        steps.append(Step(sends=[(parent, n)]))
    return steps


def _scatter(p, me, root, n, *, block=None):
    """Binomial scatter: the root's data split in p blocks of ``block`` bytes (default n / p)."""
    b = n / p if block is None else block
    parent, children = _binomial_tree(p, me, root)
    steps = []
    if parent is not None:
        rel = (me - root) % p
        steps.append(Step(recvs=[(parent, b * _subtree_size(p, rel))]))
    for c in children:
        steps.append(Step(sends=[(c, b * _subtree_size(p, (c - root) % p))]))
    return steps


def _gather(p, me, root, n):
    parent, children = _binomial_tree(p, me, root)
    steps = [Step(recvs=[(c, n * _subtree_size(p, (c - root) % p))]) for c in reversed(children)]
    if parent is not None:
        steps.append(Step(sends=[(parent, n * _subtree_size(p, (me - root) % p))]))
    return steps


def _ring_allgather(p, me, block):
    right, left = (me + 1) % p, (me - 1) % p
    return [Step(sends=[(right, block)], recvs=[(left, block)]) for _ in range(p - 1)]


def _rd_allgather(p, me, block):
    """Recursive doubling (power of two): the exchanged volume doubles each step."""
    steps, mask, have = [], 1, block
    while mask < p:
        peer = me ^ mask
        steps.append(Step(sends=[(peer, have)], recvs=[(peer, have)]))
        have *= 2
        mask <<= 1
    return steps


def _allgather(p, me, n, th):
    if p & (p - 1) == 0 and n * p < th.allgather_long_B:
        return _rd_allgather(p, me, n)
    return _ring_allgather(p, me, n)


def _allreduce(p, me, n, th):
    pof2 = _pof2(p)
    rem = p - pof2
    steps = []
    # fold: the first 2*rem ranks pair up; odd ones send to even ones and sit out
    if me < 2 * rem:
        if me % 2:
            steps.append(Step(sends=[(me - 1, n)]))
            steps.append(Step(recvs=[(me - 1, n)]))
            return steps
        steps.append(Step(recvs=[(me + 1, n)]))
        newrank = me // 2
    else:
        newrank = me - rem

    def real(r):
        return r * 2 if r < rem else r + rem

    if n <= th.allreduce_short_B or n < pof2:
        mask = 1
        while mask < pof2:
            peer = real(newrank ^ mask)
            steps.append(Step(sends=[(peer, n)], recvs=[(peer, n)]))
            mask <<= 1
    else:  # Rabenseifner: recursive halving reduce-scatter, then recursive doubling allgather
        size = n
        mask = 1
        while mask < pof2:
            size /= 2
            peer = real(newrank ^ mask)
            steps.append(Step(sends=[(peer, size)], recvs=[(peer, size)]))
            mask <<= 1
        mask = pof2 >> 1
        while mask >= 1:
            peer = real(newrank ^ mask)
            steps.append(Step(sends=[(peer, size)], recvs=[(peer, size)]))
            size *= 2
            mask >>= 1
    if me < 2 * rem:
        steps.append(Step(sends=[(me + 1, n)]))
    return steps


def _bcast(p, me, root, n, th):
    if n < th.bcast_short_B or p < th.bcast_min_procs:
        return _tree_bcast(p, me, root, n)
    steps = _scatter(p, me, root, n)
    block = n / p
    if n < th.bcast_long_B and p & (p - 1) == 0:
        return steps + _rd_allgather_rel(p, me, root, block)
    return steps + _ring_allgather(p, me, block)


def _rd_allgather_rel(p, me, root, block):
    rel = (me - root) % p
    steps, mask, have = [], 1, block
    while mask < p:
        peer = ((rel ^ mask) + root) % p
        steps.append(Step(sends=[(peer, have)], recvs=[(peer, have)]))
        have *= 2
        mask <<= 1
    return steps


def _alltoall(p, me, counts, th):
    """Spread (all at once) for short/medium, pairwise exchange for long messages."""
    if max(counts, default=0) <= th.alltoall_medium_B:
        sends = [((me + i) % p, counts[(me + i) % p]) for i in range(1, p)]
        recvs = [((me - i) % p, None) for i in range(1, p)]
        return [Step(sends=sends, recvs=recvs)]
    steps = []
    for i in range(1, p):
        dst, src = (me + i) % p, (me - i) % p
        steps.append(Step(sends=[(dst, counts[dst])], recvs=[(src, None)]))
    return steps


def _barrier(p, me):
    steps, k = [], 1
    while k < p:
        steps.append(Step(sends=[((me + k) % p, 0.0)], recvs=[((me - k) % p, 0.0)]))
        k <<= 1
    return steps


OPERATIONS = ("bcast", "reduce", "allreduce", "alltoall", "alltoallv", "allgather", "allgatherv", "gather",
              "scatter", "reduce_scatter", "barrier")


def schedule(op: str, comm_size: int, me: int, root: int, nbytes: float, *, counts=None,
             thresholds: MPICHThresholds = MPICHThresholds()) -> list[Step]:
    """The steps rank ``me`` of a ``comm_size`` communicator runs for one collective call.

    Parameters
    ----------
    op : one of :data:`OPERATIONS`.
    nbytes : as in the trace format (buffer size; per-destination size for
        alltoall; per-rank contribution for allgather/gather; per-rank block
        for scatter and reduce_scatter; 0 for barrier).
    counts : per-destination bytes for alltoallv (length ``comm_size``).

    Returns
    -------
    list of :class:`Step`; a receive of unknown size (alltoallv) has ``None`` bytes.

    Example
    -------
    >>> [len(s.sends) for s in schedule("bcast", 4, 0, 0, 8)]
    [1, 1]
    """
    p, n = int(comm_size), float(nbytes)
    if p < 1 or not 0 <= me < p:
        raise TopoplanError(f"collective {op}: rank {me} outside a communicator of {p}")
    root = root if 0 <= root < p else 0
    if p == 1:
        return []
    return [Step(list(s.sends), list(s.recvs)) for s in _cached(op, p, me, root, n,
                                                                 tuple(counts) if counts is not None else None,
                                                                 thresholds)]


@lru_cache(maxsize=65536)
def _cached(op, p, me, root, n, counts, th):
    if op == "bcast":
        return _bcast(p, me, root, n, th)
    if op == "reduce":
        return _tree_reduce(p, me, root, n)
    if op == "allreduce":
        return _allreduce(p, me, n, th)
    if op in ("allgather", "allgatherv"):
        return _allgather(p, me, n, th)
    if op == "gather":
        return _gather(p, me, root, n)
    if op == "scatter":
        return _scatter(p, me, root, n * p, block=n)
    if op == "reduce_scatter":
        return _alltoall(p, me, [n] * p, th)
    if op == "barrier":
        return _barrier(p, me)
    if op in ("alltoall", "alltoallv"):
        c = list(counts) if counts is not None else [n] * p
        if len(c) != p:
            raise TopoplanError(f"collective {op}: {len(c)} counts for {p} ranks")
        return _alltoall(p, me, c, th)
    raise TopoplanError(f"unknown collective {op!r} (known: {', '.join(OPERATIONS)})")


def messages(op, comm_size, root, nbytes, *, counts=None, counts_by_rank=None, thresholds=MPICHThresholds()):
    """All point-to-point messages of one call: ``(src, dst, bytes)`` arrays of local indices.

    ``counts`` (alltoallv): per-destination bytes, the same for every rank
    (length comm_size), or one such row per rank (comm_size x comm_size);
    ``counts_by_rank`` is the per-rank form under its older name.

    >>> s, d, b = messages("bcast", 4, 0, 100)
    >>> int(b.sum())
    300
    """
    if counts is not None and counts_by_rank is None:
        c = np.asarray(counts, dtype=float)
        counts_by_rank = c if c.ndim == 2 else np.tile(c, (comm_size, 1))
    src, dst, by = [], [], []
    for me in range(comm_size):
        counts = tuple(counts_by_rank[me].tolist() if hasattr(counts_by_rank[me], "tolist")
                       else counts_by_rank[me]) if counts_by_rank is not None else None
        for st in schedule(op, comm_size, me, root, nbytes, counts=counts, thresholds=thresholds):
            for peer, b in st.sends:
                src.append(me); dst.append(peer); by.append(b)
    return np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64), np.array(by, dtype=np.float64)


def expand_trace_collectives(trace, thresholds: MPICHThresholds = MPICHThresholds()):
    """Every point-to-point message implied by the trace's collective calls, in world ranks.

    Each call of rank r contributes the messages r sends in its schedule.
    Per-destination alltoall(v) rows of one call (same rank, op and t_start)
    are grouped into that call's counts.
    """
    from planner.trace import OP_CODE, OPS

    coll = np.isin(trace.op, [OP_CODE[o] for o in OPERATIONS])
    idx = np.flatnonzero(coll)
    src, dst, by = [], [], []
    a2a = {OP_CODE["alltoall"], OP_CODE["alltoallv"]}
    i = 0
    local_cache: dict = {}
    while i < len(idx):
        k = idx[i]
        r, op, comm = int(trace.rank[k]), int(trace.op[k]), int(trace.comm[k])
        members = trace.members(comm)
        local = local_cache.get(comm)
        if local is None:
            local = local_cache[comm] = {int(w): j for j, w in enumerate(members)}
        counts = None
        if op in a2a and trace.peer[k] >= 0:
            j = i
            while (j + 1 < len(idx) and trace.rank[idx[j + 1]] == r and trace.op[idx[j + 1]] == op
                   and trace.t_start[idx[j + 1]] == trace.t_start[k]):
                j += 1
            rows = idx[i:j + 1]
            c = np.zeros(len(members))
            np.add.at(c, [local[int(x)] for x in trace.peer[rows]], trace.bytes[rows])
            counts = tuple(c.tolist())
            i = j + 1
        else:
            i += 1
        if r not in local:
            continue
        me = local[r]
        root = local.get(int(trace.root[k]), 0)
        name = OPS[op]
        for st in schedule(name, len(members), me, root, float(trace.bytes[k]), counts=counts,
                           thresholds=thresholds):
            for peer, b in st.sends:
                src.append(r); dst.append(int(members[peer])); by.append(b)
    return np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64), np.array(by, dtype=np.float64)
