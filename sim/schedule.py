"""Simulate a circuit schedule: the trace phase by phase, each under its configuration, with set-up blackouts.

:func:`simulate_schedule` replays a trace split into phases (:class:`planner.traffic.phases.Phases`)
under a schedule (:mod:`planner.problems.circuits.schedule`). Consecutive phases that keep the same
configuration run as one segment, replayed by :func:`sim.run.simulate_plan` (the one plan-to-simulator
hand-off, which validates every configuration with :func:`planner.problems.validate.validate`);
a one-entry (static) schedule is therefore exactly ``simulate_plan`` on the whole trace.

What is approximated, exactly:

- **Segments are separated as if by a barrier.** A segment starts when the previous one has ended
  on every rank: communication of one phase never overlaps the next phase's, and a rank that
  finished early waits. Each rank keeps its own computation gap before its first call of the
  segment (:meth:`~planner.traffic.phases.Phases.subtrace` with ``rebase``); waiting carried over
  from the previous segment is dropped. This can only lengthen a schedule against a replay in one
  piece, except for that dropped waiting.
- **Set-up.** At an entry whose circuits change, ``setup.during`` says what the plan does during
  the ``setup_s`` blackout: ``wait`` adds ``setup_s`` of idle time before the segment; ``surviving``
  replays the entry's first phase on the circuits both configurations share (every large message
  that would cross a changed port takes the EPS path) and then idles until the set-up is over if
  the phase ended sooner; the rest of the entry runs on the new circuits.
- Nothing moves traffic onto new circuits in the middle of a phase, and forwarding-table changes
  are free (they are the MPI library's relay tables).
"""

from __future__ import annotations

import time

from planner.core.errors import TopoplanError

__all__ = ["simulate_segment", "simulate_schedule", "APPROXIMATION"]

APPROXIMATION = ("phases separated by barriers (no overlap across a configuration change); set-up as the "
                 "plan says (wait: idle set-up time; surviving: the phase on the shared circuits, idle until "
                 "the set-up ends)")


def simulate_segment(topo, phases, i: int, j: int, plan: dict | None, *, placement=None, model=None,
                     threshold_B=None, **replay_options) -> dict:
    """Replay phases ``i`` to ``j - 1`` alone under one configuration.

    Parameters
    ----------
    topo : Topology
    phases : Phases
    i, j : int
    plan : dict or None
        A circuit plan (``circuits``, ``forwarding``, ...); None for the bare network.
    placement : Placement, optional
    model : SimModel or dict, optional
    threshold_B : float, optional
    **replay_options
        Of :func:`sim.run.simulate`.

    Returns
    -------
    dict
        ``time_s`` (the segment's makespan plus the computation gap its earliest rank had before
        it), ``makespan_s``, ``lead_s`` (that gap), ``bytes_by_link_class``, ``wall_s``.

    Examples
    --------
    >>> from planner.core.topology_io import load_topology
    >>> from planner.traffic.generators import neighbor2d, alltoall
    >>> from planner.traffic.phases import concat, detect_phases
    >>> t = load_topology("paper003", ["kind=tree", "ocs=null"])
    >>> ph = detect_phases(concat([neighbor2d(16, 16, 4e6), alltoall(256, 1e5)]), t)
    >>> round(simulate_segment(t, ph, 0, 1, None)["time_s"] * 1e3, 1)     # the halo exchange alone
    51.2
    """
    from sim.run import simulate_plan

    sub = phases.subtrace(i, j)
    lead = float(sub.t_start.min()) if (len(sub) and sub is not phases.trace) else 0.0
    r = simulate_plan(topo, sub, plan, placement=placement, threshold_B=threshold_B, model=model, **replay_options)
    return {"phases": [i, j], "time_s": float(r["makespan_s"]) + lead, "makespan_s": float(r["makespan_s"]),
            "lead_s": lead, "bytes_by_link_class": r["bytes_by_link_class"], "wall_s": r["wall_s"],
            "sim_model": r["sim_model"]}


def _entry_plan(doc: dict, e: dict, circuits=None, forwarding=None) -> dict:
    plan = {"circuits": e["circuits"] if circuits is None else circuits,
            "forwarding": e["forwarding"] if forwarding is None else forwarding,
            "hop_limit": e.get("hop_limit", doc.get("hop_limit"))}
    if e.get("load_sharing"):
        plan["load_sharing"] = e["load_sharing"]
    if doc.get("rank_to_node") is not None:
        plan["rank_to_node"] = doc["rank_to_node"]
    return plan


def simulate_schedule(topo, trace, phases, schedule, *, placement=None, model=None, setup_s: float | None = None,
                      threshold_B: float | None = None, **replay_options) -> dict:
    """Simulate ``trace`` under a circuit ``schedule`` (see the module docstring for what is approximated).

    Parameters
    ----------
    topo : TreeTopology
        The hybrid topology the schedule was made for.
    trace : Trace
        The trace the phases split (``phases.trace``).
    phases : Phases or None
        None only for a one-entry schedule (the whole trace).
    schedule : dict or PlanResult
        A schedule document (``schedule`` entries, :mod:`planner.problems.circuits.schedule`).
    placement : Placement, optional
        For a document without ``rank_to_node``.
    model : SimModel or dict, optional
        Default maxmin with pipelined relays.
    setup_s : float, optional
        Default the document's ``setup_s``, else the topology's ``ocs.setup``.
    threshold_B : float, optional
        Default the document's.
    **replay_options
        Of :func:`sim.run.simulate` (``eager_threshold_B``, ``compute_scale``).

    Returns
    -------
    dict
        ``makespan_s`` (segments plus set-up idle time), ``segments`` (per segment: phases, what ran,
        ``time_s``), ``setup_idle_s``, ``reconfigurations``, ``setup_s``, ``sim_model``,
        ``approximation``, ``wall_s``.

    Raises
    ------
    TopoplanError
        For an invalid schedule (every configuration is validated), a schedule with another number
        of phases, or phases of another trace.

    Examples
    --------
    >>> from planner.core.topology_io import load_topology
    >>> from planner.traffic.generators import neighbor2d
    >>> from planner.problems.circuits.schedule import static_schedule
    >>> from sim.run import simulate_plan
    >>> t = load_topology("paper003")
    >>> tr = neighbor2d(16, 16, 4e6)
    >>> plan = {"circuits": [[0, 16]], "forwarding": {"0": {"1": 16}, "16": {"0": 0}}}
    >>> a = simulate_schedule(t, tr, None, static_schedule(plan))["makespan_s"]
    >>> a == simulate_plan(t, tr, plan)["makespan_s"]
    True
    """
    from planner.problems.circuits.schedule import validate_schedule
    from sim.model import SimModel

    t0 = time.perf_counter()
    doc = schedule.to_dict() if hasattr(schedule, "to_dict") else schedule
    n_phases = len(phases) if phases is not None else 1
    info = validate_schedule(doc, topo, where="schedule", n_phases=n_phases)
    if phases is not None and phases.trace is not trace and len(phases.trace) != len(trace):
        raise TopoplanError("field 'phases': made for another trace")
    setup = float(doc.get("setup_s", topo.ocs.setup_s) if setup_s is None else setup_s)
    if not 0 <= setup < float("inf"):
        raise TopoplanError(f"field 'setup_s': must be a non-negative time, got {setup_s}")
    thr = doc.get("threshold_B") if threshold_B is None else threshold_B
    model = SimModel.coerce(model)
    segments, total, idle = [], 0.0, 0.0
    entries = doc["schedule"]
    for k, e in enumerate(entries):
        a = e["from_phase"]
        b = e.get("to_phase", entries[k + 1]["from_phase"] if k + 1 < len(entries) else n_phases)
        st = e.get("setup")
        if st is not None:
            if st.get("during", "wait") == "surviving":
                plan = _entry_plan(doc, e, st.get("surviving_circuits") or [], st.get("surviving_forwarding") or {})
                seg = _segment(topo, trace, phases, a, a + 1, plan, placement, model, thr, replay_options)
                seg.update(ran="surviving circuits during the set-up")
                wait = max(setup - seg["time_s"], 0.0)
                segments.append(seg)
                total += seg["time_s"] + wait
                idle += wait
                a += 1
            else:
                total += setup
                idle += setup
        if a < b:
            seg = _segment(topo, trace, phases, a, b, _entry_plan(doc, e), placement, model, thr, replay_options)
            seg.update(ran=f"entry {k}")
            segments.append(seg)
            total += seg["time_s"]
    return {"makespan_s": total, "segments": segments, "setup_idle_s": idle,
            "reconfigurations": info["reconfigurations"], "setup_s": setup, "sim_model": model.to_dict(),
            "approximation": APPROXIMATION if len(segments) > 1 or info["reconfigurations"] else "none (one segment)",
            "wall_s": time.perf_counter() - t0}


def _segment(topo, trace, phases, a, b, plan, placement, model, thr, replay_options) -> dict:
    from sim.run import simulate_plan

    if phases is None or (a == 0 and b == len(phases)):
        r = simulate_plan(topo, trace, plan, placement=placement, threshold_B=thr, model=model, **replay_options)
        return {"phases": [a, b], "time_s": float(r["makespan_s"]), "makespan_s": float(r["makespan_s"]),
                "lead_s": 0.0, "bytes_by_link_class": r["bytes_by_link_class"], "wall_s": r["wall_s"]}
    return simulate_segment(topo, phases, a, b, plan, placement=placement, model=model, threshold_B=thr,
                            **replay_options)
