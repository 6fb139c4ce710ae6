"""The papers' store-and-forward engine (topoplan/sim/paper.py), checked against hand-worked times and a brute-force model."""

import math

import numpy as np
import pytest

from topoplan.core.errors import TopoplanError
from topoplan.sim.routes import LinkSet, routes_to_csr
from topoplan.sim.paper import PaperEngine, simulate_paper

A1, B1 = 500e-9, 1.25e9     # node <-> EPS switch: 500 ns, 10 Gbps
A2, B2 = 500e-9, 2.5e9      # EPS uplinks: 500 ns, 20 Gbps
A3, B3 = 500e-9, 2.5e9      # OCS circuit: 500 ns, 20 Gbps


def links_of(bw, lat=1e-6, shared=True):
    bw = np.asarray(bw, float)
    return LinkSet(bw, np.broadcast_to(np.asarray(lat, float), bw.shape).copy(),
                   np.broadcast_to(np.asarray(shared, bool), bw.shape).copy())


def run(links, routes, starts, sizes, **kw):
    ptr, rl = routes_to_csr(routes)
    return simulate_paper(links, ptr, rl, np.asarray(starts, float), np.asarray(sizes, float), **kw)


def reference(links, routes, starts, sizes, queue_of_link=None, cut_through=None, chunk=65536.0):
    """Brute-force model: repeatedly serve the earliest pending hop arrival (ties: smallest flow id)."""
    bw, lat = links.bw_Bps.tolist(), links.latency_s.tolist()
    qof = (np.where(links.shared, np.arange(len(links)), -1) if queue_of_link is None
           else np.asarray(queue_of_link)).tolist()
    free = {}
    nf = len(routes)
    hop = [0] * nf
    arrive = [float(s) for s in starts]
    s_prev, e_prev = [0.0] * nf, [0.0] * nf
    finish = [None] * nf
    ct = cut_through or [[False] * len(r) for r in routes]
    while True:
        pending = [(arrive[f], f) for f in range(nf) if finish[f] is None]
        if not pending:
            return np.array(finish)
        a, f = min(pending)
        route, n, j = routes[f], float(sizes[f]), hop[f]
        if j == len(route):
            finish[f] = a
            continue
        link = route[j]
        if n == 0:
            s = e = a
        else:
            q = qof[link]
            s = max(a, free.get(q, -math.inf)) if q >= 0 else a
            e = s + n / bw[link]
            if j > 0 and ct[f][j]:
                e = max(e, e_prev[f] + lat[route[j - 1]] + min(n, chunk) / bw[link])
            if q >= 0:
                free[q] = e
        s_prev[f], e_prev[f] = s, e
        if j + 1 < len(route) and ct[f][j + 1]:
            arrive[f] = s + min(n, chunk) / bw[link] + lat[link]
        else:
            arrive[f] = e + lat[link]
        hop[f] = j + 1


# --------------------------------------------------------------------------- paper 003, Table 3

def fig2_links():
    """Links of paper 003's Fig. 2 used by the four routes of Table 3."""
    names = ["B>sw1", "sw1>C", "E>sw1", "sw2>J", "G>sw1", "sw1>F", "H>sw2", "sw2>I",   # node links (a1, b1)
             "sw1>core", "core>sw2",                                                   # uplinks (a2, b2)
             "A>D", "F>H"]                                                             # OCS circuits (a3, b3)
    bw = [B1] * 8 + [B2] * 2 + [B3] * 2
    lat = [A1] * 8 + [A2] * 2 + [A3] * 2
    return LinkSet(bw, lat, [True] * 12, names=names)


TABLE3 = {
    "B=>C": ([0, 1], lambda n: 2 * (A1 + n / B1)),
    "A=>D": ([10], lambda n: A3 + n / B3),
    "E=>J": ([2, 8, 9, 3], lambda n: 2 * (A1 + n / B1) + 2 * (A2 + n / B2)),
    "G=>F=>H=>I": ([4, 5, 11, 6, 7], lambda n: 4 * (A1 + n / B1) + A3 + n / B3),
}


@pytest.mark.parametrize("n", [4e6, 1.0])
@pytest.mark.parametrize("route", list(TABLE3))
def test_table3_single_message(route, n):
    path, cost = TABLE3[route]
    t0 = 3e-3
    finish = run(fig2_links(), [path], [t0], [n])
    assert finish[0] == pytest.approx(t0 + cost(n), rel=1e-12)


def test_table3_routes_together_do_not_interact():
    routes = [TABLE3[r][0] for r in TABLE3]
    finish = run(fig2_links(), routes, [0.0] * 4, [4e6] * 4)
    assert finish == pytest.approx([TABLE3[r][1](4e6) for r in TABLE3], rel=1e-12)


# --------------------------------------------------------------------------- contention

@pytest.mark.parametrize("sizes", [(1e6, 1e6), (3e6, 1e6), (1e6, 3e6)])
def test_simultaneous_messages_on_one_link_are_served_by_flow_id(sizes):
    b, a = 1e9, 2e-6
    finish = run(links_of([b], a), [[0], [0]], [0.0, 0.0], sizes)
    n0, n1 = sizes
    assert finish == pytest.approx([n0 / b + a, (n0 + n1) / b + a], rel=1e-12)


def _order(finish):
    """Flow ids in the order they finished."""
    return np.argsort(finish, kind="stable").tolist()


def test_tie_seed_0_is_the_flow_id_order():
    b, a, n = 1e9, 1e-6, 1e6
    routes, starts, sizes = [[0]] * 6, [0.0] * 6, [n] * 6
    default = run(links_of([b], a), routes, starts, sizes)
    assert run(links_of([b], a), routes, starts, sizes, tie_seed=0).tolist() == default.tolist()
    assert _order(default) == list(range(6))


def test_a_tie_seed_draws_the_order_of_simultaneous_arrivals():
    b, a, n, k = 1e9, 1e-6, 1e6, 6
    routes, starts, sizes = [[0]] * k, [0.0] * k, [n] * k
    orders = {s: _order(run(links_of([b], a), routes, starts, sizes, tie_seed=s)) for s in range(1, 6)}
    for s, order in orders.items():
        finish = run(links_of([b], a), routes, starts, sizes, tie_seed=s)
        assert _order(finish) == order                      # the same seed, the same order
        # one message at a time whatever the order: the j-th served ends at j * n / b + a
        assert sorted(finish.tolist()) == pytest.approx([(j + 1) * n / b + a for j in range(k)], rel=1e-12)
    assert len({tuple(o) for o in orders.values()} | {tuple(range(k))}) > 2   # seeds draw different orders


@pytest.mark.parametrize("tie_seed", [1, 7])
def test_a_tie_seed_leaves_arrivals_at_different_times_in_time_order(tie_seed):
    b, a, n = 1e9, 1e-6, 1e6
    routes, starts, sizes = [[0]] * 4, [3e-6, 2e-6, 1e-6, 0.0], [n] * 4
    assert run(links_of([b], a), routes, starts, sizes, tie_seed=tie_seed).tolist() == \
        run(links_of([b], a), routes, starts, sizes).tolist()


def test_a_tie_seed_orders_flows_added_in_several_calls():
    """The order is drawn per flow as it is added: flows added later take part in ties with earlier ones."""
    links = links_of([1e9], 0.0)
    eng = PaperEngine(links, tie_seed=3)
    eng.add_flows([0, 1, 2], [0, 0], [0.0, 0.0], [1e6, 1e6])
    eng.add_flows([0, 1, 2], [0, 0], [0.0, 0.0], [1e6, 1e6])
    eng.run()
    again = run(links, [[0]] * 4, [0.0] * 4, [1e6] * 4, tie_seed=3)
    assert eng.finish_s.tolist() == again.tolist()


@pytest.mark.parametrize("t1", [2e-4, 9.99e-4, 1e-3, 1.5e-3])
def test_later_message_waits_only_while_the_link_is_busy(t1):
    b, a, n = 1e9, 1e-6, 1e6            # the first message holds the link for 1 ms
    finish = run(links_of([b], a), [[0], [0]], [0.0, t1], [n, n])
    assert finish[0] == pytest.approx(n / b + a, rel=1e-12)
    assert finish[1] == pytest.approx(max(t1, n / b) + n / b + a, rel=1e-12)


def test_propagation_latency_does_not_occupy_the_link():
    b, a, n = 1e9, 5e-4, 1e6
    finish = run(links_of([b], a), [[0], [0]], [0.0, 0.0], [n, n])
    assert finish[1] == pytest.approx(2 * n / b + a, rel=1e-12)   # not 2 (a + n / b)


def test_message_reaching_a_busy_downstream_link_is_postponed():
    b0, b2, a = 2e9, 1e9, 1e-6
    n0, n1 = 1e6, 4e6
    # flow 1 holds link 2 from 0 to 4 ms; flow 0 arrives over link 0 at 0.5 ms + a
    finish = run(links_of([b0, 1e9, b2], a), [[0, 2], [2]], [0.0, 0.0], [n0, n1])
    assert finish[1] == pytest.approx(n1 / b2 + a, rel=1e-12)
    assert finish[0] == pytest.approx(n1 / b2 + n0 / b2 + a, rel=1e-12)


def test_later_injected_message_that_arrives_first_is_served_first():
    # flow 0 (t=0) crosses a slow link before the shared link 2; flow 1 (t=1 ms) a fast one
    b_slow, b_fast, b2, a, n = 1e8, 1e10, 1e8, 1e-6, 1e6
    t1 = 1e-3
    finish = run(links_of([b_slow, b_fast, b2], a), [[0, 2], [1, 2]], [0.0, t1], [n, n])
    arrive0 = n / b_slow + a                 # 10 ms + a
    arrive1 = t1 + n / b_fast + a            # 1.1 ms + a: earlier, although injected later
    end1 = arrive1 + n / b2
    assert arrive1 < arrive0 < end1
    assert finish[1] == pytest.approx(end1 + a, rel=1e-12)
    assert finish[0] == pytest.approx(end1 + n / b2 + a, rel=1e-12)


def test_fat_pipe_never_postpones():
    b, a, n = 1e9, 1e-6, 1e6
    finish = run(links_of([b], a, shared=False), [[0]] * 3, [0.0] * 3, [n] * 3)
    assert finish == pytest.approx([n / b + a] * 3, rel=1e-12)


def test_fat_pipe_then_shared_link_queues_on_the_shared_one():
    b, a, n = 1e9, 1e-6, 1e6
    links = LinkSet([b, b], [a, a], [False, True])
    finish = run(links, [[0, 1], [0, 1]], [0.0, 0.0], [n, n])
    assert finish == pytest.approx([2 * (n / b + a), 3 * n / b + 2 * a], rel=1e-12)


def test_explicit_queue_overrides_fat_pipe_default():
    b, a, n = 1e9, 1e-6, 1e6
    finish = run(links_of([b], a, shared=False), [[0], [0]], [0.0, 0.0], [n, n], queue_of_link=[0])
    assert finish[1] == pytest.approx(2 * n / b + a, rel=1e-12)


@pytest.mark.parametrize("queues, serialized", [(None, False), ([7, 7], True), ([-1, -1], False)])
def test_device_queue_serializes_links_into_one_device(queues, serialized):
    # links 0 (X->D, 1 GB/s) and 1 (Y->D, 2 GB/s) both enter device D
    b0, b1, a, n = 1e9, 2e9, 1e-6, 1e6
    finish = run(links_of([b0, b1], a), [[0], [1]], [0.0, 0.0], [n, n], queue_of_link=queues)
    assert finish[0] == pytest.approx(n / b0 + a, rel=1e-12)
    # the queue is busy for n / beta of the link each message uses
    expected1 = (n / b0 + n / b1 + a) if serialized else (n / b1 + a)
    assert finish[1] == pytest.approx(expected1, rel=1e-12)


def test_zero_byte_message_neither_waits_nor_blocks():
    b, a, n = 1e9, 1e-6, 1e6
    links = links_of([b, b], a)
    routes = [[0], [0, 1], [0]]
    starts = [0.0, 1e-4, 2e-4]
    finish = run(links, routes, starts, [n, 0.0, n])
    assert finish[1] == pytest.approx(1e-4 + 2 * a, rel=1e-12)      # latencies only, link 0 busy
    assert finish[0] == pytest.approx(n / b + a, rel=1e-12)
    assert finish[2] == pytest.approx(2 * n / b + a, rel=1e-12)      # waits for flow 0 only


def test_empty_route_finishes_at_its_start():
    finish = run(links_of([1e9]), [[], [0]], [2.5, 0.0], [1e6, 1e6])
    assert finish[0] == 2.5


# --------------------------------------------------------------------------- cut-through

@pytest.mark.parametrize("b0, b1", [(1e9, 1e9), (1e9, 4e9), (4e9, 1e9)])
@pytest.mark.parametrize("n", [4e6, 1e3])
def test_cut_through_relay_hop(b0, b1, n):
    a0, a1, chunk = 1e-6, 2e-6, 65536.0
    links = LinkSet([b0, b1], [a0, a1], [True, True])
    finish = run(links, [[0, 1]], [0.0], [n], cut_through=[False, True], chunk_B=chunk)
    c = min(n, chunk)
    e0 = n / b0                                  # store-and-forward on the first hop
    s1 = c / b0 + a0                             # head of hop 1: first chunk in
    e1 = max(s1 + n / b1, e0 + a0 + c / b1)      # not before the tail is in and its last chunk sent
    assert finish[0] == pytest.approx(e1 + a1, rel=1e-12)
    store_forward = a0 + n / b0 + a1 + n / b1
    if n > chunk:
        assert finish[0] < store_forward
    else:
        assert finish[0] == pytest.approx(store_forward, rel=1e-12)


def test_cut_through_approaches_the_pipelined_time():
    b, a, chunk = 1e9, 1e-6, 65536.0
    links = links_of([b, b, b], a)
    n = 1e9                                       # n >> chunk
    finish = run(links, [[0, 1, 2]], [0.0], [n], cut_through=[False, True, True], chunk_B=chunk)
    assert finish[0] == pytest.approx(3 * a + (n + 2 * chunk) / b, rel=1e-12)
    assert finish[0] == pytest.approx(3 * a + n / b, rel=2e-4)       # the pipelined time
    assert finish[0] < 0.34 * (3 * (a + n / b))                      # store-and-forward: 3 n / b


@pytest.mark.parametrize("chunk", [4e6, 1e7])
def test_cut_through_with_chunk_at_least_n_is_store_and_forward(chunk):
    links = fig2_links()
    path = TABLE3["G=>F=>H=>I"][0]
    n = 4e6
    finish = run(links, [path], [0.0], [n], cut_through=[False] + [True] * 4, chunk_B=chunk)
    assert finish[0] == pytest.approx(TABLE3["G=>F=>H=>I"][1](n), rel=1e-12)


def test_cut_through_hop_waits_for_its_queue():
    b, a, chunk = 1e9, 1e-6, 1e5
    n0, n1 = 1e6, 5e5
    # flow 1 holds link 1 until 0.5 ms; flow 0's first chunk reaches link 1 at 0.1 ms + a
    finish = run(links_of([b, b], a), [[0, 1], [1]], [0.0, 0.0], [n0, n1],
                 cut_through=[False, True, False], chunk_B=chunk)
    s1 = max(chunk / b + a, n1 / b)
    e1 = max(s1 + n0 / b, n0 / b + a + chunk / b)
    assert s1 == n1 / b
    assert finish[0] == pytest.approx(e1 + a, rel=1e-12)


def test_cut_through_mask_on_first_position_is_ignored():
    links = links_of([1e9, 1e9])
    with_mask = run(links, [[0, 1]], [0.0], [1e6], cut_through=[True, False])
    without = run(links, [[0, 1]], [0.0], [1e6])
    assert with_mask[0] == without[0]


# --------------------------------------------------------------------------- against a brute-force model

@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("mode", ["links", "devices", "cut_through"])
def test_matches_brute_force_model(seed, mode):
    rng = np.random.default_rng(seed)
    n_links, n_flows = 6, 40
    links = LinkSet(rng.choice([1e9, 2e9, 5e9], n_links), rng.choice([0.0, 1e-6, 3e-6], n_links),
                    rng.random(n_links) < 0.8)
    routes = [rng.choice(n_links, size=rng.integers(0, 4), replace=False).tolist() for _ in range(n_flows)]
    starts = rng.choice([0.0, 1e-4, 2e-4], n_flows) + rng.uniform(0, 1e-4, n_flows) * (rng.random(n_flows) < 0.5)
    sizes = rng.choice([0.0, 1e3, 1e5, 1e6], n_flows)
    queues = rng.integers(-1, 3, n_links) if mode == "devices" else None
    ct = [(rng.random(len(r)) < 0.6).tolist() for r in routes] if mode == "cut_through" else None
    chunk = 4e4
    expected = reference(links, routes, starts, sizes, queue_of_link=queues, cut_through=ct, chunk=chunk)
    got = run(links, routes, starts, sizes, queue_of_link=queues, chunk_B=chunk,
              cut_through=None if ct is None else [x for r in ct for x in r])
    assert got == pytest.approx(expected, rel=1e-12)


# --------------------------------------------------------------------------- interface

def engine_with(routes, starts, sizes, bw=(1e9, 2e9, 4e9), lat=1e-6, **kw):
    eng = PaperEngine(links_of(list(bw), lat), **kw)
    ptr, rl = routes_to_csr(routes)
    ids = eng.add_flows(ptr, rl, np.asarray(starts, float), np.asarray(sizes, float))
    return eng, ids


def test_ids_are_consecutive_across_calls():
    eng, ids = engine_with([[0], [1]], [0, 0], [1, 1])
    assert ids.dtype == np.int64 and ids.tolist() == [0, 1]
    more = eng.add_flows([0, 1, 1, 3], [0, 1, 2], [0.0] * 3, [1.0] * 3)
    assert more.tolist() == [2, 3, 4]
    assert eng.add_flows([0], [], [], []).tolist() == []
    assert eng.n_flows == 5


def test_step_by_step_hop_events_and_finish():
    n, lat = 1e6, 1e-6
    eng, _ = engine_with([[0, 1, 2]], [0.0], [n], lat=lat)
    assert np.isnan(eng.finish_s).all() and eng.n_active == 0
    expected_t = [0.0, n / 1e9 + lat, n / 1e9 + n / 2e9 + 2 * lat]
    for t_exp in expected_t:
        assert eng.next_event_time() == pytest.approx(t_exp, rel=1e-12)
        t, done = eng.run_until_next_event()
        assert t == pytest.approx(t_exp, rel=1e-12) and eng.now == t
        assert done.dtype == np.int64 and done.size == 0
        assert np.isnan(eng.finish_s[0]) and eng.n_active == 1
    t, done = eng.run_until_next_event()
    end = n / 1e9 + n / 2e9 + n / 4e9 + 3 * lat
    assert t == pytest.approx(end, rel=1e-12) and done.tolist() == [0]
    assert eng.finish_s[0] == pytest.approx(end, rel=1e-12)
    assert eng.n_active == 0 and eng.n_events == 4 and eng.n_hop_events == 4
    t, done = eng.run_until_next_event()
    assert t == math.inf and done.size == 0
    assert eng.next_event_time() == math.inf


def test_finished_ids_are_sorted_and_batched_within_rel_tol():
    links = links_of([1e9, 1e9], 0.0)
    for tol, batches in [(1e-12, 1), (0.0, 2)]:
        eng = PaperEngine(links, rel_tol=tol)
        # flow 0 finishes 1e-14 s after flow 1 (both alone on their link)
        eng.add_flows([0, 1, 2], [0, 1], [1.0 + 1e-14, 1.0], [0.0, 0.0])
        got = []
        while eng.next_event_time() < math.inf:
            got.append(eng.run_until_next_event()[1].tolist())
        assert got == ([[0, 1]] if batches == 1 else [[1], [0]])
        assert eng.finish_s.tolist() == [1.0 + 1e-14, 1.0]     # exact per-flow times


def test_advance_to():
    eng, _ = engine_with([[0, 1]], [0.0], [1e6])
    eng.advance_to(-1.0)                      # backwards: no-op
    assert eng.now_s == 0.0
    eng.run_until_next_event()
    t_next = eng.next_event_time()
    with pytest.raises(TopoplanError, match="advance_to.*would skip the event"):
        eng.advance_to(t_next * 1.01)
    eng.advance_to(t_next / 2)
    assert eng.now_s == t_next / 2
    eng.advance_to(t_next)                    # up to the event itself is allowed
    assert eng.next_event_time() == t_next


def test_link_bytes_counts_passed_hops_then_whole_routes():
    eng, _ = engine_with([[0, 1, 2], [1]], [0.0, 1.0], [1e6, 5e5])
    eng.run_until_next_event()                # flow 0 on link 0
    assert eng.link_bytes().tolist() == [0.0, 0.0, 0.0]
    eng.run_until_next_event()                # flow 0 has arrived over link 0
    assert eng.link_bytes().tolist() == [1e6, 0.0, 0.0]
    eng.run()
    assert eng.link_bytes().tolist() == [1e6, 1.5e6, 1e6]
    assert eng.timeline() is None


def test_flows_added_after_advance_interleave_with_messages_in_flight():
    b, lat, n = 1e9, 1e-6, 1e6
    eng, _ = engine_with([[0, 1]], [0.0], [n], bw=(b, b), lat=lat)
    eng.run_until_next_event()
    t_arrive = eng.next_event_time()          # flow 0 reaches link 1
    assert t_arrive == pytest.approx(n / b + lat)
    t_new = t_arrive / 2
    eng.advance_to(t_new)
    # flow 1 asks for link 1 now, before flow 0 gets there; flow 2's past start is moved to now
    ids = eng.add_flows([0, 1, 2], [1, 1], [t_new, 0.0], [n, n])
    assert ids.tolist() == [1, 2]
    assert eng.next_event_time() == t_new
    eng.run()
    f = eng.finish_s
    assert f[1] == pytest.approx(t_new + n / b + lat, rel=1e-12)
    assert f[2] == pytest.approx(t_new + 2 * n / b + lat, rel=1e-12)
    assert f[0] == pytest.approx(t_new + 3 * n / b + lat, rel=1e-12)   # behind both


def test_incremental_injection_matches_batch():
    rng = np.random.default_rng(7)
    links = links_of([1e9, 2e9, 5e9, 1e9], [1e-6, 0.0, 2e-6, 5e-7])
    nf = 60
    routes = [rng.choice(4, size=rng.integers(1, 4), replace=False).tolist() for _ in range(nf)]
    starts = np.sort(rng.uniform(0, 5e-3, nf))
    sizes = rng.choice([0.0, 1e4, 1e6], nf)
    batch = run(links, routes, starts, sizes)
    eng = PaperEngine(links)
    for i in range(nf):                       # a replay loop: inject each flow when the clock reaches it
        while eng.next_event_time() < starts[i]:
            eng.run_until_next_event()
        eng.advance_to(starts[i])
        eng.add_flows([0, len(routes[i])], routes[i], [starts[i]], [sizes[i]])
    eng.run()
    assert eng.finish_s == pytest.approx(batch, rel=1e-12)


def test_run_reports_progress():
    eng, _ = engine_with([[0], [1], [2]], [0, 0, 0], [1, 1, 1])
    calls = []
    eng.run(lambda done, total: calls.append((done, total)))
    assert calls[-1] == (3, 3)


@pytest.mark.parametrize("kwargs, match", [
    ({"queue_of_link": [0, 1]}, "queue_of_link must have one entry per link"),
    ({"queue_of_link": [0, -2, 1]}, r"queue_of_link\[1\] must be an integer >= -1"),
    ({"queue_of_link": [0, 1.5, 1]}, r"queue_of_link\[1\] must be an integer"),
    ({"chunk_B": 0.0}, "chunk_B must be finite and > 0"),
    ({"chunk_B": math.inf}, "chunk_B must be finite and > 0"),
    ({"rel_tol": -1.0}, "rel_tol must be finite and >= 0"),
    ({"tie_seed": -1}, "tie_seed must be an integer >= 0"),
    ({"tie_seed": 1.5}, "tie_seed must be an integer >= 0"),
    ({"tie_seed": True}, "tie_seed must be an integer >= 0"),
])
def test_engine_parameters_are_validated(kwargs, match):
    with pytest.raises(TopoplanError, match=match):
        PaperEngine(links_of([1e9] * 3), **kwargs)


@pytest.mark.parametrize("flows, match", [
    (([0, 1], [0], [0.0], [-1.0], None), "bytes must be finite and >= 0"),
    (([0, 1], [0], [math.nan], [1.0], None), "start_s must be finite"),
    (([0, 1], [5], [0.0], [1.0], None), "link id out of range"),
    (([0, 1], [0], [0.0, 1.0], [1.0], None), "1 routes but 2 start times"),
    (([0, 2], [0, 1], [0.0], [1.0], [False]), "cut_through must have one entry per route position"),
])
def test_add_flows_is_validated(flows, match):
    eng = PaperEngine(links_of([1e9] * 3))
    with pytest.raises(TopoplanError, match=match):
        eng.add_flows(*flows[:4], cut_through=flows[4])
    assert eng.n_flows == 0


# -- the paper model through the whole simulator (topoplan.sim.run.simulate with SimModel(engine="paper")) -----------------

def _paper003(*sets):
    from topoplan.core.topology_io import load_topology

    # "Ours (narrow)": every EPS node link at 10 Gbps, so Table 3's beta_1 holds for relays' links too
    return load_topology("paper003", ["ocs.node_link_bw=10Gbps", "node.intra_bw=68Gbps", *sets])


def _one_message(topo, src_rank, dst_rank, n, circuits=None, contention="link", relay="store-and-forward",
                 extra=()):
    from topoplan.core.placement import sequential
    from topoplan.traffic.trace import Trace
    from topoplan.sim.run import simulate

    recs = [(src_rank, "send", dst_rank, n, -1, 256, 0.0, 0.0, -1, 0),
            (dst_rank, "recv", src_rank, n, -1, 256, 0.0, 0.0, -1, 0)] + list(extra)
    tr = Trace.from_records(recs, 256)
    model = {"model": "paper", "relay": relay, "paper_contention": contention}
    return simulate(topo, tr, sequential(256, topo), circuits=circuits, threshold_B=1.0, model=model)


@pytest.mark.parametrize("n", [4e6, 64e3])
def test_table3_routes_on_the_003_system(n):
    """003 Table 3 (f = 0) on the paper's own system: ranks 4 per node, 16 nodes per switch, 8 OCS nodes each."""
    t = _paper003()
    a1, b1, a2, b2, a3, b3 = 500e-9, 1.25e9, 500e-9, 2.5e9, 500e-9, 2.5e9
    # B => C: two nodes under one switch (ranks 4 and 8 live on nodes 1 and 2)
    assert _one_message(t, 4, 8, n)["makespan_s"] == pytest.approx(2 * (a1 + n / b1), rel=1e-9)
    # E => J: nodes under two switches, over the EPS uplinks (no circuits)
    assert _one_message(t, 4, 68, n)["makespan_s"] == pytest.approx(2 * (a1 + n / b1) + 2 * (a2 + n / b2), rel=1e-9)
    # A => D: two OCS nodes joined by a circuit (nodes 0 and 16, ranks 0 and 64)
    plan = {"circuits": [[0, 16]], "forwarding": {"1": {"1": 0}, "0": {"1": 16}, "16": {"0": 0}}}
    assert _one_message(t, 0, 64, n, plan)["makespan_s"] == pytest.approx(a3 + n / b3, rel=1e-9)
    # G => F => H => I: relayed by OCS nodes 0 and 16 (node 1 -> node 17: ranks 4 -> 68)
    expected = 4 * (a1 + n / b1) + a3 + n / b3
    res = _one_message(t, 4, 68, n, plan)
    assert res["makespan_s"] == pytest.approx(expected, rel=1e-9)
    assert res["sim_model"] == {"model": "paper", "relay": "store-and-forward", "relay_chunk_B": 65536.0,
                                "paper_contention": "link"}
    # pipelined relays forward the first 64 KiB chunk at each relay; the switches still store and forward
    c = min(n, 65536.0)
    s1, e1 = 0.0, n / b1                                 # G -> S0
    s2 = e1 + a1; e2 = s2 + n / b1                       # S0 -> F (switch: whole message)
    s3 = s2 + c / b1 + a1; e3 = max(s3 + n / b3, e2 + a1 + c / b3)    # F => H (relay F: first chunk)
    s4 = s3 + c / b3 + a3; e4 = max(s4 + n / b1, e3 + a3 + c / b1)    # H -> S1 (relay H: first chunk)
    e5 = e4 + a1 + n / b1                                # S1 -> I (switch: whole message)
    pip = _one_message(t, 4, 68, n, plan, relay="pipelined")["makespan_s"]
    assert pip == pytest.approx(e5 + a1, rel=1e-9)
    assert pip < expected if n > c else pip == pytest.approx(expected, rel=1e-9)


def _two_to(topo, senders, receivers, n, contention):
    """Ranks ``senders`` send n bytes to ``receivers`` at time 0; every receive is posted at once."""
    from topoplan.core.placement import sequential
    from topoplan.traffic.trace import Trace
    from topoplan.sim.run import simulate

    recs = []
    for a, b in zip(senders, receivers):
        recs.append((a, "isend", b, n, -1, 256, 0.0, 0.0, -1, 0))
        recs.append((b, "irecv", a, n, -1, 256, 0.0, 0.0, -1, 0))
    for r in set(senders) | set(receivers):
        recs.append((r, "waitall", -1, 0, -1, 256, 0.0, 0.0, -1, -1))
    model = {"model": "paper", "paper_contention": contention}
    return simulate(topo, Trace.from_records(recs, 256), sequential(256, topo), model=model)["makespan_s"]


def test_contention_postpones_the_later_message_at_the_shared_link():
    """Two nodes send n bytes to one node of their switch at once: the second waits for the down link."""
    t = _paper003()
    n, a, b = 4e6, 500e-9, 1.25e9
    # ranks 4 (node 1) and 8 (node 2) both send to rank 12 (node 3)
    assert _two_to(t, [4, 8], [12, 12], n, "link") == pytest.approx(2 * a + 3 * n / b, rel=1e-9)
    # to two different receivers: the per-link queues never meet ...
    assert _two_to(t, [4, 8], [12, 16], n, "link") == pytest.approx(2 * (a + n / b), rel=1e-9)
    # ... but the switch, one receiving device, takes one message at a time in device contention
    assert _two_to(t, [4, 8], [12, 16], n, "device") == pytest.approx(2 * a + 3 * n / b, rel=1e-9)


def test_fat_tree_uplinks_never_postpone_in_the_paper_model():
    """003 FT EPS: no contention between switches, only where nodes receive."""
    from dataclasses import replace

    t = _paper003()
    ft = replace(t, kind="fat-tree", ocs=None, up_bw_Bps=20e9)
    n, a1, b1 = 4e6, 500e-9, 1.25e9
    # ranks 4 and 8 (switch 0) send to ranks 68 and 72 (switch 1) at once: the uplinks are fat pipes
    extra = [(8, "send", 72, n, -1, 256, 0.0, 0.0, -1, 0), (72, "recv", 8, n, -1, 256, 0.0, 0.0, -1, 0)]
    res = _one_message(ft, 4, 68, n, extra=extra)
    assert res["makespan_s"] == pytest.approx(2 * (a1 + n / b1) + 2 * (500e-9 + n / 20e9), rel=1e-9)


def _neighbor_on_003(model):
    from topoplan.core.topology_io import load_topology
    from topoplan.problems.circuits import CircuitProblem, solve
    from topoplan.sim.run import simulate_plan
    from topoplan.traffic.sources import load_source

    topo = load_topology("paper003", ["ocs.nodes_per_switch=1"])
    trace, traffic = load_source("neighbor2d:rows=16,cols=16,bytes=4MB,iters=2")
    plan = solve(CircuitProblem.build(topo, traffic, threshold_B=1250.0), "greedy").to_dict()
    return simulate_plan(topo, trace, plan, threshold_B=1250.0, model=model)


def test_the_tie_seed_of_the_paper_model_is_recorded_and_moves_a_bulk_synchronous_run():
    """A halo exchange injects every message at once: which one a link serves first changes the run's time,
    and the seed that drew the order is in the result; seed 0 is the model without the option."""
    base = {"model": "paper", "relay": "store-and-forward"}
    r0 = _neighbor_on_003(base)
    assert _neighbor_on_003({**base, "paper_tie_seed": 0})["makespan_s"] == r0["makespan_s"]
    assert "paper_tie_seed" not in r0["sim_model"]
    times = {}
    for seed in (1, 2, 3):
        r = _neighbor_on_003({**base, "paper_tie_seed": seed})
        assert r["sim_model"]["paper_tie_seed"] == seed
        assert r["makespan_s"] == _neighbor_on_003({**base, "paper_tie_seed": seed})["makespan_s"]
        times[seed] = r["makespan_s"]
    assert len(set(times.values()) | {r0["makespan_s"]}) > 1


def test_paper_model_refuses_the_compiled_engine_and_a_timeline():
    from topoplan.core.placement import sequential
    from topoplan.traffic.sources import load_source
    from topoplan.sim.network import build_network
    from topoplan.sim.replay import replay

    t = _paper003()
    trace, _ = load_source("ring:np=8,bytes=1MB")
    net = build_network(t, model={"model": "paper"})
    with pytest.raises(TopoplanError, match="compiled method runs the maxmin model only"):
        replay(trace, net, sequential(8, t), method="compiled")
    with pytest.raises(TopoplanError, match="paper model records no utilization timeline"):
        replay(trace, net, sequential(8, t), timeline_dt_s=1e-3)
    assert replay(trace, net, sequential(8, t)).makespan_s > 0  # auto picks the reference replayer


def test_simulate_cli_runs_and_names_the_paper_model(run_cli):
    import json

    base = ("simulate", "-t", "paper003", "-T", "neighbor2d:rows=16,cols=16,bytes=4MB,iters=1", "--network", "eps")
    code, out, err = run_cli(*base, "--model", "paper", "--paper-contention", "device", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["sim_model"]["model"] == "paper" and doc["sim_model"]["paper_contention"] == "device"
    code, out, err = run_cli(*base, "--model", "paper")
    assert code == 0 and "model: paper, pipelined relays (64 KiB chunks), link contention" in out
    code, _, err = run_cli(*base, "--paper-contention", "device")
    assert code == 2 and "--paper-contention: applies to model 'paper' only" in err
