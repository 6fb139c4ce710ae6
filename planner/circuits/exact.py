"""``ilp``: the exact circuit model of :mod:`models.circuits_milp` as a circuit method.

The model (node or switch formulation, or the LP bound) and its decoding live in
:mod:`models.circuits_milp`; this module only declares the method and its options.
"""

from __future__ import annotations

from models import circuits_milp
from planner.circuits.registry import METHODS
from planner.result import PlanResult


@METHODS.register("ilp")
def ilp(problem, *, time_limit=None, seed=0, solver: str = "cbc", formulation: str = "auto",
        objective: str = "lexicographic", threads: int | None = None, pairs: str = "auto") -> PlanResult:
    """The exact model: best plan found, proven bound and gap (see :func:`models.circuits_milp.solve_exact`).

    Parameters
    ----------
    problem : :class:`planner.circuits.CircuitProblem`.
    time_limit : seconds for the solver (None: until proven).
    seed : solver seed (and the heuristics' seed for the incumbents).
    solver : MILP back-end: ``cbc``, ``highs``, ``ortools`` or ``gurobi``.
    formulation : ``auto``, ``node`` (exact tables), ``switch`` (aggregated) or ``lp`` (bound only).
    objective : ``lexicographic`` (the bound, then uplink bytes) or ``weighted``.
    threads : solver threads (None: the back-end's default).
    pairs : switch formulation: switch pairs that may get circuits, ``auto``, ``all`` or ``traffic``.
    """
    return circuits_milp.solve_exact(problem, time_limit=time_limit, seed=seed, solver=solver,
                                     formulation=formulation, objective=objective, threads=threads, pairs=pairs)
