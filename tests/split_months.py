"""A small month to attribute whole and in parts (tests/attribution/test_attribution_split.py
and tests/attribution/test_attribution_split_pipeline.py): its line items, jobs, idle policies
and shared-cost rule, and a snapshot of every ledger and rollup row to compare."""

from __future__ import annotations

import calendar
import datetime as dt
from decimal import Decimal
from typing import Any

from hypothesis import strategies as st

from billing_ingest.models import CostLineItem, ImportBatch, JobRecord
from finops.attribution.models import (
    AllocatedCost,
    IdlePolicy,
    RecurringCharge,
    RunCost,
    SharedCostRule,
    SharedCostSplit,
    TagCharge,
    TeamDailyCost,
)
from finops.org.models import Team

MONTH = dt.date(2025, 6, 1)
BASE = calendar.timegm(dt.datetime(2025, 6, 1).timetuple())
HORIZON = 3 * 86400
NODES = ["n0", "n1", "n2", "n3", "n4"]
ACCOUNTS = ["111", "222"]


def at(offset: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(BASE + offset, tz=dt.UTC)


def snapshot() -> dict[str, list[tuple[Any, ...]]]:
    """Every ledger and rollup row, without ids, as a sorted list per table."""
    tables: dict[str, list[tuple[Any, ...]]] = {}
    for model in (AllocatedCost, TeamDailyCost, RunCost, RecurringCharge, TagCharge):
        names = [f.attname for f in model._meta.concrete_fields if not f.primary_key]
        tables[model.__name__] = sorted(model.objects.values_list(*names), key=repr)
    return tables


JobSpec = tuple[int, int | None, Decimal, list[str]]
LineSpec = tuple[int, int, Decimal, Decimal, str, str, str]


@st.composite
def jobs(draw: st.DrawFn) -> JobSpec:
    """A job of the small month: 1-3 of its nodes, whole, half and odd GPUs, some running."""
    start = draw(st.integers(min_value=0, max_value=HORIZON))
    end = None if draw(st.integers(0, 5)) == 0 else start + draw(st.integers(60, 30 * 3600))
    nodes = draw(st.lists(st.sampled_from(NODES), min_size=1, max_size=3, unique=True))
    gpus = draw(st.sampled_from([Decimal(1), Decimal(8), Decimal("0.5"), Decimal("2.333333")]))
    return start, end, gpus, nodes


def month_build(
    job_specs: list[JobSpec], line_specs: list[LineSpec], spread_nodes: list[str], rule: str | None
) -> None:
    for model in (AllocatedCost, TeamDailyCost, RunCost, JobRecord, CostLineItem, ImportBatch):
        model.objects.all().delete()
    IdlePolicy.objects.all().delete()
    SharedCostRule.objects.all().delete()
    teams = [Team.objects.get_or_create(slug=f"t{i}", defaults={"name": f"T{i}"})[0] for i in "01"]
    for node in spread_nodes:
        IdlePolicy.objects.create(node_prefix=node, policy="spread", priority=1)
    if rule is not None:
        created = SharedCostRule.objects.create(name="r", service_category="Support", method=rule)
        if rule == "fixed":
            SharedCostSplit.objects.create(rule=created, team=teams[0], percent=30)
            SharedCostSplit.objects.create(rule=created, team=teams[1], percent=70)
    billing = ImportBatch.objects.create(
        kind="billing", format="focus", source="s", file_name="f", status="succeeded"
    )
    job_batch = ImportBatch.objects.create(
        kind="jobs", format="slurm", source="c", file_name="j", status="succeeded"
    )
    JobRecord.objects.bulk_create(
        JobRecord(
            batch=job_batch, cluster="c", job_id=str(i), account=f"acct{i % 3}",
            state="FAILED" if i % 4 == 0 else "COMPLETED", start=at(start),
            end=None if end is None else at(end), gpus=gpus, nodes=nodes, run_id=f"run{i % 2}",
        )
        for i, (start, end, gpus, nodes) in enumerate(job_specs)
    )  # fmt: skip
    CostLineItem.objects.bulk_create(
        CostLineItem(
            batch=billing, source="s", billing_period=MONTH, billing_period_start=at(0),
            provider_name="AWS", billing_account_id=account, billing_currency="USD",
            charge_period_start=at(start), charge_period_end=at(end), billed_cost=cost,
            effective_cost=cost, list_cost=listed, resource_id=f"i-{resource}",
            resource_name=resource if kind == "node" else "",
            service_category="Compute" if kind == "node" else "Support",
            x_instance_type="p5.48xlarge" if kind == "node" else "",
            tags={"team": "ml"} if kind == "tagged" else {},
        )
        for start, end, cost, listed, resource, kind, account in line_specs
    )  # fmt: skip


def scenario_build() -> None:
    """Five nodes over two accounts, jobs across nodes of both, two spread nodes, a shared
    support line, tagged storage, a running job, a committed node (ListCost above cost)."""
    job_specs = [
        (0, 7200, Decimal(8), ["n0", "n1"]),  # two nodes, likely two parts
        (1800, 5400, Decimal("0.5"), ["n2"]),
        (3600, None, Decimal(2), ["n3", "n4"]),  # running: to the month's last hour
        (0, 86400, Decimal("2.333333"), ["n4"]),
    ]
    line_specs = []
    for index, node in enumerate(NODES):
        for hour in range(4):
            cost = Decimal("98.320000000001") + index
            listed = Decimal("137.6123") if node == "n1" else cost
            account = ACCOUNTS[index % 2]
            line_specs.append((hour * 3600, (hour + 1) * 3600, cost, listed, node, "node", account))
    line_specs.append((0, 86400, Decimal("333.333333333333"), Decimal("333.333333333333"),
                       "s3", "support", "111"))  # fmt: skip
    line_specs.append((0, 86400, Decimal("12.5"), Decimal("12.5"), "vol-a", "tagged", "222"))
    month_build(job_specs, line_specs, ["n1", "n3"], "gpu_spend")
