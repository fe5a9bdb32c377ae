"""ListCost and ContractedCost attributed exactly as EffectiveCost (issue 13).

Engine: every column conserves per line item (and per ledger group, where spread idle pools
lines), and a share's on-demand part is never below its cost part when its line's ListCost is
not below its EffectiveCost. Service: the ledger and the rollups sum each column to the bill,
the on-demand equivalent of a line without ListCost is the catalogue price x hours (flagged), and
the pricing mix follows PricingCategory.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Callable
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from billing_ingest.models import CostLineItem, ImportBatch, JobRecord
from finops.attribution.engine import TAGGED, UNALLOCATED, Job, LineItem, allocate
from finops.attribution.inputs import list_cost
from finops.attribution.models import AllocatedCost, RunCost, TeamDailyCost
from finops.attribution.services import attribution_month_run
from finops.core.money import MONEY_PLACES, MoneySum
from tests.strategies import BASE, DIMS, JobSpec, LineSpec, jobs, line_items, pools

units = st.one_of(
    st.integers(min_value=-(10**16), max_value=10**16), st.integers(min_value=-50, max_value=50)
)


def _money(value: int) -> Decimal:
    return Decimal(value).scaleb(-MONEY_PLACES)


@settings(max_examples=250, deadline=None)
@given(
    job_specs=st.lists(jobs(), max_size=10),
    line_specs=st.lists(st.tuples(line_items(), units, units), min_size=1, max_size=10),
    spread=pools,
)
def test_every_column_conserves_and_list_never_drops_below_cost(
    job_specs: list[JobSpec], line_specs: list[tuple[LineSpec, int, int]], spread: dict[str, str]
) -> None:
    job_inputs = [
        Job(id=i + 1, nodes=tuple(nodes), start=BASE + start,
            end=None if end is None else BASE + end, gpu_micros=int(g * 10**6),
            team_id=(i % 3) + 1)
        for i, (start, end, g, nodes) in enumerate(job_specs)
    ]  # fmt: skip
    lines = []
    for i, (spec, list_extra, contracted_extra) in enumerate(line_specs):
        start, end, cost, node, gpu_count, kind, dims, shared = spec
        # ListCost above cost by a non-negative amount for most lines, below for some.
        list_value = cost + _money(abs(list_extra) if i % 4 else list_extra)
        lines.append(
            LineItem(
                i + 1, BASE + start, BASE + end, cost, node, gpu_count,
                TAGGED if kind == "tagged" else UNALLOCATED, 7 if kind == "tagged" else None,
                group=DIMS.index(dims), provider=dims[0], currency=dims[2],
                spread_pool=spread.get(node) if node else None, shared=shared,
                list_cost=list_value, contracted_cost=cost + _money(contracted_extra),
            )
        )  # fmt: skip

    shares = allocate(lines, job_inputs)

    per_line: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0])
    per_group: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0])
    for share in shares:
        line = lines[share.line_id - 1]
        for acc in (per_line[share.line_id], per_group[line.group]):
            acc[0] += share.units
            acc[1] += share.list_units
            acc[2] += share.contracted_units
        if line.spread_pool is None and line.list_cost >= line.cost:
            assert share.list_units >= share.units
    billed_group: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0])
    for line in lines:
        columns = [int(v.scaleb(MONEY_PLACES)) for v in (line.cost, line.list_cost,
                                                         line.contracted_cost)]  # fmt: skip
        if line.spread_pool is None:
            assert per_line.get(line.id, [0, 0, 0]) == columns
        for i, value in enumerate(columns):
            billed_group[line.group][i] += value
    nonzero = lambda d: {k: v for k, v in d.items() if any(v)}  # noqa: E731
    assert nonzero(per_group) == nonzero(billed_group)


def test_equal_columns_split_identically() -> None:
    """An on-demand line (ListCost == EffectiveCost) gives every share equal columns."""
    line = LineItem(1, BASE, BASE + 3600, Decimal("10"), "n0", 8, list_cost=Decimal("10"),
                    contracted_cost=Decimal("10"))  # fmt: skip
    jobs_ = [Job(id=j, nodes=("n0",), start=BASE, end=BASE + 1000 * j, gpu_micros=10**6)
             for j in (1, 2, 3)]  # fmt: skip
    shares = allocate([line], jobs_)
    assert all(s.units == s.list_units == s.contracted_units for s in shares)


# --- the service: ledger, rollups, catalogue fallback, mix ------------------------------------

MONTH = dt.date(2025, 6, 1)
T0 = dt.datetime(2025, 6, 3, tzinfo=dt.UTC)


def _hour(h: float) -> dt.datetime:
    return T0 + dt.timedelta(hours=h)


@pytest.fixture
def month_data(db: None) -> Callable[..., CostLineItem]:
    billing = ImportBatch.objects.create(
        kind="billing", format="focus", source="s", file_name="f", status="succeeded"
    )
    jobs_batch = ImportBatch.objects.create(
        kind="jobs", format="slurm", source="c", file_name="j", status="succeeded"
    )

    def line(cost: str, *, node: str = "gpu-1", list_cost: str | None = None,
             pricing: str = "Standard", charge: str = "Usage", contracted: str | None = None,
             sku: str = "", instance: str = "p5.48xlarge",
             hours: tuple[int, int] = (0, 1)) -> CostLineItem:  # fmt: skip
        return CostLineItem.objects.create(
            batch=billing, source="s", billing_period=MONTH, billing_period_start=_hour(-50),
            provider_name="AWS", billing_account_id="1", billing_currency="USD",
            charge_period_start=_hour(hours[0]), charge_period_end=_hour(hours[1]),
            charge_category=charge, pricing_category=pricing, resource_name=node,
            x_instance_type=instance, billed_cost=Decimal(cost), effective_cost=Decimal(cost),
            list_cost=None if list_cost is None else Decimal(list_cost),
            contracted_cost=None if contracted is None else Decimal(contracted), sku_id=sku,
            consumed_quantity=Decimal(hours[1] - hours[0]), consumed_unit="Hrs",
        )  # fmt: skip

    # A job holding 2 of 8 GPUs for the first hour on gpu-1 and gpu-2.
    JobRecord.objects.create(
        batch=jobs_batch, cluster="c", job_id="1", account="a", state="COMPLETED",
        start=_hour(0), end=_hour(1), gpus=4, nodes=["gpu-1", "gpu-2"], run_id="run-a",
    )  # fmt: skip
    return line


def test_ledger_and_rollups_sum_each_column_to_the_bill(
    month_data: Callable[..., CostLineItem],
) -> None:
    # gpu-1: reserved hour, $60 paid, $98.32 on demand; gpu-2: spot, $30 paid, $98.32 on demand.
    month_data("60", list_cost="98.32", contracted="90", pricing="Committed")
    month_data("30", node="gpu-2", list_cost="98.32", pricing="Dynamic")
    attribution_month_run(month=MONTH)

    ledger = AllocatedCost.objects.filter(billing_period=MONTH)
    assert ledger.aggregate(s=MoneySum("list_cost"))["s"] == Decimal("196.64")
    assert ledger.aggregate(s=MoneySum("contracted_cost"))["s"] == Decimal("90")
    # The job holds 2 of 8 GPUs on each node for the whole hour: a quarter of each line.
    run = RunCost.objects.get(run_id="run-a")
    assert run.cost == Decimal("15") + Decimal("7.5")
    assert run.list_cost == Decimal("98.32") / 4 * 2
    assert run.contracted_cost == Decimal("22.5")
    assert (run.cost_commitment, run.cost_spot, run.cost_on_demand, run.cost_other) == (
        Decimal("15"), Decimal("7.5"), 0, 0,
    )  # fmt: skip
    assert run.list_cost_estimated == 0
    daily = TeamDailyCost.objects.filter(billing_period=MONTH)
    assert daily.aggregate(s=MoneySum("list_cost"))["s"] == Decimal("196.64")
    assert daily.aggregate(s=MoneySum("cost_spot"))["s"] == Decimal("30")


def test_missing_list_cost_uses_the_catalogue_price_and_says_so(
    month_data: Callable[..., CostLineItem], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(list_cost, "_sources", [])
    list_cost.register_list_price_source(
        lambda provider, itype, region: Decimal("50.5") if itype == "p5.48xlarge" else None
    )
    # Two hours without ListCost: 2 x $50.5 from the catalogue.
    month_data("80", hours=(0, 2))
    # No catalogue price for this type: the actual cost stands in (no savings claimed).
    month_data("7", node="cpu-1", instance="m5.large")
    # A purchase carries no on-demand equivalent (its usage rows do).
    month_data("0", node="", instance="", charge="Purchase", list_cost="1000")
    attribution_month_run(month=MONTH)

    by_source = dict(
        AllocatedCost.objects.values_list("list_cost_source")
        .annotate(s=MoneySum("list_cost"))
        .order_by()
    )
    # The purchase (cost 0, on-demand equivalent 0) leaves no ledger row at all.
    assert by_source == {"catalogue": Decimal("101"), "unpriced": Decimal("7")}
    # The run's quarter of the first hour: 50.5 / 4, all of it an estimate.
    run = RunCost.objects.get(run_id="run-a")
    assert run.list_cost == run.list_cost_estimated == Decimal("12.625")


def test_spot_usage_type_counts_as_spot_without_dynamic() -> None:
    mix = list_cost.pricing_mix
    assert mix(pricing_category="", sku_id="USE1-SpotUsage:p5.48xlarge",
               commitment_discount_id="") == "spot"  # fmt: skip
    assert mix(pricing_category="Standard", sku_id="", commitment_discount_id="arn:ri") == (
        "commitment"
    )
    assert mix(pricing_category="Standard", sku_id="", commitment_discount_id="") == "on_demand"
    assert mix(pricing_category="", sku_id="", commitment_discount_id="") == "other"


@pytest.mark.django_db
@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    job_specs=st.lists(jobs(), max_size=6),
    line_specs=st.lists(st.tuples(line_items(), st.integers(0, 10**15)), min_size=1, max_size=6),
)
def test_actual_never_above_on_demand_where_list_cost_covers_it(
    job_specs: list[JobSpec], line_specs: list[tuple[LineSpec, int]]
) -> None:
    """Every line with ListCost >= EffectiveCost >= 0: every run and team-day has on-demand
    >= actual (the rollups of the real service)."""
    AllocatedCost.objects.all().delete()
    ImportBatch.objects.all().delete()
    billing = ImportBatch.objects.create(
        kind="billing", format="focus", source="s", file_name="f", status="succeeded"
    )
    job_batch = ImportBatch.objects.create(
        kind="jobs", format="slurm", source="c", file_name="j", status="succeeded"
    )
    at = lambda s: dt.datetime.fromtimestamp(BASE + s, tz=dt.UTC)  # noqa: E731
    JobRecord.objects.bulk_create(
        JobRecord(batch=job_batch, cluster="c", job_id=str(i), account="a", state="COMPLETED",
                  start=at(start), end=None if end is None else at(end), gpus=g, nodes=nodes,
                  run_id=f"r{i % 2}")
        for i, (start, end, g, nodes) in enumerate(job_specs)
    )  # fmt: skip
    CostLineItem.objects.bulk_create(
        CostLineItem(
            batch=billing, source="s", billing_period=MONTH, billing_period_start=at(0),
            provider_name=dims[0], billing_account_id=dims[1], billing_currency=dims[2],
            charge_period_start=at(start), charge_period_end=at(end), billed_cost=abs(cost),
            effective_cost=abs(cost), list_cost=abs(cost) + _money(extra),
            resource_name=node or "", x_instance_type="p5.48xlarge" if gpu_count == 8 else "",
            tags={"team": "ml"} if kind == "tagged" else {},
        )
        for (start, end, cost, node, gpu_count, kind, dims, _), extra in line_specs
    )  # fmt: skip
    attribution_month_run(month=MONTH)
    for run in RunCost.objects.all():
        assert run.list_cost >= run.cost
    for daily in TeamDailyCost.objects.all():
        assert daily.list_cost >= daily.amount
