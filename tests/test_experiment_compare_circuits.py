"""experiments/compare_circuits.py on one small cell: CSV, PNG, the exact model never beaten on its objective, and
its plan's simulated time close to the bound under pipelined relays."""

import csv

import pytest

from experiments.compare_circuits import main


def test_quick_cell_writes_csv_and_png(tmp_path):
    out = tmp_path / "cc.csv"
    assert main(["--quick", "--systems", "003", "--traffic", "neighbor", "--methods", "none,sp,greedy,ilp",
                 "--time-limit", "20", "--out", str(out)]) == 0
    rows = list(csv.DictReader(open(out)))
    assert [r["method"] for r in rows] == ["none", "sp", "greedy", "ilp"]
    by = {r["method"]: r for r in rows}
    exact = float(by["ilp"]["bound_s"])
    assert by["ilp"]["status"] == "optimal"
    for r in rows:
        assert exact <= float(r["bound_s"]) * (1 + 1e-9)
        for m in ("paper", "pipelined", "store-and-forward"):
            assert float(r[f"simulated_s.{m}"]) > 0
        assert float(r["gap_to_exact"]) >= -1e-9
    # EPS only: the simulator and the bound agree on an uplink-limited bulk exchange
    assert float(by["none"]["simulated_s.pipelined"]) == pytest.approx(float(by["none"]["bound_s"]), rel=0.05)
    # under pipelined relays the exact plan's bound is tight; whole-message relays are slower
    assert float(by["ilp"]["simulated_s.pipelined"]) == pytest.approx(exact, rel=0.05)
    assert float(by["ilp"]["simulated_s.store-and-forward"]) > 1.3 * exact
    assert (tmp_path / "cc.png").stat().st_size > 1000
