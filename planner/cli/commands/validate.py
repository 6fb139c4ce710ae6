"""``topoplan validate``: check a plan file against a topology (circuit plans, placements, Bcast orders)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from planner.cli.commands.common import JsonOpt, SetOpt, console, emit


def register(app: typer.Typer) -> None:
    app.command("validate")(validate_cmd)


def validate_cmd(plan: Path = typer.Argument(..., help="Plan JSON (topoplan circuits/place/bcast -o)."),
                 topology: str = typer.Option(..., "--topology", "-t", help="Preset, YAML file or Slurm topology.conf."),
                 sets: Optional[List[str]] = SetOpt, json_mode: bool = JsonOpt) -> None:
    """Validate a plan by the keys it has: circuits/forwarding, rank_to_node (placement), order (Bcast)."""
    from planner.core.io import read_json
    from planner.core.topology_io import load_topology
    from planner.problems.validate import validate

    topo = load_topology(topology, sets or [])
    doc = read_json(plan, "plan")
    summary = validate(doc, topo, where=str(plan))
    emit({"plan": str(plan), "valid": True, **summary}, json_mode, None)
    if not json_mode:
        console().print(f"{plan}: valid ({'; '.join(summary['checked'])})")
