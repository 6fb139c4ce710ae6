"""Progress of long searches: methods report their incumbent and bound, a front end shows them.

Search loops call :func:`report` now and then (it costs one context lookup when nobody listens);
whoever runs the search may install a sink with :func:`reporting_to` -- the CLI shows one line on a
terminal: elapsed time against the time limit, the stage, how far, the incumbent and the bound
(``topoplan.cli.commands.common.working``).
The library itself prints nothing.
"""

from __future__ import annotations

import contextvars
import time
from contextlib import contextmanager
from typing import Callable

__all__ = ["report", "reporting_to"]

_sink: contextvars.ContextVar = contextvars.ContextVar("topoplan_progress", default=None)


def report(**fields) -> None:
    """Tell the installed sink about the search (no-op without one).

    Parameters
    ----------
    **fields
        ``stage`` (str: what is being done), ``done`` and ``total`` (how far), ``incumbent`` and ``bound``
        (numbers in the method's objective), ``note`` (str, or None to clear it: why it waits, e.g. a first
        compilation), or anything else worth showing. Stages and notes always get through; other reports at
        most once per the sink's interval.

    Examples
    --------
    >>> seen = []
    >>> with reporting_to(seen.append, min_interval_s=0):
    ...     report(stage="anneal", incumbent=3.0)
    >>> seen
    [{'stage': 'anneal', 'incumbent': 3.0}]
    >>> report(incumbent=1.0)   # nobody listens: nothing happens
    """
    state = _sink.get()
    if state is None:
        return
    sink, min_interval_s, last = state
    now = time.monotonic()
    if now - last[0] < min_interval_s and not fields.keys() & {"stage", "note"}:
        return
    last[0] = now
    sink(fields)


@contextmanager
def reporting_to(sink: Callable[[dict], None], *, min_interval_s: float = 0.2):
    """Send the :func:`report` calls made inside the block to ``sink`` (at most one per interval,
    except stages and notes).

    Parameters
    ----------
    sink : callable
        Takes the dict of reported fields.
    min_interval_s : float, optional

    Yields
    ------
    None

    Examples
    --------
    >>> got = []
    >>> with reporting_to(got.append, min_interval_s=3600):
    ...     for i in range(1000):
    ...         report(incumbent=float(i))
    >>> got
    [{'incumbent': 0.0}]
    """
    token = _sink.set((sink, float(min_interval_s), [float("-inf")]))
    try:
        yield
    finally:
        _sink.reset(token)
