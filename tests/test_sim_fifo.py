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
from topoplan.sim.run import simulate
from topoplan.traffic.trace import Trace

GB = 1e9
# links 0-2: three nodes' links into a switch; 3-5: the switch's links out to them
STAR = LinkSet([GB] * 6, [0.0] * 6, [True] * 6)


def _finish(engine_cls, routes, starts, sizes, links=STAR):
    eng = engine_cls(links)
    ptr = np.r_[0, np.cumsum([len(r) for r in routes])]
    eng.add_flows(ptr, np.concatenate(routes), starts, sizes)
    eng.run()
    return [round(float(t) * 1e3, 9) for t in eng.finish_s]


@pytest.mark.parametrize("engine_cls, expected", [(FifoEngine, [1.0, 2.0, 3.0]), (FlowEngine, [3.0, 3.0, 3.0])])
def test_a_node_sends_its_messages_one_after_another(engine_cls, expected):
    """Three 1 MB messages posted at once by node 0 to nodes 1, 2 and 3 (ms): in turn, not shared."""
    assert _finish(engine_cls, [[0, 4], [0, 5], [0, 3]], [0.0] * 3, [1e6] * 3) == expected


def test_the_turn_is_the_order_sent_not_the_order_ready():
    """A message sent first goes first even when its route's latency makes a later one ready before it."""
    links = LinkSet([GB] * 3, [50e-6, 0.0, 0.0], [True] * 3)   # link 0: a long way to go
    far_first = _finish(FifoEngine, [[1, 0], [1, 2]], [0.0, 10e-6], [1e6, 1e6], links)
    assert far_first == [pytest.approx(1.05), pytest.approx(2.05)]   # the near message waits for the far one


@pytest.mark.parametrize("engine_cls, expected", [(FifoEngine, [1.0, 2.0]), (FlowEngine, [1.5, 2.0])])
def test_a_link_serves_the_transfer_that_began_first(engine_cls, expected):
    """Nodes 0 and 1 send 1 MB each to node 2, the second 0.5 ms later: the first keeps the shared link."""
    assert _finish(engine_cls, [[0, 5], [1, 5]], [0.0, 0.5e-3], [1e6, 1e6]) == expected


def test_transfers_that_begin_together_share_by_max_min():
    assert _finish(FifoEngine, [[0, 5], [1, 5]], [0.0, 0.0], [1e6, 1e6]) == [2.0, 2.0]


def test_an_empty_message_takes_no_turn():
    assert _finish(FifoEngine, [[0, 4], [0, 5]], [0.0, 0.0], [0.0, 1e6]) == [0.0, 1.0]


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
    with pytest.raises(TopoplanError, match=r"^big.csv: up to [\d,]+ messages; the fifo model runs in Python"):
        check_fifo_size(big)
    code, out, err = run_cli("simulate", "-t", "paper003", "-T", "random:np=64,bytes=1KB,msgs=100001", "--model", "fifo")
    assert (code, out) == (2, "") and err.startswith("error: random:np=64,bytes=1KB,msgs=100001: up to 100,001 messages")
