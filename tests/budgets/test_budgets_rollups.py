"""Budget series read the budget rollups (RecurringCharge, TagCharge) written with the ledger,
never line items, and give exactly what the line items gave (tests/budget_series_lines.py, the
computation they replace): recurring fees of every scope and tag scopes, over line items that
cross midnight, last several days, have an empty period, sit on the next month's invoice or are
in another currency. The budgets list reads them once for all its budgets."""

from __future__ import annotations

import datetime as dt
import json
from collections import defaultdict
from datetime import date, timedelta
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from billing_ingest.models import ImportBatch
from finops.attribution.inputs.charge_rollups import charge_rollups
from finops.attribution.models import RecurringCharge, TagCharge
from finops.attribution.services import attribution_month_run, attribution_month_run_split
from finops.budgets.models import Budget
from finops.budgets.selectors import budget_status, budget_statuses
from finops.budgets.series import scope_series
from finops.currency.models import FxRate
from finops.org.models import MappingRule, Team
from tests import budget_series_lines as lines
from tests.factories import CostLineItemFactory, ImportBatchFactory

pytestmark = pytest.mark.django_db
UTC = dt.UTC
AUGUST, SEPTEMBER, OCTOBER = date(2025, 8, 1), date(2025, 9, 1), date(2025, 10, 1)
FIRST, LAST = date(2025, 8, 10), date(2025, 9, 30)


def _at(day: date, hour: float = 0) -> dt.datetime:
    return dt.datetime.combine(day, dt.time(), tzinfo=UTC) + timedelta(hours=hour)


def _line(batch: ImportBatch, month: date, start: dt.datetime, hours: float, cost: str,
          tags: Any, **kwargs: Any) -> None:  # fmt: skip
    CostLineItemFactory.create(
        batch=batch, billing_period=month, charge_period_start=start,
        charge_period_end=start + timedelta(hours=hours), effective_cost=Decimal(cost),
        billed_cost=Decimal(cost), tags=tags, **kwargs,
    )  # fmt: skip


def _scenario(team: Team, other_team: Team) -> None:
    FxRate.objects.create(
        date=date(2025, 8, 1), from_currency="EUR", to_currency="USD", rate=Decimal("1.1")
    )
    FxRate.objects.create(
        date=date(2025, 9, 12), from_currency="USD", to_currency="EUR", rate=Decimal("0.8")
    )
    MappingRule.objects.create(kind=MappingRule.Kind.SUB_ACCOUNT, value="acct-o", team=other_team)
    batch = ImportBatchFactory.create(source="aws")
    vision = {"team": team.slug, "project": "seg"}
    for month in (AUGUST, SEPTEMBER):
        days = 31 if month == AUGUST else 30
        # Monthly fees: the team's by its tag, the other team's by its sub-account, support.
        _line(batch, month, _at(month), 24 * days, "300.10", vision, charge_category="Purchase")
        _line(batch, month, _at(month), 24 * days, "99.99", {}, charge_category="Purchase",
              sub_account_id="acct-o")  # fmt: skip
        _line(batch, month, _at(month, 5), 24 * 7 + 3, "70", {"project": "seg"},
              charge_category="Purchase", provider_name="GCP", billing_currency="EUR")  # fmt: skip
        # Not recurring: a Purchase shorter than a day, zero fees, another category.
        _line(batch, month, _at(month, 2), 5, "12", vision, charge_category="Purchase")
        _line(batch, month, _at(month), 24 * days, "0", vision, charge_category="Purchase",
              provider_name="Azure")  # fmt: skip
        _line(batch, month, _at(month), 48, "40", vision, charge_category="Tax")
        for i in range(0, days, 3):
            day = month + timedelta(days=i)
            _line(batch, month, _at(day, 1), 1, "1.5", vision)
            _line(batch, month, _at(day, 23.5), 1, "2.25", {"project": "seg", "n": 7})
            _line(batch, month, _at(day, 4), 0, "0.75", {"project": "seg"})
            _line(batch, month, _at(day, 6), 3, "5", {"project": "other"}, provider_name="GCP")
    # A late charge for August on September's invoice, and one on October's for September.
    _line(batch, SEPTEMBER, _at(date(2025, 8, 30), 10), 30, "8.8", vision)
    _line(batch, OCTOBER, _at(date(2025, 9, 29)), 24 * 2, "9.1", vision, charge_category="Purchase")
    for month in (AUGUST, SEPTEMBER, OCTOBER):
        attribution_month_run(month=month)


def _old_series(budget: Budget, first: date, last: date) -> dict[str, dict[str, dict]]:
    """The series from line items: recurring and tag rows as before; the rest is TeamDailyCost,
    unchanged, so a tag budget's total is compared and the others' recurring part."""
    out: dict[str, dict[str, dict]] = {"total": {}, "recurring": {}}
    parts = [("recurring", lines.recurring_rows(budget, first, last))]
    if budget.tag_key:
        parts.append(("total", lines.tag_scope_rows(budget, first, last)))
    reference = scope_series(budget=budget, first=first, last=last, currency=budget.currency)
    for name, rows in parts:
        sums: dict[str, dict[date, Fraction]] = defaultdict(lambda: defaultdict(Fraction))
        for day, provider, code, amount in rows:
            rate = _rate(day, code, budget.currency)
            sums[provider][day] += amount * rate
        out[name] = {p: dict(d) for p, d in sums.items()}
    if not budget.tag_key:
        out["total"] = {p: dict(d) for p, d in reference.total.items()}
    return out


def _rate(day: date, code: str, currency: str) -> Fraction:
    from finops.currency.selectors import fx_rate_for

    return fx_rate_for(day=day, from_currency=code, to_currency=currency)


def _budgets(team: Team, other_team: Team) -> list[Budget]:
    base: dict[str, Any] = {"period": "month", "amount": Decimal(5000), "currency": "USD",
                            "thresholds": [100], "forecast_thresholds": [100]}  # fmt: skip
    specs: list[dict[str, Any]] = [
        {"name": "team", "team": team},
        {"name": "other", "team": other_team, "currency": "EUR"},
        {"name": "seg", "team": team, "tag_key": "project", "tag_value": "seg"},
        {"name": "n", "team": team, "tag_key": "n", "tag_value": "7", "period": "quarter"},
        {"name": "none", "team": team, "tag_key": "project", "tag_value": "nope"},
        {"name": "gcp", "provider_name": "GCP", "currency": "EUR"},
        {"name": "org", "period": "year"},
    ]
    return [Budget.objects.create(**{**base, **spec}) for spec in specs]


@pytest.fixture
def scenario(team: Team, other_team: Team) -> list[Budget]:
    _scenario(team, other_team)
    return _budgets(team, other_team)


@pytest.mark.parametrize(
    ("first", "last"),
    [(FIRST, LAST), (date(2025, 9, 1), date(2025, 9, 30)), (date(2025, 8, 31), date(2025, 9, 1))],
)
def test_rollup_series_equal_the_line_items_series(
    scenario: list[Budget], first: date, last: date
) -> None:
    assert any(lines.recurring_rows(b, first, last) for b in scenario)
    assert any(lines.tag_scope_rows(b, first, last) for b in scenario if b.tag_key)
    for budget in scenario:
        new = scope_series(budget=budget, first=first, last=last, currency=budget.currency)
        old = _old_series(budget, first, last)
        assert {p: dict(d) for p, d in new.recurring.items()} == old["recurring"], budget.name
        assert {p: dict(d) for p, d in new.total.items()} == old["total"], budget.name


def test_the_list_reads_rollups_once_for_all_budgets(scenario: list[Budget]) -> None:
    as_of = date(2025, 9, 20)
    one_by_one = [budget_status(budget=b, as_of=as_of) for b in scenario]
    with CaptureQueriesContext(connection) as queries:
        together = budget_statuses(budgets=scenario, as_of=as_of)
    assert [(s.actual, s.forecast, s.forecast_low, s.forecast_high, s.error) for s in together] == [
        (s.actual, s.forecast, s.forecast_low, s.forecast_high, s.error) for s in one_by_one
    ]
    assert all(not s.error for s in together)
    # TeamDailyCost, RecurringCharge, TagCharge, the mapping rules, the FX rates.
    assert len(queries) <= 5
    assert "costlineitem" not in "\n".join(q["sql"] for q in queries)


# (start hour in September, length in hours, cents, category, provider, tags)
LineSpec = tuple[int, int, int, str, str, dict[str, object]]
_TAGS = st.dictionaries(
    st.sampled_from(["team", "project", "n"]),
    st.sampled_from(["vision", "nlp", "seg", 7, "7"]),
    max_size=3,
)
_LINES = st.lists(
    st.tuples(
        st.integers(-48, 24 * 30),
        st.sampled_from([0, 1, 2, 23, 24, 25, 24 * 7, 24 * 30]),
        st.integers(-5000, 10**6),
        st.sampled_from(["Usage", "Purchase"]),
        st.sampled_from(["AWS", "GCP"]),
        _TAGS,
    ),
    min_size=1,
    max_size=12,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(specs=_LINES, first_day=st.integers(0, 29), days=st.integers(0, 40))
def test_any_line_items_give_the_same_series(
    team: Team, other_team: Team, specs: list[LineSpec], first_day: int, days: int
) -> None:
    first = SEPTEMBER + timedelta(days=first_day - 3)
    last = first + timedelta(days=days)
    with transaction.atomic():
        batch = ImportBatchFactory.create(source="aws")
        for hour, length, cents, category, provider, tags in specs:
            _line(batch, SEPTEMBER, _at(SEPTEMBER, hour), length, str(Decimal(cents) / 100),
                  tags, charge_category=category, provider_name=provider)  # fmt: skip
        attribution_month_run(month=SEPTEMBER)
        for budget in _budgets(team, other_team):
            if budget.currency != "USD":
                continue  # no FX rate here: one currency
            new = scope_series(budget=budget, first=first, last=last, currency="USD")
            old = _old_series(budget, first, last)
            assert {p: dict(d) for p, d in new.recurring.items()} == old["recurring"]
            assert {p: dict(d) for p, d in new.total.items()} == old["total"]
        transaction.set_rollback(True)


def _sorted(rows: Any) -> list[tuple[Any, ...]]:
    """Rows as tuples in a stable order (tags as JSON text, since dicts do not sort)."""
    return sorted(
        tuple(json.dumps(v, sort_keys=True) if isinstance(v, dict) else v for v in row)
        for row in rows
    )


def _stored_rollups(month: date) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    recurring = RecurringCharge.objects.filter(billing_period=month)
    tagged = TagCharge.objects.filter(billing_period=month)
    return (
        _sorted(recurring.values_list(*_RECURRING_FIELDS)),
        _sorted(tagged.values_list(*_TAG_FIELDS)),
    )


_RECURRING_FIELDS = (
    "provider_name", "sub_account_id", "tags", "billing_currency", "charge_period_start",
    "charge_period_end", "amount",
)  # fmt: skip
_TAG_FIELDS = (
    "tag_key", "tag_value", "provider_name", "billing_currency", "charge_period_start",
    "charge_period_end", "amount",
)  # fmt: skip


def test_the_month_in_one_read_writes_the_rollups_of_their_own_read(
    team: Team, other_team: Team
) -> None:
    """attribution_month_run sums the budget rollups while it reads the month's line items
    (charge periods read as epoch seconds on PostgreSQL, microseconds included); the month in
    parts reads them on their own (charge_rollups): both write the same rows."""
    _scenario(team, other_team)
    batch = ImportBatchFactory.create(source="aws")
    odd = _at(SEPTEMBER, 3) + timedelta(microseconds=123457)
    _line(batch, SEPTEMBER, odd, 24 * 3, "10.000000000001", {"project": "seg"},
          charge_category="Purchase")  # fmt: skip
    _line(batch, SEPTEMBER, odd, 2, "0.25", {"team": team.slug, "n": 7})
    _line(batch, SEPTEMBER, odd, 24 * 2, "3", ["not", "a", "dict"], charge_category="Purchase")
    attribution_month_run(month=SEPTEMBER)
    one_read = _stored_rollups(SEPTEMBER)
    assert len(one_read[0]) >= 4
    assert len(one_read[1]) >= 10
    assert any(row[4] == odd for row in one_read[0])
    assert any(row[4] == odd for row in one_read[1])
    attribution_month_run_split(month=SEPTEMBER, parts=2)
    assert _stored_rollups(SEPTEMBER) == one_read
    recurring, tagged = charge_rollups(SEPTEMBER)
    assert _sorted([getattr(r, f) for f in _RECURRING_FIELDS] for r in recurring) == one_read[0]
    assert _sorted([getattr(r, f) for f in _TAG_FIELDS] for r in tagged) == one_read[1]
