"""Writes for inference endpoints: usage import batches and the EndpointCost rollup."""

from __future__ import annotations

import datetime as dt
import hashlib
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

from django.db import transaction
from django.utils import timezone

from billing_ingest.models import ImportBatch, JobRecord
from billing_ingest.parsers import billing_paths
from billing_ingest.services.batches import (
    file_sha256,
    import_batch_claim,
    import_batch_fail,
    import_batch_record,
)
from finops.attribution.models import AllocatedCost, Category
from finops.core.errors import ImportFormatError
from finops.core.money import EXACT, MONEY_QUANTUM
from finops.core.months import month_format
from finops.inference.models import INFERENCE_BATCH_KIND, EndpointCost, InferenceUsage
from finops.inference.parsers import usage_parser

BULK_SIZE = 5000
# Keeps `IN (...)` lists well under every database's bound-parameter limit.
_IN_CHUNK = 500
_SHARE_QUANTUM = Decimal("0.000001")
_UPSERT_KEY = ["cluster", "endpoint", "model_name", "namespace", "pod", "window_start"]
_UPSERT_FIELDS = [
    "batch", "team_hint", "window_end", "requests", "inferences", "prompt_tokens",
    "generation_tokens",
]  # fmt: skip


# --- usage import -------------------------------------------------------------------------------


def files_sha256(paths: Iterable[Path], root: Path) -> str:
    """One digest over every file's name (relative to root) and content: a folder of scrapes is
    one import, and the same folder imported again is a duplicate."""
    digest = hashlib.sha256()
    for path in paths:
        name = path.name if path == root else str(path.relative_to(root))
        digest.update(f"{name}\0{file_sha256(path)}\n".encode())
    return digest.hexdigest()


def usage_batch_create(*, format: str, cluster: str, path: Path) -> ImportBatch:
    """Record a usage import of a file or folder (every file in it read together). The same
    bytes already imported for this cluster give a DUPLICATE batch that never runs."""
    usage_parser(format)  # unknown formats fail here, before a batch exists
    root = path.resolve()
    sha = files_sha256(billing_paths(root), root)
    return import_batch_record(
        kind=INFERENCE_BATCH_KIND, format=format, source=cluster, file_name=str(root), sha=sha
    )


def usage_batch_ingest(*, batch_id: int) -> ImportBatch:
    """Import one pending usage batch: parse every file, then write in one transaction.

    A row for a window already stored (same cluster, endpoint, model, namespace, pod and window
    start) is replaced, so re-importing a corrected export restates those windows. On a format
    error nothing is written and the batch is FAILED with the message naming file, line, field.
    """
    if not import_batch_claim(batch_id=batch_id):
        return ImportBatch.objects.get(id=batch_id)
    batch = ImportBatch.objects.get(id=batch_id)
    try:
        root = Path(batch.file_name)
        rows = usage_parser(batch.format)(billing_paths(root))
        months = sorted({month_format(row["window_start"]) for row in rows})
        with transaction.atomic():
            InferenceUsage.objects.bulk_create(
                [InferenceUsage(batch=batch, cluster=batch.source, **row) for row in rows],
                batch_size=BULK_SIZE,
                update_conflicts=True,
                unique_fields=_UPSERT_KEY,
                update_fields=_UPSERT_FIELDS,
            )
            ImportBatch.objects.filter(id=batch_id).update(
                status=ImportBatch.Status.SUCCEEDED,
                row_count=len(rows),
                billing_periods=months,
                error="",
                finished_at=timezone.now(),
            )
    except (ImportFormatError, OSError, ValueError) as exc:
        import_batch_fail(batch_id=batch_id, error=str(exc))
    except Exception as exc:
        import_batch_fail(batch_id=batch_id, error=f"{type(exc).__name__}: {exc}")
        raise
    batch.refresh_from_db()
    return batch


# --- EndpointCost rollup ------------------------------------------------------------------------

# (day, endpoint, team id or None, currency)
_EndpointKey = tuple[dt.date, str, int | None, str]
# (day, node, currency)
_NodeKey = tuple[dt.date, str, str]
# (day, endpoint)
_DayEndpoint = tuple[dt.date, str]


@dataclass(slots=True)
class _EndpointAcc:
    cost: Decimal = Decimal(0)
    gpu_seconds: Decimal = Decimal(0)
    pods: set[int] = field(default_factory=set)
    nodes: set[str] = field(default_factory=set)


@dataclass(slots=True)
class _Ledger:
    """The month's endpoint ledger per team row, and what the usage split needs: each pod's
    team per day (by its largest ledger amount) and each team's GPU-seconds per endpoint-day."""

    rows: dict[_EndpointKey, _EndpointAcc] = field(default_factory=dict)
    pod_team: dict[tuple[dt.date, int], int | None] = field(default_factory=dict)
    # (cluster, JobRecord.job_id = '<namespace>/<pod>') -> (job id, endpoint)
    pod_names: dict[tuple[str, str], tuple[int, str]] = field(default_factory=dict)
    team_seconds: dict[_DayEndpoint, dict[int | None, Decimal]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(Decimal))
    )


@dataclass(slots=True)
class _Capacity:
    """Per (day, node, currency): ledger total and idle; jobs with rows there; and per (day, job,
    currency) the idle the `spread` policy moved onto a job (rows with no node)."""

    total: dict[_NodeKey, Decimal] = field(default_factory=lambda: defaultdict(Decimal))
    idle: dict[_NodeKey, Decimal] = field(default_factory=lambda: defaultdict(Decimal))
    jobs: dict[tuple[dt.date, str], set[int]] = field(default_factory=lambda: defaultdict(set))
    spread: dict[tuple[dt.date, int, str], Decimal] = field(
        default_factory=lambda: defaultdict(Decimal)
    )


def _chunks(values: Iterable[Any]) -> Iterator[list[Any]]:
    items = sorted(values)
    for i in range(0, len(items), _IN_CHUNK):
        yield items[i : i + _IN_CHUNK]


def _endpoint_ledger(month: dt.date) -> _Ledger:
    """The month's ledger rows of jobs (pods) with an endpoint, per endpoint, team, day and
    currency. Sums in Python: exact Decimal on both databases.

    No job serving an endpoint, no rows: the ledger is not read at all. (A Slurm-only month
    would otherwise join every ledger row to its job to find none: 3-4 s at 700k rows when the
    month's new partition has no planner statistics yet, as right after attribution.)"""
    if not JobRecord.objects.filter(endpoint__gt="").exists():
        return _Ledger()
    rows = (
        AllocatedCost.objects.filter(billing_period=month, job__endpoint__gt="")
        .values_list("day", "job__endpoint", "team_id", "billing_currency", "amount",
                     "gpu_seconds", "node", "job_id", "job__cluster", "job__job_id")
        .order_by()
    )  # fmt: skip
    ledger = _Ledger()
    pod_amounts: dict[tuple[dt.date, int], dict[int | None, Decimal]] = {}
    for (
        day,
        endpoint,
        team_id,
        currency,
        amount,
        seconds,
        node,
        job_id,
        cluster,
        name,
    ) in rows.iterator(BULK_SIZE):
        acc = ledger.rows.setdefault((day, endpoint, team_id, currency), _EndpointAcc())
        acc.cost += amount
        acc.gpu_seconds += seconds or Decimal(0)
        acc.pods.add(job_id)
        if node:
            acc.nodes.add(node)
        ledger.team_seconds[(day, endpoint)][team_id] += seconds or Decimal(0)
        per_team = pod_amounts.setdefault((day, job_id), defaultdict(Decimal))
        per_team[team_id] += abs(amount)
        ledger.pod_names[(cluster, name)] = (job_id, endpoint)
    for key, per_team in pod_amounts.items():
        # Ties to the smaller team id, None (no team) last: deterministic whatever the order.
        ledger.pod_team[key] = min(
            per_team, key=lambda t: (-per_team[t], t is None, t if t is not None else 0)
        )
    return ledger


def _capacity(month: dt.date, serving: set[tuple[dt.date, str]]) -> _Capacity:
    cap = _Capacity()
    nodes = {node for _, node in serving}
    for chunk in _chunks(nodes):
        rows = (
            AllocatedCost.objects.filter(billing_period=month, node__in=chunk)
            .values_list("day", "node", "billing_currency", "category", "amount", "job_id")
            .order_by()
        )
        for day, node, currency, category, amount, job_id in rows.iterator(BULK_SIZE):
            if (day, node) not in serving:
                continue
            cap.total[(day, node, currency)] += amount
            if category == Category.IDLE:
                cap.idle[(day, node, currency)] += amount
            if job_id is not None:
                cap.jobs[(day, node)].add(job_id)
    job_ids = {job for jobs in cap.jobs.values() for job in jobs}
    for chunk in _chunks(job_ids):
        spread = (
            AllocatedCost.objects.filter(
                billing_period=month, category=Category.IDLE, node="", job_id__in=chunk
            )
            .values_list("day", "job_id", "billing_currency", "amount")
            .order_by()
        )
        for day, job_id, currency, amount in spread.iterator(BULK_SIZE):
            cap.spread[(day, job_id, currency)] += amount
    return cap


def _node_costs(key: _EndpointKey, acc: _EndpointAcc, cap: _Capacity) -> tuple[Decimal, Decimal]:
    """(node_cost, node_idle_cost) of the nodes that served the endpoint that day."""
    day, _, _, currency = key
    total = idle = Decimal(0)
    jobs: set[int] = set()
    for node in acc.nodes:
        total += cap.total.get((day, node, currency), Decimal(0))
        idle += cap.idle.get((day, node, currency), Decimal(0))
        jobs |= cap.jobs.get((day, node), set())
    for job_id in jobs:
        moved = cap.spread.get((day, job_id, currency), Decimal(0))
        total += moved
        idle += moved
    return total, idle


# (cluster, namespace, pod, requests, prompt tokens, generation tokens)
_UsageRow = tuple[str, str, str, int, int, int]


def _usage_by_day(
    endpoints: set[str], first: dt.date, last: dt.date
) -> dict[_DayEndpoint, list[_UsageRow]]:
    """Usage rows per (UTC day of window_start, endpoint), every cluster together."""
    start = dt.datetime.combine(first, dt.time(), dt.UTC)
    end = dt.datetime.combine(last + dt.timedelta(days=1), dt.time(), dt.UTC)
    usage: dict[_DayEndpoint, list[_UsageRow]] = defaultdict(list)
    for chunk in _chunks(endpoints):
        rows = (
            InferenceUsage.objects.filter(
                endpoint__in=chunk, window_start__gte=start, window_start__lt=end
            )
            .values_list("window_start", "endpoint", "cluster", "namespace", "pod", "requests",
                         "prompt_tokens", "generation_tokens")
            .order_by()
        )  # fmt: skip
        for start_at, endpoint, *row in rows.iterator(BULK_SIZE):
            usage[(start_at.astimezone(dt.UTC).date(), endpoint)].append(tuple(row))  # type: ignore[arg-type]
    return usage


def _split_count(count: int, weights: dict[int | None, Decimal]) -> dict[int | None, int]:
    """count split pro rata to weights (evenly when they are all 0) by largest remainder, so
    the parts add up to count; ties to the earlier team in (no team last, id) order."""
    teams = sorted(weights, key=lambda t: (t is None, t or 0))
    total = sum((weights[t] for t in teams), Decimal(0))
    exact = {
        t: Fraction(count)
        * (Fraction(weights[t]) / Fraction(total) if total else Fraction(1, len(teams)))
        for t in teams
    }
    parts = {t: int(exact[t]) for t in teams}
    left = count - sum(parts.values())
    for t in sorted(teams, key=lambda t: -(exact[t] - parts[t]))[:left]:
        parts[t] += 1
    return parts


def _usage_by_team(
    key: _DayEndpoint, rows: list[_UsageRow], ledger: _Ledger
) -> dict[int | None, tuple[int, int, int]]:
    """(requests, prompt, generation) of one endpoint-day per team serving it. A row naming a
    pod of the endpoint counts for that pod's team; the rest, naming no pod we know, is split by
    _split_count over the teams' GPU-seconds there (whole to a team serving it alone)."""
    day, endpoint = key
    seconds = ledger.team_seconds.get(key, {})
    counts: dict[int | None, list[int]] = {team: [0, 0, 0] for team in seconds}
    unresolved = [0, 0, 0]
    for cluster, namespace, pod, *values in rows:
        job = ledger.pod_names.get((cluster, f"{namespace}/{pod}")) if pod else None
        target = unresolved
        if job is not None and job[1] == endpoint and (day, job[0]) in ledger.pod_team:
            target = counts.get(ledger.pod_team[(day, job[0])], unresolved)
        for i, value in enumerate(values):
            target[i] += value
    if counts and any(unresolved):
        for i, value in enumerate(unresolved):
            for team, part in _split_count(value, dict(seconds)).items():
                counts[team][i] += part
    return {team: (c[0], c[1], c[2]) for team, c in counts.items()}


def unit_cost(cost: Decimal, units: int, per: int) -> Decimal | None:
    """cost x per / units rounded half-even to the money quantum; None for no units."""
    if units <= 0:
        return None
    exact = EXACT.divide(EXACT.multiply(cost, Decimal(per)), Decimal(units))
    return exact.quantize(MONEY_QUANTUM, rounding=ROUND_HALF_EVEN, context=EXACT)


def _idle_share(node_cost: Decimal, node_idle: Decimal) -> Decimal | None:
    if not node_cost:
        return None
    return EXACT.divide(node_idle, node_cost).quantize(_SHARE_QUANTUM, rounding=ROUND_HALF_EVEN)


def _endpoint_cost_rows(month: dt.date) -> list[EndpointCost]:
    ledger = _endpoint_ledger(month)
    if not ledger.rows:
        return []
    serving = {(key[0], node) for key, acc in ledger.rows.items() for node in acc.nodes}
    cap = _capacity(month, serving)
    days = [key[0] for key in ledger.rows]
    usage = _usage_by_day({key[1] for key in ledger.rows}, min(days), max(days))
    by_team = {
        day_endpoint: _usage_by_team(day_endpoint, usage.get(day_endpoint, []), ledger)
        for day_endpoint in {(key[0], key[1]) for key in ledger.rows}
    }
    rows = []
    for key, acc in sorted(
        ledger.rows.items(), key=lambda kv: (kv[0][:2], kv[0][2] or 0, kv[0][3])
    ):
        day, endpoint, team_id, currency = key
        requests, prompt, generation = by_team[(day, endpoint)].get(team_id, (0, 0, 0))
        tokens = prompt + generation
        node_cost, node_idle = _node_costs(key, acc, cap)
        rows.append(
            EndpointCost(
                billing_period=month, day=day, endpoint=endpoint, team_id=team_id,
                billing_currency=currency, cost=acc.cost, gpu_seconds=acc.gpu_seconds,
                pods=len(acc.pods), requests=requests, prompt_tokens=prompt,
                generation_tokens=generation, tokens=tokens,
                cost_per_1k_requests=unit_cost(acc.cost, requests, 1000),
                cost_per_1m_tokens=unit_cost(acc.cost, tokens, 1_000_000),
                node_cost=node_cost, node_idle_cost=node_idle,
                idle_share=_idle_share(node_cost, node_idle),
            )
        )  # fmt: skip
    return rows


def endpoint_costs_rebuild(*, month: dt.date) -> int:
    """Replace the billing month's EndpointCost rows from its ledger and the usage; returns the
    number of rows written. Idempotent; run it after attribution of the month and after a usage
    import. Endpoint-days with usage but no ledger cost get no row (no currency to state them
    in): see selectors.usage_without_cost.

    The ledger rows of a billing month may fall on days of the month before (late charges on
    this invoice); their usage is joined by day all the same.
    """
    month = month.replace(day=1)
    with transaction.atomic():
        rows = _endpoint_cost_rows(month)
        EndpointCost.objects.filter(billing_period=month).delete()
        EndpointCost.objects.bulk_create(rows, batch_size=BULK_SIZE)
    return len(rows)
