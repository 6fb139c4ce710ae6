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


def uses_steps(method: str) -> bool:
    """Whether ``method`` plans on an application's steps when the problem is built with them, the same question
    for every problem: no Bcast method does (a Bcast is its own traffic).

    Examples
    --------
    >>> uses_steps("bft")
    False
    """
    return False


__all__ = ["METHODS", "STARTS", "BcastProblem", "build", "solve", "uses_steps", "validate_plan"]
