"""The trace replayer (C, an MPI program) and the libraries preloaded with it, and its input files.

- ``c/topoplan_replay.c``: replays any topoplan trace with real MPI calls (point to point, nonblocking
  with waits, the format's collectives, computation gaps slept); :func:`write_replay` writes its input.
- ``c/topoplan_idle.c``: Open MPI's idle polls sleep instead of spinning (see :mod:`topoplan.emulate.launch`).
- ``c/topoplan_bcast.c``: a PMPI library that reorders ``MPI_Bcast`` over a plan's node-leader order.

They are built with the MPI compiler wrapper on first use and cached, as the PMPI recorder is
(:func:`topoplan.traffic.recorder.build_library`): a wheel cannot carry binaries for the user's MPI,
and the MPI found at run time is the one that must build them (the cache key holds the compiler's path,
so another MPI gets its own build).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from topoplan.core.errors import TopoplanError
from topoplan.sim.replay_common import A2A_CODES, Collectives
from topoplan.traffic.collectives import MPICHThresholds
from topoplan.traffic.recorder import build_library
from topoplan.traffic.trace import COLUMNS, OP_CODE, OPS, WORLD, per_destination_calls

__all__ = ["C_DIR", "REPLAY_SOURCE", "IDLE_SOURCE", "BCAST_SOURCE", "COLLECTIVE_TAG", "build", "as_point_to_point",
           "write_replay"]

#: The tag of the point-to-point messages :func:`as_point_to_point` makes of collectives (MPI guarantees tags up to
#: 32,767; programs rarely use the top of the range).
COLLECTIVE_TAG = 32001
# one row per call, run as the simulator's schedule (and alltoall(v) calls written one row per destination, whose
# rows are one call; allgatherv is expanded by write_replay)
_SCHEDULED = ("bcast", "reduce", "allreduce", "alltoall", "alltoallv", "allgather", "gather", "scatter",
              "reduce_scatter", "barrier")

C_DIR = Path(__file__).resolve().parent / "c"
REPLAY_SOURCE = C_DIR / "topoplan_replay.c"
IDLE_SOURCE = C_DIR / "topoplan_idle.c"
BCAST_SOURCE = C_DIR / "topoplan_bcast.c"


def build(mpicc: str | None = None) -> dict:
    """Build (or find in the cache) the replayer, the idle library and the recorder.

    Parameters
    ----------
    mpicc : str, optional
        The MPI C compiler wrapper (default ``$MPICC``, else ``mpicc``).

    Returns
    -------
    dict
        ``replay`` (the program), ``idle``, ``bcast`` and ``recorder`` (libraries).

    Raises
    ------
    TopoplanError
        When ``mpicc`` is missing or a build fails.

    Examples
    --------
    >>> build("no-such-mpicc")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: mpicc not found: ...
    >>> sorted(build())         # doctest: +SKIP
    ['bcast', 'idle', 'recorder', 'replay']
    """
    return {"replay": build_library(mpicc, source=REPLAY_SOURCE, program=True),
            "idle": build_library(mpicc, source=IDLE_SOURCE),
            "bcast": build_library(mpicc, source=BCAST_SOURCE),
            "recorder": build_library(mpicc)}


def as_point_to_point(trace, thresholds: MPICHThresholds | None = None) -> Trace:
    """``trace`` with every collective call replaced by the point-to-point messages the simulator runs for it.

    A call of rank ``r`` becomes, per step of its schedule (:func:`topoplan.traffic.collectives.schedule`:
    MPICH's algorithm for its size and communicator), an ``irecv`` per receive, an ``isend`` per send and a
    ``waitall``, on the call's communicator with the tag :data:`COLLECTIVE_TAG`: the messages, their sizes
    and their order are the prediction's own. Bcast, Reduce, Allreduce, Alltoall, Alltoallv, Allgather,
    Gather, Scatter, Reduce_scatter and Barrier are expanded; an ``alltoall`` or ``alltoallv`` written one row
    per destination is one call over its rows, whose sizes are the call's counts, as the simulator reads it
    (MPICH's alltoallv: batches of ``alltoall_throttle`` receives from rank ``r + i`` and sends to rank
    ``r - i``). The other rows are kept as they are (:func:`write_replay` sends ``allgatherv`` as a ring of
    point-to-point messages). A call keeps its start and end times, so computation gaps stay.

    Parameters
    ----------
    trace : topoplan.traffic.trace.Trace
    thresholds : MPICHThresholds, optional
        The predictions' switch-over points.

    Returns
    -------
    topoplan.traffic.trace.Trace

    Examples
    --------
    A Bcast of 8 bytes from rank 0 over 4 ranks (MPICH's binomial tree: 0 -> 2, 0 -> 1, 2 -> 3):

    >>> from topoplan.traffic.trace import Trace
    >>> t = Trace.from_records([(r, "bcast", -1, 8, 0, 4, 0.0, 1.0) for r in range(4)], 4)
    >>> p = as_point_to_point(t)
    >>> sorted((int(a), int(b)) for a, o, b in zip(p.rank, p.op_names(), p.peer) if o == "isend")
    [(0, 1), (0, 2), (2, 3)]

    An alltoallv over 4 ranks written per destination: rank 1 sends to ranks 0, 3 and 2, in that order, as
    MPICH does (and receives from 2, 3 and 0), every rank starting at another destination.

    >>> t = Trace.from_records([(r, "alltoallv", d, 1000, -1, 4, 0.0, 1.0) for r in range(4) for d in range(4)], 4)
    >>> p = as_point_to_point(t)
    >>> [(o, int(q)) for a, o, q in zip(p.rank, p.op_names(), p.peer) if a == 1]
    [('irecv', 2), ('irecv', 3), ('irecv', 0), ('isend', 0), ('isend', 3), ('isend', 2), ('waitall', -1)]
    """
    # the simulator's own expansion (sim.replay_common), so the replay runs the very steps it predicts
    calls = Collectives(trace, thresholds or MPICHThresholds())
    scheduled = {OP_CODE[o] for o in _SCHEDULED}
    isend, irecv, waitall = OP_CODE["isend"], OP_CODE["irecv"], OP_CODE["waitall"]
    cols: dict = {k: [] for k in COLUMNS}

    def add(*row):
        for k, v in zip(COLUMNS, row):
            cols[k].append(v)

    # an alltoall(v) written per destination receives what its senders' rows say: each receive is posted for
    # the largest such row, as MPI allows
    rows, _ = per_destination_calls(trace)
    largest = float(trace.bytes[rows].max()) if len(rows) else 0.0
    i = 0
    while i < len(trace):
        r, op = int(trace.rank[i]), int(trace.op[i])
        if op not in scheduled:
            add(*(getattr(trace, k)[i] for k in COLUMNS))
            i += 1
            continue
        c = int(trace.comm[i]) if int(trace.comm[i]) in trace.communicators else WORLD
        _, pos = calls.member(r, i)   # (refuses a rank outside the call's communicator)
        if OPS[op] in ("bcast", "reduce", "gather", "scatter"):
            q = int(trace.root[i])
            if not 0 <= q < len(pos) or pos[q] < 0:   # (trace validation refuses such roots first; a trace
                # built by hand may not be validated, and the simulator would take the communicator's first rank)
                raise TopoplanError(f"{trace.source or 'trace'}: rank {r} calls {OPS[op]} on communicator {c} with "
                                    f"root {q}, which is not one of its members")
        per_destination = op in A2A_CODES and int(trace.peer[i]) >= 0
        steps, members, j = calls.expand(r, i, len(trace))   # j: the call's last row
        t0, t1, size = float(trace.t_start[i]), float(trace.t_end[j]), int(trace.comm_size[i])
        unknown = largest if per_destination else float(trace.bytes[i])
        first = len(cols["rank"])
        for step in steps:
            for q, b in step.recvs:
                add(r, irecv, int(members[q]), unknown if b is None else float(b), -1, size, t0, t0, c,
                    COLLECTIVE_TAG, -1)
            for q, b in step.sends:
                add(r, isend, int(members[q]), float(b), -1, size, t0, t0, c, COLLECTIVE_TAG, -1)
            add(r, waitall, -1, 0.0, -1, size, t0, t0, c, -1, -1)
        if len(cols["rank"]) == first:   # nothing to send (a communicator of one): the call keeps its time
            add(r, waitall, -1, 0.0, -1, size, t0, t0, c, -1, -1)
        cols["t_end"][-1] = t1
        i = j + 1
    arrays = {k: np.asarray(cols[k], dtype=getattr(trace, k).dtype) for k in COLUMNS}
    return dataclasses.replace(trace, **arrays, source=f"{trace.source} (collectives as the simulator's messages)")


def write_replay(trace, directory, *, compute_scale: float = 1.0, time_scale: float = 1.0) -> dict:
    """Write ``trace`` as the replayer's input (``comms.txt`` and one ``rank-R.txt`` per rank).

    Calls are written in each rank's order. Computation gaps (a call's ``t_start`` minus the rank's
    previous ``t_end``; before its first call, minus the trace's first ``t_start``, as the simulator counts
    them) are multiplied by ``compute_scale`` and ``time_scale`` (the emulation's scale:
    everything runs that much slower). ``alltoallv`` calls and ``alltoall`` calls written per
    destination become the isends and irecvs (and a waitall) that MPI libraries run for them, and
    ``allgatherv`` becomes a ring of point-to-point messages; ops the format does not model are skipped.

    Parameters
    ----------
    trace : topoplan.traffic.trace.Trace
    directory : str or path
        Created if missing.
    compute_scale : float, optional
    time_scale : float, optional

    Returns
    -------
    dict
        ``n_calls`` written, ``skipped`` (ops not replayed, with counts), ``max_bytes``.

    Raises
    ------
    TopoplanError
        For a message over 2 GiB (an ``int`` count of bytes) or a rank outside a communicator it uses.

    Examples
    --------
    >>> import tempfile
    >>> from topoplan.traffic.generators import ring
    >>> tmp = tempfile.TemporaryDirectory()
    >>> write_replay(ring(4, 1000, iters=2), tmp.name)["n_calls"]
    24
    >>> print(open(tmp.name + "/rank-1.txt").read().splitlines()[0])
    3 0 1000 -1 -1 0 -1 0
    """
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    n = trace.n_ranks
    lines = [[] for _ in range(n)]
    skipped: dict = {}
    if len(trace) and float(trace.bytes.max()) >= 2 ** 31:
        raise TopoplanError(f"{trace.source or 'trace'}: a message of {trace.bytes.max():.0f} bytes: the replayer "
                            "sends at most 2 GiB - 1 per call")
    a2av, a2a, agv = OP_CODE["alltoallv"], OP_CODE["alltoall"], OP_CODE["allgatherv"]
    isend, irecv, waitall = OP_CODE["isend"], OP_CODE["irecv"], OP_CODE["waitall"]
    ops, rank, peer = trace.op, trace.rank, trace.peer
    nbytes, root, comm, tag, req = trace.bytes, trace.root, trace.comm, trace.tag, trace.req
    t0, t1 = trace.t_start, trace.t_end
    m = len(trace)
    prev_end = np.full(n, float(t0.min()) if m else 0.0)   # a rank's first gap runs from the trace's start
    largest = int(nbytes.max()) if m else 0
    comms_used = set()
    scale = float(compute_scale) * float(time_scale)
    i = 0
    # allgatherv: every member's contribution, in call order per communicator (the k-th call of each member)
    agv_calls: dict = {}
    for j in np.flatnonzero(ops == agv).tolist():
        agv_calls.setdefault(int(comm[j]), {}).setdefault(int(rank[j]), []).append(j)
    agv_seen: dict = {}
    while i < m:
        r, op = int(rank[i]), int(ops[i])
        gap = max(float(t0[i] - prev_end[r]), 0.0)
        gap_ns = int(round(gap * scale * 1e9))
        c = int(comm[i]) if int(comm[i]) in trace.communicators else -1
        if c >= 0:
            comms_used.add(c)
        if op < 0:
            skipped["not modelled"] = skipped.get("not modelled", 0) + 1
            prev_end[r] = t1[i]
            i += 1
            continue
        if op in (a2av, a2a) and int(peer[i]) >= 0:
            # per-destination rows of one call share (rank, op, t_start, comm): isend/irecv to each, waitall
            j = i
            while j < m and int(rank[j]) == r and int(ops[j]) == op and t0[j] == t0[i] and int(comm[j]) == int(comm[i]):
                j += 1
            first = True
            for k in range(i, j):   # a row gives what this rank sends to the peer: receive up to the largest
                lines[r].append(f"{irecv} {int(peer[k])} {largest} -1 {c} 1 -1 {gap_ns if first else 0}")
                first = False
            for k in range(i, j):
                lines[r].append(f"{isend} {int(peer[k])} {int(nbytes[k])} -1 {c} 1 -1 0")
            lines[r].append(f"{waitall} -1 0 -1 -1 -1 -1 0")
            prev_end[r] = t1[j - 1]
            i = j
            continue
        if op == agv:
            members = trace.members(int(comm[i])).tolist()
            k = agv_seen.setdefault((int(comm[i]), r), 0)
            agv_seen[(int(comm[i]), r)] = k + 1
            counts = []
            for w in members:
                calls = agv_calls.get(int(comm[i]), {}).get(int(w), [])
                counts.append(int(nbytes[calls[k]]) if k < len(calls) else 0)
            pos = members.index(r)
            size = len(members)
            first = True
            for step in range(1, size):   # ring: receive the block of pos - step from the left, pass ours on
                left, right = members[(pos - 1) % size], members[(pos + 1) % size]
                block_in, block_out = counts[(pos - step) % size], counts[(pos - step + 1) % size]
                lines[r].append(f"{irecv} {left} {block_in} -1 {c} 2 -1 {gap_ns if first else 0}")
                lines[r].append(f"{isend} {right} {block_out} -1 {c} 2 -1 0")
                lines[r].append(f"{waitall} -1 0 -1 -1 -1 -1 0")
                first = False
            prev_end[r] = t1[i]
            i += 1
            continue
        lines[r].append(f"{op} {int(peer[i])} {int(nbytes[i])} {int(root[i])} {c} {int(tag[i])} {int(req[i])} "
                        f"{gap_ns}")
        prev_end[r] = t1[i]
        i += 1
    with open(out / "comms.txt", "w") as fh:
        for c in sorted(comms_used):
            members = trace.members(c).tolist()
            fh.write(f"{c} {len(members)} {' '.join(map(str, members))}\n")
    for r in range(n):
        with open(out / f"rank-{r}.txt", "w") as fh:
            fh.write("\n".join(lines[r]) + ("\n" if lines[r] else ""))
    return {"n_calls": sum(len(x) for x in lines), "skipped": skipped,
            "max_bytes": float(nbytes.max()) if m else 0.0}
