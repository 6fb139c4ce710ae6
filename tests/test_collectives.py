from collections import Counter

import numpy as np
import pytest

from planner.collectives import MPICHThresholds, OPERATIONS, expand_trace_collectives, messages, schedule


def pair_volumes(op, p, root, n, counts=None):
    sent, recvd = Counter(), Counter()
    for me in range(p):
        c = counts[me] if counts is not None else None
        for st in schedule(op, p, me, root, n, counts=c):
            for peer, b in st.sends:
                sent[(me, peer)] += 1
            for peer, b in st.recvs:
                recvd[(peer, me)] += 1
    return sent, recvd


@pytest.mark.parametrize("op", [o for o in OPERATIONS if o != "alltoallv"])
@pytest.mark.parametrize("p", [1, 2, 3, 5, 8, 12, 16, 17])
@pytest.mark.parametrize("n", [8, 4096, 100_000, 2_000_000])
def test_every_send_has_a_matching_receive(op, p, n):
    sent, recvd = pair_volumes(op, p, min(1, p - 1), n)
    assert sent == recvd


def test_closed_form_totals():
    th = MPICHThresholds()
    s, d, b = messages("bcast", 16, 3, 1000)
    assert len(s) == 15 and b.sum() == 15 * 1000  # binomial: every rank but the root receives once
    s, d, b = messages("allgather", 6, 0, 1e6)  # ring: p(p-1) blocks
    assert b.sum() == pytest.approx(6 * 5 * 1e6)
    s, d, b = messages("bcast", 16, 0, 4e6)  # long: scatter + ring allgather
    # binomial scatter moves (p/2) log2 p blocks of n/p; the ring allgather p(p-1) blocks
    assert b.sum() == pytest.approx(4e6 / 16 * (8 * 4) + 16 * 15 * 4e6 / 16)
    s, d, b = messages("alltoall", 5, 0, 1e5)
    assert len(s) == 20 and set(zip(s.tolist(), d.tolist())) == {(a, c) for a in range(5) for c in range(5) if a != c}
    s, d, b = messages("barrier", 8, 0, 0)
    assert len(s) == 8 * 3 and b.sum() == 0


def test_alltoallv_counts_are_respected():
    counts = [[(me + 1) * 10 * (dst != me) for dst in range(4)] for me in range(4)]
    s, d, b = messages("alltoallv", 4, 0, 0, counts_by_rank=counts)
    for a, c, x in zip(s, d, b):
        assert x == counts[a][c]


def test_is_trace_alltoallv_matches_matrix(shared):
    from planner.trace import OP_CODE, read_trace
    from planner.traffic import read_matrix

    d = shared / "traces" / "IS.C.64"
    tr = read_trace(d / "events.csv.gz")
    s, dst, b = expand_trace_collectives(tr)
    ref = read_matrix(d / "a2a_matrix.csv", 64).dense()
    mine = np.zeros((64, 64))
    # the a2a matrix covers alltoall and alltoallv; remove the other collectives' messages
    keep = np.isin(tr.op, [OP_CODE["alltoall"], OP_CODE["alltoallv"]])
    sub = tr.__class__(**{**tr.__dict__})
    for col in ("rank", "op", "peer", "bytes", "root", "comm_size", "t_start", "t_end", "comm", "tag", "req"):
        setattr(sub, col, getattr(tr, col)[keep])
    s, dst, b = expand_trace_collectives(sub)
    np.add.at(mine, (s, dst), b)
    np.fill_diagonal(ref, 0)
    assert np.allclose(mine, ref)
