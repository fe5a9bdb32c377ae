"""The ledger's rows as the database takes them: value tuples in LEDGER_COLUMNS order
(ledger_values), which ledger._insert sends down PostgreSQL's COPY or SQLite's executemany.
A month's ledger has millions of rows (8.2M at 10,000 nodes), written by each part into its
staging table and by the reduce into the month's table.

COPY text formatted here, each distinct value once, was measured and dropped: 10,000 nodes,
8 parts, attribute step 310 s against 313 s with psycopg adapting the tuples, inside the
run-to-run noise, for a hundred lines of escaping on the money path.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

from finops.attribution import engine
from finops.attribution.inputs.month import Inputs
from finops.attribution.ledger.rollup_sums import Ledger
from finops.attribution.models import AllocatedCost

# Columns of AllocatedCost written, in the order ledger_values gives them.
LEDGER_COLUMNS = (
    "billing_period", "day", "category", "team_id", "job_id", "run_id", "node", "provider_name",
    "billing_account_id", "sub_account_id", "service_name", "pricing_category",
    "billing_currency", "source_batch_id", "pricing_mix", "list_cost_source", "amount",
    "gpu_seconds", "list_cost", "contracted_cost",
)  # fmt: skip

_EPOCH = dt.date(1970, 1, 1)


def ledger_names() -> list[str]:
    """The database columns of LEDGER_COLUMNS, in order."""
    fields = {f.attname: str(f.column) for f in AllocatedCost._meta.concrete_fields}
    return [fields[c] for c in LEDGER_COLUMNS]


def day_date(day: int, cache: dict[int, dt.date]) -> dt.date:
    """The date of a ledger day (days since the epoch), made once per day."""
    if day not in cache:
        cache[day] = _EPOCH + dt.timedelta(days=day)
    return cache[day]


def ledger_values(month: dt.date, inputs: Inputs, ledger: Ledger) -> Iterator[tuple[Any, ...]]:
    """Each row's values in LEDGER_COLUMNS order."""
    days: dict[int, dt.date] = {}
    job_meta = inputs.job_meta
    dims = inputs.dims
    to_decimal = engine.units_to_decimal
    for (dims_i, day, category, team_id, job_id, node), values in ledger.items():
        units, seconds, list_units, contracted_units = values
        run_id = job_meta[job_id].run_id if job_id is not None else ""
        yield (
            month, day_date(day, days), category, team_id, job_id, run_id, node, *dims[dims_i],
            to_decimal(units), seconds, to_decimal(list_units), to_decimal(contracted_units),
        )  # fmt: skip
