"""``topoplan topo`` (query, delay, convert) and ``topoplan serve``: real InfiniBand fabrics from OFED dumps."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from topoplan.core.errors import TopoplanError


IbnetOpt = typer.Option(..., "--ibnetdiscover", "-i", help="ibnetdiscover output (plain or -p form).")
LftOpt = typer.Option(None, "--lft", help="Directory of ibroute outputs, one per switch (any file names). "
                                          "Without it routes are shortest paths.")


def register(app: typer.Typer) -> None:
    topo = typer.Typer(name="topo", no_args_is_help=True,
                       help="Real InfiniBand fabrics: routes, delay matrices and topology YAML from "
                            "ibnetdiscover/ibroute dumps.")
    topo.command("query")(query_cmd)
    topo.command("info")(info_cmd)
    topo.command("delay")(delay_cmd)
    topo.command("convert")(convert_cmd)
    app.add_typer(topo, name="topo")
    app.command("serve")(serve_cmd)


def _load(ibnetdiscover: Path, lft: Optional[Path]):
    from topoplan.fabric.ibfabric import load_fabric

    fab = load_fabric(ibnetdiscover, lft)
    for msg in fab.messages():
        typer.echo(f"warning: {msg}", err=True)
    return fab


def query_cmd(pair: str = typer.Argument(..., metavar="HOSTA:HOSTB", help="The two hosts, e.g. node001:node042."),
              ibnetdiscover: Path = IbnetOpt, lft: Optional[Path] = LftOpt,
              json_mode: bool = typer.Option(False, "--json",
                                             help="Print {src, dst, switches, source} as JSON.")) -> None:
    """Print the switches on the route from host A to host B: `hosta guid ... guid hostb` (002 IV-A)."""
    from topoplan.fabric.ibfabric import parse_query, route
    from topoplan.core.io import dumps

    fab = _load(ibnetdiscover, lft)
    src, dst = parse_query(pair)
    r = route(fab, src, dst)
    if r.note:
        typer.echo(f"note: shortest-path route: {r.note}", err=True)
    typer.echo(dumps(r.to_dict(), indent=None) if json_mode else r.line())


def info_cmd(ibnetdiscover: Path = IbnetOpt, lft: Optional[Path] = LftOpt) -> None:
    """Print what `info` of the route service says about the dumps (hosts, switches, routing; with LFTs how many
    host pairs they route, leave to shortest paths, loop or dead-end, first example of each on stderr), and how
    many hosts have several ports (dual-port HCAs, dual-rail hosts: one host each)."""
    from topoplan.fabric.ibfabric import lft_health

    fab = _load(ibnetdiscover, lft)
    line = f"hosts={len(fab.hosts)} switches={len(fab.switches)} routing={fab.routing}"
    if fab.lfts:
        health = lft_health(fab)
        line += " " + health.fields()
        for msg in health.messages():
            typer.echo(f"warning: {msg}", err=True)
    multi = [h for h in fab.host_names() if len(fab.host_ports[h]) > 1]
    if multi:
        line += f" multi_port_hosts={len(multi)}"
    typer.echo(line)


def delay_cmd(ibnetdiscover: Path = IbnetOpt, lft: Optional[Path] = LftOpt,
              hosts: Path = typer.Option(..., "--hosts", help="Host list: one per line (MPI hostfile lines and "
                                                              "Slurm ranges like node[001-016] work)."),
              kind: str = typer.Option("hops", "--kind", help="hops: switches on the route; speed: 1/(slowest "
                                                              "link rate on the route) in s/B."),
              output: Path = typer.Option(..., "--output", "-o",
                                          help="CSV (header row of host names) or .npy; - for the CSV on standard output.")) -> None:
    """Write the delay matrix of the Bcast reordering along the fabric's real routes."""
    from topoplan.fabric.ibfabric import check_hosts, delay_matrix, read_hosts, write_delay_matrix

    fab = _load(ibnetdiscover, lft)
    names = read_hosts(hosts)
    check_hosts(fab, names, hosts)
    try:
        m = delay_matrix(fab, names, kind)
    except TopoplanError as exc:  # the library names the field, the CLI its flag
        raise TopoplanError(str(exc).replace("field 'kind': ", "--kind ")) from None
    write_delay_matrix(output, names, m, kind)
    typer.echo(f"wrote {output}: {kind} delays between {len(names)} host{'s' if len(names) != 1 else ''} (routes: {fab.routing})", err=True)


def convert_cmd(ibnetdiscover: Path = IbnetOpt,
                output: Path = typer.Option(..., "--output", "-o", help="Topology YAML to write."),
                name: Optional[str] = typer.Option(None, "--name",
                                                   help="Topology name (default: the dump's directory or file "
                                                        "name).")) -> None:
    """Write the fabric as topology YAML (kind: graph) so every other command can plan on it."""
    from topoplan.fabric.ibfabric import to_topology
    from topoplan.core.io import atomic_write
    from topoplan.core.topology_io import dump_topology

    fab = _load(ibnetdiscover, None)
    topo = to_topology(fab, name)
    atomic_write(output, dump_topology(topo))
    typer.echo(f"wrote {output}: {topo.n_nodes} hosts, {topo.n_switches} switches, {len(topo.links)} "
               f"switch links", err=True)


def _idle_timeout(text: str) -> float | None:
    """``--idle-timeout``: a duration (``30s``, ``5min``, ``500ms``; a bare number is seconds); 0 or ``off``: never."""
    from topoplan.core.units import parse_time

    if text.strip().lower() in ("off", "never", "none"):
        return None
    try:
        value = parse_time(text)
    except TopoplanError as exc:
        raise TopoplanError(f"--idle-timeout {text!r}: {exc} (or 'off')") from None
    if value > 7 * 86400:
        raise TopoplanError(f"--idle-timeout {text!r}: longer than a week; use 'off' for no timeout")
    if 0 < value < 0.01:
        raise TopoplanError(f"--idle-timeout {text!r}: shorter than 10 ms would close clients mid-request")
    return value or None


def serve_cmd(ibnetdiscover: Path = IbnetOpt, lft: Optional[Path] = LftOpt,
              port: int = typer.Option(..., "--port", help="TCP port (0: any free port, printed at start). No -p: that is --placement elsewhere."),
              host: str = typer.Option("127.0.0.1", "--host", help="Address to bind (loopback by default)."),
              poll: float = typer.Option(1.0, "--poll", help="Seconds between checks of the dump files for changes."),
              settle: float = typer.Option(0.5, "--settle", help="Seconds the files must stay unchanged before a "
                                                                "reload."),
              idle_timeout: str = typer.Option("60s", "--idle-timeout",
                                               help="Close a client silent this long (30s, 5min; 0 or off: "
                                                    "never)."),
              max_clients: Optional[int] = typer.Option(
                  None, "--max-clients", help="Clients kept open at once (default: ulimit -n less 64 descriptors "
                                              "for the server). At the limit a new client closes the oldest "
                                              "idle one; only when every client is busy is it refused "
                                              "('error: busy').")) -> None:
    """Answer `query hosta:hostb` lines over TCP (002 IV-A); reload when the dumps change; stop on SIGTERM/SIGINT."""
    from topoplan.fabric.ibserve import client_limit, run_server

    if not 0 <= port <= 65535:
        raise TopoplanError(f"--port {port}: expected 0..65535")
    if not 0 < poll < 86400 or not 0 <= settle < 86400:  # also NaN and inf
        raise TopoplanError("--poll must be positive and --settle non-negative")
    idle_s = _idle_timeout(idle_timeout)
    try:
        client_limit(max_clients)
    except TopoplanError as exc:
        raise TopoplanError(str(exc).replace("max_clients ", "--max-clients ", 1)) from None
    import socket

    try:
        socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise TopoplanError(f"--host {host}: cannot resolve it ({getattr(exc, 'strerror', None) or exc})") from None
    if host not in ("127.0.0.1", "localhost", "::1"):
        typer.echo(f"warning: listening on {host}: the service has no authentication; anyone who can reach "
                   f"the port can read the fabric's routes", err=True)
    # binding errors are TopoplanError ("cannot listen on ..."); nothing else is relabelled as one
    run_server(ibnetdiscover, lft, host=host, port=port, poll_s=poll, settle_s=settle, idle_timeout_s=idle_s,
               max_clients=max_clients)
