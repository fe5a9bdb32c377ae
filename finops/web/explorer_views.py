"""The cost explorer page: cost grouped and filtered by any dimension (CostExplorerFilterSet,
the API's own), daily or monthly over 1-12 months, as a stacked chart drawn from its data
table, with the same figures as CSV from /api/v1/costs/."""

from __future__ import annotations

import calendar
from collections import defaultdict
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from urllib.parse import urlencode

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from finops.attribution.selectors.explorer import (
    DIMENSIONS,
    LABELS,
    LEDGER_FIELDS,
    ExplorerError,
    explorer_points,
)
from finops.attribution.selectors.explorer_filters import DIMENSION_FILTERS, CostExplorerFilterSet
from finops.attribution.selectors.timeseries import CostPoint
from finops.core.months import month_add
from finops.currency.selectors import FxRateMissing
from finops.org.permissions import user_is_finance
from finops.org.selectors import team_list_visible
from finops.web.views import resolve_month

SPANS = (1, 3, 6, 12)
# Keys drawn as their own series; the rest add up to "Other" (the totals table lists all).
CHART_KEYS = 10
ZERO = Decimal(0)


@dataclass
class ExplorerTable:
    buckets: list[date]
    # Column keys and labels, biggest total first; "Other" last when there are more.
    columns: list[tuple[str, str]]
    # bucket -> column key -> amount; and each bucket's total.
    cells: dict[date, dict[str, Decimal]]
    bucket_totals: dict[date, Decimal]
    # Every key's total, biggest first: (label, amount).
    totals: list[tuple[str, Decimal]]
    total: Decimal


def _column(key: str | None) -> str:
    return "\x00none" if key is None else key


def explorer_table(points: list[CostPoint], labels: dict[str | None, str]) -> ExplorerTable:
    """The points pivoted: one row per bucket, one column per key (the CHART_KEYS biggest and
    Other). Amounts are the points' own (each rounded once); Other and totals add them."""
    by_key: dict[str | None, Decimal] = defaultdict(lambda: ZERO)
    for p in points:
        by_key[p.key] += p.cost
    ranked = sorted(by_key, key=lambda k: (-by_key[k], k is None, k or ""))
    shown = ranked[:CHART_KEYS] if len(ranked) > CHART_KEYS + 1 else ranked
    columns = [(_column(k), labels.get(k, k or "(none)")) for k in shown]
    other = len(shown) < len(ranked)
    if other:
        columns.append(("\x00other", "Other"))
    cells: dict[date, dict[str, Decimal]] = defaultdict(lambda: defaultdict(lambda: ZERO))
    bucket_totals: dict[date, Decimal] = defaultdict(lambda: ZERO)
    shown_set = set(shown)
    for p in points:
        column = _column(p.key) if p.key in shown_set else "\x00other"
        cells[p.t][column] += p.cost
        bucket_totals[p.t] += p.cost
    return ExplorerTable(
        buckets=sorted(cells),
        columns=columns,
        cells={t: dict(v) for t, v in cells.items()},
        bucket_totals=dict(bucket_totals),
        totals=[(labels.get(k, k or "(none)"), by_key[k]) for k in ranked],
        total=sum(by_key.values(), ZERO),
    )


def _labels(points: list[CostPoint], group_by: str, request: HttpRequest) -> dict[str | None, str]:
    if group_by == "team":
        names = dict(team_list_visible(user=request.user).values_list("slug", "name"))
        return {p.key: names.get(p.key or "", "No team (platform)") for p in points}
    if group_by.startswith("tag:"):
        return {None: f"(no {group_by[4:]} tag)"}
    return {}


@login_required
def explorer(request: HttpRequest) -> HttpResponse:
    month, months = resolve_month(request)
    raw_span = request.GET.get("span", "1").strip() or "1"
    if raw_span not in {str(s) for s in SPANS}:
        raise BadRequest(f"span is a number of months: one of {', '.join(map(str, SPANS))}.")
    span = int(raw_span)
    first = month_add(month, 1 - span)
    last = month.replace(day=calendar.monthrange(month.year, month.month)[1])
    data = request.GET.copy()
    filterset = CostExplorerFilterSet(data=data)
    finance = user_is_finance(request.user)
    # Someone who sees only their teams is offered the ledger's dimensions only: the bill's
    # (region, instance type, tags, invoiced cost) are not split by team, and were offered
    # only to be refused (h-pages).
    offered = set(DIMENSIONS) if finance else set(LEDGER_FIELDS)
    context: dict[str, object] = {
        "month": month,
        "months": months,
        "spans": SPANS,
        "span": span,
        "first": first,
        "last": last,
        "form": filterset.form,
        "dimension_filters": [
            (name, label) for name, label in DIMENSION_FILTERS if name in offered
        ],
        "dimensions": [(d, LABELS[d]) for d in DIMENSIONS if d in offered],
        "currency": settings.FINOPS_REPORTING_CURRENCY,
        "finance": finance,
        "error": "",
        "table": None,
    }
    status = 200
    if not filterset.is_valid():
        context["error"] = "; ".join(f"{k}: {' '.join(v)}" for k, v in filterset.errors.items())
        return render(request, "web/explorer.html", context, status=400)
    query = filterset.explorer_query()
    interval = filterset.interval_value()
    teams = team_list_visible(user=request.user)
    team = filterset.form.cleaned_data.get("team")
    try:
        points = explorer_points(
            query,
            teams=teams.filter(slug=team) if team else teams,
            include_unowned=user_is_finance(request.user) and not team,
            currency=settings.FINOPS_REPORTING_CURRENCY,
            interval=interval,
            since=first,
            until=last,
        )
    except ExplorerError as exc:
        context["error"] = str(exc)
        status = 400
        points = []
    except FxRateMissing as exc:
        # Not the request's fault: the data lacks a rate; the page says which to load.
        context["error"] = f"Cannot convert to {settings.FINOPS_REPORTING_CURRENCY}: {exc}."
        points = []
    context["table"] = explorer_table(points, _labels(points, query.group_by, request))
    context["query"] = query
    context["interval"] = interval
    params = {k: v for k, v in data.items() if v and k not in ("month", "span", "format")}
    params.update(
        {"group_by": query.group_by, "interval": interval, "since": first.isoformat(),
         "until": last.isoformat(), "format": "csv"}
    )  # fmt: skip
    context["csv_url"] = reverse("api-costs") + "?" + urlencode(params)
    return render(request, "web/explorer.html", context, status=status)
