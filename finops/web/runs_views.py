"""The runs browser: training runs across the teams the viewer may see, filtered and sorted by
RunFilterSet (RunCostFilterSet with the stored run economics' sort keys; the API's own), paged on
the server, with the month's runs that waste most (finops.economics) above them."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from finops.attribution.models import RunCost
from finops.attribution.selectors import runs as run_selectors
from finops.attribution.selectors.filters import RunState
from finops.core.months import month_format
from finops.economics.filters import RunFilterSet
from finops.economics.models import RunEconomics
from finops.economics.selectors import runs_wasting_most
from finops.org.permissions import user_is_finance
from finops.org.selectors import team_list_visible
from finops.run_metrics.selectors import RunEfficiency, run_cost_key, run_efficiencies
from finops.web.views import resolve_month
from finops.web.waste_views import runs_with_waste

RUNS_PER_PAGE = 50
DEFAULT_ORDERING = "-cost"
# Column headers that sort: (ordering name, label). `wasted_cost` (the whole cost of failed
# attempts) stays an API sort key only, deprecated: the page shows waste by cause.
SORTABLE = [
    ("gpu_hours", "GPU-hours"),
    ("cost", "Cost"),
    ("cost_per_gpu_hour", "Per GPU-hour"),
    ("waste", "Waste"),
    ("cost_per_million_tokens", "Per 1M tokens"),
    ("mfu", "MFU"),
    ("kwh", "GPU kWh"),
    ("start", "Start"),
]
# What to change for a run whose waste is mostly one cause (finops.waste.advice for the
# checkpoint interval: the team page shows its figures).
FIXES = {
    "rework": "checkpoint more often (the team page's checkpoint advice gives the interval "
    "for spot and on-demand jobs apart)",
    "restart": "shorten start-up (data loading, compilation) or resume from a warm cache",
    "abandoned": "resume interrupted runs from their last checkpoint, or stop them sooner",
    "idle_in_allocation": "request fewer GPUs or raise utilisation (data pipeline, batch size)",
}


@login_required
def runs(request: HttpRequest) -> HttpResponse:
    month, months = resolve_month(request)
    teams = team_list_visible(user=request.user)
    visible = run_selectors.run_cost_list_visible(
        teams=teams, include_unowned=user_is_finance(request.user)
    )
    data = request.GET.copy()
    data["month"] = month_format(month)
    data.setdefault("ordering", DEFAULT_ORDERING)
    filterset = RunFilterSet(data=data, queryset=visible)
    if not filterset.is_valid():
        problems = "; ".join(f"{k}: {' '.join(v)}" for k, v in filterset.errors.items())
        raise BadRequest(f"Cannot filter the runs: {problems}")
    page = Paginator(filterset.qs, RUNS_PER_PAGE).get_page(request.GET.get("page"))
    clusters = (
        visible.filter(billing_period=month)
        .order_by("cluster")
        .values_list("cluster", flat=True)
        .distinct()
    )
    ordering = str(data["ordering"])
    context = {
        "month": month,
        "months": months,
        "page": page,
        "filters": filterset.form.cleaned_data,
        # The month picker keeps the team filter.
        "team_slug": filterset.form.cleaned_data.get("team") or None,
        "teams": teams.order_by("name"),
        "clusters": [c for c in clusters if c],
        "states": RunState.CHOICES,
        "ordering": ordering,
        "sort": {name: _sort_header(name, label, ordering) for name, label in SORTABLE},
        "query": {k: v for k, v in data.items() if k not in ("page", "format")},
        # What each run of the page bought (None: no metrics), beside its cost.
        # Waste by cause (issue 31) and what each run bought (issue 30), beside its cost.
        "rows": _with_efficiency(runs_with_waste(list(page.object_list), month=month)),
        "wasting_most": [
            (run, FIXES.get(run.cause, ""))
            for run in runs_wasting_most(
                month=month, teams=teams, include_unowned=user_is_finance(request.user)
            )
        ],
    }
    return render(request, "web/runs.html", context)


def _with_efficiency(
    runs: list[RunCost],
) -> list[tuple[RunCost, RunEfficiency | None, RunEconomics | None]]:
    """Each run with its whole-run efficiency and its stored economics row (GPU kWh)."""
    keys = {run.pk: run_cost_key(run) for run in runs}
    found = run_efficiencies(keys.values())
    stored = {
        (e.billing_period, e.team_id, e.run_id, e.cluster, e.currency): e
        for e in RunEconomics.objects.filter(
            billing_period__in={r.billing_period for r in runs},
            run_id__in={r.run_id for r in runs},
        )
    }
    return [
        (run, found.get(keys[run.pk]),
         stored.get((run.billing_period, run.team_id, run.run_id, run.cluster,
                     run.billing_currency)))
        for run in runs
    ]  # fmt: skip


def _sort_header(name: str, label: str, ordering: str) -> dict[str, object]:
    return {
        "name": name,
        "label": label,
        "next": _next_ordering(name, ordering),
        "active": ordering.lstrip("-") == name,
    }


def _next_ordering(name: str, current: str) -> str:
    """Clicking a column sorts it descending first (biggest cost first), then toggles."""
    if current == f"-{name}":
        return name
    return f"-{name}"
