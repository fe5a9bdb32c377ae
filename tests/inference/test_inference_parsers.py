"""Inference usage ingest: vLLM/Triton Prometheus counters (text scrapes, query_range JSON), CSV,
errors, and the ingest_inference command."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import os
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from pytest_django import Settings

from billing_ingest.models import ImportBatch
from finops.core.errors import ImportFormatError
from finops.inference.models import InferenceUsage
from finops.inference.parsers.prometheus import parse_prometheus
from finops.inference.parsers.usage_csv import parse_usage_csv

UTC = dt.UTC
T0 = dt.datetime(2025, 9, 3, 10, 0, tzinfo=UTC)


def ms(at: dt.datetime) -> int:
    return int(at.timestamp() * 1000)


def vllm_scrape(at: dt.datetime, *, stop: int, length: int, prompt: int, gen: int) -> str:
    labels = 'model_name="llama-3-8b",finops_io_endpoint="chat",namespace="serve",pod="chat-0"'
    t = ms(at)
    return "\n".join(
        [
            "# HELP vllm:request_success_total Count of successfully processed requests.",
            "# TYPE vllm:request_success_total counter",
            f'vllm:request_success_total{{finished_reason="stop",{labels}}} {stop}.0 {t}',
            f'vllm:request_success_total{{finished_reason="length",{labels}}} {length}.0 {t}',
            "# TYPE vllm:prompt_tokens_total counter",
            f"vllm:prompt_tokens_total{{{labels}}} {prompt}.0 {t}",
            f"vllm:generation_tokens_total{{{labels}}} {gen}.0 {t}",
            "# TYPE vllm:num_requests_running gauge",
            f"vllm:num_requests_running{{{labels}}} 3.0 {t}",
            'vllm:e2e_request_latency_seconds_bucket{le="+Inf"} NaN',
            "",
        ]
    )


def by_window(rows: list[dict[str, Any]]) -> dict[tuple[str, dt.datetime], dict[str, Any]]:
    return {(r["endpoint"], r["window_start"]): r for r in rows}


def test_vllm_scrapes_increases_sum_reasons_and_handle_resets(tmp_path: Path) -> None:
    # Scrapes at 10:00, 10:30, 11:00 (closes the 10:00 hour), 11:20 (pod restarted: counters
    # dropped), 11:40.
    scrapes = [
        (T0, dict(stop=100, length=10, prompt=5000, gen=20000)),
        (T0 + dt.timedelta(minutes=30), dict(stop=160, length=15, prompt=8000, gen=31000)),
        (T0 + dt.timedelta(hours=1), dict(stop=200, length=20, prompt=9000, gen=40000)),
        (T0 + dt.timedelta(minutes=80), dict(stop=7, length=1, prompt=300, gen=900)),
        (T0 + dt.timedelta(minutes=100), dict(stop=27, length=4, prompt=1300, gen=4900)),
    ]
    paths = []
    for i, (at, values) in enumerate(scrapes):
        path = tmp_path / f"scrape-{i}.prom"
        path.write_text(vllm_scrape(at, **values))
        paths.append(path)

    rows = by_window(parse_prometheus(paths))

    first, second = rows[("chat", T0)], rows[("chat", T0 + dt.timedelta(hours=1))]
    assert len(rows) == 2
    # 10:00 hour: increases observed at 10:30 and 11:00, both finished reasons summed.
    assert first["requests"] == (160 - 100) + (200 - 160) + (15 - 10) + (20 - 15)
    assert first["prompt_tokens"] == 9000 - 5000
    assert first["generation_tokens"] == 40000 - 20000
    assert first["window_end"] == T0 + dt.timedelta(hours=1)
    # 11:00 hour: the drop at 11:20 is a restart (the increase is the new value), then 11:40.
    assert second["requests"] == (7 + 1) + (27 - 7) + (4 - 1)
    assert second["prompt_tokens"] == 300 + (1300 - 300)
    assert second["generation_tokens"] == 900 + (4900 - 900)
    assert first["model_name"] == "llama-3-8b"
    assert (first["namespace"], first["pod"]) == ("serve", "chat-0")
    assert first["inferences"] == 0


def test_scrape_without_timestamps_takes_the_file_time(tmp_path: Path) -> None:
    paths = []
    for i, count in enumerate((10, 25)):
        path = tmp_path / f"s{i}.txt"
        path.write_text(f'vllm:request_success_total{{model_name="m1"}} {count}\n')
        at = T0 + dt.timedelta(minutes=15 * (i + 1))
        os.utime(path, (at.timestamp(), at.timestamp()))
        paths.append(path)

    (row,) = parse_prometheus(paths)

    # No endpoint label: the model name is the endpoint.
    assert row["endpoint"] == "m1"
    assert row["requests"] == 25 - 10
    assert row["window_start"] == T0


def range_export(series: list[dict[str, Any]]) -> str:
    return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": series}})


def test_range_export_buckets_hours_and_merges_pods(tmp_path: Path) -> None:
    start = T0.timestamp()
    step = 900  # 15 minutes, from 10:00 to 12:00 inclusive
    pod_a = [100, 110, 130, 130, 170, 175, 180, 200, 260]
    pod_b = [0, 5, 5, 9, 2, 4, 8, 8, 10]  # restart between 11:00 and 11:15
    series = [
        {
            "metric": {
                "__name__": "vllm:request_success_total",
                "endpoint": "chat",
                "model_name": "llama",
                "pod": pod,
                "namespace": "serve",
                "finished_reason": "stop",
            },
            "values": [[start + i * step, str(v)] for i, v in enumerate(values)],
        }
        for pod, values in (("chat-a", pod_a), ("chat-b", pod_b))
    ]
    series.append({"metric": {"__name__": "up", "pod": "chat-a"}, "values": [[start, "1"]]})
    path = tmp_path / "range.json"
    path.write_text(range_export(series))

    rows = parse_prometheus([path])

    def inc(values: list[int]) -> list[int]:
        return [b if b < a else b - a for a, b in itertools.pairwise(values)]

    got = {(r["pod"], r["window_start"]): r["requests"] for r in rows}
    for pod, values in (("chat-a", pod_a), ("chat-b", pod_b)):
        increases = inc(values)
        # Samples at 10:15..11:00 close the 10:00 hour; 11:15..12:00 the 11:00 hour.
        assert got[(pod, T0)] == sum(increases[:4])
        assert got[(pod, T0 + dt.timedelta(hours=1))] == sum(increases[4:])
    assert len(got) == 4


def test_overlapping_range_exports_count_each_sample_once(tmp_path: Path) -> None:
    metric = {"__name__": "nv_inference_request_success", "model": "resnet", "version": "1"}
    values = [[T0.timestamp() + 600 * i, str(10 * i * i)] for i in range(7)]
    (tmp_path / "a.json").write_text(range_export([{"metric": metric, "values": values[:5]}]))
    (tmp_path / "b.json").write_text(range_export([{"metric": metric, "values": values[3:]}]))

    (row,) = parse_prometheus([tmp_path / "a.json", tmp_path / "b.json"])

    assert row["requests"] == 10 * 6 * 6 - 0


def test_triton_requests_and_inferences(tmp_path: Path) -> None:
    t1, t2 = ms(T0 + dt.timedelta(minutes=5)), ms(T0 + dt.timedelta(minutes=35))
    text = "\n".join(
        [
            "# TYPE nv_inference_request_success counter",
            f'nv_inference_request_success{{model="resnet50",version="1"}} 40 {t1}',
            f'nv_inference_request_success{{model="resnet50",version="2"}} 5 {t1}',
            f'nv_inference_count{{model="resnet50",version="1"}} 320 {t1}',
            f'nv_inference_request_success{{model="resnet50",version="1"}} 100 {t2}',
            f'nv_inference_request_success{{model="resnet50",version="2"}} 15 {t2}',
            f'nv_inference_count{{model="resnet50",version="1"}} 800 {t2}',
            f'nv_inference_request_failure{{model="resnet50",version="1"}} 2 {t2}',
        ]
    )
    path = tmp_path / "triton.prom"
    path.write_text(text)

    (row,) = parse_prometheus([path])

    assert row["endpoint"] == row["model_name"] == "resnet50"
    assert row["requests"] == (100 - 40) + (15 - 5)
    assert row["inferences"] == 800 - 320
    assert row["prompt_tokens"] == row["generation_tokens"] == 0
    assert row["window_start"] == T0


def test_openmetrics_seconds_timestamps_and_label_escapes(tmp_path: Path) -> None:
    t1, t2 = T0.timestamp() + 60, T0.timestamp() + 120
    path = tmp_path / "om.txt"
    path.write_text(
        f'vllm:prompt_tokens_total{{endpoint="a\\"b",model_name="m"}} 1.0e3 {t1}\n'
        f'vllm:prompt_tokens_total{{endpoint="a\\"b",model_name="m"}} 1.5e3 {t2}\n# EOF\n'
    )

    (row,) = parse_prometheus([path])

    assert row["endpoint"] == 'a"b'
    assert row["prompt_tokens"] == 500
    assert row["window_start"] == T0


CSV_HEADER = "endpoint,window_start,window_end,requests,prompt_tokens,generation_tokens,pod\n"


def test_csv_rows(tmp_path: Path) -> None:
    path = tmp_path / "usage.csv"
    path.write_text(
        "\ufeff" + CSV_HEADER
        + "chat,2025-09-03T10:00:00Z,2025-09-03T11:00:00Z,1200,50000,150000,chat-0\n"
        + "chat,2025-09-03T11:00:00Z,2025-09-03T11:30:00Z,7,,,chat-0\n"
        + "\n"
    )  # fmt: skip

    rows = by_window(parse_usage_csv([path]))

    first = rows[("chat", T0)]
    assert (first["requests"], first["prompt_tokens"], first["generation_tokens"]) == (
        1200, 50000, 150000,
    )  # fmt: skip
    assert first["pod"] == "chat-0"
    second = rows[("chat", T0 + dt.timedelta(hours=1))]
    assert second["window_end"] == T0 + dt.timedelta(minutes=90)
    assert (second["requests"], second["prompt_tokens"], second["generation_tokens"]) == (7, 0, 0)
    assert len(rows) == 2


def test_csv_offsets_become_utc(tmp_path: Path) -> None:
    path = tmp_path / "usage.csv"
    path.write_text(
        "endpoint,window_start,window_end,requests\n"
        "chat,2025-09-03T12:00:00+02:00,2025-09-03T13:00:00+02:00,7\n"
    )

    (row,) = parse_usage_csv([path])

    assert row["window_start"] == T0
    assert row["window_end"] == T0 + dt.timedelta(hours=1)
    assert (row["requests"], row["prompt_tokens"], row["generation_tokens"]) == (7, 0, 0)


@pytest.mark.parametrize(
    ("body", "line", "column"),
    [
        ("endpoint,window_start,requests\n", 1, "window_end"),
        (CSV_HEADER + "chat,2025-09-03T10:00:00,2025-09-03T11:00:00Z,1,0,0,p\n", 2,
         "window_start"),
        (CSV_HEADER + "chat,2025-09-03T23:00:00Z,2025-09-04T01:00:00Z,1,0,0,p\n", 2,
         "window_end"),
        (CSV_HEADER + "chat,2025-09-03T10:00:00Z,2025-09-03T11:00:00Z,1.5,0,0,p\n", 2,
         "requests"),
        (CSV_HEADER + "chat,2025-09-03T10:00:00Z,2025-09-03T11:00:00Z,-1,0,0,p\n", 2,
         "requests"),
        (CSV_HEADER + "chat,2025-09-03T10:00:00Z,2025-09-03T11:00:00Z,1,x,0,p\n", 2,
         "prompt_tokens"),
        (CSV_HEADER + "chat,2025-09-03T10:00:00Z,2025-09-03T11:00:00Z,1,0,0,p\n"
         "chat,2025-09-03T10:00:00Z,2025-09-03T10:30:00Z,1,0,0,p\n", 3, "window_start"),
        (CSV_HEADER + ",2025-09-03T10:00:00Z,2025-09-03T11:00:00Z,1,0,0,p\n", 2, "endpoint"),
    ],
)  # fmt: skip
def test_csv_errors_name_file_line_and_field(
    tmp_path: Path, body: str, line: int, column: str
) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(body)

    with pytest.raises(ImportFormatError) as caught:
        parse_usage_csv([path])

    assert (caught.value.file, caught.value.row, caught.value.column) == (str(path), line, column)


@pytest.mark.parametrize(
    ("text", "column"),
    [
        ('vllm:request_success_total{model_name="m" 1 1725357600000', "labels"),
        ('vllm:request_success_total{model_name="m\\q"} 1 1725357600000', "labels"),
        ('vllm:request_success_total{model_name="m"} many 1725357600000', "value"),
        ('vllm:request_success_total{model_name="m"} NaN 1725357600000', "value"),
        ('vllm:request_success_total{model_name="m"} 1 soon', "timestamp"),
        ('vllm:request_success_total{finished_reason="stop"} 1 1725357600000', "labels"),
        ('vllm:request_success_total{model_name="m"} 1.5 1725357600000', "value"),
        ("{bad line", "metric"),
    ],
)
def test_text_errors_name_file_line_and_field(tmp_path: Path, text: str, column: str) -> None:
    path = tmp_path / "bad.prom"
    path.write_text(f"# TYPE vllm:request_success_total counter\n{text}\n")

    with pytest.raises(ImportFormatError) as caught:
        parse_prometheus([path])

    assert (caught.value.file, caught.value.row, caught.value.column) == (str(path), 2, column)


@pytest.mark.parametrize(
    ("document", "column"),
    [
        ({"status": "error", "error": "bad query"}, "status"),
        ({"status": "success", "data": {"resultType": "scalar", "result": [1, "2"]}},
         "data.resultType"),
        ({"status": "success", "data": {"resultType": "matrix", "result": [
            {"metric": {"__name__": "nv_inference_count", "model": "m"},
             "values": [[1725357600, "1"], [1725357660, "x"]]}]}},
         "data.result[0].values[1]"),
        ({"status": "success", "data": {"resultType": "matrix", "result": [
            {"metric": {"__name__": "nv_inference_count", "model": "m"},
             "values": [[1725357600, 1]]}]}},
         "data.result[0].values[0]"),
    ],
)  # fmt: skip
def test_json_errors_name_the_field(tmp_path: Path, document: dict[str, Any], column: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(document))

    with pytest.raises(ImportFormatError) as caught:
        parse_prometheus([path])

    assert (caught.value.file, caught.value.column) == (str(path), column)


def test_conflicting_values_at_one_instant_are_an_error(tmp_path: Path) -> None:
    t = ms(T0)
    (tmp_path / "a.prom").write_text(f'nv_inference_count{{model="m"}} 5 {t}\n')
    (tmp_path / "b.prom").write_text(f'nv_inference_count{{model="m"}} 6 {t}\n')

    with pytest.raises(ImportFormatError, match="differs") as caught:
        parse_prometheus([tmp_path / "a.prom", tmp_path / "b.prom"])

    assert caught.value.row == 1


# --- the command ---------------------------------------------------------------------------------


def write_scrapes(folder: Path, counts: list[int], *, endpoint: str = "chat") -> None:
    folder.mkdir()
    for i, count in enumerate(counts):
        at = ms(T0 + dt.timedelta(minutes=20 * (i + 1)))
        (folder / f"{i}.prom").write_text(
            f'vllm:request_success_total{{finops_io_endpoint="{endpoint}",model_name="m",'
            f'team="vision"}} {count} {at}\n'
        )


@pytest.mark.django_db
def test_command_imports_a_folder_as_one_batch_and_skips_duplicates(tmp_path: Path) -> None:
    write_scrapes(tmp_path / "scrapes", [10, 40, 70])

    call_command("ingest_inference", "--format", "prometheus", str(tmp_path / "scrapes"),
                 "--cluster", "gpu-east")  # fmt: skip
    call_command("ingest_inference", "--format", "prometheus", str(tmp_path / "scrapes"),
                 "--cluster", "gpu-east")  # fmt: skip

    (usage,) = InferenceUsage.objects.all()
    assert (usage.cluster, usage.endpoint, usage.team_hint) == ("gpu-east", "chat", "vision")
    assert usage.requests == 70 - 10
    assert usage.window_start == T0
    batches = ImportBatch.objects.filter(kind="inference").order_by("id")
    assert [b.status for b in batches] == ["succeeded", "duplicate"]
    assert batches[0].billing_periods == ["2025-09"]


@pytest.mark.django_db
def test_reimport_restates_the_window(tmp_path: Path) -> None:
    write_scrapes(tmp_path / "first", [10, 40])
    write_scrapes(tmp_path / "second", [10, 40, 90])

    call_command("ingest_inference", "--format", "prometheus", str(tmp_path / "first"))
    call_command("ingest_inference", "--format", "prometheus", str(tmp_path / "second"))

    (usage,) = InferenceUsage.objects.all()
    assert usage.requests == 90 - 10


@pytest.mark.django_db
def test_command_writes_nothing_on_a_bad_file(tmp_path: Path) -> None:
    folder = tmp_path / "mixed"
    write_scrapes(folder, [10, 40])
    (folder / "z-bad.prom").write_text('vllm:request_success_total{model_name="m"} oops\n')

    with pytest.raises(CommandError, match=r"z-bad\.prom, row 1, column value"):
        call_command("ingest_inference", "--format", "prometheus", str(folder))

    assert not InferenceUsage.objects.exists()
    batch = ImportBatch.objects.get(kind="inference")
    assert batch.status == ImportBatch.Status.FAILED
    assert "z-bad.prom" in batch.error


def test_csv_overlong_line_fails_naming_file_and_line(tmp_path: Path, settings: Settings) -> None:
    settings.FINOPS_MAX_LINE_BYTES = 200
    good = "chat,2025-09-03T10:00:00Z,2025-09-03T11:00:00Z,1,0,0,chat-0\n"
    # Line 3 is a row whose pod cell alone is 5,000 bytes: over the 200-byte cap.
    huge = "chat,2025-09-03T11:00:00Z,2025-09-03T12:00:00Z,1,0,0," + "p" * 5000 + "\n"
    path = tmp_path / "huge.csv"
    path.write_text(CSV_HEADER + good + huge)

    with pytest.raises(ImportFormatError) as caught:
        parse_usage_csv([path])

    assert (caught.value.file, caught.value.row) == (str(path), 3)
    assert "FINOPS_MAX_LINE_BYTES" in str(caught.value)
    assert "200 bytes" in str(caught.value)


def test_csv_line_exactly_at_the_cap_is_read(tmp_path: Path, settings: Settings) -> None:
    row = "chat,2025-09-03T10:00:00Z,2025-09-03T11:00:00Z,1,0,0,chat-0"
    settings.FINOPS_MAX_LINE_BYTES = max(len(CSV_HEADER) - 1, len(row))
    path = tmp_path / "usage.csv"
    path.write_text(CSV_HEADER + row + "\n")

    (parsed,) = parse_usage_csv([path])

    assert (parsed["endpoint"], parsed["requests"], parsed["pod"]) == ("chat", 1, "chat-0")
