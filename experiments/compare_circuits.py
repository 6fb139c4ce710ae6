"""Heuristic vs optimal circuit assignment on the papers' systems, simulated under the three network models.

Runs every circuit method on the 000, 001 and 003 systems with the neighbor,
CG, MG, IS and LU traffic of the papers, at each OCS size of the papers, and
writes one CSV row per (system, OCS size, traffic, method): the
communication-time bound the method reaches, the EPS uplink bytes, the
simulated communication time under each model of ``--models`` (columns
``simulated_s.<model>``: ``paper``, ``pipelined``, ``store-and-forward``; see
:mod:`experiments._common`) and its ratio to the bound (``simulated_over_bound.<model>``), the solve time and the gap to the exact optimum
(to the best lower bound when the exact model did not prove optimality in its
time limit).

    python -m experiments.compare_circuits                 # the whole grid, CSV to experiments/results/
    python -m experiments.compare_circuits --quick         # one OCS size per system
    python -m experiments.compare_circuits --systems 003 --traffic neighbor,cg --time-limit 5

Traffic comes from the generator specs (``neighbor2d:...``, ``npb:kernel=...``).
The simulated time replays the traffic as one bulk phase (every pair's bytes
at once: fast, and what the circuit model optimizes); ``--simulate trace``
replays the generated MPI trace instead (slower, includes the application's
phases), ``--simulate off`` skips the simulator. A PNG shows, per system and
traffic, each method's bound and simulated time relative to EPS only.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
import time
from pathlib import Path

import numpy as np

from experiments._common import MODEL_NAMES, MODELS, ROOT, model_of, parse_models

METHODS = ("none", "sp", "three-step", "greedy", "matching", "ilp", "anneal")

# (system, preset, --set overrides per OCS size, ranks, threshold, traffic kinds); 000's size is the pathway count
SYSTEMS = {
    "000": [("paper000", {f"{k} pathways": ([], k) for k in (6, 12, 24, 48, 64)}, 128, 8192.0,
             ("neighbor", "cg", "mg"))],
    "001": [("paper001-8x32", {"64 OCS": (["ocs.nodes_per_switch=8"], None),
                               "128 OCS": (["ocs.nodes_per_switch=16"], None)}, 256, 8192.0,
             ("neighbor", "cg", "lu", "mg")),
            ("paper001-16x16", {"64 OCS": (["ocs.nodes_per_switch=4"], None),
                                "128 OCS": (["ocs.nodes_per_switch=8"], None)}, 256, 8192.0,
             ("neighbor", "cg", "lu", "mg"))],
    "003": [("paper003", {f"{4 * k} OCS": ([f"ocs.nodes_per_switch={k}"], None) for k in (1, 2, 4, 8, 16)}, 256,
             None, ("neighbor", "cg", "is", "lu"))],
}


def traffic_spec(kind: str, ranks: int) -> str:
    """The generator spec of the papers' traffic."""
    if kind == "neighbor":
        if ranks == 128:
            return "neighbor2d:rows=8,cols=16,bytes=40MB,iters=5"    # 000
        return "neighbor2d:rows=16,cols=16,bytes=4MB,iters=5"        # 001, 003
    return f"npb:kernel={kind},class=C,np={ranks},iters=5"


def load_traffic(kind: str, ranks: int):
    """``(trace, Traffic, spec)`` of one of the papers' traffic kinds."""
    from topoplan.traffic.sources import load_source

    spec = traffic_spec(kind, ranks)
    trace, tr = load_source(spec)
    return trace, tr, spec


def run(systems=("000", "001", "003"), traffic=("neighbor", "cg", "mg", "is", "lu"), methods=METHODS,
        time_limit=10.0, anneal_s=5.0, quick=False, solver="cbc", out=None, log=print,
        simulate="bulk", models=MODELS) -> list[dict]:
    """Run the grid; returns the rows (and writes them as CSV to ``out``)."""
    from topoplan.problems.circuits import CircuitProblem
    from topoplan.problems.circuits.problem import compare
    from topoplan.problems.circuits.problem import plan_simulator
    from topoplan.core.placement import sequential
    from topoplan.core.topology_io import load_topology

    rows = []
    for system in systems:
        for preset, sizes, ranks, thr, kinds in SYSTEMS[system]:
            items = list(sizes.items())
            if quick:
                items = items[-2:-1] if len(items) > 1 else items
            for kind in kinds:
                if kind not in traffic:
                    continue
                trace, tr, label = load_traffic(kind, ranks)
                for size, (sets, max_c) in items:
                    topo = load_topology(preset, sets)
                    pl = sequential(tr.n_ranks, topo)
                    prob = CircuitProblem.build(topo, tr, pl, threshold_B=thr, max_circuits=max_c)
                    sim = None
                    if simulate != "off":
                        sim = {m: plan_simulator(prob, trace if simulate == "trace" else None, model_of(m))
                               for m in models}
                    t0 = time.perf_counter()
                    res = []
                    for m in methods:
                        opts = {"solver": solver} if m == "ilp" else {}
                        tl = time_limit if m == "ilp" else anneal_s
                        res += compare(prob, [m], time_limit=tl, simulate=sim, **opts)
                    # gaps against the exact model of this instance
                    ex = next((r for r in res if r["method"] == "ilp"), None)
                    lb = max((r["bound"] for r in res if r["bound"] is not None), default=None)
                    for r in res:
                        T = r["objective"]
                        gap_exact = (T - ex["objective"]) / T if ex and ex["status"] == "optimal" and T > 0 else None
                        gap_bound = max(0.0, (T - lb) / T) if lb is not None and T > 0 else None
                        row = {"system": system, "topology": preset, "ocs": size, "traffic": kind, "source": label,
                               "method": r["method"], "status": r["status"], "bound_s": T, "lower_bound_s": r["bound"],
                               "uplink_bytes": r["uplink_bytes"], "circuits": r["circuits"],
                               **{f"simulated_s.{m}": r.get(f"simulated_s.{m}") for m in models},
                               **{f"simulated_over_bound.{m}": (r[f"simulated_s.{m}"] / T
                                                                if r.get(f"simulated_s.{m}") is not None and T > 0
                                                                else None) for m in models},
                               "solve_s": r["wall_s"], "gap_to_exact": gap_exact, "gap_to_bound": gap_bound}
                        rows.append(row)
                    log(_line(rows[-len(res):], time.perf_counter() - t0))
    if out is not None:
        write_csv(rows, Path(out))
        if rows:
            plot(rows, Path(out).with_suffix(".png"))
    return rows


def write_csv(rows, path: Path) -> None:
    from topoplan.core.io import atomic_write

    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]) if rows else ["system"])
    w.writeheader()
    w.writerows(rows)
    atomic_write(path, buf.getvalue())


def plot(rows, path: Path) -> None:
    """One panel per (topology, traffic): bound and simulated time (each model) of each method relative to
    EPS only, at the largest OCS size run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from topoplan.core.io import atomic_write

    panels = {}
    for r in rows:
        panels.setdefault((r["topology"], r["traffic"]), []).append(r)
    n = len(panels)
    # the column count (4, else 5 or 3) that leaves the fewest empty slots: 15 panels are 5 x 3, not 4 x 4 with
    # a blank one; a slot left over holds the legend
    cols = min((c for c in (4, 5, 3) if c <= n), key=lambda c: -n % c) if n > 3 else max(n, 1)
    nrows = (n + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(4 * cols, 3 * nrows), squeeze=False)
    for ax, ((topo, kind), rs) in zip(axes.ravel(), panels.items()):
        size = rs[-1]["ocs"]
        rs = [r for r in rs if r["ocs"] == size]
        base = next((r for r in rs if r["method"] == "none"), rs[0])
        names = [r["method"] for r in rs]
        x = np.arange(len(rs))
        models = [m for m in MODELS if rs[0].get(f"simulated_s.{m}") is not None]
        w = 0.8 / (1 + len(models))
        ax.bar(x - 0.4 + w / 2, [r["bound_s"] / base["bound_s"] for r in rs], w, label="bound", color="0.3")
        for k, m in enumerate(models):
            col = f"simulated_s.{m}"
            ax.bar(x - 0.4 + w * (k + 1.5), [r[col] / base[col] for r in rs], w, label=f"simulated, {MODEL_NAMES[m]}")
        ax.axhline(1.0, color="k", lw=0.6)
        ax.set_xticks(x, names, rotation=45, ha="right", fontsize=7)
        ax.set_title(f"{topo}, {size}, {kind}", fontsize=8)
        ax.set_ylabel("relative to EPS only", fontsize=7)
    for ax in axes.ravel()[n:]:
        ax.axis("off")
    h, lab = axes.ravel()[0].get_legend_handles_labels()
    if n < axes.size:
        axes.ravel()[n].legend(h, lab, loc="center", fontsize=9, frameon=False)
        fig.tight_layout()
    else:
        fig.legend(h, lab, loc="upper center", ncol=len(lab), fontsize=8, frameon=False)
        fig.tight_layout(rect=(0, 0, 1, 1 - 0.3 / fig.get_figheight()))
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    atomic_write(path, buf.getvalue(), binary=True)


def _line(rows, wall) -> str:
    r0 = rows[0]
    cells = " ".join(f"{r['method']}={r['bound_s'] * 1e3:.1f}ms" + ("*" if r["status"] == "optimal" else "")
                     for r in rows)
    return f"{r0['system']} {r0['topology']} {r0['ocs']:>11} {r0['traffic']:8s} {cells}  ({wall:.1f} s)"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--systems", default="000,001,003")
    ap.add_argument("--traffic", default="neighbor,cg,mg,is,lu")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--time-limit", type=float, default=10.0, help="ilp seconds per instance")
    ap.add_argument("--anneal", type=float, default=5.0, help="anneal seconds per instance")
    ap.add_argument("--solver", default="cbc")
    ap.add_argument("--quick", action="store_true", help="one OCS size per system")
    ap.add_argument("--simulate", choices=("bulk", "trace", "off"), default="bulk",
                    help="simulated time: bulk replay of the traffic (default), the MPI trace, or none")
    ap.add_argument("--models", default=",".join(MODELS), help=f"network models ({', '.join(MODELS)})")
    ap.add_argument("--out", default=str(ROOT / "experiments" / "results" / "compare_circuits.csv"))
    a = ap.parse_args(argv)
    try:
        models = parse_models(a.models)
    except Exception as exc:  # TopoplanError: one line
        ap.error(str(exc))
    rows = run(tuple(a.systems.split(",")), tuple(a.traffic.split(",")), tuple(a.methods.split(",")),
               a.time_limit, a.anneal, a.quick, a.solver, a.out, simulate=a.simulate, models=models)
    print(f"{len(rows)} rows -> {a.out}  (* = proven optimal)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
