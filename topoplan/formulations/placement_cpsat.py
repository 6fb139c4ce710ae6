"""Exact process placement on tree networks: a CP-SAT model and combinatorial lower bounds.

The formulation reads plain arrays (:class:`PlacementData`) and imports no problem package; the
placement method ``ilp`` (:mod:`topoplan.problems.placement.exact`) turns a
:class:`~topoplan.problems.placement.PlacementProblem` into them, starts the model from the best
heuristic placement, solves it with ``topoplan.formulations.backends.solve(..., "cpsat")`` and decodes the solution.

On a tree, fat tree or hybrid (EPS part) the placement objectives are cuts:

- ``inter-switch`` = bytes between ranks on different edge switches (the
  switch-level cut);
- ``hops`` = node cut + 2 x switch cut (same node 0 hops, same switch 1,
  across switches 3: :meth:`PlacementProblem.hops`).

Model (OR-Tools CP-SAT). Booleans ``x[r,n]`` (rank r on node n, exactly one
node per rank, at most ``cores[n]`` ranks per node; with one core per node
or the ``inter-switch`` objective the node level drops out and ``x`` is
``z[r,s]``, rank r on switch s, at most the switch's cores). Per rank-graph
edge ``e = (u, v)`` a cut literal ``ds[e] >= z[u,s] - z[v,s]`` for every
switch s (and ``dn[e]`` the same over nodes, with ``ds <= dn``). Minimize
``sum_e w_e (dn[e] + 2 ds[e])`` or ``sum_e w_e ds[e]``. Symmetry breaking
when switches (and nodes) are interchangeable: switches are numbered by the
smallest rank they hold, so rank r sits on a switch ``<= r`` (nodes within a
switch likewise).

Such partition models have weak LP relaxations, so two more things make
structured instances prove in seconds:

- the best heuristic placement (``metis``, ``greedy``) is the solver's hint;
- a combinatorial lower bound, added as a constraint on the objective:
  (a) the *degree bound*: a rank shares its group (node or switch of ``c``
  cores) with at most ``c - 1`` partners, so at least its traffic beyond its
  ``c - 1`` heaviest partners leaves the group; (b) the *edge-isoperimetric
  bound* when the rank graph contains a row-major ``R x C`` grid (2-D
  stencils): a set of ``m`` grid cells spans at most ``floor(2m - 2 sqrt(m))``
  grid edges (Harary and Harborth 1976; ``m - 1`` on a path), so a partition
  into groups of sizes ``m_g`` cuts at least ``|E| - sum_g i(m_g)`` grid
  edges, each of at least the smallest grid-edge weight. Group sizes are
  the capacities when the ranks fill the machine, else the minimum over all
  feasible sizes (a small knapsack DP).

When the hint meets the bound the solver proves optimality at once; otherwise
it searches up to the time limit and the result carries the best placement,
the proven bound (``max`` of the solver's and the combinatorial one) and the
gap. CP-SAT runs through :func:`topoplan.formulations.backends.solve` with a deferred model
(built in a fresh process when its native library would clash with highspy's).

Examples
--------
>>> from topoplan.formulations.backends import Deferred, solve
>>> # 4 ranks in a ring, 2 switches of 2 cores: the best cut is 2 edges
>>> data = PlacementData(n=4, caps=np.array([2, 2]), group_of=None, u=np.array([0, 1, 2, 3]),
...                      v=np.array([1, 2, 3, 0]), w=np.array([1, 1, 1, 1]), sym_switch=True)
>>> r = solve(Deferred(build, data), "cpsat", time_limit=10, seed=0, threads=1)
>>> r.status, r.objective, r.values.tolist()
('optimal', 2.0, [0, 0, 1, 1])
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

__all__ = ["PlacementData", "build", "cut_bound", "degree_bound", "grid_shapes", "max_internal_edges",
           "max_separable", "integer_weights", "canonical", "MAX_VARS", "MAX_CUT_ROWS"]

# model size guard: x variables and cut constraints (beyond this CP-SAT would only spend the time building)
MAX_VARS = 200_000
MAX_CUT_ROWS = 2_000_000


# -- lower bounds ------------------------------------------------------------------

def grid_shapes(W: sp.csr_matrix) -> list[tuple[int, int, float]]:
    """Row-major ``rows x cols`` grids (cols >= 2) whose every edge carries traffic in ``W``.

    Returns ``(rows, cols, smallest grid-edge weight)`` for each shape found.

    >>> r = np.arange(32)
    >>> h, v = r[r % 8 < 7], r[r + 8 < 32]                    # a 4 x 8 stencil, 1 MB per edge
    >>> W = sp.coo_matrix((np.full(len(h) + len(v), 1e6), (np.r_[h, v], np.r_[h + 1, v + 8])), shape=(32, 32))
    >>> [s[:2] for s in grid_shapes((W + W.T).tocsr())]
    [(4, 8)]
    """
    n = W.shape[0]
    out = []
    for cols in range(2, n + 1):
        if n % cols:
            continue
        rows = n // cols
        r = np.arange(n)
        h = r[(r % cols) < cols - 1]
        v = r[r + cols < n]
        u = np.concatenate([h, v])
        w = np.asarray(W[u, np.concatenate([h + 1, v + cols])]).ravel()
        if len(w) and (w > 0).all():
            out.append((rows, cols, float(w.min())))
    return out


def max_internal_edges(m: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """Most grid edges ``m`` cells of a ``rows x cols`` grid can span (Harary-Harborth; a path: ``m - 1``)."""
    m = np.asarray(m, dtype=np.float64)
    if min(rows, cols) == 1:
        return np.maximum(m - 1, 0)
    return np.maximum(np.floor(2 * m - 2 * np.sqrt(m) + 1e-9), 0)


def max_separable(f: np.ndarray, caps: np.ndarray, n: int) -> float:
    """``max sum_g f[m_g]`` over group sizes ``0 <= m_g <= caps[g]`` with ``sum m_g = n`` (``f`` indexed by size).

    The most edges any assignment can keep inside its groups, when ``f[m]`` bounds the edges inside a group
    of ``m`` ranks: a placement chooses its group sizes, so a valid cut bound must allow the best choice.

    Examples
    --------
    >>> f = np.array([0, 0, 1, 2, 4])            # edges inside 0..4 vertices of a grid
    >>> max_separable(f, np.array([4, 4]), 4)    # 4 ranks: all in one group keeps 4 edges
    4.0
    >>> max_separable(f, np.array([2, 2]), 4)    # forced 2 + 2
    2.0
    """
    caps = np.asarray(caps, dtype=np.int64)
    if n == int(caps.sum()):
        return float(f[caps].sum())
    dp = np.full(n + 1, -np.inf)
    dp[0] = 0.0
    for c in caps:  # groups of equal capacity could be merged; instances here are small enough
        new = np.full(n + 1, -np.inf)
        for m in range(0, min(int(c), n) + 1):
            new[m:] = np.maximum(new[m:], dp[:n + 1 - m] + f[m])
        dp = new
    return float(dp[n])


def degree_bound(W: sp.csr_matrix, group_cap: int) -> float:
    """Bytes that must cross between groups of at most ``group_cap`` ranks (see the module docstring)."""
    if group_cap <= 1:
        return float(W.sum()) / 2.0
    total = 0.0
    k = group_cap - 1
    for r in range(W.shape[0]):
        d = W.data[W.indptr[r]:W.indptr[r + 1]]
        if len(d) > k:
            total += float(np.sort(d)[:len(d) - k].sum())
    return total / 2.0


def cut_bound(W: sp.csr_matrix, caps, n: int) -> float:
    """Lower bound on the bytes cut by any assignment of ``n`` ranks to groups of capacities ``caps``."""
    caps = np.asarray(caps, dtype=np.int64)
    if len(caps) == 0 or W.nnz == 0:
        return 0.0
    best = degree_bound(W, int(min(caps.max(), n)))
    for rows, cols, wmin in grid_shapes(W):
        edges = rows * (cols - 1) + cols * (rows - 1)
        inside = max_separable(max_internal_edges(np.arange(n + 1), rows, cols), caps, n)
        best = max(best, wmin * max(0.0, edges - inside))
    return best


# -- the CP-SAT model: data -> variables -> constraints -> objective -> hint; decoder -------------

@dataclass(frozen=True)
class PlacementData:
    """What the model reads: ``n`` ranks; ``caps`` (ranks each column of ``x`` holds: per node, or per switch);
    ``group_of`` (column -> switch, or None when the columns are switches); the rank-graph edges ``u``,
    ``v`` with integer weights ``w``; the objective's ``switch_weight`` and ``node_weight`` per crossing and
    its ``constant``; ``lb`` (a proven lower bound, model units); ``hint`` (column of every rank, or None);
    ``sym_switch`` / ``sym_node`` (switches / the nodes of a switch are interchangeable: break the symmetry).
    """

    n: int
    caps: np.ndarray
    group_of: np.ndarray | None
    u: np.ndarray
    v: np.ndarray
    w: np.ndarray
    switch_weight: int = 1
    node_weight: int = 0
    constant: int = 0
    lb: int = 0
    hint: np.ndarray | None = None
    sym_switch: bool = False
    sym_node: bool = False


def build(data: PlacementData):
    """Build the CP-SAT model of the module docstring from plain arrays.

    Returns ``(model, decode)``: the ``cp_model.CpModel`` and ``decode(result)`` -> the column of every rank
    (from :attr:`topoplan.formulations.backends.Result.values`). Solve it with
    ``topoplan.formulations.backends.solve(Deferred(build, data), "cpsat", ...)``: it is then built where it is solved
    (in a fresh process when OR-Tools' native library would clash) and ``Result.values`` is the decoded
    column array.
    """
    from ortools.sat.python import cp_model

    # -- data
    n, caps = data.n, data.caps
    k = len(caps)
    group_of = data.group_of
    u, v, w = data.u, data.v, data.w
    md = cp_model.CpModel()
    # -- variables and constraints: one column per rank, within the capacities
    x = [[md.NewBoolVar(f"x{r}_{j}") for j in range(k)] for r in range(n)]
    for r in range(n):
        md.AddExactlyOne(x[r])
    for j in range(k):
        md.Add(sum(x[r][j] for r in range(n)) <= int(caps[j]))
    # switch membership: x itself, or the sum over the switch's nodes
    if group_of is None:
        groups = [[j] for j in range(k)]
    else:
        groups = [list(np.flatnonzero(np.asarray(group_of) == s)) for s in range(int(max(group_of)) + 1)]
    local = np.zeros(k, dtype=np.int64)
    for g in groups:
        local[g] = np.arange(len(g))
    # symmetry breaking: groups (switches) numbered by their smallest rank, nodes within a switch likewise
    for r in range(n):
        for s, g in enumerate(groups):
            for j in g:
                if (data.sym_switch and s > r) or (data.sym_node and local[j] > r):
                    md.Add(x[r][j] == 0)
    zs = [[sum(x[r][j] for j in g) for g in groups] for r in range(n)]
    # cut literals per edge
    obj = []
    ds, dn = [], []
    for e in range(len(u)):
        a, b = int(u[e]), int(v[e])
        d = md.NewBoolVar(f"ds{e}")
        for s in range(len(groups)):
            md.Add(zs[a][s] - zs[b][s] <= d)
        ds.append(d)
        obj.append(int(w[e]) * int(data.switch_weight) * d)
        if group_of is not None and data.node_weight:
            c = md.NewBoolVar(f"dn{e}")
            for j in range(k):
                md.Add(x[a][j] - x[b][j] <= c)
            md.AddImplication(d, c)
            dn.append(c)
            obj.append(int(w[e]) * int(data.node_weight) * c)
    # -- objective
    total = sum(obj) + int(data.constant)
    # the objective as a variable whose domain starts at the proven bound: the solver's bound starts there,
    # so a hint that meets it is optimal at once
    top = int(w.sum()) * (int(data.switch_weight) + int(data.node_weight)) + int(data.constant)
    cost = md.NewIntVar(min(int(data.lb), top), top, "cost")
    md.Add(cost == total)
    md.Minimize(cost)
    # -- the start
    hint = data.hint
    if hint is not None:
        hint = np.asarray(hint)
        for r in range(n):
            for j in range(k):
                md.AddHint(x[r][j], int(hint[r] == j))
        gh = np.zeros(k, dtype=np.int64)
        for s, g in enumerate(groups):
            gh[g] = s
        for e in range(len(u)):
            md.AddHint(ds[e], int(gh[hint[u[e]]] != gh[hint[v[e]]]))
            if dn:
                md.AddHint(dn[e], int(hint[u[e]] != hint[v[e]]))
    index = np.array([[x[r][j].Index() for j in range(k)] for r in range(n)], dtype=np.int64).reshape(n, k)

    def decode(result) -> np.ndarray:
        """The column of every rank (exactly one of its booleans is set)."""
        return np.argmax(np.asarray(result.values)[index], axis=1).astype(np.int64)

    return md, decode


def integer_weights(w: np.ndarray) -> tuple[np.ndarray, float, bool]:
    """Integer edge weights, the scale back to bytes, and whether they are exact.

    Bytes are integers: dividing by their gcd keeps the numbers small and exact. Fractional weights (scaled
    matrices) are rounded *down* in units of 1e-6 of the largest, so the model's bound stays a valid bound.
    """
    wi = np.round(w).astype(np.int64)
    if len(wi) == 0:
        return wi, 1.0, True
    if np.abs(wi - w).max() > 1e-9 * max(1.0, float(np.abs(w).max())) or (wi <= 0).any():
        q = float(np.abs(w).max()) * 1e-6
        return np.floor(w / q).astype(np.int64), q, False
    g = int(np.gcd.reduce(wi))
    return wi // g, float(g), True


def canonical(col: np.ndarray, group_of, n_groups: int, sym_switch: bool, sym_node: bool) -> np.ndarray:
    """Relabel an assignment to the symmetry-broken form of :func:`build`.

    ``col`` is the node (``group_of`` = node -> switch) or the switch (``group_of`` None) of every rank.
    Switches are renumbered by their smallest rank, and nodes within a switch by theirs (the nodes of every
    switch are alike when ``sym_switch``, so node i of one switch maps to node i of another).

    >>> canonical(np.array([3, 3, 1, 0]), None, 4, True, False).tolist()
    [0, 0, 1, 2]
    """
    col = np.asarray(col, dtype=np.int64)
    if group_of is None:
        if not sym_switch:
            return col
        first = [int(c) for c in dict.fromkeys(col.tolist())]
        rest = [g for g in range(n_groups) if g not in set(first)]
        relabel = np.empty(n_groups, dtype=np.int64)
        relabel[first + rest] = np.arange(n_groups)
        return relabel[col]
    group_of = np.asarray(group_of, dtype=np.int64)
    members = [np.flatnonzero(group_of == s) for s in range(n_groups)]
    sw_of_rank = group_of[col]
    new_sw = canonical(sw_of_rank, None, n_groups, sym_switch, False)
    out = col.copy()
    for s in range(n_groups):
        on = np.flatnonzero(sw_of_rank == s)
        if len(on) == 0:
            continue
        nodes = members[s]
        local = np.searchsorted(nodes, col[on])
        if sym_node:
            first = [int(c) for c in dict.fromkeys(local.tolist())]
            rest = [i for i in range(len(nodes)) if i not in set(first)]
            relabel = np.empty(len(nodes), dtype=np.int64)
            relabel[first + rest] = np.arange(len(nodes))
            local = relabel[local]
        out[on] = members[new_sw[on[0]]][local]
    return out
