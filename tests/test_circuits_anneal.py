"""Simulated annealing over circuit sets: seeded, never worse than its start, within the limits."""

import pytest

from test_circuits_cases import random_problem
from topoplan.problems.circuits import solve
from topoplan.core.errors import TopoplanError

from timing import Stopwatch, within_limit


def test_anneal_is_seeded_and_not_worse_than_the_best_heuristic():
    p = random_problem(3, switches=3, per_switch=4, ocs_per_switch=3, n_msgs=25, max_circuits=3)
    a = solve(p, "anneal", seed=7, max_steps=150)
    b = solve(p, "anneal", seed=7, max_steps=150)
    assert a.plan["circuits"] == b.plan["circuits"] and a.objective == b.objective
    best_h = min((solve(p, m).objective, solve(p, m).metrics["uplink_bytes"]) for m in ("sp", "three-step", "greedy", "matching"))
    assert (a.objective, a.metrics["uplink_bytes"]) <= (best_h[0] * (1 + 1e-9), best_h[1] + 1)
    assert len(a.plan["circuits"]) <= 3 and a.options["moves"] == 150 and a.options["init"]


def test_anneal_improves_a_poor_start():
    p = random_problem(8, switches=3, per_switch=4, ocs_per_switch=3, n_msgs=30)
    start = solve(p, "none")
    a = solve(p, "anneal", seed=1, max_steps=300, init="none")
    assert a.objective < start.objective
    assert a.options["accepted"] > 0


def test_anneal_time_budget_and_options():
    p = random_problem(1)
    watch = Stopwatch()
    r = solve(p, "anneal", time_limit=0.3, seed=0)
    assert within_limit(r.wall_s, 0.3, 2.7, watch.stop()) and r.options["moves"] > 0
    with pytest.raises(TopoplanError, match="field 'score': choose one of bound, simulated"):
        solve(p, "anneal", max_steps=5, score="magic")
    with pytest.raises(TopoplanError, match="field 'energy': 'bound' or 'simulated'"):
        solve(p, "anneal", max_steps=5, energy="sim")
    with pytest.raises(TopoplanError, match="unknown heuristic"):
        solve(p, "anneal", max_steps=5, init="nope")


@pytest.mark.parametrize("relay", ["pipelined", "store-and-forward"])
def test_anneal_with_the_simulator_as_energy_never_simulates_slower_than_its_start(relay):
    from topoplan.problems.circuits.problem import plan_simulator

    p = random_problem(3, switches=3, per_switch=4, ocs_per_switch=2, n_msgs=24)
    model = {"relay": relay}
    start = solve(p, "greedy", seed=0)
    a = solve(p, "anneal", seed=0, max_steps=40, init="greedy", energy="simulated", sim_model=model)
    run = plan_simulator(p, None, model)
    assert a.metrics["annealed_simulated_s"] == pytest.approx(run(a.to_dict()))
    assert a.metrics["annealed_simulated_s"] <= run(start.to_dict()) * (1 + 1e-9)
    assert a.options["energy"] == "simulated"


def test_anneal_cools_over_its_moves_when_they_are_counted(monkeypatch):
    # with max_steps the plan does not depend on how fast the clock runs, a time limit given or not
    import itertools

    from topoplan.problems.circuits import anneal as mod

    p = random_problem(8, switches=3, per_switch=4, ocs_per_switch=3, n_msgs=30)
    ref = solve(p, "anneal", seed=2, max_steps=300, init="none")
    for tick in (1e-6, 1e-2):
        clock = itertools.count(0.0, tick)
        monkeypatch.setattr(mod.time, "perf_counter", lambda: next(clock))
        got = solve(p, "anneal", seed=2, max_steps=300, init="none", time_limit=1e5)
        assert got.plan["circuits"] == ref.plan["circuits"] and got.objective == ref.objective
        assert got.options["moves"] == 300 and got.options["accepted"] == ref.options["accepted"]


def test_circuits_cli_max_steps(run_cli, tmp_path):
    args = ["circuits", "-t", "paper003", "-T", "neighbor2d:rows=8,cols=8,bytes=4MB,iters=1", "--set",
            "ocs.nodes_per_switch=2", "-m", "anneal", "--max-steps", "50", "--seed", "4", "--no-simulate", "--json"]
    code, out, err = run_cli(*args)
    code2, out2, _ = run_cli(*args)
    assert code == code2 == 0, err
    import json

    a, b = json.loads(out), json.loads(out2)
    assert a["circuits"] == b["circuits"] and a["options"]["moves"] == 50
    code, _, err = run_cli(*args[:-6], "-m", "greedy", "--max-steps", "50")
    assert code == 2 and "--max-steps: applies to anneal, not greedy" in err
