"""The groups model of the placement ilp (topoplan.formulations.placement_groups): optimal against brute force
on small instances (full and spare capacity), bounds never above the optimum, and the ilp method proving
real 64-rank matrices on 16 switches."""

from pathlib import Path

import numpy as np
import pytest

from topoplan.core.topology import TreeTopology
from topoplan.formulations import placement_groups as G
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


def test_ilp_proves_a_planted_bisection_with_the_pair_relaxation():
    # 40 ranks on 2 switches of 20: too many groups to enumerate, so CP-SAT's side with the pair relaxation,
    # whose bound meets the start on two dense clusters joined by a few light edges
    rng = np.random.default_rng(4)
    src, dst, by = [], [], []
    for a in range(40):
        for b in range(a + 1, 40):
            if a // 20 == b // 20 and rng.random() < 0.5:
                src.append(a), dst.append(b), by.append(float(rng.integers(5, 10)) * 1e6)
    src += [0, 5, 25]
    dst += [30, 22, 7]
    by += [1e6, 1e6, 1e6]
    prob = PlacementProblem.build(single_core_tree(2, 20), from_arrays(40, src, dst, by), objective="inter-switch")
    res = solve(prob, "ilp", time_limit=600)
    assert res.options["model"] == "switch" and "pair relaxation" in res.message
    assert res.status == "optimal" and res.objective == res.bound == 3e6
