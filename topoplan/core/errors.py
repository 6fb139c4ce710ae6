"""The one exception type the CLI turns into a one-line message and exit code 2."""

__all__ = ["TopoplanError", "where"]


class TopoplanError(Exception):
    """Bad input or an impossible request.

    The message is one line that names the file, line or field at fault;
    the CLI prints it as ``error: <message>`` and exits with status 2.

    Parameters
    ----------
    message : str
        One line: where (file, line, field) and what is wrong.

    See Also
    --------
    where : formats the location prefix.

    Examples
    --------
    >>> from topoplan.core.units import parse_size
    >>> try:
    ...     parse_size("4 MBB", field="bytes")
    ... except TopoplanError as exc:
    ...     print(f"error: {exc}")
    error: field 'bytes': unknown size unit in '4 MBB' (use B, KB, MB, GB, KiB, MiB, GiB)
    """


def where(path=None, line=None, field=None) -> str:
    """Format a location prefix such as ``traffic.csv:12: field 'bytes'``.

    Parameters
    ----------
    path : str or path, optional
        The file.
    line : int, optional
        The line (after the path, or alone as ``line N``).
    field : str, optional
        The field.

    Returns
    -------
    str
        The parts given, joined by ``": "``.

    Examples
    --------
    >>> where("traffic.csv", 12, "bytes")
    "traffic.csv:12: field 'bytes'"
    >>> where(line=3), where(field="ocs.bw")
    ('line 3', "field 'ocs.bw'")
    >>> raise TopoplanError(where("t.csv", 2, "rank") + ": not a number: 'x'")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: t.csv:2: field 'rank': not a number: 'x'
    """
    parts = []
    if path is not None:
        parts.append(str(path) + (f":{line}" if line is not None else ""))
    elif line is not None:
        parts.append(f"line {line}")
    if field is not None:
        parts.append(f"field '{field}'")
    return ": ".join(parts)
