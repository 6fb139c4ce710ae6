"""Run a flow scenario in SimGrid 3.32, configured as ``../shared/reference/simgrid`` was: the peer of ``bench_sim.py``.

Run with the system interpreter that Debian's ``python3-simgrid`` installs for
(``make benchdeps``), not the project's venv::

    /usr/bin/python3 benchmarks/simgrid_peer.py SCENARIO.json[.gz] [--out RESULT.json]

The scenario schema is the reference's (``../shared/reference/simgrid/README.md``):
``flows`` (``id``, ``src``, ``dst``, ``bytes``, ``start_s``) and either
``hosts``/``links``/``routes`` or the ``tree`` generator. A ``hand_cases.json``-style
list of ``{"name", "scenario", ...}`` is accepted too and gives one result per case.

How the reference was computed, and so how this runs:

* CM02 network model, latency and bandwidth factors 1, weight-S 0, cross-traffic
  off, TCP-gamma 0 (no TCP window bound): pure max-min fair sharing.
* Every ``shared`` (or ``splitduplex``) link is a split-duplex link, its two
  directions independent resources; a ``fatpipe`` link caps each flow at its
  bandwidth without sharing.
* CM02 weights a flow's share by its route latency, so every link is given
  latency 0 in SimGrid and each flow is started at ``start_s`` plus the sum of
  its route's latencies (the scenario's values): a flow waits its latency
  without using bandwidth, then shares max-min fairly.
* A route listed from ``src`` to ``dst`` also serves ``dst`` to ``src``,
  reversed with each direction flipped (SimGrid's symmetrical routes), unless
  that way is listed too. The ``tree`` generator's routes are those of
  ``topoplan.sim.flowfile.tree_routes`` (only the host pairs that carry flows are added).

Flows are started by one actor, in start-time order (``sleep_until`` the start,
then ``Comm.sendto_async``), and all waited for at the end; a flow's finish time
is its comm's ``finish_time``. SimGrid ends a sleep with less than its timing
precision (``surf/precision``, 1e-9 s) left at the event before it, so a flow
can start up to 1e-9 s early: each comm's ``start_time`` is checked (at most
1e-8 s off) and the largest shift is reported (``max_start_shift_s``).
A zero-byte comm is waited for as soon as it is started: SimGrid completes it at
once but stamps its ``finish_time`` only when it is waited for (waited for at the
end, it would report the time the driver reached it). SimGrid simulates whole
bytes, so ``bytes`` must be integers. A flow from a host to itself is refused
(SimGrid would send it over its loopback link, which the schema does not describe).

Output (JSON on stdout, or ``--out``): ``flows`` (``id``, ``finish_s``, file
order), ``makespan_s``, ``engine_clock_s``, ``n_flows``, ``wall_s`` (SimGrid's own
run, ``Engine.run``), ``setup_wall_s`` (building the platform and the driver),
``total_wall_s`` (from the start of this script, after the interpreter started;
the caller measures the whole process), ``max_start_shift_s`` and
``n_start_shifted``, ``simgrid_version``, ``model`` and ``config``. Only the standard library and ``simgrid`` are used: this runs outside
the project's venv.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time

T_SCRIPT = time.perf_counter()

# The reference's configuration (../shared/reference/simgrid/*.result.json.gz, "config").
CONFIG = [
    "--cfg=network/model:CM02",
    "--cfg=network/latency-factor:1.0",
    "--cfg=network/bandwidth-factor:1.0",
    "--cfg=network/weight-S:0",
    "--cfg=network/crosstraffic:0",
    "--cfg=network/TCP-gamma:0",
]
QUIET = ["--log=root.thresh:warning"]  # no "Configuration change" lines on stderr; does not change the model
SHARINGS = ("shared", "splitduplex", "fatpipe")
START_SHIFT_LIMIT_S = 1e-8  # ten times SimGrid's default timing precision


class ScenarioError(Exception):
    pass


def read_json(path: str):
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return json.loads(raw)


def _flows(doc: dict, hosts: set):
    flows = doc.get("flows")
    if not isinstance(flows, list):
        raise ScenarioError("missing 'flows' list")
    out = []
    for i, f in enumerate(flows):
        try:
            fid, src, dst, size, start = f["id"], f["src"], f["dst"], f["bytes"], float(f["start_s"])
        except (KeyError, TypeError, ValueError) as e:
            raise ScenarioError(f"flows[{i}]: bad or missing field {e}") from None
        for h in (src, dst):
            if h not in hosts:
                raise ScenarioError(f"flow {fid!r}: unknown host {h!r}")
        if src == dst:
            raise ScenarioError(f"flow {fid!r}: from a host to itself (SimGrid would use its loopback link)")
        if not isinstance(size, (int, float)) or isinstance(size, bool) or size < 0 or size != int(size):
            raise ScenarioError(f"flow {fid!r}: bytes must be a whole number >= 0 for SimGrid, got {size!r}")
        out.append((fid, src, dst, int(size), start))
    return out


def describe(doc: dict):
    """The scenario as plain data: hosts, links {name: (bw, lat, sharing)}, routes {(src, dst): [(link, dir)]}, flows.

    ``routes`` holds the routes as listed (tree: one per direction of every host
    pair with a flow) and ``symmetric`` the pairs whose reverse SimGrid derives.
    """
    if not isinstance(doc, dict):
        raise ScenarioError("a scenario must be a JSON object")
    if "tree" in doc:
        t = doc["tree"]
        leaves, per = int(t["leaves"]), int(t["hosts_per_leaf"])
        n = leaves * per
        hosts = [f"h{k}" for k in range(n)]
        links = {f"down{k}": (float(t["down_bw"]), float(t["down_lat"]), "shared") for k in range(n)}
        links.update({f"up{k}": (float(t["up_bw"]), float(t["up_lat"]), "shared") for k in range(leaves)})
        flows = _flows(doc, set(hosts))
        routes = {}
        for _, src, dst, _, _ in flows:
            if (src, dst) in routes:
                continue
            s, d = int(src[1:]), int(dst[1:])
            ls, ld = s // per, d // per
            hops = [(f"down{s}", "up")]
            if ls != ld:
                hops += [(f"up{ls}", "up"), (f"up{ld}", "down")]
            hops.append((f"down{d}", "down"))
            routes[(src, dst)] = hops
        return hosts, links, routes, set(), flows
    hosts = doc.get("hosts")
    if not isinstance(hosts, list):
        raise ScenarioError("missing 'hosts' list (or a 'tree' generator)")
    links = {}
    for i, link in enumerate(doc.get("links", [])):
        sharing = str(link.get("sharing", "shared")).lower()
        if sharing not in SHARINGS:
            raise ScenarioError(f"link {link.get('name')!r}: sharing must be one of {', '.join(SHARINGS)}")
        links[link["name"]] = (float(link["bandwidth_Bps"]), float(link["latency_s"]), sharing)
    routes = {}
    for r in doc.get("routes", []):
        hops = []
        for hop in r["links"]:
            if hop["name"] not in links:
                raise ScenarioError(f"route {r['src']}->{r['dst']}: unknown link {hop['name']!r}")
            if hop.get("dir", "up") not in ("up", "down"):
                raise ScenarioError(f"route {r['src']}->{r['dst']}: dir must be up or down")
            hops.append((hop["name"], hop.get("dir", "up")))
        routes[(r["src"], r["dst"])] = hops
    symmetric = {pair for pair in routes if (pair[1], pair[0]) not in routes}
    flows = _flows(doc, set(hosts))
    for fid, src, dst, _, _ in flows:
        if (src, dst) not in routes and (dst, src) not in symmetric:
            raise ScenarioError(f"flow {fid!r}: no route from {src!r} to {dst!r}")
    return hosts, links, routes, symmetric, flows


def route_latency(hops, links) -> float:
    lat = 0.0
    for name, _ in hops:
        lat += links[name][1]
    return lat


def simulate(doc: dict) -> dict:
    """Run one scenario in a fresh SimGrid engine (SimGrid allows one engine per process: see main)."""
    import simgrid as sg

    t0 = time.perf_counter()
    hosts, links, routes, symmetric, flows = describe(doc)
    engine = sg.Engine([sys.argv[0]] + CONFIG + QUIET)
    zone = sg.NetZone.create_full_zone("scenario")
    host = {h: zone.create_host(h, 1e9).seal() for h in hosts}
    link = {}
    for name, (bw, _, sharing) in links.items():
        if sharing == "fatpipe":
            lk = zone.create_link(name, bw)
            lk.set_sharing_policy(sg.Link.SharingPolicy.FATPIPE, None)
        else:
            lk = zone.create_split_duplex_link(name, bw)
        link[name] = lk.set_latency(0.0).seal()  # latency is waited before the comm starts (CM02 weights by it)
    up, down = sg.LinkInRoute.Direction.UP, sg.LinkInRoute.Direction.DOWN
    for (src, dst), hops in routes.items():
        if src == dst:
            continue
        in_route = [sg.LinkInRoute(link[n], up if d == "up" else down) if links[n][2] != "fatpipe"
                    else sg.LinkInRoute(link[n]) for n, d in hops]
        zone.add_route(host[src].netpoint, host[dst].netpoint, None, None, in_route, (src, dst) in symmetric)
    zone.seal()

    # start time of each flow: its start plus its route's latency (the reverse of a symmetric route has the same sum)
    plan = []
    for k, (_, src, dst, size, start) in enumerate(flows):
        hops = routes[(src, dst)] if (src, dst) in routes else routes[(dst, src)]
        plan.append((start + route_latency(hops, links), k, host[src], host[dst], size))
    plan.sort(key=lambda p: (p[0], p[1]))
    comms = [None] * len(flows)

    def driver():
        for at, k, a, b, size in plan:
            if at > sg.Engine.clock:
                sg.this_actor.sleep_until(at)
            comms[k] = sg.Comm.sendto_async(a, b, size)
            if size == 0:
                # An empty comm is done at once, but SimGrid stamps its finish_time only when it is
                # waited for: wait now (it takes no simulated time), not at the end with the others.
                comms[k].wait()
        sg.Comm.wait_all([c for c in comms if c is not None])

    if plan:
        sg.Actor.create("driver", host[hosts[0]], driver)
    t1 = time.perf_counter()
    engine.run()
    t2 = time.perf_counter()
    finish = [c.finish_time for c in comms]
    # SimGrid ends a sleep that has less than its timing precision (surf/precision, 1e-9 s) left at the
    # event before, so a flow may start up to 1e-9 s early; a larger shift would be a driver bug.
    shift = [comms[k].start_time - at for at, k, *_ in plan]
    worst = max(shift, key=abs, default=0.0)
    if abs(worst) > START_SHIFT_LIMIT_S:
        bad = [flows[k][0] for (at, k, *_), d in zip(plan, shift) if abs(d) > START_SHIFT_LIMIT_S]
        raise ScenarioError(f"{len(bad)} comms started more than {START_SHIFT_LIMIT_S:g} s from their start time "
                            f"plus latency (worst {worst:.3g} s), e.g. flows {bad[:3]}")
    return {"simgrid_version": sg.simgrid_version, "model": "CM02-maxmin", "config": CONFIG,
            "n_flows": len(flows),
            "flows": [{"id": f[0], "finish_s": t} for f, t in zip(flows, finish)],
            "makespan_s": max(finish, default=0.0), "engine_clock_s": sg.Engine.clock,
            "max_start_shift_s": worst, "n_start_shifted": sum(d != 0.0 for d in shift),
            "wall_s": t2 - t1, "setup_wall_s": t1 - t0, "total_wall_s": time.perf_counter() - T_SCRIPT}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenario", help="scenario JSON (optionally gzip); a list of {name, scenario} cases is run "
                                     "case by case, each in its own process")
    ap.add_argument("--out", help="write the result here instead of stdout")
    args = ap.parse_args(argv)
    try:
        import simgrid  # noqa: F401
    except ImportError:
        print("simgrid_peer: python3-simgrid is not installed for this interpreter (make benchdeps)", file=sys.stderr)
        return 3
    try:
        doc = read_json(args.scenario)
        if isinstance(doc, list):
            result = run_cases(args.scenario, doc)
        else:
            result = simulate(doc)
    except (OSError, ValueError, KeyError, TypeError, ScenarioError) as e:
        print(f"simgrid_peer: {args.scenario}: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    text = json.dumps(result)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text + "\n")
    return 0


def run_cases(path: str, cases: list) -> list:
    """SimGrid keeps one engine per process, so each case of a list runs in a child process of this script."""
    import os
    import subprocess
    import tempfile

    out = []
    for i, case in enumerate(cases):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(case["scenario"], f)
        try:
            proc = subprocess.run([sys.executable, os.path.abspath(__file__), f.name],
                                  capture_output=True, text=True)
        finally:
            os.unlink(f.name)
        if proc.returncode != 0:
            raise ScenarioError(f"case {i} ({case.get('name')!r}): {proc.stderr.strip()}")
        out.append({"name": case.get("name"), **json.loads(proc.stdout)})
    return out


if __name__ == "__main__":
    sys.exit(main())
