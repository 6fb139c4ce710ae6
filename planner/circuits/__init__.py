"""Circuit assignment and forwarding tables for hybrid EPS/OCS networks (issue 4).

>>> from planner.circuits import CircuitProblem, solve, METHODS
>>> sorted(METHODS)
['anneal', 'greedy', 'ilp', 'matching', 'none', 'sp', 'three-step']

See :mod:`planner.circuits.problem` (problem, ``solve``, validation),
:mod:`planner.circuits.heuristics` (sp, three-step, greedy, matching, none),
:mod:`planner.circuits.anneal`, :mod:`planner.circuits.forwarding`
(distance-vector tables, routes), :mod:`planner.circuits.bound` (the
communication-time bound), :mod:`planner.circuits.planfile` (plan JSON) and
:mod:`models.circuits_milp` (the exact model).
"""

from planner.circuits.problem import (HEURISTICS, METHODS, CircuitProblem, solve, validate_plan,
                                      validate_plan_dict)

__all__ = ["CircuitProblem", "solve", "METHODS", "HEURISTICS", "validate_plan", "validate_plan_dict"]
