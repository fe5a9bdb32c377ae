"""Pages. Thin: check access, resolve the month, call one selector, render."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import Any

from django.apps import apps
from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest, PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils import timezone

from billing_ingest.models import ImportBatch
from finops.api.filters import RunCostFilterSet, month_format, month_parse
from finops.attribution import selectors
from finops.attribution.dashboard import (
    DEFAULT_MONTHS,
    MAX_MONTHS,
    MIN_MONTHS,
    overview_dashboard,
    team_daily_by_category,
)
from finops.inference import selectors as inference_selectors
from finops.inference.models import EndpointCost
from finops.inference.selectors import EndpointMonth
from finops.org.permissions import user_is_finance
from finops.org.selectors import endpoint_owners_visible, team_list_visible


def _resolve_month(request: HttpRequest) -> tuple[date, list[date]]:
    """The ?month=YYYY-MM asked for, else the latest month with data (else this month)."""
    months = selectors.month_list_with_data()
    raw = request.GET.get("month", "").strip()
    if raw:
        try:
            month = month_parse(raw)
        except ValueError as exc:
            raise BadRequest(f"“{raw}” is not a month: use YYYY-MM, e.g. 2025-09.") from exc
        # A month without data still shows as the one selected in the picker.
        return month, months if month in months else sorted([*months, month], reverse=True)
    if months:
        return months[0], months
    month = timezone.now().date().replace(day=1)
    return month, [month]


# Public for the other page modules (runs browser, uploads).
resolve_month = _resolve_month


def _int_param(request: HttpRequest, name: str, default: int) -> int:
    raw = request.GET.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise BadRequest(f"{name} must be a whole number, not “{raw}”.") from exc


def several_currencies(
    totals: list[selectors.CategoryRow], reporting: selectors.Reporting | None
) -> bool:
    """Show the reporting-currency tables beside the native ones only when they differ: one
    currency that is the reporting currency would show every table twice."""
    return reporting is not None and {t.currency for t in totals} != {reporting.currency}


TEAM_TOP_RUNS = 20


def _require_finance(request: HttpRequest) -> None:
    if not user_is_finance(request.user):
        raise PermissionDenied("Finance only.")


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    month, months = _resolve_month(request)
    finance = user_is_finance(request.user)
    teams = team_list_visible(user=request.user)
    data = selectors.month_overview(month=month, teams=teams, include_unowned=finance)
    dashboard = overview_dashboard(
        month=month,
        months=_int_param(request, "months", DEFAULT_MONTHS),
        group_by=request.GET.get("by", "team"),
        teams=teams,
        include_unowned=finance,
    )
    context = {
        "month": month,
        "months": months,
        "overview": data,
        "dashboard": dashboard,
        "month_choices": range(MIN_MONTHS, MAX_MONTHS + 1),
        "several_currencies": several_currencies(data.totals, data.reporting),
        # Filled by the budgets and anomalies apps once installed (this page never imports them).
        "show_alerts": apps.is_installed("finops.budgets") or apps.is_installed("finops.anomalies"),
        "categories": selectors.CATEGORIES,
    }
    return render(request, "web/overview.html", context)


@login_required
def team_detail(request: HttpRequest, slug: str) -> HttpResponse:
    # A team the viewer may not see is indistinguishable from one that does not exist.
    team = get_object_or_404(team_list_visible(user=request.user), slug=slug)
    month, months = _resolve_month(request)
    runs_filter = RunCostFilterSet(
        data={"month": month_format(month), "team": team.slug},
        queryset=selectors.run_cost_list_visible(
            teams=team_list_visible(user=request.user), include_unowned=False
        ),
    )
    data = selectors.team_month(team=team, month=month)
    runs = runs_filter.qs
    context = {
        "team": team,
        "month": month,
        "months": months,
        "data": data,
        "several_currencies": several_currencies(data.totals, data.reporting),
        # The top runs by cost; the runs browser has them all (sortable, filtered, paged).
        "runs": list(runs[:TEAM_TOP_RUNS]),
        "run_count": runs.count(),
        "daily_by_category": team_daily_by_category(team=team, month=month),
        "categories": selectors.CATEGORIES,
    }
    return render(request, "web/team.html", context)


@login_required
def run_detail(request: HttpRequest, team_slug: str, run_id: str) -> HttpResponse:
    team = get_object_or_404(team_list_visible(user=request.user), slug=team_slug)
    month, months = _resolve_month(request)
    detail = selectors.run_detail(team=team, run_id=run_id, month=month)
    if detail is None:
        raise Http404("No such run in this month.")
    context = {"team": team, "month": month, "months": months, "run": detail}
    return render(request, "web/run.html", context)


@login_required
def reconciliation(request: HttpRequest) -> HttpResponse:
    _require_finance(request)
    month, months = _resolve_month(request)
    context = {
        "month": month,
        "months": months,
        "recon": selectors.reconciliation_for_month(month=month),
        "categories": selectors.CATEGORIES,
    }
    return render(request, "web/reconciliation.html", context)


@login_required
def import_batches(request: HttpRequest) -> HttpResponse:
    _require_finance(request)
    from finops.web.upload_views import imports_context

    context = {"page": import_batches_page(request), **imports_context()}
    uploaded = request.GET.get("uploaded", "")
    if uploaded.isdigit():
        # The batch just uploaded: the page polls its progress (static/finops-imports.js).
        context["uploaded"] = ImportBatch.objects.filter(id=int(uploaded)).first()
    return render(request, "web/imports.html", context)


def import_batches_page(request: HttpRequest) -> Any:
    paginator = Paginator(ImportBatch.objects.order_by("-created_at", "-id"), 50)
    return paginator.get_page(request.GET.get("page"))


@login_required
def endpoints(request: HttpRequest) -> HttpResponse:
    """Inference endpoints of the month the viewer may see (an endpoint belongs to the team of
    its ledger rows: org.selectors.endpoint_owners); ?team=slug narrows to one team. Finance also
    sees endpoint-days with usage but no cost, which no $/request can be computed for."""
    month, months = _resolve_month(request)
    team_slug = request.GET.get("team", "").strip() or None
    owners = endpoint_owners_visible(user=request.user, month=month, team_slug=team_slug)
    rows = [
        (total, owners[total.endpoint])
        for total in inference_selectors.endpoint_month_totals(month=month)
        if total.endpoint in owners
    ]
    finance = user_is_finance(request.user)
    context = {
        "month": month,
        "months": months,
        "rows": rows,
        "team_slug": team_slug,
        "uncosted": _uncosted(month) if finance else [],
    }
    return render(request, "web/endpoints.html", context)


def _uncosted(month: date) -> list[tuple[str, list[date]]]:
    """usage_without_cost grouped per endpoint: (endpoint, days)."""
    days: dict[str, list[date]] = {}
    for day, endpoint in inference_selectors.usage_without_cost(month=month):
        days.setdefault(endpoint, []).append(day)
    return sorted(days.items())


@login_required
def endpoint_detail(request: HttpRequest, name: str) -> HttpResponse:
    month, months = _resolve_month(request)
    owner = endpoint_owners_visible(user=request.user, month=month).get(name)
    if owner is None:
        # Unknown, not in this month, or another team's: all look the same.
        raise Http404("No such endpoint in this month.")
    days = list(
        inference_selectors.endpoint_costs(month=month, endpoint=name).order_by(
            "day", "billing_currency"
        )
    )
    context = {
        "month": month,
        "months": months,
        "endpoint": name,
        "owner": owner,
        "days": days,
        "totals": _endpoint_totals(name, days),
    }
    return render(request, "web/endpoint.html", context)


def _endpoint_totals(name: str, days: list[EndpointCost]) -> list[EndpointMonth]:
    """The month per currency from the day rows already read (as endpoint_month_totals)."""
    sums: dict[str, list[Any]] = {}
    for row in days:
        acc = sums.setdefault(row.billing_currency, [Decimal(0), Decimal(0), 0, 0, 0, 0])
        for i, value in enumerate((row.cost, row.gpu_seconds, row.requests, row.tokens,
                                   row.node_cost, row.node_idle_cost)):  # fmt: skip
            acc[i] += value
    return [EndpointMonth(name, currency, *values) for currency, values in sorted(sums.items())]
