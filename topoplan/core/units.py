"""Quantities with units: bandwidths, times and sizes.

Files and options accept ``10Gbps``, ``20 Gb/s``, ``1.25GB/s``, ``500ns``,
``10ms``, ``4MB`` (10^6 bytes) and ``4MiB`` (2^20 bytes). Internally every
quantity is a float in base units: bytes per second, seconds, bytes.
A bare number is taken in the base unit.

>>> parse_bandwidth("10Gbps")
1250000000.0
>>> parse_size("4MiB")
4194304.0
>>> parse_time("10ms")
0.01
>>> print(f"{parse_time('500ns'):g}")  # 500 * 1e-9 carries float rounding
5e-07
"""

from __future__ import annotations

import math
import re
import sys

from topoplan.core.errors import TopoplanError

__all__ = ["MAX_VALUE", "parse_bandwidth", "parse_time", "parse_size", "format_bytes", "format_time",
           "ascii_int_shaped", "is_ascii_int", "ascii_int", "is_ascii_number", "shown"]

# ASCII digits only ([0-9], not \d: in a str pattern \d also matches '٣' or '３', which float() then reads as 3)
_NUM = r"([-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)"
_RE = re.compile(r"^\s*" + _NUM + r"\s*([A-Za-zµ/]*)\s*$")

_DEC = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_BIN = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50}

_TIME = {"s": 1.0, "sec": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9, "ps": 1e-12,
         "min": 60.0, "h": 3600.0}


def _split(text, kind: str, field: str | None):
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text), ""
    m = _RE.match(str(text))
    if not m:
        raise TopoplanError(f"{_label(field)}cannot read {kind} {text!r}")
    return float(m.group(1)), m.group(2)


def _label(field):
    """How an error names what it read: ``field 'x': `` for a field, ``--x: `` for a command-line flag."""
    if not field:
        return ""
    return f"{field}: " if str(field).startswith("--") else f"field '{field}': "


def _prefix(unit: str, base_units: tuple[str, ...]):
    """Return (multiplier, base) for unit = <SI or IEC prefix><base>."""
    for base in sorted(base_units, key=len, reverse=True):
        if unit.endswith(base):
            pre = unit[: len(unit) - len(base)]
            if pre in _BIN:
                return _BIN[pre], base
            if pre in _DEC:
                return _DEC[pre], base
    return None, None


# Far beyond any real message, link or run, yet small enough that sums over millions of
# messages stay finite (1e308 bytes would overflow to inf and poison every total).
MAX_VALUE = {"size": 2.0 ** 60, "bandwidth": 1e18, "time": 1e9}


def _check(value: float, kind: str, text, field, allow_zero=True):
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        need = "positive" if not allow_zero else "non-negative"
        need = "finite" if value == math.inf else need
        raise TopoplanError(f"{_label(field)}{kind} must be {need}, got {text!r}")
    if value > MAX_VALUE[kind]:
        raise TopoplanError(f"{_label(field)}{kind} {text!r} is implausibly large (limit {MAX_VALUE[kind]:.3g})")
    return value


def parse_bandwidth(text, field: str | None = None) -> float:
    """Parse a bandwidth; returns bytes per second.

    Bits: ``bps``, ``b/s`` (``10Gbps``, ``20 Gb/s``); bytes: ``Bps``, ``B/s``
    (``1.25GB/s``, ``1.25GBps``). Prefixes k, M, G, T (10^3) and Ki, Mi, Gi
    (2^10). A bare number is bytes per second. Must be positive.

    Parameters
    ----------
    text : str or float
        The bandwidth, e.g. ``"10Gbps"``; a number is taken in bytes per second.
    field : str, optional
        Name of the field being read; errors start with ``field '<field>':``.

    Returns
    -------
    float
        Bytes per second.

    Raises
    ------
    TopoplanError
        If the text cannot be read, the unit is unknown, or the value is not
        positive or implausibly large (above ``MAX_VALUE["bandwidth"]``).

    See Also
    --------
    parse_size, parse_time

    Examples
    --------
    >>> parse_bandwidth("10Gbps")
    1250000000.0
    >>> parse_bandwidth("1.25GB/s")
    1250000000.0
    >>> parse_bandwidth("0", field="eps_bw")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: field 'eps_bw': bandwidth must be positive, got '0'
    """
    value, unit = _split(text, "bandwidth", field)
    if unit == "":
        return _check(value, "bandwidth", text, field, allow_zero=False)
    mult, base = _prefix(unit, ("bps", "b/s", "Bps", "B/s"))
    if mult is None:
        raise TopoplanError(f"{_label(field)}unknown bandwidth unit in {text!r} (use e.g. 10Gbps, 20Gb/s, 1.25GB/s)")
    scale = 1.0 / 8.0 if base in ("bps", "b/s") else 1.0
    return _check(value * mult * scale, "bandwidth", text, field, allow_zero=False)


def parse_time(text, field: str | None = None) -> float:
    """Parse a duration (``500ns``, ``1.5us``, ``10ms``, ``2s``); returns seconds.

    Units: ``ps``, ``ns``, ``us`` (or ``µs``), ``ms``, ``s`` (or ``sec``), ``min``, ``h``.
    A bare number is seconds. Zero is allowed.

    Parameters
    ----------
    text : str or float
        The duration; a number is taken in seconds.
    field : str, optional
        Name of the field being read, used in error messages.

    Returns
    -------
    float
        Seconds.

    Raises
    ------
    TopoplanError
        If the text cannot be read, the unit is unknown, or the value is
        negative or implausibly large.

    Examples
    --------
    >>> parse_time("10ms")
    0.01
    >>> parse_time("2min")
    120.0
    >>> parse_time("3 weeks")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: unknown time unit in '3 weeks' (use ns, us, ms, s, min, h)
    >>> parse_time("٣s")   # digits of other scripts are not numbers (float('٣') would read 3)
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: cannot read time '٣s'
    """
    value, unit = _split(text, "time", field)
    if unit == "":
        return _check(value, "time", text, field)
    if unit not in _TIME:
        raise TopoplanError(f"{_label(field)}unknown time unit in {text!r} (use ns, us, ms, s, min, h)")
    return _check(value * _TIME[unit], "time", text, field)


def parse_size(text, field: str | None = None) -> float:
    """Parse a size in bytes: ``4MB`` = 4*10^6, ``4MiB`` = 4*2^20, ``8192``, ``10kB``.

    Parameters
    ----------
    text : str or float
        The size; a number is taken in bytes.
    field : str, optional
        Name of the field being read, used in error messages.

    Returns
    -------
    float
        Bytes.

    Raises
    ------
    TopoplanError
        If the text cannot be read, the unit is unknown, or the value is
        negative or implausibly large.

    Examples
    --------
    >>> parse_size("4MB")
    4000000.0
    >>> parse_size("4MiB")
    4194304.0
    >>> parse_size(8192)
    8192.0
    """
    value, unit = _split(text, "size", field)
    if unit == "":
        return _check(value, "size", text, field)
    mult, base = _prefix(unit, ("B",))
    if mult is None:
        raise TopoplanError(f"{_label(field)}unknown size unit in {text!r} (use B, KB, MB, GB, KiB, MiB, GiB)")
    return _check(value * mult, "size", text, field)


def format_bytes(n: float) -> str:
    """Human form of a byte count with decimal prefixes: 1920000000 -> '1,920 MB'.

    Parameters
    ----------
    n : float
        Bytes.

    Returns
    -------
    str
        Three significant digits (at least the whole part) and a unit among
        B, KB, MB, GB; GB are used from 10 GB on.

    See Also
    --------
    parse_size : the inverse direction.

    Examples
    --------
    >>> format_bytes(1_920_000_000)
    '1,920 MB'
    >>> format_bytes(40e6)
    '40 MB'
    >>> format_bytes(512)
    '512 B'
    """
    n = float(n)
    for unit, mult in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(n) >= mult * 10 or (unit == "KB" and abs(n) >= mult):
            return f"{n / mult:,.0f} {unit}" if n / mult >= 100 else f"{n / mult:,.3g} {unit}"
    return f"{n:,.0f} B"


def format_time(t: float) -> str:
    """Human form of a duration in seconds: 0.0123 -> '12.3 ms'.

    Parameters
    ----------
    t : float
        Seconds.

    Returns
    -------
    str
        Four significant digits and the largest unit among s, ms, us, ns that
        keeps the number at least 1.

    See Also
    --------
    parse_time : the inverse direction.

    Examples
    --------
    >>> format_time(0.0123)
    '12.3 ms'
    >>> format_time(2.5)
    '2.5 s'
    >>> format_time(5e-7)
    '500 ns'
    """
    for unit, mult in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if abs(t) >= mult:
            return f"{t / mult:.4g} {unit}"
    return f"{t:.3g} s"


# ASCII digits only: Python's int() and str.isdigit() also take '²', '٣' or '３', which would make a
# typo an alias of another node or rank (int('٣') == 3) or crash int() ('²'.isdigit() is True).
_ASCII_INT = re.compile(r"[ \t]*-?[0-9]+[ \t]*")


def ascii_int_shaped(text) -> bool:
    """Whether ``text`` is written as an integer in ASCII digits with an optional leading ``-`` (spaces around
    allowed), however many digits: :func:`is_ascii_int` without its bound on the digits ``int()`` converts.

    Examples
    --------
    >>> ascii_int_shaped(" -12 "), ascii_int_shaped("1" * 5000), ascii_int_shaped("٣"), ascii_int_shaped(3)
    (True, True, False, False)
    """
    return isinstance(text, str) and _ASCII_INT.fullmatch(text) is not None


def is_ascii_int(text) -> bool:
    """Whether ``text`` is an integer in ASCII digits with an optional leading ``-`` (spaces around allowed).

    Parameters
    ----------
    text : object
        Usually a str; anything else is not an integer written as text.

    Returns
    -------
    bool
        False for other digits (``'²'``, ``'٣'``, ``'３'``), signs doubled or
        mixed (``'--3'``, ``'+-3'``), a ``'+'``, decimals and exponents; and for more digits than
        ``int()`` converts (``sys.get_int_max_str_digits()``, 4,300: it raises ValueError), so that
        ``int(text)`` never fails once this is true.

    See Also
    --------
    ascii_int : parse one, with a one-line error.

    Examples
    --------
    >>> is_ascii_int("12"), is_ascii_int(" -3 "), is_ascii_int("0042")
    (True, True, True)
    >>> "²".isdigit(), is_ascii_int("²"), is_ascii_int("٣"), is_ascii_int("--3"), is_ascii_int("+-3")
    (True, False, False, False, False)
    >>> is_ascii_int("3.0"), is_ascii_int(""), is_ascii_int(3), is_ascii_int("1" * 5000)
    (False, False, False, False)
    """
    return ascii_int_shaped(text) and _convertible(text)


def _convertible(text: str) -> bool:
    """Whether ``int()`` converts the ASCII integer ``text``: at most ``sys.get_int_max_str_digits()`` digits."""
    limit = sys.get_int_max_str_digits()
    return not limit or len(text) <= limit or len(text.strip(" \t").lstrip("-")) <= limit


def ascii_int(text, where: str, limit: int = 2 ** 62) -> int:
    """Parse an integer id written in ASCII digits with an optional leading ``-`` (see :func:`is_ascii_int`).

    Parameters
    ----------
    text : str
        The text, e.g. a node id from a host list.
    where : str
        Prefix of error messages: file, line and field (``hosts.txt:3``).
    limit : int, optional
        Magnitudes from this on are out of range (default 2^62, so the value
        and sums of a few of them fit an int64).

    Returns
    -------
    int

    Raises
    ------
    TopoplanError
        ``<where>: not an integer: ...`` for anything but ASCII digits and one
        leading ``-``; ``<where>: ... is out of range`` from ``limit`` on.

    Examples
    --------
    >>> ascii_int(" 12", "hosts.txt:3")
    12
    >>> ascii_int("٣", "hosts.txt:3")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: hosts.txt:3: not an integer: '٣' (ASCII digits 0-9 with an optional leading '-')
    >>> ascii_int("1" * 30, "hosts.txt:4")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: hosts.txt:4: 111111111111111111111111111111 is out of range
    >>> ascii_int("1" * 5000, "p.csv:2: field 'node'")      # longer than int() converts
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: p.csv:2: field 'node': 11111111111111111111... (5,000 characters) is out of range
    """
    if not ascii_int_shaped(text):
        raise TopoplanError(f"{where}: not an integer: {shown(text)} (ASCII digits 0-9 with an optional leading "
                            "'-')")
    text = text.strip(" \t")
    # int() refuses more than sys.get_int_max_str_digits() digits (4,300) with a ValueError: a number longer
    # than the limit's own is out of range before it is converted
    if len(text.lstrip("-").lstrip("0")) > len(str(limit)) or abs(value := int(text)) >= limit:
        raise TopoplanError(f"{where}: {shown(text, quote=False)} is out of range")
    return value


def shown(text, quote: bool = True, most: int = 40) -> str:
    """``text`` as an error message shows it: ``repr`` (or as it is, ``quote=False``), a long one (a number of
    thousands of digits) cut to its start and its length, so the message stays a line to read. Anything else
    but a str is shown by its ``repr``, cut likewise.

    Examples
    --------
    >>> shown("abc"), shown(-1), shown("7" * 4301, quote=False)
    ("'abc'", '-1', '77777777777777777777... (4,301 characters)')
    """
    if not isinstance(text, str):
        try:
            text, quote = repr(text), False
        except ValueError:   # an int of more digits than str() converts
            return "an integer too long to show"
    if len(text) <= most:
        return repr(text) if quote else text
    return f"{text[:most // 2]!r}... ({len(text):,} characters)" if quote else \
        f"{text[:most // 2]}... ({len(text):,} characters)"


_ASCII_NUMBER = re.compile(r"[ \t]*" + _NUM + r"[ \t]*")
_NUMBER_WORDS = ("inf", "+inf", "-inf", "infinity", "+infinity", "-infinity", "nan", "+nan", "-nan")


def is_ascii_number(text) -> bool:
    """Whether ``text`` is a decimal number in ASCII (``12``, ``-0.5``, ``1e-3``), or ``inf`` or ``nan``.

    The shape that units and numeric options take, so that ``float()``'s other inputs are refused
    where a number is read from text: digits of other scripts (``float('٣')`` is 3.0), underscores
    (``float('1_0')`` is 10.0). ``inf`` and ``nan`` (any case) pass, so that the range check of the
    value, not this one, says why they do not fit.

    Parameters
    ----------
    text : object
        Usually a str; anything else is not a number written as text.

    Returns
    -------
    bool

    See Also
    --------
    is_ascii_int : the same for integers.

    Examples
    --------
    >>> is_ascii_number("0.5"), is_ascii_number(" -1e3 "), is_ascii_number(".5"), is_ascii_number("inf")
    (True, True, True, True)
    >>> float("٠.٥"), is_ascii_number("٠.٥"), is_ascii_number("1_0"), is_ascii_number("0x10"), is_ascii_number("")
    (0.5, False, False, False, False)
    """
    if not isinstance(text, str):
        return False
    return _ASCII_NUMBER.fullmatch(text) is not None or text.strip(" \t").lower() in _NUMBER_WORDS
