"""Exact Bcast reordering with CP-SAT: assign node classes to tree positions, minimize the latest arrival.

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
"""

from __future__ import annotations

import numpy as np


def node_classes(latency: np.ndarray, inv_bw: np.ndarray, fixed: int | None = None) -> np.ndarray:
    """Class id per node: a ~ b when swapping a and b leaves both cost matrices unchanged.

    ``fixed`` (the root's node) gets a class of its own.
    """
    n = len(latency)
    cls = np.full(n, -1, dtype=np.int64)
    reps: list[int] = []
    for a in range(n):
        if a == fixed:
            continue
        for c, r in enumerate(reps):
            mask = np.ones(n, dtype=bool)
            mask[[a, r]] = False
            if (np.array_equal(latency[a, mask], latency[r, mask]) and np.array_equal(inv_bw[a, mask], inv_bw[r, mask])
                    and latency[a, r] == latency[r, a] and inv_bw[a, r] == inv_bw[r, a]):
                cls[a] = c
                break
        else:
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


def solve_exact(problem, *, time_limit=None, seed=0, hint=None, resolution: float = 1e6,
                threads: int = 2) -> dict:
    """Solve ``problem`` (a BcastProblem) exactly.

    Returns a dict with ``assign`` (position -> local node index), ``status``
    (optimal|feasible|timeout), ``bound`` (seconds), ``classes`` (count) and ``message``.
    """
    from ortools.sat.python import cp_model

    lat, inv = problem.costs.latency_s, problem.costs.inv_bw_s_per_B
    s = problem.schedule
    n = problem.n
    cls = node_classes(lat, inv, fixed=problem.root)
    m = int(cls.max()) + 1
    count = np.bincount(cls, minlength=m)
    e = s.edges
    ag = s.allgather_pairs()
    byte_vals = sorted(set(e["bytes"].tolist()) | {nb for _, _, nb, _ in ag})
    maxc = float(lat.max() + max(byte_vals + [0.0]) * inv.max())
    unit = max(maxc, 1e-30) / resolution
    tables = {nb: _class_table(lat, inv, cls, nb, unit) for nb in byte_vals}

    md = cp_model.CpModel()
    root_cls = int(cls[problem.root])
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

    horizon = int(sum(tables[nb].max() for nb in e["bytes"].tolist())) + 1
    arr = [md.NewConstant(0)] + [md.NewIntVar(0, horizon, f"a{p}") for p in range(1, n)]
    run = {}
    for j in range(len(e["child"])):
        u, v, nb = int(e["parent"][j]), int(e["child"][j]), float(e["bytes"][j])
        c = pair_cost(u, v, nb, f"e{j}")
        prev = run.get(u)
        md.Add(arr[v] == (arr[u] if prev is None else prev) + c)
        run[u] = arr[v]
    T = md.NewIntVar(0, horizon, "T")
    for p in range(1, n):
        md.Add(T >= arr[p])
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
    if hint is not None:
        for p in range(1, n):
            for x in range(m):
                md.AddHint(b[p, x], int(cls[hint[p]] == x))

    solver = cp_model.CpSolver()
    if time_limit is not None:
        solver.parameters.max_time_in_seconds = float(time_limit)
    solver.parameters.num_workers = threads
    solver.parameters.random_seed = int(seed or 0)
    st = solver.Solve(md)
    if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        # no solution in time: fall back to the hint (a feasible heuristic order)
        return {"assign": np.asarray(hint), "status": "timeout", "bound": None, "classes": m,
                "message": "CP-SAT found no solution in the time limit; returning the heuristic warm start"}
    # turn class assignment into nodes: members of each class in allocation order
    pool = {x: [int(i) for i in np.flatnonzero(cls == x) if i != problem.root] for x in range(m)}
    assign = np.empty(n, dtype=np.int64)
    assign[0] = problem.root
    for p in range(1, n):
        x = int(solver.Value(cvar[p]))
        assign[p] = pool[x].pop(0)
    bound = float(solver.BestObjectiveBound()) * unit
    status = "optimal" if st == cp_model.OPTIMAL else "timeout"
    msg = "" if status == "optimal" else "time limit reached: best feasible order with CP-SAT's bound"
    return {"assign": assign, "status": status, "bound": bound, "classes": m, "message": msg}
