"""Prices (issue 13): the shipped dated snapshot, refreshed prices in front of it, and the
catalogue price standing in for a missing ListCost."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from billing_ingest.models import CostLineItem, ImportBatch
from billing_ingest.money import MoneySum
from finops.attribution.models import AllocatedCost
from finops.attribution.services import attribution_month_run
from finops.pricing import prices, snapshot
from finops.pricing.models import InstancePrice

REQUIRED = {
    "aws": {"p4d", "p4de", "p5", "p5e", "p5en", "g5", "g6", "g6e"},
    "gcp": {"a2", "a3", "g2"},
    "azure": {"nd96asr", "nd96amsr", "nd96isr", "nc96ads"},
    "coreweave": {"gd"},
}
KINDS = ("1y_no_upfront", "1y_all_upfront", "3y_no_upfront", "3y_all_upfront")


def _family(provider: str, instance_type: str) -> str:
    name = instance_type.lower().removeprefix("standard_")
    return name.split(".")[0].split("-")[0].split("_")[0]


def test_the_snapshot_covers_every_family_the_issue_names():
    entries = snapshot.snapshot()["prices"]
    for provider, families in REQUIRED.items():
        mine = [e for e in entries if e["provider"] == provider]
        found = {_family(provider, e["instance_type"]) for e in mine}
        assert families <= found, (provider, families - found)


@pytest.mark.parametrize("entry", snapshot.snapshot()["prices"], ids=lambda e: e["instance_type"])
def test_every_figure_names_its_source_licence_and_date_or_says_why_not(entry):
    figures = [entry["on_demand_hourly"], entry["spot_hourly"], *(entry["reserved"] or {}).values()]
    known = [Decimal(v) for v in figures if v is not None]
    if not known:
        # No figure: a note says why (never an invented price).
        assert entry["note"]
        return
    assert entry["currency"] == "USD" and entry["unit"] == "instance-hour" and entry["region"]
    source = entry["source"]
    assert source["repository"] and source["path"] and len(source["commit"]) == 40
    assert source["url"].startswith("https://github.com/")
    assert entry["licence"]
    assert entry["date"] or entry["date_note"]
    assert all(value > 0 for value in known)
    on_demand = entry["on_demand_hourly"]
    if on_demand is not None:
        # Spot and commitments are discounts on on demand, in the source as in the bills.
        cheaper = [entry["spot_hourly"], *entry["reserved"].values()]
        assert all(Decimal(v) < Decimal(on_demand) for v in cheaper if v is not None)


@pytest.mark.django_db
def test_a_known_figure_reads_back_exactly():
    # tsaol/aws-gpu@2d0108c data/gpu_instances_raw.json, p5.48xlarge, us-east-1, linux.
    quote = prices.quote("AWS", "p5.48xlarge", "us-east-1")
    assert quote is not None
    assert quote.on_demand == Decimal("55.04")
    assert quote.hourly["3y_no_upfront"] == Decimal("23.77728")
    assert quote.ratio("3y_no_upfront") == Decimal("0.432")
    assert quote.interruption_band == "5-10%"
    # A region the snapshot does not list is priced from the one it does, and says so.
    elsewhere = prices.quote("aws", "p5.48xlarge", "eu-west-1")
    assert elsewhere is not None and elsewhere.regions["on_demand"] == "us-east-1"


@pytest.mark.django_db
def test_no_figure_means_no_quote():
    assert prices.quote("azure", "Standard_ND96isr_H100_v5", "eastus") is None
    assert prices.quote("aws", "m5.large", "us-east-1") is None


@pytest.mark.django_db
def test_a_refreshed_price_goes_in_front_of_the_snapshot_figure_by_figure():
    InstancePrice.objects.create(
        provider="aws", instance_type="p5.48xlarge", region="us-east-1", kind="on_demand",
        hourly=Decimal("50"), currency="USD", source="AWS Price List API (get_products)",
        fetched_at=dt.datetime(2026, 1, 5, 12, tzinfo=dt.UTC),
    )  # fmt: skip
    quote = prices.quote("aws", "p5.48xlarge", "us-east-1")
    assert quote is not None
    assert quote.on_demand == Decimal("50")
    assert quote.sources["on_demand"] == "AWS Price List API (get_products), fetched 2026-01-05"
    # Spot was not refreshed: the snapshot figure stays, with its own source.
    assert quote.hourly["spot"] == Decimal("28.106467")
    assert quote.sources["spot"].startswith("snapshot: tsaol/aws-gpu@2d0108c")
    # The ratio mixes the two honestly: 28.106467 / 50.
    assert quote.ratio("spot") == Decimal("28.106467") / Decimal("50")


@pytest.mark.django_db
def test_a_usage_line_without_list_cost_is_priced_from_the_catalogue():
    billing = ImportBatch.objects.create(
        kind="billing", format="focus", source="s", file_name="f", status="succeeded"
    )
    start = dt.datetime(2025, 6, 3, tzinfo=dt.UTC)
    CostLineItem.objects.create(
        batch=billing, source="s", billing_period=dt.date(2025, 6, 1), billing_period_start=start,
        provider_name="AWS", billing_account_id="1", billing_currency="USD",
        charge_period_start=start, charge_period_end=start + dt.timedelta(hours=2),
        charge_category="Usage", pricing_category="Standard", resource_name="gpu-1",
        x_instance_type="g6e.48xlarge", region_id="us-east-1", billed_cost=Decimal(60),
        effective_cost=Decimal(60), consumed_quantity=Decimal(2), consumed_unit="Hrs",
    )  # fmt: skip
    attribution_month_run(month=dt.date(2025, 6, 1))
    ledger = AllocatedCost.objects.all()
    # 2 instance-hours x 30.13118 (snapshot, g6e.48xlarge us-east-1) = 60.26236, an estimate.
    assert ledger.aggregate(s=MoneySum("list_cost"))["s"] == Decimal("60.26236")
    assert set(ledger.values_list("list_cost_source", flat=True)) == {"catalogue"}
