"""Read OTF2 traces (Score-P, and other tools writing OTF2) into a :class:`~topoplan.traffic.trace.Trace`.

OTF2 is the trace format of Score-P (``scorep-*/traces.otf2``), also read by Vampir and
Scalasca. This reader maps its MPI events, through the ``otf2`` Python package (PyPI
``otf2``), to the rows of ``shared/formats/trace.md``:

=====================================  ==================================================
OTF2 event                             row
=====================================  ==================================================
MpiSend / MpiRecv                      ``send`` / ``recv`` (both in one call region:
                                       ``sendrecv``, as MPI_Sendrecv is recorded)
MpiIsend, MpiIsendComplete             ``isend``, then a ``wait`` (``req`` 1)
MpiIrecvRequest, MpiIrecv              ``irecv``, then a ``wait`` (``req`` 0); the irecv
                                       row gets the source, tag and size of the message
                                       (known only at completion)
MpiIrecv without its request           ``recv`` at the completion
MpiProbe + MpiMrecv,                   ``recv``; ``irecv`` and ``wait``
MpiImrecvRequest + MpiImrecv
MpiCollectiveBegin / End               the collective (its ``collectiveOp``), bytes as
                                       the format counts them (below)
=====================================  ==================================================

Ranks are MPI_COMM_WORLD ranks: a location's rank is its position in the MPI
``COMM_LOCATIONS`` group (threads of a process share its rank), and a peer's or
root's rank in a communicator is translated through the communicator's group.
Communicators other than the world are listed in ``Trace.communicators``
(``MPI_COMM_SELF`` gets one id per rank). Times are seconds from the trace's
``global_offset`` (clock properties: ticks / ``timer_resolution``). A row spans
the MPI function's region (its ``Enter`` to its ``Leave``); an event outside any
MPI region spans itself (a collective, its begin to its end).

OTF2 records a collective's bytes sent and received by each rank (Score-P's
counting); the row's ``bytes`` is recovered from them: ``bcast`` and ``scatter``
the bytes a rank receives, ``reduce`` and ``gather`` those it contributes,
``allreduce``, ``allgather(v)``, ``alltoall`` and ``reduce_scatter`` the total sent
(received) divided by the communicator's size. That division assumes no
``MPI_IN_PLACE``: a call in place comes out ``(n-1)/n`` of its size.
``alltoallv``/``alltoallw`` record only the rank's total, written as one
``alltoallv`` row per destination with an equal share each.

Events that move no data (communicator creation, failed tests, probes without a
matched receive, and everything not MPI: regions, metrics, threads, I/O) make no
row. Other MPI events (one-sided RMA, nonblocking collectives, cancelled requests,
``scan``/``exscan``) are kept as rows topoplan does not model and counted in
``Trace.unknown_ops``, which :func:`~topoplan.traffic.sources.load_source` reports.

An archive is refused, in one line naming it, rather than read in part: when the
OTF2 library fails anywhere (opening it, its definitions, its events: an event
file cut short, a missing ``traces/`` directory; the library's own error lines
are kept from the terminal and its first one is the message), when a value is
out of range (sizes over the limit of the CSV readers,
:func:`~topoplan.traffic.trace.check_limits`; a peer or root outside its
communicator; a timestamp past 2^63 ticks), when it holds no MPI communication
topoplan models, and when its calls contradict each other
(:func:`~topoplan.traffic.trace.check_calls`).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from topoplan.core.errors import TopoplanError
from topoplan.core.extras import require
from topoplan.traffic.trace import (OP_CODE, UNKNOWN_OP, Trace, call_namer, call_order, check_calls, check_limits,
                                    check_times)

__all__ = ["read_otf2", "collective_bytes"]

_U32 = 0xFFFFFFFF
_U64 = 0xFFFFFFFFFFFFFFFF

# events that carry no communication: no row, no count
_QUIET_EXACT = {"BufferFlush", "MeasurementOnOff", "Metric", "MpiRequestTest", "CommCreate", "CommDestroy",
                "Enter", "Leave"}
_QUIET_PREFIX = ("Omp", "Thread", "Io", "CallingContext", "Parameter", "Program")
# collective ops that make or free communicators and windows: synchronisation, no data
_HANDLE_OPS = {"CREATE_HANDLE", "DESTROY_HANDLE", "ALLOCATE", "DEALLOCATE", "CREATE_HANDLE_AND_ALLOCATE",
               "DESTROY_HANDLE_AND_DEALLOCATE"}
_COLL_OP = {"BARRIER": "barrier", "BCAST": "bcast", "GATHER": "gather", "GATHERV": "gather", "SCATTER": "scatter",
            "SCATTERV": "scatter", "ALLGATHER": "allgather", "ALLGATHERV": "allgatherv", "ALLTOALL": "alltoall",
            "ALLTOALLV": "alltoallv", "ALLTOALLW": "alltoallv", "ALLREDUCE": "allreduce", "REDUCE": "reduce",
            "REDUCE_SCATTER": "reduce_scatter", "REDUCE_SCATTER_BLOCK": "reduce_scatter", "SCAN": "scan",
            "EXSCAN": "exscan"}
_ROOTED = {"bcast", "gather", "scatter", "reduce"}


def _name(enum_value) -> str:
    """``CollectiveOp.BCAST`` -> ``"BCAST"`` (the otf2 enums print as ``Type.NAME``)."""
    return str(enum_value).rsplit(".", 1)[-1]


def collective_bytes(op: str, sent: float, received: float, size: int, me: int, root: int) -> float:
    """The ``bytes`` of a collective row from the bytes one rank sent and received (OTF2's counting).

    Parameters
    ----------
    op : str
        The OTF2 collective op's name (``"BCAST"``, ``"ALLREDUCE"`` ...).
    sent, received : float
        The rank's ``sizeSent`` and ``sizeReceived`` of ``MpiCollectiveEnd``.
    size : int
        Ranks in the communicator.
    me, root : int
        The rank's and the root's rank in the communicator (root -1 when none).

    Returns
    -------
    float
        As ``shared/formats/trace.md`` counts it: the buffer (``bcast``, ``reduce``,
        ``allreduce``), a rank's contribution (``gather``, ``allgather``), the bytes
        each rank receives (``scatter``), per destination (``alltoall``, and an even
        share of an ``alltoallv``), the block per rank (``reduce_scatter``); 0 for a barrier.

    Examples
    --------
    Score-P's counts of a bcast of 400 bytes from the root of 4 ranks, and of an allreduce of 128:

    >>> collective_bytes("BCAST", 1600, 400, 4, 0, 0), collective_bytes("BCAST", 0, 400, 4, 2, 0)
    (400.0, 400.0)
    >>> collective_bytes("ALLREDUCE", 512, 512, 4, 1, -1)
    128.0
    >>> collective_bytes("REDUCE", 8, 16, 2, 1, 1), collective_bytes("REDUCE", 8, 0, 2, 0, 1)
    (8.0, 8.0)
    """
    n = max(int(size), 1)
    at_root = me == root
    if op == "BARRIER":
        return 0.0
    if op == "BCAST":
        return float(received if received > 0 or not at_root else sent / n)
    if op in ("REDUCE", "GATHER", "GATHERV"):
        if not at_root or sent > 0:
            return float(sent)
        return float(received / (n - 1)) if n > 1 else 0.0
    if op in ("SCATTER", "SCATTERV"):
        if not at_root or received > 0:
            return float(received)
        return float(sent / (n - 1)) if n > 1 else 0.0
    if op in ("REDUCE_SCATTER",):
        return float(round(received / n))
    if op == "SCAN":
        return float(round(received / (me + 1)))
    if op == "EXSCAN":
        return float(round(received / me)) if me > 0 else float(round(sent / max(n - 1, 1)))
    # ALLREDUCE, ALLGATHER(V), ALLTOALL(V/W), REDUCE_SCATTER_BLOCK: n blocks sent
    return float(round(sent / n))


@dataclass
class _Frame:
    t_enter: int
    mpi: bool
    rows: list = field(default_factory=list)


@dataclass
class _Loc:
    rank: int
    stack: list = field(default_factory=list)
    requests: dict = field(default_factory=dict)   # request id -> (row, kind)
    probes: dict = field(default_factory=dict)     # message id -> (sender world rank, comm id, tag)
    coll_begin: int | None = None


def _is_mpi_region(region) -> bool:
    if region is None:
        return False
    if _name(getattr(region, "paradigm", "")) == "MPI":
        return True
    return str(getattr(region, "name", "")).upper().startswith("MPI_")


def read_otf2(path, n_ranks: int | None = None) -> Trace:
    """Read the MPI communication of an OTF2 archive as a :class:`~topoplan.traffic.trace.Trace`.

    Parameters
    ----------
    path : str or path
        The archive's anchor file (``traces.otf2``), or the directory holding it
        (Score-P's ``scorep-*`` experiment directory).
    n_ranks : int, optional
        Size of MPI_COMM_WORLD; default: the MPI locations of the archive.

    Returns
    -------
    Trace
        One row per MPI call per rank (see the module's table), sorted by rank
        then ``t_start``; rows of MPI events topoplan does not model have
        :data:`~topoplan.traffic.trace.UNKNOWN_OP` and are counted, by OTF2 event
        (or collective op), in ``unknown_ops``.

    Raises
    ------
    TopoplanError
        If the ``otf2`` package is missing, the file is not an OTF2 archive or
        cannot be read to its end, it has no MPI locations or no MPI
        communication, or a value is out of range or contradicts another (see
        the module's docstring).

    Examples
    --------
    Two ranks, written with the ``otf2`` package: rank 0 sends 8 bytes to rank 1 in an
    ``MPI_Send`` region (ticks of 1 us).

    >>> import os, tempfile, otf2
    >>> from otf2.enums import GroupType, Paradigm, RegionRole
    >>> tmp = tempfile.mkdtemp()
    >>> with otf2.writer.open(os.path.join(tmp, "t"), timer_resolution=1_000_000) as w:
    ...     d = w.definitions
    ...     node = d.system_tree_node("node")
    ...     locs = [d.location("Master thread", group=d.location_group(f"MPI Rank {r}", system_tree_parent=node))
    ...             for r in range(2)]
    ...     _ = d.group("MPI", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.MPI, members=locs)
    ...     world = d.comm("MPI_COMM_WORLD", group=d.group("world", group_type=GroupType.COMM_GROUP,
    ...                                                    paradigm=Paradigm.MPI, members=[0, 1]))
    ...     send = d.region("MPI_Send", region_role=RegionRole.POINT2POINT, paradigm=Paradigm.MPI)
    ...     recv = d.region("MPI_Recv", region_role=RegionRole.POINT2POINT, paradigm=Paradigm.MPI)
    ...     e0, e1 = w.event_writer_from_location(locs[0]), w.event_writer_from_location(locs[1])
    ...     e0.enter(10, send); e0.mpi_send(11, 1, world, 5, 8); e0.leave(12, send)
    ...     e1.enter(10, recv); e1.mpi_recv(14, 0, world, 5, 8); e1.leave(15, recv)
    >>> t = read_otf2(os.path.join(tmp, "t", "traces.otf2"))
    >>> t.n_ranks, t.op_names().tolist(), t.peer.tolist(), t.bytes.tolist(), t.tag.tolist()
    (2, ['send', 'recv'], [1, 0], [8.0, 8.0], [5, 5])
    >>> t.t_start.tolist(), t.t_end.tolist()
    ([0.0, 0.0], [2e-06, 5e-06])
    >>> import shutil; shutil.rmtree(tmp)
    """
    otf2 = require("otf2", f"{path}: reading OTF2 traces")
    path = Path(path)
    if path.is_dir():
        path = path / "traces.otf2"
    if not path.is_file():
        raise TopoplanError(f"{path}: no such OTF2 archive")
    reports: list = []
    with _library_errors(reports):
        try:
            reader_ctx = otf2.reader.open(str(path))
            reader = reader_ctx.__enter__()
        except Exception as exc:   # the C library raises its own error types
            raise TopoplanError(f"{path}: not a readable OTF2 archive ({_reason(exc, reports)})") from None
        try:
            trace = _read(reader, path, n_ranks, otf2)
        except TopoplanError:
            raise
        except Exception as exc:   # every read, not only the opening: definitions and events may be cut short
            raise TopoplanError(f"{path}: cannot read the OTF2 archive: {_reason(exc, reports)}") from None
        finally:
            try:
                reader_ctx.__exit__(None, None, None)
            except Exception:   # closing an archive that failed: the error above is the one to report
                pass
    if reports:   # an error the library reported without raising it: what it returned may be incomplete
        raise TopoplanError(f"{path}: cannot read the OTF2 archive: {_reason(None, reports)}")
    return trace


# The OTF2 C library reports every error on stderr before returning it ("[OTF2] src/OTF2_Buffer.c:1702:
# error: ..."), several lines for one failure; while topoplan reads an archive its error callback keeps them
# instead, so the user sees one line: topoplan's, which quotes the first.
_CALLBACK = []   # [the ctypes callback type], made on first use


@contextmanager
def _library_errors(reports: list):
    """Collect the OTF2 library's error reports ``(code, file, line, message)`` in ``reports`` while reading."""
    import ctypes

    try:
        from _otf2.Config import conf
        register = conf.lib.OTF2_Error_RegisterCallback
    except (ImportError, AttributeError, OSError):   # another build of the bindings: its lines stay on stderr
        yield
        return
    if not _CALLBACK:
        # OTF2_ErrorCallback(userData, file, line, function, errorCode, msgFormatString, va_list): the va_list
        # comes last and is never read, so it is declared as a pointer whatever the platform passes
        _CALLBACK.append(ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint64,
                                          ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p))

    def keep(_data, file, line, _function, code, message, _va):
        if code > 0:   # errors; warnings (code < 0) are not failures
            reports.append((code, (file or b"").decode(errors="replace"), int(line),
                            (message or b"").decode(errors="replace")))
        return code

    callback = _CALLBACK[0](keep)
    register.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    register.restype = ctypes.c_void_p
    previous = register(ctypes.cast(callback, ctypes.c_void_p), None)
    try:
        yield
    finally:
        register(previous, None)   # NULL: the library's own handler again


def _reason(exc, reports: list) -> str:
    """What went wrong, from the library's first report (its description, and its message when it is not a
    format string) or the exception."""
    if reports:
        code, _, _, message = reports[0]
        try:
            from _otf2.ErrorCodes import Error_GetDescription, ErrorCode

            what = Error_GetDescription(ErrorCode(code)) or f"error {code}"
        except Exception:   # the bindings cannot describe the code: its number
            what = f"error {code}"
        return what + (f" ({message.rstrip('!.')})" if message and "%" not in message else "")
    return str(exc) if str(exc) else type(exc).__name__


def _read(reader, path: Path, n_ranks, otf2) -> Trace:
    defs = reader.definitions
    clock = defs.clock_properties
    res = float(clock.timer_resolution or 1)
    offset = int(clock.global_offset or 0)

    # -- ranks: the MPI COMM_LOCATIONS group lists one location per world rank, in rank order
    world_locs = None
    for g in defs.groups:
        if _name(g.group_type) == "COMM_LOCATIONS" and _name(g.paradigm) == "MPI":
            world_locs = list(g.members)
    if world_locs is None:   # no MPI group: one rank per process (location group), in definition order
        procs = [lg for lg in defs.location_groups if _name(lg.location_group_type) == "PROCESS"]
        rank_of_group = {lg: r for r, lg in enumerate(procs)}
    else:
        rank_of_group = {loc.group: r for r, loc in enumerate(world_locs)}
    if not rank_of_group:
        raise TopoplanError(f"{path}: no MPI ranks (no MPI location group): not a trace of an MPI program")
    n = len(rank_of_group) if n_ranks is None else int(n_ranks)

    def world_of_group(group, me):
        kind = _name(group.group_type)
        if kind == "COMM_SELF":
            return [me]
        out = []
        for m in group.members:
            grp = getattr(m, "group", None)
            out.append(rank_of_group.get(grp, -1))
        return out

    # -- communicators: world -> 0, the others 1, 2, ... (MPI_COMM_SELF-like ones: one id per rank)
    comm_ids, members, self_comms, inter = {}, {}, set(), {}
    world_members = list(range(n))
    next_id = 1
    for c in defs.comms:
        if hasattr(c, "groupA"):   # an intercommunicator: peers are in the other group
            inter[c] = (c.groupA, c.groupB)
            comm_ids[c] = next_id
            next_id += 1
            continue
        grp = c.group
        if _name(grp.group_type) == "COMM_SELF":
            self_comms.add(c)
            continue
        m = world_of_group(grp, -1)
        if 0 not in comm_ids.values() and m == world_members and getattr(c, "parent", None) is None:
            comm_ids[c] = 0
        else:
            comm_ids[c] = next_id
            next_id += 1
        members[comm_ids[c]] = m
    members.setdefault(0, world_members)
    self_ids: dict = {}

    def comm_of(c, me):
        """(comm id, members in communicator order) of communicator ``c`` seen from world rank ``me``."""
        nonlocal next_id
        if c in self_comms:
            key = (c, me)
            if key not in self_ids:
                self_ids[key] = next_id
                members[next_id] = [me]
                next_id += 1
            return self_ids[key], [me]
        if c in inter:
            a, b = (world_of_group(g, me) for g in inter[c])
            cid = comm_ids[c]
            members.setdefault(cid, a + b)
            return cid, (b if me in a else a)
        cid = comm_ids.get(c)
        if cid is None:
            return 0, world_members
        if -1 in members[cid]:
            raise TopoplanError(f"{path}: communicator {getattr(c, 'name', cid)!r} lists a location that is not an "
                                "MPI rank")
        return cid, members[cid]

    def world_rank(mem, local: int, what: str, kind: str, me: int) -> int:
        """The world rank of rank ``local`` of a communicator (``mem``); an error naming the event when outside."""
        if 0 <= local < len(mem):
            return mem[local]
        raise TopoplanError(f"{path}: rank {me}'s {kind} event: {what} {local} is outside its communicator of "
                            f"{len(mem)} ranks")

    rows: list[list] = []   # rank, op, peer, bytes, root, comm_size, t0, t1, comm, tag, req
    unknown: dict[str, int] = {}
    locs: dict = {}

    def emit(st: _Loc, row: list, t_event: int, t_begin: int | None = None) -> list:
        """Add ``row`` (times filled later for rows inside an MPI region); returns it."""
        frame = st.stack[-1] if st.stack and st.stack[-1].mpi else None   # else: the event spans itself
        if frame is not None:
            frame.rows.append(row)
        else:
            row[6] = t_begin if t_begin is not None else t_event
            row[7] = t_event
            rows.append(row)
        return row

    def unknown_row(st: _Loc, name: str, t: int, peer=-1, nbytes=0.0, comm=0, size=0, root=-1):
        unknown[name] = unknown.get(name, 0) + 1
        return emit(st, [st.rank, UNKNOWN_OP, peer, float(nbytes), root, size, 0, 0, comm, -1, -1], t)

    def flush(st: _Loc, frame: _Frame, t_leave: int) -> None:
        out = frame.rows
        blocking = [r for r in out if r[1] in (OP_CODE["send"], OP_CODE["recv"])]
        sends = [r for r in blocking if r[1] == OP_CODE["send"]]
        if len(blocking) == 2 and len(sends) == 1:   # MPI_Sendrecv: its send and its receive in one call
            s = sends[0]
            r = blocking[0] if blocking[1] is s else blocking[1]
            if s[9] == r[9]:
                s[1] = OP_CODE["sendrecv"]
                out = [x for x in out if x is not r]
            else:   # different tags: post both, then wait for both, so a replay matches each by its tag
                s[1], r[1] = OP_CODE["isend"], OP_CODE["irecv"]
                ws = [s[0], OP_CODE["wait"], s[2], s[3], -1, s[5], 0, 0, s[8], -1, 1]
                wr = [r[0], OP_CODE["wait"], r[2], r[3], -1, r[5], 0, 0, r[8], -1, 0]
                out = [x for x in out if x is not s and x is not r] + [s, r, ws, wr]
        for row in out:
            row[6], row[7] = frame.t_enter, t_leave
            rows.append(row)

    for location, ev in reader.events:
        st = locs.get(location)
        if st is None:
            rank = rank_of_group.get(getattr(location, "group", None))
            st = locs[location] = _Loc(-1 if rank is None else rank)
        kind = type(ev).__name__
        t = int(ev.time)
        if kind == "Enter":
            st.stack.append(_Frame(t, _is_mpi_region(ev.region)))
            continue
        if kind == "Leave":
            if st.stack:
                frame = st.stack.pop()
                if frame.rows:
                    flush(st, frame, t)
            continue
        if kind in _QUIET_EXACT or kind.startswith(_QUIET_PREFIX):
            continue
        if st.rank < 0:
            if kind.startswith(("Mpi", "Rma", "NonBlocking")):
                raise TopoplanError(f"{path}: {kind} event on location {location.name!r}, which is not an MPI rank")
            continue
        me = st.rank
        if kind in ("MpiSend", "MpiIsend"):
            cid, mem = comm_of(ev.communicator, me)
            peer = world_rank(mem, int(ev.receiver), "receiver", kind, me)
            op = "send" if kind == "MpiSend" else "isend"
            row = emit(st, [me, OP_CODE[op], peer, float(ev.msg_length), -1, len(mem), 0, 0, cid, int(ev.msg_tag),
                            -1], t)
            if kind == "MpiIsend":
                st.requests[int(ev.request_id)] = (row, 1)
        elif kind == "MpiIsendComplete":
            got = st.requests.pop(int(ev.request_id), None)
            if got is not None:
                row = got[0]
                emit(st, [me, OP_CODE["wait"], row[2], row[3], -1, row[5], 0, 0, row[8], -1, 1], t)
        elif kind in ("MpiIrecvRequest", "MpiImrecvRequest"):
            row = emit(st, [me, OP_CODE["irecv"], -1, 0.0, -1, n, 0, 0, 0, -1, -1], t)
            st.requests[int(ev.request_id)] = (row, 0)
            if kind == "MpiImrecvRequest":   # its source, communicator and tag come from the matched probe
                probe = st.probes.pop(int(ev.message_id), None)
                if probe is not None:
                    row[2], row[8], row[9], row[5] = probe
        elif kind in ("MpiRecv", "MpiIrecv"):
            cid, mem = comm_of(ev.communicator, me)
            peer = world_rank(mem, int(ev.sender), "sender", kind, me)
            tag, nbytes = int(ev.msg_tag), float(ev.msg_length)
            got = st.requests.pop(int(ev.request_id), None) if kind == "MpiIrecv" else None
            if got is None:   # a blocking receive, or an irecv whose request was not recorded
                emit(st, [me, OP_CODE["recv"], peer, nbytes, -1, len(mem), 0, 0, cid, tag, -1], t)
            else:
                req = got[0]
                req[2], req[3], req[5], req[8], req[9] = peer, nbytes, len(mem), cid, tag
                emit(st, [me, OP_CODE["wait"], peer, nbytes, -1, len(mem), 0, 0, cid, -1, 0], t)
        elif kind == "MpiProbe":
            if int(ev.message_id) != _U64:   # MPI_Mprobe: the message a later MPI_Mrecv receives
                cid, mem = comm_of(ev.communicator, me)
                peer = world_rank(mem, int(ev.sender), "sender", kind, me)
                st.probes[int(ev.message_id)] = (peer, cid, int(ev.tag), len(mem))
        elif kind == "MpiMrecv":
            peer, cid, tag, size = st.probes.pop(int(ev.message_id), (-1, 0, -1, n))
            emit(st, [me, OP_CODE["recv"], peer, float(ev.msg_length), -1, size, 0, 0, cid, tag, -1], t)
        elif kind == "MpiImrecv":
            got = st.requests.pop(int(ev.request_id), None)
            if got is not None:
                req = got[0]
                req[3] = float(ev.msg_length)
                emit(st, [me, OP_CODE["wait"], req[2], req[3], -1, req[5], 0, 0, req[8], -1, 0], t)
        elif kind == "MpiRequestCancelled":
            got = st.requests.pop(int(ev.request_id), None)
            if got is not None:   # the call it made moved nothing: keep it, not modelled
                got[0][1] = UNKNOWN_OP
                unknown["MpiRequestCancelled"] = unknown.get("MpiRequestCancelled", 0) + 1
        elif kind == "MpiCollectiveBegin":
            st.coll_begin = t
        elif kind == "MpiCollectiveEnd":
            opname = _name(ev.collective_op)
            begin, st.coll_begin = st.coll_begin, None
            if opname in _HANDLE_OPS:
                continue
            cid, mem = comm_of(ev.communicator, me)
            size = len(mem)
            local = mem.index(me) if me in mem else 0
            root_local = -1 if int(ev.root) == _U32 else int(ev.root)
            nbytes = collective_bytes(opname, float(ev.size_sent), float(ev.size_received), size, local, root_local)
            op = _COLL_OP.get(opname)
            # a rooted collective's root is one of the communicator's ranks (-1 would drop its bytes)
            root = world_rank(mem, root_local, f"the {opname} root", kind, me) if op in _ROOTED else -1
            if op is None or op not in OP_CODE:   # scan, exscan, ops of a newer OTF2
                unknown_row(st, (op or opname.lower()), t, nbytes=nbytes, comm=cid, size=size, root=root)
            elif op == "alltoallv":   # only the total is known: an even share per destination
                for dst in mem:
                    emit(st, [me, OP_CODE[op], dst, nbytes, -1, size, 0, 0, cid, -1, -1], t, begin)
            else:
                emit(st, [me, OP_CODE[op], -1, nbytes, root, size, 0, 0, cid, -1, -1], t, begin)
        elif kind in ("RmaPut", "RmaGet", "RmaAtomic"):   # one-sided: kept with its target and size
            cid, mem = comm_of(ev.win.comm, me)
            peer = mem[ev.remote] if ev.remote < len(mem) else -1
            nbytes = ev.bytes if kind != "RmaAtomic" else ev.bytes_sent + ev.bytes_received
            unknown_row(st, kind, t, peer=peer, nbytes=float(nbytes), comm=cid, size=len(mem))
        else:   # MPI communication topoplan does not model (other RMA events, nonblocking collectives, ...)
            unknown_row(st, kind, t)
    # regions left open (a run that did not finish cleanly): their calls end at their last event
    for st in locs.values():
        while st.stack:
            frame = st.stack.pop()
            if frame.rows:
                flush(st, frame, frame.t_enter)

    if not any(r[1] != UNKNOWN_OP for r in rows):
        found = (f"{len(rows)} MPI calls, none of them communication topoplan models ("
                 + ", ".join(f"{k} {v}" for k, v in sorted(unknown.items())) + ")") if rows else "no MPI events"
        raise TopoplanError(f"{path}: {found} in the archive of {n} ranks: nothing to plan or replay (was MPI "
                            "recorded? Score-P needs SCOREP_ENABLE_TRACING=true and its MPI adapter)")
    cols = list(zip(*rows))
    rank = np.asarray(cols[0], dtype=np.int64)
    if max(max(cols[6]), max(cols[7])) >= 2 ** 63 or offset >= 2 ** 63:
        raise TopoplanError(f"{path}: a timestamp of {max(max(cols[6]), max(cols[7]), offset):,} ticks is out of "
                            "range (at most 2^63)")
    ticks0 = np.asarray(cols[6], dtype=np.int64) - offset
    ticks1 = np.asarray(cols[7], dtype=np.int64) - offset
    shift = min(int(ticks0.min()), 0) if len(rows) else 0   # events before the clock's offset
    t_start = (ticks0 - shift) / res
    t_end = np.maximum((ticks1 - shift) / res, t_start)
    order = call_order(rank, t_start)
    comms = {int(k): np.asarray(v, dtype=np.int64) for k, v in members.items()}
    trace = Trace(n_ranks=n, rank=rank[order], op=np.asarray(cols[1], dtype=np.int16)[order],
                  peer=np.asarray(cols[2], dtype=np.int64)[order], bytes=np.asarray(cols[3], dtype=np.float64)[order],
                  root=np.asarray(cols[4], dtype=np.int64)[order],
                  comm_size=np.asarray(cols[5], dtype=np.int64)[order], t_start=t_start[order], t_end=t_end[order],
                  comm=np.asarray(cols[8], dtype=np.int64)[order], tag=np.asarray(cols[9], dtype=np.int64)[order],
                  req=np.asarray(cols[10], dtype=np.int8)[order], communicators=comms, unknown_ops=unknown,
                  source=str(path))
    trace.validate()
    where = call_namer(trace)
    check_limits(path, where=where, bytes=trace.bytes)   # the CSV readers' limits (a message past 2^60 bytes)
    check_times(trace.t_start, trace.t_end, where)
    check_calls(trace, where)
    return trace
