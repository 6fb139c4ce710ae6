"""Issue 20: the circuit heuristics, forwarding tables and bound at scale give the plans of the plain rules.

The fast versions (heap over switch pairs, relay distances of all destinations at once, one pass over
the nodes that carry traffic, array checks of plan files) must give the same circuits, the same tables
entry for entry and the same bound as the rules stated one step at a time. The references below are
those statements (the heuristics as they read in the papers, loop by loop); ``_distance_vector_reference``
is kept in :mod:`topoplan.problems.circuits.forwarding`. No test here is timed; the sizes are
checked by the structure of the work (what is allocated), the speed by ``benchmarks/bench_circuits_scale.py``.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from test_circuits_cases import hybrid, problem
from topoplan.core.errors import TopoplanError
from topoplan.core.topology_io import load_topology
from topoplan.problems.circuits import CircuitProblem, solve
from topoplan.problems.circuits import forwarding
from topoplan.problems.circuits.bound import evaluate
from topoplan.problems.circuits.forwarding import (_dijkstra, _distance_vector_reference, _Relays, _relay_distances,
                                                  array_from_tables, distance_vector, partners_of, tables_from_array)
from topoplan.plans.circuits import (ForwardingTables, _array_valid, _check_tables, _entries_valid, _table_entries,
                                     validate_plan_dict)
from topoplan.traffic.matrix import from_arrays


# -- the rules one step at a time ------------------------------------------------------------

class _Ref:
    """Circuits being assigned, every question answered by looking at everything again."""

    def __init__(self, p):
        self.p = p
        self.free = np.where(p.is_ocs, p.ports, 0).astype(np.int64)
        self.pairs: list = []
        self.joined: set = set()
        self.limit = p.circuit_limit()
        self.per = np.zeros((p.n_switches, p.n_switches), dtype=np.int64)

    def full(self):
        return len(self.pairs) >= self.limit

    def can(self, u, v):
        sw = self.p.node_switch
        return (not self.full() and self.free[u] > 0 and self.free[v] > 0 and sw[u] != sw[v]
                and (min(u, v), max(u, v)) not in self.joined)

    def add(self, u, v):
        u, v = int(u), int(v)
        self.free[u] -= 1
        self.free[v] -= 1
        self.pairs.append((min(u, v), max(u, v)))
        self.joined.add((min(u, v), max(u, v)))
        a, b = self.p.node_switch[u], self.p.node_switch[v]
        self.per[a, b] += 1
        self.per[b, a] += 1

    def free_pair(self, a, b, rng=None):
        ocs_of = self.p.ocs_of_switch()
        fa = [int(u) for u in ocs_of[a] if self.free[u] > 0]
        fb = [int(v) for v in ocs_of[b] if self.free[v] > 0]
        if rng is not None:
            rng.shuffle(fa)
            rng.shuffle(fb)
        for u in fa:
            for v in fb:
                if (min(u, v), max(u, v)) not in self.joined:
                    return u, v
        return None

    def open(self, a, b):
        return not self.full() and self.free_pair(a, b) is not None


def _ocs_pairs(p):
    u, v, by, msgs = p.node_pairs()
    sw, ocs = p.node_switch, p.is_ocs
    keep = ocs[u] & ocs[v] & (sw[u] != sw[v])
    u, v, by, msgs = u[keep], v[keep], by[keep], msgs[keep]
    r = p.node_min_rank
    return u, v, by, msgs, np.minimum(r[u], r[v]), np.maximum(r[u], r[v])


def _round_robin(p, circ, primary, u, v, lo, hi):
    sw = p.node_switch
    a, b = np.minimum(sw[u], sw[v]), np.maximum(sw[u], sw[v])
    order = np.lexsort((hi, lo, -primary, b, a))
    queues: dict = {}
    for i in order.tolist():
        queues.setdefault((int(a[i]), int(b[i])), []).append(i)
    pos = {k: 0 for k in queues}
    while not circ.full():
        progress = False
        for key in sorted(queues):
            q = queues[key]
            while pos[key] < len(q):
                i = q[pos[key]]
                pos[key] += 1
                if circ.can(int(u[i]), int(v[i])):
                    circ.add(u[i], v[i])
                    progress = True
                    break
            if circ.full():
                break
        if not progress:
            break


def _switch_pairs(p):
    count = p.switch_pair_counts()
    s = p.n_switches
    return count, [(a, b) for a in range(s) for b in range(a + 1, s) if count[a, b] > 0]


def ref_sp(p, seed=0):
    circ = _Ref(p)
    u, v, _, msgs, lo, hi = _ocs_pairs(p)
    _round_robin(p, circ, msgs, u, v, lo, hi)
    return circ.pairs


def ref_three_step(p, seed=0):
    circ = _Ref(p)
    u, v, by, _, lo, hi = _ocs_pairs(p)
    _round_robin(p, circ, by, u, v, lo, hi)
    count, pairs = _switch_pairs(p)
    for a, b in sorted(pairs, key=lambda k: (-count[k], k)):
        if circ.full():
            break
        if circ.per[a, b] == 0:
            fp = circ.free_pair(a, b)
            if fp is not None:
                circ.add(*fp)
    while not circ.full():
        open_ = [k for k in pairs if circ.open(*k)]
        if not open_:
            break
        a, b = min(open_, key=lambda k: (-(count[k] - circ.per[k]), k))
        circ.add(*circ.free_pair(a, b))
    return circ.pairs


def ref_greedy(p, seed=0):
    """003 Fig. 3 read line by line: every communicating switch pair once by ascending count, then the
    largest count minus circuits; the free OCS pair exchanging the most, else a random free pair."""
    rng = np.random.default_rng(seed)
    circ = _Ref(p)
    u, v, by = _ocs_pairs(p)[:3]
    sw = p.node_switch
    a_of, b_of = np.minimum(sw[u], sw[v]), np.maximum(sw[u], sw[v])
    count, pairs = _switch_pairs(p)
    while not circ.full():
        open_ = [k for k in pairs if circ.open(*k)]
        if not open_:
            break
        unserved = [k for k in open_ if circ.per[k] == 0]
        if unserved:
            a, b = min(unserved, key=lambda k: (count[k], k))
        else:
            a, b = min(open_, key=lambda k: (-(count[k] - circ.per[k]), k))
        cand = np.flatnonzero((a_of == a) & (b_of == b))
        best = None
        for i in cand[np.lexsort((v[cand], u[cand], -by[cand]))].tolist():
            if circ.can(int(u[i]), int(v[i])):
                best = (int(u[i]), int(v[i]))
                break
        circ.add(*(best if best is not None else circ.free_pair(a, b, rng)))
    return circ.pairs


REFERENCES = {"sp": ref_sp, "three-step": ref_three_step, "greedy": ref_greedy}


# -- random small cases ------------------------------------------------------------------------

@pytest.fixture(autouse=True)
def _arrays_even_when_small(monkeypatch):
    """distance_vector takes the plain version on tiny problems; here the array version runs on all."""
    monkeypatch.setattr(forwarding, "_SMALL", 0)


def _random_case(rng, *, max_switches=7, max_per=6):
    s = int(rng.integers(2, max_switches + 1))
    per = int(rng.integers(2, max_per + 1))
    kw = {}
    if rng.random() < 0.3:
        kw["node_link"] = str(rng.choice(["20Gbps", "40Gbps"]))   # OCS nodes' EPS links differ from the others'
    if rng.random() < 0.2:
        kw["ocs_bw"] = str(rng.choice(["10Gbps", "40Gbps"]))
    t = hybrid(switches=s, per_switch=per, ocs_per_switch=int(rng.integers(1, per + 1)),
               ports=int(rng.integers(1, 4)), **kw)
    n = t.n_nodes
    pairs = [(int(a), int(b), float(rng.choice([1, 2, 4, 8])) * 1e6)
             for a, b in rng.integers(0, n, (int(rng.integers(1, 3 * n)), 2)) if a != b]
    return t, pairs or [(0, n - 1, 1e6)]


def _random_circuits(rng, p):
    sw, ocs = p.node_switch, p.ocs_nodes.tolist()
    free = {v: p.ports for v in ocs}
    out, seen = [], set()
    for _ in range(int(rng.integers(0, len(ocs) * p.ports + 1))):
        a, b = (int(x) for x in rng.choice(ocs, 2))
        key = (min(a, b), max(a, b))
        if sw[a] != sw[b] and free[a] and free[b] and key not in seen:
            free[a] -= 1
            free[b] -= 1
            seen.add(key)
            out.append((a, b))
    return out


@pytest.mark.parametrize("seed", range(8))
def test_heuristics_give_the_reference_circuits(seed):
    rng = np.random.default_rng(100 + seed)
    for k in range(12):
        t, pairs = _random_case(rng)
        p = problem(t, pairs, max_circuits=[None, None, 1, 3, 6][k % 5], hop_limit=[None, None, 2][k % 3])
        for m, ref in REFERENCES.items():
            for s in ((0, 5) if m == "greedy" else (0,)):
                got = [tuple(c) for c in solve(p, m, seed=s).plan["circuits"]]
                assert got == ref(p, s), (seed, k, m, s)


@pytest.mark.parametrize("seed", range(8))
def test_distance_vector_gives_the_reference_tables(seed):
    rng = np.random.default_rng(200 + seed)
    for k in range(25):
        t, pairs = _random_case(rng)
        p = problem(t, pairs)
        circ = _random_circuits(rng, p)
        hop_limit = [None, None, 1, 2][k % 4]
        full = k % 3 != 2
        fallback = rng.random((p.n_nodes, p.n_switches)) < 0.3 if k % 5 == 4 else None
        got = distance_vector(p, circ, hop_limit=hop_limit, full=full, fallback=fallback)
        want = _distance_vector_reference(p, circ, hop_limit=hop_limit, full=full, fallback=fallback)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert (got == want).all(), (seed, k, np.argwhere(got != want)[:3].tolist())


def test_ties_and_interleaved_loads_give_the_reference_tables():
    # uniform bandwidths: relays tie everywhere and nodes at equal distances share relays, so every
    # entry of a node without traffic depends on the loads at its place in the order
    rng = np.random.default_rng(7)
    for _ in range(30):
        t = hybrid(switches=int(rng.integers(3, 7)), per_switch=6, ocs_per_switch=3, ports=int(rng.integers(1, 3)),
                   ocs_bw="10Gbps")
        n = t.n_nodes
        pairs = [(int(a), int(b), 4e6) for a, b in rng.integers(0, n, (2 * n, 2)) if a != b]
        p = problem(t, pairs)
        circ = _random_circuits(rng, p)
        assert (distance_vector(p, circ) == _distance_vector_reference(p, circ)).all()


def test_a_circuit_with_a_non_ocs_end_takes_the_reference_path():
    t = hybrid(switches=2, per_switch=3, ocs_per_switch=1)    # OCS 0 | 3
    p = problem(t, [(1, 4, 4e6), (2, 5, 1e6)])
    circ = [(0, 3), (1, 4)]                                    # 1 and 4 are not OCS nodes
    assert (distance_vector(p, circ) == _distance_vector_reference(p, circ)).all()


def test_relay_distances_are_dijkstras():
    rng = np.random.default_rng(3)
    for _ in range(20):
        t, pairs = _random_case(rng)
        p = problem(t, pairs)
        circ = _random_circuits(rng, p)
        rel = _Relays(p, circ)
        D, ct, et = _relay_distances(rel, np.arange(p.n_switches), 1.0 / p.ocs_bw_Bps)
        partners = partners_of(p.n_nodes, circ)
        for dst in range(p.n_switches):
            dist, _, ties = _dijkstra(dst, p.node_switch, p.ocs_of_switch(), partners, 1.0 / p.node_bw_Bps,
                                      1.0 / p.ocs_bw_Bps, np.inf)
            got = {int(v): float(D[i, dst]) for i, v in enumerate(rel.ocs.tolist()) if np.isfinite(D[i, dst])}
            assert got == dist                                 # bit for bit
            for v, cands in ties.items():
                i = rel.oi[v]
                assert sorted(h for h, c in cands if c) == sorted(rel.PMn[i, ct[i, :, dst]].tolist())
                assert sorted(h for h, c in cands if not c) == sorted(rel.SLn[p.node_switch[v], et[i, :, dst]].tolist())


# -- the 4,096-node system of issue 20 -------------------------------------------------------------

def big_topology(switches=128):
    return load_topology({"kind": "hybrid", "name": f"big{32 * switches}", "switches": switches,
                          "nodes_per_switch": 32, "cores_per_node": 1,
                          "eps": {"down_bw": "10Gbps", "up_bw": "64Gbps", "down_latency": "500ns",
                                  "up_latency": "500ns"},
                          "ocs": {"nodes_per_switch": 8, "bw": "20Gbps", "latency": "1us"}})


def test_greedy_on_4096_nodes_is_the_reference_plan():
    topo = big_topology()
    rng = np.random.default_rng(1)
    src, dst = rng.integers(0, 4096, 600), rng.integers(0, 4096, 600)
    keep = src != dst
    p = CircuitProblem.build(topo, from_arrays(4096, src[keep], dst[keep], [4e6] * int(keep.sum())))
    res = solve(p, "greedy", seed=3)
    circ = [tuple(c) for c in res.plan["circuits"]]
    assert circ == ref_greedy(p, 3)
    assert len(circ) > 450                                      # nearly every OCS port used
    want = _distance_vector_reference(p, circ)
    assert res.plan["forwarding"] == tables_from_array(want)
    assert res.objective == evaluate(p, circ, want).congestion_s


def test_used_tables_are_the_full_tables_where_traffic_goes():
    topo = big_topology(switches=32)
    rng = np.random.default_rng(2)
    src, dst = rng.integers(0, 1024, 800), rng.integers(0, 1024, 800)
    keep = src != dst
    p = CircuitProblem.build(topo, from_arrays(1024, src[keep], dst[keep], [4e6] * int(keep.sum())))
    for m in ("sp", "three-step", "greedy"):
        full, used = solve(p, m), solve(p, m, tables="used")
        assert full.plan["circuits"] == used.plan["circuits"] and full.objective == used.objective
        assert full.metrics == used.metrics
        f, u = full.plan["forwarding"], used.plan["forwarding"]
        assert 0 < sum(map(len, u.values())) < sum(map(len, f.values()))
        assert all(f[node][sw] == h for node, row in u.items() for sw, h in row.items())
    with pytest.raises(TopoplanError, match="field 'tables': choose one of full, used"):
        solve(p, "greedy", tables="some")


def test_planning_16384_nodes_allocates_nothing_node_by_node():
    # structure, not speed: a dense node x node array of 16,384 nodes is 2 GB (float64), one of node pairs
    # by links more; the largest array planning needs is the next-hop table (node x switch, 64 MB)
    topo = big_topology(switches=512)
    rng = np.random.default_rng(4)
    src, dst = rng.integers(0, 16384, 4000), rng.integers(0, 16384, 4000)
    keep = src != dst
    tr = from_arrays(16384, src[keep], dst[keep], [4e6] * int(keep.sum()))
    tracemalloc.start()
    try:
        p = CircuitProblem.build(topo, tr)
        res = solve(p, "greedy", tables="used")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert res.metrics["circuits_used"] > 1900
    assert peak < 400e6, f"peak {peak / 1e6:.0f} MB"


# -- plan checks with arrays ------------------------------------------------------------------------

def test_array_checks_of_plans_never_pass_what_the_entry_checks_refuse():
    rng = np.random.default_rng(5)
    fast = agreed = held = 0
    for it in range(400):
        t = hybrid(switches=int(rng.integers(2, 5)), per_switch=int(rng.integers(2, 5)), ocs_per_switch=2,
                   ports=int(rng.integers(1, 3)))
        n, s, sw = t.n_nodes, t.n_switches, t.node_switch()
        pairs = [(int(a), int(b), 2e6) for a, b in rng.integers(0, n, (n, 2)) if a != b] or [(0, n - 1, 1e6)]
        res = solve(problem(t, pairs), ("greedy", "three-step", "sp")[it % 3], seed=it)
        fwd = {k: dict(v) for k, v in res.plan["forwarding"].items()}
        hop_limit = (None, 1, 2, "2", 0)[it % 5]
        for _ in range(int(rng.integers(0, 3))):   # spoil it: unknown ids, loops, wrong types, odd keys
            u, tt, h = str(int(rng.integers(0, n + 1))), str(int(rng.integers(0, s + 1))), int(rng.integers(-1, n + 1))
            kind = int(rng.integers(0, 6))
            if kind == 5:
                a = [x for x in range(n) if sw[x] == 0][:2]
                fwd.setdefault(str(a[0]), {})["1"] = a[1]
                fwd.setdefault(str(a[1]), {})["1"] = a[0]
            else:
                fwd.setdefault(u, {})[[tt, int(tt), tt, tt, " " + tt][kind]] = [h, h, True, float(h), h][kind]
        partners: dict = {}
        for a, b in res.plan["circuits"]:
            partners.setdefault(a, set()).add(b)
            partners.setdefault(b, set()).add(a)
        entries = _table_entries(fwd, n, s)
        ok_fast = entries is not None and _entries_valid(*entries, hop_limit, n, s, sw, partners)
        try:
            _check_tables(fwd, {"hop_limit": hop_limit}, "plan", n, s, sw, partners)
            ok = True
        except (TopoplanError, TypeError, ValueError):
            ok = False
        assert ok or not ok_fast, (it, fwd)
        fast += ok_fast
        agreed += ok_fast == ok
        if entries is not None and len(np.unique(entries[0] * s + entries[1])) == len(entries[0]) \
                and all(((x >= 0) & (x < m)).all() for x, m in zip(entries, (n, s, n))):
            # the same entries held as a next-hop array: the same verdict from the check on the array
            nh = ForwardingTables.from_entries(*entries, n, s).next_hop
            assert _array_valid(nh, hop_limit, n, s, sw, partners) == bool(ok_fast), (it, fwd)
            held += 1
    assert fast > 50 and agreed > 250, (fast, agreed)   # the array checks take the plain tables
    assert held > 150, held


def test_plan_files_with_loops_or_long_routes_are_refused_as_before():
    t = hybrid(switches=3, per_switch=2, ocs_per_switch=2)   # 0,1 | 2,3 | 4,5
    circ = [[0, 2], [3, 4]]
    doc = {"circuits": circ, "forwarding": {"1": {"2": 0}, "0": {"2": 2}, "2": {"2": 3}, "3": {"2": 4}}}
    validate_plan_dict(doc, t)
    with pytest.raises(TopoplanError, match=r"forwarding.0.2': the route crosses 2 circuits, more than hop_limit 1"):
        validate_plan_dict({**doc, "hop_limit": 1}, t)
    loop = {"circuits": circ, "forwarding": {"2": {"0": 3}, "3": {"0": 2}}}
    with pytest.raises(TopoplanError, match="routing loop towards switch 0: 2 -> 3 -> 2"):
        validate_plan_dict(loop, t)
    nh = array_from_tables(doc["forwarding"], t.n_nodes, t.n_switches)
    assert tables_from_array(nh) == doc["forwarding"]


@pytest.mark.parametrize("command", ["circuits --no-simulate", "circuits", "simulate --circuits"])
def test_the_benchmark_measures_each_cli_process(command):
    """benchmarks/bench_circuits_scale.py's process rows: the command runs as its own process and the row has
    its wall time, CPU time, peak memory and load (and the solver's time and the plan's size for circuits)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    bench = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_circuits_scale.py"
    spec = {"nodes": 64, "traffic": "random", "method": "process", "tables": "full", "command": command}
    out = subprocess.run([sys.executable, str(bench), "--row", json.dumps(spec)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    row = json.loads(out.stdout.strip().splitlines()[-1])
    assert row["command"] == command and row["process_s"] > 0 and row["cpu_s"] > 0 and row["process_peak_MB"] > 10
    assert ("solver_s" in row) == command.startswith("circuits") and row["plan_MB"] > 0
    assert ("simulated_s" in row) == (command == "circuits")
