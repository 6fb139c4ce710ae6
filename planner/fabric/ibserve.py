"""The route query service of 002 section IV-A: a TCP server answering ``query hosta:hostb``.

Protocol (one request per line, UTF-8, at most :data:`MAX_LINE_B` bytes before the newline)::

    query hosta:hostb   ->  hosta <switch guid> ... <switch guid> hostb
    info                ->  ok generation=3 hosts=12 switches=6 routing=lft
    anything else       ->  error: <why>

A line longer than :data:`MAX_LINE_B` gets ``error: ...`` and the connection
is closed cleanly (our side shut down first, the rest of the client's data
read and dropped, so the client sees the error line rather than a reset).

The fabric (an ``ibnetdiscover`` dump plus an optional directory of
``ibroute`` dumps) is loaded at start and reloaded when those files change:
the watcher polls their size/mtime/inode, waits until they have been still
for ``settle_s`` (an administrator's script rewrites several files), builds
the new :class:`~planner.fabric.ibfabric.IBFabric` completely in a worker thread, and
then swaps one reference. Each request reads that reference once, so an
answer comes from the old or the new fabric, never from a mix. A dump that
fails to parse keeps the old fabric (and is retried when it changes again);
LFTs that contradict the new dump (a half-finished re-dump) delay the swap
for up to ``conflict_wait_s``.

Examples
--------
>>> import asyncio
>>> async def main():
...     srv = RouteServer("tests/data/ib/tree2/ibnetdiscover.txt", "tests/data/ib/tree2/lft", port=0,
...                       log=lambda line: None)
...     host, port = await srv.start()                  # port 0: a free port
...     r, w = await asyncio.open_connection(host, port)
...     w.write(b"query node001:node002\\n")
...     print((await r.readline()).decode(), end="")
...     w.close()
...     await srv.stop()
>>> asyncio.run(main())
node001 0x0000000000200001 node002
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from planner.core.errors import TopoplanError
from planner.fabric.ibfabric import IBFabric, load_fabric, parse_query, route

__all__ = ["MAX_LINE_B", "ServerStats", "fabric_signature", "answer", "RouteServer", "run_server"]

#: Longest request line accepted, newline excluded.
MAX_LINE_B = 4096
#: After an oversized line, how much of the client's remaining data is read and dropped before closing.
_DRAIN_LIMIT_B = 1 << 20
_DRAIN_TIME_S = 2.0


@dataclass
class ServerStats:
    """Counters since start.

    Parameters
    ----------
    connections, requests, errors, oversized, reloads, reload_failures : int, optional

    Examples
    --------
    >>> ServerStats()
    ServerStats(connections=0, requests=0, errors=0, oversized=0, reloads=0, reload_failures=0)
    """

    connections: int = 0
    requests: int = 0
    errors: int = 0
    oversized: int = 0
    reloads: int = 0
    reload_failures: int = 0


def fabric_signature(ibnetdiscover, lft_dir=None) -> tuple:
    """Size, mtime and inode of the dump and of every visible file in ``lft_dir``: changes when any is rewritten.

    Parameters
    ----------
    ibnetdiscover : str or path
    lft_dir : str or path, optional

    Returns
    -------
    tuple
        Comparable with ``==``; a missing file or directory is part of it too.

    Examples
    --------
    >>> sig = fabric_signature("tests/data/ib/tree2/ibnetdiscover.txt", "tests/data/ib/tree2/lft")
    >>> sig[0][0], [f[0] for f in sig[1]]
    ('ibnetdiscover.txt', ['ibroute-leaf1.txt', 'ibroute-leaf2.txt', 'ibroute-leaf3.txt', 'ibroute-top.txt'])
    >>> sig == fabric_signature("tests/data/ib/tree2/ibnetdiscover.txt", "tests/data/ib/tree2/lft")
    True
    """

    def one(p: Path):
        try:
            st = p.stat()
        except OSError:
            return (p.name, None)
        return (p.name, st.st_size, st.st_mtime_ns, st.st_ino)

    sig = [one(Path(ibnetdiscover))]
    if lft_dir is not None:
        d = Path(lft_dir)
        try:
            names = sorted(f for f in os.listdir(d) if not f.startswith(".") and not f.endswith("~"))
        except OSError:
            names = None
        sig.append(("<dir>", None) if names is None else tuple(one(d / f) for f in names))
    return tuple(sig)


def answer(fabric: IBFabric, line: str, generation: int = 0) -> str:
    """The reply to one request line (without the newline), computed on ``fabric`` only.

    Parameters
    ----------
    fabric : IBFabric
    line : str
        The request.
    generation : int, optional
        Reported by ``info`` (how many times the fabric was loaded).

    Returns
    -------
    str
        The route line, ``ok ...`` for ``info``, or ``error: <why>``.

    Examples
    --------
    >>> fab = load_fabric("tests/data/ib/tree2/ibnetdiscover.txt", "tests/data/ib/tree2/lft")
    >>> answer(fab, "query node001:node002")
    'node001 0x0000000000200001 node002'
    >>> answer(fab, "info", generation=3)
    'ok generation=3 hosts=9 switches=4 routing=lft'
    >>> answer(fab, "query node001")
    "error: expected hosta:hostb, got 'node001'"
    """
    parts = line.strip().split(None, 1)
    if not parts:
        return "error: empty request (expected 'query hosta:hostb')"
    cmd = parts[0].lower()
    if cmd == "query":
        if len(parts) < 2:
            return "error: expected 'query hosta:hostb'"
        try:
            src, dst = parse_query(parts[1])
            return route(fabric, src, dst).line()
        except TopoplanError as exc:
            return f"error: {_one_line(str(exc))}"
    if cmd == "info" and len(parts) == 1:
        return (f"ok generation={generation} hosts={len(fabric.hosts)} switches={len(fabric.switches)} "
                f"routing={fabric.routing}")
    return f"error: unknown request {_one_line(parts[0])[:40]!r} (expected 'query hosta:hostb' or 'info')"


def _one_line(text: str) -> str:
    return " ".join(text.split())


class RouteServer:
    """Asyncio TCP server for route queries with hot reload of the fabric dumps.

    Parameters
    ----------
    ibnetdiscover : path of the ``ibnetdiscover`` dump.
    lft_dir : directory of ``ibroute`` dumps, or None (shortest-path routes).
    host : address to bind; loopback by default.
    port : TCP port; 0 picks a free one (see :meth:`start`'s result).
    poll_s : how often the dump files are checked for changes.
    settle_s : how long the files must stay unchanged before a reload.
    conflict_wait_s : how long a reload waits for LFTs that contradict the new dump.
    idle_timeout_s : a connection silent this long is closed (None: never).
    log : called with one line per event (start, reload, failure); default stderr.

    Examples
    --------
    >>> srv = RouteServer("tests/data/ib/tree2/ibnetdiscover.txt", "tests/data/ib/tree2/lft", log=lambda line: None)
    >>> srv.load().routing, srv.stats.requests
    ('lft', 0)

    See the module docstring for a server started and queried.
    """

    def __init__(self, ibnetdiscover, lft_dir=None, *, host: str = "127.0.0.1", port: int = 0,
                 poll_s: float = 1.0, settle_s: float = 0.5, conflict_wait_s: float = 30.0,
                 idle_timeout_s: float | None = 600.0, log: Callable[[str], None] | None = None):
        self.ibnetdiscover = Path(ibnetdiscover)
        self.lft_dir = Path(lft_dir) if lft_dir is not None else None
        self.host, self.port = host, port
        self.poll_s, self.settle_s, self.conflict_wait_s = poll_s, settle_s, conflict_wait_s
        self.idle_timeout_s = idle_timeout_s
        self.log = log or (lambda msg: print(f"{time.strftime('%H:%M:%S')} {msg}", file=sys.stderr, flush=True))
        self.stats = ServerStats()
        self.generation = 0
        self._fabric: IBFabric | None = None
        self._sig: tuple | None = None
        self._bad_sig: tuple | None = None
        self._conflict_since: float | None = None
        self._server: asyncio.base_events.Server | None = None
        self._tasks: list[asyncio.Task] = []
        self._conns: dict[asyncio.StreamWriter, float] = {}  # writer -> last activity (loop time)

    @property
    def fabric(self) -> IBFabric:
        """The fabric queries are answered from (one reference, swapped whole on reload)."""
        if self._fabric is None:
            raise RuntimeError("server not started")
        return self._fabric

    def load(self) -> IBFabric:
        """Load the fabric now (blocking); TopoplanError when the dumps are bad."""
        sig = fabric_signature(self.ibnetdiscover, self.lft_dir)
        fab = load_fabric(self.ibnetdiscover, self.lft_dir)
        self._fabric, self._sig = fab, sig
        self.generation += 1
        return fab

    async def start(self) -> tuple[str, int]:
        """Load the fabric, bind, and start serving and watching; returns the bound (host, port)."""
        if self._fabric is None:
            self.load()
        # A deep backlog: hundreds of clients connecting at once must not wait for SYN retries.
        self._server = await asyncio.start_server(self._client, self.host, self.port, limit=MAX_LINE_B,
                                                  backlog=1024, reuse_address=True)
        sock = self._server.sockets[0].getsockname()
        self.port = sock[1]
        self._tasks = [asyncio.create_task(self._watch())]
        if self.idle_timeout_s:
            self._tasks.append(asyncio.create_task(self._reap_idle()))
        fab = self.fabric
        self.log(f"serving {len(fab.hosts)} hosts, {len(fab.switches)} switches (routes: {fab.routing}) "
                 f"on {sock[0]}:{sock[1]}")
        return sock[0], sock[1]

    async def stop(self) -> None:
        """Stop listening, close every connection, stop the watcher."""
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            try:
                await t
            except asyncio.CancelledError:
                pass
        self._tasks = []
        if self._server is not None:
            self._server.close()
        for w in list(self._conns):
            w.close()
        for w in list(self._conns):
            try:
                await w.wait_closed()
            except (ConnectionError, OSError):
                pass
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def serve_until(self, stop: asyncio.Event) -> None:
        """Start, serve until ``stop`` is set, then stop."""
        await self.start()
        try:
            await stop.wait()
        finally:
            await self.stop()

    # -- clients ------------------------------------------------------------------

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.stats.connections += 1
        loop = asyncio.get_running_loop()
        self._conns[writer] = loop.time()
        try:
            while True:
                try:
                    raw = await reader.readuntil(b"\n")
                except asyncio.IncompleteReadError as exc:
                    raw = exc.partial  # the client closed; answer a last unterminated line
                    if not raw.strip():
                        break
                except asyncio.LimitOverrunError:
                    await self._refuse_oversized(reader, writer)
                    break
                self._conns[writer] = loop.time()
                self.stats.requests += 1
                fab, gen = self._fabric, self.generation  # one read: the old or the new fabric, never both
                reply = answer(fab, raw.decode("utf-8", errors="replace"), gen)
                if reply.startswith("error:"):
                    self.stats.errors += 1
                writer.write(reply.encode("utf-8") + b"\n")
                await writer.drain()
                if not raw.endswith(b"\n"):
                    break
        except (ConnectionError, OSError):
            pass  # the client went away mid-answer
        finally:
            self._conns.pop(writer, None)
            writer.close()
            try:
                await writer.wait_closed()
            except (ConnectionError, OSError):
                pass

    async def _refuse_oversized(self, reader, writer) -> None:
        """Answer an oversized line, shut our side, and drop what the client still sends (bounded)."""
        self.stats.oversized += 1
        self.stats.errors += 1
        writer.write(f"error: request line longer than {MAX_LINE_B} bytes; closing\n".encode())
        await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
        # Reading the rest avoids a TCP reset that could destroy the error line before the client reads it.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _DRAIN_TIME_S
        dropped = 0
        while dropped < _DRAIN_LIMIT_B:
            left = deadline - loop.time()
            if left <= 0:
                break
            try:
                chunk = await asyncio.wait_for(reader.read(65536), left)
            except (asyncio.TimeoutError, ConnectionError, OSError):
                break
            if not chunk:
                break
            dropped += len(chunk)

    async def _reap_idle(self) -> None:
        loop = asyncio.get_running_loop()
        period = max(0.05, self.idle_timeout_s / 4)
        while True:
            await asyncio.sleep(period)
            now = loop.time()
            for w, last in list(self._conns.items()):
                if now - last > self.idle_timeout_s:
                    w.close()

    # -- reload -------------------------------------------------------------------

    async def _watch(self) -> None:
        loop = asyncio.get_running_loop()
        seen, seen_at = self._sig, loop.time()
        while True:
            await asyncio.sleep(self.poll_s)
            sig = fabric_signature(self.ibnetdiscover, self.lft_dir)
            now = loop.time()
            if sig != seen:
                seen, seen_at = sig, now  # still changing: wait for the files to settle
                continue
            if sig == self._sig or sig == self._bad_sig or now - seen_at < self.settle_s:
                continue
            await self.reload(sig)

    async def reload(self, sig: tuple | None = None) -> bool:
        """Rebuild the fabric from the files and swap it in; False when it was kept (bad or inconsistent dumps)."""
        loop = asyncio.get_running_loop()
        if sig is None:
            sig = fabric_signature(self.ibnetdiscover, self.lft_dir)
        try:
            fab = await loop.run_in_executor(None, load_fabric, self.ibnetdiscover, self.lft_dir)
        except TopoplanError as exc:
            self._bad_sig = sig
            self.stats.reload_failures += 1
            self.log(f"reload failed, still serving generation {self.generation}: {exc}")
            return False
        if fabric_signature(self.ibnetdiscover, self.lft_dir) != sig:
            return False  # rewritten while we read it: the watcher sees the new state next
        if fab.lft_conflicts:
            now = loop.time()
            if self._conflict_since is None:
                self._conflict_since = now
                self.log(f"LFTs contradict the new dump ({fab.lft_conflicts[0]}); waiting up to "
                         f"{self.conflict_wait_s:g} s for a consistent set")
            if now - self._conflict_since < self.conflict_wait_s:
                return False
        self._conflict_since = None
        self._fabric = fab  # the swap: one reference
        self._sig = sig
        self.generation += 1
        self.stats.reloads += 1
        self.log(f"reloaded: generation {self.generation}, {len(fab.hosts)} hosts, {len(fab.switches)} switches "
                 f"(routes: {fab.routing})")
        for msg in fab.messages():
            self.log(f"warning: {msg}")
        return True


def run_server(ibnetdiscover, lft_dir=None, *, host: str = "127.0.0.1", port: int = 0, poll_s: float = 1.0,
               settle_s: float = 0.5, log=None) -> None:
    """Serve until SIGINT or SIGTERM (the ``topoplan serve`` command).

    Parameters
    ----------
    ibnetdiscover : str or path
    lft_dir : str or path, optional
    host : str, optional
    port : int, optional
        0 picks a free port (logged).
    poll_s, settle_s : float, optional
        See :class:`RouteServer`.
    log : callable, optional

    Raises
    ------
    TopoplanError
        When the fabric cannot be loaded at start (checked before binding).

    Examples
    --------
    It blocks until a signal, so it is not run here (the module docstring runs the same server
    with :class:`RouteServer` and stops it):

    >>> run_server("tests/data/ib/tree2/ibnetdiscover.txt", "tests/data/ib/tree2/lft", port=4711)  # doctest: +SKIP
    """
    import signal

    srv = RouteServer(ibnetdiscover, lft_dir, host=host, port=port, poll_s=poll_s, settle_s=settle_s, log=log)
    fab = srv.load()  # bad dumps fail here, before binding
    for msg in fab.messages():
        srv.log(f"warning: {msg}")

    async def main():
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for s in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(s, stop.set)
            except (NotImplementedError, RuntimeError):
                pass
        await srv.serve_until(stop)
        srv.log(f"stopped after {srv.stats.requests} requests on {srv.stats.connections} connections")

    asyncio.run(main())
