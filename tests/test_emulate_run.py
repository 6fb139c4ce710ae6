"""Real MPI on the emulated cluster (root, pyroute2 and Open MPI; skipped with the reason otherwise).

The hybrid case: two switches of four nodes, the uplink as thin as one node link, one circuit between
the OCS nodes (fat 20 Gb/s links) and relays; four ranks under one switch send 2 MB each to four under the
other. The simulator's default model predicts 3.2 ms (relayed over the circuit) against 6.4 ms over the
EPS alone; measured at scale 400 on a loaded 2-core machine: 1.02x and 1.01x of the predictions (the
15% tolerance below is the noise of a run on a busy machine, several times what was measured).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from topoplan.core.errors import TopoplanError
from topoplan.core.placement import sequential
from topoplan.core.topology import OCSConfig, TreeTopology
from topoplan.traffic.trace import Trace

from test_emulate_cluster import WHY, _ours
from timing import sigint_default

ROOT = Path(__file__).resolve().parents[1]
MPI = shutil.which("mpicc") and shutil.which("mpirun")
needs_all = pytest.mark.skipif(WHY is not None or not MPI,
                               reason=WHY or "needs Open MPI's mpicc and mpirun (apt-get install libopenmpi-dev openmpi-bin)")

HYBRID = TreeTopology(kind="hybrid", nodes_per_switch=(4, 4), up_bw_Bps=1.25e9,
                      ocs=OCSConfig(nodes=(0, 4), bw_Bps=2.5e9, latency_s=5e-7, node_link_bw_Bps=2.5e9))


def cross_trace(nbytes: float = 2e6) -> Trace:
    """Ranks 0-3 (switch 0) each send nbytes to rank + 4 (switch 1)."""
    recs = []
    for r in range(4):
        recs += [(r, "isend", r + 4, nbytes, -1, 8, 0.0, 0.0, -1, 0), (r, "waitall", -1, 0, -1, 8, 0.0, 0.0)]
        recs += [(r + 4, "irecv", r, nbytes, -1, 8, 0.0, 0.0, -1, 0), (r + 4, "waitall", -1, 0, -1, 8, 0.0, 0.0)]
    return Trace.from_records(recs, 8, source="cross")


@contextlib.contextmanager
def tree_cluster(nodes_per_switch):
    """A tree cluster at scale 400 with the replayer built, and a work directory removed afterwards: yields
    ``(cluster, spec, binaries, work)``."""
    from topoplan.emulate import cluster as cl
    from topoplan.emulate.replayer import build

    spec = cl.cluster_spec(TreeTopology(kind="tree", nodes_per_switch=nodes_per_switch), scale=400)
    bins = build()
    work = Path(tempfile.mkdtemp())
    try:
        with cl.Cluster(spec) as c:
            yield c, spec, bins, work
    finally:
        shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """A private build cache and the Open MPI settings of a test machine."""
    mp = pytest.MonkeyPatch()
    mp.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
    yield
    mp.undo()


@needs_all
@pytest.mark.alone
def test_hybrid_measured_as_predicted_and_faster_than_eps(env):
    from topoplan.emulate.run import emulate
    from topoplan.problems.circuits.problem import CircuitProblem, solve
    from topoplan.sim.run import network_view
    from topoplan.traffic.matrix import from_trace

    tr, pl = cross_trace(), sequential(8, HYBRID)
    plan = solve(CircuitProblem.build(HYBRID, from_trace(tr), placement=pl.rank_to_node), "greedy").to_dict()
    assert plan["circuits"] == [[0, 4]]
    # a run on a busy machine (others' work on the 2 cores) is repeated and the fastest kept: load only adds time
    # (a run stops at its first undisturbed attempt; beside a suite's other worker every attempt is disturbed,
    # and the fastest of 4 once measured EPS only at 1.63x its prediction)
    hybrid = emulate(HYBRID, tr, pl, plan=plan, calibrate=False, repeats=10)
    eps = emulate(network_view(HYBRID, "eps"), tr, pl, calibrate=False, repeats=10)
    assert hybrid["cluster"]["routes"] == 32 and hybrid["scale"] == 400
    for res in (hybrid, eps):
        assert abs(res["measured_s"] / res["predicted_s"] - 1) < 0.15, res["predictions"]
    assert hybrid["measured_s"] < 0.75 * eps["measured_s"]
    # the relays' store-and-forward prediction is the one the measurement refutes here
    assert hybrid["predictions"]["store-and-forward"]["ratio"] < 0.7
    assert _ours(os.getpid()) == []


@needs_all
def test_launches_are_reliable(env):
    """Eight namespaces, eight launches in a row on one cluster: every one runs (the daemons once crashed
    writing a shared-memory topology in about 2 of 10 launches)."""
    from topoplan.emulate.run import _Run, comm_times
    from topoplan.traffic.generators import ring

    with tree_cluster((4, 4)) as (c, spec, bins, work):
        run = _Run(c, spec, bins, work, 120, None)
        for _ in range(8):
            res = run.replay(ring(8, 1000, iters=2), spec.hosts)
            comm, _ = comm_times(res["trace"])
            assert res["trace"].n_ranks == 8 and len(comm) == 8
    assert _ours(os.getpid()) == []


@needs_all
def test_cli_json_with_calibration(env, tmp_path, run_cli):
    out = tmp_path / "em.json"
    code, stdout, err = run_cli("emulate", "-t", "paper003", "--set", "switches=2", "--set", "nodes_per_switch=2",
                                "--set", "cores_per_node=1", "--set", "kind=tree", "--set", "ocs=null",
                                "-T", "ring:np=4,bytes=500KB", "--repeats", "1", "--json", "-o", out)
    assert code == 0, err
    res = json.loads(stdout)
    assert res == json.loads(out.read_text())
    assert {"measured_s", "predicted_s", "ratio", "predictions", "scale", "calibration", "measured", "transport"} <= set(res)
    assert [c["run"] for c in res["calibration"]] == ["one_way", "both_ways"]   # two nodes per switch: no ring
    assert 0.7 < res["calibration"][0]["ratio"] < 1.5 and 0 <= res["measured"]["cpu_idle"] <= 1
    assert set(res["predictions"]) == {"default", "store-and-forward", "paper", "fifo"}
    assert res["measured_s"] > 0 and len(res["measured"]["comm_time_s"]) == 4


@needs_all
@pytest.mark.parametrize("flag", [None, "--lossy"])
def test_cli_lossless_by_default_drops_nothing_and_scales_tcps_timeout(env, run_cli, flag):
    """An all-to-all of 4 MB a pair over 4 nodes (three senders into every node link): by default every switch
    port holds what arrives, and TCP never takes a queue's delay for a loss; --lossy keeps the kernel's timer."""
    code, stdout, err = run_cli("emulate", "-t", "paper003", "--set", "switches=2", "--set", "nodes_per_switch=2",
                                "--set", "cores_per_node=1", "--set", "kind=tree", "--set", "ocs=null",
                                "-T", "alltoall:np=4,bytes=4MB", *([flag] if flag else []), "--no-calibrate",
                                "--repeats", "1", "--json")
    assert code == 0, err
    res = json.loads(stdout)
    assert res["cluster"]["shaper"] == "tbf" and res["measured"]["packets"] > 1000 and res["measured_s"] > 0
    if flag is None:
        assert res["cluster"]["lossless"] and res["cluster"]["rto_min_s"] == 80.0
        assert res["measured"]["drops"] == 0 and res["measured"]["tcp"]["timeouts"] == 0
    else:
        assert not res["cluster"]["lossless"] and res["cluster"]["rto_min_s"] is None


@needs_all
def test_cli_runs_the_users_program(env, tmp_path, run_cli):
    exe = tmp_path / "ring"
    subprocess.run(["mpicc", "-O1", "-o", str(exe), str(ROOT / "tests" / "data" / "mpi" / "ring.c")], check=True)
    code, stdout, err = run_cli("emulate", "-t", "paper003", "--set", "switches=2", "--set", "nodes_per_switch=2",
                                "--set", "cores_per_node=1", "--set", "kind=tree", "--set", "ocs=null",
                                "-T", "ring:np=4,bytes=8KB", "--no-calibrate", "--repeats", "1", "--json", "--", exe)
    assert code == 0, err
    res = json.loads(stdout)
    assert res["program"] == [str(exe)] and res["measured_s"] > 0 and "calibration" not in res
    # a program marks no window: TCP's counters cover the whole mpirun, and no timeline is measured
    assert res["measured"]["tcp_window"] == "mpirun" and res["measured"]["tcp"]["timeouts"] >= 0
    assert "timeline" not in res


_CHILD = """
import os, sys
sys.path.insert(0, {root!r})
from topoplan.core.topology import TreeTopology
from topoplan.core.placement import sequential
from topoplan.emulate.run import emulate
from topoplan.traffic.generators import ring
t = TreeTopology(kind="tree", nodes_per_switch=(2, 2))
def note(msg):
    print(msg, flush=True)
emulate(t, ring(4, 40e6), sequential(4, t), calibrate=False, repeats=1, note=note)
"""


@needs_all
def test_sigint_during_the_mpi_run_leaves_nothing(env, tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", _CHILD.format(root=str(ROOT))], stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, TMPDIR=str(tmp)), preexec_fn=sigint_default)

    def ours(ranks_only=False):
        """The run's processes (their command lines name its work directory under ``tmp``); with ``ranks_only``
        the ranks alone (``replay <input directory>``: mpirun and its daemons have longer command lines)."""
        found = []
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    argv = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
                except OSError:
                    continue
                if any(str(tmp).encode() in a for a in argv) and (not ranks_only or len(argv) == 2):
                    found.append(int(pid))
        return found

    try:
        for line in proc.stdout:
            if line.startswith("running"):
                break
        # Ctrl-C once the 4 ranks run (40 MB take ~13 s at this scale): waited for, not slept for, since under load
        # mpirun and its daemons take seconds to start them; the bound only ends a run that hangs
        end = time.monotonic() + 300
        while len(ours(ranks_only=True)) < 4 and proc.poll() is None and time.monotonic() < end:
            time.sleep(0.05)
        assert len(ours(ranks_only=True)) == 4, "the run's 4 ranks should be running"
        proc.send_signal(signal.SIGINT)
    except BaseException:
        proc.kill()
        raise
    assert proc.wait(timeout=300) != 0   # generous (cleaning up under load): only a hang takes longer
    assert _ours(proc.pid) == []
    assert ours() == []
    assert list(tmp.iterdir()) == []     # not even Open MPI's session directories of the stopped run


def test_missing_pyroute2_is_one_line(monkeypatch, run_cli):
    for name in [m for m in sys.modules if m == "pyroute2" or m.startswith("pyroute2.")] + ["pyroute2"]:
        monkeypatch.setitem(sys.modules, name, None)    # as if not installed: importing it raises ImportError
    code, out, err = run_cli("emulate", "-t", "paper003", "-T", "ring:np=4,bytes=1KB")
    assert code == 2 and out == ""
    assert err.startswith("error: ") and "install topoplan[emulate]" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("args, match", [
    (["-t", "kcomputer", "-T", "ring:np=4,bytes=1KB"], "two-level trees"),
    (["-t", "paper003", "-T", "ring:np=4,bytes=1KB", "--network", "torus"], "needs a mesh/torus"),
    (["-t", "paper003", "-T", "ring:np=4,bytes=1KB", "--network", "eps", "--circuits", "x.json"], "needs the hybrid"),
    (["--cleanup", "-t", "paper003"], "--cleanup only removes leftovers"),
    (["--cleanup", "--scale", "100"], "--cleanup only removes leftovers; --scale does not apply"),
    (["--cleanup", "--set", "switches=2"], "--cleanup only removes leftovers; --set does not apply"),
    (["--cleanup", "--no-calibrate"], "--cleanup only removes leftovers; --no-calibrate does not apply"),
    (["--cleanup", "-p", "round-robin"], "--cleanup only removes leftovers; --placement does not apply"),
    (["-t", "paper003"], "needs --topology and --traffic"),
    (["-t", "paper003", "-T", "ring:np=4,bytes=1KB", "--queues", "red"], "--queues: choose one of fifo, ack-priority"),
    (["-t", "paper003", "-T", "ring:np=4,bytes=1KB", "--shaper", "red"], "--shaper: choose one of tbf, htb"),
    (["-t", "paper003", "-T", "ring:np=4,bytes=1KB", "--queues", "ack-priority"],
     "--queues: ack-priority queues reorder TCP's segments on lossless switches"),
    (["-t", "paper003", "-T", "ring:np=4,bytes=1KB", "--", "./no-such-program"], "no such program"),
])
def test_bad_input_is_one_line(args, match, run_cli):
    pytest.importorskip("pyroute2")
    code, out, err = run_cli("emulate", *args)
    assert code == 2 and match in err and len(err.strip().splitlines()) == 1, err


@needs_all
def test_cleanup_command(run_cli):
    code, out, err = run_cli("emulate", "--cleanup")
    assert code == 0 and ("nothing to remove" in out or "removed" in out)


@pytest.mark.parametrize("args, match", [
    (["--scale", "0"], "--scale: must be positive and below 1e9, got 0"),
    (["--scale", "nan"], "--scale: must be positive"),
    (["--scale", "1e12"], "--scale: must be positive and below 1e9, got 1e+12"),
    (["--compute-scale", "-1"], "--compute-scale: must be a finite non-negative factor"),
    (["--eager", "-1"], "--eager: size must be non-negative"),
    (["--threshold", "abc", "--circuits", "x.json"], "--threshold: cannot read size 'abc'"),
    (["--threshold", "1MB"], "--threshold: the size from which messages take a plan's circuits; give --circuits"),
    (["--timeline", "10us"], "--timeline: at scale 400 at least 50 us (the links are sampled at most every 20 ms"),
    (["--timeline", "1ms", "--", "/bin/true"], "--timeline: measured for a replay only"),
    (["--mpich", "throttle=4"], "--mpich: unknown field 'throttle'"),
    (["--stall", "30", "--", "/bin/true"], "--stall: replays only"),
])
def test_bad_options_are_refused_before_the_inputs_and_named_as_flags(args, match, run_cli, monkeypatch):
    """A bad --scale was refused only after the predictions ran and the programs were compiled, when the
    cluster was about to be built, and it and --compute-scale, --eager, --threshold were named as library
    fields ('field 'scale''); they are now refused first, naming the flag."""
    pytest.importorskip("pyroute2")
    import topoplan.cli.commands.simulate as simulate_cmd
    import topoplan.emulate.run as run

    def unread(*a, **kw):
        raise AssertionError("reached past the options")

    monkeypatch.setattr(simulate_cmd, "replay_inputs", unread)
    monkeypatch.setattr(run, "emulate", unread)
    code, out, err = run_cli("emulate", "-t", "paper003", "-T", "ring:np=4,bytes=1KB", *args)
    assert code == 2 and out == "" and err.startswith("error: ") and match in err, err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("removed", [[], ["topoplan-em4242-h0", "topoplan-em4242-h1"]])
def test_cleanup_honours_json_and_output(removed, run_cli, monkeypatch, tmp_path):
    """--cleanup with --json printed its sentence instead of JSON, and -o wrote nothing: both now carry
    ``removed``, the namespaces removed."""
    pytest.importorskip("pyroute2")
    import topoplan.emulate.cluster as cl

    monkeypatch.setattr(cl, "cleanup", lambda: list(removed))
    code, out, err = run_cli("emulate", "--cleanup", "--json")
    assert code == 0 and json.loads(out) == {"removed": removed}, (out, err)
    path = tmp_path / "cleanup.json"
    code, out, err = run_cli("emulate", "--cleanup", "-o", str(path))
    assert code == 0 and json.loads(path.read_text()) == {"removed": removed}
    assert ("nothing to remove" if not removed else "removed 2 namespaces") in out


@needs_all
def test_the_bcast_library_runs_mpi_bcast_over_the_plan_order(env):
    """Unmodified MPI_Bcast calls on MPI_COMM_WORLD run on a communicator in the keys' order (the recorder,
    preloaded after the library, sees them there); without keys, or with keys that are no permutation,
    nothing changes."""
    from topoplan.emulate.run import _Run

    trace = Trace.from_records([(r, "bcast", -1, 65536, 1, 4, 0.0, 0.0) for r in range(4) for i in range(3)],
                               4, source="bcasts")
    seen = {}
    with tree_cluster((2, 2)) as (c, spec, bins, work):
        run = _Run(c, spec, bins, work, 120, None)
        run.preload = [bins["bcast"]]
        for label, keys in (("plan", "2,0,3,1"), ("none", ""), ("bad", "0,0,1,2")):
            run.env = {"TOPOPLAN_BCAST_KEYS": keys}
            t = run.replay(trace, spec.hosts)["trace"]
            rows = [i for i, op in enumerate(t.op_names()) if op == "bcast"]
            assert len(rows) == 12 and set(t.root[rows].tolist()) == {1}
            seen[label] = t.members(int(t.comm[rows[0]])).tolist()
    assert seen == {"plan": [1, 3, 0, 2], "none": [0, 1, 2, 3], "bad": [0, 1, 2, 3]}


def test_bcast_keys_need_one_rank_per_plan_node():
    import numpy as np

    from topoplan.core.placement import Placement
    from topoplan.emulate.plan import bcast_keys

    pl = Placement(np.array([0, 0, 1]), np.array([0, 1, 0]))
    with pytest.raises(TopoplanError, match="one rank per plan node"):
        bcast_keys({"order": [1, 0, 2]}, pl, 3)



def _calls(op: str, sizes, comm_sizes=(16,)) -> Trace:
    recs = [(r, op, -1, n, 0, p, 0.0, 0.0) for p in comm_sizes for n in sizes for r in range(p)]
    return Trace.from_records(recs, max(comm_sizes), source=op)


def _rooted(op: str, p: int, nbytes: int, root: int) -> Trace:
    return Trace.from_records([(r, op, -1, nbytes, root, p, 0.0, 0.0) for r in range(p) for i in range(2)], p)


@pytest.mark.parametrize("spec", ["npb:kernel=mg,class=S,np=16", "npb:kernel=ft,class=S,np=16",
                                  "npb:kernel=is,class=S,np=16", ("bcast", 16, 1 << 20, 3), ("bcast", 12, 4096, 5),
                                  ("allreduce", 12, 65536, -1), ("reduce", 16, 1 << 20, 2), ("barrier", 6, 0, -1)])
def test_collectives_as_messages_are_the_prediction(spec):
    """Replayed as the simulator's own point-to-point messages, a trace predicts exactly what it predicted with
    its collectives (the replay then runs what is predicted, algorithm and tree shape included)."""
    from topoplan.core.placement import sequential
    from topoplan.core.topology_io import load_topology
    from topoplan.emulate.replayer import COLLECTIVE_TAG, as_point_to_point
    from topoplan.sim.run import network_view, simulate
    from topoplan.traffic.sources import load_source
    from topoplan.traffic.trace import COLLECTIVE_OPS, OP_CODE

    trace = _rooted(*spec) if isinstance(spec, tuple) else load_source(spec, with_traffic=False)[0]
    p2p = as_point_to_point(trace)
    kept = {OP_CODE["allgatherv"]}   # (write_replay sends it as a ring)
    assert not (set(p2p.op.tolist()) & ({OP_CODE[o] for o in COLLECTIVE_OPS} - kept))
    assert spec[0] == "barrier" or (p2p.tag[p2p.op == OP_CODE["isend"]] == COLLECTIVE_TAG).any()
    topo = network_view(load_topology("paper003"), "eps")
    pl = sequential(trace.n_ranks, topo)
    a, b = (simulate(topo, t, pl, compute_scale=0.0) for t in (trace, p2p))
    assert b["makespan_s"] == pytest.approx(a["makespan_s"], rel=1e-12)
    assert b["comm_time_s"] == pytest.approx(a["comm_time_s"], rel=1e-12)


@pytest.mark.parametrize("throttle", [32, 4, 0])
def test_an_alltoallv_written_per_destination_runs_in_mpichs_order_and_batches(throttle):
    """Every rank starts at another peer, as MPICH's alltoallv does (receives from r + i, sends to r - i), in
    batches of alltoall_throttle with a waitall each (0: one batch), and every receive can hold what comes."""
    from topoplan.emulate.replayer import as_point_to_point
    from topoplan.traffic.collectives import MPICHThresholds

    p = 40
    t = Trace.from_records([(r, "alltoallv", d, 100 + r + d, -1, p, 0.0, 1.0) for r in range(p) for d in range(p)], p)
    out = as_point_to_point(t, MPICHThresholds(alltoall_throttle=throttle))
    block = throttle or p
    for r in (0, 7, 39):
        ops = [(o, int(q), float(b)) for a, o, q, b in zip(out.rank, out.op_names(), out.peer, out.bytes) if a == r]
        assert [q for o, q, _ in ops if o == "isend"] == [(r - i) % p for i in range(1, p)]
        assert [b for o, q, b in ops if o == "isend"] == [100.0 + r + (r - i) % p for i in range(1, p)]
        assert [q for o, q, _ in ops if o == "irecv"] == [(r + i) % p for i in range(1, p)]
        assert {b for o, _, b in ops if o == "irecv"} == {100.0 + 2 * (p - 1)}
        assert sum(o == "waitall" for o, _, _ in ops) == -(-p // block)
    assert out.t_end[out.rank == 7].max() == 1.0


def test_collectives_as_messages_follow_the_mpi_library():
    """With --mpich the replayed messages are those of the tuned library, and so are every model's predictions."""
    from topoplan.core.topology_io import load_topology
    from topoplan.emulate.replayer import as_point_to_point
    from topoplan.emulate.run import predictions
    from topoplan.sim.run import network_view, simulate
    from topoplan.traffic.collectives import MPICHThresholds
    from topoplan.traffic.sources import load_source

    trace = load_source("alltoall:np=16,bytes=16KiB", with_traffic=False)[0]
    th = MPICHThresholds(alltoall_throttle=2)
    topo = network_view(load_topology("paper003"), "eps")
    pl = sequential(16, topo)
    tuned = simulate(topo, trace, pl, thresholds=th)["makespan_s"]
    assert tuned != pytest.approx(simulate(topo, trace, pl)["makespan_s"], rel=1e-3)
    assert simulate(topo, as_point_to_point(trace, th), pl)["makespan_s"] == pytest.approx(tuned, rel=1e-12)
    preds = predictions(topo, trace, pl, thresholds=th)
    assert preds["default"]["makespan_s"] == pytest.approx(tuned, rel=1e-12)
    assert preds["paper"]["makespan_s"] == pytest.approx(
        simulate(topo, trace, pl, thresholds=th, model={"model": "paper", "relay": "store-and-forward"})["makespan_s"])


def test_collectives_as_messages_keep_the_other_rows_and_refuse_strangers():
    from topoplan.emulate.replayer import as_point_to_point

    t = Trace.from_records([(0, "send", 1, 8, -1, 2, 0.0, 1.0), (1, "recv", 0, 8, -1, 2, 0.0, 1.0)], 2)
    p = as_point_to_point(t)
    assert list(p.op_names()) == list(t.op_names()) and p.t_end.tolist() == [1.0, 1.0]
    bad = Trace.from_records([(r, "bcast", -1, 8, 0, 2, 0.0, 0.0, 7) for r in (0, 2)], 3, communicators={7: [0, 1]})
    with pytest.raises(TopoplanError, match="rank 2 calls bcast on communicator 7 but is not one of its members"):
        as_point_to_point(bad)
    outside = Trace.from_records([(r, "bcast", -1, 8, 2, 2, 0.0, 0.0, 7) for r in (0, 1)], 3, communicators={7: [0, 1]})
    with pytest.raises(TopoplanError, match="calls bcast on communicator 7 with root 2, which is not one of its members"):
        as_point_to_point(outside)


@needs_all
def test_the_replay_runs_the_predicted_tree(env):
    """A 1 MiB Bcast over 4 ranks on two switches (ranks 0-1 under one, 2-3 under the other): sent as the
    predicted messages it follows MPICH's binomial tree, 8 n link-bytes (0 -> 2 across the uplinks, 0 -> 1 and
    2 -> 3 under a switch); Open MPI's binomial Bcast (its algorithm 6) hangs rank 3 under rank 1, across the
    uplinks: 10 n. The emulated links count the bytes."""
    from topoplan.emulate.launch import transport_for
    from topoplan.emulate.replayer import as_point_to_point
    from topoplan.emulate.run import _Run

    n = 1 << 20
    trace = _calls("bcast", (n,), comm_sizes=(4,))
    moved = {}
    with tree_cluster((2, 2)) as (c, spec, bins, work):
        binomial = dict(transport_for(n), coll_tuned_use_dynamic_rules="1", coll_tuned_bcast_algorithm="6")
        for label, t, transport in (("model", as_point_to_point(trace), transport_for(n)),
                                    ("library", trace, binomial),
                                    ("nothing", Trace.from_records([], 4), transport_for(n))):
            moved[label] = _Run(c, spec, bins, work, 120, transport).replay(t, spec.hosts)["link_bytes"]
    per_n = {k: (v - moved["nothing"]) / n for k, v in moved.items() if k != "nothing"}
    assert 8.0 < per_n["model"] < 8.0 * 1.12 and 10.0 < per_n["library"] < 10.0 * 1.12, per_n


@needs_all
def test_timeline_measures_the_links_beside_the_prediction(env, tmp_path, run_cli):
    """--timeline: every shaped link direction's utilization sampled during the replay, named as the simulator
    names its links, beside the default model's timeline; TCP's loss recovery counted in the replay's window;
    ``topoplan report`` draws the measured timeline."""
    from topoplan.core.topology_io import topology_from_dict
    from topoplan.reporting.report import load_result
    from topoplan.sim.network import build_network

    out = tmp_path / "em.json"
    code, stdout, err = run_cli("emulate", "-t", "paper003", "--set", "switches=2", "--set", "nodes_per_switch=2",
                                "--set", "cores_per_node=1", "--set", "kind=tree", "--set", "ocs=null",
                                "-T", "ring:np=4,bytes=1MB", "--no-calibrate", "--repeats", "1", "--timeline", "1ms",
                                "-o", out)
    assert code == 0, err
    assert "TCP during the replay:" in stdout and "link directions measured" in stdout
    res = json.loads(out.read_text())
    tcp = res["measured"]["tcp"]
    assert res["measured"]["tcp_window"] == "replay" and set(tcp) >= {"retransmitted_segments", "timeouts"}
    assert all(v >= 0 for v in tcp.values())
    names = set(build_network(topology_from_dict(res["topology_doc"])).link_name)
    measured, predicted = res["timeline"], res["predicted_timeline"]
    assert measured["dt_s"] == predicted["dt_s"] == pytest.approx(1e-3)
    assert {l["name"] for l in measured["links"]} <= names and {l["name"] for l in predicted["links"]} <= names
    # the ring sends 1 MB per rank over every node link: each node's up link busy for about the predicted time
    ups = [l for l in measured["links"] if l["class"] == "node-up"]
    assert len(ups) == 4
    busy = [sum(l["util"]) * measured["dt_s"] for l in ups]
    for b in busy:
        assert 0.5 * res["predicted_s"] < b < 1.5 * res["measured_s"] + measured["dt_s"], (busy, res["predicted_s"])
    assert max(max(l["util"]) for l in measured["links"]) < 1.3   # a sample's jitter, not more than the rate
    data = load_result(out)
    assert data.util.shape[0] == len(measured["links"]) and data.topo is not None
    assert _ours(os.getpid()) == []


@pytest.mark.parametrize("compute_scale, time_scale", [(1.0, 400.0), (2.0, 100.0), (0.0, 400.0)])
def test_replay_input_sleeps_the_computation_before_each_ranks_first_call(tmp_path, compute_scale, time_scale):
    """The simulator counts a rank's computation before its first call from the trace's start; the replayer's
    input carries the same gap (scaled), so ranks that start apart in the trace start apart in the run."""
    import numpy as np

    from topoplan.emulate.replayer import write_replay
    from topoplan.sim.replay_common import gaps

    trace = Trace.from_records([(0, "send", 1, 8, -1, 3, 5e-6, 6e-6), (0, "send", 2, 8, -1, 3, 9e-6, 9e-6),
                                (1, "recv", 0, 8, -1, 3, 1e-6, 6e-6), (2, "recv", 0, 8, -1, 3, 2e-6, 9e-6)], 3)
    write_replay(trace, tmp_path, compute_scale=compute_scale, time_scale=time_scale)
    expected = gaps(trace, np.searchsorted(trace.rank, np.arange(4)), compute_scale) * time_scale * 1e9
    written = [int(line.split()[-1]) for r in range(3) for line in (tmp_path / f"rank-{r}.txt").read_text().splitlines()]
    assert written == [round(g) for g in expected]
    assert compute_scale == 0.0 or written[0] == round(4e-6 * compute_scale * time_scale * 1e9)   # rank 0: 4 us late


def _fake_run(comm_s: float) -> dict:
    trace = Trace.from_records([(0, "send", 1, 8, -1, 2, 0.0, comm_s), (1, "recv", 0, 8, -1, 2, 0.0, comm_s)], 2)
    return {"trace": trace, "wall_s": 1.0, "cpu_idle": 0.9, "packets": 10, "drops": 0, "tcp": {},
            "tcp_window": "replay"}


@pytest.mark.parametrize("outcomes, attempts, stalled", [(["stall", 0.4], 2, 1), (["stall", "stall", 0.4], 3, 2),
                                                         ([0.4], 1, 0), (["stall", "stall", "stall"], None, 3)])
def test_a_stalled_run_is_run_again(outcomes, attempts, stalled):
    """A replay that stalls is stopped and run again, as one of the repeats; when every repeat stalls the
    stall is the error."""
    from topoplan.emulate.launch import StalledRun
    from topoplan.emulate.run import _measure

    todo, notes = list(outcomes), []

    def start():
        got = todo.pop(0)
        if got == "stall":
            raise StalledRun("mpirun: no progress for 30 s (nothing sent on the emulated network); stopped")
        return _fake_run(got)

    if attempts is None:
        with pytest.raises(StalledRun, match="no progress for 30 s"):
            _measure(None, start, 400.0, len(outcomes), notes.append)
        return
    m = _measure(None, start, 400.0, 3, notes.append)
    assert (m["attempts"], m["stalled_attempts"]) == (attempts, stalled)
    assert m["max_comm_time_s"] == pytest.approx(0.4 / 400.0) and len(notes) == stalled and not todo


def test_stall_s_is_refused_unless_positive():
    from topoplan.emulate.run import emulate

    topo = TreeTopology(kind="tree", nodes_per_switch=(2, 2))
    with pytest.raises(TopoplanError, match=r"field 'stall_s': a time above 0, got 0"):
        emulate(topo, Trace.from_records([(0, "barrier", -1, 0, -1, 2, 0, 0)], 2), sequential(2, topo), stall_s=0)


@pytest.mark.parametrize("scale, us", [(400, 1000), (1600, 4000), (100, 250), (1, 20), (0.5, 20)])
def test_the_idle_sleep_grows_with_the_scale(scale, us):
    from topoplan.emulate.run import idle_max_us
    assert idle_max_us(scale) == us
