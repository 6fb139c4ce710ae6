"""Scale of the circuit heuristics (issue 20): planning time and peak memory from 4,096 to 65,536 nodes.

    python benchmarks/bench_circuits_scale.py              # greedy at 4,096, 16,384 and 65,536 nodes, matching
                                                           # up to 16,384, and NetworkX's matching at 4,096
    python benchmarks/bench_circuits_scale.py --quick      # 4,096 nodes only
    python benchmarks/bench_circuits_scale.py --json
    python benchmarks/bench_circuits_scale.py --methods greedy,three-step,sp --sizes 4096,16384
    python benchmarks/bench_circuits_scale.py --simulate   # also simulate each plan (timed apart)
    python benchmarks/bench_circuits_scale.py --peer-sizes ""   # without the NetworkX rows

Systems: hybrids of 32 single-core nodes per switch, 8 OCS nodes per switch (one optical port each),
10 Gbps node links, 64 Gbps uplinks, 20 Gbps circuits -- 128 switches (4,096 nodes, 1,024 OCS nodes:
the system of issue 20), 512 (16,384 nodes) and 2,048 (65,536 nodes).

Traffic, one rank per node:

- ``random``: the generator ``random:np=N,msgs=8N,bytes=4MB,seed=1`` (8 messages of 4 MB per rank);
- ``cg``: CG-like, NPB CG class C: the pairs and sizes of its reduce-scatter and transpose exchanges
  (:func:`topoplan.traffic.npb.cg_layout`, 26 matrix-vector products per CG call, warm-up plus one
  iteration) and its 8-byte row sums, as a matrix (:func:`cg_like`). Its large messages are those of
  ``npb:kernel=cg,class=C,np=N,iters=1`` message for message; the NPB generator itself writes the whole
  call trace (12 M rows at 4,096 ranks: 14 s; 57 M rows at 16,384: 81 s), so it is not used here.

Every row runs in a fresh interpreter, so its peak memory (``resource.getrusage``, maximum resident set
of that process) is its own: ``traffic_s`` is making the traffic, ``plan_s`` the planning -- the problem
build, the method, the forwarding tables, the communication-time bound and the plan's validation (one
:func:`topoplan.problems.circuits.solve`) -- and ``peak_MB`` the process peak. ``--simulate`` adds the
simulation of the plan (the CLI's ``--simulate``: the traffic as one bulk phase, maxmin, pipelined relays)
as ``sim_s``; its peak then includes the simulation.

Tables: the methods' default ``tables="full"`` gives every node with a relay route an entry towards
every switch it can reach (N x S entries: 8.4 M at 16,384 nodes when the circuits connect every switch).
At 65,536 nodes that would be 134 M entries (a 1 GB array, and a plan of many GB), so those rows use
``tables="used"``: only the entries the traffic's large messages use (the same routes and bound).
``--tables full|used`` sets every row.

``matching`` (an exact maximum-weight matching on the OCS nodes, :mod:`topoplan.problems.circuits.blossom`) runs
up to ``MATCHING_MAX_NODES`` unless ``--methods`` names it: its graph joins every pair of OCS nodes under
switches that exchange traffic (5.3 M pairs at 16,384 nodes on random traffic), 84 M at 65,536. The peer
rows (``--peer-sizes``, default 4,096) solve the same graph -- the method's first matching -- with
NetworkX's ``max_weight_matching`` and with ours in one fresh interpreter: ``nx_s`` and ``ours_s`` are the
two solves alone (our graph arrays, NetworkX's graph built from them untimed), and both matchings' weights
must be equal (both are exact).

Targets: greedy plans 16,384 nodes in under 10 s and 4 GB (issue 20), on random and CG-like traffic;
matching plans 4,096 nodes in under 10 s and 16,384 in under 60 s.

Process rows (issue 39, item 1; ``--process 4096,16384``, the default; ``--process-only`` for them alone): the
CLI's commands as the user waits for them, greedy on the ``random`` traffic, each its own process measured from
outside (wall, CPU = user + system, peak resident set of that process, load at its end):
``circuits --no-simulate`` (``topoplan circuits -m greedy --no-simulate -o plan.json``), ``circuits`` (the
default, which also simulates the plan) and ``simulate --circuits`` (``topoplan simulate --circuits plan.json``).
``solver`` is the plan's own ``wall_s``. Targets: the circuits process under 10 s and 2 GB quiet at 16,384
nodes, simulating its plan under 20 s.

Measured 2026-11-29 on the 2-core, 24 GiB shared machine, never quiet (load 10-12: wall times are several
times what a quiet machine gives; CPU time is the steadier figure, itself inflated by the other jobs)::

     nodes command                  process     cpu    peak   solver  plan   load
      4096 circuits --no-simulate     7.4 s   3.8 s   299 MB   2.4 s   6 MB  10.8
      4096 circuits                  18.3 s   9.2 s   352 MB   2.6 s   6 MB  11.1
      4096 simulate --circuits       18.6 s   8.2 s   186 MB           6 MB  11.2
     16384 circuits --no-simulate    36.7 s  15.9 s  1134 MB  18.4 s 105 MB  11.7
     16384 circuits                 190.4 s  85.2 s  2273 MB  20.3 s 105 MB  11.6
     16384 simulate --circuits      142.8 s  68.2 s  2256 MB         105 MB  10.4

With nothing else in the foreground (load 1-2, the other core partly busy at low priority), the same rows:
4,096 nodes 2.6 s / 135 MB, 6.4 s / 196 MB and 6.6 s / 186 MB of wall time; 16,384 nodes 11.2 s / 914 MB,
40.6 s / 2,150 MB and 40.6 s / 2,395 MB (CPU within 0.2 s of wall), and ``circuits --no-simulate -o plan.zip``
10.0 s / 933 MB.

(The 4,096-node ``circuits --no-simulate`` row ran greedy's compiled traffic pass, since raised to 65,536
traffic groups: at 4,096 nodes Numba's import cost about what the pass saved, and 150 MB.) Side by side with
the previous code (the parent of this round's first commit) in one session at load 11-12, 16,384 nodes
``circuits --no-simulate``: 26.7 and 24.4 s CPU before, 15.9 and 15.2 s now, peak 1.17 GB both; the plan files
byte for byte the same but ``wall_s``; written as a plan archive (``-o plan.zip``, 5 MB) 15.0 s. Simulating
that plan (``simulate --circuits``, load 7-8): 63.4 s CPU and 2.33 GB from the JSON file, 38.7 s and 2.13 GB
from the archive, the same result (makespan 84.2177 s); before, 78.8 s and 2.9 GB (load 6, the previous
measurement).

What changed: forwarding tables of 65,536 entries (nodes x switches) or more are held as their next-hop array
(:class:`topoplan.plans.circuits.ForwardingTables`, a read-only mapping equal to the dict) from the method to
the file and the simulator: the plan is validated from the array, its JSON is made from the array with byte
tables a block of entries at a time (byte for byte the dict's text) and written a piece at a time, a file's
tables are turned into the array once while they are validated, and the simulator's second check of the same
tables is skipped (the array does not change). Greedy's load-sharing traffic pass (sequential: each node's
choice changes the loads the next sees) runs compiled (:mod:`topoplan.problems.circuits._sharing_jit`, the same
order, keys and float operations). Where the time goes now, 16,384 nodes ``circuits --no-simulate`` (cProfile at
load 11, shares of the process): the distance-vector tables 40% (the relay distances 11%, the per-switch rounds'
array work 15%, the compiled pass 11%, half of it Numba loading its cached kernel), the bound and step times
15%, validation 12%, writing the JSON 10%, the inputs, the problem and the imports the rest (20%).
Simulating: the flow engine's own run is most of the process (maxmin over 131,072 flows that relay over about
80 hops each: greedy's plan on random traffic), so the 20 s target needs the engine itself to change; reading
the JSON plan (its text and a dict of 8.4 M entries, then the array) is what the archive removes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SIZES = (4096, 16384, 65536)
TRAFFICS = ("random", "cg")
TARGET_NODES, TARGET_S, TARGET_MB = 16384, 10.0, 4096
MATCHING_MAX_NODES = 16384
MATCHING_TARGET_S = {4096: 10.0, 16384: 60.0}
PEER_SIZES = (4096,)
QUICK_PEER_SIZES = (1024,)   # NetworkX takes minutes at 4,096 nodes
PROCESS_SIZES = (4096, 16384)
PROCESS_TARGET_S, PROCESS_TARGET_MB, SIM_TARGET_S = 10.0, 2048, 20.0   # issue 39, item 1


def topology_dict(nodes: int) -> dict:
    """The hybrid of ``nodes`` nodes as a topology document: 32 per switch, 8 OCS nodes per switch."""
    return {"kind": "hybrid", "name": f"scale{nodes}", "switches": nodes // 32, "nodes_per_switch": 32,
            "cores_per_node": 1,
            "eps": {"down_bw": "10Gbps", "up_bw": "64Gbps", "down_latency": "500ns", "up_latency": "500ns"},
            "ocs": {"nodes_per_switch": 8, "bw": "20Gbps", "latency": "1us"}}


def topology(nodes: int):
    """The hybrid of ``nodes`` nodes: 32 per switch, 8 OCS nodes per switch."""
    from topoplan.core.topology_io import load_topology

    return load_topology(topology_dict(nodes))


def random_spec(nodes: int) -> str:
    """The ``random`` traffic of a row: 8 messages of 4 MB per rank."""
    return f"random:np={nodes},msgs={8 * nodes},bytes=4MB,seed=1"


def cg_like(n_ranks: int, klass: str = "C", iters: int = 1):
    """NPB CG's point-to-point traffic as a matrix: its exchanges with the row partners and the transpose
    partner (:func:`topoplan.traffic.npb.cg_layout`), warm-up plus ``iters`` iterations.

    Per CG call: 26 matrix-vector products (each a reduce-scatter over the process row and the transpose
    exchange) and 53 one-word row sums; per iteration one two-word row sum.

    Examples
    --------
    >>> t = cg_like(16)
    >>> t.n_ranks, int(t.count.max()), sorted(set(t.msg_bytes.tolist()))[:3]
    (16, 106, [8.0, 16.0, 300000.0])
    """
    import numpy as np

    from topoplan.traffic.matrix import from_arrays
    from topoplan.traffic.npb import CG_CLASSES, DBL, cg_layout

    L = cg_layout(CG_CLASSES[klass][0], n_ranks)
    part, lens, exch, send_len = L["reduce_exch_proc"], L["reduce_send_len"], L["exch_proc"], L["send_len"]
    ranks = np.arange(n_ranks)
    calls = iters + 1
    matvec, row_sums = 26 * calls, 53 * calls
    src, dst, size, count = [], [], [], []
    for i in range(L["l2npcols"]):
        for b, c in ((lens[:, i] * DBL, matvec), (np.full(n_ranks, DBL), row_sums), (np.full(n_ranks, 2 * DBL), calls)):
            src.append(ranks)
            dst.append(part[:, i])
            size.append(b)
            count.append(np.full(n_ranks, c))
    if L["l2npcols"]:
        src.append(ranks)
        dst.append(exch)
        size.append(send_len * DBL)
        count.append(np.full(n_ranks, matvec))
    src, dst = np.concatenate(src), np.concatenate(dst)
    keep = src != dst
    return from_arrays(n_ranks, src[keep], dst[keep], np.concatenate(size)[keep], np.concatenate(count)[keep],
                       name=f"cg-like:class={klass},np={n_ranks}")


def traffic(kind: str, nodes: int):
    """``(trace or None, Traffic)`` of a row."""
    from topoplan.traffic.sources import load_source

    if kind == "random":
        return load_source(random_spec(nodes))
    if kind == "cg":
        return None, cg_like(nodes)
    raise SystemExit(f"unknown traffic {kind!r} (random, cg)")


def run_peer_row(spec: dict) -> dict:
    """The matching method's first graph solved by ours and by NetworkX, each in a process of its own
    (``matching_peer.py``, timed by :mod:`processes`: wall, CPU, peak memory; ``runs`` runs, least time); the
    weights must agree. This process only builds and saves the graph."""
    import tempfile

    import numpy as np

    from processes import best_of, ratio

    from topoplan.problems.circuits import CircuitProblem
    from topoplan.problems.circuits.heuristics import _Circuits, _matching_graph

    topo = topology(spec["nodes"])
    prob = CircuitProblem.build(topo, traffic(spec["traffic"], spec["nodes"])[1])
    f, a, b, w = _matching_graph(prob, _Circuits(prob))
    local = np.full(prob.n_nodes, -1, dtype=np.int64)
    local[f] = np.arange(len(f))
    row = {**spec, "ocs_nodes": int(len(f)), "edges": int(len(a))}
    with tempfile.TemporaryDirectory() as tmp:
        graph = Path(tmp) / "graph.npz"
        np.savez(graph, n=len(f), u=local[a], v=local[b], w=w)
        for impl in ("topoplan", "networkx"):
            out = Path(tmp) / f"{impl}.json"
            row[impl] = best_of([sys.executable, Path(__file__).resolve().parent / "matching_peer.py", graph,
                                 "--impl", impl], spec.get("runs", 1), stdout=lambda out=out: open(out, "a"),
                                timeout_s=spec.get("peer_timeout_s"))
            if "timeout_s" not in row[impl]:   # one line a run: the weight (the same), the least solve time
                runs = [json.loads(line) for line in out.read_text().splitlines()]
                row[impl].update(runs[0], solve_s=min(r["solve_s"] for r in runs))
    if "timeout_s" in row["networkx"]:
        return row
    row["ratio"] = ratio(row["networkx"], row["topoplan"])
    ours_w, nx_w = row["topoplan"]["weight"], row["networkx"]["weight"]
    row["equal"] = bool(abs(ours_w - nx_w) <= 1e-9 * max(1.0, nx_w))
    return row


PROCESS_COMMANDS = ("circuits --no-simulate", "circuits", "simulate --circuits")


def measure(cmd: list) -> dict:
    """Run ``cmd`` as a child process: its wall time, CPU time and peak resident memory (``os.wait4``: that
    child's own ``rusage``), and the 1-minute load average when it ends."""
    import tempfile

    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        _, status, use = os.wait4(child.pid, 0)
        wall = time.perf_counter() - t0
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode != 0:
            err.seek(0)
            raise SystemExit(f"{' '.join(map(str, cmd[2:]))}: exit {child.returncode}: "
                             f"{err.read().decode(errors='replace').strip()[-300:]}")
    return {"process_s": wall, "cpu_s": use.ru_utime + use.ru_stime, "process_peak_MB": use.ru_maxrss / 1024,
            "load": os.getloadavg()[0]}


def run_process_row(spec: dict) -> dict:
    """The CLI commands as the user runs them, each its own process timed from outside (:func:`measure`), beside
    the solver's own time (the plan's ``wall_s``).

    ``circuits --no-simulate``: ``topoplan circuits -m greedy --no-simulate -o plan.json`` (read the inputs,
    find the steps, plan, validate, write); ``circuits``: the default, which also simulates the plan (the trace,
    maxmin, pipelined relays); ``simulate --circuits``: ``topoplan simulate --circuits plan.json`` on the plan
    ``circuits --no-simulate`` wrote (made first, not measured): read and validate it, then simulate."""
    import tempfile

    nodes, command = spec["nodes"], spec["command"]
    with tempfile.TemporaryDirectory() as tmp:
        topo = Path(tmp) / f"scale{nodes}.json"
        topo.write_text(json.dumps(topology_dict(nodes)))
        plan = Path(tmp) / "plan.json"
        base = [sys.executable, "-m", "topoplan"]
        inputs = ["--topology", str(topo), "--traffic", random_spec(nodes)]
        plan_cmd = base + ["circuits", *inputs, "-m", "greedy", "--no-simulate", "-o", str(plan)]
        cmd = {"circuits --no-simulate": plan_cmd,
               "circuits": base + ["circuits", *inputs, "-m", "greedy", "-o", str(plan)],
               "simulate --circuits": base + ["simulate", *inputs, "--circuits", str(plan)]}[command]
        if command == "simulate --circuits":
            measure(plan_cmd)
        row = {**spec, **measure(cmd)}
        doc = json.loads(plan.read_text())
        row["solver_s"] = doc["wall_s"]
        row["plan_MB"] = plan.stat().st_size / 2 ** 20
        if command == "circuits":
            row["simulated_s"] = doc["metrics"]["simulated_s"]
        if command == "simulate --circuits":
            del row["solver_s"]
        return row


def run_row(spec: dict) -> dict:
    """One row, in this process (the parent runs each in a fresh interpreter)."""
    import resource

    if spec["method"] == "networkx-peer":
        return run_peer_row(spec)
    if spec["method"] == "process":
        return run_process_row(spec)

    from topoplan.problems.circuits import CircuitProblem, solve

    topo = topology(spec["nodes"])
    t0 = time.perf_counter()
    trace, tr = traffic(spec["traffic"], spec["nodes"])
    t1 = time.perf_counter()
    prob = CircuitProblem.build(topo, tr)
    res = solve(prob, spec["method"], seed=0, tables=spec["tables"])
    t2 = time.perf_counter()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    row = {**spec, "switches": topo.n_switches, "ocs_nodes": int(prob.is_ocs.sum()),
           "large_pairs": int(len(prob.large_bytes)), "circuits": res.metrics["circuits_used"],
           "entries": sum(len(r) for r in res.plan["forwarding"].values()), "bound_s": res.objective,
           "traffic_s": t1 - t0, "plan_s": t2 - t1, "peak_MB": peak}
    if spec.get("simulate"):
        from topoplan.problems.circuits.problem import plan_simulator

        t3 = time.perf_counter()
        row["simulated_s"] = plan_simulator(prob, trace)(res.to_dict())
        row["sim_s"] = time.perf_counter() - t3
        row["sim_peak_MB"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return row


def fresh(spec: dict, timeout: float) -> dict:
    """``run_row(spec)`` in a fresh interpreter; a failure or timeout is reported in the row."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--row", json.dumps(spec)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    t0 = time.perf_counter()
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {**spec, "error": f"timed out after {timeout:g} s"}
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["?"])[-1]
        return {**spec, "error": f"exit {out.returncode}: {tail}", "wall_s": time.perf_counter() - t0}
    return json.loads(out.stdout.strip().splitlines()[-1])


def _fmt(r: dict) -> str:
    if r["method"] == "process":
        head = f"{r['nodes']:>6} random process   {r['command']:22s}"
        if "error" in r:
            return f"{head}  {r['error']}"
        solver = f"  solver {r['solver_s']:5.1f} s" if "solver_s" in r else ""
        plan = f"  plan {r['plan_MB']:4.0f} MB" if "plan_MB" in r else ""
        return (f"{head} process {r['process_s']:6.1f} s  cpu {r['cpu_s']:6.1f} s  peak {r['process_peak_MB']:6.0f} MB"
                f"{solver}{plan}  (load {r['load']:.1f})")
    head = f"{r['nodes']:>6} {r['traffic']:6s} {r['method']:10s} {r['tables']:4s}"
    if "error" in r:
        return f"{head}  {r['error']}"
    if r["method"] == "networkx-peer":
        from processes import describe

        head += f" the matching graph ({r['ocs_nodes']:,} OCS nodes, {r['edges']:,} edges) as processes: "
        if "timeout_s" in r["networkx"]:
            return f"{head}ours {describe(r['topoplan'])}; NetworkX {describe(r['networkx'])}"
        return (f"{head}ours {describe(r['topoplan'])} (solve {r['topoplan']['solve_s']:.2f} s); NetworkX "
                f"{describe(r['networkx'])} (solve {r['networkx']['solve_s']:.2f} s); NetworkX / ours: wall "
                f"{r['ratio']['wall']:.1f}x, CPU {r['ratio']['cpu']:.1f}x, memory {r['ratio']['peak']:.2f}x; weights "
                f"{'equal' if r['equal'] else 'DIFFER'} (load {r['topoplan']['load'][1]:.1f})")
    sim = f"  sim {r['sim_s']:6.1f} s ({r['sim_peak_MB']:6.0f} MB)" if "sim_s" in r else ""
    return (f"{head} {r['circuits']:>6} {r['entries']:>10,} {r['bound_s'] * 1e3:>11.3f} {r['traffic_s']:>8.1f} "
            f"{r['plan_s']:>8.1f} {r['peak_MB']:>8.0f}{sim}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="4,096 nodes only (the process rows too), the NetworkX matching rows at 1,024 nodes")
    ap.add_argument("--sizes", default=None, help="nodes per row, comma-separated (multiples of 32; default "
                                                  "4096,16384,65536)")
    ap.add_argument("--traffics", default=",".join(TRAFFICS), help="random, cg (comma-separated)")
    ap.add_argument("--methods", default=None, help="circuit methods, comma-separated (default greedy at every "
                                                     "size, matching up to 16,384 nodes)")
    ap.add_argument("--peer-sizes", default=None,
                    help="sizes of the NetworkX matching rows (comma-separated; default 4096, with --quick 1024; "
                         "empty: none)")
    ap.add_argument("--tables", default="auto", choices=("auto", "full", "used"),
                    help="auto: full up to 16,384 nodes, used above")
    ap.add_argument("--simulate", action="store_true", help="also simulate each plan (timed apart)")
    ap.add_argument("--process", default=None,
                    help="sizes of the process rows (comma-separated; default 4096,16384, empty: none): the CLI's "
                         "commands as the user runs them, greedy on random traffic, wall, CPU and peak of the process")
    ap.add_argument("--process-only", action="store_true", help="only the process rows")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per row")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--row", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.row:
        print(json.dumps(run_row(json.loads(a.row))))
        return 0
    sizes = [4096] if a.quick else ([int(x) for x in a.sizes.split(",")] if a.sizes else list(SIZES))
    def methods(n):
        if a.methods is not None:
            return a.methods.split(",")
        return ["greedy"] + (["matching"] if n <= MATCHING_MAX_NODES else [])

    peer_sizes = a.peer_sizes if a.peer_sizes is not None else ",".join(map(str, QUICK_PEER_SIZES if a.quick
                                                                               else PEER_SIZES))
    peers = [int(x) for x in peer_sizes.split(",") if x.strip()]
    specs = [{"nodes": n, "traffic": t, "method": m,
              "tables": a.tables if a.tables != "auto" else ("full" if n <= TARGET_NODES else "used"),
              "simulate": a.simulate}
             for n in sizes for t in a.traffics.split(",") for m in methods(n)]
    specs += [{"nodes": n, "traffic": t, "method": "networkx-peer", "tables": "full", "runs": 3 if n <= 1024 else 1,
               "peer_timeout_s": a.timeout} for n in peers for t in a.traffics.split(",")]
    process = a.process if a.process is not None else ",".join(map(str, (4096,) if a.quick else PROCESS_SIZES))
    psizes = [int(x) for x in process.split(",") if x.strip()]
    if a.process_only:
        specs = []
    log = (lambda s: print(s, file=sys.stderr, flush=True)) if a.json else (lambda s: print(s, flush=True))
    log(f"{'nodes':>6} {'traffic':6s} {'method':10s} {'tab':4s} {'circ':>6} {'entries':>10} {'bound ms':>11} "
        f"{'gen s':>8} {'plan s':>8} {'peak MB':>8}")
    rows = []
    for spec in specs:
        rows.append(fresh(spec, a.timeout))
        log(_fmt(rows[-1]))
    for n in psizes:
        for command in PROCESS_COMMANDS:
            rows.append(fresh({"nodes": n, "traffic": "random", "method": "process", "tables": "full",
                               "command": command}, a.timeout))
            log(_fmt(rows[-1]))
    prow = {(r["nodes"], r["command"]): r for r in rows if r["method"] == "process" and "error" not in r}
    if (TARGET_NODES, "circuits --no-simulate") in prow:
        r = prow[(TARGET_NODES, "circuits --no-simulate")]
        ok = r["process_s"] < PROCESS_TARGET_S and r["process_peak_MB"] < PROCESS_TARGET_MB
        log(f"target (the circuits process, {TARGET_NODES:,} nodes, under {PROCESS_TARGET_S:g} s and "
            f"{PROCESS_TARGET_MB / 1024:g} GB, quiet): {'met' if ok else 'MISSED'} at load {r['load']:.1f}")
    if (TARGET_NODES, "simulate --circuits") in prow:
        r = prow[(TARGET_NODES, "simulate --circuits")]
        log(f"target (simulating that plan, under {SIM_TARGET_S:g} s, quiet): "
            f"{'met' if r['process_s'] < SIM_TARGET_S else 'MISSED'} at load {r['load']:.1f}")
    target = [r for r in rows if r["nodes"] == TARGET_NODES and r["method"] == "greedy" and "error" not in r]
    met = bool(target) and all(r["plan_s"] < TARGET_S and r["peak_MB"] < TARGET_MB for r in target)
    if target:
        log(f"target (greedy, {TARGET_NODES:,} nodes, under {TARGET_S:g} s and {TARGET_MB / 1024:g} GB): "
            f"{'met' if met else 'MISSED'}")
    mrows = [r for r in rows if r["method"] == "matching" and r["nodes"] in MATCHING_TARGET_S]
    matching_met = all("error" not in r and r["plan_s"] < MATCHING_TARGET_S[r["nodes"]] for r in mrows)
    if mrows:
        log("target (matching, " + ", ".join(f"{n:,} nodes under {s:g} s" for n, s in MATCHING_TARGET_S.items())
            + f"): {'met' if matching_met else 'MISSED'}")
    differ = [r for r in rows if r["method"] == "networkx-peer" and "error" not in r and not r["equal"]]
    if a.json:
        print(json.dumps({"rows": rows, "target_met": met if target else None,
                          "matching_target_met": matching_met if mrows else None}, indent=1))
    return 1 if differ or any("error" in r and "timed out" not in r["error"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
