"""Speed and quality of the exact circuit model (issue 4, item 5).

Targets: at paper scale (<= 256 nodes, <= 128 OCS nodes) ``ilp``
proves optimality within 10 s; on 4,096 nodes in 128 switches with 1,024
OCS nodes and a CG-like pattern it returns a plan within 2% of the LP bound
in 60 s.

    python benchmarks/bench_circuits.py            # paper scale + 4,096 nodes (plan only)
    python benchmarks/bench_circuits.py --lp-bound # also the full LP bound of the large cases (slow)
    python benchmarks/bench_circuits.py --quick --json
    python benchmarks/bench_circuits.py --solvers cbc,highs,ortools   # MILP back-ends side by side

Columns: status and time of ``ilp``, its communication-time bound T, the
proven lower bound, the gap, and (large cases) the fixed-link floor and the
LP bound with the time it took. The 4,096-node system uses 000's EPS ratio
(10 Gbps node links, 64 Gbps uplinks per 32 nodes) with 003's fat EPS links
for OCS nodes (20 Gbps) and 20 Gbps circuits, hop limit 2; the ``thin``
variant has 40 Gbps uplinks (a stress case, not a target).

``--solvers a,b,...`` compares MILP back-ends instead (issue 18): every paper case and the
small-OCS cases (:data:`SMALL_OCS_CASES`, 6 OCS nodes: the node formulation; ``--cases`` picks the
sets, ``grid`` is every OCS size and traffic of the 001 and 003 comparisons) with each back-end
in turn, same time limit (``--time-limit``, default 20 s), each run in a fresh interpreter (a
user's CLI call: no native library of an earlier run loaded, see
:func:`topoplan.formulations.backends.base.call_isolated`). Per case and back-end: status, wall time, ``T``, its
proven bound and the gap; then per back-end the cases proven optimal, the geometric mean of the
time ratio to the first back-end, the worst gap and the cases where its plan is worse than another
back-end's. ``--large`` adds the 4,096-node case (60 s); ``--seeds 0,1,2`` runs each case per seed
(the switch formulation's plan depends on which of several optimal solutions a solver returns).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PAPER_CASES = [
    ("paper000", [], "neighbor", 128, 8192.0),
    ("paper000", [], "cg", 128, 8192.0),
    ("paper001-8x32", [], "neighbor", 256, 8192.0),
    ("paper001-8x32", ["ocs.nodes_per_switch=16"], "cg", 256, 8192.0),
    ("paper001-16x16", ["ocs.nodes_per_switch=8"], "neighbor", 256, 8192.0),
    ("paper001-16x16", ["ocs.nodes_per_switch=8"], "cg", 256, 8192.0),
    ("paper003", [], "neighbor", 256, None),
    ("paper003", [], "cg", 256, None),
    ("paper003", [], "is", 256, None),
    ("paper003", ["ocs.nodes_per_switch=2"], "neighbor", 256, None),
]

# the kind of case of issue 18: 6 OCS nodes, unevenly spread (003's neighbor and CG: the node formulation,
# 500-700 variables; the others: the switch formulation)
SMALL_OCS_CASES = [
    ("paper003", ["ocs.nodes=[0,1,16,17,32,48]"], kind, 256, None) for kind in ("neighbor", "cg", "mg", "is")
] + [("paper000", ["ocs.nodes=[0,1,32,33,64,96]"], kind, 128, 8192.0) for kind in ("neighbor", "cg")]


def grid_cases():
    """The 001 and 003 cells of ``experiments.compare_circuits`` (every OCS size and traffic of the papers)."""
    from experiments.compare_circuits import SYSTEMS

    return [(preset, sets, kind, ranks, thr) for system in ("001", "003")
            for preset, sizes, ranks, thr, kinds in SYSTEMS[system]
            for sets, _ in sizes.values() for kind in kinds]


def big_topology(up_bw: str):
    from topoplan.core.topology_io import load_topology

    return load_topology({"kind": "hybrid", "name": f"cg4096-up{up_bw}", "switches": 128, "nodes_per_switch": 32,
                          "cores_per_node": 1, "eps": {"down_bw": "10Gbps", "up_bw": up_bw},
                          "ocs": {"nodes_per_switch": 8, "ports_per_node": 1, "bw": "20Gbps", "latency": "500ns",
                                  "node_link_bw": "20Gbps"}})


def run_paper(cases, time_limit, solver, log):
    rows = []
    for case in cases:
        rows.append(paper_case(case, time_limit, solver))
        log(_fmt(rows[-1]))
    return rows


def paper_case(case, time_limit, solver, seed=0) -> dict:
    """``ilp`` on one paper-scale case with one MILP back-end: the result row."""
    from experiments.compare_circuits import load_traffic
    from topoplan.problems.circuits import CircuitProblem, solve
    from topoplan.core.topology_io import load_topology

    preset, sets, kind, ranks, thr = case
    _, tr, label = load_traffic(kind, ranks)
    p = CircuitProblem.build(load_topology(preset, sets), tr, threshold_B=thr)
    t0, c0 = time.perf_counter(), _cpu_s()
    r = solve(p, "ilp", time_limit=time_limit, solver=solver, seed=seed)
    wall, cpu = time.perf_counter() - t0, _cpu_s() - c0
    return {"case": f"{preset} {' '.join(sets)}".strip(), "traffic": kind, "source": label,
            "ocs_nodes": int(p.is_ocs.sum()), "solver": solver, "seed": seed, "status": r.status, "T_s": r.objective,
            "bound_s": r.bound, "gap": r.gap, "uplink_bytes": r.metrics["uplink_bytes"], "wall_s": wall,
            "cpu_s": cpu, "formulation": r.options.get("formulation"), "plan_from": r.options.get("plan_from"),
            "variables": r.options.get("variables"), "solver_status": r.options.get("solver_status"),
            "T_proven": r.metrics.get("bound_proven_optimal"),
            "target_met": r.status == "optimal" and wall <= 10.0 + 1.0}


def _cpu_s() -> float:
    """CPU seconds of this process and its finished children (CBC runs as a child process)."""
    import resource

    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def run_large(variants, time_limit, solver, lp, log):
    from topoplan.problems.circuits.exact import lp_bound
    from topoplan.problems.circuits import CircuitProblem, solve
    from topoplan.problems.circuits.bound import floor_s
    from topoplan.traffic.sources import load_source

    rows = []
    tr = load_source("npb:kernel=cg,class=C,np=4096,iters=1")[1]  # NPB CG's 64 x 64 process grid
    for name, up in variants:
        p = CircuitProblem.build(big_topology(up), tr, threshold_B=8192.0, hop_limit=2)
        t0 = time.perf_counter()
        r = solve(p, "ilp", time_limit=time_limit, solver=solver)
        wall = time.perf_counter() - t0
        floor = floor_s(p)
        row = {"case": f"4096 nodes, 128 switches, 1024 OCS, {name}", "traffic": "NPB CG class C", "ocs_nodes": 1024,
               "status": r.status, "T_s": r.objective, "bound_s": r.bound, "gap": r.gap,
               "uplink_bytes": r.metrics["uplink_bytes"], "wall_s": wall, "formulation": r.options.get("formulation"),
               "plan_from": r.options.get("plan_from"), "floor_s": floor}
        lb = floor
        if lp:
            t1 = time.perf_counter()
            lb = max(floor, lp_bound(p))
            row["lp_bound_s"], row["lp_wall_s"] = lb, time.perf_counter() - t1
        row["gap_to_lp"] = (r.objective - lb) / r.objective if lp else None
        row["gap_to_floor"] = (r.objective - floor) / r.objective
        # the floor is below the LP bound: within 2% of the floor implies within 2% of the LP bound
        row["target_met"] = (row["gap_to_lp"] if lp else row["gap_to_floor"]) <= 0.02 and wall <= time_limit + 5
        rows.append(row)
        log(_fmt(row))
    return rows


def _fmt(r) -> str:
    gap = "-" if r["gap"] is None else f"{r['gap']:.1%}"
    extra = ""
    if "floor_s" in r:
        extra = f" floor={r['floor_s'] * 1e3:.2f}ms"
        if r.get("lp_bound_s") is not None:
            extra += f" LP={r['lp_bound_s'] * 1e3:.2f}ms ({r['lp_wall_s']:.0f}s)"
    if r.get("T_proven") is not None:
        extra += " T proven" if r["T_proven"] else ""
    return (f"{r['case']:42s} {r['traffic']:8s} {r['status']:9s} T={r['T_s'] * 1e3:9.3f}ms "
            f"bound={(r['bound_s'] or 0) * 1e3:9.3f}ms gap={gap:>6s} {r['wall_s']:6.1f}s "
            f"[{r['formulation']}, {r['plan_from']}]{extra} {'ok' if r['target_met'] else 'MISSED'}")


# -- back-ends side by side (--solvers) --------------------------------------------------

def _fresh(fn, *args):
    """``fn(*args)`` in a fresh interpreter: every back-end starts as in a user's own CLI call."""
    import multiprocessing as mp

    with mp.get_context("spawn").Pool(1) as pool:
        return pool.apply(fn, args)


def _large_case(name, up, solver):
    return run_large([(name, up)], 60.0, solver, False, lambda *_: None)[0] | {"solver": solver}


def _cmp_line(r) -> str:
    gap = "-" if r["gap"] is None else f"{r['gap']:.1%}"
    T = "-" if r["T_s"] is None else f"{r['T_s'] * 1e3:.3f}"
    bound = "-" if r["bound_s"] is None else f"{r['bound_s'] * 1e3:.3f}"
    cpu = "" if r.get("cpu_s") is None else f" (cpu {r['cpu_s']:5.1f}s)"
    return (f"  {r['solver']:8s} {r['status']:9s} {r['wall_s']:6.1f}s{cpu}  T={T:>9s}ms  bound={bound:>9s}ms  "
            f"gap={gap:>6s}  [{r['formulation']}, {r['plan_from']}, solver {'/'.join(r.get('solver_status') or [])}]")


def compare(solvers, cases, time_limit, large=False, log=print, seeds=(0,)) -> dict:
    """Run every case (and seed) with every back-end in turn (same limit, fresh interpreter each); rows and
    summary."""
    import math
    import os
    import statistics

    from topoplan.formulations.backends import MILP_BACKENDS, unavailable_reason

    for s in solvers:
        why = unavailable_reason(s) or (None if s in MILP_BACKENDS else f"{s!r} is not a MILP back-end "
                                                                          f"({', '.join(MILP_BACKENDS)})")
        if why:
            raise SystemExit(f"--solvers: {why}")
    load0 = os.getloadavg()
    log(f"== ilp, {time_limit:g} s limit, back-ends {', '.join(solvers)}; {os.cpu_count()} CPUs, "
        f"load average {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}")
    rows = []
    jobs = [(paper_case, c, time_limit, seed) for c in cases for seed in seeds]
    if large:
        jobs.append((_large_case, None, "uplinks 64 Gbps", "64Gbps"))
    for job in jobs:
        first = None
        for s in solvers:
            t0 = time.perf_counter()
            try:
                if job[0] is paper_case:
                    r = _fresh(paper_case, job[1], job[2], s, job[3])
                else:
                    r = _fresh(_large_case, job[2], job[3], s)
            except Exception as exc:   # e.g. a plan that fails validation: a row, not the end of the run
                if job[0] is paper_case:
                    case, kind = f"{job[1][0]} {' '.join(job[1][1])}".strip(), job[1][2]
                else:
                    case, kind = f"4096 nodes, 128 switches, 1024 OCS, {job[2]}", "NPB CG class C"
                r = {"case": case, "traffic": kind, "ocs_nodes": None, "solver": s,
                     "seed": job[3] if job[0] is paper_case else 0,
                     "status": "error", "T_s": None, "bound_s": None, "gap": None,
                     "wall_s": time.perf_counter() - t0, "formulation": None, "plan_from": None,
                     "solver_status": None, "T_proven": False, "error": f"{type(exc).__name__}: {exc}"}
            if first is None:
                first = r
                log(f"{r['case']} / {r['traffic']}{'' if len(seeds) == 1 else ' / seed %d' % r['seed']} "
                    f"({r['ocs_nodes']} OCS nodes, {r['formulation']}"
                    f"{'' if r.get('variables') is None else ', %d variables' % r['variables']})")
            rows.append(r)
            log(_cmp_line(r) + (f"  {r['error']}" if r.get("error") else ""))
    summary = {}
    base = solvers[0]
    by = {(r["case"], r["traffic"], r.get("seed", 0), r["solver"]): r for r in rows}
    keys = list(dict.fromkeys((r["case"], r["traffic"], r.get("seed", 0)) for r in rows))
    for s in solvers:
        mine = [by[k + (s,)] for k in keys]
        ratios = [by[k + (s,)]["wall_s"] / by[k + (base,)]["wall_s"] for k in keys   # runs both completed
                  if "error" not in (by[k + (s,)]["status"], by[k + (base,)]["status"])]
        gaps = [r["gap"] for r in mine if r["gap"] is not None]
        worse_T = 0
        for k in keys:
            Ts = [by[k + (o,)]["T_s"] for o in solvers if by[k + (o,)]["T_s"] is not None]
            mine_T = by[k + (s,)]["T_s"]
            worse_T += mine_T is None or mine_T > min(Ts) * (1 + 1e-6)
        summary[s] = {"optimal": sum(r["status"] == "optimal" for r in mine),
                      "errors": sum(r["status"] == "error" for r in mine),
                      "T_proven": sum(bool(r.get("T_proven")) for r in mine), "cases": len(mine),
                      "geomean_time_ratio": (math.exp(statistics.fmean(math.log(x) for x in ratios))
                                             if ratios else None),
                      "total_wall_s": sum(r["wall_s"] for r in mine),
                      "worst_gap": max(gaps) if gaps else None, "no_gap": len(mine) - len(gaps),
                      "worse_T_than_best": worse_T}
    load1 = os.getloadavg()
    log(f"== summary ({len(keys)} runs, {time_limit:g} s each; time ratio = geometric mean of wall / {base}'s; "
        f"load average at the end {load1[0]:.2f})")
    for s, m in summary.items():
        worst = "-" if m["worst_gap"] is None else f"{m['worst_gap']:.1%}"
        ratio = "-" if m["geomean_time_ratio"] is None else f"{m['geomean_time_ratio']:.2f}"
        log(f"  {s:8s} optimal {m['optimal']:2d}/{m['cases']}  T proven {m['T_proven']:2d}/{m['cases']}  "
            f"time ratio {ratio:>5s}  total {m['total_wall_s']:6.1f}s  worst gap {worst:>6s}  "
            f"T worse than the best back-end's (or error) in {m['worse_T_than_best']} case(s)"
            + (f", {m['errors']} error(s)" if m["errors"] else ""))
    return {"rows": rows, "summary": summary, "time_limit_s": time_limit, "cpus": os.cpu_count(),
            "load_average": [load0, load1]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="ilp speed at paper scale and at 4,096 nodes")
    ap.add_argument("--quick", action="store_true", help="three paper cases and the 4,096-node target case")
    ap.add_argument("--lp-bound", action="store_true", help="also compute the LP bound of the large cases (minutes)")
    ap.add_argument("--solver", default="cbc")
    ap.add_argument("--solvers", help="compare MILP back-ends side by side, e.g. cbc,highs,ortools")
    ap.add_argument("--time-limit", type=float, default=20.0, help="--solvers: seconds per case and back-end")
    ap.add_argument("--cases", default="paper,small-ocs",
                    help="--solvers: case sets, comma-separated: paper, small-ocs, grid (the 001 and 003 cells of "
                         "experiments.compare_circuits: every OCS size and traffic)")
    ap.add_argument("--large", action="store_true", help="--solvers: also the 4,096-node case (60 s)")
    ap.add_argument("--seeds", default="0", help="--solvers: solver seeds, comma-separated (each case once per seed)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    log = (lambda s: print(s, file=sys.stderr)) if a.json else print
    cases = PAPER_CASES[:1] + PAPER_CASES[6:8] if a.quick else PAPER_CASES
    if a.solvers:
        sets = {"paper": cases, "small-ocs": SMALL_OCS_CASES[:2] if a.quick else SMALL_OCS_CASES}
        unknown = set(a.cases.split(",")) - set(sets) - {"grid"}
        if unknown:
            ap.error(f"--cases: unknown {', '.join(sorted(unknown))} (paper, small-ocs, grid)")
        chosen = [c for name in a.cases.split(",") for c in (grid_cases() if name == "grid" else sets[name])]
        out = compare([s.strip() for s in a.solvers.split(",") if s.strip()], chosen, a.time_limit, a.large, log,
                      seeds=[int(x) for x in a.seeds.split(",")])
        if a.json:
            print(json.dumps(out, indent=1))
        return 0
    if not a.json:
        print("== paper scale: ilp, 10 s limit (target: optimal within 10 s)")
    paper = run_paper(cases, 10.0, a.solver, log)
    if not a.json:
        print("== 4,096 nodes: ilp, 60 s limit (target: within 2% of the LP bound)")
    variants = [("uplinks 64 Gbps", "64Gbps")] + ([] if a.quick else [("thin uplinks 40 Gbps", "40Gbps")])
    large = run_large(variants, 60.0, a.solver, a.lp_bound, log)
    if a.json:
        print(json.dumps({"paper": paper, "large": large}, indent=1))
    else:
        n_ok = sum(r["target_met"] for r in paper)
        n_T = sum(bool(r.get("T_proven")) and r["wall_s"] <= 11 for r in paper)
        print(f"paper scale: {n_ok}/{len(paper)} proven optimal (bound, then uplink bytes) within 10 s, "
              f"{n_T}/{len(paper)} with the bound T proven optimal; "
              f"4,096 nodes: {sum(r['target_met'] for r in large)}/{len(large)} within 2%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
