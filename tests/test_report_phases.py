"""Phases on the simulated time axis (issue 21, item 1): replay marks, phase spans, the CLI and the report."""

import json

import numpy as np
import pytest

from topoplan.core.errors import TopoplanError
from topoplan.core.placement import sequential
from topoplan.core.topology_io import load_topology
from topoplan.reporting.report import parse_result, render_html
from topoplan.traffic.generators import alltoall, neighbor2d, parse_spec, ring
from topoplan.traffic.sources import load_source
from topoplan.traffic.phases import concat, detect_phases, phases_from_doc, split_at
from topoplan.sim.network import build_network
from topoplan.sim.replay import replay
from topoplan.sim.run import phase_spans, simulate

TWO = "halo-transpose:rows=8,cols=8,bytes=1MB,iters=2"


@pytest.fixture(scope="module")
def eps():
    return load_topology("paper003", ["kind=tree", "ocs=null"])


def test_marks_stamp_when_the_rank_reaches_the_call(eps):
    # a synchronous ring: every iteration takes the same time, so rank r reaches iteration k at k * (one iteration)
    tr = ring(4, 1e6, iters=3)
    rows_per_iter = 3      # irecv, isend, waitall
    lo = np.searchsorted(tr.rank, np.arange(4))
    marks = np.concatenate([lo + k * rows_per_iter for k in range(3)])
    res = replay(tr, build_network(eps), sequential(4, eps), marks=marks)
    t = res.mark_s.reshape(3, 4)
    assert np.all(t[0] == 0.0)
    np.testing.assert_allclose(t[1], res.makespan_s / 3, rtol=1e-12)
    np.testing.assert_allclose(t[2], 2 * res.makespan_s / 3, rtol=1e-12)


@pytest.mark.parametrize("method", ["python", "compiled"])
def test_marks_do_not_change_the_replay(eps, method):
    tr = concat([neighbor2d(4, 4, 4e6, iters=2), alltoall(16, 1e6, iters=2)])
    net, pl = build_network(eps), sequential(16, eps)
    plain = replay(tr, net, pl, method=method)
    marked = replay(tr, net, pl, marks=detect_phases(tr).cuts[1], method=method)
    assert marked.makespan_s == plain.makespan_s
    np.testing.assert_array_equal(marked.rank_finish_s, plain.rank_finish_s)
    assert plain.mark_s is None


@pytest.mark.parametrize("marks, match", [([[0, 1]], "1-d array"), ([0, 10 ** 6], "row indices must be in"),
                                          ([-1], "row indices must be in"), ([0.5], "1-d array")])
def test_bad_marks_are_refused(eps, marks, match):
    tr = ring(4, 1e6)
    with pytest.raises(TopoplanError, match=match):
        replay(tr, build_network(eps), sequential(4, eps), marks=np.asarray(marks))


@pytest.mark.parametrize("spec", [TWO, "npb:kernel=is,class=S,np=16", "alltoall:np=16,bytes=1MB,iters=2"])
def test_compiled_marks_equal_the_reference(eps, spec):
    # every call marked: collectives (expanded or streamed), an alltoallv written one row per destination
    tr = parse_spec(spec) if not spec.startswith("npb") else load_source(spec)[0]
    net, pl = build_network(eps), sequential(tr.n_ranks, eps)
    marks = np.arange(len(tr))[::-1]   # in any order
    a = replay(tr, net, pl, marks=marks, method="compiled")
    b = replay(tr, net, pl, marks=marks, method="python")
    assert not np.isnan(a.mark_s).any()
    np.testing.assert_allclose(a.mark_s, b.mark_s, rtol=1e-9, atol=1e-15)


def test_phase_spans_from_given_times():
    tr = ring(2, 1e6, iters=2)
    ph = split_at(tr, [[3, 3]])
    # marks are every rank's first call of phases 0 and 1: ranks 0, 1 of phase 0, then of phase 1
    spans = phase_spans(ph, np.array([0.0, 0.0, 2.0, 3.0]), np.array([5.0, 4.0]))
    assert [(s["start_s"], s["all_in_s"], s["end_s"]) for s in spans] == [(0.0, 0.0, 3.0), (2.0, 3.0, 5.0)]


def test_simulated_phases_cover_the_run(eps):
    tr = parse_spec(TWO)
    ph = detect_phases(tr, eps, sequential(64, eps))
    res = simulate(eps, tr, sequential(64, eps), phases=ph)
    spans = res["phases"]
    assert [s["kind"] for s in spans] == ph.kinds() and len(spans) >= 2
    assert spans[0]["start_s"] == 0.0 and spans[-1]["end_s"] == res["makespan_s"]
    for a, b in zip(spans, spans[1:]):
        assert a["start_s"] <= b["start_s"] <= a["end_s"] <= b["end_s"]   # neighbours overlap, in order
        assert b["all_in_s"] <= a["end_s"]     # the last rank to leave phase 0 enters phase 1 then
    assert all(s["start_s"] <= s["all_in_s"] <= s["end_s"] for s in spans)
    assert spans[0]["pair_basis"] == "node" and spans[0]["bytes"] == ph[0].bytes


def test_phases_document_round_trip_and_refusals(eps):
    tr = concat([neighbor2d(4, 4, 4e6, iters=3), alltoall(16, 1e6, iters=3)])
    ph = detect_phases(tr)
    back = phases_from_doc(json.loads(json.dumps(ph.to_dict())), tr)
    np.testing.assert_array_equal(back.cuts, ph.cuts)
    doc = ph.to_dict()
    with pytest.raises(TopoplanError, match=r"f.json: field 'n_ranks': 16 ranks, the trace has 4"):
        phases_from_doc(doc, ring(4, 1e6), where="f.json")
    bad = json.loads(json.dumps(doc))
    bad["phases"][1]["first_call"][3] = "x"
    with pytest.raises(TopoplanError, match=r"field 'phases\[1\].first_call': expected 16 non-negative"):
        phases_from_doc(bad, tr)
    bad["phases"][1]["first_call"] = [0] * 16
    bad["phases"][0]["first_call"] = [1] * 16
    with pytest.raises(TopoplanError, match=r"phases\[0\].first_call': the first phase must start"):
        phases_from_doc(bad, tr)
    with pytest.raises(TopoplanError, match="field 'phases': expected a non-empty list"):
        phases_from_doc({"phases": []}, tr)


def test_cli_simulate_phases_then_report(run_cli, tmp_path):
    sim = tmp_path / "sim.json"
    code, out, err = run_cli("simulate", "-t", "paper003", "-T", TWO, "--phases", "auto", "--timeline", "2ms",
                             "-o", sim)
    assert code == 0, err
    doc = json.loads(sim.read_text())
    n = len(doc["phases"])
    assert n >= 2 and f"{n} phases on the simulated time axis" in out
    # the same phases from a `topoplan phases -o` file
    phf = tmp_path / "phases.json"
    assert run_cli("phases", "-t", "paper003", "-T", TWO, "-o", phf)[0] == 0
    sim2 = tmp_path / "sim2.json"
    assert run_cli("simulate", "-t", "paper003", "-T", TWO, "--phases", phf, "--json", "-o", sim2)[0] == 0
    assert json.loads(sim2.read_text())["phases"] == doc["phases"]
    html = tmp_path / "r.html"
    code, out, err = run_cli("report", sim, "-o", html)
    assert code == 0, err
    page = html.read_text()
    assert 'id="phases"' in page and page.split('id="phases"')[1].count("<tr><td>") == n
    data = parse_result(doc, "sim.json")
    assert len(data.phases) == n and data.phases[1]["all_in_s"] >= data.phases[1]["start_s"]


@pytest.mark.parametrize("args, match", [
    (["-T", "ring:np=16,bytes=1MB", "--phases", "{phf}"], "--phases {phf}: field 'n_ranks': 64 ranks, the trace has 16"),
    (["-T", TWO, "--phases", "nope.json"], "--phases nope.json: not 'auto' and not a file"),
])
def test_cli_simulate_phases_refusals(run_cli, tmp_path, args, match):
    phf = tmp_path / "phases.json"
    assert run_cli("phases", "-t", "paper003", "-T", TWO, "-o", phf)[0] == 0
    out = tmp_path / "sim.json"
    args = [a.format(phf=phf) for a in args]
    code, _, err = run_cli("simulate", "-t", "paper003", *args, "-o", out)
    assert code == 2
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1
    assert match.format(phf=phf) in err
    assert not out.exists()


def test_cli_simulate_phases_refuses_a_matrix(run_cli, tmp_path, shared):
    mat = sorted((shared / "matrices" / "maplib").glob("*.csv"))
    if not mat:
        pytest.skip("no MapLib matrix")
    code, _, err = run_cli("simulate", "-t", "paper003", "-T", mat[0], "--phases", "auto")
    assert code == 2 and "has no time order" in err


@pytest.mark.parametrize("phases, match", [
    ({"x": 1}, r"field 'phases': expected a list"),
    ([{"index": 0, "kind": 0, "start_s": 2.0, "end_s": 1.0}], r"field 'phases\[0\].end_s': 1 s is before"),
    ([{"index": 0, "kind": -1, "start_s": 0.0, "end_s": 1.0}], r"field 'phases\[0\].kind'"),
    ([{"index": 0, "kind": 0, "start_s": 0.0, "end_s": 1.0, "all_in_s": 2.0}], r"phases\[0\].all_in_s': 2 s is outside"),
    ([{"index": 0, "kind": 0, "start_s": "0", "end_s": 1.0}], r"phases\[0\].start_s': expected a non-negative number"),
])
def test_report_refuses_bad_phases(data, phases, match):
    doc = json.loads((data / "report_result.json").read_text())
    doc["phases"] = phases
    with pytest.raises(TopoplanError, match=match):
        parse_result(doc, "r.json")


def test_report_draws_phases(data):
    doc = json.loads((data / "report_result.json").read_text())
    t1 = doc["timeline"]["t_s"][-1]
    doc["phases"] = [{"index": 0, "kind": 0, "start_s": 0.0, "all_in_s": 0.0, "end_s": t1 / 2, "bytes": 1e6,
                      "pairs": [[0, 1, 1e6]], "pair_basis": "node"},
                     {"index": 1, "kind": 1, "start_s": t1 / 3, "all_in_s": t1 / 2, "end_s": t1, "bytes": 2e6,
                      "pairs": [], "pair_basis": "node"}]
    page = render_html(parse_result(doc, "r.json"), frames=2)
    assert page.count('<tr><td>0</td><td>0</td>') == 1 and page.count('<tr><td>1</td><td>1</td>') == 1
    assert "phases" in page.split('id="timeseries"')[0]       # the summary names them
