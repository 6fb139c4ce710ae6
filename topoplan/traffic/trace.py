"""MPI event traces: reading, writing and building them (format: shared/formats/trace.md).

A :class:`Trace` holds one row per MPI call as NumPy columns, sorted by
``(rank, t_start)`` with file order kept for ties. Generators build traces
with :func:`Trace.from_records`, so analysis and replay see one type.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from topoplan.core.csvtable import empty_cells, read_csv_table, row_line, to_numbers
from topoplan.core.errors import TopoplanError
from topoplan.core.io import atomic_write, is_stdout, output_group
from topoplan.core.units import MAX_VALUE, ascii_int
from topoplan.traffic import limits

__all__ = ["OPS", "OP_CODE", "UNKNOWN_OP", "SEND_OPS", "RECV_OPS", "COLLECTIVE_OPS", "WORLD", "REQUIRED",
           "OPTIONAL_INT", "MAX_RANKS", "MAX_MESSAGES", "MAX_TIME_S", "MAX_SPAN_S", "op_codes",
           "Trace", "write_trace", "check_limits", "check_times", "read_trace", "call_order", "call_namer",
           "check_calls",
           "per_destination_calls", "COLUMNS"]

OPS = ("send", "isend", "recv", "irecv", "sendrecv", "wait", "waitall", "bcast", "reduce",
       "allreduce", "alltoall", "alltoallv", "allgather", "allgatherv", "gather", "scatter",
       "reduce_scatter", "barrier")
OP_CODE = {name: i for i, name in enumerate(OPS)}
UNKNOWN_OP = -1
SEND_OPS = ("send", "isend", "sendrecv")
RECV_OPS = ("recv", "irecv")
COLLECTIVE_OPS = ("bcast", "reduce", "allreduce", "alltoall", "alltoallv", "allgather",
                  "allgatherv", "gather", "scatter", "reduce_scatter", "barrier")
WORLD = -1  # comm id of MPI_COMM_WORLD when the trace has no comm column
# a trace's per-row columns (the arrays of a Trace, in its fields' order)
COLUMNS = ("rank", "op", "peer", "bytes", "root", "comm_size", "t_start", "t_end", "comm", "tag", "req")

REQUIRED = ("rank", "op", "peer", "bytes", "root", "comm_size", "t_start", "t_end")
OPTIONAL_INT = ("comm", "tag", "req")


def op_codes(names) -> np.ndarray:
    """Codes of op names (tuple/list of str) for use with ``np.isin(trace.op, ...)``.

    Parameters
    ----------
    names : iterable of str
        Names from :data:`OPS`.

    Returns
    -------
    numpy.ndarray of int16
        Their codes (:data:`OP_CODE`).

    Examples
    --------
    >>> op_codes(("send", "isend")).tolist()
    [0, 1]
    >>> t = Trace.from_records([(0, "isend", 1, 8, -1, 2, 0.0, 0.0), (1, "recv", 0, 8, -1, 2, 0.0, 0.0)], 2)
    >>> np.isin(t.op, op_codes(SEND_OPS)).tolist()
    [True, False]
    """
    return np.array([OP_CODE[n] for n in names], dtype=np.int16)


@dataclass
class Trace:
    """An MPI event trace as columns (one entry per call).

    Parameters mirror the CSV columns; ``peer``, ``root``, ``tag`` and
    ``req`` use -1 for empty. ``communicators`` maps a comm id to the world
    ranks of its members (in communicator rank order); ids not in it, and
    :data:`WORLD`, mean MPI_COMM_WORLD.

    Parameters
    ----------
    n_ranks : int
        Size of MPI_COMM_WORLD.
    rank, peer, root, comm_size, comm, tag : numpy.ndarray of int64
        Per call: the calling rank, the point-to-point partner, the
        collective's root, the communicator's size and id, the tag.
    op : numpy.ndarray of int16
        Per call: the code of its name (:data:`OP_CODE`; :data:`UNKNOWN_OP` for calls not modelled).
    bytes, t_start, t_end : numpy.ndarray of float64
        Per call: message size in bytes, start and end in seconds.
    req : numpy.ndarray of int8
        What a ``wait`` completes (1 send, 0 receive, -1 unknown).
    communicators : dict of int to numpy.ndarray, optional
    unknown_ops : dict of str to int, optional
        Calls read but not modelled, with their counts.
    source : str, optional
        The file (or generator spec) it came from; used in error messages.

    See Also
    --------
    read_trace : read one from a file.
    topoplan.traffic.builder.TraceBuilder : build one call by call.

    References
    ----------
    The columns are those of ``shared/formats/trace.md``.

    Examples
    --------
    >>> t = Trace.from_records([(0, "send", 1, 8, -1, 2, 0.0, 1e-6),
    ...                         (1, "recv", 0, 8, -1, 2, 0.0, 1e-6)], 2, source="demo")
    >>> len(t), t.op_counts()
    (2, {'send': 1, 'recv': 1})
    >>> t.members(-1).tolist()  # MPI_COMM_WORLD
    [0, 1]
    """

    n_ranks: int
    rank: np.ndarray
    op: np.ndarray
    peer: np.ndarray
    bytes: np.ndarray
    root: np.ndarray
    comm_size: np.ndarray
    t_start: np.ndarray
    t_end: np.ndarray
    comm: np.ndarray
    tag: np.ndarray
    req: np.ndarray
    communicators: dict[int, np.ndarray] = field(default_factory=dict)
    unknown_ops: dict[str, int] = field(default_factory=dict)
    source: str = ""

    def __len__(self) -> int:
        return len(self.rank)

    def members(self, comm_id: int) -> np.ndarray:
        """World ranks of a communicator, in communicator-rank order."""
        got = self.communicators.get(int(comm_id))
        return got if got is not None else np.arange(self.n_ranks)

    def local_ranks(self, comm_id: int) -> np.ndarray:
        """Each world rank's rank in a communicator, indexed by world rank (-1: not a member).

        Examples
        --------
        >>> t = Trace.from_records([], 4, communicators={1: [3, 1]})
        >>> t.local_ranks(1).tolist(), t.local_ranks(0).tolist()
        ([-1, 1, -1, 0], [0, 1, 2, 3])
        """
        members = np.asarray(self.members(comm_id), dtype=np.int64)
        pos = np.full(max(self.n_ranks, int(members.max(initial=-1)) + 1), -1, dtype=np.int64)
        pos[members] = np.arange(len(members))
        return pos

    def op_names(self) -> np.ndarray:
        names = np.array(OPS + ("unknown",), dtype=object)
        return names[np.where(self.op < 0, len(OPS), self.op)]

    def op_counts(self) -> dict[str, int]:
        codes, counts = np.unique(self.op, return_counts=True)
        out = {OPS[c] if c >= 0 else "unknown": int(n) for c, n in zip(codes, counts)}
        return out

    # -- construction ---------------------------------------------------
    @classmethod
    def from_records(cls, records, n_ranks: int, communicators=None, source: str = "generated") -> "Trace":
        """Build a trace from tuples ``(rank, op, peer, bytes, root, comm_size, t_start, t_end[, comm[, tag]])``.

        ``op`` is a name from :data:`OPS`. Missing ``comm``/``tag`` are -1.

        >>> t = Trace.from_records([(0, "send", 1, 8, -1, 2, 0.0, 0.0), (1, "recv", 0, 8, -1, 2, 0.0, 0.0)], 2)
        >>> len(t)
        2
        """
        rows = [tuple(r) + (-1,) * (10 - len(r)) for r in records]
        if rows:
            cols = list(zip(*rows))
        else:
            cols = [[] for _ in range(10)]
        try:
            op = np.array([OP_CODE[o] for o in cols[1]], dtype=np.int16)
        except KeyError as exc:
            raise TopoplanError(f"{source}: unknown op {exc.args[0]!r}") from None
        t = cls(
            n_ranks=int(n_ranks),
            rank=np.asarray(cols[0], dtype=np.int64),
            op=op,
            peer=np.asarray(cols[2], dtype=np.int64),
            bytes=np.asarray(cols[3], dtype=np.float64),
            root=np.asarray(cols[4], dtype=np.int64),
            comm_size=np.asarray(cols[5], dtype=np.int64),
            t_start=np.asarray(cols[6], dtype=np.float64),
            t_end=np.asarray(cols[7], dtype=np.float64),
            comm=np.asarray(cols[8], dtype=np.int64),
            tag=np.asarray(cols[9], dtype=np.int64),
            req=np.full(len(rows), -1, dtype=np.int8),
            communicators={int(k): np.asarray(v, dtype=np.int64) for k, v in (communicators or {}).items()},
            source=source,
        )
        t._sort()
        t.validate()
        return t

    def _sort(self, order=None) -> None:
        if order is None:
            order = call_order(self.rank, self.t_start)
        for name in COLUMNS:
            setattr(self, name, getattr(self, name)[order])

    def take(self, rows, source: str | None = None) -> "Trace":
        """Rows of this trace (indices, in the order given) as a trace of their own: the same ranks and
        communicators, no skipped calls, and this trace's ``source`` unless another is given.

        Examples
        --------
        >>> t = Trace.from_records([(0, "send", 1, 8, -1, 2, 0.0, 0.0), (1, "recv", 0, 8, -1, 2, 0.0, 0.0)], 2)
        >>> u = t.take([1], source="part")
        >>> len(u), u.n_ranks, u.op_counts(), u.source
        (1, 2, {'recv': 1}, 'part')
        """
        rows = np.asarray(rows, dtype=np.int64)
        return Trace(self.n_ranks, *(getattr(self, c)[rows] for c in COLUMNS), communicators=self.communicators,
                     source=self.source if source is None else source)

    def validate(self, n_ranks: int | None = None) -> None:
        """Check ranks, peers and sizes; raise :class:`TopoplanError` naming the first bad row."""
        n = self.n_ranks if n_ranks is None else n_ranks
        line = lambda i: f"{self.source}: event {int(i)}"  # noqa: E731
        bad = np.flatnonzero((self.rank < 0) | (self.rank >= n))
        if bad.size:
            raise TopoplanError(f"{line(bad[0])}: rank {self.rank[bad[0]]} is outside the communicator of {n} ranks")
        bad = np.flatnonzero((self.peer < -1) | (self.peer >= n))
        if bad.size:
            raise TopoplanError(f"{line(bad[0])}: peer {self.peer[bad[0]]} is outside the communicator of {n} ranks")
        bad = np.flatnonzero(~np.isfinite(self.bytes) | (self.bytes < 0))
        if bad.size:
            raise TopoplanError(f"{line(bad[0])}: bytes must be a non-negative number")

    # -- output ----------------------------------------------------------
    def write_csv(self, path) -> None:
        """Write the trace in the shared CSV format (gzip if the name ends in .gz), atomically; ``req`` too
        when a ``wait`` row has one (which request it completes: the replay matches waits by it)."""
        names = self.op_names()
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        req = bool((self.req != -1).any())
        w.writerow(["rank", "op", "peer", "bytes", "root", "comm_size", "t_start", "t_end", "comm", "tag"]
                   + (["req"] if req else []))
        for i in range(len(self)):
            w.writerow([self.rank[i], names[i], self.peer[i], _num(self.bytes[i]), self.root[i], self.comm_size[i],
                        repr(float(self.t_start[i])), repr(float(self.t_end[i])), self.comm[i], self.tag[i]]
                       + ([self.req[i]] if req else []))
        atomic_write(path, buf.getvalue())


def write_trace(trace: Trace, path) -> Path | None:
    """Write ``trace`` as :meth:`Trace.write_csv` does, with ``communicators.csv`` beside it when a communicator
    other than MPI_COMM_WORLD is needed to read it back (both or neither are written).

    Parameters
    ----------
    trace : Trace
    path : str or path
        The trace file; ``-`` (standard output) only for a trace on MPI_COMM_WORLD alone.

    Returns
    -------
    pathlib.Path or None
        The ``communicators.csv`` written, if any.

    Raises
    ------
    TopoplanError
        When the communicators cannot be written beside the trace: standard output, or a
        ``communicators.csv`` there that lists other communicators (another trace's); nothing is written.

    Examples
    --------
    >>> import os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> t = Trace.from_records([(0, "bcast", -1, 8, 0, 2, 0.0, 1.0), (1, "bcast", -1, 8, 0, 2, 0.0, 1.0)], 3,
    ...                        communicators={1: [0, 1]})
    >>> t.comm[:] = 1
    >>> write_trace(t, os.path.join(tmp.name, "t.csv")).name
    'communicators.csv'
    >>> read_trace(os.path.join(tmp.name, "t.csv")).members(1).tolist()
    [0, 1]
    """
    world = np.arange(trace.n_ranks)
    if all(len(m) == trace.n_ranks and np.array_equal(m, world) for m in trace.communicators.values()):
        trace.write_csv(path)
        return None
    if is_stdout(path):
        raise TopoplanError("-: the trace has communicators other than MPI_COMM_WORLD, listed in a "
                            "communicators.csv beside the trace file; give a file name")
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["comm", "size", "world_ranks"])
    for cid in sorted(trace.communicators):
        m = trace.communicators[cid]
        w.writerow([cid, len(m), ";".join(str(int(r)) for r in m)])
    comms = Path(path).parent / "communicators.csv"
    if comms.exists():   # the trace's own (written beside its source): kept as it is; another trace's: refused
        if not _same_communicators(comms, trace.communicators):
            raise TopoplanError(f"{comms}: lists other communicators (another trace's?), and {Path(path).name} "
                                "needs its own beside it; write the trace into another directory")
        trace.write_csv(path)
        return comms
    with output_group():
        trace.write_csv(path)
        atomic_write(comms, buf.getvalue())
    return comms


def _same_communicators(path: Path, communicators: dict) -> bool:
    """Whether the ``communicators.csv`` at ``path`` lists exactly ``communicators``."""
    try:
        got = _read_communicators(path)   # (nothing when it is not a file)
    except TopoplanError:
        return False
    return set(got) == set(communicators) and all(np.array_equal(got[c], communicators[c]) for c in got)


def _num(x: float):
    return int(x) if float(x).is_integer() else float(x)


MAX_RANKS = 1 << 24   # a communicator larger than this is a corrupt file, not a job
MAX_MESSAGES = 1 << 40  # messages of one matrix row: a million a second between one pair for 12 days
# Trace times are seconds from a common origin (often the start of the run, sometimes the Unix epoch, as
# MPI_Wtime gives): at most 1e10 s (the year 2286 as a Unix time), and a trace lasts at most a year.
MAX_TIME_S = 1e10
MAX_SPAN_S = 3.2e7


def check_limits(path, rows=None, *, where=None, **cols) -> None:
    """Reject values no real run has (a rank past 2^24, a message past 2^60 bytes) before they size arrays.

    The one rule for every reader of sizes, ranks and counts (CSV traces and matrices, OTF2 archives).

    Parameters
    ----------
    path : str or path
        The file, for messages.
    rows : pandas.DataFrame, optional
        The table the columns come from, for the line of each value (:func:`topoplan.core.csvtable.row_line`);
        default: value ``i`` is on line ``i + 2``.
    where : callable, optional
        ``where(i)`` names value ``i`` in messages instead of ``path:line`` (a file without lines:
        ``"traces.otf2: rank 3's 12th call"``).
    **cols : array_like
        Columns by name; ``bytes`` is checked against ``MAX_VALUE["size"]``
        (:mod:`topoplan.core.units`), ``msgs`` against :data:`MAX_MESSAGES`, every
        other column against :data:`MAX_RANKS`.

    Raises
    ------
    TopoplanError
        ``path:line: field 'col': ... is over the limit of ...`` for the first value too large.

    Examples
    --------
    >>> check_limits("x.csv", rank=[0, 1], bytes=[8.0, 4e6])
    >>> check_limits("x.csv", rank=[0, 1 << 30])
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: x.csv:3: field 'rank': 1.074e+09 is over the limit of 16,777,216 ranks
    >>> check_limits("a.otf2", where=lambda i: f"a.otf2: event {i}", bytes=[8.0, 2.0 ** 61])
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: a.otf2: event 1: field 'bytes': 2.306e+18 is over the limit of 1,152,921,504,606,846,976 bytes
    """
    for col, arr in cols.items():
        limit, what = {"bytes": (MAX_VALUE["size"], "bytes"), "msgs": (MAX_MESSAGES, "messages")}.get(
            col, (MAX_RANKS, "ranks"))
        bad = np.flatnonzero(np.asarray(arr) > limit)
        if bad.size:
            i = int(bad[0])
            if where is not None:
                at = where(i)
            else:
                at = f"{path}:{i + 2 if rows is None else row_line(rows, i)}"
            raise TopoplanError(f"{at}: field '{col}': {arr[i]:.4g} is over the limit of {limit:,.0f} {what}")


def check_times(ts: np.ndarray, te: np.ndarray, where) -> None:
    """Times within :data:`MAX_TIME_S`, and the trace no longer than :data:`MAX_SPAN_S`.

    Parameters
    ----------
    ts, te : numpy.ndarray of float
        Every call's start and end, in seconds.
    where : callable
        ``where(i)`` names call ``i`` in messages (``"t.csv:12"``).

    Raises
    ------
    TopoplanError
        ``<where>: field 't_start'`` (or ``'t_end'``) for the first time out of range.

    Examples
    --------
    >>> check_times(np.array([0.0, 5.0]), np.array([1.0, 4e7]), lambda i: f"t.csv:{i + 2}")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: t.csv:3: field 't_end': 4e+07 s is more than a year (3.2e+07 s) after the first call (t_start 0 s, t.csv:2); no traced run lasts that long
    """
    for col, arr in (("t_start", ts), ("t_end", te)):
        bad = np.flatnonzero(arr > MAX_TIME_S)
        if bad.size:
            i = int(bad[0])
            raise TopoplanError(f"{where(i)}: field '{col}': {arr[i]:.4g} s is over the limit of "
                                f"{MAX_TIME_S:.0e} s (the year 2286 as a Unix time)")
    if len(ts):
        first = int(np.argmin(ts))
        bad = np.flatnonzero(te > ts[first] + MAX_SPAN_S)
        if bad.size:
            i = int(bad[0])
            raise TopoplanError(f"{where(i)}: field 't_end': {te[i]:.4g} s is more than a year "
                                f"({MAX_SPAN_S:.2g} s) after the first call (t_start {ts[first]:.4g} s, "
                                f"{where(first)}); no traced run lasts that long")


def read_trace(path, n_ranks: int | None = None) -> Trace:
    """Read an MPI event trace (CSV or CSV.gz) and its ``communicators.csv`` if present beside it.

    Parameters
    ----------
    path : str or path
        The trace file.
    n_ranks : int, optional
        Size of MPI_COMM_WORLD; default: the ``comm_size`` most calls on it give, or
        more when a rank with events or a listed communicator needs more.

    Returns
    -------
    Trace
        Sorted by rank then t_start; calls not modelled are kept with
        :data:`UNKNOWN_OP` and counted in ``unknown_ops``.

    Raises
    ------
    TopoplanError
        One line naming the file and line on bad input: a row with another
        field count than the header (:func:`topoplan.core.csvtable.read_csv_table`), a missing
        column, a malformed number, an empty time or op, a send without its destination (``peer``
        empty or -1), a negative size or time, a time over
        :data:`MAX_TIME_S` or a trace over :data:`MAX_SPAN_S` long, a call
        ending before it starts, a rank outside MPI_COMM_WORLD, a ``wait``
        whose ``req`` is not 1, 0 or -1, or calls that contradict each other
        (:func:`check_calls`: a communicator ``communicators.csv`` does not
        list, the ranks of a collective call disagreeing on its size or root,
        an all-to-all written per destination naming one twice or, for an
        ``alltoall``, leaving a member out).

    References
    ----------
    The format is ``shared/formats/trace.md``; ``shared/traces/CG.C.64`` is a
    recorded trace in it.

    Examples
    --------
    >>> import os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "events.csv")
    >>> Trace.from_records([(0, "send", 1, 8, -1, 2, 0.0, 1e-6),
    ...                     (1, "recv", 0, 8, -1, 2, 0.0, 1e-6)], 2).write_csv(path)
    >>> print(open(path).read().strip())
    rank,op,peer,bytes,root,comm_size,t_start,t_end,comm,tag
    0,send,1,8,-1,2,0.0,1e-06,-1,-1
    1,recv,0,8,-1,2,0.0,1e-06,-1,-1
    >>> t = read_trace(path)
    >>> t.n_ranks, len(t), t.op_counts()
    (2, 2, {'send': 1, 'recv': 1})
    """
    path = Path(path)
    df = read_csv_table(path, REQUIRED, "trace of MPI events", optional=OPTIONAL_INT, max_rows=limits.MAX_TRACE_ROWS)
    n = len(df)
    line = lambda i: row_line(df, i)  # noqa: E731
    ints = {c: to_numbers(df, c, path, integer=True) for c in ("rank", "peer", "root", "comm_size")}
    by = to_numbers(df, "bytes", path, integer=False, empty=0)   # empty: 0 where no data is sent (below)
    # a call's times order its rank's calls and give the computation between them: an empty one is not 0
    ts = to_numbers(df, "t_start", path, integer=False, empty=None)
    te = to_numbers(df, "t_end", path, integer=False, empty=None)
    extra = {c: (to_numbers(df, c, path, integer=True) if c in df.columns else np.full(n, -1, dtype=np.int64))
             for c in OPTIONAL_INT}
    import pandas as pd

    codes, names = pd.factorize(df["op"], use_na_sentinel=False)   # a few distinct names: map those only
    # an empty cell is NA (a blank one too): not a call of an op named 'nan' to skip with a warning
    blank = [k for k, x in enumerate(names) if pd.isna(x) or not str(x).strip()]
    if blank:
        i = int(np.flatnonzero(np.isin(codes, blank))[0])
        raise TopoplanError(f"{path}:{line(i)}: field 'op': empty")
    names = [str(x).strip().lower() for x in names]
    op = np.array([OP_CODE.get(x, UNKNOWN_OP) for x in names] + [UNKNOWN_OP], dtype=np.int16)[codes]
    unknown: dict[str, int] = {}
    for x, c in zip(names, np.bincount(codes, minlength=len(names)).tolist()):
        if x not in OP_CODE and c:
            unknown[x] = unknown.get(x, 0) + c
    # an empty size is 0 on a call that moves no data of its own (a wait, a barrier, a call not modelled);
    # on one that sends or receives it would make a message of nothing
    empty = empty_cells(df, "bytes")
    if empty.any():
        carries = empty & np.isin(op, [OP_CODE[o] for o in OPS if o not in ("wait", "waitall", "barrier")])
        bad = np.flatnonzero(carries)
        if bad.size:
            i = int(bad[0])
            raise TopoplanError(f"{path}:{line(i)}: field 'bytes': empty on {_a(OPS[op[i]])}, which moves data")
    # a send's peer is its destination: empty or -1 (a receive's any source) would drop the message it sends
    bad = np.flatnonzero(np.isin(op, op_codes(SEND_OPS)) & (ints["peer"] == -1))
    if bad.size:
        i = int(bad[0])
        raise TopoplanError(f"{path}:{line(i)}: field 'peer': {'empty' if empty_cells(df, 'peer')[i] else -1} on "
                            f"{_a(OPS[op[i]])}, which needs its destination (a world rank; -1 is a receive's any "
                            "source)")
    for col, arr in (("bytes", by), ("t_start", ts), ("t_end", te)):
        bad = np.flatnonzero(~np.isfinite(arr) | (arr < 0))
        if bad.size:
            raise TopoplanError(f"{path}:{line(bad[0])}: field '{col}': must be a non-negative number")
    check_limits(path, df, bytes=by, rank=ints["rank"], peer=ints["peer"], comm_size=ints["comm_size"])
    check_times(ts, te, lambda i: f"{path}:{line(i)}")
    bad = np.flatnonzero(te < ts)
    if bad.size:
        raise TopoplanError(f"{path}:{line(bad[0])}: field 't_end': ends before t_start")
    bad = np.flatnonzero(np.isin(op, [OP_CODE[o] for o in COLLECTIVE_OPS]) & (ints["comm_size"] < 1))
    if bad.size:
        raise TopoplanError(f"{path}:{line(bad[0])}: field 'comm_size': a collective needs a communicator of at "
                            f"least 1 rank, got {ints['comm_size'][bad[0]]}")
    bad = np.flatnonzero((op == OP_CODE["wait"]) & ((extra["req"] < -1) | (extra["req"] > 1)))
    if bad.size:   # a wait's req says what it completes (other rows' are not read; some recorders put tags there)
        i = int(bad[0])
        raise TopoplanError(f"{path}:{line(i)}: field 'req': {extra['req'][i]} is not what a wait completes (1: a "
                            "send, 0: a receive, empty or -1: not known)")

    comms = _read_communicators(path.parent / "communicators.csv")
    if n_ranks is None:
        world = [len(m) for m in comms.values()]
        # MPI_COMM_WORLD is at least every rank with events and every communicator; a peer beyond all of
        # them (a send to rank 7 in a trace whose communicators have 2 ranks) is a corrupt row, not a rank
        known = int(max([ints["rank"].max(initial=-1) + 1, _world_size(op, ints["comm_size"], extra["comm"], comms)]
                        + world))
        bad = np.flatnonzero(ints["peer"] >= known)
        if bad.size:
            i = int(bad[0])
            raise TopoplanError(f"{path}:{line(i)}: field 'peer': rank {ints['peer'][i]} is outside MPI_COMM_WORLD "
                                f"({known} ranks: the ranks with events and the comm_size of the calls on it)")
        n_ranks = known
    for col in ("rank", "peer", "root"):
        lo = 0 if col == "rank" else -1
        bad = np.flatnonzero((ints[col] < lo) | (ints[col] >= n_ranks))
        if bad.size:
            i = int(bad[0])
            raise TopoplanError(f"{path}:{line(i)}: field '{col}': rank {ints[col][i]} is outside "
                                f"MPI_COMM_WORLD of {n_ranks} ranks")
    for cid, members in comms.items():
        if members.size and (members.max() >= n_ranks or members.min() < 0):
            raise TopoplanError(f"{path.parent / 'communicators.csv'}: comm {cid}: member outside "
                                f"MPI_COMM_WORLD of {n_ranks} ranks")
    order = call_order(ints["rank"], ts)
    _check_truncation(path, df, order, ints["rank"], op, ints["peer"], by, extra["comm"], extra["tag"])
    t = Trace(n_ranks=int(n_ranks), rank=ints["rank"], op=op, peer=ints["peer"], bytes=by, root=ints["root"],
              comm_size=ints["comm_size"], t_start=ts, t_end=te, comm=extra["comm"], tag=extra["tag"],
              req=extra["req"].astype(np.int8), communicators=comms, unknown_ops=unknown, source=str(path))
    t._sort(order)
    check_calls(t, where=lambda i: f"{path}:{line(order[i])}")
    return t


def _world_size(op, comm_size, comm, communicators) -> int:
    """The size of MPI_COMM_WORLD that a trace's calls on it give (their ``comm_size``): what most say.

    The format has no column for it: every collective and point-to-point call on MPI_COMM_WORLD (``comm``
    absent, or not listed in ``communicators.csv``) gives it as its ``comm_size``, so they all say the same.
    When one row says otherwise (1000 among rows of 4 ranks), that row is the one at fault, and
    :func:`check_calls` names it against the size the others give; taking the largest made the world 1000
    ranks and blamed the first correct row instead. A tie goes to the larger size. With no such call, the
    largest ``comm_size`` of any row.

    Parameters
    ----------
    op : numpy.ndarray of int16
        Every row's op code.
    comm_size, comm : numpy.ndarray of int64
        Every row's ``comm_size`` and ``comm`` (:data:`WORLD` when the trace has no comm column).
    communicators : dict
        The listed communicators (``communicators.csv``), by id.

    Returns
    -------
    int

    Examples
    --------
    >>> op = op_codes(("send", "recv", "barrier", "barrier"))
    >>> _world_size(op, np.array([4, 4, 1000, 4]), np.full(4, WORLD), {})
    4
    >>> _world_size(op_codes(("wait",)), np.array([8]), np.array([WORLD]), {})
    8
    """
    on_world = np.isin(op, op_codes(COLLECTIVE_OPS + SEND_OPS + RECV_OPS))
    if communicators:
        on_world &= ~np.isin(comm, np.fromiter(communicators, dtype=np.int64))
    said = comm_size[on_world]
    if not said.size:
        return int(comm_size.max(initial=0))
    if said.min() == said.max():
        return int(said[0])
    sizes, counts = np.unique(said, return_counts=True)
    return int(sizes[counts == counts.max()].max())


def _mask(n: int, idx) -> np.ndarray:
    out = np.zeros(n, dtype=bool)
    out[idx] = True
    return out


def call_order(rank, t_start) -> np.ndarray:
    """The order of a trace's rows as each rank makes its calls: by rank, then ``t_start``, then file order.

    Parameters
    ----------
    rank : numpy.ndarray of int
    t_start : numpy.ndarray of float

    Returns
    -------
    numpy.ndarray of int64
        Row indices (a :class:`Trace` holds its rows in this order).

    Examples
    --------
    >>> call_order(np.array([1, 0, 0, 1]), np.array([0.0, 0.5, 0.1, 0.0])).tolist()
    [2, 1, 0, 3]
    """
    return np.lexsort((np.arange(len(rank)), t_start, rank))


# ops whose size every member passes alike (MPI: equal counts and type signatures), compared across the
# members of a call; gather, scatter, allgatherv, reduce_scatter and alltoallv rows may differ per rank
# (their v-variants are written under the same names), a per-destination alltoall is compared by its calls.
_SAME_BYTES = ("bcast", "reduce", "allreduce", "allgather", "alltoall", "barrier")
_ROOTED = ("bcast", "reduce", "gather", "scatter")


def _ordinal(k: int) -> str:
    return f"{k}{'th' if 10 <= k % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(k % 10, 'th')}"


def _a(name: str) -> str:
    """A call's name with its article, as messages say it: ``a bcast``, ``an allreduce``."""
    return f"{'an' if name[:1] in 'aeiou' else 'a'} {name}"


def call_namer(trace: Trace):
    """A function naming row ``i`` of a sorted trace in messages by its rank and call: ``"t: rank 2's 5th call"``.

    For traces whose rows have no file line (OTF2 archives, generated traces).

    Parameters
    ----------
    trace : Trace

    Returns
    -------
    callable
        ``where(i) -> str``.

    Examples
    --------
    >>> t = Trace.from_records([(r, "barrier", -1, 0, -1, 2, 0.0, 0.0) for r in (0, 0, 1)], 2, source="t")
    >>> call_namer(t)(1), call_namer(t)(2)
    ("t: rank 0's 2nd call", "t: rank 1's 1st call")
    """
    rank = trace.rank

    def where(i):
        first = int(np.searchsorted(rank, rank[i]))   # rows are sorted by rank: the rank's first row
        return f"{trace.source or 'trace'}: rank {int(rank[i])}'s {_ordinal(int(i) - first + 1)} call"

    return where


def check_calls(trace: Trace, where=None) -> None:
    """Refuse a trace whose calls contradict each other by MPI's rules, naming the first row at fault.

    A row on a communicator listed in ``trace.communicators`` is made by one of its members, and a
    point-to-point partner or a root is one of its members; a communicator that is not listed is
    MPI_COMM_WORLD. A collective or point-to-point row's ``comm_size`` is its communicator's size (so a
    row naming a communicator ``communicators.csv`` does not list, with another size than the world's,
    is refused rather than read as the world, which would move its bytes to other ranks). The members
    of a communicator make the same collective calls on it in the same order, as MPI requires: the
    k-th call of every member has the same op and root, and, for ops every rank passes one size to
    (``bcast``, ``reduce``, ``allreduce``, ``allgather``, ``alltoall`` written as one row,
    ``barrier``), the same bytes. An ``alltoall`` or ``alltoallv`` written one row per destination names
    each destination once, and an ``alltoall`` every member but perhaps the caller
    (:func:`_check_destinations`). ``wait`` rows' ``req`` is checked by the readers (1, 0 or -1).

    Parameters
    ----------
    trace : Trace
        Sorted (rank, then call order), as :func:`read_trace` and
        :func:`topoplan.traffic.otf2.read_otf2` return it.
    where : callable, optional
        ``where(i)``: how messages name row ``i`` (default ``"<source>: rank R's Nth call"``;
        :func:`read_trace` gives ``"<file>:<line>"``).

    Raises
    ------
    TopoplanError
        ``<where>: field '<column>': ...`` for the first row at fault.

    Examples
    --------
    The root of a bcast passes 500 bytes, the other rank 1,000:

    >>> t = Trace.from_records([(0, "bcast", -1, 500, 0, 2, 0.0, 1e-6), (1, "bcast", -1, 1000, 0, 2, 0.0, 1e-6)],
    ...                        2, source="t.csv")
    >>> check_calls(t)
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: t.csv: rank 1's 1st call: field 'bytes': 1000 bytes, but rank 0 passes 500 to the same bcast (its 1st collective call on MPI_COMM_WORLD): the ranks of a collective call agree on its size
    >>> check_calls(Trace.from_records([(r, "bcast", -1, 8, 0, 2, 0.0, 1e-6) for r in (0, 1)], 2))
    """
    n = len(trace)
    if n == 0:
        return
    rank = trace.rank
    where = call_namer(trace) if where is None else where

    nr = int(trace.n_ranks)
    ids, inv = np.unique(trace.comm, return_inverse=True)
    inv = inv.ravel()
    listed = [int(c) in trace.communicators for c in ids.tolist()]
    size_of = np.array([len(trace.communicators[int(c)]) if ok else nr for c, ok in zip(ids.tolist(), listed)],
                       dtype=np.int64)

    def name(c):
        c = int(c)
        return "MPI_COMM_WORLD" if c == WORLD else f"communicator {c}"

    coll = np.isin(trace.op, op_codes(COLLECTIVE_OPS))
    p2p = np.isin(trace.op, op_codes(SEND_OPS + RECV_OPS))
    # -- sizes: a row's comm_size is its communicator's (one that is not listed is the world)
    bad = np.flatnonzero((coll | p2p) & (trace.comm_size != size_of[inv]))
    if bad.size:
        i = int(bad[0])
        c, cs = int(trace.comm[i]), int(trace.comm_size[i])
        if c != WORLD and not listed[int(inv[i])]:
            raise TopoplanError(f"{where(i)}: field 'comm': communicator {c} is not listed (communicators.csv) and "
                                f"its comm_size {cs} is not MPI_COMM_WORLD's {nr} ranks: list its members in "
                                "communicators.csv (comm,size,world_ranks) beside the trace")
        raise TopoplanError(f"{where(i)}: field 'comm_size': {cs}, but {name(c)} has {int(size_of[inv[i]])} ranks")
    a2a_rows, starts = per_destination_calls(trace)
    per_dest = np.zeros(n, dtype=bool)
    per_dest[a2a_rows] = True
    # -- members: the caller, a point-to-point partner or destination and a root belong to the communicator
    sub = np.flatnonzero(np.asarray(listed)[inv])
    rooted = np.isin(trace.op, op_codes(_ROOTED))
    if sub.size:
        width = nr + 1
        keys = np.sort(np.concatenate([j * width + trace.communicators[int(ids[j])]
                                       for j in np.flatnonzero(listed).tolist()]))

        def member(idx, who):
            k = inv[idx] * width + who[idx]
            pos = np.minimum(np.searchsorted(keys, k), len(keys) - 1)
            return keys[pos] == k

        bad = []
        for col, sel in (("rank", (coll | p2p)[sub]), ("peer", (p2p | per_dest)[sub] & (trace.peer[sub] >= 0)),
                         ("root", rooted[sub] & (trace.root[sub] >= 0))):
            idx = sub[sel]
            out = idx[~member(idx, getattr(trace, col))]
            if out.size:
                bad.append((int(out[0]), col))
        if bad:   # the first row at fault
            i, col = min(bad)
            what = {"rank": "the calling rank", "peer": "the destination" if per_dest[i] else "the partner",
                    "root": "the root"}[col]
            raise TopoplanError(f"{where(i)}: field '{col}': {what} {int(getattr(trace, col)[i])} is not a member "
                                f"of {name(trace.comm[i])} ({int(size_of[inv[i]])} ranks)")
    bad = np.flatnonzero(rooted & (trace.root < 0))
    if bad.size:
        i = int(bad[0])
        raise TopoplanError(f"{where(i)}: field 'root': {_a(trace.op_names()[i])} needs its root (a world rank)")
    # -- all-to-alls written per destination: a call names each destination once, an alltoall every member
    if a2a_rows.size:
        _check_destinations(trace, a2a_rows, starts, size_of[inv[a2a_rows[starts]]], where)
    # -- collectives: the k-th call on a communicator is the same call at every member
    keep = coll.copy()
    keep[a2a_rows] = False
    keep[a2a_rows[starts]] = True   # one entry per per-destination call
    rows = np.flatnonzero(keep)
    if not rows.size:
        return
    c_idx, r = inv[rows], rank[rows]
    o = np.lexsort((rows, c_idx, r))            # by rank, then communicator, then call order
    rows, c_idx, r = rows[o], c_idx[o], r[o]
    new = np.ones(len(rows), dtype=bool)
    new[1:] = (r[1:] != r[:-1]) | (c_idx[1:] != c_idx[:-1])
    group_start = np.flatnonzero(new)
    k = np.arange(len(rows)) - np.repeat(group_start, np.diff(np.append(group_start, len(rows))))
    o = np.lexsort((r, k, c_idx))               # by communicator, then k, then rank
    rows, c_idx, r, k = rows[o], c_idx[o], r[o], k[o]
    new = np.ones(len(rows), dtype=bool)
    new[1:] = (c_idx[1:] != c_idx[:-1]) | (k[1:] != k[:-1])
    call_start = np.flatnonzero(new)
    count = np.diff(np.append(call_start, len(rows)))
    ref = rows[np.repeat(call_start, count)]    # every entry's first member (the lowest rank) of its call
    op, by = trace.op, trace.bytes
    same_bytes = np.isin(op[rows], op_codes(_SAME_BYTES)) & ~per_dest[rows] & ~per_dest[ref]
    checks = (("op", op[rows] != op[ref]),
              ("root", np.isin(op[rows], op_codes(_ROOTED)) & (trace.root[rows] != trace.root[ref])),
              ("bytes", same_bytes & (np.abs(by[rows] - by[ref]) > 0.5 + 1e-9 * np.abs(by[ref]))))
    bad = [(int(rows[np.flatnonzero(m)[0]]), col, int(np.flatnonzero(m)[0])) for col, m in checks if m.any()]
    if bad:
        i, col, e = min(bad)
        j = int(ref[e])
        what = f"{_ordinal(int(k[e]) + 1)} collective call on {name(trace.comm[i])}"
        names = trace.op_names()
        if col == "op":
            raise TopoplanError(f"{where(i)}: field 'op': its {what} is {_a(names[i])}, but rank {int(rank[j])}'s is "
                                f"{_a(names[j])}: the ranks of a communicator make the same collective calls in the "
                                "same order")
        if col == "root":
            raise TopoplanError(f"{where(i)}: field 'root': {int(trace.root[i])}, but rank {int(rank[j])} gives the "
                                f"same {names[i]} (its {what}) root {int(trace.root[j])}")
        raise TopoplanError(f"{where(i)}: field 'bytes': {_num(by[i])} bytes, but rank {int(rank[j])} passes "
                            f"{_num(by[j])} to the same {names[i]} (its {what}): the ranks of a collective call "
                            "agree on its size")
    # -- every member makes every call (a rank with fewer calls: a trace cut short, or of other ranks)
    short = np.flatnonzero(count != size_of[c_idx[call_start]])
    if short.size:
        s = int(short[0])
        j = int(c_idx[call_start[s]])
        members = trace.communicators[int(ids[j])] if listed[j] else np.arange(nr)
        missing = int(np.setdiff1d(members, r[call_start[s]:call_start[s] + count[s]])[0])
        i = int(rows[call_start[s]])
        raise TopoplanError(f"{where(i)}: its {_ordinal(int(k[call_start[s]]) + 1)} collective call on "
                            f"{name(trace.comm[i])} ({_a(trace.op_names()[i])}) is not made by rank {missing}, a member: "
                            "the trace is cut short, or misses ranks")


def _check_destinations(trace: Trace, rows, starts, size, where) -> None:
    """The ``alltoall``/``alltoallv`` calls written one row per destination name each destination once, and an
    ``alltoall`` call every member of its communicator (the caller's own block, a local copy, may be left out).

    MPI_Alltoall sends to every member; MPI_Alltoallv sends ``sendcounts[i]`` to each, and the format's one
    row per destination does not say a row of 0 bytes must be written, so an ``alltoallv`` may leave
    destinations out (0 bytes). A destination named twice is two rows for one block: the call's rows were
    read as the uniform alltoall of the size they give, inventing the message of the member left out.

    Parameters
    ----------
    trace : Trace
        Sorted, its destinations members of their communicators (:func:`check_calls` checks both first).
    rows, starts : numpy.ndarray of int64
        As :func:`per_destination_calls` gives them.
    size : numpy.ndarray of int64
        Each call's communicator size.
    where : callable
        ``where(i)`` names row ``i`` in messages.

    Raises
    ------
    TopoplanError
        ``<where>: field 'peer': ...`` at the first row repeating a destination, or at the first row of an
        ``alltoall`` call that leaves a member out.

    Examples
    --------
    >>> t = Trace.from_records([(0, "alltoall", d, 8, -1, 3, 0.0, 1.0) for d in (0, 1, 1)], 3, source="t.csv")
    >>> _check_destinations(t, *per_destination_calls(t), np.array([3]), call_namer(t))
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: t.csv: rank 0's 3rd call: field 'peer': rank 1 is named twice in one alltoall (first at t.csv: rank 0's 2nd call): a call written one row per destination has one row for each (its rows follow each other and share t_start)
    """
    count = np.diff(np.append(starts, len(rows)))
    call = np.repeat(np.arange(len(starts)), count)
    peer, rank = trace.peer[rows], trace.rank[rows]
    key = call * (int(peer.max()) + 1) + peer
    o = np.argsort(key, kind="stable")      # by call, then destination, then row
    ks = key[o]
    again = np.flatnonzero(ks[1:] == ks[:-1]) + 1
    if again.size:
        p = int(again[np.argmin(o[again])])   # rows are ascending: the first row at fault
        i, j = int(rows[o[p]]), int(rows[o[np.searchsorted(ks, ks[p])]])
        raise TopoplanError(f"{where(i)}: field 'peer': rank {int(trace.peer[i])} is named twice in one "
                            f"{OPS[trace.op[i]]} (first at {where(j)}): a call written one row per destination has "
                            "one row for each (its rows follow each other and share t_start)")
    others = count - np.bincount(call[peer == rank], minlength=len(starts))
    short = np.flatnonzero((trace.op[rows[starts]] == OP_CODE["alltoall"]) & (others < size - 1))
    if short.size:
        s = int(short[0])
        i = int(rows[starts[s]])
        c = int(trace.comm[i])
        named = np.append(trace.peer[rows[starts[s]:starts[s] + count[s]]], trace.rank[i])
        missing = int(np.setdiff1d(trace.members(c), named)[0])
        comm = "MPI_COMM_WORLD" if c == WORLD else f"communicator {c}"
        raise TopoplanError(f"{where(i)}: field 'peer': the alltoall written one row per destination from here has "
                            f"no row for rank {missing}, a member of {comm} ({int(size[s])} ranks): an alltoall sends "
                            "to every member (its rows follow each other and share t_start)")


def _check_truncation(path, df, order, rank, op, peer, nbytes, comm, tag) -> None:
    """A receive smaller than the message it matches is an error (MPI_ERR_TRUNCATE), naming its line.

    Matching is MPI's (messages between two ranks on one communicator are received in the order sent),
    worked out here only where it does not depend on timing: receives from a named source, into a rank
    that posts no any-source receive (a ``sendrecv`` receives from any source), on channels whose
    receives all name the tag or all take any tag (-1). The replay matches the rest as it runs.
    """
    n = len(rank)
    if n == 0:
        return
    send = np.isin(op, op_codes(SEND_OPS)) & (peer >= 0)
    recv = np.isin(op, op_codes(RECV_OPS))
    if not send.any() or not recv.any():
        return
    wild_dst = np.unique(rank[(recv & (peer < 0)) | (op == OP_CODE["sendrecv"])])
    s = np.flatnonzero(send & ~np.isin(peer, wild_dst))
    r = np.flatnonzero(recv & (peer >= 0) & ~np.isin(rank, wild_dst))
    if not s.size or not r.size:
        return
    # both sides in call order: a stable sort by group then keeps, per group, the order of the calls
    s = order[_mask(n, s)[order]]
    r = order[_mask(n, r)[order]]
    width = int(max(rank.max(), peer.max())) + 1
    gs = rank[s] * width + peer[s]   # the channel: (source, destination)
    gr = peer[r] * width + rank[r]
    if comm.min() != comm.max() or tag.min() != tag.max():   # add the communicator, and the tag
        row = np.concatenate([s, r])
        is_recv = np.concatenate([np.zeros(len(s), bool), np.ones(len(r), bool)])
        _, chan = np.unique(np.stack([np.concatenate([gs, gr]), comm[row]]), axis=1, return_inverse=True)
        chan = chan.ravel()
        tg = tag[row].copy()
        rwild = is_recv & (tg == -1)
        wild, named = np.unique(chan[rwild]), np.unique(chan[is_recv & ~rwild])
        keep = ~np.isin(chan, np.intersect1d(wild, named))   # any-tag and named-tag receives: timing decides
        tg[np.isin(chan, wild)] = -1                          # any-tag receives take the messages as sent
        _, grp = np.unique(np.stack([chan, tg]), axis=1, return_inverse=True)
        grp = grp.ravel()
        s, gs = row[keep & ~is_recv], grp[keep & ~is_recv]
        r, gr = row[keep & is_recv], grp[keep & is_recv]
    # receive k of a group (channel and tag) matches send k of the group
    os_, or_ = np.argsort(gs, kind="stable"), np.argsort(gr, kind="stable")
    gs, gr, sends, recvs = gs[os_], gr[or_], s[os_], r[or_]
    k = np.arange(len(gr)) - np.searchsorted(gr, gr, "left")
    lo = np.searchsorted(gs, gr, "left")
    m = np.flatnonzero(k < np.searchsorted(gs, gr, "right") - lo)
    rr, ss = recvs[m], sends[lo[m] + k[m]]
    bad = np.flatnonzero(nbytes[rr] < nbytes[ss])
    if bad.size:
        i = bad[np.argmin(rr[bad])]
        raise TopoplanError(f"{path}:{row_line(df, rr[i])}: field 'bytes': a receive of {_num(nbytes[rr[i]])} bytes "
                            f"matches a message of {_num(nbytes[ss[i]])} bytes (the send on line "
                            f"{row_line(df, ss[i])}): MPI fails such a run with MPI_ERR_TRUNCATE")


def _read_communicators(path: Path) -> dict[int, np.ndarray]:
    if not path.is_file():
        return {}

    df = read_csv_table(path, ("comm", "size", "world_ranks"), "communicator list")
    out = {}
    cids = to_numbers(df, "comm", path, integer=True, empty=None)
    sizes = to_numbers(df, "size", path, integer=True, empty=None)
    for i, (cid, size, ranks) in enumerate(zip(cids, sizes, df["world_ranks"])):
        where = f"{path}:{row_line(df, i)}: field 'world_ranks'"
        if isinstance(ranks, (float, np.floating)):   # one member per row: pandas read the column as numbers
            text = "" if np.isnan(ranks) else (str(int(ranks)) if float(ranks).is_integer() else str(ranks))
        else:
            text = "" if ranks is None else str(ranks)
        members = np.array([ascii_int(x, where, limit=MAX_RANKS) for x in text.split(";") if x.strip()],
                           dtype=np.int64)
        if len(members) != size:
            raise TopoplanError(f"{path}:{row_line(df, i)}: field 'size': {size} but {len(members)} ranks listed")
        uniq, first, counts = np.unique(members, return_index=True, return_counts=True)
        if (counts > 1).any():   # an MPI group holds a process once: its ranks in the communicator would shift
            twice = int(uniq[counts > 1][np.argmin(first[counts > 1])])
            raise TopoplanError(f"{where}: rank {twice} is listed twice in comm {int(cid)}")
        if int(cid) in out:
            raise TopoplanError(f"{path}:{row_line(df, i)}: field 'comm': comm {int(cid)} is listed twice")
        out[int(cid)] = members
    return out


def per_destination_calls(trace):
    """The ``alltoall``/``alltoallv`` calls of a trace written one row per destination (peer set).

    A call is a run of consecutive such rows with the same rank, op,
    communicator and ``t_start``.

    Parameters
    ----------
    trace : :class:`topoplan.traffic.trace.Trace`

    Returns
    -------
    rows : ndarray
        The trace rows written per destination, ascending.
    starts : ndarray
        Each call's first position in ``rows``.

    Examples
    --------
    >>> t = Trace.from_records([(0, "alltoallv", d, 8, -1, 2, 0.0, 0.0) for d in (0, 1)]
    ...                        + [(0, "alltoallv", d, 8, -1, 2, 1.0, 1.0) for d in (0, 1)], 2)
    >>> rows, starts = per_destination_calls(t)
    >>> rows.tolist(), starts.tolist()
    ([0, 1, 2, 3], [0, 2])
    """
    rows = np.flatnonzero(np.isin(trace.op, op_codes(("alltoall", "alltoallv"))) & (trace.peer >= 0))
    new = np.ones(len(rows), dtype=bool)
    r, o, t, c = trace.rank[rows], trace.op[rows], trace.t_start[rows], trace.comm[rows]
    new[1:] = ((rows[1:] != rows[:-1] + 1) | (r[1:] != r[:-1]) | (o[1:] != o[:-1]) | (t[1:] != t[:-1])
               | (c[1:] != c[:-1]))
    return rows, np.flatnonzero(new)
