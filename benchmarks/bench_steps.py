"""Exact on real applications: the circuit ilp on an application's steps, against the simulator.

A grid of the papers' systems (000, 001-16x16, 001-8x32, 003) at several OCS sizes, traffic of the kinds
users plan for (the neighbour exchange, random pairs, NPB CG, MG, FT, LU and IS class B) and planner seeds
0-4. Per cell the circuit methods ``none``, ``greedy``, the paper's heuristic and ``ilp`` (10 s, default
options: its objective is the step time on the trace's steps, and on a trace it keeps the fastest of its
plan and its starting heuristics' in the simulator) are run and every plan is simulated on the trace under
the default network model. A cell holds when the ilp plan simulates at most 1% slower than greedy, the
paper's heuristic and no circuits; its accuracy is the ilp objective over its simulated time. With
``--bulk`` the earlier objective (the traffic as one bulk phase, ``--no-steps``) is run beside it at seed
0, for comparison.

    python benchmarks/bench_steps.py                    # the whole grid (hours on 2 cores; resumable)
    python benchmarks/bench_steps.py --quick            # one OCS size per system, seed 0
    python benchmarks/bench_steps.py --table            # the summary of the cells measured so far
    python benchmarks/bench_steps.py --quick --systems 003 --traffic cg,mg   # a subset of the cells
    python benchmarks/bench_steps.py --sizes "8 OCS" --seeds 1,2 --out benchmarks/results/steps_grid_seeds.jsonl
    python benchmarks/bench_steps.py --mechanism --systems 001-16x16 --traffic lu   # why a cell runs off its steps
    python benchmarks/bench_steps.py --decompose --systems 001-16x16,003 --traffic lu,is   # within or between steps
    python benchmarks/bench_steps.py --decompose --systems 003 --sizes "32 OCS" --plan greedy   # ... with circuits

``--mechanism`` replays one cell without circuits in the reference replayer (Python: minutes) with MPI's eager
sends and with every send waiting, and prints the simulator's evidence docs/circuits.md cites: the critical
chain followed back from the last rank (transmission against waiting, by message size), the flows each chain
message shared its sender's node link and its switches' uplinks with, and how many uplinks are full over time.

``--decompose`` splits a cell's miss without circuits (or with the plan of ``--plan METHOD``) in two: every step type is simulated alone (its messages
all at once, the default model) and the results are summed by count. The step time against that sum is what the
step time misses *within* a step (sharing that keeps a step from its bottleneck, latencies the chain does not
charge); that sum against the whole trace's simulated time is what it misses *between* steps (steps that
overlap, ranks that drift apart).

Cells are appended to ``benchmarks/results/steps_grid.jsonl`` as they finish (a rerun skips them;
``--fresh`` starts over); ``--table`` prints the summary (Markdown) the README shows. NPB traces run two
iterations (``iters=2``: NPB's untimed warm-up and one timed iteration) so that a simulation takes
seconds; the step clock, the ilp and the simulator see the same trace.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

OUT = ROOT / "benchmarks" / "results" / "steps_grid.jsonl"

# system -> (preset, {size label: --set overrides or ("max_circuits", k)}, ranks, the paper's heuristic)
SYSTEMS = {
    "000": ("paper000", {"12 pathways": ("max_circuits", 12), "24 pathways": ("max_circuits", 24)}, 128, "sp"),
    "001-16x16": ("paper001-16x16", {"32 OCS": ["ocs.nodes_per_switch=2"], "64 OCS": ["ocs.nodes_per_switch=4"]},
                  256, "three-step"),
    "001-8x32": ("paper001-8x32", {"32 OCS": ["ocs.nodes_per_switch=4"], "64 OCS": ["ocs.nodes_per_switch=8"]},
                 256, "three-step"),
    "003": ("paper003", {"4 OCS": ["ocs.nodes_per_switch=1"], "8 OCS": ["ocs.nodes_per_switch=2"],
                         "32 OCS": ["ocs.nodes_per_switch=8"]}, 256, "greedy"),
}
TRAFFIC = ("neighbor", "random", "cg", "mg", "ft", "lu", "is")
NPB = ("cg", "mg", "ft", "lu", "is")
SEEDS = (0, 1, 2, 3, 4)


def traffic_spec(kind: str, ranks: int, seed: int) -> str:
    if kind == "neighbor":
        return ("neighbor2d:rows=8,cols=16,bytes=40MB,iters=5" if ranks == 128
                else "neighbor2d:rows=16,cols=16,bytes=4MB,iters=5")
    if kind == "random":
        return f"random:np={ranks},bytes=4MB,msgs={4 * ranks},seed={seed},iters=2"
    return f"npb:kernel={kind},class=B,np={ranks},iters=2"


def cells(quick: bool, systems=None, traffic=None, sizes_only=None, seeds=None):
    for system, (preset, sizes, ranks, paper) in SYSTEMS.items():
        if systems and system not in systems:
            continue
        labels = list(sizes)[:1] if quick and not sizes_only else list(sizes)
        for label in labels:
            if sizes_only and label not in sizes_only:
                continue
            for kind in TRAFFIC:
                if traffic and kind not in traffic:
                    continue
                for seed in seeds if seeds is not None else (SEEDS[:1] if quick else SEEDS):
                    yield system, preset, label, sizes[label], ranks, paper, kind, seed


def size_options(size) -> tuple:
    """``(--set overrides, max_circuits)`` of a circuit size of :data:`SYSTEMS`."""
    return ([], size[1]) if isinstance(size, tuple) else (list(size), None)


def run_cell(system, preset, label, size, ranks, paper, kind, seed, time_limit, bulk, steps_cache):
    from topoplan.core.placement import sequential
    from topoplan.core.topology_io import load_topology
    from topoplan.problems.circuits import CircuitProblem, solve
    from topoplan.problems.circuits.problem import plan_simulator
    from topoplan.sim.steps import steps_of_spec
    from topoplan.traffic.sources import load_source

    sets, max_circuits = size_options(size)
    spec = traffic_spec(kind, ranks, seed)
    topo = load_topology(preset, sets)
    trace, tr = load_source(spec)
    pl = sequential(tr.n_ranks, topo)
    t0 = time.perf_counter()
    if spec not in steps_cache:
        steps_cache[spec] = steps_of_spec(spec)
    steps_s = time.perf_counter() - t0
    prob = CircuitProblem.build(topo, tr, pl, max_circuits=max_circuits, steps=steps_cache[spec])
    sim = _memo(plan_simulator(prob, trace))
    row = {"system": system, "size": label, "traffic": kind, "spec": spec, "seed": seed,
           "steps": prob.step_loads.n_steps, "step_types": prob.step_loads.n_types,
           "step_groups": prob.step_loads.n_groups, "steps_s": steps_s,
           "latency_levels": steps_cache[spec].latency_levels, "step_latency_s": prob.step_loads.latency_s}
    t1 = time.perf_counter()
    r = solve(prob, "ilp", time_limit=time_limit, seed=seed, trace=trace, sim_model=None)
    plans = {}
    for m in dict.fromkeys(("none", "greedy", paper)):
        h = solve(prob, m, seed=seed)
        plans[m] = h
        row[f"{m}.objective_s"] = h.objective
        # the ilp simulated its starting heuristics already (same seed, same plans)
        done = r.metrics.get("simulated_candidates_s", {})
        row[f"{m}.simulated_s"] = done[m] if m in done else sim(h.to_dict())
    row.update({"ilp.wall_s": time.perf_counter() - t1, "ilp.status": r.status, "ilp.objective_s": r.objective,
                "ilp.bound_s": r.bound, "ilp.picked": r.metrics.get("picked", "ilp"),
                "ilp.simulated_s": r.metrics.get("simulated_s") or sim(r.to_dict()),
                "ilp.circuits": r.metrics["circuits_used"], "ilp.groups_model": r.options.get("step_groups_model")})
    if bulk and seed == 0:
        bprob = CircuitProblem.build(topo, tr, pl, max_circuits=max_circuits)
        rb = solve(bprob, "ilp", time_limit=time_limit, seed=seed, score="bound")
        row.update({"bulk_ilp.objective_s": rb.objective, "bulk_ilp.simulated_s": sim(rb.to_dict())})
    best_other = min(row[f"{m}.simulated_s"] for m in plans)
    row["ilp_over_best_heuristic"] = row["ilp.simulated_s"] / best_other
    row["holds"] = bool(row["ilp.simulated_s"] <= 1.01 * best_other)
    row["accuracy"] = row["ilp.objective_s"] / row["ilp.simulated_s"]
    return row


def _memo(fn):
    """A plan simulator that simulates each distinct plan once (the ilp simulates the heuristics too)."""
    seen = {}

    def run(plan: dict) -> float:
        key = json.dumps({k: plan.get(k) for k in ("circuits", "forwarding", "rank_to_node")}, sort_keys=True)
        if key not in seen:
            seen[key] = fn(plan)
        return seen[key]

    return run


def replay_record(trace, net, placement, eager_threshold_B):
    """The reference replay with every message's ``(src, dst, bytes, start_s, arrival_s)`` and every link's
    utilization per millisecond: ``(ReplayResult, messages array)``."""
    import numpy as np

    from topoplan.sim.reference import Replayer

    class Recorder(Replayer):
        def __init__(self, *args, **kw):
            super().__init__(*args, **kw)
            self.record, self.started = [], {}

        def _start(self, m, t):
            self.started.setdefault(id(m), t)
            super()._start(m, t)

        def _flow_done(self, fid, t):
            m = self.flow_msg[fid]
            super()._flow_done(fid, t)
            if m.arrived and m.t_arrive == t:        # the last segment of its route
                self.record.append((m.src, m.dst, m.nbytes, self.started.pop(id(m)), t))

    rep = Recorder(trace, net, placement, eager_threshold_B=eager_threshold_B, timeline_dt_s=1e-3)
    res = rep.run()
    return res, np.array(rep.record, dtype=np.float64).reshape(-1, 5)


def critical_chain(msgs, finish_s):
    """The messages that let each rank go on, followed back from the rank that finishes last: at every rank the
    message that arrived last before the time the chain reached it, then its sender at its start. Returns the
    indices into ``msgs`` and the time of the chain not spent in transmission."""
    import numpy as np

    src, dst, start, arrive = msgs[:, 0].astype(np.int64), msgs[:, 1].astype(np.int64), msgs[:, 3], msgs[:, 4]
    order = np.lexsort((arrive, dst))
    lo = np.searchsorted(dst[order], np.arange(len(finish_s) + 1))
    r, t = int(np.argmax(finish_s)), float(np.max(finish_s))
    chain, other = [], 0.0
    while t > 0:
        a, b = lo[r], lo[r + 1]
        j = a + int(np.searchsorted(arrive[order[a:b]], t * (1 + 1e-12), side="right")) - 1
        if j < a:
            other += t
            break
        i = int(order[j])
        other += t - arrive[i]
        chain.append(i)
        r, t = int(src[i]), float(start[i])
    return chain[::-1], other


def mechanism(system: str, kind: str) -> int:
    """Print the simulator's evidence for one cell without circuits (see the module docstring)."""
    import numpy as np

    from topoplan.core.placement import sequential
    from topoplan.core.topology_io import load_topology
    from topoplan.sim.network import build_network
    from topoplan.traffic.sources import load_source

    preset, _, ranks, _ = SYSTEMS[system]
    trace, _ = load_source(traffic_spec(kind, ranks, 0))
    trace = trace.build() if hasattr(trace, "build") else trace
    topo = load_topology(preset)
    net = build_network(topo)
    pl = sequential(trace.n_ranks, topo)
    node = np.asarray(pl.rank_to_node, dtype=np.int64)
    sw = np.asarray(topo.node_switch(), dtype=np.int64)
    ids = net.link_ids()
    for label, eager_B in (("eager sends (below 64 KiB)", 65536.0), ("every send waiting", 0.0)):
        res, msgs = replay_record(trace, net, pl, eager_B)
        chain, other = critical_chain(msgs, res.rank_finish_s)
        m = msgs[chain]
        print(f"{system} {kind}, {label}: simulated {res.makespan_s * 1e3:.2f} ms; critical chain {len(chain)} "
              f"messages, {(m[:, 4] - m[:, 3]).sum() * 1e3:.2f} ms in transmission, {other * 1e3:.2f} ms not")
        for lo_B, hi_B in ((0, 1024), (1024, 16384), (16384, 65536), (65536, np.inf)):
            k = (m[:, 2] >= lo_B) & (m[:, 2] < hi_B)
            if k.any():
                print(f"  chain messages of {lo_B:.0f}-{hi_B:.0f} B: {k.sum()}, {(m[k, 4] - m[k, 3]).sum() * 1e3:.2f} ms, "
                      f"{(m[k, 4] - m[k, 3]).mean() * 1e3:.3f} ms each")
        a, b = node[msgs[:, 0].astype(np.int64)], node[msgs[:, 1].astype(np.int64)]
        cross = sw[a] != sw[b]
        shares = {"its sender's node link": [], "its sender's switch uplink": []}
        for i in chain:
            d = msgs[i, 4] - msgs[i, 3]
            if d <= 0:
                continue
            w = np.clip(np.minimum(msgs[:, 4], msgs[i, 4]) - np.maximum(msgs[:, 3], msgs[i, 3]), 0, None) / d
            w[i] = 0.0
            shares["its sender's node link"].append(w[a == a[i]].sum())
            if cross[i]:
                shares["its sender's switch uplink"].append(w[cross & (sw[a] == sw[a[i]])].sum())
        for what, v in shares.items():
            if v:
                print(f"  a chain message shared {what} with {np.mean(v):.0f} other flows on average")
        util = np.asarray(res.timeline["util"])[:, :int(np.ceil(res.makespan_s / 1e-3))]
        full = (util[ids["uplink_up"]] >= 0.95).sum(axis=0) if len(ids["uplink_up"]) else np.zeros(0)
        print(f"  uplinks {util[ids['uplink_up']].mean():.0%} busy on average; uplinks at least 95% busy, every "
              f"2 ms: {full[::2].tolist()}; node links {util[ids['up']].mean():.0%} busy")
    return 0


def decompose(system: str, kind: str, size: str | None = None, method: str = "none") -> dict:
    """The step time, the step types simulated alone (summed by count) and the whole trace simulated, without
    circuits, or with the plan ``method`` makes (planner seed 0) at circuit size ``size`` (a label of the
    system's; see the module docstring)."""
    from topoplan.core.placement import sequential
    from topoplan.core.topology_io import load_topology
    from topoplan.problems.circuits import CircuitProblem, solve
    from topoplan.problems.circuits.problem import plan_simulator
    from topoplan.sim.steps import steps_of_spec
    from topoplan.traffic.sources import load_source

    preset, sizes, ranks, _ = SYSTEMS[system]
    label = size or next(iter(sizes))
    sets, max_circuits = size_options(sizes[label])
    spec = traffic_spec(kind, ranks, 0)
    topo = load_topology(preset, sets)
    trace, tr = load_source(spec)
    pl = sequential(tr.n_ranks, topo)
    st = steps_of_spec(spec)
    res = solve(CircuitProblem.build(topo, tr, pl, max_circuits=max_circuits, steps=st), method, seed=0,
                **({"time_limit": 10.0} if method in ("ilp", "anneal") else {}))
    plan = res.to_dict()
    alone = 0.0
    for ty, c in zip(st.types, st.count):   # each step type's messages at once, small ones kept below the threshold
        prob = CircuitProblem.build(topo, ty, pl, max_circuits=max_circuits)
        alone += c * plan_simulator(prob)(plan)   # (the problem's bulk trace)
    whole = plan_simulator(CircuitProblem.build(topo, tr, pl, max_circuits=max_circuits), trace)(plan)
    return {"system": system, "size": label, "method": method, "circuits": len(plan.get("circuits") or ()),
            "traffic": kind, "step_types": st.n_types, "steps": st.n_steps,
            "step_time_s": res.objective, "steps_alone_s": float(alone), "simulated_s": whole}


def summary(rows) -> str:
    """The Markdown table of the README: per system and traffic, cells that hold and the accuracy."""
    import numpy as np

    out = ["| system | traffic | cells | ilp <= 1% over greedy, paper, none | ilp objective / simulated: median (min-max) "
           "| within 10% | bulk ilp / simulated (seed 0) |",
           "|---|---|---:|---:|---|---:|---|"]
    keys = sorted({(r["system"], r["traffic"]) for r in rows}, key=lambda k: (k[0], TRAFFIC.index(k[1])))
    for system, kind in keys:
        rs = [r for r in rows if r["system"] == system and r["traffic"] == kind]
        acc = np.array([r["accuracy"] for r in rs])
        within = int((np.abs(acc - 1) <= 0.10).sum())
        bulk = [r["bulk_ilp.objective_s"] / r["bulk_ilp.simulated_s"] for r in rs if "bulk_ilp.simulated_s" in r]
        out.append(f"| {system} | {kind} | {len(rs)} | {sum(r['holds'] for r in rs)} | "
                   f"{np.median(acc):.2f} ({acc.min():.2f}-{acc.max():.2f}) | {within} | "
                   + (f"{min(bulk):.2f}-{max(bulk):.2f}" if bulk else "-") + " |")
    npb = [r for r in rows if r["traffic"] in NPB]
    if npb:
        acc = np.array([r["accuracy"] for r in npb])
        out.append(f"\nAll cells: {sum(r['holds'] for r in rows)} of {len(rows)} hold; NPB cells within 10%: "
                   f"{int((np.abs(acc - 1) <= 0.10).sum())} of {len(npb)} "
                   f"({(np.abs(acc - 1) <= 0.10).mean():.0%}).")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one OCS size per system, seed 0")
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--bulk", action="store_true", help="also the one-bulk-phase ilp at seed 0")
    ap.add_argument("--fresh", action="store_true", help="start over (the cells measured so far are dropped)")
    ap.add_argument("--table", action="store_true", help="only print the summary of the cells measured so far")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--systems", help=f"comma-separated subset of {', '.join(SYSTEMS)}")
    ap.add_argument("--traffic", help=f"comma-separated subset of {', '.join(TRAFFIC)}")
    ap.add_argument("--sizes", help="comma-separated circuit sizes (labels such as '8 OCS'; default: all, the first "
                                    "with --quick)")
    ap.add_argument("--seeds", help="comma-separated planner seeds (default 0-4; 0 with --quick)")
    ap.add_argument("--decompose", action="store_true",
                    help="split each NPB cell's miss without circuits (or with --plan's) into within and between steps")
    ap.add_argument("--plan", default="none", help="with --decompose: the circuit method whose plan is simulated "
                                                   "(default none; its sizes from --sizes, else the system's first)")
    ap.add_argument("--mechanism", action="store_true",
                    help="the simulator's evidence for one cell without circuits (--systems, --traffic: one each)")
    a = ap.parse_args(argv)
    systems = a.systems.split(",") if a.systems else None
    traffic = a.traffic.split(",") if a.traffic else None
    labels = {label for _, sizes, _, _ in SYSTEMS.values() for label in sizes}
    sizes_only = [x.strip() for x in a.sizes.split(",")] if a.sizes else None
    try:
        seeds = [int(x) for x in a.seeds.split(",")] if a.seeds else None
    except ValueError:
        print(f"error: --seeds: not a list of integers: {a.seeds}", file=sys.stderr)
        return 2
    for name, given, known in (("--systems", systems, SYSTEMS), ("--traffic", traffic, TRAFFIC),
                               ("--sizes", sizes_only, sorted(labels))):
        bad = [x for x in given or () if x not in known]
        if bad:
            print(f"error: {name}: unknown {', '.join(bad)}; choose from {', '.join(known)}", file=sys.stderr)
            return 2
    if a.decompose:
        print("| system | circuits | plan | traffic | step types (steps) | step time | steps alone | whole trace | "
              "within steps | between steps |\n|---|---|---|---|---:|---:|---:|---:|---:|---:|")
        for system in systems or SYSTEMS:
            for label in [x for x in sizes_only or [None] if x is None or x in SYSTEMS[system][1]]:
                for kind in [k for k in traffic or NPB if k in NPB]:
                    d = decompose(system, kind, label, a.plan)
                    print(f"| {system} | {d['size']} | {a.plan} ({d['circuits']}) | {kind} | {d['step_types']} "
                          f"({d['steps']}) | {d['step_time_s'] * 1e3:.2f} ms | {d['steps_alone_s'] * 1e3:.2f} ms | "
                          f"{d['simulated_s'] * 1e3:.2f} ms | {d['steps_alone_s'] / d['step_time_s']:.2f} | "
                          f"{d['simulated_s'] / d['steps_alone_s']:.2f} |", flush=True)
        return 0
    if a.mechanism:
        if not (systems and traffic and len(systems) == 1 and len(traffic) == 1):
            print("error: --mechanism: give one system (--systems) and one traffic (--traffic)", file=sys.stderr)
            return 2
        return mechanism(systems[0], traffic[0])
    a.out.parent.mkdir(parents=True, exist_ok=True)
    if a.fresh and a.out.exists():
        a.out.unlink()
    done = [json.loads(line) for line in a.out.read_text().splitlines()] if a.out.exists() else []
    if not a.table:
        seen = {(r["system"], r["size"], r["traffic"], r["seed"]) for r in done}
        steps_cache: dict = {}
        for cell in cells(a.quick, systems, traffic, sizes_only, seeds):
            system, preset, label, size, ranks, paper, kind, seed = cell
            if (system, label, kind, seed) in seen:
                continue
            row = run_cell(*cell, a.time_limit, a.bulk, steps_cache)
            with a.out.open("a") as f:
                f.write(json.dumps(row) + "\n")
            done.append(row)
            print(f"{system:10s} {label:12s} {kind:9s} seed {seed}: ilp {row['ilp.simulated_s'] * 1e3:9.2f} ms "
                  f"(kept {row['ilp.picked']}), best heuristic x{row['ilp_over_best_heuristic']:.3f}, "
                  f"objective/simulated {row['accuracy']:.2f}", flush=True)
    print(summary(done))
    return 0


if __name__ == "__main__":
    sys.exit(main())
