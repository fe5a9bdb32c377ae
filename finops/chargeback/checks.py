"""Reads: the month-end checklist finance goes through before closing a month (DESIGN 10,
`GET /api/v1/periods/YYYY-MM/checks/` and the Close page).

Each check is `ok`, `warn` (close if you accept it) or `fail` (the statements would be wrong
or incomplete), with its figures (money with its currency), what to do, and a link to the page
where it is done. Closing is never blocked here: period_close keeps its own hard rules
(a past month, a ledger that reconciles); the checklist says what else finance should know.
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass, field
from datetime import date
from decimal import ROUND_HALF_UP, Decimal

from django.conf import settings
from django.db.models import Count, Min
from django.urls import reverse
from django.utils import timezone

from billing_ingest.models import CostLineItem, ImportBatch
from finops.anomalies.models import Anomaly
from finops.attribution.models import AllocatedCost, Category, TeamDailyCost
from finops.attribution.selectors.open_jobs import open_jobs_unlisted
from finops.attribution.selectors.reconciliation import month_staleness
from finops.attribution.selectors.reporting import currency_order
from finops.budgets.models import Budget
from finops.budgets.selectors import budget_statuses
from finops.chargeback.recipients import statement_recipients
from finops.core.heartbeat import heartbeat_deadline
from finops.core.money import MoneySum
from finops.core.months import month_format
from finops.core.wording import counted, plural
from finops.currency.selectors import fx_rates_missing

OK = "ok"
WARN = "warn"
FAIL = "fail"
CHECK_STATUSES = [(OK, "ok"), (WARN, "warn"), (FAIL, "fail")]
CENT = Decimal("0.01")


@dataclass(frozen=True)
class CheckFigure:
    """One figure of a check: money (`unit` its currency code), a percentage (`%`) or a
    count (`unit` empty). `value` is a decimal string, money to the cent."""

    label: str
    value: str
    unit: str


@dataclass
class PeriodCheck:
    name: str
    title: str
    status: str
    detail: str
    action: str
    link: str
    figures: list[CheckFigure] = field(default_factory=list)


def _money(value: Decimal) -> str:
    return str(value.quantize(CENT, rounding=ROUND_HALF_UP))


def _last_day(month: date) -> date:
    return month.replace(day=calendar.monthrange(month.year, month.month)[1])


def _check_imports(month: date) -> PeriodCheck:
    """Imports of the month that failed (and were not imported again since) or whose worker
    stopped beating (stale: pending or running past the heartbeat timeout)."""
    label = month_format(month)
    unsettled = ImportBatch.objects.filter(
        status__in=[
            ImportBatch.Status.FAILED,
            ImportBatch.Status.PENDING,
            ImportBatch.Status.RUNNING,
        ]
    ).order_by("id")
    succeeded = ImportBatch.objects.filter(status=ImportBatch.Status.SUCCEEDED)
    deadline = heartbeat_deadline()
    failed: list[ImportBatch] = []
    stale: list[ImportBatch] = []
    running: list[ImportBatch] = []
    for batch in unsettled:
        if label not in (batch.billing_periods or []):
            continue
        if batch.status == ImportBatch.Status.FAILED:
            redone = any(
                label in (b.billing_periods or [])
                for b in succeeded.filter(kind=batch.kind, source=batch.source, id__gt=batch.id)
            )
            if not redone:
                failed.append(batch)
            continue
        beat = batch.heartbeat_at or batch.started_at or batch.created_at
        (stale if beat < deadline else running).append(batch)
    figures = [
        CheckFigure("failed imports", str(len(failed)), ""),
        CheckFigure("stale imports", str(len(stale)), ""),
        CheckFigure("imports in progress", str(len(running)), ""),
    ]
    link = reverse("web:imports")
    if failed or stale:
        names = ", ".join(f"#{b.pk} {b.source} ({b.file_name})" for b in [*failed, *stale][:5])
        return PeriodCheck(
            "imports", "Imports", FAIL,
            f"{len(failed)} failed and {len(stale)} stale "
            f"{plural('import', len(failed) + len(stale))} of {label}: {names}.",
            "Import the file again (or fix its error) so the month holds the whole bill.",
            link, figures,
        )  # fmt: skip
    if running:
        return PeriodCheck(
            "imports", "Imports", WARN,
            f"{counted(len(running), 'import')} of {label} still running.",
            "Wait for them to finish before closing.", link, figures,
        )  # fmt: skip
    return PeriodCheck(
        "imports", "Imports", OK, f"Every import of {label} succeeded.", "Nothing to do.",
        link, figures,
    )  # fmt: skip


OPEN_JOBS_ACTION = (
    "Re-export sacct for the window (sacct -S <their start> -E <month end>) or the cluster's "
    "pod list and import it, or end them."
)


def _check_open_jobs(month: date) -> PeriodCheck:
    """Jobs with no end, started before the month, that a newer jobs import of their cluster
    did not list (attribution/selectors/open_jobs.py): charged as running all month."""
    found = open_jobs_unlisted(started_before=month, charged_in=month)
    figures = [CheckFigure("open jobs", str(found.jobs), "")] + [
        CheckFigure("amortised cost charged to them", _money(amount), currency)
        for currency, amount in found.charged.items()
    ]
    link = reverse("web:imports")
    if found.jobs:
        where = ", ".join(
            f"{c.cluster} ({c.jobs}, oldest started {c.oldest_start:%Y-%m-%d})"
            for c in found.clusters[:5]
        )
        return PeriodCheck(
            "open_jobs", "Open jobs", WARN,
            f"{counted(found.jobs, 'job')} started before {month_format(month)} "
            f"{'has' if found.jobs == 1 else 'have'} no end and their "
            f"cluster's newer job imports did not list them: {where}. The ledger charges them "
            "as running.",
            OPEN_JOBS_ACTION, link, figures,
        )  # fmt: skip
    return PeriodCheck(
        "open_jobs", "Open jobs", OK,
        "Every job still open was listed by its cluster's latest job import.", "Nothing to do.",
        link, figures,
    )  # fmt: skip


def _check_attribution(month: date) -> PeriodCheck:
    reason = month_staleness(month=month)
    link = reverse("web:pipeline")
    if not reason:
        return PeriodCheck(
            "attribution", "Attribution", OK,
            "The ledger was built from the month's latest line items.", "Nothing to do.", link,
        )  # fmt: skip
    status = WARN if reason == "attribution is running" else FAIL
    return PeriodCheck(
        "attribution", "Attribution", status, f"Not attributed since the last import: {reason}.",
        f"Run the pipeline for the month (manage.py attribute --month {month_format(month)}).",
        link,
    )  # fmt: skip


def _check_anomalies(month: date) -> PeriodCheck:
    rows = (
        Anomaly.objects.filter(
            status__in=Anomaly.OPEN_STATUSES, first_day__lte=_last_day(month), last_day__gte=month
        )
        .order_by()
        .values("currency")
        .annotate(n=Count("id"), impact=MoneySum("impact"))
    )
    figures = []
    count = 0
    for row in sorted(rows, key=lambda r: r["currency"]):
        count += row["n"]
        figures.append(CheckFigure("open anomalies", str(row["n"]), ""))
        figures.append(CheckFigure("their impact", _money(row["impact"]), row["currency"]))
    link = (
        reverse("web:anomalies")
        + f"?status=open&since={month:%Y-%m-%d}&until={_last_day(month):%Y-%m-%d}"
    )
    if count:
        return PeriodCheck(
            "anomalies", "Open anomalies", WARN,
            f"{count:,} {'anomaly' if count == 1 else 'anomalies'} of the month "
            f"{'is' if count == 1 else 'are'} new or acknowledged.",
            "Resolve each one (or mark it expected) so leads are not billed a surprise.",
            link, figures,
        )  # fmt: skip
    return PeriodCheck(
        "anomalies", "Open anomalies", OK, "No open anomaly in the month.", "Nothing to do.",
        link, [CheckFigure("open anomalies", "0", "")],
    )  # fmt: skip


def unallocated_threshold() -> Decimal:
    return Decimal(str(settings.FINOPS_CLOSE_UNALLOCATED_PERCENT))


def _check_unallocated(month: date) -> PeriodCheck:
    """Unallocated share of the amortised bill (EffectiveCost), per billing currency."""
    threshold = unallocated_threshold()
    # The reconciliation's figures (the bill's EffectiveCost, the ledger's unallocated), read
    # with two sums per currency instead of the whole reconciliation.
    amortised = dict(
        CostLineItem.objects.settled()
        .filter(billing_period=month)
        .order_by()
        .values_list("billing_currency")
        .annotate(total=MoneySum("effective_cost"))
    )
    unallocated = dict(
        AllocatedCost.objects.filter(billing_period=month, category=Category.UNALLOCATED)
        .order_by()
        .values_list("billing_currency")
        .annotate(total=MoneySum("amount"))
    )
    figures: list[CheckFigure] = []
    over: list[str] = []
    for currency in sorted(amortised, key=currency_order):
        bill = amortised[currency]
        if not bill:
            continue
        lost = unallocated.get(currency) or Decimal(0)
        share = (lost * 100 / bill).quantize(CENT, rounding=ROUND_HALF_UP)
        figures += [
            CheckFigure("unallocated", _money(lost), currency),
            CheckFigure("amortised bill", _money(bill), currency),
            CheckFigure(f"unallocated share ({currency})", str(share), "%"),
        ]
        if share > threshold:
            over.append(f"{share} % of the {currency} bill")
    link = reverse("web:reconciliation") + f"?month={month_format(month)}"
    if over:
        return PeriodCheck(
            "unallocated", "Unallocated cost", WARN,
            f"Unallocated is {', '.join(over)} (threshold {threshold} %).",
            "Add mapping rules (tag, sub-account, namespace -> team) or shared-cost rules, "
            "then attribute the month again.",
            link, figures,
        )  # fmt: skip
    return PeriodCheck(
        "unallocated", "Unallocated cost", OK,
        f"Unallocated is at most {threshold} % of the bill.", "Nothing to do.", link, figures,
    )  # fmt: skip


def _check_recipients(month: date) -> PeriodCheck:
    recipients = statement_recipients(month=month)
    teams = [r.team for r in recipients]
    missing = [r.team for r in recipients if not r.gets_email]
    figures = [
        CheckFigure("teams with cost", str(len(teams)), ""),
        CheckFigure("teams without a lead email", str(len(missing)), ""),
    ]
    link = reverse("admin:org_profile_changelist")
    if missing:
        return PeriodCheck(
            "recipients", "Statement recipients", WARN,
            "No statement email will go to: " + ", ".join(t.name for t in missing) + ".",
            "Give each team an active lead with an email address (admin: Profiles), "
            "or send their statement by hand.",
            link, figures,
        )  # fmt: skip
    return PeriodCheck(
        "recipients", "Statement recipients", OK,
        "Every team with cost has a lead with an email address.", "Nothing to do.", link, figures,
    )  # fmt: skip


def _check_budgets(month: date) -> PeriodCheck:
    as_of = min(_last_day(month), timezone.localdate())
    budgets = list(Budget.objects.filter(active=True).select_related("team").order_by("id"))
    statuses = [s for s in budget_statuses(budgets=budgets, as_of=as_of) if not s.error]
    over = [s for s in statuses if s.over]
    figures: list[CheckFigure] = []
    for s in over:
        figures.append(CheckFigure(f"{s.budget.name}: actual", _money(s.actual), s.currency))
        figures.append(CheckFigure(f"{s.budget.name}: budget", _money(s.budget.amount), s.currency))
    link = reverse("budgets:list")
    if over:
        names = ", ".join(f"{s.budget.name} ({s.percent_used} %)" for s in over)
        return PeriodCheck(
            "budgets", "Budgets", WARN, f"Over budget on {as_of:%Y-%m-%d}: {names}.",
            "Check the overspend with the team before its statement goes out.", link, figures,
        )  # fmt: skip
    return PeriodCheck(
        "budgets", "Budgets", OK, f"No budget over on {as_of:%Y-%m-%d}.", "Nothing to do.",
        link, [CheckFigure("budgets over", "0", "")],
    )  # fmt: skip


def _check_fx(month: date) -> PeriodCheck:
    currency = settings.FINOPS_REPORTING_CURRENCY
    rows = TeamDailyCost.objects.filter(billing_period=month).order_by()
    first = rows.aggregate(first=Min("day"))["first"]
    codes = sorted(set(rows.exclude(billing_currency=currency).values_list(
        "billing_currency", flat=True
    ).distinct()))  # fmt: skip
    missing = fx_rates_missing(currencies=codes, to_currency=currency, day=first) if first else []
    link = reverse("admin:currency_fxrate_changelist")
    figures = [
        CheckFigure("billing currencies other than " + currency, str(len(codes)), ""),
        CheckFigure("missing rates", str(len(missing)), ""),
    ]
    if missing:
        return PeriodCheck(
            "fx_rates", "FX rates", FAIL, "; ".join(str(m) for m in missing) + ".",
            f"Load the rates to {currency} (manage.py load_fx_rates, or the admin) from "
            f"{first:%Y-%m-%d} on.",
            link, figures,
        )  # fmt: skip
    return PeriodCheck(
        "fx_rates", "FX rates", OK,
        f"Every billing currency converts to {currency}." if codes
        else f"The month is billed in {currency} only.",
        "Nothing to do.", link, figures,
    )  # fmt: skip


def period_checks(*, month: date) -> list[PeriodCheck]:
    """The month-end checklist of a billing month, in the order finance goes through it."""
    month = month.replace(day=1)
    return [
        _check_imports(month),
        _check_open_jobs(month),
        _check_attribution(month),
        _check_anomalies(month),
        _check_unallocated(month),
        _check_recipients(month),
        _check_budgets(month),
        _check_fx(month),
    ]


def checks_status(checks: list[PeriodCheck]) -> str:
    """The worst status of the list."""
    statuses = {c.status for c in checks}
    return FAIL if FAIL in statuses else WARN if WARN in statuses else OK


__all__ = ["FAIL", "OK", "WARN", "CheckFigure", "PeriodCheck", "checks_status", "period_checks"]
