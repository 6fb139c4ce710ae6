"""The compiled event loop's entry point: :func:`run_core`, built ahead of time when it can be.

:func:`topoplan.sim._compiled.run_core` is Numba code cached on disk. Loading it costs
a process about 0.6 s (importing Numba, then initializing its compiler to
read the cache) however small the run: the whole ``topoplan simulate
--flows`` of 1,000 flows took 1.1 s for 13 ms of simulation. So ``make
install`` also compiles it ahead of time (:func:`build`, Numba's ``pycc``)
into an extension module beside this file (``topoplan/sim/_engine_aot*.so``), which
imports in about a millisecond without Numba. The build records a SHA-256
of the sources it was compiled from (``topoplan/sim/_compiled.py`` and this file);
:func:`run_core` runs the extension only while those sources are
unchanged, and Numba's JIT version otherwise (after an edit, or where the
build failed or ``pycc`` is missing), so a stale build can never run. Both
are compiled from the same code by the same compiler: their results are
identical to the bit (``tests/test_sim_aot.py``).

This module imports neither Numba nor :mod:`topoplan.sim._compiled`, so the callers
(:func:`topoplan.sim.maxmin.simulate_flows`, :func:`topoplan.sim.replay.compile_program`) use
its micro-op kinds and :func:`run_core` without paying for them.

Run ``python -m topoplan.sim._engine`` to (re)build; it prints one line.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

__all__ = ["run_core", "run_flows", "no_stream", "no_state", "aot_status", "build"]

# micro-op kinds of the compiled program (topoplan.sim.replay.compile_program writes them, topoplan.sim._compiled runs them)
K_SEND, K_ISEND, K_RECV, K_IRECV, K_SENDRECV, K_WAIT, K_WAITALL, K_STEP, K_NOP, K_GEN = range(10)
# streamed collectives (GEN micro-ops): algorithms, and the columns of their table
GEN_PAIRWISE, GEN_SPREAD, GEN_RING = range(3)
GN_ALG, GN_P, GN_ME, GN_BLOCK, GN_MEM = range(5)

HERE = Path(__file__).resolve().parent
AOT_NAME = "_engine_aot"
STAMP = HERE / f"{AOT_NAME}.json"
SOURCES = ("_compiled.py", "_engine.py")

_core = None


def sources_sha256() -> str:
    """SHA-256 over the sources the ahead-of-time build compiles (``SOURCES``, in order)."""
    h = hashlib.sha256()
    for name in SOURCES:
        h.update((HERE / name).read_bytes())
    return h.hexdigest()


def _state() -> tuple[str, dict | None]:
    """The build's status (see :func:`aot_status`) and, when current, its stamp."""
    try:
        stamp = json.loads(STAMP.read_text())
    except (OSError, ValueError):
        return "missing", None
    if stamp.get("sources_sha256") != sources_sha256():
        return "stale", None
    try:
        __import__(f"topoplan.sim.{AOT_NAME}")
    except Exception:   # an extension built for another Python or NumPy
        return "broken", None
    return "current", stamp


def aot_status() -> str:
    """``"current"``, ``"stale"`` (built from other sources), ``"missing"`` or ``"broken"`` (does not import)."""
    return _state()[0]


def _spec(x):
    """The argument types as plain data, as Numba would type them (None: a kind the build never takes)."""
    if isinstance(x, tuple):
        return [_spec(v) for v in x]
    if isinstance(x, np.ndarray):
        if not (x.flags.c_contiguous and x.flags.aligned and x.flags.writeable):
            return None
        return ["array", x.dtype.str, x.ndim]
    if isinstance(x, (bool, np.bool_)):
        return "bool"
    if isinstance(x, int):
        return "<i8"
    if isinstance(x, float):
        return "<f8"
    if isinstance(x, np.generic):
        return x.dtype.str
    return None


def _aot_core():
    """The ahead-of-time ``run_core`` and the argument types it was built for, or None when not current."""
    status, stamp = _state()
    if status != "current":
        return None
    return sys.modules[f"topoplan.sim.{AOT_NAME}"].run_core, stamp["args"]


def run_core(*args):
    """Run :func:`topoplan.sim._compiled.run_core` on ``args``: the ahead-of-time build when current, else Numba's JIT.

    The build has one signature and does not check its arguments (a wrong
    dtype would crash the process), so arguments of any other types than
    the build's go to the JIT, which specializes for them; both give
    identical results.
    """
    global _core
    if _core is None:
        _core = _aot_core() or False
    if _core and _spec(args) == _core[1]:
        return _core[0](*args)
    from topoplan.sim._compiled import run_core as jit

    if getattr(jit, "signatures", True):   # compiled in this process already (or Numba's JIT is disabled)
        return jit(*args)
    from topoplan.core.progress import report

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


# rows of run_core's per-rank table ``R`` (the piece-wise replay moves the program counters between calls)
(R_PC, R_BLOCKED, R_NWAIT, R_GAPDONE, R_OPEN_H, R_OPEN_T, R_POST_H, R_POST_T, R_UNX_H, R_UNX_T, R_HELD,
 R_STEP) = range(12)

# run_core's state between calls of a replay in pieces (names, dtypes and dimensions, in tuple order): what
# topoplan.sim._compiled.run_core keeps of a run. A first call passes no_state(); a call that stops because a rank
# needs the next piece of the trace (status 2) returns its state, which the next call resumes.
STATE = (("C", "<i8", 1), ("S", "<f8", 1), ("R", "<i8", 2), ("clock", "<f8", 1), ("finish", "<f8", 1),
         ("rdy_t", "<f8", 1), ("rdy_r", "<i8", 1), ("reqs", "<i8", 1), ("g_peer", "<i8", 1),
         ("g_bytes", "<f8", 1), ("g_send", "<i8", 1), ("Q", "<i8", 2), ("qfree", "<i8", 1), ("M", "<i8", 2),
         ("MF", "<f8", 2), ("mfree", "<i8", 1), ("FL", "<i8", 2), ("flow_size", "<f8", 1), ("live", "|u1", 1),
         ("pend_t", "<f8", 1), ("pend_f", "<i8", 1), ("init_fin", "<f8", 1), ("lbytes", "<f8", 1),
         ("caps", "<f8", 1), ("capv", "<f8", 1), ("lcap2", "<f8", 1), ("seg_rows", "<i8", 2),
         ("seg_len", "<i8", 1), ("seg_extra", "<f8", 1), ("seg_lat", "<f8", 1), ("seg_inst", "|b1", 1),
         ("seg_vl", "<i8", 1), ("sid", "<i8", 1), ("rows", "<i8", 2), ("back", "<i8", 2), ("lens", "<i8", 1),
         ("sgrp", "<i8", 1), ("stag", "<f8", 1), ("hp", "<i8", 2), ("free", "<i8", 1), ("segs", "<i8", 2),
         ("pool", "<i8", 1), ("meta", "<i8", 1), ("iw", "<i8", 2), ("fw", "<f8", 2), ("gI", "<i8", 2),
         ("gF", "<f8", 2), ("agl", "<i8", 2), ("gm", "<i8", 1), ("EP", "<i8", 2), ("HT", "<i8", 2),
         ("em", "<i8", 1), ("gbuf", "<i8", 1), ("fbuf", "<i8", 1), ("sbuf", "<i8", 1), ("tl", "<f8", 2),
         ("mcur", "<i8", 1), ("mark_t", "<f8", 1), ("dims", "<i8", 1))
STATE_INDEX = {name: k for k, (name, _, _) in enumerate(STATE)}


def no_state() -> tuple:
    """``run_core``'s ``state`` argument for a run from the start (empty arrays of the state's types)."""
    return tuple(np.zeros((0,) * nd, dtype=np.dtype(dt)) for _, dt, nd in STATE)


def no_stream() -> tuple:
    """``run_core``'s ``stream`` argument when no collective is streamed (empty tables of the right types)."""
    z_i, z_f = np.zeros(0, np.int64), np.zeros(0)
    parts = (z_i, z_i, z_i, z_i, np.zeros(1, np.int64), z_i)
    return (np.zeros((0, 5), np.int64), z_i, z_i, parts, z_f, z_f, z_f, np.zeros(0, bool), np.zeros(3), z_f)


def flow_args(links, ptr, rl, start, size, rel, timeline_dt_s=0.0, max_intervals=0) -> tuple:
    """``run_core``'s arguments for a plain flow set (validated CSR routes, starts, sizes): no ranks; link
    bytes sampled every ``timeline_dt_s`` when it is > 0."""
    from topoplan.sim.maxmin import _pad_routes, _route_stats

    k = len(size)
    lat, cap, slowest = _route_stats(links, ptr, rl)
    lens = np.diff(ptr)
    width = max(int(lens.max(initial=0)), 1)
    rows, _ = _pad_routes(ptr, rl, np.arange(k), width)
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


def build() -> str:
    """Compile :func:`topoplan.sim._compiled.run_core` ahead of time into ``topoplan/sim/_engine_aot*.so``; returns a status line.

    The signature is the one :func:`flow_args` produces, which the replay's
    arguments share. The extension and its stamp are written to a temporary
    directory first and moved into place together (stamp last).
    """
    import warnings

    from topoplan.sim.maxmin import LinkSet, routes_to_csr

    try:
        import numba
        from numba.pycc import CC
    except ImportError as e:   # pragma: no cover - pycc left Numba in a later release
        return f"ahead-of-time engine not built ({e}); the Numba JIT serves"
    from topoplan.sim import _compiled

    sha = sources_sha256()
    ptr, rl = routes_to_csr([[0], [0, 1]])
    args = flow_args(LinkSet([1e9, 5e8], [0.0, 0.0], [True, True]), ptr, rl, np.zeros(2), np.ones(2), 1e-12)
    # the argument types alone: pycc infers the return type (no JIT compilation of run_core itself first; the
    # functions it calls are compiled through their dispatchers, which cache them for the JIT)
    sig = tuple(numba.typeof(a) for a in args)
    try:   # no C compiler, a read-only package directory...: the JIT serves, only start-up is slower
        with tempfile.TemporaryDirectory(dir=HERE, prefix=".aot-") as tmp, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cc = CC(AOT_NAME)
            cc.output_dir = tmp
            cc.verbose = False
            cc.export("run_core", sig)(_compiled.run_core.py_func)
            cc.compile()
            built = [p for p in Path(tmp).iterdir() if p.name.startswith(AOT_NAME) and p.suffix in (".so", ".pyd")]
            if len(built) != 1:
                return f"ahead-of-time engine not built (pycc wrote {[p.name for p in Path(tmp).iterdir()]})"
            for old in HERE.glob(f"{AOT_NAME}*"):
                old.unlink()
            shutil.move(str(built[0]), HERE / built[0].name)
            stamp = Path(tmp) / "stamp.json"
            stamp.write_text(json.dumps({"sources_sha256": sha, "numba": numba.__version__, "args": _spec(args)})
                             + "\n")
            os.replace(stamp, STAMP)
    except Exception as e:
        return f"ahead-of-time engine not built ({type(e).__name__}: {e}); the Numba JIT serves"
    return f"ahead-of-time engine built: {built[0].name} ({aot_status()})"


if __name__ == "__main__":   # pragma: no cover - run by make install (topoplan.warmup)
    print(build())
