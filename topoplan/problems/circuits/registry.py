"""The registry of circuit methods: a leaf module (it imports no method; each method registers itself).

:mod:`topoplan.problems.circuits.heuristics` (``none``, ``sp``, ``three-step``, ``greedy``, ``matching``),
:mod:`topoplan.problems.circuits.anneal` and :mod:`topoplan.problems.circuits.exact` (``ilp``) add their functions with
``@METHODS.register(name)``; importing :mod:`topoplan.problems.circuits` imports them all.
"""

from topoplan.problems.result import Registry

METHODS = Registry("circuits")

# The papers' heuristics and the matching baseline: the starts anneal picks from (with ``none``).
HEURISTICS = ("sp", "three-step", "greedy", "matching")

# The heuristics each method starts from: with score='simulated' their plans compete with the method's.
STARTS = {"ilp": HEURISTICS + ("none",), "anneal": HEURISTICS + ("none",)}

__all__ = ["METHODS", "HEURISTICS", "STARTS"]
