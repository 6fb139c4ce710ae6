"""The emulator's one contact with plans: circuit plans (circuits, ports, route files) and Bcast orders.

A circuit plan is read and validated by the plan documents' public functions
(:func:`topoplan.plans.planfile.read_plan`), its optical ports are numbered as the OCS export
numbers them, and its forwarding tables become the route files of ``topoplan export routes``, which the
emulated hosts apply line by line after checking them (:func:`topoplan.reporting.routes_export.read_route_file`).

A Bcast plan (``topoplan bcast -o``) orders the node leaders; :func:`bcast_keys` turns it into the key of
every rank for the Bcast PMPI library (``c/topoplan_bcast.c``), and :func:`reordered_bcasts` gives the
trace the simulator predicts for the reordered run.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from topoplan.core.errors import TopoplanError
from topoplan.core.io import read_json
from topoplan.plans.planfile import read_plan
from topoplan.plans.validate import validate
from topoplan.reporting.ocs_export import ocs_document
from topoplan.reporting.routes_export import export_routes
from topoplan.traffic.trace import OP_CODE, WORLD

__all__ = ["read_circuit_plan", "plan_circuits", "write_route_files", "read_bcast_plan", "bcast_keys",
           "reordered_bcasts"]


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

    Examples
    --------
    >>> import tempfile
    >>> from topoplan.core.topology_io import load_topology
    >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=1"])
    >>> tmp = tempfile.TemporaryDirectory()
    >>> files = write_route_files({"circuits": [[0, 16]], "forwarding": {"1": {"1": 0}}}, topo, tmp.name)
    >>> open(files["node0001"]).read().splitlines()[1]
    'route replace 198.18.0.17/32 via 198.18.0.1 dev eth0'
    """
    return export_routes(doc, topo, directory, where=where, check_inputs=False)


def read_bcast_plan(path, topo) -> dict:
    """Read a ``topoplan bcast`` plan and validate it against ``topo`` (one-line error otherwise).

    Examples
    --------
    >>> import json, os, tempfile
    >>> from topoplan.core.topology_io import load_topology
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "bcast.json")
    >>> _ = open(path, "w").write(json.dumps({"problem": "bcast", "order": [0, 5, 5], "root": 0}))
    >>> read_bcast_plan(path, load_topology("paper003"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: ...bcast.json: ...
    """
    doc = read_json(path, "Bcast plan")
    if not isinstance(doc, dict) or not isinstance(doc.get("order"), list):
        raise TopoplanError(f"{path}: field 'order': missing: not a Bcast plan (topoplan bcast -o)")
    validate(doc, topo, where=str(path), check_inputs=False)
    return doc


def bcast_keys(doc: dict, placement, n_ranks: int, *, where: str = "Bcast plan") -> list:
    """The key of every rank for the Bcast library: the position of its node in the plan's order.

    One rank per node (the node leaders): rank ``r`` runs on ``placement.rank_to_node[r]``, which must be
    one of the plan's nodes, each used once.

    Examples
    --------
    >>> from topoplan.core.placement import Placement
    >>> import numpy as np
    >>> bcast_keys({"order": [2, 0, 1]}, Placement(np.array([0, 1, 2]), np.zeros(3, int)), 3)
    [1, 2, 0]
    """
    import numpy as np

    order = [int(v) for v in doc["order"]]
    nodes = np.asarray(placement.rank_to_node[:n_ranks]).tolist()
    if len(order) != n_ranks or sorted(order) != sorted(nodes) or len(set(nodes)) != n_ranks:
        raise TopoplanError(f"{where}: field 'order': orders {len(order)} node leaders; the run places its "
                            f"{n_ranks} ranks on other nodes (or several on one): one rank per plan node")
    where_in = {v: i for i, v in enumerate(order)}
    return [where_in[v] for v in nodes]


def reordered_bcasts(trace, keys: list):
    """``trace`` with its Bcasts on MPI_COMM_WORLD moved to a communicator in the order of ``keys``: what the
    simulator replays for the run with the Bcast library (the broadcast tree over the plan's order).

    Examples
    --------
    >>> from topoplan.traffic.trace import Trace
    >>> t = Trace.from_records([(r, "bcast", -1, 8, 0, 3, 0.0, 0.0) for r in range(3)], 3)
    >>> r = reordered_bcasts(t, [1, 2, 0])
    >>> r.members(int(r.comm[0])).tolist(), r.root.tolist()
    ([2, 0, 1], [0, 0, 0])
    >>> reordered_bcasts(t, [1, 1, 0])
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: field 'bcast_keys': expected a permutation of the 3 ranks
    """
    n = trace.n_ranks
    if len(keys) != n or sorted(int(k) for k in keys) != list(range(n)):
        raise TopoplanError(f"field 'bcast_keys': expected a permutation of the {n} ranks")
    members = np.argsort(np.asarray(keys))          # new rank k is the world rank with key k
    new_id = max([int(c) for c in trace.communicators] + [int(trace.comm.max(initial=0)), 0]) + 1
    on_world = (trace.op == OP_CODE["bcast"]) & ((trace.comm == WORLD) | ~np.isin(trace.comm, list(trace.communicators)))
    comm = trace.comm.copy()
    comm[on_world] = new_id
    comms = dict(trace.communicators)
    comms[new_id] = members.astype(np.int64)
    return dataclasses.replace(trace, comm=comm, communicators=comms)
