"""API of the month end: `GET /api/v1/periods/YYYY-MM/checks/`, the checklist finance goes
through before closing a month (DESIGN 10). Finance (and viewers) only."""

from __future__ import annotations

from typing import Any

from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from finops.chargeback.checks import CHECK_STATUSES, checks_status, period_checks
from finops.core.months import MONTH_PATTERN, month_format, month_parse
from finops.org.permissions import IsFinance


class CheckFigureSerializer(serializers.Serializer[Any]):
    # DRF's metaclass takes declared fields off the class, so this does not shadow Field.label.
    label = serializers.CharField()  # type: ignore[assignment]
    value = serializers.CharField(help_text="A decimal string; money to the cent.")
    unit = serializers.CharField(
        help_text="The currency (ISO 4217) of a money figure, `%` for a share, empty for a count."
    )


class PeriodCheckSerializer(serializers.Serializer[Any]):
    name = serializers.CharField(
        help_text=(
            "imports, open_jobs, attribution, anomalies, unallocated, recipients, budgets, fx_rates"
        )
    )
    title = serializers.CharField()
    status = serializers.ChoiceField(choices=CHECK_STATUSES)
    detail = serializers.CharField(help_text="What was found.")
    action = serializers.CharField(help_text="What to do about it.")
    link = serializers.CharField(help_text="The page where it is done (a path).")
    figures = CheckFigureSerializer(many=True)


class PeriodChecksSerializer(serializers.Serializer[Any]):
    month = serializers.CharField()
    status = serializers.ChoiceField(choices=CHECK_STATUSES, help_text="The worst one.")
    checks = PeriodCheckSerializer(many=True)


class PeriodChecksView(APIView):
    """The month-end checklist of a billing month: failed or stale imports, a ledger older than
    the month's last import, open anomalies, the unallocated share of the amortised bill above
    FINOPS_CLOSE_UNALLOCATED_PERCENT, teams whose statement has no recipient, budgets over,
    missing FX rates. Each check `{name, status: ok|warn|fail, detail, link}` plus its title,
    figures and action. Closing is not blocked by a warning."""

    permission_classes = [IsAuthenticated, IsFinance]

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "month", OpenApiTypes.STR, OpenApiParameter.PATH, pattern=MONTH_PATTERN,
                description="Billing month, YYYY-MM.",
            )
        ],
        responses=PeriodChecksSerializer,
    )  # fmt: skip
    def get(self, request: Request, month: str) -> Response:
        try:
            when = month_parse(month)
        except ValueError as exc:
            raise Http404("Months are YYYY-MM.") from exc
        checks = period_checks(month=when)
        body = {"month": month_format(when), "status": checks_status(checks), "checks": checks}
        return Response(PeriodChecksSerializer(body).data)
