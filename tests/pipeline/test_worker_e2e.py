"""End to end through a real Celery worker process over the configured broker.

Runs only where CI's second pass sets it up (PostgreSQL + Redis): the worker is a separate
process, so the database must be one both processes can reach (not SQLite in memory) and the
test data must be committed (transactional_db).
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from billing_ingest.models import CostLineItem, ImportBatch, JobRecord
from finops.attribution.models import AllocatedCost, RunCost
from finops.celery import app

ROOT = Path(__file__).resolve().parents[2]

FOCUS_HEADER = (
    "BillingAccountId,BillingCurrency,BillingPeriodStart,BillingPeriodEnd,ChargeCategory,"
    "ChargePeriodStart,ChargePeriodEnd,PricingCategory,ProviderName,ResourceId,ResourceName,"
    "ServiceName,SkuId,BilledCost,EffectiveCost,ListCost,Tags,x_InstanceType"
)
SACCT_HEADER = (
    "JobID|JobIDRaw|JobName|Account|User|Partition|State|Start|End|AllocTRES|NodeList|WCKey|Comment"
)


def _write_inputs(folder: Path) -> tuple[Path, Path]:
    bill = folder / "bill.csv"
    rows = [FOCUS_HEADER]
    for hour in range(2):
        rows.append(
            f"123,USD,2025-03-01T00:00:00Z,2025-04-01T00:00:00Z,Usage,"
            f"2025-03-10T{hour:02d}:00:00Z,2025-03-10T{hour + 1:02d}:00:00Z,Standard,AWS,"
            f"arn:aws:ec2:us-east-1:123:instance/i-1,gpu-001,Amazon EC2,p5.48xlarge,"
            f"98.32,98.32,98.32,{{}},p5.48xlarge"
        )
    rows.append(
        "123,USD,2025-03-01T00:00:00Z,2025-04-01T00:00:00Z,Usage,2025-03-01T00:00:00Z,"
        "2025-04-01T00:00:00Z,Standard,AWS,vol-1,,Amazon S3,storage,10.5,10.5,10.5,{},"
    )
    bill.write_text("\n".join(rows) + "\n")
    jobs = folder / "jobs.sacct"
    jobs.write_text(
        SACCT_HEADER + "\n"
        "100|100|train|vision|ana|gpu|COMPLETED|2025-03-10T00:00:00|2025-03-10T02:00:00|"
        "billing=8,cpu=96,gres/gpu=4,mem=1T,node=1|gpu-001|run-a|\n"
    )
    return bill, jobs


@pytest.mark.worker
def test_ingest_and_attribute_run_on_the_worker(
    celery_worker_process: Path, tmp_path: Path
) -> None:
    assert app.conf.task_always_eager is False
    bill, jobs = _write_inputs(tmp_path)

    call_command("ingest_billing", "--format", "focus", str(bill), "--source", "e2e")
    call_command("ingest_jobs", "--format", "slurm", str(jobs), "--cluster", "e2e")
    call_command("attribute", "--month", "2025-03")

    assert ImportBatch.objects.filter(status=ImportBatch.Status.SUCCEEDED).count() == 2
    assert CostLineItem.objects.count() == 3
    assert JobRecord.objects.count() == 1
    # 4 of 8 GPUs for both hours: half of 2 x 98.32 goes to the run, half stays idle.
    run = RunCost.objects.get(run_id="run-a")
    assert run.cost == Decimal("98.32")
    billed = sum(CostLineItem.objects.values_list("effective_cost", flat=True), Decimal(0))
    attributed = sum(AllocatedCost.objects.values_list("amount", flat=True), Decimal(0))
    assert attributed == billed == Decimal("207.14")
    # The work really happened in the other process: its log names the tasks it ran.
    worker_log = celery_worker_process.read_text()
    assert "ingest_billing_part" in worker_log
    assert "finish_billing_batch" in worker_log
    assert "succeeded" in worker_log
    assert "attribute_month" in worker_log


def _focus_part(path: Path, costs: list[str]) -> None:
    rows = [FOCUS_HEADER]
    for hour, cost in enumerate(costs):
        rows.append(
            f"123,USD,2025-03-01T00:00:00Z,2025-04-01T00:00:00Z,Usage,"
            f"2025-03-10T{hour:02d}:00:00Z,2025-03-10T{hour + 1:02d}:00:00Z,Standard,AWS,"
            f"i-1,gpu-001,Amazon EC2,p5.48xlarge,{cost},{cost},{cost},{{}},p5.48xlarge"
        )
    path.write_text("\n".join(rows) + "\n")


def _delivery(folder: Path, parts: list[list[str]]) -> Path:
    folder.mkdir(parents=True)
    for index, costs in enumerate(parts):
        _focus_part(folder / f"part-{index + 1}.csv", costs)
    return folder


@pytest.mark.worker
def test_a_two_part_delivery_fans_out_and_swaps_through_the_worker_chord(
    celery_worker_process: Path, tmp_path: Path
) -> None:
    assert app.conf.task_always_eager is False
    first = _delivery(tmp_path / "v1", [["1.25", "2.5"], ["4"]])
    call_command(
        "ingest_billing",
        "--format",
        "focus",
        "--delivery",
        str(first),
        "--source",
        "fan",
        "--no-attribute",
    )
    batch = ImportBatch.objects.get()
    assert batch.status == ImportBatch.Status.SUCCEEDED
    assert list(batch.parts.values_list("status", flat=True)) == ["succeeded"] * 2
    assert batch.currency_totals["USD"]["rows"] == 3
    assert Decimal(batch.currency_totals["USD"]["effective"]) == Decimal("7.75")

    # A re-delivery whose second part is bad fails whole; the first delivery stays.
    broken = _delivery(tmp_path / "v2", [["10"], ["20", "x"]])
    with pytest.raises(CommandError, match="part 2 of 2"):
        call_command(
            "ingest_billing",
            "--format",
            "focus",
            "--delivery",
            str(broken),
            "--source",
            "fan",
            "--no-attribute",
        )
    failed = ImportBatch.objects.get(status=ImportBatch.Status.FAILED)
    assert "file part-2.csv, row 3" in failed.error
    assert not CostLineItem.objects.filter(batch=failed).exists()
    assert set(CostLineItem.objects.values_list("batch_id", flat=True)) == {batch.pk}

    # A good re-delivery replaces the first one's rows.
    fixed = _delivery(tmp_path / "v3", [["10"], ["20", "30"]])
    call_command(
        "ingest_billing",
        "--format",
        "focus",
        "--delivery",
        str(fixed),
        "--source",
        "fan",
        "--no-attribute",
    )
    batch.refresh_from_db()
    assert batch.status == ImportBatch.Status.SUPERSEDED
    total = sum(CostLineItem.objects.values_list("effective_cost", flat=True), Decimal(0))
    assert total == Decimal("60")
    worker_log = celery_worker_process.read_text()
    # Three deliveries of two parts: six part tasks and three callbacks ran on the worker.
    assert worker_log.count("ingest_billing_part[") >= 6
    assert worker_log.count("finish_billing_batch[") >= 3
