"""Maximum-weight matching on a general graph: Edmonds' blossom algorithm, primal-dual, compiled.

:func:`max_weight_matching` returns a matching of largest total weight (not of largest size) of a graph given
as edge arrays, and :func:`matching_weight` its weight. It is exact: the algorithm runs on integers (the
weights times the smallest power of two that makes them all integers, :func:`integer_weights`) and ends
with a dual solution that proves the matching optimal (:func:`check_optimum` verifies that certificate on
every edge).

The algorithm is the primal-dual one of Edmonds (1965) with the O(n^3) bookkeeping of Gabow (1976) and
Lawler (1976), as surveyed by Galil (1986, "Efficient algorithms for finding maximum matching in graphs",
ACM Computing Surveys 18(1)): stages grow alternating trees from every free vertex along tight edges,
shrink odd cycles into blossoms, change the duals by the largest step that keeps them feasible, and end
with an augmentation; a stage whose dual step brings the free vertices' duals to zero ends the algorithm.
A stage reads each edge a few times and keeps, per outer blossom, its least-slack edge to every other
outer blossom, so it costs O(m + n^2); there are at most n / 2 + 1 stages. It runs compiled (Numba, cached
on disk).

Dense graphs (more than ``DENSE_DEGREE`` edges per vertex) are solved by pricing: first on the
``CANDIDATES`` heaviest edges of every vertex; then the optimal duals of that sparse part are checked on
every edge of the graph, the edges whose slack is negative (they could improve the matching) join the
part, the most violated first and twice as many per vertex as in the round before, and it is solved
again. When no edge has negative slack the duals are feasible for the whole graph, so the part's matching
is optimal on it: the same certificate as a solve of the whole graph, at the cost of a few sparse solves
(the circuits' graph of 4,096 OCS nodes on random traffic has 5.3 M edges; its part ~35,000).

Until Numba has compiled it on a machine (a first compilation takes about a minute), small graphs run the
same functions by the Python interpreter instead (:func:`solve_cost_s` picks the cheaper way: interpreted,
up to ``INTERPRETED_MAX_N`` vertices, while its predicted time is below loading or compiling the kernels):
the same algorithm step for step, so the same matching, with no minute's wait for a 32-node graph. The
functions are written once, as Python; Numba compiles them the first time a solve runs compiled
(:func:`_compiled`), so a process whose matchings all run interpreted never imports Numba (0.4-0.5 s).

The circuits' ``matching`` method (:func:`topoplan.problems.circuits.heuristics.matching`) uses it on
graphs of the OCS nodes.

Examples
--------
>>> u, v, w = [0, 1, 2, 0], [1, 2, 3, 3], [5, 8, 5, 1]     # a path 0-1-2-3 (and a light edge 3-0)
>>> mate = max_weight_matching(4, u, v, w)
>>> mate.tolist(), matching_weight(mate, u, v, w)            # 0-1 + 2-3 (10) beats 1-2 (8)
([1, 0, 3, 2], 10.0)
"""

from __future__ import annotations

import sys
import threading
import types

import numpy as np

from topoplan.core import deadline
from topoplan.core.errors import TopoplanError

__all__ = ["max_weight_matching", "matching_weight", "integer_weights", "check_optimum", "solve_cost_s",
           "interpreted", "compile_kernels", "DENSE_DEGREE", "CANDIDATES", "INTERPRETED_MAX_N"]

#: Graphs with more edges than this many per vertex are solved by pricing a sparse part.
DENSE_DEGREE = 24
#: Edges per vertex in the first sparse part, and most edges per vertex that join it in a pricing round.
CANDIDATES = 12
#: Integer weights stay below this, so duals and slacks (sums of a few weights) fit in int64.
MAX_INT_WEIGHT = 2 ** 60
# labels of outer (S) and inner (T) blossoms in the alternating trees
_FREE, _S, _T = 0, 1, 2

# What a solve costs, in CPU seconds (topoplan.core.deadline.scaled makes them wall seconds under load). Compiled:
# the algorithm about 0.25 s on the circuits' graph of 256 OCS nodes (random traffic) growing as n^2.3, kept at
# twice that; the first call in a process loads the compiled functions from Numba's cache (0.6 s measured,
# kept at 1 s), or compiles them when the cache does not have them (57 CPU s measured; 206 s of wall time at
# a load of 9 on 2 cores). Interpreted: on complete graphs with random weights (the worst case: dense, solved by
# pricing) 0.09 s at 32 vertices, 0.4 s at 64, 1.1 s at 128, 5 s at 256 (load 3), about n^2.2.
COMPILED_S_AT_256 = 0.5
COMPILED_EXPONENT = 2.3
#: Importing Numba, in a process that has not: 0.8-0.9 s measured on a quiet machine.
NUMBA_IMPORT_S = 1.0
LOAD_S = 1.0
COMPILE_S = 60.0
INTERPRETED_S_AT_128 = 1.2
INTERPRETED_EXPONENT = 2.2
#: Graphs of more vertices than this always run compiled (compiling once, when Numba's cache lacks it).
INTERPRETED_MAX_N = 256


def integer_weights(w) -> tuple[np.ndarray, float]:
    """The weights as exact integers: ``(w * 2**e as int64, 2**e)`` with the smallest ``e >= 0`` that makes
    every weight an integer (float64 weights are dyadic), as long as the largest stays below 2^60.

    Weights too fine for that (fractions spanning more than about 60 binary orders of magnitude) are
    rounded down to multiples of 2^-60 of the largest; only then can the matching be short of the optimum,
    by at most its number of edges times that unit.

    Parameters
    ----------
    w : array_like of float
        Non-negative, finite weights.

    Returns
    -------
    (numpy.ndarray of int64, float)
        The integer weights and the scale (integer weight = weight x scale).

    Examples
    --------
    >>> integer_weights([1.5, 2.25, 4.0])
    (array([ 6,  9, 16]), 4.0)
    """
    w = np.asarray(w, dtype=np.float64)
    if len(w) == 0 or not float(w.max()) > 0:
        return np.zeros(len(w), dtype=np.int64), 1.0
    top = float(w.max())
    # the binary exponent of each weight's lowest set bit: weight = (53-bit integer) x 2^(exp - 53)
    mant, exp = np.frexp(w[w > 0])
    whole = np.ldexp(mant, 53).astype(np.int64)
    low = exp - 53 + np.log2(whole & -whole).astype(np.int64)
    e = max(0, -int(low.min()))
    if np.ldexp(top, e) < MAX_INT_WEIGHT:
        return np.ldexp(w, e).astype(np.int64), float(2.0 ** e)
    e = 60 - int(np.frexp(top)[1])           # rounded: the largest weight just below 2^60
    return np.floor(np.ldexp(w, e)).astype(np.int64), float(2.0 ** e)


def _edges(n: int, u, v, w):
    """Checked edge arrays with the edges of weight <= 0 dropped (they could not add weight)."""
    u = np.asarray(u, dtype=np.int64).ravel()
    v = np.asarray(v, dtype=np.int64).ravel()
    w = np.asarray(w, dtype=np.float64).ravel()
    if not (len(u) == len(v) == len(w)):
        raise TopoplanError(f"matching: u, v and w differ in length ({len(u)}, {len(v)}, {len(w)})")
    if len(u) and (min(u.min(), v.min()) < 0 or max(u.max(), v.max()) >= n):
        raise TopoplanError(f"matching: an edge end is outside the vertices 0..{n - 1}")
    if (u == v).any():
        raise TopoplanError(f"matching: loop at vertex {int(u[u == v][0])}")
    if not np.isfinite(w).all():
        raise TopoplanError("matching: weights must be finite")
    keep = w > 0
    return u[keep], v[keep], w[keep]


def max_weight_matching(n: int, u, v, w) -> np.ndarray:
    """A maximum-weight matching of the graph on vertices ``0..n-1`` with edges ``(u[k], v[k])`` of weight
    ``w[k]``: the set of disjoint edges of largest total weight (not necessarily of largest size).

    Parameters
    ----------
    n : int
        Number of vertices.
    u, v : array_like of int
        Ends of every edge (``u[k] != v[k]``; one edge per vertex pair).
    w : array_like of float
        Weights; edges of weight <= 0 are never matched (they could not add weight).

    Returns
    -------
    numpy.ndarray of int64
        ``mate[x]``: the vertex matched to ``x``, or -1. Where several matchings have the largest weight,
        the one returned depends on the edges' order (the same input gives the same matching).

    Raises
    ------
    TopoplanError
        On vertices outside ``0..n-1``, a loop, arrays of different lengths or weights that are not finite.

    Examples
    --------
    >>> # a triangle of weight 4 and a pendant edge 2-3 of weight 3: 0-1 + 2-3 (7) beats any single 4
    >>> max_weight_matching(4, [0, 1, 0, 2], [1, 2, 2, 3], [4, 4, 4, 3]).tolist()
    [1, 0, 3, 2]
    """
    u, v, w = _edges(n, u, v, w)
    if len(u) == 0:
        return np.full(n, -1, dtype=np.int64)
    return _solve_priced(int(n), u, v, integer_weights(w)[0])[0]


def compile_kernels() -> None:
    """Compile the matching's functions now (or load them from Numba's cache), whatever :func:`interpreted`
    would pick: ``python -m topoplan.warmup matching`` calls it so that no later call pays for it.

    Examples
    --------
    >>> compile_kernels()
    >>> solve = _compiled()["_solve"]
    >>> len(solve.signatures) > 0 or not hasattr(solve, "signatures")      # compiled (or Numba is disabled)
    True
    """
    u, v = np.triu_indices(60, 1)          # a complete graph: dense enough for the priced solve too
    _compiled()["_priced"](60, u.astype(np.int64), v.astype(np.int64), (u * v) % 7 + 1)


def interpreted(n: int) -> bool:
    """Whether a solve on ``n`` vertices runs interpreted: up to :data:`INTERPRETED_MAX_N` vertices, when
    that is predicted faster than loading (in a process that has not loaded them, importing Numba first when
    it has not) or compiling (on a machine whose Numba cache lacks them) the compiled functions. Either way
    gives the same matching.

    Examples
    --------
    >>> interpreted(INTERPRETED_MAX_N + 1)         # large graphs compile (once a machine)
    False
    """
    if n > INTERPRETED_MAX_N:
        return False
    if not _COMPILED:   # nothing compiled is loaded: a compiled solve costs at least importing Numba and loading
        floor_s = (0.0 if "numba" in sys.modules else NUMBA_IMPORT_S) + LOAD_S + _algorithm_s(n)
        if _interpreted_s(n) < floor_s:
            return True     # so no need to import Numba to read its cache
    return _interpreted_s(n) < _compiled_s(n)


def solve_cost_s(n: int) -> float:
    """Predicted CPU seconds of :func:`max_weight_matching` on a graph of ``n`` vertices (the circuits'
    graphs: up to all pairs of OCS nodes), the way :func:`interpreted` picks: interpreted, or compiled with
    the loading or compilation of its functions when this process or this machine lacks them.

    Examples
    --------
    >>> solve_cost_s(16) < 0.05, solve_cost_s(512) > solve_cost_s(256)
    (True, True)
    """
    return _interpreted_s(n) if interpreted(n) else _compiled_s(n)


def _interpreted_s(n: int) -> float:
    return INTERPRETED_S_AT_128 * (n / 128) ** INTERPRETED_EXPONENT


def _algorithm_s(n: int) -> float:
    return COMPILED_S_AT_256 * (n / 256) ** COMPILED_EXPONENT


def _compiled_s(n: int) -> float:
    first_s = 0.0 if "numba" in sys.modules else NUMBA_IMPORT_S
    solve = _compiled()["_solve"]
    if not deadline.kernel_ready(solve):       # neither in this process nor in Numba's cache
        first_s += COMPILE_S
    elif not deadline.kernel_loaded(solve):        # cached, not loaded yet
        first_s += LOAD_S
    return first_s + _algorithm_s(n)


def matching_weight(mate, u, v, w) -> float:
    """Total weight of the edges ``(u[k], v[k])`` that ``mate`` matches.

    Examples
    --------
    >>> matching_weight(np.array([1, 0, -1]), [0, 1], [1, 2], [2.5, 9.0])
    2.5
    """
    mate = np.asarray(mate)
    u, v, w = np.asarray(u, dtype=np.int64), np.asarray(v, dtype=np.int64), np.asarray(w, dtype=np.float64)
    return float(w[mate[u] == v].sum()) if len(u) else 0.0


def check_optimum(n: int, u, v, w) -> bool:
    """Solve, then verify the dual certificate edge by edge: every slack ``y_u + y_v + sum(z_B: B holds
    both ends) - w`` is >= 0 and 0 on matched edges, duals are >= 0, free vertices have dual 0 and every
    blossom of positive dual is full. ``True`` proves the matching optimal (linear-programming duality).

    A check of the solver for tests (plain Python over every edge; small graphs).

    Examples
    --------
    >>> check_optimum(5, [0, 1, 2, 3, 4, 0], [1, 2, 3, 4, 0, 2], [6, 6, 6, 6, 6, 1])  # a 5-cycle blossom
    True
    """
    u, v, w = _edges(n, u, v, w)
    wi = integer_weights(w)[0]
    mate, dual, zb, parent, _ = _solve_priced(int(n), u, v, wi)
    if (dual < 0).any() or (zb < 0).any() or ((mate < 0) & (dual != 0)).any():
        return False

    def chain(x):                   # the blossoms holding vertex x, innermost first
        out = []
        while parent[x] >= 0:
            x = int(parent[x])
            out.append(x)
        return out

    members: dict[int, list[int]] = {}
    for x in range(n):
        for b in chain(x):
            members.setdefault(b, []).append(x)
    for b, vs in members.items():
        inside = set(vs)
        if zb[b] > 0 and sum(1 for x in vs if mate[x] in inside) != len(vs) - 1:
            return False
    for k in range(len(u)):
        a, b = int(u[k]), int(v[k])
        common = set(chain(a)) & set(chain(b))
        slack = int(dual[a]) + int(dual[b]) - 2 * int(wi[k]) + 2 * sum(int(zb[c]) for c in common)
        if slack < 0 or (mate[a] == b and slack != 0):
            return False
    return True


def _solve_priced(n: int, u, v, wi):
    """``_solve`` on the whole graph, or, on a dense one, on a sparse part grown by pricing (the module
    docstring), compiled or interpreted (:func:`interpreted`). Returns ``(mate, dual, zb, parent, rounds)``:
    the duals prove ``mate`` optimal on the whole graph."""
    if interpreted(n):
        return _priced(n, u, v, wi)
    return _compiled()["_priced"](n, u, v, wi)


def _priced(n: int, u, v, wi):
    if len(u) <= DENSE_DEGREE * n:
        return (*_solve(n, u, v, wi), 0)
    keep = _heaviest(n, u, v, wi, CANDIDATES)
    rounds = 0
    while True:
        rounds += 1
        part = np.flatnonzero(keep)
        mate, dual, zb, parent = _solve(n, u[part], v[part], wi[part])
        slack = _slacks(n, u, v, wi, dual, zb, parent)
        bad = (slack < 0) & ~keep
        if not bad.any():
            return mate, dual, zb, parent, rounds
        # twice as many per vertex each round: a part that needs most edges gets them in a few rounds
        keep |= _most_violated(n, u, v, slack, bad, CANDIDATES << rounds)


# The algorithm's functions (``@_kernel`` below) are plain Python in this module, where the interpreter runs
# them (with a Python list for Numba's typed list). _compiled() builds, once a process, a copy of the module's
# namespace in which each of them, and _priced that drives them, is compiled by Numba (cached on disk) and calls
# the others' compiled versions.
_KERNELS: list[str] = []
_COMPILED: dict = {}
_COMPILING = threading.Lock()   # one namespace a process, whichever thread solves first
List = list


def _kernel(fn):
    """Mark ``fn`` as one of the functions :func:`_compiled` compiles; the module keeps the Python function."""
    _KERNELS.append(fn.__name__)
    return fn


def _compiled() -> dict:
    """This module's namespace with every kernel compiled by Numba (``njit(cache=True)``: loaded from Numba's
    cache, or compiled at its first call) and Numba's typed list. Importing Numba takes 0.4-0.5 s, so it is
    imported here, when a solve runs compiled (or its cost must read Numba's cache), not with the module."""
    with _COMPILING:
        if not _COMPILED:
            from numba import njit
            from numba.typed import List as TypedList

            ns = dict(globals())
            ns["List"] = TypedList
            for name in _KERNELS:
                py = globals()[name]
                ns[name] = njit(cache=True)(types.FunctionType(py.__code__, ns, name, py.__defaults__,
                                                               py.__closure__))
            ns["_priced"] = types.FunctionType(_priced.__code__, ns, "_priced")
            _COMPILED.update(ns)
    return _COMPILED


# -- the compiled algorithm -----------------------------------------------------------------------------
#
# Vertices are 0..n-1, blossoms n..2n-1 (at most n/2 exist at once; ids are reused). Duals are kept doubled
# so that they stay integers: the slack of edge k is dual[u] + dual[v] - 2 w[k] (plus twice the duals of the
# blossoms that hold both ends, which the algorithm never needs: it only reads edges between top-level
# blossoms). A dual step of delta lowers outer (S) vertex duals by delta, raises inner (T) ones, and raises
# outer blossom duals (zb) by delta and lowers inner ones.
#
# A blossom b is the cycle of its children childs[b-n] (odd length, child 0 holds the base); the edge between
# child i and child i+1 (mod length) has its ends ca[b-n][i] in child i and cb[b-n][i] in child i+1, and the
# edges 1-2, 3-4, ... of the cycle are matched.
#
# label[x] / lend[x] / lin[x] (top-level blossom or vertex x): S or T, the vertex outside x whose edge gave
# the label (-1 for a tree root) and the vertex inside x at that edge. A vertex inside an inner blossom that
# an outer vertex reaches by a tight edge gets label T and lend at vertex level too, which relabels the inner
# blossom's children when it is expanded.


@_kernel
def _heaviest(n, eu, ev, ew, k):
    """Mask of the edges among the ``k`` heaviest of either end (ties in the order of the edges)."""
    m = len(eu)
    aptr = np.zeros(n + 1, dtype=np.int64)
    for e in range(m):
        aptr[eu[e] + 1] += 1
        aptr[ev[e] + 1] += 1
    for x in range(n):
        aptr[x + 1] += aptr[x]
    aedge = np.empty(2 * m, dtype=np.int64)
    fill = aptr[:n].copy()
    for e in range(m):
        aedge[fill[eu[e]]] = e
        fill[eu[e]] += 1
        aedge[fill[ev[e]]] = e
        fill[ev[e]] += 1
    keep = np.zeros(m, dtype=np.bool_)
    for x in range(n):
        es = aedge[aptr[x]:aptr[x + 1]]
        if len(es) <= k:
            for e in es:
                keep[e] = True
            continue
        ws = ew[es]
        cut = -np.partition(-ws, k - 1)[k - 1]        # the k-th largest weight: all above it, then ties in order
        room = k
        for i in range(len(es)):
            if ws[i] > cut:
                keep[es[i]] = True
                room -= 1
        for i in range(len(es)):
            if room == 0:
                break
            if ws[i] == cut:
                keep[es[i]] = True
                room -= 1
    return keep


@_kernel
def _slacks(n, eu, ev, ew, dual, zb, parent):
    """The doubled slack of every edge under the duals of a solve (``dual``, and ``zb`` of the blossoms in
    ``parent``'s forest): ``dual[u] + dual[v] - 2 w + 2 sum(zb of the blossoms holding both ends)``."""
    m = len(eu)
    nb = 2 * n
    top = np.empty(n, dtype=np.int64)
    for x in range(n):
        t = x
        while parent[t] != -1:
            t = parent[t]
        top[x] = t
    mark = np.zeros(nb, dtype=np.bool_)
    out = np.empty(m, dtype=np.int64)
    for e in range(m):
        a = eu[e]
        b = ev[e]
        s = dual[a] + dual[b] - 2 * ew[e]
        if top[a] == top[b] and top[a] >= n:
            # blossoms holding both ends: mark a's ancestors, sum the marked ones among b's
            t = parent[a]
            while t != -1:
                mark[t] = True
                t = parent[t]
            t = parent[b]
            while t != -1:
                if mark[t]:
                    s += 2 * zb[t]
                t = parent[t]
            t = parent[a]
            while t != -1:
                mark[t] = False
                t = parent[t]
        out[e] = s
    return out


@_kernel
def _most_violated(n, eu, ev, slack, bad, k):
    """Mask of the violated edges (``bad``) that are among the ``k`` most violated of either end."""
    idx = np.flatnonzero(bad)
    order = idx[np.argsort(slack[idx], kind="mergesort")]
    cnt = np.zeros(n, dtype=np.int64)
    add = np.zeros(len(eu), dtype=np.bool_)
    for e in order:
        if cnt[eu[e]] < k or cnt[ev[e]] < k:
            add[e] = True
            cnt[eu[e]] += 1
            cnt[ev[e]] += 1
    return add


@_kernel
def _leaves(b, n, childs, stack, out):
    """Write the vertices of blossom (or vertex) ``b`` into ``out``; returns how many."""
    if b < n:
        out[0] = b
        return 1
    cnt = 0
    top = 0
    stack[0] = b
    top = 1
    while top > 0:
        top -= 1
        x = stack[top]
        if x < n:
            out[cnt] = x
            cnt += 1
        else:
            ch = childs[x - n]
            for i in range(len(ch)):
                stack[top] = ch[i]
                top += 1
    return cnt


@_kernel
def _push(queue, qn, x):
    if qn >= len(queue):
        bigger = np.empty(2 * len(queue), dtype=np.int64)
        bigger[:qn] = queue[:qn]
        queue = bigger
    queue[qn] = x
    return queue, qn + 1


@_kernel
def _solve(n, eu, ev, ew):
    m = len(eu)
    nb = 2 * n
    # adjacency: the edges of every vertex
    aptr = np.zeros(n + 1, dtype=np.int64)
    for k in range(m):
        aptr[eu[k] + 1] += 1
        aptr[ev[k] + 1] += 1
    for x in range(n):
        aptr[x + 1] += aptr[x]
    aedge = np.empty(2 * m, dtype=np.int64)      # edge id, other end and weight of every adjacency entry:
    anbr = np.empty(2 * m, dtype=np.int64)       # a vertex's scan reads them in sequence
    aw = np.empty(2 * m, dtype=np.int64)
    fill = aptr[:n].copy()
    for k in range(m):
        a = eu[k]
        b = ev[k]
        aedge[fill[a]] = k
        anbr[fill[a]] = b
        aw[fill[a]] = ew[k]
        fill[a] += 1
        aedge[fill[b]] = k
        anbr[fill[b]] = a
        aw[fill[b]] = ew[k]
        fill[b] += 1
    maxw = 0
    for k in range(m):
        if ew[k] > maxw:
            maxw = ew[k]

    mate = np.full(n, -1, dtype=np.int64)
    label = np.zeros(nb, dtype=np.int8)
    lend = np.full(nb, -1, dtype=np.int64)
    lin = np.full(nb, -1, dtype=np.int64)
    inb = np.arange(n)
    parent = np.full(nb, -1, dtype=np.int64)
    base = np.full(nb, -1, dtype=np.int64)
    base[:n] = np.arange(n)
    dual = np.full(n, maxw, dtype=np.int64)
    zb = np.zeros(nb, dtype=np.int64)
    best = np.full(nb, -1, dtype=np.int64)
    empty = np.zeros(0, dtype=np.int64)
    childs = List()
    ca = List()
    cb = List()
    blist = List()
    for _ in range(n):
        childs.append(empty)
        ca.append(empty)
        cb.append(empty)
        blist.append(empty)
    has_list = np.zeros(nb, dtype=np.bool_)
    unused = np.arange(nb - 1, n - 1, -1).astype(np.int64)    # blossom ids not in use: a stack
    nfree = np.array([n], dtype=np.int64)
    queue = np.empty(max(16, 2 * n), dtype=np.int64)
    qn = 0
    stack = np.empty(nb + 1, dtype=np.int64)
    buf = np.empty(n, dtype=np.int64)
    buf2 = np.empty(n, dtype=np.int64)
    bestto = np.full(nb, -1, dtype=np.int64)
    touched = np.empty(nb, dtype=np.int64)
    mark = np.zeros(nb, dtype=np.bool_)
    marked = np.empty(nb, dtype=np.int64)
    tasks_b = np.empty(nb + 1, dtype=np.int64)
    tasks_v = np.empty(nb + 1, dtype=np.int64)

    for _stage in range(n + 1):
        # -- a new stage: no labels, every free vertex the root of a tree
        label[:] = 0
        best[:] = -1
        for b in range(n, nb):
            if has_list[b]:
                has_list[b] = False
                blist[b - n] = empty
        qn = 0
        for x in range(n):
            if mate[x] == -1 and label[inb[x]] == _FREE:
                # label the top-level blossom of x outer (a root): every vertex in it goes on the queue
                bx = _set_label(x, _S, -1, label, lend, lin, best, inb)
                cnt = _leaves(bx, n, childs, stack, buf)
                for i in range(cnt):
                    queue, qn = _push(queue, qn, buf[i])
        augmented = False
        finished = False
        while True:
            # -- grow the trees along tight edges
            while qn > 0 and not augmented:
                qn -= 1
                x = queue[qn]
                dx = dual[x]
                for ai in range(aptr[x], aptr[x + 1]):
                    y = anbr[ai]
                    bx = inb[x]
                    by = inb[y]
                    if bx == by:
                        continue
                    # slacks are exact integers: a tight edge has slack 0
                    ks = dx + dual[y] - 2 * aw[ai]
                    k = aedge[ai]
                    if ks <= 0:
                        if label[by] == _FREE:
                            # y's blossom becomes inner; the vertex matched to its base becomes outer
                            queue, qn = _label_inner(y, x, n, label, lend, lin, best, inb, base, mate, childs,
                                                     stack, buf, queue, qn)
                        elif label[by] == _S:
                            b0 = _common_base(x, y, inb, lend, base, mark, marked)
                            if b0 >= 0:
                                nfree[0] -= 1
                                nbl = unused[nfree[0]]
                                queue, qn = _add_blossom(nbl, b0, x, y, n, eu, ev, ew, aptr, aedge, dual, label,
                                                         lend, lin, inb, parent, base, zb, best, childs, ca, cb,
                                                         blist, has_list, stack, buf, bestto, touched, queue, qn)
                            else:
                                _augment(x, y, n, mate, inb, lend, lin, parent, base, childs, ca, cb,
                                         tasks_b, tasks_v)
                                augmented = True
                                break
                        elif label[y] == _FREE:
                            # y sits in an inner blossom: remember that an outer vertex reaches it
                            label[y] = _T
                            lend[y] = x
                            lin[y] = y
                    elif label[by] == _S:
                        if best[bx] == -1 or ks < dual[eu[best[bx]]] + dual[ev[best[bx]]] - 2 * ew[best[bx]]:
                            best[bx] = k
                    elif label[y] == _FREE:
                        if best[y] == -1 or ks < dual[eu[best[y]]] + dual[ev[best[y]]] - 2 * ew[best[y]]:
                            best[y] = k
            if augmented:
                break
            # -- the dual step: the largest that keeps every dual and slack feasible
            kind = 1
            delta = dual[0]
            for x in range(1, n):
                if dual[x] < delta:
                    delta = dual[x]
            dedge = -1
            dbl = -1
            for x in range(n):
                if label[inb[x]] == _FREE and best[x] != -1:
                    k = best[x]
                    d = dual[eu[k]] + dual[ev[k]] - 2 * ew[k]
                    if d < delta:
                        delta = d
                        kind = 2
                        dedge = k
            for b in range(nb):
                if parent[b] == -1 and base[b] >= 0 and label[b] == _S and best[b] != -1:
                    k = best[b]
                    d = (dual[eu[k]] + dual[ev[k]] - 2 * ew[k]) // 2
                    if d < delta:
                        delta = d
                        kind = 3
                        dedge = k
            for b in range(n, nb):
                if parent[b] == -1 and base[b] >= 0 and label[b] == _T and zb[b] < delta:
                    delta = zb[b]
                    kind = 4
                    dbl = b
            for x in range(n):
                lab = label[inb[x]]
                if lab == _S:
                    dual[x] -= delta
                elif lab == _T:
                    dual[x] += delta
            for b in range(n, nb):
                if parent[b] == -1 and base[b] >= 0:
                    if label[b] == _S:
                        zb[b] += delta
                    elif label[b] == _T:
                        zb[b] -= delta
            if kind == 1:
                finished = True      # the free vertices' duals reached 0: the matching is optimal
                break
            elif kind == 2:                 # the edge is tight now: scan its outer end again
                x = eu[dedge]
                if label[inb[x]] == _FREE:
                    x = ev[dedge]
                queue, qn = _push(queue, qn, x)
            elif kind == 3:
                queue, qn = _push(queue, qn, eu[dedge])
            else:
                queue, qn = _expand(dbl, False, n, label, lend, lin, inb, parent, base, zb, best, childs, ca, cb,
                                    blist, has_list, unused, nfree, stack, buf, buf2, mate, queue, qn)
        # -- end of the stage: outer blossoms whose dual is zero dissolve
        for b in range(n, nb):
            if parent[b] == -1 and base[b] >= 0 and label[b] == _S and zb[b] == 0:
                queue, qn = _expand(b, True, n, label, lend, lin, inb, parent, base, zb, best, childs, ca, cb,
                                    blist, has_list, unused, nfree, stack, buf, buf2, mate, queue, qn)
        if finished or not augmented:
            break
    return mate, dual, zb, parent


@_kernel
def _set_label(x, lab, end, label, lend, lin, best, inb):
    """Give vertex ``x`` and its top-level blossom the label ``lab``, reached from vertex ``end`` (-1: a tree
    root) through ``x``; returns that blossom."""
    bx = inb[x]
    label[x] = lab
    label[bx] = lab
    lend[x] = end
    lend[bx] = end
    lin[x] = x
    lin[bx] = x
    best[x] = -1
    best[bx] = -1
    return bx


@_kernel
def _label_inner(y, x, n, label, lend, lin, best, inb, base, mate, childs, stack, buf, queue, qn):
    """Label the top-level blossom of ``y`` inner (reached from outer vertex ``x``) and the blossom matched
    to its base outer (its vertices go on the queue)."""
    by = _set_label(y, _T, x, label, lend, lin, best, inb)
    bb = base[by]
    bz = _set_label(mate[bb], _S, bb, label, lend, lin, best, inb)
    cnt = _leaves(bz, n, childs, stack, buf)
    for i in range(cnt):
        queue, qn = _push(queue, qn, buf[i])
    return queue, qn


@_kernel
def _common_base(x, y, inb, lend, base, mark, marked):
    """Trace the trees of outer vertices ``x`` and ``y`` up, alternately: the base of their first common
    blossom (a new blossom closes there), or -1 when they reach different roots (an augmenting path)."""
    nm = 0
    found = -1
    a, b = x, y
    while a != -1 or b != -1:
        ba = inb[a]
        if mark[ba]:
            found = base[ba]
            break
        mark[ba] = True
        marked[nm] = ba
        nm += 1
        if lend[ba] == -1:
            a = -1
        else:
            a = lend[inb[lend[ba]]]     # through the inner blossom above to the outer vertex above it
        if b != -1:
            a, b = b, a
    for i in range(nm):
        mark[marked[i]] = False
    return found


@_kernel
def _add_blossom(nbl, b0, x, y, n, eu, ev, ew, aptr, aedge, dual, label, lend, lin, inb, parent, base, zb, best,
                 childs, ca, cb, blist, has_list, stack, buf, bestto, touched, queue, qn):
    """Shrink the odd cycle closed by the tight edge ``x``-``y`` (both outer, same tree, first common blossom
    of base ``b0``) into the new outer blossom ``nbl``."""
    bb = inb[b0]
    bx = inb[x]
    by = inb[y]
    # the tree path from each side up to bb (exclusive)
    px = []
    while bx != bb:
        px.append(bx)
        bx = inb[lend[bx]]
    py = []
    while by != bb:
        py.append(by)
        by = inb[lend[by]]
    size = 1 + len(px) + len(py)
    ch = np.empty(size, dtype=np.int64)
    ea = np.empty(size, dtype=np.int64)
    eb = np.empty(size, dtype=np.int64)
    ch[0] = bb
    pos = 0
    # down the x side: child bb, px[-1], ..., px[0]; the edge into px[j] is its label edge
    for j in range(len(px) - 1, -1, -1):
        c = px[j]
        ea[pos] = lend[c]
        eb[pos] = lin[c]
        pos += 1
        ch[pos] = c
    # across x-y, then up the y side to bb
    ea[pos] = x
    eb[pos] = y
    for j in range(len(py)):
        c = py[j]
        pos += 1
        ch[pos] = c
        ea[pos] = lin[c]
        eb[pos] = lend[c]
    i = nbl - n
    childs[i] = ch
    ca[i] = ea
    cb[i] = eb
    base[nbl] = b0
    parent[nbl] = -1
    for j in range(size):
        parent[ch[j]] = nbl
    label[nbl] = _S
    lend[nbl] = lend[bb]
    lin[nbl] = lin[bb]
    zb[nbl] = 0
    # inner vertices of the cycle become outer: scan them
    cnt = _leaves(nbl, n, childs, stack, buf)
    for j in range(cnt):
        v = buf[j]
        if label[inb[v]] == _T:
            queue, qn = _push(queue, qn, v)
        inb[v] = nbl
    # the least-slack edge from the new blossom to every other outer blossom
    nt = 0
    for j in range(size):
        c = ch[j]
        if has_list[c]:
            lst = blist[c - n]
            for t in range(len(lst)):
                nt = _consider(lst[t], nbl, eu, ev, ew, dual, inb, label, bestto, touched, nt)
        else:
            cc = _leaves(c, n, childs, stack, buf)
            for t in range(cc):
                v = buf[t]
                for ai in range(aptr[v], aptr[v + 1]):
                    nt = _consider(aedge[ai], nbl, eu, ev, ew, dual, inb, label, bestto, touched, nt)
        if c >= n:
            has_list[c] = False
            blist[c - n] = np.zeros(0, dtype=np.int64)
        best[c] = -1
    lst = np.empty(nt, dtype=np.int64)
    bk = -1
    bs = 0
    for j in range(nt):
        k = bestto[touched[j]]
        bestto[touched[j]] = -1
        lst[j] = k
        s = dual[eu[k]] + dual[ev[k]] - 2 * ew[k]
        if bk == -1 or s < bs:
            bk = k
            bs = s
    blist[nbl - n] = lst
    has_list[nbl] = True
    best[nbl] = bk
    return queue, qn


@_kernel
def _consider(k, nbl, eu, ev, ew, dual, inb, label, bestto, touched, nt):
    """Edge ``k`` leaving blossom ``nbl`` to an outer blossom: keep it if it is the least-slack one to it."""
    a = inb[eu[k]]
    b = inb[ev[k]]
    if a == nbl:
        other = b
    elif b == nbl:
        other = a
    else:
        return nt
    if other == nbl or label[other] != _S:
        return nt
    s = dual[eu[k]] + dual[ev[k]] - 2 * ew[k]
    cur = bestto[other]
    if cur == -1:
        bestto[other] = k
        touched[nt] = other
        return nt + 1
    if s < dual[eu[cur]] + dual[ev[cur]] - 2 * ew[cur]:
        bestto[other] = k
    return nt


@_kernel
def _expand(b, endstage, n, label, lend, lin, inb, parent, base, zb, best, childs, ca, cb, blist, has_list,
            unused, nfree, stack, buf, buf2, mate, queue, qn):
    """Dissolve blossom ``b`` into its children (at the end of a stage also the children of dual zero,
    recursively); an inner blossom dissolved within a stage relabels its children along the even path
    from the entry child to the base child, and the others reached by outer vertices."""
    # children back to top level (at the end of a stage, recursively while their dual is zero)
    todo_list = [b]
    while len(todo_list) > 0:
        c0 = todo_list.pop()
        ch = childs[c0 - n]
        for j in range(len(ch)):
            s = ch[j]
            parent[s] = -1
            if s < n:
                inb[s] = s
            elif endstage and zb[s] == 0:
                todo_list.append(s)
            else:
                cnt = _leaves(s, n, childs, stack, buf)
                for t in range(cnt):
                    inb[buf[t]] = s
        if c0 != b:
            _recycle(c0, n, label, lend, lin, base, best, childs, ca, cb, blist, has_list, unused, nfree)
    if not endstage and label[b] == _T:
        ch = childs[b - n]
        ea = ca[b - n]
        eb = cb[b - n]
        size = len(ch)
        entry = lin[b]
        out = lend[b]
        ec = inb[entry]
        j = 0
        while ch[j] != ec:
            j += 1
        step = 1 if j % 2 == 1 else -1
        # the even path from the entry child to the base child: inner, outer, inner, ...
        while j != 0:
            queue, qn = _label_inner(entry, out, n, label, lend, lin, best, inb, base, mate, childs, stack, buf,
                                     queue, qn)
            # over the matched edge to the next (outer) child, then the unmatched edge to the next inner one
            if step == 1:
                out = ea[(j + 1) % size]
                entry = eb[(j + 1) % size]
            else:
                out = eb[(j - 2) % size]
                entry = ea[(j - 2) % size]
            j = (j + 2 * step) % size
        _set_label(entry, _T, out, label, lend, lin, best, inb)   # the base child: its base's mate is outer already
        # the other children: inner where an outer vertex reaches one of their vertices, else free
        j = (j + step) % size
        while ch[j] != ec:
            c = ch[j]
            if label[c] == _S:
                j = (j + step) % size
                continue
            cnt = _leaves(c, n, childs, stack, buf2)
            hit = -1
            for t in range(cnt):
                if label[buf2[t]] != _FREE:
                    hit = buf2[t]
                    break
            if hit >= 0:
                queue, qn = _label_inner(hit, lend[hit], n, label, lend, lin, best, inb, base, mate, childs, stack,
                                         buf, queue, qn)
            j = (j + step) % size
    _recycle(b, n, label, lend, lin, base, best, childs, ca, cb, blist, has_list, unused, nfree)
    return queue, qn


@_kernel
def _recycle(b, n, label, lend, lin, base, best, childs, ca, cb, blist, has_list, unused, nfree):
    empty = np.zeros(0, dtype=np.int64)
    label[b] = _FREE
    lend[b] = -1
    lin[b] = -1
    base[b] = -1
    best[b] = -1
    has_list[b] = False
    childs[b - n] = empty
    ca[b - n] = empty
    cb[b - n] = empty
    blist[b - n] = empty
    unused[nfree[0]] = b
    nfree[0] += 1


@_kernel
def _rotate_base(b, v, n, mate, parent, base, childs, ca, cb, tasks_b, tasks_v):
    """Make vertex ``v`` the base of blossom ``b``: re-pair the children along the even side of the cycle
    (and, inside them, recursively)."""
    nt = 1
    tasks_b[0] = b
    tasks_v[0] = v
    while nt > 0:
        nt -= 1
        bl = tasks_b[nt]
        x = tasks_v[nt]
        t = x
        while parent[t] != bl:
            t = parent[t]
        if t >= n:
            tasks_b[nt] = t
            tasks_v[nt] = x
            nt += 1
        ch = childs[bl - n]
        ea = ca[bl - n]
        eb = cb[bl - n]
        size = len(ch)
        i = 0
        while ch[i] != t:
            i += 1
        if i % 2 == 1:
            q = i + 1
            stop = size + 1
            step = 2
        else:
            q = i - 2
            stop = -2
            step = -2
        while q != stop and 0 <= q < size:
            a = ea[q]
            c = eb[q]
            ch_a = ch[q]
            ch_c = ch[(q + 1) % size]
            if ch_a >= n:
                tasks_b[nt] = ch_a
                tasks_v[nt] = a
                nt += 1
            if ch_c >= n:
                tasks_b[nt] = ch_c
                tasks_v[nt] = c
                nt += 1
            mate[a] = c
            mate[c] = a
            q += step
        if i != 0:
            childs[bl - n] = np.concatenate((ch[i:], ch[:i]))
            ca[bl - n] = np.concatenate((ea[i:], ea[:i]))
            cb[bl - n] = np.concatenate((eb[i:], eb[:i]))
        base[bl] = x


@_kernel
def _augment(x, y, n, mate, inb, lend, lin, parent, base, childs, ca, cb, tasks_b, tasks_v):
    """Flip the augmenting path through the tight edge ``x``-``y`` between two trees: from each end up to
    its root, every outer blossom is re-based at the vertex where the path enters it and matched along the
    path, and so is every inner blossom above it."""
    for side in range(2):
        s = x if side == 0 else y
        j = y if side == 0 else x
        while True:
            bs = inb[s]
            if bs >= n:
                _rotate_base(bs, s, n, mate, parent, base, childs, ca, cb, tasks_b, tasks_v)
            mate[s] = j
            if lend[bs] == -1:
                break
            bt = inb[lend[bs]]
            s = lend[bt]
            j = lin[bt]
            if bt >= n:
                _rotate_base(bt, j, n, mate, parent, base, childs, ca, cb, tasks_b, tasks_v)
            mate[j] = s
