"""Money stays exact in the database on every backend, including the embedded SQLite default,
whose NUMERIC columns would keep only 15 significant digits."""

from __future__ import annotations

from decimal import Decimal, localcontext

import pytest

from billing_ingest.models import CostLineItem
from finops.attribution.models import AllocatedCost, Category
from finops.attribution.selectors.reconciliation import reconciliation_for_month
from finops.core.money import MoneySum
from tests.factories import MONTH, AllocatedCostFactory, CostLineItemFactory

# 19 significant digits: a float (and SQLite's NUMERIC) cannot hold these.
LONG_AMOUNTS = [Decimal("1234567.123456789012"), Decimal("7654321.987654321098")]


@pytest.mark.django_db
def test_long_amounts_round_trip_unchanged() -> None:
    for amount in LONG_AMOUNTS:
        CostLineItemFactory.create(effective_cost=amount, billed_cost=amount)
    stored = sorted(CostLineItem.objects.values_list("effective_cost", flat=True))
    assert stored == sorted(LONG_AMOUNTS)


@pytest.mark.django_db
def test_money_sum_is_exact_where_float_sum_is_not() -> None:
    amounts = [*LONG_AMOUNTS, Decimal("0.000000000001")]
    for amount in amounts:
        CostLineItemFactory.create(effective_cost=amount, billed_cost=amount)
    exact = sum(amounts, Decimal(0))
    total = CostLineItem.objects.aggregate(total=MoneySum("effective_cost"))["total"]
    assert total == exact


@pytest.mark.django_db
def test_reconciliation_difference_is_zero_to_the_last_decimal() -> None:
    line = CostLineItemFactory.create(effective_cost=LONG_AMOUNTS[0], billed_cost=LONG_AMOUNTS[0])
    # Three shares that add up to the line exactly, each with all 12 decimals used.
    shares = [Decimal("411522.374485596337"), Decimal("411522.374485596337")]
    shares.append(LONG_AMOUNTS[0] - sum(shares))
    for share in shares:
        AllocatedCostFactory.create(
            billing_period=MONTH,
            amount=share,
            category=Category.IDLE,
            provider_name=line.provider_name,
            billing_account_id=line.billing_account_id,
            billing_currency=line.billing_currency,
        )
    row = next(r for r in reconciliation_for_month(month=MONTH).by_account)
    assert row.amortised == LONG_AMOUNTS[0]
    assert row.difference == Decimal(0)
    # One unit in the 12th place off must show, not vanish in float rounding.
    AllocatedCost.objects.filter(amount=shares[2]).update(amount=shares[2] + Decimal("1e-12"))
    row = next(r for r in reconciliation_for_month(month=MONTH).by_account)
    assert row.difference == Decimal("-0.000000000001")


@pytest.mark.django_db
def test_money_sum_keeps_every_digit_past_28() -> None:
    # Each amount fills the column's 28 digits; their sum needs 29 (30 with the last one), which
    # the default 28-digit context would round away on SQLite (PostgreSQL's numeric is exact).
    amounts = [Decimal("9999999999999999.999999999999")] * 9 + [Decimal("0.000000000002")]
    for amount in amounts:
        CostLineItemFactory.create(effective_cost=amount, billed_cost=amount)
    with localcontext(prec=60):
        exact = sum(amounts, Decimal(0))
    assert exact == Decimal("89999999999999999.999999999993")
    with localcontext(prec=28):
        assert sum(amounts, Decimal(0)) != exact  # the case bites
    total = CostLineItem.objects.aggregate(total=MoneySum("effective_cost"))["total"]
    assert total == exact
