"""Replay an MPI event trace on a network: the one entry point, :func:`replay`.

Each rank runs its calls in order, with the computation gaps of the trace, MPI matching, eager and
rendezvous messages, and collectives expanded into MPICH's algorithms (:mod:`topoplan.sim.reference`
describes the semantics). A deadlock (ranks blocked with nothing in flight) raises
:class:`TopoplanError` naming the blocked ranks and their calls.

Two interchangeable implementations: the compiled one (the default: the trace is compiled into per-rank
micro-ops, :mod:`topoplan.sim.compiler`, and one Numba loop runs ranks and flows, ~1 us per message,
:mod:`topoplan.sim.pieces`) and the Python :class:`~topoplan.sim.reference.Replayer`, the readable
reference, which runs any engine (the papers' model only runs there). Both record the utilization
timeline (the compiled loop samples every link's bytes at each interval boundary) and the times ranks
reach marked calls. ``tests/test_sim_replay.py`` checks they agree.

A generator's recording (:func:`topoplan.traffic.generators.record_spec`) is
replayed piece by piece by the compiled loop (:func:`topoplan.sim.pieces.replay_pieces`): memory
holds a piece and what the ranks have not run yet, and the results are the
whole trace's to the bit (``tests/test_sim_pieces.py``).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from topoplan.core.errors import TopoplanError
from topoplan.sim.fifo import MAX_MESSAGES as FIFO_MAX_MESSAGES
from topoplan.sim.maxmin import SMALL_JOB, compiled_ready, numba_available
from topoplan.sim.pieces import TracePieces, replay_pieces, replay_whole
from topoplan.sim.reference import Replayer
from topoplan.sim.replay_common import ReplayResult, check_sends_matched
from topoplan.traffic import limits
from topoplan.traffic.collectives import check_peer_step_messages
from topoplan.traffic.trace import COLLECTIVE_OPS, Trace, op_codes

__all__ = ["ReplayResult", "check_sends_matched", "check_options", "replay", "bulk_trace", "fifo_fits"]

# the engine the compiled loop runs (the others run under the reference replayer)
COMPILED_ENGINE = "maxmin"


def check_options(*, compute_scale: float = 1.0, eager_threshold_B: float = 65536.0,
                  timeline_dt_s: float | None = None) -> None:
    """Raise :class:`TopoplanError` for a replay option no run can use (negative, NaN or infinite).

    Parameters
    ----------
    compute_scale, eager_threshold_B, timeline_dt_s : float
        As for :func:`replay`.

    Raises
    ------
    TopoplanError

    Examples
    --------
    >>> check_options(compute_scale=0.5)
    >>> check_options(compute_scale=-1)
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: field 'compute_scale': must be a finite non-negative factor, got -1
    """
    if not 0 <= compute_scale < float("inf"):
        raise TopoplanError(f"field 'compute_scale': must be a finite non-negative factor, got {compute_scale}")
    if not 0 <= eager_threshold_B < float("inf"):
        raise TopoplanError(f"field 'eager_threshold': must be a finite non-negative size, got {eager_threshold_B}")
    if timeline_dt_s is not None and not 0 < timeline_dt_s < float("inf"):
        raise TopoplanError(f"field 'timeline_dt': must be a positive time, got {timeline_dt_s}")


def replay(trace: Trace, net, placement, *, eager_threshold_B: float = 65536.0, compute_scale: float = 1.0,
           thresholds=None, timeline_dt_s: float | None = None, progress=None, method: str = "auto",
           marks=None, piece_rows: int | None = None) -> ReplayResult:
    """Replay ``trace`` on network ``net`` with ranks placed by ``placement``.

    Parameters
    ----------
    trace : Trace or Recording
        Real or generated. A generator's :class:`~topoplan.traffic.generators.Recording`
        (:func:`~topoplan.traffic.generators.record_spec`) is replayed piece by piece: its trace is
        generated and compiled a piece at a time as the ranks reach it, so memory holds a piece and
        what the ranks have not run yet, not the whole trace (same results; the compiled method only;
        the Python reference and ``marks`` build the whole trace).
    net : Network
        From :func:`topoplan.sim.network.build_network`.
    placement : Placement
    eager_threshold_B : float, optional
        Messages smaller than this are sent eagerly.
    compute_scale : float, optional
        Multiplies the computation gaps (0 replays communication only; 0.5 = a CPU twice as fast).
    thresholds : MPICHThresholds, optional
        Collective algorithm thresholds (default MPICH's).
    timeline_dt_s : float, optional
        Sample link utilization every ``timeline_dt_s`` seconds.
    progress : callable, optional
    method : {"auto", "compiled", "python"}, optional
        ``"compiled"`` (Numba), ``"python"`` (the reference :class:`Replayer`) or ``"auto"``: compiled
        unless the network's model is not ``maxmin`` (the papers' engine, :mod:`topoplan.sim.paper`, runs under the
        reference), Numba is missing, or the compiled loop is not compiled yet
        (:func:`~topoplan.sim.maxmin.compiled_ready`) and the trace sends at most
        :data:`~topoplan.sim.maxmin.SMALL_JOB` messages (the reference on NumPy is then faster than compiling; the
        results agree to 1e-9). Both record the utilization timeline and marks.
    marks : array of int, optional
        Rows of ``trace`` whose simulated time is wanted: when the rank reached the call (``mark_s`` of
        the result, in the same order). Phases on a timeline are their first calls' marks.
    piece_rows : int, optional
        Rows per piece of a Recording, or of a trace with more rows (default
        :data:`~topoplan.traffic.limits.REPLAY_PIECE_ROWS`; a trace with ``marks`` runs whole). A piece's
        rows are counted by what they compile to (:func:`topoplan.sim.compiler.row_weights`: a row of an
        allreduce over 256 ranks counts 16), so pieces of collectives hold fewer rows.

    Returns
    -------
    ReplayResult

    Examples
    --------
    >>> from topoplan.traffic.generators import parse_spec
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.core.placement import sequential
    >>> from topoplan.sim.network import build_network
    >>> t = load_topology("paper003", ["kind=tree", "ocs=null"])
    >>> res = replay(parse_spec("ring:np=8,bytes=1MB"), build_network(t), sequential(8, t))
    >>> res.makespan_s > 0
    True
    """
    if method not in ("auto", "compiled", "python"):
        raise TopoplanError(f"replay: method must be 'auto', 'compiled' or 'python', got {method!r}")
    check_options(compute_scale=compute_scale, eager_threshold_B=eager_threshold_B, timeline_dt_s=timeline_dt_s)
    compiled = net.sim_model.engine == COMPILED_ENGINE
    if method == "auto" and compiled and numba_available() and not compiled_ready():
        small = _small_trace(trace)
        if small is not None:   # a small job before the first compilation: the reference on NumPy, in less time
            method, trace = "python", small
    if not isinstance(trace, Trace):   # a generator's recording
        if method == "python" or not compiled or marks is not None or not numba_available():
            trace = trace.build()
        else:
            return replay_pieces(trace, net, placement, eager_threshold_B=eager_threshold_B,
                                 compute_scale=compute_scale, thresholds=thresholds, progress=progress,
                                 timeline_dt_s=timeline_dt_s, max_rows=piece_rows or limits.REPLAY_PIECE_ROWS)
    check_sends_matched(trace)
    if method == "compiled" and not compiled:
        raise TopoplanError("replay: the compiled method runs the maxmin model only; use method='python' or 'auto'")
    if method == "compiled" or (method == "auto" and compiled and numba_available()):
        rows = piece_rows or limits.REPLAY_PIECE_ROWS
        if marks is None and len(trace) > rows and TracePieces.by_rank(trace):
            # a large trace runs in pieces too: less memory, progress, and a stop at the deadline between them
            return replay_pieces(TracePieces(trace), net, placement, eager_threshold_B=eager_threshold_B,
                                 compute_scale=compute_scale, thresholds=thresholds, progress=progress,
                                 timeline_dt_s=timeline_dt_s, max_rows=rows)
        return replay_whole(trace, net, placement, eager_threshold_B=eager_threshold_B,
                            compute_scale=compute_scale, thresholds=thresholds, progress=progress,
                            timeline_dt_s=timeline_dt_s, marks=marks)
    check_peer_step_messages(trace)   # the reference keeps every rank's expanded schedule
    if net.sim_model.engine == "fifo":
        check_fifo_size(trace)
    return Replayer(trace, net, placement, eager_threshold_B=eager_threshold_B, compute_scale=compute_scale,
                    thresholds=thresholds, timeline_dt_s=timeline_dt_s, progress=progress, marks=marks).run()


def messages_bound(trace: Trace) -> int:
    """An upper bound on the messages a replay of ``trace`` sends: its point-to-point sends, for every
    collective call as many as its communicator has ranks (an all-to-all's), and one for every row of an
    all-to-all written one row per destination.

    Examples
    --------
    >>> from topoplan.traffic.generators import alltoall, ring
    >>> from topoplan.traffic.trace import Trace
    >>> messages_bound(ring(8, 1e6)), messages_bound(alltoall(8, 1e6))
    (8, 64)
    >>> messages_bound(Trace.from_records([(r, "alltoallv", d, 8, -1, 4, 0.0, 0.0) for r in range(4)
    ...                                    for d in range(4)], 4))
    16
    """
    coll = np.isin(trace.op, op_codes(COLLECTIVE_OPS))
    per_destination = coll & np.isin(trace.op, op_codes(("alltoall", "alltoallv"))) & (trace.peer >= 0)
    sends = np.isin(trace.op, op_codes(("send", "isend", "sendrecv")))
    return (int(np.count_nonzero(sends)) + int(trace.comm_size[coll & ~per_destination].sum())
            + int(np.count_nonzero(per_destination)))


def fifo_fits(trace: Trace) -> bool:
    """Whether the ``fifo`` model replays ``trace`` (at most :data:`topoplan.sim.fifo.MAX_MESSAGES` messages,
    :func:`messages_bound`).

    Examples
    --------
    >>> from topoplan.traffic.generators import alltoall
    >>> fifo_fits(alltoall(64, 1e6)), fifo_fits(alltoall(1024, 1e3))
    (True, False)
    """
    return messages_bound(trace) <= FIFO_MAX_MESSAGES


def check_fifo_size(trace: Trace) -> None:
    """Refuse a replay under the ``fifo`` model (:mod:`topoplan.sim.fifo`, the reference replay only) of more than
    :data:`topoplan.sim.fifo.MAX_MESSAGES` messages (:func:`messages_bound`), which would take many minutes.

    Examples
    --------
    >>> from topoplan.traffic.generators import alltoall
    >>> check_fifo_size(alltoall(64, 1e6))                  # 4,096 messages at most: fine
    >>> check_fifo_size(alltoall(1024, 1e3))
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: alltoall:np=1024: up to 1,048,576 messages; the fifo model runs in the reference replay (about 0.03-0.15 ms a message) and takes at most 1,000,000: use maxmin or paper
    """
    if not fifo_fits(trace):
        n = messages_bound(trace)
        raise TopoplanError(f"{trace.source or 'trace'}: up to {n:,} messages; the fifo model runs in the reference "
                            f"replay (about 0.03-0.15 ms a message) and takes at most {FIFO_MAX_MESSAGES:,}: use "
                            "maxmin or paper")


def _small_trace(trace) -> Trace | None:
    """``trace`` as a :class:`Trace` (a recording built) when it sends at most
    :data:`~topoplan.sim.maxmin.SMALL_JOB` messages, bounded above: a point-to-point call one, a collective
    call as many as its communicator has ranks (an all-to-all's); None when it may send more."""
    if len(trace) > SMALL_JOB:
        return None
    if not isinstance(trace, Trace):   # a small generator's recording: its trace is small too
        trace = trace.build()
    coll = np.isin(trace.op, op_codes(COLLECTIVE_OPS))
    return trace if int(np.count_nonzero(~coll)) + int(trace.comm_size[coll].sum()) <= SMALL_JOB else None


def bulk_trace(traffic, iters: int = 1, *, threshold_B: float | None = None) -> Trace:
    """A communication matrix as one bulk-synchronous phase repeated ``iters`` times.

    In each phase every rank posts one receive and one send per communicating
    pair, carrying that pair's bytes divided by ``iters``, and waits for all of
    them. A matrix has no order or timing, so a pair's messages are merged per
    phase; replay a trace for message-exact behaviour (sizes decide eager vs
    rendezvous and EPS vs circuits).

    With ``threshold_B`` (the circuits' large-message threshold) the merge keeps
    each message on the side of the threshold it was on, as the planner and
    :func:`topoplan.analysis.switches.analyze` count it: a pair's large
    messages (at least ``threshold_B``) are merged into one message per phase,
    and its small ones into the fewest equal pieces below ``threshold_B``, so
    that they stay on the EPS. Without it a pair's merged small messages would
    take its circuits once the merge reaches the threshold. Self-messages stay
    out (they never leave the node).

    Parameters
    ----------
    traffic : Traffic
    iters : int, optional
    threshold_B : float, optional
        Keep small and large messages apart (see above); None merges them.

    Returns
    -------
    Trace

    Raises
    ------
    TopoplanError
        For ``iters`` below 1 or a trace too large.

    Examples
    --------
    >>> from topoplan.traffic.matrix import from_arrays
    >>> tr = bulk_trace(from_arrays(4, [0, 1], [1, 0], [1e6, 2e6]), iters=2)
    >>> from topoplan.traffic.trace import OP_CODE
    >>> tr.op_counts(), tr.bytes[tr.op == OP_CODE["isend"]].tolist()
    ({'isend': 4, 'irecv': 4, 'waitall': 8}, [500000.0, 500000.0, 1000000.0, 1000000.0])

    Ten messages of 3 kB from rank 0 to rank 1 and one of 1 MB, below and above a threshold of 8 kB: the
    small ones' 30 kB go as 4 pieces of 7.5 kB, each below the threshold, the large one as it is:

    >>> mixed = from_arrays(2, [0, 0], [1, 1], [3e3, 1e6], count=[10, 1])
    >>> sends = lambda t: t.bytes[t.op == OP_CODE["isend"]].tolist()
    >>> sends(bulk_trace(mixed, threshold_B=8e3)), sends(bulk_trace(mixed))
    ([1000000.0, 7500.0, 7500.0, 7500.0, 7500.0], [1030000.0])
    """
    if int(iters) < 1:
        raise TopoplanError(f"field 'iters': the matrix must be replayed in at least 1 phase, got {iters}")
    iters = int(iters)
    n = traffic.n_ranks
    keep = traffic.src != traffic.dst
    src, dst = traffic.src[keep], traffic.dst[keep]
    if threshold_B is None:
        small = np.zeros(len(src), bool)
    else:
        small = traffic.msg_bytes[keep] < float(threshold_B)
    # one row per (pair, side of the threshold): its bytes per phase and how many pieces carry them
    key = (src * n + dst) * 2 + small
    uniq, inv = np.unique(key, return_inverse=True)
    x = np.bincount(inv.ravel(), weights=traffic.bytes[keep], minlength=len(uniq)) / iters
    side_small = (uniq % 2).astype(bool)
    pieces = np.ones(len(uniq), np.int64)
    if threshold_B is not None and float(threshold_B) > 0:
        cut = side_small & (x >= float(threshold_B))
        pieces[cut] = np.floor(x[cut] / float(threshold_B)).astype(np.int64) + 1
    pair = uniq // 2
    rows = float(iters) * (2 * float(pieces.sum()) + n)
    if rows > limits.MAX_TRACE_ROWS:
        raise TopoplanError(f"field 'iters': {iters} phases of this matrix would be {rows:.3g} trace rows, over the "
                            f"limit of {limits.MAX_TRACE_ROWS:,}")
    recs = []
    by_rank = defaultdict(list)
    for p, b, k in zip(pair.tolist(), (x / pieces).tolist(), pieces.tolist()):
        a, c = divmod(p, n)
        for _ in range(k):
            by_rank[a].append(("isend", c, b))
            by_rank[c].append(("irecv", a, b))
    for _ in range(iters):
        for r in range(n):
            for op, peer, x_B in by_rank.get(r, ()):
                recs.append((r, op, peer, x_B, -1, n, 0.0, 0.0, -1, 0))
            recs.append((r, "waitall", -1, 0, -1, n, 0.0, 0.0, -1, -1))
    return Trace.from_records(recs, n, source=f"bulk({traffic.name})")
