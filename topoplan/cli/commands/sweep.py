"""``topoplan sweep``: run a grid of instances x methods x parameters on Dask, resumably, into one table."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from topoplan.cli.commands.common import AnyInputsOpt, JsonOpt, console, emit, warn_once


def register(app: typer.Typer) -> None:
    app.command("sweep")(sweep_cmd)


def sweep_cmd(
    config: Path = typer.Argument(..., help="Sweep YAML: instances, methods, parameters (see `topoplan.batch.sweep`)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Result table (.csv or .parquet); default: the config's 'output'."),
    scheduler: Optional[str] = typer.Option(None, "--scheduler", help="Dask scheduler address (tcp://host:8786); default: a local cluster."),
    workers: Optional[int] = typer.Option(None, "--workers", "-w", min=1, help="Local cluster workers (default: one per core)."),
    threads_per_worker: int = typer.Option(1, "--threads-per-worker", min=1, help="Threads per local worker."),
    processes: bool = typer.Option(True, "--processes/--threads", help="Local workers as processes (default) or threads."),
    limit: Optional[int] = typer.Option(None, "--limit", min=0, help="Run at most this many pending cells."),
    dry_run: bool = typer.Option(False, "--dry-run", help="List the cells and which are finished; run nothing."),
    any_inputs: bool = AnyInputsOpt,
    json_mode: bool = JsonOpt,
) -> None:
    """Plan and simulate every cell of a grid on Dask; finished cells are kept and not recomputed.

    Exits with status 1 when cells failed (the table keeps them, and the next run retries them), after one
    line saying how many and why; bad input in the sweep file itself is status 2, before any cell runs."""
    from topoplan.core.io import check_writable
    from topoplan.batch.sweep import check_config, expand_cells, load_config, read_table, run_sweep

    cfg = load_config(config, output)
    check_writable(cfg.output, inputs=[config])
    if dry_run:
        check_config(cfg, any_inputs=any_inputs, warn=warn_once)  # run_sweep checks it itself
        cells = expand_cells(cfg)
        prev = read_table(cfg.output)
        finished = set()
        if prev is not None and "key" in prev.columns:
            ok = prev["error"].isna() | (prev["error"].astype(str).str.strip() == "") if "error" in prev.columns else True
            finished = set(prev.loc[ok, "key"].astype(str))
        rows = [{"key": c["key"], "instance": c["instance"]["name"], "problem": c["method"]["problem"],
                 "method": c["method"]["label"], "params": c["params"], "finished": c["key"] in finished}
                for c in cells]
        res = {"sweep": cfg.name, "output": str(cfg.output), "cells": rows,
               "pending": sum(not r["finished"] for r in rows)}
        if json_mode:
            emit(res, True, None)
        else:
            con = console()
            for r in rows:
                con.print(f"{'done' if r['finished'] else 'todo'}  {r['key']}  {r['instance']} / {r['method']}  {r['params']}")
            con.print(f"{len(rows)} cells, {res['pending']} pending -> {cfg.output}")
        return
    err = console(True)
    out = run_sweep(cfg, scheduler=scheduler, workers=workers, threads_per_worker=threads_per_worker,
                    processes=processes, progress=err.is_terminal, console=err, limit=limit,   # no bar in logs
                    any_inputs=any_inputs, warn=warn_once)
    res = {"sweep": cfg.name, **out.to_dict()}
    if json_mode:
        emit(res, True, None)
    else:
        con = console()
        con.print(f"sweep {cfg.name}: {out.total} cells, {out.skipped} already finished, {out.ran} run "
                  f"({out.failed} failed) in {out.wall_s:.1f} s -> {', '.join(out.files)}")
        if out.failed:
            errs = out.table[out.table["error"].fillna("").astype(str).str.len() > 0]
            for _, r in list(errs.iterrows())[:5]:
                con.print(f"  failed {r['key']} {r['instance']} / {r['method']}: {r['error']}")
    if out.failed:
        # the table keeps the finished cells (and the failed ones, retried by the next run), but the sweep did
        # not do what it was asked: exit status 1, and one line saying how many cells failed and why
        typer.echo(f"error: {out.failure_line(cfg.name)}; the next run retries them", err=True)
        raise typer.Exit(1)


sweep_cmd.not_stdout = {"output": "a sweep table (read back to resume the sweep)"}
