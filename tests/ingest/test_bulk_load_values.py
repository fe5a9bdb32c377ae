"""bulk_load's SQLite path hands the database exactly what the fields' own get_db_prep_save
gives (the per-value work it skips where that is the value unchanged), and stores the rows
bulk_create stores."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.db import connection, models

from billing_ingest.loading.copy_load import _load_fields, _preparer, bulk_load
from billing_ingest.models import CostLineItem, ImportBatch, JobRecord
from finops.economics.models import RunEconomics
from finops.org.models import Team

# The value fast path is bulk_load's SQLite path; PostgreSQL loads by COPY (its own tests).
pytestmark = pytest.mark.skipif(
    connection.vendor != "sqlite", reason="bulk_load's value preparation is SQLite's path"
)

PARIS = ZoneInfo("Europe/Paris")
VALUES: list[Any] = [
    None,
    "",
    "p5.48xlarge",
    0,
    7,
    True,
    Decimal("1.500"),
    Decimal("-0.000000000001"),
    Decimal("12E+3"),
    dt.date(2026, 6, 1),
    dt.datetime(2026, 6, 1, 0, 30, tzinfo=dt.UTC),
    # The same instant elsewhere: stored as the UTC one.
    dt.datetime(2026, 6, 1, 2, 30, tzinfo=PARIS),
    dt.datetime(2026, 6, 1, 0, 30, 0, 250, tzinfo=dt.UTC),
    {"team": "llm"},
    [],
]


def _prepared(field: models.Field[Any, Any], value: Any) -> tuple[bool, Any]:
    try:
        return True, field.get_db_prep_save(value, connection)
    except Exception as exc:  # the same failure either way
        return False, type(exc)


@pytest.mark.django_db
@pytest.mark.parametrize("model", [CostLineItem, JobRecord, RunEconomics])
def test_each_value_prepared_as_the_field_does(model: type[models.Model]) -> None:
    for field in _load_fields(model):
        prepare = _preparer(field, connection)
        for value in VALUES * 2:  # twice: the memoised dates and datetimes
            expected = _prepared(field, value)
            try:
                got: tuple[bool, Any] = (True, prepare(value))
            except Exception as exc:
                got = (False, type(exc))
            assert got == expected, (field.name, value)
            assert type(got[1]) is type(expected[1]), (field.name, value)
            assert str(got[1]) == str(expected[1]), (field.name, value)


@pytest.mark.django_db
def test_rows_stored_as_bulk_create_stores_them() -> None:
    team = Team.objects.create(name="Language", slug="language")
    common: dict[str, Any] = {
        "billing_period": dt.date(2026, 6, 1),
        "team_id": team.pk,
        "cluster": "aws-east",
        "currency": "USD",
        "category": "training",
        "cost": Decimal("12.345678"),
        "waste_rework": Decimal("0.50"),
        "gpu_kwh": Decimal("3.25"),
        "pue": None,
        "has_metrics": True,
        "useful_tokens": 10**12,
        "refreshed_at": dt.datetime(2026, 7, 1, 2, tzinfo=PARIS),
    }
    bulk_load(RunEconomics, [{**common, "run_id": "loaded"}])
    RunEconomics.objects.bulk_create([RunEconomics(**{**common, "run_id": "created"})])
    names = [str(f.column) for f in _load_fields(RunEconomics) if f.name != "run_id"]
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT run_id, {', '.join(names)} FROM economics_runeconomics ORDER BY run_id"
        )
        created, loaded = cursor.fetchall()
    assert (created[0], loaded[0]) == ("created", "loaded")
    # refreshed_at is auto_now: bulk_create stamps its own time.
    stamp = names.index("refreshed_at") + 1
    assert created[1:stamp] + created[stamp + 1 :] == loaded[1:stamp] + loaded[stamp + 1 :]
    assert loaded[stamp] == dt.datetime(2026, 7, 1, 0, 0)


@pytest.mark.django_db
def test_a_foreign_key_and_json_go_through_the_field() -> None:
    batch = ImportBatch.objects.create(source="s", format="focus", file_name="f.csv")
    row = {
        "batch_id": batch.pk,
        "source": "s",
        "billing_period": dt.date(2026, 6, 1),
        "billing_period_start": dt.datetime(2026, 6, 1, tzinfo=dt.UTC),
        "charge_period_start": dt.datetime(2026, 6, 1, tzinfo=dt.UTC),
        "charge_period_end": dt.datetime(2026, 6, 1, 1, tzinfo=dt.UTC),
        "billed_cost": Decimal("1.25"),
        "effective_cost": Decimal("1.000000"),
        "billing_currency": "USD",
        "tags": {"team": "language"},
        "x_gpu_count": 8,
    }
    bulk_load(CostLineItem, [row])
    item = CostLineItem.objects.get()
    assert item.batch_id == batch.pk
    assert item.tags == {"team": "language"}
    assert item.effective_cost == Decimal("1.000000")
    assert item.charge_period_end == dt.datetime(2026, 6, 1, 1, tzinfo=dt.UTC)
    assert item.x_gpu_count == 8
