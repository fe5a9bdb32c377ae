"""Attempts of requeued Slurm jobs, for the jobs loader (services/jobs.py).

`sacct --duplicates` (`-D`) prints every attempt of a requeued job under the same JobID; without
it, sacct prints only the newest. An attempt is known by its start (a requeued job starts again;
an attempt's start never changes), and numbered 1, 2, ... in the order the attempts of its job
started, over every import of the cluster: an attempt seen for the first time is inserted in its
place and the later ones are renumbered (their rows, and so their ids, stay).

An attempt stored open (RUNNING) that a later attempt of the same job followed was requeued
without a record of its end (dumps without `-D` show only the newest attempt): it is ended at
the next attempt's start, an upper bound that `-D` output of the job later replaces with the
real end, and counted for the import summary.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from billing_ingest.models import JobRecord
from billing_ingest.parsers.rows import JobRow
from billing_ingest.parsers.slurm import SacctStats

# What an attempt ended without its end record is stored as (what `sacct -D` prints for it).
SUPERSEDED_STATE = "REQUEUED"
# Renumbering goes through numbers above any real attempt, so that no two rows of a job ever
# hold the same number (the unique constraint is checked row by row on SQLite).
_RENUMBER_OFFSET = 1_000_000


@dataclass
class _Stored:
    id: int
    start: datetime
    end: datetime | None
    attempt: int


def slurm_attempts(*, cluster: str, rows: list[JobRow], stats: SacctStats) -> list[JobRow]:
    """The rows to upsert, each with its attempt number; stored attempts of the same jobs are
    renumbered and superseded open ones ended first. The same attempt twice in `rows` (dumps
    joined with `cat`): the last line wins, as a later import would."""
    incoming: dict[str, dict[datetime, JobRow]] = defaultdict(dict)
    for row in rows:
        start = row.get("start")
        assert start is not None  # the Slurm parser skips jobs that never started
        incoming[row["job_id"]][start] = row
    stored = _stored_attempts(cluster, list(incoming))
    plan = _Plan()
    for job_id, attempts in incoming.items():
        stats.requeued_attempts += len(attempts) - 1
        _number_attempts(attempts, stored.get(job_id, []), plan)
    stats.superseded_open_attempts += plan.superseded_rows + len(plan.superseded)
    _renumber(plan.renumber)
    _end_superseded(plan.superseded)
    return plan.rows


@dataclass
class _Plan:
    """What the loader writes: the rows to upsert, stored rows to renumber (id -> attempt) and
    stored open attempts to end (id, end)."""

    rows: list[JobRow] = field(default_factory=list)
    renumber: dict[int, int] = field(default_factory=dict)
    superseded: list[tuple[int, datetime]] = field(default_factory=list)
    superseded_rows: int = 0  # incoming open rows ended at their next attempt's start


def _number_attempts(attempts: dict[datetime, JobRow], stored: list[_Stored], plan: _Plan) -> None:
    """Number one job's attempts, stored and incoming, by start."""
    known = {attempt.start: attempt for attempt in stored}
    starts = sorted(set(known) | set(attempts))
    for number, start in enumerate(starts, start=1):
        following = starts[number] if number < len(starts) else None
        old = known.get(start)
        if old is not None and old.attempt != number:
            plan.renumber[old.id] = number
        new = attempts.get(start)
        if new is None:
            assert old is not None
            if old.end is None and following is not None:
                plan.superseded.append((old.id, following))
            continue
        if new.get("end") is None and old is not None and old.end is not None:
            # Jobs never un-finish: an older dump imported after a newer one.
            continue
        if new.get("end") is None and following is not None:
            new["end"], new["state"] = following, SUPERSEDED_STATE
            plan.superseded_rows += 1
        new["attempt"] = number
        plan.rows.append(new)


def _stored_attempts(cluster: str, job_ids: list[str]) -> dict[str, list[_Stored]]:
    found: dict[str, list[_Stored]] = defaultdict(list)
    query = JobRecord.objects.filter(
        cluster=cluster, job_id__in=job_ids, start__isnull=False
    ).values_list("id", "job_id", "start", "end", "attempt")
    for pk, job_id, start, end, attempt in query:
        assert start is not None
        found[job_id].append(_Stored(pk, start, end, attempt))
    return found


def _renumber(new_numbers: dict[int, int]) -> None:
    if not new_numbers:
        return
    for step in (_RENUMBER_OFFSET, 0):
        records = [JobRecord(id=pk, attempt=number + step) for pk, number in new_numbers.items()]
        JobRecord.objects.bulk_update(records, ["attempt"], batch_size=1000)


def _end_superseded(superseded: list[tuple[int, datetime]]) -> None:
    if not superseded:
        return
    records = [JobRecord(id=pk, end=end, state=SUPERSEDED_STATE) for pk, end in superseded]
    JobRecord.objects.bulk_update(records, ["end", "state"], batch_size=1000)
