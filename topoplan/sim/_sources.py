"""The files the compiled simulator is built from, and their SHA-256: the stamp of the ahead-of-time build
(:mod:`topoplan.sim._engine`) and of Numba's cache of the JIT (:mod:`topoplan.sim._jit`), so an edit of any of
them makes both stale. The Makefile's rebuild of the extension lists the same files
(``tests/test_sim_aot.py`` checks it).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = ["HERE", "SOURCES", "sources_sha256"]

HERE = Path(__file__).resolve().parent
SOURCES = ("program.py", "_jit.py", "_flows.py", "_loop.py", "_engine.py")


def sources_sha256() -> str:
    """SHA-256 over the sources the ahead-of-time build compiles (:data:`SOURCES`, in order)."""
    h = hashlib.sha256()
    for name in SOURCES:
        h.update((HERE / name).read_bytes())
    return h.hexdigest()
