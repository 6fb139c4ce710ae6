"""models/ holds formulations and solver back-ends only: no module there imports a planning problem.

A formulation builds a model from plain data (arrays, dataclasses the caller fills) and returns it with a
decoder; turning a problem into that data and the decoded solution into a plan is the problem's business
(``planner/<problem>/exact.py``). So nothing in ``models/`` may import a ``planner`` subpackage or module
other than the leaves :mod:`planner.core.errors` and :mod:`planner.core.units` -- at module level or inside a function.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

MODELS = Path(__file__).resolve().parents[1] / "models"
ALLOWED = {"planner.core.errors", "planner.core.units", "planner.core.interrupt"}   # interrupt: Ctrl-C reaches solvers


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """``(line, dotted name)`` of every absolute import in the file (``from a import b`` gives ``a.b`` too)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.module))
            out += [(node.lineno, f"{node.module}.{a.name}") for a in node.names if node.module == "planner"]
    return out


def forbidden(name: str) -> bool:
    if name != "planner" and not name.startswith("planner."):
        return False
    if name == "planner":       # the bare package (``from planner import x`` is checked as planner.x)
        return False
    return not any(name == ok or name.startswith(ok + ".") for ok in ALLOWED)


FILES = sorted(MODELS.rglob("*.py"))


def test_models_has_the_formulations_and_one_module_per_backend():
    names = {str(p.relative_to(MODELS)) for p in FILES}
    assert {"circuits_node.py", "circuits_switch.py", "placement_cpsat.py", "bcast_cpsat.py"} <= names
    assert {f"backends/{b}.py" for b in ("base", "cbc", "highs", "ortools_milp", "cpsat", "gurobi")} <= names


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(MODELS)))
def test_no_problem_package_imported(path):
    bad = [f"line {line}: {name}" for line, name in imported_modules(path) if forbidden(name)]
    assert not bad, f"models/{path.relative_to(MODELS)} imports {', '.join(bad)} (allowed from planner: " \
                    f"{', '.join(sorted(ALLOWED))})"


def test_the_check_catches_problem_imports(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import numpy\nfrom planner.core.errors import TopoplanError\n\n"
                 "def g():\n    from planner.problems.circuits.bound import evaluate\n    from planner.problems import bcast\n"
                 "    import planner.problems.placement.problem\n")
    assert [n for _, n in imported_modules(f) if forbidden(n)] == [
        "planner.problems.circuits.bound", "planner.problems", "planner.problems.placement.problem"]
