"""Ctrl-C, special files, all-or-nothing outputs and concurrent sweeps (issue 17)."""

import json
import os
import signal
import socket
import subprocess
import sys

import pytest

from topoplan.core import interrupt
from topoplan.core.errors import TopoplanError
from topoplan.core.io import atomic_write, check_writable, output_group, write_json

from timing import Stopwatch, sigint_default, wait_for_cpu


def _run_and_interrupt(args, cpu_s):
    """Run the CLI and press Ctrl-C once it has done ``cpu_s`` seconds of work (its imports and set-up take
    about 2 s of CPU): a fixed sleep hit it while it was still importing when the machine was loaded."""
    p = subprocess.Popen([sys.executable, "-m", "topoplan", *map(str, args)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, preexec_fn=sigint_default)
    wait_for_cpu(p, cpu_s)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=600)
    return p.returncode, out, err


@pytest.mark.parametrize("cmd", [
    ["place", "-t", "paper003", "-T", "neighbor2d:rows=16,cols=16,bytes=4MB", "-m", "anneal"],
    ["circuits", "-t", "paper003", "-T", "neighbor2d:rows=16,cols=16,bytes=4MB", "-m", "anneal"],
    ["bcast", "-t", "paper003", "-a", "gen:nodes=64", "-m", "anneal"],
])
def test_first_ctrl_c_writes_the_best_plan_and_exits_130(tmp_path, cmd):
    out = tmp_path / "plan.json"
    code, _, err = _run_and_interrupt([*cmd, "--time-limit", "600", "-o", out], cpu_s=4.0)
    assert code == 130, err
    doc = json.loads(out.read_text())   # stopped by Ctrl-C, not by the limit
    assert doc["status"] == "interrupted" and "Ctrl-C" in doc["message"]
    assert "interrupted" in err.splitlines()[-1] and "Traceback" not in err


def test_ctrl_c_outside_a_search_is_exit_130_without_output(tmp_path):
    """A long command that is not a search (here a big generated trace): exit 130, nothing written."""
    out = tmp_path / "t.csv"
    code, _, err = _run_and_interrupt(["traffic", "npb:kernel=cg,class=C,np=256", "--trace", "-o", out], cpu_s=3.0)
    assert code == 130 and err.strip().splitlines()[-1] == "error: interrupted"
    assert not out.exists() and not [p for p in tmp_path.iterdir()]


def test_second_ctrl_c_aborts():
    """The signals are raised in this thread (``raise_signal``), whose handler runs before the call returns:
    ``os.kill`` of this process may hand SIGINT to another of its threads (a solver's), and the handler then
    runs whenever that thread is scheduled, which under load was after the assertions. Python's own SIGINT
    handler is installed first: a suite started in the background of a script has SIGINT ignored, and
    graceful_stop then (rightly) installs nothing."""
    interrupt.reset()
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            with interrupt.graceful_stop(note=""):
                signal.raise_signal(signal.SIGINT)
                assert interrupt.stop_requested()
                signal.raise_signal(signal.SIGINT)   # the handler raises here
                pytest.fail("the second Ctrl-C did not abort")
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, before)
        interrupt.reset()


def test_solve_marks_an_interrupted_search():
    import topoplan
    from topoplan.core.topology_io import load_topology

    prob = topoplan.PlacementProblem.build(load_topology("paper003"),
                                          topoplan.load_traffic("neighbor2d:rows=16,cols=16,bytes=4MB"))
    import threading

    threading.Timer(1.0, interrupt.request_stop).start()
    watch = Stopwatch()
    res = topoplan.solve(prob, method="anneal", time_limit=600, seed=0)
    assert watch.cpu_s < 10 and res.status == "interrupted"   # work, not wall time: the machine may be loaded
    topoplan.validate(res.to_dict(), load_topology("paper003"))   # the best plan so far is a valid plan
    interrupt.reset()


# -- special files ---------------------------------------------------------------------------

def test_dev_null_is_written_into_not_replaced(run_cli):
    before = os.stat("/dev/null")
    code, _, err = run_cli("show", "paper003", "-o", "/dev/null")
    assert code == 0, err
    after = os.stat("/dev/null")
    assert (after.st_ino, after.st_rdev) == (before.st_ino, before.st_rdev)


def test_a_fifo_stays_a_fifo(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []

    import threading

    def reader():
        with open(fifo, "rb") as fh:
            got.append(fh.read())

    t = threading.Thread(target=reader)
    t.start()
    write_json(fifo, {"a": 1})
    t.join(5)
    assert json.loads(got[0]) == {"a": 1}
    import stat

    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_socket_is_refused(tmp_path):
    path = tmp_path / "s"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    try:
        with pytest.raises(TopoplanError, match="is a socket, not an output file"):
            check_writable(path)
    finally:
        s.close()


# -- standard output -------------------------------------------------------------------------

IB_FATTREE = os.path.join(os.path.dirname(__file__), "data", "ib", "fattree")
REPORT_RESULT = os.path.join(os.path.dirname(__file__), "data", "report_result.json")


@pytest.mark.parametrize("args, first_line", [
    (["show", "paper003"], "kind: hybrid"),
    (["traffic", "ring:np=4,bytes=1MB"], "src,dst,bytes,msgs"),
    (["bcast", "-t", "paper003", "-a", "gen:nodes=16", "-m", "dft"], "{"),
    (["circuits", "-t", "paper003", "-T", "ring:np=64,bytes=1MB", "-m", "three-step", "--no-simulate"], "{"),
    (["topo", "delay", "-i", os.path.join(IB_FATTREE, "ibnetdiscover.txt"), "--lft", os.path.join(IB_FATTREE, "lft"),
      "--hosts", "hosts"], "node001,node002,node003,node004"),
    (["report", REPORT_RESULT], "<!DOCTYPE html>"),
])
def test_output_dash_is_standard_output(tmp_path, monkeypatch, run_cli, args, first_line):
    """``-o -`` prints the document on standard output (and nothing else: the command's messages go to
    standard error); no file named '-' is written."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hosts").write_text("node[001-004]\n")
    code, out, err = run_cli(*args, "-o", "-")
    assert code == 0, err
    assert out.splitlines()[0] == first_line
    if first_line == "{":
        json.loads(out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hosts"]


@pytest.mark.parametrize("args, message", [
    (["report", REPORT_RESULT, "-o", "r.html", "--png", "-"],
     "--png -: a PNG image (binary) cannot go to standard output; give a file name"),
    (["trace", "-o", "-", "--", "true"], "--output -: a trace directory cannot go to standard output; give a "
                                         "directory name"),
    (["sweep", "s.yaml", "-o", "-"], "--output -: a sweep table (read back to resume the sweep) cannot go"),
    (["export", "routes", "-p", "plan.json", "-o", "-"],
     "--output -: a directory of routes files cannot go to standard output; give a directory name"),
    (["bcast", "-t", "paper003", "-a", "gen:nodes=16", "-m", "dft", "--json", "-o", "-"],
     "--json: prints to standard output, where --output - writes too; give one of them"),
    (["bcast", "-t", "paper003", "-a", "gen:nodes=16", "-m", "dft", "--rankfile", "-", "-o", "-"],
     "- (standard output): given as both --rankfile and --output"),
])
def test_output_dash_is_refused_where_it_cannot_be_standard_output(tmp_path, monkeypatch, run_cli, args, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.yaml").write_text("name: s\noutput: t.csv\nproblem: circuits\nmethods: [none]\n"
                                     "instances: [{topology: paper003, traffic: 'ring:np=8,bytes=1MB'}]\n")
    (tmp_path / "plan.json").write_text("{}")
    code, out, err = run_cli(*args)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and message in err and len(err.splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.json", "s.yaml"]


def test_binary_data_to_standard_output_is_refused(capsys):
    with pytest.raises(TopoplanError, match=r"^- \(standard output\): binary data, not text; give a file name$"):
        atomic_write("-", b"\x89PNG")
    with output_group():
        atomic_write("-", "a document\n")
        assert capsys.readouterr().out == ""     # written with the group, when it succeeded
    assert capsys.readouterr().out == "a document\n"


# -- all or nothing --------------------------------------------------------------------------

def test_output_group_is_all_or_nothing(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.txt"
    a.write_text("old")
    with pytest.raises(RuntimeError):
        with output_group():
            write_json(a, {"new": 1})
            atomic_write(b, "x")
            raise RuntimeError("the second output failed")
    assert a.read_text() == "old" and not b.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json"]   # no temporary files left
    with output_group():
        write_json(a, {"new": 1})
        atomic_write(b, "x")
        assert a.read_text() == "old"          # renamed into place only at the end
    assert json.loads(a.read_text()) == {"new": 1} and b.read_text() == "x"


def test_bcast_plan_and_rankfile_both_or_neither(tmp_path, run_cli, monkeypatch):
    import topoplan.cli.commands.common as common

    def full_disk(path, obj):
        raise TopoplanError(f"{path}: cannot write: No space left on device")

    monkeypatch.setattr(common, "write_json", full_disk)
    plan, rankfile = tmp_path / "b.json", tmp_path / "rankfile"
    code, _, err = run_cli("bcast", "-t", "paper003", "-a", "gen:nodes=16", "-m", "dft", "--rankfile", rankfile,
                           "-o", plan)
    assert code == 2 and "No space left" in err
    assert list(tmp_path.iterdir()) == []


# -- concurrent sweeps -----------------------------------------------------------------------

def test_a_second_sweep_on_one_table_is_refused(tmp_path, run_cli):
    from topoplan.batch.sweep import table_lock

    cfg = tmp_path / "s.yaml"
    cfg.write_text("name: s\noutput: t.csv\nproblem: circuits\nmethods: [none]\n"
                   "instances: [{topology: paper003, traffic: 'ring:np=8,bytes=1MB'}]\n")
    with table_lock(tmp_path / "t.csv"):
        code, _, err = run_cli("sweep", cfg, "--threads", "--workers", "1")
    assert code == 2 and "another sweep is writing this table" in err and f"process {os.getpid()}" in err
    assert not (tmp_path / "t.csv").exists()
    assert not (tmp_path / ".t.csv.lock").exists()
