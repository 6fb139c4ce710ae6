"""experiments/emulation_validation: the order check, the table and the figure from rows (the runs themselves need
root and Open MPI: tests/test_emulate_run.py runs such cells)."""

from __future__ import annotations

import pytest

from experiments import emulation_validation as ev


def _rows():
    rows = []
    for case, m in (("neighbor", (4.0, 1.1, 1.15, 1.5)), ("random", (4.0, 1.0, 0.9, 1.5))):
        for net, measured, predicted in zip(ev.NETWORKS, m, (3.5, 1.0, 1.02, 1.4)):
            rows.append({"part": "bulk", "case": case, "traffic": "t", "ocs_nodes": 8, "network": net, "circuits": None,
                         "scale": 400.0, "measured_s": measured, "predicted_s": predicted, "predicted_sf_s": predicted,
                         "predicted_paper_s": predicted, "ratio": measured / predicted, "ratio_sf": measured / predicted,
                         "ratio_paper": measured / predicted, "span_s": measured, "cpu_idle": 0.5,
                         "ranks_cpu_cores": 0.3, "packets": 100.0, "drops": 0.0, "attempts": 1.0,
                         "disturbed_attempts": 0.0, "calibration_one_way": 1.01, "calibration_both_ways": 1.02,
                         "calibration_ring": None, "load_avg": 9.5})
    return rows


def test_order_check_judges_only_pairs_the_prediction_separates():
    checks = {c["case"]: c for c in ev.order_check(_rows())}
    # predicted fat-tree 1.0 < greedy 1.02 < ilp 1.4 < eps 3.5: fat tree and greedy tie (within 5%), so in
    # "random" greedy measured faster than the fat tree is no disagreement
    assert checks["neighbor"]["agrees"] and checks["neighbor"]["predicted"][0] == "fat-tree"
    assert checks["random"]["agrees"] and checks["random"]["measured"][0] == "greedy"
    bad = [dict(r) for r in _rows()]
    bad[0]["measured_s"] = 1.0   # eps measured as fast as the fat tree, predicted 3.5x slower
    assert not {c["case"]: c for c in ev.order_check(bad)}["neighbor"]["agrees"]


def test_csv_round_trip_markdown_and_figure(tmp_path):
    rows = _rows()
    ev.write_csv(rows, tmp_path / "v.csv")
    back = ev.read_csv(tmp_path / "v.csv")
    assert len(back) == 8 and back[0]["measured_s"] == pytest.approx(4.0) and back[0]["calibration_ring"] is None
    md = ev.markdown(back)
    assert "median absolute error" in md and "| neighbor | 8 | eps |" in md and "agrees" in md
    ev.plot(back, tmp_path / "v.png")
    assert (tmp_path / "v.png").stat().st_size > 1000


@pytest.mark.parametrize("part, title", [("bulk", "## Bulk cases"), ("tcp", "as plain TCP flows, no MPI")])
def test_markdown_counts_cells_measured_slower_and_records_the_load(part, title):
    rows = [dict(r, part=part) for r in _rows()]
    md = ev.markdown(rows)
    # measured / predicted: neighbor 1.14, 1.10, 1.13, 1.07; random 1.14, 1.0, 0.88, 1.07 -> 6 of 8 above 1
    assert title in md and "6 measured slower than predicted (median ratio 1.086)" in md
    assert "| 50% | 9.5 | 0.30 | 1 |" in md


def test_a_tag_names_the_files(tmp_path):
    ev.write_csv(_rows(), tmp_path / "emulation_validation_quiet.csv")
    assert ev.main(["--replot", "--tag", "quiet", "-o", str(tmp_path)]) == 0
    assert (tmp_path / "emulation_validation_quiet.md").is_file() and not (tmp_path / "emulation_validation.md").exists()


@pytest.mark.parametrize("part, ranks, switches", [("npb-32", 32, 4), ("npb-64", 64, 8)])
def test_the_larger_npb_parts_run_every_kernel_on_as_many_nodes(part, ranks, switches):
    cells = list(ev._cells({part}, 400.0, quick=False))
    assert [c[1] for c in cells] == list(ev.NPB) and {c[0] for c in cells} == {part}
    topo, view, trace, pl, plan, keys, spec = ev._inputs(part, "lu", ev.npb_specs(ranks)["lu"], 2, "eps")
    assert (topo.n_nodes, trace.n_ranks, len(topo.nodes_per_switch), plan) == (ranks, ranks, switches, None)
    assert spec.endswith(f"np={ranks},iters=20")


def test_the_npb_tables_give_each_models_median_error():
    rows = [dict(r, part="npb-32", case=k, network="eps", ratio_fifo=r["ratio"] * 1.1) for r, k in zip(_rows(), ev.NPB)]
    md = ev.markdown(rows)   # ratios 1.143, 1.100, 1.127, 1.071, 1.143: median error 12.7%
    assert "## NPB skeletons at 32 ranks" in md and "- default: median absolute error 12.7% over 5 kernels" in md


def test_the_heavy_part_makes_one_switch_pair_the_bottleneck():
    from topoplan.core.placement import sequential
    from topoplan.sim.run import network_view, simulate

    from experiments.emulation_validation import BASE, HEAVY, _cells, _heavy_trace, _topology

    topo = _topology(BASE + ["ocs.nodes_per_switch=2"])
    t = {case: simulate(network_view(topo, "eps"), _heavy_trace(extra), sequential(16, topo), compute_scale=0.0)
         for case, extra in HEAVY.items()}
    # balanced: 8 MB on the uplinks of switches 1 and 2 (5 Gb/s); heavier: 12 MB from switch 1 to switch 2
    assert t["neighbor-balanced"]["makespan_s"] == pytest.approx(8e6 * 8 / 5e9, rel=0.01)
    assert t["neighbor-heavy"]["makespan_s"] == pytest.approx(12e6 * 8 / 5e9, rel=0.01)
    cells = [c[1] for c in _cells({"heavy"}, 400.0, quick=False)]
    assert cells == list(HEAVY) * 3   # alternated


def test_the_eager_part_staggers_the_ring_and_fans_out():
    from topoplan.core.placement import sequential
    from topoplan.sim.run import network_view, simulate

    from experiments.emulation_validation import (BASE, EAGER_CASES, EAGER_SETS, FANOUT_BYTES, _cells, _fanout_trace,
                                                  _ring_trace, _topology)

    cells = list(_cells({"eager"}, 400.0, quick=False))
    assert [(c[1], c[2]) for c in cells] == [(f"{case}, {n} ranks", (n, x)) for n in (16, 32)
                                             for case, x in EAGER_CASES.items()] + \
        [(f"fan-out, 3 x {b // 1024} KiB", (1, b)) for b in FANOUT_BYTES]
    assert all(c[4] == "eps" for c in cells) and len(list(_cells({"eager"}, 400.0, quick=True))) == 3
    topo = network_view(_topology(BASE + EAGER_SETS + ["nodes_per_switch=16"]), "eps")
    assert topo.down_latency_s == topo.up_latency_s == 0.0   # as emulated: the part tests sharing, not latency
    stagger = max(EAGER_CASES.values())
    t = {x: simulate(topo, _ring_trace(16, x), sequential(16, topo), eager_threshold_B=1e9) for x in (0.0, stagger)}
    # the stagger is computation before the first call (the root's: 4 levels), not communication
    assert t[stagger]["makespan_s"] - t[stagger]["comm_time_s"][0] == pytest.approx(4 * stagger)
    # the flow model: ranks entering apart make the eager ring several times slower (later rounds' messages share
    # the links of the ranks behind)
    assert t[stagger]["max_comm_time_s"] > 2.5 * t[0.0]["max_comm_time_s"]   # (3.3x)
    # max-min shares the sender's link: the three receivers of a fan-out wait alike, three message times
    fan = simulate(topo, _fanout_trace(262144), sequential(4, topo), eager_threshold_B=1e9)
    one = 262144 / topo.down_bw_Bps
    assert fan["comm_time_s"][1:] == pytest.approx([3 * one] * 3, rel=0.02)


def test_the_chunk_sweep_predicts_relayed_cells_again_and_keeps_the_measurements():
    _, _, _, _, plan, _, _ = ev._inputs("bulk", "halo-transpose", ev.BULK["halo-transpose"], 2, "greedy")
    base = {"part": "bulk", "case": "halo-transpose", "ocs_nodes": 8, "measured_s": 10e-3}
    rows = [dict(base, network="eps", circuits=None), dict(base, network="greedy", circuits=str(plan["circuits"])),
            dict(base, network="ilp", circuits="[[0, 1]]")]   # circuits the planner does not return: left out
    got = []
    out = ev.chunk_sweep(rows, (65536, 1 << 20), log=got.append)
    assert [s["cells"] for s in out] == [2, 2] and len(got) == 2 and out[0]["cases"] == 1
    # EPS only relays nothing: the same prediction with any chunk
    eps = ev.chunk_sweep(rows[:1], (65536, 1 << 20), log=got.append)
    assert eps[0]["median_error"] == eps[1]["median_error"]
    # the greedy plan's relays wait for whole chunks: larger ones take longer, nearer the 10 ms measured
    assert out[1]["hybrid_median_error"] < out[0]["hybrid_median_error"]


def test_the_chunk_sweep_names_a_missing_run(tmp_path, capsys):
    assert ev.main(["--chunk-sweep", "nosuch", "-o", str(tmp_path)]) == 2
    assert "--chunk-sweep: no file" in capsys.readouterr().err and not list(tmp_path.iterdir())


def test_combined_runs_count_the_runs_whose_order_agrees(tmp_path):
    slow = [dict(r) for r in _rows()]
    for r in slow:
        if r["network"] == "eps":
            r["measured_s"] = 1.0   # EPS only measured as fast as the fat tree, predicted 3.5 times slower
    for tag, rows in (("a", _rows()), ("b", _rows()), ("c", slow)):
        ev.write_csv(rows, tmp_path / f"emulation_validation_{tag}.csv")
    assert ev.main(["--combine", "a,b,c", "--tag", "three", "-o", str(tmp_path)]) == 0
    md = (tmp_path / "emulation_validation_three-combined.md").read_text()
    assert "| neighbor | 8 | in 2 of 3 runs | agrees |" in md and "| c |" in md   # the medians keep eps slowest
    assert "| neighbor | 8 | eps | 3 | 1.143 | 0.286-1.143 |" in md


def test_combining_names_a_missing_run(tmp_path, capsys):
    assert ev.main(["--combine", "nosuch", "-o", str(tmp_path)]) == 2
    assert "--combine: no file" in capsys.readouterr().err and not list(tmp_path.iterdir())
