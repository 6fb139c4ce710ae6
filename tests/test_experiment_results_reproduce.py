"""The committed experiment results are what the committed code computes.

Each paper script's cells are cached per configuration (``experiments/results/.cache_<name>/``, committed),
keyed by their parameters, not by the code. ``--verify`` recomputes the selected cells and compares them
with the cache. Here a cheap subset of each paper's committed cells is recomputed: a code change that
moves a committed result (a plan, a placement, a simulated time) fails until the results are re-run.
Cells whose solver stopped at its time limit depend on the machine's load and are listed, not failed.
"""

import json
import shutil

import pytest

from experiments import _common, paper000, paper001, paper003

CHEAP = [
    pytest.param(paper000, ["--apps", "neighbor", "--uplinks", "1", "--pathways", "3,24", "--ilp-pathways", "24"],
                 id="paper000-neighbor-x1"),
    pytest.param(paper001, ["--systems", "16x16", "--apps", "neighbor", "--models", "pipelined"],
                 id="paper001-16x16-neighbor"),
    pytest.param(paper003, ["--apps", "neighbor", "--placements", "sequential,metis-paper", "--ocs", "4",
                            "--no-best"], id="paper003-neighbor-4-ocs"),
]


def _snapshot(directory):
    return {p.name: p.stat().st_mtime_ns for p in directory.iterdir() if p.is_file()}


@pytest.mark.parametrize("module,args", CHEAP)
def test_committed_cells_reproduce(module, args, capsys):
    before = _snapshot(_common.RESULTS)
    code = module.main(args + ["--verify"])
    out = capsys.readouterr().out
    assert code == 0, "\n".join(line for line in out.splitlines() if not line.startswith("  "))
    assert "DIFFERS" not in out
    summary = [line for line in out.splitlines() if line.startswith("verify: ")]
    assert len(summary) == 1 and not summary[0].startswith("verify: 0 cells")
    assert _snapshot(_common.RESULTS) == before   # --verify writes nothing


def _tampered_cache(tmp_path, name: str, pattern: str, change):
    """A copy of the committed cache of ``name`` with the first file matching ``pattern`` changed."""
    src = _common.RESULTS / f".cache_{name}"
    dst = tmp_path / f".cache_{name}"
    shutil.copytree(src, dst)
    path = sorted(dst.glob(pattern))[0]
    doc = json.loads(path.read_text())
    change(doc["result"])
    path.write_text(json.dumps(doc))
    return dst


def test_a_changed_result_is_found_and_named(tmp_path, capsys):
    def slower(result):
        result["makespan_s"] *= 1.01

    _tampered_cache(tmp_path, "paper003", "pipelined_neighbor_metis_Ours_4_greedy.json", slower)
    args = ["--apps", "neighbor", "--placements", "metis", "--ocs", "4", "--no-best", "--models", "pipelined",
            "--seeds", "1", "--out-dir", str(tmp_path), "--verify"]
    assert paper003.main(args) == 1
    out = capsys.readouterr().out
    bad = [line for line in out.splitlines() if line.startswith("DIFFERS")]
    assert len(bad) == 1 and "Ours             4 greedy" in bad[0] and "makespan_s:" in bad[0]
    assert "verify: 5 cells recomputed, 1 differ from the cache" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == [".cache_paper003"]   # no outputs written


def test_a_changed_seed_cell_is_found_and_named(tmp_path, capsys):
    """The cells run at a further seed for the claims are committed and verified like the first seed's."""
    def slower(result):
        result["makespan_s"] *= 1.01

    _tampered_cache(tmp_path, "paper003", "paper_neighbor_sequential_Ours_8_greedy_s1.json", slower)
    args = ["--apps", "neighbor", "--placements", "sequential", "--ocs", "4,8", "--no-best", "--models", "paper",
            "--seeds", "2", "--out-dir", str(tmp_path), "--verify"]
    assert paper003.main(args) == 1
    out = capsys.readouterr().out
    bad = [line for line in out.splitlines() if line.startswith("DIFFERS")]
    assert len(bad) == 1 and "Ours             8 greedy  seed 1" in bad[0] and "makespan_s:" in bad[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".cache_paper003"]   # no outputs written


def test_a_time_limited_cell_is_listed_not_failed(tmp_path, capsys):
    def timed_out(result):
        result["makespan_s"] *= 1.01
        result["status"] = "timeout"

    _tampered_cache(tmp_path, "paper003", "pipelined_neighbor_metis_Ours_4_ilp.json", timed_out)
    args = ["--apps", "neighbor", "--placements", "metis", "--ocs", "4", "--no-best", "--models", "pipelined",
            "--seeds", "1", "--out-dir", str(tmp_path), "--verify"]
    assert paper003.main(args) == 0
    out = capsys.readouterr().out
    assert "load-dependent (time limit): pipelined" in out and "status: 'timeout' -> 'optimal'" in out
    assert "1 more differ where a solver stopped at its time limit" in out


def test_a_missing_cell_differs(tmp_path, capsys):
    args = ["--apps", "neighbor", "--placements", "sequential", "--ocs", "4", "--no-best", "--models", "pipelined",
            "--out-dir", str(tmp_path), "--verify"]
    assert paper003.main(args) == 1
    assert "DIFFERS: pipelined         neighbor sequential  EPS only" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []


def test_verify_needs_the_cache(capsys):
    with pytest.raises(SystemExit) as exc:
        paper003.main(["--quick", "--verify", "--no-cache"])
    assert exc.value.code == 2
    assert "--verify compares each cell with the cache" in capsys.readouterr().err


@pytest.mark.parametrize("stored,new,diff", [
    ({"makespan_s": 1.0}, {"makespan_s": 1.0 + 1e-12}, []),
    ({"makespan_s": 1.0}, {"makespan_s": 1.0 + 1e-6}, ["makespan_s: 1.0 -> 1.000001"]),
    ({"makespan_s": 0.0, "wall_s": 1.0, "solve_s": 2.0, "sim_wall_s": 3.0}, {"makespan_s": 0.0}, []),
    ({"status": "optimal"}, {"status": "feasible"}, ["status: 'optimal' -> 'feasible'"]),
    ({"sim_model": {"relay": "pipelined"}}, {"sim_model": {"relay": "store-and-forward"}},
     ["sim_model: {'relay': 'pipelined'} -> {'relay': 'store-and-forward'}"]),
    ({"bound_s": None}, {"bound_s": 0.5}, ["bound_s: None -> 0.5"]),
    ({}, {"ocs_bytes": 0.0}, ["ocs_bytes: None -> 0.0"]),
])
def test_result_difference(stored, new, diff):
    assert _common.result_difference(stored, new) == diff
