"""Synthetic traffic generators and the spec strings that name them.

A spec such as ``neighbor2d:rows=16,cols=16,bytes=4MB,iters=5``,
``alltoall:np=256,bytes=1MB`` or ``npb:kernel=cg,class=C,np=128,iters=5``
can stand in for a traffic file; :func:`parse_spec` runs the generator it
names. Every generator returns a :class:`topoplan.traffic.trace.Trace` (calls in
per-rank order with synthetic times), so analysis and replay treat generated
and recorded traffic alike. :class:`TraceBuilder` is the vectorised call
recorder the generators and :mod:`topoplan.traffic.npb` share: repeated
iterations stay symbolic until the rows are written, once, into the trace's
columns, so generating takes about the trace's own memory
(:data:`TRACE_ROW_BYTES` a row). :func:`record_spec` keeps a spec's
recording, which can also write the rows a piece at a time, or give each
recorded block once with its count (what the traffic needs:
:func:`topoplan.traffic.matrix.load_traffic`).
"""

from __future__ import annotations

import os
from typing import Callable, NamedTuple

import numpy

from topoplan.core.errors import TopoplanError
from topoplan.traffic.trace import OP_CODE, Trace
from topoplan.core.units import is_ascii_int, is_ascii_number, parse_size

__all__ = ["TICK_S", "MAX_TRACE_ROWS", "MAX_GENERATED_ROWS", "TRACE_ROW_BYTES", "BUILD_SCRATCH_BYTES_PER_ROW",
           "PIECE_ROWS", "check_generated_memory", "memory_left", "TraceBuilder", "neighbor2d", "alltoall", "ring", "random", "npb",
           "transpose", "halo_transpose",
           "Param", "Generator", "REQUIRED", "GENERATORS", "is_spec", "parse_spec", "Recording", "record_spec",
           "describe_generators"]

TICK_S = 1e-9  # duration of one synthetic call; keeps the calls of a rank at distinct times


# Limits. Traces and matrices read from files, and matrices replayed as traces, are capped at MAX_TRACE_ROWS
# rows. For a generated trace the cap is raised as far as memory allows: TraceBuilder.build writes the rows
# straight into the columns of the Trace (TRACE_ROW_BYTES bytes a row, plus BUILD_SCRATCH_BYTES_PER_ROW of
# boolean scratch for Trace.validate) and refuses, before allocating them, a trace that would not fit in the
# memory available now (Linux MemAvailable, or what ulimit -v leaves), whatever its size; MAX_GENERATED_ROWS
# is the ceiling (a typo such as msgs=10**12 is an error, not a long wait). Recording.pieces and
# topoplan.traffic.matrix.load_traffic never hold the whole trace.
MAX_TRACE_ROWS = 100_000_000
MAX_GENERATED_ROWS = 1 << 32
TRACE_ROW_BYTES = 75          # rank, peer, bytes, root, comm_size, t_start, t_end, comm, tag: 8 bytes; op 2, req 1
BUILD_SCRATCH_BYTES_PER_ROW = 3
PIECE_ROWS = 1 << 22          # rows per piece of a streamed trace (about 300 MB of columns)


def check_generated_memory(rows: int, n_ranks: int | None = None, what: str = "the generated trace") -> None:
    """Refuse, before allocating, a generated trace of ``rows`` rows that the memory available now cannot hold.

    Parameters
    ----------
    rows : int
        Rows of the trace.
    n_ranks : int, optional
        Its ranks, for the message.
    what : str, optional
        The subject of the message (e.g. naming the field that sized the trace).

    Raises
    ------
    TopoplanError
        When ``rows`` is over :data:`MAX_GENERATED_ROWS` (the ceiling to which
        memory can raise :data:`MAX_TRACE_ROWS`), or when the trace's
        columns and the scratch of its validation (:data:`TRACE_ROW_BYTES` +
        :data:`BUILD_SCRATCH_BYTES_PER_ROW` bytes a row) exceed the memory
        available: Linux ``MemAvailable``, or less where the process's
        address space is limited (``ulimit -v``); not checked where neither
        is known.

    Examples
    --------
    >>> check_generated_memory(1000)
    >>> check_generated_memory(MAX_GENERATED_ROWS + 1)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: the generated trace would have 4,294,967,297 rows: over the limit of 100,000,000 rows, which memory can raise but never past 4,294,967,296; ...
    """
    who = "" if n_ranks is None else f" ({n_ranks} ranks)"
    if rows > MAX_GENERATED_ROWS:
        raise TopoplanError(f"{what} would have {int(rows):,} rows{who}: {_over_cap()}; use fewer ranks, messages "
                            "or iterations")
    need = int(rows) * (TRACE_ROW_BYTES + BUILD_SCRATCH_BYTES_PER_ROW)
    have = memory_left()
    if have is not None and need > have:
        over = f"over the limit of {MAX_TRACE_ROWS:,} rows, raised only as far as memory allows: " \
            if rows > MAX_TRACE_ROWS else ""
        raise TopoplanError(f"{what} would have {int(rows):,} rows{who}: {over}about {_size(need)}, more than the "
                            f"{_size(have)} of memory available; use fewer ranks or iterations "
                            "(topoplan.traffic.matrix.load_traffic gives its traffic without building it)")


def _over_cap() -> str:
    return (f"over the limit of {MAX_TRACE_ROWS:,} rows, which memory can raise but never past "
            f"{MAX_GENERATED_ROWS:,}")


def memory_left() -> int | None:
    """Bytes this process can still allocate: Linux ``MemAvailable``, or less where ``ulimit -v`` leaves less;
    None when neither is known.

    Examples
    --------
    >>> left = memory_left()
    >>> left is None or left >= 0
    True
    """
    from topoplan.traffic import trace as trace_mod

    have = trace_mod._memory_available()
    room = _address_space_left()
    if room is not None:
        have = room if have is None else min(have, room)
    return have


def _address_space_left() -> int | None:
    """Bytes this process may still map under its address-space limit (``ulimit -v``), or None without one."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft == resource.RLIM_INFINITY:
            return None
        with open("/proc/self/statm") as fh:
            used = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        return max(soft - used, 0)
    except (ImportError, OSError, ValueError, IndexError):
        return None


def _size(n_bytes: int) -> str:
    for unit, scale, fmt in (("GiB", 2 ** 30, ".1f"), ("MiB", 2 ** 20, ".0f")):
        if n_bytes >= scale:
            return f"{n_bytes / scale:{fmt}} {unit}"
    return f"{n_bytes / 2 ** 10:.0f} KiB"


def _compact(a):
    """A per-rank array whose entries are all equal as that one NumPy scalar (same values, no memory)."""
    return a[0] if len(a) and bool((a == a[0]).all()) else a


def _per_row(v, r):
    """A per-rank array (or scalar) read at the ranks ``r`` of a block's rows."""
    return v if numpy.ndim(v) == 0 else v[r]


class _Leaf:
    """The calls of one :meth:`TraceBuilder.add`: per-row arrays, or NumPy scalars where every row has the value.

    ``occ`` is the rank's occurrence number within the call list (None when every rank is listed once);
    ``uniq``/``cnt`` the listed ranks and their rows then.
    """

    __slots__ = ("rank", "occ", "uniq", "cnt", "op", "peer", "bytes", "root", "size", "tag", "comm", "req", "seq",
                 "t0", "rows")


class _Rep:
    """A block of items made to happen ``times`` times; copy k (k >= 1) moves each rank's call numbers on by
    ``k * dseq`` and its computation clock by ``k * dclock``."""

    __slots__ = ("items", "times", "dseq", "dclock", "rows")

    def __init__(self, items, times, dseq, dclock, rows):
        self.items, self.times, self.dseq, self.dclock, self.rows = items, times, dseq, dclock, rows


def _walk(items, shifts=()):
    """Every block of calls in program order, as ``(leaf, shifts)``; ``shifts`` lists the enclosing repeats
    (outermost first) as ``(copy number, repeat)``, copies 0 left out."""
    for it in items:
        if type(it) is _Leaf:
            yield it, shifts
        else:
            for k in range(it.times):
                yield from _walk(it.items, shifts + ((k, it),) if k else shifts)


def _walk_times(items, times=1):
    """Every recorded block once, as ``(leaf, times it occurs)``."""
    for it in items:
        if type(it) is _Leaf:
            yield it, times
        else:
            yield from _walk_times(it.items, times * it.times)


class TraceBuilder:
    """Records MPI calls for many ranks at once, in each rank's program order.

    Every :meth:`add` appends one call per listed rank (a rank listed k times
    makes k calls, in list order) after that rank's previous calls. Times are
    synthetic: the i-th call of a rank starts at ``i * (TICK_S + call_gap_s)``
    plus the computation added with :meth:`compute`, and lasts ``TICK_S``.
    A block of calls recorded after :meth:`mark` can be repeated without
    recording it again (:meth:`repeat`).

    Repeats stay symbolic until :meth:`build`, which writes every row once,
    straight into its place in the rank-ordered columns of the
    :class:`~topoplan.traffic.trace.Trace` (no sort, no intermediate copies):
    building takes the trace's own size plus what was recorded. :meth:`pieces`
    writes the same rows a bounded number at a time.

    Parameters
    ----------
    n_ranks : int
        Size of MPI_COMM_WORLD.
    call_gap_s : float, optional
        Computation before every call (seconds).

    Raises
    ------
    TopoplanError
        From :meth:`add` and :meth:`repeat` when the trace would exceed
        :data:`MAX_GENERATED_ROWS` rows, from :meth:`build` when it would not
        fit in the memory available (:func:`check_generated_memory`; past
        :data:`MAX_TRACE_ROWS` rows only memory allows it).

    See Also
    --------
    topoplan.traffic.trace.Trace : what :meth:`build` returns.

    Examples
    --------
    >>> b = TraceBuilder(2)
    >>> b.add([0], "send", peer=1, nbytes=8); b.add([1], "recv", peer=0, nbytes=8)
    >>> m = b.mark(); b.add([0, 1], "barrier"); b.repeat(m, 3)
    >>> b.rows, b.build("demo").op_counts()
    (8, {'send': 1, 'recv': 1, 'barrier': 6})
    >>> [len(p) for p in b.pieces("demo", max_rows=3)]
    [4, 4]
    """

    def __init__(self, n_ranks: int, call_gap_s: float = 0.0):
        self.n = int(n_ranks)
        self.call_gap_s = float(call_gap_s)
        self.next = numpy.zeros(self.n, dtype=numpy.int64)   # number of the next call of each rank
        self.clock = numpy.zeros(self.n)                     # computation added so far per rank
        self._items: list = []
        self.rows = 0

    def _grow(self, k: float) -> None:
        # checked before anything is recorded, so a huge request is an error rather than a long wait
        if self.rows + k > MAX_GENERATED_ROWS:
            raise TopoplanError(f"the generated trace would have more than {MAX_GENERATED_ROWS:,} rows ({self.n} "
                                f"ranks): {_over_cap()}; use fewer ranks, messages or iterations")
        self.rows += int(k)

    def add(self, ranks, op: str, peer=-1, nbytes=0.0, *, root=-1, size=None, tag=-1, comm=-1, req=-1,
            one_call: bool = False) -> None:
        """Append one call of ``op`` per entry of ``ranks``; other arguments are scalars or per-entry arrays.

        ``size`` is the communicator size (default: all ranks); ``req`` marks
        what a ``wait`` completes (1 send, 0 receive). With ``one_call`` the
        rows of a rank form a single call sharing one start time (alltoallv
        written per destination).
        """
        r = numpy.asarray(ranks, dtype=numpy.int64).ravel()
        k = len(r)
        if k == 0:
            return
        if r.min() < 0 or r.max() >= self.n:
            bad = int(r[(r < 0) | (r >= self.n)][0])
            raise TopoplanError(f"TraceBuilder.add: field 'ranks': rank {bad} is outside the communicator of "
                                f"{self.n} ranks")
        self._grow(k)
        leaf = _Leaf()
        leaf.rank, leaf.rows, leaf.occ, leaf.uniq, leaf.cnt = r, k, None, None, None
        cnt = numpy.bincount(r, minlength=self.n)
        if k > 1 and cnt.max() > 1:
            # the j-th occurrence of a rank in r is its j-th new call (or row of the call)
            order = numpy.argsort(r, kind="stable")
            rs = r[order]
            first = numpy.r_[0, numpy.flatnonzero(rs[1:] != rs[:-1]) + 1]
            occ = numpy.empty(k, dtype=numpy.int64)
            occ[order] = numpy.arange(k) - numpy.repeat(first, numpy.diff(numpy.r_[first, k]))
            leaf.occ, leaf.uniq = occ, numpy.flatnonzero(cnt)
            leaf.cnt = cnt[leaf.uniq]
        if one_call:
            seq = self.next[r]
            self.next[cnt > 0] += 1
        else:
            seq = self.next[r] if leaf.occ is None else self.next[r] + leaf.occ
            self.next += cnt

        def col(v, dtype):
            a = numpy.asarray(v, dtype=dtype)
            if a.ndim == 0:
                return a[()]
            a = a.ravel()
            if len(a) != k:
                raise ValueError(f"TraceBuilder.add: {len(a)} values for {k} ranks")
            return a

        leaf.op = numpy.int16(OP_CODE[op])
        leaf.peer, leaf.bytes = col(peer, numpy.int64), col(nbytes, numpy.float64)
        leaf.root, leaf.size = col(root, numpy.int64), col(self.n if size is None else size, numpy.int64)
        leaf.tag, leaf.comm, leaf.req = col(tag, numpy.int64), col(comm, numpy.int64), col(req, numpy.int64)
        leaf.seq, leaf.t0 = _compact(seq), _compact(self.clock[r])
        self._items.append(leaf)

    def compute(self, seconds: float, ranks=None) -> None:
        """Add ``seconds`` of computation before the next call of ``ranks`` (default: every rank)."""
        if seconds:
            if ranks is None:
                self.clock += seconds
            else:
                numpy.add.at(self.clock, numpy.asarray(ranks, dtype=numpy.int64), seconds)

    def mark(self):
        """A position to :meth:`repeat` from."""
        return len(self._items), self.next.copy(), self.clock.copy()

    def repeat(self, mark, times: int) -> None:
        """Make the calls recorded since ``mark`` happen ``times`` times in all (0 removes them)."""
        i, next0, clock0 = mark
        times = int(times)
        if times == 1:
            return
        if i == len(self._items):  # only computation since the mark
            self.clock = clock0 + (self.clock - clock0) * max(times, 0)
            return
        block = self._items[i:]
        rows = sum(it.rows for it in block)
        if times <= 0:
            self.rows -= rows
            del self._items[i:]
            self.next, self.clock = next0, clock0
            return
        self._grow(float(rows) * (times - 1))
        dseq, dclock = self.next - next0, self.clock - clock0
        self._items[i:] = [_Rep(block, times, _compact(dseq), _compact(dclock), rows * times)]
        self.next += dseq * (times - 1)
        self.clock += dclock * (times - 1)

    # -- writing the rows ---------------------------------------------------
    def _fill(self, blocks, rows: int):
        """The columns of the rows of ``blocks`` (a list of the ``(leaf, shifts)`` of :func:`_walk`),
        in rank order and, within a rank, in call order."""
        n = self.n
        per_rank = numpy.zeros(n, dtype=numpy.int64)
        for leaf, _ in blocks:
            if leaf.occ is None:
                per_rank[leaf.rank] += 1
            else:
                per_rank[leaf.uniq] += leaf.cnt
        rank = numpy.repeat(numpy.arange(n, dtype=numpy.int64), per_rank)
        op = numpy.empty(rows, dtype=numpy.int16)
        peer, root, size, comm, tag = (numpy.empty(rows, dtype=numpy.int64) for _ in range(5))
        nbytes, t_start = numpy.empty(rows), numpy.empty(rows)
        req = numpy.empty(rows, dtype=numpy.int8)
        pos = numpy.zeros(n, dtype=numpy.int64)     # where each rank's next row goes
        numpy.cumsum(per_rank[:-1], out=pos[1:])
        step = TICK_S + self.call_gap_s
        for leaf, shifts in blocks:
            r = leaf.rank
            if leaf.occ is None:
                at = pos[r]
                pos[r] += 1
            else:
                at = pos[r] + leaf.occ
                pos[leaf.uniq] += leaf.cnt
            seq, t0 = leaf.seq, leaf.t0
            for k, rep in shifts:
                seq = seq + k * _per_row(rep.dseq, r)
            for k, rep in reversed(shifts):   # innermost repeat first, as the copies were made
                t0 = t0 + k * _per_row(rep.dclock, r)
            op[at] = leaf.op
            peer[at] = leaf.peer
            nbytes[at] = leaf.bytes
            root[at] = leaf.root
            size[at] = leaf.size
            tag[at] = leaf.tag
            comm[at] = leaf.comm
            req[at] = leaf.req
            t_start[at] = seq * step + t0
        t_end = numpy.add(t_start, TICK_S)
        return rank, op, peer, nbytes, root, size, t_start, t_end, comm, tag, req

    def _trace(self, cols, source, communicators) -> Trace:
        rank, op, peer, nbytes, root, size, t_start, t_end, comm, tag, req = cols
        tr = Trace(n_ranks=self.n, rank=rank, op=op, peer=peer, bytes=nbytes, root=root, comm_size=size,
                   t_start=t_start, t_end=t_end, comm=comm, tag=tag, req=req,
                   communicators={int(k): numpy.asarray(v, dtype=numpy.int64)
                                  for k, v in (communicators or {}).items()},
                   source=source)
        tr.validate()
        return tr

    def build(self, source: str, communicators=None) -> Trace:
        """The recorded calls as a validated :class:`Trace`, sorted by rank and call order.

        Raises
        ------
        TopoplanError
            Before allocating, when the trace would not fit in the memory available
            (:func:`check_generated_memory`).
        """
        check_generated_memory(self.rows, self.n)
        return self._trace(self._fill(list(_walk(self._items)), self.rows), source, communicators)

    def pieces(self, source: str, communicators=None, max_rows: int | None = None):
        """The trace of :meth:`build` in pieces of about ``max_rows`` rows, without ever holding all of it.

        Each piece is a validated :class:`Trace` over all ``n_ranks`` ranks
        holding consecutive calls of the program (a block recorded by one
        :meth:`add` is never split, so a piece can exceed ``max_rows`` by one
        block): for every rank, its rows in piece 1, then in piece 2, ... are
        its rows in the built trace, in order, with the same values.

        Parameters
        ----------
        source : str
            Source of every piece.
        communicators : dict, optional
            As for :meth:`build`.
        max_rows : int, optional
            Rows per piece; default :data:`PIECE_ROWS`.

        Yields
        ------
        Trace
            At least one (empty when nothing was recorded).
        """
        max_rows = PIECE_ROWS if max_rows is None else max(int(max_rows), 1)
        buf, rows, done = [], 0, False
        for block in _walk(self._items):
            buf.append(block)
            rows += block[0].rows
            if rows >= max_rows:
                yield self._trace(self._fill(buf, rows), source, communicators)
                buf, rows, done = [], 0, True
        if buf or not done:
            yield self._trace(self._fill(buf, rows), source, communicators)

    def rows_per_rank(self) -> numpy.ndarray:
        """How many rows of the trace each rank has (from the recording: no row is written).

        Examples
        --------
        >>> b = TraceBuilder(3)
        >>> m = b.mark(); b.add([0, 1, 0], "barrier"); b.repeat(m, 4)
        >>> b.rows_per_rank().tolist()
        [8, 4, 0]
        """
        per = numpy.zeros(self.n, dtype=numpy.int64)
        for leaf, times in _walk_times(self._items):
            if leaf.occ is None:   # each listed rank once
                per[leaf.rank] += times
            else:
                per[leaf.uniq] += leaf.cnt * times
        return per

    def blocks(self, source: str, communicators=None, max_rows: int | None = None):
        """Every recorded block of calls once, with the number of times it occurs in the trace.

        A block is what one :meth:`add` recorded; :meth:`repeat` makes it occur
        again with later times only. Whatever depends on who calls what, with
        which peer, size, root and communicator -- the traffic of the trace --
        can be read from the blocks, at the cost of the recording rather than
        of the trace. Blocks that occur equally often come together, in traces
        of up to about ``max_rows`` rows.

        Parameters
        ----------
        source : str
            Source of every trace.
        communicators : dict, optional
            As for :meth:`build`.
        max_rows : int, optional
            Rows per trace; default :data:`PIECE_ROWS`.

        Yields
        ------
        (Trace, int)
            The first occurrence of one or more blocks as a validated trace
            (rows by rank; a rank's rows of one call stay together), and how
            many times each of them occurs.

        Examples
        --------
        >>> b = TraceBuilder(2)
        >>> b.add([0, 1], "barrier"); m = b.mark(); b.add([0], "send", peer=1, nbytes=8)
        >>> b.add([1], "recv", peer=0, nbytes=8); b.repeat(m, 5)
        >>> [(t.op_counts(), k) for t, k in b.blocks("demo")]
        [({'barrier': 2}, 1), ({'send': 1, 'recv': 1}, 5)]
        """
        max_rows = PIECE_ROWS if max_rows is None else max(int(max_rows), 1)
        pending: dict[int, list] = {}
        for leaf, times in _walk_times(self._items):
            got = pending.setdefault(times, [[], 0])
            got[0].append((leaf, ()))
            got[1] += leaf.rows
            if got[1] >= max_rows:
                del pending[times]
                yield self._trace(self._fill(*got), source, communicators), times
        for times, got in pending.items():
            yield self._trace(self._fill(*got), source, communicators), times


# --------------------------------------------------------------- generators --
def _positive(name, value, gen, minimum=1):
    if int(value) < minimum:
        raise TopoplanError(f"traffic spec {gen!r}: parameter {name!r} must be at least {minimum}, got {value}")
    return int(value)


def _check_size(gen: str, rows: float, what: str = "trace rows") -> None:
    if what == "trace rows" and rows > MAX_GENERATED_ROWS:
        raise TopoplanError(f"traffic spec {gen!r}: would generate {rows:.3g} trace rows, {_over_cap()}; use fewer "
                            "ranks, messages or iterations")
    if what != "trace rows" and rows > MAX_TRACE_ROWS:
        raise TopoplanError(f"traffic spec {gen!r}: would generate {rows:.3g} {what}, over the limit of "
                            f"{MAX_TRACE_ROWS:,}; use fewer ranks, messages or iterations")


def neighbor2d(rows: int, cols: int, bytes: float, iters: int = 1, compute_s: float = 0.0) -> Trace:
    """2-D neighbour exchange on a ``rows x cols`` grid (row-major ranks, up to 4 neighbours, no wrap).

    Per iteration every rank posts an irecv from each neighbour, then an
    isend to each (order: up, down, left, right), then a waitall.

    Parameters
    ----------
    rows, cols : int
        Grid shape; rank ``r`` sits at ``divmod(r, cols)``.
    bytes : float
        Message size in bytes.
    iters : int, optional
        Iterations.
    compute_s : float, optional
        Computation before each iteration (seconds).

    Returns
    -------
    topoplan.traffic.trace.Trace
        ``rows * cols`` ranks.

    Raises
    ------
    TopoplanError
        For a size below 1, a trace over ``MAX_GENERATED_ROWS`` rows or one
        the memory available cannot hold (:func:`check_generated_memory`).

    References
    ----------
    The "Neighbor" application of 000 (8x16, 40 MB), 001 section 4 (16x16,
    4 MB) and 003 section 4.1.1 (16x16, 4 MB, 5 iterations).

    Examples
    --------
    >>> t = neighbor2d(2, 3, 1000)
    >>> t.n_ranks, t.op_counts()
    (6, {'isend': 14, 'irecv': 14, 'waitall': 6})
    """
    b, source, comms = _neighbor2d_recording(rows, cols, bytes, iters, compute_s)
    return b.build(source, comms)


def _neighbor2d_recording(rows: int, cols: int, bytes: float, iters: int = 1, compute_s: float = 0.0):
    """The TraceBuilder, source and communicators of :func:`neighbor2d`."""
    rows = _positive("rows", rows, "neighbor2d")
    cols = _positive("cols", cols, "neighbor2d")
    iters = _positive("iters", iters, "neighbor2d")
    n = rows * cols
    _check_size("neighbor2d", 10.0 * n * iters)
    r = numpy.arange(n)
    i, j = divmod(r, cols)
    nbrs = [(i > 0, r - cols), (i < rows - 1, r + cols), (j > 0, r - 1), (j < cols - 1, r + 1)]
    b = TraceBuilder(n)
    m = b.mark()
    b.compute(compute_s)
    for has, q in nbrs:
        b.add(r[has], "irecv", q[has], bytes, tag=0)
    for has, q in nbrs:
        b.add(r[has], "isend", q[has], bytes, tag=0)
    b.add(r, "waitall")
    b.repeat(m, iters)
    return b, f"neighbor2d:rows={rows},cols={cols}", None


def alltoall(np: int, bytes: float, iters: int = 1, compute_s: float = 0.0) -> Trace:
    """``iters`` MPI_Alltoall calls with ``bytes`` per destination (one trace row per rank and call).

    The collectives expand into MPICH's algorithm for that size
    (:mod:`topoplan.traffic.collectives`).

    Parameters
    ----------
    np : int
        Ranks.
    bytes : float
        Bytes per destination.
    iters : int, optional
        Calls.
    compute_s : float, optional
        Computation before each call (seconds).

    Returns
    -------
    topoplan.traffic.trace.Trace

    See Also
    --------
    topoplan.analysis.alltoall : all-to-all schedules on meshes (004).

    Examples
    --------
    >>> alltoall(8, 1e6, iters=2).op_counts()
    {'alltoall': 16}
    """
    b, source, comms = _alltoall_recording(np, bytes, iters, compute_s)
    return b.build(source, comms)


def _alltoall_recording(np: int, bytes: float, iters: int = 1, compute_s: float = 0.0):
    """The TraceBuilder, source and communicators of :func:`alltoall`."""
    np = _positive("np", np, "alltoall")
    iters = _positive("iters", iters, "alltoall")
    _check_size("alltoall", float(np) * iters)   # its messages are counted where they are expanded
    b = TraceBuilder(np)
    m = b.mark()
    b.compute(compute_s)
    b.add(numpy.arange(np), "alltoall", -1, bytes)
    b.repeat(m, iters)
    return b, f"alltoall:np={np}", None


def ring(np: int, bytes: float, iters: int = 1, compute_s: float = 0.0) -> Trace:
    """Each rank sends ``bytes`` to ``(r + 1) % np`` and receives from ``(r - 1) % np`` per iteration.

    Parameters
    ----------
    np : int
        Ranks, at least 2.
    bytes : float
        Message size in bytes.
    iters : int, optional
        Iterations.
    compute_s : float, optional
        Computation before each iteration (seconds).

    Returns
    -------
    topoplan.traffic.trace.Trace

    Examples
    --------
    >>> ring(4, 64).op_counts()
    {'isend': 4, 'irecv': 4, 'waitall': 4}
    >>> ring(4, 64, iters=2).op_counts()["isend"]
    8
    """
    b, source, comms = _ring_recording(np, bytes, iters, compute_s)
    return b.build(source, comms)


def _ring_recording(np: int, bytes: float, iters: int = 1, compute_s: float = 0.0):
    """The TraceBuilder, source and communicators of :func:`ring`."""
    np = _positive("np", np, "ring", 2)
    iters = _positive("iters", iters, "ring")
    _check_size("ring", 4.0 * np * iters)
    r = numpy.arange(np)
    b = TraceBuilder(np)
    m = b.mark()
    b.compute(compute_s)
    b.add(r, "irecv", (r - 1) % np, bytes, tag=0)
    b.add(r, "isend", (r + 1) % np, bytes, tag=0)
    b.add(r, "waitall")
    b.repeat(m, iters)
    return b, f"ring:np={np}", None


def random(np: int, bytes: float, msgs: int = 0, seed: int = 0, iters: int = 1, compute_s: float = 0.0) -> Trace:
    """``msgs`` messages (default ``np``) between random distinct ranks per iteration, from ``seed``.

    Each message is an isend at its source and an irecv at its destination
    (posted in message order); every rank ends the iteration with a waitall.

    Parameters
    ----------
    np : int
        Ranks, at least 2.
    bytes : float
        Message size in bytes.
    msgs : int, optional
        Messages per iteration; 0 means ``np``.
    seed : int, optional
        Seed of the random pairs (the same seed gives the same trace).
    iters : int, optional
        Iterations (new pairs each).
    compute_s : float, optional
        Computation before each iteration (seconds).

    Returns
    -------
    topoplan.traffic.trace.Trace

    Examples
    --------
    >>> t = random(8, 100, msgs=20, seed=1)
    >>> t.op_counts()["isend"], t.n_ranks
    (20, 8)
    """
    b, source, comms = _random_recording(np, bytes, msgs, seed, iters, compute_s)
    return b.build(source, comms)


def _random_recording(np: int, bytes: float, msgs: int = 0, seed: int = 0, iters: int = 1, compute_s: float = 0.0):
    """The TraceBuilder, source and communicators of :func:`random`."""
    np = _positive("np", np, "random", 2)
    iters = _positive("iters", iters, "random")
    msgs = _positive("msgs", msgs, "random", 0) or np
    _check_size("random", (2.0 * msgs + 2.0 * np) * iters)
    rng = numpy.random.default_rng(int(seed))
    b = TraceBuilder(np)
    for it in range(iters):
        b.compute(compute_s)
        src = rng.integers(0, np, msgs)
        dst = (src + rng.integers(1, np, msgs)) % np  # never the source itself
        b.add(dst, "irecv", src, bytes, tag=it)
        b.add(src, "isend", dst, bytes, tag=it)
        b.add(numpy.arange(np), "waitall")
    return b, f"random:np={np},seed={seed}", None


def npb(kernel: str, np: int, klass: str = "C", iters: int | None = None, compute_s: float = 0.0) -> Trace:
    """Communication skeleton of an NPB 3.4 MPI kernel; see :func:`topoplan.traffic.npb.npb_trace`.

    Parameters
    ----------
    kernel : str
        ``cg``, ``mg``, ``is``, ``lu`` or ``ft``.
    np : int
        Ranks (each kernel has its own rule, e.g. a power of two for CG).
    klass : str, optional
        Problem class S, W, A-F.
    iters : int, optional
        Timed iterations; default the class's.
    compute_s : float, optional
        Computation before each MPI call (seconds).

    Returns
    -------
    topoplan.traffic.trace.Trace

    Examples
    --------
    >>> t = npb("cg", 8, "S", iters=1)
    >>> t.n_ranks, sorted(t.op_counts())
    (8, ['barrier', 'bcast', 'irecv', 'reduce', 'send', 'wait'])
    """
    from topoplan.traffic.npb import npb_trace

    return npb_trace(kernel, klass, np, iters, compute_s)


def transpose(rows: int, cols: int, bytes: float, iters: int = 1, compute_s: float = 0.0):
    """Transpose exchange on a square grid (:func:`topoplan.traffic.twophase.transpose2d`).

    Examples
    --------
    >>> transpose(4, 4, 1e6).op_counts()
    {'isend': 12, 'irecv': 12, 'waitall': 16}
    """
    from topoplan.traffic.twophase import transpose2d

    return transpose2d(rows, cols, bytes, iters, compute_s)


def halo_transpose(rows: int, cols: int, bytes: float, iters: int = 5):
    """Issue 21's two-phase workload: ``neighbor2d`` then :func:`transpose`, ``iters`` times each
    (:func:`topoplan.traffic.twophase.halo_then_transpose`).

    Examples
    --------
    >>> halo_transpose(4, 4, 1e6, iters=2).op_counts()
    {'isend': 120, 'irecv': 120, 'waitall': 64}
    """
    from topoplan.traffic.twophase import halo_then_transpose

    return halo_then_transpose(rows, cols, bytes, iters)


# ------------------------------------------------------------ spec strings --
class Param(NamedTuple):
    """One generator parameter: ``kind`` among int, size, float, str, bool; ``arg`` the function's keyword.

    Parameters
    ----------
    kind : str
        How the spec's text is read: ``int``, ``size`` (units allowed), ``float``, ``str`` or ``bool``.
    default : object
        The value when the spec leaves it out; :data:`REQUIRED` if it must be given.
    help : str
        One line for :func:`describe_generators`.
    arg : str
        The generator function's keyword (``compute`` -> ``compute_s``).

    Examples
    --------
    >>> p = GENERATORS["neighbor2d"].params["compute"]
    >>> p.kind, p.default, p.arg
    ('float', 0.0, 'compute_s')
    """

    kind: str
    default: object
    help: str
    arg: str


REQUIRED = object()


class Generator(NamedTuple):
    """A registry entry: the function, its parameters (spec name -> :class:`Param`) and a one-line help.

    Parameters
    ----------
    fn : callable
        The generator; called with the parameters' ``arg`` keywords, returns a Trace.
    params : dict of str to Param
        The spec's parameters, in the order :func:`describe_generators` lists them.
    help : str
        One line.

    Examples
    --------
    >>> g = GENERATORS["ring"]
    >>> g.fn.__name__, list(g.params), g.help
    ('ring', ['np', 'bytes', 'iters', 'compute'], 'each rank sends to (r+1) mod np')
    """

    fn: Callable
    params: dict
    help: str


def _p(kind, default, help, arg=None):
    return kind, default, help, arg


def _gen(fn, help, **params):
    return Generator(fn, {k: Param(kind, default, h, arg or k) for k, (kind, default, h, arg) in params.items()},
                     help)


GENERATORS = {
    "neighbor2d": _gen(neighbor2d, "2-D neighbour exchange: row-major grid, up to 4 neighbours, no wrap",
                       rows=_p("int", REQUIRED, "grid rows"), cols=_p("int", REQUIRED, "grid columns"),
                       bytes=_p("size", REQUIRED, "message size"), iters=_p("int", 1, "iterations"),
                       compute=_p("float", 0.0, "seconds of computation before each iteration", "compute_s")),
    "alltoall": _gen(alltoall, "MPI_Alltoall calls (MPICH algorithms)",
                     np=_p("int", REQUIRED, "ranks"), bytes=_p("size", REQUIRED, "bytes per destination"),
                     iters=_p("int", 1, "calls"),
                     compute=_p("float", 0.0, "seconds of computation before each call", "compute_s")),
    "ring": _gen(ring, "each rank sends to (r+1) mod np",
                 np=_p("int", REQUIRED, "ranks"), bytes=_p("size", REQUIRED, "message size"),
                 iters=_p("int", 1, "iterations"),
                 compute=_p("float", 0.0, "seconds of computation before each iteration", "compute_s")),
    "random": _gen(random, "seeded random pairs",
                   np=_p("int", REQUIRED, "ranks"), bytes=_p("size", REQUIRED, "message size"),
                   msgs=_p("int", 0, "messages per iteration (0: np)"), seed=_p("int", 0, "random seed"),
                   iters=_p("int", 1, "iterations"),
                   compute=_p("float", 0.0, "seconds of computation before each iteration", "compute_s")),
    "transpose": _gen(transpose, "transpose on a square grid: rank (i, j) exchanges with (j, i)",
                      rows=_p("int", REQUIRED, "grid rows"), cols=_p("int", REQUIRED, "grid columns (= rows)"),
                      bytes=_p("size", REQUIRED, "message size"), iters=_p("int", 1, "iterations"),
                      compute=_p("float", 0.0, "seconds of computation before each iteration", "compute_s")),
    "halo-transpose": _gen(halo_transpose, "two phases: neighbor2d, then transpose (issue 21's workload)",
                           rows=_p("int", REQUIRED, "grid rows"), cols=_p("int", REQUIRED, "grid columns (= rows)"),
                           bytes=_p("size", REQUIRED, "message size"), iters=_p("int", 5, "iterations of each")),
    "npb": _gen(npb, "NPB 3.4 MPI skeletons (topoplan/traffic/npb.py)",
                kernel=_p("str", REQUIRED, "cg, mg, is, lu or ft"), np=_p("int", REQUIRED, "ranks"),
                **{"class": _p("str", "C", "problem class S, W, A-F", "klass")},
                iters=_p("int", None, "timed iterations (default: the class's)"),
                compute=_p("float", 0.0, "seconds of computation before each MPI call", "compute_s")),
}

_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def _convert(gen: str, key: str, kind: str, text: str):
    err = TopoplanError(f"traffic spec {gen!r}: parameter {key!r}: bad value {text!r} (expected {kind})")
    t = text.strip()
    try:
        if kind == "int":
            if not is_ascii_int(t):   # int() also takes '٣', '+3' and '1_0'
                raise ValueError
            v = int(t)
        elif kind == "float":
            if not is_ascii_number(t):   # float() also takes '٣' and '1_0'
                raise ValueError
            v = float(t)
            if not numpy.isfinite(v):
                raise ValueError
        elif kind == "size":
            v = parse_size(t)
        elif kind == "bool":
            if t.lower() not in _TRUE + _FALSE:
                raise ValueError
            v = t.lower() in _TRUE
        else:
            if not t:
                raise ValueError
            v = t
    except (ValueError, TopoplanError):
        raise err from None
    if kind in ("int", "float") and v < 0:
        raise TopoplanError(f"traffic spec {gen!r}: parameter {key!r}: must be non-negative, got {text!r}")
    return v


def is_spec(text: str) -> bool:
    """True for ``name`` or ``name:...`` where ``name`` is a registered generator.

    Only the name is checked; :func:`parse_spec` checks the parameters.

    Parameters
    ----------
    text : str
        A traffic argument.

    Returns
    -------
    bool

    Examples
    --------
    >>> is_spec("ring:np=4,bytes=1KB"), is_spec("npb"), is_spec("traffic.csv")
    (True, True, False)
    """
    s = str(text).strip()
    name, colon, _ = s.partition(":")
    return name.strip().lower() in GENERATORS and (bool(colon) or name.strip() == s)


def _parse(spec: str) -> tuple[str, dict]:
    """The generator's name and its keyword arguments (defaults filled in) of a spec string."""
    name, _, rest = str(spec).strip().partition(":")
    name = name.strip().lower()
    gen = GENERATORS.get(name)
    if gen is None:
        raise TopoplanError(f"unknown traffic generator {name!r} (known: {', '.join(GENERATORS)})")
    given: dict[str, object] = {}
    for item in (x.strip() for x in rest.split(",")):
        if not item:
            continue
        key, eq, value = item.partition("=")
        key = key.strip().lower()
        if not eq:
            raise TopoplanError(f"traffic spec {name!r}: expected key=value, got {item!r}")
        if key not in gen.params:
            raise TopoplanError(f"traffic spec {name!r}: unknown parameter {key!r} (known: {', '.join(gen.params)})")
        if key in given:
            raise TopoplanError(f"traffic spec {name!r}: parameter {key!r} given twice")
        given[key] = _convert(name, key, gen.params[key].kind, value)
    kwargs = {}
    for key, par in gen.params.items():
        if key in given:
            kwargs[par.arg] = given[key]
        elif par.default is REQUIRED:
            raise TopoplanError(f"traffic spec {name!r}: missing parameter {key!r}")
        else:
            kwargs[par.arg] = par.default
    return name, kwargs


def parse_spec(spec: str) -> Trace:
    """Run the generator that a spec string ``name:key=value,...`` names.

    Sizes accept units (``4MB`` = 4e6 bytes, ``4MiB`` = 2^22 bytes).

    Parameters
    ----------
    spec : str
        E.g. ``neighbor2d:rows=16,cols=16,bytes=4MB,iters=5``.

    Returns
    -------
    topoplan.traffic.trace.Trace
        The generated trace; its ``source`` is the spec.

    Raises
    ------
    TopoplanError
        Naming the generator and the parameter for an unknown generator, an
        unknown, repeated or missing parameter, or a bad value.

    See Also
    --------
    describe_generators : the generators and their parameters.

    Examples
    --------
    >>> t = parse_spec("ring:np=4,bytes=1KB")
    >>> t.n_ranks, t.source
    (4, 'ring:np=4,bytes=1KB')
    >>> parse_spec("ring:np=4,byte=1KB")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: traffic spec 'ring': unknown parameter 'byte' (known: np, bytes, iters, compute)
    """
    name, kwargs = _parse(spec)
    try:
        trace = GENERATORS[name].fn(**kwargs)
    except TopoplanError as exc:
        msg = str(exc)
        raise TopoplanError(msg if msg.startswith("traffic spec") else f"traffic spec {name!r}: {msg}") from None
    trace.source = str(spec).strip()
    return trace


def _npb_recording(kernel, np, klass="C", iters=None, compute_s=0.0):
    from topoplan.traffic.npb import npb_recording

    return npb_recording(kernel, klass, np, iters, compute_s)


_RECORDINGS = {"neighbor2d": _neighbor2d_recording, "alltoall": _alltoall_recording, "ring": _ring_recording,
               "random": _random_recording, "npb": _npb_recording}
_PUBLIC = {"neighbor2d": neighbor2d, "alltoall": alltoall, "ring": ring, "random": random, "npb": npb}


class Recording(NamedTuple):
    """A generator spec's calls as recorded, before any trace row is written (:func:`record_spec`).

    Parameters
    ----------
    name : str
        The generator.
    source : str
        The spec; the ``source`` of what is built from it.
    builder : TraceBuilder
        The recording (repeated iterations recorded once).
    communicators : dict or None
        Communicators other than MPI_COMM_WORLD.

    Examples
    --------
    >>> r = record_spec("ring:np=4,bytes=1KB,iters=3")
    >>> r.n_ranks, r.rows, len(r.build()), [len(p) for p in r.pieces(max_rows=8)]
    (4, 36, 36, [8, 8, 8, 8, 4])
    """

    name: str
    source: str
    builder: TraceBuilder
    communicators: dict | None

    @property
    def n_ranks(self) -> int:
        return self.builder.n

    @property
    def rows(self) -> int:
        return self.builder.rows

    def _wrap(self, exc: TopoplanError) -> TopoplanError:
        msg = str(exc)
        return TopoplanError(msg if msg.startswith("traffic spec") else f"traffic spec {self.name!r}: {msg}")

    def build(self) -> Trace:
        """The whole trace, as :func:`parse_spec` returns it (refused first if memory cannot hold it)."""
        try:
            return self.builder.build(self.source, self.communicators)
        except TopoplanError as exc:
            raise self._wrap(exc) from None

    def pieces(self, max_rows: int | None = None):
        """The trace in pieces of about ``max_rows`` rows (:meth:`TraceBuilder.pieces`)."""
        try:
            yield from self.builder.pieces(self.source, self.communicators, max_rows)
        except TopoplanError as exc:
            raise self._wrap(exc) from None

    def rows_per_rank(self) -> numpy.ndarray:
        """Rows of the trace per rank (:meth:`TraceBuilder.rows_per_rank`)."""
        return self.builder.rows_per_rank()

    def blocks(self, max_rows: int | None = None):
        """Every recorded block once with its number of occurrences (:meth:`TraceBuilder.blocks`)."""
        try:
            yield from self.builder.blocks(self.source, self.communicators, max_rows)
        except TopoplanError as exc:
            raise self._wrap(exc) from None


def record_spec(spec: str) -> Recording | None:
    """Record the calls of the generator a spec names, without writing the trace's rows.

    Recording is cheap at any size (each repeated iteration is recorded
    once): the :class:`Recording` tells the trace's size (``rows``) and
    builds it whole (``build``, checked against the memory available), in
    pieces of bounded size (``pieces``: streamed generation, for traces
    that memory cannot hold), or as its distinct blocks with their counts
    (``blocks``, what :func:`topoplan.traffic.matrix.load_traffic` reads).

    Parameters
    ----------
    spec : str
        A generator spec, as for :func:`parse_spec`.

    Returns
    -------
    Recording or None
        None for a generator added to :data:`GENERATORS` without a recording
        function (use :func:`parse_spec`).

    Raises
    ------
    TopoplanError
        As :func:`parse_spec`, except the memory check (made by ``build``).

    Examples
    --------
    >>> r = record_spec("npb:kernel=cg,class=C,np=65536,iters=1")
    >>> r.n_ranks, r.rows, r.source
    (65536, 258932736, 'npb:kernel=cg,class=C,np=65536,iters=1')
    """
    name, kwargs = _parse(spec)
    fn = _RECORDINGS.get(name)
    if fn is None or GENERATORS[name].fn is not _PUBLIC[name]:
        return None
    try:
        b, _, comms = fn(**kwargs)
    except TopoplanError as exc:
        msg = str(exc)
        raise TopoplanError(msg if msg.startswith("traffic spec") else f"traffic spec {name!r}: {msg}") from None
    return Recording(name, str(spec).strip(), b, comms)


def describe_generators() -> str:
    """Help text listing every generator with its parameters (for the CLI).

    Returns
    -------
    str
        One line per generator (required and optional parameters, help),
        then one indented line per parameter.

    Examples
    --------
    >>> print(describe_generators().splitlines()[0])
    neighbor2d:rows=<int>,cols=<int>,bytes=<size>[,iters=1,compute=0.0]  -- 2-D neighbour exchange: ...
    >>> "neighbor2d:rows=<int>,cols=<int>,bytes=<size>" in describe_generators()
    True
    """
    lines = []
    for name, g in GENERATORS.items():
        req = [f"{k}=<{p.kind}>" for k, p in g.params.items() if p.default is REQUIRED]
        opt = [f"{k}={'default' if p.default is None else p.default}" for k, p in g.params.items()
               if p.default is not REQUIRED]
        lines.append(f"{name}:{','.join(req)}" + (f"[,{','.join(opt)}]" if opt else "") + f"  -- {g.help}")
        for k, p in g.params.items():
            lines.append(f"    {k:<8} {p.kind:<5} {p.help}")
    return "\n".join(lines)
