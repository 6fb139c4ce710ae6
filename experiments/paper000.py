"""Reproduce paper 000 (locality-aware MPI on an opto-electronic hybrid network): Figures 5-8 and Tables 2-3,
under three network models.

128 nodes under 4 EPS switches x 32 (preset ``paper000``, 000 Table 1), every
node an OCS node with one optical port; the x-axis of the paper's figures is
the number of OCS pathways (circuits) the scheme may set up. Neighbor (8x16
grid, 40 MB to each of up to four neighbours, 5 iterations) and NPB CG and MG
class C on 128 ranks. Lines as in the paper: SP (ranks sequential, Switch
Partitioning circuits, 000 §3.2, method ``sp``) and CP (METIS placement, then
the same circuits) with uplinks of 1/4, 1 and 5 times 64 Gbps (``--set
eps.up_bw=``), and EPS-only references with the same uplinks. Beside the
paper's SP circuits we run our exact circuits (``ilp``) on the same placements
(normal uplinks). Every cell is simulated under each model of
:data:`experiments._common.MODELS` (the papers' own model; max-min with
pipelined relays, our default; max-min with store-and-forward relays) with
``topoplan.sim.run.simulate_plan`` (threshold 8,192 B, 000 §4.1) and reported as the
paper's figures are: execution time relative to EPS only with 64 Gbps uplinks
under the same model. Circuit plans do not depend on the model: each is made
once and simulated under every model. Figure 6 (load on the top switch S0 and
the busiest node EPS link) comes from the same simulations, Tables 2-3 (node
pairs with large inter-switch messages) from the traffic.

    python -m experiments.paper000            # the whole grid (cached per cell)
    python -m experiments.paper000 --quick    # Neighbor, uplinks x1 and x5, 3 and 24 pathways (< 1 min)
    python -m experiments.paper000 --apps neighbor,cg --pathways 3,6,24 --models paper,pipelined

Writes ``experiments/results/paper000.csv`` (one tidy row per cell, model and
metric), ``paper000.png`` (Figures 5, 7, 8 per model, Figure 6 and Tables 2-3)
and ``paper000.md`` (the claim table under every model, the relative times per
model, Tables 2-3 and why the models and the paper differ). Simulated cells
are cached as JSON in ``experiments/results/.cache_paper000/``; a cell is
recomputed only when its parameters change (``--no-cache`` recomputes all).
"""

from __future__ import annotations

import argparse
import io
import sys
import textwrap
import time
from pathlib import Path

import numpy as np

from experiments._common import (MODELS, MODEL_NAMES, PAPER_SEED_APPS, RESULTS, add_seeds_option, add_verify_option,
                                 cached_run, claims_markdown, claims_over_seeds, Inputs, measured, model_of,
                                 paper_seed_apps_of, parse_models, rows_with_seeds, seeded_file, seeds_note, seeds_of,
                                 used_circuits, verdict, Verification, verification_of, with_seed, write_csv)

PRESET = "paper000"
THRESHOLD_B = 8192.0                      # 000 §4.1: large-message threshold
APPS = ("neighbor", "cg", "mg")           # Figures 5, 7, 8
APP_NAMES = {"neighbor": "Neighbor", "cg": "CG", "mg": "MG"}
FIGURE = {"neighbor": 5, "cg": 7, "mg": 8}
UPLINKS = {"1/4": "16Gbps", "1": "64Gbps", "5": "320Gbps"}  # U x n: n x 64 Gbps (x5 = full bisection)
PATHWAYS = (1, 2, 3, 4, 6, 8, 12, 16, 20, 24, 32, 48, 64)
ILP_PATHWAYS = (3, 6, 12, 24, 48)
SCHEMES = {"SP": "sequential", "CP": "metis"}

# The paper's statements (§4.2), each with the value the paper gives (Figures 5-8 print no numbers; these are
# the numbers of the text) and a check of whether it holds in ours (``claims``).
CLAIMS = (  # (app, claim, the paper's value)
    ("neighbor", "Fig. 5: with uplinks x1/4 the hybrid schemes keep their x1 performance (relays avoid the uplinks)",
     "U x1/4 = U x1"),
    ("neighbor", "Fig. 5: the full-bisection EPS time is reached with about 20 pathways (checked: within 2% by SP or "
                 "CP at 20 pathways or fewer)", "≈20 pathways"),
    ("neighbor", "Fig. 5: CP uses only 24 pathways, SP 48", "CP 24, SP 48"),
    ("neighbor", "Fig. 5: below 6 pathways SP is much slower than CP (its relays carry more)", "< 6 pathways"),
    ("neighbor", "Fig. 6: no load on S0 from 3 pathways on (the switches are chained by circuits)",
     "0 B from 3 pathways"),
    ("neighbor", "Fig. 6: the busiest node link carries more than with EPS only (relaying)", "node load > EPS only"),
    ("cg", "Fig. 7: with uplinks x1/4 the hybrid schemes keep their x1 performance", "U x1/4 = U x1"),
    ("cg", "Fig. 7: with enough pathways the hybrid schemes beat the full-bisection EPS", "hybrid < EPS U x5"),
    ("cg", "Fig. 7: fewer than 6 pathways cost a large overhead", "< 6 (= 4C2) pathways"),
    ("cg", "Fig. 7: no improvement beyond 48 pathways", "flat from 48 pathways"),
    ("cg", "Fig. 7: the full-bisection EPS does not improve CG", "EPS U x5 ≈ 1"),
    ("mg", "Fig. 8: the hybrid schemes take 50-110% longer than EPS only", "1.5-2.1"),
    ("mg", "Fig. 8: EPS only is almost 1 with any uplink", "≈1"),
)
ABOUT_20 = 20                             # "about 20 pathways": reached at this many or fewer
# 000 Tables 2-3: ordered node pairs (source switch, destination switch) with large messages.
PAPER_TABLE2_CG = np.array([[132, 8, 8, 8], [8, 132, 8, 8], [8, 8, 132, 8], [8, 8, 8, 132]])
PAPER_TABLE3_MG = {
    "metis": np.array([[144, 16, 0, 32], [16, 144, 32, 0], [0, 32, 144, 16], [32, 0, 16, 144]]),
    "sequential": np.array([[160, 16, 0, 16], [16, 160, 16, 0], [0, 16, 160, 16], [16, 0, 16, 160]]),
}

METRICS = ("rel_time", "makespan_s", "top_switch_B", "max_node_link_B", "ocs_bytes", "uplink_bytes",
           "circuits_set", "circuits_used", "bound_s")
CELL_KEYS = ("model", "app", "scheme", "placement", "uplink", "network", "pathways", "circuits")
COLUMNS = ("table", "seed") + CELL_KEYS + ("iters", "metric", "ours", "paper", "paper_source", "status")


# -- the grid ---------------------------------------------------------------

def cells(apps=APPS, uplinks=tuple(UPLINKS), pathways=PATHWAYS, ilp_pathways=ILP_PATHWAYS,
          quick: bool = False, models=MODELS) -> list[dict]:
    """The configurations: per model and application the EPS-only references (sequential, every uplink; CP
    at x1), SP and CP with ``sp`` circuits for every uplink and pathway count, and our ``ilp`` circuits on
    both placements with normal uplinks."""
    out = []
    for model in models:
        for app in apps:
            def add(scheme, network, placement, up, n=0, circuits="none"):
                out.append({"model": model, "app": app, "scheme": scheme, "network": network,
                            "placement": placement, "uplink": up, "pathways": n, "circuits": circuits})

            for up in uplinks:
                add("EPS", "eps", "sequential", up)
            add("EPS", "eps", "metis", "1")
            for scheme, pl in SCHEMES.items():
                for up in uplinks:
                    for n in pathways:
                        add(scheme, "hybrid", pl, up, n, "sp")
                for n in ilp_pathways:
                    add(scheme, "hybrid", pl, "1", n, "ilp")
    if quick:
        out = [c for c in out if c["uplink"] in ("1", "5")]
    return out


def traffic_spec(app: str, iters: int, npb_iters: int) -> str:
    """000 §4.1: Neighbor = 8x16 grid, 40 MB to each of up to 4 neighbours; NPB class C on 128 ranks."""
    if app == "neighbor":
        return f"neighbor2d:rows=8,cols=16,bytes=40MB,iters={iters}"
    return f"npb:kernel={app},class=C,np=128,iters={npb_iters}"


def topology_of(network: str, uplink: str = "1"):
    """The ``paper000`` preset with the uplink variant (and EPS only) as ``--set`` overrides."""
    from topoplan.core.topology_io import load_topology

    sets = [f"eps.up_bw={UPLINKS[uplink]}"]
    if network == "eps":
        sets += ["kind=tree", "ocs=null"]
    return load_topology(PRESET, sets)


# -- running one cell -------------------------------------------------------

def placement_of(inputs: Inputs, kind: str):
    """SP: ranks sequentially from left to right (000 Fig. 4); CP: METIS over the switches, then the nodes
    (000 §4.1). Uplinks do not change either, so both are computed once on the normal hybrid."""
    from topoplan.core.placement import sequential

    topo = topology_of("hybrid")
    if kind == "sequential":
        return sequential(inputs.traffic()[1].n_ranks, topo)
    return inputs.placement(topo, kind)


_PLANS: dict = {}


def plan_of(cell: dict, inputs: Inputs, params: dict):
    """The cell's circuit plan (None on EPS only): made once per (application, placement, uplink, pathways,
    method) and shared by the models, which only change how the plan is simulated."""
    from topoplan.problems.circuits import CircuitProblem, solve

    if cell["network"] != "hybrid":
        return None, {}
    key = (inputs.spec, cell["placement"], cell["uplink"], cell["pathways"], cell["circuits"],
           params["ilp_time_limit"], params["seed"])
    if key not in _PLANS:
        topo = topology_of("hybrid", cell["uplink"])
        prob = CircuitProblem.build(topo, inputs.traffic()[1], placement_of(inputs, cell["placement"]),
                                    threshold_B=THRESHOLD_B, max_circuits=cell["pathways"])
        res = solve(prob, cell["circuits"], time_limit=params["ilp_time_limit"] if cell["circuits"] == "ilp" else None,
                    seed=params["seed"])
        plan = res.to_dict()
        _PLANS[key] = (plan, {"status": res.status, "bound_s": res.objective, "solve_s": res.wall_s,
                              "circuits_set": len(plan["circuits"]), "circuits_used": used_circuits(prob, plan)})
    return _PLANS[key]


def run_cell(cell: dict, inputs: Inputs, params: dict) -> dict:
    """Plan at most ``pathways`` circuits (hybrid cells) and simulate one cell under its model."""
    from topoplan.sim.run import simulate_plan

    trace, _ = inputs.traffic()
    topo = topology_of(cell["network"], cell["uplink"])
    plan, info = plan_of(cell, inputs, params)
    out = {"status": "", "bound_s": None, "circuits_set": 0, "circuits_used": 0, "solve_s": 0.0, **info}
    r = simulate_plan(topo, trace, plan, placement=placement_of(inputs, cell["placement"]),
                      threshold_B=THRESHOLD_B if plan else None, model=model_of(cell["model"], params["seed"]))
    by = r["bytes_by_link_class"]
    out.update(makespan_s=r["makespan_s"], top_switch_B=r["top_switch_bytes"], max_node_link_B=r["max_node_link_bytes"],
               ocs_bytes=by.get("ocs", 0.0), uplink_bytes=by.get("uplink-up", 0.0), sim_wall_s=r["wall_s"],
               sim_model=r["sim_model"])
    return out


def _cache_file(cache: Path, cell: dict) -> Path:
    up = cell["uplink"].replace("/", "-")
    return cache / (f"{cell['model']}_{cell['app']}_{cell['scheme']}_{cell['placement']}_u{up}_{cell['pathways']}_"
                    f"{cell['circuits']}.json")


def cached_cell(cell: dict, inputs: Inputs, cache: Path | None, params: dict, log=print,
                verify: Verification | None = None) -> dict:
    """:func:`run_cell` through the per-cell JSON cache (keyed by the cell, its model and every parameter,
    the seed included; a seed other than 0 has its own file)."""
    key = {**cell, **params, "spec": inputs.spec, "threshold_B": THRESHOLD_B,
           "sim_model": model_of(cell["model"], params["seed"]).to_dict()}
    what = (f"{cell['model']:17s} {cell['app']:8s} {cell['scheme']:3s} U x{cell['uplink']:3s} "
            f"{cell['pathways']:3d} pathways {cell['circuits']:4s}"
            + (f" seed {params['seed']}" if params["seed"] else ""))
    return cached_run(key, seeded_file(_cache_file(cache, cell), params["seed"]) if cache is not None else None,
                      lambda: run_cell(cell, inputs, params), log=log, describe=what, verify=verify)


def seed_dependent(cell: dict) -> bool:
    """Whether a cell's result can change with the seed: the paper model's order of simultaneous arrivals,
    METIS placement (CP) and the ilp (solver seed). Sequential ranks with SP's circuits or none, under
    max-min, use none."""
    return cell["model"] == "paper" or cell["placement"] == "metis" or cell["circuits"] == "ilp"


def baseline_of(cell: dict) -> dict:
    """The cell a relative time is relative to: EPS only, 64 Gbps uplinks, sequential ranks, same model."""
    return {"model": cell["model"], "app": cell["app"], "network": "eps", "uplink": "1", "placement": "sequential"}


# -- Tables 2 and 3 -----------------------------------------------------------

def pair_matrix(topo, traffic, placement, threshold_B: float = THRESHOLD_B) -> np.ndarray:
    """Ordered node pairs with large messages (>= threshold) by (source switch, destination switch): the
    quantity of 000 Tables 2-3 (the diagonal counts pairs under the same switch)."""
    big = traffic.msg_bytes >= threshold_B
    keep = big & (traffic.src != traffic.dst)
    node = np.asarray(placement.rank_to_node)
    a, b = node[traffic.src[keep]], node[traffic.dst[keep]]
    pairs = np.unique(a.astype(np.int64) * topo.n_nodes + b)
    sw = np.asarray(topo.node_switch())
    k = topo.n_switches
    m = np.zeros((k, k), dtype=np.int64)
    np.add.at(m, (sw[pairs // topo.n_nodes], sw[pairs % topo.n_nodes]), 1)
    return m


def tables(apps, inputs: dict) -> list[dict]:
    """Tables 2 (CG) and 3 (MG, CP and SP) for ours, one row per matrix entry (no model: traffic only);
    Neighbor's as extra info."""
    topo = topology_of("hybrid")
    rows = []
    for app in apps:
        for pl in ("sequential", "metis"):
            m = pair_matrix(topo, inputs[app].traffic()[1], placement_of(inputs[app], pl))
            paper = PAPER_TABLE2_CG if app == "cg" else PAPER_TABLE3_MG.get(pl) if app == "mg" else None
            name = {"cg": "table2", "mg": "table3"}.get(app, "pairs")
            for i in range(m.shape[0]):
                for j in range(m.shape[1]):
                    rows.append({"table": name, "model": "", "app": app, "scheme": "SP" if pl == "sequential" else "CP",
                                 "placement": pl, "uplink": "", "network": "hybrid", "pathways": 0,
                                 "circuits": "none", "iters": "", "metric": f"pairs_S{i + 1}_S{j + 1}",
                                 "ours": int(m[i, j]), "paper": None if paper is None else int(paper[i, j]),
                                 "paper_source": "" if paper is None else f"Table {name[-1]}", "status": ""})
    return rows


def matrix_of(rows, app: str, placement: str) -> np.ndarray | None:
    g = [r for r in rows if r["app"] == app and r["placement"] == placement and r["metric"].startswith("pairs_")]
    if not g:
        return None
    k = int(round(len(g) ** 0.5))
    m = np.zeros((k, k), dtype=np.int64)
    for r in g:
        i, j = (int(x[1:]) - 1 for x in r["metric"].split("_")[1:])
        m[i, j] = int(r["ours"])
    return m


# -- the experiment ---------------------------------------------------------

def run(apps=APPS, uplinks=tuple(UPLINKS), pathways=PATHWAYS, ilp_pathways=ILP_PATHWAYS, *, quick=False, iters=5,
        npb_iters=1, ilp_time_limit=10.0, seed=0, seeds=None, paper_seed_apps=PAPER_SEED_APPS, models=MODELS,
        out_dir: Path = RESULTS,
        cache: Path | None = None, log=print, verify: Verification | None = None) -> list[dict]:
    """Run the grid at ``seed`` and the claims' cells at every further seed of ``seeds`` (default: ``seed``
    alone), and write ``paper000.{csv,png,md}`` into ``out_dir``; returns the tidy rows of every seed.

    With ``verify`` every cell is recomputed and compared with the cache, and nothing is written."""
    from topoplan.core.io import atomic_write

    seeds = tuple(seeds) if seeds else (seed,)
    params = {"iters": iters, "npb_iters": npb_iters, "ilp_time_limit": ilp_time_limit, "seed": seeds[0]}
    out_dir = Path(out_dir)
    if verify is None:
        out_dir.mkdir(parents=True, exist_ok=True)
        if cache is not None:
            Path(cache).mkdir(parents=True, exist_ok=True)

    def write(rows, by_seed, not_run=""):
        if verify is None:
            write_csv(rows, out_dir / "paper000.csv", COLUMNS)
            plot([r for r in rows if r["seed"] == seeds[0]], out_dir / "paper000.png", by_seed)
            atomic_write(out_dir / "paper000.md", markdown(rows, by_seed, not_run))

    results, inputs = [], {}
    rows = []
    for app in apps:
        inputs[app] = Inputs(traffic_spec(app, iters, npb_iters), seeds[0])
        for cell in cells((app,), uplinks, pathways, ilp_pathways, quick, models):
            res = cached_cell(cell, inputs[app], cache, params, log, verify)
            results.append((cell, res, iters if app == "neighbor" else npb_iters))
        # written after every application so a long run leaves usable results behind (the claims at the first seed)
        rows = with_seed(tidy(results) + tables(list(inputs), inputs), seeds[0])
        write(rows, {seeds[0]: rows})

    def at_seed(cell, s):
        return cached_cell(cell, inputs[cell["app"]].at_seed(s), cache, {**params, "seed": s}, log, verify)

    return rows_with_seeds(rows, results, seeds, at_seed=at_seed, tidy=tidy, claims_fn=claims, models=models,
                           cell_keys=CELL_KEYS, seed_dependent=seed_dependent, baseline_of=baseline_of,
                           paper_seed_apps=paper_seed_apps, apps=apps, app_names=APP_NAMES, write=write, log=log)


def tidy(results) -> list[dict]:
    """One row per (cell, metric); ``rel_time`` = T / T(EPS only, 64 Gbps uplinks, sequential ranks, same model)."""
    base = {(c["model"], c["app"]): r["makespan_s"] for c, r, _ in results
            if all(c[k] == v for k, v in baseline_of(c).items())}
    rows = []
    for c, r, it in results:
        b = base.get((c["model"], c["app"]))
        vals = {"rel_time": r["makespan_s"] / b if b else None, **{m: r.get(m) for m in METRICS[1:]}}
        for m in METRICS:
            if vals[m] is None:
                continue
            rows.append({"table": f"fig{FIGURE[c['app']]}",
                         **{k: c[k] for k in ("model", "app", "scheme", "placement", "uplink", "network", "pathways",
                                              "circuits")},
                         "iters": it, "metric": m, "ours": vals[m], "paper": None, "paper_source": "",
                         "status": r.get("status", "")})
    return rows


def _get(rows, metric="rel_time", **match):
    for r in rows:
        if r["metric"] == metric and all(r[k] == v for k, v in match.items()):
            return r
    return None


def _v(rows, metric="rel_time", **match):
    r = _get(rows, metric, **match)
    return None if r is None else float(r["ours"])


# -- the paper's claims, checked ----------------------------------------------

def check_claim(rows, app: str, claim: str):
    """One claim of :data:`CLAIMS` on the rows of one model: ``(holds, our value)``; ``(None, "")`` when the
    cells it needs were not run."""
    def sp(scheme, n, up="1", circuits="sp", metric="rel_time"):
        return _v(rows, metric, app=app, scheme=scheme, pathways=n, uplink=up, circuits=circuits)

    def eps(up, metric="rel_time"):
        return _v(rows, metric, app=app, scheme="EPS", uplink=up, placement="sequential")

    ns = sorted({r["pathways"] for r in rows if r["app"] == app and r["metric"] == "rel_time" and r["pathways"]})
    if not ns:
        return None, ""
    if "with uplinks x1/4" in claim:
        n = max(ns)
        q = [sp(s, n, "1/4") for s in SCHEMES]
        o = [sp(s, n, "1") for s in SCHEMES]
        if None in q + o:
            return None, ""
        return (all(a <= 1.05 * b for a, b in zip(q, o)),
                measured("at {} pathways SP {:.3f} vs {:.3f}, CP {:.3f} vs {:.3f} (x1/4 vs x1)", n, q[0], o[0], q[1],
                         o[1]))
    if "full-bisection EPS time is reached" in claim:
        fb = eps("5")
        if fb is None:
            return None, ""
        vals = {s: [(n, sp(s, n)) for n in ns] for s in SCHEMES}   # every value read: the claim's cells
        hit = {s: next((n for n, v in vals[s] if v is not None and v <= 1.02 * fb), None) for s in SCHEMES}
        best = {s: min(v for _, v in vals[s] if v is not None) for s in SCHEMES}
        parts = [("{} at {}", (s, hit[s])) if hit[s] else ("{} never (best {:.3f})", (s, best[s])) for s in SCHEMES]
        return (any(h is not None and h <= ABOUT_20 for h in hit.values()),
                measured("EPS x5 = {:.3f}; reached by " + ", ".join(t for t, _ in parts), fb,
                         *(v for _, vs in parts for v in vs)))
    if "CP uses only 24" in claim:
        n = max(ns)
        u = {s: sp(s, n, metric="circuits_used") for s in SCHEMES}
        if n < 48 or None in u.values():  # SP's 48 circuits need at least 48 pathways
            return None, ""
        return (u["SP"] == 48 and abs(u["CP"] - 24) <= 1,
                measured("circuits carrying traffic at {} pathways: SP {:.0f}, CP {:.0f}", n, u["SP"], u["CP"]))
    if "below 6 pathways SP is much slower" in claim:
        pairs = [(n, sp("SP", n), sp("CP", n)) for n in ns if n < 6]
        pairs = [p for p in pairs if None not in p]
        if not pairs:
            return None, ""
        return (all(a > 1.2 * b for _, a, b in pairs),
                measured("SP/CP at " + ", ".join(f"{n}: {{:.2f}}/{{:.2f}}" for n, _, _ in pairs),
                         *(v for _, a, b in pairs for v in (a, b))))
    if "no load on S0" in claim:
        vals = {s: [v for v in (sp(s, n, metric="top_switch_B") for n in ns if n >= 3) if v is not None]
                for s in SCHEMES}
        if not any(vals.values()):
            return None, ""
        zero = [s for s, v in vals.items() if v and max(v) == 0]
        shown = [(s, max(v) / 1e6) for s, v in vals.items() if v]
        text = "S0 bytes from 3 pathways: " + ", ".join(f"{s} max {{:,.0f}} MB" for s, _ in shown)
        ok = len(zero) == len(vals)
        return ok, measured(text if ok or not zero else f"{' and '.join(zero)} only: {text}", *(v for _, v in shown))
    if "busiest node link" in claim:
        e = eps("1", "max_node_link_B")
        h = {s: sp(s, min(ns), metric="max_node_link_B") for s in SCHEMES}
        if e is None or None in h.values():
            return None, ""
        return (all(v > e for v in h.values()),
                measured("EPS only {:,.0f} MB; at {} pathway(s) SP {:,.0f} MB, CP {:,.0f} MB", e / 1e6, min(ns),
                         h["SP"] / 1e6, h["CP"] / 1e6))
    if "beat the full-bisection" in claim:
        fb = eps("5")
        if fb is None:
            return None, ""
        best = {s: min((sp(s, n) or 9e9) for n in ns) for s in SCHEMES}
        ok = all(v < 0.99 * fb for v in best.values())
        equal = not ok and all(v <= 1.01 * fb for v in best.values())
        return ok, measured(("equal: " if equal else "") + "EPS x5 {:.3f}; best SP {:.3f}, CP {:.3f}", fb, best["SP"],
                            best["CP"])
    if "fewer than 6 pathways cost" in claim:
        small = [v for v in (sp("SP", n) for n in ns if n < 6) if v is not None]
        if not small:
            return None, ""
        return max(small) > 1.5, measured("SP worst below 6 pathways {:.2f} (EPS only = 1)", max(small))
    if "no improvement beyond 48" in claim:
        if 48 not in ns or max(ns) <= 48:
            return None, ""
        a, b = sp("SP", 48), sp("SP", max(ns))
        return abs(a - b) <= 0.02 * a, measured("SP at 48: {:.3f}, at {}: {:.3f}", a, max(ns), b)
    if "full-bisection EPS does not improve" in claim:
        fb = eps("5")
        return (None, "") if fb is None else (fb > 0.95, measured("EPS x5 {:.3f}", fb))
    if "50-110% longer" in claim:
        v = [x for x in (sp(s, n) for s in SCHEMES for n in ns if n >= 6) if x is not None]
        if not v:
            return None, ""
        return min(v) >= 1.4 and max(v) <= 2.2, measured("SP/CP from 6 pathways on: {:.2f} to {:.2f}", min(v), max(v))
    if "EPS only is almost 1" in claim:
        v = [(u, eps(u)) for u in UPLINKS if eps(u) is not None]
        if len(v) < 2:
            return None, ""
        return (max(x for _, x in v) <= 1.1 and min(x for _, x in v) >= 0.9,
                measured("EPS " + ", ".join(f"x{u} {{:.3f}}" for u, _ in v), *(x for _, x in v)))
    raise ValueError(f"no check for claim {claim!r}")


def claims(rows, models) -> list[dict]:
    """Every claim of :data:`CLAIMS` whose application was run, checked under every model:
    ``{"claim", "paper", "by_model": {model: (holds, our value)}}``."""
    out = []
    for app, claim, paper in CLAIMS:
        if not any(r["app"] == app and r["metric"] == "rel_time" for r in rows):
            continue
        by = {m: _checked(claim, [r for r in rows if r["model"] == m], app) for m in models}
        out.append({"claim": claim, "paper": paper, "by_model": by})
    return out


def _checked(claim, rows, app):
    """:func:`check_claim`, ``(None, "")`` when a cell it needs was not run (TypeError: not-run values)."""
    try:
        return check_claim(rows, app, claim)
    except TypeError:
        return None, ""


def _models(rows):
    return [m for m in MODELS if any(r["model"] == m for r in rows)]


# -- figure and tables ----------------------------------------------------------

LINE_STYLE = {"1/4": ("tab:red", ":"), "1": ("k", "-"), "5": ("tab:blue", "--")}
MODEL_STYLE = {"paper": "-", "pipelined": "--", "store-and-forward": ":"}
PAPER_COLOR = "tab:orange"


def _xpos(xs, n):
    """Position of ``n`` pathways on the categorical axis of ``xs`` (interpolated between ticks)."""
    return float(np.interp(n, xs, range(len(xs))))


def plot(rows, path: Path, rows_by_seed: dict | None = None) -> None:
    """Figures 5, 7, 8 (relative execution time vs OCS pathways), one row of panels per model: SP and CP per
    uplink, EPS references as flat bands, our ilp circuits as markers, the paper's stated values in orange;
    then Figure 6 (S0 and node loads for Neighbor), the claims per model, and Tables 2-3 as heat maps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    from topoplan.core.io import atomic_write

    apps = [a for a in APPS if any(r["app"] == a and r["metric"] == "rel_time" for r in rows)]
    models = _models(rows)
    nrows = len(models) + 2
    fig, axes = plt.subplots(nrows, 3, figsize=(14, 3.9 * nrows), squeeze=False)
    handles: dict = {}
    for i, model in enumerate(models):
        for j, app in enumerate(apps):
            ax = axes[i][j]
            g = [r for r in rows if r["metric"] == "rel_time" and r["app"] == app and r["model"] == model]
            xs = sorted({r["pathways"] for r in g if r["pathways"]})
            pos = {n: k for k, n in enumerate(xs)}
            for scheme, marker in (("SP", "o"), ("CP", "s")):
                for up, (color, ls) in LINE_STYLE.items():
                    pts = sorted((r["pathways"], r["ours"]) for r in g if r["scheme"] == scheme
                                 and r["uplink"] == up and r["circuits"] == "sp")
                    if pts:
                        ax.plot([pos[n] for n, _ in pts], [v for _, v in pts], color=color, ls=ls, marker=marker,
                                ms=4, mfc="w" if scheme == "SP" else color, label=f"{scheme} U x{up}")
                pts = sorted((r["pathways"], r["ours"]) for r in g if r["scheme"] == scheme and r["circuits"] == "ilp")
                if pts:
                    ax.plot([pos[n] for n, _ in pts], [v for _, v in pts], ls="",
                            marker="^" if scheme == "SP" else "v", ms=7, color="tab:green",
                            mfc="w" if scheme == "SP" else "tab:green", label=f"{scheme} U x1, ilp circuits")
            for up, (color, ls) in LINE_STYLE.items():
                e = _get(g, "rel_time", scheme="EPS", uplink=up, placement="sequential")
                if e is not None:
                    ax.axhline(e["ours"], color=color, ls=ls, lw=2.2, alpha=0.35, label=f"EPS only U x{up}")
            # the paper's stated values (000 §4.2; the figures print no numbers)
            if xs and app == "neighbor":
                ax.axvline(_xpos(xs, 20), color=PAPER_COLOR, lw=1.2, ls="-.",
                           label="paper: EPS U x5 reached at ≈20 pathways (Fig. 5)")
            if xs and app == "cg" and 48 in xs:
                ax.axvspan(pos[48] - 0.15, len(xs) - 0.85, color=PAPER_COLOR, alpha=0.12, lw=0,
                           label="paper: no gain beyond 48 pathways (Fig. 7)")
            if xs and app == "mg":
                ax.axhspan(1.5, 2.1, xmin=_xpos(xs, 6) / max(len(xs) - 1, 1) * 0.96 + 0.02, color=PAPER_COLOR,
                           alpha=0.18, lw=0, label="paper: hybrid 1.5-2.1, EPS only ≈1 (Fig. 8)")
            ax.set_yscale("log")
            ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
            ax.yaxis.set_minor_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
            ax.tick_params(axis="y", which="minor", labelsize=6)
            ax.set_xticks(range(len(xs)), [str(n) for n in xs], fontsize=7)
            ax.set_xlabel("Number of OCS pathways")
            ax.set_ylabel("Relative execution time")
            ax.set_title(f"Fig. {FIGURE[app]} {APP_NAMES[app]} (vs EPS only U x1), {MODEL_NAMES[model]}", fontsize=9)
            ax.grid(alpha=0.3, which="both")
            for h, lab in zip(*ax.get_legend_handles_labels()):
                handles.setdefault(lab, h)
        for j in range(len(apps), 3):
            axes[i][j].axis("off")
    # Figure 6: loads for Neighbor (S0 left, busiest node link right); link bytes do not depend on the model
    # (routes and sizes fix them), so one line per scheme unless the models disagree
    r6 = len(models)
    app = "neighbor" if "neighbor" in apps else (apps[0] if apps else None)
    fig6_handles: dict = {}
    for k, (metric, title) in enumerate((("top_switch_B", "Fig. 6 load on S0"),
                                         ("max_node_link_B", "Fig. 6 load on the busiest node link"))):
        ax = axes[r6][k]
        g = [r for r in rows if r["metric"] == metric and r["app"] == app and r["uplink"] == "1"]
        xs = sorted({r["pathways"] for r in g if r["pathways"]})
        pos = {n: i for i, n in enumerate(xs)}
        for scheme, color in (("SP", "tab:red"), ("CP", "tab:blue")):
            per = {m: sorted((r["pathways"], r["ours"]) for r in g if r["model"] == m and r["scheme"] == scheme
                             and r["circuits"] == "sp") for m in models}
            same = len({tuple(v) for v in per.values()}) == 1
            for m in (models[:1] if same else models):
                pts = per[m]
                if pts:
                    ax.plot([pos[n] for n, _ in pts], [v / 1e9 for _, v in pts], marker="o", ms=4, color=color,
                            ls=MODEL_STYLE[m], label=scheme + ("" if same else f", {MODEL_NAMES[m]}"))
        e = _get(g, metric, scheme="EPS", placement="sequential")
        if e is not None:
            ax.axhline(e["ours"] / 1e9, color="k", ls="--", label="EPS only")
        if metric == "top_switch_B" and xs:
            ax.axvspan(_xpos(xs, 3) - 0.1, len(xs) - 0.9, color=PAPER_COLOR, alpha=0.12, lw=0,
                       label="paper: no load from 3 pathways")
        ax.set_xticks(range(len(xs)), [str(n) for n in xs], fontsize=7)
        ax.set_xlabel("Number of OCS pathways")
        ax.set_ylabel("GB")
        ax.set_ylim(bottom=0, top=max([r["ours"] / 1e9 for r in g] + [1e-9]) * 1.08)
        ax.set_title(f"{title} ({APP_NAMES.get(app, '')}, U x1; bytes: every model)", fontsize=9)
        ax.grid(alpha=0.3)
        for h, lab in zip(*ax.get_legend_handles_labels()):
            fig6_handles.setdefault(lab, h)
    ax = axes[r6][2]
    ax.axis("off")
    short = {"paper": "paper", "pipelined": "pipe", "store-and-forward": "s&f"}
    over = claims_over_seeds(claims, rows_by_seed or {0: rows}, models)
    n = len(over[0]["seeds"]) if over else 1
    txt = "\n".join(textwrap.fill(" ".join(f"{_short_verdict([ok for ok, _ in c['by_model'][m]]):3s}" for m in models)
                                  + "  " + c["claim"], 66, subsequent_indent=" " * (4 * len(models) + 2))
                    for c in over)
    ax.text(0, 1, "The paper's claims, holds under " + " / ".join(short[m] for m in models)
            + (f" (at k of {n} seeds)" if n > 1 else "") + ":\n" + txt,
            va="top", fontsize=6.4, family="monospace", transform=ax.transAxes)
    # Figure 6's legend under the claims, outside the two panels (inside, it covered their lines or the paper's band)
    if fig6_handles:
        ax.legend(list(fig6_handles.values()), list(fig6_handles), loc="lower left", bbox_to_anchor=(0, -0.1),
                  fontsize=7, ncol=4, columnspacing=1.0, handlelength=1.8, title="Fig. 6 (the two panels on the left)",
                  title_fontsize=7, alignment="left", frameon=False)
    # Tables 2-3: ours with the paper's in brackets
    panels = [("cg", "sequential", PAPER_TABLE2_CG, "Table 2: CG pairs (SP)"),
              ("mg", "metis", PAPER_TABLE3_MG["metis"], "Table 3: MG pairs, CP"),
              ("mg", "sequential", PAPER_TABLE3_MG["sequential"], "Table 3: MG pairs, SP")]
    for k, (app, pl, paper, title) in enumerate(panels):
        ax = axes[r6 + 1][k]
        m = matrix_of(rows, app, pl)
        if m is None:
            ax.axis("off")
            continue
        ax.imshow(m, cmap="Greys", vmin=0, vmax=max(int(m.max()), 1) * 2.5)
        for i in range(m.shape[0]):
            for jj in range(m.shape[1]):
                ax.text(jj, i, f"{m[i, jj]}\n({paper[i, jj]})", ha="center", va="center", fontsize=8)
        names = [f"S{i + 1}" for i in range(m.shape[0])]
        ax.set_xticks(range(len(names)), names)
        ax.set_yticks(range(len(names)), names)
        ax.set_title(title + ", ours (paper)", fontsize=9)
    fig.legend(list(handles.values()), list(handles), loc="upper center", ncol=5, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.75 / (3.9 * nrows)))
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    atomic_write(path, buf.getvalue(), binary=True)


def rel_table(rows, model) -> list[str]:
    """Relative times under one model (U x1 baseline of the same model), with the SP/CP plans' bound rows."""
    rows = [r for r in rows if r["model"] == model]
    apps = [a for a in APPS if any(r["app"] == a and r["metric"] == "rel_time" for r in rows)]
    ns = sorted({r["pathways"] for r in rows if r["metric"] == "rel_time" and r["pathways"]})
    out = ["| app | line | " + " | ".join(f"{n}" for n in ns) + " | EPS only |", "|---|---|" + "---|" * (len(ns) + 1)]
    for app in apps:
        base = _v(rows, "makespan_s", app=app, scheme="EPS", uplink="1", placement="sequential")
        for scheme in SCHEMES:
            for up, circ in (("1/4", "sp"), ("1", "sp"), ("5", "sp"), ("1", "ilp")):
                vals = [_v(rows, app=app, scheme=scheme, pathways=n, uplink=up, circuits=circ) for n in ns]
                if all(v is None for v in vals):
                    continue
                e = _v(rows, app=app, scheme="EPS", uplink=up,
                       placement="sequential" if scheme == "SP" else "metis") if circ == "sp" else None
                name = f"{scheme} U x{up}" + (", ilp" if circ == "ilp" else "")
                out.append(f"| {APP_NAMES[app]} | {name} | " + " | ".join("" if v is None else f"{v:.2f}" for v in vals)
                           + f" | {'' if e is None else f'{e:.2f}'} |")
                if (up, circ) == ("1", "sp"):  # the busiest-link lower bound of the same plans, same scale
                    bs = [_v(rows, "bound_s", app=app, scheme=scheme, pathways=n, uplink="1", circuits="sp")
                          for n in ns]
                    if base and any(b is not None for b in bs):
                        out.append(f"| {APP_NAMES[app]} | {scheme} U x1, bound | "
                                   + " | ".join("" if b is None else f"{b / base:.2f}" for b in bs) + " | |")
    return out


def _short_verdict(oks) -> str:
    """yes / no / k/n (held at k of the n seeds it was run at) / n/a, for the figure's claim list.

    Examples
    --------
    >>> [_short_verdict(oks) for oks in ([True, True], [False, None], [True, False, None], [None])]
    ['yes', 'no', '1/2', 'n/a']
    """
    seen = [bool(ok) for ok in oks if ok is not None]
    if not seen:
        return "n/a"
    k = sum(seen)
    return "yes" if k == len(seen) else "no" if k == 0 else f"{k}/{len(seen)}"


def markdown(rows, rows_by_seed: dict | None = None, not_run: str = "") -> str:
    """The claim table under every model, the relative times per model, Tables 2-3 ours vs the paper's, and
    why the models and the paper differ."""
    seeds = sorted(rows_by_seed) if rows_by_seed else [min((r.get("seed", 0) for r in rows), default=0)]
    rows = [r for r in rows if r.get("seed", seeds[0]) == seeds[0]]
    rows_by_seed = rows_by_seed or {seeds[0]: rows}
    models = _models(rows)
    out = ["Each statement of 000 §4.2 (its figures print no numbers; the paper column gives the value its text "
           "states) checked under the three network models (`experiments/_common.py`): the paper's own model, "
           "max-min with pipelined relays (our default) and max-min with store-and-forward relays. Our values in "
           "brackets; relative times are T / T(EPS only, U x1, sequential ranks) under the same model.", "",
           seeds_note(seeds, "METIS placement (CP) and the ilp solver; SP's circuits and sequential ranks are "
                             "deterministic", not_run), "",
           claims_markdown(claims_over_seeds(claims, rows_by_seed, models), models)]
    for m in models:
        out += [f"Relative execution time, {MODEL_NAMES[m]}, seed {seeds[0]} (000 Figures 5, 7, 8; lower is better; "
                "x-axis: OCS pathways). SP = sequential ranks + Switch Partitioning circuits; CP = METIS placement + "
                "the same circuits; ilp = our exact circuits on the same placement; U x n = uplinks of n x 64 Gbps; bound = "
                "the busiest-link lower bound of the SP/CP plan (bytes / bandwidth, relayed bytes charged to the "
                "relay's links) over this model's EPS-only time: no model that respects link capacities runs that "
                "plan faster.", ""] + rel_table(rows, m) + [""]
    out += ["Tables 2-3: ordered node pairs with large (>= 8,192 B) messages by source and destination switch, "
            "ours (paper); traffic only, the same under every model:", ""]
    for app, pl, paper, title in (("cg", "sequential", PAPER_TABLE2_CG, "Table 2, CG"),
                                  ("mg", "metis", PAPER_TABLE3_MG["metis"], "Table 3, MG with CP"),
                                  ("mg", "sequential", PAPER_TABLE3_MG["sequential"], "Table 3, MG with SP")):
        mat = matrix_of(rows, app, pl)
        if mat is None:
            continue
        out += [f"{title}:", "", "| | " + " | ".join(f"S{i + 1}" for i in range(mat.shape[0])) + " |",
                "|---|" + "---|" * mat.shape[0]]
        out += [f"| S{i + 1} | " + " | ".join(f"{mat[i, j]} ({paper[i, j]})" for j in range(mat.shape[1])) + " |"
                for i in range(mat.shape[0])]
        out.append("")
    out.append(WHY)
    return "\n".join(out)


WHY = """Why the models differ, and where ours differs from the paper:

- *EPS only, the reference.* Max-min pipelines packets through the switches, so EPS only runs at the uplink
  bound (Neighbor: 5 x 32 x 40 MB over a middle switch's 64 Gbps uplink = 0.80 s). The paper model stores and
  forwards whole messages at every switch and postpones a message while its link is busy: a 40 MB message
  crosses node link, uplink, downlink and node link one after the other (32 + 5 + 5 + 32 ms), the uplink
  idles until the first messages have crossed their node links, and each iteration's waitall drains the
  pipeline. Its EPS only takes 1.13 s for Neighbor, 45 ms for CG and 14.5 ms for MG against 0.80 s, 25 ms and
  10.1 ms under max-min. Every relative time is against the same model's EPS only, so the paper model's
  ratios are smaller for the same absolute time (Neighbor SP with 3 pathways: 2.86 s vs 2.72 s pipelined,
  2.52 vs 3.40 relative).
- *Relays.* Max-min with store-and-forward relays (the papers' rule inside a flow model): a relay receives
  all messages routed through it at once, sharing its 10 Gbps link fairly, so they all finish together and
  only then are forwarded; receiving never overlaps forwarding. SP with 1-4 pathways (one relay pair carries a
  whole switch boundary) takes 7.23 x EPS only where the relay links' bound is 3.40. The paper model's FIFO
  links serve one message at a time, so a relay forwards the first message while it receives the next
  (overlap at message granularity: 2.52, bound 2.40 on its scale); pipelined relays overlap at 64 KiB
  granularity and run at the bound (3.40). The same holds for CG and MG at few pathways (CG SP 3 pathways:
  9.64 store-and-forward, 3.52 pipelined, 2.68 paper model).
- *Many pathways.* With 24 SP pathways half of Neighbor's inter-switch pairs still go through a relay.
  Pipelined relays run at the bound (0.80, the full-bisection time), so SP reaches full bisection at 24
  pathways there. In the paper model a relayed 40 MB message is transmitted whole on four 10 Gbps node links
  and the circuit in turn, and the relay's node-link queue holds its own messages and the relayed ones: SP
  takes 1.30 s at 24 pathways, twice its 0.64 s bound, and reaches the full-bisection time only at 48
  pathways, when every pair has its own circuit and nothing is relayed (0.74 s); max-min with
  store-and-forward relays likewise (1.17 s at 24, 0.48 s at 48). CP's strips cut exactly 24 node pairs, so
  at 24 pathways every one has its own circuit and nothing is relayed: CP reaches full bisection at 24 under
  every model (at 12 already with pipelined relays). "About 20 pathways", checked as 20 or fewer, therefore
  holds with pipelined relays only: under the paper model and with store-and-forward relays neither scheme
  reaches the full-bisection time before 24 pathways.
- *SP vs CP below 6 pathways.* CP's strips need only 3 circuits to chain the switches, so with 1 to 4
  pathways its plan is the same chain and SP/CP is 1.84 (paper model), 1.89 (pipelined) and 2.05
  (store-and-forward) at every one of them.
- *CG beats full bisection only in the paper model.* From 48 pathways every inter-switch pair of CG has a
  circuit. Under max-min the 10 Gbps node links bound both the hybrid and the full-bisection EPS, so they tie
  (0.66 = 0.66). In the paper model a direct circuit is one 32 Gbps hop from the node, while the EPS path
  stores and forwards each message at two switches: the hybrid wins (0.70 vs 0.76).
- *No computation.* Our CG and MG skeletons replay communication only, whereas 000 replays traces with their
  CPU time (1.6 GHz nodes). Under every model both kernels are uplink-bound on EPS only (x1/4: 1.88-2.96, x5:
  0.63-0.78), while the paper finds EPS only "almost one" for MG and no gain from full bisection for CG: their
  runs were dominated by computation. For the same reason MG on the hybrid is not 50-110% slower once there
  are enough pathways: the circuits relieve the uplinks that bound our compute-free MG (SP at 64 pathways:
  0.52-0.60 under every model), while few pathways cost far more than 110% (SP at 3: 4.4-14.4).
- *CommPattern (METIS).* Neighbor (8 x 16 ranks on 4 switches of 32) has several partitions that cut the
  minimum of 24 node pairs: the paper's four 8 x 4 strips, which chain the switches with three switch pairs,
  and layouts that join four (one switch talks to the other three). Edge cut alone cannot tell them apart,
  but a hybrid can: with 3 pathways the fourth pair stays on the EPS uplinks (S0 carried 3.2 GB, and CP was
  1.5x slower under 000's model than with the strips). So on a hybrid network ``metis`` breaks equal cuts
  of the switch-level split by the fewest switch pairs, and returns the strips: S0 carries nothing from 3
  pathways on, as in the paper. For CG METIS returns the sequential partition (identical rows); for MG it
  cuts other pairs than the paper's METIS did (Table 3, CP).
- *Exact circuits.* ``ilp`` minimizes the busiest link over the whole run, then the uplink bytes. It helps
  most where SP is worst (Neighbor SP with 3 pathways: 2.52 -> 1.09 paper model, 3.40 -> 0.80 pipelined,
  7.23 -> 1.43 store-and-forward) but can simulate slower than SP at a lower or equal bound (CG SP with 24
  pathways under every model, at the same bound), most likely because the bound adds up the bytes of all
  phases while the simulated time adds up each phase's own bottleneck: a plan balanced over the run can still
  load a few links in one phase.
- *Tables 2-3.* Counting ordered node pairs with messages >= 8,192 B, CG (Table 2) and MG with sequential
  ranks (Table 3 in brackets) match the paper exactly.
- *Iterations.* Neighbor runs the paper's 5 iterations; CG and MG run 1 iteration in the simulated cells
  (``--npb-iters``): iterations are identical, so relative times hardly depend on it.
- *Seeds.* Neighbor injects every message of an iteration at once; the order in which the paper model serves
  messages that reach a link at the same instant (000 does not say) moves its relative times (EPS only with
  x5 uplinks 0.876-0.926, SP at 64 pathways 0.650-0.746 over seeds 0-4), and METIS's seed moves CP's, but
  no verdict: every claim holds or fails at every seed it was run at. The numbers in these notes are seed 0's.
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--apps", default=",".join(APPS))
    ap.add_argument("--uplinks", default=",".join(UPLINKS), help="uplink multiples of 64 Gbps: 1/4, 1, 5")
    ap.add_argument("--pathways", default=",".join(map(str, PATHWAYS)), help="OCS pathway counts")
    ap.add_argument("--ilp-pathways", default=",".join(map(str, ILP_PATHWAYS)),
                    help="pathway counts for our exact circuits ('' for none)")
    ap.add_argument("--models", default=",".join(MODELS), help=f"network models ({', '.join(MODELS)})")
    ap.add_argument("--quick", action="store_true", help="Neighbor, uplinks x1 and x5, 3 and 24 pathways (< 1 min)")
    ap.add_argument("--iters", type=int, default=5, help="Neighbor iterations (the paper: 5)")
    ap.add_argument("--npb-iters", type=int, default=1, help="NPB iterations")
    ap.add_argument("--time-limit", type=float, default=10.0, help="ilp seconds per cell")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out-dir", default=str(RESULTS))
    ap.add_argument("--cache", default=None, help="cache directory (default OUT_DIR/.cache_paper000)")
    ap.add_argument("--no-cache", action="store_true")
    add_seeds_option(ap)
    add_verify_option(ap)
    a = ap.parse_args(argv)
    seeds = seeds_of(ap, a)
    apps, ups = tuple(a.apps.split(",")), tuple(a.uplinks.split(","))
    try:
        pws = tuple(int(x) for x in a.pathways.split(","))
        ilp_pws = tuple(int(x) for x in a.ilp_pathways.split(",") if x)
    except ValueError:
        ap.error(f"--pathways/--ilp-pathways: expected integers, got {a.pathways!r} / {a.ilp_pathways!r}")
    try:
        models = parse_models(a.models)
    except Exception as exc:  # TopoplanError: one line
        ap.error(str(exc))
    if a.quick:
        apps, pws, ilp_pws = ("neighbor",), (3, 24), (24,)
    for x in apps:
        if x not in APPS:
            ap.error(f"--apps: unknown application {x!r} ({', '.join(APPS)})")
    for x in ups:
        if x not in UPLINKS:
            ap.error(f"--uplinks: unknown multiple {x!r} ({', '.join(UPLINKS)})")
    for n in pws + ilp_pws:
        if not 1 <= n <= 64:
            ap.error(f"--pathways: {n} is not between 1 and 64 (128 nodes, one optical port each)")
    out_dir = Path(a.out_dir)
    cache = None if a.no_cache else Path(a.cache) if a.cache else out_dir / ".cache_paper000"
    # --quick caps the ilp's time (the cells are its own); --quick --verify checks the stored cells it selects,
    # which were made with --time-limit (a cell's time limit is part of its cache key)
    tl = min(a.time_limit, 3.0) if a.quick and not a.verify else a.time_limit
    t0 = time.perf_counter()
    verify = verification_of(ap, a)
    rows = run(apps, ups, pws, ilp_pws, quick=a.quick, iters=a.iters, npb_iters=a.npb_iters, ilp_time_limit=tl,
               seeds=seeds, paper_seed_apps=paper_seed_apps_of(a, apps), models=models, out_dir=out_dir, cache=cache,
               verify=verify)
    if verify is not None:
        return verify.report()
    print(f"{len(rows)} rows -> {out_dir / 'paper000.csv'}, .png, .md  ({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
