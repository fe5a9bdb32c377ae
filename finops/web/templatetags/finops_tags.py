"""Display helpers: money for people (the API keeps full precision), months, dict lookups."""

from __future__ import annotations

from datetime import date
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any
from urllib.parse import urlencode

from django import template
from django.urls import reverse

from finops.core.months import month_format

register = template.Library()

CENT = Decimal("0.01")


@register.filter
def money(value: Any) -> str:
    """12345.678 -> '12,345.68'. Display only: half-up to cents, thousands separators."""
    if value is None or value == "":
        return "\u2013"
    try:
        amount = Decimal(value).quantize(CENT, rounding=ROUND_HALF_UP)
    except (InvalidOperation, TypeError, ValueError):
        return str(value)
    if amount == 0:
        amount = abs(amount)  # never show "-0.00"
    return f"{amount:,.2f}"


@register.filter
def hours(value: Any) -> str:
    """GPU-hours with one decimal and thousands separators."""
    if value is None:
        return "\u2013"
    return f"{Decimal(value).quantize(Decimal('0.1'), rounding=ROUND_HALF_UP):,.1f}"


@register.filter
def month_label(value: date | None) -> str:
    return value.strftime("%B %Y") if value else ""


@register.filter
def month_param(value: date | None) -> str:
    return month_format(value) if value else ""


@register.filter
def get_item(mapping: dict[str, Any], key: str) -> Any:
    return mapping.get(key)


@register.filter
def is_finance(user: Any) -> bool:
    # Imported here so the tag library loads without the app registry being ready.
    from finops.org.permissions import user_is_finance

    return user_is_finance(user)


@register.filter
def is_viewer(user: Any) -> bool:
    from finops.org.permissions import user_is_viewer

    return user_is_viewer(user)


UNIT_QUANTUM = Decimal("0.0001")


@register.filter
def unit_money(value: Any) -> str:
    """A unit cost ($/1k requests, $/1M tokens): four places, since these are often cents or
    less. Display only; the API keeps every stored place."""
    if value is None or value == "":
        return "\u2013"
    amount = Decimal(value).quantize(UNIT_QUANTUM, rounding=ROUND_HALF_UP)
    return f"{abs(amount) if amount == 0 else amount:,.4f}"


@register.filter
def percent(value: Any) -> str:
    """A share (0..1) as a percentage with one decimal: 0.1234 -> '12.3 %'."""
    if value is None or value == "":
        return "\u2013"
    return f"{(Decimal(value) * 100).quantize(Decimal('0.1'), rounding=ROUND_HALF_UP)} %"


@register.filter
def count(value: Any) -> str:
    """A count with thousands separators: 1532 -> '1,532'."""
    if value is None or value == "":
        return "\u2013"
    try:
        return f"{int(value):,}"
    except (TypeError, ValueError):
        return str(value)


@register.filter
def signed_money(value: Any) -> str:
    """A change in money with its sign: '+1,234.50', '-12.00', '0.00'."""
    text = money(value)
    if value is None or value == "" or text.startswith("-") or text == "0.00":
        return text
    return f"+{text}"


@register.filter
def signed_percent(value: Any) -> str:
    """A change as a share (0.1) with its sign: '+10.0 %'; '\u2013' when there is no base."""
    text = percent(value)
    if value is None or value == "" or text.startswith("-") or text.startswith("0.0 "):
        return text
    return f"+{text}"


@register.simple_tag
def csv_url(view_name: str, **params: Any) -> str:
    """The API list `view_name` as CSV with the given filters (dates as YYYY-MM months; empty
    values left out): the same query the page shows, in the API's CSV renderer."""
    query: dict[str, str] = {}
    for key, value in params.items():
        if value is None or value == "":
            continue
        query[key] = month_param(value) if isinstance(value, date) else str(value)
    query["format"] = "csv"
    return f"{reverse(view_name)}?{urlencode(query)}"


@register.simple_tag(takes_context=True)
def query_with(context: Any, **changes: Any) -> str:
    """The current query string with some parameters changed (None or "" removes one); a
    change other than the page number goes back to page 1."""
    query = context["request"].GET.copy()
    for key, value in changes.items():
        if value is None or value == "":
            query.pop(key, None)
        else:
            query[key] = month_param(value) if isinstance(value, date) else str(value)
    if "page" not in changes:
        query.pop("page", None)
    return "?" + query.urlencode()


@register.filter
def price(value: Any) -> str:
    """An hourly price with the places it needs: 55.04, 0.7068 (under 1), never six decimals
    of a catalogue figure. Display only."""
    if value is None or value == "":
        return "\u2013"
    amount = Decimal(value)
    places = Decimal("0.01") if abs(amount) >= 1 else Decimal("0.0001")
    return f"{amount.quantize(places, rounding=ROUND_HALF_UP):,}"


@register.filter
def about(value: Any) -> str:
    """A small expected count in words a reader takes in: '< 0.1', '0.3', '12'."""
    if value is None or value == "":
        return "\u2013"
    amount = Decimal(str(value))
    if amount == 0:
        return "0"
    if amount < Decimal("0.1"):
        return "< 0.1"
    if amount < 10:
        return f"{amount.quantize(Decimal('0.1'), rounding=ROUND_HALF_UP)}"
    return f"{amount.quantize(Decimal(1), rounding=ROUND_HALF_UP):,}"


_KEY_WORDS = {"gpus": "GPUs", "gpu": "GPU", "p10": "P10", "pct": "percentile"}


@register.filter
def key_words(value: str) -> str:
    """An evidence or assumption key in words: 'mean_gpus_in_use' -> 'Mean GPUs in use'."""
    words = [_KEY_WORDS.get(w.lower(), w) for w in str(value).split("_") if w]
    text = " ".join(words)
    return text[:1].upper() + text[1:]


@register.filter
def value_words(value: object) -> object:
    """A recommendation's evidence value: booleans as yes / no, nothing as a dash."""
    if value is True:
        return "yes"
    if value is False:
        return "no"
    return "-" if value is None else value


@register.filter
def term_label(value: str) -> str:
    """A way of buying in words: '1y_no_upfront' -> '1 year, no upfront'."""
    from finops.pricing.assumption_checks import TERM_LABELS

    return TERM_LABELS.get(
        value,
        {"on_demand": "on demand", "spot": "spot", "on_prem": "owned, at full use"}.get(
            value, value
        ),
    )


@register.filter
def price_columns(body: dict[str, Any]) -> list[str | None]:
    """A catalogue price body's hourly figure per way of buying (on demand, spot, the four
    terms; None where it has none), for one table row per type."""
    from finops.pricing.prices import KINDS

    figures = {f["kind"]: f["hourly"] for f in body.get("figures", [])}
    return [figures.get(kind) for kind in KINDS]


@register.filter
def millions(value: Any) -> str:
    """A count in millions with two decimals, no separators (a chart's data value): 524288000
    -> '524.29'; '' when unknown."""
    if value is None or value == "":
        return ""
    return f"{(Decimal(value) / 1_000_000).quantize(Decimal('0.01'), rounding=ROUND_HALF_UP)}"


FIGURE_QUANTUM = Decimal("0.000001")


@register.filter
def figure(value: Any) -> str:
    """A physical quantity (kWh, kg CO2e, PUE, g/kWh) with every place it holds up to six,
    thousands separators, never an exponent: 2.951000 -> '2.951', 1234.5 -> '1,234.5'."""
    if value is None or value == "":
        return "\u2013"
    amount = Decimal(value).quantize(FIGURE_QUANTUM, rounding=ROUND_HALF_UP)
    text = f"{abs(amount) if amount == 0 else amount:,f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


@register.filter
def energy(value: Any) -> str:
    """An amount of energy or emissions (kWh, kg CO2e) as a statement reads it: 1 decimal from
    10 up, 2 from 1, 3 below (12345.678912 -> '12,345.7', 2.951 -> '2.95', 0.587093 ->
    '0.587'), half up, thousands separators, never an exponent nor '-0'. The exact figure is
    the CSV's (amount_exact)."""
    if value is None or value == "":
        return "\u2013"
    exact = Decimal(value)
    amount = _energy_rounded(exact, exact)
    # 9.996 rounds to 10.00: shown as 10.0, as 10 is.
    amount = _energy_rounded(exact, amount)
    return f"{abs(amount) if amount == 0 else amount:,f}"


def _energy_rounded(exact: Decimal, size: Decimal) -> Decimal:
    places = 1 if abs(size) >= 10 else 2 if abs(size) >= 1 else 3
    return exact.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)
