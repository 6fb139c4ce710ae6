"""``topoplan phases``: split a trace into communication phases, and optionally schedule circuits over them."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from topoplan.cli.commands.common import (past_limit, steps_past_limit, steps_time_limit, time_bounded, AnyInputsOpt,
                                          ContentionOpt, JsonOpt, ModelOpt, OutOpt, PlacementOpt, RelayChunkOpt,
                                          RelayOpt, SeedOpt, SetOpt, TimeLimitOpt, TopologyOpt, TrafficOpt, console,
                                          emit, flag_names, known_method, load_checked_inputs, sim_model,
                                          topology_record, working)

FLAGS = {"window_s": "--window", "windows": "--windows", "threshold": "--threshold", "setup_s": "--setup",
         "blackout": "--blackout", "min_windows": "--min-windows", "score": "--score"}


def schedule_simulation_cost_s(trace, n_phases: int) -> float:
    """Predicted CPU seconds of simulating a schedule over ``n_phases`` phases of ``trace``
    (:func:`topoplan.sim.schedule.simulate_schedule`): one replay of the trace's calls, and a network set up
    for every segment, at most one a phase (:func:`topoplan.problems.result.simulation_cost_s`).

    Examples
    --------
    >>> from topoplan.traffic.generators import parse_spec
    >>> one = schedule_simulation_cost_s(parse_spec("ring:np=8,bytes=1MB"), 1)
    >>> schedule_simulation_cost_s(parse_spec("ring:np=8,bytes=1MB"), 11) > one
    True
    """
    from topoplan.problems.result import REPLAY_FIXED_S, simulation_cost_s

    return simulation_cost_s(trace) + REPLAY_FIXED_S * max(int(n_phases) - 1, 0)


def register(app: typer.Typer) -> None:
    app.command("phases")(time_bounded(phases_cmd))


def phases_cmd(
    topology: str = TopologyOpt,
    traffic: str = TrafficOpt,
    sets: Optional[List[str]] = SetOpt,
    placement: str = PlacementOpt,
    window: Optional[str] = typer.Option(None, "--window", help="Window of the logical clock (e.g. 1ms; default: "
                                         "the trace's logical span / --windows)."),
    windows: int = typer.Option(200, "--windows", help="Windows over the trace when --window is not given."),
    threshold: float = typer.Option(0.5, "--threshold", help="A window starts a new phase when it shares less "
                                    "than 1 - THRESHOLD of its bytes with the current phase."),
    min_windows: int = typer.Option(2, "--min-windows", help="Windows a phase lasts at least."),
    schedule: Optional[str] = typer.Option(None, "--schedule", help="Also schedule circuits over the phases: "
                                           "static, per-phase, exact, solstice or bvn (circuits that change "
                                           "inside all-to-all phases), zero-setup (hybrid topologies)."),
    circuit_method: str = typer.Option("ilp", "--circuit-method", help="Circuit method for every configuration."),
    setup: Optional[str] = typer.Option(None, "--setup", help="OCS set-up time (default the topology's ocs.setup)."),
    blackout: str = typer.Option("eps", "--blackout", help="During a set-up: eps (wait or run on the surviving "
                                 "circuits, whichever is faster) or stall."),
    score: str = typer.Option("bound", "--score", help="Phase times for the scheduler: bound (the circuit "
                              "problem's bound) or simulated (each phase simulated alone; exact, solstice and bvn "
                              "then also keep the best single configuration when it replays faster)."),
    simulate: bool = typer.Option(False, "--simulate", help="Simulate the schedule (phase by phase)."),
    model: Optional[str] = ModelOpt, relay: Optional[str] = RelayOpt, relay_chunk: Optional[str] = RelayChunkOpt,
    paper_contention: Optional[str] = ContentionOpt,
    steps: bool = typer.Option(False, "--steps", help="Price each phase's circuit candidates by the step time of "
                               "its steps (the sum of each step's busiest link) instead of its bulk bound."),
    time_limit: Optional[float] = TimeLimitOpt,
    seed: int = SeedOpt, any_inputs: bool = AnyInputsOpt,
    json_mode: bool = JsonOpt, output: Optional[Path] = OutOpt,
) -> None:
    """Split a trace into communication phases (partners change over time); --schedule plans circuits per phase."""
    from topoplan.core import deadline
    from topoplan.core.errors import TopoplanError
    from topoplan.core.units import format_bytes, format_time, parse_time
    from topoplan.traffic.phases import detect_phases

    from topoplan.core.progress import report

    # the schedule's options do nothing without --schedule (a --simulate or --setup passed unnoticed)
    unused = [flag for flag, given in (("--circuit-method", circuit_method != "ilp"), ("--setup", setup is not None),
                                       ("--blackout", blackout != "eps"), ("--score", score != "bound"),
                                       ("--simulate", simulate), ("--steps", steps)) if given]
    if schedule is None and unused:
        raise TopoplanError(f"{unused[0]}: applies only with --schedule (detecting phases schedules no circuits)")
    if schedule is not None:
        from topoplan.problems.circuits import METHODS
        from topoplan.problems.circuits.schedule import SCHEDULERS

        known_method(SCHEDULERS, schedule, "--schedule")
        known_method(METHODS, circuit_method, "--circuit-method")
    smodel = sim_model(model, relay, relay_chunk, paper_contention,   # of --simulate and --score simulated
                       unused=None if simulate or score == "simulated" else "with --simulate or --score simulated")
    with working("phases"):   # progress on a terminal
        topo, trace, tr, pl = load_checked_inputs(topology, sets, traffic, placement, any_inputs)
        if trace is None:
            raise TopoplanError(f"{traffic}: phases need an MPI trace or a generator spec (a matrix has no time order)")
        win = parse_time(window, "--window") if window is not None else None
        report(stage="detecting phases")
        try:   # stops at the time limit, early enough to say so and end by then
            with deadline.stopping(margin_s=deadline.write_cost_s(0)):
                ph = detect_phases(trace, topo, pl, window_s=win, windows=windows, threshold=threshold,
                                   min_windows=min_windows)
        except deadline.DeadlineReached:
            raise deadline.DeadlineReached(f"{traffic}: detecting phases stopped at the time limit (a longer "
                                           "--time-limit, or no limit, detects them)") from None
        except TopoplanError as exc:
            raise TopoplanError(flag_names(str(exc), FLAGS)) from None
        # the topology's spec and --set overrides, as every plan records them (export rebuilds it without -t)
        res = {**topology_record(topo, topology, sets), "traffic": traffic, **ph.to_dict()}
        sched = sim = steps_note = None
        if schedule is not None:
            from topoplan.problems.circuits.schedule import PhasedProblem, schedule as run_schedule

            from topoplan.sim.steps import StepClockLimit

            build = dict(setup_s=parse_time(setup, "--setup") if setup else None, blackout=blackout, score=score,
                         sim_model=smodel)
            limit = steps_time_limit() if steps else None
            try:
                try:
                    prob = PhasedProblem.build(topo, ph, pl, steps=steps, steps_time_limit=limit, **build)
                except StepClockLimit:   # priced by the phases' bulk bounds instead
                    steps_note = steps_past_limit(limit)
                    prob = PhasedProblem.build(topo, ph, pl, **build)
            except TopoplanError as exc:
                raise TopoplanError(flag_names(str(exc), FLAGS)) from None
            # the stages after the schedule share the time limit: the simulation of the schedule (the trace's
            # calls once, a network per segment: at most one a phase) and writing the document (a row a phase)
            sim_s = deadline.scaled(schedule_simulation_cost_s(trace, len(ph))) if simulate else 0.0
            write_s = deadline.write_cost_s(len(ph))
            report(stage=f"scheduling circuits ({schedule})")
            with deadline.reserved(sim_s + write_s):
                sched = run_schedule(prob, schedule, time_limit=time_limit, seed=seed, circuit_method=circuit_method)
            res["schedule_result"] = sched.to_dict()
            if steps_note:
                res["steps_message"] = steps_note
            if simulate and deadline.fits(sim_s + write_s):
                from topoplan.sim.schedule import simulate_schedule

                report(stage="simulating the schedule")
                sim = simulate_schedule(topo, trace, ph, sched, model=smodel)
                res["simulated"] = {k: v for k, v in sim.items() if k != "segments"}
            elif simulate:
                res["message"] = past_limit("simulated", sim_s, write_s)
    emit(res, json_mode, output)
    if json_mode:
        return
    con = console()
    con.print(f"{len(ph)} phases, {len(set(ph.kinds()))} kinds ({ph.pair_basis} pairs, window "
              f"{ph.options['window_s'] * 1e3:.3g} ms of the logical clock)")
    con.print("| phase | kind | logical span (ms) | calls | bytes | dominant pairs |")
    con.print("|---:|---:|---|---:|---:|---|")
    for p in ph.phases[:40]:
        pairs = ", ".join(f"{a}-{b}" for a, b, _ in p.pairs[:4]) + (" ..." if len(p.pairs) > 4 else "")
        con.print(f"| {p.index} | {p.kind} | {p.start_s * 1e3:.3f} - {p.end_s * 1e3:.3f} | {p.n_calls:,} | "
                  f"{format_bytes(p.bytes)} | {pairs} |")
    if len(ph) > 40:
        con.print(f"... {len(ph) - 40} more phases (--json or -o for all)")
    if sched is not None:
        m = sched.metrics
        con.print(f"{schedule} ({sched.status}): {m['entries']} entries, {m['reconfigurations']} reconfigurations, "
                  f"phase sum {format_time(sched.objective)} ({m['score']}), zero-set-up lower bound "
                  f"{format_time(sched.bound)} (gap {100 * (sched.gap or 0):.1f}%)")
        if "picked" in m:
            times = ", ".join(f"{k} {format_time(v)}" for k, v in m["simulated_candidates_s"].items())
            con.print(f"replayed whole: {times}; kept {m['picked']}")
        if sim is not None:
            con.print(f"simulated {format_time(sim['makespan_s'])} ({format_time(sim['setup_idle_s'])} of set-up "
                      f"idle time; {sim['approximation']}; {smodel.label()})")
        elif "message" in res:
            con.print(f"schedule {res['message']}")
        if steps_note:
            con.print(steps_note)
    if output is not None:
        con.print(f"wrote {output}")
