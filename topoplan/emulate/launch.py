"""Open MPI on the emulated cluster: the launcher agent, the transport settings, CPU idle.

``mpirun`` runs in the cluster's ``head`` namespace and starts one daemon per node through a launcher
agent (``plm_rsh_agent``) that does what ``ssh`` would: it enters the node's network namespace, gives
the daemon the node's host name (a UTS namespace of its own, so that Open MPI's session directories
and shared-memory topology files of different nodes never collide) and runs the command with
``/bin/sh -c``. The daemons talk to ``mpirun`` over the management network only; the ranks talk over
the emulated EPS and circuits only (``btl_tcp_if_include``). Ranks are placed by the placement's
machine file (the ``mpich`` export, one host per rank in rank order) with Open MPI's sequential mapper
and are not bound to cores (the emulated nodes share the machine's cores).

The transport settings (:data:`TRANSPORT`) are those the calibration runs justify (see
:mod:`topoplan.emulate.calibrate` and ``docs/emulation.md``): Open MPI's TCP transport would otherwise
be what is measured. Busy polling is off: ``mpi_yield_when_idle`` with the idle library
(``topoplan_idle.c``, preloaded) makes a waiting rank sleep between polls, so tens of ranks share two
cores and the CPU idle time during the run (:func:`cpu_times`) says whether the run was CPU-bound.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

from topoplan.core.errors import TopoplanError

__all__ = ["TRANSPORT", "MPI_SETTINGS", "COLLECTIVES", "transport_for", "write_agent", "mpirun_command", "cpu_times",
           "cpu_idle", "run_mpi", "StalledRun", "WATCH_POLL_S"]

# Open MPI's TCP transport, as the calibration measured it (docs/emulation.md, "Taming the MPI stack"; 4 nodes
# under one switch, 2 MB per rank, scale 400). With Open MPI's defaults, two ranks sending to each other at once
# took 2.0x the ideal (the rendezvous protocol's fragments of the two directions were not interleaved while a rank
# slept between polls, and 2.0x over one connection with busy polling): every message is sent eagerly, in one
# fragment, and each direction of a peer pair gets its own connection. eager_limit is raised to the largest message
# of the run (transport_for).
TRANSPORT = {
    "btl_tcp_links": "2",
    "btl_tcp_eager_limit": str(8 << 20),
    "btl_tcp_rndv_eager_limit": str(8 << 20),
    "btl_tcp_max_send_size": str(8 << 20),
}
# What makes the launch work in namespaces on one machine (not tuned: needed).
MPI_SETTINGS = {
    "plm_rsh_no_tree_spawn": "1",
    "oob_tcp_if_include": "198.19.0.0/16",       # daemons: the management network
    "btl": "self,vader,tcp",
    "btl_tcp_if_include": "198.18.0.0/16",       # ranks: the emulated network
    "btl_vader_single_copy_mechanism": "none",   # containers forbid cross-memory attach
    "rtc_hwloc_vmhole": "none",                  # no shared-memory topology (orted crashed writing it)
    "mpi_yield_when_idle": "1",                  # idle polls call sched_yield, which the idle library sleeps
    "rmaps": "seq",                              # rank i on line i of the machine file
    "hwloc_base_binding_policy": "none",
}

# Which algorithms a run's collectives use: "model" (default), the simulator's own messages for them (the replayer sends
# each collective as the point-to-point steps the prediction runs: topoplan.emulate.replayer.as_point_to_point);
# "library", Open MPI's own algorithms, which for some sizes are not the ones predicted.
COLLECTIVES = ("model", "library")


def transport_for(max_message_B: float, base=None) -> dict:
    """The transport settings of a run whose largest message is ``max_message_B`` bytes (all sent eagerly).

    Examples
    --------
    >>> transport_for(1e6)["btl_tcp_eager_limit"], transport_for(20e6)["btl_tcp_eager_limit"]
    ('8388608', '20971520')
    """
    out = dict(TRANSPORT if base is None else base)
    if "btl_tcp_eager_limit" in out:
        limit = max(int(out["btl_tcp_eager_limit"]), -(-int(max_message_B) // (1 << 20)) * (1 << 20))
        for k in ("btl_tcp_eager_limit", "btl_tcp_rndv_eager_limit", "btl_tcp_max_send_size"):
            out[k] = str(limit)
    return out


_AGENT = '''#!{python} -IS
"""topoplan emulate's launcher agent (written per run): like ssh HOST COMMAND, into a namespace."""
import ctypes, os, sys
NS = {mapping!r}
CLONE_NEWNET, CLONE_NEWUTS = 0x40000000, 0x04000000
args = sys.argv[1:]
direct = args[:1] == ["--exec"]
if direct:
    args = args[1:]
while args and args[0].startswith("-"):      # ssh options Open MPI may pass (-x, -q): none apply
    args = args[1:]
if len(args) < 2 or args[0] not in NS:
    sys.stderr.write("topoplan emulate agent: unknown host %r\\n" % (args[:1],))
    sys.exit(255)
host, command = args[0], args[1:]
libc = ctypes.CDLL(None, use_errno=True)
fd = os.open("/var/run/netns/" + NS[host], os.O_RDONLY)
if libc.setns(fd, CLONE_NEWNET) != 0:
    sys.stderr.write("topoplan emulate agent: setns %s: %s\\n" % (NS[host], os.strerror(ctypes.get_errno())))
    sys.exit(255)
os.close(fd)
if host != "head":
    name = host.encode()
    if libc.unshare(CLONE_NEWUTS) != 0 or libc.sethostname(name, len(name)) != 0:
        sys.stderr.write("topoplan emulate agent: hostname %s: %s\\n" % (host, os.strerror(ctypes.get_errno())))
        sys.exit(255)
if direct:
    os.execvp(command[0], command)
os.execv("/bin/sh", ["/bin/sh", "-c", " ".join(command)])
'''


def write_agent(spec, directory) -> Path:
    """Write the run's launcher agent (an executable script) into ``directory``.

    Parameters
    ----------
    spec : topoplan.emulate.cluster.ClusterSpec
        Host names and their namespaces.
    directory : str or path

    Returns
    -------
    pathlib.Path

    Examples
    --------
    >>> import tempfile
    >>> from topoplan.core.topology import TreeTopology
    >>> from topoplan.emulate.cluster import cluster_spec
    >>> spec = cluster_spec(TreeTopology(kind="tree", nodes_per_switch=(2,)), scale=10, run_id=5)
    >>> tmp = tempfile.TemporaryDirectory()
    >>> agent = write_agent(spec, tmp.name)
    >>> "'node0001': 'topoplan-em5-h1'" in agent.read_text(), os.access(agent, os.X_OK)
    (True, True)
    """
    mapping = dict(zip(spec.hosts, spec.host_ns))
    mapping["head"] = spec.head_ns
    path = Path(directory) / "agent"
    path.write_text(_AGENT.format(python=sys.executable, mapping=mapping))
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def mpirun_command(command, *, agent, machinefile, np: int, preload=(), env=None, mpirun: str = "mpirun",
                   transport=None) -> list:
    """The command line that runs ``command`` on ``np`` ranks of the cluster (through the agent's head).

    Parameters
    ----------
    command : list of str
        The program and its arguments.
    agent : path
        From :func:`write_agent`.
    machinefile : path
        One host per rank, in rank order (the ``mpich`` export).
    np : int
    preload : list of path, optional
        Libraries for ``LD_PRELOAD`` of the ranks (the recorder, the idle library ...).
    env : dict, optional
        More variables exported to the ranks.
    mpirun : str, optional
    transport : dict, optional
        MCA settings of the transport; default :data:`TRANSPORT`.

    Returns
    -------
    list of str

    Examples
    --------
    >>> cmd = mpirun_command(["./app"], agent="/r/agent", machinefile="/r/hosts", np=2, preload=["/c/a.so"])
    >>> cmd[:4], cmd[-3:]
    (['/r/agent', '--exec', 'head', 'mpirun'], ['2', '--', './app'])
    >>> cmd[cmd.index("btl_tcp_links") + 1], "LD_PRELOAD=/c/a.so" in cmd
    ('2', True)
    """
    cmd = [str(agent), "--exec", "head", mpirun, "--oversubscribe", "--hostfile", str(machinefile)]
    settings = dict(MPI_SETTINGS, plm_rsh_agent=str(agent), **(TRANSPORT if transport is None else transport))
    for k, v in settings.items():
        cmd += ["--mca", k, str(v)]
    exports = dict(env or {})
    if preload:
        exports["LD_PRELOAD"] = ":".join(str(p) for p in preload)
    for k, v in exports.items():
        cmd += ["-x", f"{k}={v}"]
    return cmd + ["-np", str(int(np)), "--", *[str(c) for c in command]]


def cpu_times() -> tuple:
    """``(idle, total)`` jiffies of the whole machine so far (``/proc/stat``; idle includes I/O wait).

    Examples
    --------
    >>> idle, total = cpu_times()
    >>> 0 <= idle <= total
    True
    """
    with open("/proc/stat") as fh:
        fields = fh.readline().split()[1:]
    values = [int(x) for x in fields[:8]]
    return values[3] + values[4], sum(values)


def cpu_idle(before: tuple, after: tuple) -> float:
    """The fraction of CPU time idle between two :func:`cpu_times` readings (all cores).

    Examples
    --------
    >>> cpu_idle((10, 100), (60, 200))
    0.5
    """
    total = after[1] - before[1]
    return (after[0] - before[0]) / total if total > 0 else 1.0


class StalledRun(TopoplanError):
    """An MPI run that stopped making progress (:func:`run_mpi`'s ``watch``) and was stopped; the emulation runs
    it again (one of its repeats).

    Examples
    --------
    >>> issubclass(StalledRun, TopoplanError)      # one error line, as every other failed run
    True
    """


#: How often a watched run's progress is read, seconds.
WATCH_POLL_S = 2.0


def run_mpi(cmd, *, timeout_s: float | None = None, quiet: bool = True, watch=None,
            stall_s: float | None = None, session_dir=None) -> dict:
    """Run an ``mpirun`` command line (:func:`mpirun_command`); measure its wall time and the CPU idle.

    Parameters
    ----------
    cmd : list of str
    timeout_s : float, optional
        Stop the run after this long (an error).
    quiet : bool, optional
        Capture the output (shown, its last lines, only when the run fails).
    watch : callable, optional
        With ``stall_s``: returns a value that changes while the run makes progress (bytes sent on the
        emulated network), or None while progress is not judged (before and after the replay's window).
    stall_s : float, optional
        Stop the run (:class:`StalledRun`) when ``watch`` has returned the same value for this long.
    session_dir : str or path, optional
        Where Open MPI keeps its session directories (``orte_tmpdir_base``; default ``$TMPDIR``, else /tmp): a
        run that is stopped leaves its own there, so the emulator points it into its work directory.

    Returns
    -------
    dict
        ``wall_s``, ``cpu_idle`` (0-1, whole machine), ``output``.

    Raises
    ------
    TopoplanError
        When the run fails or times out (:class:`StalledRun` when it stalls). On Ctrl-C the run is stopped and
        KeyboardInterrupt goes on.

    Examples
    --------
    A run whose progress never moves is stopped (any command whose fourth word is a program does here):

    >>> run_mpi(["nice", "-n", "0", "sleep", "30"], watch=lambda: 0, stall_s=0.1)
    Traceback (most recent call last):
    ...
    topoplan.emulate.launch.StalledRun: mpirun: no progress for 0.1 s (nothing sent on the emulated network); stopped

    With a cluster built and its agent written (needs root and Open MPI):

    >>> res = run_mpi(mpirun_command(["./app"], agent=agent, machinefile="hosts", np=4))   # doctest: +SKIP
    >>> sorted(res)                                                                         # doctest: +SKIP
    ['cpu_idle', 'output', 'wall_s']
    """
    if shutil.which(cmd[3]) is None:
        raise TopoplanError(f"{cmd[3]} not found: install Open MPI (apt-get install openmpi-bin libopenmpi-dev)")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_orte_tmpdir_base=str(session_dir) if session_dir else os.environ.get("TMPDIR", "/tmp"))
    c0, t0 = cpu_times(), time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE if quiet else None,
                            stderr=subprocess.STDOUT if quiet else None, text=True, start_new_session=True,
                            preexec_fn=_priority)
    try:
        out = _wait(proc, t0, timeout_s, watch, stall_s)
    except subprocess.TimeoutExpired:
        _stop(proc)
        raise TopoplanError(f"mpirun: still running after {timeout_s:g} s; stopped") from None
    except BaseException:
        _stop(proc)
        raise
    wall, c1 = time.perf_counter() - t0, cpu_times()
    if proc.returncode != 0:
        lines = [ln.strip() for ln in (out or "").splitlines() if ln.strip() and not set(ln.strip()) <= set("-")]
        detail = f": {' | '.join(lines[-3:])}" if lines else ""
        raise TopoplanError(f"mpirun exited with status {proc.returncode}{detail}")
    return {"wall_s": wall, "cpu_idle": cpu_idle(c0, c1), "output": out or ""}


def _wait(proc, t0: float, timeout_s, watch, stall_s) -> str:
    """``proc``'s output once it ends; TimeoutExpired after ``timeout_s`` from ``t0``, StalledRun when ``watch``
    has not moved for ``stall_s`` (the caller stops the process)."""
    if watch is None or stall_s is None:
        return proc.communicate(timeout=timeout_s)[0]
    last, since = None, None
    while True:
        left = None if timeout_s is None else timeout_s - (time.perf_counter() - t0)
        if left is not None and left <= 0:
            raise subprocess.TimeoutExpired(proc.args, timeout_s)
        try:   # retried: communicate() keeps what it has read
            return proc.communicate(timeout=min(WATCH_POLL_S, stall_s) if left is None else
                                    min(WATCH_POLL_S, stall_s, left))[0]
        except subprocess.TimeoutExpired:
            pass
        now, value = time.perf_counter(), watch()
        if value is None or value != last:
            last, since = value, now
        elif now - since >= stall_s:
            raise StalledRun(f"mpirun: no progress for {stall_s:g} s (nothing sent on the emulated network); stopped")


# The run's processes get a higher scheduling priority than the machine's other work (root may raise it):
# the emulated cluster uses little CPU, but a rank that waits for a busy core is a delay the network did not cause.
PRIORITY = -5


def _priority() -> None:
    if os.geteuid() == 0:
        os.setpriority(os.PRIO_PROCESS, 0, PRIORITY)


def _stop(proc) -> None:
    """End a run: SIGTERM to its process group (mpirun passes it on), then SIGKILL."""
    for sig, wait in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 3.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue
