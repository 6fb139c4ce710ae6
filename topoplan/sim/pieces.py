"""The compiled replay's runs: a whole trace as one program, or a trace a piece at a time.

:func:`replay_whole` compiles the trace (:mod:`topoplan.sim.compiler`) and runs it in the compiled loop
(:func:`topoplan.sim._engine.run_core`); :func:`replay_pieces` generates (a generator's recording) or cuts
(a trace read from a file, :class:`TracePieces`), compiles and adds the pieces while the loop waits for them,
so memory holds a piece of the program and what the ranks have not run yet, a long replay reports its progress
and can stop between pieces (at a command's deadline), and the results are the whole trace's to the bit
(``tests/test_sim_pieces.py``). :class:`Window` is the micro-ops a run holds, which also names a blocked rank's
call.
"""

from __future__ import annotations

import numpy as np

from topoplan.core.errors import TopoplanError
from topoplan.sim import program
from topoplan.sim._engine import run_core
from topoplan.sim.compiler import Compiler, compile_program, row_weights
from topoplan.sim.engines import REL_TOL
from topoplan.sim.maxmin import timeline_from_samples, timeline_max_intervals
from topoplan.sim.replay_common import ReplayResult, blocked_message, check_marks, check_matched, marks_by_rank
from topoplan.sim.routes import ranges
from topoplan.traffic.trace import COLLECTIVE_OPS, OPS, Trace, op_codes, per_destination_calls

__all__ = ["replay_whole", "replay_pieces", "Window", "TracePieces"]


def replay_whole(trace: Trace, net, placement, *, eager_threshold_B, compute_scale, thresholds,
                 progress, timeline_dt_s=None, marks=None) -> ReplayResult:
    """:func:`topoplan.sim.replay.replay` of a whole trace by the compiled loop (same options).

    Examples
    --------
    >>> from topoplan.traffic.generators import parse_spec
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.core.placement import sequential
    >>> from topoplan.sim.network import build_network
    >>> t = load_topology("paper003", ["kind=tree", "ocs=null"])
    >>> res = replay_whole(parse_spec("ring:np=8,bytes=1MB"), build_network(t), sequential(8, t),
    ...                    eager_threshold_B=65536.0, compute_scale=1.0, thresholds=None, progress=None)
    >>> round(res.makespan_s, 6), res.n_messages
    (0.000804, 8)
    """
    n = trace.n_ranks
    if marks is not None:
        marks = check_marks(marks, trace)
    pg = compile_program(trace, net, placement, eager_threshold_B=eager_threshold_B, compute_scale=compute_scale,
                         thresholds=thresholds)
    if marks is None:
        order, mark_op, mark_ptr = None, np.zeros(0, np.int64), np.zeros(n + 1, np.int64)
    else:   # a marked call is reached when its rank comes to the call's first micro-op
        order, mark_ptr = marks_by_rank(marks, pg["bounds"])
        mark_op = pg["ptr"][marks[order]].astype(np.int64)
        mark_ptr = mark_ptr.astype(np.int64)
    lcap = np.where(net.shared, net.bw_Bps, np.inf)
    dt = float(timeline_dt_s or 0.0)
    finish, pc, blocked, n_msgs, n_events, n_flows, link_bytes, _, samples, n_bounds, end_s, mark_t, _, _ = run_core(
        pg["prog"], pg["route"], lcap, pg["eager_B"], REL_TOL, np.zeros(0, np.int64), np.zeros(0), np.zeros(0),
        pg["stream"], dt, timeline_max_intervals(len(lcap)), mark_op, mark_ptr, np.zeros(0, np.int64),
        program.no_state())
    # (before the deadlock check: a run stopped for its timeline has unfinished ranks)
    timeline = timeline_from_samples(samples, n_bounds, dt, float(end_s), net.bw_Bps) if dt else None
    unfinished = np.flatnonzero(np.isnan(finish))
    if unfinished.size:
        win = Window.of_piece(pg, trace)
        raise TopoplanError(blocked_message([win.blocked_at(r, int(pc[r]), bool(blocked[r]))
                                             for r in unfinished[:4].tolist()], len(unfinished), trace.source))
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


class Window:
    """The micro-ops a piece-wise replay holds: per rank, those it has not run yet of the pieces loaded, with
    each one's call (rank-local number, op code and peer of the trace row) for error messages.

    Examples
    --------
    >>> from topoplan.traffic.generators import parse_spec
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.core.placement import sequential
    >>> from topoplan.sim.network import build_network
    >>> t = load_topology("paper003", ["kind=tree", "ocs=null"])
    >>> trace = parse_spec("ring:np=4,bytes=1MB")
    >>> pg = compile_program(trace, build_network(t), sequential(4, t))
    >>> pg["prog"][0].tolist()                      # where every rank's micro-ops start
    [0, 3, 6, 9]
    >>> Window.of_piece(pg, trace).blocked_at(1, 5, True)   # rank 1 blocked in its micro-op 4
    'rank 1 in call 1 (isend peer 2)'
    """

    OPS = (2, 3, 4, 5, 6, 7, 8)        # per micro-op arrays of the program: kind, peer, nbytes, tag, reqkind, gap, cls
    ENTRIES = (10, 11, 12, 13)         # per entry: e_peer, e_bytes, e_send, e_cls

    def __init__(self, prog, call, call_op, call_peer):
        self.prog = prog
        # (for error messages only: held in the narrowest integers that hold them)
        self.call, self.call_op, self.call_peer = _narrow(call), _narrow(call_op), _narrow(call_peer)

    @classmethod
    def of_piece(cls, pg: dict, trace: Trace) -> "Window":
        ptr, bounds = pg["ptr"], pg["bounds"]
        row = np.repeat(np.arange(len(ptr) - 1), np.diff(ptr))      # the call of every micro-op
        rank = trace.rank[row]
        call = row - bounds[rank] + pg["calls_before"][rank]
        del rank
        return cls(pg["prog"], call, trace.op[row], trace.peer[row])

    def extend(self, nxt: "Window", R) -> "Window":
        """This window's micro-ops not yet run, then ``nxt``'s, per rank; moves the program counters in ``R``
        (a streamed collective in progress keeps its ``GEN``; a computation gap already slept stays slept).

        The window is rebuilt in place, an array at a time (each old one let go as its new one is made), so
        memory holds the old window and the new one only an array's worth at a time; ``nxt`` is consumed.
        Returns this window."""
        prog, b = list(self.prog), nxt.prog
        self.prog = None
        pc = R[program.R_PC]
        keep = np.minimum(pc - (R[program.R_STEP] > 0), prog[1])
        a_len, b_len = prog[1] - keep, b[1] - b[0]
        n_a = len(prog[2])
        new_len = a_len + b_len
        lo = np.zeros(len(pc), dtype=np.int64)
        np.cumsum(new_len[:-1], out=lo[1:])
        idx = ranges(np.stack([keep, b[0] + n_a], axis=1).ravel(), np.stack([a_len, b_len], axis=1).ravel())
        del a_len, b_len
        e_ptr_a = prog[9]
        e_cnt = np.concatenate([np.diff(e_ptr_a), np.diff(b[9])])[idx]
        e_from = np.concatenate([e_ptr_a[:-1], b[9][:-1] + len(prog[10])])[idx]
        del e_ptr_a
        prog[9] = None
        e_idx = ranges(e_from, e_cnt)
        del e_from
        for k in self.ENTRIES:
            prog[k] = _joined(prog, k, b[k], e_idx)
        del e_idx
        prog[9] = np.zeros(len(idx) + 1, dtype=np.int64)
        np.cumsum(e_cnt, out=prog[9][1:])
        del e_cnt
        for k in self.OPS:
            prog[k] = _joined(prog, k, b[k], idx)
        gd = R[program.R_GAPDONE]
        R[program.R_GAPDONE] = np.where(gd >= keep, gd - keep + lo, -1)
        R[program.R_PC] = lo + (pc - keep)
        prog[0], prog[1] = lo, lo + new_len
        self.prog = tuple(prog)
        del prog
        calls = [self.call, self.call_op, self.call_peer]
        self.call = self.call_op = self.call_peer = None
        self.call, self.call_op, self.call_peer = (_narrow(_joined(calls, k, x, idx)) for k, x in
                                                   enumerate((nxt.call, nxt.call_op, nxt.call_peer)))
        nxt.prog = nxt.call = nxt.call_op = nxt.call_peer = None
        return self

    def blocked_at(self, r: int, pc: int, blocked: bool) -> str:
        """Where rank ``r`` (at micro-op ``pc``) stopped, as the deadlock message names it."""
        lo, hi = self.prog[0], self.prog[1]
        i = pc - 1 if blocked else pc
        if lo[r] <= i < hi[r]:
            op = OPS[self.call_op[i]] if self.call_op[i] >= 0 else "unknown"
            return f"rank {r} in call {int(self.call[i])} ({op} peer {int(self.call_peer[i])})"
        return f"rank {r} in call -1 (unknown peer -1)"


def _joined(held: list, k: int, b: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``concatenate([a, b])[idx]`` for ``a = held[k]``, which is let go (``held[k]`` becomes None) once
    copied, before the gather: the micro-ops (or entries) ``idx`` of ``a`` then ``b``."""
    a = held[k]
    held[k] = None
    n_a = len(a)
    both = np.empty(n_a + len(b), dtype=np.result_type(a, b))
    both[:n_a] = a
    del a
    both[n_a:] = b
    return both[idx]


def _narrow(a: np.ndarray) -> np.ndarray:
    """Integers ``a`` in the narrowest of int8, int16, int32 and int64 that holds every value.

    Examples
    --------
    >>> _narrow(np.array([-1, 17], dtype=np.int64)).dtype.name
    'int8'
    >>> _narrow(np.array([0, 2**31], dtype=np.int64)).dtype.name     # beyond int32: kept wide
    'int64'
    >>> _narrow(np.zeros(0, dtype=np.int64)).dtype.name
    'int8'
    """
    a = np.asarray(a)
    lo, hi = (int(a.min()), int(a.max())) if a.size else (0, 0)
    for t in (np.int8, np.int16, np.int32):
        info = np.iinfo(t)
        if info.min <= lo and hi <= info.max:
            return a if a.dtype == t else a.astype(t)
    return a if a.dtype == np.int64 else a.astype(np.int64)


class TracePieces:
    """A whole trace cut into pieces for :func:`replay_pieces`, as a generator's recording is generated in them.

    Every rank's rows in piece 1, then piece 2, ... are its rows in the trace, in its order of calls. The
    compiler matches a collective's calls across its members within a piece, so a collective is never cut (nor
    an all-to-all written a row per destination):
    the cuts lie just before a call of the collectives of one communicator that holds every rank, at a call
    where no other collective has members on both sides of the cut. A trace without collectives is cut
    anywhere (each rank's rows in nearly equal runs); one with collectives but none over every rank is one
    piece. The trace must hold its rows by rank (as :class:`~topoplan.traffic.trace.Trace` sorts them,
    :meth:`by_rank`).

    Parameters
    ----------
    trace : Trace

    Examples
    --------
    >>> from topoplan.traffic.generators import parse_spec
    >>> tp = TracePieces(parse_spec("ring:np=4,bytes=1KB,iters=3"))
    >>> tp.rows, tp.rows_per_rank().tolist(), [len(p) for p in tp.pieces(max_rows=16)]
    (36, [9, 9, 9, 9], [12, 12, 12])
    >>> tp = TracePieces(parse_spec("alltoall:np=4,bytes=1KB,iters=3"))   # cut before an alltoall
    >>> [len(p) for p in tp.pieces(max_rows=4)]
    [4, 4, 4]
    """

    def __init__(self, trace: Trace):
        self.trace = trace
        self.n_ranks = trace.n_ranks
        self.source = trace.source
        self.rows = len(trace)
        self._per_rank = np.bincount(trace.rank, minlength=trace.n_ranks).astype(np.int64)
        self._first = np.concatenate([[0], np.cumsum(self._per_rank)[:-1]]).astype(np.int64)
        self._cuts = self._collective_cuts()

    @staticmethod
    def by_rank(trace: Trace) -> bool:
        """Whether ``trace`` holds its rows by rank (what cutting it needs).

        Examples
        --------
        >>> from topoplan.traffic.generators import parse_spec
        >>> TracePieces.by_rank(parse_spec("ring:np=4,bytes=1KB"))
        True
        """
        return bool(np.all(trace.rank[1:] >= trace.rank[:-1]))

    def _collective_cuts(self):
        """Where the trace may be cut: None anywhere (no collectives); else an ``n_ranks x c`` array, column
        ``s`` each rank's rows before cut ``s`` (no column: no cut)."""
        t, n = self.trace, self.n_ranks
        coll = np.isin(t.op, op_codes(COLLECTIVE_OPS))
        pd_rows, pd_first = per_destination_calls(t)     # an all-to-all written a row per destination is one call
        coll[pd_rows] = False
        coll[pd_rows[pd_first]] = True
        if not coll.any():
            return None
        full = coll & (t.comm_size == n)
        if not full.any():
            return np.zeros((n, 0), dtype=np.int64)
        comms, counts = np.unique(t.comm[full], return_counts=True)
        cut_comm = comms[np.argmax(counts)]
        at = coll & (t.comm == cut_comm)       # the calls the cuts lie before
        m, rest = divmod(int(at.sum()), n)
        on = np.bincount(t.rank[at], minlength=n)
        if rest or np.any(on != m):
            return np.zeros((n, 0), dtype=np.int64)
        # segment of every row: the calls of the cut communicator at or before it on its rank
        c = np.cumsum(at)
        seg = c - np.concatenate([[0], c])[self._first][t.rank]
        # a collective's calls: the k-th call of each member on its communicator
        rows = np.flatnonzero(coll)
        order = np.lexsort((rows, t.rank[rows], t.comm[rows]))
        rows = rows[order]
        grp = np.r_[True, (t.comm[rows][1:] != t.comm[rows][:-1]) | (t.rank[rows][1:] != t.rank[rows][:-1])]
        start = np.maximum.accumulate(np.where(grp, np.arange(len(rows)), 0))
        k = np.arange(len(rows)) - start
        _, inst = np.unique(np.stack([t.comm[rows], k]), axis=1, return_inverse=True)
        inst = inst.ravel()
        lo = np.full(inst.max() + 1, np.iinfo(np.int64).max)
        hi = np.full(inst.max() + 1, -1)
        np.minimum.at(lo, inst, seg[rows])
        np.maximum.at(hi, inst, seg[rows])
        # a cut before segment s parts a collective whose segments run from lo < s to hi >= s
        spans = np.zeros(m + 2, dtype=np.int64)
        np.add.at(spans, lo[lo < hi] + 1, 1)
        np.add.at(spans, hi[lo < hi] + 1, -1)
        ok = np.flatnonzero(np.cumsum(spans)[1:m + 1] == 0) + 1      # cuts s in 1..m (before the call s - 1)
        local = (np.flatnonzero(at) - self._first[t.rank[at]]).reshape(n, m)
        return local[:, ok - 1]

    def rows_per_rank(self) -> np.ndarray:
        """Rows of the trace per rank."""
        return self._per_rank.copy()

    def pieces(self, max_rows: int | None = None, weight=None):
        """The trace in pieces of about ``max_rows`` rows (one piece without a limit); every piece is a
        :class:`~topoplan.traffic.trace.Trace` over all the ranks. With ``weight`` (as for
        :meth:`topoplan.traffic.builder.TraceBuilder.pieces`: op codes and communicator sizes to each row's
        count) the pieces hold about ``max_rows`` of those counts.

        Examples
        --------
        >>> from topoplan.traffic.generators import parse_spec
        >>> tp = TracePieces(parse_spec("npb:kernel=mg,class=S,np=4"))   # cut where its collectives let it be
        >>> [len(p) for p in tp.pieces(max_rows=1434)]
        [1436, 4288, 12]
        >>> [len(p) for p in tp.pieces(max_rows=1434, weight=row_weights)]   # its allreduces count 4 rows each
        [1368, 316, 4040, 12]
        """
        per = self._per_rank
        t = self.trace
        if weight is None or self._cuts is None:   # (no collectives: every row counts one)
            load = cum = None
            total_load = self.rows
        else:
            cum = np.concatenate([[0.0], np.cumsum(weight(t.op, t.comm_size))])   # the rows' load so far
            total_load = float(cum[-1])
        k = 1 if not max_rows else max(1, -(-int(np.ceil(total_load)) // max(int(max_rows), 1)))
        if self._cuts is None:   # no collectives: nearly equal runs of every rank's rows
            bounds = [per * j // k for j in range(k + 1)]
        else:
            if cum is None:
                load = self._cuts.sum(axis=0)
            else:     # the load before every cut: each rank's rows before it
                first = self._first[:, None]
                load = (cum[first + self._cuts] - cum[first]).sum(axis=0)
            want = np.searchsorted(load, total_load * np.arange(1, k) / k)
            pick = np.unique(want[want < len(load)])
            bounds = [np.zeros_like(per), *(self._cuts[:, j] for j in pick), per]
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            if (hi > lo).any() or len(bounds) == 2:
                yield self.trace.take(ranges(self._first + lo, hi - lo))


def replay_pieces(source, net, placement, *, eager_threshold_B, compute_scale, thresholds, progress,
                   timeline_dt_s=None, max_rows=None) -> ReplayResult:
    """:func:`topoplan.sim.replay.replay` of a trace piece by piece: a generator's, generated a piece at a time
    (:meth:`~topoplan.traffic.generators.Recording.pieces`), or a trace's (:class:`TracePieces`). The compiled
    loop runs a window of micro-ops and stops when a rank needs the next piece, which is compiled and added
    while the run waits (nothing of the run's time passes), so the results are those of the whole trace.
    ``max_rows`` counts the rows by :func:`~topoplan.sim.compiler.row_weights` (what they compile to).

    Examples
    --------
    >>> from topoplan.traffic.generators import record_spec
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.core.placement import sequential
    >>> from topoplan.sim.network import build_network
    >>> t = load_topology("paper003", ["kind=tree", "ocs=null"])
    >>> rec = record_spec("ring:np=8,bytes=1MB,iters=4")
    >>> res = replay_pieces(rec, build_network(t), sequential(8, t), eager_threshold_B=65536.0, compute_scale=1.0,
    ...                     thresholds=None, progress=None, max_rows=16)
    >>> res.n_pieces > 1, res.makespan_s == replay_whole(rec.build(), build_network(t), sequential(8, t),
    ...     eager_threshold_B=65536.0, compute_scale=1.0, thresholds=None, progress=None).makespan_s
    (True, True)
    """
    n = source.n_ranks
    left = np.asarray(source.rows_per_rank(), dtype=np.int64).copy()
    comp = Compiler(net, placement, n, compute_scale=compute_scale, thresholds=thresholds, pieces=True)
    pieces = iter(source.pieces(max_rows, weight=row_weights))   # pieces of about one compiled size

    def load() -> Window:
        tr = next(pieces, None)
        if tr is None or tr.n_ranks != n:
            raise TopoplanError(f"{source.source}: its pieces do not hold the rows the recording counts per rank")
        np.subtract(left, np.bincount(tr.rank, minlength=n), out=left)
        return Window.of_piece(comp.add(tr), tr)

    win = load()
    lcap = np.where(net.shared, net.bw_Bps, np.inf)
    dt = float(timeline_dt_s or 0.0)
    z_i, z_f = np.zeros(0, np.int64), np.zeros(0)
    state = program.no_state()
    n_pieces = 1
    while True:
        out = run_core(win.prog, comp.route(), lcap, float(eager_threshold_B), REL_TOL, z_i, z_f, z_f, comp.stream(),
                       dt, timeline_max_intervals(len(lcap)), z_i, np.zeros(n + 1, np.int64),
                       (left > 0).astype(np.int64), state)
        state = out[13]
        if out[12] != 2:
            break
        win = win.extend(load(), state[program.STATE_INDEX["R"]])
        n_pieces += 1
        if progress:
            progress(int(source.rows - left.sum()), int(source.rows))
    finish, pc, blocked, n_msgs, n_events, n_flows, link_bytes, _, samples, n_bounds, end_s, _, _, _ = out
    # (first: a run stopped for its timeline's length has pieces left, and the timeline's error says why)
    timeline = timeline_from_samples(samples, n_bounds, dt, float(end_s), net.bw_Bps) if dt else None
    if left.any() or next(pieces, None) is not None:
        raise TopoplanError(f"{source.source}: its pieces do not hold the rows the recording counts per rank")
    unfinished = np.flatnonzero(np.isnan(finish))
    if unfinished.size:
        raise TopoplanError(blocked_message([win.blocked_at(r, int(pc[r]), bool(blocked[r]))
                                             for r in unfinished[:4].tolist()], len(unfinished), source.source))
    check_matched(source.source, comp.sent, comp.received)
    if progress:
        progress(n, n)
    return ReplayResult(makespan_s=float(finish.max(initial=0.0)), rank_finish_s=finish,
                        comm_time_s=np.maximum(finish - comp.compute_s, 0.0), link_bytes=link_bytes,
                        n_messages=int(n_msgs), n_flows=int(n_flows), n_events=int(n_events), timeline=timeline,
                        n_pieces=n_pieces,
                        unknown_ops=dict(source.trace.unknown_ops) if isinstance(source, TracePieces) else {})
