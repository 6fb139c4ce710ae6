"""Load benchmark of the route query service (``topoplan serve``): queries per second and latency.

The server runs in its own process on 127.0.0.1 (ephemeral port); the
clients run in this process on one asyncio loop, each sending ``query a:b``
and waiting for the answer (closed loop). Every answer is checked against
:func:`planner.fabric.ibfabric.route`. ``--baseline`` adds the same load against a
trivial asyncio echo server, to tell the service's cost from the machine's
(on a small VM the p99 of even the echo server is a scheduler tick).

    python benchmarks/bench_ibserve.py                       # fattree fixture with LFTs
    python benchmarks/bench_ibserve.py --clients 1,10,200 --queries 20000 --json
    python benchmarks/bench_ibserve.py --fabric tests/data/ib/tree2 --no-lft
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.fabric.ibfabric import load_fabric, route  # noqa: E402


_ECHO = """
import asyncio, sys
async def echo(r, w):
    while line := await r.readline():
        w.write(line)
        await w.drain()
    w.close()
async def main():
    srv = await asyncio.start_server(echo, "127.0.0.1", 0, backlog=1024)
    print("serving echo on 127.0.0.1:%d" % srv.sockets[0].getsockname()[1], file=sys.stderr, flush=True)
    await asyncio.sleep(3600)
asyncio.run(main())
"""


def start_server(dump: Path | None, lft: Path | None) -> tuple[subprocess.Popen, int]:
    """The service (or, with ``dump`` None, the echo baseline) in a child process; returns (process, port)."""
    code = ("import sys; from planner.fabric.ibserve import run_server; "
            "run_server(sys.argv[1], sys.argv[2] or None, port=0)") if dump is not None else _ECHO
    proc = subprocess.Popen([sys.executable, "-c", code, str(dump or ""), str(lft or "")], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if "serving" in line:
            return proc, int(line.rsplit(":", 1)[1])
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise SystemExit(f"server did not start: {proc.stderr.read()}")


async def load(port: int, clients: int, per_client: int, want: dict, seed: int, echo: bool = False) -> dict:
    pairs = sorted(want)
    lat: list[float] = []
    bad = 0

    async def client(i: int):
        nonlocal bad
        rng = random.Random(seed * 100003 + i)
        r, w = await asyncio.open_connection("127.0.0.1", port)
        for _ in range(per_client):
            a, b = rng.choice(pairs)
            t = time.perf_counter()
            w.write(f"query {a}:{b}\n".encode())
            await w.drain()
            reply = await r.readline()
            lat.append(time.perf_counter() - t)
            bad += reply.decode().rstrip("\n") != (f"query {a}:{b}" if echo else want[(a, b)])
        w.close()
        await w.wait_closed()

    t0 = time.perf_counter()
    await asyncio.gather(*(client(i) for i in range(clients)))
    wall = time.perf_counter() - t0
    lat.sort()
    n = len(lat)
    return {"server": "echo" if echo else "topoplan", "clients": clients, "queries": n, "wall_s": wall, "qps": n / wall,
            "p50_ms": lat[n // 2] * 1e3, "p99_ms": lat[min(n - 1, int(n * 0.99))] * 1e3, "max_ms": lat[-1] * 1e3,
            "wrong": bad}


def run(fabric_dir: Path, use_lft: bool, clients: list[int], queries: int, seed: int = 0,
        baseline: bool = False) -> dict:
    dump = fabric_dir / "ibnetdiscover.txt"
    lft = fabric_dir / "lft" if use_lft else None
    t = time.perf_counter()
    fab = load_fabric(dump, lft)
    load_ms = (time.perf_counter() - t) * 1e3
    hosts = fab.host_names()
    want = {(a, b): route(fab, a, b).line() for a in hosts for b in hosts}
    proc, port = start_server(dump, lft)
    try:
        rows = [asyncio.run(load(port, c, max(1, queries // c), want, seed)) for c in clients]
    finally:
        proc.terminate()
        proc.wait(timeout=15)
    if baseline:
        proc, port = start_server(None, None)
        try:
            rows += [asyncio.run(load(port, c, max(1, queries // c), want, seed, echo=True)) for c in clients]
        finally:
            proc.terminate()
            proc.wait(timeout=15)
    return {"fabric": str(fabric_dir.relative_to(ROOT) if fabric_dir.is_relative_to(ROOT) else fabric_dir),
            "routing": fab.routing, "hosts": len(hosts), "switches": len(fab.switches),
            "load_fabric_ms": load_ms, "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fabric", type=Path, default=ROOT / "tests" / "data" / "ib" / "fattree",
                    help="directory with ibnetdiscover.txt and lft/")
    ap.add_argument("--no-lft", action="store_true", help="shortest-path routes (no LFTs)")
    ap.add_argument("--clients", default="1,10,50,200", help="concurrency levels, comma-separated")
    ap.add_argument("--queries", type=int, default=20000, help="queries per level (split over the clients)")
    ap.add_argument("--baseline", action="store_true", help="also load a trivial echo server")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    res = run(a.fabric.resolve(), not a.no_lft, [int(c) for c in a.clients.split(",")], a.queries,
              baseline=a.baseline)
    if a.json:
        print(json.dumps(res, indent=1))
        return
    print(f"fabric {res['fabric']}: {res['hosts']} hosts, {res['switches']} switches, routes {res['routing']}, "
          f"loaded in {res['load_fabric_ms']:.1f} ms")
    print(f"{'server':8} {'clients':>7} {'queries':>8} {'wall s':>7} {'q/s':>8} {'p50 ms':>7} {'p99 ms':>7} "
          f"{'max ms':>7} {'wrong':>5}")
    for r in res["rows"]:
        print(f"{r['server']:8} {r['clients']:7d} {r['queries']:8d} {r['wall_s']:7.2f} {r['qps']:8.0f} "
              f"{r['p50_ms']:7.3f} {r['p99_ms']:7.3f} {r['max_ms']:7.2f} {r['wrong']:5d}")


if __name__ == "__main__":
    main()
