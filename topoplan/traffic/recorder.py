"""Trace your own MPI program: build the PMPI recorder and run a program under it.

The recorder is a small C library (``topoplan/traffic/pmpi/topoplan_pmpi.c``) that
takes the place of the MPI functions when loaded with ``LD_PRELOAD``: it records
one row per MPI call of every rank and, at ``MPI_Finalize``, rank 0 writes the
trace directory (``events.csv`` and ``communicators.csv``, the format of
``shared/formats/trace.md``) that every ``-T`` option reads.

:func:`build_library` compiles it with the MPI compiler wrapper on first use into
a per-user cache (the source's hash is in the file name, so an edited source or
another MPI is rebuilt); :func:`record` runs a program under ``mpirun`` with the
library preloaded and returns the trace. ``topoplan trace`` is the command line
for both.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from topoplan.core.errors import TopoplanError
from topoplan.traffic.trace import read_trace

__all__ = ["SOURCE", "DIR_ENV", "cache_dir", "find_mpicc", "library_path", "build_library", "mpi_flavor",
           "openmpi_version", "launch_command", "record"]

SOURCE = Path(__file__).resolve().parent / "pmpi" / "topoplan_pmpi.c"
DIR_ENV = "TOPOPLAN_TRACE_DIR"   # where the library writes the trace (read by every rank at MPI_Finalize)
_FLAGS = ("-shared", "-fPIC", "-O2", "-pthread")
_PROGRAM_FLAGS = ("-O2",)   # an MPI program (the emulator's trace replayer) rather than a preloaded library
_NO_MPICC = ("mpicc not found: install Open MPI's development package (apt-get install libopenmpi-dev), "
             "load your MPI module, or set MPICC to your MPI C compiler wrapper")


def cache_dir(environ=None) -> Path:
    """The per-user directory the recorder library is built into.

    Parameters
    ----------
    environ : mapping, optional
        The environment; default ``os.environ``.

    Returns
    -------
    pathlib.Path
        ``$XDG_CACHE_HOME/topoplan``, else ``~/.cache/topoplan`` (not created here).

    Examples
    --------
    >>> str(cache_dir({"XDG_CACHE_HOME": "/tmp/cache-example"}))
    '/tmp/cache-example/topoplan'
    >>> cache_dir({}).parts[-2:]
    ('.cache', 'topoplan')
    """
    env = os.environ if environ is None else environ
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "topoplan"


def find_mpicc(mpicc: str | None = None) -> str:
    """The path of the MPI C compiler wrapper.

    Parameters
    ----------
    mpicc : str, optional
        A name or path; default ``$MPICC``, else ``mpicc``.

    Returns
    -------
    str
        Its full path.

    Raises
    ------
    TopoplanError
        One line naming what is missing and how to get it.

    Examples
    --------
    >>> find_mpicc("no-such-mpicc")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: mpicc not found: install Open MPI's development package (apt-get install libopenmpi-dev), load your MPI module, or set MPICC to your MPI C compiler wrapper (looked for 'no-such-mpicc')
    """
    name = mpicc or os.environ.get("MPICC") or "mpicc"
    found = shutil.which(name)
    if found is None:
        raise TopoplanError(f"{_NO_MPICC} (looked for {name!r})")
    return found


def library_path(mpicc: str, source=SOURCE, cache=None, *, program: bool = False) -> Path:
    """Where the library built from ``source`` by ``mpicc`` is cached (it may not exist yet).

    The name carries a hash of the source, the compiler's resolved path and the flags,
    so a changed source, another MPI or other flags get a library of their own.

    Parameters
    ----------
    mpicc : str
        The compiler wrapper's path (:func:`find_mpicc`).
    source : str or path, optional
        The C source; default :data:`SOURCE`.
    cache : str or path, optional
        Default :func:`cache_dir`.
    program : bool, optional
        An MPI program (named after the source, no ``lib`` or ``.so``) instead of a shared library.

    Returns
    -------
    pathlib.Path

    Examples
    --------
    >>> p = library_path("/usr/bin/mpicc", cache="/tmp/c")
    >>> p.parent, p.name.startswith("libtopoplan_pmpi-"), p.suffix, len(p.stem)
    (PosixPath('/tmp/c'), True, '.so', 33)
    >>> p == library_path("/usr/bin/mpicc", cache="/tmp/c"), p == library_path("/opt/mpi/bin/mpicc", cache="/tmp/c")
    (True, False)
    >>> library_path("/usr/bin/mpicc", cache="/tmp/c", program=True).name.startswith("topoplan_pmpi-")
    True
    """
    flags = _PROGRAM_FLAGS if program else _FLAGS
    h = hashlib.sha256(Path(source).read_bytes())
    h.update(os.path.realpath(mpicc).encode())
    h.update(" ".join(flags).encode())
    stem = Path(source).stem
    name = f"{stem}-{h.hexdigest()[:16]}" if program else f"lib{stem}-{h.hexdigest()[:16]}.so"
    return Path(cache if cache is not None else cache_dir()) / name


def build_library(mpicc: str | None = None, *, source=SOURCE, cache=None, force: bool = False,
                  program: bool = False) -> Path:
    """Compile the recorder with ``mpicc -shared -fPIC -O2`` unless the cache already holds it.

    The same builds the emulator's other C sources (its replayer with ``program=True``).

    Parameters
    ----------
    mpicc : str, optional
        The MPI C compiler wrapper (default ``$MPICC``, else ``mpicc``).
    source : str or path, optional
        The C source; default :data:`SOURCE`.
    cache : str or path, optional
        Default :func:`cache_dir`; created if missing.
    force : bool, optional
        Rebuild even if the library exists.
    program : bool, optional
        Build an MPI program (``mpicc -O2``) instead of a shared library.

    Returns
    -------
    pathlib.Path
        The shared library, for ``LD_PRELOAD`` (or the program).

    Raises
    ------
    TopoplanError
        When ``mpicc`` is missing or the compilation fails (with the compiler's first error line).

    Notes
    -----
    The library is written under a temporary name and renamed, so concurrent builds
    (two jobs starting at once) never see a half-written file.

    Examples
    --------
    >>> build_library("no-such-mpicc")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: mpicc not found: install Open MPI's development package (apt-get install libopenmpi-dev), load your MPI module, or set MPICC to your MPI C compiler wrapper (looked for 'no-such-mpicc')

    With MPI installed (this needs ``mpicc``):

    >>> lib = build_library()                # doctest: +SKIP
    >>> lib.name                             # doctest: +SKIP
    'libtopoplan_pmpi-3f2a9c0d1e4b5a67.so'
    """
    cc = find_mpicc(mpicc)
    lib = library_path(cc, source, cache, program=program)
    if lib.is_file() and not force:
        return lib
    try:
        lib.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=lib.stem + ".", suffix=".tmp", dir=lib.parent)
        os.close(fd)
    except OSError as exc:
        raise TopoplanError(f"{lib.parent}: cannot create the recorder's build directory: {exc.strerror}") from None
    try:
        flags = _PROGRAM_FLAGS if program else _FLAGS
        res = subprocess.run([cc, *flags, "-o", tmp, str(source)], capture_output=True, text=True)
        if res.returncode != 0:
            lines = [ln for ln in (res.stderr or res.stdout).splitlines() if "error" in ln.lower()]
            first = (lines or (res.stderr or res.stdout).splitlines() or ["no output"])[0].strip()
            raise TopoplanError(f"{source}: {os.path.basename(cc)} failed (exit {res.returncode}): {first}")
        os.chmod(tmp, 0o755)
        os.replace(tmp, lib)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return lib


@functools.lru_cache(maxsize=8)
def _version_text(mpirun: str) -> str:
    """``mpirun --version``'s output, lower case ("" when it cannot be run)."""
    try:
        res = subprocess.run([mpirun, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return (res.stdout + res.stderr).lower()


def mpi_flavor(mpirun: str) -> str:
    """Which MPI a launcher belongs to: ``"openmpi"``, ``"mpich"`` (MPICH, Intel MPI, MVAPICH) or ``"unknown"``.

    Parameters
    ----------
    mpirun : str
        The launcher's path.

    Returns
    -------
    str

    Examples
    --------
    >>> mpi_flavor("/bin/true")
    'unknown'
    """
    text = _version_text(mpirun)
    if "open mpi" in text or "open-mpi" in text or "openrte" in text:
        return "openmpi"
    if any(k in text for k in ("hydra", "mpich", "intel(r) mpi", "mvapich")):
        return "mpich"
    return "unknown"


def openmpi_version(mpirun: str | None = None) -> tuple[int, ...] | None:
    """The version of the Open MPI a launcher belongs to (``mpirun --version``), or None.

    Parameters
    ----------
    mpirun : str, optional
        The launcher (a name on ``PATH`` or a path); default ``$MPIRUN``, else ``mpirun``.

    Returns
    -------
    tuple of int or None
        ``(major, minor, release)``; None when there is no such launcher, or it is not Open MPI's.

    Examples
    --------
    >>> openmpi_version("no-such-mpirun") is None, openmpi_version("/bin/true") is None
    (True, True)
    """
    name = mpirun or os.environ.get("MPIRUN") or "mpirun"
    path = shutil.which(name)
    if path is None or mpi_flavor(path) != "openmpi":
        return None
    m = re.search(r"\(open mpi\)\s+v?([0-9]+)\.([0-9]+)(?:\.([0-9]+))?", _version_text(path))
    return None if m is None else tuple(int(x) for x in m.groups(default="0"))


def launch_command(command, out_dir, *, lib, np: int, mpirun: str = "mpirun", flavor: str = "openmpi",
                   mpirun_args=()) -> list[str]:
    """The launcher's command line that runs ``command`` on ``np`` ranks with the recorder preloaded.

    Parameters
    ----------
    command : list of str
        The program and its arguments.
    out_dir : str or path
        The trace directory (passed as ``TOPOPLAN_TRACE_DIR``).
    lib : str or path
        The recorder library (:func:`build_library`).
    np : int
        Number of ranks.
    mpirun : str, optional
        The launcher.
    flavor : str, optional
        :func:`mpi_flavor`: Open MPI exports variables with ``-x`` (and gets
        ``--oversubscribe``, so a small run on a workstation needs no host file);
        MPICH-like launchers with ``-genv``; others inherit the environment.
    mpirun_args : list of str, optional
        More launcher options, before the program.

    Returns
    -------
    list of str

    Examples
    --------
    >>> launch_command(["./app", "-n", "10"], "/tmp/t", lib="/c/lib.so", np=4)
    ['mpirun', '--oversubscribe', '-x', 'LD_PRELOAD=/c/lib.so', '-x', 'TOPOPLAN_TRACE_DIR=/tmp/t', '-np', '4', './app', '-n', '10']
    >>> launch_command(["./app"], "/tmp/t", lib="/c/lib.so", np=2, mpirun="mpiexec", flavor="mpich")
    ['mpiexec', '-genv', 'LD_PRELOAD', '/c/lib.so', '-genv', 'TOPOPLAN_TRACE_DIR', '/tmp/t', '-n', '2', './app']
    """
    env = {"LD_PRELOAD": str(lib), DIR_ENV: str(out_dir)}
    cmd = [mpirun]
    if flavor == "openmpi":
        cmd.append("--oversubscribe")
        for k, v in env.items():
            cmd += ["-x", f"{k}={v}"]
        cmd += ["-np", str(np)]
    elif flavor == "mpich":
        for k, v in env.items():
            cmd += ["-genv", k, v]
        cmd += ["-n", str(np)]
    else:
        cmd += ["-n", str(np)]
    return cmd + [str(a) for a in mpirun_args] + [str(a) for a in command]


def record(command, out_dir, *, np: int = 4, mpirun: str | None = None, mpirun_args=(), mpicc: str | None = None,
           timeout: float | None = None, quiet: bool = False):
    """Run an MPI program under ``mpirun`` with the recorder preloaded; return its trace.

    Parameters
    ----------
    command : list of str
        The program (a path, or a name on ``PATH``) and its arguments.
    out_dir : str or path
        The trace directory to write (created; an earlier trace in it is replaced).
    np : int, optional
        Number of ranks.
    mpirun : str, optional
        The launcher (default ``$MPIRUN``, else ``mpirun``).
    mpirun_args : list of str, optional
        More launcher options (a host file, ``--allow-run-as-root`` ...).
    mpicc : str, optional
        The compiler wrapper for :func:`build_library`.
    timeout : float, optional
        Seconds before the run is stopped.
    quiet : bool, optional
        Capture the program's output instead of passing it through (it is then
        shown only if the run fails).

    Returns
    -------
    topoplan.traffic.trace.Trace
        The trace as every ``-T`` option reads it from ``out_dir``.

    Raises
    ------
    TopoplanError
        If ``mpicc`` or ``mpirun`` is missing, the build or the run fails, or the
        program wrote no trace (it did not call ``MPI_Finalize``, is not an MPI
        program of this MPI, or calls MPI from Fortran, whose bindings the
        recorder does not intercept).

    Notes
    -----
    Run as root, Open MPI refuses to start unless ``OMPI_ALLOW_RUN_AS_ROOT=1`` and
    ``OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1`` are set (containers); they are set for the run
    when the effective user is root.

    Examples
    --------
    >>> record(["./app"], "/tmp/app-trace", mpirun="no-such-mpirun", mpicc="/bin/true")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: no-such-mpirun not found: install Open MPI (apt-get install openmpi-bin) or load your MPI module, or set MPIRUN to your MPI launcher

    With MPI installed (this needs ``mpicc`` and ``mpirun``):

    >>> trace = record(["./ring"], "ring-trace", np=4)     # doctest: +SKIP
    >>> trace.n_ranks, trace.op_counts()["allreduce"]      # doctest: +SKIP
    (4, 8)
    """
    if int(np) < 1:
        raise TopoplanError(f"field 'np': need at least 1 rank, got {np}")
    command = [str(c) for c in command]
    if not command:
        raise TopoplanError("no program to run: give the program and its arguments after --")
    launcher_name = mpirun or os.environ.get("MPIRUN") or "mpirun"
    launcher = shutil.which(launcher_name)
    if launcher is None:
        raise TopoplanError(f"{launcher_name} not found: install Open MPI (apt-get install openmpi-bin) or load your "
                            f"MPI module, or set MPIRUN to your MPI launcher")
    lib = build_library(mpicc)
    prog = command[0]
    if os.sep not in prog and shutil.which(prog) is None:
        raise TopoplanError(f"{prog}: no such program (give a path, e.g. ./{prog})")
    if os.sep in prog and not os.path.isfile(prog):
        raise TopoplanError(f"{prog}: no such program")

    out = Path(out_dir).absolute()
    # the recorder makes the directory (rank 0, at MPI_Finalize); one this run makes is removed if it fails
    made = _missing_dirs(out)
    try:
        if out.exists() and not out.is_dir():
            raise TopoplanError(f"{out}: not a directory: the trace is a directory (events.csv, communicators.csv)")
        for name in ("events.csv", "communicators.csv"):
            (out / name).unlink(missing_ok=True)   # never read an earlier run's trace as this one's
        ancestor = next(p for p in (out, *out.parents) if p.exists())
        if not os.access(ancestor, os.W_OK | os.X_OK):
            raise TopoplanError(f"{out}: cannot write the trace there (permission denied in {ancestor})")
    except OSError as exc:
        raise TopoplanError(f"{out}: cannot write the trace there: {exc.strerror}") from None

    flavor = mpi_flavor(launcher)
    cmd = launch_command(command, out, lib=lib, np=int(np), mpirun=launcher, flavor=flavor,
                         mpirun_args=mpirun_args)
    env = dict(os.environ, **{DIR_ENV: str(out)})
    if flavor == "openmpi" and hasattr(os, "geteuid") and os.geteuid() == 0:
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    try:
        try:
            res = subprocess.run(cmd, env=env, timeout=timeout, capture_output=quiet, text=True)
        except subprocess.TimeoutExpired:
            raise TopoplanError(f"{prog}: still running after {timeout:g} s; stopped (no trace)") from None
        except OSError as exc:
            raise TopoplanError(f"{launcher}: cannot run: {exc.strerror}") from None
        if res.returncode != 0:
            detail = ""
            if quiet:
                lines = [ln for ln in (res.stderr or res.stdout or "").splitlines() if ln.strip()]
                detail = f": {lines[-1].strip()}" if lines else ""
            raise TopoplanError(f"{' '.join(command)}: exited with status {res.returncode} under "
                                f"{os.path.basename(launcher)}{detail}")
        events = out / "events.csv"
        if not events.is_file():
            raise TopoplanError(f"{out}: no trace written: {prog} did not reach MPI_Finalize, is not linked with the "
                                f"MPI of {os.path.basename(launcher)}, or calls MPI from Fortran (not recorded)")
    except BaseException:   # a failed run (or Ctrl-C) leaves no trace and no directory of its own behind
        for name in ("events.csv", "communicators.csv"):
            (out / name).unlink(missing_ok=True)
        _remove_empty(made)
        raise
    return read_trace(events)


def _missing_dirs(path: Path) -> list[Path]:
    """The directories of ``path`` (itself, then its parents) that do not exist yet, deepest first."""
    out = []
    for p in (path, *path.parents):
        if p.exists():
            break
        out.append(p)
    return out


def _remove_empty(dirs) -> None:
    """Remove the directories of ``dirs`` (deepest first) that exist and are empty; others stay."""
    for d in dirs:
        try:
            d.rmdir()
        except OSError:   # not there, or not empty (the program wrote files of its own): left as it is
            return
