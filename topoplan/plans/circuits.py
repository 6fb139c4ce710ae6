"""The circuit-plan document: circuits, forwarding tables and the rules a plan must meet on its topology.

A circuit plan (the JSON ``topoplan circuits -o`` writes, the simulator reads and the exports turn
into launcher files) holds

- ``circuits``: ``[[node_a, node_b], ...]`` -- OCS node pairs under different switches;
- ``forwarding``: ``{"<node>": {"<destination switch>": <next hop node>}}`` -- the relay tables of
  large inter-switch messages (:func:`tables_from_array` and :func:`array_from_tables` convert them
  from and to a ``next_hop[node, switch]`` array);
- optionally ``hop_limit``, ``options.max_circuits`` and ``rank_to_node``.

:func:`validate_plan_dict` checks one against a hybrid topology.
"""

from __future__ import annotations

from itertools import chain

import numpy as np

from topoplan.core.errors import TopoplanError
from topoplan.core.topology import TreeTopology
from topoplan.core.units import is_ascii_int

__all__ = ["validate_plan_dict", "tables_from_array", "array_from_tables"]


def validate_plan_dict(doc: dict, topo, where: str = "circuit plan", *, max_circuits: int | None = None) -> None:
    """Check a circuit plan (dict as in the plan JSON) against a hybrid topology.

    Rejects, with a one-line :class:`TopoplanError`: unknown nodes or switches,
    a circuit touching a non-OCS node, joining two nodes under one switch or
    listed twice, a node with more circuits than optical ports, a next hop
    that is neither the circuit partner nor a node under the same switch, an
    entry at a node already under its destination switch, a node or switch key
    not written as a plain decimal id (``"07"``) or given twice, a routing loop, a
    route crossing more circuits than ``hop_limit``, and more circuits than
    ``max_circuits`` (argument or ``options.max_circuits``).

    Parameters
    ----------
    doc : dict
        The plan: ``circuits`` ([[u, v], ...]), ``forwarding`` ({node: {switch: next_hop}}),
        optionally ``hop_limit``, ``options`` and ``rank_to_node``.
    topo : TreeTopology
        A hybrid topology.
    where : str, optional
        How errors name the plan.
    max_circuits : int, optional
        Most circuits allowed.

    Raises
    ------
    TopoplanError
        One line naming ``where`` and the field.

    See Also
    --------
    topoplan.plans.validate.validate : every kind of plan document.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=1"])  # OCS nodes 0, 16, 32, 48
    >>> validate_plan_dict({"circuits": [[0, 16]], "forwarding": {"0": {"1": 16}}}, topo)
    >>> validate_plan_dict({"circuits": [[0, 1]]}, topo)
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: circuit plan: field 'circuits[0]': node 1 is not an OCS node
    >>> validate_plan_dict({"circuits": [[0, 16]], "forwarding": {"0": {"1": 16}, "00": {"2": 16}}}, topo)
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: circuit plan: field 'forwarding': node key '00' is not written as '0' (ids are plain decimal numbers)
    """
    if not isinstance(doc, dict):
        raise TopoplanError(f"{where}: expected a JSON object with 'circuits' and 'forwarding'")
    if not isinstance(topo, TreeTopology) or topo.ocs is None:
        raise TopoplanError(f"{where}: a circuit plan needs a hybrid topology (with an 'ocs' section)")
    n, sw = topo.n_nodes, topo.node_switch()
    s = topo.n_switches
    is_ocs = topo.is_ocs_node()
    ports = topo.ocs.ports_per_node
    raw = doc.get("circuits", [])
    if not isinstance(raw, list):
        raise TopoplanError(f"{where}: field 'circuits': expected a list of [node, node] pairs")
    partners: dict[int, set] = {}
    seen = set()
    for i, c in enumerate(raw):
        if not isinstance(c, (list, tuple)) or len(c) != 2 or not all(_is_int(x) for x in c):
            raise TopoplanError(f"{where}: field 'circuits[{i}]': expected [node, node], got {c!r}")
        a, b = int(c[0]), int(c[1])
        for x in (a, b):
            if not 0 <= x < n:
                raise TopoplanError(f"{where}: field 'circuits[{i}]': unknown node {x} ({n} nodes)")
            if not is_ocs[x]:
                raise TopoplanError(f"{where}: field 'circuits[{i}]': node {x} is not an OCS node")
        if sw[a] == sw[b]:
            raise TopoplanError(f"{where}: field 'circuits[{i}]': nodes {a} and {b} are under the same switch {sw[a]}")
        key = (min(a, b), max(a, b))
        if key in seen:
            raise TopoplanError(f"{where}: field 'circuits[{i}]': circuit {a}-{b} listed twice")
        seen.add(key)
        for u, v in ((a, b), (b, a)):
            partners.setdefault(u, set()).add(v)
            if len(partners[u]) > ports:
                raise TopoplanError(f"{where}: field 'circuits[{i}]': node {u} has {len(partners[u])} circuits "
                                    f"but {ports} optical port{'s' if ports != 1 else ''}")
    limit = max_circuits
    opts = doc.get("options") or {}
    if limit is None and isinstance(opts, dict) and _is_int(opts.get("max_circuits")):
        limit = int(opts["max_circuits"])
    if limit is not None and len(raw) > limit:
        raise TopoplanError(f"{where}: field 'circuits': {len(raw)} circuits but max_circuits is {limit}")
    fwd = doc.get("forwarding") or {}
    if not isinstance(fwd, dict):
        raise TopoplanError(f"{where}: field 'forwarding': expected {{node: {{switch: next_hop}}}}")
    if not _tables_valid_fast(fwd, doc.get("hop_limit"), n, s, sw, partners):
        _check_tables(fwd, doc, where, n, s, sw, partners)  # finds the first error, in the order of the rules
    r2n = doc.get("rank_to_node")
    if r2n is not None:
        if not isinstance(r2n, list) or not all(_is_int(x) for x in r2n):
            raise TopoplanError(f"{where}: field 'rank_to_node': expected a list of node ids")
        bad = [x for x in r2n if not 0 <= int(x) < n]
        if bad:
            raise TopoplanError(f"{where}: field 'rank_to_node': node {bad[0]} does not exist ({n} nodes)")


def _is_int(x) -> bool:
    if isinstance(x, bool):
        return False
    if isinstance(x, (int, np.integer)):
        return True
    if isinstance(x, str):
        return is_ascii_int(x.strip())  # not str.isdigit(): int('²') fails, int('٣') == 3
    if isinstance(x, float):
        return x.is_integer()
    return False


def _check_key(key, seen: dict, where: str, what: str) -> None:
    """A table key is an id written once, as JSON writes it: ``"7"`` (or the int 7), never ``"07"`` or ``" 7"``,
    and no two keys name the same id (``"7"`` and ``7``): a reader that took the last would drop the other row."""
    k = int(key)
    if isinstance(key, str) and key != str(k):
        raise TopoplanError(f"{where}: {what} key {key!r} is not written as {str(k)!r} (ids are plain decimal "
                            "numbers)")
    if k in seen:
        raise TopoplanError(f"{where}: {what} {k} is given twice")


def _check_tables(fwd: dict, doc: dict, where: str, n: int, s: int, sw, partners: dict) -> None:
    """The forwarding checks of :func:`validate_plan_dict` entry by entry: raise on the first error."""
    table: dict[int, dict[int, int]] = {}
    for key_n, row in fwd.items():
        if not _is_int(key_n) or not 0 <= int(key_n) < n:
            raise TopoplanError(f"{where}: field 'forwarding': unknown node {key_n!r} ({n} nodes)")
        _check_key(key_n, table, f"{where}: field 'forwarding'", "node")
        u = int(key_n)
        if not isinstance(row, dict):
            raise TopoplanError(f"{where}: field 'forwarding.{u}': expected {{switch: next_hop}}")
        table[u] = {}
        for key_s, h in row.items():
            if not _is_int(key_s) or not 0 <= int(key_s) < s:
                raise TopoplanError(f"{where}: field 'forwarding.{u}': unknown switch {key_s!r} ({s} switches)")
            _check_key(key_s, table[u], f"{where}: field 'forwarding.{u}'", "switch")
            t = int(key_s)
            if not _is_int(h) or not 0 <= int(h) < n:
                raise TopoplanError(f"{where}: field 'forwarding.{u}.{t}': unknown next hop node {h!r}")
            h = int(h)
            if sw[u] == t:
                raise TopoplanError(f"{where}: field 'forwarding.{u}.{t}': node {u} is already under switch {t}")
            if h == u or not (h in partners.get(u, ()) or sw[h] == sw[u]):
                raise TopoplanError(f"{where}: field 'forwarding.{u}.{t}': next hop {h} is not a neighbour of node {u} "
                                    f"(neither its circuit partner nor a node under switch {sw[u]})")
            table[u][t] = h
    hop_limit = doc.get("hop_limit")
    if hop_limit is not None and not (_is_int(hop_limit) and int(hop_limit) >= 1):
        raise TopoplanError(f"{where}: field 'hop_limit': expected a positive integer or null, got {hop_limit!r}")
    # every chain must end (at the destination switch or a missing entry) without revisiting a node
    done: dict[tuple[int, int], int] = {}
    for u, row in table.items():
        for t in row:
            path, cur, hops = [], u, 0
            while (cur, t) not in done:
                if sw[cur] == t or t not in table.get(cur, {}):
                    done[(cur, t)] = 0
                    break
                if (cur, t) in path:
                    cyc = " -> ".join(str(x) for x, _ in path[path.index((cur, t)):]) + f" -> {cur}"
                    raise TopoplanError(f"{where}: field 'forwarding': routing loop towards switch {t}: {cyc}")
                path.append((cur, t))
                cur = table[cur][t]
            hops = done[(cur, t)]
            for x, _ in reversed(path):
                nxt = table[x][t]
                hops += 1 if nxt in partners.get(x, ()) else 0
                done[(x, t)] = hops
                if hop_limit is not None and hops > int(hop_limit):
                    raise TopoplanError(f"{where}: field 'forwarding.{x}.{t}': the route crosses {hops} circuits, "
                                        f"more than hop_limit {hop_limit}")


def _tables_valid_fast(fwd: dict, hop_limit, n: int, s: int, sw, partners: dict) -> bool:
    """True when the forwarding tables pass every check of :func:`validate_plan_dict` (entries, hop limit,
    loops), checked with arrays. Only plain tables are taken (keys the decimal strings of node and switch
    ids, next hops ``int``); False for anything else or any doubt, and the entry-by-entry checks decide."""
    if not fwd:
        return False
    if hop_limit is not None and not (_is_int(hop_limit) and int(hop_limit) >= 1):
        return False
    ids = _id_index(max(n, s))
    get = ids.get
    rows, lens = [], []
    for key_n, row in fwd.items():
        u = get(key_n) if type(key_n) is str else None
        if u is None or u >= n or type(row) is not dict:
            return False
        rows.append(u)
        lens.append(len(row))
    total = sum(lens)
    if not total:
        return False
    rows_v = list(fwd.values())
    if set(map(type, chain.from_iterable(map(dict.values, rows_v)))) != {int}:
        return False   # a next hop that is not a plain int (bool, float, str, numpy...): entry by entry
    try:   # a key that is not an id string maps to None: TypeError
        t = np.fromiter(map(get, chain.from_iterable(rows_v)), dtype=np.int64, count=total)
        h = np.fromiter(chain.from_iterable(map(dict.values, rows_v)), dtype=np.int64, count=total)
    except (TypeError, OverflowError, ValueError):
        return False
    u = np.repeat(np.array(rows, dtype=np.int64), lens)
    if (t >= s).any() or (h < 0).any() or (h >= n).any() or (sw[u] == t).any() or (h == u).any():
        return False
    circ = sw[h] != sw[u]
    if circ.any():   # a next hop under another switch must be a circuit partner
        pk = np.array(sorted(a * n + b for a, ps in partners.items() for b in ps), dtype=np.int64)
        key = u[circ] * n + h[circ]
        pos = np.minimum(np.searchsorted(pk, key), max(len(pk) - 1, 0))
        if not len(pk) or (pk[pos] != key).any():
            return False
    # chains: the entry (h, t) each entry leads to (-1 where it ends), circuits crossed summed by pointer jumping
    ekey = u * s + t
    want = h * s + t
    if n * s <= 1 << 26:   # a dense index of the entries
        at = np.full(n * s, -1, dtype=np.int64)
        at[ekey] = np.arange(len(ekey))
        nxt = np.where(sw[h] != t, at[want], -1)
    else:
        order = np.argsort(ekey, kind="stable")
        sk = ekey[order]
        pos = np.minimum(np.searchsorted(sk, want), len(sk) - 1)
        nxt = np.where((sk[pos] == want) & (sw[h] != t), order[pos], -1)
    acc = circ.astype(np.int64)
    # entries some entry leads to (the relays' own) first: chains run through them only
    inner = np.zeros(len(nxt), dtype=bool)
    inner[nxt[nxt >= 0]] = True
    leaf = np.flatnonzero(~inner & (nxt >= 0))
    leaf_next = nxt[leaf]
    active = np.flatnonzero(inner & (nxt >= 0))
    for _ in range(int(np.ceil(np.log2(len(nxt) + 1))) + 2):
        if not active.size:
            break
        p = nxt[active]
        acc[active] += acc[p]
        nxt[active] = nxt[p]
        active = active[nxt[active] >= 0]
    if active.size:
        return False   # a loop
    acc[leaf] += acc[leaf_next]
    return hop_limit is None or int(acc.max(initial=0)) <= int(hop_limit)


_ID_INDEX: dict = {}


def _id_index(k: int) -> dict:
    """``{"0": 0, "1": 1, ...}`` for ids below at least ``k`` (kept: node and switch keys of plans)."""
    if len(_ID_INDEX) < k:
        _ID_INDEX.update((str(i), i) for i in range(len(_ID_INDEX), k))
    return _ID_INDEX


def tables_from_array(next_hop: np.ndarray) -> dict[str, dict[str, int]]:
    """``next_hop`` array -> the plan's JSON form ``{"node": {"switch": next_hop}}`` (entries only).

    Parameters
    ----------
    next_hop : numpy.ndarray
        (n_nodes x n_switches), -1 = no entry.

    Returns
    -------
    dict of str to dict of str to int

    See Also
    --------
    array_from_tables : the inverse.

    Examples
    --------
    >>> nh = np.full((3, 2), -1)
    >>> nh[0, 1], nh[2, 0] = 1, 0
    >>> tables_from_array(nh)
    {'0': {'1': 1}, '2': {'0': 0}}
    """
    next_hop = np.asarray(next_hop)
    rows, cols = np.nonzero(next_hop >= 0)
    out: dict[str, dict[str, int]] = {}
    if not len(rows):
        return out
    vals = next_hop[rows, cols].astype(np.int64)
    n, s = next_hop.shape
    names = [str(i) for i in range(max(n, s))]
    ids = list(range(int(vals.max()) + 1))   # one int object per node id, shared by the rows
    starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
    ends = np.r_[starts[1:], len(rows)]
    for r, a, b in zip(rows[starts].tolist(), starts.tolist(), ends.tolist()):
        out[names[r]] = dict(zip(map(names.__getitem__, cols[a:b].tolist()), map(ids.__getitem__, vals[a:b].tolist())))
    return out


def array_from_tables(tables: dict, n_nodes: int, n_switches: int) -> np.ndarray:
    """The plan's ``forwarding`` dict (string or int keys) -> ``next_hop`` array (-1 = no entry).

    Parameters
    ----------
    tables : dict
        ``{node: {switch: next_hop}}``.
    n_nodes, n_switches : int

    Returns
    -------
    numpy.ndarray of int64

    Examples
    --------
    >>> array_from_tables({"0": {"1": 1}, 2: {0: 0}}, 3, 2).tolist()
    [[-1, 1], [-1, -1], [0, -1]]
    """
    nh = np.full((n_nodes, n_switches), -1, dtype=np.int64)
    for n, row in (tables or {}).items():
        for s, h in row.items():
            nh[int(n), int(s)] = int(h)
    return nh
