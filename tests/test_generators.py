from collections import Counter

import numpy as np
import pytest

from topoplan.core.errors import TopoplanError
from topoplan.traffic.builder import TraceBuilder
from topoplan.traffic.generators import (GENERATORS, alltoall, describe_generators, is_spec, neighbor2d, parse_spec,
                                         random, ring)
from topoplan.traffic.trace import op_codes
from topoplan.traffic.matrix import from_trace


def sends(tr):
    m = np.isin(tr.op, op_codes(("send", "isend")))
    return Counter(zip(tr.rank[m].tolist(), tr.peer[m].tolist(), tr.bytes[m].tolist()))


def recvs(tr):
    m = np.isin(tr.op, op_codes(("recv", "irecv")))
    return Counter(zip(tr.peer[m].tolist(), tr.rank[m].tolist(), tr.bytes[m].tolist()))


def test_neighbor2d_16x16_volume():
    tr = parse_spec("neighbor2d:rows=16,cols=16,bytes=4MB,iters=5")
    assert tr.n_ranks == 256 and tr.source == "neighbor2d:rows=16,cols=16,bytes=4MB,iters=5"
    s = sends(tr)
    assert s == recvs(tr)
    assert sum(b * k for (_, _, b), k in s.items()) == 2 * (16 * 15 * 2) * 4e6 * 5
    degree = Counter(a for (a, _, _), k in s.items() for _ in range(k))
    assert degree[0] == degree[15] == degree[240] == degree[255] == 2 * 5   # corners
    assert degree[1] == degree[16] == degree[31] == 3 * 5                    # edges
    assert degree[17] == 4 * 5 and min(degree.values()) == 10


def test_neighbor2d_pattern_and_call_order():
    tr = neighbor2d(3, 4, 1000, iters=2)
    s = sends(tr)
    assert {(5, q) for q in (1, 9, 4, 6)} <= {(a, b) for a, b, _ in s}
    assert (3, 4, 1000.0) not in s and (4, 3, 1000.0) not in s  # no wrap between rows
    assert sum(s.values()) == 2 * (3 * 3 + 2 * 4) * 2
    ops = tr.op_names()[tr.rank == 0].tolist()
    assert ops == ["irecv", "irecv", "isend", "isend", "waitall"] * 2
    assert tr.peer[tr.rank == 5][:4].tolist() == [1, 9, 4, 6]  # up, down, left, right


def test_matrix_rows_via_traffic():
    t = from_trace(parse_spec("neighbor2d:rows=2,cols=2,bytes=1KB,iters=3"))
    s, d, b, m = t.matrix()
    rows = {(a, c): (x, y) for a, c, x, y in zip(s.tolist(), d.tolist(), b.tolist(), m.tolist())}
    assert len(rows) == 8 and rows[(0, 1)] == (3000, 3) and (0, 3) not in rows


def test_ring_random_alltoall():
    tr = ring(5, 64, iters=3)
    assert sends(tr) == recvs(tr)
    assert {(a, b) for a, b, _ in sends(tr)} == {(r, (r + 1) % 5) for r in range(5)}
    a, b = random(16, 100, msgs=40, seed=3), random(16, 100, msgs=40, seed=3)
    assert sends(a) == sends(b) == recvs(a) and sum(sends(a).values()) == 40
    assert all(x != y for x, y, _ in sends(a))
    assert sends(random(16, 100, msgs=40, seed=4)) != sends(a)
    assert sum(sends(random(16, 100, seed=1, iters=2)).values()) == 32  # msgs default: np per iteration
    tr = alltoall(6, 2e6, iters=2)
    assert len(tr) == 12 and set(tr.peer.tolist()) == {-1}
    m = from_trace(tr).dense()
    off = ~np.eye(6, dtype=bool)
    assert np.allclose(m[off], 2 * 2e6) and np.allclose(np.diag(m), 0)


def test_compute_gaps_and_builder_repeat():
    tr = parse_spec("ring:np=3,bytes=8,iters=3,compute=0.5")
    r0 = tr.rank == 0
    starts = tr.t_start[r0]
    assert np.allclose(np.diff(starts[::3]), 0.5 + 3e-9)  # one iteration = 3 calls + 0.5 s of computation
    b = TraceBuilder(3)
    m = b.mark()
    b.add([0, 0, 2], "isend", [1, 2, 0], 8)  # rank 0 makes two calls, in list order
    b.add([1, 2, 0], "waitall")
    b.repeat(m, 4)
    t = b.build("x")
    assert t.op_names()[t.rank == 0].tolist() == ["isend", "isend", "waitall"] * 4
    assert t.peer[t.rank == 0][:2].tolist() == [1, 2]
    m = b.mark()
    b.add([0, 1, 2], "barrier")
    b.repeat(m, 0)  # zero times removes the block
    assert len(b.build("x")) == 24


def test_spec_parsing_and_errors():
    assert is_spec("ring:np=4,bytes=1KB") and is_spec("npb") and is_spec("NPB:kernel=cg")
    assert not is_spec("foo.csv") and not is_spec("x:np=1") and not is_spec("ringx")
    assert parse_spec("alltoall:np=4,bytes=1MiB").bytes[0] == 2 ** 20
    with pytest.raises(TopoplanError, match=r"traffic spec 'neighbor2d': unknown parameter 'colz' "
                                            r"\(known: rows, cols, bytes, iters, compute\)"):
        parse_spec("neighbor2d:rows=2,colz=3,bytes=1KB")
    with pytest.raises(TopoplanError, match="'neighbor2d': missing parameter 'cols'"):
        parse_spec("neighbor2d:rows=2,bytes=1KB")
    with pytest.raises(TopoplanError, match="'ring': parameter 'np': bad value 'four'"):
        parse_spec("ring:np=four,bytes=1KB")
    with pytest.raises(TopoplanError, match="'ring': parameter 'bytes': bad value 'lots'"):
        parse_spec("ring:np=4,bytes=lots")
    with pytest.raises(TopoplanError, match="'ring': parameter 'np' given twice"):
        parse_spec("ring:np=4,np=5,bytes=1")
    with pytest.raises(TopoplanError, match="'ring': expected key=value, got 'np'"):
        parse_spec("ring:np,bytes=1")
    with pytest.raises(TopoplanError, match="'ring': parameter 'np' must be at least 2"):
        parse_spec("ring:np=0,bytes=1")
    with pytest.raises(TopoplanError, match="'ring': parameter 'compute': must be non-negative"):
        parse_spec("ring:np=2,bytes=1,compute=-1")
    with pytest.raises(TopoplanError, match=r"unknown traffic generator 'ringg' \(known: neighbor2d"):
        parse_spec("ringg:np=4")
    with pytest.raises(TopoplanError, match="traffic spec 'npb': npb cg: field 'class'"):
        parse_spec("npb:kernel=cg,class=Q,np=4")
    with pytest.raises(TopoplanError, match="traffic spec 'npb': npb cg: field 'np'"):
        parse_spec("npb:kernel=cg,np=6")


def test_npb_spec_forwards_and_describe():
    tr = parse_spec("npb:kernel=cg,class=S,np=8,iters=1")
    assert tr.n_ranks == 8 and tr.source == "npb:kernel=cg,class=S,np=8,iters=1"
    assert parse_spec("npb:kernel=lu,class=S,np=4").op_counts()["barrier"] == 8  # class default itmax
    text = describe_generators()
    for name, g in GENERATORS.items():
        assert name in text and all(k in text for k in g.params)
    assert "neighbor2d:rows=<int>,cols=<int>,bytes=<size>[,iters=1,compute=0.0]" in text
    fn, params, _ = GENERATORS["neighbor2d"]
    assert fn is neighbor2d and params["bytes"].kind == "size" and params["compute"].arg == "compute_s"
    assert {p.kind for g in GENERATORS.values() for p in g.params.values()} <= {"int", "size", "time", "float",
                                                                               "str", "bool"}
    assert params["compute"].kind == "time"


TIMED = sorted(name for name, g in GENERATORS.items() if "compute" in g.params)
SPEC = {"neighbor2d": "neighbor2d:rows=2,cols=3,bytes=1KB,iters=2", "alltoall": "alltoall:np=4,bytes=1KB,iters=2",
        "ring": "ring:np=4,bytes=1KB,iters=2", "random": "random:np=4,bytes=1KB,iters=2",
        "transpose": "transpose:rows=2,cols=2,bytes=1KB,iters=2", "npb": "npb:kernel=cg,class=S,np=4,iters=1"}


def test_every_time_or_size_parameter_takes_units():
    """A parameter that is a time or a size is read with units (docs/inputs.md: units everywhere)."""
    for name, g in GENERATORS.items():
        for key, p in g.params.items():
            if p.arg.endswith("_s"):
                assert p.kind == "time", (name, key)
            if "bytes" in key or p.arg.endswith("_B"):
                assert p.kind == "size", (name, key)
    assert set(TIMED) <= set(SPEC)


@pytest.mark.parametrize("name", TIMED)
@pytest.mark.parametrize("with_unit, seconds", [("1ms", "0.001"), ("250us", "0.00025"), ("2 s", "2"),
                                                ("0ns", "0")])
def test_compute_takes_time_units(name, with_unit, seconds):
    """compute= took only a bare number of seconds ('1ms': bad value (expected float)); a unit now gives the
    same trace as the number of seconds."""
    a, b = parse_spec(f"{SPEC[name]},compute={with_unit}"), parse_spec(f"{SPEC[name]},compute={seconds}")
    assert np.array_equal(a.t_start, b.t_start) and np.array_equal(a.t_end, b.t_end)
    assert a.source == f"{SPEC[name]},compute={with_unit}"


@pytest.mark.parametrize("value, needle", [
    ("-1ms", r"parameter 'compute': must be non-negative, got '-1ms'"),
    ("3d", r"parameter 'compute': bad value '3d' \(expected time\)"),
    ("1e999", r"parameter 'compute': bad value '1e999' \(expected time\)"),
    ("1_0ms", r"parameter 'compute': bad value '1_0ms' \(expected time\)"),
    ("", r"parameter 'compute': bad value '' \(expected time\)"),
])
def test_compute_bad_times_name_the_parameter(value, needle):
    with pytest.raises(TopoplanError, match=r"^traffic spec 'ring': " + needle):
        parse_spec(f"ring:np=4,bytes=1KB,compute={value}")


def test_compute_with_a_unit_on_the_command_line(tmp_path, monkeypatch, run_cli):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli("traffic", "-T", "ring:np=4,bytes=1MB,compute=1ms", "--trace", "-o", "r.csv")
    assert code == 0, err
    code, _, err = run_cli("traffic", "-T", "ring:np=4,bytes=1MB,compute=1 week", "--trace", "-o", "s.csv")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "traffic spec 'ring': parameter 'compute': bad value '1 week' (expected time)" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.csv"]


@pytest.mark.parametrize("spec, field", [("halo-transpose:rows=4,cols=4,bytes=1MB,iters=0", "iters"),
                                         ("halo-transpose:rows=0,cols=0,bytes=1MB", "rows")])
def test_halo_transpose_errors_name_its_own_spec(spec, field):
    """A bad halo-transpose spec was reported as a bad 'neighbor2d' spec, a generator the user never named."""
    with pytest.raises(TopoplanError, match=rf"^traffic spec 'halo-transpose': parameter '{field}' must be at least 1"):
        parse_spec(spec)


# A valid spec of each generator, to set one parameter wrong in.
VALID_SPECS = {"neighbor2d": "rows=2,cols=2,bytes=1KB", "alltoall": "np=4,bytes=1KB", "ring": "np=4,bytes=1KB",
               "random": "np=4,bytes=1KB", "transpose": "rows=2,cols=2,bytes=1KB",
               "halo-transpose": "rows=2,cols=2,bytes=1KB", "npb": "kernel=cg,class=S,np=4"}
# The least value each generator takes for its counts (its own checks; 0 for the other numbers).
LEAST = [("neighbor2d", "rows", 1), ("neighbor2d", "cols", 1), ("neighbor2d", "iters", 1), ("alltoall", "np", 1),
         ("alltoall", "iters", 1), ("ring", "np", 2), ("ring", "iters", 1), ("random", "np", 2),
         ("random", "iters", 1), ("transpose", "rows", 1), ("transpose", "cols", 1), ("transpose", "iters", 1),
         ("halo-transpose", "rows", 1), ("halo-transpose", "cols", 1), ("halo-transpose", "iters", 1),
         ("npb", "np", 1), ("npb", "iters", 1)]


def _spec_with(name, key, value):
    """The valid spec of ``name`` with ``key`` set to ``value``."""
    given = dict(kv.split("=") for kv in VALID_SPECS[name].split(","))
    given[key] = value
    return f"{name}:" + ",".join(f"{k}={v}" for k, v in given.items())


def test_every_generator_has_a_valid_spec_here():
    assert set(VALID_SPECS) == set(GENERATORS)


@pytest.mark.parametrize("name, key, least", LEAST)
@pytest.mark.parametrize("below", [1, 9])
def test_a_number_below_a_generators_least_names_that_least(name, key, least, below):
    """ring:np=-8 and npb iters=-1 said 'must be non-negative' (a generic check ran first) where the generator
    takes at least 2 and 1: the message names the generator's own least value, for a negative number too."""
    value = least - below
    with pytest.raises(TopoplanError, match=rf"^traffic spec '{name}': parameter '{key}' must be at least "
                                            rf"{least:g}, got {value}$"):
        parse_spec(_spec_with(name, key, value))


@pytest.mark.parametrize("name, key, least", LEAST)
def test_a_generators_least_is_its_own(name, key, least):
    """The least a spec may give is the least the generator itself takes: a spec at it passes the spec's check,
    and the generator called directly refuses one below it."""
    from topoplan.traffic.generators import _parse

    _, kwargs = _parse(_spec_with(name, key, f"{least:g}"))
    fn, params, _ = GENERATORS[name]
    with pytest.raises(TopoplanError, match=f"at least {least:g}|positive integer"):
        fn(**{**kwargs, params[key].arg: least - 1})
