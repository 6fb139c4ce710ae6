"""Graph-partitioning placement: the papers' CommPattern ("CP") placement with METIS, and KaHIP/Scotch peers.

003 section 4.1.3 and 000 section 4.1: build the rank communication graph,
partition it over the EPS switches (METIS, minimum edge cut), then the
ranks of each switch over its nodes (cores per node ranks each); on a
hybrid network the nodes with the most inter-switch traffic become the OCS
nodes. Here the OCS nodes are fixed by the topology, so the node groups
with the most large inter-switch bytes are *put on* the OCS nodes.

Generalized as recursive mapping over a machine hierarchy:

- tree, fat-tree, hybrid: top switch -> edge switches -> nodes (k-way);
- torus / mesh: recursive coordinate bisection of the node box (longest
  dimension first), down to single nodes;
- graph: recursive bisection of the switches by distance to two far-apart
  switches (capacity-balanced), then the hosts under one switch (k-way).

At every level the ranks of a domain are split among its children with
*exact* capacities: a part gets exactly the number of ranks its cores take
(domains are filled in order when there are fewer ranks than cores).
METIS only balances within a tolerance, so :func:`repair_balance` moves
the ranks that cost least from over-full to under-full parts.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from planner.core.errors import TopoplanError
from planner.problems.placement.problem import PlacementProblem, result_from
from planner.problems.placement.registry import METHODS
from planner.problems.result import module_missing
from planner.core.topology import GraphTopology, TorusTopology, TreeTopology

__all__ = ["PARTITIONERS", "repair_balance", "partition", "recursive_map", "ocs_first", "metis", "kahip", "scotch"]


# -- partitioners ------------------------------------------------------------------

def _int_weights(w: np.ndarray) -> np.ndarray:
    """Positive integer edge weights for METIS/KaHIP/Scotch, keeping the total within 32 bits."""
    if len(w) == 0:
        return np.zeros(0, dtype=np.int64)
    scale = min(1e6 / w.max(), 1e9 / w.sum())
    return np.maximum(1, np.round(w * scale)).astype(np.int64)


def metis_parts(W: sp.csr_matrix, targets, seed: int = 0) -> np.ndarray:
    """METIS k-way partition of graph ``W`` aiming at part sizes ``targets`` (not exact: see :func:`partition`)."""
    import pymetis

    n, k = W.shape[0], len(targets)
    if k == 1 or n <= 1 or W.nnz == 0:
        return _fill(n, targets)
    t = np.asarray(targets, dtype=np.float64)
    adj = pymetis.CSRAdjacency(W.indptr.astype(np.int64).tolist(), W.indices.astype(np.int64).tolist())
    opts = pymetis.Options(seed=int(seed) % (2**31))
    _, part = pymetis.part_graph(k, adjacency=adj, eweights=_int_weights(W.data).tolist(),
                                 tpwgts=(t / t.sum()).tolist(), options=opts)
    return np.asarray(part, dtype=np.int64)


def kahip_parts(W: sp.csr_matrix, targets, seed: int = 0) -> np.ndarray:
    """KaHIP (kaffpa, strong mode) partition into ``len(targets)`` parts, when the ``kahip`` module is installed."""
    try:
        import kahip
    except ImportError:
        raise TopoplanError("method kahip: the KaHIP Python module is not installed (pip install kahip)") from None
    n, k = W.shape[0], len(targets)
    if k == 1 or n <= 1 or W.nnz == 0:
        return _fill(n, targets)
    _, part = kahip.kaffpa([1] * n, W.indptr.tolist(), _int_weights(W.data).tolist(), W.indices.tolist(), k,
                           0.03, True, int(seed), 2)
    return np.asarray(part, dtype=np.int64)


def scotch_parts(W: sp.csr_matrix, targets, seed: int = 0) -> np.ndarray:
    """Scotch (``gpart`` of the Debian/Ubuntu ``scotch`` package) partition into ``len(targets)`` parts."""
    exe = shutil.which("gpart") or shutil.which("scotch_gpart")
    if exe is None:
        raise TopoplanError("method scotch: the Scotch 'gpart' program is not installed (apt-get install scotch)")
    n, k = W.shape[0], len(targets)
    if k == 1 or n <= 1 or W.nnz == 0:
        return _fill(n, targets)
    w = _int_weights(W.data)
    lines = ["0", f"{n} {W.nnz}", "0 010"]
    for v in range(n):
        a, b = W.indptr[v], W.indptr[v + 1]
        lines.append(" ".join([str(b - a)] + [f"{w[j]} {W.indices[j]}" for j in range(a, b)]))
    with tempfile.TemporaryDirectory() as d:
        g, m = Path(d) / "g.grf", Path(d) / "g.map"
        g.write_text("\n".join(lines) + "\n")
        run = subprocess.run([exe, str(k), str(g), str(m), "-b0.03"], capture_output=True, text=True)
        if run.returncode != 0:
            raise TopoplanError(f"method scotch: gpart failed: {run.stderr.strip()[:200]}")
        rows = m.read_text().split()[1:]
    part = np.zeros(n, dtype=np.int64)
    part[np.asarray(rows[0::2], dtype=np.int64)] = np.asarray(rows[1::2], dtype=np.int64)
    return part


PARTITIONERS = {"metis": metis_parts, "kahip": kahip_parts, "scotch": scotch_parts}


def _fill(n: int, targets) -> np.ndarray:
    return np.repeat(np.arange(len(targets)), targets)[:n]


def repair_balance(W: sp.csr_matrix, part: np.ndarray, targets) -> np.ndarray:
    """Move ranks until every part holds exactly ``targets[p]`` ranks, each time the move that cuts least.

    The gain of moving rank ``r`` from part ``p`` to ``q`` is its bytes to
    ``q`` minus its bytes to ``p`` (the connectivity matrix ``W @ onehot``).

    Parameters
    ----------
    W : scipy.sparse.csr_matrix
        Symmetric rank graph (bytes).
    part : numpy.ndarray
        Part of every rank (not changed).
    targets : sequence of int
        Ranks each part must hold (summing to the ranks).

    Returns
    -------
    numpy.ndarray
        The repaired parts.

    Examples
    --------
    >>> W = sp.csr_matrix(np.array([[0, 5, 1], [5, 0, 0], [1, 0, 0]], float))
    >>> repair_balance(W, np.array([0, 0, 0]), [2, 1]).tolist()
    [0, 0, 1]
    """
    part = np.asarray(part, dtype=np.int64).copy()
    targets = np.asarray(targets, dtype=np.int64)
    k = len(targets)
    counts = np.bincount(part, minlength=k)
    if (counts == targets).all():
        return part
    n = len(part)
    conn = np.asarray((W @ sp.csr_matrix((np.ones(n), (np.arange(n), part)), shape=(n, k))).todense())
    while True:
        over = counts > targets
        if not over.any():
            return part
        under = np.flatnonzero(counts < targets)
        cand = np.flatnonzero(over[part])
        gain = conn[np.ix_(cand, under)] - conn[cand, part[cand]][:, None]
        i, j = np.unravel_index(int(np.argmax(gain)), gain.shape)
        r, p, q = cand[i], part[cand[i]], under[j]
        a, b = W.indptr[r], W.indptr[r + 1]
        nb, w = W.indices[a:b], W.data[a:b]
        conn[nb, p] -= w
        conn[nb, q] += w
        part[r] = q
        counts[p] -= 1
        counts[q] += 1


def partition(W: sp.csr_matrix, targets, seed: int = 0, partitioner: str = "metis") -> np.ndarray:
    """Partition graph ``W`` into parts of exactly ``targets[p]`` vertices (partitioner, then repair).

    Parameters
    ----------
    W : scipy.sparse.csr_matrix
        Symmetric rank graph (bytes).
    targets : sequence of int
    seed : int, optional
    partitioner : {"metis", "kahip", "scotch"}, optional
        See :data:`PARTITIONERS`.

    Returns
    -------
    numpy.ndarray
        Part of every vertex.

    Examples
    --------
    >>> from planner.core.topology_io import load_topology
    >>> from planner.traffic.matrix import load_traffic
    >>> p = PlacementProblem.build(load_topology("paper003"), load_traffic("neighbor2d:rows=16,cols=16,bytes=4MB"),
    ...                            objective="inter-switch")
    >>> parts = partition(p.graph(), [64] * 4)
    >>> np.bincount(parts).tolist()
    [64, 64, 64, 64]
    """
    targets = np.asarray(targets, dtype=np.int64)
    if targets.sum() != W.shape[0]:
        raise ValueError("targets must add up to the number of vertices")
    if len(targets) == 1:
        return np.zeros(W.shape[0], dtype=np.int64)
    return repair_balance(W, PARTITIONERS[partitioner](W, targets, seed), targets)


# -- the machine hierarchy -------------------------------------------------------------

def children(problem: PlacementProblem, nodes: np.ndarray) -> list[np.ndarray] | None:
    """Split a domain (array of node ids) into sub-domains; None for a single node."""
    if len(nodes) <= 1:
        return None
    t = problem.topology
    sw = problem.node_switch
    if isinstance(t, TreeTopology) or isinstance(t, GraphTopology):
        switches = np.unique(sw[nodes])
        if len(switches) == 1:
            return [np.array([x]) for x in nodes]
        if isinstance(t, TreeTopology):
            return [nodes[sw[nodes] == s] for s in switches]
        return _bisect_switches(problem, nodes, switches)
    if isinstance(t, TorusTopology):
        c = problem._coords()[nodes]
        ext = c.max(axis=0) - c.min(axis=0)
        d = int(np.argmax(ext))
        order = np.argsort(c[:, d], kind="stable")
        return _split_by_capacity(problem, nodes[order])
    raise TopoplanError(f"metis: no machine hierarchy for topology kind {getattr(t, 'kind', '?')!r}")


def _split_by_capacity(problem, ordered_nodes) -> list[np.ndarray]:
    cum = np.cumsum(problem.cores[ordered_nodes])
    cut = int(np.searchsorted(cum, cum[-1] / 2.0)) + 1
    cut = min(max(cut, 1), len(ordered_nodes) - 1)
    return [ordered_nodes[:cut], ordered_nodes[cut:]]


def _bisect_switches(problem, nodes, switches) -> list[np.ndarray]:
    """Two halves of a graph domain: switches ordered by (distance to a) - (distance to b), a and b far apart."""
    t = problem.topology
    if "swhops" not in problem._cache:
        problem._cache["swhops"] = t.switch_hops()
    h = problem._cache["swhops"][np.ix_(switches, switches)].astype(np.float64)
    h[h < 0] = h.max() + 1
    a = int(np.argmax(h[0]))
    b = int(np.argmax(h[a]))
    key = h[a] - h[b]
    sw_order = switches[np.lexsort((switches, key))]
    sw = problem.node_switch
    rank_of = {s: i for i, s in enumerate(sw_order.tolist())}
    ordered = nodes[np.argsort([rank_of[s] for s in sw[nodes].tolist()], kind="stable")]
    # cut between switches, at the capacity midpoint
    cap = np.cumsum(problem.cores[ordered])
    sws = sw[ordered]
    bounds = np.flatnonzero(np.diff(sws) != 0) + 1
    mid = bounds[np.argmin(np.abs(cap[bounds - 1] - cap[-1] / 2.0))]
    return [ordered[:mid], ordered[mid:]]


def recursive_map(problem: PlacementProblem, seed: int = 0, partitioner: str = "metis",
                  domains=None) -> np.ndarray:
    """Map ranks down the machine hierarchy with exact capacities; returns ``rank_to_node``.

    ``domains`` -- optional list of ``(ranks, nodes)`` to start from (e.g. the ranks
    an exact model put on each switch); default: all ranks on the whole machine.

    Parameters
    ----------
    problem : PlacementProblem
    seed : int, optional
    partitioner : {"metis", "kahip", "scotch"}, optional
    domains : list of (array_like, array_like), optional

    Returns
    -------
    numpy.ndarray
        ``rank_to_node``; every node gets at most its cores.

    Examples
    --------
    >>> from planner.core.topology_io import load_topology
    >>> from planner.traffic.matrix import load_traffic
    >>> p = PlacementProblem.build(load_topology("paper003"), load_traffic("neighbor2d:rows=16,cols=16,bytes=4MB"),
    ...                            objective="inter-switch")
    >>> rank_to_node = recursive_map(p)
    >>> int(np.bincount(rank_to_node, minlength=64).max()), p.cost(rank_to_node)
    (4, 256000000.0)
    """
    W = problem.graph()
    node_of = np.full(problem.n_ranks, -1, dtype=np.int64)
    cores = problem.cores
    stack = list(domains) if domains is not None else [(np.arange(problem.n_ranks), np.arange(problem.n_nodes))]
    while stack:
        ranks, nodes = stack.pop()
        if len(ranks) == 0:
            continue
        kids = children(problem, nodes)
        if kids is None:
            node_of[ranks] = nodes[0]
            continue
        cap = np.array([cores[k].sum() for k in kids], dtype=np.int64)
        # fill sub-domains in order when there are fewer ranks than cores
        counts = np.minimum(cap, np.maximum(0, len(ranks) - np.concatenate([[0], np.cumsum(cap)[:-1]])))
        used = np.flatnonzero(counts > 0)
        sub = W[ranks][:, ranks].tocsr()
        part = partition(sub, counts[used], seed=seed + len(stack), partitioner=partitioner)
        for j, kid in enumerate(used):
            stack.append((ranks[part == j], kids[kid]))
    return node_of


def ocs_first(problem: PlacementProblem, rank_to_node: np.ndarray) -> np.ndarray:
    """On a hybrid: within each switch, move the node groups with the most large inter-switch bytes onto the OCS nodes.

    The groups (ranks sharing a node) stay together; only which node of the
    switch hosts which group changes, so inter-switch and inter-node bytes
    are unchanged (003: "nodes with much inter-switch traffic are the OCS nodes").

    Parameters
    ----------
    problem : PlacementProblem
    rank_to_node : numpy.ndarray

    Returns
    -------
    numpy.ndarray
        The new ``rank_to_node`` (unchanged off hybrids).

    Examples
    --------
    >>> from planner.core.topology_io import load_topology
    >>> from planner.traffic.matrix import load_traffic
    >>> p = PlacementProblem.build(load_topology("paper003", ["ocs.nodes_per_switch=1"]),
    ...                            load_traffic("neighbor2d:rows=16,cols=16,bytes=4MB"), objective="inter-switch")
    >>> before = recursive_map(p)
    >>> after = ocs_first(p, before)
    >>> p.cost(after) == p.cost(before)
    True
    """
    t = problem.topology
    if not isinstance(t, TreeTopology) or t.ocs is None:
        return rank_to_node
    node = np.asarray(rank_to_node, dtype=np.int64).copy()
    sw = problem.node_switch
    tr = problem.traffic
    a, b = node[tr.src], node[tr.dst]
    cross = (sw[a] != sw[b]) & (tr.msg_bytes >= problem.threshold_B)
    by = tr.bytes[cross]
    per_node = (np.bincount(a[cross], weights=by, minlength=problem.n_nodes)
                + np.bincount(b[cross], weights=by, minlength=problem.n_nodes))
    is_ocs = t.is_ocs_node()
    cores = problem.cores
    out = node.copy()
    for s in range(t.n_switches):
        members = np.flatnonzero(sw == s)
        for c in np.unique(cores[members]):  # only nodes with equal cores swap groups
            m = members[cores[members] == c]
            groups = m[np.lexsort((m, -per_node[m]))]           # heaviest group first
            hosts = m[np.lexsort((m, ~is_ocs[m]))]             # OCS nodes first
            used = np.isin(groups, node)
            # keep empty nodes at the end: only groups that exist are moved
            groups = np.concatenate([groups[used], groups[~used]])
            remap = np.arange(problem.n_nodes)
            remap[groups] = hosts
            sel = np.isin(node, m)
            out[sel] = remap[node[sel]]
    return out


def _map(problem: PlacementProblem, seed, partitioner: str):
    node = ocs_first(problem, recursive_map(problem, seed=seed or 0, partitioner=partitioner))
    return result_from(problem, node, options={"partitioner": partitioner})


@METHODS.register("metis")
def metis(problem: PlacementProblem, *, time_limit=None, seed=0):
    """The papers' CommPattern placement: METIS over the machine hierarchy, exact capacities, OCS nodes first.

    Parameters
    ----------
    problem : PlacementProblem
    time_limit : float, optional
        Not used; part of every method's signature.
    seed : int, optional
        Seeds METIS.

    Returns
    -------
    PlanResult
        ``rank_to_node`` and ``rank_to_slot``; :func:`~planner.problems.placement.problem.solve`
        fills in method, seed and wall time and validates it.

    References
    ----------
    003 section 4.1.3 ("CommPattern"), 000 section 4 (placement by METIS).

    Examples
    --------
    >>> from planner.core.topology_io import load_topology
    >>> from planner.traffic.matrix import load_traffic
    >>> p = PlacementProblem.build(load_topology("paper003"), load_traffic("neighbor2d:rows=16,cols=16,bytes=4MB,iters=5"))
    >>> metis(p).metrics["inter_switch_bytes"] < 1.92e9    # better than sequential's 1,920 MB
    True
    """
    return _map(problem, seed, "metis")


def _scotch_missing() -> str | None:
    return None if (shutil.which("gpart") or shutil.which("scotch_gpart")) else \
        "the Scotch 'gpart' program is not installed (apt-get install scotch)"


@METHODS.register("kahip", requires=module_missing("kahip", "pip install kahip"))
def kahip(problem: PlacementProblem, *, time_limit=None, seed=0):
    """As :func:`metis` with KaHIP's kaffpa as the partitioner (needs ``pip install kahip``).

    Parameters
    ----------
    problem : PlacementProblem
    time_limit : float, optional
        Not used; part of every method's signature.
    seed : int, optional
        Seeds KaHIP.

    Returns
    -------
    PlanResult
        ``rank_to_node`` and ``rank_to_slot``; :func:`~planner.problems.placement.problem.solve`
        fills in method, seed and wall time and validates it.

    Examples
    --------
    >>> from planner.problems.placement import METHODS
    >>> reason = METHODS.unavailable("kahip")       # None where kahip is installed
    >>> reason is None or "kahip" in reason
    True
    >>> from planner.core.topology_io import load_topology
    >>> from planner.traffic.matrix import load_traffic
    >>> p = PlacementProblem.build(load_topology("paper003"), load_traffic("neighbor2d:rows=16,cols=16,bytes=4MB"),
    ...                            objective="inter-switch")
    >>> kahip(p).objective  # doctest: +SKIP
    256000000.0

    (Skipped: the optional ``kahip`` module is not installed where the suite runs.)
    """
    return _map(problem, seed, "kahip")


@METHODS.register("scotch", requires=_scotch_missing)
def scotch(problem: PlacementProblem, *, time_limit=None, seed=0):
    """As :func:`metis` with Scotch's ``gpart`` as the partitioner (needs the ``scotch`` package).

    Parameters
    ----------
    problem : PlacementProblem
    time_limit : float, optional
        Not used; part of every method's signature.
    seed : int, optional
        Seeds Scotch.

    Returns
    -------
    PlanResult
        ``rank_to_node`` and ``rank_to_slot``; :func:`~planner.problems.placement.problem.solve`
        fills in method, seed and wall time and validates it.

    Examples
    --------
    >>> from planner.problems.placement import METHODS
    >>> reason = METHODS.unavailable("scotch")      # None where gpart is installed
    >>> reason is None or "gpart" in reason
    True
    >>> from planner.core.topology_io import load_topology
    >>> from planner.traffic.matrix import load_traffic
    >>> p = PlacementProblem.build(load_topology("paper003"), load_traffic("neighbor2d:rows=16,cols=16,bytes=4MB"),
    ...                            objective="inter-switch")
    >>> scotch(p).objective  # doctest: +SKIP
    256000000.0

    (Skipped: the optional Scotch ``gpart`` program is not installed where the suite runs.)
    """
    return _map(problem, seed, "scotch")
