"""Scale of the NPB trace generators (issue 20): rows, time and peak memory from 256 to 65,536 ranks.

    python benchmarks/bench_traffic.py                  # CG, MG, LU, FT, IS class C at 256 ... 16,384 ranks
    python benchmarks/bench_traffic.py --json
    python benchmarks/bench_traffic.py --only cg.C.16384  # the rows whose name is, or starts with, NAME.
    python benchmarks/bench_traffic.py --large          # also the class's iterations, and 65,536 ranks
    python benchmarks/bench_traffic.py --iters 0        # the class's iterations everywhere (0), not 1

Two kinds of row, each run in a fresh interpreter so that its peak memory (``resource.getrusage``: the
maximum resident set of that process, the interpreter and NumPy included, about 60 MB) is its own:

- ``trace``: :func:`topoplan.traffic.npb.npb_trace`, the whole call trace (what ``simulate`` replays).
  ``table_MB`` is the size of its columns (75 bytes a row); ``seconds`` the generation alone.
- ``traffic``: :func:`topoplan.traffic.sources.load_traffic` of the spec ``npb:kernel=K,class=C,np=N``:
  the message groups that planning needs, read from the generator's recording without building the
  trace (each recorded block once, counted as often as it repeats).

Iterations: ``iters=1`` by default (NPB's untimed warm-up plus one timed iteration, the setting of the
figures in issue 20); CG class C at 16,384 ranks is then 57 M rows. Rank counts a kernel refuses (LU needs
blocks at least 3 points wide: up to 2,916 ranks in class C; IS allows 1-1,024) are listed with the reason.
Each row's process may use at most ``--max-memory-gb`` of address space (9 GB), so a row too large for
the machine fails alone; a trace that the memory available cannot hold is refused before it is built.

Target (issue 20): every row under 8 GB, CG class C at 16,384 ranks included.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

KERNELS = ("cg", "mg", "lu", "ft", "is")
RANKS = (256, 1024, 4096, 16384)
TARGET_MB = 8000


def rows_to_run(large: bool, iters: int) -> list[dict]:
    """The benchmark's rows: name, kernel, class, ranks, iterations (0: the class's) and what is made.

    Parameters
    ----------
    large : bool
        Add the rows behind ``--large``: every kernel at 256 and 1,024 ranks with the class's iterations,
        MG's traffic at 16,384 ranks, and CG's trace at 65,536 ranks (19 GB: refused unless the memory
        is there).
    iters : int
        Iterations of the default rows (0: the class's).

    Returns
    -------
    list of dict

    Examples
    --------
    >>> [r["name"] for r in rows_to_run(False, 1)][:3]
    ['cg.C.256.trace', 'cg.C.1024.trace', 'cg.C.4096.trace']
    >>> len(rows_to_run(False, 1)), len(rows_to_run(True, 1))
    (23, 35)
    """
    out = []

    def row(kernel, ranks, what, it):
        name = f"{kernel}.C.{ranks}.{what}" + ("" if it == iters else f".iters={it or 'class'}")
        out.append({"name": name, "kernel": kernel, "class": "C", "ranks": ranks, "iters": it, "what": what})

    for kernel in KERNELS:
        for n in RANKS:
            row(kernel, n, "trace", iters)
    for n in (4096, 16384, 65536):
        row("cg", n, "traffic", iters)
    if large:
        for kernel in KERNELS:
            for n in (256, 1024):
                row(kernel, n, "trace", 0)
        row("mg", 16384, "traffic", iters)
        row("cg", 65536, "trace", iters)
    return out


def mem_available_MB() -> float | None:
    """Linux MemAvailable in MB (None where unknown).

    Examples
    --------
    >>> m = mem_available_MB()
    >>> m is None or m > 0
    True
    """
    from topoplan.core.memory import _mem_available

    b = _mem_available()
    return None if b is None else b / 1e6


def run_one(kernel: str, klass: str, ranks: int, iters: int, what: str) -> dict:
    """Make one row in this process and measure it (seconds of the call, the process's peak in MB).

    Examples
    --------
    >>> r = run_one("cg", "S", 4, 1, "trace")
    >>> r["rows"], r["table_MB"] > 0, r["peak_MB"] > 0
    (2532, True, True)
    """
    from topoplan.core.errors import TopoplanError

    it = iters or None
    out = {"rows": None, "seconds": None, "table_MB": None, "groups": None, "note": ""}
    t = time.perf_counter()
    try:
        if what == "trace":
            from topoplan.traffic.npb import npb_trace

            tr = npb_trace(kernel, klass, ranks, it)
            out["seconds"] = time.perf_counter() - t
            out["rows"] = len(tr)
            out["table_MB"] = sum(getattr(tr, c).nbytes for c in ("rank", "op", "peer", "bytes", "root", "comm_size",
                                                                  "t_start", "t_end", "comm", "tag", "req")) / 1e6
        else:
            from topoplan.traffic.generators import record_spec
            from topoplan.traffic.sources import load_traffic

            spec = f"npb:kernel={kernel},class={klass},np={ranks}" + ("" if it is None else f",iters={it}")
            traffic = load_traffic(spec)
            out["seconds"] = time.perf_counter() - t
            out["rows"] = record_spec(spec).rows     # the trace it stands for (recording again is cheap)
            out["groups"] = len(traffic.src)
    except TopoplanError as exc:
        out["note"] = f"refused: {exc}"
    except MemoryError:
        out["note"] = "MemoryError (over --max-memory-gb)"
    out["peak_MB"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 * 1.048576
    return out


def _limit(max_bytes: int):
    def set_limit():
        resource.setrlimit(resource.RLIMIT_AS, (max_bytes, max_bytes))
    return set_limit


def run_row(row: dict, max_gb: float) -> dict:
    """One row in a fresh interpreter whose address space is capped at ``max_gb`` GB."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(row)]
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, preexec_fn=_limit(int(max_gb * 1e9)))
    res = dict(row)
    if p.returncode != 0:
        tail = (p.stderr.strip().splitlines() or ["?"])[-1]
        res.update(rows=None, seconds=None, table_MB=None, groups=None, peak_MB=None,
                   note=f"failed (exit {p.returncode}): {tail}")
    else:
        res.update(json.loads(p.stdout.strip().splitlines()[-1]))
    return res


def _fmt(v, spec):
    return "-" if v is None else format(v, spec)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="one JSON document instead of the table")
    ap.add_argument("--only", metavar="NAME", help="rows whose name is NAME or starts with NAME.")
    ap.add_argument("--large", action="store_true", help="also the class's iterations and 65,536 ranks")
    ap.add_argument("--iters", type=int, default=1, help="iterations of the default rows (0: the class's)")
    ap.add_argument("--max-memory-gb", type=float, default=9.0, help="address-space cap of each row's process")
    ap.add_argument("--quick", action="store_true", help="the rows at 256 and 1,024 ranks")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        r = json.loads(a.child)
        print(json.dumps(run_one(r["kernel"], r["class"], r["ranks"], r["iters"], r["what"])))
        return 0
    rows = rows_to_run(a.large, a.iters)
    if a.quick:
        rows = [r for r in rows if r["ranks"] <= 1024]
    if a.only:
        rows = [r for r in rows if r["name"] == a.only or r["name"].startswith(a.only + ".")]
        if not rows:
            print(f"no row named {a.only!r}", file=sys.stderr)
            return 2
    avail = mem_available_MB()
    if not a.json:
        print(f"MemAvailable: {_fmt(avail, ',.0f')} MB; each row's process capped at {a.max_memory_gb:g} GB of "
              f"address space; iters={a.iters or 'class'} unless the name says otherwise")
        print(f"{'kernel':<6} {'class':<5} {'ranks':>6} {'iters':>5} {'what':<7} {'rows':>12} {'seconds':>8} "
              f"{'peak MB':>8} {'table MB':>8}  note")
    results = []
    for row in rows:
        r = run_row(row, a.max_memory_gb)
        results.append(r)
        if not a.json:
            over = r["peak_MB"] is not None and r["peak_MB"] > TARGET_MB
            note = r["note"] or (f"{r['groups']:,} message groups" if r["groups"] is not None else "")
            print(f"{r['kernel']:<6} {r['class']:<5} {r['ranks']:>6} {r['iters'] or 'class':>5} {r['what']:<7} "
                  f"{_fmt(r['rows'], ',d'):>12} {_fmt(r['seconds'], '.2f'):>8} {_fmt(r['peak_MB'], ',.0f'):>8} "
                  f"{_fmt(r['table_MB'], ',.0f'):>8}  {'OVER 8 GB ' if over else ''}{note[:110]}", flush=True)
    if a.json:
        print(json.dumps({"mem_available_MB": avail, "max_memory_gb": a.max_memory_gb, "target_MB": TARGET_MB,
                          "rows": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
