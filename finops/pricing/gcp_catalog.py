"""GCP Cloud Catalog SKUs (google-cloud-billing) read into plain price tiers.

Both ways in give the same proto messages, so one conversion serves them: the API through
CloudCatalogClient.list_skus (its pager follows nextPageToken), or a saved `skus.list` JSON
response read with ListSkusResponse.from_json (offline, or a shipped snapshot).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

COMPUTE_ENGINE_SERVICE = "6F81-5844-456A"
PROVIDER = "gcp"
UNDATED = datetime(1970, 1, 1, tzinfo=UTC)

# "Nvidia Tesla A100 GPU running in Americas", "Nvidia H100 80GB GPU ...", "Commitment v1:
# Nvidia Tesla A100 80GB GPU in Americas for 1 Year" -> A100, H100-80GB, A100-80GB.
_GPU_RE = re.compile(r"\bNvidia\s+(?:Tesla\s+)?([A-Z]+\d+[A-Za-z]*)(?:\s+(\d+GB))?", re.IGNORECASE)
_SKU_NAME_RE = re.compile(r"^services/([^/]+)/skus/")


class CatalogError(Exception):
    """The catalogue could not be read (refused, unreachable, or an unreadable file)."""


@dataclass(frozen=True)
class PriceTier:
    """One tier of one SKU's price at one effective time, money exact."""

    service_id: str
    sku_id: str
    description: str
    resource_family: str
    resource_group: str
    usage_type: str
    gpu_model: str
    regions: tuple[str, ...]
    usage_unit: str
    tier_start: Decimal
    unit_price: Decimal
    currency: str
    effective_time: datetime


def money_decimal(*, units: int, nanos: int) -> Decimal:
    """google.type.Money as an exact Decimal: units + nanos / 10^9 (scaleb is exact)."""
    return Decimal(int(units)) + Decimal(int(nanos)).scaleb(-9)


def gpu_model_of(description: str) -> str:
    match = _GPU_RE.search(description)
    if match is None:
        return ""
    model = match[1].upper()
    return f"{model}-{match[2].upper()}" if match[2] else model


def _utc(value: datetime | None) -> datetime:
    if value is None:
        # The API always dates a price, but saved snapshots may not (the opencost sample's
        # regional SKUs). Undated = older than any dated price of the SKU, and stable, so
        # loading the same file again updates its rows instead of adding new ones.
        return UNDATED
    stamp = datetime(
        value.year,
        value.month,
        value.day,
        value.hour,
        value.minute,
        value.second,
        value.microsecond,
        tzinfo=value.tzinfo or UTC,
    )
    return stamp.astimezone(UTC)


def sku_tiers(sku: Any, *, service_id: str) -> Iterator[PriceTier]:
    """The price tiers of one billing_v1.Sku (every pricing entry, every tiered rate)."""
    named = _SKU_NAME_RE.match(sku.name or "")
    category = sku.category
    for info in sku.pricing_info:
        expression = info.pricing_expression
        for rate in expression.tiered_rates:
            price = rate.unit_price
            yield PriceTier(
                service_id=named[1] if named else service_id,
                sku_id=sku.sku_id,
                description=sku.description,
                resource_family=category.resource_family,
                resource_group=category.resource_group,
                usage_type=category.usage_type,
                gpu_model=gpu_model_of(sku.description) if category.resource_group == "GPU" else "",
                regions=tuple(sku.service_regions),
                usage_unit=expression.usage_unit,
                # A proto double: its shortest repr is the number the API sent.
                tier_start=Decimal(repr(rate.start_usage_amount)),
                unit_price=money_decimal(units=price.units, nanos=price.nanos),
                currency=price.currency_code,
                effective_time=_utc(info.effective_time),
            )


def catalog_client() -> Any:
    """A CloudCatalogClient with the environment's Application Default Credentials."""
    import google.auth.exceptions
    from google.cloud import billing_v1

    try:
        return billing_v1.CloudCatalogClient()
    except google.auth.exceptions.DefaultCredentialsError as exc:
        raise CatalogError(
            f"no Google Cloud credentials ({exc}); set GOOGLE_APPLICATION_CREDENTIALS, run "
            "gcloud auth application-default login, or load a saved response with --from-file"
        ) from None


def catalog_tiers(*, client: Any, service_id: str) -> list[PriceTier]:
    """Every price tier of a service's SKUs, all pages read before anything is stored."""
    import google.auth.exceptions
    from google.api_core import exceptions as api_exceptions

    try:
        skus = list(client.list_skus(parent=f"services/{service_id}"))
    except (api_exceptions.GoogleAPIError, google.auth.exceptions.GoogleAuthError) as exc:
        raise CatalogError(f"cannot list SKUs of services/{service_id}: {exc}") from None
    return _tiers(skus, service_id=service_id)


def file_tiers(*, path: Path, service_id: str) -> list[PriceTier]:
    """The price tiers in a saved `skus.list` response ({"skus": [...], ...})."""
    from google.cloud import billing_v1
    from google.protobuf.json_format import ParseError

    try:
        text = path.read_text(encoding="utf-8")
        response = billing_v1.ListSkusResponse.from_json(text, ignore_unknown_fields=True)
    except (OSError, UnicodeDecodeError, ValueError, ParseError) as exc:
        raise CatalogError(f"{path}: not a Cloud Catalog skus.list response ({exc})") from None
    return _tiers(response.skus, service_id=service_id)


def _tiers(skus: Iterable[Any], *, service_id: str) -> list[PriceTier]:
    return [tier for sku in skus for tier in sku_tiers(sku, service_id=service_id)]
