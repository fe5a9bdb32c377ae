"""The pricing comparison's golden month (issue 13): four one-hour runs on 2025-06-03, each a job
holding all 8 GPUs of its own p5.48xlarge node for the whole hour (8 GPU-hours, no idle), each in
its own team, with the assumptions test_pricing_comparison works its figures from:

  run      node   paid (EffectiveCost)  ListCost  PricingCategory  commitment
  od-run   n-od   80                    80        Standard         -
  spot-run n-sp   30                    80        Dynamic          -
  ri-run   n-ri   50                    80        Committed        ri-1 (Used)
  cud-run  n-cud  50                    80        Committed        cud-2 (Used; 30 Unused)
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from billing_ingest.models import CostLineItem, ImportBatch, JobRecord
from finops.attribution.services import attribution_month_run
from finops.org.models import MappingRule, Team
from finops.pricing.models import PricingAssumptions

MONTH = dt.date(2025, 6, 1)
T0 = dt.datetime(2025, 6, 3, 10, tzinfo=dt.UTC)
T1 = T0 + dt.timedelta(hours=1)
RUNS = {
    # run: (node, paid, pricing category, commitment id)
    "od-run": ("n-od", "80", "Standard", ""),
    "spot-run": ("n-sp", "30", "Dynamic", ""),
    "ri-run": ("n-ri", "50", "Committed", "ri-1"),
    "cud-run": ("n-cud", "50", "Committed", "cud-2"),
}


def golden_runs_create() -> None:
    """The four golden runs of June 2025 with their assumptions, attributed."""
    PricingAssumptions.objects.update_or_create(
        pk=1,
        defaults=dict(
            spot_price_ratio=Decimal("0.4"), interruption_bands={"b": "0.073"}, family_bands={},
            default_band="b", checkpoint_interval_minutes=30, restart_minutes=10,
            reserved_ratios={"1y_no_upfront": "0.6", "1y_all_upfront": "0.5",
                             "3y_no_upfront": "0.4", "3y_all_upfront": "0.3"},
            node_capex=Decimal("262800"), amortisation_months=36, gpus_per_node=8,
            watts_per_gpu=500, pue=Decimal("1.5"), price_per_kwh=Decimal("0.10"),
            rack_per_node_month=1000, network_per_node_month=500, staff_per_node_month=2442,
        ),
    )  # fmt: skip
    billing = ImportBatch.objects.create(
        kind="billing", format="focus", source="s", file_name="f", status="succeeded"
    )
    jobs = ImportBatch.objects.create(
        kind="jobs", format="slurm", source="c", file_name="j", status="succeeded"
    )
    common = dict(
        batch=billing, source="s", billing_period=MONTH, billing_period_start=T0,
        provider_name="AWS", billing_account_id="1", billing_currency="USD",
        charge_period_start=T0, charge_period_end=T1, charge_category="Usage",
    )  # fmt: skip
    for i, (run, (node, paid, pricing, commitment)) in enumerate(RUNS.items()):
        team = Team.objects.create(slug=run.removesuffix("-run"), name=run)
        MappingRule.objects.create(kind="slurm_account", value=f"acct-{i}", team=team)
        CostLineItem.objects.create(
            **common, pricing_category=pricing, resource_name=node, region_id="us-east-1",
            x_instance_type="p5.48xlarge", billed_cost=Decimal(paid),
            effective_cost=Decimal(paid), list_cost=Decimal("80"),
            commitment_discount_id=commitment,
            commitment_discount_status="Used" if commitment else "",
        )  # fmt: skip
        JobRecord.objects.create(
            batch=jobs, cluster="c", job_id=str(i), account=f"acct-{i}", state="COMPLETED",
            start=T0, end=T1, gpus=8, nodes=[node], run_id=run,
        )  # fmt: skip
    # The CUD's unused part of the hour: 30 of its 80.
    CostLineItem.objects.create(
        **common, pricing_category="Committed", billed_cost=Decimal("30"),
        effective_cost=Decimal("30"), commitment_discount_id="cud-2",
        commitment_discount_status="Unused",
    )  # fmt: skip
    attribution_month_run(month=MONTH)
