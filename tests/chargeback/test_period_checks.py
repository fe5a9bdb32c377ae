"""GET /api/v1/periods/YYYY-MM/checks/: the month-end checklist (DESIGN 10), on the month of
tests/factories.build_month_scenario (figures worked out by hand in each test)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from billing_ingest.models import ImportBatch
from finops.anomalies.models import Anomaly
from finops.attribution.models import AttributionRun
from finops.budgets.models import Budget
from finops.currency.models import FxRate
from finops.org.models import Team
from tests.factories import ImportBatchFactory, Scenario

URL = "/api/v1/periods/2025-09/checks/"


def _checks(api: APIClient) -> dict[str, Any]:
    response = api.get(URL)
    assert response.status_code == 200, response.content
    body = response.json()
    return {"body": body, **{c["name"]: c for c in body["checks"]}}


def _figures(check: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(f["label"], f["value"], f["unit"]) for f in check["figures"]]


def test_contract_fields_and_order(finance_api: APIClient, scenario: Scenario) -> None:
    found = _checks(finance_api)
    names = [c["name"] for c in found["body"]["checks"]]
    assert names == [
        "imports", "open_jobs", "attribution", "anomalies", "unallocated", "recipients", "budgets",
        "fx_rates",
    ]  # fmt: skip
    for check in found["body"]["checks"]:
        assert {"name", "status", "detail", "link", "action", "figures"} <= check.keys()
        assert check["status"] in {"ok", "warn", "fail"}
        assert check["link"].startswith("/")
    assert found["body"]["month"] == "2025-09"
    # Never attributed, and EUR has no rate: the worst status is fail.
    assert found["body"]["status"] == "fail"


def test_unallocated_share_per_currency(finance_api: APIClient, scenario: Scenario) -> None:
    # USD: unallocated 80.00 of 1200.75 + 300.125 = 1500.875 -> 5.330...% > 5 %;
    # EUR: 50 of 50 -> 100 %.
    check = _checks(finance_api)["unallocated"]
    assert check["status"] == "warn"
    assert _figures(check) == [
        ("unallocated", "80.00", "USD"),
        ("amortised bill", "1500.88", "USD"),
        ("unallocated share (USD)", "5.33", "%"),
        ("unallocated", "50.00", "EUR"),
        ("amortised bill", "50.00", "EUR"),
        ("unallocated share (EUR)", "100.00", "%"),
    ]
    assert "5.33 % of the USD bill" in check["detail"]


def test_threshold_is_a_setting(finance_api: APIClient, scenario: Scenario, settings: Any) -> None:
    settings.FINOPS_CLOSE_UNALLOCATED_PERCENT = "100"
    assert _checks(finance_api)["unallocated"]["status"] == "ok"


def test_attribution_and_fx(finance_api: APIClient, scenario: Scenario) -> None:
    found = _checks(finance_api)
    assert found["attribution"]["status"] == "fail"
    assert "not been attributed" in found["attribution"]["detail"]
    assert found["fx_rates"]["status"] == "fail"
    assert "EUR" in found["fx_rates"]["detail"]
    AttributionRun.objects.create(
        billing_period=scenario.month,
        status=AttributionRun.Status.SUCCEEDED,
        inputs_at=timezone.now(),
        finished_at=timezone.now(),
    )
    FxRate.objects.create(
        date=dt.date(2025, 9, 1), from_currency="EUR", to_currency="USD", rate=Decimal("1.1")
    )
    found = _checks(finance_api)
    assert found["attribution"]["status"] == "ok"
    assert found["fx_rates"]["status"] == "ok"


def test_failed_and_stale_imports(finance_api: APIClient, scenario: Scenario) -> None:
    assert _checks(finance_api)["imports"]["status"] == "ok"
    # A failure imported again since is settled; one not imported again is not.
    ImportBatchFactory.create(source="gcp", status=ImportBatch.Status.FAILED)
    ImportBatchFactory.create(source="gcp")
    ImportBatchFactory.create(source="azure", status=ImportBatch.Status.FAILED, file_name="a.csv")
    old = timezone.now() - dt.timedelta(hours=2)
    ImportBatchFactory.create(source="coreweave", status=ImportBatch.Status.RUNNING,
                              heartbeat_at=old)  # fmt: skip
    # Another month's failure is not this month's.
    ImportBatchFactory.create(source="x", status=ImportBatch.Status.FAILED,
                              billing_periods=["2025-10"])  # fmt: skip
    check = _checks(finance_api)["imports"]
    assert check["status"] == "fail"
    assert _figures(check) == [
        ("failed imports", "1", ""),
        ("stale imports", "1", ""),
        ("imports in progress", "0", ""),
    ]
    assert "azure (a.csv)" in check["detail"]


def test_open_anomalies_with_their_impact(
    finance_api: APIClient, scenario: Scenario, team: Team
) -> None:
    common: dict[str, Any] = {
        "team": team, "series_kind": Anomaly.Series.TEAM, "kind": Anomaly.Kind.SPIKE,
        "detected_on": dt.date(2025, 9, 5), "currency": "USD", "actual": Decimal("500"),
        "expected": Decimal("100"), "unexplained": Decimal("0"), "severity": "high",
    }  # fmt: skip
    Anomaly.objects.create(
        identity="a",
        first_day=dt.date(2025, 8, 30),
        last_day=dt.date(2025, 9, 2),
        impact=Decimal("400.004"),
        **common,
    )
    Anomaly.objects.create(
        identity="b",
        first_day=dt.date(2025, 9, 20),
        last_day=dt.date(2025, 9, 20),
        impact=Decimal("99.996"),
        status=Anomaly.Status.ACKNOWLEDGED,
        **common,
    )
    Anomaly.objects.create(
        identity="c",
        first_day=dt.date(2025, 9, 21),
        last_day=dt.date(2025, 9, 21),
        impact=Decimal("7"),
        status=Anomaly.Status.RESOLVED,
        **common,
    )
    Anomaly.objects.create(
        identity="d",
        first_day=dt.date(2025, 10, 1),
        last_day=dt.date(2025, 10, 2),
        impact=Decimal("9"),
        **common,
    )
    check = _checks(finance_api)["anomalies"]
    # a (overlaps 1-2 Sep) + b: 400.004 + 99.996 = 500.00 USD; c resolved, d October.
    assert check["status"] == "warn"
    assert _figures(check) == [("open anomalies", "2", ""), ("their impact", "500.00", "USD")]
    assert check["detail"] == "2 anomalies of the month are new or acknowledged."


def test_teams_without_a_statement_recipient(
    finance_api: APIClient, scenario: Scenario, lead_user: Any
) -> None:
    check = _checks(finance_api)["recipients"]
    # The lead of vision has no email yet: neither team would get its statement.
    assert check["status"] == "warn"
    assert "Speech" in check["detail"]
    assert "Vision" in check["detail"]
    lead_user.email = "lead@example.com"
    lead_user.save()
    check = _checks(finance_api)["recipients"]
    assert "Vision" not in check["detail"]
    assert "Speech" in check["detail"]
    assert _figures(check) == [
        ("teams with cost", "2", ""),
        ("teams without a lead email", "1", ""),
    ]


def test_budgets_over(finance_api: APIClient, scenario: Scenario, team: Team) -> None:
    # Vision's ledger in September: 400.25 + 100 + 50 (AWS) + 100 (GCP idle) = 650.25 USD.
    Budget.objects.create(name="vision-monthly", team=team, amount=Decimal("600"), currency="USD")
    Budget.objects.create(name="vision-big", team=team, amount=Decimal("700"), currency="USD")
    check = _checks(finance_api)["budgets"]
    assert check["status"] == "warn"
    assert _figures(check) == [
        ("vision-monthly: actual", "650.25", "USD"),
        ("vision-monthly: budget", "600.00", "USD"),
    ]


@pytest.mark.parametrize("path", [URL, "/api/v1/periods/2025-9/checks/"])
def test_leads_are_refused(lead_api: APIClient, path: str) -> None:
    assert lead_api.get(path).status_code == 403


def test_bad_month_is_404(finance_api: APIClient) -> None:
    assert finance_api.get("/api/v1/periods/2025-13/checks/").status_code == 404
    assert finance_api.get("/api/v1/periods/hello/checks/").status_code == 404


# --- the Close page: checklist, confirmation, who got a statement -------------------------------


def test_close_review_lists_who_gets_a_statement_and_asks_to_confirm(
    tmp_path: Any, finance_client: Any, lead_user: Any, team: Team, other_team: Team
) -> None:
    from finops.chargeback.models import ClosedPeriod
    from finops.notifications.models import EmailNotification
    from tests.close_data import ingest, write_focus

    lead_user.email = "lead@example.com"
    lead_user.save()
    ingest(write_focus(tmp_path / "sept.csv", "2025-09", [("r1", "vision", "100.00"),
                                                         ("r2", "speech", "50.00")]))  # fmt: skip
    page = finance_client.get("/close/2025-09/")
    assert page.status_code == 200
    text = page.content.decode()
    for name in ("imports", "attribution", "anomalies", "unallocated", "recipients", "budgets"):
        assert f'data-testid="check-{name}"' in text
    assert "lead@example.com" in text
    assert "1 team will get a statement email; 1 will not (Speech)" in text
    # No confirmation: nothing closed, nothing in the outbox.
    response = finance_client.post("/close/2025-09/close/", {"reason": ""}, follow=True)
    assert b"tick the confirmation" in response.content
    assert not ClosedPeriod.objects.exists()
    assert not EmailNotification.objects.filter(kind="statement").exists()
    response = finance_client.post(
        "/close/2025-09/close/", {"reason": "", "confirm": "yes"}, follow=True
    )
    text = response.content.decode()
    assert "September 2025 is closed; 1 statement email queued in the outbox" in text
    assert "1 team got a statement email; 1 did not (Speech)" in text
    (sent,) = EmailNotification.objects.filter(kind="statement")
    assert sent.recipients == ["lead@example.com"]
    assert sent.key.startswith("statement:vision:2025-09:")


def test_close_review_is_finance_only(client: Any, lead_user: Any, viewer_user: Any) -> None:
    client.force_login(lead_user)
    assert client.get("/close/2025-09/").status_code == 403
    client.force_login(viewer_user)
    page = client.get("/close/2025-09/")
    assert page.status_code == 200
    assert b"close-form" not in page.content
