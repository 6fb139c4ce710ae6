"""Docstring conventions of the library (issue 19, point 5): numpydoc ``Examples`` on every public name.

Every public function and class of ``topoplan/`` and ``topoplan/sim/`` -- the names a module lists in
``__all__``, or, in a module without ``__all__``, every top-level name not starting with ``_`` --
has a docstring with an ``Examples`` section (numpydoc: ``Examples`` underlined with dashes), whose
doctests run with the suite (``--doctest-modules`` in pyproject.toml). No docstring anywhere in
the two packages uses the singular ``Example`` heading.

Left out: private modules (``topoplan/sim/_loop.py``, ``_flows.py``...), the CLI command modules (``topoplan/cli/commands/*``:
their documentation is ``--help``) and the files other work owns right now (below). Known
exceptions are listed by name, with the reason; the tests also fail when an exception has become
stale, so the lists only shrink.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("topoplan",)

# Files this convention does not cover yet (by path), with the CLI (documented by --help) below. (None left.)
NOT_COVERED: set[str] = set()
CLI_DIR = "topoplan/cli/commands/"
# The formulations and solver back-ends (build a model from plain data; exercised through the problems'
# exact methods, whose docstrings carry the examples) are not covered by the Examples rule yet.
FORMULATIONS_DIR = "topoplan/formulations/"

# Public names without an Examples section yet: "module path:name" -> why. (None left.)
KNOWN_WITHOUT_EXAMPLES: dict[str, str] = {}

# Docstrings still headed "Example" (singular): "module path:object" -> why.
KNOWN_SINGULAR: dict[str, str] = {}

EXAMPLES = re.compile(r"^[ \t]*Examples\n[ \t]*-{8,}[ \t]*$", re.M)
SINGULAR = re.compile(r"^[ \t]*Example:?[ \t]*$", re.M)


def _private_module(path: Path) -> bool:
    """``_loop.py``, ``__main__.py``: modules whose names are not part of the API (``__init__.py`` is)."""
    return path.name.startswith("_") and path.name != "__init__.py"


def _modules():
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            yield path.relative_to(ROOT).as_posix(), path


def _all(tree: ast.Module):
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                return set(ast.literal_eval(node.value))
    return None


def public_objects():
    """``(rel_path, name, docstring)`` of every public top-level function and class the convention covers."""
    out = []
    for rel, path in _modules():
        if rel in NOT_COVERED or rel.startswith((CLI_DIR, FORMULATIONS_DIR)) or _private_module(path):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = _all(tree)
        for node in tree.body:
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            public = node.name in names if names is not None else not node.name.startswith("_")
            if public:
                out.append((rel, node.name, ast.get_docstring(node, clean=True) or ""))
    return out


def all_docstrings():
    """``(rel_path, qualified name, docstring)`` of every module, class, function and method docstring."""
    out = []
    for rel, path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        out.append((rel, "<module>", ast.get_docstring(tree, clean=True) or ""))

        def walk(body, prefix):
            for node in body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    q = prefix + node.name
                    out.append((rel, q, ast.get_docstring(node, clean=True) or ""))
                    walk(node.body, q + ".")

        walk(tree.body, "")
    return out


def test_the_walk_finds_the_public_api():
    names = {f"{rel}:{name}" for rel, name, _ in public_objects()}
    for expected in ("topoplan/core/topology_io.py:load_topology", "topoplan/traffic/sources.py:load_traffic",
                     "topoplan/core/placement.py:Placement", "topoplan/problems/circuits/problem.py:solve",
                     "topoplan/problems/placement/problem.py:PlacementProblem", "topoplan/sim/run.py:simulate_plan",
                     "topoplan/sim/maxmin.py:simulate_flows", "topoplan/sim/network.py:build_network"):
        assert expected in names
    assert not any(rel.startswith(CLI_DIR) for rel, _, _ in public_objects())


def test_every_public_function_and_class_has_an_examples_section():
    missing = sorted(f"{rel}:{name}" for rel, name, doc in public_objects() if not EXAMPLES.search(doc))
    unexpected = [m for m in missing if m not in KNOWN_WITHOUT_EXAMPLES]
    assert not unexpected, ("public names without a numpydoc 'Examples' section (add one with a doctest that "
                            "runs): " + ", ".join(unexpected))
    stale = sorted(set(KNOWN_WITHOUT_EXAMPLES) - set(missing))
    assert not stale, "these have Examples now (or are gone): remove them from KNOWN_WITHOUT_EXAMPLES: " + \
        ", ".join(stale)


def test_examples_sections_hold_doctests():
    empty = sorted(f"{rel}:{name}" for rel, name, doc in public_objects()
                   if EXAMPLES.search(doc) and ">>>" not in doc[EXAMPLES.search(doc).end():])
    assert not empty, "Examples sections without a doctest: " + ", ".join(empty)


def test_no_docstring_uses_the_singular_example_heading():
    found = sorted(f"{rel}:{q}" for rel, q, doc in all_docstrings() if SINGULAR.search(doc))
    unexpected = [f for f in found if f not in KNOWN_SINGULAR]
    assert not unexpected, "use the numpydoc heading 'Examples' (underlined with dashes): " + ", ".join(unexpected)
    stale = sorted(set(KNOWN_SINGULAR) - set(found))
    assert not stale, "no longer singular (or gone): remove from KNOWN_SINGULAR: " + ", ".join(stale)


@pytest.mark.parametrize("rel", sorted(rel for rel, path in _modules()
                                       if path.name != "__init__.py" and not path.name.startswith("__")
                                       and not rel.startswith(CLI_DIR) and rel not in NOT_COVERED))
def test_modules_declare_their_public_names(rel):
    tree = ast.parse((ROOT / rel).read_text(encoding="utf-8"))
    names = _all(tree)
    assert names is not None, f"{rel}: no __all__"
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    defined |= {t.id for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)}
    defined |= {(a.asname or a.name).split(".")[0] for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
                for a in n.names}
    assert not sorted(names - defined), f"{rel}: __all__ lists names the module does not define"
    assert not [n for n in names if n.startswith("_")], f"{rel}: __all__ lists private names"
