"""Collection set-up shared by the tests and the doctests (``--doctest-modules`` over the ``topoplan`` package).

Every module of the packages is imported for its doctests; none needs an optional dependency at
import time (``topoplan/problems/bcast/mpi_helper.py`` imports mpi4py only inside the functions that get a
communicator), so only the entry point is left out.
"""

import fcntl
import os
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent

collect_ignore = [
    # Runs the CLI (sys.exit(main())) on import: `python -m topoplan` only.
    "topoplan/__main__.py",
]


@pytest.fixture(autouse=True)
def _doctests_run_in_the_repository(request, monkeypatch):
    """Doctests name files relative to the repository root (``tests/data/...``, ``topoplan/instances/...``)."""
    if isinstance(request.node, pytest.DoctestItem):
        monkeypatch.chdir(ROOT)


def _lock_base(pid: int) -> Path:
    """The lock files of the session whose xdist controller is process ``pid`` (``.gate`` and ``.lock``)."""
    return Path(tempfile.gettempdir()) / f"topoplan-tests-{pid}"


def pytest_configure(config):
    config.addinivalue_line("markers", "alone: measures real time (the emulated cluster against its predictions): "
                                       "no other test runs beside it under pytest-xdist")


def pytest_unconfigure(config):
    if "PYTEST_XDIST_WORKER" not in os.environ:   # the controller (or a single process): its workers' lock files
        for ext in (".gate", ".lock"):
            Path(f"{_lock_base(os.getpid())}{ext}").unlink(missing_ok=True)


@pytest.fixture(autouse=True)
def _alone_or_beside(request):
    """Under pytest-xdist, a test marked ``alone`` runs while no other worker runs a test: on two cores the other
    worker's test would take the CPU the emulated network's forwarding and the MPI ranks need, and the measured
    time would be that test's, not the network's.

    Every test holds a shared lock on a file of the session (its workers share their parent's process id) while
    it runs; an ``alone`` test holds it exclusively. A second lock, the gate, keeps new tests from starting while
    an ``alone`` test waits for the running ones to end, so it is never starved.
    """
    if "PYTEST_XDIST_WORKER" not in os.environ:   # one process: nothing runs beside any test
        yield
        return
    base = _lock_base(os.getppid())
    alone = request.node.get_closest_marker("alone") is not None
    with open(f"{base}.gate", "a") as gate, open(f"{base}.lock", "a") as lock:
        fcntl.flock(gate, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        fcntl.flock(lock, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        if not alone:
            fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
            fcntl.flock(gate, fcntl.LOCK_UN)
