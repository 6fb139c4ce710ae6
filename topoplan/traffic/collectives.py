"""MPI collectives as point-to-point messages, with MPICH's default algorithms and thresholds.

The algorithms and switch-over sizes are those of MPICH's intra-communicator
``*_intra_auto`` selection (Thakur, Rabenseifner and Gropp, "Optimization of
Collective Communication Operations in MPICH", IJHPCA 2005; MPICH 3.x/4.x
sources), for built-in commutative reduction operations and contiguous data:

========================  ==========================================================================
bcast                     binomial tree if ``n < bcast_short_B`` or ``p < bcast_min_procs``; else a
                          binomial scatter of ``ceil(n/p)``-byte chunks followed by a recursive-doubling
                          allgather (``n < bcast_long_B`` and ``p`` a power of two) or a ring allgather
reduce                    binomial tree; Rabenseifner (recursive-halving reduce-scatter + binomial
                          gather) if ``n > reduce_short_B`` and count >= pof2
allreduce                 recursive doubling if ``n <= allreduce_short_B`` or count < pof2; else
                          Rabenseifner (reduce-scatter + recursive-doubling allgather). Ranks beyond
                          the largest power of two pof2 fold in first (even ranks < 2*rem send to
                          rank+1) and get the result at the end
allgather(v)              recursive doubling (total < ``allgather_long_B``, p a power of two), Bruck
                          (total < ``allgather_short_B``), ring otherwise
alltoall                  Bruck (``n <= alltoall_short_B`` and ``p >= alltoall_min_procs``), isend/irecv
                          spread in batches of ``alltoall_throttle`` (``n <= alltoall_medium_B``),
                          pairwise exchange (XOR partners on a power of two) otherwise
alltoallv                 isend/irecv spread in batches of ``alltoall_throttle`` (MPICH's only
                          non-in-place alltoallv algorithm)
gather, scatter           binomial tree
reduce_scatter            recursive halving (total < ``reduce_scatter_long_B``), pairwise otherwise
barrier                   dissemination (0-byte messages)
========================  ==========================================================================

:func:`schedule` gives the steps one member runs. In a step a rank posts all
its sends and receives together and starts the next step when all of them
have completed; the steps of all members match up exactly (every send
``a -> b`` of ``k`` bytes has the receive of ``k`` bytes from ``a`` in ``b``'s
steps). :func:`messages` lists the messages of a whole call and
:func:`expand_trace_collectives` those of every collective call in a trace.

Not modelled: MPICH's SMP-aware (node-local) variants, the pipelining of long
ring allgatherv messages, non-commutative and user-defined operations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

import numpy as np

from topoplan.core.errors import TopoplanError
from topoplan.core.units import is_ascii_int, parse_size
from topoplan.traffic import limits
from topoplan.traffic.trace import OPS, op_codes, per_destination_calls

__all__ = ["OPERATIONS", "ROOTED", "PEER_STEP_OPS", "BCAST_ALGORITHMS", "MPICHThresholds", "Step",
           "alltoall_algorithm", "allgather_algorithm", "bcast_algorithm", "bcast_tree", "schedule", "messages",
           "expand_trace_collectives", "peer_messages", "peer_step_messages",
           "check_peer_step_messages"]

OPERATIONS = ("bcast", "reduce", "allreduce", "alltoall", "alltoallv", "allgather", "allgatherv", "gather",
              "scatter", "reduce_scatter", "barrier")
ROOTED = ("bcast", "reduce", "gather", "scatter")
PEER_STEP_OPS = ("alltoall", "allgather", "bcast", "reduce_scatter")   # algorithms with a step per peer


@dataclass(frozen=True)
class MPICHThresholds:
    """MPICH's default algorithm switch-over points (bytes unless noted; MPIR_CVAR_* defaults).

    ``elem_size_B`` is the datatype size assumed when turning a byte count
    into an MPI element count (Rabenseifner needs ``count >= pof2`` and splits
    the buffer in whole elements); for a byte count it does not divide, the
    largest size dividing both is used (4116 bytes: 1029 ints).

    Parameters
    ----------
    bcast_short_B, ..., elem_size_B : the switch-over points (fields below).

    Examples
    --------
    >>> MPICHThresholds().bcast_short_B
    12288
    >>> MPICHThresholds(alltoall_throttle=0).alltoall_throttle   # post every isend/irecv at once
    0
    """

    bcast_short_B: int = 12288
    bcast_long_B: int = 524288
    bcast_min_procs: int = 8
    reduce_short_B: int = 2048
    allreduce_short_B: int = 2048
    allgather_short_B: int = 81920
    allgather_long_B: int = 524288
    alltoall_short_B: int = 256
    alltoall_medium_B: int = 32768
    alltoall_min_procs: int = 8
    alltoall_throttle: int = 32
    reduce_scatter_long_B: int = 524288
    elem_size_B: int = 8

    @classmethod
    def from_options(cls, options, *, where: str = "mpich") -> "MPICHThresholds":
        """Build from ``FIELD=VALUE`` texts (the command line's ``--mpich``) or a mapping of fields.

        A field ending in ``_B`` takes a size (``32KiB``, ``65536``), the others a whole number;
        every value is non-negative, and ``elem_size_B`` and ``*_min_procs`` at least 1.
        ``alltoall_throttle=0`` posts every isend/irecv of an alltoall(v) at once (MPICH's
        ``MPIR_CVAR_ALLTOALL_THROTTLE=0``).

        Examples
        --------
        >>> MPICHThresholds.from_options(["alltoall_throttle=4", "bcast_short_B=16KiB"]).changed()
        {'bcast_short_B': 16384, 'alltoall_throttle': 4}
        >>> MPICHThresholds.from_options(["throttle=4"])
        Traceback (most recent call last):
        ...
        topoplan.core.errors.TopoplanError: mpich: unknown field 'throttle'; known: bcast_short_B, bcast_long_B, \
bcast_min_procs, reduce_short_B, allreduce_short_B, allgather_short_B, allgather_long_B, alltoall_short_B, \
alltoall_medium_B, alltoall_min_procs, alltoall_throttle, reduce_scatter_long_B, elem_size_B
        """
        known = [f.name for f in fields(cls)]
        items = options.items() if hasattr(options, "items") else [_field_value(o, where) for o in options]
        values = {}
        for name, value in items:
            if name not in known:
                raise TopoplanError(f"{where}: unknown field {name!r}; known: {', '.join(known)}")
            if name in values:
                raise TopoplanError(f"{where}: field {name!r} given twice")
            here = f"{where}: field {name!r}"
            if name.endswith("_B"):
                x = parse_size(value, here)
            elif isinstance(value, str):   # ASCII digits only: float() reads '4.0', '1e1' and '٤' as numbers
                x = int(value) if is_ascii_int(value) else None
            else:
                x = value
            if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) \
                    or x != int(x) or x < 0:
                raise TopoplanError(f"{here}: expected a whole non-negative number, got {value!r}")
            if x < 1 and (name == "elem_size_B" or name.endswith("_min_procs")):
                raise TopoplanError(f"{here}: must be at least 1, got {value!r}")
            values[name] = int(x)
        return cls(**values)

    @classmethod
    def coerce(cls, value, *, where: str = "thresholds") -> "MPICHThresholds | None":
        """``None`` (MPICH's defaults), an :class:`MPICHThresholds`, or a mapping of its fields
        (:meth:`from_options`; what a result records under ``mpich``).

        Examples
        --------
        >>> MPICHThresholds.coerce({"alltoall_throttle": 4}).alltoall_throttle
        4
        >>> MPICHThresholds.coerce(4)
        Traceback (most recent call last):
        ...
        topoplan.core.errors.TopoplanError: thresholds: expected MPICHThresholds or a mapping of its fields, got int
        """
        if value is None or isinstance(value, cls):
            return value
        if hasattr(value, "items"):
            return cls.from_options(value, where=where)
        raise TopoplanError(f"{where}: expected MPICHThresholds or a mapping of its fields, got {type(value).__name__}")

    def changed(self) -> dict:
        """The fields that differ from MPICH's defaults (what a result records), in field order."""
        default = MPICHThresholds()
        return {f.name: getattr(self, f.name) for f in fields(self)
                if getattr(self, f.name) != getattr(default, f.name)}


def _field_value(text, where: str) -> tuple[str, str]:
    """``"name=value"`` -> ``("name", "value")``."""
    name, eq, value = str(text).partition("=")
    if not eq or not name.strip() or not value.strip():
        raise TopoplanError(f"{where}: expected FIELD=VALUE, got {text!r}")
    return name.strip(), value.strip()


@dataclass
class Step:
    """What one rank sends and receives in one step: ``(peer, bytes)`` pairs, peers communicator-local.

    A receive's size is ``None`` when the receiver cannot know it (alltoallv
    given only the caller's send counts); the sender's size then applies.

    Parameters
    ----------
    sends, recvs : lists of ``(peer, bytes)``.

    Examples
    --------
    >>> schedule("bcast", 2, 0, 0, 8)
    [Step(sends=[(1, 8)], recvs=[])]
    """

    sends: list = field(default_factory=list)
    recvs: list = field(default_factory=list)


# ---------------------------------------------------------------- helpers --
def _pof2(p: int) -> int:
    """Largest power of two <= p."""
    return 1 << (p.bit_length() - 1)


def _is_pof2(p: int) -> bool:
    return p & (p - 1) == 0


def _block_sum(q: int, r: int, a: int, b: int) -> int:
    """Sum of blocks a..b-1 of a split in which block i holds q + (i < r) elements (MPICH's cnts[])."""
    return (b - a) * q + max(0, min(b, r) - min(a, r))


def _elements(n: int, th: MPICHThresholds):
    """(count, element size): elements of th.elem_size_B, or of the largest size dividing both (4116 B: ints)."""
    e = math.gcd(n, max(1, int(th.elem_size_B))) or 1
    return n // e, e


def _sendrecv(dst, sbytes, src, rbytes) -> Step:
    return Step([(dst, sbytes)], [(src, rbytes)])


# ------------------------------------------------------------------ bcast --
def _bcast_knomial(p, me, root, n, k=2):
    """k-nomial tree (MVAPICH2's Bcast, K = 4 by default; K = 2 is MPICH's binomial): receive from the
    parent, then send to the children at distance ``mask * j`` (j < k), largest mask first."""
    rel = (me - root) % p
    steps, mask = [], 1
    while mask < p:
        if rel % (k * mask):
            steps.append(Step(recvs=[((rel - rel % (k * mask) + root) % p, n)]))
            break
        mask *= k
    mask //= k
    while mask > 0:
        for j in range(1, k):
            if rel + mask * j < p:
                steps.append(Step(sends=[((rel + mask * j + root) % p, n)]))
        mask //= k
    return steps


def _bcast_binomial(p, me, root, n):
    return _bcast_knomial(p, me, root, n, 2)


def _bcast_scatter(p, me, root, n):
    """Binomial scatter of ceil(n/p)-byte chunks; a rank ends with chunk `rel` (possibly empty)."""
    ss = -(-n // p)
    rel = (me - root) % p

    def subtree_bytes(r):  # bytes of chunks r .. r+lowbit(r)-1, what r receives from its parent
        return max(0, min(n, (r + (r & -r)) * ss) - r * ss)

    steps, mask = [], 1
    while mask < p:
        if rel & mask:
            got = subtree_bytes(rel)
            if got > 0:
                steps.append(Step(recvs=[((rel - mask + root) % p, got)]))
            break
        mask <<= 1
    mask >>= 1
    while mask > 0:
        c = rel + mask
        if c < p and subtree_bytes(c) > 0:
            steps.append(Step(sends=[((c + root) % p, subtree_bytes(c))]))
        mask >>= 1
    return steps


def _bcast_rd_allgather(p, me, root, n):
    """Recursive doubling over relative ranks; each side sends the chunks its subtree holds."""
    ss = -(-n // p)
    rel = (me - root) % p

    def held(tree_root, width):
        return max(0, min(n, (tree_root + width) * ss) - tree_root * ss)

    steps, mask, i = [], 1, 0
    while mask < p:
        dst = rel ^ mask
        mine, theirs = (rel >> i) << i, (dst >> i) << i
        steps.append(_sendrecv((dst + root) % p, held(mine, mask), (dst + root) % p, held(theirs, mask)))
        mask <<= 1
        i += 1
    return steps


def _bcast_ring_allgather(p, me, root, n):
    ss = -(-n // p)
    left, right = (me - 1) % p, (me + 1) % p

    def chunk(j):
        return max(0, min(ss, n - ((j - root) % p) * ss))

    steps, j, jnext = [], me, left
    for _ in range(p - 1):
        steps.append(_sendrecv(right, chunk(j), left, chunk(jnext)))  # 0-byte chunks still send a message
        j, jnext = jnext, (jnext - 1) % p
    return steps


BCAST_ALGORITHMS = ("auto", "knomial", "binomial", "scatter-allgather", "scatter-ring", "scatter-rd")


def bcast_algorithm(p: int, n: float, algorithm: str = "auto", th: MPICHThresholds = MPICHThresholds()) -> str:
    """The Bcast algorithm MPICH runs (``auto``: binomial below ``bcast_short_B`` or ``bcast_min_procs``
    ranks, else scatter + recursive doubling below ``bcast_long_B`` on a power of two, else scatter + ring;
    ``scatter-allgather`` picks rd or ring by the same rule). ``auto_tree`` names the small-message tree.

    Parameters
    ----------
    p : communicator size; n : message bytes; algorithm : one of :data:`BCAST_ALGORITHMS`;
    th : :class:`MPICHThresholds`.

    Returns
    -------
    str : the concrete algorithm name.

    Examples
    --------
    >>> bcast_algorithm(64, 1000), bcast_algorithm(64, 100_000), bcast_algorithm(60, 100_000)
    ('binomial', 'scatter-rd', 'scatter-ring')
    """
    if algorithm not in BCAST_ALGORITHMS:
        raise TopoplanError(f"field 'algorithm': {algorithm!r}: choose one of {', '.join(BCAST_ALGORITHMS)}")
    if algorithm == "auto":
        if n < th.bcast_short_B or p < th.bcast_min_procs:
            return "binomial"
        algorithm = "scatter-allgather"
    if algorithm == "scatter-allgather":
        return "scatter-rd" if n < th.bcast_long_B and _is_pof2(p) else "scatter-ring"
    return algorithm


def _bcast(p, me, root, n, th, algorithm="auto", k=4):
    algorithm = bcast_algorithm(p, n, algorithm, th)
    if algorithm in ("knomial", "binomial"):
        return _bcast_knomial(p, me, root, n, k if algorithm == "knomial" else 2)
    steps = _bcast_scatter(p, me, root, n)
    if algorithm == "scatter-rd":
        return steps + _bcast_rd_allgather(p, me, root, n)
    return steps + _bcast_ring_allgather(p, me, root, n)


def bcast_tree(p: int, nbytes: float, algorithm: str = "knomial", *, k: int = 4):
    """The tree phase of a Bcast rooted at rank 0: ``(parent, sends)`` with ``parent[r]`` (-1 for the root)
    and ``sends[r]`` the ordered ``(child, bytes)`` list of rank r (``scatter-*``: the binomial scatter's
    subtree chunks). The one definition of the trees that :mod:`topoplan.problems.bcast` reorders.

    Parameters
    ----------
    p : communicator size; nbytes : message bytes; algorithm : ``knomial``, ``binomial`` or
    ``scatter-*``; k : the k-nomial factor.

    Returns
    -------
    ``(parent, sends)``: NumPy int array and list of ``(child, bytes)`` lists.

    Examples
    --------
    >>> parent, sends = bcast_tree(8, 10.0, "knomial", k=4)
    >>> parent.tolist(), [c for c, _ in sends[0]]
    ([-1, 0, 0, 0, 0, 4, 4, 4], [4, 1, 2, 3])
    >>> bcast_tree(8, 800.0, "scatter-ring")[1][0]
    [(4, 400.0), (2, 200.0), (1, 100.0)]
    """
    if p < 1:
        raise TopoplanError("field 'comm_size': a Bcast needs at least one rank")
    if k < 2:
        raise TopoplanError(f"field 'k': the k-nomial factor must be >= 2, got {k}")
    n = _as_bytes(nbytes, "bcast: field 'bytes'")
    parent = np.full(p, -1, dtype=np.int64)
    sends = [[] for _ in range(p)]
    for me in range(p):
        if algorithm in ("knomial", "binomial"):
            steps = _bcast_knomial(p, me, 0, n, k if algorithm == "knomial" else 2)
        elif algorithm.startswith("scatter"):
            steps = _bcast_scatter(p, me, 0, n)
        else:
            raise TopoplanError(f"field 'algorithm': {algorithm!r} has no tree phase")
        for st in steps:
            for peer, _ in st.recvs:
                parent[me] = peer
            sends[me] += [(int(c), float(b)) for c, b in st.sends]
    return parent, sends


# ----------------------------------------------------------------- reduce --
def _reduce_binomial(p, me, root, n):
    rel = (me - root) % p
    steps, mask = [], 1
    while mask < p:
        if rel & mask == 0:
            src = rel | mask
            if src < p:
                steps.append(Step(recvs=[((src + root) % p, n)]))
        else:
            steps.append(Step(sends=[(((rel & ~mask) + root) % p, n)]))
            break
        mask <<= 1
    return steps


def _halving(newrank, pof2, cnt, real, steps):
    """Recursive-halving reduce-scatter among the ``pof2`` ranks of Rabenseifner's algorithm (its first half, in
    reduce and allreduce): rank ``newrank`` exchanges half of the blocks it holds with ``newrank ^ mask`` each
    round, one sendrecv step appended to ``steps`` (``cnt(a, b)``: bytes of blocks ``a..b-1``; ``real``: the
    communicator rank of a group rank). Returns ``(send_idx, last_idx)``: the blocks it holds after."""
    send_idx = recv_idx = 0
    last_idx = pof2
    mask = 1
    while mask < pof2:
        newdst = newrank ^ mask
        half = pof2 // (mask * 2)
        if newrank < newdst:
            send_idx = recv_idx + half
            sc, rc = cnt(send_idx, last_idx), cnt(recv_idx, send_idx)
        else:
            recv_idx = send_idx + half
            sc, rc = cnt(send_idx, recv_idx), cnt(recv_idx, last_idx)
        steps.append(_sendrecv(real(newdst), sc, real(newdst), rc))
        send_idx = recv_idx
        mask <<= 1
        if mask < pof2:
            last_idx = recv_idx + pof2 // mask
    return send_idx, last_idx


def _reduce_rabenseifner(p, me, root, n, count, esz):
    """Recursive-halving reduce-scatter, then a binomial gather of the pieces to the root.

    Non-power-of-two: odd ranks < 2*rem send to rank-1 and sit out. If the
    root is one of them, rank 0 hands it its piece and the root plays rank 0.
    """
    pof2 = _pof2(p)
    rem = p - pof2
    q, r = divmod(count, pof2)
    cnt = lambda a, b: _block_sum(q, r, a, b) * esz  # noqa: E731
    real = lambda nr: nr * 2 if nr < rem else nr + rem  # noqa: E731
    steps = []
    if me < 2 * rem:
        if me % 2:
            steps.append(Step(sends=[(me - 1, n)]))
            newrank = -1
        else:
            steps.append(Step(recvs=[(me + 1, n)]))
            newrank = me // 2
    else:
        newrank = me - rem
    send_idx, last_idx = 0, pof2
    if newrank != -1:
        send_idx, last_idx = _halving(newrank, pof2, cnt, real, steps)
    odd_root = root < 2 * rem and root % 2 == 1
    if odd_root:
        if me == root:
            steps.append(Step(recvs=[(0, cnt(0, 1))]))
            newrank, send_idx, last_idx = 0, 0, 2
        elif newrank == 0:
            steps.append(Step(sends=[(root, cnt(0, 1))]))
            newrank = -1
        newroot = 0
    else:
        newroot = root // 2 if root < 2 * rem else root - rem
    if newrank != -1:
        j = pof2.bit_length() - 2
        mask = pof2 >> 1
        while mask > 0:
            newdst = newrank ^ mask
            dst = root if (newdst == 0 and odd_root) else real(newdst)
            half = pof2 // (mask * 2)
            if newrank < newdst:
                if mask != pof2 // 2:
                    last_idx = last_idx + half
                recv_idx = send_idx + half
                sc, rc = cnt(send_idx, recv_idx), cnt(recv_idx, last_idx)
            else:
                recv_idx = send_idx - half
                sc, rc = cnt(send_idx, last_idx), cnt(recv_idx, send_idx)
            if (newdst >> j) == (newroot >> j):
                steps.append(Step(sends=[(dst, sc)]))
                break
            steps.append(Step(recvs=[(dst, rc)]))
            if newrank > newdst:
                send_idx = recv_idx
            mask >>= 1
            j -= 1
    return steps


def _reduce(p, me, root, n, th):
    count, esz = _elements(n, th)
    if n > th.reduce_short_B and count >= _pof2(p):
        return _reduce_rabenseifner(p, me, root, n, count, esz)
    return _reduce_binomial(p, me, root, n)


# -------------------------------------------------------------- allreduce --
def _allreduce(p, me, n, th):
    count, esz = _elements(n, th)
    pof2 = _pof2(p)
    rem = p - pof2
    real = lambda nr: nr * 2 + 1 if nr < rem else nr + rem  # noqa: E731
    steps = []
    if me < 2 * rem:  # even ranks hand their data to rank+1 and wait for the result
        if me % 2 == 0:
            return [Step(sends=[(me + 1, n)]), Step(recvs=[(me + 1, n)])]
        steps.append(Step(recvs=[(me - 1, n)]))
        newrank = me // 2
    else:
        newrank = me - rem
    if n <= th.allreduce_short_B or count < pof2:
        mask = 1
        while mask < pof2:
            dst = real(newrank ^ mask)
            steps.append(_sendrecv(dst, n, dst, n))
            mask <<= 1
    else:
        q, r = divmod(count, pof2)
        cnt = lambda a, b: _block_sum(q, r, a, b) * esz  # noqa: E731
        send_idx, last_idx = _halving(newrank, pof2, cnt, real, steps)   # reduce-scatter
        mask = pof2 >> 1
        while mask > 0:  # allgather by recursive doubling
            newdst = newrank ^ mask
            half = pof2 // (mask * 2)
            if newrank < newdst:
                if mask != pof2 // 2:
                    last_idx = last_idx + half
                recv_idx = send_idx + half
                sc, rc = cnt(send_idx, recv_idx), cnt(recv_idx, last_idx)
            else:
                recv_idx = send_idx - half
                sc, rc = cnt(send_idx, last_idx), cnt(recv_idx, send_idx)
            steps.append(_sendrecv(real(newdst), sc, real(newdst), rc))
            if newrank > newdst:
                send_idx = recv_idx
            mask >>= 1
    if me < 2 * rem:
        steps.append(Step(sends=[(me - 1, n)]))
    return steps


# -------------------------------------------------------------- allgather --
def allgather_algorithm(comm_size: int, total_B: float, thresholds: MPICHThresholds | None = None) -> str:
    """MPICH's algorithm for an ``MPI_Allgather(v)`` gathering ``total_B`` bytes in all:
    ``"recursive-doubling"`` (below ``allgather_long_B`` on a power of two), ``"bruck"`` (below
    ``allgather_short_B``) or ``"ring"``.

    Examples
    --------
    >>> [allgather_algorithm(p, t) for p, t in ((64, 1e5), (48, 1e4), (48, 1e6))]
    ['recursive-doubling', 'bruck', 'ring']
    """
    th = thresholds or MPICHThresholds()
    if total_B < th.allgather_long_B and _is_pof2(comm_size):
        return "recursive-doubling"
    if total_B < th.allgather_short_B:
        return "bruck"
    return "ring"


def _allgather(p, me, sizes, th):
    """sizes[i]: bytes rank i contributes (allgatherv: per-rank counts)."""
    total = sum(sizes)
    steps = []
    alg = allgather_algorithm(p, total, th)
    if alg == "recursive-doubling":
        mask = 1
        while mask < p:
            dst = me ^ mask
            mine, theirs = me & ~(mask - 1), dst & ~(mask - 1)
            steps.append(_sendrecv(dst, sum(sizes[mine:mine + mask]), dst, sum(sizes[theirs:theirs + mask])))
            mask <<= 1
    elif alg == "bruck":  # Bruck: I hold blocks me .. me+k-1 and pass them to me-k
        held = lambda start, k: sum(sizes[(start + i) % p] for i in range(k))  # noqa: E731
        k = 1
        while k <= p // 2:
            dst, src = (me - k) % p, (me + k) % p
            steps.append(_sendrecv(dst, held(me, k), src, held(src, k)))
            k *= 2
        rem = p - k
        if rem:
            dst, src = (me - k) % p, (me + k) % p
            steps.append(_sendrecv(dst, held(me, rem), src, held(src, rem)))
    else:
        left, right = (me - 1) % p, (me + 1) % p
        for i in range(1, p):
            steps.append(_sendrecv(right, sizes[(me - i + 1) % p], left, sizes[(me - i) % p]))
    return steps


# ---------------------------------------------------------- gather/scatter --
def _gather(p, me, root, n):
    rel = (me - root) % p
    steps, mask = [], 1
    while mask < p:
        if rel & mask == 0:
            src = rel | mask
            if src < p:
                steps.append(Step(recvs=[((src + root) % p, n * min(mask, p - src))]))
        else:
            steps.append(Step(sends=[(((rel ^ mask) + root) % p, n * min(mask, p - rel))]))
            break
        mask <<= 1
    return steps


def _scatter(p, me, root, n):
    rel = (me - root) % p
    steps, mask = [], 1
    while mask < p:
        if rel & mask:
            steps.append(Step(recvs=[((rel - mask + root) % p, n * min(mask, p - rel))]))
            break
        mask <<= 1
    mask >>= 1
    while mask > 0:
        if rel + mask < p:
            steps.append(Step(sends=[((rel + mask + root) % p, n * min(mask, p - rel - mask))]))
        mask >>= 1
    return steps


# ---------------------------------------------------------- reduce_scatter --
def _reduce_scatter(p, me, sizes, th):
    """sizes[i]: bytes of the result block rank i receives."""
    total = sum(sizes)
    if total == 0:
        return []
    steps = []
    if total >= th.reduce_scatter_long_B:
        for i in range(1, p):
            src, dst = (me - i) % p, (me + i) % p
            steps.append(_sendrecv(dst, sizes[dst], src, sizes[me]))
        return steps
    pof2 = _pof2(p)
    rem = p - pof2
    real = lambda nr: nr * 2 + 1 if nr < rem else nr + rem  # noqa: E731
    if me < 2 * rem:
        if me % 2 == 0:
            steps.append(Step(sends=[(me + 1, total)]))
            newrank = -1
        else:
            steps.append(Step(recvs=[(me - 1, total)]))
            newrank = me // 2
    else:
        newrank = me - rem
    if newrank != -1:
        # block i of the power-of-two group also carries the excluded left neighbour's block
        newcnts = [sizes[real(i)] + (sizes[real(i) - 1] if real(i) < 2 * rem else 0) for i in range(pof2)]
        prefix = np.concatenate([[0], np.cumsum(newcnts)]).tolist()
        send_idx = recv_idx = 0
        last_idx = pof2
        mask = pof2 >> 1
        while mask > 0:
            newdst = newrank ^ mask
            if newrank < newdst:
                send_idx = recv_idx + mask
                sc, rc = prefix[last_idx] - prefix[send_idx], prefix[send_idx] - prefix[recv_idx]
            else:
                recv_idx = send_idx + mask
                sc, rc = prefix[recv_idx] - prefix[send_idx], prefix[last_idx] - prefix[recv_idx]
            dst = real(newdst)
            steps.append(Step([(dst, sc)] if sc else [], [(dst, rc)] if rc else []))
            send_idx = recv_idx
            last_idx = recv_idx + mask
            mask >>= 1
    if me < 2 * rem:
        if me % 2 and sizes[me - 1]:
            steps.append(Step(sends=[(me - 1, sizes[me - 1])]))
        elif me % 2 == 0 and sizes[me]:
            steps.append(Step(recvs=[(me + 1, sizes[me])]))
    return [s for s in steps if s.sends or s.recvs]


# ---------------------------------------------------------------- alltoall --
def _alltoall_bruck(p, me, n):
    steps, k = [], 1
    while k < p:
        blocks = (p // (2 * k)) * k + max(0, p % (2 * k) - k)  # indices 0..p-1 with bit k set
        steps.append(_sendrecv((me + k) % p, blocks * n, (me - k) % p, blocks * n))
        k *= 2
    return steps


def _alltoall_spread(p, me, send, recv, throttle):
    """MPICH 'scattered': batches of `throttle` irecvs (from me+i) and isends (to me-i), then waitall.

    send[d] / recv[s]: bytes, or None for a receive of unknown size; a
    0-byte entry is skipped only when both sides can know it (see alltoallv).
    """
    block = throttle if throttle > 0 else p
    steps = []
    for ii in range(0, p, block):
        ss = min(block, p - ii)
        st = Step()
        for i in range(ss):
            src = (me + i + ii) % p
            if src != me and recv[src] != 0:
                st.recvs.append((src, recv[src]))
        for i in range(ss):
            dst = (me - i - ii) % p
            if dst != me and send[dst] is not None:
                st.sends.append((dst, send[dst]))
        if st.sends or st.recvs:
            steps.append(st)
    return steps


def _alltoall_pairwise(p, me, n):
    steps = []
    for i in range(1, p):
        if _is_pof2(p):
            src = dst = me ^ i
        else:
            src, dst = (me - i) % p, (me + i) % p
        steps.append(_sendrecv(dst, n, src, n))
    return steps


def alltoall_algorithm(comm_size: int, nbytes: float, thresholds: MPICHThresholds | None = None) -> str:
    """MPICH's algorithm for an ``MPI_Alltoall`` of ``nbytes`` per destination: ``"bruck"`` (short
    messages, at least ``alltoall_min_procs`` ranks), ``"spread"`` (isend/irecv in batches of
    ``alltoall_throttle``, medium) or ``"pairwise"`` (long).

    Examples
    --------
    >>> [alltoall_algorithm(64, b) for b in (64, 4096, 1 << 20)]
    ['bruck', 'spread', 'pairwise']
    """
    th = thresholds or MPICHThresholds()
    if nbytes <= th.alltoall_short_B and comm_size >= th.alltoall_min_procs:
        return "bruck"
    if nbytes <= th.alltoall_medium_B:
        return "spread"
    return "pairwise"


def _alltoall(p, me, n, th):
    alg = alltoall_algorithm(p, n, th)
    if alg == "bruck":
        return _alltoall_bruck(p, me, n)
    if alg == "spread":
        return _alltoall_spread(p, me, [n] * p, [n] * p, th.alltoall_throttle)
    return _alltoall_pairwise(p, me, n)


def _alltoallv(p, me, counts, th):
    c = np.asarray(counts, dtype=np.float64)
    if c.ndim == 2:  # the whole matrix: exact receive sizes, and empty messages are skipped as MPICH does
        send = [x if x > 0 else None for x in c[me].tolist()]
        recv = c[:, me].tolist()
    else:  # only my send counts: receives are of unknown size, so empty messages must still be sent
        send = c.tolist()
        recv = [None] * p
    return _alltoall_spread(p, me, send, recv, th.alltoall_throttle)


# ----------------------------------------------------------------- barrier --
def _barrier(p, me):
    steps, mask = [], 1
    while mask < p:
        steps.append(_sendrecv((me + mask) % p, 0, (me - mask) % p, 0))
        mask <<= 1
    return steps


# --------------------------------------------------------------------- API --
def _as_bytes(x, what):
    v = float(x)
    if not np.isfinite(v) or v < 0:
        raise TopoplanError(f"{what} must be a non-negative number of bytes, got {x!r}")
    return int(round(v))


def _per_rank_sizes(op, p, n, counts):
    if counts is None:
        return [n] * p
    c = np.asarray(counts, dtype=np.float64)
    if c.shape != (p,):
        raise TopoplanError(f"collective {op}: field 'counts': {c.shape[0] if c.ndim else 0} sizes for "
                            f"a communicator of {p}")
    return [_as_bytes(x, f"collective {op}: field 'counts'") for x in c.tolist()]


def schedule(op: str, comm_size: int, me: int, root: int, nbytes: float, *, counts=None,
             thresholds: MPICHThresholds = MPICHThresholds(), algorithm: str = "auto", k: int = 4) -> list[Step]:
    """The steps rank ``me`` of a ``comm_size``-rank communicator runs for one collective call.

    Parameters
    ----------
    op : one of :data:`OPERATIONS`.
    comm_size, me : communicator size and the caller's rank in it.
    root : the root's communicator rank (rooted ops; ignored otherwise).
    nbytes : as in the trace format: buffer size (bcast, reduce, allreduce),
        bytes per destination (alltoall), bytes each rank contributes
        (allgather, gather), bytes each rank receives (scatter), the per-rank
        block (reduce_scatter), 0 (barrier).
    counts : alltoallv: this rank's bytes per destination (length comm_size;
        receive sizes are then ``None``), or the whole ``comm_size x comm_size``
        matrix ``counts[src][dst]`` (exact receive sizes); alltoall: per
        destination bytes (uniform, as in a trace's per-destination rows);
        allgatherv / reduce_scatter: bytes per rank.
    thresholds : :class:`MPICHThresholds`.
    algorithm, k : bcast only: one of :data:`BCAST_ALGORITHMS` (``auto``: MPICH's selection) and the
        k-nomial factor (MVAPICH2's default 4).

    Returns
    -------
    list of :class:`Step` with communicator-local peers, in execution order.
    Self-copies are not messages and never appear.

    Examples
    --------
    >>> [(s.sends, s.recvs) for s in schedule("bcast", 4, 2, 0, 8)]
    [([], [(0, 8)]), ([(3, 8)], [])]
    >>> len(schedule("barrier", 16, 5, -1, 0))
    4
    """
    p = int(comm_size)
    if op not in OPERATIONS:
        raise TopoplanError(f"collective: unknown op {op!r} (known: {', '.join(OPERATIONS)})")
    if p < 1:
        raise TopoplanError(f"collective {op}: field 'comm_size': must be at least 1, got {comm_size}")
    if not 0 <= me < p:
        raise TopoplanError(f"collective {op}: rank {me} is outside a communicator of {p}")
    if op in ROOTED and not 0 <= root < p:
        raise TopoplanError(f"collective {op}: field 'root': {root} is outside a communicator of {p}")
    n = _as_bytes(nbytes, f"collective {op}: field 'bytes'")
    th = thresholds
    if p == 1:
        return []
    if op == "barrier":
        return _barrier(p, me)
    if op == "alltoallv" or (op == "alltoall" and counts is not None):
        c = np.asarray(counts if counts is not None else [n] * p, dtype=np.float64)
        if c.shape not in ((p,), (p, p)) or (c.size and (~np.isfinite(c) | (c < 0)).any()):
            raise TopoplanError(f"collective {op}: field 'counts': expected {p} or {p}x{p} non-negative sizes, "
                                f"got shape {c.shape}")
        c = np.round(c)
        if op == "alltoall":
            row = c[me] if c.ndim == 2 else c
            off = np.delete(row, me)
            if off.size and (off == off[0]).all():  # an ordinary alltoall written per destination
                return [] if off[0] == 0 else _alltoall(p, me, int(off[0]), th)
        return _alltoallv(p, me, c, th)
    if n == 0 and op not in ("allgatherv", "reduce_scatter"):
        return []  # MPICH returns at once for empty buffers
    if op == "bcast":
        return _bcast(p, me, root, n, th, algorithm, k)
    if op == "reduce":
        return _reduce(p, me, root, n, th)
    if op == "allreduce":
        return _allreduce(p, me, n, th)
    if op == "alltoall":
        return _alltoall(p, me, n, th)
    if op in ("allgather", "allgatherv"):
        return _allgather(p, me, _per_rank_sizes(op, p, n, counts), th)
    if op == "gather":
        return _gather(p, me, root, n)
    if op == "scatter":
        return _scatter(p, me, root, n)
    return _reduce_scatter(p, me, _per_rank_sizes(op, p, n, counts), th)


def _sends(op, p, me, root, n, counts, th):
    """(local destinations, bytes) arrays of what `me` sends in one call."""
    dst, by = [], []
    for st in schedule(op, p, me, root, n, counts=counts, thresholds=th):
        for peer, b in st.sends:
            dst.append(peer)
            by.append(b)
    return np.array(dst, dtype=np.int64), np.array(by, dtype=np.float64)


def messages(op: str, comm_size: int, root: int, nbytes: float, *, counts=None,
             thresholds: MPICHThresholds = MPICHThresholds()):
    """Every point-to-point message of one whole call, from the members' :func:`schedule`.

    Parameters are those of :func:`schedule`; for alltoallv, ``counts`` is the
    ``comm_size x comm_size`` matrix ``counts[src][dst]`` or one row every
    rank uses.

    Returns
    -------
    ``(src, dst, bytes)`` NumPy arrays of communicator-local ranks.

    Examples
    --------
    >>> s, d, b = messages("bcast", 4, 0, 100)
    >>> sorted(zip(s.tolist(), d.tolist())), int(b.sum())
    ([(0, 1), (0, 2), (2, 3)], 300)
    """
    p = int(comm_size)
    if op == "alltoallv" and counts is not None:
        c = np.asarray(counts, dtype=np.float64)
        counts = np.tile(c, (p, 1)) if c.ndim == 1 else c
    src, dst, by = [], [], []
    for me in range(p):
        d, b = _sends(op, p, me, root, nbytes, counts, thresholds)
        src.append(np.full(len(d), me, dtype=np.int64))
        dst.append(d)
        by.append(b)
    if not src:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
    return np.concatenate(src), np.concatenate(dst), np.concatenate(by)


def peer_messages(op: str, comm_size: int, nbytes: float, thresholds: MPICHThresholds | None = None) -> int:
    """Messages one rank sends in a call whose algorithm steps through the peers one by one (``p - 1``):
    alltoall (pairwise or batched; Bruck counted alike), ring allgather, Bcast by scatter and ring,
    pairwise reduce_scatter; 0 for the logarithmic algorithms. A trace of such calls is O(p^2) messages.

    Examples
    --------
    >>> peer_messages("alltoall", 64, 1e6), peer_messages("allgather", 48, 1e6), peer_messages("bcast", 64, 100)
    (63, 47, 0)
    """
    p = int(comm_size)
    if op not in PEER_STEP_OPS or p < 2 or not nbytes > 0:
        return 0
    th = thresholds or MPICHThresholds()
    if op == "allgather":
        ring = allgather_algorithm(p, nbytes * p, th) == "ring"
    elif op == "bcast":
        ring = bcast_algorithm(p, nbytes, "auto", th) == "scatter-ring"
    else:
        ring = op == "alltoall" or nbytes * p >= th.reduce_scatter_long_B
    return p - 1 if ring else 0


def peer_step_messages(trace, thresholds: MPICHThresholds | None = None) -> int:
    """:func:`peer_messages` summed over the trace's collective calls written as one row each.

    Examples
    --------
    >>> from topoplan.traffic.generators import alltoall
    >>> peer_step_messages(alltoall(16, 1e6, iters=2))
    480
    """
    rows = np.isin(trace.op, op_codes(PEER_STEP_OPS)) & (trace.peer < 0)
    keys = np.stack([trace.op[rows].astype(np.int64), trace.comm[rows].astype(np.int64),
                     trace.bytes[rows].view(np.int64)], axis=1) if rows.any() else np.zeros((0, 3), np.int64)
    uniq, calls = np.unique(keys, axis=0, return_counts=True)
    total = 0
    for (op, comm, b), c in zip(uniq.tolist(), calls.tolist()):
        n = float(np.int64(b).view(np.float64))
        total += int(c) * peer_messages(OPS[op], len(trace.members(int(comm))), n, thresholds)
    return total


def check_peer_step_messages(trace) -> None:
    """Refuse to expand a trace whose collective calls that step through their peers are more than
    ``MAX_TRACE_ROWS`` messages (:func:`peer_step_messages`): they would be held at once. The simulator
    streams alltoall and ring allgather calls instead.

    Examples
    --------
    >>> from topoplan.traffic.generators import alltoall
    >>> check_peer_step_messages(alltoall(64, 1e6))          # 4,032 messages: fine
    """
    n = peer_step_messages(trace)
    if n > limits.MAX_TRACE_ROWS:
        raise TopoplanError(f"{trace.source}: its collective calls are {n:,} point-to-point messages, over "
                            f"the limit of {limits.MAX_TRACE_ROWS:,} held at once; `topoplan simulate` streams alltoall "
                            "and ring allgather on a tree or switch graph (without circuits for their size), "
                            "other uses need every message")


def expand_trace_collectives(trace, thresholds: MPICHThresholds = MPICHThresholds()):
    """Every point-to-point message implied by the collective calls of a trace, in world ranks.

    A call contributes the messages its rank *sends* in its :func:`schedule`,
    so the calls of different ranks need no grouping. ``alltoall`` /
    ``alltoallv`` rows written per destination (peer set) are grouped into
    one call per (rank, op, t_start, comm): a uniform alltoall becomes an
    ordinary alltoall (Bruck for short messages), anything else sends each
    destination its bytes directly (every MPICH alltoallv algorithm does).

    Parameters
    ----------
    trace : :class:`topoplan.traffic.trace.Trace`; ``trace.members(comm)`` maps
        communicator ranks to world ranks, roots are world ranks.
    thresholds : :class:`MPICHThresholds`.

    Returns
    -------
    ``(src, dst, bytes)`` NumPy arrays (world ranks), in no particular order.

    Raises TopoplanError when a rank calls a collective on a communicator it
    is not a member of, or when its calls that step through their peers are
    more than ``MAX_TRACE_ROWS`` messages (:func:`check_peer_step_messages`).

    Examples
    --------
    >>> from topoplan.traffic.trace import Trace
    >>> t = Trace.from_records([(r, "allreduce", -1, 8, -1, 4, 0.0, 0.0) for r in range(4)], 4)
    >>> s, d, b = expand_trace_collectives(t)
    >>> len(s), int(b.sum())
    (8, 64)
    """
    empty = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0))
    coll = np.isin(trace.op, op_codes(OPERATIONS))
    if not coll.any():
        return empty
    check_peer_step_messages(trace)
    a2a_rows, starts = per_destination_calls(trace)
    per_dest = np.zeros(len(trace), dtype=bool)
    per_dest[a2a_rows] = True
    local_of: dict[int, tuple] = {}

    def local(comm):
        got = local_of.get(comm)
        if got is None:
            got = local_of[comm] = (np.asarray(trace.members(comm), dtype=np.int64), trace.local_ranks(comm))
        return got

    def not_member(i):
        return TopoplanError(f"{trace.source}: rank {trace.rank[i]} calls {OPS[trace.op[i]]} on communicator "
                             f"{trace.comm[i]} but is not one of its members")

    out_s, out_d, out_b = [], [], []
    cache: dict = {}

    # one row per call: identical calls (op, comm, rank, root, bytes) share their message list
    rows = np.flatnonzero(coll & ~per_dest)
    if rows.size:
        keys = np.stack([trace.op[rows].astype(np.float64), trace.comm[rows], trace.rank[rows], trace.root[rows],
                         trace.bytes[rows]], axis=1)
        uniq, first, mult = np.unique(keys, axis=0, return_index=True, return_counts=True)
        for (opc, comm, rank, root, nb), i, m in zip(uniq.tolist(), rows[first].tolist(), mult.tolist()):
            op, comm, rank, root = OPS[int(opc)], int(comm), int(rank), int(root)
            members, pos = local(comm)
            me = pos[rank] if rank < len(pos) else -1
            if me < 0:
                raise not_member(i)
            lroot = int(pos[root]) if 0 <= root < len(pos) and pos[root] >= 0 else 0
            key = (op, len(members), int(me), lroot if op in ROOTED else -1, nb)
            got = cache.get(key)
            if got is None:
                got = cache[key] = _sends(op, len(members), int(me), lroot, nb, None, thresholds)
            d, b = got
            out_s.append(np.full(len(d) * m, rank, dtype=np.int64))
            out_d.append(np.tile(members[d], m))
            out_b.append(np.tile(b, m))

    # per-destination alltoall(v) rows: group the rows of each call
    rows = a2a_rows
    if rows.size:
        r, o, c = trace.rank[rows], trace.op[rows], trace.comm[rows]
        new = np.zeros(len(rows), dtype=bool)
        new[starts] = True
        gid = np.cumsum(new) - 1
        peer, nb = trace.peer[rows], trace.bytes[rows]
        lpeer = np.empty(len(rows), dtype=np.int64)
        size = np.empty(len(starts), dtype=np.int64)
        for comm in np.unique(c).tolist():
            members, pos = local(comm)
            sel = c == comm
            lp = np.where(peer[sel] < len(pos), pos[np.minimum(peer[sel], len(pos) - 1)], -1)
            if (pos[r[sel]] < 0).any():
                raise not_member(rows[sel][np.flatnonzero(pos[r[sel]] < 0)[0]])
            bad = np.flatnonzero(lp < 0)
            if bad.size:
                raise TopoplanError(f"{trace.source}: {OPS[o[sel][bad[0]]]} of rank {r[sel][bad[0]]} sends to "
                                    f"{peer[sel][bad[0]]}, not a member of communicator {comm}")
            lpeer[sel] = lp
            size[sel[starts]] = len(members)
        me_world = r[starts]
        off = peer != r  # the self block is a local copy
        # a uniform alltoall to every other member is an ordinary alltoall call
        big = np.finfo(np.float64).max
        lo = np.minimum.reduceat(np.where(off, nb, big), starts)
        hi = np.maximum.reduceat(np.where(off, nb, -1.0), starts)
        # the other members a call names, each once (read_trace refuses a repeated or missing one; a trace
        # built otherwise is taken as it is: a repeated destination's rows add up, sent directly)
        width = int(peer.max()) + 1
        dests = np.bincount(np.unique(gid[off] * width + peer[off]) // width, minlength=len(starts))
        once = dests == np.bincount(gid[off], minlength=len(starts))
        uniform = (o[starts] == op_codes(("alltoall",))[0]) & (lo == hi) & (dests == size - 1) & once
        for g in np.flatnonzero(uniform).tolist():
            comm = int(c[starts[g]])
            members, pos = local(comm)
            me = int(pos[me_world[g]])
            if me < 0:
                raise not_member(rows[starts[g]])
            key = ("alltoall", int(size[g]), me, -1, float(lo[g]))
            got = cache.get(key)
            if got is None:
                got = cache[key] = _sends("alltoall", int(size[g]), me, 0, float(lo[g]), None, thresholds)
            d, b = got
            out_s.append(np.full(len(d), me_world[g], dtype=np.int64))
            out_d.append(members[d])
            out_b.append(b)
        direct = off & ~uniform[gid] & (nb > 0)  # 0-byte destinations are skipped by MPICH
        if direct.any():
            # one message per destination of a call (rows for the same destination add up)
            key = gid[direct] * (int(size.max()) + 1) + lpeer[direct]
            uk, inv = np.unique(key, return_inverse=True)
            b = np.bincount(inv, weights=nb[direct])
            first = np.zeros(len(uk), dtype=np.int64)
            first[inv[::-1]] = np.arange(direct.sum())[::-1]
            out_s.append(r[direct][first])
            out_d.append(peer[direct][first])
            out_b.append(b)
    if not out_s:
        return empty
    return np.concatenate(out_s), np.concatenate(out_d), np.concatenate(out_b).astype(np.float64)
