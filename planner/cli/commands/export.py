"""``topoplan export``: write a placement as a launcher file (Open MPI 4/5, MPICH, Slurm, JSON)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from planner.cli.commands.common import AnyInputsOpt, SetOpt, check_plan_inputs, console, plan_doc


def register(app: typer.Typer) -> None:
    app.command("export")(export_cmd)


def export_cmd(fmt: str = typer.Argument(..., metavar="FORMAT", help="ompi4 | ompi5 | mpich | slurm | json."),
               placement: Path = typer.Option(..., "--placement", "-p", help="Placement JSON (topoplan place -o) or CSV."),
               hosts: Optional[Path] = typer.Option(None, "--hosts", help="Hostfile: 'node_id host' or one host per line."),
               topology: Optional[str] = typer.Option(None, "--topology", "-t",
                                                      help="Topology to validate against (and take host names from)."),
               sets: Optional[List[str]] = SetOpt, any_inputs: bool = AnyInputsOpt,
               output: Path = typer.Option(..., "--output", "-o", help="File to write (atomically).")) -> None:
    """Export a placement for a real launcher; refuses a placement that does not validate."""
    from planner.core.errors import TopoplanError
    from planner.reporting.export import FORMATS, export, read_hostfile
    from planner.core.placement import read_placement

    if fmt not in FORMATS:
        raise TopoplanError(f"unknown export format {fmt!r} (formats: {', '.join(FORMATS)})")
    topo = None
    if topology is not None:
        from planner.core.topology_io import load_topology

        topo = load_topology(topology, sets or [])
    if topo is None:
        topo = _recorded_topology(placement)
    if topo is not None:   # a placement planned on another machine (or an edited topology file) is refused
        check_plan_inputs(plan_doc(placement), f"--placement {placement}", any_inputs=any_inputs, topology=topo)
    if topo is None and hosts is None:
        raise TopoplanError("export needs --hosts or --topology (for host names)")
    names = read_hostfile(hosts, topo.n_nodes if topo is not None else None) if hosts is not None else None
    pl = read_placement(placement, topo if topo is not None else names)   # host names in the placement too
    cmd = export(fmt, pl, output, hosts=names, topo=topo)
    con = console()
    con.print(f"wrote {output} ({pl.n_ranks} ranks)")
    if cmd:
        con.print(f"run: {cmd}")


def _recorded_topology(placement: Path):
    """The topology a ``topoplan place`` JSON was planned on (so its cores are checked), or None."""
    from planner.core.errors import TopoplanError
    from planner.core.io import read_json
    from planner.core.topology_io import load_topology

    if placement.suffix != ".json" or not placement.is_file():
        return None
    doc = read_json(placement, "placement")
    spec = doc.get("topology_spec") if isinstance(doc, dict) else None
    if not isinstance(spec, str):
        return None
    try:
        return load_topology(spec, doc.get("topology_sets") or [])
    except TopoplanError as exc:
        raise TopoplanError(f"{placement}: was planned on topology {spec!r}, which cannot be loaded here ({exc}); "
                            "pass --topology") from None
