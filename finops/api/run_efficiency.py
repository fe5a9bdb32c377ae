"""The `efficiency` object of a run (DESIGN section 9): the whole object on
`GET /api/v1/runs/{id}/`, its headline on the runs list; null when the run has no metrics.

Money and ratios are decimal strings (money with every stored place, in the run's billing
currency, named beside it); counts are integers.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import Any, TypedDict

from finops.attribution.models import RunCost
from finops.core.money import MONEY_PLACES
from finops.run_metrics.selectors import RunEfficiency, RunKey, run_cost_key, run_efficiencies

# The runs list carries these of each run (the detail carries all of EFFICIENCY_SCHEMA).
HEADLINE_FIELDS = ("useful_tokens", "cost_per_million_tokens", "tokens_per_gpu_hour", "mfu")

_DECIMAL = {"type": "string", "format": "decimal", "nullable": True}
_INTEGER = {"type": "integer", "nullable": True}
EFFICIENCY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "nullable": True,
    "description": "What the run bought (null when it has no metrics); money in `currency`.",
    "properties": {
        "useful_tokens": _INTEGER,
        "samples": _INTEGER,
        "steps": _INTEGER,
        "cost_per_million_tokens": _DECIMAL,
        "cost_per_thousand_samples": _DECIMAL,
        "tokens_per_gpu_hour": _DECIMAL,
        "mfu": {**_DECIMAL, "description": "model FLOPs utilisation, 0..1"},
        "flops_per_token": _INTEGER,
        "peak_flops_per_gpu": {**_DECIMAL, "description": "dense, never the sparsity figure"},
        "peak_source": {"type": "string"},
        "dtype": {"type": "string"},
        "currency": {"type": "string"},
        "cost": {**_DECIMAL, "description": "the run's cost over every month and attempt"},
        "gpu_hours": {"type": "string", "format": "decimal"},
        "gpu_model": {"type": "string"},
    },
}
HEADLINE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "nullable": True,
    "properties": {name: EFFICIENCY_SCHEMA["properties"][name] for name in HEADLINE_FIELDS},
}


class EfficiencyBody(TypedDict):
    """The `efficiency` object of a run's detail (EFFICIENCY_SCHEMA)."""

    useful_tokens: int | None
    samples: int | None
    steps: int | None
    cost_per_million_tokens: str | None
    cost_per_thousand_samples: str | None
    tokens_per_gpu_hour: str | None
    mfu: str | None
    flops_per_token: int | None
    peak_flops_per_gpu: str | None
    peak_source: str
    dtype: str
    currency: str
    cost: str | None
    gpu_hours: str
    gpu_model: str


class HeadlineBody(TypedDict):
    """The `efficiency` headline of a run on the runs list (HEADLINE_FIELDS)."""

    useful_tokens: int | None
    cost_per_million_tokens: str | None
    tokens_per_gpu_hour: str | None
    mfu: str | None


def _money(value: Decimal | None) -> str | None:
    return None if value is None else f"{value.quantize(Decimal(1).scaleb(-MONEY_PLACES)):f}"


def _text(value: Decimal | None) -> str | None:
    return None if value is None else f"{value:f}"


def efficiency_body(e: RunEfficiency | None) -> EfficiencyBody | None:
    if e is None:
        return None
    return {
        "useful_tokens": e.useful_tokens,
        "samples": e.samples,
        "steps": e.steps,
        "cost_per_million_tokens": _money(e.cost_per_million_tokens),
        "cost_per_thousand_samples": _money(e.cost_per_thousand_samples),
        "tokens_per_gpu_hour": _text(e.tokens_per_gpu_hour),
        "mfu": _text(e.mfu),
        "flops_per_token": e.flops_per_token,
        "peak_flops_per_gpu": _text(e.peak_flops_per_gpu),
        "peak_source": e.peak_source,
        "dtype": e.dtype,
        "currency": e.currency,
        "cost": _money(e.cost),
        "gpu_hours": f"{e.gpu_hours.quantize(Decimal('0.000001')):f}",
        "gpu_model": e.gpu_model,
    }


def headline_body(e: RunEfficiency | None) -> HeadlineBody | None:
    body = efficiency_body(e)
    if body is None:
        return None
    return HeadlineBody(
        useful_tokens=body["useful_tokens"],
        cost_per_million_tokens=body["cost_per_million_tokens"],
        tokens_per_gpu_hour=body["tokens_per_gpu_hour"],
        mfu=body["mfu"],
    )


def run_key(run: RunCost) -> RunKey:
    return run_cost_key(run)


def row_key(row: dict[str, Any]) -> RunKey:
    """The key of a `.values(*RUN_VALUES)` row (finops.api.rows)."""
    return RunKey(row["team_id"], row["team__slug"] or "", row["run_id"], row["billing_currency"])


def headlines(keys: Iterable[RunKey]) -> dict[RunKey, HeadlineBody | None]:
    return {key: headline_body(e) for key, e in run_efficiencies(keys).items()}
