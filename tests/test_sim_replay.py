import numpy as np
import pytest

from topoplan.core.errors import TopoplanError
from topoplan.core.placement import from_nodes, sequential
from topoplan.core.topology_io import topology_from_dict
from topoplan.traffic.trace import Trace
from topoplan.sim.network import build_network
from topoplan.sim.replay import replay

TREE = {"kind": "tree", "switches": 2, "nodes_per_switch": 2, "cores_per_node": 1,
        "eps": {"down_bw": "8Gbps", "up_bw": "8Gbps", "down_latency": "0ns", "mtu": "1B"},
        "node": {"intra_bw": "8Gbps", "intra_latency": "0ns"}}


def rec(*rows, n=4):
    return Trace.from_records([r + (-1, -1) if len(r) == 8 else r for r in rows], n)


def test_blocking_send_recv_rendezvous():
    t = topology_from_dict(TREE)  # 1 GB/s links, no latency; MTU 1 B makes store-and-forward negligible
    tr = rec((0, "send", 1, 1e9, -1, 4, 0, 0), (1, "recv", 0, 1e9, -1, 4, 0, 0))
    res = replay(tr, build_network(t), sequential(4, t))
    assert res.makespan_s == pytest.approx(1.0, rel=1e-6)
    assert res.rank_finish_s[0] == pytest.approx(1.0, rel=1e-6)  # rendezvous: the send waits for the transfer


def test_eager_send_returns_at_once():
    t = topology_from_dict(TREE)
    tr = rec((0, "send", 1, 1000, -1, 4, 0, 0), (1, "recv", 0, 1000, -1, 4, 0, 0))
    res = replay(tr, build_network(t), sequential(4, t))
    assert res.rank_finish_s[0] == 0.0 and res.rank_finish_s[1] == pytest.approx(1e-6 + 1e-9, rel=1e-9)  # + one MTU at the switch


def test_computation_gap_and_late_receiver():
    t = topology_from_dict(TREE)
    # rank 1 computes 2 s (gap between its calls) before posting the receive
    tr = rec((0, "send", 1, 1e9, -1, 4, 0, 0),
             (1, "irecv", 2, 8, -1, 4, 0, 0), (2, "send", 1, 8, -1, 4, 0, 0),
             (1, "wait", 2, 8, -1, 4, 0, 0),
             (1, "recv", 0, 1e9, -1, 4, 2.0, 2.0))
    res = replay(tr, build_network(t), sequential(4, t))
    assert res.rank_finish_s[1] == pytest.approx(3.0, rel=1e-6)
    assert res.comm_time_s[1] == pytest.approx(1.0, rel=1e-6)


def test_sharing_uplink_between_two_transfers():
    t = topology_from_dict(TREE)
    tr = rec((0, "isend", 2, 1e9, -1, 4, 0, 0), (1, "isend", 3, 1e9, -1, 4, 0, 0),
             (0, "waitall", -1, 0, -1, 4, 0, 0), (1, "waitall", -1, 0, -1, 4, 0, 0),
             (2, "recv", 0, 1e9, -1, 4, 0, 0), (3, "recv", 1, 1e9, -1, 4, 0, 0))
    res = replay(tr, build_network(t), sequential(4, t))
    assert res.makespan_s == pytest.approx(2.0, rel=1e-6)  # both cross the one 1 GB/s uplink


@pytest.mark.parametrize("method", ["compiled", "python"])
@pytest.mark.parametrize("relay, expected_s", [
    # 1 -> 0 (EPS), 0 => 2 (circuit), 2 -> 3 (EPS): three store-and-forward segments of 1 s each
    ("store-and-forward", 3.0),
    # one transfer over the concatenated route; relays 0 and 2 each add one 64 KiB chunk at 1 GB/s
    ("pipelined", 1.0 + 2 * 65536 / 1e9),
])
def test_relay_forwarding_modes(relay, expected_s, method):
    doc = dict(TREE, kind="hybrid", ocs={"nodes": [0, 2], "bw": "8Gbps", "latency": "0ns"})
    t = topology_from_dict(doc)
    plan = {"circuits": [[0, 2]], "forwarding": {"1": {"1": 0}, "0": {"1": 2}}}
    net = build_network(t, plan, model={"relay": relay})
    tr = rec((1, "send", 3, 1e9, -1, 4, 0, 0), (3, "recv", 1, 1e9, -1, 4, 0, 0))
    res = replay(tr, net, sequential(4, t), method=method)
    assert res.makespan_s == pytest.approx(expected_s, rel=1e-6)
    assert res.n_flows == (3 if relay == "store-and-forward" else 1)
    direct = replay(rec((0, "send", 2, 1e9, -1, 4, 0, 0), (2, "recv", 0, 1e9, -1, 4, 0, 0)),
                    net, sequential(4, t), method=method)
    assert direct.makespan_s == pytest.approx(1.0, rel=1e-6)


def test_any_source_and_tag_matching_order():
    t = topology_from_dict(TREE)
    tr = Trace.from_records([
        (0, "send", 1, 1000, -1, 4, 0, 0, -1, 7), (0, "send", 1, 2000, -1, 4, 0, 0, -1, 5),
        (1, "recv", 0, 2000, -1, 4, 0, 0, -1, 5), (1, "recv", -1, 1000, -1, 4, 0, 0, -1, 7)], 4)
    res = replay(tr, build_network(t), sequential(4, t))
    assert res.n_messages == 2 and np.isfinite(res.makespan_s)


def test_deadlock_is_reported_with_ranks():
    t = topology_from_dict(TREE)
    tr = rec((0, "recv", 1, 8, -1, 4, 0, 0), (1, "recv", 0, 8, -1, 4, 0, 0))
    with pytest.raises(TopoplanError, match=r"deadlock.*rank 0 in call 0 \(recv peer 1\).*rank 1"):
        replay(tr, build_network(t), sequential(4, t))


def test_placement_on_one_node_uses_intra_link():
    doc = dict(TREE, cores_per_node=2)
    t = topology_from_dict(doc)
    tr = rec((0, "send", 1, 1e9, -1, 4, 0, 0), (1, "recv", 0, 1e9, -1, 4, 0, 0))
    res = replay(tr, build_network(t), sequential(4, t))
    assert res.makespan_s == pytest.approx(1.0, rel=1e-6)
    net = build_network(t)
    assert res.link_bytes[net.link_class == "intra"].sum() == pytest.approx(1e9)


# --------------------------------------------------------------------------- compiled vs reference replay


def both(trace, net, placement, **kw):
    """Replay with the compiled loop and the Python reference; they must agree."""
    a = replay(trace, net, placement, method="compiled", **kw)
    b = replay(trace, net, placement, method="python", **kw)
    np.testing.assert_allclose(a.rank_finish_s, b.rank_finish_s, rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(a.comm_time_s, b.comm_time_s, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(a.link_bytes, b.link_bytes, rtol=1e-9)
    assert (a.n_messages, a.n_flows, a.n_events) == (b.n_messages, b.n_flows, b.n_events)
    assert (a.timeline is None) == (b.timeline is None)
    if a.timeline is not None:
        np.testing.assert_array_equal(a.timeline["t_s"], b.timeline["t_s"])
        np.testing.assert_allclose(a.timeline["util"], b.timeline["util"], rtol=1e-9, atol=1e-9)
    return a


@pytest.mark.parametrize("spec", ["npb:kernel=cg,class=S,np=16,iters=2", "npb:kernel=mg,class=S,np=16,iters=1",
                                  "npb:kernel=ft,class=S,np=8,iters=1", "npb:kernel=lu,class=S,np=8,iters=1"])
def test_compiled_replay_matches_reference_on_npb(spec):
    from topoplan.traffic.sources import load_source

    t = topology_from_dict(dict(TREE, switches=4, nodes_per_switch=4, cores_per_node=2,
                                eps={"down_bw": "10Gbps", "up_bw": "20Gbps", "down_latency": "1us", "mtu": "4KiB"}))
    trace, _ = load_source(spec)
    res = both(trace, build_network(t), sequential(trace.n_ranks, t), compute_scale=0.5)
    assert res.makespan_s > 0 and res.n_messages > 0


@pytest.mark.parametrize("spec,intervals", [("npb:kernel=cg,class=S,np=16,iters=2", 23.7),
                                            ("npb:kernel=ft,class=S,np=8,iters=1", 9.2),
                                            ("npb:kernel=cg,class=S,np=16,iters=1", 0.5)])
def test_compiled_timeline_matches_reference(spec, intervals):
    # the compiled loop samples each link's bytes at the interval boundaries; the reference adds load x time
    from topoplan.traffic.sources import load_source

    t = topology_from_dict(dict(TREE, switches=4, nodes_per_switch=4, cores_per_node=2,
                                eps={"down_bw": "10Gbps", "up_bw": "20Gbps", "down_latency": "1us", "mtu": "4KiB"}))
    trace, _ = load_source(spec)
    net, pl = build_network(t), sequential(trace.n_ranks, t)
    dt = replay(trace, net, pl).makespan_s / intervals
    res = both(trace, net, pl, timeline_dt_s=dt)
    util = res.timeline["util"]
    assert util.shape == (len(net.bw_Bps), max(int(np.ceil(intervals)), 1)) and util.max() > 0.1
    # every link's bytes, from its utilization, are the bytes it carried
    np.testing.assert_allclose(util.sum(axis=1) * dt * net.bw_Bps, res.link_bytes, rtol=1e-9, atol=1e-3)


def test_compiled_timeline_too_fine_is_refused_as_by_the_reference():
    t = topology_from_dict(TREE)
    tr = rec((0, "send", 1, 1e9, -1, 4, 0, 0), (1, "recv", 0, 1e9, -1, 4, 0, 0))
    for method in ("compiled", "python"):
        with pytest.raises(TopoplanError, match="timeline: the run reaches .* use a coarser --timeline"):
            replay(tr, build_network(t), sequential(4, t), timeline_dt_s=1e-12, method=method)


@pytest.mark.parametrize("relay", ["store-and-forward", "pipelined"])
def test_compiled_replay_matches_reference_on_relays_wildcards_and_waits(relay):
    doc = dict(TREE, kind="hybrid", ocs={"nodes": [0, 2], "bw": "8Gbps", "latency": "0ns"})
    t = topology_from_dict(doc)
    plan = {"circuits": [[0, 2]], "forwarding": {"1": {"1": 0}, "0": {"1": 2}}}
    tr = Trace.from_records([
        # relayed rendezvous 1 -> 3, eager isends with an any-source receive and a wait by peer
        (1, "isend", 3, 1e9, -1, 4, 0, 0, -1, 1), (1, "isend", 2, 1000, -1, 4, 0, 0, -1, 2),
        (1, "wait", 2, 1000, -1, 4, 0, 0, -1, -1), (1, "waitall", -1, 0, -1, 4, 0, 0, -1, -1),
        (3, "recv", 1, 1e9, -1, 4, 0.5, 0.5, -1, 1), (3, "send", 0, 5e8, -1, 4, 0.5, 0.5, -1, 3),
        (2, "irecv", -1, 1000, -1, 4, 0, 0, -1, 2), (2, "wait", -1, 0, -1, 4, 0, 0, -1, -1),
        (2, "sendrecv", 0, 3e8, -1, 4, 0.1, 0.1, -1, 4),
        (0, "sendrecv", 2, 3e8, -1, 4, 0, 0, -1, 4), (0, "recv", 3, 5e8, -1, 4, 0, 0, -1, 3),
        (0, "allreduce", -1, 2e6, -1, 4, 0.2, 0.2), (1, "allreduce", -1, 2e6, -1, 4, 1.0, 1.0),
        (2, "allreduce", -1, 2e6, -1, 4, 0.2, 0.2), (3, "allreduce", -1, 2e6, -1, 4, 1.0, 1.0)], 4)
    res = both(tr, build_network(t, plan, model={"relay": relay}), sequential(4, t))
    both(tr, build_network(t, plan, model={"relay": relay}), sequential(4, t), timeline_dt_s=0.037)
    if relay == "store-and-forward":
        assert res.n_flows > res.n_messages  # a relayed message is three flows
    else:
        assert res.n_flows == res.n_messages


def test_compiled_replay_reports_deadlock_like_reference():
    t = topology_from_dict(TREE)
    tr = rec((0, "recv", 1, 8, -1, 4, 0, 0), (1, "recv", 0, 8, -1, 4, 0, 0))
    msgs = []
    for method in ("compiled", "python"):
        with pytest.raises(TopoplanError) as err:
            replay(tr, build_network(t), sequential(4, t), method=method)
        msgs.append(str(err.value))
    assert msgs[0] == msgs[1]


def test_alltoall_rows_per_destination_keep_mpich_algorithm_selection():
    # 8 ranks x 8-byte alltoall written one row per destination: MPICH picks Bruck (log2 8 = 3 steps per rank,
    # 24 messages), not the pairwise/scattered exchange of alltoallv (7 messages per rank)
    t = topology_from_dict(dict(TREE, switches=2, nodes_per_switch=4))
    rows = [(r, "alltoall", d, 8, -1, 8, 0.0, 0.0) for r in range(8) for d in range(8) if d != r]
    tr = rec(*rows, n=8)
    res = both(tr, build_network(t), sequential(8, t))
    assert res.n_messages == 8 * 3
    one_row = rec(*[(r, "alltoall", -1, 8, -1, 8, 0.0, 0.0) for r in range(8)], n=8)
    assert replay(one_row, build_network(t), sequential(8, t)).n_messages == 8 * 3
    v = rec(*[(r, "alltoallv", d, 8, -1, 8, 0.0, 0.0) for r, _, d, *_ in rows], n=8)
    assert replay(v, build_network(t), sequential(8, t)).n_messages == 8 * 7


def test_alltoallv_rows_per_destination_are_one_call_with_summed_counts():
    from topoplan.traffic.collectives import schedule
    from topoplan.sim.replay_common import Collectives

    rows = []
    for r in range(4):
        for k, t in enumerate((0.0, 1.0)):   # two calls per rank, the second one row longer
            rows += [(r, "alltoallv", d, 10 * r + d + 100 * k, -1, 4, t, t) for d in range(4)]
            rows += [(r, "alltoallv", (r + 1) % 4, 1000, -1, 4, t, t)] * (k + 1)   # repeated destinations add up
    c = Collectives(rec(*rows))
    steps, _, last = c.expand(1, 11, 22)            # rank 1's first call: rows 11..15
    assert last == 15
    assert steps == schedule("alltoallv", 4, 1, -1, 0, counts=[10.0, 11.0, 1012.0, 13.0])
    steps, _, last = c.expand(1, 16, 22)            # its second call: rows 16..21, stopping at rank 2's rows
    assert last == 21
    assert steps == schedule("alltoallv", 4, 1, -1, 0, counts=[110.0, 111.0, 2112.0, 113.0])
    # a destination outside the communicator is named
    bad = Trace.from_records([(0, "alltoallv", d, 8, -1, 2, 0.0, 0.0, 1, -1) for d in (1, 3)], 4,
                             communicators={1: [0, 1]}, source="t.csv")
    with pytest.raises(TopoplanError, match="t.csv: rank 0 sends to rank 3 in alltoallv on communicator 1"):
        Collectives(bad).expand(0, 0, 2)


def test_compact_steps_keep_every_entry_in_order():
    from topoplan.traffic.collectives import Step
    from topoplan.sim.replay_common import compact_steps

    steps = [Step(sends=[(1, 8.0)], recvs=[(2, None), (3, 4.0)]), Step(), Step(sends=[(0, 2.0), (2, 1.0)])]
    count, peer, nbytes, send = compact_steps(steps)
    assert count.tolist() == [3, 0, 2]
    assert peer.tolist() == [2, 3, 1, 0, 2]            # receives before sends within a step
    assert nbytes.tolist() == [0.0, 4.0, 8.0, 2.0, 1.0]  # an unknown receive size counts 0 (the sender's applies)
    assert send.tolist() == [0, 0, 1, 1, 1]


def test_compiled_replay_names_the_call_of_a_peer_outside_the_communicator():
    from topoplan.sim.compiler import compile_program

    t = topology_from_dict(TREE)
    tr = rec((0, "recv", 1, 8, -1, 4, 0, 0), (1, "barrier", -1, 0, -1, 4, 0, 0), (1, "send", 0, 8, -1, 4, 0, 0))
    tr.peer[2] = 7   # as a corrupt trace built past the reader's checks would have it
    with pytest.raises(TopoplanError, match=r"rank 1 call 1 \(send\): field 'peer': 7 is not a rank of 0..3"):
        compile_program(tr, build_network(t), sequential(4, t))


def test_compiled_replay_counts_each_ranks_computation_once():
    # comm_time = finish - computation; a collective expanded into several micro-ops keeps its gap once
    t = topology_from_dict(TREE)
    tr = rec((0, "allreduce", -1, 8, -1, 4, 0.5, 0), (1, "allreduce", -1, 8, -1, 4, 0.25, 0),
             (2, "allreduce", -1, 8, -1, 4, 0, 0), (3, "allreduce", -1, 8, -1, 4, 0, 0),
             (0, "allreduce", -1, 8, -1, 4, 0.5, 0), (1, "allreduce", -1, 8, -1, 4, 0.25, 0),
             (2, "allreduce", -1, 8, -1, 4, 0, 0), (3, "allreduce", -1, 8, -1, 4, 0, 0))
    a = replay(tr, build_network(t), sequential(4, t), method="compiled")
    b = replay(tr, build_network(t), sequential(4, t), method="python")
    np.testing.assert_array_equal(a.comm_time_s, b.comm_time_s)
    assert a.rank_finish_s[0] - a.comm_time_s[0] == pytest.approx(1.0)


# --------------------------------------------------------------------------- before the first compilation


@pytest.mark.parametrize("spec, ready, engine", [
    ("ring:np=8,bytes=1MB", False, "reference"),               # small, nothing compiled: NumPy
    ("ring:np=8,bytes=1MB", True, "compiled"),                 # compiled already: the compiled loop
    ("alltoall:np=128,bytes=1KB,iters=2", False, "compiled"),  # 256 calls, up to 32,768 messages: compile
])
def test_auto_runs_small_jobs_on_numpy_before_the_first_compilation(monkeypatch, spec, ready, engine):
    import topoplan.sim.maxmin as maxmin
    import topoplan.sim.replay as rp
    from topoplan.core.topology_io import load_topology
    from topoplan.traffic.generators import parse_spec

    ran = []
    monkeypatch.setattr(rp, "compiled_ready", lambda: ready)
    monkeypatch.setattr(maxmin, "compiled_ready", lambda: ready)
    monkeypatch.setattr(rp, "replay_whole", lambda *a, **k: ran.append("compiled"))
    monkeypatch.setattr(rp, "replay_pieces", lambda *a, **k: ran.append("compiled"))
    solvers = []
    real = rp.Replayer.__init__

    def spy(self, *a, **k):
        real(self, *a, **k)
        solvers.append(self.engine.solver)
        ran.append("reference")

    monkeypatch.setattr(rp.Replayer, "__init__", spy)
    monkeypatch.setattr(rp.Replayer, "run", lambda self: None)
    t = load_topology("paper003", ["kind=tree", "ocs=null"])
    trace = parse_spec(spec)
    rp.replay(trace, build_network(t), sequential(trace.n_ranks, t))
    assert ran == [engine]
    assert solvers == ([] if engine == "compiled" else ["numpy"])


@pytest.mark.parametrize("ready, n, solver", [(False, 10, "numpy"), (False, 10**6, "numba"), (True, 10, "numba"),
                                              (False, None, "numpy")])
def test_auto_solver_follows_what_is_compiled(monkeypatch, ready, n, solver):
    import topoplan.sim.maxmin as maxmin

    monkeypatch.setattr(maxmin, "compiled_ready", lambda: ready)
    assert maxmin._resolve_solver("auto", n) == solver
    assert maxmin._resolve_solver("numpy", n) == "numpy" and maxmin._resolve_solver("numba", n) == "numba"
