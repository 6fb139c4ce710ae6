"""First come, first served flows: each node sends its messages one after another, and every link serves the
messages that began earlier first.

The emulated cluster (real Open MPI over TCP on shaped links, :mod:`topoplan.emulate`) does not share links as
max-min does where messages meet:

- one rank's three 32 KiB messages, posted at once to three ranks, arrive one message time apart, where max-min
  delivers all three at three message times;
- a ring alltoall of 32 KiB a pair whose ranks enter it apart runs about as fast as with the ranks together,
  where max-min, whose later rounds' messages share the links of the ranks behind, predicts three to four times
  as long;
- the bulk exchanges on EPS only and on the hybrid run 6-60% slower than max-min predicts.

This engine's model: a message's transfer waits until the messages sent before it whose routes start on the
same link (its sending node's link into the network, or a relay's) have finished theirs, and among the transfers under
way the ones that began earlier take what they can on every link first; transfers that began at the same
time share by max-min. Latencies are the max-min engine's. See ``docs/network-models.md`` for what it
predicts against the emulated cluster (closer on EPS-only and hybrid networks and where eager messages meet,
farther on fat trees, whose senders interleave their large messages).

Python and NumPy only: the simulator runs it in its reference replay, for jobs of thousands of messages
rather than millions.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from topoplan.sim.engines import REL_TOL, register
from topoplan.sim.maxmin import FlowEngine, _fill_numpy, _Grow
from topoplan.sim.routes import LinkSet

__all__ = ["FifoEngine", "MAX_MESSAGES"]

MAX_MESSAGES = 100_000
"""The most messages a replay runs under this model (:func:`topoplan.sim.replay.check_fifo_size`): it takes about
0.1-1 ms a message (NPB CG class S on 16 ranks, 47,198 messages, 5.4 s; class W on 64 ranks, 269,822
messages, 92 s)."""


@register("fifo")
class FifoEngine(FlowEngine):
    """Flows served first come, first served: one at a time on the first link of their route, by age elsewhere.

    An :class:`~topoplan.sim.engines.Engine`; the model is in the module docstring.

    Parameters
    ----------
    links : LinkSet
    timeline_dt_s : float, optional
        Record per-link utilization averaged over intervals of this length.
    rel_tol : float
        Starts and completions within ``rel_tol * |t|`` of an event time ``t`` belong to that event.

    Examples
    --------
    One link into the network and two links out of it (a sender and two receivers under one switch): two
    messages of 1 MB posted at once go one after the other, where max-min would finish both at 2 ms.

    >>> links = LinkSet([1e9, 1e9, 1e9], [0.0, 0.0, 0.0], [True, True, True])
    >>> eng = FifoEngine(links)
    >>> eng.add_flows([0, 2, 4], [0, 1, 0, 2], [0.0, 0.0], [1e6, 1e6]).tolist()
    [0, 1]
    >>> eng.run(); [round(float(t) * 1e3, 6) for t in eng.finish_s]
    [1.0, 2.0]

    Two senders into one receiver: the message that began first is served first.

    >>> eng = FifoEngine(LinkSet([1e9, 1e9, 1e9], [0.0, 0.0, 0.0], [True, True, True]))
    >>> eng.add_flows([0, 2, 4], [0, 2, 1, 2], [0.0, 0.5e-3], [1e6, 1e6]).tolist()
    [0, 1]
    >>> eng.run(); [round(float(t) * 1e3, 6) for t in eng.finish_s]
    [1.0, 2.0]
    """

    def __init__(self, links: LinkSet, timeline_dt_s: float | None = None, *, rel_tol: float = REL_TOL):
        super().__init__(links, timeline_dt_s, solver="numpy", rel_tol=rel_tol)
        self._began = _Grow(np.float64)     # per flow id: when its transfer began (NaN: not yet)
        self._ready = _Grow(bool)           # per flow id: its latency is over
        self._first = _Grow(np.int64)       # per flow id: the shared link its route starts on, whose turn it
        #                                     takes (-1: none, or a zero-byte flow, which takes no turn)
        self._queue: dict[int, deque] = {}  # first link -> its flows in the order they were sent, not yet done
        self._sending: dict[int, int] = {}  # first link -> the flow whose transfer is under way on it

    def add_flows(self, route_ptr, route_links, start_s, bytes_) -> np.ndarray:
        ids = super().add_flows(route_ptr, route_links, start_s, bytes_)
        self._began.extend(np.full(len(ids), np.nan))
        self._ready.extend(np.zeros(len(ids), dtype=bool))
        lo, hi = self._ptr.a[ids], self._ptr.a[ids + 1]
        first = np.full(len(ids), -1, dtype=np.int64)
        takes = (hi > lo) & ~self._instant.a[ids]
        first[takes] = self._rl.a[lo[takes]]
        first[takes & ~np.isfinite(self._lcap[first])] = -1   # a fat pipe queues nothing
        self._first.extend(first)
        for i, link in zip(ids.tolist(), first.tolist()):   # in the order they are sent
            if link >= 0:
                self._queue.setdefault(link, deque()).append(i)
        return ids

    def _transfer(self, ids) -> None:
        ids = np.asarray(ids, dtype=np.int64)
        self._began.a[ids] = self.now_s
        FlowEngine._begin(self, ids)

    def _begin(self, ids) -> None:
        """Flows ``ids`` are ready (their latency is over): each transfers now if the flows sent before it on its
        first link are done, else when they are."""
        go = []
        for i in np.atleast_1d(ids).tolist():
            self._ready.a[i] = True
            link = int(self._first.a[i])
            if link < 0:
                go.append(i)
            elif link not in self._sending and self._queue[link][0] == i:
                self._sending[link] = i
                go.append(i)
        if go:
            self._transfer(go)

    def _end(self, slots) -> np.ndarray:
        ids = super()._end(slots)
        go = []
        for i in ids.tolist():
            link = int(self._first.a[i])
            if link < 0 or self._sending.get(link) != i:
                continue
            q = self._queue[link]
            q.popleft()
            del self._sending[link]
            if q and self._ready.a[q[0]]:
                self._sending[link] = q[0]
                go.append(q[0])
        if go:
            self._transfer(go)
        return ids

    def _solve_rates(self) -> None:
        """Rates by age: the transfers that began first take what they can on every link, those that began
        together share what is left by max-min."""
        self._sync()
        used = np.flatnonzero(self._len > 0)
        began = self._began.a[self._sid[used]]
        order = np.argsort(began, kind="stable")
        used, began = used[order], began[order]
        left = np.array(self._lcap, dtype=np.float64)
        width = np.arange(self._rows.shape[1])
        for grp in np.split(used, np.flatnonzero(np.diff(began) > 0) + 1):
            count = self._len[grp]
            ent = self._rows[grp][width < count[:, None]]
            starts = np.r_[0, np.cumsum(count)[:-1]]
            # a transfer whose route crosses a link that older ones fill waits (rate 0) until they end
            room = left[ent] > self.rel_tol * np.minimum(self._lcap[ent], 1e300)
            live = np.logical_and.reduceat(room, starts)
            rate = np.zeros(len(grp))
            if live.any():
                ent_live = ent[np.repeat(live, count)]
                rate[live] = _fill_numpy(ent_live, count[live], self._scap[grp[live]], left, self.rel_tol)
                left = np.maximum(left - np.bincount(ent_live, weights=np.repeat(rate[live], count[live]),
                                                     minlength=len(left)), 0.0)
            self._rate[grp] = rate
        moving = self._rate[used] > 0
        fin = np.full(len(used), np.inf)
        fin[moving] = self.now_s + self._rem[used][moving] / self._rate[used][moving]
        self._fin[used] = fin
        self._t_done = float(fin.min())
