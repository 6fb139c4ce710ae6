"""Why the alltoall algorithm matters at NPB FT's 32 KiB a pair: each exchange with eager and with rendezvous sends,
simulated by topoplan and, when ``smpirun`` is installed, by SMPI on the same network.

NPB FT class C at 256 ranks calls 22 alltoalls of 32 KiB a pair, each after a 16-byte binomial reduce (or a
barrier) that lets the ranks enter it at different times. The script replays FT's trace on one switch of 256
nodes (``smpi_peer.topology_doc``: 10 Gbit/s node links, 1 us) with its alltoalls run three ways:

* ``batched``: the trace as it is: MPICH's medium alltoall, isend/irecv 32 pairs in flight a rank;
* ``pairwise``: each alltoall written out as 255 rounds of irecv, isend, waitall with partner ``rank XOR i``
  (MPICH's long exchange on a power of two; SMPI's ``pair``);
* ``ring``: the same rounds with ``rank + i`` as destination and ``rank - i`` as source (SMPI's ``ring``, which
  SMPI's MPICH selector runs at exactly 32 KiB);

each with sends below 64 KiB eager (MPICH's default, topoplan's ``--eager 64KiB``; SMPI's
``async-small-thresh`` and ``send-is-detached-thresh`` at 65536) and with every send a rendezvous (16 KiB).
SMPI runs its own ``ring`` and ``pair`` algorithms on FT's trace (not the written-out rounds), so the two
columns compare its collectives with topoplan's replay of the same point-to-point rounds. The bandwidth
bound is every node link's bytes at its bandwidth.

Run: python benchmarks/alltoall_eager.py [--np 256] [--no-smpi] [--json]
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for _p in (ROOT, ROOT / "benchmarks"):  # run as a script from anywhere
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from smpi_peer import prepare, run_smpi, smpi_available  # noqa: E402

BW_BPS = 10e9 / 8   # smpi_peer.topology_doc's node links
EAGER = {"eager": "64KiB", "rendezvous": "16KiB"}
SMPI_ALLTOALL = {"pairwise": "pair", "ring": "ring"}


def written_out(trace_csv: Path, out: Path, kind: str) -> None:
    """``trace_csv`` with every alltoall row replaced by its rounds of irecv, isend and waitall (``kind``:
    ``pairwise`` or ``ring``)."""
    with open(trace_csv, newline="") as f, open(out, "w", newline="") as g:
        rows, w = csv.reader(f), csv.writer(g)
        head = next(rows)
        w.writerow(head)
        col = {name: k for k, name in enumerate(head)}
        for row in rows:
            if row[col["op"]] != "alltoall":
                w.writerow(row)
                continue
            r, p = int(row[col["rank"]]), int(row[col["comm_size"]])
            if kind == "pairwise" and p & (p - 1):
                raise SystemExit(f"error: the pairwise exchange by XOR needs a power of two ranks, not {p}")
            for i in range(1, p):
                dst, src = ((r ^ i, r ^ i) if kind == "pairwise" else ((r + i) % p, (r - i) % p))
                for op, peer in (("irecv", src), ("isend", dst), ("waitall", -1)):
                    new = list(row)
                    new[col["op"]], new[col["peer"]] = op, str(peer)
                    new[col["bytes"]] = row[col["bytes"]] if op != "waitall" else "0"
                    w.writerow(new)


def topoplan_run(topology: Path, spec: str, eager: str) -> dict:
    """``topoplan simulate --json``'s result."""
    cmd = [sys.executable, "-m", "topoplan", "simulate", "-t", str(topology), "-T", spec, "--eager", eager, "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"error: topoplan simulate failed: {done.stderr.strip()[-300:]}")
    return json.loads(done.stdout)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--np", type=int, default=256, help="ranks (FT class C; default 256, 32 KiB a pair)")
    ap.add_argument("--no-smpi", action="store_true", help="topoplan only")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    spec = f"npb:kernel=ft,class=C,np={a.np}"
    smpi = smpi_available() and not a.no_smpi
    rows = []
    with tempfile.TemporaryDirectory(prefix="a2a-eager.") as tmp:
        tmp = Path(tmp)
        prep = prepare(spec, tmp / "ft")
        trace = tmp / "ft.csv"
        subprocess.run([sys.executable, "-m", "topoplan", "traffic", spec, "--trace", "-o", str(trace)],
                       check=True, capture_output=True, cwd=tmp)
        specs = {"batched": spec}
        for kind in ("pairwise", "ring"):
            specs[kind] = str(tmp / f"ft-{kind}.csv")
            written_out(trace, Path(specs[kind]), kind)
        for kind, s in specs.items():
            for proto, eager in EAGER.items():
                doc = topoplan_run(prep["topology"], s, eager)
                row = {"exchange": kind, "sends": proto, "topoplan_s": doc["makespan_s"],
                       "bound_s": doc["max_node_link_bytes"] / BW_BPS}
                if smpi and kind in SMPI_ALLTOALL:
                    thresh = int(eager[:-3]) * 1024
                    flags = [*prep["algorithms"], f"--cfg=smpi/alltoall:{SMPI_ALLTOALL[kind]}",
                             f"--cfg=smpi/async-small-thresh:{thresh}", f"--cfg=smpi/send-is-detached-thresh:{thresh}"]
                    got = run_smpi(prep["platform"], prep["index"], prep["n_ranks"], flags, timeout_s=1800)
                    row["smpi_s"] = got.get("makespan_s")
                rows.append(row)
                if not a.json:
                    smpi_txt = f"  SMPI {row['smpi_s']:.6f} s" if row.get("smpi_s") else ""
                    print(f"{kind:9s} {proto:10s} topoplan {row['topoplan_s']:.6f} s{smpi_txt}  (bandwidth bound "
                          f"{row['bound_s']:.6f} s)", flush=True)
    if a.json:
        print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
