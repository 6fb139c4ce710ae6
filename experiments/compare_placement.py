"""Process placement methods compared on the papers' systems, simulated under the three network models.

Every placement method on the neighbor 16x16 pattern (4 MB, 5 iterations)
and NPB CG, MG, IS, LU and FT (class C, 256 ranks) on 003's system (4
switches x 16 nodes x 4 cores) and 001's two systems (8 x 32 and 16 x 16
nodes, one core each). One CSV row per (system, traffic, method):
inter-switch bytes, hop-weighted bytes, the congestion bound, the simulated
time under each model of ``--models`` (columns ``simulated_s.<model>``; the
traffic replayed as one bulk phase on the EPS network, circuits only for
``joint``; see :mod:`experiments._common`), the solve time, and the
status/bound/gap of ``ilp``.

    python -m experiments.compare_placement            # 6 patterns x 3 systems, about 15 minutes
    python -m experiments.compare_placement --quick    # neighbor and CG on 003, about a minute

CG and LU are generated with fewer iterations than class C's (15 and 25):
every iteration has the same pattern, so the placement problem only scales.
``anneal`` minimizes hop-weighted bytes from the ``metis`` placement;
``anneal-cong`` minimizes the congestion bound. ``joint`` (placement and
circuits together) and ``kahip``/``scotch`` are included when they run here.
A PNG shows each method's congestion bound and simulated time relative to ``metis``.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
import time
from pathlib import Path

import numpy as np

from experiments._common import MODELS, ROOT, model_of, parse_models

METHODS = ("sequential", "round-robin", "random", "metis", "greedy", "anneal", "anneal-cong", "ilp", "joint",
           "kahip", "scotch")
SYSTEMS = ("paper003", "paper001-8x32", "paper001-16x16")
TRAFFIC = {
    "neighbor": "neighbor2d:rows=16,cols=16,bytes=4MB,iters=5",
    "cg": "npb:kernel=cg,class=C,np=256,iters=15",
    "mg": "npb:kernel=mg,class=C,np=256",
    "is": "npb:kernel=is,class=C,np=256",
    "lu": "npb:kernel=lu,class=C,np=256,iters=25",
    "ft": "npb:kernel=ft,class=C,np=256",
}
def fields(models=MODELS) -> tuple[str, ...]:
    """The CSV columns: one ``simulated_s.<model>`` per model."""
    return ("system", "traffic", "method", "status", "inter_switch_MB", "inter_switch_large_MB", "hop_weighted_MB",
            "congestion_bound_s", *(f"simulated_s.{m}" for m in models), "solve_s", "objective", "bound", "gap",
            "note")


FIELDS = fields()


def run_one(prob, method: str, *, seed: int, anneal_s: float, ilp_s: float):
    """Solve one instance with one method; ``None`` when the method does not apply or is not installed."""
    from topoplan.core.errors import TopoplanError
    from topoplan.problems.placement import PlacementProblem, solve

    try:
        if method == "anneal-cong":
            p2 = PlacementProblem.build(prob.topology, prob.traffic, objective="congestion", threshold_B=prob.threshold_B)
            return solve(p2, "anneal", time_limit=anneal_s, seed=seed)
        limit = {"anneal": anneal_s, "ilp": ilp_s, "joint": ilp_s}.get(method)
        return solve(prob, method, time_limit=limit, seed=seed)
    except (TopoplanError, NotImplementedError) as e:
        return str(e) or "not implemented"


def run(systems=SYSTEMS, traffic=tuple(TRAFFIC), methods=METHODS, *, seed=0, anneal_s=5.0, ilp_s=10.0,
        simulate=True, models=MODELS, log=print):
    """All rows of the comparison (dicts with :func:`fields`)."""
    from topoplan.problems.placement import PlacementProblem, simulated_time
    from topoplan.core.topology_io import load_topology
    from topoplan.traffic.sources import load_traffic

    rows = []
    for kind in traffic:
        t0 = time.perf_counter()
        tr = load_traffic(TRAFFIC[kind])
        log(f"{kind}: {tr.n_ranks} ranks generated in {time.perf_counter() - t0:.1f} s")
        for system in systems:
            prob = PlacementProblem.build(load_topology(system), tr)
            sims: dict = {}
            for method in methods:
                res = run_one(prob, method, seed=seed, anneal_s=anneal_s, ilp_s=ilp_s)
                if not hasattr(res, "plan"):
                    log(f"  {system} {kind} {method}: skipped ({res})")
                    continue
                m = res.metrics
                sim = {}
                if simulate:
                    key = (tuple(res.plan["rank_to_node"]), str(res.plan.get("circuits")))
                    if key not in sims:   # methods that agree share one simulation
                        sims[key] = {mo: simulated_time(prob, res.plan, None, model_of(mo)) for mo in models}
                    sim = sims[key]
                row = {"system": system, "traffic": kind, "method": method, "status": res.status,
                       "inter_switch_MB": m["inter_switch_bytes"] / 1e6,
                       "inter_switch_large_MB": m["inter_switch_large_bytes"] / 1e6,
                       "hop_weighted_MB": m["hop_weighted_bytes"] / 1e6, "congestion_bound_s": m["congestion_bound_s"],
                       **{f"simulated_s.{mo}": sim.get(mo) for mo in models},
                       "solve_s": res.wall_s, "objective": res.objective, "bound": res.bound,
                       "gap": res.gap, "note": (res.message or "")[:120]}
                rows.append(row)
                log(f"  {system} {kind} {method:12s} inter-switch {row['inter_switch_MB']:10.1f} MB  "
                    f"hops {row['hop_weighted_MB']:11.1f} MB  bound {row['congestion_bound_s']:.4f} s  "
                    + "".join(f"sim[{mo}] {v:.4f} s  " for mo, v in sim.items()) + f"solve {res.wall_s:.2f} s  {res.status}")
    return rows


def write_csv(rows, path: Path, models=MODELS) -> None:
    from topoplan.core.io import atomic_write

    cols = fields(models)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if r.get(k) is None else (f"{r[k]:.6g}" if isinstance(r[k], float) else r[k]))
                    for k in cols})
    atomic_write(path, buf.getvalue())


# naive placements, far off the others (up to 12 x metis): drawn cut at the panel's top with their value written on
# them, so that the methods that matter get the whole (linear) axis
BASELINES = ("random", "round-robin")


def plot(rows, path: Path) -> None:
    """Per (system, traffic): congestion bound and simulated time of every method relative to metis.

    Linear axes whose top is set by the methods other than :data:`BASELINES` (1.1 x their largest ratio, at
    least 1.5); a bar beyond the top (in practice ``random`` and ``round-robin``) is cut there, marked with a
    white break and labelled with its value. The legend sits above the panels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from topoplan.core.io import atomic_write

    cases = list(dict.fromkeys((r["system"], r["traffic"]) for r in rows))
    methods = list(dict.fromkeys(r["method"] for r in rows))
    metrics = [("congestion_bound_s", "congestion bound / metis")] + [
        (f"simulated_s.{m}", f"simulated / metis\n({m} model)") for m in MODELS if any(r.get(f"simulated_s.{m}") for r in rows)]
    fig, axes = plt.subplots(len(metrics), 1, figsize=(max(8, 0.9 * len(cases) + 3), 2.6 * len(metrics) + 1.2),
                             squeeze=False)
    width = 0.8 / max(1, len(methods))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (key, label) in zip(axes[:, 0], metrics):
        ratios = {}
        for meth in methods:
            vals = []
            for c in cases:
                by = {r["method"]: r for r in rows if (r["system"], r["traffic"]) == c}
                base = by.get("metis", {}).get(key)
                v = by.get(meth, {}).get(key)
                vals.append(v / base if v is not None and base else np.nan)
            ratios[meth] = np.array(vals, dtype=float)
        kept = np.concatenate([v for m, v in ratios.items() if m not in BASELINES] or [np.array([1.0])])
        kept = kept[np.isfinite(kept)]
        top = max(1.5, 1.1 * float(kept.max())) if kept.size else 1.5
        for j, meth in enumerate(methods):
            vals = ratios[meth]
            x = np.arange(len(cases)) + (j - len(methods) / 2 + 0.5) * width
            ax.bar(x, np.minimum(vals, top), width, label=meth, color=colors[j % len(colors)])
            for xi, v in zip(x[vals > top], vals[vals > top]):
                ax.plot([xi - width / 2, xi + width / 2], [top * 0.90, top * 0.93], color="white", lw=2.2,
                        solid_capstyle="butt")
                ax.text(xi, top * 0.88, f"{v:.3g}", rotation=90, ha="center", va="top", fontsize=6.5,
                        color="white", fontweight="bold")
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_ylim(0, top)
        ax.set_xlim(-0.5, len(cases) - 0.5)
        ax.set_ylabel(label)
        ax.grid(axis="y", alpha=0.3)
        ax.set_xticks(np.arange(len(cases)))
        ax.set_xticklabels([f"{s.replace('paper', '')}\n{t}" for s, t in cases], fontsize=8)
    axes[0, 0].set_title("Placement methods relative to metis (lower is better; bars cut at the top are "
                         f"{' and '.join(m for m in BASELINES if m in methods) or 'outliers'}, their value written "
                         "on them)")
    h, lab = axes[0, 0].get_legend_handles_labels()
    fig.legend(h, lab, loc="upper center", ncol=len(lab), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.35 / fig.get_figheight()))
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    atomic_write(path, buf.getvalue(), binary=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--traffic", default=",".join(TRAFFIC))
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--anneal", type=float, default=5.0, help="anneal seconds per instance")
    ap.add_argument("--time-limit", type=float, default=10.0, help="ilp/joint seconds per instance")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-simulate", action="store_true", help="skip the simulator")
    ap.add_argument("--models", default=",".join(MODELS), help=f"network models ({', '.join(MODELS)})")
    ap.add_argument("--quick", action="store_true", help="neighbor and CG on 003 only, short budgets")
    ap.add_argument("--out", default=str(ROOT / "experiments" / "results" / "compare_placement.csv"))
    a = ap.parse_args(argv)
    systems, traffic = a.systems.split(","), a.traffic.split(",")
    if a.quick:
        systems, traffic, a.anneal, a.time_limit = ["paper003"], ["neighbor", "cg"], 2.0, 5.0
    try:
        models = parse_models(a.models)
    except Exception as exc:  # TopoplanError: one line
        ap.error(str(exc))
    bad = [t for t in traffic if t not in TRAFFIC]
    if bad:
        ap.error(f"unknown traffic {bad[0]!r} (choose from {', '.join(TRAFFIC)})")
    t0 = time.perf_counter()
    rows = run(systems, traffic, a.methods.split(","), seed=a.seed, anneal_s=a.anneal, ilp_s=a.time_limit,
               simulate=not a.no_simulate, models=models)
    out = Path(a.out)
    write_csv(rows, out, models)
    plot(rows, out.with_suffix(".png"))
    print(f"wrote {out} and {out.with_suffix('.png')} ({len(rows)} rows, {time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
