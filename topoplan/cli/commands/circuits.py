"""``topoplan circuits`` (plan circuits and forwarding tables) and ``topoplan compare circuits``."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from topoplan.cli.commands.common import (simulated_within_limit, solving, time_bounded, working, AnyInputsOpt,
                                          ContentionOpt, JsonOpt, ModelOpt, OutOpt, PlacementOpt, PlanOutOpt,
                                          RelayChunkOpt, RelayOpt, SeedOpt, SetOpt, TimeLimitOpt, TopologyOpt,
                                          TrafficOpt, console, emit, flag_names, known_method, load_checked_inputs,
                                          parse_time_limit, sim_model, steps_within_limit, topology_record)
from topoplan.core.units import format_bytes, format_time, parse_size

MethodOpt = typer.Option("three-step", "--method", "-m",
                         help="none | sp | three-step | greedy | matching | ilp | anneal.")
MaxCircuitsOpt = typer.Option(None, "--max-circuits", help="Set up at most this many circuits (000's pathway count).")
HopLimitOpt = typer.Option(None, "--hop-limit", help="Most circuits a large message may cross (default: no limit).")
ThresholdOpt = typer.Option(None, "--threshold", help="Large-message threshold (default: OCS bandwidth-delay product).")
SolverOpt = typer.Option("auto", "--solver", help="MILP back-end for ilp: auto (measured: HiGHS for the node model, CBC for the "
                         "switch model) | cbc | highs | ortools | gurobi.")
FormulationOpt = typer.Option("auto", "--formulation", help="ilp model: auto | node (exact) | switch (aggregated) | lp.")
ObjectiveOpt = typer.Option("lexicographic", "--objective", help="ilp: lexicographic | weighted (bound, then uplink bytes).")
ScoreOpt = typer.Option("auto", "--score", help="auto: simulated for ilp and anneal on a trace, else bound | "
                        "bound: the method's plan for its objective (step time or bound) | "
                        "simulated: that plan or a heuristic's it starts from, whichever simulates faster.")
MaxStepsOpt = typer.Option(None, "--max-steps", help="anneal: moves to try. Work bounded by a count, not the clock: "
                          "the same plan on any machine and load (a --time-limit given still stops the run).")
StepsOpt = typer.Option(True, "--steps/--no-steps",
                        help="On a trace, plan for the application's steps (the sum of each step's busiest link); "
                             "--no-steps: the whole traffic as one bulk phase (a matrix always is).")
SimulateOpt = typer.Option(True, "--simulate/--no-simulate",
                           help="Simulate the returned plan and report its time beside the bound.")


def objective_label(problem) -> str:
    """How a circuit problem's objective is named in output: ``step time`` or ``communication-time bound``."""
    return problem.objective_name


def bound_label(problem) -> str:
    """How a proven bound is named beside the objective: on an application's steps it bounds the step time (what
    the plans are compared by), not the simulated run, which may take less where steps overlap."""
    return "lower bound of the step time" if problem.step_loads is not None else "lower bound"


def register(app: typer.Typer) -> None:
    app.command("circuits")(time_bounded(circuits_cmd))
    _group(app, "compare", "Run every method of a planning problem on one input and tabulate them.") \
        .command("circuits")(compare_circuits_cmd)


def _group(app: typer.Typer, name: str, help_text: str) -> typer.Typer:
    """The sub-command group ``name``, shared with other command modules that add to it."""
    for info in app.registered_groups:
        if info.name == name and info.typer_instance is not None:
            return info.typer_instance
    sub = typer.Typer(no_args_is_help=True, help=help_text)
    app.add_typer(sub, name=name)
    return sub


# the ilp's options: their flags and defaults
ILP_FLAGS = {"solver": ("--solver", "auto"), "formulation": ("--formulation", "auto"),
             "objective": ("--objective", "lexicographic")}


def _ilp_options(methods: List[str], **given) -> dict:
    """The ilp's options to pass when ``methods`` include ilp; a value other than its default given for a run
    without ilp would do nothing (a misspelt solver passed unnoticed), so it is an error."""
    from topoplan.core.errors import TopoplanError

    if "ilp" in methods:
        return given
    for name, value in given.items():
        flag, default = ILP_FLAGS[name]
        if value != default:
            raise TopoplanError(f"{flag}: applies to ilp, not {', '.join(methods)}")
    return {}


# CircuitProblem.build's fields and the flags that set them
BUILD_FLAGS = {"threshold_B": "--threshold", "hop_limit": "--hop-limit", "max_circuits": "--max-circuits"}


def _problem(topology, sets, traffic, placement, threshold, hop_limit, max_circuits, steps=True, any_inputs=False):
    """``(topology, trace, traffic, problem, note)``: the note says why the problem has no steps although the
    traffic is a trace (None otherwise). A placement file made for other inputs is refused (``any_inputs``:
    used anyway)."""
    from topoplan.problems.circuits import CircuitProblem
    from topoplan.core.errors import TopoplanError

    topo, trace, tr, pl = load_checked_inputs(topology, sets, traffic, placement, any_inputs)
    thr = parse_size(threshold, "--threshold") if threshold is not None else None
    st = note = None
    if steps and trace is not None:
        st, note = steps_within_limit(traffic, trace)
    try:
        prob = CircuitProblem.build(topo, tr, pl, threshold_B=thr, hop_limit=hop_limit, max_circuits=max_circuits,
                                    steps=st)
    except TopoplanError as e:  # the library names its fields; name the flags
        raise TopoplanError(flag_names(str(e), BUILD_FLAGS)) from None
    return topo, trace, tr, prob, note


def circuits_cmd(topology: str = TopologyOpt, traffic: str = TrafficOpt, sets: Optional[List[str]] = SetOpt,
                 placement: str = PlacementOpt, method: str = MethodOpt, time_limit: Optional[float] = TimeLimitOpt,
                 seed: int = SeedOpt, max_circuits: Optional[int] = MaxCircuitsOpt,
                 hop_limit: Optional[int] = HopLimitOpt, threshold: Optional[str] = ThresholdOpt,
                 solver: str = SolverOpt, formulation: str = FormulationOpt, objective: str = ObjectiveOpt,
                 score: str = ScoreOpt, max_steps: Optional[int] = MaxStepsOpt, steps: bool = StepsOpt,
                 simulate: bool = SimulateOpt,
                 model: Optional[str] = ModelOpt,
                 relay: Optional[str] = RelayOpt, relay_chunk: Optional[str] = RelayChunkOpt,
                 paper_contention: Optional[str] = ContentionOpt, any_inputs: bool = AnyInputsOpt,
                 json_mode: bool = JsonOpt, output: Optional[Path] = PlanOutOpt) -> None:
    """Assign optical circuits and build forwarding tables for a hybrid EPS/OCS network.

    On a trace the plan is scored by its step time: the sum over the application's steps of each step's
    busiest link (an estimate of its communication time; a lower bound when steps are separated by
    barriers); on a matrix by its communication-time bound (the busiest link of the whole traffic). The
    plan is also simulated with the chosen network model (--model/--relay) and both are reported with
    their ratio. ilp and anneal on a trace (--score auto) also simulate the heuristics they start from
    and return the fastest plan; --score bound returns the method's own plan."""
    from topoplan.problems.circuits import METHODS, solve
    from topoplan.plans.planfile import plan_document, write_plan
    from topoplan.core import deadline
    from topoplan.problems.circuits.problem import plan_simulator
    from topoplan.problems.result import simulation_cost_s
    from topoplan.core.errors import TopoplanError
    from topoplan.sim.steps import has_computation

    smodel = sim_model(model, relay, relay_chunk, paper_contention)
    if score not in ("auto", "bound", "simulated"):
        raise TopoplanError(f"--score {score!r}: choose auto, bound or simulated")
    if not simulate and score == "simulated":
        raise TopoplanError("--score simulated simulates the plans: it cannot be used with --no-simulate")
    known_method(METHODS, method, "--method")
    opts = _ilp_options([method], solver=solver, formulation=formulation, objective=objective)
    if max_steps is not None:
        if method != "anneal":
            raise TopoplanError(f"--max-steps: applies to anneal, not {method}")
        if max_steps < 1:
            raise TopoplanError(f"--max-steps: must be a positive count, got {max_steps}")
        opts["max_steps"] = max_steps
    with working(f"circuits -m {method}"):   # progress on a terminal, from reading the inputs to the simulation
        topo, trace, _, prob, note = _problem(topology, sets, traffic, placement, threshold, hop_limit,
                                              max_circuits, steps, any_inputs)
        # the stages after the method share the time limit: the simulation of the plan (predicted from the calls
        # it replays) and writing it are kept out of what the method gets
        sim_s = deadline.scaled(simulation_cost_s(trace if trace is not None else prob.bulk_trace())) \
            if simulate else 0.0
        # a plan's largest table: its forwarding entries, at most one per node and switch
        write_s = deadline.write_cost_s(prob.n_nodes * prob.n_switches)
        with solving(method, time_limit), deadline.reserved(sim_s + write_s):
            res = solve(prob, method, time_limit=time_limit, seed=seed, score=score, trace=trace, sim_model=smodel,
                        **opts)
        res.message = "; ".join(filter(None, [note, res.message]))
        if simulate and "simulated_s" not in res.metrics:
            sim = simulated_within_limit(res, "simulating the plan", lambda: plan_simulator(prob, trace, smodel)(
                res.to_dict(), validated=True), sim_s, write_s)
            if sim is not None:
                res.metrics["simulated_s"] = sim
    if "simulated_s" in res.metrics:
        res.options["sim_model"] = smodel.to_dict()
        if res.objective:
            res.metrics["simulated_over_objective"] = res.metrics["simulated_s"] / res.objective
            comm = prob.communication_ratio(res.metrics["simulated_s"], res.objective)
            if comm is not None:
                res.metrics["communication_simulated_over_objective"] = comm
    extra = {**topology_record(topo, topology, sets), "traffic": traffic, "placement": placement}
    # solve validated the plan against this topology (only metrics and options changed since): written as it is
    doc = write_plan(output, res, topo, validated=True, **extra) if output is not None else plan_document(res, **extra)
    emit(doc, json_mode, None)
    if json_mode:
        return
    from rich.table import Table

    con = console()
    m = res.metrics
    kind = objective_label(prob)
    bound = (f", {bound_label(prob)} {format_time(res.bound)} (gap {res.gap:.1%})" if res.bound is not None else "")
    con.print(f"[bold]{method}[/] ({res.status}): {m['circuits_used']} circuits, {kind} "
              f"{format_time(res.objective)}{bound}; uplink bytes {format_bytes(m['uplink_bytes'])}, "
              f"large bytes falling back {format_bytes(m['large_fallback_bytes'])}, bottleneck {m['bottleneck']}, "
              f"wall {res.wall_s:.2f} s")
    if prob.step_loads is not None:
        d = prob.describe()
        what = (f"it includes {format_time(d['step_compute_s'])} of computation on the critical path, and is an "
                "estimate" if d.get("step_compute_s") else
                "the step time is an estimate; a lower bound when steps are separated by barriers")
        con.print(f"steps: {d['steps']:,} steps of {d['step_types']:,} kinds, planned as {d['step_groups']} groups "
                  f"({what})")
    if "simulated_s" in m:
        ratio = f" = {m['simulated_over_objective']:.2f} x the {kind}" if "simulated_over_objective" in m else ""
        if ratio and prob.step_loads is None and trace is not None and has_computation(trace):
            ratio += ", which leaves out the trace's computation"
        con.print(f"simulated {format_time(m['simulated_s'])}{ratio} ({smodel.label()}; "
                  f"{'the traffic as one bulk phase' if trace is None else 'the trace'})")
        if "communication_simulated_over_objective" in m:
            c = prob.step_loads.compute_s
            con.print(f"beyond its {format_time(c)} of computation on the critical path, the run adds "
                      f"{format_time(m['simulated_s'] - c)} and the step time {format_time(res.objective - c)} "
                      f"({m['communication_simulated_over_objective']:.2f} x): the part a plan changes")
    if res.message:
        con.print(res.message)
    sw = prob.node_switch
    per = {}
    for a, b in res.plan["circuits"]:
        key = (min(sw[a], sw[b]), max(sw[a], sw[b]))
        per[key] = per.get(key, 0) + 1
    if per and len(per) <= 64:
        tab = Table(title="circuits per switch pair")
        tab.add_column("switches")
        tab.add_column("circuits", justify="right")
        labels = topo.switch_labels()
        for k in sorted(per):
            tab.add_row(f"{labels[k[0]]}-{labels[k[1]]}", str(per[k]))
        con.print(tab)
    if output is not None:
        con.print(f"wrote {output}")


def compare_circuits_cmd(topology: str = TopologyOpt, traffic: str = TrafficOpt, sets: Optional[List[str]] = SetOpt,
                         placement: str = PlacementOpt,
                         methods: str = typer.Option("none,sp,three-step,greedy,matching,ilp,anneal", "--methods",
                                                     help="Comma-separated methods."),
                         time_limit: Optional[float] = typer.Option("10", "--time-limit", parser=parse_time_limit, metavar="DURATION",
                                                                    help="For ilp and anneal each (seconds, or 10s, 1min)."),
                         seed: int = SeedOpt, max_circuits: Optional[int] = MaxCircuitsOpt,
                         hop_limit: Optional[int] = HopLimitOpt, threshold: Optional[str] = ThresholdOpt,
                         solver: str = SolverOpt, formulation: str = FormulationOpt,
                         simulate: bool = typer.Option(False, "--simulate",
                                                       help="Also replay the traffic on each plan (the simulator)."),
                         model: Optional[str] = ModelOpt, relay: Optional[str] = RelayOpt,
                         relay_chunk: Optional[str] = RelayChunkOpt, paper_contention: Optional[str] = ContentionOpt,
                         steps: bool = StepsOpt, any_inputs: bool = AnyInputsOpt, json_mode: bool = JsonOpt,
                         output: Optional[Path] = OutOpt) -> None:
    """Every circuit method on one problem: its objective (the step time on a trace, the communication-time
    bound on a matrix), gap to the exact model, uplink bytes, solve time; with --simulate the simulated time
    and its ratio to the objective."""
    from topoplan.problems.circuits.problem import compare
    from topoplan.core.errors import TopoplanError
    from topoplan.sim.steps import has_computation

    method_list = [m.strip() for m in methods.split(",") if m.strip()]
    if not method_list:
        raise TopoplanError(f"--methods {methods!r}: no method named (e.g. none,sp,greedy,ilp)")
    twice = sorted({m for m in method_list if method_list.count(m) > 1})
    if twice:   # one row per method: a second run would only repeat the first (and ilp's or anneal's time)
        raise TopoplanError(f"--methods {methods!r}: {twice[0]} named twice")
    ilp_opts = _ilp_options(method_list, solver=solver, formulation=formulation)
    smodel = sim_model(model, relay, relay_chunk, paper_contention, unused=None if simulate else "with --simulate")
    with working("compare circuits"):   # progress on a terminal
        topo, trace, tr, prob, _ = _problem(topology, sets, traffic, placement, threshold, hop_limit,
                                            max_circuits, steps, any_inputs)   # no deadline here: the steps are found
        sim = None
        if simulate:
            from topoplan.problems.circuits.problem import plan_simulator

            sim = plan_simulator(prob, trace, smodel)
        rows = compare(prob, method_list, time_limit=time_limit, seed=seed,
                       simulate=sim, **ilp_opts)
    doc = {"topology": topo.name or topology, "traffic": traffic, "placement": placement, "problem": prob.describe(),
           "objective": objective_label(prob), "sim_model": smodel.to_dict() if simulate else None, "rows": rows}
    emit(doc, json_mode, output)
    if json_mode:
        return
    from rich.table import Table

    tab = Table(title=f"circuit methods on {topo.name or topology}, {traffic}")
    cols = ["method", "status", objective_label(prob), bound_label(prob), "gap", "uplink bytes", "circuits", "wall"]
    if simulate:
        cols[4:4] = ["simulated", "sim / obj."]
    for c in cols:
        tab.add_column(c, justify="left" if c in ("method", "status") else "right")
    for r in rows:
        gap = r.get("gap_to_exact", r.get("gap_to_bound"))
        cells = [r["method"], r["status"], format_time(r["objective"]),
                 format_time(r["bound"]) if r["bound"] is not None else "-",
                 f"{gap:.1%}" if gap is not None else "-", format_bytes(r["uplink_bytes"]), str(r["circuits"]),
                 f"{r['wall_s']:.2f} s"]
        if simulate:
            ratio = r.get("simulated_over_objective")
            cells[4:4] = [format_time(r["simulated_s"]) if r.get("simulated_s") is not None else "-",
                          f"{ratio:.2f}" if ratio is not None else "-"]
        tab.add_row(*cells)
    con = console()
    con.print(tab)
    con.print("gap: to the exact optimum when ilp proved it, else to the best lower bound")
    if simulate and prob.step_loads is None and trace is not None and has_computation(trace):
        con.print("sim / obj.: the communication-time bound leaves out the trace's computation; the simulation "
                  "replays it")
    comm = [r for r in rows if r.get("communication_simulated_over_objective") is not None]
    if comm:
        con.print(f"beyond the {format_time(prob.step_loads.compute_s)} of computation on the critical path, what "
                  "the run adds over what the step time adds (the part a plan changes): "
                  + ", ".join(f"{r['method']} {r['communication_simulated_over_objective']:.2f}" for r in comm))
