"""OR-Tools CP-SAT: solves ``cp_model.CpModel`` models (integer variables, integer coefficients).

Pass a :class:`~topoplan.formulations.backends.base.Deferred` model (``build(data) -> (CpModel, decode)``): it is built
and solved in a fresh process when ``highspy``'s native library is loaded here (OR-Tools' clashes with
it), and ``Result.values`` is ``decode(result)``. A ``CpModel`` built by the caller is solved here, with
``Result.values`` the value of every variable by index (``values[var.Index()]``).

Parameters map to CP-SAT's: ``time_limit`` -> ``max_time_in_seconds`` (less the time spent building
the model), ``seed`` -> ``random_seed``, ``threads`` -> ``num_workers``, ``mip_gap`` ->
``relative_gap_limit`` (None: CP-SAT's default). Status: ``optimal``; ``timeout`` when a time limit was
set and CP-SAT stopped with a solution (``FEASIBLE``) or without one (``UNKNOWN``); ``feasible`` /
``error`` for those without a limit; ``infeasible``; ``error`` for an invalid model. ``message`` is
CP-SAT's status name (``OPTIMAL``, ``FEASIBLE``, ...).

Examples
--------
>>> from ortools.sat.python import cp_model
>>> md = cp_model.CpModel()
>>> x = [md.NewBoolVar(f"x{i}") for i in range(3)]
>>> _ = md.Add(2 * x[0] + 3 * x[1] + x[2] <= 4)
>>> md.Maximize(5 * x[0] + 4 * x[1] + 3 * x[2])
>>> r = solve(md, time_limit=10, seed=0, threads=1)
>>> r.status, r.objective, [int(r.values[v.Index()]) for v in x]
('optimal', 8.0, [1, 0, 1])
"""

from __future__ import annotations

import math
import time

import numpy as np

from topoplan.core.errors import TopoplanError
from topoplan.formulations.backends.base import Deferred, Result, call_isolated, remaining, watch, with_gap

NAME = "cpsat"
KIND = "cp"
NATIVE = "ortools"
MISSING = "OR-Tools is not installed (pip install ortools)"

__all__ = ["NAME", "KIND", "available", "solve", "is_model"]


def available() -> bool:
    import importlib.util

    return importlib.util.find_spec("ortools") is not None


def is_model(model) -> bool:
    """A CP-SAT model or a deferred one (checked without importing OR-Tools)."""
    return isinstance(model, Deferred) or type(model).__name__ == "CpModel"


def solve(model, *, time_limit=None, started=None, seed=0, threads=None, mip_gap=None, msg=False,
          warm_start=False, relax=False) -> Result:
    """Solve a CP-SAT model (a ``CpModel`` or a :class:`Deferred` one).

    ``warm_start``: hints are part of a CP-SAT model (``AddHint``), so there is nothing to pass;
    ``relax`` is refused (CP-SAT has no LP relaxation to return).
    """
    if relax:
        raise TopoplanError("solver 'cpsat': no LP relaxation (relax=True needs a MILP back-end)")
    opts = dict(time_limit=time_limit, started=started, seed=seed, threads=threads, mip_gap=mip_gap, msg=msg)
    if isinstance(model, Deferred):
        # everything from here counts against the limit: loading OR-Tools (1-3 s on a loaded 2-core machine: a
        # 5 s limit on 128 Bcast leaders ran 5.9-6.7 s when it did not), the start-up of a fresh process when
        # HiGHS is loaded here (call_isolated; time.time() is the same clock there), building the model
        opts.update(time_limit=remaining(time_limit, started), started=time.time())
        return call_isolated(NATIVE, _build_and_solve, model, **opts)
    return _solve_built(model, **opts)


def _build_and_solve(model: Deferred, **opts) -> Result:
    """Build a deferred model here, solve it, decode the solution (module-level: may run in a fresh process;
    ``opts["started"]`` is :func:`solve`'s clock, so loading OR-Tools and building count against the limit)."""
    built, decode = model()
    res = _solve_built(built, **opts)
    res.values = decode(res) if res.has_solution else None
    return res


def _solve_built(md, *, time_limit=None, started=None, seed=0, threads=None, mip_gap=None, msg=False) -> Result:
    from ortools.sat.python import cp_model

    solver = cp_model.CpSolver()
    limit = remaining(time_limit, started)   # what building the model left of the limit
    if limit is not None:
        solver.parameters.max_time_in_seconds = float(limit)
    if seed is not None:
        solver.parameters.random_seed = int(seed) % 2**31
    if threads is not None:
        solver.parameters.num_workers = int(threads)
    if mip_gap is not None:
        solver.parameters.relative_gap_limit = float(mip_gap)
    if msg:
        solver.parameters.log_search_progress = True
    st = _solve_watched(solver, md, limit)
    has = st in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    has_objective = md.HasObjective()
    obj = float(solver.ObjectiveValue()) if has and has_objective else (0.0 if has else None)
    bound = float(solver.BestObjectiveBound()) if has_objective else (0.0 if has else None)
    if bound is not None and not math.isfinite(bound):
        bound = None
    if st == cp_model.OPTIMAL:
        status = "optimal"
    elif st == cp_model.FEASIBLE:
        status = "timeout" if limit is not None else "feasible"
    elif st == cp_model.INFEASIBLE:
        status = "infeasible"
    elif st == cp_model.UNKNOWN and limit is not None:
        status = "timeout"
    else:
        status = "error"
    values = np.array(solver.ResponseProto().solution, dtype=np.int64) if has else None
    res = Result(status, obj, bound, None, 0.0, NAME, solver.StatusName(st), values=values)
    sense = -1 if has_objective and md.Proto().objective.scaling_factor < 0 else 1   # maximize: scaled by -1
    return with_gap(res, sense)


# CP-SAT checks max_time_in_seconds between steps; a large model's presolve (element constraints over
# big tables) can run far past it (a 10 s limit took 34 s on 1,024 Bcast leaders). The solve therefore
# runs in a thread and is stopped from here at the limit plus this margin, and at once on Ctrl-C.
STOP_MARGIN_S = 0.25


def _solve_watched(solver, md, limit):
    """``solver.Solve(md)``, stopped (``StopSearch``) at ``limit`` + :data:`STOP_MARGIN_S` seconds or when
    Ctrl-C asked to stop (:func:`topoplan.formulations.backends.base.watch`); CP-SAT then returns its best solution so
    far, as at its own time limit."""
    import threading

    solver.parameters.catch_sigint_signal = False   # Ctrl-C is topoplan's (first: stop and keep the best)
    out = {}

    def run():
        out["status"] = solver.Solve(md)

    thread = threading.Thread(target=run, name="cp-sat", daemon=True)
    thread.start()

    def done(poll_s):
        thread.join(poll_s)
        return not thread.is_alive()

    def abort():   # a second Ctrl-C: stop the solver before the interpreter unwinds
        solver.StopSearch()
        thread.join()

    watch(done, solver.StopSearch, limit_s=limit, margin_s=STOP_MARGIN_S, abort=abort)
    return out["status"]
