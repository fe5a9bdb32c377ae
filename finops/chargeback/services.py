"""Writes: closing and reopening a month, and emailing the closed statements to the leads."""

from __future__ import annotations

from datetime import date
from decimal import ROUND_HALF_UP, Decimal

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, User
from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from finops.attribution.selectors.reconciliation import reconciliation_for_month
from finops.audit.services import audit_record
from finops.chargeback.channel_alerts import close_channel_message, statement_channel_message
from finops.chargeback.models import ClosedPeriod, Section, StatementEconomics, StatementLine
from finops.chargeback.period_selectors import month_is_closed
from finops.chargeback.selectors import (
    Statement,
    statements_build,
    team_lead_emails,
)
from finops.core.months import month_add, month_format
from finops.notifications.channels import channel_messages_enqueue
from finops.notifications.services import notification_enqueue
from finops.text import text_problem

AnyUser = AbstractBaseUser | AnonymousUser


class PeriodError(ValueError):
    """A close or reopen that cannot happen; the message says why, for the user."""


def _user(actor: AnyUser | None) -> User | None:
    return actor if isinstance(actor, User) else None


def _statement_lines(close: ClosedPeriod, statement: Statement) -> list[StatementLine]:
    lines = [
        *statement.categories,
        *statement.runs,
        *statement.endpoints,
        *statement.adjustments,
        *statement.org,
    ]
    return [
        StatementLine(
            closed_period=close,
            team=statement.team,
            section=line.section,
            key=line.key,
            currency=line.currency,
            amount=line.amount,
            reporting_amount=line.reporting_amount if line.section != Section.ORG else None,
            gpu_seconds=line.gpu_seconds,
            origin_month=line.origin_month,
            reason=line.reason,
        )
        for line in lines
    ]


def period_close(*, month: date, actor: AnyUser | None, reason: str = "") -> ClosedPeriod:
    """Close (lock) a billing month: freeze every team's statement as it stands (the month's
    ledger plus the adjustments pending for earlier closed months), record it in the audit log,
    and email each team's statement to its leads once the close committed."""
    month = month.replace(day=1)
    if month_is_closed(month):
        raise PeriodError(f"{month:%B %Y} is already closed.")
    problem = text_problem(reason, single_line=False)
    if problem is not None:
        raise PeriodError(f"Reason: {problem}")
    today = timezone.localdate()
    if month > today.replace(day=1):
        raise PeriodError(f"{month:%B %Y} has not happened yet: only past months are closed.")
    if month == today.replace(day=1):
        after = month_add(month, 1)
        raise PeriodError(
            f"{month:%B %Y} is not over yet: it can be closed from "
            f"{after.day} {after:%B %Y}, once its bills are in."
        )
    reconciliation = reconciliation_for_month(month=month)
    if not reconciliation.by_account:
        raise PeriodError(
            f"{month:%B %Y} holds no bill and no ledger: there is nothing to close "
            "(import its bills first)."
        )
    unbalanced = [
        f"{row.provider or '(none)'} {row.billing_account_id} {row.currency}: {row.difference}"
        for row in reconciliation.by_account
        if not row.balanced
    ]
    if unbalanced:
        # Freezing a ledger that does not add up to the bill would send leads wrong figures.
        raise PeriodError(
            f"{month:%B %Y} does not reconcile (attribute it first): " + "; ".join(unbalanced[:5])
        )
    currency = settings.FINOPS_REPORTING_CURRENCY
    try:
        with transaction.atomic():
            statements = statements_build(month=month, live=True, economics=True)
            close = ClosedPeriod.objects.create(
                month=month, closed_by=_user(actor), reason=reason, currency=currency
            )
            StatementLine.objects.bulk_create(
                [line for s in statements for line in _statement_lines(close, s)], batch_size=2000
            )
            StatementEconomics.objects.bulk_create(
                [
                    StatementEconomics(closed_period=close, team=s.team, body=s.economics.as_json())
                    for s in statements
                    if s.economics is not None
                ]
            )
            audit_record(
                actor=actor,
                action="period.close",
                obj_repr=month_format(month),
                reason=reason,
                details={
                    "close_id": close.pk,
                    "currency": currency,
                    "teams": {
                        s.team.slug: {
                            "total": s.total_reporting,
                            "native": {n.currency: n.amount for n in s.total_native},
                        }
                        for s in statements
                    },
                },
            )
            for statement in statements:
                statement.close = close
                _statement_email(statement=statement, close=close)
                channel_messages_enqueue(
                    message=statement_channel_message(statement=statement, close=close)
                )
            channel_messages_enqueue(
                message=close_channel_message(statements=statements, close=close)
            )
    except IntegrityError as exc:
        # The conditional unique constraint: someone else closed it first.
        raise PeriodError(f"{month:%B %Y} is already closed.") from exc
    return close


def period_reopen(*, month: date, actor: AnyUser | None, reason: str) -> ClosedPeriod:
    """Reopen a closed month (a reason is required). Its frozen statement is kept for the
    record; the month's statements follow the ledger again until it is closed anew."""
    month = month.replace(day=1)
    if not reason.strip():
        raise PeriodError("Say why the month is reopened.")
    problem = text_problem(reason, single_line=False)
    if problem is not None:
        raise PeriodError(f"Reason: {problem}")
    with transaction.atomic():
        close = (
            ClosedPeriod.objects.select_for_update()
            .filter(month=month, reopened_at__isnull=True)
            .first()
        )
        if close is None:
            raise PeriodError(f"{month:%B %Y} is not closed.")
        close.reopened_at = timezone.now()
        close.reopened_by = _user(actor)
        close.reopen_reason = reason.strip()
        close.save(update_fields=["reopened_at", "reopened_by", "reopen_reason"])
        audit_record(
            actor=actor,
            action="period.reopen",
            obj_repr=month_format(month),
            reason=close.reopen_reason,
            details={"close_id": close.pk, "closed_at": close.closed_at},
        )
    return close


def _statement_email(*, statement: Statement, close: ClosedPeriod) -> None:
    """One email per (team, month, close) to the team's leads, with links to the statement.
    A link, not an attachment: the PDF stays behind the login that decides who may see it."""
    recipients = team_lead_emails(team=statement.team)
    if not recipients:
        return
    team, month = statement.team, statement.month
    args = [team.slug, month_format(month)]
    page = settings.FINOPS_BASE_URL + reverse("web:statement", args=args)
    pdf = settings.FINOPS_BASE_URL + reverse("web:statement-file", args=[*args, "pdf"])
    csv = settings.FINOPS_BASE_URL + reverse("web:statement-file", args=[*args, "csv"])
    native = " + ".join(f"{money(n.amount)} {n.currency}" for n in statement.total_native)
    total = (
        f"{money(statement.total_reporting)} {statement.currency}"
        if statement.total_reporting is not None
        else f"(not converted to {statement.currency})"
    )
    label = f"{month:%B %Y}"
    text = (
        f"Finance closed {label}. The chargeback statement of {team.name} is final:\n\n"
        f"  Total charged: {total}\n  Native: {native}\n\n"
        f"Statement: {page}\nPDF: {pdf}\nCSV: {csv}\n\n"
        "Changes to this month's bills from now on appear as adjustments in the next open "
        "month's statement.\n"
    )
    html = (
        f"<p>Finance closed {label}. The chargeback statement of <strong>{escape(team.name)}"
        f"</strong> is final.</p><p>Total charged: <strong>{total}</strong><br>Native: "
        f'{native}</p><p><a href="{pdf}">Download the PDF</a> · <a href="{csv}">CSV</a>'
        f' · <a href="{page}">open the statement</a></p>'
    )
    notification_enqueue(
        key=f"statement:{team.slug}:{month_format(month)}:{close.pk}",
        kind="statement",
        recipients=recipients,
        subject=f"Chargeback statement {team.name} · {label} (closed)",
        text_body=text,
        html_body=html,
    )


def money(value: Decimal | None) -> str:
    """Cents with thousands separators, as the pages show money."""
    if value is None:
        return "\u2013"
    return f"{value.quantize(Decimal('0.01'), rounding=ROUND_HALF_UP):,.2f}"
