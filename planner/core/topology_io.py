"""Reading and writing topologies: the YAML format, named presets, ``--set`` overrides, Slurm topology.conf.

Everything goes through one plain dict (the YAML document), so presets,
files and ``--set dotted.key=value`` overrides behave the same way.

YAML keys (quantities take units, see :mod:`planner.core.units`)::

    kind: tree | fat-tree | hybrid | torus | mesh | graph
    switches: 4              # tree kinds: edge switches
    nodes_per_switch: 16     # or a list, one count per switch
    cores_per_node: 4
    eps: {down_bw: 10Gbps, down_latency: 500ns, up_bw: 20Gbps, up_latency: 500ns,
          switch_delay: 420ns, mtu: 4096B}
    node: {intra_bw: 68Gbps, intra_latency: 100ns}
    ocs: {nodes_per_switch: 8 | nodes: [..], ports_per_node: 1, bw: 20Gbps,
          latency: 500ns, setup: 10ms, node_link_bw: 20Gbps}
    # torus/mesh: dims: [10, 10, 10], wrap: [false, ...] (or true), bw: 4.76GB/s (or list), latency
    # graph: switches: [names], hosts: [{name, switch, bw}], links: [{a, b, bw}]

Documents are read strictly: a key given twice, more than 100 aliases (or
aliases adding more than 100,000 values), nesting deeper than
64 and files over ``MAX_TOPOLOGY_BYTES`` are errors. Numbers are read as in
YAML 1.2 (``010`` is text, not octal 8; ``1e3`` is 1000), and every count
(``cores_per_node``, ``dims``, ...) must be a finite integer in range (see
:func:`planner.core.topology.check_count`). Host names must be valid for
launcher files and distinct (:func:`planner.core.topology.check_host_names`).

Slurm ``topology.conf``: a switch's ``LinkSpeed`` is the bandwidth of its
links to its children; a bare number (``100``, ``1e2``) is Gb/s, a value
with a unit goes through :mod:`planner.core.units` (see :func:`slurm_to_dict`).
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import numpy as np
import yaml

from planner.core.errors import TopoplanError
from planner.core.topology import (MAX_CORES_PER_NODE, MAX_NODES, MAX_PORTS_PER_NODE, GraphTopology, OCSConfig,
                                   Topology, TorusTopology, TreeTopology, balanced_ocs_nodes, check_count,
                                   check_host_names)
from planner.core.units import parse_bandwidth, parse_size, parse_time

__all__ = ["PRESET_DIR", "MAX_NODES", "MAX_TOPOLOGY_BYTES", "KNOWN_KEYS", "preset_names", "load_topology",
           "apply_overrides", "topology_from_dict", "topology_to_dict", "dump_topology", "expand_hostlist",
           "slurm_to_dict", "SLURM_LINKSPEED_UNIT", "strict_yaml"]

PRESET_DIR = Path(__file__).resolve().parents[2] / "instances"


def preset_names() -> list[str]:
    """Names of the topology presets shipped in ``instances/`` (one YAML file each).

    Returns
    -------
    list of str
        Sorted preset names, usable as the ``spec`` of :func:`load_topology`.

    See Also
    --------
    load_topology

    Examples
    --------
    >>> "paper003" in preset_names()
    True
    >>> preset_names()[:3]
    ['kcomputer', 'mesh10x10x10', 'paper000']
    """
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


def load_topology(spec, overrides=(), *, name: str | None = None) -> Topology:
    """Load a topology from a preset name, a YAML file or a Slurm ``topology.conf``.

    Parameters
    ----------
    spec : str, path or dict
        A preset name (see :func:`preset_names`), a path to a YAML file or a
        Slurm ``topology.conf``, or an already-built document (copied, not changed).
    overrides : sequence of str, optional
        ``dotted.key=value`` strings applied to the document first
        (``ocs.nodes_per_switch=4``, ``eps.up_bw=1.6Gbps``), see :func:`apply_overrides`.
    name : str, optional
        The topology's name; default the document's ``name``, else the preset name or path.

    Returns
    -------
    TreeTopology, TorusTopology or GraphTopology
        The validated topology.

    Raises
    ------
    TopoplanError
        For an unknown preset, a missing file, malformed YAML, or a field that
        is missing, unknown to the kind or out of range; the message starts
        with the preset name or path.

    See Also
    --------
    topology_from_dict : the same from a document, without overrides.
    dump_topology : the inverse direction.

    References
    ----------
    The presets reproduce the papers' set-ups: ``paper000`` is 000's Table 1
    (128 nodes, 4 switches x 32); ``paper001-8x32``/``paper001-16x16`` are 001's
    section 4.1 and Table 1; ``paper003`` is 003's section 4.1.2 (64 nodes,
    4 switches x 16); ``kcomputer`` and ``mesh10x10x10`` are 004's meshes.

    Examples
    --------
    >>> t = load_topology("paper003")
    >>> t.kind, t.n_nodes, t.n_switches, len(t.ocs.nodes)
    ('hybrid', 64, 4, 32)
    >>> t = load_topology("paper003", ["ocs.nodes_per_switch=2"])
    >>> len(t.ocs.nodes)
    8
    >>> load_topology("paper004")
    Traceback (most recent call last):
    ...
    planner.core.errors.TopoplanError: unknown topology preset 'paper004' (presets: ...; or give a file)
    """
    doc, origin, lines = _document(spec)
    doc = apply_overrides(doc, overrides)
    try:
        topo = topology_from_dict(doc, name=name or doc.get("name") or origin)
    except TopoplanError as exc:
        raise TopoplanError(f"{origin}{_line_of(str(exc), lines, overrides)}: {exc}") from None
    return topo


def _line_of(message: str, lines: dict | None, overrides) -> str:
    """``:N`` for the line of the field a message names (``field 'eps.up_bw': ...``), when the file has it."""
    m = re.match(r"field '([^']+)'", message)
    if not lines or m is None:
        return ""
    field = m.group(1)
    for item in overrides or ():   # a value from --set has no line in the file
        key = ".".join(p for p in item.split("=", 1)[0].strip().split(".") if p)
        if field == key or field.startswith((key + ".", key + "[")):
            return ""
    while field:
        if field in lines:
            return f":{lines[field]}"
        field = re.sub(r"(\.[^.\[]*|\[\d+\])$", "", field) if re.search(r"[.\[]", field) else ""
    return ""


def _document(spec):
    """(document, origin for messages, field -> line map or None)."""
    if isinstance(spec, dict):
        return copy.deepcopy(spec), spec.get("name", "topology"), None
    text = str(spec)
    path = Path(text)
    if path.is_file():
        raw = _read(path)
        if path.suffix == ".conf" or re.search(r"(?im)^\s*switchname\s*=", raw):
            return slurm_to_dict(raw, path), str(path), None
        doc, lines = _yaml_lines(raw, path)
        return doc, str(path), lines
    if (PRESET_DIR / f"{text}.yaml").is_file():
        p = PRESET_DIR / f"{text}.yaml"
        doc, lines = _yaml_lines(p.read_text(encoding="utf-8"), p)
        return doc, text, lines
    if "/" in text or text.endswith((".yaml", ".yml", ".json", ".conf")):
        raise TopoplanError(f"{text}: no such topology file")
    raise TopoplanError(f"unknown topology preset {text!r} (presets: {', '.join(preset_names())}; or give a file)")


# A topology file is a few KB (a million explicit host names: ~15 MB); the YAML reader builds a Python object
# of a few hundred bytes per value, so a larger file is refused before it is read.
MAX_TOPOLOGY_BYTES = 16 << 20


def _read(path: Path) -> str:
    from planner.core.io import read_text

    try:
        size = path.stat().st_size
    except OSError as exc:
        raise TopoplanError(f"{path}: cannot read topology file: {exc.strerror or exc}") from None
    if size > MAX_TOPOLOGY_BYTES:
        raise TopoplanError(f"{path}: {size:,} bytes, over the limit of {MAX_TOPOLOGY_BYTES:,} for a topology file")
    try:
        return read_text(path, "topology file")
    except TopoplanError:
        if path.suffix != ".conf":   # YAML is UTF-8 by definition
            raise
    # a Slurm file with Latin-1 bytes in a comment: replaced, and a name holding one fails the host-name check
    return read_text(path, "topology file", lenient=True)


# -- strict YAML ----------------------------------------------------------------------------------------
# yaml.safe_load lets the last of two equal keys win, expands aliases without limit ("billion laughs"),
# recurses once per nesting level, and reads YAML 1.1 numbers: 010 is 8, 0x10 is 16, 1:30 is 90, 1_000 is
# 1000, while 1e3 stays text. The loader below refuses the first three and reads numbers as YAML 1.2 does:
# decimal integers (no leading zeros) and decimal floats; anything else is text, which numeric fields refuse.

_MAX_ALIASES = 100             # a topology needs none; merge keys (<<: *base) in a few variants
_MAX_ALIAS_EXPANSION = 100_000  # values aliases may add to the document
_MAX_DEPTH = 64                # a topology nests 4 deep


class _Refused(yaml.MarkedYAMLError):
    """A well-formed document the loader refuses (duplicate key, alias bomb, too deep)."""


class _StrictLoader(yaml.SafeLoader):
    def __init__(self, stream):
        super().__init__(stream)
        self._aliases = 0
        self._values = 0
        self._sizes: dict[int, int] = {}
        self._path: list[str] = []
        self._paths: dict[int, str] = {}
        self.lines: dict[str, int] = {}   # field path ("eps.up_bw", "hostnames[3]") -> line of its value

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            self._aliases += 1
            if self._aliases > _MAX_ALIASES:
                raise _Refused(None, None, f"more than {_MAX_ALIASES} aliases (*name); write the values out", mark)
            node = super().compose_node(parent, index)
            if id(node) not in self._sizes:
                raise _Refused(None, None, "an alias refers to a value that contains it (a recursive document)",
                               mark)
            return node
        mark = self.peek_event().start_mark
        if len(self._path) >= _MAX_DEPTH:
            raise _Refused(None, None, f"values nested more than {_MAX_DEPTH} deep", mark)
        if isinstance(index, yaml.ScalarNode):
            step = "." + str(index.value)
        elif isinstance(index, int):
            step = f"[{index}]"
        else:
            step = ""
        self._path.append(step)
        here = "".join(self._path).lstrip(".")
        if index is not None and here not in self.lines:
            self.lines[here] = mark.line + 1
        try:
            node = super().compose_node(parent, index)
        finally:
            self._path.pop()
        self._values += 1
        if isinstance(node, yaml.SequenceNode):
            size = 1 + sum(self._sizes[id(c)] for c in node.value)
        elif isinstance(node, yaml.MappingNode):
            size = 1 + sum(self._sizes[id(k)] + self._sizes[id(v)] for k, v in node.value)
            self._paths[id(node)] = here
        else:
            size = 1
        if size > self._values + _MAX_ALIAS_EXPANSION:
            raise _Refused(None, None, f"aliases expand the document beyond {_MAX_ALIAS_EXPANSION:,} extra values "
                                       "(an alias bomb?)", node.start_mark)
        self._sizes[id(node)] = size
        return node

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            prefix = self._paths.get(id(node), "")
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                except TypeError:   # unhashable: the base class says so
                    continue
                if first is not None:
                    name = f"{prefix}.{key}" if prefix else str(key)
                    raise _Refused(None, None, f"field '{name}': duplicate key (first at line {first}); a key may "
                                               "appear once", key_node.start_mark)
                seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_STRICT_INT = re.compile(r"^[-+]?(?:0|[1-9][0-9]*)$")
_STRICT_FLOAT = re.compile(r"^(?:[-+]?(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[-+]?[0-9]+[eE][-+]?[0-9]+"
                           r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")
_StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag not in (_INT, _FLOAT)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_StrictLoader.add_implicit_resolver(_INT, _STRICT_INT, list("-+0123456789"))
_StrictLoader.add_implicit_resolver(_FLOAT, _STRICT_FLOAT, list("-+0123456789."))


class _StrictDumper(yaml.SafeDumper):
    """Quotes any text that YAML 1.1 or the strict loader would read as something else (``1e3``, ``010``)."""


_StrictDumper.add_implicit_resolver(_INT, _STRICT_INT, list("-+0123456789"))
_StrictDumper.add_implicit_resolver(_FLOAT, _STRICT_FLOAT, list("-+0123456789."))


def _load_yaml(raw: str, lines: dict | None = None):
    loader = _StrictLoader(raw)
    try:
        doc = loader.get_single_data()
    finally:
        loader.dispose()
    if lines is not None:
        lines.update(loader.lines)
    return doc


def _yaml(raw: str, path) -> dict:
    return _yaml_lines(raw, path)[0]


def _yaml_lines(raw: str, path) -> tuple[dict, dict]:
    """The document of a topology file and the line of every field's value."""
    if len(raw) > MAX_TOPOLOGY_BYTES:
        raise TopoplanError(f"{path}: {len(raw):,} characters, over the limit of {MAX_TOPOLOGY_BYTES:,} for a "
                            "topology file")
    lines: dict[str, int] = {}
    doc = strict_yaml(raw, path, lines=lines)
    if not isinstance(doc, dict):
        raise TopoplanError(f"{path}: a topology file must be a YAML mapping")
    return doc, lines


def strict_yaml(raw: str, path, *, lines: dict | None = None):
    """Parse YAML text the strict way every topoplan YAML input is read.

    Duplicate keys, more than a few aliases (alias bombs), deep nesting are errors; numbers follow
    YAML 1.2 (``010`` and ``1_000`` stay text).

    Parameters
    ----------
    raw : str
        The text.
    path : str or path
        Names the file in messages.
    lines : dict, optional
        Filled with the line of every field's value (dotted keys).

    Returns
    -------
    object
        The document.

    Raises
    ------
    TopoplanError
        ``path:line: ...`` for malformed YAML or a refused construct.

    Examples
    --------
    >>> strict_yaml("a: 1\\nb: [x, 010]\\n", "c.yaml")
    {'a': 1, 'b': ['x', '010']}
    >>> strict_yaml("a: 1\\na: 2\\n", "c.yaml")
    Traceback (most recent call last):
    ...
    planner.core.errors.TopoplanError: c.yaml:2: field 'a': duplicate key (first at line 1); a key may appear once
    """
    try:
        return _load_yaml(raw, lines)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        if isinstance(exc, _Refused):
            raise TopoplanError(f"{path}{line}: {problem}") from None
        raise TopoplanError(f"{path}{line}: malformed YAML: {problem}") from None


def apply_overrides(doc: dict, overrides) -> dict:
    """Apply ``dotted.key=value`` overrides; values are parsed as YAML scalars (``4``, ``true``, ``[1,2]``).

    Missing intermediate sections are created. Keys are not checked here:
    :func:`topology_from_dict` rejects the ones the topology kind does not read.

    Parameters
    ----------
    doc : dict
        A topology document (not changed).
    overrides : sequence of str or None
        ``dotted.key=value`` strings, applied in order.

    Returns
    -------
    dict
        A deep copy of ``doc`` with the overrides applied.

    Raises
    ------
    TopoplanError
        If an item has no ``=`` or an empty key.

    Examples
    --------
    >>> apply_overrides({"kind": "tree", "eps": {"up_bw": "20Gbps"}},
    ...                 ["eps.up_bw=1.6Gbps", "ocs.nodes_per_switch=4"])
    {'kind': 'tree', 'eps': {'up_bw': '1.6Gbps'}, 'ocs': {'nodes_per_switch': 4}}
    >>> apply_overrides({}, ["oops"])
    Traceback (most recent call last):
    ...
    planner.core.errors.TopoplanError: field 'set': 'oops': expected dotted.key=value
    """
    doc = copy.deepcopy(doc)
    for item in overrides or ():
        if "=" not in item:
            raise TopoplanError(f"field 'set': {item!r}: expected dotted.key=value")
        key, value = item.split("=", 1)
        parts = [p for p in key.strip().split(".") if p]
        if not parts:
            raise TopoplanError(f"field 'set': {item!r}: empty key")
        try:
            val = _load_yaml(value) if value.strip() else None
        except _Refused as exc:
            raise TopoplanError(f"field 'set': {item!r}: {exc.problem}") from None
        except yaml.YAMLError:
            val = value
        node = doc
        for p in parts[:-1]:
            if not isinstance(node.get(p), dict):
                node[p] = {}
            node = node[p]
        node[parts[-1]] = val
    return doc


def _get(d: dict, key: str, parse, default=None, *, prefix=""):
    if key not in d or d[key] is None:
        if default is None:
            raise TopoplanError(f"field '{prefix}{key}': missing")
        return default if not isinstance(default, str) else parse(default, f"{prefix}{key}")
    try:
        return parse(d[key], f"{prefix}{key}")
    except TopoplanError:
        raise
    except (TypeError, ValueError, OverflowError):
        raise TopoplanError(f"field '{prefix}{key}': bad value {d[key]!r}") from None


def _int(v, field, minimum=1, maximum=MAX_NODES):
    return check_count(v, field, minimum=minimum, maximum=maximum)


def _cores(v, field):
    return check_count(v, field, maximum=MAX_CORES_PER_NODE)


def _ports(v, field):
    return check_count(v, field, maximum=MAX_PORTS_PER_NODE)


def _list(doc, key, *, required=False):
    value = doc.get(key)
    if value is None:
        if required:
            raise TopoplanError(f"field '{key}': missing")
        return None
    if not isinstance(value, list):
        raise TopoplanError(f"field '{key}': expected a list, got {type(value).__name__} {_short(value)}")
    return value


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "..."


def _label(value, field) -> str:
    """A switch or host name: text (an integer is taken as its digits); anything else is refused."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise TopoplanError(f"field '{field}': expected a name, got {_short(value)} (quote it)")


def _host_names(doc) -> tuple[str, ...] | None:
    names = _list(doc, "hostnames")
    if not names:
        return None
    for i, h in enumerate(names):
        if not isinstance(h, str):   # 1.10 would become '1.1', on would become 'True'
            raise TopoplanError(f"field 'hostnames[{i}]': expected a host name, got {_short(h)} (quote it)")
    return tuple(names)   # the grammar and duplicates: TreeTopology/TorusTopology.validate


def _section(doc, key):
    sec = doc.get(key) or {}
    if not isinstance(sec, dict):
        raise TopoplanError(f"field '{key}': expected a mapping")
    return sec


_COMMON = {"kind", "name", "description", "paper", "variants", "cores_per_node", "node", "hostnames"}
# Keys each kind reads, per section: a key outside these (a typo in a file or in --set) would silently do
# nothing, so it is an error.
KNOWN_KEYS = {
    "tree": {"": _COMMON | {"switches", "nodes_per_switch", "eps", "ocs", "switch_names"},
             "eps": {"down_bw", "down_latency", "up_bw", "up_latency", "switch_delay", "mtu"},
             "ocs": {"nodes", "nodes_per_switch", "ports_per_node", "bw", "latency", "setup", "node_link_bw", "mtu"},
             "node": {"intra_bw", "intra_latency"}},
    "torus": {"": _COMMON | {"dims", "wrap", "bw", "latency", "router_delay", "injection_bw", "mtu"},
              "node": {"intra_bw", "intra_latency"}},
    "graph": {"": _COMMON | {"switches", "hosts", "links", "eps", "switch_guids"},
              "eps": {"latency", "switch_delay", "mtu"},
              "node": {"intra_bw", "intra_latency"}},
}
KNOWN_TOP = set().union(*(k[""] for k in KNOWN_KEYS.values()))


def _check_keys(doc: dict, family: str) -> None:
    """Reject keys the topology kind does not read (naming the first one and the known keys)."""
    for section, known in KNOWN_KEYS[family].items():
        part = doc if not section else doc.get(section)
        if not isinstance(part, dict):
            continue
        unknown = sorted(str(k) for k in set(part) - known)
        if unknown:
            field = f"{section}.{unknown[0]}" if section else unknown[0]
            kind = doc.get("kind", "tree")
            raise TopoplanError(f"field '{field}': unknown key for kind {kind} (known: {', '.join(sorted(known))})")


def topology_from_dict(doc: dict, name: str = "") -> Topology:
    """Build and validate a topology from the YAML document (see the module docstring).

    Parameters
    ----------
    doc : dict
        The document: ``kind`` (default ``tree``) and the keys that kind reads.
    name : str, optional
        The topology's name.

    Returns
    -------
    TreeTopology, TorusTopology or GraphTopology
        ``tree``/``fat-tree``/``hybrid`` give a :class:`~planner.core.topology.TreeTopology`
        (a ``tree`` with an ``ocs`` section becomes ``hybrid``), ``torus``/``mesh`` a
        :class:`~planner.core.topology.TorusTopology`, ``graph`` a :class:`~planner.core.topology.GraphTopology`.

    Raises
    ------
    TopoplanError
        Naming the field at fault: a key the kind does not read (with the
        known keys), a missing or malformed value, or a failed validation.

    See Also
    --------
    load_topology : from a preset or file, with overrides.
    topology_to_dict : the inverse.

    Examples
    --------
    >>> doc = {"kind": "tree", "switches": 2, "nodes_per_switch": 4,
    ...        "eps": {"down_bw": "10Gbps", "up_bw": "20Gbps"}}
    >>> t = topology_from_dict(doc, name="small")
    >>> t.n_nodes, t.node_switch().tolist()
    (8, [0, 0, 0, 0, 1, 1, 1, 1])
    >>> t.down_bw_Bps
    1250000000.0
    >>> topology_from_dict({**doc, "eps": {"down_bw": "10Gbps"}})
    Traceback (most recent call last):
    ...
    planner.core.errors.TopoplanError: field 'eps.up_bw': missing
    """
    if not isinstance(doc, dict):
        raise TopoplanError(f"a topology document is a mapping, got {type(doc).__name__}")
    unknown = sorted(str(k) for k in set(doc) - KNOWN_TOP)
    if unknown:
        raise TopoplanError(f"field '{unknown[0]}': unknown key (known: {', '.join(sorted(KNOWN_TOP))})")
    if doc.get("name") is not None and not isinstance(doc["name"], str):
        raise TopoplanError(f"field 'name': expected text, got {_short(doc['name'])} (quote it)")
    kind = str(doc.get("kind", "tree"))
    family = {"tree": "tree", "fat-tree": "tree", "hybrid": "tree", "torus": "torus", "mesh": "torus"}.get(kind, kind)
    if family in KNOWN_KEYS:
        _check_keys(doc, family)
    if kind in ("tree", "fat-tree", "hybrid"):
        topo = _tree(doc, kind, name)
    elif kind in ("torus", "mesh"):
        topo = _torus(doc, kind, name)
    elif kind == "graph":
        topo = _graph(doc, name)
    else:
        raise TopoplanError(f"field 'kind': unknown kind {kind!r} (tree, fat-tree, hybrid, torus, mesh, graph)")
    topo.validate()
    return topo


def _node_section(doc):
    node = _section(doc, "node")
    return dict(intra_node_bw_Bps=_get(node, "intra_bw", parse_bandwidth, "68Gbps", prefix="node."),
                intra_node_latency_s=_get(node, "intra_latency", parse_time, "100ns", prefix="node."))


def _check_nodes(n: int, field: str) -> None:
    if n > MAX_NODES:
        raise TopoplanError(f"field '{field}': gives {n:,} nodes, over the limit of {MAX_NODES:,}")


def _tree(doc, kind, name):
    nps = doc.get("nodes_per_switch")
    if nps is None:
        raise TopoplanError("field 'nodes_per_switch': missing")
    if isinstance(nps, list):
        if not nps:
            raise TopoplanError("field 'nodes_per_switch': an empty list (one count per switch)")
        counts = tuple(_int(v, f"nodes_per_switch[{i}]") for i, v in enumerate(nps))
        _check_nodes(sum(counts), "nodes_per_switch")
        if doc.get("switches") is not None and _int(doc["switches"], "switches") != len(counts):
            raise TopoplanError(f"field 'switches': {doc['switches']} but nodes_per_switch lists {len(counts)}")
    else:
        sw = _get(doc, "switches", _int)
        per_switch = _int(nps, "nodes_per_switch")
        _check_nodes(sw * per_switch, "switches")
        counts = (per_switch,) * sw
    eps = _section(doc, "eps")
    p = "eps."
    ocs = None
    if kind == "hybrid" or doc.get("ocs"):
        o = _section(doc, "ocs")
        if "nodes" in o and o["nodes"] is not None:
            if not isinstance(o["nodes"], list):
                raise TopoplanError("field 'ocs.nodes': expected a list of node ids")
            nodes = tuple(_int(v, f"ocs.nodes[{i}]", minimum=0) for i, v in enumerate(o["nodes"]))
        else:
            per = _get(o, "nodes_per_switch", lambda v, f: _int(v, f, minimum=0), prefix="ocs.")
            nodes = balanced_ocs_nodes(counts, per)
        link = o.get("node_link_bw")
        ocs = OCSConfig(nodes=nodes,
                        bw_Bps=_get(o, "bw", parse_bandwidth, prefix="ocs."),
                        latency_s=_get(o, "latency", parse_time, "0ns", prefix="ocs."),
                        setup_s=_get(o, "setup", parse_time, "10ms", prefix="ocs."),
                        ports_per_node=_get(o, "ports_per_node", _ports, 1, prefix="ocs."),
                        node_link_bw_Bps=None if link is None else parse_bandwidth(link, "ocs.node_link_bw"),
                        mtu_B=_get(o, "mtu", _mtu, "4096B", prefix="ocs."))
        if kind != "hybrid":
            kind = "hybrid" if kind == "tree" else kind
    switch_names = _list(doc, "switch_names")
    return TreeTopology(
        kind=kind, nodes_per_switch=counts,
        cores_per_node=_get(doc, "cores_per_node", _cores, 1),
        down_bw_Bps=_get(eps, "down_bw", parse_bandwidth, prefix=p),
        down_latency_s=_get(eps, "down_latency", parse_time, "0ns", prefix=p),
        up_bw_Bps=_get(eps, "up_bw", parse_bandwidth, prefix=p),
        up_latency_s=_get(eps, "up_latency", parse_time, str(eps.get("down_latency", "0ns")), prefix=p),
        switch_delay_s=_get(eps, "switch_delay", parse_time, "0ns", prefix=p),
        mtu_B=_get(eps, "mtu", _mtu, "4096B", prefix=p),
        ocs=ocs,
        hostnames=_host_names(doc),
        switch_names=tuple(_label(s, f"switch_names[{i}]") for i, s in enumerate(switch_names))
        if switch_names else None,
        name=name, **_node_section(doc))


def _per_dim(value, n, parse, field):
    if isinstance(value, list):
        return tuple(parse(v, f"{field}[{i}]") for i, v in enumerate(value))
    return (parse(value, field),) * n


def _torus(doc, kind, name):
    dims = doc.get("dims")
    if not isinstance(dims, list) or not dims:
        raise TopoplanError("field 'dims': expected a list of dimension sizes")
    dims = tuple(_int(v, f"dims[{i}]") for i, v in enumerate(dims))
    _check_nodes(int(np.prod(dims, dtype=object)), "dims")
    n = len(dims)
    wrap = doc.get("wrap", kind == "torus")
    if isinstance(wrap, list):
        if not all(isinstance(w, bool) for w in wrap):
            raise TopoplanError("field 'wrap': expected true/false per dimension")
        wrap = tuple(wrap)
    elif isinstance(wrap, bool):
        wrap = (wrap,) * n
    else:
        raise TopoplanError("field 'wrap': expected true/false or a list of them")
    bw = doc.get("bw")
    if bw is None:
        raise TopoplanError("field 'bw': missing link bandwidth")
    inj = doc.get("injection_bw")
    return TorusTopology(dims=dims, wrap=wrap, bw_Bps=_per_dim(bw, n, parse_bandwidth, "bw"),
                         latency_s=_get(doc, "latency", parse_time, "0ns"),
                         router_delay_s=_get(doc, "router_delay", parse_time, "0ns"),
                         cores_per_node=_get(doc, "cores_per_node", _cores, 1),
                         injection_bw_Bps=None if inj is None else parse_bandwidth(inj, "injection_bw"),
                         mtu_B=_get(doc, "mtu", _mtu, "4096B"),
                         hostnames=_host_names(doc),
                         name=name, kind=kind, **_node_section(doc))


def _graph(doc, name):
    if doc.get("hostnames") is not None:   # would be ignored: a graph names its hosts in hosts[i].name
        raise TopoplanError("field 'hostnames': a graph topology names its hosts in 'hosts' ({name, switch, bw})")
    switches = _list(doc, "switches")
    if not switches:
        raise TopoplanError("field 'switches': expected a list of switch names")
    switches = tuple(_label(s, f"switches[{i}]") for i, s in enumerate(switches))
    index = {s: i for i, s in enumerate(switches)}
    hosts, host_sw, host_bw = [], [], []
    for i, h in enumerate(_list(doc, "hosts") or []):
        if not isinstance(h, dict) or "name" not in h or "switch" not in h:
            raise TopoplanError(f"field 'hosts[{i}]': expected {{name, switch, bw}}")
        extra = sorted(str(k) for k in set(h) - {"name", "switch", "bw"})
        if extra:
            raise TopoplanError(f"field 'hosts[{i}].{extra[0]}': unknown key (known: bw, name, switch)")
        sw = _label(h["switch"], f"hosts[{i}].switch")
        if sw not in index:
            raise TopoplanError(f"field 'hosts[{i}].switch': unknown switch {h['switch']!r}")
        if not isinstance(h["name"], str):
            raise TopoplanError(f"field 'hosts[{i}].name': expected a host name, got {_short(h['name'])} (quote it)")
        hosts.append(h["name"])
        host_sw.append(index[sw])
        host_bw.append(parse_bandwidth(h.get("bw", "10Gbps"), f"hosts[{i}].bw"))
    if not hosts:
        raise TopoplanError("field 'hosts': a graph topology needs hosts")
    _check_nodes(len(hosts), "hosts")
    links = []
    for i, l in enumerate(_list(doc, "links") or []):
        if not isinstance(l, dict) or "a" not in l or "b" not in l:
            raise TopoplanError(f"field 'links[{i}]': expected {{a, b, bw}}")
        extra = sorted(str(k) for k in set(l) - {"a", "b", "bw"})
        if extra:
            raise TopoplanError(f"field 'links[{i}].{extra[0]}': unknown key (known: a, b, bw)")
        ends = []
        for end in ("a", "b"):
            sw = _label(l[end], f"links[{i}].{end}")
            if sw not in index:
                raise TopoplanError(f"field 'links[{i}].{end}': unknown switch {l[end]!r}")
            ends.append(index[sw])
        if ends[0] == ends[1]:
            raise TopoplanError(f"field 'links[{i}]': switch {switches[ends[0]]!r} is linked to itself")
        links.append((ends[0], ends[1], parse_bandwidth(l.get("bw", "10Gbps"), f"links[{i}].bw")))
    eps = _section(doc, "eps")
    guids = _list(doc, "switch_guids")
    return GraphTopology(switches=switches, hosts=tuple(hosts), host_switch=tuple(host_sw),
                         host_bw_Bps=tuple(host_bw), links=tuple(links),
                         latency_s=_get(eps, "latency", parse_time, "100ns", prefix="eps."),
                         switch_delay_s=_get(eps, "switch_delay", parse_time, "100ns", prefix="eps."),
                         cores_per_node=_get(doc, "cores_per_node", _cores, 1),
                         mtu_B=_get(eps, "mtu", _mtu, "4096B", prefix="eps."),
                         switch_guids=tuple(_label(g, f"switch_guids[{i}]") for i, g in enumerate(guids))
                         if guids else None,
                         name=name, **_node_section(doc))


def _mtu(v, field):
    mtu = parse_size(v, field)
    if not mtu > 0:
        raise TopoplanError(f"field '{field}': size must be positive, got {v!r}")
    return mtu


def _bw(x: float) -> str:
    return f"{x * 8 / 1e9:.10g}Gbps"


def _t(x: float) -> str:
    return f"{x * 1e9:.10g}ns"


def topology_to_dict(topo: Topology) -> dict:
    """The YAML document of a topology (inverse of :func:`topology_from_dict`).

    Quantities are written with units (``Gbps``, ``ns``, ``B``) so the
    document reads like a hand-written one.

    Parameters
    ----------
    topo : TreeTopology, TorusTopology or GraphTopology
        The topology.

    Returns
    -------
    dict
        A document that :func:`topology_from_dict` turns back into an equal topology.

    See Also
    --------
    dump_topology : the same as YAML text.

    Examples
    --------
    >>> t = load_topology("paper003")
    >>> d = topology_to_dict(t)
    >>> d["kind"], d["switches"], d["eps"]["up_bw"]
    ('hybrid', 4, '20Gbps')
    >>> topology_from_dict(d, name=d["name"]) == t
    True
    """
    node = {"intra_bw": _bw(topo.intra_node_bw_Bps), "intra_latency": _t(topo.intra_node_latency_s)}
    if isinstance(topo, TreeTopology):
        d = {"kind": topo.kind, "name": topo.name, "switches": topo.n_switches,
             "nodes_per_switch": list(topo.nodes_per_switch) if len(set(topo.nodes_per_switch)) > 1
             else topo.nodes_per_switch[0],
             "cores_per_node": topo.cores_per_node,
             "eps": {"down_bw": _bw(topo.down_bw_Bps), "down_latency": _t(topo.down_latency_s),
                     "up_bw": _bw(topo.up_bw_Bps), "up_latency": _t(topo.up_latency_s),
                     "switch_delay": _t(topo.switch_delay_s), "mtu": f"{topo.mtu_B:.10g}B"},
             "node": node}
        if topo.ocs is not None:
            o = topo.ocs
            d["ocs"] = {"nodes": list(o.nodes), "ports_per_node": o.ports_per_node, "bw": _bw(o.bw_Bps),
                        "latency": _t(o.latency_s), "setup": _t(o.setup_s), "mtu": f"{o.mtu_B:.10g}B"}
            if o.node_link_bw_Bps is not None:
                d["ocs"]["node_link_bw"] = _bw(o.node_link_bw_Bps)
        if topo.hostnames:
            d["hostnames"] = list(topo.hostnames)
        if topo.switch_names:
            d["switch_names"] = list(topo.switch_names)
        return d
    if isinstance(topo, TorusTopology):
        d = {"kind": topo.kind, "name": topo.name, "dims": list(topo.dims), "wrap": list(topo.wrap),
             "bw": [_bw(b) for b in topo.bw_Bps], "latency": _t(topo.latency_s),
             "router_delay": _t(topo.router_delay_s), "cores_per_node": topo.cores_per_node,
             "mtu": f"{topo.mtu_B:.10g}B", "node": node}
        if topo.injection_bw_Bps:
            d["injection_bw"] = _bw(topo.injection_bw_Bps)
        return d
    d = {"kind": "graph", "name": topo.name, "cores_per_node": topo.cores_per_node,
         "eps": {"latency": _t(topo.latency_s), "switch_delay": _t(topo.switch_delay_s), "mtu": f"{topo.mtu_B:.10g}B"},
         "node": node, "switches": list(topo.switches),
         "hosts": [{"name": h, "switch": topo.switches[s], "bw": _bw(b)}
                   for h, s, b in zip(topo.hosts, topo.host_switch, topo.host_bw_Bps)],
         "links": [{"a": topo.switches[a], "b": topo.switches[b], "bw": _bw(bw)} for a, b, bw in topo.links]}
    if topo.switch_guids:
        d["switch_guids"] = list(topo.switch_guids)
    return d


def dump_topology(topo: Topology) -> str:
    """The YAML text of a topology, as ``topoplan topo show`` prints it.

    Parameters
    ----------
    topo : TreeTopology, TorusTopology or GraphTopology
        The topology.

    Returns
    -------
    str
        YAML of :func:`topology_to_dict`, keys in document order.

    Examples
    --------
    >>> t = topology_from_dict({"switches": 2, "nodes_per_switch": 4,
    ...                         "eps": {"down_bw": "10Gbps", "up_bw": "20Gbps"}}, name="small")
    >>> print(dump_topology(t))  # doctest: +ELLIPSIS
    kind: tree
    name: small
    switches: 2
    nodes_per_switch: 4
    cores_per_node: 1
    eps:
      down_bw: 10Gbps
    ...
    """
    return yaml.dump(topology_to_dict(topo), Dumper=_StrictDumper, sort_keys=False)


# -- Slurm topology.conf (tree plugin) -----------------------------------------

def expand_hostlist(expr: str, where: str = "") -> list[str]:
    """Expand a Slurm host list: ``tux[0-3,7],node[001-002]`` -> tux0..tux3, tux7, node001, node002.

    Zero-padded ranges keep their width; several bracket groups multiply out.

    Parameters
    ----------
    expr : str
        The host list.
    where : str, optional
        Prefix of error messages (e.g. ``"topology.conf:3: "``).

    Returns
    -------
    list of str
        The host names, in order.

    Raises
    ------
    TopoplanError
        For unbalanced brackets, a bad or backwards range, or more than
        ``MAX_NODES`` hosts.

    Examples
    --------
    >>> expand_hostlist("tux[0-3,7],node[001-002]")
    ['tux0', 'tux1', 'tux2', 'tux3', 'tux7', 'node001', 'node002']
    >>> expand_hostlist("n[1-2]-c[01-02]")
    ['n1-c01', 'n1-c02', 'n2-c01', 'n2-c02']
    >>> expand_hostlist("n[3-1]")
    Traceback (most recent call last):
    ...
    planner.core.errors.TopoplanError: host list 'n[3-1]': range '3-1' runs backwards
    """
    out = []
    for item in _split_top(expr.strip()):
        if not item:
            continue
        parts = re.split(r"(\[[^\]]*\])", item)
        combos = [""]
        for part in parts:
            if part.startswith("["):
                if not part.endswith("]"):
                    raise TopoplanError(f"{where}host list {expr!r}: unbalanced '['")
                choices = []
                for rng in part[1:-1].split(","):
                    m = re.fullmatch(r"[ \t]*([0-9]+)[ \t]*(?:-[ \t]*([0-9]+))?[ \t]*", rng)
                    if not m:
                        raise TopoplanError(f"{where}host list {expr!r}: bad range {rng!r}")
                    lo, hi = m.group(1), m.group(2) or m.group(1)
                    if int(hi) < int(lo):
                        raise TopoplanError(f"{where}host list {expr!r}: range {rng!r} runs backwards")
                    width = len(lo) if lo.startswith("0") else 0
                    if len(choices) + int(hi) - int(lo) + 1 > MAX_NODES:
                        raise TopoplanError(f"{where}host list {expr!r}: more than {MAX_NODES:,} hosts")
                    choices.extend(str(v).zfill(width) for v in range(int(lo), int(hi) + 1))
                if len(combos) * len(choices) > MAX_NODES:
                    raise TopoplanError(f"{where}host list {expr!r}: more than {MAX_NODES:,} hosts")
                combos = [c + x for c in combos for x in choices]
            else:
                if "[" in part or "]" in part:
                    raise TopoplanError(f"{where}host list {expr!r}: unbalanced brackets")
                combos = [c + part for c in combos]
        out.extend(combos)
        if len(out) > MAX_NODES:
            raise TopoplanError(f"{where}host list {expr!r}: more than {MAX_NODES:,} hosts")
    return out


def _split_top(expr: str) -> list[str]:
    """Split on commas that are not inside brackets."""
    out, depth, cur = [], 0, ""
    for ch in expr:
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return out


# Slurm leaves LinkSpeed's unit open ("the units used are arbitrary"). topoplan reads every bare number
# -- 100, 100.0, 1e2, .5 -- as Gb/s, and a value with a unit (100Gbps, 12.5GB/s) through planner.core.units.
SLURM_LINKSPEED_UNIT = "Gbps"
_SLURM_SPEED = re.compile(r"([-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)([A-Za-z/]*)")
_SLURM_KEYS = {"switchname": "SwitchName", "nodes": "Nodes", "switches": "Switches", "linkspeed": "LinkSpeed"}


def _slurm_speed(text: str, where: str) -> float:
    m = _SLURM_SPEED.fullmatch(text)
    if m is None:
        raise TopoplanError(f"{where}field 'LinkSpeed': cannot read {text!r} (a number, read as Gb/s, or a "
                            "bandwidth such as 100Gbps)")
    try:
        return parse_bandwidth(text + SLURM_LINKSPEED_UNIT if not m.group(2) else text)
    except TopoplanError as exc:
        raise TopoplanError(f"{where}field 'LinkSpeed': {exc} (a bare LinkSpeed is in Gb/s)") from None


def _slurm_lines(text: str):
    """(first line number, logical line) pairs: comments removed, backslash continuations joined."""
    out, buf, start = [], "", 0
    for no, raw in enumerate(text.split("\n"), 1):
        line = raw.rstrip("\r").split("#", 1)[0].rstrip(" \t")
        if not buf:
            start = no
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        if buf.strip(" \t"):
            out.append((start, buf.strip(" \t")))
        buf = ""
    if buf.strip(" \t"):   # a continuation on the last line: the switch is still there
        out.append((start, buf.strip(" \t")))
    return out


def slurm_to_dict(text: str, path="topology.conf", *, default_speed="10Gbps") -> dict:
    """Parse a Slurm ``topology.conf`` (tree plugin) into a topology document.

    Lines ``SwitchName=S [Nodes=hostlist] [Switches=hostlist] [LinkSpeed=N]``
    (keys in any case); ``#`` comments and ``\\`` continuations (also on the
    last line). A two-level tree becomes ``kind: tree``, deeper or irregular
    trees ``kind: graph``.

    LinkSpeed: a switch's LinkSpeed is the bandwidth of its links down to its
    children (its Nodes and its Switches). Slurm leaves the unit open; here a
    bare number (``100``, ``100.0``, ``1e2``) is Gb/s, and a value with a unit
    (``100Gbps``, ``12.5GB/s``) is read by :func:`planner.core.units.parse_bandwidth`.
    Give LinkSpeed on every switch with children or on none (then every link
    is ``default_speed``). A two-level tree whose leaves differ in speed
    becomes ``kind: graph``, which keeps a bandwidth per host and per link.

    Parameters
    ----------
    text : str
        The file's content.
    path : str or path, optional
        The file name, used in error messages (``path:line:``) and as the topology name.
    default_speed : str, optional
        Link bandwidth when no switch has a LinkSpeed.

    Returns
    -------
    dict
        A topology document for :func:`topology_from_dict`.

    Raises
    ------
    TopoplanError
        Naming the file and line: a line without ``SwitchName=``, an unknown
        or repeated key, an unreadable LinkSpeed or one missing on some
        switches, a switch defined twice, listing an unknown switch, itself, a
        switch twice, or in a cycle; a node under two switches or listed
        twice, a host name launchers would misread (see
        :func:`planner.core.topology.check_host_names`), more than ``MAX_NODES``
        nodes, or switches whose nodes cannot reach each other.

    Examples
    --------
    >>> conf = ("SwitchName=s0 Nodes=n[1-2] LinkSpeed=10\\n"
    ...         "SwitchName=s1 Nodes=n[3-4] LinkSpeed=1e1\\n"
    ...         "SwitchName=top Switches=s[0-1] LinkSpeed=40Gbps\\n")
    >>> doc = slurm_to_dict(conf)
    >>> doc["kind"], doc["nodes_per_switch"], doc["hostnames"]
    ('tree', [2, 2], ['n1', 'n2', 'n3', 'n4'])
    >>> doc["eps"]
    {'down_bw': '10Gbps', 'up_bw': '40Gbps'}
    >>> topology_from_dict(doc).n_nodes
    4
    >>> slurm_to_dict("SwitchName=s1 Switches=s2\\nSwitchName=s2 Switches=s1 Nodes=n1\\n")
    Traceback (most recent call last):
    ...
    planner.core.errors.TopoplanError: topology.conf:1: switch 's1' is in a cycle: s1 -> s2 -> s1
    """
    switches: dict[str, dict] = {}
    owner: dict[str, tuple[str, int]] = {}   # node -> (switch, line)
    n_children = 0
    for no, line in _slurm_lines(text):
        where = f"{path}:{no}: "
        fields: dict[str, str] = {}
        for tok in re.split(r"[ \t]+", line):
            if "=" not in tok:
                raise TopoplanError(f"{where}expected Key=Value, got {tok!r}")
            k, v = tok.split("=", 1)
            key = k.lower()
            if key not in _SLURM_KEYS:
                raise TopoplanError(f"{where}unknown key {k!r} (SwitchName, Nodes, Switches, LinkSpeed)")
            if key in fields:
                raise TopoplanError(f"{where}field '{_SLURM_KEYS[key]}': given twice on one line")
            fields[key] = v
        if "switchname" not in fields:
            raise TopoplanError(f"{where}line has no SwitchName= (tree plugin lines only)")
        name = fields["switchname"]
        if not name or any(c in name for c in "[],"):
            raise TopoplanError(f"{where}field 'SwitchName': {name!r} is not a switch name (no brackets or commas)")
        if name in switches:
            raise TopoplanError(f"{where}switch {name!r} defined twice (first at line {switches[name]['line']})")
        speed = fields.get("linkspeed")
        nodes = expand_hostlist(fields.get("nodes", ""), where)
        for h in nodes:
            if h in owner:
                sw, ln = owner[h]
                where_else = "listed twice under switch" if sw == name else "also under switch"
                raise TopoplanError(f"{where}node {h!r} is {where_else} {sw!r} (line {ln})")
            owner[h] = (name, no)
        if len(owner) > MAX_NODES:
            raise TopoplanError(f"{where}more than {MAX_NODES:,} nodes in the file")
        children = expand_hostlist(fields.get("switches", ""), where)
        n_children += len(children)
        if n_children > MAX_NODES:
            raise TopoplanError(f"{where}more than {MAX_NODES:,} switch links in the file")
        seen_child: set[str] = set()
        for c in children:
            if c == name:
                raise TopoplanError(f"{where}switch {name!r} lists itself in Switches")
            if c in seen_child:
                raise TopoplanError(f"{where}switch {name!r} lists switch {c!r} twice")
            seen_child.add(c)
        switches[name] = {"line": no, "nodes": nodes, "children": children,
                          "speed": None if speed is None else _slurm_speed(speed, where)}
    if not switches:
        raise TopoplanError(f"{path}: no SwitchName lines")
    hosts = list(owner)
    check_host_names(hosts, "Nodes", source=path, lines=[owner[h][1] for h in hosts])
    for name, s in switches.items():
        for c in s["children"]:
            if c not in switches:
                raise TopoplanError(f"{path}:{s['line']}: switch {name!r} lists unknown switch {c!r}")
    _slurm_acyclic(switches, path)
    _slurm_connected(switches, path)
    linked = [n for n, s in switches.items() if s["nodes"] or s["children"]]
    given = [n for n in linked if switches[n]["speed"] is not None]
    if given and len(given) < len(linked):
        miss = next(n for n in linked if switches[n]["speed"] is None)
        raise TopoplanError(f"{path}:{switches[miss]['line']}: switch {miss!r} has no LinkSpeed but switch "
                            f"{given[0]!r} (line {switches[given[0]]['line']}) has one: give LinkSpeed on every "
                            f"switch or on none (then every link is {default_speed})")
    default = parse_bandwidth(default_speed, "default_speed")
    speed = {n: s["speed"] if s["speed"] is not None else default for n, s in switches.items()}
    leaves = [n for n, s in switches.items() if s["nodes"]]
    tops = [n for n, s in switches.items() if s["children"]]
    two_level = (len(tops) == 1 and not switches[tops[0]]["nodes"]
                 and sorted(switches[tops[0]]["children"]) == sorted(leaves)
                 and all(not switches[l]["children"] for l in leaves))
    one_switch = len(switches) == 1 and leaves
    if (two_level or one_switch) and len({speed[l] for l in leaves}) == 1:
        leaf_speed = speed[leaves[0]]
        top_speed = speed[tops[0]] if two_level else leaf_speed
        return {"kind": "tree", "name": Path(str(path)).stem, "switches": len(leaves),
                "nodes_per_switch": [len(switches[l]["nodes"]) for l in leaves],
                "hostnames": [h for l in leaves for h in switches[l]["nodes"]], "switch_names": leaves,
                "eps": {"down_bw": _bw(leaf_speed), "up_bw": _bw(top_speed)}}
    names = list(switches)
    return {"kind": "graph", "name": Path(str(path)).stem, "switches": names,
            "hosts": [{"name": h, "switch": n, "bw": _bw(speed[n])} for n in names for h in switches[n]["nodes"]],
            "links": [{"a": n, "b": c, "bw": _bw(speed[n])} for n in names for c in switches[n]["children"]]}


def _slurm_acyclic(switches: dict, path) -> None:
    """Refuse a switch below itself (s1 Switches=s2, s2 Switches=s1), naming the cycle."""
    state: dict[str, int] = {}   # 1: on the current path, 2: done
    for root in switches:
        if state.get(root):
            continue
        stack = [(root, iter(switches[root]["children"]))]
        trail = [root]
        state[root] = 1
        while stack:
            node, it = stack[-1]
            child = next(it, None)
            if child is None:
                state[node] = 2
                stack.pop()
                trail.pop()
                continue
            if state.get(child) == 1:
                cycle = trail[trail.index(child):] + [child]
                raise TopoplanError(f"{path}:{switches[child]['line']}: switch {child!r} is in a cycle: "
                                    + " -> ".join(cycle))
            if not state.get(child):
                state[child] = 1
                trail.append(child)
                stack.append((child, iter(switches[child]["children"])))


def _slurm_connected(switches: dict, path) -> None:
    """Refuse switches whose nodes cannot reach each other (Slurm allows it; a plan across them is meaningless)."""
    parent = {n: n for n in switches}

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for n, s in switches.items():
        for c in s["children"]:
            parent[find(c)] = find(n)
    leaves = [n for n, s in switches.items() if s["nodes"]]
    for n in leaves[1:]:
        if find(n) != find(leaves[0]):
            raise TopoplanError(f"{path}:{switches[n]['line']}: switch {n!r} is not connected to switch "
                                f"{leaves[0]!r} (line {switches[leaves[0]]['line']}): no switch lists both, so "
                                "their nodes cannot reach each other")
