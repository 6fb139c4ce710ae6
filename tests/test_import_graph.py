"""The package's import graph at import time: no cycles among modules (imports inside functions are lazy
and do not count), and topoplan/formulations/ never imports a planning problem (tests/test_models_layout.py)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("topoplan",)


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _top_level_imports(path: Path, name: str, modules: set) -> set:
    """Modules of ours imported when ``name`` is imported: top-level statements only (not inside functions)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()

    def visit(nodes):
        for node in nodes:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
                continue
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                for a in node.names:  # `from pkg import module` needs the module; `from pkg import name`, pkg
                    found.add(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base)
            if isinstance(node, ast.ClassDef):
                visit(node.body)
            elif hasattr(node, "body") and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(getattr(node, "body", []))
                visit(getattr(node, "orelse", []))
                visit(getattr(node, "finalbody", []))
                for h in getattr(node, "handlers", []):
                    visit(h.body)

    visit(tree.body)
    return {m for m in found if m in modules and m != name}


def import_graph() -> dict[str, set]:
    files = {_module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}
    modules = set(files)
    graph = {}
    for name, path in files.items():
        # a package's own __init__ importing its submodules is how packages register their parts; a module
        # importing a package (not a module of it) is an edge to that __init__
        graph[name] = _top_level_imports(path, name, modules)
    return graph


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


def test_the_import_graph_has_no_cycle():
    graph = import_graph()
    assert len(graph) > 50
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))


def test_the_cycle_finder_finds_cycles():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
