"""experiments/compare_placement.py on one small case: columns per model and what the placements must show."""

import csv

from experiments.compare_placement import fields, main


def test_one_case_under_the_three_models(tmp_path):
    out = tmp_path / "cp.csv"
    assert main(["--systems", "paper003", "--traffic", "neighbor", "--methods", "sequential,metis,ilp",
                 "--time-limit", "5", "--anneal", "1", "--out", str(out)]) == 0
    rows = list(csv.DictReader(open(out)))
    assert tuple(rows[0]) == fields()
    by = {r["method"]: r for r in rows}
    # the optimum of the neighbor pattern cuts 32 grid edges = 1,280 MB; sequential cuts 1,920 MB (003 Table 2)
    assert float(by["ilp"]["inter_switch_MB"]) == 1280 and float(by["sequential"]["inter_switch_MB"]) == 1920
    for model in ("paper", "pipelined", "store-and-forward"):
        seq, opt = float(by["sequential"][f"simulated_s.{model}"]), float(by["ilp"][f"simulated_s.{model}"])
        assert 0 < opt < seq  # fewer inter-switch bytes on 20 Gbps uplinks: faster under every model
    # no circuits here: the relay model cannot change a thing
    assert by["metis"]["simulated_s.pipelined"] == by["metis"]["simulated_s.store-and-forward"]
    assert (tmp_path / "cp.png").stat().st_size > 1000
