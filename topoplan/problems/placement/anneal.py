"""Simulated annealing over swaps of ranks between cores (Bhanot et al., Blue Gene/L task mapping, SC 2005).

State: which rank sits on every core (slot); empty cores hold no rank, so
moving a rank to a free core is a swap with an empty slot. Every step
proposes a *batch* of swaps and prices them all at once with numpy:

- ``hops`` / ``inter-switch`` objectives (linear in pair distances): the
  delta of swapping ranks a and b is gathered from their CSR neighbour
  lists, ``sum_k w_ak (d(n_b, n_k) - d(n_a, n_k))`` and the same for b;
- ``congestion``: the routes of every pair touching a or b are removed and
  re-added at the new nodes (:meth:`topoplan.analysis.linkload.LinkGraph.routes`),
  and the move is priced with a smooth stand-in for the max link time,
  ``sum_l (t_l / t_max)^p`` (p = 8); the true bound is tracked exactly.

Accepted swaps (Metropolis rule) are applied in batch order, skipping any
that touches a rank, core or neighbour an earlier swap of the batch moved,
so every applied delta of a linear objective is exact (congestion deltas
of swaps sharing a link add up only approximately; the loads stay exact). Half the proposals move a rank next to one
of its communication partners (same node or same switch), half are uniform.
The temperature falls exponentially with the time used; the last tenth of
the budget is a zero-temperature descent. Seeded and deterministic for a
given number of steps (``max_steps``); with a time budget the number of
steps depends on the machine.
"""

from __future__ import annotations

import math
import time

import numpy as np
import scipy.sparse as sp

from topoplan.problems.placement import basic, greedy, metis  # noqa: F401  (register the starts)
from topoplan.problems.placement.problem import PlacementProblem, initial_placement, result_from
from topoplan.problems.placement.registry import METHODS
from topoplan.core.interrupt import stop_requested
from topoplan.core.topology import check_count
from topoplan.core.progress import report

__all__ = ["DEFAULT_TIME_S", "NOT_STARTS", "anneal"]

DEFAULT_TIME_S = 10.0
NOT_STARTS = ("ilp", "joint")    # the improving methods are no starts of anneal


class _State:
    """Slots, positions and the rank graph as flat arrays."""

    def __init__(self, problem: PlacementProblem, node_of: np.ndarray):
        self.p = problem
        cores = problem.cores
        self.slot_node = np.repeat(np.arange(problem.n_nodes), cores)
        first = np.concatenate([[0], np.cumsum(cores)[:-1]])
        n = problem.n_ranks
        self.slot_rank = np.full(len(self.slot_node), -1, dtype=np.int64)
        order = np.argsort(node_of, kind="stable")
        sorted_nodes = node_of[order]
        within = np.arange(n) - np.searchsorted(sorted_nodes, sorted_nodes, side="left")
        self.pos = np.empty(n, dtype=np.int64)
        self.pos[order] = first[sorted_nodes] + within
        self.slot_rank[self.pos] = np.arange(n)
        self.node_of = node_of.copy()
        W = problem.graph()
        self.indptr, self.indices, self.data = W.indptr, W.indices, W.data
        sw = problem.node_switch
        self.sw = sw
        # slots of every switch (for local proposals)
        slot_sw = sw[self.slot_node]
        self.sw_order = np.argsort(slot_sw, kind="stable")
        self.sw_start = np.searchsorted(slot_sw[self.sw_order], np.arange(problem.topology.n_switches + 1))
        self.node_first = first
        self.cores = cores
        self.slot_busy = np.zeros(len(self.slot_node), dtype=bool)
        self._ext = None         # external(): cached, refreshed around the ranks that moved
        self._moved: list = []

    def neighbours(self, ranks):
        """Flattened CSR neighbour lists of ``ranks``: (owner index, neighbour, weight)."""
        a = self.indptr[ranks]
        lens = self.indptr[ranks + 1] - a
        owner = np.repeat(np.arange(len(ranks)), lens)
        idx = np.arange(lens.sum()) - np.repeat(np.cumsum(lens) - lens, lens) + np.repeat(a, lens)
        return owner, self.indices[idx], self.data[idx]

    def node_ranks(self, nodes):
        """``(owner index, rank)`` of the ranks on each of ``nodes``."""
        lens = self.cores[nodes]
        owner = np.repeat(np.arange(len(nodes)), lens)
        slots = np.repeat(self.node_first[nodes], lens) + np.arange(lens.sum()) - np.repeat(np.cumsum(lens) - lens, lens)
        r = self.slot_rank[slots]
        keep = r >= 0
        return owner[keep], r[keep]

    def moved(self, ranks) -> None:
        """Note ranks that changed node (their and their partners' external bytes are recomputed)."""
        self._moved.append(np.asarray(ranks, dtype=np.int64))

    def external(self, dist) -> np.ndarray:
        """Every rank's distance-weighted bytes to its partners (0 when all partners are on its node).

        Computed once per state, then only for the ranks that moved and their partners (the same sums,
        term by term, as a full recomputation).
        """
        n = len(self.pos)
        if self._ext is None:
            owner = np.repeat(np.arange(n), np.diff(self.indptr))
            d = self.data * dist(self.node_of[owner], self.node_of[self.indices])
            self._ext = np.bincount(owner, weights=d, minlength=n)
        elif self._moved:
            r = np.unique(np.concatenate(self._moved))
            r = np.unique(np.concatenate([r, self.neighbours(r)[1]]))
            owner, k, w = self.neighbours(r)
            d = w * dist(self.node_of[r[owner]], self.node_of[k])
            self._ext[r] = np.bincount(owner, weights=d, minlength=len(r))
        self._moved = []
        return self._ext

    def _towards_partner(self, rng, ranks, dist):
        """For each rank, a partner k drawn by bytes x distance, and where to go: 0 k's core, 1 a partner of k,
        2 a core of k's node, 3 a core of k's switch."""
        owner, k_all, w = self.neighbours(ranks)
        wd = w * dist(self.node_of[ranks[owner]], self.node_of[k_all])
        cw = np.cumsum(wd)
        start = np.concatenate([[0.0], cw])[np.searchsorted(owner, np.arange(len(ranks)), side="left")]
        tot = np.bincount(owner, weights=wd, minlength=len(ranks))
        pick = np.minimum(np.searchsorted(cw, start + rng.random(len(ranks)) * tot, side="right"), len(k_all) - 1)
        return k_all[pick]

    def _pick_ranks(self, rng, m: int, dist):
        """``m`` ranks drawn by their distance-weighted bytes (ranks far from their partners)."""
        ext = self.external(dist)
        tot = ext.sum()
        if tot <= 0:
            return None
        return np.minimum(np.searchsorted(np.cumsum(ext), rng.random(m) * tot, side="right"), len(ext) - 1)

    def propose(self, rng, batch: int, dist, same_switch_useless: bool = False):
        """A batch of rank swaps ``(a, b, slot of a, slot of b)``; ``b = -1`` is an empty core.

        Half the moves start from a rank drawn by its distance-weighted bytes
        (ranks far from their partners) and go next to one partner k, chosen
        by bytes x distance: swap with k itself, with a partner of k, with a
        rank on k's node or on k's switch. The other half are uniform swaps.
        """
        n = len(self.pos)
        a = rng.integers(0, n, batch)
        s2 = rng.integers(0, len(self.slot_rank), batch)
        local = rng.random(batch) < 0.5
        la = self._pick_ranks(rng, int(local.sum()), dist) if local.any() else None
        if la is not None and len(la):
            a[local] = la
            k = self._towards_partner(rng, la, dist)
            nk = self.node_of[k]
            how = rng.integers(0, 4, len(la))
            on_node = self.node_first[nk] + (rng.random(len(la)) * self.cores[nk]).astype(np.int64)
            s = self.sw[nk]
            lo, hi = self.sw_start[s], self.sw_start[s + 1]
            on_sw = self.sw_order[lo + (rng.random(len(la)) * (hi - lo)).astype(np.int64)]
            deg_k = self.indptr[k + 1] - self.indptr[k]
            kk = self.indices[self.indptr[k] + (rng.random(len(la)) * deg_k).astype(np.int64)]
            s2[local] = np.select([how == 0, how == 1, how == 2], [self.pos[k], self.pos[kk], on_node], on_sw)
        s1 = self.pos[a]
        keep = self.slot_node[s1] != self.slot_node[s2]
        if same_switch_useless:
            keep &= self.sw[self.slot_node[s1]] != self.sw[self.slot_node[s2]]
        a, s1, s2 = a[keep], s1[keep], s2[keep]
        return a, self.slot_rank[s2], s1, s2

    def propose_nodes(self, rng, batch: int, dist, same_switch_useless: bool):
        """A batch of whole-node swaps ``(x, y)``: node x holds a rank far from a partner k, y is on k's switch."""
        a = self._pick_ranks(rng, batch, dist)
        if a is None:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        x = self.node_of[a]
        k = self._towards_partner(rng, a, dist)
        s = self.sw[self.node_of[k]]
        lo, hi = self.sw_start[s], self.sw_start[s + 1]
        y = self.slot_node[self.sw_order[lo + (rng.random(len(a)) * (hi - lo)).astype(np.int64)]]
        keep = (x != y) & (self.cores[x] == self.cores[y])
        if same_switch_useless:
            keep &= self.sw[x] != self.sw[y]
        return x[keep], y[keep]


def _node_deltas(st: _State, dist, x, y):
    """Exact cost change of swapping the contents of nodes x[i] and y[i] (pairs inside x and y keep their distance)."""
    ox, rx = st.node_ranks(x)
    oy, ry = st.node_ranks(y)
    owner = np.concatenate([ox, oy])
    r = np.concatenate([rx, ry])
    old = np.concatenate([x[ox], y[oy]])
    new = np.concatenate([y[ox], x[oy]])
    o2, k, w = st.neighbours(r)
    c = owner[o2]
    nk = st.node_of[k]
    outside = (nk != x[c]) & (nk != y[c])
    d = w * (dist(new[o2], nk) - dist(old[o2], nk)) * outside
    return np.bincount(c, weights=d, minlength=len(x))


def _linear_deltas(st: _State, dist, a, b, s1, s2):
    """Exact cost change of each proposed swap for a pair-distance objective."""
    na, nb = st.slot_node[s1], st.slot_node[s2]
    owner, k, w = st.neighbours(a)
    keep = k != b[owner]
    d = w * (dist(nb[owner], st.node_of[k]) - dist(na[owner], st.node_of[k])) * keep
    delta = np.bincount(owner, weights=d, minlength=len(a))
    real = np.flatnonzero(b >= 0)
    if real.size:
        owner, k, w = st.neighbours(b[real])
        keep = k != a[real][owner]
        d = w * (dist(na[real][owner], st.node_of[k]) - dist(nb[real][owner], st.node_of[k])) * keep
        delta[real] += np.bincount(owner, weights=d, minlength=len(real))
    return delta


class _Congestion:
    """Link loads and the p-norm stand-in for the congestion bound."""

    P = 8

    def __init__(self, problem: PlacementProblem, st: _State):
        self.g = problem.links()
        self.inv = np.where(np.isfinite(self.g.bw_Bps), 1.0 / self.g.bw_Bps, 0.0)
        s, d, w = problem.pairs()
        n = problem.n_ranks
        out = sp.csr_matrix((w, (s, d)), shape=(n, n))
        inn = sp.csr_matrix((w, (d, s)), shape=(n, n))
        self.out, self.inn = out, inn
        self.loads = problem.link_loads(st.node_of)
        self.norm = max(self.bound(), 1e-300)

    def bound(self) -> float:
        return float((self.loads * self.inv).max(initial=0.0))

    def _f(self, loads, links):
        return ((loads * self.inv[links]) / self.norm) ** self.P

    def _touching(self, m, ranks):
        a = m.indptr[ranks]
        lens = m.indptr[ranks + 1] - a
        owner = np.repeat(np.arange(len(ranks)), lens)
        idx = np.arange(lens.sum()) - np.repeat(np.cumsum(lens) - lens, lens) + np.repeat(a, lens)
        return owner, m.indices[idx], m.data[idx]

    def deltas(self, st: _State, a, b, s1, s2):
        """Per-candidate p-norm change, and the (candidate, link, byte change) entries to apply later."""
        na, nb = st.slot_node[s1], st.slot_node[s2]
        owners, us, vs, ws = [], [], [], []
        for ranks, sel, skip in ((a, np.arange(len(a)), None), (b, np.flatnonzero(b >= 0), a)):
            r = ranks[sel]
            for m, outgoing in ((self.out, True), (self.inn, False)):
                o, k, w = self._touching(m, r)
                if skip is not None:  # the a-b pair is counted once, from a's side
                    keep = k != skip[sel][o]
                    o, k, w = o[keep], k[keep], w[keep]
                cand = sel[o]
                owners.append(cand)
                if outgoing:
                    us.append(r[o]); vs.append(k)
                else:
                    us.append(k); vs.append(r[o])
                ws.append(w)
        cand = np.concatenate(owners); u = np.concatenate(us); v = np.concatenate(vs); w = np.concatenate(ws)

        def moved(x, c):
            nx = st.node_of[x].copy()
            nx = np.where(x == a[c], nb[c], nx)
            return np.where(x == b[c], na[c], nx)

        old_u, old_v = st.node_of[u], st.node_of[v]
        new_u, new_v = moved(u, cand), moved(v, cand)
        g = self.g
        p1, l1 = g.routes(old_u, old_v)
        p2, l2 = g.routes(new_u, new_v)
        c_all = np.concatenate([np.repeat(cand, np.diff(p1)), np.repeat(cand, np.diff(p2))])
        l_all = np.concatenate([l1, l2])
        w_all = np.concatenate([-np.repeat(w, np.diff(p1)), np.repeat(w, np.diff(p2))])
        key = c_all * g.n_links + l_all
        uniq, inv = np.unique(key, return_inverse=True)
        dl = np.bincount(inv.ravel(), weights=w_all, minlength=len(uniq))
        ec, el = uniq // g.n_links, uniq % g.n_links
        cur = self.loads[el]
        df = self._f(np.maximum(cur + dl, 0.0), el) - self._f(cur, el)
        delta = np.bincount(ec, weights=df, minlength=len(a))
        return delta, (ec, el, dl)

    def apply(self, entries, chosen_mask):
        ec, el, dl = entries
        sel = chosen_mask[ec]
        np.add.at(self.loads, el[sel], dl[sel])
        np.maximum(self.loads, 0.0, out=self.loads)


def _free(st: _State, moved, ranks) -> bool:
    """None of ``ranks`` nor their partners has moved in this batch."""
    if moved[ranks].any():
        return False
    for r in ranks:
        if moved[st.indices[st.indptr[r]:st.indptr[r + 1]]].any():
            return False
    return True


def _rank_step(st, rng, batch, dist, temp, moved, cong_model, same_switch_useless):
    """Propose, price and apply one batch of rank swaps; returns ``(applied, cost change or None, deltas)``."""
    a, b, s1, s2 = st.propose(rng, batch, dist, same_switch_useless)
    if len(a) == 0:
        return 0, 0.0, np.zeros(0)
    if cong_model is not None:
        delta, entries = cong_model.deltas(st, a, b, s1, s2)
    else:
        delta = _linear_deltas(st, dist, a, b, s1, s2)
    if temp is None:
        return 0, 0.0, delta
    ok = _metropolis(rng, delta, temp)
    chosen = np.zeros(len(a), dtype=bool)
    touched, slots = [], []
    change = 0.0
    for i in np.flatnonzero(ok):
        ai, bi = a[i], b[i]
        if st.slot_busy[s1[i]] or st.slot_busy[s2[i]]:
            continue
        if not _free(st, moved, [ai] if bi < 0 else [ai, bi]):
            continue
        chosen[i] = True
        na, nb = st.slot_node[s1[i]], st.slot_node[s2[i]]
        st.slot_rank[s1[i]], st.slot_rank[s2[i]] = bi, ai
        st.pos[ai], st.node_of[ai] = s2[i], nb
        touched.append(ai)
        if bi >= 0:
            st.pos[bi], st.node_of[bi] = s1[i], na
            touched.append(bi)
        moved[touched[-2 if bi >= 0 else -1:]] = True
        st.slot_busy[s1[i]] = st.slot_busy[s2[i]] = True
        slots += [s1[i], s2[i]]
        change += delta[i]
    moved[touched] = False
    st.slot_busy[slots] = False
    if touched:
        st.moved(touched)
    if cong_model is not None and chosen.any():
        cong_model.apply(entries, chosen)
    return int(chosen.sum()), change, delta


def _node_step(st, rng, batch, dist, temp, moved, same_switch_useless):
    """Propose, price and apply one batch of whole-node swaps; returns ``(applied, cost change)``."""
    x, y = st.propose_nodes(rng, batch, dist, same_switch_useless)
    if len(x) == 0:
        return 0, 0.0
    delta = _node_deltas(st, dist, x, y)
    ok = _metropolis(rng, delta, temp)
    busy = np.zeros(len(st.cores), dtype=bool)
    touched = []
    change, applied = 0.0, 0
    for i in np.flatnonzero(ok):
        xi, yi = x[i], y[i]
        if busy[xi] or busy[yi]:
            continue
        sx = st.node_first[xi] + np.arange(st.cores[xi])
        sy = st.node_first[yi] + np.arange(st.cores[yi])
        ranks = np.concatenate([st.slot_rank[sx], st.slot_rank[sy]])
        ranks = ranks[ranks >= 0]
        if not _free(st, moved, ranks):
            continue
        rx, ry = st.slot_rank[sx].copy(), st.slot_rank[sy].copy()
        st.slot_rank[sx], st.slot_rank[sy] = ry, rx
        for r_arr, slots, node in ((rx, sy, yi), (ry, sx, xi)):
            real = r_arr >= 0
            st.pos[r_arr[real]] = slots[real]
            st.node_of[r_arr[real]] = node
        moved[ranks] = True
        touched.append(ranks)
        busy[xi] = busy[yi] = True
        change += delta[i]
        applied += 1
    if touched:
        moved[np.concatenate(touched)] = False
        st.moved(np.concatenate(touched))
    return applied, change


def _metropolis(rng, delta, temp):
    if temp <= 0:
        return delta < 0
    with np.errstate(over="ignore"):
        return (delta <= 0) | (rng.random(len(delta)) < np.exp(-np.maximum(delta, 0) / temp))


@METHODS.register("anneal")
def anneal(problem: PlacementProblem, *, time_limit=None, seed=0, init=None, batch: int | None = None,
           max_steps: int | None = None, t0: float | None = None, cycles: int = 3):
    """Simulated annealing with batched, vectorized swap deltas (see the module docstring).

    Parameters
    ----------
    problem : :class:`PlacementProblem` (objective ``hops``, ``inter-switch`` or ``congestion``).
    time_limit : seconds of annealing (default 10).
    seed : random seed.
    init : starting placement: a method name, several (the best on the objective) or a ``rank_to_node``
        array (see :func:`~topoplan.problems.placement.problem.initial_placement`); default: the best of
        every partitioner installed and ``greedy``
        (:func:`~topoplan.problems.placement.problem.default_starts`).
    batch : swaps proposed and priced together per step (default n_ranks / 4, within 32..512).
    max_steps : stop after this many batches; the cooling follows the batches, not the clock, so without
        a ``time_limit`` the run is reproducible on any machine and load (a ``time_limit`` given still
        stops it).
    t0 : start temperature in objective units (default: the first batch's median uphill move
        is accepted 1 in 4, capped at 4 typical edges for the linear objectives).
    cycles : cooling cycles; each restarts from the best placement at half the previous start
        temperature. The last tenth of the run is a zero-temperature descent from the best.

    Returns
    -------
    PlanResult
        The best placement seen (status ``heuristic``).

    Raises
    ------
    TopoplanError
        For an unknown ``init`` or a given placement that does not fit.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.sources import load_traffic
    >>> p = PlacementProblem.build(load_topology("paper003"), load_traffic("neighbor2d:rows=8,cols=8,bytes=1MB"))
    >>> r = anneal(p, init="sequential", max_steps=400)
    >>> r.objective < p.hop_bytes(np.repeat(np.arange(16), 4))
    True
    """
    t_call = time.perf_counter()   # the budget counts from the call: the start is part of it
    if max_steps is not None:
        max_steps = check_count(max_steps, "max_steps", minimum=0)
    rng = np.random.default_rng(seed)
    budget = DEFAULT_TIME_S if time_limit is None else float(time_limit)
    if batch is None:
        batch = int(np.clip(problem.n_ranks // 4, 32, 512))
    cycles = max(1, int(cycles))
    # a counted run (max_steps, no time limit) picks its starts without the clock too: which starts fit a time
    # budget depends on the load (METIS is dropped when the CPU share makes its first split too slow)
    counted = max_steps is not None and time_limit is None
    start_name, start_node = initial_placement(problem, init, seed, method="anneal", exclude=NOT_STARTS,
                                               time_limit=None if counted else budget)
    cong = problem.objective == "congestion"
    dist = problem.hops if cong else problem.distance
    if problem.n_ranks < 2 or problem.graph().nnz == 0:
        return result_from(problem, start_node, message="nothing to improve")
    start_cost = problem.cost(start_node)
    best_cost, best_node = start_cost, start_node.copy()
    w_typ = float(np.median(problem.graph().data))
    node_moves = (not cong) and problem.cores.max() > 1
    rank_useless = problem.objective == "inter-switch"
    st = _State(problem, best_node)
    model = _Congestion(problem, st) if cong else None
    if t0 is None:
        _, _, d = _rank_step(st, rng, batch, dist, None, None, model, rank_useless)
        up = d[d > 0]
        t0 = float(np.median(up)) / math.log(4.0) if up.size else (w_typ if not cong else best_cost)
        if not cong:
            t0 = min(t0, 4.0 * w_typ)
    t_end = min(t0, (w_typ if not cong else 0.01 * t0) / math.log(100.0))
    steps = applied = 0
    phase = -1
    moved = np.zeros(problem.n_ranks, dtype=bool)
    t_begin = t_call
    while True:
        if stop_requested():   # Ctrl-C: keep the best placement found so far
            break
        if max_steps is not None:
            if steps >= max_steps or (time_limit is not None and time.perf_counter() - t_begin >= budget):
                break
            frac = steps / max_steps
        else:
            elapsed = time.perf_counter() - t_begin
            if elapsed >= budget:
                break
            frac = elapsed / budget
        # cycles of cooling, each restarted from the best state at half the start temperature,
        # then a zero-temperature descent from the best state
        now = min(int(frac / 0.9 * cycles), cycles) if frac < 0.9 else cycles
        if now != phase:
            phase = now
            st = _State(problem, best_node)
            model = _Congestion(problem, st) if cong else None
            cost = best_cost
        if phase >= cycles:
            temp = 0.0
        else:
            hot = max(t0 * 0.5 ** phase, t_end)
            temp = hot * (t_end / hot) ** (frac / 0.9 * cycles - phase)
        steps += 1
        if node_moves and rng.random() < 1.0 / 3.0:
            k, change = _node_step(st, rng, batch, dist, temp, moved, problem.is_tree)
        else:
            k, change, _ = _rank_step(st, rng, batch, dist, temp, moved, model, rank_useless)
        if k == 0:
            continue
        applied += k
        if cong:
            cost = model.bound()
            if steps % 64 == 0:
                model.norm = max(cost, 1e-300)
        else:
            cost += change
        if cost < best_cost - 1e-9 * max(abs(best_cost), 1.0):
            best_cost, best_node = cost, st.node_of.copy()
            report(incumbent=best_cost)
    exact = problem.cost(best_node)
    msg = f"{steps} batches of {batch} moves, {applied} applied; objective {start_cost:.6g} -> {exact:.6g}"
    return result_from(problem, best_node, message=msg,
                       options={"init": start_name,
                                "batch": batch, "steps": steps, "cycles": cycles, "t0": t0,
                                "time_budget_s": None if max_steps is not None and time_limit is None else budget})
