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
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import numpy as np
import yaml

from planner.core.errors import TopoplanError
from planner.core.topology import (GraphTopology, OCSConfig, Topology, TorusTopology, TreeTopology,
                              balanced_ocs_nodes)
from planner.core.units import parse_bandwidth, parse_size, parse_time

__all__ = ["PRESET_DIR", "MAX_NODES", "KNOWN_KEYS", "preset_names", "load_topology", "apply_overrides",
           "topology_from_dict", "topology_to_dict", "dump_topology", "expand_hostlist", "slurm_to_dict"]

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
    doc, origin = _document(spec)
    doc = apply_overrides(doc, overrides)
    try:
        topo = topology_from_dict(doc, name=name or doc.get("name") or origin)
    except TopoplanError as exc:
        raise TopoplanError(f"{origin}: {exc}") from None
    return topo


def _document(spec):
    if isinstance(spec, dict):
        return copy.deepcopy(spec), spec.get("name", "topology")
    text = str(spec)
    path = Path(text)
    if path.is_file():
        raw = path.read_text(encoding="utf-8", errors="replace")
        if path.suffix == ".conf" or re.search(r"(?im)^\s*switchname\s*=", raw):
            return slurm_to_dict(raw, path), str(path)
        return _yaml(raw, path), str(path)
    if (PRESET_DIR / f"{text}.yaml").is_file():
        p = PRESET_DIR / f"{text}.yaml"
        return _yaml(p.read_text(encoding="utf-8"), p), text
    if "/" in text or text.endswith((".yaml", ".yml", ".conf")):
        raise TopoplanError(f"{text}: no such topology file")
    raise TopoplanError(f"unknown topology preset {text!r} (presets: {', '.join(preset_names())}; or give a file)")


def _yaml(raw: str, path) -> dict:
    try:
        doc = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise TopoplanError(f"{path}{line}: malformed YAML: {problem}") from None
    if not isinstance(doc, dict):
        raise TopoplanError(f"{path}: a topology file must be a YAML mapping")
    return doc


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
            val = yaml.safe_load(value) if value.strip() else None
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
    except (TypeError, ValueError):
        raise TopoplanError(f"field '{prefix}{key}': bad value {d[key]!r}") from None


def _int(v, field):
    if isinstance(v, bool) or not isinstance(v, (int, float)) or int(v) != v:
        raise TopoplanError(f"field '{field}': expected an integer, got {v!r}")
    return int(v)


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
    unknown = sorted(set(doc) - KNOWN_TOP)
    if unknown:
        raise TopoplanError(f"field '{unknown[0]}': unknown key (known: {', '.join(sorted(KNOWN_TOP))})")
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


# Per-node arrays (and the simulator's per-link ones) are dense: a typo such as switches=1000000000 must be
# an error, not a hang. A million nodes is six times Fugaku.
MAX_NODES = 1 << 20


def _check_nodes(n: int, field: str) -> None:
    if n > MAX_NODES:
        raise TopoplanError(f"field '{field}': gives {n:,} nodes, over the limit of {MAX_NODES:,}")


def _tree(doc, kind, name):
    nps = doc.get("nodes_per_switch")
    if nps is None:
        raise TopoplanError("field 'nodes_per_switch': missing")
    if isinstance(nps, list):
        counts = tuple(_int(v, "nodes_per_switch") for v in nps)
        _check_nodes(sum(counts), "nodes_per_switch")
        if "switches" in doc and _int(doc["switches"], "switches") != len(counts):
            raise TopoplanError(f"field 'switches': {doc['switches']} but nodes_per_switch lists {len(counts)}")
    else:
        sw = _get(doc, "switches", _int)
        if sw < 1:
            raise TopoplanError("field 'switches': must be at least 1")
        per_switch = _int(nps, "nodes_per_switch")
        _check_nodes(sw * max(per_switch, 1), "switches")
        counts = (per_switch,) * sw
    eps = _section(doc, "eps")
    p = "eps."
    ocs = None
    if kind == "hybrid" or doc.get("ocs"):
        o = _section(doc, "ocs")
        if "nodes" in o and o["nodes"] is not None:
            if not isinstance(o["nodes"], list):
                raise TopoplanError("field 'ocs.nodes': expected a list of node ids")
            nodes = tuple(_int(v, "ocs.nodes") for v in o["nodes"])
        else:
            per = _get(o, "nodes_per_switch", _int, prefix="ocs.")
            if per < 0:
                raise TopoplanError("field 'ocs.nodes_per_switch': must be non-negative")
            nodes = balanced_ocs_nodes(counts, per)
        link = o.get("node_link_bw")
        ocs = OCSConfig(nodes=nodes,
                        bw_Bps=_get(o, "bw", parse_bandwidth, prefix="ocs."),
                        latency_s=_get(o, "latency", parse_time, "0ns", prefix="ocs."),
                        setup_s=_get(o, "setup", parse_time, "10ms", prefix="ocs."),
                        ports_per_node=_get(o, "ports_per_node", _int, 1, prefix="ocs."),
                        node_link_bw_Bps=None if link is None else parse_bandwidth(link, "ocs.node_link_bw"),
                        mtu_B=_get(o, "mtu", parse_size, "4096B", prefix="ocs."))
        if kind != "hybrid":
            kind = "hybrid" if kind == "tree" else kind
    names = doc.get("hostnames")
    return TreeTopology(
        kind=kind, nodes_per_switch=counts,
        cores_per_node=_get(doc, "cores_per_node", _int, 1),
        down_bw_Bps=_get(eps, "down_bw", parse_bandwidth, prefix=p),
        down_latency_s=_get(eps, "down_latency", parse_time, "0ns", prefix=p),
        up_bw_Bps=_get(eps, "up_bw", parse_bandwidth, prefix=p),
        up_latency_s=_get(eps, "up_latency", parse_time, str(eps.get("down_latency", "0ns")), prefix=p),
        switch_delay_s=_get(eps, "switch_delay", parse_time, "0ns", prefix=p),
        mtu_B=_get(eps, "mtu", parse_size, "4096B", prefix=p),
        ocs=ocs,
        hostnames=tuple(str(h) for h in names) if names else None,
        switch_names=tuple(str(s) for s in doc["switch_names"]) if doc.get("switch_names") else None,
        name=name, **_node_section(doc))


def _per_dim(value, n, parse, field):
    if isinstance(value, list):
        return tuple(parse(v, field) for v in value)
    return (parse(value, field),) * n


def _torus(doc, kind, name):
    dims = doc.get("dims")
    if not isinstance(dims, list) or not dims:
        raise TopoplanError("field 'dims': expected a list of dimension sizes")
    dims = tuple(_int(v, "dims") for v in dims)
    _check_nodes(int(np.prod([max(d, 1) for d in dims], dtype=object)), "dims")
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
    names = doc.get("hostnames")
    return TorusTopology(dims=dims, wrap=wrap, bw_Bps=_per_dim(bw, n, parse_bandwidth, "bw"),
                         latency_s=_get(doc, "latency", parse_time, "0ns"),
                         router_delay_s=_get(doc, "router_delay", parse_time, "0ns"),
                         cores_per_node=_get(doc, "cores_per_node", _int, 1),
                         injection_bw_Bps=None if inj is None else parse_bandwidth(inj, "injection_bw"),
                         mtu_B=_get(doc, "mtu", parse_size, "4096B"),
                         hostnames=tuple(str(h) for h in names) if names else None,
                         name=name, kind=kind, **_node_section(doc))


def _graph(doc, name):
    switches = doc.get("switches")
    if not isinstance(switches, list) or not switches:
        raise TopoplanError("field 'switches': expected a list of switch names")
    switches = tuple(str(s) for s in switches)
    index = {s: i for i, s in enumerate(switches)}
    hosts, host_sw, host_bw = [], [], []
    for i, h in enumerate(doc.get("hosts") or []):
        if not isinstance(h, dict) or "name" not in h or "switch" not in h:
            raise TopoplanError(f"field 'hosts[{i}]': expected {{name, switch, bw}}")
        if str(h["switch"]) not in index:
            raise TopoplanError(f"field 'hosts[{i}].switch': unknown switch {h['switch']!r}")
        hosts.append(str(h["name"]))
        host_sw.append(index[str(h["switch"])])
        host_bw.append(parse_bandwidth(h.get("bw", "10Gbps"), f"hosts[{i}].bw"))
    if not hosts:
        raise TopoplanError("field 'hosts': a graph topology needs hosts")
    links = []
    for i, l in enumerate(doc.get("links") or []):
        if not isinstance(l, dict) or "a" not in l or "b" not in l:
            raise TopoplanError(f"field 'links[{i}]': expected {{a, b, bw}}")
        for end in ("a", "b"):
            if str(l[end]) not in index:
                raise TopoplanError(f"field 'links[{i}].{end}': unknown switch {l[end]!r}")
        links.append((index[str(l["a"])], index[str(l["b"])], parse_bandwidth(l.get("bw", "10Gbps"), f"links[{i}].bw")))
    eps = _section(doc, "eps")
    guids = doc.get("switch_guids")
    return GraphTopology(switches=switches, hosts=tuple(hosts), host_switch=tuple(host_sw),
                         host_bw_Bps=tuple(host_bw), links=tuple(links),
                         latency_s=_get(eps, "latency", parse_time, "100ns", prefix="eps."),
                         switch_delay_s=_get(eps, "switch_delay", parse_time, "100ns", prefix="eps."),
                         cores_per_node=_get(doc, "cores_per_node", _int, 1),
                         mtu_B=_get(eps, "mtu", parse_size, "4096B", prefix="eps."),
                         switch_guids=tuple(str(g) for g in guids) if guids else None,
                         name=name, **_node_section(doc))


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
                     "switch_delay": _t(topo.switch_delay_s), "mtu": f"{topo.mtu_B:g}B"},
             "node": node}
        if topo.ocs is not None:
            o = topo.ocs
            d["ocs"] = {"nodes": list(o.nodes), "ports_per_node": o.ports_per_node, "bw": _bw(o.bw_Bps),
                        "latency": _t(o.latency_s), "setup": _t(o.setup_s), "mtu": f"{o.mtu_B:g}B"}
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
             "mtu": f"{topo.mtu_B:g}B", "node": node}
        if topo.injection_bw_Bps:
            d["injection_bw"] = _bw(topo.injection_bw_Bps)
        return d
    d = {"kind": "graph", "name": topo.name, "cores_per_node": topo.cores_per_node,
         "eps": {"latency": _t(topo.latency_s), "switch_delay": _t(topo.switch_delay_s), "mtu": f"{topo.mtu_B:g}B"},
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
    return yaml.safe_dump(topology_to_dict(topo), sort_keys=False)


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
                    m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+))?\s*", rng)
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


def slurm_to_dict(text: str, path="topology.conf", *, default_speed="10Gbps") -> dict:
    """Parse a Slurm ``topology.conf`` (tree plugin) into a topology document.

    Lines ``SwitchName=S [Nodes=hostlist] [Switches=hostlist] [LinkSpeed=N]``;
    ``#`` comments and ``\\`` continuations. A LinkSpeed with a unit is a
    bandwidth; a bare number is taken as Gb/s (Slurm leaves its unit open).
    A two-level tree becomes ``kind: tree`` (leaf LinkSpeed = node links,
    top LinkSpeed = uplinks); deeper or irregular trees become ``kind: graph``.

    Parameters
    ----------
    text : str
        The file's content.
    path : str or path, optional
        The file name, used in error messages (``path:line:``) and as the topology name.
    default_speed : str, optional
        Link bandwidth where no LinkSpeed applies.

    Returns
    -------
    dict
        A topology document for :func:`topology_from_dict`.

    Raises
    ------
    TopoplanError
        For a line without ``SwitchName=``, an unknown key, a switch defined
        twice or listing an unknown switch, or a node under two switches.

    Examples
    --------
    >>> conf = ("SwitchName=s0 Nodes=n[1-2]\\n"
    ...         "SwitchName=s1 Nodes=n[3-4]\\n"
    ...         "SwitchName=top Switches=s[0-1] LinkSpeed=40\\n")
    >>> doc = slurm_to_dict(conf)
    >>> doc["kind"], doc["nodes_per_switch"], doc["hostnames"]
    ('tree', [2, 2], ['n1', 'n2', 'n3', 'n4'])
    >>> doc["eps"]
    {'down_bw': '10Gbps', 'up_bw': '40Gbps'}
    >>> topology_from_dict(doc).n_nodes
    4
    """
    lines, buf, start = [], "", 0
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].rstrip()
        if not buf:
            start = no
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        if buf.strip():
            lines.append((start, buf.strip()))
        buf = ""
    switches: dict[str, dict] = {}
    for no, line in lines:
        where = f"{path}:{no}: "
        fields = {}
        for tok in line.split():
            if "=" not in tok:
                raise TopoplanError(f"{where}expected Key=Value, got {tok!r}")
            k, v = tok.split("=", 1)
            fields[k.lower()] = v
        if "switchname" not in fields:
            raise TopoplanError(f"{where}line has no SwitchName= (tree plugin lines only)")
        unknown = set(fields) - {"switchname", "nodes", "switches", "linkspeed"}
        if unknown:
            raise TopoplanError(f"{where}unknown key {sorted(unknown)[0]!r} (SwitchName, Nodes, Switches, LinkSpeed)")
        name = fields["switchname"]
        if name in switches:
            raise TopoplanError(f"{where}switch {name!r} defined twice")
        speed = fields.get("linkspeed")
        if speed is not None:
            speed = speed + "Gbps" if re.fullmatch(r"[0-9.]+", speed) else speed
            parse_bandwidth(speed, f"{path}:{no}: LinkSpeed")
        switches[name] = {"line": no, "nodes": expand_hostlist(fields.get("nodes", ""), where),
                          "children": expand_hostlist(fields.get("switches", ""), where), "speed": speed}
    if not switches:
        raise TopoplanError(f"{path}: no SwitchName lines")
    for name, s in switches.items():
        for c in s["children"]:
            if c not in switches:
                raise TopoplanError(f"{path}:{s['line']}: switch {name!r} lists unknown switch {c!r}")
    seen = {}
    for name, s in switches.items():
        for h in s["nodes"]:
            if h in seen:
                raise TopoplanError(f"{path}:{s['line']}: node {h!r} is also under switch {seen[h]!r}")
            seen[h] = name
    leaves = [n for n, s in switches.items() if s["nodes"]]
    tops = [n for n, s in switches.items() if s["children"]]
    two_level = (len(tops) == 1 and not switches[tops[0]]["nodes"]
                 and sorted(switches[tops[0]]["children"]) == sorted(leaves)
                 and all(not switches[l]["children"] for l in leaves))
    one_switch = len(switches) == 1 and leaves
    if two_level or one_switch:
        leaf_speed = next((switches[l]["speed"] for l in leaves if switches[l]["speed"]), default_speed)
        top_speed = switches[tops[0]]["speed"] if two_level and switches[tops[0]]["speed"] else leaf_speed
        return {"kind": "tree", "name": Path(str(path)).stem, "switches": len(leaves),
                "nodes_per_switch": [len(switches[l]["nodes"]) for l in leaves],
                "hostnames": [h for l in leaves for h in switches[l]["nodes"]], "switch_names": leaves,
                "eps": {"down_bw": leaf_speed, "up_bw": top_speed}}
    names = list(switches)
    return {"kind": "graph", "name": Path(str(path)).stem, "switches": names,
            "hosts": [{"name": h, "switch": n, "bw": switches[n]["speed"] or default_speed}
                      for n in names for h in switches[n]["nodes"]],
            "links": [{"a": n, "b": c, "bw": switches[c]["speed"] or switches[n]["speed"] or default_speed}
                      for n in names for c in switches[n]["children"]]}
