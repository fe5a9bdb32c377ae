"""Plain-dict bodies for the hot lists (a runs page, a cost series), the same JSON as the
serializers that document them (RunCostSerializer, CostPointSerializer: the schema still
comes from those), built from `.values()` rows without DRF's per-field machinery, which took
most of a page's CPU (bench/api_load.py). tests/api/test_api_fast_rows.py pins the equality.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from decimal import Decimal
from typing import Any

from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.reverse import reverse

from finops.api.run_efficiency import headlines, row_key
from finops.api.serializers import GPU_HOUR_PLACES
from finops.attribution.inputs.list_cost import MIX_KINDS
from finops.attribution.selectors.timeseries import CostPoint
from finops.core.money import MONEY_PLACES, decimal_text
from finops.core.months import month_format

MONEY_QUANTUM = Decimal(1).scaleb(-MONEY_PLACES)
GPU_HOURS_QUANTUM = Decimal(1).scaleb(-GPU_HOUR_PLACES)
GPU_SECONDS_QUANTUM = Decimal(1).scaleb(-6)
SECONDS_PER_HOUR = Decimal(3600)
# DRF's own field: the same time zone handling and "Z" suffix as the serializer.
_DATETIME = serializers.DateTimeField()
_PK_MARK = "__pk__"

RUN_VALUES = (
    "id",
    "run_id",
    "team__slug",
    "team_id",
    "billing_period",
    "cluster",
    "billing_currency",
    "cost",
    "gpu_seconds",
    "wasted_cost",
    "jobs",
    "failed_jobs",
    "running_jobs",
    "first_start",
    "last_end",
    "list_cost",
    "list_cost_estimated",
    *(f"cost_{kind}" for kind in MIX_KINDS),
)


def _fixed(value: Decimal, quantum: Decimal) -> str:
    """DRF's DecimalField: quantized in the current context (28 digits, half even), "{:f}"."""
    return f"{value.quantize(quantum):f}"


def _datetime(value: datetime | None) -> str | None:
    return _DATETIME.to_representation(value) if value else None


def run_cost_bodies(rows: Iterable[dict[str, Any]], request: Request) -> list[dict[str, Any]]:
    """RunCostSerializer's body for each `.values(*RUN_VALUES)` row, in its field order."""
    url = reverse("api-run-detail", kwargs={"pk": _PK_MARK}, request=request)
    head, _, tail = url.partition(_PK_MARK)
    rows = list(rows)
    efficiency = headlines(row_key(r) for r in rows)
    bodies = []
    for r in rows:
        hours = r["gpu_seconds"] / SECONDS_PER_HOUR
        bodies.append(
            {
                "id": r["id"],
                "url": f"{head}{r['id']}{tail}",
                "run_id": r["run_id"],
                "team": r["team__slug"],
                "month": month_format(r["billing_period"]),
                "cluster": r["cluster"],
                "currency": r["billing_currency"],
                "cost": _fixed(r["cost"], MONEY_QUANTUM),
                "gpu_hours": _fixed(hours, GPU_HOURS_QUANTUM),
                "gpu_seconds": _fixed(r["gpu_seconds"], GPU_SECONDS_QUANTUM),
                "cost_per_gpu_hour": _fixed(r["cost"] / hours, MONEY_QUANTUM) if hours else None,
                "wasted_cost": _fixed(r["wasted_cost"], MONEY_QUANTUM),
                "jobs": r["jobs"],
                "failed_jobs": r["failed_jobs"],
                "running_jobs": r["running_jobs"],
                "first_start": _datetime(r["first_start"]),
                "last_end": _datetime(r["last_end"]),
                "on_demand_cost": _fixed(r["list_cost"], MONEY_QUANTUM),
                "on_demand_cost_estimated": _fixed(r["list_cost_estimated"], MONEY_QUANTUM),
                "mix": {kind: decimal_text(r[f"cost_{kind}"]) for kind in MIX_KINDS},
                "efficiency": efficiency[row_key(r)],
            }
        )
    return bodies


def cost_point_bodies(points: Iterable[CostPoint], group_by: str) -> list[dict[str, Any]]:
    """CostPointSerializer's body: t, the group key named after group_by, cost, currency."""
    return [
        {
            "t": p.t.isoformat(),
            group_by: None if p.key is None else str(p.key),
            "cost": _fixed(p.cost, MONEY_QUANTUM),
            "currency": str(p.currency),
        }
        for p in points
    ]
