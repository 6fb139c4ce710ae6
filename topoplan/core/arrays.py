"""Array helpers shared by the traffic, planning and simulation code.

:func:`unique_inverse` is ``np.unique(values, return_inverse=True)`` for the
large 1-D keys the simulator compiles (message sizes, node pairs): the same
result, without the argsort that dominates NumPy's version when few values
are distinct or the integers span a small range.
"""

from __future__ import annotations

import numpy as np

__all__ = ["unique_inverse"]

_SMALL = 4096        # below this, NumPy's own unique is as fast
_SAMPLE = 4096       # values looked at to guess the distinct ones
_FEW = 256           # distinct values a binary search over stays fast for
_DENSE = 4           # integer span, in values, up to which a table of the span is used


def unique_inverse(values) -> tuple[np.ndarray, np.ndarray]:
    """The sorted distinct values and, for each value, the index of its distinct value.

    Equal to ``np.unique(values, return_inverse=True)`` for a 1-D array (the
    inverse flattened), computed without sorting every value when that can
    be avoided:

    * integers whose span (max - min + 1) is at most 4 times their number: a
      table over the span marks the values present;
    * values of which a sample shows at most 256 distinct ones: a binary
      search of every value among them (values the sample missed are added
      and the search repeated; too many, and NumPy's version runs instead).

    Parameters
    ----------
    values : array_like
        Integers or floats, any shape (flattened). NaNs are left to NumPy.

    Returns
    -------
    uniq : ndarray
        The distinct values, ascending, of the values' dtype.
    inverse : ndarray of intp
        ``uniq[inverse]`` equals the flattened values.

    Examples
    --------
    >>> uniq, inv = unique_inverse([30, 10, 30, 20])
    >>> uniq.tolist(), inv.tolist()
    ([10, 20, 30], [2, 0, 2, 1])
    >>> uniq, inv = unique_inverse(np.tile([1e6, 8.0], 5000))
    >>> uniq.tolist(), inv[:3].tolist()
    ([8.0, 1000000.0], [1, 0, 1])
    """
    a = np.asarray(values).reshape(-1)
    n = a.size
    if n < _SMALL or a.dtype.kind not in "iuf":
        return _numpy(a)
    if a.dtype.kind in "iu":
        lo, hi = int(a.min()), int(a.max())
        span = hi - lo + 1
        if span <= _DENSE * n:
            present = np.zeros(span, dtype=bool)
            off = a - a.dtype.type(lo)
            present[off] = True
            at = np.flatnonzero(present)
            rank = np.zeros(span, dtype=np.intp)
            rank[at] = np.arange(len(at))
            return at.astype(a.dtype) + a.dtype.type(lo), rank[off]
    elif np.isnan(a).any():
        return _numpy(a)
    uniq = np.unique(a[:: max(n // _SAMPLE, 1)])
    if len(uniq) > _FEW:
        return _numpy(a)
    for _ in range(2):
        inv = np.searchsorted(uniq, a)
        found = uniq[np.minimum(inv, len(uniq) - 1)] == a
        if found.all():
            return uniq, inv
        uniq = np.union1d(uniq, a[~found])
        if len(uniq) > _FEW:
            break
    return _numpy(a)


def _numpy(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    uniq, inv = np.unique(a, return_inverse=True)
    return uniq, inv.reshape(-1)
