"""topoplan/formulations/ holds formulations and solver back-ends only: no module there imports a planning problem.

A formulation builds a model from plain data (arrays, dataclasses the caller fills) and returns it with a
decoder; turning a problem into that data and the decoded solution into a plan is the problem's business
(``topoplan/<problem>/exact.py``). So nothing in ``topoplan/formulations/`` may import a ``topoplan`` subpackage or module
other than the leaves :mod:`topoplan.core.errors` and :mod:`topoplan.core.units` -- at module level or inside a function.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

MODELS = Path(__file__).resolve().parents[1] / "topoplan" / "formulations"
ALLOWED = {"topoplan.core.errors", "topoplan.core.units", "topoplan.core.interrupt"}   # interrupt: Ctrl-C reaches solvers


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """``(line, dotted name)`` of every absolute import in the file (``from a import b`` gives ``a.b`` too)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.module))
            out += [(node.lineno, f"{node.module}.{a.name}") for a in node.names if node.module == "topoplan"]
    return out


def forbidden(name: str) -> bool:
    if name != "topoplan" and not name.startswith("topoplan.") or name.startswith("topoplan.formulations"):
        return False
    if name == "topoplan":       # the bare package (``from topoplan import x`` is checked as topoplan.x)
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
    assert not bad, f"topoplan/formulations/{path.relative_to(MODELS)} imports {', '.join(bad)} (allowed from topoplan: " \
                    f"{', '.join(sorted(ALLOWED))})"


def test_the_check_catches_problem_imports(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import numpy\nfrom topoplan.core.errors import TopoplanError\n\n"
                 "def g():\n    from topoplan.problems.circuits.bound import evaluate\n    from topoplan.problems import bcast\n"
                 "    import topoplan.problems.placement.problem\n")
    assert [n for _, n in imported_modules(f) if forbidden(n)] == [
        "topoplan.problems.circuits.bound", "topoplan.problems", "topoplan.problems.placement.problem"]
