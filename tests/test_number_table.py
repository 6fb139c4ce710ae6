"""Small matrices of plain numbers are read without pandas (``csvtable.NumberTable``): the same values, the
same lines and the same messages as pandas' path, on hand-made files, generated ones, random decimals and
the shared real matrices; and a file the fast path does not take for certain is read by pandas."""

from __future__ import annotations

import gzip
import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from topoplan.core import csvtable
from topoplan.core.csvtable import NumberTable, read_csv_table, row_line, to_numbers
from topoplan.core.errors import TopoplanError
from topoplan.traffic.matrix import read_matrix

ROOT = Path(__file__).resolve().parents[1]
MAPLIB = ROOT.parent / "shared" / "matrices" / "maplib"
MHEAD = "src,dst,bytes,msgs\n"
COLS = ("src", "dst", "bytes", "msgs")


def write(tmp_path, text, name="m.csv", gz=False):
    p = tmp_path / name
    data = text.encode("utf-8")
    p.write_bytes(gzip.compress(data) if gz else data)
    return p


def by_pandas(monkeypatch, fn, *args, **kwargs):
    """``fn(*args)`` with the fast path off: every file goes to pandas."""
    with monkeypatch.context() as m:
        m.setattr(csvtable, "SMALL_CSV_BYTES", -1)
        return fn(*args, **kwargs)


def outcome(fn, *args, **kwargs):
    """The result of ``fn(*args)``, or the message of the TopoplanError it raised."""
    try:
        return fn(*args, **kwargs)
    except TopoplanError as exc:
        return f"error: {exc}"


def same_traffic(a, b):
    assert (a.n_ranks, a.name) == (b.n_ranks, b.name)
    for f in ("src", "dst", "msg_bytes", "count"):
        x, y = getattr(a, f), getattr(b, f)
        assert x.dtype == y.dtype and x.tobytes() == y.tobytes(), f   # bit for bit, -0.0 included


def same_tables(path, monkeypatch, columns=COLS):
    """The NumberTable and pandas' DataFrame of ``path``: each column as every reader asks for it, and the lines."""
    fast = read_csv_table(path, (), "communication matrix", numbers=True)
    slow = by_pandas(monkeypatch, read_csv_table, path, (), "communication matrix", numbers=True)
    assert isinstance(fast, NumberTable) and not isinstance(slow, NumberTable)
    assert fast.columns == list(slow.columns) and len(fast) == len(slow)
    assert fast.attrs["header_line"] == slow.attrs["header_line"]
    assert [row_line(fast, i) for i in range(len(fast))] == [row_line(slow, i) for i in range(len(slow))]
    for col in fast.columns:
        for integer in (False, True):
            got, want = (outcome(to_numbers, t, col, path, integer=integer, empty=None) for t in (fast, slow))
            if isinstance(want, str):
                assert got == want, (col, integer)
            else:
                assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), (col, integer)


PLAIN = {
    "ints": MHEAD + "0,1,100,1\n1,0,5,2\n",
    "spaces after commas": "src, dst, bytes, msgs\n0, 1, 100, 1\n1,  0, 5, 2\n",
    "blank lines and CRLF": MHEAD.replace("\n", "\r\n") + "\r\n0,1,100,1\r\n  \r\n\t\n1,0,5,2\r\n",
    "no newline at the end": MHEAD + "0,1,100,1\n1,0,5,2",
    "byte order mark": "\ufeff" + MHEAD + "0,1,100,1\n",
    "decimals and exponents": MHEAD + "0,1,1.5e3,1\n1,0,2.25,2.\n0,2,1E-3,3e0\n2,0,123456789012.345,1\n",
    "leading zeros and signs": MHEAD + "007,-0,0.000125,01\n1,0,-0,1\n",
    "large integers": MHEAD + "0,1,123456789012345678,1\n1,0,999999999999999999,2\n",
    "header not on line 1": "\n\n" + MHEAD + "0,1,100,1\n",
    "calls instead of msgs": "src,dst,bytes,calls\n0,1,100,4\n",
    "no msgs": "src,dst,bytes\n0,1,100\n1,0,3.5\n",
}


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("name", sorted(PLAIN))
def test_a_plain_file_reads_as_pandas_reads_it(tmp_path, monkeypatch, name, gz):
    path = write(tmp_path, PLAIN[name], gz=gz)
    cols = [c.strip() for c in PLAIN[name].lstrip("\ufeff\n").splitlines()[0].split(",")]
    same_tables(path, monkeypatch, cols)
    fast, slow = outcome(read_matrix, path), by_pandas(monkeypatch, outcome, read_matrix, path)
    if isinstance(slow, str):
        assert fast == slow
    else:
        same_traffic(fast, slow)


# cells the fast path leaves to pandas: not plain numbers, or numbers whose parse it does not vouch for
DECLINED = ["", " ", "x", "nan", "NaN", "inf", "-inf", "True", "+5", "5 ", "\t5", "0x10", "1_000", "1e400", "1e-400",
            ".5", "1.2345678901234567", "12345678901234567.0", "1e23", "1e-23", "12345678901234567890",
            "٣", "1,5"]


@pytest.mark.parametrize("cell", DECLINED)
def test_other_cells_go_to_pandas(tmp_path, cell):
    path = write(tmp_path, MHEAD + f"0,1,{cell},1\n")
    try:
        table = read_csv_table(path, (), "communication matrix", numbers=True)
    except TopoplanError:
        return   # a structural error ('1,5': a field more), raised before any parsing
    assert not isinstance(table, NumberTable), cell


@pytest.mark.parametrize("body,needle", [
    ("0,1.5,100,1\n", r"m\.csv:2: field 'dst': not an integer: '1\.5'$"),
    ("0,1e20,100,1\n", r"m\.csv:2: field 'dst': 1e\+20 is out of range$"),
    ("0,1,-100,1\n", r"m\.csv:2: field 'bytes': must be non-negative, got -100\.0$"),
    ("0,1,100,1\n-2,0,5,1\n", r"m\.csv:3: field 'src': must be non-negative, got -2$"),
    ("0,1,100,0\n", r"m\.csv:2: field 'msgs': 0 messages cannot carry 100 bytes$"),
    ("0,1,100,2e12\n", r"m\.csv:2: field 'msgs': 2e\+12 is over the limit of 1,099,511,627,776 messages$"),
    ("0,1,2e18,1\n", r"m\.csv:2: field 'bytes': 2e\+18 is over the limit of 1,152,921,504,606,846,976 bytes$"),
    ("0,1,100,1\n\n0,99999999,5,1\n", r"m\.csv:4: field 'dst': 1e\+08 is over the limit of 16,777,216 ranks$"),
    ("0,1,100,1\n1,x,5,1\n", r"m\.csv:3: field 'dst': not a number: 'x'$"),
    ("0,1,,1\n", r"m\.csv:2: field 'bytes': empty$"),
    ("0,1,1e400,1\n", r"m\.csv:2: field 'bytes': not a finite number: inf$"),
    ("0,1,100\n", r"m\.csv:2: 3 fields, the header has 4 \(a row cut short\?\)$"),
])
def test_errors_are_pandas_paths_word_for_word(tmp_path, monkeypatch, body, needle):
    path = write(tmp_path, MHEAD + body)
    with pytest.raises(TopoplanError, match=needle) as fast:
        read_matrix(path)
    with pytest.raises(TopoplanError) as slow:
        by_pandas(monkeypatch, read_matrix, path)
    assert str(fast.value) == str(slow.value)


def test_a_rank_outside_the_communicator_names_its_line(tmp_path, monkeypatch):
    path = write(tmp_path, MHEAD + "0,1,100,1\n\n1,2,5,1\n")
    with pytest.raises(TopoplanError, match=r"m\.csv:4: field 'dst': rank 2 is outside the communicator of 2 ranks"):
        read_matrix(path, n_ranks=2)
    assert by_pandas(monkeypatch, outcome, read_matrix, path, n_ranks=2) == outcome(read_matrix, path, n_ranks=2)


def test_random_decimals_are_the_values_pandas_parses(tmp_path, monkeypatch):
    """Decimals of up to 15 digits times 10^-22..10^22, as plain, fraction and exponent forms: bit for bit."""
    rng = random.Random(7)
    cells = []
    for _ in range(3000):
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 15)))
        cut = rng.randint(1, len(digits))
        whole, frac = digits[:cut], digits[cut:]
        cell = whole + ("." + frac if frac or rng.random() < 0.2 else "")
        room = 22 + len(frac)
        if rng.random() < 0.6:
            cell += rng.choice("eE") + str(rng.randint(-22 + len(frac), min(22 + len(frac), room)))
        cells.append(("-" if rng.random() < 0.3 else "") + cell)
    path = write(tmp_path, "src,dst,bytes\n" + "".join(f"0,1,{c}\n" for c in cells))
    fast = read_csv_table(path, (), "communication matrix", numbers=True)
    assert isinstance(fast, NumberTable)   # every cell is one the fast path vouches for
    slow = by_pandas(monkeypatch, read_csv_table, path, (), "communication matrix", numbers=True)
    got = to_numbers(fast, "bytes", path, integer=False)
    want = to_numbers(slow, "bytes", path, integer=False)
    assert got.tobytes() == want.tobytes()
    assert got.tolist() == [float(c) for c in cells]


@pytest.mark.parametrize("spec", ["ring:np=8,bytes=1MB,iters=2", "random:np=64,bytes=1MB,msgs=500,seed=3",
                                  "neighbor2d:rows=8,cols=8,bytes=3.5MB,iters=7"])
def test_generated_matrices_read_back_the_same_both_ways(tmp_path, monkeypatch, spec):
    from topoplan.traffic.sources import load_traffic

    path = tmp_path / "m.csv"
    load_traffic(spec).write_matrix(path)
    same_tables(path, monkeypatch)
    same_traffic(read_matrix(path), by_pandas(monkeypatch, read_matrix, path))


@pytest.mark.skipif(not MAPLIB.is_dir(), reason="the shared MapLib matrices are absent")
@pytest.mark.parametrize("app", ["amg64", "btmz64", "cg64", "lulesh64"])
def test_the_shared_maplib_matrices_read_the_same_both_ways(monkeypatch, app):
    path = MAPLIB / f"{app}.csv"
    same_tables(path, monkeypatch)
    same_traffic(read_matrix(path), by_pandas(monkeypatch, read_matrix, path))


def test_a_large_file_goes_to_pandas(tmp_path, monkeypatch):
    path = write(tmp_path, MHEAD + "0,1,100,1\n" * 10)
    monkeypatch.setattr(csvtable, "SMALL_CSV_BYTES", path.stat().st_size - 1)
    assert not isinstance(read_csv_table(path, (), "communication matrix", numbers=True), NumberTable)


def test_placing_from_a_matrix_imports_neither_pandas_nor_rich(tmp_path):
    """``place -T matrix.csv --json``: the matrix is read without pandas (nor the pyarrow it loads), and
    progress is not drawn in a pipe, so rich is not imported; the plan is the one written from pandas' table."""
    matrix, out = tmp_path / "m.csv", tmp_path / "place.json"
    from topoplan.traffic.sources import load_traffic

    load_traffic("random:np=16,bytes=1MB,msgs=200,seed=2").write_matrix(matrix)
    cmd = [sys.executable, "-X", "importtime", "-m", "topoplan", "place", "-t", "paper003", "--set", "kind=tree",
           "--set", "ocs=null", "-T", str(matrix), "-m", "metis", "--json", "-o", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    mods = {line.rsplit("|", 1)[1].strip().split(".")[0] for line in proc.stderr.splitlines()
            if line.startswith("import time:")}
    assert not mods & {"pandas", "pyarrow", "rich"}, sorted(mods & {"pandas", "pyarrow", "rich"})
    assert json.loads(proc.stdout)["rank_to_node"] == json.loads(out.read_text())["rank_to_node"]
    assert np.asarray(json.loads(out.read_text())["rank_to_node"]).size == 16


@pytest.mark.parametrize("rows", [
    ["0,1.5e-06,2", "1.5e-06,0,5", "2,5,0"],
    ["0, 1, 2", "", "1, 0, 5", "2, 5, 0"],
    ["0,1,2", "1,0,-5", "2,5,0"],        # a negative delay: the reader's own message
    ["0,1,2", "1,0,0.5", "2,5,0"],
    ["0,1,2", "1,0,x", "2,5,0"],         # pandas' path
    ["0,1", "1,0", "2,5"],               # fewer columns than rows
])
def test_a_delay_matrix_reads_the_same_both_ways(tmp_path, monkeypatch, rows):
    from topoplan.core.topology_io import load_topology
    from topoplan.problems.bcast.delay import load

    topo = load_topology("paper003")
    hosts = topo.host_names()
    width = len(rows[0].split(","))
    path = write(tmp_path, ",".join(hosts[:width]) + "\n" + "\n".join(rows) + "\n", name="d.csv")
    fast, slow = outcome(load, path, topo, [0, 1, 2]), by_pandas(monkeypatch, outcome, load, path, topo, [0, 1, 2])
    if isinstance(slow, str):
        assert fast == slow
    else:
        assert fast.tobytes() == slow.tobytes()
