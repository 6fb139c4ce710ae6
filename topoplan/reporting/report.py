"""CLV-style report of a simulation timeline (004): one self-contained HTML page (and a PNG).

Views, after the Communication Log Viewer of 004:

* time series -- per link class (node-up/down, uplink-up/down, ocs, or a
  mesh/torus dimension and direction ``torus-x+`` ...) the maximum (red) and
  average (green) link utilization of every interval, on black as in
  004 Fig. 1 and 3;
* topological view at a selected time -- the tree or hybrid drawn with every
  link coloured by utilization and the circuits as arcs between OCS nodes;
  a mesh/torus as slices of its first two dimensions (one panel per
  coordinate of the others), a general switch graph by a spring layout;
* heat maps -- bytes per pair of switches (when the result carries
  ``switch_bytes``) and utilization of every link over time.

The page embeds PNGs (base64, drawn with matplotlib's object API, no
pyplot state) and a few lines of inline JavaScript: a slider (or a click
on the time series) picks the time of the topological view and moves a
red cursor over the time series, as CLV links its views. Nothing is
fetched from the network.

Input schema (``topoplan simulate --timeline DT --json``)::

    timeline: {t_s: [T floats], dt_s: float (optional),
               links: [{name, class, src, dst, util: [T floats in 0..1]}]}
    topology: topology document (topoplan.core.topology_io.topology_to_dict) or a name,
    topology_doc: the document when ``topology`` is a name,
    circuits | circuit_pairs: [[node, node], ...] (or a circuit plan with 'circuits'),
    switch_bytes: S x S bytes sent from switch i to switch j (optional),
    switch_names: S names (optional), makespan_s (optional),
    phases: [{index, kind, start_s, end_s, all_in_s (optional), logical_start_s and logical_end_s (optional: the
            span on an ideal network), bytes, pairs, ...}] (optional;
            ``topoplan simulate --phases auto|FILE``): the trace's communication phases on the simulated
            time axis, drawn as a lane above the time series and listed in a table.

Links absent from ``timeline.links`` are idle; class averages count them
when the topology is known.
"""

from __future__ import annotations

import base64
import html
import io
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from topoplan.core.errors import TopoplanError
from topoplan.core.io import atomic_write, dumps, read_json
from topoplan.core.topology import GraphTopology, TorusTopology, TreeTopology
from topoplan.core.topology_io import topology_from_dict
from topoplan.core.units import format_bytes
from topoplan.sim.network import build_network

__all__ = ["BASE_CLASSES", "SKIP_CLASSES", "ReportData", "load_result", "parse_result", "class_series",
           "busiest_time_index", "time_index", "figure_timeseries", "figure_topology", "figure_switch_heatmap",
           "figure_link_heatmap", "frame_indices", "render_html", "render_png", "write_report"]

BASE_CLASSES = ("node-up", "node-down", "uplink-up", "uplink-down", "ocs", "switch", "inject", "eject")
SKIP_CLASSES = ("intra",)   # memory copies inside a node, not network links
CMAP = "YlOrRd"
IDLE = "#d0d0d0"
# the time series' colours (004 Fig. 1 and 3: utilization on black) and the selected time, in every view
MAX_COLOR, MEAN_COLOR, UNUSED_COLOR, CURSOR_COLOR, PHASE_LINE = "#e8282b", "#3bd14a", "black", "#00d5ff", "white"
DIM_NAMES = "xyzabcdefghijklmnopqrstuvw"   # the simulator's names: class torus-<dim><+|->


@dataclass
class ReportData:
    """A parsed simulation result: utilization ``util[link, t]`` and what to draw it on.

    Parameters
    ----------
    source : str
        The file (or name) it came from.
    t_s : numpy.ndarray
        Start of every interval.
    dt_s : float
    names, classes, src, dst : list of str
        Per link in ``util``: name, class, ends.
    util : numpy.ndarray
        (links x intervals) utilization in 0..1.
    topo : Topology, optional
    circuits : list of (int, int), optional
    switch_bytes : numpy.ndarray, optional
    switch_names : list of str, optional
    class_links : dict of str to int, optional
        Links per class in the topology (idle ones included).
    phases : list of dict, optional
        The trace's phases in simulated time (``index``, ``kind``, ``start_s``, ``all_in_s``, ``end_s``,
        ``bytes``, ``pairs``...), as :func:`topoplan.sim.run.phase_spans` gives them.
    meta : dict, optional

    Build one with :func:`load_result` or :func:`parse_result`.

    Examples
    --------
    >>> data = load_result("tests/data/report_result.json")     # a hybrid run with a timeline
    >>> data.n_times, data.util.shape, data.class_order()
    (24, (42, 24), ['node-up', 'node-down', 'uplink-up', 'uplink-down', 'ocs'])
    """

    source: str
    t_s: np.ndarray
    dt_s: float
    names: list[str]
    classes: list[str]
    src: list[str]
    dst: list[str]
    util: np.ndarray
    topo: object | None = None
    circuits: list[tuple[int, int]] = field(default_factory=list)
    switch_bytes: np.ndarray | None = None
    switch_names: list[str] | None = None
    class_links: dict[str, int] = field(default_factory=dict)
    phases: list[dict] = field(default_factory=list)
    meta: dict = field(default_factory=dict)

    @property
    def n_times(self) -> int:
        return len(self.t_s)

    def class_order(self) -> list[str]:
        present = list(dict.fromkeys(self.classes))
        torus = sorted((c for c in present if c.startswith("torus-")),
                       key=lambda c: (_dim_rank(c[6:-1]), c[-1] != "+"))
        known = [c for c in BASE_CLASSES if c in present]
        rest = sorted(c for c in present if c not in known and c not in torus)
        return known + torus + rest

    def time_unit(self) -> tuple[str, float]:
        """The one time unit of every axis, label and summary line of the report, chosen by the run's length.

        Returns
        -------
        unit : {"s", "ms", "us"}
            Seconds for a timeline reaching 1 s or more, milliseconds from 1 ms, else microseconds.
        seconds : float
            Seconds per unit (divide a time in seconds by it).

        Examples
        --------
        >>> data = load_result("tests/data/report_result.json")     # 24 intervals of 1 ms
        >>> data.time_unit(), data.format_t(0.0095)
        (('ms', 0.001), '9.5 ms')
        """
        end = float(self.t_s[-1] + self.dt_s)
        for unit, sec in (("s", 1.0), ("ms", 1e-3)):
            if end >= sec:
                return unit, sec
        return "us", 1e-6

    def format_t(self, t_s: float) -> str:
        """A time in seconds in the report's unit (:meth:`time_unit`), e.g. ``'9.5 ms'``.

        Parameters
        ----------
        t_s : float
            Seconds.

        Returns
        -------
        str

        Examples
        --------
        >>> data = load_result("tests/data/report_result.json")
        >>> data.format_t(0.024), data.format_t(1e-5)
        ('24 ms', '0.01 ms')
        """
        unit, sec = self.time_unit()
        return f"{float(t_s) / sec:.4g} {unit}"

    def host_label(self, node: int) -> str:
        """How the report names node ``node``: its host name (``topo.host_names()``), else ``node<i>``.

        Parameters
        ----------
        node : int

        Returns
        -------
        str

        Examples
        --------
        >>> data = load_result("tests/data/report_result.json")     # a hybrid run with a timeline
        >>> data.host_label(4)
        'node0004'
        """
        if self.topo is not None:
            return self.topo.host_names()[node]
        return f"node{node}"


def _dim_rank(name: str) -> int:
    return DIM_NAMES.index(name) if name in DIM_NAMES else 99


# -- input -------------------------------------------------------------------------

def load_result(path, *, key: str = "timeline") -> ReportData:
    """Read and check a simulation result JSON (see the module docstring for the schema).

    Parameters
    ----------
    path : str or path
        Plain or gzip JSON.
    key : str, optional
        The field that holds the timeline (:func:`parse_result`).

    Returns
    -------
    ReportData

    Raises
    ------
    TopoplanError
        For a missing or malformed file, naming the field.

    Examples
    --------
    >>> data = load_result("tests/data/report_result.json")     # a hybrid run with a timeline
    >>> data.n_times, len(data.names)
    (24, 42)
    """
    return parse_result(read_json(path, "simulation result"), str(path), key=key)


def _num_list(v, where: str) -> np.ndarray:
    try:
        arr = np.asarray(v, dtype=np.float64)
    except (TypeError, ValueError):
        raise TopoplanError(f"{where}: expected a list of numbers") from None
    if arr.ndim != 1 or not np.isfinite(arr).all():
        raise TopoplanError(f"{where}: expected a list of finite numbers")
    return arr


def parse_result(doc: dict, where: str = "result", *, key: str = "timeline") -> ReportData:
    """Check the schema and build :class:`ReportData`; errors name the file and field.

    Parameters
    ----------
    doc : dict
        A result document (see the module docstring).
    where : str, optional
        How errors name it.
    key : str, optional
        The field that holds the timeline: ``timeline``, or an emulation's ``predicted_timeline`` (the default
        model's, beside the measured ``timeline``).

    Returns
    -------
    ReportData

    Raises
    ------
    TopoplanError

    Examples
    --------
    >>> parse_result({"timeline": {"t_s": [0.0]}}, "x.json")
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: x.json: field 'timeline.links': expected a list
    """
    if not isinstance(doc, dict):
        raise TopoplanError(f"{where}: expected a JSON object")
    tl = doc.get(key)
    if not isinstance(tl, dict):
        run = "simulate --timeline DT --json -o FILE" if key == "timeline" else "emulate --timeline DT -o FILE"
        raise TopoplanError(f"{where}: field '{key}': missing; run `topoplan {run}`")
    t = _num_list(tl.get("t_s"), f"{where}: field '{key}.t_s'")
    if t.size == 0:
        raise TopoplanError(f"{where}: field '{key}.t_s': no time points")
    if np.any(np.diff(t) <= 0):
        raise TopoplanError(f"{where}: field '{key}.t_s': times must increase")
    dt = tl.get("dt_s")
    if dt is None:
        dt = float(np.median(np.diff(t))) if t.size > 1 else 1.0
    elif isinstance(dt, bool) or not isinstance(dt, (int, float)) or not 0 < dt < float("inf"):
        raise TopoplanError(f"{where}: field '{key}.dt_s': expected a positive number of seconds, got {dt!r}")
    dt = float(dt)
    links = tl.get("links")
    if not isinstance(links, list):
        raise TopoplanError(f"{where}: field '{key}.links': expected a list")
    names, classes, src, dst, rows = [], [], [], [], []
    first: dict[str, int] = {}
    for i, l in enumerate(links):
        f = f"{where}: field '{key}.links[{i}]"
        if not isinstance(l, dict):
            raise TopoplanError(f"{f}': expected an object")
        for part in ("name", "class", "util"):
            if part not in l:
                raise TopoplanError(f"{f}.{part}': missing")
        if str(l["name"]) in first:   # a link's series twice: counted twice, or one hiding the other in the views
            raise TopoplanError(f"{f}.name': link {str(l['name'])!r} is listed twice ({key}.links"
                                f"[{first[str(l['name'])]}] is the first)")
        first[str(l["name"])] = i
        if str(l["class"]) in SKIP_CLASSES:
            continue
        u = _num_list(l["util"], f"{f}.util'")
        if len(u) != len(t):
            raise TopoplanError(f"{f}.util': {len(u)} values for {len(t)} time points")
        if u.min(initial=0) < 0:
            raise TopoplanError(f"{f}.util': utilization must be non-negative")
        names.append(str(l["name"])); classes.append(str(l["class"]))
        src.append(str(l.get("src", ""))); dst.append(str(l.get("dst", "")))
        rows.append(np.minimum(u, 1.0))   # rounding in the engine may overshoot 1 by a hair
    util = np.array(rows) if rows else np.zeros((0, len(t)))

    topo = None
    tdoc = doc.get("topology")
    if not isinstance(tdoc, dict):
        tdoc = doc.get("topology_doc")
    if tdoc is not None:
        if not isinstance(tdoc, dict):
            raise TopoplanError(f"{where}: field 'topology_doc': expected a topology document")

        try:
            topo = topology_from_dict(tdoc, str(tdoc.get("name", "")))
        except TopoplanError as exc:
            raise TopoplanError(f"{where}: topology: {exc}") from None
    circuits = _circuits(doc, where, topo)
    sb, snames = None, None
    if doc.get("switch_bytes") is not None:
        try:
            sb = np.asarray(doc["switch_bytes"], dtype=np.float64)
        except (TypeError, ValueError):
            sb = None
        if sb is None or sb.ndim != 2 or sb.shape[0] != sb.shape[1] or not np.isfinite(sb).all():
            raise TopoplanError(f"{where}: field 'switch_bytes': expected a square matrix of numbers")
        snames = doc.get("switch_names")
        if snames is not None and (not isinstance(snames, list) or len(snames) != sb.shape[0]):
            raise TopoplanError(f"{where}: field 'switch_names': expected a list of {sb.shape[0]} names, one per "
                                f"switch of 'switch_bytes'")
        # the topology's names when it is known (one display name per switch across every output)
        snames = _switch_names(topo, sb.shape[0]) if topo is not None or not snames else [str(s) for s in snames]
    mk = doc.get("makespan_s")
    if mk is not None and (isinstance(mk, bool) or not isinstance(mk, (int, float)) or not 0 <= mk < float("inf")):
        raise TopoplanError(f"{where}: field 'makespan_s': expected a non-negative number of seconds, got {mk!r}")
    data = ReportData(source=where, t_s=t, dt_s=dt, names=names, classes=classes, src=src, dst=dst, util=util,
                      topo=topo, circuits=circuits, switch_bytes=sb, switch_names=snames,
                      phases=_phases(doc.get("phases"), where),
                      meta={k: doc[k] for k in ("makespan_s", "network", "traffic", "placement") if k in doc})
    if isinstance(doc.get("topology"), str):
        data.meta["topology"] = doc["topology"]
    data.class_links = _class_links(data)
    return data


def _phases(raw, where: str) -> list[dict]:
    """The ``phases`` of a result, checked: each an object with a kind and a simulated span."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise TopoplanError(f"{where}: field 'phases': expected a list (topoplan simulate --phases)")
    out = []
    for i, p in enumerate(raw):
        f = f"{where}: field 'phases[{i}]"
        if not isinstance(p, dict):
            raise TopoplanError(f"{f}': expected an object")
        q = {}
        for key in ("index", "kind"):
            v = p.get(key, i if key == "index" else 0)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise TopoplanError(f"{f}.{key}': expected a non-negative integer, got {v!r}")
            q[key] = v
        for key in ("start_s", "end_s", "all_in_s", "bytes", "logical_start_s", "logical_end_s"):
            v = p.get(key)
            if v is None and key not in ("start_s", "end_s"):   # optional: the ideal network's span, bytes
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < float("inf"):
                raise TopoplanError(f"{f}.{key}': expected a non-negative number, got {v!r}")
            q[key] = float(v)
        if q["end_s"] < q["start_s"]:
            raise TopoplanError(f"{f}.end_s': {q['end_s']:g} s is before its start_s {q['start_s']:g} s")
        q.setdefault("all_in_s", q["start_s"])
        if not q["start_s"] <= q["all_in_s"] <= q["end_s"]:
            raise TopoplanError(f"{f}.all_in_s': {q['all_in_s']:g} s is outside the phase's span")
        pairs = p.get("pairs", [])
        if not isinstance(pairs, list) or not all(isinstance(x, list) and len(x) == 3 for x in pairs):
            raise TopoplanError(f"{f}.pairs': expected a list of [a, b, bytes]")
        q["pairs"] = pairs
        q["pair_basis"] = str(p.get("pair_basis", "node"))
        out.append(q)
    return out


def _circuits(doc, where, topo) -> list[tuple[int, int]]:
    raw = doc.get("circuits")
    if isinstance(raw, dict):
        raw = raw.get("circuits")
    if raw is None or isinstance(raw, str):
        raw = doc.get("circuit_pairs")
    if raw is None:
        return []
    try:
        pairs = [(int(a), int(b)) for a, b in raw]
    except (TypeError, ValueError):
        raise TopoplanError(f"{where}: field 'circuits': expected [[node, node], ...]") from None
    n = topo.n_nodes if topo is not None else None
    for a, b in pairs:
        if n is not None and not (0 <= a < n and 0 <= b < n):
            raise TopoplanError(f"{where}: field 'circuits': node {a if not 0 <= a < n else b} does not exist ({n} nodes)")
    return pairs


def _switch_names(topo, s: int) -> list[str]:
    """The first ``s`` switches' display names (:meth:`TreeTopology.switch_labels`), ``S0..`` without a topology."""
    names = topo.switch_labels() if topo is not None else []
    if len(names) >= s:
        return names[:s]
    return [f"S{i}" for i in range(s)]


def _class_links(data: ReportData) -> dict[str, int]:
    """Links per class including idle ones (from the topology when the simulator can compile it)."""
    present: dict[str, int] = {}
    for c in data.classes:
        present[c] = present.get(c, 0) + 1
    total = dict(present)
    if data.topo is not None:
        try:
            net = build_network(data.topo)
            cls, counts = np.unique(net.link_class, return_counts=True)
            for c, k in zip(cls.tolist(), counts.tolist()):
                if c not in SKIP_CLASSES:
                    total[c] = max(int(k), present.get(c, 0))
        except (ImportError, TopoplanError):
            pass
        if data.circuits:
            total["ocs"] = max(2 * len(data.circuits), present.get("ocs", 0))
    return total


# -- numbers -------------------------------------------------------------------------

def class_series(data: ReportData) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per link class: (maximum, average) utilization per interval; idle links count in the average.

    Parameters
    ----------
    data : ReportData

    Returns
    -------
    dict of str to (numpy.ndarray, numpy.ndarray)

    References
    ----------
    004 section III (CLV's time-series view: max and average utilization per dimension and direction).

    Examples
    --------
    >>> data = load_result("tests/data/report_result.json")     # a hybrid run with a timeline
    >>> peak, mean = class_series(data)["uplink-up"]
    >>> np.round(peak[:3], 3).tolist()
    [0.705, 0.775, 0.83]
    """
    out = {}
    cls = np.asarray(data.classes)
    for c in data.class_order():
        u = data.util[cls == c]
        n = max(data.class_links.get(c, len(u)), len(u), 1)
        out[c] = (u.max(axis=0), u.sum(axis=0) / n)
    return out


def busiest_time_index(data: ReportData) -> int:
    """The interval with the highest total utilization (the default selected time).

    Parameters
    ----------
    data : ReportData

    Returns
    -------
    int

    Examples
    --------
    >>> data = load_result("tests/data/report_result.json")     # a hybrid run with a timeline
    >>> busiest_time_index(data)
    9
    """
    if data.util.size == 0:
        return 0
    return int(np.argmax(data.util.sum(axis=0)))


def time_index(data: ReportData, at_s: float | None) -> int:
    """The interval starting nearest to time ``at_s``, or the busiest one (:func:`busiest_time_index`) for None.

    Parameters
    ----------
    data : ReportData
    at_s : float or None

    Returns
    -------
    int

    Raises
    ------
    TopoplanError
        For a time outside the timeline.

    Examples
    --------
    >>> data = load_result("tests/data/report_result.json")     # a hybrid run with a timeline
    >>> time_index(data, None), time_index(data, 0.0)
    (9, 0)
    """
    if at_s is not None and not data.t_s[0] <= at_s <= data.t_s[-1] + data.dt_s:
        raise TopoplanError(f"field 'at_s': {at_s:g} s: outside the timeline of {data.source} "
                            f"({data.t_s[0]:g} to {data.t_s[-1] + data.dt_s:g} s)")
    if at_s is None:
        return busiest_time_index(data)
    return int(np.argmin(np.abs(data.t_s - at_s)))


# -- figures -------------------------------------------------------------------------

def _figure(w, h):
    from matplotlib.figure import Figure

    return Figure(figsize=(w, h), dpi=100)


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=fig.dpi)
    return buf.getvalue()


def figure_timeseries(data: ReportData, at_index: int | None = None):
    """004 Fig. 1/3: max (red) and average (green) utilization per class over time.

    Parameters
    ----------
    data : ReportData
    at_index : int, optional
        Interval marked with a cursor.

    Returns
    -------
    figure : matplotlib.figure.Figure
    axes_box : dict
        ``box`` = (left, right, bottom, top) of the axes in figure fractions,
        ``t0``/``t1`` the plotted time range in seconds, for placing a cursor
        (the axis itself is in :meth:`ReportData.time_unit`).

    References
    ----------
    004 Fig. 1 and 3.

    Examples
    --------
    >>> data = load_result("tests/data/report_result.json")     # a hybrid run with a timeline
    >>> fig, where = figure_timeseries(data, at_index=9)
    >>> type(fig).__name__, sorted(where)
    ('Figure', ['box', 't0', 't1'])
    """
    series = class_series(data)
    classes = list(series) or ["(no links)"]
    unit, sec = data.time_unit()
    lane = bool(data.phases)
    head = 0.75 if lane else 0.6   # inches above the axes: the title (two lines with phases), the legend
    h = 0.85 * len(classes) + 0.65 + head + (0.8 if lane else 0.0)
    fig = _figure(11, h)
    fig.subplots_adjust(left=0.13, right=0.9 if lane else 0.98, top=1 - head / h, bottom=0.65 / h, hspace=0.12)
    ratios = ([0.6] if lane else []) + [0.85] * len(classes)
    all_axes = fig.subplots(len(ratios), 1, sharex=True, squeeze=False, gridspec_kw={"height_ratios": ratios})[:, 0]
    axes = all_axes[1:] if lane else all_axes
    lo, hi = float(data.t_s[0]), float(data.t_s[-1] + data.dt_s)
    # plotted in the report's unit; rounded so that a bar ends exactly where the next starts (no seams)
    t, dt = np.round(data.t_s / sec, 9), round(data.dt_s / sec, 9)
    if lane:
        _phase_lane(all_axes[0], data.phases, sec)
        for ax in axes:   # where the phases begin (every rank in), over every class
            for p in data.phases[1:]:
                ax.axvline(p["all_in_s"] / sec, color=PHASE_LINE, linewidth=0.8, linestyle=":")
    for ax, c in zip(axes, classes):
        if c in series:
            mx, av = series[c]
            _strip(ax, t, dt, mx, MAX_COLOR)
            _strip(ax, t, dt, av, MEAN_COLOR)
        ax.set_facecolor(UNUSED_COLOR)
        ax.set_ylim(0, 1.05)
        ax.set_yticks([0, 1], ["0%", "100%"])
        ax.set_ylabel(c, rotation=0, ha="right", va="center", fontsize=9)
        ax.tick_params(labelsize=9)
        if at_index is not None:
            ax.axvline(t[at_index] + dt / 2, color=CURSOR_COLOR, linewidth=1.5)
    axes[-1].set_xlim(lo / sec, hi / sec)
    axes[-1].set_xlabel(f"time ({unit})", fontsize=10)
    fig.suptitle("link utilization per class, % of link bandwidth"
                 + ("; phases: pale from the first rank in, solid once every rank is in, to the last rank out"
                    if lane else ""), fontsize=10, y=1 - 0.04 / h, va="top")
    _timeseries_legend(fig, lane, at_index is not None, top=1 - 0.27 / h)
    box = (axes[0].get_position().x0, axes[0].get_position().x1, axes[-1].get_position().y0,
           axes[0].get_position().y1)
    return fig, {"box": box, "t0": lo, "t1": hi}


def _strip(ax, t, dt, values, color) -> None:
    """One class's series as bars of width ``dt`` from each ``t``: one filled step outline when the intervals
    follow each other (one artist, not one per interval: a 12 s run at 10 ms had 10,000 bars to draw), else
    bars."""
    t = np.asarray(t, dtype=float)
    if len(t) > 1 and np.allclose(np.diff(t), dt, rtol=1e-6, atol=0.0):
        ax.stairs(values, np.append(t, t[-1] + dt), baseline=0.0, fill=True, color=color, linewidth=0,
                  antialiased=False)
    else:
        ax.bar(t, values, width=dt, align="edge", color=color, linewidth=0, antialiased=False, snap=False)


def _timeseries_legend(fig, phases: bool, cursor: bool, top: float) -> None:
    """Every colour of the time series named, in one row above it."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [Patch(color=MAX_COLOR, label="busiest link"),
               Patch(color=MEAN_COLOR, label="average link (idle ones included)"),
               Patch(facecolor=UNUSED_COLOR, edgecolor="#888888", label="unused bandwidth")]
    if phases:
        handles.append(Line2D([], [], color="#555555", linestyle=":", label="every rank in the next phase"))
    if cursor:
        handles.append(Line2D([], [], color=CURSOR_COLOR, linewidth=2, label="selected time"))
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.55, top), ncol=len(handles), fontsize=9,
               frameon=False, handlelength=1.6, columnspacing=1.4)


_KIND_COLORS = ("#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#edc948", "#76b7b2", "#ff9da7", "#9c755f")


def _phase_lane(ax, phases: list[dict], sec: float) -> None:
    """Phases as bars on two alternating rows (neighbours overlap while ranks drift), coloured by kind."""
    ax.set_facecolor("white")
    ax.set_ylim(0, 2)
    ax.set_yticks([])
    ax.set_ylabel("phases", rotation=0, ha="right", va="center", fontsize=9)
    for p in phases:
        y = 1.05 if p["index"] % 2 == 0 else 0.1
        color = _KIND_COLORS[p["kind"] % len(_KIND_COLORS)]
        a, b, c = p["start_s"] / sec, p["all_in_s"] / sec, p["end_s"] / sec
        ax.barh(y, b - a, left=a, height=0.85, align="edge", color=color, alpha=0.35, linewidth=0)
        ax.barh(y, c - b, left=b, height=0.85, align="edge", color=color, linewidth=0)
        ax.text((a + c) / 2, y + 0.42, f"{p['index']}", ha="center", va="center", fontsize=8, color="black",
                clip_on=True)
    for spine in ax.spines.values():
        spine.set_visible(False)
    from matplotlib.patches import Patch

    kinds = sorted({p["kind"] for p in phases})
    shown = kinds[:len(_KIND_COLORS)]
    ax.legend(handles=[Patch(color=_KIND_COLORS[k % len(_KIND_COLORS)], label=f"kind {k}") for k in shown],
              loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, frameon=False, handlelength=1.0,
              title="phases" + (f" ({len(kinds)} kinds)" if len(kinds) > len(shown) else ""), title_fontsize=8)


def _util_lookup(data: ReportData, k: int) -> dict:
    return {(c, s, d): float(data.util[i, k]) for i, (c, s, d) in enumerate(zip(data.classes, data.src, data.dst))}


def _colorbar(fig, ax):
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    sm = ScalarMappable(norm=Normalize(0, 1), cmap=CMAP)
    cb = fig.colorbar(sm, ax=ax, fraction=0.025, pad=0.01)
    _percent_bar(cb)


def _percent_bar(cb) -> None:
    """A utilization colour bar in the time series' unit: % of link bandwidth."""
    from matplotlib.ticker import PercentFormatter

    cb.ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    cb.ax.tick_params(labelsize=9)
    cb.set_label("utilization, % of link bandwidth", fontsize=10)


def _view_legend(ax, *, nodes=True, ocs=False, switches=True, circuits=False) -> None:
    """The topological view's marks and its idle colour (the colour bar gives the busy ones)."""
    from matplotlib.lines import Line2D

    handles = []
    if nodes:
        handles.append(Line2D([], [], marker="o", linestyle="", color="#4a4a4a", label="node"))
    if ocs:
        handles.append(Line2D([], [], marker="s", linestyle="", color="#1f5fbf", label="OCS node"))
    if switches:
        handles.append(Line2D([], [], marker="s", linestyle="", color="#2b2b2b", markersize=9, label="switch"))
    handles.append(Line2D([], [], color=IDLE, linewidth=3, label="idle link"))
    if circuits:
        handles.append(Line2D([], [], color=_cmap_at(0.7), linewidth=2.4, label="circuit (coloured like a link)"))
        handles.append(Line2D([], [], color="#8a8a8a", linewidth=2.4, linestyle="--", label="idle circuit"))
    ax.legend(handles=handles, loc="upper left", fontsize=9, frameon=False)


def _cmap_at(v: float):
    from matplotlib import colormaps

    return colormaps[CMAP](v)


def _seg_colors(values):
    from matplotlib import colormaps

    cmap = colormaps[CMAP]
    return [IDLE if v <= 0 else cmap(min(v, 1.0)) for v in values]


def figure_topology(data: ReportData, k: int):
    """Topological view at interval ``k``: links coloured by utilization.

    Parameters
    ----------
    data : ReportData
    k : int
        The interval.

    Returns
    -------
    matplotlib.figure.Figure

    References
    ----------
    004 section III (CLV's topological view).

    Examples
    --------
    >>> data = load_result("tests/data/report_result.json")     # a hybrid run with a timeline
    >>> type(figure_topology(data, 9)).__name__
    'Figure'
    """
    t = data.topo
    if isinstance(t, TreeTopology):
        fig = _tree_view(data, k)
    elif isinstance(t, TorusTopology):
        fig = _torus_view(data, k)
    elif isinstance(t, GraphTopology):
        fig = _graph_view(data, k)
    else:
        fig = _busiest_links_view(data, k)
    fig.suptitle(f"topological view at t = {data.format_t(data.t_s[k])}", fontsize=11)
    return fig


def _tree_view(data: ReportData, k: int):
    from matplotlib.collections import LineCollection
    from matplotlib.patches import FancyArrowPatch

    t = data.topo
    u = _util_lookup(data, k)
    hosts = t.host_names()
    sw_names = t.switch_labels()
    node_sw = t.node_switch()
    width = max(t.n_nodes, 8)
    fig = _figure(min(4 + 0.3 * width, 22), 6.5)
    ax = fig.add_axes([0.03, 0.05, 0.88, 0.85])
    # nodes spread evenly, switches centred over their nodes, top switch over all
    nx_ = np.arange(t.n_nodes, dtype=float)
    sx = np.array([nx_[node_sw == s].mean() for s in range(t.n_switches)])
    top = (nx_.mean(), 2.0)
    off = 0.12
    segs, vals, widths = [], [], []
    for i in range(t.n_nodes):
        s = sw_names[node_sw[i]]
        for sign, key in ((-1, ("node-up", hosts[i], s)), (1, ("node-down", s, hosts[i]))):
            segs.append([(nx_[i] + sign * off, 0.0), (sx[node_sw[i]] + sign * off, 1.0)])
            vals.append(u.get(key, 0.0))
            widths.append(1.6)
    top_name = t.top_label()
    for s in range(t.n_switches):
        for sign, key in ((-1, ("uplink-up", sw_names[s], top_name)), (1, ("uplink-down", top_name, sw_names[s]))):
            segs.append([(sx[s] + sign * off * 2, 1.0), (top[0] + sign * off * 2, top[1])])
            vals.append(u.get(key, 0.0))
            widths.append(3.0)
    ax.add_collection(LineCollection(segs, colors=_seg_colors(vals), linewidths=widths, zorder=1))
    ocs = t.is_ocs_node()
    ax.scatter(nx_[~ocs], np.zeros((~ocs).sum()), s=30, c="#4a4a4a", zorder=3, label="node")
    if ocs.any():
        ax.scatter(nx_[ocs], np.zeros(ocs.sum()), s=45, marker="s", c="#1f5fbf", zorder=3, label="OCS node")
    ax.scatter(sx, np.ones(t.n_switches), s=260, marker="s", c="#2b2b2b", zorder=3)
    # host names, written downwards under the nodes; the circuits' arcs hang below them
    span = max(1.0, abs(nx_[-1] - nx_[0]))
    below = 0.2 + 0.18 * span / 8 if data.circuits else 0.25      # room under the arcs (data units)
    arc_y = -0.05
    if t.n_nodes <= 64:
        labels = [h if len(h) <= 24 else h[:23] + "…" for h in hosts]
        # as large as the room between two nodes allows (the labels are written downwards), 6 to 9 pt
        gap_pt = fig.get_figwidth() * 0.88 * 72 / (t.n_nodes + 1)
        size = float(np.clip(0.8 * gap_pt, 6, 9))
        for i in range(t.n_nodes):
            ax.annotate(labels[i], (nx_[i], 0.0), xytext=(0, -5), textcoords="offset points", ha="center",
                        va="top", rotation=90, fontsize=size)
        # the labels' length in points (characters about 0.6 of the font size wide) as a share k of the axes'
        # height, then the arcs' y such that they start just under the labels:
        # arc_y = -0.05 - k * (2.35 + below - arc_y)
        k = (5 + 0.6 * size * max(len(h) for h in labels) + 4) / (fig.get_figheight() * 0.85 * 72)
        arc_y = (-0.05 - k * (2.35 + below)) / (1 - k)
    ax.scatter([top[0]], [top[1]], s=420, marker="s", c="#2b2b2b", zorder=3)
    for s in range(t.n_switches):
        ax.annotate(sw_names[s], (sx[s], 1.0), xytext=(0, 12), textcoords="offset points", ha="center", fontsize=10)
    ax.annotate(top_name, top, xytext=(0, 14), textcoords="offset points", ha="center", fontsize=10)
    from matplotlib import colormaps

    cmap = colormaps[CMAP]
    for a, b in data.circuits:
        v = max(u.get(("ocs", hosts[a], hosts[b]), 0.0), u.get(("ocs", hosts[b], hosts[a]), 0.0))
        rad = 0.35 if a < b else -0.35
        ax.add_patch(FancyArrowPatch((nx_[a], arc_y), (nx_[b], arc_y), connectionstyle=f"arc3,rad={rad}",
                                     arrowstyle="-", linewidth=2.4, linestyle="-" if v > 0 else "--",
                                     color=cmap(v) if v > 0 else "#8a8a8a", zorder=2))
    ax.set_xlim(-1, t.n_nodes)
    ax.set_ylim(arc_y - below, 2.35)
    ax.axis("off")
    if data.circuits:
        ax.text(0.0, 0.01, f"{len(data.circuits)} circuits (arcs between OCS nodes)", transform=ax.transAxes,
                fontsize=9)
    _view_legend(ax, ocs=bool(ocs.any()), circuits=bool(data.circuits))
    _colorbar(fig, ax)
    return fig


def _torus_view(data: ReportData, k: int, max_panels: int = 12):
    from matplotlib.collections import LineCollection

    t = data.topo
    dims = list(t.dims)
    names = t.host_names()
    index = {n: i for i, n in enumerate(names)}
    c = t.coords()
    n = t.n_nodes
    # per router and class, utilization of the link leaving it
    out = {}
    for i, (cl, s) in enumerate(zip(data.classes, data.src)):
        if s in index:
            arr = out.setdefault(cl, np.zeros(n))
            arr[index[s]] = max(arr[index[s]], data.util[i, k])
    zero = np.zeros(n)
    grid = [d for d, size in enumerate(dims) if size > 1][:2] or [0]
    if len(grid) == 1:
        grid = grid + [d for d in range(len(dims)) if d != grid[0]][:1]
    rest = [d for d in range(len(dims)) if d not in grid]
    stride = np.cumprod([1] + dims[:-1])
    # panels: combinations of the other coordinates, busiest first when there are too many
    panel_key = (c[:, rest] * np.cumprod([1] + [dims[d] for d in rest[:-1]])).sum(axis=1) if rest else np.zeros(n, int)
    load = np.zeros(n)
    for v in out.values():
        load = np.maximum(load, v)
    keys = np.unique(panel_key)
    if len(keys) > max_panels:
        score = np.array([load[panel_key == p].sum() for p in keys])
        keys = np.sort(keys[np.argsort(-score, kind="stable")[:max_panels]])
    ncol = min(len(keys), 5)
    nrow = int(np.ceil(len(keys) / ncol))
    a, b = grid[0], grid[1] if len(grid) > 1 else None
    ka, kb = dims[a], (dims[b] if b is not None and b < len(dims) else 1)
    cell = 2.6 if max(ka, kb) <= 12 else 3.6
    fig = _figure(min(cell * ncol + 1.2, 22), cell * nrow + 0.9)
    fig.subplots_adjust(left=0.02, right=0.9, top=1 - 0.6 / (cell * nrow + 0.9), bottom=0.35 / (cell * nrow + 0.9),
                        wspace=0.08, hspace=0.25)
    axes = fig.subplots(nrow, ncol, squeeze=False)
    other = [d for d in range(len(dims)) if d not in (a, b)]
    for ax in axes.flat:
        ax.axis("off")
    for pi, key in enumerate(keys):
        ax = axes.flat[pi]
        members = np.flatnonzero(panel_key == key)
        segs, vals = [], []
        for d in (a, b):
            if d is None or d >= len(dims) or dims[d] < 2:
                continue
            dn = DIM_NAMES[d]
            plus, minus = out.get(f"torus-{dn}+", zero), out.get(f"torus-{dn}-", zero)
            for r in members:
                pos = c[r, d]
                x, y = c[r, a], (c[r, b] if b is not None else 0)
                if pos + 1 < dims[d]:
                    nb = r + stride[d]
                    v = max(plus[r], minus[nb])
                    end = (x + 1, y) if d == a else (x, y + 1)
                    segs.append([(x, y), end]); vals.append(v)
                elif t.wrap[d] and dims[d] > 2:
                    nb = r - pos * stride[d]
                    v = max(plus[r], minus[nb])
                    end = (x + 0.45, y) if d == a else (x, y + 0.45)
                    segs.append([(x, y), end]); vals.append(v)
                    start = (-0.45, y) if d == a else (x, -0.45)
                    x0, y0 = (0, y) if d == a else (x, 0)
                    segs.append([start, (x0, y0)]); vals.append(v)
        ax.add_collection(LineCollection(segs, colors=_seg_colors(vals), linewidths=2.2))
        # routers coloured by their busiest link in the other dimensions (and injection)
        node_v = np.zeros(len(members))
        for d in other:
            dn = DIM_NAMES[d]
            node_v = np.maximum(node_v, np.maximum(out.get(f"torus-{dn}+", zero)[members],
                                                   out.get(f"torus-{dn}-", zero)[members]))
        for extra in ("inject", "eject"):
            node_v = np.maximum(node_v, out.get(extra, zero)[members])
        ax.scatter(c[members, a], c[members, b] if b is not None else np.zeros(len(members)),
                   c=_seg_colors(node_v), s=max(6, 160 / max(ka, kb)), edgecolors="#555555", linewidths=0.4, zorder=3)
        ax.set_xlim(-0.7, ka - 0.3)
        ax.set_ylim(-0.7, kb - 0.3)
        ax.set_aspect("equal")
        label = ", ".join(f"{DIM_NAMES[d]}={c[members[0], d]}" for d in rest) or "all"
        ax.set_title(label, fontsize=9)
    dn_a = DIM_NAMES[a]
    dn_b = DIM_NAMES[b] if b is not None and b < len(dims) else "-"
    fig.text(0.02, 0.005, f"slices: {dn_a} across, {dn_b} up; routers coloured by their busiest "
             f"{'/'.join(DIM_NAMES[d] for d in other) or 'other'} link; grey: idle", fontsize=9, va="bottom")
    _colorbar(fig, list(axes.flat))
    return fig


def _graph_view(data: ReportData, k: int):
    import networkx as nx
    from matplotlib.collections import LineCollection

    t = data.topo
    u = _util_lookup(data, k)
    g = t.switch_graph()
    pos = nx.spring_layout(nx.Graph(g), seed=0)
    fig = _figure(9, 7)
    ax = fig.add_axes([0.03, 0.03, 0.85, 0.88])
    segs, vals = [], []
    labels = t.switch_labels()
    for a, b, _bw in t.links:
        sa, sb = labels[a], labels[b]
        segs.append([pos[a], pos[b]])
        vals.append(max(u.get(("switch", sa, sb), 0.0), u.get(("switch", sb, sa), 0.0)))
    ax.add_collection(LineCollection(segs, colors=_seg_colors(vals), linewidths=2.5))
    xy = np.array([pos[i] for i in range(t.n_switches)])
    ax.scatter(xy[:, 0], xy[:, 1], s=120, marker="s", c="#2b2b2b", zorder=3)
    if t.n_switches <= 40:
        for i, name in enumerate(labels):
            ax.annotate(name, xy[i], xytext=(0, 8), textcoords="offset points", ha="center", fontsize=9)
    ax.axis("off")
    ax.autoscale()
    _view_legend(ax, nodes=False)
    _colorbar(fig, ax)
    return fig


def _busiest_links_view(data: ReportData, k: int, top: int = 30):
    fig = _figure(9, 6)
    ax = fig.add_axes([0.35, 0.08, 0.6, 0.84])
    order = np.argsort(-data.util[:, k])[:top] if data.util.size else []
    ax.barh([data.names[i] for i in order][::-1], [data.util[i, k] for i in order][::-1], color="#e8282b")
    ax.set_xlim(0, 1)
    from matplotlib.ticker import PercentFormatter

    ax.xaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_xlabel("utilization, % of link bandwidth (no topology in the result: the busiest links)")
    ax.tick_params(labelsize=9)
    return fig


def figure_switch_heatmap(data: ReportData):
    """Bytes sent between switch pairs (rows: source switch), or None without ``switch_bytes``.

    Parameters
    ----------
    data : ReportData

    Returns
    -------
    matplotlib.figure.Figure or None

    Examples
    --------
    >>> data = load_result("tests/data/report_result.json")     # a hybrid run with a timeline
    >>> type(figure_switch_heatmap(data)).__name__
    'Figure'
    """
    if data.switch_bytes is None:
        return None
    m = data.switch_bytes
    s = len(m)
    fig = _figure(min(6.5 + 0.3 * s, 14), min(4 + 0.3 * s, 12))
    ax = fig.add_axes([0.14, 0.12, 0.7, 0.78])
    im = ax.imshow(m, cmap="viridis", interpolation="nearest", vmin=0, vmax=max(float(m.max()), 1.0))
    if s <= 32:
        ax.set_xticks(range(s), data.switch_names, rotation=90, fontsize=9 if s <= 16 else 7)
        ax.set_yticks(range(s), data.switch_names, fontsize=9 if s <= 16 else 7)
        if s <= 12:
            for i in range(s):
                for j in range(s):
                    if m[i, j] > 0:
                        ax.text(j, i, format_bytes(m[i, j]), ha="center", va="center", fontsize=9 if s <= 6 else 7,
                                color="white" if m[i, j] < 0.6 * m.max() else "black")
    ax.set_xlabel("destination switch")
    ax.set_ylabel("source switch")
    ax.set_title(f"traffic between switches (total {format_bytes(m.sum())}, "
                 f"between switches {format_bytes(m.sum() - np.trace(m))})", fontsize=9)
    from matplotlib.ticker import FuncFormatter

    cb = fig.colorbar(im, ax=ax, fraction=0.04, pad=0.02, format=FuncFormatter(lambda v, _pos: format_bytes(v)))
    cb.set_label("bytes")
    return fig


def figure_link_heatmap(data: ReportData):
    """Utilization of every link (rows, grouped by class) over time (columns).

    Parameters
    ----------
    data : ReportData

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> data = load_result("tests/data/report_result.json")     # a hybrid run with a timeline
    >>> type(figure_link_heatmap(data)).__name__
    'Figure'
    """
    order = []
    bounds = []
    cls = np.asarray(data.classes)
    for c in data.class_order():
        idx = np.flatnonzero(cls == c)
        idx = idx[np.argsort(np.asarray(data.names)[idx], kind="stable")]
        bounds.append((c, len(order), len(order) + len(idx)))
        order.extend(idx.tolist())
    fig = _figure(11, min(2.5 + 0.012 * len(order), 9))
    ax = fig.add_axes([0.14, 0.14, 0.78, 0.76])
    m = data.util[order] if order else np.zeros((1, data.n_times))
    unit, sec = data.time_unit()
    t0, t1 = float(data.t_s[0]) / sec, float(data.t_s[-1] + data.dt_s) / sec
    im = ax.imshow(m, aspect="auto", cmap=CMAP, vmin=0, vmax=1, interpolation="nearest",
                   extent=(t0, t1, len(m), 0))
    ax.set_yticks([(a + b) / 2 for _, a, b in bounds], [f"{c} ({b - a})" for c, a, b in bounds], fontsize=9)
    for _, a, _b in bounds[1:]:
        ax.axhline(a, color="#1f5fbf", linewidth=0.6)
    ax.set_xlabel(f"time ({unit})")
    ax.set_title(f"utilization of each of the {len(order)} busy links over time (idle links omitted; blue lines "
                 "separate the classes)", fontsize=10)
    _percent_bar(fig.colorbar(im, ax=ax, fraction=0.03, pad=0.01))
    return fig


# -- output --------------------------------------------------------------------------

def frame_indices(data: ReportData, frames: int, selected: int) -> list[int]:
    """``frames`` evenly spaced intervals plus the selected one.

    Parameters
    ----------
    data : ReportData
    frames : int
    selected : int

    Returns
    -------
    list of int
        Sorted, without repeats.

    Examples
    --------
    >>> data = load_result("tests/data/report_result.json")     # a hybrid run with a timeline
    >>> frame_indices(data, 4, selected=5)
    [0, 5, 8, 15, 23]
    """
    n = data.n_times
    picks = set(np.linspace(0, n - 1, num=min(max(frames, 1), n)).round().astype(int).tolist())
    picks.add(int(selected))
    return sorted(picks)


def _b64(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _summary_rows(data: ReportData) -> list[tuple[str, str]]:
    rows = [("result", data.source)]
    t = data.topo
    if t is not None:
        shape = " x ".join(map(str, t.dims)) if hasattr(t, "dims") else f"{t.n_switches} switches"
        rows.append(("topology", f"{t.name or data.meta.get('topology', '')} ({t.kind}, {shape}, {t.n_nodes} nodes)"))
    elif "topology" in data.meta:
        rows.append(("topology", str(data.meta["topology"])))
    for key in ("network", "traffic", "placement"):
        if data.meta.get(key):
            rows.append((key, str(data.meta[key])))
    if "makespan_s" in data.meta:
        rows.append(("makespan", data.format_t(float(data.meta["makespan_s"]))))
    rows.append(("timeline", f"{data.n_times} intervals of {data.format_t(data.dt_s)}"))
    total = sum(data.class_links.values())
    rows.append(("links", f"{len(data.names)} busy of {total}"))
    if data.circuits:
        shown = ", ".join(f"{data.host_label(a)}-{data.host_label(b)}" for a, b in data.circuits[:8])
        more = f", ... ({len(data.circuits) - 8} more)" if len(data.circuits) > 8 else ""
        rows.append(("circuits", f"{len(data.circuits)}: {shown}{more}"))
    if data.util.size:
        rows.append(("peak utilization", f"{data.util.max():.0%}"))
    if data.phases:
        kinds = len({p["kind"] for p in data.phases})
        rows.append(("phases", f"{len(data.phases)} ({kinds} kinds), below the time series"))
    return rows


def _phase_rows(data: ReportData, most: int = 200) -> str:
    """The phases as an HTML table: simulated span, ideal-network span, bytes and dominant pairs."""
    esc = html.escape
    shown = data.phases[:most]
    ideal_col = any("logical_start_s" in p and "logical_end_s" in p for p in shown)   # only when some phase has it
    bytes_col = any("bytes" in p for p in shown)
    head = ("<tr><th>phase</th><th>kind</th><th>first rank in</th><th>last rank in</th><th>last rank out</th>"
            + ("<th>ideal network</th>" if ideal_col else "") + ("<th>bytes</th>" if bytes_col else "")
            + "<th>dominant pairs</th></tr>")
    body = []
    for p in shown:
        if p["pair_basis"] == "node":
            pairs = ", ".join(f"{data.host_label(int(a))}-{data.host_label(int(b))}" for a, b, _ in p["pairs"][:4])
        else:
            pairs = ", ".join(f"rank {int(a)}-{int(b)}" for a, b, _ in p["pairs"][:4])
        pairs += " ..." if len(p["pairs"]) > 4 else ""
        ideal = ""
        if "logical_start_s" in p and "logical_end_s" in p:
            ideal = f"{data.format_t(p['logical_start_s'])} - {data.format_t(p['logical_end_s'])}"
        body.append(f"<tr><td>{p['index']}</td><td>{p['kind']}</td><td>{esc(data.format_t(p['start_s']))}</td>"
                    f"<td>{esc(data.format_t(p['all_in_s']))}</td><td>{esc(data.format_t(p['end_s']))}</td>"
                    + (f"<td>{esc(ideal)}</td>" if ideal_col else "")
                    + (f"<td>{esc(format_bytes(p['bytes'])) if 'bytes' in p else ''}</td>" if bytes_col else "")
                    + f"<td>{esc(pairs)}</td></tr>")
    more = (f'<p class="note">{len(data.phases) - most} more phases in the result file.</p>'
            if len(data.phases) > most else "")
    return f'<table class="summary phases">{head}{"".join(body)}</table>{more}'


_STYLE = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:24px;color:#222;max-width:1400px}
h1{font-size:22px;margin:0 0 8px}h2{font-size:17px;margin:26px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
table.summary{border-collapse:collapse;font-size:13px}table.summary td{padding:2px 12px 2px 0}
table.summary td:first-child{color:#666}table.phases th{text-align:left;padding:2px 12px 2px 0;font-weight:600}
.wrap{position:relative;display:inline-block;max-width:100%}.wrap img{display:block;max-width:100%;height:auto}
#ts-cursor{position:absolute;width:2px;background:#00d5ff;pointer-events:none}
.controls{margin:6px 0 10px;font-size:14px}.controls input{width:420px;vertical-align:middle}
.note{color:#666;font-size:13px}img.plot{max-width:100%;height:auto}
@media print{body{margin:0;max-width:none}.controls,#ts-cursor{display:none}h2{break-after:avoid}
img,.wrap,table.phases tr{break-inside:avoid}}
"""

_SCRIPT = """
(function () {
  var frames = JSON.parse(document.getElementById('frames').textContent);
  var box = JSON.parse(document.getElementById('ts-box').textContent);
  var slider = document.getElementById('frame');
  var img = document.getElementById('topo-img');
  var label = document.getElementById('t-label');
  var cursor = document.getElementById('ts-cursor');
  var ts = document.getElementById('ts-img');
  cursor.style.top = (100 * (1 - box.top)) + '%';
  cursor.style.height = (100 * (box.top - box.bottom)) + '%';
  function show(i) {
    var f = frames[i];
    img.src = f.img;
    label.textContent = f.label;
    cursor.style.left = (100 * (box.left + (box.right - box.left) * (f.t - box.t0) / (box.t1 - box.t0))) + '%';
  }
  slider.addEventListener('input', function () { show(Number(slider.value)); });
  ts.addEventListener('click', function (ev) {
    var r = ts.getBoundingClientRect();
    var x = (ev.clientX - r.left) / r.width;
    var t = box.t0 + (x - box.left) / (box.right - box.left) * (box.t1 - box.t0);
    var best = 0;
    for (var i = 1; i < frames.length; i++) {
      if (Math.abs(frames[i].t - t) < Math.abs(frames[best].t - t)) { best = i; }
    }
    slider.value = best;
    show(best);
  });
  show(Number(slider.value));
  document.body.setAttribute('data-ready', 'yes');
})();
"""


def render_html(data: ReportData, *, frames: int = 8, at_s: float | None = None, title: str | None = None) -> str:
    """The report page as one self-contained HTML string (PNG images inline, no external resources).

    Parameters
    ----------
    data : ReportData
    frames : int, optional
        Topological views pre-rendered for the slider.
    at_s : float, optional
        Selected time; default the busiest interval.
    title : str, optional

    Returns
    -------
    str

    Examples
    --------
    >>> data = load_result("tests/data/report_result.json")     # a hybrid run with a timeline
    >>> page = render_html(data, frames=2)
    >>> page.startswith("<!DOCTYPE html>"), "http" in page.split("<body")[1]
    (True, False)
    """
    sel = time_index(data, at_s)
    fig, axinfo = figure_timeseries(data)
    ts_png = _png(fig)
    picks = frame_indices(data, frames, sel)
    frame_docs = []
    for k in picks:
        frame_docs.append({"t": float(data.t_s[k]) + data.dt_s / 2, "label": data.format_t(data.t_s[k]),
                           "img": _b64(_png(figure_topology(data, k)))})
    start = picks.index(sel)
    left, right, bottom, top = axinfo["box"]
    box = {"left": left, "right": right, "bottom": bottom, "top": top, "t0": axinfo["t0"], "t1": axinfo["t1"]}
    heat = figure_switch_heatmap(data)
    title = title or f"topoplan report: {data.topo.name if data.topo is not None and data.topo.name else Path(data.source).name}"
    esc = html.escape
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{esc(title)}</h1>",
        '<table class="summary">' + "".join(f"<tr><td>{esc(k)}</td><td>{esc(v)}</td></tr>"
                                            for k, v in _summary_rows(data)) + "</table>",
        '<h2 id="timeseries">Link utilization over time</h2>',
        '<p class="note">Per link class (dimension and direction on a mesh/torus), in % of link bandwidth: the '
        'busiest link (red), the average over all links of the class, idle ones included (green), and the '
        'bandwidth no link used (black). Click to pick a time (the cyan line).</p>',
        f'<div class="wrap"><img id="ts-img" alt="link utilization time series" src="{_b64(ts_png)}">'
        '<div id="ts-cursor"></div></div>',
    ]
    parts += [
        '<h2 id="topology">Topological view at t = <span id="t-label"></span></h2>',
        f'<div class="controls"><input type="range" id="frame" min="0" max="{len(picks) - 1}" value="{start}" '
        f'aria-label="time"> {len(picks)} times</div>',
        f'<img id="topo-img" class="plot" alt="topological view" src="{frame_docs[start]["img"]}">',
    ]
    if data.phases:
        parts += ['<h2 id="phases">Communication phases</h2>',
                  '<p class="note">The trace\'s phases (<code>topoplan phases</code>) in simulated time: a rank is '
                  'in a phase from when it reaches its first call of the phase until it reaches the next phase. '
                  'Ranks drift apart, so neighbouring phases overlap' +
                  ('; "ideal network" is the span the phase detection measured without contention.'
                   if any("logical_start_s" in p for p in data.phases) else '.') + '</p>', _phase_rows(data)]
    parts.append('<h2 id="switch-heatmap">Traffic between switches</h2>')
    if heat is not None:
        parts.append(f'<img id="heat-img" class="plot" alt="switch pair heat map" src="{_b64(_png(heat))}">')
    else:
        parts.append('<p class="note">The result has no <code>switch_bytes</code> matrix.</p>')
    parts += ['<h2 id="link-heatmap">Every link over time</h2>',
              f'<img id="links-img" class="plot" alt="link utilization heat map" src="{_b64(_png(figure_link_heatmap(data)))}">',
              f'<script type="application/json" id="frames">{dumps(frame_docs, indent=None)}</script>',
              f'<script type="application/json" id="ts-box">{dumps(box, indent=None)}</script>',
              f"<script>{_SCRIPT}</script>", "</body></html>"]
    return "\n".join(parts) + "\n"


def render_png(data: ReportData, *, at_s: float | None = None) -> bytes:
    """All views stacked in one PNG (time series with the selected time marked, topology, heat maps).

    Parameters
    ----------
    data : ReportData
    at_s : float, optional

    Returns
    -------
    bytes
        The PNG file.

    Examples
    --------
    >>> data = load_result("tests/data/report_result.json")     # a hybrid run with a timeline
    >>> render_png(data)[:8]
    b'\\x89PNG\\r\\n\\x1a\\n'
    """
    from PIL import Image

    sel = time_index(data, at_s)
    figs = [figure_timeseries(data, sel)[0], figure_topology(data, sel)]
    heat = figure_switch_heatmap(data)
    if heat is not None:
        figs.append(heat)
    figs.append(figure_link_heatmap(data))
    ims = [Image.open(io.BytesIO(_png(f))).convert("RGB") for f in figs]
    w = max(i.width for i in ims)
    out = Image.new("RGB", (w, sum(i.height for i in ims)), "white")
    y = 0
    for i in ims:
        out.paste(i, ((w - i.width) // 2, y))
        y += i.height
    buf = io.BytesIO()
    out.save(buf, format="PNG", optimize=True)
    return buf.getvalue()


def write_report(result_path, output, *, png=None, frames: int = 8, at_s: float | None = None,
                 title: str | None = None, key: str = "timeline") -> dict:
    """Read a simulation result and write the HTML report (and a PNG); returns a summary dict.

    Parameters
    ----------
    result_path : str or path
    output : str or path
        The HTML file.
    png : str or path, optional
        Also write the PNG there.
    frames : int, optional
    at_s : float, optional
    title : str, optional
    key : str, optional
        The field that holds the timeline (:func:`parse_result`).

    Returns
    -------
    dict
        ``result``, ``frames``, ``intervals``, ``links``, ``selected_t_s``,
        ``html`` and ``html_bytes`` (with ``output``), ``png`` (with ``png``).

    Raises
    ------
    TopoplanError
        For a bad result file or an output that cannot be written.

    Examples
    --------
    >>> import os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> out = os.path.join(tmp.name, "report.html")
    >>> summary = write_report("tests/data/report_result.json", out, frames=2)
    >>> summary["frames"], summary["intervals"], os.path.getsize(out) == summary["html_bytes"]
    (3, 24, True)
    """
    data = load_result(result_path, key=key)
    page = render_html(data, frames=frames, at_s=at_s, title=title)
    out = {"result": str(result_path), "links": len(data.names), "intervals": data.n_times,
           "selected_t_s": float(data.t_s[time_index(data, at_s)]),
           "frames": len(frame_indices(data, frames, time_index(data, at_s)))}
    if output is not None:
        atomic_write(output, page)
        out["html"] = str(output)
        out["html_bytes"] = len(page.encode("utf-8"))
    if png is not None:
        atomic_write(png, render_png(data, at_s=at_s), binary=True)
        out["png"] = str(png)
    return out
