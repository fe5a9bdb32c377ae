"""RunCost ids are stable across re-attribution (review defect 5): `/api/v1/runs/{id}/` and the
run's page keep working after a month is attributed again (restated, split into parts); the
runs of a month never share an id, and two that would are refused, never merged."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from billing_ingest.models import CostLineItem, ImportBatch, JobRecord
from finops.attribution.engine.run_ids import RunIdCollisionError, run_cost_id
from finops.attribution.ledger import writer as ledger
from finops.attribution.models import RunCost
from finops.attribution.services import attribution_month_run, attribution_month_run_split
from finops.org.models import Profile
from tests.factories import RunCostFactory
from tests.pricing_golden import MONTH, RUNS, T0, golden_runs_create

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_catalogue")]


def _finance() -> User:
    user = User.objects.create_user("fin", password="fin-password-123")
    Profile.objects.create(user=user, role=Profile.Role.FINANCE)
    return user


def _ids() -> dict[str, int]:
    return dict(RunCost.objects.values_list("run_id", "pk"))


def _restate() -> None:
    """A later bill for the month: one more hour on od-run's node, so its cost changes."""
    batch = ImportBatch.objects.get(kind="billing")
    line = CostLineItem.objects.filter(resource_name="n-od").first()
    assert line is not None
    line.pk = None
    line.charge_period_start = T0 + dt.timedelta(hours=1)
    line.charge_period_end = T0 + dt.timedelta(hours=2)
    line.batch = batch
    line.save()
    JobRecord.objects.filter(run_id="od-run").update(end=T0 + dt.timedelta(hours=2))


def test_reattributing_keeps_each_runs_id_and_url() -> None:
    golden_runs_create()
    before = _ids()
    assert set(before) == set(RUNS)
    api = APIClient()
    api.force_authenticate(_finance())
    urls = {item["run_id"]: item["url"] for item in api.get("/api/v1/runs/").json()["results"]}
    old_cost = RunCost.objects.get(run_id="od-run").cost

    _restate()
    attribution_month_run(month=MONTH)
    assert _ids() == before
    assert RunCost.objects.get(run_id="od-run").cost != old_cost  # restated, same id
    attribution_month_run_split(month=MONTH, parts=3)  # the chord's reduce path
    assert _ids() == before

    for run_id, url in urls.items():
        detail = api.get(url)
        assert detail.status_code == 200, url
        assert detail.json()["run_id"] == run_id
        assert api.get(f"/api/v1/runs/{before[run_id]}/pricing/").status_code == 200
    client = Client()
    client.force_login(User.objects.get(username="fin"))
    page = client.get("/runs/od/od-run/?month=2025-06")
    assert page.status_code == 200


def test_runs_of_a_month_never_share_an_id() -> None:
    """300 runs of one node's hour: 300 ids, each the run's own hash."""
    golden_runs_create()
    jobs = ImportBatch.objects.get(kind="jobs")
    JobRecord.objects.bulk_create(
        JobRecord(batch=jobs, cluster="c", job_id=f"x{i}", account="acct-0", state="COMPLETED",
                  start=T0, end=T0 + dt.timedelta(seconds=10), gpus=Decimal("0.01"),
                  nodes=["n-od"], run_id=f"sweep-{i}")
        for i in range(300)
    )  # fmt: skip
    attribution_month_run(month=MONTH)
    rows = list(RunCost.objects.all())
    assert len(rows) == 304
    assert len({r.pk for r in rows}) == 304
    for r in rows:
        assert r.pk == run_cost_id(
            month=MONTH, team_id=r.team_id, cluster=r.cluster, currency=r.billing_currency,
            run_id=r.run_id,
        )  # fmt: skip
        # Read exactly by JSON readers that hold numbers as doubles (JavaScript).
        assert 0 < r.pk < 2**53


def test_a_collision_is_refused_not_merged(monkeypatch: pytest.MonkeyPatch) -> None:
    golden_runs_create()
    before = sorted(RunCost.objects.values_list("pk", "run_id", "cost"))
    monkeypatch.setattr(ledger, "run_cost_id", lambda **key: 42)
    with pytest.raises(RunIdCollisionError, match="share the id 42"):
        attribution_month_run(month=MONTH)
    # The month keeps its previous rows (the failed run wrote nothing).
    assert sorted(RunCost.objects.values_list("pk", "run_id", "cost")) == before


def test_rows_made_one_by_one_get_the_same_id() -> None:
    run = RunCostFactory.create(run_id="adhoc")
    assert run.pk == run.stable_id()
    assert RunCost.objects.get(pk=run.stable_id()).run_id == "adhoc"
