"""A budget crossing on PostgreSQL with a real Celery worker (CI's second pass): the worker posts
the Slack message, the webhook is down, the task's own retry (backoff, 0-30 s for the first)
posts it once the webhook is back, once. tests/test_notification_channels.py's budget: 100.00 USD a
day against 2,000.00 USD, 50 % on actual reached on the 10th."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest

from finops.budgets.models import Budget
from finops.budgets.services import budgets_evaluate_active
from finops.notifications.models import EmailNotification, NotificationChannel
from finops.org.models import Team
from tests.budget_data import ledger_days
from tests.conftest import free_port
from tests.webhook_server import Hook

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def worker_env() -> dict[str, str]:
    return {"FINOPS_WEBHOOK_ALLOWED_HOSTS": "127.0.0.1"}


@pytest.fixture
def hook() -> Iterator[Hook]:
    hook = Hook(free_port())
    yield hook
    hook.stop()


def _row_until(done: Callable[[EmailNotification], bool], timeout: float) -> EmailNotification:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = EmailNotification.objects.filter(channel__isnull=False).first()
        if row is not None and done(row):
            return row
        time.sleep(0.5)
    raise AssertionError(f"the channel message did not get there in {timeout} s")


def test_the_workers_retry_posts_once_the_webhook_is_back(
    team: Team, hook: Hook, celery_worker_process: Path
) -> None:
    ledger_days(team=team, first=date(2025, 9, 1), amounts=[100] * 30)
    NotificationChannel.objects.create(
        name="vision", kind="slack", url=hook.url, team=team, events=["budget"]
    )
    Budget.objects.create(
        name="Vision monthly", team=team, period="month", amount=Decimal("2000.00"),
        currency="USD", thresholds=[50], forecast_thresholds=[], recipients=[],
    )  # fmt: skip

    budgets_evaluate_active(as_of=date(2025, 9, 10))  # queued to the worker after commit

    failed = _row_until(lambda row: row.attempts >= 1, timeout=60)
    assert "ConnectionRefusedError" in failed.last_error, celery_worker_process.read_text()
    hook.start()
    sent = _row_until(lambda row: row.status == "sent", timeout=90)
    budgets_evaluate_active(as_of=date(2025, 9, 10))  # nothing new to say
    time.sleep(2)

    assert len(hook.bodies) == 1
    assert "• Spent to date (amortised): 1,000.00 USD" in hook.bodies[0]["text"]
    assert sent.attempts >= 2
    assert EmailNotification.objects.filter(channel__isnull=False).count() == 1
