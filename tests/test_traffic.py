import json

import numpy as np
import pytest

from topoplan.core.errors import TopoplanError
from topoplan.traffic.matrix import from_arrays, read_matrix
from topoplan.traffic.sources import load_source


def test_matrix_rows_add_up_and_average_size(tmp_path):
    p = tmp_path / "m.csv"
    p.write_text("src,dst,bytes,msgs\n0,1,100,1\n0,1,300,3\n1,0,50,1\n2,2,10,1\n")
    t = read_matrix(p)
    s, d, b, m = t.matrix()
    assert list(zip(s.tolist(), d.tolist(), b.tolist(), m.tolist())) == [(0, 1, 400, 4), (1, 0, 50, 1), (2, 2, 10, 1)]
    assert t.msg_bytes[(t.src == 0) & (t.dst == 1)][0] == 100
    assert t.total_bytes() == 450  # self-messages stay out


@pytest.mark.parametrize("body,needle", [
    ("0,1,-5,1\n", "m.csv:2: field 'bytes'"),
    ("0,x,5,1\n", "m.csv:2: field 'dst': not a number"),
    ("0,1,5,1\n0,9,5,1\n", "m.csv:3: field 'dst': rank 9 is outside the communicator of 4 ranks"),
    ("0,1,5,1\n1,0,1e400,1\n", "m.csv:3: field 'bytes': not a finite number"),
    # a row cut short (a truncated file) is a field count error, never a row with defaults
    ("0,1,5,1\n0,2,10", "m.csv:3: 3 fields, the header has 4 (a row cut short?)"),
    ("0,1,5,1\n0,2", "m.csv:3: 2 fields, the header has 4"),
    ("0,1,5,1\n0,2,10,\n", "m.csv:3: field 'msgs': empty"),
])
def test_matrix_errors(tmp_path, body, needle):
    p = tmp_path / "m.csv"
    p.write_text("src,dst,bytes,msgs\n" + body)
    with pytest.raises(TopoplanError) as e:
        read_matrix(p, n_ranks=4)
    assert needle in str(e.value)


def test_matrix_write_roundtrip(tmp_path):
    t = from_arrays(3, [0, 0, 1], [1, 1, 2], [10, 10, 5], [1, 2, 1])
    p = tmp_path / "o.csv"
    t.write_matrix(p)
    u = read_matrix(p)
    assert np.array_equal(u.dense(), t.dense())


def test_maplib_matrices_load(shared):
    for name in ("amg64", "btmz64", "cg64", "lulesh64"):
        t = read_matrix(shared / "matrices" / "maplib" / f"{name}.csv")
        assert t.n_ranks == 64 and t.total_bytes() > 0


def test_trace_p2p_matrix_agrees_with_trace(shared):
    """The CG trace's explicit sends equal its p2p_matrix.csv, pair by pair."""
    from topoplan.traffic.trace import op_codes, read_trace

    d = shared / "traces" / "CG.C.64"
    tr = read_trace(d / "events.csv.gz")
    send = np.isin(tr.op, op_codes(("send", "isend"))) & (tr.peer >= 0)
    mine = from_arrays(64, tr.rank[send], tr.peer[send], tr.bytes[send]).dense()
    ref = read_matrix(d / "p2p_matrix.csv", 64).dense()
    assert np.allclose(mine, ref)


def test_unknown_traffic_spec():
    with pytest.raises(TopoplanError, match="not a file and not a generator spec"):
        load_source("bogus-thing")
    with pytest.raises(TopoplanError, match="no such traffic file"):
        load_source("missing/file.csv")


def test_empty_matrix_is_explained(tmp_path):
    from topoplan.traffic.sources import load_source

    p = tmp_path / "p2p_matrix.csv"
    p.write_text("src,dst,bytes,msgs\n")
    with pytest.raises(TopoplanError, match="no rows.*MPI trace"):
        load_source(str(p))


@pytest.mark.parametrize("gz", [False, True])
def test_empty_trace_names_the_file(tmp_path, gz):
    import gzip

    # a header alone: the error was about an empty placement ('sequential'), naming no file
    text = b"rank,op,peer,bytes,root,comm_size,t_start,t_end\n"
    p = tmp_path / ("events.csv.gz" if gz else "events.csv")
    p.write_bytes(gzip.compress(text) if gz else text)
    with pytest.raises(TopoplanError, match=r"events\.csv(\.gz)?: the trace has no rows"):
        load_source(str(p))


def test_directory_without_a_trace_says_so(tmp_path):
    with pytest.raises(TopoplanError, match="a directory without events.csv.gz, events.csv or traces.otf2"):
        load_source(str(tmp_path))


@pytest.mark.parametrize("spec", [5, None, ["ring:np=4"], "", "  "])
@pytest.mark.parametrize("reader", ["load_source", "load_traffic"])
def test_a_spec_that_is_not_text_is_refused_naming_the_field(reader, spec):
    """Once a TypeError from pathlib (or, for '', a message about the working directory)."""
    import topoplan.traffic.sources as sources

    with pytest.raises(TopoplanError, match=r"field 'spec': expected a generator spec or a traffic file name"):
        getattr(sources, reader)(spec)


def test_a_json_file_as_traffic_says_what_it_is(tmp_path):
    """A plan or placement given as -T was read as a CSV: 'malformed CSV: ',' expected after '"''."""
    from topoplan.traffic.sources import load_source

    path = tmp_path / "placement"
    path.write_text('{"rank_to_node": [0, 1]}\n')
    with pytest.raises(TopoplanError, match=r"placement: a JSON document \(a plan or placement\?\), not traffic"):
        load_source(str(path))
