"""`topoplan circuits`, `topoplan validate` and `topoplan compare circuits` end to end."""

import json

import pytest

from topoplan.traffic.matrix import from_arrays


@pytest.fixture
def matrix(tmp_path):
    # 64 ranks on paper003 round-robin: rank r on node r; neighbours across switches
    src = [0, 16, 1, 17, 20, 36, 40, 56]
    dst = [16, 0, 17, 1, 36, 20, 56, 40]
    path = tmp_path / "m.csv"
    from_arrays(64, src, dst, [8e6] * 8).write_matrix(path)
    return path


def test_circuits_writes_a_valid_plan(run_cli, matrix, tmp_path):
    out = tmp_path / "plan.json"
    code, stdout, err = run_cli("circuits", "-t", "paper003", "-T", matrix, "-p", "round-robin", "-m", "sp",
                                "--max-circuits", "3", "-o", out, "--json")
    assert code == 0, err
    doc = json.loads(out.read_text())
    assert json.loads(stdout)["circuits"] == doc["circuits"]
    assert doc["method"] == "sp" and doc["status"] == "heuristic" and len(doc["circuits"]) == 3
    assert doc["metrics"]["congestion_bound_s"] == doc["objective"] and doc["topology"] == "paper003"
    assert doc["rank_to_node"][:3] == [0, 1, 2] and doc["options"]["max_circuits"] == 3
    code, stdout, err = run_cli("validate", out, "-t", "paper003")
    assert code == 0 and "valid" in stdout
    # the same plan is wrong for a system with fewer OCS nodes
    code, stdout, err = run_cli("validate", out, "-t", "paper003", "--set", "ocs.nodes_per_switch=1")
    assert code == 2 and "made for another topology" in err and err.count("\n") == 1
    code, stdout, err = run_cli("validate", out, "-t", "paper003", "--set", "ocs.nodes_per_switch=1", "--any-inputs")
    assert code == 2 and "is not an OCS node" in err and err.count("\n") == 1


def test_ilp_from_the_cli(run_cli, matrix):
    code, stdout, err = run_cli("circuits", "-t", "paper003", "-T", matrix, "-p", "round-robin", "-m", "ilp",
                                "--time-limit", "20", "--json")
    assert code == 0, err
    d = json.loads(stdout)
    assert d["status"] == "optimal" and d["gap"] == pytest.approx(0, abs=1e-6)
    assert d["metrics"]["uplink_bytes"] == 0


def test_validate_rejects_loops_and_checks_placements_and_orders(run_cli, tmp_path):
    bad = tmp_path / "loop.json"
    bad.write_text(json.dumps({"circuits": [[0, 16]], "forwarding": {"1": {"1": 2}, "2": {"1": 1}}}))
    code, out, err = run_cli("validate", bad, "-t", "paper003")
    assert code == 2 and "routing loop" in err and "Traceback" not in err
    pl = tmp_path / "pl.json"
    pl.write_text(json.dumps({"rank_to_node": [0, 0, 0, 0, 0], "rank_to_slot": [0, 1, 2, 3, 3]}))
    code, out, err = run_cli("validate", pl, "-t", "paper003")
    assert code == 2 and "share node 0 slot 3" in err
    pl.write_text(json.dumps({"rank_to_node": [0, 0, 1]}))
    code, out, err = run_cli("validate", pl, "-t", "paper003", "--json")
    assert code == 0 and json.loads(out)["ranks"] == 3
    order = tmp_path / "order.json"
    order.write_text(json.dumps({"order": [3, 1, 2], "allocation": [1, 2, 3]}))
    assert run_cli("validate", order, "-t", "paper003")[0] == 0
    order.write_text(json.dumps({"order": [3, 1, 1]}))
    code, out, err = run_cli("validate", order, "-t", "paper003")
    assert code == 2 and "appears twice" in err
    empty = tmp_path / "e.json"
    empty.write_text("{}")
    assert run_cli("validate", empty, "-t", "paper003")[0] == 2


def test_compare_circuits_json(run_cli, matrix):
    code, out, err = run_cli("compare", "circuits", "-t", "paper003", "-T", matrix, "-p", "round-robin",
                             "--methods", "none,greedy,ilp", "--time-limit", "10", "--json")
    assert code == 0, err
    rows = {r["method"]: r for r in json.loads(out)["rows"]}
    assert set(rows) == {"none", "greedy", "ilp"}
    assert rows["ilp"]["objective"] <= rows["greedy"]["objective"] <= rows["none"]["objective"]
    assert rows["none"]["gap_to_exact"] > 0


def test_circuits_bad_input(run_cli, matrix):
    code, _, err = run_cli("circuits", "-t", "paper003", "--set", "kind=tree", "--set", "ocs=null", "-T", matrix)
    assert code == 2 and "hybrid" in err
    code, _, err = run_cli("circuits", "-t", "paper003", "-T", matrix, "-m", "nosuch")
    assert code == 2 and "unknown circuits method" in err


def test_ilp_options_and_time_limit_are_checked_whatever_the_methods(run_cli, matrix, tmp_path):
    """A misspelt --solver, or a --time-limit of 0, passed unnoticed when no method took it (compare with
    --methods greedy, circuits -m greedy), and a method named twice ran twice: each is now a one-line error,
    and nothing is written."""
    out = tmp_path / "c.json"
    base = ("-t", "paper003", "-T", matrix, "-p", "round-robin", "-o", out)
    for args, message in [(("compare", "circuits", "--methods", "none,greedy", "--solver", "bogus"),
                           "error: --solver: applies to ilp, not none, greedy\n"),
                          (("compare", "circuits", "--methods", "greedy", "--formulation", "node"),
                           "error: --formulation: applies to ilp, not greedy\n"),
                          (("compare", "circuits", "--methods", "greedy", "--time-limit", "0"),
                           "error: --time-limit: must be more than 0 and at most 604800 s (7 days), got '0'\n"),
                          (("circuits", "-m", "greedy", "--solver", "highs"),
                           "error: --solver: applies to ilp, not greedy\n"),
                          (("circuits", "-m", "sp", "--objective", "weighted"),
                           "error: --objective: applies to ilp, not sp\n"),
                          (("compare", "circuits", "--methods", "greedy,sp,greedy"),
                           "error: --methods 'greedy,sp,greedy': greedy named twice\n"),
                          (("circuits", "-m", "sp", "--score", "simulated", "--no-simulate"),
                           "error: --score simulated simulates the plans: it cannot be used with --no-simulate\n")]:
        code, stdout, err = run_cli(*args, *base)
        assert (code, stdout, err) == (2, "", message) and not out.exists()


def test_simulate_rejects_a_file_that_is_not_a_valid_circuit_plan(run_cli, matrix, tmp_path):
    placement = tmp_path / "placement.json"
    placement.write_text(json.dumps({"rank_to_node": list(range(64))}))
    code, _, err = run_cli("simulate", "-t", "paper003", "-T", matrix, "--circuits", placement)
    assert code == 2 and "not a circuit plan" in err and err.count("\n") == 1
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"circuits": [[0, 1]]}))  # nodes 0 and 1 share a switch
    code, _, err = run_cli("simulate", "-t", "paper003", "-T", matrix, "--circuits", broken)
    assert code == 2 and "broken.json" in err
    good = tmp_path / "plan.json"
    assert run_cli("circuits", "-t", "paper003", "-T", matrix, "-p", "round-robin", "-m", "sp", "-o", good)[0] == 0
    code, out, err = run_cli("simulate", "-t", "paper003", "-T", matrix, "-p", "round-robin", "--circuits", good,
                             "--json")
    assert code == 0, err
    assert json.loads(out)["bytes_by_link_class"]["ocs"] > 0


@pytest.mark.parametrize("given, on_circuits", [((), False), (("--threshold", "1KiB"), True)])
def test_simulate_takes_the_plans_threshold_unless_given(run_cli, matrix, tmp_path, given, on_circuits):
    plan = tmp_path / "plan.json"
    code, _, err = run_cli("circuits", "-t", "paper003", "-T", matrix, "-p", "round-robin", "-m", "sp", "-o", plan)
    assert code == 0, err
    # the same circuits for messages of 16 MB and more: the matrix's 8 MB messages stay on the EPS, as planned
    doc = json.loads(plan.read_text())
    assert doc["circuits"] and doc["threshold_B"] < 8e6
    plan.write_text(json.dumps({**doc, "threshold_B": 16e6}))
    code, out, err = run_cli("simulate", "-t", "paper003", "-T", matrix, "-p", "round-robin", "--circuits", plan,
                             *given, "--json")
    assert code == 0, err
    assert (json.loads(out)["bytes_by_link_class"].get("ocs", 0) > 0) == on_circuits


@pytest.mark.parametrize("threshold, ocs_MB", [("8KiB", 100.0), ("900B", 800.0)])
def test_a_matrix_keeps_small_messages_off_the_circuits_as_planned(run_cli, tmp_path, threshold, ocs_MB):
    # 8 rank pairs from switch 0 to switch 1 with 100 MB each: pair 0 in 10 messages of 10 MB, the others in
    # 100,000 of 1 kB. Merged into one message per pair, the 1 kB messages would take the circuits above an
    # 8 KiB threshold; the planner counts them small (on the uplink), and so does the simulation.
    path = tmp_path / "m.csv"
    from_arrays(64, list(range(8)), list(range(16, 24)), [1e7] + [1e3] * 7, count=[10] + [100_000] * 7).write_matrix(path)
    plan = tmp_path / "plan.json"
    code, out, err = run_cli("circuits", "-t", "paper003", "-T", path, "-p", "round-robin", "-m", "ilp",
                             "--threshold", threshold, "--time-limit", "10", "-o", plan, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["circuits"] and doc["metrics"]["simulated_s"] == pytest.approx(doc["objective"], rel=0.01)
    code, out, err = run_cli("simulate", "-t", "paper003", "-T", path, "-p", "round-robin", "--circuits", plan,
                             "--json")
    assert code == 0, err
    res = json.loads(out)
    assert res["bytes_by_link_class"]["ocs"] == pytest.approx(ocs_MB * 1e6)
    assert res["bytes_by_link_class"]["uplink-up"] == pytest.approx(800e6 - ocs_MB * 1e6)
    assert res["makespan_s"] == pytest.approx(doc["objective"], rel=0.01)


def _count_validations(monkeypatch):
    """Replace validate_plan_dict everywhere it is imported by a spy that counts its calls."""
    import topoplan.plans.circuits as plans_circuits
    import topoplan.plans.planfile as planfile
    import topoplan.plans.validate as plans_validate
    import topoplan.problems.circuits.problem as circuits_problem

    real, calls = plans_circuits.validate_plan_dict, []

    def spy(*args, **kwargs):
        calls.append(kwargs.get("where"))
        return real(*args, **kwargs)

    for mod in (plans_circuits, planfile, plans_validate, circuits_problem):
        monkeypatch.setattr(mod, "validate_plan_dict", spy)
    return calls


@pytest.mark.parametrize("simulate", ["--simulate", "--no-simulate"])
def test_circuits_validates_its_plan_once(run_cli, tmp_path, monkeypatch, simulate):
    """solve validates the plan; neither the post-planning simulation nor the file writer checks it again."""
    out = tmp_path / "plan.json"
    calls = _count_validations(monkeypatch)
    code, _, err = run_cli("circuits", "-t", "paper003", "-T", "random:np=64,msgs=200,bytes=4MB,seed=1", "-m", "greedy",
                           simulate, "-o", out)
    assert code == 0, err
    assert calls == ["greedy plan"]
    doc = json.loads(out.read_text())
    assert ("simulated_s" in doc["metrics"]) == (simulate == "--simulate")
    calls.clear()
    code, _, err = run_cli("validate", out, "-t", "paper003")   # the file is a valid plan, checked when read
    assert code == 0, err
    assert len(calls) == 1


def test_write_plan_validates_unless_told_the_plan_was(tmp_path):
    from topoplan.core.errors import TopoplanError
    from topoplan.core.topology_io import load_topology
    from topoplan.plans.planfile import read_plan, write_plan

    topo = load_topology("paper003")
    bad = {"circuits": [[0, 1]], "forwarding": {}}                 # one switch: invalid
    with pytest.raises(TopoplanError, match="same switch"):
        write_plan(tmp_path / "bad.json", bad, topo)
    assert not (tmp_path / "bad.json").exists()
    good = {"circuits": [[0, 16]], "forwarding": {"1": {"1": 0}, "0": {"1": 16}}}
    a = write_plan(tmp_path / "a.json", good, topo)
    b = write_plan(tmp_path / "b.json", good, topo, validated=True)
    assert a == b and (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    assert read_plan(tmp_path / "b.json", topo) == a


def test_an_unknown_method_is_refused_before_the_inputs_are_read(run_cli, matrix, monkeypatch):
    """-m with a misspelt method was refused only after the traffic was loaded (seconds on a large trace)."""
    import topoplan.traffic.sources as sources

    def unread(*args, **kw):
        raise AssertionError("the inputs were read")

    monkeypatch.setattr(sources, "load_inputs", unread)
    code, out, err = run_cli("circuits", "-t", "paper003", "-T", matrix, "-m", "three_step")
    assert code == 2 and out == "" and err.startswith("error: --method: unknown circuits method 'three_step'"), err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("extra", [[], ["--any-inputs"], ["--json"]])
def test_validate_with_traffic_refuses_a_plan_placing_other_ranks(run_cli, matrix, tmp_path, extra):
    out = tmp_path / "plan.json"
    assert run_cli("circuits", "-t", "paper003", "-T", matrix, "-p", "round-robin", "-o", out)[0] == 0
    doc = json.loads(out.read_text())
    doc["rank_to_node"] = doc["rank_to_node"][:10]   # the recorded fingerprints still match the traffic
    del doc["inputs"]["placement"]   # (which would refuse the edit itself: tests/test_plan_inputs.py)
    out.write_text(json.dumps(doc))
    code, stdout, err = run_cli("validate", out, "-t", "paper003", "-T", matrix, *extra)
    assert code == 2 and err.count("\n") == 1
    assert "plan.json: places 10 ranks but the traffic has 57" in err   # ranks 0-56
