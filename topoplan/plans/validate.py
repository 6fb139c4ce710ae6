"""Plan validation: one function for every kind of plan document (circuits, placements, Bcast orders)."""

from __future__ import annotations

from topoplan.core.errors import TopoplanError
from topoplan.core.fingerprint import check_inputs as compare, check_plan_placement, fingerprint
from topoplan.core.placement import check_seed, from_nodes, placement_from_doc
from topoplan.core.units import shown
from topoplan.plans.circuits import ForwardingTables, validate_plan_dict
from topoplan.plans.schedule import validate_schedule

__all__ = ["validate", "check_recorded_inputs"]


def validate(plan: dict, topology, *, where: str = "plan", traffic=None, placement=None,
             check_inputs: bool = True) -> dict:
    """Check a plan document against a topology, by the plan kinds it holds.

    The one home of plan validation: ``topoplan validate``, the simulator hand-off
    (:func:`topoplan.sim.run.simulate_plan`) and the exports use it. A document may hold
    several kinds at once (a ``joint`` plan has circuits and a placement).

    Parameters
    ----------
    plan : dict
        A plan as written by ``topoplan circuits/place/bcast -o`` or ``PlanResult.to_dict()``:
        ``circuits`` + ``forwarding`` (circuit plan: ports, OCS nodes, neighbours, loops),
        ``rank_to_node`` [+ ``rank_to_slot``] (placement: nodes exist, cores not exceeded),
        ``order`` [+ ``allocation_nodes``, ``root``] (Bcast order: a permutation of the allocation that keeps
        the root on its node), ``schedule`` (circuit schedule: a list of entries, each checked as a circuit
        plan, :func:`topoplan.plans.schedule.validate_schedule`), or a ``topoplan phases
        --schedule`` document (its ``schedule_result``).
    topology : the topology the plan is for.
    where : how errors name the plan (e.g. its file name).
    traffic : Traffic, optional
        The traffic the plan is used with; compared with the plan's recorded ``inputs``.
    placement : Placement, optional
        The placement a circuit plan is used with; compared likewise.
    check_inputs : bool, optional
        Refuse a plan whose recorded ``inputs`` fingerprints (:mod:`topoplan.core.fingerprint`) differ
        from those of ``topology`` (after overrides), ``traffic`` and ``placement``, or whose own
        ``rank_to_node`` is not the placement they record (edited after planning). False uses the plan
        anyway (the CLI's ``--any-inputs``); a plan without ``inputs`` is not compared.

    Returns
    -------
    dict
        ``checked`` (one line per kind) and ``circuits`` / ``ranks`` / ``order`` (sizes).

    Raises
    ------
    TopoplanError
        naming ``where`` and the field at fault; also when the document holds no plan kind, or
        (``check_inputs``) when the plan was made for other inputs.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> t = load_topology("paper003")
    >>> validate({"rank_to_node": [0, 0, 1]}, t)["checked"]
    ['placement: 3 ranks']
    >>> validate({"order": [2, 2]}, t)
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: plan: field 'order': 2 appears twice (not a permutation)
    >>> sched = {"schedule": [{"from_phase": 0, "to_phase": 1, "circuits": [[0, 16]], "forwarding": {}},
    ...                       {"from_phase": 1, "to_phase": 2, "circuits": [[0, 32]], "forwarding": {},
    ...                        "setup": {"during": "wait"}}], "n_phases": 2}
    >>> validate(sched, t)["checked"]
    ['circuit schedule: 2 entries over 2 phases, 1 reconfigurations']
    >>> sched["schedule"][1]["circuits"] = [[0, 1]]
    >>> validate(sched, t, where="s.json")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: s.json: entry 1: field 'circuits[0]': nodes 0 and 1 are under the same switch 0
    >>> from topoplan.core.fingerprint import fingerprint
    >>> plan = {"rank_to_node": [0, 1], "inputs": fingerprint(topology=t)}
    >>> validate(plan, load_topology("paper003", ["ocs.bw=1Gbps"]), where="p.json")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: p.json: field 'inputs': made for another topology (...)
    """
    doc, topo = plan, topology
    if not isinstance(doc, dict):
        raise TopoplanError(f"{where}: expected a JSON object")
    check_seed(doc, where)
    if isinstance(doc.get("schedule_result"), dict) and "schedule" not in doc:
        doc = doc["schedule_result"]   # `topoplan phases --schedule -o`: the phases with the schedule inside
        where = f"{where}: schedule_result"
        check_seed(doc, where)
    if check_inputs and doc.get("inputs") is not None:
        if placement is not None and doc.get("rank_to_node") is not None and doc.get("rank_to_slot") is None:
            # a plan carrying rank_to_node alone records it with the slots its readers give: compare the nodes
            placement = from_nodes(placement.rank_to_node, topo)
        compare(doc["inputs"], fingerprint(topology=topo, traffic=traffic, placement=placement), where)
        check_plan_placement(doc, where, topo)   # its own rank_to_node, edited after planning
    checked, out = [], {}
    if "circuits" in doc or "forwarding" in doc:
        validate_plan_dict(doc, topo, where=where)
        fwd = doc.get("forwarding") or {}
        n_entries = fwd.n_entries if isinstance(fwd, ForwardingTables) else sum(len(r) for r in fwd.values())
        checked.append(f"circuit plan: {len(doc.get('circuits') or [])} circuits, {n_entries} forwarding entries")
        out["circuits"] = len(doc.get("circuits") or [])
    if doc.get("rank_to_node") is not None:
        pl = placement_from_doc(doc, where, topo)   # nodes by id or by host name
        pl.validate(topo, where=where)
        checked.append(f"placement: {pl.n_ranks} ranks")
        out["ranks"] = pl.n_ranks
    if "order" in doc:
        order = doc["order"]
        if not isinstance(order, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in order):
            raise TopoplanError(f"{where}: field 'order': expected a list of integers")
        if len(set(order)) != len(order):
            dup = next(x for x in order if order.count(x) > 1)
            raise TopoplanError(f"{where}: field 'order': {dup} appears twice (not a permutation)")
        bad = [x for x in order if not 0 <= x < topo.n_nodes]
        if bad:
            raise TopoplanError(f"{where}: field 'order': node {bad[0]} does not exist ({topo.n_nodes} nodes)")
        root = doc.get("root")
        if "root" in doc and (isinstance(root, bool) or not isinstance(root, int) or not 0 <= root < len(order)):
            raise TopoplanError(f"{where}: field 'root': expected a rank of the order (0 to {len(order) - 1}), got "
                                f"{shown(root)}")
        # 'allocation' is the user's spec string (e.g. gen:nodes=16,...); the node ids are 'allocation_nodes'
        alloc = doc.get("allocation_nodes")
        if alloc is not None:
            if not isinstance(alloc, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in alloc):
                raise TopoplanError(f"{where}: field 'allocation_nodes': expected a list of integers")
            if sorted(order) != sorted(alloc):
                missing = sorted(set(alloc) ^ set(order)) or [len(order) - len(alloc)]
                raise TopoplanError(f"{where}: field 'order': not a permutation of 'allocation_nodes' "
                                    f"(node {missing[0]} is in one but not the other)")
            # the root keeps its rank: the reordered communicator's Bcast(root=r) must send from the same node
            if root is not None and order[root] != alloc[root]:
                raise TopoplanError(f"{where}: field 'order': the root (rank {root}) moved from node "
                                    f"{alloc[root]} to node {order[root]}")
        checked.append(f"Bcast order of {len(order)}")
        out["order"] = len(order)
    if "schedule" in doc:
        # a circuit schedule: every entry, and every configuration used during a set-up, is a circuit plan

        got = validate_schedule(doc, topo, where=where)
        checked.append(f"circuit schedule: {got['entries']} entries over {got['phases']} phases, "
                       f"{got['reconfigurations']} reconfigurations")
        out["schedule"] = got["entries"]
    if not checked:
        raise TopoplanError(f"{where}: nothing to validate (no 'circuits', 'forwarding', 'rank_to_node', 'order' "
                            "or 'schedule')")
    out["checked"] = checked
    return out


def check_recorded_inputs(doc, where: str, *, name: str | None = None, any_inputs: bool = False, topology=None,
                          traffic=None, placement=None) -> bool:
    """Refuse a plan file made for other inputs than those given, or whose own ``rank_to_node`` was changed
    after planning: the check every command (and a sweep) makes of a plan or placement file it is given.

    The plan's seed is checked first, with or without ``any_inputs`` (a bad seed is no input mismatch).

    Parameters
    ----------
    doc : dict or None
        The plan document (a ``topoplan phases --schedule`` document: its ``schedule_result``); None or
        another value is not checked.
    where : str
        Names the plan in messages (``--placement p.json``, ``sweep.yaml: field 'instances[0].placement':
        p.json``).
    name : str, optional
        Names the plan in the seed's messages (default ``where``).
    any_inputs : bool, optional
        Skip the comparison of inputs (``--any-inputs``).
    topology, traffic, placement : optional
        The inputs given (None: not compared); ``traffic`` may be a function returning it, called only when
        the plan records its inputs.

    Returns
    -------
    bool
        False when the plan records no inputs (written before they were recorded): used unchecked, the
        caller says so; else True.

    Raises
    ------
    TopoplanError
        ``where: made for another <input> (...); pass --any-inputs to use it anyway``, a changed
        ``rank_to_node``, or a bad seed.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> from topoplan.core.fingerprint import fingerprint
    >>> t = load_topology("paper003")
    >>> plan = {"rank_to_node": [0, 1], "inputs": fingerprint(topology=t)}
    >>> check_recorded_inputs(plan, "p.json", topology=t), check_recorded_inputs({"rank_to_node": [0]}, "q.json")
    (True, False)
    >>> check_recorded_inputs(plan, "p.json", topology=load_topology("paper003", ["ocs.bw=1Gbps"]))
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: p.json: made for another topology (...); pass --any-inputs to use it anyway
    """
    name = where if name is None else name
    if isinstance(doc, dict):
        check_seed(doc, name)   # not an input: refused with or without --any-inputs, before the inputs' checks
    if isinstance(doc, dict) and isinstance(doc.get("schedule_result"), dict):
        doc = doc["schedule_result"]   # a `phases --schedule` document: its schedule's inputs (its own: the trace's)
        check_seed(doc, f"{name}: schedule_result")
    if any_inputs or not isinstance(doc, dict):
        return True
    if not doc.get("inputs"):   # missing, null or {}
        return False
    if callable(traffic):   # computed only when a plan's inputs are checked
        traffic = traffic()
    try:
        compare(doc["inputs"], fingerprint(topology=topology, traffic=traffic, placement=placement), where)
        check_plan_placement(doc, where, topology)   # its own rank_to_node, edited after planning
    except TopoplanError as exc:
        msg = str(exc).replace("field 'inputs': ", "")
        raise TopoplanError(f"{msg}; pass --any-inputs to use it anyway") from None
    return True
