"""Fingerprints of the inputs a plan was made for, so that a plan is never used with other ones.

Every plan records ``inputs``: a short hash of its topology (after ``--set`` overrides), of its
traffic and of the placement it assumed (when it assumed one). ``validate``, ``simulate`` and
``export`` recompute the fingerprints of the inputs they are given and refuse a plan made for
different ones (:func:`check_inputs`), unless told to use it anyway.

What is hashed:

- topology: every field of the topology's dataclass except its ``name`` (a preset and its YAML dump
  are the same network) and private caches; floats exactly (``repr``), so a bandwidth changed by
  ``--set ocs.bw=1Gbps`` changes the fingerprint;
- traffic: the communication matrix (ordered rank pairs, bytes rounded to whole bytes, message
  counts) and the number of ranks, so a trace and the matrix written from it (``topoplan traffic
  -o m.csv``) have the same fingerprint;
- placement: ``rank_to_node`` and ``rank_to_slot``; a circuit plan carries ``rank_to_node`` alone (its
  circuits do not depend on the slots), so it records the placement with the slots its readers give
  (consecutive on each node, in rank order), and :func:`check_plan_placement` compares that record with the
  plan's own ``rank_to_node``;
- trace (what a phases document is cut on): every call's rank, op, peer, bytes, root, communicator
  size and id, tag and request kind, in call order, and the number of ranks -- not its times, so a
  trace recorded again from the same run order keeps its phases.
"""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np

from topoplan.core.errors import TopoplanError
from topoplan.core.placement import placement_from_doc

__all__ = ["DIGEST_CHARS", "fingerprint_topology", "fingerprint_traffic", "fingerprint_placement",
           "fingerprint_trace", "fingerprint", "check_inputs", "check_plan_placement"]

DIGEST_CHARS = 16   # 64 bits of SHA-256: collisions are not a concern for telling inputs apart


def _digest(parts) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else repr(p).encode())
        h.update(b"\x1f")
    return h.hexdigest()[:DIGEST_CHARS]


def _canonical(value):
    if isinstance(value, np.ndarray):
        return (str(value.dtype), value.shape, value.tobytes())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return tuple((f.name, _canonical(getattr(value, f.name))) for f in dataclasses.fields(value)
                     if not f.name.startswith("_"))
    if isinstance(value, (list, tuple)):
        return tuple(_canonical(v) for v in value)
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    return value


def fingerprint_topology(topo) -> str:
    """Fingerprint of a topology (every field but its name).

    Parameters
    ----------
    topo : TreeTopology, TorusTopology or GraphTopology

    Returns
    -------
    str
        16 hexadecimal digits.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> a = fingerprint_topology(load_topology("paper003"))
    >>> a == fingerprint_topology(load_topology("paper003")), len(a)
    (True, 16)
    >>> a == fingerprint_topology(load_topology("paper003", ["ocs.bw=1Gbps"]))
    False
    """
    if not dataclasses.is_dataclass(topo):
        raise TopoplanError(f"field 'topology': expected a topology, got {type(topo).__name__}")
    fields = [(f.name, _canonical(getattr(topo, f.name))) for f in dataclasses.fields(topo)
              if f.name != "name" and not f.name.startswith("_")]
    return _digest([type(topo).__name__, *fields])


def fingerprint_traffic(traffic) -> str:
    """Fingerprint of rank traffic: its communication matrix and number of ranks.

    Parameters
    ----------
    traffic : topoplan.traffic.matrix.Traffic

    Returns
    -------
    str
        16 hexadecimal digits; equal for a trace and the matrix written from it.

    Examples
    --------
    >>> from topoplan.traffic.matrix import from_arrays
    >>> a = from_arrays(4, src=[0, 1], dst=[1, 2], msg_bytes=[1e6, 10.0])
    >>> b = from_arrays(4, src=[1, 0], dst=[2, 1], msg_bytes=[10.0, 1e6])   # same traffic, other order
    >>> fingerprint_traffic(a) == fingerprint_traffic(b)
    True
    >>> fingerprint_traffic(a) == fingerprint_traffic(from_arrays(4, src=[0], dst=[1], msg_bytes=[1e6]))
    False
    """
    src, dst, by, msgs = traffic.matrix()
    return _digest([int(traffic.n_ranks), np.asarray(src, np.int64).tobytes(), np.asarray(dst, np.int64).tobytes(),
                    np.rint(np.asarray(by, np.float64)).tobytes(), np.asarray(msgs, np.int64).tobytes()])


def fingerprint_placement(placement) -> str:
    """Fingerprint of a placement (node and slot of every rank).

    Parameters
    ----------
    placement : topoplan.core.placement.Placement

    Returns
    -------
    str
        16 hexadecimal digits.

    Examples
    --------
    >>> from topoplan.core.placement import Placement
    >>> p = Placement(np.array([0, 0, 1]), np.array([0, 1, 0]))
    >>> fingerprint_placement(p) == fingerprint_placement(Placement(np.array([0, 1, 0]), np.array([0, 0, 1])))
    False
    """
    return _digest([np.asarray(placement.rank_to_node, np.int64).tobytes(),
                    np.asarray(placement.rank_to_slot, np.int64).tobytes()])


def fingerprint_trace(trace) -> str:
    """Fingerprint of an MPI trace's calls (see the module docstring): its times are not part of it.

    Parameters
    ----------
    trace : topoplan.traffic.trace.Trace

    Returns
    -------
    str
        16 hexadecimal digits.

    Examples
    --------
    >>> from topoplan.traffic.generators import ring
    >>> a, b = ring(4, 1e6, iters=2), ring(4, 1e6, iters=2)
    >>> b.t_end = b.t_end * 2   # the same calls, other times
    >>> fingerprint_trace(a) == fingerprint_trace(b), fingerprint_trace(a) == fingerprint_trace(ring(4, 1e6, iters=3))
    (True, False)
    """
    cols = [np.asarray(getattr(trace, c), np.int64).tobytes()
            for c in ("rank", "op", "peer", "root", "comm_size", "comm", "tag", "req")]
    return _digest([int(trace.n_ranks), np.rint(np.asarray(trace.bytes, np.float64)).tobytes(), *cols])


def fingerprint(*, topology=None, traffic=None, placement=None, trace=None, **extra) -> dict[str, str]:
    """The ``inputs`` record of a plan: a fingerprint per given input.

    Parameters
    ----------
    topology, traffic, placement, trace : optional
        The inputs (None: not part of the record).
    **extra
        Other inputs by name, hashed by value (e.g. a Bcast allocation's node list).

    Returns
    -------
    dict of str to str

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> sorted(fingerprint(topology=load_topology("paper003"), allocation=[0, 5, 9]))
    ['allocation', 'topology']
    """
    out = {}
    if topology is not None:
        out["topology"] = fingerprint_topology(topology)
    if traffic is not None:
        out["traffic"] = fingerprint_traffic(traffic)
    if placement is not None:
        out["placement"] = fingerprint_placement(placement)
    if trace is not None:
        out["trace"] = fingerprint_trace(trace)
    for key, value in extra.items():
        if value is not None:
            out[key] = _digest([_canonical(np.asarray(value) if isinstance(value, (list, tuple)) else value)])
    return out


def check_inputs(recorded, current: dict[str, str], where: str = "plan") -> None:
    """Refuse a plan made for other inputs than the ones given.

    Only inputs present in both records are compared: a plan without ``inputs`` (written before
    fingerprints were recorded) or an input not given now is not checked.

    Parameters
    ----------
    recorded : dict or None
        The plan's ``inputs``.
    current : dict of str to str
        :func:`fingerprint` of the inputs given now.
    where : str, optional
        Names the plan in messages.

    Raises
    ------
    TopoplanError
        ``where: field 'inputs': made for another <input> (...)``.

    Examples
    --------
    >>> check_inputs({"topology": "aaaa", "traffic": "bbbb"}, {"topology": "aaaa"})
    >>> check_inputs({"topology": "aaaa"}, {"topology": "cccc"}, "c.json")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: c.json: field 'inputs': made for another topology (fingerprint aaaa, the one given has cccc)
    """
    if recorded is None:
        return
    if not isinstance(recorded, dict) or not all(isinstance(v, str) for v in recorded.values()):
        raise TopoplanError(f"{where}: field 'inputs': expected an object of fingerprint strings")
    for key in ("topology", "traffic", "placement", "trace",
                *sorted(set(current) - {"topology", "traffic", "placement", "trace"})):
        if key in recorded and key in current and recorded[key] != current[key]:
            raise TopoplanError(f"{where}: field 'inputs': made for another {key} (fingerprint {recorded[key]}, "
                                f"the one given has {current[key]})")


def check_plan_placement(plan, where: str = "plan", hosts=None) -> None:
    """Refuse a plan whose own placement (``rank_to_node`` [+ ``rank_to_slot``]) is not the one its ``inputs``
    record: it was edited after planning.

    Only a plan carrying both is compared (circuit plans and schedules: their placement fingerprint is of
    ``rank_to_node`` with the slots :func:`topoplan.core.placement.placement_from_doc` gives it).

    Parameters
    ----------
    plan : dict
        The plan document.
    where : str, optional
        Names the plan in messages.
    hosts : Topology or sequence of str, optional
        Resolves host names in ``rank_to_node``; without it, a plan naming hosts is not compared.

    Raises
    ------
    TopoplanError
        ``where: field 'rank_to_node': changed after planning (...)``, or a ``rank_to_node`` that is not a
        placement.

    Examples
    --------
    >>> from topoplan.core.placement import Placement
    >>> plan = {"rank_to_node": [0, 0, 1],
    ...         "inputs": fingerprint(placement=Placement(np.array([0, 0, 1]), np.array([0, 1, 0])))}
    >>> check_plan_placement(plan)
    >>> plan["rank_to_node"] = [0, 1, 0]
    >>> check_plan_placement(plan, "c.json")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: c.json: field 'rank_to_node': changed after planning (...)
    """
    if not isinstance(plan, dict) or plan.get("rank_to_node") is None:
        return
    recorded = plan.get("inputs")
    if not isinstance(recorded, dict) or not isinstance(recorded.get("placement"), str):
        return
    nodes = plan["rank_to_node"]
    if hosts is None and isinstance(nodes, list) and any(isinstance(v, str) for v in nodes):
        return   # host names: compared where the topology is known
    own = fingerprint_placement(placement_from_doc(plan, where, hosts))
    if own != recorded["placement"]:
        raise TopoplanError(f"{where}: field 'rank_to_node': changed after planning (its placement has fingerprint "
                            f"{own}, the plan's inputs record {recorded['placement']})")
