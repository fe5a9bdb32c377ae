"""Prices (issue 13): the shipped dated snapshot, refreshed prices in front of it, and the
catalogue price standing in for a missing ListCost."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest

from billing_ingest.models import CostLineItem, ImportBatch
from finops.attribution.models import AllocatedCost
from finops.attribution.services import attribution_month_run
from finops.core.money import MoneySum
from finops.pricing import prices, snapshot
from finops.pricing.models import InstancePrice

REQUIRED = {
    "aws": {"p4d", "p4de", "p5", "p5e", "p5en", "g5", "g6", "g6e"},
    "gcp": {"a2", "a3", "g2"},
    "azure": {
        "nd96asr",
        "nd96amsr",
        "nd96isr",
        "nc24ads",
        "nc48ads",
        "nc96ads",
        "nc40ads",
        "nc80adis",
    },
    "coreweave": {"gd"},
}
KINDS = ("1y_no_upfront", "1y_all_upfront", "3y_no_upfront", "3y_all_upfront")


def _family(provider: str, instance_type: str) -> str:
    name = instance_type.lower().removeprefix("standard_")
    return name.split(".")[0].split("-")[0].split("_")[0]


def test_the_snapshot_covers_every_family_the_issue_names() -> None:
    entries = snapshot.snapshot()["prices"]
    for provider, families in REQUIRED.items():
        mine = [e for e in entries if e["provider"] == provider]
        found = {_family(provider, e["instance_type"]) for e in mine}
        assert families <= found, (provider, families - found)


def test_every_family_the_issue_names_is_priced_except_p5e_and_nc_h100_v5() -> None:
    # Each family has at least one entry with an on-demand figure; p5e has none offline (AWS
    # sells it through Capacity Blocks), nor NC H100 v5 in a source pinned at a commit; their
    # entries' notes say so.
    entries = snapshot.snapshot()["prices"]
    families = {(e["provider"], _family(e["provider"], e["instance_type"])) for e in entries}
    priced = {
        (e["provider"], _family(e["provider"], e["instance_type"]))
        for e in entries
        if e["on_demand_hourly"] is not None
    }
    unpriced = families - priced
    assert unpriced == {("aws", "p5e"), ("azure", "nc40ads"), ("azure", "nc80adis")}


@pytest.mark.parametrize("entry", snapshot.snapshot()["prices"], ids=lambda e: e["instance_type"])
def test_every_figure_names_its_source_licence_and_date_or_says_why_not(
    entry: dict[str, Any],
) -> None:
    figures = [entry["on_demand_hourly"], entry["spot_hourly"], *(entry["reserved"] or {}).values()]
    known = [Decimal(v) for v in figures if v is not None]
    if not known:
        # No figure: a note says why (never an invented price).
        assert entry["note"]
        return
    assert entry["currency"] == "USD"
    assert entry["unit"] == "instance-hour"
    assert entry["region"]
    source = entry["source"]
    assert source["repository"]
    assert source["path"]
    assert len(source["commit"]) == 40
    # The URL pins the file at the commit, and upstream names the provider's API or page the
    # source read the prices from.
    assert source["url"] == (
        f"https://github.com/{source['repository']}/blob/{source['commit']}/{source['path']}"
    )
    assert source["upstream"]
    assert entry["licence"]
    # The date the source states, or why it states none; never after the snapshot was made.
    assert entry["date"] or entry["date_note"]
    made = dt.date.fromisoformat(snapshot.snapshot()["snapshot_date"])
    for key in ("date", "date_read"):
        if entry.get(key):
            assert dt.date.fromisoformat(entry[key]) <= made
    assert all(value > 0 for value in known)
    on_demand = entry["on_demand_hourly"]
    if on_demand is not None:
        # Spot and commitments are discounts on on demand, in the source as in the bills.
        cheaper = [entry["spot_hourly"], *entry["reserved"].values()]
        assert all(Decimal(v) < Decimal(on_demand) for v in cheaper if v is not None)


@pytest.mark.django_db
def test_a_known_figure_reads_back_exactly() -> None:
    # tsaol/aws-gpu@2d0108c data/gpu_instances_raw.json, p5.48xlarge, us-east-1, linux.
    quote = prices.quote("AWS", "p5.48xlarge", "us-east-1")
    assert quote is not None
    assert quote.on_demand == Decimal("55.04")
    assert quote.hourly["3y_no_upfront"] == Decimal("23.77728")
    assert quote.ratio("3y_no_upfront") == Decimal("0.432")
    assert quote.interruption_band == "5-10%"
    # A region the snapshot does not list is priced from the one it does, and says so.
    elsewhere = prices.quote("aws", "p5.48xlarge", "eu-west-1")
    assert elsewhere is not None
    assert elsewhere.regions["on_demand"] == "us-east-1"


@pytest.mark.django_db
def test_no_figure_means_no_quote() -> None:
    assert prices.quote("aws", "p5e.48xlarge", "us-east-1") is None
    assert prices.quote("aws", "m5.large", "us-east-1") is None


@pytest.mark.django_db
def test_a_refreshed_price_goes_in_front_of_the_snapshot_figure_by_figure() -> None:
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
def test_a_usage_line_without_list_cost_is_priced_from_the_catalogue() -> None:
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


@pytest.mark.django_db
def test_a_type_without_any_figure_says_no_published_price_in_snapshot_and_why() -> None:
    body = prices.price_body("aws", "p5e.48xlarge", "us-east-1")
    assert body is not None
    assert body["figures"] == []
    assert body["missing"] == list(prices.KINDS)
    (entry,) = [e for e in snapshot.snapshot()["prices"] if e["instance_type"] == "p5e.48xlarge"]
    assert body["missing_note"] == f"no published price in snapshot: {entry['note']}"


@pytest.mark.django_db
def test_a_type_with_some_figures_lists_only_the_missing_kinds() -> None:
    # p5en.48xlarge: on demand and spot in the snapshot, no reserved rate in its source.
    body = prices.price_body("aws", "p5en.48xlarge", "us-east-1")
    assert body is not None
    assert [f["kind"] for f in body["figures"]] == ["on_demand", "spot"]
    assert body["missing"] == [
        "1y_no_upfront", "1y_all_upfront", "3y_no_upfront", "3y_all_upfront"
    ]  # fmt: skip
    assert body["missing_note"].startswith("no published price in snapshot: ")
    # A fully priced type has nothing missing, and a type the snapshot lacks says so.
    full = prices.price_body("aws", "p5.48xlarge", "us-east-1")
    assert full is not None
    assert full["missing"] == []
    assert full["missing_note"] is None
    unknown = prices.price_body("aws", "m5.large", "us-east-1")
    assert unknown is not None
    assert unknown["missing_note"] == (
        "no published price in snapshot: the snapshot does not list this type"
    )
    assert prices.price_body("aws", "", "us-east-1") is None


@pytest.mark.django_db
def test_gcp_committed_use_is_the_sources_monthly_figure_over_730_hours() -> None:
    # Cyclenerd/google-cloud-pricing-cost-calculator@fd66b26 pricing.yml,
    # compute.instance.g2-standard-96.cost.us-central1: hour 8.003330296, hour_spot 4.499264,
    # month_1y 3680.73156336, month_3y 2629.0938028 (per month of 730 hours, the file's month).
    quote = prices.quote("gcp", "g2-standard-96", "us-central1")
    assert quote is not None
    assert quote.on_demand == Decimal("8.003330296")
    assert quote.hourly["spot"] == Decimal("4.499264")
    assert quote.hourly["1y_no_upfront"] == Decimal("3680.73156336") / 730
    assert quote.hourly["3y_no_upfront"] == Decimal("2629.0938028") / 730
    # A resource-based CUD is paid monthly: one price for both payment options.
    assert quote.hourly["1y_all_upfront"] == quote.hourly["1y_no_upfront"]
    assert quote.sources["1y_no_upfront"] == (
        "snapshot: Cyclenerd/google-cloud-pricing-cost-calculator@fd66b26 pricing.yml, 2026-07-30"
    )
    # A2 Ultra has no public committed-use price: only on demand and spot are known.
    ultra = prices.price_body("gcp", "a2-ultragpu-8g", "us-central1")
    assert ultra is not None
    assert [f["kind"] for f in ultra["figures"]] == ["on_demand", "spot"]
    assert "connect with your sales account team" in ultra["missing_note"]


@pytest.mark.django_db
def test_azure_and_coreweave_list_prices_read_back_with_their_sources() -> None:
    # coopslarhette/skypilot-catalog@20291d7 catalogs/v8/azure/vms.csv, eastus, Linux.
    h100 = prices.quote("azure", "Standard_ND96isr_H100_v5", "eastus")
    assert h100 is not None
    assert h100.on_demand == Decimal("98.32")
    # The source's "spot" for this size equals on demand, so it is not carried.
    assert "spot" not in h100.hourly
    assert h100.sources["on_demand"].startswith("snapshot: coopslarhette/skypilot-catalog@20291d7")
    nc = prices.quote("azure", "Standard_NC96ads_A100_v4", "eastus")
    assert nc is not None
    assert nc.on_demand == Decimal("14.692")
    assert nc.hourly["spot"] == Decimal("1.777732")
    # api-evangelist/coreweave@27bcc25: "NVIDIA HGX H100 (on-demand)" $49.24 an hour, spot
    # $19.71 (NA). The page quotes no region, so any CoreWeave region is priced from it.
    cw = prices.quote("coreweave", "gd-8xh100ib-i128", "US-EAST-04A")
    assert cw is not None
    assert (cw.on_demand, cw.hourly["spot"]) == (Decimal("49.24"), Decimal("19.71"))
    assert cw.regions["on_demand"] == "north-america"
    assert cw.sources["spot"] == (
        "snapshot: api-evangelist/coreweave@27bcc25 plans/coreweave-plans-pricing.yml, 2026-09-20"
    )


@pytest.mark.django_db
def test_the_bills_provider_names_find_the_catalogue() -> None:
    # The ledger says "Google Cloud" and "Microsoft" (the parsers' ProviderName); the catalogue
    # keys them gcp and azure. Cyclenerd/google-cloud-pricing-cost-calculator@fd66b26
    # pricing.yml, a2-highgpu-8g, us-central1: hour 29.38708.
    gcp = prices.quote("Google Cloud", "a2-highgpu-8g", "us-central1")
    assert gcp is not None
    assert gcp.on_demand == Decimal("29.38708")
    # coopslarhette/skypilot-catalog@20291d7: Standard_ND96amsr_A100_v4, eastus, 32.77 (the
    # demo's westus3 is priced from the only region the snapshot has).
    azure = prices.quote("Microsoft", "Standard_ND96amsr_A100_v4", "westus3")
    assert azure is not None
    assert (azure.on_demand, azure.regions["on_demand"]) == (Decimal("32.77"), "eastus")
    assert prices.on_demand_hour_price("Microsoft", "Standard_ND96isr_H100_v5", "westus3") == (
        Decimal("98.32")
    )


@pytest.mark.django_db
def test_a_type_read_in_two_regions_prices_each_from_its_own() -> None:
    # pricing.yml@fd66b26, a3-highgpu-8g: us-central1 hour 88.4899999025753, us-east4
    # 88.5557561512329.
    central = prices.quote("gcp", "a3-highgpu-8g", "us-central1")
    east = prices.quote("gcp", "a3-highgpu-8g", "us-east4")
    assert central is not None
    assert east is not None
    assert central.on_demand == Decimal("88.4899999025753")
    assert east.on_demand == Decimal("88.5557561512329")
    # Its 1-year CUD: month_1y 44810.08066464 / 730, to 9 places.
    assert central.hourly["1y_no_upfront"] == Decimal("61.383672143")
