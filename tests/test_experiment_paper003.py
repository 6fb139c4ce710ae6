"""experiments/paper003.py on its --quick subset (Neighbor 16x16 4 MB, Sequential, 4, 8 and 32 OCS nodes) under
the three network models, its claims at seeds 0 and 1."""

import csv

import pytest

from experiments import paper003


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("p003")
    assert paper003.main(["--quick", "--seeds", "2", "--out-dir", str(out)]) == 0
    with open(out / "paper003.csv") as f:
        rows = list(csv.DictReader(f))
    return out, rows


def _val(rows, metric, **match):
    match.setdefault("model", "pipelined")
    match.setdefault("seed", 0)
    if match.get("table") == "table2":
        match["model"] = ""
    hit = [r for r in rows if r["metric"] == metric and all(r[k] == str(v) for k, v in match.items())]
    assert len(hit) == 1, (metric, match, len(hit))
    return float(hit[0]["ours"])


def test_outputs_and_columns(quick):
    out, rows = quick
    assert list(rows[0].keys()) == list(paper003.COLUMNS)
    assert (out / "paper003.png").stat().st_size > 10_000
    md = (out / "paper003.md").read_text()
    assert "| Neighbor | Sequential | Ours |" in md and "(+26%)" in md  # the paper's 32-node value beside ours
    assert "| claim | paper | paper model | max-min, pipelined relays | max-min, store-and-forward relays |" in md
    assert {r["model"] for r in rows} == {"paper", "pipelined", "store-and-forward", ""}
    labels = {(r["label"], r["ocs_nodes"], r["circuits"]) for r in rows if r["metric"] == "gain"}
    assert {("EPS only", "0", "none"), ("FT EPS", "0", "none"), ("Ours", "32", "ilp"),
            ("Ours (narrow)", "4", "greedy")} <= labels


def test_physics_of_the_neighbor_cells(quick):
    _, rows = quick
    eps = _val(rows, "makespan_s", label="EPS only", placement="sequential")
    ft = _val(rows, "makespan_s", label="FT EPS", placement="sequential")
    # sequential Neighbor is uplink-limited on 003's 20 Gbps uplinks: 128 MB per iteration leaves the middle
    # switches, 51.2 ms at 20 Gbps, x 5 iterations
    assert eps == pytest.approx(5 * 128e6 * 8 / 20e9, rel=0.02)
    assert ft < eps
    for n in (4, 32):
        wide = _val(rows, "makespan_s", label="Ours", ocs_nodes=n, circuits="greedy")
        narrow = _val(rows, "makespan_s", label="Ours (narrow)", ocs_nodes=n, circuits="greedy")
        assert narrow > wide  # relays on 10 Gbps node links are the bottleneck (003 §4.2)
        # every large inter-switch byte goes either over the OCS or up an EPS uplink
        ocs = _val(rows, "ocs_bytes", label="Ours", ocs_nodes=n, circuits="greedy")
        up = _val(rows, "uplink_bytes", label="Ours", ocs_nodes=n, circuits="greedy")
        assert ocs + up == pytest.approx(1920e6, rel=1e-6)
    # 16 circuits cover the three communicating switch pairs: nothing is left on the uplinks
    assert _val(rows, "uplink_bytes", label="Ours", ocs_nodes=32, circuits="ilp") == 0
    # the exact circuits' bound is never worse than the heuristic's
    for n in (4, 32):
        assert (_val(rows, "bound_s", label="Ours", ocs_nodes=n, circuits="ilp")
                <= _val(rows, "bound_s", label="Ours", ocs_nodes=n, circuits="greedy") + 1e-12)


def test_table2_and_cache(quick):
    out, rows = quick
    # 3 switch boundaries x 2 directions x 16 ranks x 4 MB x 5 iterations, as 003 Table 2 says
    assert _val(rows, "inter_switch_total_B", table="table2", placement="sequential") == pytest.approx(1920e6)
    assert _val(rows, "inter_switch_small_B", table="table2", placement="sequential") == 0
    cached = {p.name for p in (out / ".cache_paper003").glob("*.json")}
    first = {n for n in cached if not n.endswith("_s1.json")}
    assert len(first) == 3 * 11  # 3 models x (EPS, FT, 3 OCS sizes x greedy/narrow/ilp)
    # at seed 1 only what the claims read and a seed can change: greedy circuits under every model, and under the
    # paper model (its order of simultaneous arrivals) EPS only and FT EPS too; never max-min's EPS only
    seed1 = {n[: -len("_s1.json")] for n in cached - first}
    assert "paper_neighbor_sequential_EPS_only_0_none" in seed1 and "paper_neighbor_sequential_FT_EPS_0_none" in seed1
    assert "pipelined_neighbor_sequential_Ours_32_greedy" in seed1
    assert not {n for n in seed1 if n.startswith(("pipelined_neighbor_sequential_EPS", "pipelined_neighbor_sequential_FT"))}
    assert not {n for n in seed1 if n.endswith("_ilp")}          # no claim reads the ilp cells
    logged = []
    rows2 = paper003.run(("neighbor",), ("sequential",), (4, 8, 32), quick=True, ilp_time_limit=3.0, out_dir=out,
                         seeds=(0, 1), cache=out / ".cache_paper003", log=logged.append)
    assert [x for x in logged if not x.startswith("  seed 1:")] == []  # every cell came from the cache
    assert len(rows2) == len(rows)


def test_claims_of_the_neighbor_case_under_each_model(quick):
    """issue 16: the paper model and our default reproduce 003's Neighbor claims; max-min with store-and-forward
    relays does not (whole-message relays never overlap receiving and forwarding under fair sharing)."""
    _, rows = quick
    for model in ("paper", "pipelined"):
        g = {n: _val(rows, "gain", model=model, label="Ours", ocs_nodes=n, circuits="greedy") for n in (4, 8, 32)}
        ft = _val(rows, "gain", model=model, label="FT EPS")
        assert g[4] > g[8]                                  # 4 OCS nodes beat 8
        assert abs(g[32] - 0.26) <= 0.10 and abs(ft - 0.31) <= 0.10  # the stated +26% / +31%, within 10 points
        assert g[32] < ft                                   # Ours-32 below FT EPS with Sequential placement
        for n in (4, 8, 32):
            assert _val(rows, "gain", model=model, label="Ours (narrow)", ocs_nodes=n, circuits="greedy") < 0
    saf = _val(rows, "gain", model="store-and-forward", label="Ours", ocs_nodes=32, circuits="greedy")
    assert saf < 0
    # the exact circuits' plan simulates within 5% of its bound under the default model
    for n in (4, 8, 32):
        bound = _val(rows, "bound_s", label="Ours", ocs_nodes=n, circuits="ilp")
        assert bound <= _val(rows, "makespan_s", label="Ours", ocs_nodes=n, circuits="ilp") <= 1.05 * bound


def test_claims_over_two_seeds(quick):
    """003's greedy joins a random free OCS node pair where none exchanges traffic: at seed 1 its 32-node plan
    under max-min gains +37.5% (as much as FT EPS), 11.5 points above the paper's +26%, so the claim holds at
    one of the two seeds; the seed-1 rows are in the CSV beside seed 0's."""
    out, rows = quick
    g = {s: _val(rows, "gain", seed=s, label="Ours", ocs_nodes=32, circuits="greedy") for s in (0, 1)}
    assert g[0] == pytest.approx(0.3125, abs=5e-4) and g[1] == pytest.approx(0.375, abs=5e-4)
    md = (out / "paper003.md").read_text()
    assert "Every claim is checked at 2 seeds (0, 1)" in md
    [line] = [x for x in md.splitlines() if x.startswith("| Neighbor, Sequential, Ours-32: gain +26%")]
    assert "holds at 1 of 2 seeds (not at seed 1) (+34." in line and "% [+31.2%, +37.5%])" in line
    # a cell no seed changes has no seed-1 row
    assert not [r for r in rows if r["seed"] == "1" and r["model"] == "pipelined" and r["label"] == "EPS only"]
