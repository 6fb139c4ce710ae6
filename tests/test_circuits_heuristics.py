"""The papers' assignments, each checked on the rule that defines it."""

from test_circuits_cases import hybrid, problem, random_problem
from topoplan.problems.circuits import CircuitProblem, solve
from topoplan.core.placement import from_nodes
from topoplan.traffic.matrix import from_arrays


def circuits(res):
    return [tuple(c) for c in res.plan["circuits"]]


def test_sp_most_messages_then_smallest_rank():
    t = hybrid(switches=2, per_switch=3, ocs_per_switch=3)  # 0,1,2 | 3,4,5 all OCS
    # pairs 0-3 and 1-4: 2 messages each (tie); 2-5: 1 message of many more bytes
    tr = from_arrays(6, [0, 0, 1, 1, 2], [3, 3, 4, 4, 5], [1e6, 1e6, 1e6, 1e6, 50e6])
    p = CircuitProblem.build(t, tr, threshold_B=1000, max_circuits=1)
    assert circuits(solve(p, "sp")) == [(0, 3)]            # tie on messages -> smaller rank
    assert circuits(solve(p, "three-step")) == [(2, 5)]    # 001 step 1 goes by volume instead
    # the tie-break is by MPI rank, not node id: put rank 0 on node 1 and rank 1 on node 0
    pl = from_nodes([1, 0, 2, 4, 3, 5], t)
    p2 = CircuitProblem.build(t, tr, pl, threshold_B=1000, max_circuits=1)
    assert circuits(solve(p2, "sp")) == [(1, 4)]


def test_sp_round_robin_over_switch_pairs_and_only_free_communicating_pairs():
    t = hybrid(switches=3, per_switch=3, ocs_per_switch=3)  # 0-2 | 3-5 | 6-8
    # S0-S1: 0-3, 1-4; S0-S2: 0-8 (3 messages, but node 0 is taken first), 2-6; S1-S2: 5-7
    tr = from_arrays(9, [0, 1, 0, 0, 0, 2, 5], [3, 4, 8, 8, 8, 6, 7], [1e6] * 7)
    p = CircuitProblem.build(t, tr, threshold_B=1000)
    assert circuits(solve(p, "sp")) == [(0, 3), (2, 6), (5, 7), (1, 4)]   # round 1 over all pairs, then round 2
    p3 = CircuitProblem.build(t, tr, threshold_B=1000, max_circuits=3)
    assert circuits(solve(p3, "sp")) == [(0, 3), (2, 6), (5, 7)]


def test_three_step_order():
    # OCS nodes (first 3 of each switch) do not talk; the others do: counts S0-S1 3, S1-S2 2, S0-S2 1
    t = hybrid(switches=3, per_switch=6, ocs_per_switch=3)   # OCS 0-2 | 6-8 | 12-14
    pairs = [(3, 9, 1e6), (4, 10, 1e6), (5, 11, 1e6), (9, 15, 1e6), (10, 16, 1e6), (3, 15, 5e6)]
    p = problem(t, pairs, max_circuits=4)
    sw = p.node_switch
    got = [(int(sw[a]), int(sw[b])) for a, b in circuits(solve(p, "three-step"))]
    # step 2: every communicating switch pair once, by count (largest first); step 3: count - assigned
    assert got == [(0, 1), (1, 2), (0, 2), (0, 1)]


def test_three_step_step1_is_round_robin_by_volume():
    t = hybrid(switches=3, per_switch=3, ocs_per_switch=3)
    pairs = [(0, 3, 9e6), (1, 4, 8e6), (2, 6, 1e6)]
    p = problem(t, pairs, max_circuits=2)
    assert circuits(solve(p, "three-step")) == [(0, 3), (2, 6)]


def test_greedy_ascending_count_first_then_count_minus_assigned():
    t = hybrid(switches=3, per_switch=6, ocs_per_switch=3)
    pairs = [(3, 9, 1e6), (4, 10, 1e6), (5, 11, 1e6), (9, 15, 1e6), (10, 16, 1e6), (3, 15, 5e6)]
    p = problem(t, pairs, max_circuits=4)
    sw = p.node_switch
    got = [(int(sw[a]), int(sw[b])) for a, b in circuits(solve(p, "greedy", seed=1))]
    assert got == [(0, 2), (1, 2), (0, 1), (0, 1)]


def test_greedy_prefers_communicating_ocs_pairs_and_random_otherwise():
    t = hybrid(switches=2, per_switch=4, ocs_per_switch=3)   # OCS 0-2 | 4-6
    p = problem(t, [(1, 5, 3e6), (2, 6, 9e6), (3, 7, 1e6)], max_circuits=1)
    assert circuits(solve(p, "greedy")) == [(2, 6)]
    q = problem(t, [(3, 7, 1e6)])   # no OCS pair communicates: random free OCS nodes, by seed
    runs = {s: circuits(solve(q, "greedy", seed=s)) for s in range(6)}
    assert runs[3] == circuits(solve(q, "greedy", seed=3))
    assert len({tuple(v) for v in runs.values()}) > 1
    assert all(len(v) == 3 for v in runs.values())


def test_matching_maximizes_total_weight():
    # a=0, d=1 under S0; b=3, c=4 under S1: 0-3 (5 MB) alone beats 0-4 (4) but 0-4 + 1-3 (4 + 4) is heavier
    t = hybrid(switches=2, per_switch=3, ocs_per_switch=2)
    p = problem(t, [(0, 3, 5e6), (0, 4, 4e6), (1, 3, 4e6)])
    assert set(circuits(solve(p, "matching"))) == {(0, 4), (1, 3)}
    assert circuits(solve(p, "three-step"))[0] == (0, 3)   # the volume-greedy choice the matching avoids


def test_none_and_limits_and_validity():
    for seed in range(3):
        p = random_problem(seed, max_circuits=2)
        for m in ("none", "sp", "three-step", "greedy", "matching"):
            r = solve(p, m, seed=seed)
            assert len(r.plan["circuits"]) <= 2
            assert r.status == "heuristic" and r.objective == r.metrics["congestion_bound_s"] > 0
            if m == "none":
                assert r.plan["circuits"] == [] and r.plan["forwarding"] == {}


def test_two_ports_per_node():
    t = hybrid(switches=3, per_switch=2, ocs_per_switch=1, ports=2)   # OCS 0 | 2 | 4
    p = problem(t, [(0, 2, 1e6), (0, 4, 1e6), (2, 4, 1e6)])
    for m in ("sp", "three-step", "greedy", "matching"):
        got = set(circuits(solve(p, m)))
        assert got == {(0, 2), (0, 4), (2, 4)}, m
