"""Eager sends and skewed ranks in an alltoall (``benchmarks/alltoall_eager.py``): the written-out exchanges, and
the simulator's behaviour the benchmark measures at 256 ranks, here at 32."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from alltoall_eager import written_out  # noqa: E402

from topoplan.core.placement import sequential  # noqa: E402
from topoplan.core.topology_io import load_topology  # noqa: E402
from topoplan.sim.run import simulate  # noqa: E402
from topoplan.traffic.sources import load_source  # noqa: E402

HEAD = "rank,op,peer,bytes,root,comm_size,t_start,t_end\n"


def _alltoall_trace(path: Path, p: int, nbytes: int, calls: int, reduce_first: bool) -> Path:
    """``calls`` alltoalls of ``nbytes`` a pair on ``p`` ranks, each after a 16-byte reduce to rank 0 when
    ``reduce_first``."""
    rows = [HEAD]
    for r in range(p):
        for _ in range(calls):
            if reduce_first:
                rows.append(f"{r},reduce,-1,16,0,{p},0,0\n")
            rows.append(f"{r},alltoall,-1,{nbytes},-1,{p},0,0\n")
    path.write_text("".join(rows))
    return path


@pytest.mark.parametrize("kind", ["pairwise", "ring"])
def test_written_out_rounds_pair_every_rank_with_every_other_once(tmp_path, kind):
    src = _alltoall_trace(tmp_path / "a.csv", 8, 4096, 1, reduce_first=True)
    out = tmp_path / f"{kind}.csv"
    written_out(src, out, kind)
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f))
    assert sum(r["op"] == "reduce" for r in rows) == 8 and not any(r["op"] == "alltoall" for r in rows)
    for r in range(8):
        mine = [row for row in rows if int(row["rank"]) == r and row["op"] != "reduce"]
        assert [row["op"] for row in mine] == ["irecv", "isend", "waitall"] * 7
        sends = [int(row["peer"]) for row in mine if row["op"] == "isend"]
        recvs = [int(row["peer"]) for row in mine if row["op"] == "irecv"]
        assert sorted(sends) == sorted(recvs) == [q for q in range(8) if q != r]
        if kind == "ring":
            assert sends == [(r + i) % 8 for i in range(1, 8)] and recvs == [(r - i) % 8 for i in range(1, 8)]
        else:
            assert sends == recvs == [r ^ i for i in range(1, 8)]
        assert all(int(row["bytes"]) == 4096 for row in mine if row["op"] != "waitall")


def test_pairwise_needs_a_power_of_two(tmp_path):
    src = _alltoall_trace(tmp_path / "a.csv", 6, 4096, 1, reduce_first=False)
    with pytest.raises(SystemExit, match="power of two ranks, not 6"):
        written_out(src, tmp_path / "out.csv", "pairwise")


def _time(path: Path, eager_B: float) -> float:
    topo = load_topology("paper003", ["kind=tree", "ocs=null", "switches=1", "nodes_per_switch=32",
                                      "cores_per_node=1"])
    trace, _ = load_source(str(path), with_traffic=False)
    return simulate(topo, trace, sequential(32, topo), eager_threshold_B=eager_B)["makespan_s"]


@pytest.mark.parametrize("kind", ["pairwise", "ring"])
def test_eager_sends_slow_an_exchange_only_when_the_ranks_enter_apart(tmp_path, kind):
    # Together, a round's messages are the only ones on the links, eager or not; after a binomial reduce (leaves
    # released first, the root last) the ranks ahead send later rounds' messages eagerly onto the links of the
    # ranks behind, and the exchange takes longer than with rendezvous sends, which start at the receive.
    times = {}
    for skewed in (False, True):
        out = tmp_path / f"{kind}-{skewed}.csv"
        written_out(_alltoall_trace(tmp_path / f"a-{skewed}.csv", 32, 32768, 2, reduce_first=skewed), out, kind)
        times[skewed] = {proto: _time(out, eager_B) for proto, eager_B in (("eager", 65536.0), ("rndv", 16384.0))}
    assert times[False]["eager"] == pytest.approx(times[False]["rndv"], rel=1e-9)
    assert times[True]["rndv"] == pytest.approx(times[False]["rndv"], rel=0.05)
    assert times[True]["eager"] > 2 * times[True]["rndv"]   # (2.8x pairwise, 3.4x ring)
