"""The ``topoplan`` command line (Typer). Each command group lives in :mod:`planner.commands`."""

from __future__ import annotations

import importlib
import importlib.util
import sys

import typer

from planner.errors import TopoplanError

# Command modules, each with register(app). Listed here so adding a group is one line.
COMMAND_MODULES = (
    "planner.commands.basic",
    "planner.commands.demo",
    "planner.commands.simulate",
    "planner.commands.circuits",
    "planner.commands.place",
    "planner.commands.export",
    "planner.commands.bcast",
    "planner.commands.topo",
    "planner.commands.experiments",
    "planner.commands.validate",
    "planner.commands.cost",
    "planner.commands.bound",
    "planner.commands.report",
    "planner.commands.sweep",
)


def build_app() -> typer.Typer:
    app = typer.Typer(name="topoplan", no_args_is_help=True, add_completion=False,
                      pretty_exceptions_enable=False,
                      help="Planning engine for HPC interconnects: hybrid EPS/OCS circuits, process placement, "
                           "topology-aware Bcast, and a flow-level simulator to score every plan.")
    for name in COMMAND_MODULES:
        if importlib.util.find_spec(name) is None:
            continue  # a group not built yet
        importlib.import_module(name).register(app)
    return app


def main(argv=None) -> int:
    """Run the CLI; bad input becomes one line on stderr and exit status 2."""
    app = build_app()
    try:
        app(args=argv, prog_name="topoplan", standalone_mode=False)
    except TopoplanError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except SystemExit as exc:
        return int(exc.code or 0) if isinstance(exc.code, int) else 1
    except Exception as exc:  # click usage errors and the like
        kinds = {c.__name__ for c in type(exc).__mro__}
        # Typer may vendor its own copy of click (typer._click), so match by class name, not identity
        if "UsageError" in kinds:
            # one line, like every other input error; the usage block is one --help away
            ctx = getattr(exc, "ctx", None)
            where = ctx.command_path if ctx is not None else "topoplan"
            print(f"error: {where}: {exc.format_message()} (see '{where} --help')", file=sys.stderr)
            return 2
        if "ClickException" in kinds:
            exc.show()
            return 2
        if "Abort" in kinds:
            print("error: aborted", file=sys.stderr)
            return 1
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
