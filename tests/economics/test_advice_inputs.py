"""The month's waste advice read from what the run_economics step stored (the checkpoint advice
the pages read, CheckpointAdviceMonth under its stamp: finops.economics.advice) is the advice
computed again from the ledger, on the hand-worked
scenario fixtures/scenarios/focus-slurm-waste (README.md there, "What to change": vision on hpc
checkpoints every 22.58 minutes instead of 30, saving 2.44 USD; speech's job 403 left 25 USD of
allocated GPU time idle); and stored figures that something has moved since are never read."""

from __future__ import annotations

import json
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

from billing_ingest.models import ImportBatch
from finops.economics.advice import stored_advice, stored_waste_drafts
from finops.economics.models import CheckpointAdviceMonth
from finops.economics.services import economics_delete_month, economics_refresh
from finops.org.models import Team
from finops.pricing.recommendation_rules import Draft
from finops.waste.advice import checkpoint_advice
from finops.waste.recommendations import advice_drafts, waste_drafts
from tests.scenario_setup import FIXTURES, run_command, scenario_load, waste_month_attributed

MONTH = date(2025, 6, 1)

pytestmark = pytest.mark.django_db


def _savings(drafts: list[Draft]) -> dict[tuple[str, str, str], Decimal]:
    slugs: dict[int | None, str] = dict(Team.objects.values_list("id", "slug"))
    return {(slugs[d.team_id], d.kind, d.key): d.monthly_savings for d in drafts}


# Savings of cents to a few USD: the materiality floor off (test_advice_floor.py has it).
@override_settings(FINOPS_ADVICE_MIN_MONTHLY_SAVING=0)
def test_the_stored_advice_is_the_computed_advice(tmp_path: Path) -> None:
    waste_month_attributed(tmp_path)
    economics_refresh(month=MONTH)
    assert stored_advice(month=MONTH) is not None  # read from the store, not computed
    drafts = stored_waste_drafts(month=MONTH)
    assert drafts == waste_drafts(month=MONTH)
    assert _savings(drafts) == {
        ("vision", "checkpoint", "checkpoint:hpc:on_demand"): Decimal("2.44"),
        ("speech", "idle", "allocation:hpc"): Decimal("25.00"),
    }


# Savings of cents to a few USD: the materiality floor off (test_advice_floor.py has it).
@override_settings(FINOPS_ADVICE_MIN_MONTHLY_SAVING=0)
def test_a_run_metrics_import_after_the_step_makes_the_stored_advice_stale(
    tmp_path: Path,
) -> None:
    """speech's run had no metrics (its interval: the assumed 24 minutes, already about right);
    metrics checkpointing every 60 minutes arrive after the step: with M = 150 minutes the
    advice is now sqrt(600) = 24.49 minutes, saving 200 x (loss(60) - loss(24.49)) =
    200 x (0.2333333 - 0.1632993) = 14.0068, 14.01 USD to the cent. The stored figures do not
    know it."""
    waste_month_attributed(tmp_path)
    economics_refresh(month=MONTH)
    stale = stored_advice(month=MONTH)
    assert stale is not None
    metrics = tmp_path / "speech-metrics.csv"
    metrics.write_text(
        "run_id,team,timestamp,step,tokens,samples,checkpoint,model_params,flops_per_token,dtype\n"
        "finetune,speech,2025-06-03T11:15:00Z,10,1000,10,1,,,\n"
        "finetune,speech,2025-06-03T11:45:00Z,20,2000,20,0,,,\n"
        "finetune,speech,2025-06-03T12:15:00Z,30,3000,30,1,,,\n"
    )
    run_command(tmp_path, ["ingest_run_metrics", "--format", "csv", str(metrics)])
    # The import refreshed the economics of its run only: the month's advice row is stale.
    assert CheckpointAdviceMonth.objects.filter(billing_period=MONTH).exists()
    assert stored_advice(month=MONTH) is None
    drafts = stored_waste_drafts(month=MONTH)
    assert drafts == waste_drafts(month=MONTH)
    assert _savings(drafts)[("speech", "checkpoint", "checkpoint:hpc:on_demand")] == Decimal(
        "14.01"
    )
    # What the stale figures would have said: no such advice.
    old = advice_drafts(stale, MONTH)
    assert ("speech", "checkpoint", "checkpoint:hpc:on_demand") not in _savings(old)
    # The month's step again: current, and the same drafts as computed.
    economics_refresh(month=MONTH)
    assert stored_advice(month=MONTH) is not None
    assert stored_waste_drafts(month=MONTH) == drafts


def test_attribution_or_changed_assumptions_make_the_stored_advice_stale(
    tmp_path: Path,
) -> None:
    from finops.pricing.models import PricingAssumptions

    waste_month_attributed(tmp_path)
    economics_refresh(month=MONTH)
    run_command(tmp_path, ["attribute", "--month", "2025-06"])
    # `attribute` chains run_economics: current again after it.
    assert stored_advice(month=MONTH) is not None
    ImportBatch.objects.create(kind="jobs", format="slurm", source="hpc", file_name="x")
    assert stored_advice(month=MONTH) is None
    economics_refresh(month=MONTH)
    row = PricingAssumptions.objects.get(pk=1)
    row.restart_minutes = Decimal("30.00")
    row.save()
    assert stored_advice(month=MONTH) is None
    assert stored_waste_drafts(month=MONTH) == waste_drafts(month=MONTH)


def test_a_partial_refresh_stores_no_stamp_and_a_deleted_month_has_none(tmp_path: Path) -> None:
    waste_month_attributed(tmp_path)
    economics_delete_month(month=MONTH)
    assert not CheckpointAdviceMonth.objects.exists()
    economics_refresh(month=MONTH, run_ids=["finetune"])
    # The pages' rows are stored (every team, computed), with no stamp: not read here.
    assert CheckpointAdviceMonth.objects.get().stamp == ""
    assert stored_advice(month=MONTH) is None
    assert stored_waste_drafts(month=MONTH) == waste_drafts(month=MONTH)


def test_the_assumptions_row_made_on_first_use_leaves_the_stored_advice_current(
    tmp_path: Path,
) -> None:
    """The first month of a new install: no assumptions row when run_economics runs (the
    defaults, 20 and 10 minutes), the recommendations step makes it (20.00 and 10.00)."""
    from finops.pricing.models import PricingAssumptions

    waste_month_attributed(tmp_path)
    PricingAssumptions.objects.all().delete()
    economics_refresh(month=MONTH)
    PricingAssumptions.current()
    assert stored_advice(month=MONTH) is not None
    assert stored_waste_drafts(month=MONTH) == waste_drafts(month=MONTH)


def test_the_stored_advice_is_the_read_time_rows_with_capacity_interruptions(
    tmp_path: Path,
) -> None:
    # Every figure of every row, the capacity-only interruptions (PREEMPTED, NODE_FAIL) too:
    # stored since ADVICE_VERSION 2. fixtures/recommendations/focus-slurm-spot-interruptions
    # (README.md there): vision's spot jobs lose capacity 4 times, its on-demand job 503 FAILED
    # is no capacity loss, speech none.
    folder = FIXTURES / "recommendations" / "focus-slurm-spot-interruptions"
    scenario_load(folder, tmp_path)
    month = date.fromisoformat(json.loads((folder / "expected.json").read_text())["month"] + "-01")
    economics_refresh(month=month)
    stored = stored_advice(month=month)
    assert stored is not None
    assert stored == checkpoint_advice(month=month, teams=Team.objects.all(), include_unowned=True)
    capacity = {
        (r.team.slug if r.team else None, r.pricing): r.capacity_interruptions for r in stored
    }
    assert capacity == {
        ("speech", "commitment"): 0,
        ("vision", "spot"): 4,
        ("vision", "on_demand"): 0,
    }


def test_the_month_step_builds_the_advice_groups_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One store: the month's advice groups are summed once per refresh (AdviceSums over the
    chunks of runs, finished once), for the pages and the recommendations step alike."""
    import finops.waste.advice as waste_advice

    waste_month_attributed(tmp_path)
    built = []
    original = waste_advice.AdviceSums.groups

    def counted(self: waste_advice.AdviceSums) -> object:
        built.append(1)
        return original(self)

    monkeypatch.setattr(waste_advice.AdviceSums, "groups", counted)
    economics_refresh(month=MONTH)
    assert len(built) == 1
    assert stored_advice(month=MONTH) is not None
    stored_waste_drafts(month=MONTH)
    assert len(built) == 1  # read from the store


def test_another_checkpoint_write_time_makes_the_stored_advice_stale(
    tmp_path: Path, settings: Any
) -> None:
    waste_month_attributed(tmp_path)
    economics_refresh(month=MONTH)
    assert stored_advice(month=MONTH) is not None
    settings.FINOPS_CHECKPOINT_WRITE_MINUTES = 5
    assert stored_advice(month=MONTH) is None
    assert stored_waste_drafts(month=MONTH) == waste_drafts(month=MONTH)
