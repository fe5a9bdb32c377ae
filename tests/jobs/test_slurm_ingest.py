"""`ingest_jobs --format slurm`: command, Celery task and service writing JobRecords."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from billing_ingest.models import Cluster, ImportBatch, JobRecord
from billing_ingest.services.batches import import_batch_create
from billing_ingest.services.jobs import jobs_batch_ingest
from tests.builders import FIRST_DUMP, SACCT_HEADER, TRES_8

pytestmark = pytest.mark.django_db


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def ingest(path: Path, *args: str) -> str:
    out = StringIO()
    call_command("ingest_jobs", "--format", "slurm", str(path), *args, stdout=out, stderr=out)
    return out.getvalue()


def test_ingest_realistic_dump(tmp_path: Path) -> None:
    output = ingest(write(tmp_path / "sacct-2024-09-03.txt", FIRST_DUMP), "--cluster", "hpc1")

    jobs = {job.job_id: job for job in JobRecord.objects.all()}
    assert sorted(jobs) == ["1001", "1002_1", "1004", "1005"]
    batch = ImportBatch.objects.get()
    assert (batch.kind, batch.format, batch.source) == ("jobs", "slurm", "hpc1")
    assert batch.status == ImportBatch.Status.SUCCEEDED
    assert batch.row_count == 4

    train = jobs["1001"]
    assert (train.cluster, train.batch_id, train.job_id_raw) == ("hpc1", batch.pk, "1001")
    assert (train.name, train.account, train.user, train.partition) == (
        "train-llama",
        "vision",
        "alice",
        "gpu",
    )
    assert train.state == "COMPLETED"
    assert train.start == datetime(2024, 9, 3, 10, tzinfo=UTC)
    assert train.end == datetime(2024, 9, 3, 14, 30, tzinfo=UTC)
    # The job's total over both nodes, not doubled by the typed entry nor by its steps.
    assert train.gpus == Decimal(16)
    assert train.nodes == ["gpu-001", "gpu-002"]
    assert (train.run_id, train.wckey) == ("llama-7b", "llama-7b")

    sweep = jobs["1002_1"]
    assert (sweep.job_id_raw, sweep.state, sweep.run_id) == ("1003", "FAILED", "sweep42")
    assert sweep.comment == "run=sweep42 ckpt=5"
    assert jobs["1004"].end is None
    assert jobs["1004"].state == "RUNNING"
    assert jobs["1005"].state == "CANCELLED"
    assert jobs["1005"].gpus == Decimal(0)
    assert jobs["1005"].run_id == "prep"

    assert Cluster.objects.get(name="hpc1").time_zone == "UTC"
    assert "9 rows read" in output
    assert "4 jobs stored" in output
    assert "4 job steps skipped" in output
    assert "1 not-started jobs skipped" in output
    assert "0 errors" in output


def test_cluster_defaults_to_default(tmp_path: Path) -> None:
    ingest(write(tmp_path / "a.txt", FIRST_DUMP))
    assert set(JobRecord.objects.values_list("cluster", flat=True)) == {"default"}
    assert Cluster.objects.filter(name="default").exists()


def test_time_zone_is_stored_and_reused(tmp_path: Path) -> None:
    ingest(
        write(tmp_path / "a.txt", FIRST_DUMP[:2]),
        "--cluster",
        "la",
        "--time-zone",
        "America/Los_Angeles",
    )
    assert Cluster.objects.get(name="la").time_zone == "America/Los_Angeles"
    # A later import without --time-zone still reads times in the stored zone.
    later = FIRST_DUMP[0] + "\n" + FIRST_DUMP[1].replace("1001", "1101")
    ingest(write(tmp_path / "b.txt", [later]), "--cluster", "la")
    pdt = timedelta(hours=7)
    starts = set(JobRecord.objects.values_list("start", flat=True))
    assert starts == {datetime(2024, 9, 3, 10, tzinfo=UTC) + pdt}
    assert JobRecord.objects.count() == 2


def test_overlapping_dump_updates_a_running_job(tmp_path: Path) -> None:
    ingest(write(tmp_path / "day1.txt", FIRST_DUMP), "--cluster", "hpc1")
    before = {job.job_id: job for job in JobRecord.objects.all()}

    second = [
        SACCT_HEADER,
        f"1004|1004|notebook|vision|carol|interactive|TIMEOUT|2024-09-03T15:00:00|"
        f"2024-09-03T23:00:00|{TRES_8}|gpu-004||",
        f"1004.extern|1004.extern|extern|vision|||COMPLETED|2024-09-03T15:00:00|"
        f"2024-09-03T23:00:00|{TRES_8}|gpu-004||",
        f"1006|1006|eval|vision|alice|gpu|COMPLETED|2024-09-03T20:00:00|2024-09-03T21:00:00|"
        f"{TRES_8}|gpu-005|eval-1|",
    ]
    ingest(write(tmp_path / "day2.txt", second), "--cluster", "hpc1")

    new_batch = ImportBatch.objects.get(file_name__endswith="day2.txt")
    assert new_batch.row_count == 2
    after = {job.job_id: job for job in JobRecord.objects.all()}
    assert sorted(after) == ["1001", "1002_1", "1004", "1005", "1006"]
    notebook = after["1004"]
    assert (notebook.state, notebook.end) == ("TIMEOUT", datetime(2024, 9, 3, 23, tzinfo=UTC))
    assert notebook.batch_id == new_batch.pk
    # Updated in place: anything pointing at the job row keeps pointing at it.
    assert notebook.pk == before["1004"].pk
    for job_id in ("1001", "1002_1", "1005"):
        assert after[job_id].batch_id == before[job_id].batch_id
        assert after[job_id].end == before[job_id].end


def test_an_older_dump_imported_later_does_not_reopen_a_finished_job(tmp_path: Path) -> None:
    ingest(write(tmp_path / "day1.txt", FIRST_DUMP), "--cluster", "hpc1")
    finished = [SACCT_HEADER, f"1004|1004|notebook|vision|carol|interactive|TIMEOUT|"
                f"2024-09-03T15:00:00|2024-09-03T23:00:00|{TRES_8}|gpu-004||"]  # fmt: skip
    ingest(write(tmp_path / "day2.txt", finished), "--cluster", "hpc1")
    # day1 again under another name (a re-sent old dump): 1004 is RUNNING there.
    ingest(write(tmp_path / "day1-resent.txt", [*FIRST_DUMP, ""]), "--cluster", "hpc1")
    notebook = JobRecord.objects.get(job_id="1004")
    assert (notebook.state, notebook.end) == ("TIMEOUT", datetime(2024, 9, 3, 23, tzinfo=UTC))


def test_same_job_id_on_another_cluster_is_another_job(tmp_path: Path) -> None:
    path = write(tmp_path / "a.txt", FIRST_DUMP)
    ingest(path, "--cluster", "east")
    ingest(path, "--cluster", "west")
    assert JobRecord.objects.filter(job_id="1001").count() == 2


def test_malformed_file_fails_its_batch_and_keeps_earlier_jobs(tmp_path: Path) -> None:
    ingest(write(tmp_path / "good.txt", FIRST_DUMP), "--cluster", "hpc1")
    before = set(JobRecord.objects.values_list("pk", "job_id", "state", "batch_id"))

    bad = [
        SACCT_HEADER,
        # Valid, and an update of 1004: must not be written when a later line is bad.
        f"1004|1004|notebook|vision|carol|interactive|COMPLETED|2024-09-03T15:00:00|"
        f"2024-09-03T18:00:00|{TRES_8}|gpu-004||",
        f"1007|1007|x|vision|alice|gpu|COMPLETED|2024-09-03T15:00:00|2024-09-03T16:00:00|"
        f"{TRES_8}|gpu-006||",
        f"1008|1008|x|vision|alice|gpu|COMPLETED|3 Sep 2024|2024-09-03T16:00:00|{TRES_8}|gpu-006||",
    ]
    bad_path = write(tmp_path / "bad.txt", bad)
    with pytest.raises(CommandError, match="1 of 1 file"):
        ingest(bad_path, "--cluster", "hpc1")

    batch = ImportBatch.objects.get(file_name__endswith="bad.txt")
    assert batch.status == ImportBatch.Status.FAILED
    assert f"file {bad_path.resolve()}, row 4, column Start" in batch.error
    assert "'3 Sep 2024'" in batch.error
    assert set(JobRecord.objects.values_list("pk", "job_id", "state", "batch_id")) == before
    assert not JobRecord.objects.filter(batch=batch).exists()


def test_failed_file_does_not_stop_the_others_in_a_folder(tmp_path: Path) -> None:
    folder = tmp_path / "dumps"
    folder.mkdir()
    write(folder / "a.txt", FIRST_DUMP)
    write(folder / "b.txt", [SACCT_HEADER, "1|1|short"])
    out = StringIO()
    with pytest.raises(CommandError, match="1 of 2 file"):
        call_command("ingest_jobs", "--format", "slurm", str(folder), stdout=out, stderr=out)
    assert JobRecord.objects.count() == 4
    statuses = dict(ImportBatch.objects.values_list("file_name", "status"))
    assert statuses == {
        str((folder / "a.txt").resolve()): ImportBatch.Status.SUCCEEDED,
        str((folder / "b.txt").resolve()): ImportBatch.Status.FAILED,
    }
    assert "row 2, column Account" in out.getvalue()


def test_same_file_twice_is_a_no_op(tmp_path: Path) -> None:
    path = write(tmp_path / "a.txt", FIRST_DUMP)
    ingest(path, "--cluster", "hpc1")
    snapshot = list(JobRecord.objects.order_by("pk").values())

    output = ingest(path, "--cluster", "hpc1")

    assert "skipped" in output
    assert "same content" in output
    assert list(JobRecord.objects.order_by("pk").values()) == snapshot
    second = ImportBatch.objects.order_by("-pk").first()
    assert second is not None
    assert second.status == ImportBatch.Status.DUPLICATE


def test_service_leaves_a_batch_it_cannot_claim_alone(tmp_path: Path) -> None:
    Cluster.objects.create(name="hpc1")
    path = write(tmp_path / "a.txt", FIRST_DUMP)
    batch = import_batch_create(kind="jobs", format="slurm", source="hpc1", path=path)
    ImportBatch.objects.filter(pk=batch.pk).update(status=ImportBatch.Status.RUNNING)

    result = jobs_batch_ingest(batch_id=batch.pk)

    assert result.status == ImportBatch.Status.RUNNING
    assert not JobRecord.objects.exists()


def test_service_fails_a_batch_of_an_unsupported_format(tmp_path: Path) -> None:
    path = write(tmp_path / "jobs.lsf", ["{}"])
    batch = import_batch_create(kind="jobs", format="lsf", source="lsf", path=path)
    result = jobs_batch_ingest(batch_id=batch.pk)
    assert result.status == ImportBatch.Status.FAILED
    assert "unsupported jobs format 'lsf'" in result.error


def test_unknown_format_is_refused_before_any_batch(tmp_path: Path) -> None:
    path = write(tmp_path / "jobs.lsf", ["{}"])
    with pytest.raises(CommandError, match="lsf"):
        call_command("ingest_jobs", "--format", "lsf", str(path))
    assert not ImportBatch.objects.exists()


def test_unknown_time_zone_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "a.txt", FIRST_DUMP)
    with pytest.raises(CommandError, match="unknown time zone 'Mars/Olympus'"):
        ingest(path, "--time-zone", "Mars/Olympus")
    assert not ImportBatch.objects.exists()


def test_missing_path_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="no such file"):
        ingest(tmp_path / "nope.txt")


# --- real-world sacct quirks (issue 8) ----------------------------------------------------------

BILL_HEADER = (
    "BillingAccountId,BillingCurrency,BillingPeriodStart,BillingPeriodEnd,ChargeCategory,"
    "ChargePeriodStart,ChargePeriodEnd,ProviderName,ResourceName,ServiceName,BilledCost,"
    "EffectiveCost,x_InstanceType"
)


def _bill_line(month: str, next_month: str, day: str, hour: int, cost: str) -> str:
    """One hour of node gpu-001 (a p5.48xlarge, 8 GPUs) on the invoice of `month`."""
    return (
        f"1,USD,{month}-01T00:00:00Z,{next_month}-01T00:00:00Z,Usage,{day}T{hour:02d}:00:00Z,"
        f"{day}T{hour + 1:02d}:00:00Z,AWS,gpu-001,EC2,{cost},{cost},p5.48xlarge"
    )


def _gpu_bill(tmp_path: Path, lines: list[str]) -> None:
    path = tmp_path / "bill.csv"
    path.write_text("\n".join([BILL_HEADER, *lines]) + "\n")
    call_command("ingest_billing", "--format", "focus", str(path), stdout=StringIO())


def test_orphaned_cancelled_job_ends_at_start_plus_elapsed_and_is_counted(
    tmp_path: Path,
) -> None:
    lines = [
        SACCT_HEADER + "|Elapsed",
        f"2001|2001|train|vision|alice|gpu|CANCELLED by 1001|2024-09-03T10:00:00|Unknown|"
        f"{TRES_8}|gpu-001|||02:15:00",
        f"2002|2002|notebook|vision|carol|gpu|RUNNING|2024-09-03T15:00:00|Unknown|"
        f"{TRES_8}|gpu-002|||05:00:00",
    ]
    output = ingest(write(tmp_path / "orphan.txt", lines), "--cluster", "hpc1")
    assert "1 finished jobs without End ended at Start + Elapsed" in output
    jobs = {job.job_id: job for job in JobRecord.objects.all()}
    assert jobs["2001"].end == datetime(2024, 9, 3, 12, 15, tzinfo=UTC)
    assert jobs["2002"].end is None  # still running: open


def test_orphaned_job_re_attributes_only_the_months_it_ran(tmp_path: Path) -> None:
    from finops.attribution.models import AttributionRun, RunCost

    # A year of bills for the node; the job ran one hour in the first month.
    months = [f"2024-{m:02d}" for m in range(9, 13)] + [f"2025-{m:02d}" for m in range(1, 9)]
    bill = [
        _bill_line(month, following, f"{month}-02", 10, "80.00")
        for month, following in zip(months, [*months[1:], "2025-09"], strict=True)
    ]
    _gpu_bill(tmp_path, bill)
    attributed_before = AttributionRun.objects.count()
    sacct = [
        SACCT_HEADER + "|Elapsed",
        f"3001|3001|train|vision|alice|gpu|CANCELLED|2024-09-02T10:00:00|Unknown|"
        f"{TRES_8}|gpu-001|||01:00:00",
    ]
    ingest(write(tmp_path / "orphan.txt", sacct), "--cluster", "hpc1")
    runs = AttributionRun.objects.order_by("id")[attributed_before:]
    # Its month and the month after (late charges), not the eleven after it.
    assert sorted(str(run.billing_period)[:7] for run in runs) == ["2024-09", "2024-10"]
    # 8 of 8 GPUs for the billed hour of September; nothing from any later month.
    costs = {str(r.billing_period)[:7]: r.cost for r in RunCost.objects.filter(run_id="train")}
    assert costs == {"2024-09": Decimal("80.00")}


def test_running_job_is_charged_up_to_the_newest_billed_hour(tmp_path: Path) -> None:
    from finops.attribution.models import RunCost

    # Two billed hours of the node, and a month-long support line (charge period to the end of
    # the month) that must not stretch the running job past the node's newest billed hour.
    _gpu_bill(
        tmp_path,
        [
            _bill_line("2024-09", "2024-10", "2024-09-02", 10, "80.00"),
            _bill_line("2024-09", "2024-10", "2024-09-02", 11, "40.00"),
            "1,USD,2024-09-01T00:00:00Z,2024-10-01T00:00:00Z,Usage,2024-09-01T00:00:00Z,"
            "2024-10-01T00:00:00Z,AWS,,Support,30.00,30.00,",
        ],
    )
    same = "2024-09-02T10:30:00"
    sacct = [
        SACCT_HEADER,  # End equal to Start on a RUNNING job: open, not zero-length
        f"4001|4001|serve|vision|alice|gpu|RUNNING|{same}|{same}|"
        "billing=4,cpu=4,gres/gpu=4,node=1|gpu-001||",
    ]
    ingest(write(tmp_path / "running.txt", sacct), "--cluster", "hpc1")
    assert JobRecord.objects.get(job_id="4001").end is None
    run = RunCost.objects.get(run_id="serve")
    # 4 of 8 GPUs for half of hour 10 (80 / 2 / 2) and all of hour 11 (40 / 2): 40.
    assert run.cost == Decimal("40.00")
    assert run.gpu_seconds == Decimal(4 * 90 * 60)


def test_headerless_file_fails_with_how_to_get_the_header(tmp_path: Path) -> None:
    path = write(tmp_path / "noheader.txt", FIRST_DUMP[1:])
    with pytest.raises(CommandError, match="1 of 1 file"):
        ingest(path, "--cluster", "hpc1")
    output = ImportBatch.objects.get().error
    assert "header line is missing" in output
    assert "--columns" in output
    assert not JobRecord.objects.exists()


def test_headerless_file_with_columns_is_imported(tmp_path: Path) -> None:
    path = write(tmp_path / "noheader.txt", FIRST_DUMP[1:])
    output = ingest(path, "--cluster", "hpc1", "--columns", SACCT_HEADER.replace("|", ","))
    # The same jobs as the dump with its header: 1001, 1002_1, 1004, 1005.
    assert sorted(JobRecord.objects.values_list("job_id", flat=True)) == [
        "1001",
        "1002_1",
        "1004",
        "1005",
    ]
    assert "9 rows read" in output


def test_columns_is_refused_for_other_formats(tmp_path: Path) -> None:
    path = write(tmp_path / "pods.json", ["{}"])
    with pytest.raises(CommandError, match="--columns applies to --format slurm only"):
        call_command(
            "ingest_jobs", "--format", "kubernetes", str(path), "--columns", "JobID",
            stdout=StringIO(),
        )  # fmt: skip


SACCT_FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sacct"
ELEVEN_COLUMNS = "JobID,JobIDRaw,JobName,Account,User,Partition,State,Start,End,AllocTRES,NodeList"


def test_parsable_output_without_header_is_imported() -> None:
    output = ingest(
        SACCT_FIXTURES / "parsable-noheader.txt", "--cluster", "hpc1", "--columns", ELEVEN_COLUMNS
    )
    assert ImportBatch.objects.get().status == ImportBatch.Status.SUCCEEDED
    jobs = {job.job_id: job for job in JobRecord.objects.all()}
    assert sorted(jobs) == ["7001", "7002_3", "7003"]
    assert jobs["7001"].nodes == ["n1"]
    assert "5 rows read, 3 jobs stored, 2 job steps skipped" in output


def test_delimiter_option_reads_sacct_delimiter_output() -> None:
    path = SACCT_FIXTURES / "delimiter-semicolon-noheader.txt"
    ingest(path, "--cluster", "hpc1", "--columns", ELEVEN_COLUMNS, "--delimiter", ";")
    assert sorted(JobRecord.objects.values_list("job_id", flat=True)) == ["7001", "7003"]
    assert JobRecord.objects.get(job_id="7001").nodes == ["n1", "n2"]


def test_without_the_delimiter_option_the_error_names_it() -> None:
    path = SACCT_FIXTURES / "delimiter-semicolon-noheader.txt"
    with pytest.raises(CommandError, match="1 of 1 file"):
        ingest(path, "--cluster", "hpc1", "--columns", ELEVEN_COLUMNS)
    assert "ingest_jobs --delimiter" in ImportBatch.objects.get().error
    assert not JobRecord.objects.exists()


def test_delimiter_is_refused_for_other_formats(tmp_path: Path) -> None:
    path = write(tmp_path / "pods.json", ["{}"])
    with pytest.raises(CommandError, match="--delimiter applies to --format slurm only"):
        call_command(
            "ingest_jobs", "--format", "kubernetes", str(path), "--delimiter", ";",
            stdout=StringIO(),
        )  # fmt: skip


def test_jobs_without_jobidraw_and_account_are_imported(
    tmp_path: Path,
) -> None:
    ingest(SACCT_FIXTURES / "no-jobidraw-no-account.txt", "--cluster", "hpc1")
    jobs = {job.job_id: job for job in JobRecord.objects.all()}
    assert {job_id: (job.job_id_raw, job.account) for job_id, job in jobs.items()} == {
        "8001": ("8001", ""),
        "8002_1": ("8002_1", ""),
    }
