"""The emulated cluster: one network namespace per node and per switch, links as shaped veth pairs.

A two-level tree (``tree``, ``fat-tree`` or ``hybrid``) becomes:

- one namespace per node (``eth0``: its EPS link; ``ocs0``, ``ocs1`` ...: its circuits, one per optical
  port; ``mgmt0``: the launcher's network), with IP forwarding on so that OCS nodes relay;
- one namespace per edge switch and one for the top switch, each holding a Linux bridge: the edge
  switch's ports lead to its nodes and one uplink to the top switch. The EPS is one layer-2 network, as
  the nodes of a rack are in a hybrid prototype, so a node reaches a relay under its own switch directly;
- a circuit is a veth pair straight from one OCS node to the other;
- every link is shaped at both ends (each end's egress carries one direction) to the link's bandwidth
  divided by ``scale``, by a token bucket of one packet (``shaper="tbf"``, the default: a packet leaves only
  once the bucket holds its bytes, so every packet takes its time at the line rate, as on a wire, and a
  segment the kernel offloads whole is cut into packets first) or by an HTB class (``shaper="htb"``, whose
  bucket lets a packet go while any tokens are left and holds two packets' or 1 ms of them, so that the
  first few kilobytes of a message that finds the link idle pass at once), then a FIFO
  (``queues="fifo"``, the default): a switch port's share
  of a switch's buffer, or a host's transmit queue (:meth:`ClusterSpec.queue_of`). With
  ``queues="ack-priority"`` packets under 64 bytes (TCP's acknowledgements that carry no data) go first, in
  a class of their own, as control traffic that never waits behind data would (on lossy switches only: on
  lossless ones TCP's segments came out of order, so that it sent hundreds of segments again and waited out
  its scaled retransmission timeout with no packet dropped). With ``queues="fair"``
  every sending node (by the packet's source address, so a relayed packet counts as its origin's) has its
  own FIFO of that length at every shaped end, and the FIFOs are served in turn, a packet each, idle ones
  skipped: a fabric that arbitrates fairly between its inputs, as InfiniBand's switches do, rather than
  one FIFO shared by all. Links have the topology's MTU; their latency is the stack's own (the kernel may
  lack netem, and the emulator does not need it). The uplinks of a fat tree carry what all nodes under the
  switch can send, so they never contend;
- lossless (``lossless=True``, the default): no queue drops a packet, as in a lossless fabric (InfiniBand's
  credits, Ethernet's priority flow control): every FIFO is :data:`LOSSLESS_QUEUE_PACKETS` long, more than the
  nodes' TCP connections can have in flight, and TCP's minimum retransmission timeout is scaled as the bandwidth
  is (:data:`TCP_RTO_MIN_S` times ``scale``, at most :data:`TCP_RTO_MAX_S`), so that a queue's delay is not taken
  for a loss. Without it a switch port drops what its buffer cannot hold, and each loss TCP recovers by its timer
  costs a ``scale``-th of what it costs at the real bandwidth (the timer does not scale);
- a management network (a bridge in its own namespace, every node's ``mgmt0`` and a ``head``
  namespace for ``mpirun``) carries only the launcher's traffic; it is not shaped;
- every address a node sends to is resolved in advance: permanent neighbour (ARP) entries for every other
  node's EPS address, for the far end of each of its circuits and for the head. The kernel's ARP table is
  one for all namespaces, and it holds at most 1,024 resolved entries that may be collected
  (``net.ipv4.neigh.default.gc_thresh3``) summed over all of them: 32 nodes that resolve each other's
  addresses overflow it ("neighbor table overflow"), the kernel drops their connection requests, and Open MPI
  waits for connections that never open (measured: 32-rank launches that stalled before their first message,
  with hundreds of SYNs sent again). Permanent entries are not counted, and a fabric's addresses are resolved
  before a job starts anyway.

Addresses come from 198.18.0.0/15 only (RFC 2544's range for benchmarking): node ``i`` is
``198.18.0.0 + 1 + i`` on the EPS (one /16) and ``198.19.0.0 + 1 + i`` on the management network; the
head is ``198.19.255.254``. Nothing is created outside the namespaces of the run: the host's own
namespace gets no interface, route or address.

Every namespace is named ``topoplan-em<run>-<role>`` where ``<run>`` is the process id of the run; the
run holds a lock (``flock``) on ``/run/topoplan-emulate/<run>.lock`` while it lives. :func:`cleanup`
(at the start of every run and ``topoplan emulate --cleanup``) removes the namespaces, and ends the
processes left in them, of runs whose lock nobody holds any more: a concurrent run is never touched.
:class:`Cluster` removes its own on success, on error, on Ctrl-C and on SIGTERM.

pyroute2 (the ``topoplan[emulate]`` extra) is the netlink library; it is imported when a cluster is
built or cleaned, not when this module is imported.
"""

from __future__ import annotations

import errno
import fcntl
import ipaddress
import os
import re
import signal
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from topoplan.core.errors import TopoplanError
from topoplan.core.extras import require
from topoplan.core.topology import TreeTopology
from topoplan.reporting.routes_export import default_address, DEFAULT_NETWORK, read_route_file

__all__ = ["PREFIX", "LOCK_DIR", "DATA_NET", "MGMT_NET", "HEAD_ADDRESS", "MAX_HOSTS", "SWITCH_BUFFER_S",
           "HOST_QUEUE_PACKETS", "LOSSLESS_QUEUE_PACKETS", "TCP_RTO_MIN_S", "TCP_RTO_MAX_S", "QUEUES", "SHAPERS",
           "check_queueing",
           "DEFAULT_SHAPER", "DEFAULT_LOSSLESS",
           "DEFAULT_CONGESTION",
           "LinkSpec", "ClusterSpec", "data_address", "mgmt_address", "cluster_spec", "require_pyroute2",
           "check_privileges", "our_namespaces", "run_alive", "cleanup", "Cluster"]

PREFIX = "topoplan-em"
LOCK_DIR = Path("/run/topoplan-emulate")
DATA_NET = DEFAULT_NETWORK   # the EPS: the address plan of topoplan export routes
MGMT_NET = ipaddress.ip_network("198.19.0.0/16")
HEAD_ADDRESS = "198.19.255.254"
# Namespaces, processes and queues cost memory and set-up time; a laptop or CI machine emulates tens of nodes.
MAX_HOSTS = 512
# How deep a link direction's FIFO is depends on where it is. A switch port (an end inside a switch) holds its
# share of the switch chip's packet buffer, in bytes: a top-of-rack chip of the kind these clusters use (Broadcom
# Trident II+) has 16 MB for 48 x 10GE and 6 x 40GE ports, 720 Gb/s, so a port holds about 178 us of its line
# rate (222 KB at 10 Gb/s). Bytes stay bytes under the scale (rate / scale, times x scale). A node's end is the
# host's own transmit queue: Linux's default of 1000 packets (TCP Small Queues keeps a local flow's share short).
SWITCH_BUFFER_S = 16e6 / (720e9 / 8)
HOST_QUEUE_PACKETS = 1000
# A lossless fabric's queues, emulated: deeper than TCP can fill. What TCP has in flight is bounded by its send
# buffers (4 MB each at most by Linux's default tcp_wmem), and the veth links hand the queues segments of up to
# 64 KB (offloaded whole), so 16 ranks' 240 connections fill at most a few hundred thousand; a FIFO holds only
# what arrives, so its length costs nothing until it is used.
LOSSLESS_QUEUE_PACKETS = 1_000_000
# TCP's minimum retransmission timeout (Linux's TCP_RTO_MIN) and its largest one (TCP_RTO_MAX): a route's
# rto_min metric may raise the minimum, not past the largest.
TCP_RTO_MIN_S = 0.2
TCP_RTO_MAX_S = 120.0
ETH_P_IP = 0x0800   # a tc filter's protocol: IPv4
NUD_PERMANENT = 0x80   # a neighbour entry's state (linux/neighbour.h): set by hand, never collected
RTAX_RTO_MIN = 13   # a route metric's number (linux/rtnetlink.h): its bit in RTAX_LOCK locks it
QUEUES = ("fifo", "ack-priority", "fair")
SHAPERS = ("tbf", "htb")
DEFAULT_SHAPER = "tbf"
DEFAULT_LOSSLESS = True
# TCP's congestion control on the emulated network: Linux's default, CUBIC. A network namespace may not make it
# its default when the host does not allow it (this host allows reno and bbr), but a route's metric may name it:
# every route of a node to the emulated network carries it.
DEFAULT_CONGESTION = "cubic"
NETNS_DIR = Path("/var/run/netns")
_NAME = re.compile(re.escape(PREFIX) + r"(\d+)-")


def data_address(node: int) -> str:
    """The EPS address of node ``node`` (``198.18.0.0/16``): the address plan of ``topoplan export routes``.

    Examples
    --------
    >>> data_address(0), data_address(300)
    ('198.18.0.1', '198.18.1.45')
    """
    return default_address(node)


def mgmt_address(node: int) -> str:
    """The management address of node ``node`` (``198.19.0.0/16``; the head is :data:`HEAD_ADDRESS`).

    Examples
    --------
    >>> mgmt_address(0)
    '198.19.0.1'
    """
    return str(MGMT_NET.network_address + 1 + int(node))


@dataclass(frozen=True)
class LinkSpec:
    """One link: a veth pair from ``a`` (namespace, interface) to ``b``, shaped in both directions.

    ``rate_Bps`` is the scaled bandwidth of each direction (bytes per second, ``None`` for an unshaped
    link), ``delay_s`` the scaled one-way latency the topology gives (recorded; links add none, see the
    module docstring); ``a_bridge``/``b_bridge`` say whether an end joins its namespace's bridge (else it is
    a node's interface). ``cls`` is the link's kind: ``node``, ``uplink``, ``ocs`` or ``mgmt``. ``ends`` names what
    each end is on the simulator's network (a host name, a switch label or the top switch), so that a
    direction is the simulator's link of the same name (:meth:`ClusterSpec.directions`).

    Examples
    --------
    >>> LinkSpec("topoplan-em1-h0", "eth0", "topoplan-em1-s0", "h0", 3.125e6, 0.0, "node", "node0000-S0",
    ...          b_bridge=True).b_bridge
    True
    """

    a_ns: str
    a_if: str
    b_ns: str
    b_if: str
    rate_Bps: float | None
    delay_s: float
    cls: str
    name: str
    a_bridge: bool = False
    b_bridge: bool = False
    ends: tuple = ()


@dataclass
class ClusterSpec:
    """Everything :class:`Cluster` creates, computed without touching the system (:func:`cluster_spec`).

    Attributes
    ----------
    run_id : int
        The process id whose lock the namespaces belong to.
    hosts : list of str
        Host name of every node (the topology's ``host_names()``).
    host_ns : list of str
        Namespace of every node.
    bridge_ns : list of str
        Namespaces that hold one bridge ``br0`` (switches and the management network).
    head_ns : str
        Where ``mpirun`` runs.
    links : list of LinkSpec
    mtu : int
    scale : float
    queue_packets : int or None
        Every FIFO this many packets long; ``None``: switch ports and hosts as :meth:`queue_of` says.
    queues : {"fifo", "ack-priority", "fair"}
    congestion : str
        TCP's congestion control, as the metric of every route of the nodes.
    lossless : bool
        No queue drops a packet (see the module docstring).
    shaper : {"tbf", "htb"}
        What paces a link direction (see the module docstring); with fair or ack-priority queues, HTB classes
        choose the next packet, below the token bucket of ``tbf``.

    Examples
    --------
    >>> from topoplan.core.topology import TreeTopology
    >>> s = cluster_spec(TreeTopology(kind="tree", nodes_per_switch=(2,)), scale=10, run_id=3)
    >>> s.namespaces
    ['topoplan-em3-h0', 'topoplan-em3-h1', 'topoplan-em3-s0', 'topoplan-em3-top', 'topoplan-em3-mgmt', 'topoplan-em3-head']
    >>> s.ns_of("node0001"), s.ns_of("head")
    ('topoplan-em3-h1', 'topoplan-em3-head')
    """

    run_id: int
    hosts: list
    host_ns: list
    bridge_ns: list
    head_ns: str
    links: list
    mtu: int
    scale: float
    queue_packets: int | None = None
    circuits: list = field(default_factory=list)
    queues: str = "fifo"
    congestion: str = DEFAULT_CONGESTION
    lossless: bool = DEFAULT_LOSSLESS
    shaper: str = DEFAULT_SHAPER

    @property
    def namespaces(self) -> list:
        """All namespaces, in creation order."""
        return [*self.host_ns, *self.bridge_ns, self.head_ns]

    def queue_of(self, link: "LinkSpec", end: str) -> int:
        """The FIFO length, in packets, of one end (``"a"`` or ``"b"``) of a shaped link.

        Every end of a lossless cluster holds :data:`LOSSLESS_QUEUE_PACKETS`. Otherwise a switch port holds
        :data:`SWITCH_BUFFER_S` of the link's (unscaled) bandwidth, counted in packets of the MTU (the ``tbf``
        shaper's FIFO counts those packets' bytes; HTB's pfifo counts packets, so an acknowledgement takes a
        packet's place), and a node's end is a host's transmit queue of :data:`HOST_QUEUE_PACKETS`.
        ``queue_packets``, when set, overrides them.

        Examples
        --------
        >>> from topoplan.core.topology import TreeTopology
        >>> s = cluster_spec(TreeTopology(kind="tree", nodes_per_switch=(2,)), scale=400, run_id=3, lossless=False)
        >>> link = s.links[0]
        >>> s.queue_of(link, "a"), s.queue_of(link, "b")     # a host; a 10 Gb/s switch port: 222 KB
        (1000, 54)
        >>> cluster_spec(TreeTopology(kind="tree", nodes_per_switch=(2,)), scale=400, run_id=3).queue_of(link, "b")
        1000000
        """
        if self.queue_packets is not None:
            return int(self.queue_packets)
        if self.lossless:
            return LOSSLESS_QUEUE_PACKETS
        if getattr(link, f"{end}_bridge"):
            return max(round(link.rate_Bps * self.scale * SWITCH_BUFFER_S / (self.mtu + 14)), 2)
        return HOST_QUEUE_PACKETS

    @property
    def rto_min_s(self) -> float | None:
        """TCP's minimum retransmission timeout on the emulated network: on a lossless cluster
        :data:`TCP_RTO_MIN_S` scaled as the bandwidth is (at most :data:`TCP_RTO_MAX_S`); otherwise ``None``,
        the kernel's own (which does not scale).

        Examples
        --------
        >>> from topoplan.core.topology import TreeTopology
        >>> t = TreeTopology(kind="tree", nodes_per_switch=(2,))
        >>> cluster_spec(t, scale=400, run_id=3, lossless=True).rto_min_s
        80.0
        >>> cluster_spec(t, scale=1000, run_id=3, lossless=True).rto_min_s   # at most TCP's largest
        120.0
        >>> cluster_spec(t, scale=400, run_id=3, lossless=False).rto_min_s is None
        True
        """
        if not self.lossless:
            return None
        return min(TCP_RTO_MIN_S * self.scale, TCP_RTO_MAX_S)

    def route_metrics(self) -> dict:
        """The metrics of every route of a node to the emulated network (pyroute2's names): TCP's congestion
        control, and on a lossless cluster the minimum retransmission timeout (milliseconds, locked, as
        ``ip route ... rto_min`` sets it: the kernel reads it only when it is locked).

        Examples
        --------
        >>> from topoplan.core.topology import TreeTopology
        >>> t = TreeTopology(kind="tree", nodes_per_switch=(2,))
        >>> cluster_spec(t, scale=400, run_id=3, congestion="reno", lossless=False).route_metrics()
        {'RTAX_CC_ALGO': 'reno'}
        >>> cluster_spec(t, scale=400, run_id=3, congestion="reno", lossless=True).route_metrics()
        {'RTAX_CC_ALGO': 'reno', 'RTAX_LOCK': 8192, 'RTAX_RTO_MIN': 80000}
        """
        metrics = {"RTAX_CC_ALGO": self.congestion}
        if self.rto_min_s is not None:
            metrics["RTAX_LOCK"] = 1 << RTAX_RTO_MIN
            metrics["RTAX_RTO_MIN"] = round(self.rto_min_s * 1e3)
        return metrics

    def senders(self) -> list:
        """The EPS address of every node: with ``queues="fair"`` each has its own queue at every shaped end.

        Examples
        --------
        >>> from topoplan.core.topology import TreeTopology
        >>> cluster_spec(TreeTopology(kind="tree", nodes_per_switch=(2,)), scale=10, run_id=3).senders()
        ['198.18.0.1', '198.18.0.2']
        """
        return [data_address(i) for i in range(len(self.hosts))]

    def directions(self) -> list:
        """Every shaped link direction, named as the simulator names its links: ``(namespace, interface,
        name, class, src, dst, rate_Bps)``, the direction being what that interface's queue sends.

        A node link's ``a`` end (the host) sends up (``node-up``, ``node0004->S1``), its switch's end down
        (``node-down``); an uplink's switch end ``uplink-up`` (``S1->top``), the top's ``uplink-down``; a
        circuit carries ``u=>v`` from ``u`` and ``v=>u`` from ``v`` (class ``ocs``).

        Examples
        --------
        >>> from topoplan.core.topology import TreeTopology
        >>> s = cluster_spec(TreeTopology(kind="tree", nodes_per_switch=(1, 1)), scale=400, run_id=3)
        >>> [d[2:6] for d in s.directions()][:2]
        [('node0000->S0', 'node-up', 'node0000', 'S0'), ('S0->node0000', 'node-down', 'S0', 'node0000')]
        >>> [d[2] for d in s.directions()][4:]
        ['S0->top', 'top->S0', 'S1->top', 'top->S1']
        """
        out = []
        for link in self.links:
            if link.rate_Bps is None or len(link.ends) != 2:
                continue
            x, y = link.ends
            for ns, ifname, src, dst, up in ((link.a_ns, link.a_if, x, y, True), (link.b_ns, link.b_if, y, x, False)):
                if link.cls == "ocs":
                    name, cls = f"{src}=>{dst}", "ocs"
                else:
                    name, cls = f"{src}->{dst}", f"{link.cls}-{'up' if up else 'down'}"
                out.append((ns, ifname, name, cls, src, dst, float(link.rate_Bps)))
        return out

    def ns_of(self, host: str) -> str:
        """The namespace of a host name (or ``"head"``)."""
        if host == "head":
            return self.head_ns
        try:
            return self.host_ns[self.hosts.index(host)]
        except ValueError:
            raise TopoplanError(f"host {host!r} is not a node of the emulated cluster") from None


def _available_congestion() -> list:
    """The TCP congestion controls the running kernel has (empty when it does not say)."""
    try:
        return Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
    except OSError:
        return []


def _ns(run_id: int, role: str) -> str:
    return f"{PREFIX}{int(run_id)}-{role}"


def check_scale(scale) -> float:
    """The emulation's scale as a float: positive and below 1e9 (bandwidths are divided by it).

    Parameters
    ----------
    scale : float or str

    Returns
    -------
    float

    Raises
    ------
    TopoplanError
        Naming the field ``scale``.

    Examples
    --------
    >>> check_scale("400")
    400.0
    >>> check_scale(0)
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: field 'scale': must be positive and below 1e9, got 0
    """
    try:
        scale = float(scale)
    except (TypeError, ValueError):
        raise TopoplanError(f"field 'scale': expected a number, got {scale!r}") from None
    if not (scale > 0 and scale < 1e9):
        raise TopoplanError(f"field 'scale': must be positive and below 1e9, got {scale:g}")
    return scale


def check_queueing(queues: str, shaper: str, lossless: bool) -> None:
    """Refuse link queues, a shaper or their combination with lossless switches that the emulator does not build
    (:func:`cluster_spec`'s ``queues``, ``shaper`` and ``lossless``).

    Raises
    ------
    TopoplanError
        Naming the field ``queues`` or ``shaper``.

    Examples
    --------
    >>> check_queueing("fair", "tbf", True)
    >>> check_queueing("ack-priority", "tbf", True)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: field 'queues': ack-priority queues reorder TCP's segments on lossless...
    """
    if queues not in QUEUES:
        raise TopoplanError(f"field 'queues': choose one of {', '.join(QUEUES)}, got {queues!r}")
    if shaper not in SHAPERS:
        raise TopoplanError(f"field 'shaper': choose one of {', '.join(SHAPERS)}, got {shaper!r}")
    if queues == "ack-priority" and lossless:
        # measured (halo-transpose, 16 nodes, scale 400): 231-505 segments sent again, 1-5 timeouts and a run 43
        # times its prediction under either shaper, none dropped; fifo and fair queues sent 0-2 again
        raise TopoplanError("field 'queues': ack-priority queues reorder TCP's segments on lossless switches (TCP "
                            "then waits out its scaled retransmission timeout); use them with lossy switches "
                            "(emulate --lossy)")


def cluster_spec(topo, *, circuits=(), scale: float, run_id: int | None = None,
                 queue_packets: int | None = None, queues: str = "fifo",
                 congestion: str = DEFAULT_CONGESTION, lossless: bool = DEFAULT_LOSSLESS,
                 shaper: str = DEFAULT_SHAPER) -> ClusterSpec:
    """What the emulated cluster of ``topo`` consists of (namespaces, links and their shaping).

    Parameters
    ----------
    topo : TreeTopology
        ``tree``, ``fat-tree`` or ``hybrid``.
    circuits : list of (int, int, int, int), optional
        Circuits as ``(node_a, node_b, port_a, port_b)``: the nodes and their optical ports
        (:func:`topoplan.emulate.plan.read_circuit_plan`).
    scale : float
        Bandwidths are divided by it and latencies multiplied by it.
    run_id : int, optional
        Default: this process's id.
    queue_packets : int, optional
        FIFO length of every link direction, in packets; default: switch ports and hosts as
        :meth:`ClusterSpec.queue_of` says.
    queues : {"fifo", "ack-priority", "fair"}, optional
        How a link direction queues (see the module docstring).
    congestion : str, optional
        TCP's congestion control on the emulated network (:data:`DEFAULT_CONGESTION`), one the kernel has.
    lossless : bool, optional
        No queue drops a packet, and TCP's minimum retransmission timeout scales (see the module docstring).
    shaper : {"tbf", "htb"}, optional
        What paces a FIFO queue (see the module docstring).

    Returns
    -------
    ClusterSpec

    Raises
    ------
    TopoplanError
        For a topology that is not a two-level tree, more than :data:`MAX_HOSTS` nodes, a scale that
        is not positive, a circuit on a node without an OCS port, a congestion control the kernel lacks, or
        ack-priority queues on lossless switches.

    Examples
    --------
    >>> from topoplan.core.topology import TreeTopology
    >>> t = TreeTopology(kind="tree", nodes_per_switch=(2, 2))
    >>> s = cluster_spec(t, scale=100, run_id=7)
    >>> s.host_ns[0], s.bridge_ns
    ('topoplan-em7-h0', ['topoplan-em7-s0', 'topoplan-em7-s1', 'topoplan-em7-top', 'topoplan-em7-mgmt'])
    >>> [(l.name, l.rate_Bps, round(l.delay_s * 1e6)) for l in s.links if l.cls != "mgmt"][:2]
    [('node0000-S0', 12500000.0, 50), ('node0001-S0', 12500000.0, 50)]
    >>> [l.name for l in s.links if l.cls == "uplink"]
    ['S0-top', 'S1-top']
    """
    if not isinstance(topo, TreeTopology):
        raise TopoplanError(f"the emulator builds two-level trees (tree, fat-tree, hybrid), not {topo.kind}")
    scale = check_scale(scale)
    check_queueing(queues, shaper, lossless)
    available = _available_congestion()
    if available and congestion not in available:
        raise TopoplanError(f"field 'congestion': this kernel has {', '.join(available)}, not {congestion!r}")
    if topo.n_nodes > MAX_HOSTS:
        raise TopoplanError(f"topology {topo.name or topo.kind}: {topo.n_nodes} nodes; the emulator builds at most "
                            f"{MAX_HOSTS} (one namespace and several processes each)")
    run = os.getpid() if run_id is None else int(run_id)
    hosts = topo.host_names()
    host_ns = [_ns(run, f"h{i}") for i in range(topo.n_nodes)]
    sw_ns = [_ns(run, f"s{k}") for k in range(topo.n_switches)]
    top_ns, mgmt_ns, head_ns = _ns(run, "top"), _ns(run, "mgmt"), _ns(run, "head")
    labels, top = topo.switch_labels(), topo.top_label()
    mtu = int(min(max(topo.mtu_B, 1280), 65535))
    node_bw = topo.node_link_bw()
    node_sw = topo.node_switch()
    links = []
    for i, (h, k) in enumerate(zip(hosts, node_sw.tolist())):
        links.append(LinkSpec(host_ns[i], "eth0", sw_ns[k], f"h{i}", float(node_bw[i]) / scale,
                              (topo.down_latency_s + topo.switch_delay_s) * scale, "node", f"{h}-{labels[k]}",
                              b_bridge=True, ends=(h, labels[k])))
    for k in range(topo.n_switches):
        bw = float(topo.up_bw_Bps)
        if topo.kind == "fat-tree":   # full bisection: an uplink carries all its nodes can send
            bw = max(bw, float(node_bw[node_sw == k].sum()))
        links.append(LinkSpec(sw_ns[k], "up", top_ns, f"s{k}", bw / scale,
                              (topo.up_latency_s + topo.switch_delay_s) * scale, "uplink", f"{labels[k]}-{top}",
                              a_bridge=True, b_bridge=True, ends=(labels[k], top)))
    circ = []
    if circuits:
        if topo.ocs is None:
            raise TopoplanError("circuits need a hybrid topology (with an 'ocs' section)")
        ocs_nodes = set(topo.ocs.nodes)
        for u, v, pu, pv in circuits:
            for node, port in ((u, pu), (v, pv)):
                if node not in ocs_nodes or not 0 <= port < topo.ocs.ports_per_node:
                    raise TopoplanError(f"circuit {u}-{v}: node {node} has no optical port {port}")
            circ.append((int(u), int(v), int(pu), int(pv)))
            links.append(LinkSpec(host_ns[u], f"ocs{pu}", host_ns[v], f"ocs{pv}", topo.ocs.bw_Bps / scale,
                                  topo.ocs.latency_s * scale, "ocs", f"{hosts[u]}={hosts[v]}",
                                  ends=(hosts[u], hosts[v])))
    for i in range(topo.n_nodes):
        links.append(LinkSpec(host_ns[i], "mgmt0", mgmt_ns, f"h{i}", None, 0.0, "mgmt", f"{hosts[i]}-mgmt",
                              b_bridge=True))
    links.append(LinkSpec(head_ns, "mgmt0", mgmt_ns, "head", None, 0.0, "mgmt", "head-mgmt", b_bridge=True))
    for link in links:
        if link.rate_Bps is not None and link.rate_Bps < 1000:
            raise TopoplanError(f"link {link.name}: {link.rate_Bps:.3g} B/s after dividing by the scale {scale:g}; "
                                "choose a smaller --scale")
    return ClusterSpec(run_id=run, hosts=hosts, host_ns=host_ns, bridge_ns=[*sw_ns, top_ns, mgmt_ns],
                       head_ns=head_ns, links=links, mtu=mtu, scale=scale,
                       queue_packets=None if queue_packets is None else int(queue_packets),
                       circuits=circ, queues=queues, congestion=congestion, lossless=bool(lossless),
                       shaper=shaper)


# -- privileges and the library ------------------------------------------------------------------

def require_pyroute2():
    """Import pyroute2, or a one-line error naming the extra that installs it.

    Returns
    -------
    module
        ``pyroute2``.

    Raises
    ------
    TopoplanError
        ``... install topoplan[emulate] ...`` when it is missing.

    Examples
    --------
    >>> require_pyroute2().__name__        # the test set-up installs the extra
    'pyroute2'
    """
    return require("emulate")


def check_privileges() -> None:
    """Refuse, in one line, to build a cluster without the rights to create network namespaces.

    Raises
    ------
    TopoplanError
        When the process is not root (network namespaces, veth links and queues need CAP_NET_ADMIN and
        CAP_SYS_ADMIN).

    Examples
    --------
    Not as root:

    >>> check_privileges()                  # doctest: +SKIP
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: the emulator creates network namespaces: run it as root (or in a container ...)
    """
    if os.geteuid() != 0:
        raise TopoplanError("the emulator creates network namespaces: run it as root (or in a container "
                            "with CAP_NET_ADMIN and CAP_SYS_ADMIN)")


# -- leftovers ------------------------------------------------------------------------------------

def our_namespaces() -> dict:
    """The namespaces of emulator runs on this machine, by run id.

    Returns
    -------
    dict of int to list of str

    Examples
    --------
    >>> isinstance(our_namespaces(), dict)
    True
    """
    out: dict = {}
    try:
        names = sorted(os.listdir(NETNS_DIR))
    except OSError:
        return out
    for name in names:
        m = _NAME.match(name)
        if m:
            out.setdefault(int(m.group(1)), []).append(name)
    return out


def _lock_path(run_id: int) -> Path:
    return LOCK_DIR / f"{int(run_id)}.lock"


def run_alive(run_id: int) -> bool:
    """Whether the run ``run_id`` still holds its lock (or, without a lock file, its process still exists).

    Parameters
    ----------
    run_id : int

    Returns
    -------
    bool

    Examples
    --------
    >>> run_alive(os.getpid())      # no lock file, but the process exists
    True
    """
    path = _lock_path(run_id)
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        try:
            os.kill(int(run_id), 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return True
        raise
    finally:
        os.close(fd)   # closing releases a lock we took
    return False


def _kill_in(names) -> int:
    """SIGKILL every process inside the namespaces ``names``; wait until they are gone. Returns how many."""
    from pyroute2 import netns

    names = set(names)
    killed = set()
    for _ in range(50):
        pids = [p for ns, ps in netns.ns_pids().items() if ns in names for p in ps if p != os.getpid()]
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except ProcessLookupError:
                pass
        time.sleep(0.05)
    return len(killed)


def _remove(names) -> None:
    from pyroute2 import netns

    for name in names:
        try:
            netns.remove(name)
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                raise


def cleanup(*, only_dead: bool = True) -> list:
    """Remove the namespaces (and end the processes in them) of emulator runs that are no longer alive.

    Parameters
    ----------
    only_dead : bool, optional
        Keep the namespaces of live runs (default). A run is alive while its process holds its lock.

    Returns
    -------
    list of str
        The namespaces removed.

    Raises
    ------
    TopoplanError
        Without pyroute2 or root.

    Examples
    --------
    As root, after a run was killed with SIGKILL (its namespaces stayed behind):

    >>> cleanup()                          # doctest: +SKIP
    ['topoplan-em4242-h0', 'topoplan-em4242-h1', ...]
    """
    found = our_namespaces()
    stale_locks = []
    if LOCK_DIR.is_dir():
        for p in LOCK_DIR.glob("*.lock"):
            if p.stem.isdigit() and int(p.stem) not in found:
                stale_locks.append(int(p.stem))
    if not found and not stale_locks:
        return []
    require_pyroute2()
    check_privileges()
    removed = []
    for run, names in sorted(found.items()):
        if run == os.getpid() or (only_dead and run_alive(run)):
            continue
        _kill_in(names)
        _remove(names)
        removed += names
        _lock_path(run).unlink(missing_ok=True)
    for run in stale_locks:
        if not run_alive(run):
            _lock_path(run).unlink(missing_ok=True)
    return removed


# -- building --------------------------------------------------------------------------------------

def _sysctl(ns: str, values: dict) -> None:
    """Write sysctls inside namespace ``ns`` (the /proc/sys/net files of the namespace this thread is in)."""
    from pyroute2 import netns

    netns.pushns(ns)
    try:
        for key, value in values.items():
            path = "/proc/sys/" + key.replace(".", "/")
            if os.path.exists(path):
                with open(path, "w") as fh:
                    fh.write(str(value))
    finally:
        netns.popns()


HOST_SYSCTLS = {
    "net.ipv4.ip_forward": 1,                 # OCS nodes relay other nodes' messages
    "net.ipv4.conf.all.rp_filter": 0,         # a relayed packet arrives on a circuit from an EPS address
    "net.ipv4.conf.default.rp_filter": 0,
    "net.ipv4.conf.all.send_redirects": 0,    # a relay must not tell the sender to go round it
    "net.ipv4.conf.default.send_redirects": 0,
    "net.ipv4.conf.all.accept_redirects": 0,
    "net.ipv6.conf.all.disable_ipv6": 1,      # no neighbour discovery or router solicitations
    "net.ipv6.conf.default.disable_ipv6": 1,
    # The namespace's default congestion control may only be one the host allows (here reno and bbr); the
    # emulated network's own routes carry DEFAULT_CONGESTION instead (a route's metric may name any algorithm the
    # kernel has), so reno serves only what no such route covers (the launcher's network).
    "net.ipv4.tcp_congestion_control": "reno",
    # TCP's timers do not scale: a connection idle for one retransmission timeout (at least 200 ms of real time,
    # 0.5 ms of emulated time at scale 400) restarts from its initial window. A real network sees such pauses
    # between the messages of one exchange 400 times less often, so the restart is switched off.
    "net.ipv4.tcp_slow_start_after_idle": 0,
}
OTHER_SYSCTLS = {"net.ipv6.conf.all.disable_ipv6": 1, "net.ipv6.conf.default.disable_ipv6": 1}


class Cluster:
    """An emulated cluster, built on entering and removed on leaving (also on error, Ctrl-C and SIGTERM).

    Parameters
    ----------
    spec : ClusterSpec
        From :func:`cluster_spec`.

    Attributes
    ----------
    setup_s : float
        Wall time of the build.

    Notes
    -----
    On entering, leftovers of dead runs are removed first (:func:`cleanup`). While the cluster exists,
    SIGTERM and SIGHUP raise :class:`KeyboardInterrupt` in the main thread so that the clean-up runs.

    Examples
    --------
    Needs root and pyroute2:

    >>> from topoplan.core.topology import TreeTopology
    >>> spec = cluster_spec(TreeTopology(kind="tree", nodes_per_switch=(2, 2)), scale=100)
    >>> with Cluster(spec) as c:                      # doctest: +SKIP
    ...     print(len(c.spec.namespaces))
    9
    """

    def __init__(self, spec: ClusterSpec):
        self.spec = spec
        self.setup_s = 0.0
        self._lock_fd = None
        self._created: list = []
        self._handles: dict = {}
        self._saved_signals: dict = {}

    # context -------------------------------------------------------------------------------------
    def __enter__(self) -> "Cluster":
        self.up()
        return self

    def __exit__(self, *exc) -> None:
        self.down()

    def up(self) -> None:
        """Create everything of the spec (removing it again if any step fails)."""
        require_pyroute2()
        check_privileges()
        t0 = time.perf_counter()
        self._trap_signals()
        try:
            cleanup()
            self._lock()
            self._build()
        except BaseException:
            self.down()
            raise
        self.setup_s = time.perf_counter() - t0

    def down(self) -> None:
        """Remove every namespace of the run (and the processes in them) and release the lock."""
        try:
            self._close_handles()
            if self._created:
                # the processes first: a namespace with a process in it would live on without its name
                _kill_in(self._created)
                _remove(list(reversed(self._created)))
                self._created = []
            if self._lock_fd is not None:
                _lock_path(self.spec.run_id).unlink(missing_ok=True)
                os.close(self._lock_fd)
                self._lock_fd = None
        finally:
            self._restore_signals()

    # signals ----------------------------------------------------------------------------------------
    def _trap_signals(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return

        me = os.getpid()

        def stop(signum, frame):
            if os.getpid() != me:   # a child forked by the netlink library: die as the signal says
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)
                return
            raise KeyboardInterrupt

        for sig in (signal.SIGTERM, signal.SIGHUP):
            try:
                self._saved_signals[sig] = signal.signal(sig, stop)
            except (OSError, ValueError):
                pass

    def _restore_signals(self) -> None:
        for sig, old in self._saved_signals.items():
            try:
                signal.signal(sig, old)
            except (OSError, ValueError, TypeError):
                pass
        self._saved_signals = {}

    # pieces -----------------------------------------------------------------------------------------
    def _lock(self) -> None:
        if self.spec.run_id != os.getpid():
            raise TopoplanError(f"run id {self.spec.run_id}: a cluster is built by the process it is named after "
                                f"({os.getpid()})")
        try:
            LOCK_DIR.mkdir(parents=True, exist_ok=True)
            fd = os.open(_lock_path(self.spec.run_id), os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise TopoplanError(f"{LOCK_DIR}: cannot create the run's lock: {exc.strerror}") from None
        fcntl.flock(fd, fcntl.LOCK_EX)
        self._lock_fd = fd

    def handle(self, ns: str):
        """An open netlink handle (pyroute2 ``IPRoute``) in namespace ``ns``.

        The socket is opened while this thread is in the namespace, and keeps to it (pyroute2's ``NetNS``
        forks a process per namespace to do the same: ten times slower to build a cluster)."""
        from pyroute2 import IPRoute, netns

        h = self._handles.get(ns)
        if h is None:
            netns.pushns(ns)
            try:
                h = self._handles[ns] = IPRoute()
            finally:
                netns.popns()
        return h

    def apply_routes(self, files: dict) -> int:
        """Apply route files (``topoplan export routes``): ``{host: path}``, each checked before any is applied.

        Parameters
        ----------
        files : dict
            A host's file applies in that host's namespace.

        Returns
        -------
        int
            Routes installed.

        Raises
        ------
        TopoplanError
            For a file that names an unknown address or device (nothing is applied then).
        """
        s = self.spec
        addresses = [data_address(i) for i in range(len(s.hosts))]
        devices = {i: {"eth0"} for i in range(len(s.hosts))}
        for u, v, pu, pv in s.circuits:
            devices[u].add(f"ocs{pu}")
            devices[v].add(f"ocs{pv}")
        parsed = {}
        for host, path in files.items():
            i = s.hosts.index(host) if host in s.hosts else -1
            if i < 0:
                raise TopoplanError(f"{path}: routes of {host!r}, which is not a node of the emulated cluster")
            parsed[i] = read_route_file(path, addresses=addresses, devices=devices[i])
        n = 0
        try:
            for i, routes in parsed.items():
                h = self.handle(s.host_ns[i])
                index = {}
                for dest, via, dev, onlink in routes:
                    if dev not in index:
                        index[dev] = h.link_lookup(ifname=dev)[0]
                    h.route("replace", dst=f"{dest}/32", gateway=via, oif=index[dev], flags=4 if onlink else 0,
                            metrics=s.route_metrics())
                    n += 1
        finally:
            self._close_handles()
        return n

    def queue_stats(self) -> dict:
        """Packets sent and dropped by the shaped queues so far, over all links, and the bytes sent:
        ``{"sent": n, "dropped": n, "bytes": n}`` (a segment the kernel offloads whole counts as one packet).

        A drop is a full FIFO (TCP then backs off and resends): the one way the emulated network loses time
        that a flow model does not know.
        """
        s = self.spec
        sent = dropped = nbytes = 0
        shaped = {}
        for link in s.links:
            if link.rate_Bps is not None:
                shaped.setdefault(link.a_ns, set()).add(link.a_if)
                shaped.setdefault(link.b_ns, set()).add(link.b_if)
        try:
            for ns, names in shaped.items():
                h = self.handle(ns)
                index = {l["index"]: l.get_attr("IFLA_IFNAME") for l in h.get_links()}
                qdiscs = [q for q in h.get_qdiscs() if index.get(q["index"]) in names]
                leaves = {q["index"] for q in qdiscs if q.get_attr("TCA_KIND") == "pfifo"}
                for q in qdiscs:   # an interface's FIFOs: its pfifo leaves, else its token bucket's own
                    kind = q.get_attr("TCA_KIND")
                    if kind == "pfifo" or (kind == "tbf" and q["index"] not in leaves):
                        st = q.get_attr("TCA_STATS")
                        if st is not None:
                            sent += int(st["packets"])
                            dropped += int(st["drop"])
                            nbytes += int(st["bytes"])
        finally:
            self._close_handles()
        return {"sent": sent, "dropped": dropped, "bytes": nbytes}

    def _close_handles(self) -> None:
        for h in self._handles.values():
            try:
                h.close()
            except Exception:  # noqa: BLE001 -- closing a socket of a namespace being removed
                pass
        self._handles = {}

    def _build(self) -> None:
        from pyroute2 import netns

        s = self.spec
        existing = set(our_namespaces().get(s.run_id, []))
        if existing:
            raise TopoplanError(f"namespaces of run {s.run_id} exist already ({sorted(existing)[0]} ...)")
        for ns in s.namespaces:
            netns.create(ns)
            self._created.append(ns)
            _sysctl(ns, HOST_SYSCTLS if ns in s.host_ns else OTHER_SYSCTLS)
            h = self.handle(ns)
            h.link("set", index=h.link_lookup(ifname="lo")[0], state="up")
        for ns in s.bridge_ns:
            h = self.handle(ns)
            h.link("add", ifname="br0", kind="bridge")
            h.link("set", index=h.link_lookup(ifname="br0")[0], state="up", mtu=s.mtu)
        for link in s.links:
            self._link(link)
        for i, ns in enumerate(s.host_ns):
            h = self.handle(ns)
            eth0 = h.link_lookup(ifname="eth0")[0]
            h.addr("add", index=eth0, address=data_address(i), prefixlen=16)
            h.addr("add", index=h.link_lookup(ifname="mgmt0")[0], address=mgmt_address(i), prefixlen=16)
            # the EPS route the kernel made for the address, again with the congestion control as its metric
            h.route("replace", dst=str(DATA_NET), oif=eth0, prefsrc=data_address(i), scope=253, proto=2,
                    metrics=s.route_metrics())
        h = self.handle(s.head_ns)
        h.addr("add", index=h.link_lookup(ifname="mgmt0")[0], address=HEAD_ADDRESS, prefixlen=16)
        self._resolve_neighbours()
        self._close_handles()

    def _resolve_neighbours(self) -> None:
        """Permanent neighbour entries for every address a node sends to (see the module docstring): the other
        nodes' EPS addresses on ``eth0``, each circuit's far end (a route's next hop over it), and the head on
        ``mgmt0``; the head gets every node's management address."""
        s = self.spec

        def interfaces(ns):
            return {link.get_attr("IFLA_IFNAME"): (link["index"], link.get_attr("IFLA_ADDRESS"))
                    for link in self.handle(ns).get_links()}

        ifs = [interfaces(ns) for ns in s.host_ns]
        head_ifs = interfaces(s.head_ns)

        def add(h, ifindex, address, mac):
            h.neigh("add", family=socket.AF_INET, dst=address, lladdr=mac, ifindex=ifindex, state=NUD_PERMANENT)

        far = {i: [] for i in range(len(s.host_ns))}   # node -> (its circuit interface, the far node, its interface)
        for u, v, pu, pv in s.circuits:
            far[u].append((f"ocs{pu}", v, f"ocs{pv}"))
            far[v].append((f"ocs{pv}", u, f"ocs{pu}"))
        for i, ns in enumerate(s.host_ns):
            h = self.handle(ns)
            eth0 = ifs[i]["eth0"][0]
            for j in range(len(s.host_ns)):
                if j != i:
                    add(h, eth0, data_address(j), ifs[j]["eth0"][1])
            for mine, j, theirs in far[i]:
                add(h, ifs[i][mine][0], data_address(j), ifs[j][theirs][1])
            add(h, ifs[i]["mgmt0"][0], HEAD_ADDRESS, head_ifs["mgmt0"][1])
        h = self.handle(s.head_ns)
        for j in range(len(s.host_ns)):
            add(h, head_ifs["mgmt0"][0], mgmt_address(j), ifs[j]["mgmt0"][1])

    def _link(self, link: LinkSpec) -> None:
        s = self.spec
        a = self.handle(link.a_ns)
        a.link("add", ifname=link.a_if, kind="veth", peer={"ifname": link.b_if, "net_ns_fd": link.b_ns})
        b = self.handle(link.b_ns)
        for h, ifname, bridged, end in ((a, link.a_if, link.a_bridge, "a"), (b, link.b_if, link.b_bridge, "b")):
            idx = h.link_lookup(ifname=ifname)[0]
            mtu = s.mtu if link.cls != "mgmt" else 1500
            if bridged:
                h.link("set", index=idx, master=h.link_lookup(ifname="br0")[0])
            h.link("set", index=idx, mtu=mtu, state="up")
            if link.rate_Bps is not None:
                _shape(h, idx, link.rate_Bps, mtu, s.queue_of(link, end), ack_priority=s.queues == "ack-priority",
                       senders=s.senders() if s.queues == "fair" else (), shaper=s.shaper)


def tbf_bucket_B(rate_Bps: float, mtu: int) -> int:
    """The token bucket of the ``tbf`` shaper, in bytes: one packet of the MTU with its Ethernet header, and
    what the bucket's time (whole microseconds, as the netlink library gives it to the kernel) may round
    away at ``rate_Bps``, so that a full packet always fits.

    Examples
    --------
    >>> tbf_bucket_B(3.125e6, 4096), tbf_bucket_B(125e6, 4096)   # 25 Mb/s and 1 Gb/s: a 4 KiB MTU's packet
    (4180, 4424)
    """
    return int(mtu) + 14 + 64 + int(rate_Bps * 2e-6)


def _shape(h, idx: int, rate_Bps: float, mtu: int, queue_packets: int, *, ack_priority: bool = False,
           senders=(), shaper: str = DEFAULT_SHAPER) -> None:
    """A FIFO of ``queue_packets`` packets paced at ``rate_Bps``: by a token bucket of one packet
    (``shaper="tbf"``; the FIFO then counts those packets' bytes) or by HTB; with ``ack_priority``, packets under 64
    bytes (TCP's acknowledgements without data) in a class of their own that is served first; with ``senders``
    (EPS addresses), one FIFO of ``queue_packets`` per sending node, served in turn (deficit round robin,
    a packet each), and one for everything else.

    The filters' keys are pyroute2's: ``value/mask+offset``, the mask's leading zero bytes skipped, so
    ``0x0/0xff+2`` is the header's byte 2; their protocol is in host order (pyroute2 swaps it).
    """
    rate = max(int(rate_Bps), 1)
    if shaper == "tbf":
        h.tc("add", "tbf", index=idx, handle="1:", rate=rate, burst=tbf_bucket_B(rate, mtu),
             limit=min(int(queue_packets) * (mtu + 14), 2 ** 32 - 1))
        if not (senders or ack_priority):
            return
        # the classes below the token bucket (its class 1:1), which paces what they let go
        major, parent = "2", dict(parent="1:1")
    else:
        major, parent = "1", {}
    burst = max(2 * (mtu + 14), int(rate / 1000) + mtu)   # the larger of two packets and 1 ms of tokens
    common = dict(index=idx, burst=burst, cburst=burst, mtu=mtu + 14)
    h.tc("add", "htb", index=idx, handle=f"{major}:", default=0x10, **parent)
    if not (senders or ack_priority):
        h.tc("add-class", "htb", handle="1:10", parent="1:", rate=rate, ceil=rate, **common)
        h.tc("add", "pfifo", index=idx, handle="10:", parent="1:10", limit=int(queue_packets))
        return
    # Leaf classes under one class at the link's rate: (minor, guaranteed rate, options, u32 key or None for
    # what no filter takes). Each may borrow up to the whole rate; HTB lends by priority, then by deficit
    # round robin.
    if senders:   # a class per sending node (its IPv4 source address: bytes 12-15 of the header), equal shares
        share = max(rate // (len(senders) + 1), 1)
        turn = dict(prio=0, quantum=mtu + 14)   # a full packet per class and turn
        leaves = [(0x10, share, turn, None)] + [
            (0x11 + k, share, turn, f"0x{int(ipaddress.IPv4Address(a)):08x}/0xffffffff+12")
            for k, a in enumerate(senders)]
    else:   # IPv4 total length below 64 bytes (the header's bytes 2-3): a TCP segment without data, served first.
        # A small data segment stays in its flow's queue, so no segment overtakes another of its flow (TCP
        # would read the reordering as a loss).
        leaves = [(0x10, rate - rate // 20, dict(prio=1), None),
                  (0x20, max(rate // 20, 1), dict(prio=0), "0x0/0xffc0+2")]
    h.tc("add-class", "htb", handle=f"{major}:1", parent=f"{major}:", rate=rate, ceil=rate, **common)
    for minor, guaranteed, options, key in leaves:
        h.tc("add-class", "htb", handle=f"{major}:{minor:x}", parent=f"{major}:1", rate=guaranteed, ceil=rate,
             **common, **options)
        h.tc("add", "pfifo", index=idx, handle=f"{minor:x}:", parent=f"{major}:{minor:x}", limit=int(queue_packets))
        if key is not None:
            h.tc("add-filter", "u32", index=idx, handle="0:0", parent=f"{major}:0", prio=1, protocol=ETH_P_IP,
                 target=f"{major}:{minor:x}", keys=[key])
