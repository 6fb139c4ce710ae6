"""A circuit plan's forwarding tables as iproute2 batch files, one per host: host-based forwarding through relays.

``topoplan export routes -p plan.json -o routes/`` writes ``routes/<host>.routes`` for every host of the
topology. Applied with ``ip -batch <host>.routes`` on that host, its lines send the large-message
traffic of the plan the way the simulator routes it: to a destination host under another switch, over
the host's circuit (``dev ocs<port> onlink``: the partner's address is reached straight over the
circuit) or to a relay under the host's own switch (``dev eth0``), where the relay's own file takes
over. A host without a rule for a destination keeps its ordinary route (the EPS uplinks). This is how
hybrid prototypes deploy a plan: the hosts of a rack share one layer-2 EPS segment, every host has one
address on it, and the OCS nodes forward (``net.ipv4.ip_forward=1``, ``rp_filter`` 0, no ICMP
redirects). ``topoplan emulate`` applies exactly these files.

Every line is ``route replace <destination>/32 via <next hop> dev <device>[ onlink]``. Addresses are
one per host: by default the emulator's (node ``i`` is ``198.18.0.0 + 1 + i``, from the range set aside
for benchmarking); an addresses file (``host address`` per line) gives a real cluster's. Routes are per
destination host and apply to every packet, so messages below the plan's threshold (one OCS
bandwidth-delay product, a kilobyte or so) take the relays too, where the simulator sends them over the
EPS; and TCP's acknowledgements follow the reverse direction's routes.

:func:`read_route_file` reads a file back and checks every line (the emulator applies nothing it has not
checked): the grammar above, addresses of known hosts, a device that exists on that host.
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path

from topoplan.core.errors import TopoplanError
from topoplan.core.io import atomic_write, output_group, read_text
from topoplan.reporting.ocs_export import ocs_document

__all__ = ["DEFAULT_NETWORK", "EPS_DEVICE", "OCS_DEVICE", "default_address", "read_addresses", "route_tables",
           "render_routes", "export_routes", "read_route_file"]

DEFAULT_NETWORK = ipaddress.ip_network("198.18.0.0/16")   # RFC 2544's benchmarking range (its lower half)
EPS_DEVICE = "eth0"
OCS_DEVICE = "ocs"        # optical port p of a host is device ocs<p>
_LINE = re.compile(r"^route replace (\S+)/32 via (\S+) dev (\S+)( onlink)?$")


def default_address(node: int) -> str:
    """The address of node ``node`` in the emulator's plan (``198.18.0.0 + 1 + node``).

    Examples
    --------
    >>> default_address(0), default_address(255)
    ('198.18.0.1', '198.18.1.0')
    """
    node = int(node)
    if not 0 <= node < DEFAULT_NETWORK.num_addresses - 2:
        raise TopoplanError(f"node {node}: outside the address plan of {DEFAULT_NETWORK}")
    return str(DEFAULT_NETWORK.network_address + 1 + node)


def read_addresses(path, hosts: list) -> list:
    """Every host's address from an addresses file (``host address`` per line, ``#`` comments).

    Parameters
    ----------
    path : str or path
    hosts : list of str
        The topology's host names: each needs exactly one address.

    Returns
    -------
    list of str
        Address of node 0, 1, ...

    Raises
    ------
    TopoplanError
        Naming the file and line: a malformed line, an unknown host, an address that is not IPv4, is
        given twice or cannot be a host's (0.0.0.0/8, loopback, multicast, reserved), a host listed twice
        or without an address.

    Examples
    --------
    >>> import os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "addresses")
    >>> _ = open(path, "w").write("b 10.0.0.2\\na 10.0.0.1  # the first\\n")
    >>> read_addresses(path, ["a", "b"])
    ['10.0.0.1', '10.0.0.2']
    >>> _ = open(path, "w").write("a 10.0.0.1\\nb 10.0.0.1\\n")
    >>> read_addresses(path, ["a", "b"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: .../addresses:2: field 'address': 10.0.0.1 is also host a's
    """
    index = {h: i for i, h in enumerate(hosts)}
    out: list = [None] * len(hosts)
    owner: dict = {}
    for lineno, raw in enumerate(read_text(path, "addresses file").split("\n"), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 2:
            raise TopoplanError(f"{path}:{lineno}: expected 'host address'")
        host, addr = parts
        if host not in index:
            raise TopoplanError(f"{path}:{lineno}: field 'host': {host!r} is not a host of the topology")
        try:
            ip = ipaddress.IPv4Address(addr)
        except ValueError:
            raise TopoplanError(f"{path}:{lineno}: field 'address': {addr!r} is not an IPv4 address") from None
        kind = _not_unicast(ip)
        if kind:   # the kernel refuses such a next hop ('invalid gateway'): no host can be reached by it
            raise TopoplanError(f"{path}:{lineno}: field 'address': {ip} is {kind} address, not one a host can "
                                "have on its network")
        if out[index[host]] is not None:
            raise TopoplanError(f"{path}:{lineno}: field 'host': {host} is listed twice")
        if str(ip) in owner:
            raise TopoplanError(f"{path}:{lineno}: field 'address': {ip} is also host {owner[str(ip)]}'s")
        owner[str(ip)] = host
        out[index[host]] = str(ip)
    missing = [h for h, a in zip(hosts, out) if a is None]
    if missing:
        raise TopoplanError(f"{path}: host {missing[0]} has no address")
    return out


def _not_unicast(ip) -> str:
    """What kind of address ``ip`` is when it cannot be a host's own unicast address, else ''."""
    if ip in ipaddress.IPv4Network("0.0.0.0/8"):
        return "a 'this network' (0.0.0.0/8)"
    if ip.is_loopback:
        return "a loopback"
    if ip.is_multicast:
        return "a multicast"
    if ip.is_reserved:   # 240.0.0.0/4, the limited broadcast 255.255.255.255 included
        return "a reserved"
    return ""


def route_tables(doc, topo, *, hosts=None, where: str = "plan", check_inputs: bool = True, entry=None) -> dict:
    """Per host, its routes: ``{host: [(destination host, next-hop host, device, onlink), ...]}``.

    Parameters
    ----------
    doc : dict
        A circuit plan (or a schedule, with ``entry``), validated first (through the OCS document,
        :func:`topoplan.reporting.ocs_export.ocs_document`, which also numbers the optical ports).
    topo : TreeTopology
        The hybrid topology.
    hosts : list of str, optional
        Host names (default the topology's).
    where : str, optional
        How errors name the plan.
    check_inputs : bool, optional
        Refuse a plan made for another topology.
    entry : int, optional
        A schedule's entry (a static plan has one, entry 0).

    Returns
    -------
    dict
        Every host (in node order), an empty list for a host without rules.

    Raises
    ------
    TopoplanError
        For an invalid plan, a schedule without ``entry``, an entry that does not exist.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=1"])   # OCS nodes 0, 16, 32, 48
    >>> plan = {"circuits": [[0, 16]], "forwarding": {"0": {"1": 16}, "1": {"1": 0}}}
    >>> t = route_tables(plan, topo)
    >>> t["node0000"][0], t["node0001"][0], t["node0002"]
    (('node0016', 'node0016', 'ocs0', True), ('node0016', 'node0000', 'eth0', False), [])
    """
    ocs = ocs_document(doc, topo, hosts=hosts, rules="host", where=where, check_inputs=check_inputs)
    entries = ocs["entries"]
    if entry is None:
        if len(entries) != 1:
            raise TopoplanError(f"{where}: a schedule of {len(entries)} entries changes its routes during the run; "
                                "choose the entry to export")
        entry = 0
    if not 0 <= int(entry) < len(entries):
        raise TopoplanError(f"{where}: entry {entry} does not exist (the schedule has {len(entries)})")
    e = entries[int(entry)]
    names = list(ocs["hosts"])
    port = {}
    for xc in e["cross_connects"]:
        a, b = xc["a"], xc["b"]
        port[(a["host"], b["host"])] = a["node_port"]
        port[(b["host"], a["host"])] = b["node_port"]
    out: dict = {h: [] for h in names}
    for host, rules in e["forwarding"].items():
        for dest in names:   # node order, so the files are stable
            nxt = rules.get(dest)
            if nxt is None:
                continue
            if (host, nxt) in port:
                out[host].append((dest, nxt, f"{OCS_DEVICE}{port[(host, nxt)]}", True))
            else:
                out[host].append((dest, nxt, EPS_DEVICE, False))
    return out


def render_routes(tables: dict, addresses: list, hosts: list, *, title: str = "") -> dict:
    """The batch file text of every host.

    Parameters
    ----------
    tables : dict
        From :func:`route_tables`.
    addresses : list of str
        Address of node 0, 1, ... (:func:`default_address` or :func:`read_addresses`).
    hosts : list of str
        Host name of node 0, 1, ...
    title : str, optional
        What the files were made from (a comment line).

    Returns
    -------
    dict
        ``{host: text}``.

    Examples
    --------
    >>> text = render_routes({"a": [("c", "b", "eth0", False)], "b": [], "c": []}, ["10.0.0.1", "10.0.0.2",
    ...                      "10.0.1.1"], ["a", "b", "c"])
    >>> print(text["a"], end="")
    # topoplan routes for a: 1 route
    route replace 10.0.1.1/32 via 10.0.0.2 dev eth0
    """
    addr = dict(zip(hosts, addresses))
    out = {}
    for host in hosts:
        rows = tables.get(host, [])
        head = f"# topoplan routes for {host}: {len(rows)} route{'' if len(rows) == 1 else 's'}"
        lines = [head + (f" ({title})" if title else "")]
        for dest, nxt, dev, onlink in rows:
            lines.append(f"route replace {addr[dest]}/32 via {addr[nxt]} dev {dev}" + (" onlink" if onlink else ""))
        out[host] = "\n".join(lines) + "\n"
    return out


def export_routes(doc, topo, directory, *, hosts=None, addresses=None, where: str = "plan",
                  check_inputs: bool = True, entry=None) -> dict:
    """Write ``<directory>/<host>.routes`` for every host, all or nothing.

    Parameters
    ----------
    doc : dict
        The circuit plan.
    topo : TreeTopology
    directory : str or path
        Created if missing (in an existing directory), and removed again if the export fails or is interrupted;
        refused when it holds ``.routes`` files of other hosts (from an earlier export).
    hosts : list of str, optional
    addresses : list of str, optional
        Default :func:`default_address` of every node.
    where, check_inputs, entry
        As :func:`route_tables`.

    Returns
    -------
    dict
        ``{host: path}``.

    Examples
    --------
    >>> import tempfile
    >>> from topoplan.core.topology_io import load_topology
    >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=1"])
    >>> tmp = tempfile.TemporaryDirectory()
    >>> files = export_routes({"circuits": [[0, 16]], "forwarding": {"0": {"1": 16}}}, topo, tmp.name)
    >>> len(files)
    64
    >>> print("".join(open(files["node0000"]).readlines()[:2]), end="")
    # topoplan routes for node0000: 16 routes (plan)
    route replace 198.18.0.17/32 via 198.18.0.17 dev ocs0 onlink
    """
    names = list(topo.host_names() if hosts is None else hosts)[:topo.n_nodes]
    tables = route_tables(doc, topo, hosts=names, where=where, check_inputs=check_inputs, entry=entry)
    addrs = [default_address(i) for i in range(topo.n_nodes)] if addresses is None else list(addresses)
    texts = render_routes(tables, addrs, names, title=where)
    out = Path(directory)
    # a host's routes applied from a file of an earlier export would route by another plan: a directory that
    # holds route files of hosts this plan does not have is refused before anything is written
    stale = sorted(p.name for p in out.glob("*.routes") if p.stem not in texts) if out.is_dir() else []
    if stale:
        more = f" and {len(stale) - 3} more" if len(stale) > 3 else ""
        raise TopoplanError(f"{out}: holds route files of hosts this plan does not have ({', '.join(stale[:3])}"
                            f"{more}), which a loop over the directory would apply too; write into an empty "
                            "directory or remove them")
    if not out.is_dir() and not out.parent.is_dir():   # as for every output: the directory it goes in must exist
        raise TopoplanError(f"{out}: directory {out.parent} does not exist")
    made = not out.is_dir()   # a directory this export makes is removed again when it fails or is interrupted
    paths = {}
    try:
        try:
            out.mkdir(exist_ok=True)
        except OSError as exc:
            raise TopoplanError(f"{out}: cannot create the directory: {exc.strerror}") from None
        with output_group():
            for host, text in texts.items():
                paths[host] = out / f"{host}.routes"
                atomic_write(paths[host], text)
    except BaseException:
        if made:
            _remove_empty(out)
        raise
    return paths


def _remove_empty(directory: Path) -> None:
    """Remove ``directory`` if it is empty (the group of files written in it left nothing behind)."""
    try:
        directory.rmdir()
    except OSError:   # not there (the interrupt came before it was made), or something else is in it
        pass


def read_route_file(path, *, addresses: list, devices) -> list:
    """Read one host's batch file and check every line before anything is applied.

    Parameters
    ----------
    path : str or path
    addresses : list of str
        Every host's address: destinations and next hops must be among them.
    devices : collection of str
        The host's interfaces.

    Returns
    -------
    list of (str, str, str, bool)
        ``(destination, next hop, device, onlink)`` per route.

    Raises
    ------
    TopoplanError
        Naming the file, line and field.

    Examples
    --------
    >>> import os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "a.routes")
    >>> _ = open(path, "w").write("# a\\nroute replace 10.0.1.1/32 via 10.0.0.2 dev ocs0 onlink\\n")
    >>> read_route_file(path, addresses=["10.0.0.1", "10.0.0.2", "10.0.1.1"], devices={"eth0", "ocs0"})
    [('10.0.1.1', '10.0.0.2', 'ocs0', True)]
    >>> read_route_file(path, addresses=["10.0.0.1", "10.0.0.2", "10.0.1.1"], devices={"eth0"})
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: .../a.routes:2: field 'dev': this host has no device 'ocs0'
    """
    known = set(addresses)
    out = []
    for lineno, raw in enumerate(read_text(path, "route file").split("\n"), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _LINE.match(line)
        if m is None:
            raise TopoplanError(f"{path}:{lineno}: expected 'route replace ADDRESS/32 via ADDRESS dev DEVICE "
                                f"[onlink]', got {line[:60]!r}")
        dest, via, dev, onlink = m.group(1), m.group(2), m.group(3), bool(m.group(4))
        for name, value in (("destination", dest), ("via", via)):
            if value not in known:
                raise TopoplanError(f"{path}:{lineno}: field '{name}': {value} is not the address of a host")
        if dev not in devices:
            raise TopoplanError(f"{path}:{lineno}: field 'dev': this host has no device {dev!r}")
        out.append((dest, via, dev, onlink))
    return out
