"""Budgets, the alerts they raised, and who opted out of their emails."""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.db import models

from finops.core.money import money_field
from finops.notifications.models import EmailNotification
from finops.org.models import Team


class Budget(models.Model):
    """An amount for a scope and a period, with thresholds on actual cost and on forecast.

    Scope: `team` alone (the team's ledger), `team` + tag (`tag_key`=`tag_value`: the line items
    carrying that tag, a project; the team owns the budget), `provider_name` (that provider's
    ledger), or none of them: the whole organisation. Provider and organisation budgets are
    finance's only.
    """

    class Period(models.TextChoices):
        MONTH = "month", "Month"
        QUARTER = "quarter", "Quarter"
        YEAR = "year", "Year"

    class Scope(models.TextChoices):
        TEAM = "team", "Team"
        TAG = "tag", "Team tag filter"
        PROVIDER = "provider", "Provider"
        ORG = "org", "Organisation"

    name = models.CharField(max_length=200)
    team = models.ForeignKey(
        Team, null=True, blank=True, on_delete=models.CASCADE, related_name="budgets"
    )
    tag_key = models.CharField(max_length=200, blank=True)
    tag_value = models.CharField(max_length=500, blank=True)
    provider_name = models.CharField(max_length=100, blank=True)
    period = models.CharField(max_length=16, choices=Period.choices, default=Period.MONTH)
    amount = money_field()
    currency = models.CharField(max_length=3)
    # Percentages of the amount, ascending (the bounds: finops.budgets.services).
    thresholds = models.JSONField(default=list)
    forecast_thresholds = models.JSONField(default=list)
    # Addresses beside the team's leads.
    recipients = models.JSONField(default=list, blank=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="owned_budgets",
    )
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "id"]
        constraints = [
            models.CheckConstraint(condition=models.Q(amount__gt=0), name="budget_amount_positive"),
            models.CheckConstraint(
                condition=models.Q(team__isnull=True) | models.Q(provider_name=""),
                name="budget_team_or_provider",
            ),
            models.CheckConstraint(
                condition=models.Q(tag_key="") | models.Q(team__isnull=False),
                name="budget_tag_needs_team",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def scope(self) -> str:
        if self.team_id and self.tag_key:
            return self.Scope.TAG
        if self.team_id:
            return self.Scope.TEAM
        if self.provider_name:
            return self.Scope.PROVIDER
        return self.Scope.ORG

    @property
    def scope_label(self) -> str:
        if self.scope == self.Scope.TAG and self.team is not None:
            return f"{self.team.name}: {self.tag_key}={self.tag_value}"
        if self.team is not None:
            return self.team.name
        if self.provider_name:
            return f"Provider {self.provider_name}"
        return "Whole organisation"

    @property
    def tag(self) -> str | None:
        return f"{self.tag_key}={self.tag_value}" if self.tag_key else None


class BudgetAlert(models.Model):
    """One threshold reached in one period. The unique constraint is what makes the email
    once-only: evaluations insert and only the one whose insert succeeded names it in its email
    (one email per budget and evaluation, naming every threshold it raised)."""

    class Kind(models.TextChoices):
        ACTUAL = "actual", "Actual"
        FORECAST = "forecast", "Forecast"

    budget = models.ForeignKey(Budget, on_delete=models.CASCADE, related_name="alerts")
    period_start = models.DateField()
    kind = models.CharField(max_length=16, choices=Kind.choices)
    threshold = models.PositiveIntegerField()
    # What the evaluation saw when it raised the alert (budget currency).
    as_of = models.DateField()
    # The day the threshold was crossed: the first ledger day whose cumulative actual reached it
    # (actual), or the first day whose forecast did (forecast); as_of or earlier (a budget made
    # after the fact, a bill delivered late). Null only on alerts raised before it was recorded.
    crossed_on = models.DateField(null=True, blank=True)
    actual = money_field()
    forecast = money_field()
    notification = models.ForeignKey(
        EmailNotification, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-period_start", "kind", "threshold"]
        constraints = [
            models.UniqueConstraint(
                fields=["budget", "period_start", "kind", "threshold"],
                name="budget_alert_once",
            )
        ]

    def __str__(self) -> str:
        return f"{self.budget} {self.period_start} {self.kind} {self.threshold} %"

    @property
    def sent_at(self) -> dt.datetime | None:
        """When the SMTP server accepted the email; None until then."""
        n = self.notification
        if n is not None and n.status == EmailNotification.Status.SENT:
            return n.sent_at
        return None


class BudgetOptOut(models.Model):
    """A user who asked not to get a budget's emails."""

    budget = models.ForeignKey(Budget, on_delete=models.CASCADE, related_name="opt_outs")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["budget", "user"], name="budget_opt_out_once")
        ]

    def __str__(self) -> str:
        return f"{self.user} opted out of {self.budget}"


class BudgetEvaluation(models.Model):
    """A budget's newest evaluation of one of its periods: what the pipeline's budgets step (and
    check_budgets, and a budget's save) computed, so that the overview and team pages read one
    row per budget instead of forecasting every budget on each request."""

    class Status(models.TextChoices):
        OK = "ok", "Within budget"
        AT_RISK = "at_risk", "Forecast to go over"
        OVER = "over", "Over budget"
        ERROR = "error", "Not evaluated (error)"

    budget = models.ForeignKey(Budget, on_delete=models.CASCADE, related_name="evaluations")
    # The budget's period kind when evaluated: a budget changed from month to quarter no longer
    # owns its month rows (pages match it against budget.period).
    period = models.CharField(max_length=16, choices=Budget.Period.choices)
    period_start = models.DateField()
    period_end = models.DateField()
    as_of = models.DateField()
    currency = models.CharField(max_length=3)
    status = models.CharField(max_length=16, choices=Status.choices)
    actual = money_field()
    forecast = money_field()
    forecast_low = money_field()
    forecast_high = money_field()
    method = models.CharField(max_length=200, blank=True)
    error = models.TextField(blank=True)
    evaluated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["budget_id", "-period_start"]
        constraints = [
            models.UniqueConstraint(
                fields=["budget", "period", "period_start"], name="budget_evaluation_once"
            )
        ]
        indexes = [models.Index(fields=["period_start", "period_end"])]

    def __str__(self) -> str:
        return f"{self.budget} {self.period_start} as of {self.as_of}: {self.status}"
