"""COIN-OR CBC through PuLP's ``PULP_CBC_CMD`` (the default MILP back-end).

CBC reads the PuLP problem itself (PuLP writes it as MPS and runs the ``cbc`` binary); the time limit is
wall-clock (``timeMode elapsed``), the best bound is read from CBC's log, and the LP relaxation is
solved by marking the integer variables continuous for the call.
"""

from __future__ import annotations

import os
import re
import signal
import tempfile
import threading
import warnings

import numpy as np

from topoplan.core.interrupt import child_pids
from topoplan.formulations.backends.base import Result, remaining, watch, with_gap

NAME = "cbc"
KIND = "milp"
NATIVE = None           # a separate executable: no native library in this process
MISSING = "CBC is missing (pip install 'pulp>=2.8,<4', which bundles it)"
# CBC does not always honour its own limit: on a large switch model it stayed in its root LP for minutes with
# '-sec 0.1'. It is interrupted (SIGINT: CBC stops and writes its best solution) at the limit plus this margin,
# and killed if it is still there KILL_GRACE_S later. Ctrl-C (topoplan.core.interrupt) does the same at once.
STOP_MARGIN_S = 0.5
KILL_GRACE_S = 2.0

__all__ = ["NAME", "KIND", "available", "solve"]


def available() -> bool:
    """Is PuLP's bundled CBC executable there?"""
    import pulp

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return bool(pulp.PULP_CBC_CMD(msg=False).available())


def solve(prob, *, time_limit=None, started=None, seed=0, threads=None, mip_gap=1e-6, msg=False,
          warm_start=False, relax=False) -> Result:
    """Solve the PuLP problem ``prob`` with CBC; the solution is written into its variables."""
    import pulp

    saved = None
    if relax:
        saved = [(v, v.cat) for v in prob.variables() if v.cat == "Integer"]
        for v, _ in saved:
            v.cat = "Continuous"
    # PuLP writes the model (MPS), CBC's solution and our log under one directory of this call's own, removed
    # whatever happens: PuLP deletes its files only after a solution was read, so a CBC stopped before it
    # wrote one, a Ctrl-C or a solver error would leave them (up to 10 MB each) in the system's temp directory
    tmp = tempfile.TemporaryDirectory(prefix="topoplan-cbc-", ignore_cleanup_errors=True)
    log = os.path.join(tmp.name, "cbc.log")
    opts = ["timeMode elapsed"]  # wall-clock time limit (CBC counts CPU seconds by default)
    if seed is not None:
        opts += [f"randomCbcSeed {int(seed) % 2**31 + 1}", f"randomSeed {int(seed) % 2**31 + 1}"]
    with warnings.catch_warnings():  # PuLP 3 deprecates the bundled-CBC class name, not the solver
        warnings.simplefilter("ignore", DeprecationWarning)
        cmd = pulp.PULP_CBC_CMD(msg=msg, timeLimit=remaining(time_limit, started), threads=threads, gapRel=mip_gap,
                                warmStart=warm_start and not relax, options=opts, logPath=log)
    cmd.tmpDir = tmp.name
    limit = remaining(time_limit, started)
    stopped = [False]
    try:
        _solve_watched(prob, cmd, limit, stopped)
        text = open(log, encoding="utf-8", errors="replace").read()
    except pulp.PulpSolverError as exc:
        if stopped[0]:   # we stopped CBC at the limit before it wrote a solution
            return Result("timeout", None, None, None, 0.0, NAME, "CBC stopped at the time limit without a solution")
        return Result("error", None, None, None, 0.0, NAME, str(exc))
    finally:
        if saved:
            for v, cat in saved:
                v.cat = cat
        tmp.cleanup()
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
        # stopped by us at the limit (CBC overran its own): a time-out, whatever CBC's log says
        status = "timeout" if stopped[0] else "feasible"
    else:
        status = "error"
    if status == "optimal" and bound is None:
        bound = obj
    if not has:
        obj = None
    values = np.array([np.nan if v.varValue is None else v.varValue for v in prob.variables()]) if has else None
    res = Result(status, float(obj) if obj is not None else None, bound, None, 0.0, NAME, values=values)
    return with_gap(res, 1 if prob.sense == 1 else -1)


def _solve_watched(prob, cmd, limit, stopped) -> None:
    """``prob.solve(cmd)`` in a thread; the CBC process is interrupted at ``limit`` + :data:`STOP_MARGIN_S`
    (or on a Ctrl-C stop request) and killed :data:`KILL_GRACE_S` later (:func:`topoplan.formulations.backends.base.watch`).
    ``stopped[0]`` tells whether it was."""
    out: dict = {}

    def run():
        try:
            prob.solve(cmd)
        except BaseException as exc:   # re-raised in the caller's thread
            out["exc"] = exc

    thread = threading.Thread(target=run, name="cbc", daemon=True)
    thread.start()

    def done(poll_s):
        thread.join(poll_s)
        return not thread.is_alive()

    def kill():
        _signal_cbc(child_pids("cbc"), signal.SIGKILL)

    stopped[0] = watch(done, lambda: _signal_cbc(child_pids("cbc"), signal.SIGINT), limit_s=limit,
                       margin_s=STOP_MARGIN_S, kill=kill, kill_after_s=KILL_GRACE_S, abort=kill)
    if "exc" in out:
        raise out["exc"]


def _signal_cbc(pids, sig) -> int:
    """Send ``sig`` to ``pids``; how many it reached (0: CBC has not started yet, or has ended)."""
    n = 0
    for pid in pids:
        try:
            os.kill(pid, sig)
            n += 1
        except OSError:
            pass
    return n
