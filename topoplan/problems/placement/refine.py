"""Balanced refinement of a partition: pairwise Fiduccia-Mattheyses passes that keep every part's size exact.

A partitioner's output, made exact by :func:`~topoplan.problems.placement.metis.repair_balance`, is
a local optimum of neither the partitioner (it had a tolerance) nor the repair (it moved one vertex at
a time, greedily). :func:`refine` improves it without changing any part's size:

- every pair of parts ``(p, q)`` that shares cut edges, heaviest shared cut first, gets one FM pass
  over the vertices of ``p`` and ``q``: vertices move one at a time, best gain first (the gain of ``v``
  is its bytes to the other part minus its bytes to its own), each at most once, the two sizes staying
  within one vertex of their targets (a move from the larger side when they are off by one, else from
  the side with the better gain); moves with negative gain are allowed (hill climbing), and the pass
  keeps the prefix of moves with the largest total gain among those that end with both sizes exact;
- a pass stops after ``max(25, m / 4)`` moves without a new best prefix (``m`` vertices in the pair);
- rounds over all pairs repeat until a round gains less than 0.1% of the cut, at most ``rounds``.

The passes run compiled (Numba, cached on disk) in time near-linear in the edges of the pairs'
vertices: no dense vertex x part or part x part array. The cut never grows.

Examples
--------
>>> import scipy.sparse as sp
>>> W = sp.csr_matrix(np.array([[0, 9, 1, 0], [9, 0, 0, 1], [1, 0, 0, 9], [0, 1, 9, 0]], float))
>>> part = np.array([0, 1, 0, 1])                # cuts the two heavy edges: 18
>>> out = refine(W, part, [2, 2])
>>> out.tolist(), cut_weight(W, out)
([1, 1, 0, 0], 2.0)
"""

from __future__ import annotations

import sys

import numpy as np
import scipy.sparse as sp

from topoplan.core import deadline
from topoplan.core.kernels import interpreted, kernel

__all__ = ["repair", "refine", "cut_weight", "for_graph", "runs_interpreted", "DEFAULT_ROUNDS"]

DEFAULT_ROUNDS = 8
#: A pass stops after ``max(PASS_MIN_MOVES, PASS_FRACTION x vertices of the pair)`` moves without a new best.
PASS_MIN_MOVES = 25
PASS_FRACTION = 0.25
#: Rounds stop when one gains less than this fraction of the cut. On 16,384 ranks of random traffic in 512
#: parts a round gains ~0.1% and costs seconds; on geometric graphs the first round gains most.
ROUND_MIN_GAIN = 1e-3
#: Graphs of at most this many vertices and stored entries are refined by the kernels' Python originals while
#: the process has not loaded the compiled ones (:func:`for_graph`). Measured (CPU s of ``place -m metis``'s
#: partitioning, same cuts): MapLib's 64-rank matrices 0.06-0.33 interpreted against 0.56-0.69 compiled from
#: Numba's cache, 128 ranks of random traffic 0.42-0.49 against 0.68, each compiled run also importing Numba
#: (0.3-0.6 s); 256 ranks of random traffic 2.1 against 0.83, hence the bound.
INTERPRETED_MAX_VERTICES = 128
INTERPRETED_MAX_ENTRIES = 4096


def runs_interpreted(W: sp.csr_matrix) -> bool:
    """Whether :func:`for_graph` gives ``W`` the interpreted functions: a small graph
    (:data:`INTERPRETED_MAX_VERTICES`, :data:`INTERPRETED_MAX_ENTRIES`) in a process without the compiled kernels.

    Examples
    --------
    >>> runs_interpreted(sp.csr_matrix((1000, 1000)))
    False
    """
    return W.shape[0] <= INTERPRETED_MAX_VERTICES and W.nnz <= INTERPRETED_MAX_ENTRIES \
        and not deadline.kernel_loaded(_refine)


def for_graph(W: sp.csr_matrix):
    """This module's functions to refine ``W`` with: compiled (Numba), or, for a small graph in a process that has
    not loaded the compiled kernels (:func:`runs_interpreted`), run by the interpreter
    (:func:`topoplan.core.kernels.interpreted`). Both give the same parts.

    Examples
    --------
    >>> W = sp.csr_matrix(np.array([[0, 9, 1, 0], [9, 0, 0, 1], [1, 0, 0, 9], [0, 1, 9, 0]], float))
    >>> for_graph(W).refine(W, np.array([0, 1, 0, 1]), [2, 2]).tolist() == refine(W, np.array([0, 1, 0, 1]), [2, 2]).tolist()
    True
    """
    module = sys.modules[__name__]
    return interpreted(module) if runs_interpreted(W) else module


def cut_weight(W: sp.csr_matrix, part) -> float:
    """Total weight of the edges whose ends are in different parts (each undirected edge once).

    Parameters
    ----------
    W : scipy.sparse.csr_matrix
        Symmetric graph.
    part : array_like of int
        Part of every vertex.

    Returns
    -------
    float

    Examples
    --------
    >>> W = sp.csr_matrix(np.array([[0, 2, 0], [2, 0, 3], [0, 3, 0]], float))
    >>> cut_weight(W, [0, 0, 1])
    3.0
    """
    part = np.asarray(part, dtype=np.int64)
    owner = np.repeat(np.arange(W.shape[0]), np.diff(W.indptr))
    return float(W.data[part[owner] != part[W.indices]].sum()) / 2.0


# -- the compiled pass ----------------------------------------------------------------------------------

@kernel(cache=True)
def _push(hk, hv, hs, size, key, val, stamp):
    i = size
    hk[i], hv[i], hs[i] = key, val, stamp
    while i > 0:
        up = (i - 1) // 2
        if hk[up] > hk[i] or (hk[up] == hk[i] and hv[up] < hv[i]):
            break
        hk[up], hk[i] = hk[i], hk[up]
        hv[up], hv[i] = hv[i], hv[up]
        hs[up], hs[i] = hs[i], hs[up]
        i = up
    return size + 1


@kernel(cache=True)
def _room(hk, hv, hs, size):
    """The heap's arrays with room for one more entry (doubled when full)."""
    if size + 1 > len(hk):
        hk = np.concatenate((hk, np.empty(len(hk), np.float64)))
        hv = np.concatenate((hv, np.empty(len(hv), np.int64)))
        hs = np.concatenate((hs, np.empty(len(hs), np.int64)))
    return hk, hv, hs


@kernel(cache=True)
def _pop(hk, hv, hs, size):
    size -= 1
    hk[0], hv[0], hs[0] = hk[size], hv[size], hs[size]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= size:
            break
        if c + 1 < size and (hk[c + 1] > hk[c] or (hk[c + 1] == hk[c] and hv[c + 1] < hv[c])):
            c += 1
        if hk[i] > hk[c] or (hk[i] == hk[c] and hv[i] < hv[c]):
            break
        hk[c], hk[i] = hk[i], hk[c]
        hv[c], hv[i] = hv[i], hv[c]
        hs[c], hs[i] = hs[i], hs[c]
        i = c
    return size


@kernel(cache=True)
def _top(hk, hv, hs, size, stamp, locked):
    """Drop stale entries; returns the heap's new size (the top is valid when size > 0)."""
    while size > 0 and (locked[hv[0]] or hs[0] != stamp[hv[0]]):
        size = _pop(hk, hv, hs, size)
    return size


@kernel(cache=True)
def _pair_pass(indptr, indices, data, part, members, p, q, loc, gain, stamp, locked, moved_list, min_moves,
               fraction):
    """One FM pass between parts p and q over ``members`` (their vertices); returns the gain kept."""
    m = len(members)
    cap = m
    for i in range(m):
        v = members[i]
        loc[v] = i
        cap += indptr[v + 1] - indptr[v]
    # gains: bytes to the other part minus bytes to the own part
    for i in range(m):
        v = members[i]
        own = part[v]
        other = q if own == p else p
        g = 0.0
        for j in range(indptr[v], indptr[v + 1]):
            pu = part[indices[j]]
            if pu == other:
                g += data[j]
            elif pu == own:
                g -= data[j]
        gain[i] = g
        stamp[i] = 0
        locked[i] = False
    hk = np.empty((2, cap), np.float64)
    hv = np.empty((2, cap), np.int64)
    hs = np.empty((2, cap), np.int64)
    sizes = np.zeros(2, np.int64)
    for i in range(m):
        side = 0 if part[members[i]] == p else 1
        sizes[side] = _push(hk[side], hv[side], hs[side], sizes[side], gain[i], i, 0)
    diff = 0            # vertices in p minus its target
    total = 0.0
    best = 0.0
    best_at = 0
    n_moved = 0
    limit = max(min_moves, int(m * fraction))
    while n_moved - best_at < limit:
        sizes[0] = _top(hk[0], hv[0], hs[0], sizes[0], stamp, locked)
        sizes[1] = _top(hk[1], hv[1], hs[1], sizes[1], stamp, locked)
        if diff > 0:
            side = 0
        elif diff < 0:
            side = 1
        elif sizes[0] == 0:
            side = 1
        elif sizes[1] == 0:
            side = 0
        else:
            side = 0 if hk[0, 0] >= hk[1, 0] else 1
        if sizes[side] == 0:
            break
        i = hv[side, 0]
        sizes[side] = _pop(hk[side], hv[side], hs[side], sizes[side])
        v = members[i]
        src = p if side == 0 else q
        dst = q if side == 0 else p
        total += gain[i]
        part[v] = dst
        locked[i] = True
        moved_list[n_moved] = i
        n_moved += 1
        diff += -1 if side == 0 else 1
        for j in range(indptr[v], indptr[v + 1]):
            u = indices[j]
            pu = part[u]
            if pu != p and pu != q:
                continue
            k = loc[u]
            if k < 0 or k >= m or members[k] != u or locked[k]:
                continue
            # u in src gains 2w towards dst; u in dst loses 2w
            gain[k] += 2.0 * data[j] if pu == src else -2.0 * data[j]
            stamp[k] += 1
            s2 = 0 if pu == p else 1
            sizes[s2] = _push(hk[s2], hv[s2], hs[s2], sizes[s2], gain[k], k, stamp[k])
        if diff == 0 and total > best + 1e-12 * (abs(best) + 1.0):
            best = total
            best_at = n_moved
    # undo the moves after the best prefix
    for t in range(n_moved - 1, best_at - 1, -1):
        v = members[moved_list[t]]
        part[v] = p if part[v] == q else q
    for i in range(m):
        loc[members[i]] = -1
    return best


@kernel(cache=True)
def _refine(indptr, indices, data, part, k, pair_p, pair_q, order, starts, min_moves, fraction):
    """FM passes over the given part pairs; ``order``/``starts`` list every part's vertices (kept current)."""
    n = len(part)
    loc = np.full(n, -1, np.int64)
    biggest = 0
    for p in range(k):
        biggest = max(biggest, starts[p + 1] - starts[p])
    gain = np.empty(2 * biggest, np.float64)
    stamp = np.empty(2 * biggest, np.int64)
    locked = np.empty(2 * biggest, np.bool_)
    moved_list = np.empty(2 * biggest, np.int64)
    total = 0.0
    for t in range(len(pair_p)):
        p, q = pair_p[t], pair_q[t]
        a0, a1, b0, b1 = starts[p], starts[p + 1], starts[q], starts[q + 1]
        members = np.empty(a1 - a0 + b1 - b0, np.int64)
        members[:a1 - a0] = order[a0:a1]
        members[a1 - a0:] = order[b0:b1]
        g = _pair_pass(indptr, indices, data, part, members, p, q, loc, gain, stamp, locked, moved_list,
                       min_moves, fraction)
        if g > 0:
            total += g
            # the sizes are exact again: rewrite both lists in place
            ia, ib = a0, b0
            for v in members:
                if part[v] == p:
                    order[ia] = v
                    ia += 1
                else:
                    order[ib] = v
                    ib += 1
    return total


@kernel(cache=True)
def _best_move(r, indptr, indices, data, part, under, acc, under_next, under_head):
    """Best target of rank r among the under-full parts: (gain, part); ties: the lowest part."""
    p = part[r]
    for j in range(indptr[r], indptr[r + 1]):
        acc[part[indices[j]]] += data[j]
    own = acc[p]
    best, best_q = -np.inf, -1
    for j in range(indptr[r], indptr[r + 1]):
        q = part[indices[j]]
        if under[q]:
            g = acc[q] - own
            if g > best or (g == best and q < best_q):
                best, best_q = g, q
    # an under-full part r has no bytes to: gain -own (the first such part in the ordered list)
    if best < -own or (best == -own and best_q >= 0):
        q = under_head[0]
        while q >= 0:
            if acc[q] == 0.0:
                if -own > best or q < best_q:
                    best, best_q = -own, q
                break
            q = under_next[q]
    for j in range(indptr[r], indptr[r + 1]):
        acc[part[indices[j]]] = 0.0
    return best, best_q


@kernel(cache=True)
def _repair(indptr, indices, data, part, counts, targets):
    """Greedy exact balance: the move of largest gain first (ties: lowest rank, then lowest part)."""
    n, k = len(part), len(targets)
    over = counts > targets
    under = counts < targets
    excess = 0
    for p in range(k):
        if over[p]:
            excess += counts[p] - targets[p]
    # ordered list of the under-full parts (they only ever leave it)
    under_next = np.full(k, -1, np.int64)
    under_prev = np.full(k, -1, np.int64)
    under_head = np.full(1, -1, np.int64)
    last = -1
    for q in range(k):
        if under[q]:
            if last < 0:
                under_head[0] = q
            else:
                under_next[last] = q
            under_prev[q] = last
            last = q
    acc = np.zeros(k, np.float64)
    stamp = np.zeros(n, np.int64)
    cap = 1024
    for r in range(n):
        if over[part[r]]:
            cap += 1
    hk = np.empty(cap, np.float64)
    hv = np.empty(cap, np.int64)
    hs = np.empty(cap, np.int64)
    size = 0
    for r in range(n):
        if over[part[r]]:
            g, q = _best_move(r, indptr, indices, data, part, under, acc, under_next, under_head)
            size = _push(hk, hv, hs, size, g, r * k + q, 0)
    while excess > 0 and size > 0:
        g, val, st = hk[0], hv[0], hs[0]
        size = _pop(hk, hv, hs, size)
        r, q = val // k, val % k
        p = part[r]
        if st != stamp[r] or not over[p]:
            continue
        if not under[q]:
            stamp[r] += 1
            g, q = _best_move(r, indptr, indices, data, part, under, acc, under_next, under_head)
            hk, hv, hs = _room(hk, hv, hs, size)
            size = _push(hk, hv, hs, size, g, r * k + q, stamp[r])
            continue
        part[r] = q
        counts[p] -= 1
        counts[q] += 1
        excess -= 1
        if counts[p] == targets[p]:
            over[p] = False
        if counts[q] == targets[q]:
            under[q] = False
            a, b = under_prev[q], under_next[q]
            if a >= 0:
                under_next[a] = b
            else:
                under_head[0] = b
            if b >= 0:
                under_prev[b] = a
        for j in range(indptr[r], indptr[r + 1]):
            u = indices[j]
            if over[part[u]]:
                stamp[u] += 1
                g, q2 = _best_move(u, indptr, indices, data, part, under, acc, under_next, under_head)
                hk, hv, hs = _room(hk, hv, hs, size)
                size = _push(hk, hv, hs, size, g, u * k + q2, stamp[u])
    return excess


def repair(W: sp.csr_matrix, part, targets) -> np.ndarray:
    """Move vertices until part ``p`` holds exactly ``targets[p]``: each time the move that cuts least.

    The gain of moving ``r`` from an over-full part ``p`` to an under-full part ``q`` is its bytes to
    ``q`` minus its bytes to ``p``; the largest gain goes first (ties: the lowest vertex, then the
    lowest part). Compiled, with a lazy priority queue: memory ``O(vertices + parts)`` (no vertex x part
    array), time about ``O((over-full vertices + moves x degree) x degree x log)``.

    Parameters
    ----------
    W : scipy.sparse.csr_matrix
        Symmetric graph (bytes), no diagonal.
    part : array_like of int
        Part of every vertex (not changed).
    targets : sequence of int
        Vertices each part must hold (summing to the vertices).

    Returns
    -------
    numpy.ndarray
        The repaired parts.

    Examples
    --------
    >>> W = sp.csr_matrix(np.array([[0, 5, 1], [5, 0, 0], [1, 0, 0]], float))
    >>> repair(W, np.array([0, 0, 0]), [2, 1]).tolist()
    [0, 0, 1]
    """
    part = np.asarray(part, dtype=np.int64).copy()
    targets = np.asarray(targets, dtype=np.int64)
    counts = np.bincount(part, minlength=len(targets)).astype(np.int64)
    if len(counts) != len(targets) or counts.sum() != targets.sum():
        raise ValueError("targets must add up to the number of vertices")
    if (counts == targets).all():
        return part
    W = W.tocsr()
    left = _repair(W.indptr.astype(np.int64), W.indices.astype(np.int64), W.data.astype(np.float64), part,
                   counts, targets)
    if left:   # pragma: no cover - every over-full vertex always has a move
        raise RuntimeError("repair: parts left over-full")
    return part


def refine(W: sp.csr_matrix, part, targets, *, rounds: int = DEFAULT_ROUNDS) -> np.ndarray:
    """Improve a partition with exact part sizes by pairwise FM passes (see the module docstring).

    Parameters
    ----------
    W : scipy.sparse.csr_matrix
        Symmetric graph (bytes), no diagonal.
    part : array_like of int
        Part of every vertex; part ``p`` must hold exactly ``targets[p]`` vertices.
    targets : sequence of int
        The part sizes (kept).
    rounds : int, optional
        At most this many rounds over all pairs of adjacent parts.

    Returns
    -------
    numpy.ndarray
        The refined parts (a copy), with the same sizes and a cut no larger.

    Raises
    ------
    ValueError
        If ``part`` does not have the sizes ``targets``.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> ring = sp.csr_matrix(np.roll(np.eye(8), 1, axis=1) + np.roll(np.eye(8), -1, axis=1))
    >>> part = np.array([0, 1, 0, 1, 0, 1, 0, 1])   # every edge cut
    >>> out = refine(ring, part, [4, 4])
    >>> cut_weight(ring, part), cut_weight(ring, out), np.bincount(out).tolist()
    (8.0, 2.0, [4, 4])
    """
    part = np.asarray(part, dtype=np.int64).copy()
    targets = np.asarray(targets, dtype=np.int64)
    k = len(targets)
    if not np.array_equal(np.bincount(part, minlength=k), targets):
        raise ValueError("part does not have the target sizes")
    if k < 2 or W.nnz == 0:
        return part
    W = W.tocsr()
    indptr = W.indptr.astype(np.int64)
    indices = W.indices.astype(np.int64)
    data = W.data.astype(np.float64)
    start_cut = cut_weight(W, part)
    best = part.copy()
    for _ in range(max(0, int(rounds))):
        cut = cut_weight(W, part)
        owner = np.repeat(np.arange(len(part)), np.diff(indptr))
        a, b = part[owner], part[indices]
        sel = a < b
        if not sel.any():
            break
        key = a[sel] * k + b[sel]
        uniq, inv = np.unique(key, return_inverse=True)
        weight = np.bincount(inv.ravel(), weights=data[sel])
        o = np.lexsort((uniq, -weight))                  # heaviest shared cut first
        pair_p, pair_q = uniq[o] // k, uniq[o] % k
        order = np.argsort(part, kind="stable").astype(np.int64)
        starts = np.concatenate([[0], np.cumsum(targets)]).astype(np.int64)
        gained = _refine(indptr, indices, data, part, k, pair_p, pair_q, order, starts, PASS_MIN_MOVES,
                         PASS_FRACTION)
        if gained <= ROUND_MIN_GAIN * max(cut, 1.0):
            break
    if cut_weight(W, part) > start_cut:     # float round-off only; never worse than the input
        return best
    return part
