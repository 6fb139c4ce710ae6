"""Issue 17: CSV file inputs read strictly (rows that do not match the header, numbers and ids, resource limits).

Every bad file is one TopoplanError naming the file, the line and (for a cell) the field; never a
result computed from misread data. Valid files, the shared real traces and matrices, still load.
"""

import gzip

import numpy as np
import pytest

from topoplan.core.errors import TopoplanError
from topoplan.core.placement import load_placement, read_placement
from topoplan.core import csvtable
from topoplan.traffic.matrix import read_matrix
from topoplan.traffic.sources import is_matrix_file, load_source
from topoplan.core.csvtable import read_csv_table
from topoplan.traffic.trace import read_trace

HEAD = "rank,op,peer,bytes,root,comm_size,t_start,t_end\n"
MHEAD = "src,dst,bytes,msgs\n"
BOM = "\ufeff"


def write(tmp_path, name, text, gz=False):
    p = tmp_path / name
    data = text.encode("utf-8") if isinstance(text, str) else text
    p.write_bytes(gzip.compress(data) if gz else data)
    return p


def reader(kind):
    return {"trace": read_trace, "matrix": read_matrix, "placement": read_placement}[kind]


# -- 1. rows that do not match the header ---------------------------------------------------------

@pytest.mark.parametrize("kind,text,needle", [
    # a truncated file's last line: a 10-byte send without comm_size, t_start, t_end
    ("trace", HEAD + "0,send,1,10,-1,2,0,0.1\n1,recv,0,10", r"t\.csv:3: 4 fields, the header has 8 \(a row cut short"),
    ("trace", HEAD + "0,send,1,10,-1\n1,recv,0,10,-1,2,0,0.1\n", r"t\.csv:2: 5 fields, the header has 8"),
    # one extra field on every row: pandas would take the first as the index and shift every column
    ("placement", "rank,node\n0,0,3\n1,1,4\n", r"t\.csv:2: 3 fields, the header has 2 \(a stray comma"),
    ("placement", "rank,node\n0,0\n1,1,4\n", r"t\.csv:3: 3 fields, the header has 2"),
    ("matrix", MHEAD + "0,1,100,1\n1,0,100\n", r"t\.csv:3: 3 fields, the header has 4"),
    ("matrix", MHEAD + "0,1,100,1,7\n", r"t\.csv:2: 5 fields, the header has 4"),
    # blank lines are skipped, and lines keep their real numbers
    ("matrix", MHEAD + "0,1,100,1\n\n  \t \n1,0,5\n", r"t\.csv:5: 3 fields, the header has 4"),
    ("matrix", "\n\n" + MHEAD + "0,1,100,1\n1,0,x,1\n", r"t\.csv:5: field 'bytes': not a number: 'x'"),
    ("matrix", MHEAD + "0,1,100,1\n\n\n0,x,1,1\n", r"t\.csv:5: field 'dst': not a number"),
    # Windows line ends, old Mac line ends (csv module path), quoted fields (csv module path)
    ("matrix", (MHEAD + "0,1,100,1\n0,1\n").replace("\n", "\r\n"), r"t\.csv:3: 2 fields, the header has 4"),
    ("matrix", (MHEAD + "0,1,100,1\n0,1\n").replace("\n", "\r"), r"t\.csv:3: 2 fields, the header has 4"),
    ("matrix", MHEAD + '0,1,"100",1\n0,1,"5"\n', r"t\.csv:3: 3 fields, the header has 4"),
    ("matrix", MHEAD + '0,1,"1\n00",1\n0,1,"5"\n', r"t\.csv:4: 3 fields, the header has 4"),
    ("matrix", MHEAD + '0,1,"1\n00",1\n0,x,5,1\n', r"t\.csv:4: field 'dst': not a number"),
    ("trace", HEAD + "0,send,1,10,-1,2,0,0.1,\n", r"t\.csv:2: 9 fields, the header has 8"),
    # a blank line then a short row: as many separators as whole rows, but not where they belong
    ("placement", "rank,node\n0,1\n\n5\n", r"t\.csv:4: 1 field, the header has 2"),
    ("matrix", MHEAD + "0,1,100,1\n\n0,1\n1,1\n", r"t\.csv:4: 2 fields, the header has 4"),
    ("trace", HEAD + "0,send,1,10,-1,2,0,0.1\n\n0,send,1,10\n0,send,1,10\n", r"t\.csv:4: 4 fields"),
])
@pytest.mark.parametrize("gz", [False, True])
def test_rows_must_have_the_header_field_count(tmp_path, kind, text, needle, gz):
    with pytest.raises(TopoplanError, match=needle):
        reader(kind)(write(tmp_path, "t.csv", text, gz))


def test_blank_lines_are_skipped_and_lines_keep_their_numbers(tmp_path):
    p = write(tmp_path, "m.csv", "\n" + MHEAD + "0,1,100,1\n\n \n1,0,50,2\n\n")
    df = read_csv_table(p, ("src",), "communication matrix")
    assert df.index.tolist() == [3, 6]
    t = read_matrix(p)
    assert t.count.tolist() == [1, 2]
    with pytest.raises(TopoplanError, match=r"m\.csv:6: field 'src': rank 1 is outside the communicator of 1 ranks"):
        read_matrix(p, n_ranks=1)


def test_no_header_is_an_empty_file(tmp_path):
    for text in ("", "\n\n", BOM, " \n\t\n"):
        with pytest.raises(TopoplanError, match="empty file"):
            read_matrix(write(tmp_path, "m.csv", text))


# -- 2. a UTF-8 byte order mark ---------------------------------------------------------------------

@pytest.mark.parametrize("gz", [False, True])
def test_bom_is_ignored_everywhere(tmp_path, gz):
    m = write(tmp_path, "m.csv", BOM + MHEAD + "0,1,100,1\n", gz)
    assert is_matrix_file(m)
    trace, t = load_source(str(m))
    assert trace is None and t.total_bytes() == 100
    m2 = write(tmp_path, "m2.csv", BOM + '"src","dst","bytes"\n0,1,"7"\n', gz)  # quoted: the csv module path
    assert is_matrix_file(m2) and read_matrix(m2).total_bytes() == 7
    tr = write(tmp_path, "t.csv", BOM + HEAD + "0,send,1,8,,2,0,0\n1,recv,0,8,,2,0,0\n", gz)
    assert not is_matrix_file(tr) and len(read_trace(tr)) == 2
    pl = write(tmp_path, "p.csv", BOM + "rank,node\n0,4\n", gz)
    assert read_placement(pl).rank_to_node.tolist() == [4]


@pytest.mark.parametrize("text,matrix", [
    ("src,dst,bytes,msgs\r0,1,100,1\r", True),            # lone carriage returns end lines, as the readers take them
    ("rank,op\r,x\n", False),                               # a carriage return inside the first \n line
    ("\x8b\x01\rsrc\x00,\x07\n", False),                      # binary data named .csv
])
def test_a_carriage_return_in_the_header_is_a_line_end_not_a_crash(tmp_path, text, matrix):
    assert is_matrix_file(write(tmp_path, "x.csv", text)) is matrix


# -- 3. duplicate column names ----------------------------------------------------------------------

@pytest.mark.parametrize("kind,text,needle", [
    ("matrix", "src,dst,bytes,bytes\n0,1,5,6\n", r"t\.csv:1: duplicate column 'bytes' in the header"),
    ("matrix", "src, dst, bytes ,bytes\n0,1,5,6\n", r"t\.csv:1: duplicate column 'bytes'"),
    ("matrix", '"src","dst","bytes","src"\n0,1,5,6\n', r"t\.csv:1: duplicate column 'src'"),
    ("trace", HEAD.strip() + ",rank\n" + "0,send,1,8,,2,0,0,1\n", r"t\.csv:1: duplicate column 'rank'"),
    ("placement", "\nrank,node,node\n0,1,2\n", r"t\.csv:2: duplicate column 'node'"),
])
def test_duplicate_columns(tmp_path, kind, text, needle):
    with pytest.raises(TopoplanError, match=needle):
        reader(kind)(write(tmp_path, "t.csv", text))


# -- 3b. columns that would be ignored --------------------------------------------------------------

@pytest.mark.parametrize("kind,text,needle", [
    # a matrix and a placement have no other columns: a count under another name would be read as 1 message
    ("matrix", "src,dst,bytes,count\n0,1,70,7\n",
     r"t\.csv:1: column 'count' is not a column of a communication matrix \(src,dst,bytes\[,msgs"),
    ("matrix", "src,dst,bytes,msgs,calls\n0,1,70,7,7\n", r"t\.csv:1: columns 'msgs' and 'calls' both count"),
    ("matrix", "\nsrc,dst,bytes,msgs,calls\n0,1,70,7,7\n", r"t\.csv:2: columns 'msgs' and 'calls' both count"),
    ("matrix", "src,dst,bytes,msg\n0,1,70,7\n", r"column 'msg' is not a column .*; did you mean 'msgs'\?"),
    ("matrix", "src,dst,bytes,Msgs\n0,1,70,7\n", r"column 'Msgs' .*; did you mean 'msgs'\?"),
    ("matrix", MHEAD.strip() + ",extra\n0,1,70,7,x\n", r"t\.csv:1: column 'extra' is not a column"),
    ("matrix", "\n" + MHEAD.strip() + ",\n0,1,70,7,\n", r"t\.csv:2: an unnamed column is not a column"),
    ("placement", "rank,node,slots\n0,1,1\n", r"t\.csv:1: column 'slots' .* placement \(rank,node\[,slot\]\); "
     r"did you mean 'slot'\?"),
    ("placement", "rank,node,host\n0,1,cn01\n", r"column 'host' is not a column of a placement"),
    # a trace may carry other columns, but not a misspelled optional one (its tags or communicators ignored)
    ("trace", HEAD.strip() + ",tags\n0,send,1,8,,2,0,0,3\n", r"t\.csv:1: column 'tags' .*did you mean 'tag'\?"),
    ("trace", HEAD.strip() + ",Comm\n0,send,1,8,,2,0,0,3\n", r"column 'Comm' .*did you mean 'comm'\?"),
    ("trace", HEAD.strip() + ",reqs\n0,send,1,8,,2,0,0,1\n", r"column 'reqs' .*did you mean 'req'\?"),
])
def test_columns_that_would_be_ignored(tmp_path, kind, text, needle):
    with pytest.raises(TopoplanError, match=needle):
        reader(kind)(write(tmp_path, "t.csv", text))


@pytest.mark.parametrize("kind,text,needle", [
    ("matrix", "src,dst,bytez\n0,1,70\n", r"^\S*t\.csv:1: missing column\(s\) bytes for a communication matrix$"),
    ("matrix", "\n\nsrc,dst\n0,1\n", r"^\S*t\.csv:3: missing column\(s\) bytes for a communication matrix$"),
    ("placement", "rank\n0\n", r"^\S*t\.csv:1: missing column\(s\) node for a placement$"),
    ("trace", "\nrank,op\n0,send\n", r"^\S*t\.csv:2: missing column\(s\) peer, bytes"),
])
def test_header_errors_name_file_and_line_as_row_errors_do(tmp_path, kind, text, needle):
    """The header's errors read as every other CSV error: ``FILE:LINE: ...`` (topoplan.core.errors.where)."""
    with pytest.raises(TopoplanError, match=needle):
        reader(kind)(write(tmp_path, "t.csv", text))


@pytest.mark.parametrize("text,needle", [
    ("key,score\na,1\nb,2,3\n", r"t\.csv:3: 3 fields, the header has 2 \(a stray comma, or a column missing from "
     r"the header\?\); move the previous sweep table away to start over$"),
    ('key,score\na,"1\n', r"t\.csv:2: malformed CSV: .*; move the previous sweep table away to start over$"),
])
def test_a_malformed_sweep_table_is_one_line_naming_its_line(tmp_path, text, needle):
    from topoplan.batch.sweep import read_table

    path = write(tmp_path, "t.csv", text)
    with pytest.raises(TopoplanError, match=needle) as e:
        read_table(path)
    assert "\n" not in str(e.value)


def test_a_sweep_table_reads_back_as_written(tmp_path):
    import pandas as pd

    from topoplan.batch.sweep import read_table, write_table

    df = pd.DataFrame({"key": ["a", "b"], "score": [1.5, None], "error": ["", "x, with a comma\nand a line"]})
    write_table(df, tmp_path / "t.csv")
    got = read_table(tmp_path / "t.csv")
    assert list(got.index) == [0, 1] and got["key"].tolist() == ["a", "b"]
    assert got["score"].iloc[0] == 1.5 and got["error"].iloc[1] == "x, with a comma\nand a line"


def test_trace_keeps_other_columns_and_known_optional_ones(tmp_path):
    tr = write(tmp_path, "t.csv", HEAD.strip() + ",tag,comm_id,dtype\n0,send,1,8,,2,0,0,3,9,int\n"
               "1,recv,0,8,,2,0,0,3,9,int\n")
    assert read_trace(tr).tag.tolist() == [3, 3]
    m = write(tmp_path, "m.csv", "src,dst,bytes\n0,1,70\n")
    assert read_matrix(m).count.tolist() == [1]


# -- 4. matrix message counts -----------------------------------------------------------------------

@pytest.mark.parametrize("body,needle", [
    ("0,1,100,0\n", r"m\.csv:2: field 'msgs': 0 messages cannot carry 100 bytes"),
    ("0,1,100,1\n0,1,5,0\n", r"m\.csv:3: field 'msgs': 0 messages cannot carry 5 bytes"),
    ("0,1,100,-1\n", r"m\.csv:2: field 'msgs': must be non-negative, got -1"),
    ("0,1,100,1.5\n", r"m\.csv:2: field 'msgs': not an integer: '1\.5'"),
    ("0,1,100,\n", r"m\.csv:2: field 'msgs': empty"),
    ("0,1,100,x\n", r"m\.csv:2: field 'msgs': not a number: 'x'"),
    ("0,1,100,2e12\n", r"m\.csv:2: field 'msgs': 2e\+12 is over the limit of 1,099,511,627,776 messages"),
])
def test_matrix_msgs(tmp_path, body, needle):
    with pytest.raises(TopoplanError, match=needle):
        read_matrix(write(tmp_path, "m.csv", MHEAD + body))


def test_matrix_zero_rows_and_zero_byte_messages_are_fine(tmp_path):
    t = read_matrix(write(tmp_path, "m.csv", MHEAD + "0,1,0,0\n1,0,0,3\n0,1,100,1\n"))
    assert sorted(zip(t.src.tolist(), t.count.tolist(), t.msg_bytes.tolist())) == [(0, 1, 100.0), (1, 3, 0.0)]


# -- 5. numbers and ids: ASCII digits only ----------------------------------------------------------

BAD_INTS = ["²", "٣", "３", "--3", "+-3", "−3", "3²", "True", "0x3", "1_0"]


@pytest.mark.parametrize("bad", BAD_INTS)
@pytest.mark.parametrize("fn,text,where", [
    (read_matrix, MHEAD + "0,1,100,1\n0,{bad},5,1\n", "t.csv:3: field 'dst'"),
    (read_placement, "rank,node\n{bad},1\n0,2\n", "t.csv:2: field 'rank'"),
    (read_trace, HEAD + "0,send,1,8,,2,0,0\n{bad},recv,0,8,,2,0,0\n", "t.csv:3: field 'rank'"),
])
def test_integer_fields_take_ascii_digits_only(tmp_path, fn, text, where, bad):
    with pytest.raises(TopoplanError) as e:
        fn(write(tmp_path, "t.csv", text.format(bad=bad)))
    assert str(e.value).endswith(f"{where}: not a number: {bad!r}")


@pytest.mark.parametrize("bad", BAD_INTS)
def test_a_placement_node_is_an_ascii_id_or_a_host_name(tmp_path, bad):
    """The node column also takes host names (issue 18), so a bad id is an unknown host, never an alias."""
    from topoplan.core.topology_io import load_topology

    path = write(tmp_path, "t.csv", f"rank,node\n0,1\n1,{bad}\n")
    for hosts in (None, load_topology("paper003")):
        with pytest.raises(TopoplanError, match=r"t\.csv:3: field 'node': "):
            read_placement(path, hosts)


def test_whole_decimals_and_signs_still_read(tmp_path):
    # pandas writes an integer column with an empty cell as 3.0; a leading '+' is a number too
    t = read_matrix(write(tmp_path, "m.csv", MHEAD + "0,1.0,100,+2\n"))
    assert t.dst.tolist() == [1] and t.count.tolist() == [2]


@pytest.mark.parametrize("bad", ["٣", "²", "--3", "+-3", "1.5"])
def test_communicator_members_are_ascii_integers(tmp_path, bad):
    write(tmp_path, "communicators.csv", f'comm,size,world_ranks\n0,2,"0;{bad}"\n')
    p = write(tmp_path, "events.csv", HEAD + "0,send,1,8,,2,0,0\n1,recv,0,8,,2,0,0\n")
    with pytest.raises(TopoplanError, match=r"communicators\.csv:2: field 'world_ranks': not an integer"):
        read_trace(p)


@pytest.mark.parametrize("bad", ["²", "٣", "３", "--3", "+-3"])
def test_allocation_ids_are_ascii(tmp_path, bad):
    from topoplan.problems.bcast.allocation import cluster, parse_spec, read_allocation

    p = write(tmp_path, "nodes.txt", f"n00001\n{bad}\n")
    with pytest.raises(TopoplanError, match=r"nodes\.txt:2: unknown host"):
        read_allocation(p, cluster(4, 4))
    with pytest.raises(TopoplanError, match="nodes: not an integer"):
        parse_spec(f"gen:nodes={bad}", cluster(4, 4))
    assert read_allocation(write(tmp_path, "ok.txt", "n00001\n-0\n 3\n"), cluster(4, 4)).tolist() == [1, 0, 3]


@pytest.mark.parametrize("bad", ["²", "٣", "--3", "+-3"])
def test_circuit_plan_ids_are_ascii(bad):
    from topoplan.core.topology_io import load_topology
    from topoplan.plans.circuits import validate_plan_dict

    topo = load_topology("paper003", ["ocs.nodes_per_switch=1"])
    with pytest.raises(TopoplanError, match="unknown node"):
        validate_plan_dict({"circuits": [[0, 16]], "forwarding": {bad: {"1": 16}}}, topo)
    with pytest.raises(TopoplanError, match="expected a list of node ids"):
        validate_plan_dict({"circuits": [], "rank_to_node": ["1", bad]}, topo)
    validate_plan_dict({"circuits": [[0, 16]], "forwarding": {"0": {"1": 16}}, "rank_to_node": ["1", " 2"]}, topo)


# -- 6. trace times ---------------------------------------------------------------------------------

@pytest.mark.parametrize("body,needle", [
    ("0,send,1,8,,2,0,1e300\n", r"t\.csv:2: field 't_end': 1e\+300 s is over the limit of 1e\+10 s"),
    ("0,send,1,8,,2,1e300,1e300\n", r"t\.csv:2: field 't_start': 1e\+300 s is over the limit"),
    ("0,send,1,8,,2,0,0\n1,recv,0,8,,2,0,4e7\n", r"t\.csv:3: field 't_end': 4e\+07 s is more than a year"),
    # a Unix-time trace with one time left empty (no longer read as 0)
    ("0,send,1,8,,2,1.7e9,1.7e9\n1,recv,0,8,,2,,1.7e9\n", r"t\.csv:3: field 't_start': empty"),
    ("0,send,1,1e30,,2,0,0\n1,recv,0,1e30,,2,0,0\n", r"t\.csv:2: field 'bytes': 1e\+30 is over the limit"),
])
def test_trace_times_and_sizes_are_capped(tmp_path, body, needle):
    with pytest.raises(TopoplanError, match=needle):
        read_trace(write(tmp_path, "t.csv", HEAD + body))


def test_unix_time_traces_still_read(tmp_path):
    t = read_trace(write(tmp_path, "t.csv", HEAD + "0,send,1,8,,2,1.7e9,1.7e9\n1,recv,0,8,,2,1.7e9,1.70000001e9\n"))
    assert len(t) == 2


# -- 7. a receive smaller than its matched send -----------------------------------------------------

@pytest.mark.parametrize("head,body,needle", [
    (HEAD, "0,send,1,100,,2,0,0\n1,recv,0,10,,2,0,0\n", r"t\.csv:3: field 'bytes': a receive of 10 bytes matches "
                                                        r"a message of 100 bytes \(the send on line 2\).*TRUNCATE"),
    (HEAD, "0,isend,1,10,,2,0,0\n0,isend,1,100,,2,1,1\n1,irecv,0,100,,2,0,0\n1,irecv,0,10,,2,1,1\n",
     r"t\.csv:5: .*receive of 10 bytes .* line 3"),
    # any-tag receives take the messages in the order sent
    (HEAD.strip() + ",tag\n", "0,send,1,100,,2,0,0,1\n0,send,1,10,,2,1,1,2\n1,recv,0,10,,2,0,0,-1\n"
     "1,recv,0,100,,2,1,1,-1\n", r"t\.csv:4: .*receive of 10 bytes"),
])
def test_receive_smaller_than_its_send(tmp_path, head, body, needle):
    with pytest.raises(TopoplanError, match=needle):
        read_trace(write(tmp_path, "t.csv", head + body))


@pytest.mark.parametrize("head,body", [
    (HEAD, "0,send,1,100,,2,0,0\n1,recv,0,1000,,2,0,0\n"),                       # larger: legal MPI
    (HEAD, "0,send,1,10,,2,0,0\n0,send,1,100,,2,1,1\n1,recv,0,10,,2,0,0\n1,recv,0,100,,2,1,1\n"),
    (HEAD.strip() + ",tag\n", "0,send,1,100,,2,0,0,1\n0,send,1,10,,2,1,1,2\n1,recv,0,10,,2,0,0,2\n"
     "1,recv,0,100,,2,1,1,1\n"),                                                   # matched by tag
    (HEAD.strip() + ",comm\n", "0,send,1,100,,2,0,0,5\n0,send,1,10,,2,1,1,6\n1,recv,0,10,,2,0,0,6\n"
     "1,recv,0,100,,2,1,1,5\n"),                                                   # by communicator
    (HEAD, "0,send,1,100,,2,0,0\n1,recv,-1,10,,2,0,0\n"),     # any source: matched by the replay, not here
])
def test_receives_that_fit(tmp_path, head, body):
    assert len(read_trace(write(tmp_path, "t.csv", head + body))) == body.count("\n")


@pytest.mark.parametrize("spec", ["ring:np=8,bytes=1MB,iters=2", "random:np=8,bytes=1MB,msgs=50,seed=3",
                                  "npb:kernel=mg,class=S,np=8", "npb:kernel=lu,class=S,np=4",
                                  "npb:kernel=cg,class=S,np=4"])
def test_generated_traces_read_back(tmp_path, spec):
    from topoplan.traffic.generators import parse_spec

    t = parse_spec(spec)
    t.write_csv(tmp_path / "e.csv.gz")
    u = read_trace(tmp_path / "e.csv.gz", t.n_ranks)
    assert np.array_equal(u.bytes, t.bytes) and np.array_equal(u.peer, t.peer)


# -- 8. resource limits, before allocating -----------------------------------------------------------

def test_gzip_is_decompressed_up_to_the_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(csvtable, "MAX_CSV_BYTES", 1000)
    p = write(tmp_path, "m.csv.gz", MHEAD + "0,1,100,1\n" * 200, gz=True)
    with pytest.raises(TopoplanError, match=r"m\.csv\.gz: more than 1,000 bytes once decompressed, over the limit"):
        read_matrix(p)
    p = write(tmp_path, "m.csv", MHEAD + "0,1,100,1\n" * 200)
    with pytest.raises(TopoplanError, match=r"m\.csv: 2,019 bytes, over the limit of 1,000 bytes"):
        read_matrix(p)
    assert read_matrix(write(tmp_path, "ok.csv.gz", MHEAD + "0,1,100,1\n" * 50, gz=True)).count.tolist() == [50]


def test_rows_are_capped_before_parsing(tmp_path, monkeypatch):
    import topoplan.traffic.limits as limits

    monkeypatch.setattr(limits, "MAX_TRACE_ROWS", 100)
    p = write(tmp_path, "m.csv.gz", MHEAD + "0,1,100,1\n" * 101, gz=True)
    with pytest.raises(TopoplanError, match=r"m\.csv\.gz: 102 lines or more, over the limit of 100 rows"):
        read_matrix(p)
    assert read_matrix(write(tmp_path, "ok.csv", MHEAD + "0,1,100,1\n" * 100)).count.tolist() == [100]


def test_the_limits_are_those_of_generated_traces():
    from topoplan.traffic.limits import MAX_TRACE_ROWS

    assert MAX_TRACE_ROWS == csvtable.MAX_CSV_ROWS == 100_000_000 and csvtable.MAX_CSV_BYTES == 2 ** 30


@pytest.mark.parametrize("data,needle", [
    (MHEAD.encode() + b"0,1,\x00,1\n", r"m\.csv:2: binary data"),
    (MHEAD.encode() + b"0,1,100,1\n0,1,1\xe9,1\n", r"m\.csv:3: not UTF-8 text \(byte 0xe9"),
    (b"\x1f\x8b\x08\x00trunc", r"m\.csv: cannot read communication matrix"),
])
def test_unreadable_files(tmp_path, data, needle):
    with pytest.raises(TopoplanError, match=needle):
        read_matrix(write(tmp_path, "m.csv", data))


# -- 9. a placement for another number of ranks -------------------------------------------------------

@pytest.mark.parametrize("ranks,needle", [
    (64, "places 64 ranks but the traffic has 16 (a placement made for another run?)"),
    (8, "places 8 ranks but the traffic has 16"),
])
def test_placement_rank_count_must_match_the_traffic(tmp_path, ranks, needle):
    from topoplan.core.topology_io import load_topology

    topo = load_topology("paper003")
    for name, text in (("p.csv", "rank,node\n" + "".join(f"{r},{r // 4}\n" for r in range(ranks))),
                       ("p.json", '{"rank_to_node": [%s]}' % ",".join(str(r // 4) for r in range(ranks)))):
        p = write(tmp_path, name, text)
        with pytest.raises(TopoplanError) as e:
            load_placement(str(p), 16, topo)
        assert str(e.value) == f"{p}: {needle}"
    assert load_placement(str(p), ranks, topo).n_ranks == ranks


@pytest.mark.parametrize("text,needle", [
    ("rank,node\n0,1\n0,2\n", r"p\.csv:3: field 'rank': rank 0 again \(first on line 2; a file of 2 rows places "
                              r"ranks 0\.\.1 once each, and rank 1 has no row\)"),
    ("rank,node\n0,1\n5,2\n", r"p\.csv:3: field 'rank': rank 5 in a file of 2 rows; rank 1 has no row"),
    ("rank,node\n0,1\n1,2\n3,1\n", r"p\.csv:4: field 'rank': rank 3 in a file of 3 rows; rank 2 has no row \("),
    ("rank,node\n0,1\n-1,2\n", r"p\.csv:3: field 'rank': rank -1"),
])
def test_placement_ranks_name_the_line(tmp_path, text, needle):
    with pytest.raises(TopoplanError, match=needle):
        read_placement(write(tmp_path, "p.csv", text))


# -- the real inputs still load ------------------------------------------------------------------------

def test_shared_traces_and_matrices_load(shared):
    for d in sorted((shared / "traces").iterdir()):
        if not d.is_dir():
            continue
        t = read_trace(d / "events.csv.gz")
        assert t.n_ranks == 64 and len(t) > 0 and not t.unknown_ops
        for m in sorted(d.glob("*_matrix.csv")):
            assert is_matrix_file(m)
            got = read_matrix(m, 64)
            if m.name == "a2a_matrix.csv":   # src,dst,bytes,calls: a message per call
                rows = np.loadtxt(m, delimiter=",", skiprows=1, dtype=np.int64, ndmin=2)
                off = rows[:, 0] != rows[:, 1]      # total_bytes leaves out a rank's messages to itself
                assert got.count.sum() == rows[:, 3].sum() and got.total_bytes() == rows[off, 2].sum()
    for m in sorted((shared / "matrices" / "maplib").glob("*.csv")):
        assert is_matrix_file(m) and read_matrix(m).n_ranks == 64


def test_numpy_and_csv_module_field_counts_agree(tmp_path, monkeypatch):
    """The NumPy field count (files without quotes) and the csv module's give the same lines and errors,
    and pandas then reads exactly those rows: random text of commas, newlines, spaces and quotes."""
    import random
    from pathlib import Path

    def outcome(scan, data):
        try:
            got = scan(data)
        except TopoplanError as exc:
            return str(exc)
        if got is None:
            return None
        if len(got) == 5:
            names, head, first, end, skipped = got
            lines = np.setdiff1d(np.arange(first, end), np.concatenate(skipped)) if skipped else np.arange(first, end)
            return names, head, lines.tolist()
        return got[0], got[1], got[2].tolist()

    rng = random.Random(17)
    p = tmp_path / "f.csv"
    for trial in range(600):
        monkeypatch.setattr(csvtable, "_CHUNK", rng.choice([1, 3, 8, 1 << 20]))
        m = rng.randint(1, 4)
        text = (rng.choice(["", "\n", " \n", BOM]) + ",".join(f"c{i}" for i in range(m)) + rng.choice(["\n", "\r\n"])
                + "".join(rng.choice(["0", "7", ",", ",", "\n", "\n", " ", "\t", "\r\n", "x"]) for _ in range(30)))
        data = text.encode()
        fast = outcome(lambda d: csvtable._scan_fast(d, Path("f")), data)
        assert fast == outcome(lambda d: csvtable._scan_csv(d, Path("f"), "x"), data), text
        quoted = text + rng.choice(['"', '""', '"a,b"', "\r"]) + "\n"
        p.write_bytes(quoted.encode())
        try:
            read_csv_table(p, (), "x")
        except TopoplanError as exc:
            assert "rows of" not in str(exc) and "tokenizing" not in str(exc), (quoted, str(exc))


def test_a_table_larger_than_memory_is_refused_before_parsing(tmp_path, monkeypatch):
    """60 M rows in 2.5 MB of gzip once took 6.6 GB: the reader now compares its estimate with the memory
    available before pandas allocates (here the memory is made small instead of the file large)."""
    from topoplan.core import memory
    from topoplan.traffic.matrix import read_matrix

    path = tmp_path / "m.csv"
    path.write_text("src,dst,bytes,msgs\n" + "0,1,10,1\n" * 1000)
    monkeypatch.setattr(memory, "_mem_available", lambda: 50_000)
    with pytest.raises(TopoplanError, match=r"1,000 rows of 4 fields need about .* GiB to read, more than the"):
        read_matrix(path)
    monkeypatch.setattr(memory, "_mem_available", lambda: None)   # unknown: no check
    assert read_matrix(path).n_ranks == 2
