"""``topoplan report``: a CLV-style HTML page (and PNG) from a simulation timeline."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from topoplan.cli.commands.common import JsonOpt, console, emit, working


def register(app: typer.Typer) -> None:
    app.command("report")(report_cmd)


def report_cmd(
    result: Path = typer.Argument(..., help="Result JSON of `topoplan simulate --timeline DT --json -o FILE` (or of "
                                  "`topoplan emulate --timeline DT -o FILE`: its measured timeline)."),
    output: Optional[Path] = typer.Option(Path("report.html"), "--output", "-o", help="HTML page to write."),
    png: Optional[Path] = typer.Option(None, "--png", help="Also write all views stacked in one PNG."),
    at: Optional[str] = typer.Option(None, "--at", help="Time of the topological view (e.g. 12ms; default: the busiest interval)."),
    frames: int = typer.Option(8, "--frames", help="Times the page can show in the topological view (plus the selected one)."),
    title: Optional[str] = typer.Option(None, "--title", help="Page title."),
    predicted: bool = typer.Option(False, "--predicted", help="Draw an emulation's predicted timeline (topoplan "
                                   "emulate --timeline DT -o FILE) instead of the measured one."),
    json_mode: bool = JsonOpt,
) -> None:
    """Time series of link utilization per class, topological view, heat maps: one self-contained HTML file."""
    from topoplan.core.errors import TopoplanError
    from topoplan.reporting.report import write_report
    from topoplan.core.units import parse_time

    if frames < 1:
        raise TopoplanError(f"--frames: must be at least 1, got {frames}")
    at_s = parse_time(at, "--at") if at else None
    from topoplan.core.io import output_group

    with working("report"), output_group():   # progress on a terminal; the page and the PNG: both or neither
        res = write_report(result, output, png=png, frames=frames, at_s=at_s, title=title,
                           key="predicted_timeline" if predicted else "timeline")
    if json_mode:
        emit(res, True, None)
        return
    con = console()
    con.print(f"wrote {res['html']} ({res['html_bytes'] / 1e3:,.0f} KB): {res['links']} busy links, "
              f"{res['intervals']} intervals, {res['frames']} times in the topological view"
              + (f"; {res['png']}" if "png" in res else ""))


report_cmd.not_stdout = {"png": "a PNG image (binary)"}
