"""Pages. Thin: check access, resolve the month, call one selector, render."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from finops.anomalies.selectors import open_anomaly_counts
from finops.attribution.models import Category, RunCost
from finops.attribution.selectors import overview as overview_selectors
from finops.attribution.selectors import reconciliation as reconciliation_selectors
from finops.attribution.selectors import runs as run_selectors
from finops.attribution.selectors import team as team_selectors
from finops.attribution.selectors.dashboard import (
    DEFAULT_MONTHS,
    MAX_MONTHS,
    MIN_MONTHS,
    overview_dashboard,
    team_daily_by_category,
)
from finops.attribution.selectors.idle_showback import (
    IdleShowback,
    idle_showback,
    idle_showback_stored,
)
from finops.attribution.selectors.reporting import CATEGORIES, CategoryRow, Reporting
from finops.budgets.selectors import budget_statuses_of_team, budgets_at_risk
from finops.core.months import month_add, month_format, month_parse
from finops.economics.filters import RunFilterSet
from finops.economics.selectors import team_efficiency_stored
from finops.energy.selectors import measured_power
from finops.inference import selectors as inference_selectors
from finops.org.models import Team
from finops.org.permissions import user_is_finance
from finops.org.selectors import team_list_visible
from finops.pipeline.selectors import pipeline_last_runs
from finops.pipeline.services import PipelineQueueError, pipeline_start
from finops.pricing.comparisons import run_pricing, team_month_pricing
from finops.pricing.models import Recommendation
from finops.pricing.recommendations import (
    recommendation_notes,
    run_spot_advice,
    team_recommendations,
)
from finops.pricing.selectors import idle_advice_of_teams
from finops.run_metrics.plan_selectors import plan_against_actual
from finops.run_metrics.progress import run_progress_points
from finops.run_metrics.progress_cost import progress_against_cost
from finops.run_metrics.selectors import RunKey, run_efficiency
from finops.run_metrics.team_efficiency import TeamMonthEfficiency
from finops.web.access import require_finance
from finops.web.energy_context import (
    endpoint_month_energy,
    energy_card_cached,
    run_month_energy,
    team_energy_cached,
)
from finops.web.page_cache import panel_cached
from finops.web.waste_views import (
    checkpoint_advice_cached,
    run_waste_panels,
    runs_with_waste,
    waste_card_cached,
)


def _months_with_data() -> list[date]:
    """month_list_with_data, read on every page: two small queries (it no longer scans the line
    items), so it needs no cache and a newly imported month shows at once."""
    return overview_selectors.month_list_with_data()


def _resolve_month(request: HttpRequest) -> tuple[date, list[date]]:
    """The ?month=YYYY-MM asked for, else the latest month with data (else this month)."""
    months = _months_with_data()
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


def _idle_showback(*, month: date, teams: QuerySet[Team]) -> list[IdleShowback]:
    """idle_showback as the month's attribution stored it, else (a month attributed before the
    store) once per data version (the ledger changes only with attribution)."""
    stored = idle_showback_stored(month=month, teams=teams)
    if stored is not None:
        return stored
    return panel_cached(
        "idle_showback",
        key=lambda: (month, sorted(teams.values_list("pk", flat=True))),
        compute=lambda: idle_showback(month=month, teams=teams),
    )


def _team_efficiency(*, team: Team, month: date) -> list[TeamMonthEfficiency]:
    """The six months up to `month`, oldest first, from the stored rollup, once per data
    version: it reads every training row of the team's six months (thousands at demo scale),
    the one panel of the team page that was read again on every view."""
    months = [month_add(month, -i) for i in range(5, -1, -1)]
    return panel_cached(
        "team_efficiency",
        key=lambda: (team.pk, months),
        compute=lambda: team_efficiency_stored(team=team, months=months),
    )


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


def several_currencies(totals: list[CategoryRow], reporting: Reporting | None) -> bool:
    """Show the reporting-currency tables beside the native ones only when they differ: one
    currency that is the reporting currency would show every table twice."""
    return reporting is not None and {t.currency for t in totals} != {reporting.currency}


TEAM_TOP_RUNS = 20
# The overview's team tables for a lead: unallocated cost is the organisation's, never a team's,
# so on a lead's rows (their teams only) that column would read 0.00 throughout.
TEAM_CATEGORIES = [c for c in CATEGORIES if c != Category.UNALLOCATED]
IDLE_ADVICE_KINDS = (Recommendation.Kind.IDLE, Recommendation.Kind.RIGHTSIZE)


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    month, months = _resolve_month(request)
    finance = user_is_finance(request.user)
    teams = team_list_visible(user=request.user)
    data = overview_selectors.month_overview(month=month, teams=teams, include_unowned=finance)
    dashboard = overview_dashboard(
        month=month,
        months=_int_param(request, "months", DEFAULT_MONTHS),
        group_by=request.GET.get("by", "team"),
        teams=teams,
        include_unowned=finance,
    )
    showback = _idle_showback(month=month, teams=teams)
    # A lead's KPI beside the charged idle: the showback of their teams, per currency.
    shown_totals: dict[str, Decimal] = {}
    for row in showback:
        shown_totals[row.currency] = shown_totals.get(row.currency, Decimal(0)) + row.shown
    context = {
        "month": month,
        "months": months,
        "overview": data,
        "dashboard": dashboard,
        "month_choices": range(MIN_MONTHS, MAX_MONTHS + 1),
        "several_currencies": several_currencies(data.totals, data.reporting),
        "budgets_at_risk": budgets_at_risk(user=request.user, month=month),
        "waste_card": waste_card_cached(month=month, teams=teams, include_unowned=finance),
        "idle_showback": showback,
        "idle_shown_totals": shown_totals,
        # The showback (shown, not charged) moves with other teams' use of the pools: the ONE
        # lead-visible figure allowed to (tests/security/test_lead_isolation.py), labelled so.
        # Who bears it (platform or other teams' pools) is split out for finance only.
        "idle_shared_split": finance,
        # Unallocated cost is no team's: a lead's would always read 0.00 (h-pages).
        "sees_unallocated": finance,
        "idle_advice": idle_advice_of_teams(month=month, teams=teams),
        "energy_card": energy_card_cached(month=month, teams=teams, include_unowned=finance),
        "show_teams": True,
        "categories": CATEGORIES if finance else TEAM_CATEGORIES,
        "open_anomalies": sum(
            open_anomaly_counts(
                teams=team_list_visible(user=request.user), include_unowned=finance
            ).values()
        ),
    }
    return render(request, "web/overview.html", context)


@login_required
def team_detail(request: HttpRequest, slug: str) -> HttpResponse:
    # A team the viewer may not see is indistinguishable from one that does not exist.
    team = get_object_or_404(team_list_visible(user=request.user), slug=slug)
    month, months = _resolve_month(request)
    runs_filter = RunFilterSet(
        data={"month": month_format(month), "team": team.slug},
        queryset=run_selectors.run_cost_list_visible(
            teams=team_list_visible(user=request.user), include_unowned=False
        ),
    )
    data = team_selectors.team_month(team=team, month=month)
    runs = runs_filter.qs
    recommendations = team_recommendations(team=team, month=month)
    energy = team_energy_cached(team=team, month=month)
    power = measured_power(energy)
    context = {
        "team": team,
        "month": month,
        "months": months,
        "data": data,
        "several_currencies": several_currencies(data.totals, data.reporting),
        # The top runs by cost; the runs browser has them all (sortable, filtered, paged).
        "runs": runs_with_waste(list(runs[:TEAM_TOP_RUNS]), month=month),
        "run_count": runs.count(),
        "daily_by_category": team_daily_by_category(team=team, month=month),
        "categories": CATEGORIES,
        "open_anomalies": open_anomaly_counts(
            teams=team_list_visible(user=request.user).filter(pk=team.pk), include_unowned=False
        ).get(team.pk, 0),
        "team_budgets": budget_statuses_of_team(team=team, month=month),
        "waste_card": waste_card_cached(
            month=month, teams=Team.objects.filter(pk=team.pk), include_unowned=False
        ),
        "checkpoint_advice": checkpoint_advice_cached(
            month=month, teams=Team.objects.filter(pk=team.pk), include_unowned=False
        ),
        "recommendations": recommendations,
        "recommendation_notes": recommendation_notes(
            month=month, teams=Team.objects.filter(pk=team.pk)
        ),
        "idle_showback": _idle_showback(month=month, teams=Team.objects.filter(pk=team.pk)),
        "idle_shared_split": user_is_finance(request.user),
        "idle_advice": [
            r
            for r in recommendations
            if r.kind in IDLE_ADVICE_KINDS and r.status == Recommendation.Status.OPEN
        ],
        "energy": energy,
        "statuses": Recommendation.Status.choices,
        # The six months up to this one, oldest first (a trend), from the stored rollup.
        "efficiency": _team_efficiency(team=team, month=month),
        "pricing": [
            {**body, "chart_id": f"pricing-{i}"}
            for i, body in enumerate(
                team_month_pricing(
                    month=month,
                    teams=Team.objects.filter(pk=team.pk),
                    org_wide=user_is_finance(request.user),
                    power={team.pk: power} if power is not None else None,
                )
            )
        ],
    }
    return render(request, "web/team.html", context)


@login_required
def run_detail(request: HttpRequest, team_slug: str, run_id: str) -> HttpResponse:
    team = get_object_or_404(team_list_visible(user=request.user), slug=team_slug)
    month, months = _resolve_month(request)
    detail = run_selectors.run_detail(team=team, run_id=run_id, month=month)
    if detail is None:
        raise Http404("No such run in this month.")
    rollups = RunCost.objects.filter(team=team, run_id=run_id, billing_period=month)
    energy = run_month_energy(team=team, run_id=run_id, month=month)
    pricing = [
        {
            **run_pricing(
                run=rollup, org_wide=user_is_finance(request.user), measured=measured_power(energy)
            ),
            "chart_id": f"pricing-{i}",
        }
        for i, rollup in enumerate(rollups.order_by("cluster", "billing_currency"))
    ]
    currency = detail.rollups[0].billing_currency if detail.rollups else ""
    efficiency = run_efficiency(RunKey(team.pk, team.slug, run_id, currency)) if currency else None
    progress = None
    if efficiency is not None:
        points = run_progress_points(team_slug=team.slug, run_id=run_id)
        progress = progress_against_cost(points, detail.jobs, currency)
    context = {
        "team": team, "month": month, "months": months, "run": detail, "pricing": pricing,
        # The team's spot recommendation, where it names this run.
        "spot_advice": run_spot_advice(team=team, month=month, run_id=run_id),
        "efficiency": efficiency, "progress": progress,
        "plan": plan_against_actual(team=team, run_id=run_id),
        "energy": energy,
        "waste_panels": run_waste_panels(team=team, run_id=run_id, month=month),
    }  # fmt: skip
    return render(request, "web/run.html", context)


@login_required
def reconciliation(request: HttpRequest) -> HttpResponse:
    require_finance(request)
    month, months = _resolve_month(request)
    context = {
        "month": month,
        "months": months,
        "recon": reconciliation_selectors.reconciliation_for_month(month=month),
        "categories": CATEGORIES,
    }
    return render(request, "web/reconciliation.html", context)


@login_required
def pipeline(request: HttpRequest) -> HttpResponse:
    """Each month's last pipeline run, step by step (finance only)."""
    require_finance(request)
    return render(request, "web/pipeline.html", {"runs": pipeline_last_runs()})


@require_POST
@login_required
def pipeline_run_again(request: HttpRequest) -> HttpResponse:
    """Queue a new run of a month's pipeline; an unreachable broker is said, not a 500."""
    require_finance(request)
    try:
        month = month_parse(request.POST.get("month", ""))
    except ValueError as exc:
        raise BadRequest("month must be YYYY-MM") from exc
    try:
        [run] = pipeline_start(months=[month], reason=f"run again by {request.user}")
    except PipelineQueueError as exc:
        messages.error(request, f"{month_format(month)}: not queued: {exc}")
    else:
        run.refresh_from_db()  # eager: it has already run
        messages.success(request, f"{month_format(month)}: pipeline run {run.pk} {run.status}")
    return redirect("web:pipeline")


@login_required
def endpoints(request: HttpRequest) -> HttpResponse:
    """Inference endpoints of the month, one row per endpoint and team the viewer may see (an
    endpoint's cost is split by the team owning each pod); ?team=slug narrows to one team.
    Finance also sees the serving nodes' cost and idle share (they include other teams' cost)
    and endpoint-days with usage but no cost, which no $/request can be computed for."""
    month, months = _resolve_month(request)
    team_slug = request.GET.get("team", "").strip() or None
    finance = user_is_finance(request.user)
    rows = inference_selectors.endpoint_month_totals(
        month=month,
        teams=team_list_visible(user=request.user),
        include_unowned=finance,
        team_slug=team_slug,
        capacity=finance,
    )
    context = {
        "month": month,
        "months": months,
        "rows": rows,
        "team_slug": team_slug,
        "finance": finance,
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
    """One endpoint's month: the parts of the teams the viewer may see, and their days."""
    month, months = _resolve_month(request)
    finance = user_is_finance(request.user)
    days = list(
        inference_selectors.endpoint_costs(
            month=month,
            endpoint=name,
            teams=team_list_visible(user=request.user),
            include_unowned=finance,
        )
        .select_related("team")
        .order_by("day", "team__name", "billing_currency")
    )
    if not days:
        # Unknown, not in this month, or only other teams' pods: all look the same.
        raise Http404("No such endpoint in this month.")
    totals = inference_selectors.endpoint_month_rows(days, capacity=finance)
    context = {
        "month": month,
        "months": months,
        "endpoint": name,
        "finance": finance,
        "days": days,
        "totals": totals,
        "energy": endpoint_month_energy(
            month=month, endpoint=name, totals=totals,
            teams=team_list_visible(user=request.user), finance=finance,
        ),
    }  # fmt: skip
    return render(request, "web/endpoint.html", context)
