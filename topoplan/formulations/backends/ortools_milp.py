"""OR-Tools' linear solver wrapper (``pywraplp``): SCIP for MILPs, GLOP for LPs (back-end name ``ortools``).

The PuLP problem is passed as matrices (:class:`~topoplan.formulations.backends.base.MatrixModel`) and rebuilt row by
row; the time that takes is taken from the time limit. OR-Tools ships a ``libhighs`` that clashes with
``highspy``'s: when that one is loaded here, the solve runs in a fresh process.
"""

from __future__ import annotations

import math
import time

import numpy as np

from topoplan.formulations.backends.base import MatrixModel, Result, remaining, solve_as_matrix

NAME = "ortools"
KIND = "milp"
NATIVE = "ortools"
MISSING = "OR-Tools with SCIP is not installed"

__all__ = ["NAME", "KIND", "available", "solve", "solve_matrix"]


def available() -> bool:
    import importlib.util

    return importlib.util.find_spec("ortools") is not None


def solve(prob, *, time_limit=None, started=None, seed=0, threads=None, mip_gap=1e-6, msg=False,
          warm_start=False, relax=False) -> Result:
    """Solve the PuLP problem ``prob`` with SCIP (GLOP for an LP); the solution is written into its variables."""
    return solve_as_matrix(prob, solve_matrix, NATIVE, relax=relax, time_limit=time_limit, started=started,
                           seed=seed, threads=threads, mip_gap=mip_gap, msg=msg, warm_start=warm_start)


def solve_matrix(m: MatrixModel, *, time_limit=None, started=None, seed=0, threads=None, mip_gap=1e-6, msg=False,
                 warm_start=False):
    """Solve a matrix model; returns ``(Result, x)``. Module-level: it may run in a fresh process."""
    from ortools.linear_solver import pywraplp

    started = time.time() if started is None else started   # building the model counts, the import not
    is_mip = m.is_mip
    s = pywraplp.Solver.CreateSolver("SCIP" if is_mip else "GLOP")
    inf = s.infinity()
    xs = []
    for j in range(len(m.c)):
        lo = m.lo[j] if math.isfinite(m.lo[j]) else -inf
        hi = m.hi[j] if math.isfinite(m.hi[j]) else inf
        xs.append(s.IntVar(lo, hi, f"x{j}") if m.integer[j] else s.NumVar(lo, hi, f"x{j}"))
    A = m.A.tocsr()
    for r in range(A.shape[0]):
        lo = m.row_lo[r] if math.isfinite(m.row_lo[r]) else -inf
        hi = m.row_hi[r] if math.isfinite(m.row_hi[r]) else inf
        ct = s.RowConstraint(lo, hi, "")
        for k in range(A.indptr[r], A.indptr[r + 1]):
            ct.SetCoefficient(xs[A.indices[k]], float(A.data[k]))
    obj = s.Objective()
    for j, cj in enumerate(m.c):
        if cj:
            obj.SetCoefficient(xs[j], float(cj))
    obj.SetOffset(m.c0)
    if m.sense == 1:
        obj.SetMinimization()
    else:
        obj.SetMaximization()
    if threads is not None:
        s.SetNumThreads(int(threads))
    params = pywraplp.MPSolverParameters()
    if is_mip:
        params.SetDoubleParam(params.RELATIVE_MIP_GAP, float(mip_gap))
        if seed is not None:
            s.SetSolverSpecificParametersAsString(f"randomization/randomseedshift = {int(seed) % 2**31}\n")
    if msg:
        s.EnableOutput()
    if warm_start and m.start is not None and is_mip:
        s.SetHint(xs, [float(v) for v in m.start])
    limit = remaining(time_limit, started)   # what building the model left of the limit
    if limit is not None:
        s.SetTimeLimit(int(math.ceil(limit * 1000)))
    t0 = time.perf_counter()
    st = s.Solve(params)
    took = time.perf_counter() - t0
    has = st in (pywraplp.Solver.OPTIMAL, pywraplp.Solver.FEASIBLE)
    val = obj.Value() if has else None
    bound = (obj.BestBound() if is_mip else val) if has else None
    if st == pywraplp.Solver.OPTIMAL:
        status = "optimal"
    elif st == pywraplp.Solver.FEASIBLE:
        status = "timeout" if limit is not None and took >= 0.95 * limit else "feasible"
    elif st == pywraplp.Solver.INFEASIBLE:
        status = "infeasible"
    elif st == pywraplp.Solver.UNBOUNDED:
        status = "unbounded"
    elif st == pywraplp.Solver.NOT_SOLVED and limit is not None and took >= 0.95 * limit:
        status = "timeout"
    else:
        status = "error"
    if status == "optimal" and bound is not None and not math.isfinite(bound):
        bound = val
    x = np.array([v.solution_value() for v in xs]) if has else None
    return Result(status, val, bound, None, 0.0, NAME), x
