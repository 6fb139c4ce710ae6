import json

import numpy as np
import pytest

from topoplan.analysis.switches import analyze, default_threshold
from topoplan.core.errors import TopoplanError
from topoplan.core.placement import sequential
from topoplan.core.topology_io import load_topology
from topoplan.traffic.matrix import from_arrays
from topoplan.traffic.sources import load_traffic


def test_003_table2_neighbor_sequential(run_cli):
    """003 Table 2: neighbor 16x16, 4 MB, 5 iterations, Sequential: 1,920 MB inter-switch, all large."""
    code, out, err = run_cli("analyze", "--topology", "paper003", "--traffic",
                             "neighbor2d:rows=16,cols=16,bytes=4MB,iters=5", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["inter_switch_bytes"] == pytest.approx(1.92e9)
    assert d["inter_switch_large_bytes"] == pytest.approx(1.92e9)
    assert d["inter_switch_small_bytes"] == 0
    assert d["threshold_B"] == pytest.approx(1250)
    assert len(d["switches"]) == 4
    for key in ("node_pairs", "bytes"):
        assert np.array(d[key]).shape == (4, 4)


def test_000_neighbor_8x16_node_pairs(run_cli):
    """000 section 4.2: neighbor 8x16 on the 000 system: 48 inter-switch node pairs, 16 per adjacent switch pair."""
    code, out, err = run_cli("analyze", "-t", "paper000", "-T", "neighbor2d:rows=8,cols=16,bytes=40MB,iters=5",
                             "--threshold", "8192", "--json")
    assert code == 0, err
    d = json.loads(out)
    pairs = np.array(d["node_pairs"])
    assert d["inter_switch_node_pairs"] == 48
    assert [pairs[i, i + 1] for i in range(3)] == [16, 16, 16]
    assert pairs[0, 2] == 0 and pairs[0, 3] == 0
    assert np.array_equal(pairs, pairs.T)


def test_threshold_splits_large_and_small():
    t = load_topology("paper003", ["ocs.nodes_per_switch=1"])
    # rank 0 (switch 0) -> rank 64 (switch 1): one 1000 B and one 2000 B message; rank 0 -> 1 stays on node 0
    tr = from_arrays(65, [0, 0, 0], [64, 64, 1], [1000, 2000, 50])
    a = analyze(t, tr, sequential(65, t))
    assert a.inter(a.large_bytes) == 2000 and a.inter(a.small_bytes) == 1000
    assert a.intra_node_bytes == 50
    assert default_threshold(t) == pytest.approx(1250)
    b = analyze(t, tr, sequential(65, t), threshold_B=500)
    assert b.inter(b.large_bytes) == 3000


def test_cli_bad_input_exit_2(run_cli, tmp_path):
    code, out, err = run_cli("analyze", "-t", "paper003", "-T", "alltoall:np=512,bytes=1MB")
    assert code == 2 and "512 ranks do not fit" in err and "Traceback" not in err
    bad = tmp_path / "m.csv"
    bad.write_text("src,dst,bytes,msgs\n0,1,10,1\n0,1,oops,1\n")
    code, out, err = run_cli("analyze", "-t", "paper003", "-T", bad)
    assert code == 2 and "m.csv:3: field 'bytes'" in err
    code, out, err = run_cli("analyze", "-t", "paper003", "-T", "neighbor2d:rows=4,cols=4,bytes=1MB",
                             "--set", "eps.up_bw=-3Gbps")
    assert code == 2 and "eps.up_bw" in err
    code, out, err = run_cli("analyze", "-t", "paper003", "-T", "nosuchgen:np=4")
    assert code == 2 and err.count("\n") == 1


def test_analyze_refuses_switch_matrices_past_the_memory_available(run_cli, tmp_path, monkeypatch):
    """On a mesh or torus every router is a switch: the K computer's 82,944 x 82,944 matrices were a
    MemoryError traceback; now a one-line error before anything is allocated, and no output written."""
    from topoplan.core import memory

    monkeypatch.setattr(memory, "memory_left", lambda: 2**20)   # 1 MiB: 1,000 routers need 46 MiB
    out_json = tmp_path / "a.json"
    code, out, err = run_cli("analyze", "-t", "mesh10x10x10", "-T", "ring:np=8,bytes=1", "-o", out_json)
    assert code == 2 and out == "" and not out_json.exists()
    assert err.startswith("error: mesh10x10x10: the analysis's 1,000 x 1,000 matrices") and err.count("\n") == 1
    monkeypatch.setattr(memory, "memory_left", lambda: None)   # unknown: not checked
    t = load_topology("mesh10x10x10")
    assert analyze(t, from_arrays(8, [0], [1], [5.0]), sequential(8, t)).to_dict()["inter_switch_bytes"] == 5.0


def test_traffic_command_writes_matrix(run_cli, tmp_path):
    out_csv = tmp_path / "n.csv"
    code, out, err = run_cli("traffic", "neighbor2d:rows=2,cols=2,bytes=1KB,iters=3", "-o", out_csv, "--json")
    assert code == 0, err
    lines = out_csv.read_text().splitlines()
    assert lines[0] == "src,dst,bytes,msgs" and "0,1,3000,3" in lines
    d = json.loads(out)
    assert d["bytes"] == 8 * 3000
    code, out, err = run_cli("analyze", "-t", "paper003", "-T", out_csv, "--json")
    assert code == 0 and json.loads(out)["total_bytes"] == 24000


@pytest.mark.parametrize("spec", ["alltoall:np=2,bytes=0", "neighbor2d:rows=1,cols=1,bytes=1MB"])
def test_traffic_command_refuses_a_matrix_without_rows(run_cli, tmp_path, spec):
    """A traffic without messages was written as a header alone, a matrix that every command (traffic itself
    too) refuses to read ('the matrix has no rows'); the trace can still be written."""
    out_csv = tmp_path / "m.csv"
    code, out, err = run_cli("traffic", spec, "-o", out_csv)
    assert (code, out) == (2, "") and not out_csv.exists()
    assert err == (f"error: {spec}: no rank sends a message, so the matrix would have no rows (and no ranks); "
                   "--trace writes its event trace\n")
    assert run_cli("traffic", spec, "--trace", "-o", tmp_path / "t.csv")[0] == 0


def test_node_pairs_count_large_message_pairs_when_asked():
    """000 Table 2 counts node pairs with inter-switch communication circuits can serve: a pair that only
    exchanges small (e.g. zero-byte synchronisation) messages is not one of them."""
    from topoplan.traffic.matrix import from_arrays

    t = load_topology("paper003", ["kind=tree", "ocs=null"])
    # ranks 0/64 (nodes 0 and 16): 1 MB both ways; ranks 4/68: zero-byte only; ranks 8/72: one of each
    tr = from_arrays(256, [0, 64, 4, 68, 8, 72], [64, 0, 68, 4, 72, 8], [1e6, 1e6, 0, 0, 1e6, 0])
    pl = sequential(256, t)
    anyp = analyze(t, tr, pl, threshold_B=8192)
    large = analyze(t, tr, pl, threshold_B=8192, pairs="large")
    assert anyp.to_dict()["inter_switch_node_pairs"] == 3 and anyp.node_pairs[0, 1] == 3
    assert large.to_dict()["inter_switch_node_pairs"] == 2   # pairs are unordered: 0<->64 counts once
    assert large.to_dict()["node_pairs_ordered"] is False and large.to_dict()["node_pairs_count"] == "large"
    with pytest.raises(TopoplanError, match="field 'pairs': choose one of any, large"):
        analyze(t, tr, pl, pairs="ordered")


def test_analyze_cli_counts_large_pairs_of_the_real_cg_trace_with_a_threshold(run_cli):
    import json
    from pathlib import Path

    trace = Path(__file__).resolve().parents[2] / "shared" / "traces" / "CG.C.64" / "events.csv.gz"
    if not trace.exists():
        pytest.skip("needs ../shared/traces")
    base = ("analyze", "-t", "paper003", "-T", str(trace), "-p", "round-robin", "--json")
    code, out, err = run_cli(*base)
    assert code == 0, err
    every = json.loads(out)["inter_switch_node_pairs"]
    code, out, err = run_cli(*base, "--threshold", "8KiB")
    doc = json.loads(out)
    assert code == 0 and doc["node_pairs_count"] == "large"
    # CG's zero-byte and small reduction messages reach many pairs; large ones few
    assert doc["inter_switch_node_pairs"] == 24 < every
