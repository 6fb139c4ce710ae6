"""``topoplan trace``: run an MPI program with the recorder preloaded and write its trace directory.

    topoplan trace -o app-trace -np 4 -- ./app args     # then: topoplan simulate -t paper003 -T app-trace
    topoplan trace --lib                                # the library, for mpirun/srun run by hand
"""

from __future__ import annotations

import shlex
from typing import List, Optional

import typer

from topoplan.cli.commands.common import console


def register(app: typer.Typer) -> None:
    # everything after the program's name is the program's (no need for -- before its own options)
    app.command("trace", context_settings={"allow_interspersed_args": False})(trace_cmd)


def trace_cmd(
    command: Optional[List[str]] = typer.Argument(None, metavar="PROGRAM ARGS",
                                                  help="The MPI program and its arguments (after --)."),
    out_dir: str = typer.Option("topoplan-trace", "--output", "-o", metavar="DIR",
                                help="Trace directory to write (events.csv, communicators.csv); replaced if it "
                                     "holds a trace."),
    np: int = typer.Option(4, "-np", "--np", "-n", min=1, help="Number of MPI ranks."),
    mpirun: Optional[str] = typer.Option(None, "--mpirun", help="MPI launcher (default $MPIRUN, else mpirun)."),
    mpirun_args: Optional[str] = typer.Option(None, "--mpirun-args", metavar="ARGS",
                                              help="More launcher options, one string (e.g. '--hostfile hosts')."),
    mpicc: Optional[str] = typer.Option(None, "--mpicc", help="MPI C compiler wrapper for the recorder (default "
                                                              "$MPICC, else mpicc)."),
    lib: bool = typer.Option(False, "--lib", help="Only build the recorder library and print its path (for "
                                                  "LD_PRELOAD under your own mpirun or srun; the trace goes to "
                                                  "$TOPOPLAN_TRACE_DIR, default ./topoplan-trace)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Hide the program's output (shown if it fails)."),
) -> None:
    """Trace an MPI program: run it under mpirun with topoplan's PMPI recorder preloaded.

    The recorder (C, built with mpicc on first use into ~/.cache/topoplan) records every rank's MPI
    calls; at MPI_Finalize rank 0 writes the trace directory, which every -T option reads
    (topoplan simulate -t paper003 -T DIR replays it). Under Slurm or your own launcher:
    LD_PRELOAD=$(topoplan trace --lib) with TOPOPLAN_TRACE_DIR=DIR exported to the ranks.
    """
    from topoplan.core.errors import TopoplanError
    from topoplan.traffic.recorder import build_library, record

    if lib:
        if command:
            raise TopoplanError("--lib only prints the library's path; drop the program, or drop --lib to trace it")
        typer.echo(str(build_library(mpicc)))
        return
    if not command:
        raise TopoplanError("no program to trace: topoplan trace -o DIR -np 4 -- ./app [ARGS]")
    try:
        extra = shlex.split(mpirun_args or "")
    except ValueError as exc:
        raise TopoplanError(f"--mpirun-args: {exc}") from None
    trace = record(command, out_dir, np=np, mpirun=mpirun, mpirun_args=extra, mpicc=mpicc, quiet=quiet)
    counts = {op: n for op, n in trace.op_counts().items() if op != "unknown"}
    counts.update({f"{op} (not modelled)": n for op, n in trace.unknown_ops.items()})
    ops = ", ".join(f"{op} {n}" for op, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    span = float(trace.t_end.max() - trace.t_start.min()) if len(trace) else 0.0
    from topoplan.core.units import format_time

    con = console()
    con.print(f"{out_dir}: {len(trace)} MPI calls of {trace.n_ranks} ranks over {format_time(span)}"
              + (f" ({ops})" if ops else "") + f", {len(trace.communicators)} communicators")
    con.print(f"replay: topoplan simulate -t paper003 -T {shlex.quote(str(out_dir))}")


trace_cmd.not_stdout = {"out_dir": "a trace directory"}
