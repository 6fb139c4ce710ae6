"""Flow-level network simulation with max-min fair sharing of directed links.

A message is a *flow*: a route (directed link ids), a start time and a size.
It first waits its path latency (the sum of its links' latencies) without
using bandwidth, then shares link bandwidth max-min fairly (unweighted
progressive filling) with every flow transferring at the same time. The
allocation is re-solved whenever a flow starts transferring or ends, so a
flow alone on its path ends at ``start + latency + bytes / bottleneck``.
The two directions of a cable are separate link ids (split duplex). A link
with ``shared=False`` is a *fat pipe*: it caps each flow at its bandwidth but
is not divided among flows.

:class:`FlowEngine` is event driven: flows may be injected while the
simulation runs (the reference MPI replay of :mod:`topoplan.sim.replay` uses it) and
it records utilization timelines. :func:`simulate_flows` runs a known flow
set; with Numba it runs the same event loop compiled as a whole
(:mod:`topoplan.sim._loop`, which also runs the compiled replay), so no Python
runs per event. ``tests/test_sim_engine.py`` checks all paths against
SimGrid 3.32 and against each other.

Events are batched: every flow whose transfer starts, and every flow that
completes, within a relative ``rel_tol`` (1e-12) of the event time is handled
in that one event. Per-event work is array work over the active flows; the
allocation itself is computed by one of two interchangeable solvers:

``"numpy"``
    Vectorized progressive filling over the flattened (flow, link)
    incidence: each round computes every link's fair share with
    ``np.bincount``, every flow's smallest share with ``np.minimum.reduceat``
    and freezes, in one step, all flows crossing a link that no neighbouring
    link undercuts (a local bottleneck is a global one in max-min), so rounds
    follow chains of bottleneck levels, not flows.
``"numba"``
    The same allocation by a compiled sequential progressive filling: a heap
    of link fair shares (lazily refreshed, since shares only grow) and
    link -> flow lists that are updated per started or ended flow rather than
    rebuilt, so a re-solve costs O(nnz + levels log links) with no per-round
    array passes. ``"auto"`` uses it when Numba is importable: workloads with
    thousands of distinct start times re-solve thousands of times, and a
    per-round NumPy pass costs more than the whole compiled solve.

Transferring flows live in *slots* (rows of fixed-width arrays), so a start or
an end writes one slot instead of compacting arrays, and remaining bytes are
brought forward lazily at the next re-solve (rates are constant until then).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from topoplan.core.errors import TopoplanError
from topoplan.core.deadline import kernel_ready
from topoplan.sim._engine import aot_status, run_flows
from topoplan.sim.engines import REL_TOL, Engine, register
from topoplan.sim.routes import LinkSet, check_flows, pad_routes, route_stats, routes_to_csr

__all__ = ["SMALL_JOB", "compiled_ready", "MAX_TIMELINE_CELLS", "FlowResult", "maxmin_rates", "FlowEngine", "numba_available",
           "simulate_flows", "timeline_from_samples", "timeline_max_intervals", "timeline_too_long"]

_EMPTY_I = np.zeros(0, dtype=np.int64)
_EMPTY_F = np.zeros(0, dtype=np.float64)


# --------------------------------------------------------------------------- data


@dataclass
class FlowResult:
    """Outcome of :func:`simulate_flows`.

    Attributes
    ----------
    finish_s : array of float
        Finish time of each flow, in input order.
    makespan_s : float
        Latest finish time (0 without flows).
    link_bytes : array of float
        Bytes carried by each directed link.
    n_events : int
        Number of events (batches of simultaneous starts and ends).
    timeline : dict or None
        With ``timeline_dt_s``: ``{"t_s", "dt_s", "util"}``, ``util[link, k]``
        the bytes carried in interval ``k`` divided by ``bw_Bps * dt`` (on a
        fat pipe this may exceed 1).

    Examples
    --------
    >>> links = LinkSet([1e9, 5e8], [0, 0], [True, True])
    >>> res = simulate_flows(links, *routes_to_csr([[0], [0, 1]]), [0, 0], [1e9, 1e9], timeline_dt_s=1.0)
    >>> res.makespan_s, res.link_bytes.tolist(), res.n_events
    (2.0, [2000000000.0, 1000000000.0], 2)
    >>> res.timeline["util"][1].tolist()  # link 1 is full for both seconds
    [1.0, 1.0]
    """

    finish_s: np.ndarray
    makespan_s: float
    link_bytes: np.ndarray
    n_events: int
    timeline: dict | None = None


# --------------------------------------------------------------------------- solvers


def _fill_numpy(ent_links, ent_count, flow_cap, link_cap, rel_tol=REL_TOL):
    """Max-min rates by vectorized progressive filling.

    ``ent_links`` lists the links of each flow, flow after flow (every flow
    has >= 1 entry), ``ent_count`` the entries per flow, ``flow_cap`` a
    per-flow rate cap (fat pipes; inf if none) and ``link_cap`` the capacity
    per link (inf for links that are not shared).
    """
    n = len(ent_count)
    rate = np.empty(n)
    if n == 0:
        return rate
    n_links = len(link_cap)
    rem = np.array(link_cap, dtype=np.float64)
    cnt = np.bincount(ent_links, minlength=n_links).astype(np.float64)
    pos = np.arange(n)
    links, count, cap = ent_links, ent_count, flow_cap
    slack = 1.0 + rel_tol
    share = np.empty(n_links)
    while True:
        starts = np.zeros(len(count), dtype=np.int64)
        np.cumsum(count[:-1], out=starts[1:])
        share.fill(np.inf)
        np.divide(rem, cnt, out=share, where=cnt > 0)
        ent_share = share[links]
        level = np.minimum.reduceat(ent_share, starts)      # each flow's tightest share
        np.minimum(level, cap, out=level)
        ent_level = np.repeat(level, count)
        # a link is a bottleneck when none of its flows is held lower by another link:
        # then nothing can lower its share before its flows freeze, so freeze them now
        held = np.zeros(n_links, dtype=bool)
        held[links[ent_level * slack < ent_share]] = True
        freeze = np.logical_or.reduceat(~held[links], starts) | (cap <= level * slack)
        rate[pos[freeze]] = level[freeze]
        if freeze.all():
            return rate
        ent_freeze = np.repeat(freeze, count)
        done_links = links[ent_freeze]
        rem -= np.bincount(done_links, weights=ent_level[ent_freeze], minlength=n_links)
        cnt -= np.bincount(done_links, minlength=n_links)
        keep = ~freeze
        links, count, cap, pos = links[~ent_freeze], count[keep], cap[keep], pos[keep]


def numba_available() -> bool:
    """Whether the compiled solver can run (Numba importable); checked without importing it.

    Examples
    --------
    >>> numba_available() in (True, False)
    True
    """
    import importlib.util

    return importlib.util.find_spec("numba") is not None


def _act_add_np(act, apos, n, slots):
    """Append ``slots`` to the used-slot list ``act[:n]`` (NumPy solver; the compiled one has its own)."""
    k = len(slots)
    act[n:n + k] = slots
    apos[slots] = np.arange(n, n + k)
    return n + k


def _act_remove_np(act, apos, n, slots):
    """Remove ``slots`` from the used-slot list ``act[:n]``; returns the new n."""
    keep = act[:n][~np.isin(act[:n], slots)]
    act[:len(keep)] = keep
    apos[keep] = np.arange(len(keep))
    return len(keep)


# Up to this many flows (or messages of a trace, :func:`topoplan.sim.replay.replay`) a job runs on the NumPy
# engine when the compiled one would first have to be compiled: the NumPy engine takes about a second for it
# (the demo's 10,880 calls in 0.3 s on a quiet 2-core machine), the compilation minutes (once).
SMALL_JOB = 20_000
_READY: list = []   # the loop found compiled (built, cached or compiled here): it stays so for the process


def compiled_ready() -> bool:
    """Whether the compiled event loop runs without compiling first: its ahead-of-time build is current, or Numba
    has the JIT version in its cache beside the sources.

    A process that finds neither would compile the loop on its first run (minutes on 2 cores, once per
    installation): :func:`topoplan.sim.replay.replay` and :func:`simulate_flows` then run jobs of up to
    :data:`SMALL_JOB` messages on the NumPy engine instead, which gives the same results (to 1e-9) in less time
    than the compilation. Numba's cache is asked through :func:`topoplan.core.deadline.kernel_ready`. Once
    ready, the answer is kept for the process (every replay and flow engine asks; the build's check hashes
    its sources).

    Examples
    --------
    >>> compiled_ready() in (True, False)
    True
    """
    if _READY:
        return True
    if aot_status() != "current":
        if not numba_available():
            return False
        from topoplan.sim._loop import run_core   # Numba code: imported only without a current build (LAZY)

        if not kernel_ready(run_core):
            return False
    _READY.append(True)
    return True


def _resolve_solver(solver: str, n_items: int | None = None) -> str:
    """``"numba"`` or ``"numpy"`` for ``solver``; ``"auto"`` is Numba when it is installed and either its kernels
    are compiled already (:func:`compiled_ready`) or the job (``n_items`` flows or calls,
    unknown: small) is larger than :data:`SMALL_JOB`."""
    if solver not in ("auto", "numpy", "numba"):
        raise TopoplanError(f"solver must be 'auto', 'numpy' or 'numba', got {solver!r}")
    if solver == "numpy":
        return "numpy"
    if numba_available() and (solver == "numba" or compiled_ready() or (n_items or 0) > SMALL_JOB):
        return "numba"
    if solver == "numba":
        raise TopoplanError("solver 'numba' requested but Numba is not installed")
    return "numpy"


def maxmin_rates(links: LinkSet, routes, *, solver: str = "auto") -> np.ndarray:
    """Max-min fair rates of flows that all transfer at once.

    Parameters
    ----------
    links : LinkSet
    routes : routes as accepted by :func:`topoplan.sim.routes.routes_to_csr`
    solver : {"auto", "numpy", "numba"}

    Returns
    -------
    rates : array of float
        Bytes per second per flow (inf for a flow without a finite link).

    Examples
    --------
    >>> links = LinkSet([1e9, 5e8], [0, 0], [True, True])
    >>> maxmin_rates(links, [[0], [0, 1], [1]]).tolist()
    [750000000.0, 250000000.0, 250000000.0]
    """
    ptr, rl = routes_to_csr(routes, len(links))
    n = len(ptr) - 1
    fidx = np.repeat(np.arange(n), np.diff(ptr))
    fcap = np.full(n, np.inf)
    np.minimum.at(fcap, fidx, np.where(links.shared, np.inf, links.bw_Bps)[rl])
    slowest = np.full(n, np.inf)
    np.minimum.at(slowest, fidx, links.bw_Bps[rl])
    rate = np.full(n, np.inf)
    act = np.flatnonzero(slowest < np.inf)
    if act.size == 0:
        return rate
    lcap = np.where(links.shared, links.bw_Bps, np.inf)
    rows, count = pad_routes(ptr, rl, act, int(np.diff(ptr).max()))
    if _resolve_solver(solver) == "numba":
        from topoplan.sim._flows import Incidence

        inc = Incidence(len(links))
        inc.insert(np.arange(len(act)), rows, count, np.zeros_like(rows))
        out = np.empty(len(act))
        inc.fill(rows, count, np.arange(len(act)), len(act), fcap[act], lcap, out, np.zeros(len(act)), 0.0, 0.0, np.empty(len(act)))
        rate[act] = out
    else:
        rate[act] = _fill_numpy(rows[rows >= 0], count, fcap[act], lcap)
    return rate


# --------------------------------------------------------------------------- engine


class _Grow:
    """A 1-D array with amortized O(1) append (the engine's per-flow columns)."""

    def __init__(self, dtype, init=()):
        self.a = np.empty(max(16, len(init)), dtype=dtype)
        self.n = len(init)
        self.a[: self.n] = init

    def extend(self, values) -> None:
        k = len(values)
        if self.n + k > len(self.a):
            bigger = np.empty(max(2 * len(self.a), self.n + k), dtype=self.a.dtype)
            bigger[: self.n] = self.a[: self.n]
            self.a = bigger
        self.a[self.n: self.n + k] = values
        self.n += k

    @property
    def v(self) -> np.ndarray:
        return self.a[: self.n]


MAX_TIMELINE_CELLS = 200_000_000  # links x intervals held in memory (1.6 GB of float64)


def timeline_too_long(t_s: float, n_intervals: int, dt_s: float, n_links: int) -> TopoplanError:
    """The error of a run whose utilization timeline would exceed :data:`MAX_TIMELINE_CELLS`.

    Parameters
    ----------
    t_s : float
        Simulated time the run reaches (or would).
    n_intervals : int
        Intervals of ``dt_s`` that would need.
    dt_s : float
    n_links : int

    Returns
    -------
    TopoplanError
        To raise; it tells to use a coarser ``--timeline``.

    Examples
    --------
    >>> err = timeline_too_long(2.0, 2_000_000_001, 1e-9, 100)
    >>> str(err)[:60]
    'timeline: the run reaches 2 s, 2,000,000,001 intervals of 1e'
    >>> str(err).endswith("over the limit of 200,000,000 samples; use a coarser --timeline")
    True
    """
    return TopoplanError(f"timeline: the run reaches {t_s:.3g} s, {n_intervals:,} intervals of {dt_s:.3g} s for "
                         f"{n_links:,} links, over the limit of {MAX_TIMELINE_CELLS:,} samples; use a coarser "
                         "--timeline")


def timeline_max_intervals(n_links: int) -> int:
    """The most interval boundaries the compiled loop may sample for ``n_links`` links
    (:data:`MAX_TIMELINE_CELLS` in all).

    Examples
    --------
    >>> timeline_max_intervals(1_000)
    200000
    """
    return max(MAX_TIMELINE_CELLS // max(int(n_links), 1), 2)


def timeline_from_samples(samples: np.ndarray, n_bounds: int, dt_s: float, end_s: float,
                          bw_Bps: np.ndarray) -> dict:
    """:meth:`FlowEngine.timeline`'s series from the bytes each link had carried at ``0, dt_s, 2 dt_s, ...``.

    Parameters
    ----------
    samples : array of float, links x (B + 1)
        Columns ``0..B-1``: bytes carried by each multiple of ``dt_s`` up to ``end_s``; column ``B``: by
        ``end_s``, which closes the last (partial) interval.
    n_bounds : int
        ``B``, or -1 when the run would have passed more than :func:`timeline_max_intervals` boundaries.
    dt_s, end_s : float
    bw_Bps : array of float
        Each link's bandwidth.

    Returns
    -------
    dict
        ``{"t_s", "dt_s", "util"}``, ``util[link, k]`` the link's bytes in interval ``k`` over what it could
        carry in ``dt_s``.

    Raises
    ------
    TopoplanError
        With ``n_bounds`` -1 (:func:`timeline_too_long`).

    Examples
    --------
    >>> tl = timeline_from_samples(np.array([[0.0, 1e9, 1.5e9]]), 2, 1.0, 1.5, np.array([1e9]))
    >>> tl["util"].tolist()   # the second interval is half over, at full speed
    [[1.0, 0.5]]
    """
    if n_bounds < 0:
        k = timeline_max_intervals(len(bw_Bps))
        raise timeline_too_long((k + 1) * dt_s, k + 1, dt_s, len(bw_Bps))   # it passed more than k bounds
    k = max(int(np.ceil(end_s / dt_s - 1e-9)), 1)
    last = samples.shape[1] - 1
    j = np.arange(k)
    carried = samples[:, np.minimum(j + 1, last)] - samples[:, np.minimum(j, last)]
    return {"t_s": j * dt_s, "dt_s": dt_s, "util": carried / (dt_s * np.asarray(bw_Bps, dtype=float)[:, None])}


@register("maxmin")
class FlowEngine(Engine):
    """Event-driven max-min flow simulator; flows may be added while it runs.

    Parameters
    ----------
    links : LinkSet
    timeline_dt_s : float, optional
        Record per-link utilization averaged over intervals of this length.
    solver : {"auto", "numpy", "numba"}
        Allocation solver (see the module docstring); results agree to ~1e-12.
    rel_tol : float
        Starts and completions within ``rel_tol * |t|`` of an event time ``t``
        belong to that event.

    Examples
    --------
    >>> eng = FlowEngine(LinkSet([1e9], [1e-6], [True]))
    >>> eng.add_flows([0, 1, 2], [0, 0], [0.0, 0.0], [1e9, 1e9]).tolist()
    [0, 1]
    >>> eng.run_until_next_event()      # both transfers start after the latency
    (1e-06, array([], dtype=int64))
    >>> t, done = eng.run_until_next_event()
    >>> round(t, 9), done.tolist()
    (2.000001, [0, 1])

    A replay loop injects flows as ranks reach their sends::

        while True:
            t_flow = eng.next_event_time()
            ...                             # run ranks due before t_flow, after eng.advance_to(t)
            eng.add_flows(ptr, links, starts, sizes)
            t, finished = eng.run_until_next_event()
    """

    def __init__(self, links: LinkSet, timeline_dt_s: float | None = None, *, solver: str = "auto",
                 rel_tol: float = REL_TOL):
        self.links = links
        self.rel_tol = float(rel_tol)
        self.solver = _resolve_solver(solver)
        if self.solver == "numba":   # the compiled solver's link lists and used-slot list
            from topoplan.sim._flows import Incidence, act_add, act_remove

            self._inc = Incidence(len(links))
            self._act_add, self._act_remove = act_add, act_remove
        else:
            self._inc = None
            self._act_add, self._act_remove = _act_add_np, _act_remove_np
        self._lcap = np.where(links.shared, links.bw_Bps, np.inf)
        self._fat_bw = np.where(links.shared, np.inf, links.bw_Bps)
        # per flow, by id
        self._ptr = _Grow(np.int64, [0])
        self._rl = _Grow(np.int64)
        self._size = _Grow(np.float64)
        self._cap = _Grow(np.float64)       # fat-pipe cap (inf: none)
        self._instant = _Grow(bool)         # zero bytes or no finite link: done once its latency is over
        self._finish = _Grow(np.float64)
        # flows waiting for their transfer to start, sorted by that time
        self._pend_t, self._pend_id = _EMPTY_F, _EMPTY_I
        # transferring flows live in slots, so a start or an end touches only its own slot:
        # flow id (-1 free), route (padded rows), route length (0 free), remaining bytes, rate,
        # projected finish (inf free), cap
        self._sid = np.zeros(0, dtype=np.int64)
        self._rows = np.zeros((0, 4), dtype=np.int64)
        self._back = np.zeros((0, 4), dtype=np.int64)  # pool positions, for the compiled solver
        self._len = np.zeros(0, dtype=np.int64)
        self._rem = np.zeros(0)             # remaining bytes as of time _t_rem (brought forward lazily)
        self._t_rem = 0.0
        self._rate = np.zeros(0)
        self._fin = np.zeros(0)
        self._scap = np.zeros(0)
        self._free: list[int] = []
        self._act = np.zeros(0, dtype=np.int64)   # used slots, act[:n_act] (solves visit only these)
        self._apos = np.zeros(0, dtype=np.int64)  # position of a used slot in act
        self._n_act = 0
        self._dirty = False
        self._t_done = np.inf
        self.now_s = 0.0
        self.n_events = 0
        self.n_done = 0
        self._load = None
        self._dt, self._tl = None, None
        if timeline_dt_s is not None:
            if not timeline_dt_s > 0:
                raise TopoplanError(f"timeline_dt_s must be > 0, got {timeline_dt_s}")
            self._dt = float(timeline_dt_s)
            self._tl = np.zeros((len(links), 64))
            self._load = np.zeros(len(links))

    # -- public state ------------------------------------------------------------
    @property
    def n_flows(self) -> int:
        """Flows added so far."""
        return self._size.n

    @property
    def now(self) -> float:
        """Current time (alias of ``now_s``)."""
        return self.now_s

    @property
    def n_active(self) -> int:
        """Flows transferring now."""
        return self._n_act

    @property
    def finish_s(self) -> np.ndarray:
        """Finish time per flow id (NaN while unfinished)."""
        return self._finish.v.copy()

    def link_bytes(self) -> np.ndarray:
        """Bytes carried so far per link (all of a finished flow, the sent part of an active one)."""
        self._sync()
        sent = np.where(np.isnan(self._finish.v), 0.0, self._size.v)
        used = self._len > 0
        ids = self._sid[used]
        sent[ids] = self._size.a[ids] - np.maximum(self._rem[used], 0.0)
        return np.bincount(self._rl.v, weights=np.repeat(sent, np.diff(self._ptr.v)), minlength=len(self.links))

    def timeline(self) -> dict | None:
        """Utilization series ``{"t_s", "dt_s", "util"}`` (util: links x intervals), or None."""
        if self._tl is None:
            return None
        k = max(int(np.ceil(self.now_s / self._dt - 1e-9)), 1)
        util = self._tl[:, :k] / (self._dt * self.links.bw_Bps[:, None])
        return {"t_s": np.arange(k) * self._dt, "dt_s": self._dt, "util": util}

    # -- the engine interface (topoplan.sim.engines) --------------------------------
    @classmethod
    def for_network(cls, net, *, timeline_dt_s: float | None = None) -> "FlowEngine":
        """The engine of a :class:`~topoplan.sim.network.Network`'s links (utilization sampled every
        ``timeline_dt_s`` when given).

        Examples
        --------
        >>> from topoplan.core.topology_io import load_topology
        >>> from topoplan.sim.network import build_network
        >>> eng = FlowEngine.for_network(build_network(load_topology("paper003", ["kind=tree", "ocs=null"])))
        >>> len(eng.links)
        200
        """
        return cls(net.linkset(), timeline_dt_s=timeline_dt_s or None)

    def add_messages(self, net, route_ptr, route_links, start_s, bytes_) -> np.ndarray:
        """Add the flows of message segments routed on ``net``: each starts after the size-dependent part of its
        route's latency (switch delays, store-and-forward of the first packet,
        :meth:`~topoplan.sim.network.Network.route_latency`); the engine adds the links' own latencies.

        Examples
        --------
        >>> from topoplan.core.topology_io import load_topology
        >>> from topoplan.sim.network import build_network
        >>> net = build_network(load_topology("paper003", ["kind=tree", "ocs=null"]))
        >>> eng = FlowEngine.for_network(net)
        >>> ptr, links = net.eps_routes([0], [16])
        >>> eng.add_messages(net, ptr, links, np.zeros(1), np.array([1e6])).tolist()
        [0]
        >>> eng.run(); bool(eng.finish_s[0] > 1e6 / net.bw_Bps[links].min())
        True
        """
        ptr = np.asarray(route_ptr)
        owner = np.repeat(np.arange(len(ptr) - 1), np.diff(ptr))
        extra = net.route_latency(ptr, route_links, bytes_) - np.bincount(
            owner, weights=net.latency_s[route_links], minlength=len(ptr) - 1)
        return self.add_flows(ptr, route_links, start_s + extra, bytes_)

    # -- input -------------------------------------------------------------------
    def add_flows(self, route_ptr, route_links, start_s, bytes_) -> np.ndarray:
        """Add flows; returns their ids (consecutive integers from ``n_flows``).

        Parameters
        ----------
        route_ptr, route_links : int arrays
            Routes in CSR form: flow ``i`` crosses ``route_links[route_ptr[i]:route_ptr[i + 1]]``.
        start_s : array of float
            Start times. The transfer begins at ``start + route latency``, and
            never before the engine's current time.
        bytes_ : array of float
            Sizes (>= 0). Zero bytes, or a route without a finite-bandwidth
            link, finish as soon as the transfer would start.

        Returns
        -------
        ids : int64 array
        """
        ptr, rl, start, size = check_flows(self.links, route_ptr, route_links, start_s, bytes_)
        k = len(ptr) - 1
        ids = np.arange(self.n_flows, self.n_flows + k, dtype=np.int64)
        if k == 0:
            return ids
        lat, cap, slowest = route_stats(self.links, ptr, rl)
        self._ptr.extend(self._ptr.v[-1] + ptr[1:])
        self._rl.extend(rl)
        self._size.extend(size)
        self._cap.extend(cap)
        self._instant.extend((size == 0) | np.isinf(slowest))
        self._finish.extend(np.full(k, np.nan))
        self._push_pending(np.maximum(start + lat, self.now_s), ids)
        return ids

    def _push_pending(self, tx, ids) -> None:
        order = np.argsort(tx, kind="stable")
        tx, ids = tx[order], ids[order]
        if len(self._pend_t) == 0:
            self._pend_t, self._pend_id = tx, ids
        elif tx[0] >= self._pend_t[-1]:
            self._pend_t = np.concatenate([self._pend_t, tx])
            self._pend_id = np.concatenate([self._pend_id, ids])
        else:
            t = np.concatenate([self._pend_t, tx])
            order = np.argsort(t, kind="stable")
            self._pend_t, self._pend_id = t[order], np.concatenate([self._pend_id, ids])[order]

    # -- stepping ----------------------------------------------------------------
    def next_event_time(self) -> float:
        """Time of the next start of transfer or completion (inf when nothing is left)."""
        if self._dirty:
            self._solve()
        if len(self._pend_t) and self._pend_t[0] < self._t_done:
            return float(self._pend_t[0])
        return self._t_done

    def advance_to(self, t: float) -> None:
        """Move the clock to ``t`` without crossing an event (transfers progress)."""
        if t <= self.now_s:
            return
        t_next = self.next_event_time()
        if t > t_next + self.rel_tol * abs(t_next):
            raise TopoplanError(f"advance_to({t}) would skip the event at {t_next}; "
                                "call run_until_next_event first")
        self._advance(t)

    def run_until_next_event(self) -> tuple[float, np.ndarray]:
        """Process the next event.

        Returns
        -------
        time_s : float
            The event time (inf when no flow is left).
        finished : int64 array
            Ids of the flows that finished at this event (possibly empty
            when the event only starts transfers).
        """
        t = self.next_event_time()
        if t == np.inf:
            return t, _EMPTY_I
        t = max(t, self.now_s)
        self._advance(t)
        horizon = t + self.rel_tol * abs(t)
        finished = _EMPTY_I
        if self._t_done <= horizon:
            used = self._act[: self._n_act]
            finished = self._end(np.sort(used[self._fin[used] <= horizon]))
        k = int(np.searchsorted(self._pend_t, horizon, side="right"))
        if k:
            ids = self._pend_id[:k]
            self._pend_t, self._pend_id = self._pend_t[k:], self._pend_id[k:]
            instant = self._instant.a[ids]
            if instant.any():
                finished = np.concatenate([finished, ids[instant]])
                ids = ids[~instant]
            if len(ids):
                self._begin(ids)
        if len(finished):
            finished = np.sort(finished)
            self._finish.a[finished] = t
            self.n_done += len(finished)
        self.n_events += 1
        return t, finished

    def run(self, progress: Callable[[int, int], None] | None = None) -> None:
        """Run until every added flow has finished; ``progress(done, total)`` is called now and then."""
        last = time.perf_counter()
        while True:
            t, _ = self.run_until_next_event()
            if t == np.inf:
                break
            if progress is not None and time.perf_counter() - last > 0.1:
                progress(self.n_done, self.n_flows)
                last = time.perf_counter()
        if progress is not None:
            progress(self.n_done, self.n_flows)

    # -- internals ---------------------------------------------------------------
    def _begin(self, ids) -> None:
        """Put flows ``ids`` into free slots: their transfers start now."""
        k = len(ids)
        ptr = self._ptr.a
        if k == 1:  # the common case in random traffic; skip the vector machinery
            i = int(ids[0])
            lo, hi = int(ptr[i]), int(ptr[i + 1])
            if hi - lo > self._rows.shape[1]:
                self._widen(hi - lo)
            if not self._free:
                self._more_slots(1)
            s = self._free.pop()
            self._rows[s, : hi - lo] = self._rl.a[lo:hi]
            self._len[s] = hi - lo
            slots, ids = np.array([s]), i
        else:
            count = ptr[ids + 1] - ptr[ids]
            width = int(count.max())
            if width > self._rows.shape[1]:
                self._widen(width)
            if len(self._free) < k:
                self._more_slots(k - len(self._free))
            slots = np.array(self._free[-k:], dtype=np.int64)
            del self._free[-k:]
            rows, count = pad_routes(ptr, self._rl.a, ids, self._rows.shape[1])
            self._rows[slots] = rows
            self._len[slots] = count
        self._sid[slots] = ids
        self._rem[slots] = self._size.a[ids]
        self._scap[slots] = self._cap.a[ids]
        if self._inc is not None:
            self._inc.insert(slots, self._rows, self._len, self._back)
        self._n_act = self._act_add(self._act, self._apos, self._n_act, slots)
        self._dirty = True

    def _end(self, slots) -> np.ndarray:
        """Free the slots of finished flows; returns their ids."""
        ids = self._sid[slots]
        if self._inc is not None:
            self._inc.remove(slots, self._rows, self._len, self._back)
        self._sid[slots] = -1
        self._len[slots] = 0
        self._rate[slots] = 0.0
        self._rem[slots] = 0.0
        self._fin[slots] = np.inf
        self._free.extend(slots.tolist())
        self._n_act = self._act_remove(self._act, self._apos, self._n_act, slots)
        self._dirty = True
        return ids

    def _more_slots(self, extra: int) -> None:
        old = len(self._len)
        new = max(2 * old, old + extra, 64)
        grow = new - old

        def ext(a, fill):
            return np.concatenate([a, np.full((grow,) + a.shape[1:], fill, dtype=a.dtype)])

        self._sid, self._rows, self._len = ext(self._sid, -1), ext(self._rows, -1), ext(self._len, 0)
        self._back = ext(self._back, 0)
        self._act, self._apos = ext(self._act, -1), ext(self._apos, -1)
        self._rem, self._rate, self._fin, self._scap = (ext(self._rem, 0.0), ext(self._rate, 0.0),
                                                        ext(self._fin, np.inf), ext(self._scap, np.inf))
        self._free[:0] = range(new - 1, old - 1, -1)  # pop() hands out low slots first

    def _widen(self, width: int) -> None:
        rows = np.full((len(self._rows), width), -1, dtype=np.int64)
        rows[:, : self._rows.shape[1]] = self._rows
        back = np.zeros_like(rows)
        back[:, : self._back.shape[1]] = self._back
        self._rows, self._back = rows, back

    def _solve(self) -> None:
        self._dirty = False
        if self._n_act == 0:
            self._t_done = np.inf
            if self._load is not None:
                self._load[:] = 0.0
            return
        self._solve_rates()
        if self._load is not None:   # each link's rate in use, for the timeline
            mask = np.arange(self._rows.shape[1]) < self._len[:, None]
            self._load = np.bincount(self._rows[mask], weights=np.broadcast_to(self._rate[:, None], mask.shape)[mask],
                                     minlength=len(self.links))

    def _solve_rates(self) -> None:
        """The rates of the transfers under way (some are), their projected finishes and the next (``_t_done``)."""
        if self._inc is not None:
            self._t_done = self._inc.fill(self._rows, self._len, self._act, self._n_act, self._scap, self._lcap, self._rate,
                                          self._rem, self.now_s - self._t_rem, self.now_s, self._fin)
            self._t_rem = self.now_s
        else:
            self._sync()
            used = self._len > 0
            count = self._len[used]
            rows = self._rows[used]
            ent = rows[np.arange(rows.shape[1]) < count[:, None]]
            rate = _fill_numpy(ent, count, self._scap[used], self._lcap, self.rel_tol)
            self._rate[used] = rate
            fin = self._rem[used] / rate
            fin += self.now_s
            self._fin[used] = fin
            self._t_done = float(fin.min())

    def _advance(self, t: float) -> None:
        """Move the clock; remaining bytes follow lazily (rates are constant until the next solve)."""
        if t <= self.now_s:
            return
        if self._n_act and self._tl is not None:
            self._accumulate(self.now_s, t)
        self.now_s = t

    def _sync(self) -> None:
        """Bring the remaining bytes forward to now (freed and fresh slots have rate 0)."""
        if self.now_s > self._t_rem:
            self._rem -= self._rate * (self.now_s - self._t_rem)
            self._t_rem = self.now_s

    def _accumulate(self, t0: float, t1: float) -> None:
        """Add the current per-link load over [t0, t1) to the utilization bins."""
        dt = self._dt
        k0, k1 = int(t0 // dt), int(t1 // dt)
        if k1 >= self._tl.shape[1]:
            if float(k1 + 1) * self._tl.shape[0] > MAX_TIMELINE_CELLS:
                raise timeline_too_long(t1, k1 + 1, dt, self._tl.shape[0])
            grown = np.zeros((self._tl.shape[0], max(2 * self._tl.shape[1], k1 + 1)))
            grown[:, : self._tl.shape[1]] = self._tl
            self._tl = grown
        load = self._load
        if k0 == k1:
            self._tl[:, k0] += load * (t1 - t0)
            return
        self._tl[:, k0] += load * ((k0 + 1) * dt - t0)
        if k1 > k0 + 1:
            self._tl[:, k0 + 1: k1] += load[:, None] * dt
        self._tl[:, k1] += load * (t1 - k1 * dt)


def simulate_flows(links: LinkSet, route_ptr, route_links, start_s: Sequence[float], bytes_: Sequence[float], *,
                   timeline_dt_s: float | None = None, progress: Callable[[int, int], None] | None = None,
                   solver: str = "auto") -> FlowResult:
    """Simulate a known set of flows to completion.

    Parameters
    ----------
    links : LinkSet
    route_ptr, route_links : int arrays
        Routes in CSR form: flow ``i`` crosses ``route_links[route_ptr[i]:route_ptr[i + 1]]``
        (:func:`topoplan.sim.routes.routes_to_csr` builds them from lists).
    start_s : array of float
        Start time of each flow; its transfer begins after the route latency.
    bytes_ : array of float
        Size of each flow in bytes.
    timeline_dt_s : float, optional
        Also return per-link utilization averaged over intervals of this length.
    progress : callable, optional
        ``progress(done_flows, total_flows)``, called at most every 0.1 s and at the end.
    solver : {"auto", "numpy", "numba"}

    Returns
    -------
    FlowResult

    Examples
    --------
    >>> links = LinkSet([1e9, 5e8], [0, 0], [True, True])
    >>> ptr, rl = routes_to_csr([[0], [0, 1], [1]])
    >>> simulate_flows(links, ptr, rl, [0, 0, 0], [1e9] * 3).finish_s.tolist()
    [1.3333333333333333, 4.0, 4.0]
    """
    if _resolve_solver(solver, len(bytes_)) == "numba":
        # the whole event loop compiled (topoplan.sim._loop): no Python work per event

        if timeline_dt_s is not None and not timeline_dt_s > 0:
            raise TopoplanError(f"timeline_dt_s must be > 0, got {timeline_dt_s}")
        ptr, rl, start, size = check_flows(links, route_ptr, route_links, start_s, bytes_)
        dt = float(timeline_dt_s or 0.0)
        finish, n_events, (samples, n_bounds, end_s) = run_flows(links, ptr, rl, start, size, REL_TOL, dt,
                                                                timeline_max_intervals(len(links)))
        timeline = timeline_from_samples(samples, n_bounds, dt, end_s, links.bw_Bps) if dt else None
        if progress is not None:
            progress(len(size), len(size))
        link_bytes = np.bincount(rl, weights=np.repeat(size, np.diff(ptr)), minlength=len(links))
        return FlowResult(finish_s=finish, makespan_s=float(finish.max(initial=0.0)), link_bytes=link_bytes,
                          n_events=n_events, timeline=timeline)
    eng = FlowEngine(links, timeline_dt_s, solver=solver)
    eng.add_flows(route_ptr, route_links, start_s, bytes_)
    eng.run(progress)
    finish = eng.finish_s
    return FlowResult(finish_s=finish, makespan_s=float(finish.max(initial=0.0)), link_bytes=eng.link_bytes(),
                      n_events=eng.n_events, timeline=eng.timeline())
