"""Circuit assignment and forwarding tables for hybrid EPS/OCS networks.

>>> from topoplan.problems.circuits import CircuitProblem, solve, METHODS
>>> sorted(METHODS)
['anneal', 'greedy', 'ilp', 'matching', 'none', 'sp', 'three-step']
>>> METHODS.options("anneal")
('init', 'max_steps', 't0', 't1', 'energy', 'trace', 'sim_model')

See :mod:`topoplan.problems.circuits.problem` (problem, ``solve``, validation),
:mod:`topoplan.problems.circuits.registry` (the registry ``METHODS``, ``STARTS``),
:mod:`topoplan.problems.circuits.heuristics` (sp, three-step, greedy, matching, none),
:mod:`topoplan.problems.circuits.anneal`, :mod:`topoplan.problems.circuits.exact` (``ilp``),
:mod:`topoplan.problems.circuits.forwarding` (distance-vector tables, routes),
:mod:`topoplan.problems.circuits.bound` (the communication-time bound),
:mod:`topoplan.plans.planfile` (plan JSON); the exact models are :mod:`topoplan.formulations.circuits_node` and
:mod:`topoplan.formulations.circuits_switch`.
"""

from topoplan.problems.circuits.problem import CircuitProblem, solve, validate_plan, validate_plan_dict
from topoplan.problems.circuits.registry import HEURISTICS, METHODS, STARTS

# The methods register themselves in METHODS when their module is imported, which METHODS does when a method is
# first asked for (the registry names each method's module): a greedy plan does not import the exact model's
# solvers.

#: The problem's builder, the same shape for every problem: ``build(topology, traffic, placement=None, **options)``.
build = CircuitProblem.build


def uses_steps(method: str) -> bool:
    """Whether ``method`` plans on an application's steps when the problem is built with them (``build(...,
    steps=)``), the same question for every problem: every circuit method does (on a trace, the step time is
    their objective).

    Examples
    --------
    >>> uses_steps("greedy"), uses_steps("ilp")
    (True, True)
    """
    return True


__all__ = ["CircuitProblem", "build", "solve", "uses_steps", "METHODS", "HEURISTICS", "STARTS", "validate_plan",
           "validate_plan_dict"]
