"""Billing ingest benchmark: end-to-end ingest throughput against a plain COPY of the same rows.

    python bench/ingest.py --rows 2000000

Generates an AWS CUR 2.0 CSV and a FOCUS 1.2 CSV of --rows rows each, ingests each through the
real service (`billing_batch_ingest`: parse, normalise, COPY into the ledger, restatement swap,
commit) into PostgreSQL, then times a plain COPY of the same normalised rows (exported from the
ledger as CSV beforehand, outside the timing) into a table built `LIKE` the ledger table
(same columns, types, defaults and indexes). The first format's file is then ingested again
under the same source: a restatement (on partitioned line items, the new batch's partition is
attached and the old one's dropped). Prints rows/s for each, the ratio ingest / COPY, the peak
RSS of each phase (VmHWM, reset between phases through /proc/self/clear_refs), the client's and
the PostgreSQL backend's CPU time, and the partitions each ingest added (each run starts with no
month table). --plain-line-items measures the unpartitioned table (migration 0012 unapplied).

The database is --database (default: a dedicated finops_ingestbench, created and migrated when
missing). Its ledger is emptied at the start of each run. Never point it at a shared database.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from ingest_files import CUR_COLUMNS, FOCUS_COLUMNS, cur_rows, focus_rows, write_csv

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATABASE = "postgres://postgres@127.0.0.1:5432/finops_ingestbench"
_WRITE_BLOCK = 1 << 20
PLAIN_MIGRATION = "0011_batch_heartbeat_month_changes"

# ------------------------------------------------------------------------------ memory


def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def reset_peak_rss() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0), so each phase reports its own peak."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


def peak_rss_mib() -> float:
    kib = _status_kib("VmHWM")
    if kib is None:  # no procfs: ru_maxrss is the whole process's peak (KiB on Linux)
        kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kib / 1024


# ------------------------------------------------------------------------------ database


def ensure_database(url: str) -> None:
    """Create the benchmark database when missing (connecting to its server's postgres db)."""
    import psycopg
    from psycopg import sql

    name = url.rsplit("/", 1)[1].split("?", 1)[0]
    if name in ("finops", "test_finops"):
        sys.exit(f"refusing to benchmark in the shared database {name!r}")
    admin = url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if found is None:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def setup_django(url: str, *, plain_line_items: bool = False) -> None:
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "finops.settings")
    sys.path.insert(0, str(ROOT))
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0, interactive=False)
    if plain_line_items:
        # The line items as they were before migration 0012: one plain table (for comparison;
        # the next run without the flag partitions them again).
        call_command("migrate", "billing_ingest", PLAIN_MIGRATION, verbosity=0, interactive=False)


@dataclass
class Result:
    label: str
    rows: int
    seconds: float
    peak_mib: float

    @property
    def rate(self) -> float:
        return self.rows / self.seconds if self.seconds else 0.0


def _cpu_seconds() -> float:
    """This process's user + system CPU time (the server's is not in it: the machine is shared,
    so wall time alone says little)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _server_cpu_seconds() -> float | None:
    """User + system CPU time of this connection's PostgreSQL backend (same machine: read from
    /proc; None where it cannot be read). Parallel index-build workers are not in it."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    # Fields 14 and 15 of stat (utime, stime), counted after the ")" that ends the name.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(label: str, rows: int, run: Callable[[], int]) -> Result:
    import gc

    gc.collect()
    reset_peak_rss()
    server_started = _server_cpu_seconds()
    started, cpu_started = time.perf_counter(), _cpu_seconds()
    done = run()
    seconds = time.perf_counter() - started
    cpu = _cpu_seconds() - cpu_started
    server_ended = _server_cpu_seconds()
    server = (
        f"  server CPU {server_ended - server_started:6.2f} s"
        if server_started is not None and server_ended is not None
        else ""
    )
    if done != rows:
        sys.exit(f"{label}: expected {rows} rows, got {done}")
    result = Result(label, rows, seconds, peak_rss_mib())
    print(
        f"  {label:<14} {rows:>10,} rows {seconds:8.2f} s {result.rate:>11,.0f} rows/s"
        f"  peak RSS {result.peak_mib:7.0f} MiB  client CPU {cpu:6.2f} s{server}"
        f"  load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    return result


def ingest(path: Path, fmt: str) -> int:
    from billing_ingest.models import ImportBatch
    from billing_ingest.services.billing import billing_batch_ingest

    # Created directly (not import_batch_create): hashing the file is not part of the ingest.
    batch = ImportBatch.objects.create(
        kind=ImportBatch.Kind.BILLING,
        format=fmt,
        source=f"bench:{fmt}:{path.name}",
        file_name=str(path),
    )
    done = billing_batch_ingest(batch_id=batch.pk)
    if done.status != ImportBatch.Status.SUCCEEDED:
        sys.exit(f"ingest of {path.name} failed: {done.error}")
    return done.row_count


def export_rows(batch_source: str, target: Path) -> list[str]:
    """The ingested rows as CSV, in COPY's column order (untimed: the COPY baseline's input)."""
    from django.db import connection

    from billing_ingest.loading.copy_load import _load_fields
    from billing_ingest.models import CostLineItem

    columns = [str(field.column) for field in _load_fields(CostLineItem)]
    quoted = ", ".join(f'"{c}"' for c in columns)
    table = CostLineItem._meta.db_table
    with connection.cursor() as cursor, target.open("wb") as out:
        query = f"COPY (SELECT {quoted} FROM {table} WHERE source = %s) TO STDOUT (FORMAT csv)"
        with cursor.cursor.copy(query, [batch_source]) as copy:
            for block in copy:
                out.write(block)
    return columns


def plain_copy(csv_path: Path, columns: list[str]) -> int:
    """COPY the normalised rows into a table LIKE the ledger (columns, types, defaults,
    indexes), in one transaction, streamed from the CSV through psycopg."""
    from django.db import connection, transaction

    from billing_ingest.models import CostLineItem

    table = CostLineItem._meta.db_table
    quoted = ", ".join(f'"{c}"' for c in columns)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS bench_plain_copy")
        cursor.execute(f"CREATE TABLE bench_plain_copy (LIKE {table} INCLUDING ALL)")
        with (
            csv_path.open("rb") as source,
            cursor.cursor.copy(f"COPY bench_plain_copy ({quoted}) FROM STDIN (FORMAT csv)") as copy,
        ):
            for block in iter(lambda: source.read(_WRITE_BLOCK), b""):
                copy.write(block)
        cursor.execute("SELECT count(*) FROM bench_plain_copy")
        count: int = cursor.fetchone()[0]
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE bench_plain_copy")
    return count


def partition_count() -> tuple[int, int]:
    """(month tables, batch partitions) of the line items: (0, 0) where not partitioned."""
    from django.db import connection

    from billing_ingest.loading.partitions import TABLE, line_items_partitioned

    if not line_items_partitioned():
        return 0, 0
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FILTER (WHERE m.relkind = 'p'), count(b.inhrelid) "
            "FROM pg_inherits i JOIN pg_class m ON m.oid = i.inhrelid "
            "LEFT JOIN pg_inherits b ON b.inhparent = m.oid "
            "AND b.inhrelid::regclass::text NOT LIKE '%%_default' "
            "WHERE i.inhparent = %s::regclass",
            [TABLE],
        )
        months, batches = cursor.fetchone()
    return int(months), int(batches)


def reset_ledger() -> None:
    """Empty the line items; partitioned, drop every month's table too, so that each ingest
    creates the partitions it loads into, as a new month's first import does."""
    from django.db import connection

    from billing_ingest.loading.partitions import DEFAULT, TABLE, line_items_partitioned
    from billing_ingest.models import CostLineItem, ImportBatch

    with connection.cursor() as cursor:
        if line_items_partitioned():
            cursor.execute(
                "SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = %s::regclass "
                "AND inhrelid <> %s::regclass",
                [TABLE, DEFAULT],
            )
            for (name,) in cursor.fetchall():
                cursor.execute(f"DROP TABLE {name}")
            cursor.execute(
                "SELECT relname FROM pg_class WHERE relkind = 'r' AND relname ~ %s",
                [f"^{TABLE}_m[0-9]{{6}}_b[0-9]+_p[0-9]+$"],
            )
            for (name,) in cursor.fetchall():
                cursor.execute(f'DROP TABLE "{name}"')
        cursor.execute(f"TRUNCATE {CostLineItem._meta.db_table}")
    ImportBatch.objects.all().delete()
    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM ANALYZE {CostLineItem._meta.db_table}")


# ------------------------------------------------------------------------------ main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000, help="rows per file (200000)")
    parser.add_argument("--database", default=DEFAULT_DATABASE, help="PostgreSQL URL")
    parser.add_argument("--workdir", type=Path, help="where to write the files (a temp dir)")
    parser.add_argument("--seed", type=int, default=20240901)
    parser.add_argument(
        "--formats", default="aws-cur,focus", help="comma-separated: aws-cur, focus (both)"
    )
    parser.add_argument(
        "--plain-line-items",
        action="store_true",
        help="unapply the line items' partitioning (migration 0012) first, to compare",
    )
    args = parser.parse_args()
    formats = [name.strip() for name in args.formats.split(",") if name.strip()]

    ensure_database(args.database)
    setup_django(args.database, plain_line_items=args.plain_line_items)
    reset_ledger()

    with tempfile.TemporaryDirectory(dir=args.workdir, prefix="finops-ingest-bench-") as tmp:
        work = Path(tmp)
        files = {
            "aws-cur": (work / "cur2.csv", CUR_COLUMNS, cur_rows),
            "focus": (work / "focus.csv", FOCUS_COLUMNS, focus_rows),
        }
        print(f"generating {args.rows:,} rows per file in {work} ...", flush=True)
        for fmt in formats:
            path, columns, rows = files[fmt]
            write_csv(path, columns, rows(args.rows, args.seed), args.rows)
            print(f"  {path.name}: {path.stat().st_size / 2**20:,.0f} MiB", flush=True)

        print("timing (PostgreSQL, one transaction each):", flush=True)
        results: dict[str, Result] = {}
        for fmt in formats:
            path = files[fmt][0]
            before = partition_count()
            results[fmt] = timed(f"ingest {fmt}", args.rows, partial(ingest, path, fmt))
            months, batches = partition_count()
            print(
                f"  partitions added by the ingest: {months - before[0]} month table(s), "
                f"{batches - before[1]} batch partition(s)",
                flush=True,
            )
        # The first format's file again, same source: a restatement (the finish step swaps the
        # new batch in for the old one: attaches its partition, drops the old one's).
        first = formats[0]
        results["restate"] = timed(
            f"restate {first}", args.rows, partial(ingest, files[first][0], first)
        )
        # The COPY baseline loads the normalised rows of the last format ingested.
        last = formats[-1]
        normalised = work / "normalised.csv"
        names = export_rows(f"bench:{last}:{files[last][0].name}", normalised)
        results["copy"] = timed("plain COPY", args.rows, partial(plain_copy, normalised, names))

    copy_rate = results["copy"].rate
    print("ratios (ingest rows/s / COPY rows/s; goal >= 0.5):")
    for fmt in formats:
        print(f"  {fmt:<8} {results[fmt].rate / copy_rate:5.2f}")
    print(f"  restatement of {formats[0]} {results['restate'].rate / copy_rate:5.2f}")
    reset_ledger()


if __name__ == "__main__":
    main()
