"""CLI conventions (issue 18, point 6): -h, --version, completion, an example in every --help (and the
examples run as written), flags shown without a value placeholder, a bare group's help without an
empty error, durations with units for --time-limit."""

import os
import shlex
import shutil
import subprocess
import sys

import pytest

from topoplan.cli.examples import EXAMPLES, ORDER


def _commands():
    """``(path, click command)`` of every leaf command."""
    import typer.main

    from topoplan.cli.main import build_app

    root = typer.main.get_command(build_app())
    out = []

    def walk(cmd, path):
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk(sub, [*path, name])
        else:
            out.append((" ".join(path), cmd))

    walk(root, [])
    return out


COMMANDS = _commands()


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "topoplan", *args], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS])
def test_every_command_has_an_example_and_short_help(path, run_cli):
    code, out, err = run_cli(*path.split(), "-h")
    assert code == 0, err
    example = out[out.index("Examples:\n"):].splitlines()[1].strip()
    assert example == f"topoplan {path}" or example.startswith(f"topoplan {path} "), out[-400:]
    assert "<bool>" not in out       # a flag takes no value


def test_examples_name_real_commands():
    paths = {p for p, _ in COMMANDS}
    assert set(EXAMPLES) <= paths
    for path, lines in EXAMPLES.items():
        assert all(line.startswith(f"topoplan {path} ") or line == f"topoplan {path}" for line in lines), path
    assert set(ORDER) <= set(EXAMPLES)


def test_the_examples_run_as_written(tmp_path, data, run_cli, monkeypatch):
    """Every example of ORDER, one after another in one directory (they pass files down)."""
    monkeypatch.chdir(tmp_path)
    shutil.copy(data / "ib" / "tree2" / "ibnetdiscover.txt", tmp_path / "ibnetdiscover.txt")
    shutil.copytree(data / "ib" / "tree2" / "lft", tmp_path / "lft")
    (tmp_path / "hosts.txt").write_text("node001\nnode002\nnode003\nnode004\n")
    (tmp_path / "sweep.yaml").write_text("name: s\noutput: s.csv\nproblem: circuits\nmethods: [none, greedy]\n"
                                         "instances: [{topology: paper003, traffic: 'ring:np=64,bytes=4MB'}]\n")
    for path in ORDER:
        for line in EXAMPLES[path]:
            args = shlex.split(line)[1:]
            code, out, err = run_cli(*args)
            assert code == 0, (line, err)


def test_version_and_completion():
    """``--show-completion`` prints the script of the shell it runs in, found from its parent processes (the
    nearest shell; a login shell's $SHELL): under ``sh`` (a CI runner, a Makefile recipe) there is none to print,
    so the shell is set here, not inherited from whatever started the suite."""
    from importlib.metadata import version

    r = _cli("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"topoplan {version('topoplan')}"
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("needs bash")
    cmd = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "topoplan", "--show-completion"])
    # bash runs the command as its child ('; exit' keeps it from exec'ing it): bash is the nearest shell
    r = subprocess.run([bash, "--norc", "--noprofile", "-c", f"{cmd}; exit $?"], capture_output=True, text=True,
                       timeout=300, env=dict(os.environ, SHELL=bash))
    assert r.returncode == 0, r.stderr
    assert "_TOPOPLAN_COMPLETE=complete_bash" in r.stdout and "complete -o default -F" in r.stdout
    # the script itself, as the shell asks for it: no detection involved
    r = subprocess.run([sys.executable, "-m", "topoplan"], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, _TOPOPLAN_COMPLETE="source_bash"))
    assert r.returncode == 0 and "_TOPOPLAN_COMPLETE=complete_bash" in r.stdout, r.stderr


def test_a_bare_group_prints_its_help_not_an_empty_error():
    r = _cli("topo")
    assert r.returncode == 2 and r.stderr.startswith("Usage: topoplan topo") and "error:" not in r.stderr
    assert r.stdout == ""


@pytest.mark.parametrize("value, seconds", [("2", 2.0), ("2s", 2.0), ("1500ms", 1.5), ("0.5min", 30.0)])
def test_time_limit_takes_units(value, seconds, run_cli):
    import json

    code, out, err = run_cli("circuits", "-t", "paper003", "-T", "ring:np=64,bytes=4MB", "-m", "greedy",
                             "--time-limit", value, "--json")
    assert code == 0, err
    assert json.loads(out)["options"]["time_limit"] == seconds


def test_keyboard_interrupt_is_not_success(monkeypatch, run_cli):
    """Typer turns Ctrl-C into a return value of 130; main() must not turn that into 0."""
    import topoplan.cli.commands.basic as basic

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(basic, "load_topology", interrupted, raising=False)
    monkeypatch.setattr("topoplan.core.topology_io.load_topology", interrupted)
    code, _, err = run_cli("show", "paper003")
    assert code == 130 and "interrupted" in err


def test_command_table_names_every_top_level_command_and_its_module():
    import importlib

    import typer

    from topoplan.cli.main import COMMAND_MODULES, COMMANDS, build_app

    registered = {}
    for name in COMMAND_MODULES:
        app = typer.Typer()
        importlib.import_module(name).register(app)
        for c in app.registered_commands:
            registered[c.name or c.callback.__name__.replace("_", "-")] = name.rsplit(".", 1)[1]
        for g in app.registered_groups:
            registered[g.name or g.typer_instance.info.name] = name.rsplit(".", 1)[1]
    assert COMMANDS == registered
    full = build_app()
    top = {c.name for c in full.registered_commands} | {g.name or g.typer_instance.info.name
                                                        for g in full.registered_groups}
    assert top == set(COMMANDS)


def test_a_named_command_imports_only_its_module():
    code = ("import sys; from topoplan.cli.main import main; main(['simulate', '--help']); "
            "print(sorted(m for m in sys.modules if m.startswith('topoplan.cli.commands.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    loaded = eval(out.stdout.strip().splitlines()[-1])
    assert "topoplan.cli.commands.simulate" in loaded
    assert not {"topoplan.cli.commands.circuits", "topoplan.cli.commands.place", "topoplan.cli.commands.bcast"} & set(loaded)


def test_a_small_simulation_does_not_import_pydantic(tmp_path, shared):
    # Typer 0.29 coerces every parameter through a pydantic TypeAdapter; importing pydantic
    # and its plugin loader cost ~0.1 s of a 0.3 s `simulate --flows` process (pyproject pins <0.29).
    scenario = shared / "reference" / "simgrid" / "a2a_8x8.scenario.json.gz"
    code = ("import sys; from topoplan.cli.main import main; "
            f"rc = main(['simulate', '--flows', {str(scenario)!r}, '--json', '-o', {str(tmp_path / 'r.json')!r}]); "
            "print(rc, 'pydantic' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-2:] == ["0", "False"]
    assert (tmp_path / "r.json").stat().st_size > 0


def test_a_heuristic_plan_on_a_matrix_imports_neither_scipy_nor_pulp(tmp_path, shared):
    # importing scipy.sparse takes 0.2-0.3 s (SciPy's array API layer loads NumPy's f2py, testing and ma) and PuLP
    # with its HiGHS bindings about 50 ms: a third of a greedy plan's process. Only a trace's steps need SciPy
    # and only the exact method PuLP; the registry imports a method's module when it is asked for.
    matrix = shared / "traces" / "CG.C.64" / "p2p_matrix.csv"
    code = ("import sys; from topoplan.cli.main import main; "
            f"rc = main(['circuits', '-t', 'paper003', '-T', {str(matrix)!r}, '-p', 'round-robin', '-m', 'greedy', "
            f"'-o', {str(tmp_path / 'plan.json')!r}]); "
            "print(rc, sorted(m for m in ('scipy', 'pulp', 'topoplan.problems.circuits.exact') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "0 []"
    assert (tmp_path / "plan.json").stat().st_size > 0


@pytest.mark.parametrize("args", [("place", "-t", "paper003", "-T", "ring:np=8,bytes=1MB", "--time-limit", "0"),
                                  ("bcast", "-t", "paper000", "-a", "gen:nodes=4", "--time-limit", "800000"),
                                  ("circuits", "-t", "paper003", "-T", "ring:np=8,bytes=1MB", "--time-limit", "0s")])
def test_a_time_limit_out_of_range_names_the_flag(args, run_cli):
    """0 or more than 7 days: the flag's error, before any work (it named the solver's field 'time_limit')."""
    code, _, err = run_cli(*args)
    assert code == 2 and err.startswith("error: --time-limit: must be more than 0 and at most 604800 s"), err


def test_a_bad_relay_chunk_names_the_flag(run_cli):
    code, _, err = run_cli("simulate", "-t", "paper003", "-T", "ring:np=8,bytes=1MB", "--relay-chunk", "xx")
    assert code == 2 and err.startswith("error: --relay-chunk: cannot read size 'xx'"), err


@pytest.mark.parametrize("args", [
    ("simulate", "-t", "paper003", "-T", "ring:np=8,bytes=1MB"),
    ("circuits", "-t", "paper003", "-T", "ring:np=8,bytes=1MB", "-m", "sp"),
    ("place", "-t", "paper003", "-T", "ring:np=8,bytes=1MB", "-m", "sequential", "--simulate"),
    ("bcast", "-t", "paper000", "-a", "gen:nodes=4"),
])
@pytest.mark.parametrize("chunk, refused", [("1MiB", True), ("64KiB", True), (None, False)])
def test_a_relay_chunk_with_store_and_forward_relays_is_refused(args, chunk, refused, run_cli, tmp_path):
    """--relay-chunk sizes the chunks of pipelined relays; store-and-forward relays forward whole messages,
    so the two together are an error naming both (the chunk was ignored without a word); --relay-chunk
    not given is no conflict."""
    out = tmp_path / "r.json"
    extra = () if chunk is None else ("--relay-chunk", chunk)
    code, stdout, err = run_cli(*args, "--relay", "store-and-forward", *extra, "-o", out)
    if refused:
        assert code == 2 and stdout == "" and not out.exists()
        assert err == ("error: --relay-chunk: applies to pipelined relays only; --relay store-and-forward "
                       "forwards whole messages\n")
    else:
        assert code == 0, err
        assert out.exists()


@pytest.mark.parametrize("args, when", [
    (("place", "-t", "paper003", "-T", "ring:np=8,bytes=1MB", "-m", "sequential"), "with --simulate or --score simulated"),
    (("bcast", "-t", "paper000", "-a", "gen:nodes=4", "--no-simulate"), "without --no-simulate"),
    (("compare", "circuits", "-t", "paper003", "-T", "ring:np=8,bytes=1MB", "--methods", "none,sp"), "with --simulate"),
    (("phases", "-t", "paper003", "-T", "ring:np=8,bytes=1MB"), "with --simulate or --score simulated"),
])
@pytest.mark.parametrize("option", [("--model", "paper"), ("--relay", "store-and-forward"), ("--relay-chunk", "1MiB"),
                                    ("--paper-contention", "device")])
def test_a_network_model_option_of_a_run_that_simulates_nothing_is_refused(args, when, option, run_cli, tmp_path):
    """`place --model paper` without --simulate (and the like) was ignored without a word."""
    out = tmp_path / "r.json"
    code, stdout, err = run_cli(*args, *option, "-o", out)
    assert (code, stdout) == (2, "") and not out.exists()
    assert err == (f"error: {option[0]}: the network model of a simulation, and this run simulates nothing "
                   f"(it does {when})\n")


@pytest.mark.parametrize("args, message", [
    (("simulate", "-t", "paper003", "-T", "ring:np=4,bytes=1MB", "--threshold", "1MB"),
     "--threshold: the size from which messages take a plan's circuits; give --circuits"),
    (("simulate", "-t", "paper003", "-T", "ring:np=4,bytes=1MB", "--timeline", "-1s"),
     "--timeline: time must be non-negative, got '-1s'"),
    (("simulate", "-t", "paper003", "-T", "ring:np=4,bytes=1MB", "--eager", "xx"), "--eager: cannot read size 'xx'"),
    (("simulate", "-t", "paper003", "-T", "ring:np=4,bytes=1MB", "--timeline", "0"),
     "--timeline: must be a positive time, got 0.0"),
    (("simulate", "-t", "paper003", "-T", "ring:np=4,bytes=1MB", "--compute-scale", "-1"),
     "--compute-scale: must be a finite non-negative factor, got -1.0"),
    (("circuits", "-t", "paper003", "-T", "ring:np=4,bytes=1MB", "--threshold", "xx"), "--threshold: cannot read size 'xx'"),
    (("analyze", "-t", "paper003", "-T", "ring:np=4,bytes=1MB", "--threshold", "-1"),
     "--threshold: size must be non-negative, got '-1'"),
    (("bound", "alltoall", "-t", "kcomputer", "--bytes", "-5"), "--bytes: size must be non-negative, got '-5'"),
    (("phases", "-t", "paper003", "-T", "ring:np=4,bytes=1MB", "--window", "xx"), "--window: cannot read time 'xx'"),
    (("cost", "--ocs-fraction", "2"), "--ocs-fraction: must be in [0, 1], got 2.0"),
    (("cost", "--eps-switch-power", "-1"), "--eps-switch-power: must be a finite non-negative number, got -1.0"),
])
def test_a_bad_option_value_is_named_by_its_flag(args, message, run_cli):
    """These options were named by the library's fields ("field 'threshold'", "field 'ocs_fraction'")."""
    code, stdout, err = run_cli(*args)
    assert (code, stdout, err) == (2, "", f"error: {message}\n")


@pytest.mark.parametrize("args, message", [
    (["circuits", "-t", "paper003", "-T", "ring:np=8,bytes=1MB", "-m", "foo"], "--method: unknown circuits method"),
    (["place", "-t", "paper003", "-T", "ring:np=8,bytes=1MB", "-m", "foo"], "--method: unknown placement method"),
    (["bcast", "-t", "paper003", "-a", "gen:nodes=16", "-m", "foo"], "--method: unknown bcast method"),
    (["phases", "-t", "paper003", "-T", "ring:np=8,bytes=1MB", "--schedule", "foo"],
     "--schedule: unknown schedule method"),
    (["phases", "-t", "paper003", "-T", "ring:np=8,bytes=1MB", "--schedule", "exact", "--circuit-method", "foo"],
     "--circuit-method: unknown circuits method"),
])
def test_an_unknown_method_is_named_by_its_flag(tmp_path, run_cli, args, message):
    out = tmp_path / "out.json"
    code, stdout, err = run_cli(*args, "-o", out)
    assert (code, stdout) == (2, "") and not out.exists()
    assert err.startswith(f"error: {message} 'foo' (methods: ") and err.count("\n") == 1
