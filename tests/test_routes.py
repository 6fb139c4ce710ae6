"""One network model: the bounds' per-link bytes are the simulator's, link by link, on every topology kind.

The placement bound (:func:`topoplan.analysis.linkload.link_loads`) and the circuit
bound (:func:`topoplan.problems.circuits.bound.evaluate`) route with the simulator's
:class:`topoplan.sim.network.Network` and number links as it does, so on bulk traffic
(one phase of a communication matrix) their per-link bytes equal the
``link_bytes`` of a replay.

:func:`topoplan.sim.replay.bulk_trace` merges all messages of a rank pair into one
message per phase, while the circuit problem classifies each traffic record
by its own size (large messages may take circuits). The matrices here have
one record per ordered rank pair, so a pair's messages are all large or all
small and both sides see the same sizes.
"""

import numpy as np
import pytest

from topoplan.problems.circuits import CircuitProblem, solve, validate_plan_dict
from topoplan.problems.circuits.bound import evaluate
from topoplan.plans.circuits import array_from_tables
from topoplan.problems.circuits.forwarding import Routes
from topoplan.analysis.linkload import link_graph, link_loads
from topoplan.core.placement import sequential
from topoplan.core.topology_io import load_topology, topology_from_dict
from topoplan.traffic.matrix import from_arrays
from topoplan.sim.network import build_network
from topoplan.sim.replay import bulk_trace, replay

GRAPH = {"kind": "graph", "cores_per_node": 2,
         "switches": ["l0", "l1", "l2", "top", "top2"],
         "hosts": [{"name": f"a{i}", "switch": f"l{min(i // 3, 2)}", "bw": "10Gbps"} for i in range(8)],
         "links": [{"a": "l0", "b": "top", "bw": "40Gbps"}, {"a": "l1", "b": "top", "bw": "20Gbps"},
                   {"a": "l1", "b": "top", "bw": "20Gbps"},  # parallel: the first carries the routes
                   {"a": "top", "b": "top2", "bw": "40Gbps"}, {"a": "l2", "b": "top2", "bw": "10Gbps"}]}

TOPOLOGIES = {
    "tree": lambda: load_topology("paper003", ["kind=tree", "ocs=null"]),
    "fat-tree": lambda: load_topology("paper003", ["kind=fat-tree", "ocs=null"]),
    "hybrid": lambda: load_topology("paper003"),
    "torus": lambda: topology_from_dict({"kind": "torus", "dims": [4, 3, 2], "bw": "1GB/s", "cores_per_node": 2}),
    "mesh": lambda: topology_from_dict({"kind": "mesh", "dims": [3, 4], "bw": "1GB/s", "injection_bw": "2GB/s",
                                        "cores_per_node": 2}),
    "graph": lambda: topology_from_dict(GRAPH),
}


def random_matrix(topo, seed=7, n_msgs=400, small_B=500.0, large_B=(64e3, 1e6)):
    """One record per ordered rank pair: random pairs with small and large sizes, plus pairs inside nodes."""
    rng = np.random.default_rng(seed)
    cores = topo.cores_per_node
    n_ranks = topo.n_nodes * cores
    src = rng.integers(0, n_ranks, n_msgs)
    dst = rng.integers(0, n_ranks, n_msgs)
    first = np.arange(0, n_ranks, cores)[: n_ranks // cores: 3]   # ranks r and r + 1 share a node (sequential)
    src, dst = np.concatenate([src, first]), np.concatenate([dst, first + 1])
    keep = src != dst
    _, one = np.unique(src[keep] * n_ranks + dst[keep], return_index=True)
    src, dst = src[keep][one], dst[keep][one]
    size = np.where(rng.random(len(src)) < 0.4, small_B, rng.choice(large_B, len(src)))
    tr = from_arrays(n_ranks, src, dst, size)
    assert len(tr.src) == len(src)    # one record per rank pair
    pl = sequential(n_ranks, topo)
    node = pl.rank_to_node
    assert (node[tr.src] == node[tr.dst]).any() and (tr.msg_bytes < small_B * 2).any() and (tr.msg_bytes > 1e4).any()
    return tr, pl


def simulated_link_bytes(topo, traffic, placement, plan=None, **kw):
    net = build_network(topo, plan, **kw)
    return net, np.asarray(replay(bulk_trace(traffic, 1), net, placement).link_bytes)


@pytest.mark.parametrize("kind", ["tree", "fat-tree", "hybrid", "torus", "mesh", "graph"])
def test_placement_bound_bytes_are_the_simulated_bytes(kind):
    """Without circuits (a hybrid's EPS part): link_loads == replay link bytes, link by link."""
    topo = TOPOLOGIES[kind]()
    tr, pl = random_matrix(topo)
    loads = link_loads(topo, tr, pl)
    net, sim = simulated_link_bytes(topo, tr, pl)
    assert len(loads) == net.n_links == len(sim)
    assert loads == pytest.approx(sim, rel=1e-12, abs=1e-6)
    assert sim.sum() > 0 and (sim[net.link_class == "intra"] > 0).any()
    g = link_graph(topo)
    assert g.names == net.link_name and (g.link_class == net.link_class).all()
    # unshared links (fat-tree uplinks) never bind the bound: infinite bandwidth there
    assert np.array_equal(g.bw_Bps, np.where(net.shared, net.bw_Bps, np.inf))


def relay_plan(topo):
    """A hand-made plan: relays towards switch 1, two circuits towards switch 3 (via switch 1), a fallback."""
    plan = {"circuits": [[0, 16], [17, 48], [1, 32]], "forwarding": {}}
    fwd = plan["forwarding"]
    for n in range(2, 16):
        fwd[str(n)] = {"1": 0, "3": 0} if n % 3 else {"1": 0}   # n % 3 == 0: no entry for S3, falls back
    fwd["0"] = {"1": 16, "3": 16}
    fwd["16"] = {"3": 17}           # EPS hop to relay 17, then its circuit to switch 3
    fwd["17"] = {"3": 48}
    fwd["4"]["2"] = 1               # node 4 -> relay 1 => 32
    fwd["1"] = {"2": 32}
    validate_plan_dict(plan, topo)
    return plan


@pytest.mark.parametrize("relay", ["pipelined", "store-and-forward"])
@pytest.mark.parametrize("which", ["greedy", "hand"])
def test_circuit_bound_bytes_are_the_simulated_bytes(which, relay):
    topo = TOPOLOGIES["hybrid"]()
    tr, pl = random_matrix(topo, seed=3, n_msgs=600)
    problem = CircuitProblem.build(topo, tr, pl)
    assert 500.0 < problem.threshold_B < 64e3 and len(problem.large_bytes)
    plan = solve(problem, "greedy").plan if which == "greedy" else relay_plan(topo)
    circuits = [tuple(c) for c in plan["circuits"]]
    ev = evaluate(problem, circuits, array_from_tables(plan["forwarding"], topo.n_nodes, topo.n_switches))
    net, sim = simulated_link_bytes(topo, tr, pl, plan, threshold_B=problem.threshold_B, model={"relay": relay})
    assert len(ev.loads_B) == net.n_links == problem.n_fixed_links() + 2 * len(circuits)
    assert ev.loads_B == pytest.approx(sim, rel=1e-12, abs=1e-6)
    assert [problem.link_name(k, circuits) for k in range(net.n_links)] == net.link_name
    assert ev.ocs_bytes > 0 and ev.metrics()["bottleneck"] in net.link_name
    if which == "hand":
        assert ev.fallback_bytes > 0 and ev.relayed_bytes > 0 and ev.max_hops == 2
    m = ev.metrics()
    t = ev.times_s()
    node = np.isin(net.link_class, ["node-up", "node-down"])
    assert m["node_link_max_s"] == t[node].max() and m["circuit_max_s"] == t[net.link_class == "ocs"].max()
    assert m["intra_node_max_s"] == t[net.link_class == "intra"].max()


@pytest.mark.parametrize("kind", ["tree", "fat-tree", "hybrid", "torus", "mesh", "graph"])
def test_one_copy_of_the_eps_routes(kind):
    """The placement bound's routes are the simulator's: the same arrays for random pairs."""
    topo = TOPOLOGIES[kind]()
    rng = np.random.default_rng(11)
    src, dst = rng.integers(0, topo.n_nodes, 500), rng.integers(0, topo.n_nodes, 500)
    ptr, links = link_graph(topo).routes(src, dst)
    ptr2, links2 = build_network(topo).eps_routes(src, dst)
    assert np.array_equal(ptr, ptr2) and np.array_equal(links, links2)


def test_one_walk_through_forwarding_tables():
    """The circuit bound's routes (Routes) and the simulator's relay chains are the same walk."""
    topo = TOPOLOGIES["hybrid"]()
    plan = relay_plan(topo)
    circuits = [tuple(c) for c in plan["circuits"]]
    tr, pl = random_matrix(topo, seed=3)
    problem = CircuitProblem.build(topo, tr, pl)
    routes = Routes(problem, circuits, array_from_tables(plan["forwarding"], topo.n_nodes, topo.n_switches))
    net = build_network(topo, plan, model={"relay": "pipelined"})
    sw = topo.node_switch()
    for a, b in [(2, 17), (3, 50), (4, 33), (5, 49), (0, 16), (1, 40)]:
        links, end, fb, _, _ = routes.route(a, int(sw[b]))
        _, _, _, ptr, chain = net.message_segments([a], [b], [1e6])
        delivery = [] if end == b else net.eps_routes([end], [b])[1].tolist()[(3 if fb else 0):]
        assert chain.tolist() == list(links) + delivery
