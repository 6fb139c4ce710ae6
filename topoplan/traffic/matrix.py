"""Traffic: who sends how much to whom, as message groups.

A :class:`Traffic` is a list of groups ``(src, dst, msg_bytes, count)``:
``count`` messages of ``msg_bytes`` each from rank ``src`` to rank ``dst``.
Keeping message sizes (not only totals) is what lets analysis split large
from small messages at a threshold. A communication matrix file gives one
group per pair with the average message size. Traces and generators are
turned into traffic by expanding every send and every collective (MPICH
algorithms, :mod:`topoplan.traffic.collectives`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from topoplan.core.arrays import unique_inverse
from topoplan.core.errors import TopoplanError

__all__ = ["Traffic", "from_arrays", "read_matrix", "from_trace", "is_matrix_file", "load_source", "load_traffic"]


@dataclass
class Traffic:
    """Point-to-point traffic between ranks (see the module docstring).

    Parameters
    ----------
    n_ranks : int
        Ranks of the communicator; every ``src`` and ``dst`` is below it.
    src, dst : numpy.ndarray of int64
        Sending and receiving rank of each group.
    msg_bytes : numpy.ndarray of float64
        Size of each message of the group, in bytes.
    count : numpy.ndarray of int64
        Messages in the group.
    name : str, optional
        Where the traffic came from (a file or generator spec).

    See Also
    --------
    from_arrays : build one, merging equal groups.
    load_traffic : from a generator spec, matrix file or trace.

    Examples
    --------
    >>> t = from_arrays(4, src=[0, 0, 1], dst=[1, 1, 2], msg_bytes=[1e6, 1e6, 10.0])
    >>> t.count.tolist(), t.bytes.tolist()
    ([2, 1], [2000000.0, 10.0])
    >>> t.total_bytes()
    2000010.0
    >>> float(t.dense(1000, large=True).sum())  # only messages of at least 1000 bytes
    2000000.0
    """

    n_ranks: int
    src: np.ndarray
    dst: np.ndarray
    msg_bytes: np.ndarray
    count: np.ndarray
    name: str = ""

    @property
    def bytes(self) -> np.ndarray:
        return self.msg_bytes * self.count

    def total_bytes(self, include_self: bool = False) -> float:
        keep = np.ones(len(self.src), bool) if include_self else self.src != self.dst
        return float(self.bytes[keep].sum())

    def matrix(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Aggregate to one row per ordered pair: ``(src, dst, bytes, msgs)`` sorted by (src, dst)."""
        key = self.src * self.n_ranks + self.dst
        uniq, inv = unique_inverse(key)
        by = np.bincount(inv, weights=self.bytes, minlength=len(uniq))
        msgs = np.bincount(inv, weights=self.count, minlength=len(uniq)).astype(np.int64)
        return uniq // self.n_ranks, uniq % self.n_ranks, by, msgs

    def dense(self, large_threshold: float | None = None, *, large: bool | None = None) -> np.ndarray:
        """Dense ``n_ranks x n_ranks`` byte matrix; with ``large=True/False`` only messages >= / < threshold."""
        keep = np.ones(len(self.src), bool)
        if large is not None:
            is_large = self.msg_bytes >= large_threshold
            keep = is_large if large else ~is_large
        m = np.zeros((self.n_ranks, self.n_ranks))
        np.add.at(m, (self.src[keep], self.dst[keep]), self.bytes[keep])
        return m

    def write_matrix(self, path) -> None:
        """Write the communication matrix CSV ``src,dst,bytes,msgs`` atomically."""
        from topoplan.core.io import atomic_write

        s, d, b, m = self.matrix()
        lines = ["src,dst,bytes,msgs"] + [f"{a},{c},{_num(x)},{y}" for a, c, x, y in zip(s, d, b, m)]
        atomic_write(path, "\n".join(lines) + "\n")


def _num(x: float):
    return int(round(x)) if abs(x - round(x)) < 1e-6 else x


def from_arrays(n_ranks, src, dst, msg_bytes, count=None, name="") -> Traffic:
    """Traffic from parallel arrays of messages; groups with the same (src, dst, size) are merged.

    Parameters
    ----------
    n_ranks : int
        Ranks of the communicator.
    src, dst : array_like of int
        Sending and receiving rank of each entry.
    msg_bytes : array_like of float
        Message size of each entry, in bytes.
    count : array_like of int, optional
        Messages per entry; default one each.
    name : str, optional
        Name of the traffic.

    Returns
    -------
    Traffic
        One group per distinct ``(src, dst, msg_bytes)``, sorted by them.

    Examples
    --------
    >>> t = from_arrays(4, [0, 0, 1], [1, 1, 2], [1e6, 1e6, 10.0])
    >>> t.src.tolist(), t.dst.tolist(), t.msg_bytes.tolist(), t.count.tolist()
    ([0, 1], [1, 2], [1000000.0, 10.0], [2, 1])
    """
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    msg_bytes = np.asarray(msg_bytes, dtype=np.float64)
    count = np.ones(len(src), dtype=np.int64) if count is None else np.asarray(count, dtype=np.int64)
    return _group(Traffic(int(n_ranks), src, dst, msg_bytes, count, name))


def _group(t: Traffic) -> Traffic:
    """Merge groups with the same (src, dst, msg_bytes), sorted by them.

    One stable sort by ``(src, dst)`` (a single integer key when both are
    ranks) and ``msg_bytes``; the counts add up exactly (int64).
    """
    k = len(t.src)
    if k == 0:
        return t
    src, dst, size, count = t.src, t.dst, t.msg_bytes, t.count
    n = max(int(t.n_ranks), 1)
    if src.min() >= 0 and dst.min() >= 0 and max(src.max(), dst.max()) < n and n < 2 ** 31:
        pair = src * n + dst                      # orders as (src, dst)
        order = np.lexsort((size, pair))
        pair = pair[order]
        src, dst = np.divmod(pair, n)
        new = pair[1:] != pair[:-1]
        del pair
    else:
        order = np.lexsort((size, dst, src))
        src, dst = src[order], dst[order]
        new = (src[1:] != src[:-1]) | (dst[1:] != dst[:-1])
    size = size[order]
    new |= size[1:] != size[:-1]
    start = np.flatnonzero(np.r_[True, new])
    del new
    count = np.add.reduceat(count[order], start).astype(np.int64)
    return Traffic(t.n_ranks, src[start].astype(np.int64), dst[start].astype(np.int64),
                   size[start].astype(np.float64), count, t.name)


def read_matrix(path, n_ranks: int | None = None) -> Traffic:
    """Read a communication matrix CSV ``src,dst,bytes,msgs`` (plain or gzip).

    Rows with the same pair add up. Each pair becomes one group of ``msgs``
    messages of the average size.

    Parameters
    ----------
    path : str or path
        The CSV file; ``msgs`` is optional (one message per row without it).
    n_ranks : int, optional
        Ranks of the communicator; default one more than the largest rank seen.

    Returns
    -------
    Traffic
        One group per ordered pair, named after the file.

    Raises
    ------
    TopoplanError
        Naming the line of a malformed row (see
        :func:`topoplan.traffic.trace.read_csv_table`), a negative value, bytes
        with ``msgs`` 0, or a rank outside the communicator (``n_ranks`` when given).

    See Also
    --------
    Traffic.write_matrix : writes this format.

    Examples
    --------
    >>> import os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "matrix.csv")
    >>> with open(path, "w") as fh:
    ...     _ = fh.write("src,dst,bytes,msgs\\n0,1,2000000,2\\n1,2,10,1\\n0,1,1000000,1\\n")
    >>> m = read_matrix(path)
    >>> m.n_ranks, m.src.tolist(), m.msg_bytes.tolist(), m.count.tolist()
    (3, [0, 1], [1000000.0, 10.0], [3, 1])
    >>> read_matrix(path, n_ranks=2)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: .../matrix.csv:3: field 'dst': rank 2 is outside the communicator of 2 ranks
    """
    from topoplan.traffic.trace import check_limits, read_csv_table, row_line, to_numbers

    path = Path(path)
    df = read_csv_table(path, ("src", "dst", "bytes"), "communication matrix")
    src = to_numbers(df, "src", path, integer=True, empty=None)
    dst = to_numbers(df, "dst", path, integer=True, empty=None)
    by = to_numbers(df, "bytes", path, integer=False, empty=None)
    msgs = (to_numbers(df, "msgs", path, integer=True, empty=None) if "msgs" in df.columns
            else np.ones(len(df), dtype=np.int64))
    for col, arr in (("src", src), ("dst", dst), ("bytes", by), ("msgs", msgs)):
        bad = np.flatnonzero(arr < 0)
        if bad.size:
            raise TopoplanError(f"{path}:{row_line(df, bad[0])}: field '{col}': must be non-negative, "
                                f"got {arr[bad[0]]}")
    bad = np.flatnonzero((msgs == 0) & (by > 0))
    if bad.size:  # bytes need at least one message to carry them; counting one would invent it
        i = int(bad[0])
        raise TopoplanError(f"{path}:{row_line(df, i)}: field 'msgs': 0 messages cannot carry {_num(by[i])} bytes")
    check_limits(path, df, src=src, dst=dst, bytes=by, msgs=msgs)
    n = int(max(src.max(initial=-1), dst.max(initial=-1)) + 1) if n_ranks is None else int(n_ranks)
    for col, arr in (("src", src), ("dst", dst)):
        bad = np.flatnonzero(arr >= n)
        if bad.size:
            raise TopoplanError(f"{path}:{row_line(df, bad[0])}: field '{col}': rank {arr[bad[0]]} is outside the "
                                f"communicator of {n} ranks")
    key = src * max(n, 1) + dst
    uniq, inv = np.unique(key, return_inverse=True)
    tot = np.bincount(inv, weights=by, minlength=len(uniq)).astype(np.float64)
    cnt = np.bincount(inv, weights=msgs, minlength=len(uniq))
    if cnt.max(initial=0) >= 2.0 ** 62:
        k = int(np.argmax(cnt))
        raise TopoplanError(f"{path}: field 'msgs': the rows of pair {uniq[k] // max(n, 1)} -> {uniq[k] % max(n, 1)} "
                            f"add up to {cnt[k]:.3g} messages, out of range")
    cnt = cnt.astype(np.int64)
    keep = cnt > 0
    size = np.divide(tot, cnt, out=np.zeros_like(tot), where=cnt > 0)
    return Traffic(n, (uniq // max(n, 1))[keep], (uniq % max(n, 1))[keep], size[keep], cnt[keep], path.name)


def from_trace(trace) -> Traffic:
    """All point-to-point messages of a trace: explicit sends plus expanded collectives.

    Collectives become the point-to-point messages of the MPICH algorithm
    their size selects (:func:`topoplan.traffic.collectives.expand_trace_collectives`).
    A long trace is read in slices of whole ranks, so the extracted messages
    take memory in proportion to a slice (about 4 M rows), not to the trace.

    Parameters
    ----------
    trace : topoplan.traffic.trace.Trace
        The event trace.

    Returns
    -------
    Traffic
        Named after the trace's directory (or source).

    Examples
    --------
    >>> from topoplan.traffic.generators import parse_spec
    >>> t = from_trace(parse_spec("ring:np=4,bytes=1MB,iters=2"))
    >>> t.n_ranks, t.src.tolist(), t.dst.tolist(), t.count.tolist()
    (4, [0, 1, 2, 3], [1, 2, 3, 0], [2, 2, 2, 2])
    """
    groups = _Groups(trace.n_ranks)
    for part in _rank_slices(trace, _SLICE_ROWS):
        groups.add(*_messages(part))
    return groups.traffic(Path(trace.source).parent.name or trace.source)


# from_trace works through a long trace in slices of whole ranks of about this many rows, so the messages
# it extracts (and their sort) take memory in proportion to a slice, not to the trace.
_SLICE_ROWS = 1 << 22


def _rank_slices(trace, max_rows: int):
    """The trace as views of consecutive whole ranks, about ``max_rows`` rows each (one view if its rows
    are not in rank order)."""
    import dataclasses

    n = len(trace)
    if n <= max_rows or bool((trace.rank[1:] < trace.rank[:-1]).any()):
        yield trace
        return
    bounds = np.searchsorted(trace.rank, np.arange(int(trace.rank[-1]) + 2))
    cuts = [0]
    while cuts[-1] < n:   # the first rank boundary at least max_rows after the last cut (or the end)
        cuts.append(int(bounds[min(np.searchsorted(bounds, cuts[-1] + max_rows), len(bounds) - 1)]))
    cols = ("rank", "op", "peer", "bytes", "root", "comm_size", "t_start", "t_end", "comm", "tag", "req")
    for a, b in zip(cuts[:-1], cuts[1:]):
        yield dataclasses.replace(trace, **{c: getattr(trace, c)[a:b] for c in cols})


def _messages(trace):
    """``(src, dst, bytes)`` of every message of a trace: explicit sends, then the expanded collectives."""
    from topoplan.traffic.collectives import expand_trace_collectives
    from topoplan.traffic.trace import op_codes

    send = np.isin(trace.op, op_codes(("send", "isend", "sendrecv"))) & (trace.peer >= 0)
    cs, cd, cb = expand_trace_collectives(trace)
    return (np.concatenate([trace.rank[send], np.asarray(cs, dtype=np.int64)]),
            np.concatenate([trace.peer[send], np.asarray(cd, dtype=np.int64)]),
            np.concatenate([trace.bytes[send], np.asarray(cb, dtype=np.float64)]))


class _Groups:
    """Message groups gathered part by part (:func:`_group` of each part, merged when they pile up)."""

    def __init__(self, n_ranks: int):
        self.n = int(n_ranks)
        self.parts: list[Traffic] = []
        self.held = 0
        self.merged = 0

    def add(self, src, dst, msg_bytes, count=None) -> None:
        src = np.asarray(src, dtype=np.int64)
        count = np.ones(len(src), dtype=np.int64) if count is None else np.asarray(count, dtype=np.int64)
        g = _group(Traffic(self.n, src, np.asarray(dst, dtype=np.int64), np.asarray(msg_bytes, dtype=np.float64),
                           count))
        self.parts.append(g)
        self.held += len(g.src)
        if len(self.parts) > 1 and self.held > max(_SLICE_ROWS, 2 * self.merged):
            self._merge()

    def _merge(self) -> None:
        if len(self.parts) > 1:
            p = self.parts
            self.parts = [_group(Traffic(self.n, np.concatenate([g.src for g in p]), np.concatenate([g.dst for g in p]),
                                         np.concatenate([g.msg_bytes for g in p]),
                                         np.concatenate([g.count for g in p])))]
        self.held = self.merged = sum(len(g.src) for g in self.parts)

    def traffic(self, name: str) -> Traffic:
        self._merge()
        if not self.parts:
            e = np.zeros(0, dtype=np.int64)
            return Traffic(self.n, e, e.copy(), np.zeros(0), e.copy(), name)
        t = self.parts[0]
        t.name = name
        return t


def is_matrix_file(path: Path) -> bool:
    """A CSV whose header has src and dst columns (any order) is a matrix; one with rank, op is a trace.

    Parameters
    ----------
    path : path
        The file, plain or gzip.

    Returns
    -------
    bool
        True for a communication matrix.

    Raises
    ------
    TopoplanError
        If the file cannot be read.

    Examples
    --------
    >>> import os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "m.csv")
    >>> with open(path, "w") as fh:
    ...     _ = fh.write("dst,src,bytes\\n1,0,100\\n")
    >>> is_matrix_file(path)
    True
    """
    import csv

    from topoplan.core.io import read_bytes

    # the first MiB (decompressed as a stream, like every gzip input): the header is in it
    head = read_bytes(path, "traffic file", limit=1 << 20, head=True)
    # utf-8-sig: a byte order mark (spreadsheet exports) is not part of the first column's name
    lines = head.decode("utf-8-sig", errors="replace").split("\n", 1000)[:1000]
    # the header is the first line that is not blank, as for read_csv_table
    header = next((line for line in lines if line.strip()), "")
    cols = {c.strip().lower() for c in next(csv.reader([header.strip("\r\n")], skipinitialspace=True), [])}
    return {"src", "dst"} <= cols and "op" not in cols


def load_source(spec: str, n_ranks: int | None = None, *, with_traffic: bool = True, pieces: bool = False):
    """Resolve a traffic argument: a generator spec, a matrix CSV, or a trace CSV (or a trace directory).

    Parameters
    ----------
    spec : str
        A generator spec (``neighbor2d:rows=16,cols=16,bytes=4MB,iters=5``, see
        :mod:`topoplan.traffic.generators`), a communication matrix CSV, a trace CSV, a
        directory holding ``events.csv.gz`` or ``events.csv`` (``topoplan trace``), or an OTF2
        archive (``traces.otf2`` or its directory, :mod:`topoplan.traffic.otf2`).
    n_ranks : int, optional
        Ranks of the communicator, for files; default from the largest rank seen.
    with_traffic : bool, optional
        False: skip the traffic of a trace or generator (None is returned in
        its place; a matrix's is always returned). A replay needs only the
        trace, and a large alltoall's traffic is one entry per rank pair.
    pieces : bool, optional
        With ``with_traffic=False``: a generator whose trace has more than
        :data:`~topoplan.traffic.generators.PIECE_ROWS` rows is returned as its
        :class:`~topoplan.traffic.generators.Recording` instead of its trace, which
        :func:`topoplan.sim.replay.replay` generates and runs a piece at a time.

    Returns
    -------
    trace : topoplan.traffic.trace.Trace, Recording or None
        The event trace (for replay) of a generator or trace file (a generator's recording with
        ``pieces``); None for a matrix.
    traffic : Traffic or None
        Its point-to-point traffic.

    Raises
    ------
    TopoplanError
        For a missing file, an unknown spec, or a malformed file (naming the line).

    Notes
    -----
    Trace rows with MPI calls topoplan does not model are skipped with a
    warning on stderr.

    Examples
    --------
    >>> trace, t = load_source("neighbor2d:rows=4,cols=4,bytes=4MB,iters=1")
    >>> trace.n_ranks, t.n_ranks, t.total_bytes()
    (16, 16, 192000000.0)
    """
    path = Path(spec)
    if path.is_dir():
        path = next((path / f for f in ("events.csv.gz", "events.csv", "traces.otf2") if (path / f).is_file()), path)
    if path.is_file():
        if path.suffix == ".otf2":   # an OTF2 archive's anchor file (Score-P)
            from topoplan.traffic.otf2 import read_otf2 as read_trace
        elif is_matrix_file(path):
            tr = read_matrix(path, n_ranks)
            if tr.n_ranks == 0:
                raise TopoplanError(f"{path}: the matrix has no rows, so no ranks to plan for (an application that "
                                    "only calls collectives, such as NPB FT, needs its MPI trace instead)")
            return None, tr
        else:
            from topoplan.traffic.trace import read_trace

        tr = read_trace(path, n_ranks)
        if tr.unknown_ops:
            # trace.md: calls we do not model are skipped, and the user is told (they may hide messages)
            import sys

            ops = ", ".join(f"{o} ({c})" for o, c in sorted(tr.unknown_ops.items())[:5])
            print(f"warning: {path}: skipped {sum(tr.unknown_ops.values())} rows with calls topoplan does not "
                  f"model: {ops}", file=sys.stderr)
        return tr, (from_trace(tr) if with_traffic else None)
    from topoplan.traffic import generators

    if generators.is_spec(spec):
        rec = generators.record_spec(spec)
        if not with_traffic:
            if rec is not None and pieces and rec.rows > generators.PIECE_ROWS:
                return rec, None
            return (generators.parse_spec(spec) if rec is None else rec.build()), None
        if rec is None:
            tr = generators.parse_spec(spec)
            t = from_trace(tr)
        else:   # the traffic from the recording's blocks: the same groups as from_trace(tr), without its cost
            tr = rec.build()
            t = _recording_traffic(rec)
        t.name = spec
        return tr, t
    if "/" in spec or spec.endswith((".csv", ".gz")):
        raise TopoplanError(f"{spec}: no such traffic file")
    raise TopoplanError(f"unknown traffic {spec!r}: not a file and not a generator spec "
                        f"(e.g. neighbor2d:rows=16,cols=16,bytes=4MB,iters=5)")


def load_traffic(spec: str, n_ranks: int | None = None) -> Traffic:
    """The :class:`Traffic` of a generator spec, matrix file or trace file (see :func:`load_source`).

    Parameters
    ----------
    spec : str
        A generator spec, a matrix or trace CSV, or a trace directory.
    n_ranks : int, optional
        Ranks of the communicator, for files.

    Returns
    -------
    Traffic

    Raises
    ------
    TopoplanError
        For a missing file, an unknown spec or a malformed file.

    See Also
    --------
    load_source : also returns the event trace.

    Notes
    -----
    A generator spec's trace is never built: its traffic comes from the
    generator's recording (:func:`topoplan.traffic.generators.record_spec`),
    each recorded block of calls once, counted as often as it repeats. Time
    and memory follow the recording, not the trace, so traces too large to
    hold (NPB CG class C at 65,536 ranks is 2.6e8 rows, 19 GB as a trace)
    still give their traffic. The groups are those of :func:`load_source`.

    Examples
    --------
    >>> t = load_traffic("neighbor2d:rows=4,cols=4,bytes=4MB,iters=1")
    >>> t.n_ranks, len(t.src), t.total_bytes()
    (16, 48, 192000000.0)
    >>> load_traffic("nosuch")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: unknown traffic 'nosuch': not a file and not a generator spec (e.g. neighbor2d:rows=16,cols=16,bytes=4MB,iters=5)
    >>> t = load_traffic("npb:kernel=cg,class=S,np=16,iters=1")   # from the recording: no trace is built
    >>> u = load_source("npb:kernel=cg,class=S,np=16,iters=1")[1]
    >>> all((getattr(t, c) == getattr(u, c)).all() for c in ("src", "dst", "msg_bytes", "count")), t.name == u.name
    (True, True)
    """
    from topoplan.traffic import generators

    if not Path(spec).exists() and generators.is_spec(spec):
        rec = generators.record_spec(spec)
        if rec is not None:
            return _recording_traffic(rec, spec)
    return load_source(spec, n_ranks)[1]


def _recording_traffic(rec, name: str = "") -> Traffic:
    """The traffic of a generator's recording: the messages of every recorded block once, counted as many
    times as the block occurs (a message does not depend on when it is sent)."""
    groups = _Groups(rec.n_ranks)
    for block, times in rec.blocks():
        src, dst, size = _messages(block)
        groups.add(src, dst, size, np.full(len(src), times, dtype=np.int64))
    return groups.traffic(name)
