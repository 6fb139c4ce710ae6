import copy
from collections import Counter

import numpy as np
import pytest

from topoplan.traffic.collectives import (OPERATIONS, ROOTED, MPICHThresholds, expand_trace_collectives, messages,
                                 schedule)
from topoplan.core.errors import TopoplanError
from topoplan.traffic.trace import Trace, op_codes, read_trace

from timing import Stopwatch

# message sizes straddling each op's MPICH thresholds (bytes as the trace format defines them)
SIZES = {
    "bcast": [1, 12287, 12288, 100_000, 524_287, 524_288, 1_000_003],
    "reduce": [8, 2048, 2049, 2056, 1_000_000],
    "allreduce": [8, 2048, 2049, 2056, 1_000_000],
    "allgather": [1, 1000, 5000, 100_000],
    "allgatherv": [1000, 100_000],
    "alltoall": [8, 256, 257, 32768, 32769],
    "gather": [1, 100_000],
    "scatter": [1, 100_000],
    "reduce_scatter": [8, 10_000, 100_000],
    "barrier": [0],
}


def sends_and_recvs(op, p, root, n, counts=None):
    sent, recvd, unsized = Counter(), Counter(), Counter()
    for me in range(p):
        for st in schedule(op, p, me, root, n, counts=counts):
            for peer, b in st.sends:
                assert peer != me and 0 <= peer < p
                sent[(me, peer, b)] += 1
            for peer, b in st.recvs:
                if b is None:
                    unsized[(peer, me)] += 1
                else:
                    recvd[(peer, me, b)] += 1
    return sent, recvd, unsized


@pytest.mark.parametrize("op", [o for o in OPERATIONS if o != "alltoallv"])
def test_every_send_has_its_receive(op):
    for p in range(1, 34):
        roots = sorted({0, p // 2, p - 1}) if op in ROOTED else [-1]
        for n in SIZES[op]:
            for root in roots:
                sent, recvd, unsized = sends_and_recvs(op, p, root, n)
                assert not unsized
                assert sent == recvd, (op, p, root, n)


def test_steps_match_up_in_order():
    # the k-th message a -> b in a's steps is the k-th receive from a in b's steps, with the same size
    for op, p, n in (("allreduce", 12, 1e6), ("bcast", 13, 1e6), ("reduce", 7, 1e6), ("allgather", 5, 2e5)):
        out, inn = {}, {}
        for me in range(p):
            for st in schedule(op, p, me, 2 % p if op in ROOTED else -1, n):
                for peer, b in st.sends:
                    out.setdefault((me, peer), []).append(b)
                for peer, b in st.recvs:
                    inn.setdefault((peer, me), []).append(b)
        assert out == inn


def test_alltoallv_matrix_and_row_counts():
    rng = np.random.default_rng(1)
    for p in (2, 3, 8, 13, 40):
        m = rng.integers(0, 4, (p, p)) * 1000.0
        sent, recvd, unsized = sends_and_recvs("alltoallv", p, -1, 0, counts=m)
        assert sent == recvd and not unsized
        assert sum(b for (_, _, b), k in sent.items()) == m.sum() - np.trace(m)
        assert all(b > 0 for (_, _, b) in sent)  # MPICH skips empty messages when both sides know
        # with only the sender's row, receives have unknown size and every pair exchanges a message
        steps = [schedule("alltoallv", p, me, -1, 0, counts=m[me]) for me in range(p)]
        s = Counter((me, d) for me in range(p) for st in steps[me] for d, _ in st.sends)
        r = Counter((src, me) for me in range(p) for st in steps[me] for src, b in st.recvs if b is None)
        assert s == r and len(s) == p * (p - 1)


def test_closed_form_totals():
    p = 16
    s, d, b = messages("bcast", p, 3, 1000)  # binomial: everyone but the root receives once
    assert len(s) == p - 1 and b.sum() == (p - 1) * 1000 and sorted(d.tolist()) == sorted(set(range(p)) - {3})
    n = 16e6  # long bcast: binomial scatter of n/p chunks, then a ring allgather
    s, d, b = messages("bcast", p, 0, n)
    scatter = n / p * sum(min(r & -r, p - r) for r in range(1, p))
    assert b.sum() == pytest.approx(scatter + (p - 1) * n)
    per_rank = np.bincount(s, weights=b, minlength=p)  # each rank forwards (p-1) chunks in the ring
    assert per_rank[1:].min() >= (p - 1) * n / p and per_rank.max() <= 2 * n * (p - 1) / p + n / 2
    s, d, b = messages("allgather", 6, 0, 1e6)  # ring
    assert b.sum() == 6 * 5 * 1e6 and len(s) == 30
    s, d, b = messages("allgather", 8, 0, 1000)  # recursive doubling
    assert b.sum() == 8 * 7 * 1000 and len(s) == 8 * 3
    s, d, b = messages("allgather", 12, 0, 1000)  # Bruck: ceil(log2 p) steps
    assert b.sum() == 12 * 11 * 1000 and len(s) == 12 * 4
    s, d, b = messages("allreduce", 8, 0, 8)  # recursive doubling
    assert len(s) == 8 * 3 and b.sum() == 8 * 3 * 8
    s, d, b = messages("allreduce", 8, 0, 8e6)  # Rabenseifner: 2 n (p-1)/p per rank
    assert np.allclose(np.bincount(s, weights=b), 2 * 8e6 * 7 / 8)
    s, d, b = messages("allreduce", 6, 0, 8)  # fold 2 ranks in and out, recursive doubling on 4
    assert len(s) == 2 + 4 * 2 + 2 and b.sum() == 12 * 8
    s, d, b = messages("reduce", 8, 0, 8e6)  # Rabenseifner: reduce-scatter, then log2 p gather steps of n/2
    assert b.sum() == pytest.approx(8 * 8e6 * 7 / 8 + 3 * 8e6 / 2)
    assert (d == 0).sum() == 6  # the root receives once per reduce-scatter step and once per gather step
    s, d, b = messages("reduce", 8, 0, 800)  # binomial
    assert len(s) == 7 and b.sum() == 7 * 800
    for n in (300, 30000, 1e6):  # spread and pairwise: one direct message per pair
        s, d, b = messages("alltoall", 8, 0, n)
        assert len(s) == 56 and b.sum() == 56 * n and len(set(zip(s.tolist(), d.tolist()))) == 56
    s, d, b = messages("alltoall", 8, 0, 8)  # Bruck: log2 p steps of p/2 blocks
    assert len(s) == 8 * 3 and b.sum() == 8 * 3 * 4 * 8
    s, d, b = messages("barrier", 8, 0, 0)
    assert len(s) == 8 * 3 and b.sum() == 0
    s, d, b = messages("gather", 5, 2, 10)
    assert b.sum() == 10 * sum(min(r & -r, 5 - r) for r in range(1, 5)) and (d == 2).sum() == 3  # children 1, 2, 4
    s, d, b = messages("scatter", 5, 2, 10)
    assert b.sum() == 10 * sum(min(r & -r, 5 - r) for r in range(1, 5)) and (s == 2).sum() == 3
    s, d, b = messages("reduce_scatter", 8, 0, 1e5)  # 800 kB total: pairwise
    assert b.sum() == 8 * 7 * 1e5
    s, d, b = messages("reduce_scatter", 8, 0, 100)  # recursive halving: n (p-1) per rank
    assert np.allclose(np.bincount(s, weights=b), 7 * 100)
    s, d, b = messages("alltoallv", 3, 0, 0, counts=[5, 6, 7])
    assert sorted(zip(s.tolist(), d.tolist(), b.tolist())) == [(0, 1, 6), (0, 2, 7), (1, 0, 5), (1, 2, 7),
                                                               (2, 0, 5), (2, 1, 6)]


def test_thresholds_are_options():
    p, n = 16, 1000
    assert len(schedule("bcast", p, 0, 0, n)) == 4  # binomial
    big = schedule("bcast", p, 0, 0, n, thresholds=MPICHThresholds(bcast_short_B=0))
    assert len(big) > 4  # scatter + recursive doubling
    assert len(schedule("alltoall", 64, 0, -1, 1000)) == 2  # two batches of 32
    assert len(schedule("alltoall", 64, 0, -1, 1000, thresholds=MPICHThresholds(alltoall_throttle=0))) == 1


@pytest.mark.parametrize("options, expected", [
    (["alltoall_throttle=0"], {"alltoall_throttle": 0}),
    ({"alltoall_throttle": 4, "bcast_short_B": "1KiB"}, {"bcast_short_B": 1024, "alltoall_throttle": 4}),
    (["alltoall_medium_B=32768", "reduce_short_B = 4kB"], {"reduce_short_B": 4000}),   # a default is no change
    ([], {}),
])
def test_thresholds_from_options(options, expected):
    th = MPICHThresholds.from_options(options)
    assert th.changed() == expected
    assert MPICHThresholds.from_options(th.changed()) == th


def test_thresholds_are_coerced_from_what_a_result_records():
    th = MPICHThresholds(alltoall_throttle=4)
    assert MPICHThresholds.coerce(None) is None and MPICHThresholds.coerce(th) is th
    assert MPICHThresholds.coerce(th.changed()) == th
    with pytest.raises(TopoplanError, match="thresholds: expected MPICHThresholds or a mapping"):
        MPICHThresholds.coerce(["alltoall_throttle=4"])


@pytest.mark.parametrize("options, match", [
    (["alltoall_throttle=4", "alltoall_throttle=8"], "given twice"),
    (["alltoall_min_procs=0"], "at least 1"),
    ({"alltoall_throttle": True}, "whole non-negative number"),
    ({"alltoall_throttle": float("inf")}, "whole non-negative number"),
    (["bcast_long_B=1.5"], "whole non-negative number"),
    (["alltoall_throttle=4.0"], "whole non-negative number"),
    (["alltoall_throttle=\u0664"], "whole non-negative number"),   # an Arabic-Indic 4, which float() reads
    (["alltoall_throttle=-4"], "whole non-negative number"),
    (["=4"], "expected FIELD=VALUE"),
])
def test_thresholds_from_bad_options(options, match):
    with pytest.raises(TopoplanError, match=match):
        MPICHThresholds.from_options(options, where="--mpich")


def test_bad_arguments():
    with pytest.raises(TopoplanError, match="unknown op 'scan'"):
        schedule("scan", 4, 0, 0, 8)
    with pytest.raises(TopoplanError, match="'root'"):
        schedule("bcast", 4, 0, 7, 8)
    with pytest.raises(TopoplanError, match="outside"):
        schedule("allreduce", 4, 4, -1, 8)
    with pytest.raises(TopoplanError, match="'counts'"):
        schedule("alltoallv", 4, 0, -1, 0, counts=[1, 2])
    with pytest.raises(TopoplanError, match="'bytes'"):
        schedule("allreduce", 4, 0, -1, -5)


def _trace(rows, n, communicators=None):
    return Trace.from_records(rows, n, communicators=communicators, source="t")


def test_expand_maps_communicators_and_roots():
    # a bcast rooted at world rank 5 on the communicator {4, 5, 6, 7}
    rows = [(r, "bcast", -1, 100, 5, 4, 0.0, 0.0, 1) for r in (4, 5, 6, 7)]
    s, d, b = expand_trace_collectives(_trace(rows, 8, {1: [4, 5, 6, 7]}))
    ref = messages("bcast", 4, 1, 100)
    assert sorted(zip(s.tolist(), d.tolist())) == sorted(zip((ref[0] + 4).tolist(), (ref[1] + 4).tolist()))
    rows = [(0, "allreduce", -1, 8, -1, 4, 0.0, 0.0, 1)]
    with pytest.raises(TopoplanError, match="not one of its members"):
        expand_trace_collectives(_trace(rows, 8, {1: [4, 5, 6, 7]}))


def test_expand_groups_per_destination_rows():
    rows = []
    for r in range(4):  # two alltoallv calls per rank, rows per destination
        for k, t in enumerate((0.0, 1.0)):
            rows += [(r, "alltoallv", d, (r + 1) * 100 + k, -1, 4, t, t) for d in range(4)]
    s, d, b = expand_trace_collectives(_trace(rows, 4))
    assert len(s) == 2 * 12 and set(zip(s.tolist(), d.tolist())) == {(a, c) for a in range(4) for c in range(4)
                                                                      if a != c}
    assert b.sum() == sum(3 * ((r + 1) * 100 + k) for r in range(4) for k in (0, 1))
    # the same messages as the schedules of the two calls
    ref = Counter()
    for k in (0, 1):
        m = np.array([[(r + 1) * 100.0 + k] * 4 for r in range(4)])
        ref.update(zip(*(x.tolist() for x in messages("alltoallv", 4, 0, 0, counts=m))))
    assert Counter(zip(s.tolist(), d.tolist(), b.tolist())) == ref
    # a uniform alltoall written per destination is an ordinary (here: Bruck) alltoall
    rows = [(r, "alltoall", d, 4, -1, 8, 0.0, 0.0) for r in range(8) for d in range(8)]
    s, d, b = expand_trace_collectives(_trace(rows, 8))
    ref = messages("alltoall", 8, 0, 4)
    assert len(s) == len(ref[0]) == 24 and b.sum() == ref[2].sum()


def test_expand_takes_a_repeated_destination_as_sent_not_as_a_uniform_alltoall():
    """0 -> 1 written twice, 0 -> 2 never: counted as 3 destinations, the call was a uniform alltoall (Bruck)
    that sent 0 -> 2 a message no row has (read_trace refuses such a call; a trace built in memory is not read)."""
    rows = [(r, "alltoall", 1 if (r, d) == (0, 2) else d, 1000, -1, 4, 0.0, 1.0) for r in range(4) for d in range(4)]
    s, d, b = expand_trace_collectives(_trace(rows, 4))
    assert sorted(zip(d[s == 0].tolist(), b[s == 0].tolist())) == [(1, 2000.0), (3, 1000.0)]
    assert b.sum() == 12 * 1000


def _only(tr, ops):
    keep = np.isin(tr.op, op_codes(ops))
    sub = copy.copy(tr)
    for col in ("rank", "op", "peer", "bytes", "root", "comm_size", "t_start", "t_end", "comm", "tag", "req"):
        setattr(sub, col, getattr(tr, col)[keep])
    return sub


def test_is_trace_alltoallv_bytes_equal_the_a2a_matrix(shared):
    from topoplan.traffic.matrix import read_matrix

    d = shared / "traces" / "IS.C.64"
    if not (d / "events.csv.gz").is_file():
        pytest.skip("IS.C.64 trace is absent")
    tr = read_trace(d / "events.csv.gz")
    watch = Stopwatch()
    s, dst, b = expand_trace_collectives(tr)
    assert watch.stop().cpu_s < 1.0   # work, not wall time (the machine may be loaded)
    v = _only(tr, ("alltoallv",))
    s, dst, b = expand_trace_collectives(v)
    mine = np.zeros((64, 64))
    np.add.at(mine, (s, dst), b)
    # a2a_matrix.csv holds the alltoall (send counts) and alltoallv rows as sent, self blocks included
    a = _only(tr, ("alltoall",))
    direct = np.zeros((64, 64))
    np.add.at(direct, (a.rank, a.peer), a.bytes)
    ref = read_matrix(d / "a2a_matrix.csv", 64).dense() - direct
    np.fill_diagonal(ref, 0)
    assert np.array_equal(mine, ref)
    assert mine.sum() == v.bytes[v.peer != v.rank].sum()
