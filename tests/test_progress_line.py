"""The progress line of long commands: on a terminal one line with the spinner and the clock first, cut to the
terminal's width (80 columns keep both), what the library reports inside; nothing in pipes and logs."""

import os
import re
import select
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from topoplan.cli.commands.common import SPINNER, _Line, working
from topoplan.core.progress import report, reporting_to

TOPOPLAN = str(Path(sys.executable).parent / "topoplan")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.mark.parametrize("width", [40, 80, 200])
def test_the_line_keeps_spinner_and_clock_and_fits(width):
    line = _Line()
    line.push("circuits -m ilp")
    line.push("ilp", 20.0, "Ctrl-C: stop and keep the best plan")
    line.update({"stage": "ilp: incumbent from three-step", "incumbent": 0.1602, "bound": 0.1588})
    t0 = line.labels[-1][3]
    text = line.text(width, now=t0 + 65.2)
    assert len(text) <= width
    assert re.match(rf"[{SPINNER}] 1:05 / 0:20  ilp", text)
    assert ("incumbent 0.1602, bound 0.1588" in text) == (width >= 80)


def test_a_new_stage_starts_its_own_count_and_notes_come_and_go():
    line = _Line()
    line.push("simulate")
    line.update({"stage": "simulating", "done": 5, "total": 10})
    assert "simulating, 50%" in line.text(80)
    line.update({"stage": "writing"})
    assert "%" not in line.text(80)
    line.update({"note": "compiling the simulator: once, then cached"})
    assert "(compiling the simulator: once, then cached)" in line.text(120)
    line.update({"note": None})
    assert "compiling" not in line.text(120)


def test_stages_and_notes_are_never_dropped_by_the_rate_limit():
    seen = []
    with reporting_to(seen.append, min_interval_s=3600):
        report(done=1, total=9)
        report(done=2, total=9)           # dropped: within the interval
        report(note="compiling")
        report(note=None)
        report(stage="next")
    assert seen == [{"done": 1, "total": 9}, {"note": "compiling"}, {"note": None}, {"stage": "next"}]


def test_nothing_without_a_terminal(capsys):
    with working("demo"):
        report(stage="simulating")
    out = capsys.readouterr()
    assert out.out == "" and out.err == ""


@pytest.mark.parametrize("tty_compatible", [None, "0", "1"])
@pytest.mark.parametrize("force_color", [None, "", "1"])
@pytest.mark.parametrize("stream", ["pipe", "pty"])
def test_rich_is_asked_whenever_it_could_see_a_terminal(monkeypatch, tty_compatible, force_color, stream):
    """The check that spares importing rich in pipes says no only where rich's own answer is no."""
    import pty

    from rich.console import Console

    from topoplan.cli.commands.common import _may_be_terminal

    for name, value in (("TTY_COMPATIBLE", tty_compatible), ("FORCE_COLOR", force_color)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    if stream == "pty":
        master, slave = pty.openpty()
        f = os.fdopen(slave, "w")
    else:
        r, w = os.pipe()
        f = os.fdopen(w, "w")
    try:
        if Console(file=f).is_terminal:
            assert _may_be_terminal(f)
        if stream == "pipe" and tty_compatible != "1" and not force_color:
            assert not _may_be_terminal(f)
    finally:
        f.close()
        os.close(master if stream == "pty" else r)


def _on_a_terminal(args, columns=80, timeout=300):
    """Run the CLI with stdout and stderr on a pseudo-terminal of ``columns``; returns (exit code, text)."""
    import fcntl
    import pty
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "CI", "TERM")}
    env["TERM"] = "xterm-256color"
    proc = subprocess.Popen([TOPOPLAN, *args], stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    chunks, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 1.0)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:        # the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    os.close(master)
    return proc.wait(timeout=60), b"".join(chunks).decode("utf-8", "replace")


DEMO = ["demo", "-T", "neighbor2d:rows=8,cols=8,bytes=4MB,iters=2", "--time-limit", "3"]


def test_progress_on_an_80_column_terminal():
    code, text = _on_a_terminal(DEMO)
    assert code == 0, text[-2000:]
    frames = [ANSI.sub("", f).rstrip() for f in re.split(r"[\r\n]", text)]
    drawn = [f for f in frames if f[:1] in SPINNER and f[:1]]
    assert drawn, text[-2000:]                                     # the line was shown while it worked
    assert all(len(f) <= 80 for f in frames)                       # nothing wider than the terminal
    assert all(re.match(rf"[{SPINNER}] \d+:\d\d", f) for f in drawn)   # spinner and clock kept
    assert any("demo" in f for f in drawn)
    assert "simulated communication time" in text                 # and the result after it


def test_no_progress_in_pipes():
    run = subprocess.run([TOPOPLAN, *DEMO], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stderr == "" and not set(SPINNER) & set(run.stdout)
