"""``topoplan validate``: check a plan file against a topology (circuit plans, placements, Bcast orders)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from planner.commands.common import JsonOpt, SetOpt, console, emit


def register(app: typer.Typer) -> None:
    app.command("validate")(validate_cmd)


def validate_cmd(plan: Path = typer.Argument(..., help="Plan JSON (topoplan circuits/place/bcast -o)."),
                 topology: str = typer.Option(..., "--topology", "-t", help="Preset, YAML file or Slurm topology.conf."),
                 sets: Optional[List[str]] = SetOpt, json_mode: bool = JsonOpt) -> None:
    """Validate a plan by the keys it has: circuits/forwarding, rank_to_node (placement), order (Bcast)."""
    from planner.io import read_json
    from planner.topology_io import load_topology

    topo = load_topology(topology, sets or [])
    doc = read_json(plan, "plan")
    summary = validate_document(doc, topo, str(plan))
    emit({"plan": str(plan), "valid": True, **summary}, json_mode, None)
    if not json_mode:
        console().print(f"{plan}: valid ({'; '.join(summary['checked'])})")


def validate_document(doc, topo, where: str) -> dict:
    """Validate every plan kind present in ``doc``; returns what was checked. Raises TopoplanError."""
    from planner.errors import TopoplanError

    if not isinstance(doc, dict):
        raise TopoplanError(f"{where}: expected a JSON object")
    checked, out = [], {}
    if "circuits" in doc or "forwarding" in doc:
        from planner.circuits.problem import validate_plan_dict

        validate_plan_dict(doc, topo, where=where)
        n_entries = sum(len(r) for r in (doc.get("forwarding") or {}).values())
        checked.append(f"circuit plan: {len(doc.get('circuits') or [])} circuits, {n_entries} forwarding entries")
        out["circuits"] = len(doc.get("circuits") or [])
    if doc.get("rank_to_node") is not None:
        from planner.placement import placement_from_doc

        pl = placement_from_doc(doc, where)
        pl.validate(topo, where=where)
        checked.append(f"placement: {pl.n_ranks} ranks")
        out["ranks"] = pl.n_ranks
    if "order" in doc:
        order = doc["order"]
        if not isinstance(order, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in order):
            raise TopoplanError(f"{where}: field 'order': expected a list of integers")
        if len(set(order)) != len(order):
            dup = next(x for x in order if order.count(x) > 1)
            raise TopoplanError(f"{where}: field 'order': {dup} appears twice (not a permutation)")
        bad = [x for x in order if not 0 <= x < topo.n_nodes]
        if bad:
            raise TopoplanError(f"{where}: field 'order': node {bad[0]} does not exist ({topo.n_nodes} nodes)")
        # 'allocation' is the user's spec string (e.g. gen:nodes=16,...); the node ids are 'allocation_nodes'
        alloc = doc.get("allocation_nodes")
        if alloc is not None:
            if not isinstance(alloc, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in alloc):
                raise TopoplanError(f"{where}: field 'allocation_nodes': expected a list of integers")
            if sorted(order) != sorted(alloc):
                missing = sorted(set(alloc) ^ set(order)) or [len(order) - len(alloc)]
                raise TopoplanError(f"{where}: field 'order': not a permutation of 'allocation_nodes' "
                                    f"(node {missing[0]} is in one but not the other)")
            root = doc.get("root")
            # the root keeps its rank: the reordered communicator's Bcast(root=r) must send from the same node
            if isinstance(root, int) and 0 <= root < len(order) and order[root] != alloc[root]:
                raise TopoplanError(f"{where}: field 'order': the root (rank {root}) moved from node "
                                    f"{alloc[root]} to node {order[root]}")
        checked.append(f"Bcast order of {len(order)}")
        out["order"] = len(order)
    if not checked:
        raise TopoplanError(f"{where}: nothing to validate (no 'circuits', 'forwarding', 'rank_to_node' or 'order')")
    out["checked"] = checked
    return out
