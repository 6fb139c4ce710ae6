import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest


def test_cli_writes_plan_and_rankfile(run_cli, tmp_path):
    out, rf = tmp_path / "plan.json", tmp_path / "ranks.txt"
    code, _, err = run_cli("bcast", "-t", "paper000", "-a", "gen:nodes=16,racks=4,seed=1", "--root", "3",
                           "--bytes", "64kB", "--tree", "knomial", "-m", "bft", "--json", "-o", out,
                           "--rankfile", rf)
    assert code == 0, err
    doc = json.loads(out.read_text())
    for key in ("method", "seed", "objective", "metrics", "bound", "gap", "status", "wall_s", "order"):
        assert key in doc
    assert doc["order"][3] == doc["allocation_nodes"][3]
    assert doc["metrics"]["simulated_time_s"] > 0
    lines = rf.read_text().splitlines()
    assert len(lines) == 16 and lines[0].startswith("rank 0=")
    # the plan written by bcast validates, and a tampered order does not
    code, _, err = run_cli("validate", out, "-t", "paper000")
    assert code == 0, err
    doc["order"][1] = doc["order"][2]
    (tmp_path / "dup.json").write_text(json.dumps(doc))
    code, _, err = run_cli("validate", tmp_path / "dup.json", "-t", "paper000")
    assert code == 2 and "appears twice" in err
    moved = json.loads(out.read_text())
    moved["order"][3], moved["order"][4] = moved["order"][4], moved["order"][3]  # root (rank 3) changes node
    (tmp_path / "moved.json").write_text(json.dumps(moved))
    code, _, err = run_cli("validate", tmp_path / "moved.json", "-t", "paper000")
    assert code == 2 and "the root (rank 3) moved" in err
    outside = next(v for v in range(128) if v not in doc["allocation_nodes"])
    doc["order"][1] = outside
    (tmp_path / "out.json").write_text(json.dumps(doc))
    code, _, err = run_cli("validate", tmp_path / "out.json", "-t", "paper000")
    assert code == 2 and "not a permutation of 'allocation_nodes'" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("root, shown", [(99, "99"), (6, "6"), (-1, "-1"), ("2", "'2'"), (2.0, "2.0"), (True, "True"),
                                         (None, "None")])
@pytest.mark.parametrize("allocation", [True, False])
def test_validate_refuses_a_root_that_is_not_a_rank_of_the_order(run_cli, tmp_path, root, shown, allocation):
    """The root's check ran only for an int in range (and only with allocation_nodes): 99, -1 or "2" for an
    order of 6 were valid."""
    out = tmp_path / "plan.json"
    code, _, err = run_cli("bcast", "-t", "paper003", "-a", "gen:nodes=6,racks=2,seed=1", "--root", "2", "-m", "bft",
                           "--no-simulate", "-o", out)
    assert code == 0, err
    doc = json.loads(out.read_text())
    assert len(doc["order"]) == 6 and doc["root"] == 2
    if not allocation:
        del doc["allocation_nodes"]
    assert run_cli("validate", out, "-t", "paper003")[0] == 0
    doc["root"] = root
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    code, out_, err = run_cli("validate", bad, "-t", "paper003")
    assert code == 2 and out_ == "" and err == (f"error: {bad}: field 'root': expected a rank of the order (0 to 5), "
                                                f"got {shown}\n"), err


def test_cli_bad_input_is_one_line_error(run_cli, tmp_path):
    code, _, err = run_cli("bcast", "-t", "paper000", "-a", "gen:nodes=16", "--root", "99")
    assert code == 2 and "--root" in err
    code, _, err = run_cli("bcast", "-t", "paper000", "-a", "gen:nodes=16,seed=-1")
    assert code == 2 and "seed=-1" in err
    (tmp_path / "d.csv").write_text("a,b\n0,1\n1,0\n")
    code, _, err = run_cli("bcast", "-t", "paper000", "-a", "gen:nodes=2", "--delay", tmp_path / "d.csv")
    assert code == 2 and "header lacks host" in err


@pytest.mark.parametrize("header, code_want, needle", [
    ("NODE0000,Node0001,node0002", 0, None),
    ("node0000,node0001,NODE0000", 2, r"d\.csv:1: field 'NODE0000': the same host as column 'node0000'"),
])
def test_cli_delay_csv_host_names_ignore_case(run_cli, tmp_path, header, code_want, needle):
    (tmp_path / "alloc.txt").write_text("node0000\nnode0001\nnode0002\n")
    (tmp_path / "d.csv").write_text(header + "\n0,1,9\n1,0,9\n9,9,0\n")
    code, out, err = run_cli("bcast", "-t", "paper000", "-a", tmp_path / "alloc.txt", "--delay", tmp_path / "d.csv",
                             "-m", "dft", "--json")
    assert code == code_want, err
    if needle is None:
        assert json.loads(out)["problem"] == "bcast"
    else:
        assert out == "" and err.startswith("error: ") and len(err.splitlines()) == 1 and re.search(needle, err)


MPI_SCRIPT = r"""
import json, sys
import numpy as np
from mpi4py import MPI
from topoplan.problems.bcast.mpi_helper import reordered_comm, new_rank_keys
plan = json.load(open(sys.argv[1]))
world = MPI.COMM_WORLD
comm = reordered_comm(world, sys.argv[1])
keys = new_rank_keys(plan, world.Get_size())
root = plan["root"]
buf = np.zeros(8, dtype=np.int64)
if comm.Get_rank() == root:
    buf[:] = 1000 * world.Get_rank() + np.arange(8)
comm.Bcast(buf, root=root)
# the root's node keeps its rank, so the data must come from world rank `root`
ok = comm.Get_rank() == keys[world.Get_rank()] and np.array_equal(buf, 1000 * root + np.arange(8))
res = world.gather((world.Get_rank(), comm.Get_rank(), bool(ok)), root=0)
if world.Get_rank() == 0:
    print(json.dumps(res))
"""


def test_reordered_comm_under_real_mpirun(tmp_path):
    if shutil.which("mpirun") is None:
        pytest.skip("mpirun not installed (apt-get install openmpi-bin libopenmpi-dev)")
    pytest.importorskip("mpi4py", reason="mpi4py not in the venv")
    from topoplan.problems.bcast import BcastProblem, solve
    from topoplan.problems.bcast.allocation import cluster

    d = np.array([[0, 3, 1, 2], [3, 0, 4, 4], [1, 9, 0, 4], [2, 4, 4, 0]], dtype=float)
    p = BcastProblem.build(cluster(2, 4), placement=[0, 1, 2, 3], root=1, bytes_B=64, tree="binomial", delay=d)
    res = solve(p, "bft", simulate=False)
    assert res.plan["order"] != [0, 1, 2, 3]   # a real permutation
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(res.to_dict()))
    script = tmp_path / "run.py"
    script.write_text(MPI_SCRIPT)
    cmd = ["mpirun", "-np", "4", "--oversubscribe", "--allow-run-as-root", sys.executable, str(script), str(plan)]
    env = {"OMPI_MCA_plm_rsh_agent": "", "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
           "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = json.loads(out.stdout.strip().splitlines()[-1])
    from topoplan.problems.bcast.mpi_helper import new_rank_keys

    want = new_rank_keys(res.to_dict(), 4)
    assert [r[1] for r in sorted(rows)] == want and all(r[2] for r in rows)
    assert sorted(want) == [0, 1, 2, 3] and want != [0, 1, 2, 3]


def test_library_errors_name_fields_and_the_cli_names_flags(run_cli):
    from topoplan.problems.bcast import BcastProblem
    from topoplan.problems.bcast.allocation import cluster
    from topoplan.core.errors import TopoplanError

    topo = cluster(2, 4)
    for kw, needle in (({"placement": []}, "field 'placement': empty allocation"),
                       ({"placement": [0, 1], "root": 5}, "field 'root': 5 must be a rank between 0 and 1"),
                       ({"placement": [0, 1], "tree": "star"}, "field 'tree': 'star': choose one of"),
                       ({}, "field 'placement': the allocation is required")):
        with pytest.raises(TopoplanError) as e:
            BcastProblem.build(topo, **kw)
        assert str(e.value).startswith(needle) and "--" not in str(e.value)
    with pytest.raises(TopoplanError, match="field 'traffic': a Bcast problem's traffic is the Bcast itself"):
        BcastProblem.build(topo, [0, 1])      # the old shape: the allocation where the traffic goes
    code, _, err = run_cli("bcast", "-t", "paper000", "-a", "gen:nodes=4", "--tree", "star")
    assert code == 2 and "--tree: 'star': choose one of" in err
    code, _, err = run_cli("place", "-t", "paper003", "-T", "ring:np=8,bytes=1MB", "-m", "metis", "--init", "greedy")
    assert code == 2 and "--init: method metis has no start (methods that take one: anneal, ilp, joint)" in err


@pytest.mark.parametrize("args,flag", [(("bcast", "-t", "paper000", "-a", "gen:nodes=4", "--bytes", "-5"), "--bytes"),
                                       (("bcast", "-t", "paper000", "-a", "gen:nodes=4", "--tree", "auto", "--short-msg", "abc"),
                                        "--short-msg"),
                                       (("bcast", "-t", "paper000", "-a", "gen:nodes=4", "--tree", "auto", "--long-msg", "3XB"),
                                        "--long-msg"),
                                       (("place", "-t", "paper003", "-T", "ring:np=8,bytes=1MB", "--threshold",
                                         "foo"), "--threshold")])
def test_a_bad_size_option_is_named_by_its_flag(run_cli, args, flag):
    """A size option the command cannot read names the flag, not the library's field ('bytes', 'threshold')."""
    code, _, err = run_cli(*args)
    assert code == 2 and err.startswith(f"error: {flag}: ") and "field '" not in err, err


def test_export_of_a_bcast_plan_points_to_its_rankfile(run_cli, tmp_path):
    """A Bcast plan given to export said only \"field 'rank_to_node': missing\"."""
    plan, out = tmp_path / "b.json", tmp_path / "rf"
    code, _, err = run_cli("bcast", "-t", "paper000", "-a", "gen:nodes=4", "--no-simulate", "-o", plan)
    assert code == 0, err
    code, _, err = run_cli("export", "ompi4", "-p", plan, "-o", out)
    assert code == 2 and "a Bcast order, not a placement (`topoplan bcast --rankfile FILE`" in err and not out.exists()


def test_score_simulated_is_refused_with_no_simulate(run_cli, tmp_path):
    """``--no-simulate --score simulated`` simulated the orders anyway and reported a simulated time."""
    out = tmp_path / "b.json"
    code, stdout, err = run_cli("bcast", "-t", "paper000", "-a", "gen:nodes=4", "--no-simulate", "--score",
                                "simulated", "-o", out)
    assert (code, stdout) == (2, "") and not out.exists()
    assert err == "error: --score simulated simulates the orders: it cannot be used with --no-simulate\n"


@pytest.mark.parametrize("tree, option, applies", [("binomial", ("--k", "8"), "knomial and auto"),
                                                   ("knomial", ("--short-msg", "4KiB"), "auto"),
                                                   ("scatter-ring", ("--long-msg", "1MiB"), "auto and scatter-allgather")])
def test_a_tree_option_for_another_tree_is_refused(run_cli, tmp_path, tree, option, applies):
    """``--tree binomial --k 8`` ran the binomial tree and ignored --k without a word."""
    out = tmp_path / "b.json"
    code, stdout, err = run_cli("bcast", "-t", "paper000", "-a", "gen:nodes=8", "--tree", tree, *option, "-o", out)
    assert (code, stdout) == (2, "") and not out.exists()
    assert err == f"error: {option[0]}: applies to the {applies} trees, not --tree {tree}\n"


@pytest.mark.parametrize("tree, option", [("auto", ("--k", "8")), ("auto", ("--short-msg", "4KiB")),
                                          ("scatter-allgather", ("--long-msg", "1MiB")), ("knomial", ("--k", "2"))])
def test_a_tree_option_for_its_tree_is_taken(run_cli, tree, option):
    code, _, err = run_cli("bcast", "-t", "paper000", "-a", "gen:nodes=8", "--tree", tree, *option, "--no-simulate")
    assert code == 0, err
