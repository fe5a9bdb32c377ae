"""`/api/v1/budgets/`: CRUD with the status of the period containing ?as_of= (default today).

Same permissions as the pages: finance sees and saves any budget; a team lead only their
teams' (organisation and provider budgets are finance's). Validation is the service's
(finops.budgets.services.budget_validate), so the API and the forms reject the same input.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import serializers, status, viewsets
from rest_framework.exceptions import ValidationError as ApiValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from finops.api.cache import cached_read
from finops.budgets.models import Budget, BudgetAlert
from finops.budgets.periods import as_of_parse
from finops.budgets.selectors import (
    BudgetStatus,
    budget_alerts_of_period,
    budget_alerts_of_periods,
    budget_list_visible,
    budget_status,
    budget_statuses,
)
from finops.budgets.services import budget_create, budget_delete, budget_update


class BudgetAlertSerializer(serializers.Serializer[dict[str, Any]]):
    threshold = serializers.IntegerField()
    kind = serializers.ChoiceField(choices=BudgetAlert.Kind.choices)
    sent_at = serializers.DateTimeField(allow_null=True, help_text="when SMTP accepted the email")
    error = serializers.CharField(help_text="the last SMTP error while not sent")


class BudgetWriteSerializer(serializers.Serializer[dict[str, Any]]):
    """The create / update body (validated by the budgets service)."""

    name = serializers.CharField(max_length=200)
    team = serializers.CharField(allow_null=True, required=False, help_text="team slug; null: org")
    tag = serializers.CharField(required=False, allow_blank=True, help_text="key=value (team's)")
    provider = serializers.CharField(required=False, allow_blank=True, help_text="finance only")
    period = serializers.ChoiceField(choices=Budget.Period.choices)
    amount = serializers.DecimalField(max_digits=17, decimal_places=2, coerce_to_string=True)
    currency = serializers.CharField(max_length=3)
    thresholds = serializers.ListField(child=serializers.IntegerField(), required=False)
    forecast_thresholds = serializers.ListField(child=serializers.IntegerField(), required=False)
    recipients = serializers.ListField(child=serializers.EmailField(), required=False)
    active = serializers.BooleanField(required=False)


class BudgetSerializer(BudgetWriteSerializer):
    id = serializers.IntegerField()
    owner = serializers.CharField(allow_null=True)
    as_of = serializers.DateField()
    period_start = serializers.DateField()
    period_end = serializers.DateField()
    actual = serializers.DecimalField(max_digits=30, decimal_places=2)
    forecast = serializers.DecimalField(max_digits=30, decimal_places=2)
    forecast_low = serializers.DecimalField(max_digits=30, decimal_places=2)
    forecast_high = serializers.DecimalField(max_digits=30, decimal_places=2)
    percent_used = serializers.DecimalField(max_digits=12, decimal_places=2)
    alerts = BudgetAlertSerializer(many=True)
    error = serializers.CharField(help_text="why actual/forecast could not be computed (FX)")


def _row(budget: Budget, as_of: date) -> dict[str, Any]:
    s = budget_status(budget=budget, as_of=as_of)
    return _status_row(s, budget_alerts_of_period(budget=budget, period_start=s.period.start))


def _rows(budgets: list[Budget], as_of: date) -> list[dict[str, Any]]:
    """The list's rows from one read of the rollups and one of the alerts, however many."""
    statuses = budget_statuses(budgets=budgets, as_of=as_of)
    alerts = budget_alerts_of_periods(statuses=statuses)
    return [_status_row(s, alerts[s.budget.pk]) for s in statuses]


def _status_row(s: BudgetStatus, alerts: list[BudgetAlert]) -> dict[str, Any]:
    budget = s.budget
    return {
        "id": budget.pk,
        "name": budget.name,
        "team": budget.team.slug if budget.team else None,
        "tag": budget.tag or "",
        "provider": budget.provider_name,
        "period": budget.period,
        "amount": budget.amount,
        "currency": budget.currency,
        "thresholds": budget.thresholds,
        "forecast_thresholds": budget.forecast_thresholds,
        "recipients": budget.recipients,
        "active": budget.active,
        "owner": budget.owner.get_username() if budget.owner else None,
        "as_of": s.as_of,
        "period_start": s.period.start,
        "period_end": s.period.end,
        "actual": s.actual,
        "forecast": s.forecast,
        "forecast_low": s.forecast_low,
        "forecast_high": s.forecast_high,
        "percent_used": s.percent_used,
        "alerts": [
            {
                "threshold": a.threshold,
                "kind": a.kind,
                "sent_at": a.sent_at,
                "error": a.notification.last_error if a.notification and not a.sent_at else "",
            }
            for a in alerts
        ],
        "error": s.error,
    }


AS_OF = OpenApiParameter(
    "as_of", OpenApiTypes.DATE, description="YYYY-MM-DD: the period containing it (default today)"
)


@extend_schema_view(
    list=extend_schema(parameters=[AS_OF], responses=BudgetSerializer(many=True)),
    retrieve=extend_schema(parameters=[AS_OF], responses=BudgetSerializer),
    create=extend_schema(request=BudgetWriteSerializer, responses={201: BudgetSerializer}),
    update=extend_schema(request=BudgetWriteSerializer, responses=BudgetSerializer),
    partial_update=extend_schema(request=BudgetWriteSerializer, responses=BudgetSerializer),
)
class BudgetViewSet(viewsets.ModelViewSet[Budget]):
    """Budgets the caller may see, with actual, forecast (p10..p90), % used and the alerts of
    the period containing ?as_of=. Money as decimal strings."""

    serializer_class = BudgetSerializer  # type: ignore[assignment]

    def get_queryset(self) -> QuerySet[Budget]:
        return budget_list_visible(user=self.request.user).order_by("name", "id")

    def _as_of(self) -> date:
        raw = self.request.query_params.get("as_of", "").strip()
        if not raw:
            return timezone.now().date()
        try:
            return as_of_parse(raw)
        except ValueError as exc:
            raise ApiValidationError({"as_of": [str(exc)]}) from exc

    def _body(self, request: Request) -> dict[str, Any]:
        if not isinstance(request.data, dict):
            raise ApiValidationError({"non_field_errors": ["Send a JSON object."]})
        return dict(request.data)

    @cached_read
    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        as_of = self._as_of()
        page = self.paginate_queryset(self.get_queryset())
        budgets = page if page is not None else list(self.get_queryset())
        rows: Any = _rows(list(budgets), as_of)
        data = BudgetSerializer(rows, many=True).data
        return self.get_paginated_response(data) if page is not None else Response(data)

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return Response(BudgetSerializer(_row(self.get_object(), self._as_of())).data)

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        try:
            budget = budget_create(user=request.user, data=self._body(request))
        except ValidationError as exc:
            raise ApiValidationError(exc.message_dict) from exc
        data = BudgetSerializer(_row(budget, self._as_of())).data
        return Response(data, status=status.HTTP_201_CREATED)

    def update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        budget = self.get_object()
        try:
            budget = budget_update(user=request.user, budget=budget, data=self._body(request))
        except ValidationError as exc:
            raise ApiValidationError(exc.message_dict) from exc
        return Response(BudgetSerializer(_row(budget, self._as_of())).data)

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        budget_delete(user=self.request.user, budget=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)
