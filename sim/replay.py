"""Replay an MPI event trace on a compiled network.

Each rank runs its calls in order. Computation between calls is the gap in
the trace (``t_start`` of a call minus ``t_end`` of the previous one),
scaled by ``compute_scale``. Point-to-point calls follow MPI matching
(source, tag, order; ``-1`` is any source): messages below
``eager_threshold_B`` are sent eagerly (the send completes at once, the
data flows immediately), larger ones use rendezvous (the transfer starts
when both sides have posted and the send completes with the transfer).
Collectives are expanded into steps of point-to-point messages with the
MPICH algorithms of :mod:`planner.collectives`. Every message becomes one
flow per segment of its route (see :mod:`sim.network`) in the max-min
engine of :mod:`sim.maxmin`.

A deadlock (ranks blocked with nothing in flight) raises
:class:`TopoplanError` naming the blocked ranks and their calls.
"""

from __future__ import annotations

import heapq
from collections import defaultdict, deque
from dataclasses import dataclass, field

import numpy as np

from planner.errors import TopoplanError
from planner.trace import OP_CODE, OPS, Trace

_SEND, _ISEND, _RECV, _IRECV, _SENDRECV = (OP_CODE[o] for o in ("send", "isend", "recv", "irecv", "sendrecv"))
_WAIT, _WAITALL = OP_CODE["wait"], OP_CODE["waitall"]
_COLL = {OP_CODE[o] for o in ("bcast", "reduce", "allreduce", "alltoall", "alltoallv", "allgather", "allgatherv",
                              "gather", "scatter", "reduce_scatter", "barrier")}
_A2A = {OP_CODE["alltoall"], OP_CODE["alltoallv"]}


@dataclass
class ReplayResult:
    """Outcome of a replay (times in seconds, bytes per directed link)."""

    makespan_s: float
    rank_finish_s: np.ndarray
    comm_time_s: np.ndarray
    link_bytes: np.ndarray
    n_messages: int
    n_flows: int
    n_events: int
    timeline: dict | None = None
    unknown_ops: dict = field(default_factory=dict)


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
                 thresholds=None, timeline_dt_s=None, progress=None):
        from sim.maxmin import FlowEngine

        self.trace, self.net = trace, net
        self.node = np.asarray(placement.rank_to_node, dtype=np.int64)
        self.eager_B = float(eager_threshold_B)
        self.thresholds = thresholds
        self.progress = progress
        self.engine = FlowEngine(net.linkset(), timeline_dt_s=timeline_dt_s) if timeline_dt_s \
            else FlowEngine(net.linkset())
        n = trace.n_ranks
        self.n = n
        # per-rank call lists as plain Python lists: scalar access in the hot loop
        bounds = np.searchsorted(trace.rank, np.arange(n + 1))
        self.lo, self.hi = bounds[:-1].tolist(), bounds[1:].tolist()
        self.op = trace.op.tolist(); self.peer = trace.peer.tolist(); self.nb = trace.bytes.tolist()
        self.root = trace.root.tolist(); self.comm = trace.comm.tolist(); self.tag = trace.tag.tolist()
        self.req_kind = trace.req.tolist(); self.csize = trace.comm_size.tolist()
        gap = np.zeros(len(trace))
        if len(trace):
            gap[1:] = trace.t_start[1:] - trace.t_end[:-1]
            first = bounds[:-1][bounds[:-1] < bounds[1:]]
            gap[first] = trace.t_start[first] - trace.t_start.min()
        self.gap = (np.maximum(gap, 0.0) * compute_scale).tolist()
        self.compute_total = np.zeros(n)
        self.pc = list(self.lo)
        self.gap_waited = [-1] * n           # call index whose computation gap has elapsed
        self.seq = 0
        self.local_index: dict = {}           # comm id -> {world rank: local rank}
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
        self._sched_cache: dict = {}

    # -- scheduling helpers ----------------------------------------------
    def _schedule(self, op, size, me, root, nbytes, counts):
        from planner.collectives import MPICHThresholds, schedule

        key = (op, size, me, root, nbytes, counts)
        got = self._sched_cache.get(key)
        if got is None:
            kw = {"thresholds": self.thresholds or MPICHThresholds()}
            if counts is not None:
                kw["counts"] = list(counts)
            got = schedule(OPS[op], size, me, root, nbytes, **kw)
            self._sched_cache[key] = got
        return got

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
                            unknown_ops=dict(self.trace.unknown_ops))

    def _deadlock_message(self, ranks) -> str:
        parts = []
        for r in ranks[:4]:
            i = self.pc[r] - 1 if self.blocked[r] is not None else self.pc[r]
            if self.lo[r] <= i < self.hi[r]:
                op = OPS[self.op[i]] if self.op[i] >= 0 else "unknown"
                parts.append(f"rank {r} in call {i - self.lo[r]} ({op} peer {self.peer[i]})")
            else:
                parts.append(f"rank {r} in a collective step")
        more = f" and {len(ranks) - 4} more" if len(ranks) > 4 else ""
        return f"deadlock or unmatched receive: {len(ranks)} rank(s) blocked: " + "; ".join(parts) + more

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
        op = self.op[i]
        comm = self.comm[i]
        members = self.trace.members(comm)
        counts = None
        if op in _A2A and self.peer[i] >= 0:
            # one row per destination: gather the rows of this call (same t_start) into counts
            j, start = i, self.trace.t_start[i]
            while j + 1 < self.hi[r] and self.op[j + 1] == op and self.trace.t_start[j + 1] == start:
                j += 1
            self.pc[r] = j + 1
            local = {int(w): k for k, w in enumerate(members)}
            c = [0.0] * len(members)
            for k in range(i, j + 1):
                c[local[self.peer[k]]] += self.nb[k]
            counts = tuple(c)
            op = OP_CODE["alltoallv"]
        size = len(members)
        local = self.local_index.get(comm)
        if local is None:
            local = self.local_index[comm] = {int(w): k for k, w in enumerate(members)}
        if r not in local:
            raise TopoplanError(f"{self.trace.source}: rank {r} calls {OPS[op]} on communicator {comm} "
                                f"but is not one of its members")
        me = local[r]
        root_local = local.get(self.root[i], 0)
        seq = self.coll_seq[r][comm]
        self.coll_seq[r][comm] = seq + 1
        steps = self._schedule(op, size, me, root_local, float(self.nb[i]), counts)
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
                if best is None or dq[0].t_send < best.t_send:
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
        # size-dependent part of the latency (switch delays, store-and-forward of the first packet);
        # the engine adds the links' own latencies
        extra = self.net.route_latency(ptr, links, sizes) - np.bincount(
            np.repeat(np.arange(len(routes)), lengths), weights=self.net.latency_s[links], minlength=len(routes))
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
        if self.blocked[r] is not None and all(x.done for x in self.blocked[r]):
            heapq.heappush(self.ready, (t, r))


def replay(trace: Trace, net, placement, *, eager_threshold_B: float = 65536.0, compute_scale: float = 1.0,
           thresholds=None, timeline_dt_s: float | None = None, progress=None) -> ReplayResult:
    """Replay ``trace`` on network ``net`` with ranks placed by ``placement``.

    Parameters
    ----------
    trace : :class:`planner.trace.Trace` (real or generated).
    net : :class:`sim.network.Network` from :func:`sim.network.build_network`.
    placement : :class:`planner.placement.Placement`.
    eager_threshold_B : messages smaller than this are sent eagerly.
    compute_scale : multiplies the computation gaps (0 replays communication only; 0.5 = a CPU twice as fast).
    timeline_dt_s : sample link utilization every ``timeline_dt_s`` seconds.

    Returns
    -------
    ReplayResult

    Example
    -------
    >>> from planner.generators import parse_spec
    >>> from planner.topology_io import load_topology
    >>> from planner.placement import sequential
    >>> from sim.network import build_network
    >>> t = load_topology("paper003", ["kind=tree", "ocs=null"])
    >>> res = replay(parse_spec("ring:np=8,bytes=1MB"), build_network(t), sequential(8, t))
    >>> res.makespan_s > 0
    True
    """
    return Replayer(trace, net, placement, eager_threshold_B=eager_threshold_B, compute_scale=compute_scale,
                    thresholds=thresholds, timeline_dt_s=timeline_dt_s, progress=progress).run()


def bulk_trace(traffic, iters: int = 1) -> Trace:
    """A communication matrix as one bulk-synchronous phase repeated ``iters`` times.

    In each phase every rank posts one receive and one send per communicating
    pair, carrying that pair's bytes divided by ``iters``, and waits for all of
    them. A matrix has no order or timing, so a pair's messages are merged per
    phase; replay a trace for message-exact behaviour (sizes decide eager vs
    rendezvous and EPS vs circuits).
    """
    recs = []
    s, d, b, _ = traffic.matrix()
    iters = max(int(iters), 1)
    keep = s != d
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
