"""CoreWeave per-namespace invoice CSV (our documented columns): amounts as invoiced."""

from __future__ import annotations

import io
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db.models import Sum

from billing_ingest.models import CostLineItem, ImportBatch
from billing_ingest.parsers import billing_parser
from billing_ingest.parsers.rows import LineItemRow
from finops.core.errors import ImportFormatError

pytestmark = pytest.mark.django_db

HEADER = "invoice_month,namespace,instance_type,pricing_category,quantity,unit,rate,amount,currency"


def write(path: Path, *lines: str, header: str = HEADER) -> Path:
    path.write_text("\ufeff" + "\n".join([header, *lines]) + "\n", encoding="utf-8")
    return path


def parse(path: Path) -> list[LineItemRow]:
    parser = billing_parser("coreweave-invoice")
    return [item for chunk in parser(path, file_label=path.name) for item in chunk]


def test_line_maps_to_a_month_long_usage_charge_at_the_invoiced_amount(tmp_path: Path) -> None:
    path = write(
        tmp_path / "inv.csv",
        "2025-12,tenant-vision,gd-8xh100ib-i128,Committed,720,Hours,30.5,21960.01,usd",
    )
    [item] = parse(path)
    assert item["billing_period"] == date(2025, 12, 1)
    assert item["charge_period_start"] == datetime(2025, 12, 1, tzinfo=UTC)
    assert item["charge_period_end"] == datetime(2026, 1, 1, tzinfo=UTC)
    assert item["sub_account_id"] == "tenant-vision"
    assert item["x_instance_type"] == "gd-8xh100ib-i128"
    assert item["pricing_category"] == "Committed"
    assert item["billed_cost"] == item["effective_cost"] == Decimal("21960.01")
    assert item["contracted_cost"] == Decimal(720) * Decimal("30.5")
    assert item["consumed_quantity"] == Decimal(720)
    assert item["billing_currency"] == "USD"
    assert item["provider_name"] == "CoreWeave"


def test_missing_required_column_and_bad_month_are_named(tmp_path: Path) -> None:
    with pytest.raises(ImportFormatError) as caught:
        parse(write(tmp_path / "a.csv", "2025-12,ns,x,1", header="invoice_month,namespace,x,y"))
    assert caught.value.column == "instance_type"
    with pytest.raises(ImportFormatError) as caught:
        parse(write(tmp_path / "b.csv", "2025-13,ns,gd,Standard,1,Hours,1,1,USD"))
    assert (caught.value.row, caught.value.column) == (2, "invoice_month")


def test_ingest_billing_sums_the_invoice_amounts(tmp_path: Path) -> None:
    amounts = ["1000.10", "250.255", "3.5"]
    lines = [f"2025-11,ns-{i},gd-8xh200ib-i128,,,,,{a},USD" for i, a in enumerate(amounts)]
    path = write(tmp_path / "coreweave-invoice-2025-11.csv", *lines)
    call_command("ingest_billing", "--format", "coreweave-invoice", str(path), stdout=io.StringIO())
    batch = ImportBatch.objects.get()
    assert batch.status == ImportBatch.Status.SUCCEEDED
    total = CostLineItem.objects.filter(batch=batch).aggregate(s=Sum("effective_cost"))["s"]
    assert total == sum(Decimal(a) for a in amounts)
    assert set(CostLineItem.objects.values_list("pricing_category", flat=True)) == {"Standard"}
