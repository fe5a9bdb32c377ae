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
import random
import resource
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

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


# ------------------------------------------------------------------------------ data

_INSTANCE_TYPES = ("p5.48xlarge", "p4d.24xlarge", "g5.12xlarge", "g6.xlarge", "m7i.large")
_REGIONS = ("us-east-1", "us-west-2", "eu-west-1")
_TEAMS = ("vision", "speech", "search", "ads", "infra")
_ACCOUNTS = tuple(f"{111111111111 + 7 * i}" for i in range(8))
# CUR line item types in rough real-world proportions, with the columns each one fills.
_CUR_TYPES = (
    ("Usage",) * 12
    + ("SavingsPlanCoveredUsage",) * 4
    + ("SavingsPlanNegation",) * 2
    + ("DiscountedUsage",) * 3
    + ("Tax", "Credit", "RIFee", "SavingsPlanRecurringFee")
)

CUR_COLUMNS = (
    "bill_bill_type",
    "bill_billing_entity",
    "bill_billing_period_end_date",
    "bill_billing_period_start_date",
    "bill_invoice_id",
    "bill_payer_account_id",
    "identity_line_item_id",
    "identity_time_interval",
    "line_item_availability_zone",
    "line_item_blended_cost",
    "line_item_currency_code",
    "line_item_line_item_description",
    "line_item_line_item_type",
    "line_item_net_unblended_cost",
    "line_item_operation",
    "line_item_product_code",
    "line_item_resource_id",
    "line_item_unblended_cost",
    "line_item_unblended_rate",
    "line_item_usage_account_id",
    "line_item_usage_amount",
    "line_item_usage_end_date",
    "line_item_usage_start_date",
    "line_item_usage_type",
    "pricing_public_on_demand_cost",
    "pricing_public_on_demand_rate",
    "pricing_term",
    "pricing_unit",
    "product",
    "product_instance_type",
    "product_product_family",
    "product_region_code",
    "product_servicecode",
    "product_sku",
    "reservation_effective_cost",
    "reservation_reservation_a_r_n",
    "reservation_unused_amortized_upfront_fee_for_billing_period",
    "reservation_unused_recurring_fee",
    "resource_tags",
    "savings_plan_savings_plan_a_r_n",
    "savings_plan_savings_plan_effective_cost",
    "savings_plan_total_commitment_to_date",
    "savings_plan_used_commitment",
)

FOCUS_COLUMNS = (
    "BillingAccountId",
    "BillingCurrency",
    "BillingPeriodEnd",
    "BillingPeriodStart",
    "BilledCost",
    "ChargeCategory",
    "ChargeDescription",
    "ChargePeriodEnd",
    "ChargePeriodStart",
    "CommitmentDiscountId",
    "CommitmentDiscountStatus",
    "CommitmentDiscountType",
    "ConsumedQuantity",
    "ConsumedUnit",
    "ContractedCost",
    "EffectiveCost",
    "ListCost",
    "PricingCategory",
    "ProviderName",
    "RegionId",
    "ResourceId",
    "ResourceName",
    "ResourceType",
    "ServiceCategory",
    "ServiceName",
    "SkuId",
    "SkuPriceDetails",
    "SubAccountId",
    "Tags",
)


def _csv_cell(value: str) -> str:
    if any(ch in value for ch in ',"\n\r'):
        return '"' + value.replace('"', '""') + '"'
    return value


def _money(rng: random.Random, high: float) -> str:
    # Up to 10 decimals, as CUR writes them: exercises the exact-decimal path, not floats.
    return f"{rng.uniform(0, high):.10f}".rstrip("0").rstrip(".") or "0"


def _hour_pairs() -> list[tuple[str, str]]:
    pairs = []
    for day in range(1, 31):
        for hour in range(24):
            start = f"2024-09-{day:02d}T{hour:02d}:00:00Z"
            end = (
                f"2024-09-{day:02d}T{hour + 1:02d}:00:00Z"
                if hour < 23
                else (f"2024-09-{day + 1:02d}T00:00:00Z" if day < 30 else "2024-10-01T00:00:00Z")
            )
            pairs.append((start, end))
    return pairs


def cur_rows(count: int, seed: int) -> Iterator[dict[str, str]]:
    rng = random.Random(seed)
    hours = _hour_pairs()
    resources = [f"i-{rng.getrandbits(64):016x}" for _ in range(2000)]
    sp_arn = "arn:aws:savingsplans::111111111111:savingsplan/sp-0123456789abcdef"
    ri_arn = "arn:aws:ec2:us-east-1:111111111111:reserved-instances/ri-0123456789abcdef"
    for index in range(count):
        start, end = hours[index % len(hours)]
        line_item_type = rng.choice(_CUR_TYPES)
        resource_index = rng.randrange(len(resources))
        instance_type = _INSTANCE_TYPES[resource_index % len(_INSTANCE_TYPES)]
        region = _REGIONS[resource_index % len(_REGIONS)]
        team = _TEAMS[resource_index % len(_TEAMS)]
        cost = _money(rng, 98.0)
        spot = line_item_type == "Usage" and resource_index % 7 == 0
        row = dict.fromkeys(CUR_COLUMNS, "")
        row.update(
            bill_bill_type="Anniversary",
            bill_billing_entity="AWS",
            bill_billing_period_start_date="2024-09-01T00:00:00Z",
            bill_billing_period_end_date="2024-10-01T00:00:00Z",
            bill_invoice_id="",
            bill_payer_account_id=_ACCOUNTS[0],
            identity_line_item_id=f"{rng.getrandbits(80):020x}",
            identity_time_interval=f"{start}/{end}",
            line_item_availability_zone=f"{region}a",
            line_item_blended_cost=cost,
            line_item_currency_code="USD",
            line_item_line_item_description=f"{instance_type} instance hour, {region}",
            line_item_line_item_type=line_item_type,
            line_item_net_unblended_cost=cost,
            line_item_operation="RunInstances",
            line_item_product_code="AmazonEC2",
            line_item_resource_id=resources[resource_index],
            line_item_unblended_cost=cost,
            line_item_unblended_rate="98.32",
            line_item_usage_account_id=_ACCOUNTS[resource_index % len(_ACCOUNTS)],
            line_item_usage_amount="1.0",
            line_item_usage_end_date=end,
            line_item_usage_start_date=start,
            line_item_usage_type=f"USE1-{'SpotUsage' if spot else 'BoxUsage'}:{instance_type}",
            pricing_public_on_demand_cost=cost,
            pricing_public_on_demand_rate="98.32",
            pricing_term="OnDemand",
            pricing_unit="Hrs",
            product=(
                '{"product_name":"Amazon Elastic Compute Cloud","operating_system":"Linux",'
                f'"region":"{region}"}}'
            ),
            product_instance_type=instance_type,
            product_product_family="Compute Instance",
            product_region_code=region,
            product_servicecode="AmazonEC2",
            product_sku=f"SKU{resource_index % 40:04d}",
            resource_tags=f'{{"user_team":"{team}","user_Name":"node-{resource_index}"}}',
        )
        if line_item_type in ("Tax", "Credit"):
            row["line_item_resource_id"] = ""
            row["resource_tags"] = ""
            if line_item_type == "Credit":
                row["line_item_unblended_cost"] = "-" + cost
        elif line_item_type == "SavingsPlanCoveredUsage":
            row["savings_plan_savings_plan_a_r_n"] = sp_arn
            row["savings_plan_savings_plan_effective_cost"] = _money(rng, 60.0)
        elif line_item_type == "SavingsPlanNegation":
            row["savings_plan_savings_plan_a_r_n"] = sp_arn
            row["line_item_unblended_cost"] = "-" + cost
        elif line_item_type == "DiscountedUsage":
            row["reservation_reservation_a_r_n"] = ri_arn
            row["reservation_effective_cost"] = _money(rng, 50.0)
        elif line_item_type == "RIFee":
            row["reservation_reservation_a_r_n"] = ri_arn
            row["reservation_unused_amortized_upfront_fee_for_billing_period"] = _money(rng, 5.0)
            row["reservation_unused_recurring_fee"] = _money(rng, 5.0)
        elif line_item_type == "SavingsPlanRecurringFee":
            row["savings_plan_savings_plan_a_r_n"] = sp_arn
            row["savings_plan_total_commitment_to_date"] = "100"
            row["savings_plan_used_commitment"] = _money(rng, 100.0)
        yield row


def focus_rows(count: int, seed: int) -> Iterator[dict[str, str]]:
    rng = random.Random(seed)
    hours = _hour_pairs()
    resources = [f"i-{rng.getrandbits(64):016x}" for _ in range(2000)]
    for index in range(count):
        start, end = hours[index % len(hours)]
        resource_index = rng.randrange(len(resources))
        instance_type = _INSTANCE_TYPES[resource_index % len(_INSTANCE_TYPES)]
        region = _REGIONS[resource_index % len(_REGIONS)]
        team = _TEAMS[resource_index % len(_TEAMS)]
        committed = resource_index % 4 == 0
        billed = _money(rng, 98.0)
        yield {
            "BillingAccountId": _ACCOUNTS[0],
            "BillingCurrency": "USD",
            "BillingPeriodEnd": "2024-10-01T00:00:00Z",
            "BillingPeriodStart": "2024-09-01T00:00:00Z",
            "BilledCost": billed,
            "ChargeCategory": "Usage",
            "ChargeDescription": f"{instance_type} instance hour",
            "ChargePeriodEnd": end,
            "ChargePeriodStart": start,
            "CommitmentDiscountId": "sp-0123456789abcdef" if committed else "",
            "CommitmentDiscountStatus": "Used" if committed else "",
            "CommitmentDiscountType": "Savings Plan" if committed else "",
            "ConsumedQuantity": "1",
            "ConsumedUnit": "Hours",
            "ContractedCost": billed,
            "EffectiveCost": _money(rng, 60.0) if committed else billed,
            "ListCost": billed,
            "PricingCategory": "Committed" if committed else "Standard",
            "ProviderName": "AWS",
            "RegionId": region,
            "ResourceId": resources[resource_index],
            "ResourceName": f"node-{resource_index}",
            "ResourceType": "Virtual Machine",
            "ServiceCategory": "Compute",
            "ServiceName": "Amazon Elastic Compute Cloud",
            "SkuId": f"SKU{resource_index % 40:04d}",
            "SkuPriceDetails": f'{{"InstanceType":"{instance_type}"}}',
            "SubAccountId": _ACCOUNTS[resource_index % len(_ACCOUNTS)],
            "Tags": f'{{"team":"{team}"}}',
        }


def write_csv(
    path: Path, columns: tuple[str, ...], rows: Iterator[dict[str, str]], count: int
) -> None:
    with path.open("w", encoding="utf-8", newline="") as handle:
        handle.write(",".join(columns) + "\n")
        lines: list[str] = []
        for row in rows:
            lines.append(",".join(_csv_cell(row[column]) for column in columns))
            if len(lines) >= 10_000:
                handle.write("\n".join(lines) + "\n")
                lines = []
        if lines:
            handle.write("\n".join(lines) + "\n")


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
