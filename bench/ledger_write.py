"""The month's ledger written to PostgreSQL two ways, back to back in one run (issue 34):
value tuples adapted by psycopg row by row (rows.ledger_values through writer._insert, the
write before copy_columns.py) against integer columns by binary COPY (copy_columns.ledger_copy).

    DATABASE_URL=postgres://... python bench/ledger_write.py --nodes 200 --jobs 60000

It builds the bench month on a scratch database (bench/month_sql.py), loads it and runs the
first pass as the attribution step does, then writes the same ledger rows into two staging
tables, checks they hold the same rows (EXCEPT both ways, every column) and prints each time
and the ratio. The scratch database is dropped afterwards.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
MONTH = dt.date(2025, 1, 1)


def _measure(nodes: int, jobs: int) -> None:
    from django.db import connection, transaction
    from month_sql import build_month_sql

    from finops.attribution.inputs.month import inputs_load
    from finops.attribution.ledger.copy_columns import ledger_copy
    from finops.attribution.ledger.partial import part_first_pass
    from finops.attribution.ledger.rows import LEDGER_COLUMNS, ledger_names, ledger_values
    from finops.attribution.ledger.staging import stage_create
    from finops.attribution.ledger.writer import _insert
    from finops.attribution.models import AllocatedCost
    from finops.attribution.services import _gc_paused

    build_month_sql(nodes, jobs, 7)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    # GC paused, as in the attribution run (services._gc_paused).
    with transaction.atomic(), _gc_paused():
        inputs, _ = inputs_load(month=MONTH)
        part = part_first_pass(inputs, engine_name="vector")
        ledger = part.ledger
        names = ledger_names()
        stage_create("attribution_stage_bench_tuples", names)
        stage_create("attribution_stage_bench_columns", names)
        began = time.perf_counter()
        values = ledger_values(MONTH, inputs, ledger)
        _insert(AllocatedCost, LEDGER_COLUMNS, values, into="attribution_stage_bench_tuples")
        tuples_s = time.perf_counter() - began
        began = time.perf_counter()
        ledger_copy("attribution_stage_bench_columns", MONTH, inputs, ledger)
        columns_s = time.perf_counter() - began
        columns = ", ".join(f'"{name}"' for name in names)
        with connection.cursor() as cursor:
            differ = 0
            for a, b in (("tuples", "columns"), ("columns", "tuples")):
                cursor.execute(
                    f"SELECT count(*) FROM (SELECT {columns} FROM attribution_stage_bench_{a} "
                    f"EXCEPT ALL SELECT {columns} FROM attribution_stage_bench_{b}) AS d"
                )
                differ += cursor.fetchone()[0]
        transaction.set_rollback(True)
    print(f"{len(ledger):,} ledger rows ({nodes} nodes, {jobs:,} jobs)")
    print(f"  value tuples (psycopg, row by row)  {tuples_s:8.2f} s")
    print(f"  integer columns (binary COPY)       {columns_s:8.2f} s")
    print(f"  ratio columns / tuples              {columns_s / tuples_s:8.2f}x")
    print(f"  rows that differ                    {differ:8d}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=60_000)
    args = parser.parse_args()
    base = os.environ.get("DATABASE_URL", "")
    if not base.startswith("postgres"):
        raise SystemExit("DATABASE_URL must name a PostgreSQL database")
    from attribution import _scratch_database, _setup_django

    url, drop = _scratch_database(base)
    try:
        _setup_django(url)
        _measure(args.nodes, args.jobs)
    finally:
        from django.db import connections

        connections.close_all()
        drop()


if __name__ == "__main__":
    main()
