"""The compiled maximum-weight matching (topoplan.problems.circuits.blossom) and the ``matching`` method on it:
the weight of NetworkX's exact matching on every graph, a dual certificate, the priced solve of dense graphs
equal to the plain one, bad input refused."""

import subprocess
import sys

import networkx as nx
import numpy as np
import pytest

from test_circuits_cases import hybrid, problem, random_problem
from topoplan.core.errors import TopoplanError
from topoplan.problems.circuits import CircuitProblem, blossom, heuristics, solve
from topoplan.problems.circuits.blossom import (DENSE_DEGREE, _solve_priced, check_optimum, integer_weights,
                                                matching_weight, max_weight_matching)
from topoplan.traffic.matrix import from_arrays


def nx_weight(u, v, w) -> float:
    """The weight of NetworkX's maximum-weight matching (the reference)."""
    g = nx.Graph()
    g.add_weighted_edges_from(zip(np.asarray(u).tolist(), np.asarray(v).tolist(), np.asarray(w).tolist()))
    return float(sum(g[a][b]["weight"] for a, b in nx.max_weight_matching(g)))


def random_graph(seed, n, density, kind):
    rng = np.random.default_rng(seed)
    iu, ju = np.triu_indices(n, 1)
    keep = rng.random(len(iu)) < density
    u, v = iu[keep], ju[keep]
    w = {"ties": rng.integers(1, 3, len(u)), "ints": rng.integers(1, 50, len(u)),
         "floats": rng.random(len(u)) * 10, "uniform": np.ones(len(u))}[kind].astype(float)
    return u, v, w


def assert_matching(mate, u, v):
    n = len(mate)
    edges = {(min(a, b), max(a, b)) for a, b in zip(u.tolist(), v.tolist())}
    for x in range(n):
        if mate[x] >= 0:
            assert mate[mate[x]] == x and (min(x, mate[x]), max(x, mate[x])) in edges


@pytest.mark.parametrize("kind", ["ties", "ints", "floats", "uniform"])
@pytest.mark.parametrize("seed", range(12))
def test_weight_equals_networkx_and_the_duals_prove_it(seed, kind):
    n = 4 + 7 * seed                         # 4 to 81 vertices, sparse to half dense
    u, v, w = random_graph(seed, n, 0.1 + 0.4 * (seed % 3) / 2, kind)
    mate = max_weight_matching(n, u, v, w)
    assert_matching(mate, u, v)
    assert matching_weight(mate, u, v, w) == pytest.approx(nx_weight(u, v, w), rel=1e-12)
    assert check_optimum(n, u, v, w)


@pytest.mark.parametrize("seed", range(4))
def test_dense_graphs_are_priced_to_the_same_optimum(seed):
    n = 70
    u, v, w = random_graph(100 + seed, n, 0.9, ["ties", "ints", "floats", "uniform"][seed])
    assert len(u) > DENSE_DEGREE * n                     # the priced solve runs
    wi = integer_weights(w)[0]
    priced = _solve_priced(n, u, v, wi)
    plain = blossom._compiled()["_solve"](n, u, v, wi)[0]
    assert priced[4] >= 1
    assert matching_weight(priced[0], u, v, w) == matching_weight(plain, u, v, w)
    assert matching_weight(priced[0], u, v, w) == pytest.approx(nx_weight(u, v, w), rel=1e-12)
    assert check_optimum(n, u, v, w)


@pytest.mark.parametrize("kind", ["ties", "ints", "floats", "uniform"])
@pytest.mark.parametrize("n, density", [(9, 0.5), (30, 0.3), (60, 0.9)])     # the last one priced
def test_interpreted_and_compiled_solves_are_the_same_computation(n, density, kind):
    u, v, w = random_graph(n + len(kind), n, density, kind)
    wi = integer_weights(w)[0]
    compiled = blossom._compiled()["_priced"](n, u, v, wi)
    interpreted = blossom._priced(n, u, v, wi)
    for got, want in zip(interpreted, compiled):       # mate, duals, blossom duals, blossom forest, rounds
        np.testing.assert_array_equal(got, want)


def test_small_graphs_run_interpreted_until_the_compiled_functions_are_at_hand(monkeypatch):
    monkeypatch.setattr(blossom, "_compiled_s", lambda n: blossom.COMPILE_S)   # a machine that must compile
    assert blossom.interpreted(blossom.INTERPRETED_MAX_N)
    assert not blossom.interpreted(blossom.INTERPRETED_MAX_N + 1)
    monkeypatch.setattr(blossom, "_compiled_s", lambda n: 0.0)                 # loaded in this process
    blossom._compiled()
    assert not blossom.interpreted(8)


def test_a_small_matching_does_not_import_numba():
    # Numba takes 0.4-0.5 s to import: the matchings of a paper-sized problem (ilp's and anneal's starts, the
    # demo) run interpreted and never need it
    code = ("import sys; from topoplan.problems.circuits import blossom; "
            "mate = blossom.max_weight_matching(4, [0, 1, 2, 0], [1, 2, 3, 3], [5, 8, 5, 1]); "
            "print(mate.tolist(), 'numba' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[1, 0, 3, 2] False"


def test_odd_cycles():
    # two triangles joined by the path 2-3-4-5: the heaviest edge 3-4 (7) loses to 2-3 + 4-5 (10), which
    # leaves one edge inside each triangle: 6 + 5 + 5 + 6
    u = [0, 1, 2, 2, 3, 4, 5, 6, 5]
    v = [1, 2, 0, 3, 4, 5, 6, 7, 7]
    w = [6, 6, 6, 5, 7, 5, 6, 6, 6]
    mate = max_weight_matching(8, u, v, w)
    assert matching_weight(mate, u, v, w) == nx_weight(u, v, w) == 22.0
    assert mate[2] == 3 and mate[4] == 5
    # a 5-cycle of equal weights: two edges, one vertex free with dual 0
    mate = max_weight_matching(5, [0, 1, 2, 3, 4], [1, 2, 3, 4, 0], [3.0] * 5)
    assert int((mate >= 0).sum()) == 4


def test_weights_not_positive_and_empty_graphs():
    assert max_weight_matching(3, [0, 1], [1, 2], [0.0, -1.0]).tolist() == [-1, -1, -1]
    assert max_weight_matching(2, [], [], []).tolist() == [-1, -1]


def test_integer_weights_are_exact_or_rounded_down():
    wi, scale = integer_weights([0.5, 1.25, 3.0])
    assert wi.tolist() == [2, 5, 12] and scale == 4.0
    wi, scale = integer_weights([1e-30, 1e10])             # 133 binary orders apart: rounded
    assert wi[0] == 0 and wi[1] == int(1e10 * scale) and wi[1] < 2 ** 60


@pytest.mark.parametrize("u,v,w,match", [
    ([0, 1], [1, 5], [1.0, 1.0], "outside the vertices 0..3"),
    ([0, 2], [1, 2], [1.0, 1.0], "loop at vertex 2"),
    ([0], [1, 2], [1.0], "differ in length"),
    ([0, 1], [1, 2], [1.0, float("nan")], "must be finite"),
])
def test_bad_input_is_refused(u, v, w, match):
    with pytest.raises(TopoplanError, match=match):
        max_weight_matching(4, u, v, w)


# -- the circuits' matching method ----------------------------------------------------------------------------

def _method_weight(prob, res):
    """The weight of the plan's circuits in the graph the method matches, and NetworkX's optimum on it."""
    f, a, b, w = heuristics._matching_graph(prob, heuristics._Circuits(prob))
    weight = dict(zip(zip(a.tolist(), b.tolist()), w.tolist()))
    got = sum(weight[(min(p, q), max(p, q))] for p, q in res.plan["circuits"])
    return got, nx_weight(a, b, w)


@pytest.mark.parametrize("seed", range(6))
def test_method_matches_networkx_weight_on_random_traffic(seed):
    prob = random_problem(seed, switches=4, per_switch=4, ocs_per_switch=3, n_msgs=30)
    res = solve(prob, "matching")
    got, best = _method_weight(prob, res)
    assert got == pytest.approx(best, rel=1e-12)


def test_method_matches_networkx_weight_on_a_dense_graph():
    # 16 switches x 4 OCS nodes, every switch pair talking: 1,920 possible circuits, priced
    topo = hybrid(switches=16, per_switch=6, ocs_per_switch=4)
    rng = np.random.default_rng(3)
    src = rng.integers(0, topo.n_nodes, 600)
    dst = (src + rng.integers(1, topo.n_nodes, 600)) % topo.n_nodes
    prob = CircuitProblem.build(topo, from_arrays(topo.n_nodes, src, dst, rng.integers(1, 9, 600) * 1e6),
                                threshold_B=1000)
    f, a, b, w = heuristics._matching_graph(prob, heuristics._Circuits(prob))
    assert len(a) > DENSE_DEGREE * len(f)
    got, best = _method_weight(prob, solve(prob, "matching"))
    assert got == pytest.approx(best, rel=1e-12)


def test_method_graph_is_every_free_pair_with_weight():
    prob = random_problem(1, switches=3, per_switch=4, ocs_per_switch=3, n_msgs=20)
    f, a, b, w = heuristics._matching_graph(prob, heuristics._Circuits(prob))
    # the definition, pair by pair: direct bytes plus the switch pair's share, > 0, under different switches
    sw, n = prob.node_switch, prob.n_nodes
    W = prob.switch_bytes()
    k = np.array([len(o) for o in prob.ocs_of_switch()])
    du, dv, dby = heuristics._ocs_pairs(prob)[:3]
    direct = dict(zip((du * n + dv).tolist(), dby.tolist()))
    want = {}
    for i, x in enumerate(f.tolist()):
        for y in f.tolist()[i + 1:]:
            if sw[x] != sw[y]:
                s = (W[sw[x], sw[y]] + W[sw[y], sw[x]]) / max(1, min(k[sw[x]], k[sw[y]]))
                if direct.get(x * n + y, 0.0) + s > 0:
                    want[(x, y)] = direct.get(x * n + y, 0.0) + s
    assert dict(zip(zip(a.tolist(), b.tolist()), w.tolist())) == pytest.approx(want)


def test_method_keeps_the_heaviest_under_max_circuits():
    t = hybrid(switches=2, per_switch=3, ocs_per_switch=2)     # OCS 0, 1 | 3, 4
    p = problem(t, [(0, 3, 5e6), (1, 4, 2e6)], max_circuits=1)
    assert solve(p, "matching").plan["circuits"] == [[0, 3]]
