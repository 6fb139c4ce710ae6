"""Compile the Numba kernels when topoplan is installed (``make install`` runs this module), two processes at a time.

Numba caches compiled functions on disk (``cache=True``), so each compiles once per machine and loads in a
fraction of a second afterwards; done here, no planning call pays for it inside its time limit (a 0.5 s
``metis`` call took 3.8 s on a fresh checkout). The kernels come in groups:

``engine``
    The simulator's event loop built ahead of time (:func:`topoplan.sim._engine.build`, Numba's ``pycc``):
    an extension module that loads without Numba, which every simulation runs (the demo's too). Building it
    compiles the loop's functions through Numba's JIT as well, which caches them on disk.
``placement``
    The partition refinement of :mod:`topoplan.problems.placement.refine` (``metis`` and every method that
    starts from it).
``groups``
    The group enumeration and search of the exact placement model
    (:mod:`topoplan.formulations.placement_groups`, ``place -m ilp``) and the pricing of its form for large
    groups (:mod:`topoplan.formulations.placement_pricing`).
``matching``
    The maximum-weight matching of :mod:`topoplan.problems.circuits.blossom` (``circuits -m matching``) and
    the compiled traffic pass of the forwarding tables (:mod:`topoplan.problems.circuits._sharing_jit`, large
    problems of every method), also built ahead of time (:func:`topoplan.problems.circuits._sharing.build`).
``flows``
    The JIT version of the event loop (:func:`topoplan.sim._loop.run_core`: what serves after an edit of its
    sources, until the next build, and for arguments of other types); after ``engine`` only its entry is left
    to compile.
``replay``
    A small replay through the whole stack, compiled and with the Python reference (the flow engine's
    kernels).

``python -m topoplan.warmup [GROUP ...] [--jobs N]`` runs the groups named (default all) in up to ``N``
processes (default 2): ``engine``, ``flows`` and ``replay`` in one, in that order (each reuses what the
previous compiled), ``placement``, ``groups`` and ``matching`` in the other; one line per group with its seconds.
``make demo`` runs none (the demo and the README's tour compile nothing: their simulations are small and run on
the NumPy engine until the event loop is compiled, see :func:`topoplan.sim.maxmin.compiled_ready`, their
matchings are small and run interpreted, see :func:`topoplan.problems.circuits.blossom.interpreted`, and
small placements are refined by the interpreter, see :func:`topoplan.problems.placement.refine.runs_interpreted`);
``make install`` runs them all.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

import numpy as np

__all__ = ["GROUPS", "warm", "lanes"]

GROUPS = ("engine", "placement", "groups", "matching", "flows", "replay")
# groups that share compiled functions run in one process, in this order (a second process would compile
# them again instead of loading them from Numba's cache)
# (the matching shares nothing with the placement kernels: with the lanes it would join it runs beside them
# when there are processes to spare, as for ``make demo``)
_LANES = (("engine", "flows", "replay"), ("placement", "groups"), ("matching",))


def _ahead_of_time(build) -> str:
    """Run an ahead-of-time build (Numba's ``pycc``, :mod:`topoplan.core.aot`); returns its line.

    ``pycc`` makes its scratch directories (a compiler check, the build) with mkdtemp and leaves some in the
    system's temp directory: here they go under one directory that is removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="topoplan-build-", ignore_cleanup_errors=True) as scratch:
        saved, tempfile.tempdir = tempfile.tempdir, scratch
        try:
            return build()
        finally:
            tempfile.tempdir = saved


def _engine() -> str:
    from topoplan.sim._engine import build

    return _ahead_of_time(build)


def _placement() -> str:
    from topoplan.core.topology_io import load_topology
    from topoplan.problems.placement import PlacementProblem, solve
    from topoplan.traffic.sources import load_traffic

    solve(PlacementProblem.build(load_topology("paper003"), load_traffic("neighbor2d:rows=16,cols=16,bytes=1MB")),
          "metis")
    # the balance repair, which METIS's parts above may not need (a first placement whose parts do would
    # compile it, and time limits count on it being ready: topoplan.problems.placement.problem.refine_ready)
    import scipy.sparse as sp

    from topoplan.problems.placement import refine

    refine.repair(sp.csr_matrix(np.array([[0, 5, 1], [5, 0, 0], [1, 0, 0]], float)), np.zeros(3, dtype=np.int64), [2, 1])
    return ""


def _groups() -> str:
    from topoplan.formulations import placement_groups, placement_pricing

    ring = np.roll(np.eye(8, dtype=np.int64), 1, axis=1)        # an 8-ring from a poor start: the search runs
    data = placement_groups.GroupData(W=ring + ring.T, size=4, groups=2, start=np.arange(8) % 2)
    placement_groups.solve(data, time_limit=600)     # (not 10: compiling counts, 20-35 s under load)
    placement_pricing.solve(data, time_limit=600)    # both pricings run (the heuristic finds columns)
    return ""


def _matching() -> str:
    from topoplan.problems.circuits.blossom import compile_kernels

    compile_kernels()        # (a small matching would otherwise run interpreted and compile nothing)
    # the forwarding tables' traffic pass (large problems of every method): built ahead of time, and through
    # Numba's JIT for what serves without a current build (arguments of other types, an edit of its source)
    from topoplan.problems.circuits import _sharing
    from topoplan.problems.circuits._sharing_jit import traffic_pass

    traffic_pass(*_sharing.signature_args())
    return _ahead_of_time(_sharing.build)


def _flows() -> str:
    from topoplan.sim import _loop
    from topoplan.sim._engine import flow_args
    from topoplan.sim.routes import LinkSet, routes_to_csr

    ptr, rl = routes_to_csr([[0], [0, 1], [1]])
    _loop.run_core(*flow_args(LinkSet([1e9, 5e8], [0.0, 0.0], [True, True]), ptr, rl, [0.0] * 3, [1e6] * 3,
                                  1e-12))
    return ""


def _replay() -> str:
    from topoplan.core.placement import sequential
    from topoplan.core.topology_io import load_topology
    from topoplan.sim.network import build_network
    from topoplan.sim.replay import replay
    from topoplan.traffic.generators import parse_spec

    tree = load_topology("paper003", ["kind=tree", "ocs=null"])
    for method in ("compiled", "python"):
        replay(parse_spec("alltoall:np=8,bytes=1MB"), build_network(tree), sequential(8, tree), method=method)
    return ""


_WORK = {"engine": _engine, "placement": _placement, "groups": _groups, "matching": _matching, "flows": _flows, "replay": _replay}


def warm(groups=None, *, echo=None) -> dict:
    """Compile (or load) the kernels of ``groups`` in this process, in the given order; returns the seconds per group.

    Parameters
    ----------
    groups : sequence of str, optional
        Names of :data:`GROUPS`; default all.
    echo : callable, optional
        Called with one line per group as it ends.

    Returns
    -------
    dict
        Group -> seconds (compiling on a new machine, loading afterwards).

    Examples
    --------
    >>> sorted(warm(["placement", "replay"]))          # cached kernels: fast after the first run
    ['placement', 'replay']
    >>> from topoplan.problems.placement.problem import refine_ready
    >>> refine_ready()                                  # both refinement kernels (the partition's and the repair's)
    True
    >>> warm(["everything"])
    Traceback (most recent call last):
    ...
    ValueError: unknown warm-up group 'everything' (engine, placement, groups, matching, flows, replay)
    """
    groups = list(GROUPS if groups is None else groups)
    for g in groups:
        if g not in _WORK:
            raise ValueError(f"unknown warm-up group {g!r} ({', '.join(GROUPS)})")
    out = {}
    for g in groups:
        t0 = time.perf_counter()
        note = _WORK[g]()
        out[g] = time.perf_counter() - t0
        if echo is not None:
            echo(f"{g} {out[g]:.1f} s" + (f": {note}" if note else ""))
    return out


def lanes(groups=None, jobs: int = 2) -> list[list[str]]:
    """How ``groups`` are split between at most ``jobs`` processes (groups that share compiled code together).

    Parameters
    ----------
    groups : sequence of str, optional
        Default all of :data:`GROUPS`.
    jobs : int, optional

    Returns
    -------
    list of list of str
        One list per process, in the order its groups run.

    Examples
    --------
    >>> lanes()
    [['engine', 'flows', 'replay'], ['placement', 'groups', 'matching']]
    >>> lanes(["placement", "engine"]), lanes(jobs=1)
    ([['engine'], ['placement']], [['engine', 'flows', 'replay', 'placement', 'groups', 'matching']])
    >>> lanes(["placement", "matching"])          # make demo: two processes
    [['placement'], ['matching']]
    """
    groups = list(GROUPS if groups is None else groups)
    split = [[g for g in lane if g in groups] for lane in _LANES]
    split = [lane for lane in split if lane]
    while len(split) > max(jobs, 1):   # more lanes than processes: the last ones share one
        split[-2:] = [split[-2] + split[-1]]
    return split


def main(argv=None) -> int:   # pragma: no cover - run by make
    import argparse

    ap = argparse.ArgumentParser(prog="python -m topoplan.warmup", description=__doc__.splitlines()[0])
    ap.add_argument("groups", nargs="*", metavar="GROUP", help=f"of {', '.join(GROUPS)} (default: all)")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="processes (default 2)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    split = lanes(args.groups or None, args.jobs)
    if len(split) == 1:
        warm(split[0], echo=lambda line: print(line, flush=True))
    else:
        procs = [subprocess.Popen([sys.executable, "-m", "topoplan.warmup", "--jobs", "1", *lane]) for lane in split]
        if any(p.wait() != 0 for p in procs):
            return 1
    print(f"compiled kernels ready ({', '.join(g for lane in split for g in lane)}): "
          f"{time.perf_counter() - t0:.1f} s", flush=True)
    return 0


if __name__ == "__main__":   # pragma: no cover - run by make install
    sys.exit(main())
