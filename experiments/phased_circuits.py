"""Circuits that change with the application's phases: static vs scheduled configurations.

Every workload is split into communication phases (:mod:`topoplan.traffic.phases`), and circuit
configurations are scheduled over them (:mod:`topoplan.problems.circuits.schedule`); every schedule is
simulated phase by phase with set-up blackouts (:mod:`topoplan.sim.schedule`, max-min with pipelined relays, the
default model). Per system and workload the rows are

- **EPS only**: the tree without OCS (``--set kind=tree --set ocs=null``), the whole trace replayed;
- **best static**: one configuration for the whole run: the fastest, simulating the whole trace, of the
  exact scheduler's candidates (the exact circuit model ``ilp`` on the whole trace's traffic, the papers'
  heuristics on it, every phase class's ``ilp`` configuration, EPS only), each with its own tables
  (IS: by the phase-sum bound, its replays take ~25 s each);
- **per-phase**: every phase's own best configuration, switched to where that phase gains more than the
  set-up costs (greedy in time);
- **exact**: dynamic programming over phases x those candidates, exact over them, phase times scored by
  simulating each phase alone (``score='simulated'``; IS by the bound); its ``bound`` (the zero-set-up
  lower bound from the circuit ``ilp``'s per-phase bounds) and ``gap``; scored by simulation it replays its
  schedule whole, with the per-phase schedule and the best single configuration, and keeps the fastest
  (``kept``);
- **zero set-up**: every phase at its best candidate with no set-up: the reference no single-configuration
  schedule beats;
- **solstice** / **bvn** (the all-to-all-heavy workloads: the two-phase workload, FT, IS): the exact
  programme with one more choice for every all-to-all-like phase, that phase's decomposition into a
  sequence of configurations with durations (:mod:`topoplan.problems.circuits.decompose`: Solstice-like, or
  Birkhoff-von Neumann), replayed one sub-phase per slot with set-ups between slots; the decomposition is
  kept only where it simulates faster than the phase's best single configuration.

Systems: 003's (``paper003``: 4 switches x 16 nodes x 4 cores) with 16, 32 (the preset), and 64 OCS nodes,
and 001's (``paper001-16x16``: 16 switches x 16 nodes) with 64 (the preset) and 128 OCS nodes.
Workloads: the two-phase workload ``halo+transpose`` (Neighbor 16x16, 4 MB, 5 iterations, then a 16x16
transpose exchange, 4 MB, 5 iterations; :mod:`topoplan.traffic.twophase`), and NPB CG, MG, LU, FT and IS,
class C on 256 ranks, 1 iteration (as 003's experiment), sequential placement. The set-up sweep runs the
two-phase workload at ``ocs.setup`` 1, 3, 10, 30 and 100 ms (per-phase, exact, solstice, bvn).

    python -m experiments.phased_circuits            # everything (~25 min on 2 cores)
    python -m experiments.phased_circuits --quick    # the two-phase workload on two systems (~1 min)
    python -m experiments.phased_circuits --workloads halo+transpose,ft,is --merge   # rerun some, keep the rest

The two-phase workload is run at ``--seeds`` seeds (default 5: 0-4; the seed of every ilp solve and of the
heuristics' random picks; the 20 s solves also depend on the machine's load) and compared with a **static
configuration found with the same budget**: the circuit ``ilp`` on the whole trace's traffic with the
schedule's whole time limit (the time its candidate solves share), its proven bound and gap, and the
papers' heuristics on the whole trace, the fastest in the simulator kept. The tables of the other rows are
the first seed's.

Writes ``experiments/results/phased_circuits.json`` (every cell) and ``phased_circuits.md`` (tables);
``--merge`` keeps the cells of the existing JSON that were not rerun.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from experiments._common import RESULTS, SEEDS, Measured, verdict

SYSTEMS = {  # name -> (preset, --set overrides)
    "003, 16 OCS": ("paper003", ["ocs.nodes_per_switch=4"]),
    "003, 32 OCS": ("paper003", []),
    "003, 64 OCS": ("paper003", ["ocs.nodes_per_switch=16"]),
    "001-16x16, 64 OCS": ("paper001-16x16", []),
    "001-16x16, 128 OCS": ("paper001-16x16", ["ocs.nodes_per_switch=8"]),
}
TWO_PHASE = "halo+transpose"
KERNELS = ("cg", "mg", "lu", "ft", "is")
NPB_SYSTEMS = ("003, 16 OCS", "003, 32 OCS", "001-16x16, 64 OCS")
SWEEP_SYSTEMS = ("003, 16 OCS", "001-16x16, 128 OCS")
SETUPS_MS = (1, 3, 10, 30, 100)
ROWS = ("EPS only", "best static", "per-phase", "exact", "zero set-up", "solstice", "bvn")
A2A_WORKLOADS = (TWO_PHASE, "ft", "is")      # the rows solstice and bvn run for
SWEEP_METHODS = ("per-phase", "exact", "solstice", "bvn")


def workload(name: str):
    """The trace of a workload."""
    if name == TWO_PHASE:
        from topoplan.traffic.generators import halo_then_transpose

        return halo_then_transpose(16, 16, 4e6, iters=5)
    from topoplan.traffic.generators import parse_spec

    return parse_spec(f"npb:kernel={name},class=C,np=256,iters=1")


def _sim_key(doc: dict) -> str:
    keep = {"schedule": [{k: e.get(k) for k in ("from_phase", "to_phase", "circuits", "forwarding", "setup", "slots")}
                         for e in doc["schedule"]], "setup_s": doc.get("setup_s")}
    return json.dumps(keep, sort_keys=True)


def run_cell(system: str, name: str, trace, *, time_limit: float, seed: int = 0, log=print,
             setups_ms=()) -> dict:
    """Schedule and simulate one (system, workload); with ``setups_ms`` also the set-up sweep."""
    from dataclasses import replace

    from topoplan.core.topology_io import load_topology
    from topoplan.problems.circuits.schedule import PhasedProblem, schedule
    from topoplan.traffic.phases import detect_phases
    from topoplan.sim.run import network_view, simulate_plan
    from topoplan.sim.schedule import simulate_schedule

    preset, sets = SYSTEMS[system]
    topo = load_topology(preset, sets)
    t0 = time.perf_counter()
    ph = detect_phases(trace, topo)
    t_detect = time.perf_counter() - t0
    score = "bound" if name == "is" else "simulated"     # IS: one phase, ~25 s per replay
    prob = PhasedProblem.build(topo, ph, score=score)
    sims: dict = {}

    def simulated(res, setup_s=None):
        key = _sim_key(res.plan) + repr(setup_s)
        if key not in sims:
            sims[key] = simulate_schedule(topo, trace, ph, res, setup_s=setup_s)
        return sims[key]

    out = {"system": system, "preset": preset, "sets": sets, "workload": name, "phases": len(ph),
           "kinds": len(set(ph.kinds())), "classes": len(prob.class_problems), "detect_s": t_detect,
           "phase_spans_ms": [[round(p.start_s * 1e3, 4), round(p.end_s * 1e3, 4)] for p in ph][:50],
           "setup_s": prob.setup_s, "score": score, "rows": {}}
    eps = simulate_plan(network_view(topo, "eps"), trace, None)
    out["rows"]["EPS only"] = {"simulated_s": eps["makespan_s"]}
    pick = "candidates" if name == "is" else "simulated"    # IS: by the phase-sum bound
    runs = [("best static", "static", {"pick": pick}), ("per-phase", "per-phase", {}), ("exact", "exact", {}),
            ("zero set-up", "zero-setup", {})]
    if name in A2A_WORKLOADS:
        runs += [("solstice", "solstice", {}), ("bvn", "bvn", {})]
    results = {}
    for row, method, opts in runs:
        t1 = time.perf_counter()
        res = schedule(prob, method, time_limit=time_limit, seed=seed, **opts)
        t2 = time.perf_counter()
        sim = simulated(res)
        results[row] = res
        out["rows"][row] = {"objective_s": res.objective, "bound_s": res.bound, "gap": res.gap,
                            "status": res.status, "simulated_s": sim["makespan_s"],
                            "reconfigurations": res.metrics["reconfigurations"], "entries": res.metrics["entries"],
                            "setup_idle_s": sim["setup_idle_s"], "segments": len(sim["segments"]),
                            "during": [e["setup"]["during"] for e in res.plan["schedule"] if e.get("setup")],
                            "circuits": [len(e["circuits"]) for e in res.plan["schedule"]][:20],
                            "solve_s": t2 - t1, "sim_s": time.perf_counter() - t2,
                            **({"zero_setup_s": res.metrics["zero_setup_s"], "static_s": res.metrics["static_s"]}
                               if method == "exact" else {}),
                            # scored by simulation, exact/solstice/bvn keep the fastest replay of their own
                            # schedule, the per-phase one and the best single configuration
                            **({"kept": res.metrics["picked"], "replayed_s": res.metrics["simulated_candidates_s"]}
                               if "simulated_candidates_s" in res.metrics else {}),
                            **(_decomposition_metrics(res, sim) if method in ("solstice", "bvn") else {})}
        log(f"  {system:20s} {name:15s} {row:12s} {sim['makespan_s'] * 1e3:9.2f} ms simulated, "
            f"{res.objective * 1e3:9.2f} ms {prob.score}, {res.metrics['reconfigurations']} changes "
            f"({t2 - t1:.1f} + {time.perf_counter() - t2:.1f} s)")
    if setups_ms:
        sweep = []
        static_sim = out["rows"]["best static"]["simulated_s"]
        zero_sim = out["rows"]["zero set-up"]["simulated_s"]
        for ms in setups_ms:
            p2 = replace(prob, setup_s=ms * 1e-3)       # shares the candidates (and their solves) with prob
            row = {"setup_ms": ms}
            for method in SWEEP_METHODS:
                if method not in results and method not in ("per-phase", "exact"):
                    continue
                res = schedule(p2, method, time_limit=time_limit, seed=seed)
                sim = simulated(res)
                row[method] = {"objective_s": res.objective, "simulated_s": sim["makespan_s"],
                               "reconfigurations": res.metrics["reconfigurations"],
                               "during": [e["setup"]["during"] for e in res.plan["schedule"] if e.get("setup")],
                               "gain_vs_static": 1.0 - sim["makespan_s"] / static_sim,
                               **(_decomposition_metrics(res, sim) if method in ("solstice", "bvn") else {})}
            row["exact"]["vs_zero_setup"] = row["exact"]["simulated_s"] / zero_sim - 1.0
            sweep.append(row)
            log(f"  {system:20s} setup {ms:4d} ms: exact {row['exact']['simulated_s'] * 1e3:8.2f} ms "
                f"({row['exact']['reconfigurations']} changes, {row['exact']['gain_vs_static']:+.1%} vs static), "
                f"per-phase {row['per-phase']['simulated_s'] * 1e3:8.2f} ms"
                + "".join(f", {m} {row[m]['simulated_s'] * 1e3:8.2f} ms ({row[m]['gain_vs_static']:+.1%})"
                          for m in ("solstice", "bvn") if m in row))
        out["setup_sweep"] = sweep
    return out


def static_same_budget(system: str, trace, *, time_limit: float, seed: int = 0, log=print) -> dict:
    """The static baseline with the schedule's budget: the circuit ``ilp`` on the whole trace's traffic with
    the schedule's whole time limit (what its candidate solves share), the papers' heuristics on the same
    traffic and no circuits; each simulated on the whole trace (max-min, pipelined relays), the fastest kept.
    Returns the
    simulated time of each, the kept one, and the ilp's status, objective (the whole-trace bound of its plan),
    proven lower bound, gap and wall time."""
    from topoplan.core.topology_io import load_topology
    from topoplan.problems.circuits import solve
    from topoplan.problems.circuits.schedule import WHOLE_TRACE_HEURISTICS, PhasedProblem
    from topoplan.sim.run import simulate_plan
    from topoplan.traffic.phases import detect_phases

    preset, sets = SYSTEMS[system]
    topo = load_topology(preset, sets)
    prob = PhasedProblem.build(topo, detect_phases(trace, topo))
    out = {"time_limit_s": time_limit, "simulated_s": {}}
    for method in ("ilp",) + WHOLE_TRACE_HEURISTICS + ("none",):
        t0 = time.perf_counter()
        res = solve(prob.total, method, time_limit=time_limit if method == "ilp" else None, seed=seed)
        t1 = time.perf_counter()
        sim = simulate_plan(topo, trace, res.to_dict(), placement=prob.placement, threshold_B=prob.threshold_B)
        out["simulated_s"][method] = sim["makespan_s"]
        if method == "ilp":
            out.update(ilp_status=res.status, ilp_objective_s=res.objective, ilp_bound_s=res.bound, ilp_gap=res.gap,
                       ilp_solve_s=t1 - t0, ilp_circuits=len(res.plan["circuits"]))
    kept = min(out["simulated_s"], key=out["simulated_s"].get)
    out.update(kept=kept, best_s=out["simulated_s"][kept])
    log(f"  {system:20s} static, same budget: {out['best_s'] * 1e3:9.2f} ms ({kept}); ilp {out['ilp_status']}, "
        f"{out['ilp_objective_s'] * 1e3:.1f} ms bound {out['ilp_bound_s'] * 1e3:.1f} ms ({out['ilp_solve_s']:.1f} s)")
    return out


def _decomposition_metrics(res, sim) -> dict:
    """What a decomposing scheduler did: per all-to-all-like phase class, the decomposition and its prices."""
    m = res.metrics
    return {"all_to_all_phases": m["all_to_all_phases"], "decomposed_phases": m["decomposed_phases"],
            "without_decomposition_s": m["without_decomposition_s"],
            "options": {c: {k: v for k, v in o.items() if k != "slot_price_s"} | {
                "slot_price_s": [round(x, 9) for x in o["slot_price_s"]][:40]} for c, o in m["options"].items()},
            "slot_time_s": [seg.get("slot_time_s") for seg in sim["segments"] if seg.get("slot_time_s")]}


def _ms(x) -> str:
    return "" if x is None else f"{x * 1e3:,.1f}"


def _kept(row: dict) -> str:
    """Which replay ``exact`` kept (and the programme's own where it lost)."""
    kept = row.get("kept")
    if kept is None:
        return "-"
    if kept == "programme":
        return "programme"
    return f"{'single' if kept.startswith('best single') else kept} ({_ms(row['replayed_s']['programme'])})"


def _row_ms(r: dict, row: str) -> str:
    return _ms(r[row]["simulated_s"]) if row in r else "-"


HEADLINE = "001-16x16, 128 OCS"       # the system of the headline (the largest gain of scheduling)


def _faster(ok: list, seeds: list) -> str:
    """:func:`experiments._common.verdict` of "the schedule is faster" in words."""
    v = verdict(ok, seeds)
    return {"holds": "faster at every seed", "fails": "faster at no seed"}.get(v) or v.replace("holds", "faster")


def _gain_over(seeds: list, row: str, ref) -> tuple[list, list]:
    """Per seed: ``1 - row / reference`` and whether the row is faster (``ref(record)``: the reference's
    simulated time)."""
    g = [1.0 - r["simulated_s"][row] / ref(r) for r in seeds if row in r["simulated_s"]]
    return g, [x > 1e-9 for x in g]


def seeds_section(cells: list) -> list[str]:
    """The two-phase workload across seeds: the schedules against a static configuration found with the same
    budget, and against the best static configuration of the schedule's own candidates."""
    sc = [c for c in cells if len(c.get("seeds", [])) > 0]
    if not sc:
        return []
    n = max(len(c["seeds"]) for c in sc)
    lines = ["## The two-phase workload across seeds", "",
             f"Every system run at {n} seed{'s' if n > 1 else ''} (the seed of every circuit `ilp` solve and of the "
             "heuristics' random picks; the solves stop at their time limit, so they also depend on the machine's "
             "load). **Static, same budget**: the circuit `ilp` on the whole trace's traffic given the schedule's "
             "whole time limit (the time all of the schedule's candidate solves share), the papers' heuristics on "
             "that traffic and no circuits, the fastest in the simulator kept; its `ilp` column gives the solver's "
             "status, its plan's whole-trace bound and the proven lower bound of any static configuration on that "
             "bound, with the gap between them. **Best of candidates**: the static row above (the best single "
             "configuration among the schedule's own candidates). Values: `mean [min, max]` over the seeds where "
             "they differ; `k of n`: the seeds at which the schedule is faster.", "",
             "| system | seeds | static, same budget (kept) | its ilp: status, bound of its plan / proven bound, gap "
             "| solver wall: static ilp / schedule's candidates | best of candidates | exact | solstice | exact vs "
             "static, same budget | solstice vs static, same budget | exact vs best of candidates |",
             "|---|---:|---:|---|---|---:|---:|---:|---|---|---|"]
    ms = "{:,.1f}"
    for c in sc:
        rec = c["seeds"]
        seeds = [r["seed"] for r in rec]
        sb = [r["static_same_budget"] for r in rec]

        def over(vals, spec=ms, scale=1e3):
            return Measured.over([Measured(spec, (v * scale,)) for v in vals], seeds)

        kept = ", ".join(sorted({x["kept"] for x in sb}))
        status = "/".join(sorted({x["ilp_status"] for x in sb}))
        ilp = (f"{status}, {over([x['ilp_objective_s'] for x in sb])} / {over([x['ilp_bound_s'] for x in sb])} ms, "
               f"{over([x['ilp_gap'] or 0.0 for x in sb], '{:.0%}', 1.0)}")
        same = lambda r: r["static_same_budget"]["best_s"]   # noqa: E731
        cand = lambda r: r["simulated_s"]["best static"]     # noqa: E731
        cols = []
        for row, ref in (("exact", same), ("solstice", same), ("exact", cand)):
            g, ok = _gain_over(rec, row, ref)
            cols.append("-" if not g else f"{Measured.over([Measured('{:+.1%}', (x,)) for x in g], seeds)} "
                                          f"({_faster(ok, seeds)})")
        sol = [r["simulated_s"]["solstice"] for r in rec if "solstice" in r["simulated_s"]]
        wall = (f"{over([x['ilp_solve_s'] for x in sb], '{:.1f}', 1.0)} / "
                f"{over([r['candidate_solves_s'] for r in rec], '{:.1f}', 1.0)} s")
        lines.append(f"| {c['system']} | {len(rec)} | {over([x['best_s'] for x in sb])} ({kept}) | {ilp} | {wall} | "
                     f"{over([cand(r) for r in rec])} | {over([r['simulated_s']['exact'] for r in rec])} | "
                     f"{over(sol) if sol else '-'} | " + " | ".join(cols) + " |")
    head = [c for c in sc if c["system"] == HEADLINE]
    if head:
        rec = head[0]["seeds"]
        seeds = [r["seed"] for r in rec]
        g, ok = _gain_over(rec, "exact", lambda r: r["static_same_budget"]["best_s"])
        gs, oks = _gain_over(rec, "solstice", lambda r: r["static_same_budget"]["best_s"])
        lines += ["", f"**Headline, {HEADLINE}:** over {len(rec)} seeds the exact schedule over single configurations "
                  f"is {Measured.over([Measured('{:+.1%}', (x,)) for x in g], seeds)} faster than a static "
                  f"configuration found with the same budget ({_faster(ok, seeds)})"
                  + (f", and with the transpose decomposed (solstice) "
                     f"{Measured.over([Measured('{:+.1%}', (x,)) for x in gs], seeds)} ({_faster(oks, seeds)})"
                     if gs else "") + "."]
    return lines + [""]


def markdown(cells: list, params: dict) -> str:
    """The result tables."""
    lines = ["# Circuits that change with the application's phases", "",
             "Generated by `python -m experiments.phased_circuits` "
             f"(time limit {params['time_limit']:g} s per schedule, seed {params['seed']}"
             + (f", the two-phase workload at seeds {', '.join(map(str, params['seeds']))}"
                if len(params.get("seeds", [])) > 1 else "") + "; "
             f"wall {params.get('wall_s', 0):.0f} s{params.get('merged', '')}). Simulated: max-min sharing, "
             "pipelined relays; schedules phase "
             "by phase, phases separated as if by barriers, set-up blackouts as the plan says "
             "(`topoplan/sim/schedule.py`). The schedulers minimize the sum of phase times (each phase simulated alone; "
             "IS: its communication-time bound) plus set-ups; zero set-up: every phase at its best candidate with "
             "no set-up. solstice / bvn: the exact programme plus, for every all-to-all-like phase, its "
             "decomposition into a sequence of configurations (sub-phases with set-ups between them, "
             "`topoplan/problems/circuits/decompose.py`); run for the all-to-all-heavy workloads only.", "",
             "## Static vs scheduled", "",
             "| system | workload | phases (kinds) | EPS only | best static | per-phase | exact | zero set-up | "
             "solstice | bvn | exact vs static | solstice vs static | exact vs zero set-up | changes | "
             "exact kept | exact bound / gap |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for c in cells:
        r = c["rows"]
        ex, st, zs = r["exact"]["simulated_s"], r["best static"]["simulated_s"], r["zero set-up"]["simulated_s"]
        so = f"{1 - r['solstice']['simulated_s'] / st:+.1%}" if "solstice" in r else "-"
        lines.append(f"| {c['system']} | {c['workload']} | {c['phases']} ({c['kinds']}) | "
                     f"{_ms(r['EPS only']['simulated_s'])} | {_ms(st)} | {_ms(r['per-phase']['simulated_s'])} | "
                     f"{_ms(ex)} | {_ms(zs)} | {_row_ms(r, 'solstice')} | {_row_ms(r, 'bvn')} | "
                     f"{1 - ex / st:+.1%} | {so} | {ex / zs - 1:+.1%} | "
                     f"{r['exact']['reconfigurations']} | {_kept(r['exact'])} | {_ms(r['exact']['objective_s'])} / "
                     f"{_ms(r['exact']['bound_s'])} ms, {100 * (r['exact']['gap'] or 0):.0f}% |")
    lines += ["", "Times in ms (simulated). `exact vs static`: 1 - exact / best static (positive: the schedule is "
              "faster). `changes`: reconfigurations of the exact schedule. `exact kept`: scored by simulation, "
              "`exact` replays its programme's schedule whole, with the per-phase schedule and the best single "
              "configuration over the same candidates, and keeps the fastest (`programme`, `per-phase`, `single`; "
              "with the programme's replay in ms where another was kept; IS is scored by the bound: `-`). The "
              "last column is the exact "
              "scheduler's objective (phase-sum plus set-ups) against its zero-set-up lower bound (the sum of "
              "per-phase lower bounds of the circuit problem: every phase at a configuration no plan beats). "
              "`-`: not run (not an all-to-all-heavy workload).", ""]
    lines += seeds_section(cells)
    dec = [c for c in cells if "solstice" in c["rows"]]
    if dec:
        lines += ["## Decomposed all-to-all phases", "",
                  "Per all-to-all-like phase class: the decomposition's slots and its switch-level estimate "
                  "(slots + set-ups + residual over the EPS), what it costs when realized on OCS nodes and priced "
                  "like a phase (its sub-phases simulated one after another, IS: their bounds, plus the set-ups "
                  "between slots), the phase's best single configuration, and whether the scheduler used it.", "",
                  "| system | workload | method | phase class | slots | circuits per slot | estimate | "
                  "decomposed | best single | used | schedule (simulated) |",
                  "|---|---|---|---:|---:|---|---:|---:|---:|---|---:|"]
        for c in dec:
            for m in ("solstice", "bvn"):
                row = c["rows"].get(m)
                if row is None:
                    continue
                if not row["options"]:
                    lines.append(f"| {c['system']} | {c['workload']} | {m} | - | no all-to-all-like phase or all "
                                 f"EPS | | | | | | {_ms(row['simulated_s'])} |")
                for k, o in row["options"].items():
                    used = "yes" if row["decomposed_phases"] else "no"
                    cps = o["circuits_per_slot"]
                    cps_s = ", ".join(map(str, cps[:6])) + (" ..." if len(cps) > 6 else "")
                    lines.append(f"| {c['system']} | {c['workload']} | {m} | {k} | {o['slots']} | {cps_s} | "
                                 f"{_ms(o['estimate_s'])} | {_ms(o['price_s'])} | {_ms(o['best_single_s'])} | "
                                 f"{used} | {_ms(row['simulated_s'])} |")
        lines += ["", "Times in ms. `estimate`: the decomposition's own model (circuits at the circuit or relay-link "
                  "rate, no node links). `decomposed` and `best single`: that phase alone, under the scheduler's "
                  "score.", ""]
    sweeps = [c for c in cells if c.get("setup_sweep")]
    if sweeps:
        lines += ["## The two-phase workload against the set-up time", "",
                  "| system | setup | exact (ms) | changes | during the set-up | gain vs best static | "
                  "vs zero set-up | per-phase (ms) | per-phase gain | solstice (ms) | solstice changes | "
                  "solstice gain | bvn (ms) | bvn gain |",
                  "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for c in sweeps:
            for row in c["setup_sweep"]:
                e, p = row["exact"], row["per-phase"]
                so, bv = row.get("solstice"), row.get("bvn")
                extra = (f"{_ms(so['simulated_s'])} | {so['reconfigurations']} | {so['gain_vs_static']:+.1%} | "
                         if so else "- | - | - | ")
                extra += f"{_ms(bv['simulated_s'])} | {bv['gain_vs_static']:+.1%} |" if bv else "- | - |"
                lines.append(f"| {c['system']} | {row['setup_ms']} ms | {_ms(e['simulated_s'])} | "
                             f"{e['reconfigurations']} | {', '.join(e['during']) or '-'} | "
                             f"{e['gain_vs_static']:+.1%} | {e['vs_zero_setup']:+.1%} | {_ms(p['simulated_s'])} | "
                             f"{p['gain_vs_static']:+.1%} | {extra}")
        lines.append("")
    return "\n".join(lines) + "\n"


SEED_ROWS = ("EPS only", "best static", "per-phase", "exact", "zero set-up", "solstice", "bvn")


def seed_record(cell: dict, seed: int, same_budget: dict) -> dict:
    """What the seed study keeps of one run of a cell: every row's simulated time, the exact schedule's
    status and kept replay, the candidate solves' wall time and the static baseline with the same budget."""
    r = cell["rows"]
    return {"seed": seed, "simulated_s": {k: r[k]["simulated_s"] for k in SEED_ROWS if k in r},
            "exact_status": r["exact"]["status"], "exact_kept": r["exact"].get("kept"),
            "exact_reconfigurations": r["exact"]["reconfigurations"],
            "candidate_solves_s": r["best static"]["solve_s"], "static_same_budget": same_budget}


def run(systems=tuple(SYSTEMS), kernels=KERNELS, npb_systems=NPB_SYSTEMS, sweep_systems=SWEEP_SYSTEMS,
        setups_ms=SETUPS_MS, *, time_limit: float = 20.0, seed: int = 0, seeds=None, out_dir: Path = RESULTS,
        log=print, two_phase: bool = True, merge: bool = False) -> list:
    """Run every cell and write ``phased_circuits.{json,md}``; returns the cells.

    The two-phase workload runs at every seed of ``seeds`` (default: ``seed`` alone; the tables show the
    first), each run with the static baseline of the same budget (:func:`static_same_budget`), all systems
    at one seed before the next seed.

    With ``merge`` the cells of the existing JSON whose (system, workload) is not rerun are kept, in the
    order of a full run.
    """
    from topoplan.core.io import atomic_write, write_json

    t0 = time.perf_counter()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    seeds = tuple(seeds) if seeds else (seed,)
    params = {"time_limit": time_limit, "seed": seeds[0], "seeds": list(seeds)}
    old = []
    if merge and (out_dir / "phased_circuits.json").exists():
        prev = json.loads((out_dir / "phased_circuits.json").read_text())
        old = prev.get("cells", [])
        params["merged"] = (f"; cells not rerun kept from the previous run (wall "
                            f"{prev.get('params', {}).get('wall_s', 0):.0f} s)")
    cells = []
    order = [(s, TWO_PHASE) for s in SYSTEMS] + [(s, k) for k in KERNELS for s in NPB_SYSTEMS]

    def save():
        params["wall_s"] = time.perf_counter() - t0
        new = {(c["system"], c["workload"]) for c in cells}
        keep = [c for c in old if (c["system"], c["workload"]) not in new]
        allc = sorted(cells + keep, key=lambda c: order.index((c["system"], c["workload"]))
                      if (c["system"], c["workload"]) in order else len(order))
        write_json(out_dir / "phased_circuits.json", {"params": params, "cells": allc})
        atomic_write(out_dir / "phased_circuits.md", markdown(allc, params))
        return allc

    if two_phase:
        trace = workload(TWO_PHASE)
        first = {}
        for system in systems:
            c = run_cell(system, TWO_PHASE, trace, time_limit=time_limit, seed=seeds[0], log=log,
                         setups_ms=setups_ms if system in sweep_systems else ())
            c["seeds"] = [seed_record(c, seeds[0], static_same_budget(system, trace, time_limit=time_limit,
                                                                      seed=seeds[0], log=log))]
            first[system] = c
            cells.append(c)
            save()
        for s in seeds[1:]:
            for system in systems:
                c = run_cell(system, TWO_PHASE, trace, time_limit=time_limit, seed=s, log=log)
                first[system]["seeds"].append(seed_record(c, s, static_same_budget(system, trace,
                                                                                   time_limit=time_limit, seed=s,
                                                                                   log=log)))
                save()
    for k in kernels:
        trace = workload(k)
        for system in npb_systems:
            if system in systems:
                cells.append(run_cell(system, k, trace, time_limit=time_limit, seed=seeds[0], log=log))
                save()
    return save()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="the two-phase workload on 003-16 and 001-128 OCS only")
    ap.add_argument("--kernels", default=",".join(KERNELS))
    ap.add_argument("--workloads", default=None, help="comma-separated: halo+transpose and/or kernels (overrides "
                    "--kernels)")
    ap.add_argument("--merge", action="store_true", help="keep the existing JSON's cells that are not rerun")
    ap.add_argument("--time-limit", type=float, default=20.0, help="seconds per schedule (shared by its ilp solves)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seeds", type=int, default=SEEDS,
                    help=f"run the two-phase workload at this many seeds, --seed and the next ones (default {SEEDS})")
    ap.add_argument("--systems", default=None, help="semicolon-separated systems to run (default every one: "
                    + "; ".join(SYSTEMS) + ")")
    ap.add_argument("--out-dir", default=str(RESULTS))
    a = ap.parse_args(argv)
    systems = tuple(SYSTEMS) if a.systems is None else tuple(x.strip() for x in a.systems.split(";") if x.strip())
    for s in systems:
        if s not in SYSTEMS:
            ap.error(f"--systems: unknown system {s!r} ({'; '.join(SYSTEMS)})")
    if a.seeds < 1 or a.seed < 0:
        ap.error(f"--seeds: at least 1 and --seed at least 0, got {a.seeds} and {a.seed}")
    seeds = tuple(range(a.seed, a.seed + a.seeds))
    kernels = tuple(k for k in a.kernels.split(",") if k)
    two_phase = True
    if a.workloads is not None:
        names = [w for w in a.workloads.split(",") if w]
        two_phase = TWO_PHASE in names
        kernels = tuple(w for w in names if w != TWO_PHASE)
    for k in kernels:
        if k not in KERNELS:
            ap.error(f"--kernels: unknown kernel {k!r} ({', '.join(KERNELS)})")
    t0 = time.perf_counter()
    if a.quick:
        cells = run(SWEEP_SYSTEMS, (), (), SWEEP_SYSTEMS, (1, 10, 100), time_limit=min(a.time_limit, 10.0),
                    seeds=seeds, out_dir=Path(a.out_dir), merge=a.merge)
    else:
        cells = run(systems, kernels=kernels, time_limit=a.time_limit, seeds=seeds, out_dir=Path(a.out_dir),
                    two_phase=two_phase, merge=a.merge)
    print(f"{len(cells)} cells -> {Path(a.out_dir) / 'phased_circuits.md'}, .json  ({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
