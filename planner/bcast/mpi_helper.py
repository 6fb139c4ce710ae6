"""Build the reordered node-leader communicator at run time from a ``topoplan bcast`` plan.

Usage (mpi4py)::

    from planner.bcast.mpi_helper import reordered_comm
    comm = reordered_comm(MPI.COMM_WORLD, "plan.json")
    comm.Bcast(buf, root=plan_root)   # new rank r runs on plan["order"][r]

Old rank ``i`` of the node-leader communicator runs on the plan's
``allocation_nodes[i]`` (the allocation order the plan was made for); it
gets key = the position of that node in ``order``, so after the Split, new
rank ``r`` sits on ``order[r]``. The root keeps its rank (methods fix it).
Only the plan file is read, so it works the same on one oversubscribed host.
"""

from __future__ import annotations

import json


def new_rank_keys(plan: dict, size: int) -> list[int]:
    """Key (new rank) for every old rank of a communicator of ``size`` processes.

    Old rank i ran on ``allocation_nodes[i]`` (the default order); its new rank
    is the position of that node in ``order``. Without ``allocation_nodes`` the
    sorted ``order`` stands for the allocation.
    """
    order = [int(v) for v in plan["order"]]
    if len(order) != size:
        raise ValueError(f"plan orders {len(order)} leaders, the communicator has {size}")
    alloc = [int(v) for v in plan.get("allocation_nodes") or sorted(order)]
    where = {v: r for r, v in enumerate(order)}
    return [where[v] for v in alloc]


def reordered_comm(comm, plan_path):
    """``comm.Split(0, key)`` with key = this process's new rank from the plan file."""
    with open(plan_path) as fh:
        plan = json.load(fh)
    keys = new_rank_keys(plan, comm.Get_size())
    return comm.Split(0, keys[comm.Get_rank()])
