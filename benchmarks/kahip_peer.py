"""KaHIP as a process: the placement peer that ``benchmarks/bench_placement.py`` times beside ``topoplan place``.

Reads a traffic matrix CSV (``src,dst,bytes[,msgs]``, MapLib's form), makes the undirected graph (both
directions summed, self-traffic dropped), cuts it into ``--parts`` equal parts with ``kahip.kaffpa`` (strong
configuration, imbalance 0: the reference configuration of the placement benchmark) and prints one JSON line:
the cut in bytes (both directions, as topoplan reports inter-switch bytes), the part sizes and the seconds of
the call. Standard library and ``kahip`` only, so the process is what a KaHIP user pays: the interpreter,
the module and the partitioning. Integer edge weights as ``place -m kahip`` gives them (scaled to at most
1,000; KaHIP's time grows with its weights).

    python benchmarks/kahip_peer.py ../shared/matrices/maplib/cg64.csv --parts 4
"""

from __future__ import annotations

import argparse
import csv
import json
import time

import kahip

MAX_WEIGHT = 1000


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("matrix")
    ap.add_argument("--parts", type=int, required=True)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    weight: dict[tuple[int, int], float] = {}
    n = 0
    with open(a.matrix, newline="") as f:
        for row in csv.DictReader(f):
            s, d, b = int(row["src"]), int(row["dst"]), float(row["bytes"])
            n = max(n, s + 1, d + 1)
            if s != d and b > 0:
                key = (min(s, d), max(s, d))
                weight[key] = weight.get(key, 0.0) + b
    adj: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    for (u, v), b in weight.items():
        adj[u].append((v, b))
        adj[v].append((u, b))
    top = max(weight.values())
    xadj, adjncy, adjcwgt = [0], [], []
    for u in range(n):
        for v, b in sorted(adj[u]):
            adjncy.append(v)
            adjcwgt.append(max(1, round(b / top * MAX_WEIGHT)))
        xadj.append(len(adjncy))
    t0 = time.perf_counter()
    _, part = kahip.kaffpa([1] * n, xadj, adjcwgt, adjncy, a.parts, 0.0, True, a.seed, kahip.STRONG)
    seconds = time.perf_counter() - t0
    cut = sum(b for (u, v), b in weight.items() if part[u] != part[v])
    sizes = [part.count(p) for p in range(a.parts)]
    print(json.dumps({"cut_bytes": cut, "sizes": sizes, "kaffpa_s": seconds}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
