"""One contract for every planning method of every problem (the shape of scikit-learn's estimator checks).

Every (problem, method) pair of the three registries -- circuits, placement, Bcast -- runs on a small
fixed instance and must: return the common result keys with the seed recorded; stay within its time
limit (plus a small constant); return a plan the problem's validator accepts; refuse an option it does
not declare, naming it and the known ones, before running; and, with ``score="simulated"``, return a plan
that simulates no slower than the heuristics it starts from (``STARTS``). A method whose optional peer
module is missing here (kahip, scotch, ortools) is skipped with the reason. The builders share one shape:
``build(topology, traffic, placement=None, **options)``, refusing unknown options with the known ones.
"""

from __future__ import annotations

import functools
import gc
import inspect
import time
from dataclasses import dataclass
from typing import Callable

import pytest

import topoplan.problems.bcast as bcast
import topoplan.problems.circuits as circuits
import topoplan.problems.placement as placement
from topoplan.core.errors import TopoplanError
from topoplan.problems.result import SOLVE_OPTIONS, STATUSES, Registry

from timing import Stopwatch, within_limit

TIME_LIMIT_S = 0.5
# what a time limit may be overrun by: building the model, decoding, validation, a solver's start-up
SLACK_S = 2.0
SEED = 3
KEYS = ("problem", "method", "seed", "objective", "metrics", "bound", "gap", "status", "wall_s", "options")


@dataclass
class Case:
    """One problem: its package, a small instance, its validator and its simulator (plan dict -> seconds)."""

    module: object
    problem: object
    validate: Callable
    simulate: Callable


@functools.lru_cache(maxsize=None)
def case(name: str) -> Case:
    from topoplan.core.topology_io import load_topology
    from topoplan.traffic.sources import load_traffic

    if name == "circuits":
        topo = load_topology("paper003", ["ocs.nodes_per_switch=2"])     # 4 switches, 2 OCS nodes each
        prob = circuits.build(topo, load_traffic("neighbor2d:rows=8,cols=8,bytes=4MB,iters=1"))

        def validate(p, res):
            circuits.validate_plan(p, res)
            circuits.validate_plan_dict(res.to_dict(), p.topology)

        return Case(circuits, prob, validate, circuits.problem.plan_simulator(prob))
    if name == "placement":
        topo = load_topology("paper003")                                  # hybrid: joint runs too
        prob = placement.build(topo, load_traffic("neighbor2d:rows=4,cols=8,bytes=4MB,iters=1"))

        def validate(p, res):
            placement.problem.validate_result(p, res)
            if "circuits" in res.plan:                                    # joint: its circuit plan too
                circuits.validate_plan_dict(res.to_dict(), p.topology)

        return Case(placement, prob, validate, functools.partial(placement.simulated_time, prob))
    if name == "bcast":
        from topoplan.problems.bcast.allocation import parse_spec

        topo = load_topology("paper000")
        prob = bcast.build(topo, placement=parse_spec("gen:nodes=16,racks=4,seed=1", topo), root=2, bytes_B=65536)
        return Case(bcast, prob, bcast.validate_plan,
                    lambda plan: bcast.problem.simulated_time(prob, plan["order"], max_messages=float("inf")))
    raise KeyError(name)


PROBLEMS = ("circuits", "placement", "bcast")
REGISTRIES: dict[str, Registry] = {"circuits": circuits.METHODS, "placement": placement.METHODS,
                                   "bcast": bcast.METHODS}


def _pairs():
    out = []
    for name in PROBLEMS:
        reg = REGISTRIES[name]
        for m in reg:
            why = reg.unavailable(m)
            marks = [pytest.mark.skip(reason=f"{name} method {m}: {why}")] if why else []
            out.append(pytest.param(name, m, marks=marks, id=f"{name}-{m}"))
    return out


PAIRS = _pairs()
ALL_PAIRS = [pytest.param(*p.values, id=p.id) for p in PAIRS]     # signatures need no peer module


@functools.lru_cache(maxsize=None)
def _warm_simulator() -> None:
    """Load (on a fresh machine: compile) the simulator's Numba kernels once, so that no timed call pays
    the one-off compilation (~20 s on a new machine; the Bcast solve simulates its plan)."""
    from topoplan.core.placement import sequential
    from topoplan.core.topology_io import load_topology
    from topoplan.traffic.sources import load_source
    from topoplan.sim.run import simulate

    topo = load_topology("paper003", ["kind=tree", "ocs=null"])
    simulate(topo, load_source("ring:np=4,bytes=1MB")[0], sequential(4, topo))


@functools.lru_cache(maxsize=None)
def solved(name: str, method: str):
    """The method's result on the problem's instance (once per pair), and the wall time around the call."""
    _warm_simulator()
    c = case(name)
    watch = Stopwatch()
    res = c.module.solve(c.problem, method, time_limit=TIME_LIMIT_S, seed=SEED)
    watch.stop()
    return res, (watch.wall_s, watch)


# -- the registries and builders ------------------------------------------------------------------

def test_every_problem_is_covered():
    assert {p.values[0] for p in PAIRS} == set(PROBLEMS)
    assert len(PAIRS) == sum(len(r) for r in REGISTRIES.values())


@pytest.mark.parametrize("name", PROBLEMS)
def test_registry_is_a_mapping_refusing_unknown_methods(name):
    reg = REGISTRIES[name]
    assert reg.problem == name and list(reg) == list(reg.keys()) and len(reg) == len(list(reg))
    first = next(iter(reg))
    assert first in reg and callable(reg[first]) and "no-such" not in reg
    with pytest.raises(TopoplanError, match=rf"unknown {name} method 'no-such' \(methods: {first}, "):
        reg["no-such"]
    with pytest.raises(KeyError):
        reg["no-such"]
    c = case(name)
    with pytest.raises(TopoplanError, match=rf"unknown {name} method 'no-such'"):
        c.module.solve(c.problem, "no-such")


@pytest.mark.parametrize("name", PROBLEMS)
def test_builders_share_one_shape_and_refuse_unknown_options(name):
    mod = case(name).module
    params = list(inspect.signature(mod.build).parameters.values())
    assert [p.name for p in params[:3]] == ["topology", "traffic", "placement"]
    assert params[2].default is None
    assert all(p.kind is p.KEYWORD_ONLY for p in params[3:]), "builder options are keyword-only"
    known = ", ".join(p.name for p in params[3:])
    c = case(name)
    args = (c.problem.topology, None, c.problem.nodes) if name == "bcast" else (c.problem.topology, c.problem.traffic)
    with pytest.raises(TopoplanError, match=rf"unknown option 'bogus' for \w+Problem\.build; known: {known}$"):
        mod.build(*args, bogus=1)


@pytest.mark.parametrize("name, placement_, options, needle", [
    ("circuits", None, {"hop_limit": "abc"}, "field 'hop_limit': expected an integer, got 'abc'"),
    ("circuits", None, {"max_circuits": "x"}, "field 'max_circuits': expected an integer, got 'x'"),
    ("circuits", None, {"max_step_types": 1.5}, "field 'max_step_types': expected an integer, got 1.5"),
    ("circuits", None, {"threshold_B": "4MB"}, "field 'threshold_B': expected a number, got '4MB'"),
    ("circuits", "sequential", {}, "field 'placement': expected a list of integers"),
    ("circuits", 5, {}, "field 'placement': expected a list of integers"),
    ("bcast", [0, 1, 2], {"root": "x"}, "field 'root': expected an integer, got 'x'"),
    ("bcast", [0, 1, 2], {"bytes_B": "1MB"}, "field 'bytes_B': expected a number, got '1MB'"),
    ("bcast", "abc", {}, "field 'placement': expected a list of integers"),
    ("bcast", [0, 99999], {}, "field 'placement': item 1: node 99999 is not a node of the topology"),
])
def test_builders_refuse_option_values_of_the_wrong_type(name, placement_, options, needle):
    """Once a TypeError, ValueError or IndexError from deep inside the builder (a sweep's cells showed them)."""
    c = case(name)
    traffic = None if name == "bcast" else c.problem.traffic
    with pytest.raises(TopoplanError, match=needle.replace("(", r"\(")):
        c.module.build(c.problem.topology, traffic, placement_, **options)


@pytest.mark.parametrize("name, options, needle", [
    ("circuits", {"time_limit": "5"}, "field 'time_limit': must be a positive number of seconds"),
    ("circuits", {"max_steps": "abc"}, "field 'max_steps': expected an integer, got 'abc'"),
    ("circuits", {"max_steps": -3}, "field 'max_steps': must be at least 0, got -3"),
    ("placement", {"max_steps": "abc"}, "field 'max_steps': expected an integer, got 'abc'"),
])
def test_solve_refuses_option_values_of_the_wrong_type(name, options, needle):
    c = case(name)
    with pytest.raises(TopoplanError, match=needle):
        c.module.solve(c.problem, "anneal", **options)


def test_registering_a_method_with_a_catch_all_or_without_the_solve_options_fails():
    reg = Registry("toy")
    with pytest.raises(TypeError, match="no \\*\\*kwargs"):
        reg.register("loose")(lambda problem, *, time_limit=None, seed=0, **_: None)
    with pytest.raises(TypeError, match="missing seed"):
        reg.register("seedless")(lambda problem, *, time_limit=None: None)
    assert len(reg) == 0


def test_a_registry_that_names_its_modules_imports_a_method_when_asked_for_it():
    import sys

    reg = Registry("toy", modules={"metis": "topoplan.problems.placement.metis", "later": "json"})
    assert list(reg) == ["metis", "later"] and "later" in reg and len(reg) == 2     # listing imports nothing
    assert reg._methods == {}
    with pytest.raises(TopoplanError, match=r"unknown toy method 'nope' \(methods: metis, later\)"):
        reg["nope"]
    with pytest.raises(TypeError, match="registered by tests?.*names no module"):
        reg.register("stray")(lambda problem, *, time_limit=None, seed=0: None)
    # the placement registry: each name is registered by the module it names (imported on demand)
    for name in placement.METHODS:
        fn = placement.METHODS[name]
        assert fn.__module__ == placement.METHODS._modules[name] and fn.__module__ in sys.modules


# -- every method ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name, method", ALL_PAIRS)
def test_method_declares_its_options(name, method):
    fn = REGISTRIES[name][method]
    params = inspect.signature(fn).parameters
    assert not any(p.kind is p.VAR_KEYWORD for p in params.values()), "no **kwargs: every option is declared"
    for opt in SOLVE_OPTIONS:
        assert opt in params and params[opt].kind is params[opt].KEYWORD_ONLY, opt
    assert REGISTRIES[name].options(method) == tuple(n for n in params if n not in SOLVE_OPTIONS)[1:]


@pytest.mark.parametrize("name, method", PAIRS)
def test_result_has_the_common_keys_and_records_the_seed(name, method):
    res, _ = solved(name, method)
    d = res.to_dict()
    assert all(k in d for k in KEYS), [k for k in KEYS if k not in d]
    assert (d["problem"], d["method"], d["seed"]) == (name, method, SEED)
    assert d["status"] in STATUSES and isinstance(d["metrics"], dict) and isinstance(d["options"], dict)
    assert d["objective"] >= 0 and d["wall_s"] >= 0 and d["options"]["time_limit"] == TIME_LIMIT_S
    if d["bound"] is not None:
        assert d["bound"] <= d["objective"] * (1 + 1e-9) + 1e-12 and 0 <= d["gap"] <= 1


@pytest.mark.parametrize("name, method", PAIRS)
def test_time_limit_is_honoured(name, method):
    res, (outer, watch) = solved(name, method)
    # seconds of work past the limit, at the speed the process ran (a loaded machine slows every step)
    assert within_limit(res.wall_s, TIME_LIMIT_S, SLACK_S, watch), (res.wall_s, watch.cpu_s)
    assert within_limit(outer, TIME_LIMIT_S, SLACK_S + 1.0, watch), outer     # the solve layer around it adds little


@pytest.mark.parametrize("name, method", PAIRS)
def test_plan_validates(name, method):
    res, _ = solved(name, method)
    case(name).validate(case(name).problem, res)


@pytest.mark.parametrize("name, method", PAIRS)
def test_unknown_option_is_refused_before_running(name, method):
    c = case(name)
    known = ", ".join(REGISTRIES[name].options(method)) or "(none)"
    # the work of this process alone, without the garbage collector: a collection of what earlier tests left (or
    # a child process of theirs reaped meanwhile, which os.times counts) once took 0.22 s of CPU here
    gc.collect()
    gc.disable()
    try:
        cpu0 = time.process_time()
        with pytest.raises(TopoplanError) as e:
            c.module.solve(c.problem, method, time_limit=TIME_LIMIT_S, seed=SEED, max_step=50)
        cpu_s = time.process_time() - cpu0
    finally:
        gc.enable()
    assert str(e.value) == f"unknown option 'max_step' for {name} method '{method}'; known: {known}"
    assert cpu_s < 0.1 * TIME_LIMIT_S, "refused before anything ran"   # work: wall time is load's


@pytest.mark.parametrize("name, method", PAIRS)
def test_score_simulated_is_no_slower_than_the_starts(name, method):
    c = case(name)
    res = c.module.solve(c.problem, method, time_limit=TIME_LIMIT_S, seed=SEED, score="simulated")
    c.validate(c.problem, res)
    t = res.metrics["simulated_s"]
    assert t == pytest.approx(c.simulate(res.to_dict()), rel=1e-9)
    starts = c.module.STARTS.get(method, ())
    assert set(res.metrics["simulated_candidates_s"]) == {method, *starts}
    for start in starts:
        other = c.module.solve(c.problem, start, seed=SEED)
        assert t <= c.simulate(other.to_dict()) * (1 + 1e-9), start
    assert res.options["score"] == "simulated"


@pytest.mark.parametrize("problem", ["circuits", "placement", "bcast"])
@pytest.mark.parametrize("topology, traffic, field", [("paper003", None, "topology"),
                                                      (None, "ring:np=8,bytes=1MB", "traffic"),
                                                      (None, 5, "traffic")])
def test_builders_refuse_inputs_of_the_wrong_kind(problem, topology, traffic, field):
    # a spec string where the loaded object belongs stopped with an AttributeError from inside
    from topoplan.core.topology_io import load_topology
    from topoplan.problems.bcast import BcastProblem
    from topoplan.problems.circuits import CircuitProblem
    from topoplan.problems.placement import PlacementProblem

    build = {"circuits": CircuitProblem, "placement": PlacementProblem, "bcast": BcastProblem}[problem].build
    topo = topology if topology is not None else load_topology("paper003")
    # (a Bcast's traffic is the Bcast itself: any traffic given is refused, saying so)
    expect = "a Bcast problem's traffic is" if (problem, field) == ("bcast", "traffic") else "expected a"
    with pytest.raises(TopoplanError, match=f"field '{field}': {expect}"):
        build(topo, traffic)


@pytest.mark.parametrize("status, objective, bound, expected", [
    ("feasible", 2.0, 2.0, "optimal"),             # the bound proves the plan optimal
    ("timeout", 2.0, 2.0 * (1 - 1e-9), "optimal"),  # within the solvers' tolerance
    ("feasible", 0.0, 0.0, "optimal"),
    ("feasible", 2.0, 1.5, "feasible"),             # a gap left
    ("timeout", 2.0, 1.9, "timeout"),
    ("feasible", 2.0, None, "feasible"),            # no bound, no proof
    ("heuristic", 2.0, 2.0, "heuristic"),           # a heuristic's floor does not change what it is
    ("interrupted", 2.0, 2.0, "interrupted"),
])
def test_a_result_whose_bound_meets_its_objective_is_optimal(status, objective, bound, expected):
    """For every problem (solve_with fills the status): a proven lower bound equal to the objective makes the
    plan optimal, whatever the method called it (ilp said 'feasible' with gap 0.0%)."""
    from topoplan.problems.result import solve_with

    toy = Registry("toy")

    @toy.register("m")
    def m(problem, *, time_limit=None, seed=0):
        from topoplan.problems.result import PlanResult
        return PlanResult(method="", objective=objective, plan={"x": 1}, status=status, bound=bound)

    res = solve_with(toy, None, "m")
    assert res.status == expected
