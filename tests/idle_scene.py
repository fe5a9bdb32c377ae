"""The idle showback scene (issue 29), shared by tests/attribution/test_idle_showback.py (the
hand-computed figures) and tests/security/test_lead_isolation.py (what a lead may see of it).

Cluster c1, 8-GPU p5.48xlarge nodes, 2025-06-03 00:00-01:00 UTC; the Slurm accounts are the
teams' slugs (the fixture teams vision and speech):
- gpu-a, $80, no policy (keep, untagged line: no team): job 1 (vision, 4 GPUs) -> training 40,
  job 2 (speech, 2 GPUs) -> training 20, idle 20 owned by nobody (the platform bucket).
- gpu-b, $32, keep with speech as the pool owner: job 3 (vision, 4 GPUs) -> training 16, idle
  16 charged to speech (kept).
- gpu-c, $48, spread: job 4 (speech, 4 GPUs) -> training 24, idle 24 spread onto job 4.
The expected figures are worked out in tests/attribution/test_idle_showback.py.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from io import StringIO

from django.core.management import call_command

from billing_ingest.models import CostLineItem, ImportBatch, JobRecord
from finops.attribution.models import IdlePolicy
from finops.org.models import Team

MONTH = dt.date(2025, 6, 1)
T0 = dt.datetime(2025, 6, 3, tzinfo=dt.UTC)


def node_line(batch: ImportBatch, node: str, cost: str) -> None:
    CostLineItem.objects.create(
        batch=batch, source="aws", billing_period=MONTH,
        billing_period_start=dt.datetime(2025, 6, 1, tzinfo=dt.UTC), provider_name="AWS",
        billing_account_id="111", billing_currency="USD", charge_period_start=T0,
        charge_period_end=T0 + dt.timedelta(hours=1), billed_cost=Decimal(cost),
        effective_cost=Decimal(cost), service_name="Amazon EC2", resource_name=node,
        x_instance_type="p5.48xlarge",
    )  # fmt: skip


def job(batch: ImportBatch, job_id: str, node: str, account: str, gpus: int) -> None:
    JobRecord.objects.create(
        batch=batch, cluster="c1", job_id=job_id, state="COMPLETED", start=T0,
        end=T0 + dt.timedelta(hours=1), gpus=Decimal(gpus), nodes=[node], account=account,
        run_id=f"run-{job_id}",
    )  # fmt: skip


def attribute_idle_scene(team: Team, other_team: Team) -> None:
    """The scene above, attributed (`team` is vision's role, `other_team` speech's)."""
    billing = ImportBatch.objects.create(
        kind="billing", format="focus", source="aws", file_name="f", status="succeeded"
    )
    jobs = ImportBatch.objects.create(
        kind="jobs", format="slurm", source="c1", file_name="j", status="succeeded"
    )
    for node, cost in (("gpu-a", "80"), ("gpu-b", "32"), ("gpu-c", "48")):
        node_line(billing, node, cost)
    job(jobs, "1", "gpu-a", team.slug, 4)
    job(jobs, "2", "gpu-a", other_team.slug, 2)
    job(jobs, "3", "gpu-b", team.slug, 4)
    job(jobs, "4", "gpu-c", other_team.slug, 4)
    IdlePolicy.objects.create(node_prefix="gpu-b", policy="keep", owner_team=other_team)
    IdlePolicy.objects.create(node_prefix="gpu-c", policy="spread")
    out = StringIO()
    call_command("attribute", "--month", "2025-06", stdout=out)
    assert "difference 0" in out.getvalue()
