"""HiGHS through ``highspy``: the PuLP problem is passed as matrices (:class:`~topoplan.formulations.backends.base.MatrixModel`).

Two workarounds for HiGHS >= 1.16:

- it prints its banner from the ``Highs()`` constructor, before any option can silence it, so file
  descriptor 1 points at /dev/null while the object is made (``--json`` output stays clean);
- it keeps one process-wide thread pool, and a run asking for another size fails ("Not Set") unless the
  pool is reset first (``Highs.resetGlobalScheduler``).

``highspy`` ships a ``libhighs`` that clashes with OR-Tools' one: when OR-Tools is loaded here, the solve
runs in a fresh process (:func:`~topoplan.formulations.backends.base.call_isolated`).
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import time

import numpy as np

from topoplan.formulations.backends.base import MatrixModel, Result, remaining, solve_as_matrix, watch

NAME = "highs"
KIND = "milp"
NATIVE = "highs"
MISSING = "highspy is not installed"

__all__ = ["NAME", "KIND", "available", "solve", "solve_matrix"]


def available() -> bool:
    import importlib.util

    return importlib.util.find_spec("highspy") is not None


def solve(prob, *, time_limit=None, started=None, seed=0, threads=None, mip_gap=1e-6, msg=False,
          warm_start=False, relax=False) -> Result:
    """Solve the PuLP problem ``prob`` with HiGHS; the solution is written into its variables."""
    return solve_as_matrix(prob, solve_matrix, NATIVE, relax=relax, time_limit=time_limit, started=started,
                           seed=seed, threads=threads, mip_gap=mip_gap, msg=msg, warm_start=warm_start)


@contextlib.contextmanager
def stdout_silenced(active: bool = True):
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


def solve_matrix(m: MatrixModel, *, time_limit=None, started=None, seed=0, threads=None, mip_gap=1e-6, msg=False,
                 warm_start=False):
    """Solve a matrix model; returns ``(Result, x)`` (``x`` None without a solution). Module-level: it may run
    in a fresh process."""
    import highspy

    started = time.time() if started is None else started   # building the model counts, the import not
    with stdout_silenced(not msg):  # HiGHS >= 1.16 prints its banner from the constructor, before any option
        h = highspy.Highs()
    h.setOptionValue("output_flag", bool(msg))
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
    is_mip = m.is_mip
    if is_mip:
        lp.integrality_ = [highspy.HighsVarType.kInteger if f else highspy.HighsVarType.kContinuous for f in m.integer]
    h.passModel(lp)
    if warm_start and m.start is not None and is_mip:
        sol = highspy.HighsSolution()
        sol.col_value = list(m.start)
        sol.value_valid = True
        h.setSolution(sol)
    limit = remaining(time_limit, started)   # what building the model left of the limit
    if limit is not None:
        h.setOptionValue("time_limit", float(limit))
    _run(h)
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
    return Result(status, obj, bound, None, 0.0, NAME, h.modelStatusToString(ms)), x


def _run(h) -> None:
    """``h.run()``, in HiGHS's solver thread so that Ctrl-C can reach it: the first Ctrl-C cancels the
    search, which then ends with its incumbent as if the time limit had been reached; a second one cancels
    and aborts (:func:`topoplan.formulations.backends.base.watch`; HiGHS keeps its own time limit)."""
    if not hasattr(h, "startSolve"):   # an old highspy: no solver thread
        h.run()
        return
    if hasattr(h, "HandleUserInterrupt"):   # without it, highspy's cancelSolve() is never seen by the solver
        h.HandleUserInterrupt = True
    thread = h.startSolve()

    def abort():
        h.cancelSolve()
        thread.join()

    watch(lambda poll_s: h.wait(poll_s)[0], lambda: (h.cancelSolve(), None)[1], abort=abort)   # once: reached
    thread.join()
