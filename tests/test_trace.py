import gzip
import os

import numpy as np
import pytest

from topoplan.core.errors import TopoplanError
from topoplan.traffic.trace import OP_CODE, Trace, read_trace, write_trace

HEADER = "rank,op,peer,bytes,root,comm_size,t_start,t_end\n"


def write(tmp_path, body, name="t.csv", gz=False):
    p = tmp_path / name
    data = (HEADER + body).encode()
    p.write_bytes(gzip.compress(data) if gz else data)
    return p


def test_read_sorts_by_rank_then_time(tmp_path):
    p = write(tmp_path, "1,recv,0,8,,2,0.2,0.3\n0,send,1,8,,2,0.1,0.1\n0,barrier,,0,,2,0.0,0.05\n"
                        "1,barrier,,0,,2,0.0,0.1\n", gz=True)
    t = read_trace(p)
    assert t.n_ranks == 2 and len(t) == 4
    assert t.rank.tolist() == [0, 0, 1, 1]
    assert t.op.tolist() == [OP_CODE["barrier"], OP_CODE["send"], OP_CODE["barrier"], OP_CODE["recv"]]
    assert t.peer.tolist() == [-1, 1, -1, 0]


def test_unknown_ops_are_kept_and_counted(tmp_path):
    t = read_trace(write(tmp_path, "0,send,1,8,,2,0,0\n0,probe,1,0,,2,0,0\n0,probe,1,0,,2,0,0\n"))
    assert t.unknown_ops == {"probe": 2}
    assert (t.op == -1).sum() == 2


@pytest.mark.parametrize("body,needle", [
    ("0,send,5,8,,2,0,0\n", "t.csv:2: field 'peer': rank 5 is outside"),
    ("0,send,1,-8,,2,0,0\n", "t.csv:2: field 'bytes'"),
    ("0,send,1,8,,2,0,0\n0,send,1,abc,,2,0,0\n", "t.csv:3: field 'bytes': not a number"),
    ("0,send,1,8,,2,0.5,0.1\n", "t_end"),
    # an empty time was read as 0: the call moved first in its rank and the computation before it vanished
    ("0,send,1,8,,2,,5.1\n1,recv,0,8,,2,0,5.1\n", "t.csv:2: field 't_start': empty"),
    ("0,send,1,8,,2,0,0.1\n1,recv,0,8,,2,0,\n", "t.csv:3: field 't_end': empty"),
    # an empty size on a call that moves data was read as a message of 0 bytes
    ("0,send,1,,,2,0,0.1\n1,recv,0,8,,2,0,0.1\n", "t.csv:2: field 'bytes': empty on a send, which moves data"),
    ("0,send,1,8,,2,0,0.1\n1,recv,0, ,,2,0,0.1\n", "t.csv:3: field 'bytes': empty on a recv"),
    ("0,allreduce,,,,2,0,0.1\n1,allreduce,,8,,2,0,0.1\n", "t.csv:2: field 'bytes': empty on an allreduce"),
    # an empty op was read as an op named 'nan', skipped with a warning: its call and bytes vanished
    ("0,send,1,8,,2,0,0.1\n1,,0,8,,2,0,0.1\n", "t.csv:3: field 'op': empty"),
    ("0,send,1,8,,2,0,0.1\n1, ,0,8,,2,0,0.1\n", "t.csv:3: field 'op': empty"),
    # a send without a destination was dropped from the traffic (only simulate refused it)
    ("0,send,-1,8,,2,0,0.1\n1,recv,0,8,,2,0,0.1\n", "t.csv:2: field 'peer': -1 on a send, which needs its destination"),
    ("1,recv,0,8,,2,0,0.1\n0,isend,,8,,2,0,0.1\n", "t.csv:3: field 'peer': empty on an isend, which needs its"),
    ("0,sendrecv,-1,8,,2,0,0.1\n1,recv,-1,8,,2,0,0.1\n", "t.csv:2: field 'peer': -1 on a sendrecv"),
])
def test_bad_rows_name_the_line(tmp_path, body, needle):
    with pytest.raises(TopoplanError) as e:
        read_trace(write(tmp_path, body), n_ranks=2)
    assert needle in str(e.value)


def test_an_empty_size_is_0_on_calls_that_move_no_data(tmp_path):
    t = read_trace(write(tmp_path, "0,isend,1,8,,2,0,0\n0,wait,1,,,2,0,0.1\n1,recv,0,8,,2,0,0.1\n"
                                   "0,barrier,,,,2,0.2,0.3\n1,barrier,,,,2,0.2,0.3\n0,probe,1,,,2,0.3,0.3\n"))
    assert t.bytes.tolist() == [8.0, 0.0, 0.0, 0.0, 8.0, 0.0]


@pytest.mark.parametrize("source", ["-1", ""])
def test_a_receive_may_take_any_source(tmp_path, source):
    t = read_trace(write(tmp_path, f"0,send,1,8,,2,0,0.1\n1,recv,{source},8,,2,0,0.1\n0,isend,1,8,,2,0.2,0.2\n"
                                   f"1,irecv,{source},8,,2,0.2,0.2\n0,wait,1,8,,2,0.2,0.3\n1,wait,,8,,2,0.2,0.3\n"))
    assert t.peer.tolist() == [1, 1, 1, -1, -1, -1]


@pytest.mark.parametrize("command, out", [(["traffic"], "out.csv"), (["analyze", "-t", "paper003", "-T"], "out.json"),
                                          (["place", "-t", "paper003", "-T"], "out.json"),
                                          (["circuits", "-t", "paper003", "-T"], "out.json"),
                                          (["simulate", "-t", "paper003", "-T"], "out.json")])
def test_every_command_refuses_a_send_without_destination(tmp_path, run_cli, command, out):
    """``traffic``, ``analyze``, ``place`` and ``circuits`` dropped the 5 MB send and went on with 10 bytes."""
    p = write(tmp_path, "0,send,-1,5000000,-1,2,0.0,0.1\n1,recv,0,5000000,-1,2,0.0,0.1\n"
                        "0,send,1,10,-1,2,0.2,0.3\n1,recv,0,10,-1,2,0.2,0.3\n")
    code, _, err = run_cli(*command, p, "-o", tmp_path / out)
    assert code == 2
    assert err.strip().splitlines() == [f"error: {p}:2: field 'peer': -1 on a send, which needs its destination (a "
                                        "world rank; -1 is a receive's any source)"]
    assert sorted(os.listdir(tmp_path)) == ["t.csv"]


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


@pytest.mark.parametrize("name", ["out.csv", "out.csv.gz"])
def test_written_trace_keeps_what_each_wait_completes(tmp_path, name):
    """A wait's ``req`` (1: a send, 0: a receive) chooses the request it completes; the written trace lost it."""
    src = tmp_path / "t.csv"
    src.write_text("rank,op,peer,bytes,root,comm_size,t_start,t_end,req\n"
                   "0,isend,1,8,,2,0,0,\n0,irecv,1,16,,2,0,0,\n0,wait,1,16,,2,0,0.1,0\n0,wait,1,8,,2,0.1,0.2,1\n"
                   "1,irecv,0,8,,2,0,0,\n1,isend,0,16,,2,0,0,\n1,waitall,,,,2,0,0.2,\n")
    t = read_trace(src)
    t.write_csv(tmp_path / name)
    u = read_trace(tmp_path / name)
    assert u.req.tolist() == t.req.tolist() and t.req[2:4].tolist() == [0, 1]


def _split_trace():
    t = Trace.from_records([(0, "bcast", -1, 8, 0, 2, 0.0, 1.0), (1, "bcast", -1, 8, 0, 2, 0.0, 1.0),
                            (2, "bcast", -1, 8, 2, 2, 0.0, 1.0), (3, "bcast", -1, 8, 2, 2, 0.0, 1.0)], 4,
                           communicators={1: [0, 1], 2: [2, 3]})
    t.comm[:] = [1, 1, 2, 2]
    return t


@pytest.mark.parametrize("name", ["t.csv", "t.csv.gz"])
def test_a_written_trace_with_sub_communicators_reads_back(tmp_path, name):
    """The trace was written without the communicators.csv its rows need, and could not be read back."""
    assert write_trace(_split_trace(), tmp_path / name) == tmp_path / "communicators.csv"
    u = read_trace(tmp_path / name)
    assert u.members(1).tolist() == [0, 1] and u.members(2).tolist() == [2, 3]
    assert write_trace(_split_trace(), tmp_path / f"again-{name}") == tmp_path / "communicators.csv"   # the same


@pytest.mark.parametrize("where, message", [
    ("-", "-: the trace has communicators other than MPI_COMM_WORLD"),
    ("other/t.csv", r"other/communicators.csv: lists other communicators \(another trace's\?\)"),
])
def test_a_trace_whose_communicators_cannot_be_written_is_refused(tmp_path, where, message):
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "communicators.csv").write_text('comm,size,world_ranks\n5,1,"0"\n')
    path = where if where == "-" else tmp_path / where
    with pytest.raises(TopoplanError, match=message):
        write_trace(_split_trace(), path)
    assert sorted(os.listdir(tmp_path / "other")) == ["communicators.csv"]


def test_real_npb_traces_load(shared):
    for k in ("CG", "FT", "IS", "LU", "MG"):
        t = read_trace(shared / "traces" / f"{k}.C.64" / "events.csv.gz")
        assert t.n_ranks == 64
        assert not t.unknown_ops
        assert 0 in t.communicators and len(t.members(0)) == 64


# -- issue 36: calls that contradict each other are refused, naming the line ----------------------------------

CHEAD = "rank,op,peer,bytes,root,comm_size,t_start,t_end,comm\n"


def _comm_trace(tmp_path, body, communicators=None):
    (tmp_path / "t.csv").write_text(CHEAD + body)
    if communicators is not None:
        (tmp_path / "communicators.csv").write_text("comm,size,world_ranks\n" + communicators)
    return tmp_path / "t.csv"


@pytest.mark.parametrize("body, needle", [
    # the root passes 500 bytes to a bcast, the other rank 1,000
    ("0,bcast,,500,0,2,0,0\n1,bcast,,1000,0,2,0,0\n",
     r"t\.csv:3: field 'bytes': 1000 bytes, but rank 0 passes 500 to the same bcast \(its 1st collective call"),
    ("0,allreduce,,8,,2,0,0\n1,allreduce,,8,,2,0,0\n0,allreduce,,8,,2,1,1\n1,allreduce,,16,,2,1,1\n",
     r"t\.csv:5: field 'bytes': 16 bytes, but rank 0 passes 8 to the same allreduce \(its 2nd"),
    ("0,bcast,,8,0,2,0,0\n1,bcast,,8,1,2,0,0\n", r"t\.csv:3: field 'root': 1, but rank 0 gives the same bcast"),
    ("0,bcast,,8,0,2,0,0\n1,reduce,,8,0,2,0,0\n", r"t\.csv:3: field 'op': its 1st collective call on MPI_COMM_WORLD "
                                                   r"is a reduce, but rank 0's is a bcast"),
    ("0,barrier,,0,,2,0,0\n1,barrier,,0,,2,0,0\n0,barrier,,0,,2,1,1\n",
     r"t\.csv:4: its 2nd collective call on MPI_COMM_WORLD \(a barrier\) is not made by rank 1, a member"),
    ("0,bcast,,8,,2,0,0\n1,bcast,,8,,2,0,0\n", r"t\.csv:2: field 'root': a bcast needs its root"),
    # an op with a vowel takes "an" (it said "a allreduce")
    ("0,allreduce,,8,,2,0,0\n1,allreduce,,8,,2,0,0\n0,allreduce,,8,,2,1,1\n",
     r"t\.csv:4: its 2nd collective call on MPI_COMM_WORLD \(an allreduce\) is not made by rank 1, a member"),
    ("0,bcast,,8,0,2,0,0\n1,allreduce,,8,,2,0,0\n", r"t\.csv:3: field 'op': its 1st collective call on "
                                                    r"MPI_COMM_WORLD is an allreduce, but rank 0's is a bcast"),
    ("0,allreduce,,8,,3,0,0\n1,allreduce,,8,,3,0,0\n2,allreduce,,8,,2,0,0\n",
     r"t\.csv:4: field 'comm_size': 2, but MPI_COMM_WORLD has 3 ranks"),
    # one row too large: the world was taken from it (1000 ranks), and the first correct row was blamed
    ("0,barrier,,0,,4,0,0\n1,barrier,,0,,1000,0,0\n2,barrier,,0,,4,0,0\n3,barrier,,0,,4,0,0\n",
     r"t\.csv:3: field 'comm_size': 1000, but MPI_COMM_WORLD has 4 ranks$"),
    ("0,send,1,8,,4,0,0\n1,recv,0,8,,4,0,0\n2,send,3,8,,1000,0,0\n3,recv,2,8,,4,0,0\n",
     r"t\.csv:4: field 'comm_size': 1000, but MPI_COMM_WORLD has 4 ranks$"),
])
def test_collective_calls_agree(tmp_path, body, needle):
    with pytest.raises(TopoplanError, match=needle):
        read_trace(write(tmp_path, body))


@pytest.mark.parametrize("body, n_ranks", [
    ("0,send,1,8,,4,0,0\n1,recv,0,8,,4,0,0\n", 4),                   # ranks 2 and 3 make no call
    ("0,send,1,8,,2,0,0\n1,recv,0,8,,2,0,0\n0,wait,1,8,,2,0,0\n", 2),
    ("0,probe,1,0,,6,0,0\n0,send,1,8,,2,0,0\n1,recv,0,8,,2,0,0\n", 2),   # a call not modelled gives no size
    ("0,wait,1,8,,3,0,0\n", 3),                                        # no call on the world: the largest
])
def test_the_world_is_the_size_its_calls_give(tmp_path, body, n_ranks):
    assert read_trace(write(tmp_path, body)).n_ranks == n_ranks


def test_gather_and_alltoallv_sizes_may_differ(tmp_path):
    """The v-variants are written under the same names: their ranks' sizes differ by design."""
    t = read_trace(write(tmp_path, "0,gather,,8,0,2,0,0\n1,gather,,16,0,2,0,0\n0,alltoallv,1,5,,2,1,1\n"
                                   "1,alltoallv,0,7,,2,1,1\n0,allgatherv,,3,,2,2,2\n1,allgatherv,,4,,2,2,2\n"))
    assert t.op_counts() == {"alltoallv": 2, "allgatherv": 2, "gather": 2}


def _a2a(size, rows=None, op="alltoall", nbytes=1000):
    """An all-to-all of ``size`` ranks written one row per destination; ``rows`` edits them:
    {(rank, dst): new dst, or None to leave the row out}."""
    rows = rows or {}
    out = [(r, rows.get((r, d), d)) for r in range(size) for d in range(size)]
    return "".join(f"{r},{op},{d},{nbytes},,{size},0,1\n" for r, d in out if d is not None)


@pytest.mark.parametrize("body, needle", [
    # 0 -> 1 twice, 0 -> 2 never: read as a uniform alltoall, which sent 0 -> 2 a message no row has
    (_a2a(4, {(0, 2): 1}), r"t\.csv:4: field 'peer': rank 1 is named twice in one alltoall \(first at \S*t\.csv:3\)"),
    (_a2a(4, {(2, 0): None}), r"t\.csv:10: field 'peer': the alltoall written one row per destination from here has "
                              r"no row for rank 0, a member of MPI_COMM_WORLD \(4 ranks\)"),
    (_a2a(4, {(3, 3): 0}), r"t\.csv:17: field 'peer': rank 0 is named twice in one alltoall \(first at \S*t\.csv:14\)"),
    (_a2a(3, {(1, 0): 2}, op="alltoallv"), r"t\.csv:7: field 'peer': rank 2 is named twice in one alltoallv"),
])
def test_an_alltoall_per_destination_names_each_member_once(tmp_path, body, needle):
    with pytest.raises(TopoplanError, match=needle):
        read_trace(write(tmp_path, body))


def test_an_alltoall_per_destination_may_leave_out_what_sends_nothing(tmp_path):
    """The caller's own block is a local copy (no row needed); an alltoallv sends 0 bytes to a member left out."""
    t = read_trace(write(tmp_path, _a2a(4, {(r, r): None for r in range(4)})))
    assert len(t) == 12
    t = read_trace(write(tmp_path, _a2a(3, {(0, 1): None, (2, 1): None}, op="alltoallv")))
    assert t.peer.tolist() == [0, 2, 0, 1, 2, 0, 2]


def test_traffic_refuses_an_alltoall_with_a_member_twice(tmp_path, run_cli):
    """``traffic`` wrote 12 KB in 12 messages, among them 0 -> 2, which no row has."""
    p = write(tmp_path, _a2a(4, {(0, 2): 1}))
    code, _, err = run_cli("traffic", p, "-o", tmp_path / "out.csv")
    assert code == 2 and err.startswith(f"error: {p}:4: field 'peer': rank 1 is named twice in one alltoall")
    assert len(err.strip().splitlines()) == 1 and sorted(os.listdir(tmp_path)) == ["t.csv"]


@pytest.mark.parametrize("body, communicators, needle", [
    # comm 5 is not listed: read as MPI_COMM_WORLD it would spread its bytes over 4 ranks instead of 2
    ("0,allreduce,,8,,2,0,0,5\n1,allreduce,,8,,2,0,0,5\n2,barrier,,0,,4,0,0,0\n3,barrier,,0,,4,0,0,0\n",
     None, r"t\.csv:2: field 'comm': communicator 5 is not listed \(communicators\.csv\) and its comm_size 2 is not "
           r"MPI_COMM_WORLD's 4 ranks"),
    ("0,allreduce,,8,,2,0,0,5\n1,allreduce,,8,,2,0,0,5\n2,allreduce,,8,,2,0,0,6\n3,allreduce,,8,,2,0,0,6\n",
     '6,2,"2;3"\n', r"t\.csv:2: field 'comm': communicator 5 is not listed"),
    ("0,allreduce,,8,,2,0,0,6\n1,allreduce,,8,,2,0,0,6\n2,barrier,,0,,4,0,0,-1\n3,barrier,,0,,4,0,0,-1\n",
     '6,2,"2;3"\n', r"t\.csv:2: field 'rank': the calling rank 0 is not a member of communicator 6 \(2 ranks\)"),
    ("0,send,3,8,,2,0,0,6\n3,recv,0,8,,2,0,0,6\n", '6,2,"0;1"\n',
     r"t\.csv:2: field 'peer': the partner 3 is not a member of communicator 6"),
    ("0,alltoallv,0,8,,2,0,0,6\n0,alltoallv,3,8,,2,0,0,6\n1,alltoallv,1,8,,2,0,0,6\n2,barrier,,0,,4,0,0,-1\n"
     "3,barrier,,0,,4,0,0,-1\n", '6,2,"0;1"\n', r"t\.csv:3: field 'peer': the destination 3 is not a member of "
                                                r"communicator 6"),
    ("0,bcast,,8,3,2,0,0,6\n1,bcast,,8,3,2,0,0,6\n2,barrier,,0,,4,0,0,-1\n3,barrier,,0,,4,0,0,-1\n", '6,2,"0;1"\n',
     r"t\.csv:2: field 'root': the root 3 is not a member of communicator 6"),
    ("0,allreduce,,8,,3,0,0,6\n1,allreduce,,8,,3,0,0,6\n", '6,2,"0;1"\n',
     r"t\.csv:2: field 'comm_size': 3, but communicator 6 has 2 ranks"),
    # a member twice: the communicator's ranks would shift (an unused communicator's too: the file is garbled)
    ("0,allreduce,,8,,3,0,0,6\n1,allreduce,,8,,3,0,0,6\n", '6,3,"0;1;1"\n',
     r"communicators\.csv:2: field 'world_ranks': rank 1 is listed twice in comm 6$"),
    ("0,barrier,,0,,2,0,0,0\n1,barrier,,0,,2,0,0,0\n", '6,2,"0;1"\n7,3,"1;0;0"\n',
     r"communicators\.csv:3: field 'world_ranks': rank 0 is listed twice in comm 7$"),
])
def test_communicators_are_what_the_list_says(tmp_path, body, communicators, needle):
    with pytest.raises(TopoplanError, match=needle):
        read_trace(_comm_trace(tmp_path, body, communicators))


def test_listed_communicators_and_the_world_are_read(tmp_path):
    t = read_trace(_comm_trace(tmp_path, "0,allreduce,,8,,2,0,0,6\n1,allreduce,,8,,2,0,0,6\n"
                                         "2,allreduce,,16,,2,0,0,7\n3,allreduce,,16,,2,0,0,7\n"
                                         "0,bcast,,4,1,4,1,1,0\n1,bcast,,4,1,4,1,1,0\n2,bcast,,4,1,4,1,1,0\n"
                                         "3,bcast,,4,1,4,1,1,0\n", '6,2,"1;0"\n7,2,"2;3"\n'))
    assert t.members(6).tolist() == [1, 0] and t.members(0).tolist() == [0, 1, 2, 3]   # 0: not listed, the world


@pytest.mark.parametrize("req", ["2", "-2", "300", "44"])
def test_wait_req_is_what_it_completes(tmp_path, req):
    """A wait's req is 1 (a send), 0 (a receive) or -1; held in one byte, 300 once wrapped to 44."""
    p = tmp_path / "t.csv"
    p.write_text(HEADER.rstrip("\n") + f",req\n0,isend,1,8,,2,0,0,\n0,wait,1,8,,2,1,1,{req}\n1,recv,0,8,,2,0,1,\n")
    with pytest.raises(TopoplanError, match=rf"t\.csv:3: field 'req': {req} is not what a wait completes"):
        read_trace(p)
    p.write_text(HEADER.rstrip("\n") + ",req\n0,isend,1,8,,2,0,0,7\n0,wait,1,8,,2,1,1,1\n1,recv,0,8,,2,0,1,\n")
    assert read_trace(p).req.tolist()[1] == 1   # other rows' req is not read (some recorders put tags there)


def test_the_shared_traces_pass_the_checks(shared):
    for kernel in ("FT", "IS"):   # the two smaller ones (CG, LU and MG take seconds to read)
        t = read_trace(shared / "traces" / f"{kernel}.C.64" / "events.csv.gz")
        assert t.n_ranks == 64 and len(t) > 10_000
