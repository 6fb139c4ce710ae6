"""Exact circuit assignment: mixed-integer models, their LP bounds, and the ``ilp`` method.

Objective (both formulations): minimize the communication-time bound ``T``
= max over directed links of bytes / bandwidth (node EPS links incl. those
of relay nodes, uplinks, circuits, intra-node), then the bytes through the
EPS uplinks -- lexicographically (two solves: the second fixes ``T`` at the
first optimum) or weighted (one solve, ``T + 1e-3 * uplink share``).

``node`` formulation -- exact for the plans the simulator runs
    Binary ``x[u,v]``: a circuit between OCS nodes u, v (different switches;
    at most ``ports`` per node; at most ``max_circuits``). Binary
    ``y[n,S,h]``: the single next hop of node n towards switch S (fall back,
    an EPS hop to an OCS node h under n's switch, or the circuit to h).
    Flows per commodity -- one per OCS destination node plus one per switch
    for its other nodes, which is exact because only an OCS node can receive
    a message straight off a circuit -- follow the chosen next hops
    (``flow <= demand * y``), so every node sends all its traffic for a
    switch one way, as a forwarding table does; multi-hop through other
    switches is allowed, up to ``hop_limit`` circuits (MTZ-style counters).
    Link loads are the ones :func:`planner.circuits.bound.evaluate` computes
    for the extracted plan, so the model's optimum is the optimum over all
    plans (circuit sets x forwarding tables). An EPS hop only ever leads to a
    relay that crosses a circuit next: any other EPS hop is dominated (it only
    adds load). Size grows with (OCS nodes)^2 x switches: small instances.

``switch`` formulation -- aggregated, for paper scale and beyond
    Integer ``n[A,B]``: circuits between switches A and B (the port budget
    ``ports x k_A`` per switch). Flows per destination switch on the switch
    graph (circuit arcs, optional layers for ``hop_limit``) and fall-back arcs
    over the uplinks. Circuits are slots (``n = sum z_j``, each slot at most
    ``ocs_bw x T``); relay nodes are host slots of every switch sorted by
    their base EPS load (each at most ``bw x T - base``; the relayed bytes
    enter hosts' down links and leave by their up links, except the bytes a
    host sends over its own circuit or receives off it -- bounded by the
    largest own volumes of ``n`` OCS nodes, a concave envelope). Every plan
    maps to a feasible point of equal ``T``, so its optimum and its LP
    relaxation are *lower bounds* for every plan. What it loses: which node
    hosts which circuit (the best hosts are assumed), integral source-to-relay
    assignment (flows split freely), and own traffic of hosts not sent over
    their circuit. The solution is decomposed into node pairs (communicating
    OCS pairs first, then the least-loaded free OCS nodes), given
    distance-vector tables and a table local search, and scored exactly;
    the gap to the bound is reported, and the status is ``optimal`` only
    when the plan meets it.

:func:`solve_exact` is the ``ilp`` method; :func:`lp_bound` the LP-relaxation
bound for instances too large to solve.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import pulp

from models.backends import solve as backend_solve
from planner.errors import TopoplanError

NODE_MAX_VARS = 2_000  # the node formulation is used (auto) up to this many variables
SWITCH_MAX_VARS = 150_000  # beyond this (estimated) size the switch MILP gives way to LP rounding
REL_TOL = 1e-6  # relative tolerance of "the plan meets the bound"
WEIGHT_UPLINK = 1e-3  # weighted objective: T / T_ref + WEIGHT_UPLINK * uplink bytes / large bytes


@dataclass
class Model:
    """A built model: the PuLP problem, its variables by role, and what extraction needs."""

    kind: str
    prob: pulp.LpProblem
    T: pulp.LpVariable
    uplink: pulp.LpAffineExpression
    vars: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)

    @property
    def n_variables(self) -> int:
        return len(self.prob.variables())


def _var(prob, name, lowBound=None, upBound=None, cat="Continuous"):
    """A variable of ``prob`` (PuLP >= 3 attaches variables to their model; older PuLP has no add_variable)."""
    if hasattr(prob, "add_variable"):
        return prob.add_variable(name, lowBound, upBound, cat=cat)
    return pulp.LpVariable(name, lowBound, upBound, cat=cat)


# -- node formulation ---------------------------------------------------------

def node_size(problem) -> int:
    """Rough variable count of the node formulation (to choose the formulation)."""
    p = problem
    k = int(p.is_ocs.sum())
    s = p.n_switches
    ocs_of = p.ocs_of_switch()
    own = p.own_out()
    dests = [b for b in range(s) if p.own_in()[p.node_switch == b].sum() > 0]
    total = k * (k - 1) // 2
    for b in dests:
        n_comm = 1 + int(sum(1 for t in ocs_of[b] if p.own_in()[t].sum() > 0))
        routers = k - len(ocs_of[b]) + int(((own[:, b] > 0) & ~p.is_ocs).sum())
        opts = max(len(o) for o in ocs_of) + k
        total += routers * opts * (1 + n_comm)
    return total


def build_node_model(problem, *, T_max: float, T_floor: float = 0.0, name="circuits_node") -> Model:
    """The exact node-level MILP (see the module docstring).

    Scaled for the solvers: bytes in units of ``U = ocs_bw x T_max`` and the
    bound as ``T / T_max`` (variable ``T``), so coefficients are O(1).
    """
    p = problem
    n, s = p.n_nodes, p.n_switches
    sw = p.node_switch
    ocs = p.ocs_nodes.tolist()
    ocs_of = [o.tolist() for o in p.ocs_of_switch()]
    H = p.hop_limit
    U = p.ocs_bw_Bps * T_max
    sb = 1.0 / U
    beta = p.ocs_bw_Bps * T_max * sb
    bw = p.node_bw_Bps * T_max * sb
    prob = pulp.LpProblem(name, pulp.LpMinimize)
    T = _var(prob, "T", lowBound=T_floor / T_max, upBound=1.0)
    # circuits
    x = {}
    for i, u in enumerate(ocs):
        for v in ocs[i + 1:]:
            if sw[u] != sw[v]:
                x[(u, v)] = _var(prob, f"x_{u}_{v}", cat="Binary")
    xs = lambda u, v: x[(min(u, v), max(u, v))]  # noqa: E731
    for u in ocs:
        inc = [xs(u, v) for v in ocs if sw[v] != sw[u]]
        if inc:
            prob += pulp.lpSum(inc) <= p.ports, f"ports_{u}"
    lim = p.circuit_limit()
    if x and lim < len(x):
        prob += pulp.lpSum(x.values()) <= lim, "max_circuits"
    # demand per (source node, destination node)
    W = {}
    for a, b, w in zip(p.large_src.tolist(), p.large_dst.tolist(), (p.large_bytes * sb).tolist()):
        W[(a, b)] = W.get((a, b), 0.0) + w
    own_in_tot = np.zeros(n)
    np.add.at(own_in_tot, p.large_dst, p.large_bytes * sb)
    up = {u: [] for u in range(n)}     # extra bytes on node up links (lists of expressions)
    down = {u: [] for u in range(n)}
    uu = {a: [] for a in range(s)}
    ud = {a: [] for a in range(s)}
    circ_load: dict[tuple[int, int], list] = {}
    y: dict[tuple[int, int, str, int], pulp.LpVariable] = {}
    carried: dict[tuple[int, int], list] = {}   # (node, destination switch) -> its outgoing flows
    routers_of: dict[int, list[int]] = {}
    for B in range(s):
        dests_B = [b for b in range(n) if sw[b] == B and own_in_tot[b] > 0]
        if not dests_B:
            continue
        ocs_dest = [t for t in dests_B if p.is_ocs[t]]
        other = [b for b in dests_B if not p.is_ocs[b]]
        commodities = [("t", t, [t]) for t in ocs_dest] + ([("agg", B, other)] if other else [])
        own_B = {}
        for (a, b), w in W.items():
            if sw[b] == B:
                own_B[a] = own_B.get(a, 0.0) + w
        routers = sorted(set(u for u in ocs if sw[u] != B) | {a for a in own_B if sw[a] != B})
        routers_of[B] = routers
        rset = set(routers)
        # next-hop options per router
        opts: dict[int, list[tuple[str, int]]] = {}
        for u in routers:
            o = [("fb", -1)]
            o += [("eps", q) for q in ocs_of[sw[u]] if q != u and q in rset]
            if p.is_ocs[u]:
                o += [("c", v) for v in ocs if sw[v] != sw[u] and (H is None or H > 1 or sw[v] == B)]
            opts[u] = o
            for kind, h in o:
                y[(u, B, kind, h)] = _var(prob, f"y_{u}_{B}_{kind}{h if h >= 0 else ''}", cat="Binary")
            prob += pulp.lpSum(y[(u, B, k_, h)] for k_, h in o) == 1, f"one_hop_{u}_{B}"
            for kind, h in o:
                if kind == "c":
                    prob += y[(u, B, kind, h)] <= xs(u, h), f"hop_on_circuit_{u}_{B}_{h}"
        for u in routers:
            for kind, h in opts[u]:
                if kind == "eps":  # the relay must cross a circuit next
                    prob += y[(u, B, "eps", h)] <= pulp.lpSum(y[(h, B, "c", v)] for k_, v in opts[h] if k_ == "c"), \
                        f"relay_crosses_{u}_{B}_{h}"
        if H is not None:
            cnt = {u: _var(prob, f"hops_{u}_{B}", lowBound=0, upBound=H) for u in routers}
            for u in routers:
                for kind, h in opts[u]:
                    if kind == "fb":
                        continue
                    nxt = cnt[h] if h in cnt else 0
                    prob += cnt[u] >= nxt + (1 if kind == "c" else 0) - (H + 1) * (1 - y[(u, B, kind, h)]), \
                        f"hop_count_{u}_{B}_{kind}{h}"
        for kind_c, key_c, members in commodities:
            supply = {}
            for (a, b), w in W.items():
                if b in members:
                    supply[a] = supply.get(a, 0.0) + w
            M = sum(supply.values())
            tag = f"{kind_c}{key_c}"
            phi = {}
            fb = {}
            inflow = {u: [] for u in routers}
            arrive: dict[int, list] = {}
            for u in routers:
                for kind, h in opts[u]:
                    if kind == "fb":
                        fb[u] = _var(prob, f"fb_{tag}_{u}", lowBound=0)
                        prob += fb[u] <= M * y[(u, B, "fb", -1)], f"fb_on_{tag}_{u}"
                        continue
                    f = _var(prob, f"f_{tag}_{u}_{kind}{h}", lowBound=0)
                    phi[(u, kind, h)] = f
                    prob += f <= M * y[(u, B, kind, h)], f"flow_on_{tag}_{u}_{kind}{h}"
                    if sw[h] == B:
                        arrive.setdefault(h, []).append(f)
                    else:
                        inflow[h].append(f)
            for u in routers:
                out = [phi[(u, k_, h)] for k_, h in opts[u] if k_ != "fb"] + [fb[u]]
                carried.setdefault((u, B), []).extend(out)
                prob += pulp.lpSum(out) == supply.get(u, 0.0) + pulp.lpSum(inflow[u]), f"conserve_{tag}_{u}"
            # loads
            for (u, kind, h), f in phi.items():
                if kind == "eps":
                    up[u].append(f)
                    down[h].append(f)
                else:
                    circ_load.setdefault((u, h), []).append(f)
            for u, f in fb.items():
                up[u].append(f)
                uu[sw[u]].append(f)
                ud[B].append(f)
            for pnode, fl in arrive.items():
                if kind_c == "t" and pnode == key_c:
                    down[pnode].append(-pulp.lpSum(fl))  # arrives on its own circuit: no EPS delivery
                else:
                    up[pnode].append(pulp.lpSum(fl))  # delivered from the arrival node
    # capacities
    # every source routes its own large traffic (it is in the flows); deliveries are in own_in_tot
    base_up = p.base_up_B * sb
    base_down = p.base_down_B * sb + own_in_tot
    for u in range(n):
        e_up = pulp.lpSum(up[u]) + float(base_up[u])
        e_dn = pulp.lpSum(down[u]) + float(base_down[u])
        if up[u]:
            prob += e_up <= float(bw[u]) * T, f"cap_up_{u}"
        else:
            T.lowBound = max(T.lowBound or 0.0, float(base_up[u] / bw[u]))
        if down[u]:
            prob += e_dn <= float(bw[u]) * T, f"cap_down_{u}"
        else:
            T.lowBound = max(T.lowBound or 0.0, float(base_down[u] / bw[u]))
    up_links = []
    for a in range(s):
        eu = pulp.lpSum(uu[a]) + float(p.base_uplink_up_B[a] * sb)
        ed = pulp.lpSum(ud[a]) + float(p.base_uplink_down_B[a] * sb)
        up_links.append(eu)
        if p.uplinks_shared:
            prob += eu <= p.up_bw_Bps * T_max * sb * T, f"cap_uplink_up_{a}"
            prob += ed <= p.up_bw_Bps * T_max * sb * T, f"cap_uplink_down_{a}"
    for (u, v), fl in circ_load.items():
        prob += pulp.lpSum(fl) <= beta * T, f"cap_circuit_{u}_{v}"
    T.lowBound = max(T.lowBound or 0.0, float((p.base_intra_B / p.intra_bw_Bps).max(initial=0.0)) / T_max)
    uplink = pulp.lpSum(up_links)
    prob += T
    return Model("node", prob, T, uplink, {"x": x, "y": y, "carried": carried}, {"routers": routers_of, "T_scale": T_max, "byte_scale": U})


def extract_node_plan(problem, model: Model, with_carried: bool = False):
    """Circuits and next-hop array of a solved node model.

    Entries only where traffic flows: a next hop chosen for a node that
    carries nothing is arbitrary (it may even close a cycle of empty entries).
    """
    x, y, carried = model.vars["x"], model.vars["y"], model.vars["carried"]
    circuits = sorted(k for k, v in x.items() if (v.value() or 0) > 0.5)
    nh = np.full((problem.n_nodes, problem.n_switches), -1, dtype=np.int64)
    flows = np.zeros((problem.n_nodes, problem.n_switches), dtype=bool)
    for (u, B), fl in carried.items():
        flows[u, B] = sum((f.value() or 0.0) for f in fl) > 1e-9
    for (u, B, kind, h), var in y.items():
        if kind != "fb" and (var.value() or 0) > 0.5 and flows[u, B]:
            nh[u, B] = h
    return (circuits, nh, flows) if with_carried else (circuits, nh)


# -- switch formulation -------------------------------------------------------

def _envelope(prob, lhs, count_expr, values_desc, name):
    """``lhs <= sum of the largest count_expr values`` (concave, exact at integers) as tangent cuts."""
    v = np.asarray(values_desc, dtype=float)
    v = v[v > 0]
    if not len(v):
        prob += lhs <= 0, f"{name}_zero"
        return
    cum = np.concatenate([[0.0], np.cumsum(v)])
    for m in range(len(v)):
        prob += lhs <= float(cum[m]) + float(v[m]) * (count_expr - m), f"{name}_{m}"
    prob += lhs <= float(cum[-1]), f"{name}_all"


def candidate_pairs(problem, which: str = "auto") -> list[tuple[int, int]]:
    """Switch pairs that may get circuits: all (small S) or the pairs that exchange large traffic."""
    s = problem.n_switches
    k = np.array([len(o) for o in problem.ocs_of_switch()])
    W = problem.switch_bytes()
    out = []
    for a in range(s):
        for b in range(a + 1, s):
            if k[a] == 0 or k[b] == 0:
                continue
            if which == "all" or (which == "auto" and s <= 40) or W[a, b] + W[b, a] > 0:
                out.append((a, b))
    return out


def _circuit_distance(adj, B, s):
    """Fewest circuits from every switch to ``B`` over the candidate arcs (``adj[c]``: switches with an arc into c)."""
    dist = np.full(s, np.iinfo(np.int64).max // 4, dtype=np.int64)
    dist[B] = 0
    frontier = [B]
    while frontier:
        nxt = []
        for c in frontier:
            for a in adj.get(c, ()):
                if dist[a] > dist[c] + 1:
                    dist[a] = dist[c] + 1
                    nxt.append(a)
        frontier = nxt
    return dist


def build_switch_model(problem, *, T_max: float, T_floor: float = 0.0, pairs=None, relax: bool = False,
                       slots: bool | None = None, name="circuits_switch") -> Model:
    """The aggregated switch-level model (a relaxation of the node problem; see the module docstring).

    Scaled like :func:`build_node_model` (bytes / ``ocs_bw x T_max``, ``T / T_max``).
    """
    p = problem
    s = p.n_switches
    P = p.ports
    H = p.hop_limit
    U = p.ocs_bw_Bps * T_max
    sb = 1.0 / U
    beta = p.ocs_bw_Bps * T_max * sb
    cat_b = "Continuous" if relax else "Binary"
    ocs_of = [o.tolist() for o in p.ocs_of_switch()]
    k = np.array([len(o) for o in ocs_of])
    pairs = candidate_pairs(p) if pairs is None else pairs
    W = p.switch_bytes() * sb
    own_out, own_in = p.own_out() * sb, p.own_in() * sb
    prob = pulp.LpProblem(name, pulp.LpMinimize)
    T = _var(prob, "T", lowBound=T_floor / T_max, upBound=1.0)
    # circuits per switch pair: ordered slots, each at most ocs_bw x T (exact); or, for many pairs
    # (slots=False), one integer count with the looser capacity count x ocs_bw x T_max
    if slots is None:
        slots = len(pairs) <= 300
    nvar, z, caps = {}, {}, {}
    for a, b in pairs:
        cap = int(min(P * k[a], P * k[b], k[a] * k[b], p.circuit_limit()))
        if cap <= 0:
            continue
        caps[(a, b)] = cap
        if slots:
            z[(a, b)] = [_var(prob, f"z_{a}_{b}_{j}", cat=cat_b, lowBound=0, upBound=1) for j in range(cap)]
            nvar[(a, b)] = pulp.lpSum(z[(a, b)])
            for j in range(cap - 1):
                prob += z[(a, b)][j] >= z[(a, b)][j + 1], f"slot_order_{a}_{b}_{j}"
        else:
            nvar[(a, b)] = _var(prob, f"n_{a}_{b}", lowBound=0, upBound=cap, cat="Continuous" if relax else "Integer")
    pairs = list(nvar)
    n_of = {a: pulp.lpSum(nvar[q] for q in pairs if a in q) for a in range(s)}
    for a in range(s):
        if k[a] and any(a in q for q in pairs):
            prob += n_of[a] <= P * int(k[a]), f"ports_{a}"
    if pairs and p.circuit_limit() < sum(caps.values()):
        prob += pulp.lpSum(nvar.values()) <= p.circuit_limit(), "max_circuits"
    arcs = [(a, b) for a, b in pairs] + [(b, a) for a, b in pairs]
    dests = [b for b in range(s) if W[:, b].sum() > 0]
    # Layers: a flow's circuit count so far. With a hop limit H, states 0..H (exact); without,
    # state 0 (at the source switch) and state 1 (arrived over a circuit: "one or more"). Layer-1
    # arcs carry a message's first circuit, so own traffic of a switch's nodes is told apart from
    # traffic relayed through it (needed for the skips below).
    if H is None:
        layers, states = (1, 2), (0, 1)
        dep = {1: 0, 2: 1}
        arr = {1: 1, 2: 1}
    else:
        layers, states = tuple(range(1, H + 1)), tuple(range(0, H + 1))
        dep = {L: L - 1 for L in layers}
        arr = {L: L for L in layers}
    f = {}   # (B, layer, a, c) -> bytes of commodity B (destination switch) on circuit arc a->c
    g = {}   # (B, state, a) -> bytes of commodity B falling back to the uplinks at switch a
    out_of, in_of = {}, {}
    by_arc: dict[tuple[int, int], list] = {}
    by_arc_c: dict[tuple[int, int], dict] = {}      # arc -> (commodity, first circuit?) -> flows
    adj: dict[int, list] = {}
    for a, c in arcs:
        adj.setdefault(c, []).append(a)
    for B in dests:
        reach = _circuit_distance(adj, B, s) if H is not None else None
        for (a, c) in arcs:
            if a == B:
                continue
            for L in layers:
                if H is not None and reach[c] > H - L:
                    continue  # from c, B is out of reach with the circuits left
                v = _var(prob, f"f_{B}_{L}_{a}_{c}", lowBound=0)
                f[(B, L, a, c)] = v
                out_of.setdefault((B, dep[L], a), []).append(v)
                if c != B:
                    in_of.setdefault((B, arr[L], c), []).append(v)
                by_arc.setdefault((a, c), []).append(v)
                by_arc_c.setdefault((a, c), {}).setdefault((B, L == 1), []).append(v)
        for a in range(s):
            if a == B:
                continue
            for st in states:
                v = _var(prob, f"g_{B}_{st}_{a}", lowBound=0)
                g[(B, st, a)] = v
                supply = float(W[a, B]) if st == 0 else 0.0
                prob += pulp.lpSum(out_of.get((B, st, a), []) + [v]) == supply + pulp.lpSum(in_of.get((B, st, a), [])), \
                    f"conserve_{B}_{st}_{a}"
    # circuit capacity per direction
    for (a, b) in pairs:
        for (u, v) in ((a, b), (b, a)):
            load = pulp.lpSum(by_arc.get((u, v), []))
            if slots:
                e = [_var(prob, f"e_{u}_{v}_{j}", lowBound=0) for j in range(len(z[(a, b)]))]
                for j, ej in enumerate(e):
                    prob += ej <= beta * T, f"slot_T_{u}_{v}_{j}"
                    prob += ej <= beta * z[(a, b)][j], f"slot_on_{u}_{v}_{j}"
                prob += load <= pulp.lpSum(e), f"arc_{u}_{v}"
            else:
                prob += load <= beta * nvar[(a, b)], f"arc_{u}_{v}"
                prob += load <= beta * caps[(a, b)] * T, f"arc_T_{u}_{v}"
    # relay hosts per switch
    multi = H is None or H > 1
    for a in range(s):
        mine = [q for q in pairs if a in q]
        if not k[a] or not mine:
            continue
        nodes = np.array(ocs_of[a])
        bwA = float(p.node_bw_Bps[nodes].max()) * T_max * sb
        out_arcs = [v for q in mine for v in by_arc.get((a, q[0] + q[1] - a), [])]
        in_arcs = [v for q in mine for v in by_arc.get((q[0] + q[1] - a, a), [])]
        # bytes that skip a host's EPS link: its own traffic sent over its own circuit (out), or
        # traffic for itself arriving off its own circuit (in), per switch pair and commodity
        own_o_tot, own_i_tot = own_out[nodes].sum(axis=1), own_in[nodes].sum(axis=1)
        parts_o, parts_i = [], []
        for q in mine:
            c = q[0] + q[1] - a
            on_ac = by_arc_c.get((a, c), {})
            on_ca = by_arc_c.get((c, a), {})
            so1 = _var(prob, f"skip_out_{a}_{c}", lowBound=0)
            prob += so1 <= pulp.lpSum(on_ac.get((c, True), [])), f"skip_out_arc_{a}_{c}"
            _envelope(prob, so1, nvar[q], -np.sort(-own_out[nodes, c]), f"env_out_{a}_{c}")
            parts_o.append(so1)
            si1 = _var(prob, f"skip_in_{a}_{c}", lowBound=0)
            prob += si1 <= pulp.lpSum(on_ca.get((a, True), [])), f"skip_in_arc_{a}_{c}"
            _envelope(prob, si1, nvar[q], -np.sort(-own_in[nodes, c]), f"env_in_{a}_{c}")
            parts_i.append(si1)
            if multi:  # own traffic sent on beyond the partner switch / arriving from beyond it
                so2 = _var(prob, f"skip_out_via_{a}_{c}", lowBound=0)
                prob += so2 <= pulp.lpSum(v for (B_, first), vs in on_ac.items() if first and B_ != c for v in vs), \
                    f"skip_out_via_arc_{a}_{c}"
                _envelope(prob, so2, nvar[q], -np.sort(-(own_o_tot - own_out[nodes, c])), f"env_out_via_{a}_{c}")
                si2 = _var(prob, f"skip_in_via_{a}_{c}", lowBound=0)
                prob += si2 <= pulp.lpSum(v for (B_, first), vs in on_ca.items() if not first and B_ == a for v in vs), \
                    f"skip_in_via_arc_{a}_{c}"
                _envelope(prob, si2, nvar[q], -np.sort(-(own_i_tot - own_in[nodes, c])), f"env_in_via_{a}_{c}")
                parts_o.append(so2)
                parts_i.append(si2)
        sig_d, sig_u = pulp.lpSum(parts_o), pulp.lpSum(parts_i)
        _envelope(prob, sig_d, n_of[a], -np.sort(-own_o_tot), f"env_out_{a}")
        _envelope(prob, sig_u, n_of[a], -np.sort(-own_i_tot), f"env_in_{a}")
        tau = None
        if P > 1 and multi:  # a host with two circuits can pass transit straight through
            tau = _var(prob, f"through_{a}", lowBound=0)
            prob += tau <= pulp.lpSum(in_arcs), f"through_le_{a}"
        # hosts' EPS links: base load plus own large traffic, minus what skips (both skips relieve both
        # links: own traffic sent over the own circuit never uses the EPS; traffic arriving for the host
        # itself needs no delivery), plus the relayed bytes; host slots sorted by that load, best first
        own_o_b, own_i_b = own_out[nodes].sum(axis=1), own_in[nodes].sum(axis=1)
        sides = (("down", p.base_down_B[nodes] * sb + own_i_b, out_arcs),
                 ("up", p.base_up_B[nodes] * sb + own_o_b, in_arcs))
        for side, load0, traffic in sides:
            d = np.sort(load0)
            h = [_var(prob, f"host_{side}_{a}_{i}", cat=cat_b, lowBound=0, upBound=1) for i in range(len(nodes))]
            rho = [_var(prob, f"relay_{side}_{a}_{i}", lowBound=None) for i in range(len(nodes))]
            for i in range(len(nodes)):
                di = float(d[i])
                prob += rho[i] <= bwA * T - di * h[i], f"host_T_{side}_{a}_{i}"
                prob += rho[i] <= max(0.0, bwA - di) * h[i], f"host_on_{side}_{a}_{i}"
                prob += rho[i] >= -di * h[i], f"host_lo_{side}_{a}_{i}"
                if i:
                    prob += h[i - 1] >= h[i], f"host_order_{side}_{a}_{i}"
            prob += pulp.lpSum(h) <= n_of[a], f"hosts_{side}_{a}"
            rhs = pulp.lpSum(traffic) - sig_d - sig_u - (tau if tau is not None else 0)
            prob += pulp.lpSum(rho) >= rhs, f"relay_{side}_{a}"
    # uplinks
    g_up: dict[int, list] = {}
    g_dn: dict[int, list] = {}
    for (B, L, a), v in g.items():
        g_up.setdefault(a, []).append(v)
        g_dn.setdefault(B, []).append(v)
    up_links = []
    for a in range(s):
        eu = float(p.base_uplink_up_B[a] * sb) + pulp.lpSum(g_up.get(a, []))
        ed = float(p.base_uplink_down_B[a] * sb) + pulp.lpSum(g_dn.get(a, []))
        up_links.append(eu)
        if p.uplinks_shared:
            prob += eu <= p.up_bw_Bps * T_max * sb * T, f"cap_uplink_up_{a}"
            prob += ed <= p.up_bw_Bps * T_max * sb * T, f"cap_uplink_down_{a}"
    prob += T
    return Model("switch", prob, T, pulp.lpSum(up_links), {"n": nvar, "f": f, "g": g},
                 {"pairs": pairs, "T_scale": T_max, "byte_scale": U})


def switch_size(problem, pairs: str = "auto") -> int:
    """Upper estimate of the switch formulation's flow variables (to choose MILP or LP rounding)."""
    S = problem.n_switches
    mode = pairs if pairs != "auto" else ("all" if S <= 8 else "traffic")
    n_pairs = len(candidate_pairs(problem, mode))
    dests = int((problem.switch_bytes().sum(axis=0) > 0).sum())
    layers = 2 if problem.hop_limit is None else problem.hop_limit
    return 2 * n_pairs * dests * layers


def round_counts(problem, model: Model) -> dict[tuple[int, int], int]:
    """Integral circuit counts from a relaxed switch model: the integer parts, then the largest fractions
    while both switches have free ports (and ``max_circuits`` allows)."""
    k = np.array([len(o) for o in problem.ocs_of_switch()]) * problem.ports
    val = {q: float(pulp.value(e) or 0.0) for q, e in model.vars["n"].items()}
    counts = {q: int(np.floor(v + 1e-6)) for q, v in val.items()}
    used = np.zeros(problem.n_switches, dtype=np.int64)
    for (a, b), c in counts.items():
        used[a] += c
        used[b] += c
    total = sum(counts.values())
    for q in sorted(val, key=lambda q: (-(val[q] - counts[q]), q)):
        a, b = q
        if val[q] - counts[q] > 1e-6 and used[a] < k[a] and used[b] < k[b] and total < problem.circuit_limit():
            counts[q] += 1
            used[a] += 1
            used[b] += 1
            total += 1
    return {q: c for q, c in counts.items() if c > 0}


def extract_switch_counts(model: Model) -> dict[tuple[int, int], int]:
    return {q: int(round(pulp.value(e) or 0)) for q, e in model.vars["n"].items() if round(pulp.value(e) or 0) > 0}


def fallback_sources(problem, model: Model, circuits) -> np.ndarray:
    """Source entries to leave empty so that each switch pair falls back about as much as the model says.

    Per (source switch, destination switch), sources that host no circuit
    are sent to the uplinks, largest first, while the total stays within the
    model's fall-back bytes at the source switch.
    """
    p = problem
    sw = p.node_switch
    own = p.own_out()
    mask = np.zeros((p.n_nodes, p.n_switches), dtype=bool)
    hosts = {x for c in circuits for x in c}
    quota = {}
    for (B, L, a), v in model.vars["g"].items():
        if L == 0:
            quota[(a, B)] = quota.get((a, B), 0.0) + (v.value() or 0.0)
    for (a, B), q in quota.items():
        if q <= 1e-9 * max(1.0, own[:, B].sum()):
            continue
        cand = [u for u in np.flatnonzero((sw == a) & (own[:, B] > 0)).tolist() if u not in hosts]
        cand.sort(key=lambda u: (-own[u, B], u))
        total = 0.0
        for u in cand:
            if total + own[u, B] <= q * (1 + 1e-9) + 1e-6:
                mask[u, B] = True
                total += own[u, B]
    return mask


def decompose(problem, counts: dict[tuple[int, int], int]) -> list[tuple[int, int]]:
    """Switch-pair circuit counts -> node pairs.

    Communicating OCS node pairs first (largest volume first, within the
    counts and the ports), then, per switch, the free OCS nodes with the
    smallest base EPS load host the remaining circuits, the busiest switch
    pairs (most bytes per circuit) choosing first.
    """
    p = problem
    sw = p.node_switch
    free = np.where(p.is_ocs, p.ports, 0).astype(np.int64)
    left = dict(counts)
    out: set[tuple[int, int]] = set()
    u, v, by, _ = p.node_pairs()
    keep = p.is_ocs[u] & p.is_ocs[v] & (sw[u] != sw[v])
    for i in np.flatnonzero(keep)[np.argsort(-by[keep], kind="stable")].tolist():
        a, b = int(u[i]), int(v[i])
        key = (min(sw[a], sw[b]), max(sw[a], sw[b]))
        if left.get(key, 0) > 0 and free[a] > 0 and free[b] > 0:
            out.add((a, b))
            free[a] -= 1
            free[b] -= 1
            left[key] -= 1
    W = p.switch_bytes()
    base = p.base_up_B + p.base_down_B
    ocs_of = p.ocs_of_switch()
    order = sorted((q for q in left if left[q] > 0), key=lambda q: (-(W[q] + W[q[::-1]]) / max(counts[q], 1), q))
    while any(left[q] > 0 for q in order):
        progress = False
        for q in order:
            if left[q] <= 0:
                continue
            a, b = q
            own = p.own_out()
            fa = sorted((x for x in ocs_of[a].tolist() if free[x] > 0), key=lambda x: (base[x] - own[x, b], x))
            fb = sorted((x for x in ocs_of[b].tolist() if free[x] > 0), key=lambda x: (base[x] - own[x, a], x))
            pair = next(((x1, x2) for x1 in fa for x2 in fb if (min(x1, x2), max(x1, x2)) not in out), None)
            if pair is None:
                left[q] = 0
                continue
            x1, x2 = pair
            out.add((min(x1, x2), max(x1, x2)))
            free[x1] -= 1
            free[x2] -= 1
            left[q] -= 1
            progress = True
        if not progress:
            break
    return sorted(out)


# -- solving ------------------------------------------------------------------

def _two_phase(model: Model, *, solver, time_limit, seed, threads, objective, large_bytes, after_first=None):
    """Solve min T, then min uplink bytes with T held at its optimum (lexicographic), or one weighted solve.

    Returns ``(r1, r2, T_bound_s, uplink_bound_B)`` with the bounds in seconds and bytes
    (None when not proven). When the model's lower and upper limits on ``T``
    meet (the incumbent sits on the floor), the first solve is skipped.
    """
    prob, T = model.prob, model.T
    Ts, Bs = model.info["T_scale"], model.info["byte_scale"]
    deadline = None if time_limit is None else time.perf_counter() + time_limit
    if objective == "weighted":
        prob.setObjective(T + WEIGHT_UPLINK * model.uplink / max(large_bytes / Bs, 1e-12))
        r = backend_solve(prob, solver, time_limit=time_limit, seed=seed, threads=threads)
        prob.setObjective(T)
        if r.has_solution and after_first is not None:
            after_first(model)
        return r, r, (T.value() * Ts if r.status == "optimal" else None), None
    lo = T.lowBound or 0.0
    if lo >= (T.upBound or 1.0) * (1 - 1e-9):
        from models.backends import SolverResult

        r1 = SolverResult("optimal", lo, lo, 0.0, 0.0, solver, "T fixed by the floor")
        T1 = T.upBound
    else:
        t1 = None if deadline is None else max(0.1, 0.7 * time_limit)
        r1 = backend_solve(prob, solver, time_limit=t1, seed=seed, threads=threads)
        if not r1.has_solution:
            return r1, None, (r1.bound * Ts if r1.bound is not None else None), None
        T1 = T.value()
        if after_first is not None:
            after_first(model)
    bound_T = r1.bound * Ts if r1.bound is not None else None
    old_ub = T.upBound
    prob.setObjective(model.uplink)
    for slack in (1e-6, 1e-4):  # a hair of slack: CBC's presolve may call T <= T1 exactly infeasible
        T.upBound = min(old_ub, T1 * (1 + slack))
        rest = None if deadline is None else max(0.1, deadline - time.perf_counter())
        r2 = backend_solve(prob, solver, time_limit=rest, seed=seed, threads=threads)
        if r2.status != "infeasible":
            break
    T.upBound = old_ub
    prob.setObjective(T)
    up_bound = r2.bound * Bs if (r2.status == "optimal" and r2.bound is not None) else None
    return r1, r2, bound_T, up_bound


def lp_bound(problem, *, solver: str = "highs", T_max: float | None = None) -> float:
    """LP-relaxation lower bound on the communication-time bound of every plan (switch formulation).

    Valid for any circuit set and forwarding tables; cheap enough for
    instances far beyond what the MILPs solve.
    """
    from planner.circuits.bound import floor_s

    floor = floor_s(problem)
    if T_max is None:
        T_max = _incumbent_T(problem)
    m = build_switch_model(problem, T_max=max(T_max, floor), T_floor=floor, relax=True)
    r = backend_solve(m.prob, solver)
    if r.status != "optimal":
        raise TopoplanError(f"LP relaxation failed: {r.status} ({r.message})")
    return float(max(floor, m.T.value() * m.info["T_scale"]))


def _incumbent_T(problem) -> float:
    from planner.circuits.bound import evaluate

    nh = np.full((problem.n_nodes, problem.n_switches), -1, dtype=np.int64)
    return evaluate(problem, [], nh).congestion_s


def solve_exact(problem, *, time_limit=None, seed=0, solver="cbc", formulation="auto", objective="lexicographic",
                threads=None, pairs: str = "auto"):
    """The ``ilp`` method: the exact model, with the papers' heuristics (and matching) as incumbents.

    Returns the best plan found -- the model's plan, or an incumbent (after a
    table local search) when the model could not beat it in time -- with the
    proven lower bound on ``T`` and the gap. Status ``optimal`` when the plan
    meets the bound (and, in lexicographic mode, the uplink-bytes bound),
    ``timeout`` when the solver ran out of time, else ``feasible``.

    ``pairs`` (switch formulation): switch pairs that may get circuits --
    ``all``, ``traffic`` (pairs that exchange large traffic) or ``auto``
    (all up to 8 switches). With ``traffic`` the bound comes from the LP
    relaxation over all pairs, so it stays valid for every plan.
    """
    from planner.circuits.bound import better, floor_s
    from planner.circuits.forwarding import LOAD_SHARING, polish_tables
    from planner.circuits.problem import result_from_plan

    if objective not in ("lexicographic", "weighted"):
        raise TopoplanError(f"field 'objective': 'lexicographic' or 'weighted', got {objective!r}")
    if formulation not in ("auto", "node", "switch", "lp"):
        raise TopoplanError(f"field 'formulation': auto, node, switch or lp, got {formulation!r}")
    if pairs not in ("auto", "all", "traffic"):
        raise TopoplanError(f"field 'pairs': auto, all or traffic, got {pairs!r}")
    from models.backends import available

    if not available(solver):
        backend_solve(None, solver)  # raises the one-line "not available" error
    t0 = time.perf_counter()
    deadline = None if time_limit is None else t0 + time_limit
    left = lambda: None if deadline is None else max(0.05, deadline - time.perf_counter())  # noqa: E731
    best = _Best()
    incs = []
    for name, circ, nh in _incumbents(problem, seed):
        best.offer(problem, circ, nh, name)
        incs.append((name, circ, best.last_key))
    floor = floor_s(problem)
    if formulation == "auto":
        formulation = "node" if node_size(problem) <= NODE_MAX_VARS else "switch"
    if formulation != "node":
        # the heuristics' circuits with congestion-aware tables (the papers' tables relay everything)
        for name, circ, _ in sorted(incs, key=lambda x: x[2])[:2]:
            _realize(problem, circ, best, name + "+tables", None if time_limit is None else 0.05 * time_limit)
    T_max = max(best.ev.congestion_s, floor)
    info = {"formulation": formulation, "incumbent": best.name, "solver": solver}
    bound_T, status, message = floor, "feasible", ""
    large = float(problem.large_bytes.sum())
    if formulation == "lp":
        bound_T = max(floor, lp_bound(problem, solver=_lp_solver(solver), T_max=T_max))
        message = "LP-relaxation bound only; the plan is the best heuristic's after table local search"
        proven = False
    elif formulation == "node":
        m = build_node_model(problem, T_max=T_max, T_floor=floor)
        info["variables"] = m.n_variables
        phase_left = left()
        r1, r2, b, _ = _two_phase(m, solver=solver, time_limit=phase_left, seed=seed, threads=threads,
                                  objective=objective, large_bytes=large)
        info["solver_status"] = [r1.status] + ([r2.status] if r2 is not None and r2 is not r1 else [])
        if b is not None:
            bound_T = max(bound_T, b)
        if r2 is not None and r2.has_solution:
            circ, nh, carried = extract_node_plan(problem, m, with_carried=True)
            best.offer(problem, circ, _fill_tables(problem, circ, nh, carried), "milp")
        proven = r1.status == "optimal" and (objective == "weighted" or (r2 is not None and r2.status == "optimal"))
        if proven:
            status = "optimal"
    elif formulation == "switch" and switch_size(problem, pairs) > SWITCH_MAX_VARS:
        # too large for the MILP in time: circuit counts from the LP relaxation of the single-circuit
        # model (rounded within the ports), then congestion-aware tables and local search
        import dataclasses

        info["formulation"] = "switch-lp-rounding"
        one = dataclasses.replace(problem, hop_limit=1, _cache={})
        m = build_switch_model(one, T_max=T_max, T_floor=floor, pairs=candidate_pairs(one, "traffic"), slots=False,
                               relax=True)
        info["variables"] = m.n_variables
        lp_solver = _lp_solver(solver)
        r = backend_solve(m.prob, lp_solver, time_limit=None if deadline is None else 0.3 * left())
        info["solver_status"] = [r.status]
        if r.has_solution and objective == "lexicographic":  # then fewest uplink bytes: circuits where traffic is
            T1, ub = m.T.value(), m.T.upBound
            m.T.upBound = T1 * (1 + 1e-6)
            m.prob.setObjective(m.uplink)
            r2 = backend_solve(m.prob, lp_solver, time_limit=None if deadline is None else 0.3 * left())
            info["solver_status"].append(r2.status)
            m.T.upBound = ub
            if not r2.has_solution:
                r = backend_solve(m.prob, lp_solver)
        if r.has_solution:
            circ = decompose(problem, round_counts(problem, m))
            _realize(problem, circ, best, "lp-rounding", None if deadline is None else 0.8 * left())
            if problem.hop_limit == 1 and r.status == "optimal":
                bound_T = max(bound_T, m.T.value() * m.info["T_scale"])
        message = ("large instance: circuits from the rounded LP relaxation; bound = "
                   + ("its LP value" if problem.hop_limit == 1 else "the fixed-link floor (lp_bound() gives the LP bound)"))
        proven = False
    else:
        S = problem.n_switches
        mode = pairs if pairs != "auto" else ("all" if S <= 8 else "traffic")
        info["pairs"] = mode
        if mode == "traffic":  # the restricted model's optimum is no bound for every plan: take the full LP's
            bound_T = max(bound_T, lp_bound(problem, solver=_lp_solver(solver), T_max=T_max))
        m = build_switch_model(problem, T_max=T_max, T_floor=floor, pairs=candidate_pairs(problem, mode))
        info["variables"] = m.n_variables
        polish_s = None if time_limit is None else 0.1 * time_limit

        def realize(model, tag):
            circ = decompose(problem, extract_switch_counts(model))
            budget = None if polish_s is None else min(polish_s, left() / 4)
            _realize(problem, circ, best, tag, budget, fallback_sources(problem, model, circ))

        solve_left = None if deadline is None else max(0.1, 0.7 * left())
        r1, r2, b, uplink_lb = _two_phase(m, solver=solver, time_limit=solve_left, seed=seed, threads=threads,
                                          objective=objective, large_bytes=large,
                                          after_first=lambda mm: realize(mm, "milp"))
        info["solver_status"] = [r1.status] + ([r2.status] if r2 is not None and r2 is not r1 else [])
        if b is not None and mode == "all":
            bound_T = max(bound_T, b)
        if r2 is not None and r2 is not r1 and r2.has_solution:
            realize(m, "milp")
        met_u = objective == "weighted" or (mode == "all" and uplink_lb is not None
                                            and best.ev.uplink_bytes <= uplink_lb * (1 + REL_TOL) + 1.0)
        proven = met_u and best.ev.congestion_s <= bound_T * (1 + REL_TOL)
        if proven:
            status = "optimal"
        info["uplink_bound_bytes"] = uplink_lb
    if not proven:
        # local search on the tables of the best plan with the time left (never worse)
        circ, nh = best.plan
        best.offer(problem, circ, polish_tables(problem, circ, nh, time_limit=left()), best.name + "+polish")
        if "timeout" in info.get("solver_status", []):
            status = "timeout"
    info["plan_from"] = best.name
    info["wall_model_s"] = time.perf_counter() - t0
    circ, nh = best.plan
    lb = float(min(bound_T, best.ev.congestion_s))
    exact_tables = formulation == "node" and best.name == "milp"
    res = result_from_plan(problem, circ, nh, status=status, bound=lb,
                           load_sharing=("exact: the model's own next hops (one per node and destination switch)"
                                         if exact_tables else LOAD_SHARING + " Then a local search on the bound."),
                           message=message, options=info)
    res.metrics["lower_bound_s"] = lb
    # the first objective is proven optimal when the plan meets the bound, whatever the uplink bytes
    res.metrics["bound_proven_optimal"] = bool(best.ev.congestion_s <= bound_T * (1 + REL_TOL))
    return res


class _Best:
    """The best plan so far (lexicographic: bound, then uplink bytes)."""

    def __init__(self):
        self.ev = self.plan = self.name = self.last_key = None

    def offer(self, problem, circ, nh, name):
        from planner.circuits.bound import better, evaluate

        ev = evaluate(problem, circ, nh)
        self.last_key = (ev.congestion_s, ev.uplink_bytes)
        if better(ev, self.ev):
            self.ev, self.plan, self.name = ev, (list(circ), nh), name


def _incumbents(problem, seed):
    """The heuristics' plans: three-step, greedy, sp, matching (small instances) and EPS only."""
    from planner.circuits import heuristics
    from planner.circuits.forwarding import array_from_tables

    fns = [("three-step", heuristics.three_step), ("greedy", heuristics.greedy),
           ("sp", heuristics.switch_partitioning), ("none", heuristics.eps_only)]
    if int(problem.is_ocs.sum()) <= 256:
        fns.append(("matching", heuristics.matching))
    for name, fn in fns:
        r = fn(problem, seed=seed)
        yield name, [tuple(c) for c in r.plan["circuits"]], array_from_tables(r.plan["forwarding"], problem.n_nodes,
                                                                            problem.n_switches)


def _lp_solver(solver: str) -> str:
    """LPs go to HiGHS when the MILP solver is CBC (faster on large LPs); otherwise the same solver."""
    from models.backends import available

    return "highs" if solver == "cbc" and available("highs") else solver


def _realize(problem, circ, best, tag, polish_s, fallback=None):
    """Tables for a circuit set -- least-congested routing, and the model's fall-backs on distance-vector
    tables when given -- each improved by the table local search; the best is offered to ``best``."""
    from planner.circuits.forwarding import congestion_tables, distance_vector, polish_tables

    cands = [congestion_tables(problem, circ)]
    if fallback is not None:
        cands.append(distance_vector(problem, circ, fallback=fallback))
    for nh in cands:
        best.offer(problem, circ, polish_tables(problem, circ, nh, time_limit=polish_s), tag)


def _fill_tables(problem, circuits, nh, carried):
    """Give nodes that carry no planned traffic the distance-vector entries (kept for completeness).

    Nodes that carry traffic keep the model's choice, including an empty
    entry (fall back). A filled entry is dropped if it would loop or cross
    more circuits than the hop limit.
    """
    from planner.circuits.forwarding import distance_vector

    dv = distance_vector(problem, circuits)
    out = nh.copy()
    fill = (out < 0) & (dv >= 0) & ~carried
    out[fill] = dv[fill]
    H = problem.hop_limit
    net = problem.network()
    links = net.circuit_links(circuits)
    rows, cols = np.nonzero(fill)
    # The filled entries are checked in order, each on the tables as the earlier checks left them: the
    # tables change only where an entry is dropped, so walk all entries not checked yet at once, drop the
    # first wrong one (loop, non-neighbour, too many circuits) and walk the rest again.
    i = 0
    while i < len(rows):
        w = net.relay_hops(rows[i:], cols[i:], out, links, errors="flag")
        wrong = w.bad | (w.n_circuits > H if H is not None else False)
        if not wrong.any():
            break
        j = i + int(np.flatnonzero(wrong)[0])
        out[rows[j], cols[j]] = -1
        i = j + 1
    return out
