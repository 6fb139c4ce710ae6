"""Circuit assignment and forwarding tables for hybrid EPS/OCS networks (issue 4).

>>> from planner.circuits import CircuitProblem, solve, METHODS
>>> sorted(METHODS)
['anneal', 'greedy', 'ilp', 'matching', 'none', 'sp', 'three-step']
>>> METHODS.options("anneal")
('init', 'max_steps', 't0', 't1', 'energy', 'trace', 'sim_model')

See :mod:`planner.circuits.problem` (problem, ``solve``, validation),
:mod:`planner.circuits.registry` (the registry ``METHODS``, ``STARTS``),
:mod:`planner.circuits.heuristics` (sp, three-step, greedy, matching, none),
:mod:`planner.circuits.anneal`, :mod:`planner.circuits.exact` (``ilp``),
:mod:`planner.circuits.forwarding` (distance-vector tables, routes),
:mod:`planner.circuits.bound` (the communication-time bound),
:mod:`planner.circuits.planfile` (plan JSON); the exact models are :mod:`models.circuits_node` and
:mod:`models.circuits_switch`.
"""

from planner.circuits.problem import CircuitProblem, solve, validate_plan, validate_plan_dict
from planner.circuits.registry import HEURISTICS, METHODS, STARTS

# The methods register themselves in METHODS when imported (order: the registry's listing order).
from planner.circuits import heuristics, exact, anneal  # noqa: E402,F401,I001

#: The problem's builder, the same shape for every problem: ``build(topology, traffic, placement=None, **options)``.
build = CircuitProblem.build

__all__ = ["CircuitProblem", "build", "solve", "METHODS", "HEURISTICS", "STARTS", "validate_plan",
           "validate_plan_dict"]
