"""002's experiment: topology- and speed-aware Bcast reordering, all methods, 1 B - 4 MB.

Scenarios: a homogeneous SDR two-level cluster (Ranger-like, 16 nodes per
rack) with 256 and 1,024 leaders scattered over racks as in 002 Table I
(hop delay matrix), and a mixed SDR/DDR cluster (alternate racks SDR 8 Gbps /
DDR 16 Gbps, Glenn-like) with 128 and 256 leaders (speed delay matrix).
Writes one CSV row per (scenario, size, method): predicted and simulated time,
solve time, status, bound and gap.

    python experiments/bcast_reorder.py -o bcast.csv [--quick] [--anneal-limit 5] [--ilp-limit 10]
"""

from __future__ import annotations

import argparse
import csv
import sys

from planner.bcast import BcastProblem, solve
from planner.bcast.allocation import cluster, generate

SIZES = [1, 64, 1024, 16384, 262144, 1 << 20, 4 << 20]
METHODS = ("default", "dft", "bft", "greedy", "anneal", "ilp")


def scenarios(quick: bool):
    homo = cluster(128, 16, name="ranger-like")
    mixed = cluster(32, 16, bw_Bps="mixed", name="glenn-like")
    yield "homogeneous-32", homo, generate(homo, 32, racks=8, seed=1), "hops"
    yield "mixed-32", mixed, generate(mixed, 32, racks=8, seed=1), "speed"
    yield "homogeneous-256", homo, generate(homo, 256, racks=100, seed=1), "hops"
    if not quick:
        yield "homogeneous-1024", homo, generate(homo, 1024, racks=128, seed=1), "hops"
    yield "mixed-128", mixed, generate(mixed, 128, racks=32, seed=1), "speed"
    if not quick:
        yield "mixed-256", mixed, generate(mixed, 256, racks=32, seed=1), "speed"


def run(quick=False, anneal_limit=5.0, ilp_limit=10.0, max_sim_messages=20000, out=sys.stdout, ilp_max_leaders=64):
    fields = ["scenario", "leaders", "delay", "bytes", "tree", "method", "predicted_time_s", "simulated_time_s",
              "default_time_s", "gain_vs_default", "solve_s", "status", "bound_s", "gap"]
    w = csv.DictWriter(out, fieldnames=fields)
    w.writeheader()
    sizes = SIZES[::2] if quick else SIZES
    for name, topo, nodes, delay in scenarios(quick):
        for nb in sizes:
            prob = BcastProblem.build(topo, nodes, root=0, bytes_B=nb, tree="auto", delay=delay)
            for m in METHODS:
                if m == "ilp" and prob.n > ilp_max_leaders:
                    continue  # the class model grows as leaders x racks^2: exact only on small jobs
                lim = anneal_limit if m == "anneal" else ilp_limit if m == "ilp" else None
                r = solve(prob, m, time_limit=lim, seed=0, max_sim_messages=max_sim_messages)
                w.writerow({"scenario": name, "leaders": prob.n, "delay": delay, "bytes": nb,
                            "tree": prob.schedule.kind, "method": m, "predicted_time_s": r.objective,
                            "simulated_time_s": r.metrics["simulated_time_s"],
                            "default_time_s": r.metrics["default_time_s"],
                            "gain_vs_default": r.metrics["speedup_vs_default"] - 1.0, "solve_s": round(r.wall_s, 3),
                            "status": r.status, "bound_s": r.bound, "gap": r.gap})
                out.flush()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-o", "--output")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--anneal-limit", type=float, default=5.0)
    ap.add_argument("--ilp-limit", type=float, default=10.0)
    ap.add_argument("--max-sim-messages", type=int, default=20000)
    ap.add_argument("--ilp-max-leaders", type=int, default=64)
    a = ap.parse_args()
    fh = open(a.output, "w", newline="") if a.output else sys.stdout
    try:
        run(a.quick, a.anneal_limit, a.ilp_limit, a.max_sim_messages, fh, a.ilp_max_leaders)
    finally:
        if a.output:
            fh.close()


if __name__ == "__main__":
    main()
