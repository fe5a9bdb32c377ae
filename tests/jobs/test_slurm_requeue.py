"""Requeued Slurm jobs (issue 24): `sacct -D` prints every attempt of a requeued job under the
same JobID, and each attempt is its own job record, charged for its own time. Re-imports are
idempotent; a later import of an attempt updates it; dumps without `-D` still close an attempt
that a later one followed."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.test import Client

from billing_ingest.models import JobRecord
from finops.org.models import Team
from tests.builders import SACCT_HEADER, TRES_8

pytestmark = pytest.mark.django_db

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "scenarios"
REQUEUE_FILE = FIXTURE / "focus-slurm-requeue" / "sacct-D-hpc.txt"


def ingest(path: Path) -> str:
    out = StringIO()
    call_command(
        "ingest_jobs", "--format", "slurm", str(path), "--cluster", "hpc", "--no-attribute",
        stdout=out, stderr=out,
    )  # fmt: skip
    return out.getvalue()


def dump(tmp_path: Path, name: str, *lines: str) -> Path:
    path = tmp_path / name
    path.write_text("\n".join([SACCT_HEADER, *lines]) + "\n")
    return path


def attempt(state: str, start: str, end: str, node: str = "n1") -> str:
    return f"301|301|pretrain|cv|ana|gpu|{state}|{start}|{end}|{TRES_8}|{node}||"


def at(hour: int, minute: int = 0) -> datetime:
    return datetime(2025, 6, 3, hour, minute, tzinfo=UTC)


def attempts() -> list[tuple[int, str, datetime | None, datetime | None, list[str]]]:
    rows = JobRecord.objects.filter(job_id="301").order_by("attempt")
    return [(job.attempt, job.state, job.start, job.end, job.nodes) for job in rows]


def test_every_attempt_of_a_requeued_job_is_its_own_record() -> None:
    output = ingest(REQUEUE_FILE)
    assert attempts() == [
        (1, "REQUEUED", at(10), at(11), ["n1"]),
        (2, "COMPLETED", at(11), at(12), ["n2"]),
    ]
    assert JobRecord.objects.get(job_id="302").attempt == 1
    assert "3 jobs stored" in output
    assert "1 later attempt of requeued jobs, each its own job" in output


def test_reimporting_the_same_output_is_idempotent(tmp_path: Path) -> None:
    ingest(REQUEUE_FILE)
    ids = list(JobRecord.objects.order_by("id").values_list("id", "job_id", "attempt"))
    # The same lines in another file (an identical file is skipped as a duplicate batch).
    again = tmp_path / "again.txt"
    again.write_text(REQUEUE_FILE.read_text() + "\n")
    ingest(again)
    assert list(JobRecord.objects.order_by("id").values_list("id", "job_id", "attempt")) == ids


def test_a_later_dump_updates_the_attempt_it_shows(tmp_path: Path) -> None:
    ingest(dump(tmp_path, "a.txt", attempt("RUNNING", "2025-06-03T10:00:00", "Unknown")))
    first = JobRecord.objects.get(job_id="301")
    ingest(
        dump(tmp_path, "b.txt", attempt("COMPLETED", "2025-06-03T10:00:00", "2025-06-03T12:00:00"))
    )
    assert attempts() == [(1, "COMPLETED", at(10), at(12), ["n1"])]
    assert JobRecord.objects.get().pk == first.pk


def test_an_earlier_attempt_seen_later_is_numbered_before(tmp_path: Path) -> None:
    # A dump without -D shows the newest attempt only; -D output later adds the first one.
    ingest(dump(tmp_path, "a.txt", attempt("RUNNING", "2025-06-03T11:00:00", "Unknown", "n2")))
    second = JobRecord.objects.get(job_id="301")
    assert second.attempt == 1
    ingest(REQUEUE_FILE)
    assert attempts() == [
        (1, "REQUEUED", at(10), at(11), ["n1"]),
        (2, "COMPLETED", at(11), at(12), ["n2"]),
    ]
    assert JobRecord.objects.get(job_id="301", attempt=2).pk == second.pk


def test_an_open_attempt_followed_by_another_is_ended_at_its_start(tmp_path: Path) -> None:
    # Dumps without -D: the job ran on n1, was requeued and started again on n2. The first
    # attempt must not stay open (it would be charged to the end of the period).
    ingest(dump(tmp_path, "a.txt", attempt("RUNNING", "2025-06-03T10:00:00", "Unknown")))
    output = ingest(
        dump(tmp_path, "b.txt", attempt("RUNNING", "2025-06-03T11:00:00", "Unknown", "n2"))
    )
    assert attempts() == [
        (1, "REQUEUED", at(10), at(11), ["n1"]),
        (2, "RUNNING", at(11), None, ["n2"]),
    ]
    assert "1 open attempt of requeued jobs ended at their next attempt's start" in output
    # -D output later gives the first attempt's real end.
    ingest(
        dump(
            tmp_path,
            "c.txt",
            attempt("REQUEUED", "2025-06-03T10:00:00", "2025-06-03T10:40:00"),
            attempt("COMPLETED", "2025-06-03T11:00:00", "2025-06-03T12:00:00", "n2"),
        )
    )
    assert attempts() == [
        (1, "REQUEUED", at(10), at(10, 40), ["n1"]),
        (2, "COMPLETED", at(11), at(12), ["n2"]),
    ]


def test_open_attempts_in_one_file_are_ended_by_the_next(tmp_path: Path) -> None:
    # Daily dumps joined with `cat`: the first day shows attempt 1 running.
    ingest(
        dump(
            tmp_path,
            "joined.txt",
            attempt("RUNNING", "2025-06-03T10:00:00", "Unknown"),
            attempt("RUNNING", "2025-06-03T11:00:00", "Unknown", "n2"),
        )
    )
    assert attempts() == [
        (1, "REQUEUED", at(10), at(11), ["n1"]),
        (2, "RUNNING", at(11), None, ["n2"]),
    ]


def test_an_older_dump_does_not_reopen_an_attempt(tmp_path: Path) -> None:
    ingest(REQUEUE_FILE)
    ingest(dump(tmp_path, "old.txt", attempt("RUNNING", "2025-06-03T11:00:00", "Unknown", "n2")))
    assert attempts() == [
        (1, "REQUEUED", at(10), at(11), ["n1"]),
        (2, "COMPLETED", at(11), at(12), ["n2"]),
    ]


def test_run_page_lists_each_attempt_with_its_cost(finance_client: Client, team: Team) -> None:
    from django.urls import reverse

    from finops.attribution.models import AllocatedCost
    from finops.org.models import MappingRule

    MappingRule.objects.create(kind=MappingRule.Kind.SLURM_ACCOUNT, value="cv", team=team)
    scenario = REQUEUE_FILE.parent
    call_command(
        "ingest_billing", "--format", "focus", str(scenario / "focus-2025-06.csv"),
        "--no-attribute", stdout=StringIO(),
    )  # fmt: skip
    ingest(REQUEUE_FILE)
    call_command("attribute", "--month", "2025-06", stdout=StringIO())
    first, second = JobRecord.objects.filter(job_id="301").order_by("attempt")
    # 8 GPUs for one hour of a $160, two-hour, 8-GPU node: $80 each.
    for job in (first, second):
        cost = sum(a.amount for a in AllocatedCost.objects.filter(job=job))
        assert cost == Decimal(80)
    url = reverse("web:run", args=["vision", "pretrain"])
    html = finance_client.get(url, {"month": "2025-06"}).content.decode()
    assert "<td>301</td>" in html
    assert "<td>301 (attempt 2)</td>" in html
    assert html.index("<td>301</td>") < html.index("<td>301 (attempt 2)</td>")
