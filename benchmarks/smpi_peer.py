"""SMPI 3.32 as the peer of topoplan's trace replays: a trace turned into SMPI's time-independent trace files and
replayed by ``smpirun ... smpireplaymain`` on the same network.

Run in the project's venv (the conversion reads the trace with topoplan; SMPI runs as a process of its own)::

    python benchmarks/smpi_peer.py npb:kernel=cg,class=C,np=128,iters=5 [--dir DIR] [--bw 10Gbps] [--latency 1us]
                                   [--json] [--keep]

What is converted (``write_ti_traces``), one file per rank, ``<rank> <action> ...`` per line (SMPI's
time-independent format; sizes in bytes with the default ``MPI_BYTE``):

* ``init`` first and ``finalize`` last;
* the computation gap in front of a call (the trace's ``t_start`` minus the rank's previous ``t_end``, the
  first call's from the trace's first ``t_start``; the gaps topoplan's replay uses) as ``compute FLOPS`` at
  the platform's host speed (1 Gflop/s: FLOPS = seconds x 10^9);
* ``send``/``isend``/``recv``/``irecv`` with the partner, the tag (0 where the trace has none) and the size;
  ``wait`` with the request's source, destination and tag (the rank's oldest open request with that peer, of the
  kind the row's ``req`` names, as the trace format defines it); a ``wait`` without a peer and ``waitall`` as
  ``waitall``;
* ``bcast``, ``reduce``, ``allreduce`` (a reduction's buffer as doubles where its size divides by 8, as
  topoplan's MPICH model counts elements; no reduction flops), ``alltoall``, ``alltoallv`` (per-destination
  rows gathered into one call; the receive counts taken from the senders' calls), ``allgather``, ``gather``,
  ``scatter``, ``barrier``.

SMPI's replay knows MPI_COMM_WORLD only and posts a receive from a named source: a trace with collectives on
other communicators, any-source receives, ``sendrecv`` rows or ops not listed above is refused with the row.

The network (``write_platform``): one switch with N hosts, a split-duplex private link per host of the given
bandwidth and latency (SimGrid's ``<cluster>`` without a backbone: a route is the source's link up and the
destination's link down, each direction its own resource), the loopback as topoplan's intra-node link, host
speed 1 Gflop/s; rank r on host r (topoplan's sequential placement). ``topology_doc`` gives topoplan the same
network: a one-switch ``tree``, switch delay 0 and an MTU of 1 byte (topoplan charges a switch the store and
forward of ``min(bytes, MTU)``; SMPI's link latency carries that 1 byte's serialization, half on each link, so the
route latencies are equal for every message of at least one byte).

SMPI's configuration that matches topoplan's max-min model (``SMPI_CONFIG``): the CM02 network model with
latency and bandwidth factors 1, weight-S 0 (every route here has the same latency, so flows share max-min
fairly), cross-traffic off and TCP-gamma 0 (no window bound); MPICH's collective selector (topoplan expands
collectives with MPICH's algorithms; SMPI's selector aborts a replay in bcast, reduce and allreduce, so those
are set to the algorithm MPICH picks for the trace's calls, ``smpi_algorithms``); sends below 64 KiB eager
(``smpi/async-small-thresh`` and ``smpi/send-is-detached-thresh`` 65536: sent at once, before the receive is
posted, and the sender does not wait), larger ones rendezvous (topoplan's ``--eager 64KiB``).

Where SMPI's MPICH selector is not MPICH, the simulated times differ: SMPI's ``alltoallv`` posts its
isend/irecv 4 at a time where MPICH (and topoplan) posts 32 (NPB IS; topoplan with ``alltoall_throttle=4``
agrees with SMPI within 1% at 128 ranks); an alltoall of exactly 32 KiB per pair is MPICH's batched isend/irecv
(``<=`` its medium size) and SMPI's ring (``<``) (NPB FT at 256 ranks); its barrier is a Bruck barrier where
MPICH's is a dissemination. CG and FT at 128 ranks (point-to-point messages; long alltoalls, whose pairwise
exchange and ring cost the same on one switch) agree within 10^-3.

The process is timed with ``processes.run_process`` (wall, CPU, peak of ``smpirun`` and its simulator child, by
GNU ``time``); the conversion is timed apart (a user of SMPI would have the trace files already). SMPI's
simulated time is its ``Simulation time`` line.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from collections import deque
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
for _p in (ROOT, ROOT / "benchmarks"):  # run as a script from anywhere
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from processes import run_process  # noqa: E402
from simgrid_peer import CONFIG as MAXMIN_CONFIG  # noqa: E402

__all__ = ["SMPIRUN", "SMPI_CONFIG", "HOST_SPEED_FLOPS", "smpi_available", "topology_doc", "write_ti_traces",
           "write_platform", "smpi_algorithms", "smpi_command", "run_smpi", "prepare"]

SMPIRUN = "smpirun"
HOST_SPEED_FLOPS = 1e9
EAGER_B = 65536
# SimGrid's network configured as pure max-min (the flow peer's, simgrid_peer.CONFIG), and SMPI's own choices
SMPI_CONFIG = [
    *MAXMIN_CONFIG,
    "--cfg=smpi/coll-selector:mpich",   # bcast, reduce, allreduce: set per trace (smpi_algorithms)
    f"--cfg=smpi/async-small-thresh:{EAGER_B}",
    f"--cfg=smpi/send-is-detached-thresh:{EAGER_B}",
]
QUIET = ["--log=root.thresh:warning", "--log=smpi_replay.thresh:info"]   # keeps the "Simulation time" line

_P2P = ("send", "isend", "recv", "irecv")
# a reduction's buffer as elements of this size and SMPI datatype id (smpi_datatype.cpp: 0 double, 1 int,
# 3 short, 6 byte), the largest dividing its bytes, as topoplan's MPICH model counts them
_ELEMENTS = ((8, 0), (4, 1), (2, 3), (1, 6))


class ConversionError(ValueError):
    """The trace holds something SMPI's time-independent replay cannot express."""


def smpi_available() -> tuple[bool, str]:
    """Whether ``smpirun`` and its replay program are installed: (True, path) or (False, why)."""
    exe = shutil.which(SMPIRUN)
    if exe is None:
        return False, "smpirun is not installed (Debian: apt-get install libsimgrid-dev)"
    replay = Path("/usr/lib/x86_64-linux-gnu/simgrid/smpireplaymain")
    if not replay.exists():
        return False, f"{replay} is missing (libsimgrid-dev)"
    return True, exe


def topology_doc(n_hosts: int, bw: str = "10Gbps", latency: str = "1us") -> dict:
    """topoplan's topology document of the network ``write_platform`` describes: one switch of ``n_hosts``
    single-core nodes, no switch delay, an MTU of 1 byte."""
    return {"kind": "tree", "name": f"one-switch-{n_hosts}", "switches": 1, "nodes_per_switch": int(n_hosts),
            "cores_per_node": 1, "eps": {"down_bw": bw, "down_latency": latency, "up_bw": bw, "up_latency": latency,
                                         "switch_delay": "0ns", "mtu": "1B"}}


def _size(x: float, where: str) -> int:
    if not (x >= 0 and float(x).is_integer()):
        raise ConversionError(f"{where}: SMPI sends whole bytes, got {x!r}")
    return int(x)


def _element(nbytes: int) -> tuple[int, int]:
    for size, dtype in _ELEMENTS:
        if nbytes % size == 0:
            return nbytes // size, dtype
    raise AssertionError("unreachable")


def write_ti_traces(trace, out_dir, *, compute_scale: float = 1.0, host_speed_flops: float = HOST_SPEED_FLOPS) -> dict:
    """Write ``trace`` (a :class:`topoplan.traffic.trace.Trace`) as SMPI time-independent traces in ``out_dir``:
    ``rank<r>.txt`` per rank and ``index.txt`` listing them (``smpirun -replay index.txt``).

    Returns ``{"index", "n_ranks", "actions", "bytes"}``; raises :class:`ConversionError` (naming the row) on what
    SMPI cannot replay."""
    from topoplan.sim.replay_common import gaps
    from topoplan.traffic.trace import OPS, call_namer, per_destination_calls

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    n = int(trace.n_ranks)
    where = call_namer(trace)
    bounds = np.searchsorted(trace.rank, np.arange(n + 1))
    gap = gaps(trace, bounds, compute_scale)
    for i in np.flatnonzero(trace.comm >= 0):
        members = trace.communicators.get(int(trace.comm[i]))
        if members is not None and not np.array_equal(members, np.arange(n)):
            raise ConversionError(f"{where(i)}: a call on communicator {int(trace.comm[i])}; SMPI's trace replay "
                                  f"knows MPI_COMM_WORLD only")
    # per-destination alltoall(v) rows: one call each; its counts by destination, and its ordinal among the
    # rank's calls of that op (the k-th calls of all ranks are one collective)
    rows, starts = per_destination_calls(trace)
    call_of_row = np.full(len(trace), -1, dtype=np.int64)
    ends = np.append(starts[1:], len(rows))
    for c, (a, b) in enumerate(zip(starts, ends)):
        call_of_row[rows[a:b]] = c
    counts = np.zeros((len(starts), n), dtype=np.int64)
    for c, (a, b) in enumerate(zip(starts, ends)):
        rr = rows[a:b]
        for i in rr:
            counts[c, int(trace.peer[i])] += _size(float(trace.bytes[i]), where(i))
    first_rows = rows[starts]
    call_rank, call_op = trace.rank[first_rows], trace.op[first_rows]
    ordinal = np.zeros(len(starts), dtype=np.int64)
    key = {}
    for c in range(len(starts)):
        k = (int(call_rank[c]), int(call_op[c]))
        ordinal[c] = key.get(k, 0)
        key[k] = ordinal[c] + 1
    by_ordinal = {(int(call_op[c]), int(ordinal[c]), int(call_rank[c])): c for c in range(len(starts))}

    files, actions, written = [], 0, 0
    rank_col, op_col, peer_col, bytes_col = trace.rank, trace.op, trace.peer, trace.bytes
    tag_col, req_col, root_col = trace.tag, trace.req, trace.root
    for r in range(n):
        lines = [f"{r} init"]
        open_reqs = deque()   # (peer, is_send, tag) in posting order
        i, hi = int(bounds[r]), int(bounds[r + 1])
        while i < hi:
            op = int(op_col[i])
            c = int(call_of_row[i])
            last = i
            if c >= 0:   # the rest of this per-destination call
                last = int(rows[ends[c] - 1])
            g = float(gap[i:last + 1].sum()) if last > i else float(gap[i])
            if g > 0:
                lines.append(f"{r} compute {g * host_speed_flops!r}")
            name = OPS[op] if op >= 0 else "unknown"
            peer = int(peer_col[i])
            tag = max(int(tag_col[i]), 0)
            if name in _P2P:
                if peer < 0:
                    raise ConversionError(f"{where(i)}: {name} from any source; SMPI's replay needs the source")
                size = _size(float(bytes_col[i]), where(i))
                lines.append(f"{r} {name} {peer} {tag} {size}")
                if name in ("isend", "irecv"):
                    open_reqs.append((peer, name == "isend", tag))
            elif name == "wait" and peer >= 0:
                want = int(req_col[i])
                for k, (p, is_send, t) in enumerate(open_reqs):
                    if p == peer and (want < 0 or is_send == bool(want)):
                        del open_reqs[k]
                        src, dst = (r, p) if is_send else (p, r)
                        lines.append(f"{r} wait {src} {dst} {t}")
                        break
                else:
                    raise ConversionError(f"{where(i)}: wait for rank {peer} with no open request to it")
            elif name in ("wait", "waitall"):
                open_reqs.clear()
                lines.append(f"{r} waitall")
            elif name == "barrier":
                lines.append(f"{r} barrier")
            elif name == "bcast":
                lines.append(f"{r} bcast {_size(float(bytes_col[i]), where(i))} {int(root_col[i])}")
            elif name in ("reduce", "allreduce"):
                count, dtype = _element(_size(float(bytes_col[i]), where(i)))
                lines.append(f"{r} {name} {count} 0 {int(root_col[i])} {dtype}" if name == "reduce"
                             else f"{r} allreduce {count} 0 {dtype}")
            elif name in ("allgather", "gather", "scatter"):
                size = _size(float(bytes_col[i]), where(i))   # what each rank contributes or gets
                lines.append(f"{r} {name} {size} {size}" + (f" {int(root_col[i])}" if name != "allgather" else ""))
            elif name == "alltoall" and c < 0:
                size = _size(float(bytes_col[i]), where(i))
                lines.append(f"{r} alltoall {size} {size}")
            elif name in ("alltoall", "alltoallv"):
                send = counts[c]
                recv = np.zeros(n, dtype=np.int64)
                for s in range(n):
                    sc = by_ordinal.get((op, int(ordinal[c]), s))
                    if sc is None:
                        raise ConversionError(f"{where(i)}: rank {s} makes fewer {name} calls (this is rank "
                                              f"{r}'s number {int(ordinal[c]) + 1})")
                    recv[s] = counts[sc, r]
                if name == "alltoall" and not (np.all(send == send[0]) and np.all(recv == send[0])):
                    name = "alltoallv"
                if name == "alltoall":
                    lines.append(f"{r} alltoall {int(send[0])} {int(send[0])}")
                else:
                    lines.append(f"{r} alltoallv {int(send.sum())} {' '.join(map(str, send.tolist()))} "
                                 f"{int(recv.sum())} {' '.join(map(str, recv.tolist()))}")
            else:
                raise ConversionError(f"{where(i)}: {name} has no equivalent in SMPI's trace replay here")
            i = last + 1
        lines.append(f"{r} finalize")
        path = out_dir / f"rank{r}.txt"
        text = "\n".join(lines) + "\n"
        path.write_text(text)
        files.append(path)
        actions += len(lines)
        written += len(text)
    index = out_dir / "index.txt"
    index.write_text("".join(f"{p.resolve()}\n" for p in files))
    return {"index": index, "n_ranks": n, "actions": actions, "bytes": written}


def write_platform(path, n_hosts: int, *, bw_Bps: float, latency_s: float, loopback_bw_Bps: float,
                   loopback_latency_s: float, serialization_B: float = 1.0,
                   host_speed_flops: float = HOST_SPEED_FLOPS) -> Path:
    """A SimGrid platform of one switch with ``n_hosts`` hosts ``h0..h{n-1}`` (a cluster without backbone:
    split-duplex private links), and ``path.with_suffix('.hosts')``, the hostfile naming them in rank order.

    Each link's latency is ``latency_s`` plus half the serialization of ``serialization_B`` bytes (topoplan's
    store-and-forward of the first MTU at the switch). Returns the platform's path."""
    path = Path(path)
    lat = latency_s + serialization_B / bw_Bps / 2
    path.write_text(
        "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
        "<platform version=\"4.1\">\n"
        f"  <cluster id=\"switch\" prefix=\"h\" suffix=\"\" radical=\"0-{n_hosts - 1}\" "
        f"speed=\"{host_speed_flops!r}f\" bw=\"{bw_Bps!r}Bps\" lat=\"{lat!r}s\" sharing_policy=\"SPLITDUPLEX\" "
        f"loopback_bw=\"{loopback_bw_Bps!r}Bps\" loopback_lat=\"{loopback_latency_s!r}s\"/>\n"
        "</platform>\n")
    path.with_suffix(".hosts").write_text("".join(f"h{k}\n" for k in range(n_hosts)))
    return path


def smpi_command(platform, index, n_ranks: int, algorithms=()) -> list[str]:
    """``smpirun -np N -platform P -hostfile H -replay INDEX`` with :data:`SMPI_CONFIG` and ``algorithms``
    (:func:`smpi_algorithms`)."""
    platform = Path(platform)
    return [SMPIRUN, "-np", str(n_ranks), "-platform", str(platform), "-hostfile", str(platform.with_suffix(".hosts")),
            "-replay", str(index), *SMPI_CONFIG, *algorithms, *QUIET]


# topoplan's MPICH algorithm -> SMPI's of that name (SMPI 3.32's MPICH selector aborts the replay in bcast,
# reduce and allreduce: it builds an SMP communicator, which a replay does not have)
# SMPI's mvapich2_scatter_dest alltoall (MPICH's medium algorithm) and its alltoallv post this many isend/irecv
# pairs at a time (MV2_ALLTOALL_THROTTLE_FACTOR in SimGrid's sources); MPICH's default is 32
SMPI_SCATTER_DEST_THROTTLE = 4

_SMPI_ALGORITHM = {("bcast", "binomial"): "binomial_tree", ("bcast", "scatter-rd"): "scatter_rdb_allgather",
                   ("bcast", "scatter-ring"): "scatter_LR_allgather", ("reduce", "binomial"): "binomial",
                   ("reduce", "rabenseifner"): "scatter_gather", ("allreduce", "rd"): "rdb",
                   ("allreduce", "rabenseifner"): "rab_rdb"}


def smpi_algorithms(trace, thresholds=None) -> tuple[list[str], dict]:
    """SMPI's ``--cfg=smpi/<op>:<algorithm>`` for bcast, reduce and allreduce: the algorithm MPICH (and so
    topoplan, with ``thresholds``, default MPICH's) runs for the trace's calls, one per op (SMPI sets one per
    run); where the calls of an op take two algorithms, the one that moves the most bytes. A Bruck alltoall runs
    as SMPI's basic linear one (SMPI's Bruck aborts an eager replay). With an alltoall throttle of
    :data:`SMPI_SCATTER_DEST_THROTTLE`, medium alltoalls run SMPI's ``mvapich2_scatter_dest``, MPICH's batched
    isend/irecv with that many in flight (SMPI's selector picks its ring at exactly the medium size). Returns the
    flags and ``{op: {algorithm: bytes}}``."""
    from topoplan.traffic.collectives import MPICHThresholds, alltoall_algorithm, bcast_algorithm
    from topoplan.traffic.trace import OP_CODE

    th = thresholds or MPICHThresholds()
    used: dict = {}
    for name in ("bcast", "reduce", "allreduce"):
        rows = np.flatnonzero(trace.op == OP_CODE[name])
        for n_B, p in zip(trace.bytes[rows].tolist(), trace.comm_size[rows].tolist()):
            count, _ = _element(int(n_B))
            pof2 = 1 << (int(p).bit_length() - 1)
            if name == "bcast":
                alg = bcast_algorithm(int(p), n_B, th=th)
            elif name == "reduce":
                alg = "rabenseifner" if n_B > th.reduce_short_B and count >= pof2 else "binomial"
            else:
                alg = "rabenseifner" if n_B > th.allreduce_short_B and count >= pof2 else "rd"
            by = used.setdefault(name, {})
            by[alg] = by.get(alg, 0.0) + n_B
    flags = [f"--cfg=smpi/{op}:{_SMPI_ALGORITHM[(op, max(by, key=by.get))]}" for op, by in used.items()]
    # SMPI's Bruck alltoall aborts the replay with eager sends (NPB IS: class S at 8 ranks, class C at 256): an
    # alltoall MPICH runs by Bruck (at most 256 bytes a pair) runs SMPI's basic linear exchange instead
    calls = trace.op == OP_CODE["alltoall"]
    algs = np.array([alltoall_algorithm(int(p), n_B, th)
                     for p, n_B in zip(trace.comm_size[calls].tolist(), trace.bytes[calls].tolist())], dtype=object)
    small = calls.copy()
    small[calls] = algs == "bruck"
    medium = calls.copy()
    medium[calls] = algs == "spread"
    if small.any():
        flags.append("--cfg=smpi/alltoall:basic_linear")
        used["alltoall"] = {"bruck": float(trace.bytes[small].sum())}
    elif medium.any() and th.alltoall_throttle == SMPI_SCATTER_DEST_THROTTLE:
        flags.append("--cfg=smpi/alltoall:mvapich2_scatter_dest")
        used["alltoall"] = {"spread": float(trace.bytes[medium].sum())}
    return flags, used


_SIMULATION_TIME = re.compile(r"Simulation time ([0-9.eE+-]+)")


def run_smpi(platform, index, n_ranks: int, algorithms=(), *, timeout_s: float | None = None, cwd=None) -> dict:
    """Run SMPI's replay as a process: :func:`processes.run_process`'s record plus ``makespan_s`` (SMPI's
    ``Simulation time``), or ``{"timeout_s"}``, or ``{"error"}``."""
    with tempfile.TemporaryDirectory(prefix="smpi.") as tmp:   # smpirun writes its temporaries to the cwd
        proc = run_process(smpi_command(platform, index, n_ranks, algorithms), timeout_s=timeout_s, cwd=cwd or tmp)
    if "timeout_s" in proc:
        return proc
    found = _SIMULATION_TIME.findall(proc["stderr"])
    if proc["returncode"] != 0 or not found:
        lines = [ln for ln in proc["stderr"].strip().splitlines() if ln.strip()]
        return {"error": f"smpirun failed ({proc['returncode']}): {(lines[-1] if lines else '')[-300:]}"}
    proc["makespan_s"] = float(found[-1])
    return proc


def prepare(spec: str, out_dir, *, bw: str = "10Gbps", latency: str = "1us", thresholds=None) -> dict:
    """Generate or read the trace ``spec``, write the SMPI files and the topoplan topology of the same network
    in ``out_dir``; the conversion's seconds and the paths. ``thresholds``: the MPICH parameters topoplan runs
    with (:func:`smpi_algorithms`)."""
    import yaml

    from topoplan.core.topology_io import load_topology
    from topoplan.traffic.sources import load_source

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    trace, _ = load_source(spec, with_traffic=False)
    t1 = time.perf_counter()
    n = int(trace.n_ranks)
    topo_path = out_dir / "topology.yaml"
    topo_path.write_text(yaml.safe_dump(topology_doc(n, bw, latency), sort_keys=False))
    topo = load_topology(str(topo_path))
    files = write_ti_traces(trace, out_dir / "ti")
    algorithms, used = smpi_algorithms(trace, thresholds)
    platform = write_platform(out_dir / "platform.xml", n, bw_Bps=topo.down_bw_Bps, latency_s=topo.down_latency_s,
                              loopback_bw_Bps=topo.intra_node_bw_Bps, loopback_latency_s=topo.intra_node_latency_s,
                              serialization_B=topo.mtu_B)
    t2 = time.perf_counter()
    return {"spec": spec, "n_ranks": n, "rows": len(trace), "topology": topo_path, "platform": platform,
            "index": files["index"], "algorithms": algorithms, "algorithm_bytes": used, "actions": files["actions"],
            "ti_MB": files["bytes"] / 1e6,
            "generate_s": t1 - t0, "convert_s": t2 - t1}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spec", help="a generator spec (npb:kernel=cg,class=C,np=128,iters=5) or a trace file")
    ap.add_argument("--dir", help="write the files here and keep them (default: a temporary directory)")
    ap.add_argument("--bw", default="10Gbps", help="every host link's bandwidth (default 10Gbps)")
    ap.add_argument("--latency", default="1us", help="every host link's latency (default 1us)")
    ap.add_argument("--timeout", type=float, default=None, help="seconds for SMPI's process")
    ap.add_argument("--json", action="store_true", help="print the record as JSON")
    args = ap.parse_args(argv)
    ok, why = smpi_available()
    if not ok:
        print(f"smpi_peer: {why}", file=sys.stderr)
        return 3
    with tempfile.TemporaryDirectory(prefix="smpi_peer.") as tmp:
        out = Path(args.dir) if args.dir else Path(tmp)
        from topoplan.core.errors import TopoplanError

        try:
            prep = prepare(args.spec, out, bw=args.bw, latency=args.latency)
        except (ConversionError, TopoplanError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        res = run_smpi(prep["platform"], prep["index"], prep["n_ranks"], prep["algorithms"], timeout_s=args.timeout)
    doc = {**{k: str(v) if isinstance(v, Path) else v for k, v in prep.items()},
           **{k: v for k, v in res.items() if k != "stderr"}}
    if args.json:
        print(json.dumps(doc, indent=1))
    else:
        print(f"{args.spec}: {prep['rows']:,} rows -> {prep['actions']:,} SMPI actions ({prep['ti_MB']:.0f} MB), "
              f"converted in {prep['convert_s']:.2f} s")
        if "makespan_s" in res:
            print(f"SMPI: simulated {res['makespan_s']:.9g} s; process wall {res['wall_s']:.2f} s, "
                  f"CPU {res['cpu_s']:.2f} s, peak {res['peak_MB']:.0f} MB (load {res['load']:.1f})")
        else:
            print(f"SMPI: {res.get('error') or 'timed out'}")
    return 0 if "makespan_s" in res else 1


if __name__ == "__main__":
    sys.exit(main())
