"""The Prometheus text of /metrics, written by prometheus-client from finops.metrics.selectors.

Every metric is a gauge named finops_*; money gauges carry the currency as a label (a
figure is never summed across currencies) and are exact decimals. The names and labels
are a contract: deploy/grafana/finops.json queries them (tests/test_metrics.py checks it).

The text is written here, not by prometheus_client.generate_latest: that one prints every value
as a float in Go's style, so 1,234,567.89 USD becomes `1.23456789e+06` (a figure with an
exponent, and a float's rounding). Written here, a value is its exact decimal (`1234567.89`),
which the Prometheus text format allows (prometheus_client's own parser reads it in the tests).
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from finops.metrics.selectors import Metrics

IDLE = "idle"


def _add(family: GaugeMetricFamily, labels: list[str], value: Decimal | float | int) -> None:
    """A sample whose value stays the exact Decimal (written by metrics_text below); the
    client's stubs say float, which is what generate_latest would make of it."""
    family.add_metric(labels, value)  # type: ignore[arg-type]


def _cost_families(metrics: Metrics) -> Iterator[Metric]:
    cost = GaugeMetricFamily(
        "finops_amortised_cost",
        "Amortised cost (EffectiveCost, as attributed) of the month to date, by team, provider "
        "and category, in the bill's currency",
        labels=["team", "provider", "category", "month", "currency"],
    )
    idle = GaugeMetricFamily(
        "finops_idle_cost",
        "Amortised cost of idle GPU time (allocated to nobody's job), by owner team and provider",
        labels=["team", "provider", "month", "currency"],
    )
    for row in metrics.money.costs:
        _add(cost, [row.team, row.provider, row.category, row.month, row.currency], row.amount)
        if row.category == IDLE:
            _add(idle, [row.team, row.provider, row.month, row.currency], row.amount)
    invoiced = GaugeMetricFamily(
        "finops_invoiced_cost",
        "Invoiced cost (BilledCost, cash) of the month's settled bill lines, by provider and "
        "billing account (not split by team); finance only",
        labels=["provider", "account", "month", "currency"],
    )
    for i in metrics.money.invoiced:
        _add(invoiced, [i.provider, i.account, i.month, i.currency], i.amount)
    waste = GaugeMetricFamily(
        "finops_waste_cost",
        "Waste of the team's runs in the month by cause: rework, restart, abandoned, "
        "idle_in_allocation, and cancelled (apart: a cancellation may be a decision); rework "
        "and restart of runs without metrics are estimates",
        labels=["team", "month", "currency", "cause"],
    )
    for w in metrics.money.waste:
        _add(waste, [w.team, w.month, w.currency, w.cause], w.amount)
    yield from (cost, idle, invoiced, waste)


def _energy_families(metrics: Metrics) -> Iterator[Metric]:
    energy = GaugeMetricFamily(
        "finops_energy_kwh",
        "Energy of the team's runs in the month, kWh: GPU (measured by DCGM, else estimated from "
        "the GPU model's power) and facility (GPU x PUE)",
        labels=["team", "month", "scope"],
    )
    carbon = GaugeMetricFamily(
        "finops_carbon_kg",
        "kg CO2e of the team's runs' facility energy in the month (location-based grid intensity)",
        labels=["team", "month"],
    )
    for e in metrics.money.energy:
        _add(energy, [e.team, e.month, "gpu"], e.gpu_kwh)
        _add(energy, [e.team, e.month, "facility"], e.facility_kwh)
        if e.co2e_kg is not None:
            _add(carbon, [e.team, e.month], e.co2e_kg)
    yield from (energy, carbon)


def _budget_families(metrics: Metrics) -> Iterator[Metric]:
    labels = ["budget_id", "budget", "team", "period", "period_start", "currency"]
    amount = GaugeMetricFamily("finops_budget_amount", "The budget's amount", labels=labels)
    spent = GaugeMetricFamily(
        "finops_budget_spent", "Amortised spend of the budget's period to date", labels=labels
    )
    forecast = GaugeMetricFamily(
        "finops_budget_forecast",
        "Forecast spend at the period's end (an estimate: spend to date + trailing daily rate "
        "x days left)",
        labels=labels,
    )
    for b in metrics.money.budgets:
        values = [str(b.budget_id), b.name, b.team, b.period, b.period_start, b.currency]
        _add(amount, values, b.amount)
        _add(spent, values, b.actual)
        _add(forecast, values, b.forecast)
    yield from (amount, spent, forecast)


def _freshness_families(metrics: Metrics) -> Iterator[Metric]:
    fresh = metrics.freshness
    last_import = GaugeMetricFamily(
        "finops_last_import_timestamp_seconds",
        "When the newest successful import of each kind finished (Unix time, UTC)",
        labels=["kind"],
    )
    for kind, stamp in sorted(fresh.last_import.items()):
        _add(last_import, [kind], stamp)
    yield last_import
    last_attribution = GaugeMetricFamily(
        "finops_last_attribution_timestamp_seconds",
        "When the newest successful attribution finished (Unix time, UTC)",
    )
    if fresh.last_attribution is not None:
        _add(last_attribution, [], fresh.last_attribution)
    yield last_attribution
    stale = GaugeMetricFamily(
        "finops_month_stale",
        "1 when the month's ledger may lag its bill (attribution running, failed, never run "
        "or older than the bill's last change), else 0",
        labels=["month"],
    )
    for month, flag in sorted(fresh.stale.items()):
        _add(stale, [month], flag)
    yield stale
    count = sum(fresh.stale.values())
    yield GaugeMetricFamily(
        "finops_stale_months", "How many of the exposed months are stale", value=count
    )


class FinopsCollector(Collector):
    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        yield from _cost_families(self.metrics)
        yield from _energy_families(self.metrics)
        yield from _budget_families(self.metrics)
        yield from _freshness_families(self.metrics)


CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _escape_help(text: str) -> str:
    return text.replace("\\", r"\\").replace("\n", r"\n")


def _escape_label(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def fixed(value: object) -> str:
    """A sample's value in positional notation (never an exponent)."""
    if isinstance(value, Decimal | int):
        return format(Decimal(value), "f")
    return format(Decimal(repr(float(value))).normalize(), "f")  # type: ignore[arg-type]


def _lines(metric: Metric) -> Iterator[str]:
    yield f"# HELP {metric.name} {_escape_help(metric.documentation)}"
    yield f"# TYPE {metric.name} {metric.type}"
    for sample in metric.samples:
        labels = ",".join(f'{k}="{_escape_label(v)}"' for k, v in sample.labels.items())
        name = f"{sample.name}{{{labels}}}" if labels else sample.name
        yield f"{name} {fixed(sample.value)}"


def metrics_text(metrics: Metrics) -> bytes:
    """The exposition (text format 0.0.4) of `metrics`, in a registry of its own per scrape (the
    figures are the caller's: a lead's scrape holds their teams only)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(FinopsCollector(metrics))
    lines = [line for metric in registry.collect() for line in _lines(metric)]
    return ("\n".join(lines) + "\n").encode()
