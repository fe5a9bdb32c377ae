"""Reads of the stored checkpoint advice (finops.economics.models.CheckpointAdviceRow): the
rows as finops.waste.advice.CheckpointAdvice, the same objects the read-time computation
gives, so the pages, the API and the recommendations show the same figures either way (the
recommendations step reads them through finops.economics.advice.stored_advice, under the
stricter stamp)."""

from __future__ import annotations

import datetime as dt

from django.db.models import Q, QuerySet

from finops.economics.models import (
    CHECKPOINT_ADVICE_FIGURES,
    CheckpointAdviceMonth,
    CheckpointAdviceRow,
)
from finops.org.models import Team
from finops.waste.advice import CheckpointAdvice, advice_order, checkpoint_write_minutes
from finops.waste.selectors import waste_settings

# Bumped when what the stored advice holds, or how it is computed, changes.
# 2: capacity interruptions stored; 3: the stamp on the stored checkpoint advice itself (the
# separate store of advice sums is gone), with the checkpoint write minutes; 4: an inference
# endpoint's pods are a row of their own (endpoint), out of the idle-allocation advice.
ADVICE_VERSION = "4"


def stamp_version(stamp: str) -> str:
    """The ADVICE_VERSION a stored month's stamp was taken with (finops.economics.advice.
    advice_stamp puts it first); "" for a month stored without a stamp."""
    return stamp.split("|", 1)[0]


def checkpoint_advice_stored(
    *, month: dt.date, teams: QuerySet[Team], include_unowned: bool
) -> list[CheckpointAdvice] | None:
    """checkpoint_advice(month, teams, include_unowned) from the stored rows; None when the
    month is not stored, was stored by other code (its stamp's ADVICE_VERSION: rows of the
    code before a deployment hold what that code computed until the month's run_economics
    runs again) or with other settings than today's (the pricing assumptions' checkpoint and
    restart minutes, FINOPS_CHECKPOINT_WRITE_MINUTES): the caller computes it then. Three
    queries."""
    header = CheckpointAdviceMonth.objects.filter(billing_period=month).first()
    if header is None or stamp_version(header.stamp) != ADVICE_VERSION:
        return None
    config = waste_settings()
    write = checkpoint_write_minutes()
    stored = (header.checkpoint_interval_minutes, header.restart_minutes,
              header.checkpoint_write_minutes)  # fmt: skip
    if stored != (config.checkpoint_interval_minutes, config.restart_minutes, write):
        return None
    return stored_rows(header, teams=teams, include_unowned=include_unowned)


def stored_rows(
    header: CheckpointAdviceMonth, *, teams: QuerySet[Team], include_unowned: bool
) -> list[CheckpointAdvice]:
    """The rows of a stored month visible to `teams` (and the unowned ones), as
    CheckpointAdvice in checkpoint_advice's order. One query."""
    write = checkpoint_write_minutes()
    visible = Q(team__in=teams)
    if include_unowned:
        visible |= Q(team__isnull=True)
    rows: QuerySet[CheckpointAdviceRow] = (
        CheckpointAdviceRow.objects.filter(month=header).filter(visible).select_related("team")
    )
    result = [
        CheckpointAdvice(
            team=row.team, checkpoint_write_minutes=write,
            **{name: getattr(row, name) for name in CHECKPOINT_ADVICE_FIGURES},
        )
        for row in rows
    ]  # fmt: skip
    return sorted(result, key=advice_order)
