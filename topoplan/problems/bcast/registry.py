"""The registry of Bcast reordering methods: a leaf module (it imports no method; each registers itself).

:mod:`topoplan.problems.bcast.problem` registers ``default``, ``dft``, ``bft``, ``greedy`` and ``anneal``, and
:mod:`topoplan.problems.bcast.exact` registers ``ilp``, with ``@METHODS.register(name)``; importing
:mod:`topoplan.problems.bcast` imports both.
"""

from topoplan.problems.result import Registry

METHODS = Registry("bcast")

# The heuristics each method starts from: with score='simulated' their orders compete with the method's.
STARTS = {"anneal": ("default", "dft", "bft", "greedy"), "ilp": ("default", "dft", "bft", "greedy")}

__all__ = ["METHODS", "STARTS"]
