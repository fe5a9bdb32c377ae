"""Reads for the cost explorer (page and `GET /api/v1/costs/?group_by=...`): cost grouped and
filtered by provider, billing account, service, region, instance type, category, team or any
tag key (`group_by=tag:KEY`), per day, week or month.

Two sources, each exact, chosen by what is asked:

- the **ledger** (amortised cost as attribution split it: TeamDailyCost when every dimension
  asked is in it, else AllocatedCost): team, category, provider, account, service;
- the **bill** (settled line items): provider, account, service, region, instance type, tags,
  amortised (EffectiveCost) or invoiced (BilledCost), each line item's cost spread evenly over
  its charge period by the second and bucketed by UTC day, as attribution spreads it.

The bill is not split by team, so a question that needs both (team and region, or team and
invoiced cost) is refused with the reason, and only finance (who sees every team) reads the
bill. Amounts are converted at each day's FX rate, summed exactly and rounded once.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from fractions import Fraction
from typing import Any

from django.db.models import F, QuerySet
from django.db.models.fields.json import KeyTextTransform, KeyTransform

from billing_ingest.models import CostLineItem
from finops.attribution.models import AllocatedCost, TeamDailyCost
from finops.attribution.selectors.reporting import NativeAmount, currency_order, visible_to
from finops.attribution.selectors.timeseries import (
    CostPoint,
    CostSeries,
    CostSeriesReport,
    SeriesPoint,
    bucket_start,
)
from finops.core.money import MoneySum
from finops.currency.selectors import converter_for, money_round
from finops.org.models import Team

AMORTISED = "amortised"
INVOICED = "invoiced"
COST_MEASURES = (AMORTISED, INVOICED)
TAG_PREFIX = "tag:"
# A tag key: what the providers allow in one (letters, digits, spaces and + - . _ : / @),
# without "=" (the tag filter is KEY=VALUE) or quotes.
TAG_KEY_PATTERN = r"[-A-Za-z0-9 _.:/@+]{1,128}"
GROUP_BY_PATTERN = (
    r"^(team|provider|category|service|region|instance_type|account|tag:" + TAG_KEY_PATTERN + r")$"
)
TAG_FILTER_PATTERN = r"^" + TAG_KEY_PATTERN + r"=[^\x00]{0,500}$"

LEDGER = "ledger"
BILL = "bill"

# Dimension -> its column in the rollup, the ledger and the bill (None: not there).
ROLLUP_FIELDS = {"team": "team__slug", "category": "category", "provider": "provider_name"}
LEDGER_FIELDS = {
    **ROLLUP_FIELDS,
    "account": "billing_account_id",
    "service": "service_name",
}
BILL_FIELDS = {
    "provider": "provider_name",
    "account": "billing_account_id",
    "service": "service_name",
    "region": "region_id",
    "instance_type": "x_instance_type",
}
DIMENSIONS = ("team", "category", "provider", "account", "service", "region", "instance_type")
LABELS = {
    "team": "Team",
    "category": "Category",
    "provider": "Provider",
    "account": "Billing account",
    "service": "Service",
    "region": "Region",
    "instance_type": "Instance type",
}


class ExplorerError(ValueError):
    """A question the explorer cannot answer; the message says why, naming the parameter."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class ExplorerQuery:
    """What to group by and filter on. `filters` maps a dimension of DIMENSIONS to the value
    it must have ("" matches the blank value); `tag` is (key, value)."""

    group_by: str = "team"
    cost: str = AMORTISED
    filters: tuple[tuple[str, str], ...] = ()
    tag: tuple[str, str] | None = None

    @property
    def tag_key(self) -> str | None:
        return self.group_by.removeprefix(TAG_PREFIX) if self.is_tag_group else None

    @property
    def is_tag_group(self) -> bool:
        return self.group_by.startswith(TAG_PREFIX)

    def dimensions(self) -> set[str]:
        asked = {name for name, _ in self.filters}
        if not self.is_tag_group:
            asked.add(self.group_by)
        return asked

    def is_plain(self) -> bool:
        """What /api/v1/costs/ answered before the explorer: team, provider or category from
        the rollup, amortised, no filter (the `team` parameter is handled by the caller)."""
        return (
            self.group_by in ROLLUP_FIELDS
            and not self.filters
            and self.tag is None
            and (self.cost == AMORTISED)
        )

    def source(self) -> str:
        """LEDGER or BILL; ExplorerError when the question needs both."""
        needs_bill = [d for d in self.dimensions() if d not in LEDGER_FIELDS]
        if self.is_tag_group or self.tag is not None:
            needs_bill.append("tag")
        if self.cost == INVOICED:
            needs_bill.append("cost=invoiced")
        if not needs_bill:
            return LEDGER
        needs_ledger = sorted(d for d in self.dimensions() if d not in BILL_FIELDS)
        if needs_ledger:
            raise ExplorerError(
                needs_ledger[0],
                f"{', '.join(needs_ledger)} cannot be combined with "
                f"{', '.join(sorted(needs_bill))}: "
                "teams and categories come from attribution, which splits amortised cost "
                "(EffectiveCost) by job, not by region, instance type or tag; those come from "
                "the bill, which is not split by team.",
            )
        return BILL


def group_by_validate(value: str) -> str:
    if re.fullmatch(GROUP_BY_PATTERN, value) is None:
        raise ExplorerError(
            "group_by",
            "group_by is one of team, provider, category, service, region, instance_type, "
            "account, or tag:KEY (a tag key of letters, digits, spaces and + - . _ : / @).",
        )
    return value


def tag_filter_parse(value: str) -> tuple[str, str]:
    if re.fullmatch(TAG_FILTER_PATTERN, value) is None:
        raise ExplorerError("tag", "tag is KEY=VALUE, e.g. tag=project=llm.")
    key, _, tag_value = value.partition("=")
    return key, tag_value


@dataclass(frozen=True)
class DayAmount:
    key: str | None
    label: str
    day: date
    currency: str
    amount: Fraction


def _filtered(qs: QuerySet[Any], fields: dict[str, str], query: ExplorerQuery) -> QuerySet[Any]:
    for name, value in query.filters:
        qs = qs.filter(**{fields[name]: value})
    return qs


def _ledger_rows(
    query: ExplorerQuery,
    *,
    teams: QuerySet[Team],
    include_unowned: bool,
    month: date | None,
    since: date | None,
    until: date | None,
) -> list[DayAmount]:
    rollup = query.dimensions() <= set(ROLLUP_FIELDS)
    fields = ROLLUP_FIELDS if rollup else LEDGER_FIELDS
    qs: QuerySet[Any] = (TeamDailyCost if rollup else AllocatedCost).objects.all()
    if month is not None:
        qs = qs.filter(billing_period=month)
    if since is not None:
        qs = qs.filter(day__gte=since)
    if until is not None:
        qs = qs.filter(day__lte=until)
    qs = _filtered(visible_to(qs, teams=teams, include_unowned=include_unowned), fields, query)
    key_field = fields[query.group_by]
    rows = (
        qs.order_by()
        .values(key_field, "team__name", "day", "billing_currency")
        .annotate(amount=MoneySum("amount"))
    )
    result = []
    for row in rows:
        if not row["amount"]:
            continue  # as in the bill: a zero adds only an empty series
        key = row[key_field]
        if query.group_by == "team":
            label = row["team__name"] or "No team (platform)"
        else:
            label = key or "(none)"
        result.append(
            DayAmount(key, label, row["day"], row["billing_currency"], Fraction(row["amount"]))
        )
    return result


def _spread(start: datetime, end: datetime, amount: Fraction) -> Iterable[tuple[date, Fraction]]:
    """The amount spread evenly over [start, end) per UTC day, exactly (the days' parts are
    in microseconds and add up to the whole); a line item whose charge period is empty or
    reversed falls on its start day."""
    start, end = start.astimezone(UTC), end.astimezone(UTC)
    tick = timedelta(microseconds=1)
    total = (end - start) // tick
    if total <= 0:
        yield start.date(), amount
        return
    day = start.date()
    while True:
        day_start = max(start, datetime.combine(day, time(), UTC))
        day_end = min(end, datetime.combine(day + timedelta(days=1), time(), UTC))
        if day_end <= day_start:
            break
        yield day, amount * Fraction((day_end - day_start) // tick, total)
        day += timedelta(days=1)


def _bill_rows(
    query: ExplorerQuery,
    *,
    month: date | None,
    since: date | None,
    until: date | None,
) -> list[DayAmount]:
    qs: QuerySet[Any] = CostLineItem.objects.settled()
    if month is not None:
        qs = qs.filter(billing_period=month)
    if since is not None:
        qs = qs.filter(charge_period_end__gt=datetime.combine(since, time(), UTC))
    if until is not None:
        qs = qs.filter(charge_period_start__lt=datetime.combine(until + timedelta(1), time(), UTC))
    qs = _filtered(qs, BILL_FIELDS, query)
    if query.tag is not None:
        tag_key, tag_value = query.tag
        # KeyTransform's exact lookup compares JSON values (the string `value`), on SQLite too.
        qs = qs.alias(filter_tag=KeyTransform(tag_key, "tags")).filter(filter_tag=tag_value)
    if query.is_tag_group:
        qs = qs.annotate(group_key=KeyTextTransform(query.tag_key, "tags"))
    else:
        qs = qs.annotate(group_key=F(BILL_FIELDS[query.group_by]))
    column = "effective_cost" if query.cost == AMORTISED else "billed_cost"
    rows = (
        qs.order_by()
        .values("group_key", "charge_period_start", "charge_period_end", "billing_currency")
        .annotate(amount=MoneySum(column))
    )
    sums: dict[tuple[str | None, date, str], Fraction] = defaultdict(Fraction)
    for row in rows:
        # Zero (an amortised purchase, an invoiced commitment-covered hour) is left out, as a
        # day without cost is: it would only add empty series.
        if not row["amount"]:
            continue
        raw = row["group_key"]
        key = None if raw is None else str(raw)
        for day, part in _spread(
            row["charge_period_start"], row["charge_period_end"], Fraction(row["amount"])
        ):
            if (since is not None and day < since) or (until is not None and day > until):
                continue
            sums[(key, day, row["billing_currency"])] += part
    none_label = f"(no {query.tag_key} tag)" if query.is_tag_group else "(none)"
    return [
        DayAmount(key, key or none_label, day, currency, amount)
        for (key, day, currency), amount in sums.items()
    ]


def explorer_rows(
    query: ExplorerQuery,
    *,
    teams: QuerySet[Team],
    include_unowned: bool,
    month: date | None = None,
    since: date | None = None,
    until: date | None = None,
) -> list[DayAmount]:
    """Native amounts per (key, day, currency), exact. ExplorerError when the question mixes
    the ledger and the bill, or when someone who does not see every team asks the bill."""
    if query.source() == LEDGER:
        return _ledger_rows(
            query, teams=teams, include_unowned=include_unowned, month=month, since=since,
            until=until,
        )  # fmt: skip
    if not include_unowned:
        raise ExplorerError(
            query.group_by if query.group_by not in LEDGER_FIELDS else "cost",
            "Region, instance type, tags and invoiced cost come from the bill, which is not "
            "split by team: finance only. Group by team, category, provider, account or "
            "service to see your teams' amortised cost.",
        )
    return _bill_rows(query, month=month, since=since, until=until)


def _converted(rows: list[DayAmount], currency: str) -> list[Fraction]:
    """Each row in `currency` at its day's rate (FxRateMissing names the first day lacking one)."""
    if not rows:
        return []
    rows.sort(key=lambda r: (r.day, r.currency))
    converter = converter_for(
        to_currency=currency,
        currencies={r.currency for r in rows},
        first_day=rows[0].day,
        last_day=rows[-1].day,
    )
    return [
        r.amount * converter.table.rate(day=r.day, from_currency=r.currency, to_currency=currency)
        for r in rows
    ]


def _key_order(key: str | None) -> tuple[bool, str]:
    return (key is None, key or "")


def explorer_points(
    query: ExplorerQuery,
    *,
    teams: QuerySet[Team],
    include_unowned: bool,
    currency: str,
    interval: str,
    month: date | None = None,
    since: date | None = None,
    until: date | None = None,
) -> list[CostPoint]:
    """Cost per bucket (day, ISO week, month) and key, oldest bucket first, keys in order
    (no key last); each point converted per day, summed exactly, rounded once."""
    rows = explorer_rows(
        query, teams=teams, include_unowned=include_unowned, month=month, since=since, until=until
    )
    values = _converted(rows, currency)
    sums: dict[tuple[date, str | None], Fraction] = defaultdict(Fraction)
    for row, value in zip(rows, values, strict=True):
        sums[(bucket_start(row.day, interval), row.key)] += value
    return [
        CostPoint(t=t, key=key, cost=money_round(value), currency=currency)
        for (t, key), value in sorted(
            sums.items(), key=lambda kv: (kv[0][0], *_key_order(kv[0][1]))
        )
    ]


def explorer_series(
    query: ExplorerQuery,
    *,
    month: date,
    teams: QuerySet[Team],
    include_unowned: bool,
    currency: str,
) -> CostSeriesReport:
    """The month report of /api/v1/costs/ (daily points per key, totals) for any dimension."""
    rows = explorer_rows(query, teams=teams, include_unowned=include_unowned, month=month)
    values = _converted(rows, currency)
    points: dict[str | None, dict[date, Fraction]] = defaultdict(lambda: defaultdict(Fraction))
    labels: dict[str | None, str] = {}
    native: dict[str, Fraction] = defaultdict(Fraction)
    for row, value in zip(rows, values, strict=True):
        points[row.key][row.day] += value
        labels[row.key] = row.label
        native[row.currency] += row.amount
    series = [
        CostSeries(
            key=key,
            label=labels[key],
            total=money_round(sum(days.values(), Fraction(0))),
            points=[SeriesPoint(day, money_round(v)) for day, v in sorted(days.items())],
        )
        for key, days in sorted(points.items(), key=lambda kv: _key_order(kv[0]))
    ]
    return CostSeriesReport(
        month=month,
        currency=currency,
        group_by=query.group_by,
        total=money_round(sum(values, Fraction(0))),
        native_totals=[
            NativeAmount(c, money_round(native[c])) for c in sorted(native, key=currency_order)
        ],
        series=series,
    )
