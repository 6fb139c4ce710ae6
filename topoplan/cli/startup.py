"""What the command line runs before Typer is imported (start-up).

Typer and its click cost a small ``simulate --flows FILE --json`` run about 100 M of its 710 M instructions
(importing them, and building and parsing the command). That command line, in that exact shape, is run here
without them: :func:`flow_scenario_file` recognizes it, and :func:`run_flow_scenario` is the scenario run
that ``simulate --flows`` runs either way (the same document, printed the same way). Any other command line,
even one option more, goes through Typer.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

__all__ = ["serial_blas", "run_flow_scenario", "flow_scenario_file"]


@contextmanager
def serial_blas():
    """Within the block, a first import of NumPy starts OpenBLAS with one thread, unless the user chose a
    number (``OPENBLAS_NUM_THREADS``); the environment is as before afterwards (child processes inherit the
    user's).

    OpenBLAS starts its thread pool and their buffers when NumPy is imported: 0.1 s of wall time and 0.14 s of
    CPU on the 2-core build machine, half of what importing NumPy costs and a third of a small ``simulate
    --flows`` process. For commands whose library calls no BLAS routine (the simulator: NumPy's element-wise
    and sorting functions and the compiled loop, never a matrix or dot product), so their results are the same.

    Examples
    --------
    >>> import os
    >>> before = os.environ.get("OPENBLAS_NUM_THREADS")
    >>> with serial_blas():
    ...     os.environ["OPENBLAS_NUM_THREADS"] == (before or "1")
    True
    >>> os.environ.get("OPENBLAS_NUM_THREADS") == before
    True
    """
    before = os.environ.get("OPENBLAS_NUM_THREADS")
    if before:   # the user's choice (empty is OpenBLAS's default: one thread per core)
        yield
        return
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        yield
    finally:
        if before is None:
            del os.environ["OPENBLAS_NUM_THREADS"]
        else:
            os.environ["OPENBLAS_NUM_THREADS"] = before


def run_flow_scenario(path) -> dict:
    """Simulate the flow scenario ``path`` as ``topoplan simulate --flows`` does, NumPy started on one thread.

    Parameters
    ----------
    path : str or path
        A scenario JSON file (``.json`` or ``.json.gz``).

    Returns
    -------
    dict
        The document ``simulate --flows FILE --json`` prints (:func:`topoplan.sim.flowfile.run_scenario`).

    Examples
    --------
    >>> import json, os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "flows.json")
    >>> with open(path, "w") as fh:
    ...     json.dump({"tree": {"leaves": 1, "hosts_per_leaf": 2, "down_bw": 1e9, "up_bw": 1e9, "down_lat": 0,
    ...                         "up_lat": 0},
    ...                "flows": [{"id": 0, "src": "h0", "dst": "h1", "bytes": 1e9, "start_s": 0}]}, fh)
    >>> run_flow_scenario(path)["makespan_s"]
    1.0
    """
    with serial_blas():   # the simulator calls no BLAS routine: NumPy starts 0.1 s sooner
        from topoplan.sim.flowfile import run_scenario

    return run_scenario(Path(path))


def flow_scenario_file(args) -> str | None:
    """The scenario of the command line ``simulate --flows FILE --json`` (the two options in either order and
    nothing else), which :func:`topoplan.cli.main.main` runs without Typer; None for any other.

    Also None where Typer's reading could differ: a ``FILE`` that starts with ``-`` or is empty, one that
    exists and cannot be read (click's message), and a shell-completion request (``_TOPOPLAN_COMPLETE``).

    Parameters
    ----------
    args : list of str
        The arguments after the program name.

    Returns
    -------
    str or None

    Examples
    --------
    >>> flow_scenario_file(["simulate", "--flows", "f.json", "--json"])
    'f.json'
    >>> flow_scenario_file(["simulate", "--json", "--flows", "f.json"])
    'f.json'
    >>> flow_scenario_file(["simulate", "--flows", "f.json"]) is None     # a table: rich prints it
    True
    >>> flow_scenario_file(["simulate", "--flows", "f.json", "--json", "-o", "r.json"]) is None
    True
    """
    if len(args) != 4 or args[0] != "simulate" or "_TOPOPLAN_COMPLETE" in os.environ:
        return None
    if args[1:3] == ["--json", "--flows"]:
        path = args[3]
    elif args[1] == "--flows" and args[3] == "--json":
        path = args[2]
    else:
        return None
    if not path or path.startswith("-"):
        return None
    try:
        if os.path.exists(path) and not os.access(path, os.R_OK):
            return None
    except (OSError, ValueError):
        return None
    return path
