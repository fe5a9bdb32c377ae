"""An import re-attributes the billing months it touched, so the reconciliation a user opens
next is already balanced; --no-attribute leaves attribution to the caller."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import pytest
from django.core.management import call_command

from finops.attribution.models import AllocatedCost, AttributionRun, RunCost
from finops.attribution.selectors.reconciliation import reconciliation_for_month

HEADER = (
    "BillingAccountId,BillingCurrency,BillingPeriodStart,BillingPeriodEnd,ChargeCategory,"
    "ChargePeriodStart,ChargePeriodEnd,ProviderName,ResourceName,ServiceName,BilledCost,"
    "EffectiveCost,x_InstanceType"
)
SACCT = (
    "JobID|JobIDRaw|JobName|Account|User|Partition|State|Start|End|AllocTRES|NodeList\n"
    "7|7|train|vision|ana|gpu|COMPLETED|2025-05-02T10:00:00|2025-05-02T11:00:00|"
    "gres/gpu=2|node-1\n"
)


def _bill(folder: Path) -> Path:
    path = folder / "bill.csv"
    path.write_text(
        HEADER + "\n"
        "1,USD,2025-05-01T00:00:00Z,2025-06-01T00:00:00Z,Usage,2025-05-02T10:00:00Z,"
        "2025-05-02T11:00:00Z,AWS,node-1,EC2,80.00,80.00,p5.48xlarge\n"
    )
    return path


@pytest.mark.django_db
def test_billing_import_attributes_its_month(tmp_path: Path) -> None:
    call_command("ingest_billing", "--format", "focus", str(_bill(tmp_path)))
    row = reconciliation_for_month(month=dt.date(2025, 5, 1)).total
    assert row.amortised == Decimal("80")
    assert row.difference == Decimal(0)
    assert AttributionRun.objects.filter(status=AttributionRun.Status.SUCCEEDED).count() == 1


@pytest.mark.django_db
def test_job_import_re_attributes_the_months_its_jobs_overlap(tmp_path: Path) -> None:
    call_command("ingest_billing", "--format", "focus", str(_bill(tmp_path)))
    assert not RunCost.objects.exists()  # no jobs yet: the whole node hour is idle
    jobs = tmp_path / "jobs.sacct"
    jobs.write_text(SACCT)
    call_command("ingest_jobs", "--format", "slurm", str(jobs), "--cluster", "c1")
    # 2 of the node's 8 GPUs for the whole hour: a quarter of 80.
    assert RunCost.objects.get(run_id="train").cost == Decimal("20")


@pytest.mark.django_db
def test_no_attribute_flag_leaves_the_ledger_alone(tmp_path: Path) -> None:
    call_command("ingest_billing", "--format", "focus", str(_bill(tmp_path)), "--no-attribute")
    assert not AllocatedCost.objects.exists()
    assert not AttributionRun.objects.exists()
