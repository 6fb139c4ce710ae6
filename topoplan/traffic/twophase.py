"""The transpose exchange: every rank of a ``rows x cols`` grid exchanges with its mirror across the diagonal,
as a 2-D FFT's or CG's transpose does (:func:`transpose2d`). With ``neighbor2d`` before it, it makes the
two-phase workload whose partners change in time (:func:`topoplan.traffic.generators.halo_then_transpose`).

Examples
--------
>>> t = transpose2d(4, 4, 1e6, iters=2)
>>> t.n_ranks, t.op_counts()
(16, {'isend': 24, 'irecv': 24, 'waitall': 32})
"""

from __future__ import annotations

import numpy

from topoplan.core.errors import TopoplanError
from topoplan.traffic.builder import TraceBuilder
from topoplan.traffic.trace import Trace

__all__ = ["transpose2d"]


def transpose2d(rows: int, cols: int, bytes: float, iters: int = 1, compute_s: float = 0.0) -> Trace:
    """Transpose exchange on a square grid: rank ``(i, j)`` sends ``bytes`` to and receives from ``(j, i)``.

    Per iteration every off-diagonal rank posts an irecv from its mirror, an isend to it, and every rank
    a waitall (diagonal ranks only the waitall).

    Parameters
    ----------
    rows, cols : int
        Grid shape (equal); rank ``r`` sits at ``divmod(r, cols)``.
    bytes : float
        Message size.
    iters : int, optional
    compute_s : float, optional
        Computation before each iteration.

    Returns
    -------
    Trace

    Raises
    ------
    TopoplanError
        For a grid that is not square or a size below 1.

    Examples
    --------
    >>> t = transpose2d(4, 4, 1e6)
    >>> t.op_counts(), int(t.peer[(t.rank == 1) & (t.peer >= 0)][0])
    ({'isend': 12, 'irecv': 12, 'waitall': 16}, 4)
    """
    if int(rows) < 1 or int(cols) < 1 or int(iters) < 1:
        raise TopoplanError(f"transpose2d: rows, cols and iters must be at least 1, got {rows}, {cols}, {iters}")
    if int(rows) != int(cols):
        raise TopoplanError(f"transpose2d: the grid must be square, got {rows} x {cols}")
    n = int(rows) * int(cols)
    r = numpy.arange(n)
    i, j = divmod(r, int(cols))
    q = j * int(cols) + i
    off = q != r
    b = TraceBuilder(n)
    m = b.mark()
    b.compute(compute_s)
    b.add(r[off], "irecv", q[off], bytes, tag=1)
    b.add(r[off], "isend", q[off], bytes, tag=1)
    b.add(r, "waitall")
    b.repeat(m, int(iters))
    return b.build(f"transpose2d:rows={rows},cols={cols}")
