"""experiments/joint_placement.py on one instance: every approach simulated under the three models."""

from experiments.joint_placement import APPROACHES, run_instance


def test_one_instance_under_the_three_models():
    rows = run_instance("paper003", "8 OCS", ["ocs.nodes_per_switch=2"], "neighbor", ilp_s=2.0, evals=60,
                        anneal_steps=40, log=lambda *_: None)
    by = {r["approach"]: r for r in rows}
    assert list(by) == list(APPROACHES)
    for r in rows:
        for m in ("paper", "pipelined", "store-and-forward"):
            assert r[f"simulated_s.{m}"] > 0
    # joint starts from place-then-assign and keeps the plan that simulates fastest under the default model
    for circ in ("greedy", "ilp"):
        assert by[f"joint+{circ}"]["simulated_s.pipelined"] <= by[f"metis+{circ}"]["simulated_s.pipelined"] * 1.000001
    assert by["joint+ilp"]["bound_s"] <= by["metis+ilp"]["bound_s"] * (1 + 1e-9)
    # EPS only has no relays: both max-min variants give the same time
    assert by["metis+none"]["simulated_s.pipelined"] == by["metis+none"]["simulated_s.store-and-forward"]
