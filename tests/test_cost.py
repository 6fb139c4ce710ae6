import json
from dataclasses import replace

import pytest
import typer
from typer.testing import CliRunner

from topoplan.analysis.cost import CostParams, network_costs, params_from_topology
from topoplan.core.errors import TopoplanError
from topoplan.core.topology_io import load_topology


def _cli(*args):
    from topoplan.cli.commands.cost import register

    app = typer.Typer()
    register(app)
    app.command("noop", hidden=True)(lambda: None)  # keep `cost` a named sub-command
    return CliRunner().invoke(app, ["cost", *map(str, args)])


def test_tsubame_example_matches_paper():
    """003 section 5: fat tree 4 x 2,500 W = 10,000 W; hybrid 2 x (328 x 11 W) + 4 x 80 W = 7,536 W."""
    r = network_costs(CostParams())
    assert r["ocs_nodes"] == 328
    assert r["added_upper_switches"] == 4
    assert r["fat_tree_extra"]["power_W"] == 10000.0
    assert r["hybrid_extra"]["power_W"] == 7536.0
    assert r["cheaper_in_power"] == "hybrid"
    assert r["cheaper_in_cost"] is None
    assert "cost" not in r["fat_tree_extra"] and "cost" not in r["hybrid_extra"]
    assert r["fat_tree_extra"]["formula"].endswith("= 10,000 W")
    assert r["hybrid_extra"]["formula"].endswith("= 7,536 W")


def test_extras_are_differences_of_totals():
    """Eq. (4) = (2) - (1) and eq. (5) = (3) - (1), for power and price, on non-default numbers."""
    p = CostParams(nodes=1001, lower_switches=9, upper_switches=3, ocs_fraction=0.25, ocs_switches=0,
                   ocs_switch_ports=64, eps_switch_power_W=1800, eps_nic_power_W=9, ocs_nic_power_W=4,
                   ocs_switch_power_W=55, eps_switch_price=20000, eps_nic_price=700, ocs_nic_price=1500,
                   ocs_switch_price=90000)
    r = network_costs(p)
    assert r["ocs_nodes"] == 251                      # ceil(1001 / 4)
    assert r["ocs_switches"] == 4                     # ceil(251 / 64)
    for unit in ("power_W", "cost"):
        assert r["fat_tree_extra"][unit] == pytest.approx(r["fat_tree"][unit] - r["eps_only"][unit])
        assert r["hybrid_extra"][unit] == pytest.approx(r["hybrid"][unit] - r["eps_only"][unit])
    assert r["fat_tree_extra"]["power_W"] == 6 * 1800
    assert r["hybrid_extra"]["power_W"] == 251 * 9 + 251 * 4 + 4 * 55
    assert r["hybrid_extra"]["cost"] == 251 * 700 + 251 * 1500 + 4 * 90000
    assert r["cheaper_in_cost"] == "fat_tree"         # 912,200 vs 120,000
    assert r["cheaper_in_power"] == "hybrid"


def test_power_winner_flips_with_cheap_switches():
    r = network_costs(replace(CostParams(), eps_switch_power_W=1000.0))
    assert r["fat_tree_extra"]["power_W"] == 4000.0
    assert r["cheaper_in_power"] == "fat_tree"


@pytest.mark.parametrize("kw, field", [
    (dict(upper_switches=7), "upper_switches"),
    (dict(upper_switches=0), "field 'upper_switches': must be at least 1"),
    (dict(ocs_switches=-1), "field 'ocs_switches': must be non-negative"),
    (dict(ocs_fraction=1.5), "ocs_fraction"),
    (dict(nodes=0), "nodes"),
    (dict(eps_nic_power_W=-1.0), "eps_nic_power_W"),
    (dict(eps_switch_price=1.0), "eps_nic_price"),
])
def test_bad_parameters_name_the_field(kw, field):
    with pytest.raises(TopoplanError, match=field):
        network_costs(CostParams(**kw))


@pytest.mark.parametrize("kw, message", [
    (dict(eps_switch_power_W=1e308, lower_switches=100),
     "field 'eps_switch_power_W': 1e.308 makes the power of the eps only"),
    (dict(eps_nic_power_W=1e306), "field 'eps_nic_power_W': 1e.306 makes the power of the eps only"),
    (dict(eps_switch_price=1e308, eps_nic_price=1e308, ocs_nic_price=1.0, ocs_switch_price=1.0),
     "field 'eps_switch_price': 1e.308 makes the price of the eps only"),
])
def test_totals_that_overflow_are_refused(kw, message):
    with pytest.raises(TopoplanError, match=message):
        network_costs(CostParams(**kw))


def test_params_from_topology():
    p = params_from_topology(load_topology("paper003", ["ocs.nodes_per_switch=4"]))
    assert (p.nodes, p.lower_switches, p.upper_switches, p.ocs_nodes) == (64, 4, 1, 16)
    r = network_costs(p)
    assert r["fat_tree_extra"]["power_W"] == 3 * 2500
    assert r["hybrid_extra"]["power_W"] == 16 * 22 + 4 * 80
    with pytest.raises(TopoplanError, match="tree"):
        params_from_topology(load_topology("mesh10x10x10"))


def test_cli_json_default_is_tsubame():
    res = _cli("--json")
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert d["fat_tree_extra"]["power_W"] == 10000
    assert d["hybrid_extra"]["power_W"] == 7536
    assert d["parameters"]["nodes"] == 655


def test_cli_prices_give_cost_and_text_output():
    res = _cli("--json", "--eps-switch-price", 250000, "--eps-nic-price", 1000, "--ocs-nic-price", 2000,
               "--ocs-switch-price", 100000, "--currency", "USD")
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert d["fat_tree_extra"]["cost"] == 4 * 250000
    assert d["hybrid_extra"]["cost"] == 328 * 3000 + 4 * 100000
    txt = _cli("--nodes", 100, "-k", 4, "-l", 1)
    assert txt.exit_code == 0, txt.output
    assert "(4 - 1) x 2,500 W = 7,500 W" in txt.output
    assert "50 x 11 W + 50 x 11 W + 4 x 80 W = 1,420 W" in txt.output


def test_cli_missing_price_is_an_error():
    res = _cli("--eps-switch-price", 5)
    assert isinstance(res.exception, TopoplanError)
    assert "--eps-nic-price" in str(res.exception)
