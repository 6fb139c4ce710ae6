"""Circuit plan files: the JSON the simulator, ``topoplan validate`` and ``topoplan simulate --circuits`` read.

Keys (the contract with :mod:`sim.network`):

- ``circuits``: ``[[node_a, node_b], ...]`` -- OCS node pairs under different switches;
- ``forwarding``: ``{"<node>": {"<destination switch>": <next hop node>}}`` -- for a large
  inter-switch message at a node bound for a node under that switch, the next hop is the
  node's circuit partner (cross the circuit) or another node under its own switch (EPS hop
  to a relay); at a node under the destination switch the message is delivered over the EPS;
  a missing entry means fall back to the EPS uplinks from the current node;
- ``load_sharing``: how parallel circuits share load (different source nodes, different relays);
- ``hop_limit``, ``threshold_B``, ``rank_to_node`` (the placement planned for);
- the common result keys: ``method``, ``seed``, ``objective``, ``metrics``
  (``congestion_bound_s``, ``uplink_bytes``, ``circuits_used``, ...), ``bound``, ``gap``,
  ``status``, ``wall_s``, ``options``.
"""

from __future__ import annotations

from planner.circuits.problem import validate_plan_dict
from planner.errors import TopoplanError
from planner.io import read_json, write_json


def plan_document(result, **extra) -> dict:
    """The plan file's content for a :class:`planner.result.PlanResult` (plus ``extra`` keys, e.g. topology)."""
    doc = result.to_dict()
    doc.update(extra)
    return doc


def write_plan(path, result, topo, **extra) -> dict:
    """Validate a circuit plan against ``topo`` and write it atomically. Returns the document."""
    doc = plan_document(result, **extra) if not isinstance(result, dict) else dict(result, **extra)
    validate_plan_dict(doc, topo, where=str(path))
    write_json(path, doc)
    return doc


def read_plan(path, topo=None) -> dict:
    """Read a circuit plan file; with ``topo``, validate it (one-line :class:`TopoplanError` on any fault)."""
    doc = read_json(path, "circuit plan")
    if not isinstance(doc, dict) or "circuits" not in doc:
        raise TopoplanError(f"{path}: not a circuit plan (no 'circuits' key)")
    if topo is not None:
        validate_plan_dict(doc, topo, where=str(path))
    return doc
