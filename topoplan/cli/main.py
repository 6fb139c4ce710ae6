"""The ``topoplan`` command line (Typer). Each command group lives in :mod:`topoplan.cli.commands`.

Start-up: ``topoplan --version`` answers before Typer is imported, and a command line that names no command
(``--help``, a typo) lists every command from its help text alone, converting a command into its click form
(its options) only when it runs or shows its own help; the library a command runs is imported when it runs.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

from topoplan.cli.examples import epilog
from topoplan.core import deadline, interrupt
from topoplan.core.errors import TopoplanError
from topoplan.core.units import is_ascii_int, is_ascii_number, shown

__all__ = ["COMMAND_MODULES", "COMMANDS", "OUTPUT_PARAMS", "guard_outputs", "build_app", "root_command", "ascii_numbers",
           "main"]

# The top-level commands and groups, each with the module (topoplan.cli.commands.<module>, with a
# register(app)) that registers it: adding a command is one entry. A command line that names one imports
# only that module, not every command's dependencies (start-up); tests/test_cli_conventions.py checks the
# table against what the modules register.
COMMANDS = {"presets": "basic", "show": "basic", "traffic": "basic", "analyze": "basic", "demo": "demo",
            "simulate": "simulate", "circuits": "circuits", "compare": "circuits", "place": "place",
            "export": "export", "bcast": "bcast", "serve": "topo", "topo": "topo", "validate": "validate",
            "cost": "cost", "bound": "bound", "report": "report", "sweep": "sweep", "trace": "trace",
            "phases": "phases", "emulate": "emulate"}
# Every command module, in the order their commands are listed in --help.
COMMAND_MODULES = tuple(dict.fromkeys(f"topoplan.cli.commands.{m}" for m in COMMANDS.values()))

OUTPUT_PARAMS = ("output", "rankfile", "png")


def guard_outputs(fn):
    """Wrap a command so its output files may not be one of its input files, nor each other.

    Inputs are the other path-like arguments that name existing files; a command that would
    overwrite its own input (``topo convert -i D -o D``) stops before doing any work.

    An output named ``-`` is standard output (:func:`topoplan.core.io.is_stdout`): the command then
    prints everything else on standard error. It is refused, naming the option, with ``--json`` (which
    prints there too), for the formats in the command's ``output_dir_formats`` (a directory of files)
    and for the parameters in its ``not_stdout`` (``{parameter: what it is}``: a binary file, a
    directory, a table read back).

    Parameters
    ----------
    fn : callable
        A command callback; its parameters named in :data:`OUTPUT_PARAMS` are outputs.

    Returns
    -------
    callable
        The wrapped callback.

    Examples
    --------
    >>> import os, tempfile
    >>> def convert(input: str, output: str):
    ...     return f"{input} -> {output}"
    >>> convert = guard_outputs(convert)
    >>> with tempfile.NamedTemporaryFile(suffix=".yaml") as f:
    ...     convert(f.name, f.name)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: ...yaml: output would overwrite the input ...yaml; choose another name
    >>> convert("topology.yaml", "-")
    'topology.yaml -> -'
    >>> def draw(input: str, png: str):
    ...     return f"{input} -> {png}"
    >>> draw.not_stdout = {"png": "a PNG image (binary)"}
    >>> guard_outputs(draw)("result.json", "-")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: --png -: a PNG image (binary) cannot go to standard output; give a file name
    """
    import inspect

    from topoplan.core.io import check_writable, is_stdout, stdout_reserved

    sig = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        bound = sig.bind_partial(*args, **kwargs).arguments
        outs = [(k, v) for k, v in bound.items() if k in OUTPUT_PARAMS and v is not None]
        refused = dict(getattr(fn, "not_stdout", {}))
        if getattr(fn, "output_dir_formats", None) and bound.get("fmt") in fn.output_dir_formats:
            refused.update((k, f"a directory of {bound['fmt']} files") for k, _ in outs)
            outs = []   # a directory of files (export routes): checked and written by the command itself
        for name, what in refused.items():
            if is_stdout(bound.get(name)):
                name_of = "a directory" if "directory" in what else "a file"   # (trace, export routes: directories)
                raise TopoplanError(f"{_option(sig, name)} -: {what} cannot go to standard output; give {name_of} "
                                    "name")
        to_stdout = [name for name, path in outs if is_stdout(path)]
        if to_stdout and bound.get("json_mode"):
            raise TopoplanError(f"--json: prints to standard output, where {_option(sig, to_stdout[0])} - writes "
                                "too; give one of them")
        ins = [v for k, v in bound.items() if k not in OUTPUT_PARAMS and isinstance(v, (str, Path))]
        for i, (name, path) in enumerate(outs):
            check_writable(path, inputs=ins)
            for other, prev in outs[:i]:
                if Path(prev).resolve() == Path(path).resolve():
                    what = "- (standard output)" if is_stdout(path) else path
                    raise TopoplanError(f"{what}: given as both --{other} and --{name}; choose two names")
        if to_stdout:
            with stdout_reserved():   # the document alone on standard output; the command's messages on stderr
                return fn(*args, **kwargs)
        return fn(*args, **kwargs)

    return wrapper


def _option(sig, name: str) -> str:
    """The long option of a command's parameter (``out_dir`` -> ``--output``), from its Typer declaration."""
    decls = getattr(sig.parameters[name].default, "param_decls", None) or ()
    return next((d for d in decls if d.startswith("--")), f"--{name.replace('_', '-')}")


def _guard_all(app: typer.Typer, prefix: str = "") -> None:
    for cmd in app.registered_commands:
        cmd.callback = guard_outputs(cmd.callback)
        name = cmd.name or cmd.callback.__name__.replace("_", "-")
        if cmd.epilog is None:
            cmd.epilog = epilog(f"{prefix}{name}")
    for group in app.registered_groups:
        _guard_all(group.typer_instance, f"{prefix}{group.name or group.typer_instance.info.name} ")


def _version_line() -> str:
    # the package's own version (topoplan/__init__.py, loaded before any of its modules; tests/test_startup.py
    # checks it against the installed metadata, whose reader, importlib.metadata, adds 12% to --version)
    return f"topoplan {sys.modules['topoplan'].__version__}"


def _version(value: bool) -> None:
    if value:
        import typer

        typer.echo(_version_line())
        raise typer.Exit()


def build_app(command: str | None = None) -> typer.Typer:
    """The Typer application with every command group of :data:`COMMAND_MODULES` registered.

    Parameters
    ----------
    command : str, optional
        A top-level command of :data:`COMMANDS`: register only its module.

    Returns
    -------
    typer.Typer
        Output files of every command are guarded (:func:`guard_outputs`).

    Examples
    --------
    >>> app = build_app()
    >>> "simulate" in [c.name for c in app.registered_commands]
    True
    >>> [c.name for c in build_app("simulate").registered_commands]
    ['simulate']
    """
    import importlib

    import typer

    # plain click help (no boxes: greppable, flags shown without a value placeholder), -h as well as --help,
    # shell completion (--install-completion), and an Examples block at the end of every command's help
    app = typer.Typer(name="topoplan", no_args_is_help=True, add_completion=True, rich_markup_mode=None,
                      pretty_exceptions_enable=False, context_settings={"help_option_names": ["-h", "--help"]},
                      help="Planning engine for HPC interconnects: hybrid EPS/OCS circuits, process placement, "
                           "topology-aware Bcast, and a flow-level simulator to score every plan.")

    @app.callback()
    def _root(version: bool = typer.Option(False, "--version", is_eager=True, callback=_version,
                                           help="Print the version and exit.")) -> None:
        """Planning engine for HPC interconnects: hybrid EPS/OCS circuits, process placement,
        topology-aware Bcast, and a flow-level simulator to score every plan."""

    modules = [f"topoplan.cli.commands.{COMMANDS[command]}"] if command in COMMANDS else COMMAND_MODULES
    for name in modules:
        importlib.import_module(name).register(app)
    _guard_all(app)
    return app


def root_command(app: typer.Typer):
    """The click command of ``app`` (:func:`build_app`), each command converted when it is first looked up.

    Typer converts every command's options when it builds the click command (``typer.main.get_command``),
    which costs more than importing the command modules; a command line runs at most one command. Here the
    root group holds each command in a form with its help text only (what the root's ``--help`` lists, the
    same text) and converts a command into its click form, numeric options read as ASCII
    (:func:`ascii_numbers`), when it is looked up to run, show its help or complete.

    Parameters
    ----------
    app : typer.Typer

    Returns
    -------
    click.Command
        The root group (Typer's group class, extended).

    Examples
    --------
    >>> import typer
    >>> root = root_command(build_app())
    >>> eager = typer.main.get_command(build_app())
    >>> ascii_numbers(eager)
    >>> ctx, eager_ctx = (r.make_context("topoplan", [], resilient_parsing=True) for r in (root, eager))
    >>> root.get_help(ctx) == eager.get_help(eager_ctx)
    True
    >>> [p.name for p in root.get_command(ctx, "phases").params] == [p.name for p in eager.commands["phases"].params]
    True
    """
    import typer.main as tm

    kw = {"pretty_exceptions_short": app.pretty_exceptions_short, "rich_markup_mode": app.rich_markup_mode}
    bare = _copy(app)
    bare.registered_commands, bare.registered_groups = [], []
    bare.info = _copy(app.info)
    bare.info.cls = _lazy_group_class()
    root = tm.get_command(bare)          # the root's own options (--version, completion, --help)
    ascii_numbers(root)
    listed, convert = {}, {}
    for info in app.registered_commands:
        stub = tm.get_command_from_info(_copy(info, callback=_help_only(info.callback)), **kw)
        listed[stub.name], convert[stub.name] = stub, (tm.get_command_from_info, info, kw)
    for info in app.registered_groups:
        group_kw = {**kw, "suggest_commands": app.suggest_commands}
        inner = _copy(info.typer_instance)
        inner.registered_commands, inner.registered_groups = [], []
        stub = tm.get_group_from_info(_copy(info, typer_instance=inner), **group_kw)
        listed[stub.name], convert[stub.name] = stub, (tm.get_group_from_info, info, group_kw)
    root.commands, root.to_convert = listed, convert
    return root


def _copy(obj, **changes):
    """A shallow copy of ``obj`` with some attributes changed."""
    import copy as copy_

    out = copy_.copy(obj)
    for name, value in changes.items():
        setattr(out, name, value)
    return out


def _help_only(fn):
    """A function with ``fn``'s name and help text and no parameters (what a command's listing needs)."""
    def listed():
        raise AssertionError("a listed command is converted before it runs")   # pragma: no cover

    listed.__name__, listed.__qualname__, listed.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
    return listed


@functools.cache
def _lazy_group_class():
    from typer.core import TyperGroup

    class LazyGroup(TyperGroup):
        """Typer's group whose commands (:attr:`to_convert`) are converted when looked up; its listing in
        ``--help`` reads the help-only forms."""
        _listing = False

        def get_command(self, ctx, cmd_name):
            if not self._listing and cmd_name in getattr(self, "to_convert", ()):
                make, info, kw = self.to_convert.pop(cmd_name)
                self.commands[cmd_name] = make(info, **kw)
                ascii_numbers(self.commands[cmd_name])
            return super().get_command(ctx, cmd_name)

        def format_commands(self, ctx, formatter):
            self._listing = True
            try:
                super().format_commands(ctx, formatter)
            finally:
                self._listing = False

    return LazyGroup


def ascii_numbers(command) -> None:
    """Make the numeric options and arguments of a click command (and its subcommands) read ASCII numbers only.

    click reads them with Python's ``int()`` and ``float()``, which also take digits of other scripts
    (``'٣'`` is 3) and underscores (``'1_0'`` is 10): a typo would become a number. The rule is the one
    every other number read from text follows (:func:`topoplan.core.units.is_ascii_int`,
    :func:`~topoplan.core.units.is_ascii_number`).

    Parameters
    ----------
    command : click.Command
        ``typer.main.get_command(app)``; changed in place (each numeric parameter gets its own copy of its type).

    Examples
    --------
    >>> import typer
    >>> command = typer.main.get_command(build_app("phases"))
    >>> ascii_numbers(command)
    >>> windows = next(p for p in command.commands["phases"].params if p.name == "windows")
    >>> windows.type.convert("12", windows, None)
    12
    >>> try:
    ...     windows.type.convert("١٢", windows, None)
    ... except Exception as exc:          # click's usage error: the CLI prints it as one line, exit status 2
    ...     print(type(exc).__name__, exc)
    BadParameter '١٢' is not a number in ASCII digits (0-9)
    """
    from copy import copy

    for param in command.params:
        kinds = {c.__name__ for c in type(param.type).__mro__}   # by name: Typer may vendor its own click
        check = is_ascii_int if "IntParamType" in kinds else is_ascii_number if "FloatParamType" in kinds else None
        if check is None:
            continue
        kind = param.type = copy(param.type)

        def convert(value, param, ctx, _convert=kind.convert, _check=check, _kind=kind):
            if isinstance(value, str) and not _check(value):
                digits = value.strip(" \t").removeprefix("-")
                too_long = _check is is_ascii_int and digits.isascii() and digits.isdigit()   # more than int() reads
                what = "too long a number" if too_long else "not a number in ASCII digits (0-9)"
                _kind.fail(f"{shown(value)} is {what}", param, ctx)
            return _convert(value, param, ctx)

        kind.convert = convert
    for sub in getattr(command, "commands", {}).values():
        ascii_numbers(sub)


# Library errors name the fields they are about; the CLI names the flags that set those fields.
FIELD_FLAGS = {"set": "--set", "network": "--network", "allocation": "--allocation", "at_s": "--at",
               "scheduler": "--scheduler"}


def _flags(message: str) -> str:
    """``field 'network': ...`` -> ``--network: ...`` for the fields a command-line flag sets.

    Examples
    --------
    >>> _flags("field 'network': 'x': choose one of eps, fat-tree")
    "--network 'x': choose one of eps, fat-tree"
    """
    for field_, flag in FIELD_FLAGS.items():
        message = message.replace(f"field '{field_}': ", f"{flag} ")
    return message


def main(argv=None) -> int:
    """Run the CLI; bad input becomes one line on stderr and exit status 2.

    Parameters
    ----------
    argv : list of str, optional
        The arguments (default ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit status: 0 on success, 2 for bad input (``error: <message>`` on
        stderr), 130 when interrupted.

    Examples
    --------
    >>> main(["show", "paper003"])  # doctest: +ELLIPSIS
    kind: hybrid
    name: paper003
    switches: 4
    ...
    0
    >>> main(["show", "nosuch"])    # prints "error: unknown topology preset 'nosuch' ..." on stderr
    2
    """
    # a time limit counts from the start: of this process when run as a program (start-up and imports included)
    deadline.mark_start(process=argv is None)
    args = sys.argv[1:] if argv is None else list(argv)
    if args == ["--version"]:   # what the eager --version option prints, without building the application
        print(_version_line(), flush=True)
        deadline.clear_start()
        return 0
    named = args[0] if args and args[0] in COMMANDS else None
    command = root_command(build_app(named))
    interrupt.reset()
    ended = False   # the command ran to its end: its warnings are printed (after an error, its line alone)
    try:
        rc = command.main(args=args, prog_name="topoplan", standalone_mode=False)
        ended = not isinstance(rc, int) or rc == 0
        if isinstance(rc, int) and rc == 130:   # Typer turns KeyboardInterrupt into Exit(130) and returns it
            raise KeyboardInterrupt
        if isinstance(rc, int) and rc != 0:
            return rc
        if interrupt.was_interrupted():
            # the first Ctrl-C stopped a search: its best plan was written (status "interrupted"), but the
            # run did not finish as asked, so it is not a success
            print("interrupted: stopped early by Ctrl-C; the results written hold the best plan found so far",
                  file=sys.stderr)
            return 130
    except TopoplanError as exc:
        print(f"error: {_flags(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:  # a path the OS refuses (name too long, permissions) that no reader caught
        name = str(exc.filename or "")
        name = name if len(name) <= 80 else name[:77] + "..."
        print(f"error: {name + ': ' if name else ''}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except SystemExit as exc:
        return int(exc.code or 0) if isinstance(exc.code, int) else 1
    except Exception as exc:  # click usage errors and the like
        kinds = {c.__name__ for c in type(exc).__mro__}
        # Typer may vendor its own copy of click (typer._click), so match by class name, not identity
        if "NoArgsIsHelpError" in kinds:   # a bare command group: its help, which is not a result
            print(exc.format_message(), file=sys.stderr)
            return 2
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
    finally:
        deadline.clear_start()   # the next command in this process (tests, a notebook) counts from its own start
        common = sys.modules.get("topoplan.cli.commands.common")   # imported by the commands, not here (start-up)
        if common is not None:
            common.end_warnings(ended)
    return 0


if __name__ == "__main__":
    sys.exit(main())
