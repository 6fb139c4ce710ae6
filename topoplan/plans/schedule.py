"""The circuit-schedule document: circuit plans in time, phase by phase, and the rules a schedule must meet.

A schedule (``topoplan phases --schedule -o``, read by :mod:`topoplan.sim.schedule` and the OCS
exports) has ``schedule``, a list of entries, each a circuit plan (:mod:`topoplan.plans.circuits`)
over phases ``from_phase .. to_phase - 1`` with an optional ``setup`` (``during``: ``wait`` or
``surviving``) and, for a phase whose circuits change inside it, ``slots`` (configurations with
``duration_s`` and ``bytes_B``); and ``n_phases``, ``setup_s``, ``blackout`` (:data:`BLACKOUTS`),
``threshold_B``, ``hop_limit``, ``rank_to_node``. :func:`validate_schedule` checks one, :func:`entry_end` reads where an entry ends,
:func:`static_schedule` makes one of a single plan and :func:`slot_fractions` says how a decomposed
phase's slots share its messages.
"""

from __future__ import annotations

import math

import numpy as np

from topoplan.core.errors import TopoplanError
from topoplan.plans.circuits import _number, validate_plan_dict

__all__ = ["BLACKOUTS", "static_schedule", "validate_schedule", "entry_end", "slot_fractions"]

# What the network does while an OCS sets up new circuits (topoplan.problems.circuits.schedule): ``eps``, the
# phase runs on the packet switches (or waits, by the entry's ``setup.during``); ``stall``, everything stops.
BLACKOUTS = ("eps", "stall")


def _is_index(x) -> bool:
    return not isinstance(x, bool) and isinstance(x, (int, np.integer))


def static_schedule(plan: dict, n_phases: int = 1) -> dict:
    """A circuit plan as a one-entry schedule document.

    Parameters
    ----------
    plan : dict
        A circuit plan (``circuits``, ``forwarding``, ...).
    n_phases : int, optional

    Returns
    -------
    dict

    Examples
    --------
    >>> d = static_schedule({"circuits": [[0, 16]], "forwarding": {}, "threshold_B": 1250.0}, 3)
    >>> d["schedule"][0]["from_phase"], d["schedule"][0]["to_phase"], d["n_phases"], d["threshold_B"]
    (0, 3, 3, 1250.0)
    """
    entry = {"from_phase": 0, "to_phase": int(n_phases), "from_s": 0.0, "circuits": plan.get("circuits") or [],
             "forwarding": plan.get("forwarding") or {}, "load_sharing": plan.get("load_sharing"),
             "source": plan.get("method", "static"), "setup": None}
    out = {"schedule": [entry], "n_phases": int(n_phases)}
    for k in ("threshold_B", "hop_limit", "rank_to_node", "rank_to_slot", "inputs"):
        if plan.get(k) is not None:
            out[k] = plan[k]
    return out


def _validate_slots(e: dict, topo, w: str, fp: int, tp: int, circ: set, hop_limit) -> tuple[set, int]:
    """Check a decomposed entry's ``slots``; returns the last slot's circuits and the changes between slots."""
    slots = e["slots"]
    if not isinstance(slots, list) or not slots:
        raise TopoplanError(f"{w}: field 'slots': expected a non-empty list of configurations")
    if tp != fp + 1:
        raise TopoplanError(f"{w}: field 'slots': a decomposed entry covers one phase, got phases {fp}..{tp - 1}")
    S = int(topo.n_switches)
    prev, changes = None, 0
    for j, sl in enumerate(slots):
        ws = f"{w}: slot {j}"
        if not isinstance(sl, dict):
            raise TopoplanError(f"{ws}: expected an object with 'circuits', 'forwarding', 'bytes_B', 'duration_s'")
        _number(sl.get("duration_s"), ws, "duration_s", "a non-negative time")
        for t in sl.get("bytes_B") or []:
            if (not isinstance(t, (list, tuple)) or len(t) != 3 or not _is_index(t[0]) or not _is_index(t[1])
                    or not (0 <= t[0] < S and 0 <= t[1] < S) or isinstance(t[2], bool)
                    or not isinstance(t[2], (int, float)) or not 0 <= t[2] < math.inf):
                raise TopoplanError(f"{ws}: field 'bytes_B': expected [switch, switch, bytes] triples, got {t!r}")
        validate_plan_dict({"circuits": sl.get("circuits"), "forwarding": sl.get("forwarding"),
                            "hop_limit": sl.get("hop_limit", hop_limit)}, topo, where=ws)
        c = {tuple(sorted(map(int, x))) for x in (sl.get("circuits") or [])}
        if j == 0 and c != circ:
            raise TopoplanError(f"{ws}: field 'circuits': the entry's circuits must be its first slot's")
        if prev is not None and c != prev:
            changes += 1
        prev = c
    return prev, changes


def entry_end(entries: list, i: int, n_phases: int | None = None):
    """The phase after the last of entry ``i``: its ``to_phase`` (when not null), else the next entry's ``from_phase``, else
    ``n_phases`` (the last entry of a schedule that records no phase count covers one phase).

    Not checked (:func:`validate_schedule` checks it): the value as the document gives it.

    Parameters
    ----------
    entries : list of dict
        The schedule's entries.
    i : int
    n_phases : int, optional

    Returns
    -------
    int or object

    Examples
    --------
    >>> entries = [{"from_phase": 0}, {"from_phase": 2, "to_phase": 3}, {"from_phase": 3}]
    >>> [entry_end(entries, i, 5) for i in range(3)], entry_end(entries, 2)
    ([2, 3, 5], 4)
    """
    e = entries[i]
    if e.get("to_phase") is not None:
        return e["to_phase"]
    if i + 1 < len(entries):
        return entries[i + 1].get("from_phase")
    return e["from_phase"] + 1 if n_phases is None else n_phases


def validate_schedule(doc: dict, topo, *, where: str = "schedule", n_phases: int | None = None) -> dict:
    """Check a schedule document: every entry (and every surviving configuration) is a valid circuit plan.

    Entries must cover phases ``0 .. n_phases - 1`` in order without gaps, their ``from_s`` (when given)
    finite, non-negative and non-decreasing; the document's ``setup_s`` (when given) is a finite
    non-negative time, its ``blackout`` one of :data:`BLACKOUTS`, its ``threshold_B`` a finite
    non-negative size; a ``setup`` with
    ``during: surviving`` must name circuits both neighbouring entries have. An entry with ``slots``
    (a decomposed phase) covers one phase, its circuits are its first slot's, every slot is a valid
    circuit plan with a non-negative ``duration_s`` and ``bytes_B`` triples, it is entered with
    ``wait``, and the next entry compares its circuits with the last slot's.

    Parameters
    ----------
    doc : dict
        With a ``schedule`` list.
    topo : TreeTopology
    where : str, optional
    n_phases : int, optional
        Default the document's ``n_phases``.

    Returns
    -------
    dict
        ``entries``, ``phases``, ``reconfigurations`` (set-ups between entries and between slots).

    Raises
    ------
    TopoplanError
        Naming ``where``, the entry and the field at fault.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> t = load_topology("paper003")
    >>> validate_schedule(static_schedule({"circuits": [[0, 16]], "forwarding": {"0": {"1": 16}}}), t)
    {'entries': 1, 'phases': 1, 'reconfigurations': 0}
    >>> validate_schedule({"schedule": [{"from_phase": 0, "circuits": [[0, 1]], "forwarding": {}}]}, t)
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: schedule: entry 0: field 'circuits[0]': nodes 0 and 1 are under the same switch 0
    >>> validate_schedule({**static_schedule({"circuits": []}), "setup_s": float("nan")}, t)
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: schedule: field 'setup_s': expected a non-negative time in seconds, got nan
    """
    if not isinstance(doc, dict) or not isinstance(doc.get("schedule"), list) or not doc["schedule"]:
        raise TopoplanError(f"{where}: field 'schedule': expected a non-empty list of entries")
    entries = doc["schedule"]
    if doc.get("setup_s") is not None:
        _number(doc["setup_s"], where, "setup_s")
    if doc.get("blackout") is not None and (not isinstance(doc["blackout"], str) or doc["blackout"] not in BLACKOUTS):
        raise TopoplanError(f"{where}: field 'blackout': expected one of {', '.join(BLACKOUTS)}, got {doc['blackout']!r}")
    if doc.get("threshold_B") is not None:
        _number(doc["threshold_B"], where, "threshold_B", "a non-negative size in bytes")
    n = doc.get("n_phases", n_phases) if n_phases is None else n_phases
    if n is not None and (not _is_index(n) or n < 1):
        raise TopoplanError(f"{where}: field 'n_phases': expected a positive number of phases, got {n!r}")
    prev_to, changes = 0, 0
    prev_circ, prev_s = None, 0.0
    for i, e in enumerate(entries):
        w = f"{where}: entry {i}"
        if not isinstance(e, dict):
            raise TopoplanError(f"{w}: expected an object with 'from_phase', 'circuits' and 'forwarding'")
        fp = e.get("from_phase")
        if isinstance(fp, bool) or not isinstance(fp, int) or fp != prev_to:
            raise TopoplanError(f"{w}: field 'from_phase': expected {prev_to} (entries cover the phases in order), "
                                f"got {fp!r}")
        tp = entry_end(entries, i, n)
        if isinstance(tp, bool) or not isinstance(tp, int) or tp <= fp:
            raise TopoplanError(f"{w}: field 'to_phase': expected a phase after {fp}, got {tp!r}")
        if e.get("from_s") is not None:
            start = _number(e["from_s"], w, "from_s")
            if start < prev_s:
                raise TopoplanError(f"{w}: field 'from_s': {start!r} is before the previous entry's start {prev_s!r}")
            prev_s = start
        plan = {k: e.get(k) for k in ("circuits", "forwarding")}
        plan["hop_limit"] = e.get("hop_limit", doc.get("hop_limit"))
        validate_plan_dict(plan, topo, where=w)
        circ = {tuple(sorted(map(int, c))) for c in (e.get("circuits") or [])}
        setup = e.get("setup")
        exit_circ = circ
        if e.get("slots") is not None:
            exit_circ, inner = _validate_slots(e, topo, w, fp, tp, circ, plan["hop_limit"])
            changes += inner
            if setup is not None and isinstance(setup, dict) and setup.get("during", "wait") != "wait":
                raise TopoplanError(f"{w}: field 'setup.during': a decomposed phase is entered with 'wait'")
        if setup is not None:
            if i == 0:
                raise TopoplanError(f"{w}: field 'setup': the first configuration is set up before the run")
            if not isinstance(setup, dict) or setup.get("during", "wait") not in ("wait", "surviving"):
                raise TopoplanError(f"{w}: field 'setup.during': expected 'wait' or 'surviving'")
            if setup.get("during") == "surviving":
                surv = {tuple(sorted(map(int, c))) for c in (setup.get("surviving_circuits") or [])}
                if not surv <= (circ & prev_circ):
                    raise TopoplanError(f"{w}: field 'setup.surviving_circuits': a circuit not in both this entry "
                                        "and the previous one")
                validate_plan_dict({"circuits": setup.get("surviving_circuits") or [],
                                    "forwarding": setup.get("surviving_forwarding") or {},
                                    "hop_limit": plan["hop_limit"]}, topo, where=f"{w} (surviving circuits)")
            changes += 1
        elif i > 0 and circ != prev_circ:
            raise TopoplanError(f"{w}: field 'setup': the circuits change but the entry has no set-up")
        prev_to, prev_circ = tp, exit_circ
    if n is not None and prev_to != n:
        raise TopoplanError(f"{where}: field 'schedule': entries cover phases 0..{prev_to - 1}, "
                            f"but there are {n} phases")
    return {"entries": len(entries), "phases": prev_to, "reconfigurations": changes}


def slot_fractions(slot_bytes_B, durations_s) -> tuple[np.ndarray, np.ndarray]:
    """Every slot's share of every directed switch pair's messages, and of all other messages.

    Parameters
    ----------
    slot_bytes_B : array_like
        ``(K, S, S)`` bytes every slot carries per directed switch pair
        (:func:`topoplan.problems.circuits.decompose.slot_bytes`).
    durations_s : array_like
        ``(K,)``.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        ``F`` (``(K, S, S)``, summing to 1 over the slots for every pair): a pair the slots carry
        bytes for gets their shares; every other pair (the diagonal: inside a switch) the slots'
        shares of the total duration, ``w`` (``(K,)``; all in the first slot when no slot lasts).

    Examples
    --------
    >>> F, w = slot_fractions([[[0, 3], [0, 0]], [[0, 1], [0, 0]]], [0.25, 0.75])
    >>> F[:, 0, 1].tolist(), F[:, 1, 0].tolist(), w.tolist()     # 1 -> 0 has no bytes: duration shares
    ([0.75, 0.25], [0.25, 0.75], [0.25, 0.75])
    """
    B = np.asarray(slot_bytes_B, dtype=np.float64)
    d = np.maximum(np.asarray(durations_s, dtype=np.float64), 0.0)
    K = B.shape[0]
    if K == 0:
        raise TopoplanError("field 'slots': a decomposition with no slot has no shares")
    w = d / d.sum() if d.sum() > 0 else np.eye(K)[0]
    tot = B.sum(axis=0)
    F = np.where(tot[None] > 0, B / np.where(tot > 0, tot, 1.0)[None], w[:, None, None])
    return F, w
