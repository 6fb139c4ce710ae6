"""One call that scores a plan: topology + traffic + placement (+ circuits) -> simulated times and loads."""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from topoplan.core import deadline
from topoplan.core.errors import TopoplanError
from topoplan.core.placement import Placement, placement_from_doc, sequential
from topoplan.core.topology import TorusTopology, TreeTopology
from topoplan.plans.validate import validate
from topoplan.sim.network import build_network
from topoplan.sim.replay import replay
from topoplan.sim.simmodel import SimModel
from topoplan.traffic.collectives import MPICHThresholds
from topoplan.core.progress import report

__all__ = ["NETWORKS", "network_view", "simulate", "simulate_plan", "phase_spans"]

NETWORKS = ("eps", "fat-tree", "hybrid", "torus", "graph")


def network_view(topo, network: str | None):
    """The topology seen as ``network``: ``eps`` drops the OCS, ``fat-tree`` removes uplink contention.

    Parameters
    ----------
    topo : Topology
    network : str or None
        One of :data:`NETWORKS`, or None for the topology as it is. ``hybrid``
        needs an OCS, ``eps``/``fat-tree`` a tree, ``torus`` a mesh/torus.

    Returns
    -------
    Topology
        A copy when the view differs, else ``topo`` itself.

    Raises
    ------
    TopoplanError
        For an unknown network or one the topology cannot be seen as.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> t = load_topology("paper003")
    >>> eps = network_view(t, "eps")
    >>> eps.kind, eps.ocs, network_view(t, "fat-tree").kind
    ('tree', None, 'fat-tree')
    >>> network_view(t, "torus")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: field 'network': torus: needs a mesh/torus topology, got hybrid
    """
    if network is None:
        return topo
    if network not in NETWORKS:
        raise TopoplanError(f"field 'network': {network!r}: choose one of {', '.join(NETWORKS)}")
    if network in ("eps", "fat-tree", "hybrid"):
        if not isinstance(topo, TreeTopology):
            raise TopoplanError(f"field 'network': {network}: needs a tree topology, got {topo.kind}")
        if network == "eps":
            return replace(topo, kind="tree", ocs=None)
        if network == "fat-tree":
            return replace(topo, kind="fat-tree", ocs=None)
        if topo.ocs is None:
            raise TopoplanError("field 'network': hybrid: the topology has no 'ocs' section")
        return topo
    if network == "torus" and not isinstance(topo, TorusTopology):
        raise TopoplanError(f"field 'network': torus: needs a mesh/torus topology, got {topo.kind}")
    return topo


def _report_progress(done, total) -> None:
    report(done=done, total=total)
    deadline.check()   # a command's simulation stage run inside deadline.stopping() ends at its time limit


def simulate(topo, trace, placement, *, circuits=None, threshold_B=None, eager_threshold_B=65536.0,
             compute_scale=1.0, timeline_dt_s=None, progress=None, model=None, phases=None,
             thresholds=None) -> dict:
    """Replay ``trace`` and return the result dictionary of ``topoplan simulate``.

    ``model`` is a :class:`topoplan.sim.simmodel.SimModel` (or its dict; default ``SimModel()``:
    max-min sharing, pipelined relays); the result names it under ``sim_model``.

    Parameters
    ----------
    topo : Topology
        The network (see :func:`network_view` for the EPS-only and fat-tree views).
    trace : topoplan.traffic.trace.Trace or topoplan.traffic.generators.Recording
        What to replay (a communication matrix: :func:`topoplan.sim.replay.bulk_trace`; a generator's recording
        is replayed piece by piece, see :func:`topoplan.sim.replay.replay`).
    placement : Placement
        Where the ranks run.
    circuits : dict, optional
        ``circuits`` + ``forwarding`` (+ ``hop_limit``) of a circuit plan, for a hybrid topology.
    threshold_B : float, optional
        Large-message threshold of the circuits (default: the OCS bandwidth-delay product).
    eager_threshold_B : float, optional
        Messages up to this size are sent eagerly (no rendezvous).
    compute_scale : float, optional
        Factor on the trace's computation time.
    timeline_dt_s : float, optional
        Interval of the link-utilization timeline; None for none.
    progress : callable, optional
        Called as ``progress(done, total)`` during long replays; default: :func:`topoplan.core.progress.report`
        (``done``, ``total``), which reaches whoever listens (the CLI's progress line), and
        :func:`topoplan.core.deadline.check`, which stops a replay run inside
        :func:`topoplan.core.deadline.stopping` at the command's deadline (between the pieces of a generated
        trace).
    model : SimModel or dict, optional
        The network model.
    phases : topoplan.traffic.phases.Phases, optional
        Phases of ``trace`` (:func:`topoplan.traffic.phases.detect_phases` or ``split_at``) to place on the
        simulated time axis: the result gets ``phases`` (see :func:`phase_spans`), from the times ranks
        reach the phases' first calls (``replay(marks=...)``).
    thresholds : topoplan.traffic.collectives.MPICHThresholds or dict, optional
        The MPI library's collective algorithm switch-over points and alltoall throttle (default: MPICH's; a
        dict of its fields is taken too); the result records the fields that differ under ``mpich``.

    Returns
    -------
    dict
        ``sim_model``, ``makespan_s``, ``rank_finish_s``, ``comm_time_s`` (per rank, time
        not computing), ``max_comm_time_s``, ``bytes_by_link_class``, ``top_switch_bytes``
        (bytes the top switch receives on all its links, 000 Fig. 6), ``max_node_link_bytes``
        (the most any node sends or receives on its EPS link), ``n_messages``,
        ``n_flows``, ``n_events``, ``wall_s``; ``ignored_ops`` when the trace has calls
        not modelled; ``n_pieces`` when it was replayed in pieces; with ``timeline_dt_s``, ``timeline``;
        with ``phases``, ``phases``; with ``thresholds`` other than MPICH's defaults, ``mpich``.

    See Also
    --------
    simulate_plan : the same for a plan document, with the plan checks.

    References
    ----------
    The simulator model of 000 section 4 (alpha + n/beta per link, contention)
    and 003 section 4.1.4; ``topoplan.sim.simmodel`` lists the models.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.sources import load_source
    >>> from topoplan.core.placement import sequential
    >>> t = load_topology("paper003")
    >>> trace, _ = load_source("neighbor2d:rows=16,cols=16,bytes=4MB")
    >>> tree = simulate(network_view(t, "eps"), trace, sequential(256, t))
    >>> fat = simulate(network_view(t, "fat-tree"), trace, sequential(256, t))
    >>> round(tree["makespan_s"], 4), round(fat["makespan_s"], 4)  # the tree's uplinks are the bottleneck
    (0.0512, 0.032)
    >>> tree["n_messages"], tree["top_switch_bytes"]
    (960, 384000000.0)
    """
    t0 = time.perf_counter()
    if progress is None:   # to whoever listens (the CLI's progress line): nobody by default
        progress = _report_progress
    model = SimModel.coerce(model)
    thresholds = MPICHThresholds.coerce(thresholds)
    net = build_network(topo, circuits, threshold_B, model=model)
    marks = None
    if phases is not None:
        if phases.trace is not trace and (len(phases.trace), phases.trace.n_ranks) != (len(trace), trace.n_ranks):
            raise TopoplanError(f"phases: detected on another trace ({phases.trace.n_ranks} ranks, "
                                f"{len(phases.trace)} calls; this one has {trace.n_ranks} ranks, {len(trace)} calls)")
        marks = _phase_marks(phases)
    res = replay(trace, net, placement, eager_threshold_B=eager_threshold_B, compute_scale=compute_scale,
                 timeline_dt_s=timeline_dt_s, progress=progress, marks=marks, thresholds=thresholds)
    lb = np.asarray(res.link_bytes, dtype=np.float64)
    classes = net.link_class
    by_class = {str(c): float(lb[classes == c].sum()) for c in np.unique(classes)}
    node_links = np.isin(classes, ["node-up", "node-down"])
    out = {
        "sim_model": model.to_dict(),
        "makespan_s": res.makespan_s,
        "rank_finish_s": res.rank_finish_s.tolist(),
        "comm_time_s": res.comm_time_s.tolist(),
        "max_comm_time_s": float(res.comm_time_s.max(initial=0.0)),
        "bytes_by_link_class": by_class,
        "top_switch_bytes": float(lb[classes == "uplink-up"].sum()),
        "max_node_link_bytes": float(lb[node_links].max(initial=0.0)),
        "n_messages": res.n_messages,
        "n_flows": res.n_flows,
        "n_events": res.n_events,
        "wall_s": time.perf_counter() - t0,
    }
    changed = thresholds.changed() if thresholds is not None else {}
    if changed:
        out["mpich"] = changed
    if res.unknown_ops:
        out["ignored_ops"] = res.unknown_ops
    if res.n_pieces > 1:
        out["n_pieces"] = res.n_pieces
    if res.timeline is not None:
        out["timeline"] = _timeline_doc(net, res.timeline)
    if phases is not None:
        out["phases"] = phase_spans(phases, res.mark_s, res.rank_finish_s)
    return out


def _phase_marks(phases) -> np.ndarray:
    """The rows whose simulated time places the phases: every rank's first call of every phase."""
    cuts = np.asarray(phases.cuts[:-1], dtype=np.int64)
    return cuts[cuts < phases.cuts[-1][None, :]]


def phase_spans(phases, mark_s, rank_finish_s) -> list[dict]:
    """Each phase on the simulated time axis of a whole-trace replay.

    A rank is in phase ``i`` from when it reaches its first call of the phase (its previous call has
    ended) until it reaches its first call of phase ``i + 1`` (or finishes). Ranks drift apart in a
    replay, so neighbouring phases overlap: ``start_s`` is when the first rank enters, ``all_in_s``
    when the last one has entered, ``end_s`` when the last one leaves.

    Parameters
    ----------
    phases : topoplan.traffic.phases.Phases
    mark_s : numpy.ndarray
        Simulated times of the rows of ``_phase_marks(phases)``, in that order (``replay(marks=...)``).
    rank_finish_s : numpy.ndarray
        Per rank, when it finished.

    Returns
    -------
    list of dict
        Per phase: ``index``, ``kind``, ``start_s``, ``all_in_s``, ``end_s`` (simulated), the detection's
        ``logical_start_s``/``logical_end_s`` (ideal network), ``bytes``, ``n_calls``, ``pairs`` (dominant
        pairs, ``(a, b, bytes)``) and ``pair_basis`` (``node`` or ``rank``: what ``pairs`` count).

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.core.placement import sequential
    >>> from topoplan.traffic.generators import neighbor2d, alltoall
    >>> from topoplan.traffic.phases import concat, detect_phases
    >>> t = load_topology("paper003", ["kind=tree", "ocs=null"])
    >>> tr = concat([neighbor2d(4, 4, 4e6, iters=3), alltoall(16, 1e6, iters=3)])
    >>> res = simulate(t, tr, sequential(16, t), phases=detect_phases(tr))
    >>> [(p["kind"], round(p["start_s"] * 1e3, 2), round(p["end_s"] * 1e3, 2)) for p in res["phases"]]
    [(0, 0.0, 76.81), (1, 76.81, 196.4)]
    """
    cuts = np.asarray(phases.cuts, dtype=np.int64)
    finish = np.asarray(rank_finish_s, dtype=np.float64)
    enter = np.repeat(finish[None, :], len(cuts), axis=0)   # a rank without calls left: its finish
    live = np.zeros(cuts.shape, dtype=bool)
    live[:-1] = cuts[:-1] < cuts[-1][None, :]
    enter[live] = np.asarray(mark_s, dtype=np.float64)
    out = []
    for i, p in enumerate(phases.phases):
        ranks = cuts[i + 1] > cuts[i]    # ranks with calls in the phase
        if not ranks.any():
            ranks = np.ones(len(finish), dtype=bool)
        out.append({"index": p.index, "kind": p.kind, "start_s": float(enter[i, ranks].min()),
                    "all_in_s": float(enter[i, ranks].max()), "end_s": float(enter[i + 1, ranks].max()),
                    "logical_start_s": p.start_s, "logical_end_s": p.end_s, "bytes": p.bytes,
                    "n_calls": p.n_calls, "pair_basis": phases.pair_basis,
                    "pairs": [[int(a), int(b), float(x)] for a, b, x in p.pairs]})
    return out


def _timeline_doc(net, tl) -> dict:
    """Utilization per link per interval, in the schema ``topoplan report`` reads."""
    util = np.asarray(tl["util"])
    used = np.flatnonzero(util.max(axis=1) > 0) if util.size else np.zeros(0, int)
    links = [{"name": net.link_name[l], "class": str(net.link_class[l]), "src": net.link_ends[l][0],
              "dst": net.link_ends[l][1], "util": np.round(util[l], 6).tolist()} for l in used]
    return {"t_s": list(map(float, tl["t_s"])), "dt_s": float(tl["dt_s"]), "links": links}


def simulate_plan(topo, trace, plan: dict | None = None, *, placement=None, threshold_B=None, model=None,
                  check_inputs: bool = True, validated: bool = False, **replay_options) -> dict:
    """Score a plan in the simulator: the one hand-off from every planning problem to :func:`simulate`.

    Parameters
    ----------
    topo : Topology
        The topology the plan was made for.
    trace : topoplan.traffic.trace.Trace
        What to replay (a communication matrix: :func:`topoplan.sim.replay.bulk_trace`).
    plan : dict, optional
        A plan dict (``PlanResult.to_dict()`` or a plan file): ``rank_to_node`` (+ ``rank_to_slot``)
        places the ranks (placement, joint and Bcast plans); ``circuits`` + ``forwarding`` (+ ``hop_limit``,
        ``threshold_B``) sets up circuits (circuit and joint plans). None: the placement on the bare network.
    placement : Placement, optional
        For a plan without ``rank_to_node``; when the plan has one too, the two must agree
        (circuits join nodes chosen for the plan's placement). Default: sequential.
    threshold_B : float, optional
        Large-message threshold (default: the plan's ``threshold_B``, else the OCS bandwidth-delay product).
    model : SimModel or dict, optional
        Default: maxmin, pipelined relays.
    check_inputs : bool, optional
        Refuse a plan recorded as made for another topology or placement (its ``inputs``
        fingerprints); False simulates it anyway.
    validated : bool, optional
        The plan was validated against ``topo`` already, for these inputs, and has not changed since (a
        planning method's result just returned by its ``solve``, which validates it): not checked again.
        The placement's fit and agreement are still checked.
    **replay_options
        ``eager_threshold_B``, ``compute_scale``, ``timeline_dt_s``, ``progress``, ``thresholds`` of
        :func:`simulate`.

    Returns
    -------
    dict
        The result of :func:`simulate` (``makespan_s``, ``sim_model``, loads...).

    Raises
    ------
    TopoplanError
        If the plan is invalid for the topology (:func:`topoplan.plans.validate.validate`), the ranks
        do not fit, or the plan was made for another placement.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.sources import load_source
    >>> t = load_topology("paper003")
    >>> trace, _ = load_source("ring:np=8,bytes=1MB")
    >>> res = simulate_plan(t, trace, {"rank_to_node": [0, 16, 32, 48, 1, 17, 33, 49]})
    >>> res["sim_model"]["relay"], res["makespan_s"] > 0
    ('pipelined', True)
    >>> simulate_plan(t, trace, {"rank_to_node": [0] * 8})
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: plan: field 'rank_to_node': item 4: rank 4 is on slot 4 of node 0, which has 4 cores
    """
    if plan is not None and not isinstance(plan, dict):
        raise TopoplanError(f"field 'plan': expected a plan document (a dict, such as result.to_dict()) or None, "
                            f"got {type(plan).__name__}")
    if not hasattr(trace, "n_ranks") or not hasattr(trace, "source"):
        raise TopoplanError(f"field 'trace': expected a trace (the first item of load_source), got "
                            f"{type(trace).__name__}; a traffic matrix has no trace to replay")
    plan = plan or {}
    if not validated and any(plan.get(k) is not None for k in ("circuits", "forwarding", "rank_to_node")):
        # one home for plan checks: ports, neighbours, loops, cores, and the inputs it was made for
        validate(plan, topo, where="plan", placement=placement, check_inputs=check_inputs)
    capacity = int(topo.node_cores().sum())
    if trace.n_ranks > capacity:
        raise TopoplanError(f"{trace.source or 'traffic'}: {trace.n_ranks} ranks do not fit topology "
                            f"{topo.name or topo.kind} ({capacity} cores)")
    if plan.get("rank_to_node") is not None:
        planned = placement_from_doc(plan, "plan")
        if placement is not None and not np.array_equal(np.asarray(placement.rank_to_node)[:trace.n_ranks],
                                                         planned.rank_to_node[:trace.n_ranks]):
            raise TopoplanError("plan: made for another placement (its rank_to_node differs from the one given)")
        placement = planned
    if placement is None:
        placement = sequential(trace.n_ranks, topo)
    if not isinstance(placement, Placement):
        raise TopoplanError(f"placement: expected a Placement, got {type(placement).__name__}")
    if placement.n_ranks < trace.n_ranks:
        raise TopoplanError(f"placement: places {placement.n_ranks} ranks but the traffic has {trace.n_ranks}")
    circuits = None
    if plan.get("circuits") is not None:
        circuits = {k: plan[k] for k in ("circuits", "forwarding", "hop_limit") if k in plan}
        if threshold_B is None:
            threshold_B = plan.get("threshold_B")
    return simulate(topo, trace, placement, circuits=circuits, threshold_B=threshold_B, model=model,
                    **replay_options)
