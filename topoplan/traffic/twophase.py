"""Workloads whose partners change in time (issue 21): a halo exchange followed by a global transpose.

The spec generators of :mod:`topoplan.traffic.generators` each keep one pattern for the whole run;
these build the two-phase workload of the circuit-schedule experiment from them and
:func:`topoplan.traffic.phases.concat`: ``neighbor2d`` (the halo exchange) then :func:`transpose2d`
(every rank of a ``rows x cols`` grid exchanges with its mirror across the diagonal, as a 2-D FFT's
or CG's transpose does).

Examples
--------
>>> t = halo_then_transpose(4, 4, 1e6, iters=2)
>>> t.n_ranks, t.op_counts()
(16, {'isend': 120, 'irecv': 120, 'waitall': 64})
"""

from __future__ import annotations

import numpy

from topoplan.core.errors import TopoplanError
from topoplan.traffic.trace import Trace

__all__ = ["transpose2d", "halo_then_transpose"]


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
    from topoplan.traffic.generators import TraceBuilder

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


def halo_then_transpose(rows: int, cols: int, bytes: float, iters: int = 5, transpose_bytes: float | None = None,
                        transpose_iters: int | None = None) -> Trace:
    """The two-phase workload: ``neighbor2d`` for ``iters`` iterations, then ``transpose2d``.

    Parameters
    ----------
    rows, cols : int
        Square grid.
    bytes : float
        Halo message size.
    iters : int, optional
        Halo iterations.
    transpose_bytes, transpose_iters : optional
        Default the halo's.

    Returns
    -------
    Trace
        Source ``neighbor2d:...+transpose2d:...``.

    Examples
    --------
    >>> halo_then_transpose(16, 16, 4e6).source
    'neighbor2d:rows=16,cols=16+transpose2d:rows=16,cols=16'
    """
    from topoplan.traffic.generators import neighbor2d
    from topoplan.traffic.phases import concat

    return concat([neighbor2d(rows, cols, bytes, iters),
                   transpose2d(rows, cols, bytes if transpose_bytes is None else transpose_bytes,
                               iters if transpose_iters is None else transpose_iters)])
