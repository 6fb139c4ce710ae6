"""Streamed collectives in the compiled replay (``GEN`` micro-ops) and its recycled state.

An alltoall whose MPICH algorithm is the pairwise exchange or the batched
isend/irecv is generated step by step inside the loop, each message's
route composed from :meth:`topoplan.sim.network.Network.route_parts`; the results
must be those of the expanded schedule to the bit.
"""

import numpy as np
import pytest

from topoplan.core.errors import TopoplanError
from topoplan.core.placement import sequential
from topoplan.core.topology import GraphTopology
from topoplan.core.topology_io import load_topology
from topoplan.traffic.collectives import MPICHThresholds, allgather_algorithm, alltoall_algorithm, schedule
from topoplan.traffic.generators import alltoall, parse_spec
from topoplan.sim._engine import run_core
from topoplan.sim.program import GEN_PAIRWISE, GEN_RING, GEN_SPREAD, K_GEN, K_STEP, no_state
from topoplan.sim.maxmin import REL_TOL
from topoplan.sim.network import build_network
from topoplan.sim.compiler import compile_program
from topoplan.sim.replay import replay
from topoplan.sim.replay_common import compact_steps


def _run(pg, net):
    z = np.zeros(0)
    return run_core(pg["prog"], pg["route"], np.where(net.shared, net.bw_Bps, np.inf), pg["eager_B"], REL_TOL,
                    np.zeros(0, np.int64), z, z, pg["stream"], 0.0, 0, np.zeros(0, np.int64),
                    np.zeros(len(pg["prog"][0]) + 1, np.int64), np.zeros(0, np.int64), no_state())


@pytest.mark.parametrize("op,p,nbytes,throttle", [
    ("alltoall", 16, 1e6, 32),      # pairwise, a power of two: partner me ^ i
    ("alltoall", 12, 1e6, 32),      # pairwise: receive from me - i, send to me + i
    ("alltoall", 12, 8192, 32),     # one batch
    ("alltoall", 40, 8192, 8),      # five batches of 8
    ("alltoall", 40, 8192, 0),      # throttle 0: every isend/irecv at once
    ("alltoall", 3, 100, 32),       # below alltoall_min_procs: short messages go the spread way
    ("allgather", 24, 1e5, 32),     # the ring
    ("allgather", 64, 1e4, 32),     # the ring on a power of two (total over allgather_long_B)
])
def test_generated_steps_are_the_schedules(op, p, nbytes, throttle):
    from topoplan.sim._loop import _gen_count, _gen_step

    th = MPICHThresholds(alltoall_throttle=throttle)
    if op == "allgather":
        assert allgather_algorithm(p, nbytes * p, th) == "ring"
        code = GEN_RING
    else:
        code = GEN_PAIRWISE if alltoall_algorithm(p, nbytes, th) == "pairwise" else GEN_SPREAD
    block = throttle if throttle > 0 else p
    mem = np.arange(p, dtype=np.int64) * 3 + 5          # world rank of each local rank
    ep, eb, es = np.empty(2 * p, np.int64), np.empty(2 * p), np.empty(2 * p, np.int64)
    for me in range(p):
        count, peer, nb, send = compact_steps(schedule(op, p, me, 0, nbytes, thresholds=th))
        assert _gen_count(code, p, block) == len(count)
        at = 0
        for st, c in enumerate(count.tolist()):
            k = _gen_step(code, p, me, st, nbytes, block, mem, 0, ep, eb, es)
            assert k == c
            assert ep[:k].tolist() == mem[peer[at:at + c]].tolist()
            assert eb[:k].tolist() == nb[at:at + c].tolist()
            assert es[:k].tolist() == send[at:at + c].tolist()
            at += c


def _tree(kind="tree", per_switch=4, cores=1):
    return load_topology("paper001-16x16", [f"kind={kind}", "ocs=null", f"nodes_per_switch={per_switch}",
                                            f"cores_per_node={cores}"])


def _graph():
    sw = ("s0", "s1", "s2", "top")
    hosts = tuple(f"h{i}" for i in range(12))
    return GraphTopology(switches=sw, hosts=hosts, host_switch=tuple(i // 4 for i in range(12)),
                         host_bw_Bps=(1.25e9,) * 12, links=((0, 3, 2.5e9), (1, 3, 2.5e9), (2, 3, 5e9), (0, 1, 1e9)))


@pytest.mark.parametrize("topo,spec", [
    (_tree(), "alltoall:np=48,bytes=1MB,iters=2,compute=0.001"),        # pairwise, computation between calls
    (_tree(), "alltoall:np=64,bytes=20KB,iters=2"),                     # batched isend/irecv, eager
    (_tree(cores=2), "alltoall:np=40,bytes=1MB"),                       # two ranks a node: intra-node links
    (_tree("fat-tree"), "alltoall:np=32,bytes=16KB"),                   # fat-pipe uplinks: capped flows
    (_graph(), "alltoall:np=12,bytes=2MB,iters=2"),                     # a switch graph
])
def test_streamed_replay_is_the_expanded_one_to_the_bit(topo, spec):
    trace = parse_spec(spec)
    net = build_network(topo)
    pl = sequential(trace.n_ranks, topo)
    a = compile_program(trace, net, pl)
    b = compile_program(trace, net, pl, stream=False)
    assert (a["prog"][2] == K_GEN).sum() == trace.n_ranks * trace.op_counts()["alltoall"] // trace.n_ranks
    assert (b["prog"][2] == K_GEN).sum() == 0 and (b["prog"][2] == K_STEP).any()
    ra, rb = _run(a, net), _run(b, net)
    np.testing.assert_array_equal(ra[0], rb[0])           # every rank's finish
    assert ra[3] == rb[3] == trace.op_counts()["alltoall"] * (trace.n_ranks - 1)   # messages
    assert ra[4] == rb[4] and ra[5] == rb[5]              # events, flows
    np.testing.assert_array_equal(ra[6], rb[6])           # bytes per link


def test_streamed_replay_agrees_with_the_reference():
    topo = _tree(per_switch=2)
    trace = parse_spec("alltoall:np=24,bytes=256KB,iters=2")
    net = build_network(topo)
    pl = sequential(24, topo)
    fast = replay(trace, net, pl, method="compiled")
    ref = replay(trace, net, pl, method="python")
    np.testing.assert_allclose(fast.rank_finish_s, ref.rank_finish_s, rtol=1e-9)
    np.testing.assert_allclose(fast.link_bytes, ref.link_bytes, rtol=1e-12)
    assert fast.n_messages == ref.n_messages == 2 * 24 * 23


@pytest.mark.parametrize("topo", [_tree(), _tree("fat-tree", cores=2), _graph()], ids=["tree", "fat-tree", "graph"])
def test_route_parts_compose_the_packet_routes(topo):
    net = build_network(topo)
    sw, up, down, intra, mid_ptr, mid_links = net.route_parts()
    n, n_sw = topo.n_nodes, int(sw.max()) + 1
    src, dst = np.divmod(np.arange(n * n), n)
    ptr, links = net.eps_routes(src, dst)
    for s, d in zip(src.tolist(), dst.tolist()):
        if s == d:
            want = [intra[s]]
        else:
            k = sw[s] * n_sw + sw[d]
            want = [up[s], *mid_links[mid_ptr[k]:mid_ptr[k + 1]].tolist(), down[d]]
        assert links[ptr[s * n + d]:ptr[s * n + d + 1]].tolist() == want


def test_no_route_parts_where_routes_do_not_factor():
    assert build_network(load_topology("mesh10x10x10")).route_parts() is None          # a torus
    hybrid = load_topology("paper003")
    net = build_network(hybrid, {"circuits": [[0, 16]], "forwarding": {"0": {"1": 16}}})
    assert net.route_parts(1.0) is not None                      # below the threshold: packet routes
    assert net.route_parts(net.threshold_B) is None              # may be relayed over a circuit
    assert build_network(_tree()).route_parts(max_pairs=10) is None


def test_alltoall_over_circuits_is_expanded():
    topo = load_topology("paper003", ["ocs.nodes_per_switch=1"])
    net = build_network(topo, {"circuits": [[0, 16]], "forwarding": {"0": {"1": 16}, "1": {"0": 0}}})
    trace = parse_spec("alltoall:np=32,bytes=4MB")
    pg = compile_program(trace, net, sequential(32, topo))
    assert (pg["prog"][2] == K_GEN).sum() == 0


def test_too_many_alltoall_messages_are_refused_where_expanded(monkeypatch):
    import topoplan.traffic.limits as limits
    from topoplan.traffic.sources import load_traffic

    monkeypatch.setattr(limits, "MAX_TRACE_ROWS", 1000)
    trace = alltoall(40, 1e6)                                    # 1,560 messages, 40 rows: generated
    topo = _tree(per_switch=4)
    net = build_network(topo)
    with pytest.raises(TopoplanError, match=r"alltoall:np=40,bytes=1MB: its collective calls are 1,560 "
                                            r"point-to-point messages, over the limit of 1,000 held at once"):
        load_traffic("alltoall:np=40,bytes=1MB")
    with pytest.raises(TopoplanError, match=r"over the limit of 1,000 held at once"):
        compile_program(trace, net, sequential(40, topo), stream=False)
    with pytest.raises(TopoplanError, match=r"over the limit of 1,000 held at once"):
        replay(trace, net, sequential(40, topo), method="python")      # the reference expands every call
    res = replay(trace, net, sequential(40, topo), method="compiled")    # streamed: nothing held
    assert res.n_messages == 1560


def test_simulate_cli_needs_no_traffic_for_a_streamed_alltoall(monkeypatch, run_cli):
    """The traffic (one entry per rank pair) is made only when a plan's inputs or switch loads need it."""
    import topoplan.traffic.limits as limits

    monkeypatch.setattr(limits, "MAX_TRACE_ROWS", 1000)
    args = ["simulate", "-t", "paper001-16x16", "--set", "kind=tree", "--set", "ocs=null", "--set",
            "nodes_per_switch=4", "-T", "alltoall:np=40,bytes=1MB", "--json"]
    code, out, err = run_cli(*args)
    assert code == 0, err
    assert '"n_messages": 1560' in out
    code, out, err = run_cli(*args[:-1], "--timeline", "1s")   # the switch loads need the traffic
    assert code == 2 and "1,560 point-to-point messages, over the limit of 1,000" in err and not out


def _allgathers(p, nbytes, iters=2):
    from topoplan.traffic.trace import Trace

    rec = [(r, "allgather", -1, nbytes, -1, p, 0.0, 0.0) for r in range(p) for _ in range(iters)]
    return Trace.from_records(rec, p)


@pytest.mark.parametrize("p,nbytes,cores", [(24, 100_000, 1), (32, 40_000.4, 2)])
def test_streamed_ring_allgather_is_the_expanded_one_to_the_bit(p, nbytes, cores):
    """(Fractional bytes are rounded as the schedule rounds them.)"""
    trace = _allgathers(p, nbytes)
    topo = _tree(per_switch=2, cores=cores)
    net = build_network(topo)
    pl = sequential(p, topo)
    a, b = compile_program(trace, net, pl), compile_program(trace, net, pl, stream=False)
    assert (a["prog"][2] == K_GEN).sum() == 2 * p
    ra, rb = _run(a, net), _run(b, net)
    np.testing.assert_array_equal(ra[0], rb[0])
    np.testing.assert_array_equal(ra[6], rb[6])
    assert ra[3] == rb[3] == 2 * p * (p - 1) and ra[4] == rb[4]


def test_ring_allgather_and_bcast_ring_count_against_the_limit(monkeypatch):
    import topoplan.traffic.limits as limits
    from topoplan.traffic.collectives import peer_step_messages
    from topoplan.traffic.trace import Trace

    assert peer_step_messages(_allgathers(24, 100_000)) == 2 * 24 * 23
    bc = Trace.from_records([(r, "bcast", -1, 4e6, 0, 40, 0.0, 0.0) for r in range(40)], 40)   # scatter + ring
    assert peer_step_messages(bc) == 40 * 39
    monkeypatch.setattr(limits, "MAX_TRACE_ROWS", 1000)
    topo = _tree(per_switch=4)
    with pytest.raises(TopoplanError, match=r"its collective calls are 1,560 point-to-point messages"):
        replay(bc, build_network(topo), sequential(40, topo), method="compiled")    # a Bcast ring is expanded
    res = replay(_allgathers(40, 100_000, iters=1), build_network(topo), sequential(40, topo), method="compiled")
    assert res.n_messages == 1560                                                 # a ring allgather streams


@pytest.mark.parametrize("n_msgs,nbytes", [(3000, 1000.0), (700, 1e6)], ids=["eager", "rendezvous"])
def test_tables_grown_in_the_middle_of_a_rank_run(n_msgs, nbytes):
    """Thousands of isends in one run of a rank: the loop stops for more request, message and flow slots
    (several times) and resumes that rank where it was; times equal the reference's."""
    from topoplan.traffic.trace import Trace

    rec = [(0, "isend", 1 + k % 3, nbytes, -1, 4, 0.0, 0.0, -1, k) for k in range(n_msgs)]
    rec += [(0, "waitall", -1, 0, -1, 4, 0.0, 0.0)]
    for r in (1, 2, 3):
        ks = [k for k in range(n_msgs) if 1 + k % 3 == r]
        rec += [(r, "irecv", 0, nbytes, -1, 4, 0.0, 0.0, -1, k) for k in ks]
        rec += [(r, "waitall", -1, 0, -1, 4, 0.0, 0.0)]
    trace = Trace.from_records(rec, 4)
    topo = _tree(per_switch=2)
    net = build_network(topo)
    fast = replay(trace, net, sequential(4, topo), method="compiled")
    ref = replay(trace, net, sequential(4, topo), method="python")
    assert fast.n_messages == ref.n_messages == n_msgs
    np.testing.assert_allclose(fast.rank_finish_s, ref.rank_finish_s, rtol=1e-9)
    np.testing.assert_allclose(fast.link_bytes, ref.link_bytes, rtol=1e-12)


def test_streamed_alltoall_on_sub_communicators():
    """Two communicators, members out of world order (local rank i is world rank members[i]), then one
    alltoall on the world: the streamed replay maps every peer through its communicator as the expansion does."""
    from topoplan.traffic.trace import Trace

    evens, odds = list(range(0, 24, 2))[::-1], list(range(1, 24, 2))
    rec = []
    for r in range(24):
        comm = 1 if r % 2 == 0 else 2
        rec.append((r, "alltoall", -1, 300_000, -1, 12, 0.0, 0.0, comm))
        rec.append((r, "alltoall", -1, 20_000, -1, 24, 0.0, 0.0, -1))
    trace = Trace.from_records(sorted(rec, key=lambda x: x[0]), 24, communicators={1: evens, 2: odds})
    topo = _tree(per_switch=2)
    net = build_network(topo)
    pl = sequential(24, topo)
    a, b = compile_program(trace, net, pl), compile_program(trace, net, pl, stream=False)
    assert (a["prog"][2] == K_GEN).sum() == 48
    ra, rb = _run(a, net), _run(b, net)
    np.testing.assert_array_equal(ra[0], rb[0])
    np.testing.assert_array_equal(ra[6], rb[6])
    assert ra[3] == rb[3] == 24 * 11 + 24 * 23


def test_a_rank_missing_from_a_streamed_alltoall_is_named():
    from topoplan.traffic.trace import Trace

    rec = [(r, "alltoall", -1, 1e6, -1, 4, 0.0, 0.0) for r in range(3)]    # rank 3 never calls it
    trace = Trace.from_records(rec, 4)
    topo = _tree(per_switch=2)
    pg = compile_program(trace, build_network(topo), sequential(4, topo))
    assert (pg["prog"][2] == K_GEN).sum() == 3
    with pytest.raises(TopoplanError, match=r"deadlock or unmatched receive: 3 rank\(s\) blocked: "
                                            r"rank 0 in call 0 \(alltoall peer -1\)"):
        replay(trace, build_network(topo), sequential(4, topo), method="compiled")
