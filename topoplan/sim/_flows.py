"""Compiled flow kernels (Numba): max-min fair rates over the flows in flight.

The solver kernels (:func:`_fill_slots` and the incremental link -> flow lists ``csc_*``) serve
:class:`topoplan.sim.maxmin.FlowEngine`'s ``"numba"`` solver, which re-solves over every flow in flight.
The event loop (:mod:`topoplan.sim._loop`) keeps its flows by bottleneck link instead (:func:`fill_groups`,
see "max-min rates per bottleneck link" below), so a re-solve costs the links and bottlenecks, not the
flows in flight. Both are checked against each other and against SimGrid.

The decorators and the cache stamp are :mod:`topoplan.sim._jit`'s: an edit here recompiles the loop too.
"""

from __future__ import annotations

import numpy as np

from topoplan.sim._jit import kernel as _kernel
from topoplan.sim._jit import leaf as _leaf

__all__ = ["Incidence", "act_add", "act_remove", "csc_insert", "csc_remove", "csc_rebuild", "new_state", "join",
           "leave", "pick_group", "fill_groups", "ending", "entry_room", "pool_need", "fits", "link_bytes_at"]

# --------------------------------------------------------------------------- max-min solver kernels


# Both fills keep their scratch per link in two tables: ``iw`` (int) row 0 the unfrozen flows crossing the
# link, row 1 the heap's links; ``fw`` (float) row 0 the capacity left, row 1 the heap's keys. The heap
# kernels index the tables rather than take views of their rows (a view is an array to count references
# of in a caller that does).


@_leaf
def _sift_down(fw, iw, hs, i):
    # (positions are indexed as unsigned integers: no wrap-around of negative indices is compiled in)
    u = np.uint64(i)
    key, val = fw[1, u], iw[1, u]
    while True:
        c = 2 * i + 1
        if c >= hs:
            break
        if c + 1 < hs:   # the right child when strictly smaller, taken without a branch on the keys (which
            c += np.int64(fw[1, np.uint64(c + 1)] < fw[1, np.uint64(c)])   # a heap mispredicts half the time)
        uc = np.uint64(c)
        if fw[1, uc] >= key:
            break
        fw[1, u] = fw[1, uc]
        iw[1, u] = iw[1, uc]
        i = c
        u = uc
    fw[1, u] = key
    iw[1, u] = val


@_leaf
def _share_top(iw, fw, hs, capv, n_real):
    """Bring the heap's top to a link that still has unfrozen flows, at its current level.

    Pops links without unfrozen flows and refreshes stale keys: a link's
    level only grows while a fill freezes flows, so a stale key is a lower
    bound. Links ``>= n_real`` are caps, at level ``capv``. Returns (heap
    size, link, level), link -1 when the heap is empty.
    """
    while hs > 0:
        l = iw[1, 0]
        ul = np.uint64(l)   # (unsigned: see _sift_down)
        if iw[0, ul] == 0:
            hs -= 1
            fw[1, 0] = fw[1, np.uint64(hs)]
            iw[1, 0] = iw[1, np.uint64(hs)]
            _sift_down(fw, iw, hs, 0)
            continue
        cur = capv[ul] if l >= n_real else fw[0, ul] / iw[0, ul]
        if cur > fw[1, 0]:
            fw[1, 0] = cur
            _sift_down(fw, iw, hs, 0)
            continue
        return hs, l, cur
    return hs, -1, np.inf


# The compiled solver keeps, for every link, the list of slots (transferring flows) that
# cross it, in segments of one pool array, updated per started or ended flow, so a
# re-solve never rebuilds the incidence. ``seg`` rows: 0 segment start, 1 length,
# 2 capacity, 3 live links (length > 0), 4 position in the live list; ``meta``: pool end,
# number of live links. ``back[s, j]`` is the pool position of slot s's j-th link.


@_leaf
def _csc_link_of(rows, lens, back, t, l, pos):
    """Index j of slot t's entry on link l stored at pool position pos."""
    for j in range(lens[t]):
        if rows[t, j] == l and back[t, j] == pos:
            return j
    return -1


@_leaf
def csc_insert(slots, rows, lens, back, seg, pool, meta):
    """Append each of ``slots``' links to that link's segment (moved to the pool's end when full); a link
    becomes live with its first slot."""
    start, length, cap, live, live_pos = seg[0], seg[1], seg[2], seg[3], seg[4]
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
            if length[l] == 0:
                live_pos[l] = meta[1]
                live[meta[1]] = l
                meta[1] += 1
            p = start[l] + length[l]
            pool[p] = s
            back[s, j] = p
            length[l] += 1


@_leaf
def csc_remove(slots, rows, lens, back, seg, pool, meta):
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
def csc_rebuild(rows, lens, back, seg, pool, meta):
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
    csc_insert(np.flatnonzero(lens), rows, lens, back, seg, pool, meta)


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
        _sift_down(fw, iw, hs, i)
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
        hs, top, link_level = _share_top(iw, fw, hs, lcap, len(cnt))
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
            lo, hi = start[top], start[top] + length[top]
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
    t_done = inf
    for a in range(n):
        s = act[a]
        fin[s] = now + rem_b[s] / rate[s]
        t_done = min(t_done, fin[s])
    return t_done


@_leaf
def act_add(act, apos, n, slots):
    """Append ``slots`` to the used-slot list ``act[:n]`` (``apos``: position of a slot); returns the new n."""
    for s in slots:
        act[n] = s
        apos[s] = n
        n += 1
    return n


@_leaf
def act_remove(act, apos, n, slots):
    """Remove ``slots`` from the used-slot list (swap with the last); returns the new n."""
    for s in slots:
        p = apos[s]
        n -= 1
        last = act[n]
        act[p] = last
        apos[last] = p
    return n


class Incidence:
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
            csc_rebuild(rows, old, back, self.seg, self.pool, self.meta)
        csc_insert(slots, rows, lens, back, self.seg, self.pool, self.meta)
        self.nnz += added

    def remove(self, slots, rows, lens, back) -> None:
        csc_remove(slots, rows, lens, back, self.seg, self.pool, self.meta)
        self.nnz -= int(lens[slots].sum())

    def fill(self, rows, lens, act, n, fcap, lcap, rate, rem_b, dt, now, fin) -> float:
        return _fill_slots(rows, lens, act, n, fcap, lcap, self.seg, self.pool, self.meta, self.iw, self.fw,
                           rate, rem_b, dt, now, fin)


# --------------------------------------------------------------------------- max-min rates per bottleneck link (run_core)
# run_core keeps its transferring flows by bottleneck. In a max-min allocation every flow runs at the fill
# level of one link on its route, its *bottleneck* (the first of its links to saturate in progressive
# filling), and flows with the same bottleneck share one rate. So the state is kept per *group* (a link and
# the flows it bottlenecks), not per flow:
#
# * a group's rate and a virtual clock ``V``, the bytes each of its flows has received since the group
#   formed. A flow's remaining bytes are ``tag - V``, ``tag`` being its bytes plus ``V`` when it joined,
#   so a rate change costs nothing per flow, and the group's next flow to end is the one with the smallest
#   tag (a pairing heap per group, one node per flow slot);
# * ``N(g, l)``, how many flows of group ``g`` cross link ``l``.
#
# A re-solve (:func:`fill_groups`) is progressive filling that freezes a group at a time: when link ``l``
# saturates, the unfrozen flows of other groups that cross it (``cnt[l] - members(l)`` of them) move to
# group ``l`` (their bottleneck changed); then group ``l`` freezes at the level and takes
# ``N(l, m) * level`` off every link ``m`` its flows cross. Only *candidate* links are in the fill's heap:
# the groups' links and the caps. Max-min over a subset of the capacity constraints is also max-min over
# all of them when no other link ends up over its capacity (the leximin-best point of a larger set that
# lies in the smaller set is the smaller set's best); a link that does becomes a candidate and the fill
# runs again. Every step is the exact filling's, so the rates are the exact max-min ones; the cost is the
# candidates, the entries of N and the flows that change bottleneck, not the flows in flight. A flow's
# fat-pipe cap acts as a private link of that capacity: each distinct cap value is a *virtual link* (ids
# ``n_links..``) whose level is the cap, whatever crosses it.
#
# Arrays (int64 unless said; ``Lt`` = real + virtual links):
#
# * ``gI`` (Lt x 7): heap root, members, entry segment start, position in the active-group list, frozen in
#   the current fill (1; 2: alone), segment capacity and length; ``gF`` (float, Lt x 4): ``V``, the time
#   ``V`` was brought to, rate, projected end of the first member;
# * ``agl`` (4 x Lt): row 0 the groups with members, the ``gm[1]`` of the work list first, then the
#   ``gm[0] - gm[1]`` settled ones; row 1 the settled groups, a binary heap by projected end; row 2 a
#   group's place in that heap (-1: not settled); row 3 per *link*, the settled group whose flows cross it
#   (-1: none);
# * per flow slot ``s``: ``sgrp[s]`` its group, ``tag[s]`` (float), ``hp[s]`` its heap node (child,
#   sibling, previous: the parent of a first child);
# * ``EP`` (pool x 2): N's entries (link, count), each group's in one segment of the pool (moved to the
#   pool's end, twice as big, when full), so a freeze reads them in a row; ``HT`` (table size x 2): open
#   addressing (linear probing, backward-shift deletion) from ``g * Lt + l`` to the entry's place in g's
#   segment; ``em``: table bits, ``Lt``, live entries, pool end, fills and fill passes so far. The table
#   is kept at most half full and the pool grown by :func:`entry_room` before a join; a fill that could
#   overflow either stops and says how much it needs.
#
# *Settled groups.* A group alone on its links (every flow crossing them is its member) whose own link is
# the lowest share on its members' routes freezes at that share whatever the other groups do, and keeps
# it until a flow joins or leaves it or a new flow crosses one of its links. At the end of a fill such a
# group is *settled*: it leaves the work list, its links are marked as its own (``agl[3]``) and it enters a
# heap by projected end. A fill visits only the work list (its links are disjoint from the settled
# groups', so max-min over it is max-min over all), :func:`join` and :func:`leave` put a settled group back
# on the work list when they touch it or one of its links, and :func:`ending` when its first flow ends. In
# a replay most groups are one or two flows between two nodes: a fill then costs the groups an event
# changed, not the groups in flight.

G_ROOT, G_N, G_EST, G_APOS, G_FRZ, G_ECAP, G_ELEN = range(7)
F_V, F_VT, F_LEV, F_FIN = range(4)
EM_BITS, EM_LT, EM_LIVE, EM_PEND, EM_FILL, EM_PASS, EM_THR = range(7)
OVERFULL = 1e-11   # relative excess over a link's capacity that makes it a candidate (rounding is ~1e-13)
P_CHILD, P_SIB, P_PREV = range(3)
_GOLD = np.uint64(11400714819323198485)   # 2^64 / golden ratio: Fibonacci hashing


# --------------------------------------------------------------------------- N(g, l): hash table + lists


@_leaf
def _h_home(key, bits):
    return np.int64((np.uint64(key) * _GOLD) >> np.uint64(64 - bits))


@_leaf
def _h_slot(HT, key, bits):
    """The table position holding ``key``, or the empty one where it would go."""
    mask = (np.int64(1) << bits) - 1
    i = _h_home(key, bits)
    while HT[i, 0] != -1 and HT[i, 0] != key:
        i = (i + 1) & mask
    return i


@_leaf
def _h_delete(HT, i, bits):
    """Empty position ``i``, shifting back the entries after it that probed past it."""
    mask = (np.int64(1) << bits) - 1
    j = i
    while True:
        j = (j + 1) & mask
        if HT[j, 0] == -1:
            break
        k = _h_home(HT[j, 0], bits)
        # the entry at j moves into the hole unless its home lies cyclically in (i, j]
        if (j > i and (k <= i or k > j)) or (j < i and k <= i and k > j):
            HT[i, 0] = HT[j, 0]
            HT[i, 1] = HT[j, 1]
            i = j
    HT[i, 0] = -1


@_leaf
def _table_bits(n_entries):
    bits = 4
    while (np.int64(1) << bits) < 2 * n_entries:
        bits += 1
    return bits


@_kernel
def entry_room(n_live, cells, EP, HT, gI, agl, gm, em):
    """``EP`` and ``HT`` with room for ``n_live`` live entries and ``cells`` more pool cells.

    Returns them unchanged when they have it; else rehashes into a table
    twice as big as needed and/or compacts the groups' segments into a new
    pool (groups without members lose theirs).
    """
    bits = _table_bits(n_live)
    if em[EM_PEND] + cells > EP.shape[0]:
        used = 0
        for a in range(gm[0]):
            used += 2 * gI[agl[0, a], G_ELEN] + 4
        new = np.zeros((max(2 * (used + cells), 1024), 2), np.int64)
        gI[:, G_ECAP] = 0
        end = 0
        for a in range(gm[0]):
            g = agl[0, a]
            n = gI[g, G_ELEN]
            new[end:end + n] = EP[gI[g, G_EST]:gI[g, G_EST] + n]
            gI[g, G_EST] = end
            gI[g, G_ECAP] = 2 * n + 4
            end += 2 * n + 4
        em[EM_PEND] = end
        EP = new
    if em[EM_BITS] < bits:
        HT = np.full((np.int64(1) << bits, 2), -1, np.int64)
        lt = em[EM_LT]
        for a in range(gm[0]):
            g = agl[0, a]
            st = gI[g, G_EST]
            for j in range(gI[g, G_ELEN]):
                i = _h_slot(HT, g * lt + EP[st + j, 0], bits)
                HT[i, 0] = g * lt + EP[st + j, 0]
                HT[i, 1] = j
        em[EM_BITS] = bits
    return EP, HT


@_leaf
def pool_need(n, add):
    """Pool cells a group with ``n`` entries may take while ``add`` more join it.

    Each time its segment is full it moves to the pool's end, twice as big
    plus 4: the moves sum to under ``4 (n + add) + 32``. It depends on the
    entries, not the capacity, so compacting the pool does not change it.
    """
    return 4 * (n + add) + 32


@_leaf
def fits(n_live, cells, EP, em):
    return 2 * n_live <= (np.int64(1) << em[EM_BITS]) and em[EM_PEND] + cells <= EP.shape[0]


@_leaf
def _nz_route(g, s, d, rows, lens, EP, HT, em, gI):
    """N(g, l) += d (+1 or -1) for every link l of slot ``s``'s route; an entry is appended to g's segment
    at 1 and swapped out at 0 (one call per route, not per link)."""
    lt = em[EM_LT]
    bits = em[EM_BITS]
    for q in range(lens[s]):
        l = rows[s, q]
        key = g * lt + l
        i = _h_slot(HT, key, bits)
        st = gI[g, G_EST]
        if HT[i, 0] == key:
            j = HT[i, 1]
            EP[st + j, 1] += d
            if EP[st + j, 1] == 0:
                _h_delete(HT, i, bits)
                last = gI[g, G_ELEN] - 1
                gI[g, G_ELEN] = last
                em[EM_LIVE] -= 1
                if j != last:
                    EP[st + j, 0] = EP[st + last, 0]
                    EP[st + j, 1] = EP[st + last, 1]
                    HT[_h_slot(HT, g * lt + EP[st + j, 0], bits), 1] = j
            continue
        n = gI[g, G_ELEN]
        if n == gI[g, G_ECAP]:   # move the segment to the pool's end, twice as big (the caller made room)
            cap = 2 * n + 4
            new = em[EM_PEND]
            for k in range(n):   # (a slice copy would allocate a temporary)
                EP[new + k, 0] = EP[st + k, 0]
                EP[new + k, 1] = EP[st + k, 1]
            gI[g, G_EST] = new
            gI[g, G_ECAP] = cap
            em[EM_PEND] = new + cap
            st = new
        EP[st + n, 0] = l
        EP[st + n, 1] = d
        gI[g, G_ELEN] = n + 1
        HT[i, 0] = key
        HT[i, 1] = n
        em[EM_LIVE] += 1


# --------------------------------------------------------------------------- pairing heaps of slots by tag


@_leaf
def _ph_meld(a, b, key, hp):
    """Meld two roots; the larger key becomes the first child of the smaller."""
    if key[b] < key[a]:
        a, b = b, a
    c = hp[a, P_CHILD]
    hp[b, P_SIB] = c
    if c >= 0:
        hp[c, P_PREV] = b
    hp[b, P_PREV] = a
    hp[a, P_CHILD] = b
    return a


@_leaf
def _ph_pairs(first, key, hp):
    """Two-pass pairing of a sibling list starting at ``first``; returns the new root (-1: none)."""
    if first < 0:
        return -1
    acc = -1
    a = first
    while a >= 0:   # pass 1: meld pairs left to right, listing the results in reverse (through P_SIB)
        b = hp[a, P_SIB]
        hp[a, P_PREV] = -1
        hp[a, P_SIB] = -1
        if b >= 0:
            nxt = hp[b, P_SIB]
            hp[b, P_PREV] = -1
            hp[b, P_SIB] = -1
            t = _ph_meld(a, b, key, hp)
        else:
            nxt = -1
            t = a
        hp[t, P_SIB] = acc
        acc = t
        a = nxt
    r = acc   # pass 2: meld them right to left
    a = hp[r, P_SIB]
    hp[r, P_SIB] = -1
    while a >= 0:
        nxt = hp[a, P_SIB]
        hp[a, P_SIB] = -1
        r = _ph_meld(r, a, key, hp)
        a = nxt
    return r


@_leaf
def _ph_remove(root, s, key, hp):
    """Remove node ``s`` from the heap at ``root``; returns the new root."""
    if s == root:
        r = _ph_pairs(hp[s, P_CHILD], key, hp)
    else:
        p = hp[s, P_PREV]
        nx = hp[s, P_SIB]
        if hp[p, P_CHILD] == s:
            hp[p, P_CHILD] = nx
        else:
            hp[p, P_SIB] = nx
        if nx >= 0:
            hp[nx, P_PREV] = p
        sub = _ph_pairs(hp[s, P_CHILD], key, hp)
        r = root if sub < 0 else _ph_meld(root, sub, key, hp)
    hp[s, P_CHILD] = -1
    hp[s, P_SIB] = -1
    hp[s, P_PREV] = -1
    return r


# --------------------------------------------------------------------------- groups


@_kernel
def new_state(n_groups):
    """Empty group tables for ``n_groups`` links (real + virtual)."""
    gI = np.zeros((n_groups, 7), np.int64)
    gI[:, G_ROOT] = -1
    gF = np.zeros((n_groups, 4))
    agl = np.zeros((4, max(n_groups, 1)), np.int64)
    agl[2:] = -1
    gm = np.zeros(2, np.int64)
    em = np.zeros(7, np.int64)
    em[EM_LT] = n_groups
    EP = np.zeros((1024, 2), np.int64)
    HT = np.full((1024, 2), -1, np.int64)
    em[EM_BITS] = 10
    return gI, gF, agl, gm, EP, HT, em


@_leaf
def _alist_move(src, dst, agl, gI):
    """The active list's group at ``src`` moves to ``dst``."""
    if src != dst:
        h = agl[0, src]
        agl[0, dst] = h
        gI[h, G_APOS] = dst


@_leaf
def _gh_put(agl, g, i):
    agl[1, i] = g
    agl[2, g] = i


@_leaf
def _gh_fix(i, n, agl, gF):
    """Restore the settled heap (``n`` entries, keyed by projected end) around its entry at ``i``: up while
    the parent ends later, else down while a child ends sooner."""
    g = agl[1, i]
    key = gF[g, F_FIN]
    while i > 0 and gF[agl[1, (i - 1) >> 1], F_FIN] > key:
        p = (i - 1) >> 1
        _gh_put(agl, agl[1, p], i)
        i = p
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and gF[agl[1, c + 1], F_FIN] < gF[agl[1, c], F_FIN]:
            c += 1
        if gF[agl[1, c], F_FIN] >= key:
            break
        _gh_put(agl, agl[1, c], i)
        i = c
    _gh_put(agl, g, i)


@_leaf
def _settle(g, agl, gm, gI, gF, EP):
    """Group g (on the work list, frozen alone at its current rate) leaves it for the settled heap."""
    gm[1] -= 1
    p = gI[g, G_APOS]
    _alist_move(gm[1], p, agl, gI)
    agl[0, gm[1]] = g
    gI[g, G_APOS] = gm[1]
    n = gm[0] - gm[1]
    agl[1, n - 1] = g
    _gh_fix(n - 1, n, agl, gF)
    st = gI[g, G_EST]
    for j in range(st, st + gI[g, G_ELEN]):
        agl[3, EP[j, 0]] = g


@_leaf
def _unsettle(g, agl, gm, gI, gF, EP):
    """Settled group g goes back on the work list (last)."""
    n = gm[0] - gm[1]
    i = agl[2, g]
    agl[2, g] = -1
    if i != n - 1:
        agl[1, i] = agl[1, n - 1]
        _gh_fix(i, n - 1, agl, gF)
    p = gI[g, G_APOS]
    _alist_move(gm[1], p, agl, gI)
    agl[0, gm[1]] = g
    gI[g, G_APOS] = gm[1]
    gm[1] += 1
    st = gI[g, G_EST]
    for j in range(st, st + gI[g, G_ELEN]):
        agl[3, EP[j, 0]] = -1


@_leaf
def _v_at(g, t, gF):
    """Group g's virtual clock at ``t`` (not before the time it was brought to) at its current rate."""
    dt = t - gF[g, F_VT]
    if dt > 0 and gF[g, F_LEV] < np.inf:
        return gF[g, F_V] + gF[g, F_LEV] * dt
    return gF[g, F_V]


@_leaf
def _vsync(g, now, gF):
    """Bring group g's virtual clock to ``now`` at its current rate."""
    gF[g, F_V] = _v_at(g, now, gF)
    gF[g, F_VT] = now


@_leaf
def join(s, g, remaining, now, rows, lens, sgrp, tag, hp, gI, gF, agl, gm, EP, HT, em, fw):
    """Slot ``s`` (``remaining`` bytes) joins group ``g`` at ``now``; a settled group it joins or whose
    links it crosses goes back on the work list."""
    for j in range(lens[s]):
        o = agl[3, rows[s, j]]
        if o >= 0:
            _unsettle(o, agl, gm, gI, gF, EP)
    if agl[2, g] >= 0:   # (a flow joins a link of its route, so this is done above)
        _unsettle(g, agl, gm, gI, gF, EP)
    _enter(s, g, remaining, now, rows, lens, sgrp, tag, hp, gI, gF, agl, gm, EP, HT, em, fw)
    if fw.shape[0] > 3:   # (link bytes kept: a new flow's links go on from what they carried at ``now``)
        for q in range(lens[s]):
            fw[3, rows[s, q]] -= remaining


@_leaf
def leave(s, rows, lens, sgrp, tag, hp, gI, gF, agl, gm, EP, HT, em, fw):
    """Slot ``s`` leaves its group (it ended, or its bottleneck changed), which goes back on the work list."""
    g = sgrp[s]
    if agl[2, g] >= 0:
        _unsettle(g, agl, gm, gI, gF, EP)
    _exit(s, rows, lens, sgrp, tag, hp, gI, agl, gm, EP, HT, em, fw)


@_leaf
def _enter(s, g, remaining, now, rows, lens, sgrp, tag, hp, gI, gF, agl, gm, EP, HT, em, fw):
    """:func:`join` for a group on the work list or without members (in a fill: no settled group is near)."""
    if gI[g, G_N] == 0:   # a new group: last of the work list (the first settled group moves to the end)
        gF[g, F_V] = 0.0
        gF[g, F_VT] = now
        gF[g, F_LEV] = 0.0
        gI[g, G_ROOT] = -1
        _alist_move(gm[1], gm[0], agl, gI)
        agl[0, gm[1]] = g
        gI[g, G_APOS] = gm[1]
        gm[0] += 1
        gm[1] += 1
    else:
        _vsync(g, now, gF)
    tag[s] = remaining + gF[g, F_V]
    sgrp[s] = g
    if fw.shape[0] > 3:   # link bytes kept (link_bytes_at)
        for q in range(lens[s]):
            fw[3, rows[s, q]] += tag[s]
    hp[s, P_CHILD] = -1
    hp[s, P_SIB] = -1
    hp[s, P_PREV] = -1
    root = gI[g, G_ROOT]
    gI[g, G_ROOT] = s if root < 0 else _ph_meld(root, s, tag, hp)
    gI[g, G_N] += 1
    _nz_route(g, s, 1, rows, lens, EP, HT, em, gI)


@_leaf
def _exit(s, rows, lens, sgrp, tag, hp, gI, agl, gm, EP, HT, em, fw):
    """:func:`leave` from a group on the work list."""
    g = sgrp[s]
    if fw.shape[0] > 3:
        for q in range(lens[s]):
            fw[3, rows[s, q]] -= tag[s]
    gI[g, G_ROOT] = _ph_remove(gI[g, G_ROOT], s, tag, hp)
    gI[g, G_N] -= 1
    _nz_route(g, s, -1, rows, lens, EP, HT, em, gI)
    if gI[g, G_N] == 0:   # the work list's last fills the hole, the active list's last the work list's end
        gm[1] -= 1
        gm[0] -= 1
        _alist_move(gm[1], gI[g, G_APOS], agl, gI)
        _alist_move(gm[0], gm[1], agl, gI)
    sgrp[s] = -1


@_leaf
def pick_group(s, rows, lens, length, lcap, capv, n_real, gI, gF):
    """A first guess of slot ``s``'s bottleneck: the link of its route with the lowest known or estimated level.

    Only a guess (a wrong one costs a move in the next fill); it is always a
    link that can bottleneck: finite capacity, or a cap (virtual link).
    """
    best = -1
    bv = np.inf
    for j in range(lens[s]):
        m = rows[s, j]
        if gI[m, G_N] > 0:
            v = gF[m, F_LEV]
        elif m >= n_real:
            v = capv[m]
        elif lcap[m] < np.inf:
            v = lcap[m] / max(length[m], 1)
        else:
            continue
        if best < 0 or v < bv:
            best = m
            bv = v
    return best


@_leaf
def fill_groups(now, n_real, lcap, capv, rows, lens, sgrp, tag, hp, seg, pool, meta, iw, fw,
                gI, gF, agl, gm, EP, HT, em):
    """Re-solve max-min at ``now`` for the flows in the work list's groups; returns (earliest projected end of
    any group, 0). Groups found alone on their links are settled (see "Settled groups").

    When moving flows could overflow the entry table or pool it returns (inf,
    entries to add) instead: the caller makes room (:func:`entry_room`) and
    calls again; the moves made so far are kept (each leaves a valid state).

    ``seg``/``pool``/``meta``: the link -> slot lists (:mod:`topoplan.sim._loop`),
    over real and virtual links; ``iw`` (4 x Lt), ``fw`` rows 0-1 (Lt): scratch; ``fw`` row 2: each link's
    ``-OVERFULL * lcap``, written by a state's first fill (``lcap`` is the run's); ``fw`` row 3, when
    there, the per-link sums :func:`link_bytes_at` reads, which the moves keep.
    Leaves the work list's groups' rates, clocks (at ``now``) and projected
    first ends set; a settled group keeps its own (its clock where the fill
    that settled it left it), which stay exact while it is settled.
    """
    start, length, live = seg[0], seg[1], seg[3]
    cnt, hv, mark, cl = iw[0], iw[1], iw[2], iw[3]
    rem, hk, thr = fw[0], fw[1], fw[2]
    inf = np.inf
    n_live = meta[1]
    n_lt = em[EM_LT]
    n_wl = gm[1]
    if em[EM_THR] == 0:   # the freeze's test for links over capacity, once (the same product it would take)
        for l in range(n_lt):
            thr[l] = -OVERFULL * lcap[l]
        em[EM_THR] = 1
    # where each pass starts the links' counts: every link in one contiguous pass, the live links, or (when
    # groups are settled) only the work list's links, whichever is least work. The settled groups' links
    # are never read: no flow of the work list crosses them.
    init = 0 if 4 * n_live >= n_lt else 1
    if n_wl < gm[0]:
        n_e = 0
        for a in range(n_wl):
            n_e += gI[agl[0, a], G_ELEN]
        if 2 * n_e < (n_lt // 4 if init == 0 else n_live):
            init = 2
    em[EM_FILL] += 1
    stamp = em[EM_FILL]
    nc = 0
    first = True
    while True:
        em[EM_PASS] += 1
        if init == 0:
            for l in range(n_lt):
                cnt[l] = length[l]
                rem[l] = lcap[l]
        elif init == 1:
            for t in range(n_live):
                l = live[t]
                cnt[l] = length[l]
                rem[l] = lcap[l]
        else:
            for a in range(gm[1]):   # (the fill moves flows between groups: the work list changes)
                g = agl[0, a]
                st = gI[g, G_EST]
                for j in range(np.uint64(st), np.uint64(st + gI[g, G_ELEN])):   # (unsigned: see the freeze)
                    m = np.uint64(EP[j, 0])
                    cnt[m] = length[m]
                    rem[m] = lcap[m]
        # A group alone on its links (every flow crossing them is one of its members) whose own link is the
        # lowest share on its members' routes interacts with no other group: it freezes at that share now,
        # in any order, without the heap (in a replay most groups are one or two flows between two nodes).
        left = 0
        for a in range(gm[1]):
            g = agl[0, a]
            left += gI[g, G_N]
            gI[g, G_FRZ] = 0
            if first:   # the candidate links: every group's (each flow's current bottleneck)
                _vsync(g, now, gF)
                mark[g] = stamp
                cl[nc] = g
                nc += 1
            if g >= n_real:
                continue
            st = gI[g, G_EST]
            en = st + gI[g, G_ELEN]
            alone = True
            for j in range(np.uint64(st), np.uint64(en)):   # its members are all its links' flows...
                if EP[j, 1] != cnt[np.uint64(EP[j, 0])]:
                    alone = False
                    break
            if not alone:   # (most groups share a link: their level, a division, is not taken)
                continue
            lev = rem[g] / cnt[g]
            for j in range(np.uint64(st), np.uint64(en)):   # ...and its own link is the lowest share on them
                m = EP[j, 0]
                um = np.uint64(m)
                if capv[um] < lev if m >= n_real else lcap[um] < EP[j, 1] * lev:
                    alone = False
                    break
            if alone:
                for j in range(np.uint64(st), np.uint64(en)):
                    um = np.uint64(EP[j, 0])
                    cnt[um] = 0
                    rem[um] -= EP[j, 1] * lev
                gI[g, G_FRZ] = 2
                gF[g, F_LEV] = lev
                left -= gI[g, G_N]
        first = False
        # heap of the other candidates' levels; they only grow as groups freeze, so a stale key is a lower bound
        hs = 0
        for c in range(nc):
            l = cl[c]
            if cnt[l] > 0 and rem[l] < inf:
                hk[hs] = rem[l] / cnt[l]
                hv[hs] = l
                hs += 1
        for l in range(n_real, n_lt):   # caps are always candidates (few; a cap is per flow, not shared)
            if length[l] > 0 and agl[3, l] < 0:
                hk[hs] = capv[l]
                hv[hs] = l
                hs += 1
        over = False
        for i in range(hs // 2 - 1, -1, -1):
            _sift_down(fw, iw, hs, i)
        level = 0.0
        while left > 0:
            hs, l, cur = _share_top(iw, fw, hs, capv, n_real)
            if l < 0:
                break
            level = max(level, cur)   # never down, whatever the rounding
            if cnt[l] > gI[l, G_N]:   # unfrozen flows of other groups cross l: it is their bottleneck now
                add = (cnt[l] - gI[l, G_N]) * rows.shape[1]
                if not fits(em[EM_LIVE] + add, pool_need(gI[l, G_ELEN], add), EP, em):
                    return inf, add   # the caller makes room and fills again (moves so far are kept)
                for k in range(start[l], start[l] + length[l]):
                    s = pool[k]
                    g = sgrp[s]
                    if g != l and gI[g, G_FRZ] == 0:
                        remaining = tag[s] - gF[g, F_V]
                        _exit(s, rows, lens, sgrp, tag, hp, gI, agl, gm, EP, HT, em, fw)
                        _enter(s, l, remaining, now, rows, lens, sgrp, tag, hp, gI, gF, agl, gm, EP, HT, em, fw)
            st = gI[l, G_EST]
            # (unsigned indices: no wrap-around of negative ones, ~6 instructions an entry in the hottest loop)
            for j in range(np.uint64(st), np.uint64(st + gI[l, G_ELEN])):   # freeze group l: its flows leave
                m = np.uint64(EP[j, 0])                                      # every link they cross
                c = EP[j, 1]
                cnt[m] -= c
                rem[m] -= c * level
                # Max-min over the candidates only: if no other link ends over its capacity, these rates
                # are also max-min over all links (the leximin-best point of a larger set lies in the
                # smaller one). A link that does (capacity only falls during a pass, so it is seen here)
                # becomes a candidate and the fill runs again. Caps have infinite capacity here.
                if rem[m] < thr[m] and mark[m] != stamp:
                    mark[m] = stamp
                    cl[nc] = m
                    nc += 1
                    over = True
            gI[l, G_FRZ] = 1
            gF[l, F_LEV] = level
            left -= gI[l, G_N]
        if not over:
            break
    t_done = inf
    for a in range(gm[1] - 1, -1, -1):   # (downwards: settling one moves the work list's last into its place)
        g = agl[0, a]
        if gI[g, G_FRZ] == 0:   # no finite link left (cannot happen for flows with a bottleneck): unbounded
            gF[g, F_LEV] = inf
        fin = now + (tag[gI[g, G_ROOT]] - gF[g, F_V]) / gF[g, F_LEV]
        gF[g, F_FIN] = fin
        t_done = min(t_done, fin)
        if gI[g, G_FRZ] == 2:
            _settle(g, agl, gm, gI, gF, EP)
    if gm[0] > gm[1]:
        t_done = min(t_done, gF[agl[1, 0], F_FIN])
    return t_done, 0


@_kernel
def ending(horizon, out, rows, lens, sgrp, tag, hp, gI, gF, agl, gm, gbuf, EP, HT, em, fw):
    """Take every flow projected to end by ``horizon`` out of its group, writing their slots into ``out``.

    Returns ``(out, n)`` (``out`` grown when full). A flow's projected end
    is its group's ``VT + (tag - V) / rate``, the same expression the last
    fill gave its group's first member.
    """
    n_out = 0
    ng = 0
    while gm[0] > gm[1] and gF[agl[1, 0], F_FIN] <= horizon:   # settled groups with flows to end: work list
        _unsettle(agl[1, 0], agl, gm, gI, gF, EP)
    for a in range(gm[1]):
        g = agl[0, a]
        if gF[g, F_FIN] <= horizon:
            gbuf[ng] = g
            ng += 1
    for q in range(ng):
        g = gbuf[q]
        v, vt, lev = gF[g, F_V], gF[g, F_VT], gF[g, F_LEV]
        while gI[g, G_N] > 0:
            r = gI[g, G_ROOT]
            if vt + (tag[r] - v) / lev > horizon:
                break
            _exit(r, rows, lens, sgrp, tag, hp, gI, agl, gm, EP, HT, em, fw)
            if n_out == len(out):
                out = np.concatenate((out, np.empty(n_out, np.int64)))
            out[n_out] = r
            n_out += 1
    return out, n_out


@_leaf
def link_bytes_at(t, k, tl, n_links, fw, gI, gF, agl, gm, EP):
    """Write into ``tl[:, k]`` the bytes each real link has carried by time ``t`` (not before the last fill).

    A flow in group g has sent ``size - (tag - V_g(t))``; ``fw[3, l]`` keeps, for the flows that crossed
    link l, the sum of their ``tag - size`` while they transfer and of ``-size`` once done (:func:`join`,
    :func:`_enter`, :func:`_exit` keep it), so the link's bytes are ``sum_g N(g, l) V_g(t) - fw[3, l]``:
    one pass over the groups' N entries, not over the flows. The utilization timeline takes these
    samples at every interval boundary; without one ``fw`` has three rows and nothing keeps row 3.
    """
    for l in range(n_links):
        tl[l, k] = -fw[3, l]
    for a in range(gm[0]):
        g = agl[0, a]
        v = _v_at(g, t, gF)
        st = gI[g, G_EST]
        for j in range(st, st + gI[g, G_ELEN]):
            l = EP[j, 0]
            if l < n_links:
                tl[l, k] += EP[j, 1] * v
