"""The compiled event loop's per-bottleneck flow state (topoplan.sim._flows, "max-min rates per bottleneck link").

Each structure is checked against a plain reference on random operations:
the N(g, l) table and the pairing heaps through ``join``/``leave``/``ending``,
and ``fill_groups`` against the per-flow progressive filling
(:func:`topoplan.sim.maxmin.maxmin_rates`), from deliberately wrong first groups so
that flows must move and non-candidate links overflow.
"""

import numpy as np
import pytest

pytest.importorskip("numba")

from topoplan.sim import _flows as C  # noqa: E402
from topoplan.sim.maxmin import maxmin_rates  # noqa: E402
from topoplan.sim.routes import LinkSet  # noqa: E402


def _state(n_links, n_slots, width):
    gI, gF, agl, gm, EP, HT, em = C.new_state(n_links)
    return dict(rows=np.full((n_slots, width), -1, np.int64), lens=np.zeros(n_slots, np.int64),
                sgrp=np.full(n_slots, -1, np.int64), tag=np.zeros(n_slots), hp=np.full((n_slots, 3), -1, np.int64),
                gI=gI, gF=gF, agl=agl, gm=gm, EP=EP, HT=HT, em=em, fw=np.zeros((4, n_links)))


def _join(st, s, g, remaining, now):
    st["EP"], st["HT"] = C.entry_room(st["em"][C.EM_LIVE] + st["rows"].shape[1],
                                      C.pool_need(st["gI"][g, C.G_ELEN], st["rows"].shape[1]),
                                      st["EP"], st["HT"], st["gI"], st["agl"], st["gm"], st["em"])
    C.join(s, g, remaining, now, st["rows"], st["lens"], st["sgrp"], st["tag"], st["hp"], st["gI"], st["gF"],
           st["agl"], st["gm"], st["EP"], st["HT"], st["em"], st["fw"])


def _leave(st, s):
    C.leave(s, st["rows"], st["lens"], st["sgrp"], st["tag"], st["hp"], st["gI"], st["gF"], st["agl"], st["gm"],
            st["EP"], st["HT"], st["em"], st["fw"])


def _table(st, g):
    """Group g's N entries read through its segment, and each looked up through the hash table."""
    gI, EP, HT, em = st["gI"], st["EP"], st["HT"], st["em"]
    seg = EP[gI[g, C.G_EST]:gI[g, C.G_EST] + gI[g, C.G_ELEN]]
    out = {}
    for link, count in seg.tolist():
        i = C._h_slot(HT, g * em[C.EM_LT] + link, em[C.EM_BITS])
        assert HT[i, 0] == g * em[C.EM_LT] + link and seg[HT[i, 1], 0] == link
        out[link] = count
    return out


@pytest.mark.parametrize("seed", range(4))
def test_join_leave_keep_counts_heaps_and_active_list(seed):
    rng = np.random.default_rng(seed)
    n_links, n_slots, width = 9, 300, 4
    st = _state(n_links, n_slots, width)
    members = {}   # slot -> (group, remaining at join + V)
    for step in range(3000):
        s = int(rng.integers(n_slots))
        if s in members:
            _leave(st, s)
            del members[s]
        else:
            route = rng.choice(n_links, int(rng.integers(1, width + 1)), replace=False)
            st["rows"][s, :len(route)] = route
            st["lens"][s] = len(route)
            g = int(rng.choice(route))
            _join(st, s, g, float(rng.integers(1, 50)), 0.0)   # clocks stay at 0: tag == remaining
            members[s] = g
        if step % 97 == 0 or step == 2999:
            gI, agl, gm = st["gI"], st["agl"], st["gm"]
            active = sorted(agl[0, :gm[0]].tolist())
            assert active == sorted(set(members.values()))
            for g in range(n_links):
                mine = [t for t, h in members.items() if h == g]
                assert gI[g, C.G_N] == len(mine)
                want = {}
                for t in mine:
                    for link in st["rows"][t, :st["lens"][t]].tolist():
                        want[link] = want.get(link, 0) + 1
                assert _table(st, g) == want
                if mine:
                    assert st["tag"][gI[g, C.G_ROOT]] == min(st["tag"][mine])
            assert st["em"][C.EM_LIVE] == sum(len(_table(st, g)) for g in active)


def test_ending_takes_flows_by_projected_end():
    st = _state(2, 8, 1)
    st["rows"][:, 0] = 0
    st["lens"][:] = 1
    for s, size in enumerate([5.0, 1.0, 3.0, 1.0, 8.0, 2.0]):
        _join(st, s, 0, size, 0.0)
    st["gF"][0, C.F_LEV] = 1.0                       # 1 B/s from time 0, as a fill would set it
    st["gF"][0, C.F_FIN] = 1.0
    gbuf = np.zeros(2, np.int64)
    out, n = C.ending(2.0, np.zeros(1, np.int64), st["rows"], st["lens"], st["sgrp"], st["tag"], st["hp"],
                      st["gI"], st["gF"], st["agl"], st["gm"], gbuf, st["EP"], st["HT"], st["em"], st["fw"])
    assert sorted(out[:n].tolist()) == [1, 3, 5]     # the flows of 1, 1 and 2 bytes; the rest stay
    assert st["gI"][0, C.G_N] == 3 and st["tag"][st["gI"][0, C.G_ROOT]] == 3.0


def _fill_case(rng, n_links, n_flows, width, caps):
    """Random links and routes; every flow first put in a random group of its route (usually wrong)."""
    bw = rng.uniform(1e9, 4e9, n_links)
    shared = np.ones(n_links, bool)
    if caps:
        shared[rng.choice(n_links, 2, replace=False)] = False
    links = LinkSet(bw, np.zeros(n_links), shared)
    routes = [rng.choice(n_links, int(rng.integers(1, width + 1)), replace=False) for _ in range(n_flows)]
    expected = maxmin_rates(links, routes, solver="numpy")
    # run_core's view: shared links keep their capacity, each distinct fat-pipe cap is a virtual link
    lcap = np.where(shared, bw, np.inf)
    cap_values = np.unique(bw[~shared])
    n_lt = n_links + len(cap_values)
    lcap2 = np.concatenate([lcap, np.full(len(cap_values), np.inf)])
    capv = np.concatenate([np.full(n_links, np.inf), cap_values])
    st = _state(n_lt, n_flows, width + 1)
    for s, r in enumerate(routes):
        row = [int(x) for x in r if shared[x]]
        cap = bw[r][~shared[r]]
        if len(cap):
            row.append(n_links + int(np.searchsorted(cap_values, cap.min())))
        st["rows"][s, :len(row)] = row
        st["lens"][s] = len(row)
    seg = np.zeros((5, n_lt), np.int64)
    pool = np.zeros(8 * int(st["lens"].sum()) + 8 * n_lt + 64, np.int64)
    meta = np.zeros(2, np.int64)
    back = np.zeros_like(st["rows"])
    C.csc_insert(np.arange(n_flows), st["rows"], st["lens"], back, seg, pool, meta)
    for s in range(n_flows):
        ok = [x for x in st["rows"][s, :st["lens"][s]] if x >= n_links or np.isfinite(lcap2[x])]
        _join(st, s, int(rng.choice(ok)), 1e6, 0.0)
    iw = np.zeros((4, n_lt), np.int64)
    return st, expected, (n_links, lcap2, capv, seg, pool, meta, iw, st["fw"])


def _fill(st, ctx, now=0.0):
    n_links, lcap2, capv, seg, pool, meta, iw, fw = ctx
    while True:
        t_done, need = C.fill_groups(now, n_links, lcap2, capv, st["rows"], st["lens"], st["sgrp"],
                                     st["tag"], st["hp"], seg, pool, meta, iw, fw, st["gI"], st["gF"], st["agl"],
                                     st["gm"], st["EP"], st["HT"], st["em"])
        if need == 0:
            return t_done
        st["EP"], st["HT"] = C.entry_room(st["em"][C.EM_LIVE] + need, C.pool_need(st["gI"][:, C.G_ELEN].max(), need),
                                          st["EP"], st["HT"], st["gI"], st["agl"], st["gm"], st["em"])


@pytest.mark.parametrize("seed,caps", [(0, False), (1, False), (2, True), (3, True), (4, True)])
def test_fill_groups_is_exact_max_min_from_wrong_groups(seed, caps):
    rng = np.random.default_rng(seed)
    n_flows = 400
    st, expected, ctx = _fill_case(rng, 14, n_flows, 4, caps)
    t_done = _fill(st, ctx)
    got = st["gF"][st["sgrp"], C.F_LEV]
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    assert t_done == pytest.approx(1e6 / expected.max(), rel=1e-12)   # all have 1e6 bytes left: the fastest ends first
    # every flow now sits at its bottleneck: a second fill moves nothing and needs one pass
    groups, passes = st["sgrp"].copy(), st["em"][C.EM_PASS]
    _fill(st, ctx)
    assert (st["sgrp"] == groups).all() and st["em"][C.EM_PASS] == passes + 1


def test_fill_groups_makes_an_overfull_link_a_candidate():
    # flows 0 and 1 cross links 0 and 1; both start in group 0 (1 GB/s), but link 1 (0.5 GB/s) is the
    # bottleneck: over the candidates alone link 1 would carry 1 GB/s, so it must join them
    links = LinkSet([1e9, 5e8], [0, 0], [True, True])
    st = _state(2, 2, 2)
    st["rows"][:] = [[0, 1], [0, 1]]
    st["lens"][:] = 2
    seg = np.zeros((5, 2), np.int64)
    pool = np.zeros(64, np.int64)
    meta = np.zeros(2, np.int64)
    C.csc_insert(np.arange(2), st["rows"], st["lens"], np.zeros((2, 2), np.int64), seg, pool, meta)
    for s in range(2):
        _join(st, s, 0, 1e6, 0.0)
    ctx = (2, np.array([1e9, 5e8]), np.full(2, np.inf), seg, pool, meta, np.zeros((4, 2), np.int64), st["fw"])
    _fill(st, ctx)
    assert st["em"][C.EM_PASS] == 2
    assert st["sgrp"].tolist() == [1, 1]
    np.testing.assert_allclose(st["gF"][st["sgrp"], C.F_LEV], maxmin_rates(links, [[0, 1], [0, 1]]), rtol=1e-15)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fill_groups_groups_alone_on_their_links(seed):
    # disjoint link pairs (a, b), each carrying its own 1-3 flows, so every group is alone on its links;
    # a group starts on a or b at random, and where that is not the lower share its flows must still move
    rng = np.random.default_rng(seed)
    n_pairs = 30
    caps = rng.choice([1e9, 2e9, 3e9], size=2 * n_pairs)
    links = LinkSet(caps, np.zeros(2 * n_pairs), np.ones(2 * n_pairs, bool))
    routes = [[2 * p, 2 * p + 1] for p in range(n_pairs) for _ in range(int(rng.integers(1, 4)))]
    n_flows = len(routes)
    st = _state(2 * n_pairs, n_flows, 2)
    st["rows"][:] = routes
    st["lens"][:] = 2
    seg = np.zeros((5, 2 * n_pairs), np.int64)
    pool = np.zeros(8 * 2 * n_flows + 16 * n_pairs + 64, np.int64)
    meta = np.zeros(2, np.int64)
    C.csc_insert(np.arange(n_flows), st["rows"], st["lens"], np.zeros_like(st["rows"]), seg, pool, meta)
    first = {}
    for s, r in enumerate(routes):
        _join(st, s, first.setdefault(r[0], int(rng.choice(r))), 1e6, 0.0)
    ctx = (2 * n_pairs, caps.astype(float), np.full(2 * n_pairs, np.inf), seg, pool, meta,
           np.zeros((4, 2 * n_pairs), np.int64), st["fw"])
    _fill(st, ctx)
    np.testing.assert_allclose(st["gF"][st["sgrp"], C.F_LEV], maxmin_rates(links, routes), rtol=1e-15)
    low = np.where(caps[0::2] <= caps[1::2], np.arange(0, 2 * n_pairs, 2), np.arange(1, 2 * n_pairs, 2))
    assert all(st["sgrp"][s] in (r[0], r[1]) and caps[st["sgrp"][s]] == caps[low[r[0] // 2]] for s, r in enumerate(routes))


def _check_settled(st, n_links):
    """The work list / settled partition, the settled heap and the links' owners are consistent."""
    gI, gF, agl, gm = st["gI"], st["gF"], st["agl"], st["gm"]
    n_act, n_wl = int(gm[0]), int(gm[1])
    assert all(gI[agl[0, a], C.G_APOS] == a for a in range(n_act))
    settled = agl[0, n_wl:n_act].tolist()
    assert sorted(agl[1, :n_act - n_wl].tolist()) == sorted(settled)
    for i, g in enumerate(agl[1, :n_act - n_wl].tolist()):
        assert agl[2, g] == i
        assert i == 0 or gF[agl[1, (i - 1) // 2], C.F_FIN] <= gF[g, C.F_FIN]
    owner = {link: g for g in settled for link in _table(st, g)}
    assert {link: int(agl[3, link]) for link in range(n_links) if agl[3, link] >= 0} == owner
    assert all(agl[2, g] == -1 for g in agl[0, :n_wl].tolist())


@pytest.mark.parametrize("seed,caps", [(0, False), (1, False), (2, False), (3, True), (4, True)])
def test_settled_groups_keep_rates_and_clocks_exact_across_events(seed, caps):
    # Flows come and go as in run_core: each round ends the flows due at the earliest projected end and starts
    # new ones. Most flows cross a private pair of links (their groups are alone and settle); some cross a
    # pair and a shared link, which puts the pair's group back on the work list. After every fill each flow's
    # rate must be the per-flow max-min one and its remaining bytes what integrating its past rates gives.
    # With caps, some flows also carry one of two fat-pipe caps (virtual links shared by value, not capacity).
    rng = np.random.default_rng(seed)
    n_pairs, n_shared = 8, 3
    n_links = 2 * n_pairs + n_shared
    bw = rng.choice([1e9, 2e9, 3e9], size=n_links).astype(float)
    cap_values = np.array([0.4e9, 1.5e9]) if caps else np.zeros(0)
    n_lt = n_links + len(cap_values)
    links = LinkSet(np.concatenate([bw, cap_values]), np.zeros(n_lt), np.arange(n_lt) < n_links)
    lcap2 = np.concatenate([bw, np.full(len(cap_values), np.inf)])
    capv = np.concatenate([np.full(n_links, np.inf), cap_values])
    n_slots, width = 64, 4
    st = _state(n_lt, n_slots, width)
    seg = np.zeros((5, n_lt), np.int64)
    pool = np.zeros(16 * n_slots * width + 16 * n_lt, np.int64)
    meta = np.zeros(2, np.int64)
    back = np.zeros((n_slots, width), np.int64)
    ctx = (n_links, lcap2, capv, seg, pool, meta, np.zeros((4, n_lt), np.int64), st["fw"])
    left = {}          # slot -> bytes still to send, integrated here from the rates of each round
    size = {}
    carried = np.zeros(n_links)   # bytes of the flows that ended, per real link
    rate = {}
    now, settled_seen, ended = 0.0, 0, 0

    def start(k):
        nonlocal pool
        free = [s for s in range(n_slots) if s not in left]
        new = np.array(free[:k], np.int64)
        for s in new.tolist():
            p = int(rng.integers(n_pairs))
            route = [2 * p, 2 * p + 1] + ([2 * n_pairs + int(rng.integers(n_shared))] if rng.random() < 0.2 else [])
            if caps and rng.random() < 0.3:
                route.append(n_links + int(rng.integers(len(cap_values))))
            st["rows"][s, :len(route)] = route
            st["lens"][s] = len(route)
            left[s] = size[s] = float(rng.integers(1, 20)) * 1e6
        C.csc_insert(new, st["rows"], st["lens"], back, seg, pool, meta)
        for s in new.tolist():
            g = C.pick_group(s, st["rows"], st["lens"], seg[1], lcap2, capv, n_links, st["gI"], st["gF"])
            _join(st, s, g, left[s], now)

    start(40)
    for _ in range(60):
        t_done = _fill(st, ctx, now)
        routes = [st["rows"][s, :st["lens"][s]].tolist() for s in sorted(left)]
        want = maxmin_rates(links, routes)
        got = np.array([st["gF"][st["sgrp"][s], C.F_LEV] for s in sorted(left)])
        np.testing.assert_allclose(got, want, rtol=1e-12)
        rate = dict(zip(sorted(left), want))
        gF, sgrp, tag = st["gF"], st["sgrp"], st["tag"]
        for s in left:   # remaining bytes through the group's clock, wherever it was last brought up to date
            g = sgrp[s]
            v = gF[g, C.F_V] + gF[g, C.F_LEV] * (now - gF[g, C.F_VT])
            assert tag[s] - v == pytest.approx(left[s], rel=1e-9)
        assert t_done == pytest.approx(now + min(left[s] / rate[s] for s in left), rel=1e-12)
        _check_settled(st, n_lt)
        want_b = carried.copy()   # the links' bytes so far, as the utilization timeline samples them
        for s in left:
            for link in st["rows"][s, :st["lens"][s]].tolist():
                if link < n_links:
                    want_b[link] += size[s] - left[s]
        got_b = np.zeros((n_links, 1))
        C.link_bytes_at(now, 0, got_b, n_links, st["fw"], st["gI"], st["gF"], st["agl"], st["gm"], st["EP"])
        np.testing.assert_allclose(got_b[:, 0], want_b, rtol=1e-9, atol=1e-3)
        settled_seen += int(st["gm"][0] - st["gm"][1])
        # advance to the first projected end and end what is due, as the loop's event does
        dt = t_done - now
        for s in left:
            left[s] -= rate[s] * dt
        now = t_done
        gbuf = np.zeros(n_lt, np.int64)
        out, n = C.ending(now * (1 + 1e-12), np.zeros(4, np.int64), st["rows"], st["lens"], st["sgrp"], st["tag"],
                          st["hp"], st["gI"], st["gF"], st["agl"], st["gm"], gbuf, st["EP"], st["HT"], st["em"],
                          st["fw"])
        done = sorted(out[:n].tolist())
        assert done and all(abs(left[s]) <= 1e-6 * 1e6 for s in done)
        assert all(left[s] > 1e-6 * 1e6 for s in left if s not in done)
        C.csc_remove(np.array(done, np.int64), st["rows"], st["lens"], back, seg, pool, meta)
        for s in done:
            for link in st["rows"][s, :st["lens"][s]].tolist():
                if link < n_links:
                    carried[link] += size[s]
            del left[s]
            st["lens"][s] = 0
        ended += n
        start(int(rng.integers(0, 2 * n + 1)))
        if not left:
            start(5)
    assert settled_seen > 40 and ended > 60   # the settled path was taken, many times
