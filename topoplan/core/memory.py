"""How much memory this process can still allocate: the one measure every reader and builder checks before a
large allocation (a CSV table, a generated trace, a compiled replay).

Examples
--------
>>> left = memory_left()
>>> left is None or left >= 0
True
"""

from __future__ import annotations

import os

__all__ = ["memory_left"]


def memory_left() -> int | None:
    """Bytes this process can still allocate: Linux ``MemAvailable``, or less where ``ulimit -v`` leaves less;
    None when neither is known.

    Returns
    -------
    int or None

    Examples
    --------
    >>> left = memory_left()
    >>> left is None or left >= 0
    True
    """
    have = _mem_available()
    room = _address_space_left()
    if room is not None:
        have = room if have is None else min(have, room)
    return have


def _mem_available() -> int | None:
    """Bytes of memory available to a new allocation (Linux MemAvailable), or None when unknown."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _address_space_left() -> int | None:
    """Bytes this process may still map under its address-space limit (``ulimit -v``), or None without one."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft == resource.RLIM_INFINITY:
            return None
        with open("/proc/self/statm") as fh:
            used = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        return max(soft - used, 0)
    except (ImportError, OSError, ValueError, IndexError):
        return None
