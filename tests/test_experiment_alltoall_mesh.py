"""experiments/alltoall_mesh.py --quick: A2AT between the bound and A2A, the files, the CLV time series."""

import csv

import numpy as np
import pytest

from experiments.alltoall_mesh import run, utilization_summary, write_csv, write_md, write_png


@pytest.fixture(scope="module")
def quick():
    return run(quick=True, log=lambda *_: None)


def test_a2at_between_bound_and_a2a(quick):
    rows, _ = quick
    rounds = {(r["case"], r["bytes"], r["algorithm"]): r for r in rows if r["mode"] == "rounds"}
    assert {c for c, _, _ in rounds} == {"mesh 4x4x4", "torus 4x4x4", "mesh 6x6x6"}
    for (case, nb, alg), r in rounds.items():
        # nothing beats formula (1), nor the busiest link of its own routes (latency only adds)
        assert r["simulated_s"] >= r["lower_bound_s"] * (1 - 1e-9), (case, nb, alg)
        assert r["simulated_s"] >= r["congestion_s"] * (1 - 1e-9), (case, nb, alg)
        if alg == "A2AT":
            a2a = rounds[(case, nb, "A2A")]
            assert r["simulated_s"] < a2a["simulated_s"], (case, nb)
    # large messages on a mesh: latency is negligible and A2AT's balanced rounds reach the bound
    for case in ("mesh 4x4x4", "mesh 6x6x6"):
        t, a = rounds[(case, 1_000_000, "A2AT")], rounds[(case, 1_000_000, "A2A")]
        assert t["ratio"] < 1.02 and t["congestion_ratio"] == pytest.approx(1.0)
        assert a["ratio"] > 1.5
    # an even torus whose ties all go '+': the routing floor (not formula (1)) is what A2AT approaches
    t = rounds[("torus 4x4x4", 1_000_000, "A2AT")]
    assert t["routing_floor_s"] == pytest.approx(1.5 * t["lower_bound_s"])
    assert t["routing_floor_s"] <= t["simulated_s"] < 1.05 * t["routing_floor_s"]


def test_rounds_mode_matches_replay_for_rendezvous_messages(quick):
    rows, _ = quick
    rep = [r for r in rows if r["mode"] == "replay"]
    assert len(rep) == 8
    for r in rep:
        q = next(x for x in rows if x["mode"] == "rounds" and all(x[k] == r[k] for k in ("case", "bytes", "algorithm")))
        if r["bytes"] >= 65536:   # rendezvous: every node waits for its partners, as the round barrier does
            assert q["simulated_s"] == pytest.approx(r["simulated_s"], rel=0.01)
        assert r["simulated_s"] >= r["lower_bound_s"] * (1 - 1e-9)


def test_time_series_a2at_keeps_every_dimension_busy(quick):
    _, series = quick
    assert set(series) == {"A2A", "A2AT"}
    u = utilization_summary(series)
    t = np.array([u["A2AT"][d] for d in "xyz"])
    a = np.array([u["A2A"][d] for d in "xyz"])
    assert t.max() / t.min() < 1.05             # balanced over the dimensions
    assert t.min() > a.min() + 0.1              # A2A leaves some dimension underused
    for alg in series:
        for cls, (mx, av) in series[alg]["classes"].items():
            assert (av <= mx + 1e-9).all() and mx.max() <= 1.0 + 1e-9, (alg, cls)


def test_outputs(quick, tmp_path):
    rows, series = quick
    write_csv(rows, tmp_path / "a.csv")
    write_png(rows, series, tmp_path / "a.png")
    write_md(rows, series, tmp_path / "a.md")
    back = list(csv.DictReader(open(tmp_path / "a.csv")))
    assert len(back) == len(rows) and float(back[0]["ratio"]) == pytest.approx(rows[0]["ratio"], rel=1e-5)
    assert (tmp_path / "a.png").read_bytes()[:4] == b"\x89PNG" and (tmp_path / "a.png").stat().st_size > 20000
    md = (tmp_path / "a.md").read_text()
    assert "| lower bound, formula (1) | 2.57 s | 2.569 s" in md and "2.77 s" in md
    assert "Round-by-round vs full MPI replay" in md
