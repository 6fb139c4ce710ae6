"""Process placement: methods that map MPI ranks to nodes and cores (``topoplan place``).

>>> from planner.placement_methods import METHODS
>>> sorted(METHODS)[:4]
['anneal', 'greedy', 'ilp', 'joint']

See :mod:`planner.placement_methods.problem` (problem, ``solve``, metrics),
:mod:`~planner.placement_methods.basic` (sequential, round-robin, random),
:mod:`~planner.placement_methods.metis` (the papers' CommPattern placement),
:mod:`~planner.placement_methods.greedy`, :mod:`~planner.placement_methods.anneal`,
:mod:`~planner.placement_methods.joint` (placement + circuits) and
:mod:`models.placement_milp` (exact model).
"""

from planner.placement_methods.problem import (METHODS, OBJECTIVES, PlacementProblem, placement_metrics,
                                               result_from, simulated_time, solve, to_placement)

__all__ = ["METHODS", "OBJECTIVES", "PlacementProblem", "placement_metrics", "result_from", "simulated_time",
           "solve", "to_placement"]
