"""Attribution inputs, the jobs' side (month.py reads the line items): which jobs take part in
a month, read and staged until their teams exist (month.inputs_load), then shaped as engine.Job;
and reading datetime columns as epoch seconds on PostgreSQL, for both.

This module does not import month.py (which imports it): what it fills of the month's inputs
is the JobSink protocol below, which month.Inputs satisfies.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Protocol

from django.db import connections, models
from django.db.models import Count, F, Func, Q

from billing_ingest.models import JobRecord, job_gpus_exact
from finops.attribution import engine
from finops.attribution.inputs.charge_basis import charged_gpus, used_basis_utilisations
from finops.attribution.inputs.orm_rows import ALL, values_rows
from finops.attribution.inputs.team_mapping import TeamRef, TeamResolver

if TYPE_CHECKING:
    from django.db.backends.base.base import BaseDatabaseWrapper
    from django.db.models.sql.compiler import SQLCompiler

BATCH_SIZE = 5000


@dataclass(slots=True)
class JobMeta:
    cluster: str
    run_id: str
    state: str
    start: dt.datetime
    end: dt.datetime | None
    # The inference endpoint a pod serves (its GPU cost is `inference`), else "".
    endpoint: str = ""
    job_id: str = ""
    # A server or runner (JobRecord.service): its cancellation is how it stops, not waste.
    service: bool = False


def epoch(value: dt.datetime) -> int:
    return int(value.timestamp())


_EPOCH_START = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def to_datetime(value: dt.datetime | Decimal | int) -> dt.datetime:
    """A datetime, epoch seconds as read by values_with_epochs (PostgreSQL gives them with the
    timestamp's microseconds, exactly) or epoch microseconds (int, micros=True), as the
    datetime the ORM would give."""
    if isinstance(value, dt.datetime):
        return value
    if isinstance(value, int):
        return _EPOCH_START + dt.timedelta(microseconds=value)
    return _EPOCH_START + dt.timedelta(microseconds=int(value.scaleb(6)))


def to_epoch(value: dt.datetime | Decimal | int) -> int:
    """A datetime, epoch seconds or epoch microseconds (int) as read by values_with_epochs, as
    epoch() gives it (int() truncates toward zero, as int(timestamp()) does)."""
    if isinstance(value, dt.datetime):
        return epoch(value)
    if isinstance(value, int):
        return value // _MICRO if value >= 0 else -(-value // _MICRO)
    return int(value)


_MICRO = 10**6


def values_with_epochs(
    queryset: models.QuerySet[Any],
    fields: tuple[str, ...],
    datetimes: tuple[str, ...],
    *,
    micros: bool = False,
) -> models.QuerySet[Any]:
    """queryset.values_list(*fields), where on PostgreSQL the datetime columns named come as
    epoch seconds computed by the server (Decimal, with the microseconds, exactly), or with
    micros as epoch microseconds (int: psycopg reads a bigint cheaper than a numeric, and
    to_epoch and to_datetime make no Decimal of it): Django's timestamptz loader is Python
    code run for every cell. Elsewhere as datetimes."""
    if connections[queryset.db].vendor != "postgresql":
        return queryset.values_list(*fields)
    selected = list(fields)
    template = (
        "(EXTRACT(EPOCH FROM %(expressions)s) * 1000000)::bigint"
        if micros
        else "EXTRACT(EPOCH FROM %(expressions)s)"
    )
    output: models.Field[Any, Any] = models.BigIntegerField() if micros else models.DecimalField()
    for name in datetimes:
        alias = f"{name}_epoch"
        queryset = queryset.annotate(
            **{alias: Func(F(name), template=template, output_field=output)}
        )
        selected[selected.index(name)] = alias
    return queryset.values_list(*selected)


_JOB_FIELDS = (
    "id", "cluster", "job_id", "name", "account", "state", "start", "end", "gpus", "nodes",
    "run_id", "gpu_numerator", "gpu_denominator", "namespace", "labels", "endpoint", "service",
)  # fmt: skip

# A job between reading and team creation:
# (id, node names, start, end, GPU micros, GPU denominator, owner).
StagedJob = tuple[int, tuple[str, ...], int, int | None, int, int, TeamRef | None]


def jobs_queryset(first: dt.datetime, last: dt.datetime) -> models.QuerySet[JobRecord]:
    """The jobs that take part: started, holding GPUs, overlapping [first, last)."""
    return JobRecord.objects.filter(start__isnull=False, start__lt=last, gpus__gt=0).filter(
        Q(end__isnull=True) | Q(end__gt=first)
    )


def job_node_names(first: dt.datetime, last: dt.datetime) -> tuple[set[str], int]:
    """Every node name the jobs ran on, and how many jobs, without loading the jobs: a part
    matches its line items against all of them (as the whole month does), then loads only
    the jobs that ran on its own nodes (inputs_load).

    The database groups the jobs by node list and this reads each distinct list once: every
    part of a split month asks, and reading 3M jobs' lists row by row cost each part 5 s."""
    names: set[str] = set()
    count = 0
    queryset = jobs_queryset(first, last).order_by().values_list("nodes").annotate(jobs=Count("id"))
    for nodes, jobs in queryset.values_list("nodes", "jobs"):
        count += jobs
        if isinstance(nodes, list):
            names.update(str(n) for n in nodes)
    return names, count


class _RanOnAnyOf(Func):
    """PostgreSQL: the job's node list (JSON) has one of these names as an element; a node list
    that is not an array has none. It replaces jsonb `?|`, which compares every name with every
    element (at 10,000 nodes, a part's 1,250 names over 3M jobs took 45 s of the server's
    CPU), while `= ANY` of a constant array is a hash lookup (2 s)."""

    output_field = models.BooleanField()

    def __init__(self, names: list[str]) -> None:
        super().__init__(F("nodes"))
        self.names = names

    def as_sql(
        self,
        compiler: SQLCompiler,
        connection: BaseDatabaseWrapper,
        function: str | None = None,
        template: str | None = None,
        arg_joiner: str | None = None,
        **extra_context: Any,
    ) -> tuple[str, tuple[Any, ...]]:
        nodes, params = compiler.compile(self.source_expressions[0])
        sql = (
            f"EXISTS (SELECT 1 FROM jsonb_array_elements_text(CASE WHEN jsonb_typeof({nodes}) = "
            f"'array' THEN {nodes} ELSE '[]'::jsonb END) AS node(name) "
            "WHERE node.name = ANY(%s::text[]))"
        )
        # One parameter, the list (psycopg sends it as an array; the stubs know str and int).
        names: Any = self.names
        return sql, (*params, *params, names)


class JobSink(Protocol):
    """What jobs_load fills and engine_jobs reads of the month's inputs (month.Inputs)."""

    job_meta: dict[int, JobMeta]
    # Jobs charged for less than they requested (charge basis `used`): job id -> requested GPUs.
    requested_gpus: dict[int, Fraction]


def jobs_load(
    inputs: JobSink,
    resolver: TeamResolver,
    first: dt.datetime,
    last: dt.datetime,
    nodes: set[str] | None = None,
) -> list[StagedJob]:
    """The jobs (nodes: only those that ran on one of these nodes), staged."""
    jobs = jobs_queryset(first, last)
    if nodes is not None and connections[jobs.db].vendor == "postgresql":
        # Any of the names is an element of the job's node list (checked again below, where
        # other databases filter alone).
        jobs = jobs.filter(_RanOnAnyOf(sorted(nodes)))
    queryset = values_with_epochs(jobs.order_by("id"), _JOB_FIELDS, ("start", "end"), micros=True)
    staged: list[StagedJob] = []
    # Charge basis `used`: jobs with a measured utilisation count GPUs x utilisation.
    utilisations = used_basis_utilisations()
    # Node lists and labels repeat (most jobs run on one node; pods share labels): each
    # distinct JSON text is decoded once.
    node_tuples: dict[Any, tuple[str, ...]] = {}
    labels_of: dict[Any, dict[str, object]] = {}
    exact_of: dict[tuple[Any, Any, Any], Fraction] = {}
    wanted = nodes
    rows = job_rows(queryset)
    for (pk, cluster, job_id, name, account, state, start, end, gpus, raw_nodes, run_id,
         numerator, denominator, namespace, raw_labels, endpoint, service) in rows:  # fmt: skip
        assert start is not None  # filtered above
        # Epoch microseconds on PostgreSQL (values_with_epochs): the datetimes JobMeta keeps
        # are made from them, equal to what the ORM gives.
        start_s, end_s = to_epoch(start), None if end is None else to_epoch(end)
        start, end = to_datetime(start), None if end is None else to_datetime(end)
        node_names = node_tuples.get(raw_nodes)
        if node_names is None:
            decoded = _decode_json("nodes", raw_nodes, queryset.db)
            node_names = tuple(str(n) for n in decoded) if isinstance(decoded, list) else ()
            node_tuples[raw_nodes] = node_names
        if wanted is not None and wanted.isdisjoint(node_names):
            continue
        # MIG slices and time-sliced replicas are exact fractions (1/7 has no decimal form).
        # Made once per distinct GPU count: a Fraction costs more than the rest of the row.
        gpus_key = (gpus, numerator, denominator)
        exact = exact_of.get(gpus_key)
        if exact is None:
            exact = exact_of[gpus_key] = job_gpus_exact(
                gpus=gpus, numerator=numerator, denominator=denominator
            )
        # A run is the parser's run id; failing that the job name, failing that the job itself.
        inputs.job_meta[pk] = JobMeta(
            cluster, run_id or name or job_id, state, start, end, endpoint, job_id, service
        )
        labels = labels_of.get(raw_labels)
        if labels is None:
            decoded = _decode_json("labels", raw_labels, queryset.db)
            labels = labels_of[raw_labels] = decoded if isinstance(decoded, dict) else {}
        ref = resolver.job_team(account=account, namespace=namespace, labels=labels)
        micros, gpu_denominator = exact.numerator * engine.GPU_SCALE, exact.denominator
        if utilisations:
            used = utilisations.get((cluster, job_id))
            if used is not None:
                inputs.requested_gpus[pk] = Fraction(micros, gpu_denominator * engine.GPU_SCALE)
                micros, gpu_denominator = charged_gpus(micros, gpu_denominator, used)
        staged.append((
            pk, node_names, start_s, end_s, micros, gpu_denominator, ref,
        ))  # fmt: skip
    return staged


def job_rows(queryset: models.QuerySet[Any]) -> Iterator[tuple[Any, ...]]:
    """The jobs' value tuples for jobs_load, node lists and labels as the database's JSON text.

    On PostgreSQL every column as psycopg hands it out: what the ORM's converters would return
    (epochs as int microseconds or Decimal seconds, gpus Decimal, int, str), without running
    them on every cell. Elsewhere the ORM's converters."""
    if connections[queryset.db].vendor == "postgresql":
        return values_rows(queryset, (), chunk_size=BATCH_SIZE, raw=ALL)
    return values_rows(queryset, (), chunk_size=BATCH_SIZE, raw=("nodes", "labels"))


# JSONField.from_db_value's expression: none (the column itself, not a key transform).
_NO_EXPRESSION: Any = None


def _decode_json(field: str, value: Any, using: str) -> Any:
    """A JSON column's database value as the ORM decodes it."""
    decode = JobRecord._meta.get_field(field).from_db_value  # type: ignore[union-attr]
    return decode(value, _NO_EXPRESSION, connections[using])


def engine_jobs(
    inputs: JobSink, staged_jobs: list[StagedJob], resolver: TeamResolver
) -> list[engine.Job]:
    return [
        engine.Job(
            id=pk,
            nodes=nodes,
            start=start_s,
            end=end_s,
            gpu_micros=micros,
            team_id=resolver.team_id(ref),
            gpu_denominator=denominator,
            requested_gpus=inputs.requested_gpus.get(pk),
            # A pod serving an inference endpoint is inference spend, any other job training.
            category=engine.INFERENCE if inputs.job_meta[pk].endpoint else engine.TRAINING,
        )
        for pk, nodes, start_s, end_s, micros, denominator, ref in staged_jobs
    ]
