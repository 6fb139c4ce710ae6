"""The compiled event loop's entry point: :func:`run_core`, built ahead of time when it can be.

:func:`topoplan.sim._loop.run_core` is Numba code cached on disk. Loading it costs
a process about 0.6 s (importing Numba, then initializing its compiler to
read the cache) however small the run: the whole ``topoplan simulate
--flows`` of 1,000 flows took 1.1 s for 13 ms of simulation. So ``make
install`` also compiles it ahead of time (:func:`build`, Numba's ``pycc``)
into an extension module beside this file (``topoplan/sim/_engine_aot*.so``), which
imports in about a millisecond without Numba. The build records a SHA-256
of the sources it was compiled from (:data:`topoplan.sim._sources.SOURCES`: the program format, the Numba
decorators, the flow kernels, the loop and this file; Numba's cache of the JIT is stamped with the same
list, see :mod:`topoplan.sim._jit`);
:func:`run_core` runs the extension only while those sources are
unchanged, and Numba's JIT version otherwise (after an edit, or where the
build failed or ``pycc`` is missing), so a stale build can never run. Both
are compiled from the same code by the same compiler: their results are
identical to the bit (``tests/test_sim_aot.py``).

This module imports neither Numba nor :mod:`topoplan.sim._loop`, so the callers
(:func:`topoplan.sim.maxmin.simulate_flows`, the compiled replay of :mod:`topoplan.sim.pieces`) use
:func:`run_core` without paying for them.

Run ``python -m topoplan.sim._engine`` to (re)build; it prints one line.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from topoplan.core.aot import Extension
from topoplan.sim import _sources
from topoplan.sim._sources import HERE, SOURCES
from topoplan.sim.program import no_state, no_stream
from topoplan.sim.routes import LinkSet, pad_routes, route_stats, routes_to_csr
from topoplan.core.progress import report

__all__ = ["SOURCES", "EXTENSION", "run_core", "run_flows", "flow_args", "aot_status", "build"]

AOT_NAME = "_engine_aot"


def sources_sha256() -> str:
    """SHA-256 over the sources the ahead-of-time build compiles (:data:`topoplan.sim._sources.SOURCES`)."""
    return _sources.sources_sha256()


#: The build (:class:`topoplan.core.aot.Extension`).
EXTENSION = Extension("topoplan.sim", HERE, AOT_NAME, "run_core", lambda: sources_sha256(), "engine")


def aot_status() -> str:
    """``"current"``, ``"stale"`` (built from other sources), ``"missing"`` or ``"broken"`` (does not import)."""
    return EXTENSION.status()


def run_core(*args):
    """Run :func:`topoplan.sim._loop.run_core` on ``args``: the ahead-of-time build when current, else Numba's JIT.

    The build has one signature and does not check its arguments (a wrong
    dtype would crash the process), so arguments of any other types than
    the build's go to the JIT, which specializes for them; both give
    identical results.
    """
    built = EXTENSION.takes(args)
    if built is not None:
        return built(*args)
    from topoplan.sim._loop import run_core as jit

    if getattr(jit, "signatures", True):   # compiled in this process already (or Numba's JIT is disabled)
        return jit(*args)

    report(note=_first_call_note(jit))   # the progress line says why the first run waits
    try:
        return jit(*args)
    finally:
        report(note=None)


def _first_call_note(dispatcher) -> str:
    """What the first call of a Numba function in a process does: load it from Numba's cache, or compile it
    (after an installation or an edit; tens of seconds, once)."""
    try:
        cached = Path(dispatcher._cache._cache_file._index_path).is_file()   # Numba's cache index of the function
    except (AttributeError, TypeError):
        cached = True
    return "loading the compiled simulator" if cached else "compiling the simulator: once, then cached"


def flow_args(links, ptr, rl, start, size, rel, timeline_dt_s=0.0, max_intervals=0) -> tuple:
    """``run_core``'s arguments for a plain flow set (validated CSR routes, starts, sizes): no ranks; link
    bytes sampled every ``timeline_dt_s`` when it is > 0."""
    k = len(size)
    lat, cap, slowest = route_stats(links, ptr, rl)
    lens = np.diff(ptr)
    width = max(int(lens.max(initial=0)), 1)
    rows, _ = pad_routes(ptr, rl, np.arange(k), width)
    z_i, z_f = np.zeros(0, np.int64), np.zeros(0)
    prog = (z_i, z_i, z_i, z_i, z_f, z_i, z_i, z_f, z_i, np.zeros(1, np.int64), z_i, z_f, z_i, z_i, 0, 0)
    route = (np.zeros(1, np.int64), rows, lens.astype(np.int64), np.zeros(k), lat, cap, ~np.isfinite(slowest))
    lcap = np.where(links.shared, links.bw_Bps, np.inf)
    return (prog, route, lcap, 0.0, float(rel), np.arange(k, dtype=np.int64), np.asarray(start, np.float64),
            np.asarray(size, np.float64), no_stream(), float(timeline_dt_s), int(max_intervals),
            np.zeros(0, np.int64), np.zeros(1, np.int64), np.zeros(0, np.int64), no_state())


def run_flows(links, ptr, rl, start, size, rel, timeline_dt_s=0.0, max_intervals=0):
    """Finish time of every flow (validated CSR routes, starts, sizes), the number of events and, for a
    timeline, ``run_core``'s samples (links x boundaries + 1, boundaries passed or -1, the end time)."""
    out = run_core(*flow_args(links, ptr, rl, start, size, rel, timeline_dt_s, max_intervals))
    return out[7], int(out[4]), (out[8], int(out[9]), float(out[10]))


def _jit_function():
    from topoplan.sim import _loop   # Numba: only to build

    return _loop.run_core.py_func


def build() -> str:
    """Compile :func:`topoplan.sim._loop.run_core` ahead of time into ``topoplan/sim/_engine_aot*.so``; returns a status line.

    The signature is the one :func:`flow_args` produces, which the replay's
    arguments share. The extension and its stamp are written to a temporary
    directory first and moved into place together (stamp last).
    """
    ptr, rl = routes_to_csr([[0], [0, 1]])
    args = flow_args(LinkSet([1e9, 5e8], [0.0, 0.0], [True, True]), ptr, rl, np.zeros(2), np.ones(2), 1e-12)
    return EXTENSION.build(_jit_function, args)


if __name__ == "__main__":   # pragma: no cover - run by make install (topoplan.warmup)
    print(build())
