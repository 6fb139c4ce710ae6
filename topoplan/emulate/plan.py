"""The emulator's one contact with circuit plans: read and validate one, and turn it into circuits and route files.

A plan is read and validated by the plan documents' public functions
(:func:`topoplan.problems.circuits.planfile.read_plan`), its optical ports are numbered as the OCS export
numbers them, and its forwarding tables become the route files of ``topoplan export routes``, which the
emulated hosts apply line by line after checking them (:func:`topoplan.reporting.routes_export.read_route_file`).
"""

from __future__ import annotations

from topoplan.core.errors import TopoplanError

__all__ = ["read_circuit_plan", "plan_circuits", "write_route_files"]


def read_circuit_plan(path, topo) -> dict:
    """Read a circuit plan file and validate it against ``topo`` (one-line error otherwise).

    Parameters
    ----------
    path : str or path
    topo : TreeTopology
        The hybrid topology.

    Returns
    -------
    dict
        The plan document.

    Examples
    --------
    >>> import json, os, tempfile
    >>> from topoplan.core.topology_io import load_topology
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "plan.json")
    >>> _ = open(path, "w").write(json.dumps({"circuits": [[0, 1]], "forwarding": {}}))
    >>> read_circuit_plan(path, load_topology("paper003"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: .../plan.json: field 'circuits[0]': nodes 0 and 1 are under the same switch 0
    """
    from topoplan.problems.circuits.planfile import read_plan

    return read_plan(path, topo)


def plan_circuits(doc: dict, topo, *, where: str = "plan") -> list:
    """The plan's circuits with their optical ports, ``[(node_a, node_b, port_a, port_b), ...]``.

    Ports are numbered as the OCS document numbers them (:mod:`topoplan.reporting.ocs_export`), so the
    emulated host's ``ocs<port>`` is the port a controller would connect.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=1", "ocs.ports_per_node=2"])
    >>> plan_circuits({"circuits": [[0, 16], [0, 32]], "forwarding": {}}, topo)
    [(0, 16, 0, 0), (0, 32, 1, 0)]
    """
    from topoplan.reporting.ocs_export import ocs_document

    ocs = ocs_document(doc, topo, where=where, check_inputs=False)
    if len(ocs["entries"]) != 1:
        raise TopoplanError(f"{where}: the emulator runs static circuit plans, not a schedule of "
                            f"{len(ocs['entries'])} entries")
    out = []
    for xc in ocs["entries"][0]["cross_connects"]:
        a, b = xc["a"], xc["b"]
        out.append((int(a["node"]), int(b["node"]), int(a["node_port"]), int(b["node_port"])))
    return out


def write_route_files(doc: dict, topo, directory, *, where: str = "plan") -> dict:
    """Write the plan's route files (``topoplan export routes``, the emulator's addresses) into ``directory``.

    Returns
    -------
    dict
        ``{host: path}``.
    """
    from topoplan.reporting.routes_export import export_routes

    return export_routes(doc, topo, directory, where=where, check_inputs=False)
