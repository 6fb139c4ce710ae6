"""The trace builder: MPI calls recorded for many ranks at once, repeated blocks kept symbolic until the rows
are written, once, into a :class:`~topoplan.traffic.trace.Trace`'s columns (:class:`TraceBuilder`), so that
building takes about the trace's own memory (:data:`~topoplan.traffic.limits.TRACE_ROW_BYTES` a row). The
generators (:mod:`topoplan.traffic.generators`) and the NPB skeletons (:mod:`topoplan.traffic.npb`) share it.
"""

from __future__ import annotations

import numpy

from topoplan.core import deadline
from topoplan.core.errors import TopoplanError
from topoplan.traffic import limits
from topoplan.traffic.trace import OP_CODE, Trace

__all__ = ["TICK_S", "TraceBuilder"]

TICK_S = 1e-9  # duration of one synthetic call; keeps the calls of a rank at distinct times
# Recorded blocks written between two checks of a command's deadline (deadline.check): about 0.25 s of writing
# (LU class A at 256 ranks: 500,000 blocks in 15 s). A trace of fewer is written whole, as past the deadline a
# method still gets its least budget: a plan rather than an error where the input takes milliseconds.
CHECK_EVERY = 8192


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
        :data:`~topoplan.traffic.limits.MAX_GENERATED_ROWS` rows, from :meth:`build` when it would not
        fit in the memory available (:func:`~topoplan.traffic.limits.check_generated_memory`; past
        :data:`~topoplan.traffic.limits.MAX_TRACE_ROWS` rows only memory allows it).

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
        if self.rows + k > limits.MAX_GENERATED_ROWS:
            raise TopoplanError(f"the generated trace would have more than {limits.MAX_GENERATED_ROWS:,} rows ({self.n} "
                                f"ranks): {limits.over_cap_message()}; use fewer ranks, messages or iterations")
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
        for i, (leaf, shifts) in enumerate(blocks):
            if i and not i % CHECK_EVERY:   # inside a command's stage that stops at its time limit
                deadline.check()           # (deadline.stopping); a small trace (milliseconds) is written whole
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
            (:func:`~topoplan.traffic.limits.check_generated_memory`).
        """
        limits.check_generated_memory(self.rows, self.n)
        return self._trace(self._fill(list(_walk(self._items)), self.rows), source, communicators)

    def pieces(self, source: str, communicators=None, max_rows: int | None = None, weight=None):
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
            Rows per piece; default :data:`~topoplan.traffic.limits.PIECE_ROWS`.
        weight : callable, optional
            Counts a row as ``weight(op, comm_size)`` rows instead of one (given and returning arrays, one
            entry per row: op codes and communicator sizes), so that pieces of costly rows hold fewer of them.

        Yields
        ------
        Trace
            At least one (empty when nothing was recorded).

        Examples
        --------
        >>> b = TraceBuilder(2)
        >>> m = b.mark(); b.add([0], "send", peer=1, nbytes=8); b.add([1], "recv", peer=0, nbytes=8)
        >>> b.add([0, 1], "barrier"); b.repeat(m, 4)
        >>> [len(p) for p in b.pieces("demo", max_rows=8)]
        [8, 8]
        >>> heavy = lambda op, size: numpy.where(op == OP_CODE["barrier"], 3.0, 1.0)
        >>> [len(p) for p in b.pieces("demo", max_rows=8, weight=heavy)]   # a barrier's row counts 3
        [4, 4, 4, 4]
        """
        max_rows = limits.PIECE_ROWS if max_rows is None else max(int(max_rows), 1)
        weights: dict = {}     # per recorded block (a repeated block is walked again): its rows' weight
        buf, rows, load, done = [], 0, 0.0, False
        for block in _walk(self._items):
            buf.append(block)
            leaf = block[0]
            rows += leaf.rows
            if weight is None:
                load += leaf.rows
            else:
                w = weights.get(id(leaf))
                if w is None:
                    size = numpy.broadcast_to(numpy.asarray(leaf.size, dtype=numpy.int64), (leaf.rows,))
                    w = weights[id(leaf)] = float(numpy.sum(weight(numpy.full(leaf.rows, leaf.op), size)))
                load += w
            if load >= max_rows:
                yield self._trace(self._fill(buf, rows), source, communicators)
                buf, rows, load, done = [], 0, 0.0, True
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
            Rows per trace; default :data:`~topoplan.traffic.limits.PIECE_ROWS`.

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
        max_rows = limits.PIECE_ROWS if max_rows is None else max(int(max_rows), 1)
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
