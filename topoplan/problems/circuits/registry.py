"""The registry of circuit methods: a leaf module (it imports no method; each method registers itself).

:mod:`topoplan.problems.circuits.heuristics` (``none``, ``sp``, ``three-step``, ``greedy``, ``matching``),
:mod:`topoplan.problems.circuits.anneal` and :mod:`topoplan.problems.circuits.exact` (``ilp``) add their functions with
``@METHODS.register(name)``. The registry names each method's module, and a module is imported when one of
its methods is first asked for (``METHODS["greedy"]``): ``circuits -m greedy`` does not import the exact
model's solvers, and a plan on a matrix does not import SciPy.
"""

from topoplan.problems.result import Registry

_C = "topoplan.problems.circuits."
METHODS = Registry("circuits", modules={
    "none": _C + "heuristics", "sp": _C + "heuristics", "three-step": _C + "heuristics", "greedy": _C + "heuristics",
    "matching": _C + "heuristics", "ilp": _C + "exact", "anneal": _C + "anneal"})

# The papers' heuristics and the matching baseline: the starts anneal picks from (with ``none``).
HEURISTICS = ("sp", "three-step", "greedy", "matching")

# The heuristics each method starts from: with score='simulated' their plans compete with the method's.
STARTS = {"ilp": HEURISTICS + ("none",), "anneal": HEURISTICS + ("none",)}

__all__ = ["METHODS", "HEURISTICS", "STARTS"]
