"""The three planning problems and what they share.

``topoplan.problems.circuits`` (circuit assignment and forwarding tables),
``topoplan.problems.placement`` (process placement) and
``topoplan.problems.bcast`` (Bcast rank reordering) each have a ``build``
function, a method registry and a ``solve`` function returning a
:class:`~topoplan.problems.result.PlanResult`; :func:`solve` dispatches on the
problem's type. :mod:`topoplan.plans.validate` checks plan documents.

Examples
--------
>>> from topoplan.core.topology_io import load_topology
>>> from topoplan.traffic.sources import load_traffic
>>> from topoplan.problems.placement import PlacementProblem
>>> p = PlacementProblem.build(load_topology("paper003"), load_traffic("ring:np=8,bytes=1MB"))
>>> solve(p, "sequential").method
'sequential'
"""

from __future__ import annotations

from topoplan.core.errors import TopoplanError

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
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.sources import load_traffic
    >>> from topoplan.problems.circuits import CircuitProblem
    >>> p = CircuitProblem.build(load_topology("paper003"), load_traffic("ring:np=64,bytes=4MB"))
    >>> solve(p, "none").plan["circuits"]
    []
    """
    kind = type(problem).__name__
    modules = {"CircuitProblem": "topoplan.problems.circuits", "PlacementProblem": "topoplan.problems.placement",
               "BcastProblem": "topoplan.problems.bcast"}
    if kind not in modules:
        raise TopoplanError(f"field 'problem': expected a CircuitProblem, PlacementProblem or BcastProblem, got {kind}")
    import importlib

    mod = importlib.import_module(modules[kind])
    return mod.solve(problem, method, **options) if method is not None else mod.solve(problem, **options)
