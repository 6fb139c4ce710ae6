"""One result type for every planning method (circuits, placement, Bcast reordering).

Each problem module keeps a registry ``METHODS = {name: function}``; every
function takes ``(problem, *, time_limit, seed, **options)`` and returns a
:class:`PlanResult`. :func:`solve_with` times the call, fills the common
fields and validates the plan, so adding a method is one function plus one
registry line.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from planner.errors import TopoplanError

STATUSES = ("optimal", "feasible", "timeout", "heuristic")


@dataclass
class PlanResult:
    """What every method returns.

    ``plan`` holds the problem's own keys (``circuits`` and ``forwarding``;
    ``rank_to_node`` and ``rank_to_slot``; ``order``), written at the top
    level of the JSON. ``objective`` is the number the method minimized;
    ``bound`` a proven lower bound (None when the method proves none);
    ``gap`` = (objective - bound) / objective.
    """

    method: str
    objective: float
    plan: dict[str, Any]
    status: str = "heuristic"
    bound: float | None = None
    gap: float | None = None
    seed: int | None = None
    wall_s: float = 0.0
    metrics: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    problem: str = ""
    message: str = ""

    def to_dict(self) -> dict:
        d = {"problem": self.problem, "method": self.method, "seed": self.seed, "objective": self.objective,
             "metrics": self.metrics, "bound": self.bound, "gap": self.gap, "status": self.status,
             "wall_s": self.wall_s}
        d.update(self.plan)
        d["options"] = self.options
        if self.message:
            d["message"] = self.message
        return d


def gap_of(objective: float, bound: float | None) -> float | None:
    """Relative gap (objective - bound) / objective, 0 when both are 0."""
    if bound is None or objective is None:
        return None
    if objective <= 0:
        return 0.0
    return max(0.0, (objective - bound) / abs(objective))


MAX_TIME_LIMIT_S = 7 * 86400.0


SCORES = ("bound", "simulated")


def solve_with(methods: dict[str, Callable], problem, method: str, *, problem_name: str,
               time_limit: float | None = None, seed: int | None = 0, validate: Callable | None = None,
               score: str = "bound", simulate: Callable[[dict], float] | None = None,
               starts: dict[str, tuple] | None = None, **options) -> PlanResult:
    """Run ``methods[method]`` on ``problem`` and fill the common result fields.

    With ``score="simulated"`` the result is judged by what the simulator measures: the method's plan and
    the plans of the heuristics it starts from (``starts[method]``, run here with the same seed) are each
    simulated with ``simulate(plan_dict) -> seconds``, and the fastest is returned (ties keep the
    method's own plan), so no method returns a plan that simulates slower than its starting heuristics.
    The result then carries ``metrics["simulated_s"]``, ``metrics["simulated_candidates_s"]`` and
    ``metrics["picked"]``; a plan picked from a start keeps the method's proven ``bound`` (it bounds the
    method's objective, which the picked plan also has) and is no longer called optimal.
    """
    if score not in SCORES:
        raise TopoplanError(f"field 'score': choose one of {', '.join(SCORES)}, got {score!r}")
    if score == "simulated" and simulate is None:
        raise TopoplanError("field 'score': 'simulated' needs a simulator (simulate=plan -> seconds)")
    res = _solve_one(methods, problem, method, problem_name=problem_name, time_limit=time_limit, seed=seed,
                     validate=validate, **options)
    if score == "bound":
        return res
    t0 = time.perf_counter()
    candidates = {method: res}
    for name in (starts or {}).get(method, ()):
        if name != method and name in methods:
            candidates[name] = _solve_one(methods, problem, name, problem_name=problem_name, time_limit=None,
                                          seed=seed, validate=validate)
    times = {name: float(simulate(r.to_dict())) for name, r in candidates.items()}
    best = min(times, key=lambda k: (times[k], k != method))
    if best != method:
        picked = candidates[best]
        res.plan, res.objective = picked.plan, picked.objective
        res.metrics = {**picked.metrics, **{k: v for k, v in res.metrics.items() if k not in picked.metrics}}
        res.gap = gap_of(res.objective, res.bound)
        if res.status == "optimal":
            res.status = "feasible"
        res.message = (f"{res.message}; " if res.message else "") + \
            f"kept {best}'s plan: it simulates faster ({times[best]:.6g} s vs {times[method]:.6g} s)"
    res.metrics["simulated_s"] = times[best]
    res.metrics["simulated_candidates_s"] = times
    res.metrics["picked"] = best
    res.options["score"] = "simulated"
    res.wall_s += time.perf_counter() - t0
    return res


def _solve_one(methods: dict[str, Callable], problem, method: str, *, problem_name: str,
               time_limit: float | None = None, seed: int | None = 0, validate: Callable | None = None,
               **options) -> PlanResult:
    if method not in methods:
        raise TopoplanError(f"unknown {problem_name} method {method!r} (methods: {', '.join(methods)})")
    if time_limit is not None and not 0 < time_limit <= MAX_TIME_LIMIT_S:
        # inf would let an annealer run forever: a limit is a finite budget
        raise TopoplanError(f"field 'time_limit': must be a positive number of seconds up to {MAX_TIME_LIMIT_S:g} "
                            f"(7 days), got {time_limit}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
        raise TopoplanError(f"field 'seed': must be a non-negative integer, got {seed!r}")
    t0 = time.perf_counter()
    res = methods[method](problem, time_limit=time_limit, seed=seed, **options)
    res.wall_s = time.perf_counter() - t0
    res.method = method
    res.seed = seed
    res.problem = problem_name
    if res.gap is None and res.bound is not None:
        res.gap = gap_of(res.objective, res.bound)
    res.options = {"time_limit": time_limit, **{k: v for k, v in options.items() if _plain(v)}, **res.options}
    if res.status not in STATUSES:
        raise AssertionError(f"method {method} returned status {res.status!r}")
    if validate is not None:
        validate(problem, res)
    return res


def _plain(v) -> bool:
    return isinstance(v, (int, float, str, bool, type(None), list, tuple))
