"""refresh_prices --provider gcp: GCP Cloud Catalog SKU prices through the real
google-cloud-billing client (REST transport, anonymous credentials) against recorded skus.list
responses served at the HTTP level by `responses`; the shared opencost sample is page 1 (it
carries a nextPageToken), a recorded page 2 ends the listing. Prices are units + nanos exactly;
gpu_hour_price reads them. (The same tests once drove load_gcp_prices, which refresh_prices
replaced.)"""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.core.management.base import CommandError
from requests import PreparedRequest

from finops.pricing.models import SkuPrice
from finops.pricing.selectors import gpu_hour_price
from tests.recorded_gcp_catalog import (
    LIST_URL_PATTERN,
    SERVICE,
    catalog_sku,
    opencost_sample,
    real_catalog_client,
    refresh_gcp_prices,
    sku_price,
)

pytest.importorskip("google.cloud.billing_v1")
responses = pytest.importorskip("responses")

pytestmark = pytest.mark.django_db


# Page 2 of the listing: test values.
EFFECTIVE = "2024-09-01T08:00:00.123456Z"
PAGE_2 = {
    "skus": [
        catalog_sku(
            "A1B2-PREE-0001",
            "Nvidia Tesla A100 GPU attached to Spot Preemptible VMs running in Iowa",
            "GPU",
            "Preemptible",
            ("1", 100_000_001),
            effective=EFFECTIVE,
        ),
        catalog_sku(
            "A1B2-CUD1-0001",
            "Commitment v1: Nvidia Tesla A100 80GB GPU in Iowa for 1 Year",
            "GPU",
            "Commit1Yr",
            ("2", 999_999_999),
            effective=EFFECTIVE,
        ),
    ],
    "nextPageToken": "",
}


@pytest.fixture
def sample(samples_dir: Path) -> Path:
    return opencost_sample(samples_dir)


def expected_prices(documents: list[dict]) -> dict[str, tuple[Decimal, str]]:
    """sku id -> (units + nanos / 10^9, currency), computed from the recorded JSON."""
    return {sku["skuId"]: sku_price(sku) for document in documents for sku in document["skus"]}


@pytest.fixture
def catalog(
    sample: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[dict[str, Any], list[dict[str, list[str]]]]]:
    """The real client on its REST transport; page 1 is the sample, page 2 is PAGE_2."""
    page_1 = json.loads(sample.read_text())
    requests_seen: list[dict[str, list[str]]] = []

    def list_skus(request: PreparedRequest) -> tuple[int, dict[str, str], str]:
        query = parse_qs(urlsplit(request.url or "").query)
        requests_seen.append(query)
        token = query.get("pageToken", [""])[0]
        if not token:
            return 200, {}, json.dumps(page_1)
        assert token == page_1["nextPageToken"]
        return 200, {}, json.dumps(PAGE_2)

    with real_catalog_client(monkeypatch) as mock:
        mock.add_callback("GET", LIST_URL_PATTERN, callback=list_skus)
        yield page_1, requests_seen


def stored() -> dict[str, tuple[Decimal, str]]:
    return {p.sku_id: (p.unit_price, p.currency) for p in SkuPrice.objects.all()}


def test_api_prices_are_units_plus_nanos_exactly_across_pages(
    catalog: tuple[dict[str, Any], list[dict[str, list[str]]]],
) -> None:
    page_1, requests_seen = catalog

    refresh_gcp_prices()

    assert [q.get("pageToken") for q in requests_seen] == [None, [page_1["nextPageToken"]]]
    assert stored() == expected_prices([page_1, PAGE_2])
    a100 = SkuPrice.objects.get(sku_id="039F-D0DA-4055")
    assert (a100.unit_price, a100.currency, a100.usage_unit) == (Decimal("2.933908"), "USD", "h")
    assert (a100.resource_group, a100.usage_type, a100.gpu_model) == ("GPU", "OnDemand", "A100")
    assert a100.regions == ["us-central1", "us-east1", "us-west1"]
    assert a100.service_id == SERVICE
    assert a100.effective_time.isoformat() == "2023-03-24T10:52:50.681000+00:00"
    # Nine decimals survive the database (nanos of 999999999 would be lost in a float).
    commit = SkuPrice.objects.get(sku_id="A1B2-CUD1-0001")
    assert commit.unit_price == Decimal("2.999999999")
    assert (commit.usage_type, commit.gpu_model) == ("Commit1Yr", "A100-80GB")


def test_a_saved_response_loads_offline_with_the_same_prices(sample: Path) -> None:
    with responses.RequestsMock():  # any network call would fail the test
        refresh_gcp_prices("--from-file", str(sample))

    assert stored() == expected_prices([json.loads(sample.read_text())])


def test_loading_again_updates_in_place(sample: Path) -> None:
    refresh_gcp_prices("--from-file", str(sample))
    first = {p.sku_id: p.fetched_at for p in SkuPrice.objects.all()}
    refresh_gcp_prices("--from-file", str(sample))

    again = {p.sku_id: p.fetched_at for p in SkuPrice.objects.all()}
    assert again.keys() == first.keys()
    assert all(again[sku] >= first[sku] for sku in first)


def test_gpu_hour_price_by_model_sku_usage_type_and_region(
    catalog: tuple[dict[str, Any], list[dict[str, list[str]]]],
) -> None:
    refresh_gcp_prices()

    on_demand = gpu_hour_price(
        provider="gcp", gpu_model="a100", usage_type="OnDemand", region="us-east1"
    )
    assert on_demand is not None
    assert on_demand.sku_id == "039F-D0DA-4055"
    # us-central1 has the multi-regional on-demand SKU and a regional preemptible one.
    spot = gpu_hour_price(
        provider="gcp", gpu_model="A100", usage_type="Preemptible", region="us-central1"
    )
    assert spot is not None
    assert spot.unit_price == Decimal("1.100000001")
    by_sku = gpu_hour_price(
        provider="gcp", sku="A1B2-CUD1-0001", usage_type="Commit1Yr", region="us-central1"
    )
    assert by_sku is not None
    assert by_sku.gpu_model == "A100-80GB"
    assert (
        gpu_hour_price(
            provider="gcp", gpu_model="A100", usage_type="OnDemand", region="europe-west4"
        )
        is None
    )
    with pytest.raises(ValueError, match="exactly one of gpu_model or sku"):
        gpu_hour_price(provider="gcp", usage_type="OnDemand", region="us-east1")


def test_a_refused_catalogue_is_a_clear_error_and_stores_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    denied = {
        "error": {
            "code": 403,
            "message": "Cloud Billing API has not been used in project 123 or it is disabled.",
            "status": "PERMISSION_DENIED",
        }
    }
    with real_catalog_client(monkeypatch) as mock:
        mock.add("GET", LIST_URL_PATTERN, json=denied, status=403)
        with pytest.raises(CommandError, match=r"403 .*Cloud Billing API has not been used"):
            refresh_gcp_prices()
    assert not SkuPrice.objects.exists()


def test_an_unreadable_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "skus.json"
    path.write_text("{not json")
    with pytest.raises(CommandError, match=r"not a Cloud Catalog skus\.list response"):
        refresh_gcp_prices("--from-file", str(path))
