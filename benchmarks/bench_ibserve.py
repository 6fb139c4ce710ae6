"""Load benchmark of the route query service (``topoplan serve``): queries per second and latency.

The server runs in its own process on 127.0.0.1 (ephemeral port); the
clients run in this process on one asyncio loop, each sending ``query a:b``
and waiting for the answer (closed loop). Every answer is checked against
:func:`topoplan.fabric.ibfabric.route`. ``--baseline`` adds the same load against a
trivial asyncio echo server, to tell the service's cost from the machine's
(on a small VM the p99 of even the echo server is a scheduler tick).

    python benchmarks/bench_ibserve.py                       # fattree fixture with LFTs
    python benchmarks/bench_ibserve.py --clients 1,10,200 --queries 20000 --json
    python benchmarks/bench_ibserve.py --fabric tests/data/ib/tree2 --no-lft
    python benchmarks/bench_ibserve.py --clients '' --idle 2000 --nofile 1024   # only the idle-flood row

The idle-flood row ("2,000 idle clients, 1,024 fds: fresh-client latency") starts
``topoplan serve`` under ``ulimit -n 1024`` (``--nofile``), opens ``--idle``
connections that never send anything, and times fresh clients (connect, one
query, its answer): one right behind the flood (the server must first drain
the accept backlog) and then ``--fresh`` more once the server has taken the
flood in (it keeps ``max_clients`` of them and has closed the oldest others).
It also reports the server's log size and how SIGTERM ends it (exit status
and time).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import selectors
import socket
import subprocess
import tempfile
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from topoplan.fabric.ibfabric import load_fabric, route  # noqa: E402


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
    code = ("import sys; from topoplan.fabric.ibserve import run_server; "
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


def _closed_by_server(socks: list[socket.socket], want: int, limit_s: float) -> int:
    """How many of ``socks`` saw EOF (closed by the server), waiting until ``want`` or ``limit_s``."""
    sel = selectors.DefaultSelector()  # epoll: select() cannot watch descriptors above 1,024
    for s in socks:
        sel.register(s, selectors.EVENT_READ)
    closed = 0
    deadline = time.monotonic() + limit_s
    try:
        while closed < want and time.monotonic() < deadline:
            for key, _ in sel.select(timeout=0.1):
                try:
                    data = key.fileobj.recv(1)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    closed += 1
                    sel.unregister(key.fileobj)
    finally:
        sel.close()
    return closed


def idle_flood(fabric_dir: Path, use_lft: bool, idle: int = 2000, nofile: int = 1024, fresh: int = 20) -> dict:
    """``idle`` silent clients against ``topoplan serve`` under ``ulimit -n nofile``; fresh-client latency."""
    import resource

    need = idle + fresh + 200
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < need:
        if hard != resource.RLIM_INFINITY and hard < need:
            raise SystemExit(f"the idle flood needs {need} descriptors here; the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
    dump = fabric_dir / "ibnetdiscover.txt"
    lft = ["--lft", str(fabric_dir / "lft")] if use_lft else []
    want = {(a, b): route(fab, a, b).line() for fab in [load_fabric(dump, fabric_dir / "lft" if use_lft else None)]
            for a in fab.host_names() for b in fab.host_names()}
    pairs = sorted(want)
    rng = random.Random(0)
    socks: list[socket.socket] = []
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "serve.log"
        with open(log, "wb") as err:
            proc = subprocess.Popen([sys.executable, "-m", "topoplan", "serve", "-i", str(dump), *lft, "--port", "0"],
                                    cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err,
                                    preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile)))
        try:
            deadline = time.monotonic() + 30
            while "serving" not in log.read_text() and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.02)
            m = re.search(r"serving .* on [^ ]+:(\d+)\s*$", log.read_text(), re.M)
            if not m:
                raise SystemExit(f"server did not start: {log.read_text()}")
            port = int(m.group(1))
            limit = int(re.search(r"at most (\d+) clients", log.read_text()).group(1))

            def one() -> tuple[float, bool]:
                a, b = rng.choice(pairs)
                t = time.perf_counter()
                with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
                    c.sendall(f"query {a}:{b}\n".encode())
                    reply = c.makefile("rb").readline().decode().rstrip("\n")
                return time.perf_counter() - t, reply == want[(a, b)]

            t0 = time.perf_counter()
            for _ in range(idle):
                s = socket.socket()
                s.setblocking(False)
                s.connect_ex(("127.0.0.1", port))
                socks.append(s)
            flood_s = time.perf_counter() - t0
            behind, ok_behind = one()  # right behind the flood
            closed = _closed_by_server(socks, max(0, idle - limit), 10.0)
            lat, ok = [], ok_behind
            for _ in range(fresh):
                t, good = one()
                lat.append(t)
                ok = ok and good
            size_before_stop = log.stat().st_size
            proc.send_signal(15)  # SIGTERM
            t = time.monotonic()
            try:
                code = proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                code = None
            stop_s = time.monotonic() - t
        finally:
            for s in socks:
                s.close()
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
        lat.sort()
        return {"idle": idle, "nofile": nofile, "max_clients": limit, "flood_s": flood_s,
                "closed_by_server": closed, "behind_flood_ms": behind * 1e3, "fresh": fresh,
                "fresh_p50_ms": lat[len(lat) // 2] * 1e3, "fresh_max_ms": lat[-1] * 1e3, "all_correct": ok,
                "log_bytes_before_stop": size_before_stop, "log_bytes": log.stat().st_size, "sigterm_exit": code,
                "sigterm_s": stop_s}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fabric", type=Path, default=ROOT / "tests" / "data" / "ib" / "fattree",
                    help="directory with ibnetdiscover.txt and lft/")
    ap.add_argument("--no-lft", action="store_true", help="shortest-path routes (no LFTs)")
    ap.add_argument("--clients", default="1,10,50,200", help="concurrency levels, comma-separated")
    ap.add_argument("--queries", type=int, default=20000, help="queries per level (split over the clients)")
    ap.add_argument("--baseline", action="store_true", help="also load a trivial echo server")
    ap.add_argument("--idle", type=int, default=2000, help="idle clients of the idle-flood row (0: skip it)")
    ap.add_argument("--nofile", type=int, default=1024, help="the server's descriptor limit in the idle-flood row")
    ap.add_argument("--fresh", type=int, default=20, help="fresh clients timed after the idle flood")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--quick", action="store_true", help="1 and 50 clients, 4,000 queries each, the idle-flood row")
    a = ap.parse_args()
    if a.quick:
        a.clients, a.queries = "1,50", 4000
    levels = [int(c) for c in a.clients.split(",") if c.strip()]
    res = run(a.fabric.resolve(), not a.no_lft, levels, a.queries, baseline=a.baseline)
    if a.idle:
        res["idle_flood"] = idle_flood(a.fabric.resolve(), not a.no_lft, a.idle, a.nofile, a.fresh)
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
    f = res.get("idle_flood")
    if f:
        print(f"{f['idle']:,} idle clients, {f['nofile']:,} fds: fresh-client latency {f['behind_flood_ms']:.1f} ms "
              f"right behind the flood, then p50 {f['fresh_p50_ms']:.2f} ms, max {f['fresh_max_ms']:.2f} ms over "
              f"{f['fresh']} ({'all correct' if f['all_correct'] else 'WRONG ANSWERS'}); server kept "
              f"{f['max_clients']}, closed {f['closed_by_server']} idle; log {f['log_bytes']:,} B; SIGTERM: exit "
              f"{f['sigterm_exit']} in {f['sigterm_s']:.2f} s")


if __name__ == "__main__":
    main()
