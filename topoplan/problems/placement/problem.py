"""The process-placement problem: put every rank on a node and a core so that traffic crosses few links.

A :class:`PlacementProblem` is built once from a topology and traffic. It
holds what every method needs as arrays: the symmetric rank graph (CSR,
both directions of a pair summed), the node capacities (cores), the switch
of every node, the node distance of the objective, and the link model of
:mod:`topoplan.analysis.linkload`. Objectives:

- ``hops`` -- hop-weighted volume: bytes x switch hops between the two
  ranks' nodes (:meth:`topology.hop_matrix`), summed over all messages;
- ``congestion`` -- the congestion bound: max over directed links of
  bytes / bandwidth under the topology's static routing (seconds);
- ``inter-switch`` -- the bytes crossing between edge switches (the
  papers' CommPattern objective, 003 Table 2).

:func:`solve` runs one method of :data:`METHODS` (the registry of
:mod:`topoplan.problems.placement.registry`; the methods register themselves)
and returns a validated :class:`topoplan.problems.result.PlanResult` whose plan is
``rank_to_node`` and ``rank_to_slot``; :func:`placement_metrics` scores any
placement with every objective (plus large/small inter-switch bytes).

Examples
--------
>>> from topoplan.core.topology_io import load_topology
>>> from topoplan.traffic.sources import load_traffic
>>> prob = PlacementProblem.build(load_topology("paper003"),
...                               load_traffic("neighbor2d:rows=16,cols=16,bytes=4MB,iters=5"))
>>> res = solve(prob, method="sequential")
>>> res.metrics["inter_switch_bytes"]
1920000000.0
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from topoplan.analysis.switches import default_threshold
from topoplan.core import deadline
from topoplan.core.errors import TopoplanError
from topoplan.analysis.linkload import link_graph
from topoplan.core.fingerprint import fingerprint
from topoplan.core.placement import Placement, from_nodes
from topoplan.problems.placement.registry import METHODS, STARTS
from topoplan.problems.result import check_inputs, PlanResult, simulation_cost_s, solve_with, strict_options
from topoplan.core.topology import GraphTopology, TorusTopology, TreeTopology
from topoplan.core.topology_io import cores_hint
from topoplan.sim.simmodel import SimModel
from topoplan.sim.replay import bulk_trace
from topoplan.sim.run import simulate_plan
from topoplan.problems.placement import refine

__all__ = ["PlacementProblem", "OBJECTIVES", "METHODS", "STARTS", "solve", "placement_metrics", "result_from",
           "validate_result", "to_placement", "simulated_time", "initial_placement", "default_starts",
           "kahip_cost_s", "metis_run_cost_s", "KAHIP_START_MAX_EDGES", "start_cost_s", "GREEDY_S_PER_EDGE",
           "CHEAPEST_START"]

OBJECTIVES = ("hops", "congestion", "inter-switch")


@dataclass
class PlacementProblem:
    """Topology, traffic, objective and threshold, with cached arrays (see the module docstring).

    Parameters
    ----------
    topology : Topology
        Any topology kind.
    traffic : Traffic
        The traffic of the ranks to place.
    objective : str, optional
        One of :data:`OBJECTIVES`.
    threshold_B : float, optional
        Large-message threshold of the large/small split in the metrics.

    Build one with :meth:`build`, which checks the inputs.

    See Also
    --------
    solve : place the ranks.
    placement_metrics : every score of a placement.

    References
    ----------
    003 section 4.1.3 and Table 2 (Sequential vs CommPattern placement, the
    bytes crossing switches); 000 and 001 place ranks by communication pattern
    with METIS as well.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.sources import load_traffic
    >>> prob = PlacementProblem.build(load_topology("paper003"),            # 64 nodes x 4 cores, 4 switches
    ...                               load_traffic("neighbor2d:rows=16,cols=16,bytes=4MB"),
    ...                               objective="inter-switch")
    >>> prob.n_ranks, prob.n_nodes, prob.describe()["pairs"]
    (256, 64, 480)
    >>> prob.cost(np.arange(256) // 4)      # sequential: bytes between switches
    384000000.0
    """

    topology: Any
    traffic: Any
    objective: str = "hops"
    threshold_B: float = 8192.0
    _cache: dict = field(default_factory=dict, repr=False, compare=False)
    steps: Any = field(default=None, repr=False, compare=False)   # the trace's steps (joint's circuit stage)

    def fingerprint(self) -> dict[str, str]:
        """Fingerprints of the topology and traffic this problem was built from (a plan's ``inputs``)."""
        return fingerprint(topology=self.topology, traffic=self.traffic)

    @classmethod
    @strict_options("PlacementProblem.build")
    def build(cls, topology, traffic, placement=None, *, objective: str = "hops",
              threshold_B: float | None = None, steps=None) -> "PlacementProblem":
        """Check that the ranks fit the topology's cores and fix the large-message threshold.

        The builder shape of every problem: ``build(topology, traffic, placement=None, **options)``;
        an option it does not know is refused with the known ones.

        Parameters
        ----------
        topology : Topology
            Any topology (tree, fat-tree, hybrid, torus/mesh, graph).
        traffic : Traffic
            The traffic of the ranks.
        placement : None
            Must be None: the placement is what this problem computes (a method that improves
            a given placement takes it as its ``init`` option: ``anneal``, ``joint``, ``ilp``).
        objective : str, optional
            ``hops`` (default), ``congestion`` or ``inter-switch``.
        threshold_B : float, optional
            Large-message threshold for the large/small split (default: the OCS
            bandwidth-delay product on a hybrid, else 8192 B).
        steps : topoplan.sim.steps.Steps, optional
            The steps of the trace the traffic comes from: ``joint`` then scores its circuits by the step
            time (:mod:`topoplan.problems.circuits.steps`) instead of the one-bulk-phase bound.

        Returns
        -------
        PlacementProblem

        Raises
        ------
        TopoplanError
            If the ranks do not fit the cores, a placement is given, the
            objective is unknown, or an option is unknown (naming the known ones).

        Examples
        --------
        >>> from topoplan.core.topology_io import load_topology
        >>> from topoplan.traffic.sources import load_traffic
        >>> topo, traffic = load_topology("paper003"), load_traffic("neighbor2d:rows=8,cols=8,bytes=1MB")
        >>> PlacementProblem.build(topo, traffic).objective
        'hops'
        >>> PlacementProblem.build(topo, traffic, objective="bytes")
        Traceback (most recent call last):
        ...
        topoplan.core.errors.TopoplanError: field 'objective': unknown objective 'bytes' (choose from hops, congestion, inter-switch)
        """
        check_inputs(topology, traffic, traffic_optional=True)   # (None: said below)
        topo = topology
        if traffic is None:
            raise TopoplanError("field 'traffic': a placement problem needs the traffic of the ranks to place")
        if placement is not None:
            raise TopoplanError("field 'placement': a placement problem computes the placement; give a starting "
                                "placement to a method as its init option (anneal, joint, ilp)")
        if objective not in OBJECTIVES:
            raise TopoplanError(f"field 'objective': unknown objective {objective!r} (choose from {', '.join(OBJECTIVES)})")
        cap = int(topo.node_cores().sum())
        if traffic.n_ranks < 1:
            raise TopoplanError("traffic: no ranks to place")
        if traffic.n_ranks > cap:
            raise TopoplanError(f"{traffic.n_ranks} ranks do not fit topology {topo.name or topo.kind}: "
                                f"{topo.n_nodes} nodes with {cap} cores{cores_hint(topo)}")
        thr = default_threshold(topo) if threshold_B is None else float(threshold_B)
        if not thr >= 0:
            raise TopoplanError(f"field 'threshold_B': must be non-negative, got {threshold_B}")
        if steps is not None and steps.n_ranks != traffic.n_ranks:
            raise TopoplanError(f"field 'steps': found in a trace of {steps.n_ranks} ranks, the traffic has "
                                f"{traffic.n_ranks}")
        return cls(topo, traffic, objective, thr, steps=steps)

    # -- sizes --------------------------------------------------------------
    @property
    def n_ranks(self) -> int:
        return int(self.traffic.n_ranks)

    @property
    def n_nodes(self) -> int:
        return int(self.topology.n_nodes)

    @property
    def cores(self) -> np.ndarray:
        """Cores of every node (cached, read-only)."""
        return self._frozen("cores", self.topology.node_cores)

    @property
    def node_switch(self) -> np.ndarray:
        """Edge switch of every node (cached, read-only)."""
        return self._frozen("node_switch", self.topology.node_switch)

    def _frozen(self, key, make) -> np.ndarray:
        if key not in self._cache:
            a = np.array(make(), dtype=np.int64)
            a.setflags(write=False)
            self._cache[key] = a
        return self._cache[key]

    @property
    def is_tree(self) -> bool:
        return isinstance(self.topology, TreeTopology)

    # -- the rank graph -------------------------------------------------------
    def graph(self) -> sp.csr_matrix:
        """Symmetric rank x rank bytes (``W[u, v]`` = bytes u->v plus v->u), no diagonal, CSR."""
        if "W" not in self._cache:
            t, n = self.traffic, self.n_ranks
            keep = t.src != t.dst
            w = sp.coo_matrix((t.bytes[keep].astype(np.float64), (t.src[keep], t.dst[keep])), shape=(n, n)).tocsr()
            w = (w + w.T).tocsr()
            w.sum_duplicates()
            w.eliminate_zeros()
            w.sort_indices()
            self._cache["W"] = w
        return self._cache["W"]

    def edges(self):
        """Undirected weighted edges ``(u, v, bytes)`` with ``u < v`` (both directions summed)."""
        if "edges" not in self._cache:
            w = sp.triu(self.graph(), 1).tocoo()
            self._cache["edges"] = (w.row.astype(np.int64), w.col.astype(np.int64), w.data.astype(np.float64))
        return self._cache["edges"]

    def pairs(self):
        """Directed rank pairs with traffic ``(src, dst, bytes)`` (self-messages dropped)."""
        if "pairs" not in self._cache:
            s, d, b, _ = self.traffic.matrix()
            keep = (s != d) & (b > 0)
            self._cache["pairs"] = (s[keep], d[keep], b[keep].astype(np.float64))
        return self._cache["pairs"]

    # -- distances and links ----------------------------------------------------
    def hops(self, a, b) -> np.ndarray:
        """Switch hops between nodes ``a[i]`` and ``b[i]`` (as :meth:`hop_matrix`, without the n x n matrix)."""
        a = np.asarray(a, dtype=np.int64)
        b = np.asarray(b, dtype=np.int64)
        t = self.topology
        if isinstance(t, TreeTopology):
            sw = self.node_switch
            h = np.where(sw[a] == sw[b], 1, 3)
        elif isinstance(t, TorusTopology):
            c = self._coords()
            h = np.ones(np.broadcast(a, b).shape, dtype=np.int64)
            for d, k in enumerate(t.dims):
                diff = np.abs(c[a, d] - c[b, d])
                h = h + (np.minimum(diff, k - diff) if t.wrap[d] else diff)
        elif isinstance(t, GraphTopology):
            if "swhops" not in self._cache:
                self._cache["swhops"] = t.switch_hops()
            sh = self._cache["swhops"]
            sw = self.node_switch
            h = sh[sw[a], sw[b]] + 1
            if (h <= 0).any():
                raise TopoplanError(f"topology {t.name or 'graph'}: some hosts are not connected")
        else:
            raise TopoplanError(f"no hop distance for topology kind {getattr(t, 'kind', '?')!r}")
        return np.where(a == b, 0, h)

    def _coords(self):
        if "coords" not in self._cache:
            self._cache["coords"] = self.topology.coords()
        return self._cache["coords"]

    def distance(self, a, b) -> np.ndarray:
        """The pair cost of the linear objectives: hops, or 1 across switches for ``inter-switch``."""
        if self.objective == "inter-switch":
            sw = self.node_switch
            return (sw[np.asarray(a)] != sw[np.asarray(b)]).astype(np.float64)
        return self.hops(a, b).astype(np.float64)

    def links(self):
        """The :class:`topoplan.analysis.linkload.LinkGraph` of the topology (EPS part on a hybrid)."""
        if "links" not in self._cache:
            self._cache["links"] = link_graph(self.topology)
        return self._cache["links"]

    # -- scores -------------------------------------------------------------------
    def hop_bytes(self, rank_to_node) -> float:
        """Hop-weighted volume: sum over messages of bytes x hops between the ranks' nodes."""
        node = np.asarray(rank_to_node, dtype=np.int64)
        u, v, w = self.edges()
        return float(np.dot(w, self.hops(node[u], node[v])))

    def inter_switch_bytes(self, rank_to_node) -> float:
        node = np.asarray(rank_to_node, dtype=np.int64)
        u, v, w = self.edges()
        sw = self.node_switch
        return float(w[sw[node[u]] != sw[node[v]]].sum())

    def link_loads(self, rank_to_node) -> np.ndarray:
        s, d, w = self.pairs()
        node = np.asarray(rank_to_node, dtype=np.int64)
        return self.links().loads(node[s], node[d], w)

    def congestion(self, rank_to_node) -> float:
        """The congestion bound (s) of a node assignment."""
        return self.links().bound(self.link_loads(rank_to_node))

    def cost(self, rank_to_node) -> float:
        """The problem's objective for a node assignment."""
        if self.objective == "congestion":
            return self.congestion(rank_to_node)
        if self.objective == "inter-switch":
            return self.inter_switch_bytes(rank_to_node)
        return self.hop_bytes(rank_to_node)

    def packed_node_counts(self) -> np.ndarray:
        """Ranks per node when filling nodes in order (the node set every partitioning method uses)."""
        cores = self.cores
        filled = np.minimum(cores, np.maximum(0, self.n_ranks - np.concatenate([[0], np.cumsum(cores)[:-1]])))
        return filled.astype(np.int64)

    def describe(self) -> dict:
        return {"ranks": self.n_ranks, "nodes": self.n_nodes, "switches": int(self.topology.n_switches),
                "objective": self.objective, "threshold_B": self.threshold_B,
                "traffic": getattr(self.traffic, "name", ""), "pairs": int(len(self.edges()[0]))}


def placement_metrics(problem: PlacementProblem, placement: Placement) -> dict:
    """Every score of a placement: inter-switch bytes (large/small), hop-weighted bytes, congestion bound.

    Parameters
    ----------
    problem : PlacementProblem
    placement : Placement
        Places at least the problem's ranks.

    Returns
    -------
    dict
        ``inter_switch_bytes``, ``inter_switch_large_bytes``, ``inter_switch_small_bytes``,
        ``intra_node_bytes``, ``hop_weighted_bytes``, ``congestion_bound_s``, ``bottleneck``
        (the busiest link's name) and ``nodes_used``.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.sources import load_traffic
    >>> prob = PlacementProblem.build(load_topology("paper003"),            # 64 nodes x 4 cores, 4 switches
    ...                               load_traffic("neighbor2d:rows=16,cols=16,bytes=4MB"),
    ...                               objective="inter-switch")
    >>> from topoplan.core.placement import sequential
    >>> m = placement_metrics(prob, sequential(256, prob.topology))
    >>> m["inter_switch_bytes"], m["hop_weighted_bytes"], m["nodes_used"]
    (384000000.0, 3072000000.0, 64)
    """
    node = placement.rank_to_node[:problem.n_ranks]
    # the sums of topoplan.analysis.switches.analyze, per message (its switch x switch matrices are dense:
    # 2 GB each on a 16,384-router torus)
    tr = problem.traffic
    a, b = node[tr.src], node[tr.dst]
    sw = problem.node_switch
    cross = sw[a] != sw[b]
    large = tr.msg_bytes >= problem.threshold_B
    by = tr.bytes
    loads = problem.link_loads(node)
    g = problem.links()
    busiest = g.busiest(loads, 1)
    return {"inter_switch_bytes": float(by[cross].sum()),
            "inter_switch_large_bytes": float(by[cross & large].sum()),
            "inter_switch_small_bytes": float(by[cross & ~large].sum()),
            "intra_node_bytes": float(by[(a == b) & (tr.src != tr.dst)].sum()),
            "hop_weighted_bytes": problem.hop_bytes(node),
            "congestion_bound_s": g.bound(loads),
            "bottleneck": busiest[0]["link"] if busiest else None,
            "nodes_used": int(len(np.unique(node)))}


def slots_for(problem: PlacementProblem, rank_to_node) -> np.ndarray:
    """Consecutive cores on every node, in rank order."""
    return from_nodes(rank_to_node, problem.topology).rank_to_slot


def result_from(problem: PlacementProblem, rank_to_node, *, status: str = "heuristic", bound: float | None = None,
                objective: float | None = None, rank_to_slot=None, message: str = "", extra_plan=None,
                extra_metrics=None, options=None) -> PlanResult:
    """Wrap a node assignment as a :class:`PlanResult` (slots consecutive per node unless given), with metrics.

    The methods' common last step; :func:`solve` then fills method, seed and wall time.

    Parameters
    ----------
    problem : PlacementProblem
    rank_to_node : array_like of int
        Node of every rank.
    status : str, optional
        One of :data:`topoplan.problems.result.STATUSES`.
    bound : float, optional
        A proven lower bound on the objective.
    objective : float, optional
        Default: the problem's objective of the placement.
    rank_to_slot : array_like of int, optional
        Default: consecutive cores per node in rank order.
    message : str, optional
    extra_plan, extra_metrics, options : dict, optional
        Added to the plan (``joint``'s circuits), the metrics and the options.

    Returns
    -------
    PlanResult

    Raises
    ------
    TopoplanError
        If the placement is invalid for the topology.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.sources import load_traffic
    >>> prob = PlacementProblem.build(load_topology("paper003"),            # 64 nodes x 4 cores, 4 switches
    ...                               load_traffic("neighbor2d:rows=16,cols=16,bytes=4MB"),
    ...                               objective="inter-switch")
    >>> res = result_from(prob, np.arange(256) // 4)
    >>> res.objective, res.plan["rank_to_slot"][:6]
    (384000000.0, [0, 1, 2, 3, 0, 1])
    """
    node = np.asarray(rank_to_node, dtype=np.int64)
    slot = slots_for(problem, node) if rank_to_slot is None else np.asarray(rank_to_slot, dtype=np.int64)
    pl = Placement(node, slot)
    pl.validate(problem.topology, where="placement plan")
    m = placement_metrics(problem, pl)
    if extra_metrics:
        m.update(extra_metrics)
    if objective is None:
        objective = {"hops": m["hop_weighted_bytes"], "congestion": m["congestion_bound_s"],
                     "inter-switch": m["inter_switch_bytes"]}[problem.objective]
    plan = pl.to_dict()
    if extra_plan:
        plan.update(extra_plan)
    opts = {"objective": problem.objective, "threshold_B": problem.threshold_B}
    opts.update(options or {})
    return PlanResult(method="", objective=float(objective), plan=plan, status=status, bound=bound, metrics=m,
                      message=message, options=opts)


def validate_result(problem: PlacementProblem, res: PlanResult) -> None:
    """Every rank placed once on a free core of an existing node.

    Parameters
    ----------
    problem : PlacementProblem
    res : PlanResult
        A placement method's result.

    Raises
    ------
    TopoplanError
        Naming the method, if the plan places another number of ranks or an invalid placement.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.sources import load_traffic
    >>> prob = PlacementProblem.build(load_topology("paper003"),            # 64 nodes x 4 cores, 4 switches
    ...                               load_traffic("neighbor2d:rows=16,cols=16,bytes=4MB"),
    ...                               objective="inter-switch")
    >>> res = solve(prob, "sequential")
    >>> validate_result(prob, res)
    >>> res.plan["rank_to_node"] = [0] * 256
    >>> validate_result(prob, res)
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: sequential plan: ranks 0 and 4 share node 0 slot 0
    """
    pl = to_placement(res)
    if pl.n_ranks != problem.n_ranks:
        raise TopoplanError(f"{res.method} plan: places {pl.n_ranks} ranks but the traffic has {problem.n_ranks}")
    pl.validate(problem.topology, where=f"{res.method} plan")


def to_placement(res) -> Placement:
    """The :class:`Placement` of a result (a :class:`PlanResult` or its JSON dict).

    Parameters
    ----------
    res : PlanResult or dict
        With ``rank_to_node`` and ``rank_to_slot``.

    Returns
    -------
    Placement

    Examples
    --------
    >>> to_placement({"rank_to_node": [0, 0, 1], "rank_to_slot": [0, 1, 0]}).rank_to_node.tolist()
    [0, 0, 1]
    """
    plan = res.plan if isinstance(res, PlanResult) else res
    return Placement(np.asarray(plan["rank_to_node"], dtype=np.int64), np.asarray(plan["rank_to_slot"], dtype=np.int64))


#: The share of a method's time limit each of its starts (:func:`initial_placement`) is given.
START_SHARE = 0.5
#: CPU seconds to compile the partitioners' refinement (:mod:`topoplan.problems.placement.refine`) when Numba's
#: cache does not have it: 15.5 CPU seconds measured (59 s of wall time at a load of 12 on 2 cores), kept at 20.
REFINE_COMPILE_S = 20.0
#: KaHIP is a default start (:func:`default_starts`) up to this many rank pairs with traffic. Its strong
#: configuration with perfect balance took 4-10 s on 16,000-pair graphs (4,096-rank geometric graph into
#: 128 parts, 2,048 ranks of random traffic), 35 s on the 65,000 pairs of 16,384-rank CG-like traffic,
#: 46 s on 4,096 ranks of random traffic (32,000 pairs) and over 300 s on 16,384 (shared 2-core machine).
KAHIP_START_MAX_EDGES = 20_000
#: The ``greedy`` start in CPU seconds per rank pair with traffic, measured on random traffic (8 messages a rank) at
#: a load of 10 on 2 cores: 0.04 s on 1,975 pairs (256 ranks), 0.22 s on 8,119, 0.76 s on 32,706; kept at 1.5 times.
GREEDY_S_PER_EDGE = 3.5e-5
#: The start a method falls back to when its time limit is reached before its starts (:func:`initial_placement`):
#: the cheapest valid placement.
CHEAPEST_START = "sequential"


def start_cost_s(problem: PlacementProblem, name: str) -> float:
    """Predicted CPU seconds of the start ``name`` before it may be cut short: ``greedy``
    (:data:`GREEDY_S_PER_EDGE`) and ``kahip`` (:func:`kahip_cost_s`) run to their end; METIS predicts each of its
    splits itself (:func:`topoplan.problems.placement.metis.recursive_map`); the others take no time to speak of.

    Parameters
    ----------
    problem : PlacementProblem
    name : str

    Returns
    -------
    float

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.sources import load_traffic
    >>> p = PlacementProblem.build(load_topology("paper003"), load_traffic("ring:np=256,bytes=1MB"))
    >>> start_cost_s(p, "greedy") > start_cost_s(p, "sequential") == 0.0
    True
    """
    n_edges = len(problem.edges()[0])
    return {"greedy": GREEDY_S_PER_EDGE * n_edges, "kahip": kahip_cost_s(n_edges)}.get(name, 0.0)


#: One METIS run of a split (partition, repair to exact sizes, refinement) in CPU seconds per rank pair with traffic
#: and per level of bisection (log2 of the parts), measured on random traffic (8 messages a rank) at a load of 10
#: on 2 cores: 7-9 us a pair into 2 parts, 21-29 us into 16, 32-43 us into 64 (256 to 4,096 ranks).
METIS_S_PER_EDGE_LEVEL = 8e-6
METIS_FIXED_S = 0.005


def metis_run_cost_s(n_edges: int, n_parts: int) -> float:
    """Predicted CPU seconds of one METIS run of a split of ``n_edges`` rank pairs into ``n_parts`` parts
    (:data:`METIS_S_PER_EDGE_LEVEL`); :func:`topoplan.problems.placement.metis.recursive_map` compares it with what its time limit leaves.

    Parameters
    ----------
    n_edges : int
    n_parts : int

    Returns
    -------
    float

    Examples
    --------
    >>> round(metis_run_cost_s(8119, 16), 2)     # 1,024 ranks of random traffic into 16 switches: 0.17 s measured
    0.26
    """
    return METIS_FIXED_S + METIS_S_PER_EDGE_LEVEL * n_edges * max(1.0, float(np.log2(max(n_parts, 1))))


def kahip_cost_s(n_edges: int) -> float:
    """Predicted seconds of the ``kahip`` start (strong mode, imbalance 0) on ``n_edges`` rank pairs,
    measured on random traffic: 1.6 s at 1,975 pairs, 10.6 s at 8,119 (growing as n^1.35).

    Parameters
    ----------
    n_edges : int

    Returns
    -------
    float

    Examples
    --------
    >>> round(kahip_cost_s(2000), 1), kahip_cost_s(200) < 0.1
    (1.6, True)
    """
    return 1.6 * (n_edges / 2000) ** 1.35


def default_starts(problem: PlacementProblem, method: str, time_limit: float | None = None) -> tuple[str, ...]:
    """The starts of ``method`` when its ``init`` is not given: :data:`STARTS` (every partitioner installed
    and ``greedy``), without ``kahip`` above :data:`KAHIP_START_MAX_EDGES` rank pairs or when its predicted
    time (:func:`kahip_cost_s`) exceeds a quarter of ``time_limit``, and only ``greedy`` when METIS's first
    split (:func:`metis_run_cost_s`) or, the partitioners' refinement not
    being compiled yet (a first run after an installation without ``make install``: :data:`REFINE_COMPILE_S`),
    its compilation does not fit in the starts' share of ``time_limit`` (:data:`START_SHARE`, at the share of
    a CPU the command is getting).

    Parameters
    ----------
    problem : PlacementProblem
    method : str
        ``anneal`` or ``ilp``.
    time_limit : float, optional
        The method's time limit (None: none).

    Returns
    -------
    tuple of str

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.sources import load_traffic
    >>> p = PlacementProblem.build(load_topology("paper003"), load_traffic("ring:np=8,bytes=1MB"))
    >>> default_starts(p, "anneal")[:2]
    ('metis', 'greedy')
    """
    starts = STARTS.get(method, ("metis",))
    n_edges = len(problem.edges()[0])
    if n_edges > KAHIP_START_MAX_EDGES or (time_limit is not None and kahip_cost_s(n_edges) > 0.25 * time_limit):
        starts = tuple(s for s in starts if s != "kahip")
    if time_limit is not None and "greedy" in starts:
        share_s = START_SHARE * time_limit
        # METIS could not make even its first split in time (every split would take its ranks in order), or every
        # partitioner refines its parts (topoplan.problems.placement.refine) and that would first compile
        if deadline.scaled(metis_run_cost_s(n_edges, problem.topology.n_switches)) > share_s or \
                (deadline.scaled(REFINE_COMPILE_S) > share_s and not refine_ready(problem)):
            starts = ("greedy",)
    return starts


def refine_ready(problem: PlacementProblem | None = None) -> bool:
    """Whether the partitioners' refinement runs without compiling first: ``problem``'s rank graph is refined by
    the interpreter (:func:`topoplan.problems.placement.refine.runs_interpreted`), or the compiled kernels are
    loaded in this process or in Numba's cache (:func:`topoplan.core.deadline.kernel_ready`).

    Examples
    --------
    >>> isinstance(refine_ready(), bool)
    True
    """
    if problem is not None and refine.runs_interpreted(problem.graph()):
        return True
    return deadline.kernel_ready(refine._refine) and deadline.kernel_ready(refine._repair)


def initial_placement(problem: PlacementProblem, init, seed, *, method: str,
                      exclude: tuple[str, ...] = (), time_limit: float | None = None) -> tuple[str, np.ndarray]:
    """The start a method's ``init`` option names: ``(name, rank_to_node)``.

    ``init`` is a placement method's name, several names (the best of their placements on the problem's
    objective; ties: the first), None (:func:`default_starts`), or a ``rank_to_node`` array (named
    ``given``). Methods in ``exclude`` (and ``method`` itself) cannot be starts.

    Parameters
    ----------
    problem : PlacementProblem
    init : str, sequence of str, None, or array_like of int
        The start.
    seed : int or None
        Seed of the start methods.
    method : str
        The method asking (named in errors; cannot start itself).
    exclude : tuple of str, optional
        Methods that cannot be starts.
    time_limit : float, optional
        The asking method's time limit, for the default starts (:func:`default_starts`); inside a command
        with a time limit each start is given :data:`START_SHARE` of it (METIS then keeps fewer runs of a
        split when time is short), a start predicted (:func:`start_cost_s`, at the share of a CPU the command
        is getting) to end past the command's deadline or the method's time is not run, and when none can,
        :data:`CHEAPEST_START` stands in.

    Returns
    -------
    name : str
        The start method's name, or ``"given"``.
    rank_to_node : numpy.ndarray of int64

    Raises
    ------
    TopoplanError
        For an unknown start, or a given array of the wrong size or invalid.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.sources import load_traffic
    >>> p = PlacementProblem.build(load_topology("paper003"), load_traffic("neighbor2d:rows=8,cols=8,bytes=1MB"))
    >>> initial_placement(p, ("sequential", "round-robin"), 0, method="anneal")[0]
    'sequential'
    """
    if init is None:
        init = default_starts(problem, method, time_limit)
    if isinstance(init, str) or (isinstance(init, (list, tuple)) and init and all(isinstance(x, str) for x in init)):
        names = [init] if isinstance(init, str) else list(init)
        allowed = [m for m in METHODS if m != method and m not in exclude]
        for name in names:
            if name not in allowed:
                raise TopoplanError(f"method {method}: field 'init': unknown start {name!r} "
                                    f"(a placement method: {', '.join(allowed)})")
        best = None
        # inside a command with a time limit (topoplan.core.deadline), a start may take at most START_SHARE of the
        # asking method's limit for what it can cut short (METIS's extra runs): the method's own search needs the
        # rest. Outside one, starts make all their runs, so a library call gives the same plan on any machine.
        start_limit = None if time_limit is None or not deadline.active() else START_SHARE * float(time_limit)
        # inside a command, the starts predicted to end within the method's time (what the deadline left it) and
        # before the deadline; the cheapest valid one if none is; no more once that time is over
        end = None if start_limit is None else time.perf_counter() + float(time_limit)

        def in_time(name: str) -> bool:
            cost_s = deadline.scaled(start_cost_s(problem, name))
            return deadline.fits(cost_s) and cost_s <= end - time.perf_counter()

        if end is not None:
            names = [n for n in names if in_time(n)] or [CHEAPEST_START]
        for name in names:
            if best is not None and end is not None and (time.perf_counter() >= end or not deadline.fits(0.0)):
                break
            node = np.asarray(METHODS[name](problem, time_limit=start_limit, seed=seed).plan["rank_to_node"],
                              dtype=np.int64)
            cost = problem.cost(node) if len(names) > 1 else 0.0
            if best is None or cost < best[0]:
                best = (cost, name, node)
        return best[1], best[2]
    node = np.asarray(init, dtype=np.int64)
    if node.shape != (problem.n_ranks,):
        raise TopoplanError(f"method {method}: field 'init': places {node.size} ranks, the traffic has "
                            f"{problem.n_ranks}")
    from_nodes(node, problem.topology).validate(problem.topology, where=f"method {method}: field 'init'")
    return "given", node


def solve(problem: PlacementProblem, method: str = "metis", *, time_limit: float | None = None,
          seed: int | None = 0, score: str = "bound", trace=None, sim_model=None, **options) -> PlanResult:
    """Place the ranks with ``method`` (one of :data:`METHODS`).

    Parameters
    ----------
    problem : :class:`PlacementProblem`.
    method : ``sequential``, ``round-robin``, ``random``, ``metis``, ``greedy``, ``anneal``, ``ilp``,
        ``joint`` (hybrid networks), ``kahip`` / ``scotch`` (when installed).
    time_limit : seconds (``anneal``, ``ilp``, ``joint``).
    seed : random seed (recorded in the result).
    score : ``bound`` (default): the method's placement for the problem's objective; ``simulated``: that
        placement or the placement of a heuristic it starts from (:func:`default_starts`), whichever simulates
        faster (``joint`` also picks its final plan among its start and improvements by simulated time).
        Inside a command with a deadline (:mod:`topoplan.core.deadline`) the candidates' simulations share
        its limit (:func:`topoplan.problems.result.solve_with`'s ``sim_cost``); without one, ``time_limit``
        is the method's own.
    trace : the MPI trace to simulate (default: the traffic as one bulk phase).
    sim_model : :class:`topoplan.sim.simmodel.SimModel` or its dict (default maxmin, pipelined relays).
    options : the method's own options (``METHODS.options(method)``, e.g. ``init='metis'`` and
        ``max_steps`` for ``anneal``); an option the method does not declare is refused, naming the
        known ones.

    Returns
    -------
    PlanResult
        ``plan`` = ``rank_to_node``, ``rank_to_slot`` (``joint``: also ``circuits``
        and ``forwarding``), ``objective`` = the problem's objective and
        ``metrics`` = :func:`placement_metrics` (and ``simulated_s`` with
        ``score='simulated'``). The plan is validated.

    Raises
    ------
    TopoplanError
        For an unknown method or option (naming the known ones), a bad
        ``time_limit``, ``seed`` or ``score``.

    See Also
    --------
    topoplan.problems.placement.registry.METHODS : the methods and their options.

    References
    ----------
    ``metis`` is the papers' CommPattern placement (003 section 4.1.3; 000 section 4).

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.sources import load_traffic
    >>> prob = PlacementProblem.build(load_topology("paper003"),            # 64 nodes x 4 cores, 4 switches
    ...                               load_traffic("neighbor2d:rows=16,cols=16,bytes=4MB"),
    ...                               objective="inter-switch")
    >>> [(m, solve(prob, m).objective) for m in ("sequential", "round-robin", "metis")]
    [('sequential', 384000000.0), ('round-robin', 1920000000.0), ('metis', 256000000.0)]
    >>> solve(prob, "anneal", max_step=50)
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: unknown option 'max_step' for placement method 'anneal'; known: init, batch, max_steps, t0, cycles
    """
    simulate = None
    if score == "simulated":
        def simulate(plan):
            return simulated_time(problem, plan, trace, sim_model)

        if method == "joint":
            options.update(final_pick="simulated", trace=trace, sim_model=sim_model)
    res = solve_with(METHODS, problem, method, time_limit=time_limit, seed=seed, validate=validate_result,
                     score=score, simulate=simulate, starts={m: default_starts(problem, m) for m in STARTS},
                     sim_cost=lambda: simulation_cost_s(trace if trace is not None else bulk_trace(problem.traffic)),
                     **options)
    if res.options.get("score") == "simulated":
        res.options["sim_model"] = SimModel.coerce(sim_model).to_dict()
    return res


def simulated_time(problem: PlacementProblem, plan: dict, trace=None, sim_model=None) -> float:
    """Makespan (s) of the plan in the simulator: the trace if given, else the traffic as one bulk phase.

    A plan with ``circuits``/``forwarding`` (``joint``) is simulated on the hybrid network with them;
    ``sim_model`` is the network model (:class:`topoplan.sim.simmodel.SimModel` or its dict).

    Parameters
    ----------
    problem : PlacementProblem
    plan : dict
        A plan with ``rank_to_node`` (``PlanResult.to_dict()``).
    trace : topoplan.traffic.trace.Trace, optional
    sim_model : SimModel or dict, optional

    Returns
    -------
    float
        Seconds.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.sources import load_traffic
    >>> prob = PlacementProblem.build(load_topology("paper003"),            # 64 nodes x 4 cores, 4 switches
    ...                               load_traffic("neighbor2d:rows=16,cols=16,bytes=4MB"),
    ...                               objective="inter-switch")
    >>> seq, cp = solve(prob, "sequential"), solve(prob, "metis")
    >>> round(simulated_time(prob, seq.to_dict()), 4), round(simulated_time(prob, cp.to_dict()), 4)
    (0.0512, 0.0256)
    """
    with_circuits = plan.get("circuits") is not None
    tr = trace if trace is not None else bulk_trace(problem.traffic,
                                                    threshold_B=problem.threshold_B if with_circuits else None)
    return float(simulate_plan(problem.topology, tr, plan,
                               threshold_B=problem.threshold_B if with_circuits else None,
                               model=sim_model)["makespan_s"])
