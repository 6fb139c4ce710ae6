"""The switch formulation of circuit assignment: aggregated, for paper scale and beyond.

Objective, scaling and the two-objective solve: :mod:`topoplan.formulations.circuits_common`.

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
their circuit. The caller turns a solution into node pairs and forwarding
tables (for a :class:`topoplan.problems.circuits.CircuitProblem`: :mod:`topoplan.problems.circuits.exact`).

Sections: data (:class:`~topoplan.formulations.circuits_common.CircuitData`) -> :func:`build` (variables,
constraints, objective; ``relax=True``: the LP relaxation) -> solve (:func:`topoplan.formulations.backends.solve`)
-> :func:`decode` (circuit counts per switch pair, fall-back bytes), :func:`integral_counts`,
:func:`round_counts` (from the LP relaxation).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np
import pulp

from topoplan.formulations.circuits_common import CircuitData, Model, new_var

__all__ = ["candidate_pairs", "size", "build", "decode", "integral_counts", "round_counts", "SwitchSolution"]


class SwitchSolution(NamedTuple):
    """A decoded switch model: ``counts`` (switch pair -> circuits, as solved: fractional in a relaxation)
    and ``fallback`` ((source switch, destination switch) -> bytes sent to the uplinks at the source switch,
    in model units: bytes / ``model.info["byte_scale"]``)."""

    counts: dict
    fallback: dict


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


def candidate_pairs(data: CircuitData, which: str = "auto") -> list[tuple[int, int]]:
    """Switch pairs that may get circuits: ``all``, ``traffic`` (the pairs that exchange large traffic) or
    ``auto`` (all up to 40 switches)."""
    s = data.n_switches
    k = np.array([len(o) for o in data.ocs_of_switch])
    W = data.switch_bytes
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


def build(data: CircuitData, *, T_max: float, T_floor: float = 0.0, pairs=None, relax: bool = False,
          slots: bool | None = None, name="circuits_switch"):
    """The aggregated switch-level model (a relaxation of the node problem; see the module docstring).

    Scaled like :func:`topoplan.formulations.circuits_node.build` (bytes / ``ocs_bw x T_max``, ``T / T_max``).
    ``pairs``: the switch pairs that may get circuits (default :func:`candidate_pairs`); ``relax``: the
    LP relaxation (continuous circuit counts and host slots); ``slots``: circuits as ordered slots of
    capacity ``ocs_bw x T`` each (exact; default up to 300 pairs) instead of one integer count per pair.

    With ``data.steps`` (step groups of the application, :class:`~topoplan.formulations.circuits_common.
    CircuitData`), the circuits are shared and every step group gets its own flows, relay hosts and
    bottleneck ``T_k``; ``T`` is their sum (the step time). Flows and relay hosts of different steps are
    chosen independently (as for the whole traffic, a relaxation), so its optimum is a lower bound for
    every plan's step time.

    Returns ``(model, decode)``: the :class:`~topoplan.formulations.circuits_common.Model` and its decoder
    (``decode(result=None)`` -> :class:`SwitchSolution`).
    """
    p = data
    s = p.n_switches
    P = p.ports
    U = p.ocs_bw_Bps * T_max
    sb = 1.0 / U
    cat_b = "Continuous" if relax else "Binary"
    ocs_of = [o.tolist() for o in p.ocs_of_switch]
    k = np.array([len(o) for o in ocs_of])
    pairs = candidate_pairs(p) if pairs is None else pairs
    prob = pulp.LpProblem(name, pulp.LpMinimize)
    T = new_var(prob, "T", lowBound=T_floor / T_max, upBound=1.0)
    # circuits per switch pair: ordered slots, each at most ocs_bw x T (exact); or, for many pairs
    # (slots=False), one integer count with the looser capacity count x ocs_bw x T_max
    if slots is None:
        slots = len(pairs) <= 300
    nvar, z, caps = {}, {}, {}
    for a, b in pairs:
        cap = int(min(P * k[a], P * k[b], k[a] * k[b], p.circuit_limit))
        if cap <= 0:
            continue
        caps[(a, b)] = cap
        if slots:
            z[(a, b)] = [new_var(prob, f"z_{a}_{b}_{j}", cat=cat_b, lowBound=0, upBound=1) for j in range(cap)]
            nvar[(a, b)] = pulp.lpSum(z[(a, b)])
            for j in range(cap - 1):
                prob += z[(a, b)][j] >= z[(a, b)][j + 1], f"slot_order_{a}_{b}_{j}"
        else:
            nvar[(a, b)] = new_var(prob, f"n_{a}_{b}", lowBound=0, upBound=cap,
                                   cat="Continuous" if relax else "Integer")
    pairs = list(nvar)
    n_of = {a: pulp.lpSum(nvar[q] for q in pairs if a in q) for a in range(s)}
    for a in range(s):
        if k[a] and any(a in q for q in pairs):
            prob += n_of[a] <= P * int(k[a]), f"ports_{a}"
    if pairs and p.circuit_limit < sum(caps.values()):
        prob += pulp.lpSum(nvar.values()) <= p.circuit_limit, "max_circuits"
    parts = tuple(p.steps) or (p,)
    if len(parts) == 1:
        Ts = [T]
    else:
        Ts = [new_var(prob, f"T_s{j}", lowBound=0, upBound=1.0) for j in range(len(parts))]
        prob += T == pulp.lpSum(Ts), "step_time"
    ctx = dict(prob=prob, p=p, s=s, P=P, sb=sb, T_max=T_max, cat_b=cat_b, ocs_of=ocs_of, k=k, pairs=pairs,
               nvar=nvar, z=z, caps=caps, slots=slots, n_of=n_of)
    flows, falls, up_links = [], [], []
    for j, (part, Tj) in enumerate(zip(parts, Ts)):
        f, g, ups = _traffic(ctx, part, Tj, "" if len(parts) == 1 else f"s{j}_")
        flows.append(f)
        falls.append(g)
        up_links += ups
    prob += T
    model = Model("switch", prob, T, pulp.lpSum(up_links), {"n": nvar, "f": flows, "g": falls},
                  {"pairs": pairs, "T_scale": T_max, "byte_scale": U, "steps": len(parts)})
    return model, functools.partial(decode, model)


def _traffic(ctx, part: CircuitData, T, tag: str):
    """Flows, circuit capacities, relay hosts and uplinks of one traffic (the whole, or one step group)
    with its bottleneck ``T``; returns its flow and fall-back variables and its uplink-up expressions."""
    prob, p, s, P, sb, T_max = ctx["prob"], ctx["p"], ctx["s"], ctx["P"], ctx["sb"], ctx["T_max"]
    cat_b, ocs_of, k, pairs = ctx["cat_b"], ctx["ocs_of"], ctx["k"], ctx["pairs"]
    nvar, z, caps, slots, n_of = ctx["nvar"], ctx["z"], ctx["caps"], ctx["slots"], ctx["n_of"]
    H = p.hop_limit
    beta = p.ocs_bw_Bps * T_max * sb
    W = part.switch_bytes * sb
    own_out, own_in = part.own_out * sb, part.own_in * sb
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
                v = new_var(prob, f"{tag}f_{B}_{L}_{a}_{c}", lowBound=0)
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
                v = new_var(prob, f"{tag}g_{B}_{st}_{a}", lowBound=0)
                g[(B, st, a)] = v
                supply = float(W[a, B]) if st == 0 else 0.0
                prob += (pulp.lpSum(out_of.get((B, st, a), []) + [v])
                         == supply + pulp.lpSum(in_of.get((B, st, a), []))), \
                    f"{tag}conserve_{B}_{st}_{a}"
    # circuit capacity per direction
    for (a, b) in pairs:
        for (u, v) in ((a, b), (b, a)):
            load = pulp.lpSum(by_arc.get((u, v), []))
            if slots:
                e = [new_var(prob, f"{tag}e_{u}_{v}_{j}", lowBound=0) for j in range(len(z[(a, b)]))]
                for j, ej in enumerate(e):
                    prob += ej <= beta * T, f"{tag}slot_T_{u}_{v}_{j}"
                    prob += ej <= beta * z[(a, b)][j], f"{tag}slot_on_{u}_{v}_{j}"
                prob += load <= pulp.lpSum(e), f"{tag}arc_{u}_{v}"
            else:
                prob += load <= beta * nvar[(a, b)], f"{tag}arc_{u}_{v}"
                prob += load <= beta * caps[(a, b)] * T, f"{tag}arc_T_{u}_{v}"
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
            so1 = new_var(prob, f"{tag}skip_out_{a}_{c}", lowBound=0)
            prob += so1 <= pulp.lpSum(on_ac.get((c, True), [])), f"{tag}skip_out_arc_{a}_{c}"
            _envelope(prob, so1, nvar[q], -np.sort(-own_out[nodes, c]), f"{tag}env_out_{a}_{c}")
            parts_o.append(so1)
            si1 = new_var(prob, f"{tag}skip_in_{a}_{c}", lowBound=0)
            prob += si1 <= pulp.lpSum(on_ca.get((a, True), [])), f"{tag}skip_in_arc_{a}_{c}"
            _envelope(prob, si1, nvar[q], -np.sort(-own_in[nodes, c]), f"{tag}env_in_{a}_{c}")
            parts_i.append(si1)
            if multi:  # own traffic sent on beyond the partner switch / arriving from beyond it
                so2 = new_var(prob, f"{tag}skip_out_via_{a}_{c}", lowBound=0)
                prob += so2 <= pulp.lpSum(v for (B_, first), vs in on_ac.items() if first and B_ != c for v in vs), \
                    f"{tag}skip_out_via_arc_{a}_{c}"
                _envelope(prob, so2, nvar[q], -np.sort(-(own_o_tot - own_out[nodes, c])), f"{tag}env_out_via_{a}_{c}")
                si2 = new_var(prob, f"{tag}skip_in_via_{a}_{c}", lowBound=0)
                prob += si2 <= pulp.lpSum(v for (B_, first), vs in on_ca.items()
                                          if not first and B_ == a for v in vs), \
                    f"{tag}skip_in_via_arc_{a}_{c}"
                _envelope(prob, si2, nvar[q], -np.sort(-(own_i_tot - own_in[nodes, c])), f"{tag}env_in_via_{a}_{c}")
                parts_o.append(so2)
                parts_i.append(si2)
        sig_d, sig_u = pulp.lpSum(parts_o), pulp.lpSum(parts_i)
        _envelope(prob, sig_d, n_of[a], -np.sort(-own_o_tot), f"{tag}env_out_{a}")
        _envelope(prob, sig_u, n_of[a], -np.sort(-own_i_tot), f"{tag}env_in_{a}")
        tau = None
        if P > 1 and multi:  # a host with two circuits can pass transit straight through
            tau = new_var(prob, f"{tag}through_{a}", lowBound=0)
            prob += tau <= pulp.lpSum(in_arcs), f"{tag}through_le_{a}"
        # hosts' EPS links: base load plus own large traffic, minus what skips (both skips relieve both
        # links: own traffic sent over the own circuit never uses the EPS; traffic arriving for the host
        # itself needs no delivery), plus the relayed bytes; host slots sorted by that load, best first
        own_o_b, own_i_b = own_out[nodes].sum(axis=1), own_in[nodes].sum(axis=1)
        sides = (("down", part.base_down_B[nodes] * sb + own_i_b, out_arcs),
                 ("up", part.base_up_B[nodes] * sb + own_o_b, in_arcs))
        for side, load0, traffic in sides:
            d = np.sort(load0)
            h = [new_var(prob, f"{tag}host_{side}_{a}_{i}", cat=cat_b, lowBound=0, upBound=1) for i in range(len(nodes))]
            rho = [new_var(prob, f"{tag}relay_{side}_{a}_{i}", lowBound=None) for i in range(len(nodes))]
            for i in range(len(nodes)):
                di = float(d[i])
                prob += rho[i] <= bwA * T - di * h[i], f"{tag}host_T_{side}_{a}_{i}"
                prob += rho[i] <= max(0.0, bwA - di) * h[i], f"{tag}host_on_{side}_{a}_{i}"
                prob += rho[i] >= -di * h[i], f"{tag}host_lo_{side}_{a}_{i}"
                if i:
                    prob += h[i - 1] >= h[i], f"{tag}host_order_{side}_{a}_{i}"
            prob += pulp.lpSum(h) <= n_of[a], f"{tag}hosts_{side}_{a}"
            rhs = pulp.lpSum(traffic) - sig_d - sig_u - (tau if tau is not None else 0)
            prob += pulp.lpSum(rho) >= rhs, f"{tag}relay_{side}_{a}"
    # uplinks
    g_up: dict[int, list] = {}
    g_dn: dict[int, list] = {}
    for (B, L, a), v in g.items():
        g_up.setdefault(a, []).append(v)
        g_dn.setdefault(B, []).append(v)
    up_links = []
    for a in range(s):
        eu = float(part.base_uplink_up_B[a] * sb) + pulp.lpSum(g_up.get(a, []))
        ed = float(part.base_uplink_down_B[a] * sb) + pulp.lpSum(g_dn.get(a, []))
        up_links.append(eu)
        if p.uplinks_shared:
            prob += eu <= p.up_bw_Bps * T_max * sb * T, f"{tag}cap_uplink_up_{a}"
            prob += ed <= p.up_bw_Bps * T_max * sb * T, f"{tag}cap_uplink_down_{a}"
    return f, g, up_links


def size(data: CircuitData, pairs: str = "auto") -> int:
    """Upper estimate of the switch formulation's flow variables (to choose MILP or LP rounding)."""
    S = data.n_switches
    mode = pairs if pairs != "auto" else ("all" if S <= 8 else "traffic")
    n_pairs = len(candidate_pairs(data, mode))
    layers = 2 if data.hop_limit is None else data.hop_limit
    return sum(2 * n_pairs * int((part.switch_bytes.sum(axis=0) > 0).sum()) * layers
               for part in (tuple(data.steps) or (data,)))


def decode(model: Model, result=None) -> SwitchSolution:
    """Circuit counts per switch pair and fall-back bytes of a solved (or relaxed) switch model (``result``
    is not needed: the back-ends write the solution into the model's variables)."""
    counts = {q: float(pulp.value(e) or 0.0) for q, e in model.vars["n"].items()}
    fallback: dict[tuple[int, int], float] = {}
    for g in model.vars["g"]:          # one dict per step group (all steps' fall-backs together)
        for (B, L, a), v in g.items():
            if L == 0:
                fallback[(a, B)] = fallback.get((a, B), 0.0) + (v.value() or 0.0)
    return SwitchSolution(counts, fallback)


def integral_counts(solution: SwitchSolution) -> dict[tuple[int, int], int]:
    """The circuit counts of an integral solution, rounded (pairs with none left out)."""
    return {q: int(round(v)) for q, v in solution.counts.items() if round(v) > 0}


def round_counts(data: CircuitData, solution: SwitchSolution) -> dict[tuple[int, int], int]:
    """Integral circuit counts from a relaxed switch model: the integer parts, then the largest fractions
    while both switches have free ports (and ``circuit_limit`` allows)."""
    k = np.array([len(o) for o in data.ocs_of_switch]) * data.ports
    val = dict(solution.counts)
    counts = {q: int(np.floor(v + 1e-6)) for q, v in val.items()}
    used = np.zeros(data.n_switches, dtype=np.int64)
    for (a, b), c in counts.items():
        used[a] += c
        used[b] += c
    total = sum(counts.values())
    for q in sorted(val, key=lambda q: (-(val[q] - counts[q]), q)):
        a, b = q
        if val[q] - counts[q] > 1e-6 and used[a] < k[a] and used[b] < k[b] and total < data.circuit_limit:
            counts[q] += 1
            used[a] += 1
            used[b] += 1
            total += 1
    return {q: c for q, c in counts.items() if c > 0}
