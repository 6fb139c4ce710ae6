import re

import numpy as np
import pytest

from topoplan.core.errors import TopoplanError
from topoplan.core.topology import GraphTopology, TorusTopology, TreeTopology
from topoplan.core.topology_io import (apply_overrides, dump_topology, load_topology, preset_names,
                                 topology_from_dict)


def test_presets_match_paper_tables():
    t = load_topology("paper000")
    assert (t.n_nodes, t.n_switches, len(t.ocs.nodes)) == (128, 4, 128)
    assert t.up_bw_Bps == pytest.approx(8e9) and t.down_bw_Bps == pytest.approx(1.25e9)
    assert t.ocs.bw_Bps == pytest.approx(4e9) and t.switch_delay_s == pytest.approx(420e-9)
    t = load_topology("paper003")
    assert (t.n_nodes, t.cores_per_node, t.n_switches) == (64, 4, 4)
    assert t.ocs.bdp_B == pytest.approx(1250.0)  # 20 Gbps x 500 ns = 10,000 bit
    assert t.node_link_bw()[t.ocs.nodes[0]] == pytest.approx(2.5e9)
    assert t.node_link_bw()[1 if 1 not in t.ocs.nodes else 15] == pytest.approx(1.25e9)
    for name, sw, per in (("paper001-8x32", 8, 8), ("paper001-16x16", 16, 4)):
        t = load_topology(name)
        assert t.n_nodes == 256 and t.n_switches == sw
        assert np.bincount(t.node_switch()[list(t.ocs.nodes)]).tolist() == [per] * sw
    k = load_topology("kcomputer")
    assert isinstance(k, TorusTopology) and k.n_nodes == 82944
    assert k.wrap == (True, False, True, False, True, False)
    assert set(preset_names()) >= {"paper000", "paper001-8x32", "paper001-16x16", "paper003", "mesh10x10x10", "kcomputer"}


def test_overrides_give_paper_variants():
    t = load_topology("paper003", ["ocs.nodes_per_switch=1", "ocs.node_link_bw=10Gbps"])
    assert t.ocs.nodes == (0, 16, 32, 48)
    assert t.node_link_bw()[0] == pytest.approx(1.25e9)  # "Ours (narrow)"
    ft = load_topology("paper003", ["kind=fat-tree", "eps.up_bw=160Gbps", "ocs=null"])
    assert ft.kind == "fat-tree" and ft.ocs is None
    low = load_topology("paper001-8x32", ["eps.up_bw=1.6Gbps", "ocs.nodes_per_switch=16"])
    assert low.up_bw_Bps == pytest.approx(0.2e9) and len(low.ocs.nodes) == 128


def test_yaml_roundtrip(tmp_path):
    for name in ("paper003", "mesh10x10x10"):
        t = load_topology(name)
        p = tmp_path / f"{name}.yaml"
        p.write_text(dump_topology(t))
        u = load_topology(p)
        assert type(u) is type(t) and u.n_nodes == t.n_nodes
        assert np.array_equal(u.hop_matrix()[:20, :20], t.hop_matrix()[:20, :20])


def test_hop_matrices():
    t = load_topology("paper003")
    h = t.hop_matrix()
    assert h[0, 0] == 0 and h[0, 1] == 1 and h[0, 16] == 3
    m = topology_from_dict({"kind": "torus", "dims": [4, 3], "wrap": [True, False], "bw": "1GB/s"})
    h = m.hop_matrix()
    assert h[0, 3] == 2  # wraps: one hop round the ring, plus the first router
    assert h[0, 8] == 3  # (0,0) -> (0,2) on the mesh dimension: two hops


@pytest.mark.parametrize("doc,field", [
    ({"kind": "tree", "switches": 2, "nodes_per_switch": 4, "eps": {"down_bw": "-1Gbps", "up_bw": "1Gbps"}}, "eps.down_bw"),
    ({"kind": "tree", "switches": 2, "nodes_per_switch": 4, "eps": {"up_bw": "1Gbps"}}, "eps.down_bw"),
    ({"kind": "hybrid", "switches": 2, "nodes_per_switch": 4, "eps": {"down_bw": "1Gbps", "up_bw": "1Gbps"},
      "ocs": {"nodes": [9], "bw": "1Gbps"}}, "ocs.nodes"),
    ({"kind": "blob"}, "kind"),
    ({"kind": "tree", "switchez": 2}, "switchez"),
    ({"kind": "torus", "dims": [2, 2], "wrap": [True], "bw": "1GB/s"}, "wrap"),
])
def test_bad_topologies_name_the_field(doc, field):
    with pytest.raises(TopoplanError) as e:
        topology_from_dict(doc)
    assert field in str(e.value)


def test_malformed_yaml_names_file_and_line(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("kind: tree\nswitches: [1, 2\nnodes_per_switch: 3\n")
    with pytest.raises(TopoplanError) as e:
        load_topology(p)
    assert "bad.yaml:" in str(e.value) and "malformed YAML" in str(e.value)


def test_unknown_preset():
    with pytest.raises(TopoplanError, match="unknown topology preset 'nope'"):
        load_topology("nope")


def test_directory_is_not_a_topology_file(tmp_path):
    # it exists: 'no such topology file' misled
    d = tmp_path / "cluster.yaml"
    d.mkdir()
    with pytest.raises(TopoplanError, match=r"cluster\.yaml: a directory, not a topology file"):
        load_topology(str(d))
    with pytest.raises(TopoplanError, match="no such topology file"):
        load_topology(str(tmp_path / "missing.yaml"))


SLURM_TWO_LEVEL = """\
# two racks
SwitchName=s0 Nodes=tux[0-3] LinkSpeed=10
SwitchName=s1 Nodes=tux[4-7] LinkSpeed=10
SwitchName=top Switches=s[0-1] \\
  LinkSpeed=20Gbps
"""


def test_slurm_two_level_is_a_tree(tmp_path):
    p = tmp_path / "topology.conf"
    p.write_text(SLURM_TWO_LEVEL)
    t = load_topology(p, ["slurm_linkspeed_unit=Gbps"])   # Slurm leaves the unit of LinkSpeed=10 to each site
    assert isinstance(t, TreeTopology) and t.nodes_per_switch == (4, 4)
    assert t.host_names()[4] == "tux4" and t.switch_names == ("s0", "s1")
    assert t.down_bw_Bps == pytest.approx(1.25e9) and t.up_bw_Bps == pytest.approx(2.5e9)


def test_slurm_three_level_is_a_graph(tmp_path):
    p = tmp_path / "topology.conf"
    p.write_text("SwitchName=l0 Nodes=a[0-1]\nSwitchName=l1 Nodes=a[2-3]\nSwitchName=l2 Nodes=a[4-5]\n"
                 "SwitchName=m0 Switches=l[0-1]\nSwitchName=m1 Switches=l2\nSwitchName=top Switches=m[0-1]\n")
    t = load_topology(p)
    assert isinstance(t, GraphTopology) and t.n_nodes == 6
    h = t.hop_matrix()
    assert h[0, 1] == 1 and h[0, 2] == 3 and h[0, 4] == 5


def test_slurm_errors_name_the_line(tmp_path):
    p = tmp_path / "topology.conf"
    p.write_text("SwitchName=s0 Nodes=tux[0-3]\nSwitchName=top Switches=s[0-1]\n")
    with pytest.raises(TopoplanError, match=r"topology.conf:2: .*unknown switch 's1'"):
        load_topology(p)
    p.write_text("SwitchName=s0 Nodes=tux[0-3] Speed=3\n")
    with pytest.raises(TopoplanError, match=r"topology.conf:1: unknown key"):
        load_topology(p)


def test_apply_overrides_creates_nested_keys():
    d = apply_overrides({"a": 1}, ["b.c=2", "a=x"])
    assert d == {"a": "x", "b": {"c": 2}}
    with pytest.raises(TopoplanError):
        apply_overrides({}, ["novalue"])


@pytest.mark.parametrize("preset,override,field", [
    ("paper003", "eps.up_bws=40Gbps", "eps.up_bws"),       # a typo would otherwise change nothing
    ("paper003", "ocs.node_bw=10Gbps", "ocs.node_bw"),
    ("paper003", "mtu=1MB", "mtu"),                         # a torus key on a tree: the tree's is eps.mtu
    ("mesh10x10x10", "eps.mtu=1MB", "eps"),
    ("mesh10x10x10", "node.cores=2", "node.cores"),
])
def test_unknown_keys_are_errors_not_ignored(preset, override, field):
    with pytest.raises(TopoplanError, match=rf"{preset}: field '{field}': unknown key for kind"):
        load_topology(preset, [override])
    # the key each kind does read is accepted
    ok = {"paper003": "eps.mtu=1MB", "mesh10x10x10": "mtu=1MB"}[preset]
    assert load_topology(preset, [ok]).mtu_B == pytest.approx(1e6)


def test_yaml_topology_is_topoplan_or_slurm_by_its_shape(tmp_path):
    """A mapping is a topoplan topology, a list of '- topology: name' a Slurm topology.yaml; anything else neither."""
    p = tmp_path / "t.yaml"
    p.write_text("- topology: t\n  tree:\n    switches:\n      - switch: s0\n        nodes: n[1-4]\n")
    t = load_topology(p)
    assert isinstance(t, TreeTopology) and t.name == "t" and t.host_names() == ["n1", "n2", "n3", "n4"]
    for text in ("[1, 2]\n", "just text\n", "- [a]\n"):
        p.write_text(text)
        with pytest.raises(TopoplanError, match=r"t.yaml: a topology file must be a YAML mapping .* or, for "
                                                r"Slurm's topology.yaml, a list of topologies"):
            load_topology(p)


@pytest.mark.parametrize("overrides, needle", [
    ("ocs.nodes_per_switch=2", r"field 'set': expected a list of dotted.key=value strings, got the string"),
    ([5], r"field 'set': 5: expected a dotted.key=value string, got int"),
])
def test_overrides_of_the_wrong_type_are_refused(overrides, needle):
    # one string was read a character at a time ("'o': expected dotted.key=value"); a number was a TypeError
    with pytest.raises(TopoplanError, match=needle):
        load_topology("paper003", overrides)


# -- choosing the OCS nodes: ocs.nodes_per_switch or ocs.nodes ------------------------------------------------

OCS_PRESETS = ["paper000", "paper001-8x32", "paper001-16x16", "paper003"]


def _saved(tmp_path, preset, *, listed=False):
    """``show PRESET -o FILE``'s file; ``listed``: with the OCS nodes as the list ``ocs.nodes``, as it was
    written before (and as a topology whose OCS nodes are not balanced still is)."""
    import yaml

    from topoplan.core.topology_io import topology_to_dict
    t = load_topology(preset)
    p = tmp_path / f"{preset}.yaml"
    if listed:
        doc = topology_to_dict(t)
        doc["ocs"] = {"nodes": list(t.ocs.nodes), **{k: v for k, v in doc["ocs"].items() if k != "nodes_per_switch"}}
        p.write_text(yaml.safe_dump(doc, sort_keys=False))
    else:
        p.write_text(dump_topology(t))
    return p


@pytest.mark.parametrize("preset", OCS_PRESETS)
@pytest.mark.parametrize("sets", [[], ["ocs.nodes_per_switch=1"], ["ocs.nodes=[0, 3]"], ["nodes_per_switch=40"],
                                  ["switches=2", "ocs.nodes_per_switch=2"]])
def test_a_saved_topology_loads_back_and_takes_overrides_as_its_preset(tmp_path, preset, sets):
    """`show -o` wrote the OCS nodes as a list, over which --set ocs.nodes_per_switch did nothing (32 OCS nodes
    where the preset gave 4); the file now chooses them as the preset does, and a --set of one way of choosing
    replaces the other."""
    want = load_topology(preset, sets)
    assert load_topology(_saved(tmp_path, preset), sets) == want
    if not any(s.startswith(("nodes_per_switch", "switches")) for s in sets):   # a list names nodes, not a rule
        assert load_topology(_saved(tmp_path, preset, listed=True), sets) == want


def test_the_ocs_of_a_saved_topology_is_written_as_chosen(tmp_path):
    p = _saved(tmp_path, "paper003")
    assert "  nodes_per_switch: 8\n" in p.read_text() and "  nodes:" not in p.read_text()
    p.write_text(dump_topology(load_topology("paper003", ["ocs.nodes=[0, 1, 17]"])))   # not balanced: a list
    assert load_topology(p).ocs.nodes == (0, 1, 17) and "  nodes:\n  - 0\n  - 1\n  - 17\n" in p.read_text()


HYBRID_FILE = """\
kind: hybrid
switches: 2
nodes_per_switch: 4
eps: {down_bw: 10Gbps, up_bw: 20Gbps}
ocs:
  bw: 20Gbps
"""


@pytest.mark.parametrize("given, nodes", [
    ("  nodes_per_switch: 2\n  nodes: [0, 1, 4, 5]\n", (0, 1, 4, 5)),
    ("  nodes: [4, 0, 5, 1]\n  nodes_per_switch: 2\n", (4, 0, 5, 1)),     # the same nodes: the list's order
    ("  nodes_per_switch: 0\n  nodes: []\n", ()),
])
def test_a_file_may_give_both_ways_of_choosing_if_they_agree(tmp_path, given, nodes):
    p = tmp_path / "h.yaml"
    p.write_text(HYBRID_FILE + given)
    assert load_topology(p).ocs.nodes == nodes


@pytest.mark.parametrize("given, line", [
    ("  nodes_per_switch: 1\n  nodes: [0, 1, 4, 5]\n", 7),
    ("  nodes: [0, 1, 4, 5]\n  nodes_per_switch: 1\n", 8),
    ("  nodes: [0, 1, 4]\n  nodes_per_switch: 2\n", 8),
])
def test_a_file_giving_both_ways_of_choosing_that_disagree_is_an_error(tmp_path, run_cli, given, line):
    """`nodes` won over `nodes_per_switch` without a word."""
    p = tmp_path / "h.yaml"
    p.write_text(HYBRID_FILE + given)
    with pytest.raises(TopoplanError, match=rf"^{re.escape(str(p))}:{line}: field 'ocs.nodes_per_switch': \d chooses "
                                            r"OCS nodes \[.*\], but ocs.nodes lists \[.*\]; give one of the two$"):
        load_topology(p)
    code, out, err = run_cli("show", p, "-o", tmp_path / "out.yaml")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert err.startswith(f"error: {p}:{line}: field 'ocs.nodes_per_switch': ")
    assert not (tmp_path / "out.yaml").exists()
    # a --set of one replaces the file's other
    assert load_topology(p, ["ocs.nodes_per_switch=1"]).ocs.nodes == (0, 4)
    assert load_topology(p, ["ocs.nodes=[1, 5]"]).ocs.nodes == (1, 5)


def test_set_of_both_ways_of_choosing_must_agree():
    assert load_topology("paper003", ["ocs.nodes=[0, 16, 32, 48]", "ocs.nodes_per_switch=1"]).ocs.nodes == (0, 16, 32, 48)
    with pytest.raises(TopoplanError, match=r"^paper003: field 'ocs.nodes_per_switch': 1 chooses OCS nodes "
                                            r"\[0, 16, 32, 48\], but ocs.nodes lists \[0, 17\]"):
        load_topology("paper003", ["ocs.nodes=[0, 17]", "ocs.nodes_per_switch=1"])


def test_an_overlay_chooses_the_ocs_nodes_over_its_base(tmp_path):
    _saved(tmp_path, "paper003", listed=True)
    for text, nodes in (("base: paper003.yaml\nocs: {nodes_per_switch: 1}\n", (0, 16, 32, 48)),
                        ("base: paper003\nocs: {nodes: [0, 16]}\n", (0, 16))):
        (tmp_path / "o.yaml").write_text(text)
        assert load_topology(tmp_path / "o.yaml").ocs.nodes == nodes
    (tmp_path / "o.yaml").write_text("base: paper003\nocs: {nodes: [0, 16], nodes_per_switch: 2}\n")
    with pytest.raises(TopoplanError, match=r"o.yaml:2: field 'ocs.nodes_per_switch': 2 chooses OCS nodes"):
        load_topology(tmp_path / "o.yaml")


def test_circuits_on_a_saved_topology_follow_set_ocs_nodes_per_switch(tmp_path, run_cli):
    """The reported case: 12 circuits over the file's 32 OCS nodes where the preset gives 2 over 4."""
    import json
    args = ["--set", "ocs.nodes_per_switch=1", "-T", "neighbor2d:rows=8,cols=8,bytes=4MB", "-p", "round-robin",
            "-m", "greedy", "--no-simulate", "--json"]
    counts = []
    for topo in ("paper003", _saved(tmp_path, "paper003"), _saved(tmp_path, "paper003", listed=True)):
        code, out, err = run_cli("circuits", "-t", topo, *args)
        assert code == 0, err
        counts.append(len(json.loads(out)["circuits"]))
    assert counts == [2, 2, 2]


# -- --set kind=tree on a topology with an OCS ----------------------------------------------------------------

def _hybrid_where(tmp_path, where: str):
    """paper003 as a preset, a saved file or an overlay; and how an error names its ocs section's line."""
    if where == "file":
        return _saved(tmp_path, "paper003"), r" \(the ocs section, line 17\)"
    if where == "overlay":
        (tmp_path / "o.yaml").write_text("base: paper003\neps: {up_bw: 40Gbps}\n")
        return tmp_path / "o.yaml", ""
    return "paper003", ""


@pytest.mark.parametrize("where", ["preset", "file", "overlay"])
def test_set_kind_tree_on_a_hybrid_asks_to_drop_the_ocs(tmp_path, run_cli, where):
    """`--set kind=tree` on a hybrid stayed a hybrid without a word (a tree with an ocs section is one)."""
    spec, at = _hybrid_where(tmp_path, where)
    with pytest.raises(TopoplanError, match=rf"^{re.escape(str(spec))}: field 'kind': --set kind=tree, but the "
                                            rf"topology has an OCS{at}, which makes a tree a hybrid; drop the OCS "
                                            r"with --set ocs=null \(or keep it with --set kind=hybrid\)$"):
        load_topology(spec, ["kind=tree"])
    code, out, err = run_cli("show", spec, "--set", "kind=tree", "-o", tmp_path / "out.yaml")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "--set ocs=null" in err
    assert not (tmp_path / "out.yaml").exists()
    t = load_topology(spec, ["kind=tree", "ocs=null"])
    assert t.kind == "tree" and t.ocs is None
    assert load_topology(spec, ["kind=hybrid"]).kind == "hybrid"


@pytest.mark.parametrize("where", ["preset", "file", "overlay"])
def test_set_kind_fat_tree_on_a_hybrid_asks_to_drop_the_ocs(tmp_path, run_cli, where):
    """`--set kind=fat-tree` on a hybrid kept the OCS without a word: a fat-tree reads an ocs section (circuits
    beside unshared uplinks), so the "FT EPS" variant without `--set ocs=null` had an OCS and 20 Gbps OCS-node
    links."""
    spec, at = _hybrid_where(tmp_path, where)
    with pytest.raises(TopoplanError, match=rf"^{re.escape(str(spec))}: field 'kind': --set kind=fat-tree, but "
                                            rf"the topology has an OCS{at}, which a fat-tree keeps; drop the OCS "
                                            r"with --set ocs=null \(a fat-tree that keeps an OCS is written as "
                                            r"kind: fat-tree in a topology file\)$"):
        load_topology(spec, ["kind=fat-tree", "eps.up_bw=160Gbps"])
    code, out, err = run_cli("show", spec, "--set", "kind=fat-tree", "-o", tmp_path / "out.yaml")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "--set ocs=null" in err
    assert not (tmp_path / "out.yaml").exists()
    t = load_topology(spec, ["kind=fat-tree", "ocs=null"])
    assert t.kind == "fat-tree" and t.ocs is None and set(t.node_link_bw().tolist()) == {1.25e9}


@pytest.mark.parametrize("overrides", [["kind=hybrid"], ["kind=fat-tree", "ocs=null"], ["eps.up_bw=160Gbps"]])
def test_set_kind_that_reads_the_ocs_or_drops_it_is_taken(overrides):
    t = load_topology("paper003", overrides)
    assert t.kind == ("fat-tree" if "kind=fat-tree" in overrides else "hybrid")
    assert (t.ocs is None) == ("ocs=null" in overrides)


def test_a_fat_tree_file_with_an_ocs_keeps_it(tmp_path):
    """Written in a file, a fat-tree with an OCS is what it says: the check is on --set kind only."""
    p = tmp_path / "ft.yaml"
    p.write_text(HYBRID_FILE.replace("kind: hybrid", "kind: fat-tree").replace("bw: 20Gbps\n", "bw: 20Gbps\n"
                                                                                "  nodes_per_switch: 1\n"))
    t = load_topology(p)
    assert t.kind == "fat-tree" and t.ocs.nodes == (0, 4)


@pytest.mark.parametrize("kind", ["torus", "mesh", "graph"])
def test_set_kind_of_another_family_on_a_hybrid_is_refused(kind):
    """Kinds that read no ocs section (torus, mesh, graph) refuse a tree's document by its keys."""
    with pytest.raises(TopoplanError, match=rf"^paper003(:\d+)?: field '[a-z_.]+': unknown key for kind {kind}"):
        load_topology("paper003", [f"kind={kind}"])


def test_a_tree_given_an_ocs_without_set_kind_is_a_hybrid(tmp_path):
    """What the upgrade is for: an OCS added to a tree (a Slurm tree's overlay, --set ocs.*) makes a hybrid."""
    p = tmp_path / "t.yaml"
    p.write_text(HYBRID_FILE.replace("kind: hybrid", "kind: tree").replace("ocs:\n  bw: 20Gbps\n", ""))
    t = load_topology(p, ["ocs.nodes_per_switch=1", "ocs.bw=20Gbps"])
    assert t.kind == "hybrid" and t.ocs.nodes == (0, 4)
    with pytest.raises(TopoplanError, match=r"field 'kind': --set kind=tree, but the topology has an OCS"):
        load_topology(p, ["kind=tree", "ocs.nodes_per_switch=1", "ocs.bw=20Gbps"])
