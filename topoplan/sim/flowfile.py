"""Read and run SimGrid-style flow scenarios: ``topoplan simulate --flows FILE`` (schema of ``../shared/reference/simgrid``).

A scenario is a JSON object (optionally gzip-compressed) with ``flows``
(``id``, ``src``, ``dst``, ``bytes``, ``start_s``) and a network given either
explicitly (``hosts``, ``links``, ``routes``) or by the ``tree`` generator.
Every named link becomes two directed links, ``name/up`` (id ``2i``) and
``name/down`` (id ``2i + 1``), that never share bandwidth. A route listed
from ``src`` to ``dst`` also serves ``dst`` to ``src``, reversed, with each
direction flipped, unless that way is listed too. A route crosses each link
once (a link listed twice in it is refused, in either direction: its flow
would count twice on it), and each ordered host pair has one route. Host
and link names are unique.

Bad input raises :class:`topoplan.core.errors.TopoplanError` with a one-line
message naming the file and the field or flow at fault.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from topoplan.core.errors import TopoplanError
from topoplan.core.io import read_json
from topoplan.core.topology import MAX_NODES
from topoplan.sim.maxmin import simulate_flows
from topoplan.sim.routes import LinkSet, routes_to_csr

__all__ = ["SCENARIO_KEYS", "SCENARIO_MODELS", "FlowTable", "Scenario", "tree_links", "tree_routes", "load_scenario",
           "run_scenario"]

_SHARING = {"shared": True, "splitduplex": True, "fatpipe": False}
# A scenario's keys, and the network models it may name (what this simulator computes: max-min fair sharing,
# SimGrid's CM02 model with its factors neutral): another model's scenario would be run as this one.
SCENARIO_KEYS = ("flows", "tree", "hosts", "links", "routes", "model")
SCENARIO_MODELS = ("CM02-maxmin", "maxmin")
_DIRS = {"up": 0, "down": 1}


@dataclass
class FlowTable:
    """The flows of a scenario, one entry per flow in file order.

    Attributes
    ----------
    ids : list
        Flow ids as written in the file (strings or numbers).
    src, dst : int arrays
        Host indices into ``hosts``.
    bytes_ : float array
    start_s : float array
    hosts : list of str

    Examples
    --------
    >>> doc = {"tree": {"leaves": 2, "hosts_per_leaf": 2, "down_bw": 1e9, "up_bw": 1e9,
    ...                 "down_lat": 1e-6, "up_lat": 1e-6},
    ...        "flows": [{"id": "a", "src": "h0", "dst": "h2", "bytes": 1e9, "start_s": 0}]}
    >>> flows = load_scenario(doc).flows
    >>> flows.ids, flows.src.tolist(), flows.dst.tolist(), flows.hosts
    (['a'], [0], [2], ['h0', 'h1', 'h2', 'h3'])
    """

    ids: list
    src: np.ndarray
    dst: np.ndarray
    bytes_: np.ndarray
    start_s: np.ndarray
    hosts: list

    def __len__(self) -> int:
        return len(self.ids)

    def to_frame(self):
        """The table as a pandas DataFrame (columns id, src, dst, bytes, start_s)."""
        import pandas as pd

        names = np.asarray(self.hosts, dtype=object)
        return pd.DataFrame({"id": self.ids, "src": names[self.src], "dst": names[self.dst],
                             "bytes": self.bytes_, "start_s": self.start_s})


class Scenario(NamedTuple):
    """``(links, routes, flows)``: directed links, one CSR route per flow, the flow table.

    Parameters
    ----------
    links : LinkSet
    routes : tuple of numpy.ndarray
        ``(route_ptr, route_links)``.
    flows : FlowTable

    Examples
    --------
    >>> doc = {"tree": {"leaves": 1, "hosts_per_leaf": 2, "down_bw": 1e9, "up_bw": 1e9,
    ...                 "down_lat": 0, "up_lat": 0},
    ...        "flows": [{"id": 1, "src": "h0", "dst": "h1", "bytes": 1e9, "start_s": 0}]}
    >>> sc = load_scenario(doc)
    >>> len(sc.links), sc.routes[0].tolist(), len(sc.flows.ids)
    (6, [0, 2], 1)
    """

    links: LinkSet
    routes: tuple[np.ndarray, np.ndarray]
    flows: FlowTable


# --------------------------------------------------------------------------- validation helpers


class _Where:
    """Builds the one-line error messages: ``file: place: field 'x': problem``."""

    def __init__(self, name: str):
        self.name = name

    def fail(self, *parts) -> TopoplanError:
        return TopoplanError(": ".join([self.name, *[p for p in parts if p]]))

    def obj(self, value, place: str) -> dict:
        if not isinstance(value, dict):
            raise self.fail(place, f"expected an object, got {type(value).__name__}")
        return value

    def get(self, obj: dict, key: str, place: str = ""):
        if key not in obj:
            raise self.fail(place, f"missing field '{key}'")
        return obj[key]

    def number(self, obj: dict, key: str, place: str = "", *, positive=False) -> float:
        value = self.get(obj, key, place)
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        ok = ok and (value > 0 if positive else value >= 0)
        if not ok:
            raise self.fail(place, f"field '{key}': must be a finite number {'> 0' if positive else '>= 0'}, "
                                   f"got {value!r}")
        return float(value)

    def count(self, obj: dict, key: str, place: str) -> int:
        value = self.get(obj, key, place)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise self.fail(place, f"field '{key}': must be an integer >= 1, got {value!r}")
        return value

    def list_(self, obj: dict, key: str, place: str = "") -> list:
        value = self.get(obj, key, place)
        if not isinstance(value, list):
            raise self.fail(place, f"field '{key}': expected a list, got {type(value).__name__}")
        return value


# --------------------------------------------------------------------------- networks


def tree_links(leaves: int, hosts_per_leaf: int, down_bw: float, up_bw: float, down_lat: float,
               up_lat: float) -> LinkSet:
    """Directed links of the scenario ``tree`` generator.

    Named links are ``down0..down{L*H-1}`` (host to leaf) then ``up0..up{L-1}``
    (leaf to top switch); named link ``i`` has directed ids ``2i`` (up) and
    ``2i + 1`` (down).

    Parameters
    ----------
    leaves, hosts_per_leaf : int
    down_bw, up_bw : float
        Bandwidth of host and leaf links, bytes per second.
    down_lat, up_lat : float
        Their latencies, seconds.

    Returns
    -------
    LinkSet

    Examples
    --------
    >>> tree_links(2, 2, 1e9, 2e9, 1e-6, 1e-6).names[:3]
    ['down0/up', 'down0/down', 'down1/up']
    """
    n = leaves * hosts_per_leaf
    names = [f"down{k}" for k in range(n)] + [f"up{k}" for k in range(leaves)]
    bw = np.repeat(np.r_[np.full(n, float(down_bw)), np.full(leaves, float(up_bw))], 2)
    lat = np.repeat(np.r_[np.full(n, float(down_lat)), np.full(leaves, float(up_lat))], 2)
    return LinkSet(bw, lat, np.ones(len(bw), dtype=bool), [f"{m}/{d}" for m in names for d in _DIRS])


def tree_routes(src, dst, leaves: int, hosts_per_leaf: int) -> tuple[np.ndarray, np.ndarray]:
    """CSR routes between host indices on the ``tree`` generator's network.

    Within a leaf: ``down<src>`` up, ``down<dst>`` down; across leaves also
    ``up<leaf src>`` up and ``up<leaf dst>`` down; a host to itself: no link.

    Parameters
    ----------
    src, dst : array_like of int
        Host indices.
    leaves, hosts_per_leaf : int

    Returns
    -------
    route_ptr, route_links : numpy.ndarray

    Examples
    --------
    >>> tree_routes([0, 0], [1, 2], 2, 2)
    (array([0, 2, 6]), array([ 0,  3,  0,  8, 11,  5]))
    """
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    n = leaves * hosts_per_leaf
    ls, ld = src // hosts_per_leaf, dst // hosts_per_leaf
    hops = np.stack([2 * src, 2 * (n + ls), 2 * (n + ld) + 1, 2 * dst + 1], axis=1)
    cross = ls != ld
    keep = np.stack([src != dst, cross, cross, src != dst], axis=1)
    ptr = np.zeros(len(src) + 1, dtype=np.int64)
    np.cumsum(keep.sum(axis=1), out=ptr[1:])
    return ptr, hops[keep]


def _explicit_network(doc: dict, w: _Where):
    hosts = w.list_(doc, "hosts")
    first: dict[str, int] = {}
    for i, h in enumerate(hosts):
        if not isinstance(h, str):
            raise w.fail(f"hosts[{i}]", f"expected a host name, got {h!r}")
        if h in first:   # its routes and flows would all go to one of the two
            raise w.fail(f"hosts[{i}]", f"host {h!r} is listed twice (hosts[{first[h]}] is the first)")
        first[h] = i
    links = w.list_(doc, "links")
    index, bw, lat, shared, names = {}, [], [], [], []
    for i, raw in enumerate(links):
        place = f"links[{i}]"
        link = w.obj(raw, place)
        name = w.get(link, "name", place)
        if not isinstance(name, str) or name in index:
            raise w.fail(place, f"field 'name': {'duplicate' if name in index else 'not a string'}: {name!r}")
        place = f"link {name!r}"
        sharing = link.get("sharing", "shared")
        if not isinstance(sharing, str) or sharing.lower() not in _SHARING:
            raise w.fail(place, f"field 'sharing': must be 'shared' or 'fatpipe', got {sharing!r}")
        index[name] = i
        bw.append(w.number(link, "bandwidth_Bps", place, positive=True))
        lat.append(w.number(link, "latency_s", place))
        shared.append(_SHARING[sharing.lower()])
        names.append(name)
    linkset = LinkSet(np.repeat(bw, 2), np.repeat(lat, 2), np.repeat(shared, 2),
                      [f"{m}/{d}" for m in names for d in _DIRS])
    host_index = {h: i for i, h in enumerate(hosts)}
    given: dict[tuple[int, int], np.ndarray] = {}
    given_at: dict[tuple[int, int], int] = {}
    for i, raw in enumerate(w.list_(doc, "routes")):
        place = f"routes[{i}]"
        route = w.obj(raw, place)
        ends = []
        for key in ("src", "dst"):
            h = w.get(route, key, place)
            if h not in host_index:
                raise w.fail(place, f"field '{key}': unknown host {h!r}")
            ends.append(host_index[h])
        if tuple(ends) in given:
            raise w.fail(place, f"a second route from {hosts[ends[0]]!r} to {hosts[ends[1]]!r} "
                                f"(routes[{given_at[tuple(ends)]}] is the first)")
        hops, used = [], {}
        for j, hop in enumerate(w.list_(route, "links", place)):
            hop_place = f"{place}.links[{j}]"
            hop = w.obj(hop, hop_place)
            name = w.get(hop, "name", hop_place)
            if not isinstance(name, str) or name not in index:
                raise w.fail(hop_place, f"unknown link {name!r}")
            if name in used:   # a route crosses a link once: twice would count its flow twice on it
                raise w.fail(hop_place, f"link {name!r} is listed twice in the route (links[{used[name]}] and "
                                        f"links[{j}])")
            used[name] = j
            d = hop.get("dir", "up")
            if d not in _DIRS:
                raise w.fail(hop_place, f"field 'dir': must be 'up' or 'down', got {d!r}")
            hops.append(2 * index[name] + _DIRS[d])
        if not hops and ends[0] != ends[1]:   # its flows would end at once, as over a link of infinite bandwidth
            raise w.fail(f"{place}.links", f"empty: the route from {hosts[ends[0]]!r} to {hosts[ends[1]]!r} "
                                           "crosses no link")
        given[tuple(ends)] = np.array(hops, dtype=np.int64)
        given_at[tuple(ends)] = i
    routes = dict(given)
    for (a, b), hops in given.items():
        routes.setdefault((b, a), (hops[::-1] ^ 1).copy())  # the other way: reversed, directions flipped
    return linkset, hosts, host_index, routes


def _flow_columns(doc: dict, w: _Where, host_index: dict):
    flows = w.list_(doc, "flows")
    columns = _well_formed_columns(flows, host_index)
    if columns is not None:
        return columns
    # something is wrong (or unusual: a number type other than int and float): find the first fault, in file
    # order, with the message that names it
    ids, src, dst, size, start = [], [], [], [], []
    seen = set()
    for i, raw in enumerate(flows):
        place = f"flows[{i}]"
        flow = w.obj(raw, place)
        fid = w.get(flow, "id", place)
        if not isinstance(fid, (str, int)) or isinstance(fid, bool):
            raise w.fail(place, f"field 'id': must be a string or an integer, got {fid!r}")
        if fid in seen:
            raise w.fail(place, f"duplicate flow id {fid!r}")
        seen.add(fid)
        place = f"flow {fid!r}"
        for key, out in (("src", src), ("dst", dst)):
            h = w.get(flow, key, place)
            try:
                out.append(host_index[h])
            except (KeyError, TypeError):   # (a list or an object is no host either)
                raise w.fail(place, f"field '{key}': unknown host {h!r}") from None
        size.append(w.number(flow, "bytes", place))
        start.append(w.number(flow, "start_s", place))
        ids.append(fid)
    return ids, np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64), np.array(size), np.array(start)


def _well_formed_columns(flows: list, host_index: dict):
    """The flow columns when every flow is well formed, checked column by column (a few times faster than flow
    by flow: a scenario's reading was most of a small run); None when any is not, or when a field holds
    anything but a JSON string or number (the flow-by-flow check then finds the fault and names it).

    The accepted flows and the columns are exactly those of the flow-by-flow check: ids unique strings or
    integers, known hosts, finite non-negative ``int`` or ``float`` sizes and starts, converted by ``float``."""
    try:
        ids = [f["id"] for f in flows]
        src = [host_index[f["src"]] for f in flows]
        dst = [host_index[f["dst"]] for f in flows]
        size = [f["bytes"] for f in flows]
        start = [f["start_s"] for f in flows]
    except (TypeError, KeyError):   # not an object, a field missing, an unknown or unhashable host
        return None
    if not {type(i) for i in ids} <= {str, int} or len(set(ids)) != len(ids):
        return None
    if not {type(x) for x in size} | {type(x) for x in start} <= {int, float}:
        return None
    try:
        size_a = np.fromiter(map(float, size), float, len(size))
        start_a = np.fromiter(map(float, start), float, len(start))
    except OverflowError:   # an integer beyond any float
        return None
    if not (np.isfinite(size_a).all() and np.isfinite(start_a).all() and (size_a >= 0).all() and (start_a >= 0).all()):
        return None
    return ids, np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64), size_a, start_a


def load_scenario(source) -> Scenario:
    """Read a scenario file (``.json`` or gzip) or an already parsed dict.

    Parameters
    ----------
    source : str, Path or dict

    Returns
    -------
    Scenario
        ``(links, (route_ptr, route_links), flows)``; unpacks as a tuple.

    Raises
    ------
    TopoplanError
        Missing or malformed field, unknown host or link, a flow without a
        route, bad numbers, unreadable or malformed file.

    Examples
    --------
    >>> doc = {"tree": {"leaves": 2, "hosts_per_leaf": 2, "down_bw": 1e9, "up_bw": 1e9,
    ...                 "down_lat": 1e-6, "up_lat": 1e-6},
    ...        "flows": [{"id": "a", "src": "h0", "dst": "h2", "bytes": 1e9, "start_s": 0}]}
    >>> links, (ptr, rl), flows = load_scenario(doc)
    >>> [links.names[i] for i in rl]
    ['down0/up', 'up0/up', 'up1/down', 'down2/down']
    """
    if isinstance(source, dict):
        doc, w = source, _Where("scenario")
    else:
        path = Path(source)
        doc, w = read_json(path, "flow scenario"), _Where(str(path))   # bounded, strict JSON
    w.obj(doc, "")
    unknown = sorted(set(doc) - set(SCENARIO_KEYS), key=str)
    if unknown:   # (a SimGrid option such as a latency factor would otherwise be dropped without a word)
        raise w.fail("", f"field {unknown[0]!r}: unknown key (known: {', '.join(SCENARIO_KEYS)})")
    if "model" in doc and doc["model"] not in SCENARIO_MODELS:
        raise w.fail("", f"field 'model': this simulator computes {' or '.join(SCENARIO_MODELS)} (max-min fair "
                         f"sharing), not {doc['model']!r}")
    if "tree" in doc:
        tree = w.obj(doc["tree"], "tree")
        leaves, per_leaf = w.count(tree, "leaves", "tree"), w.count(tree, "hosts_per_leaf", "tree")

        if leaves * per_leaf > MAX_NODES:
            raise w.fail("tree", f"{leaves * per_leaf:,} hosts, over the limit of {MAX_NODES:,}")
        links = tree_links(leaves, per_leaf, w.number(tree, "down_bw", "tree", positive=True),
                           w.number(tree, "up_bw", "tree", positive=True), w.number(tree, "down_lat", "tree"),
                           w.number(tree, "up_lat", "tree"))
        hosts = [f"h{k}" for k in range(leaves * per_leaf)]
        host_index = {h: i for i, h in enumerate(hosts)}
        ids, src, dst, size, start = _flow_columns(doc, w, host_index)
        routes = tree_routes(src, dst, leaves, per_leaf)
    else:
        links, hosts, host_index, pairs = _explicit_network(doc, w)
        ids, src, dst, size, start = _flow_columns(doc, w, host_index)
        parts = []
        for i, (a, b) in enumerate(zip(src.tolist(), dst.tolist())):
            hops = pairs.get((a, b))
            if hops is None:
                if a != b:
                    raise w.fail(f"flow {ids[i]!r}", f"no route from {hosts[a]!r} to {hosts[b]!r}")
                hops = np.zeros(0, dtype=np.int64)  # a host to itself crosses no link
            parts.append(hops)
        routes = routes_to_csr(parts)
    return Scenario(links, routes, FlowTable(ids, src, dst, size, start, hosts))


def run_scenario(source, *, solver: str = "auto", progress=None) -> dict:
    """Simulate a scenario; the document ``topoplan simulate --flows FILE --json`` prints.

    Parameters
    ----------
    source : str, Path or dict
        As for :func:`load_scenario`.
    solver : {"auto", "numpy", "numba"}
    progress : callable, optional
        ``progress(done_flows, total_flows)``.

    Returns
    -------
    dict
        ``{"flows": [{"id", "finish_s"}], "makespan_s", "n_flows", "n_events", "wall_s"}``;
        ``wall_s`` is the simulation time, without reading the file.

    Examples
    --------
    >>> doc = {"hosts": ["A", "B"], "routes": [{"src": "A", "dst": "B", "links": [{"name": "L", "dir": "up"}]}],
    ...        "links": [{"name": "L", "bandwidth_Bps": 1e9, "latency_s": 1e-6, "sharing": "shared"}],
    ...        "flows": [{"id": "f", "src": "B", "dst": "A", "bytes": 1e9, "start_s": 0}]}
    >>> run_scenario(doc)["flows"]
    [{'id': 'f', 'finish_s': 1.000001}]
    """
    links, routes, flows = load_scenario(source)
    t0 = time.perf_counter()
    res = simulate_flows(links, *routes, flows.start_s, flows.bytes_, solver=solver, progress=progress)
    wall = time.perf_counter() - t0
    return {"flows": [{"id": i, "finish_s": f} for i, f in zip(flows.ids, res.finish_s.tolist())],
            "makespan_s": res.makespan_s, "n_flows": len(flows), "n_events": res.n_events, "wall_s": wall}
