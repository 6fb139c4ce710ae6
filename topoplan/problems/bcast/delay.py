"""Delay matrices over an allocation's nodes (002 section IV-B).

``hops``: switch hops between node leaders (from ``topo.hop_matrix()``);
``speed``: 1 / (the slower HCA rate of the pair), for mixed SDR/DDR clusters;
``auto``: ``speed`` when the allocation's nodes have links of different rates (there the rate decides which
sends are slow), else ``hops``;
or a matrix from a file: CSV with a header row of host names, or ``.npy``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from topoplan.core.csvtable import read_csv_table, row_line, to_numbers
from topoplan.core.errors import TopoplanError, where

__all__ = ["KINDS", "hops", "speed", "node_bw", "load", "resolve", "delay_matrix"]

KINDS = ("auto", "hops", "speed")


def hops(topo, nodes) -> np.ndarray:
    """Switch-hop count between every pair of ``nodes``.

    Parameters
    ----------
    topo : Topology
    nodes : array_like of int
        The allocation.

    Returns
    -------
    numpy.ndarray of float
        ``len(nodes)`` square.

    References
    ----------
    002 section IV-B1 (delay matrix for network-topology-aware broadcast).

    Examples
    --------
    >>> from topoplan.core.topology import TreeTopology
    >>> hops(TreeTopology("tree", (2, 2)), [0, 1, 2]).tolist()
    [[0.0, 1.0, 3.0], [1.0, 0.0, 3.0], [3.0, 3.0, 0.0]]
    """
    nodes = np.asarray(nodes, dtype=np.int64)
    return np.asarray(topo.hop_matrix(), dtype=np.float64)[np.ix_(nodes, nodes)]


def speed(topo, nodes) -> np.ndarray:
    """1 / min(link bandwidth of the pair) in seconds per byte; 0 on the diagonal.

    Parameters
    ----------
    topo : Topology
    nodes : array_like of int

    Returns
    -------
    numpy.ndarray of float

    References
    ----------
    002 section IV-B2 (delay matrix for network-speed-aware broadcast).

    Examples
    --------
    >>> from topoplan.problems.bcast.allocation import cluster
    >>> topo = cluster(2, 2, bw_Bps="mixed")        # rack 0 SDR, rack 1 DDR
    >>> speed(topo, [0, 2, 3]).tolist()
    [[0.0, 1e-09, 1e-09], [1e-09, 0.0, 5e-10], [1e-09, 5e-10, 0.0]]
    """
    bw = node_bw(topo, nodes)
    d = 1.0 / np.minimum(bw[:, None], bw[None, :])
    np.fill_diagonal(d, 0.0)
    return d


def node_bw(topo, nodes) -> np.ndarray:
    """Link (HCA) bandwidth of each node, bytes/s.

    Parameters
    ----------
    topo : Topology
    nodes : array_like of int

    Returns
    -------
    numpy.ndarray of float

    Examples
    --------
    >>> from topoplan.problems.bcast.allocation import cluster
    >>> topo = cluster(2, 2, bw_Bps="mixed")        # rack 0 SDR, rack 1 DDR
    >>> node_bw(topo, [0, 2]).tolist()
    [1000000000.0, 2000000000.0]
    """
    if hasattr(topo, "node_link_bw"):
        bw = np.asarray(topo.node_link_bw(), dtype=np.float64)
    else:  # torus: one rate per dimension, take the slowest
        bw = np.full(topo.n_nodes, float(min(topo.bw_Bps)))
    return bw[np.asarray(nodes, dtype=np.int64)]


def load(path, topo, nodes) -> np.ndarray:
    """Read a delay matrix for ``nodes`` from a CSV (header = host names) or ``.npy`` (allocation order).

    Parameters
    ----------
    path : str or path
    topo : Topology
        Names the hosts of the header.
    nodes : array_like of int
        The allocation; the result's rows and columns follow it.

    Returns
    -------
    numpy.ndarray of float

    Raises
    ------
    TopoplanError
        For a missing file, a host of the allocation missing from the header, or a malformed matrix:
        a row with another field count than the header, a host twice in the header (host names ignore
        case, as in DNS and Slurm: ``N00001`` is ``n00001``), an empty, text,
        infinite or negative delay (naming the line and the host's column), or not one row per host; an
        ``.npy`` that is an ``.npz`` archive or holds text, booleans or complex numbers.

    Examples
    --------
    >>> from topoplan.problems.bcast.allocation import cluster
    >>> topo = cluster(2, 2, bw_Bps="mixed")        # rack 0 SDR, rack 1 DDR
    >>> import os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "delay.csv")
    >>> with open(path, "w") as fh:
    ...     _ = fh.write("n00000,n00002\\n0,5\\n7,0\\n")
    >>> load(path, topo, [2, 0]).tolist()
    [[0.0, 7.0], [5.0, 0.0]]
    >>> with open(path, "w") as fh:
    ...     _ = fh.write("N00000,N00002\\n0,5\\n7,0\\n")
    >>> load(path, topo, [2, 0]).tolist()
    [[0.0, 7.0], [5.0, 0.0]]
    >>> with open(path, "w") as fh:
    ...     _ = fh.write("n00000,n00002\\n0,5,1\\n7,0,1\\n")
    >>> load(path, topo, [2, 0])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: .../delay.csv:2: 3 fields, the header has 2 (a stray comma, or a column missing from the header?)
    """
    path = Path(path)
    n = len(nodes)
    if not path.is_file():
        raise TopoplanError(f"field 'delay': {str(path)!r} is not 'auto', 'hops', 'speed' or an existing file")
    if path.suffix == ".npy":
        try:
            m = np.load(path, allow_pickle=False)
        except Exception as exc:  # noqa: BLE001 - any unreadable file is bad input
            raise TopoplanError(f"{path}: not a NumPy array ({exc})") from None
        if not isinstance(m, np.ndarray):   # an .npz archive saved under an .npy name
            m.close()
            raise TopoplanError(f"{path}: an .npz archive of arrays, not one NumPy array (np.save, not np.savez)")
        if m.dtype.kind not in "iuf":   # text, booleans, complex numbers: no delay (complex would lose a part)
            raise TopoplanError(f"{path}: a matrix of {m.dtype} values; delays are real numbers")
        if m.shape != (n, n):
            raise TopoplanError(f"{path}: matrix is {m.shape}, the allocation has {n} nodes")
        return _check(np.asarray(m, dtype=np.float64), path)
    # the strict reader: a row with an extra field would otherwise shift every column
    df = read_csv_table(path, (), "delay matrix", numbers=True)
    names = list(df.columns)
    hosts = topo.host_names()
    index = {}   # host names ignore case (DNS, Slurm), as the topology's do
    for i, h in enumerate(names):
        first = index.setdefault(h.lower(), i)
        if first != i:
            raise TopoplanError(f"{where(path, df.attrs['header_line'], h)}: the same host as column "
                                f"{names[first]!r} (host names ignore case)")
    want = [hosts[i] for i in nodes]
    missing = [h for h in want if h.lower() not in index]
    if missing:
        raise TopoplanError(f"{where(path, df.attrs['header_line'])}: header lacks host {missing[0]!r} of the "
                            "allocation")
    if len(df) != len(names):
        raise TopoplanError(f"{path}: {len(df)} rows for {len(names)} header hosts (one row per host, in the "
                            "order of the header)")
    cols = []
    for h in names:
        col = to_numbers(df, h, path, integer=False, empty=None)
        bad = np.flatnonzero(col < 0)
        if bad.size:
            raise TopoplanError(f"{path}:{row_line(df, bad[0])}: field {h!r}: a delay must be non-negative, "
                                f"got {col[bad[0]]:g}")
        cols.append(col)
    full = np.column_stack(cols)
    sel = [index[h.lower()] for h in want]
    return _check(full[np.ix_(sel, sel)], path)


def _check(m, path):
    if not np.isfinite(m).all() or (m < 0).any():
        raise TopoplanError(f"{path}: delays must be finite and non-negative")
    return m


def resolve(spec, topo, nodes) -> str:
    """The delay kind ``auto`` stands for on ``nodes``: ``speed`` when their link rates differ, else ``hops``;
    any other ``spec`` as it is.

    Parameters
    ----------
    spec : str
        One of :data:`KINDS` or a file.
    topo : Topology
    nodes : array_like of int

    Returns
    -------
    str

    Examples
    --------
    >>> from topoplan.problems.bcast.allocation import cluster
    >>> mixed = cluster(2, 2, bw_Bps="mixed")        # rack 0 SDR, rack 1 DDR
    >>> resolve("auto", mixed, [0, 2]), resolve("auto", mixed, [2, 3]), resolve("hops", mixed, [0, 2])
    ('speed', 'hops', 'hops')
    """
    if spec != "auto":
        return spec
    bw = node_bw(topo, nodes)
    return "speed" if len(bw) and bw.min() != bw.max() else "hops"


def delay_matrix(spec, topo, nodes) -> np.ndarray:
    """Resolve ``--delay``: ``auto``, ``hops``, ``speed`` or a file.

    Parameters
    ----------
    spec : str
        One of :data:`KINDS` or a file (see :func:`load`).
    topo : Topology
    nodes : array_like of int

    Returns
    -------
    numpy.ndarray of float

    Raises
    ------
    TopoplanError
        For anything else.

    Examples
    --------
    >>> from topoplan.problems.bcast.allocation import cluster
    >>> topo = cluster(2, 2, bw_Bps="mixed")        # rack 0 SDR, rack 1 DDR
    >>> delay_matrix("hops", topo, [0, 2]).tolist()
    [[0.0, 3.0], [3.0, 0.0]]
    >>> delay_matrix("auto", topo, [0, 2]).tolist()     # an SDR and a DDR node: their rates decide
    [[0.0, 1e-09], [1e-09, 0.0]]
    >>> delay_matrix("latency", topo, [0, 2])
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: field 'delay': 'latency' is not 'auto', 'hops', 'speed' or an existing file
    """
    spec = resolve(spec, topo, nodes)
    if spec == "hops":
        return hops(topo, nodes)
    if spec == "speed":
        return speed(topo, nodes)
    return load(spec, topo, nodes)
