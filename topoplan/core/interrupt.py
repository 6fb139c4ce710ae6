"""Ctrl-C as solvers treat it: the first stops the search and keeps the best plan, the second aborts.

While :func:`graceful_stop` is active (``topoplan.problems.result.solve_with`` runs every method inside
it), the first SIGINT only *requests* a stop: :func:`stop_requested` turns true, the search loops
(annealing, descents, greedy passes) and the MILP back-ends (HiGHS is cancelled, CBC and isolated
solver processes get the signal forwarded) end as if their time limit had been reached, and the
method returns its best plan, which ``solve_with`` marks ``status="interrupted"``. The command line
writes that plan and exits 130. A second SIGINT raises :class:`KeyboardInterrupt` at once: nothing
is written, exit 130.

Outside the main thread, or when SIGINT is ignored (a job started with ``nohup`` or in the
background of a non-interactive shell), nothing is installed.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

__all__ = ["stop_requested", "was_interrupted", "request_stop", "reset", "graceful_stop", "child_pids"]

_requested = threading.Event()   # a stop was asked for during the current graceful_stop
_ever = threading.Event()        # ... at any time since reset() (the CLI's exit status)


def stop_requested() -> bool:
    """Whether the user asked the running search to stop (first Ctrl-C).

    Returns
    -------
    bool

    Examples
    --------
    >>> reset(); stop_requested()
    False
    >>> request_stop(); stop_requested(), was_interrupted()
    (True, True)
    >>> reset()
    """
    return _requested.is_set()


def was_interrupted() -> bool:
    """Whether a stop was requested since the last :func:`reset` (stays true after the search ended).

    Returns
    -------
    bool

    Examples
    --------
    >>> reset(); was_interrupted()
    False
    """
    return _ever.is_set()


def request_stop() -> None:
    """Ask running searches to stop, as the first Ctrl-C does (also usable from another thread).

    Examples
    --------
    >>> request_stop(); stop_requested()
    True
    >>> reset()
    """
    _requested.set()
    _ever.set()


def reset() -> None:
    """Forget earlier stop requests (the CLI calls it before each command).

    Examples
    --------
    >>> request_stop(); reset(); stop_requested(), was_interrupted()
    (False, False)
    """
    _requested.clear()
    _ever.clear()


def child_pids(command: str | None = None) -> list[int]:
    """Direct child processes of this one (Linux ``/proc``; empty elsewhere), e.g. a CBC run or a spawned
    solver interpreter.

    Parameters
    ----------
    command : str, optional
        Only children whose executable's file name contains this (``"cbc"``).

    Returns
    -------
    list of int

    Examples
    --------
    >>> import subprocess, sys
    >>> p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    >>> p.pid in child_pids(), child_pids("no-such-program")
    (True, [])
    >>> p.kill(); p.wait() != 0
    True
    """
    pids: list[int] = []
    for task in Path(f"/proc/{os.getpid()}/task").glob("*/children"):
        try:
            pids += [int(p) for p in task.read_text().split()]
        except (OSError, ValueError):
            continue
    if command is None:
        return pids
    out = []
    for pid in pids:
        try:
            exe = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
        except OSError:
            continue
        if command in Path(exe).name:
            out.append(pid)
    return out


@contextmanager
def graceful_stop(note: str = "stopping: finishing with the best plan found so far (Ctrl-C again to abort)"):
    """Run a search with two-stage Ctrl-C handling (see the module docstring).

    Parameters
    ----------
    note : str, optional
        Printed on stderr at the first Ctrl-C.

    Yields
    ------
    None

    Examples
    --------
    >>> import signal
    >>> before = signal.signal(signal.SIGINT, signal.default_int_handler)   # Python's own (a background job ignores it)
    >>> with graceful_stop(note=""):
    ...     signal.raise_signal(signal.SIGINT)   # the first Ctrl-C: a request, not an exception
    ...     stop_requested()
    True
    >>> stop_requested(), was_interrupted()       # the request ends with the block; the record stays
    (False, True)
    >>> _ = signal.signal(signal.SIGINT, before); reset()
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    if previous is signal.SIG_IGN or previous is None:
        yield
        return

    def handler(signum, frame):
        if _requested.is_set():   # the second Ctrl-C: abort now
            signal.signal(signal.SIGINT, previous if callable(previous) else signal.default_int_handler)
            raise KeyboardInterrupt
        request_stop()
        if note:
            print(note, file=sys.stderr, flush=True)
        for pid in child_pids():   # CBC and isolated solver processes end their search on SIGINT
            try:
                os.kill(pid, signal.SIGINT)
            except OSError:
                pass

    signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        _requested.clear()
