"""The circuit-assignment problem: what a hybrid EPS/OCS network must carry, at node level, and how to solve it.

A :class:`CircuitProblem` is built once from a hybrid topology, traffic, a
placement and the large-message threshold. It holds

- the topology as arrays (switch of every node, OCS nodes, optical ports,
  link bandwidths) and a fixed numbering of the directed links
  (the simulator's, :meth:`CircuitProblem.network`);
- the *base* link loads: every byte whose route does not depend on the
  plan (intra-node, intra-switch, small inter-switch messages);
- the *large inter-switch* traffic as node pairs (the part circuits and
  relays can carry), with per-node and per-switch-pair aggregates.

:func:`solve` runs one method of :data:`METHODS` (the registry of
:mod:`topoplan.problems.circuits.registry`; the methods register themselves) and
returns a validated :class:`topoplan.problems.result.PlanResult`;
:func:`validate_plan` checks a method's plan by the rules of the plan document
(:func:`topoplan.plans.circuits.validate_plan_dict`).

Examples
--------
>>> from topoplan.core.topology_io import load_topology
>>> from topoplan.traffic.matrix import from_arrays
>>> topo = load_topology("paper003", ["ocs.nodes_per_switch=1"])
>>> prob = CircuitProblem.build(topo, from_arrays(256, [0, 64], [64, 0], [4e6, 4e6]))
>>> res = solve(prob, method="three-step")
>>> res.plan["circuits"]
[[0, 16]]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from topoplan.analysis.switches import default_threshold
from topoplan.formulations.circuits_common import CircuitArrays
from topoplan.problems.circuits.bound import evaluate, evaluate_no_circuits
from topoplan.problems.circuits.loads import node_loads
from topoplan.problems.circuits.steps import step_loads
from topoplan.plans.circuits import ARRAY_MIN_ENTRIES, ForwardingTables, tables_from_array, validate_plan_dict
from topoplan.problems.circuits.forwarding import LOAD_SHARING
from topoplan.problems.circuits.registry import HEURISTICS, METHODS, STARTS
from topoplan.core.errors import TopoplanError
from topoplan.core.fingerprint import fingerprint
from topoplan.core.progress import report
from topoplan.core.placement import Placement, from_nodes, int_array, sequential
from topoplan.problems.result import (SIM_TIE_REL, check_inputs, check_time_limit, PlanResult, simulation_cost_s,
                                      solve_with, strict_options)
from topoplan.core.topology import TreeTopology, check_count, check_number
from topoplan.sim.simmodel import SimModel
from topoplan.sim.network import build_network
from topoplan.sim.replay import bulk_trace
from topoplan.sim.run import simulate_plan

__all__ = ["CircuitProblem", "METHODS", "HEURISTICS", "STARTS", "solve", "compare", "validate_plan",
           "result_from_plan", "plan_dict", "plan_simulator", "simulation_cost_s", "normalize_circuits", "AUTO_KEEP_REL",
           "auto_keep_rel"]


@dataclass
class CircuitProblem(CircuitArrays):
    """Inputs of circuit assignment, as arrays (see the module docstring).

    Link numbering: the simulator's (:meth:`network`, :mod:`topoplan.sim.network`), so a
    plan's per-link bytes compare link by link with a simulation's:
    intra-node links ``0..N-1``, node up links ``N..2N-1``, node down links
    ``2N..3N-1``, switch uplinks up ``3N..3N+S-1`` and down ``3N+S..3N+2S-1``
    (:meth:`link_ids`, :meth:`link_index`); circuits follow, two directed
    links each, in the order of the plan's circuit list.

    Parameters
    ----------
    topology : TreeTopology
        The hybrid topology.
    placement : Placement
        Where the ranks run.
    threshold_B : float
        Large-message threshold: messages of at least this size may use circuits.
    hop_limit, max_circuits : int or None
        Most circuits a route may cross; most circuits a plan may set up.
    node_switch, is_ocs, node_bw_Bps : numpy.ndarray
        Per node: its switch, whether it has optical ports, its EPS link bandwidth.
    ports : int
        Optical ports per OCS node.
    up_bw_Bps, ocs_bw_Bps, intra_bw_Bps : float
        Switch uplink, circuit and intra-node bandwidths.
    uplinks_shared : bool
        False on a fat tree (uplinks do not contend).
    base_up_B, base_down_B, base_intra_B : numpy.ndarray
        Per node: bytes on its links that no plan changes.
    base_uplink_up_B, base_uplink_down_B : numpy.ndarray
        Per switch: the same on its uplink.
    large_src, large_dst, large_bytes, large_msgs : numpy.ndarray
        Large inter-switch traffic by ordered node pair.
    node_min_rank : numpy.ndarray
        Lowest rank on every node (int64 max where none).
    traffic_name : str, optional
    traffic : Traffic, optional
        The rank traffic, for simulating plans.

    Build one with :meth:`build`, not field by field.

    See Also
    --------
    solve : plan circuits for the problem.
    topoplan.problems.circuits.bound.evaluate : the communication-time bound of a plan.

    References
    ----------
    000 section 3 (hybrid network, SP and CP assignment), 001 section 3.2
    (only some nodes are OCS nodes; EPS-OCS relays) and 003 section 3.3
    (circuit assignment of Fig. 3, routes of Fig. 4).

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.matrix import from_arrays
    >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=4"])     # 4 OCS nodes per switch
    >>> traffic = from_arrays(64, range(16), range(16, 32), [4e7] * 16)  # switch 0 -> switch 1, 40 MB each
    >>> prob = CircuitProblem.build(topo, traffic, placement=list(range(64)))  # rank r on node r
    >>> d = prob.describe()
    >>> d["ocs_nodes"], d["large_pairs"], d["large_inter_switch_bytes"]
    (16, 16, 640000000.0)
    >>> float(prob.switch_bytes()[0, 1]), prob.circuit_limit()
    (640000000.0, 8)
    """

    # the arrays (node_switch ... large_bytes, hop_limit) are declared by CircuitArrays, which the exact
    # formulations' CircuitData shares
    topology: Any
    placement: Any
    threshold_B: float
    max_circuits: int | None
    large_msgs: np.ndarray
    node_min_rank: np.ndarray
    traffic_name: str = ""
    _cache: dict = field(default_factory=dict, repr=False, compare=False)
    traffic: object = field(default=None, repr=False, compare=False)  # rank traffic (for simulating plans)
    steps: object = field(default=None, repr=False, compare=False)    # the trace's steps (topoplan.sim.steps)
    step_loads: object = field(default=None, repr=False, compare=False)  # their loads (problems.circuits.steps)

    def fingerprint(self) -> dict[str, str]:
        """Fingerprints of the topology, rank traffic and placement this problem was built from
        (recorded in every plan as ``inputs``; :mod:`topoplan.core.fingerprint`).

        The placement is the plan's ``rank_to_node`` with the slots its readers give (consecutive on each
        node): circuits do not depend on the slots, a plan carries no ``rank_to_slot``, and its own
        ``rank_to_node`` is compared with this record when it is read
        (:func:`topoplan.core.fingerprint.check_plan_placement`)."""
        pl = self.placement if hasattr(self.placement, "rank_to_node") else None
        if pl is not None:
            pl = from_nodes(pl.rank_to_node, self.topology)
        return fingerprint(topology=self.topology, traffic=self.traffic, placement=pl)

    # -- construction ---------------------------------------------------
    @classmethod
    @strict_options("CircuitProblem.build")
    def build(cls, topology, traffic, placement=None, *, threshold_B: float | None = None,
              hop_limit: int | None = None, max_circuits: int | None = None, steps=None,
              max_step_types: int | None = None) -> "CircuitProblem":
        """Aggregate rank traffic to node level under ``placement`` (default sequential).

        The builder shape of every problem: ``build(topology, traffic, placement=None, **options)``;
        an option it does not know is refused with the known ones.

        Parameters
        ----------
        topology : TreeTopology
            A hybrid topology (with an ``ocs`` section).
        traffic : Traffic
            The rank traffic.
        placement : Placement or array_like of int, optional
            Or rank -> node ids (consecutive cores per node); validated here. Default: sequential.
        threshold_B : float, optional
            Large-message threshold (default: OCS bandwidth-delay product).
        hop_limit : int, optional
            Most circuits a large message may cross (None: no limit).
        max_circuits : int, optional
            Most circuits a plan may set up (None: as many as ports allow).
        steps : topoplan.sim.steps.Steps, optional
            The steps of the trace the traffic comes from (:func:`topoplan.sim.steps.trace_steps`): plans are
            then scored by their step time (:mod:`topoplan.problems.circuits.steps`) instead of the one-bulk-
            phase bound. ``traffic`` may be None (the steps' total is used).
        max_step_types : int, optional
            Most step groups kept for planning (default
            :func:`topoplan.problems.circuits.steps.default_max_types`).

        Returns
        -------
        CircuitProblem

        Raises
        ------
        TopoplanError
            For a topology without OCS, a placement that does not fit, a bad
            option value, or an unknown option (naming the known ones).

        Examples
        --------
        >>> from topoplan.core.topology_io import load_topology
        >>> from topoplan.traffic.matrix import from_arrays
        >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=1"])
        >>> prob = CircuitProblem.build(topo, from_arrays(256, [0, 64], [64, 0], [4e6, 4e6]))
        >>> prob.n_nodes, prob.n_switches, prob.ocs_nodes.tolist()
        (64, 4, [0, 16, 32, 48])
        >>> CircuitProblem.build(topo, from_arrays(2, [0], [1], [8.0]), hop_limt=2)
        Traceback (most recent call last):
        ...
        topoplan.core.errors.TopoplanError: unknown option 'hop_limt' for CircuitProblem.build; known: threshold_B, hop_limit, max_circuits, steps, max_step_types
        """
        check_inputs(topology, traffic, traffic_optional=True)   # (None: said below)
        topo = topology
        if traffic is None and steps is not None:
            traffic = steps.total()
        if traffic is None:
            raise TopoplanError("field 'traffic': a circuit problem needs the traffic to plan for")
        if steps is not None and steps.n_ranks != traffic.n_ranks:
            raise TopoplanError(f"field 'steps': found in a trace of {steps.n_ranks} ranks, the traffic has "
                                f"{traffic.n_ranks}")
        if max_step_types is not None:
            max_step_types = check_count(max_step_types, "max_step_types")
        if not isinstance(topo, TreeTopology) or topo.ocs is None:
            raise TopoplanError(f"topology {getattr(topo, 'name', '') or getattr(topo, 'kind', '?')}: circuit "
                                f"planning needs a hybrid topology (kind: hybrid with an 'ocs' section)")
        if hop_limit is not None:
            hop_limit = check_count(hop_limit, "hop_limit")
        if max_circuits is not None:
            max_circuits = check_count(max_circuits, "max_circuits", minimum=0)
        if placement is None:
            placement = sequential(traffic.n_ranks, topo)
        elif not isinstance(placement, Placement):
            placement = from_nodes(int_array(placement, "field 'placement'"), topo)
        if placement.n_ranks < traffic.n_ranks:
            raise TopoplanError(f"placement: places {placement.n_ranks} ranks but the traffic has {traffic.n_ranks}")
        placement.validate(topo)
        thr = default_threshold(topo) if threshold_B is None else check_number(threshold_B, "threshold_B")
        if not thr >= 0:
            raise TopoplanError(f"field 'threshold_B': must be non-negative, got {threshold_B}")
        n, sw = topo.n_nodes, topo.node_switch()
        s = topo.n_switches
        node = np.asarray(placement.rank_to_node, dtype=np.int64)
        ld = node_loads(traffic, node, sw, n, s, thr)
        min_rank = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(min_rank, node[:traffic.n_ranks], np.arange(traffic.n_ranks, dtype=np.int64))
        ocs = topo.ocs
        prob = cls(topology=topo, placement=placement, threshold_B=thr, hop_limit=hop_limit,
                   max_circuits=max_circuits, node_switch=sw.astype(np.int64), is_ocs=topo.is_ocs_node(),
                   ports=int(ocs.ports_per_node), node_bw_Bps=topo.node_link_bw().astype(np.float64),
                   up_bw_Bps=float(topo.up_bw_Bps), ocs_bw_Bps=float(ocs.bw_Bps),
                   intra_bw_Bps=float(topo.intra_node_bw_Bps), uplinks_shared=topo.kind != "fat-tree",
                   base_up_B=ld["up"], base_down_B=ld["down"], base_intra_B=ld["intra"],
                   base_uplink_up_B=ld["uplink_up"], base_uplink_down_B=ld["uplink_down"],
                   large_src=ld["large_src"], large_dst=ld["large_dst"], large_bytes=ld["large_bytes"],
                   large_msgs=ld["large_msgs"], node_min_rank=min_rank, traffic_name=getattr(traffic, "name", ""),
                   traffic=traffic)
        if steps is not None:
            prob.step_loads = step_loads(prob, steps, max_types=max_step_types)
            prob.steps = steps
        return prob

    # -- sizes and structure --------------------------------------------
    @property
    def n_nodes(self) -> int:
        return len(self.node_switch)

    @property
    def n_switches(self) -> int:
        return int(self.topology.n_switches)

    @property
    def ocs_nodes(self) -> np.ndarray:
        return np.flatnonzero(self.is_ocs)

    def ocs_of_switch(self) -> list[np.ndarray]:
        """OCS nodes under every switch, ascending."""
        if "ocs_of" not in self._cache:
            o = self.ocs_nodes
            self._cache["ocs_of"] = [o[self.node_switch[o] == k] for k in range(self.n_switches)]
        return self._cache["ocs_of"]

    def circuit_limit(self) -> int:
        """Most circuits any plan can have: the ports, and ``max_circuits`` when set."""
        total = self.ports * int(self.is_ocs.sum()) // 2
        return total if self.max_circuits is None else min(total, self.max_circuits)

    # -- large inter-switch traffic aggregates --------------------------
    def own_out(self) -> np.ndarray:
        """``own_out[n, B]``: large bytes node n sends to nodes under switch B (N x S)."""
        if "own_out" not in self._cache:
            m = np.zeros((self.n_nodes, self.n_switches))
            np.add.at(m, (self.large_src, self.node_switch[self.large_dst]), self.large_bytes)
            self._cache["own_out"] = m
        return self._cache["own_out"]

    def own_in(self) -> np.ndarray:
        """``own_in[n, A]``: large bytes node n receives from nodes under switch A (N x S)."""
        if "own_in" not in self._cache:
            m = np.zeros((self.n_nodes, self.n_switches))
            np.add.at(m, (self.large_dst, self.node_switch[self.large_src]), self.large_bytes)
            self._cache["own_in"] = m
        return self._cache["own_in"]

    def switch_bytes(self) -> np.ndarray:
        """``W[A, B]``: large bytes from switch A to switch B (S x S, zero diagonal)."""
        if "W" not in self._cache:
            s = self.n_switches
            m = np.zeros((s, s))
            np.add.at(m, (self.node_switch[self.large_src], self.node_switch[self.large_dst]), self.large_bytes)
            self._cache["W"] = m
        return self._cache["W"]

    def node_pairs(self):
        """Unordered communicating node pairs (large traffic): ``(u, v, bytes, msgs)`` with ``u < v``, both directions summed."""
        if "pairs" not in self._cache:
            n = self.n_nodes
            lo = np.minimum(self.large_src, self.large_dst)
            hi = np.maximum(self.large_src, self.large_dst)
            uniq, inv = np.unique(lo * n + hi, return_inverse=True)
            self._cache["pairs"] = (uniq // n, uniq % n, np.bincount(inv, weights=self.large_bytes),
                                    np.bincount(inv, weights=self.large_msgs))
        return self._cache["pairs"]

    def switch_pair_counts(self) -> np.ndarray:
        """Number of communicating node pairs between switches (symmetric S x S): the papers' "communication count"."""
        if "counts" not in self._cache:
            u, v, _, _ = self.node_pairs()
            s = self.n_switches
            m = np.zeros((s, s), dtype=np.int64)
            np.add.at(m, (self.node_switch[u], self.node_switch[v]), 1)
            self._cache["counts"] = m + m.T
        return self._cache["counts"]

    @property
    def objective_name(self) -> str:
        """What the problem's objective is called: ``step time`` (an application's steps) or
        ``communication-time bound`` (its bytes as one bulk phase)."""
        return "step time" if self.step_loads is not None else "communication-time bound"

    def bulk_trace(self):
        """The traffic as one bulk phase for the simulator (built once), its small messages kept below the
        problem's threshold (:func:`topoplan.sim.replay.bulk_trace`), as the plans route them."""
        if "bulk" not in self._cache:
            self._cache["bulk"] = bulk_trace(self.traffic, 1, threshold_B=self.threshold_B)
        return self._cache["bulk"]

    # -- links ----------------------------------------------------------
    def network(self):
        """The simulator's network of the topology (no circuits; built once): it numbers the links and
        routes the traffic (:mod:`topoplan.sim.network`)."""
        if "net" not in self._cache:
            self._cache["net"] = build_network(self.topology, threshold_B=self.threshold_B)
        return self._cache["net"]

    def n_fixed_links(self) -> int:
        return self.network().n_fixed_links

    def link_ids(self) -> dict[str, np.ndarray]:
        """Link ids per group: ``intra``, ``up``, ``down`` (per node), ``uplink_up``, ``uplink_down`` (per switch)."""
        return self.network().link_ids()

    def link_index(self) -> dict[str, int]:
        """First link id of every group (each group is a contiguous range; see the class docstring)."""
        if "link_index" not in self._cache:
            out = {}
            for k, ids in self.link_ids().items():
                if len(ids) and not np.array_equal(ids, np.arange(ids[0], ids[0] + len(ids))):
                    raise TopoplanError(f"field 'topology': links of group {k!r} are not numbered contiguously")
                out[k] = int(ids[0]) if len(ids) else self.n_fixed_links()
            out["circuit"] = self.n_fixed_links()
            self._cache["link_index"] = out
        return self._cache["link_index"]

    def fixed_link_bw(self) -> np.ndarray:
        """Bandwidth of the fixed links; fat-tree uplinks get ``inf`` (they cap flows but are not shared)."""
        if "fixed_bw" not in self._cache:
            net = self.network()
            bw = np.where(net.shared, net.bw_Bps, np.inf)[:net.n_fixed_links]
            bw.flags.writeable = False
            self._cache["fixed_bw"] = bw
        return self._cache["fixed_bw"]

    def base_loads(self) -> np.ndarray:
        """Bytes on every fixed link that do not depend on the plan (read-only)."""
        if "base_loads" not in self._cache:
            ids = self.link_ids()
            loads = np.zeros(self.n_fixed_links())
            for k, v in (("up", self.base_up_B), ("down", self.base_down_B), ("intra", self.base_intra_B),
                         ("uplink_up", self.base_uplink_up_B), ("uplink_down", self.base_uplink_down_B)):
                loads[ids[k]] = v
            loads.flags.writeable = False
            self._cache["base_loads"] = loads
        return self._cache["base_loads"]

    def link_name(self, link: int, circuits=()) -> str:
        """The network's name of ``link`` (``node0001->S0``, ``S0->top``, ``node0000=>node0016``...); past the
        fixed links, the circuit links of ``circuits``."""
        return self.network().link_label(link, list(circuits))

    def describe(self) -> dict:
        out = {"nodes": self.n_nodes, "switches": self.n_switches, "ocs_nodes": int(self.is_ocs.sum()),
               "ports_per_node": self.ports, "threshold_B": self.threshold_B, "hop_limit": self.hop_limit,
               "max_circuits": self.max_circuits, "large_pairs": int(len(self.large_bytes)),
               "large_inter_switch_bytes": float(self.large_bytes.sum())}
        if self.step_loads is not None:
            sl = self.step_loads
            out.update(steps=sl.n_steps, step_types=sl.n_types, step_groups=sl.n_groups)
            if sl.compute_s:
                out.update(step_compute_s=sl.compute_s)
        return out

    @property
    def objective_kind(self) -> str:
        """What the methods' objective is: ``step time`` (with steps) or ``bulk bound``."""
        return "bulk bound" if self.step_loads is None else "step time"

    def communication_ratio(self, simulated_s: float, objective: float) -> float | None:
        """On a trace that computes, what the simulated run adds to its computation over what the step time
        adds: ``(simulated_s - compute) / (objective - compute)``, where ``compute`` is the computation on the
        critical path (:attr:`~topoplan.problems.circuits.steps.StepLoads.compute_s`). The step time sums its
        communication; a run hides what overlaps other ranks' computation, so this is what a plan's change of
        the step time is worth in the run. None without steps, without computation or when either part is not
        positive.

        Examples
        --------
        >>> from topoplan.core.topology_io import load_topology
        >>> from topoplan.traffic.generators import parse_spec
        >>> from topoplan.sim.steps import trace_steps
        >>> p = CircuitProblem.build(load_topology("paper003"), None, steps=trace_steps(parse_spec("ring:np=8,bytes=1MB")))
        >>> p.communication_ratio(0.002, 0.001) is None          # a generated trace: no computation
        True
        """
        sl = self.step_loads
        c = sl.compute_s if sl is not None else 0.0
        if not c or simulated_s - c <= 0 or objective - c <= 0:
            return None
        return (simulated_s - c) / (objective - c)


# -- plan construction and validation -----------------------------------

def normalize_circuits(circuits) -> list[tuple[int, int]]:
    """Circuits as sorted ``(u, v)`` tuples, ``u < v``, in a canonical order.

    Parameters
    ----------
    circuits : iterable of pairs of int
        Circuits as node pairs, either end first.

    Returns
    -------
    list of tuple of int

    Examples
    --------
    >>> normalize_circuits([(48, 32), [16, 0]])
    [(0, 16), (32, 48)]
    """
    return sorted((int(min(a, b)), int(max(a, b))) for a, b in circuits)


def plan_dict(problem: CircuitProblem, circuits, next_hop: np.ndarray, load_sharing: str) -> dict:
    """The plan's own keys (circuits, forwarding, ...) from circuits and a next-hop array (-1 = no entry).

    Parameters
    ----------
    problem : CircuitProblem
    circuits : sequence of pairs of int
        The circuits, as node pairs.
    next_hop : numpy.ndarray
        ``next_hop[node, switch]``: the next node towards ``switch`` for large messages, -1 for none.
    load_sharing : str
        How relays share load (see :data:`topoplan.problems.circuits.forwarding.LOAD_SHARING`).

    Returns
    -------
    dict
        ``circuits``, ``forwarding`` (``{node: {switch: next_hop}}`` with string keys, as in the
        plan JSON; for tables of :data:`topoplan.plans.circuits.ARRAY_MIN_ENTRIES` or more nodes x switches
        a :class:`topoplan.plans.circuits.ForwardingTables`, the same mapping held as the array), ``load_sharing``, ``hop_limit``, ``threshold_B`` and ``rank_to_node``.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.matrix import from_arrays
    >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=4"])     # 4 OCS nodes per switch
    >>> traffic = from_arrays(64, range(16), range(16, 32), [4e7] * 16)  # switch 0 -> switch 1, 40 MB each
    >>> prob = CircuitProblem.build(topo, traffic, placement=list(range(64)))  # rank r on node r
    >>> nh = np.full((prob.n_nodes, prob.n_switches), -1)
    >>> nh[0, 1], nh[16, 0] = 16, 0
    >>> plan = plan_dict(prob, [(0, 16)], nh, "first")
    >>> plan["circuits"], plan["forwarding"]
    ([[0, 16]], {'0': {'1': 16}, '16': {'0': 0}})
    """
    large = next_hop.size >= ARRAY_MIN_ENTRIES   # tables held as the array (read as the same mapping)
    return {"circuits": [list(c) for c in circuits],
            "forwarding": ForwardingTables(next_hop) if large else tables_from_array(next_hop),
            "load_sharing": load_sharing,
            "hop_limit": problem.hop_limit,
            "threshold_B": problem.threshold_B,
            "rank_to_node": problem.placement.rank_to_node.tolist()}


def result_from_plan(problem: CircuitProblem, circuits, next_hop, *, status="heuristic", bound=None,
                     load_sharing: str | None = None, message: str = "", extra_metrics=None,
                     options=None) -> PlanResult:
    """Evaluate a plan with the communication-time bound and wrap it in a :class:`PlanResult`.

    The methods' common last step; :func:`solve` then fills method, seed and wall time.

    Parameters
    ----------
    problem : CircuitProblem
    circuits : sequence of pairs of int
    next_hop : numpy.ndarray
        ``next_hop[node, switch]``, -1 for no entry.
    status : str, optional
        One of :data:`topoplan.problems.result.STATUSES`.
    bound : float, optional
        A proven lower bound on the objective.
    load_sharing : str, optional
        Default :data:`topoplan.problems.circuits.forwarding.LOAD_SHARING`.
    message : str, optional
    extra_metrics : dict, optional
        Added to the bound's metrics.
    options : dict, optional
        The options the plan was made with.

    Returns
    -------
    PlanResult
        ``objective`` is the communication-time bound in seconds.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.matrix import from_arrays
    >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=4"])     # 4 OCS nodes per switch
    >>> traffic = from_arrays(64, range(16), range(16, 32), [4e7] * 16)  # switch 0 -> switch 1, 40 MB each
    >>> prob = CircuitProblem.build(topo, traffic, placement=list(range(64)))  # rank r on node r
    >>> nh = np.full((prob.n_nodes, prob.n_switches), -1)
    >>> nh[0, 1], nh[16, 0] = 16, 0
    >>> res = result_from_plan(prob, [(0, 16)], nh)
    >>> res.metrics["circuits_used"], round(res.objective, 3)
    (1, 0.24)
    """
    circuits = [tuple(map(int, c)) for c in circuits]
    ev = evaluate(problem, circuits, next_hop)
    metrics = ev.metrics()
    if extra_metrics:
        metrics.update(extra_metrics)
    plan = plan_dict(problem, circuits, next_hop, load_sharing or LOAD_SHARING)
    return PlanResult(method="", objective=ev.objective_s, plan=plan, status=status, bound=bound,
                      metrics=metrics, message=message, options=dict(options or {}))


def validate_plan(problem: CircuitProblem, result: PlanResult) -> None:
    """Validate a method's plan against the problem (ports, OCS nodes, neighbours, loops, limits).

    Parameters
    ----------
    problem : CircuitProblem
    result : PlanResult
        A circuit method's result.

    Raises
    ------
    TopoplanError
        As :func:`topoplan.plans.circuits.validate_plan_dict`, naming the method.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.matrix import from_arrays
    >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=4"])     # 4 OCS nodes per switch
    >>> traffic = from_arrays(64, range(16), range(16, 32), [4e7] * 16)  # switch 0 -> switch 1, 40 MB each
    >>> prob = CircuitProblem.build(topo, traffic, placement=list(range(64)))  # rank r on node r
    >>> res = solve(prob, "sp")
    >>> validate_plan(prob, res)
    >>> res.plan["circuits"].append([0, 1])
    >>> validate_plan(prob, res)
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: sp plan: field 'circuits[4]': nodes 0 and 1 are under the same switch 0
    """
    validate_plan_dict(result.plan, problem.topology, where=f"{result.method or 'circuit'} plan",
                       max_circuits=problem.max_circuits)


# -- solve ----------------------------------------------------------------

def solve(problem: CircuitProblem, method: str = "three-step", *, time_limit: float | None = None,
          seed: int | None = 0, score: str = "auto", trace=None, sim_model=None, **options) -> PlanResult:
    """Plan circuits and forwarding tables with ``method`` (one of :data:`METHODS`).

    Parameters
    ----------
    problem : :class:`CircuitProblem`.
    method : ``none``, ``sp``, ``three-step``, ``greedy``, ``matching``, ``ilp`` or ``anneal``.
    time_limit : seconds (``ilp``, ``anneal``).
    seed : random seed (``greedy``'s random picks, ``anneal``, solver seeds); recorded in the result.
    score : ``auto`` (default): ``simulated`` for a method with starting heuristics (``ilp``, ``anneal``)
        when a ``trace`` is given and the problem has its steps, else ``bound``; ``bound``: the plan the
        method finds for its objective (the step time, or the communication-time bound); ``simulated``: that
        plan or the plan of a heuristic it starts from (:data:`STARTS`), whichever simulates faster (see
        :func:`topoplan.problems.result.solve_with`). On an application's steps the step time is an
        estimate, which dynamic effects of the network can make wrong about which plan is faster (an
        all-to-all in throttled batches through relays runs up to 2.4 times its step time): ``auto`` has
        the simulator decide there. Inside a command with a deadline (:mod:`topoplan.core.deadline`)
        the candidates' simulations share its limit under both; without one, ``time_limit`` with
        ``simulated`` is the method's own.
    trace : the MPI trace to simulate with ``score='simulated'`` (default: the traffic as one bulk phase).
    sim_model : :class:`topoplan.sim.simmodel.SimModel` (or its dict) for ``score='simulated'``; default maxmin with
        pipelined relays.
    options : the method's own options (``METHODS.options(method)``), e.g. ``solver='highs'`` or
        ``formulation='switch'`` for ``ilp``, ``init`` and ``max_steps`` for ``anneal``; an option the
        method does not declare is refused, naming the known ones.

    Returns
    -------
    PlanResult
        ``plan`` = circuits, forwarding, load_sharing, hop_limit, threshold_B,
        rank_to_node; ``objective`` = the communication-time bound (seconds) of
        the plan; ``metrics`` incl. ``congestion_bound_s``, ``uplink_bytes`` and
        ``circuits_used`` (and ``simulated_s`` with ``score='simulated'``). The
        plan is validated.

    Raises
    ------
    TopoplanError
        For an unknown method or option (naming the known ones), a bad
        ``time_limit``, ``seed`` or ``score``.

    See Also
    --------
    compare : several methods side by side.
    topoplan.problems.circuits.registry.METHODS : the methods and their options.

    References
    ----------
    ``sp`` is 000's Switch Partitioning (section 3), ``three-step`` 001's
    assignment (section 3.2.2) and 003's Fig. 3 (section 3.3.2); forwarding
    tables by distance vector as in 000 and 003 section 3.3.3.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.matrix import from_arrays
    >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=4"])     # 4 OCS nodes per switch
    >>> traffic = from_arrays(64, range(16), range(16, 32), [4e7] * 16)  # switch 0 -> switch 1, 40 MB each
    >>> prob = CircuitProblem.build(topo, traffic, placement=list(range(64)))  # rank r on node r
    >>> res = solve(prob, method="three-step")
    >>> res.plan["circuits"]
    [[0, 16], [1, 17], [2, 18], [3, 19]]
    >>> res.status, round(res.objective, 3), res.metrics["bottleneck"]
    ('heuristic', 0.064, 'node0000=>node0016')
    >>> solve(prob, "anneal", max_step=50)
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: unknown option 'max_step' for circuits method 'anneal'; known: init, max_steps, t0, t1, energy, trace, sim_model
    """
    keep_rel = SIM_TIE_REL
    # the candidates' simulations share the limit (solve_with's sim_cost): with score auto always, and with score
    # simulated inside a command (its deadline is the whole command's, topoplan.core.deadline); a library call's
    # time_limit with score simulated stays the method's own
    shared = True if score == "auto" else None
    if score == "auto":
        score = "simulated" if (trace is not None and problem.steps is not None and method in STARTS) else "bound"
        keep_rel = auto_keep_rel(problem)
    simulate = plan_simulator(problem, trace, sim_model) if score == "simulated" else None
    if method == "anneal":  # its energy='simulated' simulates the same trace under the same model
        options.update(trace=trace, sim_model=sim_model)
    res = solve_with(METHODS, problem, method, time_limit=time_limit, seed=seed, validate=validate_plan,
                     score=score, simulate=simulate, starts=STARTS, keep_rel=keep_rel, share_limit=shared,
                     sim_cost=lambda: simulation_cost_s(trace if trace is not None else problem.bulk_trace()),
                     **options)
    if res.options.get("score") == "simulated":
        res.options["sim_model"] = SimModel.coerce(sim_model).to_dict()
    res.options.setdefault("hop_limit", problem.hop_limit)
    res.options.setdefault("max_circuits", problem.max_circuits)
    res.options.setdefault("threshold_B", problem.threshold_B)
    return res


#: ``--score auto``: a heuristic's plan replaces the method's only when it simulates more than this much faster.
#: Closer than that the difference is below what the flow model resolves against a real network (the emulated
#: cluster's runs differ from its predictions by 1-8% where it is closest, docs/emulation.md), and the
#: method's plan keeps its own objective and bound: on NPB CG class B at 256 ranks on 001's systems the
#: heuristics' plans simulated 0.04% faster than the ilp's with a step time 11% above their simulated time.
AUTO_KEEP_REL = 0.005


def auto_keep_rel(problem: CircuitProblem) -> float:
    """What a start must gain in the simulator to replace the method's plan under ``--score auto``:
    :data:`AUTO_KEEP_REL` of the communication. On a trace that computes (:attr:`StepLoads.compute_s
    <topoplan.problems.circuits.steps.StepLoads.compute_s>`) the simulated times also hold the recorded
    computation, which the simulator replays exactly, so the share is scaled by the communication's part of the
    step time without circuits (FT class C recorded at 64 ranks: 66.6 s of computation in 67.2 s, so 0.5% of
    the run would be more than half of its communication).

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.sim.steps import trace_steps
    >>> from topoplan.traffic.generators import parse_spec
    >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=4"])
    >>> spec = "neighbor2d:rows=8,cols=8,bytes=4MB,iters=4"
    >>> auto_keep_rel(CircuitProblem.build(topo, None, steps=trace_steps(parse_spec(spec))))
    0.005
    >>> busy = CircuitProblem.build(topo, None, steps=trace_steps(parse_spec(spec + ",compute=1")))
    >>> round(auto_keep_rel(busy) / AUTO_KEEP_REL, 3)      # 3 s of computation in a step time of 3.115 s
    0.037
    """
    sl = problem.step_loads
    if sl is None or not sl.compute_s:
        return AUTO_KEEP_REL
    total = evaluate_no_circuits(problem).objective_s
    return AUTO_KEEP_REL * max(total - sl.compute_s, 0.0) / max(total, 1e-300)

def plan_simulator(problem: CircuitProblem, trace=None, sim_model=None):
    """``plan dict -> simulated makespan (s)`` on the problem's network (see :func:`topoplan.sim.run.simulate_plan`).

    Parameters
    ----------
    problem : CircuitProblem
    trace : topoplan.traffic.trace.Trace, optional
        What to simulate; default the problem's traffic as one bulk phase.
    sim_model : SimModel or dict, optional
        The network model; default maxmin with pipelined relays.

    Returns
    -------
    callable
        ``run(plan_dict, validated=False) -> float`` seconds; ``validated=True`` for a plan :func:`solve` just
        returned for this problem (validated there): the simulator does not check it again.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.matrix import from_arrays
    >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=4"])     # 4 OCS nodes per switch
    >>> traffic = from_arrays(64, range(16), range(16, 32), [4e7] * 16)  # switch 0 -> switch 1, 40 MB each
    >>> prob = CircuitProblem.build(topo, traffic, placement=list(range(64)))  # rank r on node r
    >>> simulate = plan_simulator(prob)
    >>> round(simulate(solve(prob, "none").to_dict()), 3), round(simulate(solve(prob, "three-step").to_dict()), 3)
    (0.256, 0.064)
    """
    tr = trace if trace is not None else problem.bulk_trace()

    def run(plan: dict, validated: bool = False) -> float:
        return float(simulate_plan(problem.topology, tr, plan, placement=problem.placement,
                                   threshold_B=problem.threshold_B, model=sim_model, validated=validated)["makespan_s"])

    return run


def compare(problem: CircuitProblem, methods=None, *, time_limit: float | None = None, seed: int | None = 0,
            simulate=None, **options) -> list[dict]:
    """Run several methods on one problem; one row per method, plus the gap to the exact model.

    ``gap_to_exact`` is ``(T - T_ilp) / T`` when ``ilp`` ran and proved
    optimality, else ``(T - best lower bound) / T`` (then labelled
    ``gap_to_bound``). ``simulate(plan_dict) -> seconds`` adds the simulated
    communication time (``simulated_s``) when given; a dict of named simulators
    (``{"pipelined": fn, ...}``) adds one column ``simulated_s.<name>`` each.

    Parameters
    ----------
    problem : CircuitProblem
    methods : sequence of str, optional
        Default every method of :data:`METHODS`.
    time_limit : float, optional
        For ``ilp`` and ``anneal``.
    seed : int, optional
    simulate : callable or dict of callables, optional
        ``plan_dict -> seconds`` (see :func:`plan_simulator`).
    **options
        Options of ``ilp``.

    Returns
    -------
    list of dict
        One row per method: method, status, objective, bound, gap, uplink_bytes,
        circuits, fallback_bytes, bottleneck, wall_s, and ``gap_to_exact`` or ``gap_to_bound``.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.matrix import from_arrays
    >>> topo = load_topology("paper003", ["ocs.nodes_per_switch=4"])     # 4 OCS nodes per switch
    >>> traffic = from_arrays(64, range(16), range(16, 32), [4e7] * 16)  # switch 0 -> switch 1, 40 MB each
    >>> prob = CircuitProblem.build(topo, traffic, placement=list(range(64)))  # rank r on node r
    >>> rows = compare(prob, ["none", "three-step"])
    >>> [(r["method"], r["circuits"], r["bottleneck"], round(r["objective"], 3)) for r in rows]
    [('none', 0, 'S0->top', 0.256), ('three-step', 4, 'node0000=>node0016', 0.064)]
    """
    methods = list(methods or METHODS)
    check_time_limit(time_limit)   # before any method runs, whether or not one of them takes it
    rows, results = [], {}
    for k, m in enumerate(methods):
        report(stage=f"{m} ({k + 1} of {len(methods)})")
        opts = dict(options) if m == "ilp" else {}
        res = solve(problem, m, time_limit=time_limit if m in ("ilp", "anneal") else None, seed=seed, **opts)
        results[m] = res
        row = {"method": m, "status": res.status, "objective": res.objective, "bound": res.bound, "gap": res.gap,
               "uplink_bytes": res.metrics["uplink_bytes"], "circuits": res.metrics["circuits_used"],
               "fallback_bytes": res.metrics["large_fallback_bytes"], "bottleneck": res.metrics["bottleneck"],
               "wall_s": res.wall_s}
        if simulate is not None:
            report(stage=f"{m} ({k + 1} of {len(methods)}): simulating its plan")
        if isinstance(simulate, dict):
            for name, fn in simulate.items():
                row[f"simulated_s.{name}"] = fn(res.to_dict())
        elif simulate is not None:
            row["simulated_s"] = simulate(res.to_dict())
            row["simulated_over_objective"] = row["simulated_s"] / res.objective if res.objective else None
            comm = problem.communication_ratio(row["simulated_s"], res.objective)
            if comm is not None:
                row["communication_simulated_over_objective"] = comm
        rows.append(row)
    bounds = [r.bound for r in results.values() if r.bound is not None]
    best_bound = max(bounds) if bounds else None
    exact = results.get("ilp")
    for row in rows:
        T = row["objective"]
        if exact is not None and exact.status == "optimal":
            row["gap_to_exact"] = 0.0 if T <= 0 else (T - exact.objective) / T
        elif best_bound is not None:
            row["gap_to_bound"] = 0.0 if T <= 0 else max(0.0, (T - best_bound) / T)
    return rows
