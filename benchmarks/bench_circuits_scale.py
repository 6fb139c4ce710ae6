"""Scale of the circuit heuristics (issue 20): planning time and peak memory from 4,096 to 65,536 nodes.

    python benchmarks/bench_circuits_scale.py              # 4,096, 16,384 and 65,536 nodes, greedy
    python benchmarks/bench_circuits_scale.py --quick      # 4,096 nodes only
    python benchmarks/bench_circuits_scale.py --json
    python benchmarks/bench_circuits_scale.py --methods greedy,three-step,sp --sizes 4096,16384
    python benchmarks/bench_circuits_scale.py --simulate   # also simulate each plan (timed apart)

Systems: hybrids of 32 single-core nodes per switch, 8 OCS nodes per switch (one optical port each),
10 Gbps node links, 64 Gbps uplinks, 20 Gbps circuits -- 128 switches (4,096 nodes, 1,024 OCS nodes:
the system of issue 20), 512 (16,384 nodes) and 2,048 (65,536 nodes).

Traffic, one rank per node:

- ``random``: the generator ``random:np=N,msgs=8N,bytes=4MB,seed=1`` (8 messages of 4 MB per rank);
- ``cg``: CG-like, NPB CG class C: the pairs and sizes of its reduce-scatter and transpose exchanges
  (:func:`topoplan.traffic.npb.cg_layout`, 26 matrix-vector products per CG call, warm-up plus one
  iteration) and its 8-byte row sums, as a matrix (:func:`cg_like`). Its large messages are those of
  ``npb:kernel=cg,class=C,np=N,iters=1`` message for message; the NPB generator itself writes the whole
  call trace (12 M rows at 4,096 ranks: 14 s; 57 M rows at 16,384: 81 s), so it is not used here.

Every row runs in a fresh interpreter, so its peak memory (``resource.getrusage``, maximum resident set
of that process) is its own: ``traffic_s`` is making the traffic, ``plan_s`` the planning -- the problem
build, the method, the forwarding tables, the communication-time bound and the plan's validation (one
:func:`topoplan.problems.circuits.solve`) -- and ``peak_MB`` the process peak. ``--simulate`` adds the
simulation of the plan (the CLI's ``--simulate``: the traffic as one bulk phase, maxmin, pipelined relays)
as ``sim_s``; its peak then includes the simulation.

Tables: the methods' default ``tables="full"`` gives every node with a relay route an entry towards
every switch it can reach (N x S entries: 8.4 M at 16,384 nodes when the circuits connect every switch).
At 65,536 nodes that would be 134 M entries (a 1 GB array, and a plan of many GB), so those rows use
``tables="used"``: only the entries the traffic's large messages use (the same routes and bound).
``--tables full|used`` sets every row.

Target (issue 20): greedy plans 16,384 nodes in under 10 s and 4 GB, on random and CG-like traffic.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SIZES = (4096, 16384, 65536)
TRAFFICS = ("random", "cg")
TARGET_NODES, TARGET_S, TARGET_MB = 16384, 10.0, 4096


def topology(nodes: int):
    """The hybrid of ``nodes`` nodes: 32 per switch, 8 OCS nodes per switch."""
    from topoplan.core.topology_io import load_topology

    return load_topology({"kind": "hybrid", "name": f"scale{nodes}", "switches": nodes // 32, "nodes_per_switch": 32,
                          "cores_per_node": 1,
                          "eps": {"down_bw": "10Gbps", "up_bw": "64Gbps", "down_latency": "500ns",
                                  "up_latency": "500ns"},
                          "ocs": {"nodes_per_switch": 8, "bw": "20Gbps", "latency": "1us"}})


def cg_like(n_ranks: int, klass: str = "C", iters: int = 1):
    """NPB CG's point-to-point traffic as a matrix: its exchanges with the row partners and the transpose
    partner (:func:`topoplan.traffic.npb.cg_layout`), warm-up plus ``iters`` iterations.

    Per CG call: 26 matrix-vector products (each a reduce-scatter over the process row and the transpose
    exchange) and 53 one-word row sums; per iteration one two-word row sum.

    Examples
    --------
    >>> t = cg_like(16)
    >>> t.n_ranks, int(t.count.max()), sorted(set(t.msg_bytes.tolist()))[:3]
    (16, 106, [8.0, 16.0, 300000.0])
    """
    import numpy as np

    from topoplan.traffic.matrix import from_arrays
    from topoplan.traffic.npb import CG_CLASSES, DBL, cg_layout

    L = cg_layout(CG_CLASSES[klass][0], n_ranks)
    part, lens, exch, send_len = L["reduce_exch_proc"], L["reduce_send_len"], L["exch_proc"], L["send_len"]
    ranks = np.arange(n_ranks)
    calls = iters + 1
    matvec, row_sums = 26 * calls, 53 * calls
    src, dst, size, count = [], [], [], []
    for i in range(L["l2npcols"]):
        for b, c in ((lens[:, i] * DBL, matvec), (np.full(n_ranks, DBL), row_sums), (np.full(n_ranks, 2 * DBL), calls)):
            src.append(ranks)
            dst.append(part[:, i])
            size.append(b)
            count.append(np.full(n_ranks, c))
    if L["l2npcols"]:
        src.append(ranks)
        dst.append(exch)
        size.append(send_len * DBL)
        count.append(np.full(n_ranks, matvec))
    src, dst = np.concatenate(src), np.concatenate(dst)
    keep = src != dst
    return from_arrays(n_ranks, src[keep], dst[keep], np.concatenate(size)[keep], np.concatenate(count)[keep],
                       name=f"cg-like:class={klass},np={n_ranks}")


def traffic(kind: str, nodes: int):
    """``(trace or None, Traffic)`` of a row."""
    from topoplan.traffic.sources import load_source

    if kind == "random":
        return load_source(f"random:np={nodes},msgs={8 * nodes},bytes=4MB,seed=1")
    if kind == "cg":
        return None, cg_like(nodes)
    raise SystemExit(f"unknown traffic {kind!r} (random, cg)")


def run_row(spec: dict) -> dict:
    """One row, in this process (the parent runs each in a fresh interpreter)."""
    import resource

    from topoplan.problems.circuits import CircuitProblem, solve

    topo = topology(spec["nodes"])
    t0 = time.perf_counter()
    trace, tr = traffic(spec["traffic"], spec["nodes"])
    t1 = time.perf_counter()
    prob = CircuitProblem.build(topo, tr)
    res = solve(prob, spec["method"], seed=0, tables=spec["tables"])
    t2 = time.perf_counter()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    row = {**spec, "switches": topo.n_switches, "ocs_nodes": int(prob.is_ocs.sum()),
           "large_pairs": int(len(prob.large_bytes)), "circuits": res.metrics["circuits_used"],
           "entries": sum(len(r) for r in res.plan["forwarding"].values()), "bound_s": res.objective,
           "traffic_s": t1 - t0, "plan_s": t2 - t1, "peak_MB": peak}
    if spec.get("simulate"):
        from topoplan.problems.circuits.problem import plan_simulator

        t3 = time.perf_counter()
        row["simulated_s"] = plan_simulator(prob, trace)(res.to_dict())
        row["sim_s"] = time.perf_counter() - t3
        row["sim_peak_MB"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return row


def fresh(spec: dict, timeout: float) -> dict:
    """``run_row(spec)`` in a fresh interpreter; a failure or timeout is reported in the row."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--row", json.dumps(spec)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    t0 = time.perf_counter()
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {**spec, "error": f"timed out after {timeout:g} s"}
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["?"])[-1]
        return {**spec, "error": f"exit {out.returncode}: {tail}", "wall_s": time.perf_counter() - t0}
    return json.loads(out.stdout.strip().splitlines()[-1])


def _fmt(r: dict) -> str:
    head = f"{r['nodes']:>6} {r['traffic']:6s} {r['method']:10s} {r['tables']:4s}"
    if "error" in r:
        return f"{head}  {r['error']}"
    sim = f"  sim {r['sim_s']:6.1f} s ({r['sim_peak_MB']:6.0f} MB)" if "sim_s" in r else ""
    return (f"{head} {r['circuits']:>6} {r['entries']:>10,} {r['bound_s'] * 1e3:>11.3f} {r['traffic_s']:>8.1f} "
            f"{r['plan_s']:>8.1f} {r['peak_MB']:>8.0f}{sim}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="4,096 nodes only")
    ap.add_argument("--sizes", default=None, help="nodes per row, comma-separated (multiples of 32; default "
                                                  "4096,16384,65536)")
    ap.add_argument("--traffics", default=",".join(TRAFFICS), help="random, cg (comma-separated)")
    ap.add_argument("--methods", default="greedy", help="circuit methods, comma-separated (default greedy)")
    ap.add_argument("--tables", default="auto", choices=("auto", "full", "used"),
                    help="auto: full up to 16,384 nodes, used above")
    ap.add_argument("--simulate", action="store_true", help="also simulate each plan (timed apart)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per row")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--row", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.row:
        print(json.dumps(run_row(json.loads(a.row))))
        return 0
    sizes = [4096] if a.quick else ([int(x) for x in a.sizes.split(",")] if a.sizes else list(SIZES))
    specs = [{"nodes": n, "traffic": t, "method": m,
              "tables": a.tables if a.tables != "auto" else ("full" if n <= TARGET_NODES else "used"),
              "simulate": a.simulate}
             for n in sizes for t in a.traffics.split(",") for m in a.methods.split(",")]
    log = (lambda s: print(s, file=sys.stderr, flush=True)) if a.json else (lambda s: print(s, flush=True))
    log(f"{'nodes':>6} {'traffic':6s} {'method':10s} {'tab':4s} {'circ':>6} {'entries':>10} {'bound ms':>11} "
        f"{'gen s':>8} {'plan s':>8} {'peak MB':>8}")
    rows = []
    for spec in specs:
        rows.append(fresh(spec, a.timeout))
        log(_fmt(rows[-1]))
    target = [r for r in rows if r["nodes"] == TARGET_NODES and r["method"] == "greedy" and "error" not in r]
    met = bool(target) and all(r["plan_s"] < TARGET_S and r["peak_MB"] < TARGET_MB for r in target)
    if target:
        log(f"target (greedy, {TARGET_NODES:,} nodes, under {TARGET_S:g} s and {TARGET_MB / 1024:g} GB): "
            f"{'met' if met else 'MISSED'}")
    if a.json:
        print(json.dumps({"rows": rows, "target_met": met if target else None}, indent=1))
    return 1 if any("error" in r and "timed out" not in r["error"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
