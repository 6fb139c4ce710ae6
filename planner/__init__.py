"""topoplan: a planning engine for HPC interconnects.

Hybrid EPS/OCS networks (circuit assignment with forwarding tables), process
placement and topology-aware MPI_Bcast reordering, each solved by the papers'
heuristics, exactly and by local search, and scored by a flow-level simulator.

The public API (imported on first use, so ``import planner`` stays light):

- ``load_topology(spec, sets=())``: a preset, YAML file or Slurm topology.conf.
- ``load_source(spec)`` -> ``(trace or None, traffic)``; ``load_traffic(spec)``: generator specs, matrices, traces.
- ``CircuitProblem``, ``PlacementProblem``, ``BcastProblem``: ``Problem.build(topology, traffic, placement=None, **options)``.
- ``solve(problem, method, *, time_limit=None, seed=0, score="bound", **options)`` -> ``PlanResult``.
- ``validate(plan, topology)``: check a plan document (circuits, placement, Bcast order).
- ``simulate(topology, trace, plan=None, *, placement=None, model=None)``: the simulator's result dict.
- ``SimModel``: the network model (``maxmin`` or ``paper``; ``pipelined`` or ``store-and-forward`` relays).
- ``PlanResult``, ``TopoplanError``.

Subpackages: ``planner.core`` (topology, placement, units, I/O, errors),
``planner.traffic`` (traces, matrices, generators, NPB, MPI collectives),
``planner.problems`` (the three planning problems, the result type, validation),
``planner.analysis`` (switch traffic, link loads, all-to-all bounds, cost),
``planner.fabric`` (InfiniBand readers and the route service),
``planner.reporting`` (HTML report, launcher exports), ``planner.batch`` (sweeps),
``planner.cli`` (the command line); the simulator is the ``sim`` package and
the exact formulations and solver back-ends the ``models`` package.

Examples
--------
>>> import planner
>>> topo = planner.load_topology("paper003")
>>> trace, traffic = planner.load_source("neighbor2d:rows=16,cols=16,bytes=4MB,iters=1")
>>> problem = planner.CircuitProblem.build(topo, traffic)
>>> result = planner.solve(problem, "greedy")
>>> planner.validate(result.to_dict(), topo)["checked"][0]
'circuit plan: 12 circuits, 192 forwarding entries'
>>> sim = planner.simulate(topo, trace, result.to_dict())
>>> round(sim["makespan_s"] / result.objective, 3)   # the plan runs at its bound (pipelined relays)
1.0
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_API = {
    "load_topology": ("planner.core.topology_io", "load_topology"),
    "load_source": ("planner.traffic.matrix", "load_source"),
    "load_traffic": ("planner.traffic.matrix", "load_traffic"),
    "CircuitProblem": ("planner.problems.circuits", "CircuitProblem"),
    "PlacementProblem": ("planner.problems.placement", "PlacementProblem"),
    "BcastProblem": ("planner.problems.bcast", "BcastProblem"),
    "solve": ("planner.problems", "solve"),
    "validate": ("planner.problems.validate", "validate"),
    "simulate": ("sim.run", "simulate_plan"),
    "SimModel": ("sim.model", "SimModel"),
    "PlanResult": ("planner.problems.result", "PlanResult"),
    "TopoplanError": ("planner.core.errors", "TopoplanError"),
}

__all__ = ["load_topology", "load_source", "load_traffic", "CircuitProblem", "PlacementProblem", "BcastProblem",
           "solve", "validate", "simulate", "SimModel", "PlanResult", "TopoplanError"]


def __getattr__(name: str):
    if name in _API:
        module, attr = _API[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'planner' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + __all__)
