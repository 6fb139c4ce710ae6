"""Plans judged by what is simulated: with score='simulated' no method returns a plan that simulates slower
than the heuristics it starts from, on the 003 and 000 systems, under both relay models."""

import pytest

from topoplan.traffic.sources import load_inputs
from topoplan.core.errors import TopoplanError

NEIGHBOR_003 = "neighbor2d:rows=16,cols=16,bytes=4MB,iters=1"
NEIGHBOR_000 = "neighbor2d:rows=8,cols=16,bytes=40MB,iters=1"
RELAYS = ["pipelined", "store-and-forward"]


def _circuit_problem(system):
    from topoplan.problems.circuits import CircuitProblem

    if system == "003":
        topo, trace, tr, pl = load_inputs("paper003", ["ocs.nodes_per_switch=2"], NEIGHBOR_003, "sequential")
        return CircuitProblem.build(topo, tr, pl), trace
    topo, trace, tr, pl = load_inputs("paper000", [], NEIGHBOR_000, "sequential")
    return CircuitProblem.build(topo, tr, pl, threshold_B=8192.0, max_circuits=6), trace


@pytest.mark.parametrize("relay", RELAYS)
@pytest.mark.parametrize("system", ["003", "000"])
@pytest.mark.parametrize("method, opts", [("ilp", {}), ("anneal", {"max_steps": 30})])
def test_circuit_methods_never_simulate_slower_than_their_starts(system, method, opts, relay):
    from topoplan.problems.circuits import solve
    from topoplan.problems.circuits.problem import STARTS, plan_simulator

    prob, trace = _circuit_problem(system)
    model = {"relay": relay}
    res = solve(prob, method, time_limit=3, seed=0, score="simulated", trace=trace, sim_model=model, **opts)
    run = plan_simulator(prob, trace, model)
    assert res.metrics["simulated_s"] == pytest.approx(run(res.to_dict()), rel=1e-9)
    for start in STARTS[method]:
        assert res.metrics["simulated_s"] <= run(solve(prob, start, seed=0).to_dict()) * (1 + 1e-9), start
    assert set(res.metrics["simulated_candidates_s"]) == {method, *STARTS[method]}
    assert res.options["score"] == "simulated" and res.options["sim_model"]["relay"] == relay
    if res.metrics["picked"] != method:
        assert res.status != "optimal" and "simulates faster" in res.message


def test_exact_circuits_bound_is_tight_under_pipelined_relays():
    """003's neighbor case: the exact plan's simulated time is within 5% of its bound (default model)."""
    from topoplan.problems.circuits import solve
    from topoplan.problems.circuits.problem import CircuitProblem, plan_simulator

    topo, trace, tr, pl = load_inputs("paper003", [], NEIGHBOR_003, "sequential")
    prob = CircuitProblem.build(topo, tr, pl)
    res = solve(prob, "ilp", time_limit=10, seed=0)
    sim = plan_simulator(prob, trace)(res.to_dict())
    assert res.objective <= sim <= 1.05 * res.objective


@pytest.mark.parametrize("relay", RELAYS)
@pytest.mark.parametrize("method, opts", [("anneal", {"max_steps": 200}), ("ilp", {})])
def test_placement_methods_never_simulate_slower_than_their_starts(method, opts, relay):
    from topoplan.problems.placement import PlacementProblem, simulated_time, solve
    from topoplan.problems.placement.problem import STARTS

    topo, trace, tr, _ = load_inputs("paper003", ["kind=tree", "ocs=null"], "npb:kernel=cg,class=S,np=64,iters=1",
                                     None)
    prob = PlacementProblem.build(topo, tr, objective="hops")
    model = {"relay": relay}
    res = solve(prob, method, time_limit=2, seed=0, score="simulated", trace=trace, sim_model=model, **opts)
    t = res.metrics["simulated_s"]
    assert t == pytest.approx(simulated_time(prob, res.to_dict(), trace, model), rel=1e-9)
    for start in STARTS[method]:
        assert t <= simulated_time(prob, solve(prob, start, seed=0).to_dict(), trace, model) * (1 + 1e-9), start


@pytest.mark.parametrize("method", ["anneal", "ilp"])
def test_bcast_methods_never_simulate_slower_than_their_starts(method):
    from topoplan.problems.bcast import BcastProblem, solve
    from topoplan.problems.bcast.allocation import parse_spec
    from topoplan.problems.bcast.problem import STARTS, simulated_time
    from topoplan.core.topology_io import load_topology

    topo = load_topology("paper000")
    prob = BcastProblem.build(topo, placement=parse_spec("gen:nodes=16,racks=4,seed=1", topo, 0), bytes_B=1024.0)
    res = solve(prob, method, time_limit=2, seed=0, score="simulated")
    t = res.metrics["simulated_time_s"]
    for start in STARTS[method]:
        other = solve(prob, start, seed=0, simulate=False)
        assert t <= simulated_time(prob, other.plan["order"]) * (1 + 1e-9), start


def test_score_must_be_known_and_simulated_needs_a_simulator():
    from topoplan.problems.circuits import METHODS
    from topoplan.problems.result import solve_with

    prob, _ = _circuit_problem("003")
    with pytest.raises(TopoplanError, match="field 'score': choose one of bound, simulated, got 'sim'"):
        solve_with(METHODS, prob, "greedy", problem_name="circuits", score="sim")
    with pytest.raises(TopoplanError, match="'simulated' needs a simulator"):
        solve_with(METHODS, prob, "greedy", problem_name="circuits", score="simulated")


def test_circuits_cli_reports_simulated_time_beside_the_bound(run_cli):
    code, out, err = run_cli("circuits", "-t", "paper003", "-T", NEIGHBOR_003, "-m", "greedy")
    assert code == 0, err
    assert "step time 35.2" in out                       # a generator spec is a trace: planned on its steps
    assert "simulated 35.2" in out and "maxmin, pipelined relays (64 KiB chunks)" in out
    assert "x the step time" in out
    code, out, err = run_cli("circuits", "-t", "paper003", "-T", NEIGHBOR_003, "-m", "greedy", "--no-steps")
    assert code == 0, err
    assert "communication-time bound 35.2 ms" in out
    code, out, err = run_cli("circuits", "-t", "paper003", "-T", NEIGHBOR_003, "-m", "greedy", "--score", "best")
    assert code == 2 and "--score 'best': choose auto, bound or simulated" in err


@pytest.mark.parametrize("faster, picked", [(1e-12, "ilp"), (1e-6, "greedy")])
def test_simulated_ties_keep_the_methods_own_plan(faster, picked):
    """A start that simulates faster by less than the engines' agreement (SIM_TIE_REL) is a tie: the method's
    plan stays; one faster by more replaces it."""
    from topoplan.problems.circuits import solve
    from topoplan.problems.circuits.problem import METHODS, STARTS, validate_plan
    from topoplan.problems.result import SIM_TIE_REL, solve_with

    assert faster < SIM_TIE_REL or faster > 100 * SIM_TIE_REL
    prob, _ = _circuit_problem("003")
    greedy = solve(prob, "greedy", seed=0).to_dict()["circuits"]

    def simulate(plan):
        return 1.0 - faster if plan["circuits"] == greedy else 1.0

    res = solve_with(METHODS, prob, "ilp", time_limit=5, seed=0, validate=validate_plan, score="simulated",
                     simulate=simulate, starts={"ilp": ("greedy",)})
    assert res.to_dict()["circuits"] != greedy or picked == "greedy"
    assert res.metrics["picked"] == picked
    assert ("simulates faster" in (res.message or "")) == (picked != "ilp")


@pytest.mark.skipif(not __import__("topoplan.core.forked", fromlist=["x"]).available(), reason="needs fork, 2 CPUs")
def test_starts_simulated_beside_the_method_give_the_same_choice():
    """``beside``: the starts' plans are simulated in a forked child while the method runs; with the time to
    wait for them, the candidates, their times and the plan kept are those of simulating them after it."""
    from topoplan.problems.circuits.problem import METHODS, STARTS, plan_simulator, validate_plan
    from topoplan.problems.result import solve_with

    prob, trace = _circuit_problem("003")
    run = plan_simulator(prob, trace)
    starts = {"three-step": STARTS["ilp"]}   # (a method that ends by itself: the same plan in both runs)
    got = [solve_with(METHODS, prob, "three-step", seed=0, validate=validate_plan, score="simulated",
                      simulate=run, starts=starts, beside=beside) for beside in (False, True)]
    assert set(got[1].metrics["simulated_candidates_s"]) == {"three-step", *STARTS["ilp"]}
    assert got[0].metrics["simulated_candidates_s"] == got[1].metrics["simulated_candidates_s"]
    assert got[0].metrics["picked"] == got[1].metrics["picked"]
    assert got[0].to_dict()["circuits"] == got[1].to_dict()["circuits"]


@pytest.mark.skipif(not __import__("topoplan.core.forked", fromlist=["x"]).available(), reason="needs fork, 2 CPUs")
def test_a_start_whose_simulation_is_late_is_not_compared():
    """``late="drop"``: a start's plan whose simulation beside the method is not back within the method's time
    limit is left out of the comparison, and the result says which."""
    import time

    from topoplan.problems.circuits import solve
    from topoplan.problems.circuits.problem import METHODS, validate_plan
    from topoplan.problems.result import solve_with

    prob, _ = _circuit_problem("003")
    greedy = solve(prob, "greedy", seed=0).to_dict()["circuits"]

    def simulate(plan):
        if plan["circuits"] == greedy:
            time.sleep(300)   # in the child, killed when the parent stops waiting
            return 0.0
        return 1.0

    t0 = time.perf_counter()
    res = solve_with(METHODS, prob, "ilp", time_limit=2, seed=0, validate=validate_plan, score="simulated",
                     simulate=simulate, starts={"ilp": ("none", "greedy")}, beside=True, late="drop")
    assert time.perf_counter() - t0 < 120
    assert set(res.metrics["simulated_candidates_s"]) == {"ilp", "none"}
    assert "not compared with greedy: its simulation did not end within the time limit" in res.message


def test_a_late_start_is_simulated_after_the_method_unless_dropped():
    """``late="simulate"`` (the default): a start's plan not back from the child when the method ends is
    simulated after it, so every start is compared; ``late="drop"`` leaves it out (see above)."""
    import os

    from topoplan.problems.circuits import solve
    from topoplan.problems.circuits.problem import METHODS, validate_plan
    from topoplan.problems.result import solve_with

    prob, _ = _circuit_problem("003")
    greedy = solve(prob, "greedy", seed=0).to_dict()["circuits"]
    parent = os.getpid()

    def simulate(plan):
        if plan["circuits"] == greedy and os.getpid() != parent:
            import time
            time.sleep(300)   # late in the child only
        return 0.5 if plan["circuits"] == greedy else 1.0

    res = solve_with(METHODS, prob, "three-step", seed=0, validate=validate_plan, score="simulated",
                     simulate=simulate, starts={"three-step": ("none", "greedy")}, beside=True)
    assert res.metrics["simulated_candidates_s"]["greedy"] == 0.5 and res.metrics["picked"] == "greedy"
    with pytest.raises(TopoplanError, match="field 'late'"):
        solve_with(METHODS, prob, "three-step", score="simulated", simulate=simulate, beside=True, late="wait")


@pytest.mark.parametrize("faster, picked", [(0.001, "three-step"), (0.02, "greedy")])
def test_a_start_must_gain_keep_rel_to_replace_the_methods_plan(faster, picked):
    """``keep_rel`` (``--score auto`` passes AUTO_KEEP_REL): a start faster by less keeps the method's plan and
    says so; one faster by more replaces it."""
    from topoplan.problems.circuits import solve
    from topoplan.problems.circuits.problem import AUTO_KEEP_REL, METHODS, validate_plan
    from topoplan.problems.result import solve_with

    assert 0.001 < AUTO_KEEP_REL < 0.02
    prob, _ = _circuit_problem("003")
    greedy = solve(prob, "greedy", seed=0).to_dict()["circuits"]

    def simulate(plan):
        return 1.0 - faster if plan["circuits"] == greedy else 1.0

    res = solve_with(METHODS, prob, "three-step", seed=0, validate=validate_plan, score="simulated",
                     simulate=simulate, starts={"three-step": ("greedy",)}, keep_rel=AUTO_KEEP_REL)
    assert res.metrics["picked"] == picked
    assert ("kept its plan: greedy's simulates 0.1% faster, within the 0.5%" in (res.message or "")) == \
        (picked == "three-step")
    with pytest.raises(TopoplanError, match="field 'keep_rel'"):
        solve_with(METHODS, prob, "three-step", score="simulated", simulate=simulate, keep_rel=1.5)
