"""Slurm as it really is (issue 18): core counts from slurm.conf, topology.yaml, host names wherever node ids are.

The walk-through uses an invented cluster (tests/data/slurm/cluster): a topology.conf with two leaf
switches of 12 nodes under a spine, the slurm.conf beside it (2 sockets x 12 cores, 2 threads per
core) and a 48-rank traffic matrix.
"""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from topoplan.core.errors import TopoplanError
from topoplan.core.placement import load_placement, node_ids, placement_from_doc, read_placement, sequential
from topoplan.core.topology import GraphTopology, TreeTopology
from topoplan.core.topology_io import (cores_hint, load_topology, slurm_conf_nodes, slurm_to_dict,
                                      slurm_yaml_to_dict)
from topoplan.problems.bcast.allocation import parse_spec, read_allocation

DATA = Path(__file__).resolve().parent / "data" / "slurm"
TOPOLOGY = (DATA / "cluster" / "topology.conf").read_text()
UNIT = "slurm_linkspeed_unit=Gbps"   # the cluster's LinkSpeed numbers are Gb/s (Slurm leaves the unit to each site)
U = [UNIT]
SLURM_CONF = (DATA / "cluster" / "slurm.conf").read_text()


@pytest.fixture
def cluster(tmp_path):
    """A copy of the invented cluster, with a 48-rank matrix (ring plus a partner on the other leaf)."""
    d = tmp_path / "cluster"
    shutil.copytree(DATA / "cluster", d)
    rows = [f"{r},{d_},{1 << 20},4" for r in range(48) for d_ in ((r + 1) % 48, (r + 24) % 48)]
    (d / "m.csv").write_text("src,dst,bytes,msgs\n" + "\n".join(rows) + "\n")
    return d


def _conf_dir(tmp_path, slurm_conf=None, topology=TOPOLOGY, name="topology.conf"):
    d = tmp_path / "c"
    d.mkdir(exist_ok=True)
    (d / name).write_text(topology)
    if slurm_conf is not None:
        (d / "slurm.conf").write_text(slurm_conf)
    return d / name


# -- the walk-through ------------------------------------------------------------------------------------

def test_walkthrough_show_place_export_simulate(cluster, run_cli):
    topo = cluster / "topology.conf"
    code, out, err = run_cli("show", topo, "--set", UNIT)
    assert code == 0, err
    assert "cores_per_node: 24" in out and "down_bw: 100Gbps" in out and "up_bw: 200Gbps" in out
    assert "- cn13" in out and "- leaf2" in out

    code, out, err = run_cli("place", "-t", topo, "--set", UNIT, "-T", cluster / "m.csv", "-m", "greedy",
                             "-o", cluster / "p.json")
    assert code == 0, err
    plan = json.loads((cluster / "p.json").read_text())
    counts = np.bincount(plan["rank_to_node"], minlength=24)
    assert len(plan["rank_to_node"]) == 48 and counts.max() <= 24

    code, out, err = run_cli("export", "slurm", "-p", cluster / "p.json", "-o", cluster / "hosts")
    assert code == 0, err
    hosts = (cluster / "hosts").read_text().split()
    assert len(hosts) == 48 and all(h.startswith("cn") for h in hosts)
    assert hosts == [f"cn{n + 1:02d}" for n in plan["rank_to_node"]]

    # a placement CSV of host names, as users have them (any case): two ranks per node on cn01..cn24
    rows = "".join(f"{r},{'CN' if r % 5 == 0 else 'cn'}{r // 2 + 1:02d}\n" for r in range(48))
    (cluster / "placement.csv").write_text("rank,node\n" + rows)
    code, out, err = run_cli("simulate", "-t", topo, "--set", UNIT, "-T", cluster / "m.csv", "-p",
                             cluster / "placement.csv",
                             "--json")
    assert code == 0, err
    res = json.loads(out)
    assert res["makespan_s"] > 0
    # the same placement by node id simulates to the same makespan
    (cluster / "ids.csv").write_text("rank,node\n" + "".join(f"{r},{r // 2}\n" for r in range(48)))
    code, out2, err = run_cli("simulate", "-t", topo, "--set", UNIT, "-T", cluster / "m.csv", "-p", cluster / "ids.csv",
                              "--json")
    assert code == 0, err
    assert json.loads(out2)["makespan_s"] == pytest.approx(res["makespan_s"])
    # and the host-name CSV exports and validates as it is
    code, out, err = run_cli("export", "ompi4", "-p", cluster / "placement.csv", "-t", topo, "--set", UNIT,
                             "-o", cluster / "rf")
    assert code == 0, err
    assert (cluster / "rf").read_text().splitlines()[:2] == ["rank 0=cn01 slot=0", "rank 1=cn01 slot=1"]
    (cluster / "named.json").write_text(json.dumps({"rank_to_node": ["cn01", "CN02"]}))
    code, out, err = run_cli("validate", cluster / "named.json", "-t", topo, "--set", UNIT)
    assert code == 0, err


def test_cores_are_physical_cores_and_set_wins(cluster):
    t = load_topology(cluster / "topology.conf", U)
    assert isinstance(t, TreeTopology) and t.cores_per_node == 24 and t.n_nodes == 24
    assert t.host_names()[0] == "cn01" and t.switch_names == ("leaf1", "leaf2")
    assert sequential(48, t).rank_to_node.tolist() == [0] * 24 + [1] * 24
    assert cores_hint(t) == ""
    # --set cores_per_node wins: one rank per hardware thread, and slurm.conf is not even read
    assert load_topology(cluster / "topology.conf", ["cores_per_node=48", UNIT]).cores_per_node == 48
    (cluster / "slurm.conf").write_text("NodeName=cn01 CPUs=oops\n")
    assert load_topology(cluster / "topology.conf", ["cores_per_node=48", UNIT]).cores_per_node == 48


def test_without_slurm_conf_the_fit_error_says_how(tmp_path, run_cli):
    topo = _conf_dir(tmp_path)
    (tmp_path / "m.csv").write_text("src,dst,bytes,msgs\n" + "".join(f"{r},{(r + 1) % 48},1000,1\n"
                                                                      for r in range(48)))
    t = load_topology(topo, U)
    assert t.cores_per_node == 1 and "no slurm.conf is beside it" in cores_hint(t)
    for cmd in (["simulate", "-t", topo, "--set", UNIT, "-T", tmp_path / "m.csv"],
                ["analyze", "-t", topo, "--set", UNIT, "-T", tmp_path / "m.csv"],
                ["place", "-t", topo, "--set", UNIT, "-T", tmp_path / "m.csv", "-m", "greedy"]):
        code, _, err = run_cli(*cmd)
        assert code == 2 and "48 ranks do not fit" in err, err
        assert "slurm.conf" in err and "--set cores_per_node=N" in err and len(err.strip().splitlines()) == 1
    with pytest.raises(TopoplanError, match="do not fit the topology: 24 nodes x 1 cores = 24 slots; topology.conf "
                                            "gives no core counts"):
        sequential(48, t)
    with pytest.raises(TopoplanError, match="slots; topology.conf gives no core counts"):
        load_placement("round-robin", 48, t)
    # a slurm.conf whose nodes have no counts: Slurm's default of 1 CPU, and the hint names it
    (topo.parent / "slurm.conf").write_text("NodeName=cn[01-24] RealMemory=1000\n")
    assert "gives its nodes no core count" in cores_hint(load_topology(topo, U))
    # slurm_conf=none ignores the file beside it
    (topo.parent / "slurm.conf").write_text(SLURM_CONF)
    t = load_topology(topo, ["slurm_conf=none", UNIT])
    assert t.cores_per_node == 1 and "slurm_conf=none" in cores_hint(t)
    # the hint is not part of the topology: equal topologies, one fingerprint
    from topoplan.core.fingerprint import fingerprint_topology

    assert fingerprint_topology(t) == fingerprint_topology(load_topology(topo, ["slurm_conf=none", "cores_per_node=1",
                                                                               UNIT]))


def test_explicit_slurm_conf(tmp_path):
    topo = _conf_dir(tmp_path)
    other = tmp_path / "etc"
    other.mkdir()
    (other / "cluster.conf").write_text(SLURM_CONF)
    assert load_topology(topo, [f"slurm_conf={other / 'cluster.conf'}", UNIT]).cores_per_node == 24
    with pytest.raises(TopoplanError, match=r"field 'slurm_conf': .*nope.conf: no such file"):
        load_topology(topo, [f"slurm_conf={other / 'nope.conf'}", UNIT])
    with pytest.raises(TopoplanError, match=r"field 'slurm_conf': applies to a Slurm topology.conf or topology.yaml"):
        load_topology("paper003", ["slurm_conf=x"])
    with pytest.raises(TopoplanError, match=r"field 'slurm_topology': .*expected slurm_topology=NAME"):
        load_topology(topo, ["slurm_topology=", UNIT])
    with pytest.raises(TopoplanError, match=r"field 'slurm_topology': names a topology of a Slurm topology.yaml"):
        load_topology(topo, ["slurm_topology=fabric", UNIT])


# -- slurm.conf as Slurm reads it ------------------------------------------------------------------------

def _cores(tmp_path, text):
    p = tmp_path / "slurm.conf"
    p.write_text(text)
    return {h: c for h, (c, _) in slurm_conf_nodes(p).items()}


@pytest.mark.parametrize("line, cores", [
    ("Sockets=2 CoresPerSocket=12 ThreadsPerCore=2", 24),        # threads are not ranks
    ("CPUs=48 Sockets=2 CoresPerSocket=12 ThreadsPerCore=2", 24),
    ("CPUs=48", 48),                                              # CPUs alone: Slurm infers 48 sockets x 1 core
    ("CPUs=48 ThreadsPerCore=2", 24),
    ("Procs=16", 16),                                             # the old name of CPUs
    ("CPUs=48 CoresPerSocket=12 ThreadsPerCore=2", 24),           # Sockets inferred: 48 / (12 x 2) = 2
    ("CPUs=7 CoresPerSocket=2", 2),                               # does not divide: Sockets = Boards = 1
    ("Boards=2 SocketsPerBoard=2 CoresPerSocket=8 ThreadsPerCore=2", 32),
    ("Boards=2 Sockets=4 CoresPerSocket=8", 32),                  # Sockets is the total (read_config.c)
    ("cpus=8 threadspercore=2", 4),                               # keys in any case
    ("RealMemory=1000", None),                                    # no count: Slurm's default of 1 CPU
])
def test_slurm_conf_core_arithmetic(tmp_path, line, cores):
    assert _cores(tmp_path, f"NodeName=n1 {line}\n") == {"n1": cores}


def test_slurm_conf_defaults_hostlists_continuations_comments(tmp_path):
    text = ("# a comment\nNodeName=DEFAULT CPUs=8 State=UNKNOWN\nNodeName=a[1-2]\n"
            "NodeName=DEFAULT CoresPerSocket=4   # adds to the defaults: CPUs=8 stays\n"
            "NodeName=b[01-02],c1 \\\n   Sockets=2\n"
            "NodeName=d1 Features=\"x y\" Reason=\"down \\# for now\"\n"
            "PartitionName=p Nodes=ALL\n")
    got = _cores(tmp_path, text)
    assert got == {"a1": 8, "a2": 8, "b01": 8, "b02": 8, "c1": 8, "d1": 8}
    where = slurm_conf_nodes(tmp_path / "slurm.conf")
    assert where["c1"][1].endswith("slurm.conf:5") and where["d1"][1].endswith("slurm.conf:7")


def test_slurm_conf_include(tmp_path):
    (tmp_path / "nodes-demo.conf").write_text("NodeName=DEFAULT Sockets=2 CoresPerSocket=8\nNodeName=n[1-2]\n")
    (tmp_path / "more.conf").write_text("NodeName=n3\n")
    text = ("ClusterName=demo\ninclude nodes-%c.conf\n"
            "Include /etc/slurm-that-is-not-here/more.conf   # missing there: the copy beside slurm.conf\n")
    assert _cores(tmp_path, text) == {"n1": 16, "n2": 16, "n3": 16}


@pytest.mark.parametrize("text, needle", [
    ("NodeName=n1 CoresPerSocket=x\n", r"slurm.conf:1: field 'CoresPerSocket': expected a positive integer, got 'x'"),
    ("NodeName=n1 CPUs=0\n", r"slurm.conf:1: field 'CPUs': must be at least 1"),
    ("NodeName=n1 CPUs=-4\n", r"slurm.conf:1: field 'CPUs': expected a positive integer"),
    ("NodeName=n1 CPUs=99999999\n", r"slurm.conf:1: field 'CPUs': .*over the limit"),
    ("NodeName=n1 Sockets=2 SocketsPerBoard=2\n", r"slurm.conf:1: field 'SocketsPerBoard': .*mutually exclusive"),
    ("NodeName=n1 CPUs=2 cpus=4\n", r"slurm.conf:1: field 'CPUs': given twice"),
    ("NodeName=n[1-2] CPUs=2\nNodeName=n2 CPUs=4\n", r"slurm.conf:2: node 'n2' is defined twice \(first at .*:1\)"),
    ("NodeName=ALL CPUs=2\n", r"slurm.conf:1: field 'NodeName': ALL is a reserved word"),
    ("NodeName=n[2-1]\n", r"slurm.conf:1: field 'NodeName': host list 'n\[2-1\]': a range runs backwards"),
    ("NodeName=n1 CPUs=2 oops\n", r"slurm.conf:1: expected Key=Value on a NodeName line, got 'oops'"),
    ("Include nodes.conf\n", r"slurm.conf:1: Include nodes.conf: no such file"),
    ("Include n*.conf\n", r"slurm.conf:1: Include n\*.conf: Slurm does not expand wildcards"),
    ("Include %c.conf\n", r"slurm.conf:1: Include %c.conf: %c needs a ClusterName"),
    ("Include slurm.conf\n", r"slurm.conf:1: Include slurm.conf: includes itself"),
])
def test_slurm_conf_errors_name_file_line_and_field(tmp_path, text, needle):
    with pytest.raises(TopoplanError, match=needle):
        _cores(tmp_path, text)


def test_nodes_must_match_between_the_files(tmp_path):
    topo = _conf_dir(tmp_path, SLURM_CONF.replace("NodeName=cn[22-24]", "NodeName=cn[22-23]"))
    with pytest.raises(TopoplanError, match=r"topology.conf:4: node 'cn24' has no NodeName line in .*slurm.conf"):
        load_topology(topo, U)
    (topo.parent / "slurm.conf").write_text(SLURM_CONF.replace("NodeName=cn[22-24]", "NodeName=cn[22-25]"))
    with pytest.raises(TopoplanError, match=r"slurm.conf:13: node 'cn25' is not in .*topology.conf"):
        load_topology(topo, U)
    (topo.parent / "slurm.conf").write_text(SLURM_CONF.replace("NodeName=cn[22-24]", "NodeName=CN[22-24]"))
    with pytest.raises(TopoplanError, match=r"node 'cn22' has no NodeName line .*has 'CN22': Slurm node names are "
                                            "case-sensitive"):
        load_topology(topo, U)


def test_mixed_core_counts_are_refused_unless_set(tmp_path, run_cli):
    conf = SLURM_CONF.replace("NodeName=cn[22-24] Weight=10", "NodeName=cn[22-24] CoresPerSocket=32")
    topo = _conf_dir(tmp_path, conf)
    with pytest.raises(TopoplanError, match=r"slurm.conf:13: node 'cn22' has 64 cores but node 'cn01' "
                                            r"\(.*slurm.conf:10\) has 24 cores: .*--set cores_per_node=N"):
        load_topology(topo, U)
    assert load_topology(topo, ["cores_per_node=24", UNIT]).cores_per_node == 24
    code, _, err = run_cli("show", topo, "--set", UNIT)
    assert code == 2 and "has 64 cores but node 'cn01'" in err and len(err.strip().splitlines()) == 1


def test_slurm_conf_given_as_the_topology(tmp_path):
    p = tmp_path / "slurm.conf"
    p.write_text(SLURM_CONF)
    with pytest.raises(TopoplanError, match=r"slurm.conf:2: ClusterName= is a slurm.conf line: give --topology "
                                            "the topology.conf"):
        load_topology(p, U)


# -- topology.yaml and the block plugin ------------------------------------------------------------------

def test_topology_yaml_tree_is_the_topology_conf(tmp_path):
    d = tmp_path / "y"
    shutil.copytree(DATA / "yaml", d)
    t = load_topology(d / "topology.yaml", U)
    conf = load_topology(DATA / "cluster" / "topology.conf", ["eps.down_bw=10Gbps", "eps.up_bw=10Gbps", UNIT])
    assert isinstance(t, TreeTopology) and t.name == "fabric" and t.cores_per_node == 24
    assert (t.nodes_per_switch, t.host_names(), t.switch_names) == (conf.nodes_per_switch, conf.host_names(),
                                                                    conf.switch_names)
    assert t.down_bw_Bps == pytest.approx(1.25e9)   # Slurm's YAML has no link speeds: 10 Gb/s


def test_topology_yaml_block_is_a_two_level_tree(tmp_path):
    d = tmp_path / "y"
    shutil.copytree(DATA / "yaml", d)
    t = load_topology(d / "topology.yaml", ["slurm_topology=racks", UNIT])
    assert isinstance(t, TreeTopology) and t.name == "racks"
    assert t.nodes_per_switch == (6, 6, 6, 6) and t.switch_names == ("b1", "b2", "b3", "b4")
    assert t.cores_per_node == 24 and t.hop_matrix()[0, 5] == 1 and t.hop_matrix()[0, 6] == 3
    with pytest.raises(TopoplanError, match=r"topology.yaml:28: field '\[2\].flat': topology 'plain' uses the "
                                            "topology/flat plugin.*choose one with --set slurm_topology=NAME: "
                                            "fabric, racks"):
        load_topology(d / "topology.yaml", ["slurm_topology=plain", UNIT])
    with pytest.raises(TopoplanError, match=r"field 'slurm_topology': no topology 'nvl'"):
        load_topology(d / "topology.yaml", ["slurm_topology=nvl", UNIT])


def test_topology_conf_block_plugin():
    doc = slurm_to_dict("BlockName=b1 Nodes=n[1-4]\nBlockName=b2 Nodes=n[5-8]\nBlockName=spare\nBlockSizes=4,16\n")
    assert doc["kind"] == "tree" and doc["switch_names"] == ["b1", "b2"] and doc["nodes_per_switch"] == [4, 4]
    with pytest.raises(TopoplanError, match=r"topology.conf:2: field 'BlockSizes': 12 is not a power-of-two multiple"):
        slurm_to_dict("BlockName=b1 Nodes=n[1-4]\nBlockSizes=4,12\n")
    with pytest.raises(TopoplanError, match=r"topology.conf:2: block plugin lines and SwitchName lines"):
        slurm_to_dict("SwitchName=s Nodes=n1\nBlockName=b1 Nodes=n2\n")
    with pytest.raises(TopoplanError, match=r"topology.conf:2: node 'n2' is also in block 'b1' \(line 1\)"):
        slurm_to_dict("BlockName=b1 Nodes=n[1-2]\nBlockName=b2 Nodes=n[2-3]\n")


def test_topology_yaml_link_speed_and_choice():
    text = ("- topology: a\n  tree:\n    switches:\n      - {switch: s1, nodes: 'x[1-2]', link_speed: 100}\n"
            "      - {switch: s2, nodes: 'x[3-4]', link_speed: 100}\n"
            "      - {switch: top, children: 's[1-2]', link_speed: 400Gbps}\n"
            "- topology: b\n  cluster_default: true\n  tree:\n    switches:\n"
            "      - {switch: s1, nodes: 'y[1-2]'}\n")
    assert slurm_yaml_to_dict(text)["hostnames"] == ["y1", "y2"]          # cluster_default wins
    doc = slurm_yaml_to_dict(text, topology="a", linkspeed_unit="Gbps")
    assert doc["eps"] == {"down_bw": "100Gbps", "up_bw": "400Gbps"}
    with pytest.raises(TopoplanError, match=r"t.yaml:4: field 'link_speed': 100 has no unit"):
        slurm_yaml_to_dict(text, "t.yaml", topology="a")


@pytest.mark.parametrize("text, needle", [
    ("- topology: a\n  tree:\n    switches:\n      - switch: s1\n        nodes: [n1, n2]\n",
     r"t.yaml:5: field '\[0\].tree.switches\[0\].nodes': expected a host list"),
    ("- topology: a\n  tree:\n    switches:\n      - switch: s1\n        node: n1\n",
     r"t.yaml:5: field '\[0\].tree.switches\[0\].node': unknown key"),
    ("- topology: a\n  tree: {switches: [{switch: s1, nodes: n1}]}\n  block: {blocks: []}\n",
     r"t.yaml:1: field '\[0\].topology': topology 'a' defines tree and block"),
    ("- topology: a\n- topology: a\n  flat: true\n", r"t.yaml:1: field '\[0\].topology': topology 'a' defines no type"),
    ("- topology: a\n  tree:\n    switches:\n      - switch: s1\n        nodes: n1\n        link_speed: fast\n",
     r"t.yaml:4: field 'link_speed': cannot read 'fast'"),
    ("- topology: a\n  cluster_default: yes please\n  flat: true\n", r"t.yaml:2: field '\[0\].cluster_default'"),
    ("topology: a\ntree:\n  switches: []\n", r"t.yaml:1: field 'topology': this is one topology of a Slurm "
                                             "topology.yaml, which is a list"),
    ("- topology: a\n  block:\n    blocks:\n      - block: b1\n        nodes: n[1-2]\n    block_sizes: [2, 3]\n",
     r"t.yaml:6: field 'block_sizes': 3 is not a power-of-two multiple"),
    # the checks the tree and block readers share, in each reader's words
    ("- topology: a\n  tree:\n    switch: [s1]\n",
     r"t.yaml:3: field '\[0\].tree.switch': unknown key \(known: switches\)"),
    ("- topology: a\n  block:\n    blocks: []\n",
     r"t.yaml:3: field '\[0\].block.blocks': expected a list of blocks \(\{block, nodes\}\)"),
    ("- topology: a\n  tree:\n    switches: [s1]\n",
     r"field '\[0\].tree.switches\[0\]': expected a switch \(\{switch, children, nodes\}\), got 's1'"),
    ("- topology: a\n  block:\n    blocks:\n      - nodes: n1\n",
     r"t.yaml:4: field '\[0\].block.blocks\[0\].block': missing \(every block has a name\)"),
    ("- topology: a\n  block:\n    blocks:\n      - block: b1\n        children: n1\n",
     r"t.yaml:5: field '\[0\].block.blocks\[0\].children': unknown key \(known: block, nodes\)"),
    ("- topology: a\n  block:\n    size: 4\n    blocks:\n      - block: b1\n        nodes: n1\n",
     r"t.yaml:3: field '\[0\].block.size': unknown key \(known: block_sizes, blocks\)"),
])
def test_topology_yaml_errors_name_file_line_and_field(tmp_path, text, needle):
    p = tmp_path / "t.yaml"
    p.write_text(text)
    with pytest.raises(TopoplanError, match=needle):
        load_topology(p, ["slurm_conf=none", UNIT])


# -- host names wherever node ids are ---------------------------------------------------------------------

def test_placement_csv_unknown_host_names_file_and_line(cluster, run_cli):
    rows = "".join(f"{r},cn{r // 2 + 1:02d}\n" for r in range(48)).replace("5,cn03", "5,cn99")
    (cluster / "placement.csv").write_text("rank,node\n" + rows)
    code, _, err = run_cli("simulate", "-t", cluster / "topology.conf", "--set", UNIT, "-T", cluster / "m.csv", "-p",
                           cluster / "placement.csv")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "placement.csv:7: field 'node': unknown host 'cn99' (hosts: cn01, cn02, ..., cn24; or a node id 0-23)" in err
    with pytest.raises(TopoplanError, match=r"placement.csv:2: field 'node': 'cn01' is a host name; resolving it "
                                            "needs the topology"):
        read_placement(cluster / "placement.csv")


def test_placement_json_with_host_names(cluster):
    t = load_topology(cluster / "topology.conf", U)
    p = cluster / "p.json"
    p.write_text(json.dumps({"rank_to_node": ["cn24", "cn24", "CN01", 5]}))
    pl = load_placement(str(p), 4, t)
    assert pl.rank_to_node.tolist() == [23, 23, 0, 5] and pl.rank_to_slot.tolist() == [0, 1, 0, 0]
    p.write_text(json.dumps({"rank_to_node": ["cn24", "gpu1"]}))
    with pytest.raises(TopoplanError, match=r"p.json: field 'rank_to_node': item 1: unknown host 'gpu1'"):
        load_placement(str(p), 2, t)


def test_bcast_allocations_take_host_names_in_any_case(cluster, run_cli):
    t = load_topology(cluster / "topology.conf", U)
    assert parse_spec("cn[01-02],CN13", t).tolist() == [0, 1, 12]
    (cluster / "alloc.txt").write_text("# job 42\ncn05\nCn17\n3\n")
    assert read_allocation(cluster / "alloc.txt", t).tolist() == [4, 16, 3]
    code, out, err = run_cli("bcast", "-t", cluster / "topology.conf", "--set", UNIT, "-a", "cn[01-04],cn[13-16]",
                             "--json")
    assert code == 0, err
    assert sorted(json.loads(out)["allocation_nodes"]) == [0, 1, 2, 3, 12, 13, 14, 15]
    code, _, err = run_cli("bcast", "-t", cluster / "topology.conf", "--set", UNIT, "-a", "cn[01-04],cn77")
    assert code == 2 and "unknown host 'cn77'" in err and len(err.strip().splitlines()) == 1


def test_node_ids_one_rule():
    topo = GraphTopology(switches=("s",), hosts=("a1", "B2", "7"), host_switch=(0, 0, 0), host_bw_Bps=(1e9,) * 3,
                         links=())
    assert node_ids(["b2", "A1", "7", "1"], topo, "x").tolist() == [1, 0, 2, 1]
    with pytest.raises(TopoplanError, match=r"x: '2' is ambiguous"):
        node_ids(["2"], ["1", "2", "3"], "x")
    with pytest.raises(TopoplanError, match=r"x: not an integer: '٣'|x: unknown host '٣'"):
        node_ids(["٣"], topo, "x")
    assert placement_from_doc({"rank_to_node": ["7", "a1"]}, "p", topo).rank_to_node.tolist() == [2, 0]


def test_the_spine_keeps_its_name(cluster, tmp_path):
    topo = load_topology(str(cluster / "topology.conf"), U)
    assert topo.top_label() == "spine" and topo.switch_labels() == ["leaf1", "leaf2"]
    from topoplan.core.topology_io import topology_from_dict, topology_to_dict
    from topoplan.sim.network import build_network

    assert topology_from_dict(topology_to_dict(topo), "t").top_name == "spine"
    names = build_network(topo).link_name
    assert "leaf1->spine" in names and "spine->leaf2" in names and not any("top" in n for n in names)
    # a YAML topology may name its top switch, but not after an edge switch
    y = tmp_path / "t.yaml"
    y.write_text("kind: tree\nswitches: 2\nnodes_per_switch: 2\neps: {down_bw: 10Gb/s, up_bw: 10Gb/s}\n"
                 "switch_names: [a, b]\ntop_name: a\n")
    with pytest.raises(TopoplanError, match="field 'top_name': 'a' is also the name of an edge switch"):
        load_topology(str(y))
    y.write_text(y.read_text().replace("top_name: a", "top_name: core1"))
    assert load_topology(str(y)).top_label() == "core1"


# -- host lists as Slurm reads them (the expansion itself: tests/test_hostlist.py) ----------------------------------

def test_hostlists_with_spaces_in_every_reader(tmp_path, run_cli):
    """topology.yaml node lists, --allocation host lists and host files take Slurm's spaces between items."""
    y = tmp_path / "topology.yaml"
    y.write_text("- topology: t\n  tree:\n    switches:\n      - {switch: s0, nodes: 'cn[01-02] cn05'}\n"
                 "      - {switch: s1, nodes: 'cn[06-07]'}\n      - {switch: top, children: 's[0-1]'}\n")
    t = load_topology(y)
    assert list(t.host_names()) == ["cn01", "cn02", "cn05", "cn06", "cn07"]
    code, out, err = run_cli("bcast", "-t", y, "-a", "cn[01-02] cn07", "--json")
    assert code == 0, err
    assert json.loads(out)["allocation_nodes"] == [0, 1, 4]
    from topoplan.fabric.ibfabric import read_hosts

    (tmp_path / "hosts").write_text("cn[01-02] cn05\ncn06 slots=4\ncn07:2\n")
    assert read_hosts(tmp_path / "hosts") == ["cn01", "cn02", "cn05", "cn06", "cn07"]
