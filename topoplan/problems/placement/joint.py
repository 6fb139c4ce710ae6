"""Joint placement + circuits on a hybrid EPS/OCS network (``joint``; the future work of 001 and 003).

Placing ranks first and assigning circuits afterwards (metis, then greedy
or ilp circuits) fixes *which* nodes exchange the heavy inter-switch
traffic before it is known which OCS node pairs a circuit can join. Here the
two are chosen together. The score of a (placement, circuits) pair is the
circuit model's objective: the communication-time bound of
:func:`topoplan.problems.circuits.bound.evaluate` (max over directed links of bytes /
bandwidth, relays' EPS links included) -- or, when the problem has the trace's steps, their step time
(the sum of each step's bottleneck, :data:`JOINT_STEP_TYPES` step groups at most) -- then the uplink bytes.

Start: the place-then-assign plan (``init`` placement, ``circuit_method``
circuits; ``final_method`` when given, so the comparison is like for like).
Then a few rounds, scored with ``circuit_method`` circuits, each keeping the
best plan so far:

1. **matching** -- node groups (the ranks sharing a node) exchanging the most
   large inter-switch bytes are paired greedily, at most ``ports`` circuits
   a group and as many groups per switch as it has OCS nodes; the paired
   groups move onto OCS nodes of their own switch (a permutation inside the
   switch: inter-switch bytes do not change) and get a circuit each; free
   ports then join the switch pairs with the most traffic per circuit. The
   circuit method re-run on the new placement is tried too.
2. **anneal** -- :func:`topoplan.problems.placement.anneal.anneal` (rank and
   node swaps) on a circuit-aware pair cost: the link-time gradient of a
   smooth maximum of the current plan's link times, summed along the route a
   node pair's large messages take under the current circuits and forwarding
   tables. A pair on the two ends of one circuit costs one optical link; a
   pair that needs relays or the uplinks costs every loaded link it crosses.
   Then circuits are re-assigned (and the old ones kept, whichever is better).
3. **descent** -- exact local search with the circuits fixed: swap the
   contents of a node on one of the three busiest links with another node
   (same switch, an OCS node, or a partner's switch), re-route with the
   distance-vector tables, and take the best swap that lowers the bound (or,
   at an equal bound, a smooth maximum of the link times).

With a ``final_method`` (e.g. ``ilp``), the rounds get 70% of the time;
then ``final_method`` plans the circuits of the rounds' best placement and
a last descent moves nodes with the best exact circuits fixed. The result is
the best of all these plans by the bound (ties keep the earlier one, the
start first), so it is never worse than the start.

The result's plan has ``rank_to_node``, ``rank_to_slot`` and the circuit
plan (``circuits``, ``forwarding``, ``load_sharing``, ``hop_limit``,
``threshold_B``), validated with :func:`topoplan.problems.circuits.validate_plan_dict`,
so ``topoplan simulate --circuits`` and the exports take it as it is. The
result's ``objective`` is the circuit bound (s), whatever the problem's
objective; ``final_pick='simulated'`` picks the final plan among the start and the
last few improvements by simulated makespan instead (then the simulated
time is never worse than the start's, and the bound still is not).

The search is seeded; with ``max_evals``/``anneal_steps`` it is
deterministic, with only a time budget the number of moves depends on the
machine. Approximations: the anneal cost is linear (a gradient step of the
max, symmetrized over the two directions), and the matching step is greedy.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from topoplan.problems.circuits import METHODS as CIRCUIT_METHODS
from topoplan.problems.circuits import CircuitProblem, validate_plan_dict
from topoplan.problems.circuits import solve as circuit_solve
from topoplan.problems.circuits.bound import evaluate
from topoplan.plans.circuits import array_from_tables, tables_from_array
from topoplan.problems.circuits.forwarding import LOAD_SHARING, distance_vector
from topoplan.problems.circuits.problem import plan_dict
from topoplan.core.errors import TopoplanError
from topoplan.core.placement import Placement, from_nodes
from topoplan.problems.placement.anneal import anneal
from topoplan.problems.placement.problem import PlacementProblem, initial_placement, result_from, simulated_time
from topoplan.problems.placement.registry import METHODS
from topoplan.core.topology import TreeTopology
from topoplan.core.interrupt import stop_requested

__all__ = ["DEFAULT_TIME_S", "MAX_ANNEAL_NODES", "joint"]

DEFAULT_TIME_S = 10.0
MAX_ANNEAL_NODES = 2048     # the anneal step keeps an n x n pair-cost matrix
JOINT_STEP_TYPES = 8        # step groups of the circuit problems joint builds (one per placement it scores)
_REL = 1e-9


@dataclass
class Candidate:
    """One plan: placement, circuits and forwarding, with its score."""

    node: np.ndarray
    circuits: list
    next_hop: np.ndarray
    bound_s: float
    uplink_B: float
    smooth: float
    how: str
    evaluation: object = None
    problem: object = None
    plan: dict | None = None

    def better_than(self, other: "Candidate | None") -> bool:
        """Lexicographic: the bound, then the uplink bytes (as the circuit methods)."""
        if other is None:
            return True
        if self.bound_s < other.bound_s * (1 - _REL):
            return True
        if self.bound_s > other.bound_s * (1 + _REL):
            return False
        return self.uplink_B < other.uplink_B * (1 - _REL) - 1e-9

    def improves(self, other: "Candidate") -> bool:
        """For local search: better, or an equal bound with a lower smooth maximum (leaves plateaus)."""
        if self.better_than(other):
            return True
        return (self.bound_s <= other.bound_s * (1 + _REL) and self.uplink_B <= other.uplink_B * (1 + _REL) + 1e-9
                and self.smooth < other.smooth * (1 - 1e-6))


class Scorer:
    """Builds circuit problems for node assignments and scores plans; counts evaluations."""

    def __init__(self, problem: PlacementProblem, hop_limit=None, max_circuits=None, seed=0, circuit_time_limit=None):
        self.p = problem
        self.topology = problem.topology
        self.hop_limit = hop_limit
        self.max_circuits = max_circuits
        self.seed = seed
        self.circuit_time_limit = circuit_time_limit
        self.evals = 0

    def build(self, node):
        pl = Placement(np.asarray(node, dtype=np.int64), from_nodes(node, self.topology).rank_to_slot)
        return CircuitProblem.build(self.topology, self.p.traffic, pl, threshold_B=self.p.threshold_B,
                                    hop_limit=self.hop_limit, max_circuits=self.max_circuits, steps=self.p.steps,
                                    max_step_types=JOINT_STEP_TYPES)

    def _wrap(self, node, cp, circuits, nh, how, plan=None) -> Candidate:
        self.evals += 1
        ev = evaluate(cp, circuits, nh)
        t = ev.times_s()
        top = t.max(initial=0.0)
        smooth = float(np.sum((t / top) ** 8)) if top > 0 else 0.0
        return Candidate(np.asarray(node, dtype=np.int64), list(circuits), nh, ev.objective_s, ev.uplink_bytes,
                         smooth, how, ev, cp, plan)

    def fixed(self, node, circuits, how: str, next_hop=None) -> Candidate:
        """Score a placement with given circuits and forwarding tables (default: fresh distance-vector tables).

        Full tables give every node a route, whatever ranks it holds, so a
        plan's tables stay valid for another placement; only their load
        sharing was chosen for the old one.
        """
        cp = self.build(node)
        circuits = [(int(a), int(b)) for a, b in circuits]
        nh = distance_vector(cp, circuits) if next_hop is None else next_hop
        return self._wrap(node, cp, circuits, nh, how)

    def assign(self, node, method: str, how: str, time_limit=None) -> Candidate:
        """Score a placement with the circuits and tables of a circuit method."""
        cp = self.build(node)
        tl = time_limit if time_limit is not None else (self.circuit_time_limit if method in ("ilp", "anneal") else None)
        res = circuit_solve(cp, method, time_limit=tl, seed=self.seed)
        circuits = [(int(a), int(b)) for a, b in res.plan["circuits"]]
        nh = array_from_tables(res.plan["forwarding"], cp.n_nodes, cp.n_switches)
        return self._wrap(node, cp, circuits, nh, how, plan=res.plan)


# -- moves ---------------------------------------------------------------------------

def swap_nodes(node: np.ndarray, x: int, y: int) -> np.ndarray:
    """The node assignment with the contents of nodes ``x`` and ``y`` exchanged."""
    out = node.copy()
    out[node == x] = y
    out[node == y] = x
    return out


def match_groups(sc: Scorer, cur: Candidate, circuit_method: str) -> Candidate:
    """Step 1: pair the heaviest inter-switch node groups, move them onto OCS nodes, join them (module docstring)."""
    cp = cur.problem
    n = cp.n_nodes
    sw, is_ocs, ports = cp.node_switch, cp.is_ocs, cp.ports
    cores = sc.p.cores
    cnt = np.bincount(cur.node, minlength=n)
    cap: dict[tuple[int, int], int] = {}
    for x in np.flatnonzero(is_ocs).tolist():
        key = (int(sw[x]), int(cores[x]))
        cap[key] = cap.get(key, 0) + 1
    u, v, by, _ = cp.node_pairs()
    desig = np.zeros(n, dtype=bool)
    deg = np.zeros(n, dtype=np.int64)
    pairs: list[tuple[int, int]] = []
    limit = cp.circuit_limit()
    for i in np.lexsort((v, u, -by)).tolist():
        if len(pairs) >= limit:
            break
        g, h = int(u[i]), int(v[i])
        if deg[g] >= ports or deg[h] >= ports:
            continue
        need = [x for x in (g, h) if not desig[x]]
        if any(cap.get((int(sw[x]), int(cores[x])), 0) <= 0 for x in need):
            continue
        for x in need:
            cap[(int(sw[x]), int(cores[x]))] -= 1
            desig[x] = True
        deg[g] += 1
        deg[h] += 1
        pairs.append((g, h))
    # the OCS nodes left go to the groups with the most large inter-switch bytes (they relay least far)
    per = cp.own_out().sum(axis=1) + cp.own_in().sum(axis=1)
    for x in np.lexsort((np.arange(n), -per)).tolist():
        key = (int(sw[x]), int(cores[x]))
        if not desig[x] and cnt[x] > 0 and per[x] > 0 and cap.get(key, 0) > 0:
            cap[key] -= 1
            desig[x] = True
    # designated groups onto OCS nodes of their own switch: transpositions inside (switch, cores) classes
    remap = np.arange(n)
    for key in sorted({(int(sw[x]), int(cores[x])) for x in range(n)}):
        m = np.flatnonzero((sw == key[0]) & (cores == key[1]))
        move_in = m[desig[m] & ~is_ocs[m]]
        free_ocs = m[is_ocs[m] & ~desig[m]]
        for g, y in zip(move_in.tolist(), free_ocs.tolist()):
            remap[g], remap[y] = y, g
    node = remap[cur.node]
    circuits = sorted((int(min(remap[g], remap[h])), int(max(remap[g], remap[h]))) for g, h in pairs)
    circuits = _top_up(cp, circuits)
    a = sc.fixed(node, circuits, "matching")
    b = sc.assign(node, circuit_method, f"matching+{circuit_method}")
    return a if a.better_than(b) else b


def _top_up(cp, circuits) -> list:
    """Join free OCS ports between the switch pairs with the most large traffic per circuit (lowest ids first)."""
    sw = cp.node_switch
    free = np.where(cp.is_ocs, cp.ports, 0).astype(np.int64)
    joined = set()
    S = cp.n_switches
    k = np.zeros((S, S), dtype=np.int64)
    for a, b in circuits:
        free[a] -= 1
        free[b] -= 1
        joined.add((a, b))
        k[sw[a], sw[b]] += 1
        k[sw[b], sw[a]] += 1
    W = cp.switch_bytes()
    W = W + W.T
    ocs_of = cp.ocs_of_switch()
    out = list(circuits)
    while len(out) < cp.circuit_limit():
        best, pick = 0.0, None
        for A in range(S):
            fa = [x for x in ocs_of[A].tolist() if free[x] > 0]
            if not fa:
                continue
            for B in range(A + 1, S):
                if W[A, B] <= 0 or W[A, B] / (1 + k[A, B]) <= best:
                    continue
                pair = next(((x, y) for x in fa for y in ocs_of[B].tolist()
                             if free[y] > 0 and (min(x, y), max(x, y)) not in joined), None)
                if pair is not None:
                    best, pick = W[A, B] / (1 + k[A, B]), pair
        if pick is None:
            break
        x, y = pick
        free[x] -= 1
        free[y] -= 1
        joined.add((min(x, y), max(x, y)))
        k[sw[x], sw[y]] += 1
        k[sw[y], sw[x]] += 1
        out.append((min(x, y), max(x, y)))
    return sorted(out)


def route_costs(cand: Candidate, power: int = 4, floor: float = 0.05) -> np.ndarray:
    """Node x node cost per byte: link-time weights summed along the route a large message takes under the plan.

    The weight of a link is ``(floor + (t_l / t_max)^(power-1)) / bw_l`` -- the
    gradient of the smooth maximum ``sum_l (t_l / t_max)^power`` of the link
    times, plus a floor so that idle links are not free. Pairs under one
    switch use their two node links, pairs on one node the intra-node link.
    Symmetric (the rank graph sums both directions), scaled to a median of 1.
    """
    cp, ev = cand.problem, cand.evaluation
    n, S = cp.n_nodes, cp.n_switches
    sw = cp.node_switch
    ids = cp.link_ids()
    t = ev.times_s()
    top = t.max(initial=0.0) or 1.0
    with np.errstate(divide="ignore"):
        inv = np.where(np.isfinite(ev.bw_Bps), 1.0 / ev.bw_Bps, 0.0)
    w = (floor + (t / top) ** (power - 1)) * inv
    up, down = w[ids["up"]], w[ids["down"]]
    a, s = np.divmod(np.arange(n * S), S)
    a, s = a[s != sw[a]], s[s != sw[a]]
    r = cp.network().relay_routes(a, s, cand.next_hop, cand.circuits)   # every node towards every other switch
    base = np.zeros((n, S))
    end = np.zeros((n, S), dtype=np.int64)
    fb = np.zeros((n, S), dtype=bool)
    base[a, s] = np.bincount(np.repeat(np.arange(len(a)), np.diff(r.ptr)), weights=w[r.links], minlength=len(a))
    end[a, s], fb[a, s] = r.end, r.fallback
    cols = np.arange(n)
    e = end[:, sw]                       # n x n: where a's message to node j's switch arrives
    f = fb[:, sw]
    D = base[:, sw] + np.where(e != cols[None, :], down[None, :], 0.0) + np.where(~f & (e != cols[None, :]), up[e], 0.0)
    same = sw[:, None] == sw[None, :]
    D = np.where(same, up[:, None] + down[None, :], D)
    D[cols, cols] = w[ids["intra"]]
    D = (D + D.T) / 2.0
    pos = D[D > 0]
    return D / (np.median(pos) if pos.size else 1.0)


@dataclass
class _RouteCostProblem(PlacementProblem):
    """A placement problem whose pair distance is a fixed node x node cost matrix (for the anneal step)."""

    D: np.ndarray | None = None

    def distance(self, a, b) -> np.ndarray:
        return self.D[np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)]

    def cost(self, rank_to_node) -> float:
        node = np.asarray(rank_to_node, dtype=np.int64)
        u, v, w = self.edges()
        return float(np.dot(w, self.D[node[u], node[v]]))

    @property
    def is_tree(self) -> bool:
        return False    # node swaps inside one switch matter here: they move groups onto OCS nodes


def anneal_step(sc: Scorer, cur: Candidate, circuit_method: str, *, time_limit, seed, max_steps=None) -> Candidate:
    """Step 2: anneal on the circuit-aware pair cost of ``cur``, then re-assign circuits (module docstring)."""
    p = sc.p
    sub = _RouteCostProblem(p.topology, p.traffic, "hops", p.threshold_B, D=route_costs(cur))
    res = anneal(sub, time_limit=time_limit, seed=seed, init=cur.node.copy(), max_steps=max_steps, cycles=1)
    node = np.asarray(res.plan["rank_to_node"], dtype=np.int64)
    a = sc.fixed(node, cur.circuits, "anneal")
    b = sc.assign(node, circuit_method, f"anneal+{circuit_method}")
    return a if a.better_than(b) else b


def _hot_nodes(cur: Candidate, k_links: int = 3, k_nodes: int = 4) -> list[int]:
    """Nodes behind the busiest links: a node link's node, a circuit's two ends, an uplink's heaviest senders."""
    cp, ev = cur.problem, cur.evaluation
    n, S = cp.n_nodes, cp.n_switches
    idx = cp.link_index()
    t = ev.times_s()
    per = cp.own_out().sum(axis=1) + cp.own_in().sum(axis=1) + cp.base_up_B + cp.base_down_B
    hot: list[int] = []
    for link in np.argsort(-t, kind="stable")[:k_links].tolist():
        if t[link] <= 0:
            break
        if link < 3 * n:
            cand = [link % n]
        elif link < idx["circuit"]:
            s = (link - 3 * n) % S
            m = np.flatnonzero(cp.node_switch == s)
            cand = m[np.argsort(-per[m], kind="stable")][:2].tolist()
        else:
            cand = list(cur.circuits[(link - idx["circuit"]) // 2])
        hot += [int(x) for x in cand if x not in hot]
    return hot[:k_nodes]


def descent(sc: Scorer, cur: Candidate, rng, *, deadline: float, max_evals: int | None,
            per_step: int = 48) -> tuple[Candidate, bool]:
    """Step 3: exact best-improvement swaps of node contents around the busiest links, circuits fixed.

    Swaps are scored with the current forwarding tables (cheap); the chosen
    swap is re-routed with fresh distance-vector tables, whichever is better.
    Returns the plan and whether the descent converged (no improving swap left).
    """
    p = sc.p
    cores = p.cores
    sw = p.node_switch
    cp = cur.problem
    n = cp.n_nodes
    ocs = np.flatnonzero(cp.is_ocs)
    budget = max_evals
    while time.perf_counter() < deadline and (budget is None or budget > 0) and not stop_requested():
        cnt = np.bincount(cur.node, minlength=n)
        tr = p.traffic
        best = None
        tried = set()
        for x in _hot_nodes(cur):
            # partners' switches: where x's ranks send or receive
            ranks = np.flatnonzero(cur.node == x)
            peer = np.concatenate([cur.node[tr.dst[np.isin(tr.src, ranks)]], cur.node[tr.src[np.isin(tr.dst, ranks)]]])
            near = np.flatnonzero(np.isin(sw, np.unique(sw[peer])) | (sw == sw[x]))
            ys = np.unique(np.concatenate([near, ocs]))
            ys = ys[(ys != x) & (cnt[ys] <= cores[x]) & (cnt[x] <= cores[ys]) & ((cnt[ys] > 0) | (cnt[x] > 0))]
            if len(ys) > per_step:
                ys = np.sort(rng.choice(ys, per_step, replace=False))
            for y in ys.tolist():
                key = (min(x, y), max(x, y))
                if key in tried:
                    continue
                tried.add(key)
                c = sc.fixed(swap_nodes(cur.node, x, y), cur.circuits, "descent", next_hop=cur.next_hop)
                if budget is not None:
                    budget -= 1
                if c.improves(best or cur):
                    best = c
                if time.perf_counter() >= deadline or (budget is not None and budget <= 0):
                    break
            if time.perf_counter() >= deadline or (budget is not None and budget <= 0):
                break
        if best is None:
            return cur, True
        cur = _best(best, sc.fixed(best.node, best.circuits, "descent"))
    return cur, False


# -- the method ------------------------------------------------------------------------

@METHODS.register("joint")
def joint(problem: PlacementProblem, *, time_limit=None, seed=0, init="metis", circuit_method: str = "greedy",
          final_method: str | None = None, circuit_time_limit: float | None = None, rounds: int = 6,
          hop_limit: int | None = None, max_circuits: int | None = None, max_evals: int | None = None,
          anneal_steps: int | None = None, steps=("matching", "anneal", "descent"), final_pick: str = "bound",
          trace=None, sim_model=None):
    """Placement and circuits chosen together on a hybrid network (see the module docstring).

    Parameters
    ----------
    problem : :class:`PlacementProblem` on a hybrid topology.
    time_limit : seconds for the rounds (default 10; the start and ``final_method`` come on top). With
        both ``max_evals`` and ``anneal_steps`` the default is no limit: the counts bound the work and
        the plan does not depend on the machine's speed or load (a limit given still caps the rounds).
    seed : random seed (anneal, candidate sampling, circuit methods).
    init : starting placement: a placement method name (default ``metis``), several (the best on the
        problem's objective) or a ``rank_to_node`` array.
    circuit_method : circuit method used inside the rounds (default ``greedy``).
    final_method : circuit method for the start and the final plan (e.g. ``ilp``); default ``circuit_method``.
    circuit_time_limit : seconds for an ``ilp``/``anneal`` circuit solve (default 10).
    rounds : most rounds; stops early when a round improves nothing.
    hop_limit, max_circuits : as for ``topoplan circuits``.
    max_evals : plan evaluations per descent step; default: time-bounded.
    anneal_steps : batches per anneal step; default: a share of the time. Both given and no
        ``time_limit``: a reproducible run (see ``time_limit``).
    steps : which of ``matching``, ``anneal``, ``descent`` the rounds run.
    trace, sim_model : what ``final_pick='simulated'`` replays (:func:`topoplan.problems.placement.solve`
        passes its own with ``score='simulated'``).
    final_pick : ``bound`` (default) or ``simulated``: pick the final plan among the start and the
        last improvements by simulated makespan (``trace``, default the traffic as one bulk phase, under
        ``sim_model``, a :class:`topoplan.sim.simmodel.SimModel` or its dict; default maxmin, pipelined relays).

    Returns
    -------
    PlanResult
        plan = ``rank_to_node``, ``rank_to_slot``, ``circuits``, ``forwarding``, ...;
        objective = circuit bound (s); metrics = the placement metrics plus ``circuit_bound_s``,
        ``uplink_bytes``, ``circuits_used``, ``direct_bytes``, ``relayed_bytes``, ``start_circuit_bound_s``
        (place-then-assign), ``rounds``, ``evaluations`` (and ``simulated_s`` with ``final_pick='simulated'``).

    Raises
    ------
    TopoplanError
        On a topology without OCS, or for an unknown step, circuit method or ``final_pick``.

    References
    ----------
    003 section 4 places ranks first (Sequential, CommPattern) and assigns
    circuits after; this method chooses both together.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.sources import load_traffic
    >>> p = PlacementProblem.build(load_topology("paper003"), load_traffic("neighbor2d:rows=16,cols=16,bytes=4MB"))
    >>> r = joint(p, max_evals=50, anneal_steps=50, rounds=2)
    >>> r.objective <= r.metrics["start_circuit_bound_s"]
    True
    """
    topo = problem.topology
    if not isinstance(topo, TreeTopology) or topo.ocs is None:
        raise TopoplanError(f"method joint: topology {topo.name or topo.kind} has no OCS; joint placement + circuits "
                            f"needs a hybrid topology (kind: hybrid with an 'ocs' section)")
    if final_pick not in ("bound", "simulated"):
        raise TopoplanError(f"method joint: field 'final_pick': 'bound' or 'simulated', got {final_pick!r}")
    bad = [s for s in steps if s not in ("matching", "anneal", "descent")]
    if bad:
        raise TopoplanError(f"method joint: unknown step {bad[0]!r} (matching, anneal, descent)")
    for m in (circuit_method, final_method):
        if m is not None and m not in CIRCUIT_METHODS:
            raise TopoplanError(f"method joint: unknown circuit method {m!r} (methods: {', '.join(CIRCUIT_METHODS)})")
    counted = max_evals is not None and anneal_steps is not None   # the counts bound the work: no clock
    budget = (float("inf") if counted else DEFAULT_TIME_S) if time_limit is None else float(time_limit)
    rng = np.random.default_rng(seed)
    sc = Scorer(problem, hop_limit=hop_limit, max_circuits=max_circuits, seed=seed,
                circuit_time_limit=10.0 if circuit_time_limit is None else circuit_time_limit)
    start_name, start_node = initial_placement(problem, init, seed, method="joint")
    outer = final_method or circuit_method
    start = sc.assign(start_node, outer, f"start:{outer}")
    # the rounds score plans with circuit_method; with a final_method they start from its plan on the start placement
    inner = start if outer == circuit_method else sc.assign(start_node, circuit_method, f"start:{circuit_method}")
    cands = [start]
    t0 = time.perf_counter()
    deadline = t0 + (0.7 * budget if final_method is not None else budget)
    done_rounds = 0
    use_anneal = "anneal" in steps and problem.n_nodes <= MAX_ANNEAL_NODES and problem.n_ranks > 1
    for r in range(max(0, int(rounds))):
        now = time.perf_counter()
        if now >= deadline or stop_requested():
            break
        round_end = now + (deadline - now) / (rounds - r)
        before = inner
        if "matching" in steps:
            inner = _best(inner, match_groups(sc, inner, circuit_method))
        if use_anneal and time.perf_counter() < round_end:
            share = max(0.05, 0.4 * (round_end - time.perf_counter()))
            inner = _best(inner, anneal_step(sc, inner, circuit_method, time_limit=share,
                                             seed=int(rng.integers(2**31)), max_steps=anneal_steps))
        converged = True
        if "descent" in steps:
            inner, converged = descent(sc, inner, rng, deadline=round_end if max_evals is None else float("inf"),
                                       max_evals=max_evals)
            # the circuits were fixed during the descent: let the circuit method re-plan them
            inner = _best(inner, sc.assign(inner.node, circuit_method, f"descent+{circuit_method}"))
        done_rounds += 1
        if inner.better_than(before):
            cands.append(inner)
        elif converged:
            break
    if inner is not cands[-1] and inner is not start:
        cands.append(inner)        # equal bound, lower smooth maximum (a plateau move): a candidate for final_pick='simulated'
    if final_method is not None:
        if not np.array_equal(inner.node, start.node):
            cands.append(sc.assign(inner.node, final_method, f"final:{final_method}"))
        # the exact circuits fixed, a last descent of the placement in the time left
        top = min(cands, key=lambda c: (c.bound_s, c.uplink_B))
        pol, _ = descent(sc, top, rng, deadline=t0 + budget if max_evals is None else float("inf"),
                         max_evals=max_evals)
        if pol is not top:
            cands.append(pol)
    best = cands[0]
    for c in cands[1:]:
        best = _best(best, c)       # ties keep the earlier plan (the start first)
    sim_s = None
    if final_pick == "simulated":
        # only plans at least as good as the start on the bound (with a final_method the rounds' own
        # plans may not be), so neither the bound nor the simulated time is worse than the start's
        pool = [cands[0]] + [c for c in cands[1:] if not start.better_than(c)][-4:]
        times = [_simulated(problem, c, trace, sim_model) for c in pool]
        i = int(np.argmin(times))
        best, sim_s = pool[i], times[i]
    plan = best.plan or plan_dict(best.problem, best.circuits, best.next_hop, LOAD_SHARING)
    extra_plan = {k: plan[k] for k in ("circuits", "forwarding", "load_sharing", "hop_limit", "threshold_B")}
    validate_plan_dict({**extra_plan, "rank_to_node": best.node.tolist()}, topo, where="joint plan",
                       max_circuits=max_circuits)
    cm = best.evaluation.metrics()
    metrics = {"circuit_bound_s": best.bound_s, "uplink_bytes": best.uplink_B, "circuits_used": len(best.circuits),
               "ocs_bytes": cm["ocs_bytes"], "direct_bytes": cm["direct_bytes"], "relayed_bytes": cm["relayed_bytes"],
               "large_fallback_bytes": cm["large_fallback_bytes"], "circuit_bottleneck": cm["bottleneck"],
               "start_circuit_bound_s": start.bound_s, "start_uplink_bytes": start.uplink_B,
               "rounds": done_rounds, "evaluations": sc.evals, "found_by": best.how}
    if sim_s is not None:
        metrics["simulated_s"] = sim_s
    gain = (start.bound_s - best.bound_s) / start.bound_s if start.bound_s > 0 else 0.0
    what = "circuit step time" if problem.steps is not None else "circuit bound"
    msg = (f"{done_rounds} rounds, {sc.evals} plans scored; {what} {start.bound_s:.6g} s "
           f"(place-then-assign) -> {best.bound_s:.6g} s ({100 * gain:.1f}% lower), found by {best.how}")
    return result_from(problem, best.node, objective=best.bound_s, extra_plan=extra_plan, extra_metrics=metrics,
                       message=msg, options={"init": start_name,
                                             "circuit_method": circuit_method, "final_method": final_method,
                                             "rounds": rounds, "final_pick": final_pick, "hop_limit": hop_limit,
                                             "max_circuits": max_circuits,
                                             "time_budget_s": budget if np.isfinite(budget) else None})


def _best(a: Candidate, b: Candidate) -> Candidate:
    return b if b.better_than(a) else a


def _simulated(problem: PlacementProblem, cand: Candidate, trace, sim_model=None) -> float:
    plan = cand.plan or {}
    doc = {"rank_to_node": cand.node.tolist(), "circuits": [list(c) for c in cand.circuits],
           "forwarding": plan.get("forwarding") or tables_from_array(cand.next_hop),
           "hop_limit": cand.problem.hop_limit}
    return simulated_time(problem, doc, trace, sim_model)
