"""KaHIP as an installed placement method, and the improving methods against the best partitioner (issue 20).

The real matrices are MapLib's four 64-rank applications (``../shared/matrices/maplib``), placed on
4 switches x 16 single-core nodes with the inter-switch objective: ``anneal`` and ``ilp`` start from
the best of every partitioner installed (``STARTS``), so neither may end worse than that start, nor
worse than KaHIP's strong configuration with perfect balance, best of 5 seeds.
"""

import numpy as np
import pytest

from topoplan.core.topology import TreeTopology
from topoplan.core.topology_io import load_topology
from topoplan.problems.placement import METHODS, STARTS, PlacementProblem, solve
from topoplan.problems.placement.metis import kahip_parts, partition
from topoplan.problems.placement.problem import KAHIP_START_MAX_EDGES, default_starts
from topoplan.problems.placement.refine import cut_weight
from topoplan.traffic.sources import load_traffic

APPS = ("amg64", "btmz64", "cg64", "lulesh64")
GRID = "neighbor2d:rows=16,cols=16,bytes=4MB"


@pytest.fixture
def kahip_module():
    return pytest.importorskip("kahip", reason="the kahip module is not installed (pip install kahip)")


@pytest.fixture
def maplib(shared):
    path = shared / "matrices" / "maplib"
    if not path.is_dir():
        pytest.skip("../shared/matrices/maplib is absent")
    topo = TreeTopology(kind="tree", nodes_per_switch=(16,) * 4, cores_per_node=1, name="4x16")

    def problem(app):
        return PlacementProblem.build(topo, load_traffic(str(path / f"{app}.csv")), objective="inter-switch")

    return problem


def test_kahip_method_is_valid_and_balanced(kahip_module):
    prob = PlacementProblem.build(load_topology("paper003"), load_traffic(GRID), objective="inter-switch")
    res = solve(prob, "kahip", seed=1)
    node = np.array(res.plan["rank_to_node"])
    assert np.bincount(node, minlength=64).tolist() == [4] * 64          # 4 cores per node, all used
    assert np.bincount(prob.node_switch[node], minlength=4).tolist() == [64] * 4
    assert res.objective == pytest.approx(2.56e8)                       # 32 cut edges of 8 MB: optimal
    assert res.options["partitioner"] == "kahip" and METHODS.unavailable("kahip") is None


def test_kahip_balances_perfectly_and_pads_unequal_targets(kahip_module):
    W = PlacementProblem.build(load_topology("paper003"), load_traffic(GRID)).graph()
    part = kahip_parts(W, [64] * 4, seed=0)                             # kaffpa alone, imbalance 0
    assert np.bincount(part).tolist() == [64] * 4
    for targets in ([100, 100, 56], [30, 70, 90, 66]):                  # padding, then exact by repair
        part = partition(W, targets, seed=2, partitioner="kahip", tries=1)
        assert np.bincount(part, minlength=len(targets)).tolist() == targets


def test_kahip_fills_partly_used_machines(kahip_module):
    prob = PlacementProblem.build(load_topology("paper003"), load_traffic("neighbor2d:rows=5,cols=7,bytes=1MB"))
    node = np.array(solve(prob, "kahip").plan["rank_to_node"])
    assert len(node) == 35 and np.bincount(node).max() <= 4


def test_kahip_is_a_start_where_installed_and_small_enough(kahip_module):
    assert "kahip" in STARTS["anneal"] and "kahip" in STARTS["ilp"]
    small = PlacementProblem.build(load_topology("paper003"), load_traffic(GRID))
    assert "kahip" in default_starts(small, "anneal")
    topo = TreeTopology(kind="tree", nodes_per_switch=(32,) * 128, cores_per_node=1)
    big = PlacementProblem.build(topo, load_traffic("random:np=4096,msgs=40000,bytes=1MB,seed=1"))
    assert len(big.edges()[0]) > KAHIP_START_MAX_EDGES
    assert "kahip" not in default_starts(big, "anneal") and "metis" in default_starts(big, "anneal")


def _best_start(prob):
    costs = {m: solve(prob, m, seed=0).objective for m in default_starts(prob, "anneal")}
    return min(costs.values()), costs


@pytest.mark.parametrize("app", APPS)
def test_anneal_and_ilp_are_never_worse_than_the_best_partitioner(maplib, app):
    prob = maplib(app)
    start, costs = _best_start(prob)
    ann = solve(prob, "anneal", seed=0, max_steps=150)
    ilp = solve(prob, "ilp", seed=0, time_limit=1)
    assert ann.objective <= start * (1 + 1e-12) and ilp.objective <= start * (1 + 1e-12)
    assert ann.options["init"] in costs and ilp.options["init"] in costs
    assert costs[ann.options["init"]] == start


@pytest.mark.parametrize("app", APPS)
def test_never_worse_than_kahip_strong_best_of_five(maplib, app, kahip_module):
    prob = maplib(app)
    W = prob.graph()
    strong = min(cut_weight(W, kahip_parts(W, [16] * 4, seed=s)) for s in range(5))
    for method, opts in (("kahip", {}), ("anneal", {"max_steps": 150}), ("ilp", {"time_limit": 1})):
        assert solve(prob, method, seed=0, **opts).objective <= strong * (1 + 1e-12), method


def _switch_pairs(topo, traffic, rank_to_node):
    sw = topo.node_switch()[np.asarray(rank_to_node)]
    a, b = sw[traffic.src], sw[traffic.dst]
    return {(min(x, y), max(x, y)) for x, y in zip(a.tolist(), b.tolist()) if x != y}


def test_hybrid_metis_breaks_equal_cuts_by_fewest_switch_pairs():
    # 000's Neighbor: four 8 x 4 strips and 2 x 2-like layouts both cut 24 rank pairs; the strips need 3 circuits
    topo = load_topology("paper000")
    tr = load_traffic("neighbor2d:rows=8,cols=16,bytes=40MB,iters=5")
    res = solve(PlacementProblem.build(topo, tr, objective="inter-switch"), "metis")
    assert res.objective == pytest.approx(24 * 2 * 5 * 40e6)     # the minimum cut ...
    assert len(_switch_pairs(topo, tr, res.to_dict()["rank_to_node"])) == 3     # ... chaining the switches
    # without an OCS the same graph may take any minimum cut: the tie-break is the hybrid's
    flat = partition(PlacementProblem.build(topo, tr, objective="inter-switch").graph(), [32] * 4, pair_ties=True)
    assert cut_weight(PlacementProblem.build(topo, tr).graph(), flat) == pytest.approx(res.objective)


def test_plain_metis_is_one_unrefined_run():
    topo = load_topology("paper003")
    tr = load_traffic(GRID)
    prob = PlacementProblem.build(topo, tr, objective="inter-switch")
    plain = [solve(prob, "metis", seed=s, plain=True) for s in range(6)]
    best = solve(prob, "metis")
    assert all(p.objective >= best.objective for p in plain)
    assert any(p.objective > best.objective for p in plain)     # a single unrefined run is not always optimal
    assert plain[0].options["plain"] is True
    with pytest.raises(Exception, match="field 'plain'"):
        solve(prob, "metis", plain="yes")
