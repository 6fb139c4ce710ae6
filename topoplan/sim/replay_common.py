"""What every replay of an MPI trace shares: its result, the computation gaps, collective calls expanded into
MPICH steps, marked rows, the balance of sends and receives, and the deadlock message.

The reference replayer (:mod:`topoplan.sim.reference`), the trace compiler (:mod:`topoplan.sim.compiler`)
and the compiled runs (:mod:`topoplan.sim.pieces`) import these; :func:`topoplan.sim.replay.replay` is the
entry point.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from topoplan.core.errors import TopoplanError
from topoplan.sim import program
from topoplan.traffic.collectives import MPICHThresholds, allgather_algorithm, alltoall_algorithm, schedule
from topoplan.traffic.trace import OP_CODE, OPS, Trace, per_destination_calls

__all__ = ["ReplayResult", "check_sends_matched"]

OP_SEND, OP_ISEND, OP_RECV, OP_IRECV, OP_SENDRECV = (OP_CODE[o] for o in ("send", "isend", "recv", "irecv", "sendrecv"))
OP_WAIT, OP_WAITALL = OP_CODE["wait"], OP_CODE["waitall"]
COLL_CODES = {OP_CODE[o] for o in ("bcast", "reduce", "allreduce", "alltoall", "alltoallv", "allgather", "allgatherv",
                              "gather", "scatter", "reduce_scatter", "barrier")}
A2A_CODES = {OP_CODE["alltoall"], OP_CODE["alltoallv"]}


@dataclass
class ReplayResult:
    """Outcome of a replay (times in seconds, bytes per directed link).

    Parameters
    ----------
    makespan_s : float
        When the last rank finishes.
    rank_finish_s, comm_time_s : numpy.ndarray
        Per rank: finish time, and time not computing.
    link_bytes : numpy.ndarray
        Bytes per directed link of the network.
    n_messages, n_flows, n_events : int
    timeline : dict, optional
        Link utilization per interval, with ``timeline_dt_s``.
    unknown_ops : dict, optional
        Calls skipped (not modelled), with counts.
    mark_s : numpy.ndarray, optional
        With ``marks`` (rows of the trace): per marked row, when its rank reached that call (its previous
        call had ended; the computation gap in front of the row comes after).
    n_pieces : int, optional
        Pieces the trace was replayed from (1: whole).

    Examples
    --------
    >>> from topoplan.traffic.generators import parse_spec
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.core.placement import sequential
    >>> from topoplan.sim.network import build_network
    >>> from topoplan.sim.replay import replay
    >>> t = load_topology("paper003", ["kind=tree", "ocs=null"])
    >>> res = replay(parse_spec("ring:np=8,bytes=1MB"), build_network(t), sequential(8, t))
    >>> round(res.makespan_s, 6), res.n_messages, res.rank_finish_s.shape
    (0.000804, 8, (8,))
    """

    makespan_s: float
    rank_finish_s: np.ndarray
    comm_time_s: np.ndarray
    link_bytes: np.ndarray
    n_messages: int
    n_flows: int
    n_events: int
    timeline: dict | None = None
    unknown_ops: dict = field(default_factory=dict)
    mark_s: np.ndarray | None = None
    n_pieces: int = 1


def gaps(trace: Trace, bounds: np.ndarray, compute_scale: float) -> np.ndarray:
    """Computation before each call: the gap since the rank's previous call (first call: since the trace start)."""
    gap = np.zeros(len(trace))
    if len(trace):
        gap[1:] = trace.t_start[1:] - trace.t_end[:-1]
        first = bounds[:-1][bounds[:-1] < bounds[1:]]
        gap[first] = trace.t_start[first] - trace.t_start.min()
    return np.maximum(gap, 0.0) * compute_scale


class Collectives:
    """Expands collective calls into MPICH schedule steps (cached per call shape).

    With ``compact`` a schedule is kept as arrays (:func:`compact_steps`) instead of :class:`Step`
    objects: the compiled replay keeps one schedule per rank of an alltoall, and as objects those
    took most of its memory (a 1,024-rank alltoall: about 0.9 GB of 1.1).
    """

    def __init__(self, trace: Trace, thresholds=None, compact: bool = False):
        self.trace = trace
        self.thresholds = thresholds
        self.compact = compact
        self.local: dict = {}       # comm id -> (members, local rank by world rank (-1: not a member))
        self.cache: dict = {}
        self._call_last = None      # row of a per-destination alltoall(v) call -> the call's last row

    def _last_row(self, i: int) -> int:
        """The last row of the alltoall(v) call written per destination that row i belongs to."""
        if self._call_last is None:
            rows, starts = per_destination_calls(self.trace)
            bounds = np.append(starts, len(rows))
            self._call_last = np.full(len(self.trace), -1, dtype=np.int64)
            self._call_last[rows] = np.repeat(rows[bounds[1:] - 1], np.diff(bounds))
        return int(self._call_last[i])

    def member(self, r: int, i: int):
        """Members of the communicator of rank r's call i and its local rank by world rank (r a member)."""
        tr = self.trace
        comm = int(tr.comm[i])
        got = self.local.get(comm)
        if got is None:   # one array per communicator, which every expanded call of it shares (read only)
            got = self.local[comm] = (tr.members(comm), tr.local_ranks(comm))
        members, pos = got
        if not 0 <= r < len(pos) or pos[r] < 0:
            raise TopoplanError(f"{tr.source}: rank {r} calls {OPS[int(tr.op[i])]} on communicator {comm} "
                                f"but is not one of its members")
        return members, pos

    def streamed(self, i: int):
        """How call i runs as a streamed ``GEN`` micro-op (:mod:`topoplan.sim._loop`): ``(algorithm code, batch,
        bytes)``, or None when it is expanded into steps. An alltoall of one size per destination whose MPICH
        algorithm is the pairwise exchange or the batched isend/irecv, and an allgather by the ring, stream
        (their N(N - 1) messages need not be held); logarithmic algorithms, alltoallv and the other
        collectives are expanded. Bytes are whole, as :func:`topoplan.traffic.collectives.schedule` rounds them."""
        tr = self.trace
        op = int(tr.op[i])
        n = float(round(float(tr.bytes[i]))) if np.isfinite(tr.bytes[i]) else 0.0
        if op not in (OP_CODE["alltoall"], OP_CODE["allgather"]) or tr.peer[i] >= 0 or not n > 0:
            return None
        p = len(tr.members(int(tr.comm[i])))
        if p < 2:
            return None
        th = self.thresholds or MPICHThresholds()
        if op == OP_CODE["allgather"]:
            return (program.GEN_RING, 1, n) if allgather_algorithm(p, n * p, th) == "ring" else None
        alg = alltoall_algorithm(p, n, th)
        if alg == "pairwise":
            return program.GEN_PAIRWISE, 1, n
        if alg == "spread":
            return program.GEN_SPREAD, (th.alltoall_throttle if th.alltoall_throttle > 0 else p), n
        return None

    def expand(self, r: int, i: int, hi: int):
        """Steps of rank r's collective call i (rows up to ``hi``); returns ``(steps, members, last)``.

        ``last`` is the last trace row the call spans: an ``alltoall(v)`` written
        one row per destination is one call over consecutive rows
        (:func:`topoplan.traffic.trace.per_destination_calls`); its
        per-destination sizes become ``counts`` and the op keeps its name, so an
        ``alltoall`` gets MPICH's algorithm selection by size.
        """
        tr = self.trace
        op, comm = int(tr.op[i]), int(tr.comm[i])
        members, pos = self.member(r, i)
        root = int(tr.root[i])
        lroot = int(pos[root]) if 0 <= root < len(pos) and pos[root] >= 0 else 0
        j, counts = i, None
        if op in A2A_CODES and tr.peer[i] >= 0:
            j = min(self._last_row(i), hi - 1)
            peers = tr.peer[i:j + 1]
            dest = np.where(peers < len(pos), pos[np.minimum(peers, len(pos) - 1)], -1)
            if (dest < 0).any():
                k = i + int(np.flatnonzero(dest < 0)[0])
                raise TopoplanError(f"{tr.source}: rank {r} sends to rank {int(tr.peer[k])} in {OPS[op]} on "
                                    f"communicator {comm}, which is not one of its members")
            counts = tuple(np.bincount(dest, weights=tr.bytes[i:j + 1], minlength=len(members)).tolist())
        key = (op, len(members), int(pos[r]), lroot, float(tr.bytes[i]), counts)
        steps = self.cache.get(key)
        if steps is None:
            kw = {"thresholds": self.thresholds or MPICHThresholds()}
            if counts is not None:
                kw["counts"] = list(counts)
            steps = schedule(OPS[op], *key[1:5], **kw)
            if self.compact:
                steps = compact_steps(steps)
            self.cache[key] = steps
        return steps, members, j


def compact_steps(steps) -> tuple:
    """A schedule as arrays: entries per step, then every entry's (local peer, bytes, is_send), each step's
    receives before its sends (a receive of unknown size counts 0 bytes: the sender's size applies)."""
    count = np.fromiter((len(st.recvs) + len(st.sends) for st in steps), dtype=np.int64, count=len(steps))
    peer = np.fromiter((p for st in steps for p, _ in (*st.recvs, *st.sends)), dtype=np.int64,
                       count=int(count.sum()))
    nbytes = np.fromiter((float(b or 0.0) for st in steps for _, b in (*st.recvs, *st.sends)), dtype=np.float64,
                         count=int(count.sum()))
    send = np.fromiter((k for st in steps for k in (*([0] * len(st.recvs)), *([1] * len(st.sends)))),
                       dtype=np.int64, count=int(count.sum()))
    return count, peer, nbytes, send


NO_MARK = 1 << 62


def check_marks(marks, trace: Trace) -> np.ndarray:
    """Marked rows as int64, each a row of the trace."""
    m = np.asarray(marks)
    if m.ndim != 1 or (m.size and not np.issubdtype(m.dtype, np.integer)):
        raise TopoplanError("field 'marks': expected a 1-d array of row indices")
    m = m.astype(np.int64)
    if m.size and (m.min() < 0 or m.max() >= len(trace)):
        raise TopoplanError(f"field 'marks': row indices must be in 0..{len(trace) - 1}, "
                            f"got {int(m.min())}..{int(m.max())}")
    return m


def marks_by_rank(marks: np.ndarray, bounds: np.ndarray):
    """The marks' order by row (stable) and, per rank ``r`` (its rows ``bounds[r]:bounds[r + 1]``), where its
    marks start in that order (``n + 1`` entries)."""
    order = np.argsort(marks, kind="stable")
    return order, np.searchsorted(marks[order], bounds)


def check_sends_matched(trace: Trace) -> None:
    """Every message sent to a rank must have a receive there: an eager send with no receive would
    otherwise 'arrive' and the run would look fine (an unmatched receive shows up as a deadlock).

    Parameters
    ----------
    trace : Trace

    Raises
    ------
    TopoplanError
        Naming the first rank sent more messages than it receives.

    Examples
    --------
    >>> t = Trace.from_records([(0, "send", 1, 8, -1, 2, 0.0, 0.0)], 2, source="t.csv")
    >>> check_sends_matched(t)
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: t.csv: unmatched send: rank 1 is sent 1 messages but posts 0 receives
    """
    check_matched(trace.source, *sends_and_receives(trace))


def sends_and_receives(trace: Trace):
    """Per rank: the messages it is sent and the receives it posts (a sendrecv receives once)."""
    op, peer = trace.op, trace.peer
    is_send = np.isin(op, (OP_SEND, OP_ISEND, OP_SENDRECV)) & (peer >= 0)
    is_recv = np.isin(op, (OP_RECV, OP_IRECV, OP_SENDRECV))
    return (np.bincount(peer[is_send], minlength=trace.n_ranks),
            np.bincount(trace.rank[is_recv], minlength=trace.n_ranks))


def check_matched(source, sent, received) -> None:
    over = np.flatnonzero(sent > received)
    if over.size:
        d = int(over[0])
        raise TopoplanError(f"{source or 'trace'}: unmatched send: rank {d} is sent {int(sent[d])} messages "
                            f"but posts {int(received[d])} receives")


def blocked_message(parts: list, n_blocked: int, source: str = "") -> str:
    """The deadlock error: the trace's ``source`` (its file, or the generator spec), the first blocked ranks
    (``parts``, each 'rank r in call c (...)') and the count."""
    more = f" and {n_blocked - 4} more" if n_blocked > 4 else ""
    where = f"{source}: " if source else ""
    return f"{where}deadlock or unmatched receive: {n_blocked} rank(s) blocked: " + "; ".join(parts) + more
