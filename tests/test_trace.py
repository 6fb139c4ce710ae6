import gzip

import numpy as np
import pytest

from topoplan.core.errors import TopoplanError
from topoplan.traffic.trace import OP_CODE, Trace, read_trace

HEADER = "rank,op,peer,bytes,root,comm_size,t_start,t_end\n"


def write(tmp_path, body, name="t.csv", gz=False):
    p = tmp_path / name
    data = (HEADER + body).encode()
    p.write_bytes(gzip.compress(data) if gz else data)
    return p


def test_read_sorts_by_rank_then_time(tmp_path):
    p = write(tmp_path, "1,recv,0,8,,2,0.2,0.3\n0,send,1,8,,2,0.1,0.1\n0,barrier,,0,,2,0.0,0.05\n", gz=True)
    t = read_trace(p)
    assert t.n_ranks == 2 and len(t) == 3
    assert t.rank.tolist() == [0, 0, 1]
    assert t.op.tolist() == [OP_CODE["barrier"], OP_CODE["send"], OP_CODE["recv"]]
    assert t.peer.tolist() == [-1, 1, 0]


def test_unknown_ops_are_kept_and_counted(tmp_path):
    t = read_trace(write(tmp_path, "0,send,1,8,,2,0,0\n0,probe,1,0,,2,0,0\n0,probe,1,0,,2,0,0\n"))
    assert t.unknown_ops == {"probe": 2}
    assert (t.op == -1).sum() == 2


@pytest.mark.parametrize("body,needle", [
    ("0,send,5,8,,2,0,0\n", "t.csv:2: field 'peer': rank 5 is outside"),
    ("0,send,1,-8,,2,0,0\n", "t.csv:2: field 'bytes'"),
    ("0,send,1,8,,2,0,0\n0,send,1,abc,,2,0,0\n", "t.csv:3: field 'bytes': not a number"),
    ("0,send,1,8,,2,0.5,0.1\n", "t_end"),
])
def test_bad_rows_name_the_line(tmp_path, body, needle):
    with pytest.raises(TopoplanError) as e:
        read_trace(write(tmp_path, body), n_ranks=2)
    assert needle in str(e.value)


def test_missing_column(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("rank,op,peer\n0,send,1\n")
    with pytest.raises(TopoplanError, match="missing column"):
        read_trace(p)


def test_from_records_and_roundtrip(tmp_path):
    t = Trace.from_records([(0, "isend", 1, 100, -1, 2, 0.0, 0.0), (1, "irecv", 0, 100, -1, 2, 0.0, 0.0),
                            (0, "waitall", -1, 0, -1, 2, 0.0, 0.0), (1, "waitall", -1, 0, -1, 2, 0.0, 0.0)], 2)
    p = tmp_path / "out.csv.gz"
    t.write_csv(p)
    u = read_trace(p)
    assert np.array_equal(u.op, t.op) and np.array_equal(u.peer, t.peer) and np.array_equal(u.bytes, t.bytes)


def test_real_npb_traces_load(shared):
    for k in ("CG", "FT", "IS", "LU", "MG"):
        t = read_trace(shared / "traces" / f"{k}.C.64" / "events.csv.gz")
        assert t.n_ranks == 64
        assert not t.unknown_ops
        assert 0 in t.communicators and len(t.members(0)) == 64
