"""First come, first served flows (topoplan.sim.fifo): what the model does that max-min does not.

The engine contract is checked with every engine in test_sim_engines.py; here, the model's own behaviour.
"""

from __future__ import annotations

import numpy as np
import pytest

from topoplan.core.errors import TopoplanError
from topoplan.core.placement import sequential
from topoplan.core.topology import TreeTopology
from topoplan.sim.fifo import MAX_MESSAGES, FifoEngine
from topoplan.sim.maxmin import FlowEngine
from topoplan.sim.routes import LinkSet
from topoplan.sim.simmodel import SimModel
from topoplan.sim.run import simulate
from topoplan.traffic.trace import Trace

GB = 1e9
# links 0-2: three nodes' links into a switch; 3-5: the switch's links out to them
STAR = LinkSet([GB] * 6, [0.0] * 6, [True] * 6)


def _finish(engine_cls, routes, starts, sizes, links=STAR, **kw):
    """Finish times in microseconds."""
    eng = engine_cls(links, **kw)
    ptr = np.r_[0, np.cumsum([len(r) for r in routes])]
    eng.add_flows(ptr, np.concatenate(routes), starts, sizes)
    eng.run()
    return [round(float(t) * 1e6, 6) for t in eng.finish_s]


KB32 = 32e3   # below the default in_turn_max_B (64 KiB): a message that goes in turn
EVERY = {"in_turn_max_B": 2.0 ** 40}   # every message in turn


@pytest.mark.parametrize("engine_cls, kw, size, expected", [
    (FifoEngine, {}, KB32, [32.0, 64.0, 96.0]),
    (FlowEngine, {}, KB32, [96.0, 96.0, 96.0]),
    (FifoEngine, {}, 1e6, [3000.0, 3000.0, 3000.0]),      # large: fragments interleave, as under max-min
    (FifoEngine, EVERY, 1e6, [1000.0, 2000.0, 3000.0]),
])
def test_a_node_sends_its_small_messages_one_after_another(engine_cls, kw, size, expected):
    """Three messages posted at once by node 0 to nodes 1, 2 and 3 (us): small ones in turn, large ones shared."""
    assert _finish(engine_cls, [[0, 4], [0, 5], [0, 3]], [0.0] * 3, [size] * 3, **kw) == expected


def test_the_turn_is_the_order_sent_not_the_order_ready():
    """A message sent first goes first even when its route's latency makes a later one ready before it."""
    links = LinkSet([GB] * 3, [50e-6, 0.0, 0.0], [True] * 3)   # link 0: a long way to go
    far_first = _finish(FifoEngine, [[1, 0], [1, 2]], [0.0, 10e-6], [KB32, KB32], links)
    assert far_first == [pytest.approx(82.0), pytest.approx(114.0)]   # the near message waits for the far one


@pytest.mark.parametrize("engine_cls, expected", [(FifoEngine, [32.0, 64.0]), (FlowEngine, [48.0, 64.0])])
def test_a_link_serves_the_transfer_that_began_first(engine_cls, expected):
    """Nodes 0 and 1 send 32 KB each to node 2, the second 16 us later: the first keeps the shared link."""
    assert _finish(engine_cls, [[0, 5], [1, 5]], [0.0, 16e-6], [KB32, KB32]) == expected


@pytest.mark.parametrize("engine_cls, expected", [(FifoEngine, [1032.0, 532.0]), (FlowEngine, [1032.0, 564.0])])
def test_a_small_message_goes_before_a_large_one(engine_cls, expected):
    """Node 0 sends 1 MB to node 2; 0.5 ms later node 1 sends it 32 KB, which takes the whole shared link (its bytes
    queue whole; the large message's fragments come a window at a time) and the large one ends as late as under
    max-min, whose sharing is as busy."""
    assert _finish(engine_cls, [[0, 5], [1, 5]], [0.0, 0.5e-3], [1e6, KB32]) == expected


@pytest.mark.parametrize("size", [KB32, 1e6])
def test_transfers_that_begin_together_share_by_max_min(size):
    t = size / GB * 1e6
    assert _finish(FifoEngine, [[0, 5], [1, 5]], [0.0, 0.0], [size, size]) == [2 * t, 2 * t]


def test_an_empty_message_takes_no_turn():
    assert _finish(FifoEngine, [[0, 4], [0, 5]], [0.0, 0.0], [0.0, KB32]) == [0.0, 32.0]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_compiled_rates_equal_numpy_to_the_bit(seed):
    """Random routes over shared and unshared links, small and large messages, starts that tie and starts that
    do not: the Numba kernel and the NumPy groups give the same finish times, bit for bit."""
    pytest.importorskip("numba")
    rng = np.random.default_rng(seed)
    n_links, n_flows = 14, 160
    links = LinkSet(rng.choice([1e9, 2.5e9, 1e10], n_links), np.zeros(n_links), rng.random(n_links) < 0.85)
    routes = [rng.choice(n_links, size=rng.integers(1, 5), replace=False) for _ in range(n_flows)]
    starts = rng.choice([0.0, 7e-6, 20e-6, 55e-6], n_flows) + np.where(rng.random(n_flows) < 0.3,
                                                                       rng.random(n_flows) * 1e-4, 0.0)
    sizes = rng.choice([0.0, 8e3, 32e3, 65536.0, 2e5, 1e6], n_flows)
    got = {}
    for compiled in (True, False):
        eng = FifoEngine(links, compiled=compiled)
        ptr = np.r_[0, np.cumsum([len(r) for r in routes])]
        eng.add_flows(ptr, np.concatenate(routes), starts, sizes)
        eng.run()
        got[compiled] = (eng.finish_s.copy(), eng.n_events)
    assert np.array_equal(got[True][0], got[False][0]) and got[True][1] == got[False][1]
    assert np.isfinite(got[True][0]).all()


@pytest.mark.parametrize("value, match", [
    (-1, r"field 'fifo_in_turn_max_B': must be 0 bytes or more and finite, got -1"),
    (float("inf"), r"field 'fifo_in_turn_max_B': must be 0 bytes or more and finite"),
    ("big", r"field 'fifo_in_turn_max_B': expected a size in bytes, got 'big'"),
])
def test_the_in_turn_size_is_checked(value, match):
    with pytest.raises(TopoplanError, match=match):
        SimModel(engine="fifo", fifo_in_turn_max_B=value)


def test_the_in_turn_size_is_the_fifo_models_only():
    with pytest.raises(TopoplanError, match=r"field 'fifo_in_turn_max_B': applies to model 'fifo' only, not 'maxmin'"):
        SimModel(fifo_in_turn_max_B=1024)
    assert "fifo_in_turn_max_B" not in SimModel().to_dict()


def test_the_in_turn_size_reaches_the_engine_and_the_record():
    """Through the whole simulator: with every message in turn a node's three 1 MB messages end one after another;
    the size is recorded in the result's model."""
    topo = TreeTopology(kind="tree", nodes_per_switch=(4,))
    trace = Trace.from_records([(0, "send", d, int(1e6), 0, 0, 0.0, 0.0) for d in (1, 2, 3)]
                               + [(d, "recv", 0, int(1e6), 0, 0, 0.0, 0.0) for d in (1, 2, 3)], 4)
    got = {}
    for turn in (65536, 2 ** 40):
        res = simulate(topo, trace, sequential(4, topo), model={"model": "fifo", "fifo_in_turn_max_B": turn},
                       eager_threshold_B=1e9)
        assert res["sim_model"]["fifo_in_turn_max_B"] == turn
        got[turn] = sorted(res["comm_time_s"][1:])
    shared, in_turn = got[65536], got[2 ** 40]
    assert shared[0] == pytest.approx(shared[2], rel=1e-9)        # the three end together
    assert in_turn[1] == pytest.approx(2 * in_turn[0], rel=0.01)   # one after another
    assert in_turn[2] == pytest.approx(3 * in_turn[0], rel=0.01)


def test_eager_messages_after_a_stagger_do_not_slow_the_ring_as_max_min_does():
    """The emulated cluster's finding (docs/network-models.md): 16 ranks entering an eager ring apart took 1.24
    times as long as together; max-min, sharing the links of the ranks behind, predicts 3.3 times."""
    from experiments.emulation_validation import _ring_trace   # the validation's own ring, one alltoall

    topo = TreeTopology(kind="tree", nodes_per_switch=(16,))
    pl = sequential(16, topo)
    t = {(m, s): simulate(topo, _ring_trace(16, s, calls=1), pl, model={"model": m},
                          eager_threshold_B=1e9)["max_comm_time_s"]
         for m in ("maxmin", "fifo") for s in (0.0, 20e-6)}
    assert t[("fifo", 0.0)] == pytest.approx(t[("maxmin", 0.0)], rel=1e-9)   # together: no message meets another
    assert t[("maxmin", 20e-6)] > 2.5 * t[("maxmin", 0.0)]
    assert t[("fifo", 20e-6)] < 1.3 * t[("fifo", 0.0)]   # (1.22x here; 1.12x on the experiment's 10 Gb/s links)


def test_a_trace_too_large_for_the_python_model_is_refused(run_cli):
    from topoplan.sim.replay import check_fifo_size

    n = int(np.sqrt(MAX_MESSAGES)) + 1
    big = Trace.from_records([(r, "alltoall", -1, 8, -1, n, 0.0, 0.0) for r in range(n)], n, source="big.csv")
    with pytest.raises(TopoplanError, match=r"^big.csv: up to [\d,]+ messages; the fifo model runs in the reference"):
        check_fifo_size(big)
    spec = "random:np=64,bytes=1KB,msgs=1000001"
    code, out, err = run_cli("simulate", "-t", "paper003", "-T", spec, "--model", "fifo")
    assert (code, out) == (2, "") and err.startswith(f"error: {spec}: up to 1,000,001 messages")
