"""What the same GPU work would have cost bought another way (issue 13, DESIGN 6). Pure.

Inputs are what the ledger says a scope (a run, or a team's month) used: per instance type its
on-demand equivalent L (ListCost, split exactly as cost) and its GPU-hours H; outputs are money
in the scope's currency, each beside the assumptions that produced it.

- spot = sum over types of L x r_spot x (1 + rework). r_spot = spot / on-demand price of the
  type from the price catalogue (refreshed, else the shipped snapshot), else the configured
  ratio. An interruption hits a node at
  `rate` per node-hour (the type's band: share of instances interrupted per month / 730) and
  loses half a checkpoint interval plus the restart: rework = rate x loss hours, so expected
  interruptions = node-hours x rate and rework GPU-hours = H x rate x loss.
- reserved (1y, 3y; no upfront, all upfront) = L x r_term / u: the commitment is paid whether
  used or not, so covering the work at the team's historical utilisation u (mean / peak GPUs
  in use over the window) buys 1/u as many committed hours.
- on-prem = H / u x TCO per GPU-hour at full use, u the team's own utilisation (as for reserved,
  so a team's figure is the same whoever looks; the cluster's figure, H / u_cluster x TCO, is
  given beside it to those who see the whole cluster), where TCO per node-month = capex /
  amortisation months + watts x GPUs x PUE x 730 h / 1000 x $/kWh + rack + network + staff.
  Break-even utilisation = TCO per GPU-hour / what a used GPU-hour cost (actual / H): above it,
  owning is cheaper than what was paid.

When some of the scope's usage has no list price (no ListCost in the bill and no catalogue
price: `unpriced_cost`), L is unknown, so on demand, its savings, spot and reserved (all priced
from L) are null with `unknown_reason` rather than figures computed from a stand-in; on
premises is priced from GPU-hours and stays.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

HOURS_PER_MONTH = Decimal(730)
CENT = Decimal("0.01")
RATIO = Decimal("0.0001")
TENTH = Decimal("0.1")
ZERO = Decimal(0)
ONE = Decimal(1)
RESERVED_OPTIONS = ("no_upfront", "all_upfront")


@dataclass(frozen=True)
class TypeUsage:
    """The part of a scope on one instance type (instance_type "" when unknown)."""

    provider: str
    instance_type: str
    region: str
    on_demand: Decimal
    gpu_hours: Decimal
    gpus_per_node: int
    # Cost of the type's usage with no list price in the bill or the catalogue (list_cost
    # `unpriced`): its on-demand equivalent is unknown.
    unpriced: Decimal = Decimal(0)
    # From the price catalogue (refreshed, else the snapshot): spot / on-demand, reserved term
    # key -> committed / on-demand, the published interruption band, and the figures with
    # their sources (PriceQuote.body) to show beside the comparison.
    spot_ratio: Decimal | None = None
    reserved_ratios: Mapping[str, Decimal] = field(default_factory=dict)
    interruption_band: str | None = None
    prices: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class MeasuredPower:
    """GPU energy measured (DCGM) for the scope: the on-prem comparison's power then uses the
    measured kWh per GPU-hour instead of the nameplate watts (finops.energy)."""

    kwh: Decimal
    gpu_hours: Decimal

    @property
    def kwh_per_gpu_hour(self) -> Decimal:
        return self.kwh / self.gpu_hours


@dataclass(frozen=True)
class Assumptions:
    spot_price_ratio: Decimal
    interruption_bands: Mapping[str, Decimal]
    family_bands: Mapping[str, str]
    default_band: str
    checkpoint_interval_minutes: Decimal
    restart_minutes: Decimal
    notice_seconds: Mapping[str, int]
    reserved_ratios: Mapping[str, Decimal]
    node_capex: Decimal
    amortisation_months: int
    gpus_per_node: int
    watts_per_gpu: Decimal
    pue: Decimal
    price_per_kwh: Decimal
    rack_per_node_month: Decimal
    network_per_node_month: Decimal
    staff_per_node_month: Decimal
    currency: str
    utilisation_window_days: int = 90
    recommendation_percentile: int = 10
    # One line per stored value that failed validation and was replaced by its default.
    warnings: tuple[str, ...] = ()

    def band_of(self, instance_type: str, region: str, published: str | None = None) -> str:
        """Finance's band for the family (and region), else the published one, else the
        default."""
        family = instance_type.split(".")[0].split("-")[0].lower()
        return (
            self.family_bands.get(f"{family}:{region}")
            or self.family_bands.get(family)
            or (published if published in self.interruption_bands else None)
            or self.default_band
        )

    def interruption_rate(
        self, instance_type: str, region: str, published: str | None = None
    ) -> Decimal:
        """Interruptions per node-hour: the band's monthly share / 730 hours."""
        band = self.band_of(instance_type, region, published)
        return Decimal(self.interruption_bands.get(band, ZERO)) / HOURS_PER_MONTH

    @property
    def loss_hours(self) -> Decimal:
        """Work lost per interruption: half a checkpoint interval plus the restart."""
        return (self.checkpoint_interval_minutes / 2 + self.restart_minutes) / 60

    @property
    def node_month_tco(self) -> Decimal:
        return self.node_month_tco_at(None)

    def node_month_tco_at(self, kwh_per_gpu_hour: Decimal | None) -> Decimal:
        """TCO per node-month; power from the measured kWh per GPU-hour when given, else the
        nameplate watts per GPU."""
        per_gpu_hour = self.watts_per_gpu / 1000 if kwh_per_gpu_hour is None else kwh_per_gpu_hour
        power_kwh = per_gpu_hour * self.gpus_per_node * self.pue * HOURS_PER_MONTH
        return (
            self.node_capex / self.amortisation_months
            + power_kwh * self.price_per_kwh
            + self.rack_per_node_month
            + self.network_per_node_month
            + self.staff_per_node_month
        )

    @property
    def gpu_hour_tco(self) -> Decimal:
        """On-prem cost of one GPU-hour at 100 % utilisation."""
        return self.gpu_hour_tco_at(None)

    def gpu_hour_tco_at(self, kwh_per_gpu_hour: Decimal | None) -> Decimal:
        return self.node_month_tco_at(kwh_per_gpu_hour) / (self.gpus_per_node * HOURS_PER_MONTH)


def unknown_reason(usage: Sequence[TypeUsage]) -> str | None:
    """Why the on-demand figure is unknown, naming each type nothing could price; None when
    every part of the usage is priced."""
    missing = sorted(
        {(u.provider, u.instance_type or "an unknown instance type") for u in usage if u.unpriced}
    )
    if not missing:
        return None
    names = ", ".join(f"{name} ({provider})" for provider, name in missing)
    return (
        f"no list price for {names}: none in the bill (ListCost), the refreshed prices or the "
        "price snapshot; its on-demand cost, and the spot and reserved prices derived from it, "
        "are unknown"
    )


def money(value: Decimal) -> str:
    return str(value.quantize(CENT, rounding=ROUND_HALF_EVEN))


def known_money(value: Decimal, known: bool) -> str | None:
    return money(value) if known else None


def ratio(value: Decimal | None) -> str | None:
    return None if value is None else str(value.quantize(RATIO, rounding=ROUND_HALF_EVEN))


def compare(
    *,
    actual: Decimal,
    on_demand_estimated: Decimal,
    mix: Mapping[str, Decimal],
    usage: Sequence[TypeUsage],
    assumptions: Assumptions,
    team_utilisation: Decimal | None,
    cluster_utilisation: Decimal | None,
    currency: str,
    on_prem_rate: Decimal | None = ONE,
    measured: MeasuredPower | None = None,
    peak_gpus: Decimal | None = None,
) -> dict[str, Any]:
    """The pricing body of DESIGN section 7 (money as decimal strings, to the cent).
    `on_prem_rate` converts the on-prem assumptions' currency to the scope's (None: no rate,
    so on premises is unknown, and says why). `measured`: the scope's measured GPU energy, whose
    kWh per GPU-hour the on-prem power uses instead of the nameplate watts. `peak_gpus`: the
    team's peak day's GPUs in use, the size of the reservation priced (said beside it: at a low
    utilisation a reservation costs more than on demand, and the body says so)."""
    if measured is not None and not (measured.gpu_hours > 0 and measured.kwh > 0):
        measured = None
    kwh_per_gpu_hour = measured.kwh_per_gpu_hour if measured is not None else None
    on_demand = sum((u.on_demand for u in usage), ZERO)
    unpriced = sum((u.unpriced for u in usage), ZERO)
    known = unpriced == 0
    gpu_hours = sum((u.gpu_hours for u in usage), ZERO)
    reason = unknown_reason(usage)
    spot_cost, interruptions, rework = ZERO, ZERO, ZERO
    spot_rows = []
    # Types whose spot or term price is the configured ratio (no catalogue figure): those
    # figures are estimates, and say so.
    spot_estimated = sorted(
        {u.instance_type for u in usage if u.spot_ratio is None and u.on_demand}
    )
    for u in usage:
        r_spot = u.spot_ratio if u.spot_ratio is not None else assumptions.spot_price_ratio
        rate = assumptions.interruption_rate(u.instance_type, u.region, u.interruption_band)
        rework_fraction = rate * assumptions.loss_hours
        spot_cost += u.on_demand * r_spot * (1 + rework_fraction)
        interruptions += u.gpu_hours / max(u.gpus_per_node, 1) * rate
        rework += u.gpu_hours * rework_fraction
        spot_rows.append(
            {
                "instance_type": u.instance_type,
                "band": assumptions.band_of(u.instance_type, u.region, u.interruption_band),
                "interruptions_per_node_hour": str(rate.quantize(Decimal("0.0000001"))),
                "spot_ratio": ratio(r_spot),
                "spot_ratio_source": "catalogue" if u.spot_ratio is not None else "assumption",
            }
        )
    u_team = team_utilisation if team_utilisation else ONE
    reserved: dict[str, dict[str, Any]] = {}
    for term in ("1y", "3y"):
        costs = {}
        estimated: set[str] = set()
        for option in RESERVED_OPTIONS:
            key = f"{term}_{option}"
            total = ZERO
            for u in usage:
                r = u.reserved_ratios.get(key)
                if r is None:
                    r = assumptions.reserved_ratios.get(key, ONE)
                    if u.on_demand:
                        estimated.add(u.instance_type)
                total += u.on_demand * Decimal(r)
            costs[option] = total / u_team
        dearer = known and costs["no_upfront"] > on_demand
        reserved[f"reserved_{term}"] = {
            "cost": known_money(costs["no_upfront"], known),
            "no_upfront": known_money(costs["no_upfront"], known),
            "all_upfront": known_money(costs["all_upfront"], known),
            "utilisation": ratio(u_team),
            "peak_gpus": str(peak_gpus.quantize(TENTH)) if peak_gpus is not None else None,
            "dearer_than_on_demand": dearer,
            "basis": _reserved_basis(term, u_team, peak_gpus, dearer),
            "estimated": bool(estimated),
            "estimated_types": sorted(estimated),
            "unknown_reason": reason,
        }
    if on_prem_rate is None:
        on_prem: dict[str, Any] = {
            "cost": None, "utilisation": ratio(team_utilisation or ONE),
            "utilisation_basis": "team", "cluster": None, "break_even_utilisation": None,
            "unknown_reason": f"no FX rate from {assumptions.currency} (the on-prem "
                              f"assumptions) to {currency}",
        }  # fmt: skip
    else:
        on_prem = _on_prem(
            gpu_hours=gpu_hours, actual=actual,
            tco=assumptions.gpu_hour_tco_at(kwh_per_gpu_hour) * on_prem_rate,
            team_utilisation=team_utilisation, cluster_utilisation=cluster_utilisation,
        )  # fmt: skip
    alternatives = {} if on_prem["cost"] is None else {"on_prem": Decimal(on_prem["cost"])}
    if known:
        alternatives |= {
            "on_demand": on_demand,
            "spot": spot_cost,
            "reserved_1y": Decimal(reserved["reserved_1y"]["cost"]),
            "reserved_3y": Decimal(reserved["reserved_3y"]["cost"]),
        }
    best: str | None = "on_demand" if known else None
    if gpu_hours and alternatives:
        best = min(alternatives, key=lambda k: (alternatives[k], k))
    return {
        "currency": currency,
        "actual": money(actual),
        "gpu_hours": str(gpu_hours.quantize(Decimal("0.000001"))),
        "on_demand": {
            "cost": known_money(on_demand, known),
            "savings": known_money(on_demand - actual, known),
            "estimated": money(on_demand_estimated),
            "unpriced_cost": money(unpriced),
            "unknown_reason": reason,
        },
        "spot": {
            "cost": known_money(spot_cost, known),
            "estimated": bool(spot_estimated),
            "estimated_types": spot_estimated,
            "unknown_reason": reason,
            "expected_interruptions": float(interruptions.quantize(Decimal("0.0001"))),
            "rework_hours": float(rework.quantize(Decimal("0.0001"))),
        },
        **reserved,
        "on_prem": on_prem,
        "best_alternative": best,
        "mix": {
            kind: money(mix.get(kind, ZERO))
            for kind in ("on_demand", "spot", "commitment", "other")
        },
        "assumptions": _assumptions_body(
            assumptions, spot_rows, team_utilisation, cluster_utilisation, measured
        ),
        # The catalogue figures behind the spot and reserved ratios (and behind on-demand
        # estimates), each with its region and source.
        "prices": [dict(u.prices) for u in usage if u.prices],
    }


def _reserved_basis(term: str, u: Decimal, peak_gpus: Decimal | None, dearer: bool) -> str:
    """What the reserved figure buys, in words: a reservation sized to the team's peak day,
    paid every hour, of which the team used u."""
    size = f"the team's peak day ({peak_gpus.quantize(TENTH)} GPUs)" if peak_gpus else "its use"
    text = (
        f"reserved for {size} every hour of the {term.replace('y', '-year')} term; the team "
        f"used {(u * 100).quantize(ONE)} % of it"
    )
    if dearer:
        text += (
            ": at that utilisation the reservation costs more than on demand; a commitment "
            "sized to the steady part of the use (the commitment advice) costs less"
        )
    return text


def _on_prem(
    *,
    gpu_hours: Decimal,
    actual: Decimal,
    tco: Decimal,
    team_utilisation: Decimal | None,
    cluster_utilisation: Decimal | None,
) -> dict[str, Any]:
    """On premises at the team's own utilisation: the same figure whoever looks (a lead or
    finance). The cluster's utilisation moves with other teams' use, so its figure is given
    beside it, labelled, to those who may see the whole cluster (cluster_utilisation given)."""
    u_team = team_utilisation or ONE
    break_even = (tco * gpu_hours / actual) if actual > 0 and gpu_hours > 0 else None
    cluster = None
    if cluster_utilisation:
        cluster = {
            "cost": money(gpu_hours / cluster_utilisation * tco),
            "utilisation": ratio(cluster_utilisation),
        }
    return {
        "cost": money(gpu_hours / u_team * tco),
        "utilisation": ratio(u_team),
        "utilisation_basis": "team",
        "cluster": cluster,
        "break_even_utilisation": float(break_even.quantize(RATIO)) if break_even else None,
        "unknown_reason": None,
    }


def _assumptions_body(
    a: Assumptions,
    spot_rows: list[dict[str, Any]],
    team_utilisation: Decimal | None,
    cluster_utilisation: Decimal | None,
    measured: MeasuredPower | None = None,
) -> dict[str, Any]:
    per_gpu_hour = measured.kwh_per_gpu_hour if measured is not None else None
    return {
        "currency": a.currency,
        "warnings": list(a.warnings),
        "spot": {
            "default_spot_price_ratio": ratio(a.spot_price_ratio),
            "interruption_bands": {k: str(v) for k, v in a.interruption_bands.items()},
            "default_band": a.default_band,
            "checkpoint_interval_minutes": str(a.checkpoint_interval_minutes),
            "restart_minutes": str(a.restart_minutes),
            "loss_per_interruption_hours": ratio(a.loss_hours),
            "notice_seconds": dict(a.notice_seconds),
            "by_instance_type": spot_rows,
        },
        "reserved": {
            "ratios": {k: str(v) for k, v in a.reserved_ratios.items()},
            "team_utilisation": ratio(team_utilisation),
            "utilisation_window_days": a.utilisation_window_days,
            "method": "on-demand equivalent x committed ratio / team utilisation",
        },
        "on_prem": {
            "node_capex": money(a.node_capex),
            "amortisation_months": a.amortisation_months,
            "gpus_per_node": a.gpus_per_node,
            "watts_per_gpu": str(a.watts_per_gpu),
            "pue": str(a.pue),
            "price_per_kwh": str(a.price_per_kwh),
            "rack_per_node_month": money(a.rack_per_node_month),
            "network_per_node_month": money(a.network_per_node_month),
            "staff_per_node_month": money(a.staff_per_node_month),
            # "measured": the scope's DCGM kWh per GPU-hour replaces watts_per_gpu / 1000.
            "power_basis": "measured" if measured is not None else "nameplate",
            "kwh_per_gpu_hour": (
                str(per_gpu_hour.quantize(Decimal("0.000001"), rounding=ROUND_HALF_EVEN))
                if per_gpu_hour is not None
                else str(a.watts_per_gpu / 1000)
            ),
            "measured_gpu_kwh": str(measured.kwh) if measured is not None else None,
            "measured_gpu_hours": (
                str(measured.gpu_hours.quantize(Decimal("0.000001"))) if measured else None
            ),
            "node_month_tco": money(a.node_month_tco_at(per_gpu_hour)),
            "gpu_hour_tco": str(a.gpu_hour_tco_at(per_gpu_hour).quantize(Decimal("0.0001"))),
            "cluster_utilisation": ratio(cluster_utilisation),
        },
    }
