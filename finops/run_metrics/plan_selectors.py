"""A run's plan against what it did (issue 30): the newest saved plan (RunPlan) beside the
run's actual GPU-hours, cost and MFU over every month and attempt."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from finops.attribution.models import RunCost
from finops.org.models import Team
from finops.run_metrics.models import RunPlan
from finops.run_metrics.selectors import RunKey, run_efficiency

SECONDS_PER_HOUR = Decimal(3600)


@dataclass(frozen=True, slots=True)
class PlanAgainstActual:
    plan: RunPlan
    actual_gpu_hours: Decimal
    actual_cost: Decimal | None  # None: the run's cost is in another currency than the plan's
    actual_mfu: Decimal | None

    @property
    def gpu_hours_change(self) -> Decimal | None:
        """Actual / planned - 1 (0.1: 10 % more GPU-hours than planned)."""
        if not self.plan.gpu_hours:
            return None
        return self.actual_gpu_hours / self.plan.gpu_hours - 1

    @property
    def cost_change(self) -> Decimal | None:
        if self.actual_cost is None or not self.plan.cost:
            return None
        return self.actual_cost / self.plan.cost - 1


def plan_against_actual(*, team: Team, run_id: str) -> PlanAgainstActual | None:
    plan = RunPlan.objects.filter(team=team, run_id=run_id).order_by("-created_at", "-pk").first()
    if plan is None:
        return None
    efficiency = run_efficiency(RunKey(team.pk, team.slug, run_id, plan.currency))
    if efficiency is not None:
        hours, cost, mfu = efficiency.gpu_hours, efficiency.cost, efficiency.mfu
    else:
        rows = RunCost.objects.filter(team=team, run_id=run_id)
        seconds = sum((r.gpu_seconds for r in rows), Decimal(0))
        currencies = {r.billing_currency for r in rows}
        hours = seconds / SECONDS_PER_HOUR
        cost = sum((r.cost for r in rows), Decimal(0)) if currencies <= {plan.currency} else None
        mfu = None
    return PlanAgainstActual(plan=plan, actual_gpu_hours=hours, actual_cost=cost, actual_mfu=mfu)
