"""The package's import graph over every import, top-level and inside functions alike, against the layers
written down in ``topoplan/_layers.py``: no import runs upward or sideways, no cycle, and an import of a
project module inside a function only where ``_layers.LAZY`` lists it with its reason."""

from __future__ import annotations

import ast
import fnmatch
from pathlib import Path

import pytest

from topoplan import _layers

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "topoplan"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _files() -> dict[str, Path]:
    return {_module_name(p): p for p in (ROOT / PACKAGE).rglob("*.py")}


def imports_of(path: Path, name: str, modules: set) -> list[tuple[str, int, bool]]:
    """Every import of a project module in ``path``: ``(module, line, inside a function)``. An import under
    ``if TYPE_CHECKING:`` is not run and not counted; ``from pkg import x`` names module ``pkg.x`` when it is
    one, else ``pkg``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []

    def targets(node) -> list[str]:
        if isinstance(node, ast.Import):
            return [a.name for a in node.names]
        base = node.module or ""
        if node.level:
            up = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = ".".join(up + ([base] if base else []))
        return [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]

    def visit(node, in_function: bool):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and isinstance(child.test, ast.Name) and child.test.id == "TYPE_CHECKING":
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                for target in targets(child):
                    while target and target not in modules:   # `import topoplan.x.y` names module topoplan.x.y
                        target = target.rpartition(".")[0]
                    if target and target != name and target.split(".")[0] == PACKAGE:
                        found.append((target, child.lineno, in_function))
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(tree, False)
    return found


def import_graph() -> dict[str, list[tuple[str, int, bool]]]:
    files = _files()
    modules = set(files)
    return {name: imports_of(path, name, modules) for name, path in files.items()}


def room(module: str) -> str:
    """``topoplan.sim.network`` -> ``sim``; the package itself is the room ``topoplan``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else PACKAGE


RANK = {r: k for k, rooms in enumerate(_layers.LAYERS) for r in rooms}
RANK[PACKAGE] = len(_layers.LAYERS)   # topoplan/__init__.py: the lazy public API, above everything


def upward(graph) -> list[str]:
    bad = []
    for src, deps in graph.items():
        for dst, line, _ in deps:
            a, b = room(src), room(dst)
            if a == b:
                continue
            allowed = _layers.ONLY_FROM.get(b)
            if RANK[b] >= RANK[a] or (allowed is not None and a not in allowed):
                bad.append(f"{src}:{line} imports {dst} ({a} may not import {b})")
    return bad


def lazy_entry(src: str, dst: str):
    for (importer, imported), reason in _layers.LAZY.items():
        if fnmatch.fnmatchcase(src, importer) and fnmatch.fnmatchcase(dst, imported):
            return importer, imported
    return None


def find_cycle(graph: dict[str, set]):
    state, stack = {}, []

    def dfs(u):
        state[u] = 1
        stack.append(u)
        for v in sorted(graph.get(u, ())):
            if state.get(v) == 1:
                return stack[stack.index(v):] + [v]
            if v not in state:
                cyc = dfs(v)
                if cyc:
                    return cyc
        stack.pop()
        state[u] = 2
        return None

    for u in sorted(graph):
        if u not in state:
            cyc = dfs(u)
            if cyc:
                return cyc
    return None


@pytest.fixture(scope="module")
def graph():
    g = import_graph()
    assert len(g) > 100
    return g


def test_every_room_has_a_layer(graph):
    rooms = {room(m) for m in graph}
    assert not rooms - set(RANK), f"rooms missing from topoplan/_layers.py LAYERS: {sorted(rooms - set(RANK))}"


def test_no_import_runs_upward_or_sideways(graph):
    bad = upward(graph)
    assert not bad, "\n".join(bad)


def test_imports_inside_functions_are_the_listed_exceptions(graph):
    bad = [f"{src}:{line} imports {dst} inside a function" for src, deps in graph.items()
           for dst, line, lazy in deps if lazy and lazy_entry(src, dst) is None]
    assert not bad, ("an import of a project module inside a function needs an entry in topoplan/_layers.py "
                     "LAZY (an optional dependency, or a measured start-up cost), or belongs at the top:\n"
                     + "\n".join(bad))


def test_every_listed_exception_is_used_and_gives_its_reason(graph):
    used = {lazy_entry(src, dst) for src, deps in graph.items() for dst, _, lazy in deps if lazy}
    for entry, reason in _layers.LAZY.items():
        assert entry in used, f"LAZY entry {entry} matches no import inside a function: remove it"
        assert len(reason) > 40, f"LAZY entry {entry}: say why (the dependency, or the start-up cost measured)"


def test_the_import_graph_has_no_cycle(graph):
    edges = {src: {dst for dst, _, _ in deps} for src, deps in graph.items()}
    cycle = find_cycle(edges)
    assert cycle is None, " -> ".join(cycle)


def test_the_checks_find_what_they_look_for():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
    assert upward({"topoplan.core.x": [("topoplan.sim.y", 3, False)]}) == [
        "topoplan.core.x:3 imports topoplan.sim.y (core may not import sim)"]
    assert upward({"topoplan.analysis.x": [("topoplan.fabric.y", 1, True)]})        # side by side: refused
    assert upward({"topoplan.sim.x": [("topoplan.formulations.y", 1, False)]})     # formulations: problems only
    assert not upward({"topoplan.problems.x": [("topoplan.formulations.y", 1, False)]})
    src = "def f():\n    from topoplan.sim import run\nimport topoplan.core.io as io\n"
    path = ROOT / "tests" / "_import_probe.py"
    try:
        path.write_text(src)
        found = imports_of(path, "tests._import_probe", {"topoplan.sim", "topoplan.sim.run", "topoplan.core.io"})
    finally:
        path.unlink()
    assert found == [("topoplan.sim.run", 2, True), ("topoplan.core.io", 3, False)]
