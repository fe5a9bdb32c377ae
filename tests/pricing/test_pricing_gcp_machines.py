"""refresh_prices --provider gcp prices whole machines from per-GPU SKUs (issue 13): GCP bills
each GPU, the vCPUs and the memory of a VM as separate SKUs, so a machine-hour is
GPU SKU x GPUs + vCPU SKU x vCPUs + RAM SKU x GiB, for on demand, spot and 1 / 3 year CUDs.

Two recorded Cloud Catalog responses: the shared opencost sample (real prices: A100 40GB, A2
vCPU and RAM on demand), read offline; and a skus.list page written below in the API's JSON
shape with test values (G2 / L4 SKUs of every usage type, and decoys that must not be taken),
served to the real google-cloud-billing client over REST by `responses`. Expected prices are
worked by hand from the recorded units + nanos."""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from finops.pricing import prices, snapshot
from finops.pricing.models import InstancePrice, SkuPrice
from tests.recorded_gcp_catalog import (
    LIST_URL_PATTERN,
    opencost_sample,
    real_catalog_client,
    refresh_gcp_prices,
    sku_price,
)
from tests.recorded_gcp_catalog import catalog_sku as sku

if TYPE_CHECKING:
    from responses import RequestsMock

pytest.importorskip("google.cloud.billing_v1")
responses = pytest.importorskip("responses")

pytestmark = pytest.mark.django_db


def figures(instance_type: str) -> dict[str, Decimal]:
    rows = InstancePrice.objects.filter(provider="gcp", instance_type=instance_type)
    return {row.kind: row.hourly for row in rows}


# g2-standard-96 (8 L4, 96 vCPUs, 384 GiB) in us-central1. Test values, not Google's prices.
G2_PAGE = {
    "skus": [
        # On demand: a multi-regional L4 SKU and a regional one; the regional one wins.
        sku("L4OD-MULT", "Nvidia L4 GPU running in Americas", "GPU", "OnDemand", ("0", 600_000_000),
            regions=("us-central1", "us-east1")),
        sku("L4OD-IOWA", "Nvidia L4 GPU running in Iowa", "GPU", "OnDemand", ("0", 500_000_000)),
        # An older price of a G2 core SKU, and its newer price: the newer wins.
        sku("G2CORE-OD", "G2 Instance Core running in Americas", "CPU", "OnDemand",
            ("0", 25_000_000), effective="2024-01-01T00:00:00Z"),
        sku("G2CORE-OD", "G2 Instance Core running in Americas", "CPU", "OnDemand",
            ("0", 20_000_000)),
        sku("G2RAM-OD", "G2 Instance Ram running in Americas", "RAM", "OnDemand",
            ("0", 3_000_000), unit="GiBy.h"),
        # Decoys: sole-tenant G2 cores, and another family's cores.
        sku("G2CORE-ST", "G2 Sole Tenancy Instance Core running in Americas", "CPU", "OnDemand",
            ("0", 1_000_000)),
        sku("A2CORE-OD", "A2 Instance Core running in Americas", "CPU", "OnDemand",
            ("0", 1_000_000)),
        # Spot.
        sku("L4SP", "Nvidia L4 GPU attached to Spot Preemptible VMs running in Iowa", "GPU",
            "Preemptible", ("0", 200_000_000)),
        sku("G2CORE-SP", "Spot Preemptible G2 Instance Core running in Americas", "CPU",
            "Preemptible", ("0", 8_000_000)),
        sku("G2RAM-SP", "Spot Preemptible G2 Instance Ram running in Americas", "RAM",
            "Preemptible", ("0", 1_000_000), unit="GiBy.h"),
        # 1 year CUD, complete.
        sku("L4C1", "Commitment v1: Nvidia L4 GPU in Americas for 1 Year", "GPU", "Commit1Yr",
            ("0", 315_000_000)),
        sku("G2C1-CPU", "Commitment v1: G2 Cpu in Americas for 1 Year", "CPU", "Commit1Yr",
            ("0", 12_600_000)),
        sku("G2C1-RAM", "Commitment v1: G2 Ram in Americas for 1 Year", "RAM", "Commit1Yr",
            ("0", 1_890_000), unit="GiBy.h"),
        # 3 year CUD without a RAM SKU: no 3 year figure, never a partial price.
        sku("L4C3", "Commitment v1: Nvidia L4 GPU in Americas for 3 Year", "GPU", "Commit3Yr",
            ("0", 225_000_000)),
        sku("G2C3-CPU", "Commitment v1: G2 Cpu in Americas for 3 Year", "CPU", "Commit3Yr",
            ("0", 9_000_000)),
    ],
    "nextPageToken": "",
}  # fmt: skip


@pytest.fixture
def g2_catalog(monkeypatch: pytest.MonkeyPatch) -> Iterator[RequestsMock]:
    """The real client on its REST transport, answering G2_PAGE."""
    with real_catalog_client(monkeypatch) as mock:
        mock.add("GET", LIST_URL_PATTERN, json=G2_PAGE)
        yield mock


def test_a_machine_is_priced_per_gpu_plus_its_vcpus_and_memory_for_each_way_of_buying(
    g2_catalog: RequestsMock,
) -> None:
    output = refresh_gcp_prices("--instance-type", "g2-standard-96")

    assert len(g2_catalog.calls) == 1
    # On demand: 8 x 0.50 (regional L4) + 96 x 0.020 (newest core price) + 384 x 0.003
    #          = 4.00 + 1.92 + 1.152 = 7.072.
    # Spot:      8 x 0.20 + 96 x 0.008 + 384 x 0.001 = 1.60 + 0.768 + 0.384 = 2.752.
    # 1 year:    8 x 0.315 + 96 x 0.0126 + 384 x 0.00189 = 2.52 + 1.2096 + 0.72576 = 4.45536,
    #            billed monthly, so the same figure under both payment options.
    assert figures("g2-standard-96") == {
        "on_demand": Decimal("7.072"),
        "spot": Decimal("2.752"),
        "1y_no_upfront": Decimal("4.45536"),
        "1y_all_upfront": Decimal("4.45536"),
    }
    # The 3 year CUD has no G2 RAM SKU: no figure, and the command says why.
    assert "no Commit3Yr price for g2-standard-96 in us-central1: no SKU for RAM G2" in output
    assert "4 gcp machine prices stored for 1 type" in output
    # Every SKU tier is kept too (the G2 core SKU at its two effective times).
    assert SkuPrice.objects.count() == len(G2_PAGE["skus"])
    row = InstancePrice.objects.get(instance_type="g2-standard-96", kind="on_demand")
    assert row.source == (
        "GCP Cloud Catalog: 8 x GPU SKU L4OD-IOWA + 96 x vCPU SKU G2CORE-OD + 384 GiB x RAM SKU "
        "G2RAM-OD"
    )
    assert str(row.effective_date) == "2025-10-01"


def test_the_composed_price_is_what_the_comparison_quotes(g2_catalog: RequestsMock) -> None:
    refresh_gcp_prices("--instance-type", "g2-standard-96")

    quote = prices.quote("gcp", "g2-standard-96", "us-central1")
    assert quote is not None
    assert quote.on_demand == Decimal("7.072")
    # Spot / on demand = 2.752 / 7.072; 1 year = 4.45536 / 7.072 = 0.63.
    assert quote.ratio("spot") == Decimal("2.752") / Decimal("7.072")
    assert quote.ratio("1y_no_upfront") == Decimal("0.63")
    assert quote.sources["on_demand"].startswith("GCP Cloud Catalog: 8 x GPU SKU L4OD-IOWA")
    # The read found no 3 year figure: the snapshot's stands in, figure by figure, with its own
    # source (Cyclenerd/google-cloud-pricing-cost-calculator@fd66b26 pricing.yml, g2-standard-96
    # us-central1 month_3y 2629.0938028 per 730-hour month), so nothing is missing.
    assert quote.hourly["3y_no_upfront"] == Decimal("2629.0938028") / 730
    assert quote.sources["3y_no_upfront"].startswith("snapshot: Cyclenerd/")
    body = prices.price_body("gcp", "g2-standard-96", "us-central1")
    assert body is not None
    assert (body["missing"], body["missing_note"]) == ([], None)


def test_the_real_opencost_response_prices_a2_highgpu_8g_as_the_snapshot_does(
    samples_dir: Path,
) -> None:
    path = opencost_sample(samples_dir)
    recorded = {s["description"]: s for s in json.loads(path.read_text())["skus"]}

    def hourly(description: str) -> Decimal:
        return sku_price(recorded[description])[0]

    with responses.RequestsMock():  # any network call fails the test
        output = refresh_gcp_prices("--from-file", str(path), "--instance-type", "a2-highgpu-8g")

    # a2-highgpu-8g: 8 A100 40GB, 96 vCPUs, 680 GiB.
    expected = (
        8 * hourly("Nvidia Tesla A100 GPU running in Americas")
        + 96 * hourly("A2 Instance Core running in Americas")
        + 680 * hourly("A2 Instance Ram running in Americas")
    )
    assert figures("a2-highgpu-8g") == {"on_demand": expected}
    # Two sources agree: the snapshot's figure came from SkyPilot's catalogue, not this file.
    (entry,) = [e for e in snapshot.snapshot()["prices"] if e["instance_type"] == "a2-highgpu-8g"]
    assert Decimal(entry["on_demand_hourly"]) == expected
    # The sample has no spot or commitment SKUs: said, not guessed.
    assert "no Preemptible price for a2-highgpu-8g in us-central1" in output
    assert "no Commit1Yr price for a2-highgpu-8g in us-central1" in output


def test_a100_80gb_sku_is_not_taken_for_a100_40gb(tmp_path: Path) -> None:
    page = {
        "skus": [
            sku("A100-80", "Nvidia Tesla A100 80GB GPU running in Iowa", "GPU", "OnDemand",
                ("4", 0)),
            sku("A2CORE", "A2 Instance Core running in Iowa", "CPU", "OnDemand", ("0", 0)),
            sku("A2RAM", "A2 Instance Ram running in Iowa", "RAM", "OnDemand", ("0", 0),
                unit="GiBy.h"),
        ]
    }  # fmt: skip
    path = tmp_path / "skus.json"
    path.write_text(json.dumps(page))

    with responses.RequestsMock():  # any network call fails the test
        output = refresh_gcp_prices("--from-file", str(path))

    # a2-ultragpu-8g (A100 80GB) is priced: 8 x 4 + 0 + 0 = 32; a2-highgpu-8g (A100) is not.
    assert figures("a2-ultragpu-8g")["on_demand"] == Decimal("32")
    assert figures("a2-highgpu-8g") == {}
    assert "no OnDemand price for a2-highgpu-8g in us-central1: no SKU for GPU A100" in output


def test_a_machine_without_a_recorded_shape_is_refused_before_reading() -> None:
    with responses.RequestsMock() as mock, pytest.raises(CommandError, match=r"n1-standard-8"):
        refresh_gcp_prices("--instance-type", "n1-standard-8")
    assert len(mock.calls) == 0
    assert not SkuPrice.objects.exists()
    assert not InstancePrice.objects.exists()


def test_load_gcp_prices_is_gone_refresh_prices_is_the_one_command() -> None:
    with pytest.raises(CommandError, match="Unknown command"):
        call_command("load_gcp_prices")


def test_a_named_machine_is_read_in_its_snapshot_region(tmp_path: Path) -> None:
    # a3-highgpu-8g is recorded in us-east4 (8 H100 80GB, 208 vCPUs, 1872 GiB); test values.
    page = {
        "skus": [
            sku("H100", "Nvidia H100 80GB GPU running in Virginia", "GPU", "OnDemand", ("10", 0),
                regions=("us-east4",)),
            sku("A3CORE", "A3 Instance Core running in Virginia", "CPU", "OnDemand",
                ("0", 25_000_000), regions=("us-east4",)),
            sku("A3RAM", "A3 Instance Ram running in Virginia", "RAM", "OnDemand",
                ("0", 2_500_000), regions=("us-east4",), unit="GiBy.h"),
        ]
    }  # fmt: skip
    path = tmp_path / "skus.json"
    path.write_text(json.dumps(page))

    with responses.RequestsMock():  # any network call fails the test
        refresh_gcp_prices("--from-file", str(path), "--instance-type", "a3-highgpu-8g")

    # 8 x 10 + 208 x 0.025 + 1872 x 0.0025 = 80 + 5.2 + 4.68 = 89.88, in us-east4.
    row = InstancePrice.objects.get(instance_type="a3-highgpu-8g", kind="on_demand")
    assert (row.hourly, row.region) == (Decimal("89.88"), "us-east4")
