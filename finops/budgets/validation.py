"""Budget input, validated once for the API and the forms alike: scope (team, provider, tag),
amount and currency, thresholds, recipients (budget_validate); reads only."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.utils import timezone

from finops.budgets.models import Budget
from finops.budgets.selectors import last_ledger_day_of_scope
from finops.budgets.series import ledger_currencies
from finops.currency.selectors import FxRateMissing, fx_rate_for
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
