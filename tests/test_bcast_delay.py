import numpy as np
import pytest

from topoplan.problems.bcast import BcastProblem, delay, solve
from topoplan.problems.bcast.allocation import DDR_Bps, SDR_Bps, cluster
from topoplan.core.errors import TopoplanError


@pytest.fixture
def three_hosts(tmp_path):
    """A one-rack cluster of three hosts, their names and the path of a delay CSV to write."""
    topo = cluster(1, 3)
    return topo, topo.host_names(), tmp_path / "d.csv"


def test_hops_and_speed_matrices():
    topo = cluster(2, 2, bw_Bps="mixed")          # rack 0 SDR, rack 1 DDR
    h = delay.hops(topo, [0, 1, 2])
    assert h.tolist() == [[0, 1, 3], [1, 0, 3], [3, 3, 0]]
    s = delay.speed(topo, [0, 2, 3])
    assert s[0, 1] == pytest.approx(1 / SDR_Bps) and s[1, 2] == pytest.approx(1 / DDR_Bps) and s[0, 0] == 0


@pytest.mark.parametrize("nodes,kind", [([0, 1, 2, 3], "speed"), ([2, 3], "hops"), ([0, 1], "hops")])
def test_auto_delay_is_speed_where_link_rates_differ(nodes, kind):
    topo = cluster(2, 2, bw_Bps="mixed")          # rack 0 SDR, rack 1 DDR
    assert delay.resolve("auto", topo, nodes) == kind
    assert (delay.delay_matrix("auto", topo, nodes) == delay.delay_matrix(kind, topo, nodes)).all()
    default = BcastProblem.build(topo, placement=nodes, bytes_B=1e6)      # the default delay is auto
    chosen = BcastProblem.build(topo, placement=nodes, bytes_B=1e6, delay=kind)
    assert default.delay_kind == kind and (default.delay == chosen.delay).all()
    assert solve(default, "bft").plan["order"] == solve(chosen, "bft").plan["order"]


def test_delay_from_csv_and_npy_in_allocation_order(tmp_path):
    topo = cluster(1, 3)
    names = topo.host_names()
    m = np.array([[0, 1, 2], [1, 0, 5], [2, 5, 0]], dtype=float)
    f = tmp_path / "d.csv"
    f.write_text(",".join(names) + "\n" + "\n".join(",".join(str(v) for v in row) for row in m) + "\n")
    got = delay.delay_matrix(str(f), topo, [2, 0])
    assert got.tolist() == [[0, 2], [2, 0]]
    np.save(tmp_path / "d.npy", m[:2, :2])
    assert delay.delay_matrix(str(tmp_path / "d.npy"), topo, [0, 1]).tolist() == [[0, 1], [1, 0]]
    with pytest.raises(TopoplanError, match="allocation has 3"):
        delay.delay_matrix(str(tmp_path / "d.npy"), topo, [0, 1, 2])
    f.write_text(",".join(names) + "\n0,1,x\n1,0,5\n2,5,0\n")
    with pytest.raises(TopoplanError, match=rf"d\.csv:2: field '{names[2]}': not a number: 'x'"):
        delay.delay_matrix(str(f), topo, [0, 1])


@pytest.mark.parametrize("rows,needle", [
    # an extra field on every row: read loosely, the first field became the index and the columns shifted
    (["0,1,2,9", "1,0,5,9", "2,5,0,9"], r"d\.csv:2: 4 fields, the header has 3 \(a stray comma"),
    (["0,1,2", "1,0", "2,5,0"], r"d\.csv:3: 2 fields, the header has 3 \(a row cut short"),
    (["0,1,2", "1,0,", "2,5,0"], r"d\.csv:3: field '{h2}': empty"),
    (["0,1,2", "1,0,nan", "2,5,0"], r"d\.csv:3: field '{h2}': not a number: 'nan'"),
    (["0,1,2", "1,0,inf", "2,5,0"], r"d\.csv:3: field '{h2}': not a finite number"),
    (["0,1,2", "1,0,5us", "2,5,0"], r"d\.csv:3: field '{h2}': not a number: '5us'"),
    (["0,-1,2", "1,0,5", "2,5,0"], r"d\.csv:2: field '{h1}': a delay must be non-negative, got -1"),
    (["0,1,2", "1,0,5"], r"d\.csv: 2 rows for 3 header hosts"),
])
def test_bad_delay_csv_is_an_error_naming_line_and_host(tmp_path, rows, needle):
    topo = cluster(1, 3)
    names = topo.host_names()
    f = tmp_path / "d.csv"
    f.write_text(",".join(names) + "\n" + "\n".join(rows) + "\n")
    with pytest.raises(TopoplanError, match=needle.format(h1=names[1], h2=names[2])):
        delay.load(f, topo, [0, 1, 2])


@pytest.mark.parametrize("blank", ["", "\n"])
def test_delay_csv_header_lacking_a_host_names_the_header_line(three_hosts, blank):
    topo, names, f = three_hosts
    f.write_text(f"{blank}{names[0]},{names[1]}\n0,1\n1,0\n")
    with pytest.raises(TopoplanError, match=rf"d\.csv:{1 + len(blank)}: header lacks host '{names[2]}' of the "
                                            "allocation$"):
        delay.load(f, topo, [0, 1, 2])


@pytest.mark.parametrize("spell", [str.upper, str.capitalize, lambda h: h])
def test_delay_csv_host_names_ignore_case(three_hosts, spell):
    """Host names are case-insensitive (DNS, Slurm): a header written in another case names the same hosts."""
    topo, names, f = three_hosts
    f.write_text(",".join(spell(h) for h in names) + "\n0,1,2\n1,0,5\n2,5,0\n")
    assert delay.load(f, topo, [2, 0]).tolist() == [[0, 2], [2, 0]]


@pytest.mark.parametrize("second", [str.upper, str.capitalize])
def test_delay_csv_header_naming_a_host_twice_in_two_cases_is_an_error(three_hosts, second):
    topo, names, f = three_hosts
    f.write_text(f"\n{names[0]},{names[1]},{second(names[0])}\n0,1,0\n1,0,1\n0,1,0\n")
    with pytest.raises(TopoplanError, match=rf"^{f.parent}/d\.csv:2: field '{second(names[0])}': the same host as "
                                            rf"column '{names[0]}' \(host names ignore case\)$"):
        delay.load(f, topo, [0, 1])


def test_delay_csv_header_naming_a_host_twice_is_an_error(tmp_path):
    topo = cluster(1, 3)
    names = topo.host_names()
    f = tmp_path / "d.csv"
    f.write_text(f"{names[0]},{names[1]},{names[0]}\n0,1,0\n1,0,1\n0,1,0\n")
    with pytest.raises(TopoplanError, match=rf"d\.csv:1: duplicate column '{names[0]}'"):
        delay.load(f, topo, [0, 1])


@pytest.mark.parametrize("save,needle", [
    (lambda p: np.savez(p, d=np.zeros((2, 2))), r"d\.npy: an \.npz archive of arrays, not one NumPy array"),
    (lambda p: np.save(p, np.array([["0", "1"], ["1", "0"]])), r"d\.npy: a matrix of <U1 values; delays are real"),
    (lambda p: np.save(p, np.ones((2, 2)) * 1j), r"d\.npy: a matrix of complex128 values"),
    (lambda p: np.save(p, np.zeros((2, 2), dtype=bool)), r"d\.npy: a matrix of bool values"),
])
def test_delay_npy_of_another_kind_is_an_error(tmp_path, save, needle):
    """An .npz saved as .npy or a matrix of text, complex or boolean values: an error, not a traceback or a
    matrix with its imaginary part dropped."""
    path = tmp_path / "d.npy"
    with open(path, "wb") as fh:
        save(fh)
    with pytest.raises(TopoplanError, match=needle):
        delay.delay_matrix(str(path), cluster(1, 3), [0, 1])
