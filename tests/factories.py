"""factory-boy factories for rows the pages and API read. Amounts are Decimal, times UTC."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import factory
from django.contrib.auth.models import User

from billing_ingest.models import CostLineItem, ImportBatch, JobRecord
from finops.attribution.models import AllocatedCost, Category, RunCost, TeamDailyCost
from finops.core.months import month_format
from finops.inference.models import InferenceUsage
from finops.org.models import Profile, Team

MONTH = dt.date(2025, 9, 1)
UTC = dt.UTC


class TeamFactory(factory.django.DjangoModelFactory[Team]):
    class Meta:
        model = Team
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"team-{n}")
    name = factory.LazyAttribute(lambda o: o.slug.replace("-", " ").title())


class UserFactory(factory.django.DjangoModelFactory[User]):
    class Meta:
        model = User

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.django.Password("pw-123456789")


class ProfileFactory(factory.django.DjangoModelFactory[Profile]):
    class Meta:
        model = Profile
        skip_postgeneration_save = True

    user = factory.SubFactory(UserFactory)
    role = Profile.Role.TEAM_LEAD

    @factory.post_generation
    def teams(obj: Profile, create: bool, extracted: list[Team] | None, **kwargs: Any) -> None:
        if create and extracted:
            obj.teams.add(*extracted)


class ImportBatchFactory(factory.django.DjangoModelFactory[ImportBatch]):
    class Meta:
        model = ImportBatch

    kind = ImportBatch.Kind.BILLING
    format = "focus"
    source = factory.Sequence(lambda n: f"source-{n}")
    file_name = factory.LazyAttribute(lambda o: f"/data/{o.source}.csv")
    status = ImportBatch.Status.SUCCEEDED
    billing_periods = factory.LazyFunction(lambda: [month_format(MONTH)])
    row_count = 0


class CostLineItemFactory(factory.django.DjangoModelFactory[CostLineItem]):
    class Meta:
        model = CostLineItem

    batch = factory.SubFactory(ImportBatchFactory)
    source = factory.LazyAttribute(lambda o: o.batch.source)
    billing_period = MONTH
    billing_period_start = factory.LazyAttribute(
        lambda o: dt.datetime.combine(o.billing_period, dt.time(), tzinfo=UTC)
    )
    provider_name = "AWS"
    billing_account_id = "111111111111"
    charge_period_start = factory.LazyAttribute(lambda o: o.billing_period_start)
    charge_period_end = factory.LazyAttribute(
        lambda o: o.billing_period_start + dt.timedelta(hours=1)
    )
    charge_category = "Usage"
    pricing_category = "Standard"
    service_name = "Amazon Elastic Compute Cloud"
    resource_id = factory.Sequence(lambda n: f"i-{n:08x}")
    billed_cost = Decimal("10")
    effective_cost = Decimal("10")
    billing_currency = "USD"


class JobRecordFactory(factory.django.DjangoModelFactory[JobRecord]):
    class Meta:
        model = JobRecord

    batch = factory.SubFactory(ImportBatchFactory, kind=ImportBatch.Kind.JOBS, format="slurm")
    cluster = "hpc1"
    job_id = factory.Sequence(lambda n: str(1000 + n))
    state = "COMPLETED"
    start = dt.datetime(2025, 9, 3, 8, tzinfo=UTC)
    end = dt.datetime(2025, 9, 3, 12, tzinfo=UTC)
    gpus = Decimal(8)
    nodes = factory.LazyFunction(lambda: ["gpu-node-01"])
    run_id = "run-a"


class AllocatedCostFactory(factory.django.DjangoModelFactory[AllocatedCost]):
    class Meta:
        model = AllocatedCost

    billing_period = MONTH
    day = dt.date(2025, 9, 3)
    category = Category.TRAINING
    team = factory.SubFactory(TeamFactory)
    provider_name = "AWS"
    billing_account_id = "111111111111"
    service_name = "Amazon Elastic Compute Cloud"
    billing_currency = "USD"
    amount = Decimal("1")
    gpu_seconds = Decimal(0)


class RunCostFactory(factory.django.DjangoModelFactory[RunCost]):
    class Meta:
        model = RunCost

    billing_period = MONTH
    team = factory.SubFactory(TeamFactory)
    run_id = factory.Sequence(lambda n: f"run-{n}")
    cluster = "hpc1"
    cost = Decimal("100")
    wasted_cost = Decimal(0)
    gpu_seconds = Decimal(36000)
    jobs = 1
    failed_jobs = 0
    billing_currency = "USD"


class TeamDailyCostFactory(factory.django.DjangoModelFactory[TeamDailyCost]):
    class Meta:
        model = TeamDailyCost

    billing_period = MONTH
    day = dt.date(2025, 9, 3)
    team = factory.SubFactory(TeamFactory)
    category = Category.TRAINING
    provider_name = "AWS"
    billing_currency = "USD"
    amount = Decimal("1")


# --- serving endpoints: pods, their ledger rows and their hourly usage ---------------------------


def serving_pod(name: str, endpoint: str, node: str = "gpu-node-01") -> JobRecord:
    """A pod of the `serving` namespace on cluster k8s-1 behind `endpoint`."""
    return JobRecordFactory.create(
        cluster="k8s-1",
        job_id=f"serving/{name}",
        namespace="serving",
        endpoint=endpoint,
        nodes=[node],
        run_id="",
    )


def ledger_row(
    job: JobRecord | None,
    team: Team | None,
    day: dt.date,
    amount: str,
    node: str = "gpu-node-01",
    category: str = Category.INFERENCE,
) -> AllocatedCost:
    return AllocatedCostFactory.create(
        job=job, team=team, day=day, amount=Decimal(amount), node=node, category=category
    )


def usage_hour(
    batch: ImportBatch,
    endpoint: str,
    day: dt.date,
    hour: int,
    requests: int,
    prompt: int,
    generation: int,
    pod: str = "",
) -> InferenceUsage:
    """One hour of an endpoint's counters (a pod's when `pod` is given) from `hour`:00 UTC."""
    start = dt.datetime.combine(day, dt.time(hour), UTC)
    return InferenceUsage.objects.create(
        batch=batch,
        cluster="k8s-1",
        endpoint=endpoint,
        namespace="serving" if pod else "",
        pod=pod,
        window_start=start,
        window_end=start + dt.timedelta(hours=1),
        requests=requests,
        prompt_tokens=prompt,
        generation_tokens=generation,
    )


# --- a consistent month of data ------------------------------------------------------------


@dataclass
class Scenario:
    """Rows of one billing month, built so that the ledger adds up to the bill per account."""

    month: dt.date
    team: Team
    other_team: Team
    line_items: list[CostLineItem] = field(default_factory=list)
    allocations: list[AllocatedCost] = field(default_factory=list)
    runs: list[RunCost] = field(default_factory=list)
    jobs: list[JobRecord] = field(default_factory=list)
    # The run with a "/" and a space in its id, owned by `team` (set by build_month_scenario).
    run: RunCost = field(init=False)


def _rollup_daily(allocations: list[AllocatedCost]) -> list[TeamDailyCost]:
    """TeamDailyCost as attribution would derive it: the ledger summed by team/day/category."""
    sums: dict[tuple, Decimal] = defaultdict(Decimal)
    for a in allocations:
        key = (a.billing_period, a.day, a.team_id, a.category, a.provider_name, a.billing_currency)
        sums[key] += a.amount
    return [
        TeamDailyCost.objects.create(
            billing_period=period,
            day=day,
            team_id=team_id,
            category=category,
            provider_name=provider,
            billing_currency=currency,
            amount=amount,
        )
        for (period, day, team_id, category, provider, currency), amount in sums.items()
    ]


def build_month_scenario(*, team: Team, other_team: Team, month: dt.date = MONTH) -> Scenario:
    """Two USD accounts (AWS, GCP) and one EUR account (Azure), fully attributed.

    AWS 111111111111 USD: billed 1000.50 + 200.25 = 1200.75 (cash 1400.25)
    GCP billing-1   USD: billed 300.125
    Azure az-1      EUR: billed 50
    """
    sc = Scenario(month=month, team=team, other_team=other_team)
    batch = ImportBatchFactory.create(source="aws-cur", billing_periods=[month_format(month)])
    aws = {"provider_name": "AWS", "billing_account_id": "111111111111"}
    gcp = {"provider_name": "GCP", "billing_account_id": "billing-1"}
    azure = {"provider_name": "Azure", "billing_account_id": "az-1"}
    for kwargs in (
        {**aws, "effective_cost": Decimal("1000.50"), "billed_cost": Decimal("1200.00")},
        {**aws, "effective_cost": Decimal("200.25"), "billed_cost": Decimal("200.25")},
        {**gcp, "effective_cost": Decimal("300.125"), "billed_cost": Decimal("300.125")},
        {
            **azure,
            "effective_cost": Decimal("50"),
            "billed_cost": Decimal("50"),
            "billing_currency": "EUR",
        },
    ):
        sc.line_items.append(
            CostLineItemFactory.create(batch=batch, billing_period=month, **kwargs)
        )

    run_id = "llama/7b v2"
    job_ok = JobRecordFactory.create(
        job_id="5001",
        run_id=run_id,
        state="COMPLETED",
        nodes=["gpu-node-01", "gpu-node-02"],
        gpus=Decimal(16),
    )
    job_failed = JobRecordFactory.create(job_id="5002", run_id=run_id, state="FAILED")
    job_other = JobRecordFactory.create(job_id="6001", run_id="asr-1")
    sc.jobs = [job_ok, job_failed, job_other]

    day1 = month.replace(day=3)
    day2 = month.replace(day=4)
    ledger: list[dict[str, Any]] = [
        # AWS USD: 400.25 + 100 + 300 + 50 + 150.50 + 120 + 80 = 1200.75
        {
            **aws,
            "day": day1,
            "category": Category.TRAINING,
            "team": team,
            "job": job_ok,
            "run_id": run_id,
            "amount": Decimal("400.25"),
            "gpu_seconds": Decimal(28800),
        },
        {
            **aws,
            "day": day2,
            "category": Category.TRAINING,
            "team": team,
            "job": job_failed,
            "run_id": run_id,
            "amount": Decimal("100.00"),
            "gpu_seconds": Decimal(7200),
        },
        {
            **aws,
            "day": day1,
            "category": Category.TRAINING,
            "team": other_team,
            "job": job_other,
            "run_id": "asr-1",
            "amount": Decimal("300.00"),
            "gpu_seconds": Decimal(14400),
        },
        {**aws, "day": day2, "category": Category.TAGGED, "team": team, "amount": Decimal("50.00")},
        {
            **aws,
            "day": day1,
            "category": Category.SHARED,
            "team": None,
            "amount": Decimal("150.50"),
        },
        {
            **aws,
            "day": day1,
            "category": Category.IDLE,
            "team": None,
            "node": "gpu-node-03",
            "amount": Decimal("120.00"),
        },
        {
            **aws,
            "day": day2,
            "category": Category.UNALLOCATED,
            "team": None,
            "amount": Decimal("80.00"),
        },
        # GCP USD: 200.125 + 100 = 300.125
        {
            **gcp,
            "day": day1,
            "category": Category.INFERENCE,
            "team": other_team,
            "amount": Decimal("200.125"),
        },
        {
            **gcp,
            "day": day2,
            "category": Category.IDLE,
            "team": team,
            "node": "a3-node-1",
            "amount": Decimal("100.00"),
        },
        # Azure EUR: 50
        {
            **azure,
            "day": day1,
            "category": Category.UNALLOCATED,
            "team": None,
            "amount": Decimal("50"),
            "billing_currency": "EUR",
        },
    ]
    for kwargs in ledger:
        sc.allocations.append(
            AllocatedCostFactory.create(billing_period=month, source_batch=batch, **kwargs)
        )
    _rollup_daily(sc.allocations)

    sc.run = RunCostFactory.create(
        billing_period=month,
        team=team,
        run_id=run_id,
        cost=Decimal("500.25"),
        wasted_cost=Decimal("100.00"),
        gpu_seconds=Decimal(36000),
        jobs=2,
        failed_jobs=1,
    )
    other_run = RunCostFactory.create(
        billing_period=month,
        team=other_team,
        run_id="asr-1",
        cost=Decimal("300.00"),
        gpu_seconds=Decimal(14400),
        jobs=1,
    )
    sc.runs = [sc.run, other_run]
    return sc
