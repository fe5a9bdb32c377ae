"""GCP Cloud Catalog (skus.list) inputs shared by the pricing tests: SKU entries in the API's JSON
shape, the shared opencost sample, and the real google-cloud-billing client on its REST
transport, answered at the HTTP level by `responses`."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from django.core.management import call_command

from finops.pricing import gcp_catalog

if TYPE_CHECKING:
    from responses import RequestsMock

# A skus.list response recorded from the real API (opencost's test data), under samples_dir.
SAMPLE = "gcp/cloud_catalog_skus_a100_opencost.json"
# Compute Engine's service id in the Cloud Catalog.
SERVICE = "6F81-5844-456A"
LIST_URL = f"https://cloudbilling.googleapis.com/v1/services/{SERVICE}/skus"
# LIST_URL with any query string (pageToken, pageSize), for `responses`.
LIST_URL_PATTERN = re.compile(re.escape(LIST_URL))


def opencost_sample(samples_dir: Path) -> Path:
    """The recorded sample, or a skip where the shared folder lacks it."""
    path = samples_dir / SAMPLE
    if not path.is_file():
        pytest.skip(f"{SAMPLE} is absent")
    return path


def catalog_sku(
    sku_id: str,
    description: str,
    group: str,
    usage_type: str,
    price: tuple[str, int],
    *,
    regions: tuple[str, ...] = ("us-central1",),
    unit: str = "h",
    effective: str = "2025-10-01T00:00:00Z",
) -> dict[str, Any]:
    """One skus.list entry in the API's JSON shape (units as a string, nanos as a number)."""
    units, nanos = price
    return {
        "name": f"services/{SERVICE}/skus/{sku_id}",
        "skuId": sku_id,
        "description": description,
        "category": {
            "serviceDisplayName": "Compute Engine",
            "resourceFamily": "Compute",
            "resourceGroup": group,
            "usageType": usage_type,
        },
        "serviceRegions": list(regions),
        "pricingInfo": [
            {
                "pricingExpression": {
                    "usageUnit": unit,
                    "tieredRates": [
                        {
                            "startUsageAmount": 0,
                            "unitPrice": {"currencyCode": "USD", "units": units, "nanos": nanos},
                        }
                    ],
                },
                "effectiveTime": effective,
            }
        ],
    }


def sku_price(sku: dict[str, Any]) -> tuple[Decimal, str]:
    """(units + nanos / 10^9, currency) of a one-tier skus.list entry, read from its JSON."""
    (info,) = sku["pricingInfo"]
    (rate,) = info["pricingExpression"]["tieredRates"]
    money = rate["unitPrice"]
    exact = Decimal(money["units"]) + Decimal(money["nanos"]) / Decimal(10**9)
    return exact, money["currencyCode"]


def refresh_gcp_prices(*args: str) -> str:
    """`refresh_prices --provider gcp` with these arguments; what it printed."""
    out = io.StringIO()
    call_command("refresh_prices", "--provider", "gcp", *args, stdout=out)
    return out.getvalue()


@contextmanager
def real_catalog_client(monkeypatch: pytest.MonkeyPatch) -> Iterator[RequestsMock]:
    """The real CloudCatalogClient (REST, anonymous credentials) for refresh_prices, and the
    `responses` mock that answers it: add skus.list answers for LIST_URL_PATTERN to it. Any other
    request fails the test."""
    import responses
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import billing_v1

    with responses.RequestsMock() as mock:
        monkeypatch.setattr(
            gcp_catalog,
            "catalog_client",
            lambda: billing_v1.CloudCatalogClient(
                transport="rest",
                credentials=AnonymousCredentials(),
                client_options={"api_endpoint": "https://cloudbilling.googleapis.com"},
            ),
        )
        yield mock
