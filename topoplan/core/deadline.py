"""The deadline of a command's time limit, for the whole process: from its start to its written result.

A user's ``--time-limit 20`` bounds what they wait for: the command's wall time from the moment the
process starts (interpreter, imports) through loading the inputs, building the problem, solving,
validating, simulating the plan and writing it. The command line sets the deadline when the command
starts (:func:`bounded`); every stage then reads what is left (:func:`remaining`) instead of taking
the whole limit for itself: a method gets the limit minus what loading took and what its caller
reserves for the stages after it (:func:`budget`), and a stage that cannot fit (a simulation of the
plan, the check of a method's candidates on a trace, the first compilation of a Numba kernel) is
skipped with a message, predicted before it starts, rather than run past the limit.

Library calls are bounded by their own ``time_limit`` arguments as before; a deadline only exists
inside :func:`bounded` (a command of the CLI), and :func:`budget` then cuts a ``time_limit`` to it.

Examples
--------
>>> with bounded(30.0):
...     left = remaining()
>>> 29.0 < left <= 30.0, remaining() is None
(True, True)
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager

from topoplan.core.errors import TopoplanError

__all__ = ["process_age_s", "mark_start", "clear_start", "bounded", "reserved", "remaining", "budget", "fits", "active",
           "DeadlineReached", "stopping", "check",
           "cpu_share", "scaled", "write_cost_s", "kernel_loaded", "kernel_ready", "WRITE_FIXED_S", "WRITE_S_PER_ROW", "EXIT_S",
           "MIN_CPU_SHARE"]

_START: list = []       # (monotonic time, CPU seconds) when the command started (mark_start), else none: from set-up
_DEADLINE: list = []    # monotonic time of the deadline while one is set
_SPAN: list = []        # (monotonic time, CPU seconds) the deadline counts from, while one is set
_RESERVED: list = []    # seconds the stages after the running one have claimed (reserved)
_STOPPING: list = []    # while a stage runs inside stopping(): its margin; check() stops it at the deadline

# The CPU share (cpu_share) is read only once this much of the command has passed; before, a command's share is noise.
SHARE_MIN_WALL_S = 0.5
#: The least share believed (a process stopped or waiting would otherwise predict stages as endless).
MIN_CPU_SHARE = 0.1
#: Writing a plan (validating nothing: solve validated it): a fixed cost plus a cost per row of its largest table
#: (a forwarding entry, a rank), CPU seconds measured on this machine (``write_plan`` of greedy plans on 1,024,
#: 4,096 and 16,384 nodes): 31,744 forwarding rows 0.03 s, 520,192 rows 0.26 s, 8.4 million rows 3.2 s
#: (0.4-1 us a row). A row is counted twice: the document is also printed with --json.
WRITE_FIXED_S = 0.1
WRITE_S_PER_ROW = 0.5e-6
#: Ending the process after the plan is written (the interpreter frees its modules and the solvers' libraries):
#: 0.2-0.5 CPU s measured on ``place`` (1-1.5 s of wall time at a load of 8-10 on 2 cores).
EXIT_S = 0.4


def process_age_s() -> float:
    """Seconds since this process started (Linux ``/proc``: the interpreter's start-up and imports included);
    0 where that cannot be read.

    Returns
    -------
    float

    Examples
    --------
    >>> 0 <= process_age_s() < 86400 * 365
    True
    """
    try:
        with open("/proc/self/stat") as fh:
            start_ticks = int(fh.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as fh:
            uptime_s = float(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0
    return max(uptime_s - start_ticks / os.sysconf("SC_CLK_TCK"), 0.0)


def mark_start(*, process: bool = False) -> None:
    """Record when the command started: now, or (``process``) when this process did (``topoplan`` run as a
    program: the interpreter's start-up counts against the limit too).

    Parameters
    ----------
    process : bool, optional

    Examples
    --------
    >>> mark_start()
    >>> with bounded(10.0):
    ...     9.0 < remaining() <= 10.0
    True
    """
    _START[:] = [(time.monotonic() - (process_age_s() if process else 0.0), 0.0 if process else _cpu_s())]


def clear_start() -> None:
    """Forget the start :func:`mark_start` recorded (the command is over): a later deadline counts from when it
    is set.

    Examples
    --------
    >>> mark_start(); clear_start()
    >>> with bounded(10.0):
    ...     9.0 < remaining() <= 10.0
    True
    """
    _START.clear()


@contextmanager
def bounded(limit_s: float | None):
    """Set the process-wide deadline ``limit_s`` seconds after the command's start (:func:`mark_start`, else now)
    for the duration of the block; None sets none.

    Parameters
    ----------
    limit_s : float or None

    Yields
    ------
    None

    Examples
    --------
    >>> with bounded(None):
    ...     active()
    False
    """
    if limit_s is None:
        yield
        return
    start = _START.pop() if _START else (time.monotonic(), _cpu_s())   # a start is used by one deadline only
    saved, saved_span = list(_DEADLINE), list(_SPAN)
    _DEADLINE[:] = [start[0] + float(limit_s)]
    _SPAN[:] = [start]
    try:
        yield
    finally:
        _DEADLINE[:], _SPAN[:] = saved, saved_span


@contextmanager
def reserved(seconds: float):
    """Keep ``seconds`` of what the deadline leaves for a stage that runs after the block (a simulation of the
    plan, writing it): :func:`budget` inside the block gives the stages in it that much less.

    Parameters
    ----------
    seconds : float

    Yields
    ------
    None

    Examples
    --------
    >>> with bounded(10.0), reserved(4.0):
    ...     5.9 < budget(None) <= 6.0
    True
    """
    _RESERVED.append(max(float(seconds), 0.0))
    try:
        yield
    finally:
        _RESERVED.pop()


class DeadlineReached(TopoplanError):
    """A stage run inside :func:`stopping` reached the deadline (less what :func:`reserved` keeps) and stopped.

    Examples
    --------
    >>> issubclass(DeadlineReached, TopoplanError)
    True
    """


@contextmanager
def stopping(margin_s: float = 0.0):
    """Stop the stage run in the block at the deadline, less what :func:`reserved` keeps for the stages after
    it and ``margin_s`` more: :func:`check`, which the stage calls as it goes (the simulator at every piece of
    a replay), then raises :class:`DeadlineReached`. For a stage whose cost cannot be predicted closely;
    without a deadline nothing stops.

    Parameters
    ----------
    margin_s : float, optional
        Seconds kept for what follows a stop (ending the process after an error); not for the stages inside.

    Yields
    ------
    None

    Examples
    --------
    >>> with bounded(10.0), reserved(20.0), stopping():
    ...     try:
    ...         check()
    ...     except DeadlineReached as e:
    ...         print(e)
    stopped at the time limit
    >>> with bounded(10.0), stopping():
    ...     check()                      # time is left
    >>> with bounded(10.0), stopping(margin_s=20.0):
    ...     check()
    Traceback (most recent call last):
    ...
    topoplan.core.deadline.DeadlineReached: stopped at the time limit
    >>> check()                          # outside stopping(): never stops
    """
    _STOPPING.append(max(float(margin_s), 0.0))
    try:
        yield
    finally:
        _STOPPING.pop()


def check() -> None:
    """Inside :func:`stopping`: raise :class:`DeadlineReached` once the deadline, less what :func:`reserved`
    keeps, has passed; elsewhere nothing.

    Raises
    ------
    DeadlineReached

    Examples
    --------
    >>> check()
    """
    if _STOPPING and _DEADLINE and _DEADLINE[0] - time.monotonic() - sum(_RESERVED) - _STOPPING[-1] <= 0:
        raise DeadlineReached("stopped at the time limit")


def fits(cost_s: float) -> bool:
    """Whether a stage predicted to take ``cost_s`` seconds ends before the deadline (always, without one).

    Parameters
    ----------
    cost_s : float

    Returns
    -------
    bool

    Examples
    --------
    >>> fits(1e9)
    True
    >>> with bounded(10.0):
    ...     fits(5.0), fits(11.0)
    (True, False)
    """
    left = remaining()
    return left is None or cost_s <= left


def active() -> bool:
    """Whether a deadline is set.

    Returns
    -------
    bool

    Examples
    --------
    >>> active()
    False
    >>> with bounded(5.0):
    ...     active()
    True
    """
    return bool(_DEADLINE)


def remaining() -> float | None:
    """Seconds left before the deadline (negative once past it), or None when none is set.

    Returns
    -------
    float or None

    Examples
    --------
    >>> remaining() is None
    True
    >>> with bounded(5.0):
    ...     4.0 < remaining() <= 5.0
    True
    """
    return _DEADLINE[0] - time.monotonic() if _DEADLINE else None


# The least a method is given when the deadline is (nearly) reached: it still returns a plan (its
# starting heuristic's, an interrupted search's best) instead of failing on a limit of zero.
MIN_BUDGET_S = 0.05


def budget(time_limit: float | None, *, reserve_s: float = 0.0) -> float | None:
    """The time limit a stage may use: ``time_limit`` cut to what the deadline leaves after ``reserve_s`` seconds
    and what :func:`reserved` keeps for the stages after it (at least :data:`MIN_BUDGET_S`); ``time_limit``
    itself without a deadline.

    Parameters
    ----------
    time_limit : float or None
        The stage's own limit (None: whatever the deadline leaves).
    reserve_s : float, optional

    Returns
    -------
    float or None

    Examples
    --------
    >>> budget(5.0), budget(None)
    (5.0, None)
    >>> with bounded(10.0):
    ...     8.9 < budget(None, reserve_s=1.0) <= 9.0, budget(2.0), budget(60.0, reserve_s=20.0)
    (True, 2.0, 0.05)
    """
    left = remaining()
    if left is None:
        return time_limit
    left = max(left - reserve_s - sum(_RESERVED), MIN_BUDGET_S)
    return left if time_limit is None else min(float(time_limit), left)


def _cpu_s() -> float:
    """CPU seconds of this process and of the children it has waited for (a solver run as a program)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def cpu_share() -> float:
    """The share of one CPU the command has had since it started (its CPU seconds over its wall seconds, at most
    1, at least :data:`MIN_CPU_SHARE`): on a machine where other processes compete for the cores, a stage
    that takes ``c`` CPU seconds takes about ``c / cpu_share()`` seconds. 1 without a deadline and in the
    command's first :data:`SHARE_MIN_WALL_S` seconds.

    Returns
    -------
    float

    Examples
    --------
    >>> cpu_share()
    1.0
    >>> with bounded(10.0):
    ...     0 < cpu_share() <= 1
    True
    """
    if not _SPAN:
        return 1.0
    t0, c0 = _SPAN[0]
    wall = time.monotonic() - t0
    if wall < SHARE_MIN_WALL_S:
        return 1.0
    return min(1.0, max((_cpu_s() - c0) / wall, MIN_CPU_SHARE))


def scaled(cpu_s: float) -> float:
    """The wall seconds a stage predicted at ``cpu_s`` CPU seconds (its cost on an idle core) takes at the share
    of a CPU the command is getting (:func:`cpu_share`): what a prediction is compared with what is left.

    Parameters
    ----------
    cpu_s : float

    Returns
    -------
    float

    Examples
    --------
    >>> scaled(2.0)          # no deadline: as predicted
    2.0
    """
    return float(cpu_s) / cpu_share()


def write_cost_s(rows: int) -> float:
    """Predicted wall seconds of writing (and printing) a plan whose largest table has ``rows`` rows and of
    ending the process (:data:`EXIT_S`), at the command's share of a CPU (:func:`scaled`): what a command
    keeps of its time limit for what follows its result.

    Parameters
    ----------
    rows : int
        Rows of the plan's largest table: forwarding entries of a circuit plan, ranks of a placement.

    Returns
    -------
    float

    Examples
    --------
    >>> write_cost_s(0), round(write_cost_s(8_000_000), 1)
    (0.5, 8.5)
    """
    return scaled(WRITE_FIXED_S + EXIT_S + 2 * WRITE_S_PER_ROW * max(int(rows), 0))


def kernel_loaded(dispatcher) -> bool:
    """Whether a Numba function is compiled in this process already (its next call runs at once).

    A plain Python function counts as loaded: that is what every ``@njit`` function is when Numba's JIT
    is disabled (``NUMBA_DISABLE_JIT=1``).

    Parameters
    ----------
    dispatcher : numba.core.registry.CPUDispatcher
        An ``@njit`` function (anything else counts as loaded).

    Returns
    -------
    bool

    Examples
    --------
    >>> kernel_loaded(len)
    True
    """
    return bool(getattr(dispatcher, "signatures", True))


def kernel_ready(dispatcher) -> bool:
    """Whether a Numba function runs without compiling first: compiled in this process already, or found in
    Numba's cache on disk (its index file; ``make install`` fills the cache). A first compilation takes
    tens of seconds and cannot be interrupted, so a stage that needs one is predicted with it.

    Parameters
    ----------
    dispatcher : numba.core.registry.CPUDispatcher
        An ``@njit(cache=True)`` function (anything else counts as ready).

    Returns
    -------
    bool

    Examples
    --------
    >>> kernel_ready(len)
    True
    """
    if kernel_loaded(dispatcher):
        return True
    try:
        return os.path.isfile(dispatcher._cache._cache_file._index_path)
    except (AttributeError, TypeError):
        return True
