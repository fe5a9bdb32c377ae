"""Budget pages (Django test client): the list sorted over-budget first with bars, sortable
columns, the budget page's burn-down table and alerts, the forms' field errors with nothing
saved, the team page's budgets, and what a team lead may see."""

from __future__ import annotations

import re
from datetime import date
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from finops.budgets.models import Budget
from finops.org.models import Profile, Team
from tests.budget_data import ledger_days

pytestmark = pytest.mark.django_db
AS_OF = "2025-09-10"


@pytest.fixture(autouse=True)
def example_recipients_allowed(settings: Any) -> None:
    """The addresses these bodies list are of example.com, a domain budgets may mail."""
    settings.FINOPS_BUDGET_RECIPIENT_DOMAINS = ["example.com"]


@pytest.fixture
def budgets(team: Team, other_team: Team) -> dict[str, Budget]:
    ledger_days(team=team, first=date(2025, 9, 1), amounts=[100] * 30)
    ledger_days(team=other_team, first=date(2025, 9, 1), amounts=[10] * 30)
    common = {"period": "month", "currency": "USD", "thresholds": [50, 80, 100],
              "forecast_thresholds": [100]}  # fmt: skip
    return {
        # As of the 10th: vision actual 1000, forecast 3000; speech actual 100, forecast 300.
        "under": Budget.objects.create(name="A vision roomy", team=team, amount=5000, **common),
        "at_risk": Budget.objects.create(name="B vision tight", team=team, amount=2000, **common),
        "over": Budget.objects.create(name="C vision over", team=team, amount=900, **common),
        "speech": Budget.objects.create(name="D speech", team=other_team, amount=1000, **common),
    }


def _names(html: str) -> list[str]:
    return re.findall(r'data-testid="budget-row">\s*<td><a [^>]*>([^<]+)</a>', html)


def test_list_puts_over_then_forecast_over_first_and_sorts(
    client: Client, finance_user: User, budgets: dict[str, Budget]
) -> None:
    client.force_login(finance_user)
    html = client.get(f"/budgets/?as_of={AS_OF}").content.decode()
    # Over (111 %), forecast over (50 % used, 3000 > 2000), then by % used: 20 % and 10 %.
    assert _names(html) == ["C vision over", "B vision tight", "A vision roomy", "D speech"]
    assert '<progress class="budget-bar over" max="100" value="100.0">' in html
    assert "1,000.00 USD" in html
    assert "3,000.00 USD" in html

    by_name = client.get(f"/budgets/?as_of={AS_OF}&sort=name").content.decode()
    assert _names(by_name) == ["A vision roomy", "B vision tight", "C vision over", "D speech"]
    by_amount = client.get(f"/budgets/?as_of={AS_OF}&sort=-amount").content.decode()
    assert _names(by_amount)[0] == "A vision roomy"


def test_lead_sees_only_their_teams_budgets(
    client: Client, lead_user: User, budgets: dict[str, Budget]
) -> None:
    client.force_login(lead_user)
    html = client.get(f"/budgets/?as_of={AS_OF}").content.decode()
    assert "D speech" not in _names(html)
    assert len(_names(html)) == 3
    assert client.get(f"/budgets/{budgets['speech'].pk}/").status_code == 404
    assert client.get(f"/budgets/{budgets['speech'].pk}/edit/").status_code == 404


def test_budget_page_has_burn_down_data_and_chart(
    client: Client, finance_user: User, budgets: dict[str, Budget]
) -> None:
    client.force_login(finance_user)
    html = client.get(f"/budgets/{budgets['at_risk'].pk}/?as_of={AS_OF}").content.decode()
    assert 'data-chart="burn-down"' in html
    assert 'id="burn-down"' in html
    rows = re.findall(r"<tr><td>(2025-09-\d\d)</td>", html)
    assert rows[0] == "2025-09-01"
    assert rows[-1] == "2025-09-30"
    assert len(rows) == 30
    # Cumulative actual on the 10th, the forecast reaching 3000 on the 30th, the 80 % line.
    assert 'data-value="1000.00"' in html
    assert 'data-value="3000.00"' in html
    assert '<th class="num">80 %</th>' in html
    assert 'data-value="1600' in html
    assert "vendor/chartjs/chart.umd.min.js" in html
    assert "<script>" not in html


def test_team_page_shows_the_teams_budgets(
    client: Client, finance_user: User, budgets: dict[str, Budget], team: Team
) -> None:
    client.force_login(finance_user)
    html = client.get(f"/teams/{team.slug}/?month=2025-09").content.decode()
    assert 'data-testid="team-budgets"' in html
    assert "A vision roomy" in html
    assert "C vision over" in html
    assert "D speech" not in html


def test_create_form_shows_field_errors_and_saves_nothing(
    client: Client, lead_user: User, team: Team, other_team: Team
) -> None:
    client.force_login(lead_user)
    response = client.post("/budgets/new/", {
        "name": "", "team": "speech", "period": "month", "amount": "-5", "currency": "USD",
        "thresholds": "50, 2000", "forecast_thresholds": "100", "recipients": "nope",
    })  # fmt: skip
    html = response.content.decode()
    assert response.status_code == 200
    for field in ("name", "amount", "thresholds", "recipients"):
        assert f'data-testid="error-{field}"' in html, field
    assert not Budget.objects.exists()

    ok = client.post("/budgets/new/", {
        "name": "Vision", "team": "vision", "period": "month", "amount": "1950.00",
        "currency": "USD", "thresholds": "50, 80, 100", "forecast_thresholds": "100",
        "recipients": "x@example.com", "active": "on",
    })  # fmt: skip
    budget = Budget.objects.get()
    assert ok.status_code == 302
    assert ok["Location"] == f"/budgets/{budget.pk}/"
    assert budget.amount == Decimal("1950.00")
    assert budget.recipients == ["x@example.com"]


def test_edit_form_keeps_the_budget_when_invalid(
    client: Client, finance_user: User, budgets: dict[str, Budget]
) -> None:
    client.force_login(finance_user)
    budget = budgets["under"]
    response = client.post(f"/budgets/{budget.pk}/edit/", {
        "name": "Renamed", "team": "vision", "period": "month", "amount": "0",
        "currency": "USD", "thresholds": "50", "forecast_thresholds": "100", "recipients": "",
    })  # fmt: skip
    assert 'data-testid="error-amount"' in response.content.decode()
    budget.refresh_from_db()
    assert budget.name == "A vision roomy"
    assert budget.amount == Decimal(5000)


def test_opt_out_toggles(client: Client, lead_user: User, budgets: dict[str, Budget]) -> None:
    client.force_login(lead_user)
    budget = budgets["under"]
    client.post(f"/budgets/{budget.pk}/emails/", {"stop": "1"})
    assert budget.opt_outs.filter(user=lead_user).exists()
    client.post(f"/budgets/{budget.pk}/emails/", {"stop": "0"})
    assert not budget.opt_outs.exists()


def test_pages_need_login(client: Client, budgets: dict[str, Budget]) -> None:
    assert client.get("/budgets/").status_code == 302
    assert client.get(f"/budgets/{budgets['under'].pk}/").status_code == 302


def test_recipients_show_who_turned_budget_emails_off(
    client: Client, finance_user: User, budgets: dict[str, Budget], team: Team
) -> None:
    """A lead who turned budget emails off in their email settings is not sent the alert, so
    the budget page lists them as opted out, not among the recipients."""
    from finops.notifications.models import NotificationPreference

    for name in ("ann", "bob"):
        user = User.objects.create_user(name, email=f"{name}@example.com", password="pw-123456789")
        Profile.objects.create(user=user, role=Profile.Role.TEAM_LEAD).teams.add(team)
    NotificationPreference.objects.create(
        user=User.objects.get(username="bob"), budget_emails=False
    )
    budget = budgets["under"]
    budget.recipients = ["ops@example.com"]
    budget.save()

    client.force_login(finance_user)
    html = client.get(f"/budgets/{budget.pk}/?as_of={AS_OF}").content.decode()
    receiving = re.search(r'data-testid="recipients">([^<]*)<', html)
    opted_out = re.search(r'data-testid="recipients-opted-out">([^<]*)<', html)
    assert receiving
    assert receiving.group(1) == "ann@example.com, ops@example.com"
    assert opted_out
    assert opted_out.group(1) == "bob@example.com"
