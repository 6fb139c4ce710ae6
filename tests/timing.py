"""Time bounds that hold on a loaded machine (the suite must pass while other processes keep every core busy).

A bound on wall time alone fails under load: a method that honours its time limit still takes longer to
build, check and write its result when it gets a fraction of a core. The bound here is on work: the
time past the limit may be at most ``slack_s`` seconds at the speed the process actually ran (its wall
time over its CPU time, at least 1). A method that ignores its limit runs past it by its own CPU time,
which no load excuses.
"""

import os
import signal
import time

#: A bound on a wait for a condition (a line printed, a process ended, a file written) that only a hang reaches:
#: on a machine whose cores other processes keep busy, what takes 1 s idle can take tens of seconds.
HANG_S = 300.0


class Stopwatch:
    """Wall and CPU time of this process and its waited-for children, from its making to :meth:`stop` (or now)."""

    def __init__(self):
        self.wall0, self.cpu0 = time.perf_counter(), self._cpu()
        self.end = None

    @staticmethod
    def _cpu() -> float:
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system

    def stop(self) -> "Stopwatch":
        self.end = (time.perf_counter(), self._cpu())
        return self

    @property
    def wall_s(self) -> float:
        return (self.end[0] if self.end else time.perf_counter()) - self.wall0

    @property
    def cpu_s(self) -> float:
        return (self.end[1] if self.end else self._cpu()) - self.cpu0

    def slowdown(self) -> float:
        """How many times slower than one free core the process ran (wall / CPU, at least 1, at most 50)."""
        return min(max(self.wall_s / max(self.cpu_s, 1e-3), 1.0), 50.0)


def within_limit(wall_s: float, limit_s: float, slack_s: float, watch: Stopwatch) -> bool:
    """Whether a run of ``wall_s`` honoured ``limit_s``: at most ``slack_s`` seconds of work past it."""
    return wall_s <= limit_s + slack_s * watch.slowdown()


def cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) a running process has used so far (Linux ``/proc``); -1 when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return -1.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_for_cpu(proc, cpu_s: float, timeout_s: float = 600) -> None:
    """Wait until a child process has used ``cpu_s`` CPU seconds (set-up done, whatever the load), or exited."""
    deadline = time.monotonic() + timeout_s
    while proc.poll() is None and time.monotonic() < deadline:
        used = cpu_seconds(proc.pid)
        if used < 0 or used >= cpu_s:
            return
        time.sleep(0.05)


def sigint_default() -> None:
    """``preexec_fn`` of a child process a test stops with SIGINT: a suite started in the background of a script
    (next to a load generator, say) has SIGINT ignored, its children inherit that, and the signal then does nothing.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)
