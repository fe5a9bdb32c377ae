"""OpenCost `/cloudCost` responses: daily cloud cost per provider (and per whatever the query
aggregated by), as OpenCost's cloud cost pipeline reads it from the providers' billing exports.

One line item per cost item per window. OpenCost reports five costs; they map to FOCUS as:
invoicedCost -> BilledCost, amortizedNetCost -> EffectiveCost (what attribution splits),
listCost -> ListCost, netCost -> ContractedCost. The response carries no currency: OpenCost
works in its one configured currency, taken here as settings.FINOPS_DEFAULT_CURRENCY.
JSON numbers are read as Decimal from their text, so 1143.6968755312012 is not rounded through
a float before it is quantized to the ledger's 12 places.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any, cast

from django.conf import settings

from billing_ingest.parsers import LineItemChunks, register_billing_parser
from billing_ingest.parsers.bounds import json_loads
from billing_ingest.parsers.rows import LineItemRow
from billing_ingest.parsers.values import (
    CHUNK_ROWS,
    BadValue,
    built_chunks,
    cell_text,
    parse_money,
    parse_timestamp,
)
from finops.core.errors import ImportFormatError

# FOCUS field -> OpenCost cost block.
COSTS = {
    "billed_cost": "invoicedCost",
    "effective_cost": "amortizedNetCost",
    "list_cost": "listCost",
    "contracted_cost": "netCost",
}
REQUIRED_COSTS = ("invoicedCost", "amortizedNetCost")


@register_billing_parser("opencost-cloudcost")
def parse_opencost_cloudcost(
    path: Path, *, file_label: str, chunk_size: int = CHUNK_ROWS
) -> LineItemChunks:
    """Chunks of CostLineItem field dicts from an OpenCost /cloudCost JSON response."""
    items = _items(_load(path, file_label=file_label), file_label=file_label)
    no_data = ImportFormatError("the response holds no cloud cost items", file=file_label)
    return built_chunks(
        enumerate(items, start=1),
        lambda item, number: _line(item, number, file_label=file_label),
        chunk_size=chunk_size,
        empty_error=no_data,
    )


def _load(path: Path, *, file_label: str) -> dict[str, Any]:
    try:
        with path.open(encoding="utf-8-sig") as handle:
            document = json_loads(handle.read(), file_label=file_label, parse_float=Decimal)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ImportFormatError(f"not valid JSON ({exc})", file=file_label) from None
    if not isinstance(document, dict) or not isinstance(document.get("data"), dict):
        raise ImportFormatError(
            "not an OpenCost /cloudCost response (no `data` object)", file=file_label
        )
    data: dict[str, Any] = document["data"]
    return data


def _items(data: dict[str, Any], *, file_label: str) -> list[tuple[str, dict[str, Any]]]:
    # Items are addressed by their JSON path, which is what an error names as the "row".
    sets = data.get("sets")
    if not isinstance(sets, list):
        raise ImportFormatError("`data.sets` is not a list", file=file_label)
    found: list[tuple[str, dict[str, Any]]] = []
    for set_index, cost_set in enumerate(sets):
        costs = cost_set.get("cloudCosts") if isinstance(cost_set, dict) else None
        if not isinstance(costs, dict):
            raise ImportFormatError(
                f"data.sets[{set_index}].cloudCosts is not an object", file=file_label
            )
        found.extend(
            (f"data.sets[{set_index}].cloudCosts.{key}", item) for key, item in costs.items()
        )
    return found


def _line(item: tuple[str, dict[str, Any]], number: int, *, file_label: str) -> LineItemRow:
    where, body = item
    field = "properties"
    try:
        properties = body.get("properties") or {}
        field = "window.start"
        start = parse_timestamp(body["window"]["start"])
        field = "window.end"
        end = parse_timestamp(body["window"]["end"])
        if start is None or end is None or end <= start:
            raise BadValue("the window needs a start before its end")
        row: dict[str, Any] = {}
        for target, block in COSTS.items():
            field = f"{block}.cost"
            cost = (body.get(block) or {}).get("cost")
            if cost is None and block in REQUIRED_COSTS:
                raise BadValue("missing")
            row[target] = parse_money(cost)
    except (BadValue, KeyError, TypeError, AttributeError) as exc:
        detail = str(exc) if isinstance(exc, BadValue) else "missing or not an object"
        raise ImportFormatError(
            f"{detail} (item {number}: {where})", file=file_label, row=number, column=field
        ) from None
    month = start.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    labels = properties.get("labels")
    line: LineItemRow = {
        "billing_period": month.date(),
        "billing_period_start": month,
        "charge_period_start": start,
        "charge_period_end": end,
        "charge_category": "Usage",
        "provider_name": cell_text(properties.get("provider")),
        "billing_account_id": cell_text(properties.get("invoiceEntityID")),
        "sub_account_id": cell_text(properties.get("accountID")),
        "billing_account_name": cell_text(properties.get("invoiceEntityName")),
        "sub_account_name": cell_text(properties.get("accountName")),
        "service_name": cell_text(properties.get("service")),
        "service_category": cell_text(properties.get("category")),
        "resource_id": cell_text(properties.get("providerID")),
        "billing_currency": settings.FINOPS_DEFAULT_CURRENCY,
        "tags": {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {},
    }
    # COSTS maps to CostLineItem money fields, none of them set above.
    cast(dict[str, Any], line).update(row)
    return line
