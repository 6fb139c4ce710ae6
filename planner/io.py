"""Atomic file output: write to a temporary file beside the target, then rename."""

from __future__ import annotations

import gzip
import json
import os
import tempfile
from pathlib import Path

from planner.errors import TopoplanError


def atomic_write(path, data, *, binary: bool = False) -> None:
    """Write ``data`` (str or bytes) to ``path`` so readers never see a half-written file.

    A name ending in ``.gz`` is gzip-compressed. The directory must exist.
    """
    path = Path(path)
    if not path.parent.exists():
        raise TopoplanError(f"{path}: directory {path.parent} does not exist")
    raw = data if binary or isinstance(data, bytes) else data.encode("utf-8")
    if path.suffix == ".gz":
        raw = gzip.compress(raw, mtime=0)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        # mkstemp makes the file 0600; give it the permissions a plain open() would (umask applied),
        # or the existing file's, so a rewritten hostfile stays readable by whoever could read it
        mode = path.stat().st_mode & 0o777 if path.exists() else 0o666 & ~_umask()
        os.chmod(tmp, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


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
