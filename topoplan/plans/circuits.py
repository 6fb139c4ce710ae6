"""The circuit-plan document: circuits, forwarding tables and the rules a plan must meet on its topology.

A circuit plan (the JSON ``topoplan circuits -o`` writes, the simulator reads and the exports turn
into launcher files) holds

- ``circuits``: ``[[node_a, node_b], ...]`` -- OCS node pairs under different switches;
- ``forwarding``: ``{"<node>": {"<destination switch>": <next hop node>}}`` -- the relay tables of
  large inter-switch messages (:func:`tables_from_array` and :func:`array_from_tables` convert them
  from and to a ``next_hop[node, switch]`` array; :class:`ForwardingTables` holds large ones as that
  array and reads as the dict);
- optionally ``hop_limit``, ``options.max_circuits`` and ``rank_to_node``.

:func:`validate_plan_dict` checks one against a hybrid topology.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from itertools import chain

import numpy as np

from topoplan.core.errors import TopoplanError
from topoplan.core.placement import check_seed
from topoplan.core.topology import TreeTopology
from topoplan.core.units import is_ascii_int, shown

__all__ = ["validate_plan_dict", "ForwardingTables", "tables_from_array", "array_from_tables"]


def validate_plan_dict(doc, topo, where: str = "circuit plan", *, max_circuits: int | None = None) -> None:
    """Check a circuit plan (dict as in the plan JSON) against a hybrid topology.

    Rejects, with a one-line :class:`TopoplanError`: unknown nodes or switches,
    a circuit touching a non-OCS node, joining two nodes under one switch or
    listed twice, a node with more circuits than optical ports, a next hop
    that is neither the circuit partner nor a node under the same switch, an
    entry at a node already under its destination switch, a node or switch key
    not written as a plain decimal id (``"07"``) or given twice, a routing loop, a
    route crossing more circuits than ``hop_limit``, and more circuits than
    ``max_circuits`` (argument or ``options.max_circuits``); tables held as a next-hop array
    (:class:`ForwardingTables`, a plan archive's) of another shape than the topology's nodes x switches; a
    ``threshold_B`` that is not a non-negative size in bytes, and a ``seed`` that is not a non-negative integer
    (:func:`topoplan.core.placement.check_seed`).

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
    _validate(doc, topo, where, max_circuits)


def _validate(doc: dict, topo, where: str, max_circuits: int | None, *, as_tables: bool = False) -> None:
    """:func:`validate_plan_dict`. With ``as_tables``, plain tables of :data:`ARRAY_MIN_ENTRIES` nodes x switches
    or more that the array checks passed are replaced in ``doc`` by :class:`ForwardingTables` marked as checked
    against this topology, so the later validations of the same plan (the simulator's, an export's) do not check
    them again."""
    if not isinstance(doc, dict):
        raise TopoplanError(f"{where}: expected a JSON object with 'circuits' and 'forwarding'")
    check_seed(doc, where)
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
    if not isinstance(fwd, (dict, ForwardingTables)):
        raise TopoplanError(f"{where}: field 'forwarding': expected {{node: {{switch: next_hop}}}}")
    if isinstance(fwd, ForwardingTables):
        # held tables do not change: checked once against the same switches, circuits and hop limit
        stamp = _tables_stamp(n, s, sw, seen, doc)
        if stamp not in fwd._checked:
            at = f"{where}: {fwd.source}" if fwd.source else where   # the array a plan archive holds them in
            if fwd.next_hop.shape != (n, s):   # a row per node and a column per switch, as the JSON form's keys
                r, c = fwd.next_hop.shape
                raise TopoplanError(f"{at}: field 'forwarding': tables of {r} nodes x {c} switches, but the "
                                    f"topology has {n} nodes x {s} switches")
            if not _array_valid(fwd.next_hop, doc.get("hop_limit"), n, s, sw, partners):
                _check_tables(fwd, doc, at, n, s, sw, partners)
            fwd._checked.add(stamp)
    else:
        entries = _table_entries(fwd, n, s)
        if entries is None or not _entries_valid(*entries, doc.get("hop_limit"), n, s, sw, partners):
            _check_tables(fwd, doc, where, n, s, sw, partners)  # finds the first error, in the order of the rules
        elif as_tables and n * s >= ARRAY_MIN_ENTRIES:
            tables = ForwardingTables.from_entries(*entries, n, s)
            tables._checked.add(_tables_stamp(n, s, sw, seen, doc))
            doc["forwarding"] = tables
    r2n = doc.get("rank_to_node")
    if r2n is not None:
        if not isinstance(r2n, list) or not all(_is_int(x) for x in r2n):
            raise TopoplanError(f"{where}: field 'rank_to_node': expected a list of node ids")
        bad = [x for x in r2n if not 0 <= int(x) < n]
        if bad:
            raise TopoplanError(f"{where}: field 'rank_to_node': node {bad[0]} does not exist ({n} nodes)")
    if doc.get("threshold_B") is not None:   # the size from which messages take the circuits
        _number(doc["threshold_B"], where, "threshold_B", "a non-negative size in bytes")


def _number(value, w: str, field: str, what: str = "a non-negative time in seconds"):
    """``value`` if it is a finite number of at least 0, else a one-line error (plan and schedule fields)."""
    ok = (not isinstance(value, bool) and isinstance(value, (int, float, np.integer, np.floating))
          and math.isfinite(value) and value >= 0)
    if not ok:
        raise TopoplanError(f"{w}: field '{field}': expected {what}, got {value!r}")
    return value


def _tables_stamp(n: int, s: int, sw, circuits: set, doc: dict) -> tuple:
    """What held tables are validated against: the switches, the circuits and the hop limit."""
    return n, s, sw.tobytes(), tuple(sorted(circuits)), repr(doc.get("hop_limit"))


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
            raise TopoplanError(f"{where}: field 'forwarding': unknown node {shown(key_n)} ({n} nodes)")
        _check_key(key_n, table, f"{where}: field 'forwarding'", "node")
        u = int(key_n)
        if not isinstance(row, dict):
            raise TopoplanError(f"{where}: field 'forwarding.{u}': expected {{switch: next_hop}}")
        table[u] = {}
        for key_s, h in row.items():
            if not _is_int(key_s) or not 0 <= int(key_s) < s:
                raise TopoplanError(f"{where}: field 'forwarding.{u}': unknown switch {shown(key_s)} ({s} switches)")
            _check_key(key_s, table[u], f"{where}: field 'forwarding.{u}'", "switch")
            t = int(key_s)
            if not _is_int(h) or not 0 <= int(h) < n:
                raise TopoplanError(f"{where}: field 'forwarding.{u}.{t}': unknown next hop node {shown(h)}")
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


def _table_entries(fwd: dict, n: int, s: int):
    """The entries of plain forwarding tables as arrays ``(node, switch, next hop)``, row by row in the dict's
    order: only tables whose keys are the decimal strings of node and switch ids and whose next hops are
    ``int`` are taken; None for anything else, and the entry-by-entry checks decide."""
    if not fwd:
        return None
    ids = _id_index(max(n, s))
    get = ids.get
    rows, lens = [], []
    for key_n, row in fwd.items():
        u = get(key_n) if type(key_n) is str else None
        if u is None or u >= n or type(row) is not dict:
            return None
        rows.append(u)
        lens.append(len(row))
    total = sum(lens)
    if not total:
        return None
    rows_v = list(fwd.values())
    if set(map(type, chain.from_iterable(map(dict.values, rows_v)))) != {int}:
        return None   # a next hop that is not a plain int (bool, float, str, numpy...): entry by entry
    try:   # a key that is not an id string maps to None: TypeError
        t = np.fromiter(map(get, chain.from_iterable(rows_v)), dtype=np.int64, count=total)
        h = np.fromiter(chain.from_iterable(map(dict.values, rows_v)), dtype=np.int64, count=total)
    except (TypeError, OverflowError, ValueError):
        return None
    return np.repeat(np.array(rows, dtype=np.int64), lens), t, h


def _entries_valid(u, t, h, hop_limit, n: int, s: int, sw, partners: dict) -> bool:
    """True when forwarding entries ``(u[i], t[i]) -> h[i]`` pass every check of :func:`validate_plan_dict`
    (entries, hop limit, loops), checked with arrays; False for any fault (the entry-by-entry checks then
    name the first), and for no entries at all."""
    if not len(u):
        return False
    if hop_limit is not None and not (_is_int(hop_limit) and int(hop_limit) >= 1):
        return False
    if ((u < 0).any() or (u >= n).any() or (t < 0).any() or (t >= s).any() or (h < 0).any() or (h >= n).any()
            or (sw[u] == t).any() or (h == u).any()):
        return False
    circ = sw[h] != sw[u]
    if circ.any() and not _all_partners(u[circ], h[circ], partners, n):
        return False   # a next hop under another switch must be a circuit partner
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
    return _chains_end(nxt, acc, np.flatnonzero(~inner & (nxt >= 0)), np.flatnonzero(inner & (nxt >= 0)),
                       len(nxt), hop_limit)


def _chains_end(nxt, acc, leaf, active, n_entries: int, hop_limit) -> bool:
    """Whether every chain of forwarding entries ends, crossing at most ``hop_limit`` circuits, by pointer jumping:
    ``nxt[e]`` is the entry that entry ``e`` leads to (-1: it ends there), ``acc[e]`` the circuits ``e`` crosses
    (summed along the chains, in place); ``active`` are the entries that others lead to and that go on, ``leaf``
    those that go on and that no entry leads to (they take their next entry's sum once the others are done)."""
    leaf_next = nxt[leaf]
    for _ in range(int(np.ceil(np.log2(n_entries + 1))) + 2):
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


def _all_partners(u, h, partners: dict, n: int) -> bool:
    """Whether every ``h[i]`` is a circuit partner of ``u[i]`` (``partners``: node -> its partners)."""
    pk = np.array(sorted(a * n + b for a, ps in partners.items() for b in ps), dtype=np.int64)
    key = u * n + h
    pos = np.minimum(np.searchsorted(pk, key), max(len(pk) - 1, 0))
    return bool(len(pk)) and bool((pk[pos] == key).all())


def _array_valid(nh: np.ndarray, hop_limit, n: int, s: int, sw, partners: dict) -> bool:
    """:func:`_entries_valid` on tables held as a next-hop array ``nh`` (n x s, -1 = no entry): the same
    verdict, checked on the array itself rather than on three arrays of its entries (at 16,384 nodes and 512
    switches the tables have 8.4 M entries: the entries' arrays alone took a second to make)."""
    if nh.shape != (n, s):
        u, t = np.nonzero(nh >= 0)
        return _entries_valid(u.astype(np.int64), t.astype(np.int64), nh[u, t].astype(np.int64), hop_limit, n, s,
                              sw, partners)
    if hop_limit is not None and not (_is_int(hop_limit) and int(hop_limit) >= 1):
        return False
    has = nh >= 0
    if not has.any() or int(nh.max()) >= n:
        return False
    rows = np.arange(n)
    if has[rows, sw].any() or (nh == rows.astype(nh.dtype)[:, None]).any():
        return False   # an entry towards the node's own switch, or the node as its own next hop
    sw_nh = np.asarray(sw, dtype=np.int32 if s < 2 ** 31 else np.int64)
    hc = np.maximum(nh, 0)
    swh = sw_nh[hc]                                   # switch of every next hop (anything where there is no entry)
    circ = has & (swh != sw_nh[:, None])
    cu, ct = np.nonzero(circ)
    if len(cu) and not _all_partners(cu, nh[cu, ct].astype(np.int64), partners, n):
        return False   # a next hop under another switch must be a circuit partner
    # chains (_chains_end), over flat entry ids u * s + t
    cols = np.arange(s, dtype=sw_nh.dtype)
    cont = has & (swh != cols[None, :])              # not at the destination switch yet: goes on at (h, t) ...
    cont &= has[hc, np.arange(s)[None, :]]           # ... if the next hop has an entry there
    idx = np.flatnonzero(cont)
    tgt = nh.ravel()[idx].astype(np.int64) * s + idx % s
    nxt = np.full(n * s, -1, dtype=np.int64)
    nxt[idx] = tgt
    inner = np.zeros(n * s, dtype=bool)
    inner[tgt] = True
    return _chains_end(nxt, circ.ravel().astype(np.int64), idx[~inner[idx]], idx[inner[idx]], len(idx), hop_limit)


_ID_INDEX: dict = {}


def _id_index(k: int) -> dict:
    """``{"0": 0, "1": 1, ...}`` for ids below at least ``k`` (kept: node and switch keys of plans)."""
    if len(_ID_INDEX) < k:
        _ID_INDEX.update((str(i), i) for i in range(len(_ID_INDEX), k))
    return _ID_INDEX


# Tables of at least this many entries (nodes x switches) are held as a next-hop array (:class:`ForwardingTables`)
# rather than as dicts: at 16,384 nodes and 512 switches the dicts of 8.4 M entries took seconds to build, to
# check and to turn back into the array the bound and the simulator use.
ARRAY_MIN_ENTRIES = 1 << 16


class ForwardingTables(Mapping):
    """Forwarding tables held as a ``next_hop[node, switch]`` array that read as the plan's JSON form.

    A read-only mapping ``{"<node>": {"<switch>": next_hop}}`` over the nodes with an entry (ascending), each
    row made when it is asked for, equal to the dict :func:`tables_from_array` makes of the same array; its
    JSON text (:meth:`json_layout`, used by :func:`topoplan.core.io.write_json`) is that dict's, byte for
    byte. Plans of large tables hold one (:data:`ARRAY_MIN_ENTRIES`): the validator, the writer and the
    simulator read the array without a dict of millions of entries.

    Parameters
    ----------
    next_hop : numpy.ndarray
        (n_nodes x n_switches), -1 (any negative) = no entry. Copied.
    source : str, optional
        Where the tables were read (a plan archive's ``next_hop.npy``): errors of their validation name it.

    See Also
    --------
    tables_from_array : the same tables as dicts.

    Examples
    --------
    >>> nh = np.full((3, 2), -1)
    >>> nh[0, 1], nh[2, 0] = 1, 0
    >>> ft = ForwardingTables(nh)
    >>> list(ft), ft["2"], len(ft), ft.n_entries
    (['0', '2'], {'0': 0}, 2, 2)
    >>> ft == tables_from_array(nh), ft
    (True, ForwardingTables({'0': {'1': 1}, '2': {'0': 0}}))
    """

    def __init__(self, next_hop, source: str | None = None):
        nh = np.array(next_hop, dtype=np.int32 if np.size(next_hop) and np.max(next_hop) < 2 ** 31 else np.int64)
        if nh.ndim != 2:
            raise ValueError(f"next_hop: expected a (nodes x switches) array, got shape {nh.shape}")
        nh[nh < 0] = -1
        nh.flags.writeable = False
        self.next_hop = nh
        self._rows = np.flatnonzero((nh >= 0).any(axis=1))
        self._index = None
        self._checked: set = set()   # what the tables were validated against (validate_plan_dict)
        self.source = source

    @classmethod
    def from_entries(cls, u, t, h, n_nodes: int, n_switches: int) -> "ForwardingTables":
        """The tables of entries ``(u[i], t[i]) -> h[i]`` (valid ids; a pair given twice keeps the last)."""
        nh = np.full((n_nodes, n_switches), -1, dtype=np.int32 if n_nodes < 2 ** 31 else np.int64)
        nh[np.asarray(u, dtype=np.int64), np.asarray(t, dtype=np.int64)] = h
        return cls(nh)

    @property
    def n_entries(self) -> int:
        """Entries in all rows."""
        return int(np.count_nonzero(self.next_hop >= 0))

    def entries(self):
        """``(node, switch, next hop)`` int64 arrays of every entry, row by row (the mapping's order)."""
        u, t = np.nonzero(self.next_hop >= 0)
        return u.astype(np.int64), t.astype(np.int64), self.next_hop[u, t].astype(np.int64)

    def _row_of(self, key):
        if self._index is None:
            self._index = dict(zip(map(str, self._rows.tolist()), self._rows.tolist()))
        return self._index.get(key) if isinstance(key, str) else None

    def __getitem__(self, key) -> dict:
        r = self._row_of(key)
        if r is None:
            raise KeyError(key)
        cols = np.flatnonzero(self.next_hop[r] >= 0)
        return dict(zip(map(str, cols.tolist()), self.next_hop[r, cols].tolist()))

    def __contains__(self, key) -> bool:
        return self._row_of(key) is not None

    def __iter__(self):
        return iter(map(str, self._rows.tolist()))

    def __len__(self) -> int:
        return len(self._rows)

    def __eq__(self, other):
        if isinstance(other, ForwardingTables):
            a, b = self.next_hop, other.next_hop
            if a.shape != b.shape:   # trailing rows or columns without entries do not count
                r, c = max(a.shape[0], b.shape[0]), max(a.shape[1], b.shape[1])
                a, b = (np.pad(x, ((0, r - x.shape[0]), (0, c - x.shape[1])), constant_values=-1) for x in (a, b))
            return bool(np.array_equal(a, b))
        return Mapping.__eq__(self, other)

    __hash__ = None

    def __repr__(self) -> str:
        return f"ForwardingTables({dict(self.items())!r})" if len(self) <= 8 else \
            f"ForwardingTables(<{self.n_entries:,} entries in {len(self):,} rows>)"

    def __deepcopy__(self, memo):
        return self   # read-only

    def __reduce__(self):
        return (ForwardingTables, (self.next_hop, self.source))

    def json_layout(self, level: int, indent: int) -> list[str]:
        """The JSON text of the tables, in pieces, as :func:`topoplan.core.io.dumps` lays out the equal dict at
        nesting ``level``: ``{``, then per row a line ``"<node>": {"<switch>": next_hop, ...}``, then ``}``.

        Made with arrays, a block of entries at a time: each entry's text is its tokens (what comes before
        it: ``, `` or its row's opening; its key; its next hop; ``}`` after a row's last) gathered from byte
        tables padded with NUL (which JSON text never holds), then the padding dropped."""
        u, t, h = self.entries()
        if not len(u):
            return ["{}"]
        first = np.r_[True, u[1:] != u[:-1]]
        last = np.r_[first[1:], True]
        rows = u[first]
        pad = "\n" + " " * (indent * (level + 1))
        opening = [f'{"{" if i == 0 else ","}{pad}"{r}": {{' for i, r in enumerate(rows.tolist())]
        before = _token_table([", "] + opening)
        keys = _token_table([f'"{j}": ' for j in range(self.next_hop.shape[1])])
        vals = _token_table(list(map(str, range(int(h.max()) + 1))))
        after = _token_table(["", "}"])
        which = np.zeros(len(u), dtype=np.int64)
        which[first] = 1 + np.arange(len(rows))
        out = []
        block = 1 << 20
        for a in range(0, len(u), block):
            b = min(len(u), a + block)
            text = np.concatenate([before[which[a:b]], keys[t[a:b]], vals[h[a:b]],
                                   after[last[a:b].astype(np.int64)]], axis=1)
            out.append(text[text != 0].tobytes().decode("ascii"))
        out.append("\n" + " " * (indent * level) + "}")
        return out


def _token_table(tokens: list[str]) -> np.ndarray:
    """ASCII ``tokens`` as the rows of a byte array, padded with NUL."""
    width = max(1, max(map(len, tokens)))
    return np.frombuffer(b"".join(x.encode("ascii").ljust(width, b"\0") for x in tokens),
                         dtype=np.uint8).reshape(len(tokens), width)


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
    if isinstance(tables, ForwardingTables):
        r, c = min(n_nodes, tables.next_hop.shape[0]), min(n_switches, tables.next_hop.shape[1])
        nh[:r, :c] = tables.next_hop[:r, :c]
        return nh
    for n, row in (tables or {}).items():
        for s, h in row.items():
            nh[int(n), int(s)] = int(h)
    return nh
