"""The registry of placement methods: a leaf module (it imports no method; each method registers itself).

:mod:`~topoplan.problems.placement.basic` (``sequential``, ``round-robin``, ``random``),
:mod:`~topoplan.problems.placement.metis` (``metis``, ``kahip``, ``scotch``),
:mod:`~topoplan.problems.placement.greedy`, :mod:`~topoplan.problems.placement.anneal`,
:mod:`~topoplan.problems.placement.exact` (``ilp``) and :mod:`~topoplan.problems.placement.joint`
add their functions with ``@METHODS.register(name)``. The registry names each method's module, and a module
is imported when one of its methods is first asked for (``METHODS["metis"]``): ``place -m metis`` does not
import the exact model's solvers or the circuits that ``joint`` plans.

Examples
--------
>>> STARTS["anneal"][:2], STARTS["anneal"] == STARTS["ilp"]
(('metis', 'greedy'), True)
>>> ("kahip" in STARTS["ilp"]) == (missing_extra("kahip") is None)   # kahip: where installed (its extra)
True
"""

import shutil

from topoplan.core.extras import missing_extra
from topoplan.problems.result import Registry

_P = "topoplan.problems.placement."
METHODS = Registry("placement", modules={
    "sequential": _P + "basic", "round-robin": _P + "basic", "random": _P + "basic",
    "metis": _P + "metis", "kahip": _P + "metis", "scotch": _P + "metis",
    "greedy": _P + "greedy", "anneal": _P + "anneal", "ilp": _P + "exact", "joint": _P + "joint"})


def _peers() -> tuple[str, ...]:
    """The peer partitioners installed here."""
    kahip = ("kahip",) if missing_extra("kahip") is None else ()
    scotch = ("scotch",) if (shutil.which("gpart") or shutil.which("scotch_gpart")) else ()
    return kahip + scotch


#: Every partitioner and constructive heuristic available here: ``anneal`` and ``ilp`` start from the
#: best of them on the problem's objective (their default ``init``; KaHIP only up to
#: :data:`~topoplan.problems.placement.problem.KAHIP_START_MAX_EDGES` rank pairs, see
#: :func:`~topoplan.problems.placement.problem.default_starts`).
PARTITIONER_STARTS = ("metis", "greedy") + _peers()

# The heuristics each method starts from: with score='simulated' their placements compete with the method's
# (joint compares its own start, place-then-assign, inside).
STARTS = {"anneal": PARTITIONER_STARTS, "ilp": PARTITIONER_STARTS}

__all__ = ["METHODS", "STARTS", "PARTITIONER_STARTS"]
