"""Atomic output (topoplan/core/io.py)."""

import gzip
import json
import os
import re
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from topoplan.core.errors import TopoplanError
from topoplan.core.io import atomic_write, read_json, write_json


def test_new_file_gets_umask_permissions_not_mkstemp_0600(tmp_path):
    old = os.umask(0o022)
    try:
        atomic_write(tmp_path / "hosts.txt", "node1\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "hosts.txt").stat().st_mode) == 0o644


def test_rewrite_keeps_existing_permissions_and_leaves_no_temp(tmp_path):
    p = tmp_path / "rankfile"
    p.write_text("old\n")
    p.chmod(0o640)
    atomic_write(p, "rank 0=node1 slot=0\n")
    assert p.read_text() == "rank 0=node1 slot=0\n"
    assert stat.S_IMODE(p.stat().st_mode) == 0o640
    assert [f.name for f in tmp_path.iterdir()] == ["rankfile"]


def test_gz_suffix_compresses_and_json_round_trips(tmp_path):
    write_json(tmp_path / "plan.json.gz", {"seed": 3, "order": [2, 0, 1]})
    assert gzip.decompress((tmp_path / "plan.json.gz").read_bytes()).startswith(b"{")
    write_json(tmp_path / "plan.json", {"seed": 3})
    assert read_json(tmp_path / "plan.json")["seed"] == 3


def test_missing_directory_is_a_clear_error(tmp_path):
    with pytest.raises(TopoplanError, match="does not exist"):
        atomic_write(tmp_path / "nope" / "x.txt", "x")


@pytest.mark.parametrize("below", ["x.json", "sub/x.json"])
def test_a_file_where_the_directory_should_be_is_named(tmp_path, below):
    """`-o results.csv/x.json` said "directory results.csv does not exist": it exists, as a file."""
    (tmp_path / "results.csv").write_text("a\n1\n")
    with pytest.raises(TopoplanError, match=rf"^{re.escape(str(tmp_path / 'results.csv'))}/{below}: "
                                            rf"{re.escape(str(tmp_path / 'results.csv'))} is a file, not a directory$"):
        atomic_write(tmp_path / "results.csv" / below, "x")
    assert (tmp_path / "results.csv").read_text() == "a\n1\n"


def test_write_errors_are_one_line_naming_the_path(tmp_path):
    with pytest.raises(TopoplanError, match="is a directory"):
        atomic_write(tmp_path, "x")
    with pytest.raises(TopoplanError, match="does not exist"):
        atomic_write(tmp_path / "no" / "x.json", "x")
    (tmp_path / "ro").mkdir()
    (tmp_path / "ro").chmod(0o500)
    try:
        if os.geteuid() != 0:  # root may write anyway
            with pytest.raises(TopoplanError, match="permission denied"):
                atomic_write(tmp_path / "ro" / "x.json", "x")
    finally:
        (tmp_path / "ro").chmod(0o700)


def test_read_text_names_the_file_and_line(tmp_path):
    from topoplan.core.io import read_text

    (tmp_path / "bin").write_bytes(b"\x00\x01\x02abc")
    with pytest.raises(TopoplanError, match="binary data, not a text hostfile"):
        read_text(tmp_path / "bin", "hostfile")
    (tmp_path / "latin1").write_bytes(b"node1\nn\xe9ud2\n")
    with pytest.raises(TopoplanError, match=r"latin1:2: not UTF-8 text \(byte 0xe9"):
        read_text(tmp_path / "latin1", "hostfile")
    assert read_text(tmp_path / "latin1", "dump", lenient=True).splitlines()[1] == "n\ufffdud2"
    with pytest.raises(TopoplanError, match="no such hostfile"):
        read_text(tmp_path / "missing", "hostfile")
    # a directory exists: it was "no such hostfile", and the user looked for a missing file
    (tmp_path / "adir").mkdir()
    with pytest.raises(TopoplanError, match=r"adir: is a directory, not a file \(expected: hostfile\)$"):
        read_text(tmp_path / "adir", "hostfile")


@pytest.mark.parametrize("obj", [
    {"plan": {"circuits": [[0, 16], [1, 17]], "next_hop": np.arange(12).reshape(4, 3) - 1, "seed": 0}},
    {"a": [], "b": {}, "c": [[]], "d": [{"x": 1.5}, {"y": None}], 3: True, None: "n", 2.5: [1e300]},
    [np.arange(3), np.float64(0.25), np.int64(7), np.bool_(False), "é"],
    [[[1, 2], [3]], [[4]]],
])
def test_dumps_layout_is_the_same_json(obj):
    """The row-per-line layout holds exactly what json.dumps would write (keys converted the same way)."""
    from topoplan.core.io import _default, dumps

    assert json.loads(dumps(obj)) == json.loads(json.dumps(obj, default=_default, indent=1))
    assert json.loads(dumps(obj, indent=None)) == json.loads(dumps(obj))


def test_dumps_keeps_rows_on_one_line():
    from topoplan.core.io import dumps

    text = dumps({"next_hop": np.arange(6).reshape(2, 3)})
    assert text.splitlines() == ["{", ' "next_hop": [', "  [0, 1, 2],", "  [3, 4, 5]", " ]", "}"]


def test_dumps_puts_each_row_of_a_keyed_table_on_one_line():
    from topoplan.core.io import dumps

    doc = {"forwarding": {"0": {"1": 5, "2": 6}, "3": {"1": 7}}, "metrics": {"a": 1, "b": 2}}
    text = dumps(doc)
    assert ' "forwarding": {' in text and '  "0": {"1": 5, "2": 6},' in text and '  "3": {"1": 7}' in text
    assert '  "a": 1,' in text          # an object of scalars that is no table keeps a member per line
    assert json.loads(text) == doc



@pytest.mark.parametrize("flows", [
    [{"id": 0, "finish_s": 0.5}, {"id": "f1", "finish_s": 1e-300}],
    [{"id": 'a, "b"}, {"c', "ok": True, "x": None}, {"}, {": "\n, \"", "y": np.float64(0.25), "z": np.int64(7)}],
    [{"a": 1}, {}],                      # an empty object: the general layout
])
def test_dumps_lays_out_a_list_of_flat_objects_as_indented_json(flows):
    """A list of objects of scalars (a simulation's flows) is written in one compiled call, then indented:
    the text is exactly the indented JSON, whatever separators, quotes or newlines the strings hold."""
    from topoplan.core.io import _default, dumps

    doc = {"flows": flows, "makespan_s": 1.0}
    assert dumps(doc) == json.dumps(doc, default=_default, indent=1)
    assert dumps([doc], indent=2) == json.dumps([doc], default=_default, indent=2)


def test_dumps_of_plain_values_does_not_import_numpy(tmp_path):
    """A document without arrays is written without NumPy (a small command's start-up)."""
    code = ("import sys; from pathlib import Path; from topoplan.core.io import dumps; "
            "dumps({'a': [{'p': Path('x'), 'q': 1.5}], 'b': [[1, 2]]}); print('numpy' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"

# -- issue 36: every gzip input is decompressed as a stream, with a bound ----------------------------------------

def _gzip_bomb(path, decompressed, head=b"{"):
    """A gzip file of ``decompressed`` bytes (spaces after ``head``) in a few hundred KB: members of 16 MiB,
    each compressed once, repeated."""
    block = 1 << 24
    member = gzip.compress(b" " * block, compresslevel=9)
    with open(path, "wb") as fh:
        fh.write(gzip.compress(head))
        for _ in range(-(-decompressed // block)):
            fh.write(member)
    return path


@pytest.mark.parametrize("args", [["validate", "{p}", "-t", "paper003"],
                                  ["export", "ompi4", "-p", "{p}", "-t", "paper003", "-o", "{d}/rf"],
                                  ["simulate", "--flows", "{p}"]])
def test_gzip_bomb_is_refused_while_streaming(tmp_path, run_cli, args):
    """Once 70 s and 5.6 GB before the refusal: now the input stops at MAX_INPUT_BYTES once decompressed."""
    from topoplan.core.io import MAX_INPUT_BYTES

    bomb = _gzip_bomb(tmp_path / "plan.json.gz", MAX_INPUT_BYTES + (1 << 24))
    assert bomb.stat().st_size < 1 << 20
    code, _, err = run_cli(*[a.format(p=bomb, d=tmp_path) for a in args])
    assert code == 2 and f"{bomb}: more than {MAX_INPUT_BYTES:,} bytes once decompressed, over the limit" in err
    assert len(err.strip().splitlines()) == 1 and sorted(p.name for p in tmp_path.iterdir()) == ["plan.json.gz"]


def test_one_reader_for_every_gzip_input(tmp_path, monkeypatch):
    """JSON documents, CSV tables and the traffic sniffer all read through core.io.read_bytes: a bound set there
    holds for each (and a CSV's own bound, MAX_CSV_BYTES, is passed to it)."""
    import topoplan.core.csvtable as csvtable
    import topoplan.core.io as io_mod
    from topoplan.sim.flowfile import load_scenario
    from topoplan.traffic.matrix import read_matrix
    from topoplan.traffic.sources import is_matrix_file

    monkeypatch.setattr(io_mod, "MAX_INPUT_BYTES", 1 << 20)
    monkeypatch.setattr(csvtable, "MAX_CSV_BYTES", 1 << 20)
    doc = _gzip_bomb(tmp_path / "d.json.gz", 1 << 24)
    for read in (read_json, load_scenario):
        with pytest.raises(TopoplanError, match=r"d\.json\.gz: more than 1,048,576 bytes once decompressed"):
            read(doc)
    table = _gzip_bomb(tmp_path / "m.csv.gz", 1 << 24, head=b"src,dst,bytes,msgs\n")
    assert is_matrix_file(table)   # its header, from the first MiB only
    with pytest.raises(TopoplanError, match=r"m\.csv\.gz: more than 1,048,576 bytes once decompressed"):
        read_matrix(table)
    (tmp_path / "cut.json.gz").write_bytes(gzip.compress(b'{"a": 1}')[:-6])
    with pytest.raises(TopoplanError, match=r"cut\.json\.gz: cannot read JSON file"):
        read_json(tmp_path / "cut.json.gz")


@pytest.mark.parametrize("obj, field", [
    ({"entries": [{"from_s": 0.0}, {"from_s": float("nan")}]}, r"entries\[1\]\.from_s': nan"),
    ({"setup_s": float("inf")}, "setup_s': inf"),
    ({"rows": [[0.5, -float("inf")]]}, r"rows\[0\]\[1\]': -inf"),
    ({"matrix": np.array([[1.0, np.nan], [0.0, 1.0]])}, r"matrix\[0\]\[1\]': nan"),
    ({"times": np.array([0.0, np.inf])}, r"times\[1\]': inf"),
])
def test_json_writer_refuses_nan_and_infinity_and_writes_nothing(tmp_path, obj, field):
    """JSON has no NaN or Infinity: Python's json writes them anyway, and a controller's parser then fails on
    the document (or reads a number). The writer names the field and leaves no file."""
    path = tmp_path / "doc.json"
    with pytest.raises(TopoplanError, match=f"doc.json: field '{field}"):
        write_json(path, obj)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("text, line, name", [
    ('{"a": 1,\n "b": NaN}', 2, "NaN"),
    ('{"a": [1,\n 2,\n -Infinity]}', 3, "-Infinity"),
    ('[Infinity]', 1, "Infinity"),
])
def test_json_reader_refuses_nan_and_infinity_naming_the_line(tmp_path, text, line, name):
    path = tmp_path / "in.json"
    path.write_text(text)
    with pytest.raises(TopoplanError, match=f"in.json:{line}: malformed plan: {name} is not a JSON number"):
        read_json(path, "plan")


def test_read_json_reads_past_a_byte_order_mark(tmp_path):
    # an editor on Windows writes one; it was refused with Python's 'decode using utf-8-sig'
    path = tmp_path / "plan.json"
    path.write_bytes(b'\xef\xbb\xbf{"rank_to_node": [0, 1]}')
    assert read_json(path, "plan") == {"rank_to_node": [0, 1]}


@pytest.mark.parametrize("args", [("validate", "{p}", "-t", "paper003"),
                                  ("export", "slurm", "-p", "{p}", "-t", "paper003", "-o", "{out}")])
def test_an_empty_plan_or_a_directory_says_so(tmp_path, run_cli, args):
    """An empty JSON file said 'malformed plan: Expecting value' and a directory 'no such file'."""
    empty, out = tmp_path / "p.json", tmp_path / "out"
    empty.write_text("\n")
    for p, want in ((empty, f"error: {empty}: empty file, expected a plan"),
                    (tmp_path, f"error: {tmp_path}: is a directory, not a ")):
        code, _, err = run_cli(*[a.format(p=p, out=out) for a in args])
        assert code == 2 and err.startswith(want) and len(err.strip().splitlines()) == 1, err
        assert not out.exists()


def test_text_inputs_read_past_a_byte_order_mark(tmp_path, run_cli):
    """A hostfile or a Bcast allocation saved with a BOM (Windows editors): its first host was '\\ufeffa'."""
    hosts, pl, out = tmp_path / "hosts", tmp_path / "p.csv", tmp_path / "hostfile"
    hosts.write_bytes(b"\xef\xbb\xbfa\r\nb\r\n")
    pl.write_text("rank,node\n0,0\n1,1\n")
    code, _, err = run_cli("export", "slurm", "-p", pl, "--hosts", hosts, "-o", out)
    assert code == 0 and out.read_text() == "a\nb\n", err
    alloc = tmp_path / "alloc.txt"
    alloc.write_bytes(b"\xef\xbb\xbfnode0001\nnode0002\n")
    code, out_, err = run_cli("bcast", "-t", "paper000", "-a", alloc, "--json", "--no-simulate")
    assert code == 0 and json.loads(out_)["allocation_nodes"] == [1, 2], err


LONG = "1" + "0" * 4400   # more digits than int() converts (sys.get_int_max_str_digits: 4,300)


@pytest.mark.parametrize("text, line", [
    ('{"seed": %s}' % LONG, 1),
    ('{"order": [1, 0],\n "root": 0,\n "seed": -%s}' % LONG, 3),
    ('{"x": 0.%s,\n "y": [%s]}' % (LONG, LONG), 2),     # (the digits of a fraction are read: float)
])
def test_json_reader_refuses_an_integer_too_long_to_convert_naming_the_line(tmp_path, text, line):
    path = tmp_path / "in.json"
    path.write_text(text)
    with pytest.raises(TopoplanError, match=rf"^{re.escape(str(path))}:{line}: malformed plan: a number of 4,401 "
                                            r"digits \(at most 4,300 are read\)$"):
        read_json(path, "plan")


def _long_inputs(tmp_path, cz):
    """Commands each reading a user file (or option) holding a number of 4,401 digits, and what the error names."""
    plan = json.loads(cz.read_text())
    text = json.dumps(plan, indent=1).replace('"seed": 0', f'"seed": {LONG}', 1)
    (tmp_path / "seed.json").write_text(text)
    (tmp_path / "p.csv").write_text(f"rank,node\n0,0\n1,{LONG}\n")
    (tmp_path / "ps.csv").write_text(f"rank,node,slot\n0,0,0\n1,1,{LONG}\n")
    (tmp_path / "hosts").write_text(f"0 a\n{LONG} b\n")
    (tmp_path / "m.csv").write_text(f"src,dst,bytes,msgs\n0,{LONG},100,1\n")
    (tmp_path / "t.yaml").write_text(f"kind: tree\nnodes_per_switch: [{LONG}, 2]\n")
    (tmp_path / "alloc.txt").write_text(f"0\n{LONG}\n")
    ib = (Path(__file__).parent / "data" / "ib" / "tree2" / "ibnetdiscover.txt").read_text().split("\n")
    ib[9] = ib[9].replace("Switch\t24", f"Switch\t{LONG}")
    (tmp_path / "ib.txt").write_text("\n".join(ib))
    slurm = Path(__file__).parent / "data" / "slurm" / "cluster"
    (tmp_path / "slurm").mkdir()
    (tmp_path / "slurm" / "topology.conf").write_text((slurm / "topology.conf").read_text())
    (tmp_path / "slurm" / "slurm.conf").write_text((slurm / "slurm.conf").read_text().replace("Sockets=2",
                                                                                               f"Sockets={LONG}"))
    seed, out = tmp_path / "seed.json", tmp_path / "out"
    trace = ["-T", "ring:np=2,bytes=1MB"]
    long = r"a number of 4,401 digits \(at most 4,300 are read\)"
    big = r"10000000000000000000\.\.\. \(4,401 characters\)"
    return [
        (["validate", seed, "-t", "paper003"], rf"{seed}:\d+: malformed plan: {long}"),
        (["export", "json", "-p", seed, "-o", out], rf"{seed}:\d+: malformed plan: {long}"),
        (["export", "ompi4", "-p", seed, "-o", out], rf"{seed}:\d+: malformed plan: {long}"),
        (["simulate", "-t", "paper003", *trace, "--circuits", seed], rf"{seed}:\d+: malformed circuit plan: {long}"),
        (["validate", tmp_path / "p.csv", "-t", "paper003"], rf"p\.csv:3: field 'node': {big} is out of range"),
        (["validate", tmp_path / "ps.csv", "-t", "paper003"], rf"ps\.csv:3: field 'slot': {big} is out of range"),
        (["export", "slurm", "-p", tmp_path / "p.csv", "-o", out, "--hosts", tmp_path / "hosts"],
         rf"hosts:2: field 'node_id': {big} is over the limit of 1,048,576 nodes"),
        (["simulate", "-t", "paper003", "-T", tmp_path / "m.csv"], rf"m\.csv:2: field 'dst': {big} is out of range"),
        (["validate", tmp_path / "p.csv", "-t", tmp_path / "t.yaml"], rf"t\.yaml:2: {long}"),
        (["validate", tmp_path / "p.csv", "-t", "paper003", "--set", f"ocs.nodes_per_switch={LONG}"],
         rf"--set 'ocs.nodes_per_switch'\.\.\. \(4,422 characters\): {long}"),
        (["bcast", "-t", "paper003", "-a", tmp_path / "alloc.txt", "--no-simulate"],
         rf"alloc\.txt:2: {big} is out of range"),
        (["topo", "info", "-i", tmp_path / "ib.txt"], rf"ib\.txt:10: {long}"),
        (["show", tmp_path / "slurm" / "topology.conf", "--set", "slurm_linkspeed_unit=Gbps"],
         rf"slurm\.conf:9: field 'Sockets': {big} is over the limit of 65,536"),
    ]


def test_a_number_too_long_to_convert_is_one_error_line_in_every_reader(tmp_path, run_cli):
    """A number of more than 4,300 digits was a traceback (ValueError out of int()) in these readers."""
    cz = tmp_path / "cz.json"
    code, _, err = run_cli("circuits", "-t", "paper003", "-T", "ring:np=2,bytes=1MB", "-m", "greedy",
                           "--no-simulate", "-o", cz)
    assert code == 0, err
    cases = _long_inputs(tmp_path, cz)
    archive = tmp_path / "cz.zip"   # a plan archive: its plan.json
    code, _, err = run_cli("circuits", "-t", "paper003", "-T", "ring:np=2,bytes=1MB", "-m", "greedy",
                           "--no-simulate", "-o", archive)
    assert code == 0, err
    with zipfile.ZipFile(archive) as z:
        head, tables = z.read("plan.json").decode(), z.read("next_hop.npy")
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("plan.json", head.replace('"seed": 0', f'"seed": {LONG}', 1))
        z.writestr("next_hop.npy", tables)
    line = head[:head.index('"seed"')].count("\n") + 1
    cases.append((["validate", archive, "-t", "paper003"],
                  rf"cz\.zip: plan\.json:{line}: malformed plan: a number of 4,401 digits \(at most 4,300 are read\)"))
    for args, want in cases:
        code, out, err = run_cli(*args)
        assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, (args, err)
        assert re.search(rf"^error: (\S*/)?{want}$", err.strip()), (args, err)
        assert not (tmp_path / "out").exists()


# -- an interrupt anywhere leaves no temporary file -------------------------------------------------------------

def _interrupt_at(k: int, codes) -> tuple:
    """A trace function raising KeyboardInterrupt before the k-th bytecode instruction run in a frame of ``codes``
    (k = 0: never), and the count of those run: a Ctrl-C landing at any point of them, deterministically (Python
    takes a signal only at some instructions; every one is a superset). Raising in a trace function unsets it."""
    count = [0]

    def local(frame, event, arg):
        if event == "opcode":
            count[0] += 1
            if count[0] == k:
                raise KeyboardInterrupt
        return local

    def tracer(frame, event, arg):
        if frame.f_code in codes:
            frame.f_trace_opcodes = True
            return local
        return None

    return tracer, count


def _run_interrupted(k, codes, fn):
    """``fn()`` with an interrupt before the k-th instruction of ``codes``; whether it was interrupted, and the
    instructions counted."""
    tracer, count = _interrupt_at(k, codes)
    old = sys.gettrace()
    sys.settrace(tracer)
    try:
        fn()
        interrupted = False
    except KeyboardInterrupt:
        interrupted = True
    finally:
        sys.settrace(old)
    return interrupted, count[0]


@pytest.mark.parametrize("existing", [False, True])
@pytest.mark.parametrize("data", ["plan\n", ["pl", "an\n"], b"\x89PNG"])
def test_atomic_write_interrupted_anywhere_leaves_no_temporary_file(tmp_path, existing, data):
    """An interrupt between mkstemp making the file and the assignment of its name leaked the file
    (``.node0600.routes.XXXX`` beside an interrupted routes export)."""
    from topoplan.core import io as core_io

    codes = {core_io.atomic_write.__code__}
    want = data if isinstance(data, bytes) else "".join(data).encode()
    _, total = _run_interrupted(0, codes, lambda: atomic_write(tmp_path / "dry", data))
    assert total > 50
    for k in range(1, total + 1):
        d = tmp_path / str(k)
        d.mkdir()
        target = d / "out.txt"
        if existing:
            target.write_bytes(b"old\n")
        interrupted, _ = _run_interrupted(k, codes, lambda: atomic_write(target, data))
        assert interrupted, k
        assert [p.name for p in d.iterdir()] == (["out.txt"] if existing or target.exists() else []), k
        if target.exists():   # the old file, or the new one whole (renamed just before the interrupt)
            assert target.read_bytes() in (b"old\n", want), k


def test_an_output_group_interrupted_anywhere_leaves_all_or_nothing(tmp_path):
    from topoplan.core import io as core_io

    codes = {core_io.atomic_write.__code__, core_io.output_group.__wrapped__.__code__}
    names = ["a.txt", "b.txt", "c.txt"]

    def write(d):
        with core_io.output_group():
            for name in names:
                atomic_write(d / name, name)

    (tmp_path / "dry").mkdir()
    _, total = _run_interrupted(0, codes, lambda: write(tmp_path / "dry"))
    assert total > 150
    for k in range(1, total + 1):
        d = tmp_path / str(k)
        d.mkdir()
        (d / "b.txt").write_text("old")   # one of them there before
        _run_interrupted(k, codes, lambda: write(d))
        assert core_io._group.get() is None, k   # later writes are not taken for the interrupted group's
        files = sorted(p.name for p in d.iterdir())
        assert files in (["b.txt"], names), (k, files)   # no temporary file; no new file without the others
        if files == names:
            assert [(d / n).read_text() for n in names] == names, k
