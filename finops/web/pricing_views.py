"""Pricing pages (issues 13 and 27): what to do (recommendations with their money and status),
the per-team comparison, one table of the catalogue prices behind it (with a staleness
warning), commitments, and the finance-only assumptions form. Thin: check access, call the
pricing selectors and services, render."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from finops.economics.selectors import teams_measured_power_stored
from finops.org.permissions import user_is_finance
from finops.org.selectors import team_list_visible
from finops.pricing.commitments import commitment_utilisation, coverage
from finops.pricing.comparisons import assumptions_current, team_month_pricing
from finops.pricing.models import PricingAssumptions, Recommendation
from finops.pricing.prices import KINDS
from finops.pricing.recommendation_overlaps import open_savings_summary
from finops.pricing.recommendations import (
    RecommendationPermissionError,
    price_inputs_stamp,
    recommendation_list_filtered,
    recommendation_list_visible,
    recommendation_notes,
    recommendation_status_change,
    recommendations_current,
)
from finops.pricing.services import pricing_assumptions_update
from finops.web.access import require_finance
from finops.web.page_cache import panel_cached
from finops.web.pricing_forms import PricingAssumptionsForm
from finops.web.views import _resolve_month

# How the page names each alternative (the API keeps its keys).
ALTERNATIVE_LABELS = {
    "on_demand": "on demand",
    "spot": "spot",
    "reserved_1y": "reserved 1 year",
    "reserved_3y": "reserved 3 years",
    "on_prem": "on premises",
}
# Prices older than the month by more than this are said to be stale (issue 27).
STALE_DAYS = 90


def _with_best(body: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    best = body["best_alternative"]
    # None: no alternative could be priced (the on-demand figure is unknown, no GPU-hours).
    body["best_cost"] = body[best]["cost"] if best else None
    body["best_label"] = ALTERNATIVE_LABELS.get(best, best) if best else "unknown"
    body["team_name"] = names.get(body["team"], body["team"])
    return body


def catalogue_rows(comparisons: list[dict[str, Any]], month: dt.date) -> list[dict[str, Any]]:
    """One row per (provider, instance type) behind any comparison shown, each way of buying
    it in a column (None: no catalogue figure, the configured ratio stands in), the oldest
    figure's date and whether it is older than the month by more than STALE_DAYS."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for comparison in comparisons:
        for body in comparison["prices"]:
            key = (body.get("provider", ""), body["instance_type"])
            if key in rows:
                continue
            figures = {f["kind"]: f for f in body["figures"]}
            dates = sorted(f["date"] for f in body["figures"] if f["date"])
            oldest = dt.date.fromisoformat(dates[0]) if dates else None
            sources = sorted({_short_source(f["source"]) for f in body["figures"]})
            rows[key] = {
                "instance_type": body["instance_type"],
                "currency": body["currency"],
                "region": next(iter(figures.values()))["region"] if figures else "",
                "hourly": [figures.get(kind, {}).get("hourly") for kind in KINDS],
                "sources": sources,
                "source_titles": "; ".join(sorted({f["source"] for f in body["figures"]})),
                "oldest": oldest,
                "stale": oldest is not None and (month - oldest).days > STALE_DAYS,
                "missing_note": body["missing_note"],
            }
    return sorted(rows.values(), key=lambda r: r["instance_type"].lower())


def _short_source(source: str) -> str:
    """ "snapshot: tsaol/aws-gpu@2d0108c data/...json, 2025-11-30" -> "snapshot tsaol/aws-gpu@
    2d0108c"; a refresh's "AWS Price List API (get_products), fetched ..." -> its catalogue."""
    if source.startswith("snapshot: "):
        return "snapshot " + source.removeprefix("snapshot: ").split(" ", 1)[0]
    return source.split(", fetched", 1)[0]


def _recommendations(request: HttpRequest, month: dt.date) -> list[Recommendation]:
    recommendations_current(month=month)
    rows = recommendation_list_filtered(recommendation_list_visible(user=request.user), month=month)
    return list(rows)


@dataclass(frozen=True)
class _PricingFigures:
    comparisons: list[dict[str, Any]]
    catalogue: list[dict[str, Any]]
    covered: list[dict[str, Any]]
    commitments: Any


@login_required
def pricing(request: HttpRequest) -> HttpResponse:
    month, months = _resolve_month(request)
    finance = user_is_finance(request.user)
    teams = team_list_visible(user=request.user).order_by("slug")
    names = {team.slug: team.name for team in teams}
    team_ids = [t.pk for t in teams]

    def figures() -> _PricingFigures:
        comparisons = [
            _with_best(p, names)
            for p in team_month_pricing(
                month=month, teams=teams, org_wide=finance,
                power=teams_measured_power_stored(month=month, team_ids=team_ids),
            )
        ]  # fmt: skip
        covered = []
        for team in teams:
            share = coverage(month=month, team_id=team.pk)
            if share is not None:
                percent = (share * 100).quantize(Decimal("0.1"))
                covered.append({"team": team.name, "share": share, "percent": percent})
        return _PricingFigures(
            comparisons=comparisons,
            catalogue=catalogue_rows(comparisons, month),
            covered=covered,
            # Commitments are bought for the organisation, not a team: finance only.
            commitments=commitment_utilisation(month=month) if finance else None,
        )

    # The comparisons read the ledger (the data version follows it) and the assumptions and
    # price catalogue (it does not: they are in the key, as the recommendations' stamp).
    cached = panel_cached(
        "pricing",
        key=lambda: [month, team_ids, finance, price_inputs_stamp(month=month)],
        compute=figures,
    )
    comparisons, catalogue = cached.comparisons, cached.catalogue
    recommendations = _recommendations(request, month)
    context = {
        "month": month,
        "months": months,
        "finance": finance,
        "comparisons": comparisons,
        "catalogue": catalogue,
        "kinds": KINDS,
        "stale": [row for row in catalogue if row["stale"]],
        "stale_days": STALE_DAYS,
        "coverage": cached.covered,
        "commitments": cached.commitments,
        "recommendations": recommendations,
        # Why a team has no commitment advice (no steady use, spot only, ...), not nothing.
        "recommendation_notes": recommendation_notes(month=month, teams=teams),
        # Each overlap of two open recommendations counted once (recommendation_overlaps).
        "savings_total": open_savings_summary(recommendations),
        "statuses": Recommendation.Status.choices,
        "assumption_warnings": assumptions_current().warnings,
    }
    return render(request, "web/pricing.html", context)


@login_required
@require_POST
def recommendation_status(request: HttpRequest, pk: int) -> HttpResponse:
    """The status form of a recommendation (finance, or the team's lead)."""
    if not recommendation_list_visible(user=request.user).filter(pk=pk).exists():
        raise Http404("No such recommendation.")
    status = request.POST.get("status", "")
    if status not in Recommendation.Status.values:
        raise Http404("No such status.")
    try:
        recommendation_status_change(
            recommendation_id=pk, status=status, user=request.user,
            comment=request.POST.get("comment", "").strip()[:2000],
        )  # fmt: skip
    except RecommendationPermissionError:
        raise Http404("No such recommendation.") from None
    back = request.POST.get("next", "")
    safe = url_has_allowed_host_and_scheme(back, allowed_hosts=None)
    return redirect(back if back and safe else "web:pricing")


@login_required
def pricing_settings(request: HttpRequest) -> HttpResponse:
    require_finance(request)
    # The form starts from the values in use: a stored value that fails validation shows its
    # default, and the warnings above the form say which and why.
    instance = PricingAssumptions.current()
    warnings = instance.usable()
    form = PricingAssumptionsForm(request.POST or None, instance=instance)
    if request.method == "POST" and form.is_valid():
        pricing_assumptions_update(user=request.user, values=form.checked)
        return redirect("web:pricing_settings")
    context = {"form": form, "warnings": warnings, "updated_at": instance.updated_at}
    return render(request, "web/pricing_settings.html", context)
