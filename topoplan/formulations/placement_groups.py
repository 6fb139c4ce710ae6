"""Exact partition of ranks into small groups of equal capacity: column generation and an exact search.

The placement objectives on identical switches of ``size`` single-core nodes are, up to a constant and a
factor, the bytes cut between groups (switches) of at most ``size`` ranks, at most ``groups`` of them.
Minimizing the cut is maximizing the bytes kept inside the groups; as a set-partitioning model over every
possible group ``g`` (a set of 1 to ``size`` ranks, weight ``c_g``: the bytes inside it)::

    max  sum_g c_g x_g   s.t.  sum_{g ∋ r} x_g = 1 for every rank r,   sum_g x_g <= groups,   x_g in {0, 1}

Its linear relaxation is strong (it knows every group's inside), and where the groups are small the
subsets can be enumerated (:func:`n_subsets`; 680,000 at 64 ranks in groups of 4), so:

1. **Column generation** solves the relaxation (GLOP): a few columns at a time (the start's groups and the
   singletons first), then the columns of largest reduced cost ``c_g - sum_{r in g} pi_r - mu`` found by
   enumerating every subset (compiled), until none is positive. Any duals ``(pi, mu >= 0)`` bound every
   partition's inside by ``sum pi + groups mu + groups max(0, max reduced cost)``, so the bound is valid
   at any time; at the end it is the relaxation's optimum.
2. **The exact search**: a partition's inside equals ``sum pi + mu (number of groups) + sum of its groups'
   reduced costs``, at most ``D + sum`` of them (``D = sum pi + groups mu``). So a partition better than
   the incumbent uses only groups of reduced cost above ``incumbent + 1 - D``: those are enumerated and a
   depth-first exact cover (compiled) tries them, each rank covered by its cheapest groups first, pruning
   as soon as the reduced costs spent exceed ``D - incumbent - 1``. It ends with the optimum (the
   incumbent or a better partition it found) or at the time limit with the relaxation's bound.

The weights are integers (bytes divided by their gcd), so "better" is "at least one more".

Where the groups are too large to enumerate, :func:`pair_bound` bounds the same objective by the
relaxation over rank pairs (triangle inequalities, HiGHS); the caller pairs it with a search of its own.

Nothing here reads a problem or files: plain arrays in (:class:`GroupData`), arrays out
(:class:`GroupResult`). The relaxations are solved here, not through :mod:`topoplan.formulations.backends`:
column generation and cutting planes need the duals and the solver's model kept between rounds.

Examples
--------
>>> # 8 ranks in two rings of 4 (weight 10 per edge) joined by light edges, groups of 4: the rings are optimal
>>> W = np.zeros((8, 8), dtype=np.int64)
>>> for a, b in [(0, 1), (1, 2), (2, 3), (3, 0), (4, 5), (5, 6), (6, 7), (7, 4)]:
...     W[a, b] = W[b, a] = 10
>>> W[0, 4] = W[4, 0] = W[2, 6] = W[6, 2] = 1
>>> r = solve(GroupData(W=W, size=4, groups=2, start=np.array([0, 1, 0, 1, 0, 1, 0, 1])), time_limit=10)
>>> r.status, int(r.inside), int(r.bound), sorted(np.bincount(r.group).tolist())
('optimal', 80, 80, [4, 4])
>>> bool((r.group[:4] == r.group[0]).all())
True
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from numba import njit, objmode

from topoplan.core.interrupt import stop_requested

__all__ = ["GroupData", "GroupResult", "solve", "applies", "n_subsets", "inside_weight", "unpack", "pair_bound",
           "MAX_SUBSETS", "MAX_RANKS", "MAX_SEARCH_COLUMNS", "PAIR_MAX_RANKS"]

#: Most subsets one pricing pass enumerates (about a second compiled): above it the model does not apply.
MAX_SUBSETS = 20_000_000
#: Most ranks (the weights are a dense n x n array).
MAX_RANKS = 2048
#: Most groups the exact search takes (and group members held, 8 bytes each); with more (a weak relaxation)
#: it is not tried and the relaxation's bound stands.
MAX_SEARCH_COLUMNS = 4_000_000
MAX_SEARCH_CELLS = 32_000_000
# columns added per pricing round, per rank
_PER_RANK = 8
# triangle inequalities added per round of pair_bound, per rank
_CUTS_PER_ROUND = 100
#: Most ranks for :func:`pair_bound` (n (n - 1) / 2 pair variables, n^3 / 6 triangles to check).
PAIR_MAX_RANKS = 160


@dataclass(frozen=True)
class GroupData:
    """What the model reads: ``W`` the symmetric integer weights between ranks (n x n, zero diagonal);
    ``size`` ranks per group at most; ``groups`` groups at most (``n <= size * groups``); ``start`` a
    feasible partition (group of every rank), the incumbent."""

    W: np.ndarray
    size: int
    groups: int
    start: np.ndarray


@dataclass
class GroupResult:
    """``status`` ``optimal`` (proven) or ``timeout``; ``group``: the group of every rank (the best
    partition found, the start if none was better); ``inside``: its weight inside the groups; ``bound``:
    a proven upper bound on the inside of any partition; ``message``: what ran; ``relaxation``: whether the
    bound is the set-partitioning relaxation's optimum (no other relaxation of these groups bounds better:
    the pair relaxation of :func:`pair_bound` holds every solution of it)."""

    status: str
    group: np.ndarray
    inside: float
    bound: float
    message: str
    relaxation: bool = False


def n_subsets(n: int, size: int) -> int:
    """Subsets of 1 to ``size`` of ``n`` ranks: the candidate groups one pricing pass enumerates.

    >>> n_subsets(64, 4), n_subsets(64, 16) > 10 ** 14
    (679120, True)
    """
    return sum(math.comb(n, j) for j in range(1, min(size, n) + 1))


def applies(n: int, size: int) -> bool:
    """Is the enumeration small enough (:data:`MAX_SUBSETS`, :data:`MAX_RANKS`)?

    >>> applies(64, 4), applies(64, 16)
    (True, False)
    """
    return 2 <= size and n <= MAX_RANKS and n_subsets(n, size) <= MAX_SUBSETS


def inside_weight(W: np.ndarray, group: np.ndarray) -> float:
    """Weight of the edges inside the groups (each edge once)."""
    group = np.asarray(group)
    same = group[:, None] == group[None, :]
    return float(np.triu(np.where(same, W, 0), 1).sum())


def unpack(data: GroupData):
    """The model's arrays: ``(W as int64, W as float64, ranks, size, groups, start (a copy), its inside, the
    total weight (at least 1))``."""
    W = np.ascontiguousarray(data.W, dtype=np.int64)
    start = np.array(data.start, dtype=np.int64)
    return (W, W.astype(np.float64), W.shape[0], int(data.size), int(data.groups), start, inside_weight(W, start),
            max(1.0, float(np.triu(W, 1).sum())))


def solve(data: GroupData, *, time_limit: float) -> GroupResult:
    """Column generation, then the exact search, within ``time_limit`` seconds (the module docstring)."""
    from ortools.linear_solver import pywraplp

    deadline = time.perf_counter() + float(time_limit)
    W, Wf, n, size, k, best_group, best, scale = unpack(data)
    start = best_group.copy()
    tol = 1e-9 * scale
    # -- the relaxation, by column generation
    lp = pywraplp.Solver.CreateSolver("GLOP")
    rows = [lp.Constraint(1.0, 1.0) for _ in range(n)]
    count = lp.Constraint(0.0, float(k))
    obj = lp.Objective()
    obj.SetMaximization()

    def add(members, weight):
        x = lp.NumVar(0.0, 1.0, "")
        for r in members:
            rows[int(r)].SetCoefficient(x, 1.0)
        count.SetCoefficient(x, 1.0)
        obj.SetCoefficient(x, float(weight))

    for g in np.unique(start):
        members = np.flatnonzero(start == g)
        add(members, float(np.triu(W[np.ix_(members, members)], 1).sum()))
    for r in range(n):
        add([r], 0.0)
    bound, rounds, converged = math.inf, 0, False
    pi, mu = np.zeros(n), 0.0
    while _clock() < deadline:
        rounds += 1
        lp.SetTimeLimit(max(1, int(1000 * (deadline - time.perf_counter()))))
        if lp.Solve() != pywraplp.Solver.OPTIMAL:
            break
        pi = np.array([c.dual_value() for c in rows])
        mu = max(0.0, count.dual_value())
        cols, rc, weight, top = _subsets(Wf, size, pi, mu, tol, _PER_RANK * n, False)
        dual = float(pi.sum()) + k * mu
        bound = min(bound, dual + k * max(0.0, top))
        if len(cols) == 0:
            converged = True
            break
        for j in range(len(cols)):
            add(cols[j][cols[j] >= 0], weight[j])
    message = f"column generation: {rounds} rounds, {lp.NumVariables()} columns"
    bound = math.floor(bound + tol) if math.isfinite(bound) else math.inf
    if best >= bound:
        return GroupResult("optimal", best_group, best, best, message + ", the start meets the bound")
    if not converged or _clock() >= deadline:
        return GroupResult("timeout", best_group, best, bound, message + " (stopped by the time limit)")
    # -- the exact search over the groups that could be part of a better partition
    dual = float(pi.sum()) + k * mu
    budget = dual - (best + 1) + tol
    cap = max(1, min(MAX_SEARCH_COLUMNS, MAX_SEARCH_CELLS // size))
    cols, rc, weight, top = _subsets(Wf, size, pi, mu, -budget, cap, True)
    if len(cols) >= cap:
        return GroupResult("timeout", best_group, best, bound,
                           message + f", over {cap:,} groups could improve: no search")
    cost = np.maximum(-rc, 0.0)
    wint = np.round(weight).astype(np.int64)
    found, chosen, nodes, done = _cover(n, size, k, cols, cost, wint, dual + tol, int(best),
                                        max(0.0, deadline - time.perf_counter()))
    message += f", search over {len(cols):,} groups: {nodes:,} nodes"
    if found > best:
        best = float(found)
        best_group = np.empty(n, dtype=np.int64)
        for i, j in enumerate(chosen):
            best_group[cols[j][cols[j] >= 0]] = i
    if done:
        return GroupResult("optimal", best_group, best, best, message)
    return GroupResult("timeout", best_group, best, max(best, bound), message + " (stopped by the time limit)")


def pair_bound(W: np.ndarray, size: int, full: bool, *, time_limit: float) -> float:
    """An upper bound on the weight inside groups of at most ``size`` ranks, for any number of groups: the
    linear relaxation over rank pairs.

    ``y_ij`` (ranks ``i < j`` share a group) in [0, 1] maximize ``sum w_ij y_ij`` with ``sum_j y_ij <= size - 1``
    for every rank (``= size - 1`` when ``full``: every group holds exactly ``size``) and the triangle
    inequalities ``y_ij + y_jk - y_ik <= 1`` (sharing is transitive), added as the solution violates them,
    the most violated first. It is the bound where groups are too large to enumerate (16 ranks of 64: a
    64-rank CG class C matrix on 4 switches is proven this way). HiGHS (``highspy``); the bound of the last
    relaxation solved within ``time_limit`` (each is a relaxation of the next), rounded up by 1e-9.

    Examples
    --------
    >>> ring = np.roll(np.eye(8), 1, axis=1)
    >>> round(pair_bound(ring + ring.T, 4, True, time_limit=10), 6)      # two paths of 4: 3 + 3 edges
    6.0
    """
    import highspy

    from topoplan.formulations.backends.highs import stdout_silenced

    deadline = time.perf_counter() + float(time_limit)
    W = np.asarray(W, dtype=np.float64)
    n = W.shape[0]
    iu, ju = np.triu_indices(n, 1)
    w = W[iu, ju]
    top = float(w.max()) if len(w) else 0.0
    if top <= 0:
        return 0.0
    pid = np.zeros((n, n), dtype=np.int64)
    pid[iu, ju] = np.arange(len(iu))
    pid[ju, iu] = pid[iu, ju]
    with stdout_silenced():            # HiGHS prints its banner from the constructor
        h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    inf = highspy.kHighsInf
    m = len(iu)
    h.addVars(m, np.zeros(m), np.ones(m))
    h.changeColsCost(m, np.arange(m, dtype=np.int32), -w / top)           # minimize; weights scaled to <= 1
    lo = float(size - 1) if full else -inf
    for i in range(n):
        idx = pid[i][np.arange(n) != i].astype(np.int32)
        h.addRow(lo, float(size - 1), len(idx), idx, np.ones(len(idx)))
    a, b, c = _triples(n)
    tri = np.stack([pid[a, b], pid[b, c], pid[a, c]], 1)       # the pairs of every triple a < b < c
    bound = math.inf
    while True:
        left = deadline - time.perf_counter()
        if left <= 0 or stop_requested():
            break
        h.setOptionValue("time_limit", left)
        h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            break
        sol = h.getSolution()
        bound = min(bound, _dual_bound(h, np.asarray(sol.row_dual), -w / top) * -top)
        y = np.asarray(sol.col_value)
        cuts, viol = [], []
        for p, q, o in ((0, 1, 2), (1, 2, 0), (0, 2, 1)):        # each pair of the triple as the one implied
            v = y[tri[:, p]] + y[tri[:, q]] - y[tri[:, o]] - 1
            hit = np.flatnonzero(v > 1e-7)
            cuts.append(tri[hit][:, [p, q, o]])
            viol.append(v[hit])
        cuts, viol = np.concatenate(cuts), np.concatenate(viol)
        if len(cuts) == 0:
            break
        for row in cuts[np.argsort(-viol, kind="stable")[:_CUTS_PER_ROUND * n]]:
            h.addRow(-inf, 1.0, 3, row.astype(np.int32), np.array([1.0, 1.0, -1.0]))
    return bound * (1 + 1e-12) if math.isfinite(bound) else math.inf


def _dual_bound(h, dual: np.ndarray, cost: np.ndarray) -> float:
    """A lower bound on ``min cost.y`` over ``row_lo <= A y <= row_hi``, ``0 <= y <= 1`` from any row multipliers
    ``dual`` (weak duality: exact whatever the solver's tolerances): ``sum(dual_i x (row_lo_i if dual_i > 0 else
    row_hi_i)) + sum(min(0, cost_j - A_j . dual))``; a multiplier whose side is unbounded counts as 0."""
    lp = h.getLp()
    lo, hi = np.asarray(lp.row_lower_), np.asarray(lp.row_upper_)
    dual = np.where((dual > 0) & np.isfinite(lo), dual, np.where((dual < 0) & np.isfinite(hi), dual, 0.0))
    a = lp.a_matrix_
    parts = (np.asarray(a.value_), np.asarray(a.index_), np.asarray(a.start_))
    shape = (lp.num_row_, lp.num_col_)
    rowwise = a.format_ == type(a.format_).kRowwise
    A = sp.csr_matrix(parts, shape=shape) if rowwise else sp.csc_matrix(parts, shape=shape)
    reduced = cost - A.T @ dual
    rows = np.where(dual > 0, dual * np.where(np.isfinite(lo), lo, 0.0), dual * np.where(np.isfinite(hi), hi, 0.0))
    return float(rows.sum() + np.minimum(reduced, 0.0).sum())


def _triples(n: int):
    """Every ``a < b < c`` of ``0..n-1``, as three arrays."""
    a, b = np.triu_indices(n, 1)
    reps = n - 1 - b                                 # the c > b of each pair
    a, b = np.repeat(a, reps), np.repeat(b, reps)
    c = b + 1 + (np.arange(len(b)) - np.repeat(np.cumsum(reps) - reps, reps))
    return a, b, c


@njit(cache=True)
def _subsets(W, size, pi, mu, floor, cap, keep_all):
    """Subsets of 1 to ``size`` ranks whose reduced cost ``inside - sum pi - mu`` exceeds ``floor``.

    ``keep_all``: all of them, up to ``cap`` (then stops); else the ``cap`` of largest reduced cost.
    Returns ``(members padded with -1, reduced costs, insides, largest reduced cost of all)``.
    """
    n = W.shape[0]
    buf = 4 * cap if not keep_all else cap
    out = np.full((buf, size), -1, dtype=np.int64)
    rcs = np.empty(buf)
    ins = np.empty(buf)
    cnt = 0
    top = -np.inf
    idx = np.empty(size, dtype=np.int64)
    wsum = np.zeros(size + 1)
    psum = np.zeros(size + 1)
    depth = 0
    idx[0] = -1
    while depth >= 0:
        idx[depth] += 1
        if idx[depth] >= n:
            depth -= 1
            continue
        v = idx[depth]
        add = 0.0
        for t in range(depth):
            add += W[idx[t], v]
        wsum[depth + 1] = wsum[depth] + add
        psum[depth + 1] = psum[depth] + pi[v]
        rc = wsum[depth + 1] - psum[depth + 1] - mu
        if rc > top:
            top = rc
        if rc > floor:
            if cnt == buf:
                if keep_all:
                    return out[:cnt], rcs[:cnt], ins[:cnt], top
                # keep the best cap, raise the floor to the least of them
                order = np.argsort(-rcs[:cnt])[:cap]
                out[:cap] = out[order].copy()
                rcs[:cap] = rcs[order].copy()
                ins[:cap] = ins[order].copy()
                out[cap:] = -1
                cnt = cap
                floor = rcs[cap - 1]
            if rc > floor:
                for t in range(size):
                    out[cnt, t] = idx[t] if t <= depth else -1
                rcs[cnt] = rc
                ins[cnt] = wsum[depth + 1]
                cnt += 1
        if depth + 1 < size:
            depth += 1
            idx[depth] = v
    if not keep_all and cnt > cap:
        order = np.argsort(-rcs[:cnt])[:cap]
        return out[order], rcs[order], ins[order], top
    return out[:cnt], rcs[:cnt], ins[:cnt], top


def _clock() -> float:
    """Seconds of ``time.perf_counter``, or infinity once a stop was requested (Ctrl-C): the search then ends
    as at its time limit."""
    return math.inf if stop_requested() else time.perf_counter()


@njit(cache=True)
def _now():
    with objmode(t="float64"):
        t = _clock()
    return t


@njit(cache=True)
def _cover(n, size, k, cols, cost, weight, dual, best, seconds):
    """Depth-first exact cover by at most ``k`` of the groups ``cols`` (reduced-cost ``cost`` >= 0, inside
    ``weight``), looking for an inside above ``best``: the inside of a cover is at most ``dual`` minus its
    groups' costs, so a branch stops when its costs exceed ``dual - best - 1``. Each level covers the
    uncovered rank with the fewest groups, trying its groups cheapest first.

    Returns ``(best inside found or best, its groups, nodes, finished)``.
    """
    m = cols.shape[0]
    t_end = _now() + seconds      # infinite when a stop was requested: the first check (>=) ends the search
    # the groups of every rank, cheapest first
    deg = np.zeros(n + 1, dtype=np.int64)
    for j in range(m):
        for t in range(size):
            if cols[j, t] >= 0:
                deg[cols[j, t] + 1] += 1
    for r in range(n):
        deg[r + 1] += deg[r]
    lst = np.empty(deg[n], dtype=np.int64)
    fill = deg[:n].copy()
    order = np.argsort(cost)
    for jj in range(m):
        j = order[jj]
        for t in range(size):
            r = cols[j, t]
            if r >= 0:
                lst[fill[r]] = j
                fill[r] += 1
    rank_order = np.argsort(deg[1:] - deg[:-1])
    covered = np.zeros(n, dtype=np.bool_)
    lv_rank = np.empty(n + 1, dtype=np.int64)
    lv_pos = np.empty(n + 1, dtype=np.int64)
    lv_col = np.full(n + 1, -1, dtype=np.int64)
    acc = np.zeros(n + 2)
    accw = np.zeros(n + 2, dtype=np.int64)
    best_cols = np.empty(0, dtype=np.int64)
    found = best
    limit = dual - best - 1
    nodes = 0
    level = 0
    n_cov = 0
    # first rank of the order that is uncovered (all at the start)
    lv_rank[0] = rank_order[0]
    lv_pos[0] = deg[rank_order[0]]
    while level >= 0:
        nodes += 1
        if (nodes & 0xFFFF) == 0 and _now() >= t_end:
            return found, best_cols, nodes, False
        r = lv_rank[level]
        # undo the group chosen at this level before trying the next
        j0 = lv_col[level]
        if j0 >= 0:
            for t in range(size):
                v = cols[j0, t]
                if v >= 0:
                    covered[v] = False
                    n_cov -= 1
            lv_col[level] = -1
        p = lv_pos[level]
        nxt = -1
        while p < deg[r + 1]:
            j = lst[p]
            p += 1
            if acc[level] + cost[j] > limit:
                p = deg[r + 1]                 # cheapest first: the rest cost more
                break
            ok = True
            for t in range(size):
                v = cols[j, t]
                if v >= 0 and covered[v]:
                    ok = False
                    break
            if ok:
                nxt = j
                break
        lv_pos[level] = p
        if nxt < 0:
            level -= 1
            continue
        # take group nxt
        lv_col[level] = nxt
        for t in range(size):
            v = cols[nxt, t]
            if v >= 0:
                covered[v] = True
                n_cov += 1
        acc[level + 1] = acc[level] + cost[nxt]
        accw[level + 1] = accw[level] + weight[nxt]
        if n_cov == n:
            if accw[level + 1] > found:
                found = accw[level + 1]
                best_cols = lv_col[:level + 1].copy()
                limit = dual - found - 1
            continue
        if level + 1 >= k or (n - n_cov + size - 1) // size > k - level - 1:
            continue
        # the next level: the uncovered rank with the fewest groups
        q = 0
        while covered[rank_order[q]]:
            q += 1
        level += 1
        lv_rank[level] = rank_order[q]
        lv_pos[level] = deg[rank_order[q]]
        lv_col[level] = -1
    return found, best_cols, nodes, True
