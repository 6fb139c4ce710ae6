"""One result type, one registry type and one runner for every planning method (circuits, placement, Bcast).

Each problem package keeps a :class:`Registry` of its methods in a leaf
module (``topoplan/<problem>/registry.py``, which imports no method); every
method module registers its functions with ``@METHODS.register("name")``.
A method is a plain function ``method(problem, *, time_limit, seed, <its
options>)`` that returns a :class:`PlanResult`; it declares every option it
takes (no ``**kwargs``), so :func:`solve_with` refuses an option the method
does not know, naming it and the known ones, before anything runs.
:func:`solve_with` times the call, fills the common fields and validates the
plan, so adding a method is one decorated function.

Examples
--------
>>> from topoplan.problems.placement import METHODS
>>> METHODS.options("anneal")
('init', 'batch', 'max_steps', 't0', 'cycles')
>>> "anneal" in METHODS, METHODS.problem
(True, 'placement')
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import time
from collections.abc import Mapping
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np

from topoplan.core import deadline, forked
from topoplan.core.errors import TopoplanError
from topoplan.core.interrupt import graceful_stop, stop_requested
from topoplan.traffic.collectives import peer_step_messages
from topoplan.traffic.matrix import Traffic

__all__ = ["SOLVE_OPTIONS", "STATUSES", "SCORES", "MAX_TIME_LIMIT_S", "UnknownMethodError", "declared_options",
           "check_options", "check_time_limit", "strict_options", "check_inputs", "module_missing", "Registry",
           "PlanResult", "gap_of", "solve_with", "simulation_cost_s", "replay_cost_s", "REPLAY_S_PER_CALL",
           "REPLAY_FIXED_S", "MEETS_BOUND_REL_TOL", "meets_bound"]

# The options the solve layer passes to every method: part of every method's signature.
SOLVE_OPTIONS = ("time_limit", "seed")


class UnknownMethodError(TopoplanError, KeyError):
    """A method name missing from a :class:`Registry` (also a ``KeyError``, as a mapping lookup should raise).

    Parameters
    ----------
    message : str
        Names the method and the known ones.

    Examples
    --------
    >>> from topoplan.problems.circuits import METHODS
    >>> try:
    ...     METHODS["three_step"]
    ... except KeyError as exc:
    ...     print(exc)
    unknown circuits method 'three_step' (methods: none, sp, three-step, greedy, matching, ilp, anneal)
    """

    def __str__(self) -> str:          # KeyError would quote the message
        return Exception.__str__(self)


def declared_options(fn: Callable, skip: tuple[str, ...] = SOLVE_OPTIONS) -> tuple[str, ...]:
    """The keyword options ``fn`` declares, in signature order: its parameters after the first, minus ``skip``.

    Parameters
    ----------
    fn : callable
        A method ``fn(problem, *, time_limit, seed, ...)``.
    skip : tuple of str, optional
        Names left out (default the options the solve layer passes).

    Returns
    -------
    tuple of str

    Examples
    --------
    >>> def m(problem, *, time_limit=None, seed=0, init=None, max_steps=None): ...
    >>> declared_options(m)
    ('init', 'max_steps')
    """
    params = list(inspect.signature(fn).parameters.values())[1:]
    return tuple(p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name not in skip)


def check_options(options, known, what: str) -> None:
    """Raise :class:`TopoplanError` naming the first of ``options`` not in ``known`` (and the known ones).

    Parameters
    ----------
    options : iterable of str
        The options given (a dict's keys).
    known : sequence of str
    what : str
        What the options are for, in the message.

    Raises
    ------
    TopoplanError

    Examples
    --------
    >>> check_options({"init": "metis"}, ("init", "max_steps"), "placement method 'anneal'")
    >>> check_options({"max_step": 50}, ("init", "max_steps"), "placement method 'anneal'")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: unknown option 'max_step' for placement method 'anneal'; known: init, max_steps
    """
    bad = [k for k in options if k not in known]
    if bad:
        raise TopoplanError(f"unknown option {bad[0]!r} for {what}; known: {', '.join(known) or '(none)'}")


def strict_options(what: str) -> Callable:
    """Decorate a builder so that a keyword it does not declare is refused with the known ones.

    Python's own ``TypeError`` names the bad keyword but not the good ones; the builders'
    options are keyword-only, so the known list is every keyword-only parameter.

    Parameters
    ----------
    what : str
        The builder's name, in the message.

    Returns
    -------
    callable
        The decorator.

    Examples
    --------
    >>> def build(topology, traffic, placement=None, *, threshold_B=None, hop_limit=None):
    ...     return hop_limit
    >>> build = strict_options("Toy.build")(build)
    >>> build(None, None, hop_limit=2)
    2
    >>> build(None, None, hop_limt=2)
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: unknown option 'hop_limt' for Toy.build; known: threshold_B, hop_limit
    """
    def deco(fn):
        params = inspect.signature(fn).parameters
        known = tuple(n for n, p in params.items() if p.kind is p.KEYWORD_ONLY)
        named = set(n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            check_options([k for k in kwargs if k not in named], known, what)
            return fn(*args, **kwargs)

        return wrapper

    return deco


def check_inputs(topology, traffic, *, traffic_optional: bool = False) -> None:
    """Refuse a builder's ``topology`` or ``traffic`` of the wrong kind, naming the field and how to make one
    (a spec string or a file name where a loaded object belongs stopped with an AttributeError from inside).

    Parameters
    ----------
    topology : object
        Must be a topology (:func:`topoplan.core.topology_io.load_topology`).
    traffic : object
        Must be a :class:`topoplan.traffic.matrix.Traffic` (None too with ``traffic_optional``).
    traffic_optional : bool, optional

    Raises
    ------
    TopoplanError

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> check_inputs(load_topology("paper003"), "ring:np=8")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: field 'traffic': expected a Traffic (load_traffic(spec), or the second item of load_source(spec)), got str 'ring:np=8'
    >>> check_inputs("paper003", None, traffic_optional=True)
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: field 'topology': expected a topology (load_topology(spec)), got str 'paper003'
    """
    def got(x) -> str:
        return f"{type(x).__name__}" + (f" {x!r}" if isinstance(x, str) else "")

    if not (dataclasses.is_dataclass(topology) and not isinstance(topology, type) and hasattr(topology, "n_nodes")):
        raise TopoplanError(f"field 'topology': expected a topology (load_topology(spec)), got {got(topology)}")
    if not (isinstance(traffic, Traffic) or (traffic is None and traffic_optional)):
        raise TopoplanError(f"field 'traffic': expected a Traffic (load_traffic(spec), or the second item of "
                            f"load_source(spec)), got {got(traffic)}")


def module_missing(module: str, hint: str = "") -> Callable[[], str | None]:
    """A ``requires`` check for :meth:`Registry.register`: None when ``module`` is importable, else why not.

    Parameters
    ----------
    module : str
        The module's import name.
    hint : str, optional
        How to get it, added to the reason.

    Returns
    -------
    callable
        ``check() -> str or None``.

    Examples
    --------
    >>> module_missing("json")() is None
    True
    >>> module_missing("no_such_module_xyz", "pip install xyz")()
    "the Python module 'no_such_module_xyz' is not installed (pip install xyz)"
    """
    def check() -> str | None:
        if importlib.util.find_spec(module) is not None:
            return None
        return f"the Python module {module!r} is not installed" + (f" ({hint})" if hint else "")

    return check


class Registry(Mapping):
    """The methods of one planning problem, by name, in registration order.

    A read-only mapping ``name -> function`` (``METHODS[name]``, ``name in
    METHODS``, ``sorted(METHODS)``); an unknown name raises
    :class:`UnknownMethodError` listing the known ones. Methods join with the
    :meth:`register` decorator; the registry itself imports no method, so it
    can live in a leaf module that method modules and the problem import.

    With ``modules``, the registry knows its methods before they are imported and
    imports a method's module when the method is first asked for: a command imports
    what its method needs (``place -m metis`` neither the exact model's solvers nor the
    circuits of ``joint``). Listing and membership import nothing.

    Parameters
    ----------
    problem : str
        The problem's name, in messages (``circuits``, ``placement``, ``bcast``).
    modules : dict of str to str, optional
        Method name -> the module that registers it, in listing order. Only these
        names may register.

    See Also
    --------
    solve_with : runs a registered method.

    Examples
    --------
    >>> R = Registry("toy")
    >>> @R.register("zero")
    ... def zero(problem, *, time_limit=None, seed=0, scale: float = 1.0):
    ...     return problem * 0 * scale
    >>> list(R), R.options("zero")
    (['zero'], ('scale',))
    >>> R["one"]
    Traceback (most recent call last):
    ...
    topoplan.problems.result.UnknownMethodError: unknown toy method 'one' (methods: zero)
    """

    def __init__(self, problem: str, modules: dict[str, str] | None = None):
        self.problem = problem
        self._methods: dict[str, Callable] = {}
        self._requires: dict[str, Callable[[], str | None]] = {}
        self._modules = dict(modules or {})

    def register(self, name: str, *, requires: Callable[[], str | None] | None = None) -> Callable:
        """Decorator adding a method under ``name``.

        The function must take the problem first, then the keywords ``time_limit`` and
        ``seed`` and its own options, and no ``**kwargs`` (so unknown options can be refused).
        ``requires()`` returns None when the method can run here, else why not (an optional
        peer module missing); see :meth:`unavailable`.
        """
        def deco(fn: Callable) -> Callable:
            params = inspect.signature(fn).parameters
            if any(p.kind is p.VAR_KEYWORD for p in params.values()):
                raise TypeError(f"{self.problem} method {name!r}: declare every option; no **kwargs")
            missing = [o for o in SOLVE_OPTIONS if o not in params]
            if missing or not params:
                raise TypeError(f"{self.problem} method {name!r}: must take (problem, *, time_limit, seed, ...); "
                                f"missing {', '.join(missing) or 'the problem'}")
            if name in self._methods and self._methods[name] is not fn:
                raise TypeError(f"{self.problem} method {name!r} registered twice")
            if self._modules and self._modules.get(name) != fn.__module__:
                raise TypeError(f"{self.problem} method {name!r}: registered by {fn.__module__}, but the registry "
                                f"names {self._modules.get(name, 'no module')} for it")
            self._methods[name] = fn
            if requires is not None:
                self._requires[name] = requires
            return fn

        return deco

    def __getitem__(self, name: str) -> Callable:
        if name not in self._methods and isinstance(name, str) and name in self._modules:
            importlib.import_module(self._modules[name])     # the module registers its methods
        try:
            return self._methods[name]
        except (KeyError, TypeError):
            raise UnknownMethodError(f"unknown {self.problem} method {name!r} "
                                     f"(methods: {', '.join(self)})") from None

    def __contains__(self, name) -> bool:
        return name in self._methods or (isinstance(name, str) and name in self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def __repr__(self) -> str:
        return f"Registry({self.problem!r}: {', '.join(self)})"

    def _names(self) -> list[str]:
        return list(self._modules) + [m for m in self._methods if m not in self._modules]

    def options(self, name: str) -> tuple[str, ...]:
        """The options method ``name`` declares (besides ``time_limit`` and ``seed``)."""
        return declared_options(self[name])

    def unavailable(self, name: str) -> str | None:
        """None when method ``name`` can run here, else why not (e.g. an optional peer module is missing)."""
        self[name]
        req = self._requires.get(name)
        return req() if req is not None else None


STATUSES = ("optimal", "feasible", "timeout", "heuristic", "interrupted")


@dataclass
class PlanResult:
    """What every method returns.

    ``plan`` holds the problem's own keys (``circuits`` and ``forwarding``;
    ``rank_to_node`` and ``rank_to_slot``; ``order``), written at the top
    level of the JSON. ``objective`` is the number the method minimized;
    ``bound`` a proven lower bound (None when the method proves none);
    ``gap`` = (objective - bound) / objective. A plan whose objective meets its bound (:func:`meets_bound`) is
    ``optimal``: :func:`solve_with` says so whatever status the method gave.

    Parameters
    ----------
    method : str
    objective : float
    plan : dict
    status : str, optional
        One of :data:`STATUSES`.
    bound, gap : float, optional
    seed : int, optional
    wall_s : float, optional
    metrics, options : dict, optional
    problem : str, optional
    message : str, optional
    inputs : dict of str to str, optional
        Fingerprints of the inputs the plan was made for (:mod:`topoplan.core.fingerprint`).

    Examples
    --------
    >>> r = PlanResult(method="greedy", objective=2.0, plan={"order": [1, 0]}, bound=1.5)
    >>> r.to_dict()
    {'problem': '', 'method': 'greedy', 'seed': None, 'objective': 2.0, 'metrics': {}, 'bound': 1.5, 'gap': None, 'status': 'heuristic', 'wall_s': 0.0, 'order': [1, 0], 'options': {}}
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
    inputs: dict[str, str] = field(default_factory=dict)

    def add_note(self, text: str) -> None:
        """Append ``text`` to :attr:`message`, after a semicolon when it has one already.

        Examples
        --------
        >>> r = PlanResult(method="greedy", objective=1.0, plan={})
        >>> r.add_note("a"); r.add_note("b"); r.message
        'a; b'
        """
        self.message = f"{self.message}; {text}" if self.message else text

    def to_dict(self) -> dict:
        d = {"problem": self.problem, "method": self.method, "seed": self.seed, "objective": self.objective,
             "metrics": self.metrics, "bound": self.bound, "gap": self.gap, "status": self.status,
             "wall_s": self.wall_s}
        d.update(self.plan)
        d["options"] = self.options
        if self.inputs:
            d["inputs"] = self.inputs
        if self.message:
            d["message"] = self.message
        return d


def gap_of(objective: float, bound: float | None) -> float | None:
    """Relative gap (objective - bound) / objective, 0 when both are 0.

    Parameters
    ----------
    objective : float
    bound : float or None

    Returns
    -------
    float or None
        None without a bound; never negative.

    Examples
    --------
    >>> gap_of(2.0, 1.5), gap_of(0.0, 0.0), gap_of(2.0, None)
    (0.25, 0.0, None)
    """
    if bound is None or objective is None:
        return None
    if objective <= 0:
        return 0.0
    return max(0.0, (objective - bound) / abs(objective))


#: Relative tolerance of "the objective meets the lower bound": the solvers' own (a bound and an objective
#: computed by different routes agree to about this).
MEETS_BOUND_REL_TOL = 1e-6


def meets_bound(objective: float | None, bound: float | None) -> bool:
    """Whether ``objective`` equals the proven lower ``bound`` within :data:`MEETS_BOUND_REL_TOL`: the plan is
    then optimal.

    Parameters
    ----------
    objective : float or None
    bound : float or None

    Returns
    -------
    bool
        False without a bound.

    Examples
    --------
    >>> meets_bound(0.0748862432, 0.0748862432), meets_bound(2.0, 2.0 - 1e-9), meets_bound(0.0, 0.0)
    (True, True, True)
    >>> meets_bound(2.0, 1.5), meets_bound(2.0, None)
    (False, False)
    """
    if objective is None or bound is None:
        return False
    return objective - bound <= MEETS_BOUND_REL_TOL * max(abs(objective), abs(bound))


MAX_TIME_LIMIT_S = 7 * 86400.0


def check_time_limit(time_limit) -> None:
    """Refuse a time limit that is not a positive, finite number of seconds up to :data:`MAX_TIME_LIMIT_S`.

    Parameters
    ----------
    time_limit : float or None
        Seconds; None (no limit) passes.

    Raises
    ------
    TopoplanError
        Naming the field ``time_limit``: zero, negative, infinite, NaN, over 7 days, or not a number.

    Examples
    --------
    >>> check_time_limit(10.0); check_time_limit(None)
    >>> check_time_limit(0.0)
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: field 'time_limit': must be a positive number of seconds up to 604800 (7 days), got 0.0
    """
    if time_limit is not None and (isinstance(time_limit, (bool, np.bool_))
                                   or not isinstance(time_limit, (int, float, np.integer, np.floating))
                                   or not 0 < time_limit <= MAX_TIME_LIMIT_S):
        # inf would let an annealer run forever: a limit is a finite budget
        raise TopoplanError(f"field 'time_limit': must be a positive number of seconds up to {MAX_TIME_LIMIT_S:g} "
                            f"(7 days), got {time_limit!r}")


SCORES = ("bound", "simulated")
# Simulated times closer than this (relative) are ties: the compiled and the reference engines agree to it
# (topoplan.sim.replay), so a candidate must beat the method's plan by more to replace it.
SIM_TIE_REL = 1e-9


# Replay cost per trace call on this 2-core machine (the compiled replay runs 1-1.7 M calls/s on NPB traces,
# README simulator benchmarks), kept conservative, plus a fixed cost per simulation (network, compile). A
# collective call that steps through its peers counts as its messages: NPB FT class B at 256 ranks is 3,072
# calls and 265,000 messages, replayed in 0.82 s (predicted 0.31 s by its calls, 0.83 s with its messages).
# Thousands of flows in flight at once cost more per message than this (IS at 256 ranks: 23 us a message
# against CG, MG, FT and LU's 3-4 us); the commands stop a replay that reports its progress at the deadline.
REPLAY_S_PER_CALL = 2e-6
REPLAY_FIXED_S = 0.3


def simulation_cost_s(trace) -> float:
    """Predicted seconds of one replay of ``trace``: :data:`REPLAY_S_PER_CALL` a call, the messages of the
    collective calls that step through their peers counted one by one
    (:func:`topoplan.traffic.collectives.peer_step_messages`), plus a fixed cost.

    Parameters
    ----------
    trace : Trace

    Returns
    -------
    float

    Examples
    --------
    >>> from topoplan.traffic.generators import parse_spec
    >>> round(simulation_cost_s(parse_spec("ring:np=4,bytes=1MB")), 3)
    0.3
    >>> round(simulation_cost_s(parse_spec("alltoall:np=64,bytes=1MB")), 3)   # 64 calls, 4,032 messages
    0.308
    """
    return replay_cost_s(len(trace) + peer_step_messages(trace))


def replay_cost_s(calls: int) -> float:
    """Predicted seconds of one replay of ``calls`` trace calls (messages of collectives that step through
    their peers counted one by one): :data:`REPLAY_FIXED_S` plus :data:`REPLAY_S_PER_CALL` a call.

    Parameters
    ----------
    calls : int

    Returns
    -------
    float

    Examples
    --------
    >>> round(replay_cost_s(0), 3), round(replay_cost_s(500_000), 3)
    (0.3, 1.3)
    """
    return REPLAY_FIXED_S + REPLAY_S_PER_CALL * max(int(calls), 0)



def solve_with(methods: Mapping[str, Callable], problem, method: str, *, problem_name: str | None = None,
               time_limit: float | None = None, seed: int | None = 0, validate: Callable | None = None,
               score: str = "bound", simulate: Callable[[dict], float] | None = None,
               starts: Mapping[str, tuple] | None = None, beside: bool = False, late: str = "simulate",
               keep_rel: float = SIM_TIE_REL, sim_cost: Callable[[], float] | None = None,
               share_limit: bool | None = None, **options) -> PlanResult:
    """Run ``methods[method]`` on ``problem`` and fill the common result fields.

    ``methods`` is a :class:`Registry` (or any mapping of name -> method); ``problem_name``
    defaults to the registry's. Before anything runs, the method name, ``options`` (each
    must be a parameter the method declares), ``time_limit`` and ``seed`` are checked:
    a mistyped option is an error naming it and the known ones, never a silent full run.

    With ``score="simulated"`` the result is judged by what the simulator measures: the method's plan and
    the plans of the heuristics it starts from (``starts[method]``, run here with the same seed) are each
    simulated with ``simulate(plan_dict) -> seconds``, and the fastest is returned (ties, within
    :data:`SIM_TIE_REL`, keep the method's own plan), so no method returns a plan that simulates slower than
    its starting heuristics. With ``beside`` (and a second CPU, :func:`topoplan.core.forked.available`) the
    starting heuristics' plans are simulated in a forked child while the method runs. With ``late="simulate"``
    a plan whose simulation is not back when the method ends is simulated after it, as without ``beside``;
    with ``late="drop"`` it is waited for at most until the method's ``time_limit`` (or the command's
    deadline) has passed since the method started, then left out of the comparison, and the result says so.
    The result then carries ``metrics["simulated_s"]``, ``metrics["simulated_candidates_s"]`` and
    ``metrics["picked"]``; a plan picked from a start keeps the method's proven ``bound`` (it bounds the
    method's objective, which the picked plan also has) and is no longer called optimal.

    Parameters
    ----------
    methods : Registry or mapping of str to callable
    problem : object
        The problem, passed to the method.
    method : str
    problem_name : str, optional
    time_limit : float, optional
        Seconds, at most :data:`MAX_TIME_LIMIT_S`.
    seed : int, optional
        Non-negative; recorded in the result.
    validate : callable, optional
        ``validate(problem, result)``, raising on an invalid plan.
    score : {"bound", "simulated"}, optional
    simulate : callable, optional
        ``plan_dict -> seconds``, needed for ``score="simulated"``.
    starts : mapping of str to tuple of str, optional
        The heuristics each method starts from.
    beside : bool, optional
        Simulate the starting heuristics' plans beside the method (``score="simulated"``).
    late : {"simulate", "drop"}, optional
        With ``beside``: what becomes of a start whose simulation is not back when the method ends.
    keep_rel : float, optional
        A start's plan replaces the method's only when it simulates faster by more than this fraction
        (default :data:`SIM_TIE_REL`, the engines' agreement); within it the method's plan is kept, and the
        result says so when a start was faster.
    sim_cost : callable, optional
        ``() -> CPU seconds`` of one simulation (e.g. :func:`simulation_cost_s` of the trace), called only when
        the candidates' simulations share the time limit (``share_limit``). Then they must fit in half of it
        (at the share of a CPU the command is getting, :func:`topoplan.core.deadline.scaled`), the method gets
        what they leave, and ``beside`` and ``late`` are chosen here (with a second CPU the starts' plans are
        simulated beside the method; when not all of them fit, a start not back in time is dropped); when
        even that does not fit, the plan is returned unchecked by simulation (``score="bound"``) and the
        result says so.
    share_limit : bool, optional
        Whether the simulations share ``time_limit`` (with ``sim_cost``): default only inside a command with
        a deadline (:mod:`topoplan.core.deadline`, whose limit is the whole command's); a library call's
        ``time_limit`` is then the method's own.
    **options
        The method's own options.

    Returns
    -------
    PlanResult
        With method, seed, problem, wall time and options filled in.

    Raises
    ------
    TopoplanError
        For an unknown method or option, a bad ``time_limit``, ``seed`` or ``score``.

    Examples
    --------
    >>> R = Registry("toy")
    >>> @R.register("double")
    ... def double(problem, *, time_limit=None, seed=0, factor: float = 2.0):
    ...     return PlanResult(method="", objective=problem * factor, plan={"value": problem * factor})
    >>> res = solve_with(R, 21, "double")
    >>> res.objective, res.method, res.seed, res.problem, res.options
    (42.0, 'double', 0, 'toy', {'time_limit': None})
    >>> solve_with(R, 21, "double", factr=3)
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: unknown option 'factr' for toy method 'double'; known: factor
    """
    if problem_name is None:
        problem_name = getattr(methods, "problem", "")
    if score not in SCORES:
        raise TopoplanError(f"field 'score': choose one of {', '.join(SCORES)}, got {score!r}")
    if late not in ("simulate", "drop"):
        raise TopoplanError(f"field 'late': choose simulate or drop, got {late!r}")
    if not 0 <= keep_rel < 1:
        raise TopoplanError(f"field 'keep_rel': must be in [0, 1), got {keep_rel!r}")
    if score == "simulated" and simulate is None:
        raise TopoplanError("field 'score': 'simulated' needs a simulator (simulate=plan -> seconds)")
    check_time_limit(time_limit)   # (before it is shared out)
    note, sims_s = "", 0.0
    if share_limit is None:
        share_limit = deadline.active()
    limit = deadline.budget(time_limit) if score == "simulated" and sim_cost is not None and share_limit else None
    if limit is not None:
        # the candidates' simulations share the limit: predicted (at the share of a CPU the command is getting:
        # under load a replay takes several times its CPU time), they must fit in half of it, and the method
        # gets what they leave. With a second CPU the starts' plans are simulated beside the method: when all
        # the candidates fit, the starts not back when the method ends are simulated after it; when they do
        # not, the method gets what its own plan's simulation leaves, and a start not back by the end of the
        # limit is not compared.
        n_cands = 1 + len(_starts_run(methods, starts, method))
        beside = n_cands > 1 and forked.available()
        cost_s = float(sim_cost())
        one_s, all_s = deadline.scaled(cost_s), deadline.scaled(n_cands * cost_s)
        if all_s <= 0.5 * limit or not beside:
            sims_s, late = all_s, "simulate"
        else:
            sims_s, late = one_s, "drop"
        if sims_s > 0.5 * limit:
            score, beside, sims_s = "bound", False, 0.0
            note = (f"not checked by simulation: simulating the {n_cands} candidates takes "
                    f"about {all_s:.0f} s, more than half of the time limit")
        else:
            time_limit = limit - sims_s
    # inside a command, the candidates' simulations are kept out of what the method gets from the deadline
    with deadline.reserved(sims_s):
        res = _solve_scored(methods, problem, method, problem_name=problem_name, time_limit=time_limit, seed=seed,
                            validate=validate, score=score, simulate=simulate, starts=starts, beside=beside,
                            late=late, keep_rel=keep_rel, **options)
    if note:
        res.add_note(note)
    return res


def _starts_run(methods: Mapping[str, Callable], starts: Mapping[str, tuple] | None, method: str) -> list:
    """The heuristics ``method`` starts from that are run beside it (each once; not itself, not unknown ones)."""
    return [n for n in dict.fromkeys((starts or {}).get(method, ())) if n != method and n in methods]


def _solve_scored(methods: Mapping[str, Callable], problem, method: str, *, problem_name: str,
                  time_limit: float | None, seed: int | None, validate: Callable | None, score: str,
                  simulate: Callable[[dict], float] | None, starts: Mapping[str, tuple] | None, beside: bool,
                  late: str, keep_rel: float, **options) -> PlanResult:
    """:func:`solve_with` once its arguments are checked and the limit is shared out."""
    # the starting heuristics run first: inside a command with a time limit the method then gets what they left
    # (topoplan.core.deadline); one that would start past the deadline is not run
    t0 = time.perf_counter()
    others: dict[str, PlanResult] = {}
    skipped = []
    for name in _starts_run(methods, starts, method) if score == "simulated" else ():
        if not deadline.fits(0.0):
            skipped.append(name)
            continue
        others[name] = _solve_one(methods, problem, name, problem_name=problem_name, time_limit=None,
                                  seed=seed, validate=validate)
    starts_s = time.perf_counter() - t0
    # a plan is simulated once (heuristics often agree); with ``beside``, the starts' plans in a child meanwhile
    keys = {name: _plan_key(r) for name, r in others.items()}
    holder = {}   # each distinct plan -> the first start that has it
    for name, key in keys.items():
        holder.setdefault(key, name)
    distinct = list(holder)
    child, got = None, {}
    if beside and score == "simulated" and distinct and forked.available():
        child = forked.Forked(simulate,
                              [others[holder[k]].to_dict() for k in distinct])
    t_method = time.perf_counter()
    try:
        res = _solve_one(methods, problem, method, problem_name=problem_name, time_limit=time_limit, seed=seed,
                         validate=validate, **options)
        t_done = time.perf_counter()
        if child is not None and res.status != "interrupted":
            wait = 0.0 if late == "simulate" else None   # (simulate: the rest are simulated here, below)
            if wait is None and time_limit is not None:
                wait = float(time_limit) - (time.perf_counter() - t_method)
            left = deadline.remaining()
            if left is not None:
                wait = left if wait is None else min(wait, left)
            got = child.collect(timeout_s=None if wait is None else max(wait, 0.0))
    finally:
        if child is not None:
            child.close()
    if skipped:
        res.add_note(f"not compared with {', '.join(skipped)}: the time limit was reached")
    if score == "bound" or res.status == "interrupted":   # interrupted: the user wants the plan now
        return res
    t0 = t_done - starts_s   # the result's wall time: the method's, the starts' and what the check adds
    candidates = {method: res, **others}
    seen = {} if child is None else {distinct[i]: v for i, v in got.items()}
    dropped = [] if child is None or late == "simulate" else [n for n in others if keys[n] not in seen]
    for name in dropped:
        del candidates[name]
    if dropped:
        res.add_note(f"not compared with {', '.join(dropped)}: "
                     + ("its simulation" if len(dropped) == 1 else "their simulations")
                     + " did not end within the time limit")
    times = {}
    for name, r in candidates.items():
        key = _plan_key(r) if name == method else keys[name]
        if key not in seen:
            seen[key] = float(simulate(r.to_dict()))
        times[name] = seen[key]
    best = min(times, key=lambda k: (times[k], k != method))
    if times[best] >= times[method] * (1 - max(keep_rel, SIM_TIE_REL)):   # a tie, or closer than asked
        if times[best] < times[method] * (1 - SIM_TIE_REL):
            res.add_note(f"kept its plan: {best}'s simulates {100 * (1 - times[best] / times[method]):.2g}% faster, "
                         f"within the {100 * keep_rel:.2g}% a start must gain to replace it")
        best = method
    if best != method:
        picked = candidates[best]
        res.plan, res.objective = picked.plan, picked.objective
        res.metrics = {**picked.metrics, **{k: v for k, v in res.metrics.items() if k not in picked.metrics}}
        res.gap = gap_of(res.objective, res.bound)
        if res.status == "optimal":
            res.status = "feasible"
        res.add_note(f"kept {best}'s plan: it simulates faster ({times[best]:.6g} s vs {times[method]:.6g} s)")
    res.metrics["simulated_s"] = times[best]
    res.metrics["simulated_candidates_s"] = times
    res.metrics["picked"] = best
    res.options["score"] = "simulated"
    res.wall_s += time.perf_counter() - t0
    return res


def _plan_key(res: PlanResult) -> str:
    """What makes two results the same plan (their plan's fields; underscored ones are notes)."""
    return repr(sorted((k, v) for k, v in res.plan.items() if not k.startswith("_")))


def _solve_one(methods: Mapping[str, Callable], problem, method: str, *, problem_name: str,
               time_limit: float | None = None, seed: int | None = 0, validate: Callable | None = None,
               **options) -> PlanResult:
    if method not in methods:
        raise UnknownMethodError(f"unknown {problem_name} method {method!r} (methods: {', '.join(methods)})")
    fn = methods[method]
    if not _takes_any(fn):    # a Registry refuses **kwargs methods; a plain dict may still hold one
        check_options(options, declared_options(fn), f"{problem_name} method {method!r}")
    check_time_limit(time_limit)
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
        raise TopoplanError(f"field 'seed': must be a non-negative integer, got {seed!r}")
    # inside a command with a time limit: never past the process's deadline (the limit given is recorded)
    limit = deadline.budget(time_limit)
    t0 = time.perf_counter()
    with graceful_stop():   # the first Ctrl-C ends the search with its best plan, the second aborts
        res = fn(problem, time_limit=limit, seed=seed, **options)
        if stop_requested():
            res.status = "interrupted"
            res.add_note("stopped by Ctrl-C: the best plan found so far")
    res.wall_s = time.perf_counter() - t0
    if time_limit is not None and limit is not None and limit < 0.5 * time_limit:   # most of it went elsewhere
        res.add_note(f"the method had {limit:.2f} s of the {time_limit:.4g} s time limit: the command's other stages "
                     "(starting, loading, building, simulating, writing) take the rest")
    res.method = method
    res.seed = seed
    res.problem = problem_name
    fingerprint = getattr(problem, "fingerprint", None)
    if callable(fingerprint):   # the inputs the plan was made for (topoplan.core.fingerprint)
        res.inputs = fingerprint()
    if res.gap is None and res.bound is not None:
        res.gap = gap_of(res.objective, res.bound)
    if res.status in ("feasible", "timeout") and meets_bound(res.objective, res.bound):
        res.status = "optimal"   # a plan that meets a proven lower bound is optimal, whoever proved the bound
    res.options = {"time_limit": time_limit, **{k: v for k, v in options.items() if _plain(v)}, **res.options}
    if res.status not in STATUSES:
        raise AssertionError(f"method {method} returned status {res.status!r}")
    if validate is not None:
        validate(problem, res)
    return res


def _takes_any(fn) -> bool:
    return any(p.kind is p.VAR_KEYWORD for p in inspect.signature(fn).parameters.values())


def _plain(v) -> bool:
    return isinstance(v, (int, float, str, bool, type(None), list, tuple))
