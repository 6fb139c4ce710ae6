"""The developer guide (docs/developer.md): "Where things live" comes first, names every folder of the
repository, and every path it names exists; the README points to it instead of keeping its own table."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "developer.md"
# not part of the source: environments, caches, build output (experiments' cell caches are named by their folder)
SKIP = {".git", ".venv", "__pycache__", ".pytest_cache", "build", "out"}


def named_paths(text: str) -> list[str]:
    """Paths in backticks: a token with a slash (``topoplan/sim/``, ``tests/data/ib/README.md``) or a file at the
    top of the repository (``Makefile``)."""
    out = []
    for tok in re.findall(r"`([^`\s]+)`", text):
        if "/" in tok and not tok.startswith(("http", "@", "--")) and re.fullmatch(r"[\w./-]+", tok):
            out.append(tok)
    return out


def folders() -> list[str]:
    found = []
    for path in sorted(ROOT.rglob("*")):
        rel = path.relative_to(ROOT)
        if not path.is_dir() or any(p in SKIP or p.endswith(".egg-info") for p in rel.parts):
            continue
        if any(p.startswith(".") and p != ".ci" for p in rel.parts):      # hidden caches (the experiments')
            continue
        if not any(f.is_file() for f in path.rglob("*") if "__pycache__" not in f.parts):
            continue
        found.append(rel.as_posix() + "/")
    return found


def test_where_things_live_is_the_first_section():
    sections = re.findall(r"^## (.+)$", GUIDE.read_text(encoding="utf-8"), flags=re.M)
    assert sections and sections[0] == "Where things live"


def test_every_path_the_guide_names_exists():
    text = GUIDE.read_text(encoding="utf-8")
    paths = named_paths(text)
    assert len(paths) > 60
    missing = [p for p in paths if not (ROOT / p.rstrip("/")).exists()]
    assert not missing, f"docs/developer.md names paths that do not exist: {missing}"


def test_the_guide_names_every_folder():
    named = set(named_paths(GUIDE.read_text(encoding="utf-8")))
    missing = [f for f in folders() if f not in named]
    assert not missing, f"folders docs/developer.md does not name: {missing}"


def test_the_readme_links_to_the_guide():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "docs/developer.md" in readme
    assert "| to change ... | look in |" not in readme    # the table lives in the guide now


def test_the_path_finder_finds_paths():
    assert named_paths("see `topoplan/sim/` and `a.py`, run `--flag`, `Makefile`") == ["topoplan/sim/"]
