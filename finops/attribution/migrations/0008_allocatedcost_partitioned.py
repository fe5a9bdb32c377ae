"""On PostgreSQL, the ledger (attribution_allocatedcost) becomes a table partitioned by billing
month (declarative RANGE partitioning on billing_period, one partition per month), so that
re-attributing a month truncates that month's partition instead of deleting its rows one by
one (finops.attribution.ledger.partitions). A DEFAULT partition holds rows of a month that has no
partition yet; creating the month's partition moves them into it. A no-op on SQLite, and no change to Django's model state:

- PostgreSQL wants the partition key in every unique constraint, so the primary key becomes
  (id, billing_period). Django keeps `id` as the model's primary key: ids still come from one
  identity sequence on the parent, so they stay unique, and every ORM lookup by id works.
- Nothing references the ledger (no incoming foreign key; that is why it can be partitioned
  without a composite key in Django's state). Its own references are kept as they were:
  the team FK with its constraint (partitioned tables may reference plain tables), job and
  source batch without one (db_constraint=False).
- Indexes and constraints are recreated on the parent under their old names, so later
  migrations that alter them by name keep working; PostgreSQL builds each partition's own.
"""

from django.db import migrations

TABLE = "attribution_allocatedcost"
OLD = "attribution_allocatedcost_plain"


def _month_partitions(cursor, table):
    cursor.execute(f"SELECT DISTINCT billing_period FROM {OLD} ORDER BY 1")
    for (month,) in cursor.fetchall():
        first = month.replace(day=1)
        stop = first.replace(year=first.year + first.month // 12, month=first.month % 12 + 1)
        name = f"{table}_m{first:%Y%m}"
        cursor.execute(f'CREATE TABLE "{name}" (LIKE "{table}")')
        cursor.execute(
            f'ALTER TABLE "{table}" ATTACH PARTITION "{name}" '
            f"FOR VALUES FROM ('{first:%Y-%m-%d}') TO ('{stop:%Y-%m-%d}')"
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
            _month_partitions(cursor, TABLE)
            # Rows of a month without its partition yet (written outside an attribution run,
            # which creates the month's partition first) land here rather than fail; creating
            # the month's partition moves them (finops.attribution.ledger.partitions).
            cursor.execute(f'CREATE TABLE "{TABLE}_default" PARTITION OF "{TABLE}" DEFAULT')
        cursor.execute(f'INSERT INTO "{TABLE}" OVERRIDING SYSTEM VALUE SELECT * FROM "{OLD}"')
        cursor.execute(f'DROP TABLE "{OLD}" CASCADE')
        key = "id, billing_period" if partitioned else "id"
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
    _rebuild(schema_editor, partitioned=False)


class Migration(migrations.Migration):
    dependencies = [("attribution", "0007_runcost_category")]

    operations = [migrations.RunPython(partition, unpartition, elidable=False)]
