"""Budget alert emails through a real SMTP server (aiosmtpd): a month replayed day by day with
`check_budgets --as-of`, each threshold alerted once, one email per budget and evaluation
naming every threshold it raised and the day each was crossed (a catch-up evaluation of a budget
made after the fact included); nothing new after re-ingest, restatement or re-attribution;
opt-out; a budget nobody receives says so; SMTP errors on the page; the email's parts. Data goes
in through ingest_billing (FOCUS) and attribution, as in use."""

from __future__ import annotations

import email
import io
import socket
from collections import Counter
from email.message import Message
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client
from pytest_django import Settings

from finops.budgets.models import Budget, BudgetAlert
from finops.budgets.services import budget_opt_out_set
from finops.notifications.models import EmailNotification
from finops.notifications.tasks import resend_unsent_notifications
from finops.org.models import Team
from tests.budget_data import focus_month_daily as _focus_month
from tests.budget_data import ingest_focus as _ingest
from tests.conftest import CapturedMail

pytestmark = pytest.mark.django_db(transaction=True)

LEAD = "lead@example.com"
LISTED = "vision-lead@example.com"


@pytest.fixture
def vision_month(tmp_path: Path, team: Team, lead_user: User) -> Budget:
    lead_user.email = LEAD
    lead_user.save()
    _ingest(_focus_month(tmp_path / "sep.csv", {d: "100" for d in range(1, 31)}))
    return Budget.objects.create(
        name="Vision monthly", team=team, period="month", amount=2000, currency="USD",
        thresholds=[50, 80, 100], forecast_thresholds=[100], recipients=[LISTED],
    )  # fmt: skip


def _replay(first: int = 1, last: int = 30) -> str:
    out = io.StringIO()
    for dom in range(first, last + 1):
        call_command("check_budgets", "--as-of", f"2025-09-{dom:02d}", stdout=out)
    return out.getvalue()


def _subject(raw: bytes) -> str:
    return " ".join(str(email.message_from_bytes(raw)["Subject"]).split())


def _subjects(smtp: CapturedMail, address: str) -> Counter[str]:
    return Counter(str(email.message_from_bytes(raw)["Subject"]) for raw in smtp.to(address))


def test_replayed_month_sends_each_alert_once_per_recipient(
    vision_month: Budget, smtp_server: CapturedMail
) -> None:
    printed = _replay()

    # 100 a day against 2000: 50 % on the 10th, 80 % on the 16th, 100 % on the 20th. The
    # forecast reaches 2000 on the 2nd: the 1st is complete, so 2 x 100 + 28 x 100 = 3000.
    raised = {(a.kind, a.threshold): a.as_of.day for a in BudgetAlert.objects.all()}
    assert raised == {("actual", 50): 10, ("actual", 80): 16, ("actual", 100): 20,
                      ("forecast", 100): 2}  # fmt: skip
    # Evaluated every day, each threshold is crossed on the day evaluated.
    assert all(a.crossed_on == a.as_of for a in BudgetAlert.objects.all())
    for address in (LEAD, LISTED):
        subjects = _subjects(smtp_server, address)
        assert sum(subjects.values()) == 4, subjects
        assert all(count == 1 for count in subjects.values())
    assert "alert sent: actual 80 % (crossed on 2025-09-16)" in printed
    assert "as of 2025-09-16: actual 1,600.00 USD (80.00 %)" in printed

    assert _replay().count("alert sent") == 0
    assert len(smtp_server.messages) == 4


def test_reingest_restatement_and_reattribution_send_nothing_new(
    vision_month: Budget, smtp_server: CapturedMail, tmp_path: Path
) -> None:
    _replay(1, 30)
    assert len(smtp_server.messages) == 4

    # The provider restates the month lower (below 80 %), then back up; the month is
    # re-attributed; every day is evaluated again each time.
    _ingest(_focus_month(tmp_path / "restated.csv", {d: "40" for d in range(1, 31)}))
    _replay(1, 30)
    _ingest(_focus_month(tmp_path / "again.csv", {d: "120" for d in range(1, 31)}))
    call_command("attribute", "--month", "2025-09", stdout=io.StringIO())
    _replay(1, 30)

    assert len(smtp_server.messages) == 4
    assert BudgetAlert.objects.count() == 4
    assert EmailNotification.objects.count() == 4


def _parts(raw: bytes) -> dict[str, str]:
    message: Message = email.message_from_bytes(raw)
    parts = {}
    for part in message.walk():
        if part.get_content_type() in ("text/plain", "text/html"):
            payload = part.get_payload(decode=True)
            assert isinstance(payload, bytes)  # a leaf part, decoded from its transfer encoding
            parts[part.get_content_type()] = payload.decode()
    return parts


def test_email_is_multipart_with_figures_drivers_and_link(
    vision_month: Budget, smtp_server: CapturedMail, settings: Settings
) -> None:
    settings.SITE_URL = "https://finops.example.com"
    call_command("check_budgets", "--as-of", "2025-09-10", stdout=io.StringIO())

    (raw,) = smtp_server.to(LEAD)  # one email: actual 50 % and forecast 100 %
    assert _subject(raw) == ("Budget Vision monthly: actual cost reached 50 %; forecast reached "
                             "100 % (2025-09-01 to 2025-09-30)")  # fmt: skip
    parts = _parts(raw)
    assert set(parts) == {"text/plain", "text/html"}
    text, html = parts["text/plain"], parts["text/html"]
    link = f"https://finops.example.com/budgets/{vision_month.pk}/"
    for body in (text, html):
        assert "Vision monthly" in body
        assert link in body
        assert "1,000.00 USD" in body  # actual
        assert "3,000.00 USD" in body  # forecast
        assert "2,000.00 USD" in body  # amount
        assert "Amazon SageMaker" in body  # the biggest service
    assert "50.00 % used" in text
    assert "Actual cost reached 50 % (1,000.00 USD) on 2025-09-10" in text
    assert "Forecast of the period's end reached 100 % (2,000.00 USD) on 2025-09-02" in text
    assert "<img" not in html
    assert "http://" not in html.replace(link, "")
    assert 'style="' in html


def test_opted_out_user_gets_no_email(
    vision_month: Budget, smtp_server: CapturedMail, lead_user: User
) -> None:
    budget_opt_out_set(budget=vision_month, user=lead_user, opted_out=True)
    _replay(1, 30)
    assert smtp_server.to(LEAD) == []
    assert len(smtp_server.to(LISTED)) == 4


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_smtp_error_is_shown_on_the_budget_page_then_sent(
    vision_month: Budget,
    smtp_server: CapturedMail,
    settings: Settings,
    client: Client,
    finance_user: User,
) -> None:
    port = settings.EMAIL_PORT
    settings.EMAIL_PORT = _closed_port()
    out = io.StringIO()
    # The command says the emails did not go (and exits non-zero), never "alert sent".
    with pytest.raises(CommandError, match="2 alert email"):
        call_command("check_budgets", "--as-of", "2025-09-10", stdout=out)
    assert "alert sent" not in out.getvalue()
    assert "alert email FAILED: actual 50 %: ConnectionRefusedError" in out.getvalue()
    client.force_login(finance_user)

    page = client.get(f"/budgets/{vision_month.pk}/?as_of=2025-09-10").content.decode()
    assert "not sent yet" in page
    assert "ConnectionRefusedError" in page
    api = client.get(f"/api/v1/budgets/{vision_month.pk}/?as_of=2025-09-10").json()
    assert all(a["sent_at"] is None for a in api["alerts"])

    settings.EMAIL_PORT = port
    resend_unsent_notifications()
    page = client.get(f"/budgets/{vision_month.pk}/?as_of=2025-09-10").content.decode()
    assert "not sent yet" not in page
    assert "sent 20" in page
    assert len(smtp_server.to(LEAD)) == 1  # actual 50 % and forecast 100 %, in one email


def test_month_task_evaluates_as_of_the_last_ledger_day_once(
    vision_month: Budget, smtp_server: CapturedMail
) -> None:
    from finops.budgets.tasks import evaluate_budgets_for_month

    first = evaluate_budgets_for_month("2025-09")
    again = evaluate_budgets_for_month("2025-09", pipeline_run_id=7)

    # The ledger ends on the 30th: 3000 of 2000 reaches every threshold, once.
    assert isinstance(first["alerts"], list)
    assert first["as_of"] == "2025-09-30"
    assert len(first["alerts"]) == 4
    assert again["alerts"] == []
    assert len(smtp_server.to(LEAD)) == 1  # the four thresholds in one email
    assert evaluate_budgets_for_month("2025-11") == {"budgets": 0, "alerts": [], "month": "2025-11"}


# --- one email per evaluation -----------------------------------------------------------------


def _text(raw: bytes) -> str:
    return _parts(raw)["text/plain"]


def test_evaluations_days_apart_send_one_email_each_naming_every_crossing(
    vision_month: Budget, smtp_server: CapturedMail
) -> None:
    # Evaluated on the 1st, the 12th and the 30th only (a beat that missed days).
    for dom in (1, 12, 30):
        call_command("check_budgets", "--as-of", f"2025-09-{dom:02d}", stdout=io.StringIO())

    for address in (LEAD, LISTED):
        raws = smtp_server.to(address)
        assert [_subject(r) for r in raws] == [
            "Budget Vision monthly: actual cost reached 50 %; forecast reached 100 % "
            "(2025-09-01 to 2025-09-30)",
            "Budget Vision monthly: actual cost reached 80 % and 100 % (2025-09-01 to 2025-09-30)",
        ]
    first, second = (_text(r) for r in smtp_server.to(LEAD))
    # The 12th's email: 50 % crossed on the 10th, the forecast on the 2nd (the 1st's evaluation
    # saw it below 100 %, the 2nd's forecast 200 + 28 x 100 = 3,000 reached it); 1,200 used.
    assert "Actual cost reached 50 % (1,000.00 USD) on 2025-09-10" in first
    assert "Forecast of the period's end reached 100 % (2,000.00 USD) on 2025-09-02" in first
    assert "As of 2025-09-12" in first
    assert "(60.00 % used)" in first
    assert "Actual cost reached 80 % (1,600.00 USD) on 2025-09-16" in second
    assert "Actual cost reached 100 % (2,000.00 USD) on 2025-09-20" in second
    assert "(150.00 % used)" in second
    crossed = {(a.kind, a.threshold): (a.crossed_on.day, a.as_of.day)
               for a in BudgetAlert.objects.all() if a.crossed_on}  # fmt: skip
    assert crossed == {("actual", 50): (10, 12), ("forecast", 100): (2, 12),
                       ("actual", 80): (16, 30), ("actual", 100): (20, 30)}  # fmt: skip
    assert EmailNotification.objects.count() == 2
    assert _replay().count("alert sent") == 0
    assert len(smtp_server.messages) == 2


def test_budget_made_after_the_fact_is_alerted_once_naming_each_crossing_day(
    team: Team, lead_user: User, tmp_path: Path, smtp_server: CapturedMail, finance_user: User
) -> None:
    from rest_framework.test import APIClient

    lead_user.email = LEAD
    lead_user.save()
    _ingest(_focus_month(tmp_path / "sep.csv", {d: "100" for d in range(1, 31)}))
    api = APIClient()
    api.force_authenticate(finance_user)
    created = api.post("/api/v1/budgets/?as_of=2025-09-30", {
        "name": "Vision late", "team": "vision", "period": "month", "amount": "2000",
        "currency": "USD", "thresholds": [50, 80, 100], "forecast_thresholds": [100],
    }, format="json")  # fmt: skip
    assert created.status_code == 201, created.content
    assert created.json()["receiving"] == [LEAD]
    assert created.json()["warnings"] == []

    # The catch-up: the month is over 100 % already; one evaluation, one email.
    printed = _replay(30, 30) + _replay(30, 30)
    assert printed.count("alert sent") == 4
    (raw,) = smtp_server.to(LEAD)
    assert _subject(raw) == ("Budget Vision late: actual cost reached 50 %, 80 % and 100 %; "
                             "forecast reached 100 % (2025-09-01 to 2025-09-30)")  # fmt: skip
    text = _text(raw)
    lines = [line.strip() for line in text.splitlines() if " reached " in line]
    assert lines == [
        "Forecast of the period's end reached 100 % (2,000.00 USD) on 2025-09-02",
        "Actual cost reached 50 % (1,000.00 USD) on 2025-09-10",
        "Actual cost reached 80 % (1,600.00 USD) on 2025-09-16",
        "Actual cost reached 100 % (2,000.00 USD) on 2025-09-20",
    ]
    assert "3,000.00 USD (150.00 % used)" in text
    html = _parts(raw)["text/html"]
    for day in ("2025-09-02", "2025-09-10", "2025-09-16", "2025-09-20"):
        assert day in html

    body = api.get(f"/api/v1/budgets/{created.json()['id']}/?as_of=2025-09-30").json()
    alerts = {(a["kind"], a["threshold"]): (a["crossed_on"], a["raised_as_of"])
              for a in body["alerts"]}  # fmt: skip
    assert alerts == {
        ("actual", 50): ("2025-09-10", "2025-09-30"),
        ("actual", 80): ("2025-09-16", "2025-09-30"),
        ("actual", 100): ("2025-09-20", "2025-09-30"),
        ("forecast", 100): ("2025-09-02", "2025-09-30"),
    }
    assert all(a["sent_at"] for a in body["alerts"])
    client = Client()
    client.force_login(finance_user)
    page = client.get(f"/budgets/{created.json()['id']}/?as_of=2025-09-30").content.decode()
    for day in ("2025-09-02", "2025-09-10", "2025-09-16", "2025-09-20"):
        assert f'data-testid="crossed-on">{day}<' in page


def test_budget_nobody_receives_says_so_in_the_api_and_on_its_pages(
    team: Team, tmp_path: Path, smtp_server: CapturedMail, finance_user: User, client: Client
) -> None:
    from rest_framework.test import APIClient

    _ingest(_focus_month(tmp_path / "sep.csv", {d: "100" for d in range(1, 31)}))
    api = APIClient()
    api.force_authenticate(finance_user)
    created = api.post("/api/v1/budgets/", {
        "name": "Vision unheard", "team": "vision", "period": "month", "amount": "2000",
        "currency": "USD",
    }, format="json")  # fmt: skip
    assert created.status_code == 201, created.content
    assert created.json()["receiving"] == []
    (warning,) = created.json()["warnings"]
    assert warning.startswith("Nobody receives this budget's alert emails")

    client.force_login(finance_user)
    response = client.post("/budgets/new/", {
        "name": "Org unheard", "team": "", "period": "month", "amount": "5000",
        "currency": "USD", "thresholds": "50, 100", "forecast_thresholds": "100",
    }, follow=True)  # fmt: skip
    page = response.content.decode()
    assert 'data-testid="no-recipients"' in page
    assert "no recipient is listed (an organisation or provider budget has no team leads)" in page

    # The alerts are still raised and shown, with no email.
    call_command("check_budgets", "--as-of", "2025-09-30", stdout=io.StringIO())
    assert smtp_server.messages == []
    assert BudgetAlert.objects.filter(budget__name="Vision unheard").count() == 4
    budget = Budget.objects.get(name="Vision unheard")
    edit = client.get(f"/budgets/{budget.pk}/edit/").content.decode()
    assert 'data-testid="no-recipients"' in edit
    Budget.objects.filter(pk=budget.pk).update(recipients=[LISTED])
    page = client.get(f"/budgets/{budget.pk}/").content.decode()
    assert 'data-testid="no-recipients"' not in page
