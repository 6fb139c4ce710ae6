"""The real entry point: usage errors and bad input are one message, exit status 2, no traceback."""

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest


def _run(*args):
    return subprocess.run([sys.executable, "-m", "topoplan", *args], capture_output=True, text=True, timeout=120)


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


def test_traffic_takes_its_source_as_the_argument_or_as_dash_t(tmp_path):
    spec = "neighbor2d:rows=2,cols=3,bytes=1MB"
    a, b = _run("traffic", spec, "-o", str(tmp_path / "a.csv")), _run("traffic", "-T", spec, "-o", str(tmp_path / "b.csv"))
    assert a.returncode == b.returncode == 0, a.stderr + b.stderr
    assert (tmp_path / "a.csv").read_text() == (tmp_path / "b.csv").read_text() != ""


@pytest.mark.parametrize("name", ["m.zip", "m.JSON", "m.json.gz", "m.npz", "m.parquet"])
def test_traffic_refuses_an_output_named_for_another_format(tmp_path, name):
    """``traffic -o x.zip`` wrote CSV text under a name that says zip archive."""
    r = _run("traffic", "ring:np=4,bytes=1MB", "-o", str(tmp_path / name))
    assert (r.returncode, r.stdout) == (2, "") and not (tmp_path / name).exists()
    assert r.stderr.startswith("error: --output ") and "traffic writes CSV, not ." in r.stderr
    assert r.stderr.count("\n") == 1


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
    # issue 17: LFTs that loop or dead-end, two adapters with one description
    (tmp / "lft").mkdir()
    for f in (Path(__file__).parent / "data" / "ib" / "tree2" / "lft").iterdir():
        # leaf2 sends node004's LID 8 back up to the top switch (a loop), node005's LID 9 to unconnected port 20
        (tmp / "lft" / f.name).write_text(f.read_text().replace("\n0x0008 001", "\n0x0008 013")
                                          .replace("\n0x0009 002", "\n0x0009 020"))
    (tmp / "dupdesc.txt").write_text(dump.read_text().replace("node002 HCA-1", "node001 HCA-1"))
    (tmp / "ib-hosts.txt").write_text("node[001-006]\n")
    # issue 17: topologies (Slurm, YAML), host names
    TREE = "kind: tree\nswitches: 2\nnodes_per_switch: 2\neps: {down_bw: 10Gbps, up_bw: 20Gbps}\n"
    (tmp / "cycle.conf").write_text("SwitchName=s1 Switches=s2 Nodes=n1\nSwitchName=s2 Switches=s1\n")
    (tmp / "speed.conf").write_text("SwitchName=s0 Nodes=n[0-1] LinkSpeed=10\nSwitchName=s1 Nodes=n[2-3]\n"
                                    "SwitchName=top Switches=s[0-1] LinkSpeed=40\n")
    (tmp / "nodes2.conf").write_text("SwitchName=s0 Nodes=n[0-1]\nSwitchName=s1 Nodes=n[1-2]\n"
                                     "SwitchName=top Switches=s[0-1]\n")
    (tmp / "slurmhost.conf").write_text("SwitchName=s0 Nodes=n0,n1;reboot\n")
    (tmp / "slot.yaml").write_text(TREE + "hostnames: [n0, n1, n2, 'x slot=9']\n")
    (tmp / "duphost.yaml").write_text(TREE + "hostnames: [n0, n1, n2, N0]\n")
    (tmp / "eq.txt").write_text("0 n0\n1 x=y\n")
    (tmp / "dup.yaml").write_text(TREE + "switches: 3\n")
    (tmp / "bomb.yaml").write_text(TREE + "variants:\n" + "".join(
        f"  {chr(97 + i)}: &{chr(97 + i)} [" + (",".join([f"*{chr(96 + i)}"] * 9) if i else "x,x,x,x,x,x,x,x,x") + "]\n"
        for i in range(9)))
    (tmp / "inf.yaml").write_text(TREE + "cores_per_node: .inf\n")
    (tmp / "octal.yaml").write_text(TREE.replace("nodes_per_switch: 2", "nodes_per_switch: 010"))
    (tmp / "selfloop.yaml").write_text("kind: graph\nswitches: [a, b]\nhosts: [{name: h0, switch: a}, "
                                       "{name: h1, switch: b}]\nlinks: [{a: a, b: b}, {a: b, b: b}]\n")
    (tmp / "mtu0.yaml").write_text("kind: torus\ndims: [2, 2]\nbw: 1GB/s\nmtu: 0\n")
    (tmp / "dupplan.json").write_text('{"rank_to_node": [0, 1],\n "rank_to_node": [0, 0]}')
    # issue 18: Slurm as it really is (slurm.conf beside topology.conf, topology.yaml, host names)
    TOPO = "SwitchName=s0 Nodes=n[1-2]\nSwitchName=s1 Nodes=n[3-4]\nSwitchName=top Switches=s[0-1]\n"
    for d, conf in (("sl-ok", "NodeName=DEFAULT Sockets=2 CoresPerSocket=4\nNodeName=n[1-4]\n"),
                    ("sl-miss", "NodeName=n[1-3] CPUs=8\n"),
                    ("sl-mixed", "NodeName=n[1-2] CPUs=8\nNodeName=n[3-4] CPUs=16\n"),
                    ("sl-bad", "NodeName=DEFAULT CoresPerSocket=twelve\nNodeName=n[1-4]\n"),
                    ("sl-none", None)):
        (tmp / d).mkdir()
        (tmp / d / "topology.conf").write_text(TOPO)
        if conf is not None:
            (tmp / d / "slurm.conf").write_text(conf)
    (tmp / "sl-ok" / "topology.yaml").write_text("- topology: all\n  flat: true\n")
    (tmp / "sl-hosts.csv").write_text("rank,node\n0,n1\n1,n9\n")
    # issue 17: CSV file inputs
    (tmp / "short.csv").write_text(head + "0,send,1,10\n")
    (tmp / "pl3.csv").write_text("rank,node\n" + "".join(f"{r},{r},3\n" for r in range(8)))
    (tmp / "bom.csv").write_text("\ufeffsrc,dst,bytes,msgs\n0,1,-5,1\n")
    (tmp / "dupcol.csv").write_text("src,dst,bytes,bytes\n0,1,5,6\n")
    (tmp / "msgs0.csv").write_text("src,dst,bytes,msgs\n0,1,100,0\n")
    (tmp / "arabic.csv").write_text("src,dst,bytes,msgs\n0,\u0663,100,1\n")
    (tmp / "sup.txt").write_text("0\n\u00b2\n")
    (tmp / "t1e300.csv").write_text(head + "0,send,1,8,-1,2,0.0,1e300\n1,recv,0,8,-1,2,0.0,0.001\n")
    (tmp / "trunc.csv").write_text(head + "0,send,1,1000,-1,2,0.0,0.001\n1,recv,0,10,-1,2,0.0,0.001\n")
    (tmp / "rows.csv.gz").write_bytes(gzip.compress(b"src,dst,bytes,msgs\n" + b"\n" * 100_000_001, compresslevel=1))
    (tmp / "pl64.csv").write_text("rank,node\n" + "".join(f"{r},{r // 4}\n" for r in range(64)))
    # issue 36: OTF2 archives, trace semantics, numbers and names, exports
    from otf2_archives import cut, pingpong, two_ranks

    two_ranks(tmp / "otf-none", lambda e, w: None)
    cut(two_ranks(tmp / "otf-cut", pingpong), "1.evt")
    (tmp / "bsize.csv").write_text(head + "0,bcast,-1,500,0,2,0.0,0.001\n1,bcast,-1,1000,0,2,0.0,0.001\n")
    ch = head.rstrip("\n") + ",comm\n"
    (tmp / "comm").mkdir()
    (tmp / "comm" / "t.csv").write_text(ch + "".join(f"{r},allreduce,-1,8,-1,2,0.0,0.001,{5 if r < 2 else 6}\n"
                                                      for r in range(4)))
    (tmp / "comm" / "communicators.csv").write_text('comm,size,world_ranks\n6,2,"2;3"\n')
    (tmp / "req.csv").write_text(head.rstrip("\n") + ",req\n0,isend,1,8,-1,2,0.0,0.001,\n"
                                 "0,wait,1,8,-1,2,0.001,0.002,300\n1,recv,0,8,-1,2,0.0,0.002,\n")
    from topoplan.traffic.generators import neighbor2d, ring
    from topoplan.traffic.phases import detect_phases

    (tmp / "ph.json").write_text(json.dumps(detect_phases(ring(16, 1e6, iters=3)).to_dict()))
    neighbor2d(4, 4, 1e6, iters=3).write_csv(tmp / "ph16.csv")   # another trace of 16 ranks than the phases'

    # issue 36, second round: schedules and the OCS document, plans and flow files
    entry = {"from_phase": 0, "to_phase": 1, "from_s": 0.0, "circuits": [[0, 16]], "forwarding": {"0": {"1": 16}}}
    for name, top, e in (("s-neg", {"setup_s": -0.01}, {}), ("s-black", {"blackout": "wait"}, {}),
                         ("s-from", {}, {"from_s": -1.0})):
        (tmp / f"{name}.json").write_text(json.dumps({"schedule": [{**entry, **e}], "n_phases": 1, **top}, indent=1))
    (tmp / "s-nan.json").write_text('{"schedule": [{"from_phase": 0, "to_phase": 1, "circuits": [[0, 16]],\n'
                                    ' "forwarding": {}}],\n "setup_s": NaN}\n')
    (tmp / "fwd00.json").write_text('{"circuits": [[0, 16]],\n "forwarding": {"0": {"1": 16}, "00": {"2": 16}}}')
    (tmp / "route2.json").write_text(json.dumps({
        "hosts": ["A", "B"], "links": [{"name": "L", "bandwidth_Bps": 1e9, "latency_s": 0}],
        "routes": [{"src": "A", "dst": "B", "links": [{"name": "L", "dir": "up"}, {"name": "L", "dir": "up"}]}],
        "flows": [{"id": 0, "src": "A", "dst": "B", "bytes": 1e6, "start_s": 0}]}))

    (tmp / "ls.conf").write_text("SwitchName=s0 Nodes=n[0-1] LinkSpeed=100000\n")
    (tmp / "hl.yaml").write_text("- topology: t\n  tree:\n    switches:\n      - {switch: s0, nodes: 'n[1-2] n3;x'}\n")
    return [
        (["show", "paper003", "-o", tmp], "is a directory"),
        (["traffic", "ring:np=8,bytes=1MB", "-o", tmp / "no" / "x.csv"], "does not exist"),
        (["traffic", "ring:np=8,bytes=1MB", "-T", "ring:np=4,bytes=1MB", "-o", tmp / "r.csv"],
         "give the traffic source once"),
        (["traffic", "-o", tmp / "r.csv"], "give the traffic source once"),
        (["export", "mpich", "-p", tmp / "place.json", "--hosts", tmp / "bin.txt", "-o", tmp / "o"], "binary data"),
        (["bcast", "-t", "paper003", "-a", tmp / "latin1.txt"], "latin1.txt:2: not UTF-8"),
        (["bcast", "-t", "paper003", "-a", "gen:nodes=8", "-o", tmp / "b.json", "--rankfile", tmp / "b.json"],
         "given as both"),
        (["topo", "convert", "-i", dump, "-o", dump], "would overwrite the input"),
        (["circuits", "-t", "paper003", "-T", "ring:np=16,bytes=1MB", "-m", "anneal", "--time-limit", "inf"],
         "--time-limit"),
        (["cost", "--eps-switch-power", "inf"], "--eps-switch-power: must be a finite non-negative number"),
        (["traffic", "ring:np=99999999999,bytes=1MB", "-o", tmp / "r.csv"], "over the limit"),
        (["traffic", "npb:kernel=cg,class=S,np=4,iters=999999999", "-o", tmp / "r.csv"], "100,000,000 rows"),
        (["show", "paper003", "--set", "switches=1000000000"], "over the limit"),
        (["simulate", "-t", "paper003", "-T", "ring:np=8,bytes=1MB", "--iters", "0"], "--iters"),
        (["simulate", "-t", "paper003", "-T", "ring:np=8,bytes=1MB", "--compute-scale", "nan"], "--compute-scale"),
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
        (["serve", "-i", dump, "--port", "0", "--poll", "nan"], "--poll"),
        # round 3
        (["simulate", "-t", "paper003", "-T", tmp / "unmatched.csv"], "unmatched send: rank 1"),
        (["simulate", "-t", "paper003", "-T", "ring:np=8,bytes=1MB", "--mpich", "throttle=4", "-o", tmp / "s.json"],
         "--mpich: unknown field 'throttle'"),
        (["simulate", "-t", "paper003", "-T", "ring:np=8,bytes=1MB", "--mpich", "alltoall_throttle=1.5"],
         "field 'alltoall_throttle': expected a whole non-negative number"),
        (["simulate", "-t", "paper003", "-T", "ring:np=8,bytes=1MB", "--mpich", "elem_size_B=0"], "at least 1"),
        (["simulate", "-t", "paper003", "-T", "ring:np=8,bytes=1MB", "--mpich", "alltoall_medium_B=lots"],
         "field 'alltoall_medium_B'"),
        (["simulate", "-t", "paper003", "-T", "ring:np=8,bytes=1MB", "--mpich", "alltoall_throttle"],
         "expected FIELD=VALUE"),
        (["simulate", "--flows", tmp / "flows.json", "--mpich", "alltoall_throttle=4"], "--mpich does not apply"),
        (["analyze", "-t", "paper003", "-T", tmp / "cs0.csv"], "field 'comm_size'"),
        (["analyze", "-t", "paper003", "-T", "ring:np=8,bytes=1MB", "-p", tmp / "plhuge.csv"], "out of range"),
        (["cost", "-l", "0"], "--upper-switches: must be at least 1"),
        (["serve", "-i", dump, "--port", "0", "--host", "999.1.1.1"], "cannot resolve"),
        (["bound", "alltoall", "-t", "mesh10x10x10", "--bytes", "1KiB", "--simulate", "a2a", "--method", "bogus"],
         "--method"),
        (["sweep", tmp / "sw.yaml", "--dry-run"], "instances[0].traffic'"),
        # round 4 (issue 17): CSV rows that do not match the header, BOMs, duplicate columns, counts, ids, times
        (["traffic", tmp / "short.csv", "-o", tmp / "r.csv"], "short.csv:2: 4 fields, the header has 8"),
        (["analyze", "-t", "paper003", "-T", "ring:np=8,bytes=1MB", "-p", tmp / "pl3.csv"],
         "pl3.csv:2: 3 fields, the header has 2"),
        (["traffic", tmp / "bom.csv", "-o", tmp / "r.csv"], "bom.csv:2: field 'bytes': must be non-negative"),
        (["traffic", tmp / "dupcol.csv", "-o", tmp / "r.csv"], "dupcol.csv:1: duplicate column 'bytes'"),
        (["traffic", tmp / "msgs0.csv", "-o", tmp / "r.csv"], "0 messages cannot carry 100 bytes"),
        (["traffic", tmp / "arabic.csv", "-o", tmp / "r.csv"], "arabic.csv:2: field 'dst': not a number"),
        (["bcast", "-t", "paper003", "-a", tmp / "sup.txt"], "sup.txt:2: unknown host"),
        (["traffic", tmp / "t1e300.csv", "-o", tmp / "r.csv"], "over the limit of 1e+10 s"),
        (["traffic", tmp / "trunc.csv", "-o", tmp / "r.csv"], "MPI_ERR_TRUNCATE"),
        (["traffic", tmp / "rows.csv.gz", "-o", tmp / "r.csv"], "over the limit of 100,000,000 rows"),
        (["analyze", "-t", "paper003", "-T", "ring:np=16,bytes=1MB", "-p", tmp / "pl64.csv"],
         "places 64 ranks but the traffic has 16"),
        # round 4 (issue 17): Slurm topology.conf, host names, YAML/JSON documents and numbers
        (["show", tmp / "cycle.conf"], "is in a cycle: s1 -> s2 -> s1"),
        (["show", tmp / "speed.conf"], "has no LinkSpeed but switch 's0'"),
        (["show", tmp / "nodes2.conf"], "node 'n1' is also under switch 's0'"),
        (["show", tmp / "slurmhost.conf"], "slurmhost.conf:1: field 'Nodes'"),
        (["show", tmp / "slot.yaml"], "slot.yaml:5: field 'hostnames[3]'"),
        (["show", tmp / "duphost.yaml"], "is named for node 0 and node 3"),
        (["export", "ompi4", "-p", tmp / "place.json", "--hosts", tmp / "eq.txt", "-o", tmp / "o"],
         "eq.txt:2: field 'host'"),
        (["show", tmp / "dup.yaml"], "dup.yaml:5: field 'switches': duplicate key"),
        (["show", tmp / "bomb.yaml"], "aliases expand"),
        (["show", tmp / "inf.yaml"], "inf.yaml:5: field 'cores_per_node'"),
        (["show", tmp / "octal.yaml"], "field 'nodes_per_switch': expected an integer, got '010'"),
        (["show", tmp / "selfloop.yaml"], "field 'links[1]': switch 'b' is linked to itself"),
        (["show", tmp / "mtu0.yaml"], "mtu0.yaml:4: field 'mtu'"),
        (["show", "paper003", "--set", "cores_per_node=1e30"], "over the limit"),
        (["validate", tmp / "dupplan.json", "-t", "paper003"], "duplicate key 'rank_to_node'"),
        # issue 18: Slurm files as they are, host names
        (["show", tmp / "sl-miss" / "topology.conf"], "topology.conf:2: node 'n4' has no NodeName line"),
        (["show", tmp / "sl-mixed" / "topology.conf"], "node 'n3' has 16 cores but node 'n1'"),
        (["show", tmp / "sl-bad" / "topology.conf"],
         "slurm.conf:1: field 'CoresPerSocket': expected a positive integer"),
        (["simulate", "-t", tmp / "sl-none" / "topology.conf", "-T", "ring:np=8,bytes=1MB"], "--set cores_per_node=N"),
        (["analyze", "-t", tmp / "sl-ok" / "topology.conf", "-T", "ring:np=2,bytes=1MB", "-p", tmp / "sl-hosts.csv"],
         "sl-hosts.csv:3: field 'node': unknown host 'n9'"),
        (["bcast", "-t", tmp / "sl-ok" / "topology.conf", "-a", "n[1-2],n7"], "unknown host 'n7'"),
        (["show", tmp / "sl-ok" / "topology.yaml"], "uses the topology/flat plugin"),
        (["show", tmp / "sl-ok" / "slurm.conf"], "is a slurm.conf line"),
        (["show", tmp / "sl-ok" / "topology.conf", "--set", "slurm_topology=x"],
         "names a topology of a Slurm topology.yaml"),
        # round 4 (issue 17): routes that are not what they claim, host names, the route server's options
        (["topo", "query", "-i", dump, "--lft", tmp / "lft", "node001:node004"], "the LFTs loop on the way to LID 8"),
        (["topo", "query", "-i", dump, "--lft", tmp / "lft", "node004:node005"],
         "sends LID 9 to port 20, which is not connected"),
        (["topo", "delay", "-i", dump, "--lft", tmp / "lft", "--hosts", tmp / "ib-hosts.txt", "-o", tmp / "d.csv"],
         "no route from node001 to node004"),
        (["topo", "query", "-i", tmp / "dupdesc.txt", "node001:node003"], "dupdesc.txt:107: host 'node001'"),
        (["topo", "info", "-i", tmp / "dupdesc.txt"], "dupdesc.txt:107: host 'node001'"),
        (["serve", "-i", dump, "--port", "0", "--idle-timeout", "soon"], "--idle-timeout 'soon'"),
        (["serve", "-i", dump, "--port", "0", "--max-clients", "0"], "--max-clients 0: expected at least 1"),
        # issue 36: OTF2 archives cut short or empty (once a traceback after the library's own lines, or 0 s)
        (["simulate", "-t", "paper003", "-T", tmp / "otf-cut" / "traces.otf2"],
         "cannot read the OTF2 archive: Invalid or inconsistent record data"),
        (["simulate", "-t", "paper003", "-T", tmp / "otf-none"], "no MPI events in the archive of 2 ranks"),
        # issue 36: trace semantics
        (["traffic", tmp / "bsize.csv", "-o", tmp / "r.csv"],
         "bsize.csv:3: field 'bytes': 1000 bytes, but rank 0 passes 500 to the same bcast"),
        (["traffic", tmp / "comm" / "t.csv", "-o", tmp / "r.csv"],
         "t.csv:2: field 'comm': communicator 5 is not listed (communicators.csv)"),
        (["simulate", "-t", "paper003", "-T", tmp / "req.csv"], "req.csv:3: field 'req': 300 is not what a wait"),
        (["simulate", "-t", "paper003", "-T", tmp / "ph16.csv", "--phases", tmp / "ph.json"],
         "field 'inputs': made for another trace"),
        # issue 36: numbers and names
        (["circuits", "-t", "paper003", "-T", "ring:np=16,bytes=1MB", "-m", "anneal", "--time-limit", "٣s"],
         "--time-limit: cannot read time '٣s'"),
        (["phases", "-t", "paper003", "-T", "ring:np=16,bytes=1MB", "--windows", "١٠"], "'١٠' is not a number"),
        (["show", tmp / "ls.conf"], "ls.conf:1: field 'LinkSpeed': 100000 has no unit"),
        (["show", tmp / "hl.yaml"], "host name 'n3;x' contains ';'"),
        # issue 36: exports
        (["export", "ompi5", "-p", tmp / "place.json", "-t", "paper003", "--slots", "threads", "-o", tmp / "o"],
         "--slots: expected one of cores, hwthreads"),
        # issue 36, second round: schedules and the OCS document (once validated and exported, NaN written)
        (["validate", tmp / "s-neg.json", "-t", "paper003"],
         "s-neg.json: field 'setup_s': expected a non-negative time in seconds, got -0.01"),
        (["export", "ocs", "-p", tmp / "s-neg.json", "-t", "paper003", "-o", tmp / "o.json"], "field 'setup_s'"),
        (["validate", tmp / "s-black.json", "-t", "paper003"], "field 'blackout': expected one of eps, stall"),
        (["export", "ocs", "-p", tmp / "s-black.json", "-t", "paper003", "-o", tmp / "o.json"], "field 'blackout'"),
        (["validate", tmp / "s-from.json", "-t", "paper003"], "entry 0: field 'from_s'"),
        (["export", "ocs", "-p", tmp / "s-from.json", "-t", "paper003", "-o", tmp / "o.json"], "field 'from_s'"),
        (["validate", tmp / "s-nan.json", "-t", "paper003"], "s-nan.json:3: malformed plan: NaN is not a JSON number"),
        (["export", "ocs", "-p", tmp / "s-nan.json", "-t", "paper003", "-o", tmp / "o.json"],
         "s-nan.json:3: malformed circuit plan or schedule: NaN is not a JSON number"),
        # issue 36, second round: plans and flow files
        (["validate", tmp / "fwd00.json", "-t", "paper003"], "node key '00' is not written as '0'"),
        (["simulate", "--flows", tmp / "route2.json"], "routes[0].links[1]: link 'L' is listed twice in the route"),
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


def test_simulate_runs_the_mpi_library_as_configured(run_cli):
    """--mpich sets MPICH's collective parameters: fewer isend/irecv in flight is another replay, recorded in the
    result and printed; the defaults given explicitly are the default replay, which records nothing."""
    base = ["simulate", "-t", "paper003", "--network", "eps", "-T", "alltoall:np=16,bytes=16KiB", "--json"]
    runs = {}
    for opts in ((), ("--mpich", "alltoall_throttle=32"), ("--mpich", "alltoall_throttle=2"),
                 ("--mpich", "alltoall_medium_B=8KiB", "--mpich", "alltoall_throttle=2")):
        code, out, err = run_cli(*base, *opts)
        assert code == 0, err
        runs[opts] = json.loads(out)
    default = runs[()]
    assert "mpich" not in default and "mpich" not in runs[("--mpich", "alltoall_throttle=32")]
    assert runs[("--mpich", "alltoall_throttle=32")]["makespan_s"] == default["makespan_s"]
    two = runs[("--mpich", "alltoall_throttle=2")]
    assert two["mpich"] == {"alltoall_throttle": 2} and two["makespan_s"] > default["makespan_s"]
    # 16 KiB a pair above an 8 KiB medium size: the pairwise exchange, which the throttle does not touch
    pairwise = runs[("--mpich", "alltoall_medium_B=8KiB", "--mpich", "alltoall_throttle=2")]
    assert pairwise["mpich"] == {"alltoall_medium_B": 8192, "alltoall_throttle": 2}
    assert pairwise["makespan_s"] not in (default["makespan_s"], two["makespan_s"])
    code, out, _ = run_cli(*base[:-1], "--mpich", "alltoall_throttle=2")
    assert code == 0 and "MPI collectives: MPICH's but alltoall_throttle=2" in out
