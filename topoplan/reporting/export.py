"""Launcher files from a placement: Open MPI 4/5 rankfiles, MPICH/Hydra machinefile, Slurm arbitrary, JSON.

Formats (``FORMATS``):

- ``ompi4``: Open MPI 4 rankfile, one line ``rank N=host slot=S`` per rank
  (``S`` = logical core on that host). Run with
  ``mpirun --rankfile FILE -np N prog``.
- ``ompi5``: Open MPI 5 / PRRTE rankfile. PRRTE keeps the ``rank N=host
  slot=S`` syntax (``slot`` = core index; ``S:C`` would be socket:core);
  the option is ``mpirun --map-by rankfile:file=FILE -np N prog``, which
  Open MPI 4 refuses. The file is the same for both: the command printed
  is the one of the Open MPI whose ``mpirun`` is installed where the export
  runs (:func:`topoplan.traffic.recorder.openmpi_version`), else the one the
  format names (:func:`launch_command`).
- ``mpich``: MPICH/Hydra machinefile, one host per line per rank in rank
  order (Hydra places rank i on line i; it does not bind to a core, so add
  ``-bind-to core`` to keep ranks on distinct cores).
- ``slurm``: ``SLURM_HOSTFILE`` content (one host per rank in rank order)
  for ``SLURM_HOSTFILE=FILE srun --distribution=arbitrary -n N prog``.
  Neither host list can say which slot a rank takes: the launcher puts a
  node's ranks on its slots 0, 1, ... in rank order, so a placement with
  other slots is refused (``ompi4``/``ompi5`` rankfiles express them).
- ``json``: ``{"ranks": [{"rank", "node", "host", "slot"}, ...]}``, with ``rank_to_node`` and
  ``rank_to_slot``: a placement file too (``-p``, ``topoplan validate``), which keeps the seed, input
  fingerprints and topology of the plan it came from (``topoplan export``).
- ``ocs``: not a launcher file but a circuit plan or schedule for an OCS controller
  (cross-connects by OCS port, their changes, per-host forwarding rules); given the plan
  document instead of a placement, it is written by :mod:`topoplan.reporting.ocs_export`.
- ``routes``: a circuit plan's forwarding tables as iproute2 batch files, one per host, in a
  directory (:mod:`topoplan.reporting.routes_export`).

Slots are cores by default. When the topology's ``cores_per_node`` counts
hardware threads (48 on 2 sockets x 12 cores x 2 threads), ``slots="hwthreads"``
makes the commands say so (``--use-hwthread-cpus`` for Open MPI 4, the
``hwtcpus`` qualifier for Open MPI 5, ``-bind-to hwthread`` for Hydra): an
Open MPI rankfile slot past the last core otherwise stops ``mpirun``.

Host names come from the topology (``host_names()``: Slurm/ibnetdiscover
names, or ``node0000``...) or a hostfile: ``node_id host`` per line, or one
host per line in node order (``#`` starts a comment). A placement that
does not validate against the topology is never exported, nor are host
names a launcher would misread (a space, ``=``, a newline, a shell
character) or one name for two nodes: see
:func:`topoplan.core.topology.check_host_names`.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import numpy as np

from topoplan.core.errors import TopoplanError
from topoplan.core.io import atomic_write, dumps, is_stdout, read_text
from topoplan.core.placement import from_nodes
from topoplan.core.topology import check_host_names, MAX_NODES
from topoplan.core.units import shown
from topoplan.reporting.ocs_export import export_ocs, render_ocs
from topoplan.reporting.routes_export import export_routes

__all__ = ["FORMATS", "SLOTS", "STDOUT_FILE", "read_hostfile", "render", "launch_command", "export"]

FORMATS = ("ompi4", "ompi5", "mpich", "slurm", "json", "ocs", "routes")
SLOTS = ("cores", "hwthreads")   # what a slot number counts on a host


def read_hostfile(path, n_nodes: int | None = None) -> list[str]:
    """Host name of every node id from ``path`` (``node_id host`` lines, or one host per line).

    Parameters
    ----------
    path : str or path
        The hostfile; ``#`` starts a comment.
    n_nodes : int, optional
        Nodes of the topology: the file must name at least these.

    Returns
    -------
    list of str
        Host of node 0, 1, ...

    Raises
    ------
    TopoplanError
        Naming the line, for a bad or repeated node id, a node without a name,
        a host name launchers would misread or one named for two nodes (see
        :func:`topoplan.core.topology.check_host_names`), mixed line shapes, or
        too few hosts.

    Examples
    --------
    >>> import os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "hosts")
    >>> with open(path, "w") as fh:
    ...     _ = fh.write("# node id, host\\n1 cn-b\\n0 cn-a\\n")
    >>> read_hostfile(path)
    ['cn-a', 'cn-b']
    >>> read_hostfile(path, n_nodes=4)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: .../hosts: names 2 hosts but the topology has 4 nodes
    >>> with open(path, "w") as fh:
    ...     _ = fh.write("cn-a\\ncn-b;reboot\\n")
    >>> read_hostfile(path)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: .../hosts:2: field 'host': host name 'cn-b;reboot' contains ';'; ...
    """
    path = Path(path)
    lines = []
    # Lines end at '\n' only and fields are split at spaces and tabs only: any other control or Unicode
    # space stays inside the name, which the host-name check then refuses (str.split() and splitlines()
    # would quietly cut a name in two, or shift every later line).
    for i, raw in enumerate(read_text(path, "hostfile").split("\n"), 1):
        line = raw.split("#", 1)[0].strip(" \t\r")
        if line:
            lines.append((i, re.split(r"[ \t]+", line)))
    if not lines:
        raise TopoplanError(f"{path}: hostfile has no hosts")
    if all(len(f) == 2 for _, f in lines):
        names: dict[int, tuple[str, int]] = {}
        for i, (node, host) in lines:
            if not _INT.fullmatch(node):   # int() also takes '٣', '+3' and '1_0'
                raise TopoplanError(f"{path}:{i}: field 'node_id': expected an integer, got {shown(node)}")
            if len(node.lstrip("-").lstrip("0")) > len(str(MAX_NODES)):   # before int(): it fails past 4,300 digits
                why = "negative" if node.startswith("-") else f"over the limit of {MAX_NODES:,} nodes"
                raise TopoplanError(f"{path}:{i}: field 'node_id': {shown(node, quote=False)} is {why}")
            k = int(node)
            if k < 0 or k in names:
                raise TopoplanError(f"{path}:{i}: field 'node_id': {k} is negative or listed twice")
            if k >= MAX_NODES:
                raise TopoplanError(f"{path}:{i}: field 'node_id': {k} is over the limit of {MAX_NODES:,} nodes")
            names[k] = (host, i)
        size = max(names) + 1
        missing = [k for k in range(size) if k not in names]
        if missing:
            raise TopoplanError(f"{path}: node {missing[0]} has no host name")
        hosts = [names[k][0] for k in range(size)]
        where = [names[k][1] for k in range(size)]
    elif all(len(f) == 1 for _, f in lines):
        hosts = [f[0] for _, f in lines]
        where = [i for i, _ in lines]
    else:
        i = next(i for i, f in lines if len(f) not in (1, 2) or len(f) != len(lines[0][1]))
        raise TopoplanError(f"{path}:{i}: expected 'node_id host' or 'host' on every line")
    # two nodes with one name would send their ranks to the same machine
    check_host_names(hosts, "host", source=path, lines=where)
    if n_nodes is not None and len(hosts) < n_nodes:
        raise TopoplanError(f"{path}: names {len(hosts)} hosts but the topology has {n_nodes} nodes")
    return hosts


_INT = re.compile(r"-?[0-9]+")   # a node id in ASCII digits (int() also takes '٣', '+3' and '1_0')


def _check(placement, topo, hosts):
    """Validate ``placement`` (against ``topo`` when given) and its host names; errors name the rank's
    file, line and field when the placement was read from a file (``placement.origin``)."""
    node, slot = placement.rank_to_node, placement.rank_to_slot

    def at(r, column):
        return placement.origin(int(r), column) if placement.origin is not None else "placement"

    if topo is not None:
        placement.validate(topo, where="placement")
    else:
        for column, values in (("node", node), ("slot", slot)):
            bad = np.flatnonzero(values < 0)
            if bad.size:
                r = bad[0]
                raise TopoplanError(f"{at(r, column)}: rank {r} is on {column} {values[r]} (ids start at 0)")
        key = node * (int(slot.max()) + 1) + slot
        uniq, first, counts = np.unique(key, return_index=True, return_counts=True)
        if (counts > 1).any():
            r0 = int(first[counts > 1][0])
            r1 = int(np.flatnonzero(key == key[r0])[1])
            raise TopoplanError(f"{at(r1, 'slot')}: ranks {r0} and {r1} share node {node[r0]} slot {slot[r0]}")
    r = int(np.argmax(node))
    if len(hosts) <= node[r]:
        raise TopoplanError(f"{at(r, 'node')}: rank {r} is on node {node[r]} but only {len(hosts)} host names "
                            "are known")


_HOST_LISTS = {"mpich": "an MPICH (Hydra) machinefile", "slurm": "a SLURM_HOSTFILE"}


def _check_slots_in_rank_order(placement, fmt: str) -> None:
    """Refuse slots a host list cannot express: a machinefile or ``SLURM_HOSTFILE`` names each rank's host only,
    and the launcher puts a node's ranks on its slots 0, 1, ... in rank order (Hydra's ``-bind-to core``, srun's
    binding of a node's tasks); other slots would be dropped without a word."""
    want = from_nodes(placement.rank_to_node, None).rank_to_slot
    bad = np.flatnonzero(placement.rank_to_slot != want)
    if bad.size:
        r = int(bad[0])
        at = placement.origin(r, "slot") if placement.origin is not None else "placement"
        raise TopoplanError(f"{at}: rank {r} is on slot {placement.rank_to_slot[r]} of node "
                            f"{placement.rank_to_node[r]}, but {_HOST_LISTS[fmt]} gives each rank's host only (the "
                            f"launcher puts a node's ranks on its slots in rank order: slot {want[r]}); it cannot "
                            "express these slots: export ompi4 or ompi5 (an Open MPI rankfile) does")


def render(fmt: str, placement, hosts: list[str], topo=None, record: dict | None = None) -> str:
    """The file content of format ``fmt`` (see the module docstring); validates first.

    Parameters
    ----------
    fmt : str
        One of :data:`FORMATS`.
    placement : Placement
        For ``ocs``, the circuit plan or schedule document (see :func:`topoplan.reporting.ocs_export.render_ocs`).
    hosts : list of str
        Host name of every node id.
    topo : Topology, optional
        When given, the placement is validated against it (else only for distinct slots); ``ocs`` needs it.
    record : dict, optional
        ``json``: what the plan the placement came from records (``seed``, ``inputs``, ``topology_spec``,
        ...), kept in the document so that it is checked against its inputs when read back.

    Returns
    -------
    str

    Raises
    ------
    TopoplanError
        For an unknown format, an invalid placement, too few host names, a
        host name a launcher would misread or given to two nodes, or (``mpich``,
        ``slurm``: host lists) slots other than a node's 0, 1, ... in rank order.

    Examples
    --------
    >>> from topoplan.core.placement import Placement
    >>> import numpy as np
    >>> print(render("ompi4", Placement(np.array([0, 0]), np.array([1, 0])), ["a"]), end="")
    rank 0=a slot=1
    rank 1=a slot=0
    >>> print(render("mpich", Placement(np.array([0, 0, 1]), np.array([0, 1, 0])), ["a", "b"]), end="")
    a
    a
    b
    >>> render("slurm", Placement(np.array([0, 0]), np.array([1, 0])), ["a"])
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: placement: rank 0 is on slot 1 of node 0, but a SLURM_HOSTFILE gives each rank's host only (the launcher puts a node's ranks on its slots in rank order: slot 0); it cannot express these slots: export ompi4 or ompi5 (an Open MPI rankfile) does
    """
    if fmt not in FORMATS:
        raise TopoplanError(f"unknown export format {fmt!r} (formats: {', '.join(FORMATS)})")
    if fmt == "ocs":
        if topo is None:
            raise TopoplanError("the ocs export needs the topology the plan is for")
        return render_ocs(placement, topo, hosts=hosts)
    if fmt == "routes":
        raise TopoplanError("the routes export is a directory of files: use export(..., 'routes', ...) or "
                            "topoplan.reporting.routes_export")
    _check(placement, topo, hosts)
    if fmt in ("mpich", "slurm"):
        _check_slots_in_rank_order(placement, fmt)
    check_host_names(hosts, "hosts")   # the names are written verbatim: the last guard against a rewritten line
    node, slot = placement.rank_to_node.tolist(), placement.rank_to_slot.tolist()
    if fmt in ("ompi4", "ompi5"):
        return "".join(f"rank {r}={hosts[k]} slot={s}\n" for r, (k, s) in enumerate(zip(node, slot)))
    if fmt in ("mpich", "slurm"):
        return "".join(f"{hosts[k]}\n" for k in node)
    doc = {"n_ranks": len(node), "rank_to_node": node, "rank_to_slot": slot,   # a placement -p and validate read
           **{k: v for k, v in (record or {}).items() if k not in ("n_ranks", "rank_to_node", "rank_to_slot", "ranks")},
           "ranks": [{"rank": r, "node": k, "host": hosts[k], "slot": s} for r, (k, s) in enumerate(zip(node, slot))]}
    return dumps(doc) + "\n"


#: What the launcher line names the file by when it went to standard output (``-o -``): a launcher reads a file.
STDOUT_FILE = "FILE"


def launch_command(fmt: str, path, n_ranks: int, *, openmpi: int | None = None, slots: str = "cores") -> str:
    """The launcher line that uses the exported file, as a shell runs it.

    The path is quoted for the shell (``shlex.quote``: a space, ``$(...)`` or a quote in it is the file's name,
    not shell syntax), and one starting with ``-`` is written ``./-...`` (not an option). A file written to
    standard output (``-``) is no file a launcher can read: the line names it :data:`STDOUT_FILE`, the file
    the user saves it to.

    Parameters
    ----------
    fmt : str
        One of :data:`FORMATS`.
    path : str or path
        The exported file (``-``: standard output).
    n_ranks : int
    openmpi : int, optional
        The major version of the Open MPI that runs the rankfile (``ompi4``/``ompi5``): 5 and
        later take ``--map-by rankfile:file=``, older ones ``--rankfile``. Default: the format's
        (4 for ``ompi4``, 5 for ``ompi5``).
    slots : str, optional
        What a slot number counts (:data:`SLOTS`): ``cores``, or ``hwthreads`` (then the command
        says so: ``--use-hwthread-cpus``, ``:hwtcpus``, ``-bind-to hwthread``).

    Returns
    -------
    str
        With ``PROGRAM`` for the program; empty for ``json`` and ``ocs``.

    Examples
    --------
    >>> launch_command("ompi4", "ranks.txt", 3)
    'mpirun --rankfile ranks.txt -np 3 PROGRAM'
    >>> launch_command("ompi5", "ranks.txt", 3), launch_command("ompi5", "ranks.txt", 3, openmpi=4)
    ('mpirun --map-by rankfile:file=ranks.txt -np 3 PROGRAM', 'mpirun --rankfile ranks.txt -np 3 PROGRAM')
    >>> launch_command("ompi4", "ranks.txt", 3, slots="hwthreads")
    'mpirun --rankfile ranks.txt --use-hwthread-cpus -np 3 PROGRAM'
    >>> launch_command("ompi4", "ranks.txt", 3, openmpi=5, slots="hwthreads")
    'mpirun --map-by rankfile:file=ranks.txt:hwtcpus -np 3 PROGRAM'
    >>> launch_command("slurm", "hosts.txt", 3)
    'SLURM_HOSTFILE=hosts.txt srun --distribution=arbitrary -n 3 PROGRAM'
    >>> print(launch_command("slurm", "sp ace/$(id)", 3))
    SLURM_HOSTFILE='sp ace/$(id)' srun --distribution=arbitrary -n 3 PROGRAM
    >>> launch_command("ompi5", "my ranks", 3, slots="hwthreads"), launch_command("ompi4", "-", 3)
    ("mpirun --map-by rankfile:file='my ranks':hwtcpus -np 3 PROGRAM", 'mpirun --rankfile FILE -np 3 PROGRAM')
    """
    if fmt not in FORMATS:
        raise TopoplanError(f"unknown export format {fmt!r} (formats: {', '.join(FORMATS)})")
    if slots not in SLOTS:
        raise TopoplanError(f"field 'slots': expected one of {', '.join(SLOTS)}, got {slots!r}")
    hw = slots == "hwthreads"
    path = STDOUT_FILE if is_stdout(path) else os.fspath(path)
    path = shlex.quote(f"./{path}" if path.startswith("-") else path)
    if fmt in ("ompi4", "ompi5"):
        major = openmpi if openmpi is not None else int(fmt[-1])
        if major >= 5:   # PRRTE: the rankfile is a mapping policy; hwtcpus makes its slots hardware threads
            return f"mpirun --map-by rankfile:file={path}{':hwtcpus' if hw else ''} -np {n_ranks} PROGRAM"
        return f"mpirun --rankfile {path}{' --use-hwthread-cpus' if hw else ''} -np {n_ranks} PROGRAM"
    return {"mpich": f"mpiexec -f {path} -bind-to {'hwthread' if hw else 'core'} -n {n_ranks} PROGRAM",
            "slurm": f"SLURM_HOSTFILE={path} srun --distribution=arbitrary -n {n_ranks} PROGRAM",
            "json": "", "ocs": "", "routes": f"ip -batch {path}/HOST.routes (on each host)"}[fmt]


def export(fmt: str, placement, path, *, hosts: list[str] | None = None, topo=None, slots: str = "cores",
           openmpi: int | None = None, record: dict | None = None) -> str:
    """Write the launcher file atomically and return the command that uses it.

    Parameters
    ----------
    fmt : str
        One of :data:`FORMATS`.
    placement : Placement
        For ``ocs``, the circuit plan or schedule document, or its file
        (:func:`topoplan.reporting.ocs_export.export_ocs`).
    path : str or path
        The file to write.
    hosts : list of str, optional
        Host name of every node id; default the topology's ``host_names()``.
    topo : Topology, optional
        Validates the placement; needed when ``hosts`` is not given.
    slots, openmpi : optional
        As for :func:`launch_command`.
    record : dict, optional
        As for :func:`render` (``json`` only).

    Returns
    -------
    str
        The launcher command (see :func:`launch_command`).

    Raises
    ------
    TopoplanError
        Without hosts or topology, or as :func:`render`; nothing is written then.

    Examples
    --------
    >>> import os, tempfile
    >>> from topoplan.core.placement import Placement
    >>> from topoplan.core.topology_io import load_topology
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "ranks.txt")
    >>> p = Placement(np.array([0, 0, 1]), np.array([0, 1, 0]))
    >>> export("ompi5", p, path, topo=load_topology("paper003"), openmpi=5).replace(tmp.name, "DIR")
    'mpirun --map-by rankfile:file=DIR/ranks.txt -np 3 PROGRAM'
    >>> print(open(path).read(), end="")
    rank 0=node0000 slot=0
    rank 1=node0000 slot=1
    rank 2=node0001 slot=0
    """
    if fmt == "ocs":
        if topo is None:
            raise TopoplanError("the ocs export needs the topology the plan is for")
        export_ocs(placement, path, topo=topo, hosts=hosts)
        return ""
    if fmt == "routes":
        if topo is None:
            raise TopoplanError("the routes export needs the topology the plan is for")
        export_routes(placement, topo, path, hosts=hosts)
        return ""
    if hosts is None:
        if topo is None:
            raise TopoplanError("export needs host names: give a topology or a hostfile")
        hosts = topo.host_names()
    command = launch_command(fmt, path, placement.n_ranks, openmpi=openmpi, slots=slots)   # checks the options first
    atomic_write(path, render(fmt, placement, hosts, topo, record))
    return command
