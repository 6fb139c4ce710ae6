"""Communication skeletons of the NPB 3.4 MPI kernels CG, MG, IS, FT and LU.

:func:`npb_trace` replays each kernel's decomposition (process grid,
partners, message sizes, call order) without the arithmetic, for any valid
process count, and returns a :class:`planner.trace.Trace`. Sizes follow from
the class grid and the process grid exactly as the NPB sources compute them;
the 64-rank class C traces in ``shared/traces`` check the result
(tests/test_npb.py).

Modelled per kernel (iteration counts as NPB runs them, plus the untimed
warm-up iteration NPB also runs):

* CG: 2-D process grid (npcols >= nprows); per CG iteration the row-wise
  recursive-halving sum of q = A.p (``l2npcols`` exchanges), the transpose
  exchange, and two scalar dot-product sums; ``irecv``/``send``/``wait``.
* MG: 3-D process grid; ghost exchanges (``comm3``) on every level of the
  V-cycle plus the norm allreduces.
* IS: bucket-size allreduce, send-count alltoall and key alltoallv per
  iteration; per-destination key counts are the *expected* counts of NPB's
  key distribution (sum of four uniforms) under NPB's bucket-to-rank
  assignment, so they match a real run up to sampling noise.
* FT: one alltoall per 3-D FFT (1-D layout), or two on row/column
  communicators (2-D layout when np > nz).
* LU: 2-D grid from NPB's ``proc_grid``; SSOR sweeps send one k-plane
  boundary (5 doubles per point) to south/east (lower) and north/west
  (upper) per k, ``exchange_3`` for rhs ghost rows, and norm allreduces.

Times are synthetic: every call lasts one nanosecond and ``compute_s``
seconds of computation separate iterations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from planner.errors import TopoplanError
from planner.trace import Trace

KERNELS = ("cg", "mg", "is", "ft", "lu")
CLASSES = ("S", "W", "A", "B", "C", "D")
_TICK = 1e-9  # duration of one synthetic call (keeps calls of one rank ordered and distinct)

# class -> (na, niter)  [cg.f / npbparams]
CG_CLASS = {"S": (1400, 15), "W": (7000, 15), "A": (14000, 15), "B": (75000, 75), "C": (150000, 75),
            "D": (1500000, 100)}
# class -> (TOTAL_KEYS_LOG_2, MAX_KEY_LOG_2, NUM_BUCKETS_LOG_2)  [is.c]
IS_CLASS = {"S": (16, 11, 9), "W": (20, 16, 10), "A": (23, 19, 10), "B": (25, 21, 10), "C": (27, 23, 10),
            "D": (31, 27, 10)}
IS_ITERATIONS = 10
# class -> (nx, ny, nz, niter)  [ft.f]
FT_CLASS = {"S": (64, 64, 64, 6), "W": (128, 128, 32, 6), "A": (256, 256, 128, 6), "B": (512, 256, 256, 20),
            "C": (512, 512, 512, 20), "D": (2048, 1024, 1024, 25)}
# class -> (n = nx = ny = nz, nit)  [mg.f]
MG_CLASS = {"S": (32, 4), "W": (128, 4), "A": (256, 4), "B": (256, 20), "C": (512, 20), "D": (1024, 50)}
# class -> (isiz = nx = ny = nz, itmax)  [lu.f]
LU_CLASS = {"S": (12, 50), "W": (33, 300), "A": (64, 250), "B": (102, 250), "C": (162, 250), "D": (408, 300)}


class _Builder:
    """Collects trace records with a per-rank synthetic clock."""

    def __init__(self, n: int):
        self.n = n
        self.clock = [0.0] * n
        self.recs: list[tuple] = []

    def call(self, r, op, peer=-1, nbytes=0.0, root=-1, size=None, tag=-1, comm=-1):
        t = self.clock[r]
        self.clock[r] = t + _TICK
        self.recs.append((r, op, peer, float(nbytes), root, self.n if size is None else size, t, t + _TICK,
                          comm, tag))

    def coll(self, op, nbytes=0.0, root=-1):
        """One collective call on MPI_COMM_WORLD by every rank."""
        for r in range(self.n):
            self.call(r, op, -1, nbytes, root)

    def exchange(self, r, peer, send_b, recv_b, tag):
        """NPB's usual pattern: irecv from peer, blocking send to peer, wait."""
        self.call(r, "irecv", peer, recv_b, tag=tag)
        self.call(r, "send", peer, send_b, tag=tag)
        self.call(r, "wait", peer, recv_b, tag=tag)

    def compute(self, s: float):
        if s:
            self.clock = [c + s for c in self.clock]

    def trace(self, source, communicators=None) -> Trace:
        return Trace.from_records(self.recs, self.n, communicators=communicators, source=source)


def _is_pow2(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


def _need_pow2(kernel, np_):
    if not _is_pow2(np_):
        raise TopoplanError(f"npb {kernel}: field 'np': {np_} is not a power of two (NPB {kernel.upper()} needs one)")


# ---------------------------------------------------------------- CG ------
def cg_layout(na: int, nprocs: int):
    """Per-rank CG partners and sizes as in cg.f ``setup_proc_info``/``setup_submatrix_info``.

    Returns a list of dicts with ``exch_proc``, ``send_len``, ``reduce_exch``
    (partner per level 1..l2npcols), ``reduce_send`` (doubles per level).
    """
    log_p = int(math.log2(nprocs) + 1e-9)
    rows_l = log_p // 2
    cols_l = log_p - rows_l
    npcols, nprows = 2 ** cols_l, 2 ** rows_l
    l2npcols = cols_l
    out = []
    for me in range(nprocs):
        proc_row, proc_col = divmod(me, npcols)
        if na % npcols == 0:
            row_size = na // nprows
            firstrow = proc_row * row_size + 1
        else:
            extra = na - na // nprows * nprows
            if proc_row < extra:
                row_size = na // nprows + 1
                firstrow = proc_row * row_size + 1
            else:
                row_size = na // nprows
                firstrow = extra * (row_size + 1) + (proc_row - extra) * row_size + 1
        lastrow = firstrow - 1 + row_size
        nrows = lastrow - firstrow + 1
        if npcols == nprows:
            send_len = nrows
            exch = (me % nprows) * nprows + me // nprows
        else:
            send_len = (1 + nrows) // 2 if me % 2 == 0 else nrows // 2
            exch = 2 * ((me // 2) % nprows * nprows + me // 2 // nprows) + me % 2
        partners, div = [], npcols
        for _ in range(l2npcols):
            j = (proc_col + div // 2) % div + proc_col // div * div
            partners.append(proc_row * npcols + j)
            div //= 2
        sends = []
        for i in range(1, l2npcols + 1):
            if npcols == nprows or i != l2npcols:
                sends.append(send_len)
            else:
                sends.append(nrows - send_len)
        out.append({"exch_proc": exch, "send_len": send_len, "reduce_exch": partners, "reduce_send": sends,
                    "l2npcols": l2npcols})
    return out


def _cg(klass, np_, iters, compute_s):
    _need_pow2("cg", np_)
    na, niter = CG_CLASS[klass]
    niter = niter if iters is None else iters
    lay = cg_layout(na, np_)
    b = _Builder(np_)
    dbl = 8

    def scalar_sum(words):
        for r, L in enumerate(lay):
            for i, q in enumerate(L["reduce_exch"], start=1):
                b.exchange(r, q, words * dbl, words * dbl, tag=i)

    def matvec():
        for r, L in enumerate(lay):
            for i in range(L["l2npcols"], 0, -1):
                q = L["reduce_exch"][i - 1]
                b.exchange(r, q, L["reduce_send"][i - 1] * dbl, lay[q]["reduce_send"][i - 1] * dbl, tag=i)
            if L["l2npcols"]:
                e = L["exch_proc"]
                b.exchange(r, e, L["send_len"] * dbl, lay[e]["send_len"] * dbl, tag=1)

    def conj_grad():
        scalar_sum(1)                      # rho = r.r
        for _ in range(25):                # cgitmax
            matvec()                       # q = A.p
            scalar_sum(1)                  # d = p.q
            scalar_sum(1)                  # rho = r.r
        matvec()                           # r = A.z
        scalar_sum(1)                      # ||x - r||

    b.coll("bcast", 4, root=0)             # timeron
    conj_grad()                            # untimed warm-up iteration
    scalar_sum(2)                          # norm_temp1(1:2)
    b.coll("barrier")
    for _ in range(niter):
        b.compute(compute_s)
        conj_grad()
        scalar_sum(2)
    b.coll("reduce", 8, root=0)            # timer max
    return b.trace(f"npb:kernel=cg,class={klass},np={np_}")


# ---------------------------------------------------------------- IS ------
def _irwin_hall4_cdf(x):
    x = np.asarray(x, dtype=float)
    out = np.zeros_like(x)
    for k in range(5):
        out += (-1) ** k * math.comb(4, k) * np.clip(x - k, 0, None) ** 4
    return np.clip(out / 24.0, 0.0, 1.0)


def is_send_counts(klass: str, np_: int) -> np.ndarray:
    """Expected keys each rank sends to each destination per IS iteration (same for every source).

    Keys are ``MAX_KEY/4 * (u1+u2+u3+u4)``; buckets go to ranks as in is.c
    ``rank()`` (accumulate bucket totals until passing (j+1)*num_keys).
    """
    tk, mk, nb = IS_CLASS[klass]
    total, nbuckets = 2 ** tk, 2 ** nb
    num_keys = total / np_
    edges = _irwin_hall4_cdf(4.0 * np.arange(nbuckets + 1) / nbuckets)
    frac = np.diff(edges)
    counts = np.zeros(np_)
    acc, local, j = 0.0, 0.0, 0
    for i in range(nbuckets):
        acc += frac[i] * total
        local += frac[i] * num_keys
        # an exact tie (the median, by symmetry) is a coin flip in a real run; count it as not reached
        if j < np_ and acc >= (j + 1) * num_keys * (1 + 1e-9):
            counts[j] = local
            local = 0.0
            j += 1
    counts[np_ - 1] += local  # rounding leftovers of the last buckets
    return counts


def _is(klass, np_, iters, compute_s):
    _need_pow2("is", np_)
    tk, mk, nb = IS_CLASS[klass]
    niter = IS_ITERATIONS if iters is None else iters
    counts = np.round(is_send_counts(klass, np_)) * 4  # int keys
    b = _Builder(np_)
    b.coll("bcast", 4, root=0)
    for _ in range(niter + 1):  # rank(1) warm-up, then the timed iterations
        b.compute(compute_s)
        b.coll("allreduce", (2 ** nb + 5) * 4)
        b.coll("alltoall", 4)
        for r in range(np_):
            t = b.clock[r]
            for d in range(np_):
                b.recs.append((r, "alltoallv", d, float(counts[d]), -1, np_, t, t + _TICK, -1, -1))
            b.clock[r] = t + _TICK
    for r in range(np_):  # full_verify: last key to the right neighbour
        if r > 0:
            b.call(r, "irecv", r - 1, 4, tag=1000)
        if r < np_ - 1:
            b.call(r, "send", r + 1, 4, tag=1000)
        if r > 0:
            b.call(r, "wait", r - 1, 4, tag=1000)
    b.coll("reduce", 8, root=0)
    b.coll("reduce", 4, root=0)
    return b.trace(f"npb:kernel=is,class={klass},np={np_}")


# ---------------------------------------------------------------- FT ------
def ft_layout(klass: str, np_: int):
    """``(np1, np2)`` processor grid of ft.f ``setup``: 1-D (np1 = 1) when np <= nz."""
    nx, ny, nz, _ = FT_CLASS[klass]
    if np_ == 1:
        return 1, 1
    if np_ <= nz:
        return 1, np_
    return nz, np_ // nz


def _ft(klass, np_, iters, compute_s):
    _need_pow2("ft", np_)
    nx, ny, nz, niter = FT_CLASS[klass]
    if np_ > ny * nz:
        raise TopoplanError(f"npb ft: field 'np': {np_} ranks exceed ny*nz = {ny * nz} for class {klass}")
    niter = niter if iters is None else iters
    np1, np2 = ft_layout(klass, np_)
    local = nx * ny * nz // np_ * 16  # double complex
    b = _Builder(np_)
    comms = {}
    if np1 > 1:  # commslice1: same me1 (size np2); commslice2: same me2 (size np1)
        for me1 in range(np1):
            comms[me1] = np.arange(me1 * np2, (me1 + 1) * np2)
        for me2 in range(np2):
            comms[np1 + me2] = np.arange(me2, np_, np2)

    def fft():
        for r in range(np_):
            if np1 == 1:
                if np2 > 1:
                    b.call(r, "alltoall", -1, local // np_, size=np_)
            else:
                me1, me2 = divmod(r, np2)
                b.call(r, "alltoall", -1, local // np1, size=np1, comm=np1 + me2)
                b.call(r, "alltoall", -1, local // np2, size=np2, comm=me1)

    for _ in range(5):
        b.coll("bcast", 4, root=0)  # niter, layout, np1, np2, timers flag
    b.coll("barrier")
    fft()                           # untimed warm-up forward FFT
    fft()                           # forward FFT of the initial condition
    for _ in range(niter):
        b.compute(compute_s)
        fft()                       # inverse FFT
        b.coll("reduce", 16, root=0)  # checksum
    return b.trace(f"npb:kernel=ft,class={klass},np={np_}", communicators=comms)


# ---------------------------------------------------------------- API -----
_KERNELS = {"cg": _cg, "is": _is, "ft": _ft}


def npb_trace(kernel: str, klass: str = "C", np: int = 64, iters: int | None = None,
              compute_s: float = 0.0) -> Trace:
    """Communication skeleton of an NPB 3.4 MPI kernel as a :class:`Trace`.

    Parameters
    ----------
    kernel : cg, mg, is, lu or ft.
    klass : problem class S, W, A, B, C (D where NPB defines it).
    np : process count (CG/MG/IS/FT: a power of two; LU: any count NPB 3.4 accepts).
    iters : timed iterations (default: the class's NPB count); the untimed warm-up is added.
    compute_s : seconds of computation between iterations.

    Example
    -------
    >>> npb_trace("cg", "S", 4, iters=1).n_ranks
    4
    """
    k = str(kernel).strip().lower()
    c = str(klass).strip().upper()
    if k not in KERNELS:
        raise TopoplanError(f"npb: field 'kernel': unknown kernel {kernel!r} (known: {', '.join(KERNELS)})")
    if k not in _KERNELS:
        raise TopoplanError(f"npb: field 'kernel': {k} is not implemented yet (available: {', '.join(_KERNELS)})")
    if c not in CLASSES:
        raise TopoplanError(f"npb {k}: field 'class': unknown class {klass!r} (known: {', '.join(CLASSES)})")
    try:
        np_ = int(np)
    except (TypeError, ValueError):
        raise TopoplanError(f"npb {k}: field 'np': not an integer: {np!r}") from None
    if np_ < 1:
        raise TopoplanError(f"npb {k}: field 'np': must be at least 1, got {np_}")
    if iters is not None and int(iters) < 0:
        raise TopoplanError(f"npb {k}: field 'iters': must be non-negative, got {iters}")
    return _KERNELS[k](c, np_, None if iters is None else int(iters), float(compute_s))
