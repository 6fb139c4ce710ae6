"""``ilp``: exact Bcast reordering -- the problem's side of the CP-SAT model.

The model (:mod:`models.bcast_cpsat`) reads plain arrays; this module declares the method and its
options, turns a :class:`~planner.problems.bcast.problem.BcastProblem` into the model's data (cost matrices,
the tree's sends, the allgather steps, the best heuristic as hint), solves it with
``models.backends.solve(..., "cpsat")`` and turns the assignment into a result.

Examples
--------
>>> from planner.problems.bcast import BcastProblem, solve
>>> from planner.problems.bcast.allocation import cluster
>>> p = BcastProblem.build(cluster(4, 4), placement=list(range(0, 16, 2)), root=0, bytes_B=1024, tree="binomial")
>>> r = solve(p, "ilp", time_limit=20, simulate=False)
>>> r.status, r.plan["order"][0], r.objective <= solve(p, "bft", simulate=False).objective
('optimal', 0, True)
"""

from __future__ import annotations

import numpy as np

from models import bcast_cpsat
from models.backends import Deferred
from models.backends import solve as backend_solve
from planner.problems.bcast.problem import BcastProblem, _heuristic_assign, _result, _start_names
from planner.problems.bcast.registry import METHODS
from planner.problems.result import PlanResult, module_missing

__all__ = ["ilp", "solve_exact", "bcast_data"]


@METHODS.register("ilp", requires=module_missing("ortools", "pip install ortools"))
def ilp(problem: BcastProblem, *, time_limit=None, seed=0, init: str | tuple = ("dft", "bft", "greedy"),
        threads: int = 2, resolution: float = 1e6) -> PlanResult:
    """Exact CP-SAT model (:mod:`models.bcast_cpsat`): minimizes the latest arrival, with bound and gap.

    Parameters
    ----------
    problem : :class:`BcastProblem`.
    time_limit : seconds for CP-SAT (None: until proven).
    seed : solver seed.
    init : heuristic(s) whose best assignment is the solver's hint (default: the best of dft, bft, greedy).
    threads : CP-SAT search workers.
    resolution : time grid of the model: the largest edge cost over ``resolution`` (finer is slower).

    Returns
    -------
    PlanResult with status ``optimal`` or ``timeout`` and the CP-SAT bound.

    Examples
    --------
    >>> from planner.problems.bcast.allocation import cluster
    >>> p = BcastProblem.build(cluster(4, 4), placement=list(range(0, 16, 2)), root=0, bytes_B=1024, tree="binomial")
    >>> ilp(p, time_limit=20).status
    'optimal'
    """
    warm, warm_t = None, np.inf
    for name in _start_names(init):
        a = _heuristic_assign(problem, name)
        t = problem.model.time(a)
        if t < warm_t:
            warm, warm_t = a, t
    out = solve_exact(problem, time_limit=time_limit, seed=seed, hint=warm, resolution=resolution, threads=threads)
    res = _result(problem, out["assign"], status=out["status"], bound=out["bound"],
                  solver="cp-sat", classes=out["classes"])
    res.message = out.get("message", "")
    return res


def bcast_data(problem: BcastProblem, *, hint=None, resolution: float = 1e6) -> bcast_cpsat.BcastData:
    """The arrays of ``problem`` the CP-SAT model reads (``hint``: a node per tree position, or None).

    Parameters
    ----------
    problem : :class:`BcastProblem`; hint : warm start or None; resolution : the model's time grid.

    Returns
    -------
    :class:`models.bcast_cpsat.BcastData`

    Examples
    --------
    >>> from planner.problems.bcast.allocation import cluster
    >>> p = BcastProblem.build(cluster(4, 4), placement=list(range(0, 16, 2)), root=0, bytes_B=1024, tree="binomial")
    >>> d = bcast_data(p)
    >>> d.root, len(d.parent)
    (0, 7)
    """
    e = problem.schedule.edges
    return bcast_cpsat.BcastData(latency_s=problem.costs.latency_s, inv_bw_s_per_B=problem.costs.inv_bw_s_per_B,
                                 root=int(problem.root), parent=e["parent"], child=e["child"], bytes_B=e["bytes"],
                                 allgather=problem.schedule.allgather_pairs(),
                                 hint=None if hint is None else np.asarray(hint), resolution=float(resolution))


def solve_exact(problem: BcastProblem, *, time_limit=None, seed=0, hint=None, resolution: float = 1e6,
                threads: int = 2) -> dict:
    """Solve ``problem`` exactly.

    Parameters
    ----------
    problem : :class:`BcastProblem`; time_limit : seconds (None: until proven); seed : solver seed;
    hint : warm start (node per position) or None; resolution : the model's time grid; threads : workers.

    Returns
    -------
    dict with ``assign`` (position -> local node index), ``status``
    (optimal|timeout), ``bound`` (seconds), ``classes`` (count) and ``message``.
    Without a solution in the time limit: the ``hint`` (a feasible heuristic order), no bound.

    Examples
    --------
    >>> from planner.problems.bcast.allocation import cluster
    >>> p = BcastProblem.build(cluster(4, 4), placement=list(range(0, 16, 2)), root=0, bytes_B=1024, tree="binomial")
    >>> out = solve_exact(p, time_limit=20)
    >>> out["status"], len(out["assign"])
    ('optimal', 8)
    """
    data = bcast_data(problem, hint=hint, resolution=resolution)
    r = backend_solve(Deferred(bcast_cpsat.build, data), "cpsat", time_limit=time_limit, seed=int(seed or 0),
                      threads=threads)
    if r.values is None:
        # no solution in time: fall back to the hint (a feasible heuristic order)
        classes = int(bcast_cpsat.node_classes(data.latency_s, data.inv_bw_s_per_B, fixed=data.root).max()) + 1
        return {"assign": np.asarray(hint), "status": "timeout", "bound": None, "classes": classes,
                "message": "CP-SAT found no solution in the time limit; returning the heuristic warm start"}
    sol = r.values
    bound = None if r.bound is None else float(r.bound) * sol.unit
    status = "optimal" if r.status == "optimal" else "timeout"
    msg = "" if status == "optimal" else "time limit reached: best feasible order with CP-SAT's bound"
    return {"assign": sol.assign, "status": status, "bound": bound, "classes": sol.classes, "message": msg}
