"""Circuit schedules over phases (issue 21): validation, the static hand-off, the DP's optimality over its
candidates, set-up costs, time limits."""

from __future__ import annotations

import itertools
import time

import pytest

from planner.core.errors import TopoplanError
from planner.core.topology_io import load_topology
from planner.problems.circuits.schedule import (PhasedProblem, _Budget, _candidates, _dp, _evaluate_choice,
                                                schedule, static_schedule, validate_schedule)
from planner.problems.validate import validate
from planner.traffic.generators import neighbor2d
from planner.traffic.phases import concat, detect_phases
from planner.traffic.twophase import halo_then_transpose, transpose2d
from sim.run import simulate_plan
from sim.schedule import simulate_schedule


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
    from planner.problems.circuits import solve

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
        t0 = time.perf_counter()
        res = schedule(prob, "exact", time_limit=limit)
        wall = time.perf_counter() - t0
        assert wall < limit + 1.5, wall     # the ilp solves share the limit; the programme itself is instant
        assert res.bound is not None and 0 < res.bound <= res.objective
        assert res.gap == pytest.approx((res.objective - res.bound) / res.objective)
        assert res.metrics["zero_setup_s"] <= res.objective
        assert res.options["time_limit"] == limit
    # 0.05 s is too short for any ilp: greedy stands in and says so
    prob = PhasedProblem.build(topo, halo_then_transpose(16, 16, 4e6, iters=5))
    assert schedule(prob, "exact", time_limit=0.05).status == "timeout"


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
