"""Atomic file output (write to a temporary file beside the target, then rename), and bounded input.

An output named ``-`` (:data:`STDOUT`) is standard output: a text document is written there whole, and a binary
one is refused.

Every input file that may be gzip-compressed is read by :func:`read_bytes`, which decompresses it as a
stream and stops at a bound: a few megabytes of gzip can expand to gigabytes ("gzip bomb").
"""

from __future__ import annotations

import contextvars
import errno
import gzip
import json
import os
import stat
import sys
import zipfile
from contextlib import contextmanager, redirect_stdout
from pathlib import Path

from topoplan.core.errors import TopoplanError

__all__ = ["MAX_INPUT_BYTES", "STDOUT", "is_stdout", "stdout_reserved", "check_writable", "atomic_write",
           "output_group", "write_json", "dumps", "read_bytes", "read_text", "read_json", "is_json_document",
           "ARCHIVE_FORMAT", "ARCHIVE_VERSION", "is_plan_archive", "read_plan_archive", "find_long_number"]

# The most a JSON input (a plan, a placement, a flow scenario, a phases or schedule document) may hold, once
# decompressed: 256 MiB, ten times the largest plans written (a 1,024-node circuit plan with its forwarding
# tables: ~20 MB); json.loads then takes several times the text in memory. CSV tables have their own bound
# (topoplan.core.csvtable.MAX_CSV_BYTES, 1 GiB: 23 million trace rows).
MAX_INPUT_BYTES = 2 ** 28
_GZIP_MAGIC = b"\x1f\x8b"
_READ_CHUNK = 1 << 24

#: The output name that means standard output (``-o -``), as for most Unix tools.
STDOUT = "-"


def is_stdout(path) -> bool:
    """Whether an output name is :data:`STDOUT` (``-``): standard output, not a file.

    Parameters
    ----------
    path : str or path or None
        The output name.

    Returns
    -------
    bool

    Examples
    --------
    >>> from pathlib import Path
    >>> is_stdout("-"), is_stdout(Path("-")), is_stdout("plan.json"), is_stdout(None)
    (True, True, False, False)
    """
    return path is not None and os.fspath(path) == STDOUT


_stdout: contextvars.ContextVar = contextvars.ContextVar("topoplan_stdout", default=None)


@contextmanager
def stdout_reserved():
    """Keep standard output for the ``-`` outputs written in the block.

    Whatever else the block prints to standard output (a command's summary, ``wrote -``) goes
    to standard error instead, so a pipe receives the document alone.

    Yields
    ------
    None

    Examples
    --------
    >>> import contextlib, io
    >>> err = io.StringIO()
    >>> with contextlib.redirect_stderr(err), stdout_reserved():
    ...     print("wrote -")
    ...     atomic_write("-", "the document\\n")
    the document
    >>> err.getvalue()
    'wrote -\\n'
    """
    token = _stdout.set(sys.stdout)
    try:
        with redirect_stdout(sys.stderr):
            yield
    finally:
        _stdout.reset(token)


def _write_stdout(text: str) -> None:
    out = _stdout.get() or sys.stdout
    try:
        out.write(text)
        out.flush()
    except OSError as exc:   # a closed pipe
        raise TopoplanError(f"{STDOUT} (standard output): cannot write: {exc.strerror or exc}") from None


def check_writable(path, *, inputs=()) -> Path:
    """Fail early, before any work, if ``path`` cannot be written or would overwrite an input.

    Parameters
    ----------
    path : str or path
        The output file.
    inputs : iterable of str or path, optional
        Files the same command reads (None entries are skipped).

    Returns
    -------
    pathlib.Path
        The path.

    Raises
    ------
    TopoplanError
        Naming the path: a directory, a missing parent directory (or a file in
        its place), no write permission, or the same file as an input.

    Examples
    --------
    >>> check_writable("/nonexistent-dir/x.json")  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    TopoplanError: /nonexistent-dir/x.json: directory /nonexistent-dir does not exist
    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile(suffix=".csv") as f:
    ...     check_writable(f.name + "/x.json")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: ...csv/x.json: ...csv is a file, not a directory
    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile() as f:
    ...     check_writable(f.name, inputs=[f.name])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: ...: output would overwrite the input ...; choose another name
    """
    if is_stdout(path):   # standard output: nothing to check, and never one of the inputs
        return Path(STDOUT)
    path = Path(path)
    if path.is_dir():
        raise TopoplanError(f"{path}: is a directory, not an output file")
    kind = _special(path)
    if kind in ("socket", "block device"):
        raise TopoplanError(f"{path}: is a {kind}, not an output file")
    if kind is not None:   # a FIFO or character device (/dev/null, /dev/stdout): written into, never replaced
        if not os.access(path, os.W_OK):
            raise TopoplanError(f"{path}: cannot write here (permission denied)")
        return path
    parent = path.parent
    if not parent.is_dir():
        # the nearest existing ancestor is what is in the way: a file where a directory should be, or none
        there = next((p for p in parent.parents if p.exists()), None) if not parent.exists() else parent
        if there is not None and not there.is_dir():
            raise TopoplanError(f"{path}: {there} is a file, not a directory")
        raise TopoplanError(f"{path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise TopoplanError(f"{path}: cannot write here (permission denied)")
    for src in inputs:
        if src is not None and _same_file(path, src):
            raise TopoplanError(f"{path}: output would overwrite the input {src}; choose another name")
    return path


def _special(path: Path) -> str | None:
    """What kind of special file ``path`` is (None: a regular file or nothing there)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    for test, name in ((stat.S_ISFIFO, "FIFO"), (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"),
                       (stat.S_ISSOCK, "socket")):
        if test(mode):
            return name
    return None


def _same_file(a, b) -> bool:
    try:
        return Path(a).exists() and Path(b).exists() and os.path.samefile(a, b)
    except OSError:
        return False


def atomic_write(path, data, *, binary: bool = False) -> None:
    """Write ``data`` (str or bytes) to ``path`` so readers never see a half-written file.

    A name ending in ``.gz`` is gzip-compressed. The directory must exist. Any OS error
    (permissions, a directory in the way, a full disk) is a :class:`TopoplanError` naming the path.
    The name ``-`` (:data:`STDOUT`) writes text to standard output (within :func:`output_group`, when
    the group succeeds); bytes are refused there.

    Parameters
    ----------
    path : str or path
        The file (``-``: standard output); an existing one keeps its permissions.
    data : str or bytes or list of str
        The content (str is written as UTF-8); a list of str pieces is written a piece at a time.
    binary : bool, optional
        Kept for callers that pass bytes explicitly; bytes are written as they are anyway.

    Raises
    ------
    TopoplanError
        Naming the path, when it cannot be written (nothing is left behind), or for bytes to
        standard output.

    Examples
    --------
    >>> import gzip, os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "hello.txt.gz")
    >>> atomic_write(path, "hello\\n")
    >>> gzip.decompress(open(path, "rb").read())
    b'hello\\n'
    >>> atomic_write("-", ["hello", "\\n"])
    hello
    >>> atomic_write("-", b"\\x89PNG")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: - (standard output): binary data, not text; give a file name
    """
    if is_stdout(path):
        if binary or isinstance(data, bytes):
            raise TopoplanError(f"{STDOUT} (standard output): binary data, not text; give a file name")
        text = "".join(data) if isinstance(data, list) else data
        group = _group.get()
        if group is not None:   # written with the group's other outputs, when all of them succeeded
            group.append((None, STDOUT, text))
        else:
            _write_stdout(text)
        return
    path = Path(path)
    check_writable(path)
    if isinstance(data, list) and (path.suffix == ".gz" or _special(path) is not None):
        data = "".join(data)
    raw = data if binary or isinstance(data, (bytes, list)) else data.encode("utf-8")
    if path.suffix == ".gz":
        raw = gzip.compress(raw, mtime=0)
    group = _group.get()
    if _special(path) is not None:   # a FIFO or character device: write into it (replacing /dev/null would be wrong)
        if group is not None:
            group.append((None, path, raw))
        else:
            _write_special(path, raw)
        return
    tmp = None
    try:
        for _ in range(_TEMP_TRIES):
            tmp = _temp_name(path)   # held before the file exists (see _temp_name)
            try:
                fd = os.open(tmp, _TEMP_FLAGS, 0o600)
                break
            except FileExistsError:   # another writer's: not ours to discard
                tmp = None
        else:
            raise FileExistsError(errno.EEXIST, f"no free temporary name after {_TEMP_TRIES} tries")
        with os.fdopen(fd, "wb") as fh:
            # the file is made 0600; give it the permissions a plain open() would (umask applied),
            # or the existing file's, so a rewritten hostfile stays readable by whoever could read it
            os.fchmod(fh.fileno(), path.stat().st_mode & 0o777 if path.exists() else 0o666 & ~_umask())
            if isinstance(raw, list):
                for piece in raw:
                    fh.write(piece.encode("utf-8"))
            else:
                fh.write(raw)
        if group is not None:   # renamed into place when the whole group succeeded
            group.append((tmp, path, None))
            return
        os.replace(tmp, path)
    except OSError as exc:
        _discard(tmp)
        raise TopoplanError(f"{path}: cannot write: {exc.strerror or exc}") from None
    except BaseException:
        _discard(tmp)
        raise


# A temporary file's name is chosen, and held by atomic_write's ``tmp``, before the file is made: with
# tempfile.mkstemp the name came back only once the file existed, so an interrupt (Ctrl-C) between the two left a
# hidden file that no handler knew of. Until the file is made there is nothing to discard; once it is, ``tmp``
# names it, wherever the interrupt lands.
_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_TEMP_TRIES = 100


def _temp_name(path: Path) -> str:
    """A hidden name beside ``path`` for its temporary file (48 random bits: ``.<name>.<12 hex digits>``)."""
    return os.path.join(path.parent, f".{path.name}.{os.urandom(6).hex()}")


_group: contextvars.ContextVar = contextvars.ContextVar("topoplan_output_group", default=None)


def _write_special(path, raw) -> None:
    if is_stdout(path):
        _write_stdout(raw)
        return
    try:
        fd = os.open(path, os.O_WRONLY)   # no O_CREAT / O_TRUNC: the device or FIFO stays what it is
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
    except OSError as exc:
        raise TopoplanError(f"{path}: cannot write: {exc.strerror or exc}") from None


@contextmanager
def output_group():
    """Make every :func:`atomic_write` in the block part of one all-or-nothing output set.

    Files are written to temporary files beside their targets as the block runs; they are renamed
    into place only when the whole block succeeded, and discarded when it raised (an error, Ctrl-C),
    so a command with two outputs never leaves one of them behind; an interrupt or an error while they
    are renamed removes the new files already in place too. FIFOs, character devices and
    standard output are written at the end, after the regular files.

    Yields
    ------
    None

    Examples
    --------
    >>> import os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> a, b = os.path.join(tmp.name, "a.txt"), os.path.join(tmp.name, "no-dir", "b.txt")
    >>> with output_group():                      # doctest: +ELLIPSIS
    ...     atomic_write(a, "plan")
    ...     atomic_write(b, "rankfile")           # fails: its directory does not exist
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: .../b.txt: directory .../no-dir does not exist
    >>> os.listdir(tmp.name)                      # a.txt was not left behind
    []
    """
    staged: list = []
    placed: list = []   # the files the group put in place where there was none
    outer = _group.get()
    committing = False
    try:
        try:
            _group.set(staged)   # (inside the try: an interrupt right after it still puts the outer group back)
            yield
        finally:
            _group.set(outer)
        committing = True
        for tmp, path, _ in staged:
            if tmp is not None:
                if not os.path.lexists(path):
                    placed.append(path)   # (before the rename: an interrupt right after it finds it here)
                os.replace(tmp, path)
    except BaseException as exc:   # an error or an interrupt, wherever it lands: nothing of the group is left
        _group.set(outer)   # (again: an interrupt in the finally above may have come before it)
        for tmp, _, _ in staged:
            _discard(tmp)
        for path in placed:
            _discard(path)
        if committing and isinstance(exc, OSError):
            raise TopoplanError(f"cannot write the outputs: {exc.strerror or exc}") from None
        raise
    for tmp, path, raw in staged:
        if tmp is None:
            _write_special(path, raw)


def _discard(tmp) -> None:
    if tmp is not None and os.path.exists(tmp):
        os.unlink(tmp)


def _umask() -> int:
    cur = os.umask(0)
    os.umask(cur)
    return cur


def write_json(path, obj) -> None:
    """Write JSON atomically (numpy scalars and arrays are converted).

    Parameters
    ----------
    path : str or path
        The file (``.gz``: compressed).
    obj : object
        Anything :func:`dumps` accepts.

    Raises
    ------
    TopoplanError
        When the file cannot be written, or ``obj`` holds a NaN or an infinity (:func:`dumps`).

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "out.json")
    >>> write_json(path, {"a": np.arange(3), "b": np.float64(0.5)})
    >>> read_json(path)
    {'a': [0, 1, 2], 'b': 0.5}
    """
    try:
        pieces = _pieces(obj)
    except TopoplanError as exc:
        raise TopoplanError(f"{path}: {exc}; nothing written") from None
    pieces.append("\n")
    atomic_write(path, pieces)   # written a piece at a time: no second copy of a large document


def dumps(obj, indent: int | None = 1) -> str:
    """JSON text of ``obj``, converting NumPy arrays and scalars and paths.

    Objects and lists of lists (lists whose first item is a container) are laid out one member per line;
    any other list (a table row, a circuit, a placement), and each row of an object of rows (an object
    whose first member is an object of scalars, such as forwarding tables), stays on one line, so a plan's tables read row by row and large files are
    written by the compiled encoder, about four times faster than fully indented JSON.
    An object with a ``json_layout(level, indent)`` method (a plan's forwarding tables held as an array,
    :class:`topoplan.plans.circuits.ForwardingTables`) writes its own text (a list of pieces), which must
    be the text of the equal dict.

    Parameters
    ----------
    obj : object
    indent : int or None, optional
        Spaces per nesting level; None for one line.

    Returns
    -------
    str

    Raises
    ------
    TypeError
        For an object JSON cannot hold.
    TopoplanError
        For a NaN or an infinity, naming its field: JSON has neither, and a reader would fail on the
        document (or, worse, read it as a number).

    Examples
    --------
    >>> import numpy as np
    >>> dumps({"a": np.arange(2), "ok": np.bool_(True)}, indent=None)
    '{"a": [0, 1], "ok": true}'
    >>> print(dumps({"plan": {"circuits": [[0, 16], [1, 17]], "seed": 0}, "empty": []}))
    {
     "plan": {
      "circuits": [
       [0, 16],
       [1, 17]
      ],
      "seed": 0
     },
     "empty": []
    }
    >>> dumps({"entries": [{"from_s": 0.0}, {"from_s": float("nan")}]})
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: field 'entries[1].from_s': nan is not a finite number (JSON has no NaN or Infinity)
    """
    return "".join(_pieces(obj, indent))


def _pieces(obj, indent: int | None = 1) -> list[str]:
    """:func:`dumps`'s text in pieces (joined, the text), for a large document to be written without one
    string of it all."""
    try:
        if indent is None:
            return [_ONE_LINE.encode(obj)]
        out: list[str] = []
        _layout(obj, 0, indent, out, _arrays())
        return out
    except ValueError as exc:   # json's "Out of range float values are not JSON compliant"
        found = _non_finite(obj)
        if found is None:
            raise
        field, value = found
        raise TopoplanError(f"field '{field}': {value!r} is not a finite number (JSON has no NaN or Infinity)") \
            from None


def _non_finite(obj, path: str = ""):
    """``(dotted path, value)`` of the first NaN or infinity in ``obj`` (dicts, lists, NumPy arrays), or None."""
    import math

    import numpy as np

    if isinstance(obj, (float, np.floating)):
        return None if math.isfinite(obj) else (path or "(the document)", float(obj))
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind != "f" or np.isfinite(obj).all():
            return None
        obj = obj.tolist()
    if isinstance(obj, dict):
        items = ((f"{path}.{k}" if path else str(k), v) for k, v in obj.items())
    elif isinstance(obj, (list, tuple)):
        items = ((f"{path}[{i}]", v) for i, v in enumerate(obj))
    else:
        return None
    for p, v in items:
        found = _non_finite(v, p)
        if found is not None:
            return found
    return None


_CONTAINERS = (dict, list, tuple)


def _arrays() -> tuple:
    """NumPy's array type when NumPy is loaded, else nothing: no array exists before NumPy is imported, so a
    document of plain values is written without importing it (it costs a small command 0.1-0.2 s to start)."""
    np = sys.modules.get("numpy")
    return (np.ndarray,) if np is not None else ()


def _layout(o, level: int, indent: int, out: list, arrays: tuple = ()) -> None:
    own = getattr(o, "json_layout", None)   # an object that lays out its own text (a plan's tables held as an array)
    if own is not None and not isinstance(o, (str, dict, list, tuple)):
        out.extend(own(level, indent))
        return
    if isinstance(o, arrays):
        if o.ndim <= 1:
            out.append(json.dumps(o.tolist(), allow_nan=False))
            return
        o = list(o)
    if isinstance(o, dict):
        if not o:
            out.append("{}")
            return
        pad = "\n" + " " * (indent * (level + 1))
        sep = "{"
        first = next(iter(o.values()))
        # a table keyed by rows (forwarding tables: node -> {switch: next hop}): each row on one line
        rows = isinstance(first, dict) and bool(first) and not isinstance(next(iter(first.values())), _CONTAINERS)
        for k, v in o.items():
            key = k if isinstance(k, str) else json.dumps(k, allow_nan=False)   # JSON's own key conversion (int, float, bool, None)
            out.append(sep + pad + json.dumps(key) + ": ")
            if rows and isinstance(v, dict):
                out.append(_ONE_LINE.encode(v))
            else:
                _layout(v, level + 1, indent, out, arrays)
            sep = ","
        out.append("\n" + " " * (indent * level) + "}")
    elif isinstance(o, (list, tuple)):
        nested = (*_CONTAINERS, *arrays)
        if not o or not isinstance(o[0], nested):   # a row (of scalars): one line
            out.append(_ONE_LINE.encode(o))
            return
        pad = "\n" + " " * (indent * (level + 1))
        first = o[0]
        if isinstance(first, (list, tuple)) and not any(isinstance(x, nested) for x in first):
            # a table of rows (a forwarding table of millions): one compiled call, then a row per line, when
            # the text shows two levels of brackets and no string (so "], [" only ever joins two rows)
            text = _ONE_LINE.encode(o)
            if '"' not in text and text.count("[") == len(o) + 1:
                out.append("[" + pad + text[1:-1].replace("], [", "]," + pad + "[") + "\n" + " " * (indent * level)
                           + "]")
                return
        if isinstance(first, dict) and _flat_objects(o, nested):
            # a list of objects of scalars (a simulation's flows: id and finish time each): one compiled call
            # whose separators are bare newlines, which JSON strings never hold, then each line indented
            inner = pad + " " * indent
            text = _NEWLINES.encode(o)[2:-2].replace(',\n"', "," + inner + '"')
            out.append("[" + pad + "{" + inner + text.replace("},\n{", pad + "}," + pad + "{" + inner) + pad + "}"
                       + "\n" + " " * (indent * level) + "]")
            return
        sep = "["
        for x in o:
            out.append(sep + pad)
            _layout(x, level + 1, indent, out, arrays)
            sep = ","
        out.append("\n" + " " * (indent * level) + "]")
    else:
        out.append(_ONE_LINE.encode(o))


def _flat_objects(items, nested: tuple) -> bool:
    """Whether every item is a non-empty object with string keys and no container (array, list, object) inside."""
    for d in items:
        if not isinstance(d, dict) or not d:
            return False
        for k, v in d.items():
            if not isinstance(k, str) or isinstance(v, nested):
                return False
    return True


@contextmanager
def _no_gc():
    import gc

    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _default(o):
    np = sys.modules.get("numpy")   # not imported for a path: a NumPy value exists only once NumPy is loaded
    if np is not None:
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
    if hasattr(o, "json_layout") and hasattr(o, "items"):   # a mapping that lays out its own text (see _layout)
        return dict(o.items())
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


# json.dumps with options builds an encoder at every call; these are built once. _NEWLINES separates members
# and items by a bare newline, for _layout to indent.
_ONE_LINE = json.JSONEncoder(default=_default, allow_nan=False)
_NEWLINES = json.JSONEncoder(default=_default, allow_nan=False, separators=(",\n", ": "))


def _bytes(n: int) -> str:
    return f"{n:,} bytes" + (f" ({n / 2 ** 30:g} GiB)" if n >= 2 ** 30 else "")


def read_bytes(path, what: str = "file", *, limit: int | None = None, max_rows: int | None = None,
               head: bool = False) -> bytes:
    """The bytes of an input file, gunzipped when it starts with the gzip magic, never more than ``limit``.

    A gzip file is decompressed as a stream, a slice at a time, and refused as soon as it passes the
    bound, so a small file that expands to gigabytes costs at most ``limit`` bytes of memory and the
    time to decompress them. A plain file is refused by its size, before it is read.

    Parameters
    ----------
    path : str or path
    what : str, optional
        Names the kind of file in messages.
    limit : int, optional
        The most bytes (once decompressed); default :data:`MAX_INPUT_BYTES`.
    max_rows : int, optional
        For a table with a header line: the most rows (lines after the first), counted as it is read.
    head : bool, optional
        Return the first ``limit`` bytes of a larger file instead of refusing it (to look at its header).

    Returns
    -------
    bytes

    Raises
    ------
    TopoplanError
        Naming the file: missing or unreadable, corrupt gzip data, over ``limit`` bytes or ``max_rows`` rows.

    Examples
    --------
    >>> import gzip, os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "plan.json.gz")
    >>> with open(path, "wb") as fh:
    ...     _ = fh.write(gzip.compress(b"[" + b"0," * 5000 + b"0]"))
    >>> len(read_bytes(path, "plan"))
    10003
    >>> read_bytes(path, "plan", limit=1000)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: .../plan.json.gz: more than 1,000 bytes once decompressed, over the limit for a plan
    """
    import zlib

    path = Path(path)
    limit = MAX_INPUT_BYTES if limit is None else int(limit)
    try:
        with open(path, "rb") as fh:
            gz = fh.read(2) == _GZIP_MAGIC
            fh.seek(0)
            if not gz and head:
                return fh.read(limit)
            if not gz:
                size = os.fstat(fh.fileno()).st_size
                data = fh.read(limit + 1) if size <= limit else b""
                if size > limit or len(data) > limit:
                    raise TopoplanError(f"{path}: {max(size, len(data)):,} bytes, over the limit of {_bytes(limit)} "
                                        f"for a {what}")
                if max_rows is not None:
                    lines = data.count(b"\n") + (not data.endswith(b"\n"))
                    if lines > max_rows + 1:
                        raise _too_many_lines(path, what, lines, max_rows)
                return data
            parts, total, lines = [], 0, 0
            with gzip.GzipFile(fileobj=fh) as z:
                while True:
                    part = z.read(min(_READ_CHUNK, limit + 1 - total))
                    if not part:
                        break
                    total += len(part)
                    if total > limit and head:
                        parts.append(part[:len(part) - (total - limit)])
                        break
                    if total > limit:
                        raise TopoplanError(f"{path}: more than {_bytes(limit)} once decompressed, over the limit "
                                            f"for a {what}")
                    if max_rows is not None:
                        lines += part.count(b"\n")
                        if lines > max_rows + 1:
                            raise _too_many_lines(path, what, lines, max_rows)
                    parts.append(part)
            data = b"".join(parts)
            if max_rows is not None and data and not data.endswith(b"\n") and lines + 1 > max_rows + 1:
                raise _too_many_lines(path, what, lines + 1, max_rows)
            return data
    except FileNotFoundError:
        raise TopoplanError(f"{path}: no such file") from None
    except (OSError, EOFError, zlib.error) as exc:   # gzip.BadGzipFile is an OSError
        raise TopoplanError(f"{path}: cannot read {what}: {exc}") from None


def _too_many_lines(path, what: str, lines: int, max_rows: int):
    return TopoplanError(f"{path}: {lines:,} lines or more, over the limit of {max_rows:,} rows for a {what}")


def read_text(path, what: str = "file", *, lenient: bool = False) -> str:
    """Text of ``path`` (UTF-8, after a byte order mark if it has one), with one-line errors naming the file for
    every way reading can fail.

    Parameters
    ----------
    path : str or path
    what : str, optional
        Names the kind of file in messages.
    lenient : bool, optional
        Replace undecodable bytes (for vendor dumps with stray Latin-1 names)
        instead of failing. Binary data (NUL bytes) is always an error.

    Returns
    -------
    str

    Raises
    ------
    TopoplanError
        Naming the file (and line, for bad UTF-8): missing, unreadable, empty, binary or not UTF-8.

    Examples
    --------
    >>> read_text("/no/such/hostfile", "hostfile")  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    TopoplanError: /no/such/hostfile: no such hostfile
    """
    path = Path(path)
    if path.is_dir():   # (it exists: "no such" sent the user looking for a missing file)
        raise TopoplanError(f"{path}: is a directory, not a file (expected: {what})")
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
        # utf-8-sig: a byte order mark (Windows editors write one) is read past, as in CSV and JSON files; kept,
        # it became part of the first host name or node of a hostfile or an allocation
        return raw.decode("utf-8-sig", errors="replace" if lenient else "strict")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise TopoplanError(f"{path}:{line}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset "
                            f"{exc.start}); expected a text {what}") from None


def read_json(path, what: str = "JSON file"):
    """Parse a JSON file (plain or gzip), with one-line errors naming the file and line.

    Parameters
    ----------
    path : str or path
    what : str, optional
        Names the kind of file in messages.

    Returns
    -------
    object
        The parsed document.

    Raises
    ------
    TopoplanError
        For a missing, empty or unreadable file or a directory, malformed JSON (naming the line),
        a key given twice in one object (naming the key and line: JSON
        parsers disagree on which one wins), ``NaN`` or ``Infinity`` (which
        JSON does not have, naming the line), or nesting too deep to parse.

    Examples
    --------
    >>> import os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "plan.json")
    >>> with open(path, "w") as fh:
    ...     _ = fh.write('{"order": [1, 0],\\n "root": }')
    >>> read_json(path, "plan")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: .../plan.json:2: malformed plan: Expecting value
    >>> with open(path, "w") as fh:
    ...     _ = fh.write('{"root": 0,\\n "order": [1, 0],\\n "root": 1}')
    >>> read_json(path, "plan")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: .../plan.json:3: malformed plan: duplicate key 'root'
    >>> with open(path, "w") as fh:
    ...     _ = fh.write('{"setup_s": 0.01,\\n "from_s": NaN}')
    >>> read_json(path, "schedule")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: .../plan.json:2: malformed schedule: NaN is not a JSON number
    >>> read_json(tmp.name, "plan")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: ...: is a directory, not a plan file
    >>> with open(path, "w") as fh:
    ...     _ = fh.write("\\n")
    >>> read_json(path, "plan")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: .../plan.json: empty file, expected a plan
    """
    path = Path(path)
    if path.is_dir():
        raise TopoplanError(f"{path}: is a directory, not a {what} file")
    if not path.is_file():
        raise TopoplanError(f"{path}: no such file")
    raw = read_bytes(path, what)   # bounded: a gzip bomb is refused while it is decompressed
    try:
        text = raw.decode("utf-8-sig")   # a byte order mark in front is read past, as in CSV files
    except UnicodeDecodeError as exc:
        raise TopoplanError(f"{path}: cannot read {what}: {exc}") from None
    if not text.strip():   # json's own message, 'Expecting value', does not say the file is empty
        raise TopoplanError(f"{path}: empty file, expected a {what}")
    return _loads(text, path, what)


def _loads(text: str, where, what: str):
    """The JSON document of ``text`` (from the file ``where``), read as :func:`read_json` reads it: a repeated
    key, ``NaN``/``Infinity`` or an integer too long to convert are one-line errors naming ``where`` and the
    line."""
    try:
        try:
            with _no_gc():   # millions of small lists (a large plan's tables): collections would triple the time
                return json.loads(text, object_pairs_hook=_unique_pairs, parse_constant=_no_constant)
        except _DuplicateKey as dup:
            line = _fault_line(text)
            raise TopoplanError(f"{where}{'' if line is None else f':{line}'}: malformed {what}: duplicate key "
                                f"{dup.key!r}") from None
        except _NonFinite as bad:
            line = _fault_line(text)
            raise TopoplanError(f"{where}{'' if line is None else f':{line}'}: malformed {what}: {bad.name} is not "
                                "a JSON number") from None
    except json.JSONDecodeError as exc:
        raise TopoplanError(f"{where}:{exc.lineno}: malformed {what}: {exc.msg}") from None
    except RecursionError:
        raise TopoplanError(f"{where}: malformed {what}: nested too deeply") from None
    except ValueError:   # an integer of more digits than Python converts (sys.get_int_max_str_digits)
        raise _long_number(where, what, text) from None


def _long_number(path, what: str, text: str) -> TopoplanError:
    """The one-line error for a JSON document holding an integer too long to convert (``int()`` refuses more than
    ``sys.get_int_max_str_digits()`` digits, 4,300 by default: a ValueError, not a JSONDecodeError), naming its
    line."""
    found = find_long_number(text, integer=True)
    if found is None:
        return TopoplanError(f"{path}: malformed {what}: a number too long to read")
    line, digits = found
    return TopoplanError(f"{path}:{line}: malformed {what}: a number of {digits:,} digits (at most "
                         f"{sys.get_int_max_str_digits():,} are read)")


def find_long_number(text: str, *, integer: bool = False):
    """``(line, digits)`` of the first run of more digits in ``text`` than ``int()`` converts
    (``sys.get_int_max_str_digits()``, 4,300 by default; ``int()`` raises ValueError past it), or None.

    A reader that converts numbers out of text with ``int()`` (regular expressions of ``\\d+``) checks the text
    with this first, so such a number is a one-line error naming the line rather than a traceback. With
    ``integer``, only integers count (JSON: not the digits of a fraction or an exponent, which ``float()``
    reads).

    Examples
    --------
    >>> find_long_number("a 12\\nb " + "9" * 4301), find_long_number("0." + "5" * 4400, integer=True)
    ((2, 4301), None)
    """
    import re

    limit = sys.get_int_max_str_digits()
    if not limit or len(text) <= limit:
        return None
    # (\d: Unicode digits too, as int() and the readers' patterns take them)
    pattern = r"(?<![\d.])\d{%d,}(?![\d.eE])" if integer else r"\d{%d,}"
    found = re.search(pattern % (limit + 1), text)
    if found is None:
        return None
    return text.count("\n", 0, found.start()) + 1, len(found.group())


class _DuplicateKey(Exception):
    def __init__(self, key, line=None):
        super().__init__(key)
        self.key, self.line = key, line


def _unique_pairs(pairs):
    """``object_pairs_hook``: a dict, or ``_DuplicateKey`` for a key given twice (json.loads lets the last win)."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen = set()
        for k, _ in pairs:
            if k in seen:
                raise _DuplicateKey(k)
            seen.add(k)
    return out


class _NonFinite(Exception):
    def __init__(self, name, line=None):
        super().__init__(name)
        self.name, self.line = name, line


def _no_constant(name):
    """``parse_constant``: Python's json reads ``NaN`` and ``Infinity``, which are not JSON."""
    raise _NonFinite(name)


def _fault_line(text: str):
    """Line of the first repeated key or ``NaN``/``Infinity``: the slow pure-Python parser, run only after the fast
    one found one."""
    import json.decoder
    import json.scanner

    decoder = json.JSONDecoder()

    def checked(scan_once, s, idx):
        for name in ("NaN", "Infinity", "-Infinity"):
            if s.startswith(name, idx):
                raise _NonFinite(name, s.count("\n", 0, idx) + 1)
        return scan_once(s, idx)

    def parse_array(s_and_end, scan_once):
        return json.decoder.JSONArray(s_and_end, lambda s, idx: checked(scan_once, s, idx))

    def parse_object(s_and_end, strict, scan_once, object_hook, object_pairs_hook, memo=None):
        starts = []

        def scan(s, idx):
            starts.append(idx)
            return checked(scan_once, s, idx)

        def hook(pairs):
            seen = set()
            for (k, _), at in zip(pairs, starts):
                if k in seen:
                    raise _DuplicateKey(k, s_and_end[0].count("\n", 0, at) + 1)
                seen.add(k)
            return dict(pairs)

        return json.decoder.JSONObject(s_and_end, strict, scan, object_hook, hook, memo)

    decoder.parse_object, decoder.parse_array = parse_object, parse_array
    decoder.scan_once = json.scanner.py_make_scanner(decoder)
    try:
        checked(decoder.scan_once, text, json.decoder.WHITESPACE.match(text, 0).end())
    except (_DuplicateKey, _NonFinite) as fault:
        return fault.line
    except (ValueError, RecursionError, StopIteration):
        return None
    return None


# A plan archive (topoplan.plans.planfile writes it): a zip of the document and the forwarding tables as an array.
# Read here, below the plans, so that whatever reads a plan file -- a placement's rank_to_node too -- takes it.
ARCHIVE_FORMAT = "topoplan-circuit-plan"   # a plan archive's "archive.format"
ARCHIVE_VERSION = 1                        # the archive version this topoplan writes and reads
ARCHIVE_DOC, ARCHIVE_TABLES = "plan.json", "next_hop.npy"
_ZIP_MAGIC = b"PK\x03\x04"


def is_plan_archive(path, what: str = "plan") -> bool:
    """Whether ``path`` is a file that starts as a zip does (a plan archive, by its content).

    Examples
    --------
    >>> import os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "plan.zip")
    >>> with open(path, "wb") as fh:
    ...     _ = fh.write(b"{}")
    >>> is_plan_archive(path)
    False
    """
    return Path(path).is_file() and read_bytes(path, what, limit=len(_ZIP_MAGIC), head=True) == _ZIP_MAGIC


def is_json_document(path, what: str = "file") -> bool:
    """Whether ``path`` holds a JSON object or list, by its content (plain or gzip), whatever its name.

    A plan or placement written to a name without ``.json`` (``place -o placement``) is still JSON; a CSV's
    header never starts with ``{`` or ``[``.

    Parameters
    ----------
    path : str or path
    what : str, optional
        Names the kind of file in messages.

    Returns
    -------
    bool
        False for a missing file or a directory too.

    Examples
    --------
    >>> import os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "placement")
    >>> with open(path, "w") as fh:
    ...     _ = fh.write('\\n {"rank_to_node": [0]}')
    >>> is_json_document(path)
    True
    >>> with open(path, "w") as fh:
    ...     _ = fh.write("rank,node\\n0,0\\n")
    >>> is_json_document(path)
    False
    """
    if not Path(path).is_file():
        return False
    head = read_bytes(path, what, limit=4096, head=True)
    return head.removeprefix(b"\xef\xbb\xbf").lstrip()[:1] in (b"{", b"[")


def read_plan_archive(path, what: str = "plan"):
    """A plan archive's document (without its ``archive`` key) and its forwarding tables as a
    ``next_hop[node, switch]`` array (-1: no entry), not validated.

    Parameters
    ----------
    path : str or path
    what : str, optional
        Names the kind of file in messages.

    Returns
    -------
    (dict, numpy.ndarray)

    Raises
    ------
    TopoplanError
        One line naming the file: a damaged archive, one of another format or version, a member over the
        input limit once decompressed, or a next hop below -1 in the tables (naming the array and the entry).
        The tables' shape, and their next hops' nodes, are checked against a topology by the plan's
        validation (:func:`topoplan.plans.circuits.validate_plan_dict`).

    Examples
    --------
    >>> import os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "plan.zip")
    >>> with open(path, "wb") as fh:
    ...     _ = fh.write(b"PK\\x03\\x04 not a zip at all")
    >>> read_plan_archive(path)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: .../plan.zip: damaged plan archive (File is not a zip file)
    """
    import io

    import numpy as np   # here: this module is loaded by every command, --version included, which needs no NumPy

    raw = read_bytes(path, what)
    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as z:
            big = [i.filename for i in z.infolist() if i.file_size > MAX_INPUT_BYTES]
            if big:   # refused before it is inflated
                raise TopoplanError(f"{path}: plan archive member {big[0]} is over the input limit of "
                                    f"{MAX_INPUT_BYTES:,} bytes once decompressed")
            doc = _loads(z.read(ARCHIVE_DOC).decode("utf-8"), f"{path}: {ARCHIVE_DOC}", what)
            meta = doc.get("archive") if isinstance(doc, dict) else None
            if not isinstance(meta, dict) or meta.get("format") != ARCHIVE_FORMAT:
                raise TopoplanError(f"{path}: not a {ARCHIVE_FORMAT} archive ({ARCHIVE_DOC} has no 'archive' "
                                    f"of that format)")
            if meta.get("version") != ARCHIVE_VERSION:
                raise TopoplanError(f"{path}: plan archive version {meta.get('version')!r} is not supported "
                                    f"(this topoplan reads version {ARCHIVE_VERSION})")
            nh = np.load(io.BytesIO(z.read(ARCHIVE_TABLES)), allow_pickle=False)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, KeyError, ValueError, EOFError, OSError,
            UnicodeDecodeError) as exc:   # (json's errors are ValueErrors; a bad CRC is a BadZipFile)
        raise TopoplanError(f"{path}: damaged plan archive ({str(exc).strip() or type(exc).__name__})") from None
    if nh.ndim != 2 or nh.dtype.kind != "i":
        raise TopoplanError(f"{path}: damaged plan archive ({ARCHIVE_TABLES}: expected a 2-D integer array, got "
                            f"{nh.ndim}-D {nh.dtype})")
    low = np.flatnonzero(nh.ravel() < -1)   # -1 is no entry; any other negative number is no node
    if low.size:
        u, t = divmod(int(low[0]), nh.shape[1])
        raise TopoplanError(f"{path}: {ARCHIVE_TABLES}: field 'forwarding.{u}.{t}': next hop {int(nh[u, t])} is "
                            "neither a node id nor -1 (no entry)")
    doc.pop("archive")
    return doc, nh
