"""One pipeline, declared once: a settled import re-attributes its months, then the steps that
read the ledger run, each recorded; commands, beat and the page go through it; the
reconciliation says stale while the ledger lags the bill; dead workers are found by heartbeat.

Eager Celery here (tasks run in-process); tests/pipeline/test_crash_safety.py kills real workers.
"""

from __future__ import annotations

import datetime as dt
import inspect
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any, Protocol, cast

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import OperationalError
from django.test import Client
from django.utils import timezone
from django.utils.module_loading import import_string
from pytest_django import Settings
from pytest_django.live_server_helper import LiveServer
from selenium.webdriver.remote.webdriver import WebDriver

from billing_ingest.models import CostLineItem, ImportBatch, MonthChange
from finops.attribution.models import AttributionRun
from finops.attribution.selectors.reconciliation import reconciliation_for_month
from finops.celery import app as celery_app
from finops.core.months import month_format
from finops.pipeline.models import PipelineRun, PipelineStep
from finops.pipeline.services import pipeline_changes_claim, pipeline_run_create
from finops.pipeline.steps import STEPS
from finops.pipeline.tasks import pipeline_watchdog

HEADER = (
    "BillingAccountId,BillingCurrency,BillingPeriodStart,BillingPeriodEnd,ChargeCategory,"
    "ChargePeriodStart,ChargePeriodEnd,ProviderName,ResourceName,ServiceName,BilledCost,"
    "EffectiveCost"
)
MAY = dt.date(2025, 5, 1)
JUNE = dt.date(2025, 6, 1)
ROOT = Path(__file__).resolve().parents[2]


def _row(month: dt.date, cost: str) -> str:
    start = f"{month_format(month)}-01T00:00:00Z"
    end = f"{month_format((month + dt.timedelta(days=32)).replace(day=1))}-01T00:00:00Z"
    hour = f"{month_format(month)}-02T10:00:00Z,{month_format(month)}-02T11:00:00Z"
    return f"1,USD,{start},{end},Usage,{hour},AWS,vol-1,S3,{cost},{cost}"


def _bill(path: Path, rows: list[str]) -> Path:
    path.write_text(HEADER + "\n" + "\n".join(rows) + "\n")
    return path


def _ingest(path: Path, *extra: str) -> None:
    call_command("ingest_billing", "--format", "focus", str(path), "--source", "acme", *extra)


# --- the declaration -----------------------------------------------------------------------


def test_the_steps_are_declared_once_in_order_and_each_takes_month_and_run_id() -> None:
    assert [s.key for s in STEPS][:3] == ["attribute", "run_economics", "endpoint_costs"]
    for step in STEPS:
        task = import_string(step.task)
        assert task.name in celery_app.tasks
        params = list(inspect.signature(task.run).parameters)
        assert params[:2] == ["month", "pipeline_run_id"], step.task


# --- a settled import ----------------------------------------------------------------------


@pytest.mark.django_db
def test_a_settled_import_runs_every_step_for_each_month_it_touched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from finops.inference import month_step as inference_step

    seen: list[tuple[dt.date, bool]] = []

    def rebuild(*, month: dt.date) -> int:
        # Endpoint costs read the new ledger: attribution of that month must have succeeded.
        attributed = AttributionRun.objects.filter(
            billing_period=month, status=AttributionRun.Status.SUCCEEDED
        ).exists()
        seen.append((month, attributed))
        return 0

    monkeypatch.setattr(inference_step, "endpoint_costs_rebuild", rebuild)
    _ingest(_bill(tmp_path / "bill.csv", [_row(MAY, "80.00"), _row(JUNE, "20.00")]))

    assert sorted(seen) == [(MAY, True), (JUNE, True)]
    runs = PipelineRun.objects.order_by("month")
    assert [(r.month, r.status) for r in runs] == [(MAY, "succeeded"), (JUNE, "succeeded")]
    for run in runs:
        steps = list(run.steps.order_by("index").values_list("key", "status", "attempts"))
        assert steps == [(s.key, "succeeded", 1) for s in STEPS]
    # The batch's month changes were claimed by those runs.
    claims = dict(MonthChange.objects.values_list("month", "pipeline_run_id"))
    assert claims == {r.month: r.pk for r in runs}
    for month, billed in ((MAY, Decimal("80")), (JUNE, Decimal("20"))):
        recon = reconciliation_for_month(month=month)
        assert recon.total.amortised == billed
        assert recon.total.difference == 0
        assert recon.stale is False


@pytest.mark.django_db
def test_no_attribute_records_the_change_and_the_month_is_stale_until_attributed(
    tmp_path: Path,
) -> None:
    _ingest(_bill(tmp_path / "bill.csv", [_row(MAY, "80.00")]), "--no-attribute")
    assert not PipelineRun.objects.exists()
    change = MonthChange.objects.get()
    assert (change.month, change.start_pipeline, change.claimed_at) == (MAY, False, None)
    recon = reconciliation_for_month(month=MAY)
    assert recon.stale
    assert "not been attributed" in recon.stale_reason
    assert recon.total.difference == Decimal("80")  # nothing attributed yet, and it says so

    call_command("attribute", "--month", "2025-05")
    recon = reconciliation_for_month(month=MAY)
    assert not recon.stale
    assert recon.total.difference == 0


@pytest.mark.django_db
def test_a_restatement_after_the_last_attribution_is_stale_in_page_and_api(
    tmp_path: Path, client: Client, finance_user: User
) -> None:
    _ingest(_bill(tmp_path / "v1.csv", [_row(MAY, "80.00")]))
    client.force_login(finance_user)
    api = client.get("/api/v1/reconciliation/?month=2025-05").json()
    assert api["stale"] is False
    assert api["difference"] == "0.000000000000"

    _ingest(_bill(tmp_path / "v2.csv", [_row(MAY, "95.00")]), "--no-attribute")
    api = client.get("/api/v1/reconciliation/?month=2025-05").json()
    assert api["stale"] is True
    assert "line items changed" in api["stale_reason"]
    assert Decimal(api["difference"]) == Decimal("15")  # 95 billed, 80 attributed
    page = client.get("/reconciliation/?month=2025-05").content.decode()
    assert 'data-testid="stale-warning"' in page
    assert "line items changed" in page

    call_command("attribute", "--month", "2025-05")
    api = client.get("/api/v1/reconciliation/?month=2025-05").json()
    assert api["stale"] is False
    assert Decimal(api["difference"]) == 0
    assert 'data-testid="stale-warning"' not in client.get("/reconciliation/?month=2025-05")


# --- failures and retries ------------------------------------------------------------------


@pytest.mark.django_db
def test_a_failing_step_fails_the_run_skips_the_rest_and_keeps_the_ledger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _ingest(_bill(tmp_path / "bill.csv", [_row(MAY, "80.00")]))
    from finops.attribution.ledger import writer as ledger

    def broken(*args: Any) -> None:
        raise ledger.ConservationError("ledger 1 != bill 2")

    monkeypatch.setattr(ledger, "check_conservation", broken)
    with pytest.raises(CommandError, match="ConservationError: ledger 1 != bill 2"):
        call_command("attribute", "--month", "2025-05")
    run = PipelineRun.objects.order_by("-id").first()
    assert run is not None
    assert run.status == "failed"
    assert run.error.startswith("step attribute: ConservationError")
    steps = dict(run.steps.values_list("key", "status"))
    later = {
        "run_economics": "skipped", "endpoint_costs": "skipped", "budgets": "skipped",
        "anomalies": "skipped", "recommendations": "skipped",
    }  # fmt: skip
    assert steps == {"attribute": "failed", **later}
    assert run.steps.get(key="attribute").attempts == 1  # not transient: not retried
    recon = reconciliation_for_month(month=MAY)
    assert recon.total.difference == 0  # the previous ledger stays
    assert recon.stale
    assert "last attribution failed" in recon.stale_reason


@pytest.mark.django_db
def test_a_transient_error_is_retried_and_the_step_then_succeeds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from finops.inference import month_step as inference_step

    calls: list[dt.date] = []

    def flaky(*, month: dt.date) -> int:
        calls.append(month)
        if len(calls) == 1:
            raise OperationalError("server closed the connection unexpectedly")
        return 0

    monkeypatch.setattr(inference_step, "endpoint_costs_rebuild", flaky)
    _ingest(_bill(tmp_path / "bill.csv", [_row(MAY, "80.00")]))
    step = PipelineStep.objects.get(key="endpoint_costs")
    assert (step.status, step.attempts, step.error) == ("succeeded", 2, "")
    assert calls == [MAY, MAY]
    assert PipelineRun.objects.get().status == "succeeded"


# --- dead workers ----------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_watchdog_fails_what_a_dead_worker_left_and_runs_the_pipeline_again(
    tmp_path: Path, settings: Settings
) -> None:
    settings.FINOPS_WORKER_HEARTBEAT_TIMEOUT = 60
    _ingest(_bill(tmp_path / "bill.csv", [_row(MAY, "80.00")]))
    long_ago = timezone.now() - dt.timedelta(minutes=5)
    # A pipeline run whose worker died in its first step, with its attribution run ...
    dead = pipeline_run_create(month=MAY, reason="test")
    PipelineRun.objects.filter(pk=dead.pk).update(status="running", heartbeat_at=long_ago)
    dead.steps.filter(index=0).update(status="running", heartbeat_at=long_ago, attempts=1)
    attribution = AttributionRun.objects.create(billing_period=MAY, heartbeat_at=long_ago)
    # ... and an import batch whose worker died while loading a part (its rows invisible).
    batch = ImportBatch.objects.create(
        kind="billing", format="focus", source="acme", file_name="x.csv", status="running",
        started_at=long_ago, heartbeat_at=long_ago,
    )  # fmt: skip
    CostLineItem.objects.create(
        batch=batch, source="acme", billing_period=MAY, billing_period_start=timezone.now(),
        charge_period_start=timezone.now(), charge_period_end=timezone.now(),
        billed_cost=Decimal(5), effective_cost=Decimal(5), billing_currency="USD",
    )  # fmt: skip

    report = pipeline_watchdog()

    batch.refresh_from_db()
    assert batch.status == "failed"
    assert batch.error.startswith("worker died / no heartbeat since")
    assert not CostLineItem.objects.filter(batch=batch).exists()
    attribution.refresh_from_db()
    assert attribution.status == "failed"
    assert "worker died" in attribution.error
    dead.refresh_from_db()
    assert dead.status == "failed"
    assert dead.error.startswith(f"step attribute: worker died / no heartbeat since {long_ago:%Y}")
    assert dict(dead.steps.values_list("key", "status")) == {
        "attribute": "failed",
        "run_economics": "skipped",
        "endpoint_costs": "skipped",
        "budgets": "skipped",
        "anomalies": "skipped",
        "recommendations": "skipped",
    }
    retry = PipelineRun.objects.get(retry_of=dead)
    assert report["pipeline_runs_retried"] == [retry.pk]
    assert (retry.attempt, retry.status) == (2, "succeeded")
    assert reconciliation_for_month(month=MAY).total.difference == 0


@pytest.mark.django_db
def test_a_live_step_is_not_taken_for_dead(settings: Settings) -> None:
    settings.FINOPS_WORKER_HEARTBEAT_TIMEOUT = 60
    run = pipeline_run_create(month=MAY, reason="test")
    now = timezone.now()
    PipelineRun.objects.filter(pk=run.pk).update(status="running", heartbeat_at=now)
    run.steps.filter(index=0).update(status="running", heartbeat_at=now - dt.timedelta(seconds=30))
    pipeline_watchdog()
    run.refresh_from_db()
    assert run.status == "running"


@pytest.mark.django_db
def test_months_whose_wake_up_was_lost_are_started_by_the_watchdog(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from billing_ingest.management import pipeline as command_pipeline
    from billing_ingest.tasks import billing as billing_tasks

    lost = lambda **kwargs: None  # noqa: E731 - the message that never arrived
    monkeypatch.setattr(billing_tasks, "pipeline_kick", lost)
    monkeypatch.setattr(command_pipeline, "pipeline_kick", lost)
    _ingest(_bill(tmp_path / "bill.csv", [_row(MAY, "80.00")]))
    assert not PipelineRun.objects.exists()
    assert reconciliation_for_month(month=MAY).stale

    pipeline_watchdog()
    run = PipelineRun.objects.get()
    assert (run.month, run.status) == (MAY, "succeeded")
    assert not reconciliation_for_month(month=MAY).stale


@pytest.mark.django_db
def test_a_change_joins_a_run_of_its_month_that_has_not_started() -> None:
    waiting = pipeline_run_create(month=MAY, reason="earlier import")
    MonthChange.objects.create(month=MAY, kind="billing", changed_at=timezone.now())
    MonthChange.objects.create(month=JUNE, kind="billing", changed_at=timezone.now())
    new_runs = pipeline_changes_claim()
    assert [r.month for r in new_runs] == [JUNE]
    assert MonthChange.objects.get(month=MAY).pipeline_run_id == waiting.pk


# --- schedules and broker settings ---------------------------------------------------------


def test_beat_runs_the_nightly_pipeline_and_the_watchdog() -> None:
    schedule = celery_app.conf.beat_schedule
    nightly = schedule["attribute-open-months-nightly"]
    assert nightly["task"] == "finops.pipeline.open_months"
    watchdog = schedule["pipeline-watchdog-every-2-minutes"]
    assert watchdog["task"] == "finops.pipeline.watchdog"
    assert watchdog["options"]["expires"] < 120
    assert set(celery_app.tasks) >= {"finops.pipeline.open_months", "finops.pipeline.watchdog"}


def test_tasks_are_redelivered_after_a_lost_worker_but_never_while_they_may_still_run(
    settings: Settings,
) -> None:
    celery_app.loader.import_default_modules()
    assert settings.CELERY_TASK_ACKS_LATE
    assert settings.CELERY_TASK_REJECT_ON_WORKER_LOST
    visibility = settings.CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"]
    ours = {n: t for n, t in celery_app.tasks.items() if not n.startswith("celery.")}
    assert "finops.pipeline.run_step" in ours
    assert "billing_ingest.tasks.sources.fetch_billing_source" in ours
    for name, task in ours.items():
        limit = task.time_limit or settings.CELERY_TASK_TIME_LIMIT
        assert limit < visibility, name


def _broker_options(visibility_timeout: str) -> dict[str, Any]:
    """The transport options a worker started with CELERY_VISIBILITY_TIMEOUT gets (settings
    are read once per process, so read them in a fresh one)."""
    script = (
        "import json; from finops.celery import app; "
        "print(json.dumps(app.conf.broker_transport_options))"
    )
    env = {**os.environ, "CELERY_VISIBILITY_TIMEOUT": visibility_timeout}
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True, check=True
    )
    return dict(json.loads(out.stdout.decode().splitlines()[-1]))


class _RestoreSweepDefaults(Protocol):
    # Class attributes of kombu's Redis Channel that its stubs (kombu-stubs) do not declare.
    unacked_restore_interval: int
    unacked_restore_throttle: int


@pytest.mark.parametrize("visibility_timeout", [6, 3 * 3600])
def test_a_dead_workers_message_comes_back_soon_after_the_visibility_timeout(
    visibility_timeout: int,
) -> None:
    # Redis redelivers only when a worker sweeps the unacknowledged messages: every
    # interval x throttle seconds, kombu's defaults (10 x 10) unless set. A 100 s sweep behind a
    # 6 s timeout left the killed part of tests/pipeline/test_crash_safety.py waiting 100 s.
    from kombu.transport.redis import Channel

    defaults = cast(_RestoreSweepDefaults, Channel)
    options = _broker_options(str(visibility_timeout))
    assert options["visibility_timeout"] == visibility_timeout
    interval = options.get("unacked_restore_interval", defaults.unacked_restore_interval)
    throttle = options.get("unacked_restore_throttle", defaults.unacked_restore_throttle)
    assert interval * throttle <= min(10, visibility_timeout / 4)


# --- the page ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_finance_sees_each_months_last_run_step_by_step(
    tmp_path: Path, client: Client, finance_user: User
) -> None:
    _ingest(_bill(tmp_path / "bill.csv", [_row(MAY, "80.00")]))
    call_command("attribute", "--month", "2025-05")
    last = PipelineRun.objects.order_by("-id").first()
    assert last is not None
    client.force_login(finance_user)
    page = client.get("/pipeline/").content.decode()
    assert f"#{last.pk}" in page
    assert f"#{last.pk - 1}" not in page
    assert 'data-step="attribute"' in page
    assert 'data-step="endpoint_costs"' in page
    assert "attribute command" in page
    assert 'data-testid="pipeline-link"' in client.get("/imports/").content.decode()

    response = client.post("/pipeline/run/", {"month": "2025-05"}, follow=True)
    assert PipelineRun.objects.count() == 3
    assert f"pipeline run {last.pk + 1} succeeded" in response.content.decode()


@pytest.mark.django_db
def test_the_pipeline_page_is_for_finance_only(client: Client, lead_user: User) -> None:
    assert client.get("/pipeline/").status_code == 302  # to the login page
    client.force_login(lead_user)
    assert client.get("/pipeline/").status_code == 403
    assert client.post("/pipeline/run/", {"month": "2025-05"}).status_code == 403
    assert not PipelineRun.objects.exists()


# --- broker down ---------------------------------------------------------------------------


@pytest.fixture
def broker_down(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The broker pointed at a closed port, tasks no longer eager: queuing work fails."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    conf = celery_app.conf
    saved = (conf.broker_url, conf.task_always_eager)
    _reset_pools()
    closed = f"redis://127.0.0.1:{port}/0"
    # Celery reads CELERY_BROKER_URL from the environment before its configuration.
    monkeypatch.setenv("CELERY_BROKER_URL", closed)
    conf.update(broker_url=closed, task_always_eager=False)
    try:
        yield conf.broker_url
    finally:
        conf.update(broker_url=saved[0], task_always_eager=saved[1])
        _reset_pools()


def _reset_pools() -> None:
    # Celery's private connection pools (the stubs do not declare them): a new broker URL is
    # only read when the pools are rebuilt.
    celery_app._pool = None  # type: ignore[attr-defined]
    celery_app.amqp._producer_pool = None  # type: ignore[attr-defined]


@pytest.mark.django_db
def test_broker_down_ingest_fails_clearly_and_keeps_the_previous_data(
    tmp_path: Path, broker_down: str
) -> None:
    celery_app.conf.task_always_eager = True
    _ingest(_bill(tmp_path / "v1.csv", [_row(MAY, "80.00")]))
    celery_app.conf.task_always_eager = False

    with pytest.raises(CommandError, match="could not queue the import"):
        _ingest(_bill(tmp_path / "v2.csv", [_row(MAY, "95.00")]))
    failed = ImportBatch.objects.order_by("-id").first()
    assert failed is not None
    assert failed.status == "failed"
    assert "broker unreachable" in failed.error
    recon = reconciliation_for_month(month=MAY)
    assert recon.total.amortised == Decimal("80")
    assert recon.total.difference == 0
    assert not recon.stale


@pytest.mark.django_db
def test_broker_down_attribute_says_so_and_records_the_run(broker_down: str) -> None:
    with pytest.raises(CommandError, match="not started: could not queue the pipeline"):
        call_command("attribute", "--month", "2025-05")
    run = PipelineRun.objects.get()
    assert run.status == "failed"
    assert "broker unreachable" in run.error


@pytest.mark.django_db
def test_broker_down_pages_that_queue_work_say_so(
    client: Client, finance_user: User, broker_down: str
) -> None:
    from django.contrib.auth.models import User

    from billing_ingest.models import BillingSource

    client.force_login(finance_user)
    response = client.post("/pipeline/run/", {"month": "2025-05"}, follow=True)
    assert response.status_code == 200
    assert (
        "not queued: could not queue the pipeline (broker unreachable)" in response.content.decode()
    )

    source = BillingSource.objects.create(name="s", uri="s3://b/p/e", format="aws-cur")
    admin = User.objects.create_superuser("root", password="root-password-123")
    client.force_login(admin)
    response = client.post(
        "/admin/billing_ingest/billingsource/",
        {"action": "fetch_now", "_selected_action": [source.pk]},
        follow=True,
    )
    assert response.status_code == 200
    assert "could not queue the fetch (broker unreachable)" in response.content.decode().lower()


# --- in a real browser -----------------------------------------------------------------------


@pytest.mark.browser
def test_finance_follows_imports_to_the_pipeline_and_runs_a_month_again(
    browser: WebDriver,
    live_server: LiveServer,
    finance_user: User,
    tmp_path: Path,
) -> None:
    from selenium.webdriver.common.by import By

    from tests.chromium import _body, _login, _wait_for_text

    _ingest(_bill(tmp_path / "bill.csv", [_row(MAY, "80.00")]))
    first = PipelineRun.objects.get()
    _login(browser, live_server.url, "fin", "fin-password-123")
    browser.get(live_server.url + "/imports/")
    browser.find_element(By.CSS_SELECTOR, '[data-testid="pipeline-link"]').click()
    _wait_for_text(browser, "Attribute the month: succeeded")
    text = _body(browser)
    assert f"#{first.pk}" in text
    assert "Endpoint costs: succeeded" in text
    assert "import batch" in text  # why it ran

    browser.find_element(By.XPATH, "//button[text()='Run again']").click()
    _wait_for_text(browser, f"2025-05: pipeline run {first.pk + 1} succeeded")
    assert f"#{first.pk + 1}" in _body(browser)
