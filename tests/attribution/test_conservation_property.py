"""Conservation (DESIGN section 5.7) as a property: whatever the nodes, jobs and line items, every
line item's shares sum exactly to its EffectiveCost, hence every provider/account/currency total
of the ledger equals the bill's."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from billing_ingest.models import CostLineItem, ImportBatch, JobRecord
from finops.attribution.engine import (
    IDLE,
    SHARED,
    TRAINING,
    allocate,
)
from finops.attribution.models import AllocatedCost, IdlePolicy, SharedCostRule, SharedCostSplit
from finops.attribution.selectors.ledger import month_conservation
from finops.attribution.services import attribution_month_run
from finops.core.money import MONEY_PLACES
from finops.org.models import Team
from tests.strategies import (
    BASE,
    JobSpec,
    LineSpec,
    engine_examples,
    engine_inputs,
    jobs,
    line_items,
)


@engine_examples
def test_engine_conserves_every_line_item(
    job_specs: list[JobSpec], line_specs: list[LineSpec], spread: dict[str, str]
) -> None:
    lines, job_inputs = engine_inputs(job_specs, line_specs, spread)

    shares = allocate(lines, job_inputs)

    per_line: dict[int, Decimal] = defaultdict(Decimal)
    per_group: dict[tuple[str, str, str], Decimal] = defaultdict(Decimal)
    spread_lines = {line.id for line in lines if line.spread_pool is not None}
    for share in shares:
        amount = share.amount
        line = lines[share.line_id - 1]
        exponent = amount.as_tuple().exponent
        assert isinstance(exponent, int)
        assert exponent >= -MONEY_PLACES
        per_line[share.line_id] += amount
        per_group[line_specs[share.line_id - 1][6]] += amount
        if share.category == TRAINING:
            assert share.job_id is not None
            assert share.node
        elif share.category == IDLE and share.job_id is not None:
            # Spread idle: pooled per (pool, day, group), booked on a line of that group.
            assert share.node == ""
            assert line.spread_pool is not None
            continue
        elif share.category == IDLE:
            assert share.node
        elif share.category == SHARED:
            assert line.shared is not None
            assert share.team_id is not None
            assert share.node == ""
        else:
            assert share.node == ""
            assert share.job_id is None
        # A share never has the opposite sign of its line.
        assert amount * line.cost >= 0
    # Labels in --hypothesis-show-statistics: how often the policies really took effect.
    event(f"spread idle shares: {any(s.category == IDLE and s.job_id for s in shares)}")
    event(f"shared shares: {any(s.category == SHARED for s in shares)}")
    billed_group: dict[tuple[str, str, str], Decimal] = defaultdict(Decimal)
    for line, spec in zip(lines, line_specs, strict=True):
        if line.id not in spread_lines:
            # Every line not pooled by a spread policy sums exactly on its own.
            assert per_line.get(line.id, Decimal(0)) == line.cost
        billed_group[spec[6]] += line.cost
    assert {k: v for k, v in per_group.items() if v} == {k: v for k, v in billed_group.items() if v}
    # Deterministic: the same inputs give the same shares.
    assert allocate(lines, job_inputs) == shares


MONTH = dt.date(2025, 6, 1)


def _dt(offset: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(BASE + offset, tz=dt.UTC)


@pytest.mark.django_db
@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    job_specs=st.lists(jobs(), max_size=8),
    line_specs=st.lists(line_items(), min_size=1, max_size=8),
    idle_policies=st.lists(
        st.tuples(
            st.sampled_from(["", "c", "other"]),
            st.sampled_from(["", "n", "n1", "lonely"]),
            st.sampled_from(["keep", "spread", "platform"]),
            st.booleans(),
        ),
        max_size=3,
    ),
    rule_specs=st.lists(
        st.tuples(
            st.sampled_from(["", "AWS", "GCP"]),
            st.sampled_from(["even", "gpu_spend", "fixed"]),
            st.lists(st.integers(min_value=1, max_value=100), min_size=1, max_size=3),
        ),
        max_size=3,
    ),
)
def test_attribution_run_conserves_per_provider_account_currency(
    job_specs: list[JobSpec],
    line_specs: list[LineSpec],
    idle_policies: list[tuple[str, str, str, bool]],
    rule_specs: list[tuple[str, str, list[int]]],
) -> None:
    AllocatedCost.objects.all().delete()
    JobRecord.objects.all().delete()
    ImportBatch.objects.all().delete()
    IdlePolicy.objects.all().delete()
    SharedCostRule.objects.all().delete()
    platform, _ = Team.objects.get_or_create(slug="platform", defaults={"name": "Platform"})
    teams = [
        Team.objects.get_or_create(slug=f"t{i}", defaults={"name": f"T{i}"})[0] for i in range(3)
    ]
    for priority, (cluster, prefix, policy, owned) in enumerate(idle_policies):
        IdlePolicy.objects.create(
            cluster=cluster, node_prefix=prefix, policy=policy, priority=priority,
            owner_team=platform if owned else None,
        )  # fmt: skip
    for priority, (provider, method, percents) in enumerate(rule_specs):
        rule = SharedCostRule.objects.create(
            name=f"r{priority}", provider_name=provider, method=method, priority=priority
        )
        if method == "fixed":
            # Raw weights (the admin insists on 100; the engine normalises whatever is there).
            for team, percent in zip(teams, percents, strict=False):
                SharedCostSplit.objects.create(rule=rule, team=team, percent=percent)
    billing = ImportBatch.objects.create(
        kind="billing", format="focus", source="s", file_name="f", status="succeeded"
    )
    job_batch = ImportBatch.objects.create(
        kind="jobs", format="slurm", source="c", file_name="j", status="succeeded"
    )
    JobRecord.objects.bulk_create(
        JobRecord(
            batch=job_batch, cluster="c", job_id=str(i), account=f"acct{i % 2}", state="COMPLETED",
            start=_dt(start), end=None if end is None else _dt(end), gpus=g, nodes=nodes,
        )
        for i, (start, end, g, nodes) in enumerate(job_specs)
    )  # fmt: skip
    CostLineItem.objects.bulk_create(
        CostLineItem(
            batch=billing, source="s", billing_period=MONTH, billing_period_start=_dt(0),
            provider_name=provider, billing_account_id=account, billing_currency=currency,
            charge_period_start=_dt(start), charge_period_end=_dt(end), billed_cost=cost,
            effective_cost=cost, resource_name=node or "",
            x_instance_type="p5.48xlarge" if gpu_count == 8 else "",
            tags={"team": "ml"} if kind == "tagged" else {},
        )
        for start, end, cost, node, gpu_count, kind, (provider, account, currency), _ in line_specs
    )  # fmt: skip

    attribution_month_run(month=MONTH)

    checks = month_conservation(month=MONTH)
    assert checks
    assert all(entry["difference"] == 0 for entry in checks.values()), checks
