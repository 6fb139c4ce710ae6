"""Calibration runs on the emulated cluster: one way, both ways and a ring, each against the ideal.

Each run moves ``size_B`` bytes per rank over node links under one switch (no uplink involved), with
the same launcher, transport settings and idle library as the real runs. The ideal time is
``size_B / (node link bandwidth / scale)``: a link carries each direction at its full rate, so both
ways and the ring take as long as one way. What the runs measure against the ideal is the cost of the
stack itself (headers, TCP's start, Open MPI's protocol), which every later figure carries:

- ``one_way``: rank 0 sends to rank 1; ``goodput_Bps`` (scaled back) and ``overhead`` = 1 - goodput
  / bandwidth, the TCP/IP and MPI cost of one shaped link;
- ``both_ways``: ranks 0 and 1 send to each other at once (one TCP connection per peer pair would
  serialize them; :data:`topoplan.emulate.launch.TRANSPORT` gives each direction its own);
- ``ring``: every rank sends to its right neighbour and receives from its left one.
"""

from __future__ import annotations

from topoplan.core.errors import TopoplanError
from topoplan.traffic.generators import ring
from topoplan.traffic.trace import Trace

__all__ = ["CALIBRATION_BYTES", "calibration_traces", "calibration_nodes", "summarize"]

# Moves in about 0.3 s on a default-scale node link: long against TCP's start and a launch's jitter.
CALIBRATION_BYTES = 2_000_000


def calibration_nodes(topo, n: int = 4) -> list:
    """The nodes the calibration runs on: up to ``n`` nodes of the first switch with at least two.

    Nodes with the most common link bandwidth are taken (not the fatter links of OCS nodes), so the ideal of
    every run is one link's.

    Examples
    --------
    >>> from topoplan.core.topology import TreeTopology, OCSConfig
    >>> calibration_nodes(TreeTopology(kind="tree", nodes_per_switch=(1, 3)))
    [1, 2, 3]
    >>> calibration_nodes(TreeTopology(kind="hybrid", nodes_per_switch=(3, 3), ocs=OCSConfig(nodes=(0, 3),
    ...                   bw_Bps=1e9, latency_s=0, node_link_bw_Bps=2.5e9)))
    [1, 2]
    """
    import numpy as np

    bw = topo.node_link_bw()
    values, counts = np.unique(bw, return_counts=True)
    common = values[np.argmax(counts)]
    sw = topo.node_switch().tolist()
    for s in range(topo.n_switches):
        nodes = [v for v, k in enumerate(sw) if k == s and bw[v] == common]
        if len(nodes) >= 2:
            return nodes[:n]
    raise TopoplanError("calibration needs a switch with two nodes of the same link bandwidth")


def calibration_traces(n_ring: int, size_B: float = CALIBRATION_BYTES) -> dict:
    """The three calibration traces: ``{"one_way": Trace, "both_ways": Trace, "ring": Trace}``.

    Examples
    --------
    >>> t = calibration_traces(3, 1000)
    >>> t["one_way"].op_counts(), t["both_ways"].op_counts(), t["ring"].n_ranks
    ({'send': 1, 'recv': 1}, {'isend': 2, 'irecv': 2, 'waitall': 2}, 3)
    """
    one = Trace.from_records([(0, "send", 1, size_B, -1, 2, 0.0, 0.0, -1, 0),
                              (1, "recv", 0, size_B, -1, 2, 0.0, 0.0, -1, 0)], 2, source="calibration one way")
    both = Trace.from_records([(r, op, 1 - r, size_B, -1, 2, 0.0, 0.0, -1, 0)
                               for r in (0, 1) for op in ("irecv", "isend")]
                              + [(r, "waitall", -1, 0, -1, 2, 0.0, 0.0) for r in (0, 1)], 2,
                              source="calibration both ways")
    out = {"one_way": one, "both_ways": both}
    if n_ring >= 3:
        out["ring"] = ring(n_ring, size_B)
    return out


def summarize(name: str, measured_s: float, size_B: float, bw_Bps: float) -> dict:
    """One calibration row: measured time (scaled back), the ideal, their ratio, goodput and overhead.

    Examples
    --------
    >>> row = summarize("one_way", 0.002, 2e6, 1.25e9)
    >>> row["ideal_s"], row["ratio"], row["goodput_Bps"], round(row["overhead"], 3)
    (0.0016, 1.25, 1000000000.0, 0.2)
    """
    ideal = float(size_B) / float(bw_Bps)
    goodput = float(size_B) / measured_s if measured_s > 0 else float("nan")
    return {"run": name, "bytes": float(size_B), "measured_s": float(measured_s), "ideal_s": ideal,
            "ratio": measured_s / ideal, "goodput_Bps": goodput, "overhead": 1.0 - goodput / float(bw_Bps)}
