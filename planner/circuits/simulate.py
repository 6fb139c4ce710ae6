"""Score circuit plans with the flow simulator (``--simulate`` of ``topoplan compare circuits``)."""

from __future__ import annotations


def plan_simulator(topo, trace, traffic, problem):
    """A function ``plan_dict -> simulated makespan (s)`` for one circuit problem.

    Parameters
    ----------
    topo : the hybrid topology of ``problem``.
    trace : the MPI trace to replay, or None to replay ``traffic`` as one bulk phase
        (every pair's messages merged, all started at time 0).
    traffic : :class:`~planner.traffic.Traffic` of the problem (used when ``trace`` is None).
    problem : :class:`~planner.circuits.CircuitProblem` (placement and large-message threshold).

    Returns
    -------
    callable taking a circuit plan dict (``circuits`` + ``forwarding``) and returning the makespan in seconds.

    Example
    -------
    >>> run = plan_simulator(topo, None, traffic, prob)          # doctest: +SKIP
    >>> run(solve(prob, "greedy").plan)                            # doctest: +SKIP
    0.276
    """
    from sim.replay import bulk_trace
    from sim.run import simulate

    tr = trace if trace is not None else bulk_trace(traffic, 1)

    def run(plan):
        return simulate(topo, tr, problem.placement, circuits=plan, threshold_B=problem.threshold_B)["makespan_s"]

    return run
