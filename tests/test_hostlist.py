"""Slurm host lists expanded as Slurm expands them (``topoplan.core.topology_io.expand_hostlist``).

The expectations of the first table were once checked against the python-hostlist package, which the
expansion no longer uses; the rest follow Slurm's documented host-list syntax.
"""

import pytest

from topoplan.core.errors import TopoplanError
from topoplan.core.topology_io import expand_hostlist


@pytest.mark.parametrize("text, hosts", [
    # items: commas, spaces and tabs outside brackets; empty items skipped
    ("node[01-02] node05", ["node01", "node02", "node05"]),
    ("node[01-02]\tnode05,node[07-08]", ["node01", "node02", "node05", "node07", "node08"]),
    ("n1,,n2 ", ["n1", "n2"]),
    ("", []),
    ("login", ["login"]),
    ("n1,n1", ["n1", "n1"]),   # repeats kept: callers say where a name is listed twice
    # commas inside brackets separate ranges, not hosts; spaces inside brackets are ignored
    ("tux[0-2,5]", ["tux0", "tux1", "tux2", "tux5"]),
    ("node[01-04,7]", ["node01", "node02", "node03", "node04", "node7"]),
    ("n[1, 3]", ["n1", "n3"]),
    ("n[3,1]", ["n3", "n1"]),   # the order given
    ("n[1-2],gpu[5]", ["n1", "n2", "gpu5"]),
    ("tux[0-3,7],node[001-002]", ["tux0", "tux1", "tux2", "tux3", "tux7", "node001", "node002"]),
    # zero padding: a range keeps the width of its first number
    ("node[08-10]", ["node08", "node09", "node10"]),
    ("node[008-010],login", ["node008", "node009", "node010", "login"]),
    ("n[9-11]", ["n9", "n10", "n11"]),
    ("n[01-3]", ["n01", "n02", "n03"]),
    ("n[1-03]", ["n1", "n2", "n3"]),
    ("n[0001-10]", [f"n{i:04d}" for i in range(1, 11)]),
    ("n[1-2,01-02]", ["n1", "n2", "n01", "n02"]),
    ("n[00-00]", ["n00"]),
    # several bracket groups multiply out, the last varying fastest; text after a group is kept
    ("rack[1-2]-node[1-3]", ["rack1-node1", "rack1-node2", "rack1-node3", "rack2-node1", "rack2-node2",
                             "rack2-node3"]),
    ("r[1-2]n[08-09]", ["r1n08", "r1n09", "r2n08", "r2n09"]),
    ("n[01-02]b[1-2]c", ["n01b1c", "n01b2c", "n02b1c", "n02b2c"]),
    ("n[1-2][3]", ["n13", "n23"]),
    ("[1-2]", ["1", "2"]),
    ("a[1-2]b[1-2]c[1-2]", [f"a{i}b{j}c{k}" for i in (1, 2) for j in (1, 2) for k in (1, 2)]),
])
def test_hostlists_expand_as_slurm_does(text, hosts):
    assert expand_hostlist(text) == hosts


@pytest.mark.parametrize("text, needle", [
    ("n[1-2] n3;x", r"host name 'n3;x' contains ';'.* \(from host list 'n\[1-2\] n3;x'\)"),
    ("n[1-2]=x", r"host name 'n1=x' contains '='"),
    ("n[1-2", r"unbalanced brackets"),
    ("n]1[", r"unbalanced brackets"),
    ("n[1-2]]", r"unbalanced brackets"),
    ("n[[1-2]]", r"nested brackets"),
    ("n[2-1]", r"a range runs backwards \(start > stop\): '2-1'"),
    ("tux[3-1]", r"a range runs backwards"),
    ("n[010-8]", r"a range runs backwards"),   # 10 > 8, whatever the width
    ("n[a-b]", r"bad range 'a-b'"),
    ("n[٣-٥]", r"bad range"),   # digits of other scripts are not read as 0-9
    ("n[]", r"bad range: an empty range"),
    ("n[1,]", r"bad range: an empty range"),
    ("n[1-]", r"bad range '1-'"),
    ("n[-1]", r"bad range '-1'"),
    ("n[1--2]", r"bad range '1--2'"),
    ("n[1-2-3]", r"bad range '1-2-3'"),
    ("n[+1-2]", r"bad range '\+1-2'"),
    ("n[1x2]", r"bad range '1x2'"),
    ("n[1" + "0" * 30 + "]", r"more than 18 digits"),
    ("n[0-99999999]", r"more than 1,048,576 hosts \(it expands to 100,000,000\)"),
    ("n[0-999999999999999999]", r"more than 1,048,576 hosts"),
    ("a[0-99999]b[0-99999]", r"more than 1,048,576 hosts \(it expands to 10,000,000,000\)"),
])
def test_bad_hostlists_are_refused_naming_where(text, needle):
    with pytest.raises(TopoplanError, match=r"^x\.conf:1: field 'Nodes': .*" + needle):
        expand_hostlist(text, "x.conf:1: field 'Nodes': ")


def test_the_bound_counts_the_whole_list_and_can_be_set():
    assert len(expand_hostlist("n[0-999],m[0-999],x[0-999]")) == 3000
    assert expand_hostlist("n[1-4]", limit=4) == ["n1", "n2", "n3", "n4"]
    with pytest.raises(TopoplanError, match=r"more than 4 hosts \(it expands to 5\)"):
        expand_hostlist("n[1-4],m1", limit=4)
    with pytest.raises(TopoplanError, match=r"more than 5 hosts \(it expands to 6\)"):
        expand_hostlist("r[1-2]n[1-3]", limit=5)


def test_switch_names_are_not_checked_as_hosts():
    assert expand_hostlist("s[1-2]=x", hosts=False) == ["s1=x", "s2=x"]
    with pytest.raises(TopoplanError, match="contains '='"):
        expand_hostlist("s[1-2]=x")


def test_a_bad_hostlist_in_topology_conf_is_one_error_line(tmp_path, run_cli):
    conf = tmp_path / "topology.conf"
    conf.write_text("SwitchName=s0 Nodes=n[1-4]\nSwitchName=s1 Nodes=m[1-2,x]\nSwitchName=top Switches=s[0-1]\n")
    code, out, err = run_cli("show", conf)
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [f"error: {conf}:2: field 'Nodes': host list 'm[1-2,x]': bad range 'x' in "
                                        "brackets (a number or lo-hi, in digits 0-9)"]
