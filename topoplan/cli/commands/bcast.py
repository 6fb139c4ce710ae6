"""``topoplan bcast``: reorder the node-leader communicator for a topology/speed-aware MPI_Bcast (002)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from topoplan.cli.commands.common import (time_bounded, solving, ContentionOpt, JsonOpt, ModelOpt, OutOpt,
                                          RelayChunkOpt, RelayOpt, SeedOpt, SetOpt, TimeLimitOpt, TopologyOpt,
                                          console, emit, flag_names, known_method, sim_model, topology_record)
from topoplan.core.units import format_time, parse_size


def register(app: typer.Typer) -> None:
    app.command("bcast")(time_bounded(bcast_cmd))


def bcast_cmd(topology: str = TopologyOpt, sets: Optional[List[str]] = SetOpt,
              allocation: str = typer.Option("all", "--allocation", "-a",
                                             help="Node list file (host names or ids) or gen:nodes=N,racks=R,seed=S."),
              root: int = typer.Option(0, "--root", help="Root rank of the Bcast (its node stays fixed)."),
              nbytes: str = typer.Option("1MB", "--bytes", help="Message size, e.g. 4MB."),
              tree: str = typer.Option("knomial", "--tree",
                                       help="knomial | binomial | scatter-allgather | scatter-ring | scatter-rd | auto."),
              k: Optional[int] = typer.Option(None, "--k", help="k-nomial factor, for the knomial and auto trees "
                                                                 "(default 4, MVAPICH2's)."),
              short_msg: Optional[str] = typer.Option(None, "--short-msg",
                                                      help="auto: below this size use the k-nomial tree (default "
                                                           "12288, MPICH's)."),
              long_msg: Optional[str] = typer.Option(None, "--long-msg",
                                                     help="auto and scatter-allgather: from this size ring allgather, "
                                                          "below it recursive doubling on power-of-two jobs (default "
                                                          "524288, MPICH's)."),
              method: str = typer.Option("bft", "--method", "-m", help="default | dft | bft | greedy | anneal | ilp."),
              delay: str = typer.Option("auto", "--delay", help="auto (speed where the nodes' link rates differ, else "
                                                 "hops) | hops | speed | CSV/.npy delay matrix file."),
              time_limit: Optional[float] = TimeLimitOpt, seed: int = SeedOpt,
              no_simulate: bool = typer.Option(False, "--no-simulate", help="Skip the flow-simulator score."),
              score: str = typer.Option("bound", "--score", help="bound: the method's order for the time model; "
                                        "simulated: that order or a heuristic's it starts from, whichever "
                                        "simulates faster."),
              model: Optional[str] = ModelOpt, relay: Optional[str] = RelayOpt,
              relay_chunk: Optional[str] = RelayChunkOpt, paper_contention: Optional[str] = ContentionOpt,
              rankfile: Optional[Path] = typer.Option(None, "--rankfile", help="Also write an Open MPI rankfile."),
              json_mode: bool = JsonOpt, output: Optional[Path] = OutOpt) -> None:
    """Reorder Bcast node leaders so the critical sends use the shortest/fastest links."""
    from topoplan.problems.bcast import METHODS, BcastProblem, solve
    from topoplan.problems.bcast.allocation import parse_spec
    from topoplan.problems.bcast.trees import TREES
    from topoplan.core.errors import TopoplanError
    from topoplan.core.topology_io import load_topology

    known_method(METHODS, method, "--method")
    if score not in ("bound", "simulated"):
        raise TopoplanError(f"--score {score!r}: choose bound or simulated")
    if no_simulate and score == "simulated":
        raise TopoplanError("--score simulated simulates the orders: it cannot be used with --no-simulate")
    smodel = sim_model(model, relay, relay_chunk, paper_contention,
                       unused="without --no-simulate" if no_simulate else None)
    if tree in TREES:   # (an unknown tree is the library's error)
        for flag, given in (("--k", k), ("--short-msg", short_msg), ("--long-msg", long_msg)):
            if given is not None and tree not in TREE_OPTIONS[flag]:
                raise TopoplanError(f"{flag}: applies to the {' and '.join(TREE_OPTIONS[flag])} trees, "
                                    f"not --tree {tree}")
    topo = load_topology(topology, sets or ())
    nodes = parse_spec(allocation, topo, seed)
    try:   # the tree options not given keep the library's defaults (MVAPICH2's k, MPICH's sizes)
        bytes_B = parse_size(nbytes, "bytes_B")
        shape = {} if k is None else {"k": k}
        for key, text in (("short_B", short_msg), ("long_B", long_msg)):
            if text is not None:
                shape[key] = parse_size(text, key)
        prob = BcastProblem.build(topo, placement=nodes, root=root, bytes_B=bytes_B, tree=tree, delay=delay,
                                  **shape)
    except TopoplanError as e:  # the library names its fields; name the flags
        raise TopoplanError(flag_names(str(e), BUILD_FLAGS)) from None
    with solving(method, time_limit):   # progress on a terminal
        res = solve(prob, method, time_limit=time_limit, seed=seed, simulate=not no_simulate, score=score,
                    sim_model=smodel)
    doc = res.to_dict()
    hosts = topo.host_names()
    doc["hosts"] = [hosts[i] for i in res.plan["order"]]
    doc.update({**topology_record(topo, topology, sets), "allocation": allocation})
    from topoplan.core.io import output_group

    with output_group():   # the plan and the rankfile: both or neither
        if rankfile is not None:
            write_rankfile(rankfile, doc["hosts"])
        emit(doc, json_mode, output)
    if json_mode:
        return
    m = res.metrics
    sim = format_time(m["simulated_time_s"]) if m["simulated_time_s"] is not None else "n/a"
    bound = f", bound {format_time(res.bound)} (gap {res.gap:.1%})" if res.bound is not None else ""
    console().print(f"[bold]{method}[/] ({res.status}): {prob.n} leaders, {m['tree']}, predicted "
                    f"{format_time(res.objective)} (default {format_time(m['default_time_s'])}, "
                    f"x{m['speedup_vs_default']:.3f}){bound}; simulated {sim}; wall {res.wall_s:.2f} s")
    if res.message:
        console().print(res.message)


# BcastProblem.build's fields and the flags that set them
# The trees each tree option shapes (topoplan.problems.bcast.trees.build): given for another, it is refused.
TREE_OPTIONS = {"--k": ("knomial", "auto"), "--short-msg": ("auto",), "--long-msg": ("auto", "scatter-allgather")}

BUILD_FLAGS = {"placement": "--allocation", "root": "--root", "bytes_B": "--bytes", "tree": "--tree", "k": "--k",
               "delay": "--delay", "short_B": "--short-msg", "long_B": "--long-msg"}


def write_rankfile(path: Path, hosts: list[str]) -> None:
    """Open MPI rankfile: ``rank i=host slot=0`` for each new rank."""
    from topoplan.core.io import atomic_write

    atomic_write(path, "".join(f"rank {i}={h} slot=0\n" for i, h in enumerate(hosts)))
