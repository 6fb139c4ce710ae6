import pytest

from planner.core.errors import TopoplanError
from planner.core.units import format_bytes, parse_bandwidth, parse_size, parse_time


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
