"""`/api/v1/budgets/`: CRUD with the status of the period containing ?as_of= (default today).

Same permissions as the pages: finance sees and saves any budget; a team lead only their
teams' (organisation and provider budgets are finance's). Validation is the service's
(finops.budgets.validation.budget_validate), so the API and the forms reject the same input.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db.models import QuerySet
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import serializers, status, viewsets
from rest_framework.exceptions import ValidationError as ApiValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from finops.api.cache import cached_read
from finops.api.fields import (
    AsciiDecimalField,
    StrictBooleanField,
    StrictCharField,
    StrictEmailField,
    StrictIntegerField,
    iso_date_parse,
)
from finops.budgets.models import Budget, BudgetAlert
from finops.budgets.periods import as_of_parse
from finops.budgets.recipients import budget_no_recipient_warning, budget_recipient_list
from finops.budgets.selectors import (
    BudgetStatus,
    budget_alerts_of_period,
    budget_alerts_of_periods,
    budget_list_visible,
    budget_status,
    budget_statuses,
)
from finops.budgets.services import budget_create, budget_delete, budget_update
from finops.budgets.validation import MAX_THRESHOLDS, THRESHOLD_MAX, THRESHOLD_MIN
from finops.core.months import MONTH_PATTERN


class BudgetAlertSerializer(serializers.Serializer[dict[str, Any]]):
    threshold = serializers.IntegerField()
    kind = serializers.ChoiceField(choices=BudgetAlert.Kind.choices)
    crossed_on = serializers.DateField(
        allow_null=True,
        help_text="the day the threshold was crossed: the first day whose cumulative actual (or "
        "forecast) reached it; null only on alerts raised before this was recorded",
    )
    raised_as_of = serializers.DateField(help_text="the day evaluated when it was raised")
    sent_at = serializers.DateTimeField(allow_null=True, help_text="when SMTP accepted the email")
    error = serializers.CharField(help_text="the last SMTP error while not sent")


class BudgetWriteSerializer(serializers.Serializer[dict[str, Any]]):
    """The create / update body: its JSON types checked here (strict: finops.api.fields),
    its rules (a team the caller may budget for, FX rates, thresholds) by the budgets service."""

    name = StrictCharField(max_length=200)
    team = StrictCharField(allow_null=True, required=False, help_text="team slug; null: org")
    tag = StrictCharField(required=False, allow_blank=True, help_text="key=value (team's)")
    provider = StrictCharField(required=False, allow_blank=True, help_text="finance only")
    period = serializers.ChoiceField(
        choices=Budget.Period.choices, required=False, help_text="default: month"
    )
    # The budgets service checks the digits (15, 2 places after trailing zeros are dropped: a
    # client may send back "1950.000000000000"); the schema says the same with its pattern.
    amount = AsciiDecimalField(
        max_digits=None,
        decimal_places=None,
        coerce_to_string=True,
        help_text='> 0, e.g. "1950.00"',
        schema_pattern=r"^-?[0-9]{1,15}(\.[0-9]{0,2}0*)?$",
    )
    currency = StrictCharField(
        required=False,
        help_text="ISO 4217; default: the reporting currency",
        validators=[RegexValidator(r"^[A-Za-z]{3}$", message="An ISO 4217 code such as USD.")],
    )
    thresholds = serializers.ListField(
        child=StrictIntegerField(),
        required=False,
        help_text=f"% of the amount on actual cost: {THRESHOLD_MIN} to {THRESHOLD_MAX}, at most "
        f"{MAX_THRESHOLDS} (the budgets service checks them)",
    )
    forecast_thresholds = serializers.ListField(
        child=StrictIntegerField(),
        required=False,
        help_text=f"% of the amount on the forecast: {THRESHOLD_MIN} to {THRESHOLD_MAX}, at most "
        f"{MAX_THRESHOLDS}",
    )
    recipients = serializers.ListField(child=StrictEmailField(), required=False)
    active = StrictBooleanField(required=False, help_text="true or false (default true)")


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


class BudgetDetailSerializer(BudgetSerializer):
    """One budget (read, create, update): the list's row plus who its alerts go to."""

    receiving = serializers.ListField(
        child=serializers.EmailField(),
        help_text="who gets its alert emails now: the team's leads with an address and the "
        "listed recipients, less those who opted out",
    )
    warnings = serializers.ListField(
        child=serializers.CharField(), help_text="e.g. that nobody receives its alerts"
    )


def _row(budget: Budget, as_of: date) -> dict[str, Any]:
    s = budget_status(budget=budget, as_of=as_of)
    row = _status_row(s, budget_alerts_of_period(budget=budget, period_start=s.period.start))
    receiving = budget_recipient_list(budget=budget).receiving
    warning = budget_no_recipient_warning(budget=budget, receiving=receiving)
    return {**row, "receiving": receiving, "warnings": [warning] if warning else []}


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
                "crossed_on": a.crossed_on,
                "raised_as_of": a.as_of,
                "sent_at": a.sent_at,
                "error": a.notification.last_error if a.notification and not a.sent_at else "",
            }
            for a in alerts
        ],
        "error": s.error,
    }


AS_OF = OpenApiParameter(
    "as_of",
    OpenApiTypes.DATE,
    # The years as_of_parse takes (MIN_YEAR to MAX_YEAR), as the month parameters'.
    pattern=MONTH_PATTERN.removesuffix("$") + r"-[0-9]{2}$",
    description="YYYY-MM-DD from 1970-01-01 to 9998-12-31: the period containing it (default "
    "today)",
)


@extend_schema_view(
    list=extend_schema(parameters=[AS_OF], responses=BudgetSerializer(many=True)),
    retrieve=extend_schema(parameters=[AS_OF], responses=BudgetDetailSerializer),
    create=extend_schema(request=BudgetWriteSerializer, responses={201: BudgetDetailSerializer}),
    update=extend_schema(request=BudgetWriteSerializer, responses=BudgetDetailSerializer),
    partial_update=extend_schema(request=BudgetWriteSerializer, responses=BudgetDetailSerializer),
)
class BudgetViewSet(viewsets.ModelViewSet[Budget]):
    """Budgets the caller may see, with actual, forecast (p10..p90), % used and the alerts of
    the period containing ?as_of=. Money as decimal strings."""

    serializer_class = BudgetSerializer  # type: ignore[assignment]

    def get_queryset(self) -> QuerySet[Budget]:
        return budget_list_visible(user=self.request.user).order_by("name", "id")

    def _as_of(self) -> date:
        raw = self.request.query_params.get("as_of")
        if raw is None:
            return timezone.now().date()
        try:
            iso_date_parse(raw)  # exactly YYYY-MM-DD
            return as_of_parse(raw)  # of the years a forecast window can reach around
        except ValueError as exc:
            raise ApiValidationError({"as_of": [str(exc)]}) from exc

    def _body(self, request: Request) -> dict[str, Any]:
        """The JSON object sent, once its values have their JSON types (BudgetWriteSerializer:
        `"active": "maybe"` or `"amount": "٣"` is a 400, not true or 3.00); the service then
        validates the rules. PATCH checks only the keys it sends."""
        if not isinstance(request.data, dict):
            raise ApiValidationError({"non_field_errors": ["Send a JSON object."]})
        types = BudgetWriteSerializer(data=request.data, partial=request.method == "PATCH")
        types.is_valid(raise_exception=True)
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
        return Response(BudgetDetailSerializer(_row(self.get_object(), self._as_of())).data)

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        try:
            budget = budget_create(user=request.user, data=self._body(request))
        except ValidationError as exc:
            raise ApiValidationError(exc.message_dict) from exc
        data = BudgetDetailSerializer(_row(budget, self._as_of())).data
        return Response(data, status=status.HTTP_201_CREATED)

    def update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        budget = self.get_object()
        try:
            budget = budget_update(user=request.user, budget=budget, data=self._body(request))
        except ValidationError as exc:
            raise ApiValidationError(exc.message_dict) from exc
        return Response(BudgetDetailSerializer(_row(budget, self._as_of())).data)

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        budget_delete(user=self.request.user, budget=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)
