"""Options and helpers shared by the CLI commands."""

from __future__ import annotations

import functools
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from topoplan.core.io import dumps, write_json

if TYPE_CHECKING:
    from rich.console import Console

TopologyOpt = typer.Option(..., "--topology", "-t", help="Preset name (see `topoplan presets`), YAML file, or Slurm "
                           "topology.conf / topology.yaml (cores from the slurm.conf beside it).")
SetOpt = typer.Option(None, "--set", help="Override a topology field: dotted.key=value (repeatable), e.g. ocs.nodes_per_switch=4.")
TrafficOpt = typer.Option(..., "--traffic", "-T", help="Generator spec (e.g. neighbor2d:rows=16,cols=16,bytes=4MB,iters=5), matrix CSV, trace CSV, "
                          "trace directory (topoplan trace) or OTF2 archive.")
PlacementOpt = typer.Option("sequential", "--placement", "-p", help="sequential, round-robin, or a placement file (JSON/CSV).")
JsonOpt = typer.Option(False, "--json", help="Print machine-readable JSON instead of a table.")
OutOpt = typer.Option(None, "--output", "-o", help="Write the JSON result to this file (atomically); - for standard "
                      "output.")
PlanOutOpt = typer.Option(None, "--output", "-o", help="Write the plan to this file (atomically), - for standard "
                          "output; a name ending in .zip writes the compact plan archive, for large forwarding tables.")
SeedOpt = typer.Option(0, "--seed", min=0, help="Random seed (recorded in the result).")
def parse_time_limit(text: str) -> float:
    """``--time-limit``: a duration with a unit (``90s``, ``2min``, ``500ms``) or a bare number of seconds."""
    from topoplan.core.errors import TopoplanError
    from topoplan.core.units import parse_time

    from topoplan.problems.result import MAX_TIME_LIMIT_S

    try:
        limit = parse_time(text, "time_limit")
    except TopoplanError as exc:   # name the flag, not the field
        raise TopoplanError(flag_names(str(exc), {"time_limit": "--time-limit"})) from None
    if not 0 < limit <= MAX_TIME_LIMIT_S:   # the solvers' range, named by the flag before any work
        raise TopoplanError(f"--time-limit: must be more than 0 and at most {MAX_TIME_LIMIT_S:g} s (7 days), "
                            f"got {text!r}")
    return limit


TimeLimitOpt = typer.Option(None, "--time-limit", parser=parse_time_limit, metavar="DURATION",
                            help="Time limit of the whole command, from its start to the written result: seconds, "
                                 "or with a unit (90s, 2min, 1h).")


def past_limit(what: str, cost_s: float, then_s: float = 0.0) -> str:
    """The note of a stage skipped because it would end past the command's time limit: it takes ``cost_s``,
    and the stages after it (writing the result) ``then_s``."""
    from topoplan.core import deadline

    left = max(deadline.remaining() or 0.0, 0.0)
    after = f", writing the result {then_s:.1f} s more," if then_s >= 0.05 else ""
    return (f"not {what}: it takes about {cost_s:.1f} s{after} and {left:.1f} s of the time limit were left (a "
            f"longer --time-limit, or no limit, includes it)")


# The share of what the time limit leaves that finding an application's steps may take: the method, the
# simulation and writing share the rest.
STEPS_SHARE = 0.5


def steps_within_limit(traffic: str, trace):
    """The application's steps to plan on (:func:`topoplan.sim.steps.source_steps`), clocked within
    :data:`STEPS_SHARE` of what the command's time limit leaves, and the note to print when they were not found
    in it (then the steps are None: the plan is made on the traffic as one bulk phase). ``(steps, None)``
    without a limit."""
    from topoplan.core.progress import report
    from topoplan.sim.steps import StepClockLimit, source_steps

    limit = steps_time_limit()
    report(stage="finding the application's steps")
    try:
        return source_steps(traffic, trace, time_limit=limit), None
    except StepClockLimit:
        return None, steps_past_limit(limit)


def steps_time_limit() -> float | None:
    """The seconds finding the application's steps may take: :data:`STEPS_SHARE` of what the command's time
    limit leaves (None without a limit)."""
    from topoplan.core import deadline

    left = deadline.budget(None)
    return None if left is None else STEPS_SHARE * left


def steps_past_limit(limit_s: float) -> str:
    """The note of steps not found within ``limit_s`` (:func:`steps_time_limit`)."""
    return (f"steps: not found within {limit_s:.1f} s, half of what the time limit left; planned on the traffic as "
            f"one bulk phase (a longer --time-limit, or no limit, plans on the application's steps)")


def stopped_at_limit(what: str, cost_s: float) -> str:
    """The note of a stage stopped at the command's time limit, predicted at ``cost_s`` seconds."""
    return (f"not {what}: stopped at the time limit (it was predicted at {cost_s:.1f} s; a longer --time-limit, "
            f"or no limit, includes it)")


def simulated_within_limit(res, stage: str, simulate_fn, sim_s: float, write_s: float) -> float | None:
    """The plan's simulated time, simulated only when the command's time limit leaves room for it.

    ``simulate_fn()`` runs the simulation, predicted at ``sim_s`` seconds; writing the result takes ``write_s``
    after it. It runs when both fit in what the limit leaves, and stops at the deadline if the prediction fell
    short (many flows in flight at once). When it does not run, or stops, the note saying so is added to
    ``res.message`` and None is returned. ``stage`` names it on the progress line.
    """
    from topoplan.core import deadline
    from topoplan.core.progress import report

    if not deadline.fits(sim_s + write_s):
        note = past_limit("simulated", sim_s, write_s)
    else:
        report(stage=stage)
        try:
            with deadline.reserved(write_s), deadline.stopping():
                return simulate_fn()
        except deadline.DeadlineReached:
            note = stopped_at_limit("simulated", sim_s)
    res.add_note(note)
    return None


def time_bounded(command):
    """A command whose ``--time-limit`` (its ``time_limit`` parameter) bounds its whole run: the process-wide
    deadline (:mod:`topoplan.core.deadline`) is set while it runs, and every stage takes what is left."""
    from topoplan.core import deadline

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        with deadline.bounded(kwargs.get("time_limit")):
            return command(*args, **kwargs)

    return wrapper
ModelOpt = typer.Option(None, "--model", help="Network model: maxmin (default: max-min fair flows), paper "
                        "(the papers' per-link alpha + n/beta, store-and-forward, first come first served) or "
                        "fifo (messages up to 64 KiB first come, first served: each node sends them one at a "
                        "time; larger ones shared max-min; up to a million messages).")
RelayOpt = typer.Option(None, "--relay", help="How OCS relay nodes forward: pipelined (default; chunk by chunk) "
                        "or store-and-forward (whole message, as in the papers).")
RelayChunkOpt = typer.Option(None, "--relay-chunk", help="Chunk size of pipelined relays (default 64KiB); not "
                             "with --relay store-and-forward.")
ContentionOpt = typer.Option(None, "--paper-contention", help="Paper model only: queue messages per link "
                             "(default) or per receiving device.")
MpichOpt = typer.Option(None, "--mpich", metavar="FIELD=VALUE",
                        help="Set one of the MPI library's collective switch-over points or the alltoall throttle "
                             "(repeatable; default MPICH's, e.g. alltoall_throttle=4 as MPIR_CVAR_ALLTOALL_THROTTLE=4).")


def known_method(methods, name: str, flag: str) -> None:
    """Refuse a method ``methods`` (a problem's registry) does not have, naming the flag that gave it, before any
    input is read (a trace can take a while).

    Examples
    --------
    >>> from topoplan.problems.bcast import METHODS
    >>> known_method(METHODS, "bft", "--method")
    >>> known_method(METHODS, "bfs", "--method")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: --method: unknown bcast method 'bfs' (methods: default, dft, bft, greedy, anneal, ilp)
    """
    from topoplan.core.errors import TopoplanError
    from topoplan.problems.result import UnknownMethodError

    try:
        methods[name]
    except UnknownMethodError as exc:
        raise TopoplanError(f"{flag}: {exc}") from None


def mpich_thresholds(values):
    """The :class:`topoplan.traffic.collectives.MPICHThresholds` of the ``--mpich FIELD=VALUE`` flags; None
    without any (MPICH's defaults)."""
    if not values:
        return None
    from topoplan.traffic.collectives import MPICHThresholds

    return MPICHThresholds.from_options(values, where="--mpich")


def mpich_note(res: dict) -> str:
    """The fields a result records of ``--mpich`` as ``FIELD=VALUE, ...``: empty for MPICH's defaults."""
    return ", ".join(f"{k}={v}" for k, v in (res.get("mpich") or {}).items())


def sim_model(model: Optional[str] = None, relay: Optional[str] = None, relay_chunk: Optional[str] = None,
              paper_contention: Optional[str] = None, *, unused: str | None = None):
    """The :class:`topoplan.sim.simmodel.SimModel` of the --model/--relay/--relay-chunk/--paper-contention flags.

    A --relay-chunk given with --relay store-and-forward (whole messages, no chunks) is refused rather than
    ignored; so is any of the flags when the command simulates nothing: ``unused`` then says when it would
    (e.g. ``"with --simulate or --score simulated"``)."""
    from topoplan.core.errors import TopoplanError
    from topoplan.core.units import parse_size
    from topoplan.sim.simmodel import SimModel

    if unused is not None:
        given = [f for f, v in (("--model", model), ("--relay", relay), ("--relay-chunk", relay_chunk),
                                ("--paper-contention", paper_contention)) if v is not None]
        if given:
            raise TopoplanError(f"{given[0]}: the network model of a simulation, and this run simulates nothing "
                                f"(it does {unused})")

    try:
        chunk = parse_size(relay_chunk, "relay_chunk_B") if relay_chunk is not None else None
        smodel = SimModel.from_options(model=model, relay=relay, relay_chunk_B=chunk,
                                       paper_contention=paper_contention)
    except TopoplanError as e:  # name the flag, not the library field
        raise TopoplanError(flag_names(str(e), {"model": "--model", "relay": "--relay", "relay_chunk_B": "--relay-chunk",
                                                "paper_contention": "--paper-contention"})) from None
    if relay_chunk is not None and smodel.relay == "store-and-forward":
        raise TopoplanError("--relay-chunk: applies to pipelined relays only; --relay store-and-forward forwards "
                            "whole messages")
    return smodel


def flag_names(msg: str, flags: dict[str, str]) -> str:
    """A library error with its ``field 'name'`` replaced by the CLI flag that sets the field
    (library errors name fields; the CLI names its flags).

    >>> flag_names("field 'root': 9 must be a rank between 0 and 3", {"root": "--root"})
    '--root: 9 must be a rank between 0 and 3'
    """
    for field_, flag in flags.items():
        msg = msg.replace(f"field '{field_}'", flag)
    return msg


def console(json_mode: bool = False) -> Console:
    """Rich console for human output; on stderr when stdout carries JSON, so the two never mix.

    On a terminal lines fit its width; in pipes and files nothing is wrapped (a line is one record for
    grep and awk, and a table is as wide as its contents)."""
    from rich.console import Console   # 83 M instructions, a tenth of a small --json run: imported when drawn

    return Console(stderr=json_mode, highlight=False, width=None if sys.stdout.isatty() else 10_000)


def topology_record(topo, topology: str, sets) -> dict:
    """What a plan file records of its topology: the name, and the spec and --set overrides that rebuild it
    (``export`` reloads them to check a placement's cores)."""
    return {"topology": topo.name or topology, "topology_spec": topology, "topology_sets": list(sets or [])}


AnyInputsOpt = typer.Option(False, "--any-inputs", help="Use a plan even if it was made for another topology, "
                            "traffic or placement (its recorded input fingerprints differ).")


def check_plan_inputs(doc, flag: str, *, any_inputs: bool = False, topology=None, traffic=None,
                      placement=None) -> None:
    """Refuse a plan file (given by ``flag``, e.g. ``--circuits c.json``) made for other inputs than those given
    (``traffic`` may be a function returning it, called only when the plan records its inputs), or whose own
    ``rank_to_node`` was changed after planning (:func:`topoplan.plans.validate.check_recorded_inputs`). A plan
    that records no inputs (written before they were recorded) is used unchecked, with a warning on stderr (once
    a file in a command)."""
    from topoplan.plans.validate import check_recorded_inputs

    name = flag.split(" ", 1)[1] if flag.startswith("-") and " " in flag else flag
    if not check_recorded_inputs(doc, flag, name=name, any_inputs=any_inputs, topology=topology, traffic=traffic,
                                 placement=placement):
        warn_once(f"{name} records no inputs: not checked against the topology and traffic")


def load_checked_inputs(topology: str, sets, traffic: str, placement: str, any_inputs: bool):
    """:func:`topoplan.traffic.sources.load_inputs` of a command taking ``-p``: a placement file made for other
    inputs (its recorded fingerprints) is refused before it is read, as ``simulate`` does."""
    from topoplan.traffic.sources import load_inputs

    def check(topo, traffic_):
        check_plan_inputs(plan_doc(placement), f"--placement {placement}", any_inputs=any_inputs, topology=topo,
                          traffic=traffic_)

    return load_inputs(topology, sets, traffic, placement, check=check)


# the warnings of the running command, each once, in order: printed when it ends (topoplan.cli.main.main)
pending_warnings: dict = {}


def warn_once(text: str) -> None:
    """``warning: TEXT`` on stderr, once in a command, when it ends: a command refusing its input prints its one
    ``error:`` line alone."""
    pending_warnings.setdefault(text, None)


def end_warnings(show: bool) -> None:
    """Print the command's warnings (``show``: it ended without an error) and forget them."""
    for text in pending_warnings if show else ():
        typer.echo(f"warning: {text}", err=True)
    pending_warnings.clear()


def plan_doc(spec) -> dict | None:
    """The JSON document of a plan or placement file argument (a plan archive's too), or None (a named
    placement, a CSV): :func:`topoplan.plans.planfile.plan_file_document`."""
    from topoplan.plans.planfile import plan_file_document

    return plan_file_document(spec)


class _Line:
    """What the progress line shows: the work (a stack of labels), the limit, what the library reported."""

    def __init__(self):
        self.labels: list[tuple[str, float | None, str, float]] = []   # label, limit, hint, start
        self.fields: dict = {}

    def push(self, label: str, time_limit: float | None = None, hint: str = "") -> None:
        self.labels.append((label, time_limit, hint, time.monotonic()))

    def update(self, fields: dict) -> None:
        """A report from the library; a new stage starts its own count."""
        if "stage" in fields:
            self.fields.pop("done", None)
            self.fields.pop("total", None)
        self.fields.update(fields)

    def text(self, width: int, now: float | None = None) -> str:
        """The line, at most ``width`` characters: spinner and clock (the innermost block's time, against its
        limit) first, never cut; then the work, what the library reports (stage, done of total, incumbent and
        bound) and the hint, cut at the end.

        >>> line = _Line()
        >>> line.push("ilp", 20.0, "Ctrl-C: stop and keep the best plan")
        >>> t0 = line.labels[-1][3]
        >>> line.fields.update(stage="simulating the plan", incumbent=0.16, bound=0.15)
        >>> line.text(80, now=t0 + 12.4)
        '⠏ 0:12 / 0:20  ilp: simulating the plan, incumbent 0.16, bound 0.15  (Ctrl-C: s…'
        >>> line.fields = {"done": 3, "total": 12}
        >>> line.text(40, now=t0 + 75)
        '⠋ 1:15 / 0:20  ilp: 25%  (Ctrl-C: stop …'
        """
        now = time.monotonic() if now is None else now
        label, limit, hint, t0 = self.labels[-1] if self.labels else ("working", None, "", now)
        elapsed = now - t0
        clock = _clock(elapsed) + (f" / {_clock(limit)}" if limit else "")
        parts = []
        f = self.fields
        if f.get("stage"):
            stage = str(f["stage"])
            parts.append(stage[len(label) + 1:].strip() if stage.startswith(label + ":") else stage)
        if f.get("total"):
            parts.append(f"{100 * min(f.get('done', 0) / f['total'], 1):.0f}%")
        parts += [f"{k} {f[k]:.6g}" for k in ("incumbent", "bound") if f.get(k) is not None]
        if f.get("note"):
            parts.append(f"({f['note']})")
        text = f"{SPINNER[int(elapsed * 8) % len(SPINNER)]} {clock}  {label}" + (": " + ", ".join(parts) if parts else "")
        if hint:
            text += f"  ({hint})"
        return text if len(text) <= width else text[:max(width - 1, 0)] + "…"


SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
_line: list = []   # the line on screen while a `working` block runs (nested blocks share it)


def _clock(seconds: float) -> str:
    """``m:ss`` (``h:mm:ss`` from an hour)."""
    s = int(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


@contextmanager
def serial_blas():
    """Within the block, a first import of NumPy starts OpenBLAS with one thread, unless the user chose a
    number (``OPENBLAS_NUM_THREADS``); the environment is as before afterwards (child processes inherit the
    user's).

    OpenBLAS starts its thread pool and their buffers when NumPy is imported: 0.1 s of wall time and 0.14 s of
    CPU on the 2-core build machine, half of what importing NumPy costs and a third of a small ``simulate
    --flows`` process. For commands whose library calls no BLAS routine (the simulator: NumPy's element-wise
    and sorting functions and the compiled loop, never a matrix or dot product), so their results are the same.

    Examples
    --------
    >>> import os
    >>> before = os.environ.get("OPENBLAS_NUM_THREADS")
    >>> with serial_blas():
    ...     os.environ["OPENBLAS_NUM_THREADS"] == (before or "1")
    True
    >>> os.environ.get("OPENBLAS_NUM_THREADS") == before
    True
    """
    import os

    before = os.environ.get("OPENBLAS_NUM_THREADS")
    if before:   # the user's choice (empty is OpenBLAS's default: one thread per core)
        yield
        return
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        yield
    finally:
        if before is None:
            del os.environ["OPENBLAS_NUM_THREADS"]
        else:
            os.environ["OPENBLAS_NUM_THREADS"] = before


def _may_be_terminal(stream) -> bool:
    """Whether rich could take ``stream`` for a terminal: only then is rich imported to ask it.

    rich's ``Console.is_terminal`` (not forced) is true only with ``TTY_COMPATIBLE=1``, a non-empty
    ``FORCE_COLOR`` or a stream that is a TTY; importing rich to learn that a pipe is not one took a tenth of
    a small ``--json`` run."""
    import os

    if os.environ.get("TTY_COMPATIBLE", "") == "1" or os.environ.get("FORCE_COLOR"):
        return True
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


@contextmanager
def working(label: str, time_limit: Optional[float] = None, hint: str = ""):
    """Show one line of progress on stderr while the block runs, when stderr is a terminal: a spinner, the
    elapsed time (against ``time_limit``), ``label`` and what the library reports inside the block
    (:mod:`topoplan.core.progress`: stage, done of total, incumbent and bound), cut to the terminal's width.
    Nothing in pipes and logs. A block inside another changes the line's label and limit until it ends.
    The block must not print: results are printed after it."""
    if _line:
        line = _line[0]
        line.push(label, time_limit, hint)
        saved = dict(line.fields)
        line.fields.clear()
        try:
            yield
        finally:
            line.labels.pop()
            line.fields.clear()
            line.fields.update(saved)
        return
    if not _may_be_terminal(sys.stderr):   # rich's own answer would be no: not imported (start-up)
        yield
        return
    from rich.console import Console

    err = Console(stderr=True, highlight=False)
    if not err.is_terminal:
        yield
        return
    from rich.live import Live
    from rich.text import Text

    from topoplan.core.progress import reporting_to

    line = _Line()
    line.push(label, time_limit, hint)

    class _View:
        def __rich_console__(self, console, options):
            yield Text(line.text(max(options.max_width - 1, 10)), no_wrap=True, overflow="crop")

    _line.append(line)
    try:
        with Live(_View(), console=err, transient=True, refresh_per_second=8, redirect_stdout=False,
                  redirect_stderr=False), reporting_to(line.update, min_interval_s=0.1):
            yield
    finally:
        _line.clear()


def solving(method: str, time_limit: Optional[float] = None):
    """:func:`working` for a search that Ctrl-C stops keeping its best plan."""
    return working(method, time_limit, "Ctrl-C: stop and keep the best plan")


def emit(result: dict, json_mode: bool, output: Optional[Path]) -> None:
    """Write the result file (if asked) and print JSON (if asked)."""
    if output is not None:
        write_json(output, result)
    if json_mode:
        typer.echo(dumps(result))
