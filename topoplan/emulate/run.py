"""One emulation: build the cluster, calibrate it, run the traffic under real MPI, and set it beside the models.

:func:`emulate` is what ``topoplan emulate`` runs. The traffic is a trace (generated, NPB skeleton or
recorded) replayed by the C replayer, or the user's own program. Every rank runs under the PMPI
recorder; a rank's communication time is the time it spent inside MPI calls (the union of its
calls' intervals), divided by the scale. The simulator predicts the same trace on the same
topology, placement and circuit plan under the default model, with store-and-forward relays, and
under the papers' model; the result holds them side by side with their ratios. While a run lasts a
:class:`~topoplan.emulate.monitor.Monitor` counts TCP's loss recovery on the nodes and, with a timeline,
the bytes every link direction sends: the measured utilization beside the default model's.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from topoplan.core.errors import TopoplanError
from topoplan.core.topology_io import topology_to_dict
from topoplan.emulate import cluster as cl
from topoplan.emulate.calibrate import CALIBRATION_BYTES, calibration_nodes, calibration_traces, summarize
from topoplan.emulate.launch import COLLECTIVES, StalledRun, mpirun_command, run_mpi, transport_for, write_agent
from topoplan.emulate.monitor import (MIN_PERIOD_S, Monitor, read_window, replay_running, timeline_doc, utilization,
                                      window_counts)
from topoplan.emulate.plan import plan_circuits, reordered_bcasts, write_route_files
from topoplan.emulate.replayer import as_point_to_point, build, write_replay
from topoplan.sim.replay import fifo_fits
from topoplan.sim.run import simulate_plan
from topoplan.sim.simmodel import SimModel
from topoplan.traffic.collectives import MPICHThresholds
from topoplan.traffic.trace import Trace, read_trace

__all__ = ["DEFAULT_SCALE", "DISTURBED_IDLE", "OMPI_TCP_EAGER_B", "idle_max_us", "comm_times", "check_timeline",
           "predictions", "run_eager_B", "run_transport", "emulate"]

# Bandwidths are divided by this (latencies multiplied): a 10 Gb/s link becomes 25 Mb/s. Chosen by
# measurement (docs/emulation.md): at 400 the 16-node runs of the validation leave most of the 2 cores idle.
DEFAULT_SCALE = 400.0
# A run during which the machine was idle less than this was competing for the CPU: it is repeated.
DISTURBED_IDLE = 0.15
# Open MPI's TCP transport sends messages up to this size eagerly unless btl_tcp_eager_limit says otherwise.
OMPI_TCP_EAGER_B = 65536.0
# A waiting rank's longest sleep between polls (the idle library), in real microseconds at DEFAULT_SCALE. It grows
# with the scale so that the delay it adds to a wait stays the same in the network's time (2.5 us), and a larger
# scale frees the cores it was chosen to free (docs/emulation.md: 64 ranks at scale 1600).
IDLE_MAX_US_AT_DEFAULT = 1000.0


def idle_max_us(scale: float) -> int:
    """The idle library's longest sleep (``TOPOPLAN_IDLE_MAX_US``) at ``scale``: 1 ms at the default scale of 400,
    proportional to the scale, never below the library's first sleep of 20 us.

    Examples
    --------
    >>> idle_max_us(400), idle_max_us(1600), idle_max_us(1)
    (1000, 4000, 20)
    """
    return max(20, round(IDLE_MAX_US_AT_DEFAULT * float(scale) / DEFAULT_SCALE))


def comm_times(trace) -> tuple:
    """Per rank, the time inside MPI calls (union of its calls' intervals), and the span of the run.

    Parameters
    ----------
    trace : topoplan.traffic.trace.Trace
        The recorder's trace of a run.

    Returns
    -------
    (numpy.ndarray, float)
        Seconds per rank, and the last end minus the first start over all ranks.

    Examples
    --------
    >>> from topoplan.traffic.trace import Trace
    >>> t = Trace.from_records([(0, "irecv", 1, 8, -1, 2, 0.0, 0.1), (0, "wait", 1, 8, -1, 2, 0.5, 1.0),
    ...                         (0, "wait", 1, 8, -1, 2, 0.5, 1.0), (1, "send", 0, 8, -1, 2, 0.0, 0.2)], 2)
    >>> comm, span = comm_times(t)
    >>> comm.tolist(), span
    ([0.6, 0.2], 1.0)
    """
    out = np.zeros(trace.n_ranks)
    for r in range(trace.n_ranks):
        sel = np.flatnonzero(trace.rank == r)
        if not sel.size:
            continue
        order = np.lexsort((trace.t_end[sel], trace.t_start[sel]))
        total, cur_s, cur_e = 0.0, None, None
        for a, b in zip(trace.t_start[sel][order].tolist(), trace.t_end[sel][order].tolist()):
            if cur_e is None or a > cur_e:
                if cur_e is not None:
                    total += cur_e - cur_s
                cur_s, cur_e = a, b
            else:
                cur_e = max(cur_e, b)
        total += cur_e - cur_s
        out[r] = total
    span = float(trace.t_end.max() - trace.t_start.min()) if len(trace) else 0.0
    return out, span


def check_timeline(timeline_dt_s, scale, *, program: bool = False) -> None:
    """Refuse a timeline interval the emulator cannot measure: not positive, finer than the links' sampling
    (:data:`~topoplan.emulate.monitor.MIN_PERIOD_S` of real time) at ``scale``, or for a user's ``program``
    (only the replayer marks its window on the network's clock). None passes.

    Examples
    --------
    >>> check_timeline(1e-3, 400.0)
    >>> check_timeline(1e-6, 400.0)
    Traceback (most recent call last):
      ...
    topoplan.core.errors.TopoplanError: field 'timeline_dt': at scale 400 at least 50 us (the links are sampled ...), got 1 us
    """
    if timeline_dt_s is None:
        return
    if program:
        raise TopoplanError("field 'timeline_dt': measured for a replay only (the replayer marks its window on the "
                            "network's clock), not for a program")
    if not 0 < timeline_dt_s < float("inf"):
        raise TopoplanError(f"field 'timeline_dt': must be a positive time, got {timeline_dt_s}")
    s = cl.check_scale(scale)
    if timeline_dt_s * s < MIN_PERIOD_S:
        raise TopoplanError(f"field 'timeline_dt': at scale {s:g} at least {MIN_PERIOD_S / s * 1e6:g} us (the links "
                            f"are sampled at most every {MIN_PERIOD_S * 1e3:g} ms of real time), got "
                            f"{timeline_dt_s * 1e6:g} us")


def predictions(topo, trace, placement, plan=None, *, model=None, threshold_B=None, eager_threshold_B=65536.0,
                compute_scale=1.0, timeline_dt_s=None, thresholds=None) -> dict:
    """The simulator's predictions of the run: the given (default) model, store-and-forward relays, the paper model
    and first come, first served flows (:mod:`topoplan.sim.fifo`). ``thresholds``: the MPI library's collectives
    (:func:`topoplan.sim.run.simulate`), for every model.

    Returns
    -------
    dict
        ``{label: {"sim_model", "max_comm_time_s", "makespan_s", "comm_time_s"}}`` with labels
        ``default`` (``model``), ``store-and-forward``, ``paper`` and ``fifo`` (not for a trace of more than
        :data:`topoplan.sim.fifo.MAX_MESSAGES` messages); with ``timeline_dt_s`` the default's also
        has its ``timeline`` (the simulator's, at that interval).

    Examples
    --------
    >>> from topoplan.core.topology import TreeTopology
    >>> from topoplan.core.placement import sequential
    >>> from topoplan.traffic.generators import ring
    >>> t = TreeTopology(kind="tree", nodes_per_switch=(2, 2))
    >>> p = predictions(t, ring(4, 1e6), sequential(4, t))
    >>> sorted(p), round(p["default"]["max_comm_time_s"] * 1e3, 3)
    (['default', 'fifo', 'paper', 'store-and-forward'], 0.809)
    """
    base = SimModel.coerce(model)
    models = {"default": base,
              "store-and-forward": SimModel(relay="store-and-forward", relay_chunk_B=base.relay_chunk_B),
              "paper": SimModel(engine="paper", relay="store-and-forward"),
              "fifo": SimModel(engine="fifo", relay=base.relay, relay_chunk_B=base.relay_chunk_B)}
    if isinstance(trace, Trace) and not fifo_fits(trace):
        del models["fifo"]   # the reference replay: a trace this large would take many minutes
    out = {}
    for label, m in models.items():
        dt = timeline_dt_s if label == "default" else None
        res = simulate_plan(topo, trace, plan, placement=placement, model=m, threshold_B=threshold_B,
                            eager_threshold_B=eager_threshold_B, compute_scale=compute_scale, check_inputs=False,
                            timeline_dt_s=dt, thresholds=thresholds)
        out[label] = {"sim_model": res["sim_model"], "max_comm_time_s": res["max_comm_time_s"],
                      "makespan_s": res["makespan_s"], "comm_time_s": res["comm_time_s"]}
        if dt is not None:
            out[label]["timeline"] = res["timeline"]
    return out


class _Run:
    """The pieces of one emulation that share a cluster: binaries, the agent, a scratch directory."""

    def __init__(self, cluster, spec, bins, work: Path, timeout_s, transport):
        self.cluster, self.spec, self.bins, self.work = cluster, spec, bins, work
        self.timeout_s, self.transport = timeout_s, transport
        self.timeline_dt_s = None   # real seconds: sample the links and measure their utilization (replays)
        self.stall_s = None         # real seconds: stop a replay that sends nothing for this long (run_mpi)

        self.agent = write_agent(spec, work)
        self.preload, self.env = [], {}   # more libraries (the Bcast library) and their variables

    def mpi(self, command, hosts_of_ranks, *, record: bool = True, window=None) -> dict:
        """Run ``command`` with rank i on host ``hosts_of_ranks[i]``; the recorder's trace if ``record``; TCP's
        loss recovery (``tcp``) during the replay whose window the file ``window`` holds (else during the whole
        ``mpirun``: ``tcp_window``), and with :attr:`timeline_dt_s` the links' measured utilization in it."""
        d = Path(tempfile.mkdtemp(prefix="run", dir=self.work))
        machinefile = d / "hosts"
        machinefile.write_text("".join(f"{h}\n" for h in hosts_of_ranks))
        preload = [self.bins["idle"], *self.preload] + ([self.bins["recorder"]] if record else [])
        env = {"TOPOPLAN_TRACE_DIR": d / "trace", "TOPOPLAN_TRACE_QUIET": "1",
               "TOPOPLAN_IDLE_MAX_US": idle_max_us(self.spec.scale), **self.env}
        env.update({k: v for k, v in os.environ.items() if k.startswith("TOPOPLAN_IDLE_")})
        cmd = mpirun_command(command, agent=self.agent, machinefile=machinefile, np=len(hosts_of_ranks),
                             preload=preload, env=env, transport=self.transport)
        q0 = self.cluster.queue_stats()
        links = self.timeline_dt_s if window is not None else None
        with Monitor(self.spec, period_s=links, window=window) as mon:   # (check_timeline: links >= MIN_PERIOD_S)
            watch = None
            if window is not None and self.stall_s is not None:   # bytes sent, judged inside the replay's window
                watch = lambda: mon.sent_B if replay_running(window) else None  # noqa: E731
            # Open MPI's session directories in the work directory, removed with it: a stopped run leaves its own
            res = run_mpi(cmd, timeout_s=self.timeout_s, watch=watch, stall_s=self.stall_s, session_dir=self.work)
        q1 = self.cluster.queue_stats()
        span = read_window(window) if window is not None else None
        res["tcp_window"] = "replay" if span else "mpirun"
        tt = mon.tcp_t_s
        res["tcp"] = window_counts(tt, mon.tcp, *(span or (tt[0], tt[-1])))
        if links is not None and span:
            t, util = utilization(mon.t_s, mon.link_bytes, [d[6] for d in mon.directions], *span, links)
            res["timeline"] = timeline_doc(mon.directions, t, util, links, scale=self.spec.scale)
        res["packets"] = q1["sent"] - q0["sent"]
        res["drops"] = q1["dropped"] - q0["dropped"]
        res["link_bytes"] = q1["bytes"] - q0["bytes"]
        if record:
            events = d / "trace" / "events.csv"
            if not events.is_file():
                raise TopoplanError(f"{command[0]}: no trace written (the program did not reach MPI_Finalize, or is "
                                    "not linked with this MPI)")
            res["trace"] = read_trace(events)
        return res

    def replay(self, trace, hosts_of_ranks, *, compute_scale=1.0) -> dict:
        d = Path(tempfile.mkdtemp(prefix="input", dir=self.work))
        write_replay(trace, d, compute_scale=compute_scale, time_scale=self.spec.scale)
        res = self.mpi([self.bins["replay"], d], hosts_of_ranks, window=d / "window.txt")
        cpu = 0.0
        for r in range(trace.n_ranks):
            try:
                cpu += float((d / f"cpu-{r}.txt").read_text())
            except (OSError, ValueError):
                pass
        res["ranks_cpu_cores"] = cpu / res["wall_s"] if res["wall_s"] > 0 else 0.0
        return res


def _measure(run: _Run, start, scale: float, repeats: int, note) -> dict:
    """Run ``start()`` until an undisturbed run (machine idle at least DISTURBED_IDLE) or ``repeats`` runs; keep the
    fastest undisturbed one (of all, when every run was disturbed). A run that stalls (:class:`StalledRun`) is
    run again, counted as an attempt; when every attempt stalls, the last stall is the error."""
    attempts, stalled = [], 0
    runs = max(1, int(repeats))
    for k in range(runs):
        try:
            res = start()
        except StalledRun as exc:
            stalled += 1
            if k + 1 == runs:
                if attempts:
                    break
                raise
            if note is not None:
                note(f"{exc}: again")
            continue
        comm, span = comm_times(res["trace"])
        attempts.append({"comm_time_s": (comm / scale).tolist(), "max_comm_time_s": float(comm.max(initial=0)) / scale,
                         "span_s": span / scale, "wall_s": res["wall_s"], "cpu_idle": res["cpu_idle"],
                         "ranks_cpu_cores": res.get("ranks_cpu_cores"),
                         "packets": res["packets"], "drops": res["drops"],
                         "tcp": res["tcp"], "tcp_window": res["tcp_window"], "timeline": res.get("timeline"),
                         "disturbed": res["cpu_idle"] < DISTURBED_IDLE})
        if not attempts[-1]["disturbed"]:
            break
        if note is not None and k + 1 < runs:
            note(f"run disturbed (machine {res['cpu_idle']:.0%} idle): again")
    quiet = [a for a in attempts if not a["disturbed"]] or attempts
    best = min(quiet, key=lambda a: a["max_comm_time_s"])
    return dict(best, attempts=len(attempts) + stalled, disturbed_attempts=sum(a["disturbed"] for a in attempts),
                stalled_attempts=stalled)


def run_eager_B(transport: dict) -> float:
    """The largest message a run with Open MPI's TCP ``transport`` settings sends eagerly: its
    ``btl_tcp_eager_limit`` (Open MPI's default, 64 KiB, when it sets none). The emulator's own transport
    (:func:`topoplan.emulate.launch.transport_for`) raises it to the run's largest message, so that every message
    is eager; the predictions take the same size.

    Examples
    --------
    >>> from topoplan.emulate.launch import transport_for
    >>> run_eager_B(transport_for(20e6)), run_eager_B({})
    (20971520.0, 65536.0)
    """
    return float(transport.get("btl_tcp_eager_limit", OMPI_TCP_EAGER_B))


def run_transport(trace) -> dict:
    """The Open MPI transport an emulation of ``trace`` runs with (:func:`topoplan.emulate.launch.transport_for`
    of its largest message, at least the calibration's): every message eager, in one fragment.

    Examples
    --------
    >>> from topoplan.traffic.generators import ring
    >>> run_eager_B(run_transport(ring(4, 20e6))) >= 20e6
    True
    """
    return transport_for(max(float(trace.bytes.max(initial=0.0)), CALIBRATION_BYTES))


def emulate(topo, trace, placement, *, plan=None, scale: float = DEFAULT_SCALE, model=None, threshold_B=None,
            eager_threshold_B: float | None = None, compute_scale: float = 1.0, command=None, calibrate: bool = True,
            repeats: int = 3, timeout_s: float | None = 600.0, mpicc: str | None = None, transport=None,
            queue_packets: int | None = None, queues: str = "fifo", congestion: str | None = None, bcast_keys=None,
            collectives: str = "model", timeline_dt_s: float | None = None, note=None, thresholds=None,
            stall_s: float | None = None, lossless: bool | None = None, shaper: str | None = None) -> dict:
    """Emulate the run of ``trace`` (or ``command``) on ``topo`` and set it beside the simulator's predictions.

    Parameters
    ----------
    topo : TreeTopology
        The network as run (``network_view`` applied: EPS only, fat tree or hybrid).
    trace : topoplan.traffic.trace.Trace
        The traffic; replayed by the replayer, or (with ``command``) the prediction of the user's program.
    placement : Placement
        Rank i runs on node ``placement.rank_to_node[i]`` (the ``mpich`` export's machine file).
    plan : dict, optional
        A validated circuit plan (circuits, forwarding) for a hybrid topology.
    scale : float, optional
        Bandwidths divided by it, times multiplied by it (and measured times divided by it).
    model : SimModel or dict, optional
        The default prediction's model.
    threshold_B, compute_scale
        As :func:`topoplan.sim.run.simulate`.
    eager_threshold_B : float, optional
        The predictions' eager size; default the run's (:func:`run_eager_B` of ``transport``: the run sends every
        message eagerly, and so do the predictions).
    command : list of str, optional
        Run this MPI program instead of replaying ``trace``.
    calibrate : bool, optional
        Run the calibration (one way, both ways, ring) first.
    repeats : int, optional
        Runs at most, repeating a run during which the machine was busy (idle below
        :data:`DISTURBED_IDLE`). The fastest undisturbed run is kept (the fastest of all when every run was
        disturbed): what disturbs a run (others' work on the cores) only adds time.
    timeout_s : float, optional
        Per ``mpirun``.
    mpicc : str, optional
    transport : dict, optional
        Open MPI transport settings; default :func:`topoplan.emulate.launch.transport_for` the largest message.
    queue_packets : int, optional
        FIFO length of every link direction, in packets (default: switch ports hold their share of a switch's
        buffer, hosts Linux's transmit queue; :meth:`topoplan.emulate.cluster.ClusterSpec.queue_of`).
    queues : {"fifo", "ack-priority", "fair"}, optional
        How link directions queue (:func:`topoplan.emulate.cluster.cluster_spec`).
    lossless : bool, optional
        No queue drops a packet, and TCP's minimum retransmission timeout scales with the bandwidth: a lossless
        fabric (default :data:`topoplan.emulate.cluster.DEFAULT_LOSSLESS`, True;
        :func:`topoplan.emulate.cluster.cluster_spec`). False: switch ports hold a switch's buffer.
    shaper : {"tbf", "htb"}, optional
        What paces the links' FIFO queues (default :data:`topoplan.emulate.cluster.DEFAULT_SHAPER`;
        :func:`topoplan.emulate.cluster.cluster_spec`).
    congestion : str, optional
        TCP's congestion control on the emulated network (default
        :data:`topoplan.emulate.cluster.DEFAULT_CONGESTION`, CUBIC).
    bcast_keys : list of int, optional
        Reorder every ``MPI_Bcast`` on MPI_COMM_WORLD with the Bcast library (the key of every rank,
        :func:`topoplan.emulate.plan.bcast_keys`); the predictions are of the reordered Bcasts
        (:func:`topoplan.emulate.plan.reordered_bcasts`).
    collectives : {"model", "library"}, optional
        ``model``: the replayer sends every collective as the point-to-point messages the prediction runs for it
        (:func:`topoplan.emulate.replayer.as_point_to_point`; with ``bcast_keys`` the reordered Bcasts, without
        the library); ``library``: the replayer calls MPI's collectives and Open MPI chooses their algorithms, as
        for an unchanged program (a user's ``command`` always runs so).
    timeline_dt_s : float, optional
        Measure every link direction's utilization in intervals of this much emulated time (replays only: the
        replayer marks its window), sampled from the queues' counters every ``timeline_dt_s * scale`` real
        seconds (at least :data:`~topoplan.emulate.monitor.MIN_PERIOD_S`), beside the default model's timeline
        at the same interval.
    stall_s : float, optional
        Replays only: stop a run whose replay sends nothing on the emulated network for this many real seconds,
        and run it again (it counts as one of the ``repeats``; the result's ``measured`` says how many stalled).
        Launches of 32 ranks under one switch stall now and then (``docs/emulation.md``); a replay with
        computation gaps longer than this, at the scale, must not set it.
    note : callable, optional
        Called with progress messages.
    thresholds : MPICHThresholds, optional
        The MPI library's collective switch-over points and alltoall throttle (default MPICH's): the
        predictions' collectives, and with ``collectives="model"`` the replayed messages; the result records
        the fields that differ from MPICH's defaults under ``mpich``.

    Returns
    -------
    dict
        ``measured_s`` (the largest communication time of a rank, scaled back), ``predicted_s`` (the default
        model's), ``predictions`` (every model's, with ``ratio`` = measured / predicted), ``measured``
        (per-rank times, span, the machine's CPU idle, the cores the ranks used (replays), packets and
        drops of the queues, TCP's loss recovery on the nodes during the replay (``tcp``: segments sent again,
        retransmission timeouts, connection requests sent again, fast retransmits, loss probes), attempts),
        ``calibration``, ``scale``, ``cluster`` (nodes, links, queues, TCP's congestion control, set-up time),
        ``transport``, ``collectives`` (``model`` or ``library``), ``mpich`` (see ``thresholds``); with
        ``timeline_dt_s``, ``timeline`` (measured) and ``predicted_timeline`` in the schema of the simulator's
        (``topoplan report`` draws either), ``topology_doc`` and ``circuit_pairs``.

    Raises
    ------
    TopoplanError
        Without pyroute2, root or Open MPI; for a plan or keys that do not fit; when a run fails.

    Examples
    --------
    Needs root, pyroute2 and Open MPI:

    >>> from topoplan.core.topology import TreeTopology
    >>> from topoplan.core.placement import sequential
    >>> from topoplan.traffic.generators import ring
    >>> t = TreeTopology(kind="tree", nodes_per_switch=(2, 2))
    >>> res = emulate(t, ring(4, 1e6), sequential(4, t), calibrate=False)     # doctest: +SKIP
    >>> round(res["ratio"], 2), res["scale"]                                   # doctest: +SKIP
    (1.02, 400.0)
    """
    say = note or (lambda msg: None)
    thresholds = MPICHThresholds.coerce(thresholds)
    if collectives not in COLLECTIVES:
        raise TopoplanError(f"field 'collectives': choose one of {', '.join(COLLECTIVES)}, got {collectives!r}")
    check_timeline(timeline_dt_s, scale, program=bool(command))
    if stall_s is not None and not float(stall_s) > 0:
        raise TopoplanError(f"field 'stall_s': a time above 0, got {stall_s!r}")
    cl.require_pyroute2()
    cl.check_privileges()
    n = trace.n_ranks
    nodes = np.asarray(placement.rank_to_node[:n], dtype=np.int64)
    say("predicting (simulator)")
    predicted_trace = trace
    if bcast_keys is not None:
        predicted_trace = reordered_bcasts(trace, list(bcast_keys))
    if transport is None:
        transport = run_transport(trace)
    if eager_threshold_B is None:
        eager_threshold_B = run_eager_B(transport)
    preds = predictions(topo, predicted_trace, placement, plan, model=model, threshold_B=threshold_B,
                        eager_threshold_B=eager_threshold_B, compute_scale=compute_scale, timeline_dt_s=timeline_dt_s,
                        thresholds=thresholds)
    bins = build(mpicc)
    circuits = plan_circuits(plan, topo) if plan is not None and plan.get("circuits") else []
    spec = cl.cluster_spec(topo, circuits=circuits, scale=scale,
                           queue_packets=queue_packets,
                           lossless=cl.DEFAULT_LOSSLESS if lossless is None else lossless,
                           shaper=cl.DEFAULT_SHAPER if shaper is None else shaper,
                           queues=queues, congestion=cl.DEFAULT_CONGESTION if congestion is None else congestion)
    hosts = spec.hosts
    work = Path(tempfile.mkdtemp(prefix="topoplan-emulate-"))
    # the replay: with collectives="model" the simulator's own messages for every collective (and the Bcasts of
    # bcast_keys already on the plan's order, so no library is needed); a user's program keeps its MPI's choice
    as_messages = collectives == "model" and not command
    replayed = as_point_to_point(predicted_trace, thresholds) if as_messages else trace
    out: dict = {"scale": spec.scale, "collectives": collectives if not command else "library",
                 "eager_threshold_B": eager_threshold_B}
    changed = thresholds.changed() if thresholds is not None else {}
    if changed:
        out["mpich"] = changed
    try:
        say(f"building the cluster: {topo.n_nodes} nodes, {topo.n_switches} switches, {len(circuits)} circuits")
        with cl.Cluster(spec) as cluster:
            n_routes = 0
            if plan is not None and plan.get("circuits"):
                n_routes = cluster.apply_routes(write_route_files(plan, topo, work / "routes"))
            out["cluster"] = {"nodes": topo.n_nodes, "switches": topo.n_switches, "circuits": len(circuits),
                              "routes": n_routes, "links": sum(1 for l in spec.links if l.cls != "mgmt"),
                              "mtu_B": spec.mtu, "queue_packets": spec.queue_packets,
                              "switch_buffer_s": cl.SWITCH_BUFFER_S, "host_queue_packets": cl.HOST_QUEUE_PACKETS,
                              "queues": spec.queues, "shaper": spec.shaper, "lossless": spec.lossless,
                              "rto_min_s": spec.rto_min_s,
                              "congestion": spec.congestion,
                              "setup_s": cluster.setup_s}
            run = _Run(cluster, spec, bins, work, timeout_s, transport)
            if calibrate:
                cal_nodes = calibration_nodes(topo)
                bw = float(topo.node_link_bw()[cal_nodes[0]])
                rows = []
                for name, tr in calibration_traces(len(cal_nodes)).items():
                    say(f"calibrating: {name.replace('_', ' ')}")
                    m = _measure(run, lambda tr=tr: run.replay(tr, [hosts[v] for v in cal_nodes[:tr.n_ranks]]),
                                 spec.scale, repeats, say)
                    rows.append(dict(summarize(name, m["max_comm_time_s"], float(tr.bytes.max()), bw),
                                     cpu_idle=m["cpu_idle"], attempts=m["attempts"]))
                out["calibration"] = rows
            say(f"running {'the program' if command else 'the replay'}: {n} ranks")
            if timeline_dt_s is not None:
                run.timeline_dt_s = timeline_dt_s * spec.scale
            run.stall_s = None if command else stall_s
            if bcast_keys is not None and not as_messages:   # after the calibration, which is not reordered
                run.preload = [bins["bcast"]]
                run.env = {"TOPOPLAN_BCAST_KEYS": ",".join(str(int(k)) for k in bcast_keys)}
            if command:
                start = lambda: run.mpi(list(command), [hosts[v] for v in nodes.tolist()])   # noqa: E731
            else:
                start = lambda: run.replay(replayed, [hosts[v] for v in nodes.tolist()],   # noqa: E731
                                           compute_scale=compute_scale)
            out["measured"] = _measure(run, start, spec.scale, repeats, say)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    measured = out["measured"]["max_comm_time_s"]
    for label, p in preds.items():
        p["ratio"] = measured / p["max_comm_time_s"] if p["max_comm_time_s"] > 0 else float("nan")
    out["transport"] = transport
    if bcast_keys is not None:
        out["bcast_keys"] = [int(k) for k in bcast_keys]
    out.update({"measured_s": measured, "predicted_s": preds["default"]["max_comm_time_s"],
                "ratio": preds["default"]["ratio"], "predictions": preds})
    timeline = out["measured"].pop("timeline", None)
    if timeline_dt_s is not None:
        out["timeline"] = timeline
        out["predicted_timeline"] = preds["default"].pop("timeline")
        out["topology_doc"] = topology_to_dict(topo)
        out["circuit_pairs"] = [[int(c[0]), int(c[1])] for c in circuits]
    return out
