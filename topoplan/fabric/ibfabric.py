"""InfiniBand fabrics from real dumps: ``ibnetdiscover`` topology, ``ibroute`` forwarding tables, routes.

Real clusters describe themselves with the OFED tools, not with YAML. This
module reads those dumps into an :class:`IBFabric` and answers the question
of 002 section IV-A: which switches does traffic from host A to host B cross?

Inputs
------
``ibnetdiscover`` output, either form (detected from the content):

* plain: node records (``Switch 36 "S-<guid>"  # "desc" base port 0 lid 4 lmc 0``,
  ``Ca 2 "H-<guid>"  # "desc"``) each followed by one line per connected
  port, ``[1]  "S-<guid>"[7]  # "desc" lid 4 4xDDR``;
* ports (``ibnetdiscover -p``): one line per port,
  ``CA 7 1 0x<portguid> 4x SDR - SW 4 2 0x<guid> ( 'desc' - 'desc' )``.

``ibroute`` linear forwarding tables (LFT), one dump per switch (several
concatenated dumps in one file are fine too); the switch is identified by
the ``guid`` in the ``Unicast lids [..] of switch Lid 4 guid 0x..`` header,
never by the file name.

Hosts are the channel adapters (CAs); a host's name is the first word of the
CA's node description (``node001 HCA-1`` is ``node001``), i.e. the description
minus the HCA suffix. A host with several CA ports is *one* host with several
ports, never two hosts and never one port dropped: a dual-port HCA, or a
dual-rail host whose HCAs are described ``node01 mlx5_0`` and ``node01 mlx5_1``
(what ``rdma-ndd`` writes). It is reached on its *primary port*: the connected
port with the lowest (CA GUID, port number); :attr:`IBFabric.host_ports` lists
them all. Two connected CAs with the *same whole description* (two machines
both calling themselves ``node01 mlx5_0``, or firmware-default descriptions
such as ``MT4123 ConnectX6 Mellanox Technologies`` never set per host) cannot
be told apart: that is an error naming the file, the line and the host. In
the ``-p`` form, which shows port GUIDs only, the CA ports of one description
are taken as one adapter's ports, and the same port number twice under one
description is that error. Routers are kept as nodes but are not hosts.

Link rates
----------
Rate = lanes x per-lane *data* rate (after line encoding), see
:data:`LANE_DATA_GBPS`:

======  ==============  ========  ============  ===========
speed   signal Gb/lane  encoding  data Gb/lane  4x data Gb/s
======  ==============  ========  ============  ===========
SDR     2.5             8b/10b    2             8
DDR     5               8b/10b    4             16
QDR     10              8b/10b    8             32
FDR10   10.3125         64b/66b   10            40
FDR     14.0625         64b/66b   13.636        54.55
EDR     25.78125        64b/66b   25            100
HDR     53.125 (PAM4)   64b/66b   50            200
NDR     106.25 (PAM4)   64b/66b   100           400
XDR     212.5 (PAM4)    64b/66b   200           800
======  ==============  ========  ============  ===========

Widths are 1x, 2x, 4x, 8x and 12x lanes. A link whose width or speed the
dump does not give (``??``/``???``) keeps its place in the graph and gets the
slowest known rate of the fabric, with a warning.

Routes
------
With LFTs, a route is followed switch by switch exactly as the hardware does:
from the source's primary port to its switch, then out of the port that
switch's LFT gives for the destination's base LID, and so on (``source:
"lft"``). Without LFTs, or when a switch on the way has no usable table
(missing from the directory, or dropped as stale), the route is a shortest
path in switch hops (ties broken towards the lowest GUID, the fastest of
parallel links) and says so (``source: "shortest-path"`` plus a note).

When the tables themselves do not deliver -- the walk comes back to a switch
it has crossed (a routing *loop*), or it *dead-ends* (no entry for the LID, an
unconnected output port, delivery to another node, a destination without a
LID) -- the hardware drops those packets, so there is no route and
:func:`route` raises :class:`~topoplan.core.errors.TopoplanError` naming the
switch and the LID; it never passes a shortest path off as the fabric's
route. :func:`lft_health` counts such host pairs over the whole fabric.

Tolerance
---------
Lines the readers do not know are counted and reported
(:attr:`ParseReport.unknown_lines`), never fatal. A line that starts like a
known record but does not parse, a port that points at a node with no record,
or an ``ibroute`` table without its closing ``N lids dumped`` line is a
truncated or corrupt dump: :class:`~topoplan.core.errors.TopoplanError` naming
file and line.

Examples
--------
>>> fab = load_fabric("tests/data/ib/tree2/ibnetdiscover.txt", "tests/data/ib/tree2/lft")
>>> route(fab, "node001", "node009").line()
'node001 0x0000000000200001 0x0000000000200000 0x0000000000200003 node009'
"""

from __future__ import annotations

import csv
import io
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from topoplan.core.errors import TopoplanError
from topoplan.core.io import atomic_write, find_long_number, is_stdout, read_text
from topoplan.core.topology import GraphTopology
from topoplan.core.topology_io import expand_hostlist

__all__ = ["LANE_DATA_GBPS", "KINDS", "link_rate_Bps", "IBPort", "IBNode", "IBLink", "LFT", "ParseReport",
           "Route", "IBFabric", "parse_ibnetdiscover", "read_ibnetdiscover", "parse_ibroute", "read_lft_dir",
           "attach_lfts", "load_fabric", "route", "LFTHealth", "lft_health", "parse_query", "delay_matrix", "read_hosts", "check_hosts",
           "write_delay_matrix", "switch_names", "to_topology", "Trace", "parse_ibtracert", "compare_traces"]

#: Data rate per lane in Gb/s after line encoding (8b/10b up to QDR, 64b/66b from FDR10 on).
LANE_DATA_GBPS: dict[str, float] = {
    "SDR": 2.0, "DDR": 4.0, "QDR": 8.0, "FDR10": 10.0, "FDR": 14.0625 * 64 / 66,
    "EDR": 25.0, "HDR": 50.0, "NDR": 100.0, "XDR": 200.0,
}
#: Lanes of each link width.
WIDTH_LANES: dict[str, int] = {"1x": 1, "2x": 2, "4x": 4, "8x": 8, "12x": 12}

KINDS = ("hops", "speed")
_MAX_EXAMPLES = 5


def link_rate_Bps(width: str | None, speed: str | None) -> float | None:
    """Data rate of a link in bytes per second, or None when width or speed is unknown.

    Parameters
    ----------
    width : ``"1x"``, ``"2x"``, ``"4x"``, ``"8x"`` or ``"12x"``.
    speed : ``"SDR"`` ... ``"XDR"`` (see :data:`LANE_DATA_GBPS`).

    Returns
    -------
    float bytes/s, or None.

    Examples
    --------
    >>> link_rate_Bps("4x", "SDR") * 8 / 1e9, link_rate_Bps("4x", "DDR") * 8 / 1e9
    (8.0, 16.0)
    """
    lanes = WIDTH_LANES.get(width or "")
    gbps = LANE_DATA_GBPS.get((speed or "").upper())
    if lanes is None or gbps is None:
        return None
    return lanes * gbps * 1e9 / 8.0


# -- the model ----------------------------------------------------------------

@dataclass
class IBPort:
    """One connected port: where it goes and at what rate (``rate_Bps`` None when unknown).

    Parameters
    ----------
    port : int
    remote : str
        Key of the node at the other end.
    remote_port : int
    width, speed : str or None
        As the dump gives them (``4x``, ``DDR``).
    rate_Bps : float or None
        Data rate (:func:`link_rate_Bps`).
    lid : int, optional
        Base LID (CA and router ports; switches have one LID on port 0).
    lmc : int, optional
    port_guid : str, optional
    line : int, optional
        Line of the dump.
    remote_kind : str, optional
        What the dump says the remote node is.

    Examples
    --------
    >>> fab = load_fabric("tests/data/ib/tree2/ibnetdiscover.txt", "tests/data/ib/tree2/lft")
    >>> port = fab.nodes[fab.hosts["node001"][0]].ports[1]
    >>> port.width, port.speed, port.rate_Bps
    ('4x', 'DDR', 2000000000.0)
    """

    port: int
    remote: str                 # key of the remote node
    remote_port: int
    width: str | None
    speed: str | None
    rate_Bps: float | None
    lid: int | None = None      # base LID (CA and router ports; switches have one LID on port 0)
    lmc: int = 0
    port_guid: str | None = None
    line: int = 0
    remote_kind: str = ""       # what the dump says the remote node is (checked against its record)


@dataclass
class IBNode:
    """A switch, channel adapter (``ca``) or router, keyed by its GUID.

    In the plain form the key is the node GUID; the ports form only shows port
    GUIDs, so there the key is the port GUID (equal to the node GUID on
    switches, one "node" per CA port).

    Parameters
    ----------
    guid : str
    kind : {"switch", "ca", "router"}
    desc : str
        The node description.
    n_ports : int, optional
    lid : int, optional
        Switch: LID of management port 0.
    lmc : int, optional
    port_guid : str, optional
        Switch: its port GUID (what ibtracert prints).
    ports : dict of int to IBPort, optional
    line : int, optional

    Examples
    --------
    >>> fab = load_fabric("tests/data/ib/tree2/ibnetdiscover.txt", "tests/data/ib/tree2/lft")
    >>> node = fab.nodes[fab.hosts["node001"][0]]
    >>> node.kind, node.desc, sorted(node.ports)
    ('ca', 'node001 HCA-1', [1])
    """

    guid: str
    kind: str                   # "switch" | "ca" | "router"
    desc: str
    n_ports: int | None = None
    lid: int | None = None      # switch: LID of management port 0
    lmc: int = 0
    port_guid: str | None = None  # switch: its port GUID (what ibtracert prints)
    ports: dict[int, IBPort] = field(default_factory=dict)
    line: int = 0


@dataclass(frozen=True)
class IBLink:
    """A physical link, once (``a`` < ``b`` by key then port).

    Parameters
    ----------
    a, b : str
        Node keys.
    a_port, b_port : int
    width, speed : str or None
    rate_Bps : float or None

    Examples
    --------
    >>> fab = load_fabric("tests/data/ib/tree2/ibnetdiscover.txt", "tests/data/ib/tree2/lft")
    >>> fab.links[0]
    IBLink(a='0x0000000000200000', a_port=1, b='0x0000000000200001', b_port=13, width='4x', speed='DDR', rate_Bps=2000000000.0)
    """

    a: str
    a_port: int
    b: str
    b_port: int
    width: str | None
    speed: str | None
    rate_Bps: float | None


@dataclass
class LFT:
    """One switch's linear forwarding table from an ``ibroute`` dump.

    Parameters
    ----------
    switch_guid : str
    switch_lid : int or None
    out_port : dict of int to int
        Destination LID -> output port.
    dest_guid : dict of int to str
        LID -> port GUID named in the Destination Info column.
    path : str
    line : int

    Examples
    --------
    >>> fab = load_fabric("tests/data/ib/tree2/ibnetdiscover.txt", "tests/data/ib/tree2/lft")
    >>> lft = fab.lfts["0x0000000000200001"]
    >>> lft.switch_lid, sorted(lft.out_port.items())[:3]
    (3, [(1, 13), (2, 1), (3, 0)])
    """

    switch_guid: str
    switch_lid: int | None
    out_port: dict[int, int]
    dest_guid: dict[int, str]   # LID -> port GUID named in the Destination Info column
    path: str
    line: int


@dataclass
class ParseReport:
    """What a reader skipped: unknown lines (count and first examples) and warnings.

    Parameters
    ----------
    path : str
    unknown_lines : int, optional
    unknown_examples : list of (int, str), optional
    warnings : list of str, optional

    Examples
    --------
    >>> report = ParseReport("x.txt")
    >>> report.unknown(3, "garbage")
    >>> report.messages()
    ["x.txt: 1 unknown line(s) ignored (line 3: 'garbage')"]
    """

    path: str
    unknown_lines: int = 0
    unknown_examples: list[tuple[int, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def unknown(self, lineno: int, text: str) -> None:
        self.unknown_lines += 1
        if len(self.unknown_examples) < _MAX_EXAMPLES:
            self.unknown_examples.append((lineno, text.rstrip()[:120]))

    def messages(self) -> list[str]:
        """One line per finding, for ``warning: ...`` output."""
        out = []
        if self.unknown_lines:
            first = ", ".join(f"line {n}: {t!r}" for n, t in self.unknown_examples[:2])
            out.append(f"{self.path}: {self.unknown_lines} unknown line(s) ignored ({first})")
        out.extend(self.warnings)
        return out


@dataclass(frozen=True)
class Route:
    """The route from host ``src`` to host ``dst``.

    ``switches`` are switch GUIDs in order; ``rates_Bps`` the rate of every
    link crossed, host links included; ``source`` is ``"lft"`` or
    ``"shortest-path"``; ``note`` says why a route fell back to shortest paths.

    Parameters
    ----------
    src, dst : str
    switches : tuple of str
    rates_Bps : tuple of float
    source : str
    note : str, optional

    Examples
    --------
    >>> fab = load_fabric("tests/data/ib/tree2/ibnetdiscover.txt", "tests/data/ib/tree2/lft")
    >>> r = route(fab, "node001", "node004")
    >>> r.hops, r.source, r.min_rate_Bps * 8 / 1e9
    (3, 'lft', 8.0)
    """

    src: str
    dst: str
    switches: tuple[str, ...]
    rates_Bps: tuple[float, ...]
    source: str
    note: str = ""

    @property
    def hops(self) -> int:
        """Switches crossed (0 to itself, 1 under one switch)."""
        return len(self.switches)

    @property
    def min_rate_Bps(self) -> float:
        return min(self.rates_Bps) if self.rates_Bps else float("inf")

    def line(self) -> str:
        """The 002 answer: ``hosta guid guid ... hostb``."""
        return " ".join((self.src, *self.switches, self.dst))

    def to_dict(self) -> dict:
        return {"src": self.src, "dst": self.dst, "switches": list(self.switches), "source": self.source}


@dataclass
class IBFabric:
    """A discovered fabric with optional forwarding tables. Build it with :func:`load_fabric`.

    Parameters
    ----------
    nodes : dict of str to IBNode
    links : list of IBLink
    hosts : dict of str to (str, int)
        Host -> primary (CA key, port).
    host_ports : dict of str to list of (str, int)
    lid_owner : dict of int to (str, int)
        Base LID -> (node key, port); switches use port 0.
    path : str
    form : {"plain", "ports"}
        The dump's form.
    reports : list of ParseReport, optional
    lfts : dict of str to LFT, optional
        Forwarding tables by switch GUID.
    lft_dir : str, optional
    lft_conflicts : list of str, optional
        Tables dropped as stale.

    Examples
    --------
    >>> fab = load_fabric("tests/data/ib/tree2/ibnetdiscover.txt", "tests/data/ib/tree2/lft")
    >>> fab.routing, len(fab.switches), fab.host_names()[:3], fab.form
    ('lft', 4, ['node001', 'node002', 'node003'], 'plain')
    >>> fab.switch_key("0x200001"), fab.messages()
    ('0x0000000000200001', [])
    """

    nodes: dict[str, IBNode]
    links: list[IBLink]
    hosts: dict[str, tuple[str, int]]      # host -> primary (CA key, port)
    host_ports: dict[str, list[tuple[str, int]]]
    lid_owner: dict[int, tuple[str, int]]  # base LID -> (node key, port); switches use port 0
    path: str
    form: str                              # "plain" | "ports"
    reports: list[ParseReport] = field(default_factory=list)
    lfts: dict[str, LFT] = field(default_factory=dict)
    lft_dir: str | None = None
    lft_conflicts: list[str] = field(default_factory=list)
    _switch_by_guid: dict[str, str] = field(default_factory=dict, repr=False)
    _adj: dict[str, list[tuple[str, float]]] | None = field(default=None, repr=False)
    _dist: dict[str, dict[str, int]] = field(default_factory=dict, repr=False)
    _health: "LFTHealth | None" = field(default=None, repr=False)

    @property
    def switches(self) -> list[str]:
        """Switch keys, sorted."""
        return sorted(k for k, n in self.nodes.items() if n.kind == "switch")

    @property
    def routing(self) -> str:
        """``"lft"`` when forwarding tables are loaded, else ``"shortest-path"``."""
        return "lft" if self.lfts else "shortest-path"

    def host_names(self) -> list[str]:
        """Host names in natural order (node2 before node10)."""
        return sorted(self.hosts, key=natural_key)

    def switch_key(self, guid: str) -> str | None:
        """The switch a node or port GUID names (ibroute gives node GUIDs, ibtracert port GUIDs)."""
        return self._switch_by_guid.get(norm_guid(guid))

    def messages(self) -> list[str]:
        """Every warning of every reader, one line each."""
        out = [m for r in self.reports for m in r.messages()]
        return out + self.lft_conflicts


def natural_key(name: str):
    """Sort key putting ``node2`` before ``node10``."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def norm_guid(text: str) -> str:
    """``0x200002``, ``200002`` or ``0x0000000000200002`` -> ``0x0000000000200002``."""
    t = text.strip().lower()
    if t.startswith("0x"):
        t = t[2:]
    if not t or len(t) > 16 or not re.fullmatch(r"[0-9a-f]+", t):
        raise ValueError(f"bad GUID {text!r}")
    return "0x" + t.zfill(16)


def host_name(desc: str, guid: str) -> str:
    """A CA's host: the first word of its description, or ``H-<guid>`` when it has none."""
    words = desc.split()
    return words[0] if words else "H-" + guid[2:]


# -- ibnetdiscover ------------------------------------------------------------

_HEX = r"[0-9a-fA-F]+"
_RE_ID = re.compile(r"^(vendid|devid|sysimgguid|switchguid|caguid|rtguid)=\s*(0x" + _HEX + r")(?:\((" + _HEX + r")\))?")
_RE_NODE = re.compile(r"^(Switch|Ca|Rt)\s+(\d+)\s+\"([SHR])-(" + _HEX + r")\"\s*(?:#\s*\"(.*)\"(.*))?$")
_RE_NODE_START = re.compile(r"^(Switch|Ca|Rt)\s")
_RE_SWINFO = re.compile(r"(?:enhanced|base)\s+port\s+0\s+lid\s+(\d+)\s+lmc\s+(\d+)")
_EXT = r"(?:\[ext \d+\])?"
_RE_SWPORT = re.compile(
    r"^\[(\d+)\]" + _EXT + r"\s+\"([SHR])-(" + _HEX + r")\"\[(\d+)\]" + _EXT + r"(?:\((" + _HEX + r")\))?"
    r"\s*#\s*\"(.*)\"\s+lid\s+(\d+)\s+(\S+)(.*)$")
_RE_CAPORT = re.compile(
    r"^\[(\d+)\]\((" + _HEX + r")\)\s*\"([SHR])-(" + _HEX + r")\"\[(\d+)\]" + _EXT + r"(?:\s*\((" + _HEX + r")\))?"
    r"\s*#\s*lid\s+(\d+)\s+lmc\s+(\d+)\s+\"(.*)\"\s+lid\s+(\d+)\s+(\S+)(.*)$")
_RE_RATE = re.compile(r"^(\d+x|\?\?)(.*)$")
_RE_PORTS_LINE = re.compile(
    r"^(SW|CA|RT)\s+(\d+)\s+(\d+)\s+(0x" + _HEX + r")\s+(\S+)\s+(\S+)\s*"
    r"(?:-\s+(SW|CA|RT)\s+(\d+)\s+(\d+)\s+(0x" + _HEX + r")\s+\(\s*'(.*)'\s+-\s+'(.*)'\s*\)|'(.*)')\s*$")
_RE_PORTS_START = re.compile(r"^(SW|CA|RT)\s+\d+\s+\d+\s+0x")
_KIND = {"Switch": "switch", "Ca": "ca", "Rt": "router", "SW": "switch", "CA": "ca", "RT": "router",
         "S": "switch", "H": "ca", "R": "router"}
_KNOWN_PLAIN = re.compile(r"^(Chassis \d+|Non-Chassis Nodes|Hostname:)")


def _split_rate(token: str) -> tuple[str | None, str | None]:
    """``4xQDR`` -> (``4x``, ``QDR``); ``?????`` -> (None, None)."""
    m = _RE_RATE.match(token)
    if not m:
        return None, None
    width, speed = m.group(1), m.group(2)
    return (width if width in WIDTH_LANES else None), (speed if speed.upper() in LANE_DATA_GBPS else None)


def _guid(text: str, path, lineno) -> str:
    try:
        return norm_guid(text)
    except ValueError as exc:
        raise TopoplanError(f"{path}:{lineno}: {exc}") from None


def parse_ibnetdiscover(text: str, path: str = "<ibnetdiscover>") -> IBFabric:
    """Parse ``ibnetdiscover`` output (plain or ``-p`` ports form, detected) into an :class:`IBFabric`.

    Parameters
    ----------
    text : the dump.
    path : file name used in messages.

    Returns
    -------
    IBFabric without forwarding tables (see :func:`attach_lfts`).

    Raises
    ------
    TopoplanError
        Truncated or corrupt dump, naming the line.

    Examples
    --------
    >>> fab = parse_ibnetdiscover(open("tests/data/ib/tree2/ibnetdiscover.txt").read())
    >>> fab.host_names()[:2]
    ['node001', 'node002']
    """
    lines = text.splitlines()
    for raw in lines:
        s = raw.strip()
        if not s or s.startswith("#"):
            continue
        if _RE_PORTS_START.match(s):
            return _build(*_parse_ports_form(lines, path, text), path, "ports")
        if s.startswith(("Switch", "Ca", "Rt", "[", "vendid", "switchguid", "caguid")):
            break
    return _build(*_parse_plain(lines, path, text), path, "plain")


def _last_line_cut(text: str, lineno: int, n_lines: int) -> bool:
    """Is ``lineno`` the final line of a text that does not end in a newline (a cut-off write)?"""
    return lineno == n_lines and not text.endswith(("\n", "\r"))


def _parse_plain(lines, path, text):
    report = ParseReport(str(path))
    nodes: dict[str, IBNode] = {}
    cur: IBNode | None = None
    pending_portguid: str | None = None
    for lineno, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line:
            cur = None  # a blank line ends a node record
            continue
        if line.startswith("#"):
            continue
        m = _RE_ID.match(line)
        if m:
            if m.group(1) == "switchguid" and m.group(3):
                pending_portguid = _guid(m.group(3), path, lineno)
            continue
        if _RE_NODE_START.match(line):
            m = _RE_NODE.match(line)
            if not m:
                raise TopoplanError(f"{path}:{lineno}: malformed node record {line[:80]!r} (truncated or corrupt dump)")
            kind = _KIND[m.group(1)]
            if _KIND[m.group(3)] != kind:
                raise TopoplanError(f"{path}:{lineno}: {m.group(1)} record with a {m.group(3)}- node id")
            key = _guid(m.group(4), path, lineno)
            if key in nodes:
                raise TopoplanError(f"{path}:{lineno}: node {key} described twice (first at line {nodes[key].line})")
            cur = IBNode(guid=key, kind=kind, desc=m.group(5) or "", n_ports=int(m.group(2)), line=lineno)
            if kind == "switch":
                info = _RE_SWINFO.search(m.group(6) or "")
                if info:
                    cur.lid, cur.lmc = _lid(info.group(1), info.group(2), path, lineno)
                cur.port_guid = pending_portguid or key
            pending_portguid = None
            nodes[key] = cur
            continue
        if line.startswith("["):
            if cur is None:
                raise TopoplanError(f"{path}:{lineno}: port line outside a node record (truncated or corrupt dump)")
            m = (_RE_SWPORT if cur.kind == "switch" else _RE_CAPORT).match(line)
            if not m:
                raise TopoplanError(f"{path}:{lineno}: malformed port line {line[:80]!r} (truncated or corrupt dump)")
            if cur.kind == "switch":
                port, rkind, rguid, rport = int(m.group(1)), m.group(2), m.group(3), int(m.group(4))
                token, lid, lmc, pguid = m.group(8), None, 0, None
            else:
                port, pguid, rkind, rguid, rport = (int(m.group(1)), _guid(m.group(2), path, lineno), m.group(3),
                                                    m.group(4), int(m.group(5)))
                token, (lid, lmc) = m.group(11), _lid(m.group(7), m.group(8), path, lineno)
            width, speed = _split_rate(token)
            if (width is None or speed is None) and _last_line_cut(text, lineno, len(lines)):
                raise TopoplanError(f"{path}:{lineno}: last line cut off at {token!r} (truncated dump)")
            if port in cur.ports:
                raise TopoplanError(f"{path}:{lineno}: port {port} of {cur.guid} listed twice")
            cur.ports[port] = IBPort(port=port, remote=_guid(rguid, path, lineno), remote_port=rport,
                                     width=width, speed=speed, rate_Bps=link_rate_Bps(width, speed),
                                     lid=lid, lmc=lmc, port_guid=pguid, line=lineno, remote_kind=_KIND[rkind])
            continue
        if _KNOWN_PLAIN.match(line):
            continue
        report.unknown(lineno, raw)
    return nodes, report


MAX_UNICAST_LID = 0xBFFF   # LIDs above are multicast (0xC000-0xFFFE) or the permissive LID
MAX_LMC = 7


def _lid(lid: str, lmc: str, path, lineno: int) -> tuple[int, int]:
    """A port's LID and LMC as integers; out of InfiniBand's unicast range is a corrupt dump (0: unassigned)."""
    v, c = int(lid), int(lmc)
    if v > MAX_UNICAST_LID:
        raise TopoplanError(f"{path}:{lineno}: field 'lid': {v} ({v:#x}) is not a unicast LID (at most "
                            f"{MAX_UNICAST_LID:#x}; truncated or corrupt dump)")
    if c > MAX_LMC:
        raise TopoplanError(f"{path}:{lineno}: field 'lmc': {c} is over the maximum of {MAX_LMC} "
                            f"(truncated or corrupt dump)")
    return v, c


def _parse_ports_form(lines, path, text):
    report = ParseReport(str(path))
    nodes: dict[str, IBNode] = {}
    for lineno, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if not _RE_PORTS_START.match(line):
            report.unknown(lineno, raw)
            continue
        m = _RE_PORTS_LINE.match(line)
        if not m:
            raise TopoplanError(f"{path}:{lineno}: malformed port line {line[:80]!r} (truncated or corrupt dump)")
        kind, port, key = _KIND[m.group(1)], int(m.group(3)), _guid(m.group(4), path, lineno)
        lid, _ = _lid(m.group(2), "0", path, lineno)
        width = m.group(5) if m.group(5) in WIDTH_LANES else None
        speed = m.group(6) if m.group(6).upper() in LANE_DATA_GBPS else None
        desc = m.group(11) if m.group(7) else m.group(13)
        node = nodes.get(key)
        if node is None:
            node = nodes[key] = IBNode(guid=key, kind=kind, desc=desc, line=lineno,
                                       port_guid=key if kind == "switch" else None)
        elif node.kind != kind:
            raise TopoplanError(f"{path}:{lineno}: {key} is a {node.kind} at line {node.line} but {kind} here")
        if kind == "switch":
            node.lid = lid
        if not m.group(7):
            continue  # an unconnected port
        if (width is None or speed is None) and _last_line_cut(text, lineno, len(lines)):
            raise TopoplanError(f"{path}:{lineno}: last line cut off (truncated dump)")
        if port in node.ports:
            raise TopoplanError(f"{path}:{lineno}: port {port} of {key} listed twice")
        node.ports[port] = IBPort(port=port, remote=_guid(m.group(10), path, lineno), remote_port=int(m.group(9)),
                                  width=width, speed=speed, rate_Bps=link_rate_Bps(width, speed),
                                  lid=None if kind == "switch" else lid, port_guid=key if kind != "switch" else None,
                                  line=lineno, remote_kind=_KIND[m.group(7)])
    return nodes, report


def _build(nodes: dict[str, IBNode], report: ParseReport, path, form: str) -> IBFabric:
    """Check both ends of every link, make the link list, hosts and the LID map."""
    if not nodes:
        raise TopoplanError(f"{path}: no switch or channel adapter records (not an ibnetdiscover dump?)")
    links: list[IBLink] = []
    unknown_rate: list[IBLink] = []
    for key, node in nodes.items():
        for p, port in sorted(node.ports.items()):
            other = nodes.get(port.remote)
            if other is None:
                raise TopoplanError(f"{path}:{port.line}: port {p} of {key} links to {port.remote}, which has no "
                                    f"record (truncated or corrupt dump)")
            if port.remote_kind and other.kind != port.remote_kind:
                raise TopoplanError(f"{path}:{port.line}: {port.remote} is a {other.kind} (line {other.line}) "
                                    f"but this port names it as a {port.remote_kind}")
            back = other.ports.get(port.remote_port)
            if back is None or back.remote != key or back.remote_port != p:
                seen = f"line {back.line} links it elsewhere" if back else "its record does not list that port"
                raise TopoplanError(f"{path}:{port.line}: port {p} of {key} links to port {port.remote_port} of "
                                    f"{port.remote}, but {seen} (truncated or corrupt dump)")
            if (key, p) > (port.remote, port.remote_port):
                continue  # each link once, from its lower end
            width = port.width or back.width
            speed = port.speed or back.speed
            rate = port.rate_Bps or back.rate_Bps
            if port.rate_Bps and back.rate_Bps and port.rate_Bps != back.rate_Bps:
                rate = min(port.rate_Bps, back.rate_Bps)
                report.warnings.append(f"{path}:{port.line}: the two ends of the link disagree on its rate "
                                       f"(line {back.line}); using the slower")
            link = IBLink(key, p, port.remote, port.remote_port, width, speed, rate)
            links.append(link)
            if rate is None:
                unknown_rate.append(link)
    known = [l.rate_Bps for l in links if l.rate_Bps]
    if unknown_rate:
        floor = min(known) if known else link_rate_Bps("1x", "SDR")
        report.warnings.append(f"{path}: {len(unknown_rate)} link(s) without a known width/speed "
                               f"(first: port {unknown_rate[0].a_port} of {unknown_rate[0].a}); "
                               f"taken at the slowest known rate {floor * 8 / 1e9:g} Gb/s")
        links = [l if l.rate_Bps else IBLink(l.a, l.a_port, l.b, l.b_port, l.width, l.speed, floor) for l in links]
    # Both ends of a link carry its resolved rate (routes read rates from ports).
    for l in links:
        nodes[l.a].ports[l.a_port].rate_Bps = l.rate_Bps
        nodes[l.b].ports[l.b_port].rate_Bps = l.rate_Bps

    host_ports: dict[str, list[tuple[str, int]]] = {}
    lid_owner: dict[int, tuple[str, int]] = {}
    by_guid: dict[str, str] = {}
    _check_ca_descriptions(nodes, path, form)
    for key, node in nodes.items():
        if node.kind == "switch":
            by_guid[key] = key
            if node.port_guid:
                by_guid.setdefault(node.port_guid, key)
            if node.lid:
                lid_owner[node.lid] = (key, 0)
            continue
        for p, port in node.ports.items():
            if port.lid:
                lid_owner[port.lid] = (key, p)
        if node.kind == "ca" and node.ports:
            host_ports.setdefault(host_name(node.desc, key), []).extend((key, p) for p in node.ports)
    if not host_ports:
        raise TopoplanError(f"{path}: no connected channel adapters (hosts) in the dump")
    for ports in host_ports.values():
        ports.sort()
    hosts = {h: ports[0] for h, ports in host_ports.items()}
    return IBFabric(nodes=nodes, links=links, hosts=hosts, host_ports=host_ports, lid_owner=lid_owner,
                    path=str(path), form=form, reports=[report], _switch_by_guid=by_guid)


def _check_ca_descriptions(nodes: dict[str, IBNode], path, form: str) -> None:
    """Two connected CAs that one description cannot tell apart: an error naming the line and the host.

    A host is the first word of the description, so ``node01 mlx5_0`` and ``node01 mlx5_1`` are one
    dual-rail host with two ports (fine); two CAs both described ``node01 mlx5_0`` are two machines
    (or unset firmware defaults) that would silently merge into one host. The ``-p`` form keys its
    "nodes" by port GUID, one per CA port, so there the same (description, port number) twice is it.
    """
    seen: dict[tuple, IBNode] = {}
    for key, node in sorted(nodes.items(), key=lambda kv: kv[1].line):
        if node.kind != "ca" or not node.ports:
            continue
        desc = " ".join(node.desc.split())
        if not desc:
            continue  # named H-<guid>: unique
        ident = (desc,) if form == "plain" else (desc, *sorted(node.ports))
        first = seen.setdefault(ident, node)
        if first is node:
            continue
        host = host_name(node.desc, key)
        if form == "plain":
            this, that = f"channel adapter {key}", f"channel adapter {first.guid}"
        else:
            p = min(node.ports)
            this, that = f"port {p} (port GUID {key})", f"port {p} (port GUID {first.guid})"
        raise TopoplanError(
            f"{path}:{node.line}: host {host!r}: {this} has the same description {desc!r} as {that} at line "
            f"{first.line}; two machines with one name cannot be told apart (give every HCA its own node "
            f"description, e.g. 'node01 mlx5_0' and 'node01 mlx5_1' for a dual-rail host)")


def read_ibnetdiscover(path) -> IBFabric:
    """Read an ``ibnetdiscover`` dump file (plain or ``-p``); see :func:`parse_ibnetdiscover`.

    Parameters
    ----------
    path : str or path

    Returns
    -------
    IBFabric
        Without forwarding tables (routes by shortest path).

    Raises
    ------
    TopoplanError
        For a missing, unreadable, truncated or corrupt dump.

    Examples
    --------
    >>> fab = read_ibnetdiscover("tests/data/ib/tree2/ibnetdiscover.txt")
    >>> fab.routing, len(fab.hosts)
    ('shortest-path', 9)
    """
    return parse_ibnetdiscover(_read_text(path, "ibnetdiscover dump"), str(path))


def _read_text(path, what: str) -> str:
    # real dumps may carry non-UTF-8 node descriptions: keep them readable rather than fail
    text = read_text(path, what, lenient=True)
    long = find_long_number(text)   # the parsers int() their fields: past 4,300 digits a ValueError
    if long is not None:
        raise TopoplanError(f"{path}:{long[0]}: a number of {long[1]:,} digits (at most "
                            f"{sys.get_int_max_str_digits():,} are read)")
    return text


# -- ibroute --------------------------------------------------------------------

_RE_LFT_HEAD = re.compile(r"^Unicast lids \[0x(" + _HEX + r")-0x(" + _HEX + r")\] of switch (.*?)\s*guid (0x" + _HEX +
                          r")\s*(?:\((.*)\))?:?\s*$")
_RE_LFT_ROW = re.compile(r"^0x(" + _HEX + r")\s+(\d+)(?:\s+:?\s*(.*))?$")
_RE_LFT_END = re.compile(r"^(\d+)\s+(valid\s+)?lids dumped\s*$")
_RE_MC_HEAD = re.compile(r"^Multicast mlids \[")
_RE_MC_END = re.compile(r"^\d+\s+(valid\s+)?mlids dumped\s*$")
_RE_DEST_GUID = re.compile(r"portguid (0x" + _HEX + r")")
_RE_LFT_COLS = re.compile(r"^(Lid\s+Out\s+Destination|Port\s+Info|MLid\b|Ports:)")


def parse_ibroute(text: str, path: str = "<ibroute>") -> tuple[list[LFT], ParseReport]:
    """Parse ``ibroute`` output: one or more ``Unicast lids`` tables.

    Parameters
    ----------
    text : the dump (``ibroute <lid>``, ``ibroute -a``, ``-n`` or several concatenated).
    path : file name used in messages.

    Returns
    -------
    (tables, report). Multicast sections are skipped; unknown lines counted.

    Raises
    ------
    TopoplanError
        A table without its ``N lids dumped`` line (truncated), a malformed
        row, a row outside any table, a LID twice.

    Examples
    --------
    >>> tabs, _ = parse_ibroute(open("tests/data/ib/tree2/lft/ibroute-top.txt").read())
    >>> tabs[0].out_port[2]
    1
    """
    report = ParseReport(str(path))
    tables: list[LFT] = []
    cur: LFT | None = None
    lo = hi = rows = 0
    in_mc = False
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if in_mc:
            in_mc = not _RE_MC_END.match(line)
            continue
        m = _RE_LFT_HEAD.match(line)
        if m:
            if cur is not None:
                raise TopoplanError(f"{path}:{lineno}: new table before the 'lids dumped' line of the table at "
                                    f"line {cur.line} (truncated dump)")
            lid = re.search(r"\bLid\s+(\d+)", m.group(3))
            cur = LFT(switch_guid=_guid(m.group(4), path, lineno), switch_lid=int(lid.group(1)) if lid else None,
                      out_port={}, dest_guid={}, path=str(path), line=lineno)
            lo, hi, rows = int(m.group(1), 16), int(m.group(2), 16), 0
            continue
        if _RE_MC_HEAD.match(line):
            if cur is not None:
                raise TopoplanError(f"{path}:{lineno}: multicast table inside the unicast table of line {cur.line}")
            in_mc = True
            continue
        m = _RE_LFT_ROW.match(line)
        if m:
            if cur is None:
                raise TopoplanError(f"{path}:{lineno}: LFT row before any 'Unicast lids ... of switch' header "
                                    f"(truncated or corrupt dump)")
            lid, port, info = int(m.group(1), 16), int(m.group(2)), m.group(3) or ""
            if not lo <= lid <= hi:
                raise TopoplanError(f"{path}:{lineno}: LID {lid:#x} outside the table's range [{lo:#x}-{hi:#x}]")
            if lid in cur.out_port:
                raise TopoplanError(f"{path}:{lineno}: LID {lid:#x} listed twice")
            if port > 255:
                raise TopoplanError(f"{path}:{lineno}: output port {port} out of range")
            cur.out_port[lid] = port
            rows += 1
            if "illegal port" in info:
                del cur.out_port[lid]  # ibroute -a lists unrouted LIDs with an impossible port
            g = _RE_DEST_GUID.search(info)
            if g:
                cur.dest_guid[lid] = _guid(g.group(1), path, lineno)
            continue
        m = _RE_LFT_END.match(line)
        if m:
            if cur is None:
                report.unknown(lineno, raw)
                continue
            if int(m.group(1)) != rows:  # ibroute counts the rows it printed: some were lost
                raise TopoplanError(f"{path}:{lineno}: says {m.group(1)} LIDs dumped but the table of line "
                                    f"{cur.line} has {rows} rows (corrupt dump)")
            tables.append(cur)
            cur = None
            continue
        if _RE_LFT_COLS.match(line):
            continue
        if cur is not None and line.startswith(("0x", "0X")):
            raise TopoplanError(f"{path}:{lineno}: malformed LFT row {line[:80]!r} (truncated or corrupt dump)")
        report.unknown(lineno, raw)
    if cur is not None:
        raise TopoplanError(f"{path}: the table of switch {cur.switch_guid} (line {cur.line}) has no closing "
                            f"'lids dumped' line (truncated dump)")
    if in_mc:
        report.warnings.append(f"{path}: multicast table without its closing line")
    return tables, report


def read_lft_dir(directory) -> tuple[list[LFT], list[ParseReport]]:
    """Read every ``ibroute`` dump in ``directory`` (any names; hidden files such as partial writes skipped).

    Files with no ``Unicast lids`` table are reported and skipped.

    Parameters
    ----------
    directory : str or path

    Returns
    -------
    tables : list of LFT
    reports : list of ParseReport

    Raises
    ------
    TopoplanError
        For a missing directory or a malformed dump.

    Examples
    --------
    >>> tables, reports = read_lft_dir("tests/data/ib/tree2/lft")
    >>> len(tables), sorted(t.switch_lid for t in tables)
    (4, [1, 3, 4, 6])
    """
    d = Path(directory)
    if d.exists() and not d.is_dir():   # (it exists: "no such" sent the user looking for a missing file)
        raise TopoplanError(f"{d}: not a directory; the LFTs are a directory of ibroute outputs, one per switch")
    if not d.is_dir():
        raise TopoplanError(f"{d}: no such LFT directory")
    tables: list[LFT] = []
    reports: list[ParseReport] = []
    for f in sorted(d.iterdir()):
        if f.name.startswith(".") or f.name.endswith("~") or not f.is_file():
            continue
        tabs, rep = parse_ibroute(_read_text(f, "ibroute dump"), str(f))
        if not tabs:
            rep.warnings.append(f"{f}: no 'Unicast lids' table (not an ibroute dump?); ignored")
        tables.extend(tabs)
        reports.append(rep)
    return tables, reports


def attach_lfts(fabric: IBFabric, tables: list[LFT], reports=(), lft_dir=None) -> IBFabric:
    """Attach forwarding tables to ``fabric`` after checking them against the dump.

    A table of a switch the dump does not have is ignored with a warning. A
    table whose switch LID or destination port GUIDs disagree with the dump
    (a stale table from another subnet-manager run) is dropped and listed in
    :attr:`IBFabric.lft_conflicts`. Two tables for one switch are an error.

    Parameters
    ----------
    fabric : IBFabric
        Changed in place.
    tables : list of LFT
    reports : sequence of ParseReport, optional
    lft_dir : str, optional
        Where the tables came from.

    Returns
    -------
    IBFabric
        ``fabric``.

    Raises
    ------
    TopoplanError
        For two tables of one switch.

    Examples
    --------
    >>> fab = read_ibnetdiscover("tests/data/ib/tree2/ibnetdiscover.txt")
    >>> attach_lfts(fab, *read_lft_dir("tests/data/ib/tree2/lft")).routing
    'lft'
    """
    fabric.reports.extend(reports)
    fabric.lft_dir = str(lft_dir) if lft_dir is not None else None
    fabric._health = None
    rep = ParseReport(str(lft_dir or "LFTs"))
    fabric.reports.append(rep)
    seen: dict[str, LFT] = {}
    for t in tables:
        key = fabric.switch_key(t.switch_guid)
        if key is None:
            rep.warnings.append(f"{t.path}:{t.line}: switch {t.switch_guid} is not in {fabric.path}; table ignored")
            continue
        if key in seen:
            raise TopoplanError(f"{t.path}:{t.line}: a second LFT for switch {key} (first in {seen[key].path}:"
                                f"{seen[key].line})")
        seen[key] = t
        conflict = _lft_conflict(fabric, key, t)
        if conflict:
            fabric.lft_conflicts.append(f"{t.path}:{t.line}: {conflict}; table not used (stale LFT?)")
            continue
        fabric.lfts[key] = t
    missing = [k for k in fabric.switches if k not in fabric.lfts]
    if missing:
        rep.warnings.append(
            f"{lft_dir or 'LFTs'}: no usable LFT for {len(missing)} of {len(fabric.switches)} switches "
            f"(first {missing[0]}); routes through them use shortest paths")
    return fabric


def _lft_conflict(fabric: IBFabric, key: str, t: LFT) -> str:
    sw = fabric.nodes[key]
    if t.switch_lid is not None and sw.lid is not None and t.switch_lid != sw.lid:
        return f"switch {key} has LID {t.switch_lid} here but {sw.lid} in {fabric.path}"
    for lid, g in t.dest_guid.items():
        owner = fabric.lid_owner.get(lid)
        if owner is None:
            continue
        node = fabric.nodes[owner[0]]
        pg = node.port_guid if node.kind == "switch" else node.ports[owner[1]].port_guid
        if pg is not None and g != pg and g != node.guid:
            return f"LID {lid} leads to port {g} here but to {pg} in {fabric.path}"
    return ""


def load_fabric(ibnetdiscover, lft_dir=None) -> IBFabric:
    """Read a fabric: an ``ibnetdiscover`` dump plus, optionally, a directory of ``ibroute`` dumps.

    Parameters
    ----------
    ibnetdiscover : path of the dump (plain or ``-p``).
    lft_dir : directory of ``ibroute`` outputs, or None for shortest-path routes.

    Returns
    -------
    IBFabric; :meth:`IBFabric.messages` lists what was skipped.

    Examples
    --------
    >>> fab = load_fabric("tests/data/ib/fattree/ibnetdiscover.txt", "tests/data/ib/fattree/lft")
    >>> fab.routing
    'lft'
    """
    fab = read_ibnetdiscover(ibnetdiscover)
    if lft_dir is not None:
        tables, reports = read_lft_dir(lft_dir)
        attach_lfts(fab, tables, reports, lft_dir)
    return fab


# -- routes ---------------------------------------------------------------------

def _host_port(fabric: IBFabric, host: str) -> tuple[str, int]:
    try:
        return fabric.hosts[host]
    except KeyError:
        # Only the file name: the service sends this message to network clients.
        raise TopoplanError(f"unknown host {host!r} (not a channel adapter in {Path(fabric.path).name})") from None


def route(fabric: IBFabric, src: str, dst: str) -> Route:
    """The route from host ``src`` to host ``dst``: LFT walk when tables are loaded, else shortest path.

    A walk that reaches a switch without a usable table falls back to a
    shortest path and says why (``source`` and ``note``). A walk whose tables
    loop or dead-end is no route at all (the fabric drops those packets): an
    error naming the switch and the LID, never a shortest path in its place.

    Parameters
    ----------
    fabric : from :func:`load_fabric`.
    src, dst : host names (first word of the CA description).

    Returns
    -------
    Route (``source`` says how it was found; ``note`` why an LFT walk fell back).

    Raises
    ------
    TopoplanError
        Unknown host, LFTs that loop or dead-end on the way, or no path at all
        between the two.

    Examples
    --------
    >>> fab = load_fabric("tests/data/ib/tree2/ibnetdiscover.txt", "tests/data/ib/tree2/lft")
    >>> route(fab, "node001", "node004").line()
    'node001 0x0000000000200001 0x0000000000200000 0x0000000000200002 node004'

    A loop in the tables (leaf2 sends node004's LID 8 back up to the top switch):

    >>> fab.lfts["0x0000000000200002"].out_port[8] = 13
    >>> route(fab, "node001", "node004")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: no route from node001 to node004: the LFTs loop on the way to LID 8: switch 0x0000000000200000 ('top') is reached again (0x0000000000200001 -> 0x0000000000200000 -> 0x0000000000200002 -> 0x0000000000200000); the fabric drops these packets
    """
    a, b = _host_port(fabric, src), _host_port(fabric, dst)
    if src == dst:
        return Route(src, dst, (), (), fabric.routing)
    if fabric.lfts:
        r, kind, why = _lft_route(fabric, src, dst, a, b)
        if r is not None:
            return r
        if kind != _FALLBACK:
            raise TopoplanError(f"no route from {src} to {dst}: {why}; the fabric drops these packets")
        return _shortest_route(fabric, src, dst, a, b, note=why)
    return _shortest_route(fabric, src, dst, a, b)


# How an LFT walk ends: at the destination, at a switch without a usable table (shortest-path
# fallback), back at a switch it crossed (loop), or anywhere else (dead end: the packets are dropped).
_OK, _FALLBACK, _LOOP, _DEAD = "ok", "fallback", "loop", "dead-end"


def _lft_step(fabric: IBFabric, cur: str, lid: int):
    """The port switch ``cur`` forwards LID ``lid`` to: (IBPort, "", "") or (None, kind, why)."""
    node = fabric.nodes[cur]
    table = fabric.lfts.get(cur)
    if table is None:
        return None, _FALLBACK, f"no LFT for switch {cur} ({node.desc!r})"
    out = table.out_port.get(lid)
    if out is None:
        return None, _DEAD, f"the LFT of switch {cur} ({node.desc!r}) has no entry for LID {lid}"
    port = node.ports.get(out)
    if port is None:
        where = "port 0 (the switch itself)" if out == 0 else f"port {out}, which is not connected"
        return None, _DEAD, f"the LFT of switch {cur} ({node.desc!r}) sends LID {lid} to {where}"
    return port, "", ""


def _no_lid(fabric: IBFabric, dst: str) -> str:
    return f"{dst} has no LID in {Path(fabric.path).name} (its port was not configured by a subnet manager)"


def _loop_why(fabric: IBFabric, lid: int, path: list[str], again: str) -> str:
    shown = path + [again] if len(path) < 8 else path[:3] + ["..."] + path[-3:] + [again]
    return (f"the LFTs loop on the way to LID {lid}: switch {again} ({fabric.nodes[again].desc!r}) is reached "
            f"again ({' -> '.join(shown)})")


def _wrong_node_why(fabric: IBFabric, lid: int, cur: str, dst: str) -> str:
    return f"the LFTs deliver LID {lid} to {cur} ({fabric.nodes[cur].desc!r}), not to {dst}"


def _lft_route(fabric, src, dst, a, b):
    """Follow the forwarding tables: (Route, "", "") or (None, kind, why) when they do not lead to ``dst``."""
    nodes = fabric.nodes
    lid = nodes[b[0]].ports[b[1]].lid
    if not lid:
        return None, _DEAD, _no_lid(fabric, dst)
    first = nodes[a[0]].ports[a[1]]
    cur, in_port = first.remote, first.remote_port
    switches, rates = [], [first.rate_Bps]
    crossed: set[str] = set()
    while True:
        if nodes[cur].kind != "switch":
            if (cur, in_port) == b:
                return Route(src, dst, tuple(switches), tuple(rates), "lft"), "", ""
            return None, _DEAD, _wrong_node_why(fabric, lid, cur, dst)
        if cur in crossed:
            return None, _LOOP, _loop_why(fabric, lid, switches, cur)
        crossed.add(cur)
        switches.append(cur)
        port, kind, why = _lft_step(fabric, cur, lid)
        if port is None:
            return None, kind, why
        rates.append(port.rate_Bps)
        cur, in_port = port.remote, port.remote_port


def _walk_from(fabric: IBFabric, start: str, lid: int, b: tuple[str, int], dst: str, memo: dict) -> tuple[str, str]:
    """(kind, why) of the LFT walk from switch ``start`` to ``dst``'s LID; ``memo`` caches it per switch."""
    nodes = fabric.nodes
    path: list[str] = []
    on_path: set[str] = set()
    cur = start
    while True:
        res = memo.get(cur)
        if res is not None:
            break
        if cur in on_path:
            res = (_LOOP, _loop_why(fabric, lid, path, cur))
            break
        on_path.add(cur)
        path.append(cur)
        port, kind, why = _lft_step(fabric, cur, lid)
        if port is None:
            res = (kind, why)
            break
        if nodes[port.remote].kind != "switch":
            res = ((_OK, "") if (port.remote, port.remote_port) == b
                   else (_DEAD, _wrong_node_why(fabric, lid, port.remote, dst)))
            break
        cur = port.remote
    for s in path:
        memo[s] = res
    return res


@dataclass(frozen=True)
class LFTHealth:
    """How the routes of every ordered pair of distinct hosts end (see :func:`lft_health`).

    Parameters
    ----------
    pairs : int
        Ordered pairs of distinct hosts.
    ok : int
        Routed by the LFTs.
    fallback : int
        Shortest-path routes: no LFTs at all, or a switch on the way without a usable table.
    loop : int
        The LFT walk comes back to a switch it crossed: no route (the query is an error).
    dead_end : int
        The LFT walk stops short of the destination: no route (the query is an error).
    first_loop, first_dead_end : str, optional
        One example each, ``src->dst: why`` (empty when there is none).

    Examples
    --------
    >>> h = lft_health(load_fabric("tests/data/ib/tree2/ibnetdiscover.txt", "tests/data/ib/tree2/lft"))
    >>> h.fields()
    'lft_pairs=72 lft_ok=72 lft_fallback=0 lft_loop=0 lft_dead_end=0'
    >>> h.messages()
    []
    """

    pairs: int
    ok: int
    fallback: int
    loop: int
    dead_end: int
    first_loop: str = ""
    first_dead_end: str = ""

    def fields(self) -> str:
        """``key=value`` words, as the route service's ``info`` answer carries them."""
        return (f"lft_pairs={self.pairs} lft_ok={self.ok} lft_fallback={self.fallback} lft_loop={self.loop} "
                f"lft_dead_end={self.dead_end}")

    def messages(self) -> list[str]:
        """One warning line per kind of broken route (none when every LFT walk arrives or falls back)."""
        out = []
        if self.loop:
            out.append(f"the LFT routes of {self.loop} of {self.pairs} host pairs loop; queries for them are "
                       f"errors (first: {self.first_loop})")
        if self.dead_end:
            out.append(f"the LFT routes of {self.dead_end} of {self.pairs} host pairs dead-end; queries for "
                       f"them are errors (first: {self.first_dead_end})")
        return out


def lft_health(fabric: IBFabric) -> LFTHealth:
    """Count the host pairs whose LFT walks arrive, fall back to shortest paths, loop or dead-end.

    Each pair counts as :func:`route` treats it. Forwarding depends on the
    destination only, so each destination costs one walk per switch (cached
    per switch): hosts x switches steps in all, computed once per fabric.

    Parameters
    ----------
    fabric : IBFabric

    Returns
    -------
    LFTHealth
        Without LFTs every pair counts as ``fallback``.

    Examples
    --------
    >>> fab = load_fabric("tests/data/ib/tree2/ibnetdiscover.txt", "tests/data/ib/tree2/lft")
    >>> fab.lfts["0x0000000000200002"].out_port[8] = 13   # leaf2 sends node004's LID back up: a loop
    >>> h = lft_health(fab)
    >>> h.pairs, h.ok, h.loop, h.dead_end
    (72, 64, 8, 0)
    >>> h.first_loop.split(": ")[:2]
    ['node001->node004', 'the LFTs loop on the way to LID 8']
    """
    if fabric._health is not None:
        return fabric._health
    nodes = fabric.nodes
    hosts = fabric.host_names()
    n = len(hosts)
    count = {_OK: 0, _FALLBACK: 0, _LOOP: 0, _DEAD: 0}
    first = {_LOOP: "", _DEAD: ""}
    if not fabric.lfts:
        count[_FALLBACK] = n * (n - 1)
    else:
        # Sources grouped by the switch their primary port is cabled to (the walk only depends on it).
        under: dict[str, list[str]] = {}
        first_switch: dict[str, str] = {}
        direct: list[tuple[str, tuple[str, int]]] = []  # hosts cabled to a non-switch
        for h in hosts:
            ca, p = fabric.hosts[h]
            port = nodes[ca].ports[p]
            if nodes[port.remote].kind == "switch":
                under.setdefault(port.remote, []).append(h)
                first_switch[h] = port.remote
            else:
                direct.append((h, (port.remote, port.remote_port)))
        for dst in hosts:
            b = fabric.hosts[dst]
            lid = nodes[b[0]].ports[b[1]].lid
            memo: dict[str, tuple[str, str]] = {}
            results = []
            for sw, srcs in under.items():
                k = len(srcs) - (first_switch.get(dst) == sw)
                if k:
                    kind, why = (_DEAD, _no_lid(fabric, dst)) if not lid else _walk_from(fabric, sw, lid, b, dst, memo)
                    results.append((kind, why, k, srcs[0] if srcs[0] != dst else srcs[1]))
            for src, at in direct:
                if src != dst:
                    kind, why = ((_DEAD, _no_lid(fabric, dst)) if not lid else (_OK, "") if at == b
                                 else (_DEAD, _wrong_node_why(fabric, lid, at[0], dst)))
                    results.append((kind, why, 1, src))
            for kind, why, k, src in results:
                count[kind] += k
                if kind in first and not first[kind]:
                    first[kind] = f"{src}->{dst}: {why}"
    fabric._health = LFTHealth(pairs=n * (n - 1), ok=count[_OK], fallback=count[_FALLBACK], loop=count[_LOOP],
                               dead_end=count[_DEAD], first_loop=first[_LOOP], first_dead_end=first[_DEAD])
    return fabric._health


def _adjacency(fabric: IBFabric) -> dict[str, list[tuple[str, float]]]:
    """Switch neighbours sorted by key, with the fastest of parallel links."""
    if fabric._adj is None:
        best: dict[str, dict[str, float]] = {k: {} for k in fabric.switches}
        for l in fabric.links:
            if fabric.nodes[l.a].kind == "switch" and fabric.nodes[l.b].kind == "switch" and l.a != l.b:
                for x, y in ((l.a, l.b), (l.b, l.a)):
                    best[x][y] = max(best[x].get(y, 0.0), l.rate_Bps or 0.0)
        fabric._adj = {k: sorted(v.items()) for k, v in best.items()}
    return fabric._adj


def _distances(fabric: IBFabric, target: str) -> dict[str, int]:
    """Switch hops from every switch to ``target`` (BFS, cached per fabric)."""
    d = fabric._dist.get(target)
    if d is None:
        adj = _adjacency(fabric)
        d = {target: 0}
        frontier = [target]
        while frontier:
            nxt = []
            for s in frontier:
                for t, _ in adj[s]:
                    if t not in d:
                        d[t] = d[s] + 1
                        nxt.append(t)
            frontier = nxt
        fabric._dist[target] = d
    return d


def _shortest_route(fabric, src, dst, a, b, note: str = "") -> Route:
    nodes = fabric.nodes
    first, last = nodes[a[0]].ports[a[1]], nodes[b[0]].ports[b[1]]
    if (first.remote, first.remote_port) == b:
        return Route(src, dst, (), (first.rate_Bps,), "shortest-path", note)
    s, t = first.remote, last.remote
    if nodes[s].kind != "switch" or nodes[t].kind != "switch":
        raise TopoplanError(f"no route from {src} to {dst}: a host is not attached to a switch")
    dist = _distances(fabric, t)
    if s not in dist:
        raise TopoplanError(f"no route from {src} to {dst}: their switches are not connected in {fabric.path}")
    adj = _adjacency(fabric)
    switches, rates = [s], [first.rate_Bps]
    cur = s
    while cur != t:
        nxt, rate = next((n, r) for n, r in adj[cur] if dist.get(n) == dist[cur] - 1)
        switches.append(nxt)
        rates.append(rate)
        cur = nxt
    rates.append(last.rate_Bps)
    return Route(src, dst, tuple(switches), tuple(rates), "shortest-path", note)


def parse_query(text: str) -> tuple[str, str]:
    """``hosta:hostb`` -> (``hosta``, ``hostb``); TopoplanError when malformed.

    Parameters
    ----------
    text : str
        The ``query`` argument of 002's route service.

    Returns
    -------
    tuple of str

    Raises
    ------
    TopoplanError

    References
    ----------
    002 section IV-A (the ``query hosta:hostb`` service).

    Examples
    --------
    >>> parse_query("node001:node004")
    ('node001', 'node004')
    >>> parse_query("node001")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: expected hosta:hostb, got 'node001'
    """
    parts = text.strip().split(":")
    if len(parts) != 2 or not parts[0].strip() or not parts[1].strip():
        raise TopoplanError(f"expected hosta:hostb, got {text.strip()[:80]!r}")
    a, b = parts[0].strip(), parts[1].strip()
    if any(c.isspace() for c in a + b):
        raise TopoplanError(f"expected hosta:hostb, got {text.strip()[:80]!r}")
    return a, b


# -- delay matrices ---------------------------------------------------------------

def delay_matrix(fabric: IBFabric, hosts, kind: str) -> np.ndarray:
    """The delay matrix of the Bcast reordering (002 section IV-B) along the real routes.

    Parameters
    ----------
    fabric : from :func:`load_fabric`.
    hosts : host names; row/column order of the matrix.
    kind : ``"hops"`` (switches crossed from row host to column host) or
        ``"speed"`` (1 / slowest link rate on the route, seconds per byte).

    Returns
    -------
    (n, n) float array, 0 on the diagonal. Rows are sources: with LFTs a
    route and its reverse may differ, so the matrix need not be symmetric.

    Examples
    --------
    >>> fab = load_fabric("tests/data/ib/tree2/ibnetdiscover.txt", "tests/data/ib/tree2/lft")
    >>> delay_matrix(fab, ["node001", "node004"], "hops").tolist()
    [[0.0, 3.0], [3.0, 0.0]]
    """
    if kind not in KINDS:
        raise TopoplanError(f"field 'kind': {kind!r}: expected one of {', '.join(KINDS)}")
    hosts = list(hosts)
    n = len(hosts)
    hops = np.zeros((n, n), dtype=np.float64)
    rate = np.full((n, n), np.inf)
    # Forwarding is by destination only, so every host under one switch sees the same path
    # beyond its own host link: walk it once per (first switch, destination).
    groups: dict[str | None, list[int]] = {}
    host_rate = np.empty(n)
    for i, h in enumerate(hosts):
        ca, p = _host_port(fabric, h)
        port = fabric.nodes[ca].ports[p]
        host_rate[i] = port.rate_Bps
        first = port.remote if fabric.nodes[port.remote].kind == "switch" else None
        groups.setdefault(first, []).append(i)
    for first, members in groups.items():
        for j, b in enumerate(hosts):
            if first is None:  # hosts cabled to another host: no shared path, route each pair
                for i in members:
                    if i != j:
                        r = route(fabric, hosts[i], b)
                        hops[i, j], rate[i, j] = r.hops, r.min_rate_Bps
                continue
            rep = next((i for i in members if i != j), None)
            if rep is None:
                continue
            r = route(fabric, hosts[rep], b)
            beyond = min(r.rates_Bps[1:], default=np.inf)
            rows = [i for i in members if i != j]
            hops[rows, j] = r.hops
            rate[rows, j] = np.minimum(host_rate[rows], beyond)
    if kind == "hops":
        return hops
    out = 1.0 / rate
    np.fill_diagonal(out, 0.0)
    return out


def read_hosts(path) -> list[str]:
    """Read a host list: one host per line.

    ``#`` starts a comment; MPI hostfile lines (``node001 slots=4``,
    ``node001:4``) give their host (``key=value`` words are attributes); Slurm
    host lists (``node[001-004]``, ``node[01-02] node05``) expand as Slurm
    expands them (:func:`topoplan.core.topology_io.expand_hostlist`). A host
    listed twice is an error naming the line.

    Parameters
    ----------
    path : str or path

    Returns
    -------
    list of str

    Raises
    ------
    TopoplanError
        For a missing file, a bad range or a host listed twice.

    Examples
    --------
    >>> import os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "hosts")
    >>> with open(path, "w") as fh:
    ...     _ = fh.write("node001 slots=4\\nnode[002-003]\\n# comment\\n")
    >>> read_hosts(path)
    ['node001', 'node002', 'node003']
    """
    text = _read_text(path, "host list")
    out: list[str] = []
    seen: dict[str, int] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        # every word but key=value attributes (slots=4) is a host list (``node[01-02] node05``: three hosts)
        for word in (w for w in line.split() if "=" not in w):
            if ":" in word and "[" not in word:
                word = word.split(":", 1)[0]
            for h in expand_hostlist(word, f"{path}:{lineno}: "):
                if h in seen:
                    raise TopoplanError(f"{path}:{lineno}: host {h!r} listed twice (first at line {seen[h]})")
                seen[h] = lineno
                out.append(h)
    if not out:
        raise TopoplanError(f"{path}: no hosts listed")
    return out


def check_hosts(fabric: IBFabric, hosts, path="--hosts") -> None:
    """TopoplanError naming the first host the fabric does not have.

    Parameters
    ----------
    fabric : IBFabric
    hosts : iterable of str
    path : str, optional
        How the message names the host list.

    Raises
    ------
    TopoplanError

    Examples
    --------
    >>> fab = load_fabric("tests/data/ib/tree2/ibnetdiscover.txt", "tests/data/ib/tree2/lft")
    >>> check_hosts(fab, ["node001", "node002"])
    >>> check_hosts(fab, ["node001", "node099"], "hosts.txt")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: hosts.txt: host 'node099' is not in tests/data/ib/tree2/ibnetdiscover.txt
    """
    for h in hosts:
        if h not in fabric.hosts:
            raise TopoplanError(f"{path}: host {h!r} is not in {fabric.path}")


def write_delay_matrix(path, hosts, matrix: np.ndarray, kind: str = "hops") -> None:
    """Write a delay matrix atomically: ``.csv`` (header row of host names, one row per host) or ``.npy``.

    Parameters
    ----------
    path : str or path
        Ends in ``.csv``, ``.csv.gz`` or ``.npy``; ``-`` writes the CSV to standard output.
    hosts : sequence of str
    matrix : numpy.ndarray
    kind : str, optional
        ``hops`` values are written as integers.

    Raises
    ------
    TopoplanError
        For another file name ending, or a path that cannot be written.

    Examples
    --------
    >>> import os, tempfile
    >>> fab = load_fabric("tests/data/ib/tree2/ibnetdiscover.txt", "tests/data/ib/tree2/lft")
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "delay.csv")
    >>> hosts = ["node001", "node004"]
    >>> write_delay_matrix(path, hosts, delay_matrix(fab, hosts, "hops"))
    >>> print(open(path).read(), end="")
    node001,node004
    0,3
    3,0
    """
    p = Path(path)
    name = p.name.lower()
    if name.endswith(".npy"):
        buf = io.BytesIO()
        np.save(buf, np.asarray(matrix, dtype=np.float64))
        atomic_write(p, buf.getvalue(), binary=True)
        return
    if not (is_stdout(path) or name.endswith((".csv", ".csv.gz"))):
        raise TopoplanError(f"{p}: output must end in .csv, .csv.gz or .npy (or be -, standard output)")
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(hosts)
    for row in np.asarray(matrix):
        w.writerow([str(int(v)) if kind == "hops" else repr(float(v)) for v in row])
    atomic_write(p, out.getvalue())


# -- topology model ---------------------------------------------------------------

def switch_names(fabric: IBFabric) -> dict[str, str]:
    """Unique switch names: the description when unique and non-empty, else ``S-<guid>``.

    Parameters
    ----------
    fabric : IBFabric

    Returns
    -------
    dict of str to str
        Switch GUID -> name.

    Examples
    --------
    >>> fab = load_fabric("tests/data/ib/tree2/ibnetdiscover.txt", "tests/data/ib/tree2/lft")
    >>> switch_names(fab)["0x0000000000200000"]
    'top'
    """
    desc = {k: fabric.nodes[k].desc.strip() for k in fabric.switches}
    counts: dict[str, int] = {}
    for d in desc.values():
        counts[d] = counts.get(d, 0) + 1
    return {k: d if d and counts[d] == 1 else "S-" + k[2:] for k, d in desc.items()}


def to_topology(fabric: IBFabric, name: str | None = None):
    """The fabric as a :class:`~topoplan.core.topology.GraphTopology` (switches, hosts, links with rates).

    Hosts in natural order, each under the switch of its primary port with
    that link's rate; switch-switch links once each (parallel links kept);
    ``switch_guids`` the switch GUIDs. Hosts cabled straight to another host
    (no switch) are left out with a warning.

    Parameters
    ----------
    fabric : IBFabric
    name : str, optional

    Returns
    -------
    GraphTopology

    Examples
    --------
    >>> topo = to_topology(load_fabric("tests/data/ib/tree2/ibnetdiscover.txt"))
    >>> topo.n_nodes, topo.n_switches
    (9, 4)
    """
    keys = fabric.switches
    if not keys:
        raise TopoplanError(f"{fabric.path}: the fabric has no switches")
    index = {k: i for i, k in enumerate(keys)}
    names = switch_names(fabric)
    hosts, host_sw, host_bw = [], [], []
    for h in fabric.host_names():
        ca, p = fabric.hosts[h]
        port = fabric.nodes[ca].ports[p]
        if port.remote not in index:
            fabric.reports[0].warnings.append(f"{fabric.path}: host {h} is not attached to a switch; left out")
            continue
        hosts.append(h)
        host_sw.append(index[port.remote])
        host_bw.append(float(port.rate_Bps))
    links = tuple((index[l.a], index[l.b], float(l.rate_Bps)) for l in fabric.links
                  if l.a in index and l.b in index and l.a != l.b)
    if name is None:  # "fabricA/ibnetdiscover.txt" is better named after its directory
        p = Path(fabric.path)
        name = p.parent.name if p.stem.startswith("ibnetdiscover") and p.parent.name else p.stem
    topo = GraphTopology(switches=tuple(names[k] for k in keys), hosts=tuple(hosts), host_switch=tuple(host_sw),
                         host_bw_Bps=tuple(host_bw), links=links, switch_guids=tuple(keys), name=name)
    topo.validate()
    return topo


# -- ibtracert (to check routes against the real tool) ---------------------------------

@dataclass(frozen=True)
class Trace:
    """One ``ibtracert`` run: the end descriptions and LIDs and the switch port GUIDs crossed.

    Parameters
    ----------
    src_desc, dst_desc : str
    src_lid, dst_lid : int
    switch_guids : tuple of str
    line : int

    Examples
    --------
    >>> parse_ibtracert(open("tests/data/ib/tree2/ibtracert.txt").read())[0]
    Trace(src_desc='node001 HCA-1', src_lid=2, dst_desc='node002 HCA-1', dst_lid=5, switch_guids=('0x0000000000200001',), line=1)
    """

    src_desc: str
    src_lid: int
    dst_desc: str
    dst_lid: int
    switch_guids: tuple[str, ...]
    line: int


_RE_TR_FROM = re.compile(r"^From (\S+) \{(0x" + _HEX + r")\} portnum (\d+) lid (\d+)-(\d+) \"(.*)\"$")
_RE_TR_HOP = re.compile(r"^\[(\d+)\] -> (\S+) port \{(0x" + _HEX + r")\}\[(\d+)\] lid (\d+)-(\d+) \"(.*)\"$")
_RE_TR_TO = re.compile(r"^To (\S+) \{(0x" + _HEX + r")\} portnum (\d+) lid (\d+)-(\d+) \"(.*)\"$")


def parse_ibtracert(text: str, path: str = "<ibtracert>") -> list[Trace]:
    """Parse one or more concatenated ``ibtracert`` outputs (unicast, default verbosity).

    Parameters
    ----------
    text : str
    path : str, optional
        File name used in messages.

    Returns
    -------
    list of Trace

    Raises
    ------
    TopoplanError
        For a malformed or truncated trace, naming the line.

    Examples
    --------
    >>> parse_ibtracert(open("tests/data/ib/tree2/ibtracert.txt").read())[0].src_desc
    'node001 HCA-1'
    """
    out: list[Trace] = []
    start = None
    hops: list[str] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        m = _RE_TR_FROM.match(line)
        if m:
            start, hops = (m, lineno), []
            continue
        m = _RE_TR_HOP.match(line)
        if m and start is not None:
            if m.group(2) == "switch":
                hops.append(norm_guid(m.group(3)))
            continue
        m = _RE_TR_TO.match(line)
        if m and start is not None:
            f, at = start
            out.append(Trace(f.group(6), int(f.group(4)), m.group(6), int(m.group(4)), tuple(hops), at))
            start = None
            continue
        raise TopoplanError(f"{path}:{lineno}: not an ibtracert line: {line[:80]!r}")
    if start is not None:
        raise TopoplanError(f"{path}:{start[1]}: trace without its 'To' line (truncated)")
    return out


def compare_traces(fabric: IBFabric, traces) -> tuple[int, list[str]]:
    """Compare :func:`route` with ``ibtracert`` traces.

    Hosts are matched by the first word of the traced descriptions; traces
    from a LID that is not the source host's primary port are skipped.

    Parameters
    ----------
    fabric : IBFabric
    traces : iterable of Trace

    Returns
    -------
    compared : int
        Traces compared.
    disagreements : list of str
        One line each.

    Examples
    --------
    >>> fab = load_fabric("tests/data/ib/tree2/ibnetdiscover.txt", "tests/data/ib/tree2/lft")
    >>> compare_traces(fab, parse_ibtracert(open("tests/data/ib/tree2/ibtracert.txt").read()))
    (72, [])
    """
    diffs = []
    checked = 0
    for t in traces:
        src, dst = host_name(t.src_desc, ""), host_name(t.dst_desc, "")
        if src not in fabric.hosts or dst not in fabric.hosts:
            diffs.append(f"line {t.line}: unknown host {src!r} or {dst!r}")
            continue
        if fabric.nodes[fabric.hosts[src][0]].ports[fabric.hosts[src][1]].lid != t.src_lid:
            continue
        want = tuple(fabric.switch_key(g) or g for g in t.switch_guids)
        checked += 1
        try:
            got = route(fabric, src, dst)
        except TopoplanError as exc:  # the tables loop or dead-end: ibtracert did get through
            diffs.append(f"line {t.line}: {src}->{dst}: ibtracert {' '.join(want)}, route: {exc}")
            continue
        if got.switches != want:
            diffs.append(f"line {t.line}: {src}->{dst}: ibtracert {' '.join(want)}, route ({got.source}) "
                         f"{' '.join(got.switches)}")
    return checked, diffs
