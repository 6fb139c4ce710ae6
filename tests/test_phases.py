"""Phase detection (issue 21): boundaries, consistent cuts, kinds, determinism, the ``phases`` command."""

from __future__ import annotations

import json

import numpy as np
import pytest

from topoplan.core.errors import TopoplanError
from topoplan.traffic.generators import alltoall, neighbor2d, npb, ring
from topoplan.traffic.phases import concat, detect_phases, logical_clock, split_at
from topoplan.traffic.trace import Trace
from topoplan.traffic.generators import halo_then_transpose
from topoplan.traffic.twophase import transpose2d


def _calls_per_rank(trace):
    return np.bincount(trace.rank, minlength=trace.n_ranks)


def test_two_phase_boundary_is_where_the_pattern_changes():
    halo, a2a = neighbor2d(4, 4, 4e6, iters=3), alltoall(16, 1e6, iters=3)
    ph = detect_phases(concat([halo, a2a]))
    assert len(ph) == 2 and ph.kinds() == [0, 1]
    # phase 1 starts, on every rank, right after that rank's halo calls
    assert ph[1].first_call.tolist() == _calls_per_rank(halo).tolist()
    assert ph[0].bytes == pytest.approx(halo.bytes[np.isin(halo.op, [1])].sum())
    assert ph[1].traffic.total_bytes() == pytest.approx(16 * 15 * 1e6 * 3)
    assert ph[0].end_s <= ph[1].start_s + 1e-12


def test_halo_then_transpose_on_a_topology_counts_node_pairs():
    from topoplan.core.topology_io import load_topology

    topo = load_topology("paper001-16x16")
    tr = halo_then_transpose(16, 16, 4e6, iters=2)
    ph = detect_phases(tr, topo)
    assert len(ph) == 2 and ph.pair_basis == "node"
    assert ph[1].first_call.tolist() == _calls_per_rank(neighbor2d(16, 16, 4e6, iters=2)).tolist()
    # the transpose pairs are mirror ranks (one rank per node here)
    a, b, _ = ph[1].pairs[0]
    assert divmod(a, 16) == divmod(b, 16)[::-1]


def test_repeated_patterns_share_a_kind_and_subtraces_cover_the_trace():
    tr = concat([neighbor2d(4, 4, 4e6, iters=2), alltoall(16, 1e6, iters=2), neighbor2d(4, 4, 4e6, iters=2)])
    ph = detect_phases(tr)
    assert ph.kinds() == [0, 1, 0]
    rows = np.concatenate([ph.rows(i) for i in range(len(ph))])
    assert sorted(rows.tolist()) == list(range(len(tr)))
    assert ph.subtrace(0, len(ph)) is tr


def test_detection_is_deterministic():
    tr = npb("mg", 16, "S", iters=1)
    a, b = detect_phases(tr), detect_phases(tr)
    assert np.array_equal(a.cuts, b.cuts) and a.kinds() == b.kinds()
    assert json.dumps(a.to_dict(), sort_keys=True) == json.dumps(b.to_dict(), sort_keys=True)


def test_every_phase_replays_alone():
    from topoplan.core.placement import sequential
    from topoplan.core.topology_io import load_topology
    from topoplan.sim.network import build_network
    from topoplan.sim.replay import replay

    topo = load_topology("paper003", ["kind=tree", "ocs=null"])
    tr = npb("lu", 16, "S", iters=1)       # wavefront and exchange_3..6, collectives in between
    ph = detect_phases(tr)                 # rank pairs: finer phases than node pairs here
    assert len(ph) >= 5
    net = build_network(topo)
    for i in range(len(ph)):
        sub = ph.subtrace(i)
        res = replay(sub, net, sequential(16, topo))     # no deadlock, no unmatched message
        assert res.makespan_s >= 0
        assert sub.t_start.min() == pytest.approx(0.0, abs=1e-6)


def test_cuts_are_moved_to_consistent_points():
    tr = ring(4, 1e6, iters=3)          # per rank: (irecv, isend, waitall) x 3
    assert [p.n_calls for p in split_at(tr, [[3, 3, 3, 3]])] == [12, 24]
    # after the irecv of iteration 2 on rank 0 only: an open request there, so the cut moves past rank 0's
    # waitall, which pulls the whole second iteration (the messages it waits for) before the cut
    ph = split_at(tr, [[4, 3, 3, 3]])
    assert [p.n_calls for p in ph] == [24, 12]
    c = logical_clock(tr)
    for i in range(len(ph)):
        rows = set(ph.rows(i).tolist())
        for s, r in zip(c.send_rows.tolist(), c.recv_rows.tolist()):
            assert (s in rows) == (r in rows)
    # a collective is never split: rank 0 after the first alltoall, the others after the second
    assert [p.n_calls for p in split_at(alltoall(4, 1e3, iters=2), [[1, 2, 2, 2]])] == [8]
    assert [p.n_calls for p in split_at(alltoall(4, 1e3, iters=2), [[1, 1, 1, 0]])] == [4, 4]


def test_clock_reports_an_unmatched_receive():
    t = Trace.from_records([(0, "recv", 1, 8, -1, 2, 0.0, 0.0), (1, "barrier", -1, 0, -1, 2, 0.0, 0.0)], 2, source="t")
    with pytest.raises(TopoplanError, match="deadlock or unmatched receive"):
        logical_clock(t)


def test_options_are_checked_by_name():
    with pytest.raises(TopoplanError, match="field 'threshold'"):
        detect_phases(ring(4, 1e6), threshold=1.5)
    with pytest.raises(TopoplanError, match="field 'window_s'"):
        detect_phases(ring(4, 1e6), window_s=0)
    with pytest.raises(TopoplanError, match="field 'traces\\[1\\]'"):
        concat([ring(4, 1e6), ring(8, 1e6)])
    with pytest.raises(TopoplanError, match="square"):
        transpose2d(2, 3, 1e6)


def test_concat_keeps_communicators_apart():
    a, b = npb("ft", 16, "S", iters=1), npb("ft", 16, "S", iters=1)
    t = concat([a, b])
    ids = sorted(k for k in t.communicators if k >= 0)
    assert len(ids) == len([k for k in a.communicators if k >= 0]) * 2
    assert len(t) == len(a) + len(b)


def test_the_clock_stops_at_a_commands_deadline():
    from topoplan.core import deadline

    t = neighbor2d(8, 8, 1000, iters=20)    # 5,000 calls and more: the clock checks the deadline as it goes
    with deadline.bounded(1e-9), deadline.stopping():
        with pytest.raises(deadline.DeadlineReached, match="stopped at the time limit"):
            logical_clock(t)
    assert len(logical_clock(t).start_s) == len(t)    # outside a stopping stage it runs to the end


def test_phases_command_stops_detecting_at_its_time_limit(tmp_path, monkeypatch, run_cli):
    from topoplan.core import deadline

    monkeypatch.setattr(deadline, "check", lambda: (_ for _ in ()).throw(deadline.DeadlineReached("stopped")))
    out = tmp_path / "ph.json"
    code, stdout, err = run_cli("phases", "-t", "paper003", "-T", "neighbor2d:rows=8,cols=8,bytes=1MB,iters=20",
                                "--time-limit", "30", "-o", out)
    assert (code, stdout) == (2, "") and not out.exists()
    assert err.startswith("error: neighbor2d:rows=8,cols=8,bytes=1MB,iters=20: detecting phases stopped at the "
                          "time limit") and err.count("\n") == 1


def test_phases_command(tmp_path, run_cli):
    out = tmp_path / "ph.json"
    code, _, err = run_cli("phases", "-t", "paper003", "-T", "neighbor2d:rows=8,cols=8,bytes=1MB,iters=2", "-o", out)
    assert code == 0, err
    doc = json.loads(out.read_text())
    assert doc["n_phases"] == 1 and doc["phases"][0]["kind"] == 0
    code, _, err = run_cli("phases", "-t", "paper003", "-T", "ring:np=8,bytes=1MB", "--threshold", "0")
    assert code == 2 and "--threshold" in err


@pytest.mark.parametrize("option", [["--simulate"], ["--steps"], ["--setup", "1ms"], ["--score", "simulated"],
                                    ["--circuit-method", "greedy"], ["--blackout", "stall"]])
def test_schedule_options_without_a_schedule_are_refused(tmp_path, run_cli, option):
    """They were ignored: `phases --simulate` detected the phases and simulated nothing, without a word."""
    out = tmp_path / "ph.json"
    code, stdout, err = run_cli("phases", "-t", "paper003", "-T", "ring:np=8,bytes=1MB", *option, "-o", out)
    assert (code, stdout) == (2, "") and not out.exists()
    assert err == f"error: {option[0]}: applies only with --schedule (detecting phases schedules no circuits)\n"


def test_a_phases_schedule_document_validates(tmp_path, run_cli):
    """`phases --schedule -o` writes the phases with the schedule inside; `validate` checks that schedule
    (every entry and slot as a circuit plan) and the inputs it was made for."""
    out = tmp_path / "sched.json"
    code, _, err = run_cli("phases", "-t", "paper003", "--set", "ocs.nodes_per_switch=4", "-T",
                           "alltoall:np=64,bytes=2MB", "--schedule", "solstice", "--circuit-method", "greedy",
                           "-o", out)
    assert code == 0, err
    code, text, err = run_cli("validate", out, "-t", "paper003", "--set", "ocs.nodes_per_switch=4")
    assert code == 0 and "circuit schedule: 1 entries" in text, err
    code, _, err = run_cli("validate", out, "-t", "paper003", "--set", "ocs.nodes_per_switch=1")
    assert code == 2 and "another topology" in err and "--any-inputs" in err


def test_phases_schedule_scored_by_simulation(tmp_path, run_cli):
    """`--score simulated` prices phases by simulation and says what was kept, replayed whole."""
    out = tmp_path / "sched.json"
    args = ["phases", "-t", "paper003", "--set", "ocs.nodes_per_switch=4", "-T",
            "neighbor2d:rows=16,cols=16,bytes=1MB,iters=2", "--schedule", "exact", "--circuit-method", "greedy"]
    code, text, err = run_cli(*args, "--score", "simulated", "-o", out)
    assert code == 0, err
    m = json.loads(out.read_text())["schedule_result"]["metrics"]
    assert m["score"] == "simulated" and m["picked"] in m["simulated_candidates_s"]
    assert f"kept {m['picked']}" in text and "replayed whole: programme" in text
    code, _, err = run_cli(*args, "--score", "simulation")
    assert code == 2 and "--score" in err and "simulated" in err


@pytest.mark.parametrize("size", ["1MB", "4GB"])
def test_phases_schedule_times_are_printed_in_their_unit(tmp_path, run_cli, size):
    """The schedule's phase sum, bound and simulated time print as every time does (12.74 s, not 1.274e+04 ms)."""
    from topoplan.core.units import format_time

    out = tmp_path / "sched.json"
    code, text, err = run_cli("phases", "-t", "paper003", "--set", "ocs.nodes_per_switch=4", "-T",
                              f"neighbor2d:rows=16,cols=16,bytes={size},iters=2", "--schedule", "static",
                              "--circuit-method", "greedy", "--simulate", "-o", out)
    assert code == 0, err
    res = json.loads(out.read_text())
    sched, sim = res["schedule_result"], res["simulated"]
    assert f"phase sum {format_time(sched['objective'])} " in text
    assert f"lower bound {format_time(sched['bound'])} " in text
    assert f"simulated {format_time(sim['makespan_s'])} ({format_time(sim['setup_idle_s'])} of set-up" in text
    assert "e+" not in text and (size == "1MB") == (" ms" in text.split("simulated ")[1].split(" (")[0])


def test_phases_simulation_takes_and_names_the_network_model(tmp_path, run_cli):
    """`phases --simulate` had no --model/--relay (every other simulation has them) and did not name the model
    it simulated with; it takes the options, records the model and names it."""
    out = tmp_path / "sched.json"
    args = ["phases", "-t", "paper003", "--set", "ocs.nodes_per_switch=4", "-T",
            "neighbor2d:rows=16,cols=16,bytes=1MB,iters=2", "--schedule", "static", "--circuit-method", "greedy",
            "--simulate"]
    code, text, err = run_cli(*args, "--relay", "store-and-forward", "-o", out)
    assert code == 0, err
    assert json.loads(out.read_text())["simulated"]["sim_model"]["relay"] == "store-and-forward"
    assert text.rstrip().splitlines()[-2].endswith("; maxmin, store-and-forward relays)")
    code, text, err = run_cli(*args, "--model", "paper")
    assert code == 0 and "; paper, pipelined relays (64 KiB chunks), link contention)" in text, err
    code, text, err = run_cli(*args, "--model", "bogus")
    assert (code, text, err) == (2, "", "error: --model: choose one of maxmin, paper, fifo, got 'bogus'\n")


def test_a_phases_document_is_bound_to_its_trace(tmp_path, run_cli):
    """A phases file made for another trace with the same rank count (and cuts that happen to fit) is refused by
    the trace's fingerprint; the same calls with other times are the same trace."""
    from topoplan.traffic.phases import phases_from_doc

    tr = concat([neighbor2d(4, 4, 4e6, iters=3), alltoall(16, 1e6, iters=3)])
    doc = detect_phases(tr).to_dict()
    assert set(doc["inputs"]) == {"trace"}
    other = concat([neighbor2d(4, 4, 2e6, iters=3), alltoall(16, 1e6, iters=3)])   # other sizes, same calls
    assert len(other) == len(tr)
    with pytest.raises(TopoplanError, match=r"p\.json: field 'inputs': made for another trace .*; the phases were "
                                            r"detected on another trace"):
        phases_from_doc(doc, other, where="p.json")
    retimed = concat([neighbor2d(4, 4, 4e6, iters=3), alltoall(16, 1e6, iters=3)])
    retimed.t_start, retimed.t_end = retimed.t_start * 3, retimed.t_end * 3
    assert phases_from_doc(doc, retimed).kinds() == [0, 1]
    legacy = {k: v for k, v in doc.items() if k != "inputs"}   # written before fingerprints: its cuts are checked
    assert phases_from_doc(legacy, other).kinds() == [0, 1]
    # the command line: phases -o, then simulate --phases with the same trace, and with another
    spec = "halo-transpose:rows=4,cols=4,bytes=1MB,iters=2"
    code, _, err = run_cli("phases", "-t", "paper003", "-T", spec, "-o", tmp_path / "ph.json")
    assert code == 0, err
    code, _, err = run_cli("simulate", "-t", "paper003", "-T", spec, "--phases", tmp_path / "ph.json")
    assert code == 0, err
    code, _, err = run_cli("simulate", "-t", "paper003", "-T", spec.replace("1MB", "2MB"), "--phases",
                           tmp_path / "ph.json")
    assert code == 2 and "made for another trace" in err and len(err.strip().splitlines()) == 1
