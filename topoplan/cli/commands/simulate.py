"""``topoplan simulate``: replay traffic on a network and report times and loads."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from topoplan.cli.commands.common import (AnyInputsOpt, ContentionOpt, JsonOpt, ModelOpt, MpichOpt, OutOpt,
                                          RelayChunkOpt, RelayOpt, SetOpt, check_plan_inputs, console, emit,
                                          flag_names, mpich_note, mpich_thresholds, plan_doc, serial_blas, sim_model,
                                          working)
from topoplan.core.units import format_bytes, format_time, parse_size, parse_time


def register(app: typer.Typer) -> None:
    app.command("simulate")(simulate_cmd)


def simulate_cmd(
    topology: Optional[str] = typer.Option(None, "--topology", "-t", help="Preset, YAML file or Slurm topology.conf."),
    traffic: Optional[str] = typer.Option(None, "--traffic", "-T", help="Generator spec, trace CSV or matrix CSV."),
    sets: Optional[List[str]] = SetOpt,
    placement: str = typer.Option("sequential", "--placement", "-p", help="sequential, round-robin or a placement file."),
    network: Optional[str] = typer.Option(None, "--network", help="eps | fat-tree | hybrid | torus (default: the topology's own kind)."),
    circuits: Optional[Path] = typer.Option(None, "--circuits", help="Circuit plan JSON (topoplan circuits -o); hybrid only."),
    threshold: Optional[str] = typer.Option(None, "--threshold", help="Large-message threshold for circuits (default: the plan's threshold_B, else the OCS bandwidth-delay product)."),
    eager: str = typer.Option("64KiB", "--eager", help="Eager/rendezvous switch-over size."),
    mpich: Optional[List[str]] = MpichOpt,
    compute_scale: float = typer.Option(1.0, "--compute-scale", help="Scale the trace's computation gaps (0: communication only)."),
    iters: int = typer.Option(1, "--iters", min=1, help="Phases to replay when the traffic is a matrix (no timing)."),
    timeline: Optional[str] = typer.Option(None, "--timeline", help="Record link utilization every DT (e.g. 1ms)."),
    phases: Optional[str] = typer.Option(None, "--phases", help="Place the trace's phases on the simulated time axis "
                                         "(result 'phases'; the report draws them): auto (detect them) or a phases "
                                         "JSON (topoplan phases -o) made for this trace."),
    flows: Optional[Path] = typer.Option(None, "--flows", help="Raw flow mode: a SimGrid-style scenario JSON[.gz]."),
    model: Optional[str] = ModelOpt, relay: Optional[str] = RelayOpt, relay_chunk: Optional[str] = RelayChunkOpt,
    paper_contention: Optional[str] = ContentionOpt, any_inputs: bool = AnyInputsOpt,
    json_mode: bool = JsonOpt, output: Optional[Path] = OutOpt,
) -> None:
    """Replay an MPI trace, a generator or a matrix on the network; or run a raw flow scenario (--flows)."""
    from topoplan.core.errors import TopoplanError

    if flows is not None:
        with serial_blas():   # the simulator calls no BLAS routine: NumPy starts 0.1 s sooner
            from topoplan.sim.flowfile import run_scenario

        given = [o for o, v in (("--topology", topology), ("--traffic", traffic), ("--circuits", circuits),
                                ("--timeline", timeline), ("--phases", phases), ("--model", model), ("--relay", relay),
                                ("--relay-chunk", relay_chunk), ("--paper-contention", paper_contention),
                                ("--mpich", mpich or None))
                 if v is not None]
        if given:
            raise TopoplanError(f"--flows runs a self-contained scenario (its own network and flows); "
                                f"{given[0]} does not apply")
        res = run_scenario(flows)
        emit(res, json_mode, output)
        if not json_mode:
            console().print(f"{len(res['flows'])} flows, makespan {format_time(res['makespan_s'])}, "
                            f"wall {res['wall_s']:.3f} s")
        return
    if topology is None or traffic is None:
        raise TopoplanError("simulate needs --topology and --traffic (or --flows FILE)")
    smodel = sim_model(model, relay, relay_chunk, paper_contention)
    with serial_blas():   # (as above)
        from topoplan.sim.run import simulate_plan

        thr, eager_B, dt = replay_options(threshold, eager, compute_scale, timeline, circuits=circuits)
        thresholds = mpich_thresholds(mpich)

    with working("simulate"):   # progress on a terminal, from reading the inputs to the replay's end
        given_topo, topo, trace, tr, pl, matrix = replay_inputs(topology, sets, network, traffic, iters, placement,
                                                                any_inputs, phases=phases)
        plan = None
        if circuits is not None:
            if network not in (None, "hybrid"):
                raise TopoplanError(f"--circuits needs the hybrid network, not --network {network}")
            from topoplan.plans.planfile import read_plan

            plan = read_plan(circuits, topo)  # validated: a placement or a broken plan is a one-line error
            check_plan_inputs(plan, f"--circuits {circuits}", any_inputs=any_inputs, topology=given_topo, traffic=tr)
        made_for = None
        if plan is not None:
            if matrix is not None and plan.get("circuits"):   # a matrix's small messages stay below the threshold
                # (as the planner counts them)
                from topoplan.sim.network import circuit_threshold_B
                from topoplan.sim.replay import bulk_trace

                trace = bulk_trace(matrix, iters, threshold_B=circuit_threshold_B(
                    topo, thr if thr is not None else plan.get("threshold_B")))
            made_for = plan.get("placement", "its rank_to_node")
            plan = {k: plan[k] for k in ("circuits", "forwarding", "hop_limit", "threshold_B", "rank_to_node") if k in plan}
        kwargs = dict(placement=pl, threshold_B=thr, eager_threshold_B=eager_B,
                      compute_scale=compute_scale, timeline_dt_s=dt, model=smodel, thresholds=thresholds)
        if phases is not None:
            kwargs["phases"] = _load_phases(phases, trace, topo, pl)
        from topoplan.core.progress import report

        report(stage="simulating")   # the library reports how far the replay is
        res = _run(simulate_plan, topo, trace, plan, circuits, placement, made_for, kwargs)
        res = {"topology": topo.name, "network": network or topo.kind, "traffic": traffic, "placement": placement,
               "circuits": str(circuits) if circuits else None, **res}
        if dt is not None:
            from topoplan.core.topology_io import topology_to_dict

            res["topology_doc"] = topology_to_dict(topo)
            from topoplan.analysis.switches import analyze

            sa = analyze(topo, tr(), pl)
            res["switch_bytes"], res["switch_names"] = sa.bytes.tolist(), sa.switch_names
            if plan is not None:
                res["circuit_pairs"] = plan.get("circuits", [])
    emit(res, json_mode, output)
    if json_mode:
        return
    con = console()
    tuned = mpich_note(res)
    con.print(f"model: {smodel.label()}" + (f"; MPI collectives: MPICH's but {tuned}" if tuned else ""))
    con.print(f"makespan {format_time(res['makespan_s'])} (max communication time {format_time(res['max_comm_time_s'])}), "
              f"{res['n_messages']:,} messages, {res['n_flows']:,} flows, wall {res['wall_s']:.2f} s"
              + (f" (replayed in {res['n_pieces']} pieces)" if res.get("n_pieces") else ""))
    con.print("bytes by link class: " + ", ".join(f"{k} {format_bytes(v)}" for k, v in sorted(res["bytes_by_link_class"].items())))
    con.print(f"top switch receives {format_bytes(res['top_switch_bytes'])}; busiest node link {format_bytes(res['max_node_link_bytes'])}")
    if res.get("phases"):
        shown = res["phases"][:40]
        con.print(f"{len(res['phases'])} phases on the simulated time axis (first rank in, last rank in, last rank out):")
        con.print("| phase | kind | start | all in | end | bytes |")
        con.print("|---:|---:|---:|---:|---:|---:|")
        for p in shown:
            con.print(f"| {p['index']} | {p['kind']} | {format_time(p['start_s'])} | {format_time(p['all_in_s'])} | "
                      f"{format_time(p['end_s'])} | {format_bytes(p['bytes'])} |")
        if len(res["phases"]) > len(shown):
            con.print(f"... {len(res['phases']) - len(shown)} more phases (--json or -o for all)")


def replay_options(threshold, eager, compute_scale: float, timeline=None, *, circuits=None) -> tuple:
    """The replay's flags of ``simulate`` and ``emulate`` read and checked before any input is read:
    ``(threshold_B or None, eager_B, timeline_dt_s or None)``; errors name the flags, not the library's fields.
    A ``--threshold`` without ``--circuits`` is refused: no message would take a circuit.

    Examples
    --------
    >>> replay_options("1MB", "64KiB", 1.0, circuits="plan.json")
    (1000000.0, 65536.0, None)
    >>> replay_options(None, "64KiB", -1.0)
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: --compute-scale: must be a finite non-negative factor, got -1.0
    """
    from topoplan.core.errors import TopoplanError
    from topoplan.sim.replay import check_options

    if threshold is not None and circuits is None:
        raise TopoplanError("--threshold: the size from which messages take a plan's circuits; give --circuits")
    thr = parse_size(threshold, "--threshold") if threshold else None
    dt = parse_time(timeline, "--timeline") if timeline else None
    eager_B = parse_size(eager, "--eager")
    try:   # the library's checks name fields, the command line its flags
        check_options(compute_scale=compute_scale, eager_threshold_B=eager_B, timeline_dt_s=dt)
    except TopoplanError as e:
        raise TopoplanError(flag_names(str(e), {"compute_scale": "--compute-scale", "eager_threshold": "--eager",
                                                "timeline_dt": "--timeline"})) from None
    return thr, eager_B, dt


def replay_inputs(topology: str, sets, network, traffic: str, iters: int, placement: str, any_inputs: bool, *,
                  phases=None, pieces: bool = True):
    """The inputs of a replay from the command line (``simulate``, ``emulate``): the topology as given and as
    seen by ``--network``, the trace (a matrix as ``iters`` bulk phases), its traffic (a function, see
    :func:`_traffic_of`), the validated placement, and the matrix (None for a trace or generator), from which a
    replay with circuits makes its bulk phases again with their threshold; a placement made for other inputs is
    refused.

    A large generated trace comes back as its recording (replayed a piece at a time) when ``pieces`` is true
    and no ``phases`` are asked for."""
    from topoplan.core.errors import TopoplanError
    from topoplan.core.placement import load_placement
    from topoplan.core.topology_io import load_topology
    from topoplan.sim.replay import bulk_trace
    from topoplan.sim.run import network_view
    from topoplan.traffic.sources import load_source

    given_topo = load_topology(topology, sets or [])
    topo = network_view(given_topo, network)
    # the replay needs the trace only; a large generated one is generated and replayed a piece at a time
    trace, tr = load_source(traffic, with_traffic=False, pieces=pieces and phases is None)
    matrix = tr if trace is None else None
    if trace is None:
        if phases is not None:
            raise TopoplanError(f"--phases: {traffic} is a communication matrix, which has no time order; "
                                "phases need an MPI trace or a generator spec")
        trace = bulk_trace(tr, iters)
    elif iters != 1:
        raise TopoplanError(f"--iters {iters}: applies to a communication matrix; {traffic} is a trace or generator "
                            "(a generator takes iters= in its spec)")
    capacity = int(topo.node_cores().sum())
    if trace.n_ranks > capacity:
        from topoplan.core.topology_io import cores_hint

        raise TopoplanError(f"{traffic}: {trace.n_ranks} ranks do not fit topology {topo.name} ({capacity} cores)"
                            f"{cores_hint(given_topo)}")
    tr = _traffic_of(traffic, trace, tr)
    # a placement or circuit plan made for other inputs is refused (its recorded fingerprints)
    check_plan_inputs(plan_doc(placement), f"--placement {placement}", any_inputs=any_inputs, topology=given_topo,
                      traffic=tr)
    return given_topo, topo, trace, tr, load_placement(placement, trace.n_ranks, topo), matrix


def _traffic_of(spec: str, trace, traffic):
    """A function returning the point-to-point traffic of ``spec``, made on the first call: only a plan's
    recorded inputs and the switch loads need it, and a large alltoall's is one entry per rank pair."""
    held = [traffic]

    def get():
        if held[0] is None:
            from topoplan.traffic import generators
            from topoplan.traffic.matrix import from_trace
            from topoplan.traffic.sources import load_traffic

            held[0] = load_traffic(spec) if generators.is_spec(spec) else from_trace(trace)
        return held[0]
    return get


def _load_phases(spec: str, trace, topo, pl):
    """``--phases auto`` detects the phases; a file is re-cut on the trace (refused if made for another)."""
    from topoplan.core.errors import TopoplanError
    from topoplan.traffic.phases import detect_phases, phases_from_doc

    if spec == "auto":
        return detect_phases(trace, topo, pl)
    path = Path(spec)
    if not path.is_file():
        raise TopoplanError(f"--phases {spec}: not 'auto' and not a file")
    from topoplan.core.io import read_json

    return phases_from_doc(read_json(path, "phases"), trace, topo, pl, where=f"--phases {spec}")


def _run(simulate_plan, topo, trace, plan, circuits, placement, made_for, kwargs):
    """The library checks that a plan's placement is the one given; the CLI says which flag to change."""
    from topoplan.core.errors import TopoplanError

    try:
        return simulate_plan(topo, trace, plan, **kwargs)
    except TopoplanError as exc:
        if "made for another placement" not in str(exc):
            raise
        raise TopoplanError(f"--circuits {circuits}: the plan was made for another placement ({made_for}) than "
                            f"--placement {placement}; pass -p {circuits} to use the plan's") from None
