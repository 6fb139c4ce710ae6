"""The raw flow scenario format (``topoplan simulate --flows``), as in shared/reference/simgrid/README.md.

Links (``name``, ``bandwidth_Bps``, ``latency_s``, ``sharing``: shared |
fatpipe) with routes (``src``, ``dst``, ``links``: ``[{name, dir: up|down}]``;
a route given one way also serves the reverse, reversed), or a ``tree``
generator (``leaves``, ``hosts_per_leaf``, ``down_bw``, ``up_bw``,
``down_lat``, ``up_lat``); and ``flows`` (``id``, ``src``, ``dst``,
``bytes``, ``start_s``).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from planner.errors import TopoplanError
from sim.maxmin import LinkSet, simulate_flows


def _num(obj, key, where, *, positive=False):
    if key not in obj:
        raise TopoplanError(f"{where}: field '{key}': missing")
    try:
        v = float(obj[key])
    except (TypeError, ValueError):
        raise TopoplanError(f"{where}: field '{key}': not a number: {obj[key]!r}") from None
    if not np.isfinite(v) or v < 0 or (positive and v == 0):
        raise TopoplanError(f"{where}: field '{key}': must be {'positive' if positive else 'non-negative'}, got {v}")
    return v


def load_scenario(src):
    """Read a scenario (path or dict); returns ``(LinkSet, route_ptr, route_links, ids, start_s, bytes_)``."""
    from planner.io import read_json

    name = str(src) if not isinstance(src, dict) else "scenario"
    doc = src if isinstance(src, dict) else read_json(Path(src), "flow scenario")
    if not isinstance(doc, dict) or "flows" not in doc:
        raise TopoplanError(f"{name}: field 'flows': missing")
    bw, lat, shared, lnames = [], [], [], []
    index: dict[tuple[str, str], int] = {}

    def add_link(lname, b, l, sh):
        for d in ("up", "down"):
            index[(lname, d)] = len(bw)
            bw.append(b); lat.append(l); shared.append(sh); lnames.append(f"{lname}/{d}")

    routes: dict[tuple[str, str], list[int]] = {}
    if "tree" in doc:
        t = doc["tree"]
        where = f"{name}: tree"
        leaves = int(_num(t, "leaves", where, positive=True)); per = int(_num(t, "hosts_per_leaf", where, positive=True))
        dbw, ubw = _num(t, "down_bw", where, positive=True), _num(t, "up_bw", where, positive=True)
        dlat, ulat = _num(t, "down_lat", where), _num(t, "up_lat", where)
        hosts = [f"h{k}" for k in range(leaves * per)]
        for k in range(len(hosts)):
            add_link(f"down{k}", dbw, dlat, True)
        for l in range(leaves):
            add_link(f"up{l}", ubw, ulat, True)

        def tree_route(a, b):
            ka, kb = int(a[1:]), int(b[1:])
            if ka // per == kb // per:
                return [index[(f"down{ka}", "up")], index[(f"down{kb}", "down")]]
            return [index[(f"down{ka}", "up")], index[(f"up{ka // per}", "up")],
                    index[(f"up{kb // per}", "down")], index[(f"down{kb}", "down")]]
        host_set = set(hosts)
    else:
        for i, l in enumerate(doc.get("links") or []):
            where = f"{name}: links[{i}]"
            if "name" not in l:
                raise TopoplanError(f"{where}: field 'name': missing")
            sharing = l.get("sharing", "shared")
            if sharing not in ("shared", "fatpipe"):
                raise TopoplanError(f"{where}: field 'sharing': {sharing!r} (shared or fatpipe)")
            add_link(str(l["name"]), _num(l, "bandwidth_Bps", where, positive=True), _num(l, "latency_s", where),
                     sharing == "shared")
        host_set = set(map(str, doc.get("hosts") or []))
        for i, r in enumerate(doc.get("routes") or []):
            where = f"{name}: routes[{i}]"
            ids = []
            for hop in r.get("links", []):
                key = (str(hop.get("name")), hop.get("dir", "up"))
                if key not in index:
                    raise TopoplanError(f"{where}: unknown link {key[0]!r} or dir {key[1]!r}")
                ids.append(index[key])
            a, b = str(r.get("src")), str(r.get("dst"))
            routes[(a, b)] = ids
            rev = [index[(lnames[x].rsplit("/", 1)[0], "down" if lnames[x].endswith("/up") else "up")] for x in ids]
            routes.setdefault((b, a), rev[::-1])
        tree_route = None
    links = LinkSet(np.array(bw), np.array(lat), np.array(shared, dtype=bool), lnames)
    flows = doc["flows"]
    ids, starts, sizes, rts = [], [], [], []
    for i, f in enumerate(flows):
        where = f"{name}: flows[{i}]"
        a, b = str(f.get("src")), str(f.get("dst"))
        for h in (a, b):
            if host_set and h not in host_set:
                raise TopoplanError(f"{where}: unknown host {h!r}")
        if tree_route is not None:
            rts.append(tree_route(a, b))
        else:
            if (a, b) not in routes:
                raise TopoplanError(f"{where}: no route from {a!r} to {b!r}")
            rts.append(routes[(a, b)])
        ids.append(f.get("id", i)); sizes.append(_num(f, "bytes", where)); starts.append(_num(f, "start_s", where))
    lengths = np.array([len(r) for r in rts], dtype=np.int64)
    ptr = np.concatenate([[0], np.cumsum(lengths)])
    rl = np.array([x for r in rts for x in r], dtype=np.int64)
    return links, ptr, rl, ids, np.array(starts), np.array(sizes)


def run_scenario(src) -> dict:
    """Simulate a scenario file; returns ``{"flows": [{"id", "finish_s"}], "makespan_s", "wall_s"}``."""
    links, ptr, rl, ids, start, size = load_scenario(src)
    t0 = time.perf_counter()
    res = simulate_flows(links, ptr, rl, start, size)
    wall = time.perf_counter() - t0
    return {"flows": [{"id": i, "finish_s": float(f)} for i, f in zip(ids, res.finish_s)],
            "makespan_s": res.makespan_s, "n_events": res.n_events, "wall_s": wall}
