"""On PostgreSQL, the line items (billing_ingest_costlineitem) become a table partitioned by
billing month (RANGE on billing_period, one table per month), each month partitioned by import
batch (LIST on batch_id, one table per batch), so that a restatement swap attaches the new
batch's table and drops the superseded one's, and deleting a batch drops its tables
(billing_ingest.loading.partitions). DEFAULT partitions (the root's, and each month's) hold rows written
outside an import. The rows are kept, ids included. A no-op on SQLite, and no change to Django's
model state:

- PostgreSQL wants every partition key in every unique constraint, so the primary key becomes
  (id, billing_period, batch_id). Django keeps `id` as the model's primary key: ids still come
  from one identity sequence on the parent (the loading tables draw from it too), so they stay
  unique, and every ORM lookup by id works.
- Nothing references the line items (no incoming foreign key: the ledger names its lines by
  values, not by a constraint). Their own foreign key to the import batch is kept, recreated on
  the parent (partitioned tables may reference plain tables).
- Indexes and constraints are recreated on the parent under their old names; PostgreSQL builds
  each partition's own.
"""

from django.db import migrations

TABLE = "billing_ingest_costlineitem"
OLD = "billing_ingest_costlineitem_plain"


def _next_month(first):
    return first.replace(year=first.year + first.month // 12, month=first.month % 12 + 1)


def _partitions(cursor):
    cursor.execute(f'CREATE TABLE "{TABLE}_default" PARTITION OF "{TABLE}" DEFAULT')
    cursor.execute(f"SELECT DISTINCT billing_period, batch_id FROM {OLD} ORDER BY 1, 2")
    months = {}
    for day, batch_id in cursor.fetchall():
        months.setdefault(day.replace(day=1), set()).add(batch_id)
    for first, batches in sorted(months.items()):
        name = f"{TABLE}_m{first:%Y%m}"
        cursor.execute(
            f'CREATE TABLE "{name}" PARTITION OF "{TABLE}" FOR VALUES FROM '
            f"('{first:%Y-%m-%d}') TO ('{_next_month(first):%Y-%m-%d}') "
            "PARTITION BY LIST (batch_id)"
        )
        cursor.execute(f'CREATE TABLE "{name}_default" PARTITION OF "{name}" DEFAULT')
        for batch_id in sorted(batches):
            cursor.execute(
                f'CREATE TABLE "{name}_b{batch_id}" PARTITION OF "{name}" '
                f"FOR VALUES IN ({int(batch_id)})"
            )


def _definitions(cursor):
    """Index and constraint definitions of the plain table (primary key aside)."""
    cursor.execute(
        "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s "
        "AND indexname NOT IN (SELECT conname FROM pg_constraint WHERE conrelid = %s::regclass)",
        [OLD, OLD],
    )
    indexes = cursor.fetchall()
    cursor.execute(
        "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE conrelid = %s::regclass AND contype <> 'p'",
        [OLD],
    )
    return indexes, cursor.fetchall()


def _rebuild(schema_editor, *, partitioned):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f'ALTER TABLE "{TABLE}" RENAME TO "{OLD}"')
        indexes, constraints = _definitions(cursor)
        partition = " PARTITION BY RANGE (billing_period)" if partitioned else ""
        cursor.execute(
            f'CREATE TABLE "{TABLE}" (LIKE "{OLD}" INCLUDING DEFAULTS INCLUDING IDENTITY '
            f"INCLUDING STORAGE){partition}"
        )
        if partitioned:
            _partitions(cursor)
        cursor.execute(f'INSERT INTO "{TABLE}" OVERRIDING SYSTEM VALUE SELECT * FROM "{OLD}"')
        cursor.execute(f'DROP TABLE "{OLD}" CASCADE')
        key = "id, billing_period, batch_id" if partitioned else "id"
        cursor.execute(f'ALTER TABLE "{TABLE}" ADD CONSTRAINT "{TABLE}_pkey" PRIMARY KEY ({key})')
        for name, definition in indexes:
            on = definition.index(" USING ")
            cursor.execute(f'CREATE INDEX "{name}" ON "{TABLE}"{definition[on:]}')
        for name, definition in constraints:
            cursor.execute(f'ALTER TABLE "{TABLE}" ADD CONSTRAINT "{name}" {definition}')
        cursor.execute(
            f"SELECT setval(pg_get_serial_sequence('{TABLE}', 'id'), "
            f'COALESCE((SELECT max(id) FROM "{TABLE}"), 0) + 1, false)'
        )


def partition(apps, schema_editor):
    _rebuild(schema_editor, partitioned=True)


def unpartition(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_partitioned_table WHERE partrelid = %s::regclass", [TABLE])
        if cursor.fetchone() is None:
            return
        # Tables a part loaded that no finish step attached (a batch left running): their rows
        # were never the bill; the plain table has no place for them.
        cursor.execute(
            "SELECT relname FROM pg_class WHERE relkind = 'r' AND relname ~ %s",
            [f"^{TABLE}_m[0-9]{{6}}_b[0-9]+_p[0-9]+$"],
        )
        for (name,) in cursor.fetchall():
            cursor.execute(f'DROP TABLE "{name}"')
    _rebuild(schema_editor, partitioned=False)


class Migration(migrations.Migration):
    dependencies = [("billing_ingest", "0011_batch_heartbeat_month_changes")]

    operations = [migrations.RunPython(partition, unpartition, elidable=False)]
