"""Claims across seeds (experiments/_common.py): the verdict over seeds, the measured values' mean and
range, which cells the claims read, and running only the seed-dependent ones at further seeds."""

import pytest

from experiments import _common
from experiments._common import (Measured, cells_read, claims_markdown, claims_over_seeds, measured, rows_at_seeds,
                                 verdict)


@pytest.mark.parametrize("oks, seeds, text", [
    ([True] * 5, None, "holds"),
    ([True, True, False, True, True], None, "holds at 4 of 5 seeds (not at seed 2)"),
    ([True, False, False], [4, 5, 6], "holds at 1 of 3 seeds (not at seeds 5, 6)"),
    ([False] * 5, None, "fails"),
    ([None, None], None, "n/a"),
    ([True, None, True], None, "holds (run at seeds 0, 2 only)"),      # a seed not run is named, not counted
    ([None, False, True], None, "holds at 1 of 2 seeds run (not at seed 1)"),
    ([False, None, None], [3, 4, 5], "fails (run at seed 3 only)"),
])
def test_verdict_over_seeds(oks, seeds, text):
    assert verdict(oks, seeds) == text


@pytest.mark.parametrize("values, text", [
    ([(0.3125, 0.38)] * 3, "+31.2% vs FT +38.0%"),
    ([(0.312, 0.38), (0.375, 0.38), (0.375, 0.38)], "+35.4% [+31.2%, +37.5%] vs FT +38.0%"),
    ([(0.188, 0.182), (0.188, 0.190)], "+18.8% vs FT +18.6% [+18.2%, +19.0%]"),
    ([(0.18801, 0.182), (0.18799, 0.182)], "+18.8% vs FT +18.2%"),     # equal as shown: shown once
])
def test_measured_numbers_that_differ_show_mean_and_range(values, text):
    assert Measured.over([measured("{:+.1%} vs FT {:+.1%}", *v) for v in values]) == text


def test_measured_texts_of_another_shape_are_grouped_by_seed():
    ms = [measured("{} at {}", "SP", 24), measured("{} never (best {:.2f})", "SP", 1.15),
          measured("{} at {}", "SP", 24), measured("{} at {}", "SP", 48)]
    assert Measured.over(ms, [0, 1, 2, 3]) == "seeds 0, 2, 3: SP at 32 [24, 48]; seed 1: SP never (best 1.15)"
    # words that differ make another group
    assert Measured.over([measured("{} only", "SP"), measured("{} only", "CP")], [5, 6]) == \
        "seed 5: SP only; seed 6: CP only"


def _claims(rows, models):
    """Two claims on rows of (app, seed-dependent or not): a gain above zero, and cg faster than lu."""
    def get(app, model):
        return next((r["ours"] for r in rows if r["app"] == app and r["model"] == model), None)

    def measure(check, m):
        try:
            return check(m)
        except TypeError:          # a cell not run (None in arithmetic), as the scripts' claims do
            return None, ""

    out = []
    for text, check in (("cg gains", lambda m: (get("cg", m) > 0, measured("{:+.0%}", get("cg", m)))),
                        ("cg beats lu", lambda m: (get("cg", m) > get("lu", m),
                                                   measured("{:.2f} vs {:.2f}", get("cg", m), get("lu", m))))):
        out.append({"claim": text, "paper": "", "by_model": {m: measure(check, m) for m in models}})
    return out


CELLS = [{"model": m, "app": a} for m in ("paper", "pipelined") for a in ("cg", "lu", "mg")]
VALUE = {  # (model, app, seed) -> value
    **{("paper", "cg", s): v for s, v in enumerate((0.3, 0.2, -0.1, 0.4))},
    **{("paper", "lu", s): 0.1 for s in range(4)},
    **{("pipelined", a, s): {"cg": 0.5, "lu": 0.4, "mg": 9.0}[a] for a in ("cg", "lu", "mg") for s in range(4)},
    **{("paper", "mg", s): 9.0 for s in range(4)},
}


def _tidy(results):
    return [{"model": c["model"], "app": c["app"], "metric": "gain", "ours": r["v"]} for c, r, _ in results]


def test_cells_read_are_the_rows_whose_values_a_claim_uses():
    rows = _tidy([(c, {"v": VALUE[(c["model"], c["app"], 0)]}, 1) for c in CELLS])
    assert cells_read(_claims, rows, ["paper", "pipelined"], ("model", "app")) == {
        ("paper", "cg"), ("paper", "lu"), ("pipelined", "cg"), ("pipelined", "lu")}


def test_only_the_seed_dependent_cells_the_claims_read_run_at_further_seeds():
    ran = []

    def compute(cell, seed):
        ran.append((cell["model"], cell["app"], seed))
        return {"v": VALUE[(cell["model"], cell["app"], seed)]}

    results = [(c, {"v": VALUE[(c["model"], c["app"], 0)]}, 1) for c in CELLS]
    by_seed, extra = rows_at_seeds(results, [0, 1, 2, 3], tidy=_tidy, claims_fn=_claims, models=["paper", "pipelined"],
                                   cell_keys=("model", "app"), seed_dependent=lambda c: c["model"] == "paper",
                                   baseline_of=lambda c: None, compute=compute, log=lambda *_: None)
    # mg is never read; max-min cells do not depend on the seed
    assert sorted(ran) == sorted((m, a, s) for m, a in (("paper", "cg"), ("paper", "lu")) for s in (1, 2, 3))
    assert sorted(by_seed) == [0, 1, 2, 3] and all(r["seed"] == s for s, rows in by_seed.items() for r in rows)
    assert len(extra) == 6 and {s for _, s, _, _ in extra} == {1, 2, 3}
    claims = claims_over_seeds(_claims, by_seed, ["paper", "pipelined"])
    md = claims_markdown(claims, ["paper", "pipelined"])
    assert "| cg gains |  | holds at 3 of 4 seeds (not at seed 2) (+20% [-10%, +40%]) | holds (+50%) |" in md
    assert ("| cg beats lu |  | holds at 3 of 4 seeds (not at seed 2) (0.20 [-0.10, 0.40] vs 0.10) "
            "| holds (0.50 vs 0.40) |") in md


def test_cells_left_to_the_first_seed_have_no_row_at_further_seeds():
    """``further`` false: a seed-dependent cell runs at the first seed only, and the claims reading it say so."""
    ran = []

    def compute(cell, seed):
        ran.append((cell["model"], cell["app"], seed))
        return {"v": VALUE[(cell["model"], cell["app"], seed)]}

    results = [(c, {"v": VALUE[(c["model"], c["app"], 0)]}, 1) for c in CELLS]
    models = ["paper", "pipelined"]
    by_seed, extra = rows_at_seeds(results, [0, 1, 2], tidy=_tidy, claims_fn=_claims, models=models,
                                   cell_keys=("model", "app"), seed_dependent=lambda c: c["model"] == "paper",
                                   baseline_of=lambda c: None, compute=compute, further=lambda c: c["app"] != "cg",
                                   log=lambda *_: None)
    assert sorted(ran) == [("paper", "lu", 1), ("paper", "lu", 2)]
    assert [r["ours"] for r in by_seed[1] if (r["model"], r["app"]) == ("paper", "cg")] == [_common.NOT_RUN]
    assert [r for r in by_seed[1] if (r["model"], r["app"]) == ("pipelined", "cg")]   # seed-independent: kept
    md = claims_markdown(claims_over_seeds(_claims, by_seed, models), models)
    assert "| cg gains |  | holds (run at seed 0 only) (+30%) | holds (+50%) |" in md


def test_the_reference_cell_of_a_relative_value_runs_at_the_seed_too():
    ran = []
    cells = [{"model": "paper", "app": "cg"}, {"model": "paper", "app": "eps"}]

    def tidy(results):
        base = next(r["v"] for c, r, _ in results if c["app"] == "eps")
        return [{"model": c["model"], "app": c["app"], "ours": r["v"] / base} for c, r, _ in results]

    def claims(rows, models):
        cg = next(r for r in rows if r["app"] == "cg")["ours"]
        return [{"claim": "cg", "by_model": {m: (cg < 1, measured("{:.2f}", cg)) for m in models}}]

    def compute(cell, seed):
        ran.append((cell["app"], seed))
        return {"v": {"cg": 1.0, "eps": 2.0}[cell["app"]] + seed}

    results = [(c, {"v": {"cg": 1.0, "eps": 2.0}[c["app"]]}, 1) for c in cells]
    by_seed, _ = rows_at_seeds(results, [0, 1], tidy=tidy, claims_fn=claims, models=["paper"], cell_keys=("app",),
                               seed_dependent=lambda c: True,
                               baseline_of=lambda c: {"app": "eps"} if c["app"] != "eps" else None, compute=compute,
                               log=lambda *_: None)
    assert sorted(ran) == [("cg", 1), ("eps", 1)]
    assert [r["ours"] for r in by_seed[1] if r["app"] == "cg"] == [pytest.approx(2.0 / 3.0)]


def test_a_claim_that_reads_other_cells_at_another_seed_gets_them():
    """A claim that stops at the first cell that satisfies it reads further cells at a seed where it does not."""
    cells = [{"model": "paper", "n": n} for n in (1, 2, 3)]
    ran = []
    vals = {(1, 0): 0.5, (2, 0): 2.0, (3, 0): 3.0, (1, 1): 5.0, (2, 1): 0.5, (3, 1): 3.0}

    def tidy(results):
        return [{"model": "paper", "n": c["n"], "ours": r["v"]} for c, r, _ in results]

    def claims(rows, models):
        first = next((r["n"] for r in rows if r["ours"] < 1), None)
        return [{"claim": "reached", "by_model": {m: (first is not None, measured("at {}", first)) for m in models}}]

    def compute(cell, seed):
        ran.append((cell["n"], seed))
        return {"v": vals[(cell["n"], seed)]}

    results = [(c, {"v": vals[(c["n"], 0)]}, 1) for c in cells]
    by_seed, _ = rows_at_seeds(results, [0, 1], tidy=tidy, claims_fn=claims, models=["paper"], cell_keys=("n",),
                               seed_dependent=lambda c: True, baseline_of=lambda c: None, compute=compute,
                               log=lambda *_: None)
    # seed 0 read n=1 only; at seed 1 n=1 is no longer below 1, so the claim reads on and n=2, 3 run too
    assert ran == [(1, 1), (2, 1), (3, 1)]
    assert claims(by_seed[1], ["paper"])[0]["by_model"]["paper"][1].values == (2,)


def test_seeded_cache_files_keep_the_first_seeds_name():
    from pathlib import Path

    p = Path("cache/paper_cg_sequential_EPS_only_0_none.json")
    assert _common.seeded_file(p, 0) == p
    assert _common.seeded_file(p, 2).name == "paper_cg_sequential_EPS_only_0_none_s2.json"


def test_the_paper_model_of_seed_0_is_todays():
    assert _common.model_of("paper", 0).to_dict() == _common.model_of("paper").to_dict()
    assert "paper_tie_seed" not in _common.model_of("paper").to_dict()
    assert _common.model_of("paper", 3).to_dict()["paper_tie_seed"] == 3
    assert _common.model_of("pipelined", 3) == _common.model_of("pipelined")    # max-min has no ties to break


def test_verify_checks_seed_cells_too(tmp_path):
    """A cell computed at a further seed goes through the cache like every other (its own file); --verify
    recomputes it and names a difference."""
    key = {"cell": "x", "seed": 1}
    path = _common.seeded_file(tmp_path / "x.json", 1)
    _common.cached_run(key, path, lambda: {"makespan_s": 1.0}, log=lambda *_: None)
    assert path.name == "x_s1.json"
    v = _common.Verification()
    _common.cached_run(key, path, lambda: {"makespan_s": 1.5}, log=lambda *_: None, describe="x seed 1", verify=v)
    assert v.exit_code() == 1 and v.mismatches[0]["cell"] == "x seed 1"


def test_a_claim_over_every_cell_is_not_measured_where_one_was_not_run():
    """A claim that takes whatever cells exist (skipping missing ones) must not be checked on a subset at a seed
    where one of its cells was not run: the not-run value makes it unmeasured there, not smaller."""
    def claims(rows, models):
        def mean(m):
            vs = [r["ours"] for r in rows if r["model"] == m and r["ours"] is not None]
            return sum(vs) / len(vs) > 1.0, measured("{:.2f}", sum(vs) / len(vs))

        def measure(m):
            try:
                return mean(m)
            except TypeError:
                return None, ""
        return [{"claim": "mean above 1", "by_model": {m: measure(m) for m in models}}]

    results = [(c, {"v": VALUE[(c["model"], c["app"], 0)]}, 1) for c in CELLS]
    by_seed, _ = rows_at_seeds(results, [0, 1], tidy=_tidy, claims_fn=claims, models=["paper"],
                               cell_keys=("model", "app"), seed_dependent=lambda c: True, baseline_of=lambda c: None,
                               compute=lambda c, s: {"v": VALUE[(c["model"], c["app"], s)]},
                               further=lambda c: c["app"] != "mg", log=lambda *_: None)
    over = claims_over_seeds(claims, by_seed, ["paper"])
    assert [ok for ok, _ in over[0]["by_model"]["paper"]] == [True, None]
    assert "holds (run at seed 0 only)" in claims_markdown(over, ["paper"])
