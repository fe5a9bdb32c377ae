"""Conservation (DESIGN section 5.7) as a property: whatever the nodes, jobs and line items, every
line item's shares sum exactly to its EffectiveCost, hence every provider/account/currency total
of the ledger equals the bill's."""

from __future__ import annotations

import calendar
import datetime as dt
from collections import defaultdict
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from billing_ingest.models import MONEY_PLACES, CostLineItem, ImportBatch, JobRecord
from finops.attribution.engine import (
    EVEN,
    FIXED,
    GPU_SPEND,
    IDLE,
    SHARED,
    TAGGED,
    TRAINING,
    UNALLOCATED,
    Job,
    LineItem,
    SharedRule,
    allocate,
)
from finops.attribution.ledger_selectors import month_conservation
from finops.attribution.models import AllocatedCost, IdlePolicy, SharedCostRule, SharedCostSplit
from finops.attribution.services import attribution_month_run
from finops.org.models import Team

BASE = calendar.timegm(dt.datetime(2025, 6, 1).timetuple())
HORIZON = 3 * 86400  # three days of activity keeps examples small and still crosses midnights
NODES = ["n0", "n1", "n2", "n3"]
DIMS = [("AWS", "111", "USD"), ("AWS", "222", "USD"), ("GCP", "g1", "EUR")]
# Idle policy per node: None (keep) or a spread pool; shared rule per unallocated line.
pools = st.dictionaries(st.sampled_from([*NODES, "lonely"]), st.sampled_from(["p1", "p2"]))
shared_rules = st.one_of(
    st.none(),
    st.just(SharedRule(EVEN)),
    st.just(SharedRule(GPU_SPEND)),
    st.lists(
        st.tuples(st.integers(min_value=1, max_value=9), st.integers(min_value=0, max_value=10**8)),
        max_size=3,
    ).map(lambda rows: SharedRule(FIXED, tuple(rows))),
)

seconds = st.integers(min_value=0, max_value=HORIZON)
gpus = st.one_of(
    st.integers(min_value=1, max_value=16).map(Decimal),
    st.decimals(min_value=Decimal("0.000001"), max_value=Decimal(9), places=6),
)


@st.composite
def jobs(draw):
    start = draw(seconds)
    running = draw(st.booleans()) and draw(st.booleans())
    end = None if running else start + draw(st.integers(min_value=-60, max_value=40 * 3600))
    nodes = draw(st.lists(st.sampled_from(NODES), min_size=1, max_size=3, unique=True))
    return start, end, draw(gpus), nodes


@st.composite
def line_items(draw):
    shape = draw(st.sampled_from(["hourly", "daily", "partial", "long", "instant"]))
    if shape == "hourly":
        start = draw(st.integers(min_value=0, max_value=HORIZON // 3600)) * 3600
        end = start + 3600
    elif shape == "daily":
        start = draw(st.integers(min_value=0, max_value=2)) * 86400
        end = start + 86400
    elif shape == "partial":
        start = draw(seconds)
        end = start + draw(st.integers(min_value=1, max_value=5 * 3600))
    elif shape == "long":
        start = draw(seconds)
        end = start + draw(st.integers(min_value=86400, max_value=4 * 86400))
    else:
        start = end = draw(seconds)
    # Amounts in units of 10^-12: up to a million dollars with all 12 decimals (more significant
    # digits than a float holds), and tiny ones that do not divide evenly.
    units = draw(
        st.one_of(
            st.integers(min_value=-(10**18), max_value=10**18),
            st.integers(min_value=-50, max_value=50),
            st.just(0),
        )
    )
    cost = Decimal(units).scaleb(-MONEY_PLACES)
    kind = draw(st.sampled_from(["node", "node", "tagged", "untagged"]))
    node = draw(st.sampled_from([*NODES, "lonely"])) if kind == "node" else None
    gpu_count = draw(st.sampled_from([None, 1, 4, 8])) if node else None
    dims = draw(st.sampled_from(DIMS))
    shared = draw(shared_rules) if kind == "untagged" else None
    return start, end, cost, node, gpu_count, kind, dims, shared


@settings(max_examples=300, deadline=None)
@given(
    job_specs=st.lists(jobs(), max_size=12),
    line_specs=st.lists(line_items(), min_size=1, max_size=12),
    spread=pools,
)
def test_engine_conserves_every_line_item(job_specs, line_specs, spread):
    job_inputs = [
        Job(
            id=i + 1,
            nodes=tuple(nodes),
            start=BASE + start,
            end=None if end is None else BASE + end,
            gpu_micros=int(g * 10**6),
            team_id=(i % 3) + 1,
        )
        for i, (start, end, g, nodes) in enumerate(job_specs)
    ]
    lines = []
    for i, (start, end, cost, node, gpu_count, kind, dims, shared) in enumerate(line_specs):
        category = TAGGED if kind == "tagged" else UNALLOCATED
        team = 7 if kind == "tagged" else None
        provider, _, currency = dims
        lines.append(
            LineItem(
                i + 1, BASE + start, BASE + end, cost, node, gpu_count, category, team,
                group=DIMS.index(dims), provider=provider, currency=currency,
                spread_pool=spread.get(node) if node else None, shared=shared,
            )
        )  # fmt: skip

    shares = allocate(lines, job_inputs)

    per_line: dict[int, Decimal] = defaultdict(Decimal)
    per_group: dict[tuple[str, str, str], Decimal] = defaultdict(Decimal)
    spread_lines = {line.id for line in lines if line.spread_pool is not None}
    for share in shares:
        amount = share.amount
        line = lines[share.line_id - 1]
        assert amount.as_tuple().exponent >= -MONEY_PLACES
        per_line[share.line_id] += amount
        per_group[line_specs[share.line_id - 1][6]] += amount
        if share.category == TRAINING:
            assert share.job_id is not None and share.node
        elif share.category == IDLE and share.job_id is not None:
            # Spread idle: pooled per (pool, day, group), booked on a line of that group.
            assert share.node == "" and line.spread_pool is not None
            continue
        elif share.category == IDLE:
            assert share.node
        elif share.category == SHARED:
            assert line.shared is not None and share.team_id is not None and share.node == ""
        else:
            assert share.node == "" and share.job_id is None
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
    job_specs, line_specs, idle_policies, rule_specs
):
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
