"""All-to-all on mesh/torus networks (004): the lower bound of formula (1) and two schedules, A2A and A2AT.

* :func:`alltoall_lower_bound` -- 004 formula (1): the busiest link of the
  bottleneck dimension ``b`` carries ``alpha floor(k_b/2) ceil(k_b/2) prod_{i!=b} k_i``
  messages of ``m`` bytes (``alpha`` = 1/2 on a ring, 1 on a line).
* :func:`a2a_schedule` -- the simple spread of MPICH/Open MPI: at step ``i``
  node ``src`` sends to ``(src + i) mod N``.
* :func:`a2at_schedule` -- a topology-aware schedule in the spirit of Yazaki
  et al. (ISPA 2012): every step is a *coordinate shift* (each node sends to
  the node ``s`` away, ``s`` a vector of per-dimension offsets taken modulo
  the dimension sizes), so under dimension-order routing every link of one
  dimension and direction carries the same number of messages; the shifts
  are grouped into rounds of ``window`` concurrent messages whose per-link
  loads are balanced across all dimensions and directions, so that in every
  round all dimensions' links are busy (A2A leaves y and z idle while it
  walks along x, 004 Fig. 3).

Schedules become MPI event traces (:func:`schedule_trace`: per round,
``irecv`` and ``isend`` for each step, then ``waitall``) that the simulator
replays; :func:`schedule_congestion` gives the analytic per-round
congestion time of a schedule (busiest link per round, latency ignored).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from topoplan.core.errors import TopoplanError
from topoplan.core.topology import TorusTopology
from topoplan.sim.maxmin import simulate_flows
from topoplan.sim.network import build_network
from topoplan.traffic.trace import OP_CODE, Trace

__all__ = ["bound_details", "alltoall_lower_bound", "AllToAllSchedule", "a2a_schedule", "shift_loads",
           "a2at_schedule", "schedule_trace", "a2a_trace", "a2at_trace", "schedule_congestion", "simulate_rounds"]

DIM_NAMES = "xyzabcdefghijklmnopqrstuvw"


def _check_torus(topo) -> TorusTopology:
    if not isinstance(topo, TorusTopology):
        raise TopoplanError(f"all-to-all bound: needs a mesh/torus topology, got {getattr(topo, 'kind', topo)!r}")
    return topo


def _ring(topo: TorusTopology, d: int) -> bool:
    """A wrap-around only adds a path when the ring has more than two routers."""
    return bool(topo.wrap[d]) and topo.dims[d] > 2


# -- lower bound (004 formula 1) ------------------------------------------------

def bound_details(topo, nbytes: float) -> dict:
    """Formula (1) per dimension and the bottleneck.

    Parameters
    ----------
    topo : TorusTopology
    nbytes : float
        Message size ``m`` (bytes each node sends to each other node).

    Returns
    -------
    dict
        ``lower_bound_s`` (the largest of the per-dimension times and, when the
        topology has an injection bandwidth, the time to inject ``(N-1) m``
        bytes), ``formula_s`` (formula (1) alone), ``bottleneck`` (dimension
        name), ``bottleneck_index``, ``alpha``, ``messages_per_link``, ``bytes``,
        ``n_nodes`` and ``dimensions`` (one entry per dimension with ``name``,
        ``size``, ``wrap``, ``alpha``, ``messages_per_link``, ``bw_Bps``, ``time_s``).

    References
    ----------
    004 section IV, formula (1).

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> mesh = load_topology("mesh10x10x10", ["dims=[4,4,4]"])      # a 4x4x4 mesh
    >>> d = bound_details(mesh, 32768)
    >>> d["bottleneck"], d["messages_per_link"], round(d["lower_bound_s"] * 1e3, 4)
    ('x', 64.0, 0.4406)
    """
    topo = _check_torus(topo)
    if not nbytes >= 0:
        raise TopoplanError(f"field 'bytes': must be non-negative, got {nbytes}")
    dims = list(topo.dims)
    n = int(np.prod(dims))
    rows = []
    for d, k in enumerate(dims):
        alpha = 0.5 if _ring(topo, d) else 1.0
        others = n // k
        msgs = alpha * (k // 2) * ((k + 1) // 2) * others
        rows.append({"name": DIM_NAMES[d], "size": k, "wrap": bool(topo.wrap[d]), "alpha": alpha,
                     "messages_per_link": msgs, "bw_Bps": float(topo.bw_Bps[d]),
                     "time_s": msgs * nbytes / float(topo.bw_Bps[d])})
    b = int(np.argmax([r["time_s"] for r in rows]))
    out = {"formula_s": rows[b]["time_s"], "bottleneck": rows[b]["name"], "bottleneck_index": b,
           "alpha": rows[b]["alpha"], "messages_per_link": rows[b]["messages_per_link"],
           "n_nodes": n, "bytes": float(nbytes), "dimensions": rows}
    inj = None
    if topo.injection_bw_Bps:
        inj = (n - 1) * nbytes / topo.injection_bw_Bps
        out["injection_s"] = inj
    out["lower_bound_s"] = max(out["formula_s"], inj or 0.0)
    return out


def alltoall_lower_bound(topo, nbytes: float) -> float:
    """Lower bound (seconds) of an all-to-all of ``nbytes`` per node pair on a mesh/torus (004 formula 1).

    The bottleneck dimension is the one whose busiest link carries the most
    bytes per unit of bandwidth: the longest dimension unless a wrap-around
    halves its load (on the K computer, the 18-router mesh y beats the
    24-router torus x).

    Parameters
    ----------
    topo : TorusTopology
    nbytes : float
        Message size ``m`` (bytes each node sends to each other node).

    Returns
    -------
    float
        Seconds.

    References
    ----------
    004 formula (1): 2.57 s on the K computer at 32 KB (2.77 s measured).

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> round(alltoall_lower_bound(load_topology("kcomputer"), 32768), 2)
    2.57
    """
    return bound_details(topo, nbytes)["lower_bound_s"]


# -- schedules -----------------------------------------------------------------

@dataclass
class AllToAllSchedule:
    """An all-to-all as steps: at step ``t`` node ``i`` sends to ``dst[t, i]``.

    Each row of ``dst`` is a permutation without fixed points and every
    node meets every other node exactly once over the steps. Steps with the
    same ``round_of_step`` are in flight together (then every node waits
    for all of them). ``offsets`` are the coordinate shifts of A2AT steps.

    Parameters
    ----------
    name : str
        ``A2A`` or ``A2AT``.
    dst : numpy.ndarray
        (steps x nodes) destination of every node at every step.
    round_of_step : numpy.ndarray
        Round of every step.
    offsets : numpy.ndarray, optional
        (steps x dims) coordinate shift of every step (A2AT).
    meta : dict, optional
        How the schedule was made (``method``, ``window``...).

    Examples
    --------
    >>> s = a2a_schedule(4, window=3)
    >>> s.n_nodes, s.n_steps, s.n_rounds, s.src().tolist()
    (4, 3, 1, [[3, 0, 1, 2], [2, 3, 0, 1], [1, 2, 3, 0]])
    >>> s.validate()
    """

    name: str
    dst: np.ndarray
    round_of_step: np.ndarray
    offsets: np.ndarray | None = None
    meta: dict = field(default_factory=dict)

    @property
    def n_nodes(self) -> int:
        return self.dst.shape[1]

    @property
    def n_steps(self) -> int:
        return self.dst.shape[0]

    @property
    def n_rounds(self) -> int:
        return int(self.round_of_step.max(initial=-1)) + 1

    def src(self) -> np.ndarray:
        """``src[t, j]``: the node that sends to ``j`` at step ``t``."""
        out = np.empty_like(self.dst)
        rows = np.arange(self.n_steps)[:, None]
        out[rows, self.dst] = np.arange(self.n_nodes)[None, :]
        return out

    def validate(self) -> None:
        """Raise :class:`TopoplanError` unless this is a complete all-to-all."""
        n, s = self.n_nodes, self.n_steps
        if s != n - 1:
            raise TopoplanError(f"{self.name}: {s} steps for {n} nodes (need {n - 1})")
        if np.any(np.sort(self.dst, axis=1) != np.arange(n)[None, :]):
            raise TopoplanError(f"{self.name}: a step is not a permutation of the nodes")
        if np.any(self.dst == np.arange(n)[None, :]):
            raise TopoplanError(f"{self.name}: a node sends to itself")
        seen = np.zeros((n, n), dtype=np.int64)
        np.add.at(seen, (np.broadcast_to(np.arange(n), self.dst.shape), self.dst), 1)
        if np.any(seen + np.eye(n, dtype=np.int64) != 1):
            raise TopoplanError(f"{self.name}: some node pair is missed or repeated")
        r = self.round_of_step
        if len(r) != s or np.any(np.diff(r) < 0) or (s and r[0] != 0) or np.any(np.diff(r) > 1):
            raise TopoplanError(f"{self.name}: rounds must number the steps 0, 1, ... in order")


def _blocks(n_steps: int, window: int) -> np.ndarray:
    if window < 1:
        raise TopoplanError(f"field 'window': must be at least 1, got {window}")
    return np.arange(n_steps) // window


def a2a_schedule(n: int, window: int = 1) -> AllToAllSchedule:
    """The simple spread all-to-all: step ``i`` (1..N-1) sends ``src -> (src + i) mod N``.

    ``window`` consecutive steps are in flight at once (MPICH posts blocks
    of isends/irecvs and waits for the block).

    Parameters
    ----------
    n : int
        Nodes (ranks).
    window : int, optional

    Returns
    -------
    AllToAllSchedule

    References
    ----------
    004 section IV-A: "A2A", the simple spread algorithm.

    Examples
    --------
    >>> a2a_schedule(4).dst.tolist()
    [[1, 2, 3, 0], [2, 3, 0, 1], [3, 0, 1, 2]]
    """
    if n < 2:
        raise TopoplanError(f"all-to-all: needs at least 2 nodes, got {n}")
    i = np.arange(1, n)[:, None]
    dst = (np.arange(n)[None, :] + i) % n
    return AllToAllSchedule("A2A", dst, _blocks(n - 1, window), meta={"window": window})


def shift_loads(topo: TorusTopology, d: int) -> np.ndarray:
    """Messages on the busiest ``+`` and ``-`` link of dimension ``d`` when every node shifts by ``s``.

    Returns an array ``(k, 2)``: row ``s`` for the shift ``x -> (x + s) mod k``
    routed like the simulator (a ring takes the shorter way, ties ``+``;
    a line goes straight). Every line of the dimension carries the same
    pattern, so these are the maxima over the whole dimension.

    Parameters
    ----------
    topo : TorusTopology
    d : int
        The dimension.

    Returns
    -------
    numpy.ndarray
        ``(k, 2)`` message counts.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> mesh = load_topology("mesh10x10x10", ["dims=[4,4,4]"])      # a 4x4x4 mesh
    >>> shift_loads(mesh, 0).tolist()    # row s: shift by s; busiest + link, busiest - link
    [[0, 0], [1, 1], [2, 2], [1, 1]]
    """
    k = topo.dims[d]
    ring = bool(topo.wrap[d]) and k > 1
    out = np.zeros((k, 2), dtype=np.int64)
    x = np.arange(k)
    for s in range(1, k):
        plus, minus = np.zeros(k, np.int64), np.zeros(k, np.int64)   # link j: j -> j+1 (plus), j -> j-1 (minus)
        to = (x + s) % k
        if ring:
            fwd = s
            go_plus = fwd <= k - fwd
            hops = fwd if go_plus else k - fwd
            for h in range(hops):
                pos = (x + h) % k if go_plus else (x - h) % k
                np.add.at(plus if go_plus else minus, pos, 1)
        else:
            for a, b in zip(x, to):
                if b > a:
                    plus[a:b] += 1
                else:
                    minus[b + 1:a + 1] += 1
        out[s] = plus.max(), minus.max()
    return out


def _shift_vectors(dims) -> np.ndarray:
    """All nonzero offset vectors, first dimension fastest."""
    n = int(np.prod(dims))
    idx = np.arange(1, n)
    out = np.empty((n - 1, len(dims)), dtype=np.int64)
    for d, k in enumerate(dims):
        out[:, d] = idx % k
        idx = idx // k
    return out


def _channel_loads(topo: TorusTopology, offsets: np.ndarray) -> np.ndarray:
    """Per offset vector: busiest-link time (messages / bandwidth) per dimension and direction, ``(S, 2D)``."""
    cols = []
    for d in range(len(topo.dims)):
        tab = shift_loads(topo, d) / float(topo.bw_Bps[d])
        cols.append(tab[offsets[:, d]])
    return np.concatenate(cols, axis=1)


def _orbit_rounds(offsets: np.ndarray, active: list[int]) -> list[list[int]] | None:
    """Rounds of cyclic rotations of the offset vector over identical dimensions (exactly balanced)."""
    key = {tuple(v): i for i, v in enumerate(offsets.tolist())}
    done = np.zeros(len(offsets), dtype=bool)
    rounds, singles = [], []
    for i, v in enumerate(offsets.tolist()):
        if done[i]:
            continue
        orbit = []
        for r in range(len(active)):
            w = list(v)
            for j, d in enumerate(active):
                w[d] = v[active[(j + r) % len(active)]]
            orbit.append(key[tuple(w)])
        orbit = list(dict.fromkeys(orbit))
        done[orbit] = True
        if len(orbit) == len(active):
            rounds.append(orbit)
        else:
            singles.extend(orbit)    # symmetric vectors load all dimensions alike
    for j in range(0, len(singles), len(active)):
        rounds.append(singles[j:j + len(active)])
    return rounds


def _route_hops(topo: TorusTopology, offsets: np.ndarray) -> np.ndarray:
    """Per offset vector: the longest route (hops) any node takes for it under dimension-order routing."""
    hops = np.zeros(len(offsets), dtype=np.int64)
    for d, k in enumerate(topo.dims):
        s = offsets[:, d]
        # a line: the node at 0 goes s hops up, the node at k-s goes k-s hops down; a ring: the shorter way
        hops += np.minimum(s, k - s) if _ring(topo, d) else np.where(s > 0, np.maximum(s, k - s), 0)
    return hops


def _merge_orbits(topo, offsets, rounds: list[list[int]], group: int) -> list[list[int]]:
    """Join ``group`` orbit rounds into one, orbits of similar route length together.

    Each orbit round loads every dimension alike, so their union does too;
    grouping by route length keeps a round's slowest message close to the
    others, since a round lasts as long as its longest route's latency plus
    its transfer."""
    if group <= 1:
        return rounds
    hops = _route_hops(topo, offsets)
    rounds = sorted(rounds, key=lambda r: (-int(hops[r].max()), r[0]))
    return [sum(rounds[j:j + group], []) for j in range(0, len(rounds), group)]


def _greedy_rounds(loads: np.ndarray, window: int) -> list[list[int]]:
    """Pack steps into rounds of ``window``: seed each round with the heaviest step left, then add the
    step that raises the round's busiest channel least (ties: the heaviest), so rounds stay balanced."""
    m = len(loads)
    peak = loads.max(axis=1)
    total = loads.sum(axis=1)
    left = np.ones(m, dtype=bool)
    order = np.lexsort((-total, -peak))
    rounds = []
    tol = 1e-9 * max(float(peak.max(initial=0.0)), 1e-300)
    ptr = 0
    while ptr < m:
        while not left[order[ptr]]:
            ptr += 1
        seed = int(order[ptr])
        left[seed] = False
        cur, members = loads[seed].copy(), [seed]
        for _ in range(window - 1):
            cand = np.flatnonzero(left)
            if cand.size == 0:
                break
            inc = (cur[None, :] + loads[cand]).max(axis=1) - cur.max()
            best = np.flatnonzero(inc <= inc.min() + tol)
            pick = int(cand[best[np.argmax(total[cand[best]])]])
            left[pick] = False
            members.append(pick)
            cur += loads[pick]
        rounds.append(members)
        while ptr < m and not left[order[ptr]]:
            ptr += 1
    return rounds


def _rounds_cost(rounds: list[list[int]], loads: np.ndarray) -> float:
    return float(sum(loads[r].sum(axis=0).max() for r in rounds))


def _improve_rounds(rounds: list[list[int]], loads: np.ndarray, max_passes: int = 10) -> list[list[int]]:
    """Local search: swap two steps of different rounds when that lowers the sum of the rounds' busiest
    channels (e.g. pairs a ``+``-heavy shift with a ``-``-heavy one on a ring with ties going ``+``)."""
    rounds = [list(r) for r in rounds]
    L = np.array([loads[r].sum(axis=0) for r in rounds])
    where = np.empty(len(loads), dtype=np.int64)
    for q, r in enumerate(rounds):
        where[r] = q
    tol = 1e-9 * max(float(L.max(initial=0.0)), 1e-300)
    for _ in range(max_passes):
        improved = False
        for i in range(len(loads)):
            r = where[i]
            li = loads[i]
            new_r = L[r][None, :] - li[None, :] + loads                  # round r with i swapped for j
            new_q = L[where] - loads + li[None, :]                        # j's round with j swapped for i
            delta = new_r.max(axis=1) + new_q.max(axis=1) - L[r].max() - L[where].max(axis=1)
            delta[where == r] = 0.0
            j = int(np.argmin(delta))
            if delta[j] < -tol:
                q = where[j]
                rounds[r][rounds[r].index(i)] = j
                rounds[q][rounds[q].index(j)] = i
                L[r], L[q] = new_r[j], new_q[j]
                where[i], where[j] = q, r
                improved = True
        if not improved:
            break
    return rounds


def a2at_schedule(topo, window: int | None = None, method: str = "auto") -> AllToAllSchedule:
    """Topology-aware all-to-all for a mesh/torus: balanced rounds of coordinate shifts.

    Parameters
    ----------
    topo : :class:`topoplan.core.topology.TorusTopology` (ranks = nodes in x, y, z order).
    window : messages each node has in flight per round (default: the
        number of dimensions longer than 1, one per dimension). A larger
        window means fewer rounds, so fewer route latencies paid in series
        (what keeps 32 KB messages away from the bound in the simulator).
    method : ``orbit`` (cyclic rotations of each shift over identical
        dimensions: exact balance, needs all dimensions alike and
        ``window`` a multiple of their number; with a multiple, orbits of
        similar route length share a round), ``greedy`` (balanced packing
        of the per-channel loads, any shape) or ``auto`` (orbit when it applies).

    Returns
    -------
    AllToAllSchedule
        With ``offsets`` and ``meta['method']``.

    References
    ----------
    004 section IV-A: "A2AT", the torus-optimized all-to-all.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> s = a2at_schedule(load_topology("mesh10x10x10", ["dims=[4,4,4]"]))
    >>> (s.n_steps, s.n_rounds, s.meta["method"])
    (63, 21, 'orbit')
    """
    topo = _check_torus(topo)
    n = topo.n_nodes
    if n < 2:
        raise TopoplanError("all-to-all: needs at least 2 nodes")
    active = [d for d, k in enumerate(topo.dims) if k > 1]
    w = len(active) if window is None else int(window)
    if w < 1:
        raise TopoplanError(f"field 'window': must be at least 1, got {w}")
    offsets = _shift_vectors(topo.dims)
    loads = _channel_loads(topo, offsets)
    alike = len({(topo.dims[d], _ring(topo, d), float(topo.bw_Bps[d])) for d in active}) == 1
    if method not in ("auto", "orbit", "greedy"):
        raise TopoplanError(f"field 'method': unknown A2AT method {method!r} (auto, orbit, greedy)")
    fits = alike and w % len(active) == 0
    use_orbit = method == "orbit" or (method == "auto" and fits)
    if use_orbit and not fits:
        raise TopoplanError("A2AT method 'orbit': needs identical dimensions and a window that is a multiple "
                            "of the number of dimensions")
    if use_orbit:
        rounds = _merge_orbits(topo, offsets, _orbit_rounds(offsets, active), w // len(active))
        if method == "auto":
            # orbits balance the dimensions but not the two directions of a ring whose ties all go '+':
            # keep the better of orbits and greedy packing (both after the swap search)
            cands = [_improve_rounds(rounds, loads), _improve_rounds(_greedy_rounds(loads, w), loads)]
            costs = [_rounds_cost(c, loads) for c in cands]
            if costs[1] < costs[0] * (1 - 1e-9):
                rounds, use_orbit = cands[1], False
            elif costs[0] < _rounds_cost(rounds, loads) * (1 - 1e-9):
                rounds = cands[0]
    else:
        rounds = _improve_rounds(_greedy_rounds(loads, w), loads)
    # heaviest rounds first: they overlap with nothing, so the order only moves latency around
    rounds.sort(key=lambda r: -loads[r].sum(axis=0).max())
    steps = np.array([i for r in rounds for i in r], dtype=np.int64)
    rid = np.repeat(np.arange(len(rounds)), [len(r) for r in rounds])
    off = offsets[steps]
    c = topo.coords()
    stride = np.cumprod([1] + list(topo.dims[:-1]))
    dst = (((c[None, :, :] + off[:, None, :]) % np.asarray(topo.dims)[None, None, :]) * stride).sum(axis=2)
    return AllToAllSchedule("A2AT", dst.astype(np.int64), rid, offsets=off,
                            meta={"window": w, "method": "orbit" if use_orbit else "greedy"})


# -- traces ----------------------------------------------------------------------

def schedule_trace(schedule: AllToAllSchedule, nbytes: float, *, source: str | None = None) -> Trace:
    """An MPI event trace of a schedule: per round, each node posts ``irecv`` then ``isend`` for its
    steps and ``waitall``; no computation between calls.

    Parameters
    ----------
    schedule : AllToAllSchedule
    nbytes : float
        Message size.
    source : str, optional
        The trace's source name.

    Returns
    -------
    topoplan.traffic.trace.Trace

    Examples
    --------
    >>> t = schedule_trace(a2a_schedule(3), 1024)
    >>> t.op_counts() == {"isend": 6, "irecv": 6, "waitall": 6}
    True
    """
    n, s = schedule.n_nodes, schedule.n_steps
    if not nbytes >= 0:
        raise TopoplanError(f"field 'bytes': must be non-negative, got {nbytes}")
    rid = schedule.round_of_step
    # one rank's call sequence: for each round its irecvs, its isends, one waitall
    kind, step = [], []
    for r in range(schedule.n_rounds):
        st = np.flatnonzero(rid == r)
        kind += [0] * len(st) + [1] * len(st) + [2]
        step += st.tolist() * 2 + [-1]
    kind, step = np.array(kind), np.array(step)
    srcm = schedule.src()
    safe = np.maximum(step, 0)
    peer = np.where(kind[None, :] == 0, srcm[safe].T, np.where(kind[None, :] == 1, schedule.dst[safe].T, -1))
    codes = np.array([OP_CODE["irecv"], OP_CODE["isend"], OP_CODE["waitall"]], dtype=np.int16)[kind]
    L = len(kind)
    rows = n * L
    t = Trace(n_ranks=n,
              rank=np.repeat(np.arange(n, dtype=np.int64), L),
              op=np.tile(codes, n),
              peer=peer.reshape(-1).astype(np.int64),
              bytes=np.tile(np.where(kind == 2, 0.0, float(nbytes)), n),
              root=np.full(rows, -1, dtype=np.int64),
              comm_size=np.full(rows, n, dtype=np.int64),
              t_start=np.zeros(rows), t_end=np.zeros(rows),
              comm=np.full(rows, -1, dtype=np.int64),
              tag=np.where(np.tile(kind, n) == 2, -1, 0).astype(np.int64),
              req=np.full(rows, -1, dtype=np.int8),
              source=source or f"{schedule.name.lower()}(np={n},bytes={nbytes:g})")
    t.validate()
    return t


def a2a_trace(n: int, nbytes: float, window: int = 1) -> Trace:
    """Trace of the simple spread all-to-all on ``n`` ranks (see :func:`a2a_schedule`).

    Parameters
    ----------
    n : int
    nbytes : float
    window : int, optional

    Returns
    -------
    topoplan.traffic.trace.Trace

    Examples
    --------
    >>> t = a2a_trace(4, 1024)
    >>> t.n_ranks, t.op_counts()
    (4, {'isend': 12, 'irecv': 12, 'waitall': 12})
    """
    return schedule_trace(a2a_schedule(n, window), nbytes)


def a2at_trace(topo, nbytes: float, window: int | None = None, method: str = "auto") -> Trace:
    """Trace of the topology-aware all-to-all (see :func:`a2at_schedule`); rank ``i`` on node ``i``.

    Parameters
    ----------
    topo : TorusTopology
    nbytes : float
    window : int, optional
    method : {"auto", "orbit", "greedy"}, optional

    Returns
    -------
    topoplan.traffic.trace.Trace

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> mesh = load_topology("mesh10x10x10", ["dims=[4,4,4]"])      # a 4x4x4 mesh
    >>> t = a2at_trace(mesh, 1024)
    >>> t.n_ranks, t.op_counts()
    (64, {'isend': 4032, 'irecv': 4032, 'waitall': 1344})
    """
    return schedule_trace(a2at_schedule(topo, window, method), nbytes)


# -- analysis --------------------------------------------------------------------

def schedule_congestion(topo, schedule: AllToAllSchedule, nbytes: float) -> dict:
    """Congestion time of a schedule: per round, the bytes on its busiest link over that link's bandwidth.

    With every round's messages sharing links fairly and rounds separated
    by a wait, a round lasts at least that long; the sum over rounds is a
    latency-free estimate (and a lower bound) of the schedule's time,
    always at least :func:`alltoall_lower_bound`. Links and routes are the
    simulator's (:func:`topoplan.sim.network.build_network`, dimension order).

    Parameters
    ----------
    topo : TorusTopology
    schedule : AllToAllSchedule
    nbytes : float

    Returns
    -------
    dict
        ``estimate_s``, ``round_s`` (per round), ``lower_bound_s``,
        ``routing_floor_s`` (the busiest link's total over the whole all-to-all
        under this routing: above the bound on even rings, whose ties all go
        ``+``), ``ratio`` (estimate / lower bound), ``busiest_class`` (link class of the
        busiest link per round, e.g. ``torus-x+``), ``class_round_s``.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> mesh = load_topology("mesh10x10x10", ["dims=[4,4,4]"])      # a 4x4x4 mesh
    >>> a2at = schedule_congestion(mesh, a2at_schedule(mesh), 32768)
    >>> a2a = schedule_congestion(mesh, a2a_schedule(64), 32768)
    >>> round(a2at["ratio"], 3), round(a2a["ratio"], 3)     # A2AT reaches the bound, A2A does not
    (1.0, 1.75)
    """
    topo = _check_torus(topo)
    if schedule.n_nodes != topo.n_nodes:
        raise TopoplanError(f"{schedule.name}: {schedule.n_nodes} nodes but the topology has {topo.n_nodes}")
    net = build_network(topo)
    n = schedule.n_nodes
    src_all = np.tile(np.arange(n), schedule.n_steps)
    ptr, links = net.eps_routes(src_all, schedule.dst.reshape(-1))
    owner_round = np.repeat(np.repeat(schedule.round_of_step, n), np.diff(ptr))
    nl = net.n_links
    per = np.bincount(owner_round * nl + links, minlength=schedule.n_rounds * nl).reshape(schedule.n_rounds, nl)
    t = per * float(nbytes) / net.bw_Bps[None, :]
    busiest = t.argmax(axis=1)
    cls = np.asarray(net.link_class)
    by_class = {str(k): t[:, cls == k].max(axis=1).tolist() for k in np.unique(cls) if str(k).startswith("torus-")}
    round_s = t.max(axis=1)
    lb = alltoall_lower_bound(topo, nbytes)
    est = float(round_s.sum())
    # every complete all-to-all moves the same pairs over the same (deterministic) routes
    floor = float((per.sum(axis=0) * float(nbytes) / net.bw_Bps).max(initial=0.0))
    return {"estimate_s": est, "round_s": round_s.tolist(), "lower_bound_s": lb, "routing_floor_s": floor,
            "ratio": est / lb if lb > 0 else None,   # none without traffic (JSON has no NaN)
            "busiest_class": [str(net.link_class[b]) for b in busiest], "class_round_s": by_class}


# -- flow simulation, round by round -----------------------------------------------

def simulate_rounds(topo, schedule: AllToAllSchedule, nbytes: float, *, timeline_dt_s: float | None = None,
                    progress=None) -> dict:
    """Flow-simulate a schedule one round at a time, every round starting when the previous one ends.

    Each round's messages are flows on the simulator's links and
    dimension-order routes (:func:`topoplan.sim.network.build_network`), shared
    max-min fairly by :func:`topoplan.sim.maxmin.simulate_flows`, each starting
    after its route latency (link latencies and store-and-forward of the
    first packet per hop, as in the MPI replay). The round barrier is what
    MPI's pairwise all-to-all does per step (and what Tofu MPI's barriers
    enforce, 004 V-B). The full replay of :func:`schedule_trace` has no
    barrier: with rendezvous messages it gives the same times, with eager
    ones nodes run ahead into the next round and disturb its balance (slower
    on the 4x4x4 mesh at 32 KB). This is far cheaper: 999,000 messages on
    1,000 nodes in tens of seconds instead of a Python replay per message.

    Parameters
    ----------
    topo : :class:`topoplan.core.topology.TorusTopology` (rank ``i`` on node ``i``).
    schedule : from :func:`a2a_schedule` or :func:`a2at_schedule`.
    nbytes : message size.
    timeline_dt_s : also record link utilization per interval of this length.
    progress : optional callable ``(rounds_done, n_rounds)``.

    Returns
    -------
    dict: ``makespan_s``, ``round_s`` (per round), ``n_flows``,
    ``n_events``, ``wall_s`` and, with ``timeline_dt_s``, ``timeline`` in the
    schema of ``topoplan simulate --timeline`` (what :mod:`topoplan.reporting.report` reads).

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> t = load_topology("mesh10x10x10", ["dims=[2,2]", "latency=0"])
    >>> r = simulate_rounds(t, a2at_schedule(t), 4.76e9)   # 2 rounds, 1 s each: no two flows share a link
    >>> round(r["makespan_s"], 3)
    2.0
    """
    import time

    topo = _check_torus(topo)
    if schedule.n_nodes != topo.n_nodes:
        raise TopoplanError(f"{schedule.name}: {schedule.n_nodes} nodes but the topology has {topo.n_nodes}")
    if not nbytes >= 0:
        raise TopoplanError(f"field 'bytes': must be non-negative, got {nbytes}")
    if timeline_dt_s is not None and not timeline_dt_s > 0:
        raise TopoplanError(f"field 'timeline_dt_s': must be positive, got {timeline_dt_s}")
    t0 = time.perf_counter()
    net = build_network(topo)
    links = net.linkset()
    n = schedule.n_nodes
    nodes = np.arange(n)
    now, round_s, n_flows, n_events = 0.0, [], 0, 0
    acc = np.zeros((net.n_links, 0)) if timeline_dt_s else None     # bytes per link and global interval
    for r in range(schedule.n_rounds):
        steps = np.flatnonzero(schedule.round_of_step == r)
        src = np.tile(nodes, len(steps))
        dst = schedule.dst[steps].reshape(-1)
        ptr, rl = net.eps_routes(src, dst)
        size = np.full(len(src), float(nbytes))
        owner = np.repeat(np.arange(len(src)), np.diff(ptr))
        # the engine adds the links' latencies; the size-dependent rest (first packet per hop) is a late start
        extra = net.route_latency(ptr, rl, size) - np.bincount(owner, weights=net.latency_s[rl], minlength=len(src))
        res = simulate_flows(links, ptr, rl, extra, size, timeline_dt_s=timeline_dt_s)
        if acc is not None and res.timeline is not None:
            acc = _add_timeline(acc, res.timeline, now, timeline_dt_s, net.bw_Bps)
        now += res.makespan_s
        round_s.append(res.makespan_s)
        n_flows += len(src)
        n_events += res.n_events
        if progress is not None:
            progress(r + 1, schedule.n_rounds)
    out = {"makespan_s": now, "round_s": round_s, "n_flows": n_flows, "n_events": n_events,
           "wall_s": time.perf_counter() - t0}
    if acc is not None:
        k = max(int(np.ceil(now / timeline_dt_s - 1e-9)), 1)
        acc = np.pad(acc, ((0, 0), (0, max(k - acc.shape[1], 0))))[:, :k]
        util = acc / (timeline_dt_s * net.bw_Bps[:, None])
        used = np.flatnonzero(util.max(axis=1) > 0) if util.size else np.zeros(0, np.int64)
        out["timeline"] = {"t_s": (np.arange(k) * timeline_dt_s).tolist(), "dt_s": float(timeline_dt_s),
                           "links": [{"name": net.link_name[l], "class": str(net.link_class[l]),
                                      "src": net.link_ends[l][0], "dst": net.link_ends[l][1],
                                      "util": np.round(util[l], 6).tolist()} for l in used]}
    return out


def _add_timeline(acc: np.ndarray, tl: dict, offset_s: float, dt: float, bw: np.ndarray) -> np.ndarray:
    """Add one round's utilization (intervals from its own start) to the global byte counts per interval.

    A round's interval ``j`` covers ``[offset + j dt, offset + (j+1) dt)``;
    its bytes are split between the two global intervals it overlaps."""
    util = np.asarray(tl["util"])
    if util.size == 0:
        return acc
    b = util * (dt * bw[:, None])                         # bytes per link and round interval
    pos = offset_s / dt
    g0 = int(np.floor(pos))
    frac = pos - g0
    need = g0 + b.shape[1] + 1
    if need > acc.shape[1]:
        acc = np.pad(acc, ((0, 0), (0, need - acc.shape[1] + 64)))
    acc[:, g0:g0 + b.shape[1]] += (1.0 - frac) * b
    acc[:, g0 + 1:g0 + 1 + b.shape[1]] += frac * b
    return acc
