"""Simulator benchmarks: the issue's workloads, timed, with SimGrid 3.32's figures beside them.

Run: python benchmarks/bench_sim.py [--json]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from sim.flowfile import load_scenario
from sim.maxmin import simulate_flows

SIMGRID_S = {"a2a-16x16-1MB": "about 12", "random-10000": "16-30"}


def tree(leaves, per, down=1.25e9, up=2.5e9, flows=()):
    return {"tree": {"leaves": leaves, "hosts_per_leaf": per, "down_bw": down, "up_bw": up,
                     "down_lat": 1e-6, "up_lat": 1e-6}, "flows": list(flows)}


def a2a(n=256, size=1e6):
    return tree(16, 16, flows=[{"id": k, "src": f"h{i}", "dst": f"h{j}", "bytes": size, "start_s": 0.0}
                               for k, (i, j) in enumerate((i, j) for i in range(n) for j in range(n) if i != j)])


def random_flows(n=10000, seed=0):
    rng = np.random.default_rng(seed)
    src = rng.integers(0, 256, n); dst = (src + rng.integers(1, 256, n)) % 256
    size = np.exp(rng.uniform(np.log(1e3), np.log(1e8), n))
    start = rng.uniform(0, 0.1, n)
    return tree(16, 16, flows=[{"id": k, "src": f"h{a}", "dst": f"h{b}", "bytes": float(s), "start_s": float(t)}
                               for k, (a, b, s, t) in enumerate(zip(src, dst, size, start))])


def replay_cg(np_):
    from planner.generators import parse_spec
    from planner.placement import sequential
    from planner.topology_io import load_topology
    from sim.run import simulate

    topo = load_topology("paper001-16x16", ["kind=tree", "ocs=null"])
    trace = parse_spec(f"npb:kernel=cg,class=C,np={np_},iters=5")
    t0 = time.perf_counter()
    res = simulate(topo, trace, sequential(np_, topo))
    return time.perf_counter() - t0, res["n_flows"], res["n_events"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = []
    for name, doc in (("a2a-16x16-1MB", a2a()), ("random-10000", random_flows())):
        links, ptr, rl, ids, start, size = load_scenario(doc)
        t0 = time.perf_counter()
        res = simulate_flows(links, ptr, rl, start, size)
        wall = time.perf_counter() - t0
        rows.append({"workload": name, "flows": len(size), "events": res.n_events, "wall_s": round(wall, 3),
                     "flows_per_s": round(len(size) / wall), "simgrid_s": SIMGRID_S[name]})
    for n in (128, 256):
        try:
            wall, flows, events = replay_cg(n)
            rows.append({"workload": f"replay-cg-C-{n}-iters5", "flows": flows, "events": events,
                         "wall_s": round(wall, 3), "flows_per_s": round(flows / wall), "simgrid_s": "-"})
        except ImportError as exc:  # generators not available
            rows.append({"workload": f"replay-cg-C-{n}", "error": str(exc)})
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        for r in rows:
            print("  ".join(f"{k}={v}" for k, v in r.items()))


if __name__ == "__main__":
    main()
