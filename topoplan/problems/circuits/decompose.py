"""One heavy demand matrix as a sequence of circuit configurations with durations.

An all-to-all phase asks every switch for more partners than it has OCS ports, so no single
circuit configuration serves it well; a *sequence* of configurations, each held for a while, can
(the idea of Solstice, Liu et al., CoNEXT 2015, and of a Birkhoff-von Neumann decomposition). The
functions here work on matrices between EPS switches, before any node is chosen:

- ``demand_B[A, B]``: large bytes from switch ``A`` to switch ``B`` (the circuit problem's
  aggregation, :meth:`~topoplan.problems.circuits.problem.CircuitProblem.switch_bytes`);
- ``ports[s]``: circuits switch ``s`` can hold at once (its OCS nodes times their ports), so a
  configuration is a **b-matching**: an integer symmetric matrix ``X`` of circuits per switch pair
  (several circuits between one pair allowed) with every switch in at most ``ports[s]`` circuits;
- ``circuit_bw_Bps``: what one circuit carries per direction (the circuit, or the EPS link of the
  OCS nodes that relay through it when that is slower: :func:`inputs_of`);
- ``setup_s``: one reconfiguration; ``eps_Bps[s]``: what switch ``s``'s uplink carries per
  direction, for the demand left to the EPS;
- ``pair_caps[A, B]`` (optional): most circuits a pair with demand can use at once, the nodes that
  send between the two switches (parallel circuits share a pair's load by source node, and a node
  sends on one EPS link).

A circuit is full duplex, so a configuration serves both directions of a pair at once: the
decompositions work on the per-pair maximum of the two directions and book what each direction
really had. Both return a :class:`Decomposition`: slots of (circuits, duration, bytes served per
directed switch pair), the bytes left to the EPS (the *residual*) and the estimate
``slots + (slots - 1) set-ups + residual over the EPS`` (the first configuration is set up
before the phase, as a static plan's is). Bookkeeping is exact: served plus residual is the
demand, entry by entry (:meth:`Decomposition.check`).

**Stuffing** (both methods). Let ``L`` be the most bytes per port any switch needs
(``max_s sum_B M[s, B] / ports[s]``, ``M`` the symmetric demand). Every switch's row is filled up
to ``L * ports[s]``: first between pairs that already have demand, heaviest first, then between
any two switches that are both short, and what is still missing becomes *idle* capacity of the
switch's ports (the diagonal; an idle port takes one port). The stuffed matrix is a fractional
perfect b-matching scaled by ``L``: the Solstice invariant that keeps full configurations around.

:func:`solstice`
    Repeatedly: the configuration with the **largest threshold** ``t`` such that the stuffed
    entries ``>= t`` (a pair may hold ``floor(entry / t)`` circuits) admit a b-matching with as
    many circuits (idle ports included) as any b-matching of the remaining entries has: a *full*
    one (perfect where the stuffed matrix allows it; a general graph, unlike Solstice's crossbar,
    can make perfect impossible, e.g. three switches of one port). It is held for the time its
    busiest circuit needs for the real demand it serves (at most ``t / circuit_bw_Bps``);
    ``t * X`` is subtracted from the stuffed matrix. It **stops** when the real demand left is
    cheaper over the EPS than another set-up plus that next slot (the first slot has no set-up),
    and what is left is the residual. Ties between equally full configurations go to the one
    that empties the most entries. The largest threshold is not a slot-count minimizer: on random
    dense matrices Solstice can need more slots than BvN (1-5 more in 17 of 60 cases: 30 matrices
    of 3-8 switches, without and with an EPS), though not on the all-to-all-like demands it is
    used for.
:func:`bvn`
    The Birkhoff-von Neumann decomposition of the same stuffed matrix, for comparison: any
    maximum b-matching of the remaining entries (ties: the solver's first), held for the
    smallest ``entry / circuits`` among its pairs (which empties at least one entry), until
    nothing is left; no stopping rule, so its residual is only rounding.

Slots that would serve no real demand (only stuffing) subtract their stuffing and are not kept.
The b-matchings are exact (a small integer programme per configuration, scipy's HiGHS; ~3 ms at
16 switches).

Examples
--------
>>> D = np.array([[0, 4, 4, 4], [4, 0, 4, 4], [4, 4, 0, 4], [4, 4, 4, 0]]) * 1e6   # all-to-all, 4 MB per pair
>>> d = solstice(D, [1, 1, 1, 1], circuit_bw_Bps=1e9, setup_s=1e-3, eps_Bps=1e8)
>>> [(s.pairs(), round(s.duration_s * 1e3, 3)) for s in d.slots]                 # three perfect matchings
[([(0, 2), (1, 3)], 4.0), ([(0, 3), (1, 2)], 4.0), ([(0, 1), (2, 3)], 4.0)]
>>> round(d.total_s * 1e3, 3), float(d.residual_B.sum()), d.check()
(14.0, 0.0, True)
>>> round(bvn(D, [1, 1, 1, 1], circuit_bw_Bps=1e9, setup_s=1e-3).total_s * 1e3, 3)
14.0
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from topoplan.core.errors import TopoplanError
from topoplan.traffic.matrix import from_arrays

__all__ = ["Slot", "Decomposition", "inputs_of", "symmetric_demand", "stuff", "max_b_matching", "eps_time_s",
           "solstice", "bvn", "DECOMPOSITIONS", "all_to_all_like", "A2A_PARTNER_SHARE", "slot_bytes", "chunk_traffic"]

# a phase is all-to-all-like when its switches send (by bytes) to at least this share of the other active
# switches, each of those partners receiving at least half of a uniform share (see all_to_all_like)
A2A_PARTNER_SHARE = 0.75
_REL = 1e-12


@dataclass
class Slot:
    """One configuration of a decomposition and how long it is held.

    Parameters
    ----------
    circuits : numpy.ndarray of int64
        ``(S, S)`` symmetric: circuits between switch pairs (zero diagonal).
    duration_s : float
    served_B : numpy.ndarray
        ``(S, S)`` bytes each directed switch pair sends over the slot's circuits.

    Examples
    --------
    >>> s = Slot(np.array([[0, 2], [2, 0]]), 0.5, np.array([[0.0, 1e9], [5e8, 0.0]]))
    >>> s.pairs(), s.n_circuits
    ([(0, 1), (0, 1)], 2)
    """

    circuits: np.ndarray
    duration_s: float
    served_B: np.ndarray

    @property
    def n_circuits(self) -> int:
        """Circuits in the configuration."""
        return int(np.triu(self.circuits, 1).sum())

    def pairs(self) -> list:
        """The circuits as switch pairs ``(a, b)``, ``a < b``, a pair once per circuit."""
        a, b = np.nonzero(np.triu(self.circuits, 1))
        return [(int(x), int(y)) for x, y in zip(a, b) for _ in range(int(self.circuits[x, y]))]

    def counts(self) -> dict:
        """``{(a, b): circuits}`` for ``a < b`` (the shape of :func:`~topoplan.problems.circuits.exact.decompose`)."""
        a, b = np.nonzero(np.triu(self.circuits, 1))
        return {(int(x), int(y)): int(self.circuits[x, y]) for x, y in zip(a, b)}


@dataclass
class Decomposition:
    """Slots, residual and time estimate of :func:`solstice` or :func:`bvn` (see the module docstring).

    Parameters
    ----------
    method : str
        ``solstice`` or ``bvn``.
    demand_B : numpy.ndarray
        ``(S, S)`` directed demand.
    ports : numpy.ndarray of int64
    slots : list of Slot
    residual_B : numpy.ndarray
        ``(S, S)`` directed bytes left to the EPS.
    circuit_bw_Bps, setup_s : float
    eps_Bps : numpy.ndarray
        Per switch.
    stuffed_B : numpy.ndarray
        The stuffed symmetric matrix the configurations were cut from (diagonal: idle ports).

    Examples
    --------
    >>> d = bvn(np.array([[0, 1e6], [1e6, 0]]), [1, 1], circuit_bw_Bps=1e9)
    >>> len(d.slots), d.slot_s, d.setup_total_s, d.residual_s, d.total_s
    (1, 0.001, 0.0, 0.0, 0.001)
    """

    method: str
    demand_B: np.ndarray
    ports: np.ndarray
    slots: list
    residual_B: np.ndarray
    circuit_bw_Bps: float
    setup_s: float
    eps_Bps: np.ndarray
    stuffed_B: np.ndarray = field(repr=False, default=None)

    @property
    def slot_s(self) -> float:
        """Time the slots are held."""
        return float(sum(s.duration_s for s in self.slots))

    @property
    def setup_total_s(self) -> float:
        """Set-ups between slots (the first configuration is set up before the phase)."""
        return self.setup_s * max(len(self.slots) - 1, 0)

    @property
    def residual_s(self) -> float:
        """The residual over the EPS uplinks (:func:`eps_time_s`)."""
        return eps_time_s(self.residual_B, self.eps_Bps)

    @property
    def total_s(self) -> float:
        """The estimate: slots, set-ups between them, then the residual over the EPS."""
        return self.slot_s + self.setup_total_s + self.residual_s

    def served_B(self) -> np.ndarray:
        """Bytes every directed pair sends over circuits, all slots together."""
        out = np.zeros_like(self.demand_B, dtype=np.float64)
        for s in self.slots:
            out += s.served_B
        return out

    def check(self, rel_tol: float = 1e-9) -> bool:
        """Exact bookkeeping: served + residual == demand, nothing negative, no switch over its ports.

        Returns
        -------
        bool
            True.

        Raises
        ------
        TopoplanError
            Naming what does not add up.
        """
        scale = max(float(np.abs(self.demand_B).max(initial=0.0)), 1.0)
        err = np.abs(self.served_B() + self.residual_B - self.demand_B).max(initial=0.0)
        if err > rel_tol * scale:
            raise TopoplanError(f"decomposition ({self.method}): served + residual differs from the demand by {err} B")
        if (self.residual_B < -rel_tol * scale).any():
            raise TopoplanError(f"decomposition ({self.method}): field 'residual_B': negative entries")
        for k, s in enumerate(self.slots):
            if (s.served_B < -rel_tol * scale).any():
                raise TopoplanError(f"decomposition ({self.method}): slot {k}: field 'served_B': negative entries")
            X = s.circuits
            if (X < 0).any() or not np.array_equal(X, X.T) or np.diag(X).any():
                raise TopoplanError(f"decomposition ({self.method}): slot {k}: field 'circuits': not a symmetric "
                                    "non-negative matrix with a zero diagonal")
            over = np.flatnonzero(X.sum(axis=1) > self.ports)
            if over.size:
                raise TopoplanError(f"decomposition ({self.method}): slot {k}: switch {int(over[0])} is in "
                                    f"{int(X[over[0]].sum())} circuits but has {int(self.ports[over[0]])} ports")
            cap = X * self.circuit_bw_Bps * s.duration_s
            if (s.served_B > cap * (1 + rel_tol) + rel_tol * scale).any():
                raise TopoplanError(f"decomposition ({self.method}): slot {k}: serves more than its circuits carry "
                                    "in its duration")
        return True

    def to_dict(self) -> dict:
        """JSON form: slots as switch-pair circuit counts, durations and served bytes; residual; the estimate."""
        def triples(m):
            a, b = np.nonzero(m > 0)
            return [[int(x), int(y), float(m[x, y])] for x, y in zip(a, b)]

        return {"method": self.method, "slots": [{"circuits": [[a, b, n] for (a, b), n in s.counts().items()],
                                                  "duration_s": s.duration_s, "served_B": triples(s.served_B)}
                                                 for s in self.slots],
                "residual_B": triples(self.residual_B), "slot_s": self.slot_s, "setup_total_s": self.setup_total_s,
                "residual_s": self.residual_s, "total_s": self.total_s, "setup_s": self.setup_s,
                "circuit_bw_Bps": self.circuit_bw_Bps}


# -- inputs --------------------------------------------------------------------------

def inputs_of(problem) -> dict:
    """The decomposition inputs of a circuit problem's traffic (keyword arguments of :func:`solstice`).

    ``demand_B`` is the large inter-switch traffic by switch pair
    (:meth:`~topoplan.problems.circuits.problem.CircuitProblem.switch_bytes`); ``ports`` the OCS
    nodes of every switch times their ports; ``circuit_bw_Bps`` the circuit bandwidth, or the
    slowest OCS node EPS link when that is slower (a circuit's traffic from other nodes enters and
    leaves through its OCS nodes' EPS links: 001's 1 Gb/s links in front of 4 Gb/s circuits);
    ``eps_Bps`` every switch's uplink (unlimited on a fat tree, where uplinks do not contend);
    ``pair_caps`` the distinct nodes that send between two switches (the heavier direction): a
    pair cannot use more circuits at once, since parallel circuits share a pair's load by source
    node and a node's messages leave on its one EPS link.

    Parameters
    ----------
    problem : CircuitProblem

    Returns
    -------
    dict
        ``demand_B``, ``ports``, ``circuit_bw_Bps``, ``eps_Bps``, ``pair_caps``.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.problems.circuits.problem import CircuitProblem
    >>> from topoplan.traffic.generators import alltoall
    >>> from topoplan.traffic.matrix import from_trace
    >>> p = CircuitProblem.build(load_topology("paper001-16x16"), from_trace(alltoall(256, 1e6)))
    >>> x = inputs_of(p)
    >>> x["demand_B"].shape, x["ports"][:3].tolist(), x["circuit_bw_Bps"], float(x["eps_Bps"][0])
    ((16, 16), [4, 4, 4], 125000000.0, 400000000.0)
    >>> int(x["pair_caps"][0, 1])          # 16 nodes under switch 0 send to switch 1
    16
    """
    o = problem.ocs_nodes
    ports = np.array([len(x) for x in problem.ocs_of_switch()], dtype=np.int64) * int(problem.ports)
    bw = float(problem.ocs_bw_Bps)
    if len(o):
        bw = min(bw, float(problem.node_bw_Bps[o].min()))
    eps = np.full(problem.n_switches, float(problem.up_bw_Bps) if problem.uplinks_shared else np.inf)
    S = problem.n_switches
    sw = problem.node_switch
    caps = np.zeros((S, S), dtype=np.int64)
    if len(problem.large_src):
        # distinct sending nodes per directed switch pair: the circuits a pair's traffic can use at once
        key = np.unique(np.stack([sw[problem.large_src], sw[problem.large_dst], problem.large_src]), axis=1)
        np.add.at(caps, (key[0], key[1]), 1)
    caps = np.maximum(caps, caps.T)
    return {"demand_B": problem.switch_bytes().copy(), "ports": ports, "circuit_bw_Bps": bw, "eps_Bps": eps,
            "pair_caps": caps}


def _check_inputs(demand_B, ports, circuit_bw_Bps, setup_s, eps_Bps, pair_caps=None):
    D = np.asarray(demand_B, dtype=np.float64)
    if D.ndim != 2 or D.shape[0] != D.shape[1]:
        raise TopoplanError(f"field 'demand_B': expected a square matrix, got shape {D.shape}")
    if not np.isfinite(D).all() or (D < 0).any():
        raise TopoplanError("field 'demand_B': entries must be finite and non-negative")
    S = D.shape[0]
    P = np.asarray(ports)
    if P.shape != (S,) or (P < 0).any() or not np.array_equal(P, np.round(P)):
        raise TopoplanError(f"field 'ports': expected {S} non-negative integers, got {np.asarray(ports).tolist()}")
    if not (circuit_bw_Bps > 0 and np.isfinite(circuit_bw_Bps)):
        raise TopoplanError(f"field 'circuit_bw_Bps': must be a positive rate, got {circuit_bw_Bps}")
    if not (setup_s >= 0 and np.isfinite(setup_s)):
        raise TopoplanError(f"field 'setup_s': must be a non-negative time, got {setup_s}")
    E = np.broadcast_to(np.asarray(eps_Bps, dtype=np.float64), (S,)).copy()
    if (E < 0).any() or np.isnan(E).any():
        raise TopoplanError(f"field 'eps_Bps': must be non-negative rates, got {eps_Bps}")
    D = D.copy()
    np.fill_diagonal(D, 0.0)
    P = P.astype(np.int64)
    big = int(P.max(initial=0))
    if pair_caps is None:
        C = np.full((S, S), big, dtype=np.int64)
    else:
        C = np.asarray(pair_caps)
        if C.shape != (S, S) or (C < 0).any() or not np.array_equal(C, np.round(C)):
            raise TopoplanError(f"field 'pair_caps': expected an {S} x {S} matrix of non-negative integers")
        C = np.maximum(C, C.T).astype(np.int64)
        C = np.where(symmetric_demand(D) > 0, C, big)      # pairs without demand only ever hold stuffing
    np.fill_diagonal(C, big)
    return D, P, float(circuit_bw_Bps), float(setup_s), E, C


def symmetric_demand(demand_B) -> np.ndarray:
    """Per switch pair, the heavier direction (a circuit is full duplex); zero diagonal.

    Examples
    --------
    >>> symmetric_demand([[5, 1], [3, 0]]).tolist()
    [[0.0, 3.0], [3.0, 0.0]]
    """
    D = np.asarray(demand_B, dtype=np.float64)
    M = np.maximum(D, D.T)
    np.fill_diagonal(M, 0.0)
    return M


def stuff(demand_B, ports) -> tuple[np.ndarray, float]:
    """Fill every switch's row up to ``L * ports[s]`` (the module docstring's stuffing).

    Parameters
    ----------
    demand_B : array_like
        ``(S, S)``; symmetrized with :func:`symmetric_demand`.
    ports : array_like of int

    Returns
    -------
    (numpy.ndarray, float)
        The stuffed symmetric matrix (diagonal: idle port capacity, one port per unit) and ``L``,
        the bytes per port. Switches without ports get nothing (their demand stays on the EPS).

    Examples
    --------
    >>> M, L = stuff([[0, 6, 0], [6, 0, 2], [0, 2, 0]], [1, 2, 1])
    >>> L, M.tolist()
    (6.0, [[0.0, 6.0, 0.0], [6.0, 0.0, 6.0], [0.0, 6.0, 0.0]])
    """
    M = symmetric_demand(demand_B)
    P = np.asarray(ports, dtype=np.float64)
    dead = P <= 0
    M[dead, :] = 0.0
    M[:, dead] = 0.0
    rows = M.sum(axis=1)
    live = ~dead
    L = float((rows[live] / P[live]).max(initial=0.0))
    if L <= 0:
        return M, 0.0
    deficit = np.where(live, L * P - rows, 0.0)
    deficit[deficit < _REL * L] = 0.0
    S = len(P)
    iu = np.triu_indices(S, 1)
    # pairs with demand first, heaviest first (ties: lower ids), then any pair of live switches
    order = np.lexsort((iu[1], iu[0], -M[iu]))
    for pass_ in (0, 1):
        for k in order.tolist():
            a, b = int(iu[0][k]), int(iu[1][k])
            if not (live[a] and live[b]) or (pass_ == 0 and M[a, b] <= 0):
                continue
            x = min(deficit[a], deficit[b])
            if x > 0:
                M[a, b] += x
                M[b, a] += x
                deficit[a] -= x
                deficit[b] -= x
    M[np.diag_indices(S)] = np.maximum(deficit, 0.0)
    return M, L


def max_b_matching(caps, ports, weights=None) -> np.ndarray:
    """A b-matching with the most circuits (idle ports included); ties to the most ``weights``.

    Parameters
    ----------
    caps : array_like of int
        ``(S, S)`` symmetric: most circuits per switch pair; the diagonal, most idle ports.
    ports : array_like of int
        Every switch is in at most ``ports[s]`` circuits (an idle port counts one).
    weights : array_like, optional
        ``(S, S)`` in ``[0, 1]``: among configurations with the most circuits, the largest
        ``sum(weights * X)`` (over ``a <= b``).

    Returns
    -------
    numpy.ndarray of int64
        ``X`` symmetric, the diagonal holding idle ports.

    Examples
    --------
    >>> int(max_b_matching([[0, 1, 1], [1, 0, 1], [1, 1, 0]], [1, 1, 1]).sum()) // 2   # a triangle: one circuit
    1
    >>> max_b_matching([[0, 3, 0], [3, 0, 1], [0, 1, 0]], [2, 2, 1]).tolist()
    [[0, 2, 0], [2, 0, 0], [0, 0, 0]]
    """
    from scipy.optimize import Bounds, LinearConstraint, milp

    C = np.asarray(caps)
    P = np.asarray(ports, dtype=np.int64)
    S = len(P)
    a, b = np.nonzero(np.triu(C, 0) > 0)
    X = np.zeros((S, S), dtype=np.int64)
    if not len(a):
        return X
    ub = np.minimum(C[a, b], np.where(a == b, P[a], np.minimum(P[a], P[b]))).astype(np.float64)
    keep = ub > 0
    a, b, ub = a[keep], b[keep], ub[keep]
    if not len(a):
        return X
    m = len(a)
    A = np.zeros((S, m))
    A[a, np.arange(m)] += 1.0
    A[b, np.arange(m)] += np.where(a == b, 0.0, 1.0)
    w = np.zeros(m) if weights is None else np.clip(np.asarray(weights, dtype=np.float64)[a, b], 0.0, 1.0)
    eps = 1.0 / (2.0 * (float(P.sum()) + 1.0))
    res = milp(-(1.0 + eps * w), constraints=LinearConstraint(A, 0, P.astype(np.float64)),
               integrality=np.ones(m), bounds=Bounds(0, ub))
    if res.x is None:       # cannot happen (X = 0 is feasible); kept as a plain error, not a silent empty slot
        raise TopoplanError(f"b-matching: the integer programme failed ({res.message})")
    x = np.round(res.x).astype(np.int64)
    X[a, b] = x
    X[b, a] = x
    return X


def eps_time_s(residual_B, eps_Bps) -> float:
    """Time of ``residual_B`` over the EPS: the busiest switch uplink direction.

    Examples
    --------
    >>> eps_time_s([[0, 2e9, 1e9], [0, 0, 0], [0, 0, 0]], 1e9)     # switch 0 sends 3 GB
    3.0
    """
    R = np.asarray(residual_B, dtype=np.float64)
    if not R.size or R.max(initial=0.0) <= 0:
        return 0.0
    E = np.broadcast_to(np.asarray(eps_Bps, dtype=np.float64), (R.shape[0],))
    off = R - np.diag(np.diag(R))
    load = np.maximum(off.sum(axis=1), off.sum(axis=0))
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(load > 0, load / E, 0.0)
    return float(t.max(initial=0.0))


def _serve(rem: np.ndarray, X: np.ndarray, per_circuit_B: float):
    """Real bytes a configuration serves, per direction, when every circuit carries ``per_circuit_B``."""
    off = X.astype(np.float64)
    np.fill_diagonal(off, 0.0)
    return np.minimum(rem, off * per_circuit_B)


def _duration(served: np.ndarray, X: np.ndarray, bw: float) -> float:
    """How long the slot's busiest circuit needs for what it serves."""
    off = X.astype(np.float64)
    np.fill_diagonal(off, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        per = np.where(off > 0, served / np.where(off > 0, off, 1.0), 0.0)
    return float(per.max(initial=0.0)) / bw


def _thresholds(R: np.ndarray, P: np.ndarray) -> np.ndarray:
    """Every ``entry / k`` a pair's circuit count changes at, descending."""
    a, b = np.nonzero(np.triu(R, 0) > 0)
    if not len(a):
        return np.zeros(0)
    kmax = int(P.max(initial=1))
    vals = (R[a, b][:, None] / np.arange(1, kmax + 1)[None, :]).ravel()
    return np.unique(vals)[::-1]


def _caps(R: np.ndarray, t: float) -> np.ndarray:
    return np.floor(R / t * (1 + 1e-12)).astype(np.int64)


def _loop(method, D, P, bw, setup_s, E, max_slots, choose):
    M, L = stuff(D, P)
    R = M.copy()
    rem = D.copy()
    slots: list[Slot] = []
    scale = max(float(R.max(initial=0.0)), 1.0)
    S = len(P)
    for _ in range(max_slots * 4 + 4 * S * S * max(int(P.max(initial=1)), 1)):
        if len(slots) >= max_slots or R.max(initial=0.0) <= _REL * scale or rem.max(initial=0.0) <= _REL * scale:
            break
        X, per = choose(R)
        if X is None:
            break
        served = _serve(rem, X, per)
        dur = _duration(served, X, bw)
        if method == "solstice" and served.sum() > 0:
            # stop when what is left is cheaper over the EPS than another set-up plus this slot
            if eps_time_s(rem, E) <= (setup_s if slots else 0.0) + dur:
                break
        R = R - X * per
        R[R < _REL * scale] = 0.0
        if served.max(initial=0.0) <= _REL * scale:
            continue            # only stuffing: not worth a configuration
        after = rem - served
        gone = after < _REL * scale        # an entry emptied up to rounding: served is what was left of it
        served = np.where(gone, rem, served)
        rem = np.where(gone, 0.0, after)
        off = X.copy()
        np.fill_diagonal(off, 0)
        slots.append(Slot(off, dur, served))
    return Decomposition(method=method, demand_B=D, ports=P, slots=slots, residual_B=rem, circuit_bw_Bps=bw,
                         setup_s=setup_s, eps_Bps=E, stuffed_B=M)


def solstice(demand_B, ports, *, circuit_bw_Bps: float, setup_s: float = 0.01, eps_Bps=0.0, pair_caps=None,
             max_slots: int = 256) -> Decomposition:
    """Solstice-like decomposition: largest-threshold full b-matchings, stop when the EPS is cheaper.

    Parameters
    ----------
    demand_B : array_like
        ``(S, S)`` directed bytes between switches (the diagonal is ignored).
    ports : array_like of int
        Circuits every switch can hold at once.
    circuit_bw_Bps : float
        Per circuit and direction.
    setup_s : float, optional
        One reconfiguration (default 10 ms).
    eps_Bps : float or array_like, optional
        Per switch, the EPS rate left for the residual (default 0: no EPS, never stop early).
    pair_caps : array_like of int, optional
        ``(S, S)``: most circuits a switch pair with demand can use at once (default: its ports).
    max_slots : int, optional
        Most slots (what is left after them is residual).

    Returns
    -------
    Decomposition

    Raises
    ------
    TopoplanError
        For a bad input, naming its field.

    Examples
    --------
    >>> D = np.array([[0, 8, 1], [8, 0, 1], [1, 1, 0]]) * 1e6
    >>> d = solstice(D, [1, 1, 1], circuit_bw_Bps=1e9, setup_s=0.01, eps_Bps=1e9)
    >>> [s.pairs() for s in d.slots], round(d.slots[0].duration_s * 1e3, 3)
    ([[(0, 1)]], 7.0)
    >>> float(d.residual_B.sum()) / 1e6    # switch 2's idle port caps the threshold at 7 MB; the rest: EPS
    6.0
    >>> solstice(D, [1, 1], circuit_bw_Bps=1e9)
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: field 'ports': expected 3 non-negative integers, got [1, 1]
    """
    D, P, bw, setup, E, C = _check_inputs(demand_B, ports, circuit_bw_Bps, setup_s, eps_Bps, pair_caps)
    if int(max_slots) < 0:
        raise TopoplanError(f"field 'max_slots': must be non-negative, got {max_slots}")

    def choose(R):
        full = max_b_matching(np.where(R > 0, C, 0), P)
        k_full = int(np.triu(full, 0).sum())
        if k_full == 0:
            return None, 0.0
        ts = _thresholds(R, P)
        lo, hi = 0, len(ts) - 1         # ts descending; find the first (largest) t with a full matching
        while lo < hi:
            mid = (lo + hi) // 2
            if int(np.triu(max_b_matching(np.minimum(_caps(R, ts[mid]), C), P), 0).sum()) >= k_full:
                hi = mid
            else:
                lo = mid + 1
        t = float(ts[lo])
        caps = np.minimum(_caps(R, t), C)
        # ties: empty the most entries (a pair whose entry is c thresholds empties with all c circuits)
        with np.errstate(divide="ignore", invalid="ignore"):
            c = np.where(R > 0, R / t, 0.0)
        whole = (np.abs(c - np.round(c)) <= 1e-9 * np.maximum(c, 1.0)) & (np.round(c) >= 1) & (np.round(c) <= caps)
        w = np.where(whole, 1.0 / np.maximum(np.round(c), 1.0), 0.0)
        return max_b_matching(caps, P, weights=w), t

    return _loop("solstice", D, P, bw, setup, E, int(max_slots), choose)


def bvn(demand_B, ports, *, circuit_bw_Bps: float, setup_s: float = 0.01, eps_Bps=0.0, pair_caps=None,
        max_slots: int = 4096) -> Decomposition:
    """Birkhoff-von Neumann decomposition of the stuffed matrix into b-matchings, until nothing is left.

    Parameters
    ----------
    demand_B, ports, circuit_bw_Bps, setup_s, eps_Bps, pair_caps : as for :func:`solstice`
        ``setup_s`` and ``eps_Bps`` only price the result; they stop nothing.
    max_slots : int, optional

    Returns
    -------
    Decomposition

    Examples
    --------
    >>> P3 = [np.roll(np.eye(4), k, axis=1) for k in (1, 2, 3)]       # a doubly stochastic matrix, x 1 MB
    >>> D = (0.5 * P3[0] + 0.3 * P3[1] + 0.2 * P3[2]) * 1e6
    >>> d = bvn(D + D.T, [2, 2, 2, 2], circuit_bw_Bps=1e9, setup_s=0.0)
    >>> np.allclose(sum(s.served_B for s in d.slots), D + D.T), float(d.residual_B.sum())
    (True, 0.0)
    """
    D, P, bw, setup, E, C = _check_inputs(demand_B, ports, circuit_bw_Bps, setup_s, eps_Bps, pair_caps)

    def choose(R):
        X = max_b_matching(np.where(R > 0, C, 0), P)
        if not np.triu(X, 0).any():
            return None, 0.0
        a, b = np.nonzero(np.triu(X, 0))
        return X, float((R[a, b] / X[a, b]).min())

    return _loop("bvn", D, P, bw, setup, E, int(max_slots), choose)


DECOMPOSITIONS = {"solstice": solstice, "bvn": bvn}


def all_to_all_like(demand_B, *, partner_share: float = A2A_PARTNER_SHARE) -> bool:
    """Whether a switch demand matrix is all-to-all-like (the phases the ``solstice`` scheduler decomposes).

    The rule: at least three switches send large inter-switch traffic, and, weighted by what each
    switch sends, a switch reaches at least ``partner_share`` of the other active switches with at
    least half of a uniform share of its bytes each. A halo exchange (two or four partners among
    many switches, or two of three) is not; an all-to-all, a transpose spread over all switches, or
    NPB FT's and IS's exchanges are.

    Parameters
    ----------
    demand_B : array_like
        ``(S, S)``.
    partner_share : float, optional

    Returns
    -------
    bool

    Examples
    --------
    >>> all_to_all_like(np.ones((4, 4)) - np.eye(4))
    True
    >>> ring = np.roll(np.eye(8), 1, axis=1) + np.roll(np.eye(8), -1, axis=1)
    >>> all_to_all_like(ring)
    False
    """
    D = np.asarray(demand_B, dtype=np.float64).copy()
    np.fill_diagonal(D, 0.0)
    active = (D.sum(axis=1) + D.sum(axis=0)) > 0
    n = int(active.sum())
    if n < 3:
        return False
    out = D.sum(axis=1)
    senders = np.flatnonzero(out > 0)
    share = []
    for s in senders.tolist():
        fair = out[s] / (n - 1)
        share.append(float(((D[s] >= 0.5 * fair) & active).sum()) / (n - 1))
    return float(np.average(share, weights=out[senders])) >= partner_share


def slot_bytes(decomposition: Decomposition) -> np.ndarray:
    """What every slot carries per directed switch pair: its circuit bytes plus its part of the residual.

    The residual of a pair rides, in proportion to their durations, the slots in which the pair has
    no circuit (the EPS, concurrently with the circuits); a pair with a circuit in every slot has no
    such slot, and its residual is spread over all slots in proportion to their durations (it then
    takes the pair's circuits: the simulator routes a message by its source node's forwarding entry,
    so it cannot send part of a pair's bytes over the EPS while the pair has a circuit).

    Parameters
    ----------
    decomposition : Decomposition

    Returns
    -------
    numpy.ndarray
        ``(K, S, S)``; summed over the slots, the demand.

    Examples
    --------
    >>> D = np.array([[0, 8, 1], [8, 0, 1], [1, 1, 0]]) * 1e6
    >>> d = solstice(D, [1, 1, 1], circuit_bw_Bps=1e9, setup_s=0.01, eps_Bps=1e9)
    >>> b = slot_bytes(d)
    >>> b.shape, np.allclose(b.sum(axis=0), D)
    ((1, 3, 3), True)
    """
    d = decomposition
    K = len(d.slots)
    S = d.demand_B.shape[0]
    out = np.zeros((K, S, S))
    if K == 0:
        return out
    dur = np.array([s.duration_s for s in d.slots], dtype=np.float64)
    dur = np.where(dur > 0, dur, 0.0)
    if dur.sum() <= 0:
        dur = np.ones(K)
    for k, s in enumerate(d.slots):
        out[k] = s.served_B
    has = np.stack([s.circuits > 0 for s in d.slots])           # (K, S, S)
    free_w = np.where(~has, dur[:, None, None], 0.0)
    tot = free_w.sum(axis=0)
    w = np.where(tot[None] > 0, free_w / np.where(tot > 0, tot, 1.0)[None], dur[:, None, None] / dur.sum())
    out += w * d.residual_B[None]
    return out


def chunk_traffic(traffic, rank_switch, fractions) -> list:
    """A rank :class:`~topoplan.traffic.matrix.Traffic` cut into one traffic per slot (message sizes scaled).

    Parameters
    ----------
    traffic : Traffic
    rank_switch : array_like of int
        Switch of every rank.
    fractions : numpy.ndarray
        ``F`` of :func:`topoplan.plans.schedule.slot_fractions`.

    Returns
    -------
    list of Traffic
        One per slot; together, the traffic's bytes.

    Examples
    --------
    >>> from topoplan.traffic.matrix import from_arrays
    >>> t = from_arrays(2, [0], [1], [4e6], [3])
    >>> from topoplan.plans.schedule import slot_fractions
    >>> F, _ = slot_fractions([[[0, 3e6], [0, 0]], [[0, 9e6], [0, 0]]], [1.0, 1.0])
    >>> [x.bytes.tolist() for x in chunk_traffic(t, [0, 1], F)]
    [[3000000.0], [9000000.0]]
    """
    sw = np.asarray(rank_switch, dtype=np.int64)
    F = np.asarray(fractions, dtype=np.float64)
    out = []
    for k in range(F.shape[0]):
        f = F[k, sw[traffic.src], sw[traffic.dst]]
        keep = f > 0
        out.append(from_arrays(traffic.n_ranks, traffic.src[keep], traffic.dst[keep], traffic.msg_bytes[keep] * f[keep],
                               traffic.count[keep], name=f"{traffic.name} slot {k}"))
    return out
