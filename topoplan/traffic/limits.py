"""How large a trace may be: the row limits of traces read and generated, and the memory check made before
a generated trace is built (:func:`check_generated_memory`, with :func:`topoplan.core.memory.memory_left`)."""

from __future__ import annotations

from topoplan.core import memory
from topoplan.core.csvtable import MAX_CSV_ROWS
from topoplan.core.errors import TopoplanError

__all__ = ["MAX_TRACE_ROWS", "MAX_GENERATED_ROWS", "TRACE_ROW_BYTES", "BUILD_SCRATCH_BYTES_PER_ROW", "PIECE_ROWS",
           "REPLAY_PIECE_ROWS", "check_generated_memory", "over_cap_message"]


# Limits. Traces and matrices read from files, and matrices replayed as traces, are capped at MAX_TRACE_ROWS
# rows. For a generated trace the cap is raised as far as memory allows: TraceBuilder.build writes the rows
# straight into the columns of the Trace (TRACE_ROW_BYTES bytes a row, plus BUILD_SCRATCH_BYTES_PER_ROW of
# boolean scratch for Trace.validate) and refuses, before allocating them, a trace that would not fit in the
# memory available now (Linux MemAvailable, or what ulimit -v leaves), whatever its size; MAX_GENERATED_ROWS
# is the ceiling (a typo such as msgs=10**12 is an error, not a long wait). Recording.pieces and
# topoplan.traffic.sources.load_traffic never hold the whole trace.
MAX_TRACE_ROWS = MAX_CSV_ROWS   # 100,000,000
MAX_GENERATED_ROWS = 1 << 32
TRACE_ROW_BYTES = 75          # rank, peer, bytes, root, comm_size, t_start, t_end, comm, tag: 8 bytes; op 2, req 1
BUILD_SCRATCH_BYTES_PER_ROW = 3
PIECE_ROWS = 1 << 22          # rows per piece of a streamed trace (about 300 MB of columns)
# rows per piece of a generated trace replayed a piece at a time (topoplan simulate replays every generated trace
# longer than this so): a replay in pieces gives the whole trace's results to the bit, and small pieces hold a
# small part of the trace and its program. Peak resident memory of the replay in one process, whole / 65,536-row
# / 32,768-row pieces: NPB class C on one switch of 128 nodes, CG (5 iterations) 220 / 69 MB, MG 330 / 98 / 81 MB,
# LU (5 iterations) 256 / 86 / 74 MB; CG at 1,024 ranks (5 iterations, 7.8 M rows) on a 16 x 64 tree 1,253 / 96 /
# 86 MB with the same CPU time (30.4 / 29.1 / 26.5 s); 16,384-row pieces saved a few MB more for up to a third
# more CPU time.
REPLAY_PIECE_ROWS = 1 << 15


def check_generated_memory(rows: int, n_ranks: int | None = None, what: str = "the generated trace") -> None:
    """Refuse, before allocating, a generated trace of ``rows`` rows that the memory available now cannot hold.

    Parameters
    ----------
    rows : int
        Rows of the trace.
    n_ranks : int, optional
        Its ranks, for the message.
    what : str, optional
        The subject of the message (e.g. naming the field that sized the trace).

    Raises
    ------
    TopoplanError
        When ``rows`` is over :data:`MAX_GENERATED_ROWS` (the ceiling to which
        memory can raise :data:`MAX_TRACE_ROWS`), or when the trace's
        columns and the scratch of its validation (:data:`TRACE_ROW_BYTES` +
        :data:`BUILD_SCRATCH_BYTES_PER_ROW` bytes a row) exceed the memory
        available: Linux ``MemAvailable``, or less where the process's
        address space is limited (``ulimit -v``); not checked where neither
        is known.

    Examples
    --------
    >>> check_generated_memory(1000)
    >>> check_generated_memory(MAX_GENERATED_ROWS + 1)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: the generated trace would have 4,294,967,297 rows: over the limit of 100,000,000 rows, which memory can raise but never past 4,294,967,296; ...
    """
    who = "" if n_ranks is None else f" ({n_ranks} ranks)"
    if rows > MAX_GENERATED_ROWS:
        raise TopoplanError(f"{what} would have {int(rows):,} rows{who}: {over_cap_message()}; use fewer ranks, "
                            "messages or iterations")
    need = int(rows) * (TRACE_ROW_BYTES + BUILD_SCRATCH_BYTES_PER_ROW)
    have = memory.memory_left()
    if have is not None and need > have:
        over = f"over the limit of {MAX_TRACE_ROWS:,} rows, raised only as far as memory allows: " \
            if rows > MAX_TRACE_ROWS else ""
        raise TopoplanError(f"{what} would have {int(rows):,} rows{who}: {over}about {_size(need)}, more than the "
                            f"{_size(have)} of memory available; use fewer ranks or iterations "
                            "(topoplan.traffic.sources.load_traffic gives its traffic without building it)")


def over_cap_message() -> str:
    """The end of the message of a generated trace over :data:`MAX_GENERATED_ROWS` rows.

    Examples
    --------
    >>> over_cap_message()
    'over the limit of 100,000,000 rows, which memory can raise but never past 4,294,967,296'
    """
    return (f"over the limit of {MAX_TRACE_ROWS:,} rows, which memory can raise but never past "
            f"{MAX_GENERATED_ROWS:,}")


def _size(n_bytes: int) -> str:
    for unit, scale, fmt in (("GiB", 2 ** 30, ".1f"), ("MiB", 2 ** 20, ".0f")):
        if n_bytes >= scale:
            return f"{n_bytes / scale:{fmt}} {unit}"
    return f"{n_bytes / 2 ** 10:.0f} KiB"
