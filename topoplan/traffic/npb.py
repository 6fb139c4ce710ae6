"""Communication skeletons of the NPB 3.4 MPI kernels CG, MG, IS, LU and FT.

:func:`npb_trace` replays a kernel's MPI calls (who, to whom, in which order,
how often, how many bytes) without the arithmetic, for any process count the
kernel itself accepts, and returns a :class:`topoplan.traffic.trace.Trace`. Partners
and sizes are computed the way the NPB 3.4 sources compute them (process
grids, per-rank block sizes with remainders, coarse multigrid levels, the
untimed warm-up and initialisation communication); every p2p call names its
peer, its tag and the bytes that actually move, and ``wait`` rows carry the
completed receive (``req`` 0).

* CG: ``npcols x nprows`` grid (npcols = nprows or 2*nprows); per CG step the
  row-wise recursive-halving sum of A.p (``l2npcols`` exchanges with the
  remainder split of non-square grids), the transpose exchange, and the
  hand-written dot-product allreduces; 25 CG steps per outer iteration.
* MG: ``2^dx x 2^dy x 2^dz`` grid, ``comm3`` ghost exchanges on every level of
  the V-cycle (distances double where coarse levels leave ranks empty;
  ``comm3_ex`` hands data back to them), the 40 allreduces of ``zran3`` and
  the norms. Only the largest power of two of ``np`` ranks take part.
* IS: bucket-size allreduce, send-count alltoall and key alltoallv per
  ranking, ``full_verify``'s neighbour send. Key counts are the *expected*
  counts of NPB's key generator (a sum of four uniforms, so bell-shaped, not
  uniform) under NPB's bucket-to-rank assignment: a real run is one random
  sample of it.
* LU: ``xdim x ydim`` grid from ``proc_grid`` (any count that factors with
  ydim <= xdim <= 2*ydim); SSOR wavefront with blocking ``exchange_1`` per
  k-plane (lower sweep from north/west, upper from south/east),
  ``exchange_3`` in every rhs, ``exchange_4/5/6`` in ``pintgr``, allreduces of
  ``l2norm``, ``error``, ``pintgr``. ``inorm`` follows ``itmax`` as NPB's
  class defaults do.
* FT: 1-D layout (alltoall over all ranks per 3-D FFT) when np <= nz, else
  2-D with row and column communicators (two alltoalls per FFT); any np
  (NPB works on the largest power of two; extra ranks form their own
  communicators, as the code's ``MPI_Comm_split`` does).

Measured against the recorded 64-rank class C runs (5 iterations; tests in
``tests/test_npb.py``): CG, MG and LU reproduce every point-to-point pair,
its byte total and message count exactly, and the count of every operation;
FT's alltoall matrix is exact; IS's collective counts and full_verify sends
are exact and its alltoallv bytes match per pair to 0.5 % (median).

Times are synthetic (see :class:`topoplan.traffic.builder.TraceBuilder`):
``compute_s`` seconds of computation precede every call.
"""

from __future__ import annotations

import math

import numpy as np

from topoplan.core.errors import TopoplanError
from topoplan.traffic import limits
from topoplan.traffic.builder import TraceBuilder
from topoplan.traffic.trace import WORLD, Trace

__all__ = ["KERNELS", "MAX_NPB_RANKS", "cg_layout", "mg_layout", "is_key_counts", "ft_layout", "lu_layout",
           "npb_trace", "npb_recording"]

KERNELS = ("cg", "mg", "is", "lu", "ft")
DBL, INT, DCOMPLEX = 8, 4, 16

# class -> (na, niter)                                     [sys/setparams.c write_cg_info]
CG_CLASSES = {"S": (1400, 15), "W": (7000, 15), "A": (14000, 15), "B": (75000, 75), "C": (150000, 75),
              "D": (1500000, 100), "E": (9000000, 100), "F": (54000000, 100)}
# class -> (n = nx = ny = nz, nit)                         [write_mg_info]
MG_CLASSES = {"S": (32, 4), "W": (128, 4), "A": (256, 4), "B": (256, 20), "C": (512, 20), "D": (1024, 50),
              "E": (2048, 50), "F": (4096, 50)}
# class -> (TOTAL_KEYS_LOG_2, MAX_KEY_LOG_2, NUM_BUCKETS_LOG_2, MIN_PROCS)   [IS/is.c]
IS_CLASSES = {"S": (16, 11, 9, 1), "W": (20, 16, 10, 1), "A": (23, 19, 10, 1), "B": (25, 21, 10, 1),
              "C": (27, 23, 10, 1), "D": (29, 27, 10, 4), "E": (29, 31, 10, 64)}
IS_MAX_ITERATIONS = 10
# class -> (nx, ny, nz, niter)                             [write_ft_info]
FT_CLASSES = {"S": (64, 64, 64, 6), "W": (128, 128, 32, 6), "A": (256, 256, 128, 6), "B": (512, 256, 256, 20),
              "C": (512, 512, 512, 20), "D": (2048, 1024, 1024, 25), "E": (4096, 2048, 2048, 25),
              "F": (8192, 4096, 4096, 25)}
# class -> (isiz = nx0 = ny0 = nz0, itmax)                 [write_lu_info]
LU_CLASSES = {"S": (12, 50), "W": (33, 300), "A": (64, 250), "B": (102, 250), "C": (162, 250), "D": (408, 300),
              "E": (1020, 300), "F": (2560, 300)}
_CLASSES = {"cg": CG_CLASSES, "mg": MG_CLASSES, "is": IS_CLASSES, "ft": FT_CLASSES, "lu": LU_CLASSES}


def _bad_np(kernel, np_, why):
    return TopoplanError(f"npb {kernel}: field 'np': {np_} {why}")


def _pof2_floor(n: int) -> int:
    return 1 << (n.bit_length() - 1)


# ------------------------------------------------------------------- CG ---
def cg_layout(na: int, nprocs: int) -> dict:
    """CG's process grid and partners as ``setup_proc_info`` / ``setup_submatrix_info`` compute them.

    Parameters
    ----------
    na : matrix order of the class.
    nprocs : a power of two.

    Returns
    -------
    dict with ``npcols``, ``nprows``, ``l2npcols`` and per-rank arrays
    ``nrows`` (rows of the block), ``exch_proc`` (transpose partner),
    ``send_len`` (doubles sent to it), ``reduce_exch_proc`` and
    ``reduce_send_len`` (shape ``(nprocs, l2npcols)``: partner and doubles of
    the row-sum exchange i+1).

    Examples
    --------
    >>> L = cg_layout(1400, 8)
    >>> L["npcols"], L["nprows"], L["reduce_exch_proc"][0].tolist(), int(L["exch_proc"][2])
    (4, 2, [2, 1], 4)
    """
    log_p = nprocs.bit_length() - 1
    rows_l = log_p // 2
    l2 = log_p - rows_l
    npcols, nprows = 1 << l2, 1 << rows_l
    me = np.arange(nprocs)
    proc_row, proc_col = me // npcols, me % npcols
    if na % npcols == 0:
        nrows = np.full(nprocs, na // nprows)
    else:
        extra = na - na // nprows * nprows
        nrows = np.where(proc_row < extra, na // nprows + 1, na // nprows)
    square = npcols == nprows
    if square:
        send_len = nrows
        exch = (me % nprows) * nprows + me // nprows
    else:  # each process row's block is split between the two ranks of a pair
        send_len = np.where(me % 2 == 0, (1 + nrows) // 2, nrows // 2)
        exch = 2 * ((me // 2 % nprows) * nprows + me // 2 // nprows) + me % 2
    partners = np.zeros((nprocs, l2), dtype=np.int64)
    lens = np.zeros((nprocs, l2), dtype=np.int64)
    div = npcols
    for i in range(l2):
        partners[:, i] = proc_row * npcols + (proc_col + div // 2) % div + proc_col // div * div
        lens[:, i] = send_len if square or i != l2 - 1 else nrows - send_len
        div //= 2
    return {"npcols": npcols, "nprows": nprows, "l2npcols": l2, "nrows": nrows, "exch_proc": exch,
            "send_len": send_len, "reduce_exch_proc": partners, "reduce_send_len": lens}


def _cg(klass, P, iters, gap):
    if P & (P - 1):
        raise _bad_np("cg", P, "is not a power of two (NPB CG aborts)")
    na, niter = CG_CLASSES[klass]
    niter = niter if iters is None else iters
    L = cg_layout(na, P)
    part, lens, exch, send_len = L["reduce_exch_proc"], L["reduce_send_len"], L["exch_proc"], L["send_len"]
    ranks = np.arange(P)
    b = TraceBuilder(P, gap)

    def exchange(peer, send_b, recv_b, tag):  # irecv, blocking send, wait: NPB's hand-made sendrecv
        b.add(ranks, "irecv", peer, recv_b, tag=tag)
        b.add(ranks, "send", peer, send_b, tag=tag)
        b.add(ranks, "wait", peer, recv_b, req=0)

    def row_sum(words):  # allreduce over the process row by recursive doubling
        for i in range(L["l2npcols"]):
            exchange(part[:, i], words * DBL, words * DBL, i + 1)

    def matvec():  # reduce-scatter of A.p within the row, then the transpose exchange
        for i in range(L["l2npcols"] - 1, -1, -1):
            exchange(part[:, i], lens[:, i] * DBL, lens[part[:, i], i] * DBL, i + 1)
        if L["l2npcols"]:
            exchange(exch, send_len * DBL, send_len[exch] * DBL, 1)

    def conj_grad():
        row_sum(1)                      # rho = r.r
        m = b.mark()
        matvec()                        # q = A.p
        row_sum(1)                      # p.q
        row_sum(1)                      # rho = r.r
        b.repeat(m, 25)                 # cgitmax
        matvec()                        # r = A.z
        row_sum(1)                      # ||x - A.z||

    b.add(ranks, "bcast", nbytes=4, root=0)     # timeron
    conj_grad()                                 # untimed warm-up iteration
    row_sum(2)                                  # norm_temp(1:2)
    b.add(ranks, "barrier")
    m = b.mark()
    conj_grad()
    row_sum(2)
    b.repeat(m, niter)
    b.add(ranks, "reduce", nbytes=8, root=0)    # max time
    return b, {}


# ------------------------------------------------------------------- MG ---
def mg_layout(n: int, nprocs: int) -> dict:
    """MG's 3-D process grid and every level's sizes and neighbours, as ``setup`` in mg.f computes them.

    Parameters
    ----------
    n : grid points per dimension of the class (nx = ny = nz).
    nprocs : active processes (a power of two).

    Returns
    -------
    dict with ``lt`` (levels), ``pi`` (grid shape) and, keyed by level k:
    ``m[k]`` (ranks x 3 local sizes with ghosts), ``dead[k]`` (ranks holding
    no points), ``nbr[k]`` (ranks x 3 axes x (-1, +1) neighbours),
    ``give_ex[k]`` / ``take_ex[k]`` (ranks x 3: hand data to / take data from
    empty coarse-level neighbours in ``comm3_ex``).

    Examples
    --------
    >>> L = mg_layout(32, 8)
    >>> L["pi"].tolist(), L["m"][5][0].tolist(), L["nbr"][5][0].tolist()
    ([2, 2, 2], [18, 18, 18], [[1, 1], [2, 2], [4, 4]])
    """
    lt = n.bit_length() - 1
    log_p = nprocs.bit_length() - 1
    dx = log_p // 3
    dy = (log_p - dx) // 2
    pi = np.array([1 << dx, 1 << dy, nprocs >> (dx + dy)], dtype=np.int64)
    me = np.arange(nprocs)
    idi = np.stack([me % pi[0], (me // pi[0]) % pi[1], me // (pi[0] * pi[1])], axis=1)
    nxt = np.ones((nprocs, 3), dtype=np.int64)
    out = {"lt": lt, "pi": pi, "m": {}, "dead": {}, "nbr": {},
           "give_ex": {k: np.zeros((nprocs, 3), bool) for k in range(1, lt + 1)},
           "take_ex": {k: np.zeros((nprocs, 3), bool) for k in range(1, lt + 1)}}
    for k in range(lt, 0, -1):
        ng = n >> (lt - k)
        mi = 2 + ((idi + 1) * ng) // pi - (idi * ng) // pi
        mip = 2 + ((nxt + idi + 1) * ng) // pi - ((nxt + idi) * ng) // pi
        nxt = np.where((mip == 2) | (mi == 2), 2 * nxt, nxt)
        if k < lt:
            out["give_ex"][k + 1] |= (mip == 2) & (mi == 3)
            out["take_ex"][k + 1] |= (mip == 3) & (mi == 2)
        out["m"][k] = mi
        out["dead"][k] = (mi == 2).any(axis=1)
        plus, minus = np.fmod(idi + nxt + pi, pi), np.fmod(idi - nxt + pi, pi)  # Fortran mod
        nb = np.empty((nprocs, 3, 2), dtype=np.int64)
        for ax in range(3):
            for d, idn in ((0, minus), (1, plus)):
                c = idi.copy()
                c[:, ax] = idn[:, ax]
                nb[:, ax, d] = c[:, 0] + pi[0] * (c[:, 1] + pi[1] * c[:, 2])
        out["nbr"][k] = nb
    return out


def _mg_tag(ax, d):
    """msg_type(axis, dir) of mg.f (axis 0..2, dir -1/+1)."""
    return 100 * (d + 2 + 10 * (ax + 1))


def _mg_face(ax, dims, ex=1):
    """Doubles give3 (ex=1) / give3_ex (ex=1 for dir -1, 2 for dir +1) sends along axis ax."""
    n1, n2, n3 = dims[:, 0], dims[:, 1], dims[:, 2]
    if ex == 0:  # give3: interior face, ghosts of the earlier axes included
        return ((n2 - 2) * (n3 - 2), n1 * (n3 - 2), n1 * n2)[ax]
    return (n2 * n3, n1 * n3, n1 * n2)[ax] * ex


def _mg(klass, P_total, iters, gap):
    n, nit = MG_CLASSES[klass]
    nit = nit if iters is None else iters
    if P_total > 131072:
        raise _bad_np("mg", P_total, "exceeds MG's maxprocs 131072")
    P = _pof2_floor(P_total)  # mg.f: the other ranks leave after MPI_Comm_split
    L = mg_layout(n, P)
    if (L["pi"] > n).any():
        raise _bad_np("mg", P_total, f"gives a {'x'.join(map(str, L['pi'].tolist()))} process grid, "
                                     f"more ranks than the {n}^3 grid of class {klass} has points along an axis")
    lt = L["lt"]
    act = np.arange(P)
    comm = WORLD if P == P_total else 0
    comms = {} if P == P_total else {0: act}
    b = TraceBuilder(P_total, gap)

    def coll(op, nbytes=0, root=-1):
        b.add(act, op, nbytes=nbytes, root=root, size=P, comm=comm)

    def check(peers):
        if (peers < 0).any() or (peers >= P).any():
            raise TopoplanError(f"npb mg: field 'np': {P_total} leads to an invalid neighbour on a coarse level")

    def comm3(k):
        if P == 1:
            return  # comm1p: local copies only
        alive = act[~L["dead"][k]]
        dims = L["m"][k]
        for ax in range(3):
            up, dn = L["nbr"][k][alive, ax, 1], L["nbr"][k][alive, ax, 0]
            check(up), check(dn)
            from_up, from_dn = _mg_face(ax, dims[up], 0) * DBL, _mg_face(ax, dims[dn], 0) * DBL
            mine = _mg_face(ax, dims[alive], 0) * DBL
            b.add(alive, "irecv", up, from_up, tag=_mg_tag(ax, -1), size=P, comm=comm)   # ready(-1)
            b.add(alive, "irecv", dn, from_dn, tag=_mg_tag(ax, +1), size=P, comm=comm)   # ready(+1)
            b.add(alive, "send", up, mine, tag=_mg_tag(ax, +1), size=P, comm=comm)       # give3(+1)
            b.add(alive, "send", dn, mine, tag=_mg_tag(ax, -1), size=P, comm=comm)       # give3(-1)
            b.add(alive, "wait", up, from_up, req=0, size=P, comm=comm)                  # take3(-1)
            b.add(alive, "wait", dn, from_dn, req=0, size=P, comm=comm)                  # take3(+1)

    def comm3_ex(k):  # interp to level k: ranks next to empty coarse ranks fill them in
        if P == 1:
            return
        dims = L["m"][k]
        for ax in range(3):
            take = act[L["take_ex"][k][:, ax]]
            if take.size:
                up, dn = L["nbr"][k][take, ax, 1], L["nbr"][k][take, ax, 0]
                check(up), check(dn)
                from_up, from_dn = _mg_face(ax, dims[up], 1) * DBL, _mg_face(ax, dims[dn], 2) * DBL
                b.add(take, "irecv", up, from_up, tag=_mg_tag(ax, -1), size=P, comm=comm)
                b.add(take, "irecv", dn, from_dn, tag=_mg_tag(ax, +1), size=P, comm=comm)
                b.add(take, "wait", up, from_up, req=0, size=P, comm=comm)
                b.add(take, "wait", dn, from_dn, req=0, size=P, comm=comm)
            give = act[L["give_ex"][k][:, ax]]
            if give.size:
                up, dn = L["nbr"][k][give, ax, 1], L["nbr"][k][give, ax, 0]
                check(up), check(dn)
                b.add(give, "send", up, _mg_face(ax, dims[give], 2) * DBL, tag=_mg_tag(ax, +1), size=P, comm=comm)
                b.add(give, "send", dn, _mg_face(ax, dims[give], 1) * DBL, tag=_mg_tag(ax, -1), size=P, comm=comm)

    def norm2u3():
        coll("allreduce", DBL)  # max
        coll("allreduce", DBL)  # sum

    def zran3():
        coll("barrier")
        m = b.mark()
        for nbytes in (DBL, 4 * INT, DBL, 4 * INT):  # best value and its position, for the max and the min
            coll("allreduce", nbytes)
        b.repeat(m, 10)
        coll("barrier")
        comm3(lt)

    def mg3p():
        for k in range(lt, 1, -1):
            comm3(k - 1)                # rprj3 to level k-1
        comm3(1)                        # psinv on the coarsest level
        for k in range(2, lt + 1):
            comm3_ex(k)                 # interp from k-1
            comm3(k)                    # resid
            comm3(k)                    # psinv

    coll("barrier")
    for nbytes in (INT, INT, INT, INT, INT, 8 * INT, 4):  # lt, nit, nx, ny, nz, debug_vec, timeron
        coll("bcast", nbytes, 0)
    zran3()
    norm2u3()
    comm3(lt)                           # resid
    norm2u3()
    mg3p()                              # one iteration for startup
    comm3(lt)                           # resid
    zran3()
    coll("barrier")
    comm3(lt)                           # resid
    norm2u3()
    m = b.mark()
    mg3p()
    comm3(lt)                           # resid
    b.repeat(m, nit)
    norm2u3()
    coll("reduce", DBL, 0)
    return b, comms


# ------------------------------------------------------------------- IS ---
def _irwin_hall4_cdf(x):
    """CDF of the sum of four independent U(0,1)."""
    x = np.asarray(x, dtype=float)
    out = sum((-1) ** k * math.comb(4, k) * np.clip(x - k, 0, None) ** 4 for k in range(5))
    return np.clip(out / 24.0, 0.0, 1.0)


def _round_to_total(x, total):
    """Integers near x (largest remainders round up) that add up to total."""
    base = np.floor(x).astype(np.int64)
    short = int(total - base.sum())
    if short > 0:
        base[np.argsort(-(x - base), kind="stable")[:short]] += 1
    return base


def is_key_counts(klass: str, nprocs: int) -> np.ndarray:
    """Keys every rank sends to each rank per ranking, in expectation.

    NPB draws a key as ``MAX_KEY/4 * (u1 + u2 + u3 + u4)``, so bucket ``b`` of
    ``NUM_BUCKETS`` holds the probability mass of the four-uniform sum over
    ``[4b, 4b+4) / NUM_BUCKETS``. ``rank()`` gives a rank the buckets up to
    where the cumulative global bucket total reaches ``(j+1) * num_keys``;
    this is applied to the expected (integer) bucket totals. Every source
    has the same expected distribution, so every row is the same.

    Parameters
    ----------
    klass : str
        Problem class S, W, A-F.
    nprocs : int
        Ranks (a power of two).

    Returns
    -------
    numpy.ndarray of int
        Length ``nprocs``, adding up to ``num_keys``.

    Examples
    --------
    >>> c = is_key_counts("S", 4)
    >>> int(c.sum()), bool((c > 0).all())
    (16384, True)
    """
    tk, _, nb, minp = IS_CLASSES[klass]
    total = (1 << tk) * minp
    num_keys = (1 << tk) // nprocs * minp
    nbuckets = 1 << nb
    frac = np.diff(_irwin_hall4_cdf(4.0 * np.arange(nbuckets + 1) / nbuckets))
    totals = _round_to_total(frac * total, total)
    dest = np.full(nbuckets, nprocs - 1, dtype=np.int64)
    acc, j, start = 0, 0, 0
    for i, t in enumerate(totals.tolist()):
        acc += t
        if j < nprocs and acc >= (j + 1) * num_keys:
            dest[start:i + 1] = j
            start, j = i + 1, j + 1
    share = np.bincount(dest, weights=frac, minlength=nprocs)
    return _round_to_total(share / share.sum() * num_keys, num_keys)


def _is(klass, P, iters, gap):
    _, _, nb, minp = IS_CLASSES[klass]
    maxp = 128 if klass == "S" else 1024
    if P & (P - 1):
        raise _bad_np("is", P, "is not a power of two (NPB IS exits)")
    if not minp <= P <= maxp:
        raise _bad_np("is", P, f"is outside the {minp}-{maxp} processes NPB IS allows for class {klass}")
    niter = IS_MAX_ITERATIONS if iters is None else iters
    keys = is_key_counts(klass, P) * INT
    ranks = np.arange(P)
    b = TraceBuilder(P, gap)
    b.add(ranks, "bcast", nbytes=INT, root=0)                  # timeron
    m = b.mark()
    b.add(ranks, "allreduce", nbytes=((1 << nb) + 5) * INT)     # bucket sizes + partial-verify keys
    b.add(ranks, "alltoall", nbytes=INT)                        # send counts
    b.add(np.repeat(ranks, P), "alltoallv", np.tile(ranks, P), np.tile(keys, P), one_call=True)
    b.repeat(m, niter + 1)                                      # rank(1) untimed, then the iterations
    b.add(ranks, "reduce", nbytes=DBL, root=0)                  # max time
    b.add(ranks[1:], "irecv", ranks[:-1], INT, tag=1000)        # full_verify: largest key to the right
    b.add(ranks[:-1], "send", ranks[1:], INT, tag=1000)
    b.add(ranks[1:], "wait", ranks[:-1], INT, req=0)
    b.add(ranks, "reduce", nbytes=INT, root=0)                  # passed_verification
    return b, {}


# ------------------------------------------------------------------- FT ---
def ft_layout(klass: str, nprocs: int) -> dict:
    """FT's processor grid (``setup`` in ft.f): np1 x np2 = the largest power of two <= nprocs.

    Parameters
    ----------
    klass : str
        Problem class S, W, A-F.
    nprocs : int
        Ranks.

    Returns
    -------
    dict
        ``np_min``, ``np1``, ``np2``, ``layout`` ('0D', '1D' or '2D') and the
        per-destination alltoall sizes in bytes of the four transposes:
        ``xy_fwd``, ``xz_fwd``, ``xz_inv``, ``xy_inv`` (2-D; on commslice2,
        commslice1, commslice1, commslice2) or ``xyz`` (1-D, on commslice1).

    Examples
    --------
    >>> L = ft_layout("C", 64)
    >>> L["layout"], L["np1"], L["np2"], L["xyz"]
    ('1D', 1, 64, 524288)
    """
    nx, ny, nz, _ = FT_CLASSES[klass]
    np_min = _pof2_floor(nprocs)
    if np_min == 1:
        np1, np2, layout = 1, 1, "0D"
    elif np_min <= nz:
        np1, np2, layout = 1, np_min, "1D"
    else:
        np1, np2, layout = nz, np_min // nz, "2D"
    if layout == "2D":
        dims = [(nx, ny // np1, nz // np2), (ny, nx // np1, nz // np2), (nz, nx // np1, ny // np2)]
    else:
        dims = [(nx, ny // np1, nz // np2), (nx, ny // np1, nz // np2), (nz, nx // np1, ny // np2)]
    if any(0 in d for d in dims):
        raise _bad_np("ft", nprocs, f"splits the {nx}x{ny}x{nz} grid of class {klass} into empty blocks")
    ntdivnp = nx * ny // np_min * nz
    vol = lambda d: d[0] * d[1] * d[2]  # noqa: E731
    out = {"np_min": np_min, "np1": np1, "np2": np2, "layout": layout}
    if layout == "1D":
        out["xyz"] = ntdivnp // nprocs * DCOMPLEX      # transpose2_global divides by np, not np_min
    elif layout == "2D":
        out.update(xy_fwd=vol(dims[0]) // np1 * DCOMPLEX, xz_fwd=vol(dims[1]) // np2 * DCOMPLEX,
                   xz_inv=vol(dims[2]) // np2 * DCOMPLEX, xy_inv=vol(dims[1]) // np1 * DCOMPLEX)
    return out


def _ft(klass, P, iters, gap):
    niter = FT_CLASSES[klass][3] if iters is None else iters
    L = ft_layout(klass, P)
    ranks = np.arange(P)
    me1, me2 = ranks // L["np2"], ranks % L["np2"]
    comms, cid = {}, {}
    for name, color, key in (("slice1", me1, me2), ("slice2", me2, me1)):
        ids = np.empty(P, dtype=np.int64)
        for c in np.unique(color).tolist():
            members = ranks[color == c][np.argsort(key[color == c], kind="stable")]
            if len(members) == P and (members == ranks).all():
                ids[members] = WORLD
            else:
                ids[members] = len(comms)
                comms[len(comms)] = members
        cid[name] = ids
    size = {name: np.array([P if i == WORLD else len(comms[i]) for i in ids.tolist()]) for name, ids in cid.items()}
    b = TraceBuilder(P, gap)

    def transpose(name, nbytes):
        b.add(ranks, "alltoall", nbytes=nbytes, size=size[name], comm=cid[name])

    def fft(forward):
        if L["layout"] == "1D":
            transpose("slice1", L["xyz"])
        elif L["layout"] == "2D" and forward:
            transpose("slice2", L["xy_fwd"])
            transpose("slice1", L["xz_fwd"])
        elif L["layout"] == "2D":
            transpose("slice1", L["xz_inv"])
            transpose("slice2", L["xy_inv"])

    for _ in range(5):                      # np1, np2, layout_type, niter, timers_enabled
        b.add(ranks, "bcast", nbytes=INT, root=0)
    fft(True)                               # untimed run-through
    b.add(ranks, "barrier")
    fft(True)
    m = b.mark()
    fft(False)
    b.add(ranks, "reduce", nbytes=DCOMPLEX, root=0)   # checksum
    b.repeat(m, niter)
    return b, comms


# ------------------------------------------------------------------- LU ---
def _isqrt2(i: int) -> int:
    """proc_grid.f isqrt2: xdim with xdim * ydim = i, ydim <= xdim <= 2 * ydim, or -1."""
    if i <= 0:
        return -1
    square, x = 0, 1
    while square <= i:
        square = x * x
        if square == i:
            return x
        x += 1
    x -= 1
    y = i // x
    while x * y != i and 2 * y >= x:
        x += 1
        y = i // x
    return x if x * y == i and 2 * y >= x else -1


def lu_layout(n0: int, nprocs: int) -> dict:
    """LU's ``xdim x ydim`` grid, neighbours and block sizes (proc_grid, neighbors, subdomain).

    Parameters
    ----------
    n0 : int
        Grid points per side (the class's problem size, e.g. 162 for class C).
    nprocs : int
        Ranks.

    Returns
    -------
    dict
        ``xdim``, ``ydim`` and per-rank arrays ``north``, ``south``, ``west``,
        ``east`` (-1: none), ``nx``, ``ny``, ``ipt``, ``jpt``, ``ist``,
        ``iend``, ``jst``, ``jend``.

    Raises
    ------
    TopoplanError
        Naming 'np' when NPB LU would abort.

    Examples
    --------
    >>> L = lu_layout(162, 128)
    >>> L["xdim"], L["ydim"], int(L["nx"][0]), int(L["ny"][0])
    (16, 8, 11, 21)
    """
    xdim = _isqrt2(nprocs)
    if xdim <= 0:
        raise _bad_np("lu", nprocs, "has no xdim x ydim factorisation with ydim <= xdim <= 2*ydim "
                                    "(NPB LU proc_grid aborts)")
    ydim = nprocs // xdim
    me = np.arange(nprocs)
    row, col = me % xdim + 1, me // xdim + 1
    out = {"xdim": xdim, "ydim": ydim,
           "north": np.where(row > 1, me - 1, -1), "south": np.where(row < xdim, me + 1, -1),
           "west": np.where(col > 1, me - xdim, -1), "east": np.where(col < ydim, me + xdim, -1)}
    for axis, dim, idx in (("x", xdim, row), ("y", ydim, col)):
        mm = n0 % dim
        size = np.where(idx <= mm, n0 // dim + 1, n0 // dim)
        out["n" + axis] = size
        out["ipt" if axis == "x" else "jpt"] = np.where(idx <= mm, (idx - 1) * size, (idx - 1) * size + mm)
    if (out["nx"] < 3).any() or (out["ny"] < 3).any():
        raise _bad_np("lu", nprocs, f"leaves subdomains under 3 points wide on the {n0}^3 grid "
                                    "(NPB LU aborts: SUBDOMAIN SIZE IS TOO SMALL)")
    out["ist"] = np.where(out["north"] == -1, 2, 1)
    out["iend"] = np.where(out["south"] == -1, out["nx"] - 1, out["nx"])
    out["jst"] = np.where(out["west"] == -1, 2, 1)
    out["jend"] = np.where(out["east"] == -1, out["ny"] - 1, out["ny"])
    return out


def _lu_pintgr_ranges(L, n0):
    """ibeg, ifin, ifin1, jbeg, jfin, jfin1 of pintgr.f (ii1 = 2, ii2 = nx0-1, ji1 = 2, ji2 = ny0-2)."""
    out = {}
    for a, n, pt, lo, hi in (("i", L["nx"], L["ipt"], 2, n0 - 1), ("j", L["ny"], L["jpt"], 2, n0 - 2)):
        g1, g2 = pt + 1, pt + n
        beg = np.where((g1 >= lo) & (g2 < hi + n), 1, n + 1)
        fin = np.where((g1 > lo - n) & (g2 <= hi), n, 0)
        beg = np.where((lo >= g1) & (lo <= g2), lo - pt, beg)
        fin = np.where((hi >= g1) & (hi <= g2), hi - pt, fin)
        out[a + "beg"], out[a + "fin"] = beg, fin
        out[a + "fin1"] = np.where(pt + fin == hi, fin - 1, fin)
    return out


_FROM_S, _FROM_N, _FROM_E, _FROM_W = 1, 2, 3, 4


def _lu(klass, P, iters, gap):
    n0, itmax = LU_CLASSES[klass]
    itmax = itmax if iters is None else iters
    inorm = itmax                      # setparams: inorm_default = itmax
    L = lu_layout(n0, P)
    nz = n0
    N, S, W, E = L["north"], L["south"], L["west"], L["east"]
    ranks = np.arange(P)
    has = {d: ranks[v >= 0] for d, v in (("n", N), ("s", S), ("w", W), ("e", E))}
    ns_b = 5 * (L["jend"] - L["jst"] + 1) * DBL          # exchange_1: one k-plane row, 5 variables
    we_b = 5 * (L["iend"] - L["ist"] + 1) * DBL
    b = TraceBuilder(P, gap)

    def p2p(op, who, to, nbytes, tag):
        b.add(who, op, to[who], nbytes[to[who]] if op in ("recv", "irecv", "wait") else nbytes[who],
              tag=-1 if op == "wait" else tag, req=0 if op == "wait" else -1)

    def coll(op, nbytes=0, root=-1):
        b.add(ranks, op, nbytes=nbytes, root=root)

    nbr = {"n": N, "s": S, "w": W, "e": E}

    def exchange_3(first, second, tag1, tag2, nbytes):  # two ghost planes over the whole k range
        for frm, to, tag in ((first, second, tag1), (second, first, tag2)):
            p2p("irecv", has[frm], nbr[frm], nbytes, tag)
            p2p("send", has[to], nbr[to], nbytes, tag)
            p2p("wait", has[frm], nbr[frm], nbytes, tag)

    def rhs():
        exchange_3("n", "s", _FROM_N, _FROM_S, 10 * L["ny"] * nz * DBL)
        exchange_3("w", "e", _FROM_W, _FROM_E, 10 * L["nx"] * nz * DBL)

    def sweeps():
        m = b.mark()                     # lower triangle, k = 2 .. nz-1
        p2p("recv", has["n"], N, ns_b, _FROM_N)
        p2p("recv", has["w"], W, we_b, _FROM_W)
        p2p("send", has["s"], S, ns_b, _FROM_N)
        p2p("send", has["e"], E, we_b, _FROM_W)
        b.repeat(m, nz - 2)
        m = b.mark()                     # upper triangle, k = nz-1 .. 2
        p2p("recv", has["s"], S, ns_b, _FROM_S)
        p2p("recv", has["e"], E, we_b, _FROM_E)
        p2p("send", has["n"], N, ns_b, _FROM_S)
        p2p("send", has["w"], W, we_b, _FROM_E)
        b.repeat(m, nz - 2)

    def ssor(niter):
        rhs()
        coll("allreduce", 5 * DBL)       # l2norm
        coll("barrier")
        istep = 1
        while istep <= niter:
            plain = istep % inorm != 0 and istep != itmax
            if plain:                    # identical steps: record one, repeat it
                run = 1
                while istep + run <= niter and (istep + run) % inorm != 0 and istep + run != itmax:
                    run += 1
                m = b.mark()
                sweeps()
                rhs()
                b.repeat(m, run)
                istep += run
                continue
            sweeps()
            if istep % inorm == 0:
                coll("allreduce", 5 * DBL)
            rhs()
            coll("allreduce", 5 * DBL)
            istep += 1
        coll("allreduce", DBL)           # max time

    def pintgr():
        R = _lu_pintgr_ranges(L, n0)
        nx, ny = L["nx"], L["ny"]
        # exchange_4: phi1/phi2 rows from the east, then columns from the south
        east_in, west_out = ranks[R["jfin1"] == ny], ranks[R["jbeg"] == 1]
        south_in, north_out = ranks[R["ifin1"] == nx], ranks[R["ibeg"] == 1]
        for who, to in ((east_in, E), (west_out, W), (south_in, S), (north_out, N)):
            if (to[who] < 0).any():
                raise TopoplanError(f"npb lu: field 'np': {P} gives a pintgr exchange without a neighbour")
        p2p("irecv", east_in, E, 2 * nx * DBL, _FROM_E)
        p2p("wait", east_in, E, 2 * nx * DBL, _FROM_E)
        p2p("send", west_out, W, 2 * nx * DBL, _FROM_E)
        p2p("irecv", south_in, S, 2 * (ny + 2) * DBL, _FROM_S)
        p2p("wait", south_in, S, 2 * (ny + 2) * DBL, _FROM_S)
        p2p("send", north_out, N, 2 * (ny + 2) * DBL, _FROM_S)
        coll("allreduce", DBL)
        line = np.full(P, nz * DBL)
        for ind in (L["jpt"] + R["jbeg"] == 2, L["jpt"] + R["jfin"] == n0 - 2):   # exchange_5: j = ji1, ji2
            p2p("irecv", ranks[ind & (R["ifin1"] == nx)], S, line, _FROM_S)
            p2p("wait", ranks[ind & (R["ifin1"] == nx)], S, line, _FROM_S)
            p2p("send", ranks[ind & (R["ibeg"] == 1)], N, line, _FROM_S)
        coll("allreduce", DBL)
        for ind in (L["ipt"] + R["ibeg"] == 2, L["ipt"] + R["ifin"] == n0 - 1):   # exchange_6: i = ii1, ii2
            p2p("irecv", ranks[ind & (R["jfin1"] == ny)], E, line, _FROM_E)
            p2p("wait", ranks[ind & (R["jfin1"] == ny)], E, line, _FROM_E)
            p2p("send", ranks[ind & (R["jbeg"] == 1)], W, line, _FROM_E)
        coll("allreduce", DBL)

    # bcast_inputs: ipr, inorm, itmax, dt, omega, tolrsd(5), nx0, ny0, nz0, timeron
    for nbytes in (INT, INT, INT, DBL, DBL, 5 * DBL, INT, INT, INT, 4):
        coll("bcast", nbytes, 0)
    rhs()                                # erhs
    ssor(1)                              # untimed warm-up step
    ssor(itmax)
    coll("allreduce", 5 * DBL)           # error
    pintgr()
    return b, {}


# ------------------------------------------------------------------- API ---
_KERNELS = {"cg": _cg, "mg": _mg, "is": _is, "lu": _lu, "ft": _ft}


MAX_NPB_RANKS = 65536  # CG class C at 16,384 ranks is already 57 million trace rows per iteration


def npb_trace(kernel: str, klass: str = "C", np: int = 64, iters: int | None = None,
              compute_s: float = 0.0) -> Trace:
    """Communication skeleton of an NPB 3.4 MPI kernel as a :class:`Trace`.

    Parameters
    ----------
    kernel : ``cg``, ``mg``, ``is``, ``lu`` or ``ft``.
    klass : problem class ``S``, ``W``, ``A`` ... ``F`` (IS has no F).
    np : MPI_COMM_WORLD size; must be one the kernel accepts: CG and IS a
        power of two (IS: 1-1024 ranks, 1-128 for class S, at least 4 for D
        and 64 for E), MG and FT any count (NPB uses the largest power of two
        of them), LU any ``xdim x ydim`` with ``ydim <= xdim <= 2*ydim`` and
        blocks at least 3 points wide.
    iters : timed iterations (CG niter, MG nit, IS iterations, LU itmax, FT
        niter); default: the class's. NPB's untimed warm-up is always added.
    compute_s : seconds of computation before every MPI call.

    Returns
    -------
    Trace with per-rank call order, tags, and ``communicators`` for FT's
    row/column communicators and MG's working communicator.

    Raises TopoplanError naming the field ('kernel', 'class', 'np', 'iters'
    or 'compute') for invalid input, and 'np', 'iters' for a trace that
    the memory available cannot hold (checked before it is built; see
    :func:`topoplan.traffic.limits.check_generated_memory`, and
    :func:`topoplan.traffic.sources.load_traffic` for its traffic).

    Examples
    --------
    >>> t = npb_trace("lu", "S", 4, iters=2)
    >>> t.n_ranks, t.op_counts()["bcast"]
    (4, 40)
    """
    builder, source, communicators = npb_recording(kernel, klass, np, iters, compute_s)
    k = str(kernel).strip().lower()   # valid: npb_recording checked it
    limits.check_generated_memory(builder.rows, builder.n, f"npb {k}: fields 'np', 'iters': the trace")
    return builder.build(source, communicators)


def npb_recording(kernel: str, klass: str = "C", np: int = 64, iters: int | None = None,
                  compute_s: float = 0.0) -> tuple:
    """What :func:`npb_trace` builds, still as its recording: ``(TraceBuilder, source, communicators)``.

    Repeated iterations stay symbolic in the
    :class:`~topoplan.traffic.builder.TraceBuilder`, so this is cheap at any
    size: ``builder.rows`` tells the trace's size before it is built,
    ``builder.pieces(source, communicators)`` yields it piece by piece, and
    ``builder.blocks(source, communicators)`` each recorded block once with
    its count (what its traffic needs).

    Parameters
    ----------
    kernel, klass, np, iters, compute_s
        As for :func:`npb_trace`.

    Returns
    -------
    tuple
        ``(builder, source, communicators)``.

    Raises
    ------
    TopoplanError
        As :func:`npb_trace`, except the memory check (made by ``builder.build``).

    Examples
    --------
    >>> b, source, comms = npb_recording("cg", "C", 16384, iters=1)
    >>> b.rows, source
    (56967168, 'npb:kernel=cg,class=C,np=16384,iters=1')
    """
    k = str(kernel).strip().lower()
    if k not in _KERNELS:
        raise TopoplanError(f"npb: field 'kernel': unknown kernel {kernel!r} (known: {', '.join(KERNELS)})")
    c = str(klass).strip().upper()
    if c not in _CLASSES[k]:
        raise TopoplanError(f"npb {k}: field 'class': unknown class {klass!r} "
                            f"(NPB {k.upper()} has {', '.join(_CLASSES[k])})")
    try:
        P = int(np)
        if isinstance(np, bool) or P != float(np):
            raise ValueError
    except (TypeError, ValueError):
        raise TopoplanError(f"npb {k}: field 'np': not an integer: {np!r}") from None
    if P < 1:
        raise _bad_np(k, P, "must be at least 1")
    if P > MAX_NPB_RANKS:
        raise _bad_np(k, P, f"is over the limit of {MAX_NPB_RANKS:,} ranks for a generated NPB trace")
    if iters is not None:
        try:
            it = int(iters)
            if it != float(iters) or it < 1:
                raise ValueError
        except (TypeError, ValueError):
            raise TopoplanError(f"npb {k}: field 'iters': must be a positive integer, got {iters!r}") from None
        iters = it
    try:
        gap = float(compute_s)
        if not math.isfinite(gap) or gap < 0:
            raise ValueError
    except (TypeError, ValueError):
        raise TopoplanError(f"npb {k}: field 'compute': must be a non-negative number of seconds, "
                            f"got {compute_s!r}") from None
    builder, communicators = _KERNELS[k](c, P, iters, gap)
    source = f"npb:kernel={k},class={c},np={P}" + ("" if iters is None else f",iters={iters}")
    return builder, source, communicators
