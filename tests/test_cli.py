"""The real entry point: usage errors and bad input are one message, exit status 2, no traceback."""

import subprocess
import sys

import pytest


def _run(*args):
    return subprocess.run([sys.executable, "-m", "planner", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args, needle", [
    (["simulate", "--no-such-option"], "No such option"),
    (["topo", "query", "-i", "x.txt"], "Missing argument"),
    (["analyze", "-t", "no-such-preset", "-T", "ring:np=4,bytes=1KB"], "unknown topology preset"),
    (["analyze", "-t", "paper003", "-T", "ring:np=4,bytes=-1KB"], "ring"),
])
def test_bad_invocations_exit_2_without_traceback(args, needle):
    r = _run(*args)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr + r.stdout
    assert needle in r.stderr + r.stdout


def test_help_works():
    r = _run("--help")
    assert r.returncode == 0 and "simulate" in r.stdout
