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

__all__ = ["ROOT", "RESULTS", "MODELS", "MODEL_NAMES", "model_of", "parse_models", "cached_run", "result_difference",
           "Verification", "add_verify_option", "verification_of", "write_csv", "used_circuits", "claims_markdown",
           "verdict", "Inputs", "placement_on"]

MODEL_NAMES = {"paper": "paper model", "pipelined": "max-min, pipelined relays",
               "store-and-forward": "max-min, store-and-forward relays"}
MODELS = tuple(MODEL_NAMES)


def model_of(name: str):
    """The :class:`topoplan.sim.simmodel.SimModel` of one of :data:`MODELS`."""
    from topoplan.core.errors import TopoplanError
    from topoplan.sim.simmodel import SimModel

    if name == "paper":
        return SimModel(engine="paper", relay="store-and-forward")
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


def verdict(ok) -> str:
    """yes / no / n/a for a claim check (None: not measured)."""
    return "n/a" if ok is None else ("yes" if ok else "no")


def claims_markdown(claims: list[dict], models) -> str:
    """One row per claim: the claim, the paper's value, then per model ``holds (our value)``.

    Each claim is ``{"claim": text, "paper": value text, "by_model": {model: (ok, value text)}}``.
    """
    head = "| claim | paper | " + " | ".join(MODEL_NAMES[m] for m in models) + " |"
    lines = [head, "|" + "---|" * (2 + len(models))]
    for c in claims:
        cells = []
        for m in models:
            ok, val = c["by_model"].get(m, (None, ""))
            cells.append(f"{verdict(ok)}" + (f" ({val})" if val else ""))
        lines.append(f"| {c['claim']} | {c.get('paper', '')} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


class Inputs:
    """The trace and traffic of one application (a generator spec or file), loaded once, on demand, with
    the placements computed for it (cached by their arguments)."""

    def __init__(self, spec: str, seed: int = 0):
        self.spec, self.seed = spec, seed
        self._trace = self._traffic = None
        self._pl: dict = {}

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
