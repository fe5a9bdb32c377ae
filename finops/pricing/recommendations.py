"""Recommendations (issue 27, DESIGN section 10): compute a month's from the ledger and the price
catalogue (recommendation_inputs -> recommendation_rules), store them, read them, and move one
through its status (open, done, dismissed, with a comment).

A month is computed by the pipeline after its attribution (tasks.refresh_recommendations), and
again by a reader whenever what it was computed from moved since (the month's newest attribution,
the pricing assumptions, the refreshed prices, the snapshot): `recommendations_current`. A
recompute updates each action in place (same month, team, kind, key, currency), keeping its
status and comment; an open action the data no longer supports is removed, a done or dismissed
one kept (it is history).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import IntegrityError, transaction
from django.db.models import Count, FloatField, Max, QuerySet
from django.db.models.functions import Cast
from django.utils import timezone
from django.utils.module_loading import import_string

from finops.attribution.models import AttributionRun
from finops.audit.services import audit_record
from finops.core.months import month_format
from finops.org.models import Team
from finops.org.permissions import user_is_finance, user_is_viewer, user_may_edit
from finops.org.selectors import team_list_visible
from finops.pricing import prices, recommendation_inputs, snapshot
from finops.pricing.comparisons import assumptions_current
from finops.pricing.models import (
    InstancePrice,
    PricingAssumptions,
    Recommendation,
    RecommendationMonth,
    SkuPrice,
)
from finops.pricing.recommendation_commits import Note, commit_drafts, commit_notes
from finops.pricing.recommendation_overlaps import overlaps_stamped
from finops.pricing.recommendation_rules import (
    SMALLER_TYPES,
    Draft,
    idle_drafts,
    rightsize_drafts,
    spot_drafts,
)

AnyUser = AbstractBaseUser | AnonymousUser
# Bumped when the rules change, so stored months are computed again. 5: an inference
# endpoint's pods are advised by the endpoint advice only (not the idle-allocation one too);
# overlaps with the idle-allocation advice stamped (recommendation_overlaps).
RULES_VERSION = "5"


class RecommendationPermissionError(Exception):
    """The user may not change this recommendation's status."""


def recommendations_compute(*, month: dt.date) -> list[Draft]:
    """Every recommendation the month's data supports (nothing is stored)."""
    return recommendations_and_notes(month=month)[0]


def recommendations_and_notes(*, month: dt.date) -> tuple[list[Draft], list[Note]]:
    """The month's recommendations, and why a team with GPU use has no commitment advice."""
    window = recommendation_inputs.window_of(month)
    nodes = recommendation_inputs.nodes_of(window)
    jobs = recommendation_inputs.jobs_of(window)
    curves, requested = recommendation_inputs.held_and_requested(jobs, nodes, window)
    supply = recommendation_inputs.supply_curves(nodes, window)
    pools = {info.pool for info in nodes.values()}
    quotes = {(p[0], p[1], p[2]): prices.quote(p[0], p[1], p[2]) for p in pools}
    gpus = {info.instance_type: info.gpus for info in nodes.values()}
    a = assumptions_current()
    endpoints = recommendation_inputs.endpoint_money(month, nodes)
    for provider, _, region, _ in {key for by_pool in endpoints.values() for key in by_pool}:
        smaller = _smaller(provider)
        if smaller:
            quotes.setdefault((provider, smaller, region), prices.quote(provider, smaller, region))
            entry = snapshot.price_entry_any(smaller)
            gpus.setdefault(smaller, int(entry["gpus"]) if entry else 1)
    starts = recommendation_inputs.history_starts(jobs)
    commits = commit_drafts(
        curves=curves, starts=starts,
        rates=recommendation_inputs.per_held_gpu_hour(
            recommendation_inputs.job_money(month, nodes), curves, window
        ),
        quotes=quotes, a=a, window=window, requested=requested,
        capacity=recommendation_inputs.pool_gpus(supply, nodes),
    )  # fmt: skip
    notes = commit_notes(curves=curves, starts=starts, drafts=commits, a=a, window=window)
    # Where two savings overlap on the same cost, the overlap is stamped on one of them (the
    # headline total counts it once: recommendation_overlaps).
    return overlaps_stamped([
        *commits,
        *spot_drafts(
            runs=recommendation_inputs.on_demand_runs(month, nodes), gpus=gpus, quotes=quotes,
            a=a, window=window,
        ),
        *idle_drafts(
            supply=supply, curves=curves,
            sums=recommendation_inputs.idle_money(month, nodes), nodes=nodes, a=a, window=window,
        ),
        *rightsize_drafts(
            utilisation=recommendation_inputs.endpoint_utilisation(window, jobs),
            endpoints=endpoints, gpus=gpus, quotes=quotes, window=window,
        ),
        *_other_drafts(month),
    ]), notes  # fmt: skip


def _other_drafts(month: dt.date) -> list[Draft]:
    """Drafts of the sources in FINOPS_RECOMMENDATION_SOURCES (dotted paths of functions
    `(*, month) -> list[Draft]`, e.g. waste's checkpoint and idle-allocation advice): named in
    settings because those apps read pricing's assumptions, so pricing may not import them."""
    drafts: list[Draft] = []
    for path in settings.FINOPS_RECOMMENDATION_SOURCES:
        source = import_string(path)
        drafts.extend(source(month=month))
    return drafts


def _smaller(provider: str) -> str | None:
    return SMALLER_TYPES.get(prices.provider_key(provider))


def inputs_stamp(*, month: dt.date) -> str:
    """What a month's recommendations are computed from, as one comparable string."""
    attributed = AttributionRun.objects.filter(
        billing_period=month, status=AttributionRun.Status.SUCCEEDED
    ).aggregate(at=Max("finished_at"))["at"]
    refreshed = InstancePrice.objects.aggregate(at=Max("fetched_at"))["at"]
    # current(): the row is made on first use, so a first computation and the reads after it
    # see the same stamp.
    parts = [attributed, PricingAssumptions.current().updated_at, refreshed]
    stamps = [p.isoformat() if p else "-" for p in parts]
    # The waste advice's materiality floor (a setting): another floor makes other drafts.
    floor = f"floor {settings.FINOPS_ADVICE_MIN_MONTHLY_SAVING}"
    return "|".join([*stamps, str(snapshot.snapshot().get("snapshot_date")), RULES_VERSION, floor])


def price_inputs_stamp(*, month: dt.date) -> str:
    """What the month's price comparisons read that the data version does not follow: the
    recommendations' stamp (attribution, assumptions, refreshed prices, snapshot) and the
    catalogue's price tiers."""
    tiers = SkuPrice.objects.aggregate(at=Max("fetched_at"), n=Count("pk"))
    at = tiers["at"].isoformat() if tiers["at"] else "-"
    return f"{inputs_stamp(month=month)}|{at}|{tiers['n']}"


def recommendations_refresh(*, month: dt.date) -> int:
    """Compute and store the month's recommendations; returns how many it holds."""
    stamp = inputs_stamp(month=month)
    drafts, notes = recommendations_and_notes(month=month)
    now = timezone.now()
    with transaction.atomic():
        existing = {
            (r.team_id, r.kind, r.key, r.currency): r
            # order_by: the model's ordering joins the team, which PostgreSQL cannot lock.
            for r in Recommendation.objects.select_for_update()
            .filter(billing_period=month)
            .order_by("pk")
        }
        kept = set()
        for draft in drafts:
            key = (draft.team_id, draft.kind, draft.key, draft.currency)
            kept.add(key)
            row = existing.get(key) or Recommendation(
                billing_period=month, team_id=draft.team_id, kind=draft.kind, key=draft.key,
                currency=draft.currency,
            )  # fmt: skip
            for name in ("title", "action", "monthly_savings", "confidence", "assumptions",
                         "evidence"):  # fmt: skip
                setattr(row, name, getattr(draft, name))
            row.computed_at = now
            row.save()
        stale = [r.pk for k, r in existing.items() if k not in kept and r.status == "open"]
        Recommendation.objects.filter(pk__in=stale).delete()
        RecommendationMonth.objects.update_or_create(
            billing_period=month,
            defaults={
                "computed_at": now, "inputs": stamp,
                "notes": [{"team_id": n.team_id, "kind": n.kind, "text": n.text} for n in notes],
            },
        )  # fmt: skip
    return len(kept)


def recommendations_current(*, month: dt.date) -> None:
    """Compute the month again when what it was computed from moved (or never computed)."""
    stamp = inputs_stamp(month=month)
    stored = RecommendationMonth.objects.filter(billing_period=month).first()
    if stored is not None and stored.inputs == stamp:
        return
    try:
        recommendations_refresh(month=month)
    except IntegrityError:
        # Another request computed the month at the same time: its rows stand.
        return


def recommendations_newest_month() -> dt.date | None:
    """The newest month attributed successfully (the default month of the list)."""
    return (
        AttributionRun.objects.filter(status=AttributionRun.Status.SUCCEEDED)
        .order_by("-billing_period")
        .values_list("billing_period", flat=True)
        .first()
    )


def recommendation_list_visible(*, user: AnyUser) -> QuerySet[Recommendation]:
    """Finance: every recommendation (the organisation's too, team null); a lead: their teams'."""
    rows = Recommendation.objects.select_related("team")
    if user_is_finance(user):
        return rows
    return rows.filter(team__in=team_list_visible(user=user))


def recommendation_list_filtered(
    rows: QuerySet[Recommendation], *, month: dt.date | None = None, team: Team | None = None,
    status: str | None = None,
) -> QuerySet[Recommendation]:  # fmt: skip
    if month is not None:
        rows = rows.filter(billing_period=month)
    if team is not None:
        rows = rows.filter(team=team)
    if status:
        rows = rows.filter(status=status)
    # Cast: on SQLite money is stored as text, and text sorts "9" above "10".
    return rows.order_by(Cast("monthly_savings", FloatField()).desc(), "kind", "key", "pk")


def recommendation_status_change(
    *, recommendation_id: int, status: str, comment: str, user: AnyUser
) -> Recommendation:
    """Move a recommendation to open, done or dismissed with a comment (audited). Finance may
    change any; a team lead their teams' (never the organisation's)."""
    with transaction.atomic():
        row = Recommendation.objects.select_for_update().get(pk=recommendation_id)
        lead_of_team = (
            row.team_id is not None
            and not user_is_viewer(user)
            and team_list_visible(user=user).filter(pk=row.team_id).exists()
        )
        may = user_may_edit(user) or lead_of_team
        if not may:
            raise RecommendationPermissionError("only finance or the team's lead may change it")
        before = row.status
        row.status, row.comment = status, comment
        row.status_changed_at = timezone.now()
        row.status_changed_by = user.get_username() if user.is_authenticated else ""
        row.save(update_fields=["status", "comment", "status_changed_at", "status_changed_by"])
        audit_record(
            actor=user, action="recommendation.status", obj_repr=str(row),
            details={"status": [before, status], "comment": comment},
        )  # fmt: skip
    return row


def recommendation_body(row: Recommendation) -> dict[str, Any]:
    """The DESIGN section 10 body (money as a decimal string)."""
    return {
        "id": row.pk,
        "kind": row.kind,
        "team": row.team.slug if row.team_id and row.team else None,
        "month": month_format(row.billing_period),
        "title": row.title,
        "action": row.action,
        "monthly_savings": str(row.monthly_savings),
        "currency": row.currency,
        "confidence": row.confidence,
        "assumptions": row.assumptions,
        "evidence": row.evidence,
        "status": row.status,
        "comment": row.comment,
        "status_changed_at": row.status_changed_at,
        "status_changed_by": row.status_changed_by,
    }


def recommendation_notes(*, month: dt.date, teams: QuerySet[Team]) -> list[dict[str, Any]]:
    """Why these teams have no advice of a kind in the month (e.g. no commitment: no steady
    use), as the last computation stored them: each with the team's name and the text."""
    stored = RecommendationMonth.objects.filter(billing_period=month).first()
    names = dict(teams.values_list("pk", "name"))
    notes = stored.notes if stored is not None else []
    return sorted(
        (
            {"team": names[note["team_id"]], "kind": note["kind"], "text": note["text"]}
            for note in notes
            if note.get("team_id") in names
        ),
        key=lambda note: (note["team"], note["kind"]),
    )


def team_recommendations(*, team: Team, month: dt.date) -> list[Recommendation]:
    """The team's recommendations of the month (computed first if its inputs moved)."""
    recommendations_current(month=month)
    rows = Recommendation.objects.select_related("team").filter(team=team)
    return list(recommendation_list_filtered(rows, month=month))


def run_spot_advice(*, team: Team, month: dt.date, run_id: str) -> dict[str, Any] | None:
    """The run's line in its team's spot recommendation of the month, if it is one of the runs
    named there (its evidence lists the ten that save most)."""
    row = Recommendation.objects.filter(
        billing_period=month, team=team, kind=Recommendation.Kind.SPOT
    ).first()
    if row is None:
        return None
    for run in row.evidence.get("top_runs", []):
        if run.get("run_id") == run_id:
            return {**run, "currency": row.currency, "recommendation": row}
    return None
