"""/api/v1/budgets/: CRUD with the dashboard's exact body, ?as_of= figures, the permissions of
the pages, and every bad input of the issue rejected with 400 and nothing saved."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from finops.budgets.models import Budget
from finops.currency.models import FxRate
from finops.org.models import Team
from tests.budget_data import ledger_days
from tests.smtp import CapturedMail

EXACT_BODY = {
    "name": "Vision monthly",
    "team": "vision",
    "period": "month",
    "amount": "1950.00",
    "currency": "USD",
    "thresholds": [50, 80, 100],
    "forecast_thresholds": [100],
    "recipients": ["vision-lead@example.com"],
}
URL = "/api/v1/budgets/"


@pytest.fixture(autouse=True)
def example_recipients_allowed(settings: Any) -> None:
    """The addresses these bodies list are of example.com, a domain budgets may mail."""
    settings.FINOPS_BUDGET_RECIPIENT_DOMAINS = ["example.com"]


@pytest.fixture
def september(team: Team) -> None:
    # Vision: 100 USD every day of September 2025 (AWS, bill lag 1 day).
    ledger_days(team=team, first=date(2025, 9, 1), amounts=[100] * 30)


def test_dashboard_body_creates_a_budget(
    finance_api: APIClient, team: Team, september: None
) -> None:
    response = finance_api.post(URL, EXACT_BODY, format="json")

    assert response.status_code == 201, response.content
    body = response.json()
    assert body["name"] == "Vision monthly"
    assert body["team"] == "vision"
    assert body["amount"] == "1950.00"
    assert body["currency"] == "USD"
    assert body["thresholds"] == [50, 80, 100]
    assert body["forecast_thresholds"] == [100]
    assert body["recipients"] == ["vision-lead@example.com"]
    budget = Budget.objects.get()
    assert budget.team == team
    assert budget.amount == Decimal("1950.00")
    assert budget.active


def test_as_of_reports_the_period_figures_as_decimal_strings(
    finance_api: APIClient, september: None
) -> None:
    created = finance_api.post(URL, EXACT_BODY, format="json").json()

    body = finance_api.get(f"{URL}{created['id']}/?as_of=2025-09-10").json()

    # Days 1..10 booked: 1000. Complete through the 9th (AWS lag 1): 100 a day; the 10th holds
    # its 100 already; 20 days left x 100 = 2000 -> 3000. 1000 / 1950 = 51.28 %.
    assert body["period_start"] == "2025-09-01"
    assert body["period_end"] == "2025-09-30"
    assert Decimal(body["actual"]) == Decimal(1000)
    assert isinstance(body["actual"], str)
    assert body["forecast"] == "3000.00"
    assert body["forecast_low"] == "3000.00"
    assert body["forecast_high"] == "3000.00"
    assert body["percent_used"] == "51.28"
    assert body["alerts"] == []
    listed = finance_api.get(f"{URL}?as_of=2025-09-30").json()["results"][0]
    assert listed["actual"] == "3000.00"
    assert listed["percent_used"] == "153.85"


@pytest.mark.django_db(transaction=True)  # emails go out on commit
def test_alerts_of_the_period_are_listed(
    finance_api: APIClient, september: None, smtp_server: CapturedMail
) -> None:
    from django.core.management import call_command

    created = finance_api.post(URL, EXACT_BODY, format="json").json()
    call_command("check_budgets", "--as-of", "2025-09-10")

    alerts = finance_api.get(f"{URL}{created['id']}/?as_of=2025-09-10").json()["alerts"]
    assert [(a["kind"], a["threshold"]) for a in alerts] == [("actual", 50), ("forecast", 100)]
    assert all(a["sent_at"] for a in alerts)
    # Another period has its own (none yet).
    assert finance_api.get(f"{URL}{created['id']}/?as_of=2025-10-01").json()["alerts"] == []


def test_bad_as_of_is_400(finance_api: APIClient, september: None) -> None:
    created = finance_api.post(URL, EXACT_BODY, format="json").json()
    assert finance_api.get(f"{URL}{created['id']}/?as_of=2025-13-01").status_code == 400


def test_update_and_delete(finance_api: APIClient, september: None) -> None:
    created = finance_api.post(URL, EXACT_BODY, format="json").json()
    patched = finance_api.patch(f"{URL}{created['id']}/", {"amount": "2500"}, format="json")
    assert patched.status_code == 200
    assert patched.json()["amount"] == "2500.00"
    assert patched.json()["thresholds"] == [50, 80, 100]  # untouched keys kept
    assert finance_api.delete(f"{URL}{created['id']}/").status_code == 204
    assert not Budget.objects.exists()


def test_org_budget_converts_other_currencies(finance_api: APIClient, team: Team) -> None:
    # 100 EUR a day at 1.10 USD (rate dated before the month): an org budget in USD sees 110.
    FxRate.objects.create(date=date(2025, 8, 29), from_currency="EUR", to_currency="USD",
                          rate=Decimal("1.10"))  # fmt: skip
    ledger_days(team=None, first=date(2025, 9, 1), amounts=[100] * 5, currency="EUR")
    body = {**EXACT_BODY, "name": "Org", "team": None, "amount": "10000"}
    created = finance_api.post(URL, body, format="json")
    assert created.status_code == 201, created.content
    got = finance_api.get(f"{URL}{created.json()['id']}/?as_of=2025-09-05").json()
    assert got["actual"] == "550.00"
    assert got["team"] is None


# --- permissions -------------------------------------------------------------------------------


def test_lead_creates_and_sees_only_their_teams(
    lead_api: APIClient, finance_api: APIClient, other_team: Team, september: None
) -> None:
    assert lead_api.post(URL, EXACT_BODY, format="json").status_code == 201
    finance_api.post(URL, {**EXACT_BODY, "name": "Speech", "team": "speech"}, format="json")
    finance_api.post(URL, {**EXACT_BODY, "name": "Org", "team": None}, format="json")
    finance_api.post(URL, {**EXACT_BODY, "name": "AWS", "team": None, "provider": "AWS"},
                     format="json")  # fmt: skip

    names = [b["name"] for b in lead_api.get(URL).json()["results"]]
    assert names == ["Vision monthly"]
    assert len(finance_api.get(URL).json()["results"]) == 4
    speech = Budget.objects.get(name="Speech")
    assert lead_api.get(f"{URL}{speech.pk}/").status_code == 404
    assert lead_api.patch(f"{URL}{speech.pk}/", {"amount": "1"}, format="json").status_code == 404
    assert lead_api.delete(f"{URL}{speech.pk}/").status_code == 404


def test_lead_cannot_save_another_teams_budget(
    lead_api: APIClient, other_team: Team, september: None
) -> None:
    for body in (
        {**EXACT_BODY, "team": "speech"},
        {**EXACT_BODY, "team": None},
        {**EXACT_BODY, "team": None, "provider": "AWS"},
    ):
        response = lead_api.post(URL, body, format="json")
        assert response.status_code == 400, body
    assert not Budget.objects.exists()

    own = lead_api.post(URL, EXACT_BODY, format="json").json()
    moved = lead_api.patch(f"{URL}{own['id']}/", {"team": "speech"}, format="json")
    assert moved.status_code == 400
    assert "team" in moved.json()
    team = Budget.objects.get().team
    assert team is not None
    assert team.slug == "vision"


def test_anonymous_gets_nothing(client: Client, db: None) -> None:
    assert APIClient().get(URL).status_code in (401, 403)


# --- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"amount": "0"}, "amount"),
        ({"amount": "0.00"}, "amount"),
        ({"amount": "-10"}, "amount"),
        ({"amount": "lots"}, "amount"),
        ({"team": "no-such-team"}, "team"),
        ({"thresholds": [0, 50]}, "thresholds"),
        ({"thresholds": [50, 1001]}, "thresholds"),
        ({"thresholds": [-5]}, "thresholds"),
        ({"forecast_thresholds": [2000]}, "forecast_thresholds"),
        ({"currency": "EUR"}, "currency"),
        ({"currency": "dollars"}, "currency"),
        ({"recipients": ["not-an-address"]}, "recipients"),
        ({"period": "week"}, "period"),
        ({"name": ""}, "name"),
    ],
)
def test_bad_input_is_400_and_saves_nothing(
    finance_api: APIClient, september: None, change: dict[str, Any], field: str
) -> None:
    response = finance_api.post(URL, {**EXACT_BODY, **change}, format="json")

    assert response.status_code == 400
    assert field in response.json(), response.json()
    assert not Budget.objects.exists()


def test_bad_update_changes_nothing(finance_api: APIClient, september: None) -> None:
    created = finance_api.post(URL, EXACT_BODY, format="json").json()
    response = finance_api.patch(
        f"{URL}{created['id']}/", {"amount": "-1", "name": "Renamed"}, format="json"
    )
    assert response.status_code == 400
    budget = Budget.objects.get()
    assert budget.name == "Vision monthly"
    assert budget.amount == Decimal("1950.00")


def test_currency_with_a_rate_is_accepted(finance_api: APIClient, september: None) -> None:
    # USD ledger; 1 EUR = 1.25 USD known: a EUR budget converts (USD -> EUR = 0.8).
    FxRate.objects.create(date=date(2025, 9, 1), from_currency="EUR", to_currency="USD",
                          rate=Decimal("1.25"))  # fmt: skip
    response = finance_api.post(URL, {**EXACT_BODY, "currency": "EUR"}, format="json")
    assert response.status_code == 201, response.content
    got = finance_api.get(f"{URL}{response.json()['id']}/?as_of=2025-09-10").json()
    assert got["actual"] == "800.00"
    assert got["currency"] == "EUR"


def test_budgets_are_in_the_openapi_schema(finance_api: APIClient, db: None) -> None:
    schema = finance_api.get("/api/schema/?format=json").json()
    assert "/api/v1/budgets/" in schema["paths"]
    assert {"get", "post"} <= set(schema["paths"]["/api/v1/budgets/"])
    assert {"get", "put", "patch", "delete"} <= set(schema["paths"]["/api/v1/budgets/{id}/"])
    props = schema["components"]["schemas"]["Budget"]["properties"]
    for name in ("actual", "forecast", "forecast_low", "forecast_high", "percent_used", "alerts"):
        assert name in props
