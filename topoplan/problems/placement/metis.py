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
the ranks that cost least from over-full to under-full parts, and pairwise
FM passes at those sizes (:mod:`topoplan.problems.placement.refine`) then
lower the cut again; :func:`partition` keeps the best of several runs.

Why (measured on a 4,096-vertex random geometric graph against KaHIP's strong
configuration with perfect balance): pymetis's direct k-way above 8 parts
cut 2.3x more than recursive bisection at 128 parts; single METIS runs vary
by tens of percent with the seed; and the greedy repair leaves a local
optimum that FM at exact sizes improves (by 8% at 128 parts). With recursive
bisection, tries and refinement, ``metis`` cut 0.78-1.00x of KaHIP-strong
(best of 5 seeds) on four such graphs at 4, 16 and 128 parts.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from topoplan.core import deadline
from topoplan.core.errors import TopoplanError
from topoplan.core.extras import missing_extra, require
from topoplan.problems.placement import refine as refine_mod
from topoplan.problems.placement.problem import PlacementProblem, metis_run_cost_s, result_from
from topoplan.problems.placement.registry import METHODS
from topoplan.core.topology import GraphTopology, TorusTopology, TreeTopology

__all__ = ["PARTITIONERS", "KAHIP_MAX_WEIGHT", "default_tries", "kahip_tries", "repair_balance", "partition",
           "recursive_map", "ocs_first", "metis", "kahip", "scotch"]


# -- partitioners ------------------------------------------------------------------

#: Largest integer edge weight handed to KaHIP. Its FM refinement keeps gains in bucket queues sized by the
#: largest possible gain, so its time grows with the weights: on a 4,096-vertex random geometric graph
#: (16 parts, perfect balance) one strong run took 115 s with weights up to 56,500 and 1-2 s with weights
#: up to 1,000 or exact small integers (measured on the shared 2-core machine).
KAHIP_MAX_WEIGHT = 1000

#: Work budget of METIS per split: attempts x (edges + vertices) stays near this (:func:`default_tries`).
TRIES_WORK = 2 ** 20
MAX_NCUTS = 16
MAX_RUNS = 4
RUN_COST = 8      # attempts per extra run
#: Splits of fewer ranks get one run (METIS's attempts per bisection cover them; a torus has one split per node).
MIN_RUN_RANKS = 64
#: KaHIP runs per split: ``KAHIP_TRIES_WORK / (edges + vertices)``, 1 to ``KAHIP_MAX_RUNS`` (one strong run took
#: 4-6 s on the 4,096-rank geometric graph into 128 parts, where 3 METIS runs of 16 attempts took 0.6 s).
KAHIP_TRIES_WORK = 2 ** 17
KAHIP_MAX_RUNS = 5
#: CPU seconds of a process's first refinement before it runs: importing Numba and loading the compiled kernels from
#: its cache (METIS's first placement of 256 ranks in a process took 1.01 CPU s, the next 0.24), kept at 1.
REFINE_LOAD_S = 1.0
#: A run whose refinement is interpreted (:func:`topoplan.problems.placement.refine.runs_interpreted`) takes up to
#: this many times :func:`metis_run_cost_s` (measured on 64-128 ranks: 5-15x).
INTERPRETED_SLOWDOWN = 15.0


def _refine_loaded(W) -> bool:
    """Whether refining ``W`` runs at once: the process has the refinement's kernels loaded, or ``W`` is refined by
    the interpreter (otherwise the first run pays :data:`REFINE_LOAD_S`)."""
    return deadline.kernel_loaded(refine_mod._refine) or refine_mod.runs_interpreted(W)


def _int_weights(w: np.ndarray, max_weight: float = 1e6) -> np.ndarray:
    """Positive integer edge weights for METIS/KaHIP/Scotch, keeping the total within 32 bits.

    Weights that are integer multiples of a common unit with at most ``max_weight`` units are exact
    (divided by their greatest common divisor); others are scaled to at most ``max_weight``.
    """
    if len(w) == 0:
        return np.zeros(0, dtype=np.int64)
    if w.max() < 2 ** 62 and np.all(w == np.round(w)) and w.min() >= 1:
        wi = np.round(w).astype(np.int64)
        wi //= np.gcd.reduce(wi)
        if wi.max() <= max_weight and wi.sum() <= 1e9:
            return wi
    scale = min(max_weight / w.max(), 1e9 / w.sum())
    return np.maximum(1, np.round(w * scale)).astype(np.int64)


def default_tries(W: sp.csr_matrix) -> tuple[int, int]:
    """METIS's effort on graph ``W``: ``(runs, ncuts)`` from ``a = TRIES_WORK / (edges + vertices)``.

    ``ncuts`` = ``a`` METIS attempts per bisection (the best kept), at most ``MAX_NCUTS``; ``runs`` =
    ``a / RUN_COST`` whole runs (seeds ``seed, seed + 1, ...``, the smallest cut after repair and
    refinement kept), 1 to ``MAX_RUNS``. Small graphs get 4 runs of 16; a 4,096-rank graph with 16,000
    edges 3 runs of 16; 16,384 ranks of random traffic (131,000 edges) one run of 3.

    Examples
    --------
    >>> def ring(n):
    ...     return sp.diags([np.ones(n - 1), np.ones(n - 1)], [-1, 1], format="csr")
    >>> default_tries(ring(64)), default_tries(ring(16384)), default_tries(ring(262144))
    ((4, 16), (2, 16), (1, 1))
    """
    attempts = TRIES_WORK // (W.nnz + W.shape[0])
    return int(np.clip(attempts // RUN_COST, 1, MAX_RUNS)), int(np.clip(attempts, 1, MAX_NCUTS))


def kahip_tries(W: sp.csr_matrix) -> int:
    """KaHIP runs per split on graph ``W`` (``KAHIP_TRIES_WORK / (edges + vertices)``, 1 to ``KAHIP_MAX_RUNS``).

    Examples
    --------
    >>> kahip_tries(sp.csr_matrix((64, 64))), kahip_tries(sp.csr_matrix((40000, 40000)))
    (5, 3)
    """
    return int(np.clip(KAHIP_TRIES_WORK // (W.nnz + W.shape[0]), 1, KAHIP_MAX_RUNS))


def metis_parts(W: sp.csr_matrix, targets, seed: int = 0, ncuts: int | None = None) -> np.ndarray:
    """METIS recursive bisection of graph ``W`` aiming at part sizes ``targets`` (not exact: see :func:`partition`).

    Every bisection keeps the best of ``ncuts`` attempts (default from :func:`default_tries`).
    Recursive bisection, not METIS's direct k-way: on a 4,096-vertex random geometric graph cut into 128
    parts of 32, k-way cut 2.3x more than recursive bisection (23.7 GB vs 10.2 GB, one try each).
    """
    import pymetis

    n, k = W.shape[0], len(targets)
    if k == 1 or n <= 1 or W.nnz == 0:
        return _fill(n, targets)
    t = np.asarray(targets, dtype=np.float64)
    adj = pymetis.CSRAdjacency(W.indptr.astype(np.int64).tolist(), W.indices.astype(np.int64).tolist())
    opts = pymetis.Options(seed=int(seed) % (2**31))
    opts.ncuts = int(default_tries(W)[1] if ncuts is None else max(1, ncuts))
    _, part = pymetis.part_graph(k, adjacency=adj, eweights=_int_weights(W.data).tolist(),
                                 tpwgts=(t / t.sum()).tolist(), recursive=True, options=opts)
    return np.asarray(part, dtype=np.int64)


def kahip_parts(W: sp.csr_matrix, targets, seed: int = 0) -> np.ndarray:
    """KaHIP's kaffpa in its strong configuration with perfect balance (imbalance 0), when ``kahip`` is installed.

    Equal targets are one perfectly balanced kaffpa call. Unequal targets: isolated padding vertices
    bring every part to the largest target, kaffpa balances those perfectly, and the parts (padding
    dropped) are matched to the targets by size; :func:`partition` then repairs what is left over.
    """
    kahip = require("kahip", "method kahip")
    n, k = W.shape[0], len(targets)
    if k == 1 or n <= 1 or W.nnz == 0:
        return _fill(n, targets)
    targets = np.asarray(targets, dtype=np.int64)
    big = int(targets.max())
    pad = big * k - n
    indptr = np.concatenate([W.indptr, np.full(pad, W.indptr[-1])]).astype(np.int64)
    w = _int_weights(W.data, KAHIP_MAX_WEIGHT)
    _, part = kahip.kaffpa([1] * (n + pad), indptr.tolist(), w.tolist(), W.indices.tolist(), k, 0.0, True,
                           int(seed) % (2**31), kahip.STRONG)
    part = np.asarray(part, dtype=np.int64)[:n]
    if pad:   # the largest real parts get the largest targets
        real = np.bincount(part, minlength=k)
        label = np.empty(k, dtype=np.int64)
        label[np.argsort(-real, kind="stable")] = np.argsort(-targets, kind="stable")
        part = label[part]
    return part


def scotch_parts(W: sp.csr_matrix, targets, seed: int = 0) -> np.ndarray:
    """Scotch (``gpart`` of the Debian/Ubuntu ``scotch`` package) partition into ``len(targets)`` parts (one try)."""
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


def repair_balance(W: sp.csr_matrix, part, targets) -> np.ndarray:
    """Exact part sizes by the cheapest moves: :func:`topoplan.problems.placement.refine.repair` (compiled, sparse;
    interpreted for a small graph: :func:`topoplan.problems.placement.refine.for_graph`).

    Examples
    --------
    >>> W = sp.csr_matrix(np.array([[0, 5, 1], [5, 0, 0], [1, 0, 0]], float))
    >>> repair_balance(W, np.array([0, 0, 0]), [2, 1]).tolist()
    [0, 0, 1]
    """
    return refine_mod.for_graph(W).repair(W, part, targets)


def partition(W: sp.csr_matrix, targets, seed: int = 0, partitioner: str = "metis",
              tries: int | None = None, ncuts: int | None = None, pair_ties: bool = False,
              plain: bool = False, end_at: float | None = None) -> np.ndarray:
    """Partition graph ``W`` into parts of exactly ``targets[p]`` vertices: partitioner, repair, refinement.

    Each try runs the partitioner (seeds ``seed, seed + 1, ...``), makes its parts exact with
    :func:`repair_balance` and improves them with pairwise FM passes that keep the sizes
    (:func:`topoplan.problems.placement.refine.refine`); the smallest cut is kept (ties: the first, or
    with ``pair_ties`` the one whose cut joins the fewest pairs of parts).

    ``pair_ties`` is for the switch-level split of a hybrid network, where every pair of switches that
    exchanges traffic needs its own circuit: two partitions with the same cut are not equally good
    there. (000's Neighbor, 8 x 16 ranks on 4 switches: four 8 x 4 strips and a 2 x 2-like layout both
    cut 24 rank pairs, but the strips chain the switches with 3 switch pairs, the other needs 4, so
    with 3 circuits one pair stays on the EPS uplinks and the run is 1.5x slower under 000's model.)
    It also adds one plain METIS run (one attempt, repair only) to the candidates.

    ``plain`` is METIS as the papers ran it: one run of one attempt per bisection, made exact by the
    repair alone (no refinement, no tie-break): to reproduce a paper's own METIS cut.

    Parameters
    ----------
    W : scipy.sparse.csr_matrix
        Symmetric rank graph (bytes).
    targets : sequence of int
    seed : int, optional
    partitioner : {"metis", "kahip", "scotch"}, optional
        See :data:`PARTITIONERS`.
    tries : int, optional
        Runs of the partitioner (default by graph size: METIS :func:`default_tries`, 1 to 4; KaHIP
        :func:`kahip_tries`, 1 to 5; Scotch 1).
    ncuts : int, optional
        METIS's attempts per bisection (default :func:`default_tries`).
    pair_ties : bool, optional
        Break equal cuts by the fewest pairs of parts joined (see above).
    plain : bool, optional
        One plain METIS run, repaired to exact sizes (see above).
    end_at : float, optional
        A ``time.perf_counter()`` instant: a run after the first starts only when it is predicted to end
        by then (as long as the longest run so far); None: every run.

    Returns
    -------
    numpy.ndarray
        Part of every vertex.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.sources import load_traffic
    >>> p = PlacementProblem.build(load_topology("paper003"), load_traffic("neighbor2d:rows=16,cols=16,bytes=4MB"),
    ...                            objective="inter-switch")
    >>> from topoplan.problems.placement.refine import cut_weight
    >>> parts = partition(p.graph(), [64] * 4)
    >>> np.bincount(parts).tolist(), cut_weight(p.graph(), parts)      # 32 cut edges of 8 MB
    ([64, 64, 64, 64], 256000000.0)
    """
    kernels = refine_mod.for_graph(W)
    cut_weight, refine = kernels.cut_weight, kernels.refine
    targets = np.asarray(targets, dtype=np.int64)
    if targets.sum() != W.shape[0]:
        raise ValueError("targets must add up to the number of vertices")
    if len(targets) == 1:
        return np.zeros(W.shape[0], dtype=np.int64)
    if plain:
        return repair_balance(W, metis_parts(W, targets, seed, ncuts=1), targets)
    if tries is None:
        tries = {"metis": default_tries(W)[0], "kahip": kahip_tries(W)}.get(partitioner, 1)
    extra = {"ncuts": ncuts} if partitioner == "metis" else {}
    cands, longest = [], 0.0
    for i in range(max(1, int(tries))):
        t_run = time.perf_counter()
        if i and end_at is not None and t_run + longest > end_at:
            break
        raw = PARTITIONERS[partitioner](W, targets, seed + i, **extra)
        cands.append(refine(W, repair_balance(W, raw, targets), targets))
        longest = max(longest, time.perf_counter() - t_run)
    if pair_ties:
        cands.append(repair_balance(W, metis_parts(W, targets, seed, ncuts=1), targets))
    cuts = [cut_weight(W, part) for part in cands]
    low = min(cuts)
    if not pair_ties:
        return cands[cuts.index(low)]
    tied = [i for i, c in enumerate(cuts) if c <= low * (1 + 1e-9)]
    return cands[min(tied, key=lambda i: (_part_pairs(W, cands[i]), i))]


def _part_pairs(W: sp.csr_matrix, part: np.ndarray) -> int:
    """Pairs of distinct parts joined by at least one edge of ``W``."""
    coo = W.tocoo()
    a, b = part[coo.row], part[coo.col]
    keep = a < b
    return len(np.unique(a[keep] * (int(part.max()) + 1) + b[keep]))


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
                  domains=None, tries: int | None = None, plain: bool = False,
                  end_at: float | None = None, in_order: list | None = None) -> np.ndarray:
    """Map ranks down the machine hierarchy with exact capacities; returns ``rank_to_node``.

    ``domains`` -- optional list of ``(ranks, nodes)`` to start from (e.g. the ranks
    an exact model put on each switch); default: all ranks on the whole machine.
    The single-core nodes of one switch (tree or graph topology) take their ranks in order: every
    assignment of those ranks to those nodes has the same hops, switch crossings and link loads.
    The partitioner's effort (runs, METIS attempts per bisection) is set once from the whole rank
    graph (:func:`default_tries`, :func:`kahip_tries`), so each level of the machine costs about the same;
    splits of fewer than ``MIN_RUN_RANKS`` ranks get one run, and a split where every part gets one rank
    (or one part gets them all) takes the ranks in order: every such split cuts the same bytes.

    Parameters
    ----------
    problem : PlacementProblem
    seed : int, optional
    partitioner : {"metis", "kahip", "scotch"}, optional
    domains : list of (array_like, array_like), optional
    tries : int, optional
        Runs of the partitioner per split (see :func:`partition`; default from the whole rank graph).
    plain : bool, optional
        Plain METIS runs (see :func:`partition`).
    end_at : float, optional
        A ``time.perf_counter()`` instant: a split makes no more runs than its first after it (see
        :func:`partition`), and a split whose first METIS run is predicted to end after it
        (:func:`metis_run_cost_s`, and :data:`REFINE_LOAD_S` for the process's first, at the share of a CPU the
        process is getting) takes its ranks in order (exact sizes, the cheapest split) instead.
    in_order : list, optional
        Gets one entry (the split's rank count) per split that took its ranks in order for ``end_at``.

    Returns
    -------
    numpy.ndarray
        ``rank_to_node``; every node gets at most its cores.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.sources import load_traffic
    >>> p = PlacementProblem.build(load_topology("paper003"), load_traffic("neighbor2d:rows=16,cols=16,bytes=4MB"),
    ...                            objective="inter-switch")
    >>> rank_to_node = recursive_map(p)
    >>> int(np.bincount(rank_to_node, minlength=64).max()), p.cost(rank_to_node)
    (4, 256000000.0)
    """
    W = problem.graph()
    node_of = np.full(problem.n_ranks, -1, dtype=np.int64)
    cores, sw = problem.cores, problem.node_switch
    tree_like = isinstance(problem.topology, (TreeTopology, GraphTopology))
    hybrid = isinstance(problem.topology, TreeTopology) and problem.topology.ocs is not None
    runs, ncuts = default_tries(W)
    if partitioner == "kahip":
        runs = kahip_tries(W)
    elif partitioner != "metis":
        runs = 1
    runs = runs if tries is None else tries
    stack = list(domains) if domains is not None else [(np.arange(problem.n_ranks), np.arange(problem.n_nodes))]
    while stack:
        ranks, nodes = stack.pop()
        if len(ranks) == 0:
            continue
        if len(nodes) == 1:
            node_of[ranks] = nodes[0]
            continue
        if tree_like and (cores[nodes] == 1).all() and (sw[nodes] == sw[nodes[0]]).all():
            node_of[ranks] = nodes[:len(ranks)]
            continue
        kids = children(problem, nodes)
        cap = np.array([cores[k].sum() for k in kids], dtype=np.int64)
        # fill sub-domains in order when there are fewer ranks than cores
        counts = np.minimum(cap, np.maximum(0, len(ranks) - np.concatenate([[0], np.cumsum(cap)[:-1]])))
        used = np.flatnonzero(counts > 0)
        if len(used) == 1 or (counts[used] == 1).all():   # one part, or one rank each: every split cuts alike
            part = np.arange(len(ranks)) if len(used) > 1 else np.zeros(len(ranks), dtype=np.int64)
        else:
            sub = W[ranks][:, ranks].tocsr()
            slowdown = INTERPRETED_SLOWDOWN if refine_mod.runs_interpreted(sub) else 1.0
            if end_at is not None and partitioner == "metis" and not plain and time.perf_counter() + deadline.scaled(
                    metis_run_cost_s(sub.nnz // 2, len(used)) * slowdown
                    + (0.0 if _refine_loaded(sub) else REFINE_LOAD_S)) > end_at:
                part = _fill(len(ranks), counts[used])   # the split's first run would end past the time limit
                if in_order is not None:
                    in_order.append(len(ranks))
            else:
                part = partition(sub, counts[used], seed=seed + len(stack), partitioner=partitioner,
                                 tries=runs if len(ranks) >= MIN_RUN_RANKS else 1, ncuts=ncuts, plain=plain,
                                 pair_ties=hybrid and len(kids) > 1 and sw[kids[0][0]] != sw[kids[1][0]],
                                 end_at=end_at)
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
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.sources import load_traffic
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


def _map(problem: PlacementProblem, seed, partitioner: str, tries, plain: bool = False, time_limit=None):
    if tries is not None and (isinstance(tries, bool) or not isinstance(tries, (int, np.integer)) or tries < 1):
        raise TopoplanError(f"method {partitioner}: field 'tries': a positive integer, got {tries!r}")
    if not isinstance(plain, bool):
        raise TopoplanError(f"method {partitioner}: field 'plain': true or false, got {plain!r}")
    end_at = None if time_limit is None else time.perf_counter() + float(time_limit)
    in_order: list = []
    node = ocs_first(problem, recursive_map(problem, seed=seed or 0, partitioner=partitioner, tries=tries,
                                            plain=plain, end_at=end_at, in_order=in_order))
    opts = {"partitioner": partitioner, "tries": tries}
    if plain:
        opts["plain"] = True
    res = result_from(problem, node, options=opts)
    if in_order:
        res.message = (f"{len(in_order)} splits ({sum(in_order):,} ranks) took their ranks in order: their METIS run "
                       "would have ended past the time limit")
    return res


@METHODS.register("metis")
def metis(problem: PlacementProblem, *, time_limit=None, seed=0, tries: int | None = None, plain: bool = False):
    """The papers' CommPattern placement: METIS over the machine hierarchy, exact capacities, OCS nodes first.

    At every level of the machine: METIS's recursive bisection, exact capacities
    (:func:`repair_balance`) and pairwise FM refinement at those capacities
    (:func:`topoplan.problems.placement.refine.refine`), the best of ``tries`` runs (:func:`partition`).

    Parameters
    ----------
    problem : PlacementProblem
    time_limit : float, optional
        Seconds after which every split keeps its first run (and the runs that ended by then) instead
        of making all of ``tries``; None (default): all of them, whatever they take.
    seed : int, optional
        Seeds METIS.
    tries : int, optional
        METIS runs per split (seeds ``seed, seed + 1, ...``; the smallest cut after repair and
        refinement kept; default by graph size, :func:`default_tries`: 1 to 4 runs of up to 16 attempts
        per bisection). On a hybrid network equal cuts of the switch-level split go to the partition
        that joins the fewest switch pairs (each needs a circuit; see :func:`partition`).
    plain : bool, optional
        METIS as the papers ran it: one run of one attempt per bisection, exact sizes by the repair
        alone, no refinement or tie-break (to reproduce a paper's own, suboptimal, METIS cut).

    Returns
    -------
    PlanResult
        ``rank_to_node`` and ``rank_to_slot``; :func:`~topoplan.problems.placement.problem.solve`
        fills in method, seed and wall time and validates it.

    References
    ----------
    003 section 4.1.3 ("CommPattern"), 000 section 4 (placement by METIS).

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.sources import load_traffic
    >>> p = PlacementProblem.build(load_topology("paper003"), load_traffic("neighbor2d:rows=16,cols=16,bytes=4MB,iters=5"))
    >>> metis(p).metrics["inter_switch_bytes"] < 1.92e9    # better than sequential's 1,920 MB
    True
    """
    return _map(problem, seed, "metis", tries, plain, time_limit)


def _scotch_missing() -> str | None:
    return None if (shutil.which("gpart") or shutil.which("scotch_gpart")) else \
        "the Scotch 'gpart' program is not installed (apt-get install scotch)"


@METHODS.register("kahip", requires=lambda: missing_extra("kahip", "method kahip"))
def kahip(problem: PlacementProblem, *, time_limit=None, seed=0, tries: int | None = None):
    """As :func:`metis` with KaHIP's kaffpa, strong configuration, perfect balance, as the partitioner.

    Needs the ``kahip`` extra (``pip install 'topoplan[kahip]'``). Every split is one kaffpa call in its strong mode with
    imbalance 0 (:func:`kahip_parts`), then exact capacities and FM refinement as for :func:`metis`.
    KaHIP's perfect balance gets slow on large expander-like graphs (on the shared 2-core machine:
    6 s on a 4,096-rank geometric graph into 128 parts, 46 s on 4,096 ranks of random traffic, over
    300 s on 16,384).

    Parameters
    ----------
    problem : PlacementProblem
    time_limit : float, optional
        Seconds after which every split keeps its first run (and the runs that ended by then) instead
        of making all of ``tries``; None (default): all of them, whatever they take.
    seed : int, optional
        Seeds KaHIP.
    tries : int, optional
        KaHIP runs per split (seeds ``seed, seed + 1, ...``), the smallest cut after repair and
        refinement kept (default by graph size, :func:`kahip_tries`: 5 up to 26,000 edges, counted
        both ways, plus vertices; 1 from 131,000).

    Returns
    -------
    PlanResult
        ``rank_to_node`` and ``rank_to_slot``; :func:`~topoplan.problems.placement.problem.solve`
        fills in method, seed and wall time and validates it.

    Examples
    --------
    >>> from topoplan.problems.placement import METHODS
    >>> reason = METHODS.unavailable("kahip")       # None where kahip is installed
    >>> reason is None or "kahip" in reason
    True
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.sources import load_traffic
    >>> p = PlacementProblem.build(load_topology("paper003"), load_traffic("neighbor2d:rows=16,cols=16,bytes=4MB"),
    ...                            objective="inter-switch")
    >>> r = kahip(p)
    >>> r.objective, np.bincount(r.plan["rank_to_node"]).tolist() == [4] * 64
    (256000000.0, True)
    """
    return _map(problem, seed, "kahip", tries, time_limit=time_limit)


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
        ``rank_to_node`` and ``rank_to_slot``; :func:`~topoplan.problems.placement.problem.solve`
        fills in method, seed and wall time and validates it.

    Examples
    --------
    >>> from topoplan.problems.placement import METHODS
    >>> reason = METHODS.unavailable("scotch")      # None where gpart is installed
    >>> reason is None or "gpart" in reason
    True
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.sources import load_traffic
    >>> p = PlacementProblem.build(load_topology("paper003"), load_traffic("neighbor2d:rows=16,cols=16,bytes=4MB"),
    ...                            objective="inter-switch")
    >>> scotch(p).objective  # doctest: +SKIP
    256000000.0

    (Skipped: the optional Scotch ``gpart`` program is not installed where the suite runs.)
    """
    return _map(problem, seed, "scotch", None)
