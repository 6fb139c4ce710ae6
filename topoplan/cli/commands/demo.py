"""``topoplan demo``: the main job on an embedded default (003's system, neighbor exchange)."""

from __future__ import annotations

from typing import Optional

import typer

from topoplan.cli.commands.common import (ContentionOpt, ModelOpt, RelayChunkOpt, RelayOpt, console, parse_time_limit,
                                          sim_model, solving, working)
from topoplan.core.units import format_bytes, format_time

DEFAULT_TOPOLOGY = "paper003"
DEFAULT_TRAFFIC = "neighbor2d:rows=16,cols=16,bytes=4MB,iters=5"


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)


def demo(topology: str = typer.Option(DEFAULT_TOPOLOGY, "--topology", "-t"),
         traffic: str = typer.Option(DEFAULT_TRAFFIC, "--traffic", "-T"),
         time_limit: Optional[float] = typer.Option("20", "--time-limit", parser=parse_time_limit, metavar="DURATION",
                                                    help="Limit for the exact circuit model (seconds, or 20s, 1min)."),
         model: Optional[str] = ModelOpt, relay: Optional[str] = RelayOpt, relay_chunk: Optional[str] = RelayChunkOpt,
         paper_contention: Optional[str] = ContentionOpt) -> None:
    """Analyze the default job, plan circuits with the paper's heuristic and the exact model, and simulate.

    Every row is simulated with the chosen network model (default: max-min sharing, pipelined relays); one
    more row shows the exact plan under the other relay model."""
    from dataclasses import replace

    from topoplan.analysis.switches import analyze
    from topoplan.core.topology import TreeTopology
    from topoplan.problems.result import check_time_limit
    from topoplan.sim.replay import bulk_trace
    from topoplan.sim.run import simulate, simulate_plan
    from topoplan.traffic.sources import load_inputs

    con = console()
    check_time_limit(time_limit)   # before the first lines of the result are printed
    smodel = sim_model(model, relay, relay_chunk, paper_contention)
    other = replace(smodel, relay="store-and-forward" if smodel.relay == "pipelined" else "pipelined")
    topo, trace, tr, pl = load_inputs(topology, [], traffic, "sequential")
    hybrid_trace = trace
    if trace is None:   # a matrix (no time order): replayed as one bulk phase, as `topoplan simulate` does
        trace = bulk_trace(tr, 1)
        hybrid_trace = None   # with circuits, the small messages are kept below the plan's threshold
    a = analyze(topo, tr, pl)
    con.print(f"[bold]topoplan demo[/]: {traffic} on {topology} "
              f"({topo.n_nodes} nodes x {topo.cores_per_node} cores, {topo.n_switches} switches, "
              f"{len(topo.ocs.nodes) if getattr(topo, 'ocs', None) else 0} OCS nodes), sequential placement")
    con.print(f"inter-switch traffic: {format_bytes(a.inter_switch_bytes)} "
              f"(large {format_bytes(a.inter(a.large_bytes))}, small {format_bytes(a.inter(a.small_bytes))}) "
              f"between {int(a.node_pairs.sum() - a.node_pairs.trace()) // 2} node pairs")
    con.print(f"network model: {smodel.label()}")
    from topoplan.core.progress import report

    with working("demo"):   # progress on a terminal; the table is printed when every row is done
        rows = []
        if isinstance(topo, TreeTopology):
            eps = replace(topo, kind="tree", ocs=None)
            report(stage="simulating the EPS tree")
            rows.append(("EPS only", "-", simulate(eps, trace, pl, model=smodel), None))
            report(stage="simulating the fat tree")
            fat = replace(topo, kind="fat-tree", ocs=None)
            rows.append(("fat-tree EPS", "-", simulate(fat, trace, pl, model=smodel), None))
        else:  # a torus or switch graph has no EPS/OCS variants: simulate it as it is
            rows.append((topo.kind, "-", simulate(topo, trace, pl, model=smodel), None))
        try:
            from topoplan.problems.circuits import solve as solve_circuits
            from topoplan.problems.circuits.problem import CircuitProblem
        except ImportError:
            solve_circuits = None
        if solve_circuits is not None and getattr(topo, "ocs", None) is not None:
            prob = CircuitProblem.build(topo, tr, pl)
            if hybrid_trace is None:
                hybrid_trace = bulk_trace(tr, 1, threshold_B=prob.threshold_B)
            for method in ("greedy", "ilp"):
                with solving(f"demo: {method} circuits", time_limit if method == "ilp" else None):
                    res = solve_circuits(prob, method=method, time_limit=time_limit, seed=0)
                plan = res.to_dict()
                report(stage=f"simulating the {method} plan")
                rows.append((f"hybrid, {method} circuits", f"{len(plan['circuits'])} circuits, bound "
                             f"{format_time(res.objective)} ({res.status})",
                             simulate_plan(topo, hybrid_trace, plan, model=smodel), res))
            report(stage=f"simulating the ilp plan with {other.relay} relays")
            rows.append(("hybrid, ilp circuits", f"same plan, {other.relay} relays",
                         simulate_plan(topo, hybrid_trace, plan, model=other), res))
    from rich.table import Table

    tab = Table(title="simulated communication time")
    tree = isinstance(topo, TreeTopology)
    cols = ["network", "plan", "makespan", f"vs {rows[0][0]}"] + (["top switch bytes", "busiest node link"] if tree else [])
    for col in cols:
        tab.add_column(col, justify="right" if col != "network" else "left")
    base = rows[0][2]["makespan_s"]
    for name, plan, sim, _ in rows:
        cells = [name, plan, format_time(sim["makespan_s"]), f"{sim['makespan_s'] / base:.2f}x"]
        if tree:
            cells += [format_bytes(sim["top_switch_bytes"]), format_bytes(sim["max_node_link_bytes"])]
        tab.add_row(*cells)
    con.print(tab)
