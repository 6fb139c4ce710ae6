"""Build the reordered node-leader communicator at run time from a ``topoplan bcast`` plan.

Usage (mpi4py)::

    from topoplan.problems.bcast.mpi_helper import reordered_comm
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

__all__ = ["new_rank_keys", "reordered_comm"]


def new_rank_keys(plan: dict, size: int) -> list[int]:
    """Key (new rank) for every old rank of a communicator of ``size`` processes.

    Old rank i ran on ``allocation_nodes[i]`` (the default order); its new rank
    is the position of that node in ``order``. Without ``allocation_nodes`` the
    sorted ``order`` stands for the allocation.

    Parameters
    ----------
    plan : dict
        A ``topoplan bcast`` plan: ``order`` [+ ``allocation_nodes``].
    size : int
        Processes of the communicator.

    Returns
    -------
    list of int
        The key of old rank 0, 1, ...

    Raises
    ------
    ValueError
        If the plan orders another number of leaders.

    Examples
    --------
    >>> new_rank_keys({"order": [12, 10, 11], "allocation_nodes": [10, 11, 12]}, 3)
    [1, 2, 0]
    >>> new_rank_keys({"order": [12, 10]}, 3)
    Traceback (most recent call last):
    ...
    ValueError: plan orders 2 leaders, the communicator has 3
    """
    order = [int(v) for v in plan["order"]]
    if len(order) != size:
        raise ValueError(f"plan orders {len(order)} leaders, the communicator has {size}")
    alloc = [int(v) for v in plan.get("allocation_nodes") or sorted(order)]
    where = {v: r for r, v in enumerate(order)}
    return [where[v] for v in alloc]


def reordered_comm(comm, plan_path):
    """``comm.Split(0, key)`` with key = this process's new rank from the plan file.

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
        The node-leader communicator, in allocation order.
    plan_path : str or path
        The plan JSON.

    Returns
    -------
    mpi4py.MPI.Comm
        The reordered communicator: new rank ``r`` runs on ``plan["order"][r]``.

    Examples
    --------
    A stand-in for a communicator of 3 processes, seen from old rank 1 (the
    real call is the same with ``MPI.COMM_WORLD``):

    >>> import json, os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "plan.json")
    >>> with open(path, "w") as fh:
    ...     json.dump({"order": [12, 10, 11], "allocation_nodes": [10, 11, 12]}, fh)
    >>> class Comm:
    ...     def Get_size(self): return 3
    ...     def Get_rank(self): return 1
    ...     def Split(self, color, key): return f"Split(color={color}, key={key})"
    >>> reordered_comm(Comm(), path)       # old rank 1 runs on node 11: new rank 2
    'Split(color=0, key=2)'
    """
    with open(plan_path) as fh:
        plan = json.load(fh)
    keys = new_rank_keys(plan, comm.Get_size())
    return comm.Split(0, keys[comm.Get_rank()])
