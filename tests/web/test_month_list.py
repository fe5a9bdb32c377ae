"""The month list every page's picker reads (issue 29): the settled billing batches' months and
the rollup's, two small queries instead of a scan of the line items. The same months as the
scan through imports, restatements and failures; a newly imported month shows at once, with
the page cache on."""

from __future__ import annotations

import io
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest
from django.core.cache import cache
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from pytest_django import Settings

from billing_ingest.models import CostLineItem, ImportBatch
from billing_ingest.selectors import billing_months_settled
from finops.attribution.selectors.overview import month_list_with_data
from tests.builders import focus_row, write_focus_csv
from tests.factories import CostLineItemFactory, ImportBatchFactory

pytestmark = pytest.mark.django_db

SEPTEMBER, OCTOBER, NOVEMBER = date(2024, 9, 1), date(2024, 10, 1), date(2024, 11, 1)


def row(month: date, cost: str) -> dict[str, str]:
    after = date(month.year + month.month // 12, month.month % 12 + 1, 1)
    return focus_row(
        BillingPeriodStart=f"{month:%Y-%m-%d}T00:00:00Z",
        BillingPeriodEnd=f"{after:%Y-%m-%d}T00:00:00Z",
        ChargePeriodStart=f"{month:%Y-%m}-05T10:00:00Z",
        ChargePeriodEnd=f"{month:%Y-%m}-05T11:00:00Z",
        BilledCost=cost,
        EffectiveCost=cost,
    )


def ingest(path: Path, *rows: dict[str, str]) -> None:
    write_focus_csv(path, list(rows))
    call_command(
        "ingest_billing", "--format", "focus", "--source", "aws", str(path), "--no-attribute",
        stdout=io.StringIO(), stderr=io.StringIO(),
    )  # fmt: skip


def scanned() -> set[date]:
    """The reference: every settled line item's month (the scan the list no longer does)."""
    return set(CostLineItem.objects.settled().values_list("billing_period", flat=True))


def test_the_settled_batches_months_are_the_line_items_months_through_restatements(
    tmp_path: Path,
) -> None:
    ingest(tmp_path / "a.csv", row(SEPTEMBER, "10"), row(OCTOBER, "20"))
    assert billing_months_settled() == scanned() == {SEPTEMBER, OCTOBER}

    # October restated alone: the first batch keeps its September rows (still SUCCEEDED, its
    # billing_periods still naming October, which the new batch now holds).
    ingest(tmp_path / "b.csv", row(OCTOBER, "21"))
    first = ImportBatch.objects.order_by("id").first()
    assert first is not None
    assert first.status == ImportBatch.Status.SUCCEEDED
    assert set(first.line_items.values_list("billing_period", flat=True)) == {SEPTEMBER}
    assert billing_months_settled() == scanned() == {SEPTEMBER, OCTOBER}

    # Both months restated: the first batch is left with no rows, SUPERSEDED.
    ingest(tmp_path / "c.csv", row(SEPTEMBER, "11"), row(OCTOBER, "22"))
    first.refresh_from_db()
    assert first.status == ImportBatch.Status.SUPERSEDED
    assert billing_months_settled() == scanned() == {SEPTEMBER, OCTOBER}

    # A file that fails holds no month; a batch still loading is not the bill yet.
    broken = tmp_path / "d.csv"
    broken.write_text("BillingPeriodStart,EffectiveCost\nnot a date,1\n", encoding="utf-8")
    with pytest.raises(CommandError):
        call_command(
            "ingest_billing", "--format", "focus", "--source", "aws", str(broken),
            "--no-attribute", stdout=io.StringIO(), stderr=io.StringIO(),
        )  # fmt: skip
    loading = ImportBatchFactory.create(
        status=ImportBatch.Status.RUNNING, billing_periods=["2024-12"]
    )
    CostLineItemFactory.create(batch=loading, billing_period=date(2024, 12, 1))
    assert billing_months_settled() == scanned() == {SEPTEMBER, OCTOBER}
    assert month_list_with_data() == [OCTOBER, SEPTEMBER]


def test_the_month_list_is_two_queries(tmp_path: Path) -> None:
    ingest(tmp_path / "a.csv", row(SEPTEMBER, "10"), row(OCTOBER, "20"))
    with CaptureQueriesContext(connection) as queries:
        assert month_list_with_data() == [OCTOBER, SEPTEMBER]
    assert len(queries.captured_queries) == 2
    assert not any("costlineitem" in q["sql"].lower() for q in queries.captured_queries)


@pytest.fixture
def cache_on(settings: Settings) -> Iterator[None]:
    settings.FINOPS_API_CACHE_SECONDS = 300
    cache.clear()
    yield
    cache.clear()


def test_a_newly_imported_month_shows_at_once(
    cache_on: None, finance_client: Client, tmp_path: Path
) -> None:
    ingest(tmp_path / "a.csv", row(SEPTEMBER, "10"), row(OCTOBER, "20"))
    page = finance_client.get("/reconciliation/")
    assert page.context["month"] == OCTOBER
    assert page.context["months"] == [OCTOBER, SEPTEMBER]

    ingest(tmp_path / "b.csv", row(NOVEMBER, "30"))
    page = finance_client.get("/reconciliation/")
    assert page.context["month"] == NOVEMBER  # the newest month, not yet attributed
    assert page.context["months"] == [NOVEMBER, OCTOBER, SEPTEMBER]
