"""The three planning problems and what they share.

``planner.problems.circuits`` (circuit assignment and forwarding tables),
``planner.problems.placement`` (process placement) and
``planner.problems.bcast`` (Bcast rank reordering) each have a ``build``
function, a method registry and a ``solve`` function returning a
:class:`~planner.problems.result.PlanResult`; :func:`solve` dispatches on the
problem's type. :mod:`planner.problems.validate` checks plan documents.

Examples
--------
>>> from planner.core.topology_io import load_topology
>>> from planner.traffic.matrix import load_traffic
>>> from planner.problems.placement import PlacementProblem
>>> p = PlacementProblem.build(load_topology("paper003"), load_traffic("ring:np=8,bytes=1MB"))
>>> solve(p, "sequential").method
'sequential'
"""

from __future__ import annotations

__all__ = ["solve"]


def solve(problem, method: str | None = None, **options):
    """Solve ``problem`` (a circuit, placement or Bcast problem) with ``method`` of its registry.

    Parameters
    ----------
    problem : CircuitProblem, PlacementProblem or BcastProblem.
    method : a method of the problem's registry (default: the problem's default method).
    options : ``time_limit``, ``seed``, ``score``, ... and the method's options.

    Returns
    -------
    PlanResult

    Examples
    --------
    >>> from planner.core.topology_io import load_topology
    >>> from planner.traffic.matrix import load_traffic
    >>> from planner.problems.circuits import CircuitProblem
    >>> p = CircuitProblem.build(load_topology("paper003"), load_traffic("ring:np=64,bytes=4MB"))
    >>> solve(p, "none").plan["circuits"]
    []
    """
    from planner.core.errors import TopoplanError

    kind = type(problem).__name__
    modules = {"CircuitProblem": "planner.problems.circuits", "PlacementProblem": "planner.problems.placement",
               "BcastProblem": "planner.problems.bcast"}
    if kind not in modules:
        raise TopoplanError(f"field 'problem': expected a CircuitProblem, PlacementProblem or BcastProblem, got {kind}")
    import importlib

    mod = importlib.import_module(modules[kind])
    return mod.solve(problem, method, **options) if method is not None else mod.solve(problem, **options)
