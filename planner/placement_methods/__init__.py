"""Process placement: methods that map MPI ranks to nodes and cores (``topoplan place``).

>>> from planner.placement_methods import METHODS
>>> sorted(METHODS)[:4]
['anneal', 'greedy', 'ilp', 'joint']
>>> METHODS.options("anneal")
('init', 'batch', 'max_steps', 't0', 'cycles')

See :mod:`planner.placement_methods.problem` (problem, ``solve``, metrics),
:mod:`~planner.placement_methods.registry` (the registry ``METHODS``, ``STARTS``),
:mod:`~planner.placement_methods.basic` (sequential, round-robin, random),
:mod:`~planner.placement_methods.metis` (the papers' CommPattern placement),
:mod:`~planner.placement_methods.greedy`, :mod:`~planner.placement_methods.anneal`,
:mod:`~planner.placement_methods.exact` (``ilp``, the model in :mod:`models.placement_cpsat`) and
:mod:`~planner.placement_methods.joint` (placement + circuits).
"""

from planner.placement_methods.problem import (OBJECTIVES, PlacementProblem, placement_metrics, result_from,
                                               simulated_time, solve, to_placement)
from planner.placement_methods.registry import METHODS, STARTS

# The methods register themselves in METHODS when imported (order: the registry's listing order).
from planner.placement_methods import basic, metis, greedy, anneal, exact, joint  # noqa: E402,F401,I001

#: The problem's builder, the same shape for every problem: ``build(topology, traffic, placement=None, **options)``.
build = PlacementProblem.build

__all__ = ["METHODS", "STARTS", "OBJECTIVES", "PlacementProblem", "build", "placement_metrics", "result_from",
           "simulated_time", "solve", "to_placement"]
