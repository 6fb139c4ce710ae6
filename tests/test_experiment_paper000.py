"""experiments/paper000.py on its --quick subset (Neighbor 8x16 40 MB, uplinks x1 and x5, 3 and 24 pathways) under
the three network models."""

import csv

import numpy as np
import pytest

from experiments import paper000
from experiments._common import MODELS


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("p000")
    assert paper000.main(["--quick", "--seeds", "1", "--out-dir", str(out)]) == 0
    with open(out / "paper000.csv") as f:
        rows = list(csv.DictReader(f))
    return out, rows


def _val(rows, metric, **match):
    match.setdefault("model", "pipelined")
    match.setdefault("seed", 0)
    hit = [r for r in rows if r["metric"] == metric and all(r[k] == str(v) for k, v in match.items())]
    assert len(hit) == 1, (metric, match, len(hit))
    return float(hit[0]["ours"])


def test_outputs_and_columns(quick):
    out, rows = quick
    assert list(rows[0].keys()) == list(paper000.COLUMNS)
    assert paper000.COLUMNS[:3] == ("table", "seed", "model")
    assert {r["model"] for r in rows} == set(MODELS) | {""}  # "": Neighbor's node-pair matrix (traffic only)
    assert (out / "paper000.png").stat().st_size > 10_000
    md = (out / "paper000.md").read_text()
    assert md.startswith("Each statement of 000")
    assert "| claim | paper | paper model | max-min, pipelined relays | max-min, store-and-forward relays |" in md
    assert "| Neighbor | SP U x1 |" in md and "| Neighbor | CP U x1, ilp |" in md
    assert "below 6 pathways SP is much slower than CP" in md  # the claims table is filled from our rows
    for m in MODELS:
        lines = {(r["scheme"], r["uplink"], r["pathways"], r["circuits"]) for r in rows
                 if r["metric"] == "rel_time" and r["model"] == m}
        assert {("EPS", "1", "0", "none"), ("EPS", "5", "0", "none"), ("SP", "1", "3", "sp"), ("CP", "5", "24", "sp"),
                ("CP", "1", "24", "ilp")} <= lines


def test_physics_of_the_neighbor_cells(quick):
    _, rows = quick
    # EPS only, sequential: the middle switches send 2 x 16 x 40 MB up per iteration over 64 Gbps, x 5 iterations
    eps = _val(rows, "makespan_s", scheme="EPS", uplink="1", placement="sequential")
    assert eps == pytest.approx(5 * 2 * 16 * 40e6 * 8 / 64e9, rel=1e-3)
    assert _val(rows, "rel_time", scheme="EPS", uplink="1", placement="sequential") == 1.0
    # full bisection: every node's 10 Gbps link carries 4 x 40 MB per iteration
    assert _val(rows, "makespan_s", scheme="EPS", uplink="5") == pytest.approx(5 * 4 * 40e6 * 8 / 10e9, rel=1e-3)
    # 24 SP circuits chain the three communicating switch pairs: every large inter-switch byte (16 pairs x 2
    # directions x 3 boundaries x 40 MB x 5) goes over the OCS, none up an uplink, so uplink width is irrelevant
    assert _val(rows, "ocs_bytes", scheme="SP", uplink="1", pathways=24, circuits="sp") == pytest.approx(19.2e9)
    assert _val(rows, "uplink_bytes", scheme="SP", uplink="1", pathways=24, circuits="sp") == 0
    assert _val(rows, "top_switch_B", scheme="SP", uplink="1", pathways=3, circuits="sp") == 0
    assert (_val(rows, "makespan_s", scheme="SP", uplink="1", pathways=24, circuits="sp")
            == _val(rows, "makespan_s", scheme="SP", uplink="5", pathways=24, circuits="sp"))
    # three pathways make three relay nodes per boundary carry a whole switch's traffic (000 Fig. 6)
    assert (_val(rows, "max_node_link_B", scheme="SP", uplink="1", pathways=3, circuits="sp")
            > _val(rows, "max_node_link_B", scheme="EPS", uplink="1", placement="sequential"))
    for scheme in ("SP", "CP"):
        assert (_val(rows, "bound_s", scheme=scheme, uplink="1", pathways=24, circuits="ilp")
                <= _val(rows, "bound_s", scheme=scheme, uplink="1", pathways=24, circuits="sp") + 1e-12)
        assert _val(rows, "circuits_set", scheme=scheme, uplink="1", pathways=3, circuits="sp") == 3


def test_every_model_simulates_the_same_plans(quick):
    """issue 16: one plan per cell, simulated under each model: the plan's bound, circuits and every link's
    bytes are the model's inputs, identical across models; only the times differ, each against its own EPS only."""
    _, rows = quick
    hybrid = {(r["scheme"], r["uplink"], r["pathways"], r["circuits"]) for r in rows
              if r["metric"] == "bound_s" and r["model"] == "pipelined"}
    assert len(hybrid) == 10
    for cell in hybrid:
        match = dict(zip(("scheme", "uplink", "pathways", "circuits"), cell))
        for metric in ("bound_s", "circuits_set", "circuits_used", "ocs_bytes", "uplink_bytes", "top_switch_B",
                       "max_node_link_B"):
            vals = {_val(rows, metric, model=m, **match) for m in MODELS}
            assert len(vals) == 1, (cell, metric, vals)
    for m in MODELS:
        assert _val(rows, "rel_time", model=m, scheme="EPS", uplink="1", placement="sequential") == 1.0
    # EPS only is uplink-limited: 5 x 32 x 40 MB through a middle switch's 64 Gbps uplink. Max-min runs at that
    # bound with either relay rule (no relays on EPS only); the paper model stores and forwards whole messages,
    # so the first message needs its 32 ms node hop before the uplink starts and the last one a 5 ms downlink
    # and a 32 ms node hop after it ends
    up = 5 * 2 * 16 * 40e6 * 8 / 64e9
    eps = {m: _val(rows, "makespan_s", model=m, scheme="EPS", uplink="1", placement="sequential") for m in MODELS}
    assert eps["pipelined"] == eps["store-and-forward"] == pytest.approx(up, rel=1e-3)
    assert eps["paper"] >= up + 2 * 40e6 * 8 / 10e9 + 40e6 * 8 / 64e9
    # store-and-forward relays never beat pipelined ones on the same plan under max-min
    for cell in hybrid:
        match = dict(zip(("scheme", "uplink", "pathways", "circuits"), cell))
        assert (_val(rows, "makespan_s", model="store-and-forward", **match)
                >= _val(rows, "makespan_s", model="pipelined", **match) * (1 - 1e-9))


def test_claims_per_model(quick):
    """The claims that the quick cells can check, per model: SP's relays below 6 pathways hold under every model
    (the capacity bound says so), and the node-link load is the same bytes everywhere."""
    out, _ = quick
    rows = paper000.run(("neighbor",), ("1", "5"), (3, 24), (24,), quick=True, ilp_time_limit=3.0, out_dir=out,
                        cache=out / ".cache_paper000", log=lambda *_: None)  # in-memory rows, from the cache
    by = {c["claim"]: c["by_model"] for c in paper000.claims(rows, MODELS)}
    for m in MODELS:
        assert by["Fig. 5: below 6 pathways SP is much slower than CP (its relays carry more)"][m][0] is True
        assert by["Fig. 6: the busiest node link carries more than with EPS only (relaying)"][m][0] is True
        # CP's partition chains the switches (4 strips, 3 switch pairs; equal cuts are broken by fewer switch
        # pairs on a hybrid), so 3 pathways carry every inter-switch byte for both schemes, under every model
        ok, text = by["Fig. 6: no load on S0 from 3 pathways on (the switches are chained by circuits)"][m]
        assert ok is True and "CP max 0 MB" in str(text) and "SP max 0 MB" in str(text)
        # not measurable on the quick subset: no x1/4 uplinks, fewer than 48 pathways
        assert by["Fig. 5: CP uses only 24 pathways, SP 48"][m] == (None, "")
    # the paper's "full bisection with about 20 pathways": on this subset (3 and 24 pathways) CP reaches it at 24
    # under every model (its 24 cut node pairs each get their own circuit, so nothing is relayed), which is not
    # "about 20": the check asks for 20 pathways or fewer
    [full] = [v for k, v in by.items() if k.startswith("Fig. 5: the full-bisection EPS time is reached")]
    assert [full[m][0] for m in MODELS] == [False, False, False]
    assert all("CP at 24" in str(full[m][1]) for m in MODELS)


def test_cache_is_used(quick):
    out, rows = quick
    assert len(list((out / ".cache_paper000").glob("*.json"))) == 13 * len(MODELS)
    assert len(list((out / ".cache_paper000").glob("paper_*.json"))) == 13
    logged = []
    rows2 = paper000.run(("neighbor",), ("1", "5"), (3, 24), (24,), quick=True, ilp_time_limit=3.0, out_dir=out,
                         cache=out / ".cache_paper000", log=logged.append)
    assert logged == []
    assert len(rows2) == len(rows)


def test_tables_2_and_3_match_the_paper_for_sequential_ranks():
    """000 Table 2 (CG) and Table 3 in brackets (MG, SP): ordered node pairs with large messages per switch pair."""
    from topoplan.core.placement import sequential
    from topoplan.traffic.sources import load_source

    topo = paper000.topology_of("hybrid")
    pl = sequential(128, topo)
    cg = load_source(paper000.traffic_spec("cg", 1, 1))[1]
    mg = load_source(paper000.traffic_spec("mg", 1, 1))[1]
    np.testing.assert_array_equal(paper000.pair_matrix(topo, cg, pl), paper000.PAPER_TABLE2_CG)
    np.testing.assert_array_equal(paper000.pair_matrix(topo, mg, pl), paper000.PAPER_TABLE3_MG["sequential"])
    # a threshold above every message leaves no pair
    assert paper000.pair_matrix(topo, cg, pl, threshold_B=1e12).sum() == 0


def test_bad_arguments_are_one_line_errors(capsys):
    with pytest.raises(SystemExit) as e:
        paper000.main(["--pathways", "0,3"])
    assert e.value.code == 2
    assert "--pathways: 0 is not between 1 and 64" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        paper000.main(["--uplinks", "2"])
    with pytest.raises(SystemExit) as e:
        paper000.main(["--models", "paper,fluid"])
    assert e.value.code == 2
    assert "unknown model 'fluid'" in capsys.readouterr().err
