"""The anomalies pipeline step on real Celery workers over PostgreSQL and Redis: a bill
ingested by the command settles, the pipeline (attribution, ..., anomalies) runs on the
workers, the jump is one anomaly with its SKU and resource drivers, and its emails go out
exactly once through a real SMTP server; the month's pipeline run again changes nothing.

The bill (October 2025): team vision's tagged line bills SKU-A on i-a at 100 USD a day times a
5-day wiggle, and on 29 October a new SKU-B on i-b adds 500 USD; team speech pays a steady
300 USD a day (no anomaly)."""

from __future__ import annotations

import datetime as dt
import io
import json
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from pytest_django import Settings

from finops.anomalies.models import Anomaly
from finops.celery import app
from finops.notifications.models import EmailNotification
from finops.org.models import Profile, Team
from finops.pipeline.models import PipelineRun
from tests.builders import focus_row, write_focus_csv
from tests.conftest import CapturedMail

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

D = Decimal
WIGGLE = [D("1.00"), D("1.03"), D("0.98"), D("1.02"), D("0.97")]
EVENT_DAY = dt.date(2025, 10, 29)
LEAD, FIN = "lead@example.com", "fin@example.com"


def _line(day: dt.date, sku: str, resource: str, team: str, cost: Decimal) -> dict[str, str]:
    return focus_row(
        BillingPeriodStart="2025-10-01T00:00:00Z", BillingPeriodEnd="2025-11-01T00:00:00Z",
        ChargePeriodStart=f"{day}T00:00:00Z",
        ChargePeriodEnd=f"{day + dt.timedelta(days=1)}T00:00:00Z",
        ServiceName="Amazon Simple Storage Service", SkuId=sku, ResourceId=resource,
        ResourceName="", ListCost=str(cost), BilledCost=str(cost), EffectiveCost=str(cost),
        Tags=json.dumps({"team": team}),
    )  # fmt: skip


def _bill(folder: Path) -> Path:
    rows = []
    for i in range(31):
        day = dt.date(2025, 10, 1) + dt.timedelta(days=i)
        rows.append(_line(day, "SKU-A", "i-a", "vision", D(100) * WIGGLE[i % 5]))
        rows.append(_line(day, "SKU-C", "i-c", "speech", D("300.00")))
        if day == EVENT_DAY:
            rows.append(_line(day, "SKU-B", "i-b", "vision", D("500.00")))
    return write_focus_csv(folder / "october.csv", rows)


@pytest.fixture
def people(team: Team, other_team: Team, settings: Settings) -> None:
    settings.SITE_URL = "https://finops.example"
    lead = User.objects.create_user("lead", email=LEAD, password="x-123456789")
    Profile.objects.create(user=lead, role=Profile.Role.TEAM_LEAD).teams.add(team)
    finance = User.objects.create_user("fin", email=FIN, password="x-123456789")
    Profile.objects.create(user=finance, role=Profile.Role.FINANCE)


@pytest.fixture
def worker_with_smtp(
    smtp_server: CapturedMail,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> Path:
    # The workers read EMAIL_URL and SITE_URL from their environment when they start.
    monkeypatch.setenv("EMAIL_URL", f"smtp://127.0.0.1:{settings.EMAIL_PORT}")
    monkeypatch.setenv("SITE_URL", "https://finops.example")
    return request.getfixturevalue("celery_worker_process")


def _wait(condition: Callable[[], bool], what: str, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def _pipeline_done() -> bool:
    runs = PipelineRun.objects.filter(month=dt.date(2025, 10, 1))
    return (
        runs.exists()
        and not runs.exclude(
            status__in=[PipelineRun.Status.SUCCEEDED, PipelineRun.Status.FAILED]
        ).exists()
    )


def _all_sent() -> bool:
    unsent = EmailNotification.objects.exclude(status=EmailNotification.Status.SENT)
    return EmailNotification.objects.exists() and not unsent.exists()


def test_the_pipeline_step_finds_the_jump_once_and_emails_once(
    team: Team,
    people: None,
    tmp_path: Path,
    smtp_server: CapturedMail,
    worker_with_smtp: Path,
) -> None:
    assert app.conf.task_always_eager is False
    call_command("ingest_billing", "--format", "focus", str(_bill(tmp_path)),
                 stdout=io.StringIO())  # fmt: skip
    _wait(_pipeline_done, "the October pipeline")
    assert set(PipelineRun.objects.values_list("status", flat=True)) == {"succeeded"}
    _wait(_all_sent, "the anomaly emails")

    anomaly = Anomaly.objects.get()  # speech's steady cost is no anomaly
    assert anomaly.team == team
    assert anomaly.first_day == anomaly.last_day == EVENT_DAY
    assert anomaly.actual == D(100) * WIGGLE[28 % 5] + D(500)
    skus = {d.key: d.delta for d in anomaly.drivers.filter(dimension="sku")}
    assert skus["SKU-B"] == D(500)
    assert "SKU-C" not in skus
    assert sum(skus.values()) + anomaly.unexplained_sku == anomaly.impact
    assert len(smtp_server.to(LEAD)) == 1
    assert len(smtp_server.to(FIN)) == 1
    assert f"https://finops.example/anomalies/{anomaly.pk}/".encode() in smtp_server.to(LEAD)[0]
    log = worker_with_smtp.read_text()
    assert "detect_anomalies_for_month" in log
    assert "send_notification" in log

    # The month's pipeline again (the attribute command waits for it): nothing new.
    call_command("attribute", "--month", "2025-10", stdout=io.StringIO())
    _wait(_pipeline_done, "the second October pipeline")
    assert Anomaly.objects.get().pk == anomaly.pk
    assert EmailNotification.objects.count() == 2
    assert len(smtp_server.to(LEAD)) == 1
    assert len(smtp_server.to(FIN)) == 1
