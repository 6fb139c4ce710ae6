"""experiments/paper000.py on its --quick subset (Neighbor 8x16 40 MB, uplinks x1 and x5, 3 and 24 pathways)."""

import csv

import numpy as np
import pytest

from experiments import paper000


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("p000")
    assert paper000.main(["--quick", "--out-dir", str(out)]) == 0
    with open(out / "paper000.csv") as f:
        rows = list(csv.DictReader(f))
    return out, rows


def _val(rows, metric, **match):
    hit = [r for r in rows if r["metric"] == metric and all(r[k] == str(v) for k, v in match.items())]
    assert len(hit) == 1, (metric, match, len(hit))
    return float(hit[0]["ours"])


def test_outputs_and_columns(quick):
    out, rows = quick
    assert list(rows[0].keys()) == list(paper000.COLUMNS)
    assert (out / "paper000.png").stat().st_size > 10_000
    md = (out / "paper000.md").read_text()
    assert "| Neighbor | SP U x1 |" in md and "| Neighbor | CP U x1, ilp |" in md
    assert "below 6 pathways SP is much slower than CP" in md  # the claims table is filled from our rows
    lines = {(r["scheme"], r["uplink"], r["pathways"], r["circuits"]) for r in rows if r["metric"] == "rel_time"}
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


def test_cache_is_used(quick):
    out, rows = quick
    assert len(list((out / ".cache_paper000").glob("*.json"))) == 13
    logged = []
    rows2 = paper000.run(("neighbor",), ("1", "5"), (3, 24), (24,), quick=True, ilp_time_limit=3.0, out_dir=out,
                         cache=out / ".cache_paper000", log=logged.append)
    assert logged == []
    assert len(rows2) == len(rows)


def test_tables_2_and_3_match_the_paper_for_sequential_ranks():
    """000 Table 2 (CG) and Table 3 in brackets (MG, SP): ordered node pairs with large messages per switch pair."""
    from planner.placement import sequential
    from planner.traffic import load_source

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
