"""Relay forwarding models: the pipelined relay against a chunk-by-chunk simulation of the same relay."""

import numpy as np
import pytest

from topoplan.core.errors import TopoplanError
from topoplan.core.placement import sequential
from topoplan.core.topology_io import topology_from_dict
from topoplan.traffic.trace import Trace
from topoplan.sim.maxmin import FlowEngine
from topoplan.sim.simmodel import SimModel
from topoplan.sim.network import build_network
from topoplan.sim.replay import replay
from topoplan.sim.run import simulate

# 2 switches x 4 nodes, 1 GB/s node links, 2 GB/s OCS, no latency, tiny MTU: only bandwidth and relays count
HYBRID = {"kind": "hybrid", "switches": 2, "nodes_per_switch": 4, "cores_per_node": 1,
          "eps": {"down_bw": "8Gbps", "up_bw": "8Gbps", "down_latency": "0ns", "up_latency": "0ns", "mtu": "1B"},
          "node": {"intra_bw": "8Gbps", "intra_latency": "0ns"},
          "ocs": {"nodes": [0, 4], "bw": "16Gbps", "latency": "0ns"}}
PLAN = {"circuits": [[0, 4]], "forwarding": {str(k): {"1": 0} for k in (1, 2, 3)} | {"0": {"1": 4}}}


def chunked_makespan(topo, plan, msgs, chunk_B):
    """Each message moves chunk by chunk through its store-and-forward relay chain: chunk j enters segment
    s once it has crossed segment s-1 and chunk j-1 has left segment s (one chunk in flight per hop), every
    chunk a max-min flow. Returns each message's finish time."""
    net = build_network(topo, plan, model=SimModel(relay="store-and-forward"))
    eng = FlowEngine(net.linkset())
    routes = []
    for a, b, n in msgs:
        msg_ptr, _, _, rptr, rlinks = net.message_segments([a], [b], [n])
        routes.append([rlinks[rptr[s]:rptr[s + 1]] for s in range(msg_ptr[1])])
    k = [int(np.ceil(n / chunk_B)) for _, _, n in msgs]
    size = [[min(chunk_B, n - j * chunk_B) for j in range(kk)] for (_, _, n), kk in zip(msgs, k)]
    crossed = [[0] * len(r) for r in routes]      # chunks that finished segment s
    busy = [[False] * len(r) for r in routes]
    owner, finish = {}, [np.nan] * len(msgs)

    def launch(m, t):
        for s in range(len(routes[m])):
            j = crossed[m][s]
            avail = k[m] if s == 0 else crossed[m][s - 1]
            if not busy[m][s] and j < avail:
                r = routes[m][s]
                fid = int(eng.add_flows([0, len(r)], r, [t], [size[m][j]])[0])
                owner[fid] = (m, s)
                busy[m][s] = True

    for m in range(len(msgs)):
        launch(m, 0.0)
    while True:
        t, done = eng.run_until_next_event()
        if t == np.inf:
            break
        for fid in done.tolist():
            m, s = owner.pop(fid)
            busy[m][s] = False
            crossed[m][s] += 1
            if s == len(routes[m]) - 1 and crossed[m][s] == k[m]:
                finish[m] = t
        for m in range(len(msgs)):
            launch(m, t)
    return np.array(finish)


def bulk(msgs, n_ranks=8):
    recs = []
    for a, b, n in msgs:
        recs.append((a, "isend", b, n, -1, n_ranks, 0.0, 0.0, -1, 0))
        recs.append((b, "irecv", a, n, -1, n_ranks, 0.0, 0.0, -1, 0))
    for r in range(n_ranks):
        recs.append((r, "waitall", -1, 0, -1, n_ranks, 0.0, 0.0, -1, -1))
    return Trace.from_records(recs, n_ranks)


@pytest.mark.parametrize("msgs", [
    [(1, 5, 4 * 2 ** 20)],                                           # one relayed message (two relays)
    [(1, 5, 4 * 2 ** 20), (2, 6, 4 * 2 ** 20), (3, 7, 2 * 2 ** 20)],  # three share the relays' links
    [(1, 5, 4 * 2 ** 20), (0, 6, 4 * 2 ** 20), (2, 1, 4 * 2 ** 20)],  # the relay's own traffic and local traffic
], ids=["one", "shared-relay", "mixed"])
def test_pipelined_relay_agrees_with_chunk_by_chunk_simulation(msgs):
    topo = topology_from_dict(HYBRID)
    errors = []
    for chunk_B in (262144.0, 65536.0, 16384.0):
        expected = chunked_makespan(topo, PLAN, msgs, chunk_B).max()
        got = simulate(topo, bulk(msgs), sequential(8, topo), circuits=PLAN, threshold_B=1.0,
                       model=SimModel(relay="pipelined", relay_chunk_B=chunk_B))["makespan_s"]
        errors.append(abs(got - expected) / expected)
    # the flow model converges to the chunked relay as messages get more chunks (8-32, 32-64, 128-256)
    assert errors[1] < 0.03 and errors[2] < 0.01
    assert errors[2] <= errors[1] + 1e-6 and errors[1] <= errors[0] + 1e-6
    saf = simulate(topo, bulk(msgs), sequential(8, topo), circuits=PLAN, threshold_B=1.0,
                   model=SimModel(relay="store-and-forward"))
    assert saf["makespan_s"] > 1.2 * expected  # whole-message relays do not overlap their hops


def test_pipelined_relay_exact_for_one_message_on_equal_links():
    """On links of one speed, n bytes in k chunks through two relays take (k + 2) chunk times in both models."""
    doc = dict(HYBRID, ocs=dict(HYBRID["ocs"], bw="8Gbps"))
    topo = topology_from_dict(doc)
    n, c = 64 * 65536.0, 65536.0
    expected = chunked_makespan(topo, PLAN, [(1, 5, n)], c)[0]
    assert expected == pytest.approx((64 + 2) * c / 1e9, rel=1e-6)
    got = simulate(topo, bulk([(1, 5, n)]), sequential(8, topo), circuits=PLAN, threshold_B=1.0)
    assert got["makespan_s"] == pytest.approx(expected, rel=1e-6)


def test_model_is_recorded_and_store_and_forward_is_the_papers_relay():
    topo = topology_from_dict(HYBRID)
    tr = bulk([(1, 5, 1e9)])
    pip = simulate(topo, tr, sequential(8, topo), circuits=PLAN, threshold_B=1.0)
    saf = simulate(topo, tr, sequential(8, topo), circuits=PLAN, threshold_B=1.0, model={"relay": "store-and-forward"})
    assert pip["sim_model"] == {"model": "maxmin", "relay": "pipelined", "relay_chunk_B": 65536.0}
    assert saf["sim_model"]["relay"] == "store-and-forward"
    # 1 -> 0 at 1 GB/s, 0 => 4 at 2 GB/s, 4 -> 5 at 1 GB/s, one after the other
    assert saf["makespan_s"] == pytest.approx(1.0 + 0.5 + 1.0, rel=1e-6)
    assert pip["makespan_s"] == pytest.approx(1.0 + 65536 / 2e9 + 65536 / 1e9, rel=1e-6)
    # the relayed bytes cross the same links either way
    assert pip["bytes_by_link_class"] == pytest.approx(saf["bytes_by_link_class"])


@pytest.mark.parametrize("options, match", [
    ({"relay": "cut-through"}, "field 'relay': choose one of pipelined, store-and-forward"),
    ({"model": "simgrid"}, "field 'model': choose one of maxmin, paper"),
    ({"relay_chunk_B": 0}, "field 'relay_chunk_B': must be at least 1 byte"),
    ({"relay_chunk_B": "big"}, "field 'relay_chunk_B': expected a size"),
    ({"paper_contention": "switch"}, "field 'paper_contention': choose one of link, device"),
    ({"paper_contention": "device"}, "field 'paper_contention': applies to model 'paper' only"),
    ({"paper_tie_seed": 1}, "field 'paper_tie_seed': applies to model 'paper' only"),
    ({"model": "paper", "paper_tie_seed": -1}, "field 'paper_tie_seed': expected an integer >= 0"),
    ({"model": "paper", "paper_tie_seed": "2"}, "field 'paper_tie_seed': expected an integer >= 0"),
    ({"relay_chunk": 4096}, "unknown simulator model option 'relay_chunk'"),
])
def test_bad_model_options_are_refused(options, match):
    with pytest.raises(TopoplanError, match=match):
        SimModel.from_options(**options)


def test_relay_positions_only_inside_pipelined_relay_routes():
    topo = topology_from_dict(HYBRID)
    pip = build_network(topo, PLAN)
    ptr, links = pip.message_segments([1, 1, 0], [5, 2, 1], [1e6, 1e6, 1e6])[3:]
    pos = pip.relay_positions(ptr, links)
    per_route = [pos[ptr[i]:ptr[i + 1]].tolist() for i in range(3)]
    assert per_route == [[False, False, True, True, False], [False, False], [False, False]]
    saf = build_network(topo, PLAN, model=SimModel(relay="store-and-forward"))
    ptr, links = saf.message_segments([1], [5], [1e6])[3:]
    assert not saf.relay_positions(ptr, links).any() and len(ptr) == 4


def test_replay_engines_agree_under_both_relay_models():
    from topoplan.traffic.sources import load_source

    topo = topology_from_dict(dict(HYBRID, switches=2, nodes_per_switch=4, cores_per_node=2))
    trace, _ = load_source("npb:kernel=cg,class=S,np=16,iters=1")
    for relay in ("pipelined", "store-and-forward"):
        net = build_network(topo, PLAN, threshold_B=1000.0, model={"relay": relay})
        a = replay(trace, net, sequential(16, topo), method="compiled")
        b = replay(trace, net, sequential(16, topo), method="python")
        assert a.makespan_s == pytest.approx(b.makespan_s, rel=1e-9)
        assert a.link_bytes == pytest.approx(b.link_bytes)


def test_simulate_cli_names_and_switches_the_relay_model(run_cli, tmp_path):
    import json

    base = ("simulate", "-t", "paper003", "-T", "neighbor2d:rows=16,cols=16,bytes=4MB,iters=1", "--json")
    plan = tmp_path / "plan.json"
    code, _, err = run_cli("circuits", "-t", "paper003", "-T", "neighbor2d:rows=16,cols=16,bytes=4MB,iters=1",
                           "-m", "greedy", "-o", str(plan))
    assert code == 0, err
    out = {}
    for relay in ("pipelined", "store-and-forward"):
        code, text, err = run_cli(*base, "--circuits", str(plan), "--relay", relay)
        assert code == 0, err
        out[relay] = json.loads(text)
        assert out[relay]["sim_model"]["relay"] == relay
    assert out["store-and-forward"]["makespan_s"] > 1.3 * out["pipelined"]["makespan_s"]
    code, _, err = run_cli(*base, "--relay", "cut-through")
    assert code == 2 and err.strip() == "error: --relay: choose one of pipelined, store-and-forward, got 'cut-through'"
