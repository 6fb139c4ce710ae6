"""Gurobi through ``gurobipy``, when it is importable and licensed beyond the size-limited free licence.

The PuLP problem is passed as matrices (:class:`~topoplan.formulations.backends.base.MatrixModel`, ``addMConstr``).
"""

from __future__ import annotations

import time

import numpy as np

from topoplan.formulations.backends.base import MatrixModel, Result, remaining, solve_as_matrix

NAME = "gurobi"
KIND = "milp"
NATIVE = None
MISSING = "gurobipy is not installed or not licensed"

__all__ = ["NAME", "KIND", "available", "solve", "solve_matrix"]


def available() -> bool:
    """gurobipy importable and licensed (a 201-variable model: beyond the size-limited free licence)."""
    try:
        import gurobipy as gp
    except ImportError:
        return False
    try:
        with gp.Env(params={"OutputFlag": 0}) as env, gp.Model(env=env) as mdl:
            x = mdl.addVars(201, vtype=gp.GRB.BINARY)  # beyond the size-limited free licence
            mdl.setObjective(gp.quicksum(x.values()))
            mdl.optimize()
        return True
    except gp.GurobiError:
        return False


def solve(prob, *, time_limit=None, started=None, seed=0, threads=None, mip_gap=1e-6, msg=False,
          warm_start=False, relax=False) -> Result:
    """Solve the PuLP problem ``prob`` with Gurobi; the solution is written into its variables."""
    return solve_as_matrix(prob, solve_matrix, NATIVE, relax=relax, time_limit=time_limit, started=started,
                           seed=seed, threads=threads, mip_gap=mip_gap, msg=msg, warm_start=warm_start)


def solve_matrix(m: MatrixModel, *, time_limit=None, started=None, seed=0, threads=None, mip_gap=1e-6, msg=False,
                 warm_start=False):
    """Solve a matrix model; returns ``(Result, x)``."""
    import gurobipy as gp

    started = time.time() if started is None else started   # building the model counts, the import not
    GRB = gp.GRB
    env = gp.Env(params={"OutputFlag": int(bool(msg))})
    mdl = gp.Model(env=env)
    vt = np.where(m.integer, GRB.INTEGER, GRB.CONTINUOUS)
    x = mdl.addMVar(len(m.c), lb=np.where(np.isfinite(m.lo), m.lo, -GRB.INFINITY),
                    ub=np.where(np.isfinite(m.hi), m.hi, GRB.INFINITY), vtype=vt)
    A = m.A.tocsr()
    eq = np.isfinite(m.row_lo) & (m.row_lo == m.row_hi)
    le = ~eq & np.isfinite(m.row_hi)
    ge = ~eq & np.isfinite(m.row_lo)
    if eq.any():
        mdl.addMConstr(A[eq], x, "=", m.row_lo[eq])
    if le.any():
        mdl.addMConstr(A[le], x, "<", m.row_hi[le])
    if ge.any():
        mdl.addMConstr(A[ge], x, ">", m.row_lo[ge])
    mdl.setObjective(m.c @ x + m.c0, GRB.MINIMIZE if m.sense == 1 else GRB.MAXIMIZE)
    if seed is not None:
        mdl.Params.Seed = int(seed) % 2**31
    if threads is not None:
        mdl.Params.Threads = int(threads)
    mdl.Params.MIPGap = float(mip_gap)
    if warm_start and m.start is not None:
        x.Start = m.start
    limit = remaining(time_limit, started)   # what building the model left of the limit
    if limit is not None:
        mdl.Params.TimeLimit = float(limit)
    mdl.optimize()
    st = mdl.Status
    has = mdl.SolCount > 0
    val = mdl.ObjVal if has else None
    bound = (mdl.ObjBound if m.is_mip else val) if has else None
    status = {GRB.OPTIMAL: "optimal", GRB.INFEASIBLE: "infeasible", GRB.UNBOUNDED: "unbounded",
              GRB.INF_OR_UNBD: "infeasible", GRB.TIME_LIMIT: "timeout"}.get(st, "feasible" if has else "error")
    xv = np.array(x.X) if has else None
    mdl.dispose()
    env.dispose()
    return Result(status, val, bound, None, 0.0, NAME), xv
