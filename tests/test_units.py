import pytest

from topoplan.core.errors import TopoplanError
from topoplan.core.units import format_bytes, parse_bandwidth, parse_size, parse_time


@pytest.mark.parametrize("text,expected", [
    ("10Gbps", 1.25e9), ("20 Gb/s", 2.5e9), ("1.25GB/s", 1.25e9), ("1.25GBps", 1.25e9),
    ("4.76 GB/s", 4.76e9), ("100Mbps", 12.5e6), ("8", 8.0), (1e9, 1e9), ("1KiB/s", 1024.0),
])
def test_bandwidth(text, expected):
    assert parse_bandwidth(text) == pytest.approx(expected)


@pytest.mark.parametrize("text,expected", [
    ("500ns", 5e-7), ("10ms", 0.01), ("1.5us", 1.5e-6), ("2s", 2.0), ("0", 0.0), ("3µs", 3e-6),
])
def test_time(text, expected):
    assert parse_time(text) == pytest.approx(expected)


@pytest.mark.parametrize("text,expected", [
    ("4MB", 4e6), ("4MiB", 4 * 2**20), ("8192", 8192), ("10kB", 1e4), ("1GiB", 2**30), ("40 MB", 40e6),
])
def test_size(text, expected):
    assert parse_size(text) == pytest.approx(expected)


@pytest.mark.parametrize("fn,text", [
    (parse_bandwidth, "10Gbs"), (parse_bandwidth, "-1Gbps"), (parse_bandwidth, "0Gbps"), (parse_bandwidth, "fast"),
    (parse_time, "10 lightyears"), (parse_time, "-5ns"), (parse_size, "4Mb"), (parse_size, "4XB"), (parse_size, "nan"),
])
def test_bad_units_are_clear_errors(fn, text):
    with pytest.raises(TopoplanError) as e:
        fn(text, "eps.up_bw")
    assert "eps.up_bw" in str(e.value) and "\n" not in str(e.value)


def test_format_bytes():
    assert format_bytes(1.92e9) == "1,920 MB"
    assert format_bytes(512) == "512 B"


@pytest.mark.parametrize("text,expected", [("12", 12), (" -3 ", -3), ("0042", 42), ("-0", 0)])
def test_ascii_int(text, expected):
    from topoplan.core.units import ascii_int, is_ascii_int

    assert is_ascii_int(text) and ascii_int(text, "f:1") == expected


@pytest.mark.parametrize("text", ["²", "٣", "３", "--3", "+-3", "+3", "−3", "3.0", "1e3", "1_0", "", " ", "0x1", 3, None])
def test_ascii_int_refuses_other_digits_and_signs(text):
    from topoplan.core.units import ascii_int, is_ascii_int

    assert not is_ascii_int(text)
    with pytest.raises(TopoplanError, match=r"^f:1: not an integer: "):
        ascii_int(text, "f:1")


def test_ascii_int_range():
    from topoplan.core.units import ascii_int

    assert ascii_int(str(2 ** 62 - 1), "f:1") == 2 ** 62 - 1
    with pytest.raises(TopoplanError, match="f:1: 4611686018427387904 is out of range"):
        ascii_int(str(2 ** 62), "f:1")


# -- issue 36: digits of other scripts are not numbers, anywhere a number is read from text -------------------

@pytest.mark.parametrize("fn", [parse_time, parse_size, parse_bandwidth])
@pytest.mark.parametrize("text", ["٣s", "٣", "３ms", "1٠MB", "٠.٥Gbps", "²"])
def test_units_refuse_digits_of_other_scripts(fn, text):
    with pytest.raises(TopoplanError, match="cannot read"):
        fn(text)


def test_time_unit_hint_names_every_unit():
    with pytest.raises(TopoplanError, match=r"unknown time unit in '3 weeks' \(use ns, us, ms, s, min, h\)"):
        parse_time("3 weeks")
    assert parse_time("2min") == 120.0 and parse_time("1h") == 3600.0


@pytest.mark.parametrize("text, expected", [("0.5", True), ("-1e-3", True), (" 7 ", True), (".5", True),
                                            ("inf", True), ("NaN", True), ("٠.٥", False), ("1_0", False),
                                            ("0x10", False), ("", False), ("1e", False), (0.5, False)])
def test_is_ascii_number(text, expected):
    from topoplan.core.units import is_ascii_number

    assert is_ascii_number(text) is expected


@pytest.mark.parametrize("args, needle", [
    (["circuits", "-t", "paper003", "-T", "ring:np=8,bytes=1MB", "-m", "greedy", "--time-limit", "٣s"],
     "--time-limit: cannot read time '٣s'"),
    (["circuits", "-t", "paper003", "-T", "ring:np=8,bytes=1MB", "-m", "greedy", "--time-limit", "3d"],
     "(use ns, us, ms, s, min, h)"),
    (["phases", "-t", "paper003", "-T", "ring:np=8,bytes=1MB", "--windows", "١٠"],
     "Invalid value for '--windows': '١٠' is not a number in ASCII digits (0-9)"),
    (["phases", "-t", "paper003", "-T", "ring:np=8,bytes=1MB", "--threshold", "٠.٥"],
     "Invalid value for '--threshold': '٠.٥' is not a number"),
    (["phases", "-t", "paper003", "-T", "ring:np=8,bytes=1MB", "--windows", "1_0"], "'1_0' is not a number"),
    (["traffic", "ring:np=٨,bytes=1MB", "-o", "r.csv"], "parameter 'np': bad value '٨' (expected int)"),
    (["traffic", "ring:np=8,bytes=1MB,compute=٠.٥", "-o", "r.csv"], "parameter 'compute': bad value '٠.٥'"),
    (["traffic", "ring:np=1_0,bytes=1MB", "-o", "r.csv"], "parameter 'np': bad value '1_0'"),
    (["simulate", "-t", "paper003", "-T", "ring:np=8,bytes=1MB", "--iters", "٢"], "'٢' is not a number"),
])
def test_cli_numbers_are_ascii_everywhere(tmp_path, monkeypatch, run_cli, args, needle):
    """click reads options with int() and float(), which take '٣' as 3: every numeric option refuses them."""
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(*args)
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("parse, text, kind", [(parse_time, "1e999", "time"), (parse_size, "1e999MB", "size"),
                                               (parse_bandwidth, "1e999Gbps", "bandwidth")])
def test_an_infinite_value_is_said_to_be_infinite(parse, text, kind):
    # it was said to be negative ("time must be non-negative, got '1e999'")
    with pytest.raises(TopoplanError, match=f"{kind} must be finite, got '{text}'"):
        parse(text)


@pytest.mark.parametrize("text", ["1" * 5000, "-" + "9" * 4301, "0" * 4000 + "1" * 400])
def test_ascii_int_of_more_digits_than_int_reads_is_out_of_range(text):
    """int() refuses more than 4,300 digits with a ValueError (a traceback out of every reader that used it)."""
    from topoplan.core.units import ascii_int, is_ascii_int

    assert not is_ascii_int(text)   # int(text) fails: never true for such a text
    with pytest.raises(TopoplanError, match=r"^p\.csv:2: field 'node': [-0-9]{20}\.\.\. \([0-9,]+ characters\) is "
                                            r"out of range$"):
        ascii_int(text, "p.csv:2: field 'node'")
