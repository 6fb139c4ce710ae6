"""The node formulation of circuit assignment: exact for the plans the simulator runs.

Objective, scaling and the two-objective solve: :mod:`topoplan.formulations.circuits_common`.

Binary ``x[u,v]``: a circuit between OCS nodes u, v (different switches;
at most ``ports`` per node; at most ``circuit_limit``). Binary
``y[n,S,h]``: the single next hop of node n towards switch S (fall back,
an EPS hop to an OCS node h under n's switch, or the circuit to h).
Flows per commodity -- one per OCS destination node plus one per switch
for its other nodes, which is exact because only an OCS node can receive
a message straight off a circuit -- follow the chosen next hops
(``flow <= demand * y``), so every node sends all its traffic for a
switch one way, as a forwarding table does; multi-hop through other
switches is allowed, up to ``hop_limit`` circuits (MTZ-style counters).
Link loads are the ones :func:`topoplan.problems.circuits.bound.evaluate` computes
for the extracted plan, so the model's optimum is the optimum over all
plans (circuit sets x forwarding tables). An EPS hop only ever leads to a
relay that crosses a circuit next: any other EPS hop is dominated (it only
adds load). Size grows with (OCS nodes)^2 x switches: small instances.

Sections: data (:class:`~topoplan.formulations.circuits_common.CircuitData`, from the caller) -> :func:`build`
(variables, constraints, objective) -> solve (:func:`topoplan.formulations.backends.solve`, or
:func:`~topoplan.formulations.circuits_common.two_phase`) -> :func:`decode`.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np
import pulp

from topoplan.formulations.circuits_common import CircuitData, Model, new_var

__all__ = ["size", "build", "decode", "NodeSolution"]


class NodeSolution(NamedTuple):
    """A decoded node model: ``circuits`` (sorted node pairs), ``next_hop`` (N x S, -1: fall back to the
    uplinks or no traffic) and ``carried`` (N x S: node n forwards traffic for switch S)."""

    circuits: list
    next_hop: np.ndarray
    carried: np.ndarray


def size(data: CircuitData) -> int:
    """Rough variable count of the node formulation (to choose the formulation)."""
    p = data
    k = int(p.is_ocs.sum())
    s = p.n_switches
    ocs_of = p.ocs_of_switch
    own = p.own_out
    dests = [b for b in range(s) if p.own_in[p.node_switch == b].sum() > 0]
    total = k * (k - 1) // 2
    n_parts = max(1, len(data.steps))
    for b in dests:
        n_comm = 1 + int(sum(1 for t in ocs_of[b] if p.own_in[t].sum() > 0))
        routers = k - len(ocs_of[b]) + int(((own[:, b] > 0) & ~p.is_ocs).sum())
        opts = max(len(o) for o in ocs_of) + k
        total += routers * opts * (1 + n_parts * n_comm)
    return total


def build(data: CircuitData, *, T_max: float, T_floor: float = 0.0, name="circuits_node"):
    """The exact node-level MILP (see the module docstring).

    Scaled for the solvers: bytes in units of ``U = ocs_bw x T_max`` and the
    bound as ``T / T_max`` (variable ``T``), so coefficients are O(1). ``T_floor``
    (seconds) is a known lower bound on ``T``.

    Returns ``(model, decode)``: the :class:`~topoplan.formulations.circuits_common.Model` and its decoder
    (``decode(result=None)`` -> :class:`NodeSolution`, read from the solved model's variables).
    """
    p = data
    n, s = p.n_nodes, p.n_switches
    sw = p.node_switch
    ocs = p.ocs_nodes.tolist()
    ocs_of = [o.tolist() for o in p.ocs_of_switch]
    H = p.hop_limit
    U = p.ocs_bw_Bps * T_max
    sb = 1.0 / U
    beta = p.ocs_bw_Bps * T_max * sb
    bw = p.node_bw_Bps * T_max * sb
    prob = pulp.LpProblem(name, pulp.LpMinimize)
    T = new_var(prob, "T", lowBound=T_floor / T_max, upBound=1.0)
    # circuits
    x = {}
    for i, u in enumerate(ocs):
        for v in ocs[i + 1:]:
            if sw[u] != sw[v]:
                x[(u, v)] = new_var(prob, f"x_{u}_{v}", cat="Binary")
    xs = lambda u, v: x[(min(u, v), max(u, v))]  # noqa: E731
    for u in ocs:
        inc = [xs(u, v) for v in ocs if sw[v] != sw[u]]
        if inc:
            prob += pulp.lpSum(inc) <= p.ports, f"ports_{u}"
    lim = p.circuit_limit
    if x and lim < len(x):
        prob += pulp.lpSum(x.values()) <= lim, "max_circuits"
    parts = tuple(p.steps) or (p,)
    if len(parts) == 1:
        Ts = [T]
    else:
        Ts = [new_var(prob, f"T_s{j}", lowBound=0, upBound=1.0) for j in range(len(parts))]
        prob += T == pulp.lpSum(Ts), "step_time"
    ptag = ["" if len(parts) == 1 else f"s{j}_" for j in range(len(parts))]

    def demand(d):
        """Large bytes per (source node, destination node) of one traffic, in model units."""
        out = {}
        for a, b, w in zip(d.large_src.tolist(), d.large_dst.tolist(), (d.large_bytes * sb).tolist()):
            out[(a, b)] = out.get((a, b), 0.0) + w
        return out

    W = demand(p)                      # the whole traffic decides the routing choices
    Wp = [W] if len(parts) == 1 else [demand(d) for d in parts]
    own_in_tot = np.zeros(n)
    np.add.at(own_in_tot, p.large_dst, p.large_bytes * sb)
    own_in_p = []
    for d in parts:
        o = np.zeros(n)
        np.add.at(o, d.large_dst, d.large_bytes * sb)
        own_in_p.append(o)
    # extra bytes per traffic part: node up / down links, uplinks, circuits (lists of expressions)
    up = [{u: [] for u in range(n)} for _ in parts]
    down = [{u: [] for u in range(n)} for _ in parts]
    uu = [{a: [] for a in range(s)} for _ in parts]
    ud = [{a: [] for a in range(s)} for _ in parts]
    circ_load: list[dict] = [{} for _ in parts]
    y: dict[tuple[int, int, str, int], pulp.LpVariable] = {}
    carried: dict[tuple[int, int], list] = {}   # (node, destination switch) -> its outgoing flows
    routers_of: dict[int, list[int]] = {}
    sources_of: dict[int, list[int]] = {}       # destination switch -> nodes with large traffic for it
    for B in range(s):
        dests_B = [b for b in range(n) if sw[b] == B and own_in_tot[b] > 0]
        if not dests_B:
            continue
        own_B = {}
        for (a, b), w in W.items():
            if sw[b] == B:
                own_B[a] = own_B.get(a, 0.0) + w
        routers = sorted(set(u for u in ocs if sw[u] != B) | {a for a in own_B if sw[a] != B})
        routers_of[B] = routers
        sources_of[B] = sorted(a for a, w in own_B.items() if sw[a] != B and w > 0)
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
                y[(u, B, kind, h)] = new_var(prob, f"y_{u}_{B}_{kind}{h if h >= 0 else ''}", cat="Binary")
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
            cnt = {u: new_var(prob, f"hops_{u}_{B}", lowBound=0, upBound=H) for u in routers}
            for u in routers:
                for kind, h in opts[u]:
                    if kind == "fb":
                        continue
                    nxt = cnt[h] if h in cnt else 0
                    prob += cnt[u] >= nxt + (1 if kind == "c" else 0) - (H + 1) * (1 - y[(u, B, kind, h)]), \
                        f"hop_count_{u}_{B}_{kind}{h}"
        for j, Wj in enumerate(Wp):
            # the flows of one traffic part follow the shared next hops (one table for all steps)
            dests_j = [b for b in dests_B if own_in_p[j][b] > 0]
            commodities = ([("t", tt, [tt]) for tt in dests_j if p.is_ocs[tt]]
                           + ([("agg", B, [b for b in dests_j if not p.is_ocs[b]])]
                              if any(not p.is_ocs[b] for b in dests_j) else []))
            for kind_c, key_c, members in commodities:
                supply = {}
                for (a, b), w in Wj.items():
                    if b in members:
                        supply[a] = supply.get(a, 0.0) + w
                M = sum(supply.values())
                tag = f"{ptag[j]}{kind_c}{key_c}"
                phi = {}
                fb = {}
                inflow = {u: [] for u in routers}
                arrive: dict[int, list] = {}
                for u in routers:
                    for kind, h in opts[u]:
                        if kind == "fb":
                            fb[u] = new_var(prob, f"fb_{tag}_{u}", lowBound=0)
                            prob += fb[u] <= M * y[(u, B, "fb", -1)], f"fb_on_{tag}_{u}"
                            continue
                        f = new_var(prob, f"f_{tag}_{u}_{kind}{h}", lowBound=0)
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
                        up[j][u].append(f)
                        down[j][h].append(f)
                    else:
                        circ_load[j].setdefault((u, h), []).append(f)
                for u, f in fb.items():
                    up[j][u].append(f)
                    uu[j][sw[u]].append(f)
                    ud[j][B].append(f)
                for pnode, fl in arrive.items():
                    if kind_c == "t" and pnode == key_c:
                        down[j][pnode].append(-pulp.lpSum(fl))  # arrives on its own circuit: no EPS delivery
                    else:
                        up[j][pnode].append(pulp.lpSum(fl))  # delivered from the arrival node
    # capacities, per traffic part with its own bottleneck
    # every source routes its own large traffic (it is in the flows); deliveries are in own_in
    up_links = []
    for j, (d, Tj) in enumerate(zip(parts, Ts)):
        tg = ptag[j]
        base_up = d.base_up_B * sb
        base_down = d.base_down_B * sb + own_in_p[j]
        for u in range(n):
            e_up = pulp.lpSum(up[j][u]) + float(base_up[u])
            e_dn = pulp.lpSum(down[j][u]) + float(base_down[u])
            if up[j][u]:
                prob += e_up <= float(bw[u]) * Tj, f"{tg}cap_up_{u}"
            else:
                Tj.lowBound = max(Tj.lowBound or 0.0, float(base_up[u] / bw[u]))
            if down[j][u]:
                prob += e_dn <= float(bw[u]) * Tj, f"{tg}cap_down_{u}"
            else:
                Tj.lowBound = max(Tj.lowBound or 0.0, float(base_down[u] / bw[u]))
        for a in range(s):
            eu = pulp.lpSum(uu[j][a]) + float(d.base_uplink_up_B[a] * sb)
            ed = pulp.lpSum(ud[j][a]) + float(d.base_uplink_down_B[a] * sb)
            up_links.append(eu)
            if p.uplinks_shared:
                prob += eu <= p.up_bw_Bps * T_max * sb * Tj, f"{tg}cap_uplink_up_{a}"
                prob += ed <= p.up_bw_Bps * T_max * sb * Tj, f"{tg}cap_uplink_down_{a}"
        for (u, v), fl in circ_load[j].items():
            prob += pulp.lpSum(fl) <= beta * Tj, f"{tg}cap_circuit_{u}_{v}"
        Tj.lowBound = max(Tj.lowBound or 0.0, float((d.base_intra_B / p.intra_bw_Bps).max(initial=0.0)) / T_max)
    if len(parts) > 1:
        T.lowBound = max(T.lowBound or 0.0, min(1.0, sum(Tj.lowBound or 0.0 for Tj in Ts)))
    uplink = pulp.lpSum(up_links)
    prob += T
    model = Model("node", prob, T, uplink, {"x": x, "y": y, "carried": carried},
                  {"routers": routers_of, "sources": sources_of, "node_switch": sw, "T_scale": T_max, "byte_scale": U,
                   "n_nodes": n, "n_switches": s, "steps": len(parts)})
    return model, functools.partial(decode, model)


def decode(model: Model, result=None) -> NodeSolution:
    """Circuits, next-hop array and carried mask of a solved node model (``result`` is not needed: the
    back-ends write the solution into the model's variables).

    Next hops only where traffic goes: along the chosen next hops from every node with large traffic for a
    switch, until it falls back to the uplinks or arrives under that switch. A next hop chosen for a node
    that carries nothing is arbitrary, and a solver may leave a circulation of flow between two such nodes
    (each the other's next hop: any amount satisfies conservation when neither has traffic of its own), so
    a node's flow variables cannot tell whether it carries traffic; reachability from the sources can.
    """
    x, y = model.vars["x"], model.vars["y"]
    n_nodes, n_switches = model.info["n_nodes"], model.info["n_switches"]
    sw = model.info["node_switch"]
    circuits = sorted(k for k, v in x.items() if (v.value() or 0) > 0.5)
    choice = {(u, B): (kind, h) for (u, B, kind, h), var in y.items() if (var.value() or 0) > 0.5}
    nh = np.full((n_nodes, n_switches), -1, dtype=np.int64)
    flows = np.zeros((n_nodes, n_switches), dtype=bool)
    for B, sources in model.info["sources"].items():
        for u in sources:
            while not flows[u, B]:      # a node already walked passes the traffic on the same way
                flows[u, B] = True
                kind, h = choice.get((u, B), ("fb", -1))
                if kind == "fb":
                    break
                nh[u, B] = h
                if kind == "c" and sw[h] == B:
                    break               # arrived off the circuit; delivered over the EPS
                u = h
    return NodeSolution(circuits, nh, flows)
