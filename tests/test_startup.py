"""What a small command imports, seen from a fresh process (``python -X importtime`` lists every module a
process imports): ``topoplan --version`` and ``--help`` start without the numerical stack, and a flow scenario
(``simulate --flows FILE --json``) without the planning libraries, the compiler or the terminal renderer.
Behaviour, not timing: the times themselves are measured by ``benchmarks/bench_sim.py``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# the numerical and planning stack, none of which a small command needs
HEAVY = ("numpy", "scipy", "numba", "llvmlite", "networkx", "pulp", "ortools", "highspy", "pandas", "matplotlib",
         "yaml", "jsonschema", "dask", "pymetis")


def imported(*args: str) -> set[str]:
    """The modules ``topoplan ARGS`` imports in a fresh interpreter (it must succeed)."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "topoplan", *args], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines()
            if line.startswith("import time:") and not line.rstrip().endswith("| imported package")}


def packages(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


@pytest.mark.parametrize("args", [("--version",), ("--help",), ("simulate", "--help"), ("circuits", "--help")])
def test_version_and_help_import_neither_the_numerical_stack_nor_rich(args):
    mods = imported(*args)
    assert "topoplan.cli.main" in mods          # the listing is real: the command line was imported
    assert not packages(mods) & {*HEAVY, "rich"}, sorted(packages(mods) & {*HEAVY, "rich"})


def test_version_reads_no_installed_metadata():
    assert "importlib.metadata" not in imported("--version")


def test_version_answers_before_the_command_line_library_is_imported():
    """``--version`` alone prints what Typer's eager option prints, without importing Typer (or its click)."""
    assert not packages(imported("--version")) & {"typer", "click"}
    from typer.testing import CliRunner

    from topoplan.cli.main import build_app

    typer_says = CliRunner().invoke(build_app(), ["--version"])
    fast = subprocess.run([sys.executable, "-m", "topoplan", "--version"], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert fast.returncode == typer_says.exit_code == 0 and fast.stdout == typer_says.output


@pytest.mark.parametrize("width", [50, 80, 200])
def test_the_lazy_root_helps_as_typer_converting_every_command(width):
    """The root group converts a command when it is looked up; its help, every command's and every group's
    subcommand's help are Typer's own at any terminal width (the commands' options read ASCII numbers alike)."""
    import typer

    from topoplan.cli.main import ascii_numbers, build_app, root_command

    lazy, eager = root_command(build_app()), typer.main.get_command(build_app())
    ascii_numbers(eager)

    def help_of(command, path, parent=None):
        return command.make_context(path[-1], [], parent=parent, resilient_parsing=True, terminal_width=width)

    root_ctx, eager_ctx = help_of(lazy, ["topoplan"]), help_of(eager, ["topoplan"])
    assert lazy.get_help(root_ctx) == eager.get_help(eager_ctx)
    assert lazy.list_commands(root_ctx) == eager.list_commands(eager_ctx)
    for name in eager.list_commands(eager_ctx):
        got, want = lazy.get_command(root_ctx, name), eager.get_command(eager_ctx, name)
        got_ctx, want_ctx = help_of(got, ["topoplan", name], root_ctx), help_of(want, ["topoplan", name], eager_ctx)
        assert got.get_help(got_ctx) == want.get_help(want_ctx), name
        for sub in getattr(want, "commands", {}):
            assert got.commands[sub].get_help(help_of(got.commands[sub], [sub], got_ctx)) == \
                want.commands[sub].get_help(help_of(want.commands[sub], [sub], want_ctx)), f"{name} {sub}"
    assert lazy.get_command(root_ctx, "nosuch") is None
    windows = next(p for p in lazy.get_command(root_ctx, "phases").params if p.name == "windows")
    with pytest.raises(Exception, match="not a number in ASCII digits"):
        windows.type.convert("١٢", windows, None)


def test_a_mistyped_command_is_still_suggested(capsys):
    from topoplan.cli.main import main

    assert main(["simulat"]) == 2
    assert "No such command 'simulat'. Did you mean 'simulate'" in capsys.readouterr().err


def test_the_printed_version_is_the_installed_one():
    from importlib.metadata import PackageNotFoundError, version

    import topoplan

    try:
        installed = version("topoplan")
    except PackageNotFoundError:
        pytest.skip("topoplan is not installed (run from a checkout)")
    proc = subprocess.run([sys.executable, "-m", "topoplan", "--version"], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert proc.stdout.strip() == f"topoplan {installed}" == f"topoplan {topoplan.__version__}"


def test_a_flow_scenario_imports_only_what_it_simulates_with(tmp_path):
    """The scenario runs on NumPy and the compiled loop; nothing of the planning stack, no terminal renderer
    (JSON output), and no Numba while the ahead-of-time build of the loop is current."""
    from topoplan.sim._engine import aot_status

    scenario = tmp_path / "flows.json"
    scenario.write_text(json.dumps({
        "tree": {"leaves": 2, "hosts_per_leaf": 2, "down_bw": 1e9, "up_bw": 2e9, "down_lat": 1e-6, "up_lat": 1e-6},
        "flows": [{"id": i, "src": f"h{i % 4}", "dst": f"h{(i + 1) % 4}", "bytes": 1e6 * (i + 1), "start_s": 0}
                  for i in range(4)]}))
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "topoplan", "simulate", "--flows",
                           str(scenario), "--json"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    assert [f["id"] for f in doc["flows"]] == [0, 1, 2, 3] and doc["makespan_s"] > 0
    mods = packages({line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines()
                     if line.startswith("import time:")})
    assert "numpy" in mods
    not_needed = set(HEAVY) - {"numpy"} | {"rich"}
    if aot_status() != "current":   # the loop then runs under Numba's JIT (after an edit of its sources)
        not_needed -= {"numba", "llvmlite"}
    assert not mods & not_needed, sorted(mods & not_needed)


def test_placing_with_a_partitioner_imports_neither_the_solvers_nor_the_circuits(tmp_path):
    """``place -m metis`` imports its method's module only: not the exact model's solvers (PuLP, OR-Tools,
    HiGHS) nor the circuit planning that ``joint`` uses; the result is written."""
    out = tmp_path / "place.json"
    mods = imported("place", "-t", "paper003", "--set", "kind=tree", "--set", "ocs=null", "-T",
                    "neighbor2d:rows=16,cols=16,bytes=1MB", "-m", "metis", "--json", "-o", str(out))
    # (the method's own module is imported by importlib, which -X importtime does not list; its imports are)
    assert "topoplan.problems.placement.refine" in mods and json.loads(out.read_text())["method"] == "metis"
    assert not packages(mods) & {"pulp", "ortools", "highspy"}, sorted(packages(mods) & {"pulp", "ortools", "highspy"})
    assert not {m for m in mods if m.startswith(("topoplan.problems.circuits", "topoplan.problems.placement.joint",
                                                 "topoplan.problems.placement.exact"))}



def test_placing_a_small_job_refines_without_numba(tmp_path):
    """64 ranks: the refinement runs as Python (neither Numba imported nor its cached kernels loaded; that the
    parts are the compiled refinement's is tests/test_placement_scale.py's)."""
    out = tmp_path / "place.json"
    mods = imported("place", "-t", "paper003", "--set", "kind=tree", "--set", "ocs=null", "-T",
                    "neighbor2d:rows=8,cols=8,bytes=1MB", "-m", "metis", "--json", "-o", str(out))
    assert not packages(mods) & {"numba", "llvmlite"}, sorted(packages(mods) & {"numba", "llvmlite"})
    assert json.loads(out.read_text())["method"] == "metis"
