"""Compile every Numba kernel once, when topoplan is installed (``make install`` runs this module).

The compiled kernels (the flow engine and trace replay in :mod:`topoplan.sim._flows` and :mod:`topoplan.sim._loop`,
the partition refinement in :mod:`topoplan.problems.placement.refine`) are cached on disk by Numba
(``cache=True``), so they compile once per machine and load in a fraction of a second afterwards. The
first compilation takes several seconds; done here it is not charged to the first planning call, whose
time limit it would otherwise exceed (a 0.5 s ``metis`` call took 3.8 s on a fresh checkout). After an
edit of a kernel's source Numba recompiles it at its next call.

It then builds the event loop ahead of time (:func:`topoplan.sim._engine.build`): an extension module that
loads without Numba, so a small ``topoplan simulate`` does not spend 0.6 s importing Numba and
reading its cache. It is used only while the sources it was built from are unchanged.

Run ``python -m topoplan.warmup``: one line with the seconds each group took.
"""

from __future__ import annotations

import time

from topoplan.core.placement import sequential
from topoplan.core.topology_io import load_topology
from topoplan.problems.placement import PlacementProblem, solve
from topoplan.sim.maxmin import simulate_flows
from topoplan.sim.routes import LinkSet, routes_to_csr
from topoplan.sim.run import simulate
from topoplan.traffic.generators import parse_spec
from topoplan.traffic.sources import load_traffic

__all__ = ["warm"]


def warm() -> dict:
    """Call every compiled kernel once on a tiny input; returns the seconds per group.

    Returns
    -------
    dict
        ``placement``, ``flows``, ``replay``: seconds (compiling on a new machine, loading afterwards).

    Examples
    --------
    >>> sorted(warm())                      # cached kernels: fast after the first run
    ['flows', 'placement', 'replay']
    """
    out = {}
    t0 = time.perf_counter()
    topo = load_topology("paper003")
    solve(PlacementProblem.build(topo, load_traffic("neighbor2d:rows=16,cols=16,bytes=1MB")), "metis")
    out["placement"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    ptr, links = routes_to_csr([[0], [0, 1], [1]])
    simulate_flows(LinkSet([1e9, 5e8], [0.0, 0.0], [True, True]), ptr, links, [0.0, 0.0, 0.0], [1e6] * 3)
    out["flows"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    tree = load_topology("paper003", ["kind=tree", "ocs=null"])
    simulate(tree, parse_spec("alltoall:np=8,bytes=1MB"), sequential(8, tree))
    out["replay"] = time.perf_counter() - t0
    return out


if __name__ == "__main__":   # pragma: no cover - run by make install
    took = warm()
    print("compiled kernels ready: " + ", ".join(f"{k} {v:.1f} s" for k, v in took.items()))
    from topoplan.sim._engine import build

    t0 = time.perf_counter()
    print(f"{build()}, {time.perf_counter() - t0:.1f} s")
