"""The month's waste advice (checkpoint intervals, idle allocations: finops.waste) from the
figures the run_economics step stored (MonthAdviceInputs), not from the month's waste computed
again: the recommendations step runs after run_economics, and the waste of a month's runs is
most of what its advice costs to compute.

The stored figures are the sums finops.waste.advice.advice_groups makes of the same waste
(run_wastes of the month's runs), kept exactly (Decimals as text); a month's row is read only
while its stamp is current. The stamp names everything that waste is read from that can move
after the step ran: the attribution runs (any month's: a run's attempts are read over every
month it has cost in), the imports (jobs, GPU utilisation, run metrics: every import is an
ImportBatch), the pricing assumptions' checkpoint interval and restart minutes, the teams'
slugs (a run's metrics are matched by its team's slug) and ADVICE_VERSION. Anything else:
the advice is computed from the ledger as before (finops.waste.recommendations.waste_drafts).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import statistics
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from django.db.models import Count, Max

from billing_ingest.models import ImportBatch
from finops.attribution.models import AttributionRun
from finops.economics.models import MonthAdviceInputs
from finops.org.models import Team
from finops.pricing.recommendation_rules import Draft
from finops.waste.advice import AdviceGroup, GroupKey, advice_groups, advice_rows
from finops.waste.recommendations import advice_drafts, waste_drafts
from finops.waste.selectors import RunWaste, waste_settings

logger = logging.getLogger(__name__)

# Bumped when what the stored groups hold, or how they are summed, changes.
ADVICE_VERSION = "2"  # 2: capacity interruptions stored


def advice_stamp() -> str:
    """What a month's stored advice inputs were computed from, as one comparable string."""
    runs = AttributionRun.objects.aggregate(n=Count("id"), last=Max("id"), at=Max("finished_at"))
    batches = ImportBatch.objects.aggregate(n=Count("id"), last=Max("id"), at=Max("finished_at"))
    settings = waste_settings()
    slugs = hashlib.sha256(
        repr(sorted(Team.objects.values_list("id", "slug"))).encode()
    ).hexdigest()[:16]
    parts = [
        ADVICE_VERSION,
        f"attribution {runs['n']} {runs['last']} {runs['at']}",
        f"imports {batches['n']} {batches['last']} {batches['at']}",
        # As numbers, not text: the defaults (before the assumptions row is made on first use)
        # read 20, the stored row 20.00.
        f"settings {settings.checkpoint_interval_minutes.normalize():f} "
        f"{settings.restart_minutes.normalize():f}",
        f"teams {slugs}",
    ]
    return "|".join(parts)


def _text(group: AdviceGroup) -> dict[str, Any]:
    # Only the median of the positive checkpoint gaps is used (advice._advice): stored alone
    # (the median of that one value is itself).
    gaps = [g for g in group.gaps_minutes if g > 0]
    median = statistics.median(gaps) if gaps else None
    return {
        "cost": str(group.cost),
        "hours": str(group.hours),
        "gpu_hours": str(group.gpu_hours),
        "interruptions": group.interruptions,
        "capacity_interruptions": group.capacity_interruptions,
        "median_gap_minutes": None if median is None else str(median),
        "idle_in_allocation": str(group.idle_in_allocation),
        "measured_cost": str(group.measured_cost),
        "used_cost": str(group.used_cost),
    }


def _group(values: dict[str, Any]) -> AdviceGroup:
    median = values["median_gap_minutes"]
    return AdviceGroup(
        cost=Decimal(values["cost"]),
        hours=Decimal(values["hours"]),
        gpu_hours=Decimal(values["gpu_hours"]),
        interruptions=int(values["interruptions"]),
        capacity_interruptions=int(values["capacity_interruptions"]),
        gaps_minutes=[] if median is None else [Decimal(median)],
        idle_in_allocation=Decimal(values["idle_in_allocation"]),
        measured_cost=Decimal(values["measured_cost"]),
        used_cost=Decimal(values["used_cost"]),
    )


def advice_inputs_store(*, month: dt.date, wastes: Iterable[RunWaste], stamp: str) -> None:
    """Store the month's advice groups of this waste (every run of the month), read at `stamp`
    (taken before the waste was read: a change meanwhile leaves the row stale, never wrong)."""
    groups = advice_groups(wastes, month)
    rows = [
        {"team_id": team_id, "cluster": cluster, "currency": currency, "pricing": pricing,
         **_text(group)}
        for (team_id, cluster, currency, pricing), group in groups.items()
    ]  # fmt: skip
    MonthAdviceInputs.objects.update_or_create(
        billing_period=month, defaults={"stamp": stamp, "groups": rows}
    )


def stored_groups(*, month: dt.date) -> dict[GroupKey, AdviceGroup] | None:
    """The month's stored advice groups, None when there are none or they are stale."""
    row = MonthAdviceInputs.objects.filter(billing_period=month).first()
    if row is None or row.stamp != advice_stamp():
        return None
    return {
        (g["team_id"], g["cluster"], g["currency"], g["pricing"]): _group(g) for g in row.groups
    }


def stored_waste_drafts(*, month: dt.date) -> list[Draft]:
    """The month's waste recommendations (a FINOPS_RECOMMENDATION_SOURCES source): from the
    stored advice inputs while current, else computed (waste_drafts): the same drafts."""
    groups = stored_groups(month=month)
    if groups is None:
        logger.info("waste advice %s: computed (no current stored run economics)", month)
        return waste_drafts(month=month)
    logger.info("waste advice %s: from the stored run economics", month)
    return advice_drafts(advice_rows(groups, waste_settings()), month)
