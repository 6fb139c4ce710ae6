"""Processes timed from outside, topoplan's and its peers' alike: one helper for every benchmark.

A row that has a peer (SimGrid for flow scenarios, KaHIP for placement, NetworkX for the matching) runs both
sides as processes of their own and reports, for each, the wall time, the CPU time (user + system) and the
peak resident memory, measured by GNU ``time`` (``/usr/bin/time``): the child's own figures. (A child forked
from a large benchmark process and measured by ``wait4`` alone would report the benchmark's resident size at
the fork as its peak; without GNU ``time`` the kernel's accounting of the child is used.)

Machines are shared: :func:`best_of` runs a command several times and keeps the least wall and CPU time (what
the machine gives when the others leave it alone) and the largest peak, and every record carries the 1-minute
load average at its end.

    from processes import best_of, ratio
    ours = best_of(["topoplan", "simulate", "--flows", "f.json", "--json"], runs=3)
    peer = best_of(["/usr/bin/python3", "simgrid_peer.py", "f.json"], runs=3)
    ratio(peer, ours)   # {"wall": ..., "cpu": ..., "peak": ...}: the peer's over ours
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

__all__ = ["TIME", "run_process", "best_of", "ratio", "describe", "load_average"]

ROOT = Path(__file__).resolve().parents[1]
TIME = "/usr/bin/time"


def load_average() -> float:
    """The 1-minute load average (the machine's other work, in cores' worth)."""
    return os.getloadavg()[0]


def run_process(cmd: list, stdout=subprocess.DEVNULL, timeout_s: float | None = None, *, cwd=ROOT, env=None) -> dict:
    """Run ``cmd`` as a child process and measure it.

    Returns ``{"wall_s", "cpu_s", "peak_MB", "returncode", "stderr", "load"}`` (CPU: user + system; peak: the
    largest resident set, GNU ``time``'s, else the kernel's accounting of the child: ``wait4``), or
    ``{"timeout_s"}`` when it did not end within ``timeout_s`` (it is killed)."""
    with tempfile.TemporaryFile() as err, tempfile.NamedTemporaryFile("r") as usage_file:
        timed = [TIME, "-f", "%U %S %M", "-o", usage_file.name] if os.access(TIME, os.X_OK) else []
        t0 = time.perf_counter()
        # its own process group: a time-out (or an interrupt) ends the command's children too (smpirun's simulator,
        # GNU time's command), not only the process started here
        proc = subprocess.Popen(timed + [str(c) for c in cmd], stdout=stdout, stderr=err, cwd=cwd, env=env,
                                start_new_session=True)
        deadline = None if timeout_s is None else t0 + timeout_s
        try:
            while True:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG if deadline is not None else 0)
                if pid:
                    break
                if time.perf_counter() > deadline:
                    _kill_group(proc)
                    return {"timeout_s": timeout_s}
                time.sleep(0.005)
        except BaseException:
            _kill_group(proc)
            raise
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        cpu_s, peak_kB = usage.ru_utime + usage.ru_stime, usage.ru_maxrss
        if timed:
            fields = usage_file.read().split()[-3:]   # GNU time writes "Command exited with non-zero status N" first
            if len(fields) == 3:
                cpu_s, peak_kB = float(fields[0]) + float(fields[1]), float(fields[2])
        return {"wall_s": wall, "cpu_s": cpu_s, "peak_MB": peak_kB / 1024, "returncode": proc.returncode,
                "stderr": err.read().decode(errors="replace"), "load": load_average()}


def _kill_group(proc) -> None:
    """End ``proc`` and every process of its group, and reap ``proc``."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    os.wait4(proc.pid, 0)
    proc.returncode = -9   # reaped here: Popen must not wait for it again


def best_of(cmd: list, runs: int = 3, *, stdout=subprocess.DEVNULL, timeout_s: float | None = None, cwd=ROOT,
            env=None, check: bool = True) -> dict:
    """Run ``cmd`` ``runs`` times (:func:`run_process`): the least wall and CPU time, the largest peak, every run's
    wall time and the load averages seen.

    ``{"timeout_s"}`` if a run did not end in time; with ``check``, a run that fails raises ``RuntimeError``
    with the end of its standard error."""
    walls, cpus, peaks, loads = [], [], [], []
    for _ in range(max(runs, 1)):
        out = stdout() if callable(stdout) else stdout
        try:
            r = run_process(cmd, out, timeout_s, cwd=cwd, env=env)
        finally:
            if callable(stdout):
                out.close()
        if "timeout_s" in r:
            return r
        if check and r["returncode"] != 0:
            raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({r['returncode']}): {r['stderr'].strip()[-500:]}")
        walls.append(r["wall_s"])
        cpus.append(r["cpu_s"])
        peaks.append(r["peak_MB"])
        loads.append(r["load"])
    return {"wall_s": min(walls), "cpu_s": min(cpus), "peak_MB": max(peaks), "runs_s": walls,
            "load": [min(loads), max(loads)], "returncode": 0}


def ratio(peer: dict, ours: dict) -> dict:
    """The peer's wall time, CPU time and peak memory over ours (above 1: ours is faster or smaller)."""
    return {k: peer[f"{k}_{u}"] / max(ours[f"{k}_{u}"], 1e-9) for k, u in (("wall", "s"), ("cpu", "s"), ("peak", "MB"))}


def describe(r: dict | None) -> str:
    """``wall 0.31 s, CPU 0.28 s, 40 MB`` (or why there is no figure)."""
    if not r:
        return "-"
    if "timeout_s" in r:
        return f"> {r['timeout_s']:g} s"
    if "error" in r:
        return f"error: {r['error']}"
    return f"wall {r['wall_s']:.3f} s, CPU {r['cpu_s']:.3f} s, {r['peak_MB']:.0f} MB"
