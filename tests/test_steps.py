"""An application's steps: the step clock, step types, the step time of circuit plans and the ilp on it."""

import itertools

import numpy as np
import pytest

from test_circuits_cases import hybrid
from topoplan.core.errors import TopoplanError
from topoplan.problems.circuits import CircuitProblem, solve
from topoplan.problems.circuits.bound import evaluate, floor_s
from topoplan.problems.circuits.problem import compare
from topoplan.problems.circuits.steps import merge_groups
from topoplan.sim.steps import step_levels, steps_of_spec, trace_steps
from topoplan.traffic.generators import parse_spec
from topoplan.traffic.sources import load_source
from topoplan.traffic.trace import Trace

REL = 1e-6


def stepped_trace(steps, n_ranks):
    """A trace whose steps are given: per step, every message is an irecv + isend, then all ranks wait and
    meet in a barrier (so a rank idle in one step cannot run ahead into the next)."""
    recs = []
    for msgs in steps:
        for a, b, nb in msgs:
            recs.append((b, "irecv", a, nb, -1, n_ranks, 0.0, 0.0))
            recs.append((a, "isend", b, nb, -1, n_ranks, 0.0, 0.0))
        for r in range(n_ranks):
            recs.append((r, "waitall", -1, 0, -1, n_ranks, 0.0, 0.0))
            recs.append((r, "barrier", -1, 0, -1, n_ranks, 0.0, 0.0))
    order = sorted(range(len(recs)), key=lambda i: recs[i][0])       # per rank, program order kept
    return Trace.from_records([recs[i] for i in order], n_ranks)


# -- the step clock ----------------------------------------------------------------------------------------

def test_a_ring_repeats_one_step_per_iteration():
    s, d, b, lv = step_levels(parse_spec("ring:np=4,bytes=1MB,iters=3"))
    assert sorted(lv.tolist()) == [0.0] * 4 + [1.0] * 4 + [2.0] * 4
    st = trace_steps(parse_spec("ring:np=4,bytes=1MB,iters=3"))
    assert (st.n_types, st.count.tolist(), st.n_steps) == (1, [3.0], 3)


def test_a_pairwise_alltoall_is_one_step_per_round():
    # 8 ranks, 1 MB per destination: MPICH's pairwise exchange (XOR partners), 7 rounds of 8 messages
    st = trace_steps(parse_spec("alltoall:np=8,bytes=1MB"))
    assert st.n_steps == 7 and st.n_types == 7
    assert all(len(t.src) == 8 and set(t.msg_bytes.tolist()) == {1e6} for t in st.types)


def test_steps_of_a_barrier_separated_trace():
    tr = stepped_trace([[(0, 1, 1e6), (2, 3, 1e6)], [(0, 2, 2e6)], [(0, 1, 1e6), (2, 3, 1e6)]], 4)
    st = trace_steps(tr)
    big = sorted((t.total_bytes(), c) for t, c in zip(st.types, st.count.tolist()) if t.total_bytes() > 0)
    assert big == [(2e6, 1.0), (2e6, 2.0)]       # the first and the third step are one type, twice


@pytest.mark.parametrize("spec", ["npb:kernel=cg,class=S,np=16,iters=3", "npb:kernel=mg,class=S,np=8,iters=3",
                                  "npb:kernel=ft,class=S,np=8,iters=3", "npb:kernel=is,class=S,np=8,iters=3",
                                  "npb:kernel=lu,class=S,np=4,iters=3", "neighbor2d:rows=4,cols=4,bytes=1MB,iters=3",
                                  "random:np=16,bytes=1MB,msgs=40,seed=3,iters=3"])
def test_all_steps_together_are_the_traffic_and_iterations_clock_alike(spec):
    trace, traffic = load_source(spec)
    st = trace_steps(trace)
    off = traffic.src != traffic.dst
    assert st.total_bytes() == pytest.approx(float(traffic.bytes[off].sum()), rel=1e-12)
    by_iters = steps_of_spec(spec, min_rows=1)              # one and two iterations, then the difference
    key = lambda s: sorted((t.src.tobytes(), t.dst.tobytes(), t.msg_bytes.tobytes(), c)  # noqa: E731
                           for t, c in zip(s.types, s.count.tolist()))
    assert key(by_iters) == key(st)
    assert by_iters.latency_levels == st.latency_levels        # the latency chain grows by whole iterations too


def test_a_trace_that_needs_eager_sends_is_still_clocked():
    # both ranks send first (blocking), then receive: deadlocks with every message rendezvous
    recs = [(0, "send", 1, 8.0, -1, 2, 0.0, 0.0), (0, "recv", 1, 8.0, -1, 2, 0.0, 0.0),
            (1, "send", 0, 8.0, -1, 2, 0.0, 0.0), (1, "recv", 0, 8.0, -1, 2, 0.0, 0.0)]
    st = trace_steps(Trace.from_records(recs, 2))
    assert st.total_bytes() == 16.0


@pytest.mark.parametrize("nbytes, levels", [(1e3, [0.0] * 8), (1e6, [0.0] * 4 + [1.0] * 4)])
def test_blocking_sends_of_small_messages_are_one_step(nbytes, levels):
    # a halo exchange as MG's comm3 writes it: receives from both neighbours posted, then a blocking send to
    # the left and one to the right, then the waits. A small send returns at once (MPI's eager protocol, as
    # the simulator replays it), so both go in one step; a large one returns when delivered: two steps.
    n = 4
    recs = []
    for r in range(n):
        left, right = (r - 1) % n, (r + 1) % n
        recs += [(r, "irecv", left, nbytes, -1), (r, "irecv", right, nbytes, -1),
                 (r, "send", left, nbytes, -1), (r, "send", right, nbytes, -1), (r, "waitall", -1, 0, -1)]
    tr = Trace.from_records([(r, op, p, b, -1, n, 0.0, 0.0, -1, t) for r, op, p, b, t in recs], n)
    assert sorted(step_levels(tr)[3].tolist()) == levels
    assert sorted(step_levels(tr, eager_threshold_B=0.0)[3].tolist()) == [0.0] * 4 + [1.0] * 4   # all waiting


def pipeline_trace(k, nbytes):
    """Rank 0 sends ``k`` messages to rank 1 with blocking sends; rank 1 receives each and passes it on to rank 2."""
    recs = [(0, "send", 1, nbytes, -1)] * k + [(1, op, p, nbytes, -1) for _ in range(k) for op, p in
                                               (("recv", 0), ("send", 2))] + [(2, "recv", 1, nbytes, -1)] * k
    return Trace.from_records([(r, op, p, b, -1, 3, 0.0, 0.0, -1, t) for r, op, p, b, t in recs], 3)


@pytest.mark.parametrize("nbytes, steps, chain", [(1e3, 6, [(0, 1), (1, 2)]), (1e6, 10, [(0, 1), (1, 2)] * 5)])
def test_the_latency_clock_pays_a_pipeline_of_eager_messages_once(nbytes, steps, chain):
    # five messages down a pipeline of three ranks. The step clock has a step per message (rank 1 forwards one
    # while the next arrives); with eager sends (1 KB) the messages are all under way at once, so the longest
    # chain of dependent messages is two long (0 -> 1, 1 -> 2). A rendezvous send (1 MB) waits for its
    # delivery, and rank 1 receives the next message only when it has passed on the last one: every message is
    # on the chain, in both clocks.
    tr = pipeline_trace(5, nbytes)
    assert len(set(step_levels(tr)[3].tolist())) == steps
    s, d, b, lv = step_levels(tr, latency=True)
    assert list(zip(s.tolist(), d.tolist())) == chain and lv.tolist() == sorted(lv.tolist())
    st = trace_steps(tr)
    assert st.latency_levels == len(chain)


def test_the_step_time_charges_the_latency_of_the_chain():
    # the pipeline on three switches (ranks 0, 1, 2 on nodes 0, 3, 6): the latency term is the two hops' route
    # latencies, not one per step. Simulated, the run takes 1.33 times this step time; with one latency per
    # step the step time would be 1.5 times the simulated time.
    from topoplan.problems.circuits.problem import plan_simulator

    topo = hybrid(switches=3, per_switch=3, ocs_per_switch=1)
    tr = pipeline_trace(5, 1e3)
    p = CircuitProblem.build(topo, None, steps=trace_steps(tr), placement=[0, 3, 6])
    net = p.network()
    ptr, links = net.eps_routes(np.array([0, 3]), np.array([3, 6]))
    hop_s = net.route_latency(ptr, links, np.array([1e3, 1e3]))
    assert p.step_loads.latency_s == pytest.approx(float(hop_s.sum()), rel=1e-12)
    none = solve(p, "none")
    simulated = plan_simulator(p, tr)(none.to_dict())
    per_step = none.objective - p.step_loads.latency_s + p.step_loads.n_steps * float(hop_s.max())
    assert 0.7 < none.objective / simulated < 1.0 and per_step / simulated > 1.4


def test_a_deadlocked_trace_is_refused():
    recs = [(0, "recv", 1, 8.0, -1, 2, 0.0, 0.0), (1, "recv", 0, 8.0, -1, 2, 0.0, 0.0)]
    with pytest.raises(TopoplanError, match="deadlock"):
        trace_steps(Trace.from_records(recs, 2))


# -- the step time of a plan -------------------------------------------------------------------------------

def three_switch_steps():
    """Three switches of 3 nodes (OCS nodes 0, 3, 6, one port each): step 1 switch 0 <-> 1, step 2 0 <-> 2."""
    topo = hybrid(switches=3, per_switch=3, ocs_per_switch=1, up="2Gbps")
    tr = stepped_trace([[(1, 4, 8e6), (4, 1, 8e6), (0, 3, 4e6)], [(2, 7, 8e6), (7, 2, 8e6), (0, 6, 4e6)]] * 2,
                       topo.n_nodes)
    st = trace_steps(tr)
    return topo, tr, CircuitProblem.build(topo, None, steps=st, threshold_B=1000.0)


def test_the_step_time_is_at_least_the_bulk_bound_and_equals_it_for_one_step():
    from topoplan.problems.circuits.forwarding import distance_vector

    topo, tr, p = three_switch_steps()
    nh = np.full((p.n_nodes, p.n_switches), -1, dtype=np.int64)
    ev = evaluate(p, [], nh)
    # EPS only, switch 0's uplink is every step's bottleneck: the steps add up to the bulk bound
    assert ev.objective_s == pytest.approx(ev.congestion_s + p.step_loads.latency_s, rel=1e-12)
    # a circuit for switches 0-1 relieves the first step only: the second still waits on the uplink
    circ = [(0, 3)]
    ev1 = evaluate(p, circ, distance_vector(p, circ))
    uplink_s = 2 * (8e6 + 4e6) / 250e6                     # step 2, twice: 12 MB up switch 0's 2 Gb/s uplink
    assert ev1.congestion_s == pytest.approx(uplink_s)      # the bulk bound sees only that link
    assert ev1.step_times_s.max() == pytest.approx(uplink_s)
    assert ev1.objective_s > ev1.congestion_s + 0.01         # ... the steps add the first step's time too
    one = CircuitProblem.build(topo, None, steps=trace_steps(stepped_trace([[(1, 4, 8e6), (0, 3, 4e6)]], 9)),
                               threshold_B=1000.0)
    e1 = evaluate(one, [], np.full((9, 3), -1, dtype=np.int64))
    assert e1.objective_s == pytest.approx(e1.congestion_s + one.step_loads.latency_s, rel=1e-12)
    assert floor_s(p) <= ev.objective_s


@pytest.mark.parametrize("other_B", [64e6, 1e3])
def test_a_relay_adds_a_chunk_to_its_step(other_B):
    # one step: node 1 -> node 4 (8 MB) relayed by OCS node 0 over the circuit 0-3, and node 7 -> 8 inside
    # switch 2, the step's bottleneck (64 MB) or not (1 KB). A pipelined relay delays its message by one
    # chunk's serialization; the step time adds it to the step, and the simulator agrees within 1% either way.
    from topoplan.problems.circuits.bound import RELAY_CHUNK_B
    from topoplan.problems.circuits.problem import plan_simulator, result_from_plan

    topo = hybrid(switches=3, per_switch=3, ocs_per_switch=1)              # OCS nodes 0, 3, 6
    tr = stepped_trace([[(1, 4, 8e6), (7, 8, other_B)]], 9)
    p = CircuitProblem.build(topo, None, steps=trace_steps(tr), threshold_B=1000.0)
    nh = np.full((9, 3), -1, dtype=np.int64)
    nh[1, 1], nh[0, 1] = 0, 3
    ev = evaluate(p, [(0, 3)], nh)
    m = ev.metrics()
    assert m["relayed_bytes"] == 8e6
    assert m["step_relay_s"] == pytest.approx(RELAY_CHUNK_B / 1.25e9, rel=1e-12)     # one relay, 10 Gb/s out
    assert ev.objective_s == pytest.approx(m["step_bottlenecks_s"] + m["step_relay_s"] + m["step_latency_s"],
                                           rel=1e-12)
    simulated = plan_simulator(p, tr)(result_from_plan(p, [(0, 3)], nh).to_dict())
    assert simulated == pytest.approx(ev.objective_s, rel=0.01)


def test_merging_step_groups_keeps_the_traffic_and_never_raises_the_step_time():
    p = CircuitProblem.build(load_topology_003(), None, steps=steps_of_spec("npb:kernel=mg,class=S,np=64,iters=2"),
                             max_step_types=1000)
    sl = p.step_loads
    assert np.allclose(sl.large_B.sum(axis=0), p.large_bytes)
    nh = np.full((p.n_nodes, p.n_switches), -1, dtype=np.int64)
    full = evaluate(p, [], nh).objective_s
    for k in (8, 3, 1):
        q = CircuitProblem.build(p.topology, None, steps=p.steps, max_step_types=k)
        assert q.step_loads.n_groups <= k
        assert evaluate(q, [], nh).objective_s <= full * (1 + REL)
    g = merge_groups(p, sl, 4)
    assert g.max() < 4 and len(g) == sl.n_groups



def _tables(p, plan):
    nh = np.full((p.n_nodes, p.n_switches), -1, dtype=np.int64)
    for a, row in plan["forwarding"].items():
        for sw, h in row.items():
            nh[int(a), int(sw)] = int(h)
    return nh


def test_merging_keeps_heavy_steps_apart_so_a_relaying_plan_keeps_its_step_time(monkeypatch):
    # FT class A on 003 with 8 OCS nodes: 37 step types, greedy's plan relays. Merged by loss alone, the light
    # (latency-bound) types join first and 24 or 16 groups keep the plan's unmerged step time; merged first by
    # busiest link and switch pair (the pre-merge kept only for very many groups), 15 groups lose 3.6% of it.
    import topoplan.problems.circuits.steps as circuit_steps

    topo = load_topology_003()
    st = steps_of_spec("npb:kernel=ft,class=A,np=256,iters=2")
    full = CircuitProblem.build(topo, None, steps=st, max_step_types=1000)
    r = solve(full, "greedy", seed=0)
    assert r.metrics["relayed_bytes"] > 0
    plan = r.to_dict()
    nh = _tables(full, plan)
    exact = evaluate(full, plan["circuits"], nh).objective_s
    assert full.step_loads.n_groups == st.n_types == 37
    for k in (24, 16):
        q = CircuitProblem.build(topo, None, steps=st, max_step_types=k)
        assert q.step_loads.n_groups == k
        assert evaluate(q, plan["circuits"], nh).objective_s == pytest.approx(exact, rel=1e-6)
    monkeypatch.setattr(circuit_steps, "PREMERGE_WORK", 0.0)
    q = CircuitProblem.build(topo, None, steps=st, max_step_types=24)
    assert evaluate(q, plan["circuits"], nh).objective_s < 0.97 * exact


def test_no_more_step_types_than_the_limit_are_not_merged():
    p = CircuitProblem.build(load_topology_003(), None, steps=steps_of_spec("npb:kernel=mg,class=S,np=64,iters=2"),
                             max_step_types=1000)
    k = p.step_loads.n_groups
    assert merge_groups(p, p.step_loads, k).tolist() == list(range(k))
    assert merge_groups(p, p.step_loads, k - 1).max() == k - 2

def load_topology_003(sets=("ocs.nodes_per_switch=2",)):
    from topoplan.core.topology_io import load_topology

    return load_topology("paper003", list(sets))


# -- the exact model on steps ------------------------------------------------------------------------------

def brute_force_step_time(p):
    """The lowest step time over every circuit set (tables by the least-congested routing, then polished)."""
    from topoplan.problems.circuits.forwarding import congestion_tables, polish_tables

    ocs = p.ocs_nodes.tolist()
    edges = [(u, v) for u, v in itertools.combinations(ocs, 2) if p.node_switch[u] != p.node_switch[v]]
    best = None
    for k in range(len(edges) + 1):
        for circ in itertools.combinations(edges, k):
            deg = np.bincount(np.array(circ, dtype=int).ravel(), minlength=p.n_nodes) if circ else np.zeros(1)
            if deg.max(initial=0) > p.ports:
                continue
            nh = polish_tables(p, list(circ), congestion_tables(p, list(circ)))
            v = evaluate(p, list(circ), nh).objective_s
            best = v if best is None else min(best, v)
    return best


@pytest.mark.parametrize("formulation", ["node", "switch"])
def test_the_exact_model_follows_the_steps(formulation):
    # one port per switch: a circuit for switch pair 0-1 or 0-2, not both. On the whole traffic either is
    # as good; per step only the circuit of the step's pair helps, so the plan must serve the pair whose
    # step is slower without it. The model's bound never exceeds the plan's step time.
    topo, tr, p = three_switch_steps()
    r = solve(p, "ilp", formulation=formulation, time_limit=30, score="bound")
    assert r.bound <= r.objective * (1 + REL)
    assert r.objective <= brute_force_step_time(p) * 1.02
    for m in ("none", "sp", "three-step", "greedy", "matching"):
        assert r.objective <= solve(p, m).objective * (1 + REL), m


def test_ilp_on_a_trace_never_simulates_slower_than_its_starts():
    from topoplan.problems.circuits.problem import plan_simulator

    topo, tr, p = three_switch_steps()
    r = solve(p, "ilp", time_limit=30, trace=tr)          # score auto: the simulator checks the starts
    assert r.options["score"] == "simulated"
    sim = plan_simulator(p, tr)
    for m in ("none", "sp", "three-step", "greedy", "matching"):
        assert r.metrics["simulated_s"] <= sim(solve(p, m).to_dict()) * (1 + 1e-9), m


@pytest.mark.parametrize("method", ["greedy", "three-step", "none"])
def test_steps_whose_inter_switch_messages_are_all_large_plan(method):
    # no small message crosses a switch, so the uplinks' EPS loads are sums over nothing (NumPy gives int64)
    from topoplan.core.topology_io import load_topology

    topo = load_topology("paper003", ["switches=2", "nodes_per_switch=2", "cores_per_node=1",
                                      "ocs.nodes_per_switch=1"])
    prob = CircuitProblem.build(topo, None, steps=trace_steps(parse_spec("alltoall:np=4,bytes=1MB")))
    assert prob.step_loads.base_uplink_up_B.dtype == np.float64
    res = solve(prob, method)
    assert np.isfinite(res.objective) and res.objective > 0


# -- one exchange: clocked without the replay ---------------------------------------------------------------

def _levels_key(levels):
    return sorted(zip(*(np.asarray(x).tolist() for x in levels)))


@pytest.mark.parametrize("spec", ["random:np=64,msgs=500,bytes=4MB,seed=3", "random:np=512,msgs=4096,bytes=1MB,seed=1",
                                  "random:np=16,msgs=40,bytes=1MB,seed=7"])
def test_one_exchange_is_clocked_as_the_replay_clocks_it(spec):
    from topoplan.sim.steps import _group_levels, _one_exchange

    trace = parse_spec(spec)
    fast = _one_exchange(trace)
    assert fast is not None
    replayed = step_levels(trace)                      # the replay, at both eager thresholds
    assert _levels_key(fast) == _levels_key(replayed) == _levels_key(step_levels(trace, eager_threshold_B=0.0))
    # the step types built from either are the same object, field for field
    a = _group_levels(trace.n_ranks, *[x[fast[0] != fast[1]] for x in fast], "s")
    b = _group_levels(trace.n_ranks, *[x[replayed[0] != replayed[1]] for x in replayed], "s")
    assert a.fingerprint() == b.fingerprint() and a.n_steps == b.n_steps == 1
    assert trace_steps(trace).fingerprint() == b.fingerprint()


def _p2p(recs, n):
    """A trace of ``(rank, op, peer, bytes, tag)`` rows, world communicator."""
    return Trace.from_records([(r, op, peer, nb, -1, n, 0.0, 0.0, -1, tag) for r, op, peer, nb, tag in recs], n)


def test_a_hand_built_exchange_with_tags_is_one_exchange():
    from topoplan.sim.steps import _one_exchange

    trace = _p2p([(0, "irecv", 1, 4e6, 3), (0, "isend", 1, 2e6, 7), (0, "waitall", -1, 0, -1),
                  (1, "isend", 0, 4e6, 3), (1, "irecv", 0, 2e6, 7), (1, "wait", -1, 0, -1), (1, "wait", -1, 0, -1)], 2)
    fast = _one_exchange(trace)
    assert fast is not None and _levels_key(fast) == _levels_key(step_levels(trace)) == [(0, 1, 2e6, 0.0),
                                                                                          (1, 0, 4e6, 0.0)]


@pytest.mark.parametrize("recs", [
    # a post after a wait: two exchanges, levels 0 and 1
    [(0, "isend", 1, 8.0, 0), (0, "waitall", -1, 0, -1), (0, "isend", 1, 8.0, 0), (0, "waitall", -1, 0, -1),
     (1, "irecv", 0, 8.0, 0), (1, "waitall", -1, 0, -1), (1, "irecv", 0, 8.0, 0), (1, "waitall", -1, 0, -1)],
    # a wildcard source
    [(0, "isend", 1, 8.0, 0), (0, "waitall", -1, 0, -1), (1, "irecv", -1, 8.0, 0), (1, "waitall", -1, 0, -1)],
    # a wildcard tag
    [(0, "isend", 1, 8.0, 0), (0, "waitall", -1, 0, -1), (1, "irecv", 0, 8.0, -1), (1, "waitall", -1, 0, -1)],
    # a blocking call
    [(0, "send", 1, 8.0, 0), (1, "recv", 0, 8.0, 0)],
])
def test_traces_that_are_not_one_exchange_are_replayed(recs):
    from topoplan.sim.steps import _one_exchange

    trace = _p2p(recs, 2)
    assert _one_exchange(trace) is None
    trace_steps(trace)                                  # the replay clocks them


def test_an_unmatched_exchange_is_still_refused_as_a_deadlock():
    from topoplan.sim.steps import _one_exchange

    trace = _p2p([(0, "isend", 1, 4e6, 0), (0, "waitall", -1, 0, -1), (1, "irecv", 0, 4e6, 5),
                  (1, "waitall", -1, 0, -1)], 2)        # tags differ: the receive never matches (not eager)
    assert _one_exchange(trace) is None
    with pytest.raises(TopoplanError, match="deadlock"):
        trace_steps(trace)


def test_the_cli_clocks_the_trace_it_loaded(monkeypatch):
    """source_steps clocks the trace it is given instead of generating the spec again."""
    import topoplan.sim.steps as steps_mod

    spec = "random:np=64,msgs=2000,bytes=1MB,seed=2"
    trace, _ = load_source(spec)
    monkeypatch.setattr(steps_mod, "parse_spec", lambda s: pytest.fail("generated again"))
    st = steps_mod.source_steps(spec, trace)
    assert st.n_steps == 1


# -- the clocks within a time limit ----------------------------------------------------------------------------


@pytest.mark.parametrize("find", [
    lambda t, spec, limit: trace_steps(t, time_limit=limit),
    lambda t, spec, limit: steps_of_spec(spec, min_rows=10, time_limit=limit),   # by its iterations
    lambda t, spec, limit: steps_of_spec(spec, trace=t, time_limit=limit),       # whole
], ids=["trace", "spec-by-iterations", "spec-whole"])
def test_the_clocks_stop_at_their_time_limit_and_a_long_one_changes_nothing(find):
    from topoplan.sim.steps import StepClockLimit

    spec = "npb:kernel=cg,class=S,np=16,iters=5"
    t = parse_spec(spec)
    with pytest.raises(StepClockLimit, match="did not finish within its time limit of 0 s"):
        find(t, spec, 0.0)
    a, b = find(t, spec, None), find(t, spec, 600.0)
    assert a.fingerprint() == b.fingerprint()


def test_a_clock_whose_set_up_alone_cannot_fit_its_time_limit_is_not_begun(monkeypatch):
    """The replayer's set-up (a pass over every row) was not stopped at the time limit: a 30 M-row trace with
    no time left spent 13 s before the clock's first check. A clock that cannot start within its limit now
    stops at once; one that can runs as before."""
    import topoplan.sim.steps as steps

    t = parse_spec("npb:kernel=cg,class=S,np=16,iters=2")
    built = []
    real = steps._unit_replayer
    monkeypatch.setattr(steps, "_unit_replayer", lambda *a, **kw: built.append(1) or real(*a, **kw))
    monkeypatch.setattr(steps, "CLOCK_SETUP_S_PER_ROW", 3600.0 / len(t))   # an hour to set up
    with pytest.raises(steps.StepClockLimit, match="did not finish within its time limit of 60 s"):
        step_levels(t, time_limit=60.0)
    assert built == []
    monkeypatch.setattr(steps, "CLOCK_SETUP_S_PER_ROW", 1.0 / len(t))
    assert len(step_levels(t, time_limit=60.0)[0]) and built == [1]


def test_a_step_clock_limit_is_a_topoplan_error():
    """Callers that report TopoplanError (the CLI's one-line errors) report it too."""
    from topoplan.sim.steps import StepClockLimit, source_steps

    with pytest.raises(TopoplanError):
        source_steps("ring:np=4,bytes=1MB,iters=3", parse_spec("ring:np=4,bytes=1MB,iters=3"), time_limit=0.0)
    assert issubclass(StepClockLimit, TopoplanError)


def test_circuits_plans_on_the_bulk_phase_when_the_steps_do_not_fit_its_time_limit(monkeypatch, tmp_path, run_cli):
    """With no time for the clocks the command still plans, on the traffic as one bulk phase, and says so."""
    import json

    import topoplan.cli.commands.common as common

    args = ["circuits", "-t", "paper003", "-T", "npb:kernel=cg,class=S,np=16,iters=3", "-m", "greedy"]
    out = tmp_path / "plan.json"
    monkeypatch.setattr(common, "STEPS_SHARE", 0.0)
    code, text, err = run_cli(*args, "--time-limit", "60", "-o", out)
    assert code == 0, err
    assert "steps: not found within 0.0 s" in text and "one bulk phase" in text
    doc = json.loads(out.read_text())
    assert "steps: not found" in doc["message"] and "steps" not in doc["problem"]
    code, text, err = run_cli(*args)            # without a time limit the steps are always found
    assert code == 0 and "steps:" in text and "not found" not in text, err


@pytest.mark.parametrize("spec, whole_chain", [
    ("ring:np=4,bytes=1MB,iters=20", False),                  # one iteration is one exchange
    ("neighbor2d:rows=4,cols=4,bytes=1MB,iters=20", False),
    ("npb:kernel=cg,class=S,np=4,iters=30", False),
    ("npb:kernel=cg,class=S,np=2,iters=20", True),            # its chain changes path as iterations add
])
def test_a_spec_is_clocked_by_its_iterations_for_less_than_the_whole_trace(spec, whole_chain, monkeypatch):
    import topoplan.sim.steps as steps_mod

    trace = parse_spec(spec)
    whole = trace_steps(trace)
    rows = []
    real = steps_mod.step_levels
    monkeypatch.setattr(steps_mod, "step_levels", lambda t, **k: rows.append((len(t), k.get("latency"))) or real(t, **k))
    by_iters = steps_of_spec(spec, min_rows=1)
    key = lambda s: sorted((t.src.tobytes(), t.dst.tobytes(), t.msg_bytes.tobytes(), c)  # noqa: E731
                           for t, c in zip(s.types, s.count.tolist()))
    assert key(by_iters) == key(whole) and by_iters.latency_levels == whole.latency_levels
    assert sum(n for n, _ in rows) < 2 * len(trace)            # less than the two clocks of the whole trace
    assert ((len(trace), True) in rows) == whole_chain          # the latency clock alone, on the whole trace
    assert (len(trace), None) not in rows
    if whole_chain:
        assert by_iters.fingerprint() == whole.fingerprint()


def test_a_spec_whose_iterations_cost_more_than_it_is_clocked_whole(monkeypatch):
    import topoplan.sim.steps as steps_mod

    spec = "npb:kernel=mg,class=S,np=8,iters=4"                 # its first iteration holds most of its rows
    rows = []
    real = steps_mod.step_levels
    monkeypatch.setattr(steps_mod, "step_levels", lambda t, **k: rows.append(len(t)) or real(t, **k))
    steps_of_spec(spec, min_rows=1)
    assert rows == [len(parse_spec(spec))] * 2


@pytest.mark.parametrize("spec", ["npb:kernel=cg,class=S,np=8,iters=2", "npb:kernel=lu,class=S,np=8,iters=2",
                                  "neighbor2d:rows=4,cols=4,bytes=1MB,iters=3"])
def test_the_two_clocks_in_two_processes_find_the_same_steps(monkeypatch, spec):
    """The latency clock runs in a forked child beside the step clock; a child that brings nothing back (an
    error, the time limit) leaves the clock to run here. Every way gives the same steps."""
    import topoplan.sim.steps as steps_mod
    from topoplan.core import forked

    trace = parse_spec(spec)
    monkeypatch.setattr(forked, "available", lambda: False)
    alone = trace_steps(trace)
    monkeypatch.setattr(forked, "available", lambda: True)
    monkeypatch.setattr(steps_mod, "CLOCKS_APART_ROWS", 0)
    apart = trace_steps(trace)

    class Lost(forked.Forked):
        def collect(self, timeout_s=None):
            return {}

    monkeypatch.setattr(forked, "Forked", Lost)
    again = trace_steps(trace)

    def no_fork(*args, **kwargs):
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(forked, "Forked", no_fork)
    unforked = trace_steps(trace)
    assert alone.fingerprint() == apart.fingerprint() == again.fingerprint() == unforked.fingerprint()
    assert alone.latency_types is not None and len(alone.latency_types) == len(apart.latency_types)


# -- computation on the critical path ------------------------------------------------------------------------

@pytest.mark.parametrize("spec, compute_s", [
    ("ring:np=4,bytes=1MB,iters=20", 0.0),                                 # a generated trace does not compute
    ("neighbor2d:rows=4,cols=4,bytes=1MB,iters=20,compute=0.01", 0.19),   # 19 gaps between 20 iterations
    ("alltoall:np=8,bytes=64KB,iters=30,compute=0.002", 0.058),
])
def test_a_spec_clocked_by_its_iterations_keeps_its_computation(spec, compute_s):
    from topoplan.sim.steps import critical_compute_s

    whole = trace_steps(parse_spec(spec))
    by_iters = steps_of_spec(spec, min_rows=1)
    assert whole.compute_s == pytest.approx(compute_s, rel=1e-9, abs=1e-12)
    assert by_iters.compute_s == pytest.approx(whole.compute_s, rel=1e-9, abs=1e-12)
    assert critical_compute_s(parse_spec(spec)) == pytest.approx(compute_s, rel=1e-9, abs=1e-12)
    bare = trace_steps(parse_spec(spec.split(",compute=")[0]))
    assert (whole.fingerprint() == bare.fingerprint()) == (compute_s == 0.0)   # plans bind to the computation too


def test_the_critical_path_follows_the_messages_not_the_sum_of_every_ranks_computation():
    from topoplan.sim.steps import critical_compute_s

    # rank 0 computes 1 s, sends to rank 1 (waiting since 0), computes 0.4 s; rank 1 receives it and computes
    # 0.5 s; a barrier: 1.5 s on the critical path, of 1.9 s of computation in all
    rows = [(0, "send", 1, 1e6, -1, 2, 1.0, 1.1), (0, "barrier", -1, 0, -1, 2, 1.5, 1.6),
            (1, "recv", 0, 1e6, -1, 2, 0.0, 1.1), (1, "barrier", -1, 0, -1, 2, 1.6, 1.6)]
    assert critical_compute_s(Trace.from_records(rows, 2)) == pytest.approx(1.5, rel=1e-12)
    # with no computation, nothing to replay
    zero = [(r, op, p, b, -1, 2, 0.0, 0.0) for r, op, p, b, *_ in rows]
    assert critical_compute_s(Trace.from_records(zero, 2)) == 0.0


def test_the_step_time_adds_the_computation_no_plan_changes():
    spec = "neighbor2d:rows=4,cols=4,bytes=4MB,iters=5"
    topo = hybrid(switches=4, per_switch=4, ocs_per_switch=2)
    bare = CircuitProblem.build(topo, None, steps=trace_steps(parse_spec(spec)))
    busy = CircuitProblem.build(topo, None, steps=trace_steps(parse_spec(spec + ",compute=0.05")))
    assert busy.step_loads.compute_s == pytest.approx(0.2, rel=1e-9) and bare.step_loads.compute_s == 0.0
    for method in ("none", "greedy"):
        a, b = solve(bare, method), solve(busy, method)
        assert a.plan["circuits"] == b.plan["circuits"]
        assert b.objective == pytest.approx(a.objective + 0.2, rel=1e-9)
        assert b.metrics["step_compute_s"] == pytest.approx(0.2, rel=1e-9)
    assert floor_s(busy) == pytest.approx(floor_s(bare) + 0.2, rel=1e-9)
    ilp = solve(busy, "ilp", time_limit=20)
    assert ilp.bound <= ilp.objective + 1e-9 and ilp.bound >= 0.2


def test_on_a_recorded_trace_the_step_time_is_the_simulated_run_computation_included(run_cli, shared):
    """FT class C recorded with Open MPI: 66.6 s of computation on the critical path beside 0.72 s of steps;
    the step time leaving it out was 1/93 of the simulated time."""
    path = shared / "traces" / "FT.C.64" / "events.csv.gz"
    code, text, err = run_cli("circuits", "-t", "paper003", "-T", str(path), "-m", "greedy", "--json")
    assert code == 0, err
    import json

    doc = json.loads(text)
    m = doc["metrics"]
    assert 66 < m["step_compute_s"] < 67.2
    assert 0.98 < m["simulated_s"] / doc["objective"] < 1.02
    # what the run adds to its computation against what the step time adds: the part a plan changes
    c = m["step_compute_s"]
    assert m["communication_simulated_over_objective"] == pytest.approx(
        (m["simulated_s"] - c) / (doc["objective"] - c), rel=1e-12)
    assert 0.5 < m["communication_simulated_over_objective"] < 1.0
    code, text, err = run_cli("circuits", "-t", "paper003", "-T", str(path), "-m", "greedy")
    assert code == 0, err
    assert "of computation on the critical path, the run adds" in text and "the part a plan changes" in text
    code, text, err = run_cli("compare", "circuits", "-t", "paper003", "-T", str(path), "--methods", "none",
                              "--simulate", "--no-steps")
    assert code == 0, err
    assert "leaves out the trace's computation" in text
    code, text, err = run_cli("compare", "circuits", "-t", "paper003", "-T", str(path), "--methods", "none,greedy",
                              "--simulate")
    assert code == 0, err
    assert "what the run adds over what the step time adds (the part a plan changes): none " in text


def test_the_communication_ratio_leaves_out_the_computation_no_plan_changes():
    spec = "neighbor2d:rows=4,cols=4,bytes=4MB,iters=5"
    topo = hybrid(switches=4, per_switch=4, ocs_per_switch=2)
    bare = CircuitProblem.build(topo, None, steps=trace_steps(parse_spec(spec)))
    busy = CircuitProblem.build(topo, None, steps=trace_steps(parse_spec(spec + ",compute=0.05")))
    assert busy.communication_ratio(0.26, 0.3) == pytest.approx(0.06 / 0.1, rel=1e-9)
    assert bare.communication_ratio(0.26, 0.3) is None                      # no computation: the plain ratio says it
    assert busy.communication_ratio(0.2, 0.3) is None and busy.communication_ratio(0.26, 0.15) is None
    rows = compare(busy, ["none", "greedy"], simulate=lambda plan: 0.25)
    assert [r["communication_simulated_over_objective"] for r in rows] == pytest.approx(
        [0.05 / (r["objective"] - 0.2) for r in rows], rel=1e-9)


def test_anneal_searches_a_computing_trace_as_the_same_trace_without_computation():
    """The computation every configuration shares stays out of the energies the temperature is relative to."""
    spec = "neighbor2d:rows=4,cols=4,bytes=4MB,iters=5"
    topo = hybrid(switches=4, per_switch=4, ocs_per_switch=2)
    bare = CircuitProblem.build(topo, None, steps=trace_steps(parse_spec(spec)))
    busy = CircuitProblem.build(topo, None, steps=trace_steps(parse_spec(spec + ",compute=5")))
    a = solve(bare, "anneal", seed=3, max_steps=400, init="none")
    b = solve(busy, "anneal", seed=3, max_steps=400, init="none")
    assert a.options["accepted"] == b.options["accepted"]
    assert sorted(map(tuple, a.plan["circuits"])) == sorted(map(tuple, b.plan["circuits"]))
    assert b.objective == pytest.approx(a.objective + 20.0, rel=1e-12)


def test_score_auto_asks_a_start_to_gain_its_share_of_the_communication_not_of_the_computation(monkeypatch):
    import topoplan.problems.circuits.problem as problem_mod
    from topoplan.problems.circuits.problem import AUTO_KEEP_REL, auto_keep_rel

    spec = "neighbor2d:rows=4,cols=4,bytes=4MB,iters=5"
    topo = hybrid(switches=4, per_switch=4, ocs_per_switch=2)
    seen = []
    real = problem_mod.solve_with
    monkeypatch.setattr(problem_mod, "solve_with", lambda *a, **k: seen.append(k["keep_rel"]) or real(*a, **k))
    for extra in ("", ",compute=0.05"):
        trace = parse_spec(spec + extra)
        prob = CircuitProblem.build(topo, None, steps=trace_steps(trace))
        solve(prob, "anneal", time_limit=5, max_steps=50, trace=trace)
    bare, busy = seen
    assert bare == AUTO_KEEP_REL
    comm = solve(CircuitProblem.build(topo, None, steps=trace_steps(parse_spec(spec))), "none").objective
    assert busy == pytest.approx(AUTO_KEEP_REL * comm / (comm + 0.2), rel=1e-9) and busy < AUTO_KEEP_REL / 2
    assert busy == pytest.approx(auto_keep_rel(prob), rel=1e-12)


def test_before_the_event_loop_is_compiled_the_computation_is_found_by_the_reference_replayer(monkeypatch):
    """Compiling the loop would take minutes inside the clocks' limit; the reference gives the same time."""
    import topoplan.sim.steps as steps_mod
    from topoplan.sim.steps import critical_compute_s

    trace = parse_spec("alltoall:np=8,bytes=64KB,iters=6,compute=0.002")
    compiled = critical_compute_s(trace)
    methods = []
    real = steps_mod.replay
    monkeypatch.setattr(steps_mod, "compiled_ready", lambda: False)
    monkeypatch.setattr(steps_mod, "replay", lambda *a, **k: methods.append(k["method"]) or real(*a, **k))
    assert critical_compute_s(trace) == pytest.approx(compiled, rel=1e-9) and methods == ["python"]
