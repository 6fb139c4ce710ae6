"""Placement benchmark: quality against KaHIP, and scale (issues 5 and 20), in one run.

Sections (``--sections``, default all):

- ``maplib``: the four real 64-rank matrices of ``../shared/matrices/maplib`` (AMG, BT-MZ, CG, LULESH)
  on 4 switches x 16 and 16 switches x 4 single-core nodes, objective ``inter-switch``: the cut (bytes
  between switches, both directions) of every method next to KaHIP's strong configuration with perfect
  balance, best of 5 seeds (``kahip.kaffpa`` called directly: the reference of issue 20); ``ilp`` runs
  ``--ilp-budget`` seconds (default 60) and its row gives status, proven bound and gap (the target: a gap
  of at most 1% within 60 s).
- ``process``: the whole ``topoplan place -m metis`` and ``-m kahip`` process on the same MapLib matrices
  (objective ``inter-switch``) beside KaHIP's own process (``kahip_peer.py``: the interpreter, the ``kahip``
  module and one strong kaffpa call with imbalance 0 on the same graph): wall time, CPU time and peak memory
  of each (:mod:`processes`, GNU ``time``; least of 3 runs, largest peak) and both cuts.
- ``rgg``: a random geometric graph of 4,096 vertices (:func:`rgg`: ``networkx.random_geometric_graph``,
  seed 0, mean degree 8, 1-10 MB per edge, seeded) cut into k = 4, 16 and 128 parts (k switches of
  4,096 / k single-core nodes): the methods next to KaHIP-strong best of 5, plus the steps from the
  former partition pipeline to the current one (``ablation``, partitions of the whole graph).
- ``scale``: 16,384 and 65,536 ranks, one per node, on the hybrid system of issue 20 (32 nodes per
  switch, 8 OCS nodes per switch; :func:`bench_circuits_scale.topology`) and on a 3-D torus (32x32x16,
  64x32x32; one router per node, 4.76 GB/s links), with CG-like traffic
  (:func:`bench_circuits_scale.cg_like`) and random traffic (8 messages of 4 MB per rank). Every row runs
  in a fresh interpreter: ``plan_s`` is one :func:`topoplan.problems.placement.solve` (the method and
  every metric, the congestion bound included), ``peak_MB`` the process's maximum resident set
  (:func:`peak_mb`; the traffic and the imports included).
- ``mesh``: 4,096 ranks on 128 switches x 32 nodes (one core each), objective ``hops``: a 16^3 7-point
  stencil and an unstructured 3-D mesh (4,096 seeded points, 6 nearest neighbours each, both ways).

``anneal`` (and ``ilp`` outside ``maplib``) run ``--budget`` seconds (default 5) from their default start: the
best of every partitioner installed and ``greedy`` (KaHIP up to 20,000 rank pairs).

    python benchmarks/bench_placement.py                  # all sections (about 9 minutes, 2 shared cores)
    python benchmarks/bench_placement.py --sections maplib,rgg --budget 10
    python benchmarks/bench_placement.py --json
    python benchmarks/bench_placement.py --quick          # maplib (anneal 2 s, ilp 5 s), process at k = 4 (about 2 min)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "benchmarks"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

SECTIONS = ("maplib", "process", "rgg", "scale", "mesh")
MAPLIB = ("amg64", "btmz64", "cg64", "lulesh64")
MAPLIB_SWITCHES = (4, 16)
ILP_TARGET_GAP = 0.01
RGG_PARTS = (4, 16, 128)
KAHIP_SEEDS = 5
SCALE_ROWS = ((16384, "cg", "metis", "hybrid"), (16384, "random", "metis", "hybrid"),
              (16384, "random", "greedy", "hybrid"), (16384, "random", "anneal", "hybrid"),
              (16384, "cg", "metis", "torus"), (65536, "cg", "metis", "hybrid"), (65536, "random", "metis", "hybrid"),
              (65536, "random", "greedy", "hybrid"), (65536, "cg", "metis", "torus"))
TORUS_DIMS = {16384: [32, 32, 16], 65536: [64, 32, 32]}


# -- instances --------------------------------------------------------------------------------------

def stencil3d(n: int, nbytes: float):
    """Traffic of a non-periodic n x n x n 7-point stencil, ranks in x-fastest order."""
    from topoplan.traffic.matrix import from_arrays

    r = np.arange(n ** 3)
    x, y, z = r % n, (r // n) % n, r // (n * n)
    src, dst = [], []
    for ok, step in ((x < n - 1, 1), (y < n - 1, n), (z < n - 1, n * n)):
        a = r[ok]
        src += [a, a + step]
        dst += [a + step, a]
    src, dst = np.concatenate(src), np.concatenate(dst)
    return from_arrays(n ** 3, src, dst, np.full(len(src), nbytes), name=f"stencil3d-{n}")


def mesh_knn(n: int, k: int, nbytes: float, seed: int = 0):
    """Unstructured 3-D mesh: ``n`` seeded random points, each exchanging with its ``k`` nearest (symmetrized)."""
    from scipy.spatial import cKDTree

    from topoplan.traffic.matrix import from_arrays

    pts = np.random.default_rng(seed).random((n, 3))
    _, idx = cKDTree(pts).query(pts, k=k + 1)
    src, dst = np.repeat(np.arange(n), k), idx[:, 1:].ravel()
    key = np.unique(np.concatenate([src * n + dst, dst * n + src]))
    return from_arrays(n, key // n, key % n, np.full(len(key), nbytes), name=f"mesh-knn-{n}")


def rgg(n: int = 4096, degree: float = 8.0, seed: int = 0):
    """Random geometric graph as traffic: ``networkx.random_geometric_graph`` in the unit square with the
    radius of mean degree ``degree``; every edge carries 1-10 MB (seeded), half each way.

    Examples
    --------
    >>> t = rgg(256, seed=1)
    >>> t.n_ranks, t.name
    (256, 'rgg-256')
    """
    import networkx as nx

    from topoplan.traffic.matrix import from_arrays

    g = nx.random_geometric_graph(n, float(np.sqrt(degree / (np.pi * n))), seed=seed)
    e = np.array(sorted(g.edges()), dtype=np.int64).reshape(-1, 2)
    w = np.random.default_rng(seed).integers(1, 11, len(e)) * 1e6
    return from_arrays(n, np.concatenate([e[:, 0], e[:, 1]]), np.concatenate([e[:, 1], e[:, 0]]),
                       np.concatenate([w, w]) / 2, name=f"rgg-{n}")


def single_core_tree(switches: int, nodes_per_switch: int, name: str = ""):
    from topoplan.core.topology import TreeTopology

    return TreeTopology(kind="tree", nodes_per_switch=(nodes_per_switch,) * switches, cores_per_node=1, name=name)


def kahip_strong(W, parts: int, seeds: int = KAHIP_SEEDS) -> tuple[float, float]:
    """KaHIP's kaffpa, strong configuration, imbalance 0, best of ``seeds`` seeds: ``(cut bytes, seconds)``."""
    from topoplan.problems.placement.metis import kahip_parts
    from topoplan.problems.placement.refine import cut_weight

    t0 = time.perf_counter()
    cut = min(cut_weight(W, kahip_parts(W, [W.shape[0] // parts] * parts, seed=s)) for s in range(seeds))
    return cut, time.perf_counter() - t0


def _kahip_ok() -> bool:
    from topoplan.problems.placement import METHODS

    return METHODS.unavailable("kahip") is None


def _methods_rows(prob, methods, budget, seed, ilp_budget=None, **keys) -> list[dict]:
    from topoplan.problems.placement import solve

    rows = []
    for method in methods:
        opts = {"time_limit": ilp_budget if method == "ilp" and ilp_budget else budget} \
            if method in ("anneal", "ilp") else {}
        t0 = time.perf_counter()
        res = solve(prob, method, seed=seed, **opts)
        rows.append({**keys, "method": method, "objective": res.objective, "status": res.status,
                     "bound": res.bound, "gap": res.gap, "model": res.options.get("model"),
                     "init": res.options.get("init"), "inter_switch_bytes": res.metrics["inter_switch_bytes"],
                     "hop_weighted_bytes": res.metrics["hop_weighted_bytes"],
                     "congestion_bound_s": res.metrics["congestion_bound_s"], "wall_s": time.perf_counter() - t0})
    return rows


# -- sections -----------------------------------------------------------------------------------------

def run_maplib(budget: float, seed: int, log, ilp_budget: float = 60.0, switches=MAPLIB_SWITCHES) -> list[dict]:
    from topoplan.problems.placement import PlacementProblem
    from topoplan.traffic.sources import load_traffic

    d = ROOT.parent / "shared" / "matrices" / "maplib"
    if not d.is_dir():
        log(f"maplib: {d} is absent, skipped")
        return []
    kahip = _kahip_ok()
    methods = ["metis", "greedy"] + (["kahip"] if kahip else []) + ["anneal", "ilp"]
    rows = []
    for k in switches:
        for app in MAPLIB:
            prob = PlacementProblem.build(single_core_tree(k, 64 // k, f"{k}x{64 // k}"),
                                          load_traffic(str(d / f"{app}.csv")), objective="inter-switch")
            ref, ref_s = kahip_strong(prob.graph(), k) if kahip else (float("nan"), 0.0)
            rows.append({"section": "maplib", "instance": f"{app} k={k}", "method": "KaHIP-strong best of 5",
                         "objective": ref, "wall_s": ref_s})
            rows += _methods_rows(prob, methods, budget, seed, ilp_budget=ilp_budget, section="maplib",
                                  instance=f"{app} k={k}")
            for r in rows[-len(methods) - 1:]:
                r["vs_kahip"] = r["objective"] / ref - 1.0
                proof = (f"  {r['status']}, bound {r['bound'] / 1e6:.3f} MB, gap {r['gap']:.2%} ({r['model']} model)"
                         if r["method"] == "ilp" and r.get("gap") is not None else "")
                log(f"maplib {app:9s} k={k:<3d} {r['method']:24s} cut {r['objective'] / 1e6:10.3f} MB  vs KaHIP-strong "
                    f"{r['vs_kahip']:+7.2%}  wall {r['wall_s']:5.1f} s" + proof
                    + (f"  (start {r['init']})" if r.get("init") else ""))
    ilp = [r for r in rows if r["method"] == "ilp"]
    if ilp:
        met = [r for r in ilp if r.get("gap") is not None and r["gap"] <= ILP_TARGET_GAP]
        log(f"maplib ilp: {len(met)} of {len(ilp)} within a gap of {ILP_TARGET_GAP:.0%} in {ilp_budget:g} s "
            f"({sum(r['status'] == 'optimal' for r in ilp)} proven optimal)")
    return rows


def _ablation(W, k: int, seed: int) -> list[tuple[str, float, float]]:
    """Cut of the former partition pipeline and of each step towards the current one."""
    import pymetis

    from topoplan.problems.placement.metis import default_tries, metis_parts, partition, repair_balance
    from topoplan.problems.placement.refine import cut_weight, refine

    targets = [W.shape[0] // k] * k
    scale = min(1e6 / W.data.max(), 1e9 / W.data.sum())                     # the former integer weights
    weights = np.maximum(1, np.round(W.data * scale)).astype(np.int64).tolist()

    def before():
        adj = pymetis.CSRAdjacency(W.indptr.tolist(), W.indices.tolist())
        _, part = pymetis.part_graph(k, adjacency=adj, eweights=weights,
                                     options=pymetis.Options(seed=seed))    # METIS's default: k-way above 8 parts
        return repair_balance(W, np.asarray(part), targets)

    runs, ncuts = default_tries(W)
    steps = [("before: METIS default, 1 try, repair", before),
             ("recursive bisection, 1 try, repair", lambda: repair_balance(W, metis_parts(W, targets, seed, 1), targets)),
             ("+ FM refinement", lambda: refine(W, repair_balance(W, metis_parts(W, targets, seed, 1), targets), targets)),
             (f"+ tries ({runs} runs x {ncuts} per bisection)", lambda: partition(W, targets, seed))]
    out = []
    for name, step in steps:
        t0 = time.perf_counter()
        part = step()
        out.append((name, cut_weight(W, part), time.perf_counter() - t0))
    return out


def place_command(matrix: Path, switches: int, method: str, out: Path) -> list:
    """``topoplan place`` of a 64-rank MapLib matrix on ``switches`` switches of single-core nodes, cut objective."""
    shape = [] if switches == 4 else ["--set", f"switches={switches}", "--set", f"nodes_per_switch={64 // switches}"]
    return [sys.executable, "-m", "topoplan", "place", "-t", "paper003", "--set", "kind=tree", "--set", "ocs=null",
            "--set", "cores_per_node=1", *shape, "-T", str(matrix), "-m", method, "--objective", "inter-switch",
            "--json", "-o", str(out)]


def run_process(log, runs: int = 3, switches=MAPLIB_SWITCHES, methods=("metis", "kahip")) -> list[dict]:
    """The whole ``topoplan place`` process beside KaHIP's (``kahip_peer.py``: the interpreter, ``kahip`` and one
    strong kaffpa call with imbalance 0) on each MapLib matrix: wall time, CPU time and peak memory of each,
    least of ``runs`` (largest peak), and the cuts."""
    import tempfile

    from processes import best_of, describe, ratio

    d = ROOT.parent / "shared" / "matrices" / "maplib"
    if not d.is_dir():
        log(f"process: {d} is absent, skipped")
        return []
    if not _kahip_ok():
        log("process: the kahip module is not installed (pip install kahip): no peer, skipped")
        return []
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "place.json"
        for k in switches:
            for app in MAPLIB:
                matrix = d / f"{app}.csv"
                peer = best_of([sys.executable, ROOT / "benchmarks" / "kahip_peer.py", matrix, "--parts", str(k)],
                               runs, stdout=lambda: open(Path(tmp) / "peer.json", "w"))
                peer_cut = json.loads((Path(tmp) / "peer.json").read_text())["cut_bytes"]
                for method in methods:
                    ours = best_of(place_command(matrix, k, method, out), runs)
                    doc = json.loads(out.read_text())
                    row = {"section": "process", "instance": f"{app} k={k}", "method": method, "topoplan": ours,
                           "kahip": peer, "ratio": ratio(peer, ours), "objective": doc["objective"],
                           "kahip_cut": peer_cut, "solver_s": doc["wall_s"]}
                    rows.append(row)
                    log(f"process {app:9s} k={k:<3d} place -m {method:6s} {describe(ours)} (cut {doc['objective'] / 1e6:.1f} "
                        f"MB) | KaHIP process {describe(peer)} (cut {peer_cut / 1e6:.1f} MB) | KaHIP / topoplan: wall "
                        f"{row['ratio']['wall']:.2f}x, CPU {row['ratio']['cpu']:.2f}x (load {ours['load'][1]:.1f})")
    return rows


def run_rgg(budget: float, seed: int, log) -> list[dict]:
    from topoplan.problems.placement import PlacementProblem

    kahip = _kahip_ok()
    methods = ["metis"] + (["kahip"] if kahip else []) + ["anneal"]
    traffic = rgg(4096, seed=0)
    rows = []
    for k in RGG_PARTS:
        prob = PlacementProblem.build(single_core_tree(k, 4096 // k), traffic, objective="inter-switch")
        W = prob.graph()
        ref, ref_s = kahip_strong(W, k) if kahip else (float("nan"), 0.0)
        first = len(rows)
        rows.append({"section": "rgg", "instance": f"k={k}", "method": "KaHIP-strong best of 5", "objective": ref,
                     "wall_s": ref_s})
        for name, cut, wall in _ablation(W, k, seed):
            rows.append({"section": "rgg", "instance": f"k={k}", "method": f"partition: {name}", "objective": cut,
                         "wall_s": wall})
        rows += _methods_rows(prob, methods, budget, seed, section="rgg", instance=f"k={k}")
        for r in rows[first:]:
            r["vs_kahip"] = r["objective"] / ref - 1.0
            log(f"rgg    k={k:<4d}   {r['method']:52s} cut {r['objective'] / 1e6:8.0f} MB  x{r['objective'] / ref:5.3f}"
                f"  wall {r['wall_s']:5.1f} s" + (f"  (start {r['init']})" if r.get("init") else ""))
    return rows


def peak_mb() -> float:
    """This process's peak resident set (MB): ``VmHWM`` of ``/proc/self/status`` (its own address space; the
    ``ru_maxrss`` of ``resource.getrusage`` keeps the parent's size at the fork), else ``ru_maxrss``."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def scale_row(spec: dict) -> dict:
    """One scale row, in this process (the parent runs each in a fresh interpreter)."""
    from bench_circuits_scale import cg_like, topology

    from topoplan.problems.placement import PlacementProblem, solve
    from topoplan.traffic.sources import load_source

    n = spec["ranks"]
    t0 = time.perf_counter()
    traffic = cg_like(n) if spec["traffic"] == "cg" else \
        load_source(f"random:np={n},msgs={8 * n},bytes=4MB,seed=1")[1]
    if spec["topology"] == "torus":
        from topoplan.core.topology_io import load_topology

        topo = load_topology({"kind": "torus", "name": f"torus{n}", "dims": TORUS_DIMS[n], "wrap": True,
                              "bw": "4.76GB/s", "latency": "100ns"})
    else:
        topo = topology(n)
    t1 = time.perf_counter()
    prob = PlacementProblem.build(topo, traffic)
    opts = {"time_limit": spec["budget"]} if spec["method"] == "anneal" else {}
    res = solve(prob, spec["method"], seed=0, **opts)
    t2 = time.perf_counter()
    return {**spec, "section": "scale", "pairs": int(len(prob.edges()[0])), "traffic_s": t1 - t0, "plan_s": t2 - t1,
            "peak_MB": peak_mb(),
            "inter_switch_bytes": res.metrics["inter_switch_bytes"],
            "hop_weighted_bytes": res.metrics["hop_weighted_bytes"],
            "congestion_bound_s": res.metrics["congestion_bound_s"], "init": res.options.get("init")}


def run_scale(budget: float, seed: int, log, timeout: float = 600.0, sizes=None, topologies=None) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    rows = []
    for n, traffic, method, topo in SCALE_ROWS:
        if (sizes and n not in sizes) or (topologies and topo not in topologies):
            continue
        spec = {"ranks": n, "traffic": traffic, "method": method, "topology": topo, "budget": budget}
        cmd = [sys.executable, str(Path(__file__).resolve()), "--row", json.dumps(spec)]
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
            row = json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else \
                {**spec, "section": "scale", "error": (out.stderr.strip().splitlines() or ["?"])[-1]}
        except subprocess.TimeoutExpired:
            row = {**spec, "section": "scale", "error": f"timed out after {timeout:g} s"}
        rows.append(row)
        head = f"scale  {n:>6,} ranks {topo:6s} {traffic:6s} {method:7s}"
        if "error" in row:
            log(f"{head} {row['error']}")
        else:
            log(f"{head} plan {row['plan_s']:6.1f} s  peak {row['peak_MB']:6.0f} MB  inter-switch "
                f"{row['inter_switch_bytes'] / 1e9:9.1f} GB  bound {row['congestion_bound_s'] * 1e3:8.1f} ms  "
                f"({row['pairs']:,} pairs, traffic {row['traffic_s']:.1f} s)")
    return rows


def run_mesh(budget: float, seed: int, log) -> list[dict]:
    from topoplan.problems.placement import PlacementProblem

    rows = []
    for pattern, traffic in (("stencil3d", stencil3d(16, 1e6)), ("mesh-knn", mesh_knn(4096, 6, 1e6, seed=seed))):
        prob = PlacementProblem.build(single_core_tree(128, 32, "tree-128x32"), traffic)
        first = len(rows)
        rows += _methods_rows(prob, ["metis", "greedy", "anneal"], budget, seed, section="mesh", instance=pattern)
        base = rows[first]["hop_weighted_bytes"]
        for r in rows[first:]:
            r["vs_metis"] = r["hop_weighted_bytes"] / base - 1.0
            log(f"mesh   {pattern:10s} {r['method']:8s} hop-weighted {r['hop_weighted_bytes'] / 1e9:8.3f} GB  "
                f"inter-switch {r['inter_switch_bytes'] / 1e9:7.3f} GB  wall {r['wall_s']:5.1f} s  "
                f"vs metis {r['vs_metis']:+.2%}" + (f"  (start {r['init']})" if r.get("init") else ""))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sections", default=",".join(SECTIONS), help="maplib, rgg, scale, mesh (comma-separated)")
    ap.add_argument("--budget", type=float, default=5.0, help="anneal and ilp seconds (default 5)")
    ap.add_argument("--ilp-budget", type=float, default=60.0, help="ilp seconds in the maplib section (default 60)")
    ap.add_argument("--sizes", default=None, help="scale rows to run, e.g. 16384 (default 16384,65536)")
    ap.add_argument("--topologies", default=None, help="scale rows to run: hybrid, torus (default both)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--quick", action="store_true",
                    help="maplib with anneal 2 s and ilp 5 s, and the process rows of metis on 4 switches")
    ap.add_argument("--row", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.quick:
        a.sections, a.budget, a.ilp_budget = "maplib,process", 2.0, 5.0
    if a.row:
        print(json.dumps(scale_row(json.loads(a.row))))
        return 0
    log = (lambda s: print(s, file=sys.stderr, flush=True)) if a.json else (lambda s: print(s, flush=True))
    sizes = {int(x) for x in a.sizes.split(",")} if a.sizes else None
    topologies = set(a.topologies.split(",")) if a.topologies else None
    rows = []
    t0 = time.perf_counter()
    for section in a.sections.split(","):
        if section not in SECTIONS:
            raise SystemExit(f"unknown section {section!r} (sections: {', '.join(SECTIONS)})")
        if section == "scale":
            rows += run_scale(a.budget, a.seed, log, sizes=sizes, topologies=topologies)
        else:
            rows += run_maplib(a.budget, a.seed, log, a.ilp_budget) \
                if section == "maplib" else run_process(log, **({"switches": (4,), "methods": ("metis",)} if a.quick else {})) \
                if section == "process" else {"rgg": run_rgg, "mesh": run_mesh}[section](a.budget, a.seed, log)
    log(f"total {time.perf_counter() - t0:.0f} s")
    if a.json:
        print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
