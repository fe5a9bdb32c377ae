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


def checkpoint_advice_stored(
    *, month: dt.date, teams: QuerySet[Team], include_unowned: bool
) -> list[CheckpointAdvice] | None:
    """checkpoint_advice(month, teams, include_unowned) from the stored rows; None when the
    month is not stored, or was stored with other settings than today's (the pricing
    assumptions' checkpoint and restart minutes, FINOPS_CHECKPOINT_WRITE_MINUTES): the caller
    computes it then. Three queries."""
    header = CheckpointAdviceMonth.objects.filter(billing_period=month).first()
    if header is None:
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
