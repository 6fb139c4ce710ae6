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

Every scenario runs at ``--seeds`` seeds (default 5): seed ``k`` draws the leaders' racks with allocation
seed ``1 + k`` (seed 0: today's allocations) and gives the methods seed ``k`` (anneal's moves, the ilp's
workers); the Markdown gives each headline figure as ``mean [min, max]`` over the seeds.

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

from experiments._common import SEEDS, Measured  # noqa: E402  (after the path set-up above)
from topoplan.problems.bcast import BcastProblem, solve  # noqa: E402
from topoplan.problems.bcast.allocation import cluster, generate  # noqa: E402
from topoplan.sim.simmodel import SimModel  # noqa: E402

SIZES = [1, 64, 1024, 16384, 262144, 1 << 20, 4 << 20]
METHODS = ("default", "dft", "bft", "greedy", "anneal", "ilp")
ALLOCATION_SEED = 1      # seed 0's allocation seed; seed k draws with ALLOCATION_SEED + k
FIELDS = ["seed", "scenario", "leaders", "delay", "bytes", "tree", "method", "predicted_time_s", "simulated_time_s",
          "sim_model", "default_time_s", "gain_vs_default", "solve_s", "status", "bound_s", "gap"]


def scenarios(quick: bool, seed: int = 0):
    """The scenarios at ``seed``: the leaders' racks drawn with allocation seed ``ALLOCATION_SEED + seed``."""
    homo = cluster(128, 16, name="ranger-like")
    mixed = cluster(32, 16, bw_Bps="mixed", name="glenn-like")
    alloc = ALLOCATION_SEED + seed
    yield "homogeneous-32", homo, generate(homo, 32, racks=8, seed=alloc), "hops"
    yield "mixed-32", mixed, generate(mixed, 32, racks=8, seed=alloc), "speed"
    yield "homogeneous-256", homo, generate(homo, 256, racks=100, seed=alloc), "hops"
    if not quick:
        yield "homogeneous-1024", homo, generate(homo, 1024, racks=128, seed=alloc), "hops"
    yield "mixed-128", mixed, generate(mixed, 128, racks=32, seed=alloc), "speed"
    if not quick:
        yield "mixed-256", mixed, generate(mixed, 256, racks=32, seed=alloc), "speed"


def run(quick=False, anneal_limit=60.0, ilp_limit=10.0, max_sim_messages=20000, out=sys.stdout, ilp_max_leaders=64,
        anneal_steps=100_000, seeds=(0,)):
    """Every scenario, size and method at every seed of ``seeds``, one CSV row each, written to ``out``."""
    w = csv.DictWriter(out, fieldnames=FIELDS)
    w.writeheader()
    sizes = SIZES[::2] if quick else SIZES
    for seed in seeds:
        _run_seed(w, out, quick, seed, sizes, anneal_limit, ilp_limit, max_sim_messages, ilp_max_leaders, anneal_steps)


def _run_seed(w, out, quick, seed, sizes, anneal_limit, ilp_limit, max_sim_messages, ilp_max_leaders, anneal_steps):
    for name, topo, nodes, delay in scenarios(quick, seed):
        for nb in sizes:
            prob = BcastProblem.build(topo, placement=nodes, root=0, bytes_B=nb, tree="auto", delay=delay)
            for m in METHODS:
                if m == "ilp" and prob.n > ilp_max_leaders:
                    continue  # the class model grows as leaders x racks^2: exact only on small jobs
                lim = anneal_limit if m == "anneal" else ilp_limit if m == "ilp" else None
                steps = {"max_steps": anneal_steps} if m == "anneal" else {}
                r = solve(prob, m, time_limit=lim, seed=seed, max_sim_messages=max_sim_messages, **steps)
                w.writerow({"seed": seed, "scenario": name, "leaders": prob.n, "delay": delay, "bytes": nb,
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
            r["seed"] = int(r.get("seed") or 0)      # a CSV written before seeds: seed 0
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
                 and x["method"] == "default" and x["seed"] == r["seed"]), None)
    if base is None or not base["simulated_time_s"] or not r["simulated_time_s"]:
        return None
    return base["simulated_time_s"] / r["simulated_time_s"] - 1.0


def _best(cells):
    """``(gain, row)`` of the largest gain among ``(gain, row)`` pairs (None for none)."""
    return max(cells, key=lambda t: t[0]) if cells else None


def _where(bests) -> str:
    """Where the best gains were: the (size, method) of most seeds, and at how many."""
    places = [f"{_size(r['bytes'])}, {r['method']}" for _, r in bests]
    top = max(dict.fromkeys(places), key=places.count)
    return top if len(places) == 1 else f"{top}: {places.count(top)} of {len(places)} seeds"


def markdown(rows) -> str:
    """The results table (docs/bcast.md shows it): best gain per scenario (model and simulator; ``mean [min,
    max]`` over the seeds, and where it was) and the anneal-vs-ilp check over every seed."""
    seeds = sorted({r["seed"] for r in rows})
    head = ([f"Every scenario at {len(seeds)} seeds ({', '.join(map(str, seeds))}): seed k draws the leaders' racks "
             f"with allocation seed {ALLOCATION_SEED} + k and seeds anneal and the ilp with k. Best gains as `mean "
             "[min, max]` over the seeds (each seed's best over sizes and methods), with the size and method of "
             "the best at most seeds.", ""] if len(seeds) > 1 else [])
    out = head + ["| scenario | leaders | delay | best gain, model (size, method) | best gain, simulated (size, method) |",
                  "|---|---:|---|---|---|"]
    for sc in dict.fromkeys(r["scenario"] for r in rows):
        model, sim = [], []
        for s in seeds:
            cell = [r for r in rows if r["scenario"] == sc and r["method"] != "default" and r["seed"] == s]
            if not cell:
                continue
            model.append(_best([(r["gain_vs_default"], r) for r in cell]))
            bs = _best([(g, r) for r in cell if (g := _sim_gain(rows, r)) is not None])
            if bs is not None:
                sim.append(bs)
        first = next(r for r in rows if r["scenario"] == sc)

        def text(bests):
            ss = [r["seed"] for _, r in bests]
            return f"{Measured.over([Measured('{:+.0%}', (g,)) for g, _ in bests], ss)} ({_where(bests)})"
        out.append(f"| {sc} | {first['leaders']} | {first['delay']} | {text(model)} | "
                   f"{text(sim) if sim else 'not simulated'} |")
    ilp = [r for r in rows if r["method"] == "ilp"]
    opt = [r for r in ilp if r["status"] == "optimal"]
    worst = 0.0
    for r in opt:
        a = next(x for x in rows if x["method"] == "anneal" and x["scenario"] == r["scenario"]
                 and x["bytes"] == r["bytes"] and x["seed"] == r["seed"])
        worst = max(worst, a["predicted_time_s"] / r["predicted_time_s"] - 1.0)
    over = f" (over {len(seeds)} seeds)" if len(seeds) > 1 else ""
    out += ["", f"`ilp` proved optimality in {len(opt)} of {len(ilp)} cells it ran{over}; there `anneal` is at most "
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
    ap.add_argument("--seeds", type=int, default=SEEDS, help=f"seeds per scenario, 0 and the next ones (default {SEEDS})")
    ap.add_argument("--replot", action="store_true", help="redraw the PNG and Markdown from the existing CSV")
    a = ap.parse_args(argv)
    if a.seeds < 1:
        ap.error(f"--seeds: at least 1, got {a.seeds}")
    csv_path = a.out_dir / "bcast_reorder.csv"
    if not a.replot:
        buf = io.StringIO()
        run(a.quick, a.anneal_limit, a.ilp_limit, a.max_sim_messages, buf, a.ilp_max_leaders, a.anneal_steps,
            seeds=tuple(range(a.seeds)))
        atomic_write(csv_path, buf.getvalue())
    rows = load_rows(csv_path)
    plot([r for r in rows if r["seed"] == rows[0]["seed"]], a.out_dir / "bcast_reorder.png")   # the first seed
    atomic_write(a.out_dir / "bcast_reorder.md", markdown(rows))
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
