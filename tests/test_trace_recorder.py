"""Trace your own MPI program (issue 18, point 5): the PMPI recorder, ``topoplan trace``, and OTF2 traces.

The MPI tests compile ``tests/data/mpi/*.c``, run them on 4 ranks under the real ``mpirun`` with the
recorder preloaded, and check every row of the trace against what the programs do; they are skipped
when Open MPI's ``mpicc``/``mpirun`` are missing. The OTF2 tests write archives with the ``otf2``
package's own writer, laid out as Score-P records MPI (a call's events inside its ``MPI_*`` region).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from topoplan.cli.main import main
from topoplan.core.errors import TopoplanError
from topoplan.traffic.trace import UNKNOWN_OP, read_trace

from otf2_archives import cut, pingpong, two_ranks

try:   # the OTF2 tests write archives with the otf2 package (a dependency); its enums name their events
    from otf2.enums import CollectiveOp
except ImportError:   # pragma: no cover
    CollectiveOp = None

DATA = Path(__file__).resolve().parent / "data" / "mpi"
HAVE_MPI = bool(shutil.which("mpicc") and shutil.which("mpirun"))
needs_mpi = pytest.mark.skipif(not HAVE_MPI, reason="needs Open MPI's mpicc and mpirun "
                               "(apt-get install libopenmpi-dev openmpi-bin)")
W = 0   # MPI_COMM_WORLD's id in the recorder's traces


def rows(trace, rank):
    """The rows of one rank without times: (op, peer, bytes, root, comm_size, comm, tag, req)."""
    sel = np.flatnonzero(trace.rank == rank)
    names = trace.op_names()
    return [(names[i], int(trace.peer[i]), int(trace.bytes[i]), int(trace.root[i]), int(trace.comm_size[i]),
             int(trace.comm[i]), int(trace.tag[i]), int(trace.req[i])) for i in sel]


def waits_sorted(rs):
    """Rows with each run of consecutive wait rows sorted (Waitany/Waitsome complete in any order)."""
    out, run = [], []
    for row in rs + [None]:
        if row is not None and row[0] == "wait":
            run.append(row)
            continue
        out += sorted(run)
        run = []
        if row is not None:
            out.append(row)
    return out


def check_times(trace):
    assert (trace.t_start >= 0).all() and (trace.t_end >= trace.t_start).all()
    for r in range(trace.n_ranks):
        ts = trace.t_start[trace.rank == r]
        assert (np.diff(ts) >= 0).all()


# -- the recorder under mpirun ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def mpi(tmp_path_factory):
    """A private build cache, the Open MPI settings of a test machine, and the test programs compiled."""
    if not HAVE_MPI:
        pytest.skip("needs Open MPI's mpicc and mpirun (apt-get install libopenmpi-dev openmpi-bin)")
    mp = pytest.MonkeyPatch()
    root = tmp_path_factory.mktemp("mpi")
    mp.setenv("XDG_CACHE_HOME", str(root / "cache"))
    mp.setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none")    # containers forbid CMA
    mp.setenv("OMPI_MCA_rmaps_base_oversubscribe", "1")              # 4 ranks on 2 cores
    mp.setenv("OMPI_ALLOW_RUN_AS_ROOT", "1")
    mp.setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    mp.setenv("TOPOPLAN_TRACE_QUIET", "1")
    exe = {}
    for name in ("ring", "features"):
        exe[name] = root / name
        subprocess.run(["mpicc", "-O1", "-o", str(exe[name]), str(DATA / f"{name}.c")], check=True)
    yield root, exe
    mp.undo()


@pytest.fixture(scope="module")
def ring(mpi):
    """ring.c traced with ``topoplan trace`` (the documented command)."""
    root, exe = mpi
    out = root / "ring-trace"
    assert main(["trace", "-q", "-o", str(out), "-np", "4", "--", str(exe["ring"])]) == 0
    return out, read_trace(out / "events.csv")


@pytest.fixture(scope="module")
def features(mpi):
    """features.c traced under a plain mpirun with LD_PRELOAD=$(topoplan trace --lib), as under Slurm."""
    root, exe = mpi
    from topoplan.traffic.recorder import build_library

    out = root / "features-trace"
    subprocess.run(["mpirun", "--oversubscribe", "-x", f"LD_PRELOAD={build_library()}", "-x",
                    f"TOPOPLAN_TRACE_DIR={out}", "-np", "4", str(exe["features"])], check=True)
    return out, read_trace(out / "events.csv")


@needs_mpi
def test_ring_rows(ring):
    """Every row of ring.c: ring of isend/irecv + waitall, blocking ring with MPI_ANY_SOURCE, collectives on
    MPI_COMM_WORLD and on a Comm_split sub-communicator (roots as world ranks), sendrecv."""
    _, t = ring
    assert t.n_ranks == 4 and len(t) == 48 and t.unknown_ops == {}
    for r in range(4):
        left, right, even = (r + 3) % 4, (r + 1) % 4, r % 2 == 0
        half = int(t.comm[(t.rank == r) & (t.comm_size == 2)][0])
        assert t.members(half).tolist() == ([2, 0] if even else [3, 1])   # key -rank: reversed order
        blocking = [("send", right, 40, -1, 4, W, 3, -1), ("recv", left, 40, -1, 4, W, 3, -1)]
        assert rows(t, r) == [
            ("irecv", left, 8000, -1, 4, W, 7, -1),
            ("isend", right, 8000, -1, 4, W, 7, -1),
            ("wait", left, 8000, -1, 4, W, -1, 0),      # MPI_Waitall: one wait per request, in array order
            ("wait", right, 8000, -1, 4, W, -1, 1),
            *(blocking if even else blocking[::-1]),    # the send to MPI_PROC_NULL is not recorded
            ("allreduce", -1, 128, -1, 4, W, -1, -1),
            ("bcast", -1, 1024, 2, 4, W, -1, -1),
            ("allreduce", -1, 16, -1, 2, half, -1, -1),
            ("bcast", -1, 8, 2 if even else 3, 2, half, -1, -1),   # sub-rank 0, as a world rank
            ("reduce", -1, 8, 0 if even else 1, 2, half, -1, -1),  # sub-rank 1
            ("sendrecv", right, 20, -1, 4, W, 9, -1),
        ]
    check_times(t)
    waits = (t.rank == 0) & (t.op_names() == "wait")
    assert len(set(t.t_start[waits])) == 1 and len(set(t.t_end[waits])) == 1   # the rows of one Waitall call


@needs_mpi
def test_ring_communicators_file(ring):
    out, _ = ring
    lines = (out / "communicators.csv").read_text().splitlines()
    assert lines[0] == "comm,size,world_ranks"
    got = sorted(tuple(x.split(",", 2)[1:]) for x in lines[1:])
    assert got == [("2", '"2;0"'), ("2", '"3;1"'), ("4", '"0;1;2;3"')]
    assert lines[1] == '0,4,"0;1;2;3"'


@needs_mpi
def test_ring_replays(ring, capsys):
    """The trace directory replays as written, through load_source like every -T option."""
    from topoplan.traffic.sources import load_source

    out, t = ring
    trace, traffic = load_source(str(out))
    assert len(trace) == len(t) and traffic.n_ranks == 4
    capsys.readouterr()
    assert main(["simulate", "-t", "paper003", "-T", str(out), "--json"]) == 0
    import json

    res = json.loads(capsys.readouterr().out)
    assert res["makespan_s"] > 0


@needs_mpi
def test_features_rows(features):
    """ANY_SOURCE irecv completed by MPI_Test, persistent requests, PROC_NULL sendrecv, sendrecv with two tags,
    alltoallv on a dup, gatherv/scatter/reduce_scatter/in-place allgather, scan (not modelled), Pcontrol,
    a communicator first seen in a call (MPI_COMM_SELF), completions by Waitany, Waitsome and Testall."""
    out, t = features
    assert t.n_ranks == 4 and t.unknown_ops == {"scan": 4}
    dup = int(t.comm[t.op_names() == "alltoallv"][0])
    assert dup != W and t.members(dup).tolist() == [0, 1, 2, 3]
    selfs = set()
    for r in range(4):
        left, right = (r + 3) % 4, (r + 1) % 4
        me_self = int(t.comm[(t.rank == r) & (t.comm_size == 1)][0])
        selfs.add(me_self)
        assert t.members(me_self).tolist() == [r]
        persistent = [("isend", right, 16, -1, 4, W, 2, -1), ("irecv", left, 16, -1, 4, W, 2, -1),
                      ("wait", right, 16, -1, 4, W, -1, 1), ("wait", left, 16, -1, 4, W, -1, 0)]
        shift = {0: [("send", 1, 16, -1, 4, W, 3, -1)], 3: [("recv", 2, 16, -1, 4, W, 3, -1)]}.get(
            r, [("sendrecv", r + 1, 16, -1, 4, W, 3, -1)])
        rounds = [row for tag in (20, 21, 22) for row in (
            ("irecv", left, 4, -1, 4, W, tag, -1), ("isend", right, 4, -1, 4, W, tag, -1),
            ("wait", left, 4, -1, 4, W, -1, 0), ("wait", right, 4, -1, 4, W, -1, 1))]
        assert waits_sorted(rows(t, r)) == waits_sorted([
            ("irecv", left, 12, -1, 4, W, 1, -1),   # posted from MPI_ANY_SOURCE for 256 bytes: the message it got
            ("isend", right, 12, -1, 4, W, 1, -1),
            ("wait", right, 12, -1, 4, W, -1, 1),
            ("wait", left, 12, -1, 4, W, -1, 0),    # the MPI_Test that completed it (failed tests: no row)
            *persistent, *persistent,
            *shift,
            ("isend", right, 8, -1, 4, W, 10 + r, -1), ("irecv", left, 8, -1, 4, W, 10 + left, -1),
            ("wait", right, 8, -1, 4, W, -1, 1), ("wait", left, 8, -1, 4, W, -1, 0),
            *[("alltoallv", i, 4 * (i + 1), -1, 4, dup, -1, -1) for i in range(4)],
            ("gather", -1, 4 * (r + 1), 3, 4, W, -1, -1),
            ("scatter", -1, 16, 1, 4, W, -1, -1),
            ("reduce_scatter", -1, 4 * [1, 1, 2, 2][r], -1, 4, W, -1, -1),
            ("barrier", -1, 0, -1, 4, W, -1, -1),
            ("allgather", -1, 12, -1, 4, W, -1, -1),
            ("unknown", -1, 4, -1, 4, W, -1, -1),    # MPI_Scan; the bcast between MPI_Pcontrol(0) and (1): none
            ("barrier", -1, 0, -1, 1, me_self, -1, -1),
            *rounds,                                  # Waitany x2, Waitsome, Testall
        ])
    assert len(selfs) == 4
    check_times(t)
    a2a = (t.rank == 2) & (t.op_names() == "alltoallv")
    assert len(set(t.t_start[a2a])) == 1   # the per-destination rows of one call share t_start


@needs_mpi
def test_library_cache(tmp_path):
    from topoplan.traffic.recorder import SOURCE, build_library

    lib = build_library(cache=tmp_path)
    assert lib.parent == tmp_path and lib.name.startswith("libtopoplan_pmpi-") and lib.suffix == ".so"
    stamp = lib.stat().st_mtime_ns
    assert build_library(cache=tmp_path) == lib and lib.stat().st_mtime_ns == stamp   # cached: not rebuilt
    edited = tmp_path / "topoplan_pmpi.c"
    edited.write_text(SOURCE.read_text() + "\n/* edited */\n")
    other = build_library(source=edited, cache=tmp_path)
    assert other != lib and other.is_file() and lib.is_file()
    bad = tmp_path / "bad.c"
    bad.write_text("int f( {\n")
    with pytest.raises(TopoplanError, match=r"bad\.c: mpicc failed \(exit 1\): .*error"):
        build_library(source=bad, cache=tmp_path)
    assert sorted(p.suffix for p in tmp_path.iterdir() if p.name.startswith("libtopoplan")) == [".so", ".so"]


@needs_mpi
def test_cli_lib_prints_the_library(mpi, capsys):
    assert main(["trace", "--lib"]) == 0
    path = Path(capsys.readouterr().out.strip())
    assert path.is_file() and path.parent == Path(os.environ["XDG_CACHE_HOME"]) / "topoplan"


@needs_mpi
def test_record_errors(mpi, tmp_path):
    from topoplan.traffic.recorder import record

    with pytest.raises(TopoplanError, match="no such program"):
        record([str(tmp_path / "nosuch")], tmp_path / "t")
    with pytest.raises(TopoplanError, match="no trace written: true did not reach MPI_Finalize"):
        record(["true"], tmp_path / "t", np=2)   # not an MPI program
    with pytest.raises(TopoplanError, match="exited with status"):
        record(["false"], tmp_path / "t", np=2, quiet=True)
    assert not (tmp_path / "t").exists()   # a failed run leaves no (empty) trace directory behind


@needs_mpi
@pytest.mark.parametrize("program", ["true", "false"])
def test_failed_trace_leaves_nothing(mpi, tmp_path, capsys, program):
    """``topoplan trace`` that fails (no trace, or the program fails) leaves no output directory, nor its parents
    it made; a directory that was there stays, without files of this run."""
    out = tmp_path / "a" / "b" / "trace"
    assert main(["trace", "-q", "-o", str(out), "-np", "2", "--", program]) == 2
    assert capsys.readouterr().err.startswith("error: ") and not (tmp_path / "a").exists()
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "notes.txt").write_text("mine\n")
    assert main(["trace", "-q", "-o", str(kept), "-np", "2", "--", program]) == 2
    assert sorted(p.name for p in kept.iterdir()) == ["notes.txt"]
    (tmp_path / "file").write_text("x")
    assert main(["trace", "-q", "-o", str(tmp_path / "file"), "-np", "2", "--", program]) == 2
    assert "not a directory" in capsys.readouterr().err


def test_no_mpicc(monkeypatch, capsys, tmp_path):
    """Without mpicc: one line that says what to install (no MPI needed for this test)."""
    from topoplan.traffic.recorder import build_library

    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("MPICC", raising=False)
    with pytest.raises(TopoplanError, match=r"^mpicc not found: install Open MPI's development package "
                                            r"\(apt-get install libopenmpi-dev\)"):
        build_library()
    assert main(["trace", "--lib"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: mpicc not found: install Open MPI") and err.count("\n") == 1
    assert main(["trace", "-o", str(tmp_path / "t"), "--", "./app"]) == 2
    assert "not found" in capsys.readouterr().err


def test_cli_needs_a_program(capsys):
    assert main(["trace", "-o", "x"]) == 2
    assert "no program to trace" in capsys.readouterr().err


# -- OTF2 ----------------------------------------------------------------------------------------------

NS = 1_000_000_000
T0 = 5 * NS   # the archive's first timestamp: the clock's global_offset


def us(x):
    return T0 + int(x * 1000)


def write_otf2_program(path):
    """A 4-rank program as Score-P records it; times in microseconds after T0 (ticks of 1 ns).

    Per rank r (left = r-1, right = r+1 mod 4): irecv + isend of 8000 bytes (tag 7), waitall; sendrecv of
    20 bytes (tag 9); allreduce of 128 bytes; bcast of 1024 from rank 2; Comm_split (create handle, no
    data); on the half {2, 0} / {3, 1}: allreduce of 16 bytes, reduce of 8 bytes to sub-rank 1; a user
    region; MPI_Put of 64 bytes and a scan (not modelled).
    """
    import otf2
    from otf2.enums import CollectiveOp, GroupType, Paradigm, RegionRole

    with otf2.writer.open(str(path), timer_resolution=NS) as w:
        d = w.definitions
        node = d.system_tree_node("node0", parent=d.system_tree_node("machine"))
        locs = [d.location("Master thread", group=d.location_group(f"MPI Rank {r}", system_tree_parent=node))
                for r in range(4)]
        d.group("MPI", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.MPI, members=locs)
        world = d.comm("MPI_COMM_WORLD", group=d.group("world", group_type=GroupType.COMM_GROUP,
                                                       paradigm=Paradigm.MPI, members=[0, 1, 2, 3]))
        halves = [d.comm(f"half{k}", parent=world, group=d.group(f"half{k}", group_type=GroupType.COMM_GROUP,
                                                                  paradigm=Paradigm.MPI, members=m))
                  for k, m in enumerate(([2, 0], [3, 1]))]
        win = d.rma_win("win", comm=world)
        reg = {name: d.region(name, paradigm=Paradigm.MPI, region_role=role) for name, role in (
            ("MPI_Irecv", RegionRole.POINT2POINT), ("MPI_Isend", RegionRole.POINT2POINT),
            ("MPI_Waitall", RegionRole.POINT2POINT), ("MPI_Sendrecv", RegionRole.POINT2POINT),
            ("MPI_Allreduce", RegionRole.COLL_ALL2ALL), ("MPI_Bcast", RegionRole.COLL_ONE2ALL),
            ("MPI_Comm_split", RegionRole.COLL_OTHER), ("MPI_Reduce", RegionRole.COLL_ALL2ONE),
            ("MPI_Put", RegionRole.RMA), ("MPI_Scan", RegionRole.COLL_OTHER))}
        compute = d.region("compute")
        undef = 0xFFFFFFFF
        for r in range(4):
            e = w.event_writer_from_location(locs[r])
            left, right = (r + 3) % 4, (r + 1) % 4
            half = halves[r % 2]
            me_half = [2, 0].index(r) if r % 2 == 0 else [3, 1].index(r)

            def call(name, t0, t1, *events):
                e.enter(us(t0), reg[name])
                for fn, *args in events:
                    getattr(e, fn)(us(t0 + 0.5), *args)
                e.leave(us(t1), reg[name])

            call("MPI_Irecv", 0, 1, ("mpi_irecv_request", 1))
            call("MPI_Isend", 2, 3, ("mpi_isend", right, world, 7, 8000, 2))
            call("MPI_Waitall", 4, 10 + r, ("mpi_isend_complete", 2), ("mpi_irecv", left, world, 7, 8000, 1))
            call("MPI_Sendrecv", 11 + r, 14 + r, ("mpi_send", right, world, 9, 20), ("mpi_recv", left, world, 9, 20))
            call("MPI_Allreduce", 20, 25, ("mpi_collective_begin",),
                 ("mpi_collective_end", CollectiveOp.ALLREDUCE, world, undef, 4 * 128, 4 * 128))
            call("MPI_Bcast", 26, 30, ("mpi_collective_begin",),
                 ("mpi_collective_end", CollectiveOp.BCAST, world, 2, 4 * 1024 if r == 2 else 0, 1024))
            call("MPI_Comm_split", 31, 32, ("mpi_collective_begin",),
                 ("mpi_collective_end", CollectiveOp.CREATE_HANDLE, world, undef, 0, 0))
            call("MPI_Allreduce", 33, 35, ("mpi_collective_begin",),
                 ("mpi_collective_end", CollectiveOp.ALLREDUCE, half, undef, 2 * 16, 2 * 16))
            call("MPI_Reduce", 36, 38, ("mpi_collective_begin",),
                 ("mpi_collective_end", CollectiveOp.REDUCE, half, 1, 8, 16 if me_half == 1 else 0))
            e.enter(us(40), compute)
            e.leave(us(50), compute)
            call("MPI_Put", 51, 52, ("rma_put", win, right, 64, 0))
            call("MPI_Scan", 53, 54, ("mpi_collective_begin",),
                 ("mpi_collective_end", CollectiveOp.SCAN, world, undef, (4 - r) * 4, (r + 1) * 4))
    return Path(path) / "traces.otf2"


def test_otf2_every_field(tmp_path):
    pytest.importorskip("otf2")
    from topoplan.traffic.otf2 import read_otf2

    t = read_otf2(write_otf2_program(tmp_path / "scorep"))
    assert t.n_ranks == 4 and len(t) == 4 * 11
    assert t.unknown_ops == {"RmaPut": 4, "scan": 4}
    assert t.members(W).tolist() == [0, 1, 2, 3]
    for r in range(4):
        left, right = (r + 3) % 4, (r + 1) % 4
        half = int(t.comm[(t.rank == r) & (t.comm_size == 2)][0])
        assert t.members(half).tolist() == ([2, 0] if r % 2 == 0 else [3, 1])
        assert rows(t, r) == [
            ("irecv", left, 8000, -1, 4, W, 7, -1),     # source, tag and size from its completion
            ("isend", right, 8000, -1, 4, W, 7, -1),
            ("wait", right, 8000, -1, 4, W, -1, 1),     # completions in the order recorded
            ("wait", left, 8000, -1, 4, W, -1, 0),
            ("sendrecv", right, 20, -1, 4, W, 9, -1),   # MpiSend + MpiRecv in one MPI_Sendrecv
            ("allreduce", -1, 128, -1, 4, W, -1, -1),
            ("bcast", -1, 1024, 2, 4, W, -1, -1),
            ("allreduce", -1, 16, -1, 2, half, -1, -1),   # Comm_split (create handle): no row
            ("reduce", -1, 8, 0 if r % 2 == 0 else 1, 2, half, -1, -1),
            ("unknown", right, 64, -1, 4, W, -1, -1),   # MPI_Put: kept (target, size), not modelled
            ("unknown", -1, 4, -1, 4, W, -1, -1),       # MPI_Scan: (r + 1) * 4 received / (r + 1)
        ]
        sel = np.flatnonzero(t.rank == r)
        # seconds from the clock's global_offset; a row spans its MPI region (Enter to Leave)
        spans = [(0, 1), (2, 3), (4, 10 + r), (4, 10 + r), (11 + r, 14 + r), (20, 25), (26, 30), (33, 35),
                 (36, 38), (51, 52), (53, 54)]
        np.testing.assert_allclose(t.t_start[sel], [a * 1e-6 for a, _ in spans], atol=1e-12)
        np.testing.assert_allclose(t.t_end[sel], [b * 1e-6 for _, b in spans], atol=1e-12)
    assert (t.op[t.rank == 0] == UNKNOWN_OP).sum() == 2


def test_otf2_without_regions(tmp_path):
    """Events outside MPI regions span themselves (a collective: begin to end); an MpiIrecv whose request was
    not recorded is a receive; MPI_Mprobe + MPI_Mrecv is a receive; MPI_COMM_SELF gets one id per rank."""
    otf2 = pytest.importorskip("otf2")
    from otf2.enums import CollectiveOp, GroupType, Paradigm

    from topoplan.traffic.otf2 import read_otf2

    with otf2.writer.open(str(tmp_path / "a"), timer_resolution=1000) as w:   # ticks of 1 ms
        d = w.definitions
        node = d.system_tree_node("n")
        locs = [d.location("t", group=d.location_group(f"r{r}", system_tree_parent=node)) for r in range(2)]
        d.group("MPI", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.MPI, members=locs)
        world = d.comm("MPI_COMM_WORLD", group=d.group("w", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI,
                                                       members=[0, 1]))
        self_ = d.comm("MPI_COMM_SELF", group=d.group("s", group_type=GroupType.COMM_SELF, paradigm=Paradigm.MPI,
                                                      members=[]))
        e0, e1 = (w.event_writer_from_location(x) for x in locs)
        e0.mpi_send(1000, 1, world, 3, 100)
        e0.mpi_send(1001, 1, world, 4, 50)
        e1.mpi_irecv(1002, 0, world, 3, 100, 77)          # request 77 never posted in the trace
        e1.mpi_probe(1003, 0, world, 4, 5)                # MPI_Mprobe: message 5
        e1.mpi_mrecv(1004, 5, 50)
        for e in (e0, e1):
            e.mpi_collective_begin(1010)
            e.mpi_collective_end(1012, CollectiveOp.BARRIER, self_, 0xFFFFFFFF, 0, 0)
    t = read_otf2(tmp_path / "a")   # the directory holding traces.otf2
    assert rows(t, 0)[:2] == [("send", 1, 100, -1, 2, W, 3, -1), ("send", 1, 50, -1, 2, W, 4, -1)]
    assert rows(t, 1)[:2] == [("recv", 0, 100, -1, 2, W, 3, -1), ("recv", 0, 50, -1, 2, W, 4, -1)]
    s0, s1 = rows(t, 0)[2], rows(t, 1)[2]
    assert s0[0] == s1[0] == "barrier" and s0[4] == 1 and s0[5] != s1[5]
    assert t.members(s0[5]).tolist() == [0] and t.members(s1[5]).tolist() == [1]
    np.testing.assert_allclose(t.t_start[t.rank == 1], [0.002, 0.004, 0.010])
    np.testing.assert_allclose(t.t_end[t.rank == 1], [0.002, 0.004, 0.012])


def test_otf2_replays_from_every_command(tmp_path, capsys):
    """``-T traces.otf2`` (and its directory) works like a trace CSV; not-modelled MPI calls are reported."""
    pytest.importorskip("otf2")
    from topoplan.traffic.sources import load_source

    anchor = write_otf2_program(tmp_path / "scorep")
    for spec in (anchor, anchor.parent):
        trace, traffic = load_source(str(spec))
        assert len(trace) == 44 and traffic.n_ranks == 4
        err = capsys.readouterr().err
        assert "skipped 8 rows with calls topoplan does not model: RmaPut (4), scan (4)" in err
    assert main(["simulate", "-t", "paper003", "-T", str(anchor)]) == 0


def test_otf2_bad_files(tmp_path):
    pytest.importorskip("otf2")
    from topoplan.traffic.otf2 import read_otf2

    bad = tmp_path / "x.otf2"
    bad.write_text("not an archive\n")
    with pytest.raises(TopoplanError, match=r"x\.otf2: not a readable OTF2 archive"):
        read_otf2(bad)
    with pytest.raises(TopoplanError, match="no such OTF2 archive"):
        read_otf2(tmp_path / "missing.otf2")


# -- OTF2 archives that are not what they claim (issue 36): one line, exit 2, never a wrong trace ---------------

def _collective(op, sizes, root=0xFFFFFFFF):
    """Both ranks call ``op``; rank r's (size sent, size received) is ``sizes[r]``."""
    def events(e, world):
        for r in range(2):
            e[r].mpi_collective_begin(10)
            e[r].mpi_collective_end(11, op, world, root, *sizes[r])
    return events


@pytest.mark.parametrize("damage, needle", [
    (lambda a: cut(a, "1.evt"), "cannot read the OTF2 archive: Invalid or inconsistent record data"),
    (lambda a: shutil.rmtree(a.parent / "traces"), "cannot read the OTF2 archive: File or directory does not exist"),
    (lambda a: (a.parent / "traces" / "0.evt").unlink(), "cannot read the OTF2 archive: File or directory does not"),
    (lambda a: cut(a, "0.def"), "OTF2 archive"),
    (lambda a: (a.parent / "traces.def").write_bytes((a.parent / "traces.def").read_bytes()[:40]),
     "not a readable OTF2 archive (Invalid or inconsistent record data"),
])
def test_otf2_damaged_archive_is_one_line(tmp_path, damage, needle):
    """Every read is guarded, not only the opening; the OTF2 library's own lines never reach the terminal.
    A fresh process each (as a user runs it): the C library keeps state between archives of one process."""
    import subprocess
    import sys

    pytest.importorskip("otf2")
    anchor = two_ranks(tmp_path / "a", pingpong)
    damage(anchor)
    for args in (["simulate", "-t", "paper003", "-T", str(anchor)],
                 ["traffic", str(anchor.parent), "-o", str(tmp_path / "m.csv")]):
        r = subprocess.run([sys.executable, "-m", "topoplan", *args], capture_output=True, text=True, timeout=600)
        assert r.returncode == 2 and r.stderr.startswith(f"error: {anchor}: ") and needle in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and "[OTF2]" not in r.stderr + r.stdout
    assert not (tmp_path / "m.csv").exists()


@pytest.mark.parametrize("events, needle", [
    (lambda e, w: pingpong(e, w, 1, 2 ** 61),
     r"rank 0's 1st call: field 'bytes': 2\.306e\+18 is over the limit of 1,152,921,504,606,846,976 bytes"),
    (_collective(CollectiveOp.BCAST, [(800, 0), (0, 400)], root=7),
     r"rank 0's MpiCollectiveEnd event: the BCAST root 7 is outside its communicator of 2 ranks"),
    (_collective(CollectiveOp.REDUCE, [(8, 16), (8, 0)]),   # a reduce without a root
     r"the REDUCE root -1 is outside its communicator"),
    (lambda e, w: (e[0].mpi_send(10, 5, w, 1, 8), e[1].mpi_recv(11, 0, w, 1, 8)),
     r"rank 0's MpiSend event: receiver 5 is outside its communicator of 2 ranks"),
    (_collective(CollectiveOp.ALLREDUCE, [(1000, 1000), (2000, 2000)]),   # rank 0 500 B, rank 1 1,000 B
     r"rank 1's 1st call: field 'bytes': 1000 bytes, but rank 0 passes 500 to the same allreduce"),
    (lambda e, w: None, r"no MPI events in the archive of 2 ranks: nothing to plan or replay"),
    (lambda e, w: [x.mpi_collective_end(5, CollectiveOp.SCAN, w, 0xFFFFFFFF, 4, 4) for x in e],
     r"2 MPI calls, none of them communication topoplan models \(scan 2\)"),
])
def test_otf2_values_that_would_misread(tmp_path, events, needle):
    """Sizes the CSV readers refuse, a root or peer outside the communicator (once root -1: its bytes vanished),
    ranks disagreeing on a collective's size, an archive without MPI communication (once a makespan of 0 s)."""
    otf2 = pytest.importorskip("otf2")  # noqa: F841
    from topoplan.traffic.otf2 import read_otf2

    anchor = two_ranks(tmp_path / "a", events)
    with pytest.raises(TopoplanError, match=needle):
        read_otf2(anchor)


def test_otf2_the_limit_is_the_csv_readers(tmp_path):
    """One rule for sizes: the largest message the CSV readers take is read from OTF2 too, one more byte is not."""
    pytest.importorskip("otf2")
    from topoplan.core.units import MAX_VALUE
    from topoplan.traffic.otf2 import read_otf2

    limit = int(MAX_VALUE["size"])
    t = read_otf2(two_ranks(tmp_path / "a", lambda e, w: pingpong(e, w, 1, limit)))
    assert t.bytes.max() == limit
    head = "rank,op,peer,bytes,root,comm_size,t_start,t_end\n"
    for nbytes, ok in ((limit, True), (limit + 2 ** 10, False)):
        csv = tmp_path / f"t{nbytes}.csv"
        csv.write_text(head + f"0,send,1,{nbytes},-1,2,0,0\n1,recv,0,{nbytes},-1,2,0,0\n")
        if ok:
            read_trace(csv)
        else:
            with pytest.raises(TopoplanError, match="over the limit"):
                read_trace(csv)
        otf = two_ranks(tmp_path / f"o{nbytes}", lambda e, w: pingpong(e, w, 1, nbytes))
        if ok:
            read_otf2(otf)
        else:
            with pytest.raises(TopoplanError, match="over the limit"):
                read_otf2(otf)
