"""The compiled program's format: what the trace compiler writes and the event loop runs.

The micro-op kinds of a rank's program (``K_*``), the streamed collectives' algorithms and table columns
(``GEN_*``, ``GN_*``), the rows of the loop's per-rank table (``R_*``) and the layout of the loop's state
between the calls of a replay in pieces (:data:`STATE`, :func:`no_state`, :func:`no_stream`). The compiler
(:mod:`topoplan.sim.compiler`), the loop (:mod:`topoplan.sim._loop`, whose Numba code reads these constants
as compile-time values: this file is one of the sources its cache and ahead-of-time build are stamped
with, ``topoplan.sim._engine.SOURCES``) and the piece-wise replay (:mod:`topoplan.sim.pieces`) share it;
it imports only NumPy.

Examples
--------
>>> K_SEND, K_GEN, R_PC
(0, 9, 0)
>>> [len(a) for a in no_state()[:3]]
[0, 0, 0]
"""

from __future__ import annotations

import numpy as np

__all__ = ["STATE", "STATE_INDEX", "no_state", "no_stream", "PROGRAM_OP_BYTES", "PROGRAM_ENTRY_BYTES",
           "PROGRAM_ROW_BYTES"]

# micro-op kinds of the compiled program (the compiler writes them, the loop runs them)
K_SEND, K_ISEND, K_RECV, K_IRECV, K_SENDRECV, K_WAIT, K_WAITALL, K_STEP, K_NOP, K_GEN = range(10)
# streamed collectives (GEN micro-ops): algorithms, and the columns of their table
GEN_PAIRWISE, GEN_SPREAD, GEN_RING = range(3)
GN_ALG, GN_P, GN_ME, GN_BLOCK, GN_MEM = range(5)

# rows of run_core's per-rank table ``R`` (the piece-wise replay moves the program counters between calls)
(R_PC, R_BLOCKED, R_NWAIT, R_GAPDONE, R_OPEN_H, R_OPEN_T, R_POST_H, R_POST_T, R_UNX_H, R_UNX_T, R_HELD,
 R_STEP) = range(12)

# run_core's state between calls of a replay in pieces (names, dtypes and dimensions, in tuple order): what
# topoplan.sim._loop.run_core keeps of a run. A first call passes no_state(); a call that stops because a rank
# needs the next piece of the trace (status 2) returns its state, which the next call resumes.
STATE = (("C", "<i8", 1), ("S", "<f8", 1), ("R", "<i8", 2), ("clock", "<f8", 1), ("finish", "<f8", 1),
         ("rdy_t", "<f8", 1), ("rdy_r", "<i8", 1), ("reqs", "<i8", 1), ("g_peer", "<i8", 1),
         ("g_bytes", "<f8", 1), ("g_send", "<i8", 1), ("Q", "<i8", 2), ("qfree", "<i8", 1), ("M", "<i8", 2),
         ("MF", "<f8", 2), ("mfree", "<i8", 1), ("FL", "<i8", 2), ("flow_size", "<f8", 1), ("live", "|u1", 1),
         ("pend_t", "<f8", 1), ("pend_f", "<i8", 1), ("init_fin", "<f8", 1), ("lbytes", "<f8", 1),
         ("caps", "<f8", 1), ("capv", "<f8", 1), ("lcap2", "<f8", 1), ("seg_rows", "<i8", 2),
         ("seg_len", "<i8", 1), ("seg_extra", "<f8", 1), ("seg_lat", "<f8", 1), ("seg_inst", "|b1", 1),
         ("seg_vl", "<i8", 1), ("sid", "<i8", 1), ("rows", "<i8", 2), ("back", "<i8", 2), ("lens", "<i8", 1),
         ("sgrp", "<i8", 1), ("stag", "<f8", 1), ("hp", "<i8", 2), ("free", "<i8", 1), ("segs", "<i8", 2),
         ("pool", "<i8", 1), ("meta", "<i8", 1), ("iw", "<i8", 2), ("fw", "<f8", 2), ("gI", "<i8", 2),
         ("gF", "<f8", 2), ("agl", "<i8", 2), ("gm", "<i8", 1), ("EP", "<i8", 2), ("HT", "<i8", 2),
         ("em", "<i8", 1), ("gbuf", "<i8", 1), ("fbuf", "<i8", 1), ("sbuf", "<i8", 1), ("tl", "<f8", 2),
         ("mcur", "<i8", 1), ("mark_t", "<f8", 1), ("dims", "<i8", 1))
STATE_INDEX = {name: k for k, (name, _, _) in enumerate(STATE)}


def no_state() -> tuple:
    """``run_core``'s ``state`` argument for a run from the start (empty arrays of the state's types).

    Examples
    --------
    >>> s = no_state()
    >>> len(s) == len(STATE), s[STATE_INDEX["R"]].shape
    (True, (0, 0))
    """
    return tuple(np.zeros((0,) * nd, dtype=np.dtype(dt)) for _, dt, nd in STATE)


def no_stream() -> tuple:
    """``run_core``'s ``stream`` argument when no collective is streamed (empty tables of the right types).

    Examples
    --------
    >>> gen, mem, node, parts = no_stream()[:4]
    >>> gen.shape, len(parts)
    ((0, 5), 6)
    """
    z_i, z_f = np.zeros(0, np.int64), np.zeros(0)
    parts = (z_i, z_i, z_i, z_i, np.zeros(1, np.int64), z_i)
    return (np.zeros((0, 5), np.int64), z_i, z_i, parts, z_f, z_f, z_f, np.zeros(0, bool), np.zeros(3), z_f)


# What compiling a trace holds at its peak, besides the trace (measured with tracemalloc on NPB class C
# replays at 256 ranks: 150-215 bytes a row for CG, LU, IS and MG): the micro-ops' arrays and their
# temporaries, each collective step's entries, and per trace row its micro-op offsets and gap.
PROGRAM_OP_BYTES = 128
PROGRAM_ENTRY_BYTES = 80
PROGRAM_ROW_BYTES = 24
