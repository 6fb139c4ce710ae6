"""The benchmarks' process timing (``benchmarks/processes.py``): figures of a command, and a time-out that ends
the command's children too (a replay peer's simulator, GNU time's command)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from processes import run_process  # noqa: E402


def test_a_command_is_measured():
    r = run_process(["sh", "-c", "exit 3"])
    assert r["returncode"] == 3 and r["wall_s"] >= 0 and r["cpu_s"] >= 0 and r["peak_MB"] > 0


def test_a_time_out_ends_the_commands_children(tmp_path):
    pidfile = tmp_path / "pid"
    r = run_process(["sh", "-c", f"sleep 60 & echo $! > {pidfile}; wait"], timeout_s=0.5)
    assert r == {"timeout_s": 0.5}
    pid = int(pidfile.read_text())
    # the grandchild is gone, or a zombie of init's being reaped; a process killed a moment ago may still be
    # running its exit on a loaded machine, so it is given up to 10 s to get there
    end = time.monotonic() + 10.0
    while True:
        try:
            os.kill(pid, 0)
            state = Path(f"/proc/{pid}/stat").read_text().split()[2]
        except (ProcessLookupError, FileNotFoundError):
            break
        if state == "Z" or time.monotonic() > end:
            assert state == "Z"
            break
        time.sleep(0.05)
