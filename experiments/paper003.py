"""Reproduce paper 003 (supplemental OCS network, journal version): Figures 5-6 and Table 2 (issue 7).

64 nodes x 4 cores under 4 EPS switches (preset ``paper003``), 4/8/16/32/64
OCS nodes balanced over the switches, "Ours" (OCS nodes' EPS links 20 Gbps),
"Ours (narrow)" (10 Gbps like every other node) and the fat-tree EPS
reference ("FT EPS", 160 Gbps uplinks); Neighbor 16x16 4 MB and NPB CG, IS,
LU class C on 256 ranks; Sequential and CommPattern (METIS) placement. Every
cell is simulated with ``sim.run.simulate`` and reported as the paper's
figures are: the performance gain ``1 - T / T(EPS only)`` against EPS only
with the same placement. Beside the paper's circuit assignment (003 Fig. 3,
``greedy``) we run our exact circuits (``ilp``) on "Ours", and annealed
placement (``anneal``, congestion objective) with ``ilp`` circuits at 32 OCS
nodes. Table 2 (inter-switch volumes) comes from ``planner.analysis``.

    python experiments/paper003.py            # the whole grid (cached per cell)
    python experiments/paper003.py --quick    # Neighbor, Sequential, a few cells (< 1 min)
    python experiments/paper003.py --apps neighbor,is --npb-iters 1

Writes ``experiments/results/paper003.csv`` (one tidy row per cell and
metric, the paper's number beside ours where the paper gives one),
``paper003.png`` (Figures 5 and 6 laid out like the paper's, and Table 2)
and ``paper003.md`` (the README table). Simulated cells are cached as JSON
in ``experiments/results/.cache_paper003/``; a cell is recomputed only when
its parameters change (``--no-cache`` recomputes everything).
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

from experiments.paper001 import used_circuits  # noqa: E402

RESULTS = ROOT / "experiments" / "results"
PRESET = "paper003"
APPS = ("neighbor", "cg", "is", "lu")           # 003 Figures 5-6 panels (a)-(d)
APP_NAMES = {"neighbor": "Neighbor", "cg": "CG", "is": "IS", "lu": "LU"}
OCS_NODES = (4, 8, 16, 32, 64)                  # 003 §4.1.2: 1, 2, 4, 8, 16 per switch
PLACEMENTS = ("sequential", "metis")
PLACEMENT_NAMES = {"sequential": "Sequential", "metis": "CommPattern", "anneal": "Anneal"}
FT_UP = "160Gbps"                               # 003 Table 1: FT EPS uplinks
NARROW = "10Gbps"                               # "Ours (narrow)": OCS nodes' EPS links like the others

# The paper's numbers, transcribed. Figures 5-6 are charts without printed values; these are the values the text
# of §4.2 states (gain = reduction of the execution time against EPS only with the same placement).
PAPER_GAIN = {  # (placement, app, label, ocs_nodes) -> (gain, source)
    ("sequential", "neighbor", "Ours", 32): (0.26, "Fig. 5(a), §4.2: 26%"),
    ("sequential", "neighbor", "FT EPS", 0): (0.31, "Fig. 5(a), §4.2: 31%"),
    ("metis", "neighbor", "Ours", 32): (0.09, "Fig. 6(a), §4.2: 9%"),
    ("metis", "neighbor", "FT EPS", 0): (0.04, "Fig. 6(a), §4.2: 4%"),
    ("metis", "neighbor", "Ours", 8): (-0.5, "≈ Fig. 6(a), §4.2: close to 50% slower"),
    ("sequential", "is", "Ours", 32): (0.16, "Fig. 5(c), §4.2: 16%, equal to FT EPS"),
    ("sequential", "is", "FT EPS", 0): (0.16, "Fig. 5(c), §4.2: 16%"),
    ("metis", "is", "Ours", 32): (0.15, "Fig. 6(c), §4.2: 15%"),
    ("metis", "is", "FT EPS", 0): (0.17, "Fig. 6(c), §4.2: 17%"),
}
# Qualitative statements of §4.2 that a reader can check against our table.
PAPER_CLAIMS = (
    "Ours (narrow) is the worst everywhere and below EPS only except for IS (§4.2)",
    "Neighbor: 4 OCS nodes beat 8 (2 circuits leave some traffic on the uplinks; 8 relay everything) (§4.2)",
    "IS: Ours with >= 32 OCS nodes reaches or beats FT EPS (fat relay links also relieve the all-to-all "
    "receive bottleneck) (§4.2)",
    "CG: gain grows with OCS nodes but stays below FT EPS (§4.2)",
    "LU: little effect, sometimes slower than EPS only; FT EPS best (§4.2)",
)
# 003 Table 2: inter-EPS-switch volumes in bytes (total, large, small) per application and placement.
PAPER_TABLE2 = {
    ("neighbor", "sequential"): (1920e6, 1920e6, 0.0), ("neighbor", "metis"): (1480e6, 1480e6, 0.0),
    ("cg", "sequential"): (2142e6, 2142e6, 50e3), ("cg", "metis"): (2544e6, 2544e6, 212e3),
    ("is", "sequential"): (3462e6, 3461e6, 1.2e6), ("is", "metis"): (3462e6, 3461e6, 1.2e6),
    ("lu", "sequential"): (151e6, 108e6, 43e6), ("lu", "metis"): (112e6, 79e6, 33e6),
}

METRICS = ("gain", "makespan_s", "bound_s", "ocs_bytes", "uplink_bytes", "ocs_nodes_used")
COLUMNS = ("table", "app", "placement", "label", "network", "ocs_nodes", "circuits", "iters", "metric", "ours",
           "paper", "paper_source", "status")


# -- the grid ---------------------------------------------------------------

def cells(apps=APPS, placements=PLACEMENTS, ocs_nodes=OCS_NODES, quick: bool = False, best: bool = True) -> list[dict]:
    """The configurations: per application and placement the paper's lines (EPS only, FT EPS, Ours and
    Ours (narrow) with 003's ``greedy`` circuits for every OCS size), our ``ilp`` circuits on Ours (every
    size for Neighbor, 32 OCS nodes for the NPB kernels, whose cells take tens of seconds each), and
    (``best``) annealed placement with ``ilp`` circuits at 32 OCS nodes."""
    out = []
    for app in apps:
        def add(label, network, placement, ocs=0, circuits="none"):
            out.append({"app": app, "placement": placement, "label": label, "network": network,
                        "ocs_nodes": ocs, "circuits": circuits})

        for pl in placements:
            add("EPS only", "eps", pl)
            add("FT EPS", "fat-tree", pl)
            for n in ocs_nodes:
                add("Ours", "hybrid", pl, n, "greedy")
                add("Ours (narrow)", "narrow", pl, n, "greedy")
                if app == "neighbor" or n == 32:  # NPB cells simulate for tens of seconds: ilp at 32 only
                    add("Ours", "hybrid", pl, n, "ilp")
        if best and not quick:
            add("EPS only", "eps", "anneal")
            add("Ours", "hybrid", "anneal", 32, "ilp")
    if quick:
        keep = {("EPS only", "none"), ("FT EPS", "none"), ("Ours", "greedy"), ("Ours (narrow)", "greedy"),
                ("Ours", "ilp")}
        out = [c for c in out if (c["label"], c["circuits"]) in keep]
    return out


def traffic_spec(app: str, iters: int, npb_iters: int) -> str:
    """003 §4.1.1: Neighbor = 16x16 grid, 4 MB to each of up to 4 neighbours; NPB class C on 256 ranks."""
    if app == "neighbor":
        return f"neighbor2d:rows=16,cols=16,bytes=4MB,iters={iters}"
    return f"npb:kernel={app},class=C,np=256,iters={npb_iters}"


def topology_of(network: str, ocs_nodes: int = 32):
    """The topology of a cell: the ``paper003`` preset with 003 Table 1's variants as ``--set`` overrides."""
    from planner.topology_io import load_topology

    if network == "eps":
        return load_topology(PRESET, ["kind=tree", "ocs=null"])
    if network == "fat-tree":
        return load_topology(PRESET, ["kind=fat-tree", f"eps.up_bw={FT_UP}", "ocs=null"])
    sets = [f"ocs.nodes_per_switch={ocs_nodes // 4}"]
    if network == "narrow":
        sets.append(f"ocs.node_link_bw={NARROW}")
    return load_topology(PRESET, sets)


# -- running one cell -------------------------------------------------------

class _Inputs:
    """Trace, traffic and placements shared by the cells of one application: built once, on demand."""

    def __init__(self, spec: str, seed: int, anneal_steps: int):
        self.spec, self.seed, self.anneal_steps = spec, seed, anneal_steps
        self._trace = self._traffic = None
        self._pl = {}

    def traffic(self):
        if self._trace is None:
            from planner.traffic import load_source

            self._trace, self._traffic = load_source(self.spec)
        return self._trace, self._traffic

    def placement(self, kind: str, ocs_nodes: int):
        """003 §4.1.3. Sequential: ranks in order, the lowest rank sums on the OCS nodes (the first nodes of
        each switch). CommPattern: METIS over the switches, then the nodes; the node groups with the most
        inter-switch traffic go on the OCS nodes (so it depends on the OCS size; EPS-only and FT EPS use the
        32-node one, the OCS choice only permutes nodes within a switch there)."""
        from planner.placement import sequential

        n = self.traffic()[1].n_ranks
        if kind == "sequential":
            return sequential(n, topology_of("eps"))
        ocs = ocs_nodes or 32
        if (kind, ocs) not in self._pl:
            self._pl[(kind, ocs)] = placement_on(topology_of("hybrid", ocs), self.traffic()[1], kind, self.seed,
                                                 self.anneal_steps)
        return self._pl[(kind, ocs)]


def placement_on(topo, traffic, method: str, seed: int = 0, anneal_steps: int = 4000):
    """CommPattern (``metis``) or annealed (``anneal``, congestion objective, fixed step count so the result
    is reproducible) placement from ``planner.placement_methods``, with 003's threshold (the OCS BDP)."""
    from planner.placement_methods import PlacementProblem, solve
    from planner.placement_methods.problem import to_placement

    if method == "metis":
        return to_placement(solve(PlacementProblem.build(topo, traffic), method="metis", seed=seed))
    prob = PlacementProblem.build(topo, traffic, objective="congestion")
    return to_placement(solve(prob, method="anneal", seed=seed, max_steps=anneal_steps))


def run_cell(cell: dict, inputs: _Inputs, ilp_time_limit: float, seed: int) -> dict:
    """Plan circuits (hybrid cells) and simulate one cell; returns its measured values."""
    from planner.analysis import default_threshold
    from planner.circuits import CircuitProblem, solve
    from sim.run import simulate

    trace, traffic = inputs.traffic()
    topo = topology_of(cell["network"], cell["ocs_nodes"])
    pl = inputs.placement(cell["placement"], cell["ocs_nodes"])
    out = {"status": "", "bound_s": None, "ocs_nodes_used": None, "solve_s": 0.0}
    plan, thr = None, None
    if cell["circuits"] != "none":
        thr = default_threshold(topo)  # 003 §4.1.3: "large" = above the OCS bandwidth-delay product
        prob = CircuitProblem.build(topo, traffic, pl, thr)
        res = solve(prob, cell["circuits"], time_limit=ilp_time_limit if cell["circuits"] == "ilp" else None,
                    seed=seed)
        plan = res.to_dict()
        out.update(status=res.status, bound_s=res.objective, solve_s=res.wall_s,
                   ocs_nodes_used=2 * used_circuits(prob, plan))
    r = simulate(topo, trace, pl, circuits=plan, threshold_B=thr)
    by = r["bytes_by_link_class"]
    out.update(makespan_s=r["makespan_s"], ocs_bytes=by.get("ocs", 0.0),
               uplink_bytes=by.get("uplink-up", 0.0), sim_wall_s=r["wall_s"])
    return out


def _cache_file(cache: Path, cell: dict) -> Path:
    lab = cell["label"].replace(" ", "_").replace("(", "").replace(")", "")
    return cache / f"{cell['app']}_{cell['placement']}_{lab}_{cell['ocs_nodes']}_{cell['circuits']}.json"


def cached_run(cell: dict, inputs: _Inputs, cache: Path | None, params: dict, log=print, *, runner=None,
               cache_file=None, describe=None) -> dict:
    """``run_cell`` through the per-cell JSON cache (keyed by the cell and every parameter that changes it).
    ``runner``, ``cache_file`` and ``describe`` let another paper's script reuse the cache with its own cells."""
    from planner.io import write_json

    runner, cache_file = runner or run_cell, cache_file or _cache_file
    key = {**cell, **params, "spec": inputs.spec}
    path = cache_file(cache, cell) if cache is not None else None
    if path is not None and path.is_file():
        try:
            doc = json.loads(path.read_text())
            if doc.get("key") == key:
                return doc["result"]
        except (OSError, ValueError):
            pass  # a broken cache file is recomputed
    t0 = time.perf_counter()
    res = runner(cell, inputs, params["ilp_time_limit"], params["seed"])
    res["wall_s"] = time.perf_counter() - t0
    what = describe(cell) if describe else (f"{cell['app']:8s} {cell['placement']:10s} {cell['label']:14s} "
                                            f"{cell['ocs_nodes']:3d} {cell['circuits']:7s}")
    log(f"  {what} {res['makespan_s'] * 1e3:9.2f} ms  ({res['wall_s']:.1f} s)")
    if path is not None:
        write_json(path, {"key": key, "result": res})
    return res


# -- Table 2 ----------------------------------------------------------------

def table2(apps, inputs: dict, placements=PLACEMENTS, iters: int = 5) -> list[dict]:
    """003 Table 2 with ``planner.analysis``: inter-switch bytes (total, large, small) per application and
    placement, for the paper's 5 iterations (volumes, unlike relative times, scale with them; no simulation
    needed), with the placements the simulated cells use (CommPattern: the 32-OCS-node one)."""
    from planner.analysis import analyze
    from planner.traffic import load_source

    topo = topology_of("hybrid", 32)
    rows = []
    for app in apps:
        inp = inputs[app]
        spec = traffic_spec(app, iters, iters)
        traffic = inp.traffic()[1] if spec == inp.spec else load_source(spec)[1]
        for pl in placements:
            a = analyze(topo, traffic, inp.placement(pl, 32)).to_dict()
            ours = (a["inter_switch_bytes"], a["inter_switch_large_bytes"], a["inter_switch_small_bytes"])
            paper = PAPER_TABLE2.get((app, pl), (None,) * 3)
            for m, o, p in zip(("inter_switch_total_B", "inter_switch_large_B", "inter_switch_small_B"), ours, paper):
                rows.append({"table": "table2", "app": app, "placement": pl, "label": "", "network": "hybrid",
                             "ocs_nodes": 32, "circuits": "none", "iters": iters, "metric": m, "ours": o,
                             "paper": p, "paper_source": "Table 2" if p is not None else "", "status": ""})
    return rows


# -- the experiment ---------------------------------------------------------

def run(apps=APPS, placements=PLACEMENTS, ocs_nodes=OCS_NODES, *, quick=False, best=True, iters=5, npb_iters=1,
        ilp_time_limit=10.0, seed=0, anneal_steps=4000, out_dir: Path = RESULTS, cache: Path | None = None,
        log=print) -> list[dict]:
    """Run the grid and write ``paper003.{csv,png,md}`` into ``out_dir``; returns the tidy rows."""
    from planner.io import atomic_write

    params = {"iters": iters, "npb_iters": npb_iters, "ilp_time_limit": ilp_time_limit, "seed": seed,
              "anneal_steps": anneal_steps}
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if cache is not None:
        Path(cache).mkdir(parents=True, exist_ok=True)
    results, inputs = [], {}
    for app in apps:
        inputs[app] = _Inputs(traffic_spec(app, iters, npb_iters), seed, anneal_steps)
        for cell in cells((app,), placements, ocs_nodes, quick, best):
            res = cached_run(cell, inputs[app], cache, params, log)
            results.append((cell, res, iters if app == "neighbor" else npb_iters))
        # written after every application so a long run leaves usable results behind
        rows = tidy(results) + table2(list(inputs), inputs, placements)
        write_csv(rows, out_dir / "paper003.csv")
        plot(rows, out_dir / "paper003.png")
        atomic_write(out_dir / "paper003.md", markdown(rows))
    return rows


def tidy(results) -> list[dict]:
    """One row per (cell, metric). ``gain`` = 1 - T / T(EPS only, same placement); annealed placement is
    compared with EPS only under CommPattern (the paper's best placement)."""
    base = {(c["app"], c["placement"]): r["makespan_s"] for c, r, _ in results if c["label"] == "EPS only"}
    rows = []
    for c, r, it in results:
        ref = "metis" if c["placement"] == "anneal" else c["placement"]
        b = base.get((c["app"], ref))
        vals = {"gain": 1.0 - r["makespan_s"] / b if b else None, **{m: r.get(m) for m in METRICS[1:]}}
        paper_line = c["circuits"] in ("none", "greedy")
        for m in METRICS:
            if vals[m] is None:
                continue
            paper, src = None, ""
            if paper_line and m == "gain":
                paper, src = PAPER_GAIN.get((c["placement"], c["app"], c["label"], c["ocs_nodes"]), (None, ""))
            rows.append({"table": "fig5" if c["placement"] == "sequential" else "fig6",
                         **{k: c[k] for k in ("app", "placement", "label", "network", "ocs_nodes", "circuits")},
                         "iters": it, "metric": m, "ours": vals[m], "paper": paper, "paper_source": src,
                         "status": r.get("status", "")})
    return rows


def write_csv(rows, path: Path, columns=COLUMNS) -> None:
    from planner.io import atomic_write

    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(columns))
    w.writeheader()
    w.writerows(rows)
    atomic_write(path, buf.getvalue())


def _get(rows, metric="gain", **match):
    for r in rows:
        if r["metric"] == metric and all(r[k] == v for k, v in match.items()):
            return r
    return None


# -- figure and table ------------------------------------------------------

def plot(rows, path: Path) -> None:
    """Figures 5 and 6 (gain vs OCS nodes, one panel per application, lines like the paper's: Ours,
    Ours (narrow), FT EPS; plus our ilp circuits and the paper's stated values as stars) and Table 2 as bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    apps = [a for a in APPS if any(r["app"] == a for r in rows)]
    pls = [p for p in PLACEMENTS if any(r["placement"] == p and r["metric"] == "gain" for r in rows)]
    ncols = max(len(apps), 1)
    fig, axes = plt.subplots(len(pls) + 1, ncols, figsize=(3.6 * ncols, 3.0 * (len(pls) + 1)), squeeze=False)
    for i, pl in enumerate(pls):
        fig_no = 5 if pl == "sequential" else 6
        for j, app in enumerate(apps):
            ax = axes[i][j]
            g = [r for r in rows if r["metric"] == "gain" and r["app"] == app and r["placement"] == pl]
            xs = sorted({r["ocs_nodes"] for r in g if r["ocs_nodes"]})
            pos = {n: k for k, n in enumerate(xs)}

            def line(which, circuits, **kw):
                pts = sorted((r["ocs_nodes"], r["ours"]) for r in g if r["label"] == which
                             and r["circuits"] == circuits and r["ocs_nodes"])
                if pts:
                    ax.plot([pos[n] for n, _ in pts], [100 * v for _, v in pts], **kw)

            line("Ours", "greedy", marker="o", color="k", label="Ours")
            line("Ours (narrow)", "greedy", marker="s", color="0.5", mfc="w", label="Ours (narrow)")
            line("Ours", "ilp", marker="^", color="tab:blue", ls=":", label="Ours, ilp circuits")
            ft = _get(g, label="FT EPS")
            if ft is not None and xs:
                ax.plot(range(len(xs)), [100 * ft["ours"]] * len(xs), color="k", ls="--", marker="x", label="FT EPS")
            an = [r for r in rows if r["metric"] == "gain" and r["app"] == app and r["placement"] == "anneal"
                  and r["label"] == "Ours"]
            if pl == "metis" and an and 32 in pos:
                ax.plot([pos[32]], [100 * an[0]["ours"]], marker="D", color="tab:red", ls="", label="Ours, anneal+ilp")
            for r in g:
                if r["paper"] not in (None, "") and r["circuits"] in ("none", "greedy"):
                    x = range(len(xs)) if r["label"] == "FT EPS" else [pos.get(r["ocs_nodes"])]
                    if None in x:
                        continue
                    ax.plot(list(x), [100 * float(r["paper"])] * len(list(x)), marker="*", ms=11, ls="",
                            color="tab:orange" if r["label"] == "FT EPS" else "tab:green",
                            label="paper: " + r["label"])
            ax.axhline(0, color="0.7", lw=0.8)
            ax.set_xticks(range(len(xs)), [str(n) for n in xs])
            ax.set_xlabel("Number of OCS nodes")
            ax.set_ylabel("Performance gain [%]")
            ax.set_title(f"Fig. {fig_no}({'abcd'[APPS.index(app)]}) {APP_NAMES[app]}, {PLACEMENT_NAMES[pl]}",
                         fontsize=9)
            ax.grid(axis="y", alpha=0.3)
            if j == 0:
                h, lab = ax.get_legend_handles_labels()
                keep = {x: y for y, x in reversed(list(zip(h, lab)))}  # one entry per label
                ax.legend(list(keep.values()), list(keep), fontsize=6, loc="lower right")
    # Table 2 as grouped bars (ours vs paper, inter-switch total in MB)
    for j, app in enumerate(apps):
        ax = axes[-1][j]
        t = [r for r in rows if r["table"] == "table2" and r["app"] == app and r["metric"] == "inter_switch_total_B"]
        labs = [PLACEMENT_NAMES[r["placement"]] for r in t]
        k = np.arange(len(t))
        ax.bar(k - 0.2, [r["ours"] / 1e6 for r in t], 0.4, color="k", label="ours")
        ax.bar(k + 0.2, [float(r["paper"]) / 1e6 if r["paper"] not in (None, "") else 0 for r in t], 0.4,
               color="0.7", label="paper")
        ax.set_xticks(k, labs)
        ax.set_ylabel("Inter-switch MB")
        ax.set_title(f"Table 2: {APP_NAMES[app]}", fontsize=9)
        if j == 0:
            ax.legend(fontsize=7)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    from planner.io import atomic_write

    atomic_write(path, buf.getvalue())


def _pct(v) -> str:
    return "" if v in (None, "") else f"{100 * float(v):+.0f}%"


def _mb(v) -> str:
    if v in (None, ""):
        return ""
    v = float(v)
    return f"{v / 1e6:,.0f} MB" if v >= 1e6 else f"{v / 1e3:,.0f} KB" if v >= 1e3 else f"{v:.0f} B"


def markdown(rows) -> str:
    """The README table: gains per application, placement, OCS size; the paper's stated values beside ours."""
    apps = [a for a in APPS if any(r["app"] == a for r in rows)]
    ocs = sorted({r["ocs_nodes"] for r in rows if r["metric"] == "gain" and r["ocs_nodes"]})
    out = ["Performance gain over EPS only with the same placement (1 - T/T_EPS; 003 Figures 5-6). "
           "Ours / narrow use 003's circuit assignment (Fig. 3, `greedy`); ilp = our exact circuits; "
           "paper values (from the text of §4.2) in brackets.", "",
           "| app | placement | network | " + " | ".join(f"{n} OCS" for n in ocs) + " |",
           "|---|---|---|" + "---|" * len(ocs)]
    for app in apps:
        for pl in PLACEMENTS:
            g = [r for r in rows if r["metric"] == "gain" and r["app"] == app and r["placement"] == pl]
            if not g:
                continue
            for lab, circ in (("Ours", "greedy"), ("Ours (narrow)", "greedy"), ("Ours", "ilp")):
                cellv = []
                for n in ocs:
                    r = _get(g, label=lab, circuits=circ, ocs_nodes=n)
                    s = _pct(r["ours"]) if r else ""
                    if r and r["paper"] not in (None, ""):
                        s += f" ({_pct(r['paper'])})"
                    cellv.append(s)
                name = lab if circ == "greedy" else "Ours, ilp"
                out.append(f"| {APP_NAMES[app]} | {PLACEMENT_NAMES[pl]} | {name} | " + " | ".join(cellv) + " |")
            ft = _get(g, label="FT EPS")
            if ft:
                s = _pct(ft["ours"]) + (f" ({_pct(ft['paper'])})" if ft["paper"] not in (None, "") else "")
                out.append(f"| {APP_NAMES[app]} | {PLACEMENT_NAMES[pl]} | FT EPS | {s} (any) |" + " |" * (len(ocs) - 1))
        an = _get(rows, app=app, placement="anneal", label="Ours")
        if an:
            out.append(f"| {APP_NAMES[app]} | Anneal | Ours, ilp (32 OCS, vs EPS only CommPattern) | "
                       + " | ".join(_pct(an["ours"]) if n == 32 else "" for n in ocs) + " |")
    out += ["", "Table 2 (inter-switch volumes, `planner.analysis`, threshold = OCS BDP 1,250 B; paper in brackets):",
            "", "| app | placement | total | large | small |", "|---|---|---|---|---|"]
    for app in apps:
        for pl in PLACEMENTS:
            vals = [_get(rows, metric=m, app=app, placement=pl, table="table2")
                    for m in ("inter_switch_total_B", "inter_switch_large_B", "inter_switch_small_B")]
            if vals[0] is None:
                continue
            out.append(f"| {APP_NAMES[app]} | {PLACEMENT_NAMES[pl]} | "
                       + " | ".join(f"{_mb(v['ours'])} ({_mb(v['paper'])})" for v in vals) + " |")
    out += ["", "The paper's qualitative claims to compare with: " + "; ".join(PAPER_CLAIMS) + ".", ""]
    out.append(WHY)
    return "\n".join(out)


WHY = """Why ours differs from the paper:

- *Pipelined EPS vs store-and-forward relays (the main one).* 003's simulator treats every EPS switch as
  store-and-forward at message level: an inter-switch message pays 4 serial link transmissions on EPS only
  (Table 3, E=>J) and a relayed one 4 EPS + 1 OCS (G=>F=>H=>I), so relaying costs about as much as the EPS
  path it replaces. In ours (``sim``) EPS switches pipeline packets (one MTU of store-and-forward per switch),
  while a relay node receives the whole message before forwarding it (003 §4.1.4), so a relayed 4 MB message
  pays 3 serial transfers where EPS only pays ~1. Relaying is thus relatively more expensive in our model:
  for sequential Neighbor with 32 OCS nodes the exact circuits' bound (busiest link) is 160 ms, the same as
  FT EPS, yet the simulated run takes ~279 ms, and Ours loses to EPS only (-8%) where the paper gains 26%.
- *No computation.* The generators replay communication only (compute=0), whereas 003 replays traces with
  their CPU time; communication is our whole run time, so every gain or loss is larger in magnitude.
- *IS.* FT EPS gains 75-80% in ours against the paper's 16-17%: IS's real trace is dominated by local key
  ranking (CPU time) that our compute-free skeleton leaves out, so the all-to-all is the whole run. Our IS
  volume over 5 iterations is 2,418 MB against the paper's 3,462 MB (about 7 iterations' worth; which
  iterations the paper's trace covered is not stated). The exact ``ilp`` circuits minimize the busiest link
  but simulate slower than 003's greedy for IS Sequential (+17% vs +32%): the bound ignores relay
  serialization and max-min sharing dynamics.
- *64 OCS nodes.* Then every node has a 20 Gbps EPS link, so Ours beats FT EPS (10 Gbps node links) for
  every application in ours; 003 reports that only for IS, whose receive-side NIC bottleneck it names.
- *Table 2.* Counted over the paper's 5 iterations, Neighbor Sequential is exact (1,920 MB) and CG and LU
  come within a few per cent (CG 2,246 vs 2,142 MB, LU 150 vs 151 MB); LU's large/small split differs a little
  (our skeleton's message sizes, not a recorded run). Our METIS CommPattern cuts less Neighbor traffic
  (1,280 MB) than the paper's (1,480 MB, which the paper itself blames on METIS), and for CG it does not
  increase the volume as the paper's did.
- *Iterations.* Neighbor runs the paper's 5 iterations; the NPB kernels run 1 in the simulated cells
  (``--npb-iters``) to keep the run within minutes: the iterations are identical, so the relative time hardly
  depends on it (Table 2 uses 5).
- *Paper values.* Figures 5-6 print no numbers; the bracketed values are the ones the text of §4.2 states.
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--apps", default=",".join(APPS))
    ap.add_argument("--placements", default=",".join(PLACEMENTS))
    ap.add_argument("--ocs", default=",".join(map(str, OCS_NODES)), help="OCS node counts (multiples of 4)")
    ap.add_argument("--quick", action="store_true", help="Neighbor, Sequential, 4 and 32 OCS nodes (< 1 min)")
    ap.add_argument("--no-best", action="store_true", help="skip the annealed-placement cells")
    ap.add_argument("--iters", type=int, default=5, help="Neighbor iterations (the paper: 5)")
    ap.add_argument("--npb-iters", type=int, default=1, help="NPB iterations (the paper: 5)")
    ap.add_argument("--time-limit", type=float, default=10.0, help="ilp seconds per cell")
    ap.add_argument("--anneal-steps", type=int, default=4000, help="annealing batches (reproducible)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out-dir", default=str(RESULTS))
    ap.add_argument("--cache", default=None, help="cache directory (default OUT_DIR/.cache_paper003)")
    ap.add_argument("--no-cache", action="store_true")
    a = ap.parse_args(argv)
    apps, pls = tuple(a.apps.split(",")), tuple(a.placements.split(","))
    try:
        ocs = tuple(int(x) for x in a.ocs.split(","))
    except ValueError:
        ap.error(f"--ocs: expected integers, got {a.ocs!r}")
    if a.quick:
        apps, pls, ocs = ("neighbor",), ("sequential",), (4, 32)
    for x in apps:
        if x not in APPS:
            ap.error(f"--apps: unknown application {x!r} ({', '.join(APPS)})")
    for x in pls:
        if x not in PLACEMENTS:
            ap.error(f"--placements: unknown placement {x!r} ({', '.join(PLACEMENTS)})")
    for n in ocs:
        if n <= 0 or n % 4 or n > 64:
            ap.error(f"--ocs: {n} is not a multiple of 4 between 4 and 64")
    out_dir = Path(a.out_dir)
    cache = None if a.no_cache else Path(a.cache) if a.cache else out_dir / ".cache_paper003"
    tl = min(a.time_limit, 3.0) if a.quick else a.time_limit
    t0 = time.perf_counter()
    rows = run(apps, pls, ocs, quick=a.quick, best=not a.no_best, iters=a.iters, npb_iters=a.npb_iters,
               ilp_time_limit=tl, seed=a.seed, anneal_steps=a.anneal_steps, out_dir=out_dir, cache=cache)
    print(f"{len(rows)} rows -> {out_dir / 'paper003.csv'}, .png, .md  ({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
