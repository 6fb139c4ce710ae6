"""Reading and writing topologies: the YAML format, named presets, ``--set`` overrides, Slurm topology.conf.

Everything goes through one plain dict (the YAML document), so presets,
files and ``--set dotted.key=value`` overrides behave the same way.

YAML keys (quantities take units, see :mod:`topoplan.core.units`)::

    kind: tree | fat-tree | hybrid | torus | mesh | graph
    switches: 4              # tree kinds: edge switches
    nodes_per_switch: 16     # or a list, one count per switch
    cores_per_node: 4
    eps: {down_bw: 10Gbps, down_latency: 500ns, up_bw: 20Gbps, up_latency: 500ns,
          switch_delay: 420ns, mtu: 4096B}
    node: {intra_bw: 68Gbps, intra_latency: 100ns}
    ocs: {nodes_per_switch: 8 | nodes: [..], ports_per_node: 1, bw: 20Gbps,
          latency: 500ns, setup: 10ms, node_link_bw: 20Gbps}   # a tree with an ocs is a hybrid
    # torus/mesh: dims: [10, 10, 10], wrap: [false, ...] (or true), bw: 4.76GB/s (or list), latency
    # graph: switches: [names], hosts: [{name, switch, bw}], links: [{a, b, bw}]

The OCS nodes are ``ocs.nodes_per_switch`` balanced per switch or the list ``ocs.nodes``: a document may
give both if they name the same nodes, and one set over a document (``--set``, an overlay) replaces the other.

Documents are read strictly: a key given twice, more than 100 aliases (or
aliases adding more than 100,000 values), nesting deeper than
64 and files over ``MAX_TOPOLOGY_BYTES`` are errors. Numbers are read as in
YAML 1.2 (``010`` is text, not octal 8; ``1e3`` is 1000), and every count
(``cores_per_node``, ``dims``, ...) must be a finite integer in range (see
:func:`topoplan.core.topology.check_count`). Host names must be valid for
launcher files and distinct (:func:`topoplan.core.topology.check_host_names`).

Slurm ``topology.conf``: a switch's ``LinkSpeed`` is the bandwidth of its
links to its children. Slurm leaves its unit to each site, so a bare number
(``100``, ``1e2``) is read only with ``--set slurm_linkspeed_unit=UNIT``
(``Gbps``, ``Mbps``, ``GB/s``, ...); a value with a unit goes through
:mod:`topoplan.core.units` (see :func:`slurm_to_dict`).
Slurm's ``topology.yaml`` (23.11+; tree and block topologies) is told from a
topoplan YAML by its shape: a list of ``- topology: name`` entries, where a
topoplan topology is a mapping (see :func:`slurm_yaml_to_dict`). Either Slurm
file takes its core counts from the ``slurm.conf`` beside it (``NodeName``
lines, physical cores: see :func:`slurm_conf_nodes`); ``--set slurm_conf=PATH``
names another one (or ``none``), ``--set slurm_topology=NAME`` picks a
topology of a ``topology.yaml``, ``--set slurm_linkspeed_unit=UNIT`` gives the
unit of bare ``LinkSpeed`` numbers, and ``--set cores_per_node=N`` wins over
``slurm.conf``.

An overlay is a topology YAML with a ``base`` key: the topology it adds to (a file, relative to the
overlay, such as a Slurm ``topology.conf``, or a preset), the overlay's other keys merged over the base's
(``ocs: {nodes_per_switch: 4, bw: 100Gbps}`` makes a Slurm tree a hybrid). It is named after its own file;
its ``slurm_linkspeed_unit`` states the unit of a Slurm base's bare ``LinkSpeed`` numbers, as the ``--set``
of that name does.
"""

from __future__ import annotations

import copy
import re
import sys
from pathlib import Path

import numpy as np
import yaml

from topoplan.core.errors import TopoplanError
from topoplan.core.io import read_text
from topoplan.core.topology import (MAX_CORES_PER_NODE, MAX_NODES, MAX_PORTS_PER_NODE, GraphTopology, OCSConfig,
                                   Topology, TorusTopology, TreeTopology, balanced_ocs_nodes, check_count,
                                   check_host_names)
from topoplan.core.units import parse_bandwidth, parse_size, parse_time, shown
from topoplan.core.topology import _host_name_problem

__all__ = ["PRESET_DIR", "MAX_NODES", "MAX_TOPOLOGY_BYTES", "KNOWN_KEYS", "preset_names", "load_topology",
           "apply_overrides", "topology_from_dict", "topology_to_dict", "dump_topology", "expand_hostlist",
           "slurm_to_dict", "slurm_yaml_to_dict", "slurm_conf_nodes", "cores_hint", "SLURM_OPTIONS",
           "strict_yaml"]

PRESET_DIR = Path(__file__).resolve().parents[1] / "instances"


def preset_names() -> list[str]:
    """Names of the topology presets shipped in ``topoplan/instances/`` (one YAML file each).

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
    """Load a topology from a preset name, a YAML file or a Slurm ``topology.conf``/``topology.yaml``.

    A Slurm file (:func:`slurm_to_dict`, :func:`slurm_yaml_to_dict`) gets the
    cores of its nodes from the ``slurm.conf`` in the same directory, as Slurm
    keeps them (:func:`slurm_conf_nodes`: physical cores, hardware threads not
    counted). Both files must list the same nodes, and all nodes must have
    one core count (topoplan's ``cores_per_node`` is one number per
    topology); either mismatch is an error naming the file, line and host.
    Without a ``slurm.conf`` (or one without counts) every node has Slurm's
    default of 1 core, and "ranks do not fit" errors say how to give them
    (:func:`cores_hint`).

    Parameters
    ----------
    spec : str, path or dict
        A preset name (see :func:`preset_names`), a path to a YAML file (an
        overlay when it has a ``base`` key, see the module docstring) or a
        Slurm ``topology.conf`` or ``topology.yaml``, or an already-built
        document (copied, not changed).
    overrides : sequence of str, optional
        ``dotted.key=value`` strings applied to the document first
        (``ocs.nodes_per_switch=4``, ``eps.up_bw=1.6Gbps``), see :func:`apply_overrides`;
        ``kind=tree`` or ``kind=fat-tree`` on a topology with an OCS needs ``ocs=null`` too.
        Four more apply to Slurm files: ``slurm_conf=PATH`` reads that
        ``slurm.conf`` (``slurm_conf=none``: none), ``slurm_topology=NAME``
        reads that topology of a ``topology.yaml``, ``slurm_linkspeed_unit=UNIT``
        is the unit of bare ``LinkSpeed`` numbers (a bandwidth unit: ``Gbps``,
        ``Mbps``, ``GB/s``; Slurm leaves it to each site, so a bare number is
        an error without it), and ``cores_per_node=N`` is used instead of
        ``slurm.conf`` (which is then not read).
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
        with the preset name or path. Also for ``kind=tree`` or
        ``kind=fat-tree`` set over an OCS (without ``ocs=null``), and
        ``ocs.nodes`` and ``ocs.nodes_per_switch`` that name different
        nodes. For a Slurm file: the errors of its
        reader, a ``slurm.conf`` that lacks a node or has one the topology
        lacks, or gives nodes different core counts.

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
    >>> load_topology("paper003", ["kind=tree"])
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: paper003: field 'kind': --set kind=tree, but the topology has an OCS, which makes a tree a hybrid; drop the OCS with --set ocs=null (or keep it with --set kind=hybrid)
    >>> load_topology("paper003", ["kind=tree", "ocs=null"]).kind
    'tree'
    >>> load_topology("paper004")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: unknown topology preset 'paper004' (presets: ...; or give a file)

    A Slurm cluster: ``topology.conf`` and the ``slurm.conf`` beside it.

    >>> import os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> with open(os.path.join(tmp.name, "topology.conf"), "w") as fh:
    ...     _ = fh.write("SwitchName=s1 Nodes=cn[01-02]\\nSwitchName=s2 Nodes=cn[03-04]\\n"
    ...                  "SwitchName=top Switches=s[1-2]\\n")
    >>> with open(os.path.join(tmp.name, "slurm.conf"), "w") as fh:
    ...     _ = fh.write("NodeName=DEFAULT Sockets=2 CoresPerSocket=12 ThreadsPerCore=2\\nNodeName=cn[01-04]\\n")
    >>> t = load_topology(os.path.join(tmp.name, "topology.conf"))
    >>> t.n_nodes, t.cores_per_node, t.host_names()[2]
    (4, 24, 'cn03')
    >>> load_topology(os.path.join(tmp.name, "topology.conf"), ["cores_per_node=48"]).cores_per_node
    48
    """
    overrides, slurm_opts = _slurm_options(_override_list(overrides))
    doc, origin, lines, slurm = _document(spec, slurm_opts.get("slurm_topology"),
                                          _linkspeed_unit(slurm_opts.get("slurm_linkspeed_unit")))
    if slurm is None and slurm_opts:
        key = next(iter(slurm_opts))
        raise TopoplanError(f"field '{key}': applies to a Slurm topology.conf or topology.yaml, not to {origin}")
    hint = None
    if slurm is not None and not _sets_cores(overrides) and not slurm.get("cores_given"):
        # --set cores_per_node=N (or an overlay's cores_per_node): slurm.conf is not read
        hint = _apply_slurm_conf(doc, slurm, slurm_opts.get("slurm_conf"))
    doc = apply_overrides(doc, overrides)
    _check_kind_override(doc, overrides, origin, lines)
    try:
        topo = topology_from_dict(doc, name=name or doc.get("name") or origin)
    except TopoplanError as exc:
        raise TopoplanError(f"{origin}{_line_of(str(exc), lines, overrides)}: {exc}") from None
    if hint:
        topo._slurm_cores_hint = hint   # not a field: not compared, hashed or written; read by cores_hint()
    return topo


def _check_kind_override(doc: dict, overrides, origin: str, lines: dict | None) -> None:
    """Refuse ``--set kind=tree`` or ``--set kind=fat-tree`` on a topology that keeps an OCS.

    A document of kind ``tree`` with an ``ocs`` section is a hybrid (a Slurm tree with an overlay's OCS), so
    ``--set kind=tree`` alone on a hybrid would change nothing; a ``fat-tree`` reads an ``ocs`` section too
    (circuits beside unshared uplinks), so ``--set kind=fat-tree`` alone would keep the OCS and its nodes'
    links where a fat-tree EPS was meant. The OCS is dropped with ``--set ocs=null``. ``hybrid`` names its
    OCS, and the other kinds (torus, mesh, graph) read no ``ocs`` section: a tree's document is refused by
    its keys. A file that says ``kind: fat-tree`` beside an ``ocs`` section is taken as written.

    >>> _check_kind_override({"kind": "fat-tree", "ocs": {"bw": 1}}, ["kind=fat-tree"], "t.yaml", None)
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: t.yaml: field 'kind': --set kind=fat-tree, but the topology has an OCS, which a fat-tree keeps; drop the OCS with --set ocs=null (a fat-tree that keeps an OCS is written as kind: fat-tree in a topology file)
    >>> _check_kind_override({"kind": "fat-tree", "ocs": None}, ["kind=fat-tree", "ocs=null"], "t.yaml", None)
    """
    kind = doc.get("kind")
    if kind not in ("tree", "fat-tree") or not doc.get("ocs") or "kind" not in {_override_key(i) for i in overrides}:
        return
    where = ""
    if lines and "ocs" in lines and Path(origin).is_file():   # a preset's lines are not the user's
        where = f" (the ocs section, line {lines['ocs']})"
    if kind == "tree":
        raise TopoplanError(f"{origin}: field 'kind': --set kind=tree, but the topology has an OCS{where}, which "
                            "makes a tree a hybrid; drop the OCS with --set ocs=null (or keep it with --set "
                            "kind=hybrid)")
    raise TopoplanError(f"{origin}: field 'kind': --set kind=fat-tree, but the topology has an OCS{where}, which a "
                        "fat-tree keeps; drop the OCS with --set ocs=null (a fat-tree that keeps an OCS is written "
                        "as kind: fat-tree in a topology file)")


def _line_of(message: str, lines: dict | None, overrides) -> str:
    """``:N`` for the line of the field a message names (``field 'eps.up_bw': ...``), when the file has it."""
    m = re.match(r"field '([^']+)'", message)
    if not lines or m is None:
        return ""
    field = m.group(1)
    for item in overrides or ():   # a value from --set has no line in the file
        key = _override_key(item)
        if field == key or field.startswith((key + ".", key + "[")):
            return ""
    while field:
        if field in lines:
            return f":{lines[field]}"
        field = re.sub(r"(\.[^.\[]*|\[\d+\])$", "", field) if re.search(r"[.\[]", field) else ""
    return ""


def _document(spec, slurm_topology: str | None = None, linkspeed_unit: str | None = None, *,
              overlay: bool = True):
    """(document, origin for messages, field -> line map or None, Slurm source or None).

    The Slurm source of a topology.conf or topology.yaml is ``{path, hosts, where}``: its file, its nodes in
    order and the ``file:line`` listing each (and ``cores_given`` when an overlay sets ``cores_per_node``).
    A YAML file with a ``base`` key is an overlay (:func:`_overlay`); ``overlay=False`` refuses one (a base's base).
    """
    if isinstance(spec, dict):
        return copy.deepcopy(spec), spec.get("name", "topology"), None, None
    text = str(spec)
    path = Path(text)
    if path.is_file():
        raw = _read(path)
        if path.suffix == ".conf" or re.search(r"(?im)^\s*(switchname|blockname)\s*=", raw):
            if slurm_topology is not None:
                raise TopoplanError(f"field 'slurm_topology': names a topology of a Slurm topology.yaml; {path} is "
                                    "a topology.conf (one topology)")
            doc, where = _slurm_conf_topology(raw, path, linkspeed_unit=linkspeed_unit)
            doc.pop("name", None)   # named after its file as given (every cluster's is called topology.conf)
            return doc, str(path), None, _slurm_source(path, doc, where)
        doc, lines = _yaml_lines(raw, path, slurm=True)
        if _is_slurm_yaml(doc):
            doc, where = _slurm_yaml(doc, lines, path, slurm_topology, linkspeed_unit=linkspeed_unit)
            return doc, str(path), None, _slurm_source(path, doc, where)
        if "base" in doc:
            if not overlay:
                raise TopoplanError(f"{path}:{lines.get('base', 1)}: field 'base': this file is the base of an "
                                    "overlay and has a base of its own; name the topology it adds to directly")
            return _overlay(doc, lines, path, slurm_topology, linkspeed_unit)
        return doc, str(path), lines, None
    if (PRESET_DIR / f"{text}.yaml").is_file():
        p = PRESET_DIR / f"{text}.yaml"
        doc, lines = _yaml_lines(p.read_text(encoding="utf-8"), p)
        return doc, text, lines, None
    if Path(text).is_dir():
        raise TopoplanError(f"{text}: a directory, not a topology file (a YAML file, a preset, or Slurm's "
                            "topology.conf / topology.yaml)")
    if "/" in text or text.endswith((".yaml", ".yml", ".json", ".conf")):
        raise TopoplanError(f"{text}: no such topology file")
    raise TopoplanError(f"unknown topology preset {text!r} (presets: {', '.join(preset_names())}; or give a file)")


def _overlay(doc: dict, lines: dict, path: Path, slurm_topology: str | None, linkspeed_unit: str | None = None):
    """An overlay file: ``base`` names the topology it adds to (a file, relative to the overlay, or a preset) and
    the other keys are merged over the base's (a mapping key by key, anything else replaced; the overlay's
    ``ocs.nodes`` or ``ocs.nodes_per_switch`` replaces the base's other one, as ``--set`` does). The result is
    named after the overlay, and a Slurm base keeps reading its slurm.conf unless the overlay sets
    ``cores_per_node``."""
    base = doc.pop("base")
    at = f"{path}:{lines.get('base', 1)}: field 'base'"
    if not isinstance(base, str) or not base.strip():
        raise TopoplanError(f"{at}: expected a topology file (relative to {path.name}) or a preset name, got "
                            f"{_short(base)}")
    unit = doc.pop("slurm_linkspeed_unit", None)   # a Slurm base's LinkSpeed unit, stated once in the overlay
    if unit is not None:
        if linkspeed_unit is not None and _linkspeed_unit(str(unit)) != linkspeed_unit:
            raise TopoplanError(f"{path}:{lines.get('slurm_linkspeed_unit', 1)}: field 'slurm_linkspeed_unit': "
                                f"{unit} here, another unit in --set slurm_linkspeed_unit")
        linkspeed_unit = _linkspeed_unit(str(unit))
    target = path.parent / base
    if not target.is_file() and not (PRESET_DIR / f"{base}.yaml").is_file():
        raise TopoplanError(f"{at}: {base}: no such file beside {path.name} ({target}) and no preset of that name "
                            f"(presets: {', '.join(preset_names())})")
    base_doc, _, _, slurm = _document(target if target.is_file() else base, slurm_topology, linkspeed_unit,
                                      overlay=False)
    base_doc.pop("name", None)   # the overlay's name, or its file's
    over_ocs, base_ocs = doc.get("ocs"), base_doc.get("ocs")
    if isinstance(over_ocs, dict) and isinstance(base_ocs, dict):   # the overlay's way of choosing OCS nodes wins
        given = {f"ocs.{k}" for k in _OCS_CHOICE if over_ocs.get(k) is not None}
        for key in _OCS_CHOICE:
            if over_ocs.get(key) is not None:
                _replace_ocs_choice(base_ocs, key, given)
    if slurm is not None and doc.get("cores_per_node") is not None:
        slurm = {**slurm, "cores_given": True}
    return _merged(base_doc, doc), str(path), lines, slurm


def _merged(base: dict, over: dict) -> dict:
    """``over`` merged into a copy of ``base``: mappings key by key, any other value replaced.

    >>> _merged({"eps": {"up_bw": "1Gbps", "mtu": "4KiB"}, "switches": 2}, {"eps": {"up_bw": "2Gbps"}, "ocs": {"bw": 1}})
    {'eps': {'up_bw': '2Gbps', 'mtu': '4KiB'}, 'switches': 2, 'ocs': {'bw': 1}}
    """
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


# A topology file is a few KB (a million explicit host names: ~15 MB); the YAML reader builds a Python object
# of a few hundred bytes per value, so a larger file is refused before it is read.
MAX_TOPOLOGY_BYTES = 16 << 20


def _read(path: Path) -> str:
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


def _construct_int(loader: _StrictLoader, node):
    """An integer, refused (naming its line) when it has more digits than ``int()`` converts (4,300: a ValueError
    out of PyYAML otherwise)."""
    digits = len(str(node.value).lstrip("-+").replace("_", ""))
    limit = sys.get_int_max_str_digits()
    if limit and digits > limit:
        raise _Refused(None, None, f"a number of {digits:,} digits (at most {limit:,} are read)", node.start_mark)
    return yaml.SafeLoader.construct_yaml_int(loader, node)


_StrictLoader.add_constructor(_INT, _construct_int)


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


def _yaml_lines(raw: str, path, *, slurm: bool = False) -> tuple:
    """The document of a topology file and the line of every field's value.

    With ``slurm``, a list (a Slurm topology.yaml) is returned too; anything else but a mapping is refused.
    """
    if len(raw) > MAX_TOPOLOGY_BYTES:
        raise TopoplanError(f"{path}: {len(raw):,} characters, over the limit of {MAX_TOPOLOGY_BYTES:,} for a "
                            "topology file")
    lines: dict[str, int] = {}
    doc = strict_yaml(raw, path, lines=lines)
    if slurm and _is_slurm_yaml(doc):
        return doc, lines
    if not isinstance(doc, dict):
        got = "an empty file" if doc is None else f"a {type(doc).__name__}"
        raise TopoplanError(f"{path}: a topology file must be a YAML mapping (kind: tree, ...) or, for Slurm's "
                            f"topology.yaml, a list of topologies ('- topology: name'); this is {got}")
    if "topology" in doc and any(k in doc for k in _SLURM_YAML_KINDS):
        raise TopoplanError(f"{path}:{lines.get('topology', 1)}: field 'topology': this is one topology of a Slurm "
                            "topology.yaml, which is a list: write it as '- topology: name' (a topoplan topology "
                            "has kind: tree, ...)")
    return doc, lines


def _slurm_source(path: Path, doc: dict, where: dict) -> dict:
    hosts = doc["hostnames"] if doc["kind"] == "tree" else [h["name"] for h in doc["hosts"]]
    return {"path": path, "hosts": hosts, "where": where}


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
    topoplan.core.errors.TopoplanError: c.yaml:2: field 'a': duplicate key (first at line 1); a key may appear once
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
    ``ocs.nodes_per_switch`` and ``ocs.nodes`` are two ways of choosing the
    OCS nodes: setting one replaces the other in ``doc`` (a saved topology
    lists its OCS nodes; ``ocs.nodes_per_switch=2`` on it chooses them
    anew), unless the overrides set both.

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
    >>> apply_overrides({"ocs": {"nodes": [0, 1, 4, 5], "bw": "20Gbps"}}, ["ocs.nodes_per_switch=1"])
    {'ocs': {'bw': '20Gbps', 'nodes_per_switch': 1}}
    >>> apply_overrides({}, ["oops"])
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: field 'set': 'oops': expected dotted.key=value
    """
    doc = copy.deepcopy(doc)
    items = _override_list(overrides)
    keys = {_override_key(item) for item in items if isinstance(item, str)}
    for item in items:
        if not isinstance(item, str):
            raise TopoplanError(f"field 'set': {item!r}: expected a dotted.key=value string, got "
                                f"{type(item).__name__}")
        if "=" not in item:
            raise TopoplanError(f"field 'set': {item!r}: expected dotted.key=value")
        key, value = item.split("=", 1)
        parts = [p for p in key.strip().split(".") if p]
        if not parts:
            raise TopoplanError(f"field 'set': {item!r}: empty key")
        try:
            val = _load_yaml(value) if value.strip() else None
        except _Refused as exc:
            raise TopoplanError(f"field 'set': {shown(item)}: {exc.problem}") from None
        except yaml.YAMLError:
            val = value
        node = doc
        for p in parts[:-1]:
            if not isinstance(node.get(p), dict):
                node[p] = {}
            node = node[p]
        if val is not None and parts[:-1] == ["ocs"] and parts[-1] in _OCS_CHOICE:
            _replace_ocs_choice(node, parts[-1], given=keys)
        node[parts[-1]] = val
    return doc


# The two ways of choosing the OCS nodes: a file may give both if they agree (see _tree); one given over a
# document (by --set or an overlay) replaces the other.
_OCS_CHOICE = ("nodes", "nodes_per_switch")


def _replace_ocs_choice(ocs: dict, key: str, given=()) -> None:
    """Drop from the ``ocs`` section the other way of choosing the OCS nodes than ``key``, unless it is among
    the keys ``given`` with it (``ocs.nodes``, ...)."""
    other = _OCS_CHOICE[1 - _OCS_CHOICE.index(key)]
    if f"ocs.{other}" not in given:
        ocs.pop(other, None)


def _override_key(item: str) -> str:
    """The dotted key of a ``--set`` item, as :func:`apply_overrides` reads it (``" ocs..bw =1"`` -> ``ocs.bw``)."""
    return ".".join(p for p in item.split("=", 1)[0].strip().split(".") if p)


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


def _node_list(nodes) -> str:
    """Node ids for a message: the first few and how many.

    >>> _node_list((0, 16, 32, 48)), _node_list(range(32))
    ('[0, 16, 32, 48]', '[0, 1, 2, 3, 4, 5, ...] (32 nodes)')
    """
    nodes = list(nodes)
    if len(nodes) <= 6:
        return str(nodes)
    return f"[{', '.join(map(str, nodes[:6]))}, ...] ({len(nodes)} nodes)"


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
    "tree": {"": _COMMON | {"switches", "nodes_per_switch", "eps", "ocs", "switch_names", "top_name"},
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
        ``tree``/``fat-tree``/``hybrid`` give a :class:`~topoplan.core.topology.TreeTopology`
        (a ``tree`` with an ``ocs`` section becomes ``hybrid``), ``torus``/``mesh`` a
        :class:`~topoplan.core.topology.TorusTopology`, ``graph`` a :class:`~topoplan.core.topology.GraphTopology`.

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
    topoplan.core.errors.TopoplanError: field 'eps.up_bw': missing
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


def _check_tree_fields(doc: dict, kind: str) -> None:
    """Every required field of a tree kind that ``doc`` lacks, in one message (one at a time would take a
    user as many runs as there are fields).

    >>> _check_tree_fields({"switches": 2, "nodes_per_switch": 4, "eps": {"down_bw": 1, "up_bw": 2}}, "hybrid")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: missing fields 'ocs.nodes_per_switch' (or 'ocs.nodes') and 'ocs.bw' (an OCS names its nodes and circuit bandwidth, e.g. ocs: {nodes_per_switch: 4, bw: 100Gbps})
    """
    eps = _section(doc, "eps")   # a section that is not a mapping is malformed, not missing
    o = _section(doc, "ocs") if kind == "hybrid" or doc.get("ocs") else {}
    nps = doc.get("nodes_per_switch")
    missing = ["nodes_per_switch"] if nps is None else []
    if not isinstance(nps, list) and doc.get("switches") is None:
        missing.append("switches")
    missing += [f"eps.{k}" for k in ("down_bw", "up_bw") if eps.get(k) is None]
    if kind == "hybrid" or doc.get("ocs"):
        if o.get("nodes") is None and o.get("nodes_per_switch") is None:
            missing.append("ocs.nodes_per_switch")
        if o.get("bw") is None:
            missing.append("ocs.bw")
    if not missing:
        return
    hint = (" (an OCS names its nodes and circuit bandwidth, e.g. ocs: {nodes_per_switch: 4, bw: 100Gbps})"
            if any(m.startswith("ocs.") for m in missing) else "")
    if len(missing) == 1:
        raise TopoplanError(f"field '{missing[0]}': missing{hint}")
    named = [f"'{m}'" + (" (or 'ocs.nodes')" if m == "ocs.nodes_per_switch" else "") for m in missing]
    raise TopoplanError(f"missing fields {', '.join(named[:-1])} and {named[-1]}{hint}")


def _tree(doc, kind, name):
    _check_tree_fields(doc, kind)
    nps = doc["nodes_per_switch"]
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
        nodes = None
        if "nodes" in o and o["nodes"] is not None:
            if not isinstance(o["nodes"], list):
                raise TopoplanError("field 'ocs.nodes': expected a list of node ids")
            nodes = tuple(_int(v, f"ocs.nodes[{i}]", minimum=0) for i, v in enumerate(o["nodes"]))
        if o.get("nodes_per_switch") is not None or nodes is None:
            per = _get(o, "nodes_per_switch", lambda v, f: _int(v, f, minimum=0), prefix="ocs.")
            balanced = balanced_ocs_nodes(counts, per)
            if nodes is None:
                nodes = balanced
            elif sorted(nodes) != list(balanced):
                raise TopoplanError(f"field 'ocs.nodes_per_switch': {per} chooses OCS nodes "
                                    f"{_node_list(balanced)}, but ocs.nodes lists {_node_list(nodes)}; give one "
                                    "of the two")
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
        top_name=_label(doc["top_name"], "top_name") if doc.get("top_name") is not None else None,
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


def _balanced_per_switch(nodes_per_switch, nodes) -> int | None:
    """The ``ocs.nodes_per_switch`` that gives exactly ``nodes`` (in order), or None.

    >>> _balanced_per_switch((4, 4), (0, 1, 4, 5)), _balanced_per_switch((4, 4), (0, 4, 5))
    (2, None)
    """
    per, rest = divmod(len(nodes), len(nodes_per_switch))
    if rest or per > min(nodes_per_switch) or tuple(nodes) != balanced_ocs_nodes(nodes_per_switch, per):
        return None
    return per


def topology_to_dict(topo: Topology) -> dict:
    """The YAML document of a topology (inverse of :func:`topology_from_dict`).

    Quantities are written with units (``Gbps``, ``ns``, ``B``) so the
    document reads like a hand-written one. OCS nodes balanced per switch
    are written as ``ocs.nodes_per_switch``, as the presets give them (so
    ``--set nodes_per_switch=32`` on a saved topology chooses them as on
    its preset), other OCS nodes as the list ``ocs.nodes``.

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
    >>> d["kind"], d["switches"], d["eps"]["up_bw"], d["ocs"]["nodes_per_switch"]
    ('hybrid', 4, '20Gbps', 8)
    >>> topology_from_dict(d, name=d["name"]) == t
    True
    >>> topology_to_dict(load_topology("paper003", ["ocs.nodes=[0, 1, 16]"]))["ocs"]["nodes"]
    [0, 1, 16]
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
            per = _balanced_per_switch(topo.nodes_per_switch, o.nodes)
            d["ocs"] = {**({"nodes": list(o.nodes)} if per is None else {"nodes_per_switch": per}),
                        "ports_per_node": o.ports_per_node, "bw": _bw(o.bw_Bps),
                        "latency": _t(o.latency_s), "setup": _t(o.setup_s), "mtu": f"{o.mtu_B:.10g}B"}
            if o.node_link_bw_Bps is not None:
                d["ocs"]["node_link_bw"] = _bw(o.node_link_bw_Bps)
        if topo.hostnames:
            d["hostnames"] = list(topo.hostnames)
        if topo.switch_names:
            d["switch_names"] = list(topo.switch_names)
        if topo.top_name:
            d["top_name"] = topo.top_name
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


# -- Slurm: topology.conf, topology.yaml, slurm.conf ----------------------------

def expand_hostlist(expr: str, where: str = "", *, hosts: bool = True, limit: int = MAX_NODES) -> list[str]:
    """Expand a Slurm host list: ``tux[0-3,7],node[001-002]`` -> tux0..tux3, tux7, node001, node002.

    Read as Slurm reads it (``hostlist_create``): items are separated by commas, spaces or tabs
    outside brackets (``node[01-02] node05`` is three hosts; inside brackets a comma separates
    ranges, and spaces are ignored). A bracket holds numbers and ``lo-hi`` ranges of ASCII digits; a
    range keeps the width of its first number (``node[08-10]`` -> node08, node09, node10). Several
    bracket groups in one item multiply out, the last varying fastest (``rack[1-2]-node[1-3]`` is six
    hosts). Order and repeated names are kept (callers say where a name is listed twice). Hosts are
    counted before any is made, so a huge range is refused without using memory. Every name must be
    one a launcher can use (:func:`topoplan.core.topology.check_host_names`).

    Parameters
    ----------
    expr : str
        The host list.
    where : str, optional
        Prefix of error messages (e.g. ``"topology.conf:3: field 'Nodes': "``).
    hosts : bool, optional
        The names are hosts (checked as a launcher reads them); False for other names
        listed the same way (a switch's ``Switches=s[1-2]``).
    limit : int, optional
        The most names the list may expand to (default ``MAX_NODES``, 1,048,576).

    Returns
    -------
    list of str
        The host names, in order.

    Raises
    ------
    TopoplanError
        For unbalanced, nested or empty brackets, a bad or backwards range, a name
        a launcher would misread (``n1;reboot``, ``n[1-2]=x``), or more than
        ``limit`` names.

    Examples
    --------
    >>> expand_hostlist("tux[0-3,7],node[001-002]")
    ['tux0', 'tux1', 'tux2', 'tux3', 'tux7', 'node001', 'node002']
    >>> expand_hostlist("node[01-02] node05"), expand_hostlist("n[1-2]-c[01-02]")
    (['node01', 'node02', 'node05'], ['n1-c01', 'n1-c02', 'n2-c01', 'n2-c02'])
    >>> expand_hostlist("node[08-10]")
    ['node08', 'node09', 'node10']
    >>> expand_hostlist("n[3-1]")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: host list 'n[3-1]': a range runs backwards (start > stop): '3-1'
    >>> expand_hostlist("n[0-99999999]")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: host list 'n[0-99999999]': more than 1,048,576 hosts (it expands to 100,000,000)
    >>> expand_hostlist("n[1-2];reboot")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: host name 'n1;reboot' contains ';'; host names may only contain letters, digits, '-', '_' and '.' (from host list 'n[1-2];reboot')
    """
    def fail(reason: str) -> TopoplanError:
        return TopoplanError(f"{where}host list {expr!r}: {reason}")

    out: list[str] = []
    for item in _hostlist_items(expr, fail):
        texts, groups = _hostlist_item(item, fail)
        count = 1
        for ranges in groups:
            count *= sum(hi - lo + 1 for lo, hi, _ in ranges)
        if len(out) + count > limit:
            raise fail(f"more than {limit:,} hosts (it expands to {len(out) + count:,})")
        names = [texts[0]]
        for ranges, text in zip(groups, texts[1:]):
            tails = [f"{i:0{width}d}{text}" for lo, hi, width in ranges for i in range(lo, hi + 1)]
            names = [name + tail for name in names for tail in tails]
        out.extend(names)
    for name in out if hosts else ():
        problem = _host_name_problem(name)
        if problem:
            raise TopoplanError(f"{where}{problem} (from host list {expr!r})")
    return out


def _hostlist_items(expr: str, fail) -> list[str]:
    """The items of a host list: split, as Slurm splits it, at commas, spaces and tabs outside brackets
    (spaces inside brackets are dropped: ``n[1, 3]``); empty items are skipped."""
    items, depth, cur = [], 0, []
    for ch in expr:
        if ch == "[":
            depth += 1
            if depth > 1:
                raise fail("nested brackets")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise fail("unbalanced brackets")
        if depth == 0 and ch in ", \t":
            items.append("".join(cur))
            cur = []
        elif not (depth > 0 and ch in " \t"):
            cur.append(ch)
    if depth:
        raise fail("unbalanced brackets")
    items.append("".join(cur))
    return [x for x in items if x]


# One range inside brackets: a number, or lo-hi, in ASCII digits (not other scripts' digits).
_HOSTLIST_RANGE = re.compile(r"([0-9]+)(?:-([0-9]+))?")


def _hostlist_item(item: str, fail) -> tuple[list[str], list[list[tuple[int, int, int]]]]:
    """One item (balanced, unnested brackets) as its texts between bracket groups and, for each
    group, its ranges as (lo, hi, width): ``r[1-2]n[08,10]`` -> (['r', 'n', ''], [[(1, 2, 1)],
    [(8, 8, 2), (10, 10, 2)]])."""
    pieces = re.split(r"\[([^\]]*)\]", item)   # text, group, text, group, ..., text
    groups = []
    for body in pieces[1::2]:
        ranges = []
        for part in body.split(","):
            m = _HOSTLIST_RANGE.fullmatch(part)
            if m is None:
                raise fail(f"bad range {part!r} in brackets (a number or lo-hi, in digits 0-9)"
                           if part else "bad range: an empty range in brackets")
            lo_text, hi_text = m.group(1), m.group(2) or m.group(1)
            if max(len(lo_text), len(hi_text)) > 18:   # Slurm's numbers are 64-bit
                raise fail(f"bad range {part!r} in brackets (a number of more than 18 digits)")
            lo, hi = int(lo_text), int(hi_text)
            if lo > hi:
                raise fail(f"a range runs backwards (start > stop): {part!r}")
            ranges.append((lo, hi, len(lo_text)))
        groups.append(ranges)
    return pieces[0::2], groups


# Slurm leaves LinkSpeed's unit open ("the units used are arbitrary": a site writes 100 for 100 Gb/s, another
# 100000 for the same link in Mb/s). A bare number -- 100, 100.0, 1e2, .5 -- is read only in the unit the
# user states (--set slurm_linkspeed_unit=UNIT); a value with a unit (100Gbps, 12.5GB/s) through
# topoplan.core.units.
_UNIT_OPTION = "slurm_linkspeed_unit"
_SLURM_SPEED = re.compile(r"([-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)([A-Za-z/]*)")


def _linkspeed_unit(unit: str | None) -> str | None:
    """The ``--set slurm_linkspeed_unit=UNIT`` value, checked to be a bandwidth unit (None: not given)."""
    if unit is None:
        return None
    try:
        if not re.fullmatch(r"[A-Za-z/]+", unit):
            raise TopoplanError(unit)
        parse_bandwidth("1" + unit)
    except TopoplanError:
        raise TopoplanError(f"field '{_UNIT_OPTION}': {unit!r} is not a bandwidth unit (Gbps, Mbps, Gb/s, "
                            "GB/s, ...)") from None
    return unit


def _slurm_speed(text, where: str, field: str = "LinkSpeed", unit: str | None = None) -> float:
    if isinstance(text, (int, float)) and not isinstance(text, bool):   # a number in topology.yaml
        text = repr(text)
    m = _SLURM_SPEED.fullmatch(text) if isinstance(text, str) else None
    if m is None:
        raise TopoplanError(f"{where}field '{field}': cannot read {text!r} (a number in the unit of --set "
                            f"{_UNIT_OPTION}=UNIT, or a bandwidth such as 100Gbps)")
    if not m.group(2) and unit is None:
        raise TopoplanError(f"{where}field '{field}': {text} has no unit, and Slurm leaves {field}'s unit to each "
                            f"site: pass --set {_UNIT_OPTION}=UNIT with your site's unit (Gbps, Mbps, "
                            "GB/s, ...)")
    try:
        return parse_bandwidth(text + unit if not m.group(2) else text)
    except TopoplanError as exc:
        hint = f" (a bare {field} is in {unit}, from --set {_UNIT_OPTION})" if not m.group(2) else ""
        raise TopoplanError(f"{where}field '{field}': {exc}{hint}") from None


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


# Field names of a switch in messages: topology.conf's keys, or topology.yaml's.
_CONF_FIELDS = {"switch": "SwitchName", "nodes": "Nodes", "children": "Switches", "speed": "LinkSpeed",
                "block": "BlockName", "sizes": "BlockSizes"}
_YAML_FIELDS = {"switch": "switch", "nodes": "nodes", "children": "children", "speed": "link_speed",
                "block": "block", "sizes": "block_sizes"}
# Keys that start a slurm.conf line, never a topology.conf one: a slurm.conf given as the topology.
_SLURM_CONF_FIRST = {"nodename", "clustername", "partitionname", "slurmctldhost", "controlmachine", "slurmuser",
                     "selecttype", "schedulertype", "authtype", "nodeset"}


def slurm_to_dict(text: str, path="topology.conf", *, default_speed="10Gbps", linkspeed_unit: str | None = None
                  ) -> dict:
    """Parse a Slurm ``topology.conf`` (tree or block plugin) into a topology document.

    Tree plugin: lines ``SwitchName=S [Nodes=hostlist] [Switches=hostlist]
    [LinkSpeed=N]``. A two-level tree becomes ``kind: tree``, deeper or
    irregular trees ``kind: graph``. Block plugin: lines ``BlockName=B
    Nodes=hostlist`` and at most one ``BlockSizes=n1,n2,...``; see
    :func:`slurm_yaml_to_dict` for what blocks become. Keys in any case;
    ``#`` comments and ``\\`` continuations (also on the last line). Core
    counts are not in this file: :func:`load_topology` reads them from the
    ``slurm.conf`` beside it (:func:`slurm_conf_nodes`).

    LinkSpeed: a switch's LinkSpeed is the bandwidth of its links down to its
    children (its Nodes and its Switches). Slurm leaves the unit to each site
    (one writes ``100`` for 100 Gb/s, another ``100000`` for the same link in
    Mb/s), so a bare number (``100``, ``100.0``, ``1e2``) is read in
    ``linkspeed_unit`` and refused without one; a value with a unit
    (``100Gbps``, ``12.5GB/s``) is read by :func:`topoplan.core.units.parse_bandwidth`.
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
        Link bandwidth when no switch has a LinkSpeed (and of every link of a block topology).
    linkspeed_unit : str, optional
        The unit of bare LinkSpeed numbers (``Gbps``, ``Mbps``, ``GB/s``); ``--set
        slurm_linkspeed_unit=UNIT`` of :func:`load_topology`.

    Returns
    -------
    dict
        A topology document for :func:`topology_from_dict`.

    Raises
    ------
    TopoplanError
        Naming the file and line: a line without ``SwitchName=``/``BlockName=``,
        an unknown or repeated key, switches and blocks in one file, an
        unreadable LinkSpeed, a bare one without ``linkspeed_unit``, or one
        missing on some switches, a switch or
        block defined twice, listing an unknown switch, itself, a switch
        twice, or in a cycle; a node under two switches or listed twice, a
        host name launchers would misread (see
        :func:`topoplan.core.topology.check_host_names`), more than
        ``MAX_NODES`` nodes, switches whose nodes cannot reach each other, or
        a ``slurm.conf`` given in place of the topology.

    See Also
    --------
    slurm_yaml_to_dict : the same from Slurm's ``topology.yaml``.
    load_topology : reads the file, and core counts from ``slurm.conf``.

    Examples
    --------
    >>> conf = ("SwitchName=s0 Nodes=n[1-2] LinkSpeed=10\\n"
    ...         "SwitchName=s1 Nodes=n[3-4] LinkSpeed=1e1\\n"
    ...         "SwitchName=top Switches=s[0-1] LinkSpeed=40Gbps\\n")
    >>> doc = slurm_to_dict(conf, linkspeed_unit="Gbps")
    >>> doc["kind"], doc["nodes_per_switch"], doc["hostnames"]
    ('tree', [2, 2], ['n1', 'n2', 'n3', 'n4'])
    >>> doc["eps"]
    {'down_bw': '10Gbps', 'up_bw': '40Gbps'}
    >>> topology_from_dict(doc).n_nodes
    4
    >>> slurm_to_dict(conf)
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: topology.conf:1: field 'LinkSpeed': 10 has no unit, and Slurm leaves LinkSpeed's unit to each site: pass --set slurm_linkspeed_unit=UNIT with your site's unit (Gbps, Mbps, GB/s, ...)
    >>> blocks = slurm_to_dict("BlockName=b1 Nodes=n[1-4]\\nBlockName=b2 Nodes=n[5-8]\\nBlockSizes=4,8\\n")
    >>> blocks["switch_names"], blocks["nodes_per_switch"]
    (['b1', 'b2'], [4, 4])
    >>> slurm_to_dict("SwitchName=s1 Switches=s2\\nSwitchName=s2 Switches=s1 Nodes=n1\\n")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: topology.conf:1: switch 's1' is in a cycle: s1 -> s2 -> s1
    """
    return _slurm_conf_topology(text, path, default_speed, linkspeed_unit=_linkspeed_unit(linkspeed_unit))[0]


def _slurm_conf_topology(text: str, path, default_speed="10Gbps", *, linkspeed_unit=None) -> tuple[dict, dict]:
    """(document, host -> ``path:line`` of the line listing it) of a topology.conf."""
    switches, blocks, sizes = [], [], None
    for no, line in _slurm_lines(text):
        where = f"{path}:{no}: "
        fields: dict[str, str] = {}
        for tok in re.split(r"[ \t]+", line):
            if "=" not in tok:
                if not fields and tok.lower() == "include":
                    raise TopoplanError(f"{where}Include lines belong in slurm.conf; a topology.conf lists "
                                        "SwitchName or BlockName lines")
                raise TopoplanError(f"{where}expected Key=Value, got {tok!r}")
            k, v = tok.split("=", 1)
            key = k.lower()
            if key not in ("switchname", "nodes", "switches", "linkspeed", "blockname", "blocksizes"):
                if not fields and key in _SLURM_CONF_FIRST:
                    raise TopoplanError(f"{where}{k}= is a slurm.conf line: give --topology the topology.conf "
                                        "(or topology.yaml) beside it; slurm.conf is read from the same "
                                        "directory for the core counts")
                raise TopoplanError(f"{where}unknown key {k!r} (SwitchName, Nodes, Switches, LinkSpeed; or "
                                    "BlockName, Nodes, BlockSizes)")
            name = {"switchname": "SwitchName", "nodes": "Nodes", "switches": "Switches", "linkspeed": "LinkSpeed",
                    "blockname": "BlockName", "blocksizes": "BlockSizes"}[key]
            if key in fields:
                raise TopoplanError(f"{where}field '{name}': given twice on one line")
            fields[key] = v
        if "switchname" in fields:
            extra = [k for k in fields if k in ("blockname", "blocksizes")]
            if extra:
                raise TopoplanError(f"{where}field '{_CONF_FIELDS['block' if extra[0] == 'blockname' else 'sizes']}'"
                                    ": not a key of a SwitchName line")
            switches.append({"line": no, "where": where, "name": fields["switchname"],
                             "nodes": fields.get("nodes", ""), "children": fields.get("switches", ""),
                             "speed": fields.get("linkspeed")})
        elif "blockname" in fields:
            extra = [k for k in fields if k not in ("blockname", "nodes")]
            if extra:
                shown = {"switches": "Switches", "linkspeed": "LinkSpeed", "blocksizes": "BlockSizes"}[extra[0]]
                raise TopoplanError(f"{where}field '{shown}': not a key of a BlockName line")
            blocks.append({"line": no, "where": where, "name": fields["blockname"], "nodes": fields.get("nodes", "")})
        elif "blocksizes" in fields:
            if len(fields) > 1:
                raise TopoplanError(f"{where}field 'BlockSizes': give it on a line of its own")
            if sizes is not None:
                raise TopoplanError(f"{where}field 'BlockSizes': given twice (first at line {sizes[0]})")
            sizes = (no, fields["blocksizes"])
        else:
            raise TopoplanError(f"{where}line has no SwitchName= or BlockName= (tree and block plugin lines only)")
    if switches and (blocks or sizes):
        other = blocks[0]["line"] if blocks else sizes[0]
        raise TopoplanError(f"{path}:{other}: block plugin lines and SwitchName lines (tree plugin, line "
                            f"{switches[0]['line']}) in one file: a topology.conf describes one plugin")
    if blocks or sizes:
        size_list = None
        if sizes is not None:
            size_list = [(f"{path}:{sizes[0]}: ", v) for v in sizes[1].split(",")]
        return _slurm_blocks(blocks, size_list, path, _CONF_FIELDS, default_speed)
    if not switches:
        raise TopoplanError(f"{path}: no SwitchName lines")
    return _slurm_tree(switches, path, _CONF_FIELDS, default_speed, linkspeed_unit)


def _switch_name(name, where: str, field: str) -> str:
    if not name or any(c in name for c in "[],") or any(c.isspace() for c in name):
        raise TopoplanError(f"{where}field '{field}': {name!r} is not a name (no brackets, commas or spaces)")
    return name


def _slurm_tree(entries: list, path, f: dict, default_speed, linkspeed_unit=None) -> tuple[dict, dict]:
    """A tree of switches (``{line, where, name, nodes, children, speed}`` each) as a topology document."""
    switches: dict[str, dict] = {}
    owner: dict[str, tuple[str, int]] = {}   # node -> (switch, line)
    n_children = 0
    for e in entries:
        no, where = e["line"], e["where"]
        name = _switch_name(e["name"], where, f["switch"])
        if name in switches:
            raise TopoplanError(f"{where}switch {name!r} defined twice (first at line {switches[name]['line']})")
        nodes = expand_hostlist(e["nodes"], f"{where}field '{f['nodes']}': ")
        for h in nodes:
            if h in owner:
                sw, ln = owner[h]
                where_else = "listed twice under switch" if sw == name else "also under switch"
                raise TopoplanError(f"{where}node {h!r} is {where_else} {sw!r} (line {ln})")
            owner[h] = (name, no)
        if len(owner) > MAX_NODES:
            raise TopoplanError(f"{where}more than {MAX_NODES:,} nodes in the file")
        children = expand_hostlist(e["children"], f"{where}field '{f['children']}': ", hosts=False)
        n_children += len(children)
        if n_children > MAX_NODES:
            raise TopoplanError(f"{where}more than {MAX_NODES:,} switch links in the file")
        seen_child: set[str] = set()
        for c in children:
            if c == name:
                raise TopoplanError(f"{where}switch {name!r} lists itself in {f['children']}")
            if c in seen_child:
                raise TopoplanError(f"{where}switch {name!r} lists switch {c!r} twice")
            seen_child.add(c)
        switches[name] = {"line": no, "where": where, "nodes": nodes, "children": children, "speed": e["speed"]}
    if not switches:
        raise TopoplanError(f"{path}: no switches")
    hosts = list(owner)
    check_host_names(hosts, f["nodes"], source=path, lines=[owner[h][1] for h in hosts])
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
        raise TopoplanError(f"{path}:{switches[miss]['line']}: switch {miss!r} has no {f['speed']} but switch "
                            f"{given[0]!r} (line {switches[given[0]]['line']}) has one: give {f['speed']} on every "
                            f"switch or on none (then every link is {default_speed})")
    for s in switches.values():   # read once the file's structure is known to be sound
        if s["speed"] is not None:
            s["speed"] = _slurm_speed(s["speed"], s["where"], f["speed"], linkspeed_unit)
    if not hosts:
        raise TopoplanError(f"{path}: no switch lists {f['nodes']}: a topology needs nodes")
    where_host = {h: f"{path}:{ln}" for h, (_, ln) in owner.items()}
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
        return ({"kind": "tree", "name": Path(str(path)).stem, "switches": len(leaves),
                 "nodes_per_switch": [len(switches[l]["nodes"]) for l in leaves],
                 "hostnames": [h for l in leaves for h in switches[l]["nodes"]], "switch_names": leaves,
                 "eps": {"down_bw": _bw(leaf_speed), "up_bw": _bw(top_speed)},
                 **({"top_name": tops[0]} if two_level else {})}, where_host)
    names = list(switches)
    return ({"kind": "graph", "name": Path(str(path)).stem, "switches": names,
             "hosts": [{"name": h, "switch": n, "bw": _bw(speed[n])} for n in names for h in switches[n]["nodes"]],
             "links": [{"a": n, "b": c, "bw": _bw(speed[n])} for n in names for c in switches[n]["children"]]},
            where_host)


def _slurm_blocks(entries: list, sizes, path, f: dict, default_speed) -> tuple[dict, dict]:
    """Blocks (``{line, where, name, nodes}`` each) as a two-level tree: one switch per block, one on top.

    ``sizes`` is None or ``[(where, value), ...]``: Slurm's block sizes, checked as Slurm checks them (each a
    power-of-two multiple of the first) but not used: they constrain allocations, not links.
    """
    if sizes is not None:
        base = None
        for where, v in sizes:
            text = str(v).strip()
            if isinstance(v, bool) or not re.fullmatch(r"[0-9]+", text) or len(text) > 18 or int(text) < 1:
                # (Slurm's numbers are 64-bit; and int() fails past 4,300 digits)
                raise TopoplanError(f"{where}field '{f['sizes']}': expected positive integers, got {shown(v)}")
            n = int(text)
            base = base or n
            if n % base or (n // base) & (n // base - 1) or n // base >= 1 << 16:
                raise TopoplanError(f"{where}field '{f['sizes']}': {n} is not a power-of-two multiple of the "
                                    f"base block size {base} (1, 2, 4, ... up to 32768 times it)")
    names: dict[str, int] = {}
    owner: dict[str, tuple[str, int]] = {}
    leaves = []
    for e in entries:
        no, where = e["line"], e["where"]
        name = _switch_name(e["name"], where, f["block"])
        if name in names:
            raise TopoplanError(f"{where}block {name!r} defined twice (first at line {names[name]})")
        names[name] = no
        nodes = expand_hostlist(e["nodes"], f"{where}field '{f['nodes']}': ")
        for h in nodes:
            if h in owner:
                b, ln = owner[h]
                where_else = "listed twice in block" if b == name else "also in block"
                raise TopoplanError(f"{where}node {h!r} is {where_else} {b!r} (line {ln})")
            owner[h] = (name, no)
        if len(owner) > MAX_NODES:
            raise TopoplanError(f"{where}more than {MAX_NODES:,} nodes in the file")
        if nodes:   # Slurm allows a block without nodes; it has nothing to place on
            leaves.append((name, nodes))
    if not owner:
        raise TopoplanError(f"{path}: no block lists {f['nodes']}: a topology needs nodes")
    hosts = list(owner)
    check_host_names(hosts, f["nodes"], source=path, lines=[owner[h][1] for h in hosts])
    bw = _bw(parse_bandwidth(default_speed, "default_speed"))
    return ({"kind": "tree", "name": Path(str(path)).stem, "switches": len(leaves),
             "nodes_per_switch": [len(n) for _, n in leaves], "hostnames": hosts,
             "switch_names": [b for b, _ in leaves], "eps": {"down_bw": bw, "up_bw": bw}},
            {h: f"{path}:{ln}" for h, (_, ln) in owner.items()})


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


# -- Slurm topology.yaml (23.11+: several topologies, tree and block plugins) ---------------------------

_SLURM_YAML_KINDS = ("tree", "block", "flat", "ring", "torus3d")


def slurm_yaml_to_dict(text: str, path="topology.yaml", *, topology: str | None = None,
                       default_speed="10Gbps", linkspeed_unit: str | None = None) -> dict:
    """Parse a Slurm ``topology.yaml`` (Slurm 23.11 and later) into a topology document.

    The file is a list of topologies, each ``topology: name``, optionally
    ``cluster_default: true``, and exactly one of ``tree``, ``block``,
    ``flat``, ``ring`` or ``torus3d``. The one read is ``topology`` if given,
    else the first with ``cluster_default: true``, else the first (as Slurm
    picks its default). It is read with :func:`strict_yaml`.

    ``tree: {switches: [{switch, children, nodes}, ...]}`` gives the same
    document as the equivalent ``topology.conf`` (:func:`slurm_to_dict`):
    ``children`` and ``nodes`` are Slurm host lists (``s[1-2]``,
    ``node[01-04]``). Slurm's YAML has no link speed; a switch may carry
    ``link_speed`` (read as ``LinkSpeed``: a bare number in ``linkspeed_unit``,
    on every switch or on none; Slurm ignores the key), else every link is
    ``default_speed``.

    ``block: {block_sizes: [...], blocks: [{block, nodes}, ...]}`` becomes a
    two-level ``kind: tree``: one edge switch per block (named after it, in
    file order; a block without nodes is left out) under one top switch,
    every link ``default_speed``. ``block_sizes`` is checked as Slurm checks
    it (each size a power-of-two multiple of the first) and otherwise unused:
    larger blocks are allocation rules, not links. ``flat``, ``ring`` and
    ``torus3d`` topologies are refused (no switches to plan on).

    Parameters
    ----------
    text : str
        The file's content.
    path : str or path, optional
        The file name, for messages (``path:line:``).
    topology : str, optional
        The name of the topology to read.
    default_speed : str, optional
        Bandwidth of links without ``link_speed``.
    linkspeed_unit : str, optional
        The unit of bare ``link_speed`` numbers, as for :func:`slurm_to_dict`.

    Returns
    -------
    dict
        A topology document for :func:`topology_from_dict`, named after the topology.

    Raises
    ------
    TopoplanError
        Naming the file, line and field: not a list of topologies, a
        topology without a name or with two, an unknown key, no or several
        types, an unknown ``topology``, a plugin without switches, and every
        error of :func:`slurm_to_dict`.

    See Also
    --------
    slurm_to_dict : the ``topology.conf`` reader.
    load_topology : ``--set slurm_topology=NAME`` chooses the topology.

    Examples
    --------
    >>> text = '''
    ... - topology: fabric
    ...   cluster_default: true
    ...   tree:
    ...     switches:
    ...       - switch: top
    ...         children: s[1-2]
    ...       - switch: s1
    ...         nodes: node[01-02]
    ...       - switch: s2
    ...         nodes: node[03-04]
    ... - topology: racks
    ...   block:
    ...     block_sizes: [2, 4]
    ...     blocks:
    ...       - block: b1
    ...         nodes: node[01-02]
    ...       - block: b2
    ...         nodes: node[03-04]
    ... '''
    >>> doc = slurm_yaml_to_dict(text)
    >>> doc["name"], doc["kind"], doc["switch_names"], doc["hostnames"]
    ('fabric', 'tree', ['s1', 's2'], ['node01', 'node02', 'node03', 'node04'])
    >>> slurm_yaml_to_dict(text, topology="racks")["switch_names"]
    ['b1', 'b2']
    >>> slurm_yaml_to_dict(text, topology="nvl")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: topology.yaml: field 'slurm_topology': no topology 'nvl' in the file (fabric, racks)
    """
    lines: dict[str, int] = {}
    doc = strict_yaml(text, path, lines=lines)
    return _slurm_yaml(doc, lines, path, topology, default_speed, linkspeed_unit=_linkspeed_unit(linkspeed_unit))[0]


def _is_slurm_yaml(doc) -> bool:
    """A Slurm topology.yaml is a list of topologies (``- topology: name``); a topoplan topology is a mapping."""
    return isinstance(doc, list) and any(isinstance(e, dict) and "topology" in e for e in doc)


def _slurm_yaml(doc, lines: dict, path, topology: str | None, default_speed="10Gbps", *,
                linkspeed_unit=None) -> tuple[dict, dict]:
    """(document, host -> ``path:line``) of the chosen topology of a parsed topology.yaml."""
    def at(field: str) -> str:
        while field and field not in lines:
            field = re.sub(r"(\.[^.\[]*|\[\d+\])$", "", field)
        return f"{path}:{lines[field]}: " if field in lines else f"{path}: "

    def fail(field: str, message: str):
        raise TopoplanError(f"{at(field)}field '{field}': {message}")

    if not isinstance(doc, list) or not doc:
        raise TopoplanError(f"{path}: a Slurm topology.yaml is a list of topologies ('- topology: name'), "
                            "this one is empty")
    names: dict[str, int] = {}
    chosen = None
    for i, entry in enumerate(doc):
        f = f"[{i}]"
        if not isinstance(entry, dict):
            fail(f, f"expected a topology ('topology: name' and one of tree, block, ...), got {_short(entry)}")
        if "topology" not in entry:
            fail(f"{f}.topology", "missing (every topology has a name)")
        name = entry["topology"]
        if not isinstance(name, str) or not name:
            fail(f"{f}.topology", f"expected a name, got {_short(name)} (quote it)")
        if name in names:
            fail(f"{f}.topology", f"topology {name!r} defined twice (first at line {names[name]})")
        names[name] = lines.get(f"{f}.topology", 0)
        unknown = sorted(str(k) for k in entry if k not in ("topology", "cluster_default") + _SLURM_YAML_KINDS)
        if unknown:
            fail(f"{f}.{unknown[0]}", f"unknown key (known: topology, cluster_default, {', '.join(_SLURM_YAML_KINDS)})")
        kinds = [k for k in _SLURM_YAML_KINDS if k in entry]
        if len(kinds) != 1:
            fail(f"{f}.topology", f"topology {name!r} " + (f"defines {' and '.join(kinds)}: give exactly one type"
                                                          if kinds else "defines no type (tree, block, flat, ring "
                                                                        "or torus3d)"))
        default = entry.get("cluster_default", False)
        if not isinstance(default, bool):
            fail(f"{f}.cluster_default", f"expected true or false, got {_short(default)}")
        if topology is not None:
            if name == topology:
                chosen = i
        elif default and chosen is None:
            chosen = i
    if topology is not None and chosen is None:
        raise TopoplanError(f"{path}: field 'slurm_topology': no topology {topology!r} in the file "
                            f"({', '.join(names)})")
    i = chosen or 0
    entry = doc[i]
    name = entry["topology"]
    kind = next(k for k in _SLURM_YAML_KINDS if k in entry)
    f = f"[{i}].{kind}"
    if kind not in ("tree", "block"):
        usable = [str(e["topology"]) for e in doc if "tree" in e or "block" in e]
        fail(f, f"topology {name!r} uses the topology/{kind} plugin: no switches or blocks to plan on (topoplan "
                "reads tree and block topologies" + (f"; choose one with --set slurm_topology=NAME: "
                                                     f"{', '.join(usable)})" if usable else ")"))
    body = entry[kind]
    if not isinstance(body, dict):
        fail(f, f"expected a mapping, got {_short(body)}")
    fields = _YAML_FIELDS

    def items(top_keys, list_key, item_key, item_keys):
        """``(field, item)`` of each entry of ``body[list_key]``, after the key and shape checks both kinds share."""
        extra = sorted(str(k) for k in body if k not in top_keys)
        if extra:
            fail(f"{f}.{extra[0]}", f"unknown key (known: {', '.join(sorted(top_keys))})")
        listed = body.get(list_key)
        shape = "{" + ", ".join(item_keys[:3]) + "}"
        if not isinstance(listed, list) or not listed:
            fail(f"{f}.{list_key}", f"expected a list of {list_key} ({shape})")
        for j, item in enumerate(listed):
            g = f"{f}.{list_key}[{j}]"
            if not isinstance(item, dict):
                fail(g, f"expected a {item_key} ({shape}), got {_short(item)}")
            extra = sorted(str(k) for k in item if k not in item_keys)
            if extra:
                fail(f"{g}.{extra[0]}", f"unknown key (known: {', '.join(item_keys)})")
            if item.get(item_key) is None:
                fail(f"{g}.{item_key}", f"missing (every {item_key} has a name)")
            yield g, item

    if kind == "tree":
        entries = [{"line": lines.get(g, 0), "where": at(g), "name": _label(s["switch"], f"{g}.switch"),
                    "nodes": _hostlist_text(s.get("nodes"), f"{g}.nodes", at),
                    "children": _hostlist_text(s.get("children"), f"{g}.children", at),
                    "speed": s.get("link_speed")}
                   for g, s in items(("switches",), "switches", "switch", ("switch", "children", "nodes", "link_speed"))]
        out, where_host = _slurm_tree(entries, path, fields, default_speed, linkspeed_unit)
    else:
        entries = [{"line": lines.get(g, 0), "where": at(g), "name": _label(b["block"], f"{g}.block"),
                    "nodes": _hostlist_text(b.get("nodes"), f"{g}.nodes", at)}
                   for g, b in items(("block_sizes", "blocks"), "blocks", "block", ("block", "nodes"))]
        sizes = body.get("block_sizes")
        if sizes is not None:
            g = f"{f}.block_sizes"
            if isinstance(sizes, str):
                sizes = sizes.split(",")
            elif isinstance(sizes, int) and not isinstance(sizes, bool):
                sizes = [sizes]
            if not isinstance(sizes, list) or not sizes:
                fail(g, f"expected a list of block sizes, got {_short(sizes)}")
            sizes = [(at(f"{g}[{k}]") if f"{g}[{k}]" in lines else at(g), v) for k, v in enumerate(sizes)]
        out, where_host = _slurm_blocks(entries, sizes, path, fields, default_speed)
    out["name"] = name
    return out, where_host


def _hostlist_text(value, field: str, at) -> str:
    """A host list of topology.yaml (text, as Slurm reads it); absent is empty."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TopoplanError(f"{at(field)}field '{field}': expected a host list such as node[01-04] (text, as Slurm "
                            f"reads it), got {_short(value)}")
    return value


# -- Slurm slurm.conf: the cores of every node ---------------------------------------------------------

_SLURM_COUNTS = {"cpus": "CPUs", "procs": "Procs", "boards": "Boards", "sockets": "Sockets",
                 "socketsperboard": "SocketsPerBoard", "corespersocket": "CoresPerSocket",
                 "threadspercore": "ThreadsPerCore"}
_MAX_INCLUDE_DEPTH = 16
_CONF_TOKEN = re.compile(r"[ \t]*(?:([^\s=]+)=(\"[^\"]*\"|\S*)|(\S+))")


def slurm_conf_nodes(path) -> dict[str, tuple[int | None, str]]:
    """The physical cores of every node a Slurm ``slurm.conf`` defines (its ``NodeName`` lines).

    Read as Slurm reads them (``read_config.c``): keys in any case, ``#``
    comments (``\\#`` is a ``#``), ``\\`` continuations, ``NodeName=DEFAULT``
    lines setting values for the lines after them (each adds to or replaces
    the defaults before it), host lists (``cn[001-024]``), and ``Include
    FILE`` lines followed in place: ``FILE`` is absolute or relative to the
    directory of ``slurm.conf``, ``%c`` is the ``ClusterName``; an absolute
    path missing on this machine is looked for beside ``slurm.conf`` (a
    copied ``/etc/slurm``). Other lines are skipped.

    Cores: MPI jobs run one rank per physical core, so a node's cores are
    sockets x ``CoresPerSocket``, hardware threads not counted. Sockets are
    ``Sockets`` (the node's total, as Slurm's code reads it) or ``Boards`` x
    ``SocketsPerBoard``; when neither is given, ``CPUs`` (or its old name
    ``Procs``) / (``CoresPerSocket`` x ``ThreadsPerCore``) when that divides
    evenly, else ``Boards``. So ``CPUs=48 ThreadsPerCore=2`` is 24 cores and
    ``Sockets=2 CoresPerSocket=12 ThreadsPerCore=2`` is 24 (Slurm's CPUs: 48).
    A node whose lines give none of these keys has no core count (``None``):
    Slurm's default is one CPU.

    Parameters
    ----------
    path : str or path
        The ``slurm.conf``.

    Returns
    -------
    dict
        Node name -> (cores or None, ``file:line`` of its NodeName line), in file order.

    Raises
    ------
    TopoplanError
        Naming the file, line and field: a count that is not a positive
        integer (or over 65,536), ``Sockets`` with ``SocketsPerBoard``, a node
        defined twice, ``NodeName=ALL``, a bad host list, an Include that is
        missing, has a wildcard, ``%c`` before any ``ClusterName``, or includes
        itself; a file that cannot be read.

    See Also
    --------
    load_topology : reads the ``slurm.conf`` beside a ``topology.conf`` or ``topology.yaml``.

    Examples
    --------
    >>> import os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "slurm.conf")
    >>> with open(path, "w") as fh:
    ...     _ = fh.write("ClusterName=demo\\n"
    ...                  "NodeName=DEFAULT Sockets=2 CoresPerSocket=12 ThreadsPerCore=2 State=UNKNOWN\\n"
    ...                  "NodeName=cn[01-02] RealMemory=192000\\n"
    ...                  "NodeName=big01 CPUs=128 ThreadsPerCore=2 Sockets=1 CoresPerSocket=64  # fat\\n"
    ...                  "PartitionName=all Nodes=ALL Default=YES\\n")
    >>> nodes = slurm_conf_nodes(path)
    >>> {h: cores for h, (cores, _) in nodes.items()}
    {'cn01': 24, 'cn02': 24, 'big01': 64}
    >>> nodes["cn02"][1].endswith("slurm.conf:3")
    True
    >>> with open(path, "w") as fh:
    ...     _ = fh.write("NodeName=cn01 CoresPerSocket=twelve\\n")
    >>> slurm_conf_nodes(path)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: .../slurm.conf:1: field 'CoresPerSocket': expected a positive integer, got 'twelve'
    """
    path = Path(path)
    nodes: dict[str, tuple[int | None, str]] = {}
    state = {"defaults": {}, "cluster": None, "base": path.parent}
    _slurm_conf_file(path, nodes, state, [path.resolve()])
    return nodes


def _slurm_conf_file(path: Path, nodes: dict, state: dict, stack: list) -> None:
    for no, line in _conf_lines(_read_conf(path)):
        where = f"{path}:{no}"
        m = re.match(r"(?i)include[ \t]+(\S+)", line)
        if m:
            _slurm_include(m.group(1), where, nodes, state, stack)
            continue
        tokens = [t for t in _CONF_TOKEN.finditer(line) if t.group(0).strip()]
        if not tokens or tokens[0].group(1) is None:
            continue
        first = tokens[0].group(1).lower()
        if first == "clustername":
            state["cluster"] = tokens[0].group(2).strip('"')
        if first != "nodename":
            continue
        counts: dict[str, int] = {}
        for t in tokens[1:]:
            if t.group(3) is not None:
                raise TopoplanError(f"{where}: expected Key=Value on a NodeName line, got {t.group(3)!r}")
            key = t.group(1).lower()
            if key not in _SLURM_COUNTS:
                continue   # RealMemory, Features, State, Gres, ...: not about cores
            name = _SLURM_COUNTS[key]
            if key in counts:
                raise TopoplanError(f"{where}: field '{name}': given twice on one line")
            value = t.group(2).strip('"')
            if not re.fullmatch(r"[0-9]+", value):
                raise TopoplanError(f"{where}: field '{name}': expected a positive integer, got {shown(value)}")
            if len(value.lstrip("0")) > 18:   # (before int(): it fails past 4,300 digits)
                raise TopoplanError(f"{where}: field '{name}': {shown(value, quote=False)} is over the limit of "
                                    f"{MAX_CORES_PER_NODE:,}")
            try:
                counts[key] = check_count(int(value), name, maximum=MAX_CORES_PER_NODE)
            except TopoplanError as exc:
                raise TopoplanError(f"{where}: {exc}") from None
        value = tokens[0].group(2).strip('"')
        if value.lower() == "default":   # adds to or replaces the defaults; never reinitialises them
            state["defaults"].update(counts)
            continue
        if value.lower() == "all":
            raise TopoplanError(f"{where}: field 'NodeName': ALL is a reserved word, not a node")
        merged = {**state["defaults"], **counts}
        cores = _slurm_cores(merged, where)
        for h in expand_hostlist(value, f"{where}: field 'NodeName': "):
            if h in nodes:
                raise TopoplanError(f"{where}: node {h!r} is defined twice (first at {nodes[h][1]})")
            nodes[h] = (cores, where)
        if len(nodes) > MAX_NODES:
            raise TopoplanError(f"{where}: more than {MAX_NODES:,} nodes")


def _slurm_cores(c: dict, where: str) -> int | None:
    """Physical cores of a NodeName line's counts (read_config.c's arithmetic), None when none is given."""
    if not c:
        return None
    if "sockets" in c and "socketsperboard" in c:
        raise TopoplanError(f"{where}: field 'SocketsPerBoard': Sockets and SocketsPerBoard are mutually exclusive")
    boards, per_socket, threads = c.get("boards", 1), c.get("corespersocket", 1), c.get("threadspercore", 1)
    cpus = c.get("cpus", c.get("procs"))
    if "socketsperboard" in c:
        sockets = boards * c["socketsperboard"]
    elif "sockets" in c:
        sockets = c["sockets"]
    elif cpus is not None and cpus >= per_socket * threads and cpus % (per_socket * threads) == 0:
        sockets = cpus // (per_socket * threads)
    else:
        sockets = boards
    cores = sockets * per_socket
    if cores > MAX_CORES_PER_NODE:
        raise TopoplanError(f"{where}: field 'CoresPerSocket': {sockets} sockets x {per_socket} cores = {cores:,} "
                            f"cores, over the limit of {MAX_CORES_PER_NODE:,}")
    return cores


def _slurm_include(target: str, where: str, nodes: dict, state: dict, stack: list) -> None:
    target = target.strip('"')
    shown = target
    if "%c" in target:
        if not state["cluster"]:
            raise TopoplanError(f"{where}: Include {shown}: %c needs a ClusterName= line before it")
        target = target.replace("%c", state["cluster"])
    if "*" in target or "?" in target:
        raise TopoplanError(f"{where}: Include {shown}: Slurm does not expand wildcards in Include (name the file)")
    p = Path(target)
    if not p.is_absolute():
        p = state["base"] / p
    if not p.is_file():
        alt = state["base"] / p.name
        if not alt.is_file():
            raise TopoplanError(f"{where}: Include {shown}: no such file ({p}, nor {alt}); copy it beside "
                                "slurm.conf")
        p = alt
    real = p.resolve()
    if real in stack:
        raise TopoplanError(f"{where}: Include {shown}: includes itself ({' -> '.join(str(s) for s in stack)})")
    if len(stack) > _MAX_INCLUDE_DEPTH:
        raise TopoplanError(f"{where}: Include {shown}: more than {_MAX_INCLUDE_DEPTH} nested Include levels")
    _slurm_conf_file(p, nodes, state, stack + [real])


def _read_conf(path: Path) -> str:
    """A Slurm configuration file's text (size-capped; stray Latin-1 bytes replaced, as Slurm ignores them)."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise TopoplanError(f"{path}: cannot read Slurm configuration file: {exc.strerror or exc}") from None
    if size > MAX_TOPOLOGY_BYTES:
        raise TopoplanError(f"{path}: {size:,} bytes, over the limit of {MAX_TOPOLOGY_BYTES:,} for a Slurm "
                            "configuration file")
    if size == 0:
        return ""
    return read_text(path, "Slurm configuration file", lenient=True)


def _conf_lines(text: str):
    """(first line number, logical line) of a slurm.conf: '#' comments ('\\#' is '#'), '\\' continuations."""
    out, buf, start = [], "", 0
    for no, raw in enumerate(text.split("\n"), 1):
        line = raw.rstrip("\r")
        cut, slashes = len(line), 0
        for k, ch in enumerate(line):
            if ch == "#" and slashes % 2 == 0:
                cut = k
                break
            slashes = slashes + 1 if ch == "\\" else 0
        line = line[:cut].rstrip(" \t")
        if not buf:
            start = no
        if line.endswith("\\") and (len(line) - len(line.rstrip("\\"))) % 2 == 1:
            buf += line[:-1] + " "
            continue
        buf += line
        logical = re.sub(r"\\(.)", r"\1", buf).strip(" \t")
        if logical:
            out.append((start, logical))
        buf = ""
    if buf.strip(" \t"):
        out.append((start, re.sub(r"\\(.)", r"\1", buf).strip(" \t")))
    return out


# -- Slurm inputs in load_topology: the options, slurm.conf beside the topology, the hint -----------------

SLURM_OPTIONS = ("slurm_conf", "slurm_topology", _UNIT_OPTION)


def _override_list(overrides) -> list:
    """``--set`` overrides as a list, refusing one string (it would be read a character at a time)."""
    if isinstance(overrides, str):
        raise TopoplanError(f"field 'set': expected a list of dotted.key=value strings, got the string {overrides!r} "
                            f"(write [{overrides!r}])")
    return list(overrides or ())


def _slurm_options(overrides) -> tuple[list, dict]:
    """(the other overrides, {slurm_conf, slurm_topology, slurm_linkspeed_unit} given by --set)."""
    rest, opts = [], {}
    for item in overrides or ():
        key = item.split("=", 1)[0].strip() if isinstance(item, str) else ""
        if key in SLURM_OPTIONS:
            value = item.split("=", 1)[1].strip() if "=" in item else ""
            if not value:
                raise TopoplanError(f"field '{key}': {item!r}: expected {key}=" +
                                    {"slurm_conf": "PATH (or none)", "slurm_topology": "NAME"}.get(key, "UNIT"))
            opts[key] = value
        else:
            rest.append(item)
    return rest, opts


def _sets_cores(overrides) -> bool:
    return any(isinstance(i, str) and i.split("=", 1)[0].strip() == "cores_per_node" for i in overrides or ())


def _apply_slurm_conf(doc: dict, source: dict, conf_opt: str | None) -> str | None:
    """Put slurm.conf's core count into ``doc``; returns the hint for "do not fit" messages when there is none."""
    spec = Path(source["path"])
    fix = "--set cores_per_node=N (ranks per node)"
    if conf_opt == "none":
        return f"{spec.name} gives no core counts (slurm_conf=none), so every node has 1 core: pass {fix}"
    if conf_opt is not None:
        conf = Path(conf_opt)
        if not conf.is_file():
            raise TopoplanError(f"field 'slurm_conf': {conf_opt}: no such file (the cluster's slurm.conf, or none)")
    else:
        conf = spec.parent / "slurm.conf"
        if not conf.is_file() or conf.resolve() == spec.resolve():
            return (f"{spec.name} gives no core counts and no slurm.conf is beside it, so every node has 1 core: "
                    f"copy the cluster's slurm.conf (its NodeName lines) beside {spec.name}, or pass --set "
                    f"slurm_conf=PATH or {fix}")
    nodes = slurm_conf_nodes(conf)
    hosts = source["hosts"]
    where = source["where"]
    lower = {h.lower(): h for h in nodes}
    for h in hosts:
        if h not in nodes:
            other = lower.get(h.lower())
            case = f" ({conf} has {other!r}: Slurm node names are case-sensitive)" if other else ""
            raise TopoplanError(f"{where[h]}: node {h!r} has no NodeName line in {conf}{case}")
    listed = set(hosts)
    for h, (_, at) in nodes.items():
        if h not in listed:
            raise TopoplanError(f"{at}: node {h!r} is not in {spec}: slurm.conf and the topology must describe "
                                "the same nodes")
    first = hosts[0]
    for h in hosts:
        if nodes[h][0] != nodes[first][0]:
            def shown(x):
                c = nodes[x][0]
                return f"{c} cores" if c is not None else "no core count (Slurm's default: 1 CPU)"
            raise TopoplanError(f"{nodes[h][1]}: node {h!r} has {shown(h)} but node {first!r} ({nodes[first][1]}) "
                                f"has {shown(first)}: topoplan gives every node of a topology one core count; "
                                "pass --set cores_per_node=N to use N on every node")
    cores = nodes[first][0]
    if cores is None:
        return (f"{conf} gives its nodes no core count (CPUs, Sockets, CoresPerSocket), so every node has 1 core "
                f"(Slurm's default): add them to its NodeName lines, or pass {fix}")
    doc["cores_per_node"] = cores
    return None


def cores_hint(topo) -> str:
    """How to give core counts to a topology read from a Slurm file without them, for "ranks do not fit" errors.

    :func:`load_topology` notes on the topology when its cores are Slurm's
    default of 1 because no ``slurm.conf`` gave counts (none beside the
    ``topology.conf``/``topology.yaml``, ``slurm_conf=none``, or NodeName
    lines without CPUs/Sockets/CoresPerSocket) and ``--set cores_per_node``
    was not given.

    Parameters
    ----------
    topo : Topology
        A topology.

    Returns
    -------
    str
        ``"; <what to do>"`` to append to the message, or ``""``.

    Examples
    --------
    >>> cores_hint(load_topology("paper003"))
    ''
    >>> import os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "topology.conf")
    >>> with open(path, "w") as fh:
    ...     _ = fh.write("SwitchName=s0 Nodes=cn[01-04]\\n")
    >>> print(cores_hint(load_topology(path)))  # doctest: +ELLIPSIS
    ; topology.conf gives no core counts and no slurm.conf is beside it, so every node has 1 core: ...
    """
    hint = getattr(topo, "_slurm_cores_hint", None)
    return f"; {hint}" if hint else ""
