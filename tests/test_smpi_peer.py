"""SMPI as the peer of trace replays (``benchmarks/smpi_peer.py``): the time-independent trace files it writes, the
platform, what it refuses, and (where ``smpirun`` is installed) SMPI's simulated time beside topoplan's."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import smpi_peer  # noqa: E402
from smpi_peer import ConversionError, prepare, run_smpi, smpi_available, write_platform, write_ti_traces  # noqa: E402

from topoplan.core.placement import sequential  # noqa: E402
from topoplan.core.topology_io import load_topology  # noqa: E402
from topoplan.sim.run import simulate  # noqa: E402
from topoplan.traffic.sources import load_source  # noqa: E402
from topoplan.traffic.trace import Trace  # noqa: E402


def _actions(index: Path) -> list[list[list[str]]]:
    files = index.read_text().split()
    return [[ln.split() for ln in Path(f).read_text().splitlines()] for f in files]


def test_point_to_point_files_match_the_trace(tmp_path):
    trace, _ = load_source("npb:kernel=cg,class=S,np=8,iters=1", with_traffic=False)
    got = write_ti_traces(trace, tmp_path)
    ranks = _actions(got["index"])
    assert len(ranks) == 8 and got["actions"] == sum(len(a) for a in ranks)
    sent, received = Counter(), Counter()
    for r, acts in enumerate(ranks):
        assert acts[0] == [str(r), "init"] and acts[-1] == [str(r), "finalize"]
        assert all(a[0] == str(r) for a in acts)
        open_reqs = Counter()
        for a in acts:
            if a[1] in ("send", "isend"):
                sent[(r, int(a[2]), int(a[3]), int(a[4]))] += 1
                if a[1] == "isend":
                    open_reqs[(r, int(a[2]), int(a[3]))] += 1
            elif a[1] in ("recv", "irecv"):
                received[(int(a[2]), r, int(a[3]), int(a[4]))] += 1
                if a[1] == "irecv":
                    open_reqs[(int(a[2]), r, int(a[3]))] += 1
            elif a[1] == "wait":   # a wait names an open request of this rank: (source, destination, tag)
                key = (int(a[2]), int(a[3]), int(a[4]))
                assert open_reqs[key] > 0, a
                open_reqs[key] -= 1
    assert sent == received   # every message has its receive, with the same size and tag
    p2p = np.isin(trace.op, [0, 1])   # send, isend
    assert sum(k[3] * v for k, v in sent.items()) == trace.bytes[p2p].sum()


def test_alltoallv_receive_counts_are_the_senders(tmp_path):
    trace, _ = load_source("npb:kernel=is,class=S,np=8", with_traffic=False)
    ranks = _actions(write_ti_traces(trace, tmp_path)["index"])
    calls = [[a for a in acts if a[1] == "alltoallv"] for acts in ranks]
    assert len({len(c) for c in calls}) == 1 and len(calls[0]) > 0
    for k in range(len(calls[0])):
        send = np.array([[int(x) for x in calls[r][k][3:11]] for r in range(8)])
        recv = np.array([[int(x) for x in calls[r][k][12:20]] for r in range(8)])
        assert np.array_equal(recv, send.T)
        assert all(int(calls[r][k][2]) == send[r].sum() and int(calls[r][k][11]) == recv[r].sum() for r in range(8))


@pytest.mark.parametrize("records, communicators, match", [
    ([(0, "sendrecv", 1, 8, -1, 2, 0.0, 0.0), (1, "recv", 0, 8, -1, 2, 0.0, 0.0)], None, "sendrecv has no equivalent"),
    ([(0, "send", 1, 8, -1, 2, 0.0, 0.0), (1, "recv", -1, 8, -1, 2, 0.0, 0.0)], None, "from any source"),
    ([(r, "barrier", -1, 0, -1, 2, 0.0, 0.0, 1) for r in (0, 1)], {1: [1, 0]}, "MPI_COMM_WORLD only"),
])
def test_refuses_what_smpi_cannot_replay(tmp_path, records, communicators, match):
    trace = Trace.from_records(records, 3 if communicators else 2, communicators=communicators, source="t")
    with pytest.raises(ConversionError, match=match):
        write_ti_traces(trace, tmp_path)


def test_platform_is_one_switch_with_the_route_latency(tmp_path):
    path = write_platform(tmp_path / "p.xml", 4, bw_Bps=1.25e9, latency_s=1e-6, loopback_bw_Bps=8.5e9,
                          loopback_latency_s=1e-7, serialization_B=1.0)
    cluster = ET.parse(path).getroot().find("cluster")
    assert cluster.get("radical") == "0-3" and cluster.get("sharing_policy") == "SPLITDUPLEX"
    assert cluster.get("bw") == "1250000000.0Bps"
    # two links per route: 2 x (1 us + 0.4 ns) = topoplan's 2 us plus 1 byte stored and forwarded at the switch
    assert float(cluster.get("lat").rstrip("s")) == pytest.approx(1e-6 + 0.5 / 1.25e9, rel=1e-15)
    assert path.with_suffix(".hosts").read_text().split() == ["h0", "h1", "h2", "h3"]


def test_algorithms_follow_mpich_for_the_trace():
    trace = Trace.from_records([(r, "allreduce", -1, 8, -1, 8, 0.0, 0.0) for r in range(8)]
                               + [(r, "bcast", -1, 100_000, 0, 8, 1.0, 1.0) for r in range(8)], 8)
    flags, used = smpi_peer.smpi_algorithms(trace)
    assert "--cfg=smpi/allreduce:rdb" in flags and "--cfg=smpi/bcast:scatter_rdb_allgather" in flags
    assert used["allreduce"] == {"rd": 64.0}


def _alltoalls(n_B: int, p: int = 16) -> Trace:
    return Trace.from_records([(r, "alltoall", -1, n_B, -1, p, 0.0, 0.0) for r in range(p)], p)


@pytest.mark.parametrize("n_B, throttle, expected", [
    (32768, 32, None),                                      # MPICH's default throttle: SMPI's own selector
    (32768, 4, {"spread": 16 * 32768.0}),                    # 4 in flight: SMPI's mvapich2_scatter_dest
    (1 << 20, 4, None),                                     # long: the pairwise exchange either way
    (64, 4, {"bruck": 16 * 64.0}),                           # short: Bruck runs as SMPI's basic linear one
])
def test_alltoall_algorithm_follows_the_throttle(n_B, throttle, expected):
    from topoplan.traffic.collectives import MPICHThresholds

    flags, used = smpi_peer.smpi_algorithms(_alltoalls(n_B), MPICHThresholds(alltoall_throttle=throttle))
    assert used.get("alltoall") == expected
    named = {"spread": "--cfg=smpi/alltoall:mvapich2_scatter_dest", "bruck": "--cfg=smpi/alltoall:basic_linear"}
    assert [f for f in flags if "alltoall" in f] == ([named[next(iter(expected))]] if expected else [])


needs_smpi = pytest.mark.skipif(not smpi_available()[0], reason=smpi_available()[1])


@needs_smpi
def test_smpi_and_topoplan_run_the_same_throttled_alltoall(tmp_path):
    """32 KiB a pair: MPICH's batched isend/irecv, which SMPI's selector replaces by its ring; with 4 pairs in
    flight on both sides the two simulate the same exchange."""
    from topoplan.traffic.collectives import MPICHThresholds

    th = MPICHThresholds(alltoall_throttle=4)
    spec = "alltoall:np=16,bytes=32KiB,iters=2"
    prep = prepare(spec, tmp_path, thresholds=th)
    assert "--cfg=smpi/alltoall:mvapich2_scatter_dest" in prep["algorithms"]
    res = run_smpi(prep["platform"], prep["index"], prep["n_ranks"], prep["algorithms"], timeout_s=120)
    assert "makespan_s" in res, res
    topo = load_topology(str(prep["topology"]))
    trace, _ = load_source(spec, with_traffic=False)
    ours = simulate(topo, trace, sequential(16, topo), thresholds=th)
    assert ours["mpich"] == {"alltoall_throttle": 4}
    assert res["makespan_s"] == pytest.approx(ours["makespan_s"], rel=1e-2, abs=1e-6)
    default = simulate(topo, trace, sequential(16, topo))["makespan_s"]
    assert default != pytest.approx(ours["makespan_s"], rel=1e-2)   # the throttle is what was compared


@needs_smpi
@pytest.mark.parametrize("spec", ["npb:kernel=ft,class=S,np=8", "npb:kernel=cg,class=S,np=8,iters=1"])
def test_smpi_replays_the_files_on_the_same_network(tmp_path, spec):
    prep = prepare(spec, tmp_path)
    res = run_smpi(prep["platform"], prep["index"], prep["n_ranks"], prep["algorithms"], timeout_s=120)
    assert "makespan_s" in res, res
    topo = load_topology(str(prep["topology"]))
    trace, _ = load_source(spec, with_traffic=False)
    ours = simulate(topo, trace, sequential(trace.n_ranks, topo))["makespan_s"]
    # SMPI prints its simulated time to the microsecond (makespans of 1-3 ms here); CG's small messages see
    # SMPI's own bcast and reduce trees and eager protocol: within 1%
    assert res["makespan_s"] == pytest.approx(ours, rel=1e-2, abs=1e-6)
