"""finops.core.sql_arrays: AnyOf selects what `__in` selects (one parameter, however long the
list), and a timestamp read through epoch_micros comes back as the datetime the column holds."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from django.db.models import Q
from pytest_django import DjangoAssertNumQueries

from billing_ingest.models import ImportBatch, JobRecord
from finops.core.sql_arrays import AnyOf, epoch_micros, from_epoch_micros

pytestmark = pytest.mark.django_db

_STARTS = (
    dt.datetime(2025, 1, 31, 23, 59, 59, 999999, tzinfo=dt.UTC),
    dt.datetime(1969, 12, 31, 23, 0, 0, 1, tzinfo=dt.UTC),
    dt.datetime(2024, 2, 29, 12, 30, 15, 250000, tzinfo=dt.UTC),
)


def _jobs() -> list[JobRecord]:
    batch = ImportBatch.objects.create(kind="jobs", format="slurm", source="c1", file_name="t")
    return [
        JobRecord.objects.create(
            batch=batch,
            cluster="c1",
            job_id=f"j{i}",
            name="x",
            account="a",
            state="COMPLETED",
            start=start,
            end=None if i == 1 else start + dt.timedelta(hours=1),
            gpus=Decimal(1),
            nodes=["n1"],
        )
        for i, start in enumerate(_STARTS)
    ]


def test_any_of_selects_what_in_selects() -> None:
    jobs = _jobs()
    for values in ([jobs[0].pk, jobs[2].pk, 10**9], [], [jobs[1].pk]):
        got = set(JobRecord.objects.filter(AnyOf("pk", values)).values_list("pk", flat=True))
        assert got == set(JobRecord.objects.filter(pk__in=values).values_list("pk", flat=True))
    for names in (["j0", "j2", "none"], ["j1"], []):
        found = JobRecord.objects.filter(AnyOf("job_id", names)).values_list("job_id", flat=True)
        assert set(found) == set(names) - {"none"}


def test_an_empty_any_of_asks_nothing_and_negates_to_everything(
    django_assert_num_queries: DjangoAssertNumQueries,
) -> None:
    """As `pk__in=[]`: no query at all (the pages' query budgets count on it), and the negation
    matches every row."""
    jobs = _jobs()
    with django_assert_num_queries(0):
        assert list(JobRecord.objects.filter(AnyOf("pk", []))) == []
    assert JobRecord.objects.exclude(AnyOf("pk", [])).count() == len(jobs)
    assert JobRecord.objects.filter(~Q(AnyOf("pk", [])), job_id="j1").count() == 1


def test_any_of_sends_a_long_list_as_one_parameter() -> None:
    _jobs()
    names = [f"j{i}" for i in range(40_000)]  # beyond SQLite's cap on parameters
    # As `job_id__in=names` this is 40,000 parameters: SQLite refuses the statement.
    found = JobRecord.objects.filter(AnyOf("job_id", names)).values_list("job_id", flat=True)
    assert sorted(found) == ["j0", "j1", "j2"]


def test_epoch_micros_gives_the_column_back() -> None:
    jobs = _jobs()
    queryset = JobRecord.objects.filter(pk__in=[j.pk for j in jobs])
    rows = queryset.values_list(
        "pk", epoch_micros(queryset, "start"), epoch_micros(queryset, "end")
    )
    by_pk = {pk: (from_epoch_micros(s), from_epoch_micros(e)) for pk, s, e in rows}
    for job in jobs:
        assert by_pk[job.pk] == (job.start, job.end)
        start = by_pk[job.pk][0]
        assert start is not None
        assert start.utcoffset() == dt.timedelta(0)
