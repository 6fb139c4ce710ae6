"""Links and routes as arrays: the directed links of a network (:class:`LinkSet`) and routes in CSR form
(:func:`routes_to_csr`), with the per-route helpers every engine and the compiled loop's arguments share
(:func:`check_flows`, :func:`route_stats`, :func:`pad_routes`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from topoplan.core.errors import TopoplanError

__all__ = ["LinkSet", "routes_to_csr", "check_flows", "route_stats", "pad_routes", "ranges"]

_EMPTY_I = np.zeros(0, dtype=np.int64)


@dataclass
class LinkSet:
    """Directed links of a network.

    Parameters
    ----------
    bw_Bps : array of float
        Bandwidth of each directed link in bytes per second (> 0, may be inf).
    latency_s : array of float
        Latency of each directed link in seconds (>= 0).
    shared : array of bool
        ``False`` marks a fat pipe: each flow gets the full bandwidth.
    names : list of str, optional
        A name per link, for reports.

    Examples
    --------
    >>> links = LinkSet(bw_Bps=[1e9, 1e9], latency_s=[1e-6, 1e-6], shared=[True, True], names=["L/up", "L/down"])
    >>> len(links)
    2
    >>> LinkSet([0.0], [0.0], [True], names=["L"])
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: LinkSet: link 'L': bandwidth must be > 0, got 0.0
    """

    bw_Bps: np.ndarray
    latency_s: np.ndarray
    shared: np.ndarray
    names: list[str] | None = None

    def __post_init__(self):
        self.bw_Bps = np.asarray(self.bw_Bps, dtype=np.float64).reshape(-1)
        self.latency_s = np.asarray(self.latency_s, dtype=np.float64).reshape(-1)
        self.shared = np.asarray(self.shared, dtype=bool).reshape(-1)
        n = len(self.bw_Bps)
        if len(self.latency_s) != n or len(self.shared) != n or (self.names is not None and len(self.names) != n):
            raise TopoplanError(f"LinkSet: bw_Bps, latency_s, shared and names must have the same length ({n})")
        bad = np.flatnonzero(~(self.bw_Bps > 0))
        if bad.size:
            raise TopoplanError(f"LinkSet: link {self._name(bad[0])}: bandwidth must be > 0, got {self.bw_Bps[bad[0]]}")
        bad = np.flatnonzero(~((self.latency_s >= 0) & np.isfinite(self.latency_s)))
        if bad.size:
            raise TopoplanError(f"LinkSet: link {self._name(bad[0])}: latency must be finite and >= 0, "
                                f"got {self.latency_s[bad[0]]}")

    def _name(self, i) -> str:
        return repr(self.names[i]) if self.names is not None else str(int(i))

    def __len__(self) -> int:
        return len(self.bw_Bps)


def routes_to_csr(routes, n_links: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Normalize routes to CSR arrays ``(route_ptr, route_links)``.

    Parameters
    ----------
    routes : list of int arrays, tuple ``(route_ptr, route_links)`` or SciPy sparse matrix
        One route per flow. A tuple is read as CSR (flow ``i`` uses
        ``route_links[route_ptr[i]:route_ptr[i + 1]]``); a sparse matrix is
        flow-by-link (its nonzeros are the links).
    n_links : int, optional
        Number of links, to check the ids.

    Returns
    -------
    route_ptr, route_links : int64 arrays

    Examples
    --------
    >>> routes_to_csr([[0, 2], [], [1]])
    (array([0, 2, 2, 3]), array([0, 2, 1]))
    """
    if isinstance(routes, tuple):
        ptr, rl = (np.asarray(a, dtype=np.int64).reshape(-1) for a in routes)
    elif hasattr(routes, "tocsr"):
        m = routes.tocsr()
        ptr, rl = m.indptr.astype(np.int64), m.indices.astype(np.int64)
    else:
        parts = [np.asarray(r, dtype=np.int64).reshape(-1) for r in routes]
        ptr = np.zeros(len(parts) + 1, dtype=np.int64)
        np.cumsum([len(p) for p in parts], out=ptr[1:])
        rl = np.concatenate(parts) if parts else _EMPTY_I.copy()
    if len(ptr) == 0 or ptr[0] != 0 or np.any(np.diff(ptr) < 0) or ptr[-1] != len(rl):
        raise TopoplanError("routes: route_ptr must start at 0, not decrease and end at len(route_links)")
    if n_links is not None and len(rl) and (rl.min() < 0 or rl.max() >= n_links):
        raise TopoplanError(f"routes: link id out of range 0..{n_links - 1}")
    return ptr, rl


def check_flows(links: LinkSet, route_ptr, route_links, start_s, bytes_):
    """Validated ``(route_ptr, route_links, start_s, bytes_)`` arrays of flows on ``links``.

    Raises
    ------
    TopoplanError
        For a route that is not CSR or names an unknown link, or a start or size that is not finite
        (or a negative size).

    Examples
    --------
    >>> links = LinkSet([1e9, 1e9], [0.0, 0.0], [True, True])
    >>> [a.tolist() for a in check_flows(links, [0, 1, 3], [0, 0, 1], [0.0, 1.0], [8, 8])]
    [[0, 1, 3], [0, 0, 1], [0.0, 1.0], [8.0, 8.0]]
    >>> check_flows(links, [0, 1], [2], [0.0], [8])
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: routes: link id out of range 0..1
    """
    ptr, rl = routes_to_csr((route_ptr, route_links), len(links))
    k = len(ptr) - 1
    start = np.asarray(start_s, dtype=np.float64).reshape(-1)
    size = np.asarray(bytes_, dtype=np.float64).reshape(-1)
    if len(start) != k or len(size) != k:
        raise TopoplanError(f"add_flows: {k} routes but {len(start)} start times and {len(size)} sizes")
    bad = np.flatnonzero(~np.isfinite(start))
    if bad.size:
        raise TopoplanError(f"add_flows: flow {bad[0]}: start_s must be finite, got {start[bad[0]]}")
    bad = np.flatnonzero(~((size >= 0) & np.isfinite(size)))
    if bad.size:
        raise TopoplanError(f"add_flows: flow {bad[0]}: bytes must be finite and >= 0, got {size[bad[0]]}")
    return ptr, rl, start, size


def route_stats(links: LinkSet, ptr, rl):
    """Per route: latency (sum over its links), fat-pipe cap and slowest bandwidth (inf if none).

    Examples
    --------
    >>> links = LinkSet([1e9, 5e8], [1e-6, 2e-6], [True, False])
    >>> [a.tolist() for a in route_stats(links, *routes_to_csr([[0, 1], [0]]))]
    [[3e-06, 1e-06], [500000000.0, inf], [500000000.0, 1000000000.0]]
    """
    k = len(ptr) - 1
    fidx = np.repeat(np.arange(k), np.diff(ptr))
    # float even with no routes (bincount of nothing is int64: the simulator's build then refused the arguments
    # and an empty scenario waited for Numba's JIT)
    lat = np.bincount(fidx, weights=links.latency_s[rl], minlength=k).astype(np.float64, copy=False)
    cap = np.full(k, np.inf)
    np.minimum.at(cap, fidx, np.where(links.shared, np.inf, links.bw_Bps)[rl])
    slowest = np.full(k, np.inf)
    np.minimum.at(slowest, fidx, links.bw_Bps[rl])
    return lat, cap, slowest


def pad_routes(ptr, rl, ids, width):
    """Routes of flows ``ids`` as rows of a (len(ids) x width) array padded with -1, and their lengths.

    Examples
    --------
    >>> ptr, rl = routes_to_csr([[0, 2], [1], [3, 4, 5]])
    >>> rows, count = pad_routes(ptr, rl, np.array([2, 0]), 3)
    >>> rows.tolist(), count.tolist()
    ([[3, 4, 5], [0, 2, -1]], [3, 2])
    """
    lo = ptr[ids]
    count = ptr[ids + 1] - lo
    rows = np.full((len(ids), width), -1, dtype=np.int64)
    r = np.repeat(np.arange(len(ids)), count)
    c = np.arange(len(r)) - np.repeat(np.cumsum(count) - count, count)
    rows[r, c] = rl[lo[r] + c]
    return rows, count


def ranges(starts, lengths) -> np.ndarray:
    """Concatenated ``arange(starts[i], starts[i] + lengths[i])``.

    Examples
    --------
    >>> ranges([5, 0], [2, 3]).tolist()
    [5, 6, 0, 1, 2]
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    shift = np.asarray(starts, dtype=np.int64) - (np.cumsum(lengths) - lengths)
    return np.repeat(shift, lengths) + np.arange(total, dtype=np.int64)
