"""Waste by cause on the API (DESIGN section 9, issue 31).

- the `waste` object and the `attempts` timeline of `GET /api/v1/runs/{id}/` (the run over
  every month and attempt; money in the run's billing currency, named beside it);
- `GET /api/v1/waste/?month=YYYY-MM[&team=slug]`: the parts summed per team and currency over
  the month's runs (teams the caller may see; runs no team owns for finance).

`total` = rework + restart + abandoned + idle_in_allocation; `cancelled` is apart (a cancelled
attempt may be a decision, not a loss). `estimated` is true when a part comes from the pricing
assumptions (checkpoint interval, restart minutes) because the run has no metrics for it.
A service's attempts (`service`: a server or runner, not a training run) have no rework,
restart or abandoned part: they write no checkpoints.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from finops.api.run_efficiency import run_key
from finops.api.schema import BAD_REQUEST, month_parameter, team_parameter
from finops.api.serializers import PricingQuerySerializer, RunCostDetailSerializer
from finops.api.teams import teams_asked
from finops.attribution.models import RunCost
from finops.core.money import MONEY_QUANTUM
from finops.core.months import month_parse
from finops.economics.advice_selectors import checkpoint_advice_stored
from finops.org.permissions import user_is_finance
from finops.waste.advice import CheckpointAdvice, checkpoint_advice
from finops.waste.causes import CAUSES, WasteParts
from finops.waste.selectors import AttemptWaste, RunWaste, TeamWaste, run_waste, team_month_waste

_MONEY = {"type": "string", "format": "decimal"}
_PARTS = {cause: _MONEY for cause in CAUSES}
WASTE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": (
        "Waste by cause over every month and attempt of the run, in `currency`; total = rework "
        "+ restart + abandoned + idle_in_allocation (cancelled apart)."
    ),
    "properties": {
        "currency": {"type": "string"},
        "cost": {**_MONEY, "description": "the run's cost, every attempt"},
        "total": _MONEY,
        **_PARTS,
        "estimated": {"type": "boolean"},
        "estimated_causes": {"type": "array", "items": {"type": "string"}},
        "assumptions": {
            "type": "object",
            "properties": {
                "checkpoint_interval_minutes": _MONEY,
                "restart_minutes": _MONEY,
                "has_metrics": {"type": "boolean"},
            },
        },
    },
}
ATTEMPTS_SCHEMA: dict[str, Any] = {
    "type": "array",
    "description": "The run's attempts in time order, each with its cost and waste by cause.",
    "items": {
        "type": "object",
        "properties": {
            "cluster": {"type": "string"},
            "job_id": {"type": "string"},
            "attempt": {"type": "integer"},
            "state": {"type": "string"},
            "start": {"type": "string", "format": "date-time", "nullable": True},
            "end": {"type": "string", "format": "date-time", "nullable": True},
            "interrupted": {"type": "boolean"},
            "resumed": {"type": "boolean"},
            "checkpoints": {"type": "array", "items": {"type": "string", "format": "date-time"}},
            "cost": _MONEY,
            "waste": {"type": "object", "properties": {**_PARTS, "estimated": {"type": "boolean"}}},
        },
    },
}


def _money(value: Decimal) -> str:
    return f"{value.quantize(MONEY_QUANTUM):f}"


def parts_body(parts: WasteParts) -> dict[str, Any]:
    return {
        "total": _money(parts.total),
        **{cause: _money(getattr(parts, cause)) for cause in CAUSES},
        "estimated": parts.estimated,
        "estimated_causes": sorted(parts.estimated_causes),
    }


def waste_body(waste: RunWaste) -> dict[str, Any]:
    return {
        "currency": waste.key.currency,
        "cost": _money(waste.cost),
        **parts_body(waste.parts),
        "assumptions": {
            "checkpoint_interval_minutes": f"{waste.settings.checkpoint_interval_minutes:f}",
            "restart_minutes": f"{waste.settings.restart_minutes:f}",
            "has_metrics": waste.has_metrics,
        },
    }


def _iso(value: Any) -> str | None:
    return None if value is None else value.isoformat().replace("+00:00", "Z")


def attempt_body(row: AttemptWaste) -> dict[str, Any]:
    a = row.attempt
    return {
        "cluster": a.cluster,
        "job_id": a.job_id,
        "attempt": a.attempt,
        "state": a.state,
        "start": _iso(a.start),
        "end": _iso(a.end),
        "interrupted": row.shares.interrupted,
        "resumed": row.shares.resumed,
        # A server or runner (JobRecord.service): no rework, restart or abandoned part.
        "service": a.service,
        "checkpoints": [_iso(t) for t in row.shares.checkpoints],
        "cost": _money(a.cost),
        "waste": {
            **{cause: _money(getattr(row.parts, cause)) for cause in CAUSES},
            "estimated": row.parts.estimated,
        },
    }


class RunWasteDetailSerializer(RunCostDetailSerializer):
    """The run detail with its `waste` and `attempts`."""

    waste = serializers.SerializerMethodField()
    attempts = serializers.SerializerMethodField()

    class Meta(RunCostDetailSerializer.Meta):
        fields = [*RunCostDetailSerializer.Meta.fields, "waste", "attempts"]

    def _waste(self, obj: RunCost) -> RunWaste:
        # `waste` and `attempts` read the run once (the detail serializes one object).
        cached: RunWaste | None = getattr(self, "_run_waste", None)
        if cached is None or cached.key != run_key(obj):
            cached = run_waste(run_key(obj))
            self._run_waste = cached
        return cached

    @extend_schema_field(WASTE_SCHEMA)
    def get_waste(self, obj: RunCost) -> dict[str, Any]:
        """Waste by cause (DESIGN section 9)."""
        return waste_body(self._waste(obj))

    @extend_schema_field(ATTEMPTS_SCHEMA)
    def get_attempts(self, obj: RunCost) -> list[dict[str, Any]]:
        return [attempt_body(row) for row in self._waste(obj).attempts]


def team_waste_body(row: TeamWaste) -> dict[str, Any]:
    return {
        "team": row.team.slug if row.team else None,
        "currency": row.currency,
        "cost": _money(row.cost),
        "runs": row.runs,
        **parts_body(row.parts),
    }


TEAM_WASTE_SCHEMA: dict[str, Any] = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {
            "team": {"type": "string", "nullable": True},
            "currency": {"type": "string"},
            "cost": _MONEY,
            "runs": {"type": "integer"},
            "total": _MONEY,
            **_PARTS,
            "estimated": {"type": "boolean"},
            "estimated_causes": {"type": "array", "items": {"type": "string"}},
        },
    },
}


class WasteView(APIView):
    """Waste by cause per team (and billing currency) of a month's runs: rework, restart,
    abandoned, cancelled (apart from total), idle_in_allocation; `estimated` when a part comes
    from the pricing assumptions. Teams the caller may see; `team` narrows."""

    @extend_schema(
        parameters=[month_parameter(required=True), team_parameter()],
        responses={200: TEAM_WASTE_SCHEMA, 400: BAD_REQUEST},
    )
    def get(self, request: Request) -> Response:
        query = PricingQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        month = month_parse(query.validated_data["month"])
        slug = query.validated_data.get("team")
        teams = teams_asked(user=request.user, slug=slug)
        finance = user_is_finance(request.user)
        rows = team_month_waste(month=month, teams=teams, include_unowned=finance and not slug)
        return Response([team_waste_body(row) for row in rows])


def advice_body(row: CheckpointAdvice) -> dict[str, Any]:
    def text(value: Decimal | None) -> str | None:
        return None if value is None else f"{value:f}"

    return {
        "team": row.team.slug if row.team else None,
        "cluster": row.cluster,
        "currency": row.currency,
        "pricing": row.pricing,
        "cost": _money(row.cost),
        "attempt_hours": text(row.attempt_hours),
        "gpu_hours": text(row.gpu_hours),
        "interruptions": row.interruptions,
        "interruptions_per_gpu_hour": text(row.interruptions_per_gpu_hour),
        "interruptions_per_1000_gpu_hours": text(row.interruptions_per_thousand_gpu_hours),
        "mean_hours_between_interruptions": text(row.mean_hours_between_interruptions),
        "capacity_interruptions": row.capacity_interruptions,
        "capacity_interruptions_per_1000_gpu_hours": text(
            row.capacity_interruptions_per_thousand_gpu_hours
        ),
        "current_interval_minutes": text(row.current_interval_minutes),
        "current_interval_source": row.current_interval_source,
        "optimal_interval_minutes": text(row.optimal_interval_minutes),
        "monthly_saving": _money(row.monthly_saving),
        "measured_utilisation": text(row.measured_utilisation),
        "idle_in_allocation": _money(row.idle_in_allocation),
        "action": row.action,
        "assumptions": {
            "checkpoint_write_minutes": text(row.checkpoint_write_minutes),
            "model": "Young/Daly: optimal interval = sqrt(2 x write time x mean time between "
            "interruptions); loss = write / interval + interval / (2 x mean time between "
            "interruptions)",
        },
    }


class WasteAdviceView(APIView):
    """What to change, with money: per team, cluster, currency and pricing category (`pricing`:
    spot, on_demand, commitment, other, as the ledger says the attempts' cost was bought; service:
    the service jobs', servers and runners that write no checkpoints, no interval advised) of a
    month, the observed interruption rate, the Young/Daly checkpoint interval and what it would
    have saved this month, the measured GPU utilisation and the allocated cost left idle. Teams
    the caller may see; `team` narrows."""

    @extend_schema(
        parameters=[month_parameter(required=True), team_parameter()],
        responses={200: {"type": "array", "items": {"type": "object"}}, 400: BAD_REQUEST},
    )
    def get(self, request: Request) -> Response:
        query = PricingQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        month = month_parse(query.validated_data["month"])
        slug = query.validated_data.get("team")
        teams = teams_asked(user=request.user, slug=slug)
        finance = user_is_finance(request.user)
        unowned = finance and not slug
        # Stored by the pipeline (finops.economics), else computed now (not stored yet, or
        # stored with other waste settings).
        rows = checkpoint_advice_stored(month=month, teams=teams, include_unowned=unowned)
        if rows is None:
            rows = checkpoint_advice(month=month, teams=teams, include_unowned=unowned)
        return Response([advice_body(row) for row in rows])
