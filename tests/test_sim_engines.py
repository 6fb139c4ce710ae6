"""The engine contract (topoplan.sim.engines): every registered engine runs through one interface.

The reference replay drives engines through :class:`topoplan.sim.engines.Engine` alone, so these checks are
what a new engine (for instance one calibrated on a real network) must pass to be used by ``simulate``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from topoplan.core.errors import TopoplanError
from topoplan.core.placement import sequential
from topoplan.core.topology_io import load_topology
from topoplan.sim import fifo, maxmin, paper  # noqa: F401 (the engines register themselves)
from topoplan.sim.engines import ENGINES, REL_TOL, Engine, engine_class
from topoplan.sim.network import build_network
from topoplan.sim.reference import Replayer
from topoplan.sim.routes import LinkSet, routes_to_csr
from topoplan.sim.simmodel import MODELS
from topoplan.traffic.generators import parse_spec

NAMES = sorted(ENGINES)
LINKS = LinkSet(bw_Bps=[1e9, 5e8, 2e9], latency_s=[1e-6, 2e-6, 0.5e-6], shared=[True, True, True])


def test_every_model_a_simulation_can_name_has_an_engine():
    assert NAMES == sorted(MODELS) == ["fifo", "maxmin", "paper"]
    for name in NAMES:
        assert ENGINES[name].name == name and engine_class(name) is ENGINES[name]
    with pytest.raises(TopoplanError, match=r"no engine 'fluid'; registered: fifo, maxmin, paper"):
        engine_class("fluid")


@pytest.mark.parametrize("name", NAMES)
def test_the_engine_declares_the_interface(name):
    cls = ENGINES[name]
    assert Engine in cls.__mro__          # declared, not only matching
    eng = cls(LINKS)
    assert isinstance(eng, Engine)
    for method in ("for_network", "add_flows", "add_messages", "next_event_time", "advance_to",
                   "run_until_next_event", "run", "link_bytes", "timeline"):
        assert getattr(cls, method) is not getattr(Engine, method), f"{name} inherits {method} from the protocol"


@pytest.mark.parametrize("name", NAMES)
def test_an_idle_engine_has_no_event_and_ids_are_consecutive(name):
    eng = ENGINES[name](LINKS)
    assert eng.n_flows == 0 and eng.next_event_time() == math.inf
    t, done = eng.run_until_next_event()
    assert t == math.inf and len(done) == 0
    ptr, rl = routes_to_csr([[0], [1, 2]])
    assert eng.add_flows(ptr, rl, [0.0, 0.0], [1e3, 1e3]).tolist() == [0, 1]
    assert eng.add_flows(*routes_to_csr([[2]]), [0.0], [1.0]).tolist() == [2]
    assert eng.n_flows == 3 and np.isnan(eng.finish_s).all()


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("route, size", [([0], 1e6), ([0, 1], 4e6), ([1, 2, 0], 2.5e5), ([2], 0.0)])
def test_a_flow_alone_finishes_after_its_latency_and_its_bytes(name, route, size):
    eng = ENGINES[name](LINKS)
    start = 0.25
    eng.add_flows(*routes_to_csr([route]), [start], [size])
    eng.run()
    lat = float(LINKS.latency_s[route].sum())
    bottleneck = size / float(LINKS.bw_Bps[route].min())
    finish = float(eng.finish_s[0])
    assert finish >= start + lat + bottleneck * (1 - 1e-12)
    if name == "maxmin" or len(route) == 1:   # the paper's engine stores and forwards every hop on top
        assert finish == pytest.approx(start + lat + bottleneck, rel=1e-12)
    np.testing.assert_allclose(eng.link_bytes()[route], size)


@pytest.mark.parametrize("name", NAMES)
def test_events_step_the_clock_and_name_the_flows_that_finish(name):
    eng = ENGINES[name](LINKS)
    ptr, rl = routes_to_csr([[0], [0], [2]])
    eng.add_flows(ptr, rl, [0.0, 0.0, 1e-3], [1e6, 1e6, 1e6])
    seen, last = [], 0.0
    while True:
        t_next = eng.next_event_time()
        t, done = eng.run_until_next_event()
        if t == math.inf:
            break
        assert t >= last and t == pytest.approx(t_next, rel=REL_TOL, abs=0)
        assert list(done) == sorted(done) and eng.now == t
        seen += [int(i) for i in done]
        last = t
    assert sorted(seen) == [0, 1, 2] and not np.isnan(eng.finish_s).any()
    assert eng.finish_s[2] >= 1e-3 and eng.n_events > 0
    timeline = eng.timeline()
    assert timeline is None or set(timeline) == {"t_s", "dt_s", "util"}


@pytest.mark.parametrize("name", NAMES)
def test_advance_to_never_skips_an_event(name):
    eng = ENGINES[name](LINKS)
    eng.add_flows(*routes_to_csr([[0]]), [1e-3], [1e6])
    eng.advance_to(5e-4)
    assert eng.now == 5e-4
    with pytest.raises(TopoplanError, match="would skip the event"):
        eng.advance_to(1.0)


@pytest.mark.parametrize("name", NAMES)
def test_bad_flows_are_refused(name):
    eng = ENGINES[name](LINKS)
    with pytest.raises(TopoplanError, match=r"link id out of range"):
        eng.add_flows([0, 1], [7], [0.0], [1.0])
    with pytest.raises(TopoplanError, match=r"flow 0: bytes must be finite and >= 0"):
        eng.add_flows([0, 1], [0], [0.0], [-1.0])
    assert eng.n_flows == 0


@pytest.mark.parametrize("name", NAMES)
def test_the_engine_of_a_network_replays_a_trace(name):
    """for_network + add_messages through the reference replayer: a ring on a tree, and the engine's own
    contract holds for what the replay made of it."""
    topo = load_topology("paper003", ["kind=tree", "ocs=null"])
    net = build_network(topo, model={"model": name})
    eng = engine_class(name).for_network(net)
    assert isinstance(eng, ENGINES[name]) and len(eng.link_bytes()) == net.n_links
    trace = parse_spec("ring:np=16,bytes=1MB,iters=2")
    rp = Replayer(trace, net, sequential(16, topo))
    assert type(rp.engine) is ENGINES[name]
    res = rp.run()
    assert res.n_messages == 32 and res.makespan_s > 0 and res.link_bytes.sum() > 32e6 - 1
    assert not np.isnan(rp.engine.finish_s).any()


@pytest.mark.parametrize("name", NAMES)
def test_messages_on_a_network_never_beat_their_links(name):
    """add_messages adds the network's own per-route costs: a message never finishes before its links' latencies
    and its bytes over the slowest link; the max-min engine on a route without switches (intra-node) is exact."""
    topo = load_topology("paper003", ["kind=tree", "ocs=null"])
    net = build_network(topo, model={"model": name})
    eng = engine_class(name).for_network(net)
    ptr, links = net.eps_routes([0, 0], [1, 16])
    eng.add_messages(net, ptr, links, np.zeros(2), np.array([1e6, 1e6]))
    eng.run()
    for k in range(2):
        route = links[ptr[k]:ptr[k + 1]]
        floor = float(net.latency_s[route].sum() + 1e6 / net.bw_Bps[route].min())
        assert eng.finish_s[k] >= floor * (1 - 1e-12)
