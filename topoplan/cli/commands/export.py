"""``topoplan export``: write a placement as a launcher file (Open MPI 4/5, MPICH, Slurm, JSON), a circuit
plan or schedule for an OCS controller (``ocs``), or a circuit plan's forwarding tables as iproute2 batch
files, one per host (``routes``)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from topoplan.cli.commands.common import AnyInputsOpt, SetOpt, check_plan_inputs, console, plan_doc


def register(app: typer.Typer) -> None:
    app.command("export")(export_cmd)


ROUTE_OPTIONS = ("--addresses", "--entry")
SLOT_FORMATS = ("ompi4", "ompi5", "mpich")   # the formats whose printed command says what a slot counts


def export_cmd(fmt: str = typer.Argument(..., metavar="FORMAT", help="ompi4 | ompi5 | mpich | slurm | json | ocs | "
                                         "routes."),
               placement: Path = typer.Option(..., "--placement", "-p",
                                              help="Placement JSON (topoplan place -o) or CSV; a plan with "
                                              "rank_to_node; for ocs a circuit plan (topoplan circuits -o) or "
                                              "schedule (topoplan phases --schedule -o); for routes a circuit plan."),
               hosts: Optional[Path] = typer.Option(None, "--hosts", help="Hostfile: 'node_id host' or one host per line."),
               topology: Optional[str] = typer.Option(None, "--topology", "-t",
                                                      help="Topology to validate against (and take host names from)."),
               sets: Optional[List[str]] = SetOpt, any_inputs: bool = AnyInputsOpt,
               rules: str = typer.Option("host", "--rules", help="ocs: forwarding rules per destination host "
                                         "(host) or per destination switch (switch: smaller on large systems)."),
               slots: str = typer.Option("cores", "--slots", help="ompi4, ompi5, mpich: what a slot (a node's core "
                                         "index) counts: cores, or hwthreads when cores_per_node counts hardware "
                                         "threads (the printed command then tells the launcher)."),
               addresses: Optional[Path] = typer.Option(None, "--addresses", help="routes: 'host address' per line "
                                                        "(default: the emulator's, 198.18.0.0 + 1 + node)."),
               entry: Optional[int] = typer.Option(None, "--entry", min=0, help="routes: the entry of a schedule "
                                                   "to export (a static plan has one)."),
               output: Path = typer.Option(..., "--output", "-o", help="File to write (atomically); for routes a "
                                           "directory (one HOST.routes per host, written all or nothing).")) -> None:
    """Export a placement for a real launcher, circuits for an OCS controller, or a circuit plan's routes for
    the hosts (iproute2 batch files); refuses invalid plans.

    The OCS document is checked against the JSON Schema it is published with (its path is printed) before it
    is written."""
    from topoplan.core.errors import TopoplanError
    from topoplan.core.io import is_stdout
    from topoplan.reporting.export import FORMATS, SLOTS, STDOUT_FILE, export, read_hostfile

    if fmt not in FORMATS:
        raise TopoplanError(f"unknown export format {fmt!r} (formats: {', '.join(FORMATS)})")
    if slots not in SLOTS:
        raise TopoplanError(f"--slots: expected one of {', '.join(SLOTS)}, got {slots!r}")
    if slots != "cores" and fmt not in SLOT_FORMATS:   # no command of this format binds ranks to slots
        raise TopoplanError(f"--slots: applies to the {', '.join(SLOT_FORMATS)} formats only, not {fmt}")
    if sets and topology is None:   # the recorded topology is rebuilt with its own overrides: these would be lost
        raise TopoplanError(f"--set {sets[0]}: overrides the topology given with --topology, and none was given "
                            "(the plan's recorded topology is used with the overrides it was planned with)")
    if fmt == "routes":
        _export_routes(placement, hosts, topology, sets, any_inputs, rules, addresses, entry, output)
        return
    given = [o for o, v in zip(ROUTE_OPTIONS, (addresses, entry)) if v is not None]
    if given:
        raise TopoplanError(f"{given[0]}: applies to the routes format only")
    if fmt == "ocs":
        _export_ocs(placement, hosts, topology, sets, any_inputs, rules, output)
        return
    if rules != "host":
        raise TopoplanError("--rules: only the ocs format has forwarding rules")
    topo = None
    if topology is not None:
        from topoplan.core.topology_io import load_topology

        topo = load_topology(topology, sets or [])
    doc = plan_doc(placement)   # read once (None for a CSV placement)
    if topo is None:
        topo = _recorded_topology(placement, doc)
    # a placement planned on another machine (or an edited topology file) is refused; without a topology, a plan
    # whose rank_to_node was changed after planning still is
    check_plan_inputs(doc, f"--placement {placement}", any_inputs=any_inputs, topology=topo)
    if topo is None and hosts is None:
        raise TopoplanError("export needs --hosts or --topology (for host names)")
    names = read_hostfile(hosts, topo.n_nodes if topo is not None else None) if hosts is not None else None
    pl = _placement(placement, topo if topo is not None else names, doc)
    version = None
    if fmt in ("ompi4", "ompi5"):   # the rankfile option differs between Open MPI 4 and 5: print the installed one's
        from topoplan.traffic.recorder import openmpi_version

        version = openmpi_version()
    cmd = export(fmt, pl, output, hosts=names, topo=topo, slots=slots, openmpi=version[0] if version else None,
                 record=_record(placement, doc, topology, sets) if fmt == "json" else None)
    con = console()
    # as written, never read as markup (a path may hold [...]), and not wrapped: the command runs as printed
    con.print(f"wrote {output} ({pl.n_ranks} ranks)", markup=False, soft_wrap=True)
    if cmd:
        saved = (f" ({STDOUT_FILE}: what was written to standard output, saved to a file)"
                 if is_stdout(output) else "")
        con.print(f"run: {cmd}{saved}", markup=False, soft_wrap=True)
    if fmt in ("ompi4", "ompi5", "mpich"):
        con.print(_launch_note(fmt, output, pl.n_ranks, version, slots), markup=False, soft_wrap=True)


RECORDED = ("method", "seed", "inputs", "topology", "topology_spec", "topology_sets", "traffic")


def _record(placement: Path, doc, topology, sets) -> dict:
    """What the plan a ``json`` export comes from records (its seed, input fingerprints and topology), so the
    exported placement is checked against its inputs when read back; ``doc`` is its document (:func:`plan_doc`);
    ``--topology`` (with ``--set``) names the topology it was exported for."""
    if isinstance(doc, dict) and "rank_to_node" not in doc and isinstance(doc.get("schedule_result"), dict):
        doc = doc["schedule_result"]   # the placement a schedule was made for
    out = {k: doc[k] for k in RECORDED if k in doc} if isinstance(doc, dict) else {}
    from topoplan.core.placement import check_seed

    check_seed(out, str(placement))   # (checked when the placement was read, too: the one check of every reader)
    if topology is not None:
        out.pop("topology", None)   # the name of the recorded topology, which may not be this one
        out.update(topology_spec=topology, topology_sets=list(sets or []))
    return out


def _launch_note(fmt: str, output: Path, n_ranks: int, version, slots: str) -> str:
    """What the printed command assumed: the launcher it is for, and what a slot counts."""
    from topoplan.reporting.export import launch_command

    what = ("slots are hardware threads" if slots == "hwthreads" else
            "slots are cores (--slots hwthreads when cores_per_node counts hardware threads)")
    if fmt == "mpich":
        return f"for MPICH's Hydra; {what}"
    if version is not None:
        return f"for the Open MPI {'.'.join(map(str, version))} mpirun found here; {what}"
    other = 4 if fmt == "ompi5" else 5
    return (f"for Open MPI {fmt[-1]} (no Open MPI mpirun found here); with Open MPI {other}: "
            f"{launch_command(fmt, output, n_ranks, openmpi=other, slots=slots)}; {what}")


def _placement(placement: Path, hosts, doc):
    """The placement of a placement file, a plan with ``rank_to_node``, or a ``phases --schedule`` document;
    ``doc`` is the file's document (:func:`plan_doc`)."""
    from topoplan.core.errors import TopoplanError
    from topoplan.core.placement import placement_from_doc, read_placement

    if isinstance(doc, dict) and "rank_to_node" not in doc:
        sched = doc.get("schedule_result")
        if isinstance(sched, dict) and sched.get("rank_to_node") is not None:   # the placement it was scheduled for
            return placement_from_doc(sched, f"{placement}: schedule_result", hosts)
        if "order" in doc:   # `bcast -o`: its leaders' order, not a rank per core
            raise TopoplanError(f"{placement}: field 'rank_to_node': missing: a Bcast order, not a placement "
                                "(`topoplan bcast --rankfile FILE` writes its Open MPI rankfile)")
        if "circuits" in doc or "schedule" in doc or "schedule_result" in doc:
            raise TopoplanError(f"{placement}: field 'rank_to_node': missing: the circuit plan records no placement "
                                "to launch (export its circuits with FORMAT ocs)")
    if isinstance(doc, dict) and placement.suffix == ".zip":   # a plan archive (circuits -o plan.zip)
        if "rank_to_node" not in doc:
            raise TopoplanError(f"{placement}: field 'rank_to_node': missing")
        return placement_from_doc(doc, str(placement), hosts)
    return read_placement(placement, hosts)   # host names in the placement too


def _export_ocs(placement: Path, hosts, topology, sets, any_inputs: bool, rules: str, output: Path) -> None:
    """``export ocs``: a circuit plan or schedule, validated, as an OCS controller's document."""
    from topoplan.core.errors import TopoplanError
    from topoplan.reporting.export import read_hostfile
    from topoplan.reporting.ocs_export import OCS_SCHEMA, RULES, export_ocs, read_document

    if rules not in RULES:
        raise TopoplanError(f"--rules: expected one of {', '.join(RULES)}, got {rules!r}")
    doc = read_document(placement)   # a placement or Bcast order is refused here, before any topology is loaded
    topo = _plan_topology(placement, doc, topology, sets, any_inputs)
    names = read_hostfile(hosts, topo.n_nodes) if hosts is not None else None
    out = export_ocs(doc, output, topo=topo, hosts=names, rules=rules, check_inputs=not any_inputs,
                     where=str(placement))
    entries = out["entries"]
    changes = sum(1 for e in entries[1:] if e["connect"] or e["disconnect"])
    changes += sum(1 for e in entries for sl in (e.get("slots") or [])[1:] if sl["connect"] or sl["disconnect"])
    xcs = max((len(e["cross_connects"]) for e in entries), default=0)
    console().print(f"wrote {output} ({out['kind']}: {len(entries)} entr{'y' if len(entries) == 1 else 'ies'}, "
                    f"up to {xcs} cross-connects, {changes} reconfigurations; valid against its JSON Schema "
                    f"{OCS_SCHEMA})", markup=False, soft_wrap=True)


def _export_routes(placement: Path, hosts, topology, sets, any_inputs: bool, rules: str, addresses, entry,
                   output: Path) -> None:
    """``export routes``: a circuit plan, validated, as one iproute2 batch file per host in directory ``output``."""
    from topoplan.core.errors import TopoplanError
    from topoplan.reporting.export import launch_command, read_hostfile
    from topoplan.reporting.ocs_export import read_document
    from topoplan.reporting.routes_export import export_routes, read_addresses

    if rules != "host":
        raise TopoplanError("--rules: the routes format writes per destination host rules only")
    if output.exists() and not output.is_dir():
        raise TopoplanError(f"{output}: exists and is not a directory (routes are one file per host)")
    doc = read_document(placement)
    topo = _plan_topology(placement, doc, topology, sets, any_inputs)
    names = read_hostfile(hosts, topo.n_nodes)[:topo.n_nodes] if hosts is not None else topo.host_names()
    addrs = read_addresses(addresses, names) if addresses is not None else None
    files = export_routes(doc, topo, output, hosts=names, addresses=addrs, where=str(placement),
                          check_inputs=not any_inputs, entry=entry)
    n_routes = sum(1 for p in files.values() for ln in p.read_text().splitlines() if ln.startswith("route "))
    con = console()
    con.print(f"wrote {output}/ ({len(files)} hosts, {n_routes} routes)", markup=False, soft_wrap=True)
    con.print(f"apply on each host: {launch_command('routes', output, len(files)).removesuffix(' (on each host)')} "
              "(relays need net.ipv4.ip_forward=1 and rp_filter=0)", markup=False, soft_wrap=True)


export_cmd.output_dir_formats = ("routes",)


def _plan_topology(placement: Path, doc, topology, sets, any_inputs: bool):
    """The topology of a circuit plan or schedule: ``--topology`` (with ``--set``), else the one it records;
    refused when the plan was made for another."""
    from topoplan.core.errors import TopoplanError

    if topology is not None:
        from topoplan.core.topology_io import load_topology

        topo = load_topology(topology, sets or [])
    else:
        topo = _recorded_topology(placement, doc)
        if topo is None:
            raise TopoplanError(f"{placement}: records no topology spec (field 'topology_spec'); pass --topology "
                                "(and the --set overrides it was planned with)")
    check_plan_inputs(doc, f"--placement {placement}", any_inputs=any_inputs, topology=topo)
    return topo


def _recorded_topology(placement: Path, doc=None):
    """The topology a ``topoplan place`` JSON (or ``doc``, read from it) was planned on (so its cores are checked),
    or None."""
    from topoplan.core.errors import TopoplanError
    from topoplan.core.topology_io import load_topology

    if doc is None:
        doc = plan_doc(placement)
    spec = doc.get("topology_spec") if isinstance(doc, dict) else None
    if not isinstance(spec, str):
        return None
    try:
        return load_topology(spec, doc.get("topology_sets") or [])
    except TopoplanError as exc:
        raise TopoplanError(f"{placement}: was planned on topology {spec!r}, which cannot be loaded here ({exc}); "
                            "pass --topology") from None
