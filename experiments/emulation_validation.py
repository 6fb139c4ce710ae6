"""The models against real MPI runs on the emulated cluster (``topoplan emulate``).

003's neighbour case scaled to what fits two cores: 16 nodes under 4 switches (paper003 with 4 nodes per
switch, one core each, the uplinks cut to 5 Gb/s so that the tree keeps the paper's 8:1 oversubscription),
4 or 8 OCS nodes. Parts:

``scale``
    the scale sweep that chose the default: the EPS-only and hybrid neighbour runs at scales 100-800,
    with the ranks' CPU and the machine's idle time;
``bulk``
    neighbor2d, halo-transpose and random traffic, 1 MB messages, each on EPS only, the fat tree (FT EPS),
    and the hybrid with greedy and ilp circuits (the predictions under pipelined and store-and-forward
    relays and the paper model beside each measurement); per case, the order of the four networks
    measured against predicted;
``bulk-ack``
    the bulk cells again with acknowledgements served before data in every queue (``--queues
    ack-priority``, on lossy switches: on lossless ones they reorder TCP's segments): the check of the
    mechanism behind the bulk part's errors (two-way TCP traffic in FIFO queues);
``bulk-fair``
    the bulk cells again on switches that serve each sending node's packets in turn (``--queues fair``),
    as a fabric that arbitrates fairly between its inputs does, instead of one FIFO per port: the check of
    whether the bulk part's errors come from how flows share FIFO queues;
``tcp``
    the mechanism check of the bulk part without MPI: the neighbour exchange (one iteration) on the same
    emulated networks as plain TCP flows, one connection per message, all started at once
    (``experiments/emulation_validation_tcp.py`` in every node), against the same prediction;
``heavy``
    the mechanism check of the bulk part's errors: the neighbour exchange as one bulk phase on EPS only,
    balanced (four link directions, the uplinks of switches 1 and 2, carry its most bytes) and with one
    switch pair made heavier (four more messages from switch 1 to switch 2: that pair's two link
    directions alone carry the most); if equally loaded links each lose a random share to TCP, the
    balanced exchange pays the worst of four and the heavier one only its bottleneck's;
``npb``
    the NPB CG, MG, FT, LU and IS skeletons at 16 ranks on EPS only (communication only);
``npb-32``, ``npb-64``
    the same kernels at 32 and 64 ranks (class W; LU 20 iterations) on 4 and 8 switches of 8 nodes;
``bcast``
    ten MPI_Bcasts from rank 0 on a cluster with two link speeds (the 8 OCS nodes' links at 20 Gb/s, the
    others' at 10 Gb/s, no circuits), in the default order and reordered over a ``topoplan bcast`` plan
    (speed delays) by the Bcast PMPI library.

Writes ``experiments/results/emulation_validation.{csv,md,png}``. Needs root, pyroute2 and Open MPI;
other engineers' work on the same cores is measured (machine idle) and a disturbed run is repeated.

    python -m experiments.emulation_validation [--parts scale,bulk,npb] [--scale 400] [--quick]
    python -m experiments.emulation_validation --replot      # table and figure from the existing CSV
    python -m experiments.emulation_validation --chunk-sweep tbf,tbf-lossy   # the default model, larger relay chunks
    python -m experiments.emulation_validation --combine tbf,tbf-r2,tbf-r3   # several runs judged together
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from experiments._common import RESULTS  # noqa: E402

BASE = ["nodes_per_switch=4", "cores_per_node=1", "eps.up_bw=5Gbps"]
BULK = {"neighbor": "neighbor2d:rows=4,cols=4,bytes=1MB,iters=2",
        "halo-transpose": "halo-transpose:rows=4,cols=4,bytes=1MB,iters=1",
        "random": "random:np=16,bytes=1MB,msgs=48,seed=1"}
NPB = {"cg": "npb:kernel=cg,class=W,np=16", "mg": "npb:kernel=mg,class=W,np=16", "ft": "npb:kernel=ft,class=W,np=16",
       "lu": "npb:kernel=lu,class=S,np=16", "is": "npb:kernel=is,class=W,np=16"}
# The same kernels at more ranks, 8 nodes a switch: class W (LU's class S grid is too small beyond 16 ranks), LU
# 20 of its 300 iterations (all of them at 32 ranks did not end in 600 s real, predicted 68 s)
NPB_LARGER = {"npb-32": ["nodes_per_switch=8"], "npb-64": ["switches=8", "nodes_per_switch=8"]}


def npb_specs(ranks: int) -> dict:
    """The NPB kernels of the ``npb-RANKS`` parts.

    Examples
    --------
    >>> npb_specs(32)["lu"]
    'npb:kernel=lu,class=W,np=32,iters=20'
    """
    return {k: f"npb:kernel={k},class=W,np={ranks}" + (",iters=20" if k == "lu" else "") for k in NPB}


NETWORKS = ("eps", "fat-tree", "greedy", "ilp")
BCAST_SIZES = (65536, 1 << 20)
# The ring alltoall of benchmarks/alltoall_eager.py (SMPI's ring: NPB FT's 32 KiB a pair), written out as its
# rounds, the ranks entering it together or apart in the order a binomial reduce to rank 0 releases them (its
# leaves first, its root last), by computation before their first call: the flow model predicts the stagger makes
# it several times slower with eager sends. The emulated links add no latency (no netem), so a reduce would
# stagger the ranks in the prediction and not in the run; a computation gap staggers both alike. The fan-out
# cells send 3 messages from one rank to 3 others at once: max-min shares the sender's link (every receiver
# waits as long), a sender that sends one message after the other delivers them 1, 2 and 3 message times in.
EAGER_RANKS = (16, 32)
EAGER_STAGGER_S = 20e-6   # per level of the reduce's tree
EAGER_CASES = {"ring, ranks together": 0.0, "ring, ranks entering in a reduce's order": EAGER_STAGGER_S}
FANOUT_BYTES = (32768, 262144)
EAGER_SETS = ["kind=tree", "ocs=null", "switches=1",   # one switch of as many nodes as ranks: node links only,
              "eps.down_latency=0ns", "eps.up_latency=0ns"]   # and no link latency, as emulated
BCAST_SETS = ["ocs.nodes_per_switch=2", "ocs.node_link_bw=20Gbps"]
FIELDS = ["part", "case", "traffic", "ocs_nodes", "network", "circuits", "scale", "measured_s", "predicted_s",
          "predicted_sf_s", "predicted_paper_s", "predicted_fifo_s", "ratio", "ratio_sf", "ratio_paper", "ratio_fifo",
          "span_s", "cpu_idle",
          "ranks_cpu_cores", "packets", "drops", "tcp_retransmits", "tcp_timeouts", "attempts", "disturbed_attempts",
          "calibration_one_way", "calibration_both_ways", "calibration_ring", "load_avg", "collectives",
          "bottleneck", "bottleneck_busy_predicted_s", "bottleneck_busy_measured_s", "ranks_measured_s",
          "ranks_predicted_s", "queues"]
TEXT_FIELDS = ("part", "case", "traffic", "network", "circuits", "collectives", "bottleneck", "ranks_measured_s",
               "ranks_predicted_s", "queues")
HEAVY = {"neighbor-balanced": [], "neighbor-heavy": [(4, 9), (5, 10), (6, 11), (7, 8)]}   # extra 1 MB messages
PART_QUEUES = {"bulk-ack": "ack-priority", "bulk-fair": "fair"}   # the parts that change how ports queue
TIE = 0.05   # predictions closer than this are a tie: the measured order of the two is not judged
TIMELINE_DT_S = 5e-4   # every cell's links measured in intervals of this (emulated) time: 0.2 s real at scale 400


def _topology(sets):
    from topoplan.core.topology_io import load_topology

    return load_topology("paper003", sets)


def bottleneck(res) -> tuple:
    """The link direction the prediction keeps busiest (``predicted_timeline``), its busy time predicted and its
    busy time measured (``timeline``): ``(name, predicted_s, measured_s)``, or Nones without timelines. Busy time is
    the sum of utilization x interval: the time the link's bytes take at its rate. A fat tree's uplinks are left out:
    the simulator does not share them, and the emulator gives them what their nodes can send, so their rates differ.

    Examples
    --------
    >>> tl = lambda u: {"dt_s": 0.001, "links": [{"name": "S1->top", "util": u}, {"name": "S0->top", "util": [0.5]}]}
    >>> bottleneck({"predicted_timeline": tl([1.0, 1.0]), "timeline": tl([0.5, 1.0, 0.6])})
    ('S1->top', 0.002, 0.0021)
    """
    pred, meas = res.get("predicted_timeline"), res.get("timeline")
    if not pred or not meas or not pred["links"]:
        return None, None, None
    fat = (res.get("topology_doc") or {}).get("kind") == "fat-tree"
    busy = {l["name"]: sum(l["util"]) * pred["dt_s"] for l in pred["links"]
            if not (fat and str(l.get("class", "")).startswith("uplink"))}
    if not busy:
        return None, None, None
    name = max(busy, key=busy.get)
    got = next((sum(l["util"]) * meas["dt_s"] for l in meas["links"] if l["name"] == name), 0.0)
    return name, round(busy[name], 9), round(got, 9)


# each prediction of topoplan.emulate.run.predictions: its label, and the row's fields of its time and ratio
PREDICTIONS = (("default", "predicted_s", "ratio"), ("store-and-forward", "predicted_sf_s", "ratio_sf"),
               ("paper", "predicted_paper_s", "ratio_paper"), ("fifo", "predicted_fifo_s", "ratio_fifo"))


def _joined(values) -> str:
    return "; ".join(f"{x:.6g}" for x in values)


def _predicted(p: dict, measured_s: float) -> dict:
    """A row's fields of the predictions ``p`` (:func:`topoplan.emulate.run.predictions`) of a run that measured
    ``measured_s``: each model's time and measured / predicted (None for a model not predicted), and every rank's
    time by the default model.

    Examples
    --------
    >>> f = _predicted({"default": {"max_comm_time_s": 2.0, "comm_time_s": [2.0, 1.5]}}, 3.0)
    >>> f["ratio"], f["ranks_predicted_s"], f["ratio_fifo"]
    (1.5, '2; 1.5', None)
    """
    out = {"ranks_predicted_s": _joined(p["default"].get("comm_time_s", ()))}
    for label, pred, ratio in PREDICTIONS:
        t = p[label]["max_comm_time_s"] if label in p else None
        out[pred] = t
        out[ratio] = None if t is None else measured_s / t if t > 0 else float("nan")
    return out


def queues_label(cluster) -> str:
    """How a run's link directions queued, from its result's ``cluster`` (empty when it does not say).

    Examples
    --------
    >>> queues_label({"queues": "fair", "shaper": "tbf", "lossless": True, "queue_packets": None})
    'fair (tbf), lossless'
    >>> queues_label({"queues": "fifo", "shaper": "tbf", "lossless": False, "queue_packets": 64}), queues_label(None)
    ('fifo (tbf), lossy, 64 packets', '')
    """
    if not cluster:
        return ""
    out = [cluster.get("queues", "fifo")]
    if cluster.get("shaper"):
        out[0] += f" ({cluster['shaper']})"
    if "lossless" in cluster:
        out.append("lossless" if cluster["lossless"] else "lossy")
    if cluster.get("queue_packets"):
        out.append(f"{cluster['queue_packets']:g} packets")
    return ", ".join(out)


def _row(part, case, traffic, ocs, network, circuits, res) -> dict:
    p = res["predictions"]
    cal = {c["run"]: c["ratio"] for c in res.get("calibration", [])}
    m = res["measured"]
    return {"part": part, "case": case, "traffic": traffic, "ocs_nodes": ocs, "network": network,
            "circuits": circuits, "scale": res["scale"], "measured_s": res["measured_s"],
            **_predicted(p, res["measured_s"]), "span_s": m["span_s"],
            "cpu_idle": m["cpu_idle"], "ranks_cpu_cores": m.get("ranks_cpu_cores"), "packets": m["packets"],
            "drops": m["drops"], "tcp_retransmits": (m.get("tcp") or {}).get("retransmitted_segments"),
            "tcp_timeouts": (m.get("tcp") or {}).get("timeouts"), "attempts": m["attempts"],
            "disturbed_attempts": m["disturbed_attempts"], "calibration_one_way": cal.get("one_way"),
            "calibration_both_ways": cal.get("both_ways"), "calibration_ring": cal.get("ring"),
            "load_avg": os.getloadavg()[0], "collectives": res.get("collectives"),
            # every rank's communication time, "; "-separated (the fan-out cells' receivers are its ranks 1-3)
            "ranks_measured_s": _joined(m.get("comm_time_s", ())), "queues": queues_label(res.get("cluster")),
            **dict(zip(("bottleneck", "bottleneck_busy_predicted_s", "bottleneck_busy_measured_s"), bottleneck(res)))}


def _plan(topo, trace, placement, method: str) -> dict:
    from topoplan.problems.circuits.problem import CircuitProblem, solve
    from topoplan.traffic.matrix import from_trace

    res = solve(CircuitProblem.build(topo, from_trace(trace), placement=placement.rank_to_node), method,
                time_limit=30.0 if method == "ilp" else None, seed=0)
    return {k: v for k, v in res.to_dict().items() if k in ("circuits", "forwarding", "hop_limit")}


def _bcast_trace(n: int, nbytes: int, iters: int = 10):
    from topoplan.traffic.trace import Trace

    return Trace.from_records([(r, "bcast", -1, nbytes, 0, n, 0.0, 0.0) for r in range(n)
                               for i in range(iters)], n, source=f"bcast:np={n},bytes={nbytes},iters={iters}")


def _bcast_keys(topo, placement, nbytes: int) -> list:
    """The keys of the best plan (lowest predicted time) among dft, bft and greedy, speed delays."""
    from topoplan.emulate.plan import bcast_keys
    from topoplan.problems.bcast import BcastProblem, solve

    prob = BcastProblem.build(topo, placement=list(range(topo.n_nodes)), root=0, bytes_B=nbytes, delay="speed")
    best = min((solve(prob, m, seed=0, simulate=False) for m in ("dft", "bft", "greedy")), key=lambda r: r.objective)
    return bcast_keys(best.to_dict(), placement, topo.n_nodes)


def _reduce_levels(r: int, n: int) -> int:
    """The levels of a binomial reduce to rank 0 that rank ``r`` waits through before it is done (its root waits
    through all of them).

    Examples
    --------
    >>> [_reduce_levels(r, 8) for r in range(8)]
    [3, 0, 1, 0, 2, 0, 1, 0]
    """
    return max(n - 1, 0).bit_length() if r == 0 else (r & -r).bit_length() - 1


def _ring_trace(n: int, stagger_s: float, nbytes: int = 32768, calls: int = 2):
    """``calls`` ring alltoalls of ``nbytes`` a pair on ``n`` ranks as rounds of irecv, isend and waitall (rank
    r sends to r + i and receives from r - i in round i), rank r computing ``stagger_s`` per level of a binomial
    reduce to rank 0 (:func:`_reduce_levels`) before its first call."""
    from topoplan.traffic.trace import Trace

    recs = []
    for r in range(n):
        t = stagger_s * _reduce_levels(r, n)
        for _ in range(calls):
            for i in range(1, n):
                recs += [(r, "irecv", (r - i) % n, nbytes, -1, n, t, t), (r, "isend", (r + i) % n, nbytes, -1, n, t, t),
                         (r, "waitall", -1, 0, -1, n, t, t)]
    return Trace.from_records(recs, n, source=f"ring alltoall, {n} ranks")


def _fanout_trace(nbytes: int, receivers: int = 3):
    """Rank 0 sends ``nbytes`` to each of ranks 1..``receivers`` at once (isends, then waitall); each receives."""
    from topoplan.traffic.trace import Trace

    n = receivers + 1
    recs = [(0, "isend", d, nbytes, -1, n, 0.0, 0.0) for d in range(1, n)] + [(0, "waitall", -1, 0, -1, n, 0.0, 0.0)]
    recs += [(d, "recv", 0, nbytes, -1, n, 0.0, 0.0) for d in range(1, n)]
    return Trace.from_records(recs, n, source=f"fan-out of {receivers} x {nbytes} B")


def _heavy_trace(extra):
    """The neighbour exchange of the bulk part (one iteration) as one bulk phase, plus 1 MB messages ``extra``."""
    import numpy as np

    from topoplan.sim.replay import bulk_trace
    from topoplan.traffic.matrix import from_arrays
    from topoplan.traffic.sources import load_source

    _, tr = load_source(BULK["neighbor"].replace(",iters=2", ""))
    s, d, b, _ = tr.matrix()
    keep = s != d
    src = np.concatenate([s[keep], [a for a, _ in extra]]).astype(np.int64)
    dst = np.concatenate([d[keep], [b_ for _, b_ in extra]]).astype(np.int64)
    return bulk_trace(from_arrays(tr.n_ranks, src, dst, np.concatenate([b[keep], [1e6] * len(extra)])))


def _cells(parts, scale: float, quick: bool):
    """(part, case, traffic spec, OCS nodes per switch, network, scale) in run order."""
    if "scale" in parts:
        for s in ((200, 800) if quick else (100, 200, 400, 800)):
            for net in ("eps", "greedy"):
                yield "scale", "neighbor", BULK["neighbor"], 2, net, float(s)
    for part in ("bulk", "bulk-fair"):   # the same cells; the second on fair queues
        if part not in parts:
            continue
        for ocs in ((2,) if quick else (1, 2)):
            for case, spec in BULK.items():
                if quick and case != "neighbor":
                    continue
                for net in NETWORKS:
                    yield part, case, spec, ocs, net, scale
    if "bulk-ack" in parts:
        for case, spec in BULK.items():
            for net in NETWORKS:
                yield "bulk-ack", case, spec, 2, net, scale
    if "tcp" in parts:
        for ocs in ((2,) if quick else (1, 2)):
            for net in NETWORKS:
                yield "tcp", "neighbor", BULK["neighbor"].replace("iters=2", "iters=1"), ocs, net, scale
    if "heavy" in parts:
        for _ in range(1 if quick else 3):   # alternated, so that the machine's load falls on both alike
            for case in HEAVY:
                yield "heavy", case, case, 2, "eps", scale
    if "npb" in parts:
        for case, spec in NPB.items():
            if quick and case not in ("mg", "is"):
                continue
            yield "npb", case, spec, 2, "eps", scale
    for part in NPB_LARGER:
        if part not in parts:
            continue
        for case, spec in npb_specs(int(part[4:])).items():
            if quick and case not in ("mg", "is"):
                continue
            yield part, case, spec, 2, "eps", scale
    if "eager" in parts:
        for n in EAGER_RANKS[:1] if quick else EAGER_RANKS:
            for case, stagger in EAGER_CASES.items():
                yield "eager", f"{case}, {n} ranks", (n, stagger), 0, "eps", scale
        for nbytes in FANOUT_BYTES[-1:] if quick else FANOUT_BYTES:
            yield "eager", f"fan-out, 3 x {nbytes // 1024} KiB", (1, nbytes), 0, "eps", scale
    if "bcast" in parts:
        for size in BCAST_SIZES[:1] if quick else BCAST_SIZES:
            for net in ("default", "reordered"):
                yield "bcast", f"bcast {size // 1024} KiB", size, 2, net, scale


def _inputs(part: str, case: str, spec, ocs: int, net: str):
    """One cell's inputs: ``(topology, the network it runs on, trace, placement, circuit plan or None, Bcast keys or
    None, the traffic as the table states it)``."""
    from topoplan.core.placement import sequential
    from topoplan.sim.run import network_view
    from topoplan.traffic.sources import load_source

    keys = None
    if part == "bcast":
        topo = _topology(BASE + BCAST_SETS)
        trace = _bcast_trace(16, spec)
        pl = sequential(16, topo)
        if net == "reordered":
            keys = _bcast_keys(topo, pl, spec)
        spec = f"10 x MPI_Bcast of {spec} B from rank 0"
    elif part == "eager":
        n, x = spec
        if case.startswith("fan-out"):
            trace = _fanout_trace(x)
            spec = f"rank 0 sends {x} B to each of ranks 1-3 at once"
        else:
            trace = _ring_trace(n, x)
            spec = (f"2 ring alltoalls of 32 KiB a pair, {n} ranks" +
                    (f", entering {x * 1e6:g} us apart a level of a binomial reduce to rank 0" if x else ""))
        topo = _topology(BASE + EAGER_SETS + [f"nodes_per_switch={max(trace.n_ranks, 4)}"])
        pl = sequential(trace.n_ranks, topo)
    elif part == "heavy":
        topo = _topology(BASE + [f"ocs.nodes_per_switch={ocs}"])
        trace = _heavy_trace(HEAVY[case])
        spec = f"{BULK['neighbor'].replace(',iters=2', '')} as one bulk phase" + \
            (f", plus 1 MB {' '.join(f'{a}->{b}' for a, b in HEAVY[case])}" if HEAVY[case] else "")
        pl = sequential(trace.n_ranks, topo)
    else:
        topo = _topology(BASE + [f"ocs.nodes_per_switch={ocs}"] + NPB_LARGER.get(part, []))
        trace, _ = load_source(spec, with_traffic=False)
        pl = sequential(trace.n_ranks, topo)
    plan = None
    if net in ("greedy", "ilp"):
        plan = _plan(topo, trace, pl, net)
        view = topo
    elif part == "bcast":
        view = topo   # the hybrid kept for its two link speeds; no circuits
    else:
        view = network_view(topo, net)
    return topo, view, trace, pl, plan, keys, spec


def run(parts, scale: float, quick: bool, repeats: int, log=print, queue=None, save=None,
        collectives: str = "model", lossless: bool | None = None, shaper: str | None = None) -> list:
    from topoplan.core.errors import TopoplanError
    from topoplan.emulate.run import emulate

    rows, calibrated = [], set()
    for part, case, spec, ocs, net, s in _cells(parts, scale, quick):
        topo, view, trace, pl, plan, keys, spec = _inputs(part, case, spec, ocs, net)
        first = (s, ocs, part) not in calibrated   # calibrate once per part, cluster and scale
        calibrated.add((s, ocs, part))
        log(f"{part} {case} ocs={ocs * 4} {net} scale {s:g} ...")
        try:
            if part == "tcp":
                res = tcp_flows(view, trace, pl, plan, scale=s, repeats=repeats, queue_packets=queue,
                                lossless=lossless, shaper=shaper)
            else:
                res = emulate(view, trace, pl, plan=plan, scale=s, calibrate=first, repeats=repeats,
                              compute_scale=1.0 if part == "eager" else 0.0,   # its only computation: the stagger
                              # a 32-rank run takes 70-130 s; some stall, and are run again (docs/emulation.md)
                              timeout_s=300.0 if part == "eager" else 600.0,
                              stall_s=30.0 if part == "eager" or part in NPB_LARGER else None,
                              queue_packets=queue, shaper=shaper, bcast_keys=keys,
                              lossless=False if part == "bulk-ack" else lossless,   # (emulate refuses it lossless)
                              collectives=collectives,
                              queues=PART_QUEUES.get(part, "fifo"), timeline_dt_s=TIMELINE_DT_S)
        except TopoplanError as exc:   # a cell that fails is reported, and the others still run
            log(f"  FAILED: {exc}")
            calibrated.discard((s, ocs, part))
            continue
        row = _row(part, case, spec, ocs * 4, net, (plan or {}).get("circuits"), res)
        log(f"  measured {row['measured_s'] * 1e3:.3f} ms, predicted {row['predicted_s'] * 1e3:.3f} ms "
            f"(x{row['ratio']:.3f}; store-and-forward x{row['ratio_sf']:.3f}, paper x{row['ratio_paper']:.3f}, "
            f"fifo x{_fmt3(row['ratio_fifo'])}), "
            f"machine idle {row['cpu_idle']:.0%}, ranks {row['ranks_cpu_cores'] or 0:.2f} cores, "
            f"{row['drops']:g} of {row['packets']:g} packets dropped, {row['tcp_timeouts'] or 0:g} TCP timeouts")
        rows.append(row)
        if save is not None:
            save(rows)   # every cell as it is measured: a long run that stops keeps what it measured
    return rows


REPREDICT_PARTS = ("bulk", "bulk-ack", "bulk-fair", "npb", *NPB_LARGER, "eager", "bcast")


def repredict(rows, log=print) -> list:
    """``rows`` of an earlier run with every model's prediction made again by this simulator, the measured times
    kept: the models added since the run was measured, set beside the same real runs. Rows of the parts in
    :data:`REPREDICT_PARTS` whose cell still exists; a row whose circuits the planner no longer returns is left out
    (its prediction would be of another plan), and so are the other parts' rows."""
    from topoplan.emulate.plan import reordered_bcasts
    from topoplan.emulate.run import predictions, run_eager_B, run_transport

    cells = {}
    for part in REPREDICT_PARTS:
        for c in _cells({part}, 0.0, quick=False):
            cells[(c[0], c[1], c[3] * 4, c[4])] = c
    out = []
    for r in rows:
        key = (r["part"], r["case"], int(r["ocs_nodes"]), r["network"])
        if key not in cells:
            continue
        part, case, spec, ocs, net, _ = cells[key]
        topo, view, trace, pl, plan, keys, _ = _inputs(part, case, spec, ocs, net)
        if _pairs((plan or {}).get("circuits")) != _pairs(r.get("circuits")):
            log(f"{part} {case} ocs={ocs * 4} {net}: the planner returns other circuits now; left out")
            continue
        if keys is not None:   # the Bcasts on the plan's order, as emulate predicts them
            trace = reordered_bcasts(trace, list(keys))
        p = predictions(view, trace, pl, plan, eager_threshold_B=run_eager_B(run_transport(trace)),
                        compute_scale=1.0 if part == "eager" else 0.0)
        new = dict(r, **_predicted(p, r["measured_s"]))
        log(f"{part} {case} ocs={ocs * 4} {net}: measured {r['measured_s'] * 1e3:.3f} ms, max-min x{new['ratio']:.3f}, "
            f"fifo x{_fmt3(new.get('ratio_fifo'))}")
        out.append(new)
    return out


def tcp_flows(topo, trace, placement, plan, *, scale: float, repeats: int = 1, queue_packets=None,
              lossless: bool | None = None, shaper: str | None = None) -> dict:
    """The point-to-point messages of ``trace`` as plain TCP flows on the emulated cluster (no MPI), all started at
    once; the largest per-node time (every send written, every receive read) beside the predictions, in the shape
    of :func:`topoplan.emulate.run.emulate`'s result. The fastest of ``repeats`` runs is kept."""
    import json
    import subprocess
    import tempfile
    import time

    from topoplan.emulate import cluster as cl
    from topoplan.emulate.launch import PRIORITY, cpu_idle, cpu_times, write_agent
    from topoplan.emulate.plan import plan_circuits, write_route_files
    from topoplan.emulate.run import predictions
    from topoplan.traffic.trace import OP_CODE

    preds = predictions(topo, trace, placement, plan, compute_scale=0.0)
    node = [int(v) for v in placement.rank_to_node[:trace.n_ranks]]
    sends, n_in = {}, [0] * trace.n_ranks
    for r, op, peer, nbytes in zip(trace.rank.tolist(), trace.op.tolist(), trace.peer.tolist(), trace.bytes.tolist()):
        if op in (OP_CODE["send"], OP_CODE["isend"]):
            sends.setdefault(r, []).append([cl.data_address(node[peer]), nbytes])
            n_in[peer] += 1
    spec = cl.cluster_spec(topo, circuits=plan_circuits(plan, topo) if plan else [], scale=scale,
                           queue_packets=queue_packets,
                           lossless=cl.DEFAULT_LOSSLESS if lossless is None else lossless,
                           shaper=cl.DEFAULT_SHAPER if shaper is None else shaper)
    best = None
    with tempfile.TemporaryDirectory() as work, cl.Cluster(spec) as cluster:
        if plan:
            cluster.apply_routes(write_route_files(plan, topo, Path(work) / "routes"))
        agent = write_agent(spec, work)
        for _ in range(max(1, repeats)):
            start = time.time() + 2.0 + 0.1 * trace.n_ranks   # every listener up and every connection open by then
            q0, c0 = cluster.queue_stats(), cpu_times()
            procs = [subprocess.Popen([str(agent), "--exec", spec.hosts[node[r]], sys.executable,
                                       str(Path(__file__).with_name("emulation_validation_tcp.py")),
                                       json.dumps({"me": cl.data_address(node[r]), "start": start, "n_in": n_in[r],
                                                   "sends": sends.get(r, [])})],
                                      stdout=subprocess.PIPE, text=True,
                                      preexec_fn=lambda: os.setpriority(os.PRIO_PROCESS, 0, PRIORITY))
                     for r in range(trace.n_ranks)]
            try:
                outs = [p.communicate(timeout=600)[0] for p in procs]
            finally:
                for p in procs:
                    if p.poll() is None:
                        p.kill()
                        p.wait()
            if any(p.returncode for p in procs):
                from topoplan.core.errors import TopoplanError

                raise TopoplanError("a TCP flow program failed")
            q1, c1 = cluster.queue_stats(), cpu_times()
            measured = max(json.loads(o)["end_s"] for o in outs) / scale
            if best is None or measured < best["max_comm_time_s"]:
                best = {"max_comm_time_s": measured, "span_s": measured, "cpu_idle": cpu_idle(c0, c1),
                        "ranks_cpu_cores": None, "packets": q1["sent"] - q0["sent"], "drops": q1["dropped"] - q0["dropped"],
                        "attempts": repeats, "disturbed_attempts": 0}
    for p in preds.values():
        p["ratio"] = best["max_comm_time_s"] / p["max_comm_time_s"]
    return {"scale": spec.scale, "measured": best, "measured_s": best["max_comm_time_s"],
            "predicted_s": preds["default"]["max_comm_time_s"], "ratio": preds["default"]["ratio"], "predictions": preds}


# -- the table and the figure ----------------------------------------------------------------------

def read_csv(path) -> list:
    rows = []
    with open(path, newline="") as fh:
        for r in csv.DictReader(fh):
            for k in FIELDS:
                v = r.get(k, "")
                if k in TEXT_FIELDS:
                    continue
                r[k] = float(v) if v not in ("", "None") else None
            rows.append(r)
    return rows


RELAY_CHUNKS_B = (65536, 262144, 524288, 1048576)
"""The relay chunks :func:`chunk_sweep` tries: the default model's (64 KiB) and larger ones."""


def chunk_sweep(rows, chunks_B=RELAY_CHUNKS_B, log=print) -> list:
    """Measure nothing: the bulk rows of a run (``bulk`` and ``bulk-fair``, each part on its own) predicted again
    by the default model with relays that forward each chunk of ``chunks_B`` bytes once it has arrived whole
    (``relay_chunk_B``), the measured times kept. Per part and chunk size: the cells, the median and largest
    absolute error over all of them and over the hybrid ones, and the cases whose measured order of networks
    agrees (:func:`order_check`). Rows whose circuits the planner no longer returns are left out, as
    :func:`repredict` leaves them."""
    from topoplan.emulate.run import run_eager_B, run_transport
    from topoplan.sim.run import simulate_plan
    from topoplan.sim.simmodel import SimModel

    inputs, out = {}, []
    for part in ("bulk", "bulk-fair"):
        bulk = [r for r in rows if r["part"] == part]
        for chunk in chunks_B if bulk else ():
            got = []
            for r in bulk:
                key = (part, r["case"], int(r["ocs_nodes"]), r["network"])
                if key not in inputs:
                    inputs[key] = _inputs(part, r["case"], BULK[r["case"]], int(r["ocs_nodes"]) // 4, r["network"])
                topo, view, trace, pl, plan, _, _ = inputs[key]
                if r["network"] in ("greedy", "ilp") and \
                        _pairs((plan or {}).get("circuits")) != _pairs(r.get("circuits")):
                    continue
                # the default model only (emulate.run.predictions would run the three others as well)
                res = simulate_plan(view, trace, plan, placement=pl, model=SimModel(relay_chunk_B=chunk),
                                    eager_threshold_B=run_eager_B(run_transport(trace)), compute_scale=0.0,
                                    check_inputs=False)
                got.append(dict(r, predicted_s=res["max_comm_time_s"]))
            out.append(dict(chunk_summary(chunk, got, part), part=part))
            log(f"{part}, relay chunk {chunk} B: median error {_pct(out[-1]['median_error'])}, hybrid "
                f"{_pct(out[-1]['hybrid_median_error'])}, order {out[-1]['orders_agree']} of {out[-1]['cases']}")
    return out


def combine_runs(runs: dict, part: str = "bulk") -> dict:
    """Several runs of the same cells judged together: ``runs`` maps a run's tag to its rows. Per cell (case, OCS
    nodes, network), the runs that measured it and their median, least and largest measured / predicted; per
    case, in how many runs the measured order agrees (:func:`order_check`) and whether the order of the cells'
    median measured times does; and the median absolute error of the cells' median ratios.

    Examples
    --------
    >>> def run(greedy_ms):
    ...     return [{"part": "bulk", "case": "c", "ocs_nodes": 8, "network": n, "measured_s": m / 1e3,
    ...              "predicted_s": p / 1e3} for n, m, p in (("eps", 4.0, 4.0), ("fat-tree", 1.0, 1.0),
    ...                                                      ("greedy", greedy_ms, 0.9), ("ilp", 2.0, 2.0))]
    >>> got = combine_runs({"a": run(1.1), "b": run(0.95), "c": run(0.97)})
    >>> got["cases"][0]["agrees_runs"], got["cases"][0]["runs"], got["cases"][0]["median_agrees"]
    (2, 3, True)
    >>> [round(c["ratio_median"], 3) for c in got["cells"] if c["network"] == "greedy"]
    [1.078]
    """
    cells, cases = {}, {}
    for tag, rows in runs.items():
        sel = [r for r in rows if r["part"] == part]
        for r in sel:
            c = cells.setdefault((r["case"], int(r["ocs_nodes"]), r["network"]),
                                 {"case": r["case"], "ocs_nodes": int(r["ocs_nodes"]), "network": r["network"],
                                  "measured_s": [], "ratio": [], "predicted_s": r["predicted_s"]})
            c["measured_s"].append(r["measured_s"])
            c["ratio"].append(r["measured_s"] / r["predicted_s"])
        for o in order_check(sel, part):
            k = cases.setdefault((o["case"], int(o["ocs_nodes"])), {"case": o["case"], "ocs_nodes": int(o["ocs_nodes"]),
                                                                    "runs": 0, "agrees_runs": 0, "failed_in": []})
            k["runs"] += 1
            k["agrees_runs"] += bool(o["agrees"])
            if not o["agrees"]:
                k["failed_in"].append(tag)
    out_cells = []
    for c in cells.values():
        out_cells.append({"case": c["case"], "ocs_nodes": c["ocs_nodes"], "network": c["network"],
                          "runs": len(c["ratio"]), "measured_s": statistics.median(c["measured_s"]),
                          "predicted_s": c["predicted_s"], "ratio_median": statistics.median(c["ratio"]),
                          "ratio_min": min(c["ratio"]), "ratio_max": max(c["ratio"])})
    medians = [{"part": part, "case": c["case"], "ocs_nodes": c["ocs_nodes"], "network": c["network"],
                "measured_s": c["measured_s"], "predicted_s": c["predicted_s"]} for c in out_cells]
    by_median = {(o["case"], int(o["ocs_nodes"])): o for o in order_check(medians, part)}
    out_cases = [dict(k, median_agrees=bool(by_median[key]["agrees"]), median_order=by_median[key]["measured"],
                      predicted_order=by_median[key]["predicted"]) for key, k in sorted(cases.items(), key=str)]
    err = [abs(c["ratio_median"] - 1) for c in out_cells]
    return {"runs": list(runs), "cells": out_cells, "cases": out_cases,
            "median_error": statistics.median(err) if err else None}


def combined_markdown(got: dict) -> str:
    """The table of :func:`combine_runs`.

    Examples
    --------
    >>> row = [{"part": "bulk", "case": "c", "ocs_nodes": 8, "network": "eps", "measured_s": 1.1, "predicted_s": 1.0}]
    >>> "| c | 8 | eps | 2 | 1.100 | 1.100-1.100 |" in combined_markdown(combine_runs({"a": row, "b": row}))
    True
    """
    lines = ["# Emulation validation: several runs of the bulk cells judged together", "",
             f"Runs: {', '.join(t or '(untagged)' for t in got['runs'])} "
             "(`python -m experiments.emulation_validation --combine TAGS`). Measured / predicted by the default "
             "model; a cell's median over the runs that measured it.", "",
             "| case | OCS nodes | network | runs | median | range |", "|---|---:|---|---:|---:|---|"]
    for c in sorted(got["cells"], key=lambda c: (c["ocs_nodes"], c["case"], NETWORKS.index(c["network"])
                                                  if c["network"] in NETWORKS else 9)):
        lines.append(f"| {c['case']} | {c['ocs_nodes']} | {c['network']} | {c['runs']} | {c['ratio_median']:.3f} | "
                     f"{c['ratio_min']:.3f}-{c['ratio_max']:.3f} |")
    lines += ["", f"Median absolute error of the cells' medians: {_pct(got['median_error'])}.", "",
              "| case | OCS nodes | order as predicted | order of the medians | measured (medians) | predicted | "
              "failed in |", "|---|---:|---:|---|---|---|---|"]
    for k in got["cases"]:
        lines.append(f"| {k['case']} | {k['ocs_nodes']} | in {k['agrees_runs']} of {k['runs']} runs | "
                     f"{'agrees' if k['median_agrees'] else 'does not agree'} | {' < '.join(k['median_order'])} | "
                     f"{' < '.join(k['predicted_order'])} | {', '.join(k['failed_in'])} |")
    return "\n".join(lines) + "\n\n" + f"Predictions within {TIE:.0%} of each other are ties whose measured order is " \
        "not judged.\n"


def _pct(x) -> str:
    return "-" if x is None else f"{x:.1%}"


def _pairs(circuits) -> list:
    """A plan's or a row's circuits as sorted node pairs (a row holds them as text)."""
    import ast

    if circuits in (None, "", "None"):
        return []
    got = ast.literal_eval(circuits) if isinstance(circuits, str) else circuits
    return sorted(sorted(int(v) for v in c) for c in got)


def chunk_summary(chunk_B: float, rows, part: str = "bulk") -> dict:
    """One line of :func:`chunk_sweep`: ``rows`` of ``part`` (measured and predicted) summarized.

    Examples
    --------
    >>> rows = [{"part": "bulk", "case": "c", "ocs_nodes": 8, "network": n, "measured_s": m, "predicted_s": p}
    ...         for n, m, p in (("eps", 4.4, 4.0), ("fat-tree", 1.0, 1.0), ("greedy", 1.2, 0.9), ("ilp", 2.0, 2.0))]
    >>> s = chunk_summary(65536, rows)
    >>> s["cells"], round(s["median_error"], 3), round(s["hybrid_median_error"], 3), s["orders_agree"], s["cases"]
    (4, 0.05, 0.167, 0, 1)
    """
    err = sorted(abs(r["measured_s"] / r["predicted_s"] - 1) for r in rows)
    hyb = sorted(abs(r["measured_s"] / r["predicted_s"] - 1) for r in rows if r["network"] in ("greedy", "ilp"))
    checks = order_check(rows, part)
    return {"relay_chunk_B": chunk_B, "cells": len(err), "median_error": statistics.median(err) if err else None,
            "largest_error": err[-1] if err else None,
            "hybrid_median_error": statistics.median(hyb) if hyb else None,
            "hybrid_largest_error": hyb[-1] if hyb else None,
            "orders_agree": sum(c["agrees"] for c in checks), "cases": len(checks),
            "broken": [f"{c['case']} on {c['ocs_nodes']:g} OCS nodes: {', '.join(c['broken'])}"
                       for c in checks if not c["agrees"]]}


def chunk_markdown(runs: dict) -> str:
    """The table of :func:`chunk_sweep` over several runs: ``{tag: [summary, ...]}``.

    Examples
    --------
    >>> s = {"relay_chunk_B": 65536, "cells": 24, "median_error": 0.069, "largest_error": 0.38,
    ...      "hybrid_median_error": 0.069, "hybrid_largest_error": 0.38, "orders_agree": 5, "cases": 6, "broken": ["x"]}
    >>> chunk_markdown({"tbf": [s]}).splitlines()[-1]
    '| tbf | 64 KiB | 24 | 6.9% | 38.0% | 6.9% | 38.0% | 5 of 6 | x |'
    """
    lines = ["# The default model with larger relay chunks, against the same measurements", "",
             "Each run's bulk cells predicted again by max-min with pipelined relays that forward a chunk once it "
             "has arrived whole (`relay_chunk_B`; the default is 64 KiB); the measured times are the run's "
             "(`python -m experiments.emulation_validation --chunk-sweep TAG,...`).", "",
             "| run | relay chunk | cells | median error | largest | hybrid: median | hybrid: largest | order "
             "agrees | where not |", "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for tag, summaries in runs.items():
        for s in summaries:
            run = (tag or "(untagged)") + ("" if s.get("part", "bulk") == "bulk" else f" ({s['part']})")
            lines.append(f"| {run} | {s['relay_chunk_B'] / 1024:g} KiB | {s['cells']} | "
                         f"{_pct(s['median_error'])} | {_pct(s['largest_error'])} | {_pct(s['hybrid_median_error'])} | "
                         f"{_pct(s['hybrid_largest_error'])} | {s['orders_agree']} of {s['cases']} | "
                         f"{'; '.join(s['broken'])} |")
    return "\n".join(lines) + "\n"


def write_csv(rows, path) -> None:
    from topoplan.core.io import atomic_write

    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=FIELDS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if r.get(k) is None else r[k]) for k in FIELDS})
    atomic_write(path, buf.getvalue())


def order_check(rows, part: str = "bulk") -> list:
    """Per bulk case: the networks by measured and by predicted time, and whether every pair the
    prediction separates by more than :data:`TIE` is measured in the same order.

    Examples
    --------
    >>> rows = [{"part": "bulk", "case": "c", "ocs_nodes": 8, "network": n, "measured_s": m, "predicted_s": p}
    ...         for n, m, p in (("eps", 4.0, 4.0), ("fat-tree", 1.1, 1.0), ("greedy", 1.3, 1.02), ("ilp", 2.0, 2.0))]
    >>> order_check(rows)[0]["agrees"]
    True
    """
    out = []
    cases = sorted({(r["case"], r["ocs_nodes"]) for r in rows if r["part"] == part}, key=str)
    for case, ocs in cases:
        cell = [r for r in rows if r["part"] == part and r["case"] == case and r["ocs_nodes"] == ocs]
        agrees, broken = True, []
        for a in cell:
            for b in cell:
                if a["predicted_s"] < b["predicted_s"] * (1 - TIE) and not a["measured_s"] < b["measured_s"]:
                    agrees = False
                    broken.append(f"{a['network']} < {b['network']}")
        out.append({"case": case, "ocs_nodes": ocs, "agrees": agrees, "broken": broken,
                    "measured": [r["network"] for r in sorted(cell, key=lambda r: r["measured_s"])],
                    "predicted": [r["network"] for r in sorted(cell, key=lambda r: r["predicted_s"])]})
    return out


def busy_lines(sel) -> list:
    """Per network, how the predicted busiest link fared: its measured busy time over the predicted (its bytes at
    its rate, so 1 plus what was sent again), and its busy share of the measured run (1: never idle)."""
    out = []
    for label, nets in (("EPS only", ("eps",)), ("fat tree", ("fat-tree",)), ("hybrid", ("greedy", "ilp"))):
        got = [r for r in sel if r["network"] in nets and r.get("bottleneck_busy_predicted_s")]
        if not got:
            continue
        carried = sorted(r["bottleneck_busy_measured_s"] / r["bottleneck_busy_predicted_s"] for r in got)
        use = sorted(r["bottleneck_busy_measured_s"] / r["measured_s"] for r in got)
        out.append(f"- {label}: the predicted busiest link was busy {statistics.median(carried):.2f} "
                   f"({carried[0]:.2f}-{carried[-1]:.2f}) times its predicted busy time, and "
                   f"{statistics.median(use):.0%} ({use[0]:.0%}-{use[-1]:.0%}) of the measured run "
                   f"({len(got)} cells)")
    return out + ([""] if out else [])


MODEL_KEYS = (("max-min", "ratio"), ("paper", "ratio_paper"), ("fifo", "ratio_fifo"))


def model_lines(sel) -> list:
    """Per network (EPS only, fat tree, hybrid: greedy and ilp), each model's median absolute error.

    Examples
    --------
    >>> rows = [{"network": "eps", "ratio": 1.3, "ratio_paper": 1.1, "ratio_fifo": 0.95},
    ...         {"network": "greedy", "ratio": 1.2, "ratio_paper": 0.9, "ratio_fifo": None}]
    >>> model_lines(rows)[:2]
    ['| network | cells | max-min | paper | fifo |', '|---|---:|---:|---:|---:|']
    >>> model_lines(rows)[2]
    '| EPS only | 1 | 30.0% | 10.0% | 5.0% |'
    """
    out = ["| network | cells | " + " | ".join(m for m, _ in MODEL_KEYS) + " |", "|---|---:|" + "---:|" * len(MODEL_KEYS)]
    for label, nets in (("EPS only", ("eps",)), ("fat tree", ("fat-tree",)), ("hybrid", ("greedy", "ilp"))):
        got = [r for r in sel if r["network"] in nets]
        if not got:
            continue
        cells = []
        for _, key in MODEL_KEYS:
            errs = [abs(r[key] - 1) for r in got if r.get(key) is not None]
            cells.append(f"{statistics.median(errs):.1%}" if errs else "")
        out.append(f"| {label} | {len(got)} | " + " | ".join(cells) + " |")
    return out + ["", "(median absolute error of each model, per network)", ""]


def _fmt3(x) -> str:
    """A ratio with 3 decimals, or nothing for a row measured before its model existed."""
    return "" if x is None else f"{x:.3f}"


def markdown(rows) -> str:
    lines = ["# Emulation validation: measured (real Open MPI on the emulated cluster) against predicted", ""]
    scales = sorted({r["scale"] for r in rows if r["part"] != "scale"})
    lines.append("Times are communication times (the largest of the ranks'), scaled back to the real network; "
                 f"scale {', '.join(f'{s:g}' for s in scales)} (bandwidths divided by it). ratio = measured / "
                 "predicted; sf = max-min with store-and-forward relays, paper = the papers' model, fifo = first come, "
                 "first served flows (messages up to 64 KiB in turn, larger ones max-min; empty for a trace of more "
                 "than a million messages). CPU: the "
                 "machine's idle time during the run (other engineers share its 2 cores) and the cores the ranks "
                 "used.")
    queues = sorted({r.get("queues") or "" for r in rows if r["part"] != "scale"} - {""})
    if queues:
        lines.append("")
        lossless = "" if not any("lossless" in q for q in queues) else (
            " (lossless: no queue drops a packet, and TCP's minimum retransmission timeout is scaled with the "
            "bandwidth, as `topoplan emulate` does unless `--lossy`)")
        lines.append("Link queues: " + "; ".join(queues) + lossless + ".")
    lines.append("")
    for part, title in (("scale", "Scale sweep (neighbour exchange, 16 nodes, 8 OCS nodes)"),
                        ("bulk", "Bulk cases"),
                        ("bulk-ack", "Bulk cases with acknowledgements first in every queue (the mechanism check)"),
                        ("bulk-fair", "Bulk cases on switches that serve each sending node in turn (the mechanism "
                                      "check)"),
                        ("tcp", "Neighbour exchange (one iteration) as plain TCP flows, no MPI (the mechanism check)"),
                        ("heavy", "Neighbour exchange as one bulk phase, EPS only: balanced, and with one switch pair "
                                  "heavier (the mechanism check)"),
                        ("npb", "NPB skeletons (EPS only, communication only)"),
                        ("npb-32", "NPB skeletons at 32 ranks, 4 switches of 8 nodes (EPS only, communication only)"),
                        ("npb-64", "NPB skeletons at 64 ranks, 8 switches of 8 nodes (EPS only, communication only)"),
                        ("eager", "Eager messages that meet: a ring alltoall of 32 KiB a pair, the ranks entering "
                                  "together or in a reduce's order, and one rank's three messages at once (one "
                                  "switch, every message eager, no link latency)"),
                        ("bcast", "Bcast, default order and reordered (two link speeds)")):
        sel = [r for r in rows if r["part"] == part]
        if not sel:
            continue
        modes = sorted({r.get("collectives") for r in sel if r.get("collectives")})
        if (part in ("npb", "bcast") or part in NPB_LARGER) and modes:
            title += "; collectives: " + ", ".join(
                {"model": "the predicted messages (MPICH's algorithms)",
                 "library": "Open MPI's own choice"}.get(m, m) for m in modes)
        lines += [f"## {title}", "", "| case | OCS nodes | network | scale | measured | predicted | ratio | ratio sf | "
                  "ratio paper | ratio fifo | machine idle | load average | ranks' cores | runs |",
                  "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for r in sel:
            lines.append(f"| {r['case']} | {r['ocs_nodes']:g} | {r['network']} | {r['scale']:g} | "
                         f"{r['measured_s'] * 1e3:.2f} ms | {r['predicted_s'] * 1e3:.2f} ms | {r['ratio']:.3f} | "
                         f"{r['ratio_sf']:.3f} | {r['ratio_paper']:.3f} | {_fmt3(r.get('ratio_fifo'))} | "
                         f"{r['cpu_idle']:.0%} | "
                         f"{'' if r.get('load_avg') is None else format(r['load_avg'], '.1f')} | "
                         f"{(r['ranks_cpu_cores'] or 0):.2f} | {r['attempts']:g} |")
        lines.append("")
        if part == "bcast":
            for size in sorted({r["case"] for r in sel}):
                d = {r["network"]: r for r in sel if r["case"] == size}
                if {"default", "reordered"} <= set(d):
                    lines.append(f"- {size}: reordered / default measured {d['reordered']['measured_s'] / d['default']['measured_s']:.3f}, "
                                 f"predicted {d['reordered']['predicted_s'] / d['default']['predicted_s']:.3f}")
            lines.append("")
        if part == "eager":
            for r in sel:
                if r["case"].startswith("fan-out") and r.get("ranks_measured_s"):
                    got = [float(x) * 1e3 for x in r["ranks_measured_s"].split(";")[1:]]
                    want = [float(x) * 1e3 for x in r["ranks_predicted_s"].split(";")[1:]]
                    lines.append(f"- {r['case']}: the receivers' times measured "
                                 f"{', '.join(f'{x:.3f}' for x in got)} ms, predicted "
                                 f"{', '.join(f'{x:.3f}' for x in want)} ms")
            lines.append("")
        if part == "npb" or part in NPB_LARGER:
            for label, key in (("default", "ratio"), ("first come, first served flows", "ratio_fifo")):
                got = [r for r in sel if r.get(key) is not None]
                if got:
                    err = statistics.median(abs(r[key] - 1) for r in got)
                    lines.append(f"- {label}: median absolute error {err:.1%} over {len(got)} kernels")
            lines.append("")
        if part == "heavy":
            for case in HEAVY:
                got = sorted(r["ratio"] for r in sel if r["case"] == case)
                if got:
                    lines.append(f"- {case}: ratio median {statistics.median(got):.3f}, least {got[0]:.3f}, "
                                 f"largest {got[-1]:.3f} over {len(got)} runs")
            lines.append("")
        if part in ("bulk", "bulk-ack", "bulk-fair", "tcp"):
            for label, key in (("default (pipelined relays)", "ratio"), ("store-and-forward relays", "ratio_sf"),
                               ("paper model", "ratio_paper"), ("first come, first served flows", "ratio_fifo")):
                errs = [abs(r[key] - 1) for r in sel if r.get(key) is not None]
                if not errs:   # rows measured before the model existed
                    continue
                slower = sum(r[key] > 1 for r in sel if r.get(key) is not None)
                lines.append(f"- {label}: median absolute error {statistics.median(errs):.1%}, largest "
                             f"{max(errs):.1%} over {len(errs)} cells; {slower} measured slower than predicted "
                             f"(median ratio {statistics.median(r[key] for r in sel if r.get(key) is not None):.3f})")
            lines.append("")
            lines += model_lines(sel)
            lines += busy_lines(sel)
            lines += ["| case | OCS nodes | measured order | predicted order | agrees |", "|---|---:|---|---|---|"]
            for o in order_check(rows, part):
                lines.append(f"| {o['case']} | {o['ocs_nodes']:g} | {' < '.join(o['measured'])} | "
                             f"{' < '.join(o['predicted'])} | {'yes' if o['agrees'] else 'no: ' + ', '.join(o['broken'])} |")
            lines.append(f"\nPredictions within {TIE:.0%} of each other are ties whose measured order is not judged.\n")
    cal = [r for r in rows if r.get("calibration_one_way") is not None]
    if cal:
        lines += ["## Calibration (measured / ideal, node links under one switch, 2 MB per rank)", "",
                  "| scale | OCS nodes | one way | both ways | ring |", "|---:|---:|---:|---:|---:|"]
        for r in cal:
            ring = f"{r['calibration_ring']:.3f}" if r.get("calibration_ring") is not None else ""
            lines.append(f"| {r['scale']:g} | {r['ocs_nodes']:g} | {r['calibration_one_way']:.3f} | "
                         f"{r['calibration_both_ways']:.3f} | {ring} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def plot(rows, path) -> bool:
    """The measured-against-predicted figure of the bulk and NPB rows; False (nothing written) without them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sel = [r for r in rows if r["part"] in ("bulk", "npb", *NPB_LARGER)]   # the default (FIFO) network
    if not sel:
        return False
    fig, ax = plt.subplots(figsize=(7, 5))
    marks = {"eps": "o", "fat-tree": "s", "greedy": "^", "ilp": "v"}
    for net, mk in marks.items():
        pts = [r for r in sel if r["network"] == net and r["part"] == "bulk"]
        if pts:
            ax.scatter([r["predicted_s"] * 1e3 for r in pts], [r["measured_s"] * 1e3 for r in pts], marker=mk, label=net)
    for part, mk, label, suffix in (("npb", "x", "NPB (EPS)", ""), ("npb-32", "+", "NPB, 32 ranks (EPS)", " 32"),
                                    ("npb-64", "1", "NPB, 64 ranks (EPS)", " 64")):
        npb = [r for r in sel if r["part"] == part]
        if not npb:
            continue
        ax.scatter([r["predicted_s"] * 1e3 for r in npb], [r["measured_s"] * 1e3 for r in npb], marker=mk,
                   color="k", label=label)
        for r in npb:
            ax.annotate(r["case"].upper() + suffix, (r["predicted_s"] * 1e3, r["measured_s"] * 1e3), fontsize=8,
                        xytext=(5, 3), textcoords="offset points")
    lo = min(min(r["predicted_s"], r["measured_s"]) for r in sel) * 1e3 * 0.8
    hi = max(max(r["predicted_s"], r["measured_s"]) for r in sel) * 1e3 * 1.2
    ax.plot([lo, hi], [lo, hi], "k--", lw=0.8, label="measured = predicted")
    ax.plot([lo, hi], [lo * 1.1, hi * 1.1], ":", color="grey", lw=0.8, label="±10%")
    ax.plot([lo, hi], [lo * 0.9, hi * 0.9], ":", color="grey", lw=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    from matplotlib.ticker import LogLocator, NullFormatter, StrMethodFormatter

    for axis in (ax.xaxis, ax.yaxis):   # plain numbers at 1-2-5 steps, no 10^x labels that run into each other
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axis.set_major_formatter(StrMethodFormatter("{x:g}"))
        axis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("predicted communication time, default model (ms)")
    ax.set_ylabel("measured on the emulated cluster, scaled back (ms)")
    scales = sorted({r["scale"] for r in sel})
    ax.set_title(f"Real Open MPI runs against the default model (scale {', '.join(f'{x:g}' for x in scales)})")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", default="scale,bulk,npb,bcast", help="comma-separated: scale, bulk, bulk-ack, "
                    "bulk-fair, tcp, heavy, npb, npb-32, npb-64, eager, bcast")
    ap.add_argument("--scale", type=float, default=None, help="scale of the bulk and NPB parts (default: the "
                    "emulator's)")
    ap.add_argument("--quick", action="store_true", help="a few cells only")
    ap.add_argument("--repeats", type=int, default=3, help="runs at most per cell (a disturbed run is repeated)")
    ap.add_argument("--queue", type=int, default=None, help="FIFO length of every link direction, packets "
                    "(default: the emulator's)")
    ap.add_argument("--lossless", action=argparse.BooleanOptionalAction, default=None,
                    help="--no-lossless: switch ports that drop what their buffer cannot hold (topoplan emulate "
                         "--lossy); default: the emulator's (lossless)")
    ap.add_argument("--shaper", choices=("tbf", "htb"), default=None, help="what paces the FIFO queues (topoplan "
                    "emulate --shaper; default: the emulator's)")
    ap.add_argument("--collectives", default="model", choices=("model", "library"),
                    help="model: collectives sent as the messages the predictions run; library: Open MPI's own")
    ap.add_argument("--replot", action="store_true", help="only the table and figure from the existing CSV")
    ap.add_argument("-o", "--out", default=str(RESULTS), help="output directory")
    ap.add_argument("--tag", default="", help="write emulation_validation_TAG.* (a run kept beside the others)")
    ap.add_argument("--repredict", metavar="TAG", default=None,
                    help="measure nothing: the rows of emulation_validation_TAG.csv ('' for the untagged run) with "
                         "every model's prediction made again, written under --tag")
    ap.add_argument("--chunk-sweep", metavar="TAGS", default=None,
                    help="measure nothing: the bulk rows of each run emulation_validation_TAG.csv (comma-separated "
                         "tags) predicted by the default model with relay chunks of 64 KiB to 1 MiB; writes "
                         "emulation_validation_chunks.md (or _TAG-chunks.md under --tag)")
    ap.add_argument("--combine", metavar="TAGS", default=None,
                    help="measure nothing: the bulk rows of several runs (comma-separated tags) judged together, "
                         "per cell the median and range, per case the runs whose order agrees; writes "
                         "emulation_validation_combined.md (or _TAG-combined.md under --tag)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    for flag, value, suffix in (("--combine", args.combine, "combined"), ("--chunk-sweep", args.chunk_sweep, "chunks")):
        if value is None:
            continue
        from topoplan.core.io import atomic_write

        runs = {}
        for tag in value.split(","):   # every run is read before anything is written
            src = out / (f"emulation_validation_{tag}.csv" if tag else "emulation_validation.csv")
            if not src.is_file():
                print(f"error: {flag}: no file {src}", file=sys.stderr)
                return 2
            runs[tag] = read_csv(src)
        if flag == "--combine":
            text = combined_markdown(combine_runs(runs))
        else:
            sweeps = {}
            for tag, rows in runs.items():
                print(f"== {tag or '(untagged)'}")
                sweeps[tag] = chunk_sweep(rows)
            text = chunk_markdown(sweeps)
        name = f"emulation_validation_{args.tag}-{suffix}.md" if args.tag else f"emulation_validation_{suffix}.md"
        dest = out / name
        atomic_write(dest, text)
        print(f"wrote {dest}")
        return 0
    stem = f"emulation_validation_{args.tag}" if args.tag else "emulation_validation"
    csv_path, md_path, png_path = (out / f"{stem}.{ext}" for ext in ("csv", "md", "png"))
    if args.repredict is not None:
        src = out / (f"emulation_validation_{args.repredict}.csv" if args.repredict else "emulation_validation.csv")
        if src == csv_path:
            print("error: --repredict writes under another --tag than the run it reads", file=sys.stderr)
            return 2
        write_csv(repredict(read_csv(src)), csv_path)
        rows = read_csv(csv_path)
    elif args.replot:
        rows = read_csv(csv_path)
    else:
        import shutil

        from topoplan.core.errors import TopoplanError
        from topoplan.emulate.cluster import check_privileges, require_pyroute2
        from topoplan.emulate.run import DEFAULT_SCALE

        try:   # never overwrite the committed results with a run that cannot measure anything
            require_pyroute2()
            check_privileges()
            if not (shutil.which("mpicc") and shutil.which("mpirun")):
                raise TopoplanError("needs Open MPI's mpicc and mpirun")
        except TopoplanError as exc:
            print(f"emulation_validation skipped: {exc}")
            return 0
        out.mkdir(parents=True, exist_ok=True)   # before measuring: every cell is saved as it is measured
        parts = {p.strip() for p in args.parts.split(",") if p.strip()}
        kept = [r for r in read_csv(csv_path) if r["part"] not in parts] if csv_path.is_file() else []

        def save(new):   # the other parts' rows stay (a part is re-run on its own)
            write_csv(kept + new, csv_path)

        rows = run(parts, args.scale or DEFAULT_SCALE, args.quick, args.repeats, queue=args.queue, save=save,
                   collectives=args.collectives, lossless=args.lossless, shaper=args.shaper)
        save(rows)
        rows = read_csv(csv_path)
    from topoplan.core.io import atomic_write

    atomic_write(md_path, markdown(rows))
    plotted = plot(rows, png_path)
    print(f"wrote {csv_path}, {md_path}" + (f", {png_path}" if plotted else " (no bulk or NPB rows: no figure)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
