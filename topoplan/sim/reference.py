"""The reference replay: a readable Python state machine that runs an MPI trace on any flow engine.

Each rank runs its calls in order. Computation between calls is the gap in
the trace (``t_start`` of a call minus ``t_end`` of the previous one),
scaled by ``compute_scale``. Point-to-point calls follow MPI matching
(source, tag, order; ``-1`` is any source): messages below
``eager_threshold_B`` are sent eagerly (the send completes at once, the
data flows immediately), larger ones use rendezvous (the transfer starts
when both sides have posted and the send completes with the transfer).
Collectives are expanded into steps of point-to-point messages with the
MPICH algorithms of :mod:`topoplan.traffic.collectives`. Every message becomes one
flow per segment of its route (see :mod:`topoplan.sim.network`) in the engine of the
network's model, driven through :class:`topoplan.sim.engines.Engine` alone.

The compiled replay (:mod:`topoplan.sim.compiler`, :mod:`topoplan.sim.pieces`) runs the max-min engine
about 40 times faster; ``tests/test_sim_replay.py`` checks the two agree.
"""

from __future__ import annotations

import heapq
from collections import defaultdict, deque

import numpy as np

from topoplan.core.errors import TopoplanError
from topoplan.sim import fifo, maxmin, paper  # noqa: F401 (the engines register themselves)
from topoplan.sim.engines import engine_class
from topoplan.sim.replay_common import (COLL_CODES, NO_MARK, OP_IRECV, OP_ISEND, OP_RECV, OP_SEND, OP_SENDRECV, OP_WAIT,
                                        OP_WAITALL, Collectives, ReplayResult, blocked_message, check_marks, gaps,
                                        marks_by_rank)
from topoplan.traffic.trace import OPS, Trace

__all__ = ["Replayer"]


class _Req:
    __slots__ = ("rank", "peer", "is_send", "done", "t_done", "seq", "waited")

    def __init__(self, rank, peer, is_send, seq):
        self.rank, self.peer, self.is_send, self.done, self.t_done = rank, peer, is_send, False, 0.0
        self.seq = seq  # posting order: the earliest posted receive matches first
        self.waited = False  # its rank waits on it (a request is waited on at most once)


class _Msg:
    __slots__ = ("src", "dst", "nbytes", "tag", "sreq", "rreq", "eager", "t_send", "arrived", "t_arrive",
                 "started", "seg")

    def __init__(self, src, dst, nbytes, tag, sreq, eager, t_send):
        self.src, self.dst, self.nbytes, self.tag, self.sreq = src, dst, nbytes, tag, sreq
        self.rreq, self.eager, self.t_send = None, eager, t_send
        self.arrived, self.t_arrive, self.started, self.seg = False, 0.0, False, 0


class Replayer:
    """The replay state machine; use :func:`topoplan.sim.replay.replay` rather than this class directly.

    It drives the engine of the network's model (:func:`topoplan.sim.engines.engine_class` of
    ``net.sim_model.engine``) through the :class:`~topoplan.sim.engines.Engine` interface alone.

    Examples
    --------
    >>> from topoplan.traffic.generators import parse_spec
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.core.placement import sequential
    >>> from topoplan.sim.network import build_network
    >>> t = load_topology("paper003", ["kind=tree", "ocs=null"])
    >>> res = Replayer(parse_spec("ring:np=8,bytes=1MB"), build_network(t), sequential(8, t)).run()
    >>> round(res.makespan_s, 6)
    0.000804
    """

    def __init__(self, trace: Trace, net, placement, *, eager_threshold_B=65536.0, compute_scale=1.0,
                 thresholds=None, timeline_dt_s=None, progress=None, marks=None):
        self.trace, self.net = trace, net
        self.node = np.asarray(placement.rank_to_node, dtype=np.int64)
        self.eager_B = float(eager_threshold_B)
        self.thresholds = thresholds
        self.progress = progress
        self.engine = engine_class(net.sim_model.engine).for_network(net, timeline_dt_s=timeline_dt_s)
        n = trace.n_ranks
        self.n = n
        # per-rank call lists as plain Python lists: scalar access in the hot loop
        bounds = np.searchsorted(trace.rank, np.arange(n + 1))
        self.lo, self.hi = bounds[:-1].tolist(), bounds[1:].tolist()
        self.op = trace.op.tolist(); self.peer = trace.peer.tolist(); self.nb = trace.bytes.tolist()
        self.root = trace.root.tolist(); self.comm = trace.comm.tolist(); self.tag = trace.tag.tolist()
        self.req_kind = trace.req.tolist(); self.csize = trace.comm_size.tolist()
        self.gap = gaps(trace, bounds, compute_scale).tolist()
        self.compute_total = np.zeros(n)
        self.pc = list(self.lo)
        self.gap_waited = [-1] * n           # call index whose computation gap has elapsed
        self.seq = 0
        self.colls = Collectives(trace, thresholds)
        self.clock = [0.0] * n
        self.blocked: list[list | None] = [None] * n      # requests a rank waits on (set by _block)
        self.pending = [0] * n                            # how many of them are not done
        self.micro: list[deque] = [deque() for _ in range(n)]  # pending collective steps
        self.open_reqs: list[list] = [[] for _ in range(n)]
        self.coll_seq: list[dict] = [defaultdict(int) for _ in range(n)]
        self.posted = defaultdict(deque)       # (dst, src, tag) -> recv reqs; src -1 / tag -1 are wildcards
        self.wild = [0] * n                    # per rank: its posted receives with a wildcard
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
        self.marks = None if marks is None else check_marks(marks, trace)
        self.mark_s = np.full(0 if marks is None else len(self.marks), np.nan)
        self.mark_next = [NO_MARK] * n
        if self.marks is not None:
            order, starts = marks_by_rank(self.marks, bounds)
            self.mark_order = order.tolist()
            self.mark_ptr, self.mark_end = starts[:-1].tolist(), starts[1:].tolist()
            self.mark_row = self.marks[order].tolist()
            self.mark_next = [self.mark_row[p] if p < e else NO_MARK
                              for p, e in zip(self.mark_ptr, self.mark_end)]

    def _stamp(self, r: int, i: int) -> None:
        """Rank ``r`` reached row ``i``: every marked row of ``r`` up to ``i`` gets the rank's clock."""
        p, e, t = self.mark_ptr[r], self.mark_end[r], self.clock[r]
        while p < e and self.mark_row[p] <= i:
            self.mark_s[self.mark_order[p]] = t
            p += 1
        self.mark_ptr[r] = p
        self.mark_next[r] = self.mark_row[p] if p < e else NO_MARK

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
        tl = eng.timeline()
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
        return blocked_message(parts, len(ranks), self.trace.source)

    # -- rank execution ----------------------------------------------------
    def _run_rank(self, r: int, t: float) -> None:
        """Execute rank r's calls from time t until it blocks, waits for computation, or ends."""
        self.clock[r] = t
        while True:
            if self.blocked[r] is not None:
                if self.pending[r]:
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
        if op == OP_SEND or op == OP_ISEND:
            q = self._send(r, self.peer[i], self.nb[i], self.tag[i], t)
            if op == OP_SEND:
                self._block(r, [q])
            else:
                self.open_reqs[r].append(q)
        elif op == OP_RECV or op == OP_IRECV:
            q = self._recv(r, self.peer[i], self.nb[i], self.tag[i], t)
            if op == OP_RECV:
                self._block(r, [q])
            else:
                self.open_reqs[r].append(q)
        elif op == OP_SENDRECV:
            qs = self._send(r, self.peer[i], self.nb[i], self.tag[i], t)
            qr = self._recv(r, -1, self.nb[i], self.tag[i], t)
            self._block(r, [qs, qr])
        elif op == OP_WAIT:
            peer, kind = self.peer[i], self.req_kind[i]
            reqs = self.open_reqs[r]
            pick = None
            for k, q in enumerate(reqs):
                if (peer < 0 or q.peer == peer) and (kind < 0 or q.is_send == bool(kind)):
                    pick = k
                    break
            if peer < 0 and pick is None:
                self._block(r, reqs)
                self.open_reqs[r] = []
            elif pick is not None:
                self._block(r, [reqs.pop(pick)])
        elif op == OP_WAITALL:
            self._block(r, self.open_reqs[r])
            self.open_reqs[r] = []
        elif op in COLL_CODES:
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
        self._block(r, reqs)

    def _block(self, r: int, reqs: list) -> None:
        """Rank ``r`` waits on ``reqs`` (a list it may keep): it runs on when the last of them is done."""
        self.blocked[r] = reqs
        n = 0
        for q in reqs:
            q.waited = True
            n += not q.done
        self.pending[r] = n

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
            if src < 0 or tag == -1:
                self.wild[r] += 1
        return q

    def _match_posted(self, m: _Msg):
        """The earliest posted receive that matches (exact, any-source and any-tag queues)."""
        if not self.wild[m.dst]:            # no wildcard receive posted: the exact queue alone
            dq = self.posted.get((m.dst, m.src, m.tag))
            return dq.popleft() if dq else None
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
            if best_key[1] < 0 or best_key[2] == -1:
                self.wild[m.dst] -= 1
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
        ids = self.engine.add_messages(self.net, ptr, links, np.array(starts), sizes)
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
        was_done = q.done
        q.done, q.t_done = True, t
        # only a request the rank waits on may wake it, and only the last of them (a second wake-up would skip a
        # computation gap)
        if q.waited and not was_done:
            r = q.rank
            self.pending[r] -= 1
            if not self.pending[r]:
                heapq.heappush(self.ready, (t, r))
