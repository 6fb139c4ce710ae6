"""``topoplan export ocs``: circuit plans and schedules for an OCS controller (issue 21, "Schedules validate,
export, and replay"): cross-connects by OCS port, their differences between entries, per-host forwarding
rules, refusal of invalid plans (nothing written), and a round trip through the schedule replay."""

import json

import pytest

from topoplan.cli.main import main
from topoplan.core.errors import TopoplanError
from topoplan.core.topology_io import load_topology
from topoplan.reporting import ocs_export
from topoplan.reporting.ocs_export import export_ocs, ocs_document, schedule_from_ocs

SETS = ["ocs.nodes_per_switch=4"]
SETS_ARGS = ["--set", "ocs.nodes_per_switch=4"]


def _cli(*args):
    return main([str(a) for a in args])


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A greedy circuit plan and an exact two-entry schedule on 003's system with 4 OCS nodes per switch."""
    d = tmp_path_factory.mktemp("ocs")
    plan, sched = d / "plan.json", d / "sched.json"
    assert _cli("circuits", "-t", "paper003", *SETS_ARGS, "-T", "neighbor2d:rows=16,cols=16,bytes=4MB",
                "-m", "greedy", "--no-simulate", "-o", plan) == 0
    assert _cli("phases", "-t", "paper003", *SETS_ARGS, "-T", "halo-transpose:rows=16,cols=16,bytes=4MB,iters=2",
                "--schedule", "exact", "--circuit-method", "greedy", "-o", sched) == 0
    return {"plan": plan, "sched": sched, "dir": d}


def _pairs(xcs):
    return [(x["a"]["node"], x["b"]["node"]) for x in xcs]


def _keys(xcs):
    return {tuple(sorted(p)) for p in _pairs(xcs)}


def _circuits(cs):
    return {tuple(sorted(map(int, c))) for c in cs}


def _check_ports(doc, topo):
    """Every end's port follows the documented numbering, and no port holds two circuits at once."""
    ppn = topo.ocs.ports_per_node
    index = {v: i for i, v in enumerate(topo.ocs.nodes)}
    configs = [e for e in doc["entries"]] + [sl for e in doc["entries"] for sl in e.get("slots", [])]
    for c in configs:
        used = []
        for x in c["cross_connects"]:
            for end in (x["a"], x["b"]):
                assert 0 <= end["node_port"] < ppn
                assert end["port"] == index[end["node"]] * ppn + end["node_port"]
                assert end["host"] == topo.host_names()[end["node"]]
                used.append(end["port"])
        assert len(used) == len(set(used))


# -- a static plan ---------------------------------------------------------------------

def test_static_plan_is_one_entry_whose_cross_connects_are_the_plans_circuits(files, capsys):
    out = files["dir"] / "static.ocs.json"
    assert _cli("export", "ocs", "-p", files["plan"], "-o", out) == 0    # the plan records its topology
    assert "1 entry" in capsys.readouterr().out
    plan, doc = json.loads(files["plan"].read_text()), json.loads(out.read_text())
    assert doc["format"] == "topoplan-ocs" and doc["version"] == 1 and doc["kind"] == "static plan"
    assert len(doc["entries"]) == 1
    e = doc["entries"][0]
    assert plan["circuits"], "the plan should have circuits"
    assert [list(p) for p in _pairs(e["cross_connects"])] == plan["circuits"]
    assert e["connect"] == e["cross_connects"] and e["disconnect"] == [] and e["keep"] == []
    assert (e["from_phase"], e["to_phase"], e["setup_during"]) == (0, 1, "before-run")
    assert "first_call" not in e     # a circuit plan records no phases
    topo = load_topology("paper003", SETS)
    assert e["setup_s"] == topo.ocs.setup_s
    for k in ("inputs", "seed", "threshold_B", "method"):
        assert doc[k] == plan[k]
    assert doc["topology"] == "paper003" and doc["rank_to_node"] == plan["rank_to_node"]
    _check_ports(doc, topo)


def test_forwarding_rules_equal_the_plans_tables(files, tmp_path):
    topo = load_topology("paper003", SETS)
    plan = json.loads(files["plan"].read_text())
    hosts, sw, labels = topo.host_names(), topo.node_switch(), topo.switch_labels()
    want_host, want_switch = {}, {}
    for u, row in plan["forwarding"].items():
        for s, nh in row.items():
            want_switch.setdefault(hosts[int(u)], {})[labels[int(s)]] = hosts[nh]
            for v in range(topo.n_nodes):
                if sw[v] == int(s):
                    want_host.setdefault(hosts[int(u)], {})[hosts[v]] = hosts[nh]
    assert want_host
    by_host = ocs_document(plan, topo)["entries"][0]["forwarding"]
    assert by_host == want_host
    out = tmp_path / "sw.json"
    assert _cli("export", "ocs", "-p", files["plan"], "--rules", "switch", "-o", out) == 0
    assert json.loads(out.read_text())["entries"][0]["forwarding"] == want_switch
    # the rules, read back, are the plan's tables again
    tables = schedule_from_ocs(json.loads(out.read_text()))["schedule"][0]["forwarding"]
    assert tables == {u: {s: int(v) for s, v in row.items()} for u, row in plan["forwarding"].items() if row}


def test_hostfile_names_are_used(files, tmp_path):
    hf = tmp_path / "hosts"
    hf.write_text("".join(f"{i} cn{i:03d}\n" for i in range(64)))
    out = tmp_path / "named.json"
    assert _cli("export", "ocs", "-p", files["plan"], "--hosts", hf, "-o", out) == 0
    doc = json.loads(out.read_text())
    x = doc["entries"][0]["cross_connects"][0]
    assert x["a"]["host"] == f"cn{x['a']['node']:03d}" and x["b"]["host"] == f"cn{x['b']['node']:03d}"
    assert all(h.startswith("cn") for h in doc["entries"][0]["forwarding"])


def test_library_dispatch_through_the_launcher_export(files, tmp_path):
    from topoplan.reporting.export import FORMATS, export, render

    topo = load_topology("paper003", SETS)
    plan = json.loads(files["plan"].read_text())
    assert "ocs" in FORMATS
    assert export("ocs", plan, tmp_path / "a.json", topo=topo) == ""       # no launcher command
    assert json.loads(render("ocs", plan, topo.host_names(), topo)) == json.loads((tmp_path / "a.json").read_text())
    assert export("ocs", files["plan"], tmp_path / "b.json", topo=topo) == ""  # or the plan's file
    assert (tmp_path / "b.json").read_text() == (tmp_path / "a.json").read_text()
    with pytest.raises(TopoplanError, match="needs the topology"):
        export("ocs", plan, tmp_path / "c.json")
    assert not (tmp_path / "c.json").exists()


# -- schedules ---------------------------------------------------------------------------

def test_schedule_entries_differ_by_exact_set_differences(files, tmp_path):
    out, given = tmp_path / "sched.ocs.json", tmp_path / "given.ocs.json"
    # a phases document records its topology spec and --set overrides, as a circuit plan does (it recorded
    # neither, and export asked for --topology)
    src = json.loads(files["sched"].read_text())
    assert (src["topology_spec"], src["topology_sets"]) == ("paper003", SETS)
    assert _cli("export", "ocs", "-p", files["sched"], "-o", out) == 0
    assert _cli("export", "ocs", "-p", files["sched"], "-t", "paper003", *SETS_ARGS, "-o", given) == 0
    assert json.loads(out.read_text()) == json.loads(given.read_text())
    src = json.loads(files["sched"].read_text())
    sched = src["schedule_result"]["schedule"]
    doc = json.loads(out.read_text())
    assert len(sched) == len(doc["entries"]) == 2
    assert doc["kind"] == "schedule" and doc["setup_s"] == src["schedule_result"]["setup_s"]
    assert doc["inputs"] == src["schedule_result"]["inputs"] and doc["seed"] == src["schedule_result"]["seed"]
    prev = set()
    for e, s in zip(doc["entries"], sched):
        new = _circuits(s["circuits"])
        assert _keys(e["cross_connects"]) == new
        assert _keys(e["connect"]) == new - prev
        assert _keys(e["disconnect"]) == prev - new
        assert _keys(e["keep"]) == new & prev
        assert e["first_call"] == src["phases"][s["from_phase"]]["first_call"]   # the PMPI trigger
        assert (e["from_phase"], e["to_phase"]) == (s["from_phase"], s["to_phase"])
        prev = new
    assert doc["entries"][1]["setup_during"] == sched[1]["setup"]["during"]
    assert doc["entries"][1]["setup_s"] == doc["setup_s"] > 0
    assert set(doc["entries"][1]["first_call"]) != {0}
    _check_ports(doc, load_topology("paper003", SETS))
    # the bare schedule result exports the same entries, without the phases' triggers
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(src["schedule_result"]))
    assert _cli("export", "ocs", "-p", bare, "-t", "paper003", *SETS_ARGS, "-o", tmp_path / "bare.ocs.json") == 0
    again = json.loads((tmp_path / "bare.ocs.json").read_text())
    for a, b in zip(again["entries"], doc["entries"]):
        assert "first_call" not in a
        assert a["cross_connects"] == b["cross_connects"] and a["forwarding"] == b["forwarding"]


def _hand_schedule():
    """Five entries on OCS nodes 0, 16, 32, 48 with two ports each: a kept circuit, a surviving set-up, a
    decomposed phase of two slots, and a circuit kept from a slot."""
    return {"n_phases": 5, "setup_s": 0.02, "schedule": [
        {"from_phase": 0, "to_phase": 1, "circuits": [[0, 16], [32, 48]], "setup": None,
         "forwarding": {"0": {"1": 16}, "1": {"1": 0}, "16": {"0": 0}, "32": {"3": 48}, "48": {"2": 32}}},
        {"from_phase": 1, "to_phase": 2, "circuits": [[0, 16], [0, 32]], "setup": {"during": "wait"},
         "forwarding": {"0": {"1": 16, "2": 32}, "16": {"0": 0}, "32": {"0": 0}}},
        {"from_phase": 2, "to_phase": 3, "circuits": [[0, 16], [16, 48]],
         "forwarding": {"0": {"1": 16}, "16": {"0": 0, "3": 48}, "48": {"1": 16}},
         "setup": {"during": "surviving", "surviving_circuits": [[0, 16]], "surviving_forwarding": {"0": {"1": 16}}}},
        {"from_phase": 3, "to_phase": 4, "circuits": [[0, 48]], "forwarding": {"0": {"3": 48}}, "hop_limit": 1,
         "setup": {"during": "wait"}, "slots": [
             {"circuits": [[0, 48]], "forwarding": {"0": {"3": 48}}, "duration_s": 0.001, "bytes_B": [[0, 3, 1e6]]},
             {"circuits": [[16, 32]], "forwarding": {"16": {"2": 32}}, "duration_s": 0.002, "bytes_B": [[1, 2, 2e6]]}]},
        {"from_phase": 4, "to_phase": 5, "circuits": [[16, 32], [0, 16]], "forwarding": {"16": {"2": 32, "0": 0}},
         "setup": {"during": "wait"}}]}


HAND_SETS = ["ocs.nodes_per_switch=1", "ocs.ports_per_node=2"]   # OCS nodes 0, 16, 32, 48: OCS ports 0-1, 2-3, ...


def _ports(xcs):
    return [(x["a"]["node"], x["a"]["port"], x["b"]["node"], x["b"]["port"]) for x in xcs]


def test_ports_are_kept_freed_and_reused_across_entries_and_slots():
    topo = load_topology("paper003", HAND_SETS)
    phases = [{"first_call": [5 * k, 7 * k]} for k in range(5)]
    doc = ocs_document({"n_ranks": 2, "phases": phases, "schedule_result": _hand_schedule()}, topo)
    e = doc["entries"]
    assert [x["first_call"] for x in e] == [p["first_call"] for p in phases]
    assert [x["setup_during"] for x in e] == ["before-run", "wait", "surviving", "wait", "wait"]
    assert [x["setup_s"] for x in e] == [0.02] * 5
    assert _ports(e[0]["connect"]) == [(0, 0, 16, 2), (32, 4, 48, 6)]
    # entry 1: 32-48 disconnected first, 0-16 kept on its ports, 0-32 takes node 0's second port
    assert _ports(e[1]["disconnect"]) == [(32, 4, 48, 6)]
    assert _ports(e[1]["keep"]) == [(0, 0, 16, 2)]
    assert _ports(e[1]["connect"]) == [(0, 1, 32, 4)]
    assert _ports(e[1]["cross_connects"]) == [(0, 0, 16, 2), (0, 1, 32, 4)]
    # entry 2: the phase starts on the surviving circuit, the new tables hold from phase 3 (rank triggers given)
    assert _ports(e[2]["connect"]) == [(16, 3, 48, 6)] and _ports(e[2]["disconnect"]) == [(0, 1, 32, 4)]
    surv = e[2]["surviving"]
    assert _ports(surv["cross_connects"]) == [(0, 0, 16, 2)]
    assert surv["forwarding"] == {"node0000": {f"node{v:04d}": "node0016" for v in range(16, 32)}}
    assert surv["to_phase"] == 3 and surv["to_first_call"] == phases[3]["first_call"]
    # entry 3: a decomposed phase; its cross-connects are its first slot's, slot 1 changes again
    assert _ports(e[3]["cross_connects"]) == [(0, 0, 48, 6)]
    s0, s1 = e[3]["slots"]
    assert s0["cross_connects"] == e[3]["cross_connects"] and s0["setup_s"] == 0.0
    assert (s0["duration_s"], s1["duration_s"], s1["setup_s"]) == (0.001, 0.002, 0.02)
    assert _ports(s1["disconnect"]) == [(0, 0, 48, 6)] and _ports(s1["connect"]) == [(16, 2, 32, 4)]
    assert s1["bytes_B"] == [[1, 2, 2e6]] and e[3]["hop_limit"] == 1
    # entry 4 differs from the last slot, not from the entry's first configuration
    assert _ports(e[4]["keep"]) == [(16, 2, 32, 4)]
    assert _ports(e[4]["connect"]) == [(0, 0, 16, 3)] and e[4]["disconnect"] == []
    _check_ports(doc, topo)


def test_a_change_of_tables_alone_costs_no_setup():
    topo = load_topology("paper003", HAND_SETS)
    s = {"n_phases": 2, "schedule": [
        {"from_phase": 0, "to_phase": 1, "circuits": [[0, 16]], "forwarding": {"0": {"1": 16}}},
        {"from_phase": 1, "to_phase": 2, "circuits": [[0, 16]], "forwarding": {"1": {"1": 0}}}]}
    e = ocs_document(s, topo)["entries"][1]
    assert (e["setup_s"], e["setup_during"], e["connect"], e["disconnect"]) == (0.0, "none", [], [])
    assert _ports(e["keep"]) == [(0, 0, 16, 2)]
    assert list(e["forwarding"]) == ["node0001"]
    del s["n_phases"], s["schedule"][0]["to_phase"], s["schedule"][1]["to_phase"]   # hand-made: phases implied
    d = ocs_document(s, topo)
    assert d["n_phases"] == 2 and [(x["from_phase"], x["to_phase"]) for x in d["entries"]] == [(0, 1), (1, 2)]


def test_exported_schedules_replay_as_the_schedule():
    """The OCS document alone rebuilds the schedule: it validates, and the replay gives the same time."""
    from topoplan.plans.schedule import validate_schedule
    from topoplan.problems.circuits.schedule import PhasedProblem, schedule
    from topoplan.traffic.generators import halo_then_transpose
    from topoplan.sim.schedule import simulate_schedule

    topo = load_topology("paper003", HAND_SETS)
    hand = _hand_schedule()
    back = schedule_from_ocs(ocs_document(hand, topo))
    assert validate_schedule(back, topo) == validate_schedule(hand, topo)
    for a, b in zip(hand["schedule"], back["schedule"]):
        assert _circuits(a["circuits"]) == _circuits(b["circuits"]) and a["forwarding"] == b["forwarding"]
        assert (a["setup"] or {}).get("during") == (b["setup"] or {}).get("during")
        assert [(sl["circuits"], sl["forwarding"], sl["duration_s"]) for sl in a.get("slots", [])] == \
            [(sl["circuits"], sl["forwarding"], sl["duration_s"]) for sl in b.get("slots", [])]
    topo = load_topology("paper003", SETS)
    trace = halo_then_transpose(16, 16, 4e6, iters=2)
    prob = PhasedProblem.build(topo, trace)
    res = schedule(prob, "exact", circuit_method="greedy").to_dict()
    assert len(res["schedule"]) == 2
    back = schedule_from_ocs(ocs_document(res, topo, rules="switch"))
    want = simulate_schedule(topo, trace, prob.phases, res)
    got = simulate_schedule(topo, trace, prob.phases, back)
    assert got["makespan_s"] == want["makespan_s"] and got["reconfigurations"] == want["reconfigurations"] == 1


# -- refusals ------------------------------------------------------------------------------

@pytest.mark.parametrize("circuits, message", [
    ([[0, 16], [0, 32]], r"field 'circuits\[1\]': node 0 has 2 circuits but 1 optical port"),   # one port, two circuits
    ([[0, 17]], r"field 'circuits\[0\]': node 17 is not an OCS node"),
])
def test_invalid_plans_are_refused_and_not_written(tmp_path, circuits, message):
    topo = load_topology("paper003", ["ocs.nodes_per_switch=1"])
    out = tmp_path / "ocs.json"
    with pytest.raises(TopoplanError, match=message):
        export_ocs({"circuits": circuits, "forwarding": {}}, out, topo=topo)
    assert not out.exists()
    plan = tmp_path / "bad.json"
    plan.write_text(json.dumps({"circuits": circuits, "forwarding": {}, "topology_spec": "paper003",
                                "topology_sets": ["ocs.nodes_per_switch=1"]}))
    out.write_text("old\n")
    with pytest.raises(TopoplanError, match=f"bad.json: {message}"):
        export_ocs(plan, out, topo=topo)
    assert out.read_text() == "old\n"


@pytest.mark.parametrize("circuits, message", [
    ([[0, 16], [0, 32]], r"node 0 has 2 circuits but 1 optical port"),
    ([[0, 17]], r"node 17 is not an OCS node"),
])
def test_cli_refuses_invalid_plans_with_exit_2(tmp_path, capsys, circuits, message):
    import re

    plan = tmp_path / "bad.json"
    plan.write_text(json.dumps({"circuits": circuits, "forwarding": {}, "topology_spec": "paper003",
                                "topology_sets": ["ocs.nodes_per_switch=1"]}))
    out = tmp_path / "ocs.json"
    assert _cli("export", "ocs", "-p", plan, "-o", out) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err
    assert "bad.json" in err and "field 'circuits[" in err and re.search(message, err)
    assert not out.exists()


def test_invalid_schedule_entry_is_refused(files, tmp_path, capsys):
    src = json.loads(files["sched"].read_text())
    src["schedule_result"]["schedule"][1]["circuits"].append([4, 20])   # nodes 4 and 20: not OCS nodes
    bad = tmp_path / "bad_sched.json"
    bad.write_text(json.dumps(src))
    out = tmp_path / "ocs.json"
    assert _cli("export", "ocs", "-p", bad, "-t", "paper003", *SETS_ARGS, "-o", out) == 2
    err = capsys.readouterr().err
    assert "bad_sched.json: schedule_result: entry 1: field 'circuits[8]': node 4 is not an OCS node" in err
    assert not out.exists()
    with pytest.raises(TopoplanError, match="field 'phases': expected a list of the schedule's 2 phases"):
        ocs_document(dict(json.loads(files["sched"].read_text()), phases=[]), load_topology("paper003", SETS))


def test_plans_for_another_topology_are_refused(files, tmp_path, capsys):
    out = tmp_path / "ocs.json"
    assert _cli("export", "ocs", "-p", files["plan"], "-t", "paper003", "-o", out) == 2
    assert "made for another topology" in capsys.readouterr().err and not out.exists()


def test_placement_only_file_is_refused_for_ocs(tmp_path, capsys):
    pl = tmp_path / "pl.json"
    assert _cli("place", "-t", "paper003", "-T", "ring:np=8,bytes=1MB", "-m", "sequential", "-o", pl) == 0
    capsys.readouterr()
    out = tmp_path / "ocs.json"
    assert _cli("export", "ocs", "-p", pl, "-t", "paper003", "-o", out) == 2
    err = capsys.readouterr().err
    assert "pl.json: field 'circuits': missing: a placement" in err and not out.exists()
    csv = tmp_path / "pl.csv"
    csv.write_text("rank,node\n0,0\n")
    assert _cli("export", "ocs", "-p", csv, "-t", "paper003", "-o", out) == 2
    assert "not a placement CSV" in capsys.readouterr().err and not out.exists()
    phases_only = tmp_path / "phases.json"
    phases_only.write_text(json.dumps({"n_phases": 1, "phases": [{"first_call": [0]}]}))
    assert _cli("export", "ocs", "-p", phases_only, "-t", "paper003", "-o", out) == 2
    assert "field 'schedule_result': missing" in capsys.readouterr().err and not out.exists()


def test_too_many_host_rules_ask_for_switch_rules(files, monkeypatch):
    topo = load_topology("paper003", SETS)
    plan = json.loads(files["plan"].read_text())
    monkeypatch.setattr(ocs_export, "MAX_HOST_RULES", 10)
    with pytest.raises(TopoplanError, match=r"forwarding rules per destination host .*--rules switch"):
        ocs_document(plan, topo)
    assert ocs_document(plan, topo, rules="switch")["rules"] == "switch"
    with pytest.raises(TopoplanError, match="unknown forwarding rules"):
        ocs_document(plan, topo, rules="ports")


# -- launcher formats with circuit plans --------------------------------------------------

def test_launcher_formats_take_the_placement_of_a_plan_or_schedule(files, tmp_path, capsys):
    plan = json.loads(files["plan"].read_text())
    rf = tmp_path / "rankfile"
    assert _cli("export", "ompi4", "-p", files["plan"], "-o", rf) == 0
    lines = rf.read_text().splitlines()
    assert len(lines) == len(plan["rank_to_node"]) and lines[0].startswith(f"rank 0=node{plan['rank_to_node'][0]:04d} ")
    # a phases --schedule document: the placement it was scheduled for
    mf = tmp_path / "machines"
    assert _cli("export", "mpich", "-p", files["sched"], "-t", "paper003", *SETS_ARGS, "-o", mf) == 0
    r2n = json.loads(files["sched"].read_text())["schedule_result"]["rank_to_node"]
    assert mf.read_text().split() == [f"node{k:04d}" for k in r2n]
    # a circuit plan without a placement: nothing to launch, and the message says what to do
    bare = tmp_path / "no_ranks.json"
    bare.write_text(json.dumps({k: v for k, v in plan.items() if k != "rank_to_node"}))
    capsys.readouterr()
    assert _cli("export", "ompi4", "-p", bare, "-o", tmp_path / "rf2") == 2
    assert "field 'rank_to_node': missing" in capsys.readouterr().err and not (tmp_path / "rf2").exists()
    assert _cli("export", "ompi4", "-p", files["plan"], "--rules", "switch", "-o", tmp_path / "rf3") == 2
    assert "only the ocs format" in capsys.readouterr().err and not (tmp_path / "rf3").exists()


@pytest.mark.parametrize("fmt", ["ocs", "routes", "ompi4", "slurm"])
def test_a_plan_archive_exports_as_its_json_plan_does(files, tmp_path, capsys, fmt):
    """``circuits -o plan.zip`` (the compact plan for large tables) exports to every format as the JSON plan."""
    archive = tmp_path / "plan.zip"
    assert _cli("circuits", "-t", "paper003", *SETS_ARGS, "-T", "neighbor2d:rows=16,cols=16,bytes=4MB",
                "-m", "greedy", "--no-simulate", "-o", archive) == 0
    out = {}
    for name, plan in (("json", files["plan"]), ("zip", archive)):
        out[name] = tmp_path / f"{name}.{fmt}"
        assert _cli("export", fmt, "-p", plan, "-o", out[name]) == 0, capsys.readouterr().err
    if fmt == "routes":
        got = {p.name: p.read_text().splitlines()[1:] for p in out["zip"].iterdir()}   # (line 0 names the plan)
        assert got == {p.name: p.read_text().splitlines()[1:] for p in out["json"].iterdir()} and got
    elif fmt == "ocs":
        assert json.loads(out["zip"].read_text())["entries"] == json.loads(out["json"].read_text())["entries"]
    else:
        assert out["zip"].read_text() == out["json"].read_text()


# -- the document's JSON Schema, and schedules whose numbers are not times (issue 36) ------------------

def _schema_errors(doc):
    """Errors of an independent check of ``doc`` against the published schema file (jsonschema, as a controller
    would run it), from the file the package ships."""
    from importlib.resources import files as package_files

    import jsonschema

    schema = json.loads((package_files("topoplan") / "reporting" / "schemas" / "topoplan-ocs-1.schema.json")
                        .read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return list(jsonschema.Draft202012Validator(schema).iter_errors(doc))


def test_written_documents_validate_against_the_published_schema(files, tmp_path, capsys):
    """Every kind the exporter writes -- a static plan, a phases schedule with per-rank triggers, a hand schedule
    with a surviving set-up and slots, per-switch rules -- is valid JSON (no NaN) and valid against the schema."""
    assert ocs_export.OCS_SCHEMA.is_file() and ocs_export.OCS_SCHEMA.name == "topoplan-ocs-1.schema.json"
    written = []
    for name, src, extra in (("static", files["plan"], []), ("sched", files["sched"], ["-t", "paper003", *SETS_ARGS]),
                             ("switch", files["sched"], ["-t", "paper003", *SETS_ARGS, "--rules", "switch"])):
        out = tmp_path / f"{name}.ocs.json"
        assert _cli("export", "ocs", "-p", src, *extra, "-o", out) == 0
        assert str(ocs_export.OCS_SCHEMA) in capsys.readouterr().out    # the export says where the schema is
        written.append(json.loads(out.read_text(), parse_constant=lambda c: pytest.fail(f"{c} written")))
    hand = tmp_path / "hand.ocs.json"
    export_ocs(_hand_schedule(), hand, topo=load_topology("paper003", HAND_SETS))
    written.append(json.loads(hand.read_text()))
    assert any(e.get("slots") for e in written[-1]["entries"]) and any("surviving" in e for e in written[-1]["entries"])
    for doc in written:
        assert doc["schema"] == "topoplan-ocs-1.schema.json"
        assert _schema_errors(doc) == []


def _break(doc, path, value):
    *head, last = path
    for k in head:
        doc = doc[k]
    if value is KeyError:
        del doc[last]
    else:
        doc[last] = value


@pytest.mark.parametrize("path, value, message", [
    (("setup_s",), -1.0, r"field 'setup_s': -1.0 is less than the minimum of 0"),
    (("entries", 0, "setup_s"), float("nan"), r"field 'entries\[0\].setup_s': nan is not a finite number"),
    (("entries", 3, "from_s"), float("inf"), r"field 'entries\[3\].from_s': inf is not a finite number"),
    (("blackout",), "wait", r"field 'blackout': 'wait' is not one of \['eps', 'stall'\]"),
    (("entries", 1, "setup_during"), "later", r"field 'entries\[1\].setup_during': 'later' is not one of"),
    (("entries", 3, "slots", 1, "duration_s"), -0.5, r"field 'entries\[3\].slots\[1\].duration_s'"),
    (("entries", 0, "cross_connects", 0, "a", "port"), "0", r"field 'entries\[0\].cross_connects\[0\].a.port': "
                                                           r"'0' is not of type 'integer'"),
    (("entries", 2, "surviving", "to_phase"), KeyError, r"field 'entries\[2\].surviving': 'to_phase' is a required"),
    (("hosts",), [], r"field 'hosts': \[\] should be non-empty"),
    (("entries", 0, "connnect"), [], r"field 'entries\[0\]': Unevaluated properties are not allowed \('connnect'"),
    (("n_phases",), 0, r"field 'n_phases': 0 is less than the minimum of 1"),
])
def test_broken_documents_are_refused_by_the_schema(path, value, message):
    """A document the schema refuses is never written and never read back as a schedule; the independent
    validator agrees (NaN aside: it passes every 'minimum', so it is refused before the schema, as JSON cannot
    hold it)."""
    import copy

    topo = load_topology("paper003", HAND_SETS)
    good = ocs_document(_hand_schedule(), topo)
    bad = copy.deepcopy(good)
    _break(bad, path, value)
    with pytest.raises(TopoplanError, match=message):
        ocs_export.check_ocs_document(bad, where="ocs.json")
    with pytest.raises(TopoplanError, match="ocs.json: "):
        schedule_from_ocs(bad, where="ocs.json")
    if not (isinstance(value, float) and value != value or value == float("inf")):
        assert _schema_errors(bad)


@pytest.mark.parametrize("path, value, message", [
    (("entries", 0, "cross_connects", 0, "a", "port"), 999,
     r"field 'entries\[0\].cross_connects\[0\].a.port': OCS port 999 is not optical port 0 of node 0 \(OCS port 0\)"),
    (("entries", 0, "cross_connects", 0, "b", "host"), "node0001",
     r"field 'entries\[0\].cross_connects\[0\].b.host': 'node0001' is not the host of node 16 \(node0016\)"),
    (("entries", 1, "connect", 0, "a", "node_port"), 5, r"field 'entries\[1\].connect\[0\].a.port': OCS port 1 is "
                                                         r"not optical port 5 of node 0 \(2 per node\)"),
    (("entries", 2, "surviving", "cross_connects", 0, "a", "node"), 1,
     r"field 'entries\[2\].surviving.cross_connects\[0\].a.node': node 1 is not an OCS node of the document"),
    (("entries", 3, "slots", 1, "connect", 0, "b", "port"), 0, r"field 'entries\[3\].slots\[1\].connect\[0\].b.port'"),
    (("ocs_nodes", 1, "ports"), [7, 8], r"field 'ocs_nodes\[1\].ports': \[7, 8\] for node 16, but the port numbering "
                                         r"gives \[2, 3\]"),
])
def test_cross_connect_ends_must_be_their_nodes_ports_and_hosts(path, value, message):
    """A controller connects the ports a document names: an end whose OCS port or host is not its node's was
    read back (validate, replay) as the plan's circuit, by its node alone."""
    topo = load_topology("paper003", HAND_SETS)
    bad = json.loads(json.dumps(ocs_document(_hand_schedule(), topo)))   # as read from its file
    _break(bad, path, value)
    with pytest.raises(TopoplanError, match=message):
        schedule_from_ocs(bad, where="ocs.json")


@pytest.mark.parametrize("change, message", [
    ({"setup_s": -0.01}, "field 'setup_s': expected a non-negative time in seconds, got -0.01"),
    ({"setup_s": float("nan")}, "field 'setup_s': expected a non-negative time in seconds, got nan"),
    ({"setup_s": True}, "field 'setup_s': expected a non-negative time in seconds, got True"),
    ({"blackout": "wait"}, "field 'blackout': expected one of eps, stall, got 'wait'"),
    ({"threshold_B": float("inf")}, "field 'threshold_B': expected a non-negative size in bytes, got inf"),
    ({"n_phases": 0}, "field 'n_phases': expected a positive number of phases, got 0"),
    ({0: {"from_s": -1.0}}, r"entry 0: field 'from_s': expected a non-negative time in seconds, got -1.0"),
    ({0: {"from_s": float("nan")}}, r"entry 0: field 'from_s': expected a non-negative time in seconds, got nan"),
    ({1: {"from_s": 0.5}, 2: {"from_s": 0.25}}, r"entry 2: field 'from_s': 0.25 is before the previous entry's start"),
    ({3: {"slots": [{**_hand_schedule()["schedule"][3]["slots"][0], "duration_s": float("inf")}]}},
     r"entry 3: slot 0: field 'duration_s': expected a non-negative time, got inf"),
    ({3: {"slots": [{**_hand_schedule()["schedule"][3]["slots"][0], "bytes_B": [[0.5, 3, 1e6]]}]}},
     r"entry 3: slot 0: field 'bytes_B': expected \[switch, switch, bytes\] triples"),
    ({3: {"slots": [{**_hand_schedule()["schedule"][3]["slots"][0], "bytes_B": [[0, 3, float("nan")]]}]}},
     r"entry 3: slot 0: field 'bytes_B'"),
])
def test_schedules_whose_numbers_are_not_times_are_refused(tmp_path, change, message):
    """validate, export ocs and the schedule replay once took a negative or NaN set-up time, an unknown blackout
    and a negative or NaN start; the OCS document then held NaN (not JSON)."""
    from topoplan.plans.validate import validate

    topo = load_topology("paper003", HAND_SETS)
    doc = _hand_schedule()
    for k, v in change.items():
        if isinstance(k, int):
            doc["schedule"][k].update(v)
        else:
            doc[k] = v
    with pytest.raises(TopoplanError, match=message):
        validate(doc, topo, where="s.json")
    out = tmp_path / "ocs.json"
    with pytest.raises(TopoplanError, match=message):
        export_ocs(doc, out, topo=topo, where="s.json")
    assert not out.exists()


def test_validate_checks_an_ocs_documents_circuits_not_its_placement_alone(files, tmp_path, capsys):
    """`validate ocs.json` said 'valid (placement: N ranks)' whatever its cross-connects held."""
    out = tmp_path / "static.ocs.json"
    assert _cli("export", "ocs", "-p", files["plan"], "-o", out) == 0
    capsys.readouterr()
    assert _cli("validate", out, "-t", "paper003", *SETS_ARGS) == 0
    assert "circuit schedule: 1 entries" in capsys.readouterr().out
    doc = json.loads(out.read_text())
    doc["entries"][0]["cross_connects"].append(doc["entries"][0]["cross_connects"][0])
    bad = tmp_path / "bad.ocs.json"
    bad.write_text(json.dumps(doc))
    assert _cli("validate", bad, "-t", "paper003", *SETS_ARGS) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {bad}: entry 0: field 'circuits[") and "listed twice" in err, err
