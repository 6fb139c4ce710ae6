"""Every ``$ `` command line of the README runs as written (issue 18): in order, in one shell, from a
directory laid out like the repository root (``tests/`` and ``experiments/`` linked in, ``../shared``
beside it), with the venv's ``topoplan`` on the PATH, as after ``make demo`` and
``source .venv/bin/activate``."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    """The ``$ `` lines inside the README's code blocks, in order."""
    out, inside = [], False
    for line in (REPO / "README.md").read_text().splitlines():
        if line.startswith("```"):
            inside = not inside
        elif inside and line.startswith("$ "):
            out.append(line[2:])
    return out


def test_the_readme_has_commands():
    cmds = readme_commands()
    assert len(cmds) > 15 and any(c.startswith("topoplan circuits") for c in cmds)


def test_readme_commands_run_as_written(tmp_path, shared):
    root = tmp_path / "topoplan"
    root.mkdir()
    for name in ("tests", "experiments"):
        if (REPO / name).exists():
            (root / name).symlink_to(REPO / name)
    (tmp_path / "shared").symlink_to(shared)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    cmds = readme_commands()
    for i, cmd in enumerate(cmds):
        # variables set by earlier lines (F=...) hold in the later ones, as in one shell
        script = "\n".join(c for c in cmds[:i] if re.match(r"^\w+=", c))
        r = subprocess.run(["bash", "-c", f"set -e\n{script}\n{cmd}"], cwd=root, env=env, capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 0, f"$ {cmd}\n{r.stderr[-2000:]}"
        assert "Traceback" not in r.stderr, cmd
