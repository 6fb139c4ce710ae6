"""``topoplan bound alltoall``: the all-to-all lower bound of 004 formula (1), and how A2A/A2AT compare."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from topoplan.cli.commands.common import JsonOpt, OutOpt, SetOpt, TopologyOpt, console, emit
from topoplan.core.units import format_time, parse_size

ALGORITHMS = ("a2a", "a2at")


def _count(x: float) -> str:
    """A message count as printed: whole counts with thousands separators, a fractional one (messages split
    between a ring's two directions) with its fraction, not rounded.

    >>> _count(4.5), _count(1234.0)
    ('4.5', '1,234')
    """
    return f"{x:,.0f}" if float(x).is_integer() else f"{x:,.2f}".rstrip("0")


def register(app: typer.Typer) -> None:
    bound = typer.Typer(help="Lower bounds of communication times.", no_args_is_help=True)
    bound.command("alltoall")(alltoall_cmd)
    app.add_typer(bound, name="bound")


def alltoall_cmd(
    topology: str = TopologyOpt,
    nbytes: str = typer.Option(..., "--bytes", "-b", help="Message size each node sends to every other node (e.g. 32768, 32KiB)."),
    sets: Optional[List[str]] = SetOpt,
    compare: bool = typer.Option(False, "--compare", help="Also give the per-round congestion time of A2A and A2AT (no simulation)."),
    simulate: Optional[str] = typer.Option(None, "--simulate", help="Simulate these schedules: a2a, a2at or a2a,a2at."),
    sim_mode: str = typer.Option("replay", "--sim-mode", help="replay: the MPI trace, per-node waitall (slow beyond ~50k messages); rounds: one round after another, flows of a round max-min fair (fast)."),
    window: Optional[int] = typer.Option(None, "--window", help="Messages in flight per node and round (default: number of dimensions)."),
    method: str = typer.Option("auto", "--method", help="A2AT round packing: auto, orbit or greedy."),
    json_mode: bool = JsonOpt, output: Optional[Path] = OutOpt,
) -> None:
    """Lower bound of an all-to-all on a mesh/torus (004 formula 1): the bottleneck dimension's busiest link."""
    from topoplan.analysis.alltoall import bound_details
    from topoplan.core.errors import TopoplanError
    from topoplan.core.topology_io import load_topology

    topo = load_topology(topology, sets or [])
    m = parse_size(nbytes, "--bytes")
    res = {"topology": topo.name, **bound_details(topo, m)}
    algos = []
    if sim_mode not in ("replay", "rounds"):
        raise TopoplanError(f"--sim-mode {sim_mode!r}: choose replay or rounds")
    if method not in ("auto", "orbit", "greedy"):
        raise TopoplanError(f"--method {method!r}: choose auto, orbit or greedy")
    if simulate is not None and not simulate.strip(" ,"):
        raise TopoplanError("--simulate: name a schedule (a2a, a2at or a2a,a2at)")
    if simulate:
        algos = [a.strip().lower() for a in simulate.split(",") if a.strip()]
        bad = [a for a in algos if a not in ALGORITHMS]
        if bad:
            raise TopoplanError(f"--simulate: unknown schedule {bad[0]!r} (a2a, a2at)")
    # the schedules' options do nothing without a schedule (a wrong --window passed unnoticed)
    unused = [flag for flag, given, used in (("--window", window is not None, compare or algos),
                                             ("--method", method != "auto", compare or algos),
                                             ("--sim-mode", sim_mode != "replay", algos)) if given and not used]
    if unused:
        raise TopoplanError(f"{unused[0]}: applies only with "
                            f"{'--simulate' if unused[0] == '--sim-mode' else '--compare or --simulate'} (the bound "
                            "alone has no schedule)")
    if compare or algos:
        res["schedules"] = _schedules(topo, m, window, method, compare, algos, sim_mode)
    emit(res, json_mode, output)
    if json_mode:
        return
    con = console()
    dims = " x ".join(f"{d['size']}{'T' if d['wrap'] else 'M'}" for d in res["dimensions"])
    con.print(f"{topo.name or topology}: {dims} = {res['n_nodes']:,} nodes, message {m:,.0f} B")
    b = res["dimensions"][res["bottleneck_index"]]
    con.print(f"bottleneck dimension {b['name']} (size {b['size']}, {'torus' if b['wrap'] else 'mesh'}, "
              f"alpha {b['alpha']:g}): {_count(b['messages_per_link'])} messages on its busiest link")
    con.print(f"lower bound {format_time(res['lower_bound_s'])}")
    for name, s in res.get("schedules", {}).items():
        parts = []
        if "congestion_s" in s:
            parts.append(f"congestion {format_time(s['congestion_s'])} "
                         + (f"({s['congestion_ratio']:.3f} x bound)" if s.get("congestion_ratio") is not None else ""))
        if "simulated_s" in s:
            parts.append(f"simulated ({s['sim_mode']}) {format_time(s['simulated_s'])} "
                         + (f"({s['simulated_ratio']:.3f} x bound)" if s.get("simulated_ratio") is not None else ""))
        con.print(f"{name}: {s['rounds']} rounds of {s['window']}; " + ", ".join(parts))


MAX_SCHEDULE_MESSAGES = 100_000_000  # a schedule holds every message (int64 arrays): ~2.4 GB at the limit


def _schedules(topo, m, window, method, compare, algos, sim_mode="replay") -> dict:
    from topoplan.analysis.alltoall import (a2a_schedule, a2at_schedule, alltoall_lower_bound, schedule_congestion, schedule_trace,
                                  simulate_rounds)
    from topoplan.core.errors import TopoplanError

    n = topo.n_nodes
    if n * (n - 1) > MAX_SCHEDULE_MESSAGES:
        raise TopoplanError(f"--compare/--simulate: an all-to-all of {n:,} nodes is {n * (n - 1):,} messages, over "
                            f"the limit of {MAX_SCHEDULE_MESSAGES:,} held in memory; the bound alone needs neither")
    if window is not None and window > n - 1:
        raise TopoplanError(f"--window: {window:,} messages in flight, but each node sends only {n - 1:,}")
    lb = alltoall_lower_bound(topo, m)
    w = window if window is not None else sum(1 for k in topo.dims if k > 1)
    out = {}
    for name in ALGORITHMS:
        if not compare and name not in algos:
            continue
        sched = a2a_schedule(topo.n_nodes, w) if name == "a2a" else a2at_schedule(topo, w, method)
        row = {"rounds": sched.n_rounds, "window": w, **({"method": sched.meta["method"]} if name == "a2at" else {})}
        if compare:
            c = schedule_congestion(topo, sched, m)
            row.update(congestion_s=c["estimate_s"], congestion_ratio=c["ratio"], routing_floor_s=c["routing_floor_s"])
        if name in algos:
            if sim_mode == "rounds":
                r = simulate_rounds(topo, sched, m)
                row.update(simulated_s=r["makespan_s"], sim_wall_s=r["wall_s"], n_flows=r["n_flows"], sim_mode="rounds")
            else:
                row.update(_simulate(topo, schedule_trace(sched, m)), sim_mode="replay")
            row["simulated_ratio"] = row["simulated_s"] / lb if lb > 0 else None   # JSON has no NaN
        out[name.upper()] = row
    return out


def _simulate(topo, trace) -> dict:
    from topoplan.core.errors import TopoplanError
    from topoplan.core.placement import from_nodes

    try:
        from topoplan.sim.run import simulate
    except ImportError as exc:  # the simulator is optional until topoplan/sim/ is complete
        raise TopoplanError(f"--simulate: the simulator is not available ({exc})") from None
    res = simulate(topo, trace, from_nodes(range(trace.n_ranks), topo), compute_scale=0.0)  # rank i on node i
    return {"simulated_s": res["makespan_s"], "sim_wall_s": res["wall_s"], "n_flows": res["n_flows"]}
