"""Building the circuit problem, validating plans (every rule of the plan-file contract), comparing methods."""

import pytest

from test_circuits_cases import hybrid, problem, random_problem
from topoplan.problems.circuits import CircuitProblem, METHODS, solve, validate_plan_dict
from topoplan.problems.circuits.problem import compare
from topoplan.core.errors import TopoplanError
from topoplan.core.topology_io import load_topology
from topoplan.traffic.matrix import from_arrays


def test_build_aggregates_by_node_and_threshold():
    t = load_topology("paper003", ["ocs.nodes_per_switch=1"])  # 4 cores per node, 16 nodes per switch
    # ranks 0,1 on node 0; rank 64 on node 16 (switch 1)
    tr = from_arrays(65, [0, 1, 0, 0, 64], [64, 64, 1, 64, 0], [4e6, 2e6, 7e6, 500, 3e6])
    p = CircuitProblem.build(t, tr)
    assert p.threshold_B == pytest.approx(1250)
    assert sorted(zip(p.large_src.tolist(), p.large_dst.tolist(), p.large_bytes.tolist())) == [(0, 16, 6e6), (16, 0, 3e6)]
    assert p.base_intra_B[0] == 7e6                              # ranks 0 -> 1 on one node
    assert p.base_uplink_up_B[0] == 500 and p.base_up_B[0] == 500  # the small message takes the EPS
    assert p.switch_bytes()[0, 1] == 6e6 and p.own_in()[0, 1] == 3e6
    assert p.switch_pair_counts()[0, 1] == 1 and p.node_min_rank[16] == 64
    assert p.circuit_limit() == 2


def test_build_rejects_non_hybrid_and_bad_options():
    tr = from_arrays(4, [0], [3], [1e6])
    with pytest.raises(TopoplanError, match="hybrid"):
        CircuitProblem.build(load_topology("paper003", ["kind=tree", "ocs=null"]), tr)
    t = hybrid()
    with pytest.raises(TopoplanError, match="hop_limit"):
        CircuitProblem.build(t, tr, hop_limit=0)
    with pytest.raises(TopoplanError, match="max_circuits"):
        CircuitProblem.build(t, tr, max_circuits=-1)
    with pytest.raises(TopoplanError, match="unknown circuits method"):
        solve(problem(t, [(0, 3, 1e6)]), "magic")


@pytest.mark.parametrize("doc, msg", [
    ({"circuits": [[0, 9]]}, "unknown node 9"),
    ({"circuits": [[2, 3]]}, "node 2 is not an OCS node"),
    ({"circuits": [[0, 1]]}, "under the same switch"),
    ({"circuits": [[0, 3], [3, 0]]}, "listed twice"),
    ({"circuits": [[0, 3], [0, 4]]}, "node 0 has 2 circuits but 1 optical port"),
    ({"circuits": [[0, 3], [1, 4]], "options": {"max_circuits": 1}}, "max_circuits is 1"),
    ({"circuits": [[0, 3]], "forwarding": {"2": {"1": 4}}}, "next hop 4 is not a neighbour of node 2"),
    ({"circuits": [[0, 3]], "forwarding": {"0": {"1": 4}}}, "next hop 4 is not a neighbour"),
    ({"circuits": [[0, 3]], "forwarding": {"2": {"1": 1}, "1": {"1": 2}}}, "routing loop towards switch 1"),
    ({"circuits": [[0, 3]], "forwarding": {"7": {"1": 0}}}, "unknown node '7'"),
    ({"circuits": [[0, 3]], "forwarding": {"2": {"5": 0}}}, "unknown switch '5'"),
    ({"circuits": [[0, 3]], "forwarding": {"3": {"1": 4}}}, "already under switch 1"),
    ({"circuits": [[0, 3]], "rank_to_node": [0, 17]}, "node 17 does not exist"),
    ({"circuits": "x"}, "expected a list"),
])
def test_validator_rejects(doc, msg):
    with pytest.raises(TopoplanError, match=msg):
        validate_plan_dict(doc, hybrid(), where="p.json")


@pytest.mark.parametrize("forwarding, msg", [
    ({"2": {"1": 0}, "02": {"1": 0}}, "field 'forwarding': node key '02' is not written as '2'"),
    ({"00": {"1": 3}}, "field 'forwarding': node key '00' is not written as '0'"),
    ({" 2": {"1": 0}}, "node key ' 2' is not written as '2'"),
    ({"+2": {"1": 0}}, "field 'forwarding': unknown node '\\+2'"),
    ({"2": {"01": 0}}, "field 'forwarding.2': switch key '01' is not written as '1'"),
    ({"2": {"1": 0}, 2: {"1": 0}}, "field 'forwarding': node 2 is given twice"),
    ({"2": {"1": 0, 1: 0}}, "field 'forwarding.2': switch 1 is given twice"),
])
def test_forwarding_keys_name_each_node_and_switch_once(forwarding, msg):
    """"0" and "00" were both read as node 0: the tables a simulator or an OCS controller used depended on which
    row a reader kept. A key is now the id as JSON writes it, given once."""
    with pytest.raises(TopoplanError, match=msg):
        validate_plan_dict({"circuits": [[0, 3]], "forwarding": forwarding}, hybrid(), where="p.json")


def test_validator_accepts_relays_and_partner_hops():
    doc = {"circuits": [[0, 3]], "forwarding": {"2": {"1": 0}, "0": {"1": 3}, "1": {"1": 0}, "5": {"0": 3}}}
    validate_plan_dict(doc, hybrid())


def test_every_method_result_has_the_common_keys():
    p = random_problem(0)
    for m in METHODS:
        r = solve(p, m, time_limit=1.0, seed=4)
        d = r.to_dict()
        for k in ("method", "seed", "objective", "metrics", "bound", "gap", "status", "wall_s", "circuits",
                  "forwarding", "load_sharing", "hop_limit", "threshold_B", "rank_to_node", "options"):
            assert k in d, (m, k)
        assert d["seed"] == 4 and d["method"] == m
        for k in ("congestion_bound_s", "uplink_bytes", "circuits_used"):
            assert k in d["metrics"]
        assert d["objective"] == d["metrics"]["congestion_bound_s"]
        validate_plan_dict(d, p.topology)


def test_compare_reports_gap_to_the_exact_optimum():
    p = random_problem(2)
    rows = compare(p, ["none", "three-step", "ilp"], formulation="node", simulate=lambda plan: len(plan["circuits"]))
    by = {r["method"]: r for r in rows}
    assert by["ilp"]["status"] == "optimal" and by["ilp"]["gap_to_exact"] == 0
    for m in ("none", "three-step"):
        T, Tx = by[m]["objective"], by["ilp"]["objective"]
        assert by[m]["gap_to_exact"] == pytest.approx((T - Tx) / T)
    assert by["three-step"]["simulated_s"] == by["three-step"]["circuits"]


def test_plan_files_are_validated_on_write_and_read(tmp_path):
    from topoplan.plans.planfile import read_plan, write_plan

    t = hybrid()
    p = problem(t, [(2, 5, 8e6)])
    res = solve(p, "three-step")
    path = tmp_path / "plan.json"
    doc = write_plan(path, res, t, topology="tiny")
    assert read_plan(path, t)["circuits"] == doc["circuits"] == res.plan["circuits"]
    bad = dict(doc, circuits=[[0, 1]])
    with pytest.raises(TopoplanError, match="same switch"):
        write_plan(tmp_path / "bad.json", bad, t)
    assert not (tmp_path / "bad.json").exists()
    (tmp_path / "x.json").write_text('{"order": [1]}')
    with pytest.raises(TopoplanError, match="not a circuit plan"):
        read_plan(tmp_path / "x.json")
