import numpy as np
import pytest

from topoplan.core.errors import TopoplanError
from topoplan.core.topology import GraphTopology
from topoplan.core.topology_io import load_topology, topology_from_dict
from topoplan.sim.maxmin import simulate_flows
from topoplan.sim.network import build_network


def classes(net, links):
    return [str(net.link_class[l]) for l in links]


def test_tree_routes_and_latency():
    t = load_topology("paper003", ["kind=tree", "ocs=null"])
    net = build_network(t)
    ptr, links = net.eps_routes(np.array([0, 0, 0]), np.array([0, 1, 16]))
    assert classes(net, links[ptr[0]:ptr[1]]) == ["intra"]
    assert classes(net, links[ptr[1]:ptr[2]]) == ["node-up", "node-down"]
    assert classes(net, links[ptr[2]:ptr[3]]) == ["node-up", "uplink-up", "uplink-down", "node-down"]
    # 003 Table 3, route E=>J: 2 down links + 2 up links; each switch forwards the first MTU packet
    lat = net.route_latency(ptr[2:4] - ptr[2], links[ptr[2]:ptr[3]], [4e6])[0]
    mtu = 4096
    assert lat == pytest.approx(4 * 500e-9 + mtu / 2.5e9 + mtu / 2.5e9 + mtu / 1.25e9)


def test_fat_tree_uplinks_do_not_share():
    net = build_network(load_topology("paper003", ["kind=fat-tree", "ocs=null"]))
    up = net.link_class == "uplink-up"
    assert not net.shared[up].any() and net.shared[net.link_class == "node-up"].all()


def test_hybrid_relay_chain_follows_forwarding():
    t = load_topology("paper003")  # OCS nodes 0-7 under switch 0, 16-23 under switch 1, ...
    plan = {"circuits": [[0, 16]], "forwarding": {"1": {"1": 0}, "0": {"1": 16}}}
    net = build_network(t, plan, model={"relay": "store-and-forward"})
    mp, ss, sd, ptr, links = net.message_segments(np.array([1, 1, 0]), np.array([17, 17, 16]),
                                                  np.array([4e6, 100.0, 4e6]))
    # large 1 -> 17: 1 -> 0 (EPS), 0 => 16 (circuit), 16 -> 17 (EPS); small: EPS uplinks; 0 -> 16 direct circuit
    assert mp.tolist() == [0, 3, 4, 5]
    assert list(zip(ss.tolist(), sd.tolist())) == [(1, 0), (0, 16), (16, 17), (1, 17), (0, 16)]
    assert classes(net, links[ptr[1]:ptr[2]]) == ["ocs"]
    assert classes(net, links[ptr[3]:ptr[4]]) == ["node-up", "uplink-up", "uplink-down", "node-down"]
    # pipelined relays (the default): the same chain as one segment over the concatenated route
    pip = build_network(t, plan)
    mp2, ss2, sd2, ptr2, links2 = pip.message_segments(np.array([1, 1, 0]), np.array([17, 17, 16]),
                                                       np.array([4e6, 100.0, 4e6]))
    assert mp2.tolist() == [0, 1, 2, 3] and list(zip(ss2.tolist(), sd2.tolist())) == [(1, 17), (1, 17), (0, 16)]
    assert links2[ptr2[0]:ptr2[1]].tolist() == links[ptr[0]:ptr[3]].tolist()


def test_hybrid_without_route_falls_back_to_uplinks():
    t = load_topology("paper003")
    net = build_network(t, {"circuits": [[0, 16]], "forwarding": {}})
    mp, ss, sd, ptr, links = net.message_segments(np.array([1]), np.array([33]), np.array([4e6]))
    assert classes(net, links) == ["node-up", "uplink-up", "uplink-down", "node-down"]


def test_forwarding_loop_and_bad_next_hop_are_errors():
    t = load_topology("paper003")
    net = build_network(t, {"circuits": [[0, 16]], "forwarding": {"1": {"1": 2}, "2": {"1": 1}}})
    with pytest.raises(TopoplanError, match="routing loop"):
        net.message_segments(np.array([1]), np.array([17]), np.array([4e6]))
    net = build_network(t, {"circuits": [[0, 16]], "forwarding": {"1": {"1": 40}}})
    with pytest.raises(TopoplanError, match="not a neighbour"):
        net.message_segments(np.array([1]), np.array([17]), np.array([4e6]))


def test_torus_dimension_order_both_directions():
    t = topology_from_dict({"kind": "torus", "dims": [4, 3], "wrap": [True, False], "bw": "1GB/s"})
    net = build_network(t)
    ptr, links = net.eps_routes(np.array([0, 0, 3, 11]), np.array([3, 8, 0, 0]))
    assert classes(net, links[ptr[0]:ptr[1]]) == ["torus-x-"]          # the wrap link, one hop
    assert classes(net, links[ptr[1]:ptr[2]]) == ["torus-y+", "torus-y+"]
    assert classes(net, links[ptr[2]:ptr[3]]) == ["torus-x+"]
    assert classes(net, links[ptr[3]:ptr[4]]) == ["torus-x+", "torus-y-", "torus-y-"]  # x first: 3 -> 0 wraps +


def test_mesh_has_no_wrap_links():
    t = topology_from_dict({"kind": "mesh", "dims": [3, 3], "bw": "1GB/s"})
    net = build_network(t)
    assert (net.link_class == "torus-x+").sum() == 6 and (net.link_class == "torus-y-").sum() == 6
    ptr, links = net.eps_routes(np.array([0]), np.array([2]))
    assert classes(net, links) == ["torus-x+", "torus-x+"]


def test_graph_shortest_path(tmp_path):
    p = tmp_path / "t.conf"
    p.write_text("SwitchName=l0 Nodes=a[0-1]\nSwitchName=l1 Nodes=a[2-3]\nSwitchName=top Switches=l[0-1]\n"
                 "SwitchName=l2 Nodes=a4\nSwitchName=top2 Switches=l2,top\n")
    t = load_topology(p)
    net = build_network(t)
    ptr, links = net.eps_routes(np.array([0]), np.array([4]))
    assert [net.link_name[l] for l in links] == ["a0->l0", "l0->top", "top->top2", "top2->l2", "l2->a4"]


@pytest.mark.parametrize("trunk_bw", [(1e9, 1e9), (1e9, 1e9, 1e9), (5e8, 2e9)])
def test_parallel_links_carry_routes_by_destination(trunk_bw):
    # two switches joined by a trunk of k links; hosts 0-1 under s0, 2-7 under s1
    k = len(trunk_bw)
    t = GraphTopology(switches=("s0", "s1"), hosts=tuple(f"h{i}" for i in range(8)), host_switch=(0, 0) + (1,) * 6,
                      host_bw_Bps=(4e9,) * 8, links=tuple((0, 1, bw) for bw in trunk_bw), latency_s=0.0)
    net = build_network(t)
    names = [f"s0->s1{'' if j == 0 else f'#{j + 1}'}" for j in range(k)]
    assert all(n in net.link_name for n in names) and net.route_parts(1e6) is None
    src, dst = np.zeros(6, dtype=np.int64), np.arange(2, 8)
    ptr, links = net.eps_routes(src, dst)
    trunk = [net.link_name[l] for l in links[ptr[:-1] + 1]]      # each route's middle link
    assert trunk == [names[d % k] for d in dst.tolist()]
    # k flows to destinations d, d + 1, ... take the k links at once: the trunk's rate, not one link's
    ptr, links = net.eps_routes(np.ones(k, dtype=np.int64), np.arange(2, 2 + k))
    res = simulate_flows(net.linkset(), ptr, links, np.zeros(k), np.full(k, 1e9))
    want = [1e9 / trunk_bw[d % k] for d in range(2, 2 + k)]
    assert res.finish_s.tolist() == pytest.approx(want, rel=1e-9)


def test_a_plans_tables_read_as_the_entry_by_entry_conversion_reads_them():
    """CircuitPlan.from_dict and the next-hop table: plain int next hops take the compiled path, anything
    else (strings, floats, bools, int keys) entry by entry; the two agree, and entries outside the topology
    are left out of the table."""
    from topoplan.core.topology_io import load_topology
    from topoplan.plans.circuits import array_from_tables
    from topoplan.sim.network import CircuitPlan

    topo = load_topology("paper003", ["ocs.nodes_per_switch=1"])   # OCS nodes 0, 16, 32, 48
    fwd = {"0": {"1": 16, "2": 16}, "1": {"1": 0, "3": 0}, "2": {"1": "0", "2": 0.0}, 3: {1: True},
           "16": {}, "70": {"1": 0}, "4": {"9": 0}}
    plan = CircuitPlan.from_dict({"circuits": [[0, 16]], "forwarding": fwd})
    expect = {int(n): {int(s): int(h) for s, h in row.items()} for n, row in fwd.items()}
    assert plan.forwarding == expect
    assert all(type(k) is int and type(v) is int for row in plan.forwarding.values() for k, v in row.items())
    nh = build_network(topo, plan).next_hop_table()
    inside = {n: {s: h for s, h in row.items() if s < topo.n_switches} for n, row in expect.items()
              if n < topo.n_nodes}
    assert nh.tolist() == array_from_tables(inside, topo.n_nodes, topo.n_switches).tolist()
