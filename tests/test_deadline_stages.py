"""The stages that cannot be interrupted keep to the time limit (topoplan/core/deadline.py): predictions follow the
share of a CPU the command gets, the exact circuit model is refused before or after its build when it cannot
fit, starting heuristics return their start when time is short, and the reserves follow the plan's size.

Mechanism only, never wall-clock speed (benchmarks/bench_time_limits.py --process measures that): every test
fixes the share of a CPU or puts the limit where the outcome does not depend on the machine's load.
"""

import json
import time

import numpy as np
import pytest

from topoplan.core import deadline
from topoplan.core.topology_io import load_topology
from topoplan.formulations.circuits_common import two_phase
from topoplan.problems import circuits
from topoplan.problems.circuits import exact, heuristics
from topoplan.problems.placement import PlacementProblem
from topoplan.problems.placement.metis import partition, recursive_map
from topoplan.traffic.sources import load_traffic


@pytest.fixture
def share(monkeypatch):
    """Fix the share of a CPU the command gets: ``share(0.25)``."""
    def fix(value):
        monkeypatch.setattr(deadline, "cpu_share", lambda: value)
    return fix


# -- the share of a CPU ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("wall_s, cpu_s, expected", [
    (10.0, 2.5, 0.25),     # a quarter of a CPU: stages take four times their CPU seconds
    (10.0, 30.0, 1.0),     # several threads: never more than one CPU
    (10.0, 0.0, deadline.MIN_CPU_SHARE),   # stopped or waiting: never less than the floor
    (0.1, 0.0, 1.0),       # too early to tell
])
def test_the_cpu_share_is_cpu_seconds_over_wall_seconds(monkeypatch, wall_s, cpu_s, expected):
    monkeypatch.setattr(deadline, "_cpu_s", lambda: 100.0 + cpu_s)
    monkeypatch.setattr(deadline, "_SPAN", [(time.monotonic() - wall_s, 100.0)])
    assert deadline.cpu_share() == pytest.approx(expected, rel=0.02)
    assert deadline.scaled(1.0) == pytest.approx(1.0 / expected, rel=0.02)


def test_outside_a_command_predictions_are_as_measured():
    assert deadline.cpu_share() == 1.0 and deadline.scaled(3.0) == 3.0


def test_the_write_reserve_grows_with_the_plan_and_the_load(share):
    share(1.0)
    small, large = deadline.write_cost_s(1_000), deadline.write_cost_s(8_000_000)
    assert deadline.WRITE_FIXED_S + deadline.EXIT_S <= small < 0.6 and large > 10 * small
    share(0.25)
    assert deadline.write_cost_s(8_000_000) == pytest.approx(4 * large)


def _reserves(monkeypatch):
    """The seconds each ``deadline.reserved`` block keeps, as the command asks for them."""
    kept = []
    real = deadline.reserved

    def spy(seconds):
        kept.append(seconds)
        return real(seconds)
    monkeypatch.setattr(deadline, "reserved", spy)
    return kept


def _nodes_switches(sets):
    topo = load_topology("paper003", sets)
    return topo.n_nodes, topo.n_switches


@pytest.mark.parametrize("command, sets, rows", [
    # a circuit plan: a forwarding entry per node and switch at most
    (["circuits", "-t", "paper003", "-T", "ring:np=64,bytes=1MB", "-m", "greedy", "--no-simulate"],
     ["ocs.nodes_per_switch=4"],
     lambda sets: np.prod(_nodes_switches(sets))),
    # a placement: a row a rank
    (["place", "-t", "paper003", "-T", "ring:np=64,bytes=1MB", "-m", "greedy"], [], lambda sets: 64),
])
def test_a_command_keeps_a_write_reserve_that_follows_the_plan(monkeypatch, share, run_cli, tmp_path, command, sets,
                                                               rows):
    share(1.0)
    kept = _reserves(monkeypatch)
    set_args = [x for s in sets for x in ("--set", s)]
    code, _, err = run_cli(*command, *set_args, "--time-limit", "600", "-o", tmp_path / "a.json")
    assert code == 0, err
    assert kept[0] == pytest.approx(deadline.write_cost_s(rows(sets)))   # the command's reserve comes first
    if command[0] == "circuits":   # 4 times the switches: 16 times the forwarding entries at most
        first, n = kept[0], len(kept)
        sets = sets + ["switches=64"]
        set_args += ["--set", "switches=64"]
        code, _, err = run_cli(*command, *set_args, "--time-limit", "600", "-o", tmp_path / "b.json")
        assert code == 0, err
        assert kept[n] == pytest.approx(deadline.write_cost_s(rows(sets))) and kept[n] > first


def test_phases_keeps_the_schedules_simulation_out_of_the_method_and_skips_it_when_late(monkeypatch, share,
                                                                                        run_cli, tmp_path):
    from topoplan.cli.commands.phases import schedule_simulation_cost_s
    from topoplan.traffic.generators import parse_spec

    share(1.0)
    spec = "neighbor2d:rows=8,cols=8,bytes=1MB,iters=2"
    args = ["phases", "-t", "paper003", "--set", "ocs.nodes_per_switch=4", "-T", spec, "--schedule", "per-phase",
            "--circuit-method", "greedy", "--simulate", "--json"]
    kept = _reserves(monkeypatch)
    out = tmp_path / "ph.json"
    code, _, err = run_cli(*args, "--time-limit", "600", "-o", out)
    assert code == 0, err
    doc = json.loads(out.read_text())
    n = len(doc["phases"])
    assert kept[0] == pytest.approx(schedule_simulation_cost_s(parse_spec(spec), n) + deadline.write_cost_s(n))
    assert "simulated" in doc and "message" not in doc
    code, _, err = run_cli(*args, "--time-limit", "0.01", "-o", out)   # no room: written, not simulated
    assert code == 0, err
    doc = json.loads(out.read_text())
    assert "simulated" not in doc and "not simulated: it takes about" in doc["message"]


# -- starting heuristics ------------------------------------------------------------------------------------------

def _circuit_problem():
    return circuits.CircuitProblem.build(load_topology("paper003", ["ocs.nodes_per_switch=4"]),
                                         load_traffic("random:np=256,msgs=2048,bytes=4MB,seed=1"))


def test_a_matching_that_cannot_end_in_time_is_made_greedily():
    prob = _circuit_problem()
    quick = circuits.solve(prob, "matching", time_limit=1e-6)
    assert "matched greedily, heaviest edge first" in quick.message
    assert quick.plan["circuits"] and quick.status == "heuristic"   # a valid plan (solve validated it)
    exact_res = circuits.solve(prob, "matching")
    assert "greedily" not in (exact_res.message or "")
    # the exact plan is remembered by the problem: a later call within any limit gets it at no cost
    assert circuits.solve(prob, "matching", time_limit=1e-6).plan == exact_res.plan


def test_heuristic_plans_are_remembered_by_their_problem_and_given_as_copies():
    prob = _circuit_problem()
    first = heuristics.greedy(prob, seed=3)
    again = heuristics.greedy(prob, seed=3)
    assert again.plan == first.plan and again is not first
    again.plan["circuits"].clear()            # a caller's change does not reach the remembered plan
    assert heuristics.greedy(prob, seed=3).plan == first.plan
    assert ("heuristic plan", "greedy", 3, "full") in prob._cache


@pytest.mark.parametrize("n, u, v, w, mate", [
    (4, [0, 1, 2], [1, 2, 3], [2.0, 3.0, 2.0], [-1, 2, 1, -1]),     # the heaviest edge, though 0-1 + 2-3 weigh 4
    (4, [0, 2], [1, 3], [1.0, 1.0], [1, 0, 3, 2]),
    (3, [0, 1], [1, 2], [0.0, -1.0], [-1, -1, -1]),                 # nothing of no weight
])
def test_the_greedy_matching_takes_the_heaviest_edges_first(n, u, v, w, mate):
    assert heuristics._greedy_mate(n, np.array(u), np.array(v), np.array(w)).tolist() == mate


def _placement_problem(n=256):
    topo = load_topology({"kind": "tree", "name": "t", "switches": 16, "nodes_per_switch": 16,
                          "cores_per_node": n // 256, "eps": {"down_bw": "10Gbps", "up_bw": "40Gbps"}})
    return PlacementProblem.build(topo, load_traffic(f"random:np={n},msgs={8 * n},bytes=4MB,seed=1"))


def test_metis_past_its_time_keeps_the_first_run_of_a_split():
    prob = _placement_problem()
    W = prob.graph()
    targets = [16] * 16
    assert np.array_equal(partition(W, targets, tries=3, end_at=time.perf_counter() - 1.0),
                          partition(W, targets, tries=1))
    assert np.array_equal(partition(W, targets, tries=3, end_at=time.perf_counter() + 3600.0),
                          partition(W, targets, tries=3))


@pytest.mark.parametrize("cost_s, in_order", [(0.0, False), (1e6, True)])
def test_a_split_whose_first_metis_run_cannot_fit_takes_its_ranks_in_order(monkeypatch, share, cost_s, in_order):
    """The first run of every split is predicted (metis_run_cost_s): one that would end past the limit is not
    started, and the split takes its ranks in order (exact sizes), which the method's message counts."""
    from topoplan.problems.placement import metis

    share(1.0)
    monkeypatch.setattr(metis, "metis_run_cost_s", lambda n_edges, n_parts: cost_s)
    prob = _placement_problem()
    kept = []
    node = recursive_map(prob, tries=1, end_at=time.perf_counter() + 3600.0, in_order=kept)
    assert bool(kept) == in_order
    assert np.bincount(node, minlength=prob.topology.n_nodes).max() <= prob.cores.max()   # still a placement
    if in_order:   # the first split (all 256 ranks into 16 switches) took them in order: switch s gets 16s..16s+15
        assert kept[0] == 256 and (prob.node_switch[node] == np.arange(256) // 16).all()
        res = metis.metis(prob, time_limit=3600.0)
        assert "took their ranks in order: their METIS run would have ended past the time limit" in res.message
    else:
        assert np.array_equal(node, recursive_map(prob, tries=1))


def test_metis_as_the_papers_ran_it_and_without_a_limit_is_never_cut(monkeypatch):
    from topoplan.problems.placement import metis

    monkeypatch.setattr(metis, "metis_run_cost_s", lambda n_edges, n_parts: 1e6)
    prob = _placement_problem()
    kept = []
    assert np.array_equal(recursive_map(prob, plain=True, end_at=0.0, in_order=kept), recursive_map(prob, plain=True))
    assert np.array_equal(recursive_map(prob, tries=1, in_order=kept), recursive_map(prob, tries=1)) and not kept


@pytest.fixture
def past_deadline(monkeypatch):
    """The next ``deadline.bounded(limit)`` counts from a command started an hour ago: its deadline has passed
    (call it again before each: a start is used by one deadline only)."""
    def start():
        monkeypatch.setattr(deadline, "_START", [(time.monotonic() - 3600.0, 0.0)])
    start()
    return start


def test_placement_starts_past_the_deadline_give_way_to_the_cheapest_placement(past_deadline):
    from topoplan.problems import placement
    from topoplan.problems.placement.problem import CHEAPEST_START, initial_placement

    prob = _placement_problem()
    with deadline.bounded(10.0):
        name, node = initial_placement(prob, None, 0, method="anneal", time_limit=deadline.budget(5.0))
    assert name == CHEAPEST_START == "sequential"
    assert np.array_equal(node, placement.solve(prob, "sequential").plan["rank_to_node"])


def test_a_placement_start_predicted_past_the_deadline_is_not_run(monkeypatch, share):
    from topoplan.problems.placement import problem as pp

    share(1.0)
    prob = _placement_problem()
    assert pp.start_cost_s(prob, "greedy") == pytest.approx(pp.GREEDY_S_PER_EDGE * len(prob.edges()[0]))
    monkeypatch.setattr(pp, "GREEDY_S_PER_EDGE", 1e3)   # greedy predicted at days
    with deadline.bounded(600.0):
        assert pp.initial_placement(prob, ("greedy", "round-robin"), 0, method="anneal", time_limit=60.0)[0] == \
            "round-robin"
        assert pp.initial_placement(prob, "greedy", 0, method="anneal", time_limit=60.0)[0] == "sequential"
        monkeypatch.setattr(pp, "GREEDY_S_PER_EDGE", 1.0 / len(prob.edges()[0]))   # 1 s: fits the deadline ...
        assert pp.initial_placement(prob, "greedy", 0, method="anneal", time_limit=60.0)[0] == "greedy"
        # ... but not the method's time, which the stages after it (simulating, writing) cut to 0.5 s
        assert pp.initial_placement(prob, "greedy", 0, method="anneal", time_limit=0.5)[0] == "sequential"
    # outside a command the starts always run: a library call gives the same plan on any machine
    assert pp.initial_placement(prob, "greedy", 0, method="anneal", time_limit=60.0)[0] == "greedy"


def test_anneal_and_ilp_past_the_deadline_still_return_a_valid_placement(past_deadline):
    from topoplan.problems import placement

    prob = _placement_problem()
    for method in ("anneal", "ilp"):
        past_deadline()
        with deadline.bounded(10.0):
            res = placement.solve(prob, method, time_limit=5.0)   # validated by solve
        assert res.options["init"] == "sequential" and "the method had 0.05 s of the 5 s time limit" in res.message


@pytest.mark.parametrize("method", ["sp", "three-step", "greedy"])
def test_a_circuit_heuristic_out_of_time_gives_the_plan_without_circuits(method):
    """Its forwarding tables take most of a heuristic's time: past its limit it does not build them for its
    circuits, and returns the cheapest valid plan (solve validates it)."""
    res = circuits.solve(_circuit_problem(), method, time_limit=1e-9)
    assert res.plan["circuits"] == [] and res.status == "heuristic"
    assert f"{method} reached its time limit before its forwarding tables (" in res.message
    assert res.plan == circuits.solve(_circuit_problem(), "none").plan
    assert circuits.solve(_circuit_problem(), method).plan["circuits"]   # in time: circuits


def test_the_assignment_loops_look_at_the_clock(monkeypatch):
    monkeypatch.setattr(heuristics, "CLOCK_EVERY", 1)
    prob = _circuit_problem()
    a, b, c = heuristics._switch_pairs(prob)
    for clock, none in ((heuristics._Clock(None), False), (heuristics._Clock(-1.0), True)):
        circ = heuristics._Circuits(prob)
        heuristics._most_wanted(circ, a, b, c, lambda x, y: circ.add(*circ.free_pair(x, y)), clock)
        u, v, by, _, lo, hi = heuristics._ocs_pairs(prob)
        heuristics._round_robin(prob, circ, by, u, v, lo, hi, clock)
        assert (len(circ.pairs) == 0) == none


def test_ilp_past_its_limit_offers_the_eps_plan_alone():
    """The heuristics that would start past the limit are not run as incumbents; EPS only always is."""
    r = exact.solve_exact(_circuit_problem(), time_limit=1e-9)
    assert r.options["incumbents_skipped"] == ["three-step", "greedy", "sp"]
    assert r.options["incumbent"] == "none" and r.plan["circuits"] == []


# -- the exact circuit model ---------------------------------------------------------------------------------------

def test_the_node_model_predicted_too_slow_to_build_is_refused_up_front(monkeypatch, share):
    share(1.0)
    prob = circuits.CircuitProblem.build(load_topology("paper003", ["ocs.nodes_per_switch=1"]),
                                         load_traffic("ring:np=256,bytes=4MB"))
    monkeypatch.setattr(exact, "NODE_BUILD_VARS_PER_S", 1e-3)   # a variable in 1,000 s
    r = exact.solve_exact(prob, formulation="node", time_limit=30)
    assert "the node model (" in r.message and "s to build) does not fit the time left" in r.message
    assert "solver_status" not in r.options and r.status == "feasible"
    monkeypatch.setattr(exact, "NODE_BUILD_VARS_PER_S", 1e9)
    assert "solver_status" in exact.solve_exact(prob, formulation="node", time_limit=30).options

@pytest.fixture
def switch_problem():
    return circuits.CircuitProblem.build(load_topology("paper003", ["ocs.nodes_per_switch=2"]),
                                         load_traffic("random:np=256,msgs=1024,bytes=4MB,seed=1"))


def test_the_switch_model_predicted_too_slow_to_build_is_refused_up_front(monkeypatch, share, switch_problem):
    share(1.0)
    monkeypatch.setattr(exact, "BUILD_VARS_PER_S", 1e-3)   # a machine that builds a variable in 1,000 s
    r = exact.solve_exact(switch_problem, formulation="switch", time_limit=30)
    assert "s to build) does not fit the time left: the best heuristic plan" in r.message
    assert "wall_build_s" not in r.options and r.status == "feasible"


def test_the_load_decides_whether_the_switch_model_fits(monkeypatch, share, switch_problem):
    """The same prediction fits at a whole CPU and not at a tenth of one (the limit between the two)."""
    cost = exact.switch_size(switch_problem, "traffic", 1) / exact.BUILD_VARS_PER_S
    monkeypatch.setattr(exact, "BUILD_VARS_PER_S", exact.BUILD_VARS_PER_S / (100.0 / cost))  # predicted: 100 CPU s
    share(0.1)
    r = exact.solve_exact(switch_problem, formulation="switch", pairs="traffic", time_limit=300)
    assert "~1000.0 s to build) does not fit" in r.message


def test_a_switch_model_whose_handover_cannot_fit_after_its_build_is_not_solved(monkeypatch, share, switch_problem):
    share(1.0)
    monkeypatch.setattr(exact, "HANDOVER_PER_BUILD", 1e9)   # writing it for the solver would take ages
    r = exact.solve_exact(switch_problem, formulation="switch", time_limit=30)
    assert "s to build; handing it to the solver" in r.message and "do not fit the time left" in r.message
    assert r.options["wall_build_s"] >= 0 and "solver_status" not in r.options


def test_the_second_solve_is_not_started_when_its_handover_cannot_fit():
    prob = circuits.CircuitProblem.build(load_topology("paper003", ["ocs.nodes_per_switch=1"]),
                                         load_traffic("ring:np=256,bytes=4MB"))
    m = exact.build_node_model(prob, T_max=circuits.solve(prob, "none").objective)
    r1, r2, _, uplink = two_phase(m, solver="highs", time_limit=60, seed=0, threads=None, objective="lexicographic",
                                  large_bytes=float(prob.large_bytes.sum()), handover_s=1e9)
    assert r1.has_solution and r2 is None and uplink is None
    r1, r2, _, _ = two_phase(m, solver="highs", time_limit=60, seed=0, threads=None, objective="lexicographic",
                             large_bytes=float(prob.large_bytes.sum()))
    assert r2 is not None


# -- kernels that Numba has not compiled yet --------------------------------------------------------------------------

class _Kernel:
    """A stand-in for an ``@njit(cache=True)`` function: its signatures and its cache index on disk."""

    def __init__(self, signatures, index_path):
        self.signatures = signatures
        self._cache = type("C", (), {"_cache_file": type("F", (), {"_index_path": str(index_path)})()})()


def test_a_kernel_is_ready_when_compiled_here_or_cached_on_disk(tmp_path):
    index = tmp_path / "k.nbi"
    assert not deadline.kernel_ready(_Kernel([], index))
    index.write_bytes(b"")
    assert deadline.kernel_ready(_Kernel([], index))
    assert deadline.kernel_ready(_Kernel(["(int64,)"], tmp_path / "none.nbi"))


def test_a_matching_whose_kernels_must_compile_is_predicted_with_the_compilation(monkeypatch):
    from topoplan.problems.circuits import blossom

    n = blossom.INTERPRETED_MAX_N + 1           # too large to run interpreted instead
    monkeypatch.setattr(deadline, "kernel_ready", lambda dispatcher: True)
    ready = heuristics.matching_cost_s(n)
    monkeypatch.setattr(deadline, "kernel_ready", lambda dispatcher: False)
    assert heuristics.matching_cost_s(n) >= ready - blossom.LOAD_S + blossom.COMPILE_S
    # a small graph runs interpreted instead: predicted without the compilation
    assert heuristics.matching_cost_s(64) < blossom.COMPILE_S / 10
    before = list(blossom._compiled()["_solve"].signatures)
    prob = _circuit_problem()   # 16 OCS nodes within a limit shorter than the compilation: exact, interpreted
    assert "greedily" not in (circuits.solve(prob, "matching", time_limit=30).message or "")
    assert list(blossom._compiled()["_solve"].signatures) == before          # nothing compiled


@pytest.mark.parametrize("ready, time_limit, greedy_only", [
    (True, 1.0, False),      # compiled: the partitioners start as usual
    (False, None, False),    # no limit: they compile
    (False, 1000.0, False),  # the compilation fits half the limit
    (False, 1.0, True),      # it does not: the greedy start alone
])
def test_placement_starts_skip_the_partitioners_whose_compilation_cannot_fit(monkeypatch, share, ready, time_limit,
                                                                            greedy_only):
    from topoplan.problems.placement import problem as pp

    share(1.0)
    monkeypatch.setattr(pp, "refine_ready", lambda problem=None: ready)
    starts = pp.default_starts(_placement_problem(), "anneal", time_limit)
    assert (starts == ("greedy",)) == greedy_only and "greedy" in starts


def test_the_groups_model_whose_search_must_compile_first_is_refused_when_it_cannot_fit(monkeypatch, share):
    """64 ranks on 16 switches of 4: the groups model applies, but compiling its search (Numba, ~21 CPU s
    measured) does not fit a 2 s limit: the CP-SAT model instead, and the message says why."""
    from topoplan.problems.placement import PlacementProblem, exact as pexact, solve

    share(1.0)
    monkeypatch.setattr(pexact, "groups_ready", lambda: False)
    topo = load_topology({"kind": "tree", "name": "g", "switches": 16, "nodes_per_switch": 4, "cores_per_node": 1,
                          "eps": {"down_bw": "10Gbps", "up_bw": "40Gbps"}})
    prob = PlacementProblem.build(topo, load_traffic("random:np=64,msgs=512,bytes=4MB,seed=1"),
                                  objective="inter-switch")
    res = solve(prob, "ilp", time_limit=2.0)
    assert res.options["model"] == "switch"
    assert "the groups model was not used: compiling its search takes about 25 s" in res.message


@pytest.mark.parametrize("load_s, solved", [(1e3, False), (0.0, True)])
def test_the_placement_ilp_does_not_load_cp_sat_when_its_handover_cannot_fit(monkeypatch, share, load_s, solved):
    """place -m ilp --time-limit 3 at a load of 10 on 2 cores ran 3.7-3.8 s: the method had 0.05 s, but loading
    OR-Tools and building the CP-SAT model, which cannot be stopped, took 1.3 s. They are now predicted first,
    and CP-SAT is not started when they would not end within what the limit left it (the start is returned)."""
    from topoplan.problems.placement import exact as pexact, solve

    share(1.0)
    monkeypatch.setattr(pexact, "native_loaded", lambda: set())   # OR-Tools not loaded here yet (nor HiGHS)
    monkeypatch.setattr(pexact, "CPSAT_LOAD_S", load_s)
    given = []

    def backend(model, backend, *, time_limit, **kw):
        given.append(time_limit)
        raise AssertionError("stop here: the solver was started")
    monkeypatch.setattr(pexact, "backend_solve", backend)
    prob = PlacementProblem.build(load_topology("paper003"), load_traffic("random:np=256,msgs=2048,bytes=4MB,seed=1"),
                                  objective="hops")
    with deadline.bounded(3.0), deadline.reserved(0.5):   # a command's limit, less its write reserve
        if solved:
            with pytest.raises(AssertionError, match="the solver was started"):
                solve(prob, "ilp", time_limit=3.0)
        else:
            res = solve(prob, "ilp", time_limit=3.0)
    if solved:   # the solver's limit is what the command's limit leaves, less the reserves
        assert len(given) == 1 and 0 < given[0] < 2.5
        return
    assert given == [] and res.status == "timeout" and res.options["model"] == "node+switch"
    assert res.message.startswith("CP-SAT not run: loading it and building its model (16,384 assignment variables, ")
    assert res.objective == solve(prob, res.options["init"]).objective   # the start's placement


def test_a_loaded_command_ends_its_placement_ilp_without_cp_sat(monkeypatch, share, run_cli, tmp_path):
    """The reported case, at a fixed tenth of a CPU: the write reserve takes the limit, and CP-SAT is not loaded."""
    from topoplan.problems.placement import exact as pexact

    share(0.1)
    monkeypatch.setattr(pexact, "backend_solve", lambda *a, **k: pytest.fail("CP-SAT was started"))
    code, out, err = run_cli("place", "-t", "paper003", "-T", "random:np=256,msgs=2048,bytes=4MB,seed=1", "-m", "ilp",
                             "--time-limit", "3", "--json", "-o", tmp_path / "p.json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["status"] == "timeout" and "CP-SAT not run" in doc["message"]
    assert json.loads((tmp_path / "p.json").read_text())["rank_to_node"] == doc["rank_to_node"]


def test_circuit_anneal_gives_its_starts_what_is_left_of_its_limit(monkeypatch):
    """Its ``matching`` start, asked without a limit, compiled its kernels (105 s at a load of 7) inside a 20 s
    command: within the limit left, a matching whose compilation does not fit runs interpreted (16 OCS nodes)
    or greedily; it never compiles."""
    from topoplan.problems.circuits import blossom

    ways, real = [], blossom.interpreted
    monkeypatch.setattr(deadline, "kernel_ready", lambda dispatcher: False)
    monkeypatch.setattr(blossom, "interpreted", lambda n: ways.append(real(n)) or ways[-1])
    res = circuits.solve(_circuit_problem(), "anneal", time_limit=5.0, max_steps=5)
    assert res.status == "heuristic" and res.plan["circuits"]
    assert all(ways)                        # every exact matching ran interpreted: nothing compiled


@pytest.mark.parametrize("loaded, in_order", [(True, False), (False, True)])
def test_a_processs_first_metis_run_is_predicted_with_loading_the_refinement(monkeypatch, share, loaded, in_order):
    """Importing Numba and loading the refinement's kernels (REFINE_LOAD_S) come with the process's first run."""
    from topoplan.problems.placement import metis

    share(1.0)
    monkeypatch.setattr(metis, "metis_run_cost_s", lambda n_edges, n_parts: 0.0)
    monkeypatch.setattr(metis, "REFINE_LOAD_S", 1e6)
    monkeypatch.setattr(metis, "_refine_loaded", lambda W: loaded)
    kept = []
    recursive_map(_placement_problem(), tries=1, end_at=time.perf_counter() + 3600.0, in_order=kept)
    assert bool(kept) == in_order
