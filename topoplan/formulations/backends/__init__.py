"""Solver back-ends of every exact model, one module each, behind one :func:`solve`.

A formulation builds a model and a decoder; :func:`solve` hands the model to one back-end and returns a
:class:`Result` (status, objective, bound, gap, values). The shape of PuLP's ``apis``: one module per
solver, each with ``NAME``, ``KIND``, ``available()`` and ``solve(model, ...)``.

- ``cbc`` (:mod:`.cbc`, the default): a PuLP ``LpProblem``, COIN-OR CBC through PuLP;
- ``highs`` (:mod:`.highs`): a PuLP ``LpProblem``, passed as matrices to ``highspy``;
- ``ortools`` (:mod:`.ortools_milp`): a PuLP ``LpProblem``, to OR-Tools' SCIP (GLOP for an LP);
- ``gurobi`` (:mod:`.gurobi`): a PuLP ``LpProblem``, to ``gurobipy`` when it is licensed;
- ``cpsat`` (:mod:`.cpsat`): an OR-Tools CP-SAT ``CpModel``, or a :class:`Deferred` one.

The MILP back-ends write the solution into the PuLP variables (``var.value()``), so a formulation
reads its solution the same way whatever the solver. :mod:`.base` holds what they share: the result
type, the matrix form (:func:`to_matrix`), :class:`Deferred` models and the fresh-process isolation
(``highspy`` and OR-Tools ship clashing native ``libhighs`` builds; the back-end whose library would
clash runs in a spawned interpreter).

Every back-end takes a time limit (seconds, counted from this call: building the solver's own model
is taken from it), a seed and a thread count; the MILP back-ends also a relative MIP gap, a warm start
(the values in the PuLP variables, e.g. a heuristic's plan) and ``relax=True`` (the LP relaxation).

Examples
--------
>>> import pulp
>>> m = pulp.LpProblem("knap", pulp.LpMaximize)
>>> x = [m.add_variable(f"x{i}", 0, 1, cat="Binary") for i in range(3)]   # PuLP < 3: pulp.LpVariable
>>> m += 5 * x[0] + 4 * x[1] + 3 * x[2]
>>> m += 2 * x[0] + 3 * x[1] + x[2] <= 4
>>> r = solve(m, "cbc", time_limit=10, seed=0)
>>> r.status, r.objective, [v.value() for v in x]
('optimal', 8.0, [1.0, 0.0, 1.0])
>>> available("cbc"), BACKENDS
(True, ('cbc', 'highs', 'ortools', 'gurobi', 'cpsat'))
"""

from __future__ import annotations

import time

from topoplan.core.errors import TopoplanError

from topoplan.formulations.backends import cbc, cpsat, gurobi, highs, ortools_milp
from topoplan.formulations.backends.base import (DEFAULT_MIP_GAP, Deferred, MatrixModel, Result, SolverResult, call_isolated,
                                  native_loaded, relative_gap, to_matrix)

_MODULES = {mod.NAME: mod for mod in (cbc, highs, ortools_milp, gurobi, cpsat)}

#: Every back-end, by name.
BACKENDS = tuple(_MODULES)
#: The back-ends that solve PuLP (MILP/LP) models.
MILP_BACKENDS = tuple(name for name, mod in _MODULES.items() if mod.KIND == "milp")
SOLVERS = BACKENDS   # the name before the back-ends were split

__all__ = ["solve", "available", "available_solvers", "unavailable_reason", "BACKENDS", "MILP_BACKENDS", "SOLVERS",
           "Result", "SolverResult", "Deferred", "MatrixModel", "to_matrix", "relative_gap", "call_isolated",
           "native_loaded", "check"]


def available(backend: str) -> bool:
    """Can this back-end run here?"""
    mod = _MODULES.get(backend)
    return mod is not None and mod.available()


def unavailable_reason(backend: str) -> str | None:
    """None when ``backend`` can run here, else why not (one line)."""
    if backend not in _MODULES:
        return f"unknown solver {backend!r} (solvers: {', '.join(BACKENDS)})"
    return None if _MODULES[backend].available() else _MODULES[backend].MISSING


def available_solvers() -> list[str]:
    """The back-ends that can run here."""
    return [s for s in BACKENDS if available(s)]


def check(backend: str, kinds: tuple[str, ...] = BACKENDS) -> None:
    """Raise the one-line error :func:`solve` would raise for an unknown or unavailable ``backend`` (or one not
    in ``kinds``)."""
    if backend not in _MODULES or backend not in kinds:
        raise TopoplanError(f"unknown solver {backend!r} (solvers: {', '.join(kinds)})")
    if not _MODULES[backend].available():
        raise TopoplanError(f"solver {backend!r} is not available: {_MODULES[backend].MISSING}")


def solve(model, backend: str = "cbc", *, time_limit: float | None = None, seed: int | None = 0,
          threads: int | None = None, mip_gap: float | None = None, msg: bool = False, warm_start: bool = False,
          relax: bool = False) -> Result:
    """Solve ``model`` with one back-end.

    Parameters
    ----------
    model : a PuLP ``LpProblem`` (``cbc``, ``highs``, ``ortools``, ``gurobi``), or a CP-SAT ``CpModel``
        or a :class:`Deferred` one (``cpsat``; ``Deferred(build, data)`` with ``build(data) -> (model,
        decode)`` is built where it is solved, and ``Result.values`` is then the decoded solution).
    backend : one of :data:`BACKENDS`.
    time_limit : seconds, from this call (None: no limit).
    seed : random seed of the solver.
    threads : solver threads (None: the solver's default).
    mip_gap : relative gap at which the solve stops as optimal (None: 1e-6 for the MILP back-ends,
        CP-SAT's own default).
    msg : print the solver log.
    warm_start : MILP back-ends: start from the values currently in the PuLP variables.
    relax : MILP back-ends: solve the LP relaxation (integrality dropped) instead.

    Returns
    -------
    Result
        ``status`` (one of ``optimal``, ``feasible``, ``timeout``, ``infeasible``, ``unbounded``,
        ``error``), ``objective`` and ``bound`` in the model's sense, ``gap``, ``wall_s``, ``solver``,
        ``message`` and ``values``. A PuLP model also has the solution written into its variables.
    """
    started = time.time()
    t0 = time.perf_counter()
    check(backend)
    if time_limit is not None and not time_limit > 0:
        raise TopoplanError(f"field 'time_limit': must be positive, got {time_limit}")
    mod = _MODULES[backend]
    opts = dict(time_limit=time_limit, started=started, seed=seed, threads=threads, msg=msg, warm_start=warm_start,
                relax=relax)
    if mod.KIND == "cp":
        if not cpsat.is_model(model):
            raise TopoplanError(f"solver {backend!r} solves CP-SAT models (cp_model.CpModel), not a "
                                f"{type(model).__name__} (solvers for it: {', '.join(MILP_BACKENDS)})")
        res = mod.solve(model, mip_gap=mip_gap, **opts)
    else:   # a PuLP model (pure Python: built by the caller, never deferred)
        if cpsat.is_model(model) or not hasattr(model, "variables"):
            raise TopoplanError(f"solver {backend!r} solves PuLP models (pulp.LpProblem), not a "
                                f"{type(model).__name__} (CP-SAT models: solver 'cpsat')")
        res = mod.solve(model, mip_gap=DEFAULT_MIP_GAP if mip_gap is None else mip_gap, **opts)
    res.wall_s = time.perf_counter() - t0
    res.solver = backend
    return res
