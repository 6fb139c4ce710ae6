"""Placement methods: validity, exact capacities, the 16x16 neighbor acceptance (ilp proves 1,280 MB)."""

import itertools
import json

import numpy as np
import pytest

from topoplan.formulations.placement_cpsat import canonical, cut_bound
from topoplan.core.errors import TopoplanError
from topoplan.problems.placement import METHODS, PlacementProblem, simulated_time, solve
from topoplan.problems.placement.exact import lower_bound
from topoplan.problems.placement.metis import ocs_first, partition, repair_balance
from topoplan.core.topology import TreeTopology
from topoplan.core.topology_io import load_topology
from topoplan.traffic.matrix import from_arrays
from topoplan.traffic.sources import load_traffic

GRID = "neighbor2d:rows=16,cols=16,bytes=4MB,iters=5"


@pytest.fixture(scope="module")
def grid():
    return PlacementProblem.build(load_topology("paper003"), load_traffic(GRID))


@pytest.mark.parametrize("method", ["sequential", "round-robin", "random", "metis", "greedy"])
def test_fast_methods_valid(grid, method):
    res = solve(grid, method, seed=3)
    node, slot = np.array(res.plan["rank_to_node"]), np.array(res.plan["rank_to_slot"])
    assert np.bincount(node, minlength=64).tolist() == [4] * 64
    assert len(set(zip(node.tolist(), slot.tolist()))) == 256
    assert res.metrics["hop_weighted_bytes"] == pytest.approx(grid.hop_bytes(node))
    assert res.seed == 3 and res.method == method


def test_sequential_matches_paper(grid):
    assert solve(grid, "sequential").metrics["inter_switch_bytes"] == 1.92e9   # 003 Table 2 Sequential


def test_random_is_seeded(grid):
    assert solve(grid, "random", seed=5).plan == solve(grid, "random", seed=5).plan
    assert solve(grid, "random", seed=5).plan != solve(grid, "random", seed=6).plan


def test_metis_cuts_grid_optimally(grid):
    m = solve(grid, "metis").metrics
    assert m["inter_switch_bytes"] == pytest.approx(1.28e9)          # 32 cut edges x 40 MB
    assert m["congestion_bound_s"] < solve(grid, "sequential").metrics["congestion_bound_s"]


def test_greedy_beats_traffic_blind_placements(grid):
    g = solve(grid, "greedy").metrics["hop_weighted_bytes"]
    assert g < solve(grid, "round-robin").metrics["hop_weighted_bytes"]
    assert g <= solve(grid, "sequential").metrics["hop_weighted_bytes"]


def test_metis_puts_inter_switch_ranks_on_ocs_nodes():
    topo = load_topology("paper003", ["ocs.nodes_per_switch=4"])
    prob = PlacementProblem.build(topo, load_traffic(GRID))
    node = np.array(solve(prob, "metis").plan["rank_to_node"])
    sw = prob.node_switch
    tr = prob.traffic
    cross = sw[node[tr.src]] != sw[node[tr.dst]]
    per_node = np.bincount(node[tr.src[cross]], weights=tr.bytes[cross], minlength=64)
    ocs = topo.is_ocs_node()
    for s in range(4):   # within every switch, each OCS node carries at least as much as any non-OCS node
        m = sw == s
        assert per_node[m & ocs].min() >= per_node[m & ~ocs].max()
    # the swap of node groups changes no cut
    assert prob.inter_switch_bytes(node) == pytest.approx(1.28e9)


def test_ocs_first_keeps_groups_and_cuts():
    prob = PlacementProblem.build(load_topology("paper003"), load_traffic(GRID))
    node = np.repeat(np.arange(64), 4)
    moved = ocs_first(prob, node)
    assert prob.hop_bytes(moved) == prob.hop_bytes(node)
    assert np.bincount(moved, minlength=64).tolist() == [4] * 64
    assert (prob.node_switch[moved] == prob.node_switch[node]).all()


def test_ilp_proves_grid_optimum():
    prob = PlacementProblem.build(load_topology("paper003"), load_traffic(GRID), objective="inter-switch")
    res = solve(prob, "ilp", time_limit=600)   # proves in about a second; the limit is for a loaded machine
    assert res.status == "optimal" and res.gap == 0
    assert res.objective == pytest.approx(1.28e9) and res.bound == pytest.approx(1.28e9)


def test_grid_bound_is_tight_at_both_levels(grid):
    # 16x16 grid, 480 edges of 40 MB: 4 switches of 64 cut >= 32 edges; 64 nodes of 4 cut >= 224
    W = grid.graph()
    assert cut_bound(W, [64] * 4, 256) == pytest.approx(32 * 40e6)
    assert cut_bound(W, [4] * 64, 256) == pytest.approx(224 * 40e6)
    assert lower_bound(grid) == pytest.approx((224 + 2 * 32) * 40e6)
    assert solve(grid, "metis").objective == pytest.approx(lower_bound(grid))


def _brute_force(prob):
    """Best hop-weighted cost over all assignments of the ranks to the cores."""
    slots = np.repeat(np.arange(prob.n_nodes), prob.cores)
    best = np.inf
    for perm in set(itertools.permutations(slots.tolist(), prob.n_ranks)):
        best = min(best, prob.cost(np.array(perm)))
    return best


def test_ilp_proves_small_random_instance_against_brute_force():
    topo = TreeTopology(kind="tree", nodes_per_switch=(2, 2), cores_per_node=2)
    rng = np.random.default_rng(7)
    src, dst = rng.integers(0, 7, 14), rng.integers(0, 7, 14)
    tr = from_arrays(7, src, dst, rng.integers(1, 9, 14) * 1e6)
    for objective in ("hops", "inter-switch"):
        prob = PlacementProblem.build(topo, tr, objective=objective)
        res = solve(prob, "ilp", time_limit=600)
        assert res.status == "optimal"
        assert res.objective == pytest.approx(_brute_force(prob))
        assert res.objective <= solve(prob, "metis").objective + 1e-6


def test_ilp_reports_bound_and_gap_on_timeout():
    prob = PlacementProblem.build(load_topology("paper003"), load_traffic("npb:kernel=cg,class=C,np=64"))
    res = solve(prob, "ilp", time_limit=2)
    assert res.bound is not None and res.bound <= res.objective
    assert res.status in ("optimal", "timeout")
    if res.status == "timeout":
        assert res.gap > 0
    assert res.objective <= solve(prob, "metis").objective


def test_ilp_rejects_what_it_does_not_model():
    with pytest.raises(TopoplanError, match="congestion"):
        solve(PlacementProblem.build(load_topology("paper003"), load_traffic(GRID), objective="congestion"), "ilp")
    with pytest.raises(TopoplanError, match="tree, fat-tree and hybrid"):
        solve(PlacementProblem.build(load_topology("mesh10x10x10"), load_traffic("ring:np=8,bytes=1MB")), "ilp")


def test_canonical_relabels_switches_and_nodes():
    # 2 switches x 2 nodes: ranks on nodes 3, 2, 0 -> switch 1 first (node 3 is its 2nd node)
    out = canonical(np.array([3, 2, 0]), np.array([0, 0, 1, 1]), 2, True, True)
    assert out.tolist() == [0, 1, 2]


def test_anneal_from_metis_keeps_the_optimum_and_is_seeded(grid):
    a = solve(grid, "anneal", seed=1, max_steps=300)
    b = solve(grid, "anneal", seed=1, max_steps=300)
    assert a.plan == b.plan
    assert a.metrics["inter_switch_bytes"] == pytest.approx(1.28e9)
    assert a.objective <= solve(grid, "metis").objective


def test_anneal_counted_runs_choose_their_starts_without_the_clock(grid, monkeypatch):
    # under load the starts that fit a time budget change (METIS's first split predicted too slow at a small
    # share of a CPU): a run counted by max_steps alone does not ask, so it keeps the same start and plan
    from topoplan.core import deadline

    ref = solve(grid, "anneal", seed=1, max_steps=300)
    monkeypatch.setattr(deadline, "scaled", lambda cpu_s: 1e6 * cpu_s)     # a machine a million times busier
    got = solve(grid, "anneal", seed=1, max_steps=300)
    assert got.plan == ref.plan and got.options["init"] == ref.options["init"]
    assert solve(grid, "anneal", seed=1, max_steps=300, time_limit=5).options["init"] == "greedy"   # timed: asks


def test_anneal_counted_runs_ignore_the_clock_unless_limited(grid, monkeypatch):
    """max_steps without a time limit: the same plan when every clock reading is a second later; with a
    time limit as well, the limit still stops the run."""
    import time

    ref = solve(grid, "anneal", init="random", seed=2, max_steps=200)
    assert ref.options["steps"] == 200 and ref.options["time_budget_s"] is None
    real, t = time.perf_counter, [0.0]

    def slow():
        t[0] += 1.0
        return real() + t[0]

    monkeypatch.setattr(time, "perf_counter", slow)
    assert solve(grid, "anneal", init="random", seed=2, max_steps=200).plan == ref.plan
    capped = solve(grid, "anneal", init="random", seed=2, max_steps=200, time_limit=5)
    assert capped.options["steps"] < 200 and capped.options["time_budget_s"] == 5


def test_place_cli_counts(run_cli, tmp_path):
    args = ["place", "-t", "paper003", "-T", "neighbor2d:rows=16,cols=16,bytes=4MB", "--json"]
    runs = []
    for _ in range(2):
        code, out, err = run_cli(*args, "-m", "anneal", "--max-steps", "120", "--seed", "3")
        assert code == 0, err
        runs.append(json.loads(out))
    assert runs[0]["rank_to_node"] == runs[1]["rank_to_node"] and runs[0]["options"]["steps"] == 120
    code, out, err = run_cli(*args, "-m", "joint", "--max-steps", "20", "--max-evals", "30")
    assert code == 0 and json.loads(out)["options"]["time_budget_s"] is None, err
    for extra, needle in ((["-m", "metis", "--max-steps", "5"], "--max-steps: applies to anneal and joint"),
                          (["-m", "anneal", "--max-evals", "5"], "--max-evals: applies to joint"),
                          (["-m", "anneal", "--max-steps", "0"], "--max-steps: must be a positive count")):
        code, _, err = run_cli(*args, *extra, "-o", tmp_path / "p.json")
        assert code == 2 and needle in err and not (tmp_path / "p.json").exists()


def test_anneal_improves_a_random_start(grid):
    prob = PlacementProblem.build(grid.topology, grid.traffic, objective="inter-switch")
    res = solve(prob, "anneal", init="random", max_steps=1500, seed=1)
    start = solve(prob, "random", seed=1).objective
    assert res.objective < 0.2 * start


def test_anneal_congestion_objective():
    topo = load_topology("paper003", ["kind=tree", "ocs=null"])
    prob = PlacementProblem.build(topo, load_traffic("neighbor2d:rows=16,cols=16,bytes=1MB"), objective="congestion")
    res = solve(prob, "anneal", init="random", max_steps=400, seed=0)
    assert res.objective == pytest.approx(res.metrics["congestion_bound_s"])
    assert res.objective < 0.8 * solve(prob, "random", seed=0).objective


def test_torus_and_fat_tree_placements():
    mesh = load_topology("mesh10x10x10")
    prob = PlacementProblem.build(mesh, load_traffic("neighbor2d:rows=8,cols=8,bytes=1MB"))
    m = solve(prob, "metis").objective
    assert m < solve(prob, "random", seed=0).objective
    assert solve(prob, "anneal", max_steps=100).objective <= m
    ft = load_topology("paper003", ["kind=fat-tree", "eps.up_bw=160Gbps", "ocs=null"])
    assert solve(PlacementProblem.build(ft, load_traffic(GRID)), "metis").metrics["inter_switch_bytes"] == 1.28e9


def test_repair_gives_exact_capacities():
    prob = PlacementProblem.build(load_topology("paper003"), load_traffic("neighbor2d:rows=6,cols=6,bytes=1MB"))
    part = partition(prob.graph(), np.array([10, 10, 16]), seed=0)
    assert np.bincount(part, minlength=3).tolist() == [10, 10, 16]
    # from a lopsided start the repair moves the ranks with the fewest bytes inside
    part = repair_balance(prob.graph(), np.zeros(36, dtype=np.int64), np.array([30, 6]))
    assert np.bincount(part).tolist() == [30, 6]


def test_fewer_ranks_than_cores():
    prob = PlacementProblem.build(load_topology("paper003"), load_traffic("neighbor2d:rows=5,cols=5,bytes=1MB"))
    for method in ("metis", "greedy", "anneal", "ilp"):
        res = solve(prob, method, time_limit=5, max_steps=50) if method == "anneal" else solve(prob, method, time_limit=5)
        node = np.array(res.plan["rank_to_node"])
        assert len(node) == 25 and np.bincount(node).max() <= 4


def test_simulated_time_of_a_plan(grid):
    fast = simulated_time(grid, solve(grid, "metis").plan)
    slow = simulated_time(grid, solve(grid, "round-robin").plan)
    assert 0 < fast < slow


def test_bad_inputs():
    with pytest.raises(TopoplanError, match="do not fit"):
        PlacementProblem.build(load_topology("paper003"), load_traffic("neighbor2d:rows=20,cols=20,bytes=1MB"))
    with pytest.raises(TopoplanError, match="unknown objective"):
        PlacementProblem.build(load_topology("paper003"), load_traffic(GRID), objective="speed")
    prob = PlacementProblem.build(load_topology("paper003"), load_traffic("neighbor2d:rows=4,cols=4,bytes=1MB"))
    with pytest.raises(TopoplanError, match="unknown placement method"):
        solve(prob, "magic")
    with pytest.raises(TopoplanError, match="init"):
        solve(prob, "anneal", init="bogus", max_steps=5)
    assert {"sequential", "round-robin", "random", "metis", "greedy", "anneal", "ilp"} <= set(METHODS)


@pytest.mark.parametrize("method", ["kahip", "scotch"])
def test_optional_partitioners(grid, method):
    try:
        res = solve(grid, method)
    except TopoplanError as e:
        assert "not installed" in str(e)
        pytest.skip(str(e))
    assert np.bincount(res.plan["rank_to_node"], minlength=64).tolist() == [4] * 64


@pytest.mark.parametrize("rows, cols, caps", [(2, 4, [4, 4, 4, 4]), (1, 8, [4, 4, 4, 4]), (2, 3, [4, 4]),
                                              (2, 4, [2, 2, 2, 2])])
def test_cut_bound_never_exceeds_the_brute_force_optimum(rows, cols, caps):
    """The grid cut bound must allow the placement to choose its group sizes (a machine larger than the job)."""
    import itertools

    import scipy.sparse as sp

    from topoplan.formulations.placement_cpsat import cut_bound

    n = rows * cols
    edges = [(r * cols + c, r * cols + c + 1) for r in range(rows) for c in range(cols - 1)]
    edges += [(r * cols + c, (r + 1) * cols + c) for r in range(rows - 1) for c in range(cols)]
    a = [u for u, v in edges] + [v for u, v in edges]
    b = [v for u, v in edges] + [u for u, v in edges]
    W = sp.csr_matrix((np.ones(len(a)), (a, b)), shape=(n, n))
    best = min(sum(g[u] != g[v] for u, v in edges)
               for g in itertools.product(range(len(caps)), repeat=n)
               if all(g.count(k) <= c for k, c in enumerate(caps)))
    assert cut_bound(W, np.array(caps), n) <= best
