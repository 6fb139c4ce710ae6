"""How much memory this process can still allocate: the one measure every reader and builder checks before a
large allocation (a CSV table, a generated trace, a compiled replay).

Examples
--------
>>> left = memory_left()
>>> left is None or left >= 0
True
"""

from __future__ import annotations

import ctypes
import os

__all__ = ["memory_left", "map_large_blocks"]

# glibc's mallopt parameter that sets the size above which a block is mapped by itself (malloc.h)
_M_MMAP_THRESHOLD = -3
_MAP_FROM_B = 128 * 1024


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


def map_large_blocks() -> bool:
    """Have the C library map every block from 128 KiB up by itself from now on, and so give its memory back
    as soon as it is freed; returns whether it could (glibc only: elsewhere nothing changes).

    glibc starts out so but raises the size each time such a block is freed, after which the large arrays a
    long computation makes and frees in turn (a replay in pieces) come from its heap and leave it holding
    their memory; fixing the size (as ``MALLOC_MMAP_THRESHOLD_=131072`` in the environment does) keeps the
    process's peak resident memory near what it holds at once. Results do not change.

    Returns
    -------
    bool

    Examples
    --------
    >>> map_large_blocks() in (True, False)
    True
    """
    libc = _libc()
    if libc is None:
        return False
    try:
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, _MAP_FROM_B))
    except AttributeError:
        return False


_LIBC: list = []


def _libc():
    """The C library when it is glibc (the one with ``mallopt``), else None; looked up once."""
    if not _LIBC:
        lib = None
        try:
            cand = ctypes.CDLL(None)   # the symbols the process has loaded, the C library's among them
            if hasattr(cand, "gnu_get_libc_version") and hasattr(cand, "mallopt"):
                cand.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
                cand.mallopt.restype = ctypes.c_int
                lib = cand
        except OSError:
            lib = None
        _LIBC.append(lib)
    return _LIBC[0]
