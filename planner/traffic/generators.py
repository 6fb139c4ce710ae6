"""Synthetic traffic generators and the spec strings that name them.

A spec such as ``neighbor2d:rows=16,cols=16,bytes=4MB,iters=5``,
``alltoall:np=256,bytes=1MB`` or ``npb:kernel=cg,class=C,np=128,iters=5``
can stand in for a traffic file; :func:`parse_spec` runs the generator it
names. Every generator returns a :class:`planner.traffic.trace.Trace` (calls in
per-rank order with synthetic times), so analysis and replay treat generated
and recorded traffic alike. :class:`TraceBuilder` is the vectorised call
recorder the generators and :mod:`planner.traffic.npb` share.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy

from planner.core.errors import TopoplanError
from planner.traffic.trace import OP_CODE, Trace
from planner.core.units import parse_size

__all__ = ["TICK_S", "MAX_TRACE_ROWS", "TraceBuilder", "neighbor2d", "alltoall", "ring", "random", "npb",
           "Param", "Generator", "REQUIRED", "GENERATORS", "is_spec", "parse_spec", "describe_generators"]

TICK_S = 1e-9  # duration of one synthetic call; keeps the calls of a rank at distinct times


# A generated trace is held in memory: refuse, before allocating, one that cannot fit
# (a typo such as np=99999999999 should be an error, not a MemoryError or a swap storm).
MAX_TRACE_ROWS = 100_000_000


class TraceBuilder:
    """Records MPI calls for many ranks at once, in each rank's program order.

    Every :meth:`add` appends one call per listed rank (a rank listed k times
    makes k calls, in list order) after that rank's previous calls. Times are
    synthetic: the i-th call of a rank starts at ``i * (TICK_S + call_gap_s)``
    plus the computation added with :meth:`compute`, and lasts ``TICK_S``.
    A block of calls recorded after :meth:`mark` can be repeated without
    recording it again (:meth:`repeat`), which keeps long runs cheap.

    Parameters
    ----------
    n_ranks : int
        Size of MPI_COMM_WORLD.
    call_gap_s : float, optional
        Computation before every call (seconds).

    Raises
    ------
    TopoplanError
        From :meth:`add` and :meth:`repeat` when the trace would exceed
        ``MAX_TRACE_ROWS`` rows (checked before allocating).

    See Also
    --------
    planner.traffic.trace.Trace : what :meth:`build` returns.

    Examples
    --------
    >>> b = TraceBuilder(2)
    >>> b.add([0], "send", peer=1, nbytes=8); b.add([1], "recv", peer=0, nbytes=8)
    >>> m = b.mark(); b.add([0, 1], "barrier"); b.repeat(m, 3)
    >>> b.build("demo").op_counts()
    {'send': 1, 'recv': 1, 'barrier': 6}
    """

    _COLS = ("rank", "op", "peer", "bytes", "root", "comm_size", "tag", "comm", "req", "seq", "t0")

    def __init__(self, n_ranks: int, call_gap_s: float = 0.0):
        self.n = int(n_ranks)
        self.call_gap_s = float(call_gap_s)
        self.next = numpy.zeros(self.n, dtype=numpy.int64)   # number of the next call of each rank
        self.clock = numpy.zeros(self.n)                     # computation added so far per rank
        self.chunks: list[tuple] = []
        self.rows = 0

    def _grow(self, k: float) -> None:
        # checked before allocating, so a huge request is an error rather than a MemoryError
        if self.rows + k > MAX_TRACE_ROWS:
            raise TopoplanError(f"the generated trace would exceed {MAX_TRACE_ROWS:,} rows "
                                f"({self.n} ranks); use fewer ranks, messages or iterations")
        self.rows += int(k)

    def add(self, ranks, op: str, peer=-1, nbytes=0.0, *, root=-1, size=None, tag=-1, comm=-1, req=-1,
            one_call: bool = False) -> None:
        """Append one call of ``op`` per entry of ``ranks``; other arguments are scalars or per-entry arrays.

        ``size`` is the communicator size (default: all ranks); ``req`` marks
        what a ``wait`` completes (1 send, 0 receive). With ``one_call`` the
        rows of a rank form a single call sharing one start time (alltoallv
        written per destination).
        """
        r = numpy.asarray(ranks, dtype=numpy.int64).ravel()
        k = len(r)
        if k == 0:
            return
        self._grow(k)
        if one_call:
            seq = self.next[r]
            self.next[numpy.unique(r)] += 1
        else:
            # the j-th occurrence of a rank in r is its j-th new call
            order = numpy.argsort(r, kind="stable")
            rs = r[order]
            first = numpy.r_[0, numpy.flatnonzero(rs[1:] != rs[:-1]) + 1]
            occ = numpy.arange(k) - numpy.repeat(first, numpy.diff(numpy.r_[first, k]))
            seq = numpy.empty(k, dtype=numpy.int64)
            seq[order] = self.next[rs] + occ
            numpy.add.at(self.next, r, 1)

        def col(v, dtype):
            a = numpy.asarray(v, dtype=dtype)
            return numpy.full(k, a, dtype=dtype) if a.ndim == 0 else a.ravel()

        self.chunks.append((r, numpy.full(k, OP_CODE[op], dtype=numpy.int16), col(peer, numpy.int64),
                            col(nbytes, numpy.float64), col(root, numpy.int64),
                            col(self.n if size is None else size, numpy.int64), col(tag, numpy.int64),
                            col(comm, numpy.int64), col(req, numpy.int64), seq, self.clock[r]))

    def compute(self, seconds: float, ranks=None) -> None:
        """Add ``seconds`` of computation before the next call of ``ranks`` (default: every rank)."""
        if seconds:
            if ranks is None:
                self.clock += seconds
            else:
                numpy.add.at(self.clock, numpy.asarray(ranks, dtype=numpy.int64), seconds)

    def mark(self):
        """A position to :meth:`repeat` from."""
        return len(self.chunks), self.next.copy(), self.clock.copy()

    def repeat(self, mark, times: int) -> None:
        """Make the calls recorded since ``mark`` happen ``times`` times in all (0 removes them)."""
        i, next0, clock0 = mark
        if times == 1:
            return
        if i == len(self.chunks):  # only computation since the mark
            self.clock = clock0 + (self.clock - clock0) * max(times, 0)
            return
        if times <= 0:
            self.rows -= sum(len(c[0]) for c in self.chunks[i:])
            del self.chunks[i:]
            self.next, self.clock = next0, clock0
            return
        self._grow(float(sum(len(c[0]) for c in self.chunks[i:])) * (times - 1))
        block = [numpy.concatenate(c) for c in zip(*self.chunks[i:])]
        dseq, dclock = self.next - next0, self.clock - clock0
        reps = numpy.repeat(numpy.arange(1, times), len(block[0]))
        copies = [numpy.tile(c, times - 1) for c in block]
        rr = copies[0]
        copies[9] = copies[9] + reps * dseq[rr]
        copies[10] = copies[10] + reps * dclock[rr]
        self.chunks[i:] = [tuple(block), tuple(copies)]
        self.next += dseq * (times - 1)
        self.clock += dclock * (times - 1)

    def build(self, source: str, communicators=None) -> Trace:
        """The recorded calls as a validated :class:`Trace`, sorted by rank and call order."""
        if self.chunks:
            c = [numpy.concatenate(x) for x in zip(*self.chunks)]
        else:
            c = [numpy.zeros(0, dtype=d) for d in (numpy.int64, numpy.int16, numpy.int64, numpy.float64,
                                                   numpy.int64, numpy.int64, numpy.int64, numpy.int64,
                                                   numpy.int64, numpy.int64, numpy.float64)]
        rank, op, peer, nbytes, root, size, tag, comm, req, seq, t0 = c
        order = numpy.lexsort((numpy.arange(len(rank)), seq, rank))
        t_start = (seq * (TICK_S + self.call_gap_s) + t0)[order]
        tr = Trace(n_ranks=self.n, rank=rank[order], op=op[order], peer=peer[order], bytes=nbytes[order],
                   root=root[order], comm_size=size[order], t_start=t_start, t_end=t_start + TICK_S,
                   comm=comm[order], tag=tag[order], req=req[order].astype(numpy.int8),
                   communicators={int(k): numpy.asarray(v, dtype=numpy.int64)
                                  for k, v in (communicators or {}).items()},
                   source=source)
        tr.validate()
        return tr


# --------------------------------------------------------------- generators --
def _positive(name, value, gen, minimum=1):
    if int(value) < minimum:
        raise TopoplanError(f"traffic spec {gen!r}: parameter {name!r} must be at least {minimum}, got {value}")
    return int(value)


def _check_size(gen: str, rows: float, what: str = "trace rows") -> None:
    if rows > MAX_TRACE_ROWS:
        raise TopoplanError(f"traffic spec {gen!r}: would generate {rows:.3g} {what}, over the limit of "
                            f"{MAX_TRACE_ROWS:,}; use fewer ranks, messages or iterations")


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
    planner.traffic.trace.Trace
        ``rows * cols`` ranks.

    Raises
    ------
    TopoplanError
        For a size below 1 or a trace over ``MAX_TRACE_ROWS`` rows.

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
    return b.build(f"neighbor2d:rows={rows},cols={cols}")


def alltoall(np: int, bytes: float, iters: int = 1, compute_s: float = 0.0) -> Trace:
    """``iters`` MPI_Alltoall calls with ``bytes`` per destination (one trace row per rank and call).

    The collectives expand into MPICH's algorithm for that size
    (:mod:`planner.traffic.collectives`).

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
    planner.traffic.trace.Trace

    See Also
    --------
    planner.analysis.alltoall : all-to-all schedules on meshes (004).

    Examples
    --------
    >>> alltoall(8, 1e6, iters=2).op_counts()
    {'alltoall': 16}
    """
    np = _positive("np", np, "alltoall")
    iters = _positive("iters", iters, "alltoall")
    _check_size("alltoall", float(np) * np * iters, "messages once the all-to-alls are expanded")
    b = TraceBuilder(np)
    m = b.mark()
    b.compute(compute_s)
    b.add(numpy.arange(np), "alltoall", -1, bytes)
    b.repeat(m, iters)
    return b.build(f"alltoall:np={np}")


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
    planner.traffic.trace.Trace

    Examples
    --------
    >>> ring(4, 64).op_counts()
    {'isend': 4, 'irecv': 4, 'waitall': 4}
    >>> ring(4, 64, iters=2).op_counts()["isend"]
    8
    """
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
    return b.build(f"ring:np={np}")


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
    planner.traffic.trace.Trace

    Examples
    --------
    >>> t = random(8, 100, msgs=20, seed=1)
    >>> t.op_counts()["isend"], t.n_ranks
    (20, 8)
    """
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
    return b.build(f"random:np={np},seed={seed}")


def npb(kernel: str, np: int, klass: str = "C", iters: int | None = None, compute_s: float = 0.0) -> Trace:
    """Communication skeleton of an NPB 3.4 MPI kernel; see :func:`planner.traffic.npb.npb_trace`.

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
    planner.traffic.trace.Trace

    Examples
    --------
    >>> t = npb("cg", 8, "S", iters=1)
    >>> t.n_ranks, sorted(t.op_counts())
    (8, ['barrier', 'bcast', 'irecv', 'reduce', 'send', 'wait'])
    """
    from planner.traffic.npb import npb_trace

    return npb_trace(kernel, klass, np, iters, compute_s)


# ------------------------------------------------------------ spec strings --
class Param(NamedTuple):
    """One generator parameter: ``kind`` among int, size, float, str, bool; ``arg`` the function's keyword.

    Parameters
    ----------
    kind : str
        How the spec's text is read: ``int``, ``size`` (units allowed), ``float``, ``str`` or ``bool``.
    default : object
        The value when the spec leaves it out; :data:`REQUIRED` if it must be given.
    help : str
        One line for :func:`describe_generators`.
    arg : str
        The generator function's keyword (``compute`` -> ``compute_s``).

    Examples
    --------
    >>> p = GENERATORS["neighbor2d"].params["compute"]
    >>> p.kind, p.default, p.arg
    ('float', 0.0, 'compute_s')
    """

    kind: str
    default: object
    help: str
    arg: str


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


def _p(kind, default, help, arg=None):
    return kind, default, help, arg


def _gen(fn, help, **params):
    return Generator(fn, {k: Param(kind, default, h, arg or k) for k, (kind, default, h, arg) in params.items()},
                     help)


GENERATORS = {
    "neighbor2d": _gen(neighbor2d, "2-D neighbour exchange: row-major grid, up to 4 neighbours, no wrap",
                       rows=_p("int", REQUIRED, "grid rows"), cols=_p("int", REQUIRED, "grid columns"),
                       bytes=_p("size", REQUIRED, "message size"), iters=_p("int", 1, "iterations"),
                       compute=_p("float", 0.0, "seconds of computation before each iteration", "compute_s")),
    "alltoall": _gen(alltoall, "MPI_Alltoall calls (MPICH algorithms)",
                     np=_p("int", REQUIRED, "ranks"), bytes=_p("size", REQUIRED, "bytes per destination"),
                     iters=_p("int", 1, "calls"),
                     compute=_p("float", 0.0, "seconds of computation before each call", "compute_s")),
    "ring": _gen(ring, "each rank sends to (r+1) mod np",
                 np=_p("int", REQUIRED, "ranks"), bytes=_p("size", REQUIRED, "message size"),
                 iters=_p("int", 1, "iterations"),
                 compute=_p("float", 0.0, "seconds of computation before each iteration", "compute_s")),
    "random": _gen(random, "seeded random pairs",
                   np=_p("int", REQUIRED, "ranks"), bytes=_p("size", REQUIRED, "message size"),
                   msgs=_p("int", 0, "messages per iteration (0: np)"), seed=_p("int", 0, "random seed"),
                   iters=_p("int", 1, "iterations"),
                   compute=_p("float", 0.0, "seconds of computation before each iteration", "compute_s")),
    "npb": _gen(npb, "NPB 3.4 MPI skeletons (planner/traffic/npb.py)",
                kernel=_p("str", REQUIRED, "cg, mg, is, lu or ft"), np=_p("int", REQUIRED, "ranks"),
                **{"class": _p("str", "C", "problem class S, W, A-F", "klass")},
                iters=_p("int", None, "timed iterations (default: the class's)"),
                compute=_p("float", 0.0, "seconds of computation before each MPI call", "compute_s")),
}

_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def _convert(gen: str, key: str, kind: str, text: str):
    err = TopoplanError(f"traffic spec {gen!r}: parameter {key!r}: bad value {text!r} (expected {kind})")
    t = text.strip()
    try:
        if kind == "int":
            v = int(t)
        elif kind == "float":
            v = float(t)
            if not numpy.isfinite(v):
                raise ValueError
        elif kind == "size":
            v = parse_size(t)
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
    if kind in ("int", "float") and v < 0:
        raise TopoplanError(f"traffic spec {gen!r}: parameter {key!r}: must be non-negative, got {text!r}")
    return v


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


def parse_spec(spec: str) -> Trace:
    """Run the generator that a spec string ``name:key=value,...`` names.

    Sizes accept units (``4MB`` = 4e6 bytes, ``4MiB`` = 2^22 bytes).

    Parameters
    ----------
    spec : str
        E.g. ``neighbor2d:rows=16,cols=16,bytes=4MB,iters=5``.

    Returns
    -------
    planner.traffic.trace.Trace
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
    planner.core.errors.TopoplanError: traffic spec 'ring': unknown parameter 'byte' (known: np, bytes, iters, compute)
    """
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
        given[key] = _convert(name, key, gen.params[key].kind, value)
    kwargs = {}
    for key, par in gen.params.items():
        if key in given:
            kwargs[par.arg] = given[key]
        elif par.default is REQUIRED:
            raise TopoplanError(f"traffic spec {name!r}: missing parameter {key!r}")
        else:
            kwargs[par.arg] = par.default
    try:
        trace = gen.fn(**kwargs)
    except TopoplanError as exc:
        msg = str(exc)
        raise TopoplanError(msg if msg.startswith("traffic spec") else f"traffic spec {name!r}: {msg}") from None
    trace.source = str(spec).strip()
    return trace


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
