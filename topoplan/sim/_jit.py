"""The Numba decorators of the compiled simulator (:mod:`topoplan.sim._flows`, :mod:`topoplan.sim._loop`) and the
cache stamp they share.

Numba caches a compiled function on disk (``cache=True``) and reuses it while the file that defines it is
unchanged; it does not look at the files its callees and the constants it reads come from. The event
loop (``_loop.py``) calls the flow kernels (``_flows.py``) and reads the program format
(``program.py``), so every function decorated here is stamped with all of
:data:`topoplan.sim._sources.SOURCES` (a locator put first in Numba's list, for those files only): an edit
of any of them recompiles them all, as it invalidates the ahead-of-time build stamped with the same list.
"""

from __future__ import annotations

import functools
import os

from numba import njit
from numba.core import caching

from topoplan.sim import _sources
from topoplan.sim._sources import HERE, SOURCES

__all__ = ["kernel", "leaf", "leaf_py", "loop"]

kernel = njit(cache=True, nogil=True, error_model="numpy")
# Kernels that allocate nothing and return no array are compiled without Numba's reference counting
# (``_nrt=False``): otherwise every call of a function with branches increments and decrements, out of
# line, the count of every array it is passed (~3.5 ns each, measured), which in the event loop's
# per-flow and per-link calls was a fifth of a trace replay's time. The caller holds the references.
leaf = njit(cache=True, nogil=True, error_model="numpy", _nrt=False)
leaf_py = njit(cache=True, _nrt=False)   # the same, Python's error model (the replay's state machine)
loop = njit(cache=True)                  # the loop, its state and run_core: Python's error model, counted references

_FILES = {os.path.realpath(HERE / name) for name in SOURCES}


@functools.lru_cache(maxsize=8)
def _sources_stamp(stats: tuple) -> str:
    """SHA-256 over the sources (memoized on their sizes and modification times, ``stats``)."""
    return _sources.sources_sha256()


def _stamp() -> str:
    return _sources_stamp(tuple((st.st_mtime_ns, st.st_size) for st in (os.stat(f) for f in sorted(_FILES))))


class _SourcesLocator(caching._CacheLocator):
    """Numba's own locator for a function of :data:`SOURCES` (the first of its list that takes the file), with the
    stamp of all the sources instead of the defining file's."""

    def __init__(self, inner):
        self._inner = inner

    def ensure_cache_path(self):
        self._inner.ensure_cache_path()

    def get_cache_path(self):
        return self._inner.get_cache_path()

    def get_disambiguator(self):
        return self._inner.get_disambiguator()

    def get_source_stamp(self):
        return _stamp()

    @classmethod
    def from_function(cls, py_func, py_file):
        if os.path.realpath(py_file) not in _FILES:
            return None
        for other in _IMPL._locator_classes:
            if other is not cls:
                inner = other.from_function(py_func, py_file)
                if inner is not None:
                    return cls(inner)
        return None


_IMPL = getattr(caching, "CacheImpl", None) or caching._CacheImpl   # renamed in Numba 0.62
if _SourcesLocator not in _IMPL._locator_classes:
    _IMPL._locator_classes.insert(0, _SourcesLocator)
