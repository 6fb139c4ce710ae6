"""Placements: which node and core (slot) every rank runs on.

The default is ``sequential``: ranks fill the cores of a node, then the
next node, switch by switch (003's "Sequential"). A placement file is the
JSON result of ``topoplan place`` (keys ``rank_to_node`` and optionally
``rank_to_slot``) or a CSV ``rank,node[,slot]``. A node is a node id or a
host name of the topology (``cn07``, any case): :func:`node_ids` is the one
place that turns what users write into node ids (placement files, Bcast
allocations).
"""

from __future__ import annotations

from dataclasses import dataclass, field as dataclass_field
from pathlib import Path
from typing import Callable

import numpy as np

from topoplan.core.csvtable import read_csv_table, row_line, to_numbers
from topoplan.core.errors import TopoplanError
from topoplan.core.io import is_json_document, is_plan_archive, read_json, read_plan_archive
from topoplan.core.topology_io import cores_hint
from topoplan.core.units import ascii_int, ascii_int_shaped, is_ascii_int, shown

__all__ = ["Placement", "sequential", "int_array", "from_nodes", "load_placement", "read_placement",
           "placement_from_doc", "check_seed", "node_ids"]


@dataclass
class Placement:
    """``rank_to_node[r]`` and ``rank_to_slot[r]`` (core index on that node) of every rank.

    Parameters
    ----------
    rank_to_node : numpy.ndarray of int64
        Node of every rank.
    rank_to_slot : numpy.ndarray of int64
        Core of every rank on its node (``0..cores-1``).
    origin : callable, optional
        Where a rank was read, for error messages: ``origin(rank, column)`` (``column`` ``"node"`` or
        ``"slot"``) gives ``"p.csv:7: field 'node'"``. Set by :func:`read_placement` and
        :func:`placement_from_doc`, so that :meth:`validate` names the file, line and field of a bad rank.

    See Also
    --------
    load_placement : a named placement or a file, validated.
    topoplan.problems.placement : methods that compute placements from traffic.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> topo = load_topology("paper003")          # 64 nodes x 4 cores
    >>> p = Placement(np.array([0, 0, 1]), np.array([0, 1, 0]))
    >>> p.n_ranks, p.to_dict()
    (3, {'rank_to_node': [0, 0, 1], 'rank_to_slot': [0, 1, 0]})
    >>> p.validate(topo)
    >>> Placement(np.array([0, 0]), np.array([0, 0])).validate(topo)
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: placement: ranks 0 and 1 share node 0 slot 0
    >>> placement_from_doc({"rank_to_node": [0, 64]}, "p.json").validate(topo)
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: p.json: field 'rank_to_node': item 1: rank 1 is on node 64, but the topology has 64 nodes
    """

    rank_to_node: np.ndarray
    rank_to_slot: np.ndarray
    origin: Callable[[int, str], str] | None = dataclass_field(default=None, repr=False, compare=False)

    @property
    def n_ranks(self) -> int:
        return len(self.rank_to_node)

    def validate(self, topo, where: str = "placement") -> None:
        """Every rank placed once on an existing node and a free slot within the node's cores.

        Errors name ``where``, or, for a placement read from a file, the file, line (or item) and
        field of the rank at fault (``origin``)."""
        n = topo.n_nodes
        cores = topo.node_cores()
        node, slot = self.rank_to_node, self.rank_to_slot

        def at(r, column):
            return self.origin(int(r), column) if self.origin is not None else where

        if len(node) != len(slot):
            raise TopoplanError(f"{where}: rank_to_node and rank_to_slot differ in length")
        if len(node) == 0:
            raise TopoplanError(f"{where}: field 'rank_to_node': no ranks placed (empty list)")
        bad = np.flatnonzero((node < 0) | (node >= n))
        if bad.size:
            r = bad[0]
            raise TopoplanError(f"{at(r, 'node')}: rank {r} is on node {node[r]}, but the topology has {n} nodes")
        bad = np.flatnonzero((slot < 0) | (slot >= cores[node]))
        if bad.size:
            r = bad[0]
            raise TopoplanError(f"{at(r, 'slot')}: rank {r} is on slot {slot[r]} of node {node[r]}, which has "
                                f"{cores[node[r]]} cores")
        key = node * (cores.max() + 1) + slot
        uniq, counts = np.unique(key, return_counts=True)
        if (counts > 1).any():
            k = uniq[counts > 1][0]
            ranks = np.flatnonzero(key == k)[:2].tolist()
            raise TopoplanError(f"{at(ranks[1], 'slot')}: ranks {ranks[0]} and {ranks[1]} share node "
                                f"{node[ranks[0]]} slot {slot[ranks[0]]}")

    def to_dict(self) -> dict:
        return {"rank_to_node": self.rank_to_node.tolist(), "rank_to_slot": self.rank_to_slot.tolist()}

    def __getstate__(self):   # origin is a closure over the file read: another process gets the placement alone
        return {**self.__dict__, "origin": None}


def sequential(n_ranks: int, topo) -> Placement:
    """Block placement: rank r on node r // cores, slot r % cores (uniform cores).

    Ranks fill the cores of a node, then the next node; with varied core
    counts every node is filled in turn.

    Parameters
    ----------
    n_ranks : int
        Ranks to place.
    topo : Topology
        The topology (its ``node_cores()``).

    Returns
    -------
    Placement

    Raises
    ------
    TopoplanError
        If the ranks do not fit the topology's cores.

    References
    ----------
    003 section 4.1.3, "Sequential".

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> p = sequential(8, load_topology("paper003"))
    >>> p.rank_to_node.tolist(), p.rank_to_slot.tolist()
    ([0, 0, 0, 0, 1, 1, 1, 1], [0, 1, 2, 3, 0, 1, 2, 3])
    >>> sequential(1000, load_topology("paper003"))
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: 1000 ranks do not fit the topology: 64 nodes x 4 cores = 256 slots
    """
    cores = topo.node_cores()
    capacity = int(cores.sum())
    if n_ranks > capacity:
        raise TopoplanError(f"{n_ranks} ranks do not fit the topology: {topo.n_nodes} nodes x "
                            f"{int(cores[0]) if len(set(cores.tolist())) == 1 else 'varied'} cores = {capacity} slots"
                            f"{cores_hint(topo)}")
    node = np.repeat(np.arange(topo.n_nodes), cores)[:n_ranks]
    first = np.concatenate([[0], np.cumsum(cores)[:-1]])
    slot = np.arange(n_ranks) - first[node]
    return Placement(node.astype(np.int64), slot.astype(np.int64))


def int_array(values, where: str) -> np.ndarray:
    """A JSON list of integers as an int64 array; anything else (floats such as 1.5, strings, booleans,
    values past int64) is a :class:`TopoplanError` naming ``where`` -- never silently truncated.

    Whole floats (``3.0``, from tools that only write floats) are accepted.

    Parameters
    ----------
    values : list
        The JSON value (or a 1-D tuple or array, as code gives node ids).
    where : str
        Prefix of error messages (file and field).

    Returns
    -------
    numpy.ndarray of int64

    Raises
    ------
    TopoplanError
        If ``values`` is not a list, or an item is not an integer or is out of the int64 range.

    Examples
    --------
    >>> int_array([1, 2.0, 3], "plan.json: field 'rank_to_node'").tolist()
    [1, 2, 3]
    >>> int_array([1, 2.5], "plan.json: field 'rank_to_node'")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: plan.json: field 'rank_to_node': item 1: expected an integer, got 2.5
    """
    if isinstance(values, (tuple, np.ndarray)) and np.ndim(values) == 1:   # node ids given in code
        values = values.tolist() if isinstance(values, np.ndarray) else list(values)
    if not isinstance(values, list):
        raise TopoplanError(f"{where}: expected a list of integers")
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            if isinstance(v, float) and v.is_integer() and abs(v) < 2 ** 53:
                continue  # 3.0 written by a tool that only has floats
            raise TopoplanError(f"{where}: item {i}: expected an integer, got {v!r}")
        if not -2 ** 63 <= v < 2 ** 63:
            raise TopoplanError(f"{where}: item {i}: {v} is out of range")
    return np.asarray(values, dtype=np.int64).reshape(-1)


def from_nodes(rank_to_node, topo) -> Placement:
    """Give ranks placed on nodes consecutive slots on each node, in rank order.

    Parameters
    ----------
    rank_to_node : array_like of int
        Node of every rank.
    topo : Topology or None
        Not used (the slots need no topology); validate the result with
        :meth:`Placement.validate`.

    Returns
    -------
    Placement

    Examples
    --------
    >>> from_nodes([3, 0, 3, 0], None).to_dict()
    {'rank_to_node': [3, 0, 3, 0], 'rank_to_slot': [0, 0, 1, 1]}
    """
    node = np.asarray(rank_to_node, dtype=np.int64)
    order = np.argsort(node, kind="stable")
    sorted_nodes = node[order]
    starts = np.searchsorted(sorted_nodes, sorted_nodes, side="left")
    slot = np.empty_like(node)
    slot[order] = np.arange(len(node)) - starts
    return Placement(node, slot)


def load_placement(spec: str | None, n_ranks: int, topo) -> Placement:
    """Resolve ``--placement``: ``sequential`` (default), ``round-robin``, or a placement file.

    The result is validated against the topology.

    Parameters
    ----------
    spec : str or None
        ``None`` or ``"sequential"``, ``"round-robin"`` (or ``"cyclic"``: rank r on
        node r mod n_nodes), or a placement file (see :func:`read_placement`).
    n_ranks : int
        Ranks of the traffic; a file must place exactly these.
    topo : Topology
        The topology.

    Returns
    -------
    Placement

    Raises
    ------
    TopoplanError
        If the ranks do not fit, the file places another number of ranks
        than the traffic has, or the placement is invalid for the topology
        (naming ``spec``).

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> topo = load_topology("paper003")
    >>> load_placement(None, 5, topo).rank_to_node.tolist()
    [0, 0, 0, 0, 1]
    >>> load_placement("round-robin", 4, topo).to_dict()
    {'rank_to_node': [0, 1, 2, 3], 'rank_to_slot': [0, 0, 0, 0]}
    >>> import os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "p.csv")
    >>> with open(path, "w") as fh:
    ...     _ = fh.write("rank,node\\n0,0\\n1,0\\n2,1\\n")
    >>> load_placement(path, 2, topo)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: .../p.csv: places 3 ranks but the traffic has 2 (a placement made for another run?)
    """
    if spec is None or spec == "sequential":
        p = sequential(n_ranks, topo)
    elif spec in ("round-robin", "cyclic"):
        if n_ranks > int(topo.node_cores().sum()):
            raise TopoplanError(f"{n_ranks} ranks do not fit the topology's {int(topo.node_cores().sum())} slots"
                                f"{cores_hint(topo)}")
        p = from_nodes(np.arange(n_ranks) % topo.n_nodes, topo)
    else:
        p = read_placement(spec, topo)
        if p.n_ranks != n_ranks:  # more ranks is a placement made for another run, as much as fewer
            raise TopoplanError(f"{spec}: places {p.n_ranks} ranks but the traffic has {n_ranks}"
                                + (" (a placement made for another run?)" if p.n_ranks > n_ranks else ""))
    p.validate(topo, where=str(spec or "sequential"))
    return p


def read_placement(path, hosts=None) -> Placement:
    """Read a placement JSON (``rank_to_node`` [+ ``rank_to_slot``]) or CSV (``rank,node[,slot]``).

    A node is a node id or, given ``hosts``, a host name (see :func:`node_ids`):
    ``0,cn01`` as well as ``0,0``. Without slots, ranks on a node get
    consecutive slots in rank order. The result is not validated against a
    topology (see :func:`load_placement`).

    Parameters
    ----------
    path : str or path
        A ``.json`` or ``.json.gz`` file (as written by ``topoplan place -o``, a circuit plan's
        ``rank_to_node``, or a ``topoplan phases --schedule -o`` document's, under ``schedule_result``), a plan
        archive (``circuits -o plan.zip``) or a CSV (plain or gzipped) whose ranks are ``0..n-1`` once each, in
        any order.
    hosts : Topology or sequence of str, optional
        Resolves host names: the topology, or the host name of every node id.

    Returns
    -------
    Placement

    Raises
    ------
    TopoplanError
        For a missing file, malformed JSON or CSV, a CSV column other than
        ``rank``, ``node`` and ``slot``, ranks missing or repeated, an unknown
        host (naming the line), or a host name without ``hosts``.

    Examples
    --------
    >>> import os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "placement.csv")
    >>> with open(path, "w") as fh:
    ...     _ = fh.write("rank,node\\n1,5\\n0,5\\n2,6\\n")
    >>> read_placement(path).to_dict()
    {'rank_to_node': [5, 5, 6], 'rank_to_slot': [0, 1, 0]}
    >>> with open(path, "w") as fh:
    ...     _ = fh.write("rank,node\\n0,cn02\\n1,CN01\\n2,cn02\\n")
    >>> read_placement(path, ["cn01", "cn02"]).to_dict()
    {'rank_to_node': [1, 0, 1], 'rank_to_slot': [0, 0, 1]}
    >>> read_placement(path, ["cn01", "cn03"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: .../placement.csv:2: field 'node': unknown host 'cn02' (hosts: cn01, cn03; or a node id 0-1)
    """
    path = Path(path)
    if path.is_dir():
        raise TopoplanError(f"{path}: is a directory, not a placement file")
    if not path.is_file():
        raise TopoplanError(f"{path}: no such placement file (or use 'sequential' / 'round-robin')")
    archive = is_plan_archive(path, "placement")
    if archive or path.name.lower().endswith((".json", ".json.gz")) or is_json_document(path, "placement"):
        # a placement or plan document (by its name, or its content: `place -o placement` writes JSON too)
        doc = read_plan_archive(path, "plan")[0] if archive else read_json(path, "placement")
        if not isinstance(doc, dict):
            raise TopoplanError(f"{path}: expected a JSON object with 'rank_to_node'")
        if "rank_to_node" not in doc:
            sched = doc.get("schedule_result")
            if isinstance(sched, dict) and sched.get("rank_to_node") is not None:
                # `topoplan phases --schedule -o`: the placement the schedule was made for (validate and export read it)
                return placement_from_doc(sched, f"{path}: schedule_result", hosts)
            raise TopoplanError(f"{path}: field 'rank_to_node': missing")
        return placement_from_doc(doc, str(path), hosts)

    df = read_csv_table(path, ("rank", "node"), "placement", optional=("slot",), others=False)
    if len(df) == 0:
        raise TopoplanError(f"{path}: no ranks placed (a header line and no rows)")
    rank = to_numbers(df, "rank", path, integer=True, empty=None)
    node_col = _node_column(df, path, hosts)
    n = len(rank)
    bad = np.flatnonzero((rank < 0) | (rank >= n))
    if bad.size:
        missing = np.setdiff1d(np.arange(n), rank)   # a rank past the rows' count: some rank has no row
        lacks = f"; rank {missing[0]} has no row" if rank[bad[0]] >= n and missing.size else ""
        raise TopoplanError(f"{path}:{row_line(df, bad[0])}: field 'rank': rank {rank[bad[0]]} in a file of {n} "
                            f"rows{lacks} (ranks must be 0..{n - 1} once each)")
    order = np.argsort(rank, kind="stable")
    dup = np.flatnonzero(rank[order][1:] == rank[order][:-1])
    if dup.size:  # then some rank is missing too
        i, j = int(order[dup[0]]), int(order[dup[0] + 1])
        missing = np.setdiff1d(np.arange(n), rank)
        raise TopoplanError(f"{path}:{row_line(df, j)}: field 'rank': rank {rank[j]} again (first on line "
                            f"{row_line(df, i)}; a file of {n} rows places ranks 0..{n - 1} once each, and rank "
                            f"{missing[0]} has no row)")
    node = np.empty(n, dtype=np.int64)
    node[rank] = node_col
    slot = None
    if "slot" in df.columns:
        slot = np.empty(n, dtype=np.int64)
        slot[rank] = to_numbers(df, "slot", path, integer=True, empty=None)

    def origin(r, column):   # slots given by the file are its 'slot' column; others follow from 'node'
        line = row_line(df, int(np.flatnonzero(rank == r)[0]))
        return f"{path}:{line}: field '{column if slot is not None else 'node'}'"

    pl = _assemble(node, slot, str(path))
    pl.origin = origin
    return pl


def check_seed(doc, where: str = "plan") -> None:
    """Refuse a plan whose recorded ``seed`` is not a non-negative integer (null or absent: none recorded).

    The one check of the field, for every reader of plans: ``validate``, ``simulate``, and every ``export``
    (``json`` keeps the seed in what it writes, the ``ocs`` document's schema has the same rule). Here, beside
    :func:`placement_from_doc`, which runs it: every reader of a plan's placement takes it.

    Parameters
    ----------
    doc : object
        The plan document (anything else but a dict holds no seed).
    where : str, optional
        Names the plan in messages.

    Raises
    ------
    TopoplanError
        ``where: field 'seed': expected a non-negative integer, got ...``.

    Examples
    --------
    >>> check_seed({"seed": 7}), check_seed({"seed": None}), check_seed({})
    (None, None, None)
    >>> check_seed({"seed": "abc"}, "p.json")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: p.json: field 'seed': expected a non-negative integer, got 'abc'
    """
    seed = doc.get("seed") if isinstance(doc, dict) else None
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise TopoplanError(f"{where}: field 'seed': expected a non-negative integer, got {shown(seed)}")


def placement_from_doc(doc: dict, where: str, hosts=None) -> Placement:
    """The placement in a plan document (``rank_to_node`` [+ ``rank_to_slot``], lists of integers).

    Parameters
    ----------
    doc : dict
        The document; ``rank_to_node`` must be present.
    where : str
        How errors name the document.
    hosts : Topology or sequence of str, optional
        When given, ``rank_to_node`` may also hold host names (see :func:`node_ids`).

    Returns
    -------
    Placement
        Not validated against a topology.

    Raises
    ------
    TopoplanError
        For a list that is empty, not of integers (or, with ``hosts``, host
        names), or of another length than ``rank_to_slot``.

    Examples
    --------
    >>> placement_from_doc({"rank_to_node": [0, 0, 1]}, "plan.json").to_dict()
    {'rank_to_node': [0, 0, 1], 'rank_to_slot': [0, 1, 0]}
    >>> placement_from_doc({"rank_to_node": ["b", "a", 1]}, "p.json", ["a", "b"]).to_dict()
    {'rank_to_node': [1, 0, 1], 'rank_to_slot': [0, 0, 1]}
    """
    check_seed(doc, where)   # what every reader of a plan checks of it (placements are plans too)
    values = doc["rank_to_node"]
    if hosts is not None and isinstance(values, list) and any(isinstance(v, str) for v in values):
        field = f"{where}: field 'rank_to_node'"
        values = node_ids(values, hosts, lambda i: f"{field}: item {i}").tolist()
    node = int_array(values, f"{where}: field 'rank_to_node'")
    slot = doc.get("rank_to_slot")
    pl = _assemble(node, None if slot is None else int_array(slot, f"{where}: field 'rank_to_slot'"), where)

    def origin(r, column):   # slots given by the document are its 'rank_to_slot'; others follow from the nodes
        return f"{where}: field '{'rank_to_slot' if column == 'slot' and slot is not None else 'rank_to_node'}': item {r}"

    pl.origin = origin
    return pl


def _assemble(node: np.ndarray, slot: np.ndarray | None, where: str) -> Placement:
    if node.ndim != 1 or len(node) == 0:
        raise TopoplanError(f"{where}: field 'rank_to_node': expected a non-empty list of node ids")
    if slot is None:
        return from_nodes(node, None)
    if len(slot) != len(node):
        raise TopoplanError(f"{where}: field 'rank_to_slot': {len(slot)} slots for {len(node)} ranks in "
                            "'rank_to_node' (one slot a rank)")
    return Placement(node, slot)


def _node_column(df, path, hosts) -> np.ndarray:
    """The ``node`` column of a placement CSV: node ids, or host names resolved with ``hosts``."""
    import pandas as pd

    raw = df["node"]

    def loc(i):
        return f"{path}:{row_line(df, i)}: field 'node'"

    try:
        ids = to_numbers(df, "node", path, integer=True, empty=None)
    except TopoplanError:
        text = raw.astype(str).str.strip()
        named = raw.notna() & (text != "") & pd.to_numeric(text.where(raw.notna(), "0"), errors="coerce").isna()
        if not named.any():
            raise   # a bad number ('1.5', '1e30', an empty cell), not a host name
        blank = (raw.isna() | (text == "")).to_numpy()
        if blank.any():
            raise TopoplanError(f"{loc(int(np.flatnonzero(blank)[0]))}: empty") from None
        if hosts is None:
            i = int(np.flatnonzero(named.to_numpy())[0])
            raise TopoplanError(f"{loc(i)}: {text.iloc[i]!r} is a host name; resolving it needs the topology "
                                "(none was given)") from None
        return node_ids(text.tolist(), hosts, loc)
    if hosts is not None and _numeric_host_names(hosts):   # '12' might name another node than id 12
        node_ids([str(v) for v in ids.tolist()], hosts, loc)
    return ids


def _host_list(hosts) -> list:
    return hosts.host_names() if hasattr(hosts, "host_names") else list(hosts)


def _numeric_host_names(hosts) -> bool:
    return any(is_ascii_int(h) and int(h) != i for i, h in enumerate(_host_list(hosts)))


def node_ids(values, hosts, where) -> np.ndarray:
    """Node ids of host names or node ids, as users write them in placement files, allocations and host lists.

    The one place that turns a node as written into a node id. A text equal
    to a host name of the topology, ignoring case as host names do (see
    :func:`topoplan.core.topology.check_host_names`), is that node; ASCII
    digits are a node id (checked against the topology later, by
    :meth:`Placement.validate` or the allocation check); an integer is taken
    as it is. A text that is both a host name and the id of another node
    (hosts named ``1``, ``2``, ...) is refused as ambiguous.

    Parameters
    ----------
    values : sequence of str or int
        The nodes as written (spaces around a name are ignored).
    hosts : Topology or sequence of str
        The topology (its ``host_names()``), or the host name of node 0, 1, ...
    where : str or callable
        How messages name value ``i``: one prefix for all, or ``where(i)``
        (``"p.csv:7: field 'node'"``).

    Returns
    -------
    numpy.ndarray of int64

    Raises
    ------
    TopoplanError
        ``<where>: unknown host ...`` naming the host and the topology's
        hosts; ``<where>: ... is ambiguous``; non-ASCII digits.

    See Also
    --------
    read_placement : placement files (``rank,node`` with host names).
    topoplan.problems.bcast.allocation.parse_spec : Bcast allocations.

    Examples
    --------
    >>> from topoplan.core.topology import TreeTopology
    >>> topo = TreeTopology(kind="tree", nodes_per_switch=(2, 2), hostnames=("cn01", "cn02", "cn03", "cn04"))
    >>> node_ids(["cn03", "CN01", " cn04 ", "1", 2], topo, "alloc.txt").tolist()
    [2, 0, 3, 1, 2]
    >>> node_ids(["cn01", "gpu7"], topo, lambda i: f"p.csv:{i + 2}: field 'node'")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: p.csv:3: field 'node': unknown host 'gpu7' (hosts: cn01, cn02, cn03, cn04; or a node id 0-3)
    >>> node_ids(["2"], ["1", "2", "3"], "job")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: job: '2' is ambiguous: host '2' is node 1, and node id 2 is host '3'
    """
    names = _host_list(hosts)
    index = {h.lower(): i for i, h in enumerate(names)}   # host names are distinct ignoring case

    def loc(i):
        return where(i) if callable(where) else where

    out = np.empty(len(values), dtype=np.int64)
    for i, v in enumerate(values):
        if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
            if not -2 ** 63 <= v < 2 ** 63:   # (int64)
                raise TopoplanError(f"{loc(i)}: {shown(str(v), quote=False)} is out of range")
            out[i] = v
            continue
        if not isinstance(v, str):
            raise TopoplanError(f"{loc(i)}: expected a host name or node id, got {v!r}")
        tok = v.strip()
        node = index.get(tok.lower())
        if node is None and ascii_int_shaped(tok) and not is_ascii_int(tok):
            ascii_int(tok, loc(i))   # more digits than int() reads: out of range
        if is_ascii_int(tok) and (node is None or node == int(tok) or 0 <= int(tok) < len(names)):
            n = ascii_int(tok, loc(i))
            if node is not None and node != n:
                raise TopoplanError(f"{loc(i)}: {tok!r} is ambiguous: host {names[node]!r} is node {node}, and node "
                                    f"id {n} is host {names[n]!r}")
            out[i] = n
        elif node is not None:
            out[i] = node
        else:
            raise TopoplanError(f"{loc(i)}: unknown host {shown(tok)} ({_hosts_shown(names)})")
    return out


def _hosts_shown(names: list) -> str:
    if not names:
        return "the topology has no hosts"
    shown = ", ".join(names) if len(names) <= 4 else f"{names[0]}, {names[1]}, ..., {names[-1]}"
    return f"hosts: {shown}; or a node id 0-{len(names) - 1}"
