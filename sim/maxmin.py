"""Vectorized flow-level engine: max-min fair sharing of directed links, event by event.

A flow waits its route's latency without using bandwidth, then shares link
bandwidth max-min fairly (progressive filling) with the flows transferring
at the same time; the allocation is re-solved whenever a flow starts or
ends. Alone on a path a flow ends at ``start + latency + bytes / bottleneck``.
Directions of a link are separate link ids (split duplex). A link with
``shared=False`` (a "fat pipe") caps each flow at its bandwidth but is not
shared. This is SimGrid's CM02 model without its correction factors and
RTT weighting; ``tests/test_sim_engine.py`` checks it against SimGrid.

Every re-solve is array work over the active flows' link incidence: one
pass per bottleneck level, not per flow. Flows that finish or start within
a relative 1e-12 of each other form one event.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_REL = 1e-12  # relative tolerance that merges simultaneous events

try:  # the compiled filling is ~100x faster; the NumPy one below is the reference
    from sim._fill import active_rates as _compiled_rates
except ImportError:  # pragma: no cover - numba missing
    _compiled_rates = None


@dataclass
class LinkSet:
    """Directed links: bandwidth (bytes/s), latency (s), and whether flows share it."""

    bw_Bps: np.ndarray
    latency_s: np.ndarray
    shared: np.ndarray
    names: list | None = None

    def __post_init__(self):
        self.bw_Bps = np.asarray(self.bw_Bps, dtype=np.float64)
        self.latency_s = np.asarray(self.latency_s, dtype=np.float64)
        self.shared = np.asarray(self.shared, dtype=bool)

    def __len__(self) -> int:
        return len(self.bw_Bps)


@dataclass
class FlowResult:
    """Finish time of every flow (input order), makespan, bytes per link, number of events."""

    finish_s: np.ndarray
    makespan_s: float
    link_bytes: np.ndarray
    n_events: int
    timeline: dict | None = None


class _Grow:
    """A growable 1-D array (amortized doubling)."""

    def __init__(self, dtype, fill=0):
        self.a = np.full(1024, fill, dtype=dtype)
        self.n = 0
        self.fill = fill

    def extend(self, values) -> None:
        values = np.asarray(values)
        need = self.n + len(values)
        if need > len(self.a):
            new = np.full(max(need, 2 * len(self.a)), self.fill, dtype=self.a.dtype)
            new[: self.n] = self.a[: self.n]
            self.a = new
        self.a[self.n: need] = values
        self.n = need

    @property
    def view(self) -> np.ndarray:
        return self.a[: self.n]


class FlowEngine:
    """Event-driven engine into which flows can be injected while it runs (used by the MPI replay).

    Example
    -------
    >>> links = LinkSet([1e9], [1e-6], [True])
    >>> eng = FlowEngine(links)
    >>> ids = eng.add_flows(np.array([0, 1]), np.array([0]), np.array([0.0]), np.array([1e9]))
    >>> eng.run_until_next_event()[0]
    1.000001
    """

    def __init__(self, links: LinkSet, timeline_dt_s: float | None = None, *, compiled: bool = True):
        self.links = links
        self.compiled = compiled
        self.now = 0.0
        self.rptr = _Grow(np.int64)
        self.rptr.extend([0])
        self.rlinks = _Grow(np.int64)
        self.size = _Grow(np.float64)
        self.rem = _Grow(np.float64)
        self.t_xfer = _Grow(np.float64)       # when the flow starts transferring (start + latency)
        self.finish = _Grow(np.float64, np.nan)
        self.trivial = _Grow(bool, False)     # moves no bytes: done when its latency is over
        self.active = np.zeros(0, dtype=np.int64)
        self.rate = np.zeros(0)
        self.pending = np.zeros(0, dtype=np.int64)
        self.pending_t = np.zeros(0)
        self.dirty = False
        self.n_events = 0
        self._link_bytes = np.zeros(len(links))
        self._usage = np.zeros(len(links))     # current bytes/s on every link
        self.dt = timeline_dt_s
        self._tl = np.zeros((len(links), 0)) if timeline_dt_s else None

    # -- input -------------------------------------------------------------
    def add_flows(self, route_ptr, route_links, start_s, bytes_) -> np.ndarray:
        """Add flows (routes as CSR); returns their ids. Starts before ``now`` are moved to ``now``."""
        route_ptr = np.asarray(route_ptr, dtype=np.int64)
        route_links = np.asarray(route_links, dtype=np.int64)
        start = np.maximum(np.asarray(start_s, dtype=np.float64), self.now)
        size = np.asarray(bytes_, dtype=np.float64)
        k = len(size)
        first = self.size.n
        ids = np.arange(first, first + k)
        lengths = np.diff(route_ptr)
        owner = np.repeat(np.arange(k), lengths)
        lat = np.bincount(owner, weights=self.links.latency_s[route_links], minlength=k)
        self.rptr.extend(self.rlinks.n + route_ptr[1:])
        self.rlinks.extend(route_links)
        self.size.extend(size)
        self.rem.extend(size)
        self.t_xfer.extend(start + lat)
        self.finish.extend(np.full(k, np.nan))
        self.trivial.extend((size <= 0) | (lengths == 0))
        self.pending = np.concatenate([self.pending, ids])
        self.pending_t = np.concatenate([self.pending_t, start + lat])
        return ids

    # -- rates -------------------------------------------------------------
    def _gather(self, flows):
        ptr = self.rptr.view
        starts, ends = ptr[flows], ptr[flows + 1]
        lengths = ends - starts
        owner = np.repeat(np.arange(len(flows)), lengths)
        offs = np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        return owner, self.rlinks.view[np.repeat(starts, lengths) + offs]

    def _solve(self) -> None:
        """Max-min fair rates of the active flows by progressive filling."""
        self.dirty = False
        A = self.active
        m = len(A)
        if m == 0:
            self.rate = np.zeros(0)
            self._usage[:] = 0.0
            return
        if _compiled_rates is not None and self.compiled:
            self.rate, self._usage = _compiled_rates(A, self.rptr.view, self.rlinks.view, self.links.bw_Bps,
                                                     self.links.shared, _REL)
            return
        owner, link = self._gather(A)
        self.rate = self._numpy_rates(m, owner, link)
        r = self.rate[owner]
        self._usage = np.bincount(link, weights=np.where(np.isfinite(r), r, 0.0), minlength=len(self.links))

    def _numpy_rates(self, m, owner, link):
        bw = self.links.bw_Bps
        sh = self.links.shared[link]
        cap = np.full(m, np.inf)
        np.minimum.at(cap, owner[~sh], bw[link[~sh]])
        so, sl = owner[sh], link[sh]
        ul, sl_loc = np.unique(sl, return_inverse=True)
        free = bw[ul].copy()                    # capacity not yet taken by frozen flows
        rate = np.full(m, np.inf)
        unfrozen = np.ones(m, dtype=bool)
        inc_unfrozen = np.ones(len(so), dtype=bool)
        while unfrozen.any():
            n = np.bincount(sl_loc[inc_unfrozen], minlength=len(ul))
            busy = n > 0
            level_l = np.full(len(ul), np.inf)
            level_l[busy] = free[busy] / n[busy]
            level = min(level_l.min(initial=np.inf), cap[unfrozen].min(initial=np.inf))
            if not np.isfinite(level):
                break  # remaining flows cross no shared link and no cap
            sat = busy & (level_l <= level * (1 + _REL))
            hit = np.zeros(m, dtype=bool)
            hit[so[inc_unfrozen & sat[sl_loc]]] = True
            freeze = unfrozen & (hit | (cap <= level * (1 + _REL)))
            rate[freeze] = level
            fz_inc = freeze[so] & inc_unfrozen
            free -= np.bincount(sl_loc[fz_inc], minlength=len(ul)) * level
            np.maximum(free, 0.0, out=free)
            unfrozen &= ~freeze
            inc_unfrozen &= ~fz_inc
        return rate

    # -- time --------------------------------------------------------------
    def next_event_time(self) -> float:
        """Time of the next start of transfer or completion (inf when idle)."""
        if self.dirty:
            self._solve()
        t = self.pending_t.min(initial=np.inf)
        if len(self.active):
            t = min(t, self.now + (self.rem.view[self.active] / self.rate).min())
        return t

    def advance_to(self, t: float) -> None:
        """Progress transfers up to time ``t`` (no event may fall before ``t``)."""
        if t <= self.now:
            return
        if self.dirty:
            self._solve()
        dt = t - self.now
        if len(self.active):
            r = self.rem.view
            r[self.active] = np.maximum(r[self.active] - self.rate * dt, 0.0)
            self._link_bytes += self._usage * dt
            if self._tl is not None:
                self._record(self.now, t)
        self.now = t

    def _record(self, t0: float, t1: float) -> None:
        k0, k1 = int(t0 // self.dt), int(np.ceil(t1 / self.dt))
        if k1 > self._tl.shape[1]:
            self._tl = np.concatenate([self._tl, np.zeros((len(self._usage), k1 - self._tl.shape[1] + 16))], axis=1)
        edges = np.arange(k0, k1 + 1) * self.dt
        overlap = np.clip(np.minimum(edges[1:], t1) - np.maximum(edges[:-1], t0), 0.0, None)
        used = np.flatnonzero(self._usage)
        self._tl[np.ix_(used, np.arange(k0, k1))] += np.outer(self._usage[used], overlap)

    def run_until_next_event(self):
        """Advance to the next event; returns ``(time_s, ids of flows finished at that time)``."""
        t = self.next_event_time()
        if not np.isfinite(t):
            return t, np.zeros(0, dtype=np.int64)
        self.advance_to(t)
        self.n_events += 1
        tol = t * _REL + 1e-18
        done = np.zeros(0, dtype=np.int64)
        if len(self.active):
            left = self.rem.view[self.active] / self.rate
            fin = left <= tol + t * _REL
            if fin.any():
                done = self.active[fin]
                self.active, self.rate = self.active[~fin], self.rate[~fin]
                self.dirty = True
        starting = self.pending_t <= t + tol
        if starting.any():
            new = self.pending[starting]
            self.pending, self.pending_t = self.pending[~starting], self.pending_t[~starting]
            triv = self.trivial.view[new]
            done = np.concatenate([done, new[triv]])
            self.active = np.concatenate([self.active, new[~triv]])
            self.rate = np.concatenate([self.rate, np.zeros((~triv).sum())])
            self.dirty = True
        if len(done):
            self.finish.view[done] = t
            self.rem.view[done] = 0.0
        return t, np.sort(done)

    # -- results -----------------------------------------------------------
    @property
    def finish_s(self) -> np.ndarray:
        return self.finish.view

    def link_bytes(self) -> np.ndarray:
        return self._link_bytes.copy()

    def timeline(self) -> dict | None:
        if self._tl is None:
            return None
        k = max(int(np.ceil(self.now / self.dt)), 1)
        util = self._tl[:, :k] / (self.dt * self.links.bw_Bps[:, None])
        return {"t_s": (np.arange(k) * self.dt).tolist(), "dt_s": self.dt, "util": util}


def simulate_flows(links: LinkSet, route_ptr, route_links, start_s, bytes_, *, timeline_dt_s=None,
                   progress=None) -> FlowResult:
    """Simulate a fixed set of flows to completion.

    Parameters
    ----------
    links : :class:`LinkSet`.
    route_ptr, route_links : routes in CSR form (flow ``i`` crosses ``route_links[route_ptr[i]:route_ptr[i+1]]``).
    start_s, bytes_ : per flow.
    timeline_dt_s : record link utilization per interval of this length.
    progress : optional callable ``(done, total)``.

    Returns
    -------
    FlowResult
    """
    eng = FlowEngine(links, timeline_dt_s)
    eng.add_flows(route_ptr, route_links, start_s, bytes_)
    total, done = len(np.asarray(bytes_)), 0
    while True:
        t, fin = eng.run_until_next_event()
        if not np.isfinite(t):
            break
        done += len(fin)
        if progress is not None and len(fin):
            progress(done, total)
    fs = eng.finish_s.copy()
    return FlowResult(fs, float(np.nanmax(fs)) if len(fs) else 0.0, eng.link_bytes(), eng.n_events, eng.timeline())
