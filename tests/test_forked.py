"""A forked child that computes numbers beside the process (topoplan.core.forked)."""

import os
import signal
import time

import pytest

from topoplan.core import forked
from topoplan.core.forked import Forked

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")


def test_values_come_back_in_item_order():
    with Forked(lambda x: 2.0 * x, [0.5, 1.5, 3.0]) as child:
        assert child.collect() == {0: 1.0, 1: 3.0, 2: 6.0}
        assert child.ended


def test_no_items_start_no_child():
    child = Forked(lambda x: x, [])
    assert child.pid == 0 and child.collect(timeout_s=0) == {}


def test_an_item_not_done_in_time_is_missing_and_the_child_is_killed():
    with Forked(lambda s: time.sleep(s) or s, [0.0, 120.0, 0.0]) as child:
        got = child.collect(timeout_s=1.0)
        pid = child.pid
    assert got == {0: 0.0}
    with pytest.raises(ProcessLookupError):   # killed and reaped: no such process any more
        os.kill(pid, 0)


@pytest.mark.parametrize("fail_at", [0, 1])
def test_an_exception_in_the_child_ends_it_with_the_items_done_so_far(fail_at):
    def fn(i):
        if i == fail_at:
            raise ValueError("no")
        return float(i)

    with Forked(fn, [0, 1, 2]) as child:
        got = child.collect(timeout_s=60.0)
    assert got == {i: float(i) for i in range(fail_at)}
    assert child.ended


def test_the_child_ignores_ctrl_c():
    with Forked(lambda s: time.sleep(s) or s, [0.5]) as child:
        time.sleep(0.1)
        os.kill(child.pid, signal.SIGINT)   # what the terminal sends the whole process group
        assert child.collect(timeout_s=60.0) == {0: 0.5}


def test_available_needs_two_cpus(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    assert not forked.available()
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    assert forked.available()


def test_values_already_back_are_read_without_waiting():
    with Forked(lambda x: x, [1.0, 2.0]) as child:
        time.sleep(0.5)   # (the child has written both by now, on any machine that runs the suite)
        got = {}
        for _ in range(100):
            got = child.collect(timeout_s=0)
            if len(got) == 2:
                break
            time.sleep(0.1)
        assert got == {0: 1.0, 1: 2.0}


def test_any_picklable_value_comes_back_whole():
    import numpy as np

    big = np.arange(300_000, dtype=np.float64)    # 2.4 MB: many times a pipe's buffer
    with Forked(lambda k: (k, big * k, {"k": k}), [1, 2]) as child:
        got = child.collect(timeout_s=60.0)
    assert sorted(got) == [0, 1]
    for i, k in enumerate([1, 2]):
        assert got[i][0] == k and got[i][2] == {"k": k}
        np.testing.assert_array_equal(got[i][1], big * k)


def test_the_child_shows_no_progress(tmp_path):
    """The terminal's progress line is the parent's: what the child's work reports goes nowhere (a sink that
    writes to a file, as the command line's writes to the terminal, would get the child's reports too)."""
    from topoplan.core.progress import report, reporting_to

    log = os.open(tmp_path / "progress", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        with reporting_to(lambda f: os.write(log, f"{f.get('stage')}\n".encode()), min_interval_s=0):
            with Forked(lambda k: report(stage=f"child {k}") or float(k), [1, 2]) as child:
                got = child.collect(timeout_s=60.0)
            report(stage="parent")
    finally:
        os.close(log)
    assert got == {0: 1.0, 1: 2.0}
    assert (tmp_path / "progress").read_text().splitlines() == ["parent"]
