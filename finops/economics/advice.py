"""The month's waste advice (checkpoint intervals, idle allocations: finops.waste) from the
checkpoint advice the run_economics step stored (CheckpointAdviceMonth and its rows, the ones
the team page and the advice API read), not from the month's waste computed again: the
recommendations step runs after run_economics, and the waste of a month's runs is most of what
its advice costs to compute.

The pages read the stored rows while the settings they were computed with are today's; the
recommendations step is stricter: it reads them only while the month's stamp is current. The
stamp names everything that waste is read from that can move after the step ran: the
attribution runs (any month's: a run's attempts are read over every month it has cost in), the
imports (jobs, GPU utilisation, run metrics: every import is an ImportBatch), the pricing
assumptions' checkpoint interval and restart minutes, FINOPS_CHECKPOINT_WRITE_MINUTES, the
teams' slugs (a run's metrics are matched by its team's slug) and ADVICE_VERSION. Anything
else: the advice is computed from the ledger as before (finops.waste.recommendations.
waste_drafts).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging

from django.db.models import Count, Max

from billing_ingest.models import ImportBatch
from finops.attribution.models import AttributionRun
from finops.economics.advice_selectors import ADVICE_VERSION, stored_rows
from finops.economics.models import CheckpointAdviceMonth
from finops.org.models import Team
from finops.pricing.recommendation_rules import Draft
from finops.waste.advice import CheckpointAdvice, checkpoint_write_minutes
from finops.waste.recommendations import advice_drafts, waste_drafts
from finops.waste.selectors import waste_settings

logger = logging.getLogger(__name__)


def advice_stamp() -> str:
    """What a month's stored advice was computed from, as one comparable string."""
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
        f"{settings.restart_minutes.normalize():f} {checkpoint_write_minutes().normalize():f}",
        f"teams {slugs}",
    ]
    return "|".join(parts)


def stored_advice(*, month: dt.date) -> list[CheckpointAdvice] | None:
    """The month's stored checkpoint advice of every team and the unowned runs (the rows the
    pages read), None when the month is not stored or its stamp is not the current one."""
    header = CheckpointAdviceMonth.objects.filter(billing_period=month).first()
    if header is None or not header.stamp or header.stamp != advice_stamp():
        return None
    return stored_rows(header, teams=Team.objects.all(), include_unowned=True)


def stored_waste_drafts(*, month: dt.date) -> list[Draft]:
    """The month's waste recommendations (a FINOPS_RECOMMENDATION_SOURCES source): from the
    stored checkpoint advice while current, else computed (waste_drafts): the same drafts."""
    rows = stored_advice(month=month)
    if rows is None:
        logger.info("waste advice %s: computed (no current stored run economics)", month)
        return waste_drafts(month=month)
    logger.info("waste advice %s: from the stored run economics", month)
    return advice_drafts(rows, month)
