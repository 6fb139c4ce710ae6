"""A Slurm cluster with an optical circuit switch: the overlay file, every missing field at once, the topology
named after its file, and the walk-through of ``docs/first-hour.md`` run as written."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from topoplan.core.errors import TopoplanError
from topoplan.core.topology import TreeTopology
from topoplan.core.topology_io import load_topology

REPO = Path(__file__).resolve().parents[1]
CLUSTER = REPO / "tests" / "data" / "slurm" / "cluster"
PAGE = REPO / "docs" / "first-hour.md"


@pytest.fixture
def cluster(tmp_path):
    d = tmp_path / "cluster"
    shutil.copytree(CLUSTER, d)
    return d


def _overlay(cluster, text, name="hybrid.yaml"):
    (cluster / name).write_text(text)
    return cluster / name


def test_overlay_adds_an_ocs_to_the_slurm_tree(cluster):
    base = load_topology(cluster / "topology.conf", ["slurm_linkspeed_unit=Gbps"])
    path = _overlay(cluster, "base: topology.conf\nslurm_linkspeed_unit: Gbps\nocs:\n  nodes_per_switch: 4\n  bw: 100Gbps\n")
    t = load_topology(path)
    assert isinstance(t, TreeTopology) and t.kind == "hybrid" and t.name == str(path)
    assert len(t.ocs.nodes) == 8 and t.ocs.bw_Bps == 100e9 / 8
    # everything else is the cluster's: hosts, switch names, speeds, cores from slurm.conf
    assert t.host_names() == base.host_names() and t.switch_names == base.switch_names
    assert (t.cores_per_node, t.down_bw_Bps, t.up_bw_Bps) == (24, base.down_bw_Bps, base.up_bw_Bps)


def test_overlay_fields_win_and_cores_given_skip_slurm_conf(cluster):
    path = _overlay(cluster, "base: topology.conf\nslurm_linkspeed_unit: Gbps\nname: lab\ncores_per_node: 48\neps: {up_bw: 1Gbps}\n"
                             "ocs: {nodes: [0, 12], bw: 10Gbps, setup: 1ms}\n")
    (cluster / "slurm.conf").write_text("NodeName=cn01 CPUs=oops\n")   # not read: the overlay gives the cores
    t = load_topology(path)
    assert t.name == "lab" and t.cores_per_node == 48 and t.up_bw_Bps == 1e9 / 8
    assert t.ocs.nodes == (0, 12) and t.ocs.setup_s == pytest.approx(1e-3)
    assert t.down_bw_Bps == load_topology(cluster / "topology.conf", ["cores_per_node=1", "slurm_linkspeed_unit=Gbps"]).down_bw_Bps


def test_overlay_of_a_preset_and_overrides_on_top(tmp_path):
    path = tmp_path / "small.yaml"
    path.write_text("base: paper003\nocs: {nodes_per_switch: 2}\n")
    t = load_topology(path, ["ocs.bw=40Gbps"])
    assert t.n_nodes == 64 and len(t.ocs.nodes) == 8 and t.ocs.bw_Bps == 5e9 and t.name == str(path)


@pytest.mark.parametrize("text, needle", [
    ("base: topology.conf\nslurm_linkspeed_unit: Gbps\nocs: {latency: 1us}\n",
     r"hybrid.yaml: missing fields 'ocs.nodes_per_switch' \(or 'ocs.nodes'\) and 'ocs.bw' \(an OCS names"),
    ("base: topology.conf\nslurm_linkspeed_unit: Gbps\nkind: hybrid\nocs: {bw: 10Gbps}\n", r"hybrid.yaml:4: field 'ocs.nodes_per_switch': missing"),
    ("base: nothere.conf\nocs: {}\n", r"hybrid.yaml:1: field 'base': nothere.conf: no such file beside hybrid.yaml"),
    ("base: [1, 2]\n", r"hybrid.yaml:1: field 'base': expected a topology file"),
    ("base: topology.conf\nslurm_linkspeed_unit: Gbps\nocs: {nodes_per_switch: 4, bw: 1Gbps, colour: red}\n", r"field 'ocs.colour': unknown key"),
])
def test_overlay_errors_name_file_line_and_every_missing_field(cluster, text, needle):
    with pytest.raises(TopoplanError, match=needle):
        load_topology(_overlay(cluster, text))


def test_an_overlay_of_an_overlay_is_refused(cluster):
    _overlay(cluster, "base: topology.conf\nslurm_linkspeed_unit: Gbps\nocs: {nodes_per_switch: 2, bw: 1Gbps}\n", "first.yaml")
    with pytest.raises(TopoplanError, match=r"first.yaml:1: field 'base': this file is the base of an overlay"):
        load_topology(_overlay(cluster, "base: first.yaml\n"))


def test_set_kind_hybrid_names_every_missing_field_and_the_file(cluster, run_cli):
    code, _, err = run_cli("show", cluster / "topology.conf", "--set", "kind=hybrid",
                           "--set", "slurm_linkspeed_unit=Gbps")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "'ocs.nodes_per_switch' (or 'ocs.nodes') and 'ocs.bw'" in err and f"{cluster / 'topology.conf'}:" in err
    code, out, err = run_cli("show", cluster / "topology.conf", "--set", "ocs.nodes_per_switch=2",
                             "--set", "ocs.bw=100Gbps", "--set", "slurm_linkspeed_unit=Gbps")
    assert code == 0 and "kind: hybrid" in out


def test_a_slurm_topology_is_named_after_its_file(cluster, run_cli):
    assert load_topology(cluster / "topology.conf", ["slurm_linkspeed_unit=Gbps"]).name == str(cluster / "topology.conf")
    code, _, err = run_cli("place", "-t", cluster / "topology.conf", "--set", "slurm_linkspeed_unit=Gbps", "-T",
                           "ring:np=5000,bytes=1MB", "-m", "greedy")
    assert code == 2 and f"do not fit topology {cluster / 'topology.conf'}:" in err and "topology topology" not in err


# -- the page's walk-through, as written -------------------------------------------------------------------

def _section(name: str) -> str:
    text = PAGE.read_text()
    start = text.index(f"\n## {name}")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else None]


def _blocks(section: str) -> list[tuple[str, str]]:
    return re.findall(r"```(\w*)\n(.*?)```", section, re.S)


def test_the_walkthrough_runs_as_written(tmp_path):
    shutil.copytree(CLUSTER, tmp_path / "cluster")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    blocks = _blocks(_section("A Slurm cluster with an optical circuit switch"))
    scripts = [body for lang, body in blocks if lang == "bash"]
    assert len(scripts) == 1
    run = subprocess.run(["bash", "-c", "set -e\n" + scripts[0]], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "Traceback" not in run.stderr
    assert "kind: hybrid" in run.stdout and "name: cluster/hybrid.yaml" in run.stdout
    assert re.search(r"greedy \(heuristic\): \d+ circuits", run.stdout) and "makespan" in run.stdout
    assert (tmp_path / "plan.json").is_file()
    # the documented error, word for word (shown without a "$ " prompt: the pages' "$ " commands must exit 0)
    shown = [body for lang, body in blocks if lang == "" and body.startswith("topoplan ")]
    assert len(shown) == 1
    cmd, expected = shown[0].splitlines()[:2]
    run = subprocess.run(["bash", "-c", cmd], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 2 and run.stderr.strip() == expected
