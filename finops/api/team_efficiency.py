"""`GET /api/v1/teams/{slug}/efficiency/?month=YYYY-MM&months=N`: what the team's training runs
bought, month by month (finops.run_metrics.team_efficiency): the N months ending with `month`
(default: the newest month with data; N default 6)."""

from __future__ import annotations

from datetime import date
from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError

from finops.api.schema import month_parameter
from finops.attribution.selectors.overview import month_list_with_data
from finops.core.months import month_add, month_format, month_parse
from finops.run_metrics.team_efficiency import RunFigure, TeamMonthEfficiency

MAX_MONTHS = 24


class EfficiencyQuerySerializer(serializers.Serializer[Any]):
    month = serializers.CharField(required=False)
    months = serializers.IntegerField(required=False, min_value=1, max_value=MAX_MONTHS)


class RunFigureSerializer(serializers.Serializer[RunFigure]):
    run_id = serializers.CharField()
    cost_per_million_tokens = serializers.DecimalField(max_digits=None, decimal_places=12)
    mfu = serializers.DecimalField(max_digits=None, decimal_places=6, allow_null=True)


class TeamMonthEfficiencySerializer(serializers.Serializer[Any]):
    month = serializers.SerializerMethodField()
    currency = serializers.CharField()
    runs_with_metrics = serializers.IntegerField()
    runs_without_metrics = serializers.IntegerField()
    useful_tokens = serializers.IntegerField()
    cost = serializers.DecimalField(
        max_digits=None, decimal_places=12, help_text="of the runs with metrics, every attempt"
    )
    gpu_hours = serializers.DecimalField(max_digits=None, decimal_places=6)
    cost_per_million_tokens = serializers.DecimalField(
        max_digits=None, decimal_places=12, allow_null=True
    )
    mfu = serializers.DecimalField(
        max_digits=None, decimal_places=6, allow_null=True, help_text="GPU-hour weighted"
    )
    best = RunFigureSerializer(allow_null=True, help_text="lowest cost per 1M tokens")
    worst = RunFigureSerializer(allow_null=True, help_text="highest cost per 1M tokens")

    def get_month(self, row: TeamMonthEfficiency) -> str:
        return month_format(row.month)


EFFICIENCY_SCHEMA = extend_schema(
    parameters=[
        month_parameter(required=False, description="YYYY-MM, the last month; default newest"),
        OpenApiParameter(
            "months",
            {"type": "integer", "minimum": 1, "maximum": MAX_MONTHS},
            description="how many months (default 6)",
        ),
    ],
    responses=TeamMonthEfficiencySerializer(many=True),
)


def efficiency_months(params: Any) -> list[date]:
    query = EfficiencyQuerySerializer(data=params)
    query.is_valid(raise_exception=True)
    last: date | None = None
    if "month" in query.validated_data:
        try:
            last = month_parse(query.validated_data["month"])
        except ValueError as exc:
            raise ValidationError({"month": [str(exc)]}) from exc
    else:
        with_data = month_list_with_data()
        last = with_data[0] if with_data else None
    if last is None:
        return []
    count = query.validated_data.get("months", 6)
    return [month_add(last, -i) for i in range(count)]
