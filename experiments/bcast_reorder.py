"""002's experiment: topology- and speed-aware Bcast reordering, all methods, 1 B - 4 MB.

Scenarios: a homogeneous SDR two-level cluster (Ranger-like, 16 nodes per
rack) with 256 and 1,024 leaders scattered over racks as in 002 Table I
(hop delay matrix), and a mixed SDR/DDR cluster (alternate racks SDR 8 Gbps /
DDR 16 Gbps, Glenn-like) with 128 and 256 leaders (speed delay matrix).
Writes one CSV row per (scenario, size, method): predicted and simulated time,
solve time, status, bound and gap; a PNG of the gain over the default order
(model and simulator, per scenario and size) and a Markdown summary with the
anneal-vs-ilp check (``experiments/results/bcast_reorder.{csv,png,md}``).

``anneal`` runs a fixed number of moves (``--anneal-steps``; its time limit is only a guard), so its rows
do not depend on the machine's load; ``ilp`` (CP-SAT, several workers, a time limit) may return another
order of equal predicted time, or stop at its limit, from run to run.

    python experiments/bcast_reorder.py [--quick] [--anneal-steps 100000] [--ilp-limit 10] [-o DIR]
    python experiments/bcast_reorder.py --replot      # figures from the existing CSV
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from topoplan.problems.bcast import BcastProblem, solve
from topoplan.problems.bcast.allocation import cluster, generate
from topoplan.sim.simmodel import SimModel

SIZES = [1, 64, 1024, 16384, 262144, 1 << 20, 4 << 20]
METHODS = ("default", "dft", "bft", "greedy", "anneal", "ilp")


def scenarios(quick: bool):
    homo = cluster(128, 16, name="ranger-like")
    mixed = cluster(32, 16, bw_Bps="mixed", name="glenn-like")
    yield "homogeneous-32", homo, generate(homo, 32, racks=8, seed=1), "hops"
    yield "mixed-32", mixed, generate(mixed, 32, racks=8, seed=1), "speed"
    yield "homogeneous-256", homo, generate(homo, 256, racks=100, seed=1), "hops"
    if not quick:
        yield "homogeneous-1024", homo, generate(homo, 1024, racks=128, seed=1), "hops"
    yield "mixed-128", mixed, generate(mixed, 128, racks=32, seed=1), "speed"
    if not quick:
        yield "mixed-256", mixed, generate(mixed, 256, racks=32, seed=1), "speed"


def run(quick=False, anneal_limit=60.0, ilp_limit=10.0, max_sim_messages=20000, out=sys.stdout, ilp_max_leaders=64,
        anneal_steps=100_000):
    fields = ["scenario", "leaders", "delay", "bytes", "tree", "method", "predicted_time_s", "simulated_time_s",
              "sim_model", "default_time_s", "gain_vs_default", "solve_s", "status", "bound_s", "gap"]
    w = csv.DictWriter(out, fieldnames=fields)
    w.writeheader()
    sizes = SIZES[::2] if quick else SIZES
    for name, topo, nodes, delay in scenarios(quick):
        for nb in sizes:
            prob = BcastProblem.build(topo, placement=nodes, root=0, bytes_B=nb, tree="auto", delay=delay)
            for m in METHODS:
                if m == "ilp" and prob.n > ilp_max_leaders:
                    continue  # the class model grows as leaders x racks^2: exact only on small jobs
                lim = anneal_limit if m == "anneal" else ilp_limit if m == "ilp" else None
                steps = {"max_steps": anneal_steps} if m == "anneal" else {}
                r = solve(prob, m, time_limit=lim, seed=0, max_sim_messages=max_sim_messages, **steps)
                w.writerow({"scenario": name, "leaders": prob.n, "delay": delay, "bytes": nb,
                            "tree": prob.schedule.kind, "method": m, "predicted_time_s": r.objective,
                            "simulated_time_s": r.metrics["simulated_time_s"],
                            "sim_model": (SimModel.coerce(r.options["sim_model"]).label()
                                          if r.metrics["simulated_time_s"] is not None else ""),
                            "default_time_s": r.metrics["default_time_s"],
                            "gain_vs_default": r.metrics["speedup_vs_default"] - 1.0, "solve_s": round(r.wall_s, 3),
                            "status": r.status, "bound_s": r.bound, "gap": r.gap})
                out.flush()


def load_rows(path: Path) -> list[dict]:
    """The CSV written by :func:`run`, numbers parsed."""
    rows = []
    with open(path, newline="") as fh:
        for r in csv.DictReader(fh):
            for k in ("leaders", "bytes"):
                r[k] = int(r[k])
            for k in ("predicted_time_s", "simulated_time_s", "default_time_s", "gain_vs_default", "solve_s",
                      "bound_s", "gap"):
                r[k] = float(r[k]) if r[k] not in ("", "None", "nan") else None
            rows.append(r)
    return rows


def _sim_gain(rows, r):
    """Simulated speed-up of r's order over the default order of the same cell (None when not simulated)."""
    base = next((x for x in rows if x["scenario"] == r["scenario"] and x["bytes"] == r["bytes"]
                 and x["method"] == "default"), None)
    if base is None or not base["simulated_time_s"] or not r["simulated_time_s"]:
        return None
    return base["simulated_time_s"] / r["simulated_time_s"] - 1.0


def markdown(rows) -> str:
    """The results table (docs/bcast.md shows it): best gain per scenario (model and simulator) and the
    anneal-vs-ilp check."""
    out = ["| scenario | leaders | delay | best gain, model (size, method) | best gain, simulated (size, method) |",
           "|---|---:|---|---|---|"]
    for sc in dict.fromkeys(r["scenario"] for r in rows):
        cell = [r for r in rows if r["scenario"] == sc and r["method"] != "default"]
        bm = max(cell, key=lambda r: r["gain_vs_default"])
        sims = [(g, r) for r in cell if (g := _sim_gain(rows, r)) is not None]
        bs = max(sims, key=lambda t: t[0]) if sims else None
        sim_txt = f"{bs[0]:+.0%} ({_size(bs[1]['bytes'])}, {bs[1]['method']})" if bs else "not simulated"
        out.append(f"| {sc} | {cell[0]['leaders']} | {cell[0]['delay']} | {bm['gain_vs_default']:+.0%} "
                   f"({_size(bm['bytes'])}, {bm['method']}) | {sim_txt} |")
    ilp = [r for r in rows if r["method"] == "ilp"]
    opt = [r for r in ilp if r["status"] == "optimal"]
    worst = 0.0
    for r in opt:
        a = next(x for x in rows if x["method"] == "anneal" and x["scenario"] == r["scenario"]
                 and x["bytes"] == r["bytes"])
        worst = max(worst, a["predicted_time_s"] / r["predicted_time_s"] - 1.0)
    out += ["", f"`ilp` proved optimality in {len(opt)} of {len(ilp)} cells it ran; there `anneal` is at most "
            f"{worst:.2%} above the optimum."]
    return "\n".join(out) + "\n"


def _size(b: int) -> str:
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB" if b >= 1024 else f"{b} B"


def plot(rows, path: Path) -> None:
    """Gain over the default order vs message size: one panel per scenario, model (solid) and simulator (dashed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    from topoplan.core.io import atomic_write

    scen = list(dict.fromkeys(r["scenario"] for r in rows))
    cols = min(3, len(scen))
    nrow = -(-len(scen) // cols)
    fig, axes = plt.subplots(nrow, cols, figsize=(5 * cols, 3.6 * nrow), squeeze=False)
    colors = dict(zip(METHODS[1:], plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    for ax, sc in zip(axes.ravel(), scen):
        for m in METHODS[1:]:
            cell = sorted((r for r in rows if r["scenario"] == sc and r["method"] == m), key=lambda r: r["bytes"])
            if not cell:
                continue
            x = [r["bytes"] for r in cell]
            ax.plot(x, [100 * r["gain_vs_default"] for r in cell], "-o", ms=3, color=colors[m], label=m)
            sim = [(r["bytes"], g) for r in cell if (g := _sim_gain(rows, r)) is not None]
            if sim:
                ax.plot([t[0] for t in sim], [100 * t[1] for t in sim], "--", color=colors[m], alpha=0.6)
        ax.set_xscale("log", base=2)
        # the sizes run, in B / KiB / MiB (binary prefixes: the sizes are powers of two)
        sizes = sorted({r["bytes"] for r in rows if r["scenario"] == sc})
        ax.xaxis.set_major_locator(FixedLocator(sizes))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: _size(int(round(v)))))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.tick_params(axis="x", labelsize=8, labelrotation=35)
        for lab in ax.get_xticklabels():
            lab.set_horizontalalignment("right")
            lab.set_rotation_mode("anchor")
        delay = next(r["delay"] for r in rows if r["scenario"] == sc)
        ax.set_title(f"{sc} ({delay} delays)", fontsize=10)
        ax.set_xlabel("message size")
        ax.set_ylabel("faster than default (%)")
        ax.grid(alpha=0.3)
    for ax in axes.ravel()[len(scen):]:
        ax.axis("off")
    axes[0, 0].legend(fontsize=8, title="solid: model, dashed: simulated", title_fontsize=7)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    atomic_write(path, buf.getvalue(), binary=True)


def main(argv=None) -> int:
    from topoplan.core.io import atomic_write

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--out-dir", type=Path, default=ROOT / "experiments" / "results")
    ap.add_argument("--quick", action="store_true", help="fewer sizes, no 1,024/256-leader jobs")
    ap.add_argument("--anneal-steps", type=int, default=100_000, help="anneal moves per cell (reproducible)")
    ap.add_argument("--anneal-limit", type=float, default=60.0, help="anneal seconds per cell (a guard)")
    ap.add_argument("--ilp-limit", type=float, default=10.0)
    ap.add_argument("--max-sim-messages", type=int, default=20000)
    ap.add_argument("--ilp-max-leaders", type=int, default=64)
    ap.add_argument("--replot", action="store_true", help="redraw the PNG and Markdown from the existing CSV")
    a = ap.parse_args(argv)
    csv_path = a.out_dir / "bcast_reorder.csv"
    if not a.replot:
        buf = io.StringIO()
        run(a.quick, a.anneal_limit, a.ilp_limit, a.max_sim_messages, buf, a.ilp_max_leaders, a.anneal_steps)
        atomic_write(csv_path, buf.getvalue())
    rows = load_rows(csv_path)
    plot(rows, a.out_dir / "bcast_reorder.png")
    atomic_write(a.out_dir / "bcast_reorder.md", markdown(rows))
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
