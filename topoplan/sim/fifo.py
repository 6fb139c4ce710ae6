"""First come, first served flows: each node sends its small messages one after another, every link serves the
small messages that began earlier first, and larger messages share what is left by max-min.

The emulated cluster (real Open MPI over TCP on shaped links, :mod:`topoplan.emulate`) does not share links as
max-min does where small messages meet:

- one rank's three 32 KiB messages, posted at once to three ranks, arrive one message time apart, where max-min
  delivers all three at three message times; three 256 KiB messages arrive together, as max-min has them;
- a ring alltoall of 32 KiB a pair whose ranks enter it apart runs about as fast as with the ranks together,
  where max-min, whose later rounds' messages share the links of the ranks behind, predicts three to four times
  as long;
- bulk exchanges of large messages share links as max-min has them (on the default emulated network).

This engine's model: a message of at most ``in_turn_max_B`` bytes (Open MPI's eager limit over TCP by default:
the library writes such a message to its socket whole) waits until the small messages sent before it whose
routes start on the same link (its sending node's link into the network, or a relay's) have finished theirs,
and among the small messages under way the ones that began earlier take what they can on every link first;
those that began at the same time share by max-min. Larger messages go in fragments that interleave with
everyone's: they take no turn and share by max-min what the small ones leave. Latencies are the max-min
engine's. A size above every message's puts every message in turn (the model before the size rule: farther
from the emulated cluster on bulk exchanges, whose senders interleave their large messages). See
``docs/network-models.md`` for what it predicts against the emulated cluster.

The simulator runs it in its reference replay (Python), its rates in a Numba kernel
(:mod:`topoplan.sim._fifo_fill`): for jobs of up to a million messages.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from topoplan.sim.engines import REL_TOL, register
from topoplan.sim.maxmin import FlowEngine, _fill_numpy, _Grow, numba_available
from topoplan.sim.routes import LinkSet
from topoplan.sim.simmodel import DEFAULT_FIFO_IN_TURN_MAX_B

__all__ = ["FifoEngine", "MAX_MESSAGES"]

MAX_MESSAGES = 1_000_000
"""The most messages a replay runs under this model (:func:`topoplan.sim.replay.check_fifo_size`, which counts them
by :func:`topoplan.sim.replay.messages_bound`): the reference replay takes about 0.03-0.15 ms a message with the
compiled rates (NPB FT class B on 128 ranks, 66,809 messages, 3 s; CG class B on 128 ranks, 132,478
messages, 15 s; IS class B on 256 ranks, 215,292 messages, 19 s; the NumPy rates took 757 s for the last)."""


@register("fifo")
class FifoEngine(FlowEngine):
    """Small flows served first come, first served (one at a time on the first link of their route, by age
    elsewhere), large ones shared by max-min.

    An :class:`~topoplan.sim.engines.Engine`; the model is in the module docstring.

    Parameters
    ----------
    links : LinkSet
    timeline_dt_s : float, optional
        Record per-link utilization averaged over intervals of this length.
    rel_tol : float
        Starts and completions within ``rel_tol * |t|`` of an event time ``t`` belong to that event.
    in_turn_max_B : float
        The largest flow that goes first come, first served; larger ones share by max-min.
    compiled : bool, optional
        Solve the rates with the Numba kernel (:func:`topoplan.sim._fifo_fill.priority_fill`; the default
        where Numba is installed) or with NumPy; both give the same rates to the bit.

    Examples
    --------
    One link into the network and two links out of it (a sender and two receivers under one switch): two
    messages of 32 KB posted at once go one after the other, where max-min would finish both at 64 us.

    >>> links = LinkSet([1e9, 1e9, 1e9], [0.0, 0.0, 0.0], [True, True, True])
    >>> eng = FifoEngine(links)
    >>> eng.add_flows([0, 2, 4], [0, 1, 0, 2], [0.0, 0.0], [32e3, 32e3]).tolist()
    [0, 1]
    >>> eng.run(); [round(float(t) * 1e6, 6) for t in eng.finish_s]
    [32.0, 64.0]

    Two messages of 1 MB, larger than ``in_turn_max_B``, share the sender's link as under max-min:

    >>> eng = FifoEngine(links)
    >>> eng.add_flows([0, 2, 4], [0, 1, 0, 2], [0.0, 0.0], [1e6, 1e6]).tolist()
    [0, 1]
    >>> eng.run(); [round(float(t) * 1e3, 6) for t in eng.finish_s]
    [2.0, 2.0]

    Two senders into one receiver: the small message that began first is served first.

    >>> eng = FifoEngine(LinkSet([1e9, 1e9, 1e9], [0.0, 0.0, 0.0], [True, True, True]))
    >>> eng.add_flows([0, 2, 4], [0, 2, 1, 2], [0.0, 16e-6], [32e3, 32e3]).tolist()
    [0, 1]
    >>> eng.run(); [round(float(t) * 1e6, 6) for t in eng.finish_s]
    [32.0, 64.0]
    """

    def __init__(self, links: LinkSet, timeline_dt_s: float | None = None, *, rel_tol: float = REL_TOL,
                 in_turn_max_B: float = DEFAULT_FIFO_IN_TURN_MAX_B, compiled: bool | None = None):
        super().__init__(links, timeline_dt_s, solver="numpy", rel_tol=rel_tol)
        self.in_turn_max_B = float(in_turn_max_B)
        self.compiled = numba_available() if compiled is None else bool(compiled)
        self._began = _Grow(np.float64)     # per flow id: when its transfer began (NaN: not yet; inf: a large
        #                                     flow, which shares what the small ones leave)
        self._ready = _Grow(bool)           # per flow id: its latency is over
        self._first = _Grow(np.int64)       # per flow id: the shared link its route starts on, whose turn it
        #                                     takes (-1: none, a zero-byte flow or a large one, which take none)
        self._queue: dict[int, deque] = {}  # first link -> its flows in the order they were sent, not yet done
        self._sending: dict[int, int] = {}  # first link -> the flow whose transfer is under way on it

    @classmethod
    def for_network(cls, net, *, timeline_dt_s: float | None = None) -> "FifoEngine":
        """The engine of a :class:`~topoplan.sim.network.Network`: its links and its model's
        ``fifo_in_turn_max_B``.

        Examples
        --------
        >>> from topoplan.core.topology_io import load_topology
        >>> from topoplan.sim.network import build_network
        >>> net = build_network(load_topology("paper003", ["kind=tree", "ocs=null"]),
        ...                     model={"model": "fifo", "fifo_in_turn_max_B": 8192})
        >>> FifoEngine.for_network(net).in_turn_max_B
        8192.0
        """
        return cls(net.linkset(), timeline_dt_s=timeline_dt_s or None, in_turn_max_B=net.sim_model.fifo_in_turn_max_B)

    def add_flows(self, route_ptr, route_links, start_s, bytes_) -> np.ndarray:
        ids = super().add_flows(route_ptr, route_links, start_s, bytes_)
        self._began.extend(np.full(len(ids), np.nan))
        self._ready.extend(np.zeros(len(ids), dtype=bool))
        lo, hi = self._ptr.a[ids], self._ptr.a[ids + 1]
        first = np.full(len(ids), -1, dtype=np.int64)
        takes = (hi > lo) & ~self._instant.a[ids] & (self._size.a[ids] <= self.in_turn_max_B)
        first[takes] = self._rl.a[lo[takes]]
        first[takes & ~np.isfinite(self._lcap[first])] = -1   # a fat pipe queues nothing
        self._first.extend(first)
        for i, link in zip(ids.tolist(), first.tolist()):   # in the order they are sent
            if link >= 0:
                self._queue.setdefault(link, deque()).append(i)
        return ids

    def _transfer(self, ids) -> None:
        ids = np.asarray(ids, dtype=np.int64)
        self._began.a[ids] = np.where(self._size.a[ids] > self.in_turn_max_B, np.inf, self.now_s)
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
        """Rates by age: the small transfers that began first take what they can on every link, those that
        began together share what is left by max-min, and the large ones (began at inf) share the rest."""
        self._sync()
        used = np.flatnonzero(self._len > 0)
        began = self._began.a[self._sid[used]]
        order = np.argsort(began, kind="stable")
        used, began = used[order], began[order]
        bounds = np.flatnonzero(began[1:] != began[:-1]) + 1
        if self.compiled:
            from topoplan.sim._fifo_fill import priority_fill   # Numba: a process pays its import only here

            priority_fill(self._rows, self._len, used, np.r_[0, bounds, len(used)].astype(np.int64), self._scap,
                          self._lcap, float(self.rel_tol), self._rate)
        else:
            self._fill_groups(np.split(used, bounds))
        moving = self._rate[used] > 0
        fin = np.full(len(used), np.inf)
        fin[moving] = self.now_s + self._rem[used][moving] / self._rate[used][moving]
        self._fin[used] = fin
        self._t_done = float(fin.min())

    def _fill_groups(self, groups) -> None:
        """:meth:`_solve_rates`'s rates with NumPy, group after group (the compiled kernel computes the same)."""
        left = np.array(self._lcap, dtype=np.float64)
        width = np.arange(self._rows.shape[1])
        for grp in groups:
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
