"""A month attributed in parts (a chord of part tasks, then one reduce) writes the same ledger
and rollups as the month attributed in one process, to the last stored decimal."""

from __future__ import annotations

import calendar
import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from billing_ingest.models import CostLineItem, ImportBatch, JobRecord
from finops.attribution.models import (
    AllocatedCost,
    AttributionRun,
    IdlePolicy,
    RunCost,
    SharedCostRule,
    SharedCostSplit,
    TeamDailyCost,
)
from finops.attribution.services import (
    attribution_month_plan,
    attribution_month_run,
    attribution_month_run_split,
)
from finops.org.models import Team

MONTH = dt.date(2025, 6, 1)
BASE = calendar.timegm(dt.datetime(2025, 6, 1).timetuple())
HORIZON = 3 * 86400
NODES = ["n0", "n1", "n2", "n3", "n4"]
ACCOUNTS = ["111", "222"]


def _dt(offset: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(BASE + offset, tz=dt.UTC)


def snapshot() -> dict[str, list[tuple[Any, ...]]]:
    """Every ledger and rollup row, without ids, as a sorted list per table."""
    tables: dict[str, list[tuple[Any, ...]]] = {}
    for model in (AllocatedCost, TeamDailyCost, RunCost):
        names = [f.attname for f in model._meta.concrete_fields if not f.primary_key]
        tables[model.__name__] = sorted(model.objects.values_list(*names), key=repr)
    return tables


JobSpec = tuple[int, int | None, Decimal, list[str]]
LineSpec = tuple[int, int, Decimal, Decimal, str, str, str]


def _month(
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
            state="FAILED" if i % 4 == 0 else "COMPLETED", start=_dt(start),
            end=None if end is None else _dt(end), gpus=gpus, nodes=nodes, run_id=f"run{i % 2}",
        )
        for i, (start, end, gpus, nodes) in enumerate(job_specs)
    )  # fmt: skip
    CostLineItem.objects.bulk_create(
        CostLineItem(
            batch=billing, source="s", billing_period=MONTH, billing_period_start=_dt(0),
            provider_name="AWS", billing_account_id=account, billing_currency="USD",
            charge_period_start=_dt(start), charge_period_end=_dt(end), billed_cost=cost,
            effective_cost=cost, list_cost=listed, resource_id=f"i-{resource}",
            resource_name=resource if kind == "node" else "",
            service_category="Compute" if kind == "node" else "Support",
            x_instance_type="p5.48xlarge" if kind == "node" else "",
            tags={"team": "ml"} if kind == "tagged" else {},
        )
        for start, end, cost, listed, resource, kind, account in line_specs
    )  # fmt: skip


def _split_equals_whole(parts: int) -> int:
    """Attribute the month whole, then in parts; the same rows. Returns the parts planned."""
    attribution_month_run(month=MONTH)
    whole = snapshot()
    plan = attribution_month_plan(month=MONTH, parts=parts)
    attribution_month_run_split(month=MONTH, parts=parts)
    assert snapshot() == whole
    run = AttributionRun.objects.order_by("-id").first()
    assert run is not None
    assert run.status == AttributionRun.Status.SUCCEEDED
    assert run.line_items == CostLineItem.objects.count()
    return len(plan)


hours = st.integers(min_value=0, max_value=HORIZON // 3600 - 1)


@st.composite
def jobs(draw: st.DrawFn) -> JobSpec:
    start = draw(st.integers(min_value=0, max_value=HORIZON))
    end = None if draw(st.integers(0, 5)) == 0 else start + draw(st.integers(60, 30 * 3600))
    nodes = draw(st.lists(st.sampled_from(NODES), min_size=1, max_size=3, unique=True))
    gpus = draw(st.sampled_from([Decimal(1), Decimal(8), Decimal("0.5"), Decimal("2.333333")]))
    return start, end, gpus, nodes


@st.composite
def line_items(draw: st.DrawFn) -> LineSpec:
    kind = draw(st.sampled_from(["node", "node", "node", "tagged", "support"]))
    if kind == "node":
        start = draw(hours) * 3600
        end = start + draw(st.sampled_from([3600, 3600, 7200, 86400]))
        resource = draw(st.sampled_from(NODES))
    else:
        start = draw(st.integers(0, 2)) * 86400
        end = start + 86400
        resource = draw(st.sampled_from(["vol-a", "vol-b", "s3"]))
    cost = Decimal(draw(st.integers(min_value=-(10**14), max_value=10**16))).scaleb(-12)
    listed = cost + Decimal(draw(st.integers(0, 10**12))).scaleb(-12)
    return start, end, cost, listed, resource, kind, draw(st.sampled_from(ACCOUNTS))


@pytest.mark.django_db
@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    job_specs=st.lists(jobs(), max_size=10),
    line_specs=st.lists(line_items(), min_size=1, max_size=16),
    spread_nodes=st.lists(st.sampled_from(NODES), max_size=3, unique=True),
    rule=st.sampled_from([None, "even", "gpu_spend", "fixed"]),
    parts=st.integers(min_value=2, max_value=4),
)
def test_a_month_split_in_parts_writes_the_same_ledger(
    job_specs: list[JobSpec],
    line_specs: list[LineSpec],
    spread_nodes: list[str],
    rule: str | None,
    parts: int,
) -> None:
    _month(job_specs, line_specs, spread_nodes, rule)
    event(f"parts planned: {_split_equals_whole(parts)}")
    spread = AllocatedCost.objects.filter(category="idle", job__isnull=False).exists()
    event(f"spread idle: {spread}")
    event(f"shared: {AllocatedCost.objects.filter(category='shared').exists()}")


def _scenario() -> None:
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
    _month(job_specs, line_specs, ["n1", "n3"], "gpu_spend")


@pytest.mark.django_db
@pytest.mark.parametrize("parts", [2, 3, 5, 50])
def test_a_scenario_split_in_parts_writes_the_same_ledger(parts: int) -> None:
    _scenario()
    assert len(attribution_month_plan(month=MONTH, parts=parts)) == min(parts, 7)  # 7 resources
    _split_equals_whole(parts)
    assert AllocatedCost.objects.filter(category="idle", job_id__isnull=False).exists()  # spread
    assert AllocatedCost.objects.filter(category="shared").exists()


@pytest.mark.django_db
def test_a_month_with_unused_commitments_is_one_part() -> None:
    """Which pool an unused commitment's idle goes to depends on every node line of the month."""
    _scenario()
    line = CostLineItem.objects.first()
    assert line is not None
    CostLineItem.objects.create(
        batch=line.batch, source="s", billing_period=MONTH, billing_period_start=_dt(0),
        provider_name="AWS", billing_account_id="111", billing_currency="USD",
        charge_period_start=_dt(0), charge_period_end=_dt(3600), billed_cost=Decimal(5),
        effective_cost=Decimal(5), commitment_discount_status="Unused", resource_id="ri-1",
    )  # fmt: skip
    assert len(attribution_month_plan(month=MONTH, parts=4)) == 1
    _split_equals_whole(4)


@pytest.fixture
def worker_queue_groups() -> dict[str, str]:
    """Two workers on the attribution queue, so the parts really run in two processes."""
    return {"ingest": "ingest", "compute": "attribution,notifications", "parts": "attribution"}


@pytest.mark.worker
def test_the_chord_on_real_workers_writes_the_same_ledger(celery_worker_process: Path) -> None:
    from finops.attribution.tasks import attribution_month_split

    _scenario()
    attribution_month_run(month=MONTH)
    whole = snapshot()
    summary = attribution_month_split("2025-06", 3)
    assert summary["status"] == AttributionRun.Status.SUCCEEDED
    assert snapshot() == whole
    log = celery_worker_process.read_text()
    assert log.count("attribution_month_part") >= 3
    assert "attribution_month_reduce" in log
