"""What the emulated network does during a run: its queues' bytes and TCP's loss recovery, sampled on the wall clock.

A :class:`Monitor` runs beside one ``mpirun``, in a thread of its own that enters each namespace in turn and
reads what the kernel counts there, on the wall clock:

- TCP's counters in every node's namespace (``snmp`` and ``netstat``): segments sent again, retransmission
  timeouts, connection requests sent again, fast retransmits and loss probes (:data:`TCP_COUNTERS`), every
  :data:`TCP_PERIOD_S`, and as soon as it sees the replayer mark the start or the end of its window (it
  looks every :data:`POLL_S`);
- with ``period_s``, also the bytes every shaped link direction has sent (its interface's transmit counter in
  ``net/dev``: what left its shaper), every ``period_s`` of real time. These are plain files, a few
  microseconds each to read: a netlink dump of the queues in every namespace took tenths of a second of CPU
  per sample (measured on 21 namespaces), which disturbed the run it measured.

The replayer writes its window (the wall-clock times of the barriers around the replay) to ``window.txt``;
:func:`window_counts` and :func:`utilization` set the samples on it: TCP's loss recovery during the replay
alone (the connections' set-up before it, whose lost requests cost a second each, excluded), and the measured
utilization of every link direction in intervals of the replay's time axis, in the schema of the simulator's
timeline (``topoplan report`` draws it).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np

from topoplan.core.errors import TopoplanError

__all__ = ["TCP_COUNTERS", "TCP_PERIOD_S", "UNEMULATED_INTERFACES", "POLL_S", "MIN_PERIOD_S", "Monitor",
           "read_window", "replay_running", "window_counts", "utilization", "timeline_doc"]

#: The TCP counters a run reports: result key -> (section of /proc/net/snmp or netstat, counter).
TCP_COUNTERS = {
    "retransmitted_segments": ("Tcp", "RetransSegs"),
    "timeouts": ("TcpExt", "TCPTimeouts"),
    "syn_retransmits": ("TcpExt", "TCPSynRetrans"),
    "fast_retransmits": ("TcpExt", "TCPFastRetrans"),
    "loss_probes": ("TcpExt", "TCPLossProbes"),
}
TCP_PERIOD_S = 0.25
"""Real seconds between two readings of TCP's counters (a few files per node)."""
#: A node's interfaces that are not the emulated network: loopback and the launcher's network.
UNEMULATED_INTERFACES = ("lo", "mgmt0")
POLL_S = 0.01
"""Real seconds between two looks at the replay's window file."""
MIN_PERIOD_S = 0.02
"""The shortest real time between two samples of the links (a netlink dump per namespace each)."""


def _tcp_counters(text: str) -> dict:
    """``{(section, counter): value}`` from the header/value line pairs of /proc/net/snmp or netstat.

    Examples
    --------
    >>> _tcp_counters("Tcp: RtoMin RetransSegs\\nTcp: 200 7\\n")[("Tcp", "RetransSegs")]
    7
    """
    out = {}
    lines = text.splitlines()
    for head, values in zip(lines[::2], lines[1::2]):
        keys, vals = head.split(), values.split()
        if not keys or keys[0] != vals[0]:
            continue
        section = keys[0].rstrip(":")
        for k, v in zip(keys[1:], vals[1:]):
            try:
                out[(section, k)] = int(v)
            except ValueError:
                continue
    return out


class Monitor:
    """Sample a cluster's TCP counters (and, with ``period_s``, its links' bytes) while a run lasts.

    Parameters
    ----------
    spec : topoplan.emulate.cluster.ClusterSpec
        The cluster (built: its namespaces exist).
    period_s : float, optional
        Real seconds between samples of the links (at least :data:`MIN_PERIOD_S`); None: TCP's counters only.
    window : path, optional
        The replayer's window file: TCP's counters are read (and the links sampled) when it appears and when
        the end is added to it.

    Attributes
    ----------
    tcp_t_s, tcp : numpy.ndarray
        Wall-clock time of every reading of TCP's counters, and the readings: one column per
        :data:`TCP_COUNTERS` entry, summed over the nodes.
    sent_B : int or None
        The bytes the nodes have sent so far on the emulated network (their interfaces but the launcher's and
        loopback), read with TCP's counters: what a stall watch compares (a file per node; a netlink dump of
        every queue costs tenths of a second of CPU and disturbs the run it watches).
    t_s, link_bytes : numpy.ndarray
        Wall-clock time of every sample of the links (with ``period_s``), and the bytes sent so far: one
        column per direction of :meth:`ClusterSpec.directions`.

    Examples
    --------
    >>> from topoplan.core.topology import TreeTopology
    >>> from topoplan.emulate.cluster import cluster_spec
    >>> spec = cluster_spec(TreeTopology(kind="tree", nodes_per_switch=(2,)), scale=400, run_id=3)
    >>> [d[2] for d in Monitor(spec, period_s=0.1).directions][:2]
    ['node0000->S0', 'S0->node0000']

    Sampling needs the cluster built::

        with Cluster(spec) as cluster, Monitor(spec, period_s=0.1) as mon:
            run_mpi(...)
        window_counts(mon.tcp_t_s, mon.tcp, start_s, end_s)
    """

    def __init__(self, spec, period_s: float | None = None, window=None):
        if period_s is not None and not period_s >= MIN_PERIOD_S:
            raise TopoplanError(f"monitor: samples at least {MIN_PERIOD_S} s apart, got {period_s}")
        self.spec = spec
        self.period_s = period_s
        self.directions = spec.directions() if period_s is not None else []
        self._link_ns = sorted({d[0] for d in self.directions})   # the namespaces whose net/dev a sample reads
        self.window = None if window is None else Path(window)
        self._t, self._bytes, self._tt, self._tcp = [], [], [], []
        self.sent_B = None   # bytes the nodes have sent on the emulated network (the last reading of TCP's counters)
        self._stop = threading.Event()
        self._thread = None
        self._error = None

    def __enter__(self) -> "Monitor":
        self._thread = threading.Thread(target=self._run, name="topoplan-emulate-monitor", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._error is not None and exc[0] is None:
            raise TopoplanError(f"monitor: sampling the emulated network failed: {self._error}")

    @property
    def t_s(self) -> np.ndarray:
        return np.asarray(self._t, dtype=np.float64)

    @property
    def tcp_t_s(self) -> np.ndarray:
        return np.asarray(self._tt, dtype=np.float64)

    @property
    def tcp(self) -> np.ndarray:
        return np.asarray(self._tcp, dtype=np.float64).reshape(len(self._tcp), len(TCP_COUNTERS))

    @property
    def link_bytes(self) -> np.ndarray:
        return np.asarray(self._bytes, dtype=np.float64).reshape(len(self._bytes), len(self.directions))

    # -- the sampling thread ---------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            due_links = due_tcp = time.monotonic()
            seen = 0
            while True:
                last = self._stop.is_set()   # a last sample after the run, so that its window is covered
                state = self._window_state() if self.window is not None else 0
                now = time.monotonic()
                marked = state != seen
                seen = state
                if self.directions and (now >= due_links or marked or last):
                    t0 = time.time()   # each sample stamped with the middle of its reading
                    self._bytes.append(self._read_links())
                    self._t.append((t0 + time.time()) / 2)
                    due_links = now + self.period_s
                if now >= due_tcp or marked or last:
                    t0 = time.time()
                    self._tcp.append(self._read_tcp())
                    self._tt.append((t0 + time.time()) / 2)
                    due_tcp = now + TCP_PERIOD_S
                if last:
                    break
                wait = min(due_links if self.directions else due_tcp, due_tcp) - time.monotonic()
                self._stop.wait(min(max(wait, 0.0), POLL_S) if self.window is not None else max(wait, 0.0))
        except Exception as exc:  # noqa: BLE001 -- reported by __exit__ in the caller's thread
            self._error = exc

    def _window_state(self) -> int:
        """0: no window file yet; 1: the replay has started; 2: it has ended."""
        try:
            return min(len(self.window.read_text().split()), 2)
        except OSError:
            return 0

    @staticmethod
    def _read(ns: str, files) -> list:
        """The texts of ``files`` (under ``/proc/thread-self/net``) as namespace ``ns`` sees them: this thread
        enters it (``/proc/net`` would be the process's namespace, the main thread's).

        pyroute2 keeps one stack of saved namespaces for the whole process, and saves the process's (the main
        thread's) namespace: both are the host's while a monitor runs, since the main thread only waits for
        ``mpirun`` then and enters no namespace (the cluster is built before and its queues read after)."""
        from pyroute2 import netns

        netns.pushns(ns)
        try:
            return [Path(f"/proc/thread-self/net/{f}").read_text() for f in files]
        finally:
            netns.popns()

    def _read_tcp(self) -> list:
        """TCP's counters summed over the nodes' namespaces; the bytes the nodes have sent on the emulated network
        so far (:attr:`sent_B`) from the same visit."""
        total = dict.fromkeys(TCP_COUNTERS.values(), 0)
        sent = 0
        for ns in self.spec.host_ns:
            snmp, netstat, dev = self._read(ns, ("snmp", "netstat", "dev"))
            got = _tcp_counters(snmp + netstat)
            for key in total:
                total[key] += got.get(key, 0)
            sent += sum(tx for name, tx in _tx_bytes(dev).items() if name not in UNEMULATED_INTERFACES)
        self.sent_B = sent
        return [total[key] for key in TCP_COUNTERS.values()]

    def _read_links(self) -> list:
        """Bytes sent so far by every direction: its interface's transmit counter."""
        sent = {}
        for ns in self._link_ns:
            for name, tx in _tx_bytes(self._read(ns, ("dev",))[0]).items():
                sent[(ns, name)] = tx
        return [sent.get((d[0], d[1]), 0) for d in self.directions]


def _tx_bytes(text: str) -> dict:
    """``{interface: bytes transmitted}`` from ``/proc/net/dev``.

    Examples
    --------
    >>> dev = ("Inter-|   Receive  |  Transmit\\n face |bytes packets errs drop fifo frame compressed multicast|"
    ...        "bytes packets\\n  eth0: 100 2 0 0 0 0 0 0 4096 3 0 0 0 0 0 0\\n")
    >>> _tx_bytes(dev)
    {'eth0': 4096}
    """
    out = {}
    for line in text.splitlines()[2:]:
        name, _, rest = line.partition(":")
        fields = rest.split()
        if len(fields) >= 9:
            out[name.strip()] = int(fields[8])
    return out


def read_window(path) -> tuple[float, float] | None:
    """The replay's window ``(start_s, end_s)`` on the wall clock, from the replayer's ``window.txt``; None when
    there is none (a user's program) or it has no end.

    Examples
    --------
    >>> import tempfile, os
    >>> tmp = tempfile.TemporaryDirectory()
    >>> p = os.path.join(tmp.name, "window.txt")
    >>> _ = open(p, "w").write("100.5 102.25\\n")
    >>> read_window(p), read_window(p + ".missing")
    ((100.5, 102.25), None)
    >>> tmp.cleanup()
    """
    try:
        a, b = Path(path).read_text().split()[:2]
        start, end = float(a), float(b)
    except (OSError, ValueError):
        return None
    return (start, end) if end >= start else None


def replay_running(path) -> bool:
    """Whether the replayer's ``window.txt`` says the replay has started and not ended.

    Examples
    --------
    >>> import tempfile, os
    >>> tmp = tempfile.TemporaryDirectory()
    >>> p = os.path.join(tmp.name, "window.txt")
    >>> replay_running(p)
    False
    >>> _ = open(p, "w").write("100.5 -1\\n"); replay_running(p)
    True
    >>> _ = open(p, "w").write("100.5 102.25\\n"); replay_running(p)
    False
    >>> tmp.cleanup()
    """
    try:
        marks = Path(path).read_text().split()
        return len(marks) == 1 or (len(marks) >= 2 and float(marks[1]) < float(marks[0]))
    except (OSError, ValueError):
        return False


def window_counts(t_s, counts, start_s: float, end_s: float) -> dict:
    """What each of :data:`TCP_COUNTERS` counted during ``[start_s, end_s]``: from the first reading at or after
    the start to the first at or after the end (the monitor reads as it sees each mark, so within
    :data:`POLL_S` and a reading's time of it; what happened before the start, such as lost connection
    requests of the set-up, is not counted).

    Examples
    --------
    >>> t = [0.0, 1.0, 2.0, 3.0]
    >>> c = [[0, 0, 0, 0, 0], [2, 1, 0, 0, 0], [5, 1, 0, 3, 1], [9, 2, 0, 3, 1]]
    >>> window_counts(t, c, 1.0, 1.9)["retransmitted_segments"], window_counts(t, c, 0.0, 3.0)["timeouts"]
    (3, 2)
    """
    t = np.asarray(t_s, dtype=np.float64)
    c = np.asarray(counts, dtype=np.float64).reshape(len(t), len(TCP_COUNTERS))
    if len(t) == 0:
        return {}
    i = min(int(np.searchsorted(t, start_s, side="left")), len(t) - 1)
    j = min(int(np.searchsorted(t, end_s, side="left")), len(t) - 1)
    return {k: int(c[j, n] - c[i, n]) for n, k in enumerate(TCP_COUNTERS)}


def utilization(t_s, link_bytes, rate_Bps, start_s: float, end_s: float, dt_s: float):
    """The utilization of every direction in intervals of ``dt_s`` (real seconds) from ``start_s`` to ``end_s``.

    Bytes at the intervals' bounds are interpolated linearly between the samples; an interval's utilization
    is its bytes over what the direction's rate carries in it (the last interval may be shorter).

    Parameters
    ----------
    t_s : array of float
        Sample times (increasing).
    link_bytes : array, samples x directions
        Bytes sent so far.
    rate_Bps : array of float
        Every direction's (shaped) rate.
    start_s, end_s, dt_s : float

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        The intervals' starts (seconds after ``start_s``) and the utilization, directions x intervals.

    Examples
    --------
    >>> t, u = utilization([0.0, 1.0, 2.0], [[0], [50], [150]], [100.0], 0.0, 2.0, 0.5)
    >>> t.tolist(), u.round(2).tolist()
    ([0.0, 0.5, 1.0, 1.5], [[0.5, 0.5, 1.0, 1.0]])
    """
    t = np.asarray(t_s, dtype=np.float64)
    b = np.asarray(link_bytes, dtype=np.float64).reshape(len(t), -1)
    rate = np.asarray(rate_Bps, dtype=np.float64)
    if not (dt_s > 0 and end_s > start_s):
        return np.zeros(0), np.zeros((b.shape[1], 0))
    n = int(np.ceil((end_s - start_s) / dt_s - 1e-9))
    bounds = np.minimum(start_s + dt_s * np.arange(n + 1), end_s)
    at = np.stack([np.interp(bounds, t, b[:, d]) for d in range(b.shape[1])]) if b.shape[1] else np.zeros((0, n + 1))
    width = np.diff(bounds)
    util = np.diff(at, axis=1) / (rate[:, None] * width[None, :])
    return bounds[:-1] - start_s, util


def timeline_doc(directions, t_s, util, dt_s: float, *, scale: float) -> dict:
    """The measured utilization in the schema of the simulator's timeline (``topoplan report`` reads it), on the
    emulated time axis (real seconds divided by ``scale``); directions that carried nothing are left out, as
    the simulator leaves idle links out.

    Examples
    --------
    >>> d = [("ns", "eth0", "node0000->S0", "node-up", "node0000", "S0", 1e6), ("ns", "h0", "S0->node0000", "node-down",
    ...      "S0", "node0000", 1e6)]
    >>> doc = timeline_doc(d, np.array([0.0, 400.0]), np.array([[0.5, 1.0], [0.0, 0.0]]), 400.0, scale=400.0)
    >>> doc["t_s"], doc["dt_s"], [l["name"] for l in doc["links"]], doc["links"][0]["util"]
    ([0.0, 1.0], 1.0, ['node0000->S0'], [0.5, 1.0])
    """
    util = np.asarray(util, dtype=np.float64)
    links = [{"name": d[2], "class": d[3], "src": d[4], "dst": d[5], "util": np.round(u, 6).tolist()}
             for d, u in zip(directions, util) if u.size and u.max() > 0]
    return {"t_s": (np.asarray(t_s) / scale).tolist(), "dt_s": float(dt_s) / scale, "links": links}
