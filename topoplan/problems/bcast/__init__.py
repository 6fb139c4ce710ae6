"""Topology- and speed-aware MPI_Bcast rank reordering (paper 002): ``topoplan bcast``.

>>> from topoplan.problems.bcast import METHODS
>>> list(METHODS)
['default', 'dft', 'bft', 'greedy', 'anneal', 'ilp']
>>> METHODS.options("anneal")
('init', 'max_steps', 't0')
"""

from topoplan.problems.bcast.problem import BcastProblem, solve, validate_plan
from topoplan.problems.bcast.registry import METHODS, STARTS

# ``ilp`` registers itself in METHODS when imported (after the methods of topoplan.problems.bcast.problem).
from topoplan.problems.bcast import exact  # noqa: E402,F401,I001

#: The problem's builder, the same shape for every problem: ``build(topology, traffic, placement=None, **options)``
#: (for a Bcast the traffic is the Bcast itself, described by options; the placement is the allocation).
build = BcastProblem.build

__all__ = ["METHODS", "STARTS", "BcastProblem", "build", "solve", "validate_plan"]
