"""Foundation commands: presets, show, traffic, analyze."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from topoplan.cli.commands.common import (AnyInputsOpt, JsonOpt, OutOpt, PlacementOpt, SetOpt, TopologyOpt,
                                          TrafficOpt, console, emit, load_checked_inputs)
from topoplan.core.units import format_bytes, parse_size


def register(app: typer.Typer) -> None:
    app.command("presets")(presets)
    app.command("show")(show)
    app.command("traffic")(traffic_cmd)
    app.command("analyze")(analyze_cmd)


def presets(json_mode: bool = JsonOpt) -> None:
    """List the topology presets (the papers' systems)."""
    from topoplan.core.topology_io import PRESET_DIR, _yaml, load_topology, preset_names

    rows = []
    for name in preset_names():
        t = load_topology(name)
        doc = _yaml((PRESET_DIR / f"{name}.yaml").read_text(), name)
        rows.append({"name": name, "kind": t.kind, "nodes": t.n_nodes, "paper": doc.get("paper", ""),
                     "ocs_nodes": len(t.ocs.nodes) if getattr(t, "ocs", None) else 0})
    if json_mode:
        emit({"presets": rows}, True, None)
        return
    from rich.table import Table

    tab = Table(title="topology presets")
    for col in ("name", "kind", "nodes", "ocs_nodes", "paper"):
        tab.add_column(col)
    for r in rows:
        tab.add_row(*(str(r[c]) for c in ("name", "kind", "nodes", "ocs_nodes", "paper")))
    console().print(tab)


def show(topology: str = typer.Argument(..., help="Preset, YAML file or Slurm topology.conf."),
         sets: Optional[List[str]] = SetOpt,
         output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the resolved topology as YAML.")) -> None:
    """Print a topology (with --set overrides applied) as YAML."""
    from topoplan.core.io import atomic_write
    from topoplan.core.topology_io import dump_topology, load_topology

    text = dump_topology(load_topology(topology, sets or []))
    if output:
        atomic_write(output, text)
    else:
        typer.echo(text, nl=False)


# Output names whose suffix says another format than the CSV `traffic` writes (a .zip that is CSV text).
OTHER_FORMATS = (".zip", ".json", ".json.gz", ".npz", ".npy", ".yaml", ".yml", ".parquet", ".otf2", ".tar", ".tar.gz")


def traffic_cmd(source: Optional[str] = typer.Argument(None, help="Generator spec, matrix CSV, trace CSV, trace directory or OTF2 archive."),
                traffic_opt: Optional[str] = typer.Option(None, "--traffic", "-T",
                                                          help="The source, as the other commands take it."),
                output: Path = typer.Option(..., "--output", "-o", help="Output CSV (.gz to compress); with --trace, a "
                                            "communicators.csv beside it when the trace has communicators other "
                                            "than MPI_COMM_WORLD."),
                trace: bool = typer.Option(False, "--trace", help="Write the MPI event trace instead of the matrix."),
                json_mode: bool = JsonOpt) -> None:
    """Write any traffic source as a communication matrix (or, with --trace, as an event trace)."""
    from topoplan.core.errors import TopoplanError
    from topoplan.traffic.sources import load_source

    if (source is None) == (traffic_opt is None):
        raise TopoplanError("give the traffic source once: as the argument or as -T/--traffic"
                            + ("" if source is None else f" (got {source!r} and {traffic_opt!r})"))
    source = source if source is not None else traffic_opt
    other = next((x for x in OTHER_FORMATS if str(output).lower().endswith(x)), None)
    if other is not None:   # the file would be CSV under a name that says otherwise
        raise TopoplanError(f"--output {output}: traffic writes CSV, not {other}; name it .csv (.csv.gz to compress)")
    tr, traffic = load_source(source)
    s, d, b, m = traffic.matrix()
    if trace:
        if tr is None:
            raise TopoplanError(f"{source}: a communication matrix has no event trace to write")
        from topoplan.traffic.trace import write_trace

        comms = write_trace(tr, output)   # with communicators.csv beside it when the trace needs one
        if comms is not None and not json_mode:
            console().print(f"wrote {comms} (the trace's communicators)")
    elif not len(s):   # a matrix is its rows: without one it has no ranks, and no command reads it back
        raise TopoplanError(f"{source}: no rank sends a message, so the matrix would have no rows (and no ranks); "
                            "--trace writes its event trace")
    else:
        traffic.write_matrix(output)
    summary = {"source": source, "output": str(output), "ranks": traffic.n_ranks, "pairs": int((s != d).sum()),
               "bytes": traffic.total_bytes(), "messages": int(m[s != d].sum()),
               "self_bytes": float(b[s == d].sum())}
    if json_mode:
        emit(summary, True, None)
    else:
        console().print(f"wrote {output}: {summary['ranks']} ranks, {summary['pairs']} communicating pairs, "
                        f"{format_bytes(summary['bytes'])} in {summary['messages']:,} messages "
                        f"(self-messages {format_bytes(summary['self_bytes'])} kept out of the totals)")


def analyze_cmd(topology: str = TopologyOpt, traffic: str = TrafficOpt, sets: Optional[List[str]] = SetOpt,
                placement: str = PlacementOpt,
                threshold: Optional[str] = typer.Option(None, "--threshold", help="Large-message threshold (e.g. 8192, 8KiB); default: the OCS bandwidth-delay product, else 8192 B. When given, node pairs count only pairs exchanging large messages."),
                pairs: Optional[str] = typer.Option(None, "--pairs", help="Which node pairs to count: any (default without --threshold): every message makes a pair, zero-byte ones such as a barrier's included; large (default with it): only pairs exchanging a large message."),
                any_inputs: bool = AnyInputsOpt, json_mode: bool = JsonOpt, output: Optional[Path] = OutOpt) -> None:
    """Inter-switch traffic per pair of EPS switches: node pairs and bytes, large vs small.

    Node pairs are unordered (a pair exchanging in both directions counts once). --pairs any (the default
    without --threshold) counts every pair that exchanges a message, a zero-byte one (a barrier's) too; --pairs
    large (the default with --threshold) only pairs exchanging a large message (000's Table 2: the pairs
    circuits can serve)."""
    from topoplan.analysis.switches import analyze

    topo, _, tr, pl = load_checked_inputs(topology, sets, traffic, placement, any_inputs)
    thr = parse_size(threshold, "--threshold") if threshold is not None else None
    res = analyze(topo, tr, pl, thr, pairs=pairs or ("large" if threshold is not None else "any"))
    d = {"topology": topo.name, "traffic": traffic, "placement": placement, **res.to_dict()}
    emit(d, json_mode, output)
    if json_mode:
        return
    from rich.table import Table

    con = console()
    s = len(res.switch_names)
    if s <= 32:
        which = "exchanging large messages" if res.pairs == "large" else "exchanging any message"
        tab = Table(title=f"unordered node pairs ({which}) / bytes between EPS switches "
                          f"(threshold {format_bytes(res.threshold_B)})")
        tab.add_column("switch")
        for n in res.switch_names:
            tab.add_column(n, justify="right")
        for i, n in enumerate(res.switch_names):
            tab.add_row(n, *(f"{res.node_pairs[i, j]} / {format_bytes(res.bytes[i, j] + res.bytes[j, i] if i != j else res.bytes[i, i])}"
                             for j in range(s)))
        con.print(tab)
    con.print(f"inter-switch node pairs (unordered, {'large messages' if res.pairs == 'large' else 'any message'}): "
              f"{d['inter_switch_node_pairs']:,}")
    con.print(f"inter-switch bytes: {format_bytes(d['inter_switch_bytes'])} "
              f"(large {format_bytes(d['inter_switch_large_bytes'])}, small {format_bytes(d['inter_switch_small_bytes'])})")
    con.print(f"intra-switch bytes: {format_bytes(d['intra_switch_bytes'])}, intra-node: {format_bytes(d['intra_node_bytes'])}, "
              f"total: {format_bytes(d['total_bytes'])}")
