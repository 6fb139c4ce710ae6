"""Placements that ignore the traffic: sequential (block), round-robin (cyclic by node) and random (seeded)."""

from __future__ import annotations

import numpy as np

from topoplan.problems.placement.problem import PlacementProblem, result_from
from topoplan.problems.placement.registry import METHODS

__all__ = ["sequential", "round_robin", "random_placement"]


@METHODS.register("sequential")
def sequential(problem: PlacementProblem, *, time_limit=None, seed=0):
    """Block placement: ranks fill the cores of node 0, then node 1, ... (003's "Sequential").

    Parameters
    ----------
    problem : PlacementProblem
    time_limit : float, optional
        Not used; part of every method's signature.
    seed : int, optional
        Not used (deterministic).

    Returns
    -------
    PlanResult
        ``rank_to_node`` and ``rank_to_slot``; :func:`~topoplan.problems.placement.problem.solve`
        fills in method, seed and wall time and validates it.

    References
    ----------
    003 section 4.1.3.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.matrix import from_arrays
    >>> p = PlacementProblem.build(load_topology("paper003"), from_arrays(6, [0], [5], [1e6]))
    >>> sequential(p).plan["rank_to_node"]
    [0, 0, 0, 0, 1, 1]
    """
    node = np.repeat(np.arange(problem.n_nodes), problem.cores)[:problem.n_ranks]
    return result_from(problem, node)


@METHODS.register("round-robin")
def round_robin(problem: PlacementProblem, *, time_limit=None, seed=0):
    """Cyclic placement: rank r on the r-th node with a free core, cycling over the nodes.

    Parameters
    ----------
    problem : PlacementProblem
    time_limit : float, optional
        Not used; part of every method's signature.
    seed : int, optional
        Not used (deterministic).

    Returns
    -------
    PlanResult
        ``rank_to_node`` and ``rank_to_slot``; :func:`~topoplan.problems.placement.problem.solve`
        fills in method, seed and wall time and validates it.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.sources import load_traffic
    >>> p = PlacementProblem.build(load_topology("paper003"), load_traffic("neighbor2d:rows=16,cols=16,bytes=4MB"),
    ...                            objective="inter-switch")
    >>> res = round_robin(p)
    >>> res.plan["rank_to_node"][:6], res.objective
    ([0, 1, 2, 3, 4, 5], 1920000000.0)
    """
    cores = problem.cores
    # slot s of every node in turn: (slot 0 of all nodes), (slot 1 of all nodes with 2+ cores), ...
    order = np.lexsort((np.arange(int(cores.sum())), np.concatenate([np.arange(c) for c in cores])))
    node_of_slot = np.repeat(np.arange(problem.n_nodes), cores)
    return result_from(problem, node_of_slot[order][:problem.n_ranks])


@METHODS.register("random")
def random_placement(problem: PlacementProblem, *, time_limit=None, seed=0):
    """A uniformly random assignment of ranks to cores (seeded).

    Parameters
    ----------
    problem : PlacementProblem
    time_limit : float, optional
        Not used; part of every method's signature.
    seed : int, optional
        The same seed gives the same placement.

    Returns
    -------
    PlanResult
        ``rank_to_node`` and ``rank_to_slot``; :func:`~topoplan.problems.placement.problem.solve`
        fills in method, seed and wall time and validates it.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.traffic.sources import load_traffic
    >>> p = PlacementProblem.build(load_topology("paper003"), load_traffic("neighbor2d:rows=16,cols=16,bytes=4MB"),
    ...                            objective="inter-switch")
    >>> res = random_placement(p, seed=1)
    >>> res.plan["rank_to_node"][:6], res.objective
    ([7, 34, 3, 19, 38, 30], 2896000000.0)
    """
    rng = np.random.default_rng(seed)
    node_of_slot = np.repeat(np.arange(problem.n_nodes), problem.cores)
    return result_from(problem, node_of_slot[rng.permutation(len(node_of_slot))[:problem.n_ranks]])
