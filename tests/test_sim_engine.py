"""The flow engine (topoplan/sim/maxmin.py) and scenario reader (topoplan/sim/flowfile.py), checked by hand and against SimGrid."""

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from topoplan.core.errors import TopoplanError
from topoplan.sim.flowfile import load_scenario, run_scenario, tree_routes
from topoplan.sim.maxmin import FlowEngine, maxmin_rates, simulate_flows
from topoplan.sim.routes import LinkSet, routes_to_csr

SIMGRID = Path(__file__).resolve().parents[2] / "shared" / "reference" / "simgrid"
DATA = Path(__file__).resolve().parent / "data"
SOLVERS = ["numpy", pytest.param("numba", marks=pytest.mark.skipif(
    not __import__("importlib").util.find_spec("numba"), reason="numba is not installed"))]


def links_of(*bw, lat=1e-6, shared=True):
    n = len(bw)
    return LinkSet(np.array(bw, float), np.full(n, lat), np.full(n, shared))


def sim(links, routes, starts, sizes, solver, **kw):
    ptr, rl = routes_to_csr(routes)
    return simulate_flows(links, ptr, rl, np.asarray(starts, float), np.asarray(sizes, float), solver=solver, **kw)


def finish_by_id(doc):
    return {f["id"]: f["finish_s"] for f in doc["flows"]}


def need_reference(name):
    path = SIMGRID / name
    if not path.exists():
        pytest.skip(f"SimGrid reference {path} is absent")
    return path


# --------------------------------------------------------------------------- hand-computed cases


@pytest.mark.parametrize("solver", SOLVERS)
def test_one_flow_is_latency_plus_size_over_bandwidth(solver):
    r = sim(links_of(1e9), [[0]], [0.0], [1e9], solver)
    assert r.finish_s[0] == pytest.approx(1.000001, rel=1e-12)
    assert r.makespan_s == r.finish_s[0]
    assert r.link_bytes.tolist() == [1e9]


@pytest.mark.parametrize("solver", SOLVERS)
def test_two_flows_share_a_link_and_end_in_one_event(solver):
    r = sim(links_of(1e9), [[0], [0]], [0, 0], [1e9, 1e9], solver)
    assert r.finish_s.tolist() == pytest.approx([2.000001] * 2, rel=1e-12)
    assert r.n_events == 2  # both transfers start together, both end together


@pytest.mark.parametrize("solver", SOLVERS)
def test_opposite_directions_do_not_share(solver):
    r = sim(links_of(1e9, 1e9), [[0], [1]], [0, 0], [1e9, 1e9], solver)
    assert r.finish_s.tolist() == pytest.approx([1.000001] * 2, rel=1e-12)


@pytest.mark.parametrize("solver", SOLVERS)
def test_max_min_with_a_slower_second_link(solver):
    # link1 1 GB/s carries A and B, link2 0.5 GB/s carries B and C: B and C get 0.25, A gets 0.75;
    # A ends at 4/3 s, then B and C still share link2: 1 GB at 0.25 GB/s... B, C end at 4 s.
    links = LinkSet([1e9, 5e8], [0.0, 0.0], [True, True])
    assert maxmin_rates(links, [[0], [0, 1], [1]], solver=solver).tolist() == pytest.approx([7.5e8, 2.5e8, 2.5e8])
    r = sim(links, [[0], [0, 1], [1]], [0, 0, 0], [1e9] * 3, solver)
    assert r.finish_s.tolist() == pytest.approx([4 / 3, 4.0, 4.0], rel=1e-12)


@pytest.mark.parametrize("solver", SOLVERS)
def test_late_start_shares_only_while_both_transfer(solver):
    r = sim(links_of(1e9), [[0], [0]], [0, 0.5], [1e9, 1e9], solver)
    assert r.finish_s.tolist() == pytest.approx([1.500001, 2.000001], rel=1e-12)


@pytest.mark.parametrize("solver", SOLVERS)
def test_zero_bytes_and_empty_route(solver):
    r = sim(links_of(1e9), [[0], [], [0]], [0.25, 0.5, 0.0], [0, 1e9, 1e9], solver)
    assert r.finish_s.tolist() == pytest.approx([0.250001, 0.5, 1.000001], rel=1e-12)
    assert r.link_bytes.tolist() == [1e9]


@pytest.mark.parametrize("solver", SOLVERS)
def test_fatpipe_caps_but_does_not_share(solver):
    fat = LinkSet([1e9, 4e9], [1e-6, 0.0], [False, True])
    r = sim(fat, [[0], [0], [0, 1], [0, 1]], [0, 0, 0, 0], [1e9] * 4, solver)
    assert r.finish_s.tolist() == pytest.approx([1.000001] * 4, rel=1e-12)
    # the shared link binds once four flows cross it: 3 GB/s over 4 flows
    r = sim(LinkSet([1e9, 3e9], [0, 0], [False, True]), [[0, 1]] * 4, [0] * 4, [1e9] * 4, solver)
    assert r.finish_s.tolist() == pytest.approx([4 / 3] * 4, rel=1e-12)


@pytest.mark.parametrize("solver", SOLVERS)
def test_simultaneous_completions_are_one_event(solver):
    # 40 flows on different routes whose ends coincide only up to rounding (1/3 and 1/7 of the links)
    links = links_of(*([3e9] * 20 + [7e9] * 20), lat=0.0)
    routes = [[k] for k in range(20) for _ in range(3)] + [[20 + k] for k in range(20) for _ in range(7)]
    r = sim(links, routes, np.zeros(len(routes)), np.full(len(routes), 1e9 / 3), solver)
    assert np.unique(r.finish_s).size == 1
    assert r.n_events == 2


@pytest.mark.parametrize("solver", SOLVERS)
def test_incremental_injection_matches_batch(solver):
    rng = np.random.default_rng(3)
    links = LinkSet(rng.uniform(1e9, 4e9, 12), rng.uniform(0, 2e-6, 12), np.arange(12) != 5)
    routes = [rng.choice(12, rng.integers(1, 4), replace=False) for _ in range(60)]
    starts = np.sort(rng.uniform(0, 0.02, 60))
    sizes = np.exp(rng.uniform(np.log(1e3), np.log(3e7), 60))
    batch = sim(links, routes, starts, sizes, solver)
    ptr, rl = routes_to_csr(routes)
    eng = FlowEngine(links, solver=solver)
    finished = []
    for i in range(60):  # inject each flow only when the clock reaches its start, as a replay does
        while eng.next_event_time() < starts[i]:
            finished.append(eng.run_until_next_event()[1])
        eng.advance_to(starts[i])
        assert eng.add_flows(ptr[i:i + 2] - ptr[i], rl[ptr[i]:ptr[i + 1]], [starts[i]], [sizes[i]]).tolist() == [i]
    while True:
        t, done = eng.run_until_next_event()
        if t == np.inf:
            break
        finished.append(done)
    assert np.sort(np.concatenate(finished)).tolist() == list(range(60))
    np.testing.assert_allclose(eng.finish_s, batch.finish_s, rtol=1e-12)
    np.testing.assert_allclose(eng.link_bytes(), batch.link_bytes, rtol=1e-9)


def test_solvers_agree_on_random_networks():
    pytest.importorskip("numba")
    rng = np.random.default_rng(11)
    for _ in range(5):
        n_links = int(rng.integers(3, 30))
        links = LinkSet(rng.choice([1e9, 2e9, 2.5e9, 1e10], n_links), rng.choice([0, 1e-6], n_links),
                        rng.random(n_links) > 0.15)
        routes = [rng.choice(n_links, rng.integers(0, min(6, n_links)), replace=False) for _ in range(150)]
        np.testing.assert_allclose(maxmin_rates(links, routes, solver="numba"),
                                   maxmin_rates(links, routes, solver="numpy"), rtol=1e-12)
        starts, sizes = rng.uniform(0, 0.01, 150), np.exp(rng.uniform(0, np.log(1e8), 150))
        a, b = (sim(links, routes, starts, sizes, s) for s in ("numpy", "numba"))
        np.testing.assert_allclose(a.finish_s, b.finish_s, rtol=1e-12)
        assert a.n_events == b.n_events


@pytest.mark.parametrize("seed", [3, 4])
def test_compiled_timeline_matches_the_engines(seed):
    # the compiled loop samples each link's bytes at the boundaries, FlowEngine adds load x time: same series
    pytest.importorskip("numba")
    rng = np.random.default_rng(seed)
    n_links = 12
    links = LinkSet(rng.choice([1e9, 2e9, 2.5e9, 1e10], n_links), rng.choice([0, 1e-6], n_links),
                    rng.random(n_links) > 0.2)   # some fat-pipe caps
    routes = [rng.choice(n_links, rng.integers(1, 5), replace=False) for _ in range(200)]
    starts, sizes = rng.uniform(0, 0.01, 200), np.exp(rng.uniform(0, np.log(1e8), 200))
    dt = sim(links, routes, starts, sizes, "numba").makespan_s / 41.5
    a, b = (sim(links, routes, starts, sizes, s, timeline_dt_s=dt) for s in ("numpy", "numba"))
    np.testing.assert_array_equal(a.timeline["t_s"], b.timeline["t_s"])
    np.testing.assert_allclose(b.timeline["util"], a.timeline["util"], rtol=1e-9, atol=1e-9)
    assert a.timeline["util"].shape == (n_links, 42)


def test_timeline_utilization_and_progress():
    calls = []
    r = sim(links_of(1e9, 1e9, lat=0.0), [[0], [0], [1]], [0, 0, 0], [5e8, 5e8, 2.5e8], "auto",
            timeline_dt_s=0.25, progress=lambda done, total: calls.append((done, total)))
    assert r.finish_s.tolist() == pytest.approx([1.0, 1.0, 0.25])
    assert r.timeline["t_s"].tolist() == [0.0, 0.25, 0.5, 0.75]
    np.testing.assert_allclose(r.timeline["util"], [[1, 1, 1, 1], [1, 0, 0, 0]], atol=1e-12)
    assert calls[-1] == (3, 3)


def test_engine_guards():
    eng = FlowEngine(links_of(1e9))
    assert eng.run_until_next_event()[0] == np.inf
    eng.add_flows([0, 1], [0], [0.0], [1e9])
    with pytest.raises(TopoplanError, match="skip the event"):
        eng.advance_to(5.0)
    with pytest.raises(TopoplanError, match="bytes"):
        eng.add_flows([0, 1], [0], [0.0], [-1.0])
    with pytest.raises(TopoplanError, match="out of range"):
        eng.add_flows([0, 1], [3], [0.0], [1.0])
    with pytest.raises(TopoplanError, match="bandwidth"):
        LinkSet([-1.0], [0.0], [True])


# --------------------------------------------------------------------------- SimGrid references


def hand_cases():
    path = SIMGRID / "hand_cases.json"
    return json.loads(path.read_text()) if path.exists() else []


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("case", hand_cases(), ids=lambda c: c["name"])
def test_simgrid_hand_cases(case, solver):
    got = finish_by_id(run_scenario(case["scenario"], solver=solver))
    for fid, expected in case["expected_finish_s"].items():
        assert got[fid] == pytest.approx(expected, rel=1e-6), fid


def test_simgrid_hand_cases_present():
    need_reference("hand_cases.json")
    assert len(hand_cases()) >= 9


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("name", ["a2a_8x8", "rand500_4x8"])
def test_simgrid_reference_scenarios(name, solver):
    scenario = need_reference(f"{name}.scenario.json.gz")
    expected = json.loads(gzip.decompress(need_reference(f"{name}.result.json.gz").read_bytes()))
    out = run_scenario(scenario, solver=solver)
    got = finish_by_id(out)
    exp = finish_by_id(expected)
    assert got.keys() == exp.keys()
    ids = list(exp)
    np.testing.assert_allclose([got[i] for i in ids], [exp[i] for i in ids], rtol=1e-6)
    assert out["makespan_s"] == pytest.approx(expected["makespan_s"], rel=1e-6)


@pytest.mark.parametrize("solver", SOLVERS)
def test_simgrid_explicit_routes_with_fatpipe(solver):
    """240 random flows, explicit routes (reverse ways derived), a fat pipe, zero-byte flows;
    reference computed offline with Debian's python3-simgrid 3.32 (same configuration as ../shared)."""
    doc = json.loads(gzip.decompress((DATA / "simgrid_explicit_rand240.json.gz").read_bytes()))
    got = finish_by_id(run_scenario(doc["scenario"], solver=solver))
    exp = finish_by_id(doc["result"])
    np.testing.assert_allclose([got[i] for i in exp], list(exp.values()), rtol=1e-6)


# --------------------------------------------------------------------------- scenario reader


TREE = {"leaves": 2, "hosts_per_leaf": 2, "down_bw": 1e9, "up_bw": 1e9, "down_lat": 1e-6, "up_lat": 1e-6}


def explicit(**over):
    doc = {"hosts": ["A", "B"],
           "links": [{"name": "L", "bandwidth_Bps": 1e9, "latency_s": 1e-6, "sharing": "shared"}],
           "routes": [{"src": "A", "dst": "B", "links": [{"name": "L", "dir": "up"}]}],
           "flows": [{"id": "f", "src": "B", "dst": "A", "bytes": 10, "start_s": 0.0}]}
    doc.update(over)
    return doc


def test_reverse_route_is_reversed_and_flipped():
    doc = explicit(links=[{"name": "L", "bandwidth_Bps": 1e9, "latency_s": 0, "sharing": "shared"},
                          {"name": "M", "bandwidth_Bps": 1e9, "latency_s": 0, "sharing": "fatpipe"}],
                   routes=[{"src": "A", "dst": "B",
                            "links": [{"name": "L", "dir": "up"}, {"name": "M", "dir": "down"}]}])
    links, (ptr, rl), flows = load_scenario(doc)
    assert [links.names[i] for i in rl] == ["M/up", "L/down"]
    assert links.shared.tolist() == [True, True, False, False]
    assert flows.to_frame()["src"].tolist() == ["B"]


def test_tree_routes_match_the_readme():
    links, (ptr, rl), _ = load_scenario({"tree": TREE, "flows": [
        {"id": 0, "src": "h0", "dst": "h1", "bytes": 1, "start_s": 0},
        {"id": 1, "src": "h3", "dst": "h0", "bytes": 1, "start_s": 0}]})
    names = [links.names[i] for i in rl]
    assert names[:ptr[1]] == ["down0/up", "down1/down"]
    assert names[ptr[1]:] == ["down3/up", "up1/up", "up0/down", "down0/down"]
    assert tree_routes([2], [2], 2, 2)[1].size == 0


def test_scenario_file_gzip_and_plain(tmp_path):
    doc = explicit()
    plain, packed = tmp_path / "s.json", tmp_path / "s.json.gz"
    plain.write_text(json.dumps(doc))
    packed.write_bytes(gzip.compress(json.dumps(doc).encode()))
    a, b = run_scenario(plain), run_scenario(packed)
    assert a["flows"] == b["flows"] == [{"id": "f", "finish_s": pytest.approx(1e-6 + 1e-8)}]
    assert set(a) >= {"flows", "makespan_s", "wall_s"}


@pytest.mark.parametrize("change, message", [
    ({"flows": [{"id": "f", "src": "B", "dst": "A", "start_s": 0}]}, "flow 'f': missing field 'bytes'"),
    ({"flows": [{"id": "f", "src": "B", "dst": "Z", "bytes": 1, "start_s": 0}]},
     "flow 'f': field 'dst': unknown host 'Z'"),
    ({"routes": [{"src": "A", "dst": "B", "links": [{"name": "X", "dir": "up"}]}]},
     "routes[0].links[0]: unknown link 'X'"),
    ({"links": [{"name": "L", "bandwidth_Bps": -1e9, "latency_s": 0}]}, "link 'L': field 'bandwidth_Bps'"),
    ({"flows": [{"id": "f", "src": "A", "dst": "B", "bytes": -3, "start_s": 0}]}, "flow 'f': field 'bytes'"),
    ({"hosts": ["A", "B", "C"], "flows": [{"id": "g", "src": "A", "dst": "C", "bytes": 1, "start_s": 0}]},
     "flow 'g': no route from 'A' to 'C'"),
    ({"routes": None}, "field 'routes': expected a list"),
    # issue 36: a route that lists a link twice (its flow counted twice on it), a host pair routed twice
    ({"routes": [{"src": "A", "dst": "B", "links": [{"name": "L", "dir": "up"}, {"name": "L", "dir": "up"}]}]},
     "routes[0].links[1]: link 'L' is listed twice in the route (links[0] and links[1])"),
    ({"routes": [{"src": "A", "dst": "B", "links": [{"name": "L", "dir": "up"}, {"name": "L", "dir": "down"}]}]},
     "routes[0].links[1]: link 'L' is listed twice in the route"),
    ({"routes": [{"src": "A", "dst": "B", "links": [{"name": "L", "dir": "up"}]},
                 {"src": "A", "dst": "B", "links": []}]}, "routes[1]: a second route from 'A' to 'B' (routes[0]"),
    # a route between two hosts with no link: its flows ended at once, as over an infinitely fast link
    ({"routes": [{"src": "A", "dst": "B", "links": []}]}, "routes[0].links: empty: the route from 'A' to 'B' "
                                                          "crosses no link"),
    # a host named twice: its routes and flows went to the second silently
    ({"hosts": ["A", "B", "A"]}, "hosts[2]: host 'A' is listed twice (hosts[0] is the first)"),
    # another network model's scenario, or a SimGrid option, was run as max-min without a word
    ({"model": "LV08"}, "field 'model': this simulator computes CM02-maxmin or maxmin (max-min fair sharing), "
                        "not 'LV08'"),
    ({"latency_factor": 13.01}, "field 'latency_factor': unknown key (known: flows, tree, hosts, links, routes, "
                                "model)"),
])
def test_bad_scenarios_name_file_and_field(tmp_path, change, message):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(explicit(**change)))
    with pytest.raises(TopoplanError) as err:
        load_scenario(path)
    text = str(err.value)
    assert text.startswith(f"{path}: ") and message in text and "\n" not in text


@pytest.mark.parametrize("fault, message", [
    (None, None),
    ({"bytes": -1}, "flow 7: field 'bytes': must be a finite number >= 0, got -1"),
    ({"start_s": float("nan")}, "flow 7: field 'start_s': must be a finite number >= 0, got nan"),
    ({"bytes": True}, "flow 7: field 'bytes': must be a finite number >= 0, got True"),
    ({"bytes": "5"}, "flow 7: field 'bytes': must be a finite number >= 0, got '5'"),
    ({"id": 3}, "flows[7]: duplicate flow id 3"),
    ({"id": 2.5}, "flows[7]: field 'id': must be a string or an integer, got 2.5"),
    ({"dst": "h9"}, "flow 7: field 'dst': unknown host 'h9'"),
    ({"src": ["h0"]}, "flow 7: field 'src': unknown host ['h0']"),
    ({"start_s": None}, "flow 7: field 'start_s': must be a finite number >= 0, got None"),
])
def test_flows_checked_by_column_read_as_flow_by_flow(fault, message):
    """Well-formed flows are read column by column (fast); any fault is then found flow by flow, so the error
    names the first faulty flow and field as before, and good columns equal the flow-by-flow ones."""
    import topoplan.sim.flowfile as ff

    flows = [{"id": i, "src": f"h{i % 4}", "dst": f"h{(i + 1) % 4}", "bytes": [1000, 2.5e6][i % 2],
              "start_s": [0, 0.25][i % 2]} for i in range(12)]
    if fault:
        flows[7].update(fault)
    flows.append({"id": "x", "src": "nope", "dst": "h0", "bytes": 1, "start_s": 0} if fault else dict(flows[0], id="x"))
    doc = {"tree": TREE, "flows": flows}
    if message:
        with pytest.raises(TopoplanError, match="^scenario: " + __import__("re").escape(message) + "$"):
            load_scenario(doc)
        return
    fast = load_scenario(doc).flows
    where, hosts = ff._Where("scenario"), {f"h{k}": k for k in range(4)}
    assert ff._well_formed_columns(flows, hosts) is not None
    slow = ff.FlowTable(*_flow_by_flow(ff, doc, where, hosts), fast.hosts)
    assert fast.ids == slow.ids
    for a, b in ((fast.src, slow.src), (fast.dst, slow.dst), (fast.bytes_, slow.bytes_), (fast.start_s, slow.start_s)):
        assert a.dtype == b.dtype and np.array_equal(a, b)


def _flow_by_flow(ff, doc, where, hosts):
    import unittest.mock

    with unittest.mock.patch.object(ff, "_well_formed_columns", lambda *a: None):
        return ff._flow_columns(doc, where, hosts)


def test_bad_files(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text('{"flows": [')
    with pytest.raises(TopoplanError, match=r"broken\.json:1: malformed flow scenario"):
        load_scenario(broken)
    with pytest.raises(TopoplanError, match="no such file"):
        load_scenario(tmp_path / "missing.json")
    with pytest.raises(TopoplanError, match="tree: field 'up_bw'"):
        load_scenario({"tree": dict(TREE, up_bw=0), "flows": []})
    with pytest.raises(TopoplanError, match="missing field 'flows'"):
        load_scenario({"tree": TREE})
