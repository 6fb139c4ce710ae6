"""Atomic file output: write to a temporary file beside the target, then rename."""

from __future__ import annotations

import gzip
import json
import os
import tempfile
from pathlib import Path

from planner.errors import TopoplanError


def check_writable(path, *, inputs=()) -> Path:
    """Fail early, before any work, if ``path`` cannot be written or would overwrite an input.

    Parameters: ``path`` the output file; ``inputs`` files the same command reads.
    Returns the path. Raises :class:`TopoplanError` naming the path.

    >>> check_writable("/nonexistent-dir/x.json")  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    TopoplanError: /nonexistent-dir/x.json: directory /nonexistent-dir does not exist
    """
    path = Path(path)
    if path.is_dir():
        raise TopoplanError(f"{path}: is a directory, not an output file")
    parent = path.parent
    if not parent.is_dir():
        raise TopoplanError(f"{path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise TopoplanError(f"{path}: cannot write here (permission denied)")
    for src in inputs:
        if src is not None and _same_file(path, src):
            raise TopoplanError(f"{path}: output would overwrite the input {src}; choose another name")
    return path


def _same_file(a, b) -> bool:
    try:
        return Path(a).exists() and Path(b).exists() and os.path.samefile(a, b)
    except OSError:
        return False


def atomic_write(path, data, *, binary: bool = False) -> None:
    """Write ``data`` (str or bytes) to ``path`` so readers never see a half-written file.

    A name ending in ``.gz`` is gzip-compressed. The directory must exist. Any OS error
    (permissions, a directory in the way, a full disk) is a :class:`TopoplanError` naming the path.
    """
    path = Path(path)
    check_writable(path)
    raw = data if binary or isinstance(data, bytes) else data.encode("utf-8")
    if path.suffix == ".gz":
        raw = gzip.compress(raw, mtime=0)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        # mkstemp makes the file 0600; give it the permissions a plain open() would (umask applied),
        # or the existing file's, so a rewritten hostfile stays readable by whoever could read it
        mode = path.stat().st_mode & 0o777 if path.exists() else 0o666 & ~_umask()
        os.chmod(tmp, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
        os.replace(tmp, path)
    except OSError as exc:
        _discard(tmp)
        raise TopoplanError(f"{path}: cannot write: {exc.strerror or exc}") from None
    except BaseException:
        _discard(tmp)
        raise


def _discard(tmp) -> None:
    if tmp is not None and os.path.exists(tmp):
        os.unlink(tmp)


def _umask() -> int:
    cur = os.umask(0)
    os.umask(cur)
    return cur


def write_json(path, obj) -> None:
    """Write JSON atomically (numpy scalars and arrays are converted)."""
    atomic_write(path, dumps(obj) + "\n")


def dumps(obj, indent: int | None = 1) -> str:
    return json.dumps(obj, indent=indent, default=_default)


def _default(o):
    import numpy as np

    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.bool_):
        return bool(o)
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def read_text(path, what: str = "file", *, lenient: bool = False) -> str:
    """Text of ``path`` (UTF-8), with one-line errors naming the file for every way reading can fail.

    Parameters: ``what`` names the kind of file in messages; ``lenient`` replaces undecodable bytes
    (for vendor dumps with stray Latin-1 names) instead of failing. Binary data (NUL bytes) is
    always an error.

    >>> read_text("/no/such/hostfile", "hostfile")  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    TopoplanError: /no/such/hostfile: no such hostfile
    """
    path = Path(path)
    if not path.is_file():
        raise TopoplanError(f"{path}: no such {what}")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise TopoplanError(f"{path}: cannot read {what}: {exc.strerror or exc}") from None
    if not raw.strip():
        raise TopoplanError(f"{path}: empty {what}")
    if b"\0" in raw[:4096]:
        raise TopoplanError(f"{path}: binary data, not a text {what}")
    try:
        return raw.decode("utf-8", errors="replace" if lenient else "strict")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise TopoplanError(f"{path}:{line}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset "
                            f"{exc.start}); expected a text {what}") from None


def read_json(path, what: str = "JSON file"):
    path = Path(path)
    if not path.is_file():
        raise TopoplanError(f"{path}: no such file")
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        return json.loads(raw.decode("utf-8"))
    except json.JSONDecodeError as exc:
        raise TopoplanError(f"{path}:{exc.lineno}: malformed {what}: {exc.msg}") from None
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        raise TopoplanError(f"{path}: cannot read {what}: {exc}") from None
