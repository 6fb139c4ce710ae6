"""``topoplan emulate``: run the traffic for real on an emulated cluster and set the measurement beside the models.

    topoplan emulate -t paper003 --set ... -T neighbor2d:rows=4,cols=4,bytes=2MB --circuits plan.json
    topoplan emulate -t cluster.yaml -T app-trace -p place.json -- ./app ARGS     # the user's own program
    topoplan emulate --cleanup                                                  # leftovers of dead runs
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import List, Optional

import typer

from topoplan.cli.commands.common import (AnyInputsOpt, ContentionOpt, JsonOpt, ModelOpt, MpichOpt, OutOpt,
                                          RelayChunkOpt, RelayOpt, SetOpt, check_plan_inputs, console, emit,
                                          flag_names, mpich_note, mpich_thresholds, sim_model)


def register(app: typer.Typer) -> None:
    # everything after the program's name is the program's (as with topoplan trace)
    app.command("emulate", context_settings={"allow_interspersed_args": False})(emulate_cmd)


def _run_options_given(values: dict) -> list:
    """The options of a run (every parameter of :func:`emulate_cmd` but ``--cleanup``, ``--json`` and ``-o``)
    that ``values`` gives other than their declared defaults, named as given: ``--cleanup`` takes none of them."""
    def bare(x):   # an absent list option or argument is None or empty
        return None if isinstance(x, (list, tuple)) and not x else x

    given = []
    for name, param in inspect.signature(emulate_cmd).parameters.items():
        if name in ("cleanup", "json_mode", "output") or bare(values[name]) == bare(param.default.default):
            continue
        decl = next((d for d in getattr(param.default, "param_decls", None) or () if d.startswith("--")), None)
        if decl is None:
            given.append("PROGRAM")
        else:   # a --flag/--no-flag switch is named by the side given
            given.append(decl.split("/")[0 if values[name] else -1])
    return given


def emulate_cmd(
    command: Optional[List[str]] = typer.Argument(None, metavar="[-- PROGRAM ARGS]",
                                                  help="Run this MPI program instead of replaying the traffic (the "
                                                  "traffic then gives the prediction)."),
    topology: Optional[str] = typer.Option(None, "--topology", "-t", help="Preset, YAML file or Slurm topology.conf "
                                           "(a two-level tree, fat tree or hybrid)."),
    traffic: Optional[str] = typer.Option(None, "--traffic", "-T", help="Generator spec, trace CSV/directory or "
                                          "matrix CSV."),
    sets: Optional[List[str]] = SetOpt,
    placement: str = typer.Option("sequential", "--placement", "-p", help="sequential, round-robin or a placement file."),
    network: Optional[str] = typer.Option(None, "--network", help="eps | fat-tree | hybrid (default: the topology's "
                                          "own kind)."),
    circuits: Optional[Path] = typer.Option(None, "--circuits", help="Circuit plan JSON (topoplan circuits -o); its "
                                            "routes are applied as topoplan export routes writes them."),
    bcast: Optional[Path] = typer.Option(None, "--bcast", help="Bcast plan JSON (topoplan bcast -o): every MPI_Bcast "
                                         "on MPI_COMM_WORLD runs over its node order (the Bcast PMPI library; one "
                                         "rank per plan node)."),
    threshold: Optional[str] = typer.Option(None, "--threshold", help="Large-message threshold of the predictions "
                                            "(default: the plan's threshold_B, else the OCS bandwidth-delay product)."),
    eager: Optional[str] = typer.Option(None, "--eager", help="Eager/rendezvous switch-over size of the predictions (default: the run's; its transport sends every message eagerly)."),
    compute_scale: float = typer.Option(1.0, "--compute-scale", help="Scale the trace's computation gaps (0: "
                                        "communication only)."),
    iters: int = typer.Option(1, "--iters", min=1, help="Phases to replay when the traffic is a matrix."),
    scale: Optional[float] = typer.Option(None, "--scale", help="Divide bandwidths (multiply times) by this; default "
                                          "400 (a 10 Gb/s link runs at 25 Mb/s)."),
    queues: str = typer.Option("fifo", "--queues", help="fifo (a plain switch port), ack-priority (TCP's "
                               "acknowledgements never wait behind data; with --lossy only) or fair (each sending "
                               "node its own queue, served in turn, as a fabric that arbitrates fairly between its "
                               "inputs)."),
    shaper: str = typer.Option("tbf", "--shaper", help="tbf (every packet paced at the line rate, a bucket of "
                               "one packet) or htb (a bucket of two packets or 1 ms, which lets the start of a "
                               "message that finds the link idle through at once)."),
    lossless: bool = typer.Option(True, "--lossless/--lossy", help="Lossless: no queue drops a packet, as in a "
                                  "lossless fabric (InfiniBand, Ethernet with priority flow control): queues deeper "
                                  "than TCP can fill, and TCP's minimum retransmission timeout scaled with the "
                                  "bandwidth. Lossy: switch ports hold a switch's buffer and drop the rest."),
    collectives: str = typer.Option("model", "--collectives", help="model (the replay sends each collective as the "
                                    "messages the prediction runs) or library (MPI's own collectives)."),
    calibrate: bool = typer.Option(True, "--calibrate/--no-calibrate", help="Measure one way, both ways and a ring "
                                   "against the ideal first."),
    repeats: int = typer.Option(3, "--repeats", min=1, help="Runs at most: a run during which the machine was busy "
                                "is repeated, the fastest kept."),
    timeout: float = typer.Option(600.0, "--timeout", min=1.0, help="Seconds one mpirun may take."),
    stall: Optional[float] = typer.Option(None, "--stall", min=1.0, help="Replays only: stop a run whose replay "
                                          "sends nothing on the emulated network for this many seconds (real time) "
                                          "and run it again, as one of --repeats."),
    timeline: Optional[str] = typer.Option(None, "--timeline", help="Measure every link's utilization every DT of "
                                           "emulated time (e.g. 1ms), beside the default model's timeline "
                                           "(topoplan report draws either, --predicted the model's); a replay "
                                           "only."),
    mpicc: Optional[str] = typer.Option(None, "--mpicc", help="MPI C compiler wrapper (default $MPICC, else mpicc)."),
    cleanup: bool = typer.Option(False, "--cleanup", help="Only remove the namespaces (and processes) left by "
                                 "emulator runs that are no longer alive."),
    model: Optional[str] = ModelOpt, relay: Optional[str] = RelayOpt, relay_chunk: Optional[str] = RelayChunkOpt,
    paper_contention: Optional[str] = ContentionOpt, mpich: Optional[List[str]] = MpichOpt,
    any_inputs: bool = AnyInputsOpt, json_mode: bool = JsonOpt, output: Optional[Path] = OutOpt,
) -> None:
    """Emulate the cluster (network namespaces, shaped links, circuits, relays), run real MPI on it, and
    compare the measured communication time with the simulator's predictions. Needs root and Open MPI."""
    from topoplan.core.errors import TopoplanError
    from topoplan.emulate.cluster import cleanup as remove_leftovers, require_pyroute2

    require_pyroute2()
    if cleanup:
        given = _run_options_given(locals())
        if given:
            raise TopoplanError(f"--cleanup only removes leftovers; {given[0]} does not apply")
        removed = remove_leftovers()
        emit({"removed": removed}, json_mode, output)
        if not json_mode:
            console().print(f"removed {len(removed)} namespaces of dead emulator runs" if removed
                            else "nothing to remove")
        return
    if topology is None or traffic is None:
        raise TopoplanError("emulate needs --topology and --traffic (or --cleanup)")
    from topoplan.emulate.cluster import check_queueing

    try:
        check_queueing(queues, shaper, lossless)
    except TopoplanError as e:
        raise TopoplanError(flag_names(str(e), {"queues": "--queues", "shaper": "--shaper"})) from None
    from topoplan.emulate.launch import COLLECTIVES

    if collectives not in COLLECTIVES:
        raise TopoplanError(f"--collectives: choose one of {', '.join(COLLECTIVES)}, got {collectives!r}")
    smodel = sim_model(model, relay, relay_chunk, paper_contention)
    thresholds = mpich_thresholds(mpich)
    from topoplan.cli.commands.simulate import replay_inputs, replay_options
    from topoplan.core.topology import TreeTopology
    from topoplan.core.units import format_time
    from topoplan.emulate.cluster import check_scale
    from topoplan.emulate.run import DEFAULT_SCALE, check_timeline, emulate

    # the options, before the inputs are read and the predictions run (a bad --scale was found only when the
    # cluster was about to be built), named as flags
    thr, eager_B, timeline_dt = replay_options(threshold, eager or "64KiB", compute_scale, timeline, circuits=circuits)
    if eager is None:
        eager_B = None   # the run's own (topoplan.emulate.run.run_eager_B)
    try:
        scale = check_scale(DEFAULT_SCALE if scale is None else scale)
        check_timeline(timeline_dt, scale, program=bool(command))
    except TopoplanError as e:
        raise TopoplanError(flag_names(str(e), {"scale": "--scale", "timeline_dt": "--timeline"})) from None
    if stall is not None and command:
        raise TopoplanError("--stall: replays only (a program marks no replay window to judge)")

    given_topo, topo, trace, tr, pl, _ = replay_inputs(topology, sets, network, traffic, iters, placement,
                                                       any_inputs, pieces=False)
    if not isinstance(topo, TreeTopology):
        raise TopoplanError(f"topology {topo.name or topology}: the emulator builds two-level trees (tree, fat-tree, "
                            f"hybrid), not {topo.kind}")
    plan = None
    if circuits is not None:
        if network not in (None, "hybrid"):
            raise TopoplanError(f"--circuits needs the hybrid network, not --network {network}")
        from topoplan.emulate.plan import read_circuit_plan

        plan = read_circuit_plan(circuits, topo)
        check_plan_inputs(plan, f"--circuits {circuits}", any_inputs=any_inputs, topology=given_topo, traffic=tr)
        if plan.get("rank_to_node") is not None:
            import numpy as np

            if not np.array_equal(np.asarray(plan["rank_to_node"][:trace.n_ranks]), pl.rank_to_node[:trace.n_ranks]):
                raise TopoplanError(f"--circuits {circuits}: the plan was made for another placement than --placement "
                                    f"{placement}; pass -p {circuits} to use the plan's")
        plan = {k: plan[k] for k in ("circuits", "forwarding", "hop_limit", "threshold_B") if k in plan}
    keys = None
    if bcast is not None:
        from topoplan.emulate.plan import bcast_keys, read_bcast_plan

        keys = bcast_keys(read_bcast_plan(bcast, topo), pl, trace.n_ranks, where=f"--bcast {bcast}")
    prog = list(command or [])
    if prog:
        import os
        import shutil

        if os.sep not in prog[0] and shutil.which(prog[0]) is None:
            raise TopoplanError(f"{prog[0]}: no such program (give a path, e.g. ./{prog[0]})")
        if os.sep in prog[0]:
            if not os.path.isfile(prog[0]):
                raise TopoplanError(f"{prog[0]}: no such program")
            prog[0] = os.path.abspath(prog[0])
    err = console(True)
    note = (lambda msg: err.print(f"[dim]{msg}[/dim]")) if err.is_terminal and not json_mode else None
    res = emulate(topo, trace, pl, plan=plan, scale=scale, model=smodel,
                  threshold_B=thr, eager_threshold_B=eager_B, compute_scale=compute_scale, command=prog or None,
                  calibrate=calibrate, repeats=repeats, timeout_s=timeout, mpicc=mpicc, bcast_keys=keys,
                  queues=queues, collectives=collectives, timeline_dt_s=timeline_dt, note=note,
                  thresholds=thresholds, stall_s=stall, lossless=lossless, shaper=shaper)
    res = {"topology": topo.name, "network": network or topo.kind, "traffic": traffic, "placement": placement,
           "circuits": str(circuits) if circuits else None, "bcast": str(bcast) if bcast else None,
           "program": prog or None, **res}
    emit(res, json_mode, output)
    if json_mode:
        return
    con = console()
    m = res["measured"]
    con.print(f"emulated {res['cluster']['nodes']} nodes, {res['cluster']['switches']} switches, "
              f"{res['cluster']['circuits']} circuits ({res['cluster']['routes']} routes) at scale {res['scale']:g}, "
              f"{res['cluster']['queues']} queues ({res['cluster']['shaper']})"
              f"{', lossless' if res['cluster']['lossless'] else ', lossy'}; "
              f"built in {res['cluster']['setup_s']:.1f} s")
    tuned = f" but {mpich_note(res)}" if res.get("mpich") else ""
    con.print("collectives: " + (f"the predicted messages (MPICH's algorithms{tuned}, as point-to-point)"
                                 if res["collectives"] == "model"
                                 else f"Open MPI's own algorithms (predicted with MPICH's{tuned})"))
    if res.get("calibration"):
        con.print("calibration (scaled back; ideal = bytes / node link bandwidth):")
        con.print("| run | measured | ideal | ratio | goodput | machine idle |")
        con.print("|---|---:|---:|---:|---:|---:|")
        for c in res["calibration"]:
            con.print(f"| {c['run'].replace('_', ' ')} | {format_time(c['measured_s'])} | {format_time(c['ideal_s'])} | "
                      f"{c['ratio']:.3f} | {c['goodput_Bps'] * 8 / 1e9:.2f} Gb/s | {c['cpu_idle']:.0%} |")
    con.print("| | communication time (max over ranks) | measured / predicted |")
    con.print("|---|---:|---:|")
    con.print(f"| measured | {format_time(res['measured_s'])} | |")
    for label, p in res["predictions"].items():
        name = {"default": f"predicted ({smodel.label()})", "store-and-forward": "store-and-forward relays",
                "paper": "paper model", "fifo": "first come, first served flows"}[label]
        con.print(f"| {name} | {format_time(p['max_comm_time_s'])} | {p['ratio']:.3f} |")
    ranks = f", the ranks used {m['ranks_cpu_cores']:.2f} cores" if m.get("ranks_cpu_cores") is not None else ""
    con.print(f"run: machine {m['cpu_idle']:.0%} idle{ranks}; {m['packets']:,} packets, {m['drops']:,} dropped by "
              f"full queues; {m['attempts']} run(s), {m['disturbed_attempts']} disturbed")
    tcp = m.get("tcp") or {}
    if tcp:
        during = "during the replay" if m.get("tcp_window") == "replay" else "during the run"
        con.print(f"TCP {during}: {tcp['retransmitted_segments']:,} segments sent again, {tcp['timeouts']:,} "
                  f"retransmission timeouts, {tcp['syn_retransmits']:,} connection requests sent again")
    if res.get("timeline") is not None:
        con.print(f"timeline: {len(res['timeline']['links'])} link directions measured, "
                  f"{len(res['predicted_timeline']['links'])} predicted, every {format_time(res['timeline']['dt_s'])}"
                  + (f"; draw them with topoplan report {output} [--predicted]" if output not in (None, Path("-"))
                     else ""))
