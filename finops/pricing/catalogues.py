"""Provider catalogues read into hourly instance prices (refresh_prices, issue 13).

- AWS: the Price List API (boto3 `pricing` get_products, Linux, shared tenancy, no
  pre-installed software) for on demand and Standard reserved terms, and EC2
  describe_spot_price_history for spot (the mean of the newest price of each zone).
- Azure: the public Retail Prices API (https://prices.azure.com/api/retail/prices, no auth),
  followed page by page through NextPageLink: Linux consumption meters for on demand and spot,
  reservation meters for the 1 and 3 year terms.

Money stays exact: the catalogues send decimal strings (AWS) or JSON numbers, which are read as
Decimal. An all-upfront or term price becomes hourly by dividing by the hours of its term.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

HOURS_1Y = Decimal(8760)
HOURS_3Y = Decimal(26280)
AWS_PRICING_SOURCE = "AWS Price List API (get_products)"
AWS_SPOT_SOURCE = "EC2 describe_spot_price_history"
AZURE_SOURCE = "Azure Retail Prices API"
AZURE_URL = "https://prices.azure.com/api/retail/prices"


class CatalogueError(Exception):
    """A catalogue could not be read (refused, unreachable, or an answer we cannot read)."""


@dataclass(frozen=True)
class Figure:
    """One hourly price of one instance type in one region, one way of buying it."""

    provider: str
    instance_type: str
    region: str
    kind: str
    hourly: Decimal
    currency: str
    source: str
    source_ref: str = ""
    effective_date: dt.date | None = None


# --- AWS ---------------------------------------------------------------------------------------

_AWS_FILTERS = {
    "operatingSystem": "Linux",
    "tenancy": "Shared",
    "preInstalledSw": "NA",
    "capacitystatus": "Used",
}
_AWS_TERMS = {
    ("1yr", "No Upfront"): "1y_no_upfront",
    ("1yr", "All Upfront"): "1y_all_upfront",
    ("3yr", "No Upfront"): "3y_no_upfront",
    ("3yr", "All Upfront"): "3y_all_upfront",
}


def aws_prices(*, client: Any, instance_type: str, region: str) -> list[Figure]:
    """On demand and Standard reserved prices of the type in the region (pricing client)."""
    filters = [{"Type": "TERM_MATCH", "Field": "instanceType", "Value": instance_type}]
    filters.append({"Type": "TERM_MATCH", "Field": "regionCode", "Value": region})
    filters += [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in _AWS_FILTERS.items()]
    figures: list[Figure] = []
    pages = client.get_paginator("get_products").paginate(ServiceCode="AmazonEC2", Filters=filters)
    for page in pages:
        for text in page["PriceList"]:
            figures.extend(_aws_product(json.loads(text), instance_type, region))
    return figures


def _aws_product(product: dict[str, Any], instance_type: str, region: str) -> Iterator[Figure]:
    published = _date(product.get("publicationDate"))

    def figure(kind: str, hourly: Decimal, currency: str, ref: str, start: Any) -> Figure:
        return Figure(
            "aws", instance_type, region, kind, hourly, currency, AWS_PRICING_SOURCE, ref,
            _date(start) or published,
        )  # fmt: skip

    terms = product.get("terms", {})
    for term in terms.get("OnDemand", {}).values():
        for ref, dim in term.get("priceDimensions", {}).items():
            for currency, price in dim.get("pricePerUnit", {}).items():
                if dim.get("unit") == "Hrs" and Decimal(price) > 0:
                    yield figure(
                        "on_demand", Decimal(price), currency, ref, term.get("effectiveDate")
                    )
    for term in terms.get("Reserved", {}).values():
        attrs = term.get("termAttributes", {})
        kind = _AWS_TERMS.get((attrs.get("LeaseContractLength"), attrs.get("PurchaseOption")))
        if kind is None or attrs.get("OfferingClass", "standard") != "standard":
            continue
        hours = HOURS_1Y if kind.startswith("1y") else HOURS_3Y
        totals: dict[str, Decimal] = {}
        for dim in term.get("priceDimensions", {}).values():
            for currency, price in dim.get("pricePerUnit", {}).items():
                # The hourly fee, plus an upfront fee spread over the hours of the term.
                per_hour = Decimal(price) if dim.get("unit") == "Hrs" else Decimal(price) / hours
                totals[currency] = totals.get(currency, Decimal(0)) + per_hour
        for currency, hourly in totals.items():
            if hourly > 0:
                yield figure(kind, hourly, currency, term.get("offerTermCode", ""),
                             term.get("effectiveDate"))  # fmt: skip


def aws_spot(*, client: Any, instance_type: str, region: str, now: dt.datetime) -> Figure | None:
    """Mean of the newest Linux spot price of each zone (EC2 client of the region)."""
    newest: dict[str, tuple[dt.datetime, Decimal]] = {}
    pages = client.get_paginator("describe_spot_price_history").paginate(
        InstanceTypes=[instance_type], ProductDescriptions=["Linux/UNIX"], StartTime=now
    )
    for page in pages:
        for item in page["SpotPriceHistory"]:
            zone, stamp = item["AvailabilityZone"], item["Timestamp"]
            if zone not in newest or stamp > newest[zone][0]:
                newest[zone] = (stamp, Decimal(item["SpotPrice"]))
    if not newest:
        return None
    mean = sum((price for _, price in newest.values()), Decimal(0)) / len(newest)
    latest = max(stamp for stamp, _ in newest.values())
    zones = ",".join(sorted(newest))
    return Figure(
        "aws", instance_type, region, "spot", mean, "USD", AWS_SPOT_SOURCE, f"mean of {zones}",
        latest.date(),
    )  # fmt: skip


# --- Azure -------------------------------------------------------------------------------------

Fetch = Callable[[str], dict[str, Any]]


def azure_filter(*, instance_type: str, region: str) -> str:
    return (
        "serviceName eq 'Virtual Machines' and "
        f"armRegionName eq '{region}' and armSkuName eq '{instance_type}'"
    )


def azure_prices(
    *, fetch: Fetch, instance_type: str, region: str, url: str = AZURE_URL
) -> list[Figure]:
    """Every page read before anything is returned, so a refresh is whole or not at all."""
    filter_ = azure_filter(instance_type=instance_type, region=region)
    next_url: str | None = f"{url}?$filter={filter_}"
    figures: list[Figure] = []
    pages = 0
    while next_url:
        pages += 1
        if pages > 100:
            raise CatalogueError(f"{url}: more than 100 pages for {instance_type} in {region}")
        body = fetch(next_url)
        for item in body.get("Items", []):
            figures.extend(_azure_item(item, instance_type, region))
        next_url = body.get("NextPageLink")
    return figures


def _azure_item(item: dict[str, Any], instance_type: str, region: str) -> Iterator[Figure]:
    if "windows" in str(item.get("productName", "")).lower():
        return
    meter = str(item.get("meterName", "")).lower()
    if "low priority" in meter:
        return
    price = Decimal(str(item["retailPrice"]))
    kind: str | None = None
    if item.get("type") == "Consumption" and item.get("unitOfMeasure") == "1 Hour":
        kind = "spot" if "spot" in meter else "on_demand"
        hourly = price
    elif item.get("type") == "Reservation":
        term = str(item.get("reservationTerm", ""))
        hours = HOURS_1Y if term.startswith("1") else HOURS_3Y if term.startswith("3") else None
        if hours is None:
            return
        hourly = price / hours
        # An Azure reservation costs the same paid upfront or monthly: one price, both options.
        for option in ("no_upfront", "all_upfront"):
            yield _azure_figure(item, instance_type, region, f"{term[0]}y_{option}", hourly)
        return
    if kind is not None and hourly > 0:
        yield _azure_figure(item, instance_type, region, kind, hourly)


def _azure_figure(
    item: dict[str, Any], instance_type: str, region: str, kind: str, hourly: Decimal
) -> Figure:
    return Figure(
        "azure", instance_type.lower(), region, kind, hourly, item.get("currencyCode", "USD"),
        AZURE_SOURCE, str(item.get("meterId", "")), _date(item.get("effectiveStartDate")),
    )  # fmt: skip


def _date(value: Any) -> dt.date | None:
    if not value:
        return None
    try:
        return dt.datetime.fromisoformat(str(value).replace("Z", "+00:00")).date()
    except ValueError:
        return None
