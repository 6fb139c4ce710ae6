"""NPB skeletons against the recorded 64-rank class C runs, and their invariants at other process counts."""

import copy
import json

import numpy as np
import pandas as pd
import pytest

from topoplan.traffic.collectives import expand_trace_collectives
from topoplan.core.errors import TopoplanError
from topoplan.traffic.npb import cg_layout, ft_layout, is_key_counts, lu_layout, mg_layout, npb_trace
from topoplan.traffic.trace import OP_CODE, op_codes, read_trace


def real_run(shared, kernel):
    d = shared / "traces" / f"{kernel}.C.64"
    if not (d / "meta.json").is_file():
        pytest.skip(f"{d} is absent")
    return d, json.loads((d / "meta.json").read_text())


def p2p(tr):
    """(bytes, messages) matrices of the explicit sends."""
    m = np.isin(tr.op, op_codes(("send", "isend")))
    b, c = np.zeros((tr.n_ranks, tr.n_ranks)), np.zeros((tr.n_ranks, tr.n_ranks))
    np.add.at(b, (tr.rank[m], tr.peer[m]), tr.bytes[m])
    np.add.at(c, (tr.rank[m], tr.peer[m]), 1)
    return b, c


def only(tr, ops, keep=True):
    sel = np.isin(tr.op, op_codes(ops)) == keep
    sub = copy.copy(tr)
    for col in ("rank", "op", "peer", "bytes", "root", "comm_size", "t_start", "t_end", "comm", "tag", "req"):
        setattr(sub, col, getattr(tr, col)[sel])
    return sub


def a2a(tr):
    s, d, b = expand_trace_collectives(only(tr, ("alltoall", "alltoallv")))
    out = np.zeros((tr.n_ranks, tr.n_ranks))
    np.add.at(out, (s, d), b)
    return out


def calls(tr):
    """Calls per op, per-destination alltoall(v) rows of one call counted once."""
    first = np.ones(len(tr), dtype=bool)
    first[1:] = (tr.rank[1:] != tr.rank[:-1]) | (tr.t_start[1:] != tr.t_start[:-1]) | (tr.op[1:] != tr.op[:-1])
    names, counts = np.unique(tr.op_names()[first], return_counts=True)
    return dict(zip(names.tolist(), counts.tolist()))


def matched(tr):
    """Every (src, dst, tag) stream of sends is received in order with the same sizes."""
    s = np.isin(tr.op, op_codes(("send", "isend")))
    r = np.isin(tr.op, op_codes(("recv", "irecv")))
    ks = np.stack([tr.rank[s], tr.peer[s], tr.tag[s]])
    kr = np.stack([tr.peer[r], tr.rank[r], tr.tag[r]])
    if ks.shape != kr.shape:
        return False
    os_, or_ = np.lexsort(ks[::-1]), np.lexsort(kr[::-1])
    return bool((ks[:, os_] == kr[:, or_]).all() and (tr.bytes[s][os_] == tr.bytes[r][or_]).all())


# ------------------------------------------------------------ real traces --
@pytest.mark.parametrize("kernel", ["CG", "MG", "LU"])
def test_p2p_pairs_bytes_and_counts_equal_the_real_run(shared, kernel):
    d, meta = real_run(shared, kernel)
    tr = npb_trace(kernel, "C", 64, iters=meta["niter"])
    ref = pd.read_csv(d / "p2p_matrix.csv")
    rb, rc = np.zeros((64, 64)), np.zeros((64, 64))
    np.add.at(rb, (ref.src, ref.dst), ref.bytes)
    np.add.at(rc, (ref.src, ref.dst), ref.msgs)
    b, c = p2p(tr)
    off = ~np.eye(64, dtype=bool)
    assert np.array_equal(b[off] > 0, rb[off] > 0)          # the same partner pairs
    assert np.array_equal(b, rb) and np.array_equal(c, rc)  # exact bytes and messages (self-sends too)
    assert tr.op_counts() == meta["events_per_op"]


@pytest.mark.parametrize("kernel", ["CG", "MG", "LU"])
def test_call_sequences_equal_the_real_run(shared, kernel):
    d, meta = real_run(shared, kernel)
    ref = read_trace(d / "events.csv.gz")
    tr = npb_trace(kernel, "C", 64, iters=meta["niter"])
    for col in ("rank", "op", "peer", "bytes", "root", "comm_size"):
        assert np.array_equal(getattr(tr, col), getattr(ref, col)), col


def test_is_matches_the_real_run(shared):
    d, meta = real_run(shared, "IS")
    ref = read_trace(d / "events.csv.gz")
    tr = npb_trace("is", "C", 64, iters=meta["niter"])
    assert calls(tr) == calls(ref)
    assert only(tr, ("alltoallv",)).bytes.size == meta["events_per_op"]["alltoallv"]
    # everything but the key exchange is call-for-call identical
    a, b = only(tr, ("alltoall", "alltoallv"), keep=False), only(ref, ("alltoall", "alltoallv"), keep=False)
    for col in ("rank", "op", "peer", "bytes", "root"):
        assert np.array_equal(getattr(a, col), getattr(b, col)), col
    # keys: expected counts of NPB's key distribution vs one sampled run
    mine, real = a2a(only(tr, ("alltoallv",))), a2a(only(ref, ("alltoallv",)))
    assert np.array_equal(mine > 0, real > 0)
    off = ~np.eye(64, dtype=bool)
    err = np.abs(mine[off] - real[off]) / real[off]
    assert np.median(err) < 0.005 and (err < 0.01).mean() > 0.85
    # each rank sends all its keys each ranking: 2^27 / 64 keys of 4 bytes, 6 rankings
    v = only(tr, ("alltoallv",))
    assert np.allclose(np.bincount(v.rank, weights=v.bytes), 6 * 2 ** 27 / 64 * 4)


def test_ft_matches_the_real_run(shared):
    d, meta = real_run(shared, "FT")
    ref = read_trace(d / "events.csv.gz")
    tr = npb_trace("ft", "C", 64, iters=meta["niter"])
    assert calls(tr) == calls(ref)
    real = pd.read_csv(d / "a2a_matrix.csv")
    rb = np.zeros((64, 64))
    np.add.at(rb, (real.src, real.dst), real.bytes)
    np.fill_diagonal(rb, 0)
    assert np.array_equal(a2a(tr), rb)
    a, b = only(tr, ("alltoall",), keep=False), only(ref, ("alltoall",), keep=False)
    assert np.array_equal(a.op, b.op) and np.array_equal(a.bytes, b.bytes)


# ------------------------------------------------------ other process counts --
@pytest.mark.parametrize("kernel,klass,np_", [
    ("cg", "C", 128), ("cg", "C", 256), ("cg", "S", 2), ("mg", "C", 128), ("mg", "S", 128), ("mg", "S", 100),
    ("lu", "C", 128), ("lu", "C", 30), ("lu", "A", 72), ("is", "C", 256), ("ft", "S", 128), ("ft", "C", 96)])
def test_every_message_is_received_in_order(kernel, klass, np_):
    tr = npb_trace(kernel, klass, np_, iters=1)
    assert matched(tr)
    irecv, wait = np.isin(tr.op, op_codes(("irecv",))), tr.op == OP_CODE["wait"]
    assert np.array_equal(np.bincount(tr.rank[irecv], minlength=np_), np.bincount(tr.rank[wait], minlength=np_))


@pytest.mark.parametrize("np_", [128, 256])
def test_cg_partners_and_volume_at_scale(np_):
    L = cg_layout(150000, np_)
    npcols, nprows, l2 = L["npcols"], L["nprows"], L["l2npcols"]
    assert npcols * nprows == np_ and npcols in (nprows, 2 * nprows) and l2 == int(np.log2(npcols))
    r = np.arange(np_)
    if npcols == nprows:  # transpose partner: the mirror rank across the diagonal
        assert np.array_equal(L["exch_proc"], (r % nprows) * nprows + r // nprows)
    else:
        assert np.array_equal(L["exch_proc"], 2 * ((r // 2 % nprows) * nprows + r // 2 // nprows) + r % 2)
    tr = npb_trace("cg", "C", np_, iters=1)
    b, c = p2p(tr)
    for me in range(np_):  # recursive doubling within the process row, plus the transpose partner
        want = {me ^ (npcols >> (i + 1)) for i in range(l2)} | {int(L["exch_proc"][me])}
        assert set(np.flatnonzero(b[me]).tolist()) == want
    nrows = 150000 // nprows
    matvec = np_ * (l2 + 1) * nrows * 8 / (1 if npcols == nprows else 2)
    scalars = 52 * 8 * l2 * np_ + 16 * l2 * np_  # 52 one-word row sums per CG run, one two-word norm
    assert b.sum() == 2 * (26 * matvec + scalars)  # warm-up + 1 timed iteration


def test_mg_grid_levels_and_partners():
    L = mg_layout(512, 128)
    assert L["pi"].tolist() == [4, 4, 8] and L["m"][9][0].tolist() == [130, 130, 66]
    tr = npb_trace("mg", "C", 128, iters=1)
    b, _ = p2p(tr)
    coords = np.stack([np.arange(128) % 4, np.arange(128) // 4 % 4, np.arange(128) // 16], axis=1)
    for me in range(128):
        nbrs = set(np.flatnonzero(b[me]).tolist())
        assert set(L["nbr"][9][me].ravel().tolist()) <= nbrs         # the 6 torus neighbours of the top level
        for q in nbrs:                                                # coarse levels reach further, same axes
            assert (coords[q] != coords[me]).sum() == 1
    sizes = set(only(tr, ("send",)).bytes.tolist())
    assert {128 * 64 * 8, 130 * 64 * 8, 130 * 130 * 8} <= sizes     # top-level faces incl. earlier ghosts
    # class S on 128 ranks leaves ranks empty on coarse levels; comm3_ex hands their data over
    S = mg_layout(32, 128)
    assert S["dead"][1].any() and any(S["take_ex"][k].any() and S["give_ex"][k].any() for k in S["take_ex"])
    # MG runs on the largest power of two of the ranks; the others make no call
    t = npb_trace("mg", "S", 100, iters=1)
    assert set(t.rank.tolist()) == set(range(64)) and t.communicators[0].tolist() == list(range(64))


def test_lu_grid_and_wavefront_at_scale():
    L = lu_layout(162, 128)
    assert (L["xdim"], L["ydim"]) == (16, 8)
    assert lu_layout(162, 30)["xdim"] == 6 and lu_layout(162, 6)["xdim"] == 3
    tr = npb_trace("lu", "C", 128, iters=1)
    b, _ = p2p(tr)
    for me in range(128):
        want = {int(L[k][me]) for k in ("north", "south", "west", "east")} - {-1}
        assert set(np.flatnonzero(b[me]).tolist()) == want
    edges = 2 * (16 - 1) * 8 + 2 * 16 * (8 - 1)
    assert (tr.op == OP_CODE["recv"]).sum() == 2 * 160 * edges      # one per k-plane and neighbour, 2 SSOR steps
    recv = only(tr, ("recv",))
    # one k-plane row of 5 variables: 21 or 20 columns, 11 or 10 rows, one less on the domain boundary
    assert set(recv.bytes.tolist()) == {5 * n * 8 for n in (19, 20, 21, 9, 10, 11)}


def test_is_and_ft_at_scale():
    for np_ in (128, 256):
        c = is_key_counts("C", np_)
        assert c.sum() == 2 ** 27 // np_ and (c > 0).all()
        tr = npb_trace("ft", "C", np_, iters=1)
        m = a2a(tr)
        off = ~np.eye(np_, dtype=bool)
        assert np.allclose(m[off], 3 * 512 ** 3 // np_ // np_ * 16) and (np.diag(m) == 0).all()  # 1-D: 3 FFTs
    c = is_key_counts("C", 1024)  # 1024 ranks on 1024 buckets: trailing ranks may get no keys, as NPB warns
    assert c.sum() == 2 ** 27 // 1024 and (np.flatnonzero(c == 0) > 512).all()
    L = ft_layout("S", 128)
    assert (L["layout"], L["np1"], L["np2"]) == ("2D", 64, 2)
    tr = npb_trace("ft", "S", 128, iters=1)
    assert sorted({len(v) for v in tr.communicators.values()}) == [2, 64]
    m = a2a(tr)
    assert set(np.flatnonzero(m[0]).tolist()) == {1} | set(range(2, 128, 2))  # its row and its column
    tr = npb_trace("ft", "C", 96, iters=1)  # NPB works on 64; the 32 others form their own slice
    sizes = {len(v) for v in tr.communicators.values()}
    assert 32 in sizes and only(tr, ("alltoall",)).comm_size.max() == 64


def test_iterations_timing_and_defaults():
    t = npb_trace("is", "S", 4)
    assert t.op_counts()["allreduce"] == 4 * 11             # 10 iterations + the untimed one
    t = npb_trace("cg", "S", 4, iters=1, compute_s=1e-3)
    gaps = t.t_start[1:] - t.t_end[:-1]
    same = t.rank[1:] == t.rank[:-1]
    assert np.allclose(gaps[same], 1e-3)                     # compute_s before every call
    assert np.all(np.diff(t.t_start)[same] > 0)


def test_invalid_inputs_name_the_field():
    for args, field in ((("cg", "C", 48), "'np'"), (("bt", "C", 64), "'kernel'"), (("is", "Z", 64), "'class'"),
                        (("is", "F", 64), "'class'"), (("is", "C", 2048), "'np'"), (("lu", "C", 10), "'np'"),
                        (("lu", "S", 64), "'np'"), (("ft", "S", 2 ** 20), "'np'"), (("mg", "S", 0), "'np'")):
        with pytest.raises(TopoplanError, match=field):
            npb_trace(*args)
    with pytest.raises(TopoplanError, match="'iters'"):
        npb_trace("cg", "S", 4, iters=0)
    with pytest.raises(TopoplanError, match="'compute'"):
        npb_trace("cg", "S", 4, compute_s=-1)
