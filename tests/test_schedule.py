"""Circuit schedules over phases (issue 21): validation, the static hand-off, the DP's optimality over its
candidates, set-up costs, time limits."""

from __future__ import annotations

import itertools

import pytest

from topoplan.core.errors import TopoplanError
from topoplan.core.topology_io import load_topology
from topoplan.plans.schedule import static_schedule, validate_schedule
from topoplan.plans.validate import validate
from topoplan.problems.circuits.schedule import PhasedProblem, _Budget, _candidates, _dp, _evaluate_choice, schedule
from topoplan.traffic.generators import neighbor2d
from topoplan.traffic.phases import concat, detect_phases
from topoplan.traffic.generators import halo_then_transpose
from topoplan.traffic.twophase import transpose2d
from topoplan.sim.run import simulate_plan
from topoplan.sim.schedule import simulate_schedule

from timing import Stopwatch, within_limit


@pytest.fixture(scope="module")
def topo():
    return load_topology("paper003", ["ocs.nodes_per_switch=4"])


@pytest.fixture(scope="module")
def two(topo):
    trace = halo_then_transpose(16, 16, 4e6, iters=5)
    ph = detect_phases(trace, topo)
    return trace, ph, PhasedProblem.build(topo, ph)


def test_schedules_validate(topo, two):
    _, ph, prob = two
    for m in ("static", "per-phase", "exact", "zero-setup"):
        res = schedule(prob, m, circuit_method="greedy")
        doc = res.to_dict()
        assert validate(doc, topo)["schedule"] == len(doc["schedule"])
        assert validate_schedule(doc, topo, n_phases=len(ph))["phases"] == len(ph)
    doc = schedule(prob, "exact", circuit_method="greedy").to_dict()
    assert doc["schedule"][1]["setup"] is not None
    bad = {**doc, "schedule": [dict(doc["schedule"][1], setup=None)]}
    with pytest.raises(TopoplanError, match="from_phase"):
        validate(bad, topo)
    bad = {**doc, "schedule": [doc["schedule"][0], dict(doc["schedule"][1], setup=None)]}
    with pytest.raises(TopoplanError, match="entry 1: field 'setup'"):
        validate(bad, topo)
    bad = {**doc, "schedule": [doc["schedule"][0]]}
    with pytest.raises(TopoplanError, match="2 phases"):
        validate_schedule(bad, topo)


def test_a_static_schedule_simulates_as_the_static_plan(topo, two):
    from topoplan.problems.circuits import solve

    trace, ph, prob = two
    plan = solve(prob.total, "greedy").to_dict()
    ref = simulate_plan(topo, trace, plan)["makespan_s"]
    assert simulate_schedule(topo, trace, ph, static_schedule(plan, len(ph)))["makespan_s"] == ref
    assert simulate_schedule(topo, trace, None, static_schedule(plan))["makespan_s"] == ref
    res = schedule(prob, "static", circuit_method="greedy")
    e = res.plan["schedule"][0]
    direct = simulate_plan(topo, trace, {"circuits": e["circuits"], "forwarding": e["forwarding"],
                                         "rank_to_node": res.plan["rank_to_node"]},
                           threshold_B=res.plan["threshold_B"])["makespan_s"]
    assert simulate_schedule(topo, trace, ph, res)["makespan_s"] == direct


def test_scheduling_the_two_phases_beats_static(two):
    trace, ph, prob = two
    st = schedule(prob, "static", circuit_method="greedy", pick="candidates")
    ex = schedule(prob, "exact", circuit_method="greedy")
    zs = schedule(prob, "zero-setup", circuit_method="greedy")
    assert ex.metrics["reconfigurations"] == 1
    assert ex.objective < st.objective
    assert zs.objective <= ex.objective <= zs.objective + prob.setup_s + 1e-12
    assert ex.bound <= zs.objective and ex.gap == pytest.approx((ex.objective - ex.bound) / ex.objective)
    sim = simulate_schedule(prob.topology, trace, ph, ex)
    assert sim["reconfigurations"] == 1 and sim["setup_idle_s"] == pytest.approx(prob.setup_s)
    assert sim["makespan_s"] < simulate_schedule(prob.topology, trace, ph, st)["makespan_s"]


def test_the_programme_is_optimal_over_its_candidates(topo):
    # four short phases: halo, transpose, halo, transpose; brute force every assignment of candidates
    parts = [neighbor2d(16, 16, 1e6), transpose2d(16, 16, 1e6), neighbor2d(16, 16, 1e6), transpose2d(16, 16, 1e6)]
    ph = detect_phases(concat(parts), topo)
    assert ph.kinds() == [0, 1, 0, 1]
    for setup, blackout in ((0.002, "eps"), (0.002, "stall"), (0.0, "stall")):
        prob = PhasedProblem.build(topo, ph, setup_s=setup, blackout=blackout)
        cands = _candidates(prob, _Budget(None, "greedy"), 0)
        assert len(cands) >= 3
        value, choice, _, _ = _dp(prob, cands)
        best = min(_evaluate_choice(prob, cands, list(c))[0]
                   for c in itertools.product(range(len(cands)), repeat=len(ph)))
        assert value == pytest.approx(best, rel=1e-12)
        assert _evaluate_choice(prob, cands, choice)[0] == pytest.approx(value, rel=1e-12)


def test_set_up_cost_stops_reconfiguration_of_short_phases(topo):
    parts = [neighbor2d(16, 16, 2e5), transpose2d(16, 16, 2e5)] * 3      # phases of ~1 ms
    ph = detect_phases(concat(parts), topo)
    assert len(ph) == 6
    slow = PhasedProblem.build(topo, ph)                                 # 10 ms set-up
    for m in ("per-phase", "exact"):
        assert schedule(slow, m, circuit_method="greedy").metrics["reconfigurations"] == 0
    free = PhasedProblem.build(topo, ph, setup_s=1e-6)
    assert schedule(free, "exact", circuit_method="greedy").metrics["reconfigurations"] >= 1
    # the stall model never does better than the eps model
    stall = PhasedProblem.build(topo, ph, setup_s=1e-3, blackout="stall")
    eps = PhasedProblem.build(topo, ph, setup_s=1e-3, blackout="eps")
    assert (schedule(eps, "exact", circuit_method="greedy").objective
            <= schedule(stall, "exact", circuit_method="greedy").objective + 1e-12)


def test_exact_honours_its_time_limit_and_reports_bound_and_gap(topo):
    for limit in (0.05, 1.5):
        prob = PhasedProblem.build(topo, halo_then_transpose(16, 16, 4e6, iters=5))   # fresh: no cached solves
        watch = Stopwatch()
        res = schedule(prob, "exact", time_limit=limit)
        # the ilp solves share the limit; the programme itself is instant (1.5 s of work past it, at any load)
        assert within_limit(watch.stop().wall_s, limit, 1.5, watch), watch.wall_s
        assert res.bound is not None and 0 < res.bound <= res.objective
        assert res.gap == pytest.approx((res.objective - res.bound) / res.objective)
        assert res.metrics["zero_setup_s"] <= res.objective
        assert res.options["time_limit"] == limit
    # 0.05 s is too short for any ilp: greedy stands in and says so
    prob = PhasedProblem.build(topo, halo_then_transpose(16, 16, 4e6, iters=5))
    assert schedule(prob, "exact", time_limit=0.05).status == "timeout"


@pytest.mark.parametrize("method", ["exact", "solstice"])
def test_scored_by_simulation_no_schedule_replays_slower_than_a_heuristic_one(topo, method):
    """LU class B on 256 ranks, 003 with 16 OCS nodes: the programme's schedule (phases simulated one at a
    time) replays whole slower than a single configuration of its candidates; the fastest is returned."""
    from topoplan.traffic.generators import parse_spec

    trace = parse_spec("npb:kernel=lu,class=B,np=256,iters=1")
    ph = detect_phases(trace, topo)
    prob = PhasedProblem.build(topo, ph, score="simulated")
    res = schedule(prob, method, circuit_method="greedy")
    m = res.metrics
    times = m["simulated_candidates_s"]
    assert m["picked"] != "programme" and m["simulated_s"] == times[m["picked"]] == min(times.values())
    assert times[m["picked"]] < times["programme"] and any(k.startswith("best single") for k in times)
    assert res.status == "feasible" and f"kept the {m['picked']} schedule" in res.message
    assert m["candidates"] > 1 and m["programme_reconfigurations"] == 0
    # the programme won on its own objective (solstice: against exact's, which is at most any single one's)
    assert m["programme_s"] <= m.get("best_single_s", m.get("without_decomposition_s")) * (1 + 1e-12)
    assert res.bound <= res.objective
    assert res.options["score"] == "simulated" and res.options["sim_model"]["relay"] == "pipelined"
    # what the result says is what the replay measures, and neither heuristic schedule replays faster
    assert simulate_schedule(topo, trace, ph, res)["makespan_s"] == pytest.approx(m["simulated_s"], rel=1e-12)
    for heuristic, opts in (("static", {"pick": "simulated"}), ("per-phase", {})):
        other = schedule(prob, heuristic, circuit_method="greedy", **opts)
        assert m["simulated_s"] <= simulate_schedule(topo, trace, ph, other)["makespan_s"] * (1 + 1e-12), heuristic
    # scored by the bound, nothing is replayed and the programme's plan stands
    plain = schedule(PhasedProblem.build(topo, ph), method, circuit_method="greedy")
    assert "picked" not in plain.metrics and "programme_s" not in plain.metrics
    assert plain.options["score"] == "bound" and "sim_model" not in plain.options


def test_scored_by_simulation_the_programme_is_kept_when_it_replays_faster(two):
    """The halo exchange then the transpose: two configurations beat any single one in the replay too."""
    trace, ph, prob0 = two
    prob = PhasedProblem.build(prob0.topology, ph, score="simulated")
    res = schedule(prob, "exact", circuit_method="greedy")
    m = res.metrics
    assert m["picked"] == "programme" and m["reconfigurations"] == 1 and "programme_s" not in m
    times = m["simulated_candidates_s"]
    assert m["simulated_s"] == times["programme"] < min(v for k, v in times.items() if k != "programme")
    assert simulate_schedule(prob.topology, trace, ph, res)["makespan_s"] == pytest.approx(m["simulated_s"],
                                                                                           rel=1e-12)


def test_bad_inputs_name_their_field(topo, two):
    _, ph, prob = two
    with pytest.raises(TopoplanError, match="unknown schedule method 'dp'"):
        schedule(prob, "dp")
    with pytest.raises(TopoplanError, match="field 'blackout'"):
        PhasedProblem.build(topo, ph, blackout="wait")
    with pytest.raises(TopoplanError, match="field 'setup_s'"):
        PhasedProblem.build(topo, ph, setup_s=-1)
    with pytest.raises(TopoplanError, match="field 'pick'"):
        schedule(prob, "static", circuit_method="greedy", pick="best")
    with pytest.raises(TopoplanError, match="hybrid topology"):
        PhasedProblem.build(load_topology("paper003", ["kind=tree", "ocs=null"]), ph)


# -- circuits that change inside a phase (Solstice, BvN; issue 21 items 3 and 4) ------------------------

@pytest.fixture(scope="module")
def transpose001():
    """001's system with 8 OCS nodes per switch: a transpose spreads one node pair over every switch pair,
    15 partners per switch for 8 ports, so no single configuration reaches them all directly."""
    topo = load_topology("paper001-16x16", ["ocs.nodes_per_switch=8"])
    trace = transpose2d(16, 16, 4e6)
    ph = detect_phases(trace, topo)
    return topo, trace, ph, PhasedProblem.build(topo, ph, score="simulated")


def test_solstice_through_the_registry_decomposes_and_replays_as_priced(transpose001):
    topo, trace, ph, prob = transpose001
    for method in ("solstice", "bvn"):
        res = schedule(prob, method, circuit_method="greedy")
        assert res.method == method and res.problem == "schedule"
        m = res.metrics
        assert m["all_to_all_phases"] == [0] and m["decomposed_phases"] == [0]
        e = res.plan["schedule"][0]
        assert len(e["slots"]) == m["options"]["0"]["slots"] >= 2
        assert e["circuits"] == e["slots"][0]["circuits"]
        assert validate(res.to_dict(), topo)["schedule"] == 1
        # the decomposition is used only because it is faster than every single configuration
        assert res.objective < m["without_decomposition_s"]
        assert res.bound <= res.objective and res.gap == pytest.approx((res.objective - res.bound) / res.objective)
        sim = simulate_schedule(topo, trace, ph, res)
        assert sim["makespan_s"] == pytest.approx(res.objective, rel=1e-12)     # priced by the same replay
        assert sim["reconfigurations"] == m["reconfigurations"] == len(e["slots"]) - 1
        assert sim["setup_idle_s"] == pytest.approx(prob.setup_s * (len(e["slots"]) - 1))
    # with 1 s set-ups Solstice stops after one configuration (the other partners' bytes take the EPS at the
    # same time): no reconfiguration, and never slower than the exact schedule
    slow = PhasedProblem.build(topo, ph, score="simulated", setup_s=1.0)
    res = schedule(slow, "solstice", circuit_method="greedy")
    assert res.metrics["options"]["0"]["slots"] == 1 and res.metrics["reconfigurations"] == 0
    assert res.objective <= res.metrics["without_decomposition_s"]
    assert simulate_schedule(topo, trace, ph, res)["makespan_s"] == pytest.approx(res.objective, rel=1e-12)


def test_solstice_keeps_the_exact_choice_for_other_phases(two):
    _, ph, prob = two
    ex = schedule(prob, "exact", circuit_method="greedy")
    so = schedule(prob, "solstice", circuit_method="greedy")
    assert so.metrics["all_to_all_phases"] == [1]         # the halo exchange is not all-to-all-like
    assert so.objective <= ex.objective * (1 + 1e-12)
    if not so.metrics["decomposed_phases"]:
        assert so.plan["schedule"] == ex.plan["schedule"]


def test_a_one_slot_schedule_equals_the_static_simulation(topo, two):
    from topoplan.problems.circuits import solve

    # one phase: an entry with one slot replays the phase itself under the slot's configuration
    trace = transpose2d(16, 16, 4e6)
    plan = solve(PhasedProblem.build(topo, trace).total, "greedy").to_dict()
    ref = simulate_plan(topo, trace, plan)["makespan_s"]
    doc = static_schedule(plan, 1)
    e = doc["schedule"][0]
    e["slots"] = [{"circuits": e["circuits"], "forwarding": e["forwarding"], "load_sharing": e["load_sharing"],
                   "duration_s": 0.0, "bytes_B": [[0, 1, 1e6]]}]
    assert validate_schedule(doc, topo)["reconfigurations"] == 0
    assert simulate_schedule(topo, trace, None, doc)["makespan_s"] == ref
    # two phases: the transpose as a one-slot entry replays exactly as the same configuration without slots
    trace, ph, prob = two
    res = schedule(prob, "exact", circuit_method="greedy")
    ref = simulate_schedule(topo, trace, ph, res)["makespan_s"]
    doc = res.to_dict()
    last = doc["schedule"][-1]
    assert last["from_phase"] == 1
    last["slots"] = [{"circuits": last["circuits"], "forwarding": last["forwarding"],
                      "load_sharing": last.get("load_sharing"), "duration_s": 0.1, "bytes_B": []}]
    if last["setup"] is not None:
        last["setup"] = {**last["setup"], "during": "wait"}
        res_wait = {**res.to_dict()}
        res_wait["schedule"][-1]["setup"] = last["setup"]
        ref = simulate_schedule(topo, trace, ph, res_wait)["makespan_s"]
    assert simulate_schedule(topo, trace, ph, doc)["makespan_s"] == ref


def test_sub_phase_bytes_sum_to_the_phase_bytes():
    import numpy as np

    from topoplan.traffic.generators import alltoall
    from topoplan.traffic.matrix import from_trace
    from topoplan.traffic.twophase import transpose2d as tp
    from topoplan.sim.schedule import slot_traces

    phase = concat([alltoall(16, 5e5), tp(4, 4, 3e5, iters=2), alltoall(16, 64.0)])   # a2a, p2p, a short a2a
    sw = np.arange(16) // 4
    slots = [{"bytes_B": [[0, 1, 3e6], [1, 0, 1e6], [2, 3, 5e5]], "duration_s": 2e-3},
             {"bytes_B": [[0, 1, 1e6], [1, 2, 4e6], [3, 0, 2e6]], "duration_s": 1e-3},
             {"bytes_B": [[1, 0, 1e6], [2, 3, 5e5], [0, 2, 1e6]], "duration_s": 1e-3}]
    parts = slot_traces(phase, slots, sw, n_switches=4)
    assert len(parts) == 3
    whole = from_trace(phase).dense()
    got = sum(from_trace(p).dense() for p in parts)
    np.testing.assert_allclose(got, whole, rtol=1e-12)
    # a pair's bytes are cut by its slot shares: 0 -> 1 is 3:1:0, 1 -> 0 is 1:0:1; inside a switch, the
    # shares of the durations, 2:1:1 (without the short alltoall, which stays whole in the first sub-phase)
    cut = concat([alltoall(16, 5e5), tp(4, 4, 3e5, iters=2)])
    whole = from_trace(cut).dense()
    for k, (share, back, inside) in enumerate(((0.75, 0.5, 0.5), (0.25, 0.0, 0.25), (0.0, 0.5, 0.25))):
        d = from_trace(slot_traces(cut, slots, sw, n_switches=4)[k]).dense()
        assert d[0:4, 4:8].sum() == pytest.approx(share * whole[0:4, 4:8].sum())
        assert d[4:8, 0:4].sum() == pytest.approx(back * whole[4:8, 0:4].sum())
        assert d[0:4, 0:4].sum() == pytest.approx(inside * whole[0:4, 0:4].sum())
    # the short alltoall (Bruck's algorithm) stays whole in the first sub-phase; computation too
    short = alltoall(16, 64.0)
    n_short = len(short)
    assert parts[0].op_counts()["alltoall"] == 16 * 16 + n_short
    assert parts[1].op_counts()["alltoall"] == 16 * 16
    assert float(parts[1].t_start.max()) < 1e-6
    # every sub-phase replays alone
    from topoplan.core.topology_io import load_topology as lt
    t = lt("paper003", ["ocs.nodes_per_switch=1"])
    for p in parts:
        assert simulate_plan(t, p, None)["makespan_s"] > 0


def test_slotted_entries_are_validated(transpose001):
    topo, _, ph, prob = transpose001
    doc = schedule(prob, "solstice", circuit_method="greedy").to_dict()
    e = doc["schedule"][0]
    bad = {**doc, "schedule": [{**e, "circuits": e["slots"][1]["circuits"], "forwarding": e["slots"][1]["forwarding"]}]}
    with pytest.raises(TopoplanError, match="slot 0: field 'circuits'"):
        validate_schedule(bad, topo)
    bad = {**doc, "schedule": [{**e, "slots": [dict(e["slots"][0], duration_s=-1.0)]}]}
    with pytest.raises(TopoplanError, match="slot 0: field 'duration_s'"):
        validate_schedule(bad, topo)
    bad = {**doc, "schedule": [{**e, "slots": [dict(e["slots"][0], bytes_B=[[0, 99, 1.0]])]}]}
    with pytest.raises(TopoplanError, match="field 'bytes_B'"):
        validate_schedule(bad, topo)
    bad = {**doc, "schedule": [{**e, "slots": [e["slots"][0], dict(e["slots"][1], circuits=[[0, 1]])]}]}
    with pytest.raises(TopoplanError, match="slot 1: field 'circuits\\[0\\]'"):
        validate_schedule(bad, topo)
    with pytest.raises(TopoplanError, match="field 'decomposition'"):
        schedule(prob, "solstice", circuit_method="greedy", decomposition="eclipse")


def test_the_phases_steps_are_clocked_within_their_time_limit(topo, two):
    from topoplan.sim.steps import StepClockLimit

    trace, ph, _ = two
    with pytest.raises(StepClockLimit):
        PhasedProblem.build(topo, ph, steps=True, steps_time_limit=0.0)
    a = PhasedProblem.build(topo, ph, steps=True)
    b = PhasedProblem.build(topo, ph, steps=True, steps_time_limit=600.0)
    assert [p.steps.fingerprint() for p in a.class_problems] == [p.steps.fingerprint() for p in b.class_problems]


def test_a_phase_class_is_priced_without_the_computation_its_phases_do(topo):
    """The class's first phase stands for phases that compute for other times: the step time the schedule
    prices candidates by leaves the computation out, as the phases' bulk bounds do."""
    trace = neighbor2d(16, 16, 4e6, iters=4, compute_s=0.05)
    ph = detect_phases(trace, topo)
    prob = PhasedProblem.build(topo, ph, steps=True)
    assert all(p.steps.compute_s == 0.0 and p.step_loads.compute_s == 0.0 for p in prob.class_problems)
    from topoplan.sim.steps import trace_steps

    assert trace_steps(trace).compute_s == pytest.approx(0.15, rel=1e-9)
