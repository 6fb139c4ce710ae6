"""Distance-vector forwarding tables (000 3.3, 003 Fig. 4): relays, optical ties, load sharing, multi-hop, limits."""

import numpy as np
import pytest

from test_circuits_cases import hybrid, problem
from topoplan.problems.circuits import validate_plan_dict
from topoplan.problems.circuits.bound import evaluate
from topoplan.plans.circuits import array_from_tables, tables_from_array
from topoplan.problems.circuits.forwarding import Routes, distance_vector, polish_tables
from topoplan.core.errors import TopoplanError


def test_relay_route_and_entries():
    t = hybrid()  # 0,1,2 | 3,4,5; OCS 0,1 | 3,4
    p = problem(t, [(2, 5, 8e6), (5, 2, 1e6)])
    nh = distance_vector(p, [(0, 3)])
    assert nh[2, 1] == 0 and nh[0, 1] == 3 and nh[1, 1] == 0   # sources relay via the circuit's end
    assert nh[5, 0] == 3 and nh[3, 0] == 0
    assert (nh[[3, 4, 5], 1] == -1).all()                        # no entries towards one's own switch
    _, end, fb, ncirc, nrel = Routes(p, [(0, 3)], nh).route(2, 1)
    assert end == 3 and not fb and ncirc == 1 and nrel == 1


def test_no_route_means_no_entry():
    t = hybrid(switches=3, per_switch=2, ocs_per_switch=1)
    p = problem(t, [(0, 4, 1e6)])
    nh = distance_vector(p, [(0, 2)])   # S0-S1 only; nothing reaches S2
    assert nh[0, 2] == -1 and nh[1, 2] == -1
    assert evaluate(p, [(0, 2)], nh).fallback_bytes == 1e6


def test_multi_hop_through_an_intermediate_switch_and_hop_limit():
    t = hybrid(switches=3, per_switch=2, ocs_per_switch=2)  # 0,1 | 2,3 | 4,5
    p = problem(t, [(1, 5, 4e6)])
    circ = [(0, 2), (3, 4)]
    nh = distance_vector(p, circ)
    assert (nh[1, 2], nh[0, 2], nh[2, 2], nh[3, 2]) == (0, 2, 3, 4)
    ev = evaluate(p, circ, nh)
    assert ev.max_hops == 2 and ev.uplink_bytes == 0
    nh1 = distance_vector(p, circ, hop_limit=1)
    assert nh1[1, 2] == -1 and nh1[0, 2] == -1 and nh1[3, 2] == 4
    doc = {"circuits": [list(c) for c in circ], "forwarding": tables_from_array(nh), "hop_limit": 1}
    with pytest.raises(TopoplanError, match="more than hop_limit 1"):
        validate_plan_dict(doc, t)


def test_tie_prefers_the_optical_next_hop():
    # OCS 10 Gbps, OCS nodes' EPS links 20 Gbps, 2 ports: from node 0 to S1, "own circuit to S2 then
    # node 4's second circuit" costs 2/10, "EPS to node 1 then its circuit" 2/20 + 1/10: a tie
    t = hybrid(switches=3, per_switch=2, ocs_per_switch=2, ports=2, ocs_bw="10Gbps", node_link="20Gbps")
    p = problem(t, [(0, 2, 1e6)])
    nh = distance_vector(p, [(0, 4), (2, 4), (1, 3)])
    assert nh[0, 1] == 4


def test_parallel_circuits_share_load_by_source():
    t = hybrid(switches=2, per_switch=5, ocs_per_switch=2)  # 0..4 | 5..9; OCS 0,1 | 5,6
    p = problem(t, [(2, 7, 9e6), (3, 8, 5e6), (4, 9, 4e6)])
    circ = [(0, 5), (1, 6)]
    nh = distance_vector(p, circ)
    relays = {int(nh[a, 1]) for a in (2, 3, 4)}
    assert relays == {0, 1}
    assert nh[2, 1] != nh[3, 1] and nh[3, 1] == nh[4, 1]   # largest alone; the next two share the other relay
    ev = evaluate(p, circ, nh)
    i = p.link_index()
    assert sorted(ev.loads_B[i["circuit"]:i["circuit"] + 4:2].tolist()) == [9e6, 9e6]


def test_routes_detect_loops_and_non_neighbours():
    t = hybrid()
    p = problem(t, [(2, 5, 1e6)])
    nh = np.full((6, 2), -1)
    nh[2, 1], nh[1, 1] = 1, 2
    with pytest.raises(TopoplanError, match="routing loop"):
        Routes(p, [(0, 3)], nh).route(2, 1)
    nh = np.full((6, 2), -1)
    nh[2, 1] = 4
    with pytest.raises(TopoplanError, match="not a neighbour"):
        Routes(p, [(0, 3)], nh).route(2, 1)


def test_tables_round_trip():
    nh = np.full((4, 2), -1)
    nh[0, 1], nh[3, 0] = 2, 1
    d = tables_from_array(nh)
    assert d == {"0": {"1": 2}, "3": {"0": 1}}
    assert (array_from_tables(d, 4, 2) == nh).all()


def test_polish_moves_overflow_to_the_uplinks():
    # one thin relay; fat uplinks: relaying everything overloads the relay's EPS link
    t = hybrid(switches=2, per_switch=4, ocs_per_switch=1, up="40Gbps")  # 0..3 | 4..7; OCS 0 | 4
    p = problem(t, [(1, 5, 6e6), (2, 6, 6e6), (3, 7, 6e6)])
    circ = [(0, 4)]
    nh = distance_vector(p, circ)
    before = evaluate(p, circ, nh)
    nh2 = polish_tables(p, circ, nh)
    after = evaluate(p, circ, nh2)
    assert before.congestion_s == pytest.approx(18e6 / 1.25e9)
    assert after.congestion_s < before.congestion_s
    assert after.congestion_s == pytest.approx(6e6 / 1.25e9)   # the sources' own links: optimal
    validate_plan_dict({"circuits": [list(c) for c in circ], "forwarding": tables_from_array(nh2)}, t)


@pytest.mark.parametrize("threshold, ok", [(None, True), (0, True), (1250.0, True), (-5, False), (float("nan"), False),
                                           (float("inf"), False), ("1KB", False), (True, False)])
def test_plan_threshold_must_be_a_size(threshold, ok):
    """A plan's threshold_B (from which size messages take the circuits) is a size: validate and export agree."""
    t = hybrid()  # 0,1,2 | 3,4,5; OCS 0,1 | 3,4
    doc = {"circuits": [[0, 3]], "forwarding": {}, "threshold_B": threshold}
    if ok:
        validate_plan_dict(doc, t)
    else:
        with pytest.raises(TopoplanError, match=r"^circuit plan: field 'threshold_B': expected a non-negative size "
                                                r"in bytes, got "):
            validate_plan_dict(doc, t)
