"""Replay of a generated trace piece by piece (``replay(recording)``): the same run as the whole trace's.

The compiled loop stops when a rank reaches the end of the micro-ops it holds while the trace has more
calls for it; the next piece is compiled and joined to what the ranks have not run yet, and the run
resumes from its state. These tests cut traces into small pieces so that every kind of state crosses a
piece boundary (messages and flows in flight, streamed collectives mid-way, computation gaps, route
classes first used in a later piece) and compare every result with the whole trace's to the bit.
"""

import re

import numpy as np
import pytest

from topoplan.core.errors import TopoplanError
from topoplan.core.placement import sequential
from topoplan.core.topology_io import load_topology
from topoplan.traffic.builder import TraceBuilder
from topoplan.traffic.generators import Recording, record_spec
from topoplan.traffic.limits import PIECE_ROWS
from topoplan.sim.network import build_network
from topoplan.sim.replay import replay


def _same(a, b):
    np.testing.assert_array_equal(a.rank_finish_s, b.rank_finish_s)
    np.testing.assert_array_equal(a.comm_time_s, b.comm_time_s)
    np.testing.assert_array_equal(a.link_bytes, b.link_bytes)
    assert (a.n_messages, a.n_flows, a.n_events) == (b.n_messages, b.n_flows, b.n_events)


def _both(source, net, pl, rows, **kw):
    whole = replay(source.build(), net, pl, piece_rows=len(source.build()), **kw)   # one piece: the whole trace
    pieces = replay(source, net, pl, piece_rows=rows, **kw)
    _same(whole, pieces)
    assert whole.n_pieces == 1
    return whole, pieces


@pytest.mark.parametrize("spec, rows", [
    ("npb:kernel=cg,class=S,np=16,iters=3", 200),     # p2p, rendezvous and eager
    ("npb:kernel=cg,class=S,np=16,iters=3,compute=0.0002", 200),    # ranks computing when a piece comes in
    ("neighbor2d:rows=4,cols=8,bytes=1MB,iters=6,compute=0.001", 40),
    ("npb:kernel=mg,class=S,np=16,iters=2", 150),     # allreduces (expanded steps) between the exchanges
    ("npb:kernel=lu,class=S,np=16,iters=2", 100),     # wavefront: ranks far apart in their programs
    ("npb:kernel=is,class=S,np=32", 40),              # alltoallv written per destination, allreduce
    ("npb:kernel=ft,class=S,np=16,iters=3", 5),       # streamed alltoall (GEN) across pieces
    ("alltoall:np=40,bytes=8KB,iters=5", 10),         # streamed batches of 8 KB, 5 calls in 5 pieces
    ("alltoall:np=32,bytes=1MB,iters=3", 10),         # streamed pairwise exchange
    ("random:np=32,bytes=100KB,msgs=500,iters=3", 60),
])
@pytest.mark.parametrize("kind", ["tree", "fat-tree"])
def test_pieces_replay_equals_whole_trace(spec, rows, kind):
    topo = load_topology("paper001-16x16", [f"kind={kind}", "ocs=null"])
    rec = record_spec(spec)
    _, got = _both(rec, build_network(topo), sequential(rec.n_ranks, topo), rows)
    assert got.n_pieces > 1


@pytest.mark.parametrize("relay", ["pipelined", "store-and-forward"])
def test_pieces_replay_equals_whole_trace_with_relayed_circuits(relay):
    from topoplan.problems.circuits import CircuitProblem, solve
    from topoplan.traffic.sources import load_traffic

    topo = load_topology("paper003")
    spec = "neighbor2d:rows=16,cols=16,bytes=4MB,iters=4"
    pl = sequential(256, topo)
    plan = solve(CircuitProblem.build(topo, load_traffic(spec), pl), "three-step").to_dict()
    net = build_network(topo, plan, model={"relay": relay})
    whole, got = _both(record_spec(spec), net, pl, 300)
    assert got.n_pieces > 1 and whole.link_bytes[net.link_class == "ocs"].sum() > 0   # circuits carried bytes


def test_pieces_replay_timeline_equals_whole_trace():
    topo = load_topology("paper001-16x16", ["kind=tree", "ocs=null"])
    rec = record_spec("npb:kernel=cg,class=S,np=16,iters=3")
    whole, got = _both(rec, build_network(topo), sequential(16, topo), 200, timeline_dt_s=5e-4)
    np.testing.assert_array_equal(whole.timeline["util"], got.timeline["util"])
    np.testing.assert_array_equal(whole.timeline["t_s"], got.timeline["t_s"])


@pytest.mark.parametrize("rows", [None, 200])   # the whole trace, and pieces
def test_timeline_over_its_limit_is_the_timelines_error(monkeypatch, rows):
    """A run stopped because its timeline reached the sample limit says so (use a coarser --timeline), also in
    pieces, where the stop left pieces unread: not that the pieces miss rows of the recording."""
    import topoplan.sim.maxmin as maxmin

    monkeypatch.setattr(maxmin, "MAX_TIMELINE_CELLS", 1)    # 2 intervals at most
    topo = load_topology("paper001-16x16", ["kind=tree", "ocs=null"])
    rec = record_spec("npb:kernel=cg,class=S,np=16,iters=3")
    source = rec.build() if rows is None else rec
    with pytest.raises(TopoplanError, match=r"^timeline: the run reaches 0\.0015 s, 3 intervals of 0\.0005 s .*"
                                            r"use a coarser --timeline$"):
        replay(source, build_network(topo), sequential(16, topo), piece_rows=rows, timeline_dt_s=5e-4)


def _recording(build, n=8, name="test"):
    b = TraceBuilder(n)
    build(b)
    return Recording(name, name, b, None)


def test_new_route_classes_while_streamed_messages_are_in_flight():
    """A later piece brings route classes (sizes) the first did not use, while an alltoall is streamed:
    the streamed messages' segments move up behind the new classes, with the flows using them."""
    def build(b):
        ranks = np.arange(8)
        b.add(ranks, "alltoall", nbytes=1e6)           # pairwise exchange, streamed
        for k, size in enumerate((3e5, 7e5, 2e6)):    # a new size per piece: new route classes
            b.add(ranks, "isend", peer=(ranks + 1 + k) % 8, nbytes=size, req=1)
            b.add(ranks, "irecv", peer=(ranks - 1 - k) % 8, nbytes=size, req=0)
            b.add(ranks, "waitall")
            b.add(ranks, "alltoall", nbytes=5e5 * (k + 1))
    rec = _recording(build)
    topo = load_topology("paper003", ["kind=tree", "ocs=null", "nodes_per_switch=2"])
    _, got = _both(rec, build_network(topo), sequential(8, topo), 4)
    assert got.n_pieces >= 8


def test_new_route_classes_move_the_segments_of_streamed_flows_in_flight():
    """Ranks 0-3 finish a barrier and need the next piece (a size no earlier call used: new route classes)
    while ranks 4-7 are in the middle of a streamed alltoall on their own communicator, its messages pending
    (in their route's latency) with segments that move up behind the new classes."""
    def build(b):
        b.add([4, 5, 6, 7], "alltoall", nbytes=1e6, comm=1, size=4)
        b.add([0, 1, 2, 3], "barrier", comm=2, size=4)
        b.add([0, 1, 2, 3], "isend", peer=[1, 2, 3, 0], nbytes=3e5, req=1)
        b.add([0, 1, 2, 3], "irecv", peer=[3, 0, 1, 2], nbytes=3e5, req=0)
        b.add([0, 1, 2, 3], "waitall")
    b = TraceBuilder(8)
    build(b)
    rec = Recording("test", "test", b, {1: [4, 5, 6, 7], 2: [0, 1, 2, 3]})
    # a node per rank, and links of 1 ms: flows spend most of their time in their route's latency, pending
    topo = load_topology("paper003", ["kind=tree", "ocs=null", "nodes_per_switch=2", "cores_per_node=1",
                                      "eps.down_latency=1ms", "eps.up_latency=1ms"])
    _, got = _both(rec, build_network(topo), sequential(8, topo), 8)
    assert got.n_pieces == 3


def test_first_streamed_collective_in_a_later_piece():
    def build(b):
        ranks = np.arange(8)
        b.add(ranks, "isend", peer=(ranks + 1) % 8, nbytes=4e6, req=1)
        b.add(ranks, "irecv", peer=(ranks - 1) % 8, nbytes=4e6, req=0)
        b.add(ranks, "waitall")
        b.add(ranks, "alltoall", nbytes=2e6)
    topo = load_topology("paper003", ["kind=tree", "ocs=null", "nodes_per_switch=2"])
    _both(_recording(build), build_network(topo), sequential(8, topo), 8)


def test_rows_per_rank_counts_the_built_trace():
    for spec in ("npb:kernel=lu,class=S,np=16,iters=2", "npb:kernel=is,class=S,np=32", "ring:np=5,bytes=1KB,iters=3"):
        rec = record_spec(spec)
        np.testing.assert_array_equal(rec.rows_per_rank(), np.bincount(rec.build().rank, minlength=rec.n_ranks))


def test_deadlock_in_a_later_piece_names_rank_and_call():
    def build(b):
        b.add(np.arange(4), "barrier")
        b.add([0, 1], "send", peer=[1, 0], nbytes=8)
        b.add([0, 1], "recv", peer=[1, 0], nbytes=8)
        b.add([2], "recv", peer=3, nbytes=1e6)       # never sent
    topo = load_topology("paper003", ["kind=tree", "ocs=null"])
    rec = _recording(build, n=4)
    with pytest.raises(TopoplanError, match=r"deadlock or unmatched receive: 1 rank\(s\) blocked: rank 2 in call 1 "
                                            r"\(recv peer 3\)") as e:
        replay(rec, build_network(topo), sequential(4, topo), piece_rows=2)
    assert str(e.value).startswith(f"{rec.source}: deadlock")       # the trace it is in


def test_unmatched_send_across_pieces_is_an_error():
    def build(b):
        b.add([0], "send", peer=1, nbytes=8)         # eager: it would 'arrive' with no receive
        b.add([0, 1], "barrier")
    topo = load_topology("paper003", ["kind=tree", "ocs=null"])
    with pytest.raises(TopoplanError, match="unmatched send: rank 1 is sent 1 messages but posts 0 receives"):
        replay(_recording(build, n=2), build_network(topo), sequential(2, topo), piece_rows=1)


def test_marks_and_the_python_reference_replay_the_whole_trace():
    topo = load_topology("paper001-16x16", ["kind=tree", "ocs=null"])
    rec = record_spec("npb:kernel=cg,class=S,np=16,iters=2")
    net, pl = build_network(topo), sequential(16, topo)
    a = replay(rec, net, pl, piece_rows=100, method="python")
    b = replay(rec, net, pl, piece_rows=100, marks=[0, 5])
    assert a.n_pieces == b.n_pieces == 1 and b.mark_s is not None
    assert a.makespan_s == pytest.approx(b.makespan_s, rel=1e-9)


def test_load_source_hands_out_the_recording_of_a_large_generated_trace(monkeypatch):
    from topoplan.traffic import limits
    from topoplan.traffic.sources import load_source
    from topoplan.sim.run import simulate

    spec = "npb:kernel=cg,class=S,np=16,iters=3"
    assert limits.REPLAY_PIECE_ROWS == 1 << 15   # the default: this trace (35,376 rows) is handed out in pieces
    monkeypatch.setattr(limits, "REPLAY_PIECE_ROWS", 300)
    src, traffic = load_source(spec, with_traffic=False, pieces=True)
    assert isinstance(src, Recording) and traffic is None
    whole, _ = load_source(spec, with_traffic=False)          # without pieces: the trace
    assert not isinstance(whole, Recording)
    topo = load_topology("paper001-16x16", ["kind=tree", "ocs=null"])
    a, b = simulate(topo, whole, sequential(16, topo)), simulate(topo, src, sequential(16, topo))
    assert b["n_pieces"] > 1 and a["n_pieces"] > 1     # the built trace is cut in pieces too (at its collectives)
    assert a["rank_finish_s"] == b["rank_finish_s"] and a["bytes_by_link_class"] == b["bytes_by_link_class"]
    assert PIECE_ROWS == 1 << 22   # (the module's default, patched only here)


def test_simulate_cli_replays_a_large_generated_trace_in_pieces(run_cli, monkeypatch):
    from topoplan.traffic import limits

    args = ("simulate", "-t", "paper001-16x16", "--set", "kind=tree", "--set", "ocs=null",
            "-T", "npb:kernel=cg,class=S,np=16,iters=3")
    monkeypatch.setattr(limits, "REPLAY_PIECE_ROWS", 1 << 20)   # whole
    code, whole, _ = run_cli(*args)
    monkeypatch.setattr(limits, "REPLAY_PIECE_ROWS", 300)
    code2, out, err = run_cli(*args)
    assert code == code2 == 0, err
    assert "(replayed in " in out and "pieces" not in whole
    assert whole.splitlines()[1].split(", wall")[0] == out.splitlines()[1].split(", wall")[0]


def test_simulate_cli_does_not_call_a_recorded_trace_generated(run_cli, monkeypatch, tmp_path):
    """A trace read from a file is replayed in pieces too: the line said '(N pieces of the generated trace)'
    for the recorded NPB traces."""
    from topoplan.traffic import limits

    csv = tmp_path / "cg.csv"
    assert run_cli("traffic", "npb:kernel=cg,class=S,np=16,iters=3", "--trace", "-o", csv)[0] == 0
    monkeypatch.setattr(limits, "REPLAY_PIECE_ROWS", 300)
    code, out, err = run_cli("simulate", "-t", "paper001-16x16", "--set", "kind=tree", "--set", "ocs=null",
                             "-T", csv)
    assert code == 0, err
    assert re.search(r"wall \S+ s \(replayed in \d+ pieces\)$", out.splitlines()[1]) and "generated" not in out


def test_a_whole_replay_memory_cannot_hold_is_refused_before_compiling(monkeypatch):
    from topoplan.core import memory

    topo = load_topology("paper001-16x16", ["kind=tree", "ocs=null"])
    rec = record_spec("npb:kernel=cg,class=S,np=16,iters=3")
    net, pl = build_network(topo), sequential(16, topo)
    trace = rec.build()
    monkeypatch.setattr(memory, "memory_left", lambda: 100_000)     # 100 kB left
    with pytest.raises(TopoplanError, match=r"npb:kernel=cg,class=S,np=16,iters=3: replaying its 35,376 calls "
                                            r"\(35,\d{3} micro-ops\) needs about 0.0 GiB for the compiled program, "
                                            r"more than the 0.0 GiB of memory available; a trace replays "
                                            r"in pieces"):
        replay(trace, net, pl, marks=[0])          # marks: the whole trace at once
    got = replay(rec, net, pl, piece_rows=100)                            # small pieces fit
    monkeypatch.setattr(memory, "memory_left", lambda: None)        # unknown: not checked
    _same(replay(trace, net, pl), got)


def test_deadlock_past_a_hundred_calls_names_the_call_across_narrow_pieces():
    # the window keeps its calls in the narrowest integers: a first piece's int8 joined to a later int16
    def build(b):
        m = b.mark()
        b.add(np.arange(4), "barrier")
        b.repeat(m, 300)
        b.add([2], "recv", peer=3, nbytes=8)       # never sent
    topo = load_topology("paper003", ["kind=tree", "ocs=null"])
    rec = _recording(build, n=4)
    with pytest.raises(TopoplanError, match=r"rank 2 in call 300 \(recv peer 3\)"):
        replay(rec, build_network(topo), sequential(4, topo), piece_rows=100)


def test_window_integers_are_narrowed_only_where_every_value_fits():
    from topoplan.sim.pieces import _narrow

    for dt in (np.int8, np.int16, np.int32):
        info = np.iinfo(dt)
        fits = np.array([info.min, -1, 0, info.max], dtype=np.int64)
        assert _narrow(fits).dtype == dt and _narrow(fits).tolist() == fits.tolist()
        for over in ([info.min - 1, 0], [0, info.max + 1]):
            got = _narrow(np.array(over, dtype=np.int64))
            assert got.dtype.itemsize > np.dtype(dt).itemsize and got.tolist() == over
    big = np.array([-(2 ** 40), 2 ** 62], dtype=np.int64)
    assert _narrow(big).dtype == np.int64 and _narrow(big).tolist() == big.tolist()


# --------------------------------------------------------------------------- pieces of about one compiled size

def _in_trace_order(parts):
    """The pieces' rows put back in the trace's order (by rank, each rank's pieces one after the other)."""
    rank = np.concatenate([p.rank for p in parts])
    order = np.argsort(rank, kind="stable")
    return {c: np.concatenate([getattr(p, c) for p in parts])[order]
            for c in ("rank", "op", "peer", "bytes", "comm", "tag", "t_start")}


@pytest.mark.parametrize("spec", ["npb:kernel=mg,class=S,np=16,iters=2", "npb:kernel=lu,class=S,np=16,iters=2",
                                  "npb:kernel=is,class=S,np=32", "ring:np=5,bytes=1KB,iters=3"])
@pytest.mark.parametrize("rows", [1, 97, 1000, None])
def test_pieces_cut_by_weight_hold_every_row_once_in_order(spec, rows):
    from topoplan.sim.compiler import row_weights
    from topoplan.sim.pieces import TracePieces

    rec = record_spec(spec)
    whole = rec.build()
    for parts in (list(rec.pieces(max_rows=rows, weight=row_weights)),
                  list(TracePieces(whole).pieces(max_rows=rows, weight=row_weights))):
        assert sum(len(p) for p in parts) == len(whole)
        got = _in_trace_order(parts)
        for col, values in got.items():
            np.testing.assert_array_equal(values, getattr(whole, col), err_msg=col)


def test_pieces_of_collectives_hold_fewer_rows_by_weight():
    from topoplan.sim.compiler import row_weights
    from topoplan.sim.pieces import TracePieces
    from topoplan.traffic.trace import OP_CODE

    rec = record_spec("npb:kernel=mg,class=S,np=16,iters=2")
    for source in (rec, TracePieces(rec.build())):
        plain = list(source.pieces(max_rows=300))
        weighed = list(source.pieces(max_rows=300, weight=row_weights))
        assert len(weighed) > len(plain)
    w = row_weights(np.array([OP_CODE["send"], OP_CODE["allreduce"], OP_CODE["bcast"], OP_CODE["alltoall"]]),
                    np.array([1, 1, 1024, 1024]))
    assert w.tolist() == [1.0, 2.0, 20.0, 1.0]    # at least one step; 10 of 1,024 ranks; all-to-all: a row


# --------------------------------------------------------------------------- a trace read whole, cut in pieces

def _trace_both(trace, net, pl, rows, **kw):
    from topoplan.sim.pieces import replay_whole

    whole = replay_whole(trace, net, pl, eager_threshold_B=65536.0, compute_scale=1.0, thresholds=None,
                         progress=None, **kw)
    pieces = replay(trace, net, pl, piece_rows=rows, **kw)
    _same(whole, pieces)
    assert whole.makespan_s == pieces.makespan_s and pieces.unknown_ops == whole.unknown_ops
    return whole, pieces


@pytest.mark.parametrize("name, rows", [("CG.C.64", 20_000), ("MG.C.64", 5_000), ("LU.C.64", 30_000),
                                        ("IS.C.64", 2_000), ("FT.C.64", 2_000)])
def test_real_trace_replayed_in_pieces_equals_the_whole_trace(shared, name, rows):
    # IS and FT write their all-to-alls a row per destination: a call is never cut
    from topoplan.traffic.trace import read_trace

    trace = read_trace(shared / "traces" / name / "events.csv.gz")
    topo = load_topology("paper001-16x16")
    _, got = _trace_both(trace, build_network(topo), sequential(64, topo), rows)
    assert got.n_pieces > 1


@pytest.mark.parametrize("spec", ["random:np=32,bytes=100KB,msgs=500,iters=3",       # no collective: cut anywhere
                                  "npb:kernel=ft,class=S,np=16,iters=3"])
def test_generated_trace_replayed_in_pieces_equals_the_whole_trace(spec):
    from topoplan.traffic.generators import parse_spec

    trace = parse_spec(spec)
    topo = load_topology("paper001-16x16", ["kind=tree", "ocs=null"])
    _, got = _trace_both(trace, build_network(topo), sequential(trace.n_ranks, topo), 50, timeline_dt_s=5e-4)
    assert got.n_pieces > 1


def test_trace_pieces_never_cut_a_collective_of_a_sub_communicator():
    from topoplan.sim.pieces import TracePieces
    from topoplan.traffic.trace import Trace

    # pairs {0,1} and {2,3} broadcast on their own communicators; the bcast of {2,3} starts before the
    # first world barrier on rank 2 and after it on rank 3, so no cut may lie before that barrier
    recs = []
    for r in range(4):
        comm = 1 if r < 2 else 2
        calls = [("barrier", -1, 0, 0), ("bcast", -1, 4096, comm), ("barrier", -1, 0, 0), ("bcast", -1, 4096, comm),
                 ("barrier", -1, 0, 0)]
        if r == 2:
            calls[0], calls[1] = calls[1], calls[0]
        t = 0.0
        for op, peer, nb, c in calls:
            recs.append((r, op, peer, nb, 0 if op == "bcast" else -1, 2 if op == "bcast" else 4, t, t + 1e-6, c))
            t += 1e-5
    trace = Trace.from_records([x[:8] for x in recs], 4, communicators={0: [0, 1, 2, 3], 1: [0, 1], 2: [2, 3]})
    trace.comm[:] = [x[8] for x in sorted(recs, key=lambda x: (x[0], x[6]))]
    tp = TracePieces(trace)
    assert tp._cuts.shape == (4, 2)     # before the second and the third barrier, not the first
    pieces = list(tp.pieces(max_rows=1))
    assert [len(p) for p in pieces] == [8, 8, 4]
    topo = load_topology("paper003", ["kind=tree", "ocs=null"])
    _trace_both(trace, build_network(topo), sequential(4, topo), 1)


def test_a_trace_in_pieces_stops_at_the_deadline_between_pieces(monkeypatch):
    # a trace replayed whole cannot stop before its end; in pieces it stops at the first piece past the deadline
    from topoplan.core import deadline
    from topoplan.sim.run import simulate
    from topoplan.traffic import limits
    from topoplan.traffic.generators import parse_spec

    trace = parse_spec("random:np=32,bytes=100KB,msgs=500,iters=3")
    topo = load_topology("paper001-16x16", ["kind=tree", "ocs=null"])
    monkeypatch.setattr(limits, "REPLAY_PIECE_ROWS", 100)
    seen = []
    with deadline.bounded(10.0), deadline.reserved(20.0), deadline.stopping():
        with pytest.raises(deadline.DeadlineReached):
            simulate(topo, trace, sequential(32, topo), progress=lambda done, total: (seen.append(done),
                                                                                       deadline.check()))
    assert len(seen) == 1 and 0 < seen[0] < len(trace)
