"""A command's --time-limit bounds the whole command (topoplan/core/deadline.py): the method gets what loading
left, minus what the stages after it need; a stage that cannot fit is skipped and the result says so.

Behaviour only, never wall-clock speed (that is benchmarks/bench_time_limits.py --process): each test puts the
deadline where its outcome does not depend on the machine's load (far past, or far ahead).
"""

import json
import time

import pytest

from topoplan.core import deadline
from topoplan.core.topology_io import load_topology
from topoplan.problems import circuits, placement
from topoplan.traffic.sources import load_traffic


@pytest.fixture
def spent(monkeypatch):
    """The command started an hour ago: whatever its limit, the deadline is past."""
    monkeypatch.setattr(deadline, "_START", [(time.monotonic() - 3600.0, 0.0)])


def _circuit_problem():
    return circuits.CircuitProblem.build(load_topology("paper003", ["ocs.nodes_per_switch=4"]),
                                         load_traffic("neighbor2d:rows=16,cols=16,bytes=4MB"))


def _placement_problem():
    return placement.PlacementProblem.build(load_topology("paper003"), load_traffic("neighbor2d:rows=16,cols=16,bytes=4MB"))


@pytest.mark.parametrize("solve, build, method", [
    (circuits.solve, _circuit_problem, "anneal"),
    (placement.solve, _placement_problem, "anneal"),
])
def test_past_the_deadline_a_method_still_returns_a_valid_plan_and_says_what_it_had(spent, solve, build, method):
    prob = build()
    with deadline.bounded(30.0):
        res = solve(prob, method, time_limit=30.0, seed=0)
    assert res.status in ("heuristic", "feasible", "optimal", "time_limit")
    assert f"the method had {deadline.MIN_BUDGET_S:.2f} s of the 30 s time limit" in res.message
    assert res.options["time_limit"] == 30.0       # the limit the user gave is recorded


def test_without_a_deadline_the_limit_is_the_methods_own():
    res = circuits.solve(_circuit_problem(), "anneal", time_limit=0.5, seed=0)
    assert "the method had" not in (res.message or "")
    assert deadline.remaining() is None and deadline.budget(0.5) == 0.5


def test_a_reserve_is_kept_for_the_stages_after_the_method():
    with deadline.bounded(3600.0):
        assert 3500.0 < deadline.budget(None) <= 3600.0
        with deadline.reserved(1000.0):
            assert 2500.0 < deadline.budget(None) <= 2600.0
            assert deadline.budget(60.0) == 60.0 and deadline.fits(2000.0) and not deadline.fits(4000.0)
        assert deadline.budget(None) > 3500.0
    assert deadline.budget(None) is None and deadline.fits(1e12)


def _written_not_simulated(run_cli, command, out, limit: str, note: str) -> dict:
    """``command`` with ``--time-limit limit`` writes its plan to ``out``, not simulated, and says ``note``."""
    code, _, err = run_cli(*command, "--time-limit", limit, "--json", "-o", out)
    assert code == 0, err
    doc = json.loads(out.read_text())
    assert "simulated_s" not in doc["metrics"] and "simulated_time_s" not in doc["metrics"]
    assert note in doc["message"]
    return doc


@pytest.mark.parametrize("command", [
    ["circuits", "-t", "paper003", "--set", "ocs.nodes_per_switch=4", "-T", "neighbor2d:rows=16,cols=16,bytes=4MB",
     "-m", "greedy", "--simulate"],
    ["place", "-t", "paper003", "-T", "neighbor2d:rows=16,cols=16,bytes=4MB", "-m", "greedy", "--simulate"],
])
def test_a_simulation_that_cannot_fit_is_skipped_and_the_plan_still_written(run_cli, tmp_path, command):
    """A limit shorter than any simulation (each costs at least 0.3 s by the prediction): the plan is written,
    not simulated, and the result says why."""
    out = tmp_path / "plan.json"
    doc = _written_not_simulated(run_cli, command, out, "0.01", "not simulated: it takes about")
    assert "writing the result" in doc["message"]      # what the stages after it take counts too
    code, stdout, err = run_cli(*command, "--time-limit", "600", "--json", "-o", out)   # room enough: simulated
    assert code == 0, err
    doc = json.loads(out.read_text())
    assert "not simulated" not in (doc.get("message") or "")
    assert doc["metrics"].get("simulated_s", doc["metrics"].get("simulated_time_s")) > 0


def test_the_deadline_is_gone_after_the_command(run_cli, tmp_path):
    code, _, err = run_cli("place", "-t", "paper003", "-T", "ring:np=16,bytes=1MB", "-m", "greedy", "--time-limit",
                           "5", "-o", tmp_path / "p.json")
    assert code == 0, err
    assert deadline.remaining() is None


def test_starting_heuristics_run_first_and_are_skipped_past_the_deadline(monkeypatch):
    """score='simulated' compares a method with the heuristics it starts from: they run before it, so the
    method gets what they leave of the limit, and past the deadline they are not run (the result says so)."""
    from topoplan.problems.result import PlanResult, Registry, solve_with

    R = Registry("toy")
    ran = []

    def method(name, value):
        def run(problem, *, time_limit=None, seed=0):
            ran.append((name, time_limit))
            return PlanResult(method="", objective=value, plan={"value": value})
        return run

    R.register("exact")(method("exact", 2.0))
    R.register("quick")(method("quick", 1.0))
    kw = dict(score="simulated", simulate=lambda plan: plan["value"], starts={"exact": ("quick",)}, time_limit=5.0)
    res = solve_with(R, None, "exact", **kw)
    assert [n for n, _ in ran] == ["quick", "exact"] and res.metrics["picked"] == "quick"
    ran.clear()
    monkeypatch.setattr(deadline, "_START", [(time.monotonic() - 3600.0, 0.0)])
    with deadline.bounded(5.0):
        res = solve_with(R, None, "exact", **kw)
    assert ran == [("exact", deadline.MIN_BUDGET_S)]
    assert "not compared with quick: the time limit was reached" in res.message and res.metrics["picked"] == "exact"


@pytest.mark.parametrize("as_program, late", [(True, True), (False, False)])
def test_run_as_a_program_the_limit_counts_from_the_process_start(monkeypatch, capsys, tmp_path, as_program, late):
    """``topoplan`` as a program (``main()`` reading ``sys.argv``) counts its interpreter's start-up and imports
    against the limit: a process that started an hour ago is past any deadline. Called with its arguments (a
    test, a notebook), the command counts from its own start."""
    from topoplan.cli.main import main

    monkeypatch.setattr(deadline, "process_age_s", lambda: 3600.0)
    out = tmp_path / "p.json"
    args = ["place", "-t", "paper003", "-T", "neighbor2d:rows=16,cols=16,bytes=4MB", "-m", "anneal",
            "--max-steps", "5", "--time-limit", "600", "-o", str(out)]
    if as_program:
        monkeypatch.setattr("sys.argv", ["topoplan", *args])
        assert main() == 0
    else:
        assert main(args) == 0
    doc = json.loads(out.read_text())
    assert ("the method had 0.05 s of the 600 s time limit" in (doc.get("message") or "")) == late
    assert (doc["options"]["init"] == "sequential") == late


@pytest.mark.parametrize("command", [
    ["circuits", "-t", "paper003", "--set", "ocs.nodes_per_switch=4", "-T", "ring:np=16,bytes=1MB,iters=3",
     "-m", "greedy", "--model", "paper"],
    ["place", "-t", "paper003", "-T", "ring:np=16,bytes=1MB,iters=3", "-m", "greedy", "--simulate", "--model",
     "paper"],
])
def test_a_simulation_that_runs_past_the_deadline_is_stopped_and_the_plan_still_written(run_cli, tmp_path, command,
                                                                                       monkeypatch):
    """A simulation predicted to fit that reaches the deadline as it runs (here: the deadline moved to the past
    at its first progress report) stops there; the plan is written and the result says so."""
    import topoplan.sim.run as run_mod

    real = run_mod.report

    def late(**k):
        if deadline._DEADLINE:
            deadline._DEADLINE[0] = time.monotonic() - 1.0
        real(**k)

    monkeypatch.setattr(run_mod, "report", late)
    out = tmp_path / "plan.json"
    _written_not_simulated(run_cli, command, out, "600", "not simulated: stopped at the time limit")
    code, stdout, err = run_cli(*command, "--json", "-o", out)      # no limit: nothing stops
    assert code == 0, err
    assert "stopped" not in (json.loads(out.read_text()).get("message") or "")


def _score_case(name):
    """(problem, its solve, its registry, the method's options) of a small problem for --score simulated."""
    from topoplan.problems import bcast
    from topoplan.problems.bcast.allocation import cluster
    from topoplan.traffic.sources import load_inputs

    if name == "circuits":
        topo, trace, tr, pl = load_inputs("paper003", ["ocs.nodes_per_switch=2"], "ring:np=64,bytes=4MB",
                                          "sequential")
        return circuits.CircuitProblem.build(topo, tr, pl), circuits.solve, circuits.METHODS, {"trace": trace}
    if name == "placement":
        return _placement_problem(), placement.solve, placement.METHODS, {}
    prob = bcast.BcastProblem.build(cluster(4, 4), placement=list(range(0, 16, 2)), root=0, bytes_B=1024,
                                    tree="binomial")
    return prob, bcast.solve, bcast.METHODS, {}


@pytest.mark.parametrize("problem", ["circuits", "placement", "bcast"])
@pytest.mark.parametrize("fixed_s, checked", [(1000.0, False), (1.0, True)])
def test_explicit_score_simulated_fits_its_candidates_simulations_in_the_commands_limit(monkeypatch, problem,
                                                                                        fixed_s, checked):
    """--score simulated inside a command (circuits, place, bcast): the candidates' simulations share the
    command's limit as under --score auto (they once ran after the method, which had the whole limit, and the
    command overran it); when they cannot fit in half of it the plan is not checked by simulation and the
    result says so."""
    from topoplan.problems import result

    prob, solve, methods, extra = _score_case(problem)
    monkeypatch.setattr(result, "REPLAY_FIXED_S", fixed_s)   # every simulation predicted at fixed_s or more
    given = []
    real = methods["anneal"]

    def spy(problem, **kw):
        given.append(kw["time_limit"])
        return real(problem, **kw)

    monkeypatch.setitem(methods._methods, "anneal", spy)
    with deadline.bounded(60.0):
        res = solve(prob, "anneal", time_limit=60.0, score="simulated", max_steps=20, **extra)
    assert ("simulated_s" in res.metrics) == checked
    assert ("not checked by simulation" in res.message) != checked
    # checked: at least two candidates of 1 s each kept out of the method's limit (it had ~60 s before)
    assert given[0] <= (58.0 if checked else 60.0)
    # a library call without a command's deadline: the time limit stays the method's own
    given.clear()
    res = solve(prob, "anneal", time_limit=60.0, score="simulated", max_steps=20, **extra)
    assert given == [60.0] and "simulated_s" in res.metrics


@pytest.mark.parametrize("spec, stops", [("ring:np=8,bytes=1MB,iters=4000", True),     # 12,000 blocks
                                         ("npb:kernel=cg,class=S,np=64", True),        # 12,627 blocks
                                         ("npb:kernel=cg,class=S,np=16,iters=1", False)])  # 1,107 blocks
def test_generating_a_trace_stops_at_the_commands_deadline(spent, spec, stops):
    """A generator spec's trace is generated within the command's limit: past its deadline the generation
    stops with an error naming the spec (it once ran on, 10 s of LU at 256 ranks past a 10 s limit), after at
    most one check's worth of blocks (builder.CHECK_EVERY; a smaller trace, milliseconds, is generated whole,
    as a method still gets its least budget); without a deadline it is generated whole."""
    from topoplan.traffic import builder
    from topoplan.traffic.sources import load_source

    with deadline.bounded(30.0):
        if stops:
            with pytest.raises(deadline.DeadlineReached,
                               match=rf"^traffic spec '{spec}': generating the trace stopped at the time limit"):
                load_source(spec)
        else:
            assert len(load_source(spec)[0]) > 0
    assert builder.CHECK_EVERY == 8192   # (the sizes above are either side of it)
    trace, traffic = load_source(spec)
    assert len(trace) > 0 and traffic.n_ranks == trace.n_ranks


@pytest.mark.parametrize("command", ["circuits", "place"])
def test_a_command_past_its_deadline_while_generating_its_trace_is_an_error(spent, monkeypatch, run_cli, tmp_path,
                                                                          command):
    monkeypatch.setattr(deadline, "mark_start", lambda process=False: None)   # keep the start an hour ago
    out = tmp_path / "plan.json"
    code, stdout, err = run_cli(command, "-t", "paper003", "-T", "ring:np=8,bytes=1MB,iters=4000",
                                "--time-limit", "30", "-o", out)
    assert code == 2 and not out.exists() and stdout == ""
    assert err.startswith("error: traffic spec 'ring:np=8,bytes=1MB,iters=4000': generating the trace "
                          "stopped at the time limit") and err.count("\n") == 1
