"""Every money figure on the main pages goes through the one money formatter (issue 29: the
close review showed "138839.72 USD"): rendered on the month scenario (tests/factories.py: USD
1,500.875 amortised, of which 1,200.75 on AWS) as finance, no text a person reads holds a
decimal number of 1,000 or more without its thousands separator.

Only the text is read: tags (and so data-value attributes, which keep the exact figure for
sorting), scripts and styles are left out.
"""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from django.test import Client
from django.urls import reverse

from finops.budgets.models import Budget
from tests.factories import Scenario

pytestmark = pytest.mark.django_db

MONTH = "2025-09"
# A decimal of four or more digits before the point with none of its separators: 1500.88,
# 25000.00, 138839.72 (not 1,500.88; not a date, a year or an id without a decimal part).
UNSEPARATED = re.compile(r"(?<![\d,.])\d{4,}\.\d+")
HIDDEN = re.compile(r"<(script|style)\b.*?</\1>", re.DOTALL | re.IGNORECASE)
TAG = re.compile(r"<[^>]*>")


def page_text(html: str) -> str:
    return TAG.sub(" ", HIDDEN.sub(" ", html))


def test_the_pattern_finds_what_the_screenshots_showed() -> None:
    text = page_text(
        '<td data-value="1500.875">1,500.88</td><td>amortised bill: 138839.72 USD</td>'
    )
    assert UNSEPARATED.findall(text) == ["138839.72"]
    assert (
        UNSEPARATED.findall(page_text("<p>2025-09 · 1,234.50 EUR · 99.5 % · run 20250901</p>"))
        == []
    )


def test_main_pages_show_money_with_thousands_separators(
    finance_client: Client, scenario: Scenario
) -> None:
    Budget.objects.create(
        name="Organisation", amount=Decimal("25000"), currency="USD", period=Budget.Period.MONTH
    )
    team, run = scenario.team.slug, scenario.run
    pages = [
        f"/?month={MONTH}",
        f"/?month={MONTH}&months=12&by=category",
        f"/teams/{team}/?month={MONTH}",
        f"/runs/?month={MONTH}",
        reverse("web:run", args=[team, run.run_id]) + f"?month={MONTH}",
        f"/explorer/?month={MONTH}&group_by=team",
        f"/explorer/?month={MONTH}&group_by=provider",
        "/budgets/",
        f"/budgets/{Budget.objects.get().pk}/",
        f"/reconciliation/?month={MONTH}",
        f"/teams/{team}/statements/{MONTH}/",
        "/close/",
        f"/close/{MONTH}/",
        f"/pricing/?month={MONTH}",
        "/imports/",
        f"/endpoints/?month={MONTH}",
    ]
    found = {}
    for url in pages:
        response = finance_client.get(url)
        assert response.status_code == 200, url
        bad = UNSEPARATED.findall(page_text(response.content.decode()))
        if bad:
            found[url] = bad
    assert found == {}
    # Not vacuous: the close review does show the month's amortised bill, with its separator.
    close = page_text(finance_client.get(f"/close/{MONTH}/").content.decode())
    assert "amortised bill: 1,500.88 USD" in close
