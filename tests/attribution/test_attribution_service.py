"""`attribute --month` end to end on the database: ledger, rollups, teams, idempotence, failure."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import NoReturn, TypedDict

import pytest
from django.core.management import CommandError
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from pytest_django import DjangoAssertNumQueries

from billing_ingest.models import CostLineItem, ImportBatch, JobRecord
from finops.attribution import engine
from finops.attribution.engine import Job, LineItem, Share, ShareFold, fold_shares
from finops.attribution.engine.line_block import LineBlock
from finops.attribution.ledger import partial
from finops.attribution.ledger.writer import ConservationError
from finops.attribution.models import AllocatedCost, AttributionRun, RunCost, TeamDailyCost
from finops.attribution.services import attribution_month_run
from finops.core.months import month_format
from finops.org.models import MappingRule, Team
from finops.pipeline.tasks import pipeline_open_months
from tests.attribution_rows import MONTH, at, attribute, billing_batch, job, line

pytestmark = pytest.mark.django_db


def ledger_snapshot() -> list[tuple]:
    fields = [f.name for f in AllocatedCost._meta.fields if f.name != "id"]
    return sorted(AllocatedCost.objects.values_list(*fields), key=lambda row: tuple(map(str, row)))


class GpuHour(TypedDict):
    line: CostLineItem
    ok: JobRecord
    failed: JobRecord


@pytest.fixture
def gpu_hour() -> GpuHour:
    """A p5.48xlarge (8 H100) hour of $98.32 with two jobs of run r1, one of them failed."""
    batch = billing_batch()
    node_line = line(batch, "98.32", 0, 1, resource_name="gpu-a", x_instance_type="p5.48xlarge")
    ok = job("1", ["gpu-a"], "4", 0, 1)
    failed = job("2", ["gpu-a"], "2", 0.25, 0.75, state="FAILED")
    return {"line": node_line, "ok": ok, "failed": failed}


def test_ledger_runs_and_rollups_for_a_shared_gpu_hour(gpu_hour: GpuHour) -> None:
    output = attribute()

    team = Team.objects.get(slug="vision-team")  # created from the Slurm account
    assert team.name == "vision-team"
    rows = {
        (r.category, r.job_id, r.team_id, r.node): r.amount for r in AllocatedCost.objects.all()
    }
    # 98.32 x 4/8 = 49.16; 98.32 x (2 x 0.5h)/8 = 12.29; idle the rest 36.87.
    assert rows == {
        ("training", gpu_hour["ok"].pk, team.pk, "gpu-a"): Decimal("49.16"),
        ("training", gpu_hour["failed"].pk, team.pk, "gpu-a"): Decimal("12.29"),
        ("idle", None, None, "gpu-a"): Decimal("36.87"),
    }
    row = AllocatedCost.objects.get(job=gpu_hour["ok"])
    assert (row.day, row.run_id, row.provider_name, row.billing_account_id) == (
        dt.date(2025, 6, 3), "r1", "AWS", "111",
    )  # fmt: skip
    assert row.source_batch_id == gpu_hour["line"].batch_id

    run = RunCost.objects.get()
    assert (run.team, run.run_id, run.cluster, run.billing_currency) == (team, "r1", "c1", "USD")
    assert run.cost == Decimal("61.45")
    # 4 GPUs x 1 h + 2 GPUs x 0.5 h = 5 GPU-hours; $61.45 / 5 = $12.29 per GPU-hour.
    assert run.gpu_hours == 5
    assert run.cost_per_gpu_hour == Decimal("12.29")
    assert run.wasted_cost == Decimal("12.29")
    assert (run.jobs, run.failed_jobs, run.running_jobs) == (2, 1, 0)
    assert (run.first_start, run.last_end) == (at(0), at(1))

    daily = {(d.team_id, d.category): d.amount for d in TeamDailyCost.objects.all()}
    assert daily == {(team.pk, "training"): Decimal("61.45"), (None, "idle"): Decimal("36.87")}

    assert AttributionRun.objects.get().status == AttributionRun.Status.SUCCEEDED
    assert "difference 0" in output
    assert "idle" in output
    assert "36.87" in output


def test_timeout_is_not_waste_but_preemption_is() -> None:
    # Chained training jobs stop at the wall-clock limit on purpose and resume from a checkpoint;
    # a preempted attempt's work since its last checkpoint is lost.
    batch = billing_batch()
    line(batch, "80", 0, 1, resource_name="gpu-a", x_instance_type="p5.48xlarge")
    job("1", ["gpu-a"], "4", 0, 1, state="TIMEOUT")
    job("2", ["gpu-a"], "4", 0, 1, state="PREEMPTED")
    attribute()
    run = RunCost.objects.get()
    assert run.cost == Decimal("80")
    assert run.wasted_cost == Decimal("40")  # the preempted half only
    assert run.failed_jobs == 1


def test_a_cancelled_service_is_not_waste_but_a_cancelled_training_job_is() -> None:
    # scancel or a scale-down is how a server or runner stops (finops.waste counts it as a
    # completed attempt); a cancelled training attempt's work is thrown away.
    batch = billing_batch()
    line(batch, "80", 0, 1, resource_name="gpu-a", x_instance_type="p5.48xlarge")
    job("1", ["gpu-a"], "4", 0, 1, state="CANCELLED", run_id="runner", service=True)
    job("2", ["gpu-a"], "4", 0, 1, state="CANCELLED", run_id="train")
    attribute()
    runs = {r.run_id: (r.cost, r.wasted_cost, r.failed_jobs) for r in RunCost.objects.all()}
    assert runs == {
        "runner": (Decimal(40), Decimal(0), 0),
        "train": (Decimal(40), Decimal(40), 1),
    }


def test_rerun_gives_identical_rows(gpu_hour: GpuHour) -> None:
    attribute()
    first = ledger_snapshot()
    runs = list(RunCost.objects.values_list("run_id", "cost", "gpu_seconds", "jobs"))
    attribute()
    assert ledger_snapshot() == first
    assert list(RunCost.objects.values_list("run_id", "cost", "gpu_seconds", "jobs")) == runs
    assert AllocatedCost.objects.count() == 3
    assert TeamDailyCost.objects.count() == 2


def test_failed_run_leaves_the_previous_rows(
    gpu_hour: GpuHour, monkeypatch: pytest.MonkeyPatch
) -> None:
    attribute()
    before = ledger_snapshot()
    # New data arrives, then attribution breaks half way.
    line(gpu_hour["line"].batch, "5", 0, 1, resource_name="disk")

    def broken(
        lines: list[LineItem], jobs: list[Job], out: ShareFold, *, horizon: int | None = None,
        block: LineBlock | None = None,
    ) -> NoReturn:  # fmt: skip
        raise RuntimeError("engine exploded")

    # Either engine (FINOPS_ATTRIBUTION_ENGINE): the per-row one, or the vectorised one.
    monkeypatch.setattr(engine, "allocate_lines_into", broken)
    monkeypatch.setattr(partial, "allocate_lines_vector", broken)
    with pytest.raises(CommandError, match="engine exploded"):
        attribute()
    latest = AttributionRun.objects.order_by("-id").first()
    assert latest is not None
    assert latest.status == AttributionRun.Status.FAILED
    assert "engine exploded" in latest.error
    assert ledger_snapshot() == before
    assert RunCost.objects.count() == 1


def test_team_rules_tags_and_unallocated(team: Team, other_team: Team) -> None:
    batch = billing_batch()
    MappingRule.objects.create(kind="tag", key="project", value="llm", team=team, priority=10)
    MappingRule.objects.create(kind="sub_account", value="sub-9", team=other_team, priority=20)
    MappingRule.objects.create(kind="slurm_account", value="acct-x", team=other_team)
    ruled = line(batch, "10", 0, 24, service_name="S3", tags={"project": "llm", "team": "zzz"})
    by_sub = line(batch, "3", 0, 24, service_name="S3", sub_account_id="sub-9")
    tagged = line(batch, "4", 0, 24, service_name="EFS", tags={"finops:team": "Search Ranking"})
    untagged = line(batch, "2.5", 0, 24, service_name="S3")
    line(batch, "8", 0, 1, resource_name="gpu-b", x_instance_type="a3-highgpu-8g")
    mapped_job = job("5", ["gpu-b"], "8", 0, 1, account="acct-x")

    attribute()

    ledger = list(
        AllocatedCost.objects.values_list(
            "service_name", "sub_account_id", "amount", "category", "team__slug"
        )
    )

    def owner(item: CostLineItem) -> set[tuple[str, str]]:
        key = (item.service_name, item.sub_account_id, item.effective_cost)
        return {(cat, slug) for *row, cat, slug in ledger if tuple(row) == key}

    # The tag rule (priority 10) wins over the out-of-the-box `team` tag.
    assert owner(ruled) == {("tagged", "vision")}
    assert owner(by_sub) == {("tagged", "speech")}
    created = Team.objects.get(slug="search-ranking")
    assert created.name == "Search Ranking"
    assert owner(tagged) == {("tagged", "search-ranking")}
    assert owner(untagged) == {("unallocated", None)}
    assert not Team.objects.filter(slug="zzz").exists()
    assert AllocatedCost.objects.get(job=mapped_job).team == other_team
    assert not Team.objects.filter(slug="acct-x").exists()


def test_gpu_node_without_jobs_and_other_months_and_unfinished_batches() -> None:
    batch = billing_batch()
    line(batch, "30", 0, 24, resource_name="gpu-idle", x_instance_type="p4d.24xlarge")
    # Another month's invoice, and a batch still importing: neither is June's.
    line(batch, "999", 0, 1, billing_period=dt.date(2025, 7, 1))
    line(billing_batch(status=ImportBatch.Status.RUNNING), "777", 0, 1)

    attribute()

    assert list(AllocatedCost.objects.values_list("category", "node", "amount")) == [
        ("idle", "gpu-idle", Decimal(30))
    ]


def test_running_job_is_charged_to_date() -> None:
    batch = billing_batch()
    line(batch, "16", 0, 2, resource_name="gpu-a", x_instance_type="p5.48xlarge")
    running = job("9", ["gpu-a"], "8", 1, None, state="RUNNING")
    attribute()
    # Running from 01:00 to the end of the 2 h charge period: half of $16.
    assert AllocatedCost.objects.get(job=running).amount == Decimal(8)
    run = RunCost.objects.get()
    assert (run.running_jobs, run.last_end, run.gpu_hours) == (1, None, 8)


def _scenario(lines: int) -> None:
    batch = billing_batch()
    for i in range(lines):
        line(batch, "2", i, i + 1, resource_name=f"gpu-{i % 3}", x_instance_type="p5.48xlarge")
        line(batch, "1", i, i + 1, service_name="S3", tags={"team": f"t{i % 2}"})
    for i in range(lines):
        job(str(i), [f"gpu-{i % 3}"], "2", i, i + 0.5, account=f"acct{i % 2}", run_id=f"r{i % 4}")


def test_query_count_does_not_grow_with_rows(
    django_assert_max_num_queries: DjangoAssertNumQueries,
) -> None:
    _scenario(2)
    with CaptureQueriesContext(connection) as small:
        attribution_month_run(month=MONTH)
    CostLineItem.objects.all().delete()
    JobRecord.objects.all().delete()
    _scenario(40)
    with django_assert_max_num_queries(len(small.captured_queries)):
        attribution_month_run(month=MONTH)
    assert AllocatedCost.objects.filter(category="training").count() == 40


def test_bad_month_is_refused() -> None:
    with pytest.raises(CommandError):
        attribute("2025-13")


def test_open_months_attributes_months_with_line_items() -> None:
    batch = billing_batch()
    this_month = timezone.now().date().replace(day=1)
    start = dt.datetime.combine(this_month, dt.time(), tzinfo=dt.UTC)
    CostLineItem.objects.create(
        batch=batch, source="aws", billing_period=this_month, billing_period_start=start,
        charge_period_start=start, charge_period_end=start + dt.timedelta(hours=1),
        billed_cost=Decimal(1), effective_cost=Decimal(1), billing_currency="USD",
    )  # fmt: skip
    assert pipeline_open_months() == [month_format(this_month)]
    assert AttributionRun.objects.get().billing_period == this_month
    assert AllocatedCost.objects.get().amount == Decimal(1)


def test_a_ledger_that_does_not_add_up_is_never_written(
    gpu_hour: GpuHour, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = engine.allocate_lines_into

    def loses_a_share(
        lines: list[LineItem], jobs: list[Job], out: ShareFold, *, horizon: int | None = None,
        block: LineBlock | None = None,
    ) -> None:  # fmt: skip
        # The lines read as columns (PostgreSQL) too, as the vectorised engine takes them.
        every = sorted([*lines, *(block.items() if block is not None else [])], key=lambda x: x.id)
        shares: list[Share] = []
        real(every, jobs, shares, horizon=horizon)
        fold_shares(every, shares[1:], out)

    monkeypatch.setattr(engine, "allocate_lines_into", loses_a_share)
    monkeypatch.setattr(partial, "allocate_lines_vector", loses_a_share)  # either engine
    with pytest.raises(ConservationError):
        attribution_month_run(month=MONTH)
    assert AllocatedCost.objects.count() == 0
    assert AttributionRun.objects.get().status == AttributionRun.Status.FAILED
