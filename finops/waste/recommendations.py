"""Waste advice as recommendations (issue 31 item 3, DESIGN section 10): the checkpoint
interval that minimises expected loss (Young/Daly), per team, cluster, currency and pricing
category (spot jobs are interrupted more often than on-demand ones: their interval differs; key
`checkpoint:<cluster>:<category>`, so a status survives a recompute), and the GPUs that jobs held
but did not use, per team, cluster and currency (key `allocation:<cluster>`; an inference
endpoint's pods left out: the endpoint's rightsize advises them), each with its
monthly saving and assumptions; a saving under the materiality floor
(FINOPS_ADVICE_MIN_MONTHLY_SAVING) is no recommendation.

Drafts only: finops.pricing.recommendations stores them with the pricing ones (same model,
status and comment flow), reading this source from FINOPS_RECOMMENDATION_SOURCES.
"""

from __future__ import annotations

import datetime as dt
from decimal import ROUND_HALF_EVEN, Decimal

from django.conf import settings

from finops.core.months import month_format
from finops.org.models import Team
from finops.pricing.recommendation_rules import Draft, cents, money_text
from finops.waste.advice import (
    AllocationIdle,
    CheckpointAdvice,
    allocation_idle,
    checkpoint_advice,
)

MINIMUM = Decimal("0.01")
YOUNG_DALY = "sqrt(2 x checkpoint write time x mean time between interruptions) (Young/Daly)"


def advice_floor() -> Decimal:
    """The least monthly saving made a recommendation: the setting
    FINOPS_ADVICE_MIN_MONTHLY_SAVING (finops/settings.py: why absolute, default 25 in the
    recommendation's currency), never under a cent."""
    return max(MINIMUM, Decimal(str(settings.FINOPS_ADVICE_MIN_MONTHLY_SAVING)))


def _text(value: Decimal | None) -> str | None:
    return None if value is None else f"{value:f}"


def _evidence(a: CheckpointAdvice, month: dt.date) -> dict[str, object]:
    return {
        "month": month_format(month),
        "cluster": a.cluster,
        "pricing": a.pricing,
        "runs_cost": str(cents(a.cost)),
        "attempt_hours": _text(a.attempt_hours),
        "gpu_hours": _text(a.gpu_hours),
        "interruptions": a.interruptions,
        "interruptions_per_gpu_hour": _text(a.interruptions_per_gpu_hour),
        "interruptions_per_1000_gpu_hours": _text(a.interruptions_per_thousand_gpu_hours),
        "mean_hours_between_interruptions": _text(a.mean_hours_between_interruptions),
    }


def _checkpoint(a: CheckpointAdvice, month: dt.date, floor: Decimal) -> Draft | None:
    saving = cents(a.monthly_saving)
    # Below a cent the advice is to keep the interval (CheckpointAdvice.action): no action;
    # below the floor it is not worth acting on (the team page still shows it).
    if a.optimal_interval_minutes is None or a.monthly_saving < floor:
        return None
    best = a.optimal_interval_minutes.quantize(Decimal(1), rounding=ROUND_HALF_EVEN)
    measured = a.current_interval_source == "metrics"
    return Draft(
        team_id=a.team.pk if a.team else None,
        kind="checkpoint",
        key=f"checkpoint:{a.cluster}:{a.pricing}",
        title=f"Checkpoint {a.pricing_label} jobs on {a.cluster} every {best} minutes",
        action=a.action,
        monthly_savings=saving,
        currency=a.currency,
        confidence="high" if measured and a.interruptions >= 3 else "medium" if measured else "low",
        assumptions={
            "formula": YOUNG_DALY,
            "checkpoint_write_minutes": _text(a.checkpoint_write_minutes),
            "current_interval_minutes": _text(a.current_interval_minutes),
            "current_interval_source": (
                "the run metrics' checkpoints" if measured else "the pricing assumptions"
            ),
            "optimal_interval_minutes": _text(a.optimal_interval_minutes),
            "saving": f"this month's cost of the {a.pricing_label} attempts x (expected loss "
            "share at the current interval - at the advised one), at their interruption rate "
            "this month",
            "estimated": not measured,
            "overlap": "the idle-allocation recommendation of this team and cluster is on the "
            "same attempts' cost: with fewer GPUs requested the lost work costs less too, by "
            "this saving x the idle share (overlap_with; the headline counts it once)",
        },
        evidence=_evidence(a, month),
    )


def _idle(a: AllocationIdle, month: dt.date, floor: Decimal) -> Draft | None:
    saving = cents(a.idle_in_allocation)
    if a.idle_in_allocation < floor:
        return None
    used = a.measured_utilisation
    share = f"{(used * 100).quantize(Decimal(1))} %" if used is not None else "part"
    return Draft(
        team_id=a.team.pk if a.team else None,
        kind="idle",
        key=f"allocation:{a.cluster}",
        title=f"Jobs on {a.cluster} used {share} of their GPUs",
        action=(
            f"Jobs on {a.cluster} used {share} of the GPUs they held: "
            f"{money_text(a.idle_in_allocation, a.currency)} of allocated GPU time was idle this "
            "month. Request fewer GPUs per job, or pack more work onto them."
        ),
        monthly_savings=saving,
        currency=a.currency,
        confidence="medium",
        assumptions={
            "measured_utilisation": _text(used),
            "saving": "the idle share of the allocated cost of the jobs whose GPU utilisation "
            "was measured (cost x (1 - utilisation)), had they held only what they used",
            "estimated": False,
            "excluded": "an inference endpoint's pods: the endpoint's rightsize recommendation "
            "reads the same utilisation of the same pods (one saving per cost)",
            "overlap": "a checkpoint or spot saving on these jobs overlaps this one by that "
            "saving x this idle share (stamped on it as overlap_with; the headline counts it once)",
        },
        evidence={
            "month": month_format(month),
            "cluster": a.cluster,
            "runs_cost": str(cents(a.cost)),
            "gpu_hours": _text(a.gpu_hours),
            "idle_in_allocation": str(saving),
        },
    )


def waste_drafts(*, month: dt.date) -> list[Draft]:
    """The month's checkpoint and idle-allocation recommendations, every team and none."""
    rows = checkpoint_advice(month=month, teams=Team.objects.all(), include_unowned=True)
    return advice_drafts(rows, month)


def advice_drafts(rows: list[CheckpointAdvice], month: dt.date) -> list[Draft]:
    """The recommendations of the month's checkpoint advice rows (checkpoint_advice of every
    team and none), with their idle allocations; those saving at least the floor a month
    (advice_floor)."""
    floor = advice_floor()
    drafts = [_checkpoint(row, month, floor) for row in rows]
    drafts += [_idle(idle, month, floor) for idle in allocation_idle(rows)]
    return [draft for draft in drafts if draft is not None]
