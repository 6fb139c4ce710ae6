"""What the experiment scripts share: paths, the three network models every reproduction runs under, the
per-cell result cache, CSV output and the claim table.

The scripts are run as modules from the repository root (``python -m experiments.paper003``); they are
not installed with the package.

The three models (:data:`MODELS`) answer "which model reproduces the papers, and which do we recommend":

``paper``
    the papers' own simulator (000 §4.1, 003 §4.1.4): per-link alpha + n/beta, message-level
    store-and-forward at every switch and relay, first come first served per link;
``pipelined``
    our default: max-min fair sharing, packet-pipelined switches, relays forwarding 64 KiB chunks;
``store-and-forward``
    max-min fair sharing with relays that receive whole messages before forwarding them (the
    papers' relay rule inside our flow model; the model of this project before issue 16).
"""

from __future__ import annotations

import csv
import io
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results"

__all__ = ["ROOT", "RESULTS", "MODELS", "MODEL_NAMES", "SEEDS", "model_of", "parse_models", "cached_run",
           "result_difference", "Verification", "add_verify_option", "add_seeds_option", "paper_seed_apps_of",
           "further_of", "not_run_note", "seeds_of", "seeded_file", "verification_of", "write_csv", "used_circuits",
           "Measured", "measured", "claims_over_seeds", "claims_markdown", "seeds_note", "cells_read", "rows_at_seeds",
           "with_seed", "seed_rows", "NOT_RUN", "PAPER_SEED_APPS", "verdict", "Inputs", "placement_on"]

MODEL_NAMES = {"paper": "paper model", "pipelined": "max-min, pipelined relays",
               "store-and-forward": "max-min, store-and-forward relays"}
MODELS = tuple(MODEL_NAMES)


#: seeds every claim is checked at (``--seeds``): the planner's (greedy's random picks, METIS, anneal, solver
#: seeds), the traffic's where it is random, and the paper model's order of simultaneous arrivals
SEEDS = 5


def model_of(name: str, seed: int = 0):
    """The :class:`topoplan.sim.simmodel.SimModel` of one of :data:`MODELS`; at ``seed`` the paper model
    serves simultaneous arrivals in the order drawn from it (``paper_tie_seed``; seed 0: injection order)."""
    from topoplan.core.errors import TopoplanError
    from topoplan.sim.simmodel import SimModel

    if name == "paper":
        return SimModel(engine="paper", relay="store-and-forward", paper_tie_seed=seed)
    if name == "pipelined":
        return SimModel()
    if name == "store-and-forward":
        return SimModel(relay="store-and-forward")
    raise TopoplanError(f"--models: unknown model {name!r} (models: {', '.join(MODELS)})")


def parse_models(text: str | None) -> tuple[str, ...]:
    """``--models paper,pipelined`` -> the names, checked; None: all three."""
    if not text:
        return MODELS
    names = tuple(m.strip() for m in text.split(",") if m.strip())
    for m in names:
        model_of(m)
    return names


#: result fields that measure this machine, not the model: left out when a cached cell is verified
WALL_FIELDS = frozenset({"wall_s", "solve_s", "sim_wall_s"})
#: solver statuses whose plan depends on how far the solver got in its time limit, so on the machine's load
LOAD_DEPENDENT = frozenset({"timeout", "feasible"})
VERIFY_REL = 1e-9  # relative tolerance of "the recomputed value equals the stored one"


def cached_run(key: dict, path: Path | None, compute: Callable[[], dict], *, log=print, describe: str = "",
               verify: "Verification | None" = None) -> dict:
    """``compute()`` through a JSON cache file: reused when the stored key equals ``key`` (every parameter
    that changes the result, the model included), recomputed otherwise; the cell's wall time is added.

    With ``verify`` (a :class:`Verification`) the cell is recomputed even when cached and nothing is
    written: a cell whose recomputed result differs from the stored one (see :func:`result_difference`),
    or that has no stored result, is recorded in it. The cache key holds the parameters, not the code, so
    this is how committed results are checked against the code that should reproduce them."""
    from topoplan.core.io import write_json

    stored = None
    if path is not None and path.is_file():
        try:
            doc = json.loads(path.read_text())
            if doc.get("key") == json.loads(json.dumps(key)):
                stored = doc["result"]
        except (OSError, ValueError, KeyError, AttributeError):
            pass  # a broken cache file is recomputed
    if stored is not None and verify is None:
        return stored
    t0 = time.perf_counter()
    res = compute()
    res["wall_s"] = time.perf_counter() - t0
    if describe:
        ms = f"{res['makespan_s'] * 1e3:9.2f} ms" if res.get("makespan_s") is not None else ""
        log(f"  {describe} {ms}  ({res['wall_s']:.1f} s)")
    if verify is not None:
        verify.check(describe or str(path), stored, json.loads(json.dumps(res)))
        return res
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, {"key": key, "result": res})
    return res


def result_difference(stored: dict, new: dict, rel: float = VERIFY_REL) -> list[str]:
    """The fields in which two results of one cell differ (``"field: stored -> new"``), wall times
    (:data:`WALL_FIELDS`) left out; numbers are equal within ``rel`` (relative, 1e-300 absolute)."""
    out = []
    for k in sorted(set(stored) | set(new)):
        if k in WALL_FIELDS:
            continue
        a, b = stored.get(k), new.get(k)
        num = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b))
        if (abs(a - b) > rel * max(abs(a), abs(b)) + 1e-300) if num else a != b:
            out.append(f"{k}: {a!r} -> {b!r}")
    return out


@dataclass
class Verification:
    """What ``--verify`` found: cells recomputed, and those whose result differs from the stored one.

    A difference in a cell whose solver stopped at its time limit (status in :data:`LOAD_DEPENDENT` in the
    stored or the recomputed result) is listed but does not fail: that plan depends on the machine's load.

    Examples
    --------
    >>> v = Verification()
    >>> v.check("cell a", {"makespan_s": 1.0, "wall_s": 3.0}, {"makespan_s": 1.0 + 1e-12, "wall_s": 9.0})
    >>> v.check("cell b", {"makespan_s": 1.0, "status": "optimal"}, {"makespan_s": 1.1, "status": "optimal"})
    >>> v.checked, [m["cell"] for m in v.mismatches], v.exit_code()
    (2, ['cell b'], 1)
    """

    checked: int = 0
    mismatches: list = field(default_factory=list)

    def check(self, cell: str, stored: dict | None, new: dict) -> None:
        """Compare one recomputed result with the stored one (None: not in the cache)."""
        self.checked += 1
        diff = ["no stored result"] if stored is None else result_difference(stored, new)
        if diff:
            load = any(r.get("status") in LOAD_DEPENDENT for r in (stored or {}, new))
            self.mismatches.append({"cell": cell.strip(), "differences": diff, "load_dependent": load})

    def exit_code(self) -> int:
        """1 when a cell that no time limit cut differs, else 0."""
        return int(any(not m["load_dependent"] for m in self.mismatches))

    def report(self, log=print) -> int:
        """Print every difference and a summary line; returns :meth:`exit_code`."""
        for m in self.mismatches:
            tag = "load-dependent (time limit)" if m["load_dependent"] else "DIFFERS"
            log(f"{tag}: {m['cell']}: {'; '.join(m['differences'])}")
        hard = sum(not m["load_dependent"] for m in self.mismatches)
        log(f"verify: {self.checked} cells recomputed, {hard} differ from the cache, "
            f"{len(self.mismatches) - hard} more differ where a solver stopped at its time limit")
        return self.exit_code()


def add_verify_option(ap) -> None:
    """The paper scripts' ``--verify`` flag on their argument parser ``ap``."""
    ap.add_argument("--verify", action="store_true",
                    help="recompute every selected cell and compare it with the cache; writes nothing, exits 1 "
                         "when a cell differs (cells a solver time limit cut are listed, not failed)")


#: the applications whose paper-model cells run at every seed (``--paper-seed-apps``); the paper model takes a
#: minute or more of one core for one NPB kernel's cell (an hour or more per seed and script), so those run at
#: the first seed only unless asked
PAPER_SEED_APPS = ("neighbor",)


def add_seeds_option(ap) -> None:
    """The paper scripts' ``--seeds`` and ``--paper-seed-apps`` options on their argument parser ``ap``."""
    ap.add_argument("--seeds", type=int, default=SEEDS,
                    help=f"check every claim at this many seeds, --seed and the next ones (default {SEEDS}): the "
                         "cells the claims read whose result depends on a seed are run at each")
    ap.add_argument("--paper-seed-apps", default=",".join(PAPER_SEED_APPS),
                    help="applications whose paper-model cells run at every seed, comma-separated, or 'all' (default "
                         "%(default)s): the paper model's other cells run at the first seed only (a minute or more "
                         "each)")


def paper_seed_apps_of(args, apps) -> tuple[str, ...]:
    """``--paper-seed-apps`` as a tuple (``all``: ``apps``)."""
    return tuple(apps) if args.paper_seed_apps == "all" else tuple(args.paper_seed_apps.split(","))


def further_of(paper_seed_apps):
    """The ``further`` predicate of :func:`rows_at_seeds`: every cell but the paper model's of applications
    outside ``paper_seed_apps``.

    Examples
    --------
    >>> f = further_of(("neighbor",))
    >>> [f({"model": m, "app": a}) for m, a in (("paper", "cg"), ("paper", "neighbor"), ("pipelined", "cg"))]
    [False, True, True]
    """
    return lambda cell: cell["model"] != "paper" or cell["app"] in paper_seed_apps


def not_run_note(apps, paper_seed_apps, names: dict, models, seed: int) -> str:
    """The sentence of :func:`seeds_note` that names the applications whose paper-model cells ran at ``seed``
    (the first) only; empty when there are none."""
    left = [names[a] for a in apps if a not in paper_seed_apps]
    if "paper" not in models or not left:
        return ""
    return (f"Under the paper model the cells of {', '.join(left)} ran at seed {seed} only: it takes a minute or more "
            "of one core for each, an hour or more per seed (`--paper-seed-apps all` runs them at every seed).")


def seeds_of(ap, args) -> tuple[int, ...]:
    """``(seed, seed + 1, ...)``, ``--seeds`` of them; fewer than 1 is a usage error (``ap.error``)."""
    if args.seeds < 1:
        ap.error(f"--seeds: at least 1, got {args.seeds}")
    if args.seed < 0:
        ap.error(f"--seed: at least 0, got {args.seed}")
    return tuple(range(args.seed, args.seed + args.seeds))


def seeded_file(path: Path, seed: int) -> Path:
    """The cache file of a cell at ``seed``: the seed-0 name (the committed cells keep theirs), ``_s<seed>``
    before the suffix otherwise.

    Examples
    --------
    >>> seeded_file(Path("c/paper_cg_EPS.json"), 0).name, seeded_file(Path("c/paper_cg_EPS.json"), 3).name
    ('paper_cg_EPS.json', 'paper_cg_EPS_s3.json')
    """
    return path if seed == 0 else path.with_name(f"{path.stem}_s{seed}{path.suffix}")


def verification_of(ap, args) -> Verification | None:
    """A :class:`Verification` when ``--verify`` was given, else None; ``--verify`` with ``--no-cache`` is a
    usage error (``ap.error``: one line, exit 2)."""
    if args.verify and args.no_cache:
        ap.error("--verify compares each cell with the cache; it cannot be combined with --no-cache")
    return Verification() if args.verify else None


def write_csv(rows, path: Path, columns) -> None:
    """Rows (dicts) as a CSV with exactly ``columns``, written atomically."""
    from topoplan.core.io import atomic_write

    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(columns), extrasaction="ignore")
    w.writeheader()
    w.writerows(rows)
    atomic_write(path, buf.getvalue())


def used_circuits(prob, plan: dict) -> int:
    """Circuits that carry large messages when the plan's forwarding tables route the traffic."""
    from topoplan.problems.circuits.bound import evaluate
    from topoplan.plans.circuits import array_from_tables

    circ = [tuple(c) for c in plan["circuits"]]
    nh = array_from_tables(plan["forwarding"], prob.n_nodes, prob.n_switches)
    ev = evaluate(prob, circ, nh)
    per_circuit = ev.loads_B[prob.n_fixed_links():].reshape(-1, 2).sum(axis=1)
    return int((per_circuit > 0).sum())


def verdict(oks, seeds=None) -> str:
    """The verdict of a claim over seeds (each True, False or None: not run at that seed; ``seeds`` names
    them, default 0, 1, ...): ``holds`` only when it holds at every seed, ``holds at k of n seeds`` otherwise,
    naming the seeds where it does not (``fails`` when it holds at none). When it was not run at some seeds
    the verdict says at which seeds it was.

    Examples
    --------
    >>> verdict([True] * 5), verdict([True, False, True, True, True]), verdict([False, False]), verdict([None])
    ('holds', 'holds at 4 of 5 seeds (not at seed 1)', 'fails', 'n/a')
    >>> verdict([True, False, False], seeds=[3, 4, 5]), verdict(True)
    ('holds at 1 of 3 seeds (not at seeds 4, 5)', 'holds')
    >>> verdict([True, None, None]), verdict([True, False, None])
    ('holds (run at seed 0 only)', 'holds at 1 of 2 seeds run (not at seed 1)')
    """
    if not isinstance(oks, (list, tuple)):
        oks = [oks]
    seeds = list(range(len(oks)) if seeds is None else seeds)
    seen = [(s, ok) for s, ok in zip(seeds, oks) if ok is not None]
    if not seen:
        return "n/a"
    k, n = sum(bool(ok) for _, ok in seen), len(seen)
    partial = n < len(oks)
    if k in (0, n):
        word = "holds" if k == n else "fails"
        if not partial:
            return word
        ran = [str(s) for s, _ in seen]
        return f"{word} (run at seed{'s' if n > 1 else ''} {', '.join(ran)} only)"
    bad = [str(s) for s, ok in seen if not ok]
    return (f"holds at {k} of {n} seeds{' run' if partial else ''} "
            f"(not at seed{'s' if len(bad) > 1 else ''} {', '.join(bad)})")


@dataclass(frozen=True)
class Measured:
    """What a claim measured: a :meth:`str.format` template and its values (numbers or words), so the values
    of several seeds can be summarized field by field (:meth:`over`).

    Examples
    --------
    >>> str(Measured("{:+.0%} vs FT {:+.0%}", (0.312, 0.38)))
    '+31% vs FT +38%'
    >>> Measured.over([Measured("{:+.1%} vs FT {:+.1%}", (v, 0.38)) for v in (0.312, 0.375, 0.375)])
    '+35.4% [+31.2%, +37.5%] vs FT +38.0%'
    >>> Measured.over([Measured("{} at {}", ("SP", 24)), Measured("{} never", ("SP",)),
    ...                Measured("{} at {}", ("SP", 24))])
    'seeds 0, 2: SP at 24; seed 1: SP never'
    """

    template: str
    values: tuple = ()

    def __str__(self) -> str:
        return self.template.format(*self.values)

    def shape(self):
        """What must agree for two measures to be summarized field by field: the template and the words."""
        return self.template, tuple(v if isinstance(v, str) else None for v in self.values)

    @staticmethod
    def over(measures, seeds=None) -> str:
        """Several seeds' measures as one text: every number that differs as ``mean [min, max]`` (formatted
        like the number), the seeds grouped where their texts differ in shape (:meth:`shape`)."""
        measures = [m if isinstance(m, Measured) else Measured("{}", (str(m),)) for m in measures]
        seeds = list(range(len(measures))) if seeds is None else list(seeds)
        groups: dict = {}
        for s, m in zip(seeds, measures):
            groups.setdefault(m.shape(), []).append((s, m))
        parts = []
        for (template, _), members in groups.items():
            fields = []
            for j, v in enumerate(members[0][1].values):
                vals = [m.values[j] for _, m in members]
                if isinstance(v, str) or all(x == vals[0] for x in vals):
                    fields.append(_Verbatim(v))
                else:
                    fields.append(_Spread(vals))
            text = template.format(*fields)
            if len(groups) > 1:
                ss = [str(s) for s, _ in members]
                text = f"seed{'s' if len(ss) > 1 else ''} {', '.join(ss)}: {text}"
            parts.append(text)
        return "; ".join(parts)


class _Verbatim:
    """A field formatted as it is (the same at every seed)."""

    def __init__(self, v):
        self.v = v

    def __format__(self, spec):
        return format(self.v, spec)


class _Spread:
    """A field that differs between seeds: ``mean [min, max]``, each formatted with the field's spec."""

    def __init__(self, vals):
        self.vals = list(vals)

    def __format__(self, spec):
        mean = sum(self.vals) / len(self.vals)
        lo, hi = format(min(self.vals), spec), format(max(self.vals), spec)
        return lo if lo == hi else f"{format(mean, spec or 'g')} [{lo}, {hi}]"   # equal as shown: shown once


def measured(template: str, *values) -> Measured:
    """``Measured(template, values)``: what a claim check returns beside its verdict."""
    return Measured(template, tuple(values))


def claims_over_seeds(claims_fn, rows_by_seed: dict, models) -> list[dict]:
    """The claims of ``claims_fn(rows, models)`` (a list of ``{"claim", "paper", "by_model": {model: (ok,
    value)}}``) at every seed of ``rows_by_seed`` (``{seed: rows}``), joined claim by claim:
    ``{"claim", "paper", "seeds", "by_model": {model: [(ok, value) per seed]}}``."""
    seeds = sorted(rows_by_seed)
    per_seed = [claims_fn(rows_by_seed[s], models) for s in seeds]
    out = []
    for i, c in enumerate(per_seed[0]):
        by = {m: [ps[i]["by_model"].get(m, (None, "")) for ps in per_seed] for m in models}
        out.append({"claim": c["claim"], "paper": c.get("paper", ""), "seeds": seeds, "by_model": by})
    return out


def claims_markdown(claims: list[dict], models) -> str:
    """One row per claim: the claim, the paper's value, then per model the verdict over the seeds
    (:func:`verdict`) and our value (:meth:`Measured.over`: ``mean [min, max]`` where the seeds differ).

    Each claim is ``{"claim": text, "paper": value text, "seeds": [...], "by_model": {model: [(ok, value)
    per seed]}}`` (:func:`claims_over_seeds`); a single ``(ok, value)`` stands for one seed.
    """
    head = "| claim | paper | " + " | ".join(MODEL_NAMES[m] for m in models) + " |"
    lines = [head, "|" + "---|" * (2 + len(models))]
    for c in claims:
        cells = []
        for m in models:
            per = c["by_model"].get(m, [(None, "")])
            if isinstance(per, tuple):
                per = [per]
            seeds = c.get("seeds") or list(range(len(per)))
            measured_at = [(s, v) for s, (ok, v) in zip(seeds, per) if ok is not None and v != ""]
            val = Measured.over([v for _, v in measured_at], [s for s, _ in measured_at]) if measured_at else ""
            cells.append(verdict([ok for ok, _ in per], seeds) + (f" ({val})" if val else ""))
        lines.append(f"| {c['claim']} | {c.get('paper', '')} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def seeds_note(seeds, choices: str, not_run: str = "") -> str:
    """The paragraph above a claim table that says what its seeds are (``choices``: the planner's random
    choices in this experiment; ``not_run``: a sentence naming the seed-dependent cells run at the first seed
    only) and how to read it."""
    seeds = list(seeds)
    if len(seeds) == 1:
        return f"Checked at seed {seeds[0]} only (`--seeds 1`): a verdict may change at other seeds."
    if not_run:
        not_run = " " + not_run.strip() + " A claim that reads them says at which seeds it was run."
    return (f"Every claim is checked at {len(seeds)} seeds ({', '.join(map(str, seeds))}). A seed sets every random "
            f"choice a cell makes: the planner's ({choices}) and, under the paper model, the order in which "
            "messages that reach a link at the same time are served (`paper_tie_seed`; seed 0 serves them in the "
            "order they were injected). A cell that makes no random choice (no METIS, no random pick, no solver, "
            "under max-min) is the same at every seed and runs once. A claim \"holds\" only when it holds at "
            "every seed, otherwise it \"holds at k of n seeds\" (naming the others); our values in brackets, "
            "`mean [min, max]` over the seeds where they differ." + not_run)


class _NotRun:
    """The value of a cell not run at a seed: arithmetic, comparison, ``float`` and formatting with a spec
    raise TypeError, so no claim can use it by mistake.

    Examples
    --------
    >>> NOT_RUN
    not run
    >>> NOT_RUN > 0
    Traceback (most recent call last):
    ...
    TypeError: '>' not supported between instances of '_NotRun' and 'int'
    """

    __slots__ = ()

    def __repr__(self):
        return "not run"

    def __float__(self):
        raise TypeError("a cell not run at this seed")


#: the measured value (``ours``) of a cell at a seed it was not run at (see :func:`rows_at_seeds`)
NOT_RUN = _NotRun()


def rows_at_seeds(results: list, seeds, *, tidy, claims_fn, models, cell_keys, seed_dependent, baseline_of,
                  compute, further=None, log=print) -> tuple[dict, list]:
    """The rows the claims are checked on at every seed, running only what they need.

    ``results`` holds ``(cell, result, iters)`` at the first seed, ``tidy(results)`` makes rows of them and
    ``claims_fn(rows, models)`` reads the rows' values. At every further seed the cells whose values the
    claims read (:func:`cells_read`, identified by ``cell_keys``), and the reference cells their values are
    relative to (``baseline_of(cell)``: a dict of the fields that identify it, or None), are run with
    ``compute(cell, seed)`` where ``seed_dependent(cell)``; every other cell keeps the first seed's result,
    which it would repeat. Checked again until the claims read nothing new (a claim may read other cells
    at another seed). A seed-dependent cell for which ``further(cell)`` is false (default: none) is not run at
    further seeds: its rows there hold :data:`NOT_RUN`, so a claim that reads it is not measured at those seeds
    (its check raises TypeError, which the scripts' claims take for a missing cell).

    Returns ``({seed: rows}, [(cell, seed, result, iters) of every cell run at a further seed])``.
    """
    seeds = list(seeds)
    ident = {id(c): tuple(c[k] for k in cell_keys) for c, _, _ in results}
    by_ident = {ident[id(c)]: c for c, _, _ in results}

    def base_of(c):
        match = baseline_of(c)
        if match is None:
            return None
        for d in by_ident.values():
            if all(d.get(k) == v for k, v in match.items()):
                return tuple(d[k] for k in cell_keys)
        return None

    skipped = {k for k, c in by_ident.items() if further is not None and seed_dependent(c) and not further(c)}
    rows_by_seed = {seeds[0]: with_seed(tidy(results), seeds[0])}
    extra = []
    for seed in seeds[1:]:
        got: dict = {}
        while True:
            now = [(c, got.get(ident[id(c)], r), it) for c, r, it in results]
            rows = with_seed(tidy(now), seed)
            for r in rows:
                if tuple(r.get(k) for k in cell_keys) in skipped:
                    r["ours"] = NOT_RUN
            read = cells_read(claims_fn, rows, models, cell_keys) & set(by_ident)
            read |= {b for b in map(base_of, (by_ident[k] for k in read)) if b is not None}
            need = [k for k in by_ident if k in read and k not in got and k not in skipped
                    and seed_dependent(by_ident[k])]
            if not need:
                break
            for k in need:
                got[k] = compute(by_ident[k], seed)
        rows_by_seed[seed] = rows
        iters = {ident[id(c)]: it for c, _, it in results}
        extra += [(by_ident[k], seed, r, iters[k]) for k, r in got.items()]
        log(f"  seed {seed}: {len(got)} cells the claims read depend on the seed")
    return rows_by_seed, extra


def rows_with_seeds(rows: list[dict], results: list, seeds, *, at_seed, tidy, claims_fn, models, cell_keys,
                    seed_dependent, baseline_of, paper_seed_apps, apps, app_names: dict, write, log=print) -> list[dict]:
    """A paper script's last step: ``rows`` (the first seed's) and, with further seeds, the rows of the cells
    :func:`rows_at_seeds` ran there (``at_seed(cell, seed)`` computes one), written with ``write(rows,
    rows_by_seed, note)`` and the note of what was not run (:func:`not_run_note`). Returns the rows."""
    by_seed, extra = rows_at_seeds(results, seeds, tidy=tidy, claims_fn=claims_fn, models=models, cell_keys=cell_keys,
                                   seed_dependent=seed_dependent, baseline_of=baseline_of, compute=at_seed,
                                   further=further_of(paper_seed_apps), log=log)
    if len(seeds) > 1:
        rows = rows + seed_rows(by_seed, extra, cell_keys)
        write(rows, by_seed, not_run_note(apps, paper_seed_apps, app_names, models, seeds[0]))
    return rows


def with_seed(rows: list[dict], seed: int) -> list[dict]:
    """``rows`` with their ``seed`` field set (in place)."""
    for r in rows:
        r["seed"] = seed
    return rows


def seed_rows(rows_by_seed: dict, extra: list, cell_keys) -> list[dict]:
    """The rows of the cells :func:`rows_at_seeds` ran at a further seed (the others repeat the first seed's)."""
    ran = {(s, tuple(c[k] for k in cell_keys)) for c, s, _, _ in extra}
    return [r for s, rows in rows_by_seed.items() for r in rows if (s, tuple(r[k] for k in cell_keys)) in ran]


class _Tracked(dict):
    """A result row that notes when its measured value (``ours``) is read."""

    read: set

    def __getitem__(self, k):
        if k == "ours":
            _Tracked.read.add(id(self))
        return dict.__getitem__(self, k)


def cells_read(claims_fn, rows, models, cell_keys) -> set:
    """The cells (tuples of ``cell_keys`` values) whose values ``claims_fn(rows, models)`` reads.

    Examples
    --------
    >>> rows = [{"app": a, "metric": "gain", "ours": v} for a, v in (("cg", 0.1), ("lu", 0.2))]
    >>> def claims(rows, models):
    ...     return [r["ours"] > 0 for r in rows if r["app"] == "lu"]
    >>> cells_read(claims, rows, ["paper"], ("app",))
    {('lu',)}
    """
    tracked = [_Tracked(r) for r in rows]
    _Tracked.read = set()
    try:
        claims_fn(tracked, models)
        return {tuple(r[k] for k in cell_keys) for r in tracked if id(r) in _Tracked.read}
    finally:
        _Tracked.read = set()


class Inputs:
    """The trace and traffic of one application (a generator spec or file), loaded once, on demand, with
    the placements computed for it (cached by their arguments)."""

    def __init__(self, spec: str, seed: int = 0):
        self.spec, self.seed = spec, seed
        self._trace = self._traffic = None
        self._pl: dict = {}
        self._seeded: dict = {}

    def at_seed(self, seed: int) -> "Inputs":
        """The same application with placements made at ``seed`` (the trace is loaded once for both)."""
        if seed == self.seed:
            return self
        if seed not in self._seeded:
            other = Inputs(self.spec, seed)
            other._trace, other._traffic = self.traffic()
            self._seeded[seed] = other
        return self._seeded[seed]

    def traffic(self):
        """``(trace, traffic)`` of :func:`topoplan.traffic.sources.load_source`."""
        if self._trace is None:
            from topoplan.traffic.sources import load_source

            self._trace, self._traffic = load_source(self.spec)
        return self._trace, self._traffic

    def placement(self, topo, method: str, **options):
        """``placement_on(topo, traffic, method, ...)``, computed once per (topology, OCS nodes, method, options)."""
        import numpy as np

        ocs = getattr(topo, "ocs", None)
        key = (topo.name, topo.n_nodes, tuple(np.flatnonzero(topo.is_ocs_node()).tolist()) if ocs else (),
               method, tuple(sorted(options.items())))
        if key not in self._pl:
            self._pl[key] = placement_on(topo, self.traffic()[1], method, self.seed, **options)
        return self._pl[key]


def placement_on(topo, traffic, method: str, seed: int = 0, *, anneal_steps: int = 4000,
                 threshold_B: float | None = None, metis_cut_B: float | None = None):
    """The papers' placements with :mod:`topoplan.problems.placement`.

    ``sequential``; ``metis`` (CommPattern: METIS over switches then nodes, the node groups with the most
    inter-switch traffic on the OCS nodes); with ``metis_cut_B`` the first METIS seed (from ``seed`` on)
    whose plain partition (``plain=True``: one METIS attempt per bisection, no refinement) cuts exactly that
    many inter-switch bytes, to reproduce a paper's own METIS run (003's cuts 1,480 MB of Neighbor where the
    optimum, which our METIS finds, is 1,280 MB); ``anneal``
    (congestion objective, a fixed step count so the result is reproducible).
    """
    from topoplan.analysis.switches import analyze
    from topoplan.core.errors import TopoplanError
    from topoplan.core.placement import sequential
    from topoplan.problems.placement import PlacementProblem, solve
    from topoplan.problems.placement.problem import to_placement

    if method == "sequential":
        return sequential(traffic.n_ranks, topo)
    if method == "metis":
        prob = PlacementProblem.build(topo, traffic, threshold_B=threshold_B)
        if metis_cut_B is None:
            return to_placement(solve(prob, method="metis", seed=seed))
        for s in range(seed, seed + 500):
            pl = to_placement(solve(prob, method="metis", seed=s, plain=True))
            if abs(analyze(topo, traffic, pl).inter_switch_bytes - metis_cut_B) < 0.5:
                return pl
        raise TopoplanError(f"no METIS seed in {seed}..{seed + 499} cuts {metis_cut_B:.0f} B")
    if method == "anneal":
        prob = PlacementProblem.build(topo, traffic, objective="congestion", threshold_B=threshold_B)
        return to_placement(solve(prob, method="anneal", seed=seed, max_steps=anneal_steps))
    raise TopoplanError(f"placement {method!r}: sequential, metis or anneal")
