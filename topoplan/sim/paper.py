"""Message-level store-and-forward network model of the papers' own simulators.

The hybrid EPS/OCS papers evaluate their schemes with home-grown trace
simulators (paper 000, section 4.1; paper 003, section 4.1.4 and Table 3).
Both charge a message of ``n`` bytes ``alpha_l + n / beta_l`` (latency plus
size over bandwidth) on every link ``l`` it crosses, forward it only after it
has been received completely ("store-and-forward"), and model contention by
*postponing* a message that finds a link (000) or a receiving device (003)
busy with an earlier one. :class:`PaperEngine` is that model as an
:class:`~topoplan.sim.engines.Engine`, so the Python
:class:`topoplan.sim.reference.Replayer` drives it as it drives
:class:`topoplan.sim.maxmin.FlowEngine`.

Model
-----
A message is one flow over a route of directed links ``l_1 .. l_k``. Each
link belongs to at most one FIFO *queue* (``queue_of_link``; by default every
shared link is its own queue and a fat pipe, ``shared=False``, has none; a
caller models a receiving device by giving every link into it the same
queue id). With ``n`` the size, ``beta``/``alpha`` the bandwidth/latency of
the link used and ``free[q]`` the time queue ``q`` becomes idle:

* the head of the message reaches the input of hop ``i`` at time ``a``;
* it starts transmitting at ``s = max(a, free[q])`` (``s = a`` without a
  queue);
* the transmission ends at ``e = s + n / beta`` and the queue is busy until
  then: ``free[q] = e``. Only transmission occupies a queue, propagation
  ``alpha`` does not. A queue shared by links of different bandwidths is
  busy for ``n / beta`` of the link actually used;
* the message has completely arrived at the next device at ``e + alpha``,
  which is the head arrival ``a`` of hop ``i + 1`` (store-and-forward);
* the flow finishes at ``e + alpha`` of its last hop.

So an uncontended message takes ``sum_i (alpha_i + n / beta_i)``, which
gives paper 003's Table 3 with ``f(x, t) = 0``: ``2(a1 + n/b1)`` within one
switch, ``2(a1 + n/b1) + 2(a2 + n/b2)`` across switches, ``a3 + n/b3`` over
one OCS circuit and ``4(a1 + n/b1) + a3 + n/b3`` relayed over OCS.

Modelling choices
-----------------
* **FIFO by arrival time, ties by flow id or by a seeded draw.** The
  simulation is event driven over hop arrivals (a heap of ``(time, order,
  hop)``): a queue serves messages in the order their heads reach it, not
  the order they were injected, so a message injected later over a shorter
  path can overtake. Exactly simultaneous arrivals are served in the order
  of ``tie_seed``: 0 (default) the smallest flow id first, that is the order
  the messages were injected; any other seed a random order, drawn per flow
  as it is added, the same for the same seed and the same flows. The papers
  do not say how their simulators order simultaneous messages, so a result
  that moves with the seed depends on that choice. Arrivals that differ by
  rounding only (less than ``rel_tol``) are still served in time order.
* **Occupancy is n / beta**, transmission only (see above).
* **Zero-byte messages** cost only latencies: they neither wait for nor
  occupy any queue (``s = a``, ``e = s``), so they finish at
  ``start + sum_i alpha_i``. A flow with an empty route finishes at its start.
* **Cut-through relays** (optional, ``add_flows(..., cut_through=mask)``): at
  a hop ``i > 0`` whose mask entry is True the message may start once its
  first chunk of ``c = min(n, chunk_B)`` bytes has arrived over the previous
  hop (started ``s'``, ended ``e'``, bandwidth ``b'``, latency ``a'``):

  - head arrival ``a = s' + c / b' + a'``;
  - start ``s = max(a, free[q])``;
  - end ``e = max(s + n / beta, e' + a' + c / beta)``: the hop cannot end
    before the tail has arrived and its last chunk has been sent.

  The queue is busy from ``s`` to ``e``. With ``chunk_B >= n`` this is
  exactly store-and-forward (``a = e' + a'``); for ``n >> chunk_B`` over
  equal links it approaches the pipelined ``sum_i alpha_i + n / beta``.
* Start times before the engine's clock are moved to the clock, and the
  first hop's head arrival is the start time (the engine adds the links'
  latencies, like :class:`~topoplan.sim.maxmin.FlowEngine`).

Every hop arrival and every completion is an engine event: ``next_event_time``
reports it and ``run_until_next_event`` processes it (returning no finished
flow for a mere hop arrival), so flows added at ``t`` after ``advance_to(t)``
are ordered correctly against messages already in flight. Per event the work
is a heap pop and push on Python floats (a few microseconds).
"""

from __future__ import annotations

import heapq
import math
import time
from typing import Callable

import numpy as np

from topoplan.core.errors import TopoplanError
from topoplan.sim.engines import REL_TOL, Engine, register
from topoplan.sim.routes import LinkSet, check_flows

__all__ = ["PaperEngine", "simulate_paper"]

_EMPTY_I = np.zeros(0, dtype=np.int64)
_ID_BITS = 48                          # flow ids below 2**48 (a heap key holds the id in its low bits)
_ID_MASK = (1 << _ID_BITS) - 1


@register("paper")
class PaperEngine(Engine):
    """Event-driven store-and-forward simulator with FIFO postponement (papers 000 and 003).

    An :class:`~topoplan.sim.engines.Engine`, like :class:`topoplan.sim.maxmin.FlowEngine`; the network
    model is described in the module docstring.

    Parameters
    ----------
    links : LinkSet
        Directed links (``bw_Bps``, ``latency_s``, ``shared``).
    queue_of_link : int array, optional
        Queue id of each link (``-1``: no queue, the link never postpones).
        Links with the same id share one FIFO queue, e.g. every link into one
        receiving device. Default: a link's own id for shared links, ``-1``
        for fat pipes (``shared=False``).
    chunk_B : float
        First-chunk size in bytes for cut-through hops (> 0).
    rel_tol : float
        Events within ``rel_tol * |t|`` of an event time ``t`` are processed
        together by :meth:`run_until_next_event`.
    tie_seed : int
        Order of exactly simultaneous arrivals at a queue: 0, the flow id
        (injection order); otherwise a random order drawn from this seed.

    Attributes
    ----------
    now_s : float
        Current time.
    n_events : int
        Calls of :meth:`run_until_next_event` that processed something
        (batches of simultaneous events).
    n_hop_events : int
        Internal events processed (hop arrivals and completions).

    Examples
    --------
    >>> links = LinkSet(bw_Bps=[1e9, 1e9], latency_s=[1e-6, 1e-6], shared=[True, True])
    >>> eng = PaperEngine(links)
    >>> eng.add_flows([0, 2, 3], [0, 1, 1], [0.0, 0.0], [1e6, 2e6]).tolist()
    [0, 1]
    >>> eng.run_until_next_event()          # both heads reach their first link
    (0.0, array([], dtype=int64))
    >>> t, done = eng.run_until_next_event()
    >>> round(t * 1e6, 6), done.tolist()    # flow 0 reaches link 1, busy with flow 1 until 2 ms
    (1001.0, [])
    >>> t, done = eng.run_until_next_event()
    >>> round(t * 1e6, 6), done.tolist()
    (2001.0, [1])
    >>> eng.run()
    >>> [round(x * 1e6, 6) for x in eng.finish_s.tolist()]   # flow 0 was postponed on link 1
    [3001.0, 2001.0]

    Two messages reaching one link at once: the first injected goes first, unless a tie seed draws
    another order.

    >>> one = LinkSet(bw_Bps=[1e9], latency_s=[0.0], shared=[True])
    >>> [simulate_paper(one, [0, 1, 2], [0, 0], [0.0, 0.0], [1e6, 1e6], tie_seed=s).tolist() for s in (0, 4)]
    [[0.001, 0.002], [0.002, 0.001]]
    """

    def __init__(self, links: LinkSet, *, queue_of_link=None, chunk_B: float = 65536.0,
                 rel_tol: float = REL_TOL, tie_seed: int = 0):
        self.links = links
        n_links = len(links)
        chunk_B = float(chunk_B)
        if not (chunk_B > 0 and math.isfinite(chunk_B)):
            raise TopoplanError(f"PaperEngine: chunk_B must be finite and > 0, got {chunk_B}")
        rel_tol = float(rel_tol)
        if not (rel_tol >= 0 and math.isfinite(rel_tol)):
            raise TopoplanError(f"PaperEngine: rel_tol must be finite and >= 0, got {rel_tol}")
        if queue_of_link is None:
            q = np.where(links.shared, np.arange(n_links), -1)
        else:
            raw = np.asarray(queue_of_link).reshape(-1)
            if len(raw) != n_links:
                raise TopoplanError(f"PaperEngine: queue_of_link must have one entry per link ({n_links}), "
                                    f"got {len(raw)}")
            if raw.dtype.kind == "b" or raw.dtype.kind not in "iuf":
                raise TopoplanError(f"PaperEngine: queue_of_link must hold integers, got dtype {raw.dtype}")
            q = raw.astype(np.int64)
            bad = np.flatnonzero((q != raw) | (q < -1))
            if bad.size:
                raise TopoplanError(f"PaperEngine: queue_of_link[{bad[0]}] must be an integer >= -1, "
                                    f"got {raw[bad[0]]}")
        self.queue_of_link = q.astype(np.int64)
        self.chunk_B = chunk_B
        self.rel_tol = rel_tol
        if isinstance(tie_seed, bool) or not isinstance(tie_seed, (int, np.integer)) or tie_seed < 0:
            raise TopoplanError(f"PaperEngine: tie_seed must be an integer >= 0, got {tie_seed!r}")
        self.tie_seed = int(tie_seed)
        # seed 0: a flow's order key is its id; otherwise a random draw above the id bits (the id stays in the key)
        self._tie_rng = np.random.default_rng(self.tie_seed) if self.tie_seed else None
        # per link, as Python lists (fast scalar access in the event loop)
        self._bw = links.bw_Bps.tolist()
        self._lat = links.latency_s.tolist()
        self._q = self.queue_of_link.tolist()
        self._free = [-math.inf] * (int(q.max(initial=-1)) + 1)   # per queue: idle from
        self._lbytes = [0.0] * n_links
        # per route position (all flows' routes concatenated)
        self._rl: list[int] = []
        self._ct: list[bool] = []
        # per flow
        self._lo: list[int] = []
        self._k: list[int] = []
        self._size: list[float] = []
        self._s: list[float] = []         # transmission start on the latest hop
        self._e: list[float] = []         # transmission end on the latest hop
        self._finish: list[float] = []
        # (time, order key, hop); hop == route length: completion. The key is the flow id, or (tie_seed) a
        # random draw shifted above the id's bits: ``key & _ID_MASK`` is the flow id either way.
        self._heap: list[tuple[float, int, int]] = []
        self._n_started = 0
        self.n_done = 0
        self.now_s = 0.0
        self.n_events = 0
        self.n_hop_events = 0

    # -- public state ------------------------------------------------------------
    @property
    def n_flows(self) -> int:
        """Flows added so far."""
        return len(self._size)

    @property
    def now(self) -> float:
        """Current time (alias of ``now_s``)."""
        return self.now_s

    @property
    def n_active(self) -> int:
        """Flows whose head has reached their first link but that have not finished."""
        return self._n_started - self.n_done

    @property
    def finish_s(self) -> np.ndarray:
        """Finish time per flow id (NaN while unfinished)."""
        return np.array(self._finish, dtype=np.float64)

    def link_bytes(self) -> np.ndarray:
        """Bytes carried so far per link.

        A hop counts once the message's head has moved on from it (arrived at
        the next hop, or the flow finished): all hops of a finished flow, the
        passed hops of one in flight.
        """
        return np.array(self._lbytes, dtype=np.float64)

    def timeline(self) -> None:
        """Utilization timelines are not recorded by this engine: always None."""
        return None

    # -- the engine interface (topoplan.sim.engines) --------------------------------
    @classmethod
    def for_network(cls, net, *, timeline_dt_s: float | None = None) -> "PaperEngine":
        """The engine of a :class:`~topoplan.sim.network.Network`: its links, queues by the model's contention
        (:meth:`~topoplan.sim.network.Network.paper_queues`) and relay chunk. It records no timeline.

        Raises
        ------
        TopoplanError
            With ``timeline_dt_s``.

        Examples
        --------
        >>> from topoplan.core.topology_io import load_topology
        >>> from topoplan.sim.network import build_network
        >>> net = build_network(load_topology("paper003", ["kind=tree", "ocs=null"]), model={"model": "paper"})
        >>> PaperEngine.for_network(net).chunk_B
        65536.0
        >>> seeded = build_network(load_topology("paper003", ["kind=tree", "ocs=null"]),
        ...                        model={"model": "paper", "paper_tie_seed": 2})
        >>> PaperEngine.for_network(seeded).tie_seed
        2
        >>> PaperEngine.for_network(net, timeline_dt_s=1e-3)
        Traceback (most recent call last):
        ...
        topoplan.core.errors.TopoplanError: the paper model records no utilization timeline; use model 'maxmin'
        """
        if timeline_dt_s:
            raise TopoplanError("the paper model records no utilization timeline; use model 'maxmin'")
        return cls(net.linkset(), queue_of_link=net.paper_queues(), chunk_B=net.sim_model.relay_chunk_B,
                   tie_seed=net.sim_model.paper_tie_seed)

    def add_messages(self, net, route_ptr, route_links, start_s, bytes_) -> np.ndarray:
        """Add the flows of message segments routed on ``net``: every switch a route enters adds its switching
        delay before the message starts, and a relay node forwards it cut-through
        (:meth:`~topoplan.sim.network.Network.relay_positions`); the engine stores and forwards per hop.

        Examples
        --------
        >>> from topoplan.core.topology_io import load_topology
        >>> from topoplan.sim.network import build_network
        >>> net = build_network(load_topology("paper003", ["kind=tree", "ocs=null"]), model={"model": "paper"})
        >>> eng = PaperEngine.for_network(net)
        >>> ptr, links = net.eps_routes([0], [16])
        >>> eng.add_messages(net, ptr, links, np.zeros(1), np.array([1e6])).tolist()
        [0]
        """
        ptr = np.asarray(route_ptr)
        owner = np.repeat(np.arange(len(ptr) - 1), np.diff(ptr))
        extra = net.switch_delay_s * np.bincount(owner, weights=net.switches_in[route_links], minlength=len(ptr) - 1)
        return self.add_flows(ptr, route_links, start_s + extra, bytes_,
                              cut_through=net.relay_positions(ptr, route_links))

    # -- input -------------------------------------------------------------------
    def add_flows(self, route_ptr, route_links, start_s, bytes_, cut_through=None) -> np.ndarray:
        """Add flows; returns their ids (consecutive integers from ``n_flows``).

        Parameters
        ----------
        route_ptr, route_links : int arrays
            Routes in CSR form: flow ``i`` crosses ``route_links[route_ptr[i]:route_ptr[i + 1]]``.
        start_s : array of float
            Time the head reaches the first link (moved to the current time
            if earlier).
        bytes_ : array of float
            Sizes (>= 0).
        cut_through : bool array, optional
            Aligned with ``route_links``: True at a route position (other than
            a route's first) lets that hop start after the first ``chunk_B``
            bytes have arrived (see the module docstring). Default: all False.

        Returns
        -------
        ids : int64 array

        Examples
        --------
        >>> eng = PaperEngine(LinkSet([1e9, 1e9], [0.0, 0.0], [True, True]), chunk_B=1e3)
        >>> eng.add_flows([0, 2], [0, 1], [0.0], [1e6], cut_through=[False, True]).tolist()
        [0]
        >>> eng.run()
        >>> round(float(eng.finish_s[0]) * 1e6, 6)   # (n + chunk) / bw instead of 2 n / bw
        1001.0
        """
        ptr, rl, start, size = check_flows(self.links, route_ptr, route_links, start_s, bytes_)
        k = len(ptr) - 1
        first = self.n_flows
        ids = np.arange(first, first + k, dtype=np.int64)
        if cut_through is None:
            ct = [False] * len(rl)
        else:
            mask = np.asarray(cut_through).reshape(-1)
            if len(mask) != len(rl):
                raise TopoplanError(f"add_flows: cut_through must have one entry per route position "
                                    f"({len(rl)}), got {len(mask)}")
            if mask.dtype.kind != "b" and not np.isin(mask, (0, 1)).all():
                raise TopoplanError("add_flows: cut_through must hold booleans")
            ct = mask.astype(bool).tolist()
        if k == 0:
            return ids
        base = len(self._rl)
        self._rl.extend(rl.tolist())
        self._ct.extend(ct)
        self._lo.extend((base + ptr[:-1]).tolist())
        lengths = np.diff(ptr).tolist()
        self._k.extend(lengths)
        self._size.extend(size.tolist())
        self._s.extend([math.nan] * k)
        self._e.extend([math.nan] * k)
        self._finish.extend([math.nan] * k)
        keys = ids.tolist()
        if self._tie_rng is not None:
            draws = self._tie_rng.integers(0, 1 << 62, size=k, dtype=np.int64).tolist()
            keys = [(d << _ID_BITS) | f for d, f in zip(draws, keys)]
        events = list(zip(np.maximum(start, self.now_s).tolist(), keys, [0] * k))
        heap = self._heap
        if len(events) > len(heap):
            heap.extend(events)
            heapq.heapify(heap)
        else:
            for ev in events:
                heapq.heappush(heap, ev)
        return ids

    # -- stepping ----------------------------------------------------------------
    def next_event_time(self) -> float:
        """Time of the next hop arrival or completion (inf when nothing is pending)."""
        return self._heap[0][0] if self._heap else math.inf

    def advance_to(self, t: float) -> None:
        """Move the clock to ``t`` without crossing a pending event.

        Raises
        ------
        TopoplanError
            If ``t`` is later than the next event (beyond ``rel_tol``).
        """
        if t <= self.now_s:
            return
        t_next = self.next_event_time()
        if t > t_next + self.rel_tol * abs(t_next):
            raise TopoplanError(f"advance_to({t}) would skip the event at {t_next}; "
                                "call run_until_next_event first")
        self.now_s = float(t)

    def run_until_next_event(self) -> tuple[float, np.ndarray]:
        """Process every event at the next event time (within ``rel_tol``).

        Returns
        -------
        time_s : float
            The event time (inf when nothing is pending).
        finished : int64 array
            Sorted ids of the flows that finished at this event (empty when
            the event only moved messages from hop to hop). Their exact finish
            times are in :attr:`finish_s`.
        """
        heap = self._heap
        if not heap:
            return math.inf, _EMPTY_I
        t = max(heap[0][0], self.now_s)
        self.now_s = t
        horizon = t + self.rel_tol * abs(t)
        finished: list[int] = []
        # locals for the hot loop
        pop, push = heapq.heappop, heapq.heappush
        rl, ctl, lo_, k_, size_, s_, e_ = self._rl, self._ct, self._lo, self._k, self._size, self._s, self._e
        bw, lat, qof, free, lbytes = self._bw, self._lat, self._q, self._free, self._lbytes
        chunk = self.chunk_B
        n_ev = 0
        while heap and heap[0][0] <= horizon:
            a, key, j = pop(heap)
            f = key & _ID_MASK
            n_ev += 1
            k = k_[f]
            n = size_[f]
            if j == 0:
                self._n_started += 1
            if j == k:                      # completion
                if k:
                    lbytes[rl[lo_[f] + k - 1]] += n
                self._finish[f] = a
                finished.append(f)
                continue
            p = lo_[f] + j
            link = rl[p]
            b = bw[link]
            if j:
                lbytes[rl[p - 1]] += n
            if n > 0:
                s = a
                q = qof[link]
                if q >= 0 and free[q] > s:
                    s = free[q]
                e = s + n / b
                if j and ctl[p]:            # cut-through: not before the tail is in and its last chunk sent
                    tail = e_[f] + lat[rl[p - 1]] + (n if n < chunk else chunk) / b
                    if tail > e:
                        e = tail
                if q >= 0:
                    free[q] = e
            else:                           # zero bytes: latencies only, no queue
                s = e = a
            s_[f] = s
            e_[f] = e
            if j + 1 < k and ctl[p + 1]:    # next hop starts on the first chunk
                nxt = s + (n if n < chunk else chunk) / b + lat[link]
            else:
                nxt = e + lat[link]
            push(heap, (nxt, key, j + 1))
        self.n_hop_events += n_ev
        self.n_done += len(finished)
        self.n_events += 1
        if not finished:
            return t, _EMPTY_I
        finished.sort()
        return t, np.array(finished, dtype=np.int64)

    def run(self, progress: Callable[[int, int], None] | None = None) -> None:
        """Run until every added flow has finished; ``progress(done, total)`` is called now and then."""
        last = time.perf_counter()
        while self._heap:
            self.run_until_next_event()
            if progress is not None and time.perf_counter() - last > 0.1:
                progress(self.n_done, self.n_flows)
                last = time.perf_counter()
        if progress is not None:
            progress(self.n_done, self.n_flows)


def simulate_paper(links: LinkSet, route_ptr, route_links, start_s, bytes_, *, queue_of_link=None,
                   chunk_B: float = 65536.0, cut_through=None, tie_seed: int = 0) -> np.ndarray:
    """Simulate a known set of messages with :class:`PaperEngine` to completion.

    Parameters
    ----------
    links : LinkSet
    route_ptr, route_links : int arrays
        Routes in CSR form (:func:`topoplan.sim.routes.routes_to_csr` builds them from lists).
    start_s : array of float
        Start time of each message.
    bytes_ : array of float
        Size of each message in bytes.
    queue_of_link : int array, optional
        FIFO queue of each link (-1: none); see :class:`PaperEngine`.
    chunk_B : float
        First-chunk size for cut-through hops.
    cut_through : bool array, optional
        Per route position, see :meth:`PaperEngine.add_flows`.
    tie_seed : int, optional
        Order of exactly simultaneous arrivals, see :class:`PaperEngine`.

    Returns
    -------
    finish_s : array of float
        Finish time of each message, in input order.

    Examples
    --------
    >>> links = LinkSet([1e9], [0.0], [True])
    >>> simulate_paper(links, [0, 1, 2], [0, 0], [0.0, 0.0], [1e9, 1e9]).tolist()
    [1.0, 2.0]
    """
    eng = PaperEngine(links, queue_of_link=queue_of_link, chunk_B=chunk_B, tie_seed=tie_seed)
    eng.add_flows(route_ptr, route_links, start_s, bytes_, cut_through=cut_through)
    eng.run()
    return eng.finish_s
