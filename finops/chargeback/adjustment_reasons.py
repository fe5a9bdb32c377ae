"""Reads: why a closed month's ledger moved after its close (the reason an adjustment line of a
statement gives), from what was recorded when it happened."""

from __future__ import annotations

from collections.abc import Iterable
from functools import reduce
from operator import or_

from django.db.models import Q

from billing_ingest.models import MonthChange
from finops.attribution.models import AttributionRun
from finops.audit.models import AuditEvent
from finops.chargeback.models import ClosedPeriod, Section, StatementLine

# Admin changes (finops.audit) to what attribution reads: the rules a re-attribution applies.
RULE_ACTIONS = {
    "mapping_rule": "mapping rule",
    "idle_policy": "idle policy",
    "charge_basis": "charge basis",
    "shared_cost_rule": "shared-cost rule",
    "shared_cost_split": "shared-cost split",
}
_VERBS = {"add": "added", "change": "changed", "delete": "deleted"}
_LISTED = 3


def _listed(items: list[str]) -> str:
    more = len(items) - _LISTED
    return ", ".join(items[:_LISTED]) + (f" and {more} more" if more > 0 else "")


def _imports(changes: list[MonthChange], kind: str, *, unnamed: str) -> list[str]:
    """The month's changes of one kind, each named by its import (or its day, after `unnamed`,
    where no import batch is recorded)."""
    return [
        f"{c.batch.source} (import #{c.batch.pk}, {c.changed_at:%Y-%m-%d})"
        if c.batch is not None
        else f"{unnamed}{c.changed_at:%Y-%m-%d}"
        for c in changes
        if c.kind == kind
    ]


def adjustment_reason(*, close: ClosedPeriod, later: Iterable[ClosedPeriod] = ()) -> str:
    """Why a closed month's ledger moved beyond what was booked for it: read from what was
    recorded when it happened, not guessed from timestamps.

    `later`: the closes of the months after it whose statements booked its adjustments. The
    window starts at the newest of its close and those; the ledger moved only by a successful
    re-attribution in the window, and what that run read is what moved it:
    - a restated bill: the billing batches swapped in for the month (MonthChange, billing);
    - job logs: MonthChange rows of kind jobs;
    - a rule change: the admin's audited changes of mapping rules, idle policies, charge bases
      and shared-cost rules;
    - a reopened period: the month was reopened and closed again after later months booked
      adjustments for its earlier close; its new statement holds them, so they are taken back.
    """
    label = close.month.strftime("%B %Y")
    later = list(later)
    fresh = [c for c in later if c.closed_at > close.closed_at]
    stale = [c for c in later if c.closed_at < close.closed_at]
    parts = []
    if stale and not fresh:
        booked = (
            StatementLine.objects.filter(
                closed_period__in=stale, section=Section.ADJUSTMENT, origin_month=close.month
            )
            .order_by()
            .values_list("closed_period__month", flat=True)
            .distinct()
        )
        months = sorted(set(booked))
        if months:
            reopened = (
                ClosedPeriod.objects.filter(month=close.month, reopened_at__isnull=False)
                .order_by("-reopened_at")
                .first()
            )
            when = (
                f" on {reopened.reopened_at:%Y-%m-%d} (“{reopened.reopen_reason}”)"
                if reopened is not None and reopened.reopened_at is not None
                else ""
            )
            parts.append(
                f"Reopened period: {label} was reopened{when} and closed again on "
                f"{close.closed_at:%Y-%m-%d}; its new statement holds what "
                + ", ".join(f"{m:%B %Y}" for m in months)
                + " booked for it, which is taken back here"
            )
    since = max([close.closed_at, *(c.closed_at for c in fresh)])
    runs = AttributionRun.objects.filter(
        billing_period=close.month, status=AttributionRun.Status.SUCCEEDED
    ).order_by("-finished_at")
    run = runs.filter(finished_at__gt=since).first()
    if run is not None and run.finished_at is not None:
        # What moved the ledger: what the newest run read and the ledger booked at `since`
        # (the run before it) had not, whenever it happened.
        before = runs.filter(finished_at__lte=since).first()
        since = (before.inputs_at or before.started_at) if before is not None else since
        until = run.inputs_at or run.started_at
        changes = list(
            MonthChange.objects.filter(
                month=close.month, changed_at__gt=since, changed_at__lte=until
            )
            .select_related("batch")
            .order_by("changed_at", "id")
        )
        bills = _imports(changes, MonthChange.Kind.BILLING, unnamed="an import of ")
        jobs = _imports(changes, MonthChange.Kind.JOBS, unnamed="")
        rules = [
            f"{RULE_ACTIONS[kind]} {e.obj_repr} {_VERBS.get(verb, verb)}"
            f"{f' by {e.actor_name}' if e.actor_name else ''} on {e.at:%Y-%m-%d}"
            for e in AuditEvent.objects.filter(
                reduce(or_, (Q(action__startswith=f"{k}.") for k in RULE_ACTIONS)),
                at__gt=since,
                at__lte=until,
            ).order_by("at", "id")
            for kind, _, verb in [e.action.partition(".")]
        ]
        if bills:
            parts.append(f"Restated bill for {label} after its close: {_listed(bills)}")
        if rules:
            parts.append(f"Rule change: {_listed(rules)}; {label} re-attributed on "
                         f"{run.finished_at:%Y-%m-%d}")  # fmt: skip
        if jobs:
            parts.append(f"Job logs of {label} changed after its close: {_listed(jobs)}")
        if not (bills or rules or jobs):
            parts.append(
                f"{label} re-attributed on {run.finished_at:%Y-%m-%d} after its close "
                "(no bill, job log or audited rule change recorded)"
            )
    if not parts:
        parts.append(f"Ledger of {label} changed after its close")
    return "; ".join(parts)
