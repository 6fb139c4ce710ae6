"""The real entry point: usage errors and bad input are one message, exit status 2, no traceback."""

import subprocess
import sys
from pathlib import Path

import pytest


def _run(*args):
    return subprocess.run([sys.executable, "-m", "planner", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args, needle", [
    (["simulate", "--no-such-option"], "No such option"),
    (["topo", "query", "-i", "x.txt"], "Missing argument"),
    (["analyze", "-t", "no-such-preset", "-T", "ring:np=4,bytes=1KB"], "unknown topology preset"),
    (["analyze", "-t", "paper003", "-T", "ring:np=4,bytes=-1KB"], "ring"),
])
def test_bad_invocations_exit_2_without_traceback(args, needle):
    r = _run(*args)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr + r.stdout
    assert needle in r.stderr + r.stdout


def test_help_works():
    r = _run("--help")
    assert r.returncode == 0 and "simulate" in r.stdout


def _audit_cases(tmp):
    (tmp / "bin.txt").write_bytes(b"\x00\xff\x10binary")
    (tmp / "latin1.txt").write_bytes(b"node0001\nn\xe9ud\n")
    (tmp / "place.json").write_text('{"rank_to_node": [0, 1]}')
    dump = tmp / "dump.txt"
    dump.write_bytes((Path(__file__).parent / "data" / "ib" / "tree2" / "ibnetdiscover.txt").read_bytes())
    (tmp / "float.json").write_text('{"rank_to_node": [0, 1.5]}')
    (tmp / "m1e308.csv").write_text("src,dst,bytes,msgs\n0,1,1e308,1\n")
    (tmp / "m.csv").write_text("src,dst,bytes,msgs\n0,1,100,1\n")
    head = "rank,op,peer,bytes,root,comm_size,t_start,t_end\n"
    (tmp / "peer7.csv").write_text(head + "0,send,7,1000,-1,2,0.0,0.001\n1,recv,0,1000,-1,2,0.0,0.001\n")
    (tmp / "nanbytes.csv").write_text(head + "0,send,1,nan,-1,2,0.0,0.001\n1,recv,0,nan,-1,2,0.0,0.001\n")
    (tmp / "bad.csv.gz").write_bytes(b"\x1f\x8b\x08\x00trunc")
    (tmp / "huge.conf").write_text("SwitchName=s0 Nodes=n[0-999999999]\n")
    (tmp / "flows.json").write_text('{"tree": {"leaves": 1000000000, "hosts_per_leaf": 2, "down_bw": 1e9, '
                                    '"up_bw": 1e9, "down_lat": 0, "up_lat": 0}, "flows": []}')
    (tmp / "unmatched.csv").write_text(head + "0,send,1,1000,-1,2,0.0,0.001\n")
    (tmp / "cs0.csv").write_text(head + "0,allreduce,-1,8,-1,0,0.0,0.001\n")
    (tmp / "plhuge.csv").write_text("rank,node\n0,1e30\n")
    (tmp / "sw.yaml").write_text("instances: [{topology: paper003, traffic: 'ring:np=-1,bytes=1MB'}]\n"
                                 "methods: [sp]\nproblem: circuits\n")
    return [
        (["show", "paper003", "-o", tmp], "is a directory"),
        (["traffic", "ring:np=8,bytes=1MB", "-o", tmp / "no" / "x.csv"], "does not exist"),
        (["export", "mpich", "-p", tmp / "place.json", "--hosts", tmp / "bin.txt", "-o", tmp / "o"], "binary data"),
        (["bcast", "-t", "paper003", "-a", tmp / "latin1.txt"], "latin1.txt:2: not UTF-8"),
        (["bcast", "-t", "paper003", "-a", "gen:nodes=8", "-o", tmp / "b.json", "--rankfile", tmp / "b.json"],
         "given as both"),
        (["topo", "convert", "-i", dump, "-o", dump], "would overwrite the input"),
        (["circuits", "-t", "paper003", "-T", "ring:np=16,bytes=1MB", "-m", "anneal", "--time-limit", "inf"],
         "time_limit"),
        (["cost", "--eps-switch-power", "inf"], "eps_switch_power_W"),
        (["traffic", "ring:np=99999999999,bytes=1MB", "-o", tmp / "r.csv"], "over the limit"),
        (["traffic", "npb:kernel=cg,class=S,np=4,iters=999999999", "-o", tmp / "r.csv"], "100,000,000 rows"),
        (["show", "paper003", "--set", "switches=1000000000"], "over the limit"),
        (["simulate", "-t", "paper003", "-T", "ring:np=8,bytes=1MB", "--iters", "0"], "--iters"),
        (["simulate", "-t", "paper003", "-T", "ring:np=8,bytes=1MB", "--compute-scale", "nan"], "compute_scale"),
        (["bound", "alltoall", "-t", "kcomputer", "--bytes", "32KiB", "--compare"], "over the limit"),
        (["place", "-t", "paper003", "-q"], "No such option: -q"),
        # round 2
        (["validate", tmp / "float.json", "-t", "paper003"], "item 1: expected an integer, got 1.5"),
        (["traffic", tmp / "m1e308.csv", "-o", tmp / "r.csv"], "over the limit"),
        (["traffic", tmp / "peer7.csv", "-o", tmp / "r.csv"], "rank 7 is outside MPI_COMM_WORLD"),
        (["traffic", tmp / "nanbytes.csv", "-o", tmp / "r.csv"], "not a number: 'nan'"),
        (["traffic", tmp / "bad.csv.gz", "-o", tmp / "r.csv"], "cannot read traffic file"),
        (["traffic", "ring:np=4,bytes=" + "9" * 5000, "-o", tmp / "r.csv"], "too long"),
        (["show", tmp / "huge.conf"], "more than 1,048,576 hosts"),
        (["simulate", "-t", "paper003", "-T", "ring:np=8,bytes=1MB", "--timeline", "1e-15"], "coarser"),
        (["simulate", "-t", "paper003", "-T", tmp / "m.csv", "--iters", "1000000000000"], "over the limit"),
        (["simulate", "--flows", tmp / "flows.json"], "over the limit"),
        (["compare", "circuits", "-t", "paper003", "-T", "ring:np=8,bytes=1MB", "--methods", ",,"], "no method"),
        (["cost", "-n", "4", "-k", "10"], "edge switches"),
        (["serve", "-i", dump, "-p", "0", "--poll", "nan"], "--poll"),
        # round 3
        (["simulate", "-t", "paper003", "-T", tmp / "unmatched.csv"], "unmatched send: rank 1"),
        (["analyze", "-t", "paper003", "-T", tmp / "cs0.csv"], "field 'comm_size'"),
        (["analyze", "-t", "paper003", "-T", "ring:np=8,bytes=1MB", "-p", tmp / "plhuge.csv"], "out of range"),
        (["cost", "-l", "0"], "upper_switches"),
        (["serve", "-i", dump, "-p", "0", "--host", "999.1.1.1"], "cannot resolve"),
        (["bound", "alltoall", "-t", "mesh10x10x10", "--bytes", "1KiB", "--simulate", "a2a", "--method", "bogus"],
         "--method"),
        (["sweep", tmp / "sw.yaml", "--dry-run"], "instances[0].traffic'"),
    ]


def test_audit_cases_are_one_line_errors(tmp_path, run_cli):
    """Inputs found by the CLI audit: each is exit 2 and one line on stderr, no traceback, nothing written."""
    for args, needle in _audit_cases(tmp_path):
        before = sorted(p.name for p in tmp_path.iterdir())
        code, out, err = run_cli(*args)
        assert code == 2, (args, err)
        assert needle in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, (args, err)
        assert sorted(p.name for p in tmp_path.iterdir()) == before, args


def test_simulate_refuses_circuits_planned_for_another_placement(tmp_path, run_cli):
    plan = tmp_path / "c.json"
    code, _, err = run_cli("circuits", "-t", "paper003", "-T", "ring:np=64,bytes=1MB", "-p", "round-robin",
                           "-m", "greedy", "-o", plan)
    assert code == 0, err
    code, _, err = run_cli("simulate", "-t", "paper003", "-T", "ring:np=64,bytes=1MB", "--circuits", plan)
    assert code == 2 and "made for another placement (round-robin)" in err
    for p in ("round-robin", plan):  # the same placement, named or taken from the plan
        code, _, err = run_cli("simulate", "-t", "paper003", "-T", "ring:np=64,bytes=1MB", "-p", p, "--circuits", plan)
        assert code == 0, err
