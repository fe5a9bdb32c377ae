"""Planner statistics for the tables an import batch has just filled (PostgreSQL only).

The pipeline reads a batch's rows seconds after it settles, before autovacuum would analyse
them (and never where autovacuum is off). Without statistics PostgreSQL guesses: on the demo it
planned the job table's 29,317 rows as 1,018. So when a batch settles, each table it filled is
analysed if it holds rows but no column statistics (never analysed: a new table, or a billing
partition whose only row count came from building its indexes), or has grown by more than a
tenth since its size was last measured (the scale of autovacuum's own threshold), in pages: its
size now against pg_class.relpages, so small batches that add up are caught too. One catalogue
query per batch and an ANALYZE per such table (it samples a fixed number of rows: about the
same cost at any size); nothing on SQLite, which plans without statistics.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection

# Analyse a table grown by more than this share of the pages pg_class last recorded (ANALYZE,
# VACUUM or an index build).
GROWTH = 0.1


def tables_analyze_if_changed(tables: Sequence[str]) -> list[str]:
    """ANALYZE each of `tables` with rows but no statistics, or grown by more than GROWTH; the names
    analysed, in the order given. After the batch's commit (or inside the caller's transaction:
    ANALYZE counts its own transaction's rows)."""
    if connection.vendor != "postgresql" or not tables:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, c.relpages, "
            "pg_relation_size(c.oid) / current_setting('block_size')::bigint, "
            "EXISTS (SELECT 1 FROM pg_stats s WHERE s.schemaname = n.nspname "
            "AND s.tablename = c.relname) "
            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.oid = ANY(%s::regclass[])",
            [[f'"{name}"' for name in tables]],
        )
        stale = {
            name
            for name, pages_then, pages_now, has_statistics in cursor.fetchall()
            if (pages_now and not has_statistics) or pages_now > pages_then * (1 + GROWTH)
        }
        analysed = [name for name in tables if name in stale]
        for name in analysed:
            cursor.execute(f'ANALYZE "{name}"')
    return analysed
