"""Exact Bcast reordering with CP-SAT: assign node classes to tree positions, minimize the latest arrival.

The formulation reads plain arrays (:class:`BcastData`) and imports no problem package; the Bcast
method ``ilp`` (:mod:`topoplan.problems.bcast.exact`) turns a :class:`~topoplan.problems.bcast.BcastProblem` into them,
solves the model with ``topoplan.formulations.backends.solve(..., "cpsat")`` and turns the assignment into an order.

Symmetry: nodes whose cost rows agree (same switch and HCA speed under the
hop/speed model) are interchangeable, so the model assigns *classes* to
positions (``b[p, X]``, class counts fixed) instead of nodes - with a scattered
allocation over r racks that is r values per position instead of n.
Edge costs come from the class-pair table through an element constraint;
costs are integers in units of ``max cost / resolution``, rounded down, so the
solver's bound is a valid lower bound on the true model time.

The model (tree phase): ``arr[root] = 0``; for parent u with ordered sends
e_1..e_k, ``arr[child(e_j)] = arr[u] + sum_{i<=j} cost(e_i)``; ``T >= arr[v]``.
Scatter-allgather adds one variable per allgather step ``g_s >= cost(pair)``
and minimizes ``T + sum rep_s * g_s``.

Examples
--------
>>> from topoplan.formulations.backends import Deferred, solve
>>> lat = np.array([[0, 1, 5, 5], [1, 0, 5, 5], [5, 5, 0, 1], [5, 5, 1, 0]], dtype=float)   # two racks
>>> data = BcastData(latency_s=lat, inv_bw_s_per_B=np.zeros((4, 4)), root=0,   # a chain 0 -> 1 -> 2 -> 3
...                  parent=np.array([0, 1, 2]), child=np.array([1, 2, 3]), bytes_B=np.ones(3))
>>> r = solve(Deferred(build, data), "cpsat", time_limit=10, seed=0, threads=1)
>>> r.status, r.values.assign.tolist(), round(r.bound * r.values.unit, 3)     # rack by rack: 1 + 5 + 1
('optimal', [0, 1, 2, 3], 7.0)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

__all__ = ["BcastData", "BcastSolution", "build", "node_classes"]


def node_classes(latency: np.ndarray, inv_bw: np.ndarray, fixed: int | None = None) -> np.ndarray:
    """Class id per node: a ~ b when swapping a and b leaves both cost matrices unchanged.

    ``fixed`` (the root's node) gets a class of its own.

    >>> lat = np.array([[0, 1, 5], [1, 0, 5], [5, 5, 0]], dtype=float)
    >>> node_classes(lat, np.zeros((3, 3))).tolist(), node_classes(lat, np.zeros((3, 3)), fixed=0).tolist()
    ([0, 0, 1], [2, 0, 1])
    """
    n = len(latency)
    cls = np.full(n, -1, dtype=np.int64)
    # a ~ r needs equal rows but for columns a and r, where latency[a, r] = latency[r, a]: so equal rows once each
    # is sorted without its diagonal entry. Only representatives with a's sorted rows are compared with it.
    off = ~np.eye(n, dtype=bool)
    sig_lat = np.sort(latency[off].reshape(n, n - 1), axis=1) if n > 1 else np.zeros((n, 0))
    sig_bw = np.sort(inv_bw[off].reshape(n, n - 1), axis=1) if n > 1 else np.zeros((n, 0))
    by_sig: dict = {}
    reps: list[int] = []
    for a in range(n):
        if a == fixed:
            continue
        key = (sig_lat[a].tobytes(), sig_bw[a].tobytes())
        cands = by_sig.setdefault(key, [])
        if cands:   # a against those representatives r at once: rows equal outside columns a and r
            r = np.asarray([reps[c] for c in cands])
            diff = (latency[r] != latency[a]) | (inv_bw[r] != inv_bw[a])
            outside = diff.sum(axis=1) - diff[:, a] - diff[np.arange(len(r)), r]
            same = (outside == 0) & (latency[a, r] == latency[r, a]) & (inv_bw[a, r] == inv_bw[r, a])
            hit = np.flatnonzero(same)
            if hit.size:
                cls[a] = cands[int(hit[0])]
                continue
        cands.append(len(reps))
        cls[a] = len(reps)
        reps.append(a)
    if fixed is not None:
        cls[fixed] = len(reps)
        reps.append(fixed)
    return cls


def _class_table(latency, inv_bw, cls, nbytes, unit):
    """Integer cost per (class, class) pair; within one class, the cost between two distinct members."""
    m = int(cls.max()) + 1
    first = [np.flatnonzero(cls == c) for c in range(m)]
    tab = np.zeros((m, m), dtype=np.int64)
    for x in range(m):
        for y in range(m):
            a = first[x][0]
            if x == y:
                if len(first[x]) < 2:
                    continue
                b = first[x][1]
            else:
                b = first[y][0]
            tab[x, y] = int(np.floor((latency[a, b] + nbytes * inv_bw[a, b]) / unit))
    return tab


@dataclass(frozen=True)
class BcastData:
    """What the model reads, over the n nodes of the allocation (local indices) and the n tree positions.

    ``latency_s``, ``inv_bw_s_per_B``: the cost of a message between two nodes is ``latency + bytes x
    inv_bw`` (n x n); ``root``: the root's node, fixed at position 0; the tree's sends ``parent`` ->
    ``child`` (positions) of ``bytes_B``, in send order per parent; ``allgather``: steps ``(src positions,
    dst positions, bytes, repeat count)``; ``hint``: a node per position (a heuristic's assignment) or
    None; ``resolution``: the time grid, the largest edge cost over ``resolution``.
    """

    latency_s: np.ndarray
    inv_bw_s_per_B: np.ndarray
    root: int
    parent: np.ndarray
    child: np.ndarray
    bytes_B: np.ndarray
    allgather: list = field(default_factory=list)
    hint: np.ndarray | None = None
    resolution: float = 1e6

    @property
    def n(self) -> int:
        return len(self.latency_s)


class BcastSolution(NamedTuple):
    """A decoded model: ``assign`` (position -> node, position 0 the root), ``classes`` (how many node
    classes the model had) and ``unit`` (seconds per model time unit: bounds in seconds are ``bound x
    unit``)."""

    assign: np.ndarray
    classes: int
    unit: float


def build(data: BcastData):
    """Build the CP-SAT model of the module docstring.

    Returns ``(model, decode)``: the ``cp_model.CpModel`` and ``decode(result)`` -> :class:`BcastSolution`
    (members of each class in allocation order). Solve it with
    ``topoplan.formulations.backends.solve(Deferred(build, data), "cpsat", ...)``: it is then built where it is solved
    (in a fresh process when OR-Tools' native library would clash) and ``Result.values`` is the
    decoded solution.
    """
    from ortools.sat.python import cp_model

    # -- data: node classes, the time unit, integer cost tables per message size
    lat, inv = data.latency_s, data.inv_bw_s_per_B
    n = data.n
    cls = node_classes(lat, inv, fixed=data.root)
    m = int(cls.max()) + 1
    count = np.bincount(cls, minlength=m)
    ag = data.allgather
    byte_vals = sorted(set(np.asarray(data.bytes_B).tolist()) | {nb for _, _, nb, _ in ag})
    maxc = float(lat.max() + max(byte_vals + [0.0]) * inv.max())
    unit = max(maxc, 1e-30) / data.resolution
    tables = {nb: _class_table(lat, inv, cls, nb, unit) for nb in byte_vals}

    # -- variables: the class at every position (position 0: the root's)
    md = cp_model.CpModel()
    root_cls = int(cls[data.root])
    b = {}
    cvar = [md.NewConstant(root_cls)]
    for p in range(1, n):
        row = [md.NewBoolVar(f"b{p}_{x}") for x in range(m)]
        md.AddExactlyOne(row)
        for x in range(m):
            b[p, x] = row[x]
        md.AddExactlyOne(row)
        cv = md.NewIntVar(0, m - 1, f"c{p}")
        md.Add(cv == sum(x * row[x] for x in range(m)))
        cvar.append(cv)
    # -- constraints: every class used as often as it has members
    for x in range(m):
        want = int(count[x]) - (1 if x == root_cls else 0)
        md.Add(sum(b[p, x] for p in range(1, n)) == want)

    def pair_cost(u, v, nb, name):
        tab = tables[nb]
        idx = md.NewIntVar(0, m * m - 1, f"i{name}")
        md.Add(idx == m * cvar[u] + cvar[v])
        c = md.NewIntVar(int(tab.min()), int(tab.max()), f"w{name}")
        md.AddElement(idx, tab.ravel().tolist(), c)
        return c

    # arrival times along the tree, sends of a parent one after another
    parent, child, nbytes = data.parent, data.child, data.bytes_B
    horizon = int(sum(tables[nb].max() for nb in np.asarray(nbytes).tolist())) + 1
    arr = [md.NewConstant(0)] + [md.NewIntVar(0, horizon, f"a{p}") for p in range(1, n)]
    run = {}
    for j in range(len(child)):
        u, v, nb = int(parent[j]), int(child[j]), float(nbytes[j])
        c = pair_cost(u, v, nb, f"e{j}")
        prev = run.get(u)
        md.Add(arr[v] == (arr[u] if prev is None else prev) + c)
        run[u] = arr[v]
    T = md.NewIntVar(0, horizon, "T")
    for p in range(1, n):
        md.Add(T >= arr[p])
    # -- objective: the latest arrival, plus the allgather steps
    obj = T
    terms = []
    for si, (src, dst, nb, rep) in enumerate(ag):
        tab = tables[nb]
        g = md.NewIntVar(0, int(tab.max()), f"g{si}")
        for a, d in zip(src.tolist(), dst.tolist()):
            md.Add(g >= pair_cost(a, d, nb, f"s{si}_{a}"))
        terms.append(rep * g)
    if terms:
        obj = T + sum(terms)
    md.Minimize(obj)
    # -- the start
    if data.hint is not None:
        for p in range(1, n):
            for x in range(m):
                md.AddHint(b[p, x], int(cls[data.hint[p]] == x))
    index = [cv.Index() for cv in cvar[1:]]

    def decode(result) -> BcastSolution:
        """Class assignment -> nodes: members of each class in allocation order."""
        values = np.asarray(result.values)
        pool = {x: [int(i) for i in np.flatnonzero(cls == x) if i != data.root] for x in range(m)}
        assign = np.empty(n, dtype=np.int64)
        assign[0] = data.root
        for p in range(1, n):
            assign[p] = pool[int(values[index[p - 1]])].pop(0)
        return BcastSolution(assign, m, unit)

    return md, decode
