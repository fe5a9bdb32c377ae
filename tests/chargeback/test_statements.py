"""Chargeback statements: a team's month in every category, runs, endpoints, shared and idle
shares, in the reporting currency with native amounts beside; as a page, a CSV and a PDF from
the same figures; through the API for the teams the caller may see."""

from __future__ import annotations

import csv
import datetime as dt
import io
from collections.abc import Iterable
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction
from typing import cast

import pytest
from django.contrib.auth.models import User
from django.test import Client
from pypdf import PdfReader
from rest_framework.test import APIClient

from finops.attribution.models import AllocatedCost, Category
from finops.chargeback import documents
from finops.chargeback.selectors import statement_get, statements_build
from finops.currency.models import FxRate
from finops.org.models import Team
from finops.web.templatetags.finops_tags import money
from tests.factories import AllocatedCostFactory, JobRecordFactory

pytestmark = pytest.mark.django_db

MONTH = dt.date(2025, 9, 1)
DAY1 = dt.date(2025, 9, 3)
DAY2 = dt.date(2025, 9, 4)
# EUR -> USD on each day (the rate is dated the day itself).
RATES = {DAY1: Decimal("1.1"), DAY2: Decimal("1.2")}


@pytest.fixture
def ledger(team: Team, other_team: Team) -> list[AllocatedCost]:
    """The Vision team's month: training (two runs), inference (one endpoint), tagged, shared
    and idle, in USD and EUR, with amounts below the cent; plus rows of another team and of no
    team that its statement must leave out (but count in the organisation's shared/idle)."""
    for day, rate in RATES.items():
        FxRate.objects.create(date=day, from_currency="EUR", to_currency="USD", rate=rate)
    job_a = JobRecordFactory.create(run_id="llama-7b")
    job_b = JobRecordFactory.create(run_id="resnet")
    pod = JobRecordFactory.create(run_id="serve-pod", endpoint="chat-v1")
    rows = [
        # (day, category, job, run, amount, currency, gpu_seconds)
        (DAY1, Category.TRAINING, job_a, "llama-7b", "400.123456789012", "USD", 28800),
        (DAY2, Category.TRAINING, job_a, "llama-7b", "99.876543210988", "USD", 7200),
        (DAY1, Category.TRAINING, job_b, "resnet", "10.005", "EUR", 3600),
        (DAY2, Category.INFERENCE, pod, "serve-pod", "33.333333333333", "USD", 1800),
        (DAY1, Category.TAGGED, None, "", "12.000000000001", "USD", 0),
        (DAY2, Category.SHARED, None, "", "7.5", "EUR", 0),
        (DAY1, Category.IDLE, None, "", "20.25", "USD", 0),
    ]
    vision: list[AllocatedCost] = []
    for day, category, job, run, amount, currency, gpu in rows:
        vision.append(
            AllocatedCostFactory.create(
                day=day, category=category, team=team, job=job, run_id=run,
                amount=Decimal(amount), billing_currency=currency, gpu_seconds=Decimal(gpu),
            )
        )  # fmt: skip
    AllocatedCostFactory.create(team=other_team, category=Category.SHARED, amount=Decimal("2.5"),
                                billing_currency="EUR", day=DAY2)  # fmt: skip
    AllocatedCostFactory.create(
        team=None, category=Category.IDLE, amount=Decimal("79.75"), day=DAY1
    )
    AllocatedCostFactory.create(
        team=None, category=Category.UNALLOCATED, amount=Decimal("5"), day=DAY1
    )
    return vision


def _native_sums(rows: Iterable[AllocatedCost]) -> dict[str, Decimal]:
    sums: dict[str, Decimal] = {}
    for row in rows:
        sums[row.billing_currency] = sums.get(row.billing_currency, Decimal(0)) + row.amount
    return sums


def test_statement_figures_sum_to_the_team_ledger(team: Team, ledger: list[AllocatedCost]) -> None:
    statement = statement_get(team=team, month=MONTH)
    assert statement.status == "open"
    assert statement.currency == "USD"
    expected = _native_sums(ledger)
    assert {n.currency: n.amount for n in statement.ledger_native} == expected
    assert {n.currency: n.amount for n in statement.total_native} == expected
    # Every category line is the exact sum of that category's rows.
    for line in statement.categories:
        rows = [r for r in ledger if r.category == line.key and r.billing_currency == line.currency]
        assert line.amount == sum((r.amount for r in rows), Decimal(0))
    # Reporting currency: each row at its day's rate; the statement's total is the sum of its
    # rounded lines, equal to the exact converted sum to the cent.
    exact = sum(
        Fraction(r.amount) * (Fraction(RATES[r.day]) if r.billing_currency == "EUR" else 1)
        for r in ledger
    )
    reported = [line.reporting_amount for line in statement.categories]
    assert None not in reported
    assert statement.total_reporting == sum(cast(list[Decimal], reported))
    assert statement.total_reporting.quantize(Decimal("0.01")) == Decimal(
        round(exact * 100)
    ).scaleb(-2)
    eur_training = next(
        ln for ln in statement.categories if ln.key == "training" and ln.currency == "EUR"
    )
    assert eur_training.reporting_amount == Decimal("11.005500000000")  # 10.005 x 1.1


def test_statement_runs_endpoints_and_shares(team: Team, ledger: list[AllocatedCost]) -> None:
    statement = statement_get(team=team, month=MONTH)
    runs = {(ln.key, ln.currency): ln for ln in statement.runs}
    assert set(runs) == {("llama-7b", "USD"), ("resnet", "EUR")}
    assert runs[("llama-7b", "USD")].amount == Decimal("500.000000000000")
    assert runs[("llama-7b", "USD")].gpu_hours == 10  # 36000 s
    # The pod serving an endpoint is an endpoint line, not a training run.
    assert [(ln.key, ln.amount) for ln in statement.endpoints] == [
        ("chat-v1", Decimal("33.333333333333"))
    ]
    shares = {(s.category, s.currency): s for s in statement.shares}
    # Shared: 7.5 of the organisation's 10 EUR; idle: 20.25 of 100 USD.
    assert shares[("shared", "EUR")].fraction == Decimal("0.75")
    assert shares[("idle", "USD")].org_amount == Decimal("100")
    assert shares[("idle", "USD")].fraction == Decimal("0.2025")


def test_only_teams_with_figures_get_a_statement(
    team: Team, other_team: Team, ledger: list[AllocatedCost]
) -> None:
    slugs = [s.team.slug for s in statements_build(month=MONTH)]
    assert slugs == ["speech", "vision"]
    assert statements_build(month=dt.date(2025, 10, 1)) == []


def test_missing_rate_is_reported_not_guessed(team: Team, ledger: list[AllocatedCost]) -> None:
    FxRate.objects.all().delete()
    statement = statement_get(team=team, month=MONTH)
    assert "EUR" in statement.fx_error
    assert statement.total_reporting is None
    assert {n.currency: n.amount for n in statement.total_native} == _native_sums(ledger)


def test_csv_and_pdf_come_from_the_same_figures(team: Team, ledger: list[AllocatedCost]) -> None:
    statement = statement_get(team=team, month=MONTH)
    rows = list(csv.DictReader(io.StringIO(documents.statement_csv(statement))))
    categories = [r for r in rows if r["section"] == "category"]
    assert {(r["item"], r["currency"]): Decimal(r["amount_exact"]) for r in categories} == {
        (ln.key, ln.currency): ln.amount for ln in statement.categories
    }
    # `amount` is the same figure to the cent.
    for row in rows:
        if row["amount_exact"]:
            cents = Decimal(row["amount_exact"]).quantize(Decimal("0.01"), ROUND_HALF_UP)
            assert Decimal(row["amount"]) == cents
            assert row["amount"] == f"{cents:f}"
    totals = {r["currency"]: Decimal(r["amount_exact"]) for r in rows if r["section"] == "total"
              and r["currency"]}  # fmt: skip
    assert totals == _native_sums(ledger)
    # The rows marked in_total add up to each currency's total; the others are breakdowns.
    for currency, total in totals.items():
        summed = sum(
            (Decimal(r["amount_exact"]) for r in rows
             if r["in_total"] == "yes" and r["currency"] == currency),
            Decimal(0),
        )  # fmt: skip
        assert summed == total
    assert {r["in_total"] for r in rows if r["section"] in ("run", "endpoint")} == {"no"}
    reporting_total = next(
        r for r in rows if r["section"] == "total" and r["reporting_amount_exact"]
    )
    assert Decimal(reporting_total["reporting_amount_exact"]) == statement.total_reporting
    assert {r["item"] for r in rows if r["section"] == "run"} == {"llama-7b", "resnet"}
    assert {r["item"] for r in rows if r["section"] == "endpoint"} == {"chat-v1"}

    pdf = documents.statement_pdf(statement)
    assert pdf.startswith(b"%PDF-")
    text = "\n".join(page.extract_text() for page in PdfReader(io.BytesIO(pdf)).pages)
    assert "Chargeback statement" in text
    assert "Vision" in text
    assert "September 2025" in text
    assert f"{money(statement.total_reporting)} USD" in text
    usd = sum((r.amount for r in ledger if r.billing_currency == "USD"), Decimal(0))
    assert f"{money(usd)} USD" in text  # 565.58, the native USD total
    assert "llama-7b" in text
    assert "chat-v1" in text


def test_statement_page_and_downloads_respect_teams(
    client: Client, lead_user: User, team: Team, other_team: Team, ledger: list[AllocatedCost]
) -> None:
    client.force_login(lead_user)
    page = client.get("/teams/vision/statements/2025-09/")
    assert page.status_code == 200
    assert money(statement_get(team=team, month=MONTH).total_reporting).encode() in page.content
    csv_response = client.get("/teams/vision/statements/2025-09.csv")
    assert csv_response["Content-Type"].startswith("text/csv")
    assert 'filename="statement-vision-2025-09.csv"' in csv_response["Content-Disposition"]
    pdf_response = client.get("/teams/vision/statements/2025-09.pdf")
    assert pdf_response["Content-Type"] == "application/pdf"
    assert pdf_response.content.startswith(b"%PDF-")
    # Another team's statement is as absent as a team that does not exist.
    assert client.get("/teams/speech/statements/2025-09/").status_code == 404
    assert client.get("/teams/speech/statements/2025-09.csv").status_code == 404
    assert client.get("/teams/vision/statements/2025-13/").status_code == 404
    # The team page links to its statement.
    assert (
        b"/teams/vision/statements/2025-09.pdf"
        in client.get("/teams/vision/?month=2025-09").content
    )


def test_api_lists_statements_and_serves_files(
    lead_user: User, finance_user: User, team: Team, ledger: list[AllocatedCost]
) -> None:
    api = APIClient()
    api.force_authenticate(lead_user)
    listed = api.get("/api/v1/statements/?month=2025-09").json()
    assert [s["team"] for s in listed] == ["vision"]
    item = listed[0]
    statement = statement_get(team=team, month=MONTH)
    assert item["status"] == "open"
    assert item["currency"] == "USD"
    assert Decimal(item["total"]) == statement.total_reporting
    assert {n["currency"]: Decimal(n["amount"]) for n in item["native_totals"]} == _native_sums(
        ledger
    )
    assert item["pdf_url"].endswith("/api/v1/statements/vision/2025-09.pdf")
    assert api.get(item["csv_url"]).content.decode().startswith("team,month,status,")
    assert api.get(item["pdf_url"]).content.startswith(b"%PDF-")
    detail = api.get("/api/v1/statements/vision/2025-09/").json()
    assert {r["item"] for r in detail["runs"]} == {"llama-7b", "resnet"}
    assert api.get("/api/v1/statements/speech/2025-09/").status_code == 404
    assert api.get("/api/v1/statements/?month=2025-9").status_code == 400
    api.force_authenticate(finance_user)
    everyone = api.get("/api/v1/statements/?month=2025-09").json()
    assert [s["team"] for s in everyone] == ["speech", "vision"]
    assert [s["team"] for s in api.get("/api/v1/statements/?month=2025-09&team=speech").json()] == [
        "speech"
    ]


def test_schema_documents_the_statement_endpoints(finance_user: User) -> None:
    api = APIClient()
    api.force_authenticate(finance_user)
    schema = api.get("/api/schema/?format=json").json()
    assert "/api/v1/statements/" in schema["paths"]
    files = schema["paths"]["/api/v1/statements/{team}/{month}.{extension}"]["get"]
    assert set(files["responses"]["200"]["content"]) == {"text/csv", "application/pdf"}


def test_page_names_how_many_runs_and_links_the_csv(team: Team, finance_client: Client) -> None:
    """'the 100 largest of 103 runs' (counts with the count formatter), and where the rest are:
    a link to the statement CSV on the page (the PDF names the CSV without a link)."""
    from finops.chargeback.selectors import RUNS_SHOWN

    for i in range(RUNS_SHOWN + 3):
        AllocatedCostFactory.create(team=team, run_id=f"run-{i:03d}", amount=Decimal(i + 1) / 100)
    html = finance_client.get(f"/teams/{team.slug}/statements/2025-09/").content.decode()
    assert f"(the {RUNS_SHOWN} largest of {RUNS_SHOWN + 3} runs)" in html
    assert f'href="/teams/{team.slug}/statements/2025-09.csv">statement CSV</a>' in html


def test_page_and_pdf_list_the_largest_runs_and_sum_the_others(team: Team) -> None:
    from finops.chargeback.selectors import RUNS_SHOWN

    count = RUNS_SHOWN + 3
    for i in range(count):
        AllocatedCostFactory.create(team=team, run_id=f"run-{i:03d}", amount=Decimal(i + 1) / 100)
    statement = statement_get(team=team, month=MONTH)
    shown = statement.runs_shown
    assert len(shown) == RUNS_SHOWN
    # The largest first: run-102 (1.03) down to run-003 (0.04); the 3 smallest summed.
    assert shown[0].key == f"run-{count - 1:03d}"
    assert shown[-1].key == "run-003"
    [others] = statement.runs_others
    assert others.key == "3 other runs"
    assert others.amount == Decimal("0.06")  # 0.01 + 0.02 + 0.03
    everything = sum((Decimal(i + 1) / 100 for i in range(count)), Decimal(0))
    assert sum((ln.amount for ln in shown), others.amount) == everything
    rows = list(csv.DictReader(io.StringIO(documents.statement_csv(statement))))
    assert len([r for r in rows if r["section"] == "run"]) == count
    text = PdfReader(io.BytesIO(documents.statement_pdf(statement))).pages[-1].extract_text()
    assert "3 other runs" in text
