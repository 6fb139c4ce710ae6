import importlib.util
import json
import re
import shutil

import numpy as np
import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from topoplan.core.errors import TopoplanError
from topoplan.batch.sweep import expand_cells, load_config, parse_config, read_table, run_sweep

ME = __name__   # how the sweep finds this module's cell, problem and score functions


# -- a cheap cell, a toy planning problem and a score hook, found by name like user code ------------

def cheap_cell(cell):
    p, m = cell["params"], cell["method"]
    if p["a"] == 3:
        raise ValueError("a = 3 fails on purpose")
    size = cell["instance"]["size"]
    val = size * p["a"] * m["options"].get("factor", 1) if m["name"] == "mul" else size + p["a"]
    return {"status": "heuristic", "objective": val + p["seed"]}


def build(topology, traffic, placement=None):
    return {"topo": topology, "traffic": traffic}


def _toy_method(spread):
    def method(problem, *, time_limit=None, seed=0, **_):
        from topoplan.analysis.switches import analyze
        from topoplan.core.placement import from_nodes, sequential
        from topoplan.problems.result import PlanResult

        topo, tr = problem["topo"], problem["traffic"]
        n = tr.n_ranks
        if spread:   # round robin over the edge switches
            per = topo.nodes_per_switch[0]
            pl = from_nodes([(r % topo.n_switches) * per + r // topo.n_switches for r in range(n)], topo)
        else:
            pl = sequential(n, topo)
        inter = analyze(topo, tr, pl).inter_switch_bytes
        return PlanResult("", inter, pl.to_dict(), metrics={"nodes_used": int(len(set(pl.rank_to_node.tolist())))})
    return method


TOY_METHODS = {"sequential": _toy_method(False), "spread": _toy_method(True)}


def solve(problem, method="sequential", *, time_limit=None, seed=0, **options):
    from topoplan.problems.result import solve_with

    return solve_with(TOY_METHODS, problem, method, problem_name="toy", time_limit=time_limit, seed=seed, **options)


def score_hook(*, result, cell, **_):
    return {"score": result.objective / 1e6, "hooked": cell["method"]["name"]}


# -- fixtures -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def client():
    """One local Dask cluster of two workers (threads) for the module."""
    from topoplan.batch.sweep import make_client

    c, cluster = make_client(workers=2, processes=False)
    yield c
    c.close()
    cluster.close()


def _cheap(data, tmp_path):
    shutil.copy(data / "sweep_cheap.yaml", tmp_path / "sweep_cheap.yaml")
    cfg = load_config(tmp_path / "sweep_cheap.yaml")
    cfg.cell = f"{ME}:cheap_cell"
    return cfg


# -- tests ----------------------------------------------------------------------------------------

def test_grid_and_keys(data, tmp_path):
    cfg = _cheap(data, tmp_path)
    cells = expand_cells(cfg)
    assert len(cells) == 2 * 2 * 3 * 2
    keys = [c["key"] for c in cells]
    assert len(set(keys)) == len(keys)
    assert cfg.output == tmp_path / "cheap.csv"
    # keys depend on what defines a cell, not on where the sweep file lives
    other = tmp_path / "moved"
    other.mkdir()
    shutil.copy(data / "sweep_cheap.yaml", other / "s.yaml")
    cfg2 = load_config(other / "s.yaml")
    cfg2.cell = cfg.cell
    assert [c["key"] for c in expand_cells(cfg2)] == keys
    cfg2.parameters["a"] = [1, 2, 4]
    changed = [c["key"] for c in expand_cells(cfg2)]
    assert sum(k in set(keys) for k in changed) == 16       # cells with a = 1, 2 keep their keys


@pytest.mark.parametrize("doc, field", [
    ({"methods": ["x"], "problem": "p"}, "instances"),
    ({"instances": [{"topology": "t", "traffic": "x"}], "problem": "p"}, "methods"),
    ({"instances": [{"topology": "t", "traffic": 5}], "methods": ["m"], "problem": "p"}, "instances[0].traffic"),
    ({"instances": [{"topology": "t", "placement": {"a": 1}}], "methods": ["m"], "problem": "p"},
     "instances[0].placement"),
    ({"instances": [{"topology": "t", "traffic": "x"}], "methods": ["m"]}, "methods[0].problem"),
    ({"instances": [{"topology": "t", "traffic": "x"}], "methods": ["m", "m"], "problem": "p"}, "methods"),
    ({"instances": [{"topology": "t", "traffic": "x"}], "methods": ["m"], "problem": "p", "parameters": {"a": []}},
     "parameters.a"),
    ({"instances": [{"topology": "t", "traffic": "x"}], "methods": ["m"], "problem": "p", "score": "nocolon"}, "score"),
    ({"instances": [{"name": "a", "cell": 1}, {"name": "a"}], "methods": ["m"], "cell": "m:f"}, "duplicate"),
    ({"instances": [{"topology": "t", "traffic": "x"}], "methods": ["m"], "problem": "p", "grid": {}}, "grid"),
    ({"instances": [{"topology": "t", "traffic": "x"}], "methods": ["m"], "problem": "p",
      "sim_model": {"relay": "cut-through"}}, "sim_model.*field 'relay'"),
    ({"instances": [{"topology": "t", "traffic": "x"}], "methods": ["m"], "problem": "p",
      "parameters": {"sim.relays": ["pipelined"]}}, "unknown simulator model option 'relays'"),
    # wrong types and repeated grid values: once a TypeError traceback, a 'no' read as true, or one cell run twice
    ({"instances": [{"name": ["a"], "topology": "t", "traffic": "x"}], "methods": ["m"], "problem": "p"},
     "instances[0].name': expected a string"),
    ({"instances": [{"topology": "t", "traffic": "x", "options": 5}], "methods": ["m"], "problem": "p"},
     "instances[0].options': expected a mapping"),
    ({"instances": [{"topology": "t", "traffic": "x"}], "methods": [{"name": "m", "label": ["x"]}], "problem": "p"},
     "methods[0].label': expected a string"),
    ({"instances": [{"topology": "t", "traffic": "x"}], "methods": ["m"], "problem": ["p"]}, "field 'problem': expected"),
    ({"instances": [{"topology": "t", "traffic": "x"}], "methods": ["m"], "problem": "p", "output": 5},
     "field 'output': expected a file name, got 5"),
    ({"instances": [{"topology": "t", "traffic": "x"}], "methods": ["m"], "problem": "p", "simulate": "no"},
     "field 'simulate': expected true or false, got 'no'"),
    ({"instances": [{"topology": "t", "traffic": "x"}], "methods": ["m"], "problem": "p",
      "parameters": {"seed": [0, 1, 0]}}, "parameters.seed': value 0 given twice"),
])
def test_bad_configs_name_the_field(doc, field):
    with pytest.raises(TopoplanError, match=field.replace("[", r"\[").replace("]", r"\]")):
        parse_config(doc, "s.yaml")


def test_resumable_sweep_on_two_workers(data, tmp_path, client):
    cfg = _cheap(data, tmp_path)
    first = run_sweep(cfg, client=client, progress=False, limit=10)
    assert (first.ran, first.skipped, first.failed) == (10, 0, 2)
    assert len(pd.read_csv(cfg.output)) == 10
    second = run_sweep(cfg, client=client, progress=False)
    assert (second.skipped, second.ran, second.failed) == (8, 16, 8)    # failed cells are retried
    third = run_sweep(cfg, client=client, progress=False)
    assert (third.skipped, third.ran) == (16, 8)
    df = pd.read_csv(cfg.output, keep_default_na=False)
    assert len(df) == 24 and df["key"].is_unique
    assert list(df.columns[:6]) == ["key", "instance", "problem", "method", "param.a", "param.seed"]
    ok = df[df["error"] == ""]
    want = [(r["param.a"] * r["size"] * 10 if r["method"] == "mul-x10" else r["param.a"] + r["size"]) + r["param.seed"]
            for r in ok.assign(size=ok["instance"].map({"small": 2, "large": 5})).to_dict("records")]
    assert ok["objective"].astype(float).tolist() == want
    assert (df.loc[df["param.a"] == 3, "error"].str.contains("fails on purpose")).all()
    assert set(df["worker"]) != {""}
    # a finished cell is never recomputed: its row (and wall time) survives a new run untouched
    before = df.set_index("key")["cell_wall_s"]
    cfg.parameters["a"] = [1]
    fourth = run_sweep(cfg, client=client, progress=False)
    assert (fourth.total, fourth.skipped, fourth.ran) == (8, 8, 0)
    after = pd.read_csv(cfg.output, keep_default_na=False).set_index("key")
    assert len(after) == 16 and (after["param.a"] <= 2).all()   # finished rows no longer in the grid are kept
    assert np.allclose(after["cell_wall_s"], before.loc[after.index])


def test_default_cell_plans_and_scores(data, tmp_path, client):
    cfg_path = tmp_path / "sweep_plan.yaml"
    cfg_path.write_text((data / "sweep_plan.yaml").read_text().replace("test_sweep", ME))
    ring = [(r, (r + 1) % 8, 1_000_000, 1) for r in range(8)]
    (tmp_path / "matrix.csv").write_text("src,dst,bytes,msgs\n" + "".join(f"{a},{b},{c},{d}\n" for a, b, c, d in ring))
    cfg = load_config(cfg_path)
    out = run_sweep(cfg, client=client, progress=False)
    assert (out.ran, out.failed) == (4, 0), out.table.get("error")
    df = out.table.set_index(["method", "param.set.cores_per_node"])
    assert df.loc[("sequential", 1), "objective"] == 0                  # 8 ranks under one switch
    assert df.loc[("spread", 1), "objective"] == 8_000_000              # every ring edge crosses switches
    assert df.loc[("sequential", 2), "metric.nodes_used"] == 4          # cores_per_node reached the topology
    assert df.loc[("spread", 2), "score"] == pytest.approx(8.0)
    assert set(df["hooked"]) == {"sequential", "spread"} and set(df["status"]) == {"heuristic"}


@pytest.mark.parametrize("methods, field", [(["m"], "problem"),
                                            (["m", {"name": "m2", "problem": "circuits"}], "problem"),
                                            (["greedy", {"name": "m", "problem": "no_such_module_xyz"}],
                                             "methods[1].problem")])
def test_missing_problem_module_stops_before_any_cell(tmp_path, client, methods, field):
    """The message names the file and the field, as for every other field (it named neither)."""
    problem = "no_such_module_xyz" if field == "problem" else "circuits"
    cfg = parse_config({"instances": [{"topology": "paper003", "traffic": "nowhere.csv"}],
                        "methods": methods, "problem": problem, "output": str(tmp_path / "e.csv")}, "e.yaml")
    with pytest.raises(TopoplanError, match=re.escape(f"e.yaml: field '{field}': problem 'no_such_module_xyz': not "
                                                      "one of circuits, placement, bcast, and cannot import module "
                                                      "no_such_module_xyz (")):
        run_sweep(cfg, client=client, progress=False)
    assert not (tmp_path / "e.csv").exists()


@pytest.mark.parametrize("change, needle", [
    ({"methods": ["no-such-method"]}, "methods[0].name': unknown circuits method 'no-such-method'"),
    ({"methods": [{"name": "sp", "optoins": {}}]}, "methods[0].optoins': unknown key"),
    ({"instances": [{"topology": "no-such-preset", "traffic": "ring:np=8,bytes=1MB"}]}, "instances[0].topology'"),
    ({"instances": [{"topology": "paper003", "traffic": "ring:np=8,bytes=1MB", "seet": []}]}, "instances[0].seet'"),
    ({"instances": [{"topology": "paper003", "traffic": "nowhere.csv"}]}, "instances[0].traffic'"),
    ({"instances": [{"topology": "paper003"}]}, "instances[0].traffic': missing: a circuits problem needs traffic"),
    ({"instances": [{"topology": "paper003", "traffic": "ring:np=8,bytes=1MB", "options": {"threshold": 1}}]},
     "instances[0].options.threshold': unknown option 'threshold' for the circuits problem builder; known: "
     "threshold_B, hop_limit, max_circuits"),
    ({"methods": [{"name": "anneal", "options": {"iters": 5}}]},
     "methods[0].options.iters': unknown option 'iters' for circuits method 'anneal'; known: init, max_steps"),
    ({"parameters": {"max_step": [5]}, "methods": ["anneal"]}, "parameters.max_step': unknown option 'max_step'"),
    ({"parameters": {"problem.hop_limt": [1]}}, "parameters.problem.hop_limt': unknown option 'hop_limt'"),
    ({"parameters": {"seed": [0, -1]}}, "parameters.seed': -1"),
    ({"parameters": {"time_limit": [0]}}, "parameters.time_limit': 0"),
    ({"parameters": {"set.eps.up_bws": ["1Gbps"]}}, "eps.up_bws"),
])
def test_config_mistakes_are_caught_up_front(change, needle):
    from topoplan.batch.sweep import check_config

    doc = {"instances": [{"topology": "paper003", "traffic": "ring:np=8,bytes=1MB"}], "methods": ["sp"],
           "problem": "circuits", **change}
    with pytest.raises(TopoplanError) as e:
        check_config(parse_config(doc, "s.yaml"))
    assert "s.yaml: field '" in str(e.value) and needle in str(e.value)


def test_unrelated_output_table_is_not_overwritten(tmp_path):
    out = tmp_path / "mine.csv"
    out.write_text("a,b\n1,2\n")
    with pytest.raises(TopoplanError, match="not a sweep table"):
        read_table(out)
    assert out.read_text() == "a,b\n1,2\n"


def test_previous_table_with_a_cell_twice_is_refused(tmp_path):
    """A cell's row twice in the table a sweep resumes from: one would silently stand for the cell."""
    out = tmp_path / "t.csv"
    out.write_text("key,score,error\na1,1.5,\nb2,2.0,\na1,9.0,\n")
    with pytest.raises(TopoplanError, match=r"t\.csv:4: field 'key': cell a1 is listed twice \(first at line 2\)"):
        read_table(out)


def test_cli_dry_run_and_run(data, tmp_path):
    from topoplan.cli.commands.sweep import register

    app = typer.Typer()
    register(app)
    app.command("noop", hidden=True)(lambda: None)
    cfg = tmp_path / "s.yaml"
    cfg.write_text((data / "sweep_cheap.yaml").read_text().replace("test_sweep", ME).replace("a: [1, 2, 3]", "a: [1, 2]"))
    dry = CliRunner().invoke(app, ["sweep", str(cfg), "--dry-run", "--json"])
    assert dry.exit_code == 0, dry.output
    d = json.loads(dry.output)
    assert d["pending"] == 16 and len(d["cells"]) == 16
    res = CliRunner().invoke(app, ["sweep", str(cfg), "--workers", "2", "--threads", "--json", "-o", str(tmp_path / "o.csv")])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output[res.output.index("{"):])
    assert (d["cells"], d["ran"], d["failed"]) == (16, 16, 0)
    assert d["files"][0].endswith("o.csv")
    dry = CliRunner().invoke(app, ["sweep", str(cfg), "--dry-run", "--json", "-o", str(tmp_path / "o.csv")])
    assert json.loads(dry.output)["pending"] == 0


@pytest.mark.skipif(importlib.util.find_spec("pyarrow") is None, reason="pyarrow is not installed")
def test_parquet_output_resumes(data, tmp_path, client):
    """A .parquet output is Parquet (no CSV beside it), holds what the CSV would, and the sweep resumes from it."""
    cfg = _cheap(data, tmp_path)
    cfg.output = tmp_path / "t.parquet"
    first = run_sweep(cfg, client=client, progress=False, limit=12)
    assert (first.ran, first.files) == (12, [str(tmp_path / "t.parquet")])
    assert not (tmp_path / "t.csv").exists()
    with open(tmp_path / "t.parquet", "rb") as fh:
        assert fh.read(4) == b"PAR1"
    pq = pd.read_parquet(tmp_path / "t.parquet")
    assert len(pq) == 12 and pq["key"].is_unique
    assert pq["objective"].dtype == np.float64 and pq["param.a"].dtype == np.int64
    assert set(pq.loc[pq["param.a"] == 3, "error"].str.contains("fails on purpose")) == {True}
    second = run_sweep(cfg, client=client, progress=False)
    assert (second.skipped, second.ran) == (8, 16)     # finished cells read back from Parquet are kept
    # the same sweep into CSV gives the same table
    cfg_csv = _cheap(data, tmp_path)
    cfg_csv.output = tmp_path / "t.csv"
    run_sweep(cfg_csv, client=client, progress=False)
    a = pd.read_parquet(tmp_path / "t.parquet").set_index("key").sort_index()
    b = pd.read_csv(tmp_path / "t.csv", keep_default_na=False).set_index("key").sort_index()
    assert a.index.equals(b.index)
    for col in ("instance", "method", "status", "error"):
        assert a[col].tolist() == b[col].astype(str).tolist(), col
    ok = a["error"] == ""
    assert np.allclose(a.loc[ok, "objective"], b.loc[ok, "objective"].astype(float))


def test_parquet_mixed_object_columns():
    """Columns of numbers with gaps become floats; anything with text stays text, gaps as ''."""
    from topoplan.batch.sweep import _parquet_ready

    df = pd.DataFrame({"gap": [1.5, None, 2], "txt": ["a", None, 3], "flag": [True, None, False]}, dtype=object)
    out = _parquet_ready(df)
    assert out["gap"].dtype == np.float64 and np.isnan(out["gap"][1]) and out["gap"][2] == 2.0
    assert out["txt"].tolist() == ["a", "", "3"]
    assert out["flag"].tolist() == ["True", "", "False"]


def test_parquet_without_pyarrow_is_a_clear_error(data, tmp_path, monkeypatch):
    import topoplan.batch.sweep as sweep

    monkeypatch.setattr(sweep, "have_parquet", lambda: False)
    cfg = _cheap(data, tmp_path)
    cfg.output = tmp_path / "t.parquet"
    with pytest.raises(TopoplanError, match=r"t\.parquet: Parquet needs the optional package pyarrow"):
        run_sweep(cfg, progress=False)
    assert not (tmp_path / "t.csv").exists()


def test_cells_name_and_use_their_simulator_model():
    from topoplan.batch.sweep import run_cell

    cfg = parse_config({"problem": "circuits", "methods": ["greedy"], "sim_model": {"relay_chunk_B": 65536},
                        "instances": [{"name": "nb", "topology": "paper003",
                                       "traffic": "neighbor2d:rows=16,cols=16,bytes=4MB,iters=1"}],
                        "parameters": {"sim.relay": ["pipelined", "store-and-forward"]}}, "s.yaml")
    cells = expand_cells(cfg)
    assert len({c["key"] for c in cells}) == 2
    rows = {c["params"]["sim.relay"]: run_cell(c) for c in cells}
    assert rows["pipelined"]["sim.relay"] == "pipelined" and rows["pipelined"]["sim.model"] == "maxmin"
    assert rows["store-and-forward"]["makespan_s"] > 1.3 * rows["pipelined"]["makespan_s"]
    assert rows["pipelined"]["objective"] == rows["store-and-forward"]["objective"]  # one plan, two models


def test_every_problem_is_built_the_same_way():
    """placement and bcast cells go through the same build(topology, traffic, placement, **options) as circuits;
    a Bcast has no traffic (it is the Bcast itself) and its placement is the allocation, a list of node ids."""
    from topoplan.batch.sweep import check_config, run_cell

    cfg = parse_config({"methods": [{"name": "metis", "problem": "placement"},
                                    {"name": "anneal", "problem": "placement", "options": {"max_steps": 20}}],
                        "instances": [{"name": "ring", "topology": "paper003", "traffic": "ring:np=16,bytes=1MB",
                                       "options": {"objective": "inter-switch"}}],
                        "parameters": {"seed": 1}}, "s.yaml")
    check_config(cfg)
    rows = [run_cell(c) for c in expand_cells(cfg)]
    assert all(r["makespan_s"] > 0 and r["status"] == "heuristic" for r in rows)
    assert rows[1]["objective"] <= rows[0]["objective"]
    cfg = parse_config({"problem": "bcast", "methods": ["default", "bft"],
                        "instances": [{"name": "b", "topology": "paper000", "placement": [0, 40, 80, 120, 1, 41],
                                       "options": {"root": 1}}],
                        "parameters": {"problem.bytes_B": [1024, 1048576]}, "simulate": False}, "b.yaml")
    check_config(cfg)
    rows = {(c["method"]["name"], c["params"]["problem.bytes_B"]): run_cell(c) for c in expand_cells(cfg)}
    assert rows[("bft", 1024)]["objective"] <= rows[("default", 1024)]["objective"]
    assert rows[("bft", 1048576)]["metric.bytes"] == 1048576 and rows[("bft", 1024)]["metric.n_leaders"] == 6
    bad = dict(cfg.instances[0], placement="sequential")
    cfg.instances = [bad]
    with pytest.raises(TopoplanError, match=r"instances\[0\].placement': a placement spec needs traffic"):
        check_config(cfg)


# -- sweeps fail loudly, and run wherever their workers start (issue 36) ---------------------------

def test_a_sweep_whose_cells_fail_exits_1_saying_how_many_and_why(data, tmp_path, run_cli):
    """Once exit 0 with every cell failed; now exit 1 and one line with the count and the reasons. The table
    is still written: it keeps the finished cells, and the next run retries the failed ones."""
    cfg = tmp_path / "s.yaml"
    cfg.write_text((data / "sweep_cheap.yaml").read_text().replace("test_sweep", ME))
    code, out, err = run_cli("sweep", cfg, "--workers", "1", "--threads")
    assert code == 1, err
    assert err.strip().splitlines()[-1] == (
        "error: sweep cheap: 8 of 24 cells failed: 8 x ValueError: a = 3 fails on purpose; the next run retries them")
    assert "Traceback" not in err
    assert len(read_table(tmp_path / "cheap.csv")) == 24
    cfg.write_text(cfg.read_text().replace("a: [1, 2, 3]", "a: [3]"))     # every cell fails
    code, out, err = run_cli("sweep", cfg, "--workers", "1", "--threads", "--json", "-o", tmp_path / "all.csv")
    assert code == 1 and "8 of 8 cells failed" in err
    assert json.loads(out)["errors"] == {"ValueError: a = 3 fails on purpose": 8}
    cfg.write_text(cfg.read_text().replace("a: [3]", "a: [1]"))
    assert run_cli("sweep", cfg, "--workers", "1", "--threads", "-o", tmp_path / "ok.csv")[0] == 0


def test_relative_files_are_found_by_workers_in_another_directory(tmp_path, monkeypatch):
    """A sweep file given by a relative path names its topology beside itself and its traffic relative to the
    working directory; a worker runs its cells in another directory (here: this process, after the cells were
    made). Once every cell failed with 'no such topology file'; paths are now resolved before the cells are
    shipped."""
    from topoplan.batch.sweep import execute

    sub = tmp_path / "sweeps"
    sub.mkdir()
    (sub / "tree.yaml").write_text("kind: tree\nswitches: 2\nnodes_per_switch: 4\ncores_per_node: 2\n"
                                   "eps: {down_bw: 10Gbps, up_bw: 20Gbps}\n")
    (tmp_path / "traffic").mkdir()
    (tmp_path / "traffic" / "ring.csv").write_text(
        "src,dst,bytes,msgs\n" + "".join(f"{r},{(r + 1) % 8},1000000,1\n" for r in range(8)))
    (sub / "s.yaml").write_text(f"name: rel\nproblem: {ME}\noutput: rel.csv\nsimulate: false\n"
                                "instances: [{name: ring, topology: tree.yaml, traffic: traffic/ring.csv}]\n"
                                "methods: [sequential, spread]\n")
    monkeypatch.chdir(tmp_path)
    cfg = load_config("sweeps/s.yaml")
    cells = expand_cells(cfg)
    assert cells[0]["files"] == {"topology": str(sub / "tree.yaml"), "traffic": str(tmp_path / "traffic" / "ring.csv")}
    elsewhere = tmp_path / "worker-dir"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    rows = [execute(c) for c in cells]
    assert [r["error"] for r in rows] == ["", ""]
    assert sorted(r["objective"] for r in rows) == [0, 8_000_000]   # under one switch, then across the two
    # the cells as they were shipped before: the worker looked the files up in its own directory
    assert "tree.yaml" in execute({**cells[0], "files": {}, "base": "sweeps"})["error"]


def test_circuit_cells_on_a_trace_plan_on_its_steps_found_once(monkeypatch):
    """A sweep plans an application as the circuits command does: on its steps (found once for the cells that
    share the trace), or on the bulk phase with problem.steps false."""
    import topoplan.batch.sweep as sweep
    from topoplan.core.topology_io import load_topology
    from topoplan.problems.circuits import CircuitProblem, solve
    from topoplan.sim.steps import source_steps
    from topoplan.traffic.sources import load_source

    spec = "npb:kernel=cg,class=S,np=16,iters=3"
    calls = []
    monkeypatch.setattr(sweep, "_STEPS", {})
    monkeypatch.setattr(sweep, "source_steps", lambda s, t: calls.append(s) or source_steps(s, t))
    cfg = parse_config({"problem": "circuits", "methods": ["greedy", "three-step"],
                        "instances": [{"name": "cg", "topology": "paper003", "traffic": spec,
                                       "set": ["ocs.nodes_per_switch=2"]}],
                        "parameters": {"seed": 0, "problem.steps": [True, False]}, "simulate": False}, "s.yaml")
    rows = {(c["method"]["name"], c["params"]["problem.steps"]): sweep.run_cell(c) for c in expand_cells(cfg)}
    assert calls == [spec]                                   # found once, for the two methods
    topo = load_topology("paper003", ["ocs.nodes_per_switch=2"])
    trace, traffic = load_source(spec)
    on_steps = CircuitProblem.build(topo, traffic, steps=source_steps(spec, trace))
    bulk = CircuitProblem.build(topo, traffic)
    for m in ("greedy", "three-step"):
        assert rows[(m, True)]["objective"] == pytest.approx(solve(on_steps, m, trace=trace).objective, rel=1e-12)
        assert rows[(m, False)]["objective"] == pytest.approx(solve(bulk, m).objective, rel=1e-12)
    assert rows[("greedy", True)]["objective"] != pytest.approx(rows[("greedy", False)]["objective"], rel=1e-3)


def test_a_steps_option_that_is_not_a_boolean_is_refused():
    from topoplan.batch.sweep import run_cell

    cfg = parse_config({"problem": "circuits", "methods": ["greedy"],
                        "instances": [{"name": "r", "topology": "paper003", "traffic": "ring:np=16,bytes=1MB"}],
                        "parameters": {"problem.steps": "yes"}, "simulate": False}, "s.yaml")
    with pytest.raises(TopoplanError, match="field 'steps': expected true or false, got 'yes'"):
        run_cell(expand_cells(cfg)[0])


def test_worker_processes_leave_ctrl_c_to_the_sweep():
    # Ctrl-C reaches the whole foreground group: a worker that took it printed a KeyboardInterrupt traceback
    import signal

    from topoplan.batch.sweep import make_client

    client, cluster = make_client(workers=1, processes=True)
    try:
        assert client.run(lambda: signal.getsignal(signal.SIGINT) is signal.SIG_IGN) == {
            w: True for w in client.scheduler_info()["workers"]}
    finally:
        client.close()
        cluster.close()


@pytest.mark.parametrize("dry_run", [True, False])
@pytest.mark.parametrize("given", ["config", "option"])
def test_a_sweep_table_to_standard_output_is_refused_never_a_file_named_dash(data, tmp_path, run_cli, given, dry_run):
    """'-' is standard output for every output; a sweep table is read back to resume the sweep, so it cannot
    go there. The config's own ``output: "-"`` is refused as ``-o -`` is (it was written to a file named '-'
    beside the config), naming the file and the field; nothing is written."""
    cfg = tmp_path / "s.yaml"
    text = (data / "sweep_cheap.yaml").read_text().replace("test_sweep", ME)
    cfg.write_text(text.replace("output: cheap.csv", 'output: "-"') if given == "config" else text)
    args = ["sweep", cfg, "--threads", "--workers", "1"] + (["-o", "-"] if given == "option" else [])
    code, stdout, err = run_cli(*args, *(["--dry-run"] if dry_run else []))
    assert code == 2 and stdout == "" and err.count("\n") == 1
    what = "a sweep table (read back to resume the sweep) cannot go to standard output; give a file name"
    assert err == (f"error: {cfg}: field 'output': '-': {what}\n" if given == "config" else
                   f"error: --output -: {what}\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]


def test_a_sweep_table_to_standard_output_is_refused_by_the_library(data, tmp_path):
    with pytest.raises(TopoplanError, match=r"^s\.yaml: field 'output': '-': a sweep table .* cannot go to "
                                            r"standard output"):
        parse_config({"instances": [{"topology": "t", "traffic": "x"}], "methods": ["m"], "problem": "p",
                      "output": "-"}, "s.yaml", base=tmp_path)
    with pytest.raises(TopoplanError, match=r"^output -: a sweep table .* cannot go to standard output"):
        load_config(data / "sweep_cheap.yaml", output="-")


# -- a sweep's placement file is checked against its inputs, as -p is ----------------------------------------

def _placement_sweep(tmp_path, run_cli, instance: str, parameters: str = "") -> object:
    """A sweep file whose instance names ``p.json``: a placement planned for paper003 and ring:np=8,bytes=1MB."""
    code, _, err = run_cli("place", "-t", "paper003", "-T", "ring:np=8,bytes=1MB", "-m", "sequential",
                           "-o", tmp_path / "p.json")
    assert code == 0, err
    cfg = tmp_path / "s.yaml"
    cfg.write_text("name: pl\noutput: pl.csv\nproblem: circuits\nsimulate: false\nmethods: [none]\n"
                   f"instances:\n  - {{name: i, placement: p.json, {instance}}}\n{parameters}")
    return cfg


@pytest.mark.parametrize("instance, parameters, needle", [
    ("topology: paper003, traffic: 'ring:np=8,bytes=2MB'", "", "p.json: made for another traffic"),
    ("topology: paper003, traffic: 'ring:np=8,bytes=1MB', set: [ocs.nodes_per_switch=2]", "",
     "p.json: made for another topology"),
    ("topology: paper003, traffic: 'ring:np=8,bytes=1MB'", "parameters: {set.ocs.nodes_per_switch: [8, 2]}\n",
     "p.json (in the cells with set.ocs.nodes_per_switch=2): made for another topology"),
])
def test_a_placement_file_made_for_other_inputs_is_refused(tmp_path, run_cli, instance, parameters, needle):
    """A sweep used a placement file made for another topology or traffic without a word, where every command
    taking -p refuses one; now it is refused before any cell runs (exit 2, naming the sweep file and the field),
    unless --any-inputs."""
    cfg = _placement_sweep(tmp_path, run_cli, instance, parameters)
    for extra in (["--dry-run"], []):
        code, out, err = run_cli("sweep", cfg, "--workers", "1", "--threads", *extra)
        assert code == 2 and out == "", err
        [line] = err.strip().splitlines()
        assert line.startswith(f"error: {cfg}: field 'instances[0].placement': {needle} (fingerprint "), line
        assert line.endswith("; pass --any-inputs to use it anyway"), line
    assert not (tmp_path / "pl.csv").exists()
    code, out, err = run_cli("sweep", cfg, "--workers", "1", "--threads", "--any-inputs")
    assert code == 0, err
    table = read_table(tmp_path / "pl.csv")
    assert len(table) == (2 if parameters else 1) and table["error"].isna().all()


@pytest.mark.parametrize("parameters", ["", "parameters: {set.ocs.nodes_per_switch: [8]}\n"])
def test_a_placement_file_made_for_the_inputs_is_taken(tmp_path, run_cli, parameters):
    cfg = _placement_sweep(tmp_path, run_cli, "topology: paper003, traffic: 'ring:np=8,bytes=1MB'", parameters)
    code, out, err = run_cli("sweep", cfg, "--workers", "1", "--threads")
    assert code == 0 and "warning" not in err, err


@pytest.mark.parametrize("edit, any_inputs, needle", [
    ({"seed": -1}, True, r"p\.json: field 'seed': expected a non-negative integer, got -1$"),
    ({"inputs": None}, False, r"^warning: .*s\.yaml: field 'instances\[0\]\.placement': p\.json records no inputs: "
                              r"not checked against the topology and traffic$"),
])
def test_a_placement_file_s_seed_and_missing_inputs(tmp_path, run_cli, edit, any_inputs, needle):
    """Its seed is checked with or without --any-inputs (no input mismatch); a file recording no inputs (written
    before they were recorded) is used with a warning, as -p does."""
    cfg = _placement_sweep(tmp_path, run_cli, "topology: paper003, traffic: 'ring:np=8,bytes=2MB'")
    doc = json.loads((tmp_path / "p.json").read_text())
    (tmp_path / "p.json").write_text(json.dumps({**doc, **edit}))
    code, out, err = run_cli("sweep", cfg, "--workers", "1", "--threads", *(["--any-inputs"] if any_inputs else []))
    assert code == (2 if "seed" in edit else 0), err
    assert re.search(needle, err.strip(), re.M), err
