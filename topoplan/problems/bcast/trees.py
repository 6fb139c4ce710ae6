"""Logical Bcast schedules over communicator positions (MVAPICH2/MPICH algorithms).

The trees and thresholds themselves live in :mod:`topoplan.traffic.collectives` (one home
for every collective algorithm: :func:`~topoplan.traffic.collectives.bcast_tree`,
:func:`~topoplan.traffic.collectives.bcast_algorithm`); this module arranges them as the
:class:`Schedule` that the reordering's time model and methods work on.

A schedule is written over *positions* ``p = (rank - root) mod n`` so that the
root is position 0. It has two phases:

* a tree phase: every position receives once from ``parent[p]`` and then
  sends to its children one after another (``sends[p]``, ordered, with the
  bytes of each message);
* an optional allgather phase (scatter-allgather only): ``ring`` (n-1 steps,
  p -> p+1, one chunk each) or ``rd`` (recursive doubling, step s exchanges
  ``chunk * 2**s`` bytes with ``p xor 2**s``).

Examples
--------
>>> s = knomial(8, k=4)
>>> [list(d for d, _ in s.sends[p]) for p in range(3)]
[[4, 1, 2, 3], [], []]
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from topoplan.traffic.collectives import MPICHThresholds, bcast_algorithm, bcast_tree
from topoplan.core.errors import TopoplanError

__all__ = ["Schedule", "knomial", "binomial", "scatter_allgather", "build", "rank_of", "position_of",
           "TREES", "SHORT_MSG_B", "LONG_MSG_B"]

TREES = ("knomial", "binomial", "scatter-allgather", "scatter-ring", "scatter-rd", "auto")

# MPICH's MPIR_CVAR_BCAST_SHORT_MSG_SIZE / LONG_MSG_SIZE defaults (from topoplan.traffic.collectives)
SHORT_MSG_B = MPICHThresholds.bcast_short_B
LONG_MSG_B = MPICHThresholds.bcast_long_B


@dataclass
class Schedule:
    """A Bcast over ``n`` positions (root = position 0).

    ``sends[p]`` is the ordered list of ``(child position, bytes)``;
    ``parent[p]`` the position p receives from (-1 for the root);
    ``allgather`` is ``None``, ``"ring"`` or ``"rd"`` with ``chunk_B`` bytes per block.

    Parameters
    ----------
    n : number of positions; kind : tree name; bytes_B : message size;
    sends, parent : the tree (see above); allgather, chunk_B : the optional allgather phase;
    k : the K factor of a k-nomial tree.

    Examples
    --------
    >>> s = binomial(4, 1024.0)
    >>> s.parent.tolist(), s.sends[0]
    ([-1, 0, 0, 2], [(2, 1024.0), (1, 1024.0)])
    >>> s.subtree_sizes().tolist()
    [4, 1, 2, 1]
    """

    n: int
    kind: str
    bytes_B: float
    sends: list[list[tuple[int, float]]]
    parent: np.ndarray
    allgather: str | None = None
    chunk_B: float = 0.0
    k: int = 2
    # flattened tree edges in send order: parent, child, bytes, index of the send within the parent
    edges: dict = field(default_factory=dict, repr=False)

    def __post_init__(self):
        par, ch, b, idx = [], [], [], []
        for p, lst in enumerate(self.sends):
            for j, (c, nb) in enumerate(lst):
                par.append(p); ch.append(c); b.append(nb); idx.append(j)
        self.edges = {"parent": np.asarray(par, dtype=np.int64), "child": np.asarray(ch, dtype=np.int64),
                      "bytes": np.asarray(b, dtype=np.float64), "index": np.asarray(idx, dtype=np.int64)}
        self.levels = _levels(self.parent)

    def subtree_sizes(self) -> np.ndarray:
        """Number of positions in the subtree of every position (itself included)."""
        size = np.ones(self.n, dtype=np.int64)
        for lvl in reversed(self.levels[1:]):
            np.add.at(size, self.parent[lvl], size[lvl])
        return size

    def allgather_pairs(self) -> list[tuple[np.ndarray, np.ndarray, float, int]]:
        """Allgather steps as ``(src positions, dst positions, bytes, repeat count)``."""
        n = self.n
        if self.allgather is None or n < 2:
            return []
        if self.allgather == "ring":
            src = np.arange(n)
            return [(src, (src + 1) % n, self.chunk_B, n - 1)]
        steps, s = [], 1
        while s < n:
            src = np.arange(n)
            dst = src ^ s
            ok = dst < n
            steps.append((src[ok], dst[ok], self.chunk_B * s, 1))
            s *= 2
        return steps


def _levels(parent: np.ndarray) -> list[np.ndarray]:
    """Positions grouped by depth (level 0 = root)."""
    n = len(parent)
    depth = np.full(n, -1, dtype=np.int64)
    depth[parent < 0] = 0
    for _ in range(n):
        todo = depth < 0
        if not todo.any():
            break
        ready = todo & (depth[np.maximum(parent, 0)] >= 0)
        depth[ready] = depth[parent[ready]] + 1
    return [np.flatnonzero(depth == d) for d in range(int(depth.max()) + 1)]


def knomial(n: int, k: int = 4, bytes_B: float = 0.0) -> Schedule:
    """MVAPICH2's k-nomial tree: children at distance ``mask * j`` (j < k), largest mask first
    (:func:`topoplan.traffic.collectives.bcast_tree`).

    Parameters
    ----------
    n : number of positions; k : the K factor (2 gives the binomial tree); bytes_B : message size.

    Returns
    -------
    Schedule

    Examples
    --------
    >>> s = knomial(8, k=4, bytes_B=1024.0)
    >>> s.kind, s.parent.tolist()
    ('knomial', [-1, 0, 0, 0, 0, 4, 4, 4])
    """
    if n < 1:
        raise TopoplanError("field 'n': a Bcast needs at least one rank")
    parent, sends = bcast_tree(n, float(bytes_B), "knomial" if k != 2 else "binomial", k=k)
    return Schedule(n, "knomial" if k != 2 else "binomial", float(bytes_B), sends, parent, k=k)


def binomial(n: int, bytes_B: float = 0.0) -> Schedule:
    """The binomial tree (k-nomial with K = 2).

    Parameters
    ----------
    n : number of positions; bytes_B : message size.

    Returns
    -------
    Schedule

    Examples
    --------
    >>> binomial(8).parent.tolist()
    [-1, 0, 0, 2, 0, 4, 4, 6]
    """
    return knomial(n, 2, bytes_B)


def scatter_allgather(n: int, bytes_B: float, allgather: str = "ring") -> Schedule:
    """MPICH's large-message Bcast: binomial scatter of n chunks of ``ceil(bytes / n)``, then a ring or
    recursive-doubling allgather (:func:`topoplan.traffic.collectives.bcast_tree`).

    Parameters
    ----------
    n : number of positions; bytes_B : message size; allgather : ``"ring"`` or ``"rd"``.

    Returns
    -------
    Schedule

    Examples
    --------
    >>> s = scatter_allgather(8, 1e6)
    >>> s.kind, s.chunk_B
    ('scatter-ring', 125000.0)
    """
    if allgather not in ("ring", "rd"):
        raise TopoplanError(f"field 'allgather': ring or rd, got {allgather!r}")
    if n < 1:
        raise TopoplanError("field 'n': a Bcast needs at least one rank")
    parent, sends = bcast_tree(n, float(bytes_B), f"scatter-{allgather}")
    chunk = float(-(-float(bytes_B) // n))
    return Schedule(n, f"scatter-{allgather}", float(bytes_B), sends, parent, allgather=allgather,
                    chunk_B=chunk, k=2)


def build(tree: str, n: int, bytes_B: float, *, k: int = 4, short_B: float = SHORT_MSG_B,
          long_B: float = LONG_MSG_B) -> Schedule:
    """The schedule named ``tree``; ``auto`` picks by size like MPICH/MVAPICH2.

    ``auto``: below ``short_B`` (or fewer than 8 ranks) the k-nomial tree; below
    ``long_B`` with a power-of-two size scatter + recursive doubling; otherwise
    scatter + ring. ``scatter-allgather`` picks rd or ring by the same rule
    (:func:`topoplan.traffic.collectives.bcast_algorithm`).

    Parameters
    ----------
    tree : one of :data:`TREES`; n : number of positions; bytes_B : message size;
    k : K factor of the k-nomial tree; short_B, long_B : the ``auto`` thresholds.

    Returns
    -------
    Schedule

    Examples
    --------
    >>> build("auto", 8, 100.0).kind, build("auto", 8, 1e6).kind
    ('knomial', 'scatter-ring')
    """
    if tree not in TREES:
        raise TopoplanError(f"field 'tree': {tree!r}: choose one of {', '.join(TREES)}")
    th = MPICHThresholds(bcast_short_B=short_B, bcast_long_B=long_B)
    if tree in ("auto", "scatter-allgather"):
        tree = bcast_algorithm(n, float(bytes_B), tree, th)
        if tree == "binomial":  # MVAPICH2 runs its k-nomial tree where MPICH runs the binomial one
            tree = "knomial"
    if tree == "knomial":
        return knomial(n, k, bytes_B)
    if tree == "binomial":
        return binomial(n, bytes_B)
    return scatter_allgather(n, bytes_B, "rd" if tree == "scatter-rd" else "ring")


def rank_of(position, root: int, n: int):
    """Communicator rank of a position (root = position 0).

    Parameters
    ----------
    position : position(s); root : root rank; n : communicator size.

    Returns
    -------
    numpy.ndarray of ranks.

    Examples
    --------
    >>> rank_of([0, 1, 7], root=3, n=8).tolist()
    [3, 4, 2]
    """
    return (np.asarray(position) + root) % n


def position_of(rank, root: int, n: int):
    """Position of a communicator rank (the inverse of :func:`rank_of`).

    Parameters
    ----------
    rank : rank(s); root : root rank; n : communicator size.

    Returns
    -------
    numpy.ndarray of positions.

    Examples
    --------
    >>> position_of([3, 4, 2], root=3, n=8).tolist()
    [0, 1, 7]
    """
    return (np.asarray(rank) - root) % n
