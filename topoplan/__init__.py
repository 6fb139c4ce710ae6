"""topoplan: a planning engine for HPC interconnects.

Hybrid EPS/OCS networks (circuit assignment with forwarding tables), process
placement and topology-aware MPI_Bcast reordering, each solved by the papers'
heuristics, exactly and by local search, and scored by a flow-level simulator.

The public API (imported on first use, so ``import topoplan`` stays light):

- ``load_topology(spec, sets=())``: a preset, YAML file or Slurm topology.conf.
- ``load_source(spec)`` -> ``(trace or None, traffic)``; ``load_traffic(spec)``: generator specs, matrices, traces.
- ``CircuitProblem``, ``PlacementProblem``, ``BcastProblem``: ``Problem.build(topology, traffic, placement=None, **options)``.
- ``solve(problem, method, *, time_limit=None, seed=0, score="bound", **options)`` -> ``PlanResult``.
- ``validate(plan, topology)``: check a plan document (circuits, placement, Bcast order).
- ``simulate(topology, trace, plan=None, *, placement=None, model=None)``: the simulator's result dict.
- ``SimModel``: the network model (``maxmin`` or ``paper``; ``pipelined`` or ``store-and-forward`` relays).
- ``PlanResult``, ``TopoplanError``.

Subpackages: ``topoplan.core`` (topology, placement, units, I/O, errors),
``topoplan.traffic`` (traces, matrices, generators, NPB, MPI collectives, the door for inputs),
``topoplan.plans`` (plan documents and their validation),
``topoplan.problems`` (the three planning problems and the result type),
``topoplan.analysis`` (switch traffic, link loads, all-to-all bounds, cost),
``topoplan.fabric`` (InfiniBand readers and the route service),
``topoplan.reporting`` (HTML report, launcher exports), ``topoplan.batch`` (sweeps),
``topoplan.cli`` (the command line); the simulator is the ``topoplan.sim`` package and
the exact formulations and solver back-ends the ``topoplan.formulations`` package. The layers they form
are written down in ``topoplan/_layers.py``.

Examples
--------
>>> import topoplan
>>> topo = topoplan.load_topology("paper003")
>>> trace, traffic = topoplan.load_source("neighbor2d:rows=16,cols=16,bytes=4MB,iters=1")
>>> problem = topoplan.CircuitProblem.build(topo, traffic)
>>> result = topoplan.solve(problem, "greedy")
>>> topoplan.validate(result.to_dict(), topo)["checked"][0]
'circuit plan: 12 circuits, 192 forwarding entries'
>>> sim = topoplan.simulate(topo, trace, result.to_dict())
>>> round(sim["makespan_s"] / result.objective, 3)   # the plan runs at its bound (pipelined relays)
1.0
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_API = {
    "load_topology": ("topoplan.core.topology_io", "load_topology"),
    "load_source": ("topoplan.traffic.sources", "load_source"),
    "load_traffic": ("topoplan.traffic.sources", "load_traffic"),
    "CircuitProblem": ("topoplan.problems.circuits", "CircuitProblem"),
    "PlacementProblem": ("topoplan.problems.placement", "PlacementProblem"),
    "BcastProblem": ("topoplan.problems.bcast", "BcastProblem"),
    "solve": ("topoplan.problems", "solve"),
    "validate": ("topoplan.plans.validate", "validate"),
    "simulate": ("topoplan.sim.run", "simulate_plan"),
    "SimModel": ("topoplan.sim.simmodel", "SimModel"),
    "PlanResult": ("topoplan.problems.result", "PlanResult"),
    "TopoplanError": ("topoplan.core.errors", "TopoplanError"),
}

__all__ = ["load_topology", "load_source", "load_traffic", "CircuitProblem", "PlacementProblem", "BcastProblem",
           "solve", "validate", "simulate", "SimModel", "PlanResult", "TopoplanError"]


def __getattr__(name: str):
    if name in _API:
        module, attr = _API[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'topoplan' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + __all__)
