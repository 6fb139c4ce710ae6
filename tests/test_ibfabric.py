"""Readers and routes of real InfiniBand dumps (tests/data/ib, made by scripts/make_ib_fixtures.sh).

The dumps come from the real ibnetdiscover/ibroute/ibtracert run against
ibsim; the tests need none of those tools.
"""

import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from topoplan.core.errors import TopoplanError
from topoplan.fabric.ibfabric import (LANE_DATA_GBPS, compare_traces, delay_matrix, lft_health, link_rate_Bps,
                              load_fabric, parse_ibnetdiscover, parse_ibroute, parse_ibtracert, parse_query,
                              read_hosts, read_lft_dir, route, to_topology, write_delay_matrix)

IB = Path(__file__).resolve().parent / "data" / "ib"
FABRICS = ("tree2", "fattree", "fattree-rewired")
FORMS = ("ibnetdiscover.txt", "ibnetdiscover-p.txt")
GB = 1e9 / 8  # bytes/s per Gb/s


def fab(name, form="ibnetdiscover.txt", lft=True):
    return load_fabric(IB / name / form, IB / name / "lft" if lft else None)


def traces(name):
    return parse_ibtracert((IB / name / "ibtracert.txt").read_text(), f"{name}/ibtracert.txt")


# -- rates ------------------------------------------------------------------------

@pytest.mark.parametrize("width,speed,gbps", [
    ("4x", "SDR", 8), ("4x", "DDR", 16), ("4x", "QDR", 32), ("4x", "FDR10", 40), ("4x", "FDR", 4 * 14.0625 * 64 / 66),
    ("4x", "EDR", 100), ("4x", "HDR", 200), ("4x", "NDR", 400), ("1x", "QDR", 8), ("12x", "QDR", 96),
    ("2x", "HDR", 100), ("8x", "EDR", 200)])
def test_link_rate_table(width, speed, gbps):
    assert link_rate_Bps(width, speed) == pytest.approx(gbps * GB)


def test_unknown_width_or_speed_has_no_rate():
    assert link_rate_Bps("??", "QDR") is None and link_rate_Bps("4x", "???") is None
    assert set(LANE_DATA_GBPS) >= {"SDR", "DDR", "QDR", "FDR10", "FDR", "EDR", "HDR", "NDR"}


# -- ibnetdiscover ----------------------------------------------------------------------

@pytest.mark.parametrize("name", FABRICS)
def test_plain_and_ports_forms_agree(name):
    plain, ports = fab(name, FORMS[0], lft=False), fab(name, FORMS[1], lft=False)
    assert plain.form == "plain" and ports.form == "ports"
    assert plain.host_names() == ports.host_names()
    assert plain.switches == ports.switches
    assert not plain.messages() and not ports.messages()

    def view(f):  # links by (host name or switch GUID, port), with rates; LIDs of hosts
        name_of = {k: (n.desc.split()[0] if n.kind == "ca" else k) for k, n in f.nodes.items()}
        links = sorted(tuple(sorted([(name_of[l.a], l.a_port), (name_of[l.b], l.b_port)])) + (l.rate_Bps,)
                       for l in f.links)
        lids = {h: f.nodes[k].ports[p].lid for h, (k, p) in f.hosts.items()}
        return links, lids, {k: f.nodes[k].lid for k in f.switches}

    assert view(plain) == view(ports)


def test_tree2_model():
    f = fab("tree2", lft=False)
    assert f.host_names() == [f"node{i:03d}" for i in range(1, 10)]
    assert len(f.switches) == 4 and len(f.links) == 9 + 4  # host links + 4 uplinks (leaf3 has two)
    descs = {f.nodes[k].desc for k in f.switches}
    assert descs == {"top", "leaf1", "leaf2", "leaf3"}
    ca, port = f.hosts["node004"]
    assert f.nodes[ca].ports[port].rate_Bps == pytest.approx(8 * GB)  # 4xSDR
    ca, port = f.hosts["node001"]
    assert f.nodes[ca].ports[port].rate_Bps == pytest.approx(16 * GB)  # 4xDDR


def test_fattree_extended_speeds_widths_and_dual_port():
    f = fab("fattree", lft=False)
    rate = {f.nodes[f.hosts[h][0]].ports[f.hosts[h][1]].speed + "/" + f.nodes[f.hosts[h][0]].ports[f.hosts[h][1]].width
            for h in ("node001", "node011", "node012")}
    assert rate == {"FDR/4x", "QDR/1x", "EDR/4x"}
    hdr = [l for l in f.links if l.speed == "HDR"]
    assert len(hdr) == 2 and all(l.rate_Bps == pytest.approx(200 * GB) for l in hdr)
    assert len(f.host_ports["node012"]) == 2 and f.hosts["node012"][1] == 1  # primary = port 1


def test_unknown_lines_are_counted_not_fatal():
    text = (IB / "tree2" / "ibnetdiscover.txt").read_text().splitlines()
    text.insert(3, "some banner a site script added")
    text.insert(10, "ibwarn: [1234] mad_rpc: _do_madrpc failed; dport (DR path slid 0; dlid 0; 0,1)")
    text.append("SomethingNew=42")
    f = parse_ibnetdiscover("\n".join(text) + "\n", "x.txt")
    rep = f.reports[0]
    assert rep.unknown_lines == 3 and rep.unknown_examples[0][0] == 4
    assert "3 unknown line(s)" in f.messages()[0] and "line 4" in f.messages()[0]
    assert f.host_names() == fab("tree2", lft=False).host_names()


def test_unknown_rate_gets_slowest_known_with_warning():
    text = (IB / "tree2" / "ibnetdiscover.txt").read_text()
    text = text.replace('# "node001 HCA-1" lid 2 4xDDR', '# "node001 HCA-1" lid 2 ?????', 1)
    f = parse_ibnetdiscover(text, "x.txt")  # the CA side still says 4xDDR: the link keeps it
    ca, p = f.hosts["node001"]
    assert f.nodes[ca].ports[p].rate_Bps == pytest.approx(16 * GB)
    text = text.replace('# lid 2 lmc 0 "leaf1" lid 3 4xDDR', '# lid 2 lmc 0 "leaf1" lid 3 ?????', 1)
    f = parse_ibnetdiscover(text, "x.txt")
    assert any("without a known width/speed" in m for m in f.messages())
    assert min(l.rate_Bps for l in f.links) == pytest.approx(8 * GB)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("frac", [0.3, 0.5, 0.8, 0.95])
def test_truncated_dump_is_an_error_naming_a_line(tmp_path, form, frac):
    raw = (IB / "fattree" / form).read_text()
    cut = raw[: int(len(raw) * frac)]
    p = tmp_path / form
    p.write_text(cut)
    with pytest.raises(TopoplanError, match=rf"^{p}:\d+: .*(truncated|corrupt)"):
        load_fabric(p)


@pytest.mark.parametrize("form", FORMS)
def test_every_line_prefix_of_a_dump_is_rejected(form):
    # A dump cut at any line boundary misses the far end of some link (or everything).
    lines = (IB / "fattree" / form).read_text().splitlines(keepends=True)
    last = max(i for i, l in enumerate(lines) if l.strip())
    for k in range(last + 1):
        with pytest.raises(TopoplanError):
            parse_ibnetdiscover("".join(lines[:k]), form)


@pytest.mark.parametrize("bad,match", [
    ('Switch\t16 "S-00000000002000zz"\t\t# "leaf1"', "malformed node record"),
    ('[1]\t"H-0000000000100000"[1](100001 \t\t# "node001 HCA-1" lid 2 4xFDR', "malformed port line"),
])
def test_corrupt_lines_are_errors(tmp_path, bad, match):
    lines = (IB / "fattree" / "ibnetdiscover.txt").read_text().splitlines()
    at = next(i for i, l in enumerate(lines) if l.startswith("Switch")) + (0 if bad.startswith("Switch") else 1)
    lines[at] = bad
    p = tmp_path / "d.txt"
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(TopoplanError, match=rf"^{p}:{at + 1}: {match}"):
        load_fabric(p)


def test_link_ends_must_agree(tmp_path):
    text = (IB / "tree2" / "ibnetdiscover.txt").read_text()
    text = text.replace('"S-0000000000200001"[1]\t\t# lid 2', '"S-0000000000200001"[5]\t\t# lid 2', 1)
    p = tmp_path / "d.txt"
    p.write_text(text)
    with pytest.raises(TopoplanError, match="links to port 1 of 0x0000000000100000, but line 108 links it elsewhere"):
        load_fabric(p)


def test_empty_and_missing_files(tmp_path):
    (tmp_path / "e.txt").write_text("\n\n")
    with pytest.raises(TopoplanError, match="empty"):
        load_fabric(tmp_path / "e.txt")
    with pytest.raises(TopoplanError, match="no such"):
        load_fabric(tmp_path / "nope.txt")
    (tmp_path / "junk.txt").write_text("hello\nworld\n")
    with pytest.raises(TopoplanError, match="no switch or channel adapter"):
        load_fabric(tmp_path / "junk.txt")


# -- ibroute ----------------------------------------------------------------------------

def test_ibroute_tables_identified_by_header_not_name(tmp_path):
    for i, f in enumerate(sorted((IB / "fattree" / "lft").iterdir())):
        shutil.copy(f, tmp_path / f"dump{i}.out")
    (tmp_path / ".partial.tmp").write_text("Unicast lids [0x0-0x3] of switch Lid 1 guid 0x1 (x):\n0x0001 001 :")
    a, b = fab("fattree"), load_fabric(IB / "fattree" / "ibnetdiscover.txt", tmp_path)
    assert set(a.lfts) == set(b.lfts) == set(a.switches)
    for h in a.host_names():
        assert route(a, "node001", h) == route(b, "node001", h)


def test_ibroute_rows_and_lmc_paths():
    tabs, rep = parse_ibroute((IB / "fattree-rewired" / "lft" / "ibroute-leaf1.txt").read_text())
    (t,) = tabs
    assert t.switch_guid == "0x0000000000200002" and t.switch_lid == 5
    assert t.out_port[0x1e] == 3 and t.out_port[0x1f] == 3  # node012's two LIDs (LMC 1)
    assert t.dest_guid[0x1f] == "0x0000000000100017"  # '(path #2 out of 2: portguid ...)'
    assert rep.unknown_lines == 0


def test_ibroute_all_lids_brief_and_concatenated():
    text = ("Unicast lids [0x0-0x4] of switch Lid 1 guid 0x0000000000200000 (top):\n"
            "  Lid  Out   Destination\n       Port     Info \n"
            "0x0000 255 : (illegal port)\n0x0001 000 \n0x0002 001 \n"
            "0x0003 255 : (illegal port)\n0x0004 002 \n5 lids dumped \n"
            "Multicast mlids [0xc000-0xc001] of switch Lid 1 guid 0x0000000000200000 (top):\n"
            "             0                   \n     Ports: 0123456789\n MLid\n0xc000      xx\n1 valid mlids dumped \n"
            "Unicast lids [0x0-0x1] of switch Lid 3 guid 0x0000000000200001 (leaf1):\n"
            "0x0001 007 \n1 valid lids dumped \n")
    tabs, rep = parse_ibroute(text)
    assert [t.out_port for t in tabs] == [{1: 0, 2: 1, 4: 2}, {1: 7}]
    assert rep.unknown_lines == 0


@pytest.mark.parametrize("form, old, new, match", [
    ("ibnetdiscover.txt", '# lid 16 lmc 0 "leaf4"', '# lid 99999 lmc 0 "leaf4"', "field 'lid': 99999"),
    ("ibnetdiscover.txt", '# lid 16 lmc 0 "leaf4"', '# lid 49152 lmc 0 "leaf4"', "field 'lid': 49152"),
    ("ibnetdiscover.txt", '# lid 16 lmc 0 "leaf4"', '# lid 16 lmc 8 "leaf4"', "field 'lmc': 8"),
    ("ibnetdiscover.txt", 'base port 0 lid 3 lmc 0', 'base port 0 lid 70000 lmc 0', "field 'lid': 70000"),
    ("ibnetdiscover-p.txt", "CA    16  1 0x0000000000100013", "CA 65536  1 0x0000000000100013", "field 'lid': 65536"),
])
def test_lid_out_of_the_unicast_range_is_an_error_naming_the_line(tmp_path, form, old, new, match):
    src = (IB / "fattree" / form).read_text()
    assert old in src
    lines = src.replace(old, new, 1).splitlines()
    at = next(i for i, l in enumerate(lines) if new in l) + 1
    p = tmp_path / form
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(TopoplanError, match=rf"^{re.escape(str(p))}:{at}: {match}"):
        load_fabric(p)


@pytest.mark.parametrize("mutate,match", [
    (lambda s: s[: s.rindex("0x0008")], "no closing 'lids dumped' line"),
    (lambda s: s.replace("0x0005 010 :", "0x0005 0x10 :"), "malformed LFT row"),
    (lambda s: "0x0001 001\n" + s, "before any 'Unicast lids"),
    (lambda s: s.replace("0x0003 011", "0x0002 011"), "listed twice"),
    (lambda s: "\n".join(x for x in s.splitlines() if not x.startswith("0x0004")) + "\n",
     "says 19 LIDs dumped but the table of line 1 has 18 rows"),
])
def test_corrupt_ibroute(tmp_path, mutate, match):
    src = (IB / "fattree" / "lft" / "ibroute-leaf2.txt").read_text()
    (tmp_path / "lft").mkdir()
    (tmp_path / "lft" / "a").write_text(mutate(src))
    with pytest.raises(TopoplanError, match=match):
        read_lft_dir(tmp_path / "lft")


def test_ibroute_unknown_lines_and_non_dumps_are_reported(tmp_path):
    src = (IB / "tree2" / "lft" / "ibroute-top.txt").read_text()
    (tmp_path / "a").write_text("ibwarn: [42] sim_connect: attached as client 1\n" + src)
    (tmp_path / "README").write_text("dumps of 2024-01-01\n")
    tabs, reps = read_lft_dir(tmp_path)
    assert len(tabs) == 1
    msgs = [m for r in reps for m in r.messages()]
    assert any("1 unknown line" in m for m in msgs) and any("not an ibroute dump" in m for m in msgs)


def test_two_tables_for_one_switch_is_an_error(tmp_path):
    for n in ("x", "y"):
        shutil.copy(IB / "tree2" / "lft" / "ibroute-top.txt", tmp_path / n)
    with pytest.raises(TopoplanError, match="a second LFT for switch 0x0000000000200000"):
        load_fabric(IB / "tree2" / "ibnetdiscover.txt", tmp_path)


# -- routes -----------------------------------------------------------------------------

@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("name", FABRICS)
def test_lft_routes_match_ibtracert_on_every_pair(name, form):
    f = fab(name, form)
    tr = traces(name)
    n_hosts = len(f.hosts)
    assert len(tr) == n_hosts * (n_hosts - 1)
    checked, diffs = compare_traces(f, tr)
    assert checked == len(tr) and diffs == []
    assert all(route(f, a, b).source == "lft" for a in f.hosts for b in f.hosts)


@pytest.mark.parametrize("name", FABRICS)
def test_shortest_path_fallback_has_ibtracert_hop_counts(name):
    f = fab(name, lft=False)
    for t in traces(name):
        r = route(f, t.src_desc.split()[0], t.dst_desc.split()[0])
        assert r.source == "shortest-path" and r.hops == len(t.switch_guids)


def test_lft_routes_are_not_just_shortest_paths():
    a, b = fab("fattree"), fab("fattree", lft=False)
    differ = [(x, y) for x in a.hosts for y in a.hosts if route(a, x, y).switches != route(b, x, y).switches]
    assert len(differ) > 10  # opensm spreads destinations over the spines and parallel uplinks


def test_route_line_in_the_form_of_002():
    f = fab("tree2")
    r = route(f, "node001", "node009")
    assert r.line() == "node001 0x0000000000200001 0x0000000000200000 0x0000000000200003 node009"
    assert r.to_dict() == {"src": "node001", "dst": "node009", "source": "lft",
                           "switches": ["0x0000000000200001", "0x0000000000200000", "0x0000000000200003"]}
    assert route(f, "node001", "node002").line() == "node001 0x0000000000200001 node002"
    assert route(f, "node001", "node001").hops == 0
    # the slowest link decides the speed: node001 (DDR) to node005 (SDR, behind an SDR uplink)
    assert route(f, "node001", "node005").min_rate_Bps == pytest.approx(8 * GB)
    assert route(f, "node001", "node007").min_rate_Bps == pytest.approx(16 * GB)


def test_missing_lft_falls_back_and_says_why(tmp_path):
    for f in (IB / "fattree" / "lft").iterdir():
        if "spine1" not in f.name:
            shutil.copy(f, tmp_path / f.name)
    f = load_fabric(IB / "fattree" / "ibnetdiscover.txt", tmp_path)
    assert any("no usable LFT for 1 of 6" in m for m in f.messages())
    routes = [route(f, "node001", h) for h in f.host_names() if h != "node001"]
    fell = [r for r in routes if r.source == "shortest-path"]
    assert fell and all("no LFT for switch 0x0000000000200000" in r.note for r in fell)
    assert any(r.source == "lft" for r in routes)


def test_stale_lfts_are_detected_and_not_used():
    # the re-cabled fabric's tables (other LIDs) against the original dump
    f = load_fabric(IB / "fattree" / "ibnetdiscover.txt", IB / "fattree-rewired" / "lft")
    assert len(f.lft_conflicts) == 6 and not f.lfts
    assert "stale LFT" in f.messages()[-1]
    assert route(f, "node001", "node011").source == "shortest-path"


def test_unknown_host_and_bad_query():
    f = fab("tree2")
    with pytest.raises(TopoplanError, match="unknown host 'node999'"):
        route(f, "node001", "node999")
    for bad in ("node001", "a:b:c", ":b", "a b:c", ""):
        with pytest.raises(TopoplanError, match="expected hosta:hostb"):
            parse_query(bad)
    assert parse_query(" node001:node002 ") == ("node001", "node002")


# -- delay matrices and topology ---------------------------------------------------------

def test_delay_matrices_tree2():
    f = fab("tree2")
    hosts = f.host_names()
    hops = delay_matrix(f, hosts, "hops")
    leaf = np.repeat(np.arange(3), 3)
    want = np.where(leaf[:, None] == leaf[None, :], 1, 3)
    np.fill_diagonal(want, 0)
    assert (hops == want).all()
    speed = delay_matrix(f, hosts, "speed")
    assert speed[0, 1] == pytest.approx(1 / (16 * GB)) and speed[0, 3] == pytest.approx(1 / (8 * GB))
    assert speed[0, 8] == pytest.approx(1 / (8 * GB))  # node009 is on an SDR host link
    assert (np.diag(speed) == 0).all()
    with pytest.raises(TopoplanError, match="field 'kind'"):
        delay_matrix(f, hosts, "latency")


def test_delay_files_feed_the_bcast_reader(tmp_path):
    from topoplan.problems.bcast.delay import load

    f = fab("fattree")
    topo = to_topology(f)
    hosts = ["node001", "node005", "node011", "node012"]
    m = delay_matrix(f, hosts, "speed")
    write_delay_matrix(tmp_path / "d.csv", hosts, m, "speed")
    write_delay_matrix(tmp_path / "d.npy", hosts, m, "speed")
    nodes = [topo.hosts.index(h) for h in hosts]
    assert np.array_equal(load(tmp_path / "d.csv", topo, nodes), m)
    assert np.array_equal(load(tmp_path / "d.npy", topo, nodes), m)
    assert (tmp_path / "d.csv").read_text().splitlines()[0] == ",".join(hosts)
    with pytest.raises(TopoplanError, match="must end in"):
        write_delay_matrix(tmp_path / "d.txt", hosts, m)


def test_convert_round_trips_and_matches_shortest_path_hops(tmp_path):
    from topoplan.core.io import atomic_write
    from topoplan.core.topology_io import dump_topology, load_topology

    f = fab("fattree", lft=False)
    topo = to_topology(f)
    assert topo.name == "fattree" and topo.n_nodes == 12 and topo.n_switches == 6 and len(topo.links) == 16
    assert set(topo.switch_guids) == set(f.switches)
    atomic_write(tmp_path / "t.yaml", dump_topology(topo))
    back = load_topology(str(tmp_path / "t.yaml"))
    assert back.hosts == topo.hosts and back.switch_guids == topo.switch_guids
    assert np.allclose(back.host_bw_Bps, topo.host_bw_Bps, rtol=1e-9)
    assert (back.hop_matrix() == delay_matrix(f, list(topo.hosts), "hops")).all()


def test_read_hosts(tmp_path):
    p = tmp_path / "hosts"
    p.write_text("# leaders\nnode001\nnode002 slots=4\nnode003:2\n\nnode[010-011]  # rack 4\n")
    assert read_hosts(p) == ["node001", "node002", "node003", "node010", "node011"]
    p.write_text("node001\nnode[001-002]\n")
    with pytest.raises(TopoplanError, match=rf"{p}:2: host 'node001' listed twice"):
        read_hosts(p)


def test_ibtracert_parser_rejects_truncation():
    text = (IB / "tree2" / "ibtracert.txt").read_text()
    with pytest.raises(TopoplanError, match="without its 'To' line"):
        parse_ibtracert(text[: text.index("To ca")])


# -- CLI --------------------------------------------------------------------------------

@pytest.fixture
def cli():
    from topoplan.cli.commands.topo import register

    app = typer.Typer(pretty_exceptions_enable=False)
    register(app)
    runner = CliRunner()
    return lambda *args: runner.invoke(app, [str(a) for a in args])


def test_cli_query(cli):
    d = IB / "tree2"
    r = cli("topo", "query", "--ibnetdiscover", d / "ibnetdiscover.txt", "--lft", d / "lft", "node001:node004")
    assert r.exit_code == 0, r.output
    assert r.stdout.strip() == "node001 0x0000000000200001 0x0000000000200000 0x0000000000200002 node004"
    r = cli("topo", "query", "-i", d / "ibnetdiscover-p.txt", "node004:node001", "--json")
    import json

    assert json.loads(r.stdout) == {"src": "node004", "dst": "node001", "source": "shortest-path",
                                    "switches": ["0x0000000000200002", "0x0000000000200000", "0x0000000000200001"]}
    r = cli("topo", "query", "-i", d / "ibnetdiscover.txt", "node001:nobody")
    assert isinstance(r.exception, TopoplanError) and "unknown host 'nobody'" in str(r.exception)


def test_cli_delay_and_convert(cli, tmp_path):
    d = IB / "fattree"
    (tmp_path / "hosts").write_text("node[001-004]\n")
    r = cli("topo", "delay", "-i", d / "ibnetdiscover.txt", "--lft", d / "lft", "--hosts", tmp_path / "hosts",
            "--kind", "hops", "-o", tmp_path / "d.csv")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "d.csv").read_text().splitlines() == [
        "node001,node002,node003,node004", "0,1,1,3", "1,0,1,3", "1,1,0,3", "3,3,3,0"]
    r = cli("topo", "convert", "-i", d / "ibnetdiscover.txt", "-o", tmp_path / "t.yaml")
    assert r.exit_code == 0 and "12 hosts, 6 switches" in r.stderr
    assert "kind: graph" in (tmp_path / "t.yaml").read_text()
    (tmp_path / "hosts").write_text("node001\nnode077\n")
    r = cli("topo", "delay", "-i", d / "ibnetdiscover.txt", "--hosts", tmp_path / "hosts", "-o", tmp_path / "x.csv")
    assert isinstance(r.exception, TopoplanError) and "node077" in str(r.exception)
    assert not (tmp_path / "x.csv").exists()


def test_cli_prints_reader_warnings(cli, tmp_path):
    text = "junk line\n" + (IB / "tree2" / "ibnetdiscover.txt").read_text()
    (tmp_path / "d.txt").write_text(text)
    r = cli("topo", "query", "-i", tmp_path / "d.txt", "node001:node002")
    assert r.exit_code == 0 and "warning:" in r.stderr and "1 unknown line" in r.stderr


def test_main_cli_error_exit_code(run_cli):
    code, out, err = run_cli("topo", "query", "-i", IB / "tree2" / "ibnetdiscover.txt", "node001:nobody")
    assert code == 2 and err.startswith("error: unknown host 'nobody'")


@pytest.mark.parametrize("lft, message", [
    ("ibnetdiscover.txt", "not a directory; the LFTs are a directory of ibroute outputs, one per switch"),
    ("missing", "no such LFT directory"),
])
def test_an_lft_that_is_no_directory_says_which(run_cli, lft, message):
    """A file given to --lft was 'no such LFT directory', and the user looked for a missing one."""
    dump = IB / "tree2" / "ibnetdiscover.txt"
    code, out, err = run_cli("topo", "query", "-i", dump, "--lft", IB / "tree2" / lft, "node001:node002")
    assert (code, out, err) == (2, "", f"error: {IB / 'tree2' / lft}: {message}\n")


@pytest.mark.parametrize("name", FABRICS)
@pytest.mark.parametrize("lft", [True, False])
def test_delay_matrix_equals_route_by_route(name, lft):
    f = fab(name, lft=lft)
    hosts = f.host_names()[::-1]
    for kind in ("hops", "speed"):
        m = delay_matrix(f, hosts, kind)
        for i, a in enumerate(hosts):
            for j, b in enumerate(hosts):
                r = route(f, a, b)
                want = 0.0 if i == j else (r.hops if kind == "hops" else 1 / r.min_rate_Bps)
                assert m[i, j] == pytest.approx(want, rel=1e-12), (kind, a, b)


# -- LFTs that loop or dead-end (issue 17) ------------------------------------------------

def _broken_tree2(tmp_path, edits):
    """tree2's dump and LFTs in tmp_path, with ``edits`` ({(file, old row start): new row start}) applied."""
    shutil.copy(IB / "tree2" / "ibnetdiscover.txt", tmp_path / "ibnetdiscover.txt")
    shutil.copytree(IB / "tree2" / "lft", tmp_path / "lft")
    for (name, old), new in edits.items():
        f = tmp_path / "lft" / name
        text = f.read_text()
        assert text.count("\n" + old) == 1, (name, old)
        f.write_text(text.replace("\n" + old, "\n" + new))
    return tmp_path / "ibnetdiscover.txt", tmp_path / "lft"


LEAF2, TOP = "0x0000000000200002", "0x0000000000200000"


def test_lft_loop_is_no_route_and_says_where(tmp_path):
    # leaf2 sends node004's LID 8 back up to the top switch, which sends it down to leaf2 again
    dump, lft = _broken_tree2(tmp_path, {("ibroute-leaf2.txt", "0x0008 001"): "0x0008 013"})
    f = load_fabric(dump, lft)
    assert f.routing == "lft" and not f.lft_conflicts
    for src in ("node001", "node005", "node009"):
        with pytest.raises(TopoplanError, match=rf"^no route from {src} to node004: the LFTs loop on the way to "
                                                rf"LID 8: switch 0x00000000002000\d\d \('(top|leaf2)'\) is reached "
                                                rf"again .*{TOP}.*{LEAF2}"):
            route(f, src, "node004")
    # every other pair is still routed by the tables, never silently by a shortest path
    others = [(a, b) for a in f.host_names() for b in f.host_names() if b != "node004"]
    assert all(route(f, a, b).source == "lft" for a, b in others)
    h = lft_health(f)
    assert (h.pairs, h.ok, h.fallback, h.loop, h.dead_end) == (72, 64, 0, 8, 0)
    assert h.first_loop.startswith("node001->node004: the LFTs loop on the way to LID 8")
    assert h.fields() == "lft_pairs=72 lft_ok=64 lft_fallback=0 lft_loop=8 lft_dead_end=0"
    assert len(h.messages()) == 1 and "8 of 72 host pairs loop" in h.messages()[0]
    with pytest.raises(TopoplanError, match="loop on the way to LID 8"):
        delay_matrix(f, f.host_names(), "hops")  # no matrix computed from routes that do not exist
    checked, diffs = compare_traces(f, traces("tree2"))
    assert checked == 72 and len(diffs) == 8 and all("node004" in d and "loop" in d for d in diffs)


def test_lft_dead_ends_are_no_route(tmp_path):
    dump, lft = _broken_tree2(tmp_path, {
        ("ibroute-leaf2.txt", "0x0009 002"): "0x0009 020",      # node005's LID to an unconnected port
        ("ibroute-top.txt", "0x000b 003"): "0x000b 000",        # node007's LID to the top switch itself
    })
    f = load_fabric(dump, lft)
    with pytest.raises(TopoplanError, match=rf"^no route from node004 to node005: the LFT of switch {LEAF2} "
                                            r"\('leaf2'\) sends LID 9 to port 20, which is not connected"):
        route(f, "node004", "node005")
    with pytest.raises(TopoplanError, match=rf"the LFT of switch {TOP} \('top'\) sends LID 11 to port 0 "
                                            r"\(the switch itself\)"):
        route(f, "node001", "node007")
    assert route(f, "node008", "node007").source == "lft"  # under the same leaf: never reaches the top
    h = lft_health(f)
    assert (h.loop, h.dead_end) == (0, 8 + 6)
    bad = sum(1 for a in f.hosts for b in f.hosts if a != b and _raises(f, a, b))
    assert bad == h.loop + h.dead_end and h.ok == h.pairs - bad


def _raises(f, a, b):
    try:
        route(f, a, b)
    except TopoplanError:
        return True
    return False


def test_missing_entry_is_a_dead_end_and_missing_table_a_labelled_fallback(tmp_path):
    src = (IB / "tree2" / "lft" / "ibroute-leaf2.txt").read_text()
    dump, lft = _broken_tree2(tmp_path, {})
    (lft / "ibroute-leaf2.txt").write_text(src.replace("0x0008 001 : (Channel Adapter portguid 0x0000000000100007: "
                                                       "'node004 HCA-1')\n", "").replace("13 valid", "12 valid"))
    (lft / "ibroute-leaf3.txt").unlink()
    f = load_fabric(dump, lft)
    with pytest.raises(TopoplanError, match=rf"the LFT of switch {LEAF2} \('leaf2'\) has no entry for LID 8"):
        route(f, "node001", "node004")
    r = route(f, "node001", "node009")  # leaf3 has no table: a shortest path, and it says so
    assert r.source == "shortest-path" and "no LFT for switch 0x0000000000200003" in r.note
    h = lft_health(f)
    # from leaf3's 3 hosts (to all 8 others) and to them (from the 6 others) the walk meets leaf3: fallback;
    # to node004 from the 5 hosts of leaf1 and leaf2: dead end at leaf2
    assert (h.fallback, h.dead_end, h.ok) == (3 * 8 + 6 * 3, 5, 72 - 42 - 5)
    assert h.ok + h.fallback + h.loop + h.dead_end == h.pairs


def test_cli_query_and_info_on_looping_lfts(tmp_path, run_cli, cli):
    dump, lft = _broken_tree2(tmp_path, {("ibroute-leaf2.txt", "0x0008 001"): "0x0008 013"})
    code, out, err = run_cli("topo", "query", "-i", dump, "--lft", lft, "node001:node004")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert err.startswith("error: no route from node001 to node004: the LFTs loop on the way to LID 8")
    r = cli("topo", "info", "-i", dump, "--lft", lft)
    assert r.exit_code == 0, r.output
    assert r.stdout.strip() == ("hosts=9 switches=4 routing=lft lft_pairs=72 lft_ok=64 lft_fallback=0 lft_loop=8 "
                                "lft_dead_end=0")
    assert "8 of 72 host pairs loop" in r.stderr


# -- host names: dual-rail hosts and duplicate descriptions (issue 17) -----------------------

@pytest.mark.parametrize("form", FORMS)
def test_dual_rail_host_is_one_host_with_two_ports(form):
    # node002's HCA renamed as node001's second HCA, as rdma-ndd names them ("%h %d")
    text = (IB / "tree2" / form).read_text().replace("node001 HCA-1", "node001 mlx5_0")
    text = text.replace("node002 HCA-1", "node001 mlx5_1")
    f = parse_ibnetdiscover(text, form)
    assert "node002" not in f.hosts and len(f.hosts) == 8
    assert len(f.host_ports["node001"]) == 2  # both HCAs kept, none dropped
    assert f.hosts["node001"] == f.host_ports["node001"][0]


@pytest.mark.parametrize("form,line", [("ibnetdiscover.txt", 107), ("ibnetdiscover-p.txt", 9)])
def test_two_hcas_with_one_description_are_an_error(tmp_path, form, line):
    text = (IB / "tree2" / form).read_text().replace("node002 HCA-1", "node001 HCA-1")
    p = tmp_path / form
    p.write_text(text)
    with pytest.raises(TopoplanError, match=rf"^{p}:{line}: host 'node001': .* has the same description "
                                            r"'node001 HCA-1' as .* at line \d+; two machines with one name"):
        load_fabric(p)


def test_firmware_default_descriptions_are_an_error(tmp_path):
    text = (IB / "tree2" / "ibnetdiscover.txt").read_text()
    for i in (1, 2):
        text = text.replace(f"node00{i} HCA-1", "MT4123 ConnectX6   Mellanox Technologies")
    p = tmp_path / "d.txt"
    p.write_text(text)
    with pytest.raises(TopoplanError, match=r"host 'MT4123': .*'MT4123 ConnectX6 Mellanox Technologies'"):
        load_fabric(p)
