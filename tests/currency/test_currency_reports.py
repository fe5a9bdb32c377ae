"""Reporting currency: pages and the costs API convert per day (exact, rounded once), show the
native amounts beside, and turn a missing rate into an explicit error, never a silent 1.0."""

from __future__ import annotations

import csv
import datetime as dt
import io
import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from pytest_django import DjangoAssertNumQueries, Settings
from rest_framework.test import APIClient

from finops.attribution.models import Category, TeamDailyCost
from finops.attribution.selectors.team import team_month
from finops.currency.models import FxRate
from finops.currency.selectors import money_round
from finops.org.models import Team
from finops.web.templatetags.finops_tags import money
from tests.client_types import Response
from tests.factories import CostLineItemFactory, Scenario, TeamDailyCostFactory, TeamFactory

MONTH = dt.date(2025, 9, 1)
EUR_USD = Decimal("1.1717")
MISSING = "no EUR\u2192USD rate on or before 2025-09-03: load FX rates"


def _rate(day: dt.date, from_currency: str, to_currency: str, rate: str | Decimal) -> None:
    FxRate.objects.create(
        date=day, from_currency=from_currency, to_currency=to_currency, rate=Decimal(rate)
    )


@pytest.fixture
def eur_rate(db: None) -> None:
    _rate(dt.date(2025, 8, 29), "EUR", "USD", EUR_USD)


def _text(response: Response) -> str:
    assert response.status_code == 200, response.status_code
    return re.sub(r"\s+", " ", response.content.decode())


def _in_usd(rows: Iterable[TeamDailyCost], rates: dict[str, Fraction]) -> Fraction:
    """Exact USD value of TeamDailyCost rows; rates: currency -> Fraction (USD is 1)."""
    return sum((Fraction(r.amount) * rates.get(r.billing_currency, 1) for r in rows), Fraction(0))


# --- pages --------------------------------------------------------------------------------


def test_overview_shows_converted_total_beside_native(
    finance_client: Client, scenario: Scenario, eur_rate: None
) -> None:
    html = _text(finance_client.get(reverse("web:overview"), {"month": "2025-09"}))
    rows = list(TeamDailyCost.objects.filter(billing_period=MONTH))
    expected = money_round(_in_usd(rows, {"EUR": Fraction(EUR_USD)}))
    assert expected == Decimal("1500.875") + Decimal(50) * EUR_USD
    assert f'data-testid="reporting-total">{money(expected)}<' in html
    assert "Total attributed (USD, converted)" in html
    # Native amounts still shown, per currency.
    usd = sum((r.amount for r in rows if r.billing_currency == "USD"), Decimal(0))
    assert f'data-testid="total-USD">{money(usd)}<' in html
    assert f'data-testid="total-EUR">{money(Decimal(50))}<' in html
    # The no-team row: its USD amounts plus the EUR unallocated converted.
    unowned = [r for r in rows if r.team_id is None]
    converted = money_round(_in_usd(unowned, {"EUR": Fraction(EUR_USD)}))
    assert f'data-testid="reporting-team-none">{money(converted)}<' in html
    assert 'data-testid="fx-error"' not in html


def test_overview_without_rate_shows_native_and_the_error(
    finance_client: Client, scenario: Scenario
) -> None:
    html = _text(finance_client.get(reverse("web:overview"), {"month": "2025-09"}))
    assert 'data-testid="fx-error"' in html
    assert MISSING in html
    assert 'data-testid="reporting-total"' not in html
    assert f'data-testid="total-EUR">{money(Decimal(50))}<' in html
    assert 'data-testid="total-USD">1,500.88<' in html


def test_overview_in_reporting_currency_needs_no_rate(
    finance_client: Client, team: Team, settings: Settings
) -> None:
    settings.FINOPS_REPORTING_CURRENCY = "EUR"
    TeamDailyCostFactory.create(team=team, billing_currency="EUR", amount=Decimal("12.345"))
    html = _text(finance_client.get(reverse("web:overview"), {"month": "2025-09"}))
    # One currency, the reporting one: its tables once, with no "converted" copy and no error.
    assert 'data-testid="total-EUR">12.35<' in html
    assert 'data-testid="reporting-total"' not in html
    assert 'data-testid="fx-error"' not in html
    assert "Cost over time (EUR)" in html


def test_team_page_converts_each_day_at_its_rate(finance_client: Client, team: Team) -> None:
    days = [dt.date(2025, 9, d) for d in (1, 2, 3)]
    # The rate changes on the 2nd; the 3rd uses the 2nd's (newest on or before).
    _rate(dt.date(2025, 9, 1), "EUR", "USD", "1.10")
    _rate(dt.date(2025, 9, 2), "EUR", "USD", "1.20")
    rates = {days[0]: Fraction("1.10"), days[1]: Fraction("1.20"), days[2]: Fraction("1.20")}
    amounts = [Decimal("100.123456789012"), Decimal("200.000000000001"), Decimal("0.5")]
    for day, amount in zip(days, amounts, strict=True):
        TeamDailyCostFactory.create(team=team, day=day, billing_currency="EUR", amount=amount)
    TeamDailyCostFactory.create(team=team, day=days[0], category=Category.IDLE, amount=Decimal("7"))
    html = _text(finance_client.get(reverse("web:team", args=[team.slug]), {"month": "2025-09"}))
    exact = sum((Fraction(a) * rates[d] for d, a in zip(days, amounts, strict=True)), Fraction(7))
    assert f'data-testid="team-reporting-total">{money(money_round(exact))}<' in html
    # The converted daily series: day 1 is its EUR converted plus the USD idle.
    day1 = money_round(Fraction(amounts[0]) * rates[days[0]] + 7)
    assert money(day1) in html
    # Native totals stay beside.
    assert f'data-testid="team-total-EUR">{money(sum(amounts))}<' in html
    assert f'data-testid="team-total-USD">{money(Decimal(7))}<' in html


def test_team_page_without_rate_shows_error(finance_client: Client, team: Team) -> None:
    TeamDailyCostFactory.create(team=team, billing_currency="EUR", amount=Decimal("5"))
    html = _text(finance_client.get(reverse("web:team", args=[team.slug]), {"month": "2025-09"}))
    assert MISSING in html
    assert f'data-testid="team-total-EUR">{money(Decimal(5))}<' in html
    assert 'data-testid="team-reporting-total"' not in html


def test_reconciliation_stays_native_with_a_converted_grand_total(
    finance_client: Client, scenario: Scenario, eur_rate: None
) -> None:
    html = _text(finance_client.get(reverse("web:reconciliation"), {"month": "2025-09"}))
    assert 'data-testid="difference-USD">0.00<' in html
    assert 'data-testid="difference-EUR">0.00<' in html
    expected = Decimal("1500.875") + Decimal(50) * EUR_USD
    assert f'data-testid="converted-grand-total">{money(expected)}<' in html
    assert "Grand total, converted to USD" in html


# --- a month billed in another currency only ----------------------------------------------

# A CUR 2.0 export billed in NOK (hand-made, fixtures/billing/README.md); no NOK rate is loaded.
NOK_CUR = Path(__file__).resolve().parents[2] / "fixtures" / "billing" / "aws-cur2-nok-2025-06.csv"
NOK_MONTH = "2025-06"


@pytest.fixture
def nok_month(db: None) -> Decimal:
    """The NOK month imported and attributed; returns its bill, summed from the file."""
    call_command("ingest_billing", "--format", "aws-cur", str(NOK_CUR), "--no-attribute",
                 stdout=io.StringIO())  # fmt: skip
    call_command("attribute", "--month", NOK_MONTH, stdout=io.StringIO())
    with NOK_CUR.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert {row["line_item_currency_code"] for row in rows} == {"NOK"}
    return sum((Decimal(row["line_item_unblended_cost"]) for row in rows), Decimal(0))


def test_a_month_billed_only_in_nok_shows_its_bill_not_a_zero(
    finance_api: APIClient, finance_client: Client, nok_month: Decimal
) -> None:
    body = finance_api.get("/api/v1/reconciliation/", {"month": NOK_MONTH}).json()
    # The bill in its own currency at the top level, as invoiced: never 0 in USD.
    assert body["currency"] == "NOK"
    assert Decimal(body["amortised_cost"]) == Decimal(body["invoiced_cost"]) == nok_month
    assert Decimal(body["billed"]) == nok_month  # the deprecated alias too
    assert sum((Decimal(v) for v in body["attributed"].values()), Decimal(0)) == nok_month
    assert Decimal(body["difference"]) == 0
    assert [(t["currency"], Decimal(t["invoiced_cost"])) for t in body["totals_by_currency"]] == [
        ("NOK", nok_month)
    ]
    # And what to load to see it converted.
    assert "NOK\u2192USD" in body["note"]
    assert "load_fx_rates" in body["note"]
    assert body["converted"]["total"] is None

    html = _text(finance_client.get(reverse("web:reconciliation"), {"month": NOK_MONTH}))
    assert f'data-testid="invoiced-NOK">{money(nok_month)}<' in html
    assert 'data-testid="invoiced-USD"' not in html
    note = re.search(r'data-testid="currency-note">([^<]*)<', html)
    assert note is not None
    assert "Billed in NOK only" in note[1]
    assert "load_fx_rates" in note[1]


def test_with_the_nok_rate_loaded_the_note_says_it_is_converted(
    finance_api: APIClient, nok_month: Decimal
) -> None:
    _rate(dt.date(2025, 5, 30), "NOK", "USD", "0.0987")
    body = finance_api.get("/api/v1/reconciliation/", {"month": NOK_MONTH}).json()
    assert body["currency"] == "NOK"
    assert "load_fx_rates" not in body["note"]
    assert Decimal(body["converted"]["total"]) == money_round(
        Fraction(nok_month) * Fraction("0.0987")
    )


def test_two_other_currencies_give_no_single_figure(
    finance_api: APIClient, nok_month: Decimal
) -> None:
    first = dt.date.fromisoformat(f"{NOK_MONTH}-01")
    CostLineItemFactory.create(
        billing_period=first, billing_currency="EUR", billed_cost=Decimal("7.5"),
        effective_cost=Decimal("7.5"), batch__billing_periods=[NOK_MONTH],
    )  # fmt: skip
    body = finance_api.get("/api/v1/reconciliation/", {"month": NOK_MONTH}).json()
    assert body["currency"] is None
    for key in ("amortised_cost", "invoiced_cost", "billed", "billed_cost", "difference"):
        assert body[key] is None, key
    assert "EUR and NOK" in body["note"]
    assert {t["currency"]: Decimal(t["invoiced_cost"]) for t in body["totals_by_currency"]} == {
        "EUR": Decimal("7.5"),
        "NOK": nok_month,
    }


# --- exactness ----------------------------------------------------------------------------


def test_conversion_is_exact_and_rounded_once(team: Team) -> None:
    """Twelve-decimal amounts at an inverse rate (1/0.9, a repeating decimal): the total is the
    exact sum rounded once, half even, not the sum of per-day roundings."""
    _rate(dt.date(2025, 9, 1), "USD", "EUR", "0.9")
    amounts = [Decimal("0.000000000001"), Decimal("123456789.123456789012"), Decimal("-0.1")]
    for i, amount in enumerate(amounts):
        TeamDailyCostFactory.create(
            team=team, day=dt.date(2025, 9, 2 + i), billing_currency="EUR", amount=amount
        )
    # Half-pennies of 1e-12 each: per-day rounding would lose them, rounding once keeps them.
    _rate(dt.date(2025, 9, 1), "GBP", "USD", "0.5")
    for day in (5, 6, 7):
        TeamDailyCostFactory.create(
            team=team,
            day=dt.date(2025, 9, day),
            billing_currency="GBP",
            category=Category.TAGGED,
            amount=Decimal("0.000000000001"),
        )
    data = team_month(team=team, month=MONTH)
    exact = sum((Fraction(a) / Fraction("0.9") for a in amounts), Fraction(0))
    tagged = 3 * Fraction(1, 10**12) * Fraction(1, 2)
    reporting = data.reporting
    assert reporting is not None
    assert reporting.total is not None
    assert reporting.error == ""
    assert reporting.total.total == money_round(exact + tagged)
    assert reporting.total.by_category[Category.TAGGED] == Decimal("0.000000000002")
    per_day = sum((money_round(Fraction(1, 10**12) * Fraction(1, 2)) for _ in range(3)), Decimal(0))
    assert per_day == 0  # what rounding each day would have given
    # Every figure keeps the ledger's 12 places.
    assert reporting.total.total.as_tuple().exponent == -12


# --- costs API ----------------------------------------------------------------------------


def _expected_series(
    key_of: Callable[[TeamDailyCost], str | None], rates: dict[str, Fraction]
) -> dict[str | None, dict[str, str]]:
    """Per key and day, the exact converted sum of the month's rollup rows, rounded once."""
    sums: dict[str | None, dict[str, Fraction]] = defaultdict(lambda: defaultdict(Fraction))
    for r in TeamDailyCost.objects.filter(billing_period=MONTH).select_related("team"):
        sums[key_of(r)][r.day.isoformat()] += Fraction(r.amount) * rates.get(r.billing_currency, 1)
    return {
        key: {day: f"{money_round(v):f}" for day, v in days.items()} for key, days in sums.items()
    }


def test_costs_by_team_in_reporting_currency(
    finance_api: APIClient, scenario: Scenario, eur_rate: None
) -> None:
    response = finance_api.get("/api/v1/costs/", {"month": "2025-09"})
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["month"], body["currency"], body["group_by"]) == ("2025-09", "USD", "team")
    expected = _expected_series(
        lambda r: r.team.slug if r.team else None, {"EUR": Fraction(EUR_USD)}
    )
    got = {s["key"]: {p["day"]: p["amount"] for p in s["points"]} for s in body["series"]}
    assert got == expected
    assert [s["key"] for s in body["series"]] == ["speech", "vision", None]
    assert body["total"] == f"{Decimal('1500.875') + 50 * EUR_USD:.12f}"
    assert body["native_totals"] == [
        {"currency": "USD", "amount": "1500.875000000000"},
        {"currency": "EUR", "amount": "50.000000000000"},
    ]
    vision = next(s for s in body["series"] if s["key"] == "vision")
    assert vision["name"] == "Vision"
    assert vision["total"] == f"{sum(Decimal(v) for v in expected['vision'].values()):f}"


@pytest.mark.parametrize("group_by", ["provider", "category"])
def test_costs_group_by_in_another_currency(
    finance_api: APIClient, scenario: Scenario, eur_rate: None, group_by: str
) -> None:
    response = finance_api.get(
        "/api/v1/costs/", {"month": "2025-09", "currency": "eur", "group_by": group_by}
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["currency"], body["group_by"]) == ("EUR", group_by)
    # USD -> EUR through the inverse of the EUR -> USD rate.
    rates = {"USD": 1 / Fraction(EUR_USD), "EUR": Fraction(1)}
    field = "provider_name" if group_by == "provider" else "category"
    expected = _expected_series(lambda r: getattr(r, field), rates)
    got = {s["key"]: {p["day"]: p["amount"] for p in s["points"]} for s in body["series"]}
    assert got == expected


def test_costs_missing_rate_is_400_with_the_message(
    finance_api: APIClient, scenario: Scenario
) -> None:
    response = finance_api.get("/api/v1/costs/", {"month": "2025-09"})
    assert response.status_code == 400
    assert response.json() == {"detail": MISSING}


@pytest.mark.parametrize(
    "query",
    [{}, {"month": "2025-9"}, {"month": "2025-09", "currency": "US"}, {"group_by": "x"}],
)
def test_costs_bad_query_is_400(finance_api: APIClient, query: dict[str, str]) -> None:
    assert finance_api.get("/api/v1/costs/", query).status_code == 400


def test_costs_lead_sees_only_own_team(lead_api: APIClient, scenario: Scenario) -> None:
    # The lead's team has USD only: no rate needed, and no EUR unowned bucket in sight.
    body = lead_api.get("/api/v1/costs/", {"month": "2025-09"}).json()
    assert [s["key"] for s in body["series"]] == ["vision"]


def test_costs_query_count_is_flat(
    finance_api: APIClient,
    scenario: Scenario,
    eur_rate: None,
    django_assert_max_num_queries: DjangoAssertNumQueries,
) -> None:
    def get() -> Any:
        response = finance_api.get("/api/v1/costs/", {"month": "2025-09"})
        assert response.status_code == 200, response.content
        return response.json()

    with django_assert_max_num_queries(6):
        small = get()
    for day in range(1, 29):
        _rate(dt.date(2025, 9, day), "GBP", "USD", Decimal("1.3") + Decimal(day) / 1000)
    for i in range(20):
        other = TeamFactory.create(slug=f"t{i:02d}")
        for day in range(1, 29):
            TeamDailyCostFactory.create(
                team=other, day=dt.date(2025, 9, day), billing_currency="GBP", amount=Decimal(1)
            )
    with django_assert_max_num_queries(6):
        large = get()
    assert len(large["series"]) == len(small["series"]) + 20
