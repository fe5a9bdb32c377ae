"""FINOPS_ATTRIBUTION_PARTS=auto (the default): the attribute step splits a month across workers
once its line items pass FINOPS_ATTRIBUTION_PART_LINE_ITEMS, so a month that grows never needs
more memory in one process than a worker has; a number fixes the count."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from billing_ingest.models import CostLineItem, ImportBatch
from finops.attribution import month_step, tasks
from finops.attribution.models import AllocatedCost
from finops.attribution.services import attribution_month_parts_count
from finops.celery import app as celery_app
from finops.settings import _attribution_parts
from tests.split_months import MONTH, at, scenario_build

# scenario_build's month: 7 billed resources, this many settled line items.
SCENARIO_LINES = 22


@dataclass
class _Queued:
    id: str


@pytest.fixture
def split_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[dt.date, int]]]:
    """The chord is not what these tests are about: record what the step asked of it."""
    calls: list[tuple[dt.date, int]] = []

    def split(month: dt.date, parts: int, pipeline_run_id: int | None = None) -> _Queued:
        calls.append((month, parts))
        return _Queued(id="reduce-id")

    monkeypatch.setattr(month_step, "attribution_month_split", split)
    # A broker, as on a worker: eager runs never split.
    eager = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = False
    yield calls
    celery_app.conf.task_always_eager = eager


def _settled_lines() -> int:
    return CostLineItem.objects.settled().filter(billing_period=MONTH).count()


@pytest.mark.django_db
def test_auto_asks_one_part_per_line_items_per_part_of_the_settled_month() -> None:
    scenario_build()
    assert _settled_lines() == SCENARIO_LINES
    expected = {1: 22, 2: 11, 5: 5, 10: 3, 21: 2, 22: 1, 23: 1, 10**6: 1}
    for per_part, parts in expected.items():
        assert attribution_month_parts_count(month=MONTH, line_items_per_part=per_part) == parts


@pytest.mark.django_db
def test_line_items_of_a_failed_import_do_not_count() -> None:
    scenario_build()
    failed = ImportBatch.objects.create(
        kind="billing", format="focus", source="s", file_name="bad", status="failed"
    )
    CostLineItem.objects.create(
        batch=failed, source="s", billing_period=MONTH, billing_period_start=at(0),
        provider_name="AWS", billing_account_id="111", billing_currency="USD",
        charge_period_start=at(0), charge_period_end=at(3600), billed_cost=Decimal(5),
        effective_cost=Decimal(5), resource_id="i-extra",
    )  # fmt: skip
    assert attribution_month_parts_count(month=MONTH, line_items_per_part=22) == 1


@pytest.mark.django_db
def test_the_step_splits_a_month_past_the_line_items_per_part(
    settings: Any, split_calls: list[tuple[dt.date, int]]
) -> None:
    scenario_build()
    settings.FINOPS_ATTRIBUTION_PARTS = None
    settings.FINOPS_ATTRIBUTION_PART_LINE_ITEMS = 8
    summary = tasks.attribute_month.run("2025-06")
    assert split_calls == [(MONTH, 3)]
    assert summary["parts"] == 3
    assert summary["reduce"] == "reduce-id"


@pytest.mark.django_db
def test_the_step_attributes_a_month_under_the_line_items_per_part_in_this_process(
    settings: Any, split_calls: list[tuple[dt.date, int]]
) -> None:
    scenario_build()
    settings.FINOPS_ATTRIBUTION_PARTS = None
    settings.FINOPS_ATTRIBUTION_PART_LINE_ITEMS = SCENARIO_LINES
    summary = tasks.attribute_month.run("2025-06")
    assert split_calls == []
    assert summary["month"] == "2025-06"
    assert "reduce" not in summary
    assert AllocatedCost.objects.filter(billing_period=MONTH).exists()


@pytest.mark.django_db
def test_a_number_fixes_the_parts_whatever_the_month_holds(
    settings: Any, split_calls: list[tuple[dt.date, int]]
) -> None:
    scenario_build()
    settings.FINOPS_ATTRIBUTION_PARTS = 2
    settings.FINOPS_ATTRIBUTION_PART_LINE_ITEMS = 1
    tasks.attribute_month.run("2025-06")
    assert split_calls == [(MONTH, 2)]


@pytest.mark.parametrize(("value", "parts"), [("auto", None), (" AUTO ", None), ("1", 1), ("8", 8)])
def test_the_setting_reads_auto_or_a_count(value: str, parts: int | None) -> None:
    assert _attribution_parts(value) == parts


@pytest.mark.parametrize("value", ["0", "-2", "two", "", "1.5"])
def test_a_setting_that_is_neither_auto_nor_a_count_stops_the_start(value: str) -> None:
    with pytest.raises(ImproperlyConfigured, match="FINOPS_ATTRIBUTION_PARTS"):
        _attribution_parts(value)
