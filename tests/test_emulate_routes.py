"""``topoplan export routes``: a circuit plan's forwarding tables as iproute2 batch files, checked line by line,
following the plan's walks, accepted by the real ``ip -batch``, and applied by the emulator to its hosts."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from topoplan.core.errors import TopoplanError
from topoplan.core.topology_io import load_topology
from topoplan.reporting.routes_export import (default_address, export_routes, read_addresses, read_route_file,
                                              route_tables)

from test_emulate_cluster import needs_root

TOPO_SETS = ["ocs.nodes_per_switch=1"]   # paper003: 4 switches x 16 nodes; OCS nodes 0, 16, 32, 48


@pytest.fixture(scope="module")
def topo():
    return load_topology("paper003", TOPO_SETS)


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    """A greedy plan of the neighbour exchange, through the CLI as a user makes one."""
    from topoplan.cli.main import main

    d = tmp_path_factory.mktemp("routes")
    path = d / "plan.json"
    assert main(["circuits", "-t", "paper003", *sum((["--set", s] for s in TOPO_SETS), []), "-T",
                 "neighbor2d:rows=16,cols=16,bytes=4MB", "-m", "greedy", "-o", str(path)]) == 0
    return path


def walk(tables, hosts, sw, src, dst):
    """Follow the route files' next hops from src towards dst's switch (what the kernels will do)."""
    nxt = {h: {d: (n, dev) for d, n, dev, _ in rows} for h, rows in tables.items()}
    at, seen = src, [src]
    while sw[hosts.index(at)] != sw[hosts.index(dst)] and dst in nxt[at]:
        at = nxt[at][dst][0]
        assert at not in seen, f"loop {seen + [at]}"
        seen.append(at)
    return seen


def test_routes_follow_the_plan_walks(topo, plan):
    from topoplan.sim.network import CircuitLinks, follow_forwarding
    import numpy as np

    doc = json.loads(plan.read_text())
    tables = route_tables(doc, topo)
    hosts, sw = topo.host_names(), topo.node_switch().tolist()
    nh = np.full((topo.n_nodes, topo.n_switches), -1)
    for u, row in doc["forwarding"].items():
        for s, h in row.items():
            nh[int(u), int(s)] = h
    cl = CircuitLinks.number(topo.n_nodes, [tuple(c) for c in doc["circuits"]], 1000)
    checked = 0
    for src in range(topo.n_nodes):
        for dst in range(topo.n_nodes):
            if sw[src] == sw[dst]:
                continue
            hops = follow_forwarding(nh, sw, cl, [src], [sw[dst]])
            expect = [hosts[src]] + [hosts[int(v)] for v in hops.dst]
            assert walk(tables, hosts, sw, hosts[src], hosts[dst]) == expect
            checked += 1
    assert checked == 64 * 48
    # over a circuit: the partner's address, on the host's optical port, onlink
    c0 = doc["circuits"][0]
    rows = [r for r in tables[hosts[c0[0]]] if r[1] == hosts[c0[1]]]
    assert rows and all(dev == "ocs0" and onlink for _, _, dev, onlink in rows)


def test_cli_writes_one_checked_file_per_host(topo, plan, tmp_path, run_cli):
    out = tmp_path / "routes"
    code, stdout, err = run_cli("export", "routes", "-p", plan, "-t", "paper003", *sum((["--set", s] for s in TOPO_SETS), []),
                                "-o", out)
    assert code == 0, err
    assert "64 hosts" in stdout and "ip -batch" in stdout
    files = sorted(os.listdir(out))
    assert files == [f"{h}.routes" for h in topo.host_names()]
    addresses = [default_address(i) for i in range(64)]
    total = sum(len(read_route_file(out / f, addresses=addresses, devices={"eth0", "ocs0"})) for f in files)
    tables = route_tables(json.loads(plan.read_text()), topo)
    assert total == sum(len(r) for r in tables.values()) > 0
    # again into the same directory: replaced, not refused
    assert run_cli("export", "routes", "-p", plan, "-t", "paper003", *sum((["--set", s] for s in TOPO_SETS), []),
                   "-o", out)[0] == 0


def test_a_directory_with_other_hosts_route_files_is_refused(topo, plan, tmp_path, run_cli):
    """Route files of hosts the plan does not have (an earlier export, other host names) would be applied by a
    loop over the directory: refused, nothing written; other files in it are left alone."""
    out = tmp_path / "routes"
    out.mkdir()
    (out / "cn0001.routes").write_text("route replace 198.18.0.2/32 via 198.18.0.3 dev eth0\n")
    (out / "README").write_text("mine\n")
    code, stdout, err = run_cli("export", "routes", "-p", plan, "-t", "paper003",
                                *sum((["--set", s] for s in TOPO_SETS), []), "-o", out)
    assert code == 2 and stdout == ""
    assert err.startswith(f"error: {out}: holds route files of hosts this plan does not have (cn0001.routes)")
    assert sorted(os.listdir(out)) == ["README", "cn0001.routes"]
    (out / "cn0001.routes").unlink()
    assert run_cli("export", "routes", "-p", plan, "-t", "paper003", *sum((["--set", s] for s in TOPO_SETS), []),
                   "-o", out)[0] == 0
    assert len(os.listdir(out)) == 65


@pytest.mark.parametrize("where", ["no-dir/routes", "no-dir/deeper/routes"])
def test_routes_directory_in_a_missing_directory_is_refused(run_cli, plan, tmp_path, where):
    """Every other output refuses a missing directory; the routes created the whole chain of directories."""
    out = tmp_path / where
    code, _, err = run_cli("export", "routes", "-p", plan, "-t", "paper003",
                           *sum((["--set", s] for s in TOPO_SETS), []), "-o", out)
    assert code == 2 and err == f"error: {out}: directory {out.parent} does not exist\n"
    assert not (tmp_path / "no-dir").exists()


@pytest.mark.parametrize("existing", [None, "empty", "README"])
@pytest.mark.parametrize("fault", [KeyboardInterrupt, TopoplanError])
def test_an_interrupted_or_failed_routes_export_leaves_nothing_behind(plan, tmp_path, run_cli, monkeypatch,
                                                                      existing, fault):
    """Ctrl-C during the export (exit 130) left the directory it had made, sometimes with a temporary file in
    it; a directory that was there before stays, as it was."""
    from topoplan.core import io as core_io
    from topoplan.reporting import routes_export

    out = tmp_path / "rint"
    if existing is not None:
        out.mkdir()
        if existing == "README":
            (out / "README").write_text("mine\n")
    calls = []

    def writer(path, data, **kw):   # the interrupt (or a full disk) lands while the 40th host's file is written
        calls.append(path)
        if len(calls) == 40:
            raise fault() if fault is KeyboardInterrupt else fault(f"{path}: cannot write: No space left on device")
        core_io.atomic_write(path, data, **kw)

    monkeypatch.setattr(routes_export, "atomic_write", writer)
    code, stdout, err = run_cli("export", "routes", "-p", plan, "-t", "paper003",
                                *sum((["--set", s] for s in TOPO_SETS), []), "-o", out)
    assert len(calls) == 40 and stdout == ""
    assert code == (130 if fault is KeyboardInterrupt else 2), err
    if existing is None:
        assert not out.exists()
    else:
        assert sorted(os.listdir(out)) == ([] if existing == "empty" else ["README"])
    assert sorted(os.listdir(tmp_path)) == (["rint"] if existing else [])


def test_addresses_file_gives_a_real_clusters_addresses(topo, plan, tmp_path):
    path = tmp_path / "addresses"
    path.write_text("".join(f"{h} 10.1.{i // 16}.{i % 16 + 1}\n" for i, h in enumerate(topo.host_names())))
    addrs = read_addresses(path, topo.host_names())
    files = export_routes(json.loads(plan.read_text()), topo, tmp_path / "r", addresses=addrs)
    assert all(a.startswith("10.1.") for line in files["node0001"].read_text().splitlines()[1:]
               for a in (line.split()[2], line.split()[4]))


@pytest.mark.parametrize("text, match", [
    ("node0000 10.0.0.1\n", "host node0001 has no address"),
    ("node0000 300.0.0.1\n", "is not an IPv4 address"),
    ("nosuch 10.0.0.1\n", "'nosuch' is not a host"),
    ("node0000\n", "expected 'host address'"),
    ("node0000 0.0.0.1\n", r"addresses:1: field 'address': 0.0.0.1 is a 'this network' \(0.0.0.0/8\) address"),
    ("node0000 10.0.0.1\nnode0001 127.0.0.2\n", "addresses:2: field 'address': 127.0.0.2 is a loopback address"),
    ("node0000 224.0.0.5\n", "224.0.0.5 is a multicast address"),
    ("node0000 255.255.255.255\n", "255.255.255.255 is a reserved address"),
])
def test_bad_addresses_files(topo, tmp_path, text, match):
    path = tmp_path / "addresses"
    path.write_text(text)
    with pytest.raises(TopoplanError, match=match):
        read_addresses(path, topo.host_names())


@pytest.mark.parametrize("line, match", [
    ("route add 198.18.0.2/32 via 198.18.0.3 dev eth0", "expected 'route replace"),
    ("route replace 198.18.0.99/32 via 198.18.0.3 dev eth0", "field 'destination': 198.18.0.99"),
    ("route replace 198.18.0.2/32 via 8.8.8.8 dev eth0", "field 'via': 8.8.8.8"),
    ("route replace 198.18.0.2/32 via 198.18.0.3 dev ocs1", "no device 'ocs1'"),
])
def test_route_files_are_checked_line_by_line(tmp_path, line, match):
    path = tmp_path / "h.routes"
    path.write_text("# header\n" + line + "\n")
    with pytest.raises(TopoplanError, match=rf"h\.routes:2: .*{match}"):
        read_route_file(path, addresses=[default_address(i) for i in range(4)], devices={"eth0", "ocs0"})


def test_invalid_plans_and_schedules_are_refused(topo, tmp_path, run_cli):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"circuits": [[0, 1]], "forwarding": {}}))
    code, _, err = run_cli("export", "routes", "-p", bad, "-t", "paper003", "-o", tmp_path / "r")
    assert code == 2 and "same switch" in err and not (tmp_path / "r").exists()
    sched = {"schedule": [{"from_phase": 0, "circuits": [[0, 16]], "forwarding": {}},
                          {"from_phase": 1, "circuits": [[0, 16]], "forwarding": {"0": {"1": 16}}}], "n_phases": 2}
    with pytest.raises(TopoplanError, match="choose the entry"):
        route_tables(sched, topo)
    assert route_tables(sched, topo, entry=0)["node0000"] == []
    assert len(route_tables(sched, topo, entry=1)["node0000"]) == 16
    with pytest.raises(TopoplanError, match="entry 2 does not exist"):
        route_tables(sched, topo, entry=2)


@needs_root
@pytest.mark.skipif(shutil.which("ip") is None, reason="needs iproute2's ip")
def test_real_iproute2_accepts_the_files_as_the_emulator_applies_them(topo, plan, tmp_path):
    """A file applied by ``ip -batch`` in one namespace gives the routes the emulator installs in another."""
    from pyroute2 import IPRoute, netns

    from topoplan.core.topology import OCSConfig, TreeTopology
    from topoplan.emulate.cluster import Cluster, cluster_spec
    from topoplan.emulate.plan import plan_circuits, write_route_files

    small = TreeTopology(kind="hybrid", nodes_per_switch=(2, 2), ocs=OCSConfig(nodes=(0, 2), bw_Bps=2.5e9,
                                                                               latency_s=5e-7))
    doc = {"circuits": [[0, 2]], "forwarding": {"1": {"1": 0}, "0": {"1": 2}, "2": {"0": 0}, "3": {"0": 2}}}
    files = write_route_files(doc, small, tmp_path / "r")
    spec = cluster_spec(small, circuits=plan_circuits(doc, small), scale=100)

    def table(ns):
        netns.pushns(ns)
        try:
            with IPRoute() as ipr:
                return sorted((r.get_attr("RTA_DST"), r.get_attr("RTA_GATEWAY"), r.get_attr("RTA_OIF"))
                              for r in ipr.get_routes(family=2, table=254) if r["dst_len"] == 32)
        finally:
            netns.popns()

    with Cluster(spec) as c:
        before = table(spec.host_ns[0])
        res = subprocess.run(["ip", "-n", spec.host_ns[0], "-batch", str(files["node0000"])], capture_output=True,
                             text=True)
        assert res.returncode == 0, res.stderr
        by_ip = table(spec.host_ns[0])
        assert c.apply_routes(files) == 8   # 4 hosts x 2 destinations under the other switch
        assert table(spec.host_ns[0]) == by_ip != before
        assert [(d, g) for d, g, _ in by_ip] == [("198.18.0.3", "198.18.0.3"), ("198.18.0.4", "198.18.0.3")]
