"""Inter-switch traffic analysis: what crosses the EPS uplinks, per pair of edge switches.

Reproduces the papers' tables: 000 Table 2/3 (node pairs communicating
between switches) and 003 Table 2 (inter-switch volume, large/small).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from topoplan.core import memory
from topoplan.core.errors import TopoplanError

__all__ = ["DEFAULT_THRESHOLD_B", "PAIR_COUNTS", "default_threshold", "SwitchAnalysis", "analyze"]

DEFAULT_THRESHOLD_B = 8192.0  # the papers' large-message threshold when there is no OCS


def default_threshold(topo) -> float:
    """The OCS bandwidth-delay product on a hybrid topology (003), else 8192 B (000, 001).

    Parameters
    ----------
    topo : Topology

    Returns
    -------
    float
        Bytes: messages of at least this size are "large" (they may take circuits).

    References
    ----------
    003 section 3.1 (large messages: above the OCS bandwidth-delay product);
    000 section 4 and 001 section 4.1 use a fixed threshold.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> round(default_threshold(load_topology("paper003")), 6)   # 20 Gbps x 500 ns
    1250.0
    >>> default_threshold(load_topology("mesh10x10x10"))
    8192.0
    """
    ocs = getattr(topo, "ocs", None)
    return ocs.bdp_B if ocs is not None else DEFAULT_THRESHOLD_B


PAIR_COUNTS = ("any", "large")


@dataclass
class SwitchAnalysis:
    """Per edge-switch pair: distinct communicating node pairs and bytes (large/small).

    ``node_pairs`` counts *unordered* node pairs (a and b exchanging in either direction count once) that
    exchange any message (``pairs="any"``, zero-byte synchronisation messages such as a barrier's included) or at
    least one message of ``threshold_B`` bytes or more
    (``pairs="large"``, 000 Table 2's "node pairs that have inter-switch communication": the ones circuits
    can serve; zero-byte synchronisation messages of a real trace do not make a pair).

    Parameters
    ----------
    switch_names : list of str
    threshold_B : float
        The large-message threshold used.
    node_pairs : numpy.ndarray
        S x S, symmetric; diagonal = node pairs inside one switch.
    bytes, large_bytes, small_bytes : numpy.ndarray
        S x S, bytes sent from switch i to switch j (diagonal: intra-switch, inter-node), all, large, small.
    intra_node_bytes, total_bytes : float
    pairs : {"any", "large"}, optional
        What ``node_pairs`` counts.

    See Also
    --------
    analyze : makes one.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.sources import load_traffic
    >>> from topoplan.core.placement import sequential
    >>> t = load_topology("paper003")
    >>> a = analyze(t, load_traffic("neighbor2d:rows=16,cols=16,bytes=4MB,iters=5"), sequential(256, t))
    >>> a.switch_names, a.node_pairs.tolist()
    (['S0', 'S1', 'S2', 'S3'], [[24, 4, 0, 0], [4, 24, 4, 0], [0, 4, 24, 4], [0, 0, 4, 24]])
    >>> a.to_dict()["inter_switch_node_pairs"], a.inter(a.large_bytes), a.intra_node_bytes
    (12, 1920000000.0, 7680000000.0)
    """

    switch_names: list[str]
    threshold_B: float
    node_pairs: np.ndarray      # S x S, symmetric; diagonal = node pairs inside one switch
    bytes: np.ndarray           # S x S, bytes sent from switch i to switch j (diagonal: intra-switch, inter-node)
    large_bytes: np.ndarray
    small_bytes: np.ndarray
    intra_node_bytes: float
    total_bytes: float
    pairs: str = "any"

    @property
    def inter_switch_bytes(self) -> float:
        return float(self.bytes.sum() - np.trace(self.bytes))

    def inter(self, m: np.ndarray) -> float:
        return float(m.sum() - np.trace(m))

    def to_dict(self) -> dict:
        iu = np.triu_indices(len(self.switch_names), 1)
        return {
            "switches": self.switch_names,
            "threshold_B": self.threshold_B,
            "node_pairs": self.node_pairs.tolist(),
            "node_pairs_count": self.pairs,
            "node_pairs_ordered": False,
            "bytes": self.bytes.tolist(),
            "large_bytes": self.large_bytes.tolist(),
            "small_bytes": self.small_bytes.tolist(),
            "inter_switch_node_pairs": int(self.node_pairs[iu].sum()),
            "inter_switch_bytes": self.inter_switch_bytes,
            "inter_switch_large_bytes": self.inter(self.large_bytes),
            "inter_switch_small_bytes": self.inter(self.small_bytes),
            "intra_switch_bytes": float(np.trace(self.bytes)),
            "intra_node_bytes": self.intra_node_bytes,
            "total_bytes": self.total_bytes,
        }


# S x S float64 matrices held at once: bytes, large and small, the scratch of making them, and the pair counts
_MATRICES = 6


def _check_matrix_memory(topo, s: int) -> None:
    """Refuse, before allocating, an analysis whose S x S switch matrices the memory available cannot hold."""
    need = _MATRICES * 8 * s * s
    have = memory.memory_left()
    if have is not None and need > have:
        raise TopoplanError(f"{topo.name or 'topology'}: the analysis's {s:,} x {s:,} matrices of switch pairs need "
                            f"about {need / 2**30:,.1f} GiB, more than the {have / 2**30:.1f} GiB of memory "
                            "available (on a mesh or torus every router is a switch); analyze a topology with "
                            "fewer switches")


def analyze(topo, traffic, placement, threshold_B: float | None = None, *, pairs: str = "any") -> SwitchAnalysis:
    """Count node pairs and bytes between edge switches.

    Parameters
    ----------
    topo : Topology
        Tree kinds give one row per edge switch; torus: one per router.
    traffic : Traffic
    placement : Placement
    threshold_B : float, optional
        Messages of at least this size are "large" (default :func:`default_threshold`).
    pairs : {"any", "large"}, optional
        ``"any"`` counts unordered node pairs exchanging any message; ``"large"`` only those exchanging
        a large message (see :class:`SwitchAnalysis`).

    Returns
    -------
    SwitchAnalysis

    Raises
    ------
    TopoplanError
        For an unknown ``pairs``, or when the S x S matrices would not fit in the memory available (on a
        mesh or torus every router is a switch: the K computer's 82,944 would need terabytes).

    References
    ----------
    000 Tables 2 and 3 (node pairs between switches), 003 Table 2 (inter-switch volume).

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.sources import load_traffic
    >>> from topoplan.core.placement import sequential
    >>> t = load_topology("paper003"); tr = load_traffic("neighbor2d:rows=16,cols=16,bytes=4MB,iters=5")
    >>> analyze(t, tr, sequential(256, t)).inter_switch_bytes
    1920000000.0
    """
    if pairs not in PAIR_COUNTS:
        raise TopoplanError(f"field 'pairs': choose one of {', '.join(PAIR_COUNTS)}, got {pairs!r}")
    thr = default_threshold(topo) if threshold_B is None else float(threshold_B)
    node_of = placement.rank_to_node
    sw_of = topo.node_switch()
    s = int(sw_of.max()) + 1
    _check_matrix_memory(topo, s)
    a, b = node_of[traffic.src], node_of[traffic.dst]
    inter_node = a != b
    sa, sb = sw_of[a], sw_of[b]
    by = traffic.bytes
    large = traffic.msg_bytes >= thr

    def mat(mask):
        m = np.zeros((s, s))
        np.add.at(m, (sa[mask], sb[mask]), by[mask])
        return m

    big, small = mat(inter_node & large), mat(inter_node & ~large)
    # distinct unordered node pairs that exchange any message (or a large one)
    counted = inter_node & (large if pairs == "large" else True)
    lo, hi = np.minimum(a, b)[counted], np.maximum(a, b)[counted]
    n = topo.n_nodes
    uniq = np.unique(lo * n + hi)
    p_lo, p_hi = uniq // n, uniq % n
    npairs = np.zeros((s, s), dtype=np.int64)
    np.add.at(npairs, (sw_of[p_lo], sw_of[p_hi]), 1)
    npairs = npairs + npairs.T - np.diag(np.diag(npairs))
    names = topo.switch_labels()[:s]   # switches without hosts past the last edge switch have no row
    return SwitchAnalysis(names, thr, npairs, big + small, big, small,
                          float(by[~inter_node & (traffic.src != traffic.dst)].sum()),
                          traffic.total_bytes(), pairs)
