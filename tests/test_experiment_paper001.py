"""experiments/paper001.py on its --quick subset (16x16, Neighbor, 128 OCS nodes) under the three network models:
table, figure, and the paper's claims."""

import csv
import json

import pytest

from experiments import paper001
from experiments._common import MODELS
from experiments.paper001 import COLUMNS, main


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("p001")
    assert main(["--quick", "--seeds", "1", "--out-dir", str(out), "--time-limit", "2"]) == 0
    return out


def _rows(out):
    with open(out / "paper001.csv") as fh:
        return list(csv.DictReader(fh))


def _get(rows, label, circuits, metric, model="pipelined"):
    [r] = [r for r in rows if r["label"] == label and r["circuits"] == circuits and r["metric"] == metric
           and r["model"] == model]
    return float(r["ours"])


def test_table_figure_and_markdown(quick):
    rows = _rows(quick)
    assert tuple(rows[0]) == COLUMNS and COLUMNS[:3] == ("table", "seed", "model")
    assert {r["system"] for r in rows} == {"16x16"} and {r["app"] for r in rows} == {"neighbor"}
    assert {r["model"] for r in rows} == set(MODELS) and {r["table"] for r in rows} == {"fig5"}
    assert (quick / "paper001.png").stat().st_size > 10_000
    md = (quick / "paper001.md").read_text()
    assert md.startswith("Each statement of 001")
    assert "| claim | paper | paper model | max-min, pipelined relays | max-min, store-and-forward relays |" in md
    assert "| Ours 128Nodes |" in md and "Table 2" in md
    assert "**16x16** (Fig. 5), paper model" in md
    # the paper's 33% reduction (Fig. 5) sits beside our number, under every model
    for m in MODELS:
        [p] = [r for r in rows if r["label"] == "Ours 128Nodes" and r["circuits"] == "three-step"
               and r["metric"] == "relative_time" and r["model"] == m]
        assert float(p["paper"]) == pytest.approx(0.67) and "Fig. 5" in p["paper_source"]


def test_paper_claims_hold_in_the_simulator(quick):
    rows = _rows(quick)
    rel = [float(r["ours"]) for r in rows if r["metric"] == "relative_time" and r["model"] == "pipelined"]
    fb = _get(rows, "FB EPS", "none", "relative_time")
    assert fb == min(rel) and fb < 1.0                       # full bisection is the fastest bar
    assert _get(rows, "EPS 0.8Gbps", "none", "relative_time") > 1.5  # thin uplinks hurt EPS only
    # the circuits take every inter-switch byte off the uplinks, so low bisection does not affect Ours (§4.2)
    for lab in ("Ours 128Nodes", "Ours 0.8Gbps 128Nodes"):
        assert _get(rows, lab, "three-step", "top_switch_bytes") == 0.0
    assert _get(rows, "Ours 0.8Gbps 128Nodes", "three-step", "relative_time") == pytest.approx(
        _get(rows, "Ours 128Nodes", "three-step", "relative_time"), rel=1e-6)
    # exact circuits never lose to the 3-step heuristic on the bound they minimize
    assert (_get(rows, "Ours 128Nodes", "ilp", "bound_s")
            <= _get(rows, "Ours 128Nodes", "three-step", "bound_s") * (1 + 1e-9))
    # Table 2: the 3-step assignment gives circuits to as many OCS nodes as the paper's
    [t2] = [r for r in rows if r["metric"] == "ocs_nodes_assigned" and r["circuits"] == "three-step"
            and r["uplink"] == "normal" and r["model"] == "pipelined"]
    assert t2["paper_source"] == "Table 2" and float(t2["ours"]) == float(t2["paper"])
    assert _get(rows, "Ours 128Nodes", "three-step", "ocs_nodes_used") <= float(t2["ours"])


def test_each_model_on_the_same_plans(quick):
    """issue 16: the plan of a cell is made once and simulated under every model (same bound, circuits and
    bytes); the EPS-only reference is each model's own; the claims are evaluated per model."""
    rows = _rows(quick)
    for lab, circ in (("Ours 128Nodes", "three-step"), ("Ours 128Nodes", "ilp"),
                      ("Ours 0.8Gbps 128Nodes", "three-step")):
        for metric in ("bound_s", "ocs_nodes_assigned", "ocs_nodes_used", "ocs_bytes", "top_switch_bytes"):
            assert len({_get(rows, lab, circ, metric, m) for m in MODELS}) == 1, (lab, circ, metric)
    # EPS only is uplink-limited: every switch in the middle of the 16-row grid sends 2 x 16 x 4 MB per iteration
    # up its 3.2 Gbps link, 5 iterations. Max-min runs at that bound; the paper model stores and forwards whole
    # messages, so the uplink cannot start before the first 4 MB crossed a 1 Gbps node link, and the last message
    # still crosses the downlink and a node link after it
    up = 5 * 2 * 16 * 4e6 * 8 / 3.2e9
    eps = {m: _get(rows, "EPS only", "none", "makespan_s", m) for m in MODELS}
    assert eps["pipelined"] == eps["store-and-forward"] == pytest.approx(up, rel=1e-3)
    assert eps["paper"] >= up + 2 * 4e6 * 8 / 1e9 + 4e6 * 8 / 3.2e9
    for m in MODELS:
        assert _get(rows, "EPS only", "none", "relative_time", m) == 1.0
        assert _get(rows, "FB EPS", "none", "relative_time", m) < 1.0
    by = {c["claim"]: c["by_model"] for c in paper001.claims(rows, MODELS)}
    low = by["Neighbor: the low-bisection uplinks do not affect Ours (within 5%; every inter-switch byte on the OCS)"]
    slow = by["Neighbor: EPS only with the low-bisection uplinks is much slower (> 1.5)"]
    for m in MODELS:
        assert low[m][0] is True and slow[m][0] is True
    # 001's "33% shorter" (0.67 within 0.10): our default reproduces it; whole-message relays under max-min
    # sharing make Ours slower than EPS only
    stated = by["16x16, Neighbor, Ours 128Nodes: relative time 0.67 (within 0.10)"]
    assert stated["pipelined"][0] is True and stated["store-and-forward"][0] is False
    assert float(str(stated["store-and-forward"][1])) > 1.0
    # claims that need cells outside the quick subset are not measured
    assert by["Ours with 64 OCS nodes (1/4 of the nodes): slowdowns outnumber speed-ups"]["paper"] == (None, "")


def test_rerun_reads_the_cache(quick, tmp_path):
    cache = quick / ".cache_paper001"
    files = sorted(cache.glob("*.json"))
    assert len(files) == 6 * len(MODELS)
    fb = next(f for f in files if "FB_EPS" in f.name and f.name.startswith("pipelined_"))
    doc = json.loads(fb.read_text())
    assert doc["key"]["model"] == "pipelined" and doc["key"]["sim_model"]["relay"] == "pipelined"
    doc["result"]["makespan_s"] = 123.0              # a cached value must come back unchanged
    fb.write_text(json.dumps(doc))
    assert main(["--quick", "--seeds", "1", "--out-dir", str(tmp_path), "--cache", str(cache), "--time-limit", "2"]) == 0
    assert _get(_rows(tmp_path), "FB EPS", "none", "makespan_s") == 123.0
    assert _get(_rows(tmp_path), "FB EPS", "none", "makespan_s", "paper") != 123.0


def test_bad_models_are_one_line_errors(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--models", "maxmin"])
    assert e.value.code == 2
    assert "unknown model 'maxmin'" in capsys.readouterr().err
