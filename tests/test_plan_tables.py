"""Large forwarding tables held as their next-hop array, and greedy's compiled traffic pass.

:class:`topoplan.plans.circuits.ForwardingTables` must read, compare, validate, write and simulate exactly as
the dict of the same tables (the plan files byte for byte), and the compiled traffic pass of
:func:`topoplan.problems.circuits.forwarding.distance_vector` must give the Python pass's tables entry for
entry. The sizes that switch them on are lowered here so small cases take the large-problem paths.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from test_circuits_cases import hybrid, problem
from test_sim_aot import current_or_skip
from topoplan.core.aot import arg_spec
from topoplan.core.errors import TopoplanError
from topoplan.core.io import dumps, read_json, write_json
from topoplan.plans import circuits as plan_circuits, planfile
from topoplan.plans.circuits import ForwardingTables, array_from_tables, tables_from_array, validate_plan_dict
from topoplan.plans.validate import validate
from topoplan.problems.circuits import _sharing, _sharing_jit, forwarding, problem as problem_mod, solve
from topoplan.problems.circuits.forwarding import _distance_vector_reference, distance_vector
from topoplan.sim.network import build_network
from topoplan.sim.replay import bulk_trace
from topoplan.sim.run import simulate_plan


def _random_table(rng, n=9, s=4):
    nh = np.where(rng.random((n, s)) < 0.4, rng.integers(0, n, (n, s)), -1)
    nh[rng.integers(0, n)] = -1   # a row without entries
    return nh


@pytest.fixture
def arrays_from_the_first_entry(monkeypatch):
    """Plans hold their tables as arrays at every size (as from 65,536 nodes x switches)."""
    monkeypatch.setattr(problem_mod, "ARRAY_MIN_ENTRIES", 0)
    monkeypatch.setattr(plan_circuits, "ARRAY_MIN_ENTRIES", 0)


def _case(seed):
    rng = np.random.default_rng(seed)
    t = hybrid(switches=int(rng.integers(3, 6)), per_switch=4, ocs_per_switch=2, ports=int(rng.integers(1, 3)))
    n = t.n_nodes
    pairs = [(int(a), int(b), 4e6) for a, b in rng.integers(0, n, (2 * n, 2)) if a != b]
    return t, problem(t, pairs)


# -- the mapping -------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(5))
def test_tables_held_as_an_array_read_as_the_dict(seed):
    nh = _random_table(np.random.default_rng(seed))
    ft, d = ForwardingTables(nh), tables_from_array(nh)
    assert ft == d and d == ft and list(ft) == list(d) and len(ft) == len(d)
    assert {k: ft[k] for k in ft} == d and ft.n_entries == sum(map(len, d.values()))
    assert all(k in ft for k in d) and 0 not in ft and "00" not in ft
    assert (array_from_tables(ft, *nh.shape) == array_from_tables(d, *nh.shape)).all()
    assert ft == ForwardingTables(np.pad(nh, ((0, 2), (0, 1)), constant_values=-1))   # trailing empty rows
    other = nh.copy()
    other[other >= 0] = (other[other >= 0] + 1) % nh.shape[0]
    assert ft != ForwardingTables(other) or not d


def test_held_tables_are_read_only():
    ft = ForwardingTables(np.array([[-1, 1], [0, -1]]))
    with pytest.raises(ValueError, match="read-only"):
        ft.next_hop[0, 0] = 1
    with pytest.raises(KeyError):
        ft["5"]
    with pytest.raises(TypeError):
        ft["0"] = {"1": 1}


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("indent", [1, 2, None])
def test_held_tables_are_written_as_the_dicts_text(seed, indent):
    nh = _random_table(np.random.default_rng(seed), n=40, s=7)
    for table in (nh, np.full((3, 2), -1), np.where(np.arange(6).reshape(3, 2) == 5, 0, -1)):
        doc = {"circuits": [[0, 1]], "forwarding": tables_from_array(table), "tail": {"x": [1, 2]}}
        held = dict(doc, forwarding=ForwardingTables(table))
        assert dumps(held, indent=indent) == dumps(doc, indent=indent)


def test_a_written_plan_file_is_the_same_bytes(tmp_path):
    nh = _random_table(np.random.default_rng(3), n=50, s=9)
    write_json(tmp_path / "dict.json", {"forwarding": tables_from_array(nh), "wall_s": 1.0})
    write_json(tmp_path / "held.json", {"forwarding": ForwardingTables(nh), "wall_s": 1.0})
    assert (tmp_path / "dict.json").read_bytes() == (tmp_path / "held.json").read_bytes()
    assert read_json(tmp_path / "held.json")["forwarding"] == ForwardingTables(nh)


# -- validation ------------------------------------------------------------------------------------

def _spoiled(rng, t, plan):
    """The plan's tables with one fault: a next hop that is no neighbour, a loop, an entry at a node already
    under its destination switch, or a route over more circuits than the hop limit allows."""
    nh = array_from_tables(plan["forwarding"], t.n_nodes, t.n_switches)
    sw = t.node_switch()
    kind = int(rng.integers(0, 3))
    u = int(rng.integers(0, t.n_nodes))
    if kind == 0:
        target = int((sw[u] + 1) % t.n_switches)
        far = [x for x in range(t.n_nodes) if sw[x] != sw[u] and sw[x] != target]
        nh[u, target] = far[0] if far else u
    elif kind == 1:
        mates = [x for x in range(t.n_nodes) if sw[x] == sw[u] and x != u]
        target = int((sw[u] + 1) % t.n_switches)
        nh[u, target], nh[mates[0], target] = mates[0], u
    else:
        nh[u, sw[u]] = (u + 1) % t.n_nodes
    return nh


@pytest.mark.parametrize("seed", range(6))
def test_held_tables_are_refused_with_the_dicts_message(seed):
    rng = np.random.default_rng(seed)
    t, p = _case(seed)
    plan = solve(p, "three-step").plan
    nh = _spoiled(rng, t, plan)
    msgs = []
    for fwd in (tables_from_array(nh), ForwardingTables(nh)):
        with pytest.raises(TopoplanError) as exc:
            validate_plan_dict({"circuits": plan["circuits"], "forwarding": fwd}, t, where="p.json")
        msgs.append(str(exc.value))
    assert msgs[0] == msgs[1] and msgs[0].startswith("p.json: field 'forwarding")


def test_held_tables_are_checked_again_for_another_hop_limit():
    t = hybrid(switches=3, per_switch=2, ocs_per_switch=2, ports=2)   # 0,1 | 2,3 | 4,5
    nh = np.full((6, 3), -1)
    nh[1, 2], nh[0, 2], nh[2, 2] = 0, 2, 4                   # 1 -> 0 => 2 => 4: two circuits
    doc = {"circuits": [[0, 2], [2, 4]], "forwarding": ForwardingTables(nh)}
    validate_plan_dict(doc, t)
    validate_plan_dict(doc, t)                               # (checked once: the same answer)
    with pytest.raises(TopoplanError, match="crosses 2 circuits, more than hop_limit 1"):
        validate_plan_dict({**doc, "hop_limit": 1}, t)
    with pytest.raises(TopoplanError, match="not a neighbour"):
        validate_plan_dict({"circuits": [[0, 2]], "forwarding": doc["forwarding"]}, t)


@pytest.mark.parametrize("shape", [(4, 3), (6, 2), (7, 3), (6, 4)])
def test_held_tables_of_another_shape_than_the_topology_are_refused(shape):
    t = hybrid(switches=3, per_switch=2, ocs_per_switch=2, ports=2)   # 0,1 | 2,3 | 4,5: 6 nodes x 3 switches
    nh = np.full(shape, -1)
    nh[0, 1] = 2                                             # a valid entry: node 0 => 2 (switch 1)
    for source, prefix in ((None, "p.json: "), ("next_hop.npy", "p.json: next_hop.npy: ")):
        with pytest.raises(TopoplanError, match=re.escape(
                f"{prefix}field 'forwarding': tables of {shape[0]} nodes x {shape[1]} switches, but the topology "
                "has 6 nodes x 3 switches")):
            validate_plan_dict({"circuits": [[0, 2]], "forwarding": ForwardingTables(nh, source=source)}, t,
                               where="p.json")


@pytest.mark.parametrize("method", ["three-step", "greedy", "sp"])
def test_plans_of_every_size_are_the_same_file(method, tmp_path, monkeypatch):
    t, p = _case(11)
    small = solve(p, method, seed=1)
    monkeypatch.setattr(problem_mod, "ARRAY_MIN_ENTRIES", 0)
    held = solve(_case(11)[1], method, seed=1)   # (a new problem: the first remembers its plans)
    assert isinstance(held.plan["forwarding"], ForwardingTables) and not isinstance(small.plan["forwarding"],
                                                                                    ForwardingTables)
    for res, name in ((small, "a.json"), (held, "b.json")):
        res.wall_s = 0.0
        planfile.write_plan(tmp_path / name, res, t, validated=True)
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()


def test_a_large_plan_read_from_json_is_validated_once(tmp_path, arrays_from_the_first_entry, monkeypatch):
    t, p = _case(4)
    res = solve(p, "greedy")
    assert res.plan["forwarding"]
    planfile.write_plan(tmp_path / "plan.json", res, t)
    doc = planfile.read_plan(tmp_path / "plan.json", t)     # checked entry-wise as read, then held

    def again(*args):
        raise AssertionError("the tables read were checked a second time")

    monkeypatch.setattr(plan_circuits, "_array_valid", again)
    monkeypatch.setattr(plan_circuits, "_check_tables", again)
    validate_plan_dict(doc, t)                               # the simulator's and exports' validation
    with pytest.raises(AssertionError, match="second time"):  # other circuits: checked again
        validate_plan_dict({**doc, "circuits": doc["circuits"][1:]}, t)


def test_a_large_plan_is_read_back_as_its_array(tmp_path, arrays_from_the_first_entry):
    t, p = _case(4)
    res = solve(p, "greedy")
    planfile.write_plan(tmp_path / "plan.json", res, t)
    doc = planfile.read_plan(tmp_path / "plan.json", t)
    assert isinstance(doc["forwarding"], ForwardingTables) and doc["forwarding"] == res.plan["forwarding"]
    assert isinstance(planfile.read_plan(tmp_path / "plan.json")["forwarding"], dict)   # not validated: as read
    assert validate(doc, t)["checked"][0].startswith(f"circuit plan: {len(doc['circuits'])} circuits")
    bad = json.loads((tmp_path / "plan.json").read_text())
    row = next(iter(bad["forwarding"]))
    bad["forwarding"][row] = {str(t.node_switch()[int(row)]): 0}
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(TopoplanError, match=r"bad\.json: field 'forwarding\.\d+\.\d+': node \d+ is already under"):
        planfile.read_plan(tmp_path / "bad.json", t)


@pytest.mark.parametrize("seed", range(3))
def test_held_tables_simulate_as_the_dicts(seed, monkeypatch):
    t, p = _case(20 + seed)
    res = solve(p, "greedy", seed=seed)
    plan = res.to_dict()
    held = dict(plan, forwarding=ForwardingTables(array_from_tables(plan["forwarding"], t.n_nodes,
                                                                    t.n_switches)))
    nets = [build_network(t, {"circuits": d["circuits"], "forwarding": d["forwarding"]}) for d in (plan, held)]
    assert (nets[0].next_hop_table() == nets[1].next_hop_table()).all()
    trace = bulk_trace(p.traffic, 1)
    got = [simulate_plan(t, trace, d)["makespan_s"] for d in (plan, held)]
    assert got[0] == got[1] > 0


# -- greedy's compiled traffic pass ------------------------------------------------------------

def _sharing_aot_or_skip():
    current_or_skip(_sharing, "traffic pass")


@pytest.mark.parametrize("build", ["ahead-of-time", "jit"])
@pytest.mark.parametrize("seed", range(6))
def test_the_compiled_traffic_pass_gives_the_python_tables(seed, build, monkeypatch):
    """Both compiled passes (the extension built at install and Numba's JIT) give the Python pass's tables."""
    if build == "ahead-of-time":
        _sharing_aot_or_skip()
        monkeypatch.setattr(_sharing.EXTENSION, "_built", None)

        def no_jit(*args):
            built = _sharing.EXTENSION.built()[1]
            odd = [(i, a, b) for i, (a, b) in enumerate(zip(arg_spec(args), built)) if a != b]
            raise AssertionError(f"the JIT ran: arguments (position, given, built for) {odd}")

        monkeypatch.setattr(_sharing_jit, "traffic_pass", no_jit)
    else:
        monkeypatch.setattr(_sharing.EXTENSION, "_built", False)      # as without a current build
    monkeypatch.setattr(forwarding, "_SMALL", 0)
    rng = np.random.default_rng(300 + seed)
    for k in range(6):
        t = hybrid(switches=int(rng.integers(3, 7)), per_switch=6, ocs_per_switch=int(rng.integers(1, 4)),
                   ports=int(rng.integers(1, 3)), ocs_bw=str(rng.choice(["10Gbps", "20Gbps"])))
        n = t.n_nodes
        pairs = [(int(a), int(b), float(rng.choice([1, 4])) * 1e6) for a, b in rng.integers(0, n, (2 * n, 2))
                 if a != b]
        p = problem(t, pairs)
        circ = [tuple(c) for c in solve(p, "greedy", seed=k).plan["circuits"]]
        opts = {"hop_limit": [None, 2][k % 2], "full": k % 3 != 2,
                "fallback": rng.random((n, t.n_switches)) < 0.3 if k % 4 == 3 else None}
        monkeypatch.setattr(forwarding, "COMPILED_MIN_GROUPS", 10 ** 9)
        python = distance_vector(p, circ, **opts)
        monkeypatch.setattr(forwarding, "COMPILED_MIN_GROUPS", 0)
        compiled = distance_vector(p, circ, **opts)
        assert (compiled == python).all(), (seed, k, np.argwhere(compiled != python)[:3].tolist())
        assert (python == _distance_vector_reference(p, circ, **opts)).all()


def _traffic_pass_args():
    """The arguments of a real traffic pass with work (switch 0 -> 2 on 003's system, three circuits)."""
    from topoplan.core.topology_io import load_topology
    from topoplan.traffic.matrix import from_arrays

    prob = problem_mod.CircuitProblem.build(load_topology("paper003", ["ocs.nodes_per_switch=4"]),
                                            from_arrays(256, range(0, 64, 8), range(128, 192, 8), [4e8] * 8))
    seen = []

    def record(*args):
        seen.append(tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args))
        return real(*args)

    real = _sharing.traffic_pass
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_sharing, "traffic_pass", record)
        mp.setattr(forwarding, "_SMALL", 0)
        mp.setattr(forwarding, "COMPILED_MIN_GROUPS", 0)
        distance_vector(prob, [(0, 16), (1, 32), (17, 48)])
    return next(a for a in seen if len(a[1]))


def test_the_build_is_compiled_for_the_types_the_tables_pass():
    assert arg_spec(_traffic_pass_args()) == arg_spec(_sharing.signature_args())


def test_a_stale_traffic_pass_build_is_not_used(monkeypatch):
    monkeypatch.setattr(_sharing, "sources_sha256", lambda: "0" * 64)
    monkeypatch.setattr(_sharing.EXTENSION, "_built", None)
    assert _sharing.aot_status() in ("stale", "missing")
    assert _sharing.EXTENSION.built() is None


def test_traffic_pass_arguments_of_other_types_go_to_the_jit(monkeypatch):
    """The build does not check types: a pass with a float32 load array must not reach it."""
    _sharing_aot_or_skip()
    monkeypatch.setattr(_sharing.EXTENSION, "_built", None)
    args = list(_traffic_pass_args())
    want_events, want_nodes = _sharing.traffic_pass(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    args[20] = args[20].astype(np.float32)                 # the link loads
    events, nodes = _sharing.traffic_pass(*args)         # no crash: the JIT ran it
    assert (nodes == want_nodes).all() and events.shape == want_events.shape


def test_large_tables_are_made_without_numba():
    """With a current build, the compiled traffic pass of a large problem does not import Numba."""
    _sharing_aot_or_skip()
    code = ("import sys; from topoplan.core.topology_io import load_topology; "
            "from topoplan.problems.circuits import CircuitProblem, forwarding; "
            "from topoplan.traffic.matrix import from_arrays; "
            "forwarding._SMALL = forwarding.COMPILED_MIN_GROUPS = 0; "
            "p = CircuitProblem.build(load_topology('paper003', ['ocs.nodes_per_switch=4']), "
            "from_arrays(256, range(0, 64, 8), range(128, 192, 8), [4e8] * 8)); "
            "nh = forwarding.distance_vector(p, [(0, 16), (1, 32), (17, 48)]); "
            "print(int((nh >= 0).sum()) > 0, 'numba' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "False"]


def test_the_makefile_rebuilds_the_traffic_pass_from_its_sources():
    makefile = (_sharing.HERE.parents[2] / "Makefile").read_text()
    line = next(x for x in makefile.splitlines() if x.startswith("SHARING_SOURCES :="))
    assert tuple(line.split(",", 1)[1].rstrip(")").split()) == _sharing.SOURCES


# -- the plan archive ------------------------------------------------------------------------------

@pytest.fixture
def plans(tmp_path, run_cli):
    """The same greedy plan as JSON and as a plan archive, from the CLI, and the command line's inputs."""
    from topoplan.traffic.matrix import from_arrays

    src = [0, 16, 1, 17, 20, 36, 40, 56, 5, 21]
    from_arrays(64, src, [16, 0, 17, 1, 36, 20, 56, 40, 37, 53], [8e6] * 10).write_matrix(tmp_path / "m.csv")
    inputs = ["-t", "paper003", "-T", tmp_path / "m.csv", "-p", "round-robin"]
    for name in ("plan.json", "plan.zip"):
        code, _, err = run_cli("circuits", *inputs, "-m", "greedy", "--no-simulate", "-o", tmp_path / name)
        assert code == 0, err
    return tmp_path / "plan.json", tmp_path / "plan.zip", inputs


def test_a_plan_archive_holds_the_same_plan(plans, run_cli):
    from topoplan.core.topology_io import load_topology

    as_json, archive, inputs = plans
    assert archive.read_bytes()[:4] == b"PK\x03\x04"
    t = load_topology("paper003")
    a, b = planfile.read_plan(as_json, t), planfile.read_plan(archive, t)
    assert isinstance(b["forwarding"], ForwardingTables) and b["forwarding"] == a["forwarding"]
    a.pop("wall_s"), b.pop("wall_s")
    assert b == a
    results = []
    for plan in (as_json, archive):
        code, out, err = run_cli("validate", plan, "-t", "paper003", "--json")
        assert code == 0 and json.loads(out)["valid"], err
        code, out, err = run_cli("simulate", *inputs, "--circuits", plan, "--json")
        assert code == 0, err
        results.append(json.loads(out)["makespan_s"])
    assert results[0] == results[1] > 0


def _rewrite(archive, dest, *, head=None, table=None):
    with zipfile.ZipFile(archive) as z:
        doc, raw = json.loads(z.read("plan.json")), z.read("next_hop.npy")
    if head is not None:
        head(doc)
    if table is not None:
        buf = io.BytesIO()
        np.save(buf, table)
        raw = buf.getvalue()
    with zipfile.ZipFile(dest, "w") as z:
        z.writestr("plan.json", json.dumps(doc))
        z.writestr("next_hop.npy", raw)


@pytest.mark.parametrize("fault, message", [
    ("truncated", r"damaged plan archive \(.+\)"),
    ("version", r"plan archive version 2 is not supported \(this topoplan reads version 1\)"),
    ("format", r"not a topoplan-circuit-plan archive"),
    ("no tables", r"damaged plan archive \(.*next_hop\.npy.*\)"),
    ("float tables", r"damaged plan archive \(next_hop\.npy: expected a 2-D integer array, got 2-D float64\)"),
    ("loop", r"next_hop\.npy: field 'forwarding': routing loop towards switch"),
    # the tables are the topology's nodes x switches, as the JSON form's keys are its node and switch ids
    ("rows cut", r"next_hop\.npy: field 'forwarding': tables of 10 nodes x 4 switches, but the topology has 64 "
                 r"nodes x 4 switches"),
    ("columns cut", r"next_hop\.npy: field 'forwarding': tables of 64 nodes x 2 switches, but the topology has 64 "
                    r"nodes x 4 switches"),
    ("row added", r"next_hop\.npy: field 'forwarding': tables of 65 nodes x 4 switches"),
    # an entry is -1 (none) or a node id
    ("negative", r"next_hop\.npy: field 'forwarding\.0\.1': next hop -5 is neither a node id nor -1 \(no entry\)"),
    ("past the nodes", r"next_hop\.npy: field 'forwarding\.0\.1': unknown next hop node 64"),
])
def test_a_bad_plan_archive_is_one_error_line(plans, run_cli, fault, message):
    _, archive, inputs = plans
    bad = archive.with_name("bad.zip")
    with zipfile.ZipFile(archive) as z:
        nh = np.load(io.BytesIO(z.read("next_hop.npy")))
    if fault == "truncated":
        bad.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    elif fault == "version":
        _rewrite(archive, bad, head=lambda d: d["archive"].update(version=2))
    elif fault == "format":
        _rewrite(archive, bad, head=lambda d: d.pop("archive"))
    elif fault == "no tables":
        with zipfile.ZipFile(archive) as z, zipfile.ZipFile(bad, "w") as out:
            out.writestr("plan.json", z.read("plan.json"))
    elif fault == "float tables":
        _rewrite(archive, bad, table=nh.astype(float))
    elif fault == "rows cut":
        _rewrite(archive, bad, table=nh[:10])
    elif fault == "columns cut":
        _rewrite(archive, bad, table=nh[:, :2])
    elif fault == "row added":
        _rewrite(archive, bad, table=np.pad(nh, ((0, 1), (0, 0)), constant_values=-1))
    elif fault in ("negative", "past the nodes"):
        nh = nh.copy()
        assert nh[0, 1] >= 0   # (an entry of node 0 towards switch 1 to spoil)
        nh[0, 1] = -5 if fault == "negative" else 64
        _rewrite(archive, bad, table=nh)
    else:   # two nodes under one switch relaying to each other towards another switch
        nh = nh.copy()
        nh[2, 1], nh[3, 1] = 3, 2
        _rewrite(archive, bad, table=nh)
    out = archive.with_name("ocs.json")
    for command in (["validate", bad, "-t", "paper003"], ["simulate", *inputs, "--circuits", bad],
                    ["export", "ocs", "-p", bad, "-t", "paper003", "-o", out]):
        code, _, err = run_cli(*command)
        assert code == 2 and err.count("\n") == 1 and err.startswith(f"error: {bad}: "), err
        assert re.search(message, err), err
    assert not out.exists()


def test_an_archive_member_too_large_is_refused_before_it_is_inflated(plans, monkeypatch):
    import zipfile

    from topoplan.core import io
    from topoplan.core.topology_io import load_topology

    size = plans[1].stat().st_size            # the archive itself is read (the limit is on what it holds)
    with zipfile.ZipFile(plans[1]) as z:
        assert z.getinfo("plan.json").file_size > size
    monkeypatch.setattr(io, "MAX_INPUT_BYTES", size)     # (the archive is read in core.io)
    with pytest.raises(TopoplanError, match=rf"plan\.zip: plan archive member plan\.json is over the input "
                                            rf"limit of {size:,} bytes once decompressed"):
        planfile.read_plan(plans[1], load_topology("paper003"))
