"""The sacct --parsable2 parser: hostlists, GPU counts, states, steps, arrays, times, run ids."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from billing_ingest.parsers.rows import JobRow
from billing_ingest.parsers.slurm import SacctStats, parse_sacct
from billing_ingest.parsers.slurm_values import (
    clean_wckey,
    expand_hostlist,
    gpu_count,
    normalise_state,
    parse_elapsed,
    parse_time,
    run_id_for,
)
from finops.core.errors import ImportFormatError

COLUMNS = [
    "JobID",
    "JobIDRaw",
    "JobName",
    "Account",
    "User",
    "Partition",
    "State",
    "Start",
    "End",
    "AllocTRES",
    "NodeList",
    "WCKey",
    "Comment",
]
HEADER = "|".join(COLUMNS)
TRES_8 = "billing=64,cpu=64,gres/gpu:h100=8,gres/gpu=8,mem=512G,node=1"
UTC_ZONE = ZoneInfo("UTC")
LA = ZoneInfo("America/Los_Angeles")


def line(**values: str) -> str:
    """One sacct line in the header's column order; unnamed columns are empty."""
    return "|".join(values.get(column, "") for column in COLUMNS)


def job(job_id: str, **values: str) -> str:
    defaults = {
        "JobID": job_id,
        "JobIDRaw": job_id,
        "JobName": "train",
        "Account": "vision",
        "User": "alice",
        "Partition": "gpu",
        "State": "COMPLETED",
        "Start": "2024-09-03T10:00:00",
        "End": "2024-09-03T12:00:00",
        "AllocTRES": TRES_8,
        "NodeList": "gpu-001",
    }
    return line(**{**defaults, **values})


def parse(
    tmp_path: Path, *lines: str, zone: ZoneInfo = UTC_ZONE, header: str = HEADER, **kwargs: Any
) -> tuple[list[JobRow], SacctStats]:
    path = tmp_path / "sacct.txt"
    path.write_text("\n".join([header, *lines]) + "\n")
    stats = SacctStats()
    chunks = list(parse_sacct(path, file_label="sacct.txt", time_zone=zone, stats=stats, **kwargs))
    return [row for chunk in chunks for row in chunk], stats


# --- hostlists ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "hosts"),
    [
        ("gpu-[001-004,007]", ["gpu-001", "gpu-002", "gpu-003", "gpu-004", "gpu-007"]),
        ("node[1-3]", ["node1", "node2", "node3"]),
        ("node[8-10]", ["node8", "node9", "node10"]),
        ("node[08-10]", ["node08", "node09", "node10"]),
        ("gpu-[001-002],cpu-01", ["gpu-001", "gpu-002", "cpu-01"]),
        ("a[01-02]-b[1-2]", ["a01-b1", "a01-b2", "a02-b1", "a02-b2"]),
        ("gpu-001", ["gpu-001"]),
        ("gpu-001,gpu-001", ["gpu-001"]),
        ("None assigned", []),
        ("", []),
    ],
)
def test_expand_hostlist(text: str, hosts: list[str]) -> None:
    assert expand_hostlist(text) == hosts


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("gpu-[001-", "unbalanced '\\['"),
        ("gpu-001]", "unbalanced '\\]'"),
        ("gpu-[3-1]", "descending range '3-1'"),
        ("gpu-[a-b]", "bad range 'a-b'"),
        ("gpu-[1-2],,cpu", "empty host name"),
        ("n[0-99999999]", "expands to more than"),
    ],
)
def test_expand_hostlist_rejects_malformed(text: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        expand_hostlist(text)


# --- GPU counts --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tres", "gpus"),
    [
        # The untyped entry is the total; the typed one repeats it and must not double it.
        (TRES_8, Decimal(8)),
        ("cpu=8,gres/gpu=2,gres/gpu:a100=1,gres/gpu:v100=1,node=1", Decimal(2)),
        # Only typed entries: their sum.
        ("cpu=8,gres/gpu:a100=2,gres/gpu:v100=1,node=1", Decimal(3)),
        # GPU memory and utilisation TRES are not GPUs.
        ("cpu=8,gres/gpumem=80G,gres/gpuutil=90,gres/gpu=1,node=1", Decimal(1)),
        ("billing=4,cpu=4,mem=16G,node=1", Decimal(0)),
        ("", Decimal(0)),
    ],
)
def test_gpu_count(tres: str, gpus: Decimal) -> None:
    assert gpu_count(tres) == gpus


@pytest.mark.parametrize(
    ("tres", "reason"),
    [
        ("gres/gpu=eight", "bad GPU count in 'gres/gpu=eight'"),
        ("gres/gpu=-1", "bad GPU count in 'gres/gpu=-1'"),
        ("gres/gpu:h100=NaN", "bad GPU count in 'gres/gpu:h100=NaN'"),
        ("cpu", "TRES entry 'cpu' has no '='"),
    ],
)
def test_gpu_count_rejects_bad_numbers(tres: str, reason: str) -> None:
    with pytest.raises(ValueError, match=re.escape(reason)):
        gpu_count(tres)


def test_gpu_count_is_the_job_total_over_its_nodes(tmp_path: Path) -> None:
    tres = "billing=128,cpu=128,gres/gpu:h100=16,gres/gpu=16,mem=1T,node=2"
    rows, _ = parse(tmp_path, job("1", AllocTRES=tres, NodeList="gpu-[001-002]"))
    assert rows[0]["gpus"] == Decimal(16)
    assert rows[0]["nodes"] == ["gpu-001", "gpu-002"]


# --- states ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "state"),
    [
        ("COMPLETED", "COMPLETED"),
        ("FAILED", "FAILED"),
        ("CANCELLED by 1001", "CANCELLED"),
        ("PREEMPTED", "PREEMPTED"),
        ("TIMEOUT", "TIMEOUT"),
        ("NODE_FAIL", "NODE_FAIL"),
        ("OUT_OF_MEMORY", "OUT_OF_MEMORY"),
        ("RUNNING", "RUNNING"),
        ("CANCELLED+", "CANCELLED"),
    ],
)
def test_normalise_state(text: str, state: str) -> None:
    assert normalise_state(text) == state


def test_states_are_stored_as_their_first_word(tmp_path: Path) -> None:
    rows, _ = parse(tmp_path, job("1", State="CANCELLED by 1001"), job("2", State="NODE_FAIL"))
    assert [row["state"] for row in rows] == ["CANCELLED", "NODE_FAIL"]


# --- steps, arrays, heterogeneous jobs, pending --------------------------------------------------


def test_steps_are_skipped_and_counted(tmp_path: Path) -> None:
    step_tres = "cpu=64,gres/gpu:h100=8,gres/gpu=8,mem=512G,node=1"
    rows, stats = parse(
        tmp_path,
        job("1001"),
        job("1001.batch", JobName="batch", User="", Partition="", AllocTRES=step_tres),
        job("1001.extern", JobName="extern", User="", Partition="", AllocTRES=step_tres),
        job("1001.0", JobName="python", User="", Partition="", AllocTRES=step_tres),
    )
    assert [row["job_id"] for row in rows] == ["1001"]
    assert rows[0]["gpus"] == Decimal(8)
    assert stats.skipped_steps == 3
    assert stats.data_rows == 4
    assert stats.jobs == 1


def test_array_tasks_are_jobs_and_pending_ranges_are_skipped(tmp_path: Path) -> None:
    rows, stats = parse(
        tmp_path,
        job("2000_1", JobIDRaw="2001"),
        job("2000_2", JobIDRaw="2002"),
        job("2000_2.batch", JobIDRaw="2002.batch"),
        job(
            "2000_[3-9%2]",
            JobIDRaw="2000",
            State="PENDING",
            Start="Unknown",
            End="Unknown",
            AllocTRES="",
            NodeList="None assigned",
        ),
    )
    assert [(row["job_id"], row["job_id_raw"]) for row in rows] == [
        ("2000_1", "2001"),
        ("2000_2", "2002"),
    ]
    assert stats.skipped_not_started == 1
    assert stats.skipped_steps == 1


def test_heterogeneous_components_are_jobs(tmp_path: Path) -> None:
    rows, _ = parse(tmp_path, job("3000+0", JobIDRaw="3000"), job("3000+1", JobIDRaw="3001"))
    assert [row["job_id"] for row in rows] == ["3000+0", "3000+1"]


@pytest.mark.parametrize(
    ("state", "start"), [("PENDING", "Unknown"), ("CANCELLED by 1001", "None"), ("FAILED", "")]
)
def test_jobs_that_never_started_are_skipped(tmp_path: Path, state: str, start: str) -> None:
    rows, stats = parse(tmp_path, job("1", State=state, Start=start, NodeList="None assigned"))
    assert rows == []
    assert stats.skipped_not_started == 1


def test_running_job_has_no_end(tmp_path: Path) -> None:
    rows, _ = parse(tmp_path, job("1", State="RUNNING", End="Unknown"))
    assert rows[0]["state"] == "RUNNING"
    assert rows[0]["end"] is None
    assert rows[0]["start"] == datetime(2024, 9, 3, 10, tzinfo=UTC)


@pytest.mark.parametrize("state", ["RUNNING", "SUSPENDED", "REQUEUED"])
def test_open_states_with_unknown_end_stay_open(tmp_path: Path, state: str) -> None:
    rows, stats = parse(tmp_path, job("1", State=state, End="Unknown"))
    assert rows[0]["end"] is None
    assert stats.finished_without_end == 0


@pytest.mark.parametrize("state", ["CANCELLED by 1001", "COMPLETED", "FAILED", "TIMEOUT"])
def test_finished_job_with_unknown_end_ends_at_start_plus_elapsed(
    tmp_path: Path, state: str
) -> None:
    # An orphaned accounting record: the job is over, sacct just never recorded when.
    header = HEADER + "|Elapsed"
    rows, stats = parse(
        tmp_path,
        job("1", State=state, End="Unknown") + "|1-02:30:15",
        job("2", State=state, End="Unknown") + "|00:45:00",
        header=header,
    )
    start = datetime(2024, 9, 3, 10, tzinfo=UTC)
    assert rows[0]["end"] == start + timedelta(days=1, hours=2, minutes=30, seconds=15)
    assert rows[1]["end"] == start + timedelta(minutes=45)
    assert stats.finished_without_end == 2


def test_finished_job_with_unknown_end_and_no_elapsed_ends_at_start(tmp_path: Path) -> None:
    # Without Elapsed (column absent, or Unknown in it) nothing says how long it ran: 0 s.
    header = HEADER + "|Elapsed"
    rows, stats = parse(
        tmp_path,
        job("1", State="CANCELLED", End="Unknown") + "|Unknown",
        job("2", State="NODE_FAIL", End="") + "|",
        header=header,
    )
    assert [row["end"] for row in rows] == [datetime(2024, 9, 3, 10, tzinfo=UTC)] * 2
    assert stats.finished_without_end == 2
    rows, stats = parse(tmp_path, job("3", State="CANCELLED", End="Unknown"))
    assert rows[0]["end"] == rows[0]["start"]
    assert stats.finished_without_end == 1


def test_known_end_is_kept_even_with_elapsed(tmp_path: Path) -> None:
    rows, stats = parse(tmp_path, job("1") + "|99:00:00", header=HEADER + "|Elapsed")
    assert rows[0]["end"] == datetime(2024, 9, 3, 12, tzinfo=UTC)
    assert stats.finished_without_end == 0


def test_bad_elapsed_names_line_and_column(tmp_path: Path) -> None:
    with pytest.raises(ImportFormatError, match=r"row 2, column Elapsed: .*'2 hours'"):
        parse(
            tmp_path,
            job("1", State="FAILED", End="Unknown") + "|2 hours",
            header=HEADER + "|Elapsed",
        )


@pytest.mark.parametrize(
    ("text", "elapsed"),
    [
        ("00:00:00", timedelta(0)),
        ("12:34", timedelta(minutes=12, seconds=34)),
        ("02:03:04", timedelta(hours=2, minutes=3, seconds=4)),
        ("3-00:00:01", timedelta(days=3, seconds=1)),
        ("Unknown", None),
        ("", None),
        ("INVALID", None),
    ],
)
def test_parse_elapsed(text: str, elapsed: timedelta | None) -> None:
    assert parse_elapsed(text) == elapsed


def test_running_job_whose_end_equals_its_start_is_open(tmp_path: Path) -> None:
    same = "2024-09-03T10:00:00"
    rows, _ = parse(
        tmp_path,
        job("1", State="RUNNING", Start=same, End=same),
        job("2", State="COMPLETED", Start=same, End=same),
    )
    assert rows[0]["end"] is None
    # A finished zero-length job is what it says.
    assert rows[1]["end"] == datetime(2024, 9, 3, 10, tzinfo=UTC)


def test_job_without_gpus_is_kept(tmp_path: Path) -> None:
    rows, _ = parse(tmp_path, job("1", AllocTRES="billing=4,cpu=4,mem=16G,node=1"))
    assert rows[0]["gpus"] == Decimal(0)


# --- times -------------------------------------------------------------------------------------


def test_times_are_read_in_the_cluster_zone_across_a_dst_change(tmp_path: Path) -> None:
    # DST ends in Los Angeles on 2024-11-03 at 02:00 PDT (UTC-7) -> 01:00 PST (UTC-8).
    rows, _ = parse(
        tmp_path, job("1", Start="2024-11-02T23:00:00", End="2024-11-03T05:00:00"), zone=LA
    )
    start, end = rows[0]["start"], rows[0]["end"]
    assert start == datetime(2024, 11, 2, 23, tzinfo=UTC) + timedelta(hours=7)
    assert end == datetime(2024, 11, 3, 5, tzinfo=UTC) + timedelta(hours=8)
    # Six hours on the wall clock, seven really elapsed.
    assert end - start == timedelta(hours=7)
    assert start.utcoffset() == timedelta(0)


def test_spring_forward_shortens_the_elapsed_time(tmp_path: Path) -> None:
    # 2024-03-10 02:00 PST -> 03:00 PDT in Los Angeles.
    rows, _ = parse(
        tmp_path, job("1", Start="2024-03-10T00:00:00", End="2024-03-10T04:00:00"), zone=LA
    )
    start, end = rows[0]["start"], rows[0]["end"]
    assert start is not None
    assert end is not None
    assert end - start == timedelta(hours=3)


def test_end_in_the_repeated_hour_is_read_as_its_second_occurrence(tmp_path: Path) -> None:
    # 01:30 PDT, then the clock falls back and the job ends at 01:10 PST, 40 minutes later.
    rows, _ = parse(
        tmp_path, job("1", Start="2024-11-03T01:30:00", End="2024-11-03T01:10:00"), zone=LA
    )
    start, end = rows[0]["start"], rows[0]["end"]
    assert start == datetime(2024, 11, 3, 8, 30, tzinfo=UTC)
    assert end is not None
    assert end - start == timedelta(minutes=40)


def test_times_with_an_explicit_offset_keep_it() -> None:
    assert parse_time("2024-09-03T10:00:00+02:00", LA) == datetime(2024, 9, 3, 8, tzinfo=UTC)


@pytest.mark.parametrize("text", ["Unknown", "None", ""])
def test_unknown_times_are_none(text: str) -> None:
    assert parse_time(text, LA) is None


# --- run ids -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("wckey", "comment", "run_id"),
    [
        ("llama-7b", "run=other", "llama-7b"),
        ("*llama-7b", "", "llama-7b"),
        ("*", "run=abc123 ckpt=5", "abc123"),
        ("", "foo;run=abc", "abc"),
        ("", "ckpt=5,run=xyz", "xyz"),
        ("", "rerun=nope", "train"),
        ("", "", "train"),
    ],
)
def test_run_id_precedence(wckey: str, comment: str, run_id: str) -> None:
    assert run_id_for(wckey=clean_wckey(wckey), comment=comment, job_name="train") == run_id


def test_run_id_and_wckey_in_parsed_rows(tmp_path: Path) -> None:
    rows, _ = parse(
        tmp_path,
        job("1", WCKey="*llama", Comment="run=ignored"),
        job("2", WCKey="*", Comment="note run=r-42 ckpt=5"),
        job("3", JobName="sweep"),
    )
    assert [(row["run_id"], row["wckey"]) for row in rows] == [
        ("llama", "llama"),
        ("r-42", ""),
        ("sweep", ""),
    ]
    assert rows[1]["comment"] == "note run=r-42 ckpt=5"


# --- layout ------------------------------------------------------------------------------------


def test_columns_in_any_order_and_without_optional_ones(tmp_path: Path) -> None:
    columns = ["NodeList", "State", "JobIDRaw", "JobID", "AllocTRES", "End", "Start"]
    columns += ["Partition", "User", "Account", "JobName"]
    values = {
        "NodeList": "gpu-[01-02]",
        "State": "TIMEOUT",
        "JobIDRaw": "7",
        "JobID": "7",
        "AllocTRES": "gres/gpu=2",
        "End": "2024-09-03T12:00:00",
        "Start": "2024-09-03T10:00:00",
        "Partition": "gpu",
        "User": "bob",
        "Account": "speech",
        "JobName": "asr",
    }
    rows, _ = parse(tmp_path, "|".join(values[c] for c in columns), header="|".join(columns))
    assert rows[0]["state"] == "TIMEOUT"
    assert rows[0]["nodes"] == ["gpu-01", "gpu-02"]
    assert rows[0]["run_id"] == "asr"
    assert rows[0]["wckey"] == rows[0]["comment"] == ""


def test_bar_inside_the_last_comment_column_is_kept(tmp_path: Path) -> None:
    rows, _ = parse(tmp_path, job("1", Comment="a|b run=z"))
    assert rows[0]["comment"] == "a|b run=z"
    assert rows[0]["run_id"] == "z"


def test_parsable_with_trailing_bar_and_repeated_header(tmp_path: Path) -> None:
    rows, _ = parse(tmp_path, job("1") + "|", HEADER + "|", job("2") + "|", "", header=HEADER + "|")
    assert [row["job_id"] for row in rows] == ["1", "2"]


def test_chunks(tmp_path: Path) -> None:
    path = tmp_path / "sacct.txt"
    path.write_text("\n".join([HEADER, *(job(str(n)) for n in range(5))]) + "\n")
    chunks = list(parse_sacct(path, file_label="x", time_zone=UTC_ZONE, chunk_size=2))
    assert [len(chunk) for chunk in chunks] == [2, 2, 1]


# --- errors ------------------------------------------------------------------------------------


def expect_error(tmp_path: Path, *lines: str, header: str = HEADER) -> ImportFormatError:
    with pytest.raises(ImportFormatError) as info:
        parse(tmp_path, *lines, header=header)
    return info.value


def test_missing_fields_name_line_and_column(tmp_path: Path) -> None:
    short = "|".join(job("2").split("|")[:-2])
    error = expect_error(tmp_path, job("1"), short)
    assert (error.file, error.row, error.column) == ("sacct.txt", 3, "WCKey")
    assert "file sacct.txt, row 3, column WCKey" in str(error)
    assert "found 11" in str(error)


def test_unparseable_date_names_line_and_column(tmp_path: Path) -> None:
    error = expect_error(tmp_path, job("1"), job("2"), job("3", End="03/09/2024 12:00"))
    assert (error.row, error.column) == (4, "End")
    assert "'03/09/2024 12:00'" in str(error)


def test_bad_gres_number_names_line_and_column(tmp_path: Path) -> None:
    error = expect_error(tmp_path, job("1", AllocTRES="cpu=8,gres/gpu=x"))
    assert (error.row, error.column) == (2, "AllocTRES")
    assert "gres/gpu=x" in str(error)


def test_bad_hostlist_names_line_and_column(tmp_path: Path) -> None:
    error = expect_error(tmp_path, job("1", NodeList="gpu-[001-"))
    assert (error.row, error.column) == (2, "NodeList")


def test_end_before_start_is_an_error(tmp_path: Path) -> None:
    error = expect_error(tmp_path, job("1", Start="2024-09-03T10:00:00", End="2024-09-03T09:00:00"))
    assert (error.row, error.column) == (2, "End")


def test_overlong_value_is_an_error(tmp_path: Path) -> None:
    error = expect_error(tmp_path, job("1", Account="a" * 201))
    assert (error.row, error.column) == (2, "Account")


def test_missing_required_column_is_named(tmp_path: Path) -> None:
    header = HEADER.replace("AllocTRES|", "")
    error = expect_error(tmp_path, header=header)
    assert (error.row, error.column) == (1, "AllocTRES")


def test_empty_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "empty.txt"
    path.write_text("")
    with pytest.raises(ImportFormatError, match="empty file"):
        list(parse_sacct(path, file_label="empty.txt", time_zone=UTC_ZONE))


# --- headerless output, encoding, line length ---------------------------------------------------


def test_headerless_output_says_the_header_is_missing(tmp_path: Path) -> None:
    path = tmp_path / "noheader.txt"
    path.write_text(job("1") + "\n" + job("2") + "\n")
    with pytest.raises(ImportFormatError) as caught:
        list(parse_sacct(path, file_label="noheader.txt", time_zone=UTC_ZONE))
    message = str(caught.value)
    assert "row 1" in message
    assert "header line is missing" in message
    assert "without `--noheader`" in message
    assert "--columns JobID,JobIDRaw," in message
    assert "twice" not in message


def test_headerless_output_is_read_with_the_given_columns(tmp_path: Path) -> None:
    path = tmp_path / "noheader.txt"
    path.write_text(job("1") + "\n" + job("2", State="FAILED") + "\n")
    stats = SacctStats()
    given = [name.lower() for name in COLUMNS]  # names match ignoring case, as in a header
    chunks = parse_sacct(
        path, file_label="noheader.txt", time_zone=UTC_ZONE, stats=stats, columns=given
    )
    rows = [row for chunk in chunks for row in chunk]
    assert [(row["job_id"], row["state"]) for row in rows] == [("1", "COMPLETED"), ("2", "FAILED")]
    assert stats.data_rows == 2  # the first line is a job, not a header


def test_given_columns_missing_a_required_one_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "noheader.txt"
    path.write_text(job("1") + "\n")
    given = [name for name in COLUMNS if name != "NodeList"]
    with pytest.raises(
        ImportFormatError, match=r"column NodeList: required column missing from --columns"
    ):
        list(parse_sacct(path, file_label="noheader.txt", time_zone=UTC_ZONE, columns=given))


def test_invalid_utf8_is_rejected_with_its_row_and_column(tmp_path: Path) -> None:
    path = tmp_path / "latin1.txt"
    body = "\n".join([HEADER, job("1"), job("2", JobName="entra\xeenement")]) + "\n"
    path.write_bytes(body.encode("latin-1"))  # î as the single byte 0xee
    with pytest.raises(ImportFormatError) as caught:
        list(parse_sacct(path, file_label="latin1.txt", time_zone=UTC_ZONE))
    assert caught.value.row == 3
    assert caught.value.column == "JobName"
    assert "0xee" in str(caught.value)


def test_valid_utf8_names_are_kept(tmp_path: Path) -> None:
    rows, _ = parse(tmp_path, job("1", JobName="entraînement"))
    assert rows[0]["name"] == "entraînement"


def test_overlong_line_is_refused_before_it_is_read_whole(tmp_path: Path, settings: Any) -> None:
    settings.FINOPS_MAX_LINE_BYTES = 1000
    path = tmp_path / "long.txt"
    long_comment = "x" * 5000
    path.write_text("\n".join([HEADER, job("1"), job("2", Comment=long_comment)]) + "\n")
    with pytest.raises(ImportFormatError) as caught:
        list(parse_sacct(path, file_label="long.txt", time_zone=UTC_ZONE))
    assert caught.value.file == "long.txt"
    assert caught.value.row == 3
    assert "FINOPS_MAX_LINE_BYTES" in str(caught.value)
    # A line just under the cap is read.
    settings.FINOPS_MAX_LINE_BYTES = len(job("2", Comment=long_comment).encode())
    rows = [
        row
        for chunk in parse_sacct(path, file_label="long.txt", time_zone=UTC_ZONE)
        for row in chunk
    ]
    assert rows[1]["comment"] == long_comment


# --- sacct as clusters print it: --parsable, --delimiter, short column lists (issue 24) -------

SACCT_FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sacct"
ELEVEN = [*COLUMNS[:11]]  # JobID ... NodeList, the columns of the fixtures without a header


def parse_fixture(name: str, **kwargs: Any) -> tuple[list[JobRow], SacctStats]:
    stats = SacctStats()
    chunks = parse_sacct(
        SACCT_FIXTURES / name, file_label=name, time_zone=UTC_ZONE, stats=stats, **kwargs
    )
    return [row for chunk in chunks for row in chunk], stats


def test_parsable_output_without_header_is_read_with_the_given_columns() -> None:
    # `sacct --parsable --noheader --format=JobID,...,NodeList`: every line ends with `|`.
    rows, stats = parse_fixture("parsable-noheader.txt", columns=ELEVEN)
    assert [(row["job_id"], row["state"], row["gpus"]) for row in rows] == [
        ("7001", "COMPLETED", Decimal(8)),
        ("7002_3", "FAILED", Decimal(1)),
        ("7003", "RUNNING", Decimal(4)),
    ]
    assert rows[0]["nodes"] == ["n1"]  # the last column, without the trailing delimiter
    assert rows[2]["end"] is None
    assert (stats.data_rows, stats.skipped_steps) == (5, 2)


def test_a_delimiter_given_to_sacct_is_read_when_named() -> None:
    # `sacct --parsable2 --noheader --delimiter=';' --format=...`
    rows, stats = parse_fixture("delimiter-semicolon-noheader.txt", columns=ELEVEN, delimiter=";")
    assert [(row["job_id"], row["nodes"]) for row in rows] == [
        ("7001", ["n1", "n2"]),
        ("7003", ["n3"]),
    ]
    assert rows[0]["gpus"] == Decimal(8)  # AllocTRES's commas are not delimiters
    assert stats.skipped_steps == 1


def test_an_unnamed_delimiter_is_named_in_the_error() -> None:
    with pytest.raises(ImportFormatError) as caught:
        parse_fixture("delimiter-semicolon-noheader.txt", columns=ELEVEN)
    assert (caught.value.row, caught.value.column) == (1, "JobIDRaw")
    assert "found 1" in str(caught.value)
    assert "--delimiter=;" in str(caught.value)


def test_parsable_header_with_a_delimiter(tmp_path: Path) -> None:
    header = ";".join(COLUMNS) + ";"
    path = tmp_path / "sacct.txt"
    path.write_text(header + "\n" + job("1").replace("|", ";") + ";\n")
    rows = [
        r for c in parse_sacct(path, file_label="s", time_zone=UTC_ZONE, delimiter=";") for r in c
    ]
    assert [row["job_id"] for row in rows] == ["1"]
    with pytest.raises(ImportFormatError, match=r"--delimiter ';'"):
        list(parse_sacct(path, file_label="s", time_zone=UTC_ZONE))


def test_one_field_too_many_with_a_trailing_delimiter_names_parsable(tmp_path: Path) -> None:
    # The first line set the layout (--parsable2); a later line ends with `|` (--parsable).
    first, second = ("|".join(job(n).split("|")[:11]) for n in ("1", "2"))
    path = tmp_path / "mixed.txt"
    path.write_text(first + "\n" + second + "|\n")
    with pytest.raises(ImportFormatError) as caught:
        list(parse_sacct(path, file_label="mixed.txt", time_zone=UTC_ZONE, columns=ELEVEN))
    message = str(caught.value)
    assert caught.value.row == 2
    assert "found 12" in message
    assert "`sacct --parsable` output" in message


def test_one_field_too_few_names_the_likely_cause(tmp_path: Path) -> None:
    path = tmp_path / "short.txt"
    path.write_text(job("1") + "\n")
    with pytest.raises(ImportFormatError) as caught:
        list(parse_sacct(path, file_label="short.txt", time_zone=UTC_ZONE, columns=[*COLUMNS, "X"]))
    assert "found 13" in str(caught.value)
    assert "--columns names a column the file does not have" in str(caught.value)


def test_jobidraw_and_account_may_be_missing() -> None:
    rows, stats = parse_fixture("no-jobidraw-no-account.txt")
    assert [(row["job_id"], row["job_id_raw"], row["account"]) for row in rows] == [
        ("8001", "8001", ""),
        ("8002_1", "8002_1", ""),
    ]
    assert rows[0]["run_id"] == "llama"
    assert stats.skipped_steps == 1


def test_given_columns_without_jobidraw_and_account(tmp_path: Path) -> None:
    path = tmp_path / "noheader.txt"
    path.write_text(
        "9|train|ann|gpu|COMPLETED|2024-09-03T10:00:00|2024-09-03T11:00:00|gres/gpu=2|g1\n"
    )
    given = [
        "JobID",
        "JobName",
        "User",
        "Partition",
        "State",
        "Start",
        "End",
        "AllocTRES",
        "NodeList",
    ]
    rows = [
        row
        for chunk in parse_sacct(path, file_label="n", time_zone=UTC_ZONE, columns=given)
        for row in chunk
    ]
    assert [(row["job_id_raw"], row["account"], row["gpus"]) for row in rows] == [
        ("9", "", Decimal(2))
    ]
