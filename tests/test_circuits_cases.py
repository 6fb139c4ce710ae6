"""Small hybrid instances shared by the circuit tests (hand-checkable sizes; no tests here)."""

import numpy as np

from topoplan.problems.circuits import CircuitProblem
from topoplan.core.topology_io import load_topology
from topoplan.traffic.matrix import from_arrays


def hybrid(switches=2, per_switch=3, ocs_per_switch=2, ports=1, down="10Gbps", up="10Gbps", ocs_bw="20Gbps",
           node_link=None, ocs_nodes=None):
    ocs = {"ports_per_node": ports, "bw": ocs_bw, "latency": "500ns"}
    if ocs_nodes is not None:
        ocs["nodes"] = list(ocs_nodes)
    else:
        ocs["nodes_per_switch"] = ocs_per_switch
    if node_link:
        ocs["node_link_bw"] = node_link
    return load_topology({"kind": "hybrid", "switches": switches, "nodes_per_switch": per_switch,
                          "cores_per_node": 1, "eps": {"down_bw": down, "up_bw": up}, "ocs": ocs})


def problem(topo, pairs, threshold=1000.0, **kw):
    """``pairs``: (src node, dst node, bytes) with one rank per node (rank = node id)."""
    src, dst, by = zip(*pairs)
    tr = from_arrays(topo.n_nodes, src, dst, by)
    return CircuitProblem.build(topo, tr, threshold_B=threshold, **kw)


def random_problem(seed, switches=3, per_switch=3, ocs_per_switch=2, n_msgs=14, **kw):
    rng = np.random.default_rng(seed)
    topo = hybrid(switches, per_switch, ocs_per_switch, up=kw.pop("up", "5Gbps"))
    n = topo.n_nodes
    pairs = []
    while len(pairs) < n_msgs:
        a, b = (int(x) for x in rng.integers(0, n, 2))
        if a != b:
            pairs.append((a, b, float(rng.integers(1, 9)) * 1e6))
    return problem(topo, pairs, **kw)
