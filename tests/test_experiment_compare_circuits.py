"""experiments/compare_circuits.py on one small cell: CSV, PNG, and the exact model never beaten on its objective."""

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
        assert float(r["simulated_s"]) > 0
        assert float(r["gap_to_exact"]) >= -1e-9
    # EPS only: the simulator and the bound agree on an uplink-limited bulk exchange
    assert float(by["none"]["simulated_s"]) == pytest.approx(float(by["none"]["bound_s"]), rel=0.05)
    assert (tmp_path / "cc.png").stat().st_size > 1000
