"""What the circuit formulations share: the data they read, the built model, and the two-objective solve.

Both formulations (:mod:`topoplan.formulations.circuits_node`, :mod:`topoplan.formulations.circuits_switch`) minimize the
communication-time bound ``T`` = max over directed links of bytes / bandwidth (node EPS links incl. those
of relay nodes, uplinks, circuits, intra-node) -- or, for an application's steps, the sum over step groups
of each group's bound (the circuits are shared by all steps) -- then the bytes through the EPS uplinks --
lexicographically (:func:`two_phase`: two solves, the second holds ``T`` at the first optimum) or
weighted (one solve, ``T + WEIGHT_UPLINK * uplink share``).

They read a :class:`CircuitData`: plain arrays, filled by the caller (for a
:class:`topoplan.problems.circuits.CircuitProblem`, :func:`topoplan.problems.circuits.exact.circuit_data`). Bytes in the
models are scaled to units of ``ocs_bw x T_max`` and the bound to ``T / T_max`` (``Model.info``:
``byte_scale``, ``T_scale``), so coefficients are O(1).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from topoplan.formulations.backends import Result
from topoplan.formulations.backends import solve as backend_solve

if TYPE_CHECKING:
    import pulp

__all__ = ["CircuitArrays", "CircuitData", "Model", "two_phase", "new_var", "WEIGHT_UPLINK"]

WEIGHT_UPLINK = 1e-3  # weighted objective: T / T_ref + WEIGHT_UPLINK * uplink bytes / large bytes


@dataclass
class CircuitArrays:
    """The arrays of a circuit-assignment instance (bytes, bytes per second; N nodes, S switches), declared once
    for the formulations' :class:`CircuitData` and the problem that fills it
    (:class:`topoplan.problems.circuits.CircuitProblem`).

    Topology: ``node_switch`` (switch of every node), ``is_ocs`` (node has optical ports), ``ports`` per
    OCS node, ``hop_limit`` (most circuits a message may cross; None: no limit), bandwidths
    ``node_bw_Bps`` (per node), ``up_bw_Bps``, ``ocs_bw_Bps``, ``intra_bw_Bps``, ``uplinks_shared``
    (False: fat-tree uplinks, not a shared link).
    Traffic: the plan-independent loads ``base_up_B``, ``base_down_B``, ``base_intra_B`` (per node),
    ``base_uplink_up_B``, ``base_uplink_down_B`` (per switch); the large inter-switch traffic as node pairs
    ``large_src``, ``large_dst``, ``large_bytes``.
    """

    node_switch: np.ndarray
    is_ocs: np.ndarray
    ports: int
    hop_limit: int | None
    node_bw_Bps: np.ndarray
    up_bw_Bps: float
    ocs_bw_Bps: float
    intra_bw_Bps: float
    uplinks_shared: bool
    base_up_B: np.ndarray
    base_down_B: np.ndarray
    base_intra_B: np.ndarray
    base_uplink_up_B: np.ndarray
    base_uplink_down_B: np.ndarray
    large_src: np.ndarray
    large_dst: np.ndarray
    large_bytes: np.ndarray


@dataclass
class CircuitData(CircuitArrays):
    """The arrays a circuit formulation reads: :class:`CircuitArrays` and what the formulations derive from them.

    ``n_switches``; ``circuit_limit`` (most circuits of a plan); the aggregates of the large traffic
    ``own_out`` (N x S: bytes node n sends to switch B), ``own_in`` (N x S: bytes node n receives from
    switch A), ``switch_bytes`` (S x S); ``ocs_of_switch``: the OCS nodes under every switch, ascending.
    ``steps``: the application's step groups, each a ``CircuitData`` of the same topology with that group's
    traffic (empty: the traffic is one bulk phase); the formulations then minimize the sum of the groups'
    bottlenecks.
    """

    n_switches: int
    circuit_limit: int
    own_out: np.ndarray
    own_in: np.ndarray
    switch_bytes: np.ndarray
    ocs_of_switch: list = field(default_factory=list)
    steps: tuple = ()

    @property
    def n_nodes(self) -> int:
        return len(self.node_switch)

    @property
    def ocs_nodes(self) -> np.ndarray:
        return np.flatnonzero(self.is_ocs)


@dataclass
class Model:
    """A built model: the PuLP problem, its variables by role, and what decoding needs.

    ``T``: the bound variable (``T / T_max``); ``uplink``: the uplink bytes (model units), the second
    objective; ``vars``: variables by role; ``info``: ``T_scale`` (seconds per unit of ``T``),
    ``byte_scale`` (bytes per model unit) and what the formulation's decoder needs.
    """

    kind: str
    prob: pulp.LpProblem
    T: pulp.LpVariable
    uplink: pulp.LpAffineExpression
    vars: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)

    @property
    def n_variables(self) -> int:
        return len(self.prob.variables())


def new_var(prob, name, lowBound=None, upBound=None, cat="Continuous"):
    """A variable of ``prob`` (PuLP >= 3 attaches variables to their model; older PuLP has no add_variable)."""
    if hasattr(prob, "add_variable"):
        return prob.add_variable(name, lowBound, upBound, cat=cat)
    # PuLP is imported where a model is built, not with this module: every circuit command reads CircuitArrays
    # from here, and importing PuLP (and its HiGHS bindings) takes about 50 ms that only the exact method needs
    import pulp

    return pulp.LpVariable(name, lowBound, upBound, cat=cat)


def two_phase(model: Model, *, solver, time_limit, seed, threads, objective, large_bytes, after_first=None,
              handover_s: float = 0.0):
    """Solve min T, then min uplink bytes with T held at its optimum (lexicographic), or one weighted solve.

    Returns ``(r1, r2, T_bound_s, uplink_bound_B)`` with the bounds in seconds and bytes
    (None when not proven). When the model's lower and upper limits on ``T``
    meet (the incumbent sits on the floor), the first solve is skipped.
    ``after_first(model)`` runs after the first solve that found a solution (e.g. to decode a plan
    before the second objective changes it). ``handover_s``: seconds each solve spends before the solver
    starts (PuLP writes the model for it), which cannot be interrupted: the second solve is not started
    when the time left would not cover it (the first solve's result stands, without the uplink bound).
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
        r1 = Result("optimal", lo, lo, 0.0, 0.0, solver, "T fixed by the floor")
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
    r2 = None
    for slack in (1e-6, 1e-4):  # a hair of slack: CBC's presolve may call T <= T1 exactly infeasible
        T.upBound = min(old_ub, T1 * (1 + slack))
        rest = None if deadline is None else deadline - time.perf_counter()
        if rest is not None and rest < handover_s + 0.1:
            break
        r2 = backend_solve(prob, solver, time_limit=None if rest is None else max(0.1, rest), seed=seed,
                           threads=threads)
        if r2.status != "infeasible":
            break
    T.upBound = old_ub
    prob.setObjective(T)
    up_bound = r2.bound * Bs if (r2 is not None and r2.status == "optimal" and r2.bound is not None) else None
    return r1, r2, bound_T, up_bound
