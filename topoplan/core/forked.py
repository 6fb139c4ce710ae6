"""Work on another core while this process goes on: a forked child computes ``fn(item)`` for a list of items,
and the values come back as they are ready.

A method with a time limit and a check to run after it (the simulation of its starting heuristics' plans,
which it does not need to run) can have the check done beside it on a second core, so neither waits for
the other. The child is a copy of this process made by ``fork`` (the data is shared, nothing is pickled);
it ignores Ctrl-C, reports nothing on the terminal, and is killed when the parent stops waiting for it:
the parent's Ctrl-C and time limits stay the parent's. The values come back pickled (numbers, arrays, tuples).

Only where ``fork`` exists and this process may run on at least two CPUs (:func:`available`); elsewhere the
caller does the work itself.

Examples
--------
>>> with Forked(lambda x: x * x, [1.0, 2.0, 3.0]) as child:
...     got = child.collect(timeout_s=30.0)
>>> got
{0: 1.0, 1: 4.0, 2: 9.0}
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import struct
import time
from typing import Callable, Sequence

from topoplan.core.progress import reporting_to

__all__ = ["available", "Forked"]

# (item index, length of the pickled value that follows); index -1: the child ended early (an exception)
_RECORD = struct.Struct("<qq")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def available() -> bool:
    """Whether a child can run beside this process: ``fork`` exists and at least two CPUs are ours.

    Returns
    -------
    bool

    Examples
    --------
    >>> isinstance(available(), bool)
    True
    """
    if not hasattr(os, "fork"):
        return False
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return cpus >= 2


class Forked:
    """``fn(item)`` for every item, in a forked child, in order; :meth:`collect` gathers them.

    Parameters
    ----------
    fn : callable
        ``fn(item)``, run in the child; its value must pickle. An exception there ends the child: the items
        not done are missing from :meth:`collect`'s answer.
    items : sequence

    Examples
    --------
    >>> with Forked(lambda s: time.sleep(s) or s, [0.0, 60.0]) as child:
    ...     got = child.collect(timeout_s=0.5)   # the second item is still running: only the first is back
    >>> got
    {0: 0.0}
    """

    def __init__(self, fn: Callable[[object], object], items: Sequence):
        self.n = len(items)
        self.values: dict[int, object] = {}
        self.ended = self.n == 0
        self.pid = 0
        self.fd = -1
        if self.ended:
            return
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:   # the child: never returns into the caller's code
            os.close(r)
            code = 0
            try:
                signal.signal(signal.SIGINT, signal.SIG_IGN)   # the terminal's Ctrl-C is the parent's to handle
                with reporting_to(lambda _fields: None):       # and so is the terminal's progress line
                    for i, item in enumerate(items):
                        data = pickle.dumps(fn(item), protocol=pickle.HIGHEST_PROTOCOL)
                        _write_all(w, _RECORD.pack(i, len(data)) + data)
            except BaseException:   # noqa: BLE001 -- whatever fails, the parent only sees the items missing
                code = 1
                try:
                    _write_all(w, _RECORD.pack(-1, 0))
                except OSError:
                    pass
            finally:
                os._exit(code)   # no atexit handlers, no flushing of the parent's buffers
        os.close(w)
        self.pid, self.fd = pid, r
        self._buf = bytearray()

    def collect(self, timeout_s: float | None = None) -> dict[int, object]:
        """The values back so far, waiting up to ``timeout_s`` seconds (None: until the child ends; 0: not at all)
        for the rest.

        Parameters
        ----------
        timeout_s : float, optional

        Returns
        -------
        dict
            Item index -> value, for the items done.
        """
        end = None if timeout_s is None else time.monotonic() + max(float(timeout_s), 0.0)
        while not self.ended:   # (what is back already is read even when the time is up)
            wait = None if end is None else max(end - time.monotonic(), 0.0)
            ready, _, _ = select.select([self.fd], [], [], wait)
            if not ready:
                break
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                self.ended = True
                break
            self._buf += chunk
            while len(self._buf) >= _RECORD.size:
                i, size = _RECORD.unpack_from(self._buf)
                if i < 0:
                    self.ended = True
                    break
                if len(self._buf) < _RECORD.size + size:
                    break   # the rest of this value is still on its way
                self.values[i] = pickle.loads(self._buf[_RECORD.size:_RECORD.size + size])
                del self._buf[:_RECORD.size + size]
            if len(self.values) == self.n:
                self.ended = True
        return dict(self.values)

    def close(self) -> None:
        """Stop the child (if it still runs) and release it."""
        if self.pid:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                os.waitpid(self.pid, 0)
            except ChildProcessError:
                pass
            self.pid = 0
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        self.ended = True

    def __enter__(self) -> "Forked":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):   # a child is never left behind, even by a caller that forgot close()
        if getattr(self, "pid", 0):
            self.close()
