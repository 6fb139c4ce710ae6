"""The registry of placement methods: a leaf module (it imports no method; each method registers itself).

:mod:`~planner.placement_methods.basic` (``sequential``, ``round-robin``, ``random``),
:mod:`~planner.placement_methods.metis` (``metis``, ``kahip``, ``scotch``),
:mod:`~planner.placement_methods.greedy`, :mod:`~planner.placement_methods.anneal`,
:mod:`~planner.placement_methods.exact` (``ilp``) and :mod:`~planner.placement_methods.joint`
add their functions with ``@METHODS.register(name)``; importing :mod:`planner.placement_methods`
imports them all.
"""

from planner.result import Registry

METHODS = Registry("placement")

# The heuristics each method starts from: with score='simulated' their placements compete with the method's
# (joint compares its own start, place-then-assign, inside).
STARTS = {"anneal": ("metis", "greedy"), "ilp": ("metis", "greedy")}

__all__ = ["METHODS", "STARTS"]
