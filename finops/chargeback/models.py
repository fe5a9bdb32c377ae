"""Closed periods and the statements frozen when a month is closed.

A month is closed while it has a ClosedPeriod row that was not reopened (at most one: a
conditional unique constraint). Closing stores every team's statement as StatementLine rows:
the closed statement is read from them, never recomputed, so a restated bill cannot change it.
What the live ledger says beyond them is booked as adjustment lines in the next open month.
"""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.db import models

from finops.core.money import money_field
from finops.core.months import month_format
from finops.org.models import Team


class ClosedPeriod(models.Model):
    month = models.DateField(help_text="First day of the billing month.")
    closed_at = models.DateTimeField(auto_now_add=True)
    closed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    reason = models.TextField(blank=True)
    # The reporting currency the statements were frozen in.
    currency = models.CharField(max_length=3)
    reopened_at = models.DateTimeField(null=True, blank=True)
    reopened_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reopen_reason = models.TextField(blank=True)

    class Meta:
        ordering = ["-month", "-closed_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["month"],
                condition=models.Q(reopened_at__isnull=True),
                name="one_active_close_per_month",
            )
        ]

    def __str__(self) -> str:
        state = "reopened" if self.reopened_at else "closed"
        return f"{month_format(self.month)} {state} (close #{self.pk})"

    @property
    def is_active(self) -> bool:
        return self.reopened_at is None


class Section(models.TextChoices):
    CATEGORY = "category"
    RUN = "run"
    ENDPOINT = "endpoint"
    ADJUSTMENT = "adjustment"
    # The organisation's shared and idle cost of the month, for the team's share of it.
    ORG = "org"


class StatementLine(models.Model):
    """One figure of a team's closed statement, native and in the close's reporting currency."""

    closed_period = models.ForeignKey(ClosedPeriod, on_delete=models.CASCADE, related_name="lines")
    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="+")
    section = models.CharField(max_length=16, choices=Section.choices)
    # The category, run id, endpoint name; for an adjustment the category it corrects.
    key = models.CharField(max_length=500)
    currency = models.CharField(max_length=3)
    amount = money_field()
    # In ClosedPeriod.currency; null when a rate was missing at the close.
    reporting_amount = money_field(null=True, blank=True)
    gpu_seconds = models.DecimalField(max_digits=24, decimal_places=6, default=Decimal(0))
    # Adjustments only: the closed month they correct, and why.
    origin_month = models.DateField(null=True, blank=True)
    reason = models.TextField(blank=True)

    class Meta:
        indexes = [models.Index(fields=["closed_period", "team", "section"])]

    def __str__(self) -> str:
        return f"{self.section}:{self.key} {self.amount} {self.currency}"


class StatementEconomics(models.Model):
    """What the team's runs bought, wasted and burned in the month, frozen with its statement
    (finops.chargeback.economics.TeamMonthEconomics as JSON, decimals as strings): metrics,
    energy or job logs that arrive after the close do not change a closed statement."""

    closed_period = models.ForeignKey(
        ClosedPeriod, on_delete=models.CASCADE, related_name="economics"
    )
    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="+")
    body = models.JSONField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["closed_period", "team"], name="one_economics_per_close_and_team"
            )
        ]

    def __str__(self) -> str:
        return f"economics of team {self.team_id} in close #{self.closed_period_id}"
