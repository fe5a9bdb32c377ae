"""Reads for the demo summary: what got ingested and how it was attributed."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from typing import Any

from django.db.models import Max, QuerySet

from billing_ingest.models import CostLineItem, ImportBatch, JobRecord
from finops.attribution.models import AllocatedCost
from finops.budgets.models import BudgetAlert
from finops.demo.fleet import Month
from finops.inference.models import EndpointCost
from finops.notifications.models import EmailNotification


@dataclass(frozen=True)
class DemoSummary:
    line_items: int
    invoiced: Decimal
    effective: Decimal
    jobs: int
    allocated: Decimal
    by_category: dict[str, Decimal] = field(default_factory=dict)

    @property
    def difference(self) -> Decimal:
        return self.effective - self.allocated


def _exact_sum(queryset: QuerySet[Any], field: str) -> Decimal:
    # SQLite SUM() over decimal columns is a float sum; add the stored Decimals in Python.
    return sum(queryset.values_list(field, flat=True).iterator(chunk_size=5000), Decimal(0))


def demo_summary(*, month: Month, clusters: list[str]) -> DemoSummary:
    """Totals of the month's current (non-superseded) line items, jobs and ledger."""
    period = month.start.date()
    items = CostLineItem.objects.settled().filter(billing_period=period)
    ledger = AllocatedCost.objects.filter(billing_period=period)
    categories = sorted(set(ledger.values_list("category", flat=True).distinct()))
    by_category = {
        category: _exact_sum(ledger.filter(category=category), "amount") for category in categories
    }
    jobs = JobRecord.objects.filter(
        cluster__in=clusters, batch__status=ImportBatch.Status.SUCCEEDED
    ).count()
    return DemoSummary(
        line_items=items.count(),
        invoiced=_exact_sum(items, "billed_cost"),
        effective=_exact_sum(items, "effective_cost"),
        jobs=jobs,
        allocated=sum(by_category.values(), Decimal(0)),
        by_category=by_category,
    )


@dataclass(frozen=True)
class AccountBalance:
    provider: str
    account: str
    currency: str
    effective: Decimal
    allocated: Decimal

    @property
    def difference(self) -> Decimal:
        return self.effective - self.allocated


def demo_reconciliation(*, month: Month) -> list[AccountBalance]:
    """Per provider, billing account and currency: the month's EffectiveCost and its ledger."""
    period = month.start.date()
    effective: dict[tuple[str, str, str], Decimal] = defaultdict(Decimal)
    items = (
        CostLineItem.objects.settled()
        .filter(billing_period=period)
        .values_list("provider_name", "billing_account_id", "billing_currency", "effective_cost")
    )
    for provider, account, currency, amount in items.iterator(chunk_size=5000):
        effective[(provider, account, currency)] += amount
    allocated: dict[tuple[str, str, str], Decimal] = defaultdict(Decimal)
    ledger = AllocatedCost.objects.filter(billing_period=period).values_list(
        "provider_name", "billing_account_id", "billing_currency", "amount"
    )
    for provider, account, currency, amount in ledger.iterator(chunk_size=5000):
        allocated[(provider, account, currency)] += amount
    return [
        AccountBalance(*key, effective.get(key, Decimal(0)), allocated.get(key, Decimal(0)))
        for key in sorted(set(effective) | set(allocated))
    ]


@dataclass(frozen=True)
class EndpointMonth:
    endpoint: str
    currency: str
    cost: Decimal
    requests: int
    tokens: int

    @property
    def per_1k_requests(self) -> Decimal | None:
        return self.cost * 1000 / self.requests if self.requests else None

    @property
    def per_1m_tokens(self) -> Decimal | None:
        return self.cost * 1_000_000 / self.tokens if self.tokens else None


def demo_endpoints(*, month: Month) -> list[EndpointMonth]:
    """The month's endpoints by cost, highest first, from the EndpointCost rollup."""
    totals: dict[tuple[str, str], list[Any]] = {}
    rows = EndpointCost.objects.filter(billing_period=month.start.date()).values_list(
        "endpoint", "billing_currency", "cost", "requests", "tokens"
    )
    for endpoint, currency, cost, requests, tokens in rows:
        acc = totals.setdefault((endpoint, currency), [Decimal(0), 0, 0])
        acc[0] += cost
        acc[1] += requests
        acc[2] += tokens
    result = [EndpointMonth(e, c, *acc) for (e, c), acc in totals.items()]
    return sorted(result, key=lambda e: (-e.cost, e.endpoint))


def demo_emails_count() -> int:
    """Emails in the outbox (the demo prints how many its run queued)."""
    return EmailNotification.objects.count()


@dataclass(frozen=True)
class MonthTotals:
    invoiced: Decimal
    effective: Decimal


def demo_month_totals(*, month: Month) -> MonthTotals:
    """The month's current (non-superseded) invoiced and amortised cost, exact."""
    invoiced = effective = Decimal(0)
    items = (
        CostLineItem.objects.settled()
        .filter(billing_period=month.start.date())
        .values_list("billed_cost", "effective_cost")
    )
    for b, e in items.iterator(chunk_size=5000):
        invoiced += b
        effective += e
    return MonthTotals(invoiced=invoiced, effective=effective)


@dataclass(frozen=True)
class AlertLine:
    crossed_on: date | None
    budget: str
    kind: str
    threshold: int
    actual: Decimal
    amount: Decimal
    currency: str
    email: str  # what became of its email, in words


def demo_alerts_last_id() -> int:
    return BudgetAlert.objects.aggregate(last=Max("id"))["last"] or 0


def _email_words(alert: BudgetAlert) -> str:
    email = alert.notification
    if email is None:
        return "alert raised, no email (nobody to send it to)"
    if email.status == EmailNotification.Status.SENT:
        return "alert sent"
    if email.status == EmailNotification.Status.FAILED:
        return "alert email FAILED"
    return "alert queued"


def demo_alerts(*, after_id: int) -> list[AlertLine]:
    """Budget alerts raised by this run, in the order of the days they were crossed."""
    alerts = (
        BudgetAlert.objects.filter(id__gt=after_id)
        .select_related("budget", "notification")
        .order_by("crossed_on", "as_of", "budget__name", "kind", "threshold")
    )
    return [
        AlertLine(
            crossed_on=a.crossed_on,
            budget=a.budget.name,
            kind=a.kind,
            threshold=a.threshold,
            actual=a.actual,
            amount=a.budget.amount,
            currency=a.budget.currency,
            email=_email_words(a),
        )
        for a in alerts
    ]
