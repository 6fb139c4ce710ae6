"""Construction cost and power of a supplemental OCS network versus a fat-tree EPS upgrade (003 section 5).

The paper compares three networks over ``n`` nodes on a two-level EPS tree
of ``k`` lower and ``l`` upper switches:

(1) EPS only:      ``n EPS_NIC + (k + l) EPS_SW``
(2) fat tree:      ``n EPS_NIC + 2k EPS_SW``   (the upper level needs ``k`` switches)
(3) hybrid:        ``(n + n/2) EPS_NIC + (k + l) EPS_SW + n/2 OCS_NIC + OCS_NET``
(4) = (2) - (1):   ``(k - l) EPS_SW``           extra for the fat tree
(5) = (3) - (1):   ``n/2 EPS_NIC + n/2 OCS_NIC + OCS_NET``  extra for the hybrid

where half of the nodes (``n/2`` rounded up: 328 of TSUBAME's 655) become
OCS nodes and get a second EPS NIC (trunked, the fat EPS link of "Ours")
plus an OCS NIC. Each symbol is a cost in one currency *or* a power in
watts; :func:`network_costs` evaluates the equations for power always and
for price when all prices are given. The defaults are the paper's TSUBAME
example: 6 lower and 2 upper 288-port InfiniBand switches of 2,500 W, 11 W
per added NIC, four 190-port OCS switches of 80 W.
"""

from __future__ import annotations

import math
import sys
from dataclasses import asdict, dataclass

from topoplan.core.errors import TopoplanError
from topoplan.core.topology import MAX_NODES, TreeTopology

__all__ = ["PRICE_FIELDS", "CostParams", "params_from_topology", "network_costs"]

PRICE_FIELDS = ("eps_switch_price", "eps_nic_price", "ocs_nic_price", "ocs_switch_price")
POWER_FIELDS = ("eps_switch_power_W", "eps_nic_power_W", "ocs_nic_power_W", "ocs_switch_power_W")


@dataclass(frozen=True)
class CostParams:
    """Parameters of 003's cost model (defaults: the TSUBAME example).

    ``ocs_fraction`` of the nodes become OCS nodes (``ceil``); ``ocs_switches``
    OCS switches form ``OCS_NET`` (0 = as many ``ocs_switch_ports``-port
    switches as the OCS nodes need). Prices are optional (None = unknown).

    Parameters
    ----------
    nodes, lower_switches, upper_switches : int
        ``n``, ``k`` and ``l`` of the equations.
    ocs_fraction : float
        Share of the nodes that become OCS nodes.
    ocs_switches, ocs_switch_ports : int
        OCS switches (0: enough of ``ocs_switch_ports`` ports each).
    eps_switch_power_W, eps_nic_power_W, ocs_nic_power_W, ocs_switch_power_W : float
        Power of each part, watts.
    eps_switch_price, eps_nic_price, ocs_nic_price, ocs_switch_price : float or None
        Prices, all or none.
    currency : str
        Label of the prices.

    References
    ----------
    003 section 5 (equations (1)-(5), the TSUBAME example).

    Examples
    --------
    >>> p = CostParams()
    >>> p.ocs_nodes, p.n_ocs_switches, p.has_prices()
    (328, 4, False)
    >>> CostParams(upper_switches=8).validate()
    Traceback (most recent call last):
    ...
    topoplan.core.errors.TopoplanError: field 'upper_switches': 8 upper switches exceed the 6 lower ones; the fat tree of eq. (2) has k upper switches
    """

    nodes: int = 655
    lower_switches: int = 6
    upper_switches: int = 2
    ocs_fraction: float = 0.5
    ocs_switches: int = 4
    ocs_switch_ports: int = 190
    eps_switch_power_W: float = 2500.0
    eps_nic_power_W: float = 11.0
    ocs_nic_power_W: float = 11.0
    ocs_switch_power_W: float = 80.0
    eps_switch_price: float | None = None
    eps_nic_price: float | None = None
    ocs_nic_price: float | None = None
    ocs_switch_price: float | None = None
    currency: str = ""

    @property
    def ocs_nodes(self) -> int:
        """Nodes on the OCS: ``ceil(nodes * ocs_fraction)`` (655 / 2 -> 328)."""
        return int(math.ceil(self.nodes * self.ocs_fraction - 1e-9))

    @property
    def n_ocs_switches(self) -> int:
        if self.ocs_switches > 0:
            return self.ocs_switches
        return int(math.ceil(self.ocs_nodes / self.ocs_switch_ports)) if self.ocs_nodes else 0

    def has_prices(self) -> bool:
        return all(getattr(self, f) is not None for f in PRICE_FIELDS)

    def validate(self) -> None:
        for f in ("nodes", "lower_switches"):
            if getattr(self, f) < 1:
                raise TopoplanError(f"field '{f}': must be at least 1, got {getattr(self, f)}")
        if self.upper_switches < 1:
            raise TopoplanError(f"field 'upper_switches': must be at least 1 (the EPS tree has a top), got "
                                f"{self.upper_switches}")
        if self.ocs_switches < 0:
            raise TopoplanError(f"field 'ocs_switches': must be non-negative (0: enough ocs_switch_ports "
                                f"switches), got {self.ocs_switches}")

        if self.nodes > MAX_NODES:
            raise TopoplanError(f"field 'nodes': {self.nodes:,} is over the limit of {MAX_NODES:,}")
        if self.lower_switches > self.nodes:
            raise TopoplanError(f"field 'lower_switches': {self.lower_switches} edge switches for {self.nodes} nodes; "
                                "every edge switch needs at least one node")
        if self.upper_switches > self.lower_switches:
            raise TopoplanError(f"field 'upper_switches': {self.upper_switches} upper switches exceed the "
                                f"{self.lower_switches} lower ones; the fat tree of eq. (2) has k upper switches")
        if not 0 <= self.ocs_fraction <= 1:
            raise TopoplanError(f"field 'ocs_fraction': must be in [0, 1], got {self.ocs_fraction}")
        if self.ocs_switch_ports < 1:
            raise TopoplanError("field 'ocs_switch_ports': must be at least 1")
        for f in POWER_FIELDS + PRICE_FIELDS:
            v = getattr(self, f)
            if v is not None and not 0 <= v < float("inf"):
                raise TopoplanError(f"field '{f}': must be a finite non-negative number, got {v}")
        given = [f for f in PRICE_FIELDS if getattr(self, f) is not None]
        if given and len(given) < len(PRICE_FIELDS):
            missing = [f for f in PRICE_FIELDS if getattr(self, f) is None]
            raise TopoplanError(f"field '{missing[0]}': prices are all-or-nothing; give "
                                f"{', '.join('--' + m.replace('_', '-') for m in missing)} too")


def params_from_topology(topo, **overrides) -> CostParams:
    """Cost parameters of a two-level tree: ``n`` nodes, ``k`` edge switches, one top switch.

    The OCS fraction is the topology's OCS node share when it has an OCS
    (else the default 1/2); ``overrides`` replace any field.

    Parameters
    ----------
    topo : TreeTopology
    **overrides
        Fields of :class:`CostParams`.

    Returns
    -------
    CostParams

    Raises
    ------
    TopoplanError
        For a topology that is not a two-level tree.

    Examples
    --------
    >>> from topoplan.core.topology_io import load_topology
    >>> p = params_from_topology(load_topology("paper003"))
    >>> (p.nodes, p.lower_switches, p.upper_switches, p.ocs_nodes)
    (64, 4, 1, 32)
    """
    if not isinstance(topo, TreeTopology):
        raise TopoplanError(f"cost model: needs a two-level tree topology, got {topo.kind}")
    base = {"nodes": topo.n_nodes, "lower_switches": topo.n_switches, "upper_switches": 1}
    if topo.ocs is not None:
        base["ocs_fraction"] = len(topo.ocs.nodes) / topo.n_nodes
    base.update(overrides)
    return CostParams(**base)


def _evaluate(p: CostParams, sw: float, nic: float, onic: float, osw: float) -> dict:
    """Equations (1)-(5) with one unit set (watts or prices)."""
    n, k, l, h = p.nodes, p.lower_switches, p.upper_switches, p.ocs_nodes
    ocs_net = p.n_ocs_switches * osw
    eps_only = n * nic + (k + l) * sw                       # (1)
    fat_tree = n * nic + 2 * k * sw                          # (2)
    hybrid = (n + h) * nic + (k + l) * sw + h * onic + ocs_net  # (3)
    return {"eps_only": eps_only, "fat_tree": fat_tree, "hybrid": hybrid,
            "fat_tree_extra": (k - l) * sw,                  # (4) = (2) - (1)
            "hybrid_extra": h * nic + h * onic + ocs_net}    # (5) = (3) - (1)


def network_costs(p: CostParams) -> dict:
    """Evaluate 003's equations (1)-(5) for power (and price when all prices are given).

    Parameters
    ----------
    p : CostParams

    Returns
    -------
    dict
        ``fat_tree_extra`` and ``hybrid_extra`` (each ``power_W``,
        ``cost`` when priced, ``formula`` the worked power sum), the totals
        ``eps_only``, ``fat_tree``, ``hybrid`` (eqs. 1-3, same keys), the
        counts ``ocs_nodes``, ``added_upper_switches``, ``ocs_switches``,
        ``cheaper_in_power`` (``hybrid`` or ``fat_tree``), ``cheaper_in_cost``
        (None without prices) and ``parameters``.

    Raises
    ------
    TopoplanError
        For invalid parameters (:meth:`CostParams.validate`), or finite ones so large that a total
        overflows.

    References
    ----------
    003 section 5: 10,000 W for the fat tree vs 7,536 W for the hybrid on TSUBAME.

    Examples
    --------
    >>> r = network_costs(CostParams())
    >>> r["fat_tree_extra"]["power_W"], r["hybrid_extra"]["power_W"]
    (10000.0, 7536.0)
    >>> r["hybrid_extra"]["formula"]
    '328 x 11 W + 328 x 11 W + 4 x 80 W = 7,536 W'
    """
    p.validate()
    watts = _evaluate(p, p.eps_switch_power_W, p.eps_nic_power_W, p.ocs_nic_power_W, p.ocs_switch_power_W)
    prices = (_evaluate(p, p.eps_switch_price, p.eps_nic_price, p.ocs_nic_price, p.ocs_switch_price)
              if p.has_prices() else None)
    for what, fields, totals in (("power", POWER_FIELDS, watts), ("price", PRICE_FIELDS, prices)):
        bad = [k for k, v in (totals or {}).items() if not math.isfinite(v)]
        if bad:   # finite inputs whose sums overflow: a printed 'inf' would be no answer
            big = max(fields, key=lambda f: getattr(p, f))
            raise TopoplanError(f"field '{big}': {getattr(p, big):g} makes the {what} of the "
                                f"{bad[0].replace('_', ' ')} network overflow (over {sys.float_info.max:.3g})")
    out: dict = {}
    for key in ("eps_only", "fat_tree", "hybrid", "fat_tree_extra", "hybrid_extra"):
        out[key] = {"power_W": float(watts[key])}
        if prices is not None:
            out[key]["cost"] = float(prices[key])
    h, added, nsw = p.ocs_nodes, p.lower_switches - p.upper_switches, p.n_ocs_switches
    out["fat_tree_extra"]["formula"] = (f"({p.lower_switches} - {p.upper_switches}) x {_g(p.eps_switch_power_W)} W"
                                        f" = {_g(watts['fat_tree_extra'])} W")
    out["hybrid_extra"]["formula"] = (f"{h} x {_g(p.eps_nic_power_W)} W + {h} x {_g(p.ocs_nic_power_W)} W + "
                                      f"{nsw} x {_g(p.ocs_switch_power_W)} W = {_g(watts['hybrid_extra'])} W")
    out["ocs_nodes"] = h
    out["added_upper_switches"] = added
    out["ocs_switches"] = nsw
    out["cheaper_in_power"] = "hybrid" if watts["hybrid_extra"] < watts["fat_tree_extra"] else "fat_tree"
    out["cheaper_in_cost"] = (None if prices is None else
                              "hybrid" if prices["hybrid_extra"] < prices["fat_tree_extra"] else "fat_tree")
    out["parameters"] = asdict(p)
    return out


def _g(x: float) -> str:
    """2500 -> '2,500'; 10.5 -> '10.5'."""
    return f"{x:,.0f}" if float(x).is_integer() else f"{x:,g}"
