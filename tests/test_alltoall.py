import importlib.util
import json

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from topoplan.analysis.alltoall import (a2a_schedule, a2a_trace, a2at_schedule, a2at_trace, alltoall_lower_bound,
                              bound_details, schedule_congestion, schedule_trace, shift_loads)
from topoplan.core.errors import TopoplanError
from topoplan.core.topology_io import load_topology
from topoplan.traffic.trace import OP_CODE

HAVE_SIM = importlib.util.find_spec("topoplan.sim.run") is not None


def _topo(dims, wrap=False, bw="4.76GB/s"):
    return load_topology("mesh10x10x10", [f"dims={list(dims)}", f"wrap={json.dumps(wrap)}", f"bw={bw}"])


def _cli(*args):
    from topoplan.cli.commands.bound import register

    app = typer.Typer()
    register(app)
    app.command("noop", hidden=True)(lambda: None)
    return CliRunner().invoke(app, [str(a) for a in args])


def test_kcomputer_bound_cli():
    """004 IV-B: 32,768-byte all-to-all on the full K computer: 2.57 s, bottleneck y (mesh, 18) not x (torus, 24)."""
    res = _cli("bound", "alltoall", "--topology", "kcomputer", "--bytes", 32768, "--json")
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert d["lower_bound_s"] == pytest.approx(2.57, abs=0.005)
    assert d["bottleneck"] == "y" and d["alpha"] == 1.0
    x = d["dimensions"][0]
    assert x["alpha"] == 0.5 and x["time_s"] < d["lower_bound_s"]
    assert d["n_nodes"] == 82944


def test_bound_equals_busiest_link_of_the_simulator_routing():
    """On meshes and odd rings, formula (1) is exactly the busiest link's load under dimension-order routing."""
    for dims, wrap in (((4, 3, 5), False), ((5, 3), True), ((6, 5), [False, True])):
        t = _topo(dims, wrap)
        c = schedule_congestion(t, a2a_schedule(t.n_nodes), 1000.0)
        assert c["routing_floor_s"] == pytest.approx(alltoall_lower_bound(t, 1000.0)), dims


def test_bottleneck_prefers_slower_per_link_dimension():
    t = _topo((24, 18), [True, False])
    d = bound_details(t, 1.0)
    assert d["bottleneck"] == "y"
    assert d["messages_per_link"] == 9 * 9 * 24
    # halve y's bandwidth doubles its time; a mesh x of the same size as a torus x doubles x's load
    assert bound_details(_topo((24, 18), [False, False]), 1.0)["bottleneck"] == "x"
    t2 = load_topology("mesh10x10x10", ["dims=[8,8]", "bw=[1GB/s,2GB/s]"])
    assert bound_details(t2, 1.0)["bottleneck"] == "x"
    assert alltoall_lower_bound(t2, 1e6) == pytest.approx(16 * 8 * 1e6 / 1e9)


def test_injection_bandwidth_can_bound_instead():
    t = load_topology("mesh10x10x10", ["dims=[3,3]", "injection_bw=0.1GB/s"])
    d = bound_details(t, 1e6)
    assert d["injection_s"] == pytest.approx(8 * 1e6 / 1e8)
    assert d["lower_bound_s"] == d["injection_s"] > d["formula_s"]


def test_bad_inputs():
    with pytest.raises(TopoplanError, match="mesh/torus"):
        alltoall_lower_bound(load_topology("paper003"), 1)
    with pytest.raises(TopoplanError, match="window"):
        a2a_schedule(8, window=0)
    with pytest.raises(TopoplanError, match="orbit"):
        a2at_schedule(_topo((4, 3)), method="orbit")
    res = _cli("bound", "alltoall", "-t", "mesh10x10x10", "--bytes", 8, "--simulate", "bogus")
    assert isinstance(res.exception, TopoplanError)


@pytest.mark.parametrize("args, message", [
    (["--window", "0"], "--window: applies only with --compare or --simulate (the bound alone has no schedule)"),
    (["--method", "greedy"], "--method: applies only with --compare or --simulate (the bound alone has no schedule)"),
    (["--compare", "--sim-mode", "rounds"], "--sim-mode: applies only with --simulate (the bound alone has no schedule)"),
    (["--compare", "--window", "1000"], "--window: 1,000 messages in flight, but each node sends only 63"),
])
def test_schedule_options_without_a_schedule_or_past_its_messages_are_errors(run_cli, tmp_path, args, message):
    """--window, --method and --sim-mode were ignored without a schedule that uses them (a --window of 0 passed),
    and a window past the N-1 messages of a node printed '1 rounds of 1000'."""
    out = tmp_path / "b.json"
    code, stdout, err = run_cli("bound", "alltoall", "-t", "mesh10x10x10", "--set", "dims=[4,4,4]", "--bytes", "1MB",
                                *args, "-o", out)
    assert (code, stdout, err) == (2, "", f"error: {message}\n") and not out.exists()


@pytest.mark.parametrize("dims, wrap", [((4, 4, 4), False), ((6, 6, 6), True), ((6, 4, 3, 2), [True, False, True, False]),
                                        ((5, 1, 3), True)])
def test_schedules_are_complete_alltoalls(dims, wrap):
    t = _topo(dims, wrap)
    for s in (a2a_schedule(t.n_nodes, 3), a2at_schedule(t)):
        s.validate()
    s = a2at_schedule(t)
    # every A2AT step is one coordinate shift applied by all nodes
    c = t.coords()
    for step in range(s.n_steps):
        shift = (c[s.dst[step]] - c) % np.asarray(t.dims)
        assert (shift == s.offsets[step]).all()
    broken = a2a_schedule(6)
    broken.dst[1] = broken.dst[0]
    with pytest.raises(TopoplanError):
        broken.validate()


def test_a2at_reaches_bound_on_mesh_cube_and_beats_a2a():
    """004 Fig. 3: A2A idles the y and z links; balanced A2AT rounds keep every dimension busy."""
    t = _topo((4, 4, 4))
    a2at, a2a = a2at_schedule(t), a2a_schedule(t.n_nodes, 3)
    assert a2at.meta["method"] == "orbit"
    ct, ca = schedule_congestion(t, a2at, 4096), schedule_congestion(t, a2a, 4096)
    assert ct["estimate_s"] == pytest.approx(ct["lower_bound_s"])
    assert ca["ratio"] > 1.5
    # A2A spends rounds bottlenecked in x alone; A2AT rounds hit every dimension's middle links equally
    loads = np.stack([shift_loads(t, d)[a2at.offsets[:, d]].max(axis=1) for d in range(3)], axis=1)
    per_round = np.array([loads[a2at.round_of_step == r].sum(axis=0) for r in range(a2at.n_rounds)])
    assert (per_round.max(axis=1) == per_round.min(axis=1)).all()
    # the simulator's links agree: A2AT's busiest x, y and z links are equally loaded in every round, A2A's are not
    dims_t = np.array([ct["class_round_s"][f"torus-{d}+"] for d in "xyz"])
    dims_a = np.array([ca["class_round_s"][f"torus-{d}+"] for d in "xyz"])
    assert np.allclose(dims_t.max(axis=0), dims_t.min(axis=0))
    assert (dims_a.max(axis=0) > 1.3 * dims_a.min(axis=0)).sum() >= 5


def test_a2at_greedy_on_mixed_shapes_close_to_floor():
    t = _topo((6, 4, 3, 2), [True, False, True, False])
    ct = schedule_congestion(t, a2at_schedule(t), 1e5)
    ca = schedule_congestion(t, a2a_schedule(t.n_nodes, 4), 1e5)
    assert ct["estimate_s"] <= 1.05 * ct["routing_floor_s"]
    assert ca["estimate_s"] > 1.5 * ct["estimate_s"]
    # even ring, ties all '+': nothing beats the routing floor, which sits above formula (1)
    t6 = _topo((6, 6, 6), True)
    c6 = schedule_congestion(t6, a2at_schedule(t6), 1e5)
    assert c6["routing_floor_s"] == pytest.approx(4 / 3 * c6["lower_bound_s"])
    assert c6["routing_floor_s"] <= c6["estimate_s"] <= 1.05 * c6["routing_floor_s"]


def test_shift_loads_follow_routing():
    ring = shift_loads(_topo((6,), True), 0)
    assert ring[1:].tolist() == [[1, 0], [2, 0], [3, 0], [0, 2], [0, 1]]
    line = shift_loads(_topo((4,)), 0)
    assert line[1:].tolist() == [[1, 1], [2, 2], [1, 1]]   # 0,1,2 -> +1; 3 -> 0 goes back 3 hops


def test_schedule_trace_rows():
    s = a2at_schedule(_topo((3, 2)), window=2)
    t = schedule_trace(s, 4096)
    counts = t.op_counts()
    assert counts == {"isend": 30, "irecv": 30, "waitall": 6 * s.n_rounds}
    r0 = t.rank == 2
    ops, peers = t.op[r0], t.peer[r0]
    first = np.flatnonzero(ops == OP_CODE["waitall"])[0]
    steps = np.flatnonzero(s.round_of_step == 0)
    assert sorted(peers[:first][ops[:first] == OP_CODE["isend"]].tolist()) == sorted(s.dst[steps, 2].tolist())
    assert sorted(peers[:first][ops[:first] == OP_CODE["irecv"]].tolist()) == sorted(s.src()[steps, 2].tolist())
    assert (t.bytes[t.op != OP_CODE["waitall"]] == 4096).all()
    assert len(a2a_trace(5, 10)) == 5 * (4 + 4 + 4)
    assert a2at_trace(_topo((2, 2)), 10).n_ranks == 4


def test_cli_compare_reports_both():
    res = _cli("bound", "alltoall", "-t", "mesh10x10x10", "--set", "dims=[4,4,4]", "--bytes", "32KiB", "--compare", "--json")
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    s = d["schedules"]
    assert s["A2AT"]["congestion_ratio"] == pytest.approx(1.0)
    assert s["A2A"]["congestion_ratio"] > 1.5
    assert s["A2A"]["rounds"] == 21 and s["A2AT"]["window"] == 3


@pytest.mark.skipif(not HAVE_SIM, reason="the simulator (topoplan.sim.run) is not importable")
def test_simulated_a2at_faster_than_a2a():
    res = _cli("bound", "alltoall", "-t", "mesh10x10x10", "--set", "dims=[4,4,4]", "--bytes", "1MB",
               "--simulate", "a2a,a2at", "--json")
    assert res.exit_code == 0, res.output
    s = json.loads(res.output)["schedules"]
    assert 1.0 <= s["A2AT"]["simulated_ratio"] < s["A2A"]["simulated_ratio"]


def test_a2at_window_multiple_merges_orbits():
    """A window of 2 x dimensions joins orbit rounds: half the rounds, still exactly at the bound."""
    t = _topo((4, 4, 4))
    s3, s6 = a2at_schedule(t), a2at_schedule(t, window=6)
    s6.validate()
    assert s6.meta["method"] == "orbit" and s6.n_rounds == (s3.n_rounds + 1) // 2
    assert schedule_congestion(t, s6, 1e4)["ratio"] == pytest.approx(1.0)
    with pytest.raises(TopoplanError, match="multiple"):
        a2at_schedule(t, window=4, method="orbit")
    assert a2at_schedule(t, window=4).meta["method"] == "greedy"


def test_simulate_rounds_without_latency_is_the_congestion_estimate():
    """With no latency, each round of max-min fair flows lasts exactly as long as its busiest link needs."""
    from topoplan.analysis.alltoall import simulate_rounds

    t = load_topology("mesh10x10x10", ["dims=[4,3,3]", "latency=0", "mtu=1B"])
    for s in (a2a_schedule(t.n_nodes, 3), a2at_schedule(t)):
        c = schedule_congestion(t, s, 1e5)
        r = simulate_rounds(t, s, 1e5)
        assert r["round_s"] == pytest.approx(c["round_s"], rel=1e-4)   # 1-byte packets: ~1 ns of store-and-forward
        assert r["makespan_s"] == pytest.approx(sum(r["round_s"]))
        assert r["n_flows"] == t.n_nodes * (t.n_nodes - 1)
    # with latency every round pays its longest route on top
    lat = simulate_rounds(_topo((4, 3, 3)), a2at_schedule(t), 1e5)
    assert lat["makespan_s"] > schedule_congestion(t, a2at_schedule(t), 1e5)["estimate_s"] * 1.01


def test_simulate_rounds_timeline_conserves_bytes():
    """The stitched per-round timelines carry every byte over every hop, in the report's schema."""
    from topoplan.analysis.alltoall import simulate_rounds
    from topoplan.reporting.report import class_series, parse_result
    from topoplan.core.topology_io import topology_to_dict
    from topoplan.sim.network import build_network

    t = _topo((3, 3, 2), [True, False, False])
    s = a2at_schedule(t)
    r = simulate_rounds(t, s, 1e6, timeline_dt_s=7e-5)        # dt not aligned with the rounds
    tl = r["timeline"]
    assert len(tl["t_s"]) == int(np.ceil(r["makespan_s"] / 7e-5 - 1e-9))
    net = build_network(t)
    ptr, links = net.eps_routes(np.tile(np.arange(t.n_nodes), s.n_steps), s.dst.reshape(-1))
    bw = {net.link_name[l]: net.bw_Bps[l] for l in range(net.n_links)}
    moved = sum(sum(l["util"]) * 7e-5 * bw[l["name"]] for l in tl["links"])
    assert moved == pytest.approx(len(links) * 1e6, rel=1e-4)
    data = parse_result({"timeline": tl, "topology": topology_to_dict(t)})
    series = class_series(data)
    assert {"torus-x+", "torus-x-", "torus-y+", "torus-z-"} <= set(series)
    assert all((mx <= 1 + 1e-6).all() and (av <= mx + 1e-9).all() for mx, av in series.values())
    with pytest.raises(TopoplanError, match="timeline_dt_s"):
        simulate_rounds(t, s, 1e6, timeline_dt_s=0)
    with pytest.raises(TopoplanError, match="nodes"):
        simulate_rounds(t, a2a_schedule(5), 1e6)


@pytest.mark.skipif(not HAVE_SIM, reason="the simulator (topoplan.sim.run) is not importable")
def test_cli_simulate_rounds_mode_agrees_with_replay_for_large_messages():
    base = ["bound", "alltoall", "-t", "mesh10x10x10", "--set", "dims=[3,3,3]", "--bytes", "1MB", "--json"]
    rounds = json.loads(_cli(*base, "--simulate", "a2a,a2at", "--sim-mode", "rounds").output)["schedules"]
    replay = json.loads(_cli(*base, "--simulate", "a2at", "--sim-mode", "replay").output)["schedules"]
    assert rounds["A2AT"]["sim_mode"] == "rounds" and replay["A2AT"]["sim_mode"] == "replay"
    assert rounds["A2AT"]["simulated_s"] == pytest.approx(replay["A2AT"]["simulated_s"], rel=0.01)
    assert 1.0 <= rounds["A2AT"]["simulated_ratio"] < rounds["A2A"]["simulated_ratio"]
    assert isinstance(_cli(*base, "--simulate", "a2a", "--sim-mode", "bogus").exception, TopoplanError)
