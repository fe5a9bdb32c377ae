"""Finance's words: "Amortised cost" (EffectiveCost) and "Invoiced cost" (BilledCost) on the
pages, in the API (the old API names kept as deprecated aliases) and in the `attribute`
command's summary."""

from __future__ import annotations

import datetime as dt
import io
from decimal import Decimal
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from rest_framework.test import APIClient

from billing_ingest.models import CostLineItem
from finops.web.templatetags.finops_tags import money
from tests.factories import Scenario

pytestmark = pytest.mark.django_db


def test_reconciliation_page_uses_finance_words_and_explains_the_gap(
    client: Client, scenario: Scenario, finance_user: User
) -> None:
    client.force_login(finance_user)
    html = client.get("/reconciliation/?month=2025-09").content.decode()
    assert "Amortised cost" in html
    assert "Invoiced cost" in html
    assert "Cash" not in html
    assert ">Billed" not in html
    assert "commitment" in html
    assert "credits" in html
    usd = [li for li in scenario.line_items if li.billing_currency == "USD"]
    invoiced = sum((li.billed_cost for li in usd), Decimal(0))
    assert f'data-testid="invoiced-USD">{money(invoiced)}<' in html  # 1,700.375


def test_api_new_names_and_deprecated_aliases(scenario: Scenario, finance_user: User) -> None:
    api = APIClient()
    api.force_authenticate(finance_user)
    body = api.get("/api/v1/reconciliation/?month=2025-09").json()
    usd = [li for li in scenario.line_items if li.billing_currency == "USD"]
    assert Decimal(body["amortised_cost"]) == sum((li.effective_cost for li in usd), Decimal(0))
    assert Decimal(body["invoiced_cost"]) == sum((li.billed_cost for li in usd), Decimal(0))
    assert body["billed"] == body["amortised_cost"]
    assert body["billed_cost"] == body["invoiced_cost"]
    for row in body["by_account"]:
        assert row["billed"] == row["amortised_cost"]
        assert row["billed_cost"] == row["invoiced_cost"]

    schema = api.get("/api/schema/?format=json").json()["components"]["schemas"]
    for name in ("Reconciliation", "ReconciliationAccount"):
        props = schema[name]["properties"]
        assert props["billed"]["deprecated"] is True
        assert props["billed_cost"]["deprecated"] is True
        assert "deprecated" not in props["amortised_cost"]
        assert "deprecated" not in props["invoiced_cost"]


# A legacy CUR month with a reserved instance (hand-made, fixtures/scenarios/aws-legacy-cur-slurm):
# its amortised cost (EffectiveCost) and invoiced cost (BilledCost) differ.
RESERVED_CUR = (
    Path(__file__).resolve().parents[2]
    / "fixtures"
    / "scenarios"
    / "aws-legacy-cur-slurm"
    / "legacy-cur-2025-06.csv"
)


def test_attribute_summary_names_amortised_and_invoiced_cost(db: None) -> None:
    call_command(
        "ingest_billing", "--format", "aws-cur", str(RESERVED_CUR), "--no-attribute",
        stdout=io.StringIO(),
    )  # fmt: skip
    out = io.StringIO()
    call_command("attribute", "--month", "2025-06", stdout=out)
    summary = out.getvalue()
    items = list(CostLineItem.objects.filter(billing_period=dt.date(2025, 6, 1)))
    amortised = sum((i.effective_cost for i in items), Decimal(0))
    invoiced = sum((i.billed_cost for i in items), Decimal(0))
    assert amortised != invoiced  # the reservation: amortised onto usage, invoiced as fees
    (line,) = [line for line in summary.splitlines() if "conservation AWS" in line]
    assert f"amortised cost {amortised:f} USD allocated {amortised:f} USD" in line
    assert f"(invoiced cost {invoiced:f} USD)" in line
    assert "ledger by category (amortised cost)" in summary
    assert "billed" not in summary.lower()
