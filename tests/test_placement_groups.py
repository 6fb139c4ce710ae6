"""The groups model of the placement ilp (topoplan.formulations.placement_groups) and its priced form for large
groups (topoplan.formulations.placement_pricing): optimal against brute force on small instances (full and spare
capacity), bounds never above the optimum (also when stopped early), the exact pricing against enumeration, and
the ilp method proving real 64-rank matrices on 16 and 4 switches."""

from pathlib import Path

import numpy as np
import pytest

from topoplan.core.topology import TreeTopology
from topoplan.formulations import placement_groups as G
from topoplan.formulations import placement_pricing as PP
from topoplan.problems.placement import PlacementProblem, solve
from topoplan.traffic.matrix import from_arrays
from topoplan.traffic.sources import load_traffic

MAPLIB = Path(__file__).resolve().parents[2] / "shared" / "matrices" / "maplib"


def partitions(n, size, groups):
    """Every partition of ranks 0..n-1 into at most ``groups`` groups of at most ``size`` (as group labels)."""
    label = [0] * n

    def rec(i, used, fill):
        if i == n:
            yield np.array(label)
            return
        for g in range(used + 1 if used < groups else used):
            if fill[g] < size:
                label[i] = g
                fill[g] += 1
                yield from rec(i + 1, max(used, g + 1), fill)
                fill[g] -= 1

    yield from rec(0, 0, [0] * groups)


def brute_inside(W, size, groups):
    return max(G.inside_weight(W, p) for p in partitions(W.shape[0], size, groups))


def random_weights(seed, n, density=0.6, top=9):
    rng = np.random.default_rng(seed)
    W = np.triu(rng.integers(1, top + 1, (n, n)) * (rng.random((n, n)) < density), 1).astype(np.int64)
    return W + W.T


@pytest.mark.parametrize("n,size,groups", [(8, 4, 2), (9, 3, 3), (8, 2, 4), (7, 3, 3), (6, 2, 4), (10, 4, 3)])
@pytest.mark.parametrize("seed", range(3))
def test_optimal_against_brute_force(n, size, groups, seed):
    W = random_weights(seed, n)
    start = np.arange(n) % groups                      # round robin: feasible, rarely optimal
    r = G.solve(G.GroupData(W=W, size=size, groups=groups, start=start), time_limit=600)
    best = brute_inside(W, size, groups)
    assert r.status == "optimal"
    assert r.inside == r.bound == best == G.inside_weight(W, r.group)
    assert np.bincount(r.group).max() <= size and len(np.unique(r.group)) <= groups


def test_uniform_weights_and_an_optimal_start():
    W = np.ones((8, 8), dtype=np.int64) - np.eye(8, dtype=np.int64)    # every partition into two 4s: 12 inside
    r = G.solve(G.GroupData(W=W, size=4, groups=2, start=np.arange(8) // 4), time_limit=600)
    assert r.status == "optimal" and r.inside == r.bound == 12


def test_the_bound_stays_above_the_optimum_when_stopped():
    W = random_weights(5, 12, density=0.8)
    best = brute_inside(W, 3, 4)
    r = G.solve(G.GroupData(W=W, size=3, groups=4, start=np.arange(12) % 4), time_limit=1e-9)
    assert r.status == "timeout" and r.bound >= best >= r.inside == G.inside_weight(W, r.group)


def test_applies_only_to_enumerable_groups():
    assert G.n_subsets(64, 4) == 64 + 2016 + 41664 + 635376
    assert G.applies(64, 4) and G.applies(128, 4) and not G.applies(64, 16) and not G.applies(64, 1)


def single_core_tree(switches, per_switch):
    return TreeTopology(kind="tree", nodes_per_switch=(per_switch,) * switches, cores_per_node=1, name="t")


@pytest.mark.parametrize("objective", ["inter-switch", "hops"])
def test_ilp_uses_the_groups_model_and_proves_the_brute_force_optimum(objective):
    rng = np.random.default_rng(11)
    src, dst = rng.integers(0, 10, 40), rng.integers(0, 10, 40)
    tr = from_arrays(10, src, dst, rng.integers(1, 9, 40) * 1e6)
    prob = PlacementProblem.build(single_core_tree(4, 3), tr, objective=objective)     # 10 ranks, 12 nodes
    res = solve(prob, "ilp", time_limit=600)
    assert res.options["model"] == "groups"
    W = prob.graph().toarray()
    total = W.sum() / 2
    cut = total - max(G.inside_weight(W, p) for p in partitions(10, 3, 4))
    want = cut if objective == "inter-switch" else total + 2 * cut        # hops: 1 per edge + 2 per crossing
    assert res.status == "optimal" and res.objective == pytest.approx(want) and res.bound == pytest.approx(want)


@pytest.mark.skipif(not MAPLIB.is_dir(), reason="MapLib matrices not present")
@pytest.mark.parametrize("app", ["cg64", "btmz64"])
def test_ilp_proves_maplib_on_16_switches(app):
    prob = PlacementProblem.build(single_core_tree(16, 4), load_traffic(str(MAPLIB / f"{app}.csv")),
                                  objective="inter-switch")
    res = solve(prob, "ilp", seed=0, time_limit=600)
    assert res.options["model"] == "groups"
    assert res.status == "optimal" and res.objective == res.bound
    assert res.objective <= solve(prob, "metis", seed=0).objective


@pytest.mark.parametrize("n,size,full", [(8, 4, True), (9, 3, True), (7, 3, False), (10, 4, False)])
@pytest.mark.parametrize("seed", range(3))
def test_pair_bound_is_never_below_the_optimum(n, size, full, seed):
    W = random_weights(10 + seed, n)
    groups = -(-n // size)
    best = brute_inside(W, size, groups)
    assert G.pair_bound(W, size, full, time_limit=600) >= best * (1 - 1e-12)


def test_pair_bound_is_tight_on_disjoint_cliques():
    W = np.zeros((12, 12), dtype=np.int64)
    for c in range(3):                                         # three cliques of 4, weight 5 per edge
        idx = np.arange(4 * c, 4 * c + 4)
        W[np.ix_(idx, idx)] = 5
    np.fill_diagonal(W, 0)
    assert G.pair_bound(W, 4, True, time_limit=600) == pytest.approx(3 * 6 * 5)


def planted(n_clusters, size, seed, light=(0, 5, 25)):
    """Traffic of ``n_clusters`` dense clusters of ``size`` ranks (5-9 MB per edge, half the pairs) joined by a
    few 1 MB edges (``light``: rank pairs ``(a, b)`` with ``b = a + offset`` across clusters): the clusters are
    the optimal partition, cutting the light edges alone."""
    rng = np.random.default_rng(seed)
    n = n_clusters * size
    src, dst, by = [], [], []
    for a in range(n):
        for b in range(a + 1, n):
            if a // size == b // size and rng.random() < 0.5:
                src.append(a), dst.append(b), by.append(float(rng.integers(5, 10)) * 1e6)
    cross = [(a, (a + size + off) % n) for a, off in zip(range(0, n, size), light)]
    for a, b in cross:
        src.append(a), dst.append(b), by.append(1e6)
    return from_arrays(n, src, dst, by), 1e6 * len(cross)


@pytest.mark.parametrize("switches,size", [(2, 20), (4, 10)])
def test_ilp_proves_planted_clusters_with_the_priced_groups_model(switches, size):
    # too many groups to enumerate (C(40, 20), C(40, 10)): the priced groups model proves the clusters
    traffic, cut = planted(switches, size, seed=4)
    prob = PlacementProblem.build(single_core_tree(switches, size), traffic, objective="inter-switch")
    res = solve(prob, "ilp", time_limit=600)
    assert res.options["model"] == "priced groups" and "priced groups model optimal" in res.message
    assert res.status == "optimal" and res.objective == res.bound == cut


# -- the priced groups model (placement_pricing)

def random_duals(seed, n, W, scale=0.4):
    """Rank prices about ``scale`` of each rank's weight: positive and negative reduced costs both occur."""
    rng = np.random.default_rng(seed)
    return W.sum(axis=1) * scale * rng.random(n)


@pytest.mark.parametrize("n,size", [(8, 3), (10, 4), (12, 5), (14, 7), (9, 9)])
@pytest.mark.parametrize("seed", range(4))
def test_exact_pricing_matches_enumeration(n, size, seed):
    W = random_weights(20 + seed, n).astype(float)
    pi = random_duals(seed, n, W)
    _, _, _, top = G._subsets(W, size, pi, 0.0, -np.inf, 1, False)      # the largest w(S) - pi(S), enumerated
    floor = -1e-9 if top > 0 else top - 1.0
    value, members, ub, _, done = PP.best_group(W, PP.neighbours(W), pi, size, floor, 600.0)
    assert done and value == pytest.approx(top) and ub >= top - 1e-9 and ub == pytest.approx(top)
    assert 1 <= len(members) <= size and len(set(members.tolist())) == len(members)
    assert G.inside_weight(W, np.isin(np.arange(n), members)) - pi[members].sum() == pytest.approx(top) or \
        np.triu(W[np.ix_(members, members)], 1).sum() - pi[members].sum() == pytest.approx(top)


@pytest.mark.parametrize("seed", range(3))
def test_exact_pricing_above_its_floor_finds_nothing_below(seed):
    W = random_weights(30 + seed, 10).astype(float)
    pi = random_duals(seed, 10, W)
    _, _, _, top = G._subsets(W, 4, pi, 0.0, -np.inf, 1, False)
    value, members, ub, _, done = PP.best_group(W, PP.neighbours(W), pi, 4, top + 1.0, 600.0)
    assert done and value == top + 1.0 and len(members) == 0 and ub >= top


@pytest.mark.parametrize("seed", range(3))
def test_exact_pricing_stopped_early_still_bounds(seed):
    # 40 ranks in groups of 12: the search takes 5,000-30,000 nodes, so stopped at its first look at the clock
    # (4,096 nodes) it has not finished, and its bound stays above the maximum of the finished search
    W = random_weights(40 + seed, 40, density=0.3).astype(float)
    pi = random_duals(seed, 40, W, scale=0.3)
    nb = PP.neighbours(W)
    top, _, _, nodes_all, done_all = PP.best_group(W, nb, pi, 12, 0.0, 600.0)
    value, members, ub, nodes, done = PP.best_group(W, nb, pi, 12, 0.0, 0.0)
    assert done_all and nodes_all > 4096 and not done and nodes == 4096
    assert ub >= top >= value


@pytest.mark.parametrize("seed", range(3))
def test_heuristic_pricing_reports_true_values(seed):
    W = random_weights(50 + seed, 12).astype(float)
    pi = random_duals(seed, 12, W)
    seeds = np.array([[0, 1, 2, -1, -1], [3, 4, 5, 6, 7]])
    cols, vals = PP.greedy_columns(W, pi, 5, -np.inf, seeds)
    assert len(cols) == 12 + 2
    for c, v in zip(cols, vals):
        m = c[c >= 0]
        assert 1 <= len(m) <= 5 and (np.diff(m) > 0).all()
        assert np.triu(W[np.ix_(m, m)], 1).sum() - pi[m].sum() == pytest.approx(v)
    _, _, _, top = G._subsets(W, 5, pi, 0.0, -np.inf, 1, False)
    assert vals.max() <= top + 1e-9


@pytest.mark.parametrize("n,size,groups", [(8, 4, 2), (9, 3, 3), (8, 2, 4), (7, 3, 3), (10, 4, 3), (10, 5, 2)])
@pytest.mark.parametrize("seed", range(3))
def test_priced_model_against_brute_force(n, size, groups, seed):
    W = random_weights(seed, n)
    r = PP.solve(G.GroupData(W=W, size=size, groups=groups, start=np.arange(n) % groups), time_limit=600)
    best = brute_inside(W, size, groups)
    assert r.bound >= best >= r.inside == G.inside_weight(W, r.group)
    assert r.relaxation                      # converged: the bound is the relaxation's (at most the pair one)
    assert r.bound <= G.pair_bound(W, size, n == size * groups, time_limit=600) + 1e-6
    assert np.bincount(r.group).max() <= size and len(np.unique(r.group)) <= groups
    if r.status == "optimal":
        assert r.inside == r.bound == best


def test_priced_model_stopped_early_still_bounds():
    W = random_weights(5, 12, density=0.8)
    best = brute_inside(W, 3, 4)
    r = PP.solve(G.GroupData(W=W, size=3, groups=4, start=np.arange(12) % 4), time_limit=1e-9)
    assert r.status == "timeout" and r.bound >= best >= r.inside == G.inside_weight(W, r.group)


@pytest.mark.skipif(not MAPLIB.is_dir(), reason="MapLib matrices not present")
def test_ilp_proves_maplib_cg_on_4_switches():
    prob = PlacementProblem.build(single_core_tree(4, 16), load_traffic(str(MAPLIB / "cg64.csv")),
                                  objective="inter-switch")
    res = solve(prob, "ilp", seed=0, time_limit=600)
    assert res.options["model"] == "priced groups"
    assert res.status == "optimal" and res.objective == res.bound == pytest.approx(14227.2e6)
