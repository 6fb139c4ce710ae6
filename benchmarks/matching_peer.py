"""A maximum-weight matching as a process: topoplan's compiled blossom or NetworkX's, on one saved graph.

``benchmarks/bench_circuits_scale.py`` saves the ``matching`` method's first graph (``n``, edge ends ``u``,
``v`` and weights ``w`` in an ``.npz``) and times this script once per implementation, each in its own
process (:mod:`processes`: wall time, CPU time, peak memory): the interpreter, NumPy, reading the graph,
the implementation's imports (Numba loading the compiled kernels; NetworkX) and the solve. Prints one JSON
line: the matching's weight, its edges and the seconds of the solve alone.

    python benchmarks/matching_peer.py graph.npz --impl topoplan
    python benchmarks/matching_peer.py graph.npz --impl networkx
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("graph")
    ap.add_argument("--impl", choices=("topoplan", "networkx"), required=True)
    a = ap.parse_args(argv)
    g = np.load(a.graph)
    n, u, v, w = int(g["n"]), g["u"], g["v"], g["w"]
    if a.impl == "topoplan":
        from topoplan.problems.circuits.blossom import matching_weight, max_weight_matching

        t0 = time.perf_counter()
        mate = max_weight_matching(n, u, v, w)
        solve_s = time.perf_counter() - t0
        weight, edges = matching_weight(mate, u, v, w), int((np.asarray(mate) >= 0).sum() // 2)
    else:
        import networkx as nx

        graph = nx.Graph()
        graph.add_weighted_edges_from(zip(u.tolist(), v.tolist(), w.tolist()))
        t0 = time.perf_counter()
        m = nx.max_weight_matching(graph, maxcardinality=False)
        solve_s = time.perf_counter() - t0
        weight, edges = float(sum(graph[x][y]["weight"] for x, y in m)), len(m)
    print(json.dumps({"impl": a.impl, "weight": float(weight), "edges": edges, "solve_s": solve_s}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
