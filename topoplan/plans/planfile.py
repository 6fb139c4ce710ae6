"""Circuit plan files: the JSON the simulator, ``topoplan validate`` and ``topoplan simulate --circuits`` read.

Keys (the contract with :mod:`topoplan.sim.network`):

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

A plan written to a name ending in ``.zip`` is a *plan archive*, the compact form of large tables: a zip
holding ``plan.json`` (the document without ``forwarding``, plus ``archive``: ``{"format":
"topoplan-circuit-plan", "version": 1, "forwarding": "next_hop.npy"}``) and ``next_hop.npy`` (the tables as
a ``next_hop[node, switch]`` array, -1 = no entry, in NumPy's format; compressed). Every reader of plans
(:func:`read_plan`, :func:`read_document`: ``simulate --circuits``, ``validate``) takes either form by its
content and validates it the same way; an archive of another version, or damaged, is a one-line error.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import numpy as np

from topoplan.core.errors import TopoplanError
from topoplan.core.io import (ARCHIVE_DOC, ARCHIVE_FORMAT, ARCHIVE_TABLES, ARCHIVE_VERSION, atomic_write, dumps,
                              is_json_document, is_plan_archive, read_json, read_plan_archive, write_json)
from topoplan.plans.circuits import (ForwardingTables, _validate, array_from_tables,
                                     validate_plan_dict)

__all__ = ["ARCHIVE_FORMAT", "ARCHIVE_VERSION", "plan_document", "write_plan", "read_plan", "read_document",
           "plan_file_document"]


def plan_document(result, **extra) -> dict:
    """The plan file's content for a :class:`topoplan.problems.result.PlanResult` (plus ``extra`` keys, e.g. topology).

    Parameters
    ----------
    result : PlanResult
    **extra
        Keys added to the document.

    Returns
    -------
    dict

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.matrix import from_arrays
    >>> from topoplan.problems.circuits.problem import CircuitProblem
    >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=4"])   # OCS nodes 0-3, 16-19, ...
    >>> traffic = from_arrays(64, range(4, 12), range(20, 28), [4e7] * 8)  # non-OCS nodes, switch 0 -> 1
    >>> prob = CircuitProblem.build(topo, traffic, placement=list(range(64)))
    >>> from topoplan.problems.circuits.problem import solve
    >>> doc = plan_document(solve(prob, "three-step"), topology="paper003")
    >>> doc["method"], doc["circuits"], doc["topology"]
    ('three-step', [[0, 16], [1, 17], [2, 18], [3, 19]], 'paper003')
    """
    doc = result.to_dict()
    doc.update(extra)
    return doc


def write_plan(path, result, topo, *, validated: bool = False, **extra) -> dict:
    """Validate a circuit plan against ``topo`` and write it atomically (a name ending in ``.zip``: as a plan
    archive, see the module). Returns the document.

    Parameters
    ----------
    path : str or path
    result : PlanResult
    topo : TreeTopology
        The hybrid topology the plan is for.
    validated : bool, optional
        The plan was validated against ``topo`` already and has not changed since (a result of
        :func:`topoplan.problems.circuits.problem.solve`, which validates every plan it returns): written
        without checking it a second time (on 16,384 nodes a check reads 8 million forwarding entries).
    **extra
        Keys added to the document.

    Returns
    -------
    dict
        The document written.

    Raises
    ------
    TopoplanError
        For an invalid plan (nothing is written) or an unwritable path.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.matrix import from_arrays
    >>> from topoplan.problems.circuits.problem import CircuitProblem
    >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=4"])   # OCS nodes 0-3, 16-19, ...
    >>> traffic = from_arrays(64, range(4, 12), range(20, 28), [4e7] * 8)  # non-OCS nodes, switch 0 -> 1
    >>> prob = CircuitProblem.build(topo, traffic, placement=list(range(64)))
    >>> import os, tempfile
    >>> from topoplan.problems.circuits.problem import solve
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "plan.json")
    >>> _ = write_plan(path, solve(prob, "three-step"), topo)
    >>> read_plan(path, topo)["circuits"]
    [[0, 16], [1, 17], [2, 18], [3, 19]]
    """
    doc = plan_document(result, **extra) if not isinstance(result, dict) else dict(result, **extra)
    if not validated:
        validate_plan_dict(doc, topo, where=str(path))
    if str(path).endswith(".zip"):
        _write_archive(path, doc, topo)
    else:
        write_json(path, doc)
    return doc


def _write_archive(path, doc: dict, topo) -> None:
    """The plan archive of ``doc`` (see the module), written atomically."""
    fwd = doc.get("forwarding") or {}
    n, s = topo.n_nodes, topo.n_switches
    nh = fwd.next_hop if isinstance(fwd, ForwardingTables) else array_from_tables(fwd, n, s)
    dtype = next(d for d in (np.int16, np.int32, np.int64) if max(nh.shape[0], 1) <= np.iinfo(d).max)
    head = {k: v for k, v in doc.items() if k != "forwarding"}
    head["archive"] = {"format": ARCHIVE_FORMAT, "version": ARCHIVE_VERSION, "forwarding": ARCHIVE_TABLES}
    try:
        text = dumps(head)
    except TopoplanError as exc:
        raise TopoplanError(f"{path}: {exc}; nothing written") from None
    table = io.BytesIO()
    np.save(table, nh.astype(dtype), allow_pickle=False)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        z.writestr(ARCHIVE_DOC, text + "\n")
        z.writestr(ARCHIVE_TABLES, table.getvalue())
    atomic_write(path, out.getvalue())


def read_document(path, what: str = "plan") -> dict:
    """A plan file's document, JSON or plan archive (by its content), not validated: an archive's tables come
    back as a :class:`topoplan.plans.circuits.ForwardingTables`.

    Parameters
    ----------
    path : str or path
    what : str, optional
        Names the kind of file in messages.

    Returns
    -------
    object
        The document (a JSON file may hold anything).

    Raises
    ------
    TopoplanError
        One line naming the file: missing, malformed JSON, or a damaged archive or one of another version.

    Examples
    --------
    >>> import os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "plan.zip")
    >>> with open(path, "wb") as fh:
    ...     _ = fh.write(b"PK\\x03\\x04 not a zip at all")
    >>> read_document(path)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: .../plan.zip: damaged plan archive (File is not a zip file)
    """
    if not is_plan_archive(path, what):
        return read_json(path, what)
    doc, nh = read_plan_archive(path, what)
    doc["forwarding"] = ForwardingTables(nh, source=ARCHIVE_TABLES)   # validated against a topology when used
    return doc


def plan_file_document(spec) -> dict | None:
    """The document of a plan or placement given by name (``-p``, ``--circuits``, a sweep's ``placement``):
    a JSON file (by its name or content) or a plan archive, else None (a named placement such as
    ``sequential``, a placement CSV, a missing file: their readers say what is wrong).

    Parameters
    ----------
    spec : str or path

    Returns
    -------
    dict or None
        None also for a JSON file that holds no object.

    Raises
    ------
    TopoplanError
        For a malformed JSON file or a damaged archive (:func:`read_document`).

    Examples
    --------
    >>> import os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "placement")
    >>> with open(path, "w") as fh:
    ...     _ = fh.write('{"rank_to_node": [0, 1]}')
    >>> plan_file_document(path), plan_file_document("sequential")
    ({'rank_to_node': [0, 1]}, None)
    """
    path = Path(str(spec))
    if not path.is_file() or not (path.name.lower().endswith((".json", ".json.gz")) or is_plan_archive(path)
                                  or is_json_document(path, "plan")):
        return None   # (a placement CSV, plain or gzipped, is read by the placement's reader)
    doc = read_document(path, "plan")
    return doc if isinstance(doc, dict) else None


def read_plan(path, topo=None) -> dict:
    """Read a circuit plan file (JSON or plan archive); with ``topo``, validate it (one-line
    :class:`TopoplanError` on any fault).

    With ``topo``, large tables (:data:`topoplan.plans.circuits.ARRAY_MIN_ENTRIES` nodes x switches or more)
    come back as a :class:`topoplan.plans.circuits.ForwardingTables` (the array the checks read; the same
    mapping) rather than as dicts.

    Parameters
    ----------
    path : str or path
    topo : TreeTopology, optional

    Returns
    -------
    dict
        The plan document.

    Raises
    ------
    TopoplanError
        For a missing or malformed file, or (with ``topo``) an invalid plan.

    Examples
    --------
    >>> import json, os, tempfile
    >>> from topoplan.core.topology_io import load_topology
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "plan.json")
    >>> with open(path, "w") as fh:
    ...     json.dump({"circuits": [[0, 1]], "forwarding": {}}, fh)
    >>> read_plan(path)["circuits"]
    [[0, 1]]
    >>> read_plan(path, load_topology("paper003"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: .../plan.json: field 'circuits[0]': nodes 0 and 1 are under the same switch 0
    """
    doc = read_document(path, "circuit plan")
    if not isinstance(doc, dict) or "circuits" not in doc:
        raise TopoplanError(f"{path}: not a circuit plan (no 'circuits' key)")
    if topo is not None:
        _validate(doc, topo, str(path), None, as_tables=True)
    return doc
