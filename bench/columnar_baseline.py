"""A plain columnar attribution of the bench month, read from and written to PostgreSQL: the
floor that issue 34's goal (`attribute` <= 1.5x this) is measured against.

    python bench/attribution.py --nodes 200 --jobs 60000 --no-double --copy --engines vector

runs it after the engines (PostgreSQL only) and prints each engine's ratio to it.

What it does, with NumPy and the server only (no Python loop over rows):
- read: the month's GPU node lines and the job-node entries of its jobs with binary COPY of
  bigint columns (node names, dims, times and money turned into integers by the server: money
  in 10^-12 units, GPUs in millionths), parsed by one np.frombuffer each;
- split: each job-node entry spread over the hours it runs, matched to its node's hourly line,
  its GPU-seconds the weight; each line's EffectiveCost, ListCost and ContractedCost split pro
  rata to the weights over max(node capacity, GPUs held) (float64 then floored: a plain split,
  not the engine's largest remainder), the rest of each line idle, so every line conserves;
- sums: the ledger rows, per (node, day, job, dims) and idle per (node, day, dims);
- write: the rows as bigint columns by binary COPY into a scratch table, then one INSERT ...
  SELECT on the server into a table LIKE the ledger (numeric money, dates, node names, run ids
  from the jobs), and the ledger's primary key and three indexes built, as the month's fresh
  table is. All in a transaction rolled back at the end: it leaves nothing. (The scratch tables
  are ANALYZEd before they are joined: unanalysed, a 200-node month's read took 21 s of
  nested loops instead of under 1 s.)

Not done (the engine does them): idle policies (spread), shared-cost lines, tagged and other
non-node lines, fractional node counts by lcm, team mapping, rollups (TeamDailyCost, RunCost),
the conservation check against the bill. GPUs per node: 8 (the bench's p5.48xlarge).
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]
HOUR = 3600
DAY = 86400
GPUS_PER_NODE = 8
_HEADER = b"PGCOPY\n\xff\r\n\x00" + b"\x00" * 8
_TRAILER = b"\xff\xff"

_SCRATCH = """
CREATE TEMP TABLE cb_nodes AS
SELECT name, (row_number() OVER (ORDER BY name) - 1)::bigint AS ix
FROM (SELECT DISTINCT resource_name AS name FROM billing_ingest_costlineitem
      WHERE billing_period = %(month)s AND service_category = 'Compute') AS s;
CREATE TEMP TABLE cb_dims AS
SELECT provider_name, billing_account_id, sub_account_id, service_name, pricing_category,
       billing_currency, batch_id, (row_number() OVER () - 1)::bigint AS ix
FROM (SELECT DISTINCT provider_name, billing_account_id, sub_account_id, service_name,
             pricing_category, billing_currency, batch_id
      FROM billing_ingest_costlineitem
      WHERE billing_period = %(month)s AND service_category = 'Compute') AS s;
ANALYZE cb_nodes;
ANALYZE cb_dims;
"""

_LINES = """
COPY (SELECT n.ix, d.ix, extract(epoch FROM c.charge_period_start)::bigint,
             extract(epoch FROM c.charge_period_end)::bigint,
             round(c.effective_cost * 1e12)::bigint,
             round(coalesce(c.list_cost, c.effective_cost) * 1e12)::bigint,
             round(coalesce(c.contracted_cost, c.effective_cost) * 1e12)::bigint
      FROM billing_ingest_costlineitem AS c
      JOIN cb_nodes AS n ON n.name = c.resource_name
      JOIN cb_dims AS d USING (provider_name, billing_account_id, sub_account_id, service_name,
                               pricing_category, billing_currency, batch_id)
      WHERE c.billing_period = %(month)s AND c.service_category = 'Compute')
TO STDOUT (FORMAT binary)
"""

_JOBS = """
COPY (SELECT j.id::bigint, n.ix, extract(epoch FROM j.start)::bigint,
             extract(epoch FROM coalesce(j."end", %(horizon)s))::bigint,
             round(j.gpus * 1e6)::bigint, jsonb_array_length(j.nodes)::bigint
      FROM billing_ingest_jobrecord AS j
      CROSS JOIN LATERAL jsonb_array_elements_text(j.nodes) AS e(name)
      JOIN cb_nodes AS n ON n.name = e.name
      WHERE j.start IS NOT NULL AND j.gpus > 0 AND j.start < %(horizon)s
        AND coalesce(j."end", %(horizon)s) > %(first)s
      ORDER BY j.id)
TO STDOUT (FORMAT binary)
"""

_ROWS_TABLE = """
CREATE TEMP TABLE cb_rows (day bigint, job bigint, node bigint, dims bigint, amount bigint,
                           gpu_micros bigint, list bigint, contracted bigint);
CREATE TABLE cb_ledger (LIKE attribution_allocatedcost INCLUDING DEFAULTS);
ALTER TABLE cb_ledger ALTER COLUMN id
    SET DEFAULT nextval(pg_get_serial_sequence('attribution_allocatedcost', 'id'));
"""

_INSERT = """
ANALYZE cb_rows;
INSERT INTO cb_ledger (billing_period, day, category, team_id, job_id, run_id, node,
    provider_name, billing_account_id, sub_account_id, service_name, pricing_category,
    billing_currency, source_batch_id, pricing_mix, list_cost_source, amount, gpu_seconds,
    list_cost, contracted_cost)
SELECT %(month)s, DATE '1970-01-01' + r.day::int,
       CASE WHEN r.job < 0 THEN 'idle' ELSE 'training' END, NULL, nullif(r.job, -1),
       coalesce(j.run_id, ''), n.name, d.provider_name, d.billing_account_id, d.sub_account_id,
       d.service_name, d.pricing_category, d.billing_currency, d.batch_id, '', '',
       r.amount::numeric / 1e12, r.gpu_micros::numeric / 1e6, r.list::numeric / 1e12,
       r.contracted::numeric / 1e12
FROM cb_rows AS r
JOIN cb_nodes AS n ON n.ix = r.node
JOIN cb_dims AS d ON d.ix = r.dims
LEFT JOIN billing_ingest_jobrecord AS j ON j.id = r.job;
ALTER TABLE cb_ledger ADD PRIMARY KEY (id, billing_period);
CREATE INDEX ON cb_ledger (billing_period, category);
CREATE INDEX ON cb_ledger (billing_period, team_id);
CREATE INDEX ON cb_ledger (billing_period, run_id);
ANALYZE cb_ledger;
"""


def _execute(cursor: Any, script: str, params: dict[str, Any]) -> None:
    for statement in filter(str.strip, script.split(";")):
        cursor.execute(statement, params if "%(" in statement else None)


def _columns_dtype(n: int) -> np.dtype[Any]:
    fields: list[tuple[str, str]] = [("count", ">i2")]
    for i in range(n):
        fields += [(f"l{i}", ">i4"), (f"v{i}", ">i8")]
    return np.dtype(fields)


def copy_out(cursor: Any, statement: str, params: dict[str, Any], n: int) -> list[I64]:
    """A binary COPY TO STDOUT of n non-null bigint columns, as n int64 arrays."""
    with cursor.copy(statement, params) as copy:
        data = b"".join(bytes(chunk) for chunk in copy)
    body = memoryview(data)[len(_HEADER) : len(data) - len(_TRAILER)]
    rows = np.frombuffer(body, dtype=_columns_dtype(n))
    return [rows[f"v{i}"].astype(np.int64) for i in range(n)]


def copy_in(cursor: Any, table: str, columns: list[I64]) -> None:
    """Int64 columns into a table of bigint columns by binary COPY FROM STDIN."""
    n = len(columns)
    rows = np.empty(len(columns[0]), dtype=_columns_dtype(n))
    rows["count"] = n
    for i, column in enumerate(columns):
        rows[f"l{i}"] = 8
        rows[f"v{i}"] = column
    with cursor.copy(f"COPY {table} FROM STDIN (FORMAT binary)") as copy:
        copy.write(_HEADER + rows.tobytes() + _TRAILER)


def _runs(keys: I64) -> I64:
    change = (keys[1:] != keys[:-1]).any(axis=1)
    starts: I64 = np.flatnonzero(np.r_[True, change])
    return starts


def _split(lines: list[I64], entries: list[I64]) -> tuple[list[I64], int]:
    """The ledger rows as columns (day, job, node, dims, amount, GPU micro-seconds, list,
    contracted), job -1 for idle; and the units the split left over (0: it conserved)."""
    l_node, l_dims, l_start, l_end, cost, listed, contracted = lines
    e_job, e_node, e_start, e_end, e_micros, e_count = entries
    hour0 = int(l_start.min()) // HOUR
    hours = int(l_start.max()) // HOUR - hour0 + 1
    # Each job-node entry over the hours it runs: (entry, hour).
    first = np.maximum(e_start // HOUR, hour0)
    last = np.minimum((e_end - 1) // HOUR, hour0 + hours - 1)
    span = np.maximum(last - first + 1, 0)
    entry = np.repeat(np.arange(len(span), dtype=np.int64), span)
    hour = (
        first[entry]
        + np.arange(len(entry), dtype=np.int64)
        - np.repeat(np.cumsum(span) - span, span)
    )
    # Its node's hourly line.
    line_key = l_node * hours + (l_start // HOUR - hour0)
    order = np.argsort(line_key)
    key = e_node[entry] * hours + (hour - hour0)
    at = np.searchsorted(line_key[order], key)
    at = np.minimum(at, len(order) - 1)
    found = line_key[order][at] == key
    entry, line = entry[found], order[at[found]]
    overlap = np.minimum(e_end[entry], l_end[line]) - np.maximum(e_start[entry], l_start[line])
    keep = overlap > 0
    entry, line, overlap = entry[keep], line[keep], overlap[keep]
    weight = e_micros[entry] * overlap // e_count[entry]  # GPU micro-seconds on this node
    held = np.bincount(line, weights=weight.astype(np.float64), minlength=len(l_node))
    capacity = np.maximum(GPUS_PER_NODE * 10**6 * (l_end - l_start).astype(np.float64), held)
    fraction = weight / capacity[line]
    money = [
        np.floor(column[line] * fraction).astype(np.int64) for column in (cost, listed, contracted)
    ]
    idle = [
        column - np.bincount(line, weights=part, minlength=len(l_node)).astype(np.int64)
        for column, part in zip((cost, listed, contracted), money, strict=True)
    ]
    # Job rows: sums per (node, day, job, dims).
    day = l_start[line] // DAY
    keys = np.stack([l_node[line], day, e_job[entry], l_dims[line]], axis=1)
    order = np.lexsort(keys.T[::-1])
    keys = keys[order]
    starts = _runs(keys)
    job_rows = [keys[starts, 1], keys[starts, 2], keys[starts, 0], keys[starts, 3]]
    job_rows += [np.add.reduceat(column[order], starts) for column in (money[0], weight)]
    job_rows += [np.add.reduceat(column[order], starts) for column in money[1:]]
    # Idle rows: per (node, day, dims).
    idle_keys = np.stack([l_node, l_start // DAY, l_dims], axis=1)
    order = np.lexsort(idle_keys.T[::-1])
    idle_keys = idle_keys[order]
    starts = _runs(idle_keys)
    sums = [np.add.reduceat(column[order], starts) for column in idle]
    idle_rows = [
        idle_keys[starts, 1],
        np.full(len(starts), -1),
        idle_keys[starts, 0],
        idle_keys[starts, 2],
        sums[0],
        np.zeros(len(starts), dtype=np.int64),
        *sums[1:],
    ]
    rows = [
        np.concatenate([a, b]).astype(np.int64) for a, b in zip(job_rows, idle_rows, strict=True)
    ]
    left = int(cost.sum()) - int(rows[4].sum())
    return rows, left


def columnar_month(month: dt.date) -> dict[str, Any]:
    """The plain columnar attribution of the month (module docstring): phase times, rows, and
    the units it failed to conserve (must be 0)."""
    from django.db import connection, transaction

    result: dict[str, Any] = {}
    with transaction.atomic(), connection.cursor() as django_cursor:
        cursor = django_cursor.cursor
        began = time.perf_counter()
        _execute(cursor, _SCRATCH, {"month": month})
        cursor.execute(
            "SELECT min(charge_period_start), max(charge_period_end) "
            "FROM billing_ingest_costlineitem WHERE billing_period = %s",
            [month],
        )
        first, horizon = cursor.fetchone()
        lines = copy_out(cursor, _LINES, {"month": month}, 7)
        entries = copy_out(cursor, _JOBS, {"horizon": horizon, "first": first}, 6)
        result["read_s"] = time.perf_counter() - began
        began = time.perf_counter()
        rows, result["left_units"] = _split(lines, entries)
        result["split_s"] = time.perf_counter() - began
        result["rows"] = len(rows[0])
        began = time.perf_counter()
        _execute(cursor, _ROWS_TABLE, {})
        copy_in(cursor, "cb_rows", rows)
        _execute(cursor, _INSERT, {"month": month})
        result["write_s"] = time.perf_counter() - began
        transaction.set_rollback(True)
    result["total_s"] = result["read_s"] + result["split_s"] + result["write_s"]
    result["line_items"], result["job_entries"] = len(lines[0]), len(entries[0])
    return result
