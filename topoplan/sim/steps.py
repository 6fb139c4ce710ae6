"""The steps of an application: its messages grouped by when they travel, for planning that follows them.

An application is a sequence of dependent steps -- CG's exchanges and reductions in every iteration,
FT's all-to-all rounds -- and a network plan is only as good as its worst link *in each step*: circuits
that balance the whole run's bytes can still sit on the critical path of every step. The *step clock*
finds the steps of a trace: the reference replay (:class:`topoplan.sim.replay.Replayer`: MPI matching,
non-blocking calls and waits, collectives as MPICH's schedules of :mod:`topoplan.traffic.collectives`)
run on a unit network, where every message takes one unit from the moment both its send and its receive
are posted, and computation takes none. A message's *level* is when it starts; the messages of one
level form a step. A message waits for its receive, so ranks that run the same exchange stay in step, as
an SPMD code's do. A blocking send below the replay's eager threshold (64 KiB) returns at once, as MPI's
eager protocol (and the simulator) has it: a rank's small blocking sends to several neighbours (MG's halo
exchange sends to one neighbour, then to the other) are one step, as they overlap in the simulator, not a
step each. Every other send completes when its message is delivered: a wait over a rank's sends and
receives then ends when its exchange does, which keeps the ranks of a batched all-to-all in step (with
non-blocking small sends completing at once too, FT's throttled all-to-all drifts apart in the clock into
levels that mix batches, and its step time overestimates the simulated time by 1.24x instead of 1.06x).

The clock charges every step the bandwidth its messages need; it does not say which latencies lie on the
application's critical path. In a pipeline of eager messages (LU's wavefront: a rank sends its planes one
after another without waiting) the next message is already there when its receive is posted, so a run pays
the pipeline's latency once, not at every one of its steps. The *latency clock* is the same replay with the
replay's own eager protocol (every send below the threshold returns at once and its message starts at
once): its longest chain of dependent messages (found back from the rank that finishes last, each message
after the one whose arrival let it start) is what the step time's latency term is charged over, one level
of the chain at a time (:attr:`Steps.latency_types`). The chain goes back through the message whose arrival
woke a rank; a level costs the slowest of the messages that arrived in it at that rank. An equally long chain
through other ranks, over longer routes, is not seen, so the term can fall short of the longest latency path
(LU class A at 64 ranks on 001-16x16: 1.14 ms against 1.51 ms for the path weighted by route latency). The
latency clock is a second replay: clocking a trace takes twice the step clock alone on one CPU, and about as
long where two are ours (a large trace's latency clock runs in a forked child meanwhile, :data:`CLOCKS_APART_ROWS`).

Levels with the same messages are one *step type* with a count (CG's 75 iterations repeat the same
types); :class:`Steps` holds the types as :class:`~topoplan.traffic.matrix.Traffic` and their counts, and
the traffic of all steps together is the trace's (collectives included). The clock runs in Python at a
few microseconds a message; :func:`steps_of_spec` clocks a generator spec's repeated iterations once (two
short runs, then the difference times the iterations), so a generated trace costs what two of its
iterations cost.

Examples
--------
>>> from topoplan.traffic.generators import parse_spec
>>> st = trace_steps(parse_spec("ring:np=4,bytes=1MB,iters=3"))
>>> st.n_types, st.count.tolist(), st.n_steps          # one step type, three times
(1, [3.0], 3)
>>> float(st.total_bytes())                              # 4 ranks x 1 MB x 3 iterations
12000000.0
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import heapq
import inspect
import time
from dataclasses import dataclass

import numpy as np

from topoplan.core import forked
from topoplan.core.errors import TopoplanError
from topoplan.core.placement import sequential
from topoplan.core.topology import TreeTopology
from topoplan.sim.maxmin import compiled_ready
from topoplan.sim.network import build_network
from topoplan.sim.routes import LinkSet
from topoplan.sim.replay import Replayer, replay
from topoplan.sim.replay_common import gaps
from topoplan.sim.simmodel import SimModel
from topoplan.traffic.generators import is_spec, parse_spec, record_spec
from topoplan.traffic.matrix import Traffic, from_arrays
from topoplan.traffic.trace import OP_CODE, Trace

__all__ = ["Steps", "StepClockLimit", "step_levels", "trace_steps", "steps_of_spec", "source_steps",
           "critical_compute_s", "has_computation", "STEP_CLOCK_ROWS", "EAGER_THRESHOLD_B"]

# The clock runs the reference replay in Python: about 10-20 us a message on this 2-core machine (collectives
# count as their messages). A generator spec is clocked by its iterations; a trace file whole, up to this
# many rows (about a minute).
STEP_CLOCK_ROWS = 2_000_000

# The least a clock costs a row of its trace before it runs a rank (the replayer's per-rank call lists: 0.44 us a
# row, measured on NPB LU class A at 256 ranks, 30.6 M rows, 13.4 s), kept below what it measures: a clock
# that cannot even start within its time limit is not started (StepClockLimit at once).
CLOCK_SETUP_S_PER_ROW = 2.5e-7

# A trace whose every computation gap is below this computes nothing (a generated trace's timestamps only order
# its calls, a few nanoseconds apart at most): its step time has no computation term.
COMPUTE_TICK_S = 1e-6
# The links of the network the computation on the critical path is found on (B/s): every message crosses them in
# no time next to any computation (a terabyte in 1e-18 s).
INSTANT_BW_BPS = 1e30

# From this many rows on, the latency clock runs in a forked child beside the step clock, where two CPUs are ours
# (topoplan.core.forked): the two replays are independent, so a trace's steps take the longer of them instead of
# their sum (NPB LU class C recorded at 64 ranks, 438 k rows: 4.5 s each). Below it, forking costs more than it
# saves.
CLOCKS_APART_ROWS = 20_000

# Blocking sends below this size return at once in the clock: the replay's eager threshold.
EAGER_THRESHOLD_B = float(inspect.signature(replay).parameters["eager_threshold_B"].default)


class StepClockLimit(TopoplanError):
    """The step clock did not finish within its ``time_limit`` (the trace's steps are unknown).

    Examples
    --------
    >>> from topoplan.traffic.generators import parse_spec
    >>> try:
    ...     trace_steps(parse_spec("ring:np=4,bytes=1MB,iters=3"), time_limit=0.0)
    ... except StepClockLimit as e:
    ...     print(e)
    the step clock did not finish within its time limit of 0 s
    """


def _stop_at(time_limit: float | None) -> float | None:
    """The monotonic time the clock stops at, ``time_limit`` seconds from now (None: never)."""
    return None if time_limit is None else time.monotonic() + max(float(time_limit), 0.0)


def _past(stop_at: float | None, time_limit: float | None) -> None:
    """Raise :class:`StepClockLimit` once ``stop_at`` is past."""
    if stop_at is not None and time.monotonic() >= stop_at:
        raise StepClockLimit(f"the step clock did not finish within its time limit of {time_limit or 0:.3g} s")


@dataclass(frozen=True)
class Steps:
    """The step types of a trace and how often each occurs (made by :func:`trace_steps`).

    Parameters
    ----------
    n_ranks : int
    types : list of Traffic
        The messages of one occurrence of each step type (rank pairs, sizes and counts).
    count : numpy.ndarray of float64
        Occurrences of each type (whole numbers for a clocked trace).
    n_steps : int
        Levels of the step clock that carry messages (the sum of ``count``).
    source : str
        The trace or spec the steps were found in.
    latency_types, latency_count : list of Traffic, numpy.ndarray, optional
        The levels of the *latency clock*'s longest chain (see the module docstring) as types with counts, as
        the steps: what the step time's latency term is charged over. None: the step clock's levels are.
    compute_s : float, optional
        The computation on the trace's critical path (:func:`critical_compute_s`): the step time's
        computation term. 0 for a trace without computation.

    Examples
    --------
    >>> from topoplan.traffic.matrix import from_arrays
    >>> st = Steps(2, [from_arrays(2, [0], [1], [8.0])], np.array([5.0]), 5, "x")
    >>> float(st.total_bytes()), st.total().count.tolist()
    (40.0, [5])
    """

    n_ranks: int
    types: list
    count: np.ndarray
    n_steps: int
    source: str = ""
    latency_types: list | None = None
    latency_count: np.ndarray | None = None
    compute_s: float = 0.0

    @property
    def n_types(self) -> int:
        return len(self.types)

    @property
    def latency_levels(self) -> int | None:
        """Levels of the latency clock that carry messages (None: not clocked)."""
        return None if self.latency_count is None else int(round(float(self.latency_count.sum())))

    def total_bytes(self) -> float:
        """Bytes of all steps together."""
        return float(sum(c * t.total_bytes() for c, t in zip(self.count.tolist(), self.types)))

    def total(self) -> Traffic:
        """The traffic of all steps together (each type's messages times its count)."""
        if not self.types:
            return from_arrays(self.n_ranks, [], [], [], name=self.source)
        src = np.concatenate([t.src for t in self.types])
        dst = np.concatenate([t.dst for t in self.types])
        size = np.concatenate([t.msg_bytes for t in self.types])
        cnt = np.concatenate([t.count * int(round(c)) for t, c in zip(self.types, self.count.tolist())])
        return from_arrays(self.n_ranks, src, dst, size, cnt, name=self.source)

    def fingerprint(self) -> str:
        """SHA-256 over the types and counts (to bind a plan to the steps it was made for)."""
        h = hashlib.sha256()
        h.update(np.int64(self.n_ranks).tobytes())
        for t, c in zip(self.types, self.count.tolist()):
            for a in (t.src, t.dst, t.msg_bytes, t.count, np.float64(c)):
                h.update(np.ascontiguousarray(a).tobytes())
        if self.latency_types is not None:
            h.update(b"latency")
            for t, c in zip(self.latency_types, self.latency_count.tolist()):
                for a in (t.src, t.dst, t.msg_bytes, t.count, np.float64(c)):
                    h.update(np.ascontiguousarray(a).tobytes())
        if self.compute_s:
            h.update(b"compute" + np.float64(self.compute_s).tobytes())
        return h.hexdigest()


class _UnitEngine:
    """The flow engine's interface on a unit network: a message ends one unit after it starts."""

    def __init__(self):
        self.heap: list = []

    def next_event_time(self) -> float:
        return self.heap[0][0] if self.heap else np.inf

    def advance_to(self, t: float) -> None:
        pass

    def run_until_next_event(self):
        h = self.heap
        t = h[0][0]
        out = []
        while h and h[0][0] <= t:
            out.append(heapq.heappop(h)[1])
        return t, out

    def link_bytes(self) -> np.ndarray:
        return np.zeros(0)

    def timeline(self) -> None:
        return None


def _unit_replayer(trace: Trace, eager_threshold_B: float, *, latency: bool = False, stop_at=None, time_limit=None):
    """The reference replayer with its engine and its message start replaced by the unit clock.

    ``latency=False``: the step clock (only blocking sends are eager, and a message starts when its receive is
    posted). ``latency=True``: the latency clock (every send below the threshold is eager and its message
    starts at once, as in the replay). Past ``stop_at`` (monotonic seconds; ``time_limit`` names it) a rank's
    next run raises :class:`StepClockLimit`."""
    threshold = float(eager_threshold_B)

    class UnitReplayer(Replayer):
        def __init__(self):
            super().__init__(trace, _UnitNetwork(), _Placed(np.arange(trace.n_ranks, dtype=np.int64)),
                             compute_scale=0.0, eager_threshold_B=eager_threshold_B)
            self.engine = _UnitEngine()
            if not latency:
                self.eager_B = 0.0
            self.sent = []
            self.next_id = 0
            # the latency clock's chain: per rank the messages that arrived in the level that woke it last (the
            # one that woke it first), per message its sender's (or for a rendezvous, the later side's) then;
            # per rank the messages that completed its requests in the current level; the message completing a
            # request now
            self.before = []
            self.cause = [()] * trace.n_ranks
            self.done_t = [-1.0] * trace.n_ranks
            self.done_ids = [[] for _ in range(trace.n_ranks)]
            self.running = -1
            self.waker = -1
            self.msg_id = {}

        def _run_rank(self, r, t):
            if stop_at is not None:
                _past(stop_at, time_limit)
            self.running = r
            super()._run_rank(r, t)

        def _call(self, r, i):
            if latency:
                return super()._call(r, i)
            # only a blocking send is eager: its sender goes on at once (the replay's eager protocol)
            self.eager_B = threshold if self.op[i] == OP_CODE["send"] else 0.0
            super()._call(r, i)
            self.eager_B = 0.0

        def _matched(self, m, rq, t):
            if latency:
                if m.eager and m.arrived:       # an eager message that arrived before its receive was posted
                    self.waker = self.msg_id[id(m)]
                super()._matched(m, rq, t)
                self.waker = -1
                return
            m.rreq = rq
            rq.peer = m.src
            self._start(m, t)

        def _start(self, m, t):
            if m.rreq is None and not latency:
                return                  # an eager message starts when its receive is posted (_matched)
            level = float(round(t))
            self.sent.append((m.src, m.dst, m.nbytes, level))
            fid = self.next_id
            self.next_id += 1
            self.flow_msg[fid] = m
            if latency:
                self.before.append(self.cause[self.running])
                self.msg_id[id(m)] = fid
            heapq.heappush(self.engine.heap, (level + 1.0, fid))

        def _flush_flows(self):
            pass

        def _flow_done(self, fid, t):
            m = self.flow_msg.pop(fid)
            m.arrived, m.t_arrive = True, t
            self.waker = fid
            if not m.eager:
                self._complete(m.sreq, t)
            if m.rreq is not None:
                self._complete(m.rreq, t)
            self.waker = -1

        def _complete(self, q, t):
            if not latency or self.waker < 0:
                return super()._complete(q, t)
            r = q.rank
            if self.done_t[r] != t:
                self.done_t[r], self.done_ids[r] = t, []
            self.done_ids[r].append(self.waker)
            wakes = q.waited and not q.done and self.pending[r] == 1     # the last request its rank waits on
            super()._complete(q, t)
            if wakes:
                self.cause[r] = (self.waker,) + tuple(i for i in self.done_ids[r] if i != self.waker)

        def chain(self):
            """The levels of the longest chain (ending where the last rank finishes), in order: per level the
            indices of the messages that arrived in it at the rank the chain goes through (the first one's
            sender's level before it)."""
            fin = np.asarray(self.finish, dtype=np.float64)
            out = []
            c = self.cause[int(np.argmax(fin))] if len(fin) else ()
            while c:
                out.append(c)
                c = self.before[c[0]]
            return out[::-1]

    return UnitReplayer()


def has_computation(trace: Trace) -> bool:
    """Whether any rank of ``trace`` computes between its calls for more than :data:`COMPUTE_TICK_S` (a
    generated trace's timestamps only order its calls, unless its generator is asked to compute).

    Examples
    --------
    >>> from topoplan.traffic.generators import parse_spec
    >>> has_computation(parse_spec("ring:np=4,bytes=1MB,iters=3"))
    False
    >>> has_computation(parse_spec("neighbor2d:rows=2,cols=2,bytes=1MB,iters=2,compute=0.01"))
    True
    """
    bounds = np.searchsorted(trace.rank, np.arange(trace.n_ranks + 1))   # a trace's rows are in rank order
    return bool((gaps(trace, bounds, 1.0) > COMPUTE_TICK_S).any())


def critical_compute_s(trace: Trace, *, time_limit: float | None = None, _stop=None) -> float:
    """The computation on the critical path of ``trace``: its time on a network that delivers every message the
    moment it is sent (the trace's computation gaps as recorded, MPI matching and the replay's eager protocol).

    It is what no network plan can take away, and what the step time adds to its communication terms when the
    trace computes (:attr:`Steps.compute_s`). 0 at once for a trace without computation (a generated one).

    Parameters
    ----------
    trace : Trace
    time_limit : float, optional
        Seconds the clock may take (default: no limit); past it :class:`StepClockLimit`.

    Returns
    -------
    float
        The trace's time on that network in seconds, from its first call (every rank's first computation
        counts from there, as in the simulator).

    Examples
    --------
    >>> from topoplan.traffic.trace import Trace
    >>> rows = [(0, "send", 1, 1e6, -1, 2, 1.0, 1.1), (1, "recv", 0, 1e6, -1, 2, 0.0, 1.1),  # rank 0 computes 1 s
    ...         (1, "send", 0, 8, -1, 2, 1.6, 1.6), (0, "recv", 1, 8, -1, 2, 1.1, 1.6)]      # rank 1 then 0.5 s
    >>> critical_compute_s(Trace.from_records(rows, 2))
    1.5
    >>> from topoplan.traffic.generators import parse_spec
    >>> critical_compute_s(parse_spec("ring:np=4,bytes=1MB,iters=3"))
    0.0
    """
    if not has_computation(trace):
        return 0.0
    stop_at = _stop if _stop is not None else _stop_at(time_limit)
    if stop_at is not None:
        _past(stop_at - CLOCK_SETUP_S_PER_ROW * len(trace), time_limit)
    # the simulator's own replay on one switch whose links carry any message in no time: what is left is the
    # computation and the waits it causes. Compiled it takes a quarter to a ninth of the reference replayer's
    # time (the recorded NPB traces); before the event loop is compiled (an install without its ahead-of-time
    # build) the reference runs, which takes seconds where compiling would take minutes inside the clocks' limit
    n = trace.n_ranks
    instant = TreeTopology(kind="fat-tree", nodes_per_switch=(n,), down_bw_Bps=INSTANT_BW_BPS, down_latency_s=0.0,
                           up_bw_Bps=INSTANT_BW_BPS, up_latency_s=0.0, switch_delay_s=0.0,
                           intra_node_bw_Bps=INSTANT_BW_BPS, intra_node_latency_s=0.0)
    res = replay(trace, build_network(instant), sequential(n, instant), compute_scale=1.0,
                 method="auto" if compiled_ready() else "python")
    if stop_at is not None:
        _past(stop_at, time_limit)
    return float(res.makespan_s)


class _UnitNetwork:
    """What the reference replayer reads of a network before its engine is replaced: the model, one link."""

    def __init__(self):
        self.sim_model = SimModel()
        self._links = LinkSet([1.0], [0.0], [True])

    def linkset(self):
        return self._links


class _Placed:
    """The one field of a placement the reference replayer reads."""

    def __init__(self, rank_to_node):
        self.rank_to_node = rank_to_node


def step_levels(trace: Trace, *, eager_threshold_B: float = EAGER_THRESHOLD_B, latency: bool = False,
                time_limit: float | None = None, _stop=None):
    """Every message of ``trace`` (collectives expanded) with the level of the step clock it starts at.

    Parameters
    ----------
    trace : Trace
    eager_threshold_B : float, optional
        Blocking sends below this size return at once (MPI's eager protocol; the message still starts when
        its receive is posted); default the replay's threshold (see the module docstring). 0: every sender
        waits until its message is delivered.
    latency : bool, optional
        The latency clock instead (see the module docstring): every send below ``eager_threshold_B`` returns
        at once and its message starts at once, as in the replay; only the messages of its longest chain of
        dependent messages are returned, with their level of the chain (0, 1, ...): at every level the
        messages that arrived in it at the rank the chain goes through.
    time_limit : float, optional
        Seconds the clock may take (default: no limit).

    Returns
    -------
    ``(src, dst, bytes, level)`` NumPy arrays, one entry per message (self-messages included).

    Raises
    ------
    TopoplanError
        For a trace that deadlocks (as the replay would), naming the blocked ranks.
    StepClockLimit
        When the clock takes longer than ``time_limit``, or at once when setting it up alone would
        (:data:`CLOCK_SETUP_S_PER_ROW` a row of the trace).

    Examples
    --------
    >>> from topoplan.traffic.generators import parse_spec
    >>> s, d, b, lv = step_levels(parse_spec("ring:np=4,bytes=1MB,iters=2"))
    >>> sorted(lv.tolist())                                 # two steps of four messages
    [0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0]
    """
    stop_at = _stop if _stop is not None else _stop_at(time_limit)
    if stop_at is not None:   # the replayer's set-up is not stopped: a clock that cannot start is not begun
        _past(stop_at - CLOCK_SETUP_S_PER_ROW * len(trace), time_limit)
    rep = _unit_replayer(trace, eager_threshold_B, latency=latency, stop_at=stop_at, time_limit=time_limit)
    rep.run()
    sent = rep.sent
    if latency:
        sent = [rep.sent[i][:3] + (float(k),) for k, c in enumerate(rep.chain()) for i in c]
    if not sent:
        z = np.zeros(0)
        return z.astype(np.int64), z.astype(np.int64), z, z
    a = np.array(sent, dtype=np.float64)
    return a[:, 0].astype(np.int64), a[:, 1].astype(np.int64), a[:, 2], a[:, 3]


def _one_exchange(trace: Trace):
    """The levels of :func:`step_levels` without the replay, for a trace that is one exchange: every rank posts
    its non-blocking sends and receives (``isend``, ``irecv``; no wildcard source or tag, the world
    communicator) before any wait (``wait``, ``waitall``), and the sends and receives pair up exactly by
    (source, destination, tag). Every message then starts at level 0, at either eager threshold (the
    replay matches each send with its receive at time 0); a random exchange of 131,072 messages is clocked
    in milliseconds instead of a minute. None for any other trace (the replay decides).

    Returns ``(src, dst, bytes, level)`` as :func:`step_levels`, in the trace's order of the sends.

    Examples
    --------
    >>> from topoplan.traffic.generators import parse_spec
    >>> t = parse_spec("random:np=8,msgs=20,bytes=1MB,seed=1")
    >>> s, d, b, lv = _one_exchange(t)
    >>> len(s), set(lv.tolist()), sorted(zip(s, d)) == sorted(zip(*step_levels(t)[:2]))
    (20, {0.0}, True)
    >>> _one_exchange(parse_spec("ring:np=4,bytes=1MB,iters=2")) is None   # two exchanges: the replay
    True
    """
    op, rank, peer, tag = trace.op, trace.rank, trace.peer, trace.tag
    isend, irecv = op == OP_CODE["isend"], op == OP_CODE["irecv"]
    wait = (op == OP_CODE["wait"]) | (op == OP_CODE["waitall"])
    post = isend | irecv
    if not len(op) or not (post | wait).all() or not isend.any():
        return None
    if (trace.comm[post] != -1).any() or (peer[post] < 0).any() or (tag[irecv] == -1).any():
        return None   # another communicator, or a wildcard receive: matched by the replay
    if (peer[post] >= trace.n_ranks).any() or (np.diff(rank) < 0).any():
        return None
    # no post after a wait of the same rank: the waits seen so far in the rank, at every post, are none
    seen = np.cumsum(wait)
    lo = np.searchsorted(rank, rank, side="left")
    before = seen - wait - (seen[lo] - wait[lo])   # waits of the rank before this row
    if (before[post] > 0).any():
        return None
    key_s = np.stack([rank[isend], peer[isend], tag[isend]])
    key_r = np.stack([peer[irecv], rank[irecv], tag[irecv]])
    if key_s.shape != key_r.shape:
        return None
    if not np.array_equal(key_s[:, np.lexsort(key_s[::-1])], key_r[:, np.lexsort(key_r[::-1])]):
        return None   # a send without its receive (or the reverse): the replay finds the deadlock
    src, dst = rank[isend].astype(np.int64), peer[isend].astype(np.int64)
    return src, dst, trace.bytes[isend].astype(np.float64), np.zeros(len(src))


def trace_steps(trace: Trace, *, time_limit: float | None = None, computation: bool = True) -> Steps:
    """The step types of ``trace`` and their counts (see the module docstring).

    Self-messages (a rank to itself) are left out; a level whose messages equal another's is the same
    type.

    Parameters
    ----------
    trace : Trace
    time_limit : float, optional
        Seconds the clocks may take together (default: no limit).
    computation : bool, optional
        Find the computation on the trace's critical path (:attr:`Steps.compute_s`, default); False leaves it
        at 0 (the steps of a part of a trace that stands for other parts, as a phase class's first phase).

    Returns
    -------
    Steps

    Raises
    ------
    TopoplanError
        For a trace that deadlocks.
    StepClockLimit
        When the clocks take longer than ``time_limit``.

    Examples
    --------
    >>> from topoplan.traffic.generators import parse_spec
    >>> st = trace_steps(parse_spec("neighbor2d:rows=2,cols=2,bytes=1MB,iters=4"))
    >>> st.n_types, st.count.tolist(), [t.total_bytes() for t in st.types]
    (1, [4.0], [8000000.0])
    """
    stop_at = _stop_at(time_limit)
    st, chain = _steps_and_chain(trace, stop_at, time_limit)
    st = _with_chain(st, chain)
    return _with_compute(st, trace, stop_at, time_limit) if computation else st


def _with_compute(st: Steps, trace: Trace, stop_at, time_limit) -> Steps:
    """``st`` with the computation on ``trace``'s critical path (:func:`critical_compute_s`)."""
    c = critical_compute_s(trace, time_limit=time_limit, _stop=stop_at)
    return dataclasses.replace(st, compute_s=c) if c else st


def _steps_and_chain(trace: Trace, stop_at=None, time_limit=None, chain: bool = False):
    """The step types of ``trace`` (without the chain) and its latency chain, ``(src, dst, bytes, level)`` as
    :func:`step_levels` gives it; None for a trace that is one exchange (one step: its latency is its slowest
    message's) unless ``chain``. Both clocks stop at ``stop_at`` (:class:`StepClockLimit`)."""
    one = _one_exchange(trace)
    clock = dict(time_limit=time_limit, _stop=stop_at)
    if one is not None:
        src, dst, nb, lv = one
        lat = step_levels(trace, latency=True, **clock) if chain else None
    else:
        src, dst, nb, lv, lat = _both_clocks(trace, clock, stop_at)
    keep = src != dst
    st = _group_levels(trace.n_ranks, src[keep], dst[keep], nb[keep], lv[keep], trace.source)
    return st, lat


def _both_clocks(trace: Trace, clock: dict, stop_at):
    """The step clock's levels and the latency clock's chain (:func:`step_levels`), the latency clock in a forked
    child meanwhile when the trace has :data:`CLOCKS_APART_ROWS` rows or more and two CPUs are ours. The child
    shows no progress and ignores Ctrl-C; if it does not bring its chain back (an exception, its time limit), or
    no process can be forked, the latency clock runs here as it would have, with the same result or the same
    error."""
    latency_clock = functools.partial(step_levels, trace, latency=True, **clock)
    child = None
    if len(trace) >= CLOCKS_APART_ROWS and forked.available():
        try:
            child = forked.Forked(lambda _: latency_clock(), [None])
        except OSError:   # no process to be had (fork's EAGAIN, ENOMEM): one clock after the other
            child = None
    if child is None:
        return (*step_levels(trace, **clock), latency_clock())
    with child:
        levels = step_levels(trace, **clock)
        got = child.collect(timeout_s=None if stop_at is None else max(stop_at - time.monotonic(), 0.0))
    return (*levels, got[0] if 0 in got else latency_clock())


def _with_chain(st: Steps, chain, first: int | None = None, times: float = 1.0) -> Steps:
    """``st`` with its latency chain's levels as types: ``chain`` is ``(src, dst, bytes, level)`` of the chain's
    messages (None: ``st`` as it is); the levels from ``first`` on count ``times`` each."""
    if chain is None:
        return st
    src, dst, nb, lv = chain
    later = lv >= (np.inf if first is None else first)
    parts = []
    for sel, w in ((~later, 1.0), (later, times)):
        g = _group_levels(st.n_ranks, src[sel], dst[sel], nb[sel], lv[sel], st.source)
        parts.append((g.types, g.count, w))
    types, count = _combine_types(parts)
    return dataclasses.replace(st, latency_types=types, latency_count=count)


def _group_levels(n_ranks, src, dst, nb, lv, source) -> Steps:
    """Levels into step types: the messages of each level sorted, levels with equal messages merged."""
    if not len(src):
        return Steps(int(n_ranks), [], np.zeros(0), 0, source)
    order = np.lexsort((nb, dst, src, lv))
    src, dst, nb, lv = src[order], dst[order], nb[order], lv[order]
    starts = np.flatnonzero(np.r_[True, lv[1:] != lv[:-1]])
    ends = np.r_[starts[1:], len(lv)]
    index: dict = {}
    types, count = [], []
    for a, b in zip(starts.tolist(), ends.tolist()):
        key = (src[a:b].tobytes(), dst[a:b].tobytes(), nb[a:b].tobytes())
        k = index.get(key)
        if k is None:
            k = index[key] = len(types)
            types.append(from_arrays(n_ranks, src[a:b], dst[a:b], nb[a:b], name=source))
            count.append(0.0)
        count[k] += 1.0
    return Steps(int(n_ranks), types, np.asarray(count), len(starts), source)


def _combine(n_ranks, parts, source) -> Steps | None:
    """Step types of several Steps, each weighted (``parts``: ``[(Steps, weight)]``); equal types merge.
    None when a type's count comes out negative."""
    types, count = _combine_types([(st.types, st.count, w) for st, w in parts])
    if types is None:
        return None                     # not a set of whole steps
    return Steps(int(n_ranks), types, count, int(round(count.sum())), source)


def _combine_types(parts):
    """``[(types, counts, weight)]`` summed: equal types merge; ``(None, None)`` for a negative count."""
    index: dict = {}
    types, count = [], []
    for tys, cnt, w in parts:
        for t, c in zip(tys, cnt.tolist()):
            key = (t.src.tobytes(), t.dst.tobytes(), t.msg_bytes.tobytes(), t.count.tobytes())
            k = index.get(key)
            if k is None:
                k = index[key] = len(types)
                types.append(t)
                count.append(0.0)
            count[k] += w * c
    if any(c < -1e-9 for c in count):
        return None, None
    keep = [i for i, c in enumerate(count) if c > 1e-9]
    return [types[i] for i in keep], np.round(np.asarray([count[i] for i in keep], dtype=np.float64), 9)


def steps_of_spec(spec: str, *, min_rows: int = 1000, trace: Trace | None = None,
                  time_limit: float | None = None) -> Steps:
    """The steps of a generator spec's trace, clocked by its iterations.

    A trace of at most ``min_rows`` rows is clocked whole, and so is one that has fewer than twice the rows of
    its first three iterations together (clocking those, and the latency chain whole, would cost more). A
    larger one whose generator takes ``iters`` is clocked at one, two and three iterations; when the third
    iteration adds the same steps as the second (the iterations do not mix in the clock: the code
    synchronizes every iteration, as NPB's kernels do),
    its steps are the first run's plus ``N - 1`` times what the second adds, ``N`` being the spec's
    iterations (found from the rows). Otherwise -- iterations that overlap in the clock, or rows that do not
    grow by whole iterations -- the whole trace is clocked; a latency chain that does not grow by as many
    levels in every iteration (its path through the ranks changes) is clocked on the whole trace alone; so is
    the computation on the critical path (:attr:`Steps.compute_s`) when it does not grow by as much in every
    iteration.

    Parameters
    ----------
    spec : str
        A generator spec (:func:`topoplan.traffic.generators.parse_spec`).
    min_rows : int, optional
    trace : Trace, optional
        The spec's trace, when the caller has generated it already: clocked when the whole trace is, instead
        of generating it again.
    time_limit : float, optional
        Seconds the clocks may take together (default: no limit); past it :class:`StepClockLimit`.

    Returns
    -------
    Steps

    Examples
    --------
    >>> a = steps_of_spec("ring:np=4,bytes=1MB,iters=20")
    >>> b = steps_of_spec("ring:np=4,bytes=1MB,iters=20", min_rows=10)   # by its iterations
    >>> (a.n_types, a.count.tolist()) == (b.n_types, b.count.tolist())
    True
    """
    stop_at = _stop_at(time_limit)

    def whole() -> Steps:
        tr = trace if trace is not None else parse_spec(spec)
        st, chain = _steps_and_chain(tr, stop_at, time_limit)
        return _with_compute(_with_chain(st, chain), tr, stop_at, time_limit)

    rec = record_spec(spec)
    if rec is None or rec.rows <= min_rows:
        return whole()
    try:
        specs = [_with_iters(spec, k) for k in (1, 2, 3)]
        r1, r2 = record_spec(specs[0]).rows, record_spec(specs[1]).rows
    except TopoplanError:               # the generator has no iterations
        return whole()
    per = r2 - r1
    n = 1 + (rec.rows - r1) // per if per > 0 else 0
    if per <= 0 or r1 + (n - 1) * per != rec.rows or n <= 3:
        return whole()
    # clocking one, two and three iterations must cost less than the whole trace even when the latency chain
    # then has to be clocked on the whole trace (below): at most half its rows
    if 2 * (3 * r1 + 3 * per) >= rec.rows:
        return whole()
    runs = [parse_spec(s) for s in specs]
    (one, c1), (two, c2), (three, c3) = (_steps_and_chain(t, stop_at, time_limit, chain=True) for t in runs)
    # the steps grow by whole iterations only when an iteration's steps do not mix with the next one's in the
    # clock (a code that synchronizes every iteration); three iterations must be the first plus twice the rest
    if _key(_combine(one.n_ranks, [(one, -1.0), (two, 2.0)], "")) != _key(three):
        return whole()
    st = _combine(one.n_ranks, [(one, 1.0), (two, float(n - 1)), (one, -float(n - 1))], str(spec).strip())
    if st is None:
        return whole()
    # the computation on the critical path grows by the same amount every iteration (else the whole trace's)
    k1, k2, k3 = (critical_compute_s(t, time_limit=time_limit, _stop=stop_at) for t in runs)
    if abs((k3 - k2) - (k2 - k1)) <= 1e-9 * max(k3, 1e-300):
        compute_s = k1 + (n - 1) * (k2 - k1)
    else:
        compute_s = critical_compute_s(trace if trace is not None else parse_spec(spec), time_limit=time_limit,
                                       _stop=stop_at)
    st = dataclasses.replace(st, compute_s=float(compute_s)) if compute_s else st
    # the latency chain grows by the same number of levels every iteration: the first iteration's part of the
    # second run's chain, then its second iteration's part N - 1 times
    if any(c is None for c in (c1, c2, c3)):
        return st if all(c is None for c in (c1, c2, c3)) else whole()
    h1, h2, h3 = (int(c[3].max(initial=-1)) + 1 for c in (c1, c2, c3))
    if h3 - h2 != h2 - h1:   # the chain takes another path through the ranks as iterations add: clocked whole
        whole_trace = trace if trace is not None else parse_spec(spec)
        return _with_chain(st, step_levels(whole_trace, latency=True, time_limit=time_limit, _stop=stop_at))
    return _with_chain(st, c2, first=h1, times=float(n - 1))


def _key(st: Steps | None):
    """Steps as a comparable multiset of types (None stays None)."""
    if st is None:
        return None
    return sorted((t.src.tobytes(), t.dst.tobytes(), t.msg_bytes.tobytes(), t.count.tobytes(), round(c, 9))
                  for t, c in zip(st.types, st.count.tolist()))


def _with_iters(spec: str, iters: int) -> str:
    """The spec with ``iters`` set (checked by the generator's parser)."""
    name, _, rest = str(spec).strip().partition(":")
    parts = [p for p in rest.split(",") if p.strip() and p.split("=")[0].strip().lower() != "iters"]
    out = f"{name}:{','.join(parts + [f'iters={iters}'])}"
    record_spec(out)
    return out


def source_steps(source: str, trace: Trace | None, *, time_limit: float | None = None) -> Steps | None:
    """The steps of a traffic source: a generator spec by its iterations (:func:`steps_of_spec`), a trace file
    whole (:func:`trace_steps`, up to :data:`STEP_CLOCK_ROWS` rows); None for a matrix (no order to follow)
    or a trace file too long to clock.

    Parameters
    ----------
    source : str
        The source as given (a spec or a path).
    trace : Trace or None
        Its trace (None for a communication matrix).
    time_limit : float, optional
        Seconds the clocks may take (default: no limit); past it :class:`StepClockLimit`.

    Returns
    -------
    Steps or None

    Examples
    --------
    >>> from topoplan.traffic.generators import parse_spec
    >>> source_steps("ring:np=4,bytes=1MB", parse_spec("ring:np=4,bytes=1MB")).n_steps
    1
    >>> source_steps("matrix.csv", None) is None
    True
    """
    if trace is None:
        return None
    if is_spec(source):
        return steps_of_spec(source, trace=trace, time_limit=time_limit)
    if len(trace) > STEP_CLOCK_ROWS:
        return None
    return trace_steps(trace, time_limit=time_limit)
