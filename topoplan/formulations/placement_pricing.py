"""Partition into large groups: column generation whose pricing is searched, not enumerated.

The model is the set-partitioning relaxation of :mod:`topoplan.formulations.placement_groups` (maximize the
weight inside groups of at most ``size`` ranks, at most ``groups`` of them), for groups too large to
enumerate (64 ranks on 4 switches of 16: about 5 x 10^14 subsets). Data -> model -> solve:

1. **Master**: the linear relaxation over the groups found so far (the start's groups and the singletons
   first), on HiGHS's interior-point solver without crossover. Its duals are central in the optimal face:
   the simplex's vertex duals of this highly degenerate LP (GLOP's, measured) left column generation at the
   start's value (MapLib AMG on 4 switches: 170 rounds, no useful bound after 90 s), the central ones
   converge in 30-40 rounds; they stabilize it without a smoothing parameter.
2. **Pricing**: a group ``S`` of at most ``size`` ranks of largest reduced cost ``w(S) - pi(S) - mu``.
   First by heuristic (:func:`greedy_columns`: from every rank, greedy growth and the best prefix, then
   add/drop/swap moves), every round; when it finds no positive column, by an exact branch-and-bound
   (:func:`best_group`) that proves the largest reduced cost, or bounds it when stopped by its limit.
3. **Bound**: any duals ``(pi, mu >= 0)`` bound every partition's inside by
   ``sum pi + groups mu + groups max(0, UB(max reduced cost))`` (each group's inside is its reduced cost plus
   its ``pi`` plus ``mu``), so the bound of every exact pricing is valid whenever the search stops; the best
   of them is kept. When the exact pricing proves that no column is positive, it is the relaxation's optimum.
4. **Last units**: the interior point's duals are optimal to its tolerance only (2.7 units above the
   relaxation at 5.2 x 10^8 on MapLib AMG); after convergence the optimal vertex duals nearest them (a small
   LP) and one more exact pricing bound by the relaxation's value itself, so an integral relaxation proves.
5. **Primal**: the master restricted to its columns, as an integer program (HiGHS), may combine them into a
   better partition than the start.

The exact pricing branches on ranks (in, out), the rank of largest optimistic gain first, and bounds a node
with ``F`` in, the candidates ``C`` and ``r`` places left by
``w(F) - pi(F) + sum of the r largest positive (w(i, F) - pi_i + (1/2) sum of the r - 1 largest w(i, C))``
over ``i`` in ``C``; a candidate whose marginal gain ``w(i, F) - pi_i`` plus its ``r - 1`` largest weights into
``C`` is not positive is dropped (removing it from any group never lowers the group's value). On the first
pricing of MapLib LULESH it took 6.2 CPU s where HiGHS took 10.2 on the same pricing as a MILP (rank
booleans, pair variables, degree rows); on AMG 3.2 CPU s where HiGHS had not found the column in 60 s.
Where the graph is sparse and the groups large (MapLib BT-MZ on 4 switches: degree 8-20, groups of 16) the
bound stays far above and neither finishes: the model then bounds nothing.

Nothing here reads a problem or files: plain arrays in (:class:`~topoplan.formulations.placement_groups.GroupData`),
a :class:`~topoplan.formulations.placement_groups.GroupResult` out.

Examples
--------
>>> # 12 ranks in three cliques of 4 (weight 5) with light edges between them, groups of 4
>>> W = np.zeros((12, 12), dtype=np.int64)
>>> for c in range(3):
...     W[4 * c:4 * c + 4, 4 * c:4 * c + 4] = 5
>>> np.fill_diagonal(W, 0)
>>> W[0, 4] = W[4, 0] = W[5, 9] = W[9, 5] = 1
>>> r = solve(GroupData(W=W, size=4, groups=3, start=np.arange(12) % 3), time_limit=600)
>>> r.status, int(r.inside), int(r.bound)          # 3 cliques x 6 edges x 5
('optimal', 90, 90)
"""

from __future__ import annotations

import math
import time

import numpy as np
from numba import njit

from topoplan.formulations.placement_groups import GroupData, GroupResult, _clock, _now, inside_weight, unpack

__all__ = ["solve", "applies", "greedy_columns", "best_group", "neighbours", "MAX_RANKS"]

#: Most ranks (dense weights; a heuristic pricing round is ``n^2 size`` operations).
MAX_RANKS = 256
# share of what is left that the restricted master's integer program may take at the end
_PRIMAL_SHARE = 0.2
# a bound this close to the best partition (relative) after convergence is the interior point's tolerance: polished
_POLISH_GAP = 1e-6
# share of what is left that one exact pricing takes at most
_EXACT_SHARE = 0.5
# exact pricing: nodes between looks at the clock
_CLOCK_NODES = 4096


def applies(n: int, size: int) -> bool:
    """Does the priced model take ``n`` ranks in groups of ``size`` (:data:`MAX_RANKS`)?

    >>> applies(64, 16), applies(512, 16), applies(64, 1)
    (True, False, False)
    """
    return 2 <= size and 2 <= n <= MAX_RANKS


@njit(cache=True)
def neighbours(W):
    """Every rank's other ranks, heaviest weight first (``n x (n - 1)``): the exact pricing's bound reads
    the heaviest weights of a rank among the candidates by walking its row."""
    n = W.shape[0]
    nb = np.empty((n, max(n - 1, 0)), dtype=np.int64)
    for i in range(n):
        order = np.argsort(-W[i], kind="mergesort")
        c = 0
        for j in order:
            if j != i:
                nb[i, c] = j
                c += 1
    return nb


@njit(cache=True)
def greedy_columns(W, pi, size, floor, seeds):
    """Heuristic pricing: groups of at most ``size`` ranks with ``w(S) - pi(S)`` above ``floor``.

    From every rank: add the rank of largest marginal gain ``w(i, S) - pi_i`` up to ``size`` and keep the
    best prefix, then improve it by the best add, drop or swap until none gains; and from every row of
    ``seeds`` (groups padded with -1: the master's columns in use), the moves alone. Returns
    ``(members padded with -1 (sorted), values)``, one row per start at most (duplicates possible).

    Examples
    --------
    >>> W = np.ones((6, 6)) - np.eye(6)                  # every pair weighs 1, every rank costs 0.5
    >>> cols, vals = greedy_columns(W, np.full(6, 0.5), 3, 0.0, np.full((0, 3), -1))
    >>> float(vals.max()), int((cols >= 0).sum(axis=1).max())         # a triangle: 3 - 1.5
    (1.5, 3)
    """
    n = W.shape[0]
    n_starts = n + seeds.shape[0]
    outs = np.full((n_starts, size), -1, dtype=np.int64)
    vals = np.empty(n_starts)
    inside = np.zeros(n, dtype=np.bool_)
    to_set = np.zeros(n)            # weight from every rank into the group
    order = np.empty(size, dtype=np.int64)
    cnt = 0
    for s in range(n_starts):
        inside[:] = False
        to_set[:] = 0.0
        m = 0
        val = 0.0
        best_val, best_m = -np.inf, 0
        if s >= n:                  # a seed: its members, then the moves
            for t in range(size):
                v = seeds[s - n, t]
                if v < 0:
                    break
                val += to_set[v] - pi[v]
                inside[v] = True
                order[m] = v
                m += 1
                for j in range(n):
                    to_set[j] += W[v, j]
            best_val, best_m = val, m
        while s < n and m < size:
            pick, gain = s, -pi[s]
            if m > 0:
                pick, gain = -1, -np.inf
                for j in range(n):
                    if not inside[j] and to_set[j] - pi[j] > gain:
                        gain = to_set[j] - pi[j]
                        pick = j
                if pick < 0:
                    break
            inside[pick] = True
            order[m] = pick
            m += 1
            val += gain
            for j in range(n):
                to_set[j] += W[pick, j]
            if val > best_val:
                best_val, best_m = val, m
        while m > best_m:               # back to the best prefix
            m -= 1
            v = order[m]
            inside[v] = False
            for j in range(n):
                to_set[j] -= W[v, j]
        val = best_val
        for _ in range(4 * n):          # add, drop or swap: the best move while one gains
            gain, move, a, b = 1e-12 * (1.0 + abs(val)), 0, -1, -1
            if m > 1:
                for t in range(m):
                    g = pi[order[t]] - to_set[order[t]]
                    if g > gain:
                        gain, move, a = g, 1, t
            for j in range(n):
                if inside[j]:
                    continue
                gj = to_set[j] - pi[j]
                if m < size and gj > gain:
                    gain, move, b = gj, 2, j
                for t in range(m):
                    i = order[t]
                    g = gj - W[i, j] - (to_set[i] - pi[i])
                    if g > gain:
                        gain, move, a, b = g, 3, t, j
            if move == 0:
                break
            if move == 1 or move == 3:
                i = order[a]
                inside[i] = False
                for j in range(n):
                    to_set[j] -= W[i, j]
                order[a] = order[m - 1]
                m -= 1
            if move == 2 or move == 3:
                inside[b] = True
                for j in range(n):
                    to_set[j] += W[b, j]
                order[m] = b
                m += 1
            val += gain
        if val > floor:
            outs[cnt, :m] = np.sort(order[:m])
            vals[cnt] = val
            cnt += 1
    return outs[:cnt], vals[:cnt]


@njit(cache=True)
def _node_bound(W, nb, pi, size, status, to_in, value, n_in, fixed, n_fixed):
    """Bound of a node (the module docstring), after dropping the candidates that cannot gain
    (``status`` 3, listed in ``fixed``). Returns ``(bound, rank to branch on or -1, n_fixed)``."""
    n = W.shape[0]
    r = size - n_in
    h = np.full(n, -np.inf)
    changed = True
    while changed:
        changed = False
        for i in range(n):
            if status[i] != 0:
                continue
            top = 0.0
            c = 0
            if r > 1:
                for q in range(n - 1):
                    j = nb[i, q]
                    w = W[i, j]
                    if w <= 0.0:
                        break
                    if status[j] == 0:
                        top += w
                        c += 1
                        if c >= r - 1:
                            break
            g = to_in[i] - pi[i]
            if g + top <= 0.0:
                status[i] = 3
                fixed[n_fixed] = i
                n_fixed += 1
                changed = True
            else:
                h[i] = g + 0.5 * top
    hs = np.sort(h)
    bound = value
    for q in range(min(r, n)):
        x = hs[n - 1 - q]
        if x <= 0.0:
            break
        bound += x
    pick, hb = -1, -np.inf
    for i in range(n):
        if status[i] == 0 and h[i] > hb:
            hb, pick = h[i], i
    return bound, pick, n_fixed


@njit(cache=True)
def best_group(W, nb, pi, size, floor, seconds):
    """Exact pricing: the largest ``w(S) - pi(S)`` over groups ``S`` of 1 to ``size`` ranks, if above
    ``floor``, by depth-first branch-and-bound (the module docstring) within ``seconds``.

    Returns ``(value, members, upper bound, nodes, finished)``: the best group found above ``floor``
    (``floor`` and no members if none) and a proven upper bound on every group's value: the value itself
    when finished, else the largest bound of the nodes left open (at least ``floor``).

    Examples
    --------
    >>> W = np.zeros((6, 6)); W[0, 1] = W[1, 0] = W[1, 2] = W[2, 1] = 4.0; W[3, 4] = W[4, 3] = 1.0
    >>> v, S, ub, nodes, done = best_group(W, neighbours(W), np.ones(6), 3, 0.0, 10.0)
    >>> float(v), S.tolist(), round(float(ub), 6), done      # the path 0-1-2: 8 - 3
    (5.0, [0, 1, 2], 5.0, True)
    """
    n = W.shape[0]
    t_end = _now() + seconds
    eps = 1e-12 * (1.0 + np.abs(W).sum() + np.abs(pi).sum())    # rounding of the sums
    status = np.zeros(n, dtype=np.int8)      # 0 candidate, 1 in, 2 out (branch), 3 out (dropped)
    to_in = np.zeros(n)
    fixed = np.empty(n * (n + 1), dtype=np.int64)
    fix_start = np.zeros(n + 2, dtype=np.int64)
    branch = np.empty(n + 1, dtype=np.int64)
    state = np.zeros(n + 1, dtype=np.int8)
    node_ub = np.zeros(n + 1)
    members = np.empty(n, dtype=np.int64)
    best = floor
    best_set = np.empty(0, dtype=np.int64)
    value = 0.0
    n_in = 0
    n_fixed = 0
    d = 0
    enter = True
    nodes = 0
    while d >= 0:
        if enter:
            nodes += 1
            if nodes % _CLOCK_NODES == 0 and _now() >= t_end:
                ub = best
                for q in range(d):
                    if node_ub[q] > ub:
                        ub = node_ub[q]
                return best, best_set, ub + eps, nodes, False
            if n_in >= 1 and value > best:
                best = value
                best_set = np.sort(members[:n_in])
            fix_start[d] = n_fixed
            bound, pick = value, -1
            if n_in < size:
                bound, pick, n_fixed = _node_bound(W, nb, pi, size, status, to_in, value, n_in, fixed, n_fixed)
            if bound <= best + eps or pick < 0:
                for q in range(fix_start[d], n_fixed):
                    status[fixed[q]] = 0
                n_fixed = fix_start[d]
                d -= 1
                enter = False
                continue
            node_ub[d] = bound
            branch[d] = pick
            state[d] = 1                     # in first
            status[pick] = 1
            value += to_in[pick] - pi[pick]
            for j in range(n):
                to_in[j] += W[pick, j]
            members[n_in] = pick
            n_in += 1
            d += 1
            continue
        v = branch[d]
        if state[d] == 1:                    # back from "in": now "out"
            n_in -= 1
            for j in range(n):
                to_in[j] -= W[v, j]
            value -= to_in[v] - pi[v]
            status[v] = 2
            state[d] = 2
            if node_ub[d] > best + eps:
                d += 1
                enter = True
                continue
        status[v] = 0                        # both done: leave the node
        for q in range(fix_start[d], n_fixed):
            status[fixed[q]] = 0
        n_fixed = fix_start[d]
        d -= 1
    return best, best_set, best + eps, nodes, True


def solve(data: GroupData, *, time_limit: float) -> GroupResult:
    """Column generation with heuristic and exact pricing, then the restricted master as an integer program,
    within ``time_limit`` seconds (the module docstring). The bound is the best Lagrangian bound of an exact
    pricing (infinite if none ran); ``status`` is ``optimal`` when it meets the best partition."""
    import highspy

    from topoplan.formulations.backends.highs import stdout_silenced

    deadline = time.perf_counter() + float(time_limit)
    W, Wf, n, size, k, best_group_of, best, total = unpack(data)
    start = best_group_of.copy()
    nb = neighbours(Wf)
    tol = 1e-9 * total              # a heuristic column must gain this much (no column back for rounding)
    rounding = 1e-11 * total        # above the float sums' error: the bound, rounded down to an integer, stays one
    # the exact pricing looks for columns above mu + slack: it prunes the many of reduced cost about 0 (to the
    # interior point's tolerance) sooner, and the bound it leaves, k slack, is below a unit of the integer weights
    slack = 0.1 / k
    # -- data -> model: the master over the groups found so far
    with stdout_silenced():            # HiGHS prints its banner from the constructor
        h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("solver", "ipm")
    h.setOptionValue("run_crossover", "off")
    inf = highspy.kHighsInf
    none = np.empty(0, dtype=np.int32)
    h.addRows(n, np.ones(n), np.ones(n), 0, none, none, np.empty(0))
    h.addRow(-inf, float(k), 0, none, np.empty(0))
    h.changeObjectiveSense(highspy.ObjSense.kMaximize)
    columns: list[np.ndarray] = []
    seen: set[bytes] = set()

    def add(members) -> bool:
        members = np.sort(np.asarray(members, dtype=np.int64))
        key = members.tobytes()
        if key in seen:
            return False
        seen.add(key)
        columns.append(members)
        idx = np.append(members, n).astype(np.int32)
        h.addCol(float(np.triu(W[np.ix_(members, members)], 1).sum()), 0.0, inf, len(idx), idx, np.ones(len(idx)))
        return True

    # (no upper bound on the columns: x <= 1 follows from the rows, and a bound's own duals would be missing
    # from the rows' duals, which then bound nothing)
    for g in np.unique(start):
        add(np.flatnonzero(start == g))
    for r in range(n):
        add([r])
    # -- column generation
    bound, rounds, exact_runs, converged, stalled, failed = math.inf, 0, 0, False, False, ""
    while _clock() < deadline:
        rounds += 1
        h.setOptionValue("time_limit", max(0.01, deadline - time.perf_counter()))
        h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            failed = f" (the master LP ended {h.modelStatusToString(h.getModelStatus())})"
            break
        sol = h.getSolution()
        dual = np.asarray(sol.row_dual)
        pi, mu = dual[:n].copy(), max(0.0, float(dual[n]))
        used = np.flatnonzero(np.asarray(sol.col_value) > 1e-6)
        seeds = np.full((len(used), size), -1, dtype=np.int64)
        for i, j in enumerate(used):
            seeds[i, :len(columns[j])] = columns[j]
        cols, _ = greedy_columns(Wf, pi, size, mu + tol, seeds)
        added = sum(add(c[c >= 0]) for c in cols)
        if added:
            continue
        # the exact pricing: half of what is left at most (when it cannot finish, the caller's other bounds
        # get the rest)
        exact_runs += 1
        value, members, ub, _, done = best_group(Wf, nb, pi, size, mu + slack,
                                                  max(0.0, _EXACT_SHARE * (deadline - time.perf_counter())))
        bound = min(bound, float(pi.sum()) + k * mu + k * max(0.0, ub - mu))
        if len(members) and add(members):
            continue
        converged, stalled = done, not done
        break
    if converged and best < math.floor(bound + rounding) <= best + _POLISH_GAP * max(1.0, best) and _clock() < deadline:
        # the interior point's duals are optimal to its tolerance only (MapLib AMG: 2.7 units of 5.2e8 above
        # the relaxation); the optimal duals nearest them, on the simplex, and one more exact pricing there
        # bound by the relaxation's value itself
        near = _nearest_optimal_duals(h, columns, n, k, pi, mu, highspy)
        if near is not None:
            pi, mu = near
            exact_runs += 1
            _, _, ub, _, _ = best_group(Wf, nb, pi, size, mu + slack, max(0.0, deadline - time.perf_counter()))
            bound = min(bound, float(pi.sum()) + k * mu + k * max(0.0, ub - mu))
    message = (f"column generation (priced): {rounds} rounds, {len(columns)} columns, {exact_runs} exact pricings"
               + (", converged" if converged else ", the exact pricing stopped by the time limit" if stalled
                  else failed or " (stopped by the time limit)"))
    bound = math.floor(bound + rounding) if math.isfinite(bound) else math.inf
    # -- the restricted master as an integer program: a better partition from the columns found
    left = deadline - time.perf_counter()
    if best < bound and left > 0 and not math.isinf(_clock()):
        m = len(columns)
        h.setOptionValue("solver", "choose")
        h.setOptionValue("time_limit", max(0.01, _PRIMAL_SHARE * left))
        h.changeColsIntegrality(m, np.arange(m, dtype=np.int32), np.full(m, highspy.HighsVarType.kInteger))
        h.run()
        x = np.asarray(h.getSolution().col_value)
        if h.getInfo().primal_solution_status == 2 and len(x) == m:
            group = np.full(n, -1, dtype=np.int64)
            for i, j in enumerate(np.flatnonzero(x > 0.5)):
                group[columns[j]] = i
            if (group >= 0).all() and len(np.unique(group)) <= k and np.bincount(group).max() <= size:
                inside = inside_weight(W, group)
                if inside > best:
                    best_group_of, best = group, inside
                    message += f"; the columns combine into a better partition ({inside:.6g})"
    if best >= bound:
        return GroupResult("optimal", best_group_of, best, best, message, converged)
    return GroupResult("timeout", best_group_of, best, bound, message, converged)


def _nearest_optimal_duals(h, columns, n: int, k: int, pi: np.ndarray, mu: float, highspy):
    """Optimal duals of the master ``h`` (over ``columns``) nearest ``(pi, mu)`` in the 1-norm, on the
    simplex: ``sum pi + k mu`` at the master's optimum and every column's reduced cost at most 0; None if
    the LP does not solve."""
    h.setOptionValue("solver", "simplex")
    h.run()
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return None
    z = float(h.getInfo().objective_function_value)
    inf = highspy.kHighsInf
    d = highspy.Highs()
    d.setOptionValue("output_flag", False)
    # variables: pi (n, free), mu >= 0, then the distances t (n + 1) >= |(pi, mu) - start|
    m = n + 1
    d.addVars(2 * m, np.concatenate([np.full(n, -inf), [0.0], np.zeros(m)]), np.full(2 * m, inf))
    d.changeColsCost(2 * m, np.arange(2 * m, dtype=np.int32), np.concatenate([np.zeros(m), np.ones(m)]))
    at = np.append(pi, mu)
    for i in range(m):
        idx = np.array([i, m + i], dtype=np.int32)
        d.addRow(-inf, at[i], 2, idx, np.array([1.0, -1.0]))     # x - t <= start
        d.addRow(at[i], inf, 2, idx, np.array([1.0, 1.0]))       # x + t >= start
    for members, cost in zip(columns, h.getLp().col_cost_):
        idx = np.append(members, n).astype(np.int32)
        d.addRow(float(cost), inf, len(idx), idx, np.ones(len(idx)))
    d.addRow(-inf, z, m, np.arange(m, dtype=np.int32), np.append(np.ones(n), float(k)))
    d.run()
    if d.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return None
    x = np.asarray(d.getSolution().col_value)
    return x[:n].copy(), max(0.0, float(x[n]))
