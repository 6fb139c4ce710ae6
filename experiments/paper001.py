"""Reproduce paper 001 (supplementing a small optical network): Figures 4-5 and Table 2 (issue 7).

256 nodes as 8 switches x 32 or 16 x 16 (presets ``paper001-8x32``,
``paper001-16x16``), 64 or 128 OCS nodes, normal (1:5) and low (1:20)
bisection uplinks and the full-bisection EPS reference; Neighbor 16x16 4 MB
and NPB CG, LU, MG class C on 256 ranks. Every cell is simulated with
``sim.run.simulate`` and reported relative to "EPS only" (sequential
placement), as the paper's figures are. Beside the paper's own method
(3-step circuit assignment, ranks placed sequentially) we run our exact
circuits (``ilp``) and, for the normal uplinks, CommPattern placement
(``metis``, OCS nodes first) with ``ilp`` circuits.

    python experiments/paper001.py            # the whole grid (cached per cell)
    python experiments/paper001.py --quick    # 16x16, Neighbor, a few cells (< 1 min)
    python experiments/paper001.py --systems 16x16 --apps neighbor,cg --npb-iters 1

Writes ``experiments/results/paper001.csv`` (one tidy row per cell and
metric, the paper's number beside ours where the paper gives one),
``paper001.png`` (the figures, laid out like the paper's) and ``paper001.md``
(the README table). Simulated cells are cached as JSON in
``experiments/results/.cache_paper001/``; a cell is recomputed only when its
parameters change (``--no-cache`` recomputes everything).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "experiments" / "results"
THRESHOLD_B = 8192.0            # 001 §4.1: large-message threshold
APPS = ("neighbor", "cg", "lu", "mg")
APP_NAMES = {"neighbor": "Neighbor", "cg": "CG", "lu": "LU", "mg": "MG"}

# 001 Table 1: uplink bandwidth per system (normal 1:5, low 1:20, full bisection); OCS nodes per switch for 64/128.
SYSTEMS = {
    "8x32": {"preset": "paper001-8x32", "up": "6.4Gbps", "low": "1.6Gbps", "fb": "32Gbps", "ocs": {64: 8, 128: 16}},
    "16x16": {"preset": "paper001-16x16", "up": "3.2Gbps", "low": "0.8Gbps", "fb": "16Gbps", "ocs": {64: 4, 128: 8}},
}

# The paper's numbers, transcribed. Figures 4-5 are bar charts without printed values; these are the values
# the text of §4.2 states ("≈" marks a qualitative statement turned into a number).
PAPER_REL = {  # (system, app, legend label) -> (relative execution time vs EPS only, source)
    ("8x32", "neighbor", "Ours 64Nodes"): (1.47, "Fig. 4, §4.2: up to +47%"),
    ("8x32", "neighbor", "Ours 128Nodes"): (1.22, "Fig. 4, §4.2: +22%"),
    ("8x32", "neighbor", "Ours 1.6Gbps 64Nodes"): (1.47, "≈ §4.2: low bisection does not affect Ours"),
    ("8x32", "neighbor", "Ours 1.6Gbps 128Nodes"): (1.22, "≈ §4.2: low bisection does not affect Ours"),
    ("16x16", "neighbor", "Ours 128Nodes"): (0.67, "Fig. 5, §4.2: 33% shorter"),
    ("16x16", "neighbor", "Ours 0.8Gbps 128Nodes"): (0.67, "≈ §4.2: low bisection does not affect Ours"),
    ("16x16", "cg", "Ours 0.8Gbps 64Nodes"): (1.30, "Fig. 5, §4.2: up to +30%"),
}
for _s, _low in (("8x32", "1.6Gbps"), ("16x16", "0.8Gbps")):
    for _lab in ("FB EPS", "EPS only", "Ours 64Nodes", "Ours 128Nodes", f"EPS {_low}", f"Ours {_low} 64Nodes",
                 f"Ours {_low} 128Nodes"):
        PAPER_REL[(_s, "lu", _lab)] = (1.0, "≈ §4.2: LU about the same in every pattern")
    for _lab in ("Ours 64Nodes", "Ours 128Nodes", f"Ours {_low} 64Nodes", f"Ours {_low} 128Nodes"):
        PAPER_REL[(_s, "mg", _lab)] = (1.2, "≈ §4.2: MG about +20% in every configuration")

# 001 Table 2: OCS nodes that were given a circuit (3-step assignment, sequential placement).
PAPER_TABLE2 = {
    ("8x32", 64): {"neighbor": 56, "cg": 64, "lu": 56, "mg": 64},
    ("8x32", 128): {"neighbor": 112, "cg": 128, "lu": 112, "mg": 128},
    ("16x16", 64): {"neighbor": 60, "cg": 60, "lu": 60, "mg": 64},
    ("16x16", 128): {"neighbor": 120, "cg": 126, "lu": 120, "mg": 128},
}
# §4.2: bytes the top EPS switch received for CG with Ours 64 nodes on the low-bisection EPS.
PAPER_TOP = {("16x16", "cg", "Ours 0.8Gbps 64Nodes"): (2e9, "§4.2: 2 GB over its 16 links"),
             ("8x32", "cg", "Ours 1.6Gbps 64Nodes"): (82e3, "§4.2: 82 KB")}

METRICS = ("relative_time", "makespan_s", "top_switch_bytes", "ocs_bytes", "bound_s", "ocs_nodes_assigned",
           "ocs_nodes_used")
COLUMNS = ("system", "app", "label", "network", "uplink", "uplink_bw", "ocs_nodes", "circuits", "placement",
           "iters", "metric", "ours", "paper", "paper_source", "status")


# -- the grid ---------------------------------------------------------------

def cells(system: str, apps=APPS, quick: bool = False) -> list[dict]:
    """The configurations of one system: the paper's seven bars (3-step circuits, sequential placement),
    our ``ilp`` circuits on the four hybrid bars, and CommPattern (metis) placement with ``ilp`` circuits."""
    c = SYSTEMS[system]
    low = c["low"]
    out = []
    for app in apps:
        def add(label, network, uplink, ocs=0, circuits="none", placement="sequential"):
            out.append({"system": system, "app": app, "label": label, "network": network, "uplink": uplink,
                        "uplink_bw": {"normal": c["up"], "low": low, "full": c["fb"]}[uplink],
                        "ocs_nodes": ocs, "circuits": circuits, "placement": placement})

        add("FB EPS", "fat-tree", "full")
        add("EPS only", "eps", "normal")
        add(f"EPS {low}", "eps", "low")
        for uplink in ("normal", "low"):
            for ocs in (64, 128):
                lab = f"Ours {ocs}Nodes" if uplink == "normal" else f"Ours {low} {ocs}Nodes"
                for meth in ("three-step", "ilp"):
                    add(lab, "hybrid", uplink, ocs, meth)
        add("EPS only", "eps", "normal", placement="metis")
        for ocs in (64, 128):
            add(f"Ours {ocs}Nodes", "hybrid", "normal", ocs, "ilp", "metis")
    if quick:  # a few cheap cells that still show every kind of bar
        keep = {("FB EPS", "none"), ("EPS only", "none"), (f"EPS {low}", "none"), ("Ours 128Nodes", "three-step"),
                ("Ours 128Nodes", "ilp"), (f"Ours {low} 128Nodes", "three-step")}
        out = [x for x in out if (x["label"], x["circuits"]) in keep and x["placement"] == "sequential"]
    return out


def traffic_spec(app: str, iters: int, npb_iters: int) -> str:
    """001 §4.1: Neighbor = 16x16 grid, 4 MB to each of up to 4 neighbours; NPB class C on 256 ranks."""
    if app == "neighbor":
        return f"neighbor2d:rows=16,cols=16,bytes=4MB,iters={iters}"
    return f"npb:kernel={app},class=C,np=256,iters={npb_iters}"


def topology_of(cell: dict):
    """The topology of a cell: the preset with 001 Table 1's variants as ``--set`` overrides."""
    from planner.topology_io import load_topology

    c = SYSTEMS[cell["system"]]
    sets = [f"eps.up_bw={cell['uplink_bw']}"]
    if cell["network"] == "fat-tree":
        sets += ["kind=fat-tree", "ocs=null"]
    elif cell["network"] == "eps":
        sets += ["kind=tree", "ocs=null"]
    else:
        sets += [f"ocs.nodes_per_switch={c['ocs'][cell['ocs_nodes']]}"]
    return load_topology(c["preset"], sets)


# -- running one cell -------------------------------------------------------

class _Inputs:
    """Traces and placements shared by the cells of one (system, app): built once, on demand."""

    def __init__(self, spec: str, seed: int):
        self.spec, self.seed = spec, seed
        self._trace = self._traffic = None
        self._metis = {}

    def traffic(self):
        if self._trace is None:
            from planner.traffic import load_source

            self._trace, self._traffic = load_source(self.spec)
        return self._trace, self._traffic

    def placement(self, cell: dict, topo):
        from planner.placement import sequential

        n = self.traffic()[1].n_ranks
        if cell["placement"] == "sequential":
            # 001 §4.1: ranks fill switches in order, the lowest ranks of each switch on its OCS nodes
            return sequential(n, topo)
        # CommPattern: METIS on the hybrid with the most OCS nodes (the EPS-only reference shares it)
        ocs = cell["ocs_nodes"] or 128
        if ocs not in self._metis:
            hyb = topology_of({**cell, "network": "hybrid", "ocs_nodes": ocs})
            self._metis[ocs] = metis_placement(hyb, self.traffic()[1], self.seed)
        return self._metis[ocs]


def metis_placement(topo, traffic, seed: int = 0):
    """CommPattern placement (``planner.placement_methods`` ``metis``: METIS over the switches, OCS nodes first)."""
    from planner.placement_methods import PlacementProblem, solve
    from planner.placement_methods.problem import to_placement

    prob = PlacementProblem.build(topo, traffic, threshold_B=THRESHOLD_B)
    return to_placement(solve(prob, method="metis", seed=seed))


def used_circuits(prob, plan: dict) -> int:
    """Circuits that carry large messages when the plan's forwarding tables route the traffic."""
    from planner.circuits.bound import evaluate
    from planner.circuits.forwarding import array_from_tables

    circ = [tuple(c) for c in plan["circuits"]]
    nh = array_from_tables(plan["forwarding"], prob.n_nodes, prob.n_switches)
    ev = evaluate(prob, circ, nh)
    per_circuit = ev.loads_B[prob.n_fixed_links():].reshape(-1, 2).sum(axis=1)
    return int((per_circuit > 0).sum())


def run_cell(cell: dict, inputs: _Inputs, ilp_time_limit: float, seed: int) -> dict:
    """Plan (hybrid cells) and simulate one cell; returns its measured values."""
    from planner.circuits import CircuitProblem, solve
    from sim.run import simulate

    trace, traffic = inputs.traffic()
    topo = topology_of(cell)
    pl = inputs.placement(cell, topo)
    out = {"status": "", "bound_s": None, "ocs_nodes_assigned": None, "ocs_nodes_used": None, "solve_s": 0.0}
    plan = None
    if cell["network"] == "hybrid":
        prob = CircuitProblem.build(topo, traffic, pl, THRESHOLD_B)
        res = solve(prob, cell["circuits"], time_limit=ilp_time_limit if cell["circuits"] == "ilp" else None,
                    seed=seed)
        plan = res.to_dict()
        out.update(status=res.status, bound_s=res.objective, solve_s=res.wall_s,
                   ocs_nodes_assigned=2 * len(plan["circuits"]), ocs_nodes_used=2 * used_circuits(prob, plan))
    r = simulate(topo, trace, pl, circuits=plan, threshold_B=THRESHOLD_B if plan else None)
    out.update(makespan_s=r["makespan_s"], top_switch_bytes=r["top_switch_bytes"],
               ocs_bytes=r["bytes_by_link_class"].get("ocs", 0.0), sim_wall_s=r["wall_s"])
    return out


def _cache_file(cache: Path, cell: dict) -> Path:
    lab = cell["label"].replace(" ", "_").replace(".", "p")
    return cache / f"{cell['system']}_{cell['app']}_{lab}_{cell['circuits']}_{cell['placement']}.json"


def cached_run(cell: dict, inputs: _Inputs, cache: Path | None, params: dict, log=print) -> dict:
    """``run_cell`` through the per-cell JSON cache (keyed by the cell and every parameter that changes it)."""
    from planner.io import write_json

    key = {**cell, **params, "spec": inputs.spec}
    path = _cache_file(cache, cell) if cache is not None else None
    if path is not None and path.is_file():
        try:
            doc = json.loads(path.read_text())
            if doc.get("key") == key:
                return doc["result"]
        except (OSError, ValueError):
            pass  # a broken cache file is recomputed
    t0 = time.perf_counter()
    res = run_cell(cell, inputs, params["ilp_time_limit"], params["seed"])
    res["wall_s"] = time.perf_counter() - t0
    log(f"  {cell['system']:5s} {cell['app']:8s} {cell['label']:22s} {cell['circuits']:10s} {cell['placement']:10s} "
        f"{res['makespan_s'] * 1e3:9.1f} ms  ({res['wall_s']:.1f} s)")
    if path is not None:
        write_json(path, {"key": key, "result": res})
    return res


# -- the experiment ---------------------------------------------------------

def run(systems=("8x32", "16x16"), apps=APPS, *, quick=False, iters=5, npb_iters=1, ilp_time_limit=10.0,
        seed=0, out_dir: Path = RESULTS, cache: Path | None = None, log=print) -> list[dict]:
    """Run the grid and write ``paper001.{csv,png,md}`` into ``out_dir``; returns the tidy rows."""
    params = {"iters": iters, "npb_iters": npb_iters, "ilp_time_limit": ilp_time_limit, "seed": seed,
              "threshold_B": THRESHOLD_B}
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if cache is not None:
        Path(cache).mkdir(parents=True, exist_ok=True)
    results = []
    for system in systems:
        for app in apps:
            spec = traffic_spec(app, iters, npb_iters)
            inputs = _Inputs(spec, seed)
            for cell in cells(system, (app,), quick):
                res = cached_run(cell, inputs, cache, params, log)
                results.append((cell, res, iters if app == "neighbor" else npb_iters))
    rows = tidy(results)
    write_csv(rows, out_dir / "paper001.csv")
    plot(rows, out_dir / "paper001.png")
    from planner.io import atomic_write

    atomic_write(out_dir / "paper001.md", markdown(rows))
    return rows


def tidy(results) -> list[dict]:
    """One row per (cell, metric); relative times against the cell's EPS only with sequential placement."""
    base = {(c["system"], c["app"]): r["makespan_s"] for c, r, _ in results
            if c["label"] == "EPS only" and c["placement"] == "sequential"}
    rows = []
    for c, r, it in results:
        b = base.get((c["system"], c["app"]))
        vals = {"relative_time": r["makespan_s"] / b if b else None, **{m: r.get(m) for m in METRICS[1:]}}
        paper3 = c["circuits"] in ("none", "three-step") and c["placement"] == "sequential"
        for m in METRICS:
            if vals[m] is None:
                continue
            paper, src = None, ""
            if paper3 and m == "relative_time" and (c["system"], c["app"], c["label"]) in PAPER_REL:
                paper, src = PAPER_REL[(c["system"], c["app"], c["label"])]
            if paper3 and m == "top_switch_bytes" and (c["system"], c["app"], c["label"]) in PAPER_TOP:
                paper, src = PAPER_TOP[(c["system"], c["app"], c["label"])]
            if paper3 and m == "ocs_nodes_assigned" and c["uplink"] == "normal":
                paper, src = PAPER_TABLE2[(c["system"], c["ocs_nodes"])][c["app"]], "Table 2"
            rows.append({**{k: c[k] for k in COLUMNS[:9]}, "iters": it, "metric": m, "ours": vals[m],
                         "paper": paper, "paper_source": src, "status": r.get("status", "")})
    return rows


def write_csv(rows, path: Path) -> None:
    from planner.io import atomic_write

    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(COLUMNS))
    w.writeheader()
    w.writerows(rows)
    atomic_write(path, buf.getvalue())


def _value(rows, **match):
    for r in rows:
        if all(r[k] == v for k, v in match.items()):
            return r
    return None


def bar_labels(system: str) -> list[str]:
    """The legend of 001 Figures 4-5, in the paper's order."""
    low = SYSTEMS[system]["low"]
    return ["FB EPS", "EPS only", "Ours 64Nodes", "Ours 128Nodes", f"EPS {low}", f"Ours {low} 64Nodes",
            f"Ours {low} 128Nodes"]


def plot(rows, path: Path) -> None:
    """Per system: the paper's method, our methods (relative execution time per application, grouped bars as in
    001 Figures 4-5, the paper's stated values as black markers), and Table 2 (OCS nodes with a circuit)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from planner.io import atomic_write

    systems = list(dict.fromkeys(r["system"] for r in rows))
    apps = list(dict.fromkeys(r["app"] for r in rows))
    fig, axes = plt.subplots(len(systems), 3, figsize=(17, 4.2 * len(systems)), squeeze=False,
                             gridspec_kw={"width_ratios": [1.25, 1.25, 0.8]})
    colors = ["#444444", "#9e9e9e", "#4f81bd", "#1f3f7a", "#e6a0a0", "#c0504d", "#7a1f1f"]
    rel = [r for r in rows if r["metric"] == "relative_time"]
    for i, system in enumerate(systems):
        labels = bar_labels(system)
        x = np.arange(len(apps))
        w = 0.8 / len(labels)
        ymax = 1.5
        for j, (title, circ_of, pl) in enumerate((
                ("paper's method: 3-step circuits, sequential placement", "three-step", "sequential"),
                ("ours: exact circuits (ilp); hatched: + CommPattern (metis) placement", "ilp", "sequential"))):
            ax = axes[i, j]
            for k, lab in enumerate(labels):
                circ = "none" if not lab.startswith("Ours") else circ_of
                ys, ps, ms = [], [], []
                for app in apps:
                    r = _value(rel, system=system, app=app, label=lab, circuits=circ, placement="sequential")
                    ys.append(r["ours"] if r else np.nan)
                    ps.append(r["paper"] if r and r["paper"] not in (None, "") else np.nan)
                    m = _value(rel, system=system, app=app, label=lab, circuits=circ if circ != "three-step"
                               else "ilp", placement="metis") if j == 1 else None
                    ms.append(m["ours"] if m else np.nan)
                xs = x - 0.4 + (k + 0.5) * w
                ax.bar(xs, ys, w, color=colors[k], label=lab, edgecolor="white", lw=0.3)
                if j == 1 and np.isfinite(ms).any():
                    ax.bar(xs, ms, w * 0.45, color="none", edgecolor="#f0c000", hatch="////", lw=0.8,
                           label="metis placement" if k == 1 else None)
                if j == 0 and np.isfinite(ps).any():
                    ax.scatter(xs, ps, marker="D", s=22, color="black", zorder=5,
                               label="paper (text of §4.2)" if k == 2 else None)
                ymax = max(ymax, np.nanmax(ys + ms + [0]))
            ax.axhline(1.0, color="k", lw=0.6, ls="--")
            ax.set_xticks(x, [APP_NAMES[a] for a in apps])
            ax.set_ylabel("relative execution time (vs EPS only)", fontsize=8)
            ax.set_title(f"{system} ({'Fig. 4' if system == '8x32' else 'Fig. 5'}) — {title}", fontsize=8)
            ax.grid(axis="y", lw=0.3)
            ax.legend(fontsize=6, ncol=2, loc="upper left")
        for j in (0, 1):
            axes[i, j].set_ylim(0, min(ymax * 1.08, 6.0))
        # Table 2
        ax = axes[i, 2]
        t2 = [r for r in rows if r["metric"] in ("ocs_nodes_assigned", "ocs_nodes_used") and r["system"] == system
              and r["circuits"] == "three-step" and r["uplink"] == "normal"]
        groups = [(o, a) for o in (64, 128) for a in apps]
        gx = np.arange(len(groups))
        for k, (metric, col, name) in enumerate((("ocs_nodes_assigned", "#4f81bd", "ours: given a circuit"),
                                                 ("ocs_nodes_used", "#9bbb59", "ours: circuit carries traffic"))):
            ys = [(_value(t2, metric=metric, ocs_nodes=o, app=a) or {}).get("ours", np.nan) for o, a in groups]
            ax.bar(gx - 0.3 + k * 0.3, ys, 0.3, color=col, label=name)
        pys = [PAPER_TABLE2[(system, o)][a] for o, a in groups]
        ax.bar(gx + 0.3, pys, 0.3, color="#cccccc", edgecolor="black", lw=0.4, label="paper Table 2")
        ax.set_xticks(gx, [f"{APP_NAMES[a]}\n{o}" for o, a in groups], fontsize=6)
        ax.set_ylabel("OCS nodes with a circuit", fontsize=8)
        ax.set_title(f"{system}: Table 2 (3-step, sequential)", fontsize=8)
        ax.legend(fontsize=6, loc="upper left")
        ax.set_ylim(0, 150)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    atomic_write(path, buf.getvalue(), binary=True)


def _fmt(v, digits=2) -> str:
    if v is None or v == "" or (isinstance(v, float) and not np.isfinite(v)):
        return "–"
    return f"{v:.{digits}f}"


def markdown(rows) -> str:
    """The README table: relative execution time per bar, paper's method and ours, and Table 2."""
    rel = [r for r in rows if r["metric"] == "relative_time"]
    systems = list(dict.fromkeys(r["system"] for r in rows))
    apps = list(dict.fromkeys(r["app"] for r in rows))
    lines = ["Relative execution time vs EPS only (sequential placement); `paper` = the value §4.2 states "
             "(≈: a qualitative statement), `3-step` = the paper's method in our simulator, `ilp` = our exact "
             "circuits, `metis+ilp` = CommPattern placement with exact circuits.", ""]
    for system in systems:
        lines += [f"**{system}** ({'Fig. 4' if system == '8x32' else 'Fig. 5'})", "",
                  "| bar | " + " | ".join(f"{APP_NAMES[a]} paper / 3-step / ilp / metis+ilp" for a in apps) + " |",
                  "|---|" + "---|" * len(apps)]
        for lab in bar_labels(system):
            cells_ = []
            for a in apps:
                ours = lab.startswith("Ours")
                p = _value(rel, system=system, app=a, label=lab, circuits="three-step" if ours else "none",
                           placement="sequential")
                q = _value(rel, system=system, app=a, label=lab, circuits="ilp", placement="sequential") if ours else None
                m = _value(rel, system=system, app=a, label=lab, circuits="ilp" if ours else "none", placement="metis")
                pap = p["paper"] if p and p["paper"] not in (None, "") else None
                approx = "≈" if p and p["paper_source"].startswith("≈") else ""
                cells_.append(f"{approx}{_fmt(pap)} / {_fmt(p and p['ours'])} / {_fmt(q and q['ours'])} / "
                              f"{_fmt(m and m['ours'])}")
            lines.append(f"| {lab} | " + " | ".join(cells_) + " |")
        lines.append("")
    lines += ["Table 2: OCS nodes given a circuit by the 3-step assignment (paper / ours; in brackets: OCS nodes "
              "whose circuit carries traffic under the plan's forwarding tables).", "",
              "| system | OCS nodes | " + " | ".join(APP_NAMES[a] for a in apps) + " |",
              "|---|---|" + "---|" * len(apps)]
    for system in systems:
        for o in (64, 128):
            cs = []
            for a in apps:
                r = _value(rows, system=system, app=a, ocs_nodes=o, circuits="three-step", uplink="normal",
                           metric="ocs_nodes_assigned")
                u = _value(rows, system=system, app=a, ocs_nodes=o, circuits="three-step", uplink="normal",
                           metric="ocs_nodes_used")
                cs.append(f"{PAPER_TABLE2[(system, o)][a]} / {int(r['ours']) if r else '–'}"
                          f" ({int(u['ours']) if u else '–'})")
            if any("–" not in c for c in cs):
                lines.append(f"| {system} | {o} | " + " | ".join(cs) + " |")
    top = [r for r in rows if r["metric"] == "top_switch_bytes" and r["paper"] not in (None, "")]
    if top:
        lines += ["", "Bytes the top switch receives (CG, Ours 64 nodes, low bisection, 3-step): " + "; ".join(
            f"{r['system']}: paper {r['paper'] / 1e6:,.3f} MB, ours {r['ours'] / 1e6:,.3f} MB" for r in top) + "."]
    nb = []
    for system in systems:
        eps = _value(rows, system=system, app="neighbor", label="EPS only", placement="sequential",
                     metric="makespan_s")
        for o in (64, 128):
            b = _value(rows, system=system, app="neighbor", label=f"Ours {o}Nodes", circuits="three-step",
                       placement="sequential", metric="bound_s")
            r = _value(rows, system=system, app="neighbor", label=f"Ours {o}Nodes", circuits="three-step",
                       placement="sequential", metric="relative_time")
            pap = PAPER_REL.get((system, "neighbor", f"Ours {o}Nodes"), (None,))[0]
            if eps and b and r:
                nb.append(f"{system} {o} nodes: bound {b['ours'] / eps['ours']:.2f}, simulated {r['ours']:.2f}"
                          + (f", paper {pap:.2f}" if pap else ""))
    if nb:
        lines += ["", "Neighbor, 3-step, relative to EPS only (EPS only is uplink-limited, so its simulated time "
                  "equals its bound): " + "; ".join(nb) + "."]
    lines += ["", NOTES]
    return "\n".join(lines) + "\n"


NOTES = """**Why our numbers differ from 001's**

- *Communication only.* 001 adds each process's measured computation time to the simulated communication
  (§4.1); we have no such measurements for 256 ranks and simulate communication only (generators with
  `compute=0`). Every ratio is therefore stretched away from 1 in our table; the NPB kernels, which compute
  much more than they communicate, are affected most (001 finds LU insensitive even to the 1:20 uplinks; in
  communication time alone LU's EPS-only run is 1.5-1.8x slower with them). Neighbor has no computation and
  is the fairest comparison.
- *Relays are store-and-forward per message.* A relayed message is three full transfers in a row (source to
  relay over EPS, relay to relay over the circuit, relay to destination over EPS), each shared max-min
  fairly; 001 relays whole MPI messages too, but its per-link "delay + size / bandwidth, later messages
  postponed" model lets consecutive messages overlap more. The communication-time bound, which counts bytes
  per link and ignores this serialization, is close to the paper's numbers (see the Neighbor line above:
  16x16 with 128 OCS nodes gives a bound of 0.60 where 001 reports 0.67), while the simulated time of the
  same plan is above 1. The ordering of 001 is reproduced: 8x32 loses more than 16x16, 64 OCS nodes lose
  more than 128, because all of 8x32's inter-switch neighbour traffic is relayed (no pattern-(1) pairs) and
  the relay nodes' 1 Gbps EPS links carry their own traffic plus the relayed bytes.
- *Fewer NPB iterations.* The NPB kernels run 1 iteration (001: 5) to keep the 256-rank replays affordable;
  their initialisation exchanges are included. Per-iteration communication is identical, so the relative
  time changes little; the top-switch bytes are per run (1 iteration), hence below 001's 2 GB for CG.
- *Uplinks still matter to "Ours" on 16x16 for the NPB kernels.* 16x16 has 120 switch pairs but only 30 or
  64 circuits: CG, LU and MG communicate between more switch pairs than 3-step can connect, and their
  messages below the 8,192-byte threshold always use the EPS uplinks, so the 1:20 uplinks slow "Ours" down
  in our simulator for all three (001 reports this only for CG, +30%).
- *Exact circuits minimize the bound, not the simulated time.* `ilp` is never worse than 3-step on the
  communication-time bound (most NPB cells stop at the 10 s limit with a feasible plan); in the run behind
  this table it simulates faster than 3-step in 22 of the 32 hybrid cells, equal in 7 and slower in 3 (CG
  and MG on 16x16 with 128 OCS nodes, MG on 8x32 with 128 nodes and 1:20 uplinks): the bound ignores relay
  serialization, and its tie-break (fewest uplink bytes) moves traffic onto relays. With CommPattern placement (METIS, OCS nodes first)
  and exact circuits, Neighbor reaches 0.62 of EPS only on 16x16 and 1.2 on 8x32 (METIS alone helps
  EPS-only too: 0.50 and 0.80).
- *Table 2 is reproduced exactly* (all 16 cells): our 3-step implementation gives circuits to the same
  number of OCS nodes; one more check is whether the circuits carry traffic under the forwarding tables
  (in brackets): all do except 4 circuits of CG on 16x16 with 128 OCS nodes.
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--systems", default="8x32,16x16")
    ap.add_argument("--apps", default=",".join(APPS))
    ap.add_argument("--quick", action="store_true", help="16x16 Neighbor only, six cells (< 1 min)")
    ap.add_argument("--iters", type=int, default=5, help="Neighbor iterations (the paper: 5)")
    ap.add_argument("--npb-iters", type=int, default=1, help="NPB iterations (the paper: 5)")
    ap.add_argument("--time-limit", type=float, default=10.0, help="ilp seconds per cell")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out-dir", default=str(RESULTS))
    ap.add_argument("--cache", default=None, help="cache directory (default OUT_DIR/.cache_paper001)")
    ap.add_argument("--no-cache", action="store_true")
    a = ap.parse_args(argv)
    systems, apps = tuple(a.systems.split(",")), tuple(a.apps.split(","))
    if a.quick:
        systems, apps = ("16x16",), ("neighbor",)
    for s in systems:
        if s not in SYSTEMS:
            ap.error(f"--systems: unknown system {s!r} (8x32, 16x16)")
    for x in apps:
        if x not in APPS:
            ap.error(f"--apps: unknown application {x!r} ({', '.join(APPS)})")
    out_dir = Path(a.out_dir)
    cache = None if a.no_cache else Path(a.cache) if a.cache else out_dir / ".cache_paper001"
    tl = min(a.time_limit, 3.0) if a.quick else a.time_limit
    t0 = time.perf_counter()
    rows = run(systems, apps, quick=a.quick, iters=a.iters, npb_iters=a.npb_iters, ilp_time_limit=tl, seed=a.seed,
               out_dir=out_dir, cache=cache)
    print(f"{len(rows)} rows -> {out_dir / 'paper001.csv'}, .png, .md  ({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
