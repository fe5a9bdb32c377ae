"""CSV downloads of the API's lists: `?format=csv` on any list endpoint, with the same filters.

A CSV is every matching row, not one page (finops.api.pagination). Nested values are flattened to
dotted columns (`team.slug`); a view can shape its own rows with a `csv_rows(data)` method.
Every text cell is neutralised against formula injection before it is written.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

# Only renderers here: DRF imports this module while rest_framework.views is loading.
from rest_framework.renderers import BaseRenderer, JSONRenderer

from finops.core.csv_safety import csv_safe
from finops.core.money import decimal_text


def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(value, Mapping):
        for key, inner in value.items():
            _flatten(inner, f"{prefix}.{key}" if prefix else str(key), out)
    elif isinstance(value, list) and not all(isinstance(v, Mapping) for v in value):
        out[prefix] = "; ".join(_text(v) for v in value)
    elif isinstance(value, list):
        out[prefix] = json.dumps(value, default=_text)
    else:
        out[prefix] = value


def rows_of(data: Any) -> list[dict[str, Any]]:
    """The rows of a list response (a list, or a page's `results`), or of one object."""
    if isinstance(data, Mapping) and isinstance(data.get("results"), list):
        data = data["results"]
    items = data if isinstance(data, list) else [data]
    rows = []
    for item in items:
        flat: dict[str, Any] = {}
        _flatten(item, "", flat)
        rows.append(flat)
    return rows


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Decimal):
        return decimal_text(value)
    return str(value)


def _cell(value: Any) -> str:
    return csv_safe(_text(value))


def write_csv(rows: Iterable[Mapping[str, Any]]) -> str:
    rows = list(rows)
    header: list[str] = []
    for row in rows:
        header.extend(k for k in row if k not in header)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow([_cell(h) for h in header])
    for row in rows:
        writer.writerow([_cell(row.get(h)) for h in header])
    return buffer.getvalue()


class CsvRenderer(BaseRenderer):
    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        context = renderer_context or {}
        view = context.get("view")
        response = context.get("response")
        if response is not None and response.status_code >= 400:
            # An error is JSON, as documented, whatever format was asked for: `{"detail": ...}`
            # or each field's messages, not a CSV of them.
            as_json = JSONRenderer()
            response["Content-Type"] = as_json.media_type
            return as_json.render(data, as_json.media_type, context)
        if view is not None and hasattr(view, "csv_rows"):
            rows = view.csv_rows(data)
        else:
            rows = rows_of(data)
        if response is not None:
            name = getattr(view, "basename", None) or type(view).__name__.lower()
            response["Content-Disposition"] = f'attachment; filename="{name}.csv"'
        return write_csv(rows).encode("utf-8")
