"""Job allocations (node lists) and the clusters 002 evaluates on.

An allocation is an ordered list of node ids (the node-leader communicator in
allocation order). It comes from a file (host names, in any case, or node ids,
one per line; ``#`` comments), an inline Slurm host list (``node[001-004,009]``, as
``$SLURM_JOB_NODELIST`` gives it) or a generator ``gen:nodes=256,racks=22,seed=1``
that scatters the job over racks like 002 Table I.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from topoplan.core.errors import TopoplanError
from topoplan.core.io import is_json_document, read_text
from topoplan.core.placement import node_ids
from topoplan.core.topology import GraphTopology
from topoplan.core.topology_io import expand_hostlist
from topoplan.core.units import ascii_int

__all__ = ["SDR_Bps", "DDR_Bps", "read_allocation", "check", "generate", "parse_spec", "cluster"]

SDR_Bps = 1e9    # 8 Gbps
DDR_Bps = 2e9    # 16 Gbps


def read_allocation(path, topo) -> np.ndarray:
    """Node ids from a file of host names (any case) or node ids, one per line.

    Names are resolved by :func:`topoplan.core.placement.node_ids`.

    Parameters
    ----------
    path : str or path
        ``#`` starts a comment.
    topo : Topology
        Names the hosts.

    Returns
    -------
    numpy.ndarray of int64
        The allocation, in file order (checked: existing nodes, none twice).

    Raises
    ------
    TopoplanError
        For a missing file, an unknown host (naming the line), or a bad allocation.

    Examples
    --------
    >>> import os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "nodes.txt")
    >>> with open(path, "w") as fh:
    ...     _ = fh.write("# my job\\nn00004\\nn00005\\n9\\n")
    >>> read_allocation(path, cluster(4, 4)).tolist()
    [4, 5, 9]
    >>> with open(path, "w") as fh:
    ...     _ = fh.write("N00004\\nn00099\\n")
    >>> read_allocation(path, cluster(4, 4))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: .../nodes.txt:2: unknown host 'n00099' (hosts: n00000, n00001, ..., n00015; or a node id 0-15)
    """
    path = Path(path)
    if not path.is_file():
        raise TopoplanError(f"field 'allocation': {path}: no such file (or a host list such as node[01-04], "
                            "or gen:nodes=N,racks=R,seed=S)")
    if is_json_document(path, "allocation"):   # a plan: every line would be an unknown host ('{')
        raise TopoplanError(f"{path}: a JSON document (a plan?), not an allocation: host names or node ids, one "
                            "per line")
    tokens = []

    for ln, line in enumerate(read_text(path, "allocation").splitlines(), 1):
        tok = line.split("#", 1)[0].strip()
        if tok:
            tokens.append((tok, f"{path}:{ln}"))
    return check(_resolve(tokens, topo), topo, str(path), at=lambda i: tokens[i][1])


def _resolve(tokens, topo) -> np.ndarray:
    """Map (host name or node id, where) pairs to node ids (:func:`topoplan.core.placement.node_ids`)."""
    return node_ids([tok for tok, _ in tokens], topo, lambda i: tokens[i][1])


def _looks_like_hostlist(spec: str) -> bool:
    # Slurm separates hosts by commas, spaces or tabs ('cn01 cn05'); a path with a space keeps its '/'
    return not Path(spec).exists() and ("," in spec or "[" in spec or (spec.strip() != "" and "/" not in spec
                                                                          and any(c in spec for c in " \t")))


def check(nodes: np.ndarray, topo, where: str, at=None) -> np.ndarray:
    """Check an allocation: not empty, existing nodes, each node once (one leader per node).

    Parameters
    ----------
    nodes : numpy.ndarray of int
    topo : Topology
    where : str
        How errors name the allocation.
    at : callable, optional
        ``at(i)`` names where node ``i`` was written (``"nodes.txt:3"``); errors about one node use it.

    Returns
    -------
    numpy.ndarray
        ``nodes`` itself.

    Raises
    ------
    TopoplanError
        Naming the node at fault and, with ``at``, where it was written (and where a repeated node was
        first).

    Examples
    --------
    >>> check(np.array([3, 0]), cluster(2, 2), "job").tolist()
    [3, 0]
    >>> check(np.array([0, 0]), cluster(2, 2), "job")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: job: node 0 (n00000) appears twice (one leader per node)
    >>> check(np.array([1, 2, 1]), cluster(2, 2), "job", at=lambda i: f"nodes.txt:{i + 1}")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: nodes.txt:3: node 1 (n00001) appears twice (first at nodes.txt:1; one leader per node)
    """
    if len(nodes) == 0:
        raise TopoplanError(f"{where}: empty allocation")

    def loc(i):
        return at(int(i)) if at is not None else where

    bad = np.flatnonzero((nodes < 0) | (nodes >= topo.n_nodes))
    if len(bad):
        i = bad[0]
        raise TopoplanError(f"{loc(i)}: node {int(nodes[i])} outside the topology's {topo.n_nodes} nodes")
    _, first = np.unique(nodes, return_index=True)
    if len(first) != len(nodes):
        seen = np.zeros(len(nodes), dtype=bool)
        seen[first] = True
        j = int(np.flatnonzero(~seen)[0])
        i = int(np.flatnonzero(nodes == nodes[j])[0])
        node = int(nodes[j])
        again = f" (first at {loc(i)}; one leader per node)" if at is not None else " (one leader per node)"
        raise TopoplanError(f"{loc(j)}: node {node} ({topo.host_names()[node]}) appears twice{again}")
    return nodes


def generate(topo, nodes: int, racks: int | None = None, seed: int = 0) -> np.ndarray:
    """``nodes`` nodes scattered over ``racks`` randomly chosen switches, in random (scheduler) order.

    ``racks`` defaults to 002 Table I's ratio (about one rack per 2.5 hosts at 1K-4K cores)
    capped by the topology. Nodes are spread as evenly as the racks allow.

    Parameters
    ----------
    topo : Topology
    nodes : int
    racks : int, optional
    seed : int, optional

    Returns
    -------
    numpy.ndarray of int64

    Raises
    ------
    TopoplanError
        When the nodes do not fit the racks or the topology.

    References
    ----------
    002 Table I (allocations scattered over racks by the scheduler).

    Examples
    --------
    >>> generate(cluster(4, 4), 6, racks=2, seed=1).tolist()
    [7, 5, 0, 4, 2, 3]
    """
    if seed < 0:
        raise TopoplanError(f"gen: seed={seed} must be a non-negative integer")
    rng = np.random.default_rng(seed)
    sw = np.asarray(topo.node_switch())
    n_sw = int(sw.max()) + 1
    if nodes < 1 or nodes > topo.n_nodes:
        raise TopoplanError(f"gen: nodes={nodes} must be between 1 and the topology's {topo.n_nodes}")
    if racks is None:
        racks = max(1, min(n_sw, int(round(nodes / 2.5))))
    if not 1 <= racks <= n_sw:
        raise TopoplanError(f"gen: racks={racks} must be between 1 and the topology's {n_sw} switches")
    chosen = rng.permutation(n_sw)[:racks]
    members = [rng.permutation(np.flatnonzero(sw == s)) for s in chosen]
    cap = sum(len(m) for m in members)
    if cap < nodes:
        raise TopoplanError(f"gen: {racks} racks hold only {cap} nodes, asked for {nodes}")
    take, i = [], 0
    pos = [0] * racks
    while len(take) < nodes:  # round-robin over racks: even spread
        r = i % racks
        if pos[r] < len(members[r]):
            take.append(int(members[r][pos[r]])); pos[r] += 1
        i += 1
    out = np.asarray(take, dtype=np.int64)
    return out[rng.permutation(len(out))]


def parse_spec(spec: str, topo, seed: int = 0) -> np.ndarray:
    """Resolve ``--allocation``: a file, a Slurm host list (``node[01-04],node09``),
    ``gen:nodes=...,racks=...,seed=...`` or ``all``.

    Parameters
    ----------
    spec : str
    topo : Topology
    seed : int, optional
        Default seed of ``gen:``.

    Returns
    -------
    numpy.ndarray of int64
        The allocation.

    Raises
    ------
    TopoplanError
        For an unknown host, a bad generator spec or a bad allocation.

    Examples
    --------
    >>> topo = cluster(4, 4)
    >>> parse_spec("n[00000-00001],n00008", topo).tolist()
    [0, 1, 8]
    >>> parse_spec("n00003 n00001", topo).tolist()
    [3, 1]
    >>> parse_spec("gen:nodes=4,racks=2,seed=3", topo).tolist()
    [11, 15, 13, 9]
    >>> parse_spec("all", cluster(2, 2)).tolist()
    [0, 1, 2, 3]
    """
    if spec == "all":
        return np.arange(topo.n_nodes, dtype=np.int64)
    if spec.startswith("gen:"):
        kw = {}
        for part in filter(None, spec[4:].split(",")):
            if "=" not in part:
                raise TopoplanError(f"field 'allocation': {spec}: expected key=value, got {part!r}")
            k, v = part.split("=", 1)
            if k not in ("nodes", "racks", "seed"):
                raise TopoplanError(f"field 'allocation': {spec}: unknown key {k!r} (nodes, racks, seed)")
            if k in kw:   # the last one would win unseen
                raise TopoplanError(f"field 'allocation': {spec}: {k} given twice")

            kw[k] = ascii_int(v, f"field 'allocation': {spec}: {k}")   # not int(): int('٣') == 3
        if "nodes" not in kw:
            raise TopoplanError(f"field 'allocation': {spec}: needs nodes=N")
        return generate(topo, kw["nodes"], kw.get("racks"), kw.get("seed", seed))
    if _looks_like_hostlist(spec):
        where = f"--allocation {spec}"
        return check(_resolve([(h, where) for h in expand_hostlist(spec, where + ": ")], topo), topo, where)
    return read_allocation(spec, topo)


def cluster(racks: int, nodes_per_rack: int, *, bw_Bps=SDR_Bps, spine_bw_Bps: float | None = None,
            latency_s: float = 5e-7, switch_delay_s: float = 2e-7, name: str = "") -> GraphTopology:
    """A two-level cluster (leaf switch per rack, one spine) as a GraphTopology.

    ``bw_Bps`` is one rate for all hosts, a per-host sequence, or ``"mixed"``:
    alternate racks are SDR and DDR (002's Glenn: an SDR and a DDR tree joined
    at the spine).

    Parameters
    ----------
    racks, nodes_per_rack : int
    bw_Bps : float, sequence of float or "mixed", optional
        Host link rates (default SDR, 8 Gbps).
    spine_bw_Bps : float, optional
        Leaf-to-spine links; default enough for the rack.
    latency_s, switch_delay_s : float, optional
    name : str, optional

    Returns
    -------
    GraphTopology
        Hosts ``n00000``...; switches ``leaf000``..., ``spine``.

    References
    ----------
    002 section V (the evaluation clusters; Glenn's mixed SDR/DDR HCAs).

    Examples
    --------
    >>> topo = cluster(4, 4)
    >>> topo.n_nodes, topo.switches
    (16, ('leaf000', 'leaf001', 'leaf002', 'leaf003', 'spine'))
    >>> cluster(2, 2, bw_Bps="mixed").host_bw_Bps
    (1000000000.0, 1000000000.0, 2000000000.0, 2000000000.0)
    """
    n = racks * nodes_per_rack
    if isinstance(bw_Bps, str):
        if bw_Bps != "mixed":
            raise TopoplanError(f"field 'bw_Bps': a rate or 'mixed', got {bw_Bps!r}")
        bw = [SDR_Bps if (i // nodes_per_rack) % 2 == 0 else DDR_Bps for i in range(n)]
    elif np.ndim(bw_Bps) == 0:
        bw = [float(bw_Bps)] * n
    else:
        bw = [float(b) for b in bw_Bps]
    spine = spine_bw_Bps or max(bw) * nodes_per_rack
    t = GraphTopology(switches=tuple(f"leaf{r:03d}" for r in range(racks)) + ("spine",),
                      hosts=tuple(f"n{i:05d}" for i in range(n)),
                      host_switch=tuple(i // nodes_per_rack for i in range(n)), host_bw_Bps=tuple(bw),
                      links=tuple((r, racks, spine) for r in range(racks)), latency_s=latency_s,
                      switch_delay_s=switch_delay_s, name=name or f"cluster{racks}x{nodes_per_rack}")
    t.validate()
    return t
