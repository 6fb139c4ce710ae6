"""MPI event traces: reading, writing and building them (format: shared/formats/trace.md).

A :class:`Trace` holds one row per MPI call as NumPy columns, sorted by
``(rank, t_start)`` with file order kept for ties. Generators build traces
with :func:`Trace.from_records`, so analysis and replay see one type.
"""

from __future__ import annotations

import csv
import gzip
import io
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from planner.core.errors import TopoplanError

__all__ = ["OPS", "OP_CODE", "UNKNOWN_OP", "SEND_OPS", "RECV_OPS", "COLLECTIVE_OPS", "WORLD", "REQUIRED",
           "OPTIONAL_INT", "MAX_RANKS", "op_codes", "Trace", "read_csv_table", "to_numbers", "check_limits",
           "read_trace"]

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
    planner.traffic.generators.TraceBuilder : build one call by call.

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

    def _sort(self) -> None:
        order = np.lexsort((np.arange(len(self.rank)), self.t_start, self.rank))
        for name in ("rank", "op", "peer", "bytes", "root", "comm_size", "t_start", "t_end", "comm", "tag", "req"):
            setattr(self, name, getattr(self, name)[order])

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
        """Write the trace in the shared CSV format (gzip if the name ends in .gz), atomically."""
        from planner.core.io import atomic_write

        names = self.op_names()
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["rank", "op", "peer", "bytes", "root", "comm_size", "t_start", "t_end", "comm", "tag"])
        for i in range(len(self)):
            w.writerow([self.rank[i], names[i], self.peer[i], _num(self.bytes[i]), self.root[i], self.comm_size[i],
                        repr(float(self.t_start[i])), repr(float(self.t_end[i])), self.comm[i], self.tag[i]])
        atomic_write(path, buf.getvalue())


def _num(x: float):
    return int(x) if float(x).is_integer() else float(x)


def _open_text(path: Path):
    with open(path, "rb") as fh:
        magic = fh.read(2)
    if magic == b"\x1f\x8b":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8")
    return open(path, encoding="utf-8")


def read_csv_table(path, required, kind: str):
    """Read a CSV (plain or gzip) into a pandas DataFrame of strings, checking the header.

    Only an empty cell is missing: ``nan``, ``NA`` or ``null`` written in a
    file stay text, so :func:`to_numbers` reports them.

    Parameters
    ----------
    path : str or path
        The file.
    required : sequence of str
        Columns that must be in the header.
    kind : str
        What the file is, for messages (``"MPI event trace"``).

    Returns
    -------
    pandas.DataFrame
        Column names stripped of spaces.

    Raises
    ------
    TopoplanError
        Naming the file for a missing, unreadable, empty or malformed file,
        or a missing column.

    Examples
    --------
    >>> import os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "m.csv")
    >>> with open(path, "w") as fh:
    ...     _ = fh.write("src, dst, bytes\\n0, 1, 100\\n")
    >>> list(read_csv_table(path, ("src", "dst"), "communication matrix").columns)
    ['src', 'dst', 'bytes']
    >>> read_csv_table(path, ("msgs",), "communication matrix")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    planner.core.errors.TopoplanError: .../m.csv: line 1: missing column(s) msgs for a communication matrix
    """
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise TopoplanError(f"{path}: no such file")
    try:
        with _open_text(path) as fh:
            # only an empty cell is missing: 'nan', 'NA' or 'null' written in a file are errors, not zeros
            df = pd.read_csv(fh, skipinitialspace=True, low_memory=False, keep_default_na=False, na_values=[""])
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        raise TopoplanError(f"{path}: cannot read {kind}: {exc}") from None
    except pd.errors.ParserError as exc:
        raise TopoplanError(f"{path}: malformed CSV: {str(exc).splitlines()[0]}") from None
    except pd.errors.EmptyDataError:
        raise TopoplanError(f"{path}: empty file, expected a {kind} with a header line") from None
    df.columns = [c.strip() for c in df.columns]
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise TopoplanError(f"{path}: line 1: missing column(s) {', '.join(missing)} for a {kind}")
    return df


def to_numbers(df, col: str, path, *, integer: bool, empty=-1):
    """Column of a string DataFrame to finite numbers; raises naming the line of the first bad cell.

    Parameters
    ----------
    df : pandas.DataFrame
        As read by :func:`read_csv_table`.
    col : str
        The column.
    path : str or path
        The file, for messages (line numbers count the header as line 1).
    integer : bool
        Whether the values must be integers (returned as int64).
    empty : float or None, optional
        The value of an empty cell, or None when a cell must not be empty
        (a row cut short, as in a truncated file, is then an error, not a sentinel).

    Returns
    -------
    numpy.ndarray
        int64 when ``integer``, else float64.

    Raises
    ------
    TopoplanError
        ``path:line: field 'col': ...`` for an empty cell (with ``empty=None``),
        text, an infinite value, a fraction where an integer is needed, or an
        integer beyond 2^62.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"rank": ["0", "1", ""], "bytes": ["8", "1e3", "x"]})
    >>> to_numbers(df, "rank", "t.csv", integer=True).tolist()
    [0, 1, -1]
    >>> to_numbers(df, "bytes", "t.csv", integer=False)
    Traceback (most recent call last):
    ...
    planner.core.errors.TopoplanError: t.csv:4: field 'bytes': not a number: 'x'
    """
    import pandas as pd

    raw = df[col]
    fill = 0 if empty is None else empty
    blank = raw.isna().to_numpy()   # only empty cells are NA (read_csv_table); a literal 'nan' is text
    if pd.api.types.is_numeric_dtype(raw):
        # fast path: the C parser already read numbers
        num = raw.fillna(fill)
    else:
        s = raw.astype(str).str.strip()
        blank = blank | (s == "").to_numpy()
        s = s.mask(blank, str(fill))
        num = pd.to_numeric(s, errors="coerce")
    if empty is None and blank.any():
        i = int(np.flatnonzero(blank)[0])
        raise TopoplanError(f"{path}:{i + 2}: field '{col}': empty (is the row cut short?)")
    bad = np.flatnonzero(num.isna().to_numpy())
    if bad.size:
        i = int(bad[0])
        raise TopoplanError(f"{path}:{i + 2}: field '{col}': not a number: {df[col].iloc[i]!r}")
    arr = num.to_numpy(dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(arr))
    if bad.size:
        i = int(bad[0])
        raise TopoplanError(f"{path}:{i + 2}: field '{col}': not a finite number: {df[col].iloc[i]}")
    if integer:
        big = np.flatnonzero(np.abs(arr) >= 2.0 ** 62)  # would wrap around in int64
        if big.size:
            i = int(big[0])
            raise TopoplanError(f"{path}:{i + 2}: field '{col}': {arr[i]:.3g} is out of range")
        frac = np.flatnonzero(arr != np.round(arr))
        if frac.size:
            i = int(frac[0])
            raise TopoplanError(f"{path}:{i + 2}: field '{col}': not an integer: {df[col].iloc[i]!r}")
        return arr.astype(np.int64)
    return arr


MAX_RANKS = 1 << 24   # a communicator larger than this is a corrupt file, not a job


def check_limits(path, **cols) -> None:
    """Reject values no real run has (a rank past 2^24, a message past 2^60 bytes) before they size arrays.

    Parameters
    ----------
    path : str or path
        The file, for messages.
    **cols : array_like
        Columns by name; ``bytes`` is checked against ``MAX_VALUE["size"]``
        (:mod:`planner.core.units`), every other column against :data:`MAX_RANKS`.

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
    planner.core.errors.TopoplanError: x.csv:3: field 'rank': 1.074e+09 is over the limit of 16,777,216 ranks
    """
    from planner.core.units import MAX_VALUE

    for col, arr in cols.items():
        limit = MAX_VALUE["size"] if col == "bytes" else MAX_RANKS
        bad = np.flatnonzero(np.asarray(arr) > limit)
        if bad.size:
            i = int(bad[0])
            what = "bytes" if col == "bytes" else "ranks"
            raise TopoplanError(f"{path}:{i + 2}: field '{col}': {arr[i]:.4g} is over the limit of {limit:,.0f} {what}")


def read_trace(path, n_ranks: int | None = None) -> Trace:
    """Read an MPI event trace (CSV or CSV.gz) and its ``communicators.csv`` if present beside it.

    Parameters
    ----------
    path : str or path
        The trace file.
    n_ranks : int, optional
        Size of MPI_COMM_WORLD; default: the largest rank with events, ``comm_size``
        or communicator size seen.

    Returns
    -------
    Trace
        Sorted by rank then t_start; calls not modelled are kept with
        :data:`UNKNOWN_OP` and counted in ``unknown_ops``.

    Raises
    ------
    TopoplanError
        One line naming the file and line on bad input: a missing column, a
        malformed number, a negative size or time, a call ending before it
        starts, or a rank outside MPI_COMM_WORLD.

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
    df = read_csv_table(path, REQUIRED, "MPI event trace")
    n = len(df)
    ints = {c: to_numbers(df, c, path, integer=True) for c in ("rank", "peer", "root", "comm_size")}
    by = to_numbers(df, "bytes", path, integer=False, empty=0)
    ts = to_numbers(df, "t_start", path, integer=False, empty=0)
    te = to_numbers(df, "t_end", path, integer=False, empty=0)
    extra = {c: (to_numbers(df, c, path, integer=True) if c in df.columns else np.full(n, -1, dtype=np.int64))
             for c in OPTIONAL_INT}
    ops = df["op"].astype(str).str.strip().str.lower()
    op = ops.map(OP_CODE).fillna(UNKNOWN_OP).to_numpy(dtype=np.int16)
    ops = ops.to_numpy()
    unknown: dict[str, int] = {}
    for o in ops[op == UNKNOWN_OP]:
        unknown[o] = unknown.get(o, 0) + 1
    for col, arr in (("bytes", by), ("t_start", ts), ("t_end", te)):
        bad = np.flatnonzero(~np.isfinite(arr) | (arr < 0))
        if bad.size:
            raise TopoplanError(f"{path}:{bad[0] + 2}: field '{col}': must be a non-negative number")
    check_limits(path, bytes=by, rank=ints["rank"], peer=ints["peer"], comm_size=ints["comm_size"])
    bad = np.flatnonzero(te < ts)
    if bad.size:
        raise TopoplanError(f"{path}:{bad[0] + 2}: field 't_end': ends before t_start")
    bad = np.flatnonzero(np.isin(op, [OP_CODE[o] for o in COLLECTIVE_OPS]) & (ints["comm_size"] < 1))
    if bad.size:
        raise TopoplanError(f"{path}:{bad[0] + 2}: field 'comm_size': a collective needs a communicator of at "
                            f"least 1 rank, got {ints['comm_size'][bad[0]]}")

    comms = _read_communicators(path.parent / "communicators.csv")
    if n_ranks is None:
        world = [len(m) for m in comms.values()]
        # MPI_COMM_WORLD is at least every rank with events and every communicator; a peer beyond all of
        # them (a send to rank 7 in a trace whose communicators have 2 ranks) is a corrupt row, not a rank
        known = int(max([ints["rank"].max(initial=-1) + 1, ints["comm_size"].max(initial=0)] + world))
        bad = np.flatnonzero(ints["peer"] >= known)
        if bad.size:
            i = int(bad[0])
            raise TopoplanError(f"{path}:{i + 2}: field 'peer': rank {ints['peer'][i]} is outside MPI_COMM_WORLD "
                                f"({known} ranks: the largest rank with events and the largest comm_size)")
        n_ranks = known
    for col in ("rank", "peer", "root"):
        lo = 0 if col == "rank" else -1
        bad = np.flatnonzero((ints[col] < lo) | (ints[col] >= n_ranks))
        if bad.size:
            i = int(bad[0])
            raise TopoplanError(f"{path}:{i + 2}: field '{col}': rank {ints[col][i]} is outside "
                                f"MPI_COMM_WORLD of {n_ranks} ranks")
    for cid, members in comms.items():
        if members.size and (members.max() >= n_ranks or members.min() < 0):
            raise TopoplanError(f"{path.parent / 'communicators.csv'}: comm {cid}: member outside "
                                f"MPI_COMM_WORLD of {n_ranks} ranks")
    t = Trace(n_ranks=int(n_ranks), rank=ints["rank"], op=op, peer=ints["peer"], bytes=by, root=ints["root"],
              comm_size=ints["comm_size"], t_start=ts, t_end=te, comm=extra["comm"], tag=extra["tag"],
              req=extra["req"].astype(np.int8), communicators=comms, unknown_ops=unknown, source=str(path))
    t._sort()
    return t


def _read_communicators(path: Path) -> dict[int, np.ndarray]:
    if not path.is_file():
        return {}
    df = read_csv_table(path, ("comm", "size", "world_ranks"), "communicator list")
    out = {}
    cids = to_numbers(df, "comm", path, integer=True)
    sizes = to_numbers(df, "size", path, integer=True)
    for i, (cid, size, ranks) in enumerate(zip(cids, sizes, df["world_ranks"])):
        try:
            members = np.array([int(x) for x in str(ranks).split(";") if x.strip() not in ("", "nan")],
                               dtype=np.int64)
        except ValueError:
            raise TopoplanError(f"{path}:{i + 2}: field 'world_ranks': not a ';'-separated rank list") from None
        if len(members) != size:
            raise TopoplanError(f"{path}:{i + 2}: field 'size': {size} but {len(members)} ranks listed")
        out[int(cid)] = members
    return out
