"""Restatements: a new file for the same source and billing period replaces the old rows
atomically; other sources and other periods are left alone."""

from __future__ import annotations

import csv
import io
from decimal import Decimal
from pathlib import Path

import pytest
from django.core.management import call_command

from billing_ingest.models import CostLineItem, ImportBatch

pytestmark = pytest.mark.django_db

COLUMNS = [
    "BillingPeriodStart",
    "ChargePeriodStart",
    "ChargePeriodEnd",
    "ResourceId",
    "BilledCost",
    "EffectiveCost",
    "BillingCurrency",
]


def write_focus(path: Path, rows: list[tuple[str, str, str]]) -> Path:
    """rows: (month "YYYY-MM", resource id, cost)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(COLUMNS)
        for month, resource, cost in rows:
            start = f"{month}-01T00:00:00Z"
            writer.writerow([start, start, f"{month}-01T01:00:00Z", resource, cost, cost, "USD"])
    return path


def ingest(path: Path, source: str | None = None) -> ImportBatch:
    args = ["--source", source] if source else []
    call_command("ingest_billing", "--format", "focus", str(path), *args, stdout=io.StringIO())
    return ImportBatch.objects.order_by("-id").first()  # type: ignore[return-value]


def resources(**filters: object) -> set[str]:
    return set(CostLineItem.objects.filter(**filters).values_list("resource_id", flat=True))


def total(**filters: object) -> Decimal:
    return sum(
        CostLineItem.objects.filter(**filters).values_list("effective_cost", flat=True), Decimal(0)
    )


def test_v2_replaces_v1_for_the_same_source_and_period(tmp_path: Path) -> None:
    v1 = ingest(write_focus(tmp_path / "v1.csv", [("2024-09", "r1", "10"), ("2024-09", "r2", "5")]))
    v2 = ingest(write_focus(tmp_path / "v2.csv", [("2024-09", "r1", "11.5")]), source=v1.source)
    assert v1.source == "focus:v1" == v2.source
    v1.refresh_from_db()
    assert v2.status == ImportBatch.Status.SUCCEEDED
    assert v1.status == ImportBatch.Status.SUPERSEDED
    assert v1.superseded_by_id == v2.pk
    assert set(CostLineItem.objects.values_list("batch_id", flat=True)) == {v2.pk}
    assert resources() == {"r1"}
    assert total() == Decimal("11.5")


def test_same_file_name_in_a_new_folder_restates_through_the_default_source(tmp_path: Path) -> None:
    v1 = ingest(write_focus(tmp_path / "sep" / "acme.csv", [("2024-09", "r1", "10")]))
    v2 = ingest(write_focus(tmp_path / "sep-final" / "acme.csv", [("2024-09", "r1", "12")]))
    v1.refresh_from_db()
    assert v1.source == v2.source == "focus:acme"
    assert v1.status == ImportBatch.Status.SUPERSEDED
    assert total() == Decimal("12")


def test_a_different_source_is_untouched(tmp_path: Path) -> None:
    other = ingest(write_focus(tmp_path / "gcp.csv", [("2024-09", "g1", "7")]), source="gcp")
    v1 = ingest(write_focus(tmp_path / "a1.csv", [("2024-09", "r1", "10")]), source="aws")
    v2 = ingest(write_focus(tmp_path / "a2.csv", [("2024-09", "r1", "20")]), source="aws")
    other.refresh_from_db()
    v1.refresh_from_db()
    assert other.status == ImportBatch.Status.SUCCEEDED
    assert resources(source="gcp") == {"g1"}
    assert total(source="gcp") == Decimal("7")
    assert v1.status == ImportBatch.Status.SUPERSEDED
    assert total(source="aws") == Decimal("20")
    assert CostLineItem.objects.filter(batch=v2).count() == 1


def test_a_period_not_in_v2_stays(tmp_path: Path) -> None:
    v1 = ingest(
        write_focus(
            tmp_path / "v1.csv",
            [("2024-08", "old", "3"), ("2024-09", "r1", "10"), ("2024-09", "r2", "1")],
        ),
        source="aws",
    )
    v2 = ingest(write_focus(tmp_path / "v2.csv", [("2024-09", "r1", "9")]), source="aws")
    v1.refresh_from_db()
    # v1 still holds August, so it is not superseded as a whole.
    assert v1.status == ImportBatch.Status.SUCCEEDED
    assert resources(billing_period__month=8) == {"old"}
    assert CostLineItem.objects.get(billing_period__month=8).batch_id == v1.pk
    assert resources(billing_period__month=9) == {"r1"}
    assert total(billing_period__month=9) == Decimal("9")
    assert v2.billing_periods == ["2024-09"]


def test_a_superseded_file_can_be_imported_again(tmp_path: Path) -> None:
    first = write_focus(tmp_path / "v1.csv", [("2024-09", "r1", "10")])
    v1 = ingest(first, source="aws")
    ingest(write_focus(tmp_path / "v2.csv", [("2024-09", "r1", "20")]), source="aws")
    again = ingest(first, source="aws")
    # Same bytes as v1, but v1 was superseded: importing it is a real restatement, not a no-op.
    assert again.pk != v1.pk
    assert again.status == ImportBatch.Status.SUCCEEDED
    assert total() == Decimal("10")
    assert ImportBatch.objects.filter(status=ImportBatch.Status.SUPERSEDED).count() == 2


def test_one_source_for_a_folder_warns_when_files_replace_each_other(tmp_path: Path) -> None:
    write_focus(tmp_path / "parts" / "part-1.csv", [("2024-09", "r1", "1")])
    write_focus(tmp_path / "parts" / "part-2.csv", [("2024-09", "r2", "2")])
    err = io.StringIO()
    call_command(
        "ingest_billing",
        "--format",
        "focus",
        str(tmp_path / "parts"),
        "--source",
        "one",
        stdout=io.StringIO(),
        stderr=err,
    )
    assert "part-1.csv was replaced by" in err.getvalue()
    assert resources() == {"r2"}
