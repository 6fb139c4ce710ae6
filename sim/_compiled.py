"""Compiled code (Numba): the max-min solver's kernels and the event loop of :mod:`sim.maxmin` and :mod:`sim.replay`.

The solver kernels (:func:`_fill_slots` and the incremental link -> flow
lists ``_csc_*``) serve :class:`sim.maxmin.FlowEngine`'s ``"numba"`` solver.
:func:`run_core` runs flows that are known in advance (``simulate_flows``)
and, optionally, ranks that create flows as they run (the replay).

The Python reference (:class:`sim.replay.Replayer`) spends ~40 us per
message on objects, dictionaries and one engine call per event. Here the
trace is first compiled (by :func:`sim.replay.compile_program`, NumPy) into
a flat per-rank program of *micro-ops* (p2p calls, waits, one ``STEP`` per
step of a collective's MPICH schedule) with every message's route
segments precomputed per (node pair, size); then one compiled loop runs
ranks and flow events together, using the same solver kernels. The
semantics are the reference's; ``tests/test_sim_replay.py`` checks that
both give the same times.

Callers do not import this module for :func:`run_core`: :func:`sim._engine.run_core`
hands out the ahead-of-time build of it when that is current (no Numba
import, no cache load) and this module's otherwise.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from sim._engine import K_NOP, K_IRECV, K_ISEND, K_RECV, K_SEND, K_SENDRECV, K_STEP, K_WAIT, K_WAITALL  # noqa: F401

__all__ = ["run_core"]

_kernel = njit(cache=True, nogil=True, error_model="numpy")

# rows of the integer state tables
Q_RANK, Q_PEER, Q_TAG, Q_SEND, Q_DONE, Q_INBLK, Q_NEXT, Q_PNEXT = range(8)  # requests (next: open / posted lists)
M_SRC, M_DST, M_TAG, M_SREQ, M_RREQ, M_EAGER, M_ARRIVED, M_CLS, M_NEXT = range(9)   # messages
R_PC, R_BLOCKED, R_NWAIT, R_GAPDONE, R_OPEN_H, R_OPEN_T, R_POST_H, R_POST_T, R_UNX_H, R_UNX_T = range(10)  # ranks
C_Q, C_M, C_F, C_PEND, C_RDY, C_MSGS = range(6)                                       # counters


# --------------------------------------------------------------------------- max-min solver kernels


@_kernel
def _sift_down(hk, hv, hs, i):
    key, val = hk[i], hv[i]
    while True:
        c = 2 * i + 1
        if c >= hs:
            break
        if c + 1 < hs and hk[c + 1] < hk[c]:
            c += 1
        if hk[c] >= key:
            break
        hk[i] = hk[c]
        hv[i] = hv[c]
        i = c
    hk[i] = key
    hv[i] = val


# The compiled solver keeps, for every link, the list of slots (transferring flows) that
# cross it, in segments of one pool array, updated per started or ended flow, so a
# re-solve never rebuilds the incidence. ``seg`` rows: 0 segment start, 1 length,
# 2 capacity, 3 live links (length > 0), 4 position in the live list; ``meta``: pool end,
# number of live links. ``back[s, j]`` is the pool position of slot s's j-th link.


@_kernel
def _csc_link_of(rows, lens, back, t, l, pos):
    """Index j of slot t's entry on link l stored at pool position pos."""
    for j in range(lens[t]):
        if rows[t, j] == l and back[t, j] == pos:
            return j
    return -1


@_kernel
def _csc_append(l, s, j, back, seg, pool, meta):
    """Slot s's j-th link l: its entry at the end of l's segment (which has room), l live from its first."""
    start, length, live, live_pos = seg[0], seg[1], seg[3], seg[4]
    if length[l] == 0:
        live_pos[l] = meta[1]
        live[meta[1]] = l
        meta[1] += 1
    p = start[l] + length[l]
    pool[p] = s
    back[s, j] = p
    length[l] += 1


@_kernel
def _csc_insert(slots, rows, lens, back, seg, pool, meta):
    start, length, cap = seg[0], seg[1], seg[2]
    for s in slots:
        for j in range(lens[s]):
            l = rows[s, j]
            if length[l] == cap[l]:  # full: move the segment to the end of the pool, twice as big
                new = meta[0]
                for k in range(length[l]):
                    p = start[l] + k
                    t = pool[p]
                    back[t, _csc_link_of(rows, lens, back, t, l, p)] = new + k
                    pool[new + k] = t
                start[l] = new
                cap[l] = 2 * length[l] + 4
                meta[0] = new + cap[l]
            _csc_append(l, s, j, back, seg, pool, meta)


@_kernel
def _csc_remove(slots, rows, lens, back, seg, pool, meta):
    start, length, live, live_pos = seg[0], seg[1], seg[3], seg[4]
    for s in slots:
        for j in range(lens[s]):
            l = rows[s, j]
            p = back[s, j]
            last = start[l] + length[l] - 1
            if p != last:  # fill the hole with the segment's last entry
                t = pool[last]
                back[t, _csc_link_of(rows, lens, back, t, l, last)] = p
                pool[p] = t
            length[l] -= 1
            if length[l] == 0:
                meta[1] -= 1
                m = live[meta[1]]
                live[live_pos[l]] = m
                live_pos[m] = live_pos[l]


@_kernel
def _csc_rebuild(rows, lens, back, seg, pool, meta):
    """Lay all segments out again, each with room to grow by half (compaction)."""
    start, length, cap = seg[0], seg[1], seg[2]
    pos = 0
    for l in range(length.shape[0]):
        start[l] = pos
        cap[l] = length[l] + length[l] // 2 + 4 if length[l] else 0
        pos += cap[l]
        length[l] = 0
    meta[0] = pos
    meta[1] = 0
    for s in range(lens.shape[0]):
        for j in range(lens[s]):
            _csc_append(rows[s, j], s, j, back, seg, pool, meta)


@_kernel
def _fill_slots(rows, lens, act, n, fcap, lcap, seg, pool, meta, iw, fw, rate, rem_b, dt, now, fin):
    """Max-min rates of the transferring flows by sequential progressive filling.

    Slot ``s`` (one of the ``n`` used ones listed in ``act[:n]``) crosses links
    ``rows[s, :lens[s]]`` (``lens[s] == 0``: unused); ``fcap`` is its cap (fat pipes; inf if
    none), ``lcap`` the capacity per link (inf: not shared); ``seg``,
    ``pool`` and ``meta`` hold the link -> slots lists; ``iw`` (2 x links)
    and ``fw`` (2 x links) are scratch. Cost: O(nnz + levels log links).
    First brings the remaining bytes ``rem_b`` forward by ``dt`` at the old
    rates, then writes the new ``rate`` and the projected finish
    ``fin = now + rem_b / rate`` of the used slots; returns the earliest finish.
    """
    n_slots = lens.shape[0]
    start, length, live = seg[0], seg[1], seg[3]
    cnt, hv = iw[0], iw[1]
    rem, hk = fw[0], fw[1]
    inf = np.inf
    n_live = meta[1]
    # heap of link fair shares. Shares only grow as flows freeze, so a stale key is a
    # lower bound: refresh it when it reaches the top instead of pushing every change.
    hs = 0
    for t in range(n_live):
        l = live[t]
        cnt[l] = length[l]
        rem[l] = lcap[l]
        if rem[l] < inf:
            hk[hs] = rem[l] / cnt[l]
            hv[hs] = l
            hs += 1
    for i in range(hs // 2 - 1, -1, -1):
        _sift_down(hk, hv, hs, i)
    # fat-pipe caps act as private links: visit capped flows by increasing cap
    capped = np.empty(n, dtype=np.int64)
    ncap = 0
    for a in range(n):  # only used slots: the slot arrays may be much longer than the active set
        s = act[a]
        rem_b[s] -= rate[s] * dt  # the engine advances remaining bytes lazily
        if fcap[s] < inf:
            capped[ncap] = s
            ncap += 1
    corder = capped[:ncap][np.argsort(fcap[capped[:ncap]])]
    cp = 0
    frozen = np.zeros(n_slots, dtype=np.bool_)
    nfz = 0
    level = 0.0
    while nfz < n:
        link_level = inf
        while hs > 0:
            l = hv[0]
            if cnt[l] == 0:
                hs -= 1
                hk[0] = hk[hs]
                hv[0] = hv[hs]
                _sift_down(hk, hv, hs, 0)
                continue
            cur = rem[l] / cnt[l]
            if cur > hk[0]:
                hk[0] = cur
                _sift_down(hk, hv, hs, 0)
                continue
            link_level = cur
            break
        while cp < ncap and frozen[corder[cp]]:
            cp += 1
        cap_level = fcap[corder[cp]] if cp < ncap else inf
        if cap_level == inf and link_level == inf:  # no finite link left: unbounded
            for a in range(n):
                if not frozen[act[a]]:
                    rate[act[a]] = inf
            break
        by_cap = cap_level <= link_level
        level = max(level, min(cap_level, link_level))  # never down, whatever the rounding
        if by_cap:
            lo, hi = cp, cp + 1
        else:
            lo, hi = start[hv[0]], start[hv[0]] + length[hv[0]]
        for k in range(lo, hi):
            s = corder[k] if by_cap else pool[k]
            if frozen[s]:
                continue
            rate[s] = level
            frozen[s] = True
            nfz += 1
            for j in range(lens[s]):
                m = rows[s, j]
                rem[m] -= level
                cnt[m] -= 1
    for t in range(n_live):
        cnt[live[t]] = 0
    t_done = inf
    for a in range(n):
        s = act[a]
        fin[s] = now + rem_b[s] / rate[s]
        t_done = min(t_done, fin[s])
    return t_done


@_kernel
def _act_add(act, apos, n, slots):
    """Append ``slots`` to the used-slot list ``act[:n]`` (``apos``: position of a slot); returns the new n."""
    for s in slots:
        act[n] = s
        apos[s] = n
        n += 1
    return n


@_kernel
def _act_remove(act, apos, n, slots):
    """Remove ``slots`` from the used-slot list (swap with the last); returns the new n."""
    for s in slots:
        p = apos[s]
        n -= 1
        last = act[n]
        act[p] = last
        apos[last] = p
    return n


class _Incidence:
    """Link -> transferring-flow lists for the compiled solver, kept up to date per flow."""

    def __init__(self, n_links: int):
        self.seg = np.zeros((5, n_links), dtype=np.int64)
        self.pool = np.zeros(1024, dtype=np.int64)
        self.meta = np.zeros(2, dtype=np.int64)
        self.iw = np.zeros((2, n_links), dtype=np.int64)
        self.fw = np.zeros((2, n_links))
        self.nnz = 0

    def insert(self, slots, rows, lens, back) -> None:
        added = int(lens[slots].sum())
        # segments grow geometrically (to 2 length + 4): this batch needs at most `room` more
        room = 8 * (self.nnz + added) + 8 * self.seg.shape[1]
        if self.meta[0] + room > len(self.pool):
            # compact (to at most 1.5 nnz + 4 links), in a bigger pool if needed; the new slots go in below
            if 2 * room > len(self.pool):
                self.pool = np.zeros(2 * room, dtype=np.int64)
            old = lens.copy()
            old[slots] = 0
            _csc_rebuild(rows, old, back, self.seg, self.pool, self.meta)
        _csc_insert(slots, rows, lens, back, self.seg, self.pool, self.meta)
        self.nnz += added

    def remove(self, slots, rows, lens, back) -> None:
        _csc_remove(slots, rows, lens, back, self.seg, self.pool, self.meta)
        self.nnz -= int(lens[slots].sum())

    def fill(self, rows, lens, act, n, fcap, lcap, rate, rem_b, dt, now, fin) -> float:
        return _fill_slots(rows, lens, act, n, fcap, lcap, self.seg, self.pool, self.meta, self.iw, self.fw,
                           rate, rem_b, dt, now, fin)


# --------------------------------------------------------------------------- heaps of (time, id), ties by id


@njit(cache=True)
def _less(ht, hi, a, b):
    return ht[a] < ht[b] or (ht[a] == ht[b] and hi[a] < hi[b])


@njit(cache=True)
def _hpush(ht, hi, n, t, i):
    k = n
    ht[k] = t
    hi[k] = i
    while k > 0:
        p = (k - 1) // 2
        if not _less(ht, hi, k, p):
            break
        ht[k], ht[p] = ht[p], ht[k]
        hi[k], hi[p] = hi[p], hi[k]
        k = p
    return n + 1


@njit(cache=True)
def _hpop(ht, hi, n):
    """Drop the top (read it first); returns the new size."""
    n -= 1
    ht[0] = ht[n]
    hi[0] = hi[n]
    k = 0
    while True:
        c = 2 * k + 1
        if c >= n:
            break
        if c + 1 < n and _less(ht, hi, c + 1, c):
            c += 1
        if not _less(ht, hi, c, k):
            break
        ht[k], ht[c] = ht[c], ht[k]
        hi[k], hi[c] = hi[c], hi[k]
        k = c
    return n


# --------------------------------------------------------------------------- replay state machine


@njit(cache=True)
def _new_flow(m, s, size, t, now, FL, flow_size, seg_extra, seg_lat, pend_t, pend_f, C):
    """Segment ``s`` of message ``m`` starts at ``t``: its transfer after the route latency, as FlowEngine.add_flows."""
    f = C[C_F]
    C[C_F] += 1
    FL[0, f] = s
    FL[1, f] = m
    flow_size[f] = size
    C[C_PEND] = _hpush(pend_t, pend_f, C[C_PEND], max((t + seg_extra[s]) + seg_lat[s], now), f)


@njit(cache=True)
def _complete(q, t, Q, R, rdy_t, rdy_r, C):
    Q[Q_DONE, q] = 1
    if Q[Q_INBLK, q]:
        Q[Q_INBLK, q] = 0
        r = Q[Q_RANK, q]
        R[R_NWAIT, r] -= 1
        if R[R_NWAIT, r] == 0:
            C[C_RDY] = _hpush(rdy_t, rdy_r, C[C_RDY], t, r)


@njit(cache=True)
def _post(r, is_send, pr, x, tg, c, t, now, eager_B, Q, M, MF, R, FL, flow_size, cls_ptr, seg_extra, seg_lat,
          pend_t, pend_f, C):
    """Post one send or receive of rank ``r`` at time ``t`` (MPI matching); returns the request."""
    q = C[C_Q]
    C[C_Q] += 1
    Q[Q_RANK, q] = r
    Q[Q_PEER, q] = pr
    Q[Q_TAG, q] = tg
    Q[Q_SEND, q] = is_send
    if is_send:
        m = C[C_M]
        C[C_M] += 1
        C[C_MSGS] += 1
        M[M_SRC, m] = r
        M[M_DST, m] = pr
        M[M_TAG, m] = tg
        M[M_SREQ, m] = q
        eager = x < eager_B
        M[M_EAGER, m] = eager
        M[M_CLS, m] = c
        MF[0, m] = x
        MF[1, m] = t
        start = eager
        if eager:
            Q[Q_DONE, q] = 1
        # the earliest posted receive at pr that matches (tags < -1 are collectives': no wildcard)
        prev = -1
        rq = R[R_POST_H, pr]
        while rq >= 0:
            if (Q[Q_PEER, rq] == r or Q[Q_PEER, rq] == -1) and (
                    Q[Q_TAG, rq] == tg or (Q[Q_TAG, rq] == -1 and tg >= -1)):
                break
            prev = rq
            rq = Q[Q_PNEXT, rq]
        if rq >= 0:
            nx = Q[Q_PNEXT, rq]
            if prev < 0:
                R[R_POST_H, pr] = nx
            else:
                Q[Q_PNEXT, prev] = nx
            if R[R_POST_T, pr] == rq:
                R[R_POST_T, pr] = prev
            Q[Q_PNEXT, rq] = -1
            M[M_RREQ, m] = rq
            Q[Q_PEER, rq] = r
            start = True
        else:
            if R[R_UNX_T, pr] < 0:
                R[R_UNX_H, pr] = m
            else:
                M[M_NEXT, R[R_UNX_T, pr]] = m
            R[R_UNX_T, pr] = m
        if start:
            _new_flow(m, cls_ptr[c], x, t, now, FL, flow_size, seg_extra, seg_lat, pend_t, pend_f, C)
        return q
    # an unexpected message: the head of the exact (source, tag) queue, else the earliest sent wildcard match
    best = -1
    bprev = -1
    prev = -1
    mm = R[R_UNX_H, r]
    if pr >= 0:
        while mm >= 0:
            if M[M_SRC, mm] == pr and M[M_TAG, mm] == tg:
                best = mm
                bprev = prev
                break
            prev = mm
            mm = M[M_NEXT, mm]
    if best < 0 and (pr < 0 or tg == -1):
        prev = -1
        mm = R[R_UNX_H, r]
        while mm >= 0:
            if (pr < 0 or M[M_SRC, mm] == pr) and ((tg == -1 and M[M_TAG, mm] >= -1) or M[M_TAG, mm] == tg):
                if best < 0 or MF[1, mm] < MF[1, best]:
                    best = mm
                    bprev = prev
            prev = mm
            mm = M[M_NEXT, mm]
    if best < 0:
        if R[R_POST_T, r] < 0:
            R[R_POST_H, r] = q
        else:
            Q[Q_PNEXT, R[R_POST_T, r]] = q
        R[R_POST_T, r] = q
        return q
    nx = M[M_NEXT, best]
    if bprev < 0:
        R[R_UNX_H, r] = nx
    else:
        M[M_NEXT, bprev] = nx
    if R[R_UNX_T, r] == best:
        R[R_UNX_T, r] = bprev
    M[M_RREQ, best] = q
    Q[Q_PEER, q] = M[M_SRC, best]
    if M[M_EAGER, best]:
        if M[M_ARRIVED, best]:
            Q[Q_DONE, q] = 1   # the rank is running: no wake-up needed
    else:
        _new_flow(best, cls_ptr[M[M_CLS, best]], MF[0, best], t, now, FL, flow_size, seg_extra, seg_lat,
                  pend_t, pend_f, C)
    return q


@njit(cache=True)
def _block(r, reqs, k, Q, R):
    """Rank r waits on requests reqs[:k]; returns True when it must wait."""
    cnt = 0
    for j in range(k):
        q = reqs[j]
        if not Q[Q_DONE, q]:
            Q[Q_INBLK, q] = 1
            cnt += 1
    R[R_NWAIT, r] = cnt
    R[R_BLOCKED, r] = cnt > 0
    return cnt > 0


# --------------------------------------------------------------------------- the loop


@njit(cache=True)
def run_core(prog, route, lcap, eager_B, rel, init_seg, init_start, init_size):  # pragma: no cover - compiled
    """Run the flows and ranks to the end (or a deadlock).

    ``prog``: (lo, hi, kind, peer, nbytes, tag, reqkind, gap, cls, e_ptr, e_peer, e_bytes, e_send, e_cls,
    n_msgs, n_reqs), no ranks for a plain flow set; ``route``: (cls_ptr, seg_rows, seg_len, seg_extra,
    seg_lat, seg_cap, seg_inst) per route class and segment; ``init_*``: flows given in advance (segment,
    start, bytes), ids 0.. in that order. Returns (finish per rank, pc, blocked, n_messages, n_events,
    flow_seg, flow_size, flow_finish).
    """
    lo, hi, kind, peer, nbytes, tag, reqkind, gap, cls, e_ptr, e_peer, e_bytes, e_send, e_cls, n_msgs, n_reqs = prog
    cls_ptr, seg_rows, seg_len, seg_extra, seg_lat, seg_cap, seg_inst = route
    n = len(lo)
    n_links = len(lcap)
    width = seg_rows.shape[1]
    inf = np.inf
    C = np.zeros(6, np.int64)
    R = np.full((10, n), -1, np.int64)
    R[R_PC] = lo
    R[R_BLOCKED] = 0
    R[R_NWAIT] = 0
    clock = np.zeros(n)
    finish = np.full(n, np.nan)
    rdy_t = np.empty(n + 1)          # a rank is in the ready heap at most once
    rdy_r = np.empty(n + 1, np.int64)
    Q = np.zeros((8, n_reqs + 1), np.int64)
    Q[Q_NEXT] = -1
    Q[Q_PNEXT] = -1
    M = np.full((9, n_msgs + 1), -1, np.int64)
    M[M_ARRIVED] = 0
    MF = np.zeros((3, n_msgs + 1))
    max_seg = 1
    for c in range(len(cls_ptr) - 1):
        max_seg = max(max_seg, cls_ptr[c + 1] - cls_ptr[c])
    n_fmax = max_seg * n_msgs + len(init_seg) + 1
    FL = np.zeros((2, n_fmax), np.int64)
    flow_size = np.zeros(n_fmax)
    pend_t = np.empty(n_fmax)
    pend_f = np.empty(n_fmax, np.int64)
    flow_fin = np.full(n_fmax, np.nan)
    max_items = 2
    for i in range(len(kind)):
        max_items = max(max_items, e_ptr[i + 1] - e_ptr[i])
    reqs = np.empty(max_items, np.int64)
    # engine slots (transferring flows) and link -> slot lists, as in sim.maxmin.FlowEngine
    n_slots = 64
    sid = np.full(n_slots, -1, np.int64)
    rows = np.full((n_slots, width), -1, np.int64)
    back = np.zeros((n_slots, width), np.int64)
    lens = np.zeros(n_slots, np.int64)
    rem = np.zeros(n_slots)
    rate = np.zeros(n_slots)
    fin = np.full(n_slots, inf)
    scap = np.full(n_slots, inf)
    act = np.zeros(n_slots, np.int64)
    apos = np.zeros(n_slots, np.int64)
    free = np.empty(n_slots, np.int64)
    for k in range(n_slots):
        free[k] = n_slots - 1 - k          # popped from the end: low slots first
    n_free = n_slots
    segs = np.zeros((5, n_links), np.int64)
    pool = np.zeros(1024, np.int64)
    meta = np.zeros(2, np.int64)
    iw = np.zeros((2, n_links), np.int64)
    fw = np.zeros((2, n_links))
    nnz = 0
    n_act = 0
    dirty = False
    t_done = inf
    now = 0.0
    t_rem = 0.0
    n_events = 0
    fbuf = np.empty(64, np.int64)
    sbuf = np.empty(64, np.int64)
    for r in range(n):
        C[C_RDY] = _hpush(rdy_t, rdy_r, C[C_RDY], 0.0, r)
    for j in range(len(init_seg)):
        _new_flow(-1, init_seg[j], init_size[j], init_start[j], 0.0, FL, flow_size, seg_extra, seg_lat,
                  pend_t, pend_f, C)

    while True:
        if dirty:
            dirty = False
            if n_act == 0:
                t_done = inf
            else:
                t_done = _fill_slots(rows, lens, act, n_act, scap, lcap, segs, pool, meta, iw, fw, rate, rem,
                                     now - t_rem, now, fin)
                t_rem = now
        t_flow = t_done
        if C[C_PEND] > 0 and pend_t[0] < t_done:
            t_flow = pend_t[0]
        t_rank = rdy_t[0] if C[C_RDY] > 0 else inf
        if t_rank == inf and t_flow == inf:
            break
        if t_rank <= t_flow:
            if t_rank > now:
                now = t_rank
            while C[C_RDY] > 0 and rdy_t[0] <= t_rank:   # each rank runs until it blocks, computes or ends
                r = rdy_r[0]
                clock[r] = rdy_t[0]
                C[C_RDY] = _hpop(rdy_t, rdy_r, C[C_RDY])
                R[R_BLOCKED, r] = 0
                while True:
                    i = R[R_PC, r]
                    if i >= hi[r]:
                        if np.isnan(finish[r]):
                            finish[r] = clock[r]
                        break
                    g = gap[i]
                    if g > 0 and R[R_GAPDONE, r] != i:
                        R[R_GAPDONE, r] = i
                        C[C_RDY] = _hpush(rdy_t, rdy_r, C[C_RDY], clock[r] + g, r)
                        break
                    R[R_PC, r] = i + 1
                    t = clock[r]
                    k = kind[i]
                    nq = 0
                    if k == K_SEND or k == K_RECV or k == K_ISEND or k == K_IRECV:
                        q = _post(r, k == K_SEND or k == K_ISEND, peer[i], nbytes[i], tag[i], cls[i], t, now,
                                  eager_B, Q, M, MF, R, FL, flow_size, cls_ptr, seg_extra, seg_lat, pend_t, pend_f, C)
                        if k == K_SEND or k == K_RECV:
                            reqs[0] = q
                            nq = 1
                        else:  # open request, for a later wait
                            if R[R_OPEN_T, r] < 0:
                                R[R_OPEN_H, r] = q
                            else:
                                Q[Q_NEXT, R[R_OPEN_T, r]] = q
                            R[R_OPEN_T, r] = q
                    elif k == K_SENDRECV:
                        reqs[0] = _post(r, True, peer[i], nbytes[i], tag[i], cls[i], t, now, eager_B, Q, M, MF, R,
                                        FL, flow_size, cls_ptr, seg_extra, seg_lat, pend_t, pend_f, C)
                        reqs[1] = _post(r, False, -1, nbytes[i], tag[i], -1, t, now, eager_B, Q, M, MF, R,
                                        FL, flow_size, cls_ptr, seg_extra, seg_lat, pend_t, pend_f, C)
                        nq = 2
                    elif k == K_STEP:  # receives first, then sends, then wait for all
                        for e in range(e_ptr[i], e_ptr[i + 1]):
                            reqs[nq] = _post(r, e_send[e] == 1, e_peer[e], e_bytes[e], tag[i], e_cls[e], t, now,
                                             eager_B, Q, M, MF, R, FL, flow_size, cls_ptr, seg_extra, seg_lat,
                                             pend_t, pend_f, C)
                            nq += 1
                    elif k == K_WAIT or k == K_WAITALL:
                        wp = peer[i] if k == K_WAIT else -1
                        wk = reqkind[i] if k == K_WAIT else -1
                        prev = -1
                        q = R[R_OPEN_H, r]
                        while q >= 0 and k == K_WAIT:
                            if (wp < 0 or Q[Q_PEER, q] == wp) and (wk < 0 or Q[Q_SEND, q] == (wk != 0)):
                                break
                            prev = q
                            q = Q[Q_NEXT, q]
                        if k == K_WAIT and q >= 0:  # that one request
                            nx = Q[Q_NEXT, q]
                            if prev < 0:
                                R[R_OPEN_H, r] = nx
                            else:
                                Q[Q_NEXT, prev] = nx
                            if R[R_OPEN_T, r] == q:
                                R[R_OPEN_T, r] = prev
                            Q[Q_NEXT, q] = -1
                            reqs[0] = q
                            nq = 1
                        elif wp < 0:  # waitall, or a wait on any request when none matched: all open ones
                            cnt = 0
                            q = R[R_OPEN_H, r]
                            while q >= 0:
                                nx = Q[Q_NEXT, q]
                                Q[Q_NEXT, q] = -1
                                if not Q[Q_DONE, q]:
                                    Q[Q_INBLK, q] = 1
                                    cnt += 1
                                q = nx
                            R[R_OPEN_H, r] = -1
                            R[R_OPEN_T, r] = -1
                            R[R_NWAIT, r] = cnt
                            if cnt > 0:
                                R[R_BLOCKED, r] = 1
                                break
                    if nq > 0 and _block(r, reqs, nq, Q, R):
                        break
        else:
            # one engine event: completions and starts within rel of t (FlowEngine.run_until_next_event)
            t = max(t_flow, now)
            now = t
            horizon = t + rel * abs(t)
            nfin = 0
            if t_done <= horizon:
                ns = 0
                for a in range(n_act):
                    s = act[a]
                    if fin[s] <= horizon:
                        if ns == len(sbuf):
                            sbuf = np.concatenate((sbuf, np.empty(ns, np.int64)))
                        sbuf[ns] = s
                        ns += 1
                sbuf[:ns].sort()  # ascending slots, as FlowEngine frees them
                _csc_remove(sbuf[:ns], rows, lens, back, segs, pool, meta)
                n_act = _act_remove(act, apos, n_act, sbuf[:ns])
                for j in range(ns):
                    s = sbuf[j]
                    nnz -= lens[s]
                    if nfin == len(fbuf):
                        fbuf = np.concatenate((fbuf, np.empty(nfin, np.int64)))
                    fbuf[nfin] = sid[s]
                    nfin += 1
                    sid[s] = -1
                    lens[s] = 0
                    rate[s] = 0.0
                    rem[s] = 0.0
                    fin[s] = inf
                    free[n_free] = s
                    n_free += 1
                dirty = True
            ns = 0
            while C[C_PEND] > 0 and pend_t[0] <= horizon:
                f = pend_f[0]
                C[C_PEND] = _hpop(pend_t, pend_f, C[C_PEND])
                if flow_size[f] == 0 or seg_inst[FL[0, f]]:
                    if nfin == len(fbuf):
                        fbuf = np.concatenate((fbuf, np.empty(nfin, np.int64)))
                    fbuf[nfin] = f
                    nfin += 1
                    continue
                if n_free == 0:  # more slots, as FlowEngine._more_slots
                    old = len(lens)
                    new = 2 * old
                    grow = new - old
                    sid = np.concatenate((sid, np.full(grow, -1, np.int64)))
                    rows = np.concatenate((rows, np.full((grow, width), -1, np.int64)))
                    back = np.concatenate((back, np.zeros((grow, width), np.int64)))
                    lens = np.concatenate((lens, np.zeros(grow, np.int64)))
                    rem = np.concatenate((rem, np.zeros(grow)))
                    rate = np.concatenate((rate, np.zeros(grow)))
                    fin = np.concatenate((fin, np.full(grow, inf)))
                    scap = np.concatenate((scap, np.full(grow, inf)))
                    act = np.concatenate((act, np.zeros(grow, np.int64)))
                    apos = np.concatenate((apos, np.zeros(grow, np.int64)))
                    free = np.empty(new, np.int64)
                    for j in range(grow):
                        free[j] = new - 1 - j
                    n_free = grow
                s = free[n_free - 1]
                n_free -= 1
                sg = FL[0, f]
                L = seg_len[sg]
                rows[s, :L] = seg_rows[sg, :L]
                lens[s] = L
                sid[s] = f
                rem[s] = flow_size[f]
                scap[s] = seg_cap[sg]
                if ns == len(sbuf):
                    sbuf = np.concatenate((sbuf, np.empty(ns, np.int64)))
                sbuf[ns] = s
                ns += 1
            if ns > 0:
                added = 0
                for j in range(ns):
                    added += lens[sbuf[j]]
                room = 8 * (nnz + added) + 8 * n_links
                if meta[0] + room > len(pool):  # compact the link lists, in a bigger pool if needed
                    if 2 * room > len(pool):
                        pool = np.zeros(2 * room, np.int64)
                    old_lens = lens.copy()
                    for j in range(ns):
                        old_lens[sbuf[j]] = 0
                    _csc_rebuild(rows, old_lens, back, segs, pool, meta)
                _csc_insert(sbuf[:ns], rows, lens, back, segs, pool, meta)
                nnz += added
                n_act = _act_add(act, apos, n_act, sbuf[:ns])
                dirty = True
            n_events += 1
            if nfin > 0:
                done = np.sort(fbuf[:nfin])
                for j in range(nfin):
                    f = done[j]
                    flow_fin[f] = t
                    sg = FL[0, f]
                    m = FL[1, f]
                    if m < 0:  # a flow given in advance
                        continue
                    c = M[M_CLS, m]
                    if sg + 1 < cls_ptr[c + 1]:  # a relay node forwards the whole message
                        _new_flow(m, sg + 1, MF[0, m], t, now, FL, flow_size, seg_extra, seg_lat, pend_t, pend_f, C)
                        continue
                    M[M_ARRIVED, m] = 1
                    MF[2, m] = t
                    if not M[M_EAGER, m]:
                        _complete(M[M_SREQ, m], t, Q, R, rdy_t, rdy_r, C)
                    if M[M_RREQ, m] >= 0:
                        _complete(M[M_RREQ, m], t, Q, R, rdy_t, rdy_r, C)
    nf = C[C_F]
    return (finish, R[R_PC].copy(), R[R_BLOCKED].copy(), C[C_MSGS], n_events, FL[0, :nf].copy(),
            flow_size[:nf].copy(), flow_fin[:nf].copy())
