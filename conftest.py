"""Collection set-up shared by the tests and the doctests (``--doctest-modules`` over the ``topoplan`` package).

Every module of the packages is imported for its doctests; none needs an optional dependency at
import time (``topoplan/problems/bcast/mpi_helper.py`` imports mpi4py only inside the functions that get a
communicator), so only the entry point is left out.
"""

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
