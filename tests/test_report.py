import json
import re
import shutil
import subprocess

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from topoplan.core.errors import TopoplanError
from topoplan.reporting.report import (busiest_time_index, class_series, figure_link_heatmap, figure_switch_heatmap,
                                     figure_timeseries, figure_topology, frame_indices, load_result, parse_result,
                                     render_html, render_png, write_report)

FIXTURE = "report_result.json"


def _doc(data):
    return json.loads((data / FIXTURE).read_text())


def _cli(*args):
    from topoplan.cli.commands.report import register

    app = typer.Typer()
    register(app)
    app.command("noop", hidden=True)(lambda: None)
    return CliRunner().invoke(app, ["report", *map(str, args)])


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """The fixture's report, rendered once: (html path, png path, summary)."""
    from pathlib import Path

    out = tmp_path_factory.mktemp("report")
    src = Path(__file__).parent / "data" / FIXTURE
    res = write_report(src, out / "report.html", png=out / "report.png", frames=4)
    return out / "report.html", out / "report.png", res


def test_fixture_parses_with_idle_links_counted(data):
    d = load_result(data / FIXTURE)
    assert d.n_times == 24 and len(d.names) == 42
    assert d.class_order() == ["node-up", "node-down", "uplink-up", "uplink-down", "ocs"]
    assert d.topo.kind == "hybrid" and d.topo.n_nodes == 16
    assert d.circuits == [(0, 4), (8, 12)]
    # node 15 is idle (absent from the timeline) but still one of 16 node-up links
    assert d.class_links["node-up"] == 16 and d.class_links["ocs"] == 4
    series = class_series(d)
    up = d.util[np.asarray(d.classes) == "node-up"]
    mx, av = series["node-up"]
    assert np.allclose(mx, up.max(axis=0))
    assert np.allclose(av, up.sum(axis=0) / 16)
    assert busiest_time_index(d) == int(np.argmax(d.util.sum(axis=0)))
    assert frame_indices(d, 3, 5) == [0, 5, 12, 23]


def test_simulator_key_variants(data):
    """`topoplan simulate` writes the topology name in 'topology', the document in 'topology_doc', circuits as 'circuit_pairs'."""
    doc = _doc(data)
    doc["topology_doc"], doc["topology"] = doc["topology"], "paper003"
    doc["circuit_pairs"] = doc.pop("circuits")
    d = parse_result(doc, "sim.json")
    assert d.topo.n_nodes == 16 and d.circuits == [(0, 4), (8, 12)]
    assert d.meta["topology"] == "paper003"
    doc["timeline"]["links"].append({"name": "node0000:intra", "class": "intra", "src": "node0000", "dst": "node0000",
                                     "util": [0.5] * 24})
    assert len(parse_result(doc, "sim.json").names) == 42      # memory copies inside a node are not links


@pytest.mark.parametrize("mutate, field", [
    (lambda d: d.pop("timeline"), "timeline"),
    (lambda d: d["timeline"]["links"][3].update(util=[0.1] * 5), "timeline.links[3].util"),
    (lambda d: d["timeline"]["links"][0]["util"].__setitem__(2, -0.5), "timeline.links[0].util"),
    (lambda d: d["timeline"].update(t_s=[0.0, 0.0] + d["timeline"]["t_s"][2:]), "timeline.t_s"),
    (lambda d: d["timeline"]["links"][1].pop("class"), "timeline.links[1].class"),
    (lambda d: d.update(circuits=[[0, 99]]), "circuits"),
    (lambda d: d.update(switch_bytes=[[1, 2, 3]]), "switch_bytes"),
    (lambda d: d["topology"].update(kind="hypercube"), "kind"),
    (lambda d: d["timeline"].update(dt_s="abc"), "timeline.dt_s"),
    (lambda d: d["timeline"].update(dt_s=-1), "timeline.dt_s"),
    (lambda d: d.update(makespan_s="abc"), "makespan_s"),
    (lambda d: d.update(makespan_s=-1.0), "makespan_s"),
    (lambda d: d["timeline"]["links"].append(dict(d["timeline"]["links"][5])),
     "timeline.links[42].name': link 'S0->node0002' is listed twice (timeline.links[5] is the first)"),
])
def test_bad_results_name_the_field(data, mutate, field):
    # (a utilization over 1 is drawn as a full link: the simulator's sampled timelines reach 1.008 in places)
    doc = _doc(data)
    mutate(doc)
    with pytest.raises(TopoplanError, match=re.escape(field)):
        parse_result(doc, "bad.json")


def test_html_is_self_contained(page):
    html_path, png_path, res = page
    text = html_path.read_text()
    assert text.startswith("<!DOCTYPE html>")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text)     # nothing fetched from the network
    imgs = re.findall(r'<img id="([\w-]+)"[^>]* src="data:image/png;base64,', text)
    assert imgs == ["ts-img", "topo-img", "heat-img", "links-img"]
    frames = json.loads(re.search(r'<script type="application/json" id="frames">(.*?)</script>', text).group(1))
    assert len(frames) == res["frames"] == 5                       # 4 evenly spaced + the busiest interval
    assert all(f["img"].startswith("data:image/png;base64,") for f in frames)
    assert res["links"] == 42 and res["intervals"] == 24


def test_png_stacks_all_views(page):
    from PIL import Image

    _, png_path, _ = page
    im = Image.open(png_path)
    assert im.format == "PNG" and im.height > 1.5 * im.width > 1000          # four views stacked
    px = np.asarray(im.convert("RGB")).reshape(-1, 3).astype(int)
    red = ((px[:, 0] > 200) & (px[:, 1] < 80) & (px[:, 2] < 80)).sum()
    green = ((px[:, 1] > 180) & (px[:, 0] < 100) & (px[:, 2] < 120)).sum()
    assert red > 1000 and green > 1000                              # CLV's max (red) and average (green) bars


def test_torus_slices_and_no_topology(tmp_path):
    from topoplan.core.topology_io import load_topology, topology_to_dict
    from topoplan.sim.network import build_network

    t = load_topology("mesh10x10x10", ["dims=[3,3,2]", "wrap=[true,false,false]"])
    net = build_network(t)
    T = 6
    links = [{"name": net.link_name[l], "class": str(net.link_class[l]), "src": net.link_ends[l][0],
              "dst": net.link_ends[l][1], "util": [round((l % 7) / 7 * (k + 1) / T, 3) for k in range(T)]}
             for l in range(net.n_links) if str(net.link_class[l]) != "intra" and l % 5]
    doc = {"timeline": {"t_s": [k * 1e-4 for k in range(T)], "links": links}, "topology_doc": topology_to_dict(t),
           "topology": "small-torus"}
    d = parse_result(doc, "torus.json")
    assert d.class_order() == ["torus-x+", "torus-x-", "torus-y+", "torus-y-", "torus-z+", "torus-z-"]
    assert d.class_links["torus-x+"] == 18 and d.class_links["torus-y+"] == 12   # x wraps, y does not
    assert d.dt_s == pytest.approx(1e-4)
    text = render_html(d, frames=1, at_s=2e-4)
    assert "t = <span id=\"t-label\">" in text and "heat-img" not in text
    assert b"PNG" in render_png(d)[:8]
    del doc["topology_doc"]
    bare = parse_result(doc, "torus.json")
    assert bare.topo is None and "topo-img" in render_html(bare, frames=1)


def test_cli_writes_page_and_reports_json(tmp_path, data):
    res = _cli(data / FIXTURE, "-o", tmp_path / "r.html", "--frames", 2, "--at", "3ms", "--json")
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert d["selected_t_s"] == pytest.approx(0.003)
    assert d["frames"] == 3 and (tmp_path / "r.html").stat().st_size == d["html_bytes"]
    bad = _cli(tmp_path / "missing.json", "-o", tmp_path / "x.html")
    assert isinstance(bad.exception, TopoplanError) and "no such file" in str(bad.exception)
    late = _cli(data / FIXTURE, "-o", tmp_path / "late.html", "--at", "99s")
    assert isinstance(late.exception, TopoplanError) and "outside the timeline" in str(late.exception)
    assert not (tmp_path / "late.html").exists()


def _summary(page: str) -> dict:
    return dict(re.findall(r"<tr><td>([^<]*)</td><td>([^<]*)</td></tr>", page))


def test_one_time_unit_for_every_view(data):
    """Issue 18: the strips, the topological view, the slider, the link heat map and the summary all use one
    unit, chosen by the run's length (24 ms here: ms); the strips' utilization axis is in percent."""
    d = load_result(data / FIXTURE)
    assert d.time_unit() == ("ms", 1e-3)
    fig, where = figure_timeseries(d, 9)
    strips = fig.axes
    assert strips[-1].get_xlabel() == "time (ms)" and strips[-1].get_xlim() == pytest.approx((0, 24))
    assert all([t.get_text() for t in ax.get_yticklabels()] == ["0%", "100%"] for ax in strips)
    assert "% of link bandwidth" in fig._suptitle.get_text()
    assert (where["t0"], where["t1"]) == pytest.approx((0, 0.024))       # the page's cursor works in seconds
    assert figure_link_heatmap(d).axes[0].get_xlabel() == "time (ms)"
    assert figure_topology(d, 9)._suptitle.get_text() == "topological view at t = 9 ms"
    page = render_html(d, frames=2)
    frames = json.loads(re.search(r'id="frames">(.*?)</script>', page).group(1))
    assert [f["label"] for f in frames] == ["0 ms", "9 ms", "23 ms"]
    summary = _summary(page)
    assert summary["makespan"] == "24 ms" and summary["timeline"] == "24 intervals of 1 ms"
    assert "time (s)" not in page and not re.search(r"\d s<", page)


@pytest.mark.parametrize("scale, unit", [(1e3, "s"), (1e-3, "us")])
def test_time_unit_follows_the_run_length(data, scale, unit):
    doc = _doc(data)
    doc["timeline"]["t_s"] = [t * scale for t in doc["timeline"]["t_s"]]
    doc["timeline"]["dt_s"] *= scale
    doc["makespan_s"] *= scale
    d = parse_result(doc, "scaled.json")
    assert d.time_unit()[0] == unit
    assert figure_timeseries(d)[0].axes[-1].get_xlabel() == f"time ({unit})"
    assert figure_link_heatmap(d).axes[0].get_xlabel() == f"time ({unit})"
    summary = _summary(render_html(d, frames=1))
    assert summary["makespan"] == f"24 {unit}" and summary["timeline"] == f"24 intervals of 1 {unit}"


def test_switch_heatmap_scale_starts_at_zero(data):
    doc = _doc(data)
    doc["switch_bytes"] = [[v + 5e8 for v in row] for row in doc["switch_bytes"]]     # no empty pair
    heat = figure_switch_heatmap(parse_result(doc, "busy.json"))
    norm = heat.axes[0].images[0].norm
    assert norm.vmin == 0 and norm.vmax == pytest.approx(max(map(max, doc["switch_bytes"])))


def test_nodes_by_host_name_and_switches_by_the_topology(data):
    doc = _doc(data)
    hosts = [f"cn{i:02d}" for i in range(1, 17)]
    doc["topology"].update(hostnames=hosts, switch_names=["leafA", "leafB", "leafC", "leafD"])
    d = parse_result(doc, "named.json")          # the result's own switch_names are S0..S3
    assert d.switch_names == ["leafA", "leafB", "leafC", "leafD"]
    heat = figure_switch_heatmap(d).axes[0]
    assert [t.get_text() for t in heat.get_xticklabels()] == d.switch_names
    texts = [t.get_text() for t in figure_topology(d, 9).axes[0].texts]
    assert set(hosts) <= set(texts) and {"leafA", "leafD"} <= set(texts)
    assert not set(texts) & {str(i) for i in range(16)} and "S0" not in texts
    assert _summary(render_html(d, frames=1))["circuits"] == "2: cn01-cn05, cn09-cn13"


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _chromium(tmp_path, *args):
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
             f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0"]
    return subprocess.run([CHROMIUM, *flags, *args], capture_output=True, text=True, timeout=90)


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (Debian: apt-get install chromium)")
def test_page_in_headless_chromium(page, tmp_path):
    """The page loads without console messages, its script runs (views linked) and it renders the plots."""
    from PIL import Image

    html_path, _, _ = page
    url = html_path.resolve().as_uri()
    run = _chromium(tmp_path, "--virtual-time-budget=5000", "--dump-dom", url)
    assert run.returncode == 0, run.stderr[-2000:]
    console_lines = [l for l in run.stderr.splitlines() if ":CONSOLE" in l]
    assert console_lines == []
    dom = run.stdout
    assert 'data-ready="yes"' in dom                                  # the script ran to its end
    assert re.search(r'id="t-label">\d[^<]*ms<', dom)                  # the selected time is shown
    assert re.search(r'id="ts-cursor" style="[^"]*left: [\d.]+%', dom)  # cursor placed on the time series
    shot = tmp_path / "shot.png"
    run = _chromium(tmp_path, "--window-size=1200,1600", f"--screenshot={shot}", url)
    assert shot.is_file(), run.stderr[-2000:]
    px = np.asarray(Image.open(shot).convert("RGB")).reshape(-1, 3).astype(int)
    red = ((px[:, 0] > 200) & (px[:, 1] < 80) & (px[:, 2] < 80)).sum()
    black = (px.sum(axis=1) < 30).sum()
    assert red > 2000 and black > 20000                                # the time series (red bars on black) is drawn


def _legend_labels(fig) -> list[str]:
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    return [t.get_text() for lg in legends for t in lg.get_texts()]


def _colorbar_labels(fig) -> list[str]:
    return [ax.get_ylabel() for ax in fig.axes if ax.get_label() == "<colorbar>"]


def test_every_colour_has_a_legend_and_utilization_is_in_percent_everywhere(data):
    """The time series names its red, green and black (unused bandwidth) and the selected time; the topological
    view names its marks and its idle grey; every utilization colour bar is in % like the time series."""
    d = load_result(data / FIXTURE)
    ts = _legend_labels(figure_timeseries(d, 9)[0])
    assert ts == ["busiest link", "average link (idle ones included)", "unused bandwidth", "selected time"]
    topo = figure_topology(d, 9)
    assert {"node", "OCS node", "switch", "idle link", "idle circuit"} <= set(_legend_labels(topo))
    for fig in (topo, figure_link_heatmap(d)):
        assert _colorbar_labels(fig) == ["utilization, % of link bandwidth"]
        bar = next(ax for ax in fig.axes if ax.get_label() == "<colorbar>")
        fig.canvas.draw()
        ticks = [t.get_text() for t in bar.get_yticklabels() if t.get_text()]
        assert ticks and all(t.endswith("%") for t in ticks) and "100%" in ticks


def test_node_labels_are_readable(data):
    d = load_result(data / FIXTURE)           # 16 nodes
    sizes = [t.get_fontsize() for t in figure_topology(d, 9).axes[0].texts if t.get_text().startswith("node")]
    assert len(sizes) == 16 and min(sizes) >= 8


@pytest.mark.parametrize("ideal", [False, True])
def test_phases_table_has_no_empty_column(data, ideal):
    doc = _doc(data)
    doc["phases"] = [{"index": i, "kind": i % 2, "start_s": i * 4e-3, "all_in_s": i * 4e-3 + 1e-3,
                      "end_s": i * 4e-3 + 5e-3, "bytes": 1e6, "pairs": [[0, 4, 1e6]]} for i in range(4)]
    if ideal:
        for p in doc["phases"]:
            p.update(logical_start_s=p["start_s"], logical_end_s=p["end_s"])
    page = render_html(parse_result(doc, "phased.json"), frames=1)
    table = re.search(r'<table class="summary phases">(.*?)</table>', page).group(1)
    heads = re.findall(r"<th>([^<]*)</th>", table)
    assert ("ideal network" in heads) == ideal
    rows = re.findall(r"<tr><td>.*?</tr>", table)
    assert len(rows) == 4
    assert all(cells for row in rows for cells in re.findall(r"<td>([^<]*)</td>", row))   # no empty cell
    assert all(len(re.findall(r"<td>", row)) == len(heads) for row in rows)
    assert "kind 1" in _legend_labels(figure_timeseries(parse_result(doc, "phased.json"))[0])


@pytest.mark.parametrize("gap", [False, True])
def test_time_series_draws_one_shape_per_series_when_intervals_follow_each_other(data, gap):
    """A long timeline drew one bar per interval and per series (a 12 s replay at 10 ms: 10,000 bars, most of
    a minute): intervals that follow each other are one filled step shape per series, drawn where the bars
    were; a timeline with gaps keeps its bars."""
    from matplotlib.patches import Rectangle, StepPatch

    doc = _doc(data)
    if gap:   # the last interval moved away from the others
        doc["timeline"]["t_s"][-1] += 5 * doc["timeline"]["dt_s"]
    d = parse_result(doc, "gapped.json" if gap else FIXTURE)
    fig, _ = figure_timeseries(d)
    for ax in fig.axes:
        steps = [p for p in ax.patches if isinstance(p, StepPatch)]
        bars = [p for p in ax.patches if isinstance(p, Rectangle)]
        if gap:
            assert not steps and len(bars) == 2 * len(d.t_s)
        else:
            assert len(steps) == 2 and not bars
            edges = steps[0].get_data().edges
            assert edges[0] == pytest.approx(d.t_s[0] / 1e-3) and edges[-1] == pytest.approx((d.t_s[-1] + d.dt_s) / 1e-3)


def test_predicted_draws_an_emulations_predicted_timeline(tmp_path, data):
    """An emulation's result holds the measured timeline and the default model's (``predicted_timeline``);
    ``--predicted`` draws the second, and a result without it is refused naming the field."""
    doc = _doc(data)
    half = {**doc["timeline"], "links": doc["timeline"]["links"][: len(doc["timeline"]["links"]) // 2]}
    path = tmp_path / "em.json"
    path.write_text(json.dumps({**doc, "predicted_timeline": half}))
    measured = _cli(path, "-o", tmp_path / "m.html", "--json")
    predicted = _cli(path, "-o", tmp_path / "p.html", "--json", "--predicted")
    assert measured.exit_code == 0 and predicted.exit_code == 0, predicted.output
    assert json.loads(predicted.output)["links"] < json.loads(measured.output)["links"]
    bad = _cli(data / FIXTURE, "-o", tmp_path / "x.html", "--predicted")
    assert isinstance(bad.exception, TopoplanError)
    assert "field 'predicted_timeline': missing; run `topoplan emulate --timeline DT -o FILE`" in str(bad.exception)
    assert not (tmp_path / "x.html").exists()
    with pytest.raises(TopoplanError, match=r"field 'predicted_timeline.t_s': times must increase"):
        parse_result({**doc, "predicted_timeline": {**half, "t_s": [0.0, 0.0]}}, key="predicted_timeline")
