from collections import Counter

import numpy as np
import pytest

from planner.errors import TopoplanError
from planner.generators import GENERATORS, alltoall, describe_generators, is_spec, neighbor2d, parse_spec, random, ring
from planner.trace import op_codes
from planner.traffic import from_trace


def sends(tr):
    m = np.isin(tr.op, op_codes(("send", "isend")))
    return Counter(zip(tr.rank[m].tolist(), tr.peer[m].tolist(), tr.bytes[m].tolist()))


def recvs(tr):
    m = np.isin(tr.op, op_codes(("recv", "irecv")))
    return Counter(zip(tr.peer[m].tolist(), tr.rank[m].tolist(), tr.bytes[m].tolist()))


def test_neighbor2d_pairs_and_volume():
    tr = neighbor2d(3, 4, 1000, iters=2)
    assert tr.n_ranks == 12
    s = sends(tr)
    assert s == recvs(tr)
    # 3x4 grid without wrap: 2*(3*3 + 2*4) = 34 directed edges, twice
    assert sum(s.values()) == 34 * 2
    assert (5, 1, 1000.0) in s and (5, 9, 1000.0) in s and (5, 4, 1000.0) in s and (5, 6, 1000.0) in s
    assert (3, 4, 1000.0) not in s  # no wrap at the end of a row
    # per iteration: irecvs before isends, then one waitall
    ops = tr.op_names()[tr.rank == 0].tolist()
    assert ops == ["irecv", "irecv", "isend", "isend", "waitall"] * 2


def test_neighbor2d_matrix_rows_via_spec():
    t = from_trace(parse_spec("neighbor2d:rows=2,cols=2,bytes=1KB,iters=3"))
    s, d, b, m = t.matrix()
    rows = {(a, c): (x, y) for a, c, x, y in zip(s.tolist(), d.tolist(), b.tolist(), m.tolist())}
    assert len(rows) == 8 and rows[(0, 1)] == (3000, 3) and (0, 3) not in rows


def test_ring_and_random_are_matched():
    tr = ring(5, 64, iters=3)
    assert sends(tr) == recvs(tr)
    assert set((a, b) for a, b, _ in sends(tr)) == {(r, (r + 1) % 5) for r in range(5)}
    a, b = random(16, 100, msgs=40, seed=3), random(16, 100, msgs=40, seed=3)
    assert sends(a) == sends(b) == recvs(a)
    assert sum(sends(a).values()) == 40
    assert all(x != y for x, y, _ in sends(a))
    assert sends(random(16, 100, msgs=40, seed=4)) != sends(a)


def test_alltoall_rows_expand_to_all_pairs():
    tr = alltoall(6, 2e6, iters=2)
    assert len(tr) == 12 and set(tr.peer.tolist()) == {-1}
    t = from_trace(tr)
    m = t.dense()
    off = ~np.eye(6, dtype=bool)
    assert np.allclose(m[off], 2 * 2e6) and np.allclose(np.diag(m), 0)


def test_spec_parsing_and_errors():
    assert is_spec("ring:np=4,bytes=1KB") and is_spec("npb") and not is_spec("foo.csv") and not is_spec("x:np=1")
    assert parse_spec("alltoall:np=4,bytes=1MB").bytes[0] == 1e6
    with pytest.raises(TopoplanError, match=r"'neighbor2d': unknown parameter 'colz' \(known: rows, cols, bytes, iters, compute\)"):
        parse_spec("neighbor2d:rows=2,colz=3,bytes=1KB")
    with pytest.raises(TopoplanError, match="missing parameter 'cols'"):
        parse_spec("neighbor2d:rows=2,bytes=1KB")
    with pytest.raises(TopoplanError, match="'ring'.*'np'.*bad value"):
        parse_spec("ring:np=four,bytes=1KB")
    with pytest.raises(TopoplanError, match="'ring'.*'bytes'"):
        parse_spec("ring:np=4,bytes=lots")
    with pytest.raises(TopoplanError, match="unknown traffic generator 'ringg'"):
        parse_spec("ringg:np=4")
    with pytest.raises(TopoplanError, match="class"):
        parse_spec("npb:kernel=cg,class=Q,np=4")


def test_npb_spec_forwards_and_describe():
    tr = parse_spec("npb:kernel=cg,class=S,np=8,iters=1")
    assert tr.n_ranks == 8 and tr.source == "npb:kernel=cg,class=S,np=8,iters=1"
    text = describe_generators()
    for name in GENERATORS:
        assert name in text
    fn, params, _ = GENERATORS["neighbor2d"]
    assert fn is neighbor2d and params["bytes"][0] == "size"
