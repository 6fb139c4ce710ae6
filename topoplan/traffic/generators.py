"""Synthetic traffic generators and the spec strings that name them.

A spec such as ``neighbor2d:rows=16,cols=16,bytes=4MB,iters=5``,
``alltoall:np=256,bytes=1MB`` or ``npb:kernel=cg,class=C,np=128,iters=5``
can stand in for a traffic file; :func:`parse_spec` runs the generator it
names. Every generator returns a :class:`topoplan.traffic.trace.Trace` (calls in
per-rank order with synthetic times), so analysis and replay treat generated
and recorded traffic alike. The generators record their calls with
:class:`topoplan.traffic.builder.TraceBuilder`, so generating takes about the
trace's own memory. :func:`record_spec` keeps a spec's recording, which can
also write the rows a piece at a time, or give each recorded block once with
its count (what the traffic needs: :func:`topoplan.traffic.sources.load_traffic`).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy

from topoplan.core import deadline
from topoplan.core.errors import TopoplanError
from topoplan.core.units import is_ascii_int, is_ascii_number, parse_size, parse_time
from topoplan.traffic import limits
from topoplan.traffic.builder import TraceBuilder
from topoplan.traffic.npb import npb_recording, npb_trace
from topoplan.traffic.phases import concat
from topoplan.traffic.trace import Trace
from topoplan.traffic.twophase import transpose2d

__all__ = ["neighbor2d", "alltoall", "ring", "random", "npb", "transpose", "halo_transpose", "halo_then_transpose",
           "Param", "Generator", "REQUIRED", "GENERATORS", "is_spec", "parse_spec", "Recording", "record_spec",
           "describe_generators"]


# --------------------------------------------------------------- generators --
def _positive(name, value, gen, minimum=1):
    if int(value) < minimum:
        raise TopoplanError(f"traffic spec {gen!r}: parameter {name!r} must be at least {minimum}, got {value}")
    return int(value)


def _check_size(gen: str, rows: float, what: str = "trace rows") -> None:
    if what == "trace rows" and rows > limits.MAX_GENERATED_ROWS:
        raise TopoplanError(f"traffic spec {gen!r}: would generate {rows:.3g} trace rows, {limits.over_cap_message()}; "
                            "use fewer ranks, messages or iterations")
    if what != "trace rows" and rows > limits.MAX_TRACE_ROWS:
        raise TopoplanError(f"traffic spec {gen!r}: would generate {rows:.3g} {what}, over the limit of "
                            f"{limits.MAX_TRACE_ROWS:,}; use fewer ranks, messages or iterations")


def neighbor2d(rows: int, cols: int, bytes: float, iters: int = 1, compute_s: float = 0.0) -> Trace:
    """2-D neighbour exchange on a ``rows x cols`` grid (row-major ranks, up to 4 neighbours, no wrap).

    Per iteration every rank posts an irecv from each neighbour, then an
    isend to each (order: up, down, left, right), then a waitall.

    Parameters
    ----------
    rows, cols : int
        Grid shape; rank ``r`` sits at ``divmod(r, cols)``.
    bytes : float
        Message size in bytes.
    iters : int, optional
        Iterations.
    compute_s : float, optional
        Computation before each iteration (seconds).

    Returns
    -------
    topoplan.traffic.trace.Trace
        ``rows * cols`` ranks.

    Raises
    ------
    TopoplanError
        For a size below 1, a trace over ``MAX_GENERATED_ROWS`` rows or one
        the memory available cannot hold (:func:`topoplan.traffic.limits.check_generated_memory`).

    References
    ----------
    The "Neighbor" application of 000 (8x16, 40 MB), 001 section 4 (16x16,
    4 MB) and 003 section 4.1.1 (16x16, 4 MB, 5 iterations).

    Examples
    --------
    >>> t = neighbor2d(2, 3, 1000)
    >>> t.n_ranks, t.op_counts()
    (6, {'isend': 14, 'irecv': 14, 'waitall': 6})
    """
    b, source, comms = _neighbor2d_recording(rows, cols, bytes, iters, compute_s)
    return b.build(source, comms)


def _neighbor2d_recording(rows: int, cols: int, bytes: float, iters: int = 1, compute_s: float = 0.0):
    """The TraceBuilder, source and communicators of :func:`neighbor2d`."""
    rows = _positive("rows", rows, "neighbor2d")
    cols = _positive("cols", cols, "neighbor2d")
    iters = _positive("iters", iters, "neighbor2d")
    n = rows * cols
    _check_size("neighbor2d", 10.0 * n * iters)
    r = numpy.arange(n)
    i, j = divmod(r, cols)
    nbrs = [(i > 0, r - cols), (i < rows - 1, r + cols), (j > 0, r - 1), (j < cols - 1, r + 1)]
    b = TraceBuilder(n)
    m = b.mark()
    b.compute(compute_s)
    for has, q in nbrs:
        b.add(r[has], "irecv", q[has], bytes, tag=0)
    for has, q in nbrs:
        b.add(r[has], "isend", q[has], bytes, tag=0)
    b.add(r, "waitall")
    b.repeat(m, iters)
    return b, f"neighbor2d:rows={rows},cols={cols}", None


def alltoall(np: int, bytes: float, iters: int = 1, compute_s: float = 0.0) -> Trace:
    """``iters`` MPI_Alltoall calls with ``bytes`` per destination (one trace row per rank and call).

    The collectives expand into MPICH's algorithm for that size
    (:mod:`topoplan.traffic.collectives`).

    Parameters
    ----------
    np : int
        Ranks.
    bytes : float
        Bytes per destination.
    iters : int, optional
        Calls.
    compute_s : float, optional
        Computation before each call (seconds).

    Returns
    -------
    topoplan.traffic.trace.Trace

    See Also
    --------
    topoplan.analysis.alltoall : all-to-all schedules on meshes (004).

    Examples
    --------
    >>> alltoall(8, 1e6, iters=2).op_counts()
    {'alltoall': 16}
    """
    b, source, comms = _alltoall_recording(np, bytes, iters, compute_s)
    return b.build(source, comms)


def _alltoall_recording(np: int, bytes: float, iters: int = 1, compute_s: float = 0.0):
    """The TraceBuilder, source and communicators of :func:`alltoall`."""
    np = _positive("np", np, "alltoall")
    iters = _positive("iters", iters, "alltoall")
    _check_size("alltoall", float(np) * iters)   # its messages are counted where they are expanded
    b = TraceBuilder(np)
    m = b.mark()
    b.compute(compute_s)
    b.add(numpy.arange(np), "alltoall", -1, bytes)
    b.repeat(m, iters)
    return b, f"alltoall:np={np}", None


def ring(np: int, bytes: float, iters: int = 1, compute_s: float = 0.0) -> Trace:
    """Each rank sends ``bytes`` to ``(r + 1) % np`` and receives from ``(r - 1) % np`` per iteration.

    Parameters
    ----------
    np : int
        Ranks, at least 2.
    bytes : float
        Message size in bytes.
    iters : int, optional
        Iterations.
    compute_s : float, optional
        Computation before each iteration (seconds).

    Returns
    -------
    topoplan.traffic.trace.Trace

    Examples
    --------
    >>> ring(4, 64).op_counts()
    {'isend': 4, 'irecv': 4, 'waitall': 4}
    >>> ring(4, 64, iters=2).op_counts()["isend"]
    8
    """
    b, source, comms = _ring_recording(np, bytes, iters, compute_s)
    return b.build(source, comms)


def _ring_recording(np: int, bytes: float, iters: int = 1, compute_s: float = 0.0):
    """The TraceBuilder, source and communicators of :func:`ring`."""
    np = _positive("np", np, "ring", 2)
    iters = _positive("iters", iters, "ring")
    _check_size("ring", 4.0 * np * iters)
    r = numpy.arange(np)
    b = TraceBuilder(np)
    m = b.mark()
    b.compute(compute_s)
    b.add(r, "irecv", (r - 1) % np, bytes, tag=0)
    b.add(r, "isend", (r + 1) % np, bytes, tag=0)
    b.add(r, "waitall")
    b.repeat(m, iters)
    return b, f"ring:np={np}", None


def random(np: int, bytes: float, msgs: int = 0, seed: int = 0, iters: int = 1, compute_s: float = 0.0) -> Trace:
    """``msgs`` messages (default ``np``) between random distinct ranks per iteration, from ``seed``.

    Each message is an isend at its source and an irecv at its destination
    (posted in message order); every rank ends the iteration with a waitall.

    Parameters
    ----------
    np : int
        Ranks, at least 2.
    bytes : float
        Message size in bytes.
    msgs : int, optional
        Messages per iteration; 0 means ``np``.
    seed : int, optional
        Seed of the random pairs (the same seed gives the same trace).
    iters : int, optional
        Iterations (new pairs each).
    compute_s : float, optional
        Computation before each iteration (seconds).

    Returns
    -------
    topoplan.traffic.trace.Trace

    Examples
    --------
    >>> t = random(8, 100, msgs=20, seed=1)
    >>> t.op_counts()["isend"], t.n_ranks
    (20, 8)
    """
    b, source, comms = _random_recording(np, bytes, msgs, seed, iters, compute_s)
    return b.build(source, comms)


def _random_recording(np: int, bytes: float, msgs: int = 0, seed: int = 0, iters: int = 1, compute_s: float = 0.0):
    """The TraceBuilder, source and communicators of :func:`random`."""
    np = _positive("np", np, "random", 2)
    iters = _positive("iters", iters, "random")
    msgs = _positive("msgs", msgs, "random", 0) or np
    _check_size("random", (2.0 * msgs + 2.0 * np) * iters)
    rng = numpy.random.default_rng(int(seed))
    b = TraceBuilder(np)
    for it in range(iters):
        b.compute(compute_s)
        src = rng.integers(0, np, msgs)
        dst = (src + rng.integers(1, np, msgs)) % np  # never the source itself
        b.add(dst, "irecv", src, bytes, tag=it)
        b.add(src, "isend", dst, bytes, tag=it)
        b.add(numpy.arange(np), "waitall")
    return b, f"random:np={np},seed={seed}", None


def npb(kernel: str, np: int, klass: str = "C", iters: int | None = None, compute_s: float = 0.0) -> Trace:
    """Communication skeleton of an NPB 3.4 MPI kernel; see :func:`topoplan.traffic.npb.npb_trace`.

    Parameters
    ----------
    kernel : str
        ``cg``, ``mg``, ``is``, ``lu`` or ``ft``.
    np : int
        Ranks (each kernel has its own rule, e.g. a power of two for CG).
    klass : str, optional
        Problem class S, W, A-F.
    iters : int, optional
        Timed iterations; default the class's.
    compute_s : float, optional
        Computation before each MPI call (seconds).

    Returns
    -------
    topoplan.traffic.trace.Trace

    Examples
    --------
    >>> t = npb("cg", 8, "S", iters=1)
    >>> t.n_ranks, sorted(t.op_counts())
    (8, ['barrier', 'bcast', 'irecv', 'reduce', 'send', 'wait'])
    """
    return npb_trace(kernel, klass, np, iters, compute_s)


def transpose(rows: int, cols: int, bytes: float, iters: int = 1, compute_s: float = 0.0):
    """Transpose exchange on a square grid (:func:`topoplan.traffic.twophase.transpose2d`).

    Examples
    --------
    >>> transpose(4, 4, 1e6).op_counts()
    {'isend': 12, 'irecv': 12, 'waitall': 16}
    """
    return transpose2d(rows, cols, bytes, iters, compute_s)


def halo_transpose(rows: int, cols: int, bytes: float, iters: int = 5):
    """The two-phase workload of the schedules' experiments: ``neighbor2d`` then :func:`transpose`, ``iters``
    times each (:func:`halo_then_transpose`).

    Examples
    --------
    >>> halo_transpose(4, 4, 1e6, iters=2).op_counts()
    {'isend': 120, 'irecv': 120, 'waitall': 64}
    >>> halo_transpose(4, 4, 1e6, iters=0)
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: traffic spec 'halo-transpose': parameter 'iters' must be at least 1, got 0
    """
    # errors name the spec, not the generator of its first phase
    rows, cols, iters = (_positive(k, v, "halo-transpose") for k, v in (("rows", rows), ("cols", cols), ("iters", iters)))
    return halo_then_transpose(rows, cols, bytes, iters)


def halo_then_transpose(rows: int, cols: int, bytes: float, iters: int = 5, transpose_bytes: float | None = None,
                        transpose_iters: int | None = None) -> Trace:
    """The two-phase workload: :func:`neighbor2d` for ``iters`` iterations, then :func:`~topoplan.traffic.twophase.transpose2d`.

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
    return concat([neighbor2d(rows, cols, bytes, iters),
                   transpose2d(rows, cols, bytes if transpose_bytes is None else transpose_bytes,
                               iters if transpose_iters is None else transpose_iters)])


# ------------------------------------------------------------ spec strings --
class Param(NamedTuple):
    """One generator parameter: ``kind`` among int, size, time, float, str, bool; ``arg`` the function's keyword;
    ``minimum`` the least value of a number the generator takes.

    Parameters
    ----------
    kind : str
        How the spec's text is read: ``int``, ``size`` (units allowed, bare: bytes), ``time`` (units allowed,
        bare: seconds), ``float``, ``str`` or ``bool``.
    default : object
        The value when the spec leaves it out; :data:`REQUIRED` if it must be given.
    help : str
        One line for :func:`describe_generators`.
    arg : str
        The generator function's keyword (``compute`` -> ``compute_s``).
    minimum : int or float, optional
        For ``int``, ``time`` and ``float``: a spec's value below it is refused before the generator runs,
        naming it (default 0).

    Examples
    --------
    >>> p = GENERATORS["neighbor2d"].params["compute"]
    >>> p.kind, p.default, p.arg, p.minimum
    ('time', 0.0, 'compute_s', 0)
    >>> GENERATORS["ring"].params["np"].minimum
    2
    """

    kind: str
    default: object
    help: str
    arg: str
    minimum: float = 0


REQUIRED = object()


class Generator(NamedTuple):
    """A registry entry: the function, its parameters (spec name -> :class:`Param`) and a one-line help.

    Parameters
    ----------
    fn : callable
        The generator; called with the parameters' ``arg`` keywords, returns a Trace.
    params : dict of str to Param
        The spec's parameters, in the order :func:`describe_generators` lists them.
    help : str
        One line.

    Examples
    --------
    >>> g = GENERATORS["ring"]
    >>> g.fn.__name__, list(g.params), g.help
    ('ring', ['np', 'bytes', 'iters', 'compute'], 'each rank sends to (r+1) mod np')
    """

    fn: Callable
    params: dict
    help: str


def _p(kind, default, help, arg=None, minimum=0):
    return kind, default, help, arg, minimum


def _gen(fn, help, **params):
    return Generator(fn, {k: Param(kind, default, h, arg or k, least)
                          for k, (kind, default, h, arg, least) in params.items()}, help)


GENERATORS = {
    "neighbor2d": _gen(neighbor2d, "2-D neighbour exchange: row-major grid, up to 4 neighbours, no wrap",
                       rows=_p("int", REQUIRED, "grid rows", minimum=1),
                       cols=_p("int", REQUIRED, "grid columns", minimum=1),
                       bytes=_p("size", REQUIRED, "message size"), iters=_p("int", 1, "iterations", minimum=1),
                       compute=_p("time", 0.0, "time computing before each iteration", "compute_s")),
    "alltoall": _gen(alltoall, "MPI_Alltoall calls (MPICH algorithms)",
                     np=_p("int", REQUIRED, "ranks", minimum=1), bytes=_p("size", REQUIRED, "bytes per destination"),
                     iters=_p("int", 1, "calls", minimum=1),
                     compute=_p("time", 0.0, "time computing before each call", "compute_s")),
    "ring": _gen(ring, "each rank sends to (r+1) mod np",
                 np=_p("int", REQUIRED, "ranks", minimum=2), bytes=_p("size", REQUIRED, "message size"),
                 iters=_p("int", 1, "iterations", minimum=1),
                 compute=_p("time", 0.0, "time computing before each iteration", "compute_s")),
    "random": _gen(random, "seeded random pairs",
                   np=_p("int", REQUIRED, "ranks", minimum=2), bytes=_p("size", REQUIRED, "message size"),
                   msgs=_p("int", 0, "messages per iteration (0: np)"), seed=_p("int", 0, "random seed"),
                   iters=_p("int", 1, "iterations", minimum=1),
                   compute=_p("time", 0.0, "time computing before each iteration", "compute_s")),
    "transpose": _gen(transpose, "transpose on a square grid: rank (i, j) exchanges with (j, i)",
                      rows=_p("int", REQUIRED, "grid rows", minimum=1),
                      cols=_p("int", REQUIRED, "grid columns (= rows)", minimum=1),
                      bytes=_p("size", REQUIRED, "message size"), iters=_p("int", 1, "iterations", minimum=1),
                      compute=_p("time", 0.0, "time computing before each iteration", "compute_s")),
    "halo-transpose": _gen(halo_transpose, "two phases: neighbor2d, then transpose (the phased-circuits workload)",
                           rows=_p("int", REQUIRED, "grid rows", minimum=1),
                           cols=_p("int", REQUIRED, "grid columns (= rows)", minimum=1),
                           bytes=_p("size", REQUIRED, "message size"),
                           iters=_p("int", 5, "iterations of each", minimum=1)),
    "npb": _gen(npb, "NPB 3.4 MPI skeletons (topoplan/traffic/npb.py)",
                kernel=_p("str", REQUIRED, "cg, mg, is, lu or ft"), np=_p("int", REQUIRED, "ranks", minimum=1),
                **{"class": _p("str", "C", "problem class S, W, A-F", "klass")},
                iters=_p("int", None, "timed iterations (default: the class's)", minimum=1),
                compute=_p("time", 0.0, "time computing before each MPI call", "compute_s")),
}

_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def _convert(gen: str, key: str, kind: str, text: str, minimum: float = 0):
    err = TopoplanError(f"traffic spec {gen!r}: parameter {key!r}: bad value {text!r} (expected {kind})")
    t = text.strip()
    try:
        if kind == "int":
            if not is_ascii_int(t):   # int() also takes '٣', '+3' and '1_0'
                raise ValueError
            v = int(t)
        elif kind == "float":
            if not is_ascii_number(t):   # float() also takes '٣' and '1_0'
                raise ValueError
            v = float(t)
            if not numpy.isfinite(v):
                raise ValueError
        elif kind == "size":
            v = parse_size(t)
        elif kind == "time":
            # a minus sign is read here, so a negative time is refused as a negative number is (non-negative)
            v = parse_time(t[1:] if t.startswith("-") else t)
            v = 0.0 - v if t.startswith("-") else v
        elif kind == "bool":
            if t.lower() not in _TRUE + _FALSE:
                raise ValueError
            v = t.lower() in _TRUE
        else:
            if not t:
                raise ValueError
            v = t
    except (ValueError, TopoplanError):
        raise err from None
    if kind in ("int", "float", "time") and v < minimum:
        if minimum == 0:
            raise TopoplanError(f"traffic spec {gen!r}: parameter {key!r}: must be non-negative, got {text!r}")
        # the generator's own least value, as its own check words it (_positive)
        raise TopoplanError(f"traffic spec {gen!r}: parameter {key!r} must be at least {minimum:g}, got {t}")
    return v


def _spec_error(exc: TopoplanError, name: str) -> TopoplanError:
    """A generator's error naming its spec; a stop at a command's time limit passes as it is (the stage that
    stops at the deadline, :func:`topoplan.core.deadline.stopping`, catches it)."""
    if isinstance(exc, deadline.DeadlineReached):
        return exc
    msg = str(exc)
    return TopoplanError(msg if msg.startswith("traffic spec") else f"traffic spec {name!r}: {msg}")


def is_spec(text: str) -> bool:
    """True for ``name`` or ``name:...`` where ``name`` is a registered generator.

    Only the name is checked; :func:`parse_spec` checks the parameters.

    Parameters
    ----------
    text : str
        A traffic argument.

    Returns
    -------
    bool

    Examples
    --------
    >>> is_spec("ring:np=4,bytes=1KB"), is_spec("npb"), is_spec("traffic.csv")
    (True, True, False)
    """
    s = str(text).strip()
    name, colon, _ = s.partition(":")
    return name.strip().lower() in GENERATORS and (bool(colon) or name.strip() == s)


def _parse(spec: str) -> tuple[str, dict]:
    """The generator's name and its keyword arguments (defaults filled in) of a spec string."""
    name, _, rest = str(spec).strip().partition(":")
    name = name.strip().lower()
    gen = GENERATORS.get(name)
    if gen is None:
        raise TopoplanError(f"unknown traffic generator {name!r} (known: {', '.join(GENERATORS)})")
    given: dict[str, object] = {}
    for item in (x.strip() for x in rest.split(",")):
        if not item:
            continue
        key, eq, value = item.partition("=")
        key = key.strip().lower()
        if not eq:
            raise TopoplanError(f"traffic spec {name!r}: expected key=value, got {item!r}")
        if key not in gen.params:
            raise TopoplanError(f"traffic spec {name!r}: unknown parameter {key!r} (known: {', '.join(gen.params)})")
        if key in given:
            raise TopoplanError(f"traffic spec {name!r}: parameter {key!r} given twice")
        given[key] = _convert(name, key, gen.params[key].kind, value, gen.params[key].minimum)
    kwargs = {}
    for key, par in gen.params.items():
        if key in given:
            kwargs[par.arg] = given[key]
        elif par.default is REQUIRED:
            raise TopoplanError(f"traffic spec {name!r}: missing parameter {key!r}")
        else:
            kwargs[par.arg] = par.default
    return name, kwargs


def parse_spec(spec: str) -> Trace:
    """Run the generator that a spec string ``name:key=value,...`` names.

    Sizes accept units (``4MB`` = 4e6 bytes, ``4MiB`` = 2^22 bytes).

    Parameters
    ----------
    spec : str
        E.g. ``neighbor2d:rows=16,cols=16,bytes=4MB,iters=5``.

    Returns
    -------
    topoplan.traffic.trace.Trace
        The generated trace; its ``source`` is the spec.

    Raises
    ------
    TopoplanError
        Naming the generator and the parameter for an unknown generator, an
        unknown, repeated or missing parameter, or a bad value.

    See Also
    --------
    describe_generators : the generators and their parameters.

    Examples
    --------
    >>> t = parse_spec("ring:np=4,bytes=1KB")
    >>> t.n_ranks, t.source
    (4, 'ring:np=4,bytes=1KB')
    >>> parse_spec("ring:np=4,byte=1KB")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: traffic spec 'ring': unknown parameter 'byte' (known: np, bytes, iters, compute)
    """
    name, kwargs = _parse(spec)
    try:
        trace = GENERATORS[name].fn(**kwargs)
    except TopoplanError as exc:
        raise _spec_error(exc, name) from None
    trace.source = str(spec).strip()
    return trace


def _npb_recording(kernel, np, klass="C", iters=None, compute_s=0.0):
    return npb_recording(kernel, klass, np, iters, compute_s)


_RECORDINGS = {"neighbor2d": _neighbor2d_recording, "alltoall": _alltoall_recording, "ring": _ring_recording,
               "random": _random_recording, "npb": _npb_recording}
_PUBLIC = {"neighbor2d": neighbor2d, "alltoall": alltoall, "ring": ring, "random": random, "npb": npb}


class Recording(NamedTuple):
    """A generator spec's calls as recorded, before any trace row is written (:func:`record_spec`).

    Parameters
    ----------
    name : str
        The generator.
    source : str
        The spec; the ``source`` of what is built from it.
    builder : TraceBuilder
        The recording (repeated iterations recorded once).
    communicators : dict or None
        Communicators other than MPI_COMM_WORLD.

    Examples
    --------
    >>> r = record_spec("ring:np=4,bytes=1KB,iters=3")
    >>> r.n_ranks, r.rows, len(r.build()), [len(p) for p in r.pieces(max_rows=8)]
    (4, 36, 36, [8, 8, 8, 8, 4])
    """

    name: str
    source: str
    builder: TraceBuilder
    communicators: dict | None

    @property
    def n_ranks(self) -> int:
        return self.builder.n

    @property
    def rows(self) -> int:
        return self.builder.rows

    def _wrap(self, exc: TopoplanError) -> TopoplanError:
        return _spec_error(exc, self.name)

    def build(self) -> Trace:
        """The whole trace, as :func:`parse_spec` returns it (refused first if memory cannot hold it)."""
        try:
            return self.builder.build(self.source, self.communicators)
        except TopoplanError as exc:
            raise self._wrap(exc) from None

    def pieces(self, max_rows: int | None = None, weight=None):
        """The trace in pieces of about ``max_rows`` rows, each row counted as ``weight`` tells
        (:meth:`TraceBuilder.pieces`)."""
        try:
            yield from self.builder.pieces(self.source, self.communicators, max_rows, weight)
        except TopoplanError as exc:
            raise self._wrap(exc) from None

    def rows_per_rank(self) -> numpy.ndarray:
        """Rows of the trace per rank (:meth:`TraceBuilder.rows_per_rank`)."""
        return self.builder.rows_per_rank()

    def blocks(self, max_rows: int | None = None):
        """Every recorded block once with its number of occurrences (:meth:`TraceBuilder.blocks`)."""
        try:
            yield from self.builder.blocks(self.source, self.communicators, max_rows)
        except TopoplanError as exc:
            raise self._wrap(exc) from None


def record_spec(spec: str) -> Recording | None:
    """Record the calls of the generator a spec names, without writing the trace's rows.

    Recording is cheap at any size (each repeated iteration is recorded
    once): the :class:`Recording` tells the trace's size (``rows``) and
    builds it whole (``build``, checked against the memory available), in
    pieces of bounded size (``pieces``: streamed generation, for traces
    that memory cannot hold), or as its distinct blocks with their counts
    (``blocks``, what :func:`topoplan.traffic.sources.load_traffic` reads).

    Parameters
    ----------
    spec : str
        A generator spec, as for :func:`parse_spec`.

    Returns
    -------
    Recording or None
        None for a generator added to :data:`GENERATORS` without a recording
        function (use :func:`parse_spec`).

    Raises
    ------
    TopoplanError
        As :func:`parse_spec`, except the memory check (made by ``build``).

    Examples
    --------
    >>> r = record_spec("npb:kernel=cg,class=C,np=65536,iters=1")
    >>> r.n_ranks, r.rows, r.source
    (65536, 258932736, 'npb:kernel=cg,class=C,np=65536,iters=1')
    """
    name, kwargs = _parse(spec)
    fn = _RECORDINGS.get(name)
    if fn is None or GENERATORS[name].fn is not _PUBLIC[name]:
        return None
    try:
        b, _, comms = fn(**kwargs)
    except TopoplanError as exc:
        raise _spec_error(exc, name) from None
    return Recording(name, str(spec).strip(), b, comms)


def describe_generators() -> str:
    """Help text listing every generator with its parameters (for the CLI).

    Returns
    -------
    str
        One line per generator (required and optional parameters, help),
        then one indented line per parameter.

    Examples
    --------
    >>> print(describe_generators().splitlines()[0])
    neighbor2d:rows=<int>,cols=<int>,bytes=<size>[,iters=1,compute=0.0]  -- 2-D neighbour exchange: ...
    >>> "neighbor2d:rows=<int>,cols=<int>,bytes=<size>" in describe_generators()
    True
    """
    lines = []
    for name, g in GENERATORS.items():
        req = [f"{k}=<{p.kind}>" for k, p in g.params.items() if p.default is REQUIRED]
        opt = [f"{k}={'default' if p.default is None else p.default}" for k, p in g.params.items()
               if p.default is not REQUIRED]
        lines.append(f"{name}:{','.join(req)}" + (f"[,{','.join(opt)}]" if opt else "") + f"  -- {g.help}")
        for k, p in g.params.items():
            lines.append(f"    {k:<8} {p.kind:<5} {p.help}")
    return "\n".join(lines)
