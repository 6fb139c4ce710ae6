"""``ilp``: exact placement with a proven bound -- the problem's side of the CP-SAT model.

The model (:mod:`topoplan.formulations.placement_cpsat`) reads plain arrays; this module declares the method and
its options, turns a :class:`~topoplan.problems.placement.PlacementProblem` into the model's data (edge
weights as integers, node or switch columns, the combinatorial :func:`lower_bound`, the symmetry of the
machine), starts the model from the best heuristic placement, solves it with
``topoplan.formulations.backends.solve(..., "cpsat")`` and decodes the solution into a placement.

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

import numpy as np

from topoplan.formulations import placement_cpsat as formulation
from topoplan.formulations.backends import Deferred
from topoplan.formulations.backends import solve as backend_solve
from topoplan.core.errors import TopoplanError
from topoplan.problems.placement import greedy, metis  # noqa: F401  (register the default starts)
from topoplan.problems.placement.metis import ocs_first, recursive_map
from topoplan.problems.placement.problem import PlacementProblem, initial_placement, result_from
from topoplan.problems.placement.registry import METHODS
from topoplan.problems.result import module_missing
from topoplan.core.topology import TreeTopology

__all__ = ["ilp", "lower_bound", "symmetric_switches", "DEFAULT_TIME_S"]

DEFAULT_TIME_S = 20.0
NOT_STARTS = ("anneal", "joint")    # starts are the fast constructive methods


@METHODS.register("ilp", requires=module_missing("ortools", "pip install ortools"))
def ilp(problem: PlacementProblem, *, time_limit=None, seed=0, init=None, threads: int = 2):
    """Exact placement with a proven bound (tree, fat-tree and hybrid topologies; ``hops`` or ``inter-switch``).

    Parameters
    ----------
    problem : :class:`topoplan.problems.placement.PlacementProblem`.
    time_limit : seconds for CP-SAT (default 20).
    seed : solver seed.
    init : the start: placement methods whose best placement is the solver's hint (and the answer when the
        solver finds none), or a ``rank_to_node`` array (default: the best of every partitioner installed
        and ``greedy``, :func:`~topoplan.problems.placement.problem.default_starts`).
    threads : CP-SAT search workers.

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
    lb = lower_bound(problem)
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
    opts = {"init": best_name, "lower_bound": lb, "model": "node+switch" if node_level else "switch"}
    if n * n_cols > formulation.MAX_VARS or len(u) * n_cols > formulation.MAX_CUT_ROWS:
        return result_from(problem, best_node, status="feasible", bound=lb, options=opts,
                           message=f"model too large ({n} x {n_cols} assignment variables, {len(u)} edges): "
                                   f"{best_name} placement with the combinatorial bound")
    data = formulation.PlacementData(
        n=n, caps=np.asarray(caps, dtype=np.int64), group_of=group_of, u=u, v=v, w=wi,
        switch_weight=2 if hops else 1, node_weight=1 if node_level else 0, constant=int(constant),
        lb=int(math.ceil(lb / scale - 1e-9)) if exact else 0, hint=hint, sym_switch=same_switch,
        sym_node=node_level and same_node)
    # the limit counts from the call: the starts and the bound are spent, and decoding the model's switch
    # assignment into nodes (recursive_map) is kept room for, as long as it took to make the starts
    spent = time.perf_counter() - t0
    solve_s = max(0.05, limit - spent - min(spent, 0.25 * limit))
    out = backend_solve(Deferred(formulation.build, data), "cpsat", time_limit=solve_s, seed=seed or 0, threads=threads)
    bound = max(lb, out.bound * scale) if out.has_solution and out.bound is not None else lb
    if out.values is None:
        return result_from(problem, best_node, status="timeout", bound=bound, options=opts,
                           message=f"CP-SAT found no placement in {limit:g} s: {best_name} placement")
    col = out.values
    if node_level:
        node = ocs_first(problem, col)
    else:  # ranks per switch from the model; nodes within a switch by METIS with exact capacities
        doms = [(np.flatnonzero(col == s), np.flatnonzero(sw == s)) for s in range(len(caps))]
        node = ocs_first(problem, recursive_map(problem, seed=seed or 0, domains=doms))
    cost = problem.cost(node)
    if cost > best_cost:  # rounded model weights can mislead it: never return worse than the start
        node, cost = best_node, best_cost
    bound = min(bound, cost)
    status = "optimal" if cost <= bound * (1 + 1e-9) + 1e-9 else "timeout"
    msg = (f"CP-SAT {out.message.lower()} in {out.wall_s:.2f} s; warm start {best_name} {best_cost:.6g}, "
           f"combinatorial bound {lb:.6g}")
    return result_from(problem, node, status=status, bound=bound, options=opts, message=msg)


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
