"""Circuit assignment and forwarding tables for hybrid EPS/OCS networks (issue 4).

>>> from planner.problems.circuits import CircuitProblem, solve, METHODS
>>> sorted(METHODS)
['anneal', 'greedy', 'ilp', 'matching', 'none', 'sp', 'three-step']
>>> METHODS.options("anneal")
('init', 'max_steps', 't0', 't1', 'energy', 'trace', 'sim_model')

See :mod:`planner.problems.circuits.problem` (problem, ``solve``, validation),
:mod:`planner.problems.circuits.registry` (the registry ``METHODS``, ``STARTS``),
:mod:`planner.problems.circuits.heuristics` (sp, three-step, greedy, matching, none),
:mod:`planner.problems.circuits.anneal`, :mod:`planner.problems.circuits.exact` (``ilp``),
:mod:`planner.problems.circuits.forwarding` (distance-vector tables, routes),
:mod:`planner.problems.circuits.bound` (the communication-time bound),
:mod:`planner.problems.circuits.planfile` (plan JSON); the exact models are :mod:`models.circuits_node` and
:mod:`models.circuits_switch`.
"""

from planner.problems.circuits.problem import CircuitProblem, solve, validate_plan, validate_plan_dict
from planner.problems.circuits.registry import HEURISTICS, METHODS, STARTS

# The methods register themselves in METHODS when imported (order: the registry's listing order).
from planner.problems.circuits import heuristics, exact, anneal  # noqa: E402,F401,I001

#: The problem's builder, the same shape for every problem: ``build(topology, traffic, placement=None, **options)``.
build = CircuitProblem.build

__all__ = ["CircuitProblem", "build", "solve", "METHODS", "HEURISTICS", "STARTS", "validate_plan",
           "validate_plan_dict"]
