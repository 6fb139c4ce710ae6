"""Solver back-ends shared by every MILP/LP model of the project.

A model is built once as a PuLP ``LpProblem`` (the modeller); :func:`solve`
hands it to one back-end and returns a small :class:`SolverResult`. The
values of the solution are written back into the PuLP variables
(``var.value()``), whatever the back-end, so a model reads its solution
the same way for every solver.

Back-ends (``solver=``):

- ``cbc`` (default) -- COIN-OR CBC through PuLP's ``PULP_CBC_CMD``; the best
  bound is read from CBC's log.
- ``highs`` -- HiGHS through ``highspy`` (the model is passed as matrices).
- ``ortools`` -- OR-Tools ``pywraplp`` with SCIP for MILPs and GLOP for LPs.
- ``gurobi`` -- ``gurobipy``, when it is importable and licensed.

Every back-end takes a time limit (seconds), a seed, a thread count, a
relative MIP gap and an optional warm start (the values currently in the
PuLP variables, e.g. a heuristic's plan), and can solve the LP relaxation
(``relax=True``) instead of the MILP. ``status`` is one of ``optimal``,
``feasible`` (stopped with a solution but without proof, other than by the
time limit), ``timeout`` (time limit reached; ``has_solution`` says whether
an incumbent exists), ``infeasible``, ``unbounded`` or ``error``.

Example
-------
>>> import pulp
>>> m = pulp.LpProblem("knap", pulp.LpMaximize)
>>> x = [m.add_variable(f"x{i}", 0, 1, cat="Binary") for i in range(3)]   # PuLP < 3: pulp.LpVariable
>>> m += 5 * x[0] + 4 * x[1] + 3 * x[2]
>>> m += 2 * x[0] + 3 * x[1] + x[2] <= 4
>>> r = solve(m, "cbc")
>>> r.status, r.objective, [v.value() for v in x]
('optimal', 8.0, [1.0, 0.0, 1.0])

Reusing it from another model (placement, Bcast): build the ``LpProblem``,
call ``solve(prob, solver, time_limit=..., seed=...)``, read
``var.value()`` when ``result.has_solution``, and report
``result.bound``/``result.gap``.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass

import numpy as np

from planner.errors import TopoplanError

SOLVERS = ("cbc", "highs", "ortools", "gurobi")


@dataclass
class SolverResult:
    """Outcome of one solve. ``objective`` and ``bound`` are in the model's own sense (min or max)."""

    status: str
    objective: float | None
    bound: float | None
    gap: float | None
    wall_s: float
    solver: str
    message: str = ""

    @property
    def has_solution(self) -> bool:
        return self.objective is not None and self.status not in ("infeasible", "unbounded", "error")

    @property
    def proven(self) -> bool:
        return self.status == "optimal"


def relative_gap(objective, bound, sense: int = 1) -> float | None:
    """``|objective - bound| / |objective|`` (0 when both are 0; None when either is missing)."""
    if objective is None or bound is None or not math.isfinite(bound):
        return None
    diff = (objective - bound) * sense
    if abs(objective) < 1e-12:
        return 0.0 if abs(diff) < 1e-12 else math.inf
    return max(0.0, diff / abs(objective))


def available(solver: str) -> bool:
    """Can this back-end run here?"""
    import importlib.util

    if solver == "cbc":
        import pulp

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return bool(pulp.PULP_CBC_CMD(msg=False).available())
    if solver == "highs":
        return importlib.util.find_spec("highspy") is not None
    if solver == "ortools":
        return importlib.util.find_spec("ortools") is not None
    if solver == "gurobi":
        return _gurobi_licensed()
    return False


def _native_loaded() -> set:
    """Which of the two native libraries that clash are loaded in this process.

    ``highspy`` and OR-Tools each ship a ``libhighs.so.1`` of a different
    version; the dynamic linker binds both to whichever was loaded first, so
    the second fails with an undefined symbol. The back-end that would clash
    runs in a fresh process instead (see :func:`solve`).
    """
    out = set()
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            maps = fh.read()
    except OSError:
        return out
    if "highspy/libhighs" in maps:
        out.add("highs")
    if "ortools/.libs/libortools" in maps or "ortools.libs/libortools" in maps:
        out.add("ortools")
    return out


def available_solvers() -> list[str]:
    return [s for s in SOLVERS if available(s)]


def solve(prob, solver: str = "cbc", *, time_limit: float | None = None, seed: int | None = 0,
          threads: int | None = None, mip_gap: float = 1e-6, msg: bool = False, warm_start: bool = False,
          relax: bool = False) -> SolverResult:
    """Solve a PuLP problem with one back-end; the solution is written into the PuLP variables.

    Parameters
    ----------
    prob : ``pulp.LpProblem``.
    solver : ``cbc``, ``highs``, ``ortools`` or ``gurobi``.
    time_limit : seconds (None: no limit).
    seed : random seed of the solver.
    threads : solver threads (None: the solver's default).
    mip_gap : relative gap at which a MILP counts as solved.
    msg : print the solver log.
    warm_start : pass the variables' current values as a starting solution.
    relax : solve the LP relaxation (integrality dropped) instead.
    """
    if solver not in SOLVERS:
        raise TopoplanError(f"unknown solver {solver!r} (solvers: {', '.join(SOLVERS)})")
    if not available(solver):
        why = {"gurobi": "gurobipy is not installed or not licensed",
               "ortools": "OR-Tools with SCIP is not installed", "highs": "highspy is not installed",
               "cbc": "CBC is missing (pip install 'pulp[cbc]')"}[solver]
        raise TopoplanError(f"solver {solver!r} is not available: {why}")
    if time_limit is not None and not time_limit > 0:
        raise TopoplanError(f"field 'time_limit': must be positive, got {time_limit}")
    t0 = time.perf_counter()
    if solver == "cbc":
        res = _solve_cbc(prob, time_limit, seed, threads, mip_gap, msg, warm_start, relax)
    else:
        m = to_matrix(prob, relax=relax)
        args = (time_limit, seed, threads, mip_gap, msg, warm_start)
        other = {"highs": "ortools", "ortools": "highs"}.get(solver)
        loaded = _native_loaded()
        if other in loaded and solver not in loaded:
            res, x = _in_fresh_process(solver, m, args)
        else:
            res, x = _MATRIX_SOLVERS[solver](m, *args)
        if x is not None:
            for v, val in zip(m.variables, x):
                v.varValue = float(val)
    res.wall_s = time.perf_counter() - t0
    res.solver = solver
    if res.gap is None and res.has_solution:
        res.gap = relative_gap(res.objective, res.bound, 1 if prob.sense == 1 else -1)
    return res


# -- matrix form -----------------------------------------------------------

@dataclass
class MatrixModel:
    """``min/max c x + c0`` s.t. ``row_lo <= A x <= row_hi``, ``lo <= x <= hi``, ``integer`` mask."""

    variables: list
    c: np.ndarray
    c0: float
    sense: int
    A: object
    row_lo: np.ndarray
    row_hi: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    integer: np.ndarray
    start: np.ndarray | None


def to_matrix(prob, relax: bool = False) -> MatrixModel:
    """The PuLP problem as sparse matrices (CSR constraint matrix)."""
    from scipy.sparse import csr_matrix

    variables = prob.variables()
    index = {v.name: i for i, v in enumerate(variables)}
    n = len(variables)
    c = np.zeros(n)
    for v, a in prob.objective.items():
        c[index[v.name]] += a
    c0 = float(prob.objective.constant or 0.0)
    rows, cols, vals, lo, hi = [], [], [], [], []
    cons = prob.constraints
    cons = cons() if callable(cons) else list(cons.values())  # PuLP >= 3.3: a call; older: a dict
    for r, con in enumerate(cons):
        for v, a in con.items():
            rows.append(r)
            cols.append(index[v.name])
            vals.append(a)
        rhs = -float(con.constant or 0.0)
        if con.sense == 0:
            lo.append(rhs); hi.append(rhs)
        elif con.sense < 0:
            lo.append(-np.inf); hi.append(rhs)
        else:
            lo.append(rhs); hi.append(np.inf)
    A = csr_matrix((vals, (rows, cols)), shape=(len(lo), n))
    vlo = np.array([-np.inf if v.lowBound is None else v.lowBound for v in variables], dtype=float)
    vhi = np.array([np.inf if v.upBound is None else v.upBound for v in variables], dtype=float)
    integer = np.array([(v.cat == "Integer") and not relax for v in variables], dtype=bool)
    start = None
    if all(v.varValue is not None for v in variables) and n:
        start = np.array([v.varValue for v in variables], dtype=float)
    return MatrixModel(variables, c, c0, 1 if prob.sense == 1 else -1, A, np.array(lo), np.array(hi),
                       vlo, vhi, integer, start)


def _in_fresh_process(solver: str, m: MatrixModel, args):
    """Run a matrix back-end in a spawned interpreter (native-library clash, see :func:`_native_loaded`)."""
    import multiprocessing as mp

    arrays = dict(c=m.c, c0=m.c0, sense=m.sense, A=m.A, row_lo=m.row_lo, row_hi=m.row_hi, lo=m.lo, hi=m.hi,
                  integer=m.integer, start=m.start)
    with mp.get_context("spawn").Pool(1) as pool:
        return pool.apply(_matrix_worker, (solver, arrays, args))


def call_isolated(library: str, fn, *args, **kwargs):
    """Call ``fn(*args, **kwargs)``, in a spawned interpreter if ``library`` would clash here.

    ``library`` is ``"ortools"`` or ``"highs"``: the native library ``fn``
    loads. When the other one is already loaded in this process (and this one
    is not), loading it would fail with an undefined symbol (see
    :func:`_native_loaded`), so ``fn`` runs in a fresh process instead; ``fn``
    and its arguments must then be picklable (module-level function).
    """
    other = {"highs": "ortools", "ortools": "highs"}[library]
    loaded = _native_loaded()
    if other in loaded and library not in loaded:
        import multiprocessing as mp

        with mp.get_context("spawn").Pool(1) as pool:
            return pool.apply(fn, args, kwargs)
    return fn(*args, **kwargs)


def _matrix_worker(solver, arrays, args):
    m = MatrixModel(variables=[], **arrays)
    return _MATRIX_SOLVERS[solver](m, *args)


# -- CBC (PuLP) --------------------------------------------------------------

def _solve_cbc(prob, time_limit, seed, threads, mip_gap, msg, warm_start, relax) -> SolverResult:
    import pulp

    saved = None
    if relax:
        saved = [(v, v.cat) for v in prob.variables() if v.cat == "Integer"]
        for v, _ in saved:
            v.cat = "Continuous"
    fd, log = tempfile.mkstemp(prefix="cbc_", suffix=".log")
    os.close(fd)
    opts = ["timeMode elapsed"]  # wall-clock time limit (CBC counts CPU seconds by default)
    if seed is not None:
        opts += [f"randomCbcSeed {int(seed) % 2**31 + 1}", f"randomSeed {int(seed) % 2**31 + 1}"]
    with warnings.catch_warnings():  # PuLP 3 deprecates the bundled-CBC class name, not the solver
        warnings.simplefilter("ignore", DeprecationWarning)
        cmd = pulp.PULP_CBC_CMD(msg=msg, timeLimit=time_limit, threads=threads, gapRel=mip_gap,
                                warmStart=warm_start and not relax, options=opts, logPath=log)
    try:
        prob.solve(cmd)
        text = open(log, encoding="utf-8", errors="replace").read()
    except pulp.PulpSolverError as exc:
        return SolverResult("error", None, None, None, 0.0, "cbc", str(exc))
    finally:
        if saved:
            for v, cat in saved:
                v.cat = cat
        if os.path.exists(log):
            os.unlink(log)
    obj = pulp.value(prob.objective)
    sol = prob.sol_status
    has = sol in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible) and obj is not None
    bound = None
    mb = re.search(r"^(?:Lower|Upper) bound:\s+(\S+)", text, re.M)
    if mb:
        try:
            bound = float(mb.group(1))
        except ValueError:
            bound = None
    if "Stopped on time" in text or "Exiting on maximum time" in text:
        status = "timeout"
    elif prob.status == pulp.LpStatusInfeasible or "infeasible" in text.lower().split("result -")[-1][:60]:
        status = "infeasible"
    elif prob.status == pulp.LpStatusUnbounded:
        status = "unbounded"
    elif sol == pulp.LpSolutionOptimal and prob.status == pulp.LpStatusOptimal:
        status = "optimal"
    elif has:
        status = "feasible"
    else:
        status = "error"
    if status == "optimal" and bound is None:
        bound = obj
    if not has:
        obj = None
    return SolverResult(status, float(obj) if obj is not None else None, bound, None, 0.0, "cbc")


# -- HiGHS -------------------------------------------------------------------

@contextlib.contextmanager
def _stdout_silenced(active: bool = True):
    """Point file descriptor 1 at /dev/null for a native library's unconditional prints (``--json`` stays clean)."""
    if not active:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def _solve_highs(m: MatrixModel, time_limit, seed, threads, mip_gap, msg, warm_start):
    import highspy

    with _stdout_silenced(not msg):  # HiGHS >= 1.16 prints its banner from the constructor, before any option
        h = highspy.Highs()
    h.setOptionValue("output_flag", bool(msg))
    if time_limit is not None:
        h.setOptionValue("time_limit", float(time_limit))
    if seed is not None:
        h.setOptionValue("random_seed", int(seed) % 2**31)
    if threads is not None:
        # HiGHS >= 1.16 keeps one process-wide thread pool; a run asking for another size fails
        # ("Not Set") unless the pool is reset first
        if hasattr(highspy.Highs, "resetGlobalScheduler"):
            highspy.Highs.resetGlobalScheduler(True)
        h.setOptionValue("threads", int(threads))
    h.setOptionValue("mip_rel_gap", float(mip_gap))
    inf = highspy.kHighsInf
    A = m.A.tocsc()
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = A.shape[1], A.shape[0]
    lp.col_cost_ = m.c * m.sense
    lp.offset_ = m.c0 * m.sense
    lp.col_lower_ = np.where(np.isfinite(m.lo), m.lo, -inf)
    lp.col_upper_ = np.where(np.isfinite(m.hi), m.hi, inf)
    lp.row_lower_ = np.where(np.isfinite(m.row_lo), m.row_lo, -inf)
    lp.row_upper_ = np.where(np.isfinite(m.row_hi), m.row_hi, inf)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = A.indptr
    lp.a_matrix_.index_ = A.indices
    lp.a_matrix_.value_ = A.data
    is_mip = bool(m.integer.any())
    if is_mip:
        lp.integrality_ = [highspy.HighsVarType.kInteger if f else highspy.HighsVarType.kContinuous for f in m.integer]
    h.passModel(lp)
    if warm_start and m.start is not None and is_mip:
        sol = highspy.HighsSolution()
        sol.col_value = list(m.start)
        sol.value_valid = True
        h.setSolution(sol)
    h.run()
    ms = h.getModelStatus()
    info = h.getInfo()
    S = highspy.HighsModelStatus
    has = info.primal_solution_status == 2  # kSolutionStatusFeasible
    obj = info.objective_function_value * m.sense if has else None
    bound = None
    if is_mip:
        b = info.mip_dual_bound
        bound = b * m.sense if math.isfinite(b) else None
    status = {S.kOptimal: "optimal", S.kInfeasible: "infeasible", S.kUnbounded: "unbounded",
              S.kUnboundedOrInfeasible: "infeasible", S.kTimeLimit: "timeout"}.get(ms)
    if status is None:
        status = "feasible" if has else "error"
    if status == "optimal" and not is_mip:
        bound = obj
    elif status == "optimal" and bound is None:
        bound = obj
    x = np.array(h.getSolution().col_value) if has else None
    return SolverResult(status, obj, bound, None, 0.0, "highs", h.modelStatusToString(ms)), x


# -- OR-Tools ----------------------------------------------------------------

def _solve_ortools(m: MatrixModel, time_limit, seed, threads, mip_gap, msg, warm_start):
    from ortools.linear_solver import pywraplp

    is_mip = bool(m.integer.any())
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
    if time_limit is not None:
        s.SetTimeLimit(int(math.ceil(time_limit * 1000)))
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
    t0 = time.perf_counter()
    st = s.Solve(params)
    took = time.perf_counter() - t0
    has = st in (pywraplp.Solver.OPTIMAL, pywraplp.Solver.FEASIBLE)
    val = obj.Value() if has else None
    bound = (obj.BestBound() if is_mip else val) if has else None
    if st == pywraplp.Solver.OPTIMAL:
        status = "optimal"
    elif st == pywraplp.Solver.FEASIBLE:
        status = "timeout" if time_limit is not None and took >= 0.95 * time_limit else "feasible"
    elif st == pywraplp.Solver.INFEASIBLE:
        status = "infeasible"
    elif st == pywraplp.Solver.UNBOUNDED:
        status = "unbounded"
    elif st == pywraplp.Solver.NOT_SOLVED and time_limit is not None and took >= 0.95 * time_limit:
        status = "timeout"
    else:
        status = "error"
    if status == "optimal" and bound is not None and not math.isfinite(bound):
        bound = val
    x = np.array([v.solution_value() for v in xs]) if has else None
    return SolverResult(status, val, bound, None, 0.0, "ortools"), x


# -- Gurobi ------------------------------------------------------------------

def _gurobi_licensed() -> bool:
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


def _solve_gurobi(m: MatrixModel, time_limit, seed, threads, mip_gap, msg, warm_start):
    import gurobipy as gp

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
    if time_limit is not None:
        mdl.Params.TimeLimit = float(time_limit)
    if seed is not None:
        mdl.Params.Seed = int(seed) % 2**31
    if threads is not None:
        mdl.Params.Threads = int(threads)
    mdl.Params.MIPGap = float(mip_gap)
    if warm_start and m.start is not None:
        x.Start = m.start
    mdl.optimize()
    st = mdl.Status
    has = mdl.SolCount > 0
    val = mdl.ObjVal if has else None
    is_mip = bool(m.integer.any())
    bound = (mdl.ObjBound if is_mip else val) if has else None
    status = {GRB.OPTIMAL: "optimal", GRB.INFEASIBLE: "infeasible", GRB.UNBOUNDED: "unbounded",
              GRB.INF_OR_UNBD: "infeasible", GRB.TIME_LIMIT: "timeout"}.get(st, "feasible" if has else "error")
    xv = np.array(x.X) if has else None
    mdl.dispose()
    env.dispose()
    return SolverResult(status, val, bound, None, 0.0, "gurobi"), xv


_MATRIX_SOLVERS = {"highs": _solve_highs, "ortools": _solve_ortools, "gurobi": _solve_gurobi}
