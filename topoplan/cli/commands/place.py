"""``topoplan place``: map ranks to nodes and cores with one placement method."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from topoplan.cli.commands.common import (simulated_within_limit, solving, time_bounded, working, ContentionOpt,
                                          JsonOpt, ModelOpt, OutOpt, RelayChunkOpt, RelayOpt, SeedOpt, SetOpt,
                                          TimeLimitOpt, TopologyOpt, TrafficOpt, console, emit, flag_names,
                                          known_method, sim_model, steps_within_limit, topology_record)
from topoplan.core.units import format_bytes, format_time, parse_size


def register(app: typer.Typer) -> None:
    app.command("place")(time_bounded(place_cmd))


def place_cmd(topology: str = TopologyOpt, traffic: str = TrafficOpt, sets: Optional[List[str]] = SetOpt,
              method: str = typer.Option("metis", "--method", "-m",
                                         help="sequential | round-robin | random | metis | greedy | anneal | ilp | "
                                              "joint | kahip | scotch."),
              time_limit: Optional[float] = TimeLimitOpt, seed: int = SeedOpt,
              objective: str = typer.Option("hops", "--objective",
                                            help="What anneal/greedy/ilp minimize: hops (hop-weighted bytes) | "
                                                 "congestion (link bound) | inter-switch (bytes)."),
              init: Optional[str] = typer.Option(None, "--init", help="anneal, joint, ilp: the placement method(s) "
                                                 "to start from, comma-separated (default: metis for joint; for anneal and ilp "
                                                 "the best of every installed partitioner and greedy; kahip only up "
                                                 "to 20,000 rank pairs and when it fits a quarter of the time "
                                                 "limit)."),
              max_steps: Optional[int] = typer.Option(None, "--max-steps", help="anneal: batches of moves; joint: "
                                                      "anneal batches per round. Work bounded by counts, not the "
                                                      "clock: the same plan on any machine and load (joint: with "
                                                      "--max-evals; a --time-limit given still stops the run)."),
              max_evals: Optional[int] = typer.Option(None, "--max-evals", help="joint: plan evaluations per "
                                                      "descent step."),
              threshold: Optional[str] = typer.Option(None, "--threshold", help="Large-message threshold "
                                                      "(default: OCS bandwidth-delay product)."),
              simulate: bool = typer.Option(False, "--simulate", help="Also replay the traffic on the plan "
                                            "(flow simulator) and report the simulated time."),
              score: str = typer.Option("bound", "--score", help="bound: the method's placement for --objective; "
                                        "simulated: that placement or a heuristic's it starts from, whichever "
                                        "simulates faster."),
              model: Optional[str] = ModelOpt, relay: Optional[str] = RelayOpt,
              relay_chunk: Optional[str] = RelayChunkOpt, paper_contention: Optional[str] = ContentionOpt,
              json_mode: bool = JsonOpt, output: Optional[Path] = OutOpt) -> None:
    """Place ranks on nodes and cores; report inter-switch bytes, hop-weighted bytes and the congestion bound."""
    from topoplan.core import deadline
    from topoplan.problems.placement import METHODS, PlacementProblem, simulated_time, solve
    from topoplan.problems.result import simulation_cost_s
    from topoplan.sim.replay import bulk_trace
    from topoplan.core.topology_io import load_topology
    from topoplan.traffic.sources import load_source

    from topoplan.core.errors import TopoplanError

    known_method(METHODS, method, "--method")
    if score not in ("bound", "simulated"):
        raise TopoplanError(f"--score {score!r}: choose bound or simulated")
    smodel = sim_model(model, relay, relay_chunk, paper_contention,
                       unused=None if simulate or score == "simulated" else "with --simulate or --score simulated")
    with working(f"place -m {method}"):   # progress on a terminal, from reading the inputs to the simulation
        topo = load_topology(topology, sets or [])
        trace, tr = load_source(traffic)
        opts = {} if init is None else {"init": init if "," not in init else tuple(init.split(","))}
        for flag, value, takes in (("--max-steps", max_steps, {"anneal": "max_steps", "joint": "anneal_steps"}),
                                   ("--max-evals", max_evals, {"joint": "max_evals"})):
            if value is None:
                continue
            if method not in takes:
                raise TopoplanError(f"{flag}: applies to {' and '.join(takes)}, not {method}")
            if value < 1:
                raise TopoplanError(f"{flag}: must be a positive count, got {value}")
            opts[takes[method]] = value
        if init is not None and method in METHODS and "init" not in METHODS.options(method):
            starting = ", ".join(m for m in METHODS if "init" in METHODS.options(m))
            raise TopoplanError(f"--init: method {method} has no start (methods that take one: {starting})")
        steps = steps_note = None
        if method == "joint" and trace is not None:   # joint's circuits follow the application's steps
            steps, steps_note = steps_within_limit(traffic, trace)
        try:   # the library names its fields; name the flags
            thr = parse_size(threshold, "threshold_B") if threshold is not None else None
            prob = PlacementProblem.build(topo, tr, objective=objective, threshold_B=thr, steps=steps)
            # the simulation of the plan (predicted from the calls it replays) and writing it share the time limit
            sim_s = 0.0
            if simulate:
                sim_s = deadline.scaled(simulation_cost_s(trace if trace is not None else bulk_trace(prob.traffic)))
            write_s = deadline.write_cost_s(prob.n_ranks)   # a placement's table: a row a rank
            with solving(method, time_limit), deadline.reserved(sim_s + write_s):
                res = solve(prob, method, time_limit=time_limit, seed=seed, score=score, trace=trace,
                            sim_model=smodel, **opts)
            res.message = "; ".join(filter(None, [steps_note, res.message]))
        except TopoplanError as e:
            raise TopoplanError(flag_names(str(e), {"objective": "--objective", "threshold_B": "--threshold",
                                                    "init": "--init"})) from None
        if "simulated_s" in res.metrics:
            res.metrics["simulated_time_s"] = res.metrics["simulated_s"]
        elif simulate:
            sim = simulated_within_limit(res, "simulating the placement",
                                         lambda: simulated_time(prob, res.plan, trace, smodel), sim_s, write_s)
            if sim is not None:
                res.metrics["simulated_time_s"] = sim
    if "simulated_time_s" in res.metrics:
        res.options["sim_model"] = smodel.to_dict()
    doc = res.to_dict()
    doc.update({**topology_record(topo, topology, sets), "traffic": traffic})
    emit(doc, json_mode, output)
    if json_mode:
        return
    m = res.metrics
    bound = f", bound {res.bound:.6g} (gap {res.gap:.1%})" if res.bound is not None else ""
    con = console()
    # joint scores plans by the circuit model's objective (the step time on a trace), whatever --objective says
    what = ("circuit step time (s)" if steps is not None else "circuit bound (s)") if method == "joint" else objective
    con.print(f"[bold]{method}[/] ({res.status}, objective {what}): {res.objective:.6g}{bound}")
    con.print(f"inter-switch {format_bytes(m['inter_switch_bytes'])} (large "
              f"{format_bytes(m['inter_switch_large_bytes'])}, small {format_bytes(m['inter_switch_small_bytes'])}), "
              f"hop-weighted {format_bytes(m['hop_weighted_bytes'])}, congestion bound "
              f"{format_time(m['congestion_bound_s'])} ({m['bottleneck']})"
              + (f", simulated {format_time(m['simulated_time_s'])}" if "simulated_time_s" in m else "")
              + f", wall {res.wall_s:.2f} s")
    if res.message:
        con.print(res.message)
    if output is not None:
        con.print(f"wrote {output}")
