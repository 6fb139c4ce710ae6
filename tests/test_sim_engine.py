import gzip
import json

import numpy as np
import pytest

from planner.errors import TopoplanError
from sim.flowfile import load_scenario, run_scenario
from sim.maxmin import FlowEngine, LinkSet, simulate_flows


def one_link(bw=1e9, lat=1e-6, shared=True):
    return LinkSet(np.array([bw]), np.array([lat]), np.array([shared]))


def run(links, routes, starts, sizes, **kw):
    ptr = np.concatenate([[0], np.cumsum([len(r) for r in routes])])
    rl = np.array([x for r in routes for x in r], dtype=np.int64)
    return simulate_flows(links, ptr, rl, np.array(starts, float), np.array(sizes, float), **kw)


@pytest.mark.parametrize("compiled", [True, False])
def test_hand_cases(compiled):
    links = one_link()
    # one flow: latency + size / bandwidth
    assert run(links, [[0]], [0], [1e9]).finish_s[0] == pytest.approx(1.000001, rel=1e-12)
    # two flows share the link
    assert run(links, [[0], [0]], [0, 0], [1e9, 1e9]).finish_s.tolist() == pytest.approx([2.000001] * 2)
    # opposite directions are separate links
    two = LinkSet(np.array([1e9, 1e9]), np.array([1e-6, 1e-6]), np.array([True, True]))
    assert run(two, [[0], [1]], [0, 0], [1e9, 1e9]).finish_s.tolist() == pytest.approx([1.000001] * 2)
    # late start: the second flow shares only while both transfer
    r = run(links, [[0], [0]], [0, 0.5], [1e9, 1e9])
    assert r.finish_s.tolist() == pytest.approx([1.500001, 2.000001])
    # fat pipe: no sharing
    assert run(one_link(shared=False), [[0], [0]], [0, 0], [1e9, 1e9]).finish_s.tolist() == pytest.approx([1.000001] * 2)
    # zero bytes: latency only
    assert run(links, [[0]], [0.25], [0]).finish_s[0] == pytest.approx(0.250001)


def test_maxmin_with_slower_second_link():
    # f1 on L1 only, f2 on L1+L2 (L2 is 0.2 GB/s): f2 gets 0.2, f1 the remaining 0.8 GB/s
    links = LinkSet(np.array([1e9, 0.2e9]), np.zeros(2), np.array([True, True]))
    r = run(links, [[0], [0, 1]], [0, 0], [0.8e9, 0.2e9])
    assert r.finish_s.tolist() == pytest.approx([1.0, 1.0])
    assert r.n_events == 2  # start, and the two simultaneous completions as one event
    assert r.link_bytes.tolist() == pytest.approx([1e9, 0.2e9])


def test_incremental_injection_equals_batch():
    rng = np.random.default_rng(1)
    links = LinkSet(rng.uniform(1e8, 1e9, 6), rng.uniform(0, 1e-6, 6), np.ones(6, bool))
    routes = [rng.choice(6, size=rng.integers(1, 4), replace=False).tolist() for _ in range(40)]
    starts = np.sort(rng.uniform(0, 0.5, 40)); sizes = rng.uniform(1e6, 1e8, 40)
    batch = run(links, routes, starts, sizes)
    eng = FlowEngine(links)
    for k in range(40):  # inject each flow just before it starts
        while eng.next_event_time() < starts[k]:
            eng.run_until_next_event()
        eng.advance_to(starts[k])
        eng.add_flows(np.array([0, len(routes[k])]), np.array(routes[k]), [starts[k]], [sizes[k]])
    while np.isfinite(eng.run_until_next_event()[0]):
        pass
    assert eng.finish_s == pytest.approx(batch.finish_s, rel=1e-9)


def test_timeline_utilization():
    r = run(one_link(lat=0), [[0]], [0], [1e9], timeline_dt_s=0.25)
    assert np.allclose(r.timeline["util"][0], [1, 1, 1, 1])


def _check(shared, name):
    ref = json.load(gzip.open(shared / "reference" / "simgrid" / f"{name}.result.json.gz"))
    got = run_scenario(shared / "reference" / "simgrid" / f"{name}.scenario.json.gz")
    exp = {f["id"]: f["finish_s"] for f in ref["flows"]}
    for f in got["flows"]:
        assert f["finish_s"] == pytest.approx(exp[f["id"]], rel=1e-6)
    assert got["makespan_s"] == pytest.approx(ref["makespan_s"], rel=1e-6)


def test_simgrid_hand_cases(shared):
    for case in json.loads((shared / "reference" / "simgrid" / "hand_cases.json").read_text()):
        got = {f["id"]: f["finish_s"] for f in run_scenario(case["scenario"])["flows"]}
        for fid, t in case["expected_finish_s"].items():
            assert got[fid] == pytest.approx(t, rel=1e-6), case["name"]


def test_simgrid_all_to_all(shared):
    _check(shared, "a2a_8x8")


def test_simgrid_random_flows(shared):
    _check(shared, "rand500_4x8")


def test_bad_scenarios(tmp_path):
    with pytest.raises(TopoplanError, match="links\\[0\\]: field 'bandwidth_Bps': must be positive"):
        load_scenario({"links": [{"name": "L", "bandwidth_Bps": -1, "latency_s": 0}], "flows": []})
    with pytest.raises(TopoplanError, match="flows\\[0\\]: no route"):
        load_scenario({"hosts": ["A", "B"], "links": [], "routes": [], "flows": [{"src": "A", "dst": "B", "bytes": 1, "start_s": 0}]})
    p = tmp_path / "s.json"
    p.write_text("{ not json")
    with pytest.raises(TopoplanError, match="s.json:1: malformed"):
        load_scenario(p)
