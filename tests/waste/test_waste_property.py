"""Waste by cause (issue 31) as properties: whatever a run's attempts, states, times, metrics and
costs, every part is >= 0 and the parts of an attempt (cancelled included) add to at most its
cost, so a run's parts add to at most its cost; after a real attribution of random jobs and
bills the ledger still conserves and every run's waste stays within its cost."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from billing_ingest.models import CostLineItem, ImportBatch, JobRecord
from finops.attribution.models import AllocatedCost, RunCost
from finops.attribution.selectors.ledger import month_conservation
from finops.attribution.services import attribution_month_run
from finops.economics.models import RunEconomics
from finops.economics.selectors import row_waste
from finops.economics.services import economics_refresh
from finops.org.models import Team
from finops.run_metrics.selectors import RunKey
from finops.waste.causes import (
    CAUSES,
    AttemptTimes,
    Metrics,
    Settings,
    WasteParts,
    attempt_shares,
    parts_of,
)
from finops.waste.selectors import run_wastes, team_month_waste
from tests.scenario_setup import economics_against_read_time
from tests.strategies import BASE, JobSpec, jobs

STATES = ["COMPLETED", "TIMEOUT", "RUNNING", "CANCELLED", "FAILED", "PREEMPTED", "NODE_FAIL",
          "OUT_OF_MEMORY", "REQUEUED"]  # fmt: skip
T0 = dt.datetime(2025, 6, 3, tzinfo=dt.UTC)
minutes = st.integers(min_value=0, max_value=600)


@st.composite
def attempt_lists(draw: st.DrawFn) -> list[AttemptTimes]:
    result = []
    for pk in range(draw(st.integers(min_value=0, max_value=6))):
        start = draw(st.one_of(st.none(), minutes))
        length = draw(st.one_of(st.none(), st.integers(min_value=-5, max_value=300)))
        util = draw(st.one_of(st.none(), st.fractions(min_value=0, max_value=1)))
        seconds = draw(st.integers(0, 59))
        begin = None if start is None else T0 + dt.timedelta(minutes=start)
        end = None
        if begin is not None and length is not None:
            end = begin + dt.timedelta(minutes=length, seconds=seconds)
        state = draw(st.sampled_from(STATES))
        result.append(AttemptTimes(pk=pk, state=state, start=begin, end=end, utilisation=util))
    return result


metrics_strategy = st.one_of(
    st.none(),
    st.lists(st.tuples(st.integers(min_value=-30, max_value=900), st.booleans()), max_size=12).map(
        lambda rows: Metrics(
            timestamps=sorted(T0 + dt.timedelta(minutes=m) for m, _ in rows),
            checkpoints=sorted(T0 + dt.timedelta(minutes=m) for m, c in rows if c),
        )
    ),
)
settings_strategy = st.builds(
    Settings,
    checkpoint_interval_minutes=st.decimals(min_value=1, max_value=600, places=2),
    restart_minutes=st.decimals(min_value=0, max_value=600, places=2),
)
costs = st.decimals(min_value=-100, max_value=10**6, places=12, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(attempt_lists(), metrics_strategy, settings_strategy, st.data())
def test_parts_are_never_negative_and_never_exceed_the_cost(
    attempts: list[AttemptTimes], metrics: Metrics | None, config: Settings, data: st.DataObject
) -> None:
    shares = attempt_shares(attempts, metrics=metrics, settings=config)
    assert sorted(s.pk for s in shares) == sorted(a.pk for a in attempts)
    run_parts, run_cost = WasteParts(), Decimal(0)
    for share in shares:
        assert all(0 <= value <= 1 for value in share.shares.values()), share
        assert sum(share.shares.values(), Fraction(0)) <= 1, share
        cost = data.draw(costs)
        parts = parts_of(share, cost)
        values = [getattr(parts, cause) for cause in CAUSES]
        assert all(v >= 0 for v in values), parts
        assert sum(values) <= max(cost, Decimal(0)), (parts, cost)
        run_parts.add(parts)
        run_cost += max(cost, Decimal(0))
    assert run_parts.total + run_parts.cancelled <= run_cost


def test_an_interrupted_attempt_resumed_by_a_parallel_task_is_not_resumed() -> None:
    """A job array's tasks run side by side: a task that failed while another started later
    but before it ended is abandoned, not reworked; the later task is no restart."""
    a = AttemptTimes(1, "FAILED", T0, T0 + dt.timedelta(hours=2))
    b = AttemptTimes(2, "COMPLETED", T0 + dt.timedelta(hours=1), T0 + dt.timedelta(hours=3))
    shares = {s.pk: s for s in attempt_shares([a, b], metrics=None, settings=_SETTINGS)}
    assert shares[1].shares["abandoned"] == 1
    assert shares[2].shares["restart"] == 0


_SETTINGS = Settings(checkpoint_interval_minutes=Decimal(20), restart_minutes=Decimal(10))
MONTH = dt.date(2025, 6, 1)


def _dt(offset: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(BASE + offset, tz=dt.UTC)


@pytest.mark.django_db
@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    job_specs=st.lists(
        st.tuples(jobs(), st.sampled_from(STATES), st.sampled_from(["r1", "r2", "r3"])),
        max_size=8,
    ),
    nodes=st.lists(
        st.tuples(
            st.sampled_from(["n0", "n1", "n2", "n3"]),
            st.integers(min_value=0, max_value=60),
            st.integers(min_value=1, max_value=24),
            st.decimals(min_value=0, max_value=10**5, places=6),
        ),
        min_size=1,
        max_size=6,
    ),
)
def test_attributed_runs_waste_within_their_cost_and_the_ledger_conserves(
    job_specs: list[tuple[JobSpec, str, str]], nodes: list[tuple[str, int, int, Decimal]]
) -> None:
    AllocatedCost.objects.all().delete()
    JobRecord.objects.all().delete()
    ImportBatch.objects.all().delete()
    Team.objects.get_or_create(slug="acct0", defaults={"name": "A0"})
    billing = ImportBatch.objects.create(
        kind="billing", format="focus", source="s", file_name="f", status="succeeded"
    )
    job_batch = ImportBatch.objects.create(
        kind="jobs", format="slurm", source="c", file_name="j", status="succeeded"
    )
    JobRecord.objects.bulk_create(
        JobRecord(
            batch=job_batch, cluster="c", job_id=str(i), account=f"acct{i % 2}", state=state,
            start=_dt(start), end=None if end is None or state == "RUNNING" else _dt(end), gpus=g,
            nodes=job_nodes, run_id=run_id,
        )
        for i, ((start, end, g, job_nodes), state, run_id) in enumerate(job_specs)
    )  # fmt: skip
    CostLineItem.objects.bulk_create(
        CostLineItem(
            batch=billing, source="s", billing_period=MONTH, billing_period_start=_dt(0),
            provider_name="AWS", billing_account_id="111", billing_currency="USD",
            charge_period_start=_dt(hour * 3600), charge_period_end=_dt((hour + hours) * 3600),
            billed_cost=cost, effective_cost=cost, resource_name=node,
            x_instance_type="p5.48xlarge",
        )
        for node, hour, hours, cost in nodes
    )  # fmt: skip

    attribution_month_run(month=MONTH)

    checks = month_conservation(month=MONTH)
    assert all(entry["difference"] == 0 for entry in checks.values()), checks
    keys = [
        RunKey(r.team_id, r.team.slug if r.team else "", r.run_id, r.billing_currency)
        for r in RunCost.objects.select_related("team")
    ]
    for key, waste in run_wastes(keys).items():
        values = [getattr(waste.parts, cause) for cause in CAUSES]
        assert all(v >= 0 for v in values), (key, waste.parts)
        assert sum(values) <= waste.cost, (key, waste.parts, waste.cost)
    for row in team_month_waste(month=MONTH, teams=Team.objects.all(), include_unowned=True):
        assert 0 <= row.parts.total + row.parts.cancelled <= row.cost, row
    # Through the stored rollup (the pipeline's step after attribution): each row's parts are
    # >= 0, within the row's cost, and add up to the run's read-time parts.
    economics_refresh(month=MONTH)
    stored = list(RunEconomics.objects.all())
    assert len(stored) == RunCost.objects.filter(billing_period=MONTH).count()
    for economics in stored:
        parts = row_waste(economics)
        values = [getattr(parts, cause) for cause in CAUSES]
        assert all(v >= 0 for v in values), economics
        assert sum(values) <= economics.cost, (economics, parts)
        assert economics.waste_total == parts.total
    economics_against_read_time()


def _at(minutes: int) -> dt.datetime:
    return T0 + dt.timedelta(minutes=minutes)


def test_an_attempt_that_resumes_and_is_interrupted_again_has_both_windows() -> None:
    """Attempt 2 (10-60) resumes attempt 1 and is preempted: restart 10-15 (until its first
    row), rework 40-60 (after its last checkpoint); attempt 3 resumes it (restart 60-61).
    Attempt 1 logged rows but saved no checkpoint before it failed: its whole time (0-10) is
    rework, and a first start is no restart."""
    attempts = [
        AttemptTimes(1, "NODE_FAIL", _at(0), _at(10)),
        AttemptTimes(2, "PREEMPTED", _at(10), _at(60)),
        AttemptTimes(3, "COMPLETED", _at(60), _at(100)),
    ]
    metrics = Metrics(
        timestamps=[_at(2), _at(8), _at(15), _at(40), _at(55), _at(61)],
        checkpoints=[_at(40)],
    )
    shares = {s.pk: s.shares for s in attempt_shares(attempts, metrics=metrics, settings=_SETTINGS)}
    assert (shares[1]["rework"], shares[1]["restart"]) == (1, 0)
    assert (shares[2]["restart"], shares[2]["rework"]) == (Fraction(5, 50), Fraction(20, 50))
    assert (shares[3]["restart"], shares[3]["rework"]) == (Fraction(1, 40), 0)
    parts = parts_of(
        next(s for s in attempt_shares(attempts, metrics=metrics, settings=_SETTINGS) if s.pk == 2),
        Decimal("100"),
    )
    assert (parts.restart, parts.rework, parts.total) == (10, 40, 50)
