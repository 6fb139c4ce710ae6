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
from topoplan.core.csvtable import read_csv_table, row_line, to_numbers
from topoplan.core.errors import TopoplanError, where
from topoplan.core.io import atomic_write
from topoplan.traffic import limits
from topoplan.traffic.collectives import expand_trace_collectives
from topoplan.traffic.trace import COLUMNS, check_limits, op_codes

__all__ = ["Traffic", "from_arrays", "read_matrix", "from_trace", "from_recording"]


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
        The CSV file; ``msgs`` is optional (one message per row without it); ``calls``, as a matrix made from
        MPI calls names it (one message per call), is read as ``msgs``.
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
        :func:`topoplan.core.csvtable.read_csv_table`), a column other than
        these (its values would be ignored), a negative value, bytes
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
    path = Path(path)
    df = read_csv_table(path, ("src", "dst", "bytes"), "communication matrix", optional=("msgs", "calls"),
                        others=False, max_rows=limits.MAX_TRACE_ROWS, numbers=True)
    if "calls" in df.columns:   # the name a matrix made from MPI calls gives the count (one message per call)
        if "msgs" in df.columns:
            raise TopoplanError(f"{where(path, df.attrs['header_line'])}: columns 'msgs' and 'calls' both count the "
                                "messages of a row: keep one")
        df = df.rename(columns={"calls": "msgs"})
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
    for a, b in zip(cuts[:-1], cuts[1:]):
        yield dataclasses.replace(trace, **{c: getattr(trace, c)[a:b] for c in COLUMNS})


def _messages(trace):
    """``(src, dst, bytes)`` of every message of a trace: explicit sends, then the expanded collectives."""
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


def from_recording(rec, name: str = "") -> Traffic:
    """The traffic of a generator's recording: the messages of every recorded block once, counted as many
    times as the block occurs (a message does not depend on when it is sent).

    The same groups as :func:`from_trace` of the trace the recording builds, without building it.

    Parameters
    ----------
    rec : topoplan.traffic.generators.Recording
    name : str, optional

    Returns
    -------
    Traffic

    Examples
    --------
    >>> from topoplan.traffic.generators import record_spec
    >>> rec = record_spec("ring:np=4,bytes=1MB,iters=3")
    >>> t, u = from_recording(rec), from_trace(rec.build())
    >>> t.count.tolist() == u.count.tolist(), t.total_bytes() == u.total_bytes()
    (True, True)
    """
    groups = _Groups(rec.n_ranks)
    for block, times in rec.blocks():
        src, dst, size = _messages(block)
        groups.add(src, dst, size, np.full(len(src), times, dtype=np.int64))
    return groups.traffic(name)
