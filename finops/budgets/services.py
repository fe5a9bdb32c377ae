"""Writes: budgets (validated once, for the API and the forms alike), their alerts and emails,
and opt-outs.

An alert is due the first time in a period that the actual cost (or the forecast) reaches a
threshold. Each (budget, period, kind, threshold) is alerted once, ever: the BudgetAlert insert
is conditional on the unique constraint (the insert that loses a race, or comes after a
re-ingest, fails and sends nothing). One evaluation sends at most one email per budget, naming
every threshold it raised and the day each was crossed (finops/budgets/crossings.py), through
the outbox under the key `budget:<id>:<period start>:<kind>:<threshold>,...`, sent after commit
and marked sent only once the SMTP server accepted it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal, InvalidOperation
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.utils import timezone

from finops.audit.services import audit_record
from finops.budgets.channel_alerts import budget_channel_message
from finops.budgets.crossings import Crossing, crossings_due
from finops.budgets.emails import alert_email
from finops.budgets.enqueue import budget_evaluation_refresh_enqueue
from finops.budgets.models import Budget, BudgetAlert, BudgetEvaluation, BudgetOptOut
from finops.budgets.selectors import (
    BudgetStatus,
    budget_drivers,
    budget_recipients,
    budget_status,
    last_ledger_day_of_scope,
)
from finops.budgets.series import ledger_currencies
from finops.currency.selectors import FxRateMissing, fx_rate_for
from finops.notifications.channels import channel_messages_enqueue
from finops.notifications.models import EmailNotification
from finops.notifications.services import notification_enqueue
from finops.org.models import Team
from finops.org.permissions import AnyUser, user_is_finance
from finops.org.selectors import team_list_visible
from finops.text import text_clean, text_problem

# Each list of thresholds: at most MAX_THRESHOLDS percentages of THRESHOLD_MIN..THRESHOLD_MAX
# (every threshold is one email a period, at most). At most MAX_RECIPIENTS listed addresses,
# each an active user's or in settings.FINOPS_BUDGET_RECIPIENT_DOMAINS.
THRESHOLD_MIN, THRESHOLD_MAX = 1, 500
MAX_THRESHOLDS = 10
MAX_RECIPIENTS = 20
DEFAULT_THRESHOLDS = [50, 80, 100]
DEFAULT_FORECAST_THRESHOLDS = [100]
# The columns' lengths (Budget.name, tag_key, tag_value, provider_name).
NAME_MAX, TAG_KEY_MAX, TAG_VALUE_MAX, PROVIDER_MAX = 200, 200, 500, 100
CENT = Decimal("0.01")
_CURRENCY = re.compile(r"^[A-Z]{3}$")
_TAG = re.compile(r"^([^=\s][^=]*)=(.+)$")


# --- validation ------------------------------------------------------------------------------


def _text(
    value: object,
    name: str,
    errors: dict[str, list[str]],
    *,
    max_length: int | None = None,
    label: str = "",
) -> str | None:
    """One-line text (finops.text): None, with the error on `name`, when it may not be stored."""
    try:
        return text_clean(value, field=name, max_length=max_length, label=label)
    except ValidationError as exc:
        errors.setdefault(name, []).extend(exc.message_dict[name])
        return None


def _amount(value: object, errors: dict[str, list[str]]) -> Decimal | None:
    try:
        amount = Decimal(str(value).strip())
    except (InvalidOperation, ValueError):
        errors.setdefault("amount", []).append("Enter a number, e.g. 1950.00.")
        return None
    if not amount.is_finite() or amount <= 0:
        errors.setdefault("amount", []).append("The amount must be greater than zero.")
        return None
    # Trailing zeros are no decimals: "1950.000000000000" (a stored amount read back) is 1950.
    if abs(amount) >= Decimal(10) ** 15 or amount != amount.quantize(CENT):
        errors.setdefault("amount", []).append("At most 15 digits and 2 decimal places.")
        return None
    return amount.quantize(CENT)


def _thresholds(name: str, value: object, errors: dict[str, list[str]]) -> list[int]:
    if isinstance(value, str):
        value = [v for v in re.split(r"[,\s]+", value.strip()) if v]
    if not isinstance(value, list | tuple):
        errors.setdefault(name, []).append("A list of percentages, e.g. 50, 80, 100.")
        return []
    if len(value) > MAX_THRESHOLDS:
        errors.setdefault(name, []).append(
            f"At most {MAX_THRESHOLDS} thresholds ({len(value)} given): each is an email."
        )
        return []
    out: list[int] = []
    for item in value:
        try:
            number = Decimal(str(item).strip().rstrip("%"))
        except InvalidOperation:
            errors.setdefault(name, []).append(f"{str(item)[:50]!r} is not a number.")
            continue
        if isinstance(item, bool) or not number.is_finite() or number != number.to_integral():
            errors.setdefault(name, []).append(f"{str(item)[:50]} is not a whole percentage.")
        elif not THRESHOLD_MIN <= number <= THRESHOLD_MAX:
            errors.setdefault(name, []).append(
                f"{str(item)[:50]} is outside {THRESHOLD_MIN} to {THRESHOLD_MAX} %."
            )
        else:
            out.append(int(number))
    return sorted(set(out))


def recipient_allowed(address: str) -> bool:
    """An address a budget may list: an active user's, or in a configured domain."""
    domain = address.rpartition("@")[2].lower()
    if domain in settings.FINOPS_BUDGET_RECIPIENT_DOMAINS:
        return True
    return User.objects.filter(is_active=True, email__iexact=address).exists()


def _recipients(value: object, errors: dict[str, list[str]]) -> list[str]:
    if isinstance(value, str):
        value = [v for v in re.split(r"[,\s;]+", value.strip()) if v]
    if not isinstance(value, list | tuple):
        errors.setdefault("recipients", []).append("A list of email addresses.")
        return []
    if len(value) > MAX_RECIPIENTS:
        errors.setdefault("recipients", []).append(
            f"At most {MAX_RECIPIENTS} addresses ({len(value)} given); the team's leads get "
            "the alerts without being listed."
        )
        return []
    out = []
    for item in value:
        address = str(item).strip()
        shown = repr(address[:100])
        try:
            if text_problem(address) is not None:
                raise ValidationError("control characters")
            validate_email(address)
        except ValidationError:
            errors.setdefault("recipients", []).append(f"{shown} is not an email address.")
            continue
        if not recipient_allowed(address):
            errors.setdefault("recipients", []).append(
                f"{shown} is neither a user's address nor in an allowed domain "
                "(FINOPS_BUDGET_RECIPIENT_DOMAINS)."
            )
            continue
        out.append(address)
    return sorted(set(out))


def _currency(value: object, budget_scope: Budget, errors: dict[str, list[str]]) -> str:
    """The code, if every ledger currency of the scope converts to it (newest ledger day)."""
    code = str(value or "").strip().upper()
    if not _CURRENCY.match(code):
        errors.setdefault("currency", []).append("An ISO 4217 code such as USD.")
        return code
    day = last_ledger_day_of_scope(budget=budget_scope) or timezone.now().date()
    for ledger_code in sorted(ledger_currencies(budget=budget_scope)):
        try:
            fx_rate_for(day=day, from_currency=ledger_code, to_currency=code)
        except FxRateMissing as exc:
            errors.setdefault("currency", []).append(
                f"No FX rate converts the ledger's {ledger_code} to {code}: {exc}."
            )
    return code


def _name(value: object, errors: dict[str, list[str]]) -> str:
    name = _text(value, "name", errors, max_length=NAME_MAX, label="The name")
    if name == "":
        errors["name"] = ["A budget needs a name."]
    return name or ""


def _team(
    slug: object, *, user: AnyUser, finance: bool, errors: dict[str, list[str]]
) -> Team | None:
    """The team named, if the user may budget for it; no team only for finance."""
    if slug in (None, ""):
        if not finance:
            errors["team"] = ["Choose one of your teams: organisation budgets are finance's."]
        return None
    text = _text(slug, "team", errors)
    if text is None:
        return None
    team = Team.objects.filter(slug=text).first()
    if team is None:
        errors["team"] = [f"No team {text[:100]!r}."]
    elif not team_list_visible(user=user).filter(pk=team.pk).exists():
        errors["team"] = ["You may only save budgets of your own teams."]
        team = None
    return team


def _provider(
    value: object, team: Team | None, slug: object, *, finance: bool, errors: dict[str, list[str]]
) -> str:
    """A provider budget: finance's, and never also a team's."""
    provider = _text(value or "", "provider", errors, max_length=PROVIDER_MAX, label="The provider")
    if provider and (team is not None or slug not in (None, "")):
        errors.setdefault("provider", []).append("A budget is for a team or a provider.")
    if provider and not finance:
        errors.setdefault("provider", []).append("Provider budgets are finance's.")
    return provider or ""


def _tag(value: object, slug: object, errors: dict[str, list[str]]) -> tuple[str, str]:
    """(key, value) of a "key=value" tag filter, which needs a team; ("", "") for none."""
    tag = _text(value or "", "tag", errors)
    if not tag:
        return "", ""
    match = _TAG.match(tag)
    if match is None:
        errors["tag"] = ["Write the tag filter as key=value."]
    elif slug in (None, ""):
        errors["tag"] = ["A tag filter needs a team."]
    else:
        key = _text(match.group(1), "tag", errors, max_length=TAG_KEY_MAX, label="The tag key")
        tag_value = _text(
            match.group(2), "tag", errors, max_length=TAG_VALUE_MAX, label="The tag value"
        )
        if key is not None and tag_value is not None:
            return key, tag_value
    return "", ""


@dataclass
class BudgetInput:
    """Validated budget fields (see budget_validate)."""

    values: dict[str, Any] = field(default_factory=dict)


# On update, a key of the body is checked with the keys that depend on it: the scope's keys
# together, and the currency against the (new) scope's ledger currencies.
_CHECKED_WITH = {
    "team": ("team", "provider", "tag", "currency"),
    "provider": ("team", "provider", "tag", "currency"),
    "tag": ("team", "provider", "tag", "currency"),
}


def budget_validate(
    *, user: AnyUser, data: Mapping[str, Any], instance: Budget | None = None
) -> dict[str, Any]:
    """Clean a create or update body; raise ValidationError({field: [messages]}).

    Keys: name, team (slug or None), tag ("key=value" or ""), provider, period, amount,
    currency, thresholds, forecast_thresholds, recipients, active. On update, absent keys keep
    the budget's values as stored, unchecked (a PATCH of `active` alone saves whatever rule
    the stored amount or thresholds predate); the keys given are checked with those that depend
    on them (_CHECKED_WITH).
    """
    checked = set(data)
    for key in list(checked):
        checked.update(_CHECKED_WITH.get(key, ()))

    def check(key: str) -> bool:
        return instance is None or key in checked

    def current(key: str, default: Any) -> Any:
        if key in data:
            return data[key]
        if instance is None:
            return default
        return {
            "team": instance.team.slug if instance.team else None,
            "tag": instance.tag or "",
            "provider": instance.provider_name,
        }.get(key, getattr(instance, key, default))

    errors: dict[str, list[str]] = {}
    finance = user_is_finance(user)
    kept: Budget = instance if instance is not None else Budget()
    name = _name(current("name", ""), errors) if check("name") else kept.name
    team, provider = kept.team, kept.provider_name
    tag_key, tag_value = kept.tag_key, kept.tag_value
    if check("team"):
        slug = current("team", None)
        team = _team(slug, user=user, finance=finance, errors=errors)
        provider = _provider(current("provider", ""), team, slug, finance=finance, errors=errors)
        tag_key, tag_value = _tag(current("tag", ""), slug, errors)
    period = str(current("period", Budget.Period.MONTH) or "")
    if check("period") and period not in Budget.Period.values:
        errors["period"] = [f"One of {', '.join(Budget.Period.values)}."]
    amount = _amount(current("amount", ""), errors) if check("amount") else kept.amount
    thresholds = (
        _thresholds("thresholds", current("thresholds", DEFAULT_THRESHOLDS), errors)
        if check("thresholds")
        else kept.thresholds
    )
    forecast_thresholds = (
        _thresholds(
            "forecast_thresholds",
            current("forecast_thresholds", DEFAULT_FORECAST_THRESHOLDS),
            errors,
        )
        if check("forecast_thresholds")
        else kept.forecast_thresholds
    )
    recipients = (
        _recipients(current("recipients", []), errors) if check("recipients") else kept.recipients
    )
    default_currency = settings.FINOPS_REPORTING_CURRENCY
    currency = kept.currency
    if check("currency"):
        scope = Budget(team=team, provider_name=provider)
        currency = _currency(current("currency", default_currency), scope, errors)
    if errors:
        raise ValidationError(errors)
    return {
        "name": name,
        "team": team,
        "tag_key": tag_key,
        "tag_value": tag_value,
        "provider_name": provider,
        "period": period,
        "amount": amount,
        "currency": currency,
        "thresholds": thresholds,
        "forecast_thresholds": forecast_thresholds,
        "recipients": recipients,
        "active": bool(current("active", True)),
    }


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
