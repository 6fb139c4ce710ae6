"""The emulated cluster: its plan (no privileges needed), and, as root with pyroute2, that building it leaves
nothing behind on success, on an error, on SIGINT and after a killed run, without touching a concurrent run."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from topoplan.core.errors import TopoplanError
from topoplan.core.topology import OCSConfig, TreeTopology
from topoplan.emulate import cluster as cl

from timing import sigint_default

ROOT = Path(__file__).resolve().parents[1]


def _can_emulate() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    try:
        import pyroute2  # noqa: F401
    except ImportError:
        return "needs pyroute2 (pip install 'topoplan[emulate]')"
    if not Path("/proc/self/ns/net").exists():
        return "no network namespaces on this kernel"
    return None


WHY = _can_emulate()
needs_root = pytest.mark.skipif(WHY is not None, reason=WHY or "")

TREE = TreeTopology(kind="tree", nodes_per_switch=(2, 2))
HYBRID = TreeTopology(kind="hybrid", nodes_per_switch=(2, 2), ocs=OCSConfig(nodes=(0, 2), bw_Bps=2.5e9, latency_s=5e-7))


# -- the plan of the cluster ---------------------------------------------------------------------------


def test_spec_of_a_tree():
    s = cl.cluster_spec(TREE, scale=100, run_id=42)
    assert s.host_ns == [f"topoplan-em42-h{i}" for i in range(4)]
    assert s.head_ns == "topoplan-em42-head" and s.ns_of("node0003") == "topoplan-em42-h3"
    node = [l for l in s.links if l.cls == "node"]
    up = [l for l in s.links if l.cls == "uplink"]
    assert [(l.a_ns, l.a_if, l.b_ns, l.b_if) for l in node[:2]] == [
        ("topoplan-em42-h0", "eth0", "topoplan-em42-s0", "h0"), ("topoplan-em42-h1", "eth0", "topoplan-em42-s0", "h1")]
    assert {l.rate_Bps for l in node} == {1.25e9 / 100} and {l.rate_Bps for l in up} == {2.5e9 / 100}
    assert all(l.rate_Bps is None for l in s.links if l.cls == "mgmt") and s.mtu == 4096


@pytest.mark.parametrize("bw_Bps, packets", [(1.25e9, 54), (0.625e9, 27), (2.5e9, 108)])
def test_switch_ports_hold_their_share_of_a_switch_buffer(bw_Bps, packets):
    topo = TreeTopology(kind="tree", nodes_per_switch=(2, 2), down_bw_Bps=bw_Bps, up_bw_Bps=bw_Bps)
    for scale in (100, 400):   # bytes do not change with the scale
        s = cl.cluster_spec(topo, scale=scale, run_id=1, lossless=False)
        for link in (l for l in s.links if l.cls in ("node", "uplink")):
            assert s.queue_of(link, "b") == packets                  # every b end is a switch port
            assert s.queue_of(link, "a") == (cl.HOST_QUEUE_PACKETS if link.cls == "node" else packets)
    fixed = cl.cluster_spec(topo, scale=400, run_id=1, queue_packets=64, lossless=False)
    assert {fixed.queue_of(l, e) for l in fixed.links if l.rate_Bps for e in "ab"} == {64}


def test_lossless_queues_are_deeper_than_tcp_can_fill_and_the_timeout_scales():
    for scale, rto_s in ((100, 20.0), (400, 80.0), (2000, cl.TCP_RTO_MAX_S)):
        s = cl.cluster_spec(HYBRID, circuits=[(0, 2, 0, 0)], scale=scale, run_id=1, lossless=True)
        assert {s.queue_of(l, e) for l in s.links if l.rate_Bps for e in "ab"} == {cl.LOSSLESS_QUEUE_PACKETS}
        assert s.rto_min_s == rto_s and s.route_metrics()["RTAX_RTO_MIN"] == round(rto_s * 1e3)
    fixed = cl.cluster_spec(TREE, scale=400, run_id=1, queue_packets=64, lossless=True)   # an explicit length wins
    assert {fixed.queue_of(l, e) for l in fixed.links if l.rate_Bps for e in "ab"} == {64}
    assert cl.cluster_spec(TREE, scale=400, run_id=1).lossless   # the default
    lossy = cl.cluster_spec(TREE, scale=400, run_id=1, lossless=False)
    assert lossy.rto_min_s is None and set(lossy.route_metrics()) == {"RTAX_CC_ALGO"}


def test_an_unknown_shaper_is_refused():
    with pytest.raises(TopoplanError, match="field 'shaper': choose one of tbf, htb, got 'red'"):
        cl.cluster_spec(TREE, scale=10, run_id=1, shaper="red")


@pytest.mark.parametrize("shaper", cl.SHAPERS)
def test_ack_priority_queues_are_refused_on_lossless_switches(shaper):
    with pytest.raises(TopoplanError, match="field 'queues': ack-priority queues reorder TCP's segments on lossless"):
        cl.cluster_spec(TREE, scale=10, run_id=1, queues="ack-priority", shaper=shaper)
    assert cl.cluster_spec(TREE, scale=10, run_id=1, queues="ack-priority", shaper=shaper, lossless=False).queues \
        == "ack-priority"


def test_an_unknown_congestion_control_is_refused():
    with pytest.raises(TopoplanError, match="field 'congestion': this kernel has .*not 'no-such'"):
        cl.cluster_spec(TREE, scale=10, run_id=1, congestion="no-such")


def test_circuit_ends_are_host_queues():
    s = cl.cluster_spec(HYBRID, circuits=[(0, 2, 0, 0)], scale=50, run_id=3, lossless=False)
    ocs = [l for l in s.links if l.cls == "ocs"]
    assert [s.queue_of(l, e) for l in ocs for e in "ab"] == [cl.HOST_QUEUE_PACKETS] * 2


def test_fat_tree_uplinks_carry_all_their_nodes_send():
    s = cl.cluster_spec(TreeTopology(kind="fat-tree", nodes_per_switch=(4, 4), up_bw_Bps=1e9), scale=10, run_id=1)
    assert {l.rate_Bps for l in s.links if l.cls == "uplink"} == {4 * 1.25e9 / 10}


def test_circuits_are_direct_links_between_ocs_ports():
    s = cl.cluster_spec(HYBRID, circuits=[(0, 2, 0, 0)], scale=50, run_id=3)
    (c,) = [l for l in s.links if l.cls == "ocs"]
    assert (c.a_ns, c.a_if, c.b_ns, c.b_if, c.rate_Bps) == ("topoplan-em3-h0", "ocs0", "topoplan-em3-h2", "ocs0", 5e7)
    with pytest.raises(TopoplanError, match="node 1 has no optical port 0"):
        cl.cluster_spec(HYBRID, circuits=[(1, 2, 0, 0)], scale=50, run_id=3)


@pytest.mark.parametrize("kind", ["tree", "fat-tree", "hybrid"])
def test_directions_are_the_simulators_links(kind):
    """Every shaped direction is named as the simulator names the link it emulates, at the link's scaled rate,
    and every network link the simulator shares has its direction (a hybrid's circuits included)."""
    import numpy as np

    from topoplan.sim.network import build_network

    topo = TreeTopology(kind=kind, nodes_per_switch=(2, 2), up_bw_Bps=1.25e9,
                        ocs=OCSConfig(nodes=(0, 2), bw_Bps=2.5e9, latency_s=5e-7) if kind == "hybrid" else None)
    circuits = [(0, 2, 0, 0)] if kind == "hybrid" else []
    spec = cl.cluster_spec(topo, circuits=circuits, scale=50, run_id=3)
    net = build_network(topo, {"circuits": [[0, 2]], "forwarding": {}} if circuits else None)
    rate = {n: float(b) / 50 for n, b, sh, c in zip(net.link_name, net.bw_Bps, net.shared, net.link_class)
            if sh and c != "intra"}   # (a node's own memory: no link of the emulated network)
    dirs = {d[2]: d for d in spec.directions()}
    assert set(rate) <= set(dirs)
    for name, d in dirs.items():
        if name in rate:
            assert d[6] == pytest.approx(rate[name]), name
        else:   # the simulator does not share a fat tree's uplinks; the emulator gives them what their nodes send
            assert kind == "fat-tree" and d[3].startswith("uplink"), name
    assert {d[3] for d in dirs.values()} >= {"node-up", "node-down", "uplink-up", "uplink-down"}
    assert ("node0000=>node0002" in dirs and "node0002=>node0000" in dirs) == (kind == "hybrid")
    assert len(np.unique([d[:2] for d in dirs.values()], axis=0)) == len(dirs)   # one queue, one direction


@pytest.mark.parametrize("kwargs, match", [
    ({"scale": 0}, "must be positive"),
    ({"scale": "x"}, "expected a number"),
    ({"scale": 1e8}, "choose a smaller --scale"),
])
def test_bad_scales_are_refused(kwargs, match):
    with pytest.raises(TopoplanError, match=match):
        cl.cluster_spec(TREE, run_id=1, **kwargs)


def test_addresses_stay_in_the_benchmarking_range():
    import ipaddress

    bench = ipaddress.ip_network("198.18.0.0/15")
    for node in (0, 1, 255, cl.MAX_HOSTS - 1):
        assert ipaddress.ip_address(cl.data_address(node)) in bench
        assert ipaddress.ip_address(cl.mgmt_address(node)) in bench
    assert ipaddress.ip_address(cl.HEAD_ADDRESS) in bench


def test_too_many_nodes_and_other_kinds_are_refused():
    from topoplan.core.topology import TorusTopology

    with pytest.raises(TopoplanError, match="at most"):
        cl.cluster_spec(TreeTopology(kind="tree", nodes_per_switch=(cl.MAX_HOSTS + 1,)), scale=1, run_id=1)
    with pytest.raises(TopoplanError, match="two-level trees"):
        cl.cluster_spec(TorusTopology(dims=(2,), wrap=(False,), bw_Bps=(1e9,)), scale=1, run_id=1)


# -- on the machine ---------------------------------------------------------------------------------------


def _ours(run_id: int) -> list:
    return cl.our_namespaces().get(run_id, [])


@contextlib.contextmanager
def _netlink(ns: str):
    """A netlink socket inside namespace ``ns`` (pyroute2 is imported here: the module's tests without root do
    not need it)."""
    from pyroute2 import IPRoute, netns

    netns.pushns(ns)
    try:
        with IPRoute() as ipr:
            yield ipr
    finally:
        netns.popns()


def _links_in(ns: str) -> list:
    with _netlink(ns) as ipr:
        return sorted(l.get_attr("IFLA_IFNAME") for l in ipr.get_links())


@needs_root
def test_build_shapes_and_removes_everything():
    spec = cl.cluster_spec(HYBRID, circuits=[(0, 2, 0, 0)], scale=100)
    with cl.Cluster(spec) as c:
        assert sorted(_ours(os.getpid())) == sorted(spec.namespaces) and c.setup_s > 0
        assert _links_in(spec.host_ns[0]) == ["eth0", "lo", "mgmt0", "ocs0"]
        assert _links_in(spec.bridge_ns[0]) == ["br0", "h0", "h1", "lo", "up"]
        assert (cl.LOCK_DIR / f"{os.getpid()}.lock").exists() and cl.run_alive(os.getpid())
    assert _ours(os.getpid()) == [] and not (cl.LOCK_DIR / f"{os.getpid()}.lock").exists()


def _neighbours(ns: str) -> dict:
    """``{(interface, address): (mac, permanent)}`` of namespace ``ns``'s IPv4 neighbour table."""
    with _netlink(ns) as ipr:
        names = {l["index"]: l.get_attr("IFLA_IFNAME") for l in ipr.get_links()}
        macs = {l.get_attr("IFLA_IFNAME"): l.get_attr("IFLA_ADDRESS") for l in ipr.get_links()}
        got = {(names[n["ifindex"]], n.get_attr("NDA_DST")): (n.get_attr("NDA_LLADDR"), n["state"] == cl.NUD_PERMANENT)
               for n in ipr.get_neighbours(family=2)}
        return got, macs


@needs_root
def test_every_address_a_node_sends_to_is_resolved_in_advance():
    """The kernel's one ARP table for all namespaces overflows at 1,024 collectable entries (32 nodes resolving each
    other); permanent entries, one per peer on eth0, per circuit's far end and for the head, are not counted."""
    spec = cl.cluster_spec(HYBRID, circuits=[(0, 2, 0, 0)], scale=100)
    with cl.Cluster(spec):
        tables = [_neighbours(ns) for ns in spec.host_ns]
        head, head_macs = _neighbours(spec.head_ns)
        n = len(spec.host_ns)
        for i, (got, _) in enumerate(tables):
            want = {("eth0", cl.data_address(j)): (tables[j][1]["eth0"], True) for j in range(n) if j != i}
            want[("mgmt0", cl.HEAD_ADDRESS)] = (head_macs["mgmt0"], True)
            if i in (0, 2):   # the circuit's two ends: its far end's address on ocs0, over the circuit
                want[("ocs0", cl.data_address(2 - i))] = (tables[2 - i][1]["ocs0"], True)
            assert got == want
        assert head == {("mgmt0", cl.mgmt_address(j)): (tables[j][1]["mgmt0"], True) for j in range(n)}
    assert _ours(os.getpid()) == []


def _routes_and_queues(ns: str) -> tuple:
    with _netlink(ns) as ipr:
        names = {l["index"]: l.get_attr("IFLA_IFNAME") for l in ipr.get_links()}
        routes = {}
        for r in ipr.get_routes(family=2, table=254):
            metrics = r.get_attr("RTA_METRICS")
            cc = metrics.get_attr("RTAX_CC_ALGO") if metrics is not None else None
            if str(r.get_attr("RTA_DST")).startswith("198.18."):   # the emulated network (not the launcher's)
                routes[f"{r.get_attr('RTA_DST')}/{r['dst_len']}"] = cc
        fifos = {}   # every shaped end's FIFO length in packets (a tbf counts bytes: packets of the MTU)
        for q in ipr.get_qdiscs():
            if q.get_attr("TCA_KIND") == "pfifo":
                fifos[names[q["index"]]] = q.get_attr("TCA_OPTIONS")["limit"]
            elif q.get_attr("TCA_KIND") == "tbf":
                limit = q.get_attr("TCA_OPTIONS").get_attr("TCA_TBF_PARMS")["limit"]
                fifos[names[q["index"]]] = limit // (HYBRID.mtu_B + 14)
        return routes, fifos


def _kinds(ns: str) -> set:
    with _netlink(ns) as ipr:
        return {q.get_attr("TCA_KIND") for q in ipr.get_qdiscs() if q.get_attr("TCA_KIND") != "noqueue"}


@needs_root
@pytest.mark.parametrize("congestion, shaper", [("cubic", "tbf"), ("reno", "htb")])
def test_built_queues_and_routes_follow_the_spec(tmp_path, congestion, shaper):
    spec = cl.cluster_spec(HYBRID, circuits=[(0, 2, 0, 0)], scale=100, congestion=congestion, shaper=shaper,
                           lossless=False)
    with cl.Cluster(spec) as c:
        assert _kinds(spec.bridge_ns[0]) == ({"tbf"} if shaper == "tbf" else {"htb", "pfifo"})
        routes, fifos = _routes_and_queues(spec.host_ns[1])
        assert routes == {"198.18.0.0/16": congestion}
        assert fifos == {"eth0": cl.HOST_QUEUE_PACKETS}
        _, fifos = _routes_and_queues(spec.bridge_ns[0])
        node = next(l for l in spec.links if l.cls == "node")
        up = next(l for l in spec.links if l.cls == "uplink")
        assert fifos == {"h0": spec.queue_of(node, "b"), "h1": spec.queue_of(node, "b"), "up": spec.queue_of(up, "a")}
        n = c.apply_routes({"node0000": _route_file(tmp_path, "198.18.0.3/32 via 198.18.0.3 dev ocs0 onlink")})
        routes, _ = _routes_and_queues(spec.host_ns[0])
        assert n == 1 and routes == {"198.18.0.0/16": congestion, "198.18.0.3/32": congestion}
    assert _ours(os.getpid()) == []


@needs_root
def test_a_lossless_cluster_locks_the_scaled_timeout_on_every_route(tmp_path):
    spec = cl.cluster_spec(HYBRID, circuits=[(0, 2, 0, 0)], scale=400, lossless=True)
    with cl.Cluster(spec) as c:
        c.apply_routes({"node0000": _route_file(tmp_path, "198.18.0.3/32 via 198.18.0.3 dev ocs0 onlink")})
        _, fifos = _routes_and_queues(spec.bridge_ns[0])
        assert set(fifos.values()) == {cl.LOSSLESS_QUEUE_PACKETS}
        with _netlink(spec.host_ns[0]) as ipr:
            got = {str(r.get_attr("RTA_DST")): (r.get_attr("RTA_METRICS").get_attr("RTAX_RTO_MIN"),
                                                 r.get_attr("RTA_METRICS").get_attr("RTAX_LOCK"))
                   for r in ipr.get_routes(family=2, table=254) if str(r.get_attr("RTA_DST")).startswith("198.18.")}
        assert got == {"198.18.0.0": (80000, 1 << cl.RTAX_RTO_MIN), "198.18.0.3": (80000, 1 << cl.RTAX_RTO_MIN)}
    assert _ours(os.getpid()) == []


def _class_packets(ns: str, ifname: str) -> dict:
    """Packets sent by each HTB leaf class (``"1:11"``...) of one interface."""
    with _netlink(ns) as ipr:
        idx = ipr.link_lookup(ifname=ifname)[0]
        out = {}
        for c in ipr.get_classes(index=idx):
            h = c["handle"]
            out[f"{h >> 16:x}:{h & 0xFFFF:x}"] = int(c.get_attr("TCA_STATS")["packets"])
        return out


def _send_udp(ns: str, dst: str, size_B: int, count: int = 5) -> None:
    code = (f"import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            f"for _ in range({count}): s.sendto(b'x' * {size_B}, ({dst!r}, 9))")
    subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", code], check=True, timeout=30)


@needs_root
@pytest.mark.parametrize("shaper", ["tbf", "htb"])
def test_fair_queues_give_every_sending_node_its_own_class(shaper):
    spec = cl.cluster_spec(TREE, scale=100, queues="fair", shaper=shaper)
    major = "2" if shaper == "tbf" else "1"   # (under tbf the classes hang below the token bucket's 1:1)
    with cl.Cluster(spec):
        _send_udp(spec.host_ns[0], cl.data_address(2), 1000, count=5)
        _send_udp(spec.host_ns[1], cl.data_address(3), 1000, count=7)
        up = {k.split(":")[1]: v for k, v in _class_packets(spec.bridge_ns[0], "up").items()
              if k.startswith(major + ":")}
        # class 10 takes what no node sent (ARP); node i's packets are in class 0x11 + i
        assert up["11"] >= 5 and up["12"] >= 7 and up["13"] == up["14"] == 0
        assert sorted(up) == ["1", "10", "11", "12", "13", "14"]
    assert _ours(os.getpid()) == []


def _qdisc_stats(ns: str, ifname: str) -> dict:
    """The root qdisc of one interface: its kind, packets sent and packets waiting."""
    with _netlink(ns) as ipr:
        idx = ipr.link_lookup(ifname=ifname)[0]
        q = next(q for q in ipr.get_qdiscs(index=idx) if q["parent"] == 0xFFFFFFFF)
        st = q.get_attr("TCA_STATS")
        return {"kind": q.get_attr("TCA_KIND"), "packets": int(st["packets"]), "qlen": int(st["qlen"])}


@needs_root
def test_the_tbf_shaper_lets_one_packet_pass_at_once_and_paces_the_rest():
    """At 1,000 B/s (the link's 1.25 GB/s divided by the scale), five 4 KB datagrams sent at once: the bucket of
    one packet lets the first go (no ARP request first: the address is resolved in advance) and holds the
    others, each 4 s of the line's time."""
    import time

    spec = cl.cluster_spec(TREE, scale=1.25e6, lossless=True)
    with cl.Cluster(spec):
        _send_udp(spec.host_ns[0], cl.data_address(1), 4000, count=5)
        deadline = time.monotonic() + 3.0
        st = _qdisc_stats(spec.host_ns[0], "eth0")
        while st["packets"] < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
            st = _qdisc_stats(spec.host_ns[0], "eth0")
        assert st["kind"] == "tbf" and st["packets"] == 1 and st["qlen"] == 4
    assert _ours(os.getpid()) == []


@needs_root
def test_the_monitor_counts_the_bytes_nodes_send_on_the_emulated_network():
    """What the stall watch compares: node 0's five 4,000 B datagrams to node 3 (over the uplinks), counted once
    at the sender's interface with their headers (42 B), and at most five ICMP "port unreachable" answers of
    590 B (nothing listens on node 3); nothing else (no ARP: addresses are resolved in advance)."""
    import time

    from topoplan.emulate.monitor import Monitor

    spec = cl.cluster_spec(TREE, scale=100)
    with cl.Cluster(spec), Monitor(spec) as mon:
        first = None
        while first is None:
            time.sleep(0.05)
            first = mon.sent_B
        _send_udp(spec.host_ns[0], cl.data_address(3), 4000, count=5)
        time.sleep(0.5)
    assert 5 * 4042 <= mon.sent_B - first <= 5 * (4042 + 590)
    assert _ours(os.getpid()) == []


@needs_root
def test_ack_priority_serves_small_packets_in_their_own_class():
    spec = cl.cluster_spec(TREE, scale=100, queues="ack-priority", lossless=False)
    with cl.Cluster(spec):
        _send_udp(spec.host_ns[0], cl.data_address(2), 10, count=6)     # 38 bytes on the wire: first
        _send_udp(spec.host_ns[0], cl.data_address(2), 100, count=40)   # data: with the others
        up = _class_packets(spec.bridge_ns[0], "up")
        # (the nodes' own IGMP reports are small too, and ARP goes to 2:10; the classes hang below the token
        # bucket's 1:1)
        assert 6 <= up["2:20"] < 20 and up["2:10"] >= 40
    assert _ours(os.getpid()) == []


def _route_file(tmp_path, line: str) -> Path:
    path = tmp_path / "node0000.routes"
    path.write_text(f"route replace {line}\n")
    return path


@needs_root
def test_an_error_while_building_removes_what_was_made(monkeypatch):
    spec = cl.cluster_spec(TREE, scale=100)
    calls = []

    def broken(self, link):
        calls.append(link)
        if len(calls) == 3:
            raise TopoplanError("link refused")
        return real(self, link)

    real = cl.Cluster._link
    monkeypatch.setattr(cl.Cluster, "_link", broken)
    with pytest.raises(TopoplanError, match="link refused"):
        with cl.Cluster(spec):
            pass
    assert _ours(os.getpid()) == []


_CHILD = """
import os, sys
sys.path.insert(0, {root!r})
from topoplan.core.topology import TreeTopology
from topoplan.emulate.cluster import Cluster, cluster_spec
spec = cluster_spec(TreeTopology(kind="tree", nodes_per_switch=(2, 2)), scale=100)
with Cluster(spec):
    # a process inside the cluster, as an MPI rank would be
    import subprocess
    agent = None
    print("up", os.getpid(), flush=True)
    sys.stdin.read()   # until the test ends it (a signal) or goes away (its end of the pipe closes)
"""


def _start_child():
    """A process inside a cluster, up until a signal ends it: waiting on its stdin, not sleeping for a time the
    test might outlast on a loaded machine."""
    proc = subprocess.Popen([sys.executable, "-c", _CHILD.format(root=str(ROOT))], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, preexec_fn=sigint_default)
    line = proc.stdout.readline()
    assert line.startswith("up"), line
    return proc, int(line.split()[1])


@needs_root
def test_sigint_removes_everything():
    proc, pid = _start_child()
    assert len(_ours(pid)) == 9
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=300) != 0   # generous (removing the namespaces under load): only a hang takes longer
    assert _ours(pid) == [] and not (cl.LOCK_DIR / f"{pid}.lock").exists()


@needs_root
def test_cleanup_removes_a_dead_run_and_spares_a_live_one():
    dead, dead_pid = _start_child()
    live, live_pid = _start_child()
    try:
        dead.kill()          # no chance to clean up: its namespaces stay behind
        dead.wait(timeout=300)
        assert len(_ours(dead_pid)) == 9
        removed = cl.cleanup()   # (and any other dead run's leftovers)
        assert set(cl.cluster_spec(TREE, scale=100, run_id=dead_pid).namespaces) <= set(removed)
        assert _ours(dead_pid) == [] and len(_ours(live_pid)) == 9 and cl.run_alive(live_pid)
    finally:
        live.send_signal(signal.SIGTERM)
        live.wait(timeout=300)
    assert _ours(live_pid) == []
