"""Speed of Bcast reordering at 1,024 leaders: dft/bft under 1 s, anneal within 30 s.

    python benchmarks/bench_bcast.py [--json] [--anneal-limit 25]
    python benchmarks/bench_bcast.py --quick      # anneal 5 s
"""

from __future__ import annotations

import argparse
import json
import time

from topoplan.problems.bcast import BcastProblem, solve
from topoplan.problems.bcast.allocation import cluster, generate


def run(anneal_limit: float = 25.0, seed: int = 0) -> list[dict]:
    topo = cluster(128, 16)
    nodes = generate(topo, 1024, racks=128, seed=seed)
    rows = []
    for tree, nbytes in (("knomial", 1024), ("scatter-allgather", 4 << 20)):
        t0 = time.perf_counter()
        prob = BcastProblem.build(topo, placement=nodes, root=0, bytes_B=nbytes, tree=tree, delay="hops")
        build_s = time.perf_counter() - t0
        for m, target in (("default", 1.0), ("dft", 1.0), ("bft", 1.0), ("greedy", 1.0), ("anneal", 30.0)):
            r = solve(prob, m, time_limit=anneal_limit if m == "anneal" else None, seed=seed, simulate=False)
            rows.append({"tree": tree, "bytes": nbytes, "leaders": 1024, "method": m, "wall_s": r.wall_s,
                         "build_s": build_s, "target_s": target, "ok": r.wall_s < target,
                         "predicted_time_s": r.objective, "vs_default": r.metrics["speedup_vs_default"]})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--anneal-limit", type=float, default=25.0)
    ap.add_argument("--quick", action="store_true", help="anneal 5 s")
    a = ap.parse_args()
    rows = run(5.0 if a.quick else a.anneal_limit)
    if a.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"{'tree':18} {'method':8} {'wall s':>8} {'target':>7} {'pred time':>12} {'x default':>9}")
    for r in rows:
        print(f"{r['tree']:18} {r['method']:8} {r['wall_s']:8.3f} {r['target_s']:7.0f} "
              f"{r['predicted_time_s'] * 1e6:10.1f}us {r['vs_default']:9.3f} {'ok' if r['ok'] else 'SLOW'}")


if __name__ == "__main__":
    main()
