"""``ilp``: exact placement with a proven bound -- the problem's side of the exact models.

Two models read plain arrays; this module declares the method and its options, turns a
:class:`~topoplan.problems.placement.PlacementProblem` into a model's data (edge weights as integers,
node or switch columns, the combinatorial :func:`lower_bound`, the symmetry of the machine), starts it
from the best heuristic placement and decodes the solution into a placement:

- **groups** (:mod:`topoplan.formulations.placement_groups`), when the objective is a cut between
  identical switches of single-core nodes (``inter-switch``, or ``hops`` with one core per node) and the
  switches are small enough to enumerate every possible group of ranks (up to 20 M subsets: 64 ranks in
  switches of 4, 128 in switches of 4, 64 in switches of 5): a set-partitioning relaxation solved by
  column generation, then an exact search over the groups its reduced costs leave. It proves the MapLib
  64-rank matrices on 16 switches optimal in seconds.
- **priced groups** (:mod:`topoplan.formulations.placement_pricing`), for the same cut where the switches
  are too large to enumerate (up to 256 ranks): the same relaxation, its pricing searched (a heuristic,
  then an exact branch-and-bound that bounds the relaxation whenever it stops), with three quarters of the
  time at most. It proves the MapLib AMG, CG and LULESH 64-rank matrices on 4 switches of 16 optimal in
  3-15 s; where its exact pricing cannot finish (BT-MZ) it bounds nothing (a better partition from its
  columns is kept) and the steps below follow.
- **CP-SAT** (:mod:`topoplan.formulations.placement_cpsat`) otherwise, solved with
  ``topoplan.formulations.backends.solve(..., "cpsat")``; at switch level (up to 160 ranks) the pair
  relaxation (:func:`topoplan.formulations.placement_groups.pair_bound`) bounds it first, with half the
  time at most, and may prove the start optimal on its own. The bound is the best of every step's.

Examples
--------
>>> from topoplan.problems.placement import PlacementProblem, solve
>>> from topoplan.core.topology_io import load_topology
>>> from topoplan.traffic.sources import load_traffic
>>> p = PlacementProblem.build(load_topology("paper003"),
...                            load_traffic("neighbor2d:rows=16,cols=16,bytes=4MB,iters=5"), objective="inter-switch")
>>> r = solve(p, "ilp", time_limit=600)    # proven in about a second
>>> r.status, r.objective, r.bound          # 32 cut edges x 40 MB, proven
('optimal', 1280000000.0, 1280000000.0)
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np

from topoplan.formulations import placement_cpsat as formulation
from topoplan.formulations.backends import Deferred, call_isolated, native_loaded
from topoplan.formulations.backends import solve as backend_solve
from topoplan.core import deadline
from topoplan.core.errors import TopoplanError
from topoplan.problems.placement import greedy, metis  # noqa: F401  (register the default starts)
from topoplan.problems.placement.metis import ocs_first, recursive_map
from topoplan.problems.placement.problem import PlacementProblem, initial_placement, result_from
from topoplan.problems.placement.registry import METHODS
from topoplan.problems.result import module_missing
from topoplan.core.topology import TreeTopology

__all__ = ["ilp", "lower_bound", "symmetric_switches", "groups_ready", "priced_ready", "cpsat_cost_s", "DEFAULT_TIME_S",
           "GROUPS_COMPILE_S", "PRICED_COMPILE_S", "PRICED_SHARE", "CPSAT_LOAD_S", "CPSAT_SPAWN_S",
           "CPSAT_BUILD_FIXED_S", "CPSAT_BUILD_S_PER_VAR", "CPSAT_BUILD_S_PER_ROW", "CPSAT_MIN_SOLVE_S"]

DEFAULT_TIME_S = 20.0
#: CPU seconds to compile the groups model's search (:mod:`topoplan.formulations.placement_groups`) when Numba's
#: cache does not have it (a first run after an installation without ``make install``): 20.8 CPU s measured on 64
#: ranks of 16 switches of 4 (the whole run took 22.6 CPU s and 109 s of wall time at a load of 10, 1.8 CPU s with
#: the search cached), kept at 25.
GROUPS_COMPILE_S = 25.0
#: CPU seconds to compile the priced groups model's kernels (:mod:`topoplan.formulations.placement_pricing`)
#: when Numba's cache does not have them: 22.2 CPU s measured (a fresh cache, at a load of 2), kept at 25.
PRICED_COMPILE_S = 25.0
#: Share of the model's time the priced groups model takes at most (the pair relaxation and CP-SAT the rest).
PRICED_SHARE = 0.75
NOT_STARTS = ("anneal", "joint")    # starts are the fast constructive methods
# What handing the CP-SAT model to the solver costs before it can be stopped, in CPU seconds of an idle core
# (topoplan.core.deadline.scaled makes them wall seconds under load): loading OR-Tools' CP-SAT here, 0.18-0.20
# CPU s (3 processes), or, when HiGHS is loaded here (the pair relaxation ran), a fresh interpreter loading it,
# 0.43-0.47 CPU s; then building the model, measured on paper003 (64 nodes x 4 cores, node+switch models):
# MapLib CG 64 (4,096 variables, 7,936 cut rows) 0.06 s, LULESH 64 (29,952 rows) 0.12 s, AMG 64 (128,064
# rows) 0.44 s, neighbor2d and halo-transpose of 256 ranks (16,384 variables, 30,720 and 38,400 rows) 0.21 and
# 0.24 s. Under a 3 s limit at a load of 10 on 2 cores, loading and building took 1.3 s of wall time on a
# method given 0.05 s, and the command ran 3.7-3.8 s.
CPSAT_LOAD_S = 0.25
CPSAT_SPAWN_S = 0.6
CPSAT_BUILD_FIXED_S = 0.03
CPSAT_BUILD_S_PER_VAR = 6e-6
CPSAT_BUILD_S_PER_ROW = 3.5e-6
#: The least solving time CP-SAT is loaded for (CPU seconds, scaled likewise): at a load of 6 it found no
#: placement of MapLib CG 64 within 0.5 s, one within 1 s.
CPSAT_MIN_SOLVE_S = 0.25


@METHODS.register("ilp", requires=module_missing("ortools", "pip install ortools"))
def ilp(problem: PlacementProblem, *, time_limit=None, seed=0, init=None, threads: int = 2):
    """Exact placement with a proven bound (tree, fat-tree and hybrid topologies; ``hops`` or ``inter-switch``).

    Parameters
    ----------
    problem : :class:`topoplan.problems.placement.PlacementProblem`.
    time_limit : seconds for the whole call, the starts included (default 20).
    seed : solver seed.
    init : the start: placement methods whose best placement is the solver's hint (and the answer when the
        solver finds none), or a ``rank_to_node`` array (default: the best of every partitioner installed
        and ``greedy``, :func:`~topoplan.problems.placement.problem.default_starts`).
    threads : CP-SAT search workers (the groups model runs on one thread).

    The model is the groups model where it applies (identical switches, a switch-level cut, small
    switches: the module docstring), the priced groups model where the switches are identical but large
    (then, unless it proved the start, the pair relaxation and CP-SAT), else CP-SAT; ``options["model"]``
    says which (``groups``, ``priced groups``, ``switch`` or ``node+switch``).

    Returns
    -------
    PlanResult with status ``optimal`` (proven), ``timeout`` (time limit hit; ``bound`` and ``gap`` set) or
    ``feasible`` (model too large to build: the start with the combinatorial bound).

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.sources import load_traffic
    >>> p = PlacementProblem.build(load_topology("paper003"), load_traffic("ring:np=8,bytes=1MB"))
    >>> r = ilp(p, time_limit=20)
    >>> r.status, r.objective == r.bound
    ('optimal', True)
    """
    if not isinstance(problem.topology, TreeTopology):
        raise TopoplanError(f"method ilp: the exact model covers tree, fat-tree and hybrid topologies, not "
                            f"{problem.topology.kind!r} (use anneal)")
    if problem.objective == "congestion":
        raise TopoplanError("method ilp: the exact model minimizes the hops or inter-switch objective, "
                            "not congestion (objective='hops' or 'inter-switch', or anneal)")
    limit = DEFAULT_TIME_S if time_limit is None else float(time_limit)
    t0 = time.perf_counter()
    # the start: the best heuristic on the problem's objective
    best_name, best_node = initial_placement(problem, init, seed, method="ilp", exclude=NOT_STARTS, time_limit=limit)
    best_cost = problem.cost(best_node)
    lb = comb_lb = lower_bound(problem)
    u, v, w = problem.edges()
    wi, scale, exact = formulation.integer_weights(w)
    n, sw, cores = problem.n_ranks, problem.node_switch, problem.cores
    hops = problem.objective == "hops"
    node_level = hops and cores.max() > 1
    constant = 0.0
    if node_level:
        caps, group_of = cores, sw
        hint = best_node
    else:
        caps = np.bincount(sw, weights=cores, minlength=problem.topology.n_switches).astype(np.int64)
        group_of = None
        hint = sw[best_node]
        if hops:  # one core per node: every edge leaves its node, 1 hop each, plus 2 per switch crossing
            constant = float(wi.sum())
    same_switch, same_node = symmetric_switches(problem)
    hint = formulation.canonical(hint, group_of, problem.topology.n_switches, same_switch, node_level and same_node)
    n_cols = len(caps)
    partition = not node_level and same_switch and exact
    groups = priced = False
    if not node_level:   # the groups models and the pair relaxation are switch-level models
        # imported here: the groups model's search imports Numba (0.3-0.8 CPU s of a command's start-up, measured),
        # which most placements (several cores a node, large switches) never need
        from topoplan.formulations import placement_groups, placement_pricing

        groups = partition and placement_groups.applies(n, int(caps[0]))
        # (not where the combinatorial bound proves the start already)
        priced = (partition and not groups and placement_pricing.applies(n, int(caps[0]))
                  and lb < best_cost * (1 - 1e-9))
    note = ""
    if groups and not groups_ready() and deadline.scaled(GROUPS_COMPILE_S) > limit - (time.perf_counter() - t0):
        groups = False   # refused before it starts compiling (which cannot be stopped): the CP-SAT model instead
        note = (f"; the groups model was not used: compiling its search takes about "
                f"{deadline.scaled(GROUPS_COMPILE_S):.0f} s (once; make install does it)")
    if priced and not priced_ready() and deadline.scaled(PRICED_COMPILE_S) > limit - (time.perf_counter() - t0):
        priced = False
        note = (f"; the priced groups model was not used: compiling its pricing takes about "
                f"{deadline.scaled(PRICED_COMPILE_S):.0f} s (once; make install does it)")
    opts = {"init": best_name, "lower_bound": lb, "model": "groups" if groups else "node+switch" if node_level
            else "priced groups" if priced else "switch"}
    if not groups and (n * n_cols > formulation.MAX_VARS or len(u) * n_cols > formulation.MAX_CUT_ROWS):
        return result_from(problem, best_node, status="feasible", bound=lb, options=opts,
                           message=f"model too large ({n} x {n_cols} assignment variables, {len(u)} edges): "
                                   f"{best_name} placement with the combinatorial bound{note}")
    data = formulation.PlacementData(
        n=n, caps=np.asarray(caps, dtype=np.int64), group_of=group_of, u=u, v=v, w=wi,
        switch_weight=2 if hops else 1, node_weight=1 if node_level else 0, constant=int(constant),
        lb=int(math.ceil(lb / scale - 1e-9)) if exact else 0, hint=hint, sym_switch=same_switch,
        sym_node=node_level and same_node)
    # the limit counts from the call: the starts and the bound are spent, and decoding the model's switch
    # assignment into nodes (recursive_map) is kept room for, as long as it took to make the starts
    spent = time.perf_counter() - t0
    solve_s = max(0.05, limit - spent - min(spent, 0.25 * limit))
    if groups:
        col, model_bound, what, _ = _solve_groups(data, solve_s)
        bound = max(lb, model_bound * scale)
    else:
        what, hint_cost, relaxed = "", best_cost, False
        if priced:
            # the priced groups model first: its bound may prove the start (or a better partition it finds)
            t1 = time.perf_counter()
            col, model_bound, what, relaxed = _solve_groups(data, PRICED_SHARE * solve_s, priced=True)
            solve_s = max(0.05, solve_s - (time.perf_counter() - t1))
            lb = max(lb, model_bound * scale)
            data = replace(data, lb=max(data.lb, int(math.ceil(model_bound - 1e-9))),
                           hint=formulation.canonical(col, None, n_cols, True, False))
            hint_cost = min(best_cost, _model_cost(data) * scale)   # a partition it found may be better
            what += "; "
        if (not node_level and exact and n <= placement_groups.PAIR_MAX_RANKS and lb < hint_cost * (1 - 1e-9)
                and not relaxed):
            # the pair relaxation first (half the time at most): its bound may prove the start, else CP-SAT
            # starts from it (not after the groups' relaxation solved to its optimum: that bounds better)
            t1 = time.perf_counter()
            pair = _pair_lower_bound(data, 0.5 * solve_s)
            solve_s = max(0.05, solve_s - (time.perf_counter() - t1))
            lb = max(lb, pair * scale)
            data = replace(data, lb=max(data.lb, int(math.ceil(pair - 1e-9))))
            what += f"pair relaxation bound {pair * scale:.6g} in {time.perf_counter() - t1:.2f} s; "
        # loading CP-SAT and building its model cannot be stopped: not started when, with a moment to search,
        # they would not end within what the limit left it (predicted at the command's share of a CPU)
        hand_s = deadline.scaled(cpsat_cost_s(n * n_cols, len(u) * n_cols))
        if lb >= hint_cost * (1 - 1e-9):
            col, bound = data.hint, lb
            what += "it meets the start"
        elif hand_s + deadline.scaled(CPSAT_MIN_SOLVE_S) > solve_s:
            # the start as it is (not decoded again), unless the priced groups model found a better partition
            col, bound = (data.hint if hint_cost < best_cost else None), lb
            what += (f"CP-SAT not run: loading it and building its model ({n * n_cols:,} assignment variables, "
                     f"{len(u):,} edges) take about {hand_s:.2f} s before it can search, and the time limit left "
                     f"{solve_s:.2f} s")
        else:
            out = backend_solve(Deferred(formulation.build, data), "cpsat", time_limit=solve_s, seed=seed or 0,
                                threads=threads)
            bound = max(lb, out.bound * scale) if out.has_solution and out.bound is not None else lb
            if out.values is None:
                return result_from(problem, best_node, status="timeout", bound=bound, options=opts,
                                   message=f"CP-SAT found no placement in {limit:g} s: {best_name} placement{note}")
            col = out.values
            what += f"CP-SAT {out.message.lower()} in {out.wall_s:.2f} s"
    if col is None:
        node = best_node
    elif node_level:
        node = ocs_first(problem, col)
    else:  # ranks per switch from the model; nodes within a switch by METIS with exact capacities
        doms = [(np.flatnonzero(col == s), np.flatnonzero(sw == s)) for s in range(len(caps))]
        node = ocs_first(problem, recursive_map(problem, seed=seed or 0, domains=doms))
    cost = problem.cost(node)
    if cost > best_cost:  # rounded model weights can mislead it: never return worse than the start
        node, cost = best_node, best_cost
    bound = min(bound, cost)
    status = "optimal" if cost <= bound * (1 + 1e-9) + 1e-9 else "timeout"
    msg = f"{what}; warm start {best_name} {best_cost:.6g}, combinatorial bound {comb_lb:.6g}{note}"
    return result_from(problem, node, status=status, bound=bound, options=opts, message=msg)


def cpsat_cost_s(variables: int, cut_rows: int) -> float:
    """Predicted CPU seconds (of an idle core) of handing the CP-SAT model to the solver, which cannot be
    stopped: loading OR-Tools' CP-SAT (here, or in a fresh interpreter when HiGHS is loaded here) unless it is
    loaded already, and building a model of ``variables`` assignment variables and ``cut_rows`` cut rows
    (:data:`CPSAT_LOAD_S`, :data:`CPSAT_SPAWN_S`, :data:`CPSAT_BUILD_FIXED_S`, :data:`CPSAT_BUILD_S_PER_VAR`,
    :data:`CPSAT_BUILD_S_PER_ROW`).

    Parameters
    ----------
    variables : int
        Ranks x columns (nodes or switches).
    cut_rows : int
        Edges x columns.

    Returns
    -------
    float

    Examples
    --------
    >>> base = cpsat_cost_s(0, 0)        # loading CP-SAT, unless this process has it (or must start another)
    >>> round(cpsat_cost_s(4096, 128064) - base, 2)   # MapLib AMG 64 on paper003's nodes: 0.44 s measured
    0.47
    """
    loaded = native_loaded()
    load_s = 0.0 if "ortools" in loaded else CPSAT_SPAWN_S if "highs" in loaded else CPSAT_LOAD_S
    return (load_s + CPSAT_BUILD_FIXED_S + CPSAT_BUILD_S_PER_VAR * max(int(variables), 0)
            + CPSAT_BUILD_S_PER_ROW * max(int(cut_rows), 0))


def groups_ready() -> bool:
    """Whether the groups model's compiled search runs without compiling first (in this process, or from Numba's
    cache: :func:`topoplan.core.deadline.kernel_ready`).

    Examples
    --------
    >>> isinstance(groups_ready(), bool)
    True
    """
    from topoplan.formulations import placement_groups   # imported here: Numba (see ilp)

    return all(deadline.kernel_ready(k) for k in (placement_groups._subsets, placement_groups._cover,
                                                   placement_groups._now))


def priced_ready() -> bool:
    """Whether the priced groups model's kernels run without compiling first (as :func:`groups_ready`).

    Examples
    --------
    >>> isinstance(priced_ready(), bool)
    True
    """
    from topoplan.formulations import placement_groups, placement_pricing   # imported here: Numba (see ilp)

    return all(deadline.kernel_ready(k) for k in (placement_pricing.neighbours, placement_pricing.greedy_columns,
                                                   placement_pricing.best_group, placement_pricing._node_bound,
                                                   placement_groups._now))


def _model_cost(data) -> int:
    """The switch-level model's objective (model units) of its hint: the cut weight times ``switch_weight``,
    plus the constant."""
    hint = np.asarray(data.hint)
    cut = int(np.asarray(data.w)[hint[data.u] != hint[data.v]].sum())
    return data.switch_weight * cut + data.constant


def _weights(data) -> np.ndarray:
    """The model's integer edge weights as a dense symmetric rank x rank array."""
    W = np.zeros((data.n, data.n), dtype=np.int64)
    W[data.u, data.v] += data.w
    W[data.v, data.u] += data.w
    return W


def _pair_lower_bound(data, time_limit: float) -> float:
    """A lower bound on the switch-level model's objective (model units) from the pair relaxation
    (:func:`topoplan.formulations.placement_groups.pair_bound`; HiGHS, in a fresh process when OR-Tools'
    native library is loaded here)."""
    size = int(np.max(data.caps))
    full = data.n == int(np.sum(data.caps)) and bool((data.caps == size).all())
    from topoplan.formulations import placement_groups   # imported here: Numba (see ilp)

    inside = call_isolated("highs", placement_groups.pair_bound, _weights(data), size, full, time_limit=time_limit)
    total = int(np.asarray(data.w).sum())
    if not math.isfinite(inside):
        return float(data.constant)
    return float(data.switch_weight * max(0.0, total - math.floor(inside)) + data.constant)


def _solve_groups(data, time_limit: float, priced: bool = False):
    """The switch-level model's data solved as a partition into groups (identical switches), every group
    enumerated (:mod:`topoplan.formulations.placement_groups`) or, ``priced``, searched
    (:mod:`topoplan.formulations.placement_pricing`): ``(switch of every rank, lower bound on the objective in
    model units, what ran, whether that bound is the relaxation's optimum)``."""
    t0 = time.perf_counter()
    from topoplan.formulations import placement_groups, placement_pricing   # imported here: Numba (see ilp)

    group_data = placement_groups.GroupData(W=_weights(data), size=int(data.caps[0]), groups=len(data.caps),
                                            start=np.asarray(data.hint))
    # GLOP is OR-Tools', the priced model's master HiGHS's: in a fresh process when the other's clashing native
    # library is loaded here
    if priced:
        res = call_isolated("highs", placement_pricing.solve, group_data, time_limit=time_limit)
    else:
        res = call_isolated("ortools", placement_groups.solve, group_data, time_limit=time_limit)
    total = int(np.asarray(data.w).sum())
    # the objective: every cut byte weighs switch_weight, plus the constant (hops: the node crossings)
    bound = data.switch_weight * (total - res.bound) + data.constant if math.isfinite(res.bound) else data.constant
    name = "priced groups model" if priced else "groups model"
    return (res.group, float(bound), f"{name} {res.status} in {time.perf_counter() - t0:.2f} s ({res.message})",
            res.relaxation)


def lower_bound(problem: PlacementProblem) -> float:
    """A proven lower bound on the problem's objective (tree topologies; 0 where none is known): the
    combinatorial cut bounds of :func:`topoplan.formulations.placement_cpsat.cut_bound` at switch and node level.

    Parameters
    ----------
    problem : :class:`topoplan.problems.placement.PlacementProblem`.

    Returns
    -------
    float

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.sources import load_traffic
    >>> p = PlacementProblem.build(load_topology("paper003"), load_traffic("ring:np=8,bytes=1MB"))
    >>> lower_bound(p)
    1000000.0
    """
    if not isinstance(problem.topology, TreeTopology) or problem.objective == "congestion":
        return 0.0
    W, n = problem.graph(), problem.n_ranks
    sw = problem.node_switch
    sw_caps = np.bincount(sw, weights=problem.cores, minlength=problem.topology.n_switches).astype(np.int64)
    s_cut = formulation.cut_bound(W, sw_caps, n)
    if problem.objective == "inter-switch":
        return s_cut
    return formulation.cut_bound(W, problem.cores, n) + 2.0 * s_cut




def symmetric_switches(problem: PlacementProblem) -> tuple[bool, bool]:
    """Are all switches alike (same node cores, in order) and all nodes of a switch alike?

    Parameters
    ----------
    problem : :class:`topoplan.problems.placement.PlacementProblem`.

    Returns
    -------
    ``(same_switch, same_node)`` booleans.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.sources import load_traffic
    >>> p = PlacementProblem.build(load_topology("paper003"), load_traffic("ring:np=8,bytes=1MB"))
    >>> symmetric_switches(p)
    (True, True)
    """
    sw, cores = problem.node_switch, problem.cores
    per = [cores[sw == s].tolist() for s in range(problem.topology.n_switches)]
    same_switch = all(p == per[0] for p in per)
    same_node = all(len(set(p)) <= 1 for p in per)
    return same_switch, same_node
