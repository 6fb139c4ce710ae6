"""CSV tables read strictly: the one reader of every CSV file topoplan takes (traces, matrices, placements).

:func:`read_csv_table` reads a plain or gzip CSV into a pandas DataFrame, refusing before it allocates a
file too large for its limits or for the memory left (:func:`topoplan.core.memory.memory_left`), and
checking every row's field count; :func:`to_numbers` turns a column into finite numbers and
:func:`row_line` gives the file line of a row, so every error names the file, the line and the field.

A caller that reads every column as numbers (``read_csv_table(..., numbers=True)``: communication and delay
matrices) gets a small file of plain numbers as a :class:`NumberTable` instead, parsed without importing
pandas (pandas and the pyarrow it loads were half a second of a ``place`` run on a 64-rank matrix): the same
values, and any file it does not take for certain (a cell that is not a plain number, an empty cell, a large
file) goes to pandas, so every message stays pandas' path's.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import numpy as np

from topoplan.core import memory
from topoplan.core.errors import TopoplanError, where
from topoplan.core.io import read_bytes
from topoplan.core.units import shown

__all__ = ["MAX_CSV_BYTES", "MAX_CSV_ROWS", "SMALL_CSV_BYTES", "NumberTable", "read_csv_table", "row_line",
           "to_numbers", "empty_cells"]


# A CSV file is read whole into memory before parsing: refuse, before allocating, one that cannot be
# held (a 2.5 MB gzip of one repeated row expands to gigabytes). Rows: MAX_CSV_ROWS, or the reader's
# max_rows (traces and matrices: topoplan.traffic.limits.MAX_TRACE_ROWS, the same number).
# Bytes of text (once decompressed): reading takes about 6 bytes of memory per byte of text (pandas'
# tokens, then the columns), so 1 GiB needs ~6.5 GB, what a generated trace of 85 million rows takes; it
# is 23 million trace rows, 50 times the largest NPB class C trace of 64 ranks (LU, 20 MB).
MAX_CSV_BYTES = 2 ** 30
MAX_CSV_ROWS = 100_000_000
# A file of plain numbers up to this size is parsed in Python without pandas (NumberTable): about 50,000 rows
# of a matrix, 0.1 s, where importing pandas alone takes 0.5 s.
SMALL_CSV_BYTES = 1 << 20
_BOM = b"\xef\xbb\xbf"      # UTF-8 byte order mark, written first by spreadsheet exports
_CHUNK = 1 << 20            # the field count runs over the text in slices that stay in the CPU cache


def _slice_end(data: bytes, at: int) -> int:
    """End of the slice of about ``_CHUNK`` bytes from ``at``: just after a newline, or the end of the data."""
    if at + _CHUNK >= len(data):
        return len(data)
    cut = data.rfind(b"\n", at, at + _CHUNK)
    if cut < 0:
        cut = data.find(b"\n", at + _CHUNK)
    return cut + 1 if cut >= 0 else len(data)


def _line_at(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def _check_text(data: bytes, path: Path, kind: str) -> None:
    """No NUL byte and valid UTF-8, else an error naming the line."""
    nul = data.find(b"\0")
    if nul >= 0:
        raise TopoplanError(f"{path}:{_line_at(data, nul)}: binary data (a NUL byte), not a CSV {kind}")
    if data.isascii():
        return
    at = 0
    while at < len(data):   # slices end after a newline, so no character is cut in two
        end = _slice_end(data, at)
        try:
            data[at:end].decode("utf-8")
        except UnicodeDecodeError as exc:
            bad = at + exc.start
            raise TopoplanError(f"{path}:{_line_at(data, bad)}: not UTF-8 text (byte 0x{data[bad]:02x} at offset "
                                f"{bad}); expected a CSV {kind}") from None
        at = end


def _header(names, line: int, path: Path) -> list[str]:
    names = [c.strip() for c in names]
    seen = set()
    for c in names:
        if c and c in seen:
            raise TopoplanError(f"{path}:{line}: duplicate column '{c}' in the header")
        seen.add(c)
    return names


def _bad_count(path, line: int, got: int, want: int):
    hint = "a row cut short?" if got < want else "a stray comma, or a column missing from the header?"
    return TopoplanError(f"{path}:{line}: {got} field{'s' if got != 1 else ''}, the header has {want} ({hint})")


def _scan_fast(data: bytes, path: Path):
    """Header and data lines of a CSV without quotes or lone carriage returns, with NumPy.

    Returns ``(names, header_line, first_line, end_line, skipped)``: the data lines are
    ``first_line .. end_line - 1`` except the blank ones in ``skipped`` (a list of arrays).
    """
    n = len(data)
    pos = 3 if data.startswith(_BOM) else 0
    line = 1
    while True:   # the header: the first line that is not blank
        if pos >= n:
            return None
        eol = data.find(b"\n", pos)
        eol = n if eol < 0 else eol
        text = data[pos:eol]
        if text.strip(b" \t\r"):
            break
        pos, line = eol + 1, line + 1
    names = _header(text.decode("utf-8").rstrip("\r").split(","), line, path)
    m = len(names)
    buf = np.frombuffer(data, dtype=np.uint8)
    pos, first, skipped = eol + 1, line + 1, []
    line = first
    while pos < n:
        end = _slice_end(data, pos)
        seg = buf[pos:end]
        if m > 1 and seg[-1] == 10:
            # fast check: every m-th separator is a newline, and there are no other newlines
            is_sep = seg == 44
            is_sep |= seg == 10
            sep = np.flatnonzero(is_sep)
            lines = len(sep) // m
            if len(sep) == lines * m and data.count(b"\n", pos, end) == lines \
                    and bool((seg[sep[m - 1::m]] == 10).all()):
                line += lines
                pos = end
                continue
        line = _scan_lines(seg, line, m, skipped, path)
        pos = end
    return names, first - 1, first, line, skipped


def _scan_lines(seg: np.ndarray, line: int, m: int, skipped: list, path: Path) -> int:
    """Field count of each line of ``seg`` (starting at file line ``line``); blank lines go to ``skipped``.

    Returns the line number after the slice; raises on the first line with another field count than ``m``.
    """
    nl = np.flatnonzero(seg == 10)
    if len(seg) and seg[-1] != 10:
        nl = np.append(nl, len(seg))   # the file's last line, without a newline
    starts = np.concatenate(([0], nl[:-1] + 1))
    commas = np.flatnonzero(seg == 44)
    fields = np.diff(np.searchsorted(commas, nl), prepend=0) + 1
    odd = np.flatnonzero(fields != m) if m > 1 else np.arange(len(nl))
    cand = odd[fields[odd] == 1]
    blank = cand[:0]
    if cand.size:   # a line of only spaces, tabs or a carriage return is blank (pandas skips it too)
        text = ~((seg == 32) | (seg == 9) | (seg == 13) | (seg == 10))
        cum = np.concatenate(([0], np.cumsum(text, dtype=np.int64)))
        blank = cand[cum[nl[cand]] == cum[starts[cand]]]
    bad = np.setdiff1d(odd, blank) if m > 1 else np.setdiff1d(odd[fields[odd] != 1], blank)
    if bad.size:
        i = int(bad[0])
        raise _bad_count(path, line + i, int(fields[i]), m)
    if blank.size:
        skipped.append(line + blank)
    return line + len(nl)


def _scan_csv(data: bytes, path: Path, kind: str):
    """Header and data lines with the csv module (quoted fields, which may span lines; any line ending)."""
    text = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8-sig", newline="")
    last = [""]

    def physical_lines():
        for raw in text:
            last[0] = raw
            yield raw

    reader = csv.reader(physical_lines(), skipinitialspace=True, strict=True)
    names, head, lines, prev = None, 0, [], 0
    old = csv.field_size_limit()
    csv.field_size_limit(max(old, len(data)))   # a communicator of a million ranks is one long field
    try:
        for row in reader:
            first, prev = prev + 1, reader.line_num
            if not row or (prev == first and not last[0].strip(" \t\r\n")):
                continue   # blank (a line of only spaces, as pandas skips; not '""', an empty field)
            if names is None:
                names, head = _header(row, first, path), first
            elif len(row) != len(names):
                raise _bad_count(path, first, len(row), len(names))
            else:
                lines.append(first)
    except csv.Error as exc:   # the row starting on the line after the last one read
        raise TopoplanError(f"{path}:{prev + 1}: malformed CSV: {exc} (a quote not closed, or text after "
                            "a closing quote?)") from None
    finally:
        csv.field_size_limit(old)
    if names is None:
        return None
    return names, head, np.asarray(lines, dtype=np.int64)


class NumberTable:
    """A small CSV table of plain numbers, read without pandas (:func:`read_csv_table` with ``numbers=True``).

    It answers what a reader of numbers asks of a table: :attr:`columns`, ``len()``, ``attrs["header_line"]``,
    :meth:`rename`, and, through :func:`to_numbers`, :func:`row_line` and :func:`empty_cells`, the values and
    lines of a column. Each column holds what pandas' parser makes of it: int64 when every cell is an integer,
    else float64.

    Parameters
    ----------
    arrays : dict of str to numpy.ndarray
        The columns, in the header's order.
    index : numpy.ndarray
        The file line of each row.
    header_line : int
        The line of the header.

    Examples
    --------
    >>> t = NumberTable({"src": np.array([0, 1]), "bytes": np.array([8.0, 1e3])}, np.array([2, 4]), 1)
    >>> t.columns, len(t), t.attrs["header_line"], row_line(t, 1)
    (['src', 'bytes'], 2, 1, 4)
    >>> to_numbers(t.rename(columns={"src": "rank"}), "rank", "t.csv", integer=True).tolist()
    [0, 1]
    """

    def __init__(self, arrays: dict, index: np.ndarray, header_line: int):
        self.arrays = dict(arrays)
        self.index = np.asarray(index, dtype=np.int64)
        self.attrs = {"header_line": header_line}

    @property
    def columns(self) -> list[str]:
        """The column names, in the header's order."""
        return list(self.arrays)

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, col: str) -> np.ndarray:
        return self.arrays[col]

    def rename(self, columns: dict) -> "NumberTable":
        """The same table with columns renamed (``{old: new}``), as ``DataFrame.rename(columns=...)``."""
        return NumberTable({columns.get(c, c): v for c, v in self.arrays.items()}, self.index,
                           self.attrs["header_line"])


# The cells a NumberTable takes: an integer (at most 18 digits: int64, as pandas reads it), or a decimal of
# at most 15 digits times a power of ten up to 10^22 each way. Such a decimal is an integer below 2^53 times
# or over an exact power of ten, one correctly rounded operation: the value Python's float() gives, and
# pandas' parser's too (tests/test_number_table.py compares the two). Anything else goes to pandas.
_INT_CELL = re.compile(r" *-?0*([0-9]{1,18})")
_DEC_CELL = re.compile(r" *-?([0-9]+)(?:\.([0-9]*))?(?:[eE]([-+]?[0-9]{1,4}))?")


def _number_table(data: bytes, names: list, lines: np.ndarray, head: int) -> NumberTable | None:
    """The rows ``lines`` of a CSV without quotes or lone carriage returns as a :class:`NumberTable`, or None
    when a cell is not a number :data:`_INT_CELL` or :data:`_DEC_CELL` takes (pandas then reads the file)."""
    if not len(lines):
        return None
    text = data[3:] if data.startswith(_BOM) else data
    rows = text.decode("utf-8").split("\n")
    cells = [[] for _ in names]
    m = len(names)
    for line in lines.tolist():
        fields = rows[line - 1].removesuffix("\r").split(",")
        if len(fields) != m:
            return None
        for col, cell in zip(cells, fields):
            col.append(cell)
    values = {}
    for name, col in zip(names, cells):
        if all(_INT_CELL.fullmatch(c) for c in col):
            values[name] = np.array([int(c) for c in col], dtype=np.int64)
            continue
        for c in col:
            dec = _DEC_CELL.fullmatch(c)
            if dec is None:
                return None
            whole, frac, exp = dec.group(1), dec.group(2) or "", dec.group(3)
            shift = (int(exp) if exp else 0) - len(frac)
            if len(whole) + len(frac) > 15 or not -22 <= shift <= 22:
                return None
        values[name] = np.array([float(c) for c in col], dtype=np.float64)
    return NumberTable(values, lines, head)


def row_line(df, i) -> int:
    """The file line of row ``i`` of a table read by :func:`read_csv_table`.

    :func:`read_csv_table` indexes rows by their line (blank lines are skipped,
    a quoted field may span lines); a DataFrame with the default index from 0
    is taken as a file with its header on line 1 and no blank line.

    Parameters
    ----------
    df : pandas.DataFrame or NumberTable
        The table.
    i : int
        Position of the row (0 for the first).

    Returns
    -------
    int

    Examples
    --------
    >>> import os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "m.csv")
    >>> with open(path, "w") as fh:
    ...     _ = fh.write("src,dst,bytes\\n0,1,100\\n\\n1,0,5\\n")
    >>> df = read_csv_table(path, ("src",), "communication matrix")
    >>> row_line(df, 0), row_line(df, 1)
    (2, 4)
    >>> import pandas as pd
    >>> row_line(pd.DataFrame({"a": [1, 2]}), 1)
    3
    """
    if isinstance(df, NumberTable):
        return int(df.index[int(i)])
    import pandas as pd

    idx = df.index
    if isinstance(idx, pd.RangeIndex) and idx.start == 0:
        return int(i) + 2
    return int(idx[int(i)])


# Parsing holds the text, pandas' cells (string objects: ~28 bytes per cell measured on matrices and
# traces, ~110 bytes per 4-field row) and the numeric columns made from them at once.
_BYTES_PER_CELL = 28
_BYTES_PER_TEXT_BYTE = 6


def _check_memory(path, kind: str, rows: int, fields: int, text_B: int) -> None:
    """Refuse, before pandas allocates, a table that would not fit in the memory available now
    (a few megabytes of gzip can hold tens of millions of rows: 6.6 GB for a 60 M-row matrix)."""
    need = rows * fields * _BYTES_PER_CELL + text_B * _BYTES_PER_TEXT_BYTE
    have = memory.memory_left()
    if have is not None and need > have:
        raise TopoplanError(f"{path}: {rows:,} rows of {fields} fields need about {need / 2**30:.1f} GiB to read, "
                            f"more than the {have / 2**30:.1f} GiB of memory available; split the {kind} or "
                            "use a machine with more memory")


def _near(name: str, candidates) -> str | None:
    """The column of ``candidates`` that ``name`` is likely a misspelling of (another case, a letter off)."""
    import difflib

    for c in candidates:
        if name.casefold() == c.casefold():
            return c
    close = difflib.get_close_matches(name.casefold(), list(candidates), n=1, cutoff=0.75)
    return close[0] if close else None


def _check_columns(names, required, optional, others: bool, path: Path, head: int, kind: str) -> None:
    """Every column is read, or (``others``) ignored only when it is not a known column misspelled."""
    known = list(required) + [c for c in optional if c not in required]
    absent = [c for c in known if c not in names]
    for c in names:
        if c in known:
            continue
        near = _near(c, absent)
        hint = f"; did you mean '{near}'?" if near else ""
        if not others:
            cols = ",".join(required) + "".join(f"[,{c}]" for c in optional if c not in required)
            what = f"column '{c}'" if c else "an unnamed column"
            raise TopoplanError(f"{where(path, head)}: {what} is not a column of a {kind} ({cols}){hint} (its "
                                "values would be ignored: rename or remove it)")
        if near:
            raise TopoplanError(f"{where(path, head)}: column '{c}' is not a column of a {kind}{hint} (its "
                                "values would be ignored: rename it)")


def read_csv_table(path, required, kind: str, *, optional=(), others: bool = True, max_rows: int | None = None,
                   numbers: bool = False):
    """Read a CSV (plain or gzip) into a pandas DataFrame, checking the header and every row's field count.

    Only an empty cell is missing: ``nan``, ``NA`` or ``null`` written in a
    file stay text, so :func:`to_numbers` reports them.

    Every row must have as many fields as the header: a row cut short (the
    last line of a truncated file) or with an extra field (which would shift
    every column) is an error naming its line. Blank lines (empty, or only
    spaces and tabs) are skipped anywhere; rows are indexed by their file
    line (:func:`row_line`), so messages name the real line. A UTF-8 byte
    order mark is ignored. The file is refused, before it is parsed, when
    it is over :data:`MAX_CSV_BYTES` bytes (once decompressed) or ``max_rows``
    rows.

    Parameters
    ----------
    path : str or path
        The file.
    required : sequence of str
        Columns that must be in the header.
    kind : str
        What the file is, for messages (``"trace of MPI events"``).
    optional : sequence of str, optional
        Columns that may be in the header.
    others : bool, optional
        Whether the header may have other columns (ignored by the caller). A
        column that is a known column misspelled (another case, a letter more
        or less) is an error either way, since its values would be ignored.
    max_rows : int, optional
        Most rows read (default :data:`MAX_CSV_ROWS`, 100,000,000).
    numbers : bool, optional
        The caller reads every column with :func:`to_numbers` (and asks the
        table only its ``columns``, ``len()``, ``attrs``, ``rename`` and
        :func:`row_line`): a file of at most :data:`SMALL_CSV_BYTES` bytes whose
        cells are all plain numbers comes back as a :class:`NumberTable`,
        read without importing pandas, with the values pandas would give.

    Returns
    -------
    pandas.DataFrame or NumberTable
        Column names stripped of spaces; the index is the file line of each row,
        and ``attrs["header_line"]`` the line of the header.

    Raises
    ------
    TopoplanError
        Naming the file (and line) for a missing, unreadable, empty, binary,
        non-UTF-8 or too large file, a row with another number of fields than
        the header, a duplicate column, a missing column, or a column that
        would be ignored (any other column without ``others``; a misspelled
        optional column always).

    Examples
    --------
    >>> import os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "m.csv")
    >>> with open(path, "w") as fh:
    ...     _ = fh.write("src, dst, bytes\\n0, 1, 100\\n")
    >>> list(read_csv_table(path, ("src", "dst"), "communication matrix").columns)
    ['src', 'dst', 'bytes']
    >>> read_csv_table(path, ("msgs",), "communication matrix")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: .../m.csv:1: missing column(s) msgs for a communication matrix
    >>> read_csv_table(path, ("src", "dst", "bytes"), "communication matrix", optional=("msgs",),
    ...                others=False).shape
    (1, 3)
    >>> with open(path, "w") as fh:
    ...     _ = fh.write("src,dst,bytes,msg\\n0,1,100,4\\n")
    >>> read_csv_table(path, ("src", "dst", "bytes"), "communication matrix", optional=("msgs",))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: .../m.csv:1: column 'msg' is not a column of a communication matrix; did you mean 'msgs'? (its values would be ignored: rename it)
    >>> with open(path, "w") as fh:
    ...     _ = fh.write("src,dst,bytes\\n0,1,100\\n1,0\\n")
    >>> read_csv_table(path, ("src", "dst"), "communication matrix")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: .../m.csv:3: 2 fields, the header has 3 (a row cut short?)
    >>> with open(path, "w") as fh:
    ...     _ = fh.write("src,dst,bytes\\n0,1,100\\n1,0,2.5e3\\n")
    >>> t = read_csv_table(path, ("src", "dst", "bytes"), "communication matrix", numbers=True)
    >>> type(t).__name__, t["src"].tolist(), t["bytes"].tolist()
    ('NumberTable', [0, 1], [100.0, 2500.0])
    """
    max_rows = MAX_CSV_ROWS if max_rows is None else int(max_rows)
    path = Path(path)
    if not path.is_file():
        raise TopoplanError(f"{path}: no such file")
    # plain or gzip, streamed and refused past the limits (a gzip bomb never expands past MAX_CSV_BYTES)
    data = read_bytes(path, kind, limit=MAX_CSV_BYTES, max_rows=max_rows)
    _check_text(data, path, kind)
    lone_cr = b"\r" in data and data.count(b"\r") != data.count(b"\r\n")
    plain = not (b'"' in data or lone_cr)
    if not plain:
        got = _scan_csv(data, path, kind)
        if got is None:
            raise TopoplanError(f"{path}: empty file, expected a {kind} with a header line")
        names, head, lines = got
        n_rows = len(lines)
    else:
        got = _scan_fast(data, path)
        if got is None:
            raise TopoplanError(f"{path}: empty file, expected a {kind} with a header line")
        names, head, first, end, skipped = got
        n_rows = end - first - sum(len(s) for s in skipped)
    missing = [c for c in required if c not in names]
    if missing:
        raise TopoplanError(f"{where(path, head)}: missing column(s) {', '.join(missing)} for a {kind}")
    _check_columns(names, required, optional, others, path, head, kind)
    _check_memory(path, kind, n_rows, len(names), len(data))
    if plain:
        lines = np.setdiff1d(np.arange(first, end), np.concatenate(skipped), assume_unique=True) if skipped \
            else None
        if numbers and len(data) <= SMALL_CSV_BYTES:
            table = _number_table(data, names, np.arange(first, end) if lines is None else lines, head)
            if table is not None:
                return table
    # pandas, and the pyarrow it loads: half a second of start-up, imported only here (start-up)
    import pandas as pd

    index = pd.RangeIndex(first, end) if lines is None else pd.Index(lines)
    bio = io.BytesIO(data)
    bio.seek(3 if data.startswith(_BOM) else 0)
    try:
        # only an empty cell is missing: 'nan', 'NA' or 'null' written in a file are errors, not zeros
        df = pd.read_csv(bio, skipinitialspace=True, low_memory=False, keep_default_na=False, na_values=[""],
                         encoding="utf-8", index_col=False)
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        raise TopoplanError(f"{path}: cannot read {kind}: {exc}") from None
    except pd.errors.ParserError as exc:
        raise TopoplanError(f"{path}: malformed CSV: {str(exc).splitlines()[0]}") from None
    except pd.errors.EmptyDataError:
        raise TopoplanError(f"{path}: empty file, expected a {kind} with a header line") from None
    if len(df) != len(index) or len(df.columns) != len(names):
        # the field count above and pandas split the text differently: refuse rather than guess
        raise TopoplanError(f"{path}: malformed CSV: {len(df):,} rows of {len(df.columns)} fields parsed, "
                            f"{len(index):,} of {len(names)} expected")
    df.columns = names
    df.index = index
    df.attrs["header_line"] = head
    return df


def empty_cells(df, col: str) -> np.ndarray:
    """Which cells of column ``col`` of a string DataFrame (:func:`read_csv_table`) are empty or blank.

    Examples
    --------
    >>> import pandas as pd
    >>> empty_cells(pd.DataFrame({"bytes": ["8", "", " ", None]}), "bytes").tolist()
    [False, True, True, True]
    """
    if isinstance(df, NumberTable):
        return np.zeros(len(df), dtype=bool)   # a NumberTable has no empty cell (pandas reads such a file)
    import pandas as pd

    raw = df[col]
    blank = raw.isna().to_numpy()
    if not pd.api.types.is_numeric_dtype(raw) or pd.api.types.is_bool_dtype(raw):
        blank = blank | (raw.astype(str).str.strip() == "").to_numpy()
    return blank


def to_numbers(df, col: str, path, *, integer: bool, empty=-1):
    """Column of a string DataFrame to finite numbers; raises naming the line of the first bad cell.

    Numbers are ASCII (``pandas.to_numeric``): other digits (``'²'``, ``'٣'``),
    doubled signs (``'--3'``) and words (``'True'``, ``'nan'``) are errors, not
    numbers. An integer field also takes a whole number written as a decimal
    (``3.0``, as pandas writes an integer column with an empty cell).

    Parameters
    ----------
    df : pandas.DataFrame or NumberTable
        As read by :func:`read_csv_table` (its index gives the line of each row, :func:`row_line`).
    col : str
        The column.
    path : str or path
        The file, for messages.
    integer : bool
        Whether the values must be integers (returned as int64).
    empty : float or None, optional
        The value of an empty cell, or None when a cell must not be empty.

    Returns
    -------
    numpy.ndarray
        int64 when ``integer``, else float64.

    Raises
    ------
    TopoplanError
        ``path:line: field 'col': ...`` for an empty cell (with ``empty=None``),
        text, an infinite value, a fraction where an integer is needed, or an
        integer beyond 2^62.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"rank": ["0", "1", ""], "bytes": ["8", "1e3", "x"]})
    >>> to_numbers(df, "rank", "t.csv", integer=True).tolist()
    [0, 1, -1]
    >>> to_numbers(df, "bytes", "t.csv", integer=False)
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: t.csv:4: field 'bytes': not a number: 'x'
    >>> to_numbers(pd.DataFrame({"rank": ["0", "٣"]}), "rank", "t.csv", integer=True)
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: t.csv:3: field 'rank': not a number: '٣'
    """
    if isinstance(df, NumberTable):   # numbers already, no cell empty: what pandas' numeric columns give
        raw = df[col]
        arr = raw.astype(np.float64)
        exact = raw if raw.dtype.kind == "i" else None
    else:
        import pandas as pd

        raw = df[col]
        fill = 0 if empty is None else empty
        blank = raw.isna().to_numpy()   # only empty cells are NA (read_csv_table); a literal 'nan' is text
        if pd.api.types.is_numeric_dtype(raw) and not pd.api.types.is_bool_dtype(raw):
            # fast path: the C parser already read numbers (ASCII digits only)
            num = raw.fillna(fill)
        else:
            # text, or a column pandas read as True/False: every cell must be a number
            s = raw.astype(str).str.strip() if not pd.api.types.is_bool_dtype(raw) else raw.map(repr).astype(str)
            blank = blank | (s == "").to_numpy()
            s = s.mask(blank, str(fill))
            num = pd.to_numeric(s, errors="coerce")
        if empty is None and blank.any():
            i = int(np.flatnonzero(blank)[0])
            raise TopoplanError(f"{path}:{row_line(df, i)}: field '{col}': empty")
        bad = np.flatnonzero(num.isna().to_numpy())
        if bad.size:
            i = int(bad[0])
            if re.fullmatch(r"[-+]?[0-9]+", str(raw.iloc[i]).strip()):   # an integer too long for pandas to convert
                raise TopoplanError(f"{path}:{row_line(df, i)}: field '{col}': {_cell(df, col, i)} is out of range")
            raise TopoplanError(f"{path}:{row_line(df, i)}: field '{col}': not a number: {_cell(df, col, i)!r}")
        arr = num.to_numpy(dtype=np.float64)
        exact = raw if pd.api.types.is_integer_dtype(raw) else None
    bad = np.flatnonzero(~np.isfinite(arr))
    if bad.size:
        i = int(bad[0])
        raise TopoplanError(f"{path}:{row_line(df, i)}: field '{col}': not a finite number: {_cell(df, col, i)}")
    if integer:
        big = np.flatnonzero(np.abs(arr) >= 2.0 ** 62)  # would wrap around in int64
        if big.size:
            i = int(big[0])
            raise TopoplanError(f"{path}:{row_line(df, i)}: field '{col}': {arr[i]:.3g} is out of range")
        frac = np.flatnonzero(arr != np.round(arr))
        if frac.size:
            i = int(frac[0])
            raise TopoplanError(f"{path}:{row_line(df, i)}: field '{col}': not an integer: {_cell(df, col, i)!r}")
        if exact is not None:
            # exact (float64 rounds above 2^53)
            return exact.astype(np.int64) if isinstance(exact, np.ndarray) else exact.to_numpy(dtype=np.int64)
        return arr.astype(np.int64)
    return arr


def _cell(df, col: str, i: int):
    """A cell's text for an error message (a long one, such as a number of thousands of digits, cut short)."""
    v = df[col][i] if isinstance(df, NumberTable) else df[col].iloc[i]
    return shown(v if isinstance(v, str) else str(v.item() if isinstance(v, np.generic) else v), quote=False)
