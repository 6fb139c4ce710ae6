"""Simulate a circuit schedule: the trace phase by phase, each under its configuration, with set-up blackouts.

:func:`simulate_schedule` replays a trace split into phases (:class:`topoplan.traffic.phases.Phases`)
under a schedule (:mod:`topoplan.plans.schedule`). Consecutive phases that keep the same
configuration run as one segment, replayed by :func:`topoplan.sim.run.simulate_plan` (the one plan-to-simulator
hand-off, which validates every configuration with :func:`topoplan.plans.validate.validate`);
a one-entry (static) schedule is therefore exactly ``simulate_plan`` on the whole trace.

What is approximated, exactly:

- **Segments are separated as if by a barrier.** A segment starts when the previous one has ended
  on every rank: communication of one phase never overlaps the next phase's, and a rank that
  finished early waits. Each rank keeps its own computation gap before its first call of the
  segment (:meth:`~topoplan.traffic.phases.Phases.subtrace` with ``rebase``); waiting carried over
  from the previous segment is dropped. This can only lengthen a schedule against a replay in one
  piece, except for that dropped waiting.
- **Set-up.** At an entry whose circuits change, ``setup.during`` says what the plan does during
  the ``setup_s`` blackout: ``wait`` adds ``setup_s`` of idle time before the segment; ``surviving``
  replays the entry's first phase on the circuits both configurations share (every large message
  that would cross a changed port takes the EPS path) and then idles until the set-up is over if
  the phase ended sooner; the rest of the entry runs on the new circuits.
- Forwarding-table changes are free (they are the MPI library's relay tables).

**Circuits that change inside a phase** (an entry with ``slots``, made by the ``solstice`` and
``bvn`` schedulers from :mod:`topoplan.problems.circuits.decompose`). The phase runs as one
*sub-phase per slot*, in order, each replayed alone under its slot's circuits and tables, with a
set-up of ``setup_s`` of idle time between two slots whose circuits differ (``wait``; a change
into the entry is a ``wait`` too). Sub-phase ``k`` repeats the phase's calls in their order with
every message cut to its share for slot ``k`` (:func:`slot_traces`):

- a message between two switches takes the share the slots give its directed switch pair
  (``bytes_B``: what the slot's circuits serve plus its part of the EPS residual); every other
  message (inside a switch, or between switches no slot names) the slot's share of the slots'
  durations; the shares of a message add up to it, so the sub-phases carry the phase's bytes;
- an ``alltoall``/``alltoallv`` larger than MPICH's short-message size is written per
  destination with those shares (MPICH's alltoallv algorithm then runs it); the other
  collectives, and the computation gaps, stay whole in sub-phase 0; later sub-phases have no
  computation;
- point-to-point calls (and their waits) are in every sub-phase, with zero bytes where a pair has
  no share, so matching is unchanged.

A slot's tables route a large message over a circuit only between the circuit's own two switches
(``hop_limit`` 1): every pair without a circuit in the slot takes the EPS uplinks, concurrently
with the circuits, which is how the residual rides the EPS. Flows follow the configuration of the
sub-phase they start in. A one-slot entry replays the phase itself, unchanged, under its slot's
configuration: exactly the static replay of that phase.

What an MPI run would have to do to follow such a schedule: cut every message (each alltoall
into one alltoallv per slot) into the slot shares of the plan, run the slots' pieces one slot
after another with a barrier and the OCS reconfiguration between slots, and send a piece over
the relays only when its switch pair has a circuit in the slot. This is realizable for one
collective or for repeated exchanges whose data does not depend on each other; where a later
call of the phase needs an earlier call's data (FT's successive transposes), a real run would
need one slot sequence per call, with its own set-ups, so the replay is optimistic there.
"""

from __future__ import annotations

import time

from topoplan.core.errors import TopoplanError
from topoplan.core.placement import placement_from_doc, sequential
from topoplan.plans.schedule import entry_end, slot_fractions, validate_schedule
from topoplan.sim.run import simulate_plan
from topoplan.sim.simmodel import SimModel
from topoplan.traffic.collectives import MPICHThresholds
from topoplan.traffic.trace import COLLECTIVE_OPS, OP_CODE, Trace

__all__ = ["simulate_segment", "simulate_schedule", "simulate_slots", "slot_traces", "APPROXIMATION"]

APPROXIMATION = ("phases separated by barriers (no overlap across a configuration change); set-up as the "
                 "plan says (wait: idle set-up time; surviving: the phase on the shared circuits, idle until "
                 "the set-up ends)")
SLOT_APPROXIMATION = ("a decomposed phase runs as one sub-phase per slot, separated as if by barriers, every message "
                      "cut to its slot shares, idle set-up between slots")


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
        Of :func:`topoplan.sim.run.simulate`.

    Returns
    -------
    dict
        ``time_s`` (the segment's makespan plus the computation gap its earliest rank had before
        it), ``makespan_s``, ``lead_s`` (that gap), ``bytes_by_link_class``, ``wall_s``.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.generators import neighbor2d, alltoall
    >>> from topoplan.traffic.phases import concat, detect_phases
    >>> t = load_topology("paper003", ["kind=tree", "ocs=null"])
    >>> ph = detect_phases(concat([neighbor2d(16, 16, 4e6), alltoall(256, 1e5)]), t)
    >>> round(simulate_segment(t, ph, 0, 1, None)["time_s"] * 1e3, 1)     # the halo exchange alone
    51.2
    """
    sub = phases.subtrace(i, j)
    lead = float(sub.t_start.min()) if (len(sub) and sub is not phases.trace) else 0.0
    r = simulate_plan(topo, sub, plan, placement=placement, threshold_B=threshold_B, model=model, **replay_options)
    return {"phases": [i, j], "time_s": float(r["makespan_s"]) + lead, "makespan_s": float(r["makespan_s"]),
            "lead_s": lead, "bytes_by_link_class": r["bytes_by_link_class"], "wall_s": r["wall_s"],
            "sim_model": r["sim_model"]}


def _slot_bytes_array(slots, n_switches: int):
    import numpy as np

    B = np.zeros((len(slots), n_switches, n_switches))
    for k, sl in enumerate(slots):
        for a, b, x in sl.get("bytes_B") or []:
            if not (0 <= int(a) < n_switches and 0 <= int(b) < n_switches) or not float(x) >= 0:
                raise TopoplanError(f"slot {k}: field 'bytes_B': bad entry {[a, b, x]} ({n_switches} switches)")
            B[k, int(a), int(b)] += float(x)
    return B


def slot_traces(trace, slots, rank_switch, *, n_switches: int | None = None, short_B: float | None = None) -> list:
    """Cut the calls of one phase into one sub-phase trace per slot (see the module docstring).

    Parameters
    ----------
    trace : Trace
        The phase alone (:meth:`~topoplan.traffic.phases.Phases.subtrace`).
    slots : list of dict
        Each with ``bytes_B`` (``[switch a, switch b, bytes]`` triples: what the slot carries per
        directed switch pair) and ``duration_s``.
    rank_switch : array_like of int
        Switch of every rank.
    n_switches : int, optional
        Default the largest switch id plus one.
    short_B : float, optional
        Alltoalls of at most this many bytes per destination stay whole in sub-phase 0 (default
        MPICH's ``alltoall_short_B``: Bruck's algorithm, which forwards blocks, cannot be cut per pair).

    Returns
    -------
    list of Trace
        One per slot; a single slot returns ``[trace]`` itself.

    Examples
    --------
    >>> from topoplan.traffic.generators import alltoall
    >>> from topoplan.traffic.matrix import from_trace
    >>> t = alltoall(4, 1e6)
    >>> slots = [{"bytes_B": [[0, 1, 3e6], [1, 0, 3e6]], "duration_s": 0.3},
    ...          {"bytes_B": [[0, 1, 1e6], [1, 0, 1e6]], "duration_s": 0.1}]
    >>> parts = slot_traces(t, slots, [0, 0, 1, 1])
    >>> [round(from_trace(x).total_bytes() / 1e6, 3) for x in parts], from_trace(t).total_bytes() / 1e6
    ([9.0, 3.0], 12.0)
    >>> parts[1].op_counts()          # each rank's alltoall, written per destination
    {'alltoall': 16}
    """
    import numpy as np

    K = len(slots)
    if K == 0:
        raise TopoplanError("field 'slots': expected at least one slot")
    if K == 1:
        return [trace]
    sw = np.asarray(rank_switch, dtype=np.int64)
    S = int(n_switches) if n_switches is not None else int(sw.max(initial=0)) + 1
    F, w = slot_fractions(_slot_bytes_array(slots, S), [float(sl.get("duration_s") or 0.0) for sl in slots])
    short = float(MPICHThresholds().alltoall_short_B if short_B is None else short_B)
    op, peer, rank, nb = trace.op, trace.peer, trace.rank, trace.bytes
    N = len(trace)
    sends = np.isin(op, [OP_CODE[o] for o in ("send", "isend", "sendrecv")]) & (peer >= 0)
    recvs = np.isin(op, [OP_CODE[o] for o in ("recv", "irecv")])
    a2a = np.isin(op, [OP_CODE["alltoall"], OP_CODE["alltoallv"]])
    per_dest = a2a & (peer >= 0)
    whole = a2a & (peer < 0) & (nb > short)
    other = np.isin(op, [OP_CODE[o] for o in COLLECTIVE_OPS]) & ~per_dest & ~whole
    members = {int(c): np.asarray(trace.members(int(c)), dtype=np.int64) for c in np.unique(trace.comm[whole])}
    m_row = np.ones(N, dtype=np.int64)
    for c, mem in members.items():
        m_row[whole & (trace.comm == c)] = len(mem)
    # a new call starts at every row except the later rows of an alltoall(v) written per destination
    new_call = np.ones(N, dtype=bool)
    if N > 1:
        new_call[1:] = ~(per_dest[1:] & per_dest[:-1] & (rank[1:] == rank[:-1]) & (op[1:] == op[:-1])
                         & (trace.t_start[1:] == trace.t_start[:-1]))
    out = []
    for k in range(K):
        cnt = np.where(whole, m_row, 1)
        if k > 0:
            cnt = np.where(other, 0, cnt)
        src = np.repeat(np.arange(N), cnt)
        pos = np.arange(len(src)) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        ex = whole[src]
        new_peer = peer[src].copy()
        for c, mem in members.items():
            sel = ex & (trace.comm[src] == c)
            new_peer[sel] = mem[pos[sel]]
        r = rank[src]
        by = nb[src].astype(np.float64)
        pair = sends[src] | per_dest[src] | ex | (recvs[src] & (peer[src] >= 0))
        is_recv = recvs[src]
        a = np.where(is_recv, np.maximum(peer[src], 0), r)
        b = np.where(is_recv, r, np.maximum(new_peer, 0))
        f = np.ones(len(src))
        f[pair] = F[k, sw[a[pair]], sw[b[pair]]]
        f[is_recv & (peer[src] < 0)] = w[k]          # a receive from any source: the duration share
        by = by * f
        if k == 0:
            ts, te = trace.t_start[src], trace.t_end[src]
        else:       # no computation: every call right after the previous one (zero gaps), calls kept apart
            call = np.cumsum(new_call[src] & (pos == 0)) - 1
            first = np.r_[0, np.flatnonzero(np.diff(r)) + 1] if len(r) else np.zeros(0, np.int64)
            base = np.zeros(len(src), dtype=np.int64)
            if len(r):
                base = np.repeat(call[first], np.diff(np.r_[first, len(r)]))
            c_of = (call - base).astype(np.float64)
            ts, te = c_of * 1e-9, (c_of + 1.0) * 1e-9
        out.append(Trace(n_ranks=trace.n_ranks, rank=r, op=op[src], peer=new_peer, bytes=by, root=trace.root[src],
                         comm_size=trace.comm_size[src], t_start=ts, t_end=te, comm=trace.comm[src],
                         tag=trace.tag[src], req=trace.req[src], communicators=trace.communicators, unknown_ops={},
                         source=f"{trace.source or 'trace'}[slot {k}]"))
    return out


def simulate_slots(topo, trace, entry: dict, doc: dict, *, rank_switch, placement=None, model=None,
                   setup_s: float = 0.0, threshold_B=None, lead_s: float = 0.0, **replay_options) -> dict:
    """Replay one phase (``trace``, alone) under an entry's slots, with idle set-ups between slots that differ.

    Parameters
    ----------
    topo : TreeTopology
    trace : Trace
        The phase alone.
    entry : dict
        A schedule entry with ``slots`` (each a circuit plan plus ``bytes_B`` and ``duration_s``).
    doc : dict
        The schedule document (``rank_to_node``, ``hop_limit``).
    rank_switch : array_like of int
    placement, model, threshold_B : optional
        As for :func:`topoplan.sim.run.simulate_plan`.
    setup_s : float, optional
    lead_s : float, optional
        Computation before the phase's first call (added to the first slot).
    **replay_options
        Of :func:`topoplan.sim.run.simulate`.

    Returns
    -------
    dict
        ``time_s`` (slots plus set-ups), ``slot_time_s`` (per slot), ``setup_idle_s``,
        ``reconfigurations`` (between slots), ``bytes_by_link_class`` (summed).

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.generators import alltoall
    >>> t = load_topology("paper003", ["ocs.nodes_per_switch=1"])
    >>> e = {"slots": [{"circuits": [[0, 16]], "forwarding": {}, "bytes_B": [[0, 1, 1e6]], "duration_s": 1e-3},
    ...                {"circuits": [[0, 32]], "forwarding": {}, "bytes_B": [[0, 2, 1e6]], "duration_s": 1e-3}]}
    >>> r = simulate_slots(t, alltoall(256, 1e4), e, {}, rank_switch=[r // 64 for r in range(256)], setup_s=0.01)
    >>> len(r["slot_time_s"]), r["reconfigurations"], r["setup_idle_s"]
    (2, 1, 0.01)
    """
    slots = entry["slots"]
    S = int(topo.n_switches)
    parts = slot_traces(trace, slots, rank_switch, n_switches=S)
    total, idle, changes, times = 0.0, 0.0, 0, []
    by_class: dict = {}
    prev = None
    for k, (sl, tr) in enumerate(zip(slots, parts)):
        circ = {tuple(sorted(map(int, c))) for c in (sl.get("circuits") or [])}
        if prev is not None and circ != prev:
            total += setup_s
            idle += setup_s
            changes += 1
        prev = circ
        r = simulate_plan(topo, tr, _entry_plan(doc, sl), placement=placement, threshold_B=threshold_B, model=model,
                          **replay_options)
        t = float(r["makespan_s"]) + (lead_s if k == 0 else 0.0)
        times.append(t)
        total += t
        for c, x in r["bytes_by_link_class"].items():
            by_class[c] = by_class.get(c, 0.0) + float(x)
    return {"time_s": total, "slot_time_s": times, "setup_idle_s": idle, "reconfigurations": changes,
            "bytes_by_link_class": by_class, "n_slots": len(slots), "lead_s": float(lead_s)}


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
        A schedule document (``schedule`` entries, :mod:`topoplan.plans.schedule`).
    placement : Placement, optional
        For a document without ``rank_to_node``.
    model : SimModel or dict, optional
        Default maxmin with pipelined relays.
    setup_s : float, optional
        Default the document's ``setup_s``, else the topology's ``ocs.setup``.
    threshold_B : float, optional
        Default the document's.
    **replay_options
        Of :func:`topoplan.sim.run.simulate` (``eager_threshold_B``, ``compute_scale``).

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
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.generators import neighbor2d
    >>> from topoplan.plans.schedule import static_schedule
    >>> from topoplan.sim.run import simulate_plan
    >>> t = load_topology("paper003")
    >>> tr = neighbor2d(16, 16, 4e6)
    >>> plan = {"circuits": [[0, 16]], "forwarding": {"0": {"1": 16}, "16": {"0": 0}}}
    >>> a = simulate_schedule(t, tr, None, static_schedule(plan))["makespan_s"]
    >>> a == simulate_plan(t, tr, plan)["makespan_s"]
    True
    """
    t0 = time.perf_counter()
    doc = schedule.to_dict() if hasattr(schedule, "to_dict") else schedule
    n_phases = len(phases) if phases is not None else 1
    info = validate_schedule(doc, topo, where="schedule", n_phases=n_phases)
    if phases is not None and phases.trace is not trace and len(phases.trace) != len(trace):
        raise TopoplanError("field 'phases': made for another trace")
    if setup_s is None:
        setup_s = topo.ocs.setup_s if doc.get("setup_s") is None else doc["setup_s"]
    setup = float(setup_s)
    if not 0 <= setup < float("inf"):
        raise TopoplanError(f"field 'setup_s': must be a non-negative time, got {setup_s}")
    thr = doc.get("threshold_B") if threshold_B is None else threshold_B
    model = SimModel.coerce(model)
    segments, total, idle = [], 0.0, 0.0
    entries = doc["schedule"]
    for k, e in enumerate(entries):
        a = e["from_phase"]
        b = entry_end(entries, k, n_phases)
        st = e.get("setup")
        if e.get("slots"):
            if st is not None:          # into a decomposed phase: always wait (validate_schedule checks it)
                total += setup
                idle += setup
            seg = _slotted(topo, trace, phases, a, e, doc, placement, model, setup, thr, replay_options)
            seg.update(ran=f"entry {k}: {len(e['slots'])} slots")
            segments.append(seg)
            total += seg["time_s"]
            idle += seg["setup_idle_s"]
            continue
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
    approx = APPROXIMATION if len(segments) > 1 or info["reconfigurations"] else "none (one segment)"
    if any(e.get("slots") and len(e["slots"]) > 1 for e in entries):
        approx = f"{approx}; {SLOT_APPROXIMATION}"
    return {"makespan_s": total, "segments": segments, "setup_idle_s": idle,
            "reconfigurations": info["reconfigurations"], "setup_s": setup, "sim_model": model.to_dict(),
            "approximation": approx, "wall_s": time.perf_counter() - t0}


def _slotted(topo, trace, phases, a, e, doc, placement, model, setup, thr, replay_options) -> dict:
    import numpy as np

    if doc.get("rank_to_node") is not None:
        pl = placement_from_doc(doc, "schedule")
    else:
        pl = placement if placement is not None else sequential(trace.n_ranks, topo)
    rank_switch = topo.node_switch()[np.asarray(pl.rank_to_node, dtype=np.int64)[:trace.n_ranks]]
    if phases is None or len(phases) == 1:
        sub, lead = trace, 0.0
    else:
        sub = phases.subtrace(a, a + 1)
        lead = float(sub.t_start.min()) if len(sub) else 0.0
    r = simulate_slots(topo, sub, e, doc, rank_switch=rank_switch, placement=placement, model=model, setup_s=setup,
                       threshold_B=thr, lead_s=lead, **replay_options)
    return {"phases": [a, a + 1], "time_s": r["time_s"], "makespan_s": r["time_s"] - lead, "lead_s": lead,
            "slot_time_s": r["slot_time_s"], "setup_idle_s": r["setup_idle_s"],
            "reconfigurations": r["reconfigurations"], "bytes_by_link_class": r["bytes_by_link_class"]}


def _segment(topo, trace, phases, a, b, plan, placement, model, thr, replay_options) -> dict:
    if phases is None or (a == 0 and b == len(phases)):
        r = simulate_plan(topo, trace, plan, placement=placement, threshold_B=thr, model=model, **replay_options)
        return {"phases": [a, b], "time_s": float(r["makespan_s"]), "makespan_s": float(r["makespan_s"]),
                "lead_s": 0.0, "bytes_by_link_class": r["bytes_by_link_class"], "wall_s": r["wall_s"]}
    return simulate_segment(topo, phases, a, b, plan, placement=placement, model=model, threshold_B=thr,
                            **replay_options)
