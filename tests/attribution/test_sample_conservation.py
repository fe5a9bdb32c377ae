"""The conservation invariant on every shared billing sample: after `ingest_billing` (which
attributes the months it touched), for every month, provider, billing account and currency the
ledger adds up to the line items' EffectiveCost exactly, and the reconciliation API says so.

Each file is ingested alone, then all of them together with the OpenCost allocation sample's
pods as jobs, so line items from different providers, accounts and currencies share months.
"""

from __future__ import annotations

import contextlib
import io
from decimal import Decimal
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from billing_ingest.models import CostLineItem, ImportBatch
from billing_ingest.parsers.focus import REQUIRED_COLUMNS
from finops.attribution.models import AllocatedCost
from finops.attribution.selectors.ledger import month_conservation
from finops.core.months import month_parse
from tests.conftest import SAMPLES_DIR

pytestmark = pytest.mark.django_db

# Folder -> the --format its billing exports are read with (schemas, reports and price lists
# in the same folders are not bills).
FORMATS = {"aws": "aws-cur", "azure": "azure", "gcp": "gcp-bigquery", "focus": "focus"}
BILL_SUFFIXES = (".csv", ".parquet")


def billing_samples() -> list[tuple[str, str]]:
    found = []
    for folder, format_name in FORMATS.items():
        for path in sorted((SAMPLES_DIR / folder).rglob("*")):
            if path.is_file() and path.suffix in BILL_SUFFIXES:
                found.append((str(path.relative_to(SAMPLES_DIR)), format_name))
    found.append(("kubernetes/opencost_cloudcost_example_output.json", "opencost-cloudcost"))
    return found


# Without the samples folder one placeholder case remains, so that the samples_dir fixture
# skips it, or fails it under FINOPS_REQUIRE_SAMPLES=1 (an empty parameter set would skip
# silently, without ever asking the fixture).
SAMPLES = billing_samples() if SAMPLES_DIR.is_dir() else [("(samples absent)", "")]


def ingest(path: Path, format_name: str) -> ImportBatch | None:
    # A sample the format cannot read fails its own batch (CommandError): checked by the caller.
    with contextlib.suppress(CommandError):
        call_command("ingest_billing", "--format", format_name, str(path), stdout=io.StringIO())
    return ImportBatch.objects.filter(file_name=str(path.resolve())).order_by("-id").first()


def assert_conserved(months: set[str]) -> None:
    assert months, "the sample touched no billing month"
    for label in sorted(months):
        month = month_parse(label)
        conservation = month_conservation(month=month)
        assert conservation, f"{label}: nothing billed"
        for key, sums in conservation.items():
            assert sums["difference"] == 0, (label, key, sums)
        billed = sum(
            (
                c
                for c in CostLineItem.objects.settled()
                .filter(billing_period=month)
                .values_list("effective_cost", flat=True)
            ),
            Decimal(0),
        )
        allocated = sum(
            AllocatedCost.objects.filter(billing_period=month).values_list("amount", flat=True),
            Decimal(0),
        )
        assert allocated == billed, label


@pytest.mark.parametrize(("relative", "format_name"), SAMPLES)
def test_each_sample_is_attributed_to_the_cent(
    samples_dir: Path, relative: str, format_name: str
) -> None:
    path = samples_dir / relative
    missing = missing_focus_columns(path) if format_name == "focus" else []
    batch = ingest(path, format_name)
    assert batch is not None
    if missing:
        # The FOCUS validator's smoke-test Parquet file is not a bill: it lacks FOCUS columns.
        # Its import must fail naming the file and every missing column, and store nothing.
        assert batch.status == ImportBatch.Status.FAILED
        assert f"file {path.name}" in batch.error
        assert all(column in batch.error for column in missing), batch.error
        assert not CostLineItem.objects.exists()
        return
    assert batch.status == ImportBatch.Status.SUCCEEDED, batch.error
    assert_conserved(set(batch.billing_periods))


def missing_focus_columns(path: Path) -> list[str]:
    """FOCUS columns the importer requires that a Parquet sample's schema lacks."""
    if path.suffix != ".parquet":
        return []
    names = set(pq.read_schema(path).names)
    return [column for column in REQUIRED_COLUMNS if column not in names]


def test_all_samples_together_with_pods_reconcile_in_the_api(
    samples_dir: Path, finance_api: APIClient
) -> None:
    months: set[str] = set()
    for relative, format_name in SAMPLES:
        batch = ingest(samples_dir / relative, format_name)
        if batch is not None and batch.status == ImportBatch.Status.SUCCEEDED:
            months.update(batch.billing_periods)
    allocation = samples_dir / "kubernetes" / "opencost_allocation_example_output.json"
    call_command("ingest_jobs", "--format", "opencost", str(allocation), stdout=io.StringIO())
    for label in sorted(months):
        call_command("attribute", "--month", label, stdout=io.StringIO())
    assert_conserved(months)
    for label in sorted(months):
        body = finance_api.get("/api/v1/reconciliation/", {"month": label}).json()
        assert body["by_account"], label
        for row in body["by_account"]:
            assert Decimal(row["difference"]) == 0, (label, row)
