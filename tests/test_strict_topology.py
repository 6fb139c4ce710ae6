"""Issue 17: hostile topology input is a one-line error naming file, line and field -- never a misread.

Classes: Slurm topology.conf; host names that would rewrite launcher files; numbers and ids of every
topology kind; duplicate keys and resource exhaustion in YAML/JSON documents.
"""

import json

import numpy as np
import pytest

from topoplan.core.errors import TopoplanError
from topoplan.core.io import read_json
from topoplan.core.placement import Placement
from topoplan.core.topology import (GraphTopology, TorusTopology, TreeTopology, check_count,
                                   check_host_names)
from topoplan.core.topology_io import (MAX_TOPOLOGY_BYTES, apply_overrides, dump_topology, load_topology,
                                      slurm_to_dict, topology_from_dict)
from topoplan.reporting.export import read_hostfile, render

TREE = "kind: tree\nswitches: 2\nnodes_per_switch: 2\neps: {down_bw: 10Gbps, up_bw: 20Gbps}\n"
TREE_DOC = {"kind": "tree", "switches": 2, "nodes_per_switch": 2, "eps": {"down_bw": "10Gbps", "up_bw": "20Gbps"}}
TORUS_DOC = {"kind": "torus", "dims": [2, 2], "bw": "1GB/s"}
GRAPH_DOC = {"kind": "graph", "switches": ["a", "b"], "hosts": [{"name": "h0", "switch": "a"},
                                                                  {"name": "h1", "switch": "b"}],
             "links": [{"a": "a", "b": "b"}]}


def _load(tmp_path, text, name="t.yaml", sets=()):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return load_topology(p, sets)


# -- Slurm topology.conf ----------------------------------------------------------------------------

GBPS = ["slurm_linkspeed_unit=Gbps"]   # Slurm leaves LinkSpeed's unit to each site: bare numbers need it stated


def _conf(tmp_path, text, sets=GBPS):
    return _load(tmp_path, text, "topology.conf", sets)


@pytest.mark.parametrize("speed", ["100", "100.0", "1e2", "1E2", "1e+2", ".1e3", "100Gbps", "100Gb/s", "12.5GB/s"])
def test_slurm_linkspeed_one_reading_for_every_spelling(tmp_path, speed):
    t = _conf(tmp_path, f"SwitchName=s0 Nodes=n[0-1] LinkSpeed={speed}\n")
    assert t.down_bw_Bps == pytest.approx(12.5e9)      # 100 Gb/s, never 100 B/s


@pytest.mark.parametrize("unit, bw_Bps", [("Gbps", 12.5e9), ("Mbps", 12.5e6), ("GB/s", 100e9), ("Gb/s", 12.5e9)])
def test_slurm_linkspeed_in_the_stated_unit(tmp_path, unit, bw_Bps):
    t = _conf(tmp_path, "SwitchName=s0 Nodes=n[0-1] LinkSpeed=100\n", [f"slurm_linkspeed_unit={unit}"])
    assert t.down_bw_Bps == pytest.approx(bw_Bps)


@pytest.mark.parametrize("speed", ["100000", "1e2", "100.0"])
def test_slurm_bare_linkspeed_needs_its_unit_stated(tmp_path, speed):
    """100000 is 100 Gb/s at a site that counts Mb/s and 100 Tb/s at one that counts Gb/s: never guessed."""
    with pytest.raises(TopoplanError, match=rf"topology.conf:1: field 'LinkSpeed': {speed} has no unit.*"
                                            r"--set slurm_linkspeed_unit=UNIT"):
        _conf(tmp_path, f"SwitchName=s0 Nodes=n[0-1] LinkSpeed={speed}\n", sets=())
    assert _conf(tmp_path, "SwitchName=s0 Nodes=n[0-1] LinkSpeed=100Gbps\n", sets=()).down_bw_Bps == 12.5e9


@pytest.mark.parametrize("unit", ["", "G", "bogus", "1Gbps", "Gbps;x", "٣Gbps"])
def test_slurm_linkspeed_unit_must_be_a_bandwidth_unit(tmp_path, unit):
    with pytest.raises(TopoplanError, match="slurm_linkspeed_unit"):
        _conf(tmp_path, "SwitchName=s0 Nodes=n[0-1] LinkSpeed=100\n", [f"slurm_linkspeed_unit={unit}"])


def test_slurm_linkspeed_unit_is_for_slurm_files(tmp_path):
    with pytest.raises(TopoplanError, match="field 'slurm_linkspeed_unit': applies to a Slurm"):
        _load(tmp_path, TREE, sets=["slurm_linkspeed_unit=Gbps"])


@pytest.mark.parametrize("speed, needle", [
    ("0", "must be positive"), ("-10", "must be positive"), ("nan", "cannot read 'nan'"),
    ("inf", "cannot read 'inf'"), ("1e30", "implausibly large"), ("fast", "cannot read 'fast'"),
    ("١٠٠", "cannot read"), ("100G", "unknown bandwidth unit"), ("1_000", "cannot read"),
])
def test_slurm_bad_linkspeed(tmp_path, speed, needle):
    with pytest.raises(TopoplanError, match=rf"topology.conf:1: field 'LinkSpeed': .*{needle}"):
        _conf(tmp_path, f"SwitchName=s0 Nodes=n[0-1] LinkSpeed={speed}\n")


def test_slurm_mixed_leaf_speeds_are_kept_per_host(tmp_path):
    t = _conf(tmp_path, "SwitchName=s0 Nodes=a[0-1] LinkSpeed=10\nSwitchName=s1 Nodes=a[2-3] LinkSpeed=100\n"
                        "SwitchName=top Switches=s[0-1] LinkSpeed=200\n")
    assert isinstance(t, GraphTopology)
    assert t.node_link_bw().tolist() == pytest.approx([1.25e9, 1.25e9, 12.5e9, 12.5e9])
    assert sorted(bw for _, _, bw in t.links) == pytest.approx([25e9, 25e9])   # the top's LinkSpeed
    assert t.hop_matrix()[0].tolist() == [0, 1, 3, 3]


def test_slurm_uniform_leaf_speeds_stay_a_tree(tmp_path):
    t = _conf(tmp_path, "SwitchName=s0 Nodes=a[0-1] LinkSpeed=10\nSwitchName=s1 Nodes=a[2-3] LinkSpeed=10Gbps\n"
                        "SwitchName=top Switches=s[0-1] LinkSpeed=40\n")
    assert isinstance(t, TreeTopology)
    assert (t.down_bw_Bps, t.up_bw_Bps) == pytest.approx((1.25e9, 5e9))


def test_slurm_graph_links_use_the_parent_speed(tmp_path):
    t = _conf(tmp_path, "SwitchName=l0 Nodes=a[0-1] LinkSpeed=10\nSwitchName=l1 Nodes=a[2-3] LinkSpeed=10\n"
                        "SwitchName=mid Switches=l[0-1] LinkSpeed=40\nSwitchName=top Switches=mid LinkSpeed=80\n")
    bw = {(t.switches[a], t.switches[b]): x for a, b, x in t.links}
    assert bw[("mid", "l0")] == pytest.approx(5e9) and bw[("top", "mid")] == pytest.approx(10e9)


@pytest.mark.parametrize("tail", ["\\", "\\\n", "\\\n# end\n"])
def test_slurm_trailing_continuation_keeps_the_last_switch(tmp_path, tail):
    t = _conf(tmp_path, "SwitchName=s0 Nodes=a[0-1]\nSwitchName=s1 Nodes=a[2-3]\nSwitchName=top Switches=s[0-1] "
              + tail)
    assert isinstance(t, TreeTopology) and t.nodes_per_switch == (2, 2)


@pytest.mark.parametrize("text, needle", [
    ("SwitchName=s1 Switches=s2 Nodes=a1\nSwitchName=s2 Switches=s1\n",
     r"topology.conf:1: switch 's1' is in a cycle: s1 -> s2 -> s1"),
    ("SwitchName=s1 Switches=s2\nSwitchName=s2 Switches=s3\nSwitchName=s3 Switches=s2 Nodes=a1\n",
     r"topology.conf:2: switch 's2' is in a cycle: s2 -> s3 -> s2"),
    ("SwitchName=s1 Switches=s1 Nodes=a1\n", r"topology.conf:1: switch 's1' lists itself"),
    ("SwitchName=s0 Nodes=a[0-1]\nSwitchName=s1 Nodes=a[1-2]\nSwitchName=top Switches=s[0-1]\n",
     r"topology.conf:2: node 'a1' is also under switch 's0' \(line 1\)"),
    ("SwitchName=s0 Nodes=a[0-1],a1\n", r"topology.conf:1: node 'a1' is listed twice under switch 's0'"),
    ("SwitchName=s0 Nodes=a0\nSwitchName=s0 Nodes=b1\n", r"topology.conf:2: switch 's0' defined twice"),
    ("SwitchName=s0 Nodes=a0 Speed=3\n", r"topology.conf:1: unknown key 'Speed'"),
    ("SwitchName=s0 Nodes=a0 nodes=b0\n", r"topology.conf:1: field 'Nodes': given twice"),
    ("SwitchName=s0 Nodes=a0\nSwitchName=top Switches=s0,s0\n", r"topology.conf:2: .*lists switch 's0' twice"),
    ("SwitchName=s0 Nodes=a0\nSwitchName=top Switches=s[0-1]\n", r"topology.conf:2: .*unknown switch 's1'"),
    ("SwitchName=s0 Nodes=a[0-1]\nSwitchName=s1 Nodes=a[2-3]\n",
     r"topology.conf:2: switch 's1' is not connected to switch 's0'"),
    ("SwitchName=s0 Nodes=a[0-1] LinkSpeed=10\nSwitchName=s1 Nodes=a[2-3]\nSwitchName=top Switches=s[0-1] "
     "LinkSpeed=10\n", r"topology.conf:2: switch 's1' has no LinkSpeed but switch 's0' \(line 1\) has one"),
    ("SwitchName=s[0] Nodes=a0\n", r"topology.conf:1: field 'SwitchName'"),
    ("SwitchName=s0 Nodes=n[٣-٥]\n", r"topology.conf:1: field 'Nodes': host list .*bad range"),
])
def test_slurm_structure_errors_name_the_line(tmp_path, text, needle):
    with pytest.raises(TopoplanError, match=needle):
        _conf(tmp_path, text)


@pytest.mark.parametrize("nodes, needle", [
    ("a0,b;rm", r"topology.conf:2: field 'Nodes': host name 'b;rm' contains ';'"),
    ("a0,b=1", r"topology.conf:2: field 'Nodes': host name 'b=1' contains '='"),
    ("a0,b\x0bc", r"topology.conf:2: field 'Nodes': host name 'b\\x0bc' contains '\\x0b'"),
    ("a0,-x", r"topology.conf:2: field 'Nodes': host name '-x' is malformed"),
    ("a0,A1", r"topology.conf:2: field 'Nodes': host 'A1' is named for node 0 and node 2"),
])
def test_slurm_node_names_are_checked_after_expansion(tmp_path, nodes, needle):
    with pytest.raises(TopoplanError, match=needle):
        _conf(tmp_path, f"SwitchName=s0 Nodes=a1\nSwitchName=s1 Nodes={nodes}\nSwitchName=t Switches=s[0-1]\n")


def test_slurm_node_total_is_capped():
    text = "".join(f"SwitchName=s{i} Nodes=n{i}x[0-999999]\n" for i in range(3))
    with pytest.raises(TopoplanError, match=r"topology.conf:2: more than 1,048,576 nodes"):
        slurm_to_dict(text)


# -- host names ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, needle", [
    ("x slot=9", "contains ' '"), ("a=b", "contains '='"), ("a\nb", r"contains '\\n'"),
    ("a\tb", r"contains '\\t'"), ("a\x00b", r"contains '\\x00'"), ("a;b", "contains ';'"),
    ("$(reboot)", r"contains '\$'"), ("a`b`", "contains '`'"), ("a|b", r"contains '\|'"), ("a:b", "contains ':'"),
    ("nœud", "contains 'œ'"), ("", "empty host name"), ("-n1", "malformed"), ("n1-", "malformed"),
    ("a..b", "malformed"), (".a", "malformed"), ("a" * 64, "malformed"), ("a." * 130, "longer than 253"),
    (7, "expected a host name"),
])
def test_host_name_grammar(name, needle):
    with pytest.raises(TopoplanError, match=rf"field 'hostnames\[1\]': .*{needle}"):
        check_host_names(["ok", name])


@pytest.mark.parametrize("name", ["n1", "node0001", "cn-01.cluster.local", "gpu_7", "10.0.0.1", "A" * 63])
def test_host_name_grammar_accepts_real_names(name):
    assert check_host_names([name]) == [name]


@pytest.mark.parametrize("names, field", [
    ("[a, b, c, 'x slot=9']", r"hostnames\[3\]"),
    ("[a, b, c, a]", r"hostnames\[3\]"),
    ("[a, b, c, A]", r"hostnames\[3\]"),
    ("[a, \"b\\nc\", d, e]", r"hostnames\[1\]"),
    ("[a, b, c, 1]", r"hostnames\[3\]"),
    ("[a, b, c, on]", r"hostnames\[3\]"),
    ("abcd", "hostnames"),
])
def test_yaml_hostnames_are_checked(tmp_path, names, field):
    with pytest.raises(TopoplanError, match=rf"t.yaml:5: field '{field}'"):
        _load(tmp_path, TREE + f"hostnames: {names}\n")


@pytest.mark.parametrize("doc, field", [
    ({**TORUS_DOC, "hostnames": ["a", "b", "c", "a b"]}, r"hostnames\[3\]"),
    ({**TORUS_DOC, "hostnames": ["a", "b", "c", "B"]}, r"hostnames\[3\]"),
    ({**GRAPH_DOC, "hosts": [{"name": "h0", "switch": "a"}, {"name": "h0", "switch": "b"}]}, r"hosts\[1\]"),
    ({**GRAPH_DOC, "hosts": [{"name": "h0", "switch": "a"}, {"name": "h 1", "switch": "b"}]}, r"hosts\[1\]"),
    ({**GRAPH_DOC, "hosts": [{"name": "h0", "switch": "a"}, {"name": 5, "switch": "b"}]}, r"hosts\[1\]\.name"),
])
def test_host_names_of_every_kind(doc, field):
    with pytest.raises(TopoplanError, match=rf"field '{field}'"):
        topology_from_dict(doc)


@pytest.mark.parametrize("text, needle", [
    ("a\nb\na\n", r"h:3: field 'host': host 'a' is named for node 0 and node 2"),
    ("a\nB\nb\n", r"h:3: field 'host': host 'b' is named for node 1 and node 2"),
    ("0 a\n1 x=y\n", r"h:2: field 'host': host name 'x=y' contains '='"),
    ("a\nb\x0bc\n", r"h:2: field 'host': host name 'b\\x0bc' contains '\\x0b'"),
    ("a\nb\u2028c\n", r"h:2: field 'host': host name 'b\\u2028c' contains"),
    ("a\nb;c\n", r"h:2: field 'host': host name 'b;c' contains ';'"),
    ("0 a\n٣ b\n", r"h:2: field 'node_id': expected an integer, got '٣'"),
    ("0 a\n1_0 b\n", r"h:2: field 'node_id': expected an integer, got '1_0'"),
])
def test_hostfile_names_are_checked(tmp_path, text, needle):
    p = tmp_path / "h"
    p.write_text(text, encoding="utf-8")
    with pytest.raises(TopoplanError, match=needle):
        read_hostfile(p)


@pytest.mark.parametrize("hosts", [["a", "x slot=9"], ["a", "a"], ["a", "b\nc"]])
def test_render_never_writes_a_bad_host_name(hosts):
    pl = Placement(np.array([0, 1]), np.array([0, 0]))
    for fmt in ("ompi4", "mpich", "slurm", "json"):
        with pytest.raises(TopoplanError, match=r"field 'hosts\[1\]'"):
            render(fmt, pl, hosts)


# -- numbers and ids ----------------------------------------------------------------------------------

BAD_NUMBERS = [(float("inf"), "expected an integer"), (float("nan"), "expected an integer"),
               (1e30, "over the limit"), (True, "expected an integer"), ("4", "expected an integer"),
               (2.5, "expected an integer"), (-1, "must be at least")]


@pytest.mark.parametrize("value, needle", BAD_NUMBERS)
@pytest.mark.parametrize("base, key", [
    (TREE_DOC, "cores_per_node"), (TREE_DOC, "switches"), (TREE_DOC, "nodes_per_switch"),
    (TORUS_DOC, "cores_per_node"), (GRAPH_DOC, "cores_per_node"),
])
def test_integer_fields(base, key, value, needle):
    with pytest.raises(TopoplanError, match=rf"field '{key}': .*{needle}"):
        topology_from_dict({**base, key: value})


@pytest.mark.parametrize("value, needle", BAD_NUMBERS + [(0, "must be at least 1")])
@pytest.mark.parametrize("doc, field", [
    (lambda v: {**TREE_DOC, "nodes_per_switch": [2, v]}, r"nodes_per_switch\[1\]"),
    (lambda v: {**TORUS_DOC, "dims": [2, v]}, r"dims\[1\]"),
    (lambda v: {**TREE_DOC, "kind": "hybrid", "ocs": {"bw": "1Gbps", "nodes": [0], "ports_per_node": v}},
     "ocs.ports_per_node"),
])
def test_integer_list_fields(doc, field, value, needle):
    with pytest.raises(TopoplanError, match=rf"field '{field}': .*{needle}"):
        topology_from_dict(doc(value))


@pytest.mark.parametrize("value", [float("inf"), float("nan"), 0, -1, True, "fast", 1e30, "0B"])
@pytest.mark.parametrize("doc, field", [
    (lambda v: {**TREE_DOC, "eps": {**TREE_DOC["eps"], "up_bw": v}}, "eps.up_bw"),
    (lambda v: {**TREE_DOC, "eps": {**TREE_DOC["eps"], "mtu": v}}, "eps.mtu"),
    (lambda v: {**TORUS_DOC, "bw": [v, "1GB/s"]}, r"bw\[0\]"),
    (lambda v: {**TORUS_DOC, "mtu": v}, "mtu"),
    (lambda v: {**TORUS_DOC, "injection_bw": v}, "injection_bw"),
    (lambda v: {**GRAPH_DOC, "eps": {"mtu": v}}, "eps.mtu"),
    (lambda v: {**GRAPH_DOC, "links": [{"a": "a", "b": "b", "bw": v}]}, r"links\[0\].bw"),
    (lambda v: {**GRAPH_DOC, "hosts": [{"name": "h0", "switch": "a", "bw": v}, {"name": "h1", "switch": "b"}]},
     r"hosts\[0\].bw"),
    (lambda v: {**TREE_DOC, "node": {"intra_bw": v}}, "node.intra_bw"),
])
def test_positive_quantities(doc, field, value):
    with pytest.raises(TopoplanError, match=rf"field '{field}'"):
        topology_from_dict(doc(value))


@pytest.mark.parametrize("doc, needle", [
    ({**GRAPH_DOC, "links": [{"a": "a", "b": "a"}, {"a": "a", "b": "b"}]},
     r"field 'links\[0\]': switch 'a' is linked to itself"),
    ({**GRAPH_DOC, "links": []}, r"field 'links': switch 'a' and switch 'b' are not connected"),
    ({**GRAPH_DOC, "switches": ["a", "b", "a"]}, r"field 'switches\[2\]': switch 'a' is listed twice"),
    ({**GRAPH_DOC, "switches": ["a", 1.5]}, r"field 'switches\[1\]': expected a name"),
    ({**GRAPH_DOC, "links": [{"a": "a", "b": "b", "weight": 3}]}, r"field 'links\[0\].weight': unknown key"),
    ({**GRAPH_DOC, "switch_guids": ["0x1"]}, r"field 'switch_guids': 1 GUIDs for 2 switches"),
    ({**GRAPH_DOC, "hosts": "h0"}, r"field 'hosts': expected a list"),
    ({**GRAPH_DOC, "hostnames": ["x", "y"]}, r"field 'hostnames': a graph topology names its hosts in 'hosts'"),
    ({**TREE_DOC, "switch_names": ["s0", "s0"]}, r"field 'switch_names\[1\]': switch 's0' is listed twice"),
    ({**TREE_DOC, "switch_names": ["s0"]}, r"field 'switch_names': 1 names for 2 switches"),
    ({**TREE_DOC, "nodes_per_switch": []}, r"field 'nodes_per_switch': an empty list"),
    ({**TREE_DOC, "name": ["x"]}, r"field 'name': expected text"),
    ({**TORUS_DOC, "dims": [2048, 2048]}, r"field 'dims': gives 4,194,304 nodes, over the limit"),
    # the key the user wrote, not an internal name ('ocs.per_switch')
    ({**TREE_DOC, "kind": "hybrid", "ocs": {"nodes_per_switch": 3, "bw": "1Gbps"}},
     r"field 'ocs\.nodes_per_switch': 3 OCS nodes per switch but a switch has 2 nodes"),
])
def test_structure_errors_name_the_field(doc, needle):
    with pytest.raises(TopoplanError, match=needle):
        topology_from_dict(doc)


@pytest.mark.parametrize("topo, needle", [
    (TreeTopology(kind="tree", nodes_per_switch=(2,), down_bw_Bps=float("inf")), "down_bw_Bps"),
    (TreeTopology(kind="tree", nodes_per_switch=(2,), cores_per_node=0), "cores_per_node"),
    (TorusTopology(dims=(2,), wrap=(True,), bw_Bps=(1e9,), cores_per_node=0), "cores_per_node"),
    (TorusTopology(dims=(2,), wrap=(True,), bw_Bps=(1e9,), mtu_B=0.0), "mtu_B"),
    (TorusTopology(dims=(2,), wrap=(True,), bw_Bps=(float("nan"),)), r"bw_Bps\[0\]"),
    (GraphTopology(switches=("a",), hosts=("h",), host_switch=(0,), host_bw_Bps=(1e9,), links=((0, 0, 1e9),)),
     "linked to itself"),
    (GraphTopology(switches=("a",), hosts=("h",), host_switch=(0,), host_bw_Bps=(1e9,), links=(), mtu_B=0.0),
     "mtu_B"),
])
def test_validate_checks_topologies_built_in_code(topo, needle):
    with pytest.raises(TopoplanError, match=needle):
        topo.validate()


@pytest.mark.parametrize("text, field", [
    ("nodes_per_switch: 010\n", "nodes_per_switch"),     # YAML 1.1 octal 8: refused, not misread
    ("nodes_per_switch: 0x10\n", "nodes_per_switch"),
    ("cores_per_node: 1:30\n", "cores_per_node"),        # YAML 1.1 sexagesimal 90
    ("cores_per_node: 1_000\n", "cores_per_node"),
    ("cores_per_node: .inf\n", "cores_per_node"),
    ("cores_per_node: .nan\n", "cores_per_node"),
    ("cores_per_node: 1e30\n", "cores_per_node"),
])
def test_yaml_numbers_are_never_misread(tmp_path, text, field):
    body = TREE.replace("nodes_per_switch: 2\n", "") + text + ("" if "nodes_per_switch" in text else
                                                                "nodes_per_switch: 2\n")
    line = body.splitlines().index(text.strip()) + 1
    with pytest.raises(TopoplanError, match=rf"t.yaml:{line}: field '{field}'"):
        _load(tmp_path, body)


def test_yaml_float_forms_are_yaml_1_2(tmp_path):
    t = _load(tmp_path, TREE.replace("20Gbps", "1e10"))     # 1e10 is a number, bytes per second
    assert t.up_bw_Bps == pytest.approx(1e10)


def test_values_from_set_have_no_file_line(tmp_path):
    p = tmp_path / "t.yaml"
    p.write_text(TREE)
    with pytest.raises(TopoplanError, match=r"t.yaml: field 'cores_per_node': must be at least 1"):
        load_topology(p, ["cores_per_node=0"])
    with pytest.raises(TopoplanError, match=r"field 'set': .*duplicate key"):
        apply_overrides({}, ["eps={a: 1, a: 2}"])


def test_check_count():
    assert check_count(np.int64(3), "x") == 3 and check_count(0, "x", minimum=0) == 0
    with pytest.raises(TopoplanError, match="field 'x': expected an integer, got"):
        check_count(np.bool_(True), "x")


def test_dump_quotes_text_that_reads_as_numbers(tmp_path):
    t = topology_from_dict({**TREE_DOC, "hostnames": ["1e3", "010", "0x1", "n4"]})
    p = tmp_path / "rt.yaml"
    p.write_text(dump_topology(t))
    assert load_topology(p).hostnames == ("1e3", "010", "0x1", "n4")


# -- YAML / JSON documents ----------------------------------------------------------------------------

BOMB = ('a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
        + "".join(f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]\n" for i in range(8)))


@pytest.mark.parametrize("text, needle", [
    (TREE + "switches: 3\n", r"t.yaml:5: field 'switches': duplicate key \(first at line 2\)"),
    (TREE.replace("eps: {down_bw: 10Gbps, up_bw: 20Gbps}", "eps:\n  up_bw: 1Gbps\n  down_bw: 1Gbps\n  up_bw: 2Gbps"),
     r"t.yaml:7: field 'eps.up_bw': duplicate key \(first at line 5\)"),
    ("kind: graph\nswitches: [a]\nhosts:\n- {name: h, switch: a, name: g}\n",
     r"t.yaml:4: field 'hosts\[0\].name': duplicate key"),
    ("description:\n" + "".join("  " + line + "\n" for line in BOMB.splitlines()) + TREE,
     r"t.yaml:\d+: aliases expand"),
    (TREE + "variants: [" + ", ".join(["&x 1"] + ["*x"] * 101) + "]\n", r"t.yaml:5: more than 100 aliases"),
    (TREE + "variants: &x [*x]\n", r"t.yaml:5: .*recursive"),
    (TREE + "variants: " + "[" * 100 + "]" * 100 + "\n", r"t.yaml:5: values nested more than 64 deep"),
    ("[1, 2]\n", r"t.yaml: a topology file must be a YAML mapping"),
])
def test_yaml_documents_are_read_strictly(tmp_path, text, needle):
    with pytest.raises(TopoplanError, match=needle):
        _load(tmp_path, text)


def test_json_topology_duplicate_key(tmp_path):
    text = ('{"kind": "tree", "switches": 2, "nodes_per_switch": 2,\n'
            ' "eps": {"down_bw": "10Gbps", "up_bw": "1Gbps"},\n "switches": 4}\n')
    with pytest.raises(TopoplanError, match=r"t.json:3: field 'switches': duplicate key"):
        _load(tmp_path, text, "t.json")


def test_topology_file_size_is_capped(tmp_path):
    p = tmp_path / "big.yaml"
    with open(p, "wb") as fh:
        fh.truncate(MAX_TOPOLOGY_BYTES + 1)
    with pytest.raises(TopoplanError, match=r"big.yaml: 16,777,217 bytes, over the limit"):
        load_topology(p)


@pytest.mark.parametrize("text, needle", [
    ('{"a": 1,\n "a": 2}', r"x.json:2: malformed plan: duplicate key 'a'"),
    ('{"a": {"b": 1,\n\n "b": 2}}', r"x.json:3: malformed plan: duplicate key 'b'"),
    ('[{"k": 1}, {"k": 1, "k": 2}]', r"x.json:1: malformed plan: duplicate key 'k'"),
    ("[" * 100000 + "]" * 100000, r"x.json: malformed plan: nested too deeply"),
])
def test_read_json_refuses_duplicate_keys(tmp_path, text, needle):
    p = tmp_path / "x.json"
    p.write_text(text)
    with pytest.raises(TopoplanError, match=needle):
        read_json(p, "plan")


def test_read_json_keeps_equal_keys_in_different_objects(tmp_path):
    p = tmp_path / "x.json"
    p.write_text(json.dumps({"a": 1, "b": {"a": 2}, "c": [{"a": 3}, {"a": 4}]}))
    assert read_json(p)["c"][1]["a"] == 4


@pytest.mark.parametrize("text, field", [
    ("kind: tree\nswitches: 2\nnodes_per_switch: 3\neps: 5\n", "4: field 'eps'"),
    ("kind: hybrid\nswitches: 2\nnodes_per_switch: 3\neps: {down_bw: 1Gbps, up_bw: 2Gbps}\nocs: [4, 1Gbps]\n",
     "5: field 'ocs'"),
])
def test_a_section_that_is_not_a_mapping_is_named_not_called_missing(tmp_path, text, field):
    """'eps: 5' was reported as missing fields 'eps.down_bw' and 'eps.up_bw' (and 'ocs: [...]' as missing OCS
    fields), sending the user to add fields that the file seems to have."""
    path = tmp_path / "t.yaml"
    path.write_text(text)
    with pytest.raises(TopoplanError) as err:
        load_topology(str(path))
    assert str(err.value) == f"{path}:{field}: expected a mapping"
