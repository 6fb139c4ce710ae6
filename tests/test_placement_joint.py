"""Joint placement + circuits (``joint``): never worse than place-then-assign, valid plans, a provable gain."""

import numpy as np
import pytest

from topoplan.problems.circuits import CircuitProblem, validate_plan_dict
from topoplan.problems.circuits import solve as circuit_solve
from topoplan.problems.circuits.bound import evaluate
from topoplan.plans.circuits import array_from_tables
from topoplan.core.errors import TopoplanError
from topoplan.core.placement import from_nodes, sequential
from topoplan.problems.placement import PlacementProblem, simulated_time, solve, to_placement
from topoplan.core.topology_io import load_topology
from topoplan.traffic.matrix import from_arrays
from topoplan.traffic.sources import load_traffic

FAST = dict(max_evals=60, anneal_steps=40, rounds=2, time_limit=30)
B = 10e6


def _tiny():
    """2 switches x 4 single-core nodes, one OCS node per switch, fat optical path, thin uplinks."""
    return load_topology("paper003", ["switches=2", "nodes_per_switch=4", "cores_per_node=1",
                                      "ocs.nodes_per_switch=1", "ocs.bw=40Gbps", "ocs.node_link_bw=10Gbps",
                                      "eps.up_bw=1Gbps"])


def _heavy_pairs(topo):
    """Two heavy rank pairs that block placement puts on non-OCS nodes under different switches."""
    ocs, sw = topo.is_ocs_node(), topo.node_switch()
    left = [x for x in range(topo.n_nodes) if sw[x] == 0 and not ocs[x]][:2]
    right = [x for x in range(topo.n_nodes) if sw[x] == 1 and not ocs[x]][:2]
    src = [left[0], right[0], left[1], right[1]]
    dst = [right[0], left[0], right[1], left[1]]
    return from_arrays(topo.n_nodes, src, dst, [B] * 4)


def _rescore(res, problem):
    """The circuit bound of a result's plan, recomputed from the plan alone."""
    pl = to_placement(res)
    cp = CircuitProblem.build(problem.topology, problem.traffic, pl, threshold_B=problem.threshold_B)
    nh = array_from_tables(res.plan["forwarding"], cp.n_nodes, cp.n_switches)
    return evaluate(cp, [tuple(c) for c in res.plan["circuits"]], nh)


def test_heavy_pairs_on_one_circuit_halve_the_bound():
    topo = _tiny()
    p = PlacementProblem.build(topo, _heavy_pairs(topo))
    res = solve(p, "joint", init="sequential", seed=0, **FAST)
    node_bw = 10e9 / 8
    # place-then-assign: both pairs relay through the one OCS node per switch -> 2B on its EPS link
    assert res.metrics["start_circuit_bound_s"] == pytest.approx(2 * B / node_bw)
    # joint: one pair sits on the circuit's ends; the other relays once -> B per link, the optimum
    # (one circuit: some pair must cross node links or the 1 Gbps uplinks)
    assert res.objective == pytest.approx(B / node_bw)
    assert res.metrics["direct_bytes"] == pytest.approx(2 * B)
    (u, v), = res.plan["circuits"]
    node = np.asarray(res.plan["rank_to_node"])
    ranks_on_circuit = {int(np.flatnonzero(node == u)[0]), int(np.flatnonzero(node == v)[0])}
    heavy = _heavy_pairs(topo)
    assert ranks_on_circuit in ({int(heavy.src[0]), int(heavy.dst[0])}, {int(heavy.src[2]), int(heavy.dst[2])})


def test_joint_plan_is_faster_in_the_simulator():
    topo = _tiny()
    traffic = _heavy_pairs(topo)
    p = PlacementProblem.build(topo, traffic)
    res = solve(p, "joint", init="sequential", seed=0, **FAST)
    start = circuit_solve(CircuitProblem.build(topo, traffic, sequential(traffic.n_ranks, topo)), "greedy")
    start_plan = {**start.plan, **from_nodes(start.plan["rank_to_node"], topo).to_dict()}
    assert simulated_time(p, res.to_dict()) < 0.8 * simulated_time(p, start_plan)


@pytest.mark.parametrize("spec,sets", [
    ("neighbor2d:rows=16,cols=16,bytes=4MB,iters=2", ["ocs.nodes_per_switch=1"]),
    ("npb:kernel=mg,class=A,np=256", ["ocs.nodes_per_switch=2"]),
    ("random:np=200,bytes=2MB,msgs=600,seed=3", []),
])
def test_never_worse_than_its_start_and_plan_is_valid(spec, sets):
    topo = load_topology("paper003", sets)
    p = PlacementProblem.build(topo, load_traffic(spec))
    res = solve(p, "joint", seed=1, **FAST)
    assert res.objective <= res.metrics["start_circuit_bound_s"] * (1 + 1e-12)
    # the start is metis + greedy: recompute it independently
    metis = solve(p, "metis", seed=1)
    start = circuit_solve(CircuitProblem.build(topo, p.traffic, to_placement(metis), threshold_B=p.threshold_B), "greedy",
                          seed=1)
    assert res.metrics["start_circuit_bound_s"] == pytest.approx(start.objective)
    # the plan carries placement and circuits, validates and scores as reported
    validate_plan_dict(res.to_dict(), topo, where="test")
    to_placement(res).validate(topo)
    assert len(res.plan["rank_to_slot"]) == p.n_ranks
    ev = _rescore(res, p)
    assert ev.congestion_s == pytest.approx(res.objective, rel=1e-9)
    assert res.metrics["circuits_used"] == len(res.plan["circuits"]) > 0
    assert res.metrics["inter_switch_bytes"] > 0 and "hop_weighted_bytes" in res.metrics


def test_final_ilp_never_worse_than_metis_then_ilp():
    topo = load_topology("paper003", ["ocs.nodes_per_switch=1"])
    p = PlacementProblem.build(topo, load_traffic("npb:kernel=mg,class=A,np=256"))
    res = solve(p, "joint", seed=0, final_method="ilp", circuit_time_limit=120, **FAST)
    metis = solve(p, "metis", seed=0)
    ilp = circuit_solve(CircuitProblem.build(topo, p.traffic, to_placement(metis), threshold_B=p.threshold_B), "ilp",
                        time_limit=120, seed=0)
    assert ilp.gap < 1e-6          # the bound of metis + ilp is proven optimal for that placement
    assert res.objective <= ilp.objective * (1 + 1e-6)
    assert res.metrics["start_circuit_bound_s"] == pytest.approx(ilp.objective, rel=1e-6)
    assert _rescore(res, p).congestion_s == pytest.approx(res.objective, rel=1e-9)


def test_seeded_runs_repeat():
    topo = load_topology("paper003", ["ocs.nodes_per_switch=1"])
    p = PlacementProblem.build(topo, load_traffic("random:np=128,bytes=2MB,msgs=300,seed=5"))
    a = solve(p, "joint", seed=4, **FAST)
    b = solve(p, "joint", seed=4, **FAST)
    assert a.plan["rank_to_node"] == b.plan["rank_to_node"]
    assert a.plan["circuits"] == b.plan["circuits"] and a.objective == b.objective
    assert a.seed == 4


def test_counted_runs_do_not_depend_on_the_clock(monkeypatch):
    """With max_evals and anneal_steps and no time limit, a machine where every clock reading is a second
    later (a loaded machine, exaggerated) gives the same plan; with a time limit it stops early."""
    import time

    topo = load_topology("paper003", ["ocs.nodes_per_switch=1"])
    p = PlacementProblem.build(topo, load_traffic("random:np=128,bytes=2MB,msgs=300,seed=5"))
    counts = dict(max_evals=60, anneal_steps=40, rounds=3)
    ref = solve(p, "joint", seed=4, **counts)
    assert ref.options["time_budget_s"] is None and ref.metrics["rounds"] >= 2
    real, t = time.perf_counter, [0.0]

    def slow():
        t[0] += 1.0
        return real() + t[0]

    monkeypatch.setattr(time, "perf_counter", slow)
    slow_run = solve(p, "joint", seed=4, **counts)
    assert slow_run.plan["rank_to_node"] == ref.plan["rank_to_node"] and slow_run.objective == ref.objective
    assert slow_run.metrics["evaluations"] == ref.metrics["evaluations"]
    capped = solve(p, "joint", seed=4, time_limit=2.0, **counts)
    assert capped.metrics["rounds"] < ref.metrics["rounds"] and capped.options["time_budget_s"] == 2.0


@pytest.mark.parametrize("relay", ["pipelined", "store-and-forward"])
def test_score_simulated_reports_the_simulated_time_and_never_loses_to_the_start(relay):
    topo = _tiny()
    p = PlacementProblem.build(topo, _heavy_pairs(topo))
    model = {"relay": relay}
    res = solve(p, "joint", init="sequential", seed=0, score="simulated", sim_model=model, **FAST)
    assert res.metrics["simulated_s"] == pytest.approx(simulated_time(p, res.to_dict(), None, model), rel=1e-9)
    assert res.options["sim_model"]["relay"] == relay and res.options["final_pick"] == "simulated"
    # the start: place sequentially, then assign circuits with the same method (greedy)
    from topoplan.problems.circuits import CircuitProblem, solve as circuit_solve
    from topoplan.core.placement import sequential

    pl = sequential(p.n_ranks, topo)
    start = circuit_solve(CircuitProblem.build(topo, p.traffic, pl, threshold_B=p.threshold_B), "greedy", seed=0)
    assert res.metrics["simulated_s"] <= simulated_time(p, {**start.plan, **pl.to_dict()}, None, model) * (1 + 1e-9)


def test_bad_input():
    p = PlacementProblem.build(load_topology("paper003", ["kind=tree", "ocs=null"]),
                               load_traffic("ring:np=8,bytes=1MB"))
    with pytest.raises(TopoplanError, match="hybrid"):
        solve(p, "joint")
    q = PlacementProblem.build(_tiny(), load_traffic("ring:np=8,bytes=1MB"))
    with pytest.raises(TopoplanError, match="circuit method"):
        solve(q, "joint", circuit_method="nope")
    with pytest.raises(TopoplanError, match="init"):
        solve(q, "joint", init="joint")
