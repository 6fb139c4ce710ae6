"""Rank traffic as a circuit problem's node-level loads: what no plan moves, and the large inter-switch pairs.

One aggregation for the whole traffic (:meth:`topoplan.problems.circuits.CircuitProblem.build`) and for
each step type of an application (:func:`topoplan.problems.circuits.steps.step_loads`).
"""

from __future__ import annotations

import numpy as np

__all__ = ["node_loads", "byte_sums"]


def node_loads(traffic, node, node_switch, n_nodes: int, n_switches: int, threshold_B: float) -> dict:
    """Rank traffic as a circuit problem's node-level loads (the aggregation of :meth:`CircuitProblem.build`).

    Parameters
    ----------
    traffic : Traffic
    node : numpy.ndarray
        Node of every rank.
    node_switch : numpy.ndarray
        Switch of every node.
    n_nodes, n_switches : int
    threshold_B : float
        Large-message threshold.

    Returns
    -------
    dict
        ``up``, ``down``, ``intra`` (per node), ``uplink_up``, ``uplink_down`` (per switch): bytes no plan
        moves; ``large_src``, ``large_dst``, ``large_bytes``, ``large_msgs``: large inter-switch traffic by
        ordered node pair (pairs with bytes only), and ``large_max_B``, the largest message of each pair.

    Examples
    --------
    >>> from topoplan.traffic.matrix import from_arrays
    >>> ld = node_loads(from_arrays(4, [0, 1], [2, 3], [8.0, 1e6]), np.arange(4), np.array([0, 0, 1, 1]),
    ...                 4, 2, 1000.0)
    >>> ld["up"].tolist(), ld["uplink_up"].tolist(), ld["large_src"].tolist(), ld["large_bytes"].tolist()
    ([8.0, 0.0, 0.0, 0.0], [8.0, 0.0], [1], [1000000.0])
    """
    n, s, sw = n_nodes, n_switches, node_switch
    a, b = node[traffic.src], node[traffic.dst]
    by = traffic.bytes.astype(np.float64)
    same_node, same_sw = a == b, sw[a] == sw[b]
    large = (traffic.msg_bytes >= threshold_B) & ~same_sw
    eps = ~same_node & ~large
    cross = eps & ~same_sw
    self_msg = traffic.src == traffic.dst
    key = a[large] * n + b[large]
    uniq, inv = np.unique(key, return_inverse=True)
    lb = np.bincount(inv, weights=by[large], minlength=len(uniq))
    lm = np.bincount(inv, weights=traffic.count[large].astype(np.float64), minlength=len(uniq))
    lmax = np.zeros(len(uniq))
    np.maximum.at(lmax, inv, traffic.msg_bytes[large].astype(np.float64))
    keep = lb > 0
    return {"up": byte_sums(a[eps], by[eps], n),
            "down": byte_sums(b[eps], by[eps], n),
            "intra": byte_sums(a[same_node & ~self_msg], by[same_node & ~self_msg], n),
            "uplink_up": byte_sums(sw[a[cross]], by[cross], s),
            "uplink_down": byte_sums(sw[b[cross]], by[cross], s),
            "large_src": (uniq // n)[keep], "large_dst": (uniq % n)[keep], "large_bytes": lb[keep],
            "large_msgs": lm[keep], "large_max_B": lmax[keep]}


def byte_sums(index, weights, length: int) -> np.ndarray:
    """Bytes summed per index, float64 always (NumPy's weighted bincount of nothing is int64).

    Examples
    --------
    >>> byte_sums(np.zeros(0, np.int64), np.zeros(0), 3).tolist(), byte_sums([2, 2], [1.5, 2.0], 3).tolist()
    ([0.0, 0.0, 0.0], [0.0, 0.0, 3.5])
    """
    return np.bincount(index, weights=weights, minlength=length).astype(np.float64, copy=False)
