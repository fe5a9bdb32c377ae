"""Writes: budgets (validated once, for the API and the forms alike: finops/budgets/validation.py),
their alerts and emails, and opt-outs.

An alert is due the first time in a period that the actual cost (or the forecast) reaches a
threshold. Each (budget, period, kind, threshold) is alerted once, ever: the BudgetAlert insert
is conditional on the unique constraint (the insert that loses a race, or comes after a
re-ingest, fails and sends nothing). One evaluation sends at most one email per budget, naming
every threshold it raised and the day each was crossed (finops/budgets/crossings.py), through
the outbox under the key `budget:<id>:<period start>:<kind>:<threshold>,...`, sent after commit
and marked sent only once the SMTP server accepted it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from finops.audit.services import audit_record
from finops.budgets.channel_alerts import budget_channel_message
from finops.budgets.crossings import Crossing, crossings_due
from finops.budgets.drivers import budget_drivers
from finops.budgets.emails import alert_email
from finops.budgets.enqueue import budget_evaluation_refresh_enqueue
from finops.budgets.models import Budget, BudgetAlert, BudgetEvaluation, BudgetOptOut
from finops.budgets.recipients import budget_recipients
from finops.budgets.selectors import (
    BudgetStatus,
    budget_status,
    last_ledger_day_of_scope,
)
from finops.budgets.validation import budget_validate
from finops.notifications.channels import channel_messages_enqueue
from finops.notifications.models import EmailNotification
from finops.notifications.services import notification_enqueue
from finops.org.permissions import AnyUser

# --- budgets ---------------------------------------------------------------------------------


def _audit_values(values: Mapping[str, Any]) -> dict[str, str]:
    """Budget fields as text for the audit log (a team or a list is stored by its name)."""
    return {key: str(value) for key, value in values.items()}


def _refresh_after_commit(budget_id: int) -> None:
    """Store the budget's status once the save is committed, so the overview and team pages
    (which read stored evaluations) show it before the next import or beat evaluates it."""
    transaction.on_commit(lambda: budget_evaluation_refresh_enqueue(budget_id=budget_id))


def budget_create(*, user: AnyUser, data: Mapping[str, Any]) -> Budget:
    values = budget_validate(user=user, data=data)
    with transaction.atomic():
        budget = Budget.objects.create(owner_id=getattr(user, "pk", None), **values)
        audit_record(
            actor=user, action="budget.create", obj_repr=str(budget), details=_audit_values(values)
        )
        _refresh_after_commit(budget.pk)
        return budget


def budget_update(*, user: AnyUser, budget: Budget, data: Mapping[str, Any]) -> Budget:
    values = budget_validate(user=user, data=data, instance=budget)
    with transaction.atomic():
        before = {key: getattr(budget, key) for key in values}
        for key, value in values.items():
            setattr(budget, key, value)
        budget.save()
        changes = {k: [str(before[k]), str(v)] for k, v in values.items() if before[k] != v}
        audit_record(actor=user, action="budget.update", obj_repr=str(budget), details=changes)
        budget_evaluations_restate(budget=budget)
        _refresh_after_commit(budget.pk)
    return budget


def budget_delete(*, user: AnyUser, budget: Budget) -> None:
    with transaction.atomic():
        audit_record(actor=user, action="budget.delete", obj_repr=str(budget))
        budget.delete()


def budget_opt_out_set(*, budget: Budget, user: AnyUser, opted_out: bool) -> None:
    """Stop (or resume) a user's emails of this budget."""
    with transaction.atomic():
        if opted_out:
            BudgetOptOut.objects.get_or_create(budget=budget, user_id=int(user.pk or 0))
        else:
            BudgetOptOut.objects.filter(budget=budget, user_id=int(user.pk or 0)).delete()


# --- stored evaluations ----------------------------------------------------------------------


def evaluation_status(
    *, amount: Decimal, actual: Decimal, forecast: Decimal, error: str = ""
) -> str:
    """Over when the actual cost reached the amount, at risk when only the forecast did."""
    if error:
        return BudgetEvaluation.Status.ERROR
    if actual >= amount:
        return BudgetEvaluation.Status.OVER
    if forecast >= amount:
        return BudgetEvaluation.Status.AT_RISK
    return BudgetEvaluation.Status.OK


def budget_evaluation_store(*, status: BudgetStatus) -> BudgetEvaluation | None:
    """Keep `status` as the budget's evaluation of its period, unless a newer one (a later
    as-of) is stored already: the pages show the newest evaluation of each period. A re-run on
    the same day (a restated bill) replaces it."""
    budget = status.budget
    values = {
        "period_end": status.period.end,
        "as_of": status.as_of,
        "currency": status.currency,
        "status": evaluation_status(
            amount=budget.amount,
            actual=status.actual,
            forecast=status.forecast,
            error=status.error,
        ),
        "actual": status.actual,
        "forecast": status.forecast,
        "forecast_low": status.forecast_low,
        "forecast_high": status.forecast_high,
        "method": status.method[:200],
        "error": status.error,
    }
    key: dict[str, object] = {
        "budget": budget,
        "period": budget.period,
        "period_start": status.period.start,
    }
    with transaction.atomic():
        stored = BudgetEvaluation.objects.select_for_update().filter(**key).first()
        if stored is None:
            try:
                with transaction.atomic():  # a savepoint: another evaluation may insert first
                    return BudgetEvaluation.objects.create(**key, **values)
            except IntegrityError:
                stored = BudgetEvaluation.objects.select_for_update().get(**key)
        if stored.as_of > status.as_of:
            return None
        for name, value in values.items():
            setattr(stored, name, value)
        stored.save()
        return stored


def budget_evaluations_restate(*, budget: Budget) -> None:
    """After an edit: drop the rows of another period kind (no longer this budget's periods)
    and recompute the stored statuses against the new amount (no forecast needed)."""
    BudgetEvaluation.objects.filter(budget=budget).exclude(period=budget.period).delete()
    for stored in BudgetEvaluation.objects.filter(budget=budget).exclude(error__gt=""):
        status = evaluation_status(
            amount=budget.amount, actual=stored.actual, forecast=stored.forecast
        )
        if status != stored.status:
            stored.status = status
            stored.save(update_fields=["status"])


def budget_evaluation_refresh(*, budget_id: int) -> BudgetEvaluation | None:
    """Evaluate one budget as of its scope's newest ledger day (today when it has none) and
    store the status; no alert is raised here (the pipeline and beat raise them)."""
    budget = Budget.objects.select_related("team").filter(pk=budget_id).first()
    if budget is None:
        return None
    as_of = last_ledger_day_of_scope(budget=budget) or timezone.now().date()
    return budget_evaluation_store(status=budget_status(budget=budget, as_of=as_of))


# --- alerts ----------------------------------------------------------------------------------


@dataclass
class Evaluation:
    status: BudgetStatus
    sent: list[BudgetAlert] = field(default_factory=list)


def alert_key(*, budget_id: int, period_start: date, kind: str, threshold: int) -> str:
    return f"budget:{budget_id}:{period_start:%Y-%m-%d}:{kind}:{threshold}"


def _email_key(status: BudgetStatus, raised: list[BudgetAlert]) -> str:
    """The outbox key of one evaluation's email: the budget, the period and every alert it
    names (unique, as each alert is raised once ever); the first alert's key when too long."""
    parts = ",".join(f"{a.kind}:{a.threshold}" for a in raised)
    key = f"budget:{status.budget.pk}:{status.period.start:%Y-%m-%d}:{parts}"
    if len(key) <= 255:
        return key
    first = raised[0]
    return alert_key(
        budget_id=status.budget.pk,
        period_start=status.period.start,
        kind=first.kind,
        threshold=first.threshold,
    )


def _insert_alert(status: BudgetStatus, crossing: Crossing) -> BudgetAlert | None:
    """The alert of `crossing`, or None when another evaluation raised it first (a savepoint:
    the unique constraint decides)."""
    try:
        with transaction.atomic():
            return BudgetAlert.objects.create(
                budget=status.budget,
                period_start=status.period.start,
                kind=crossing.kind,
                threshold=crossing.threshold,
                as_of=status.as_of,
                crossed_on=crossing.crossed_on,
                actual=status.actual,
                forecast=status.forecast,
            )
    except IntegrityError:
        return None


def _raise_alerts(status: BudgetStatus, crossings: list[Crossing]) -> list[BudgetAlert]:
    """Insert the alerts of `crossings` and enqueue one email naming those this evaluation
    raised, in one transaction. Inserted in a fixed order (actual then forecast, ascending), so
    two concurrent evaluations never split a set between them: the second waits on the first's
    first insert, then finds every alert raised."""
    budget = status.budget
    with transaction.atomic():
        raised = [a for a in (_insert_alert(status, c) for c in crossings) if a is not None]
        if not raised:
            return []
        recipients = budget_recipients(budget=budget)
        named = [c for c in crossings if (c.kind, c.threshold) in
                 {(a.kind, a.threshold) for a in raised}]  # fmt: skip
        key = _email_key(status, raised)
        # The team's and the organisation's chat/webhook channels: one message per channel.
        channel_messages_enqueue(
            message=budget_channel_message(status=status, crossings=named, key=key)
        )
        if recipients:
            drivers = budget_drivers(budget=budget, period=status.period, as_of=status.as_of)
            subject, text, html = alert_email(status=status, crossings=named, drivers=drivers)
            notification_enqueue(
                key=key,
                kind="budget",
                recipients=recipients,
                subject=subject,
                text_body=text,
                html_body=html,
            )
            notification = EmailNotification.objects.filter(key=key).first()
            if notification is not None:
                BudgetAlert.objects.filter(pk__in=[a.pk for a in raised]).update(
                    notification=notification
                )
                for alert in raised:
                    alert.notification = notification
    return raised


def budget_evaluate(*, budget_id: int, as_of: date) -> Evaluation:
    """Evaluate one budget on as_of, store the status the pages show, and raise (once ever) each
    alert now due, in one email naming every threshold raised and the day it was crossed."""
    budget = Budget.objects.select_related("team").get(pk=budget_id)
    status = budget_status(budget=budget, as_of=as_of)
    previous = (
        BudgetEvaluation.objects.filter(
            budget=budget, period=budget.period, period_start=status.period.start
        ).first()
        if not status.error
        else None
    )
    budget_evaluation_store(status=status)
    evaluation = Evaluation(status=status)
    if status.error or not budget.active:
        return evaluation
    alerted = {
        (str(kind), int(threshold))
        for kind, threshold in BudgetAlert.objects.filter(
            budget=budget, period_start=status.period.start
        ).values_list("kind", "threshold")
    }
    crossings = crossings_due(status=status, alerted=alerted, previous=previous)
    if crossings:
        evaluation.sent = _raise_alerts(status, crossings)
    return evaluation


def budgets_evaluate_active(
    *, as_of: date, budget_ids: Iterable[int] | None = None
) -> list[Evaluation]:
    qs = Budget.objects.filter(active=True).order_by("id")
    if budget_ids is not None:
        qs = qs.filter(pk__in=list(budget_ids))
    return [budget_evaluate(budget_id=pk, as_of=as_of) for pk in qs.values_list("pk", flat=True)]
