"""Per-link bytes and the congestion bound under static routing."""

import numpy as np
import pytest

from topoplan.analysis.linkload import congestion_bound, link_graph, link_loads, node_pair_bytes
from topoplan.core.placement import Placement, sequential
from topoplan.core.topology_io import load_topology
from topoplan.traffic.matrix import from_arrays
from topoplan.traffic.sources import load_traffic


def test_tree_uplink_is_the_bottleneck():
    t = load_topology("paper003", ["kind=tree", "ocs=null"])
    # 4 nodes of switch 0 each send 1 GB to switch 1: uplink (20 Gbps) carries 4 GB
    tr = from_arrays(256, [0, 4, 8, 12], [64, 68, 72, 76], [1e9] * 4)
    net = link_graph(t)
    loads = link_loads(t, tr, sequential(256, t), net)
    up = net.link_class == "uplink-up"
    assert loads[up].sum() == pytest.approx(4e9)
    assert loads[net.link_class == "uplink-down"].sum() == pytest.approx(4e9)
    assert congestion_bound(t, tr, sequential(256, t)) == pytest.approx(4e9 / 2.5e9)
    top = net.busiest(loads, 1)[0]
    assert top["class"] == "uplink-up" and top["link"] == "S0->top"


def test_fat_tree_uplinks_not_shared():
    t = load_topology("paper003", ["kind=fat-tree", "ocs=null"])
    tr = from_arrays(256, [0, 4, 8, 12], [64, 68, 72, 76], [1e9] * 4)
    assert congestion_bound(t, tr, sequential(256, t)) == pytest.approx(1e9 / 1.25e9)


def test_intra_node_traffic_uses_no_network_link():
    t = load_topology("paper003", ["kind=tree", "ocs=null"])
    tr = from_arrays(256, [0], [1], [1e9])
    net = link_graph(t)
    loads = link_loads(t, tr, Placement(np.zeros(256, int), np.arange(256) % 4), net)
    assert loads[np.isin(net.link_class, ["node-up", "uplink-up"])].sum() == 0
    assert loads[net.link_class == "intra"].sum() == pytest.approx(1e9)


def test_mesh_dimension_order_route():
    t = load_topology("mesh10x10x10")
    net = link_graph(t)
    ptr, links = net.routes([0], [t.n_nodes - 1])      # corner to corner: 9 hops per dimension
    assert ptr[-1] == 27
    classes = net.link_class[links]
    assert classes[:9].tolist() == ["torus-x+"] * 9 and classes[-9:].tolist() == ["torus-z+"] * 9


def test_node_pair_bytes_aggregates():
    tr = from_arrays(4, [0, 1, 2], [2, 3, 3], [5.0, 7.0, 1.0])
    s, d, b = node_pair_bytes(tr, np.array([0, 0, 1, 1]), 2)
    got = {(int(x), int(y)): float(z) for x, y, z in zip(s, d, b)}
    assert got == {(0, 1): 12.0, (1, 1): 1.0}


def test_bound_agrees_with_simulator_on_a_bulk_phase():
    """One bulk phase of a neighbor pattern: the simulated makespan is at least the bound and close to it."""
    from topoplan.sim.replay import bulk_trace
    from topoplan.sim.run import simulate

    t = load_topology("paper003", ["kind=tree", "ocs=null"])
    tr = load_traffic("neighbor2d:rows=16,cols=16,bytes=4MB")
    pl = sequential(256, t)
    bound = congestion_bound(t, tr, pl)
    span = simulate(t, bulk_trace(tr), pl)["makespan_s"]
    assert bound <= span <= 1.5 * bound
