"""Synthetic traffic generators, addressed by spec strings such as
``neighbor2d:rows=16,cols=16,bytes=4MB,iters=5`` or ``alltoall:np=256,bytes=1MB``.

Each generator returns a :class:`planner.trace.Trace` (calls in per-rank
order with synthetic times), so analysis and replay treat generated and
recorded traffic alike.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy

from planner.errors import TopoplanError
from planner.trace import Trace
from planner.units import parse_size


def neighbor2d(rows: int, cols: int, bytes: float, iters: int = 1, compute_s: float = 0.0) -> Trace:
    """2D neighbour exchange: row-major ranks on a rows x cols grid, up to 4 neighbours, no wrap.

    Each iteration every rank posts an irecv and an isend per neighbour, then waitall.

    >>> neighbor2d(2, 2, 10).n_ranks
    4
    """
    n = rows * cols
    recs, t = [], 0.0
    for it in range(iters):
        for r in range(n):
            i, j = divmod(r, cols)
            nbrs = [(i + di) * cols + (j + dj) for di, dj in ((-1, 0), (1, 0), (0, -1), (0, 1))
                    if 0 <= i + di < rows and 0 <= j + dj < cols]
            for q in nbrs:
                recs.append((r, "irecv", q, bytes, -1, n, t, t, -1, 0))
            for q in nbrs:
                recs.append((r, "isend", q, bytes, -1, n, t, t, -1, 0))
            recs.append((r, "waitall", -1, 0, -1, n, t, t, -1, -1))
        t += compute_s + 1e-9  # distinct times per iteration keep calls ordered
    return Trace.from_records(recs, n, source=f"neighbor2d:{rows}x{cols}")


def alltoall(np: int, bytes: float, iters: int = 1, compute_s: float = 0.0) -> Trace:
    """``iters`` MPI_Alltoall calls of ``bytes`` per destination (one row per rank and call)."""
    step = compute_s + 1e-9
    recs = [(r, "alltoall", -1, bytes, -1, np, k * step, k * step, -1, -1)
            for r in range(np) for k in range(iters)]
    return Trace.from_records(recs, np, source="alltoall")


def ring(np: int, bytes: float, iters: int = 1, compute_s: float = 0.0) -> Trace:
    """Each rank sends to (r+1) % np and receives from (r-1) % np, per iteration."""
    recs = []
    for k in range(iters):
        t = k * (compute_s + 1e-9)
        for r in range(np):
            recs += [(r, "irecv", (r - 1) % np, bytes, -1, np, t, t, -1, 0),
                     (r, "isend", (r + 1) % np, bytes, -1, np, t, t, -1, 0),
                     (r, "waitall", -1, 0, -1, np, t, t, -1, -1)]
    return Trace.from_records(recs, np, source="ring")


def random(np: int, bytes: float, msgs: int = 0, seed: int = 0, iters: int = 1) -> Trace:
    """``msgs`` messages (default np) between random distinct rank pairs per iteration, seeded."""
    rng = numpy.random.default_rng(seed)
    msgs = msgs or np
    recs = []
    for k in range(iters):
        src = rng.integers(0, np, msgs)
        dst = (src + rng.integers(1, max(np, 2), msgs)) % np
        for a, b in zip(src.tolist(), dst.tolist()):
            recs.append((a, "isend", b, bytes, -1, np, float(k), float(k), -1, k))
            recs.append((b, "irecv", a, bytes, -1, np, float(k), float(k), -1, k))
        for r in range(np):
            recs.append((r, "waitall", -1, 0, -1, np, float(k), float(k), -1, -1))
    return Trace.from_records(recs, np, source="random")


def npb(kernel: str, np: int, klass: str = "C", iters: int = 0, compute_s: float = 0.0) -> Trace:
    """Skeleton of an NPB 3.x MPI kernel (see :mod:`planner.npb`); iters 0 means the class default."""
    from planner.npb import npb_trace

    return npb_trace(kernel, klass, np, iters or None, compute_s)


class Generator(NamedTuple):
    """A registry entry: ``(fn, params, help)``; params maps name -> (kind int|size|float|str, default or REQUIRED, help)."""

    fn: Callable
    params: dict
    help: str


REQUIRED = object()
GENERATORS = {
    "neighbor2d": Generator(neighbor2d, {"rows": ("int", REQUIRED, "grid rows"), "cols": ("int", REQUIRED, "grid columns"),
                                         "bytes": ("size", REQUIRED, "message size"), "iters": ("int", 1, "iterations"),
                                         "compute": ("float", 0.0, "seconds of computation per iteration")},
                            "2D neighbour exchange, row-major, no wrap"),
    "alltoall": Generator(alltoall, {"np": ("int", REQUIRED, "ranks"), "bytes": ("size", REQUIRED, "bytes per destination"),
                                     "iters": ("int", 1, "calls"), "compute": ("float", 0.0, "seconds between calls")},
                          "MPI_Alltoall calls"),
    "ring": Generator(ring, {"np": ("int", REQUIRED, "ranks"), "bytes": ("size", REQUIRED, "message size"),
                             "iters": ("int", 1, "iterations"), "compute": ("float", 0.0, "seconds per iteration")},
                      "send to the next rank"),
    "random": Generator(random, {"np": ("int", REQUIRED, "ranks"), "bytes": ("size", REQUIRED, "message size"),
                                 "msgs": ("int", 0, "messages per iteration (default np)"), "seed": ("int", 0, "seed"),
                                 "iters": ("int", 1, "iterations")}, "random pairs"),
    "npb": Generator(npb, {"kernel": ("str", REQUIRED, "cg, mg, is, lu or ft"), "np": ("int", REQUIRED, "ranks"),
                           "class": ("str", "C", "S, W, A, B or C"), "iters": ("int", 0, "iterations (0: class default)"),
                           "compute": ("float", 0.0, "seconds of computation per iteration")},
                     "NPB 3.x MPI skeletons"),
}


def is_spec(text: str) -> bool:
    """True for ``name`` or ``name:...`` with a registered generator name."""
    return str(text).split(":", 1)[0].strip().lower() in GENERATORS


def parse_spec(spec: str) -> Trace:
    """Run the generator a spec string names.

    >>> parse_spec("ring:np=4,bytes=1KB").n_ranks
    4
    """
    name, _, rest = str(spec).partition(":")
    name = name.strip().lower()
    if name not in GENERATORS:
        raise TopoplanError(f"unknown traffic generator {name!r} (known: {', '.join(GENERATORS)})")
    gen = GENERATORS[name]
    args = {}
    for item in filter(None, (x.strip() for x in rest.split(","))):
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq:
            raise TopoplanError(f"traffic spec {name!r}: expected key=value, got {item!r}")
        if key not in gen.params:
            raise TopoplanError(f"traffic spec {name!r}: unknown parameter {key!r} (known: {', '.join(gen.params)})")
        kind = gen.params[key][0]
        try:
            if kind == "int":
                args[key] = int(value)
                if args[key] < 0:
                    raise ValueError
            elif kind == "float":
                args[key] = float(value)
            elif kind == "size":
                args[key] = parse_size(value, key)
            else:
                args[key] = value.strip()
        except (ValueError, TopoplanError):
            raise TopoplanError(f"traffic spec {name!r}: parameter {key!r}: bad value {value!r}") from None
    for key, (kind, default, _) in gen.params.items():
        if key not in args:
            if default is REQUIRED:
                raise TopoplanError(f"traffic spec {name!r}: missing parameter {key!r}")
            args[key] = default
    for key in ("rows", "cols", "np"):
        if key in args and args[key] < 1:
            raise TopoplanError(f"traffic spec {name!r}: parameter {key!r} must be at least 1")
    if name == "npb":
        args["klass"] = args.pop("class")
    if "compute" in args:
        args["compute_s"] = args.pop("compute")
    trace = gen.fn(**args)
    trace.source = spec
    return trace


def describe_generators() -> str:
    lines = []
    for name, g in GENERATORS.items():
        ps = ", ".join(f"{k}=<{v[0]}>" + ("" if v[1] is REQUIRED else f" ({v[1]})") for k, v in g.params.items())
        lines.append(f"{name}: {g.help}; {ps}")
    return "\n".join(lines)
