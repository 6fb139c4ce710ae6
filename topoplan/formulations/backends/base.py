"""What every solver back-end shares: the result type, the matrix form of a MILP, deferred models, isolation.

- :class:`Result` -- the outcome of one solve (status, objective, bound, gap, values), whatever the back-end.
- :class:`MatrixModel` and :func:`to_matrix` -- the common model description the matrix back-ends
  (HiGHS, OR-Tools MILP, Gurobi) consume: a PuLP ``LpProblem`` (the modeller every MILP formulation
  uses) as sparse arrays. CBC reads the PuLP problem itself.
- :class:`Deferred` -- a model given by its builder and plain data, built where it is solved. CP-SAT
  models are passed this way, so that they can be built in a fresh process (below).
- :func:`call_isolated` -- ``highspy`` and OR-Tools each ship a native ``libhighs.so.1`` of a different
  version; the dynamic linker binds both to whichever was loaded first, so the second fails with an
  undefined symbol. The back-end whose library would clash runs in a fresh (spawned) interpreter.
- :func:`watch` -- the one loop that stops a solver running elsewhere (a thread, a child process) at its
  time limit plus a margin, or at once on the first Ctrl-C, and aborts it on the second.
- :func:`remaining` -- a time limit counts from the call of :func:`topoplan.formulations.backends.solve`, so building
  the solver's own model (and starting a fresh process) is taken from it where the back-end allows.

``status`` is one of ``optimal``, ``feasible`` (stopped with a solution but without proof, other than by
the time limit), ``timeout`` (time limit reached; :attr:`Result.has_solution` says whether an incumbent
exists), ``infeasible``, ``unbounded`` or ``error``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import Any, Callable

import numpy as np

from topoplan.core.interrupt import stop_requested

__all__ = ["Result", "SolverResult", "STATUSES", "relative_gap", "with_gap", "MatrixModel", "to_matrix",
           "write_values", "solve_as_matrix", "Deferred", "native_loaded", "would_clash", "call_isolated",
           "remaining", "watch", "MIN_SOLVER_S", "DEFAULT_MIP_GAP"]

STATUSES = ("optimal", "feasible", "timeout", "infeasible", "unbounded", "error")
DEFAULT_MIP_GAP = 1e-6     # relative gap at which a MILP counts as solved (MILP back-ends)
MIN_SOLVER_S = 0.05        # the least time a solver is given when model building used up the limit


@dataclass
class Result:
    """Outcome of one solve. ``objective`` and ``bound`` are in the model's own sense (min or max).

    ``values``: the solution -- the variables' values in the model's order (a PuLP problem's
    ``variables()``, a CP-SAT model's variable indices), or, for a :class:`Deferred` model, what its
    decoder made of them; None without a solution. A PuLP model also gets the values written into its
    variables (``var.value()``).
    """

    status: str
    objective: float | None
    bound: float | None
    gap: float | None
    wall_s: float
    solver: str
    message: str = ""
    values: Any = None

    @property
    def has_solution(self) -> bool:
        return self.objective is not None and self.status not in ("infeasible", "unbounded", "error")

    @property
    def proven(self) -> bool:
        return self.status == "optimal"

    @property
    def backend(self) -> str:
        return self.solver


SolverResult = Result   # the name before the back-ends were split


def relative_gap(objective, bound, sense: int = 1) -> float | None:
    """``|objective - bound| / |objective|`` (0 when both are 0; None when either is missing).

    >>> relative_gap(10.0, 8.0), relative_gap(8.0, 10.0, sense=-1), relative_gap(1.0, None)
    (0.2, 0.25, None)
    """
    if objective is None or bound is None or not math.isfinite(bound):
        return None
    diff = (objective - bound) * sense
    if abs(objective) < 1e-12:
        return 0.0 if abs(diff) < 1e-12 else math.inf
    return max(0.0, diff / abs(objective))


def with_gap(res: Result, sense: int) -> Result:
    """Fill ``res.gap`` from objective and bound when the back-end did not (``sense``: 1 min, -1 max)."""
    if res.gap is None and res.has_solution:
        res.gap = relative_gap(res.objective, res.bound, sense)
    return res


# -- matrix form -----------------------------------------------------------

@dataclass
class MatrixModel:
    """``min/max c x + c0`` s.t. ``row_lo <= A x <= row_hi``, ``lo <= x <= hi``, ``integer`` mask.

    ``sense`` is 1 (minimize) or -1 (maximize); ``start`` the variables' current values (a warm start)
    when every variable has one; ``variables`` the PuLP variables, column by column (empty in a fresh
    process: only the arrays travel).
    """

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

    @property
    def is_mip(self) -> bool:
        return bool(self.integer.any())

    def arrays_only(self) -> "MatrixModel":
        """The same model without the PuLP variables (what is sent to a fresh process)."""
        return replace(self, variables=[])


def to_matrix(prob, relax: bool = False) -> MatrixModel:
    """The PuLP problem as sparse matrices (CSR constraint matrix); ``relax`` drops integrality."""
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


def write_values(variables, x) -> None:
    """Write a solution vector into the PuLP variables (column order)."""
    if x is None:
        return
    for v, val in zip(variables, x):
        v.varValue = float(val)


def solve_as_matrix(prob, solve_matrix: Callable, library: str | None, *, relax: bool = False, **options) -> Result:
    """Solve a PuLP problem with a matrix back-end: convert, run ``solve_matrix(model, **options)`` (in a fresh
    process when ``library`` would clash here), write the solution into the PuLP variables."""
    m = to_matrix(prob, relax=relax)
    # the converting is taken from the limit here; building the solver's model, where it runs (the start-up
    # of a fresh process is not counted)
    options["time_limit"] = remaining(options.get("time_limit"), options.get("started"))
    options["started"] = None
    res, x = call_isolated(library, solve_matrix, m.arrays_only(), **options)
    write_values(m.variables, x)
    res.values = x
    return with_gap(res, m.sense)


# -- deferred models -------------------------------------------------------

@dataclass(frozen=True)
class Deferred:
    """A model given by how to build it: ``build(data)`` returns ``(model, decode)`` (CP-SAT models).

    The ``cpsat`` back-end builds it where it solves it (in a fresh process when its native library would clash
    here, see :func:`call_isolated`), solves it, and puts ``decode(result)`` in ``Result.values`` (plain
    data: it may have to travel back from that process). ``build`` must be a module-level function and
    ``data`` picklable.
    """

    build: Callable
    data: Any

    def __call__(self):
        return self.build(self.data)


# -- native-library clash --------------------------------------------------

CLASHES = {"highs": "ortools", "ortools": "highs"}


def native_loaded() -> set:
    """Which of the two native libraries that clash (``highs``, ``ortools``) are loaded in this process."""
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


def would_clash(library: str | None) -> bool:
    """Would loading ``library`` here fail: is the other one of the clashing pair loaded and it not?"""
    if library not in CLASHES:
        return False
    loaded = native_loaded()
    return CLASHES[library] in loaded and library not in loaded


def call_isolated(library: str | None, fn, *args, **kwargs):
    """Call ``fn(*args, **kwargs)``, in a spawned interpreter if ``library`` would clash here.

    ``library`` is ``"ortools"`` or ``"highs"``: the native library ``fn`` loads (None: no clash
    possible, call here). When the other one is already loaded in this process (and this one is not),
    loading it would fail with an undefined symbol (see :func:`native_loaded`), so ``fn`` runs in a fresh
    process instead; ``fn`` and its arguments must then be picklable (module-level function).
    """
    if would_clash(library):
        import multiprocessing as mp

        with mp.get_context("spawn").Pool(1) as pool:
            return pool.apply(fn, args, kwargs)
    return fn(*args, **kwargs)


# -- time limits -----------------------------------------------------------

def remaining(time_limit: float | None, started: float | None) -> float | None:
    """What is left of ``time_limit`` since ``started`` (a ``time.time()``; None: nothing spent yet), but at
    least :data:`MIN_SOLVER_S` (or the whole limit when that is smaller); None: no limit.

    >>> remaining(None, 0.0) is None, remaining(2.0, None)
    (True, 2.0)
    """
    if time_limit is None:
        return None
    if started is None:
        return float(time_limit)
    left = time_limit - (time.time() - started)
    return float(max(left, min(time_limit, MIN_SOLVER_S)))


def watch(done: Callable[[float], bool], stop: Callable[[], object], *, limit_s: float | None = None,
          margin_s: float = 0.0, kill: Callable[[], None] | None = None, kill_after_s: float = 2.0,
          abort: Callable[[], None] | None = None, poll_s: float = 0.05) -> bool:
    """Wait for a solver that runs elsewhere; stop it when it is late or when Ctrl-C asks.

    The solver is stopped (``stop()``, once) when ``limit_s + margin_s`` seconds have passed or on the
    first Ctrl-C (:func:`topoplan.core.interrupt.stop_requested`); it then ends with its incumbent as at
    its own time limit. A ``stop()`` that returns 0 or False reached no solver (a child process not started
    yet) and is tried again at every poll until it reaches one. ``kill()``, when given, follows ``kill_after_s`` later if it is still running, and is
    repeated every ``kill_after_s`` until it has ended (a child process may only start after the first try:
    PuLP writes the model file before it starts CBC).
    Any exception while waiting (a second Ctrl-C) calls ``abort()`` before it propagates.

    Parameters
    ----------
    done : callable
        ``done(timeout_s)`` waits up to ``timeout_s`` and tells whether the solver has finished.
    stop : callable
        Asks the solver to stop and return its best solution; returns how many it reached (None: it did).
    limit_s : float, optional
        The solver's own time limit; None: it is stopped only on Ctrl-C.
    margin_s : float, optional
        What the solver is given past ``limit_s`` to stop by itself.
    kill, kill_after_s : callable, float, optional
        The last resort for a solver that ignores ``stop``.
    abort : callable, optional
        Called when waiting is interrupted, before the exception propagates.
    poll_s : float, optional
        How often the clock and Ctrl-C are looked at.

    Returns
    -------
    bool
        Whether the solver was stopped (late or by Ctrl-C) rather than finishing by itself.

    Examples
    --------
    >>> import threading
    >>> flag = threading.Event()
    >>> t = threading.Thread(target=lambda: flag.wait(30)); t.start()
    >>> watch(lambda s: (t.join(s), not t.is_alive())[1], flag.set, limit_s=0.1)
    True
    >>> t2 = threading.Thread(target=lambda: None); t2.start()
    >>> watch(lambda s: (t2.join(s), not t2.is_alive())[1], flag.set, limit_s=5.0)
    False
    >>> tries, late = [], threading.Event()           # a solver that exists only from the third try on
    >>> t3 = threading.Thread(target=lambda: late.wait(30)); t3.start()
    >>> watch(lambda s: (t3.join(s), not t3.is_alive())[1],
    ...       lambda: (tries.append(1), len(tries) >= 3 and (late.set() or 1))[1], limit_s=0.1)
    True
    >>> len(tries)
    3
    """
    t0 = time.monotonic()
    t_stop = None
    try:
        while not done(poll_s):
            now = time.monotonic()
            if t_stop is None:
                if (limit_s is not None and now - t0 > limit_s + margin_s) or stop_requested():
                    reached = stop()
                    if reached is None or reached:   # else no solver yet: asked again at the next poll
                        t_stop = now
            elif kill is not None and now - t_stop > kill_after_s:
                kill()          # again every kill_after_s: the process may not have existed yet at the last try
                t_stop = now
    except BaseException:
        if abort is not None:
            abort()
        raise
    return t_stop is not None
