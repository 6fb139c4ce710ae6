"""``ilp``: exact Bcast reordering -- the problem's side of the CP-SAT model.

The model (:mod:`topoplan.formulations.bcast_cpsat`) reads plain arrays; this module declares the method and its
options, turns a :class:`~topoplan.problems.bcast.problem.BcastProblem` into the model's data (cost matrices,
the tree's sends, the allgather steps, the best heuristic as hint), solves it with
``topoplan.formulations.backends.solve(..., "cpsat")`` and turns the assignment into a result.

Examples
--------
>>> from topoplan.problems.bcast import BcastProblem, solve
>>> from topoplan.problems.bcast.allocation import cluster
>>> p = BcastProblem.build(cluster(4, 4), placement=list(range(0, 16, 2)), root=0, bytes_B=1024, tree="binomial")
>>> r = solve(p, "ilp", time_limit=20, simulate=False)
>>> r.status, r.plan["order"][0], r.objective <= solve(p, "bft", simulate=False).objective
('optimal', 0, True)
"""

from __future__ import annotations

import numpy as np

from topoplan.formulations import bcast_cpsat
from topoplan.formulations.backends import Deferred
from topoplan.formulations.backends import solve as backend_solve
from topoplan.problems.bcast.problem import BcastProblem, _heuristic_assign, _result, _start_names
from topoplan.problems.bcast.registry import METHODS
from topoplan.problems.result import PlanResult, module_missing

__all__ = ["CPSAT_ENTRIES_PER_S", "ilp", "solve_exact", "bcast_data", "model_size", "root_bound"]


@METHODS.register("ilp", requires=module_missing("ortools", "pip install ortools"))
def ilp(problem: BcastProblem, *, time_limit=None, seed=0, init: str | tuple = ("dft", "bft", "greedy"),
        threads: int = 2, resolution: float = 1e6) -> PlanResult:
    """Exact CP-SAT model (:mod:`topoplan.formulations.bcast_cpsat`): minimizes the latest arrival, with bound and gap.

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
    >>> from topoplan.problems.bcast.allocation import cluster
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
    :class:`topoplan.formulations.bcast_cpsat.BcastData`

    Examples
    --------
    >>> from topoplan.problems.bcast.allocation import cluster
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


# CP-SAT expands every element constraint over the m x m class-pair table in presolve: measured
# ~4.3 M table entries (1,023 sends x 65^2 classes, 1,024 leaders) in ~20 s of presolve and 5.4 GB, past
# any stop request. About 200,000 entries per second of the time limit, with room for the search.
CPSAT_ENTRIES_PER_S = 200_000


def model_size(data: bcast_cpsat.BcastData) -> tuple[int, int]:
    """How large the CP-SAT model of ``data`` is: (class-pair table entries, node classes).

    Parameters
    ----------
    data : :class:`topoplan.formulations.bcast_cpsat.BcastData`

    Returns
    -------
    tuple of int
        Entries ``(sends + allgather pairs) x classes^2``, and the number of classes.

    Examples
    --------
    >>> from topoplan.problems.bcast.allocation import cluster
    >>> p = BcastProblem.build(cluster(4, 4), placement=list(range(0, 16, 2)), root=0, bytes_B=1024, tree="binomial")
    >>> model_size(bcast_data(p))
    (175, 5)
    """
    m = int(bcast_cpsat.node_classes(data.latency_s, data.inv_bw_s_per_B, fixed=data.root).max()) + 1
    pairs = len(data.child) + sum(len(src) for src, _, _, _ in data.allgather)
    return pairs * m * m, m


def root_bound(data: bcast_cpsat.BcastData) -> float:
    """A lower bound on the Bcast time without a model: the root's sends go one after another, each
    at least the cheapest link's cost for its size.

    Parameters
    ----------
    data : :class:`topoplan.formulations.bcast_cpsat.BcastData`

    Returns
    -------
    float
        Seconds.

    Examples
    --------
    >>> from topoplan.problems.bcast.allocation import cluster
    >>> p = BcastProblem.build(cluster(4, 4), placement=list(range(0, 16, 2)), root=0, bytes_B=1024, tree="binomial")
    >>> 0 < root_bound(bcast_data(p)) <= solve_exact(p, time_limit=20)["bound"] + 1e-12
    True
    """
    lat, inv = np.asarray(data.latency_s, float), np.asarray(data.inv_bw_s_per_B, float)
    off = ~np.eye(len(lat), dtype=bool)
    if not off.any():
        return 0.0
    lo_lat, lo_inv = float(lat[off].min()), float(inv[off].min())
    root_sends = np.asarray(data.bytes_B, float)[np.asarray(data.parent) == 0]
    return float(sum(lo_lat + nb * lo_inv for nb in root_sends))


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
    >>> from topoplan.problems.bcast.allocation import cluster
    >>> p = BcastProblem.build(cluster(4, 4), placement=list(range(0, 16, 2)), root=0, bytes_B=1024, tree="binomial")
    >>> out = solve_exact(p, time_limit=20)
    >>> out["status"], len(out["assign"])
    ('optimal', 8)
    """
    data = bcast_data(problem, hint=hint, resolution=resolution)
    entries, m = model_size(data)
    if time_limit is not None and entries > CPSAT_ENTRIES_PER_S * time_limit:
        # the formulation is too large for the limit: say so before building it, keep the heuristic
        return {"assign": np.asarray(hint), "status": "timeout", "bound": root_bound(data), "classes": m,
                "message": f"model too large for the time limit: {entries:,} class-pair table entries "
                           f"({len(data.child):,} sends x {m}^2 node classes) take about "
                           f"{entries / CPSAT_ENTRIES_PER_S:.0f} s to build and presolve (limit {time_limit:g} s); "
                           "returning the best heuristic order, with the root's sends as bound"}
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
