"""Plans are bound to the inputs they were made for (issue 17): every plan records fingerprints of its
topology (after --set), traffic and placement; validate, simulate and export refuse other inputs unless
--any-inputs is given."""

import json

import numpy as np
import pytest

from topoplan.core.errors import TopoplanError
from topoplan.core.fingerprint import check_inputs, fingerprint, fingerprint_topology, fingerprint_traffic
from topoplan.core.topology_io import load_topology
from topoplan.traffic.matrix import from_arrays
from topoplan.traffic.sources import load_source

RING = "ring:np=64,bytes=4MB"
NEIGH = "neighbor2d:rows=16,cols=16,bytes=4MB"


@pytest.mark.parametrize("sets", [["ocs.bw=1Gbps"], ["cores_per_node=8"], ["ocs.nodes_per_switch=2"],
                                  ["eps.up_bw=1Gbps"]])
def test_every_override_changes_the_topology_fingerprint(sets):
    assert fingerprint_topology(load_topology("paper003", sets)) != fingerprint_topology(load_topology("paper003"))


def test_the_name_is_not_part_of_the_topology():
    from topoplan.core.topology_io import dump_topology, topology_from_dict
    import yaml

    t = load_topology("paper003")
    again = topology_from_dict(yaml.safe_load(dump_topology(t)), name="renamed")
    assert fingerprint_topology(again) == fingerprint_topology(t)


def test_a_trace_and_its_matrix_have_one_fingerprint(tmp_path):
    trace, tr = load_source(NEIGH)
    path = tmp_path / "m.csv"
    tr.write_matrix(path)
    _, again = load_source(str(path))
    assert fingerprint_traffic(again) == fingerprint_traffic(tr)
    assert fingerprint_traffic(load_source("neighbor2d:rows=16,cols=16,bytes=2MB")[1]) != fingerprint_traffic(tr)


def test_check_inputs_compares_what_both_sides_have():
    t = load_topology("paper003")
    rec = fingerprint(topology=t, traffic=from_arrays(2, [0], [1], [8.0]))
    check_inputs(rec, fingerprint(topology=t))                        # traffic not given: not compared
    check_inputs(None, fingerprint(topology=t))                       # an old plan without a record
    with pytest.raises(TopoplanError, match=r"p.json: field 'inputs': made for another traffic"):
        check_inputs(rec, fingerprint(topology=t, traffic=from_arrays(2, [1], [0], [8.0])), "p.json")
    with pytest.raises(TopoplanError, match="expected an object of fingerprint strings"):
        check_inputs({"topology": 3}, {}, "p.json")


@pytest.mark.parametrize("problem, method", [("circuits", "greedy"), ("placement", "greedy"), ("bcast", "dft")])
def test_every_problem_records_its_inputs(problem, method):
    import topoplan

    t = load_topology("paper003")
    tr = topoplan.load_traffic(NEIGH)
    if problem == "bcast":
        prob = topoplan.BcastProblem.build(t, placement=list(range(0, 64, 4)), bytes_B=1e6)
        res = topoplan.solve(prob, method=method, simulate=False)
        assert set(res.inputs) == {"topology", "allocation"}
    elif problem == "placement":
        res = topoplan.solve(topoplan.PlacementProblem.build(t, tr), method=method)
        assert res.inputs == fingerprint(topology=t, traffic=tr)
    else:
        res = topoplan.solve(topoplan.CircuitProblem.build(t, tr), method=method)
        assert set(res.inputs) == {"topology", "traffic", "placement"}
    assert res.to_dict()["inputs"] == res.inputs


def test_simulate_plan_refuses_a_plan_for_another_topology():
    import topoplan
    from topoplan.sim.run import simulate_plan

    t = load_topology("paper003", ["ocs.bw=1Gbps"])
    trace, tr = load_source(NEIGH)
    plan = topoplan.solve(topoplan.CircuitProblem.build(t, tr), method="greedy").to_dict()
    with pytest.raises(TopoplanError, match="made for another topology"):
        simulate_plan(load_topology("paper003"), trace, plan)
    assert simulate_plan(load_topology("paper003"), trace, plan, check_inputs=False)["makespan_s"] > 0
    assert simulate_plan(t, trace, plan)["makespan_s"] > 0


def test_cli_circuit_plan_with_other_ocs_bandwidth(tmp_path, run_cli):
    """The audit's example: a plan made with --set ocs.bw=1Gbps used on the unmodified topology."""
    plan = tmp_path / "c.json"
    code, _, err = run_cli("circuits", "-t", "paper003", "--set", "ocs.bw=1Gbps", "-T", NEIGH, "-m", "greedy",
                           "-o", plan)
    assert code == 0, err
    assert set(json.loads(plan.read_text())["inputs"]) == {"topology", "traffic", "placement"}
    for cmd in (["simulate", "-t", "paper003", "-T", NEIGH, "--circuits", plan],
                ["validate", plan, "-t", "paper003"]):
        code, _, err = run_cli(*cmd)
        assert code == 2 and "made for another topology" in err and "--any-inputs" in err, (cmd, err)
        assert len(err.strip().splitlines()) == 1
        code, _, err = run_cli(*cmd, "--any-inputs")
        assert code == 0, err
    code, _, err = run_cli("simulate", "-t", "paper003", "--set", "ocs.bw=1Gbps", "-T", NEIGH, "--circuits", plan)
    assert code == 0, err
    code, _, err = run_cli("simulate", "-t", "paper003", "--set", "ocs.bw=1Gbps", "-T",
                           "neighbor2d:rows=16,cols=16,bytes=1MB", "--circuits", plan)
    assert code == 2 and "made for another traffic" in err
    code, _, err = run_cli("validate", plan, "-t", "paper003", "--set", "ocs.bw=1Gbps", "-T", RING)
    assert code == 2 and "made for another traffic" in err


def test_cli_placement_used_elsewhere(tmp_path, run_cli):
    plan = tmp_path / "p.json"
    code, _, err = run_cli("place", "-t", "paper003", "-T", NEIGH, "-m", "greedy", "-o", plan)
    assert code == 0, err
    out = tmp_path / "rankfile"
    code, _, err = run_cli("export", "ompi4", "-p", plan, "-t", "paper003", "--set", "cores_per_node=8", "-o", out)
    assert code == 2 and "made for another topology" in err and not out.exists()
    code, _, err = run_cli("export", "ompi4", "-p", plan, "-o", out)     # the recorded topology: the same one
    assert code == 0 and out.exists(), err
    code, _, err = run_cli("simulate", "-t", "paper003", "-T", RING, "-p", plan)
    assert code == 2 and "--placement" in err and "made for another traffic" in err
    code, _, err = run_cli("simulate", "-t", "paper003", "-T", NEIGH, "-p", plan)
    assert code == 0, err


def test_validate_json_reports_an_invalid_plan(tmp_path, run_cli):
    bad = tmp_path / "b.json"
    bad.write_text(json.dumps({"order": [2, 2]}))
    code, out, err = run_cli("validate", bad, "-t", "paper003", "--json")
    doc = json.loads(out)
    assert code == 2 and doc["valid"] is False and "appears twice" in doc["error"] and "appears twice" in err


def test_placement_fingerprint_in_a_circuit_plan():
    import topoplan
    from topoplan.core.placement import load_placement

    t = load_topology("paper003")
    trace, tr = load_source(NEIGH)
    rr = load_placement("round-robin", tr.n_ranks, t)
    res = topoplan.solve(topoplan.CircuitProblem.build(t, tr, rr), method="greedy")
    assert res.inputs["placement"] == fingerprint(placement=rr)["placement"]
    assert not np.array_equal(rr.rank_to_node, np.arange(256) // 4)


@pytest.mark.parametrize("trace_, plan, needle", [
    ("ring", "plan.json", r"field 'plan': expected a plan document \(a dict, such as result.to_dict\(\)\) or None, got str"),
    ("ring", [[0, 16]], r"field 'plan': expected a plan document .* got list"),
    (None, None, r"field 'trace': expected a trace \(the first item of load_source\), got NoneType"),
    ("ring:np=8,bytes=1MB", None, r"field 'trace': expected a trace .* got str"),
])
def test_simulate_plan_refuses_a_plan_or_trace_of_the_wrong_type(trace_, plan, needle):
    """Once an AttributeError ('str' object has no attribute 'get' / 'n_ranks') from inside the simulator."""
    from topoplan.sim.run import simulate_plan

    trace = load_source("ring:np=8,bytes=1MB")[0] if trace_ == "ring" else trace_
    with pytest.raises(TopoplanError, match=needle):
        simulate_plan(load_topology("paper003"), trace, plan)


def test_validate_takes_a_placement_csv(tmp_path, run_cli):
    """A placement CSV (what -p takes) is validated like a placement JSON, not parsed as JSON."""
    pl = tmp_path / "p.csv"
    pl.write_text("rank,node\n0,0\n1,node0001\n2,1\n")
    code, out, err = run_cli("validate", pl, "-t", "paper003")
    assert code == 0 and out.strip() == f"{pl}: valid (placement: 3 ranks)", err
    code, _, err = run_cli("validate", pl, "-t", "paper003", "-T", "ring:np=4,bytes=1MB")
    assert code == 2 and err.strip() == f"error: {pl}: places 3 ranks but the traffic has 4"
    pl.write_text("rank,node\n0,0\n1,64\n")
    code, out, err = run_cli("validate", pl, "-t", "paper003", "--json")
    assert code == 2 and json.loads(out)["error"] == f"{pl}:3: field 'node': rank 1 is on node 64, but the topology has 64 nodes"
    pl.write_text("rank,node\n")
    code, _, err = run_cli("validate", pl, "-t", "paper003")
    assert code == 2 and err.strip() == f"error: {pl}: no ranks placed (a header line and no rows)"


SMALL = "neighbor2d:rows=4,cols=4,bytes=4MB"
SMALL_OTHER = "neighbor2d:rows=4,cols=4,bytes=2MB"   # as many ranks: only the fingerprint tells them apart
# every command taking a placement file with -p (and -t, -T), with the options that keep its run short
P_COMMANDS = {"analyze": ["analyze"], "circuits": ["circuits", "-m", "greedy", "--no-simulate"],
              "compare circuits": ["compare", "circuits", "--methods", "greedy"], "phases": ["phases"],
              "simulate": ["simulate"]}


@pytest.fixture
def small_placement(tmp_path, run_cli):
    path = tmp_path / "p.json"
    code, _, err = run_cli("place", "-t", "paper003", "-T", SMALL, "-m", "greedy", "-o", path)
    assert code == 0, err
    return path


@pytest.mark.parametrize("command", list(P_COMMANDS))
@pytest.mark.parametrize("traffic, sets, other", [(SMALL_OTHER, [], "traffic"),
                                                  (SMALL, ["--set", "ocs.bw=40Gbps"], "topology")])
def test_every_command_refuses_a_placement_made_for_other_inputs(small_placement, run_cli, command, traffic, sets,
                                                                  other):
    """As simulate always did: circuits, compare, phases and analyze once used such a placement silently, and the
    plan made with it recorded the new inputs' fingerprints."""
    args = [*P_COMMANDS[command], "-t", "paper003", *sets, "-T", traffic, "-p", small_placement]
    code, out, err = run_cli(*args)
    assert code == 2 and out == "", err
    assert err.startswith(f"error: --placement {small_placement}: made for another {other} (fingerprint ")
    assert err.endswith("; pass --any-inputs to use it anyway\n") and err.count("\n") == 1
    code, _, err = run_cli(*args, "--any-inputs")
    assert code == 0 and err == "", err
    code, _, err = run_cli(*P_COMMANDS[command], "-t", "paper003", "-T", SMALL, "-p", small_placement)
    assert code == 0 and err == "", err


def test_a_circuit_plan_is_not_made_from_a_placement_for_other_traffic(small_placement, run_cli, tmp_path):
    plan = tmp_path / "c.json"
    code, _, err = run_cli("circuits", "-t", "paper003", "-T", SMALL_OTHER, "-p", small_placement, "-m", "greedy",
                           "-o", plan)
    assert code == 2 and "made for another traffic" in err and not plan.exists()


def test_any_inputs_has_one_help_text():
    """The option the commands taking a plan or placement file share (cli/commands/common.py)."""
    from topoplan.cli.commands import basic, circuits, emulate, export, phases, simulate, validate
    from topoplan.cli.commands.common import AnyInputsOpt
    import inspect

    for fn in (basic.analyze_cmd, circuits.circuits_cmd, circuits.compare_circuits_cmd, phases.phases_cmd,
               simulate.simulate_cmd, emulate.emulate_cmd, export.export_cmd, validate.validate_cmd):
        assert inspect.signature(fn).parameters["any_inputs"].default is AnyInputsOpt, fn.__name__


@pytest.fixture
def edited_plan(tmp_path, run_cli):
    """A circuit plan whose rank_to_node was edited after planning (ranks 0 and 15 swapped), its inputs kept."""
    plan = tmp_path / "c.json"
    code, _, err = run_cli("circuits", "-t", "paper003", "-T", SMALL, "-p", "round-robin", "-m", "greedy",
                           "--no-simulate", "-o", plan)
    assert code == 0, err
    doc = json.loads(plan.read_text())
    r2n = doc["rank_to_node"]
    assert r2n[0] != r2n[15]
    r2n[0], r2n[15] = r2n[15], r2n[0]
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(doc))
    return plan, edited


def _edited_cases(plan, out):
    return {"validate": ["validate", plan, "-t", "paper003", "-T", SMALL],
            "export ocs": ["export", "ocs", "-p", plan, "-o", out],
            "export ompi4": ["export", "ompi4", "-p", plan, "-o", out],
            "export json": ["export", "json", "-p", plan, "-t", "paper003", "-o", out],
            "simulate -p": ["simulate", "-t", "paper003", "-T", SMALL, "-p", plan, "--circuits", plan],
            "simulate --circuits": ["simulate", "-t", "paper003", "-T", SMALL, "-p", "round-robin", "--circuits", plan],
            "circuits -p": ["circuits", "-t", "paper003", "-T", SMALL, "-p", plan, "-m", "greedy", "--no-simulate"]}


@pytest.mark.parametrize("case", list(_edited_cases("plan", "out")))
def test_a_plan_whose_rank_to_node_was_edited_is_refused(edited_plan, run_cli, tmp_path, case):
    """The plan records the fingerprint of the placement it was made for: its own rank_to_node is compared with
    it (it once passed validate, export and simulate, which then simulated another placement)."""
    plan, edited = edited_plan
    out = tmp_path / "out"
    code, stdout, err = run_cli(*_edited_cases(edited, out)[case])
    flag = "" if case == "validate" else "--circuits " if case == "simulate --circuits" else "--placement "
    assert code == 2 and not out.exists(), err
    assert err.startswith(f"error: {flag}{edited}: field 'rank_to_node': changed after planning (its placement "
                          "has fingerprint "), err
    assert err.endswith("; pass --any-inputs to use it anyway\n") and err.count("\n") == 1
    code, _, err = run_cli(*_edited_cases(plan, out)[case])   # the plan as written
    assert code == 0 and err == "", err
    if case != "simulate --circuits":   # (there -p round-robin is not the edited plan's placement)
        out.unlink() if out.is_file() else None
        code, _, err = run_cli(*_edited_cases(edited, out)[case], "--any-inputs")
        assert code == 0, err


def test_the_plan_library_refuses_an_edited_rank_to_node(edited_plan):
    from topoplan.plans.validate import validate

    plan, edited = edited_plan
    t = load_topology("paper003")
    validate(json.loads(plan.read_text()), t)
    with pytest.raises(TopoplanError, match=r"^e.json: field 'rank_to_node': changed after planning \("):
        validate(json.loads(edited.read_text()), t, where="e.json")
    assert validate(json.loads(edited.read_text()), t, check_inputs=False)["ranks"] == 16


def test_a_placement_with_its_own_slots_makes_a_plan_that_is_not_refused(tmp_path, run_cli):
    """A circuit plan carries rank_to_node alone (circuits do not depend on slots): it records the placement with
    the slots its readers give, so a placement file with other slots does not make it look edited."""
    import topoplan
    from topoplan.core.placement import Placement, from_nodes
    from topoplan.sim.run import simulate_plan

    slots = tmp_path / "slots.csv"
    slots.write_text("rank,node,slot\n" + "".join(f"{r},{r % 8},{3 - r // 8}\n" for r in range(16)))
    plan = tmp_path / "c.json"
    code, _, err = run_cli("circuits", "-t", "paper003", "-T", SMALL, "-p", slots, "-m", "greedy", "-o", plan)
    assert code == 0, err
    for args in (["validate", plan, "-t", "paper003", "-T", SMALL],
                 ["simulate", "-t", "paper003", "-T", SMALL, "-p", plan, "--circuits", plan],
                 ["simulate", "-t", "paper003", "-T", SMALL, "-p", slots, "--circuits", plan]):
        code, _, err = run_cli(*args)
        assert code == 0 and err == "", (args, err)
    # the library, given the placement with its slots, takes the plan too
    t = load_topology("paper003")
    trace, tr = load_source(SMALL)
    node = np.arange(16) % 8
    given = Placement(node, 3 - np.arange(16) // 8)
    assert fingerprint(placement=given) != fingerprint(placement=from_nodes(node, t))
    res = topoplan.solve(topoplan.CircuitProblem.build(t, tr, given), method="greedy")
    assert res.inputs["placement"] == fingerprint(placement=from_nodes(node, t))["placement"]
    assert simulate_plan(t, trace, res.to_dict(), placement=given)["makespan_s"] > 0


@pytest.mark.parametrize("inputs", ["removed", None, {}])
def test_a_plan_without_inputs_is_used_with_one_warning(edited_plan, run_cli, tmp_path, inputs):
    """Plans of older versions record no inputs: used, but the user is told they were not checked (once a
    command, though simulate reads the plan twice); a command refusing its input prints its error alone."""
    plan, _ = edited_plan
    doc = json.loads(plan.read_text())
    if inputs == "removed":
        del doc["inputs"]
    else:
        doc["inputs"] = inputs
    old = tmp_path / "old.json"
    old.write_text(json.dumps(doc))
    warning = f"warning: {old} records no inputs: not checked against the topology and traffic\n"
    out = tmp_path / "out.json"
    for args in (["validate", old, "-t", "paper003", "-T", SMALL_OTHER],
                 ["export", "ocs", "-p", old, "-o", out],
                 ["simulate", "-t", "paper003", "-T", SMALL_OTHER, "-p", old, "--circuits", old],
                 ["circuits", "-t", "paper003", "-T", SMALL_OTHER, "-p", old, "-m", "greedy", "--no-simulate"]):
        code, _, err = run_cli(*args)
        assert code == 0 and err == warning, (args, err)
        code, _, err = run_cli(*args, "--any-inputs")   # nothing is checked, as asked
        assert code == 0 and err == "", (args, err)
    code, _, err = run_cli("validate", old, "-t", "paper003", "-T", "ring:np=8,bytes=1MB")
    assert code == 2 and err == f"error: {old}: places 16 ranks but the traffic has 8\n"


def test_simulate_takes_the_placement_of_a_schedule(tmp_path, run_cli):
    """A `phases --schedule` document records its placement under schedule_result: validate and export read it
    there, and simulate -p (load_placement) once said "field 'rank_to_node': missing"."""
    from topoplan.core.placement import read_placement

    mg = "npb:kernel=mg,class=S,np=16"
    ph = tmp_path / "ph.json"
    code, _, err = run_cli("phases", "-t", "paper003", "-T", mg, "-p", "round-robin", "--schedule", "static",
                           "--circuit-method", "greedy", "-o", ph)
    assert code == 0, err
    doc = json.loads(ph.read_text())
    assert "rank_to_node" not in doc
    assert read_placement(ph).rank_to_node.tolist() == doc["schedule_result"]["rank_to_node"] == \
        [r % 64 for r in range(16)]
    for args in (["simulate", "-t", "paper003", "-T", mg, "-p", ph],
                 ["validate", ph, "-t", "paper003"],
                 ["export", "ompi4", "-p", ph, "-o", tmp_path / "rankfile"]):
        code, _, err = run_cli(*args)
        assert code == 0 and err == "", (args, err)
    code, _, err = run_cli("simulate", "-t", "paper003", "-T", "npb:kernel=cg,class=S,np=16", "-p", ph)
    assert code == 2 and err.startswith(f"error: --placement {ph}: made for another traffic"), err
