"""Every money figure the management commands print carries its currency code (the project's
rule: every figure shows its currency; an estimate says it is one). A September of FOCUS lines
for team vision (100 USD a day) goes in through ingest_billing, then the commands that print
figures run on it: attribute, check_budgets, export_focus. The demo's own output is checked in
its end-to-end test (tests/demo/test_demo.py)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.core.management import call_command

from finops.budgets.models import Budget
from finops.org.models import Team
from tests.budget_data import focus_month_daily, ingest_focus
from tests.money_figures import figures_without_currency

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def september(tmp_path: Path, team: Team) -> None:
    ingest_focus(focus_month_daily(tmp_path / "sep.csv", {d: "100.25" for d in range(1, 31)}))


def _run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_the_checker_finds_a_figure_without_its_currency() -> None:
    # The scan itself can fail: a figure with decimals, or any figure after a money word.
    assert figures_without_currency("12.50 per 1k requests", currencies={"USD"})
    assert figures_without_currency("difference 0", currencies={"USD"})
    assert not figures_without_currency("as of 2025-09-20", currencies={"USD"})
    assert not figures_without_currency("12.50 USD per 1k requests, 3 jobs", currencies={"USD"})


def test_attribute_prints_each_figure_with_its_currency(september: None) -> None:
    text = _run("attribute", "--month", "2025-09")
    assert "amortised cost 3007.50" in text  # 30 days of 100.25: the figures are there
    # The closing line's zero holds in every currency at once: the only figure without one.
    ignore = r"conservation check: difference 0$"
    assert figures_without_currency(text, currencies={"USD"}, ignore=ignore) == []


def test_check_budgets_prints_each_figure_with_its_currency(september: None, team: Team) -> None:
    Budget.objects.create(
        name="Vision monthly", team=team, period="month", amount=2000, currency="USD",
        thresholds=[50, 100], forecast_thresholds=[100],
    )  # fmt: skip
    text = _run("check_budgets", "--as-of", "2025-09-20")
    assert "actual 2,005.00 USD" in text
    assert "an estimate" in text  # the forecast says it is one
    assert figures_without_currency(text, currencies={"USD"}) == []


def test_export_focus_prints_each_figure_with_its_currency(september: None, tmp_path: Path) -> None:
    text = _run("export_focus", "--month", "2025-09", "--out", str(tmp_path / "sep.csv"))
    assert "3007.50" in text
    assert figures_without_currency(text, currencies={"USD"}, ignore=r"FOCUS 1\.2") == []
