"""OpenCost /cloudCost responses as a billing source: one line item per provider and day."""

from __future__ import annotations

import json
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from billing_ingest.models import CostLineItem, ImportBatch
from finops.core.money import MONEY_QUANTUM, MoneySum

pytestmark = pytest.mark.django_db


def _expected(path: Path) -> tuple[int, dict[str, Decimal], dict[str, Decimal]]:
    # Straight from the file: every cost item, amortised net and invoiced, per provider.
    document = json.loads(path.read_text(), parse_float=Decimal)
    effective: dict[str, Decimal] = defaultdict(Decimal)
    billed: dict[str, Decimal] = defaultdict(Decimal)
    count = 0
    for cost_set in document["data"]["sets"]:
        for item in cost_set["cloudCosts"].values():
            provider = item["properties"]["provider"]
            effective[provider] += item["amortizedNetCost"]["cost"].quantize(MONEY_QUANTUM)
            billed[provider] += item["invoicedCost"]["cost"].quantize(MONEY_QUANTUM)
            count += 1
    return count, dict(effective), dict(billed)


def test_shared_sample_ingests_with_exact_totals_per_provider(samples_dir: Path) -> None:
    path = samples_dir / "kubernetes" / "opencost_cloudcost_example_output.json"
    count, effective, billed = _expected(path)
    call_command("ingest_billing", "--format", "opencost-cloudcost", str(path))
    assert CostLineItem.objects.count() == count
    rows = CostLineItem.objects.values("provider_name").annotate(
        effective=MoneySum("effective_cost"), billed=MoneySum("billed_cost")
    )
    assert {r["provider_name"]: r["effective"] for r in rows} == effective
    assert {r["provider_name"]: r["billed"] for r in rows} == billed


def ingest(path: Path, *args: str) -> None:
    call_command("ingest_billing", "--format", "opencost-cloudcost", str(path), *args)


def _write(tmp_path: Path, item: dict) -> Path:
    path = tmp_path / "cloudcost.json"
    path.write_text(json.dumps({"code": 200, "data": {"sets": [{"cloudCosts": {"a": item}}]}}))
    return path


GOOD_ITEM = {
    "properties": {"provider": "GCP", "invoiceEntityID": "01A2", "service": "Compute Engine",
                   "labels": {"team": "vision"}},
    "window": {"start": "2025-03-31T00:00:00Z", "end": "2025-04-01T00:00:00Z"},
    "listCost": {"cost": 12.5}, "netCost": {"cost": 11.25},
    "amortizedNetCost": {"cost": 10.125}, "invoicedCost": {"cost": 11.25},
}  # fmt: skip


def test_fields_map_to_focus(tmp_path: Path) -> None:
    call_command(
        "ingest_billing", "--format", "opencost-cloudcost", str(_write(tmp_path, GOOD_ITEM))
    )
    line = CostLineItem.objects.get()
    assert (line.provider_name, line.billing_account_id, line.service_name) == (
        "GCP", "01A2", "Compute Engine",
    )  # fmt: skip
    assert (line.effective_cost, line.billed_cost, line.list_cost, line.contracted_cost) == (
        Decimal("10.125"), Decimal("11.25"), Decimal("12.5"), Decimal("11.25"),
    )  # fmt: skip
    assert line.billing_period.isoformat() == "2025-03-01"
    assert line.tags == {"team": "vision"}


def test_missing_amortized_cost_names_the_item_and_field_and_keeps_earlier_data(
    tmp_path: Path,
) -> None:
    call_command(
        "ingest_billing", "--format", "opencost-cloudcost", str(_write(tmp_path, GOOD_ITEM))
    )
    broken = {k: v for k, v in GOOD_ITEM.items() if k != "amortizedNetCost"}
    path = tmp_path / "v2"
    path.mkdir()
    with pytest.raises(CommandError, match=r"row 1, column amortizedNetCost\.cost: missing"):
        ingest(_write(path, broken), "--source", "opencost-cloudcost:cloudcost")
    assert ImportBatch.objects.filter(status=ImportBatch.Status.FAILED).count() == 1
    assert CostLineItem.objects.get().effective_cost == Decimal("10.125")
