"""``topoplan cost``: extra power (and price) of a fat-tree EPS versus a supplemental OCS (003 section 5)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from topoplan.cli.commands.common import JsonOpt, OutOpt, SetOpt, console, emit, flag_names


def register(app: typer.Typer) -> None:
    app.command("cost")(cost_cmd)


def cost_cmd(
    nodes: Optional[int] = typer.Option(None, "--nodes", "-n", help="Nodes n (default 655, TSUBAME; or from --topology)."),
    lower: Optional[int] = typer.Option(None, "--lower-switches", "-k", help="Lower (edge) EPS switches k (default 6)."),
    upper: Optional[int] = typer.Option(None, "--upper-switches", "-l", help="Upper EPS switches l (default 2)."),
    ocs_fraction: Optional[float] = typer.Option(None, "--ocs-fraction", help="Share of nodes on the OCS (default 0.5; rounded up)."),
    ocs_switches: int = typer.Option(4, "--ocs-switches", help="OCS switches in OCS_NET (0: enough --ocs-switch-ports switches)."),
    ocs_switch_ports: int = typer.Option(190, "--ocs-switch-ports", help="Ports per OCS switch (used when --ocs-switches 0)."),
    eps_switch_power: float = typer.Option(2500.0, "--eps-switch-power", help="EPS switch power, W (288-port InfiniBand: 2,500)."),
    eps_nic_power: float = typer.Option(11.0, "--eps-nic-power", help="Added EPS NIC power, W."),
    ocs_nic_power: float = typer.Option(11.0, "--ocs-nic-power", help="OCS NIC power, W."),
    ocs_switch_power: float = typer.Option(80.0, "--ocs-switch-power", help="OCS switch power, W (190-port: 80)."),
    eps_switch_price: Optional[float] = typer.Option(None, "--eps-switch-price", help="EPS switch price (all four prices or none)."),
    eps_nic_price: Optional[float] = typer.Option(None, "--eps-nic-price", help="EPS NIC price."),
    ocs_nic_price: Optional[float] = typer.Option(None, "--ocs-nic-price", help="OCS NIC price."),
    ocs_switch_price: Optional[float] = typer.Option(None, "--ocs-switch-price", help="OCS switch price."),
    currency: str = typer.Option("", "--currency", help="Label for prices (e.g. USD)."),
    topology: Optional[str] = typer.Option(None, "--topology", "-t", help="Take n, k (l = 1) and the OCS share from a tree topology."),
    sets: Optional[List[str]] = SetOpt,
    json_mode: bool = JsonOpt, output: Optional[Path] = OutOpt,
) -> None:
    """Equations (1)-(5) of 003: what a fat tree and a half-OCS hybrid add to an EPS-only tree (power, price)."""
    from topoplan.analysis.cost import CostParams, network_costs, params_from_topology
    from topoplan.core.errors import TopoplanError

    given = {"nodes": nodes, "lower_switches": lower, "upper_switches": upper, "ocs_fraction": ocs_fraction}
    rest = dict(ocs_switches=ocs_switches, ocs_switch_ports=ocs_switch_ports,
                eps_switch_power_W=eps_switch_power, eps_nic_power_W=eps_nic_power,
                ocs_nic_power_W=ocs_nic_power, ocs_switch_power_W=ocs_switch_power,
                eps_switch_price=eps_switch_price, eps_nic_price=eps_nic_price, ocs_nic_price=ocs_nic_price,
                ocs_switch_price=ocs_switch_price, currency=currency)
    overrides = {k: v for k, v in given.items() if v is not None}
    if topology is not None:
        from topoplan.core.topology_io import load_topology

        topo = load_topology(topology, sets or [])
    try:   # the library names its fields; name the flags
        p = params_from_topology(topo, **overrides, **rest) if topology is not None else CostParams(**overrides,
                                                                                                    **rest)
        res = network_costs(p)
    except TopoplanError as e:
        raise TopoplanError(flag_names(str(e), {k: v for k, v in COST_FLAGS.items()
                                                if topology is None or k not in TOPOLOGY_FIELDS or k in overrides})) from None
    emit(res, json_mode, output)
    if json_mode:
        return
    con = console()
    cur = f" {currency}" if currency else ""
    con.print(f"{p.nodes} nodes, {p.lower_switches} lower + {p.upper_switches} upper EPS switches; "
              f"hybrid: {res['ocs_nodes']} OCS nodes, {res['ocs_switches']} OCS switches")
    for key, label in (("fat_tree_extra", "fat tree adds (eq. 4)"), ("hybrid_extra", "hybrid adds   (eq. 5)")):
        r = res[key]
        price = f", cost {r['cost']:,.0f}{cur}" if "cost" in r else ""
        con.print(f"{label}: {r['formula']}{price}")
    con.print(f"lower power: {res['cheaper_in_power'].replace('_', ' ')}"
              + (f"; lower cost: {res['cheaper_in_cost'].replace('_', ' ')}" if res["cheaper_in_cost"] else ""))


# The cost model's fields and the flags that set them (a field a --topology gave is named as a field).
COST_FLAGS = {"nodes": "--nodes", "lower_switches": "--lower-switches", "upper_switches": "--upper-switches",
              "ocs_fraction": "--ocs-fraction", "ocs_switches": "--ocs-switches",
              "ocs_switch_ports": "--ocs-switch-ports", "eps_switch_power_W": "--eps-switch-power",
              "eps_nic_power_W": "--eps-nic-power", "ocs_nic_power_W": "--ocs-nic-power",
              "ocs_switch_power_W": "--ocs-switch-power", "eps_switch_price": "--eps-switch-price",
              "eps_nic_price": "--eps-nic-price", "ocs_nic_price": "--ocs-nic-price",
              "ocs_switch_price": "--ocs-switch-price"}
TOPOLOGY_FIELDS = ("nodes", "lower_switches", "upper_switches", "ocs_fraction")
