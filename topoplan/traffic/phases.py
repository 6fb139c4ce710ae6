"""Communication phases of an MPI trace: where the partners change.

An application moves through phases with different partners (CG's row reductions and transpose
exchange, a halo exchange followed by a global transpose). :func:`detect_phases` splits a
:class:`~topoplan.traffic.trace.Trace` into such phases, in four deterministic steps:

1. **A logical clock.** Every call gets the time it would start on an ideal network (no
   contention): each rank runs its calls in order with the trace's computation gaps; a receive
   completes ``latency + bytes / bandwidth`` after both its post and the matching send; a wait
   completes with its requests; a collective starts when its last member arrives. Matching is
   MPI's (source, tag, communicator, in order), as in the replay (:mod:`topoplan.sim.replay`), with every
   send eager. Real traces and generated ones (whose times are synthetic) get the same treatment.
2. **Windows and change points.** The bytes of every call (collectives expanded into MPICH's
   point-to-point messages, :mod:`topoplan.traffic.collectives`) go into windows of ``window_s`` of
   that clock, as a vector of node-pair bytes (rank pairs without a topology). A window whose pair
   distribution shares less than ``1 - threshold`` of its bytes with the current phase's profile
   (histogram intersection) starts a new phase; windows with almost no bytes join the phase they
   are in. The boundary is then placed, inside the windows around it, at the call that best
   separates the two profiles.
3. **Consistent cuts.** A boundary becomes one cut per rank (its first call at or after the
   boundary's time), moved forward until it is consistent: no message crosses it (a send before
   the cut is received before it), no collective call is split across it, and no rank has a
   non-blocking request open at its cut. Every phase is therefore a trace of its own that replays
   alone (:meth:`Phases.subtrace`): the simulator runs phases one after another.
4. **Kinds.** Phases whose profiles share at least ``1 - threshold`` of their bytes get the same
   ``kind`` (the iteration structure: phase 0, 2, 4 ... of a repeated pattern are one kind).

Each :class:`Phase` has its span (logical clock and trace times), bytes, dominant pairs and its
own rank :class:`~topoplan.traffic.matrix.Traffic`. :func:`concat` appends traces in time (a halo
exchange followed by a transpose).

Examples
--------
>>> from topoplan.traffic.generators import neighbor2d, alltoall
>>> two = concat([neighbor2d(4, 4, 4e6, iters=3), alltoall(16, 1e6, iters=3)])
>>> ph = detect_phases(two)
>>> [(p.kind, p.n_calls, round(p.bytes / 1e6)) for p in ph]     # kind, calls, MB
[(0, 336, 576), (1, 48, 720)]
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from topoplan.core import deadline
from topoplan.core.errors import TopoplanError
from topoplan.core.fingerprint import check_inputs, fingerprint
from topoplan.core.placement import from_nodes, Placement, sequential
from topoplan.traffic.collectives import expand_trace_collectives
from topoplan.traffic.matrix import from_trace
from topoplan.traffic.trace import COLLECTIVE_OPS, OP_CODE, OPS, Trace

__all__ = ["Phase", "Phases", "detect_phases", "logical_clock", "Clock", "concat", "split_at", "phases_from_doc",
           "is_first_call"]

_SEND, _ISEND, _RECV, _IRECV, _SENDRECV = (OP_CODE[o] for o in ("send", "isend", "recv", "irecv", "sendrecv"))
_WAIT, _WAITALL = OP_CODE["wait"], OP_CODE["waitall"]
_COLL = frozenset(OP_CODE[o] for o in COLLECTIVE_OPS)
_A2A = frozenset((OP_CODE["alltoall"], OP_CODE["alltoallv"]))
_SEND_OPS = np.array([_SEND, _ISEND, _SENDRECV], dtype=np.int16)
# bytes a member moves in a collective, as a multiple of its call's bytes (for the logical clock only)
_COLL_FACTOR = {"alltoall": "p-1", "allgather": "p-1", "allgatherv": "p-1", "allreduce": 2.0, "reduce_scatter": 1.0,
                "bcast": 1.0, "reduce": 1.0, "gather": 1.0, "scatter": 1.0, "alltoallv": 1.0, "barrier": 0.0}


# -- the logical clock ---------------------------------------------------------

@dataclass
class Clock:
    """The logical clock of a trace and what the cuts need (made by :func:`logical_clock`).

    Parameters
    ----------
    start_s : numpy.ndarray
        Per row: when the call starts on the ideal network (a collective: when its last member arrives,
        the same for all its members).
    end_s : numpy.ndarray
        Per row: when the call completes.
    valid_cut : numpy.ndarray of bool
        Per row: a phase may start at this row (no request open on its rank, not inside a call
        written as several rows).
    send_rows, recv_rows : numpy.ndarray of int64
        Matched point-to-point messages: the send row and the receive row of each.
    coll_instance : numpy.ndarray of int64
        Per row: the collective instance it belongs to (-1 for other calls).
    call_last : numpy.ndarray of int64
        Per row: the last row of its call (itself, except an alltoall(v) written per destination).
    bounds : numpy.ndarray of int64
        Rows of rank ``r`` are ``bounds[r]:bounds[r + 1]``.

    Examples
    --------
    >>> t = Trace.from_records([(0, "send", 1, 1e6, -1, 2, 0.0, 0.0), (1, "recv", 0, 1e6, -1, 2, 0.0, 0.0)], 2)
    >>> c = logical_clock(t, bandwidth_Bps=1e9, latency_s=0.0)
    >>> c.end_s.tolist(), c.send_rows.tolist(), c.recv_rows.tolist()
    ([0.001, 0.001], [0], [1])
    """

    start_s: np.ndarray
    end_s: np.ndarray
    valid_cut: np.ndarray
    send_rows: np.ndarray
    recv_rows: np.ndarray
    coll_instance: np.ndarray
    call_last: np.ndarray
    bounds: np.ndarray

    @property
    def span_s(self) -> float:
        """The logical duration of the whole trace."""
        return float(self.end_s.max(initial=0.0))


class _Req:
    __slots__ = ("rank", "peer", "is_send", "done", "t_post", "row")

    def __init__(self, rank, peer, is_send, done, t_post, row):
        self.rank, self.peer, self.is_send, self.done, self.t_post, self.row = rank, peer, is_send, done, t_post, row


def logical_clock(trace: Trace, *, bandwidth_Bps: float = 1.25e9, latency_s: float = 1e-6) -> Clock:
    """When every call of ``trace`` would run on an ideal network (see the module docstring, step 1).

    Parameters
    ----------
    trace : Trace
    bandwidth_Bps : float, optional
        The rate of every transfer (default 10 Gb/s); there is no contention.
    latency_s : float, optional
        Per message, and per step of a collective.

    Returns
    -------
    Clock

    Raises
    ------
    TopoplanError
        For a receive no send matches or a collective some member never calls (the trace would
        deadlock in the replay too), naming the blocked ranks.

    Examples
    --------
    >>> from topoplan.traffic.generators import ring
    >>> c = logical_clock(ring(4, 1e6), bandwidth_Bps=1e9, latency_s=0.0)
    >>> round(c.span_s, 6), int(c.valid_cut.sum())      # irecv, isend, waitall per rank: 2 cut points each
    (0.001, 4)
    """
    if not bandwidth_Bps > 0 or not math.isfinite(bandwidth_Bps):
        raise TopoplanError(f"field 'bandwidth_Bps': must be a positive rate, got {bandwidth_Bps}")
    if not latency_s >= 0:
        raise TopoplanError(f"field 'latency_s': must be non-negative, got {latency_s}")
    n, N = trace.n_ranks, len(trace)
    bounds = np.searchsorted(trace.rank, np.arange(n + 1)).astype(np.int64)
    gap = np.zeros(N)
    if N:
        gap[1:] = trace.t_start[1:] - trace.t_end[:-1]
        first = bounds[:-1][bounds[:-1] < bounds[1:]]
        gap[first] = trace.t_start[first] - trace.t_start.min()
    gap = np.maximum(gap, 0.0).tolist()
    op, peer, nb = trace.op.tolist(), trace.peer.tolist(), trace.bytes.tolist()
    comm, tag, reqk, tstart = trace.comm.tolist(), trace.tag.tolist(), trace.req.tolist(), trace.t_start.tolist()
    csize = trace.comm_size.tolist()
    # calls written as several rows: an alltoall(v) per destination (consecutive rows, same op and t_start)
    per = np.zeros(N, dtype=bool)
    per[np.isin(trace.op, list(_A2A)) & (trace.peer >= 0)] = True
    same_next = np.zeros(N, dtype=bool)
    if N > 1:
        same_next[:-1] = (per[:-1] & per[1:] & (trace.rank[:-1] == trace.rank[1:]) & (trace.op[:-1] == trace.op[1:])
                          & (trace.t_start[:-1] == trace.t_start[1:]) & (trace.comm[:-1] == trace.comm[1:]))
    new_call = np.ones(N, dtype=bool)
    new_call[1:] = ~same_next[:-1]
    call_last = np.flatnonzero(np.r_[new_call[1:], True]).astype(np.int64)[np.cumsum(new_call) - 1] if N else \
        np.zeros(0, dtype=np.int64)
    first_of_call = new_call
    call_last_l = call_last.tolist()

    start = [0.0] * N
    end = [0.0] * N
    open_before = [0] * N
    recv_match = [-1] * N
    inst_of = [-1] * N
    inst_rows: list[list] = []
    inst_state: dict = {}               # (comm, seq) -> [arrived, tmax, cost, size, inst id]
    coll_seq: dict = {}
    lo, hi = bounds[:-1].tolist(), bounds[1:].tolist()
    pc = list(lo)
    clk = [0.0] * n
    open_reqs: list[list] = [[] for _ in range(n)]
    blocked: list = [None] * n          # ("reqs", [req...], row) or ("coll", key, row)
    posted: list[dict] = [dict() for _ in range(n)]      # key (src, comm, tag) -> deque of (seq, req)
    unexpected: list[dict] = [dict() for _ in range(n)]  # key (src, comm, tag) -> deque of (seq, t, bytes, row)
    seq = [0]
    bw, lat = float(bandwidth_Bps), float(latency_s)
    runnable = deque(range(n))
    queued = [True] * n

    def wake(r):
        if not queued[r]:
            queued[r] = True
            runnable.append(r)

    def complete(req, t_msg, nbytes, send_row):
        req.done = max(req.t_post, t_msg) + lat + nbytes / bw
        recv_match[req.row] = send_row
        b = blocked[req.rank]
        if b is not None and b[0] == "reqs" and req in b[1]:
            wake(req.rank)

    def deliver(src, dst, c, tg, t, nbytes, row):
        seq[0] += 1
        best, best_key = None, None
        for key in ((src, c, tg), (-1, c, tg), (src, c, -1), (-1, c, -1)):
            q = posted[dst].get(key)
            if q and (best is None or q[0][0] < best):
                best, best_key = q[0][0], key
        if best_key is not None:
            _, req = posted[dst][best_key].popleft()
            complete(req, t, nbytes, row)
        else:
            unexpected[dst].setdefault((src, c, tg), deque()).append((seq[0], t, nbytes, row))

    def post(r, src, c, tg, t, row):
        req = _Req(r, src, False, None, t, row)
        if src >= 0 and tg >= 0:
            q = unexpected[r].get((src, c, tg))
            keys = [(src, c, tg)] if q else []
        else:
            keys = [k for k, q in unexpected[r].items() if q and k[1] == c and (src < 0 or k[0] == src)
                    and (tg < 0 or k[2] == tg)]
        if keys:
            key = min(keys, key=lambda k: unexpected[r][k][0][0])
            _, tm, nbytes, srow = unexpected[r][key].popleft()
            complete(req, tm, nbytes, srow)
        else:
            seq[0] += 1
            posted[r].setdefault((src, c, tg), deque()).append((seq[0], req))
        return req

    def coll_cost(i, last):
        name = OPS[op[i]]
        p = max(int(csize[i]), 1)
        by = sum(nb[k] for k in range(i, last + 1)) if last > i else nb[i]
        f = _COLL_FACTOR.get(name, 1.0)
        f = (p - 1) if f == "p-1" else f
        return lat * max(1.0, math.ceil(math.log2(p))) + f * by / bw

    ticks = [0]

    def run(r):
        while True:
            ticks[0] += 1
            if not ticks[0] & 4095:   # a command's time limit (deadline.stopping) ends the clock as it goes
                deadline.check()
            b = blocked[r]
            if b is not None:
                if b[0] == "reqs":
                    if any(q.done is None for q in b[1]):
                        return
                    t = max([clk[r]] + [q.done for q in b[1]])
                else:
                    st = inst_state[b[1]]
                    if st[0] < st[3]:
                        return
                    t = st[1] + st[2]
                    for k in range(b[2], call_last_l[b[2]] + 1):
                        start[k] = st[1]
                clk[r] = t
                for k in range(b[2], call_last_l[b[2]] + 1):
                    end[k] = t
                blocked[r] = None
            i = pc[r]
            if i >= hi[r]:
                return
            t = clk[r] + gap[i]
            start[i] = t
            open_before[i] = len(open_reqs[r])
            o = op[i]
            pc[r] = i + 1
            if o == _ISEND or o == _SEND:
                deliver(r, peer[i], comm[i], tag[i], t, nb[i], i)
                if o == _ISEND:
                    open_reqs[r].append(_Req(r, peer[i], True, t + lat, t, i))
                    end[i] = t
                else:
                    end[i] = t + lat + nb[i] / bw
                clk[r] = end[i]
            elif o == _IRECV:
                open_reqs[r].append(post(r, peer[i], comm[i], tag[i], t, i))
                end[i] = clk[r] = t
            elif o == _RECV:
                blocked[r] = ("reqs", [post(r, peer[i], comm[i], tag[i], t, i)], i)
                clk[r] = t
            elif o == _SENDRECV:
                deliver(r, peer[i], comm[i], tag[i], t, nb[i], i)
                blocked[r] = ("reqs", [post(r, -1, comm[i], tag[i], t, i)], i)
                clk[r] = t
            elif o == _WAIT:
                reqs, kind, p = open_reqs[r], reqk[i], peer[i]
                pick = None
                for k, q in enumerate(reqs):
                    if (p < 0 or q.peer == p) and (kind < 0 or q.is_send == bool(kind)):
                        pick = k
                        break
                clk[r] = t
                if p < 0 and pick is None:
                    blocked[r], open_reqs[r] = ("reqs", list(reqs), i), []
                elif pick is not None:
                    blocked[r] = ("reqs", [reqs.pop(pick)], i)
                else:
                    end[i] = t
            elif o == _WAITALL:
                blocked[r], open_reqs[r] = ("reqs", list(open_reqs[r]), i), []
                clk[r] = t
            elif o in _COLL:
                last = call_last_l[i]
                for k in range(i + 1, last + 1):
                    start[k] = t
                    open_before[k] = open_before[i]
                pc[r] = last + 1
                key0 = (r, comm[i])
                s = coll_seq.get(key0, 0)
                coll_seq[key0] = s + 1
                key = (comm[i], s)
                st = inst_state.get(key)
                if st is None:
                    size = len(trace.members(comm[i]))
                    st = inst_state[key] = [0, 0.0, 0.0, size, len(inst_rows)]
                    inst_rows.append([])
                st[0] += 1
                st[1] = max(st[1], t)
                st[2] = max(st[2], coll_cost(i, last))
                for k in range(i, last + 1):
                    inst_of[k] = st[4]
                inst_rows[st[4]].append((r, i))
                blocked[r] = ("coll", key, i)
                clk[r] = t
                if st[0] >= st[3]:
                    for rr, _ in inst_rows[st[4]]:
                        wake(rr)
            else:               # calls not modelled take no time
                end[i] = clk[r] = t

    while runnable:
        r = runnable.popleft()
        queued[r] = False
        run(r)
    stuck = [r for r in range(n) if pc[r] < hi[r] or blocked[r] is not None]
    if stuck:
        parts = []
        for r in stuck[:4]:
            i = blocked[r][2] if blocked[r] is not None else pc[r]
            parts.append(f"rank {r} in call {i - lo[r]} ({OPS[op[i]] if op[i] >= 0 else 'unknown'} peer {peer[i]})")
        raise TopoplanError(f"{trace.source or 'trace'}: deadlock or unmatched receive in the logical clock: "
                            f"{len(stuck)} rank(s) blocked: " + "; ".join(parts))
    # collective rows share the instance's start (its last member's arrival)
    start_a, end_a = np.asarray(start), np.asarray(end)
    inst = np.asarray(inst_of, dtype=np.int64)
    ob = np.asarray(open_before, dtype=np.int64)
    rm = np.asarray(recv_match, dtype=np.int64)
    recv_rows = np.flatnonzero(rm >= 0)
    return Clock(start_s=start_a, end_s=end_a, valid_cut=(ob == 0) & first_of_call,
                 send_rows=rm[recv_rows], recv_rows=recv_rows.astype(np.int64), coll_instance=inst,
                 call_last=call_last, bounds=bounds)


# -- consistent cuts -----------------------------------------------------------

def _next_valid(clock: Clock) -> np.ndarray:
    """``nv[i]``: the first valid cut position at or after row ``i`` (rank ends are valid)."""
    N = len(clock.start_s)
    valid = np.zeros(N + 1, dtype=bool)
    valid[:N] = clock.valid_cut
    valid[clock.bounds] = True      # the first row of a rank, and the end of the trace
    idx = np.where(valid, np.arange(N + 1), N + 1)
    return np.minimum.accumulate(idx[::-1])[::-1]


def _prev_valid(clock: Clock) -> np.ndarray:
    """``pv[i]``: the last valid cut position at or before row ``i`` (rank starts are valid)."""
    N = len(clock.start_s)
    valid = np.zeros(N + 1, dtype=bool)
    valid[:N] = clock.valid_cut
    valid[clock.bounds] = True
    idx = np.where(valid, np.arange(N + 1), -1)
    return np.maximum.accumulate(idx)


def _consistent_back(clock: Clock, cut: np.ndarray, floor: np.ndarray, rank_of: np.ndarray,
                     pv: np.ndarray) -> np.ndarray | None:
    """Move the cut backward until no message or collective crosses it; None if it would pass ``floor``."""
    cut = cut.copy()
    S, R = clock.send_rows, clock.recv_rows
    inst = clock.coll_instance
    crow = np.flatnonzero(inst >= 0)
    cinst = inst[crow]
    n_inst = int(inst.max(initial=-1)) + 1
    first = crow.copy()
    if crow.size:   # the first row of each collective call (an alltoall(v) per destination spans rows)
        prev_same = np.r_[False, (crow[1:] == crow[:-1] + 1)
                          & (clock.call_last[crow[1:]] == clock.call_last[crow[:-1]])]
        first = crow.copy()
        for k in np.flatnonzero(prev_same).tolist():
            first[k] = first[k - 1]
    for _ in range(100000):
        cut = pv[cut]
        if (cut < floor).any():
            return None
        old = cut.copy()
        if S.size:
            bs = S < cut[rank_of[S]]
            br = R < cut[rank_of[R]]
            v = bs & ~br
            if v.any():
                np.minimum.at(cut, rank_of[S[v]], S[v])
            v = ~bs & br
            if v.any():
                np.minimum.at(cut, rank_of[R[v]], R[v])
        if crow.size:
            b = crow < cut[rank_of[crow]]
            alla = np.zeros(n_inst, dtype=bool)
            alla[cinst[~b]] = True
            v = alla[cinst] & b
            if v.any():
                np.minimum.at(cut, rank_of[crow[v]], first[v])
        cut = pv[cut]
        if (cut < floor).any():
            return None
        if np.array_equal(cut, old):
            return cut
    raise AssertionError("consistent cut did not converge")


def _closest_cut(clock: Clock, cut: np.ndarray, floor: np.ndarray, rank_of, nv, pv) -> np.ndarray:
    """The consistent cut nearest ``cut``: moved forward or backward, whichever moves fewer calls."""
    fwd = _consistent(clock, cut, rank_of, nv)
    back = _consistent_back(clock, cut, floor, rank_of, pv)
    if back is None:
        return fwd
    return back if np.abs(back - cut).sum() < np.abs(fwd - cut).sum() else fwd


def _consistent(clock: Clock, cut: np.ndarray, rank_of: np.ndarray, nv: np.ndarray) -> np.ndarray:
    """Move the per-rank cut (absolute row indices) forward until no message or collective crosses it."""
    cut = cut.copy()
    S, R = clock.send_rows, clock.recv_rows
    inst = clock.coll_instance
    crow = np.flatnonzero(inst >= 0)
    cinst = inst[crow]
    n_inst = int(inst.max(initial=-1)) + 1
    last = clock.call_last
    for _ in range(100000):
        cut = nv[cut]
        old = cut.copy()
        if S.size:
            bs = S < cut[rank_of[S]]
            br = R < cut[rank_of[R]]
            v = bs & ~br
            if v.any():
                np.maximum.at(cut, rank_of[R[v]], R[v] + 1)
            v = ~bs & br
            if v.any():
                np.maximum.at(cut, rank_of[S[v]], S[v] + 1)
        if crow.size:
            b = crow < cut[rank_of[crow]]
            anyb = np.zeros(n_inst, dtype=bool)
            anyb[cinst[b]] = True
            v = anyb[cinst] & ~b
            if v.any():
                np.maximum.at(cut, rank_of[crow[v]], last[crow[v]] + 1)
        cut = nv[cut]
        if np.array_equal(cut, old):
            return cut
    raise AssertionError("consistent cut did not converge")


# -- traffic of a set of rows ------------------------------------------------------

def _profile(keys: np.ndarray, by: np.ndarray) -> dict:
    if not len(keys):
        return {}
    u, inv = np.unique(keys, return_inverse=True)
    w = np.bincount(inv.ravel(), weights=by, minlength=len(u))
    return dict(zip(u.tolist(), w.tolist()))


def _similarity(a: dict, b: dict) -> float:
    """Histogram intersection of two byte profiles (1: same distribution over pairs, 0: disjoint)."""
    ta, tb = sum(a.values()), sum(b.values())
    if ta <= 0 or tb <= 0:
        return 1.0
    if len(a) > len(b):
        a, b, ta, tb = b, a, tb, ta
    return float(sum(min(v / ta, b.get(k, 0.0) / tb) for k, v in a.items()))


def _add(acc: dict, other: dict) -> None:
    for k, v in other.items():
        acc[k] = acc.get(k, 0.0) + v


# -- phases ----------------------------------------------------------------------

@dataclass
class Phase:
    """One communication phase (see :func:`detect_phases`).

    Parameters
    ----------
    index : int
    kind : int
        Phases of the same kind have similar pair distributions (the first phase of each kind
        numbers it).
    start_s, end_s : float
        Span on the logical clock (an ideal network; see :func:`logical_clock`).
    t_start_s, t_end_s : float
        Span in the trace's own times (first call start, last call end).
    bytes : float
        Bytes sent in the phase (point-to-point and expanded collectives, self-messages excluded).
    n_calls : int
        Trace rows in the phase.
    pairs : list of tuple
        The dominant pairs: ``(a, b, bytes)``, unordered, heaviest first (node pairs when the phases
        were detected with a topology, else rank pairs), covering at least 80% of the bytes (at most 16).
    traffic : Traffic
        The rank traffic of the phase.
    first_call : numpy.ndarray of int64
        Per rank, the number of its calls before the phase (the phase's calls of rank ``r`` are its
        calls ``first_call[r]`` up to the next phase's ``first_call[r]``).

    Examples
    --------
    >>> from topoplan.traffic.generators import ring
    >>> p = detect_phases(ring(4, 1e6, iters=2))[0]
    >>> p.index, p.kind, p.bytes, p.pairs[0]
    (0, 0, 8000000.0, (0, 1, 2000000.0))
    """

    index: int
    kind: int
    start_s: float
    end_s: float
    t_start_s: float
    t_end_s: float
    bytes: float
    n_calls: int
    pairs: list
    traffic: object = field(repr=False)
    first_call: np.ndarray = field(repr=False)

    @property
    def duration_s(self) -> float:
        """Logical duration."""
        return self.end_s - self.start_s

    def to_dict(self) -> dict:
        """JSON form (without the traffic; its matrix totals instead)."""
        return {"index": self.index, "kind": self.kind, "start_s": self.start_s, "end_s": self.end_s,
                "t_start_s": self.t_start_s, "t_end_s": self.t_end_s, "bytes": self.bytes, "n_calls": self.n_calls,
                "pairs": [[int(a), int(b), float(x)] for a, b, x in self.pairs],
                "first_call": self.first_call.tolist()}


@dataclass
class Phases:
    """The phases of one trace, in order, with the cuts that separate them.

    Iterating gives the :class:`Phase` objects; :meth:`subtrace` gives the calls of one phase (or of
    consecutive phases) as a trace that replays alone.

    Parameters
    ----------
    trace : Trace
        The whole trace.
    phases : list of Phase
    cuts : numpy.ndarray of int64
        ``(len(phases) + 1, n_ranks)`` absolute row indices: phase ``i`` of rank ``r`` is rows
        ``cuts[i, r]:cuts[i + 1, r]``.
    pair_basis : str
        ``node`` or ``rank``: what the profiles and ``pairs`` count.
    options : dict
        The detection parameters (window, threshold, clock bandwidth and latency).

    Examples
    --------
    >>> from topoplan.traffic.generators import neighbor2d, alltoall
    >>> ph = detect_phases(concat([neighbor2d(4, 4, 4e6), alltoall(16, 1e6)]))
    >>> len(ph), ph.kinds(), len(ph.subtrace(1)), len(ph.subtrace(0, 2)) == len(ph.trace)
    (2, [0, 1], 16, True)
    """

    trace: Trace
    phases: list
    cuts: np.ndarray
    pair_basis: str = "rank"
    options: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.phases)

    def __iter__(self):
        return iter(self.phases)

    def __getitem__(self, i):
        return self.phases[i]

    def kinds(self) -> list[int]:
        """The kind of every phase, in order."""
        return [p.kind for p in self.phases]

    def rows(self, i: int, j: int | None = None) -> np.ndarray:
        """Row indices (sorted) of phases ``i`` to ``j - 1`` (default: phase ``i`` alone)."""
        j = i + 1 if j is None else j
        m = len(self.cuts) - 1
        if not 0 <= i < j <= m:
            raise TopoplanError(f"field 'phase': phases {i}..{j - 1} outside 0..{m - 1}")
        lo, hi = self.cuts[i], self.cuts[j]
        parts = [np.arange(a, b) for a, b in zip(lo.tolist(), hi.tolist()) if b > a]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def subtrace(self, i: int, j: int | None = None, *, rebase: bool = True) -> Trace:
        """The calls of phases ``i`` to ``j - 1`` as a trace that replays alone.

        With ``rebase`` every rank's times are shifted so that its first call keeps only its own
        computation gap before it (the time since its previous call in the whole trace): the phase
        starts on all ranks at once, as after a barrier, and waiting carried over from the previous
        phase is dropped. The phases of the whole trace (``subtrace(0, len(phases))``) are the trace
        itself.

        Parameters
        ----------
        i : int
        j : int, optional
        rebase : bool, optional

        Returns
        -------
        Trace

        Examples
        --------
        >>> from topoplan.traffic.generators import neighbor2d, alltoall
        >>> ph = detect_phases(concat([neighbor2d(4, 4, 4e6), alltoall(16, 1e6)]))
        >>> sub = ph.subtrace(1)
        >>> sub.op_counts(), float(sub.t_start.min())
        ({'alltoall': 16}, 0.0)
        """
        j = i + 1 if j is None else j
        if i == 0 and j == len(self.phases):
            return self.trace
        rows = self.rows(i, j)
        sub = self.trace.take(rows, source=f"{self.trace.source or 'trace'}[phases {i}..{j - 1}]")
        if rebase and len(rows):
            tr = self.trace
            first = np.ones(len(rows), dtype=bool)
            first[1:] = sub.rank[1:] != sub.rank[:-1]
            fr = rows[first]
            # each rank's first call keeps its own computation gap since its previous call of the trace
            has_prev = fr > self._lo()[tr.rank[fr]]
            prev_end = np.where(has_prev, tr.t_end[np.maximum(fr - 1, 0)], tr.t_start.min())
            gap = np.maximum(tr.t_start[fr] - prev_end, 0.0)
            shift = np.repeat(tr.t_start[fr] - gap, np.diff(np.r_[np.flatnonzero(first), len(rows)]))
            sub.t_start = sub.t_start - shift
            sub.t_end = sub.t_end - shift
        return sub

    def _lo(self) -> np.ndarray:
        return np.searchsorted(self.trace.rank, np.arange(self.trace.n_ranks))

    def to_dict(self) -> dict:
        """JSON form: the options, and per phase its span, bytes, dominant pairs and first calls.

        ``inputs`` records the trace's fingerprint (:func:`topoplan.core.fingerprint.fingerprint_trace`),
        so that :func:`phases_from_doc` refuses the document for another trace.

        Returns
        -------
        dict

        Examples
        --------
        >>> from topoplan.traffic.generators import ring
        >>> d = detect_phases(ring(4, 1e6)).to_dict()
        >>> sorted(d), d["n_phases"], sorted(d["inputs"])
        (['inputs', 'n_phases', 'n_ranks', 'options', 'pair_basis', 'phases', 'source'], 1, ['trace'])
        """
        return {"source": self.trace.source, "inputs": fingerprint(trace=self.trace),
                "n_ranks": self.trace.n_ranks, "n_phases": len(self.phases),
                "pair_basis": self.pair_basis, "options": dict(self.options),
                "phases": [p.to_dict() for p in self.phases]}


def _dominant(keys_w: dict, width: int, share: float = 0.8, most: int = 16) -> list:
    items = sorted(keys_w.items(), key=lambda kv: (-kv[1], kv[0]))
    total = sum(keys_w.values())
    out, acc = [], 0.0
    for k, w in items[:most]:
        out.append((int(k // width), int(k % width), float(w)))
        acc += w
        if total > 0 and acc >= share * total:
            break
    return out


def detect_phases(trace: Trace, topology=None, placement=None, *, window_s: float | None = None,
                  windows: int = 200, threshold: float = 0.5, min_bytes_share: float = 0.02, min_windows: int = 2,
                  bandwidth_Bps: float | None = None, latency_s: float = 1e-6) -> Phases:
    """Split ``trace`` into communication phases (see the module docstring).

    Parameters
    ----------
    trace : Trace
    topology : Topology, optional
        With it, profiles count node pairs (ranks placed by ``placement``; intra-node bytes left out)
        and the clock runs at the slowest node link's rate; without it, rank pairs at 10 Gb/s.
    placement : Placement, optional
        Default sequential (with a topology).
    window_s : float, optional
        Width of the windows on the logical clock; default the trace's logical span / ``windows``.
    windows : int, optional
        Number of windows when ``window_s`` is not given.
    threshold : float, optional
        A window starts a new phase when it shares less than ``1 - threshold`` of its bytes with the
        current phase's profile; two phases are of one kind when they share at least that much.
    min_bytes_share : float, optional
        Windows with fewer bytes than this share of the mean busy window join the current phase.
    min_windows : int, optional
        Windows a phase lasts at least (so a pattern whose calls straddle a window edge is not cut in
        two there); phases shorter than that are not resolved.
    bandwidth_Bps, latency_s : float, optional
        The logical clock's network (:func:`logical_clock`).

    Returns
    -------
    Phases

    Raises
    ------
    TopoplanError
        For a bad option or a trace that deadlocks.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.generators import neighbor2d, alltoall
    >>> ph = detect_phases(concat([neighbor2d(16, 16, 4e6), alltoall(256, 1e5)]), load_topology("paper003"))
    >>> ph.pair_basis, ph[0].pairs[0], ph[1].pairs[0]          # (node, node, bytes)
    ('node', (0, 4, 32000000.0), (0, 1, 3200000.0))
    """
    if not 0.0 < threshold < 1.0:
        raise TopoplanError(f"field 'threshold': must be between 0 and 1, got {threshold}")
    if window_s is not None and not (window_s > 0 and math.isfinite(window_s)):
        raise TopoplanError(f"field 'window_s': must be a positive time, got {window_s}")
    if int(windows) < 1:
        raise TopoplanError(f"field 'windows': must be at least 1, got {windows}")
    if int(min_windows) < 1:
        raise TopoplanError(f"field 'min_windows': must be at least 1, got {min_windows}")
    node = None
    if topology is not None:
        if placement is None:
            placement = sequential(trace.n_ranks, topology)
        elif not isinstance(placement, Placement):
            placement = from_nodes(placement, topology)
        node = np.asarray(placement.rank_to_node, dtype=np.int64)
        if bandwidth_Bps is None:
            bandwidth_Bps = float(np.min(topology.node_link_bw()))
    bw = 1.25e9 if bandwidth_Bps is None else float(bandwidth_Bps)
    clock = logical_clock(trace, bandwidth_Bps=bw, latency_s=latency_s)
    n, N = trace.n_ranks, len(trace)
    rank_of = trace.rank.astype(np.int64)
    width = int(node.max(initial=0)) + 1 if node is not None else max(n, 1)
    span = clock.span_s
    dt = float(window_s) if window_s is not None else (span / int(windows) if span > 0 else 1.0)
    opts = {"window_s": dt, "threshold": threshold, "min_bytes_share": min_bytes_share, "min_windows": min_windows,
            "bandwidth_Bps": bw, "latency_s": latency_s}

    # every row's messages, as pair keys, at the row's clock
    t_row = clock.start_s
    w_row = np.minimum((t_row / dt).astype(np.int64), max(int(math.ceil(span / dt)) - 1, 0)) if N else \
        np.zeros(0, np.int64)
    msg_row, msg_key, msg_b = _row_messages(trace, node, width)

    nwin = int(w_row.max(initial=-1)) + 1
    win_of_msg = w_row[msg_row] if len(msg_row) else np.zeros(0, np.int64)
    order = np.argsort(win_of_msg, kind="stable")
    cuts_w = np.searchsorted(win_of_msg[order], np.arange(nwin + 1))
    profiles, totals = [], []
    for k in range(nwin):
        sel = order[cuts_w[k]:cuts_w[k + 1]]
        prof = _profile(msg_key[sel], msg_b[sel])
        profiles.append(prof)
        totals.append(sum(prof.values()))
    busy = [x for x in totals if x > 0]
    floor = min_bytes_share * (sum(busy) / len(busy)) if busy else 0.0
    # segmentation: window indices where a new phase starts
    # (a phase lasts at least min_windows windows: a pattern whose calls straddle a window edge is not cut
    # in two by the edge)
    starts, cur = [0], {}
    for k in range(nwin):
        if totals[k] <= floor:
            continue
        if cur and k - starts[-1] >= min_windows and _similarity(cur, profiles[k]) < 1.0 - threshold:
            starts.append(k)
            cur = {}
        _add(cur, profiles[k])
    starts = sorted(set(starts))
    # adjacent segments with similar profiles are one phase
    merged = [starts[0]]
    seg = {}
    for a, b in zip(starts, starts[1:] + [nwin]):
        p = {}
        for k in range(a, b):
            _add(p, profiles[k])
        if a != starts[0] and _similarity(seg, p) >= 1.0 - threshold:
            _add(seg, p)
            continue
        if a != starts[0]:
            merged.append(a)
            seg = {}
        _add(seg, p)
    starts = merged
    # boundaries in clock time, refined around each window boundary
    seg_prof = []
    for a, b in zip(starts, starts[1:] + [nwin]):
        p = {}
        for k in range(a, b):
            _add(p, profiles[k])
        seg_prof.append(p)
    bounds_t = []
    for s_i, k in enumerate(starts[1:], start=1):
        lo_w, hi_w = max(starts[s_i - 1], k - 1), min(k + 1, nwin)
        bounds_t.append(_refine(t_row, msg_row, msg_key, msg_b, lo_w * dt, hi_w * dt, seg_prof[s_i - 1],
                                seg_prof[s_i], k * dt))
    # consistent cuts
    nv, pv = _next_valid(clock), _prev_valid(clock)
    lo_r, hi_r = clock.bounds[:-1], clock.bounds[1:]
    cuts = [lo_r.copy()]
    for T in bounds_t:
        c = np.empty(n, dtype=np.int64)
        for r in range(n):   # first row of rank r starting at or after T
            c[r] = lo_r[r] + np.searchsorted(t_row[lo_r[r]:hi_r[r]], T, side="left") if hi_r[r] > lo_r[r] else lo_r[r]
        c = _closest_cut(clock, np.maximum(c, cuts[-1]), cuts[-1], rank_of, nv, pv)
        if np.array_equal(c, cuts[-1]) or np.array_equal(c, hi_r):
            continue
        cuts.append(c)
    cuts.append(hi_r.copy())
    cuts = np.vstack(cuts)
    # drop empty phases (no rows at all)
    keep = [0]
    for i in range(1, len(cuts)):
        if (cuts[i] > cuts[keep[-1]]).any():
            keep.append(i)
    if keep[-1] != len(cuts) - 1:
        keep[-1] = len(cuts) - 1
    cuts = _merge_similar(trace, cuts[keep], msg_row, msg_key, msg_b, threshold)
    return _build(trace, clock, cuts, node, width, threshold, opts, msg_row, msg_key, msg_b)


def _row_phase(trace: Trace, cuts: np.ndarray) -> np.ndarray:
    out = np.empty(len(trace), dtype=np.int64)
    for i in range(len(cuts) - 1):
        for a, b in zip(cuts[i].tolist(), cuts[i + 1].tolist()):
            out[a:b] = i
    return out


def _merge_similar(trace, cuts, msg_row, msg_key, msg_b, threshold) -> np.ndarray:
    """Drop the cut between adjacent phases whose final profiles are similar (a consistent cut can go)."""
    while len(cuts) > 2:
        mp = _row_phase(trace, cuts)[msg_row] if len(msg_row) else np.zeros(0, np.int64)
        profs = [_profile(msg_key[mp == i], msg_b[mp == i]) for i in range(len(cuts) - 1)]
        sims = [_similarity(profs[i], profs[i + 1]) for i in range(len(profs) - 1)]
        i = int(np.argmax(sims))
        if sims[i] < 1.0 - threshold:
            break
        cuts = np.delete(cuts, i + 1, axis=0)
    return cuts


def _row_messages(trace: Trace, node, width: int):
    """Per message of the trace: the row that sends it, its pair key and bytes (self and intra-node left out)."""
    N = len(trace)
    rows = np.arange(N, dtype=np.int64)
    snd = np.isin(trace.op, _SEND_OPS) & (trace.peer >= 0)
    r_list, s_list, d_list, b_list = [rows[snd]], [trace.rank[snd]], [trace.peer[snd]], [trace.bytes[snd]]
    coll = np.flatnonzero(np.isin(trace.op, list(_COLL)))
    if coll.size:
        # a collective row's messages: expand calls grouped by identical (op, comm, rank, root, bytes) shape
        sub = trace.take(coll)
        key = np.stack([sub.op.astype(np.float64), sub.comm, sub.rank, sub.root, sub.bytes], axis=1)
        per_dest = np.isin(sub.op, list(_A2A)) & (sub.peer >= 0)
        if per_dest.any():          # alltoall(v) per destination: each row sends its bytes to its peer
            pr = coll[per_dest]
            r_list.append(pr)
            s_list.append(trace.rank[pr])
            d_list.append(trace.peer[pr])
            b_list.append(trace.bytes[pr])
        idx = np.flatnonzero(~per_dest)
        if idx.size:
            u, first, inv = np.unique(key[idx], axis=0, return_index=True, return_inverse=True)
            inv = inv.ravel()
            for g in range(len(u)):
                i0 = coll[idx[first[g]]]
                cs, cd, cb = expand_trace_collectives(trace.take(np.array([i0])))
                members = coll[idx[inv == g]]
                if not len(cs):
                    continue
                r_list.append(np.repeat(members, len(cs)))
                s_list.append(np.tile(np.asarray(cs, np.int64), len(members)))
                d_list.append(np.tile(np.asarray(cd, np.int64), len(members)))
                b_list.append(np.tile(np.asarray(cb, np.float64), len(members)))
    mr = np.concatenate(r_list).astype(np.int64)
    s = np.concatenate(s_list).astype(np.int64)
    d = np.concatenate(d_list).astype(np.int64)
    b = np.concatenate(b_list).astype(np.float64)
    if node is not None:
        s, d = node[s], node[d]
    keep = (s != d) & (b > 0)
    a, c = np.minimum(s[keep], d[keep]), np.maximum(s[keep], d[keep])
    return mr[keep], a * width + c, b[keep]


def _refine(t_row, msg_row, msg_key, msg_b, t_lo, t_hi, prof_a: dict, prof_b: dict, default: float) -> float:
    """The clock time in ``[t_lo, t_hi]`` that best separates profile ``a`` (before) from ``b`` (after)."""
    tm = t_row[msg_row]
    sel = np.flatnonzero((tm >= t_lo) & (tm < t_hi))
    if not sel.size:
        return default
    ta, tb = sum(prof_a.values()) or 1.0, sum(prof_b.values()) or 1.0
    keys = msg_key[sel].tolist()
    pa = np.array([prof_a.get(k, 0.0) / ta for k in keys])
    pb = np.array([prof_b.get(k, 0.0) / tb for k in keys])
    # each message votes for the profile it is more typical of, in [-1, 1], weighted by its bytes
    score = np.divide(pa - pb, pa + pb, out=np.zeros_like(pa), where=(pa + pb) > 0) * msg_b[sel]
    times = tm[sel]
    u, inv = np.unique(times, return_inverse=True)
    per_t = np.bincount(inv.ravel(), weights=score, minlength=len(u))
    # boundary before u[j]: rows with time < u[j] go before; gain = sum of scores before
    gain = np.concatenate([[0.0], np.cumsum(per_t)])
    j = int(np.argmax(gain))                # ties: the earliest
    return float(u[j]) if j < len(u) else float(np.nextafter(u[-1], np.inf))


def _build(trace, clock, cuts, node, width, threshold, opts, msg_row, msg_key, msg_b) -> Phases:
    lo_r = clock.bounds[:-1]
    row_phase = _row_phase(trace, cuts)
    mp = row_phase[msg_row] if len(msg_row) else np.zeros(0, np.int64)
    phases, profs, kinds = [], [], []
    ph = Phases(trace=trace, phases=[], cuts=cuts, pair_basis="node" if node is not None else "rank", options=opts)
    for i in range(len(cuts) - 1):
        rows = ph.rows(i)
        sel = mp == i
        prof = _profile(msg_key[sel], msg_b[sel])
        kind = next((kinds[k] for k, p in enumerate(profs) if kinds[k] == k and _similarity(p, prof) >= 1 - threshold),
                    None)
        if kind is None:
            kind = i
        profs.append(prof)
        kinds.append(kind)
        sub = trace.take(rows)
        tr = from_trace(sub)
        tr.name = f"{trace.source or 'trace'} phase {i}"
        phases.append(Phase(index=i, kind=kind,
                            start_s=float(clock.start_s[rows].min()) if len(rows) else 0.0,
                            end_s=float(clock.end_s[rows].max()) if len(rows) else 0.0,
                            t_start_s=float(trace.t_start[rows].min()) if len(rows) else 0.0,
                            t_end_s=float(trace.t_end[rows].max()) if len(rows) else 0.0,
                            bytes=tr.total_bytes(), n_calls=int(len(rows)), pairs=_dominant(prof, width),
                            traffic=tr, first_call=(cuts[i] - lo_r).astype(np.int64)))
    # number kinds 0, 1, 2 ... in order of first appearance
    remap: dict = {}
    for p in phases:
        p.kind = remap.setdefault(p.kind, len(remap))
    ph.phases = phases
    return ph


def split_at(trace: Trace, first_calls, topology=None, placement=None) -> Phases:
    """Phases from given cuts: ``first_calls[k][r]`` is rank ``r``'s number of calls before phase ``k + 1``.

    The cuts are made consistent as in :func:`detect_phases` (moved forward until no message or
    collective crosses them); every phase is its own kind unless its profile matches an earlier one.

    Parameters
    ----------
    trace : Trace
    first_calls : sequence of sequence of int
        One per boundary, one number per rank.
    topology, placement : optional
        As for :func:`detect_phases` (node-pair profiles).

    Returns
    -------
    Phases

    Examples
    --------
    >>> from topoplan.traffic.generators import ring
    >>> ph = split_at(ring(4, 1e6, iters=2), [[3, 3, 3, 3]])     # after the first waitall
    >>> len(ph), [p.n_calls for p in ph], ph.kinds()
    (2, [12, 12], [0, 0])
    """
    node, width = None, max(trace.n_ranks, 1)
    if topology is not None:
        placement = placement if placement is not None else sequential(trace.n_ranks, topology)
        node = np.asarray(placement.rank_to_node, dtype=np.int64)
        width = int(node.max(initial=0)) + 1
    clock = logical_clock(trace)
    nv = _next_valid(clock)
    lo_r, hi_r = clock.bounds[:-1], clock.bounds[1:]
    cuts = [lo_r.copy()]
    for k, fc in enumerate(first_calls):
        fc = np.asarray(fc, dtype=np.int64)
        if fc.shape != (trace.n_ranks,) or (fc < 0).any():
            raise TopoplanError(f"field 'first_calls[{k}]': expected {trace.n_ranks} non-negative call numbers")
        c = np.minimum(lo_r + fc, hi_r)
        c = _consistent(clock, np.maximum(c, cuts[-1]), trace.rank.astype(np.int64), nv)
        if not np.array_equal(c, cuts[-1]):
            cuts.append(c)
    if not np.array_equal(cuts[-1], hi_r):
        cuts.append(hi_r.copy())
    elif len(cuts) == 1:
        cuts.append(hi_r.copy())
    msg_row, msg_key, msg_b = _row_messages(trace, node, width)
    opts = {"first_calls": [list(map(int, f)) for f in first_calls]}
    return _build(trace, clock, np.vstack(cuts), node, width, 0.5, opts, msg_row, msg_key, msg_b)


def is_first_call(value, n_ranks: int | None = None) -> bool:
    """Whether ``value`` has the shape of a phase's ``first_call``: a list of non-negative ints, one per rank.

    Parameters
    ----------
    value : object
        A ``phases[k].first_call`` of a phases document.
    n_ranks : int, optional
        The rank count it must match (any length when None).

    Returns
    -------
    bool

    Examples
    --------
    >>> is_first_call([0, 3, 2], 3), is_first_call([0, True, 2]), is_first_call([0, -1]), is_first_call([0], 2)
    (True, False, False, False)
    """
    return (isinstance(value, list) and (n_ranks is None or len(value) == n_ranks)
            and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in value))


def phases_from_doc(doc, trace: Trace, topology=None, placement=None, *, where: str = "phases") -> Phases:
    """The phases of a ``topoplan phases -o`` document, re-cut on ``trace`` (the trace they were detected on).

    Each phase's ``first_call`` (per rank, its calls before the phase) gives the cuts; they must fit
    the trace (as many ranks, no rank cut past its last call, non-decreasing), and the trace's
    fingerprint must be the one the document records (``inputs``; a document without it is checked
    by its cuts only), else the document was made for another trace and is refused.

    Parameters
    ----------
    doc : dict
        The document (``Phases.to_dict()``; a ``phases --schedule`` document too).
    trace : Trace
    topology, placement : optional
        As for :func:`detect_phases`.
    where : str, optional
        How errors name the document (its file).

    Returns
    -------
    Phases

    Raises
    ------
    TopoplanError
        Naming ``where`` and the field.

    Examples
    --------
    >>> from topoplan.traffic.generators import neighbor2d, alltoall
    >>> tr = concat([neighbor2d(4, 4, 4e6, iters=3), alltoall(16, 1e6, iters=3)])
    >>> doc = detect_phases(tr).to_dict()
    >>> phases_from_doc(doc, tr).kinds()
    [0, 1]
    >>> phases_from_doc(doc, neighbor2d(4, 4, 4e6), where="p.json")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: p.json: field 'inputs': made for another trace (fingerprint ..., the one given has ...); the phases were detected on another trace
    """
    if not isinstance(doc, dict) or not isinstance(doc.get("phases"), list) or not doc["phases"]:
        raise TopoplanError(f"{where}: field 'phases': expected a non-empty list (the output of `topoplan phases -o`)")
    n = doc.get("n_ranks")
    if n is not None and n != trace.n_ranks:
        raise TopoplanError(f"{where}: field 'n_ranks': {n} ranks, the trace has {trace.n_ranks}; the phases were "
                            "detected on another trace")
    if doc.get("inputs") is not None:
        try:
            check_inputs(doc["inputs"], fingerprint(trace=trace), where)
        except TopoplanError as exc:
            raise TopoplanError(f"{exc}; the phases were detected on another trace") from None
    counts = np.diff(np.searchsorted(trace.rank, np.arange(trace.n_ranks + 1)))
    firsts, prev = [], np.zeros(trace.n_ranks, dtype=np.int64)
    for k, p in enumerate(doc["phases"]):
        f = f"{where}: field 'phases[{k}].first_call'"
        fc = p.get("first_call") if isinstance(p, dict) else None
        if not is_first_call(fc, trace.n_ranks):
            raise TopoplanError(f"{f}: expected {trace.n_ranks} non-negative call counts, one per rank")
        fc = np.asarray(fc, dtype=np.int64)
        over = np.flatnonzero(fc > counts)
        if over.size:
            r = int(over[0])
            raise TopoplanError(f"{f}: rank {r} has {int(fc[r])} calls before the phase but only {int(counts[r])} "
                                "in the trace; the phases were detected on another trace")
        back = np.flatnonzero(fc < prev)
        if back.size:
            raise TopoplanError(f"{f}: rank {int(back[0])} starts this phase before the previous one")
        if k == 0 and fc.any():
            raise TopoplanError(f"{f}: the first phase must start at every rank's first call")
        if k:
            firsts.append(fc.tolist())
        prev = fc
    return split_at(trace, firsts, topology, placement)


def concat(traces, source: str | None = None) -> Trace:
    """Traces of the same ranks one after another in time (communicator ids kept apart).

    Every rank's calls of trace ``k + 1`` start after the last call of trace ``k`` ends (on any
    rank), so replaying the result runs the traces in order; communicator ids of later traces are
    shifted past the earlier ones'.

    Parameters
    ----------
    traces : sequence of Trace
        With the same ``n_ranks``.
    source : str, optional
        Name of the result (default: the sources joined with ``+``).

    Returns
    -------
    Trace

    Raises
    ------
    TopoplanError
        For no traces or traces of different sizes.

    Examples
    --------
    >>> from topoplan.traffic.generators import neighbor2d, alltoall
    >>> t = concat([neighbor2d(2, 2, 1e6), alltoall(4, 1e6)])
    >>> t.n_ranks, t.op_counts(), t.source
    (4, {'isend': 8, 'irecv': 8, 'waitall': 4, 'alltoall': 4}, 'neighbor2d:rows=2,cols=2+alltoall:np=4')
    """
    traces = list(traces)
    if not traces:
        raise TopoplanError("field 'traces': nothing to concatenate")
    n = traces[0].n_ranks
    for k, t in enumerate(traces):
        if t.n_ranks != n:
            raise TopoplanError(f"field 'traces[{k}]': {t.n_ranks} ranks, the first trace has {n}")
    cols = {c: [] for c in ("rank", "op", "peer", "bytes", "root", "comm_size", "t_start", "t_end", "comm", "tag",
                            "req")}
    comms: dict = {}
    offset_t, offset_c = 0.0, 0
    for t in traces:
        t0 = float(t.t_start.min()) if len(t) else 0.0
        for c in cols:
            v = getattr(t, c)
            if c in ("t_start", "t_end"):
                v = v - t0 + offset_t
            elif c == "comm":
                v = np.where(v >= 0, v + offset_c, v)
            cols[c].append(v)
        for cid, members in t.communicators.items():
            comms[int(cid) + offset_c if cid >= 0 else int(cid)] = members
        if len(t):
            offset_t = float(cols["t_end"][-1].max())
        used = [int(c) for c in t.communicators if c >= 0] + [int(x) for x in np.unique(t.comm) if x >= 0]
        offset_c += max(used) + 1 if used else 0
    out = Trace(n_ranks=n, **{c: np.concatenate(v) for c, v in cols.items()}, communicators=comms,
                source=source or "+".join(t.source for t in traces))
    out._sort()
    out.validate()
    return out
