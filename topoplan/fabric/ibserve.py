"""The route query service of 002 section IV-A: a TCP server answering ``query hosta:hostb``.

Protocol (one request per line, UTF-8, at most :data:`MAX_LINE_B` bytes before the newline)::

    query hosta:hostb   ->  hosta <switch guid> ... <switch guid> hostb
    info                ->  ok generation=3 hosts=12 switches=6 routing=lft lft_pairs=132 lft_ok=132 ...
    anything else       ->  error: <why>

A query whose forwarding tables loop or dead-end gets ``error: no route from
... (naming the switch and the LID)``, never a shortest path in its place (see
:func:`~topoplan.fabric.ibfabric.route`). ``info`` says how the fabric routes
(``routing=lft`` or ``shortest-path``), with LFTs how many ordered host pairs
the tables route (``lft_ok``), leave to shortest paths (``lft_fallback``:
switches without a usable table), loop (``lft_loop``) or dead-end
(``lft_dead_end``), and, from a running server, ``clients`` and
``max_clients`` and the state of the last reload: ``reload=ok``, or
``reload=failed`` (or ``waiting``, for LFTs that contradict a new dump) with
``reload_at=<UTC time>`` and ``reload_error="<why>"`` (JSON-quoted, file names
without their directories).

A line longer than :data:`MAX_LINE_B` gets ``error: ...`` and the connection
is closed cleanly (our side shut down first, the rest of the client's data
read and dropped, so the client sees the error line rather than a reset).

The fabric (an ``ibnetdiscover`` dump plus an optional directory of
``ibroute`` dumps) is loaded at start and reloaded when those files change:
the watcher polls their size/mtime/inode, waits until they have been still
for ``settle_s`` (an administrator's script rewrites several files), builds
the new :class:`~topoplan.fabric.ibfabric.IBFabric` completely in a worker thread, and
then swaps one reference. Each request reads that reference once, so an
answer comes from the old or the new fabric, never from a mix. A dump that
fails to parse keeps the old fabric (and is retried when it changes again;
``info`` reports the failure and its time until then); LFTs that contradict
the new dump (a half-finished re-dump) delay the swap for up to
``conflict_wait_s``.

Descriptors and idle clients
----------------------------
Every client holds a file descriptor, and the process has ``ulimit -n`` of
them. The server therefore keeps at most ``max_clients`` connections open
(default: the ``RLIMIT_NOFILE`` soft limit less :data:`FD_RESERVE`, so it
always has descriptors left to accept and answer, to read the dumps and to
log). When a new client arrives at the limit, the **oldest idle client is
closed** (the one whose last request, or connection, is longest ago; a
client being answered is not idle) and the new one is served: fresh clients
are answered even when thousands of idle connections pile up. Only when
every open client is in the middle of a request is the new one refused, with
the single line ``error: busy: ...``. A closed idle client sees the end of
the stream (EOF) and, like any keep-alive client, reconnects. Independently,
a client silent for ``idle_timeout_s`` (default 60 s; None or 0: never) is
closed. The server accepts connections itself, a few per loop iteration, so
asyncio never logs a traceback per failed ``accept()``: if ``accept()`` still
fails for lack of descriptors (``EMFILE``/``ENFILE``, e.g. the system-wide
table is full), the server closes its oldest idle client, pauses accepting
for 0.1 s and logs one line at most every ``overload_log_s``; other event
loop errors are logged the same way, one line, rate-limited. SIGTERM and
SIGINT close every client and end :func:`run_server` normally (exit status 0).

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
import errno
import json
import os
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from topoplan.core.errors import TopoplanError
from topoplan.fabric.ibfabric import IBFabric, lft_health, load_fabric, parse_query, route

__all__ = ["MAX_LINE_B", "FD_RESERVE", "DEFAULT_IDLE_TIMEOUT_S", "ServerStats", "fabric_signature", "answer",
           "client_limit", "RouteServer", "run_server"]

#: Longest request line accepted, newline excluded.
MAX_LINE_B = 4096
#: Descriptors the default client limit leaves for everything but client connections: stdio, the
#: event loop, listening sockets, dump files read on reload, and connections accepted but not yet
#: closed in one loop iteration (at most :data:`_ACCEPT_BATCH`).
FD_RESERVE = 64
#: Default idle timeout (seconds): a client silent this long is closed.
DEFAULT_IDLE_TIMEOUT_S = 60.0
#: After an oversized line, how much of the client's remaining data is read and dropped before closing.
_DRAIN_LIMIT_B = 1 << 20
_DRAIN_TIME_S = 2.0
#: Connections accepted per loop iteration (the listening socket stays readable while more wait).
_ACCEPT_BATCH = 16
#: How long accepting pauses after accept() ran out of descriptors.
_ACCEPT_PAUSE_S = 0.1
#: How long a closing client may take to flush its last answers before it is cut off.
_CLOSE_WAIT_S = 5.0
#: Listen backlog asked for; the kernel caps it at net.core.somaxconn (4096 on Linux since 5.4).
_BACKLOG = 4096
_OUT_OF_RESOURCES = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}


@dataclass
class ServerStats:
    """Counters since start.

    Parameters
    ----------
    connections, requests, errors, oversized, reloads, reload_failures : int, optional
    evicted : int, optional
        Idle clients closed to make room for a new one at the client limit.
    reaped : int, optional
        Clients closed after the idle timeout.
    refused : int, optional
        New clients refused with ``error: busy`` (at the limit with no idle client).
    accept_errors : int, optional
        ``accept()`` failures (descriptors or memory exhausted).

    Examples
    --------
    >>> ServerStats()
    ServerStats(connections=0, requests=0, errors=0, oversized=0, reloads=0, reload_failures=0, evicted=0, reaped=0, refused=0, accept_errors=0)
    """

    connections: int = 0
    requests: int = 0
    errors: int = 0
    oversized: int = 0
    reloads: int = 0
    reload_failures: int = 0
    evicted: int = 0
    reaped: int = 0
    refused: int = 0
    accept_errors: int = 0


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


def answer(fabric: IBFabric, line: str, generation: int = 0, extra: str | Callable[[], str] = "") -> str:
    """The reply to one request line (without the newline), computed on ``fabric`` only.

    Parameters
    ----------
    fabric : IBFabric
    line : str
        The request.
    generation : int, optional
        Reported by ``info`` (how many times the fabric was loaded).
    extra : str or callable, optional
        More ``key=value`` words for ``info`` (a running server's clients and reload state);
        a callable is only called for ``info``.

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
    'ok generation=3 hosts=9 switches=4 routing=lft lft_pairs=72 lft_ok=72 lft_fallback=0 lft_loop=0 lft_dead_end=0'
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
        out = (f"ok generation={generation} hosts={len(fabric.hosts)} switches={len(fabric.switches)} "
               f"routing={fabric.routing}")
        if fabric.lfts:
            out += " " + lft_health(fabric).fields()
        more = extra() if callable(extra) else extra
        return f"{out} {more}" if more else out
    return f"error: unknown request {_one_line(parts[0])[:40]!r} (expected 'query hosta:hostb' or 'info')"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def client_limit(max_clients: int | None = None) -> int:
    """How many clients a server may keep open at once under this process's descriptor limit.

    Without ``max_clients``: the ``RLIMIT_NOFILE`` soft limit less
    :data:`FD_RESERVE` (at least 1). With it: ``max_clients`` itself, after
    raising the soft limit towards the hard limit when the clients and the
    reserve need more descriptors than the soft limit allows.

    Parameters
    ----------
    max_clients : int, optional
        The limit asked for (at least 1).

    Returns
    -------
    int

    Raises
    ------
    TopoplanError
        When ``max_clients`` is below 1, or needs more descriptors than even
        the hard limit allows.

    Examples
    --------
    >>> import resource
    >>> soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    >>> client_limit() == max(1, soft - FD_RESERVE) if soft != resource.RLIM_INFINITY else True
    True
    >>> client_limit(10)
    10
    >>> client_limit(0)
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: max_clients 0: expected at least 1
    """
    if max_clients is not None and max_clients < 1:
        raise TopoplanError(f"max_clients {max_clients}: expected at least 1")
    try:
        import resource
    except ImportError:  # no rlimits (Windows): assume the common 1,024
        return max_clients or 1024 - FD_RESERVE
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    inf = resource.RLIM_INFINITY
    soft_n = soft if soft != inf else 1 << 20
    if max_clients is None:
        return max(1, soft_n - FD_RESERVE)
    need = max_clients + FD_RESERVE
    if need > soft_n:
        if hard == inf or need <= hard:
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
                return max_clients
            except (ValueError, OSError):
                pass
        raise TopoplanError(
            f"max_clients {max_clients}: needs {need} file descriptors ({FD_RESERVE} kept for the server), but "
            f"the limit is {soft_n} (hard limit {'unlimited' if hard == inf else hard}); raise 'ulimit -n' or "
            f"ask for fewer clients")
    return max_clients


class _ClientProtocol(asyncio.StreamReaderProtocol):
    """A stream protocol that tells the server when its socket is closed (descriptor accounting)."""

    def __init__(self, reader: asyncio.StreamReader, on_closed: Callable[[], None]):
        super().__init__(reader)
        self._on_closed: Callable[[], None] | None = on_closed

    def released(self) -> None:
        cb, self._on_closed = self._on_closed, None
        if cb is not None:
            cb()

    def connection_lost(self, exc) -> None:
        try:
            super().connection_lost(exc)
        finally:
            self.released()


def _bind(host: str, port: int, backlog: int) -> list[socket.socket]:
    """Listening sockets for every address of ``host`` (port 0: one free port, the same on each)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (OSError, UnicodeError) as exc:
        raise TopoplanError(f"cannot listen on {host}:{port}: {getattr(exc, 'strerror', None) or exc}") from None
    socks: list[socket.socket] = []
    seen = set()
    try:
        for family, type_, proto, _, addr in infos:
            if (family, addr) in seen:
                continue
            seen.add((family, addr))
            if socks and port == 0:
                addr = (addr[0], socks[0].getsockname()[1], *addr[2:])
            sock = socket.socket(family, type_, proto)
            socks.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == getattr(socket, "AF_INET6", None) and hasattr(socket, "IPPROTO_IPV6"):
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(addr)
            sock.listen(backlog)
            sock.setblocking(False)
    except OSError as exc:
        for sock in socks:
            sock.close()
        raise TopoplanError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return socks


def _load_checked(ibnetdiscover, lft_dir) -> IBFabric:
    """Load a fabric and count its broken LFT routes (in the loading thread, not the event loop)."""
    fab = load_fabric(ibnetdiscover, lft_dir)
    lft_health(fab)
    return fab


def _utc(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


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
    idle_timeout_s : a connection silent this long is closed (None or 0: never).
    max_clients : connections kept open at once (None: from the descriptor limit, see
        :func:`client_limit`); at the limit a new client closes the oldest idle one.
    overload_log_s : least time between two log lines about the same overload (client limit,
        ``accept()`` out of descriptors, event loop errors).
    log : called with one line per event (start, reload, failure); default stderr.

    While serving, the running loop's exception handler is replaced by one that logs one
    rate-limited line per kind of error (restored by :meth:`stop`). Connections are accepted
    with ``loop.add_reader`` on the listening sockets (a selector event loop, as on Linux).

    Examples
    --------
    >>> srv = RouteServer("tests/data/ib/tree2/ibnetdiscover.txt", "tests/data/ib/tree2/lft", log=lambda line: None)
    >>> srv.load().routing, srv.stats.requests
    ('lft', 0)

    See the module docstring for a server started and queried.
    """

    def __init__(self, ibnetdiscover, lft_dir=None, *, host: str = "127.0.0.1", port: int = 0,
                 poll_s: float = 1.0, settle_s: float = 0.5, conflict_wait_s: float = 30.0,
                 idle_timeout_s: float | None = DEFAULT_IDLE_TIMEOUT_S, max_clients: int | None = None,
                 overload_log_s: float = 10.0, log: Callable[[str], None] | None = None):
        self.ibnetdiscover = Path(ibnetdiscover)
        self.lft_dir = Path(lft_dir) if lft_dir is not None else None
        self.host, self.port = host, port
        self.poll_s, self.settle_s, self.conflict_wait_s = poll_s, settle_s, conflict_wait_s
        self.idle_timeout_s = idle_timeout_s or None
        self._want_max_clients = max_clients
        self.max_clients = max_clients  # the limit in force, set by start()
        self.overload_log_s = overload_log_s
        self.log = log or (lambda msg: print(f"{time.strftime('%H:%M:%S')} {msg}", file=sys.stderr, flush=True))
        self.stats = ServerStats()
        self.generation = 0
        self._fabric: IBFabric | None = None
        self._sig: tuple | None = None
        self._bad_sig: tuple | None = None
        self._conflict_since: float | None = None
        self._reload_problem: tuple[str, float, str] | None = None  # (state, wall time, why)
        self._tasks: list[asyncio.Task] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listeners: list[socket.socket] = []
        self._accepting = False
        self._resume_handle: asyncio.TimerHandle | None = None
        self._stopping = False
        self._open = 0      # client sockets not closed yet (descriptors held)
        self._pending = 0   # accepted, transport not made yet
        self._idle: dict[asyncio.StreamWriter, float] = {}  # idle clients, least recently active first
        self._busy: set[asyncio.StreamWriter] = set()        # clients being answered
        self._handlers: set[asyncio.Task] = set()
        self._noted: dict[str, tuple[float, int]] = {}        # rate-limited log: key -> (last logged, suppressed)
        self._old_handler = None

    @property
    def fabric(self) -> IBFabric:
        """The fabric queries are answered from (one reference, swapped whole on reload)."""
        if self._fabric is None:
            raise RuntimeError("server not started")
        return self._fabric

    @property
    def clients(self) -> int:
        """Client connections open now (idle, being answered, or being set up)."""
        return len(self._idle) + len(self._busy) + self._pending

    def load(self) -> IBFabric:
        """Load the fabric now (blocking); TopoplanError when the dumps are bad."""
        sig = fabric_signature(self.ibnetdiscover, self.lft_dir)
        fab = _load_checked(self.ibnetdiscover, self.lft_dir)
        self._fabric, self._sig = fab, sig
        self.generation += 1
        return fab

    async def start(self) -> tuple[str, int]:
        """Load the fabric, bind, and start serving and watching; returns the bound (host, port).

        Raises TopoplanError when the dumps are bad, the port cannot be bound, or
        ``max_clients`` does not fit the descriptor limit.
        """
        if self._fabric is None:
            self.load()
        self.max_clients = client_limit(self._want_max_clients)
        loop = self._loop = asyncio.get_running_loop()
        # A deep backlog (the kernel caps it at net.core.somaxconn): thousands of clients connecting at once
        # must not wait for SYN retries.
        self._listeners = _bind(self.host, self.port, _BACKLOG)
        sock = self._listeners[0].getsockname()
        self.port = sock[1]
        self._stopping = False
        self._old_handler = loop.get_exception_handler()
        loop.set_exception_handler(self._loop_exception)
        self._resume_accept()
        self._tasks = [asyncio.create_task(self._watch())]
        if self.idle_timeout_s:
            self._tasks.append(asyncio.create_task(self._reap_idle()))
        fab = self.fabric
        idle = f"after {self.idle_timeout_s:g} s" if self.idle_timeout_s else "never"
        self.log(f"at most {self.max_clients} clients at once (the oldest idle one is closed for a new one); "
                 f"idle clients closed {idle}")
        self.log(f"serving {len(fab.hosts)} hosts, {len(fab.switches)} switches (routes: {fab.routing}) "
                 f"on {sock[0]}:{sock[1]}")
        return sock[0], sock[1]

    async def stop(self) -> None:
        """Stop listening, close every connection, stop the watcher."""
        self._stopping = True
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            try:
                await t
            except asyncio.CancelledError:
                pass
        self._tasks = []
        self._pause_accept()
        for s in self._listeners:
            s.close()
        self._listeners = []
        for w in list(self._idle) + list(self._busy):
            w.close()
        handlers = list(self._handlers)
        if handlers:
            _, late = await asyncio.wait(handlers, timeout=_CLOSE_WAIT_S)
            for t in late:
                t.cancel()
            if late:
                await asyncio.wait(late, timeout=1.0)
        if self._loop is not None:
            self._loop.set_exception_handler(self._old_handler)
            self._loop = None

    async def serve_until(self, stop: asyncio.Event) -> None:
        """Start, serve until ``stop`` is set, then stop."""
        await self.start()
        try:
            await stop.wait()
        finally:
            await self.stop()

    # -- accepting ----------------------------------------------------------------

    def _pause_accept(self, for_s: float | None = None) -> None:
        if self._accepting and self._loop is not None:
            for s in self._listeners:
                self._loop.remove_reader(s.fileno())
            self._accepting = False
        if self._resume_handle is not None:
            self._resume_handle.cancel()
            self._resume_handle = None
        if for_s is not None and not self._stopping and self._loop is not None:
            self._resume_handle = self._loop.call_later(for_s, self._resume_accept)

    def _resume_accept(self) -> None:
        self._resume_handle = None
        if self._accepting or self._stopping or self._loop is None:
            return
        for s in self._listeners:
            self._loop.add_reader(s.fileno(), self._on_accept, s)
        self._accepting = True

    def _released(self) -> None:
        """A client socket was closed: one descriptor back."""
        self._open -= 1
        if not self._accepting and self._resume_handle is None and not self._stopping:
            self._resume_accept()  # paused at the descriptor cap

    def _on_accept(self, lsock: socket.socket) -> None:
        """Accept a few waiting connections (called when the listening socket is readable)."""
        for _ in range(_ACCEPT_BATCH):
            if self._open >= self.max_clients + _ACCEPT_BATCH:
                self._pause_accept()  # closings still under way; _released() resumes
                return
            try:
                conn, _ = lsock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:
                continue
            except OSError as exc:
                self.stats.accept_errors += 1
                if exc.errno in _OUT_OF_RESOURCES:
                    n = self.clients
                    freed = self._evict_oldest_idle(at_limit=False)
                    self._note("accept", f"accept() failed: {exc.strerror or exc} ({n} clients open"
                                         f"{', closed the oldest idle one' if freed else ''}); pausing new "
                                         f"connections for {_ACCEPT_PAUSE_S:g} s")
                    self._pause_accept(_ACCEPT_PAUSE_S)
                else:
                    self._note("accept-other", f"accept() failed: {exc.strerror or exc}")
                return
            self._open += 1
            if self.clients >= self.max_clients and not self._evict_oldest_idle():
                self._refuse(conn)
                continue
            self._pending += 1
            task = asyncio.get_running_loop().create_task(self._attach(conn))
            self._handlers.add(task)
            task.add_done_callback(self._handlers.discard)

    def _evict_oldest_idle(self, at_limit: bool = True) -> bool:
        """Close the least recently active idle client (False when every client is busy)."""
        if not self._idle:
            return False
        w = next(iter(self._idle))
        del self._idle[w]
        w.close()
        self.stats.evicted += 1
        if at_limit:
            self._note("evict", f"at the client limit ({self.max_clients}): closing the oldest idle client for "
                                f"each new one ({self.stats.evicted} so far)")
        return True

    def _refuse(self, conn: socket.socket) -> None:
        """At the limit with every client busy: one ``error: busy`` line, then close."""
        self.stats.refused += 1
        self._note("refuse", f"at the client limit ({self.max_clients}) with every client busy: refusing new "
                             f"clients ({self.stats.refused} so far)")
        try:
            conn.setblocking(False)
            conn.send(f"error: busy: {self.max_clients} clients are being answered; try again later\n".encode())
            conn.shutdown(socket.SHUT_WR)
            for _ in range(16):  # drop what the client already sent, so the close is not a reset
                if not conn.recv(65536):
                    break
        except OSError:
            pass
        finally:
            conn.close()
            self._released()

    async def _attach(self, conn: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=MAX_LINE_B, loop=loop)
        proto = _ClientProtocol(reader, self._released)
        try:
            transport, _ = await loop.connect_accepted_socket(lambda: proto, conn)
        except BaseException:
            conn.close()
            proto.released()
            raise
        finally:
            self._pending -= 1
        if self._stopping:
            transport.close()
            return
        await self._client(reader, asyncio.StreamWriter(transport, proto, reader, loop))

    # -- clients ------------------------------------------------------------------

    def _info_extra(self) -> str:
        out = f"clients={self.clients} max_clients={self.max_clients}"
        if self._reload_problem is None:
            return out + " reload=ok"
        state, at, why = self._reload_problem
        return f"{out} reload={state} reload_at={_utc(at)} reload_error={json.dumps(why)}"

    def _public(self, text: str) -> str:
        """A message for network clients: file names without their directories, one line."""
        if self.lft_dir is not None:
            text = text.replace(str(self.lft_dir) + os.sep, self.lft_dir.name + "/")
            text = text.replace(str(self.lft_dir), self.lft_dir.name)
        text = text.replace(str(self.ibnetdiscover), self.ibnetdiscover.name)
        return _one_line(text)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.stats.connections += 1
        loop = asyncio.get_running_loop()
        transport = writer.transport
        self._idle[writer] = loop.time()
        try:
            while True:
                try:
                    raw = await reader.readuntil(b"\n")
                except asyncio.IncompleteReadError as exc:
                    raw = exc.partial  # the client closed; answer a last unterminated line
                    if not raw.strip():
                        break
                except asyncio.LimitOverrunError:
                    if self._idle.pop(writer, None) is None:
                        break  # closed by the server meanwhile
                    self._busy.add(writer)
                    await self._refuse_oversized(reader, writer)
                    break
                if transport.is_closing() or self._idle.pop(writer, None) is None:
                    break  # closed by the server (idle timeout, client limit, shutdown)
                self._busy.add(writer)
                self.stats.requests += 1
                fab, gen = self._fabric, self.generation  # one read: the old or the new fabric, never both
                reply = answer(fab, raw.decode("utf-8", errors="replace"), gen, self._info_extra)
                if reply.startswith("error:"):
                    self.stats.errors += 1
                writer.write(reply.encode("utf-8") + b"\n")
                if transport.get_write_buffer_size():  # the client does not read: wait, but not forever
                    await asyncio.wait_for(writer.drain(), self.idle_timeout_s or DEFAULT_IDLE_TIMEOUT_S)
                self._busy.discard(writer)
                if not raw.endswith(b"\n") or self._stopping:
                    break
                self._idle[writer] = loop.time()  # to the end: the most recently active
        except (ConnectionError, OSError, asyncio.TimeoutError):
            pass  # the client went away mid-answer, or stopped reading
        finally:
            self._idle.pop(writer, None)
            self._busy.discard(writer)
            writer.close()
            if transport.get_write_buffer_size():
                try:
                    await asyncio.wait_for(writer.wait_closed(), _CLOSE_WAIT_S)
                except (ConnectionError, OSError, asyncio.TimeoutError):
                    transport.abort()
            else:
                try:
                    await writer.wait_closed()
                except (ConnectionError, OSError):
                    pass

    async def _refuse_oversized(self, reader, writer) -> None:
        """Answer an oversized line, shut our side, and drop what the client still sends (bounded)."""
        self.stats.oversized += 1
        self.stats.errors += 1
        writer.write(f"error: request line longer than {MAX_LINE_B} bytes; closing\n".encode())
        try:
            await asyncio.wait_for(writer.drain(), _DRAIN_TIME_S)
        except asyncio.TimeoutError:
            return  # a client that does not read gets no more time
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
        period = min(5.0, max(0.05, self.idle_timeout_s / 4))
        while True:
            await asyncio.sleep(period)
            cutoff = loop.time() - self.idle_timeout_s
            while self._idle:
                w, last = next(iter(self._idle.items()))
                if last > cutoff:
                    break  # the rest were active later
                del self._idle[w]
                w.close()
                self.stats.reaped += 1

    # -- logging ------------------------------------------------------------------

    def _note(self, key: str, msg: str) -> None:
        """Log ``msg`` unless a message of this kind was logged less than ``overload_log_s`` ago."""
        now = time.monotonic()
        last, suppressed = self._noted.get(key, (None, 0))
        if last is not None and now - last < self.overload_log_s:
            self._noted[key] = (last, suppressed + 1)
            return
        more = f" [{suppressed} similar in the last {now - last:.0f} s]" if suppressed else ""
        self._noted[key] = (now, 0)
        self.log(msg + more)

    def _loop_exception(self, loop, context: dict) -> None:
        """Event loop errors: one rate-limited line each, never a traceback per event."""
        msg = str(context.get("message") or "error")
        exc = context.get("exception")
        detail = f": {type(exc).__name__}: {exc}" if exc is not None else ""
        self._note("loop:" + msg[:60], _one_line(f"event loop: {msg}{detail}")[:300])

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
            fab = await loop.run_in_executor(None, _load_checked, self.ibnetdiscover, self.lft_dir)
        except TopoplanError as exc:
            self._bad_sig = sig
            self.stats.reload_failures += 1
            self._reload_problem = ("failed", time.time(), self._public(str(exc)))
            self.log(f"reload failed, still serving generation {self.generation}: {exc}")
            return False
        if fabric_signature(self.ibnetdiscover, self.lft_dir) != sig:
            return False  # rewritten while we read it: the watcher sees the new state next
        if fab.lft_conflicts:
            now = loop.time()
            if self._conflict_since is None:
                self._conflict_since = now
                self._reload_problem = ("waiting", time.time(), self._public(
                    f"LFTs contradict the new dump ({fab.lft_conflicts[0]}); waiting up to "
                    f"{self.conflict_wait_s:g} s for a consistent set"))
                self.log(f"LFTs contradict the new dump ({fab.lft_conflicts[0]}); waiting up to "
                         f"{self.conflict_wait_s:g} s for a consistent set")
            if now - self._conflict_since < self.conflict_wait_s:
                return False
        self._conflict_since = None
        self._reload_problem = None
        self._fabric = fab  # the swap: one reference
        self._sig = sig
        self.generation += 1
        self.stats.reloads += 1
        self.log(f"reloaded: generation {self.generation}, {len(fab.hosts)} hosts, {len(fab.switches)} switches "
                 f"(routes: {fab.routing})")
        for msg in fab.messages() + lft_health(fab).messages():
            self.log(f"warning: {msg}")
        return True


def run_server(ibnetdiscover, lft_dir=None, *, host: str = "127.0.0.1", port: int = 0, poll_s: float = 1.0,
               settle_s: float = 0.5, idle_timeout_s: float | None = DEFAULT_IDLE_TIMEOUT_S,
               max_clients: int | None = None, log=None) -> None:
    """Serve until SIGINT or SIGTERM (the ``topoplan serve`` command), then close every client and return.

    Parameters
    ----------
    ibnetdiscover : str or path
    lft_dir : str or path, optional
    host : str, optional
    port : int, optional
        0 picks a free port (logged).
    poll_s, settle_s : float, optional
        See :class:`RouteServer`.
    idle_timeout_s : float, optional
        Close clients silent this long (None or 0: never).
    max_clients : int, optional
        Connections kept open at once (default: from ``ulimit -n``, see :func:`client_limit`).
    log : callable, optional

    Raises
    ------
    TopoplanError
        When the fabric cannot be loaded (checked before binding), the port
        cannot be bound, or ``max_clients`` does not fit the descriptor limit.

    Examples
    --------
    It blocks until a signal, so it is not run here (the module docstring runs the same server
    with :class:`RouteServer` and stops it):

    >>> run_server("tests/data/ib/tree2/ibnetdiscover.txt", "tests/data/ib/tree2/lft", port=4711)  # doctest: +SKIP
    """
    import signal

    srv = RouteServer(ibnetdiscover, lft_dir, host=host, port=port, poll_s=poll_s, settle_s=settle_s,
                      idle_timeout_s=idle_timeout_s, max_clients=max_clients, log=log)
    client_limit(max_clients)  # a limit that cannot fit fails here, before loading
    fab = srv.load()  # bad dumps fail here, before binding
    for msg in fab.messages() + lft_health(fab).messages():
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
        st = srv.stats
        srv.log(f"stopped after {st.requests} requests on {st.connections} connections ({st.evicted} idle clients "
                f"closed at the client limit, {st.reaped} after the idle timeout, {st.refused} refused busy, "
                f"{st.accept_errors} failed accepts)")

    asyncio.run(main())
