"""Launcher exports: formats, host names, refusal of invalid plans, and a real mpirun with the rankfile."""

import json
import os
import shutil
import socket
import subprocess
import sys

import numpy as np
import pytest

from topoplan.core.errors import TopoplanError
from topoplan.reporting.export import export, read_hostfile, render
from topoplan.core.placement import Placement
from topoplan.core.topology import TreeTopology


def _topo(nodes=2, cores=2, names=None):
    return TreeTopology(kind="tree", nodes_per_switch=(nodes,), cores_per_node=cores, hostnames=names)


def test_formats_follow_rank_order():
    pl = Placement(np.array([1, 0, 1]), np.array([0, 1, 1]))
    hosts = ["a", "b"]
    assert render("ompi4", pl, hosts).splitlines() == ["rank 0=b slot=0", "rank 1=a slot=1", "rank 2=b slot=1"]
    assert render("ompi5", pl, hosts) == render("ompi4", pl, hosts)
    in_order = Placement(np.array([1, 0, 1]), np.array([0, 0, 1]))   # a node's ranks on its slots in rank order
    assert render("mpich", in_order, hosts).split() == ["b", "a", "b"]
    assert render("slurm", in_order, hosts).split() == ["b", "a", "b"]
    doc = json.loads(render("json", pl, hosts))
    assert [(d["host"], d["slot"]) for d in doc["ranks"]] == [("b", 0), ("a", 1), ("b", 1)]


def test_invalid_placement_is_not_written(tmp_path):
    topo = _topo()
    clash = Placement(np.array([0, 0]), np.array([1, 1]))
    with pytest.raises(TopoplanError, match="share node 0 slot 1"):
        export("ompi4", clash, tmp_path / "rf", topo=topo)
    too_big = Placement(np.array([0]), np.array([2]))
    with pytest.raises(TopoplanError, match="2 cores"):
        export("slurm", too_big, tmp_path / "rf", topo=topo)
    assert not (tmp_path / "rf").exists()
    with pytest.raises(TopoplanError, match="unknown export format"):
        render("pbs", Placement(np.array([0]), np.array([0])), ["a"])


def test_hostfile_two_forms(tmp_path):
    f = tmp_path / "h1"
    f.write_text("# ids\n1 beta\n0 alpha\n")
    assert read_hostfile(f) == ["alpha", "beta"]
    g = tmp_path / "h2"
    g.write_text("x\ny\n")
    assert read_hostfile(g) == ["x", "y"]
    bad = tmp_path / "h3"
    bad.write_text("0 a\n2 c\n")
    with pytest.raises(TopoplanError, match="node 1 has no host"):
        read_hostfile(bad)
    with pytest.raises(TopoplanError, match="3 nodes"):
        read_hostfile(g, n_nodes=3)
    dup = tmp_path / "h4"
    dup.write_text("a\nb\na\n")
    with pytest.raises(TopoplanError, match="'a' is named for node 0 and node 2"):
        read_hostfile(dup)
    huge = tmp_path / "h5"
    huge.write_text("0 a\n99999999999 b\n")
    with pytest.raises(TopoplanError, match="h5:2: field 'node_id': 99999999999 is over the limit"):
        read_hostfile(huge)


def test_topology_names_used(tmp_path):
    topo = _topo(names=("n-a", "n-b"))
    cmd = export("slurm", Placement(np.array([1, 0]), np.array([0, 0])), tmp_path / "hf", topo=topo)
    assert (tmp_path / "hf").read_text().split() == ["n-b", "n-a"]
    assert cmd.startswith(f"SLURM_HOSTFILE={tmp_path / 'hf'} srun --distribution=arbitrary -n 2")


def test_cli_place_then_export(tmp_path):
    from typer.testing import CliRunner

    from topoplan.cli.main import build_app

    app, run = build_app(), CliRunner()
    plan = tmp_path / "p.json"
    r = run.invoke(app, ["place", "-t", "paper003", "-T", "neighbor2d:rows=8,cols=8,bytes=1MB,iters=1",
                         "-m", "metis", "-o", str(plan)])
    assert r.exit_code == 0, r.output
    r = run.invoke(app, ["export", "mpich", "-p", str(plan), "-t", "paper003", "-o", str(tmp_path / "mf")])
    assert r.exit_code == 0, r.output
    node = json.loads(plan.read_text())["rank_to_node"]
    assert (tmp_path / "mf").read_text().split() == [f"node{k:04d}" for k in node]


def test_cli_export_checks_the_recorded_topology(tmp_path, run_cli):
    """With --hosts and no -t, the topology the plan records (with its --set) still checks the cores."""
    plan = tmp_path / "p.json"
    code, _, err = run_cli("place", "-t", "paper003", "--set", "cores_per_node=2", "-T", "ring:np=8,bytes=1MB",
                           "-m", "sequential", "-o", plan)
    assert code == 0, err
    hosts = tmp_path / "hosts"
    hosts.write_text("".join(f"h{i}\n" for i in range(64)))
    code, _, err = run_cli("export", "mpich", "-p", plan, "--hosts", hosts, "-o", tmp_path / "ok")
    assert code == 0, err
    doc = json.loads(plan.read_text())
    doc["rank_to_node"], doc["rank_to_slot"] = [0] * 3 + doc["rank_to_node"][3:], None  # 3 ranks on a 2-core node
    plan.write_text(json.dumps(doc))
    code, _, err = run_cli("export", "mpich", "-p", plan, "--hosts", hosts, "-o", tmp_path / "bad")
    assert code == 2 and "node 0" in err and not (tmp_path / "bad").exists()
    doc["topology_spec"] = str(tmp_path / "gone.yaml")
    plan.write_text(json.dumps(doc))
    code, _, err = run_cli("export", "mpich", "-p", plan, "--hosts", hosts, "-o", tmp_path / "bad")
    assert code == 2 and "pass --topology" in err
    doc["rank_to_node"] = []
    plan.write_text(json.dumps(doc))
    code, _, err = run_cli("export", "mpich", "-p", plan, "-t", "paper003", "--set", "cores_per_node=2", "-o", tmp_path / "bad")
    assert code == 2 and "non-empty" in err


needs_mpirun = pytest.mark.skipif(shutil.which("mpirun") is None,
                                  reason="mpirun not installed (apt-get install openmpi-bin)")

# Each rank writes its rank and its cores to a file of its own: two ranks printing to one pipe can interleave
# their lines under load ("01 0" / " 1").
REPORT = ("import os, sys; r = os.environ['OMPI_COMM_WORLD_RANK']; "
          "open(os.path.join(sys.argv[1], 'rank' + r), 'w').write(' '.join(map(str, sorted(os.sched_getaffinity(0)))))")


def _run_reported(cmd, out_dir, n_ranks):
    """Run an mpirun command line whose ranks report through :data:`REPORT`; {rank: [cores]}."""
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    out = subprocess.run(cmd + [sys.executable, "-c", REPORT, str(out_dir)], capture_output=True, text=True,
                         timeout=600, env=env)
    assert out.returncode == 0, out.stderr
    return {r: [int(c) for c in (out_dir / f"rank{r}").read_text().split()] for r in range(n_ranks)}


def _two_cores():
    if len(os.sched_getaffinity(0)) < 2 or not {0, 1} <= os.sched_getaffinity(0):
        pytest.skip("needs cores 0 and 1")


@needs_mpirun
def test_mpirun_honours_exported_rankfile(tmp_path):
    """Two ranks on the two cores of this machine, swapped: each rank must report the core the plan gives."""
    _two_cores()
    host = socket.gethostname()
    hf = tmp_path / "hosts"
    hf.write_text(f"0 {host}\n")
    plan = Placement(np.array([0, 0]), np.array([1, 0]))     # rank 0 -> core 1, rank 1 -> core 0
    rf = tmp_path / "rankfile"
    export("ompi4", plan, rf, hosts=read_hostfile(hf), topo=_topo(nodes=1, cores=2))
    assert _run_reported(["mpirun", "--rankfile", str(rf), "-np", "2"], tmp_path, 2) == {0: [1], 1: [0]}


@needs_mpirun
@pytest.mark.parametrize("fmt", ["ompi4", "ompi5"])
@pytest.mark.parametrize("slots", ["cores", "hwthreads"])
def test_the_printed_command_runs_with_the_installed_mpirun(tmp_path, run_cli, fmt, slots):
    """``export ompi5`` printed ``--map-by rankfile:file=``, which Open MPI 4 refuses: the command printed is the
    installed mpirun's, runs as printed (PROGRAM replaced), and the export says what it assumed."""
    _two_cores()
    from topoplan.traffic.recorder import openmpi_version

    if openmpi_version() is None:
        pytest.skip("the mpirun installed is not Open MPI's")
    host = socket.gethostname()
    (tmp_path / "hosts").write_text(f"0 {host}\n")
    (tmp_path / "plan.json").write_text(json.dumps({"rank_to_node": [0, 0], "rank_to_slot": [1, 0]}))
    rf = tmp_path / "rankfile"
    code, out, err = run_cli("export", fmt, "-p", tmp_path / "plan.json", "--hosts", tmp_path / "hosts",
                             "--slots", slots, "-o", rf)
    assert code == 0, err
    lines = out.splitlines()
    run = next(line[len("run: "):] for line in lines if line.startswith("run: "))
    version = ".".join(map(str, openmpi_version()))
    assert f"for the Open MPI {version} mpirun found here" in out
    assert ("slots are hardware threads" if slots == "hwthreads" else "slots are cores") in out
    assert ("--use-hwthread-cpus" in run or ":hwtcpus" in run) == (slots == "hwthreads")
    cmd = run.split()
    assert cmd[-1] == "PROGRAM"
    assert _run_reported(cmd[:-1], tmp_path, 2) == {0: [1], 1: [0]}


@pytest.mark.parametrize("fmt", ["slurm", "json", "ocs", "routes"])
def test_slots_hwthreads_is_refused_where_no_command_uses_it(tmp_path, run_cli, fmt):
    (tmp_path / "plan.json").write_text(json.dumps({"rank_to_node": [0, 0], "rank_to_slot": [1, 0]}))
    code, _, err = run_cli("export", fmt, "-p", tmp_path / "plan.json", "-t", "paper003", "--slots", "hwthreads",
                           "-o", tmp_path / "out")
    assert code == 2 and err.count("\n") == 1 and not (tmp_path / "out").exists()
    assert f"--slots: applies to the ompi4, ompi5, mpich formats only, not {fmt}" in err


@pytest.mark.parametrize("fmt, openmpi, slots, want", [
    ("ompi4", None, "cores", "mpirun --rankfile rf -np 2 PROGRAM"),
    ("ompi5", None, "cores", "mpirun --map-by rankfile:file=rf -np 2 PROGRAM"),
    ("ompi5", 4, "cores", "mpirun --rankfile rf -np 2 PROGRAM"),
    ("ompi4", 5, "cores", "mpirun --map-by rankfile:file=rf -np 2 PROGRAM"),
    ("ompi5", 4, "hwthreads", "mpirun --rankfile rf --use-hwthread-cpus -np 2 PROGRAM"),
    ("ompi5", 5, "hwthreads", "mpirun --map-by rankfile:file=rf:hwtcpus -np 2 PROGRAM"),
    ("mpich", None, "hwthreads", "mpiexec -f rf -bind-to hwthread -n 2 PROGRAM"),
])
def test_launch_command_per_open_mpi_version(fmt, openmpi, slots, want):
    from topoplan.reporting.export import launch_command

    assert launch_command(fmt, "rf", 2, openmpi=openmpi, slots=slots) == want


@pytest.mark.parametrize("fmt", ["mpich", "slurm"])
@pytest.mark.parametrize("text, line, rank, slot, want", [
    ("rank,node,slot\n0,0,1\n1,0,0\n2,1,0\n", 2, 0, 1, 0),      # two ranks of a node, slots swapped
    ("rank,node,slot\n0,0,0\n1,0,2\n2,1,0\n", 3, 1, 2, 1),      # a slot skipped
    ("rank,node,slot\n0,1,0\n1,0,3\n", 3, 1, 3, 0),              # one rank on a node's last core
])
def test_host_lists_refuse_slots_they_cannot_express(tmp_path, run_cli, fmt, text, line, rank, slot, want):
    """export mpich and slurm dropped a rank_to_slot other than each node's slots in rank order (the launcher binds
    a node's ranks so): refused, naming the rank's line and field and the export that expresses it."""
    pl, out = tmp_path / "p.csv", tmp_path / "out"
    pl.write_text(text)
    code, stdout, err = run_cli("export", fmt, "-p", pl, "-t", "paper003", "-o", out)
    launcher = {"mpich": "an MPICH (Hydra) machinefile", "slurm": "a SLURM_HOSTFILE"}[fmt]
    assert code == 2 and stdout == "" and err == (
        f"error: {pl}:{line}: field 'slot': rank {rank} is on slot {slot} of node {pl.read_text().split()[line - 1].split(',')[1]}, "
        f"but {launcher} gives each rank's host only (the launcher puts a node's ranks on its slots in rank order: "
        f"slot {want}); it cannot express these slots: export ompi4 or ompi5 (an Open MPI rankfile) does\n"), err
    assert not out.exists()
    code, _, err = run_cli("export", "ompi4", "-p", pl, "-t", "paper003", "-o", out)   # the rankfile does
    assert code == 0 and f"rank {rank}=node{int(pl.read_text().split()[line - 1].split(',')[1]):04d} slot={slot}" \
        in out.read_text(), err


WEIRD = ["sp ace/r", "it's", "$(touch pwned)", "a;b", "-rf", "[x]"]


@pytest.mark.parametrize("name", WEIRD)
@pytest.mark.parametrize("fmt, openmpi", [("ompi4", 4), ("ompi5", 5), ("mpich", None), ("slurm", None),
                                          ("routes", None)])
def test_the_launcher_line_quotes_the_path_for_the_shell(fmt, openmpi, name):
    """``-o 'sp ace/$(id)'`` printed ``SLURM_HOSTFILE=sp ace/$(id) srun ...``: the shell split the path and ran
    ``id``."""
    import shlex

    from topoplan.reporting.export import launch_command

    words = shlex.split(launch_command(fmt, name, 2, openmpi=openmpi))
    path = f"./{name}" if name.startswith("-") else name
    want = {"ompi4": ["mpirun", "--rankfile", path], "ompi5": ["mpirun", "--map-by", f"rankfile:file={path}"],
            "mpich": ["mpiexec", "-f", path], "slurm": [f"SLURM_HOSTFILE={path}", "srun"],
            "routes": ["ip", "-batch", f"{path}/HOST.routes"]}[fmt]
    assert words[:len(want)] == want


@pytest.mark.parametrize("fmt", ["ompi4", "ompi5", "mpich", "slurm"])
def test_the_printed_line_runs_as_printed(tmp_path, run_cli, fmt, monkeypatch):
    """The line names the file as the shell reads it (a directory with a space and a $(...) in its name), never
    ``-`` (standard output, which no launcher reads), and is not taken for markup."""
    import shlex

    monkeypatch.setenv("MPIRUN", "no-such-mpirun")   # (the format's own Open MPI command)
    (tmp_path / "plan.json").write_text(json.dumps({"rank_to_node": [0, 0], "rank_to_slot": [0, 1]}))
    d = tmp_path / "sp ace $(id) [x]"
    d.mkdir()
    for out in (d / "hosts", "-"):
        code, stdout, err = run_cli("export", fmt, "-p", tmp_path / "plan.json", "-t", "paper003", "-o", out)
        assert code == 0, err
        text = err if out == "-" else stdout   # (with -o -, the document alone goes to standard output)
        run = next(line for line in text.splitlines() if line.startswith("run: "))[len("run: "):]
        if out == "-":
            assert run.endswith(" PROGRAM (FILE: what was written to standard output, saved to a file)"), run
            run = run[:run.index(" (FILE")]
        words = shlex.split(run)
        assert words[-1] == "PROGRAM" and "-" not in words
        want = "FILE" if out == "-" else str(out)
        assert want in words or f"SLURM_HOSTFILE={want}" in words or f"rankfile:file={want}" in words, words
        if out != "-":
            assert f"wrote {out} (2 ranks)" in stdout


def test_export_without_open_mpi_prints_the_form_for_each(tmp_path, run_cli, monkeypatch):
    monkeypatch.setenv("MPIRUN", "no-such-mpirun")
    (tmp_path / "plan.json").write_text(json.dumps({"rank_to_node": [0, 0], "rank_to_slot": [1, 0]}))
    code, out, err = run_cli("export", "ompi5", "-p", tmp_path / "plan.json", "-t", "paper003", "-o", tmp_path / "rf")
    assert code == 0, err
    assert f"run: mpirun --map-by rankfile:file={tmp_path / 'rf'} -np 2 PROGRAM" in out
    assert f"with Open MPI 4: mpirun --rankfile {tmp_path / 'rf'} -np 2 PROGRAM" in out
    code, _, err = run_cli("export", "ompi5", "-p", tmp_path / "plan.json", "-t", "paper003", "--slots", "threads",
                           "-o", tmp_path / "rf2")
    assert code == 2 and "--slots: expected one of cores, hwthreads" in err and not (tmp_path / "rf2").exists()


def test_cli_export_names_the_line_of_a_node_out_of_range(tmp_path, run_cli):
    """A placement CSV naming a node the topology lacks: the file, line and field, status 2, nothing written."""
    pl = tmp_path / "p.csv"
    pl.write_text("rank,node\n0,0\n1,99\n2,1\n")
    out = tmp_path / "rf"
    code, _, err = run_cli("export", "ompi4", "-p", pl, "-t", "paper003", "-o", out)
    assert code == 2 and err.strip().splitlines() == [
        f"error: {pl}:3: field 'node': rank 1 is on node 99, but the topology has 64 nodes"]
    assert not out.exists()


def test_cli_export_with_hosts_only_names_the_line(tmp_path, run_cli):
    """Without a topology (a hostfile gives the names), a bad rank is still reported at its file line and field."""
    hosts = tmp_path / "hosts"
    hosts.write_text("a\nb\n")
    pl, out = tmp_path / "p.csv", tmp_path / "rf"
    for text, want in (("rank,node\n0,0\n1,1\n2,2\n", "p.csv:4: field 'node': rank 2 is on node 2 but only 2 "
                                                       "host names are known"),
                       ("rank,node,slot\n0,0,0\n1,0,-1\n", "p.csv:3: field 'slot': rank 1 is on slot -1"),
                       ("rank,node,slot\n0,1,0\n1,0,0\n2,1,0\n", "p.csv:4: field 'slot': ranks 0 and 2 share node 1 "
                                                                 "slot 0")):
        pl.write_text(text)
        code, _, err = run_cli("export", "ompi4", "-p", pl, "--hosts", hosts, "-o", out)
        assert code == 2 and len(err.strip().splitlines()) == 1 and f"error: {tmp_path}/{want}" in err, err
        assert not out.exists()


def test_json_export_is_a_placement_file_too(tmp_path, run_cli):
    """The json export read back as a placement (-p, validate) gives the same placement and rankfile."""
    topo = _topo()
    p = Placement(np.array([1, 0, 1]), np.array([0, 1, 1]))
    export("json", p, tmp_path / "p.json", topo=topo)
    doc = json.loads((tmp_path / "p.json").read_text())
    assert doc["rank_to_node"] == [1, 0, 1] and doc["rank_to_slot"] == [0, 1, 1] and len(doc["ranks"]) == 3
    from topoplan.core.placement import read_placement

    assert read_placement(tmp_path / "p.json").to_dict() == p.to_dict()
    code, out, err = run_cli("validate", tmp_path / "p.json", "-t", "paper003")
    assert code == 0 and "valid (placement: 3 ranks)" in out, err


@pytest.mark.parametrize("check, want", [
    (["export", "ompi4", "-p", "{out}", "-t", "paper000", "-o", "{rf}"], "made for another topology"),
    (["validate", "{out}", "-t", "paper003", "-T", "ring:np=8,bytes=2MB"], "made for another traffic"),
])
def test_json_export_keeps_the_plans_seed_and_inputs(tmp_path, run_cli, check, want):
    """A placement exported as JSON is still refused for inputs it was not made for."""
    pl, out, rf = tmp_path / "pl.json", tmp_path / "out.json", tmp_path / "rf"
    code, _, err = run_cli("place", "-t", "paper003", "-T", "ring:np=8,bytes=1MB", "-m", "random", "--seed", "3",
                           "-o", pl)
    assert code == 0, err
    code, _, err = run_cli("export", "json", "-p", pl, "-o", out)
    assert code == 0, err
    doc, plan = json.loads(out.read_text()), json.loads(pl.read_text())
    assert doc["seed"] == 3 and doc["inputs"] == plan["inputs"] and doc["topology_spec"] == "paper003"
    code, _, err = run_cli(*(a.format(out=out, rf=rf) for a in check))
    assert code == 2 and want in err and err.count("\n") == 1, err
    assert not rf.exists()


@pytest.mark.parametrize("seed, shown", [("1e400", "inf"), ("-1", "-1"), ('"3"', "'3'"), ("1.5", "1.5")])
def test_json_export_of_a_plan_whose_seed_is_not_a_seed(tmp_path, run_cli, seed, shown):
    pl, out = tmp_path / "pl.json", tmp_path / "out.json"
    pl.write_text('{"rank_to_node": [0, 1], "seed": %s}' % seed)
    code, _, err = run_cli("export", "json", "-p", pl, "-t", "paper003", "-o", out)
    assert code == 2 and err == f"error: {pl}: field 'seed': expected a non-negative integer, got {shown}\n"
    assert not out.exists()


@pytest.fixture(scope="module")
def circuit_plan(tmp_path_factory):
    """A circuit plan of two ranks on paper003 (its text)."""
    from topoplan.cli.main import main

    path = tmp_path_factory.mktemp("seed") / "c.json"
    assert main(["circuits", "-t", "paper003", "-T", "ring:np=2,bytes=1MB", "-p", "round-robin", "-m", "greedy",
                 "--no-simulate", "-o", str(path)]) == 0
    return path.read_text()


SEED_READERS = [   # every command that reads a plan's seed: (the plan is a placement or a circuit plan, arguments)
    ("placement", ["validate", "{p}", "-t", "paper003"]),
    ("placement", ["simulate", "-t", "paper003", "-T", "ring:np=2,bytes=1MB", "-p", "{p}"]),
    *(("placement", ["export", fmt, "-p", "{p}", "-t", "paper003", "-o", "{out}"])
      for fmt in ("ompi4", "ompi5", "mpich", "slurm", "json")),
    ("circuits", ["validate", "{p}", "-t", "paper003"]),
    ("circuits", ["simulate", "-t", "paper003", "-T", "ring:np=2,bytes=1MB", "-p", "round-robin", "--circuits",
                  "{p}"]),
    ("circuits", ["export", "ocs", "-p", "{p}", "-t", "paper003", "-o", "{out}"]),
    ("circuits", ["export", "routes", "-p", "{p}", "-t", "paper003", "-o", "{out}"]),
    ("circuits", ["export", "slurm", "-p", "{p}", "-t", "paper003", "-o", "{out}"]),   # (its rank_to_node)
]


@pytest.mark.parametrize("seed, shown", [('"abc"', "'abc'"), ("-1", "-1"), ("1.5", "1.5"), ("true", "True")])
@pytest.mark.parametrize("kind, args", SEED_READERS)
def test_every_reader_refuses_a_seed_that_is_not_a_seed(tmp_path, run_cli, circuit_plan, kind, args, seed, shown):
    """validate, simulate and the launcher exports took ``"seed": "abc"`` or -1, which export json, ocs and routes
    refused: one check (topoplan.core.placement.check_seed) for every reader."""
    p, out = tmp_path / "p.json", tmp_path / "out"
    if kind == "placement":
        p.write_text('{"rank_to_node": [0, 1], "seed": %s}' % seed)
    else:
        assert '"seed": 0,' in circuit_plan
        p.write_text(circuit_plan.replace('"seed": 0,', f'"seed": {seed},', 1))
    code, _, err = run_cli(*(a.format(p=p, out=out) for a in args))
    assert code == 2 and err == f"error: {p}: field 'seed': expected a non-negative integer, got {shown}\n", err
    assert not out.exists()
    p.write_text(p.read_text().replace(f'"seed": {seed}', '"seed": 7', 1))   # a seed: used
    code, _, err = run_cli(*(a.format(p=p, out=out) for a in args))
    assert code == 0, err


def test_a_placement_json_without_a_json_name_is_read_as_json(tmp_path, run_cli):
    """`place -o placement` writes JSON; export and simulate read it as such, not as a malformed CSV."""
    pl = tmp_path / "placement"
    code, _, err = run_cli("place", "-t", "paper003", "-T", "ring:np=8,bytes=1MB", "-m", "round-robin", "-o", pl)
    assert code == 0, err
    out = tmp_path / "hosts"
    code, _, err = run_cli("export", "slurm", "-p", pl, "-o", out)   # the topology it records names the hosts
    assert code == 0 and out.read_text().split() == [f"node{k:04d}" for k in range(8)], err
    code, _, err = run_cli("simulate", "-t", "paper003", "-T", "ring:np=8,bytes=1MB", "-p", pl)
    assert code == 0, err


def test_export_refuses_set_without_a_topology(tmp_path, run_cli):
    """--set without --topology was ignored: a placement of 4 ranks a node exported 'for' cores_per_node=1."""
    plan, out = tmp_path / "p.json", tmp_path / "hosts"
    code, _, err = run_cli("place", "-t", "paper003", "-T", "ring:np=8,bytes=1MB", "-m", "sequential", "-o", plan)
    assert code == 0, err
    for fmt in ("slurm", "ocs"):
        code, _, err = run_cli("export", fmt, "-p", plan, "--set", "cores_per_node=1", "-o", out)
        assert code == 2 and err.startswith("error: --set cores_per_node=1: overrides the topology given with "
                                            "--topology, and none was given"), err
        assert not out.exists()
