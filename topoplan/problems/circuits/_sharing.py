"""The forwarding tables' compiled traffic pass, built ahead of time when it can be.

:func:`topoplan.problems.circuits._sharing_jit.traffic_pass` is Numba code cached on disk; loading it
costs a process about 1 s of CPU (importing Numba, then setting up its compiler to read the cache),
a tenth of the greedy method's whole process at 16,384 nodes. ``make install`` also compiles it ahead of
time (:func:`build`, :mod:`topoplan.core.aot`) into an extension beside this file
(``_sharing_aot*.so``) that imports without Numba. :func:`traffic_pass` runs the extension while it was
built from the current ``_sharing_jit.py`` and the arguments have the build's types, Numba's JIT
otherwise; both give the same tables bit for bit (``tests/test_plan_tables.py``).

Run ``python -m topoplan.problems.circuits._sharing`` to (re)build; it prints one line.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from topoplan.core.aot import Extension, files_sha256

__all__ = ["traffic_pass", "ready", "aot_status", "build", "signature_args"]

HERE = Path(__file__).resolve().parent
AOT_NAME = "_sharing_aot"
SOURCES = ("_sharing_jit.py",)   # what the build compiles (the Makefile's SHARING_SOURCES)


def sources_sha256() -> str:
    """SHA-256 over :data:`SOURCES`."""
    return files_sha256([HERE / name for name in SOURCES])


#: The build (:class:`topoplan.core.aot.Extension`).
EXTENSION = Extension("topoplan.problems.circuits", HERE, AOT_NAME, "traffic_pass", lambda: sources_sha256(),
                      "traffic pass")


def aot_status() -> str:
    """``"current"``, ``"stale"`` (built from other sources), ``"missing"`` or ``"broken"`` (does not import).

    >>> aot_status() in ("current", "stale", "missing", "broken")
    True
    """
    return EXTENSION.status()


def ready() -> bool:
    """Is the ahead-of-time build current (so the pass runs without loading Numba)?

    >>> ready() == (aot_status() == "current")
    True
    """
    return EXTENSION.built() is not None


def traffic_pass(*args):
    """:func:`topoplan.problems.circuits._sharing_jit.traffic_pass` on ``args``: the ahead-of-time build when
    current and the arguments have its types, else Numba's JIT (which specializes for any types)."""
    built = EXTENSION.takes(args)
    if built is not None:
        return built(*args)
    from topoplan.problems.circuits._sharing_jit import traffic_pass as jit   # Numba: only without a current build

    return jit(*args)


def signature_args() -> tuple:
    """Arguments of the types :meth:`topoplan.problems.circuits.forwarding._Sharing._traffic_compiled` passes
    (what the build is compiled for), describing a pass with no work (no nodes): the build needs only the types.

    >>> from topoplan.core.aot import arg_spec
    >>> arg_spec(signature_args())[:4]
    ['<i8', ['array', '<i8', 1], ['array', '<f8', 1], ['array', '<f8', 1]]
    >>> events, nodes = traffic_pass(*signature_args())
    >>> events.shape, nodes.shape
    ((0, 5), (0,))
    """
    i1, f1, b1 = np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.bool_)
    i2, f2, b2 = np.zeros((0, 0), np.int64), np.zeros((0, 0)), np.zeros((0, 0), np.bool_)
    b3 = np.zeros((0, 0, 0), np.bool_)
    # t, nodes, owns, Dt, ct, et, fin, has_relay, best_g, tie_g, fb, use_fb, minc, sw, oi, cls, inv,
    # SLn, PMn, CL, load, down, up, ocs_bw, nh
    return (0, i1, f1, f1, b2, b2, b1, b1, f2, b3, b1, False, f1, i1, i1, i1, f1,
            i2, i2, i2, f1, 0, 0, 1.0, i2)


def _jit_function():
    from topoplan.problems.circuits import _sharing_jit   # Numba: only to build

    return _sharing_jit.traffic_pass.py_func


def build() -> str:
    """Compile the traffic pass ahead of time into ``_sharing_aot*.so`` beside this module; returns a status line."""
    return EXTENSION.build(_jit_function, signature_args())


if __name__ == "__main__":   # pragma: no cover - run by make install (topoplan.warmup)
    print(build())
