"""The communication-time bound: loads of direct, relayed, multi-hop and fall-back routes, checked by hand."""

import numpy as np
import pytest

from test_circuits_cases import hybrid, problem
from topoplan.problems.circuits.bound import better, evaluate, floor_s

GB = 1.25e9  # 10 Gbps in bytes/s


def nh_of(p, entries):
    nh = np.full((p.n_nodes, p.n_switches), -1, dtype=np.int64)
    for (n, s), h in entries.items():
        nh[n, s] = h
    return nh


def test_fallback_loads_node_links_and_uplinks():
    t = hybrid()  # nodes 0,1,2 | 3,4,5; OCS 0,1 | 3,4
    p = problem(t, [(2, 5, 5e6)])
    ev = evaluate(p, [], nh_of(p, {}))
    i = p.link_index()
    assert ev.loads_B[i["up"] + 2] == 5e6 and ev.loads_B[i["down"] + 5] == 5e6
    assert ev.loads_B[i["uplink_up"] + 0] == 5e6 and ev.loads_B[i["uplink_down"] + 1] == 5e6
    assert ev.uplink_bytes == 5e6 and ev.fallback_bytes == 5e6
    assert ev.congestion_s == pytest.approx(5e6 / GB)


def test_relay_path_loads_every_hop_and_delivery():
    t = hybrid()
    p = problem(t, [(2, 5, 8e6)])
    # 2 -> relay 0 (EPS) -> circuit 0=>3 -> delivered 3 -> 5 over the EPS
    ev = evaluate(p, [(0, 3)], nh_of(p, {(2, 1): 0, (0, 1): 3}))
    i = p.link_index()
    L = ev.loads_B
    assert L[i["up"] + 2] == 8e6 and L[i["down"] + 0] == 8e6
    assert L[i["circuit"]] == 8e6 and L[i["circuit"] + 1] == 0
    assert L[i["up"] + 3] == 8e6 and L[i["down"] + 5] == 8e6
    assert ev.uplink_bytes == 0 and ev.relayed_bytes == 8e6 and ev.direct_bytes == 0
    assert ev.congestion_s == pytest.approx(8e6 / GB)


def test_direct_circuit_skips_node_links_and_ocs_rate_counts():
    t = hybrid(ocs_bw="5Gbps")
    p = problem(t, [(0, 3, 10e6), (3, 0, 2e6)])
    ev = evaluate(p, [(0, 3)], nh_of(p, {(0, 1): 3, (3, 0): 0}))
    i = p.link_index()
    assert ev.loads_B[i["up"] + 0] == 0 and ev.loads_B[i["down"] + 3] == 0
    assert ev.direct_bytes == 12e6
    assert ev.congestion_s == pytest.approx(10e6 / 0.625e9)  # the circuit at 5 Gbps is the bottleneck
    assert ev.metrics()["bottleneck"] == "node0000=>node0003"


def test_small_and_intra_switch_traffic_stay_on_eps():
    t = hybrid()
    p = problem(t, [(0, 3, 500.0), (0, 1, 4e6)], threshold=1000.0)
    assert len(p.large_bytes) == 0
    ev = evaluate(p, [(0, 3)], nh_of(p, {(0, 1): 3}))
    i = p.link_index()
    assert ev.loads_B[i["uplink_up"]] == 500 and ev.loads_B[i["circuit"]] == 0
    assert ev.loads_B[i["up"] + 0] == 4e6 + 500


def test_multi_hop_then_fallback_and_floor():
    t = hybrid(switches=3, per_switch=2, ocs_nodes=[0, 1, 2, 3, 4])  # 0,1 | 2,3 | 4,5; node 5 not OCS
    p = problem(t, [(0, 5, 6e6)])
    # 0 => 2 (circuit), 2 -> 3 (EPS), 3 => 4 (circuit), 4 -> 5 delivered
    ev = evaluate(p, [(0, 2), (3, 4)], nh_of(p, {(0, 2): 2, (2, 2): 3, (3, 2): 4}))
    i = p.link_index()
    assert ev.max_hops == 2 and ev.uplink_bytes == 0
    assert ev.loads_B[i["up"] + 2] == 6e6 and ev.loads_B[i["down"] + 3] == 6e6
    assert ev.loads_B[i["up"] + 4] == 6e6 and ev.loads_B[i["down"] + 5] == 6e6
    # 3's entry missing: falls back from node 3 (after one circuit)
    ev2 = evaluate(p, [(0, 2)], nh_of(p, {(0, 2): 2, (2, 2): 3}))
    assert ev2.loads_B[i["uplink_up"] + 1] == 6e6 and ev2.fallback_bytes == 6e6
    # node 0 is an OCS node: its own traffic may skip its link; node 5 cannot skip its down link
    assert floor_s(p) == pytest.approx(6e6 / GB)


def test_fat_tree_uplinks_are_not_shared():
    t = hybrid()
    t.kind = "fat-tree"
    p = problem(t, [(2, 5, 5e6), (1, 4, 5e6)])
    ev = evaluate(p, [], nh_of(p, {}))
    assert ev.congestion_s == pytest.approx(5e6 / GB)  # node links only, the 10 MB uplink load is free


def one_step(pairs, n=6):
    """The traffic of ``pairs`` as the steps of a trace: one step."""
    from topoplan.sim.steps import Steps
    from topoplan.traffic.matrix import from_arrays

    src, dst, by = zip(*pairs)
    return Steps(n, [from_arrays(n, src, dst, by)], np.array([1.0]), 1, "one step")


@pytest.mark.parametrize("steps", [True, False])
def test_plans_of_steps_that_tie_on_bound_and_uplink_bytes_are_ranked_by_their_link_bytes(steps):
    # a plan-independent bottleneck (node 1 -> node 2, 20 MB on its node links: 16 ms) hides where 0 -> 3 goes:
    # over a circuit that ends at node 3, or at node 4, which delivers it over the EPS (two more node links).
    # Plans of one bulk phase keep the first of equals.
    pairs = [(1, 2, 20e6), (0, 3, 5e6)]
    p = problem(hybrid(), pairs, steps=one_step(pairs) if steps else None)
    direct = evaluate(p, [(0, 3)], nh_of(p, {(0, 1): 3}))
    relayed = evaluate(p, [(0, 4)], nh_of(p, {(0, 1): 4}))
    assert direct.objective_s == pytest.approx(relayed.objective_s)
    assert direct.congestion_s == pytest.approx(20e6 / GB)
    assert direct.uplink_bytes == relayed.uplink_bytes == 0
    assert relayed.loads_B.sum() == pytest.approx(direct.loads_B.sum() + 2 * 5e6)
    assert better(direct, relayed) == steps and not better(relayed, direct) and not better(direct, direct)
