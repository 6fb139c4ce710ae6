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

from topoplan.core.csvtable import read_csv_table, row_line, to_numbers
from topoplan.core.errors import TopoplanError
from topoplan.core.io import atomic_write
from topoplan.core.units import MAX_VALUE, ascii_int
from topoplan.traffic import limits

__all__ = ["OPS", "OP_CODE", "UNKNOWN_OP", "SEND_OPS", "RECV_OPS", "COLLECTIVE_OPS", "WORLD", "REQUIRED",
           "OPTIONAL_INT", "MAX_RANKS", "MAX_MESSAGES", "MAX_TIME_S", "MAX_SPAN_S", "op_codes",
           "Trace", "check_limits", "read_trace", "call_order"]

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


MAX_RANKS = 1 << 24   # a communicator larger than this is a corrupt file, not a job
MAX_MESSAGES = 1 << 40  # messages of one matrix row: a million a second between one pair for 12 days
# Trace times are seconds from a common origin (often the start of the run, sometimes the Unix epoch, as
# MPI_Wtime gives): at most 1e10 s (the year 2286 as a Unix time), and a trace lasts at most a year.
MAX_TIME_S = 1e10
MAX_SPAN_S = 3.2e7


def check_limits(path, rows=None, **cols) -> None:
    """Reject values no real run has (a rank past 2^24, a message past 2^60 bytes) before they size arrays.

    Parameters
    ----------
    path : str or path
        The file, for messages.
    rows : pandas.DataFrame, optional
        The table the columns come from, for the line of each value (:func:`topoplan.core.csvtable.row_line`);
        default: value ``i`` is on line ``i + 2``.
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
    """
    for col, arr in cols.items():
        limit, what = {"bytes": (MAX_VALUE["size"], "bytes"), "msgs": (MAX_MESSAGES, "messages")}.get(
            col, (MAX_RANKS, "ranks"))
        bad = np.flatnonzero(np.asarray(arr) > limit)
        if bad.size:
            i = int(bad[0])
            line = i + 2 if rows is None else row_line(rows, i)
            raise TopoplanError(f"{path}:{line}: field '{col}': {arr[i]:.4g} is over the limit of {limit:,.0f} {what}")


def _check_times(path, df, ts: np.ndarray, te: np.ndarray) -> None:
    """Times within :data:`MAX_TIME_S`, and the trace no longer than :data:`MAX_SPAN_S`."""
    for col, arr in (("t_start", ts), ("t_end", te)):
        bad = np.flatnonzero(arr > MAX_TIME_S)
        if bad.size:
            i = int(bad[0])
            raise TopoplanError(f"{path}:{row_line(df, i)}: field '{col}': {arr[i]:.4g} s is over the limit of "
                                f"{MAX_TIME_S:.0e} s (the year 2286 as a Unix time)")
    if len(ts):
        first = int(np.argmin(ts))
        bad = np.flatnonzero(te > ts[first] + MAX_SPAN_S)
        if bad.size:
            i = int(bad[0])
            raise TopoplanError(f"{path}:{row_line(df, i)}: field 't_end': {te[i]:.4g} s is more than a year "
                                f"({MAX_SPAN_S:.2g} s) after the first call (t_start {ts[first]:.4g} s on line "
                                f"{row_line(df, first)}); no traced run lasts that long")


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
        One line naming the file and line on bad input: a row with another
        field count than the header (:func:`topoplan.core.csvtable.read_csv_table`), a missing
        column, a malformed number, a negative size or time, a time over
        :data:`MAX_TIME_S` or a trace over :data:`MAX_SPAN_S` long, a call
        ending before it starts, or a rank outside MPI_COMM_WORLD.

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
    df = read_csv_table(path, REQUIRED, "MPI event trace", max_rows=limits.MAX_TRACE_ROWS)
    n = len(df)
    line = lambda i: row_line(df, i)  # noqa: E731
    ints = {c: to_numbers(df, c, path, integer=True) for c in ("rank", "peer", "root", "comm_size")}
    by = to_numbers(df, "bytes", path, integer=False, empty=0)
    ts = to_numbers(df, "t_start", path, integer=False, empty=0)
    te = to_numbers(df, "t_end", path, integer=False, empty=0)
    extra = {c: (to_numbers(df, c, path, integer=True) if c in df.columns else np.full(n, -1, dtype=np.int64))
             for c in OPTIONAL_INT}
    import pandas as pd

    codes, names = pd.factorize(df["op"], use_na_sentinel=False)   # a few distinct names: map those only
    names = [str(x).strip().lower() for x in names]
    op = np.array([OP_CODE.get(x, UNKNOWN_OP) for x in names] + [UNKNOWN_OP], dtype=np.int16)[codes]
    unknown: dict[str, int] = {}
    for x, c in zip(names, np.bincount(codes, minlength=len(names)).tolist()):
        if x not in OP_CODE and c:
            unknown[x] = unknown.get(x, 0) + c
    for col, arr in (("bytes", by), ("t_start", ts), ("t_end", te)):
        bad = np.flatnonzero(~np.isfinite(arr) | (arr < 0))
        if bad.size:
            raise TopoplanError(f"{path}:{line(bad[0])}: field '{col}': must be a non-negative number")
    check_limits(path, df, bytes=by, rank=ints["rank"], peer=ints["peer"], comm_size=ints["comm_size"])
    _check_times(path, df, ts, te)
    bad = np.flatnonzero(te < ts)
    if bad.size:
        raise TopoplanError(f"{path}:{line(bad[0])}: field 't_end': ends before t_start")
    bad = np.flatnonzero(np.isin(op, [OP_CODE[o] for o in COLLECTIVE_OPS]) & (ints["comm_size"] < 1))
    if bad.size:
        raise TopoplanError(f"{path}:{line(bad[0])}: field 'comm_size': a collective needs a communicator of at "
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
            raise TopoplanError(f"{path}:{line(i)}: field 'peer': rank {ints['peer'][i]} is outside MPI_COMM_WORLD "
                                f"({known} ranks: the largest rank with events and the largest comm_size)")
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
    return t


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
        if int(cid) in out:
            raise TopoplanError(f"{path}:{row_line(df, i)}: field 'comm': comm {int(cid)} is listed twice")
        out[int(cid)] = members
    return out
