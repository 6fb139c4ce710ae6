"""Replay an MPI event trace on a compiled network.

Each rank runs its calls in order. Computation between calls is the gap in
the trace (``t_start`` of a call minus ``t_end`` of the previous one),
scaled by ``compute_scale``. Point-to-point calls follow MPI matching
(source, tag, order; ``-1`` is any source): messages below
``eager_threshold_B`` are sent eagerly (the send completes at once, the
data flows immediately), larger ones use rendezvous (the transfer starts
when both sides have posted and the send completes with the transfer).
Collectives are expanded into steps of point-to-point messages with the
MPICH algorithms of :mod:`topoplan.traffic.collectives`. Every message becomes one
flow per segment of its route (see :mod:`topoplan.sim.network`) in the max-min
engine of :mod:`topoplan.sim.maxmin`.

A deadlock (ranks blocked with nothing in flight) raises
:class:`TopoplanError` naming the blocked ranks and their calls.

Two interchangeable implementations: the compiled one (the default, see
:mod:`topoplan.sim._compiled`: the trace is compiled into per-rank micro-ops and
one Numba loop runs ranks and flows, ~1 us per message) and this module's
Python :class:`Replayer`, the readable reference. Both record the
utilization timeline (the compiled loop samples every link's bytes at each
interval boundary) and the times ranks reach marked calls.
``tests/test_sim_replay.py`` checks they agree.

A generator's recording (:func:`topoplan.traffic.generators.record_spec`) is
replayed piece by piece by the compiled loop (:func:`_replay_pieces`): memory
holds a piece and what the ranks have not run yet, and the results are the
whole trace's to the bit (``tests/test_sim_pieces.py``).
"""

from __future__ import annotations

import heapq
from collections import defaultdict, deque
from dataclasses import dataclass, field

import numpy as np

from topoplan.core import memory
from topoplan.core.arrays import unique_inverse
from topoplan.core.errors import TopoplanError
from topoplan.traffic import limits
from topoplan.traffic.trace import OP_CODE, OPS, Trace

__all__ = ["ReplayResult", "check_sends_matched", "check_options", "replay", "bulk_trace"]

_SEND, _ISEND, _RECV, _IRECV, _SENDRECV = (OP_CODE[o] for o in ("send", "isend", "recv", "irecv", "sendrecv"))
_WAIT, _WAITALL = OP_CODE["wait"], OP_CODE["waitall"]
_COLL = {OP_CODE[o] for o in ("bcast", "reduce", "allreduce", "alltoall", "alltoallv", "allgather", "allgatherv",
                              "gather", "scatter", "reduce_scatter", "barrier")}
_A2A = {OP_CODE["alltoall"], OP_CODE["alltoallv"]}


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


def _gaps(trace: Trace, bounds: np.ndarray, compute_scale: float) -> np.ndarray:
    """Computation before each call: the gap since the rank's previous call (first call: since the trace start)."""
    gap = np.zeros(len(trace))
    if len(trace):
        gap[1:] = trace.t_start[1:] - trace.t_end[:-1]
        first = bounds[:-1][bounds[:-1] < bounds[1:]]
        gap[first] = trace.t_start[first] - trace.t_start.min()
    return np.maximum(gap, 0.0) * compute_scale


class _Collectives:
    """Expands collective calls into MPICH schedule steps (cached per call shape).

    With ``compact`` a schedule is kept as arrays (:func:`_compact_steps`) instead of :class:`Step`
    objects: the compiled replay keeps one schedule per rank of an alltoall, and as objects those
    took most of its memory (a 1,024-rank alltoall: about 0.9 GB of 1.1).
    """

    def __init__(self, trace: Trace, thresholds=None, compact: bool = False):
        self.trace = trace
        self.thresholds = thresholds
        self.compact = compact
        self.local: dict = {}       # comm id -> local rank by world rank (-1: not a member)
        self.cache: dict = {}
        self._call_last = None      # row of a per-destination alltoall(v) call -> the call's last row

    def _last_row(self, i: int) -> int:
        """The last row of the alltoall(v) call written per destination that row i belongs to."""
        if self._call_last is None:
            from topoplan.traffic.collectives import per_destination_calls

            rows, starts = per_destination_calls(self.trace)
            bounds = np.append(starts, len(rows))
            self._call_last = np.full(len(self.trace), -1, dtype=np.int64)
            self._call_last[rows] = np.repeat(rows[bounds[1:] - 1], np.diff(bounds))
        return int(self._call_last[i])

    def member(self, r: int, i: int):
        """Members of the communicator of rank r's call i and its local rank by world rank (r a member)."""
        tr = self.trace
        comm = int(tr.comm[i])
        pos = self.local.get(comm)
        if pos is None:
            pos = self.local[comm] = tr.local_ranks(comm)
        if not 0 <= r < len(pos) or pos[r] < 0:
            raise TopoplanError(f"{tr.source}: rank {r} calls {OPS[int(tr.op[i])]} on communicator {comm} "
                                f"but is not one of its members")
        return tr.members(comm), pos

    def streamed(self, i: int):
        """How call i runs as a streamed ``GEN`` micro-op (:mod:`topoplan.sim._compiled`): ``(algorithm code, batch,
        bytes)``, or None when it is expanded into steps. An alltoall of one size per destination whose MPICH
        algorithm is the pairwise exchange or the batched isend/irecv, and an allgather by the ring, stream
        (their N(N - 1) messages need not be held); logarithmic algorithms, alltoallv and the other
        collectives are expanded. Bytes are whole, as :func:`topoplan.traffic.collectives.schedule` rounds them."""
        from topoplan.sim._engine import GEN_PAIRWISE, GEN_RING, GEN_SPREAD
        from topoplan.traffic.collectives import MPICHThresholds, allgather_algorithm, alltoall_algorithm

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
            return (GEN_RING, 1, n) if allgather_algorithm(p, n * p, th) == "ring" else None
        alg = alltoall_algorithm(p, n, th)
        if alg == "pairwise":
            return GEN_PAIRWISE, 1, n
        if alg == "spread":
            return GEN_SPREAD, (th.alltoall_throttle if th.alltoall_throttle > 0 else p), n
        return None

    def expand(self, r: int, i: int, hi: int):
        """Steps of rank r's collective call i (rows up to ``hi``); returns ``(steps, members, last)``.

        ``last`` is the last trace row the call spans: an ``alltoall(v)`` written
        one row per destination is one call over consecutive rows
        (:func:`topoplan.traffic.collectives.per_destination_calls`); its
        per-destination sizes become ``counts`` and the op keeps its name, so an
        ``alltoall`` gets MPICH's algorithm selection by size.
        """
        from topoplan.traffic.collectives import MPICHThresholds, schedule

        tr = self.trace
        op, comm = int(tr.op[i]), int(tr.comm[i])
        members, pos = self.member(r, i)
        root = int(tr.root[i])
        lroot = int(pos[root]) if 0 <= root < len(pos) and pos[root] >= 0 else 0
        j, counts = i, None
        if op in _A2A and tr.peer[i] >= 0:
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
                steps = _compact_steps(steps)
            self.cache[key] = steps
        return steps, members, j


def _compact_steps(steps) -> tuple:
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


class _Req:
    __slots__ = ("rank", "peer", "is_send", "done", "t_done", "seq")

    def __init__(self, rank, peer, is_send, seq):
        self.rank, self.peer, self.is_send, self.done, self.t_done = rank, peer, is_send, False, 0.0
        self.seq = seq  # posting order: the earliest posted receive matches first


class _Msg:
    __slots__ = ("src", "dst", "nbytes", "tag", "sreq", "rreq", "eager", "t_send", "arrived", "t_arrive",
                 "started", "seg")

    def __init__(self, src, dst, nbytes, tag, sreq, eager, t_send):
        self.src, self.dst, self.nbytes, self.tag, self.sreq = src, dst, nbytes, tag, sreq
        self.rreq, self.eager, self.t_send = None, eager, t_send
        self.arrived, self.t_arrive, self.started, self.seg = False, 0.0, False, 0


class Replayer:
    """The replay state machine; use :func:`replay` rather than this class directly."""

    def __init__(self, trace: Trace, net, placement, *, eager_threshold_B=65536.0, compute_scale=1.0,
                 thresholds=None, timeline_dt_s=None, progress=None, marks=None):
        from topoplan.sim.maxmin import FlowEngine

        self.trace, self.net = trace, net
        self.paper = net.sim_model.engine == "paper"
        self.node = np.asarray(placement.rank_to_node, dtype=np.int64)
        self.eager_B = float(eager_threshold_B)
        self.thresholds = thresholds
        self.progress = progress
        if self.paper:
            from topoplan.sim.paper import PaperEngine

            if timeline_dt_s:
                raise TopoplanError("the paper model records no utilization timeline; use model 'maxmin'")
            self.engine = PaperEngine(net.linkset(), queue_of_link=net.paper_queues(),
                                      chunk_B=net.sim_model.relay_chunk_B, tie_seed=net.sim_model.paper_tie_seed)
        elif timeline_dt_s:
            self.engine = FlowEngine(net.linkset(), timeline_dt_s=timeline_dt_s)
        else:
            self.engine = FlowEngine(net.linkset())
        n = trace.n_ranks
        self.n = n
        # per-rank call lists as plain Python lists: scalar access in the hot loop
        bounds = np.searchsorted(trace.rank, np.arange(n + 1))
        self.lo, self.hi = bounds[:-1].tolist(), bounds[1:].tolist()
        self.op = trace.op.tolist(); self.peer = trace.peer.tolist(); self.nb = trace.bytes.tolist()
        self.root = trace.root.tolist(); self.comm = trace.comm.tolist(); self.tag = trace.tag.tolist()
        self.req_kind = trace.req.tolist(); self.csize = trace.comm_size.tolist()
        self.gap = _gaps(trace, bounds, compute_scale).tolist()
        self.compute_total = np.zeros(n)
        self.pc = list(self.lo)
        self.gap_waited = [-1] * n           # call index whose computation gap has elapsed
        self.seq = 0
        self.colls = _Collectives(trace, thresholds)
        self.clock = [0.0] * n
        self.blocked: list[list | None] = [None] * n      # requests a rank waits on
        self.micro: list[deque] = [deque() for _ in range(n)]  # pending collective steps
        self.open_reqs: list[list] = [[] for _ in range(n)]
        self.coll_seq: list[dict] = [defaultdict(int) for _ in range(n)]
        self.posted = defaultdict(deque)       # (dst, src, tag) -> recv reqs; src -1 / tag -1 are wildcards
        self.unexpected = defaultdict(deque)   # (dst, src, tag) -> messages not yet matched
        self.unexp_keys = defaultdict(set)     # dst -> keys of non-empty unexpected queues
        self.flow_msg: dict[int, _Msg] = {}
        self.msg_segments: dict[int, tuple] = {}
        self.ready: list = []
        self.finish = [np.nan] * n
        self.new_flows: list = []
        self.n_messages = 0
        self.done_ranks = 0
        # marked rows: per rank, the next one to stamp with the time the rank reaches it
        self.marks = None if marks is None else _check_marks(marks, trace)
        self.mark_s = np.full(0 if marks is None else len(self.marks), np.nan)
        self.mark_next = [_NO_MARK] * n
        if self.marks is not None:
            order, starts = _marks_by_rank(self.marks, bounds)
            self.mark_order = order.tolist()
            self.mark_ptr, self.mark_end = starts[:-1].tolist(), starts[1:].tolist()
            self.mark_row = self.marks[order].tolist()
            self.mark_next = [self.mark_row[p] if p < e else _NO_MARK
                              for p, e in zip(self.mark_ptr, self.mark_end)]

    def _stamp(self, r: int, i: int) -> None:
        """Rank ``r`` reached row ``i``: every marked row of ``r`` up to ``i`` gets the rank's clock."""
        p, e, t = self.mark_ptr[r], self.mark_end[r], self.clock[r]
        while p < e and self.mark_row[p] <= i:
            self.mark_s[self.mark_order[p]] = t
            p += 1
        self.mark_ptr[r] = p
        self.mark_next[r] = self.mark_row[p] if p < e else _NO_MARK

    def run(self) -> ReplayResult:
        for r in range(self.n):
            heapq.heappush(self.ready, (0.0, r))
        eng = self.engine
        events = 0
        while True:
            self._flush_flows()
            t_flow = eng.next_event_time()
            t_rank = self.ready[0][0] if self.ready else np.inf
            if t_rank == np.inf and t_flow == np.inf:
                break
            if t_rank <= t_flow:
                eng.advance_to(t_rank)
                while self.ready and self.ready[0][0] <= t_rank:
                    t, r = heapq.heappop(self.ready)
                    self._run_rank(r, t)
            else:
                t, finished = eng.run_until_next_event()
                events += 1
                for fid in np.asarray(finished).tolist():
                    self._flow_done(fid, t)
                if self.progress:
                    self.progress(self.done_ranks, self.n)
        unfinished = [r for r in range(self.n) if np.isnan(self.finish[r])]
        if unfinished:
            raise TopoplanError(self._deadlock_message(unfinished))
        finish = np.array(self.finish)
        tl = eng.timeline() if hasattr(eng, "timeline") else None
        return ReplayResult(makespan_s=float(finish.max(initial=0.0)), rank_finish_s=finish,
                            comm_time_s=np.maximum(finish - self.compute_total, 0.0),
                            link_bytes=eng.link_bytes(), n_messages=self.n_messages,
                            n_flows=len(self.flow_msg), n_events=events, timeline=tl,
                            unknown_ops=dict(self.trace.unknown_ops),
                            mark_s=None if self.marks is None else self.mark_s)

    def _deadlock_message(self, ranks) -> str:
        parts = []
        for r in ranks[:4]:
            i = self.pc[r] - 1 if self.blocked[r] is not None else self.pc[r]
            if self.lo[r] <= i < self.hi[r]:
                op = OPS[self.op[i]] if self.op[i] >= 0 else "unknown"
                parts.append(f"rank {r} in call {i - self.lo[r]} ({op} peer {self.peer[i]})")
            else:
                parts.append(f"rank {r} in a collective step")
        return _blocked_message(parts, len(ranks))

    # -- rank execution ----------------------------------------------------
    def _run_rank(self, r: int, t: float) -> None:
        """Execute rank r's calls from time t until it blocks, waits for computation, or ends."""
        self.clock[r] = t
        while True:
            if self.blocked[r] is not None:
                if not all(q.done for q in self.blocked[r]):
                    return
                self.blocked[r] = None
            if self.micro[r]:
                self._post_step(r, self.micro[r].popleft())
                continue
            i = self.pc[r]
            if i >= self.mark_next[r]:
                self._stamp(r, i)
            if i >= self.hi[r]:
                if np.isnan(self.finish[r]):
                    self.finish[r] = self.clock[r]
                    self.done_ranks += 1
                return
            g = self.gap[i]
            if g > 0 and self.gap_waited[r] != i:
                self.gap_waited[r] = i
                self.compute_total[r] += g
                heapq.heappush(self.ready, (self.clock[r] + g, r))
                return
            self.pc[r] = i + 1
            self._call(r, i)

    def _call(self, r: int, i: int) -> None:
        op = self.op[i]
        t = self.clock[r]
        if op == _SEND or op == _ISEND:
            q = self._send(r, self.peer[i], self.nb[i], self.tag[i], t)
            if op == _SEND:
                self.blocked[r] = [q]
            else:
                self.open_reqs[r].append(q)
        elif op == _RECV or op == _IRECV:
            q = self._recv(r, self.peer[i], self.nb[i], self.tag[i], t)
            if op == _RECV:
                self.blocked[r] = [q]
            else:
                self.open_reqs[r].append(q)
        elif op == _SENDRECV:
            qs = self._send(r, self.peer[i], self.nb[i], self.tag[i], t)
            qr = self._recv(r, -1, self.nb[i], self.tag[i], t)
            self.blocked[r] = [qs, qr]
        elif op == _WAIT:
            peer, kind = self.peer[i], self.req_kind[i]
            reqs = self.open_reqs[r]
            pick = None
            for k, q in enumerate(reqs):
                if (peer < 0 or q.peer == peer) and (kind < 0 or q.is_send == bool(kind)):
                    pick = k
                    break
            if peer < 0 and pick is None:
                self.blocked[r], self.open_reqs[r] = list(reqs), []
            elif pick is not None:
                self.blocked[r] = [reqs.pop(pick)]
        elif op == _WAITALL:
            self.blocked[r], self.open_reqs[r] = list(self.open_reqs[r]), []
        elif op in _COLL:
            self._collective(r, i)
        # unknown ops are skipped (counted in trace.unknown_ops)

    def _collective(self, r: int, i: int) -> None:
        steps, members, last = self.colls.expand(r, i, self.hi[r])
        self.pc[r] = last + 1
        comm = self.comm[i]
        seq = self.coll_seq[r][comm]
        self.coll_seq[r][comm] = seq + 1
        tag = ("coll", comm, seq)
        for st in steps:
            self.micro[r].append((tag, members, st))

    def _post_step(self, r: int, item) -> None:
        tag, members, st = item
        t = self.clock[r]
        reqs = [self._recv(r, int(members[p]), b, tag, t) for p, b in st.recvs]
        reqs += [self._send(r, int(members[p]), b, tag, t) for p, b in st.sends]
        self.blocked[r] = reqs

    # -- point to point ----------------------------------------------------
    def _new_req(self, r, peer, is_send) -> _Req:
        self.seq += 1
        return _Req(r, peer, is_send, self.seq)

    def _send(self, r, dst, nbytes, tag, t) -> _Req:
        q = self._new_req(r, dst, True)
        eager = nbytes < self.eager_B
        m = _Msg(r, dst, nbytes, tag, q, eager, t)
        self.n_messages += 1
        if eager:
            q.done, q.t_done = True, t
            self._start(m, t)
        rq = self._match_posted(m)
        if rq is not None:
            self._matched(m, rq, t)
        else:
            self.unexpected[(dst, r, tag)].append(m)
            self.unexp_keys[dst].add((dst, r, tag))
        return q

    def _recv(self, r, src, nbytes, tag, t) -> _Req:
        q = self._new_req(r, src, False)
        m = self._match_unexpected(r, src, tag)
        if m is not None:
            self._matched(m, q, t)
        else:
            self.posted[(r, src, tag)].append(q)
        return q

    def _match_posted(self, m: _Msg):
        """The earliest posted receive that matches (exact, any-source and any-tag queues)."""
        keys = [(m.dst, m.src, m.tag), (m.dst, -1, m.tag)]
        if not isinstance(m.tag, tuple):  # collective messages never match wildcard tags
            keys += [(m.dst, m.src, -1), (m.dst, -1, -1)]
        best, best_key = None, None
        for key in keys:
            dq = self.posted.get(key)
            if dq and (best is None or dq[0].seq < best.seq):
                best, best_key = dq[0], key
        if best is not None:
            self.posted[best_key].popleft()
        return best

    def _match_unexpected(self, r, src, tag):
        dq = self.unexpected.get((r, src, tag))
        if dq:
            m = dq.popleft()
            if not dq:
                self.unexp_keys[r].discard((r, src, tag))
            return m
        if src >= 0 and tag != -1:
            return None
        best, best_key = None, None
        for key in self.unexp_keys[r]:
            dq = self.unexpected[key]
            if (src < 0 or key[1] == src) and (tag == -1 and not isinstance(key[2], tuple) or key[2] == tag):
                if best is None or (dq[0].t_send, dq[0].sreq.seq) < (best.t_send, best.sreq.seq):  # ties: sent first
                    best, best_key = dq[0], key
        if best is not None:
            dq = self.unexpected[best_key]
            dq.popleft()
            if not dq:
                self.unexp_keys[r].discard(best_key)
        return best

    def _matched(self, m: _Msg, rq: _Req, t: float) -> None:
        m.rreq = rq
        rq.peer = m.src
        if m.eager:
            if m.arrived:
                self._complete(rq, max(t, m.t_arrive))
        else:
            self._start(m, t)

    def _start(self, m: _Msg, t: float) -> None:
        m.started = True
        a, b = int(self.node[m.src]), int(self.node[m.dst])
        key = (a, b, m.nbytes >= self.net.threshold_B)
        segs = self.msg_segments.get(key)
        if segs is None:
            msg_ptr, s_src, s_dst, rptr, rlinks = self.net.message_segments(np.array([a]), np.array([b]),
                                                                              np.array([m.nbytes]))
            segs = [(rlinks[rptr[s]:rptr[s + 1]], rptr[s + 1] - rptr[s]) for s in range(len(s_src))]
            self.msg_segments[key] = segs
        m.seg = 0
        self.new_flows.append((m, t))

    def _flush_flows(self) -> None:
        if not self.new_flows:
            return
        batch, self.new_flows = self.new_flows, []
        routes, starts, sizes = [], [], []
        for m, t in batch:
            a, b = int(self.node[m.src]), int(self.node[m.dst])
            route = self.msg_segments[(a, b, m.nbytes >= self.net.threshold_B)][m.seg][0]
            routes.append(route)
            starts.append(t)
            sizes.append(m.nbytes)
        lengths = np.array([len(x) for x in routes], dtype=np.int64)
        ptr = np.concatenate([[0], np.cumsum(lengths)])
        links = np.concatenate(routes).astype(np.int64) if routes else np.zeros(0, np.int64)
        sizes = np.array(sizes, dtype=np.float64)
        owner = np.repeat(np.arange(len(routes)), lengths)
        if self.paper:  # the engine stores and forwards per hop; switches add their switching delay
            extra = self.net.switch_delay_s * np.bincount(owner, weights=self.net._switches_in[links],
                                                          minlength=len(routes))
            ids = self.engine.add_flows(ptr, links, np.array(starts) + extra, sizes,
                                        cut_through=self.net.relay_positions(ptr, links))
        else:
            # size-dependent part of the latency (switch delays, store-and-forward of the first packet);
            # the engine adds the links' own latencies
            extra = self.net.route_latency(ptr, links, sizes) - np.bincount(
                owner, weights=self.net.latency_s[links], minlength=len(routes))
            ids = self.engine.add_flows(ptr, links, np.array(starts) + extra, sizes)
        for fid, (m, _) in zip(np.asarray(ids).tolist(), batch):
            self.flow_msg[fid] = m

    def _flow_done(self, fid: int, t: float) -> None:
        m = self.flow_msg[fid]
        a, b = int(self.node[m.src]), int(self.node[m.dst])
        segs = self.msg_segments[(a, b, m.nbytes >= self.net.threshold_B)]
        m.seg += 1
        if m.seg < len(segs):
            self.new_flows.append((m, t))  # relay node forwards the whole message
            return
        m.arrived, m.t_arrive = True, t
        if not m.eager:
            self._complete(m.sreq, t)
        if m.rreq is not None:
            self._complete(m.rreq, t)

    def _complete(self, q: _Req, t: float) -> None:
        q.done, q.t_done = True, t
        r = q.rank
        blocked = self.blocked[r]
        # only a request the rank waits on may wake it (a second wake-up would skip a computation gap)
        if blocked is not None and any(x is q for x in blocked) and all(x.done for x in blocked):
            heapq.heappush(self.ready, (t, r))


_NO_MARK = 1 << 62


def _check_marks(marks, trace: Trace) -> np.ndarray:
    """Marked rows as int64, each a row of the trace."""
    m = np.asarray(marks)
    if m.ndim != 1 or (m.size and not np.issubdtype(m.dtype, np.integer)):
        raise TopoplanError("field 'marks': expected a 1-d array of row indices")
    m = m.astype(np.int64)
    if m.size and (m.min() < 0 or m.max() >= len(trace)):
        raise TopoplanError(f"field 'marks': row indices must be in 0..{len(trace) - 1}, "
                            f"got {int(m.min())}..{int(m.max())}")
    return m


def _marks_by_rank(marks: np.ndarray, bounds: np.ndarray):
    """The marks' order by row (stable) and, per rank ``r`` (its rows ``bounds[r]:bounds[r + 1]``), where its
    marks start in that order (``n + 1`` entries)."""
    order = np.argsort(marks, kind="stable")
    return order, np.searchsorted(marks[order], bounds)


# What compiling a trace holds at its peak, besides the trace (measured with tracemalloc on NPB class C
# replays at 256 ranks: 150-215 bytes a row for CG, LU, IS and MG): the micro-ops' arrays and their
# temporaries, each collective step's entries, and per trace row its micro-op offsets and gap.
PROGRAM_OP_BYTES = 128
PROGRAM_ENTRY_BYTES = 80
PROGRAM_ROW_BYTES = 24


class _Compiler:
    """Compiles a trace, whole or piece by piece, into the flat program :func:`topoplan.sim._compiled.run_core` runs.

    What must agree across the pieces of one trace is kept here: the route classes (one per
    (source node, destination node, size); a piece adds only those it is first to use, after the
    earlier ones), the collective calls' sequence numbers and tags, the streamed collectives' table
    and communicator members, each rank's previous call (its computation gap) and call count.
    """

    def __init__(self, net, placement, n_ranks: int, *, compute_scale: float = 1.0, thresholds=None,
                 stream: bool = True, pieces: bool = False):
        self.net = net
        self.n = int(n_ranks)
        self.node = np.asarray(placement.rank_to_node, dtype=np.int64)
        self.n_nodes = int(self.node.max(initial=0)) + 1
        self.compute_scale = compute_scale
        self.thresholds = thresholds
        self.stream_on = stream
        self.pieces = pieces
        self.coll_cache: dict = {}
        self.coll_local: dict = {}
        self.coll_seq: dict = {}
        self.tags: dict = {}
        self.gen_rows: list = []
        self.mem: list = []
        self.mem_off: dict = {}
        self.parts = None
        self.classes: dict = {}   # (source node, destination node, size) -> route class (pieces only)
        self.route_chunks: list = []
        self._route = None        # route() of the chunks so far, made when asked
        self.n_classes = 0
        self.n_segs = 0
        self.t_min = None
        self.last_end = np.full(self.n, np.nan)
        self.calls_before = np.zeros(self.n, dtype=np.int64)
        self.sent = np.zeros(self.n, dtype=np.int64)
        self.received = np.zeros(self.n, dtype=np.int64)
        self.compute_s = np.zeros(self.n)

    def _gaps(self, trace: Trace, bounds: np.ndarray) -> np.ndarray:
        """Computation before each call of the piece: since the rank's previous call, in this piece or an
        earlier one (a rank's first call: since the trace's start)."""
        if not self.pieces:
            return _gaps(trace, bounds, self.compute_scale)
        gap = np.zeros(len(trace))
        if len(trace):
            if self.t_min is None:
                self.t_min = float(trace.t_start.min())
            gap[1:] = trace.t_start[1:] - trace.t_end[:-1]
            has = bounds[:-1] < bounds[1:]
            first = bounds[:-1][has]
            prev = self.last_end[has]
            new = np.isnan(prev)
            if new.any() and float(trace.t_start[first[new]].min()) < self.t_min:
                raise TopoplanError(f"{trace.source}: a rank's first call starts before every call of the trace's "
                                    "first piece; replay this trace whole")
            gap[first] = trace.t_start[first] - np.where(new, self.t_min, prev)
            self.last_end[has] = trace.t_end[bounds[1:][has] - 1]
        return np.maximum(gap, 0.0) * self.compute_scale

    def add(self, trace: Trace) -> dict:
        """Compile the next piece (or the whole trace): its micro-ops, per rank in ``lo:hi``; the route
        classes and the streamed collectives' table grow by what it needs."""
        from topoplan.sim import _engine as core
        from topoplan.traffic.collectives import PEER_STEP_OPS, check_peer_step_messages, peer_messages

        n, net, node = self.n, self.net, self.node
        bounds = np.searchsorted(trace.rank, np.arange(n + 1))
        gap = self._gaps(trace, bounds)
        op = trace.op
        count = np.ones(len(trace), dtype=np.int64)
        colls = _Collectives(trace, self.thresholds, compact=True)
        colls.cache, colls.local = self.coll_cache, self.coll_local
        coll_seq, tags, mem_off, mem = self.coll_seq, self.tags, self.mem_off, self.mem
        expanded = {}
        held = 0
        gen_rows, gen_at = [], {}
        skip_to = -1
        for i in np.flatnonzero(np.isin(op, list(_COLL))).tolist():
            if i <= skip_to:
                count[i] = 0
                continue
            r = int(trace.rank[i])
            how = colls.streamed(i) if self.stream_on else None
            if how is not None:
                got = net.route_parts(float(trace.bytes[i]))
                self.parts, how = (got, how) if got is not None else (self.parts, None)
            if how is not None:
                members, pos = colls.member(r, i)
                comm = int(trace.comm[i])
                if comm not in mem_off:
                    mem_off[comm] = sum(len(x) for x in mem)
                    mem.append(np.asarray(members, dtype=np.int64))
                key = (r, comm)
                seq = coll_seq.get(key, 0)
                coll_seq[key] = seq + 1
                gen_at[i] = (len(self.gen_rows) + len(gen_rows), tags.setdefault((comm, seq), -2 - len(tags)),
                             how[2])
                gen_rows.append((how[0], len(members), int(pos[r]), how[1], mem_off[comm]))
                continue
            if trace.peer[i] < 0 and OPS[op[i]] in PEER_STEP_OPS:   # every message of an expanded call is held
                held += peer_messages(OPS[op[i]], len(colls.member(r, i)[0]), float(trace.bytes[i]), self.thresholds)
                if held > limits.MAX_TRACE_ROWS:
                    check_peer_step_messages(trace)
            steps, members, last = colls.expand(r, i, int(bounds[r + 1]))
            count[i + 1: last + 1] = 0
            skip_to = last
            key = (r, int(trace.comm[i]))
            seq = coll_seq.get(key, 0)
            coll_seq[key] = seq + 1
            tag = tags.setdefault((int(trace.comm[i]), seq), -2 - len(tags))  # below -1: never a wildcard match
            expanded[i] = (steps, members, tag)
            count[i] = max(len(steps[0]), 1)
        ptr = np.zeros(len(trace) + 1, dtype=np.int64)
        np.cumsum(count, out=ptr[1:])
        n_ops = int(ptr[-1])
        self._check_memory(trace, n_ops, sum(len(x[0][1]) for x in expanded.values()))
        single = np.flatnonzero(count == 1)
        at = ptr[single]
        kind_of = np.full(len(OPS) + 1, core.K_NOP, dtype=np.int64)   # index -1 (unknown op) is the last
        for name, k in (("send", core.K_SEND), ("isend", core.K_ISEND), ("recv", core.K_RECV),
                        ("irecv", core.K_IRECV), ("sendrecv", core.K_SENDRECV), ("wait", core.K_WAIT),
                        ("waitall", core.K_WAITALL)):
            kind_of[OP_CODE[name]] = k
        kind = np.full(n_ops, core.K_NOP, dtype=np.int64)
        kind[at] = kind_of[op[single]]
        peer = np.full(n_ops, -1, dtype=np.int64)
        peer[at] = trace.peer[single]
        nbytes = np.zeros(n_ops)
        nbytes[at] = trace.bytes[single]
        tag = np.full(n_ops, -1, dtype=np.int64)
        tag[at] = trace.tag[single]
        reqkind = np.full(n_ops, -1, dtype=np.int64)
        reqkind[at] = trace.req[single]
        mgap = np.zeros(n_ops)
        mgap[ptr[:-1][count > 0]] = gap[count > 0]
        # collective steps: entries (peer, bytes, is_send), receives first
        e_count = np.zeros(n_ops, dtype=np.int64)
        e_peer, e_bytes, e_send = [], [], []
        for i, ((s_count, s_peer, s_bytes, s_send), members, ctag) in expanded.items():
            o, m = int(ptr[i]), len(s_count)
            kind[o:o + m], tag[o:o + m], e_count[o:o + m] = core.K_STEP, ctag, s_count
            e_peer.append(np.asarray(members, dtype=np.int64)[s_peer])
            e_bytes.append(s_bytes)
            e_send.append(s_send)
        del expanded
        for i, (gi, ctag, nb) in gen_at.items():
            kind[ptr[i]], peer[ptr[i]], tag[ptr[i]], nbytes[ptr[i]] = core.K_GEN, gi, ctag, nb
        # in micro-op order (calls ascending)
        e_peer = np.concatenate(e_peer) if e_peer else np.zeros(0, dtype=np.int64)
        e_bytes = np.concatenate(e_bytes) if e_bytes else np.zeros(0)
        e_send = np.concatenate(e_send) if e_send else np.zeros(0, dtype=np.int64)
        e_ptr = np.zeros(n_ops + 1, dtype=np.int64)
        np.cumsum(e_count, out=e_ptr[1:])
        # send sites and their route classes
        rank_end = ptr[bounds[1:]]   # micro-op i belongs to rank searchsorted(rank_end, i, "right")
        p2p_send = np.isin(kind, [core.K_SEND, core.K_ISEND, core.K_SENDRECV])
        p2p_recv = np.isin(kind, [core.K_RECV, core.K_IRECV, core.K_SENDRECV])
        bad = np.flatnonzero((p2p_send & ((peer < 0) | (peer >= n))) | (p2p_recv & (peer >= n)))
        if bad.size:
            i = int(np.searchsorted(ptr, bad[0], side="right")) - 1
            raise TopoplanError(f"{trace.source}: rank {int(trace.rank[i])} call "
                                f"{i - int(bounds[trace.rank[i]]) + int(self.calls_before[trace.rank[i]])} "
                                f"({OPS[op[i]]}): field 'peer': {int(trace.peer[i])} is not a rank of 0..{n - 1}")
        e_owner = np.repeat(np.arange(n_ops), e_count)
        s_src = node[np.searchsorted(rank_end, np.concatenate([np.flatnonzero(p2p_send), e_owner[e_send == 1]]),
                                     side="right")]
        s_dst = np.concatenate([node[peer[p2p_send]], node[e_peer[e_send == 1]]])
        s_bytes = np.concatenate([nbytes[p2p_send], e_bytes[e_send == 1]])
        inv = self._classes(s_src, s_dst, s_bytes)
        cls = np.full(n_ops, -1, dtype=np.int64)
        cls[p2p_send] = inv[: int(p2p_send.sum())]
        e_cls = np.full(len(e_peer), -1, dtype=np.int64)
        e_cls[e_send == 1] = inv[int(p2p_send.sum()):]
        n_msgs = int(p2p_send.sum() + (e_send == 1).sum())
        n_reqs = int(p2p_send.sum() + p2p_recv.sum() + len(e_send))
        if gen_rows:
            n_msgs += int(sum(g[1] - 1 for g in gen_rows))
            n_reqs += int(sum(2 * (g[1] - 1) for g in gen_rows))
            self.gen_rows.extend(gen_rows)
        # each rank's computation: its calls' gaps, added in call order (as the reference adds them), after
        # those of the earlier pieces
        compute_s = np.bincount(np.concatenate([np.arange(n), trace.rank[count > 0]]),
                                weights=np.concatenate([self.compute_s, gap[count > 0]]), minlength=n)
        self.compute_s = compute_s
        if self.pieces:   # what check_sends_matched checks, over every piece
            sent, received = _sends_and_receives(trace)
            self.sent += sent
            self.received += received
        calls_before = self.calls_before.copy()
        self.calls_before += np.diff(bounds)
        return {"prog": (ptr[bounds[:-1]], ptr[bounds[1:]], kind, peer, nbytes, tag, reqkind, mgap, cls, e_ptr,
                         e_peer, e_bytes, e_send, e_cls, n_msgs, n_reqs),
                "ptr": ptr, "bounds": bounds, "compute_s": compute_s, "calls_before": calls_before}

    def _check_memory(self, trace: Trace, n_ops: int, n_entries: int) -> None:
        """Refuse, before the program's arrays are made, a program the memory available cannot hold."""
        need = n_ops * PROGRAM_OP_BYTES + n_entries * PROGRAM_ENTRY_BYTES + len(trace) * PROGRAM_ROW_BYTES
        have = memory.memory_left()
        if have is not None and need > have:
            how = ("replay it with fewer iterations" if self.pieces else
                   f"a generated trace replays in pieces of {limits.PIECE_ROWS:,} rows (topoplan simulate does so above "
                   "that, except with --phases); a trace file needs fewer iterations or more memory")
            raise TopoplanError(f"{trace.source or 'trace'}: replaying its {len(trace):,} calls ({n_ops:,} "
                                f"micro-ops) needs about {need / 2**30:.1f} GiB for the compiled program, more than "
                                f"the {have / 2**30:.1f} GiB of memory available; {how}")

    def _classes(self, s_src, s_dst, s_bytes) -> np.ndarray:
        """The route class of every send site (keys new to this compiler get classes after the earlier ones)."""
        sizes, size_id = unique_inverse(s_bytes)   # few distinct sizes: one integer key per site
        ukey, inv = unique_inverse((s_src * self.n_nodes + s_dst) * len(sizes) + size_id)
        pair, u_size = np.divmod(ukey, max(len(sizes), 1))
        src, dst = pair // self.n_nodes, pair % self.n_nodes
        size = sizes[u_size] if len(sizes) else np.zeros(0)
        if not self.pieces:
            self._add_classes(src, dst, size)
            return inv
        known = self.classes
        ids = np.fromiter((known.get(k, -1) for k in zip(src.tolist(), dst.tolist(), size.tolist())),
                          dtype=np.int64, count=len(ukey))
        new = np.flatnonzero(ids < 0)
        if new.size:
            ids[new] = self.n_classes + np.arange(new.size)
            known.update(zip(zip(src[new].tolist(), dst[new].tolist(), size[new].tolist()), ids[new].tolist()))
            self._add_classes(src[new], dst[new], size[new])
        return ids[inv]

    def _add_classes(self, src, dst, size) -> None:
        net = self.net
        cls_ptr, _, _, rptr, rlinks = net.message_segments(src.astype(np.int64), dst.astype(np.int64), size)
        seg_bytes = np.repeat(size, np.diff(cls_ptr))
        seg_len = np.diff(rptr)
        owner = np.repeat(np.arange(len(seg_len)), seg_len)
        seg_lat = np.bincount(owner, weights=net.latency_s[rlinks], minlength=len(seg_len)).astype(np.float64)
        seg_extra = net.route_latency(rptr, rlinks, seg_bytes) - seg_lat
        seg_cap = np.full(len(seg_len), np.inf)
        np.minimum.at(seg_cap, owner, np.where(net.shared, np.inf, net.bw_Bps)[rlinks])
        slowest = np.full(len(seg_len), np.inf)
        np.minimum.at(slowest, owner, net.bw_Bps[rlinks])
        width = max(int(seg_len.max(initial=0)), 1)
        seg_rows = np.full((len(seg_len), width), -1, dtype=np.int64)
        seg_rows[owner, np.arange(len(rlinks)) - rptr[owner]] = rlinks
        self.route_chunks.append((cls_ptr.astype(np.int64)[:-1] + self.n_segs, seg_rows, seg_len.astype(np.int64),
                                  seg_extra, seg_lat, seg_cap, ~np.isfinite(slowest)))
        self.n_classes += len(src)
        self.n_segs += len(seg_len)
        self._route = None

    def route(self) -> tuple:
        """``run_core``'s ``route``: every class so far (the pieces' chunks joined once per call; none yet when
        the first piece sends nothing)."""
        if self._route is None:
            ch = self.route_chunks
            if len(ch) == 1:
                c = ch[0]
                self._route = (np.append(c[0], self.n_segs),) + c[1:]
            else:
                width = max([c[1].shape[1] for c in ch] + [1])
                rows = np.full((self.n_segs, width), -1, dtype=np.int64)
                at = 0
                for c in ch:
                    rows[at:at + len(c[2]), :c[1].shape[1]] = c[1]
                    at += len(c[2])
                cat = [np.concatenate([c[k] for c in ch]) if ch else np.zeros(0) for k in (0, 2, 3, 4, 5, 6)]
                self._route = (np.append(cat[0].astype(np.int64), self.n_segs), rows, cat[1].astype(np.int64),
                               cat[2].astype(np.float64), cat[3].astype(np.float64), cat[4].astype(np.float64),
                               cat[5].astype(bool))
                self.route_chunks = [(self._route[0][:-1],) + self._route[1:]]
        return self._route

    def stream(self) -> tuple:
        """``run_core``'s ``stream``: the streamed collectives so far, or none. With pieces, the fat-pipe
        caps are every non-shared link's (a later piece's classes may need any)."""
        from topoplan.sim import _engine as core

        net = self.net
        if self.pieces:
            fat = net.bw_Bps[~net.shared]
            xcaps = np.unique(fat[np.isfinite(fat)]).astype(np.float64)
        if not self.gen_rows and (not self.pieces or self.parts is None):
            out = core.no_stream()
            return out[:-1] + (xcaps,) if self.pieces else out
        gen = np.asarray(self.gen_rows, dtype=np.int64).reshape(-1, 5)
        parts = tuple(np.ascontiguousarray(a, dtype=np.int64) for a in self.parts)
        if not self.pieces:
            plinks = np.concatenate([parts[1], parts[2], parts[3], parts[5]])
            fat = plinks[~net.shared[plinks]]
            xcaps = np.unique(net.bw_Bps[fat][np.isfinite(net.bw_Bps[fat])]).astype(np.float64)
        return (gen, np.concatenate(self.mem) if self.mem else np.zeros(0, np.int64), self.node, parts,
                np.ascontiguousarray(net.latency_s, dtype=np.float64), np.ascontiguousarray(net.bw_Bps, dtype=np.float64),
                np.ascontiguousarray(net._switches_in, dtype=np.float64), np.ascontiguousarray(net.shared, dtype=bool),
                np.array([net.switch_delay_s, net.mtu_B, net.sim_model.relay_chunk_B], dtype=np.float64), xcaps)


def compile_program(trace: Trace, net, placement, *, eager_threshold_B: float = 65536.0, compute_scale: float = 1.0,
                    thresholds=None, stream: bool = True) -> dict:
    """The trace as flat arrays for :func:`topoplan.sim._compiled.run_core` (micro-ops, route classes).

    Every call becomes one micro-op, except a collective (one ``STEP`` per
    step of its MPICH schedule: receives, then sends, then wait for all;
    ``NOP`` when it has none) and the extra rows of an alltoall written per
    destination (none). The computation gap of a call stays on its first
    micro-op. Every send site gets a route class: its (source node,
    destination node, size), whose segments (:meth:`Network.message_segments`)
    carry the size-dependent part of their latency as the reference adds it.

    With ``stream`` (the default) an alltoall that :meth:`_Collectives.streamed`
    accepts is one ``GEN`` micro-op instead, when the network's routes factor
    (:meth:`Network.route_parts`): the loop generates its steps, routes and
    timing per message as it runs (same results, memory per rank instead of
    per message). ``stream=False`` expands every collective.
    """
    c = _Compiler(net, placement, trace.n_ranks, compute_scale=compute_scale, thresholds=thresholds, stream=stream)
    pg = c.add(trace)
    pg.update(route=c.route(), stream=c.stream(), eager_B=float(eager_threshold_B))
    return pg


def _replay_compiled(trace: Trace, net, placement, *, eager_threshold_B, compute_scale, thresholds,
                     progress, timeline_dt_s=None, marks=None) -> ReplayResult:
    from topoplan.sim._engine import no_state, run_core
    from topoplan.sim.maxmin import REL_TOL, timeline_from_samples, timeline_max_intervals

    n = trace.n_ranks
    if marks is not None:
        marks = _check_marks(marks, trace)
    pg = compile_program(trace, net, placement, eager_threshold_B=eager_threshold_B, compute_scale=compute_scale,
                         thresholds=thresholds)
    if marks is None:
        order, mark_op, mark_ptr = None, np.zeros(0, np.int64), np.zeros(n + 1, np.int64)
    else:   # a marked call is reached when its rank comes to the call's first micro-op
        order, mark_ptr = _marks_by_rank(marks, pg["bounds"])
        mark_op = pg["ptr"][marks[order]].astype(np.int64)
        mark_ptr = mark_ptr.astype(np.int64)
    lcap = np.where(net.shared, net.bw_Bps, np.inf)
    dt = float(timeline_dt_s or 0.0)
    finish, pc, blocked, n_msgs, n_events, n_flows, link_bytes, _, samples, n_bounds, end_s, mark_t, _, _ = run_core(
        pg["prog"], pg["route"], lcap, pg["eager_B"], REL_TOL, np.zeros(0, np.int64), np.zeros(0), np.zeros(0),
        pg["stream"], dt, timeline_max_intervals(len(lcap)), mark_op, mark_ptr, np.zeros(0, np.int64), no_state())
    # (before the deadlock check: a run stopped for its timeline has unfinished ranks)
    timeline = timeline_from_samples(samples, n_bounds, dt, float(end_s), net.bw_Bps) if dt else None
    unfinished = np.flatnonzero(np.isnan(finish))
    if unfinished.size:
        win = _Window.of_piece(pg, trace)
        raise TopoplanError(_blocked_message([win.blocked_at(r, int(pc[r]), bool(blocked[r]))
                                              for r in unfinished[:4].tolist()], len(unfinished)))
    compute = pg["compute_s"]
    if progress:
        progress(n, n)
    mark_s = None
    if marks is not None:
        mark_s = np.empty(len(marks))
        mark_s[order] = mark_t
    return ReplayResult(makespan_s=float(finish.max(initial=0.0)), rank_finish_s=finish,
                        comm_time_s=np.maximum(finish - compute, 0.0), link_bytes=link_bytes,
                        n_messages=int(n_msgs), n_flows=int(n_flows), n_events=int(n_events), timeline=timeline,
                        unknown_ops=dict(trace.unknown_ops), mark_s=mark_s)


def _ranges(starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """``starts[k]..starts[k] + lens[k] - 1`` for every k, concatenated."""
    lens = np.asarray(lens, dtype=np.int64)
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offs = np.cumsum(lens) - lens
    return np.repeat(np.asarray(starts, dtype=np.int64) - offs, lens) + np.arange(total, dtype=np.int64)


class _Window:
    """The micro-ops a piece-wise replay holds: per rank, those it has not run yet of the pieces loaded, with
    each one's call (rank-local number, op code and peer of the trace row) for error messages."""

    OPS = (2, 3, 4, 5, 6, 7, 8)        # per micro-op arrays of the program: kind, peer, nbytes, tag, reqkind, gap, cls
    ENTRIES = (10, 11, 12, 13)         # per entry: e_peer, e_bytes, e_send, e_cls

    def __init__(self, prog, call, call_op, call_peer):
        self.prog, self.call, self.call_op, self.call_peer = prog, call, call_op, call_peer

    @classmethod
    def of_piece(cls, pg: dict, trace: Trace) -> "_Window":
        ptr, bounds = pg["ptr"], pg["bounds"]
        row = np.searchsorted(ptr, np.arange(int(ptr[-1])), side="right") - 1     # the call of every micro-op
        rank = trace.rank[row]
        call = row - bounds[rank] + pg["calls_before"][rank]
        return cls(pg["prog"], call, trace.op[row], trace.peer[row])

    def extend(self, nxt: "_Window", R) -> "_Window":
        """This window's micro-ops not yet run, then ``nxt``'s, per rank; moves the program counters in ``R``
        (a streamed collective in progress keeps its ``GEN``; a computation gap already slept stays slept)."""
        from topoplan.sim._engine import R_GAPDONE, R_PC, R_STEP

        a, b = self.prog, nxt.prog
        pc = R[R_PC]
        keep = np.minimum(pc - (R[R_STEP] > 0), a[1])
        a_len, b_len = a[1] - keep, b[1] - b[0]
        n_a = len(a[2])
        new_len = a_len + b_len
        lo = np.zeros(len(pc), dtype=np.int64)
        np.cumsum(new_len[:-1], out=lo[1:])
        idx = _ranges(np.stack([keep, b[0] + n_a], axis=1).ravel(), np.stack([a_len, b_len], axis=1).ravel())
        prog = list(a)
        prog[0], prog[1] = lo, lo + new_len
        for k in self.OPS:
            prog[k] = np.concatenate([a[k], b[k]])[idx]
        e_cnt = np.concatenate([np.diff(a[9]), np.diff(b[9])])[idx]
        e_from = np.concatenate([a[9][:-1], b[9][:-1] + len(a[10])])[idx]
        e_idx = _ranges(e_from, e_cnt)
        for k in self.ENTRIES:
            prog[k] = np.concatenate([a[k], b[k]])[e_idx]
        prog[9] = np.zeros(len(idx) + 1, dtype=np.int64)
        np.cumsum(e_cnt, out=prog[9][1:])
        gd = R[R_GAPDONE]
        R[R_GAPDONE] = np.where(gd >= keep, gd - keep + lo, -1)
        R[R_PC] = lo + (pc - keep)
        return _Window(tuple(prog), np.concatenate([self.call, nxt.call])[idx],
                       np.concatenate([self.call_op, nxt.call_op])[idx],
                       np.concatenate([self.call_peer, nxt.call_peer])[idx])

    def blocked_at(self, r: int, pc: int, blocked: bool) -> str:
        """Where rank ``r`` (at micro-op ``pc``) stopped, as the deadlock message names it."""
        lo, hi = self.prog[0], self.prog[1]
        i = pc - 1 if blocked else pc
        if lo[r] <= i < hi[r]:
            op = OPS[self.call_op[i]] if self.call_op[i] >= 0 else "unknown"
            return f"rank {r} in call {int(self.call[i])} ({op} peer {int(self.call_peer[i])})"
        return f"rank {r} in call -1 (unknown peer -1)"


def _replay_pieces(source, net, placement, *, eager_threshold_B, compute_scale, thresholds, progress,
                   timeline_dt_s=None, max_rows=None) -> ReplayResult:
    """:func:`replay` of a trace generated piece by piece (:meth:`Recording.pieces`): the compiled loop runs a
    window of micro-ops and stops when a rank needs the next piece, which is compiled and added while the
    run waits (nothing of the run's time passes), so the results are those of the whole trace."""
    from topoplan.sim._engine import STATE_INDEX, no_state, run_core
    from topoplan.sim.maxmin import REL_TOL, timeline_from_samples, timeline_max_intervals

    n = source.n_ranks
    left = np.asarray(source.rows_per_rank(), dtype=np.int64).copy()
    comp = _Compiler(net, placement, n, compute_scale=compute_scale, thresholds=thresholds, pieces=True)
    pieces = iter(source.pieces(max_rows))

    def load() -> _Window:
        tr = next(pieces, None)
        if tr is None or tr.n_ranks != n:
            raise TopoplanError(f"{source.source}: its pieces do not hold the rows the recording counts per rank")
        np.subtract(left, np.bincount(tr.rank, minlength=n), out=left)
        return _Window.of_piece(comp.add(tr), tr)

    win = load()
    lcap = np.where(net.shared, net.bw_Bps, np.inf)
    dt = float(timeline_dt_s or 0.0)
    z_i, z_f = np.zeros(0, np.int64), np.zeros(0)
    state = no_state()
    n_pieces = 1
    while True:
        out = run_core(win.prog, comp.route(), lcap, float(eager_threshold_B), REL_TOL, z_i, z_f, z_f, comp.stream(),
                       dt, timeline_max_intervals(len(lcap)), z_i, np.zeros(n + 1, np.int64),
                       (left > 0).astype(np.int64), state)
        state = out[13]
        if out[12] != 2:
            break
        win = win.extend(load(), state[STATE_INDEX["R"]])
        n_pieces += 1
        if progress:
            progress(int(source.rows - left.sum()), int(source.rows))
    finish, pc, blocked, n_msgs, n_events, n_flows, link_bytes, _, samples, n_bounds, end_s, _, _, _ = out
    if left.any() or next(pieces, None) is not None:
        raise TopoplanError(f"{source.source}: its pieces do not hold the rows the recording counts per rank")
    timeline = timeline_from_samples(samples, n_bounds, dt, float(end_s), net.bw_Bps) if dt else None
    unfinished = np.flatnonzero(np.isnan(finish))
    if unfinished.size:
        raise TopoplanError(_blocked_message([win.blocked_at(r, int(pc[r]), bool(blocked[r]))
                                              for r in unfinished[:4].tolist()], len(unfinished)))
    _check_matched(source.source, comp.sent, comp.received)
    if progress:
        progress(n, n)
    return ReplayResult(makespan_s=float(finish.max(initial=0.0)), rank_finish_s=finish,
                        comm_time_s=np.maximum(finish - comp.compute_s, 0.0), link_bytes=link_bytes,
                        n_messages=int(n_msgs), n_flows=int(n_flows), n_events=int(n_events), timeline=timeline,
                        n_pieces=n_pieces)


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
    _check_matched(trace.source, *_sends_and_receives(trace))


def _sends_and_receives(trace: Trace):
    """Per rank: the messages it is sent and the receives it posts (a sendrecv receives once)."""
    op, peer = trace.op, trace.peer
    is_send = np.isin(op, (_SEND, _ISEND, _SENDRECV)) & (peer >= 0)
    is_recv = np.isin(op, (_RECV, _IRECV, _SENDRECV))
    return (np.bincount(peer[is_send], minlength=trace.n_ranks),
            np.bincount(trace.rank[is_recv], minlength=trace.n_ranks))


def _check_matched(source, sent, received) -> None:
    over = np.flatnonzero(sent > received)
    if over.size:
        d = int(over[0])
        raise TopoplanError(f"{source or 'trace'}: unmatched send: rank {d} is sent {int(sent[d])} messages "
                            f"but posts {int(received[d])} receives")


def _blocked_message(parts: list, n_blocked: int) -> str:
    """The deadlock error: the first blocked ranks (``parts``, each 'rank r in call c (...)') and the count."""
    more = f" and {n_blocked - 4} more" if n_blocked > 4 else ""
    return f"deadlock or unmatched receive: {n_blocked} rank(s) blocked: " + "; ".join(parts) + more


def check_options(*, compute_scale: float = 1.0, eager_threshold_B: float = 65536.0,
                  timeline_dt_s: float | None = None) -> None:
    """Raise :class:`TopoplanError` for a replay option no run can use (negative, NaN or infinite).

    Parameters
    ----------
    compute_scale, eager_threshold_B, timeline_dt_s : float
        As for :func:`replay`.

    Raises
    ------
    TopoplanError

    Examples
    --------
    >>> check_options(compute_scale=0.5)
    >>> check_options(compute_scale=-1)
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: field 'compute_scale': must be a finite non-negative factor, got -1
    """
    if not 0 <= compute_scale < float("inf"):
        raise TopoplanError(f"field 'compute_scale': must be a finite non-negative factor, got {compute_scale}")
    if not 0 <= eager_threshold_B < float("inf"):
        raise TopoplanError(f"field 'eager_threshold': must be a finite non-negative size, got {eager_threshold_B}")
    if timeline_dt_s is not None and not 0 < timeline_dt_s < float("inf"):
        raise TopoplanError(f"field 'timeline_dt': must be a positive time, got {timeline_dt_s}")


def replay(trace: Trace, net, placement, *, eager_threshold_B: float = 65536.0, compute_scale: float = 1.0,
           thresholds=None, timeline_dt_s: float | None = None, progress=None, method: str = "auto",
           marks=None, piece_rows: int | None = None) -> ReplayResult:
    """Replay ``trace`` on network ``net`` with ranks placed by ``placement``.

    Parameters
    ----------
    trace : Trace or Recording
        Real or generated. A generator's :class:`~topoplan.traffic.generators.Recording`
        (:func:`~topoplan.traffic.generators.record_spec`) is replayed piece by piece: its trace is
        generated and compiled a piece at a time as the ranks reach it, so memory holds a piece and
        what the ranks have not run yet, not the whole trace (same results; the compiled method only;
        the Python reference and ``marks`` build the whole trace).
    net : Network
        From :func:`topoplan.sim.network.build_network`.
    placement : Placement
    eager_threshold_B : float, optional
        Messages smaller than this are sent eagerly.
    compute_scale : float, optional
        Multiplies the computation gaps (0 replays communication only; 0.5 = a CPU twice as fast).
    thresholds : MPICHThresholds, optional
        Collective algorithm thresholds (default MPICH's).
    timeline_dt_s : float, optional
        Sample link utilization every ``timeline_dt_s`` seconds.
    progress : callable, optional
    method : {"auto", "compiled", "python"}, optional
        ``"compiled"`` (Numba), ``"python"`` (the reference :class:`Replayer`) or ``"auto"``: compiled
        unless the network's model is ``paper`` (its engine, :mod:`topoplan.sim.paper`, runs under the reference)
        or Numba is missing. Both record the utilization timeline and marks.
    marks : array of int, optional
        Rows of ``trace`` whose simulated time is wanted: when the rank reached the call (``mark_s`` of
        the result, in the same order). Phases on a timeline are their first calls' marks.
    piece_rows : int, optional
        Rows per piece of a Recording (default :data:`~topoplan.traffic.limits.PIECE_ROWS`).

    Returns
    -------
    ReplayResult

    Examples
    --------
    >>> from topoplan.traffic.generators import parse_spec
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.core.placement import sequential
    >>> from topoplan.sim.network import build_network
    >>> t = load_topology("paper003", ["kind=tree", "ocs=null"])
    >>> res = replay(parse_spec("ring:np=8,bytes=1MB"), build_network(t), sequential(8, t))
    >>> res.makespan_s > 0
    True
    """
    if method not in ("auto", "compiled", "python"):
        raise TopoplanError(f"replay: method must be 'auto', 'compiled' or 'python', got {method!r}")
    check_options(compute_scale=compute_scale, eager_threshold_B=eager_threshold_B, timeline_dt_s=timeline_dt_s)
    from topoplan.sim.maxmin import _numba_available

    paper = net.sim_model.engine == "paper"
    if not isinstance(trace, Trace):   # a generator's recording
        if method == "python" or paper or marks is not None or not _numba_available():
            trace = trace.build()
        else:
            return _replay_pieces(trace, net, placement, eager_threshold_B=eager_threshold_B,
                                  compute_scale=compute_scale, thresholds=thresholds, progress=progress,
                                  timeline_dt_s=timeline_dt_s, max_rows=piece_rows)
    check_sends_matched(trace)
    if method == "compiled" and paper:
        raise TopoplanError("replay: the compiled method runs the maxmin model only; use method='python' or 'auto'")
    if method == "compiled" or (method == "auto" and not paper and _numba_available()):
        return _replay_compiled(trace, net, placement, eager_threshold_B=eager_threshold_B,
                                compute_scale=compute_scale, thresholds=thresholds, progress=progress,
                                timeline_dt_s=timeline_dt_s, marks=marks)
    from topoplan.traffic.collectives import check_peer_step_messages

    check_peer_step_messages(trace)   # the reference keeps every rank's expanded schedule
    return Replayer(trace, net, placement, eager_threshold_B=eager_threshold_B, compute_scale=compute_scale,
                    thresholds=thresholds, timeline_dt_s=timeline_dt_s, progress=progress, marks=marks).run()


def bulk_trace(traffic, iters: int = 1) -> Trace:
    """A communication matrix as one bulk-synchronous phase repeated ``iters`` times.

    In each phase every rank posts one receive and one send per communicating
    pair, carrying that pair's bytes divided by ``iters``, and waits for all of
    them. A matrix has no order or timing, so a pair's messages are merged per
    phase; replay a trace for message-exact behaviour (sizes decide eager vs
    rendezvous and EPS vs circuits).

    Parameters
    ----------
    traffic : Traffic
    iters : int, optional

    Returns
    -------
    Trace

    Raises
    ------
    TopoplanError
        For ``iters`` below 1 or a trace too large.

    Examples
    --------
    >>> from topoplan.traffic.matrix import from_arrays
    >>> tr = bulk_trace(from_arrays(4, [0, 1], [1, 0], [1e6, 2e6]), iters=2)
    >>> tr.op_counts(), tr.bytes[tr.op == OP_CODE["isend"]].tolist()
    ({'isend': 4, 'irecv': 4, 'waitall': 8}, [500000.0, 500000.0, 1000000.0, 1000000.0])
    """
    if int(iters) < 1:
        raise TopoplanError(f"field 'iters': the matrix must be replayed in at least 1 phase, got {iters}")
    recs = []
    s, d, b, _ = traffic.matrix()
    iters = int(iters)
    keep = s != d
    rows = float(iters) * (2 * int(keep.sum()) + traffic.n_ranks)
    if rows > limits.MAX_TRACE_ROWS:
        raise TopoplanError(f"field 'iters': {iters} phases of this matrix would be {rows:.3g} trace rows, over the "
                            f"limit of {limits.MAX_TRACE_ROWS:,}")
    by_rank = defaultdict(list)
    for a, c, x in zip(s[keep].tolist(), d[keep].tolist(), (b[keep] / iters).tolist()):
        by_rank[a].append(("isend", c, x))
        by_rank[c].append(("irecv", a, x))
    n = traffic.n_ranks
    for _ in range(iters):
        for r in range(n):
            for op, peer, x in by_rank.get(r, ()):
                recs.append((r, op, peer, x, -1, n, 0.0, 0.0, -1, 0))
            recs.append((r, "waitall", -1, 0, -1, n, 0.0, 0.0, -1, -1))
    return Trace.from_records(recs, n, source=f"bulk({traffic.name})")
