"""The compiled event loop (Numba): flows and ranks run together, no Python per event.

:func:`run_core` runs flows that are known in advance (``simulate_flows``) and, optionally, ranks that
create flows as they run (the replay), with max-min rates per bottleneck link (:mod:`topoplan.sim._flows`).

The Python reference (:class:`topoplan.sim.reference.Replayer`) spends ~40 us per
message on objects, dictionaries and one engine call per event. Here the
trace is first compiled (by :func:`topoplan.sim.compiler.compile_program`, NumPy) into
a flat per-rank program of *micro-ops* (:mod:`topoplan.sim.program`: p2p calls, waits, one ``STEP`` per
step of a collective's MPICH schedule, or one ``GEN`` for a whole alltoall
whose steps the loop generates, see "streamed collectives") with every
message's route segments precomputed per (node pair, size), a streamed
message's composed when it is sent; then one compiled loop runs ranks and
flow events together, holding only what is in flight. The
semantics are the reference's; ``tests/test_sim_replay.py`` checks that
both give the same times.

Numba's on-disk cache of these functions is stamped with every source of the compiled simulator
(:mod:`topoplan.sim._jit`), so an edit of a kernel or of the program format recompiles the loop.

Callers do not import this module for :func:`run_core`: :func:`topoplan.sim._engine.run_core`
hands out the ahead-of-time build of it when that is current (no Numba
import, no cache load) and this module's otherwise.
"""

from __future__ import annotations

import numpy as np

from topoplan.sim._flows import (EM_LIVE, G_ELEN, csc_insert, csc_rebuild, csc_remove, ending, entry_room,
                                 fill_groups, fits, join, link_bytes_at, new_state, pick_group, pool_need)
from topoplan.sim._jit import kernel as _kernel
from topoplan.sim._jit import leaf_py as _leaf_py
from topoplan.sim._jit import loop as _loop_jit
from topoplan.sim.program import (GEN_PAIRWISE, GEN_RING, GEN_SPREAD, GN_ALG, GN_BLOCK, GN_ME, GN_MEM, GN_P, K_GEN,
                                  K_IRECV, K_ISEND, K_RECV, K_SEND, K_SENDRECV, K_STEP, K_WAIT, K_WAITALL, R_BLOCKED,
                                  R_GAPDONE, R_HELD, R_NWAIT, R_OPEN_H, R_OPEN_T, R_PC, R_POST_H, R_POST_T, R_STEP,
                                  R_UNX_H, R_UNX_T)

__all__ = ["run_core"]

# rows of the integer state tables
Q_RANK, Q_PEER, Q_TAG, Q_SEND, Q_DONE, Q_INBLK, Q_NEXT, Q_PNEXT = range(8)  # requests (next: open / posted lists)
M_SRC, M_DST, M_TAG, M_SREQ, M_RREQ, M_EAGER, M_ARRIVED, M_CLS, M_NEXT = range(9)   # messages
C_QFREE, C_MFREE, C_F, C_PEND, C_RDY, C_MSGS, C_FMASK, C_NSEG = range(8)              # counters
C_NNZ, C_NACT, C_DIRTY, C_NEV, C_NFREE, C_FLO, C_RESUME, C_TLK = range(8, 16)          # _loop's saved state
S_NOW, S_TDONE, S_TBATCH = range(3)


# --------------------------------------------------------------------------- heaps of (time, id), ties by id


@_leaf_py
def _less(ht, hi, a, b):
    return ht[a] < ht[b] or (ht[a] == ht[b] and hi[a] < hi[b])


@_leaf_py
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


@_leaf_py
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


@_leaf_py
def _new_flow(m, s, size, t, now, FL, flow_size, live, seg_rows, seg_len, seg_extra, seg_lat, lbytes, pend_t, pend_f,
              C):
    """Segment ``s`` of message ``m`` starts at ``t``: its transfer after the route latency, as FlowEngine.add_flows.

    Flow ids count up; a flow's state lives at ``id & C[C_FMASK]`` of the flow ring (the caller makes
    room). Its bytes are added to every link of its route.
    """
    f = C[C_F]
    C[C_F] += 1
    k = f & C[C_FMASK]
    FL[0, k] = s
    FL[1, k] = m
    flow_size[k] = size
    live[k] = 1
    for j in range(seg_len[s]):
        lbytes[seg_rows[s, j]] += size
    C[C_PEND] = _hpush(pend_t, pend_f, C[C_PEND], max((t + seg_extra[s]) + seg_lat[s], now), f)


@_leaf_py
def _free_reqs(q, Q, qfree, C):
    """Return the requests chained from ``q`` (through ``Q_NEXT``) to the free list."""
    while q >= 0:
        nx = Q[Q_NEXT, q]
        qfree[C[C_QFREE]] = q
        C[C_QFREE] += 1
        q = nx


@_kernel
def _more_free(free, C, k, old):
    """Free list ``free`` (``C[k]`` entries) with the slots ``old..2 old - 1`` added, low ones popped first."""
    nf = np.empty(2 * old, np.int64)
    n = C[k]
    nf[:n] = free[:n]
    for j in range(old):
        nf[n + j] = 2 * old - 1 - j
    C[k] = n + old
    return nf


@_kernel
def _grow_requests(Q, qfree, C):
    """Twice the request slots (a table full of live requests)."""
    old = Q.shape[1]
    Q2 = np.zeros((Q.shape[0], 2 * old), np.int64)
    Q2[:, :old] = Q
    return Q2, _more_free(qfree, C, C_QFREE, old)


@_kernel
def _grow_messages(M, MF, mfree, C):
    """Twice the message slots."""
    old = M.shape[1]
    M2 = np.full((M.shape[0], 2 * old), -1, np.int64)
    M2[:, :old] = M
    MF2 = np.zeros((MF.shape[0], 2 * old))
    MF2[:, :old] = MF
    return M2, MF2, _more_free(mfree, C, C_MFREE, old)


@_leaf_py
def _op_room(max_items):
    """Requests, messages and flow ids one micro-op may take: its items (at most ``max_items``, the most
    of any micro-op) and two to spare."""
    return max_items + 2


@_leaf_py
def _event_room(max_items, n_act, pending):
    """Flow ids an engine event may need: a micro-op's, plus one per flow that may end or start.

    :func:`_loop` stops when the ring has less and :func:`run_core` grows it
    to this: both must ask for the same.
    """
    return _op_room(max_items) + n_act + pending


@_leaf_py
def _ring_lo(f_lo, k, C, live, cap):
    """The lowest flow id that may be live, moved past ended flows when ``k`` more ids would not fit in the
    ring of ``cap`` (every live id is in ``f_lo..C[C_F]``)."""
    if C[C_F] + k - f_lo > cap:
        while f_lo < C[C_F] and live[f_lo & C[C_FMASK]] == 0:
            f_lo += 1
    return f_lo


@_kernel
def _grow_flows(FL, flow_size, live, pend_t, pend_f, C, f_lo):
    """Twice the flow ring: the live flows of ids ``f_lo..`` move to their places under the new mask."""
    old = len(flow_size)
    om, nm = old - 1, 2 * old - 1
    FL2 = np.zeros((2, 2 * old), np.int64)
    fs2 = np.zeros(2 * old)
    live2 = np.zeros(2 * old, np.uint8)
    for f in range(f_lo, C[C_F]):
        a = f & om
        if live[a]:
            b = f & nm
            FL2[0, b] = FL[0, a]
            FL2[1, b] = FL[1, a]
            fs2[b] = flow_size[a]
            live2[b] = 1
    pt = np.empty(2 * old)
    pf = np.empty(2 * old, np.int64)
    n = C[C_PEND]
    pt[:n] = pend_t[:n]
    pf[:n] = pend_f[:n]
    C[C_FMASK] = nm
    return FL2, fs2, live2, pt, pf


@_leaf_py
def _complete(q, t, Q, R, rdy_t, rdy_r, C):
    Q[Q_DONE, q] = 1
    if Q[Q_INBLK, q]:
        Q[Q_INBLK, q] = 0
        r = Q[Q_RANK, q]
        R[R_NWAIT, r] -= 1
        if R[R_NWAIT, r] == 0:
            C[C_RDY] = _hpush(rdy_t, rdy_r, C[C_RDY], t, r)


@_leaf_py
def _post(r, is_send, pr, x, tg, c, t, now, eager_B, Q, qfree, M, MF, mfree, R, FL, flow_size, live, cls_ptr,
          seg_rows, seg_len, seg_extra, seg_lat, lbytes, pend_t, pend_f, C):
    """Post one send or receive of rank ``r`` at time ``t`` (MPI matching); returns the request.

    Requests and messages take slots from free lists (the caller makes room): a message's slot returns
    when it has arrived and been matched, a request's when its rank has waited on it. A send of class
    ``c = -1`` (a streamed collective's) has its route in segment ``C[C_NSEG]`` + its slot, written by the
    caller for the slot the free list hands out next.
    """
    C[C_QFREE] -= 1
    q = qfree[C[C_QFREE]]
    Q[Q_RANK, q] = r
    Q[Q_PEER, q] = pr
    Q[Q_TAG, q] = tg
    Q[Q_SEND, q] = is_send
    Q[Q_DONE, q] = 0
    Q[Q_INBLK, q] = 0
    Q[Q_NEXT, q] = -1
    Q[Q_PNEXT, q] = -1
    if is_send:
        C[C_MFREE] -= 1
        m = mfree[C[C_MFREE]]
        C[C_MSGS] += 1
        M[M_SRC, m] = r
        M[M_DST, m] = pr
        M[M_TAG, m] = tg
        M[M_SREQ, m] = q
        M[M_RREQ, m] = -1
        M[M_ARRIVED, m] = 0
        M[M_NEXT, m] = -1
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
        if start:   # a streamed collective's message (no class) has the segment of its slot
            _new_flow(m, cls_ptr[c] if c >= 0 else C[C_NSEG] + m, x, t, now, FL, flow_size, live, seg_rows, seg_len,
                      seg_extra, seg_lat, lbytes, pend_t, pend_f, C)
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
            mfree[C[C_MFREE]] = best
            C[C_MFREE] += 1
    else:
        c = M[M_CLS, best]
        _new_flow(best, cls_ptr[c] if c >= 0 else C[C_NSEG] + best, MF[0, best], t, now, FL, flow_size, live,
                  seg_rows, seg_len, seg_extra, seg_lat, lbytes, pend_t, pend_f, C)
    return q


@_leaf_py
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


# --------------------------------------------------------------------------- streamed collectives
# An alltoall of N ranks is N(N - 1) messages; materialized (one STEP micro-op per step, a route class per
# node pair) it outgrows memory at a few thousand ranks. A ``GEN`` micro-op instead generates its steps as
# the rank reaches them (MPICH's pairwise exchange or batched isend/irecv, as
# :mod:`topoplan.traffic.collectives` writes them; ``tests/test_sim_stream.py`` checks every entry against
# it), and each of its messages gets its route (composed from :meth:`topoplan.sim.network.Network.route_parts`) and
# timing in a segment slot of its own, ``n_static + message slot``, free again when the message is.



@_leaf_py
def _gen_count(alg, p, block):
    """Steps of a generated alltoall of ``p`` ranks."""
    if alg == GEN_PAIRWISE or alg == GEN_RING:
        return p - 1
    return (p + block - 1) // block


@_leaf_py
def _gen_step(alg, p, me, st, n, block, mem, off, ep, eb, es):
    """Entries (world peer, bytes, is_send) of step ``st`` of local rank ``me``, receives first; returns
    their number. Pairwise: partner ``me ^ i`` on a power of two, else receive from ``me - i`` and send to
    ``me + i``; spread: batches of ``block`` receives from ``me + i`` and sends to ``me - i``; ring
    (allgather of ``n`` bytes a rank): receive from ``me - 1``, send to ``me + 1``, ``p - 1`` times."""
    k = 0
    if alg == GEN_RING:   # allgather: receive from the left, send to the right
        ep[0] = mem[off + (me - 1) % p]
        eb[0] = n
        es[0] = 0
        ep[1] = mem[off + (me + 1) % p]
        eb[1] = n
        es[1] = 1
        return 2
    if alg == GEN_PAIRWISE:
        i = st + 1
        if p & (p - 1) == 0:
            src = me ^ i
            dst = src
        else:
            src = (me - i) % p
            dst = (me + i) % p
        ep[0] = mem[off + src]
        eb[0] = n
        es[0] = 0
        ep[1] = mem[off + dst]
        eb[1] = n
        es[1] = 1
        return 2
    ii = st * block
    ss = min(block, p - ii)
    if n != 0:
        for i in range(ss):
            src = (me + i + ii) % p
            if src != me:
                ep[k] = mem[off + src]
                eb[k] = n
                es[k] = 0
                k += 1
    for i in range(ss):
        dst = (me - i - ii) % p
        if dst != me:
            ep[k] = mem[off + dst]
            eb[k] = n
            es[k] = 1
            k += 1
    return k


@_leaf_py
def _dyn_seg(j, sn, dn, size, seg_rows, seg_len, seg_extra, seg_lat, seg_inst, seg_vl, psw, pup, pdown, pintra,
             mid_ptr, mid_links, lk_lat, lk_bw, lk_swin, lk_shared, consts, caps, n_links, n_sw):
    """Segment ``j``: the packet route from node ``sn`` to ``dn`` of a message of ``size`` bytes, with the
    latency terms of :meth:`topoplan.sim.network.Network.route_latency` summed in the same order (so the times equal a
    route class's to the bit), its fat-pipe cap's virtual link and whether it is instantaneous."""
    L = 0
    if sn == dn:
        seg_rows[j, 0] = pintra[sn]
        L = 1
    else:
        seg_rows[j, 0] = pup[sn]
        L = 1
        a = psw[sn]
        b = psw[dn]
        if a != b:
            pr = a * n_sw + b
            for x in range(mid_ptr[pr], mid_ptr[pr + 1]):
                seg_rows[j, L] = mid_links[x]
                L += 1
        seg_rows[j, L] = pdown[dn]
        L += 1
    seg_len[j] = L
    lat = 0.0
    swin = 0.0
    sf = 0.0
    cap = np.inf
    slow = np.inf
    delay, mtu, chunk = consts[0], consts[1], consts[2]
    for x in range(L):
        lk = seg_rows[j, x]
        lat += lk_lat[lk]
        swin += lk_swin[lk]
        if x == 0:
            sf += 0.0
        else:
            unit = chunk if lk_swin[seg_rows[j, x - 1]] == 0 else mtu
            sf += min(size, unit) / lk_bw[lk]
        if not lk_shared[lk]:
            cap = min(cap, lk_bw[lk])
        slow = min(slow, lk_bw[lk])
    seg_lat[j] = lat
    seg_extra[j] = ((lat + swin * delay) + sf) - lat
    seg_inst[j] = not np.isfinite(slow)
    seg_vl[j] = -1
    if np.isfinite(cap):
        seg_vl[j] = n_links + np.searchsorted(caps, cap)


@_kernel
def _grow_slots(sid, rows, back, lens, sgrp, stag, hp, free, C, need):
    """Engine slots for ``need`` more flows than there are free (doubling). The new slots go under the free
    ones in the stack, so slots are handed out in the order growing on exhaustion would give (low first)."""
    old = len(lens)
    new = 2 * old
    while new - old + C[C_NFREE] < need:
        new *= 2
    grow = new - old
    width = rows.shape[1]
    sid = np.concatenate((sid, np.full(grow, -1, np.int64)))
    rows = np.concatenate((rows, np.full((grow, width), -1, np.int64)))
    back = np.concatenate((back, np.zeros((grow, width), np.int64)))
    lens = np.concatenate((lens, np.zeros(grow, np.int64)))
    sgrp = np.concatenate((sgrp, np.full(grow, -1, np.int64)))
    stag = np.concatenate((stag, np.zeros(grow)))
    hp = np.concatenate((hp, np.full((grow, 3), -1, np.int64)))
    n = C[C_NFREE]
    fr = np.empty(new, np.int64)
    for j in range(grow):
        fr[j] = new - 1 - j
    fr[grow:grow + n] = free[:n]
    C[C_NFREE] = n + grow
    return sid, rows, back, lens, sgrp, stag, hp, fr


@_kernel
def _more_cols(a, cols):
    """``a`` (2-D float) widened to ``cols`` columns, the new ones 0."""
    out = np.zeros((a.shape[0], cols))
    out[:, :a.shape[1]] = a
    return out


@_kernel
def _grow_segs(seg_rows, seg_len, seg_extra, seg_lat, seg_inst, seg_vl, n_new, width):
    """The segment tables with ``n_new`` rows of ``width`` links (the new ones empty)."""
    old = len(seg_len)
    rows = np.full((n_new, width), -1, np.int64)
    rows[:old, :seg_rows.shape[1]] = seg_rows
    ln = np.zeros(n_new, np.int64)
    ln[:old] = seg_len
    ex = np.zeros(n_new)
    ex[:old] = seg_extra
    la = np.zeros(n_new)
    la[:old] = seg_lat
    ins = np.zeros(n_new, np.bool_)
    ins[:old] = seg_inst
    vl = np.full(n_new, -1, np.int64)
    vl[:old] = seg_vl
    return rows, ln, ex, la, ins, vl


# --------------------------------------------------------------------------- the loop


@_loop_jit
def _loop(prog, seg, stream, lcap2, capv, caps, eager_B, rel, dims, C, S, R, clock, finish, rdy_t, rdy_r, Q, qfree,
          M, MF, mfree, FL, flow_size, live, pend_t, pend_f, init_fin, lbytes, reqs, g_peer, g_bytes, g_send, sid,
          rows, back, lens, sgrp, stag, hp, free, segs, pool, meta, iw, fw, gI, gF, agl, gm, EP, HT, em, gbuf, fbuf,
          sbuf, tl_dt, tl, mark_op, mark_ptr, mcur, mark_t, more):  # pragma: no cover - compiled
    """:func:`run_core`'s event loop, from the state in ``C``/``S`` to the end (status 0), or until a
    micro-op or an event needs more request, message or flow slots than there are (status 1: the state is
    saved, :func:`run_core` makes room and calls again; a rank stopped mid-batch resumes first), or until a
    rank ``r`` with ``more[r]`` set reaches the end of its micro-ops (status 2: its next calls are in the
    trace's next piece; it resumes first once they are loaded). The tables it may reallocate itself are
    returned. No table is reassigned in the loop that the caller grows: a loop that may rebind an array
    variable pays reference counting on every iteration."""
    lo, hi, kind, peer, nbytes, tag, reqkind, gap, cls, e_ptr, e_peer, e_bytes, e_send, e_cls, n_msgs, n_reqs = prog
    cls_ptr, seg_rows, seg_len, seg_extra, seg_lat, seg_inst, seg_vl = seg
    gen, mem, node, parts, lk_lat, lk_bw, lk_swin, lk_shared, consts, xcaps = stream
    psw, pup, pdown, pintra, mid_ptr, mid_links = parts
    n_links, n_static, n_sw, max_items, width = dims[0], dims[1], dims[2], dims[3], dims[4]
    inf = np.inf
    nnz = C[C_NNZ]
    n_act = C[C_NACT]
    dirty = C[C_DIRTY] != 0
    n_events = C[C_NEV]
    n_free = C[C_NFREE]
    f_lo = C[C_FLO]
    resume = C[C_RESUME]
    now = S[S_NOW]
    t_done = S[S_TDONE]
    t_batch = S[S_TBATCH]
    status = 0
    while True:
        # room for this event's flows: ids in the ring, engine slots and buffers for all that may start or end
        room = _event_room(max_items, n_act, C[C_PEND])
        f_lo = _ring_lo(f_lo, room, C, live, len(flow_size))
        if C[C_F] + room - f_lo > len(flow_size):
            status = 1
            break
        if n_free < C[C_PEND] or len(fbuf) < n_act + C[C_PEND] or len(sbuf) < max(n_act, C[C_PEND]):
            status = 1
            break
        if dirty:
            dirty = False
            if n_act == 0:
                t_done = inf
            else:
                while True:
                    t_done, need = fill_groups(now, n_links, lcap2, capv, rows, lens, sgrp, stag, hp, segs, pool,
                                               meta, iw, fw, gI, gF, agl, gm, EP, HT, em)
                    if need == 0:
                        break
                    EP, HT = entry_room(em[EM_LIVE] + need, pool_need(gI[:, G_ELEN].max(), need), EP, HT, gI, agl, gm, em)
        t_flow = t_done
        if C[C_PEND] > 0 and pend_t[0] < t_done:
            t_flow = pend_t[0]
        t_rank = rdy_t[0] if C[C_RDY] > 0 else inf
        if resume >= 0:   # back from making room: the same batch, its rank first
            t_rank = t_batch
        if t_rank == inf and t_flow == inf:
            break
        if tl_dt > 0:   # the utilization timeline: a sample at each interval boundary the clock is to pass
            t_next = t_rank if t_rank <= t_flow else max(t_flow, now)
            k = C[C_TLK]
            while k * tl_dt <= t_next:
                if k == tl.shape[1]:   # run_core makes room (nothing of this step has been done yet)
                    status = 1
                    break
                link_bytes_at(k * tl_dt, k, tl, n_links, fw, gI, gF, agl, gm, EP)
                k += 1
            C[C_TLK] = k
            if status:
                break
        if t_rank <= t_flow:
            if t_rank > now:
                now = t_rank
            while resume >= 0 or (C[C_RDY] > 0 and rdy_t[0] <= t_rank):   # each rank runs until it blocks...
                if resume >= 0:
                    r = resume
                    resume = -1
                else:
                    r = rdy_r[0]
                    clock[r] = rdy_t[0]
                    C[C_RDY] = _hpop(rdy_t, rdy_r, C[C_RDY])
                    R[R_BLOCKED, r] = 0
                    if R[R_HELD, r] >= 0:   # the requests it waited on
                        _free_reqs(R[R_HELD, r], Q, qfree, C)
                        R[R_HELD, r] = -1
                while True:
                    i = R[R_PC, r]
                    if R[R_STEP, r] > 0:   # the next step of a streamed collective
                        i -= 1
                    p = mcur[r]
                    if p < mark_ptr[r + 1] and mark_op[p] <= i:   # marked calls it has now reached
                        while p < mark_ptr[r + 1] and mark_op[p] <= i:
                            mark_t[p] = clock[r]
                            p += 1
                        mcur[r] = p
                    if i >= hi[r]:
                        if r < len(more) and more[r] != 0:   # its next calls are in the next piece
                            resume = r
                            t_batch = t_rank
                            status = 2
                            break
                        if np.isnan(finish[r]):
                            finish[r] = clock[r]
                        break
                    g = gap[i]
                    if g > 0 and R[R_GAPDONE, r] != i:
                        R[R_GAPDONE, r] = i
                        C[C_RDY] = _hpush(rdy_t, rdy_r, C[C_RDY], clock[r] + g, r)
                        break
                    # room for the micro-op's requests, messages and flows, else back to run_core for it
                    room = _op_room(max_items)
                    f_lo = _ring_lo(f_lo, room, C, live, len(flow_size))
                    if C[C_QFREE] < room or C[C_MFREE] < room or C[C_F] + room - f_lo > len(flow_size):
                        resume = r
                        t_batch = t_rank
                        status = 1
                        break
                    R[R_PC, r] = i + 1
                    t = clock[r]
                    k = kind[i]
                    nq = 0
                    if k == K_SEND or k == K_RECV or k == K_ISEND or k == K_IRECV:
                        q = _post(r, k == K_SEND or k == K_ISEND, peer[i], nbytes[i], tag[i], cls[i], t, now,
                                  eager_B, Q, qfree, M, MF, mfree, R, FL, flow_size, live, cls_ptr, seg_rows, seg_len,
                                  seg_extra, seg_lat, lbytes, pend_t, pend_f, C)
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
                        reqs[0] = _post(r, True, peer[i], nbytes[i], tag[i], cls[i], t, now, eager_B, Q, qfree, M,
                                        MF, mfree, R, FL, flow_size, live, cls_ptr, seg_rows, seg_len, seg_extra,
                                        seg_lat, lbytes, pend_t, pend_f, C)
                        reqs[1] = _post(r, False, -1, nbytes[i], tag[i], -1, t, now, eager_B, Q, qfree, M, MF,
                                        mfree, R, FL, flow_size, live, cls_ptr, seg_rows, seg_len, seg_extra,
                                        seg_lat, lbytes, pend_t, pend_f, C)
                        nq = 2
                    elif k == K_STEP:  # receives first, then sends, then wait for all
                        for e in range(e_ptr[i], e_ptr[i + 1]):
                            reqs[nq] = _post(r, e_send[e] == 1, e_peer[e], e_bytes[e], tag[i], e_cls[e], t, now,
                                             eager_B, Q, qfree, M, MF, mfree, R, FL, flow_size, live, cls_ptr,
                                             seg_rows, seg_len, seg_extra, seg_lat, lbytes, pend_t, pend_f, C)
                            nq += 1
                    elif k == K_GEN:   # the next step of a streamed collective
                        gi = peer[i]
                        alg, gp, blk = gen[gi, GN_ALG], gen[gi, GN_P], gen[gi, GN_BLOCK]
                        stp = R[R_STEP, r]
                        ne = _gen_step(alg, gp, gen[gi, GN_ME], stp, nbytes[i], blk, mem, gen[gi, GN_MEM], g_peer,
                                       g_bytes, g_send)
                        for e in range(ne):
                            if g_send[e]:   # the route of the slot the message will take
                                _dyn_seg(n_static + mfree[C[C_MFREE] - 1], node[r], node[g_peer[e]], g_bytes[e],
                                         seg_rows, seg_len, seg_extra, seg_lat, seg_inst, seg_vl, psw, pup, pdown,
                                         pintra, mid_ptr, mid_links, lk_lat, lk_bw, lk_swin, lk_shared, consts, caps,
                                         n_links, n_sw)
                            reqs[nq] = _post(r, g_send[e] == 1, g_peer[e], g_bytes[e], tag[i], -1, t, now, eager_B,
                                             Q, qfree, M, MF, mfree, R, FL, flow_size, live, cls_ptr, seg_rows,
                                             seg_len, seg_extra, seg_lat, lbytes, pend_t, pend_f, C)
                            nq += 1
                        R[R_STEP, r] = stp + 1 if stp + 1 < _gen_count(alg, gp, blk) else 0
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
                            head = R[R_OPEN_H, r]
                            q = head
                            while q >= 0:
                                if not Q[Q_DONE, q]:
                                    Q[Q_INBLK, q] = 1
                                    cnt += 1
                                q = Q[Q_NEXT, q]
                            R[R_OPEN_H, r] = -1
                            R[R_OPEN_T, r] = -1
                            R[R_NWAIT, r] = cnt
                            if cnt > 0:   # the list, still chained, is held until the rank runs again
                                R[R_BLOCKED, r] = 1
                                R[R_HELD, r] = head
                                break
                            _free_reqs(head, Q, qfree, C)
                    if nq > 0:
                        if _block(r, reqs, nq, Q, R):
                            for j in range(nq - 1):
                                Q[Q_NEXT, reqs[j]] = reqs[j + 1]
                            Q[Q_NEXT, reqs[nq - 1]] = -1
                            R[R_HELD, r] = reqs[0]
                            break
                        for j in range(nq):
                            qfree[C[C_QFREE]] = reqs[j]
                            C[C_QFREE] += 1
                if status:
                    break
            if status:
                break
        else:
            # one engine event: completions and starts within rel of t (FlowEngine.run_until_next_event)
            t = max(t_flow, now)
            now = t
            horizon = t + rel * abs(t)
            nfin = 0
            if t_done <= horizon:
                sbuf, ns = ending(horizon, sbuf, rows, lens, sgrp, stag, hp, gI, gF, agl, gm, gbuf, EP, HT,
                                  em, fw)
                sbuf[:ns].sort()  # ascending slots, as FlowEngine frees them
                csc_remove(sbuf[:ns], rows, lens, back, segs, pool, meta)
                n_act -= ns
                for j in range(ns):
                    s = sbuf[j]
                    nnz -= lens[s]
                    fbuf[nfin] = sid[s]
                    nfin += 1
                    sid[s] = -1
                    lens[s] = 0
                    free[n_free] = s
                    n_free += 1
                dirty = True
            ns = 0
            while C[C_PEND] > 0 and pend_t[0] <= horizon:
                f = pend_f[0]
                C[C_PEND] = _hpop(pend_t, pend_f, C[C_PEND])
                fk = f & C[C_FMASK]
                if flow_size[fk] == 0 or seg_inst[FL[0, fk]]:
                    fbuf[nfin] = f
                    nfin += 1
                    continue
                s = free[n_free - 1]
                n_free -= 1
                sg = FL[0, fk]
                L = seg_len[sg]
                for j in range(L):
                    rows[s, j] = seg_rows[sg, j]
                if seg_vl[sg] >= 0:
                    rows[s, L] = seg_vl[sg]
                    L += 1
                lens[s] = L
                sid[s] = f
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
                    csc_rebuild(rows, old_lens, back, segs, pool, meta)
                csc_insert(sbuf[:ns], rows, lens, back, segs, pool, meta)
                nnz += added
                for j in range(ns):
                    s = sbuf[j]
                    g0 = pick_group(s, rows, lens, segs[1], lcap2, capv, n_links, gI, gF)
                    if not fits(em[EM_LIVE] + width, pool_need(gI[g0, G_ELEN], width), EP, em):
                        EP, HT = entry_room(em[EM_LIVE] + width, pool_need(gI[g0, G_ELEN], width), EP, HT, gI, agl,
                                            gm, em)
                    join(s, g0, flow_size[sid[s] & C[C_FMASK]], now, rows, lens, sgrp, stag, hp, gI, gF, agl, gm,
                         EP, HT, em, fw)
                n_act += ns
                dirty = True
            n_events += 1
            if nfin > 0:   # (the ring has room: checked at the top for every flow of the event)
                fbuf[:nfin].sort()
                for j in range(nfin):
                    f = fbuf[j]
                    fk = f & C[C_FMASK]
                    live[fk] = 0
                    sg = FL[0, fk]
                    m = FL[1, fk]
                    if m < 0:  # a flow given in advance
                        init_fin[f] = t
                        continue
                    c = M[M_CLS, m]
                    if sg + 1 < cls_ptr[c + 1]:  # a relay node forwards the whole message
                        _new_flow(m, sg + 1, MF[0, m], t, now, FL, flow_size, live, seg_rows, seg_len, seg_extra,
                                  seg_lat, lbytes, pend_t, pend_f, C)
                        continue
                    M[M_ARRIVED, m] = 1
                    if not M[M_EAGER, m]:
                        _complete(M[M_SREQ, m], t, Q, R, rdy_t, rdy_r, C)
                    if M[M_RREQ, m] >= 0:   # matched and arrived: the slot is free
                        _complete(M[M_RREQ, m], t, Q, R, rdy_t, rdy_r, C)
                        mfree[C[C_MFREE]] = m
                        C[C_MFREE] += 1
    C[C_NNZ] = nnz
    C[C_NACT] = n_act
    C[C_DIRTY] = dirty
    C[C_NEV] = n_events
    C[C_NFREE] = n_free
    C[C_FLO] = f_lo
    C[C_RESUME] = resume
    S[S_NOW] = now
    S[S_TDONE] = t_done
    S[S_TBATCH] = t_batch
    return status, sid, rows, back, lens, sgrp, stag, hp, free, pool, EP, HT, fbuf, sbuf


@_kernel
def _max_items(prog, stream):
    """The most requests one micro-op of ``prog`` may post (a step's entries, a streamed batch), at least 2."""
    kind, e_ptr = prog[2], prog[9]
    gen = stream[0]
    max_items = 2
    for i in range(len(kind)):
        max_items = max(max_items, e_ptr[i + 1] - e_ptr[i])
    for gi in range(len(gen)):
        if gen[gi, GN_ALG] == GEN_SPREAD:
            max_items = max(max_items, 2 * min(gen[gi, GN_BLOCK], gen[gi, GN_P]))
    return max_items


@_kernel
def _seg_width(route, stream):
    """Links a segment row needs: the route classes' widest, and a streamed message's (up, middle, down)."""
    width = route[1].shape[1]
    if len(stream[0]) > 0:
        mid_ptr = stream[3][4]
        for x in range(len(mid_ptr) - 1):
            width = max(width, mid_ptr[x + 1] - mid_ptr[x] + 2)
    return width


@_kernel
def _static_segs(route, caps, n_links, n_dyn, width):
    """The segment tables: the route classes' segments (``route``, each with its fat-pipe cap's virtual
    link), then ``n_dyn`` empty rows for streamed messages, ``width`` links wide."""
    cls_ptr, seg_rows, seg_len, seg_extra, seg_lat, seg_cap, seg_inst = route
    n_static = len(seg_len)
    vl = np.full(n_static, -1, np.int64)
    for sg in range(n_static):
        if np.isfinite(seg_cap[sg]):
            k = np.searchsorted(caps, seg_cap[sg])
            if k == len(caps) or caps[k] != seg_cap[sg]:
                raise ValueError("run_core: a route class's fat-pipe cap is not one of the run's caps")
            vl[sg] = n_links + k
    return _grow_segs(seg_rows, seg_len, seg_extra, seg_lat, seg_inst, vl, n_static + n_dyn, width)


@_loop_jit
def _fresh_state(prog, route, lcap, init_seg, init_start, init_size, stream, tl_dt, tl_max, mark_op, mark_ptr):
    """The state of a run at its start (see :data:`topoplan.sim._engine.STATE`): every rank ready at time 0, the flows
    given in advance pending."""
    lo, hi, kind, peer, nbytes, tag, reqkind, gap, cls, e_ptr, e_peer, e_bytes, e_send, e_cls, n_msgs, n_reqs = prog
    gen, mem, node, parts, lk_lat, lk_bw, lk_swin, lk_shared, consts, xcaps = stream
    n_gen = len(gen)
    n_sw = int(np.sqrt(len(parts[4]) - 1) + 0.5)
    n = len(lo)
    n_links = len(lcap)
    width = _seg_width(route, stream)
    inf = np.inf
    C = np.zeros(16, np.int64)
    R = np.full((12, n), -1, np.int64)
    R[R_PC] = lo
    R[R_BLOCKED] = 0
    R[R_NWAIT] = 0
    R[R_STEP] = 0
    clock = np.zeros(n)
    finish = np.full(n, np.nan)
    rdy_t = np.empty(n + 1)          # a rank is in the ready heap at most once
    rdy_r = np.empty(n + 1, np.int64)
    max_items = _max_items(prog, stream)
    reqs = np.empty(max_items, np.int64)
    g_peer = np.empty(max_items, np.int64)
    g_bytes = np.empty(max_items)
    g_send = np.empty(max_items, np.int64)
    # requests and messages: slots from free lists, grown when a micro-op could run out; the state kept is
    # what is in flight, not the run's total (n_msgs, n_reqs only size the first tables)
    n_q = max(min(n_reqs, 4 * n + 64), _op_room(max_items)) + 1
    Q = np.zeros((8, n_q), np.int64)
    qfree = np.empty(n_q, np.int64)
    for j in range(n_q):
        qfree[j] = n_q - 1 - j
    C[C_QFREE] = n_q
    n_m = max(min(n_msgs, 2 * n + 64), _op_room(max_items)) + 1
    M = np.full((9, n_m), -1, np.int64)
    MF = np.zeros((3, n_m))
    mfree = np.empty(n_m, np.int64)
    for j in range(n_m):
        mfree[j] = n_m - 1 - j
    C[C_MFREE] = n_m
    # flows: ids count up (the heaps break ties by id); a flow's state is at id & mask of a ring that
    # holds every live id (those from f_lo on), doubled when the next ids would not fit
    n_init = len(init_seg)
    n_fl = 1024
    while n_fl < n_init + 2 * max_items + 2:
        n_fl *= 2
    C[C_FMASK] = n_fl - 1
    FL = np.zeros((2, n_fl), np.int64)
    flow_size = np.zeros(n_fl)
    live = np.zeros(n_fl, np.uint8)
    pend_t = np.empty(n_fl)
    pend_f = np.empty(n_fl, np.int64)
    init_fin = np.full(n_init, np.nan)
    lbytes = np.zeros(max(n_links, 1))
    # engine slots (transferring flows), link -> slot lists (real links, then one virtual link per
    # distinct fat-pipe cap, which acts as a private link of that capacity) and bottleneck groups
    seg_cap = route[5]
    caps = np.unique(np.concatenate((seg_cap[np.isfinite(seg_cap)], xcaps)))
    n_lt = n_links + len(caps)
    capv = np.full(n_lt, inf)
    capv[n_links:] = caps
    lcap2 = np.full(n_lt, inf)
    lcap2[:n_links] = lcap
    n_static = len(route[2])
    C[C_NSEG] = n_static
    # one segment per message slot after the route classes' when collectives are streamed
    seg_rows, seg_len, seg_extra, seg_lat, seg_inst, seg_vl = _static_segs(route, caps, n_links,
                                                                           n_m if n_gen > 0 else 0, width)
    width += 1
    n_slots = 64
    sid = np.full(n_slots, -1, np.int64)
    rows = np.full((n_slots, width), -1, np.int64)
    back = np.zeros((n_slots, width), np.int64)
    lens = np.zeros(n_slots, np.int64)
    sgrp = np.full(n_slots, -1, np.int64)
    stag = np.zeros(n_slots)
    hp = np.full((n_slots, 3), -1, np.int64)
    free = np.empty(n_slots, np.int64)
    for k in range(n_slots):
        free[k] = n_slots - 1 - k          # popped from the end: low slots first
    segs = np.zeros((5, n_lt), np.int64)
    pool = np.zeros(1024, np.int64)
    meta = np.zeros(2, np.int64)
    iw = np.zeros((4, n_lt), np.int64)
    fw = np.zeros((4 if tl_dt > 0 else 3, n_lt))   # rows 0-2 fill_groups' (scratch, thresholds); row 3, kept for
                                                   # a timeline only, per link for link_bytes_at
    gI, gF, agl, gm, EP, HT, em = new_state(n_lt)
    gbuf = np.empty(max(n_lt, 1), np.int64)
    fbuf = np.empty(64, np.int64)
    sbuf = np.empty(64, np.int64)
    for r in range(n):
        C[C_RDY] = _hpush(rdy_t, rdy_r, C[C_RDY], 0.0, r)
    for j in range(n_init):
        _new_flow(-1, init_seg[j], init_size[j], init_start[j], 0.0, FL, flow_size, live, seg_rows, seg_len,
                  seg_extra, seg_lat, lbytes, pend_t, pend_f, C)
    S = np.zeros(3)
    S[S_TDONE] = inf
    tl = np.zeros((n_links, max(min(256, tl_max), 1) if tl_dt > 0 else 0))
    mcur = mark_ptr[:-1].copy()
    mark_t = np.full(len(mark_op), np.nan)
    C[C_NFREE] = n_slots
    C[C_RESUME] = -1
    dims = np.array([n_links, n_static, n_sw, max_items, width], np.int64)
    return (C, S, R, clock, finish, rdy_t, rdy_r, reqs, g_peer, g_bytes, g_send, Q, qfree, M, MF, mfree, FL,
            flow_size, live, pend_t, pend_f, init_fin, lbytes, caps, capv, lcap2, seg_rows, seg_len, seg_extra,
            seg_lat, seg_inst, seg_vl, sid, rows, back, lens, sgrp, stag, hp, free, segs, pool, meta, iw, fw, gI,
            gF, agl, gm, EP, HT, em, gbuf, fbuf, sbuf, tl, mcur, mark_t, dims)


@_loop_jit
def _resume_state(state, prog, route, stream):
    """``state`` (returned by a run stopped for the trace's next piece) made ready for ``prog``: the window of
    micro-ops with that piece added (the ranks' program counters already moved to it by the caller) and
    ``route``, the route classes so far (the earlier ones unchanged, new ones after them). The segment
    tables are rebuilt with the new classes in front of the streamed messages' segments, which move up (and
    the flows that use them), and the tables sized by the widest segment and the largest micro-op grow."""
    (C, S, R, clock, finish, rdy_t, rdy_r, reqs, g_peer, g_bytes, g_send, Q, qfree, M, MF, mfree, FL,
     flow_size, live, pend_t, pend_f, init_fin, lbytes, caps, capv, lcap2, seg_rows, seg_len, seg_extra,
     seg_lat, seg_inst, seg_vl, sid, rows, back, lens, sgrp, stag, hp, free, segs, pool, meta, iw, fw, gI,
     gF, agl, gm, EP, HT, em, gbuf, fbuf, sbuf, tl, mcur, mark_t, dims) = state
    n_links = dims[0]
    old_static = C[C_NSEG]
    n_static = len(route[2])
    if n_static < old_static:
        raise ValueError("run_core: the route classes of a resumed run must extend the previous ones")
    max_items = _max_items(prog, stream)
    if max_items > dims[3]:
        reqs = np.empty(max_items, np.int64)
        g_peer = np.empty(max_items, np.int64)
        g_bytes = np.empty(max_items)
        g_send = np.empty(max_items, np.int64)
        dims[3] = max_items
    width = max(_seg_width(route, stream), dims[4] - 1)
    n_dyn = len(seg_len) - old_static
    rows2, len2, extra2, lat2, inst2, vl2 = _static_segs(route, caps, n_links, n_dyn, width)
    if n_dyn > 0:   # the streamed messages' segments, after the classes
        rows2[n_static:, :seg_rows.shape[1]] = seg_rows[old_static:]
        len2[n_static:] = seg_len[old_static:]
        extra2[n_static:] = seg_extra[old_static:]
        lat2[n_static:] = seg_lat[old_static:]
        inst2[n_static:] = seg_inst[old_static:]
        vl2[n_static:] = seg_vl[old_static:]
    seg_rows, seg_len, seg_extra, seg_lat, seg_inst, seg_vl = rows2, len2, extra2, lat2, inst2, vl2
    if n_dyn > 0 and n_static > old_static:   # the streamed messages' segments moved up
        shift = n_static - old_static
        mask = C[C_FMASK]
        for f in range(C[C_FLO], C[C_F]):
            k = f & mask
            if live[k] and FL[0, k] >= old_static:
                FL[0, k] += shift
    C[C_NSEG] = n_static
    dims[1] = n_static
    dims[2] = int(np.sqrt(len(stream[3][4]) - 1) + 0.5)
    if len(stream[0]) > 0 and len(seg_len) < n_static + M.shape[1]:   # the first streamed collective
        seg_rows, seg_len, seg_extra, seg_lat, seg_inst, seg_vl = _grow_segs(seg_rows, seg_len, seg_extra, seg_lat,
                                                                             seg_inst, seg_vl, n_static + M.shape[1],
                                                                             width)
    if width + 1 > rows.shape[1]:   # wider engine slots
        r2 = np.full((rows.shape[0], width + 1), -1, np.int64)
        r2[:, :rows.shape[1]] = rows
        b2 = np.zeros((rows.shape[0], width + 1), np.int64)
        b2[:, :rows.shape[1]] = back
        rows = r2
        back = b2
        dims[4] = width + 1
    return (C, S, R, clock, finish, rdy_t, rdy_r, reqs, g_peer, g_bytes, g_send, Q, qfree, M, MF, mfree, FL,
            flow_size, live, pend_t, pend_f, init_fin, lbytes, caps, capv, lcap2, seg_rows, seg_len, seg_extra,
            seg_lat, seg_inst, seg_vl, sid, rows, back, lens, sgrp, stag, hp, free, segs, pool, meta, iw, fw, gI,
            gF, agl, gm, EP, HT, em, gbuf, fbuf, sbuf, tl, mcur, mark_t, dims)


@_loop_jit
def run_core(prog, route, lcap, eager_B, rel, init_seg, init_start, init_size, stream, tl_dt, tl_max, mark_op,
             mark_ptr, more, state):  # pragma: no cover - compiled
    """Run the flows and ranks to the end (or a deadlock), or until a rank needs the trace's next piece.

    ``prog``: (lo, hi, kind, peer, nbytes, tag, reqkind, gap, cls, e_ptr, e_peer, e_bytes, e_send, e_cls,
    n_msgs, n_reqs), no ranks for a plain flow set; ``route``: (cls_ptr, seg_rows, seg_len, seg_extra,
    seg_lat, seg_cap, seg_inst) per route class and segment; ``init_*``: flows given in advance (segment,
    start, bytes), ids 0.. in that order; ``stream``: (GEN table, communicator members, node per rank,
    :meth:`topoplan.sim.network.Network.route_parts`, per link latency, bandwidth, switches entered and shared,
    (switch delay, MTU, relay chunk), fat-pipe caps of the parts, or of every link a later piece's route
    classes may cross) for streamed collectives; ``tl_dt`` > 0:
    sample every link's bytes at each multiple of ``tl_dt`` and at the end, in at most ``tl_max`` columns;
    ``mark_op`` (per rank ascending, rank r's at ``mark_ptr[r]:mark_ptr[r + 1]``): micro-ops whose rank's
    clock is wanted when it reaches them (its previous call ended; before the gap). ``more`` (empty, or
    one entry per rank): a rank whose entry is set has calls after ``prog``'s, in the trace's next piece;
    ``state``: :func:`topoplan.sim._engine.no_state` for a run from the start, else the state returned by the run
    this one resumes (``prog`` its window with the next piece added, see :func:`_resume_state`).
    Returns (finish per rank, pc, blocked, n_messages, n_events, n_flows, bytes per link, finish of each flow
    given in advance, the samples (links x boundaries passed + 1; empty without ``tl_dt``), boundaries passed
    or -1 when they would exceed ``tl_max``, the clock at the end, the time each mark was reached, status
    (0: the end; 2: a rank needs the next piece, the samples not yet closed), the state). The state kept is
    what is in flight: requests, messages and flows take slots that return when they are done.
    """
    if len(state[0]) == 0:
        st = _fresh_state(prog, route, lcap, init_seg, init_start, init_size, stream, tl_dt, tl_max, mark_op,
                          mark_ptr)
    else:
        st = _resume_state(state, prog, route, stream)
    (C, S, R, clock, finish, rdy_t, rdy_r, reqs, g_peer, g_bytes, g_send, Q, qfree, M, MF, mfree, FL,
     flow_size, live, pend_t, pend_f, init_fin, lbytes, caps, capv, lcap2, seg_rows, seg_len, seg_extra,
     seg_lat, seg_inst, seg_vl, sid, rows, back, lens, sgrp, stag, hp, free, segs, pool, meta, iw, fw, gI,
     gF, agl, gm, EP, HT, em, gbuf, fbuf, sbuf, tl, mcur, mark_t, dims) = st
    cls_ptr = route[0]
    n_links = dims[0]
    max_items = dims[3]
    n_gen = len(stream[0])
    while True:
        seg = (cls_ptr, seg_rows, seg_len, seg_extra, seg_lat, seg_inst, seg_vl)
        status, sid, rows, back, lens, sgrp, stag, hp, free, pool, EP, HT, fbuf, sbuf = _loop(
            prog, seg, stream, lcap2, capv, caps, eager_B, rel, dims, C, S, R, clock, finish, rdy_t, rdy_r, Q, qfree,
            M, MF, mfree, FL, flow_size, live, pend_t, pend_f, init_fin, lbytes, reqs, g_peer, g_bytes, g_send, sid,
            rows, back, lens, sgrp, stag, hp, free, segs, pool, meta, iw, fw, gI, gF, agl, gm, EP, HT, em, gbuf, fbuf,
            sbuf, tl_dt, tl, mark_op, mark_ptr, mcur, mark_t, more)
        if status != 1:
            break
        if tl_dt > 0 and C[C_TLK] == tl.shape[1]:
            if tl.shape[1] >= tl_max:   # more intervals than the caller allows: stop here (C_TLK -1 says so)
                C[C_TLK] = -1
                break
            tl = _more_cols(tl, min(2 * tl.shape[1], tl_max))
        if C[C_QFREE] < _op_room(max_items):
            Q, qfree = _grow_requests(Q, qfree, C)
        if C[C_MFREE] < _op_room(max_items):
            M, MF, mfree = _grow_messages(M, MF, mfree, C)
            if n_gen > 0:
                seg_rows, seg_len, seg_extra, seg_lat, seg_inst, seg_vl = _grow_segs(
                    seg_rows, seg_len, seg_extra, seg_lat, seg_inst, seg_vl, C[C_NSEG] + M.shape[1], seg_rows.shape[1])
        need = _event_room(max_items, C[C_NACT], C[C_PEND])
        while C[C_F] + need - C[C_FLO] > len(flow_size):
            FL, flow_size, live, pend_t, pend_f = _grow_flows(FL, flow_size, live, pend_t, pend_f, C, C[C_FLO])
        if C[C_NFREE] < C[C_PEND]:
            sid, rows, back, lens, sgrp, stag, hp, free = _grow_slots(sid, rows, back, lens, sgrp, stag, hp, free, C,
                                                                       C[C_PEND])
        need = C[C_NACT] + C[C_PEND]
        if len(fbuf) < need:
            fbuf = np.empty(2 * need, np.int64)
        if len(sbuf) < need:
            sbuf = np.empty(2 * need, np.int64)
    n_tl = 0
    if status == 0 and tl_dt > 0 and C[C_TLK] >= 0:   # and the bytes at the end, for the last (partial) interval
        n_tl = C[C_TLK] + 1
        if n_tl > tl.shape[1]:
            tl = _more_cols(tl, n_tl)
        link_bytes_at(S[S_NOW], n_tl - 1, tl, n_links, fw, gI, gF, agl, gm, EP)
    out_state = (C, S, R, clock, finish, rdy_t, rdy_r, reqs, g_peer, g_bytes, g_send, Q, qfree, M, MF, mfree, FL,
                 flow_size, live, pend_t, pend_f, init_fin, lbytes, caps, capv, lcap2, seg_rows, seg_len, seg_extra,
                 seg_lat, seg_inst, seg_vl, sid, rows, back, lens, sgrp, stag, hp, free, segs, pool, meta, iw, fw,
                 gI, gF, agl, gm, EP, HT, em, gbuf, fbuf, sbuf, tl, mcur, mark_t, dims)
    return (finish, R[R_PC].copy(), R[R_BLOCKED].copy(), C[C_MSGS], C[C_NEV], C[C_F], lbytes[:n_links].copy(),
            init_fin, tl[:, :n_tl].copy(), C[C_TLK], S[S_NOW], mark_t, status, out_state)
