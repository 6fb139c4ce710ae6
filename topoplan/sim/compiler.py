"""The trace compiler: an MPI trace, whole or piece by piece, as the flat program the compiled loop runs.

Every call becomes micro-ops of :mod:`topoplan.sim.program` and every send site a route class (its source
node, destination node and size) with its route segments precomputed; the loop
(:func:`topoplan.sim._loop.run_core`) runs them (:mod:`topoplan.sim.pieces` calls it).
"""

from __future__ import annotations

import numpy as np

from topoplan.core import memory
from topoplan.core.arrays import unique_inverse
from topoplan.core.errors import TopoplanError
from topoplan.sim import program
from topoplan.sim.replay_common import COLL_CODES, Collectives, gaps, sends_and_receives
from topoplan.traffic import limits
from topoplan.traffic.collectives import PEER_STEP_OPS, check_peer_step_messages, peer_messages
from topoplan.traffic.trace import OP_CODE, OPS, Trace

__all__ = ["Compiler", "compile_program", "row_weights"]

# collectives whose MPICH schedules take about log2(p) steps (a send and a receive each)
_LOG_STEP_OPS = tuple(OP_CODE[name] for name in ("bcast", "reduce", "allreduce", "barrier"))


def row_weights(op: np.ndarray, comm_size: np.ndarray) -> np.ndarray:
    """About what each trace row adds to a compiled program, in point-to-point calls (one micro-op each): a
    bcast, reduce, allreduce or barrier over ``p`` ranks ``2 ceil(log2 p)`` (its steps of a micro-op and two
    entries each), any other row 1. A replay in pieces cuts the trace by this weight, so a piece of
    collectives compiles to about the size of a piece of point-to-point calls.

    Parameters
    ----------
    op : array of int
        Op codes of the rows (:data:`topoplan.traffic.trace.OP_CODE`).
    comm_size : array of int
        Their communicators' sizes.

    Returns
    -------
    numpy.ndarray of float64

    Examples
    --------
    >>> row_weights(np.array([OP_CODE["isend"], OP_CODE["allreduce"], OP_CODE["barrier"]]),
    ...             np.array([256, 256, 5])).tolist()
    [1.0, 16.0, 6.0]
    """
    op, size = np.asarray(op), np.asarray(comm_size)
    steps = np.ceil(np.log2(np.maximum(size, 2).astype(np.float64)))
    return np.where(np.isin(op, _LOG_STEP_OPS), np.maximum(2.0 * steps, 1.0), 1.0)


class Compiler:
    """Compiles a trace, whole or piece by piece, into the flat program :func:`topoplan.sim._loop.run_core` runs.

    What must agree across the pieces of one trace is kept here: the route classes (one per
    (source node, destination node, size); a piece adds only those it is first to use, after the
    earlier ones), the collective calls' sequence numbers and tags, the streamed collectives' table
    and communicator members, each rank's previous call (its computation gap) and call count.

    Examples
    --------
    >>> from topoplan.traffic.generators import parse_spec
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.core.placement import sequential
    >>> from topoplan.sim.network import build_network
    >>> t = load_topology("paper003", ["kind=tree", "ocs=null"])
    >>> c = Compiler(build_network(t), sequential(8, t), 8)
    >>> pg = c.add(parse_spec("ring:np=8,bytes=1MB"))
    >>> len(pg["prog"][2]), c.n_classes   # isend, irecv, waitall per rank; node pairs 0-0, 0-1, 1-1, 1-0
    (24, 4)
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
            return gaps(trace, bounds, self.compute_scale)
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
        n, net, node = self.n, self.net, self.node
        bounds = np.searchsorted(trace.rank, np.arange(n + 1))
        gap = self._gaps(trace, bounds)
        op = trace.op
        count = np.ones(len(trace), dtype=np.int64)
        colls = Collectives(trace, self.thresholds, compact=True)
        colls.cache, colls.local = self.coll_cache, self.coll_local
        coll_seq, tags, mem_off, mem = self.coll_seq, self.tags, self.mem_off, self.mem
        expanded = {}
        held = 0
        gen_rows, gen_at = [], {}
        skip_to = -1
        for i in np.flatnonzero(np.isin(op, list(COLL_CODES))).tolist():
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
        kind_of = np.full(len(OPS) + 1, program.K_NOP, dtype=np.int64)   # index -1 (unknown op) is the last
        for name, k in (("send", program.K_SEND), ("isend", program.K_ISEND), ("recv", program.K_RECV),
                        ("irecv", program.K_IRECV), ("sendrecv", program.K_SENDRECV), ("wait", program.K_WAIT),
                        ("waitall", program.K_WAITALL)):
            kind_of[OP_CODE[name]] = k
        kind = np.full(n_ops, program.K_NOP, dtype=np.int64)
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
        called = count > 0
        mgap[ptr[:-1][called]] = gap[called]
        # each rank's computation: its calls' gaps, added in call order (as the reference adds them), after
        # those of the earlier pieces (kept when the piece compiles)
        compute_s = np.bincount(np.concatenate([np.arange(n), trace.rank[called]]),
                                weights=np.concatenate([self.compute_s, gap[called]]), minlength=n)
        del count, single, at, gap, called   # (what the piece holds at its peak, below, is its program)
        # collective steps: entries (peer, bytes, is_send), receives first
        e_count = np.zeros(n_ops, dtype=np.int64)
        e_peer, e_bytes, e_send = [], [], []
        for i, ((s_count, s_peer, s_bytes, s_send), members, ctag) in expanded.items():
            o, m = int(ptr[i]), len(s_count)
            kind[o:o + m], tag[o:o + m], e_count[o:o + m] = program.K_STEP, ctag, s_count
            e_peer.append(np.asarray(members, dtype=np.int64)[s_peer])
            e_bytes.append(s_bytes)
            e_send.append(s_send)
        del expanded
        for i, (gi, ctag, nb) in gen_at.items():
            kind[ptr[i]], peer[ptr[i]], tag[ptr[i]], nbytes[ptr[i]] = program.K_GEN, gi, ctag, nb
        # in micro-op order (calls ascending)
        e_peer = np.concatenate(e_peer) if e_peer else np.zeros(0, dtype=np.int64)
        e_bytes = np.concatenate(e_bytes) if e_bytes else np.zeros(0)
        e_send = np.concatenate(e_send) if e_send else np.zeros(0, dtype=np.int64)
        e_ptr = np.zeros(n_ops + 1, dtype=np.int64)
        np.cumsum(e_count, out=e_ptr[1:])
        del e_count
        # send sites and their route classes
        rank_end = ptr[bounds[1:]]   # micro-op i belongs to rank searchsorted(rank_end, i, "right")
        p2p_send = np.isin(kind, [program.K_SEND, program.K_ISEND, program.K_SENDRECV])
        p2p_recv = np.isin(kind, [program.K_RECV, program.K_IRECV, program.K_SENDRECV])
        bad = np.flatnonzero((p2p_send & ((peer < 0) | (peer >= n))) | (p2p_recv & (peer >= n)))
        if bad.size:
            i = int(np.searchsorted(ptr, bad[0], side="right")) - 1
            raise TopoplanError(f"{trace.source}: rank {int(trace.rank[i])} call "
                                f"{i - int(bounds[trace.rank[i]]) + int(self.calls_before[trace.rank[i]])} "
                                f"({OPS[op[i]]}): field 'peer': {int(trace.peer[i])} is not a rank of 0..{n - 1}")
        n_recvs = int(p2p_recv.sum())
        del p2p_recv, bad
        e_sends = e_send == 1
        e_owner = np.searchsorted(e_ptr, np.flatnonzero(e_sends), side="right") - 1   # the step of each send entry
        s_src = node[np.searchsorted(rank_end, np.concatenate([np.flatnonzero(p2p_send), e_owner]), side="right")]
        del e_owner
        s_dst = np.concatenate([node[peer[p2p_send]], node[e_peer[e_sends]]])
        s_bytes = np.concatenate([nbytes[p2p_send], e_bytes[e_sends]])
        inv = self._classes(s_src, s_dst, s_bytes)
        del s_src, s_dst, s_bytes
        n_sends = int(p2p_send.sum())
        cls = np.full(n_ops, -1, dtype=np.int64)
        cls[p2p_send] = inv[:n_sends]
        del p2p_send
        e_cls = np.full(len(e_peer), -1, dtype=np.int64)
        e_cls[e_sends] = inv[n_sends:]
        del inv
        n_msgs = int(n_sends + e_sends.sum())
        n_reqs = int(n_sends + n_recvs + len(e_send))
        del e_sends
        if gen_rows:
            n_msgs += int(sum(g[1] - 1 for g in gen_rows))
            n_reqs += int(sum(2 * (g[1] - 1) for g in gen_rows))
            self.gen_rows.extend(gen_rows)
        self.compute_s = compute_s
        if self.pieces:   # what check_sends_matched checks, over every piece
            sent, received = sends_and_receives(trace)
            self.sent += sent
            self.received += received
        calls_before = self.calls_before.copy()
        self.calls_before += np.diff(bounds)
        return {"prog": (ptr[bounds[:-1]], ptr[bounds[1:]], kind, peer, nbytes, tag, reqkind, mgap, cls, e_ptr,
                         e_peer, e_bytes, e_send, e_cls, n_msgs, n_reqs),
                "ptr": ptr, "bounds": bounds, "compute_s": compute_s, "calls_before": calls_before}

    def _check_memory(self, trace: Trace, n_ops: int, n_entries: int) -> None:
        """Refuse, before the program's arrays are made, a program the memory available cannot hold."""
        need = (n_ops * program.PROGRAM_OP_BYTES + n_entries * program.PROGRAM_ENTRY_BYTES
                + len(trace) * program.PROGRAM_ROW_BYTES)
        have = memory.memory_left()
        if have is not None and need > have:
            how = ("replay it with fewer iterations" if self.pieces else
                   f"a trace replays in pieces of {limits.REPLAY_PIECE_ROWS:,} rows where its collectives let it be "
                   "cut (topoplan simulate does so above that, except with --phases); this one needs fewer "
                   "iterations or more memory")
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
        net = self.net
        if self.pieces:
            fat = net.bw_Bps[~net.shared]
            xcaps = np.unique(fat[np.isfinite(fat)]).astype(np.float64)
        if not self.gen_rows and (not self.pieces or self.parts is None):
            out = program.no_stream()
            return out[:-1] + (xcaps,) if self.pieces else out
        gen = np.asarray(self.gen_rows, dtype=np.int64).reshape(-1, 5)
        parts = tuple(np.ascontiguousarray(a, dtype=np.int64) for a in self.parts)
        if not self.pieces:
            plinks = np.concatenate([parts[1], parts[2], parts[3], parts[5]])
            fat = plinks[~net.shared[plinks]]
            xcaps = np.unique(net.bw_Bps[fat][np.isfinite(net.bw_Bps[fat])]).astype(np.float64)
        return (gen, np.concatenate(self.mem) if self.mem else np.zeros(0, np.int64), self.node, parts,
                np.ascontiguousarray(net.latency_s, dtype=np.float64), np.ascontiguousarray(net.bw_Bps, dtype=np.float64),
                np.ascontiguousarray(net.switches_in, dtype=np.float64), np.ascontiguousarray(net.shared, dtype=bool),
                np.array([net.switch_delay_s, net.mtu_B, net.sim_model.relay_chunk_B], dtype=np.float64), xcaps)


def compile_program(trace: Trace, net, placement, *, eager_threshold_B: float = 65536.0, compute_scale: float = 1.0,
                    thresholds=None, stream: bool = True) -> dict:
    """The trace as flat arrays for :func:`topoplan.sim._loop.run_core` (micro-ops, route classes).

    Every call becomes one micro-op, except a collective (one ``STEP`` per
    step of its MPICH schedule: receives, then sends, then wait for all;
    ``NOP`` when it has none) and the extra rows of an alltoall written per
    destination (none). The computation gap of a call stays on its first
    micro-op. Every send site gets a route class: its (source node,
    destination node, size), whose segments (:meth:`Network.message_segments`)
    carry the size-dependent part of their latency as the reference adds it.

    With ``stream`` (the default) an alltoall that :meth:`Collectives.streamed`
    accepts is one ``GEN`` micro-op instead, when the network's routes factor
    (:meth:`Network.route_parts`): the loop generates its steps, routes and
    timing per message as it runs (same results, memory per rank instead of
    per message). ``stream=False`` expands every collective.

    Examples
    --------
    >>> from topoplan.traffic.generators import parse_spec
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.core.placement import sequential
    >>> from topoplan.sim.network import build_network
    >>> t = load_topology("paper003", ["kind=tree", "ocs=null"])
    >>> pg = compile_program(parse_spec("alltoall:np=8,bytes=1MB"), build_network(t), sequential(8, t))
    >>> from topoplan.sim.program import K_GEN
    >>> int((pg["prog"][2] == K_GEN).sum())         # one streamed GEN micro-op per rank
    8
    """
    c = Compiler(net, placement, trace.n_ranks, compute_scale=compute_scale, thresholds=thresholds, stream=stream)
    pg = c.add(trace)
    pg.update(route=c.route(), stream=c.stream(), eager_B=float(eager_threshold_B))
    return pg
