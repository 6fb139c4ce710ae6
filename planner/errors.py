"""The one exception type the CLI turns into a one-line message and exit code 2."""


class TopoplanError(Exception):
    """Bad input or an impossible request.

    The message is one line that names the file, line or field at fault;
    the CLI prints it as ``error: <message>`` and exits with status 2.
    """


def where(path=None, line=None, field=None) -> str:
    """Format a location prefix such as ``traffic.csv:12: field 'bytes'``."""
    parts = []
    if path is not None:
        parts.append(str(path) + (f":{line}" if line is not None else ""))
    elif line is not None:
        parts.append(f"line {line}")
    if field is not None:
        parts.append(f"field '{field}'")
    return ": ".join(parts)
