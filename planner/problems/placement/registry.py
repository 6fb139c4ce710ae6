"""The registry of placement methods: a leaf module (it imports no method; each method registers itself).

:mod:`~planner.problems.placement.basic` (``sequential``, ``round-robin``, ``random``),
:mod:`~planner.problems.placement.metis` (``metis``, ``kahip``, ``scotch``),
:mod:`~planner.problems.placement.greedy`, :mod:`~planner.problems.placement.anneal`,
:mod:`~planner.problems.placement.exact` (``ilp``) and :mod:`~planner.problems.placement.joint`
add their functions with ``@METHODS.register(name)``; importing :mod:`planner.problems.placement`
imports them all.
"""

from planner.problems.result import Registry

METHODS = Registry("placement")

# The heuristics each method starts from: with score='simulated' their placements compete with the method's
# (joint compares its own start, place-then-assign, inside).
STARTS = {"anneal": ("metis", "greedy"), "ilp": ("metis", "greedy")}

__all__ = ["METHODS", "STARTS"]
