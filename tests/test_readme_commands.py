"""The README's tour, and every documentation page that shows commands, runs as written and prints what it shows.

A page's commands are the ``$ `` lines of its code blocks; the lines under a command, up to the next ``$ ``
line or the end of the block, are the output the page shows for it. A page's commands run in order, each in
a fresh ``bash`` (variables set by earlier ``NAME=...`` lines hold, as in one shell), in a scratch directory
laid out like the repository root (``tests/`` and ``experiments/`` linked in, ``../shared`` beside it), with
the venv's ``topoplan`` on the PATH, as after ``make demo`` and ``source .venv/bin/activate``. So the tour
writes nothing into the checkout.

Each command's output (stdout and stderr, interleaved as on a terminal) is compared with the shown output,
line by line, after these masks, applied to both:

- runs of blanks, and runs of a table rule character (``─``, ``━``, ``═``), become one: a table's widths
  follow its longest cell;
- ``wall <number> s`` becomes ``wall <time>``, and so does ``in <number> s`` after ``optimal``/``feasible``:
  wall times vary with the machine and its load;
- ``...`` on a line of its own stands for any number of lines, and inside a line for any text (as in
  doctest's ELLIPSIS), so a page can show the part of a long output that matters.

Everything else, numbers and names included, must be as shown. When a command's output changes, the
failure prints the shown and the actual output side by side (masked): update the page from a real run.
"""

from __future__ import annotations

import difflib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

_RULE_RUN = re.compile(r"([─━═])\1+")
_BLANKS = re.compile(r"[ \t]+")
_WALL = re.compile(r"\b(wall|(?:optimal|feasible) in) \d[\d.,]*\s?s\b")


def pages() -> list[Path]:
    """README.md, then every documentation page with at least one ``$ `` command."""
    docs = sorted((REPO / "docs").glob("*.md"))
    return [REPO / "README.md"] + [p for p in docs if commands(p)]


def commands(path: Path) -> list[tuple[str, list[str]]]:
    """``(command, shown output lines)`` of the ``$ `` lines inside a page's code blocks, in order."""
    out, inside, current = [], False, None
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            inside, current = not inside, None
        elif inside and line.startswith("$ "):
            current = (line[2:], [])
            out.append(current)
        elif current is not None:
            current[1].append(line)
    return out


def mask(line: str) -> str:
    """A line with the widths and wall times masked (the module docstring lists the masks)."""
    line = _RULE_RUN.sub(r"\1", line)
    line = _WALL.sub(lambda m: f"{m.group(1)} <time>", line)
    return _BLANKS.sub(" ", line).strip()


def shown_matches(shown: list[str], actual: list[str]) -> bool:
    """Whether the actual output lines match the shown ones (masked; ``...`` as in the module docstring)."""
    pattern = []
    for line in shown:
        if line.strip() == "...":
            pattern.append(r"(?:[^\n]*\n)*?")
        else:
            pattern.append("[^\n]*?".join(re.escape(part) for part in mask(line).split("...")) + r"\n")
    text = "".join(mask(line) + "\n" for line in actual)
    return re.fullmatch("".join(pattern), text) is not None


@pytest.mark.parametrize(("shown", "actual", "ok"), [
    (["a  b", "c"], ["a b", "c"], True),
    (["│ S0     │ 1 │", "└────┘"], ["│ S0 │ 1 │", "└──────┘"], True),
    (["makespan 75 ms, wall 0.50 s"], ["makespan 75 ms, wall 12.3 s"], True),
    (["makespan 75 ms, wall 0.50 s"], ["makespan 76 ms, wall 0.50 s"], False),
    (["rank 0=node0008 slot=0"], ["rank 0=node0011 slot=0"], False),
    (["...", "last"], ["first", "second", "last"], True),
    (["...", "last"], ["first", "last", "after"], False),
    (["head, ..."], ["head, tail and more"], True),
    ([], [], True),
    ([], ["unexpected"], False),
])
def test_the_comparison_masks_only_what_it_says(shown, actual, ok):
    assert shown_matches(shown, actual) is ok


def test_the_readme_has_a_tour():
    cmds = [c for c, _ in commands(REPO / "README.md")]
    assert len(cmds) >= 8 and any(c.startswith("topoplan circuits") for c in cmds)


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_commands_run_as_written_and_print_what_is_shown(page, tmp_path, shared):
    root = tmp_path / "topoplan"
    root.mkdir()
    for name in ("tests", "experiments"):
        if (REPO / name).exists():
            (root / name).symlink_to(REPO / name)
    (tmp_path / "shared").symlink_to(shared)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
               PYTHONUNBUFFERED="1")
    cmds = commands(page)
    for i, (cmd, shown) in enumerate(cmds):
        # variables set by earlier lines (F=...) hold in the later ones, as in one shell
        script = "\n".join(c for c, _ in cmds[:i] if re.match(r"^\w+=", c))
        r = subprocess.run(["bash", "-c", f"set -e\n{script}\n{cmd}"], cwd=root, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=300)
        actual = r.stdout.splitlines()
        assert r.returncode == 0, f"$ {cmd}\n{r.stdout[-2000:]}"
        assert "Traceback" not in r.stdout, f"$ {cmd}\n{r.stdout[-2000:]}"
        if not shown_matches(shown, actual):
            diff = "\n".join(difflib.unified_diff([mask(s) for s in shown], [mask(a) for a in actual],
                                                  "shown (masked)", "actual (masked)", lineterm=""))
            pytest.fail(f"{page.name}: the output of\n$ {cmd}\nis not what the page shows:\n{diff}")
