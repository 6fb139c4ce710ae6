"""Do the exact methods honour their time limits? (issue 20: "every exact method returns within 10% of its
time limit at every benchmark size"; model building counts against the limit).

    python benchmarks/bench_time_limits.py                  # every row, 10 s limit
    python benchmarks/bench_time_limits.py --limit 20 --json
    python benchmarks/bench_time_limits.py --only circuits

Each row runs one ``solve(problem, "ilp", time_limit=L)`` in a fresh interpreter (so its peak memory,
``resource.getrusage``, is its own) and reports the wall time of that call -- building the model,
solving, decoding, validating the plan -- against ``L``, the status, the bound and the gap.
``over_%`` is ``100 * (wall / L - 1)``; a row fails (``ok`` false) above 10%. The time to make the
traffic and the topology is not counted (it is the caller's).

With ``--process`` each row is instead the command a user runs (``topoplan circuits -m ilp`` /
``topoplan place -m ilp``/``anneal``, ``--time-limit L``), timed as a process from its start to its
written plan (interpreter start-up, imports, loading, building, solving, validating, simulating,
writing), against the same 10%: the limit bounds the whole command (:mod:`topoplan.core.deadline`).
The load average is printed with every row (the measurement is relative: wall over limit).

Rows, all with random or application-like traffic that the exact models cannot finish within the limit:

- circuits ``ilp`` (``--solver auto``) on the hybrids of ``bench_circuits_scale`` (32 nodes per switch,
  8 OCS nodes per switch), 256, 1,024 and 4,096 nodes, ``random:np=N,msgs=8N,bytes=4MB,seed=1``;
- placement ``ilp`` (CP-SAT) of 256 and 1,024 ranks of the same random traffic on two-level trees of
  16 nodes per switch with 1 and 4 cores per node;
- Bcast ``ilp`` (CP-SAT) with 128 and 1,024 leaders of ``bench_bcast``'s cluster (128 racks of 16
  nodes), 1 KiB k-nomial, hop delays.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

ROWS = [("circuits", 256), ("circuits", 1024), ("circuits", 4096),
        ("placement", 256), ("placement", 1024),
        ("bcast", 128), ("bcast", 1024)]
QUICK_ROWS = [("circuits", 256), ("placement", 256), ("bcast", 128)]
MAX_OVER = 0.10


def _problem(kind: str, size: int):
    """The problem of one row (built before the clock starts)."""
    from topoplan.traffic.sources import load_traffic

    if kind == "circuits":
        from benchmarks.bench_circuits_scale import topology
        from topoplan.problems.circuits import CircuitProblem

        return CircuitProblem.build(topology(size), load_traffic(f"random:np={size},msgs={8 * size},bytes=4MB,seed=1"))
    if kind == "placement":
        from topoplan.core.topology_io import load_topology
        from topoplan.problems.placement import PlacementProblem

        cores = 1 if size <= 256 else 4
        topo = load_topology({"kind": "tree", "name": f"tree{size}", "switches": size // (16 * cores),
                              "nodes_per_switch": 16, "cores_per_node": cores,
                              "eps": {"down_bw": "10Gbps", "up_bw": "40Gbps", "down_latency": "500ns",
                                      "up_latency": "500ns"}})
        return PlacementProblem.build(topo, load_traffic(f"random:np={size},msgs={8 * size},bytes=4MB,seed=1"))
    if kind == "bcast":
        from topoplan.problems.bcast import BcastProblem
        from topoplan.problems.bcast.allocation import cluster, generate

        topo = cluster(128, 16)
        return BcastProblem.build(topo, placement=generate(topo, size, racks=min(128, size // 8), seed=0), root=0,
                                  bytes_B=1024, tree="knomial", delay="hops")
    raise KeyError(kind)


def run_row(kind: str, size: int, limit_s: float) -> dict:
    """One row, in this process."""
    import resource
    import time

    from topoplan.problems import bcast, circuits, placement

    prob = _problem(kind, size)
    solve = {"circuits": circuits.solve, "placement": placement.solve, "bcast": bcast.solve}[kind]
    extra = {"simulate": False} if kind == "bcast" else {}
    t0 = time.perf_counter()
    r = solve(prob, "ilp", time_limit=limit_s, seed=0, **extra)
    wall = time.perf_counter() - t0
    peak_MB = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"problem": kind, "size": size, "limit_s": limit_s, "wall_s": round(wall, 2),
            "over_pct": round(100 * (wall / limit_s - 1), 1), "ok": wall <= limit_s * (1 + MAX_OVER),
            "status": r.status, "gap": None if r.gap is None else round(float(r.gap), 4),
            "formulation": (r.options or {}).get("formulation"), "peak_MB": round(peak_MB)}


# --process rows: the command line of each (the topology is written to a temporary file)
PROCESS_ROWS = [("circuits", 1024, "ilp"), ("circuits", 256, "anneal"), ("placement", 1024, "ilp"),
                ("placement", 256, "anneal")]


def process_row(kind: str, size: int, method: str, limit_s: float, tmp: Path) -> dict:
    """One ``--process`` row: the CLI command in a fresh process, timed from its start to its exit."""
    import time

    import yaml

    if kind == "circuits":
        topo = {"kind": "hybrid", "name": f"scale{size}", "switches": size // 32, "nodes_per_switch": 32,
                "cores_per_node": 1, "eps": {"down_bw": "10Gbps", "up_bw": "64Gbps", "down_latency": "500ns",
                                             "up_latency": "500ns"},
                "ocs": {"nodes_per_switch": 8, "bw": "20Gbps", "latency": "1us"}}
    else:
        cores = 1 if size <= 256 else 4
        topo = {"kind": "tree", "name": f"tree{size}", "switches": size // (16 * cores), "nodes_per_switch": 16,
                "cores_per_node": cores, "eps": {"down_bw": "10Gbps", "up_bw": "40Gbps", "down_latency": "500ns",
                                                 "up_latency": "500ns"}}
    topo_file = tmp / f"{kind}{size}.yaml"
    topo_file.write_text(yaml.safe_dump(topo))
    out = tmp / f"{kind}{size}{method}.json"
    cmd = [sys.executable, "-m", "topoplan.cli.main", "circuits" if kind == "circuits" else "place", "-t",
           str(topo_file), "-T", f"random:np={size},msgs={8 * size},bytes=4MB,seed=1", "-m", method,
           "--time-limit", str(limit_s), "--json", "-o", str(out)]
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    run = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    row = {"problem": kind, "size": size, "method": method, "limit_s": limit_s, "wall_s": round(wall, 2),
           "over_pct": round(100 * (wall / limit_s - 1), 1), "ok": run.returncode == 0 and wall <= limit_s * (1 + MAX_OVER),
           "load": round(load, 1)}
    if run.returncode != 0:
        row["error"] = run.stderr.strip().splitlines()[-1:]
    else:
        doc = json.loads(out.read_text())
        row.update(status=doc.get("status"), method_wall_s=round(float(doc.get("wall_s") or 0), 2),
                   message=doc.get("message"))
    return row


def main_process(limits, only, as_json: bool) -> int:
    import tempfile

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for limit in limits:
            for kind, size, method in PROCESS_ROWS:
                if only and kind not in only:
                    continue
                row = process_row(kind, size, method, limit, Path(tmp))
                rows.append(row)
                if not as_json:
                    print(f"{kind:<10}{size:>6} {method:<7}{limit:>6g}{row['wall_s']:>8.2f}{row['over_pct']:>8.1f}"
                          f"{row['load']:>6.1f}  {row.get('status', '-'):<10}{row.get('method_wall_s', '-'):>7}  "
                          f"{'yes' if row['ok'] else 'NO'}  {row.get('error') or row.get('message') or ''}", flush=True)
    if as_json:
        print(json.dumps(rows, indent=1))
    return 0 if all(r["ok"] for r in rows) else 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=float, default=10.0, help="time limit of every row (s)")
    ap.add_argument("--only", choices=("circuits", "placement", "bcast"), action="append")
    quick_rows = ", ".join(f"{k} {n}" for k, n in QUICK_ROWS)
    ap.add_argument("--quick", action="store_true", help=f"the smallest row of each problem ({quick_rows}), 5 s limit")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--row", nargs=2, metavar=("PROBLEM", "SIZE"), help=argparse.SUPPRESS)
    ap.add_argument("--process", action="store_true",
                    help="time the CLI commands as processes, start to written plan (--limit may repeat)")
    ap.add_argument("--limits", type=float, nargs="+", help="with --process: several limits")
    a = ap.parse_args(argv)
    if a.quick:
        a.limit = 5.0
    if a.process:
        if not a.json:
            print(f"== commands as processes ({os.cpu_count()} CPUs); wall from process start to exit")
            print(f"{'problem':<10}{'size':>6} {'method':<7}{'limit':>6}{'wall_s':>8}{'over_%':>8}{'load':>6}  "
                  f"{'status':<10}{'method':>7}  ok")
        return main_process(a.limits or [a.limit], a.only, a.json)
    if a.row:   # a child: one row, JSON on stdout
        print(json.dumps(run_row(a.row[0], int(a.row[1]), a.limit)))
        return 0
    rows = []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    if not a.json:
        print(f"== exact methods at a {a.limit:g} s limit (fresh interpreter per row; {os.cpu_count()} CPUs, "
              f"load {os.getloadavg()[0]:.1f})")
        print(f"{'problem':<10}{'size':>6}{'wall_s':>8}{'over_%':>8}{'status':>10}{'gap':>8}  formulation  peak_MB  ok")
    for kind, size in QUICK_ROWS if a.quick else ROWS:
        if a.only and kind not in a.only:
            continue
        out = subprocess.run([sys.executable, __file__, "--limit", str(a.limit), "--row", kind, str(size)],
                             capture_output=True, text=True, env=env)
        if out.returncode != 0:
            row = {"problem": kind, "size": size, "ok": False, "error": out.stderr.strip().splitlines()[-1:]}
        else:
            row = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append(row)
        if not a.json:
            if "error" in row:
                print(f"{kind:<10}{size:>6}  error: {row['error']}")
            else:
                gap = "-" if row["gap"] is None else f"{100 * row['gap']:.1f}%"
                print(f"{kind:<10}{size:>6}{row['wall_s']:>8.2f}{row['over_pct']:>8.1f}{row['status']:>10}{gap:>8}  "
                      f"{str(row['formulation'] or '-'):<11}{row['peak_MB']:>9}  {'yes' if row['ok'] else 'NO'}")
    if a.json:
        print(json.dumps(rows, indent=1))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
