"""Process placement: methods that map MPI ranks to nodes and cores (``topoplan place``).

>>> from topoplan.problems.placement import METHODS
>>> sorted(METHODS)[:4]
['anneal', 'greedy', 'ilp', 'joint']
>>> METHODS.options("anneal")
('init', 'batch', 'max_steps', 't0', 'cycles')

See :mod:`topoplan.problems.placement.problem` (problem, ``solve``, metrics),
:mod:`~topoplan.problems.placement.registry` (the registry ``METHODS``, ``STARTS``),
:mod:`~topoplan.problems.placement.basic` (sequential, round-robin, random),
:mod:`~topoplan.problems.placement.metis` (the papers' CommPattern placement),
:mod:`~topoplan.problems.placement.greedy`, :mod:`~topoplan.problems.placement.anneal`,
:mod:`~topoplan.problems.placement.exact` (``ilp``, the model in :mod:`topoplan.formulations.placement_cpsat`) and
:mod:`~topoplan.problems.placement.joint` (placement + circuits).
"""

from topoplan.problems.placement.problem import (OBJECTIVES, PlacementProblem, placement_metrics, result_from,
                                               simulated_time, solve, to_placement)
from topoplan.problems.placement.registry import METHODS, STARTS

# The methods register themselves in METHODS when their module is imported, which METHODS does when a method is
# first asked for (a command imports what its method needs).

#: The problem's builder, the same shape for every problem: ``build(topology, traffic, placement=None, **options)``.
build = PlacementProblem.build


def uses_steps(method: str) -> bool:
    """Whether ``method`` plans on an application's steps when the problem is built with them (``build(...,
    steps=)``), the same question for every problem: ``joint`` does, for its circuits.

    Examples
    --------
    >>> uses_steps("joint"), uses_steps("metis")
    (True, False)
    """
    return method == "joint"


__all__ = ["METHODS", "STARTS", "OBJECTIVES", "PlacementProblem", "build", "placement_metrics", "result_from",
           "simulated_time", "solve", "to_placement", "uses_steps"]
