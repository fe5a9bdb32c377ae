"""Two evaluations at once on PostgreSQL with a real Celery worker send no duplicate email: the
worker runs the chained month task twice while two threads of this process evaluate the same
budgets; the unique constraint on BudgetAlert lets exactly one insert per alert win, and the
winner's one email names them all."""

from __future__ import annotations

import email
import threading
import time
from collections import Counter
from datetime import date
from pathlib import Path

import pytest
from django.db import connection
from pytest_django import Settings

from finops.budgets.models import Budget, BudgetAlert
from finops.budgets.services import budgets_evaluate_active
from finops.budgets.tasks import evaluate_budgets_for_month
from finops.notifications.models import EmailNotification
from finops.org.models import Team
from tests.budget_data import ledger_days
from tests.conftest import CapturedMail

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

RECIPIENTS = ["a@example.com", "b@example.com"]


@pytest.fixture
def worker_with_smtp(
    smtp_server: CapturedMail,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> Path:
    # The worker reads EMAIL_URL from its environment when it starts.
    monkeypatch.setenv("EMAIL_URL", f"smtp://127.0.0.1:{settings.EMAIL_PORT}")
    return request.getfixturevalue("celery_worker_process")


def _evaluate_in_thread(barrier: threading.Barrier, errors: list[BaseException]) -> None:
    try:
        barrier.wait()
        budgets_evaluate_active(as_of=date(2025, 9, 30))
    except BaseException as exc:  # reported by the test
        errors.append(exc)
    finally:
        connection.close()


def test_concurrent_evaluations_send_each_alert_once(
    team: Team, smtp_server: CapturedMail, worker_with_smtp: Path
) -> None:
    ledger_days(team=team, first=date(2025, 9, 1), amounts=[100] * 30)
    budgets = [
        Budget.objects.create(
            name=f"Vision {n}",
            team=team,
            period="month",
            amount=2000,
            currency="USD",
            thresholds=[50, 80, 100],
            forecast_thresholds=[100],
            recipients=RECIPIENTS,
        )
        for n in range(3)
    ]

    barrier = threading.Barrier(3)
    errors: list[BaseException] = []
    threads = [threading.Thread(target=_evaluate_in_thread, args=(barrier, errors))
               for _ in range(2)]  # fmt: skip
    for thread in threads:
        thread.start()
    barrier.wait()
    results = [evaluate_budgets_for_month.delay("2025-09") for _ in range(2)]
    for thread in threads:
        thread.join(timeout=120)
    for result in results:
        result.get(timeout=180)
    assert errors == []

    # 3000 of 2000 on the 30th: actual 50, 80, 100 and forecast 100 for each of 3 budgets, all
    # raised by one evaluation of each budget, in one email.
    assert BudgetAlert.objects.count() == len(budgets) * 4
    expected = len(budgets)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if not EmailNotification.objects.exclude(status=EmailNotification.Status.SENT).exists():
            break
        time.sleep(0.5)
    assert (
        EmailNotification.objects.filter(status=EmailNotification.Status.SENT).count() == expected
    )
    for address in RECIPIENTS:
        subjects = Counter(
            str(email.message_from_bytes(raw)["Subject"]) for raw in smtp_server.to(address)
        )
        assert len(smtp_server.to(address)) == expected
        assert all(count == 1 for count in subjects.values())
