"""NPB class C trace replays side by side with SMPI 3.32: the ``topoplan simulate`` process beside SMPI's replay
process on the same network, in one run.

Rows ``<kernel>-C-<np>``: NPB class C (``npb:kernel=K,class=C,np=N``; CG and LU with 5 iterations, ``iters=5``,
as ``bench_sim.py``'s replays; MG, FT and IS with their class's own, NPB's warm-up included) at 128 and 256
ranks on one switch of N nodes (10 Gbit/s node links, 1 us each; ``smpi_peer.topology_doc``). Rows
``<kernel>-C-<np>-t4`` (FT and IS): the same with 4 isend/irecv pairs in flight in their alltoalls on both sides
(topoplan ``--mpich alltoall_throttle=4``; SMPI's alltoallv and its ``mvapich2_scatter_dest`` alltoall), so that
both simulate the same exchange: with MPICH's default of 32, SMPI runs other algorithms for FT at 256 ranks (its
ring for 32 KiB a pair) and IS (4 in flight).

* topoplan: ``topoplan simulate -t topology.yaml -T SPEC --json``, the whole process (start-up, generating the
  trace from its skeleton, building the network, the replay, printing);
* SMPI: ``smpirun -replay index.txt ... smpireplaymain`` on the time-independent traces and platform
  ``smpi_peer.py`` writes (configured as topoplan's model, see there), the whole process; the conversion
  (generating the trace and writing the files) is timed apart (``convert_s``): a user of SMPI has the files.

Each process runs ``--repeat`` times (default 3; SMPI's ``--smpi-repeat``, default the same; the least wall and
CPU time, the largest peak resident memory,
measured by GNU ``time``: ``processes.py``), with a time limit (``--timeout``, default 600 s). ``x wall``,
``x CPU``: SMPI's over topoplan's (above 1: topoplan is faster); ``x peak``: topoplan's peak over SMPI's (the
target is at most 1.5). ``diff``: the relative difference of the two simulated times (SMPI prints its own
to the microsecond). The load average is in every record.

Run: python benchmarks/bench_replay.py [--quick] [--only ROW ...] [--repeat N] [--smpi-repeat N] [--timeout S]
                                      [--json] [--save FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for _p in (ROOT, ROOT / "benchmarks"):  # run as a script from anywhere
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from processes import describe, run_process  # noqa: E402
from smpi_peer import prepare, run_smpi, smpi_available  # noqa: E402

KERNELS = ("cg", "mg", "ft", "lu", "is")
ITERS = {"cg": 5, "lu": 5}
ROWS = {f"{k}-C-{n}": f"npb:kernel={k},class=C,np={n}" + (f",iters={ITERS[k]}" if k in ITERS else "")
        for n in (128, 256) for k in KERNELS}
# The same alltoall algorithm on both sides: MPICH's batched isend/irecv with 4 pairs in flight, which SMPI's
# alltoallv and mvapich2_scatter_dest alltoall run (smpi_peer.SMPI_SCATTER_DEST_THROTTLE) and topoplan with
# --mpich alltoall_throttle=4 (MPIR_CVAR_ALLTOALL_THROTTLE=4). With MPICH's default of 32 the two simulate
# different exchanges for FT at 256 ranks (SMPI's ring) and IS (its alltoallv).
MPICH = {f"{k}-C-{n}-t4": ("alltoall_throttle=4",) for n in (128, 256) for k in ("ft", "is")}
ROWS.update({name: ROWS[name[:-3]] for name in MPICH})
QUICK = ("cg-C-128", "ft-C-128", "is-C-128")


def _best(records: list[dict]) -> dict:
    """The least wall and CPU time and the largest peak of a command's runs, with each run's wall time and the
    loads seen; the first failure or time-out as it is."""
    for r in records:
        if "timeout_s" in r or "error" in r:
            return r
    return {"wall_s": min(r["wall_s"] for r in records), "cpu_s": min(r["cpu_s"] for r in records),
            "peak_MB": max(r["peak_MB"] for r in records), "runs_s": [r["wall_s"] for r in records],
            "load": [min(r["load"] for r in records), max(r["load"] for r in records)],
            "makespan_s": records[0]["makespan_s"]}


def run_topoplan(topology: Path, spec: str, out: Path, timeout_s: float, mpich=()) -> dict:
    from bench_sim import topoplan_command

    cmd = topoplan_command() + ["simulate", "-t", str(topology), "-T", spec, "--json"]
    for m in mpich:
        cmd += ["--mpich", m]
    with open(out, "w") as f:
        r = run_process(cmd, f, timeout_s)
    if "timeout_s" in r:
        return r
    if r["returncode"] != 0:
        return {"error": f"topoplan failed ({r['returncode']}): {r['stderr'].strip()[-300:]}"}
    doc = json.loads(out.read_text())
    r.update(makespan_s=doc["makespan_s"], flows=doc["n_flows"], events=doc["n_events"])
    return r


def row(name: str, args, tmp: Path) -> dict:
    from topoplan.traffic.collectives import MPICHThresholds

    spec, mpich = ROWS[name], MPICH.get(name, ())
    prep = prepare(spec, tmp / name, thresholds=MPICHThresholds.from_options(mpich))
    out = {"row": name, "spec": spec, "rows": prep["rows"], "actions": prep["actions"], "ti_MB": prep["ti_MB"],
           "convert_s": prep["generate_s"] + prep["convert_s"], "smpi_algorithms": prep["algorithms"]}
    if mpich:
        out["mpich"] = list(mpich)
    ours = [run_topoplan(prep["topology"], spec, tmp / f"{name}.json", args.timeout, mpich)
            for _ in range(args.repeat)]
    flows = ours[0].get("flows")
    out["topoplan"] = _best(ours)
    if flows is not None:
        out.update(flows=flows, events=ours[0]["events"])
    peer = [run_smpi(prep["platform"], prep["index"], prep["n_ranks"], prep["algorithms"], timeout_s=args.timeout)
            for _ in range(args.smpi_repeat or args.repeat)]
    out["smpi"] = _best(peer)
    a, b = out["topoplan"], out["smpi"]
    if "wall_s" in a and "wall_s" in b:
        out["x_wall"] = b["wall_s"] / a["wall_s"]
        out["x_cpu"] = b["cpu_s"] / a["cpu_s"]
        out["x_peak"] = a["peak_MB"] / b["peak_MB"]
        out["makespan_rel_diff"] = abs(a["makespan_s"] - b["makespan_s"]) / b["makespan_s"]
    for f in (tmp / name).glob("ti/*"):   # the trace files can be large
        f.unlink()
    return out


def print_table(rows: list[dict]) -> None:
    print(f"{'row':<13}{'topoplan: wall, CPU, peak':>34}{'SMPI: wall, CPU, peak':>34}{'x wall':>8}{'x CPU':>7}"
          f"{'x peak':>8}{'topoplan s':>12}{'SMPI s':>10}{'diff':>9}{'conv s':>8}  load")
    for r in rows:
        if "error" in r:
            print(f"{r['row']:<13} error: {r['error']}")
            continue
        a, b = r["topoplan"], r["smpi"]
        line = f"{r['row']:<13}{describe(a):>34}{describe(b):>34}"
        if "x_wall" in r:
            load = a["load"] + b["load"]
            line += (f"{r['x_wall']:>7.2f}x{r['x_cpu']:>6.2f}x{r['x_peak']:>7.2f}x{a['makespan_s']:>12.6f}"
                     f"{b['makespan_s']:>10.6f}{r['makespan_rel_diff']:>9.1e}{r['convert_s']:>8.1f}"
                     f"  {min(load):.1f}-{max(load):.1f}")
        print(line)
    print("x wall, x CPU: SMPI's over topoplan's (above 1: topoplan faster); x peak: topoplan's peak over SMPI's; "
          "diff: relative difference of the simulated times; conv s: generating and writing SMPI's files")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK)}")
    ap.add_argument("--only", choices=list(ROWS), action="append", metavar="ROW", help=f"one of {', '.join(ROWS)}")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each process (default 3)")
    ap.add_argument("--smpi-repeat", type=int, default=None,
                    help="runs of SMPI's process (default: --repeat; SMPI takes minutes on LU at 256 ranks)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per process run (default 600)")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ap.add_argument("--save", metavar="FILE", help="also write the JSON document to FILE (after every row)")
    args = ap.parse_args(argv)
    ok, why = smpi_available()
    if not ok:
        print(f"bench_replay: {why}; nothing to compare", file=sys.stderr)
        return 0
    from bench_sim import warm_up

    jit_s = warm_up()
    names = args.only or (QUICK if args.quick else list(ROWS))
    rows = []
    doc = {"jit_s": jit_s, "repeat": args.repeat, "smpi_repeat": args.smpi_repeat or args.repeat,
           "load_before": os.getloadavg(), "results": rows}
    with tempfile.TemporaryDirectory(prefix="bench_replay.") as tmp:
        for name in names:
            try:
                rows.append(row(name, args, Path(tmp)))
            except Exception as e:   # one broken row must not lose the others
                rows.append({"row": name, "error": f"{type(e).__name__}: {e}"})
            doc["load_after"] = os.getloadavg()
            if args.save:
                Path(args.save).write_text(json.dumps(doc, indent=1))
            if not args.json:
                print(f"  done {name} ({time.strftime('%H:%M:%S')})", file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps(doc, indent=1))
    else:
        print(f"{args.repeat} run(s) of each process: least wall and CPU time, largest peak; "
              f"{os.cpu_count()} cores")
        print_table(rows)
        print("load average (1, 5, 15 min): before {:.2f} {:.2f} {:.2f}, after {:.2f} {:.2f} {:.2f}".format(
            *doc["load_before"], *doc["load_after"]))
    bad = [r["row"] for r in rows if "error" in r or "x_wall" not in r]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
