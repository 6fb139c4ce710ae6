"""The user documents: the documentation site builds with warnings as errors, the API reference covers every
public module, the README stays a short introduction whose links resolve, and no user document (README,
changelog, documentation pages and what they include, the CLI's help) speaks of internal history."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"

# "stop 27", "issue 20", "Issue #21": the project's internal milestones mean nothing to a user
HISTORY = re.compile(r"\b(?:stop|issue)\s+#?\d+\b", re.IGNORECASE)
INCLUDE = re.compile(r"^```\{include\}\s+(\S+)", re.MULTILINE)
AUTOMODULE = re.compile(r"^\.\. automodule:: ([\w.]+)", re.MULTILINE)
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def user_documents() -> list[Path]:
    """README, changelog, every documentation page, and the files the pages include."""
    pages = sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.parts)
    included = {(page.parent / target).resolve() for page in pages
                for target in INCLUDE.findall(page.read_text(encoding="utf-8"))}
    return [REPO / "README.md", REPO / "CHANGELOG.md", *pages, *sorted(included)]


def test_the_documentation_builds_without_warnings(tmp_path):
    """Read, resolve and check every page and the API reference (``-b dummy``: no HTML is written; ``make
    docs`` writes it), warnings as errors, serially."""
    r = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "dummy",
                        "-d", str(tmp_path / "doctrees"), str(DOCS), str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-5000:]


def test_every_public_module_is_in_the_api_reference():
    documented = {m for page in (DOCS / "api").glob("*.md")
                  for m in AUTOMODULE.findall(page.read_text(encoding="utf-8"))}
    expected = set()
    for path in (REPO / "topoplan").rglob("*.py"):
        parts = path.relative_to(REPO).with_suffix("").parts
        if parts[1:2] == ("cli",) or any(p.startswith("_") and p != "__init__" for p in parts):
            continue  # the CLI is documented by --help; private modules are not part of the API
        expected.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    expected.discard("topoplan")  # the top-level API is on docs/api.md, name by name
    missing = sorted(expected - documented)
    assert not missing, f"add these modules to a page of docs/api/: {', '.join(missing)}"
    assert not sorted(documented - expected), "docs/api/ names modules that do not exist"


def test_the_readme_is_a_short_introduction():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines: move the detail into docs/"


@pytest.mark.parametrize("page", [REPO / "README.md", *sorted(DOCS.glob("*.md"))], ids=lambda p: p.name)
def test_relative_links_resolve(page):
    """On GitHub a relative link is a file next to the page (the site build checks the same for its pages)."""
    text = page.read_text(encoding="utf-8")
    broken = [t for t in LINK.findall(text) if "://" not in t and not (page.parent / t).exists()]
    assert not broken, f"{page.name}: links to missing files: {broken}"


SECTION_LINK = re.compile(r"\]\(([^)#\s]+\.md)#([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)


def github_anchors(page: Path) -> set:
    """The anchors GitHub gives the headings of ``page`` (lower case, punctuation dropped, spaces as '-'): the
    page's own headings, not those of the files it includes, which GitHub does not show."""
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", text, re.MULTILINE)}


@pytest.mark.parametrize("page", [REPO / "README.md", *sorted(DOCS.glob("*.md"))], ids=lambda p: p.name)
def test_section_links_resolve_on_github(page):
    """A link to a section (``page.md#anchor``) names a heading of that file as GitHub shows it; the site build
    checks its own anchors (a README section is linked as ../README.md#anchor: docs/conf.py points it at the
    index page, which includes the README)."""
    text = page.read_text(encoding="utf-8")
    broken = [f"{t}#{a}" for t, a in SECTION_LINK.findall(text)
              if "://" not in t and (page.parent / t).exists() and a not in github_anchors(page.parent / t)]
    assert not broken, f"{page.name}: links to sections GitHub does not show: {broken}"


@pytest.mark.parametrize("doc", user_documents(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_user_documents_do_not_speak_of_internal_history(doc):
    found = [f"line {n}: {line.strip()[:120]}" for n, line in
             enumerate(doc.read_text(encoding="utf-8").splitlines(), 1) if HISTORY.search(line)]
    assert not found, f"{doc.relative_to(REPO)} speaks of internal history (say what the product does):\n" + \
        "\n".join(found)


def _help_paths():
    import typer.main

    from topoplan.cli.main import build_app

    out = []

    def walk(cmd, path):
        out.append(path)
        for name, sub in (getattr(cmd, "commands", None) or {}).items():
            walk(sub, [*path, name])

    walk(typer.main.get_command(build_app()), [])
    return out


@pytest.mark.parametrize("path", _help_paths(), ids=lambda p: " ".join(p) or "topoplan")
def test_cli_help_does_not_speak_of_internal_history(path, run_cli):
    code, out, err = run_cli(*path, "--help")
    assert code == 0, err
    found = [line.strip() for line in out.splitlines() if HISTORY.search(line)]
    assert not found, f"topoplan {' '.join(path)} --help: {found}"


@pytest.mark.parametrize(("text", "found"), [
    ("since stop 27 the engine", True), ("issue 20's list", True), ("see Issue #21", True),
    ("ISSUE 3", True), ("stops at 5 s", False), ("a nonstop 3", False), ("issue20", False),
])
def test_the_history_pattern(text, found):
    assert bool(HISTORY.search(text)) is found
