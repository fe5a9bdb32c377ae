"""Writes: detect anomalies (store findings in place), change an anomaly's status, email people.

Re-evaluation. `anomalies_detect(since=, until=)` reads the ledger from LOOKBACK_DAYS before
`since` to its newest day, runs every series through the detector and stores the findings whose
days touch [since, until]. A finding updates the stored anomaly of the same series whose days
overlap it (a restated bill may move its first day: it is still the same event), else creates
one. A stored anomaly of that window that nothing matches any more (the restated bill took the
event away) is deleted while nobody has acted on it (status new, no comment), else left as it
is. Anomalies marked `expected` are never changed: the detector takes their days as normal and
a level shift as the new baseline. A second run over the same ledger changes nothing.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from finops.anomalies import detector, emails
from finops.anomalies.channel_alerts import anomaly_channel_message
from finops.anomalies.findings import CellsReader, DriverValue, Finding, build_findings
from finops.anomalies.line_drivers import line_drivers_attach, sources_trace
from finops.anomalies.models import Anomaly, AnomalyDriver, AnomalyStatusChange
from finops.anomalies.series import TeamLedger, endpoint_days, ledger_load, team_ledger
from finops.attribution.models import AllocatedCost
from finops.notifications.channels import channel_messages_enqueue

logger = logging.getLogger(__name__)

# History read before `since`: the detector's 42-day window plus a month (recurring charges).
LOOKBACK_DAYS = 120
DEFAULT_DAYS = 35

TRANSITIONS: dict[str, frozenset[str]] = {
    Anomaly.Status.NEW: frozenset(
        {Anomaly.Status.ACKNOWLEDGED, Anomaly.Status.RESOLVED, Anomaly.Status.EXPECTED}
    ),
    Anomaly.Status.ACKNOWLEDGED: frozenset({Anomaly.Status.RESOLVED, Anomaly.Status.EXPECTED}),
    Anomaly.Status.RESOLVED: frozenset({Anomaly.Status.ACKNOWLEDGED}),
    Anomaly.Status.EXPECTED: frozenset({Anomaly.Status.ACKNOWLEDGED}),
}

Series = tuple[int | None, str, str]


class AnomalyTransitionError(ValueError):
    pass


@dataclass(slots=True)
class DetectSummary:
    since: dt.date
    until: dt.date | None
    created: int = 0
    updated: int = 0
    deleted: int = 0
    unchanged: int = 0


def detector_settings() -> detector.DetectorSettings:
    return detector.DetectorSettings(
        min_impact=Decimal(settings.FINOPS_ANOMALY_MIN_IMPACT),
        min_percent=Decimal(settings.FINOPS_ANOMALY_MIN_PERCENT),
    )


def severity_for(*, impact: Decimal, expected: Decimal) -> str:
    """By money against the floor (3x medium, 10x high), one step up at +100 % or more."""
    floor = Decimal(settings.FINOPS_ANOMALY_MIN_IMPACT) or Decimal(1)
    levels = [Anomaly.Severity.LOW, Anomaly.Severity.MEDIUM, Anomaly.Severity.HIGH]
    level = 2 if impact >= 10 * floor else 1 if impact >= 3 * floor else 0
    if expected <= 0 or impact >= expected:
        level = min(level + 1, 2)
    return levels[level]


def _accepted() -> dict[Series, list[detector.Accepted]]:
    out: dict[Series, list[detector.Accepted]] = defaultdict(list)
    for a in Anomaly.objects.filter(status=Anomaly.Status.EXPECTED):
        out[(a.team_id, a.series_kind, a.series_key)].append(
            detector.Accepted(first=a.first_day, last=a.last_day, kind=a.kind)
        )
    return out


def anomalies_detect(
    *, since: dt.date | None = None, until: dt.date | None = None
) -> DetectSummary:
    """(Re)evaluate anomalies whose days touch [since, until] (default: the last 35 days of the
    ledger, to its newest day). Idempotent."""
    newest = AllocatedCost.objects.aggregate(last=Max("day"))["last"]
    if since is None:
        since = (newest or timezone.now().date()) - dt.timedelta(days=DEFAULT_DAYS - 1)
    summary = DetectSummary(since=since, until=until)
    if newest is None:
        return summary
    first = since - dt.timedelta(days=LOOKBACK_DAYS)
    data = ledger_load(first_day=first, last_day=newest)
    sources_trace(data)
    # The kept events' teams' ledger, read once: their cells, then their rows' line items.
    read: list[TeamLedger] = []

    def cells(team_ids: set[int], first_day: dt.date, last_day: dt.date) -> CellsReader:
        read.append(team_ledger(data, team_ids, first_day, last_day))
        return read[-1].cells

    findings = build_findings(
        data=data,
        endpoints=endpoint_days(first_day=first, last_day=newest),
        settings=detector_settings(),
        accepted=_accepted(),
        since=since,
        until=until or newest,
        cells=cells,
    )
    line_drivers_attach(findings, data, read[-1] if read else None)
    _store(findings, since=since, until=until or newest, summary=summary)
    logger.info("anomalies %s..%s: %s", since, until or newest, summary)
    return summary


def _identity(finding: Finding) -> str:
    team = finding.team_id if finding.team_id is not None else "-"
    return f"{team}|{finding.series_kind}|{finding.series_key}|{finding.first.isoformat()}"


def _fields(finding: Finding) -> dict[str, Any]:
    return {
        "kind": finding.kind,
        "first_day": finding.first,
        "last_day": finding.last,
        "detected_on": finding.detected_on,
        "ongoing": finding.ongoing,
        "currency": settings.FINOPS_REPORTING_CURRENCY,
        "actual": finding.actual,
        "expected": finding.expected,
        "impact": finding.impact,
        "unexplained": finding.unexplained,
        "unexplained_sku": finding.unexplained_sku,
        "unexplained_resource": finding.unexplained_resource,
        "share_base": finding.share_base,
        "severity": severity_for(impact=finding.impact, expected=finding.expected),
        "chart": finding.chart,
        "unit": finding.unit,
    }


def _store(
    findings: Sequence[Finding], *, since: dt.date, until: dt.date, summary: DetectSummary
) -> None:
    stored: dict[Series, list[Anomaly]] = defaultdict(list)
    window = Anomaly.objects.filter(last_day__gte=since, first_day__lte=until).exclude(
        status=Anomaly.Status.EXPECTED
    )
    for anomaly in window:
        stored[(anomaly.team_id, anomaly.series_kind, anomaly.series_key)].append(anomaly)
    found: dict[Series, list[Finding]] = defaultdict(list)
    for finding in findings:
        found[finding.series].append(finding)
    for series in sorted(set(stored) | set(found), key=lambda s: (s[0] or 0, s[1], s[2])):
        with transaction.atomic():
            _store_series(series, stored.get(series, []), found.get(series, []), summary)


def _store_series(
    series: Series, stored: list[Anomaly], found: list[Finding], summary: DetectSummary
) -> None:
    unmatched = sorted(stored, key=lambda a: (a.first_day, a.id))
    for finding in sorted(found, key=lambda f: f.first):
        match = next(
            (a for a in unmatched if a.first_day <= finding.last and finding.first <= a.last_day),
            None,
        )
        if match is None:
            _create(series, finding, summary)
            continue
        unmatched.remove(match)
        if _update(match, finding):
            summary.updated += 1
        else:
            summary.unchanged += 1
    for anomaly in unmatched:
        if anomaly.status == Anomaly.Status.NEW and not anomaly.status_changes.exists():
            anomaly.delete()
            summary.deleted += 1


def _create(series: Series, finding: Finding, summary: DetectSummary) -> None:
    team_id, kind, key = series
    try:
        with transaction.atomic():
            anomaly = Anomaly.objects.create(
                identity=_identity(finding), team_id=team_id, series_kind=kind, series_key=key,
                **_fields(finding),
            )  # fmt: skip
            _write_drivers(anomaly, finding.drivers)
    except IntegrityError:
        # A concurrent run stored the same event first: it is theirs to report.
        return
    summary.created += 1
    emails.anomaly_notify(anomaly=anomaly)
    channel_messages_enqueue(message=anomaly_channel_message(anomaly=anomaly))


def _driver_tuples(drivers: Iterable[Any]) -> list[tuple[str, str, Decimal, Decimal]]:
    return [(d.dimension, d.key, d.actual, d.expected) for d in drivers]


def _update(anomaly: Anomaly, finding: Finding) -> bool:
    """Store the finding's figures on the anomaly; False when nothing differs."""
    fields = _fields(finding)
    changed = [name for name, value in fields.items() if getattr(anomaly, name) != value]
    same_drivers = _driver_tuples(anomaly.drivers.all()) == _driver_tuples(finding.drivers)
    if not changed and same_drivers:
        return False
    for name in changed:
        setattr(anomaly, name, fields[name])
    if changed:
        anomaly.save(update_fields=[*changed, "updated_at"])
    if not same_drivers:
        anomaly.drivers.all().delete()
        _write_drivers(anomaly, finding.drivers)
    return True


def _write_drivers(anomaly: Anomaly, drivers: Sequence[DriverValue]) -> None:
    AnomalyDriver.objects.bulk_create(
        AnomalyDriver(
            anomaly=anomaly, position=i, dimension=d.dimension, key=d.key[:1000],
            actual=d.actual, expected=d.expected, delta=d.delta,
        )
        for i, d in enumerate(drivers)
    )  # fmt: skip


def anomaly_status_change(*, anomaly_id: int, status: str, comment: str, user: Any) -> Anomaly:
    """Move an anomaly to `status` with a comment (required), recording who did it."""
    comment = (comment or "").strip()
    if not comment:
        raise AnomalyTransitionError("A comment is required.")
    with transaction.atomic():
        anomaly = Anomaly.objects.select_for_update().get(pk=anomaly_id)
        if status not in TRANSITIONS.get(anomaly.status, frozenset()):
            raise AnomalyTransitionError(
                f"An anomaly that is {anomaly.status} cannot become {status}."
            )
        AnomalyStatusChange.objects.create(
            anomaly=anomaly, from_status=anomaly.status, to_status=status, comment=comment,
            user=user if getattr(user, "is_authenticated", False) else None,
        )  # fmt: skip
        anomaly.status = status
        anomaly.save(update_fields=["status", "updated_at"])
    return anomaly
