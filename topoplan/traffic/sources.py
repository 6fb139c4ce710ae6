"""The door for inputs: every traffic source, and the inputs of a planning or simulation run, read in one place.

:func:`load_source` resolves a traffic argument (a generator spec, a communication matrix, an MPI trace
file or directory, an OTF2 archive) into its trace and traffic; :func:`load_traffic` gives the traffic
alone, without building a generator's trace; :func:`load_inputs` reads a run's topology, traffic and
placement together, checking that the ranks fit (the command line, sweeps and experiments use it).
"""

from __future__ import annotations

import csv
import re
import sys
from contextlib import contextmanager
from pathlib import Path

from topoplan.core import deadline
from topoplan.core.errors import TopoplanError
from topoplan.core.io import is_json_document, read_bytes
from topoplan.core.placement import load_placement
from topoplan.core.topology_io import cores_hint, load_topology
from topoplan.traffic import generators, limits
from topoplan.traffic.matrix import Traffic, from_recording, from_trace, read_matrix
from topoplan.traffic.otf2 import read_otf2
from topoplan.traffic.trace import read_trace

__all__ = ["is_matrix_file", "load_source", "load_traffic", "load_inputs"]


def is_matrix_file(path: Path) -> bool:
    """A CSV whose header has src and dst columns (any order) is a matrix; one with rank, op is a trace.

    Parameters
    ----------
    path : path
        The file, plain or gzip.

    Returns
    -------
    bool
        True for a communication matrix.

    Raises
    ------
    TopoplanError
        If the file cannot be read.

    Examples
    --------
    >>> import os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "m.csv")
    >>> with open(path, "w") as fh:
    ...     _ = fh.write("dst,src,bytes\\n1,0,100\\n")
    >>> is_matrix_file(path)
    True
    """
    # the first MiB (decompressed as a stream, like every gzip input): the header is in it
    head = read_bytes(path, "traffic file", limit=1 << 20, head=True)
    # utf-8-sig: a byte order mark (spreadsheet exports) is not part of the first column's name
    # a lone carriage return ends a line too, as for read_csv_table (inside csv.reader's one line it raised)
    lines = re.split(r"\r\n?|\n", head.decode("utf-8-sig", errors="replace"), maxsplit=1000)[:1000]
    # the header is the first line that is not blank, as for read_csv_table
    header = next((line for line in lines if line.strip()), "")
    cols = {c.strip().lower() for c in next(csv.reader([header], skipinitialspace=True), [])}
    return {"src", "dst"} <= cols and "op" not in cols


def load_source(spec: str, n_ranks: int | None = None, *, with_traffic: bool = True, pieces: bool = False):
    """Resolve a traffic argument: a generator spec, a matrix CSV, or a trace CSV (or a trace directory).

    Parameters
    ----------
    spec : str
        A generator spec (``neighbor2d:rows=16,cols=16,bytes=4MB,iters=5``, see
        :mod:`topoplan.traffic.generators`), a communication matrix CSV, a trace CSV, a
        directory holding ``events.csv.gz`` or ``events.csv`` (``topoplan trace``), or an OTF2
        archive (``traces.otf2`` or its directory, :mod:`topoplan.traffic.otf2`).
    n_ranks : int, optional
        Ranks of the communicator, for files; default from the largest rank seen.
    with_traffic : bool, optional
        False: skip the traffic of a trace or generator (None is returned in
        its place; a matrix's is always returned). A replay needs only the
        trace, and a large alltoall's traffic is one entry per rank pair.
    pieces : bool, optional
        With ``with_traffic=False``: a generator whose trace has more than
        :data:`~topoplan.traffic.limits.REPLAY_PIECE_ROWS` rows is returned as its
        :class:`~topoplan.traffic.generators.Recording` instead of its trace, which
        :func:`topoplan.sim.replay.replay` generates and runs a piece at a time.

    Returns
    -------
    trace : topoplan.traffic.trace.Trace, Recording or None
        The event trace (for replay) of a generator or trace file (a generator's recording with
        ``pieces``); None for a matrix.
    traffic : Traffic or None
        Its point-to-point traffic.

    Raises
    ------
    TopoplanError
        For a missing file, a directory that holds no trace, an unknown spec, a
        malformed file (naming the line), or a matrix or trace without rows.

    Notes
    -----
    Trace rows with MPI calls topoplan does not model are skipped with a
    warning on stderr.

    Examples
    --------
    >>> trace, t = load_source("neighbor2d:rows=4,cols=4,bytes=4MB,iters=1")
    >>> trace.n_ranks, t.n_ranks, t.total_bytes()
    (16, 16, 192000000.0)
    """
    _check_spec(spec)
    path = Path(spec)
    if path.is_dir():
        path = next((path / f for f in ("events.csv.gz", "events.csv", "traces.otf2") if (path / f).is_file()), path)
    if path.is_file():
        if path.suffix == ".otf2":   # an OTF2 archive's anchor file (Score-P)
            read = read_otf2
        elif is_json_document(path, "traffic file"):   # else read as a CSV: "malformed CSV: ',' expected after '\"'"
            raise TopoplanError(f"{path}: a JSON document (a plan or placement?), not traffic: a matrix or trace "
                                "CSV, a trace directory, an OTF2 archive or a generator spec")
        elif is_matrix_file(path):
            tr = read_matrix(path, n_ranks)
            if tr.n_ranks == 0:
                raise TopoplanError(f"{path}: the matrix has no rows, so no ranks to plan for (an application that "
                                    "only calls collectives, such as NPB FT, needs its MPI trace instead)")
            return None, tr
        else:
            read = read_trace
        tr = read(path, n_ranks)
        if len(tr) == 0:
            raise TopoplanError(f"{path}: the trace has no rows, so no ranks to plan for")
        if tr.unknown_ops:
            # trace.md: calls we do not model are skipped, and the user is told (they may hide messages)
            ops = ", ".join(f"{o} ({c})" for o, c in sorted(tr.unknown_ops.items())[:5])
            print(f"warning: {path}: skipped {sum(tr.unknown_ops.values())} rows with calls topoplan does not "
                  f"model: {ops}", file=sys.stderr)
        return tr, (from_trace(tr) if with_traffic else None)
    if generators.is_spec(spec):
        rec = generators.record_spec(spec)
        if not with_traffic and rec is not None and pieces and rec.rows > limits.REPLAY_PIECE_ROWS:
            return rec, None
        with _generating(spec):
            if not with_traffic:
                return (generators.parse_spec(spec) if rec is None else rec.build()), None
            if rec is None:
                tr = generators.parse_spec(spec)
                t = from_trace(tr)
            else:   # the traffic from the recording's blocks: the same groups as from_trace(tr), without its cost
                tr = rec.build()
                t = from_recording(rec)
        t.name = spec
        return tr, t
    if path.is_dir():
        raise TopoplanError(f"{spec}: a directory without events.csv.gz, events.csv or traces.otf2 (a trace "
                            "directory), not a traffic file")
    if "/" in spec or spec.endswith((".csv", ".gz")):
        raise TopoplanError(f"{spec}: no such traffic file")
    raise TopoplanError(f"unknown traffic {spec!r}: not a file and not a generator spec "
                        f"(e.g. neighbor2d:rows=16,cols=16,bytes=4MB,iters=5)")


def _check_spec(spec) -> None:
    if not isinstance(spec, (str, Path)) or not str(spec).strip():
        raise TopoplanError(f"field 'spec': expected a generator spec or a traffic file name, got {spec!r}")


@contextmanager
def _generating(spec: str):
    """Generate a spec's trace within the block: inside a command with a time limit it stops at the deadline
    (:func:`topoplan.core.deadline.stopping`), an error naming the spec (there is no trace to plan for), early
    enough to print it and end the process (:func:`topoplan.core.deadline.write_cost_s` of no rows) by then."""
    try:
        with deadline.stopping(margin_s=deadline.write_cost_s(0)):
            yield
    except deadline.DeadlineReached:
        raise deadline.DeadlineReached(f"traffic spec {spec!r}: generating the trace stopped at the time limit "
                                       f"(a longer --time-limit, or no limit, generates it)") from None


def load_traffic(spec: str, n_ranks: int | None = None) -> Traffic:
    """The :class:`Traffic` of a generator spec, matrix file or trace file (see :func:`load_source`).

    Parameters
    ----------
    spec : str
        A generator spec, a matrix or trace CSV, or a trace directory.
    n_ranks : int, optional
        Ranks of the communicator, for files.

    Returns
    -------
    Traffic

    Raises
    ------
    TopoplanError
        For a missing file, an unknown spec or a malformed file.

    See Also
    --------
    load_source : also returns the event trace.

    Notes
    -----
    A generator spec's trace is never built: its traffic comes from the
    generator's recording (:func:`topoplan.traffic.generators.record_spec`),
    each recorded block of calls once, counted as often as it repeats. Time
    and memory follow the recording, not the trace, so traces too large to
    hold (NPB CG class C at 65,536 ranks is 2.6e8 rows, 19 GB as a trace)
    still give their traffic. The groups are those of :func:`load_source`.

    Examples
    --------
    >>> t = load_traffic("neighbor2d:rows=4,cols=4,bytes=4MB,iters=1")
    >>> t.n_ranks, len(t.src), t.total_bytes()
    (16, 48, 192000000.0)
    >>> load_traffic("nosuch")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: unknown traffic 'nosuch': not a file and not a generator spec (e.g. neighbor2d:rows=16,cols=16,bytes=4MB,iters=5)
    >>> t = load_traffic("npb:kernel=cg,class=S,np=16,iters=1")   # from the recording: no trace is built
    >>> u = load_source("npb:kernel=cg,class=S,np=16,iters=1")[1]
    >>> all((getattr(t, c) == getattr(u, c)).all() for c in ("src", "dst", "msg_bytes", "count")), t.name == u.name
    (True, True)
    """
    _check_spec(spec)
    if not Path(spec).exists() and generators.is_spec(spec):
        rec = generators.record_spec(spec)
        if rec is not None:
            return from_recording(rec, spec)
    return load_source(spec, n_ranks)[1]


def load_inputs(topology: str, sets=None, traffic: str | None = None, placement: str | None = None, *,
                check=None):
    """A run's topology, (trace, traffic) and validated placement, from their specs.

    Parameters
    ----------
    topology : str
        A preset, YAML file or Slurm topology (:func:`topoplan.core.topology_io.load_topology`).
    sets : list of str, optional
        ``dotted.key=value`` overrides of the topology.
    traffic : str, optional
        A traffic source (:func:`load_source`); None for none.
    placement : str, optional
        ``sequential``, ``round-robin`` or a placement file (:func:`topoplan.core.placement.load_placement`);
        used only with a traffic.
    check : callable, optional
        Called as ``check(topology, traffic)`` before the placement is read, to refuse (raise) one made for
        other inputs: the command line's check of a placement file's recorded fingerprints.

    Returns
    -------
    (topology, trace, traffic, placement)
        ``trace`` is None for a matrix; ``trace``, ``traffic`` and ``placement`` are None without a traffic.

    Raises
    ------
    TopoplanError
        For a bad spec or file, or more ranks than the topology has cores.

    Examples
    --------
    >>> topo, trace, traffic, pl = load_inputs("paper003", [], "ring:np=8,bytes=1MB", "sequential")
    >>> topo.n_nodes, len(trace), traffic.n_ranks, pl.rank_to_node.tolist()
    (64, 24, 8, [0, 0, 0, 0, 1, 1, 1, 1])
    >>> load_inputs("paper003", ["kind=tree", "ocs=null", "nodes_per_switch=1"], "ring:np=2000,bytes=1MB")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: ring:np=2000,bytes=1MB: 2000 ranks do not fit topology paper003 (4 nodes, 16 cores)
    """
    topo = load_topology(topology, sets or [])
    trace, tr = (None, None)
    if traffic is not None:
        trace, tr = load_source(traffic)
        capacity = int(topo.node_cores().sum())
        if tr.n_ranks > capacity:
            raise TopoplanError(f"{traffic}: {tr.n_ranks} ranks do not fit topology {topo.name or topology} "
                                f"({topo.n_nodes} nodes, {capacity} cores){cores_hint(topo)}")
    if tr is None:
        return topo, trace, tr, None
    if check is not None:
        check(topo, tr)
    return topo, trace, tr, load_placement(placement, tr.n_ranks, topo)
