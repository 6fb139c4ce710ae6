"""The route query service (002 IV-A): load, bad requests, hot reload under load.

Every server binds 127.0.0.1 on an ephemeral port, every loop is bounded in
count and time, and every server is stopped at the end of its test.
"""

import asyncio
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path


from planner.fabric.ibfabric import load_fabric, route
from planner.fabric.ibserve import MAX_LINE_B, RouteServer, answer

IB = Path(__file__).resolve().parent / "data" / "ib"
REPO = Path(__file__).resolve().parents[1]
TIMEOUT_S = 60  # hard cap on any one test's event loop


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, TIMEOUT_S))


def expected(fabric):
    hosts = fabric.host_names()
    return {(a, b): route(fabric, a, b).line() for a in hosts for b in hosts}


def quiet(_msg):
    pass


async def ask(reader, writer, line: bytes) -> bytes:
    writer.write(line)
    await writer.drain()
    return await reader.readline()


def test_answer_is_a_pure_function_of_the_fabric():
    fab = load_fabric(IB / "tree2" / "ibnetdiscover.txt", IB / "tree2" / "lft")
    assert answer(fab, "query node001:node004\n") == \
        "node001 0x0000000000200001 0x0000000000200000 0x0000000000200002 node004"
    assert answer(fab, "  QUERY   node001:node002  ") == "node001 0x0000000000200001 node002"
    assert answer(fab, "info", 7) == "ok generation=7 hosts=9 switches=4 routing=lft"
    for bad in ("", "query", "query node001", "query a:b:c", "query node001:nobody", "hello", "info extra",
                "query node001 node002"):
        assert answer(fab, bad).startswith("error: ")
        assert "\n" not in answer(fab, bad)


def test_200_clients_x_100_queries():
    d = IB / "fattree"
    fab = load_fabric(d / "ibnetdiscover.txt", d / "lft")
    want = expected(fab)
    pairs = sorted(want)

    async def client(i, port):
        rng = random.Random(i)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        got = []
        for _ in range(100):
            a, b = rng.choice(pairs)
            writer.write(f"query {a}:{b}\n".encode())
            await writer.drain()
            got.append(((a, b), (await reader.readline()).decode().rstrip("\n")))
        writer.close()
        await writer.wait_closed()
        return got

    async def main():
        srv = RouteServer(d / "ibnetdiscover.txt", d / "lft", port=0, log=quiet)
        host, port = await srv.start()
        assert host == "127.0.0.1"  # loopback by default
        try:
            t0 = time.perf_counter()
            results = await asyncio.gather(*(client(i, port) for i in range(200)))
            wall = time.perf_counter() - t0
        finally:
            await srv.stop()
        return results, wall, srv.stats

    results, wall, stats = run(main())
    answers = [x for r in results for x in r]
    assert len(answers) == 20000
    wrong = [(p, a) for p, a in answers if a != want[p]]
    assert not wrong, wrong[:3]
    assert stats.connections == 200 and stats.requests == 20000 and stats.errors == 0
    assert wall < 30


def test_malformed_and_oversized_requests():
    d = IB / "tree2"

    async def main():
        srv = RouteServer(d / "ibnetdiscover.txt", d / "lft", port=0, log=quiet)
        _, port = await srv.start()
        try:
            r, w = await asyncio.open_connection("127.0.0.1", port)
            for bad in (b"bogus\n", b"query\n", b"query node001\n", b"query a:b:c\n", b"query node001:nobody\n",
                        b"\n", b"\xff\xfe\x00garbage\n", b"query node001:node002 trailing\n"):
                reply = await ask(r, w, bad)
                assert reply.startswith(b"error: ") and reply.endswith(b"\n") and reply.count(b"\n") == 1, reply
            # the connection survives bad requests; a line of exactly MAX_LINE_B bytes is still a request
            assert await ask(r, w, b"query node001:node002\n") == b"node001 0x0000000000200001 node002\n"
            assert (await ask(r, w, b"q" * MAX_LINE_B + b"\n")).startswith(b"error: unknown request")
            # oversized: error line, then a clean close (EOF, not a reset), even with more data in flight
            w.write(b"x" * (MAX_LINE_B + 1) + b"\n" + b"query node001:node002\n" * 2000)
            await w.drain()
            assert await r.readline() == b"error: request line longer than 4096 bytes; closing\n"
            assert await r.read() == b""
            w.close()
            # an endless line without a newline is refused the same way
            r, w = await asyncio.open_connection("127.0.0.1", port)
            w.write(b"y" * 10000)
            await w.drain()
            assert (await r.readline()).startswith(b"error: request line longer")
            assert await r.read() == b""
            w.close()
            # a last request without its newline is answered before the close
            r, w = await asyncio.open_connection("127.0.0.1", port)
            w.write(b"query node002:node001")
            w.write_eof()
            assert await r.read() == b"node002 0x0000000000200001 node001\n"
            w.close()
            # the server is still fine
            r, w = await asyncio.open_connection("127.0.0.1", port)
            assert (await ask(r, w, b"info\n")).startswith(b"ok generation=1")
            w.close()
            return srv.stats
        finally:
            await srv.stop()

    stats = run(main())
    assert stats.oversized == 2 and stats.connections == 4


def _atomic_copy(src: Path, dst: Path) -> None:
    tmp = dst.parent / f".{dst.name}.tmp"
    shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


def _reload_under_load(tmp_path, with_lft: bool):
    """Clients query while the dump (and LFTs) are replaced by the re-cabled fabric's."""
    old_dir, new_dir = IB / "fattree", IB / "fattree-rewired"
    live = tmp_path / "live"
    (live / "lft").mkdir(parents=True)
    shutil.copyfile(old_dir / "ibnetdiscover.txt", live / "ibnetdiscover.txt")
    for f in (old_dir / "lft").iterdir():
        shutil.copyfile(f, live / "lft" / f.name)
    lft = live / "lft" if with_lft else None
    old = expected(load_fabric(old_dir / "ibnetdiscover.txt", old_dir / "lft" if with_lft else None))
    new = expected(load_fabric(new_dir / "ibnetdiscover.txt", new_dir / "lft" if with_lft else None))
    pairs = sorted(old)
    moved = [p for p in pairs if old[p] != new[p]]
    assert len(moved) > len(pairs) // 2  # the re-cabling changes most routes

    async def client(i, port, srv):
        rng = random.Random(1000 + i)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        got = []
        # At least 100 queries, and on until this client has queried the reloaded fabric (bounded).
        while len(got) < 3000 and (len(got) < 100 or srv.generation < 2 or len(got) < seen_new[i] + 20):
            a, b = rng.choice(moved)
            writer.write(f"query {a}:{b}\n".encode())
            await writer.drain()
            line = (await reader.readline()).decode()
            got.append(((a, b), line.rstrip("\n")))
            if srv.generation >= 2 and not seen_new[i]:
                seen_new[i] = len(got)
            await asyncio.sleep(0)
        writer.close()
        await writer.wait_closed()
        return got

    seen_new = [0] * 100

    async def main():
        srv = RouteServer(live / "ibnetdiscover.txt", lft, port=0, poll_s=0.01, settle_s=0.03, log=quiet)
        _, port = await srv.start()
        try:
            tasks = [asyncio.create_task(client(i, port, srv)) for i in range(100)]
            while srv.stats.requests < 2000:  # mid-load
                await asyncio.sleep(0.005)
            if with_lft:  # tables first, dump last, all within the settle time
                for f in (new_dir / "lft").iterdir():
                    _atomic_copy(f, live / "lft" / f.name)
            _atomic_copy(new_dir / "ibnetdiscover.txt", live / "ibnetdiscover.txt")
            swapped_at = srv.stats.requests
            results = await asyncio.gather(*tasks)
        finally:
            await srv.stop()
        return results, swapped_at, srv

    results, swapped_at, srv = run(main())
    assert srv.generation == 2 and srv.stats.reloads == 1 and srv.stats.reload_failures == 0
    assert srv.fabric.routing == ("lft" if with_lft else "shortest-path") and not srv.fabric.lft_conflicts
    n_old = n_new = 0
    for got in results:
        assert len(got) >= 100
        phase_new = False
        for pair, line in got:
            assert line in (old[pair], new[pair]), (pair, line)  # never wrong, never an error
            if line == new[pair]:
                phase_new = True
                n_new += 1
            else:
                assert not phase_new, (pair, line)  # once a client saw the new fabric, never the old again
                n_old += 1
    assert sum(len(g) for g in results) == srv.stats.requests  # nothing lost
    assert n_old >= 2000 - 100 and n_new >= 100 * 20
    assert swapped_at < srv.stats.requests


def test_reload_in_the_middle_of_the_load(tmp_path):
    _reload_under_load(tmp_path, with_lft=False)


def test_reload_with_lfts_in_the_middle_of_the_load(tmp_path):
    _reload_under_load(tmp_path, with_lft=True)


def test_bad_dump_keeps_the_old_fabric_until_a_good_one(tmp_path):
    d = IB / "tree2"
    live = tmp_path / "ibnetdiscover.txt"
    shutil.copyfile(d / "ibnetdiscover.txt", live)
    logs = []

    async def wait_for(cond, limit_s=10.0):
        t = time.monotonic()
        while not cond() and time.monotonic() - t < limit_s:
            await asyncio.sleep(0.01)
        return cond()

    async def main():
        srv = RouteServer(live, port=0, poll_s=0.01, settle_s=0.02, log=logs.append)
        _, port = await srv.start()
        try:
            r, w = await asyncio.open_connection("127.0.0.1", port)
            before = await ask(r, w, b"query node001:node009\n")
            text = (d / "ibnetdiscover.txt").read_text()
            (tmp_path / "cut").write_text(text[: len(text) // 2])
            os.replace(tmp_path / "cut", live)
            assert await wait_for(lambda: srv.stats.reload_failures == 1)
            assert await ask(r, w, b"query node001:node009\n") == before and srv.generation == 1
            _atomic_copy(IB / "fattree" / "ibnetdiscover.txt", live)
            assert await wait_for(lambda: srv.generation == 2)
            after = await ask(r, w, b"query node001:node011\n")
            w.close()
            return before, after
        finally:
            await srv.stop()

    before, after = run(main())
    assert before == b"node001 0x0000000000200001 0x0000000000200000 0x0000000000200003 node009\n"
    assert after.startswith(b"node001 ") and after.endswith(b" node011\n")
    assert any("reload failed, still serving generation 1" in m and "truncated" in m for m in logs)


def test_idle_connections_are_closed():
    d = IB / "tree2"

    async def main():
        srv = RouteServer(d / "ibnetdiscover.txt", port=0, idle_timeout_s=0.2, log=quiet)
        _, port = await srv.start()
        try:
            r, w = await asyncio.open_connection("127.0.0.1", port)
            assert (await ask(r, w, b"info\n")).startswith(b"ok")
            t = time.monotonic()
            assert await asyncio.wait_for(r.read(), 5) == b""
            return time.monotonic() - t
        finally:
            await srv.stop()

    assert run(main()) < 4


def test_serve_command_starts_answers_and_stops_on_sigterm():
    d = IB / "fattree"
    code = ("import typer; from planner.cli.commands.topo import register; app = typer.Typer(); register(app); "
            "app(prog_name='topoplan')")
    proc = subprocess.Popen([sys.executable, "-c", code, "serve", "--ibnetdiscover", str(d / "ibnetdiscover.txt"),
                             "--lft", str(d / "lft"), "--port", "0"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = ""
        deadline = time.monotonic() + 30
        while "serving" not in line and time.monotonic() < deadline and proc.poll() is None:
            line = proc.stderr.readline()
        assert "serving 12 hosts, 6 switches (routes: lft) on 127.0.0.1:" in line, line
        port = int(line.rsplit(":", 1)[1])

        async def q():
            r, w = await asyncio.open_connection("127.0.0.1", port)
            reply = await ask(r, w, b"query node001:node011\n")
            w.close()
            return reply

        assert run(q()) == b"node001 0x0000000000200002 0x0000000000200001 0x0000000000200005 node011\n"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
        assert "stopped after 1 requests on 1 connections" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
