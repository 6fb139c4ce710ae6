"""Generated traces at scale (issue 20): the same rows as before, in about the trace's own memory.

``TraceBuilder`` keeps repeated iterations symbolic and writes every row once, straight into the trace's
columns. These tests check that nothing a generator produces changed (digests of the pre-change traces,
and a straightforward reference construction of the rows), that the pieces of a streamed trace and the
blocks of a recording give the same rows and the same traffic, that building stays near the size of the
table, and the limits: memory refused before allocating, the file cap (``MAX_TRACE_ROWS``) not applied to
generated traces, ``MAX_GENERATED_ROWS`` as the ceiling.
"""

from __future__ import annotations

import hashlib
import tracemalloc
from collections import Counter

import numpy as np
import pytest

import topoplan.core.memory as memory
import topoplan.traffic.generators as gen
import topoplan.traffic.limits as limits
import topoplan.traffic.matrix as matrix
from topoplan.core.errors import TopoplanError
from topoplan.traffic.builder import TICK_S, TraceBuilder
from topoplan.traffic.generators import parse_spec, record_spec
from topoplan.traffic.limits import TRACE_ROW_BYTES
from topoplan.traffic.matrix import Traffic, _group, from_trace
from topoplan.traffic.sources import load_source, load_traffic
from topoplan.traffic.npb import npb_recording, npb_trace
from topoplan.traffic.trace import OP_CODE, op_codes

COLS = (("rank", "<i8"), ("op", "<i2"), ("peer", "<i8"), ("bytes", "<f8"), ("root", "<i8"), ("comm_size", "<i8"),
        ("t_start", "<f8"), ("t_end", "<f8"), ("comm", "<i8"), ("tag", "<i8"), ("req", "<i1"))


def digest(tr) -> str:
    """sha256 (first 16 hex digits) of n_ranks, the row count, every column as little-endian bytes of its
    dtype, and the communicators."""
    h = hashlib.sha256()
    h.update(f"{tr.n_ranks}|{len(tr)}".encode())
    for name, dt in COLS:
        h.update(name.encode())
        h.update(np.ascontiguousarray(getattr(tr, name), dtype=dt).tobytes())
    for k in sorted(tr.communicators):
        h.update(f"comm{k}".encode())
        h.update(np.ascontiguousarray(tr.communicators[k], dtype="<i8").tobytes())
    return h.hexdigest()[:16]


# Digests of the traces made BEFORE the builder changed (issue 20): computed with topoplan/traffic/npb.py and
# generators.py of commit 60ad058 (the old TraceBuilder, which materialised repeats and sorted with lexsort), by
# digest() above; the number is the trace's row count. Beyond these, the old and new code were compared on
# CG 1,024/8,192 and LU 1,024 ranks (iters=1), IS 1,024 (class iterations), MG 4,096, FT 16,384: same digests.
NPB_DIGESTS = [
    (("cg", "S", 2, 1, 0.0), 1266, "652e8300ec2b5d70"),
    (("cg", "S", 8, 2, 0.0), 13272, "7c76bdfb03793a0f"),
    (("cg", "A", 32, 1, 0.0), 50592, "07782a2e0a33c35f"),
    (("cg", "W", 16, 1, 1e-3), 17712, "1423ca99f28619b1"),
    (("cg", "C", 64, 1, 0.0), 101184, "78569888454da837"),
    (("cg", "S", 4, None, 0.0), 20172, "0ee86c270349819a"),
    (("mg", "S", 8, 1, 0.0), 5424, "2fe0dfcac35dac8b"),
    (("mg", "S", 100, 1, 0.0), 40512, "6e4c4155f11368ec"),
    (("mg", "A", 64, 1, 0.0), 61248, "87b472804c309446"),
    (("mg", "S", 16, 2, 2e-4), 14160, "0e8f35f7bb909265"),
    (("mg", "C", 64, 1, 0.0), 68160, "e1e380ec70ec94b5"),
    (("mg", "W", 32, None, 0.0), 59808, "640d41414d52edd0"),
    (("lu", "S", 4, 2, 0.0), 736, "386ea646f66afa8d"),
    (("lu", "S", 6, 3, 1e-4), 1585, "0b53bda56d9b4efa"),
    (("lu", "A", 30, 2, 0.0), 39081, "d0bd704a611aeacb"),
    (("lu", "C", 16, 1, 0.0), 31932, "9d31c234d78e1f47"),
    (("lu", "S", 8, None, 0.0), 23870, "e2af18a537c6db9c"),
    (("is", "S", 4, None, 0.0), 285, "2608f72a2e90a089"),
    (("is", "A", 32, 1, 0.0), 2365, "5ff52f27d7f1a15f"),
    (("is", "W", 8, 2, 1e-3), 285, "db7311fd9a79b4c1"),
    (("is", "C", 64, 1, 0.0), 8829, "b38e6619fa7ebc48"),
    (("ft", "S", 8, 2, 0.0), 96, "1783bb4a64d2f1f8"),
    (("ft", "S", 128, 1, 0.0), 1664, "7b2a6959bf387f53"),
    (("ft", "A", 96, 1, 5e-4), 960, "621142d488544ba2"),
    (("ft", "C", 64, 1, 0.0), 640, "843a1fed8254494d"),
    (("ft", "S", 16, None, 2e-3), 320, "32770f25f0c46ecc"),
]
# the same, for the other generators (commit 60ad058)
GENERATOR_DIGESTS = [
    (lambda: gen.neighbor2d(3, 4, 1000, iters=3, compute_s=0.25), 240, "461816aedc053793"),
    (lambda: gen.ring(5, 64, iters=4, compute_s=1e-3), 60, "cfc1dd92ddf91731"),
    (lambda: gen.random(16, 100, msgs=40, seed=3, iters=3, compute_s=0.5), 288, "dbc45f5e18c98f74"),
    (lambda: gen.alltoall(6, 2e6, iters=3, compute_s=0.1), 18, "85dbc6e0e3479eb0"),
]
SPECS = ["npb:kernel=cg,class=C,np=64,iters=2", "npb:kernel=is,class=A,np=32,iters=1",
         "npb:kernel=ft,class=S,np=128,iters=1", "npb:kernel=mg,class=S,np=100,iters=1", "npb:kernel=lu,class=S,np=6",
         "random:np=16,bytes=100,msgs=40,seed=3,iters=3", "neighbor2d:rows=3,cols=4,bytes=1000,iters=3",
         "alltoall:np=6,bytes=2MB,iters=3", "ring:np=5,bytes=64,iters=4,compute=0.001"]


@pytest.mark.parametrize("args,rows,want", NPB_DIGESTS, ids=lambda x: str(x) if isinstance(x, tuple) else "")
def test_npb_traces_are_those_of_the_previous_builder(args, rows, want):
    tr = npb_trace(*args)
    assert (len(tr), digest(tr)) == (rows, want)


@pytest.mark.parametrize("make,rows,want", GENERATOR_DIGESTS)
def test_generator_traces_are_those_of_the_previous_builder(make, rows, want):
    tr = make()
    assert (len(tr), digest(tr)) == (rows, want)


# ------------------------------------------------------------- the reference construction --
class RefBuilder:
    """TraceBuilder's rows written out one by one as Python lists (repeats copied row by row), then sorted by
    (rank, call number, recording order): the straightforward construction the builder must reproduce."""

    def __init__(self, n, gap=0.0):
        self.n, self.gap = n, gap
        self.next, self.clock, self.rows = [0] * n, [0.0] * n, []

    def add(self, ranks, op, peer=-1, nbytes=0.0, *, root=-1, size=None, tag=-1, comm=-1, req=-1, one_call=False):
        ranks = [int(r) for r in np.asarray(ranks).ravel()]
        k = len(ranks)

        def per(v):
            return list(np.asarray(v).ravel()) if np.ndim(v) else [v] * k

        cols = [per(v) for v in (peer, nbytes, root, self.n if size is None else size, tag, comm, req)]
        first = {}
        for j, r in enumerate(ranks):
            if one_call:
                seq = first.setdefault(r, self.next[r])
            else:
                seq = self.next[r]
                self.next[r] += 1
            p, b, ro, sz, tg, cm, rq = (c[j] for c in cols)
            self.rows.append([r, OP_CODE[op], int(p), float(b), int(ro), int(sz), int(tg), int(cm), int(rq), seq,
                              self.clock[r]])
        for r in first:
            self.next[r] += 1

    def compute(self, seconds, ranks=None):
        if seconds:
            for r in (range(self.n) if ranks is None else ranks):
                self.clock[r] += seconds

    def mark(self):
        return len(self.rows), list(self.next), list(self.clock)

    def repeat(self, mark, times):
        i, next0, clock0 = mark
        if times == 1:
            return
        if i == len(self.rows):
            self.clock = [c0 + (c - c0) * max(times, 0) for c, c0 in zip(self.clock, clock0)]
            return
        if times <= 0:
            del self.rows[i:]
            self.next, self.clock = next0, clock0
            return
        dseq = [a - b for a, b in zip(self.next, next0)]
        dclock = [a - b for a, b in zip(self.clock, clock0)]
        block = self.rows[i:]
        for k in range(1, times):
            for row in block:
                r = row[0]
                self.rows.append(row[:9] + [row[9] + k * dseq[r], row[10] + k * dclock[r]])
        self.next = [a + d * (times - 1) for a, d in zip(self.next, dseq)]
        self.clock = [a + d * (times - 1) for a, d in zip(self.clock, dclock)]

    def columns(self):
        order = sorted(range(len(self.rows)), key=lambda j: (self.rows[j][0], self.rows[j][9], j))
        rows = [self.rows[j] for j in order]
        step = TICK_S + self.gap
        t_start = [r[9] * step + r[10] for r in rows]
        out = {name: [r[j] for r in rows] for j, name in enumerate(("rank", "op", "peer", "bytes", "root", "comm_size",
                                                                   "tag", "comm", "req"))}
        out.update(t_start=t_start, t_end=[t + TICK_S for t in t_start])
        return out


def random_program(seed, builders):
    """Drive every builder through the same random program: adds (subsets, repeated ranks, one_call,
    scalars and arrays), computation, and nested repeats (0, 1 or several times)."""
    rng = np.random.default_rng(seed)
    n = builders[0].n
    ops = ("send", "isend", "irecv", "wait", "allreduce", "alltoallv", "barrier")

    def call_all(method, *args, **kw):
        for b in builders:
            getattr(b, method)(*args, **kw)

    def block(depth):
        for _ in range(int(rng.integers(1, 5))):
            what = rng.random()
            if what < 0.6:
                k = int(rng.integers(1, 2 * n + 1))
                ranks = rng.integers(0, n, k) if rng.random() < 0.4 else np.sort(rng.choice(n, min(k, n), False))
                k = len(ranks)
                one_call = bool(rng.random() < 0.2)
                peer = rng.integers(-1, n, k) if rng.random() < 0.7 else int(rng.integers(-1, n))
                nbytes = rng.integers(0, 5, k) * 8.5 if rng.random() < 0.5 else float(rng.integers(0, 100))
                tag = rng.integers(-1, 4, k) if rng.random() < 0.5 else 7
                req = int(rng.integers(-1, 2))
                call_all("add", ranks, str(rng.choice(ops)), peer, nbytes, tag=tag, req=req, one_call=one_call,
                         root=int(rng.integers(-1, n)), comm=int(rng.integers(-1, 2)))
            elif what < 0.75:
                sub = None if rng.random() < 0.5 else rng.integers(0, n, int(rng.integers(1, n + 1)))
                call_all("compute", float(rng.choice([0.1, 1 / 3, 2.5e-7, 0.0])), sub)
            elif depth < 3:
                m = [b.mark() for b in builders]
                block(depth + 1)
                times = int(rng.choice([0, 1, 2, 3, 5]))
                for b, mk in zip(builders, m):
                    b.repeat(mk, times)

    block(0)


@pytest.mark.parametrize("seed", range(40))
def test_builder_matches_the_reference_construction(seed):
    rng = np.random.default_rng(1000 + seed)
    n, gap = int(rng.integers(1, 7)), float(rng.choice([0.0, 1e-3, 1 / 7]))
    b, ref = TraceBuilder(n, gap), RefBuilder(n, gap)
    random_program(seed, [b, ref])
    tr = b.build("prog")
    want = ref.columns()
    assert len(tr) == b.rows == len(ref.rows)
    for name, _ in COLS:
        assert np.array_equal(getattr(tr, name), np.asarray(want[name], dtype=getattr(tr, name).dtype)), name
    # the same rows in pieces: each rank's rows, piece after piece, are its rows of the whole trace
    for max_rows in (1, 7):
        parts = list(b.pieces("prog", max_rows=max_rows))
        cat = {name: np.concatenate([getattr(p, name) for p in parts]) for name, _ in COLS}
        order = np.argsort(cat["rank"], kind="stable")
        for name, _ in COLS:
            assert np.array_equal(cat[name][order], getattr(tr, name)), (max_rows, name)
    # the blocks with their counts hold every row's (rank, op, peer, bytes, ...) as often as the trace does
    key = lambda t, i: tuple(int(getattr(t, c)[i]) for c in ("rank", "op", "peer", "root", "tag", "comm", "req")) + (
        float(t.bytes[i]),)
    got = Counter()
    for blk, times in b.blocks("prog", max_rows=3):
        for i in range(len(blk)):
            got[key(blk, i)] += times
    assert got == Counter(key(tr, i) for i in range(len(tr)))


def test_builder_refuses_a_rank_outside_the_communicator():
    b = TraceBuilder(4)
    with pytest.raises(TopoplanError, match="field 'ranks': rank 4 is outside the communicator of 4 ranks"):
        b.add([0, 4], "barrier")


# -------------------------------------------------------- pieces, blocks and the traffic --
@pytest.mark.parametrize("spec", SPECS)
def test_pieces_and_blocks_give_the_trace_and_its_traffic(spec, monkeypatch):
    tr = parse_spec(spec)
    rec = record_spec(spec)
    assert rec.rows == len(tr) and rec.n_ranks == tr.n_ranks and digest(rec.build()) == digest(tr)
    parts = list(rec.pieces(max_rows=97))
    assert all(p.source == tr.source and p.n_ranks == tr.n_ranks for p in parts)
    cat = {name: np.concatenate([getattr(p, name) for p in parts]) for name, _ in COLS}
    order = np.argsort(cat["rank"], kind="stable")
    for name, _ in COLS:
        assert np.array_equal(cat[name][order], getattr(tr, name)), name
    # the traffic: from the whole trace, in slices of whole ranks, and from the recording's blocks
    want = from_trace(tr)
    monkeypatch.setattr(matrix, "_SLICE_ROWS", 50)
    monkeypatch.setattr(limits, "PIECE_ROWS", 40)
    for got in (from_trace(tr), load_traffic(spec), load_source(spec)[1]):
        for col in ("src", "dst", "msg_bytes", "count"):
            assert np.array_equal(getattr(got, col), getattr(want, col)), col
    assert load_traffic(spec).name == load_source(spec)[1].name == spec


def reference_group(src, dst, size, count):
    """The groups as the previous _group made them: np.unique over the stacked (src, dst, bytes)."""
    uniq, inv = np.unique(np.stack([src, dst, size]), axis=1, return_inverse=True)
    c = np.bincount(inv.ravel(), weights=count, minlength=uniq.shape[1]).astype(np.int64)
    return uniq[0].astype(np.int64), uniq[1].astype(np.int64), uniq[2], c


@pytest.mark.parametrize("seed", range(6))
def test_group_is_the_unique_of_src_dst_and_size(seed):
    rng = np.random.default_rng(seed)
    k, n = int(rng.integers(1, 3000)), int(rng.integers(1, 40))
    src, dst = rng.integers(0, n, k), rng.integers(0, n, k)
    if seed % 3 == 2:   # ranks beyond n_ranks (a caller's arrays): the general ordering
        dst = dst + n
    size = rng.choice([0.0, 8.0, 1e6, 2.5, 4e5], k)
    count = rng.integers(1, 9, k)
    t = _group(Traffic(n, src, dst, size, count))
    for got, want in zip((t.src, t.dst, t.msg_bytes, t.count), reference_group(src, dst, size, count)):
        assert got.dtype == want.dtype and np.array_equal(got, want)


# -------------------------------------------------------------------- memory and limits --
def test_building_takes_about_the_size_of_the_table():
    tracemalloc.start()
    try:
        b, source, comms = npb_recording("cg", "C", 256, iters=1)
        recording = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        tr = b.build(source, comms)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    table = sum(getattr(tr, c).nbytes for c, _ in COLS)
    assert table == len(tr) * TRACE_ROW_BYTES
    # the table, the validation's boolean scratch and small per-block temporaries (the old builder: 3.3x)
    assert peak - recording < 1.1 * table + (2 << 20)


def test_memory_is_checked_before_building(monkeypatch):
    monkeypatch.setattr(memory, "_address_space_left", lambda: None)           # no ulimit -v
    monkeypatch.setattr(memory, "_mem_available", lambda: 1 << 20)   # 1 MiB available
    with pytest.raises(TopoplanError, match=r"npb cg: fields 'np', 'iters': the trace would have 101,184 rows "
                                            r"\(64 ranks\): about 8 MiB, more than the 1 MiB of memory available"):
        npb_trace("cg", "C", 64, iters=1)
    with pytest.raises(TopoplanError, match=r"traffic spec 'npb': .* more than the 1 MiB of memory available"):
        parse_spec("npb:kernel=cg,class=C,np=64,iters=1")
    with pytest.raises(TopoplanError, match=r"traffic spec 'ring': the generated trace would have 30,000 rows"):
        parse_spec("ring:np=10000,bytes=1")
    # the traffic needs no trace: recorded, never built
    t = load_traffic("npb:kernel=cg,class=C,np=64,iters=1")
    assert t.n_ranks == 64 and int(t.count.sum()) > 0
    assert len(npb_trace("cg", "S", 2, iters=1)) == 1266      # 99 KB fits
    monkeypatch.setattr(memory, "_mem_available", lambda: None)  # unknown: not checked
    assert len(npb_trace("cg", "C", 64, iters=1)) == 101184
    monkeypatch.setattr(memory, "_address_space_left", lambda: 2 << 20)      # ulimit -v leaves 2 MiB
    with pytest.raises(TopoplanError, match=r"about 8 MiB, more than the 2 MiB of memory available"):
        npb_trace("cg", "C", 64, iters=1)


def test_the_row_cap_is_raised_as_far_as_memory_allows(monkeypatch):
    monkeypatch.setattr(memory, "_address_space_left", lambda: None)
    monkeypatch.setattr(limits, "MAX_TRACE_ROWS", 1000)
    monkeypatch.setattr(memory, "_mem_available", lambda: 1 << 40)
    assert len(npb_trace("cg", "S", 8, iters=1)) == 8856          # past the cap: the memory is there
    monkeypatch.setattr(memory, "_mem_available", lambda: 100_000)
    with pytest.raises(TopoplanError, match=r"npb cg: fields 'np', 'iters': the trace would have 8,856 rows \(8 "
                                            r"ranks\): over the limit of 1,000 rows, raised only as far as memory "
                                            r"allows: about 675 KiB, more than the 98 KiB of memory available"):
        npb_trace("cg", "S", 8, iters=1)
    assert len(npb_trace("cg", "S", 2, iters=1)) == 1266          # 1,266 rows: 96 KiB fit
    monkeypatch.setattr(limits, "MAX_GENERATED_ROWS", 1000)          # the ceiling, whatever the memory
    monkeypatch.setattr(memory, "_mem_available", lambda: 1 << 40)
    for make in (lambda: npb_trace("cg", "S", 8, iters=1), lambda: record_spec("npb:kernel=cg,class=S,np=8,iters=1"),
                 lambda: load_traffic("npb:kernel=cg,class=S,np=8,iters=1")):
        with pytest.raises(TopoplanError, match=r"more than 1,000 rows \(8 ranks\): over the limit of 1,000 rows, "
                                                r"which memory can raise but never past 1,000"):
            make()
    with pytest.raises(TopoplanError, match=r"'ring': would generate 4e\+03 trace rows, over the limit"):
        parse_spec("ring:np=1000,bytes=1")
    with pytest.raises(TopoplanError, match=r"would have 1,001 rows: over the limit of 1,000 rows"):
        limits.check_generated_memory(1001)


def test_the_traffic_costs_the_recording_not_the_trace():
    one, many = (record_spec(f"npb:kernel=cg,class=S,np=64{x}") for x in (",iters=1", ""))  # class S: 15 iterations
    assert many.rows > 7 * one.rows
    held = [sum(len(t) for t, _ in rec.blocks()) for rec in (one, many)]
    assert held[0] == held[1] < one.rows     # the same recorded rows, only counted more often
    a, b = load_traffic(many.source), from_trace(parse_spec(many.source))
    for col in ("src", "dst", "msg_bytes", "count"):
        assert np.array_equal(getattr(a, col), getattr(b, col)), col
    sends = np.isin(parse_spec(many.source).op, op_codes(("send",)))
    assert int(a.count.sum()) > int(sends.sum())   # every send, plus the messages of the collectives
