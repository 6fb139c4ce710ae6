"""``topoplan validate``: check a plan file against a topology (circuit plans, placements, Bcast orders)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from topoplan.cli.commands.common import AnyInputsOpt, JsonOpt, SetOpt, check_plan_inputs, console, emit


def register(app: typer.Typer) -> None:
    app.command("validate")(validate_cmd)


def validate_cmd(plan: Path = typer.Argument(..., help="Plan JSON (topoplan circuits/place/bcast -o, export "
                                             "ocs/json), or a placement CSV (rank,node[,slot])."),
                 topology: str = typer.Option(..., "--topology", "-t", help="Preset, YAML file or Slurm topology.conf."),
                 sets: Optional[List[str]] = SetOpt,
                 traffic: Optional[str] = typer.Option(None, "--traffic", "-T", help="Also check that the plan was "
                                                       "made for this traffic (generator spec, matrix or trace)."),
                 any_inputs: bool = AnyInputsOpt, json_mode: bool = JsonOpt) -> None:
    """Validate a plan by the keys it has: circuits/forwarding, rank_to_node (placement), order (Bcast).

    A plan made for another topology (after --set overrides) or traffic than the ones given is
    invalid too (the plan records fingerprints of its inputs). With --json an invalid plan prints
    {"valid": false, "error": ...} and still exits 2.
    """
    from topoplan.core.errors import TopoplanError
    from topoplan.core.placement import load_placement, read_placement
    from topoplan.core.topology_io import load_topology
    from topoplan.plans.planfile import read_document
    from topoplan.plans.validate import validate
    from topoplan.reporting.ocs_export import OCS_FORMAT, schedule_from_ocs

    topo = load_topology(topology, sets or [])
    tr = None
    if traffic is not None:
        from topoplan.traffic.sources import load_source

        _, tr = load_source(traffic)
    csv = plan.name.lower().endswith((".csv", ".csv.gz"))   # a placement CSV (rank,node[,slot]), as -p takes
    doc = None if csv else read_document(plan, "plan")   # JSON or a circuit plan archive
    try:
        if csv:   # records no inputs: with --traffic, its ranks must be the traffic's
            pl = load_placement(str(plan), tr.n_ranks, topo) if tr is not None else read_placement(plan, topo)
            pl.validate(topo, where=str(plan))
            summary = {"ranks": pl.n_ranks, "checked": [f"placement: {pl.n_ranks} ranks"]}
        else:
            check_plan_inputs(doc, str(plan), any_inputs=any_inputs, topology=topo, traffic=tr)
            if isinstance(doc, dict) and doc.get("format") == OCS_FORMAT:   # `export ocs`: its circuits and rules
                doc = schedule_from_ocs(doc, where=str(plan))   # too, not its placement alone
            summary = validate(doc, topo, where=str(plan), check_inputs=False)
            if tr is not None and summary.get("ranks", tr.n_ranks) != tr.n_ranks:   # --any-inputs or not: unusable
                raise TopoplanError(f"{plan}: places {summary['ranks']} ranks but the traffic has {tr.n_ranks}")
    except TopoplanError as exc:
        if json_mode:
            emit({"plan": str(plan), "valid": False, "error": str(exc)}, True, None)
        raise
    emit({"plan": str(plan), "valid": True, **summary}, json_mode, None)
    if not json_mode:
        console().print(f"{plan}: valid ({'; '.join(summary['checked'])})")
