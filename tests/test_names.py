"""One display name per switch and per node in every output (issue 18, point 7).

A topology's switches are named by ``switch_labels()`` (the Slurm topology.conf or YAML names, else
``S0..``) in `topoplan analyze`, `topoplan circuits`, the simulator's link names and the HTML report; the
report names nodes by their host names.
"""

import json

import pytest

from topoplan.core.topology_io import load_topology

CONF = """\
SwitchName=leaf1 Nodes=cn[01-04]
SwitchName=leaf2 Nodes=cn[05-08]
SwitchName=leaf3 Nodes=cn[09-12]
SwitchName=spine Switches=leaf[1-3]
"""
LEAVES = ["leaf1", "leaf2", "leaf3"]
HOSTS = [f"cn{i:02d}" for i in range(1, 13)]
TRAFFIC = "neighbor2d:rows=3,cols=4,bytes=1MB"
HYBRID = ["--set", "kind=hybrid", "--set", "ocs.nodes_per_switch=2", "--set", "ocs.bw=20Gbps",
          "--set", "ocs.latency=500ns"]


@pytest.fixture
def conf(tmp_path):
    path = tmp_path / "topology.conf"
    path.write_text(CONF)
    return path


def test_switch_labels_of_every_topology_kind(conf, tmp_path):
    assert load_topology(conf).switch_labels() == LEAVES                       # Slurm leaves: a tree
    assert load_topology("paper003").switch_labels() == ["S0", "S1", "S2", "S3"]
    assert load_topology("mesh10x10x10", ["dims=[2,2,1]"]).switch_labels() == ["S0", "S1", "S2", "S3"]
    deep = tmp_path / "deep.conf"                                              # three levels: a graph
    deep.write_text(CONF.replace("SwitchName=spine Switches=leaf[1-3]",
                                 "SwitchName=agg1 Switches=leaf[1-2]\nSwitchName=agg2 Switches=leaf3\n"
                                 "SwitchName=core Switches=agg[1-2]"))
    assert load_topology(deep).switch_labels() == LEAVES + ["agg1", "agg2", "core"]


def test_analyze_names_the_slurm_switches(run_cli, conf, tmp_path):
    code, out, err = run_cli("analyze", "-t", conf, "-T", TRAFFIC)
    assert code == 0, err
    assert all(name in out for name in LEAVES) and "S0" not in out
    code, out, err = run_cli("analyze", "-t", conf, "-T", TRAFFIC, "--json")
    assert code == 0, err
    assert json.loads(out)["switches"] == LEAVES
    # a graph topology: one name per row of the matrices (the switches without hosts have no row)
    deep = tmp_path / "deep.conf"
    deep.write_text(CONF.replace("SwitchName=spine Switches=leaf[1-3]",
                                 "SwitchName=agg1 Switches=leaf[1-2]\nSwitchName=agg2 Switches=leaf3\n"
                                 "SwitchName=core Switches=agg[1-2]"))
    code, out, err = run_cli("analyze", "-t", deep, "-T", TRAFFIC, "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["switches"] == LEAVES


def test_circuits_table_names_the_slurm_switches(run_cli, conf):
    code, out, err = run_cli("circuits", "-t", conf, *HYBRID, "-T", TRAFFIC, "-m", "greedy")
    assert code == 0, err
    assert "leaf1-leaf2" in out and "leaf2-leaf3" in out and "S0" not in out


def test_simulator_and_report_use_the_same_names(run_cli, conf, tmp_path):
    from topoplan.reporting.report import figure_switch_heatmap, figure_topology, load_result, render_html

    plan, sim = tmp_path / "plan.json", tmp_path / "sim.json"
    assert run_cli("circuits", "-t", conf, *HYBRID, "-T", TRAFFIC, "-m", "greedy", "-o", plan, "--json")[0] == 0
    code, out, err = run_cli("simulate", "-t", conf, *HYBRID, "-T", TRAFFIC, "--circuits", plan,
                             "--timeline", "0.5ms", "-o", sim, "--json")
    assert code == 0, err
    doc = json.loads(sim.read_text())
    assert doc["switch_names"] == LEAVES
    links = {l["name"] for l in doc["timeline"]["links"]}
    assert "cn01->leaf1" in links and not any("S0" in n for n in links)
    data = load_result(sim)
    assert data.switch_names == LEAVES
    heat = figure_switch_heatmap(data).axes[0]
    assert [t.get_text() for t in heat.get_yticklabels()] == LEAVES
    texts = {t.get_text() for t in figure_topology(data, 1).axes[0].texts}
    assert set(HOSTS) <= texts and set(LEAVES) <= texts
    assert not texts & {str(i) for i in range(12)}                    # no node numbers
    page = render_html(data, frames=1)
    circuits = [(HOSTS[a], HOSTS[b]) for a, b in json.loads(plan.read_text())["circuits"]]
    assert f"<td>circuits</td><td>{len(circuits)}: {circuits[0][0]}-{circuits[0][1]}" in page
