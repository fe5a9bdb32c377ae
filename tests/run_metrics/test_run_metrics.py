"""Run metrics (issue 30): `ingest_run_metrics`, its batches and bad-input rules, and the
`efficiency` of a run on the API (the hand-worked figures are the scenario
fixtures/scenarios/focus-slurm-run-metrics, checked by
tests/attribution/test_fixture_scenarios.py)."""

from __future__ import annotations

from decimal import Decimal
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from billing_ingest.models import ImportBatch
from finops.attribution.models import RunCost
from finops.org.models import Team
from finops.run_metrics.models import RunMetricPoint, TrainingRun
from finops.run_metrics.peaks import PEAKS, peak_flops
from finops.run_metrics.progress import training_runs_matching

pytestmark = pytest.mark.django_db

SCENARIO = Path(__file__).resolve().parents[2] / "fixtures" / "scenarios"
REQUEUE = SCENARIO / "focus-slurm-requeue"
HEADER = "run_id,team,timestamp,step,tokens,samples,checkpoint,model_params,flops_per_token,dtype"


def _ingest(path: Path, *args: str) -> str:
    out = StringIO()
    call_command("ingest_run_metrics", "--format", "csv", str(path), *args, stdout=out)
    return out.getvalue()


def _write(path: Path, *rows: str) -> Path:
    path.write_text("\n".join((HEADER, *rows)) + "\n")
    return path


def _points(run_id: str = "pretrain") -> list[tuple[int, int | None]]:
    return list(
        RunMetricPoint.objects.filter(run__run_id=run_id)
        .order_by("timestamp")
        .values_list("step", "tokens")
    )


def _month_with_metrics(tmp_path: Path, metrics: Path) -> None:
    """The focus-slurm-requeue bill and jobs, attributed, with `metrics` imported first."""
    call_command("loaddata", str(SCENARIO.parent / "django" / "teams.json"), verbosity=0)
    call_command("ingest_run_metrics", "--format", "csv", str(metrics), stdout=StringIO())
    team = Team.objects.get(slug="vision")
    team.mapping_rules.create(kind="slurm_account", value="cv", priority=50)
    quiet = {"stdout": StringIO(), "stderr": StringIO()}
    call_command(
        "ingest_billing", "--format", "focus", str(REQUEUE / "focus-2025-06.csv"),
        "--no-attribute", **quiet,
    )  # fmt: skip
    call_command(
        "ingest_jobs", "--format", "slurm", str(REQUEUE / "sacct-D-hpc.txt"), "--cluster", "hpc",
        "--no-attribute", **quiet,
    )  # fmt: skip
    call_command("attribute", "--month", "2025-06", **quiet)


def test_a_bad_cell_fails_its_import_naming_file_row_and_column_and_keeps_the_data(
    tmp_path: Path,
) -> None:
    path = _write(
        tmp_path / "m.csv",
        "pretrain,vision,2025-06-03T10:05:00Z,50,100,,0,7000000000,,bf16",
        "pretrain,vision,2025-06-03T10:15:00Z,100,200,,1,,,",
    )
    _ingest(path)
    _write(
        tmp_path / "m.csv",
        "pretrain,vision,2025-06-03T10:05:00Z,50,100,,0,,,",
        "pretrain,vision,2025-06-03T10:15:00Z,100,2x0,,1,,,",
    )
    with pytest.raises(CommandError) as failed:
        _ingest(path)
    assert f"file {path}, row 3, column tokens: not a number: '2x0'" in str(failed.value)
    assert ImportBatch.objects.filter(kind="run_metrics", status="failed").count() == 1
    assert _points() == [(50, 100), (100, 200)]


@pytest.mark.parametrize(
    ("row", "column", "message"),
    [
        ("pretrain,vision,yesterday,1,1,,0,,,", "timestamp", "not an ISO 8601 time"),
        ("pretrain,vision,2025-06-03T10:05:00Z,1,-5,,0,,,", "tokens", "must be at least 0"),
        ("pretrain,vision,2025-06-03T10:05:00Z,1,1,,2,,,", "checkpoint", "expected 1 or 0"),
        ("pretrain,vision,2025-06-03T10:05:00Z,1,1,,0,,,int3", "dtype", "unknown dtype"),
        (",vision,2025-06-03T10:05:00Z,1,1,,0,,,", "run_id", "missing"),
        ("pretrain,vision,2025-06-03T10:05:00Z,1,1,,0,0,,", "model_params", "must be above 0"),
    ],
)
def test_each_bad_cell_is_named(tmp_path: Path, row: str, column: str, message: str) -> None:
    path = _write(tmp_path / "bad.csv", row)
    with pytest.raises(CommandError) as failed:
        _ingest(path)
    assert f"row 2, column {column}: {message}" in str(failed.value)
    assert not RunMetricPoint.objects.exists()


def test_the_same_run_and_time_twice_is_refused(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "twice.csv",
        "pretrain,vision,2025-06-03T10:05:00Z,1,1,,0,,,",
        "pretrain,vision,2025-06-03T10:05:00+00:00,2,2,,0,,,",
    )
    with pytest.raises(CommandError, match="row 3, column timestamp: same run_id and timestamp"):
        _ingest(path)


def test_reimporting_a_file_replaces_its_rows_and_keeps_other_files_rows(tmp_path: Path) -> None:
    first = _write(
        tmp_path / "attempt-1.csv",
        "pretrain,vision,2025-06-03T10:05:00Z,50,100,,0,,,",
        "pretrain,vision,2025-06-03T10:15:00Z,100,200,,1,,,",
        "pretrain,vision,2025-06-03T10:25:00Z,150,300,,0,,,",
    )
    second = _write(
        tmp_path / "attempt-2.csv", "pretrain,vision,2025-06-03T11:05:00Z,110,220,,0,,,"
    )
    _ingest(first)
    _ingest(second)
    _write(
        first,
        "pretrain,vision,2025-06-03T10:05:00Z,50,100,,0,,,",
        "pretrain,vision,2025-06-03T10:15:00Z,100,200,,1,,,",
    )
    _ingest(first)
    assert _points() == [(50, 100), (100, 200), (110, 220)]
    # The same bytes again: a no-op (a DUPLICATE batch), the rows unchanged.
    assert "skipped" in _ingest(first)
    assert _points() == [(50, 100), (100, 200), (110, 220)]
    assert TrainingRun.objects.count() == 1


def test_constants_last_non_empty_value_wins_and_naive_times_are_utc(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "m.csv",
        "pretrain,Vision,2025-06-03 10:05:00,1,1,,0,1000,,fp16",
        "pretrain,Vision,2025-06-03T12:15:00+02:00,2,2,,0,2000,9000,",
    )
    _ingest(path)
    run = TrainingRun.objects.get()
    constants = (run.team_slug, run.model_params, run.flops_per_token, run.dtype)
    assert constants == ("vision", 2000, 9000, "fp16")
    times = [p.timestamp.isoformat() for p in RunMetricPoint.objects.order_by("step")]
    assert times == ["2025-06-03T10:05:00+00:00", "2025-06-03T10:15:00+00:00"]


def test_the_ingest_task_runs_on_the_ingest_queue() -> None:
    route = settings.CELERY_TASK_ROUTES["finops.run_metrics.tasks.ingest_run_metrics_batch"]
    assert route == {"queue": "ingest"}


def test_peaks_are_dense_with_a_source() -> None:
    """The DESIGN figures (dense bf16, never the sparsity one) and a source for every entry."""
    dense_bf16 = {"H100": "989", "A100": "312", "H200": "989", "B200": "2250", "L40S": "362"}
    for gpu, tflops in dense_bf16.items():
        peak = peak_flops(gpu, "bf16")
        assert peak is not None, gpu
        assert peak.tflops == Decimal(tflops), gpu
    assert all(p.source for p in PEAKS.values())
    assert peak_flops("A100 80GB", "bf16") == peak_flops("A100-80GB", "bf16")
    assert peak_flops("A10G", "bf16") is None  # AWS g5: no published dense figure
    assert peak_flops("A100", "fp8") is None  # no FP8 tensor cores


def _run(run_id: str) -> RunCost:
    return RunCost.objects.get(run_id=run_id, billing_period="2025-06-01")


def test_metrics_imported_before_the_jobs_join_after_attribution(
    tmp_path: Path, finance_api: APIClient
) -> None:
    metrics = _write(
        tmp_path / "m.csv",
        "pretrain,vision,2025-06-03T10:05:00Z,50,52428800,12800,1,7000000000,,bf16",
        "pretrain,vision,2025-06-03T11:55:00Z,500,524288000,128000,1,,,",
    )
    _month_with_metrics(tmp_path, metrics)
    body = finance_api.get(f"/api/v1/runs/{_run('pretrain').pk}/").json()
    assert body["efficiency"]["useful_tokens"] == 524288000
    # 160 USD / 524.288M tokens; 42e9 x 524,288,000 / (57,600 GPU-s x 989e12) (README.md).
    assert Decimal(body["efficiency"]["cost_per_million_tokens"]) == Decimal(160) / Decimal(
        "524.288"
    )
    assert body["efficiency"]["mfu"] == "0.386545"
    assert finance_api.get(f"/api/v1/runs/{_run('eval').pk}/").json()["efficiency"] is None


def test_a_lead_sees_the_efficiency_of_their_teams_runs_only(
    tmp_path: Path, lead_api: APIClient
) -> None:
    metrics = _write(
        tmp_path / "m.csv",
        "pretrain,vision,2025-06-03T11:55:00Z,500,524288000,128000,1,7000000000,,bf16",
        "eval,speech,2025-06-03T10:25:00Z,10,1000000,,0,1000000,,bf16",
    )
    _month_with_metrics(tmp_path, metrics)
    listed = lead_api.get("/api/v1/runs/", {"month": "2025-06"}).json()["results"]
    assert [(r["run_id"], r["efficiency"]["mfu"]) for r in listed] == [("pretrain", "0.386545")]
    assert lead_api.get(f"/api/v1/runs/{_run('eval').pk}/").status_code == 404


def test_a_given_flops_per_token_and_dtype_set_the_mfu(
    tmp_path: Path, finance_api: APIClient
) -> None:
    """flops_per_token as given (not 6 x model_params) against the H100's dense FP8 peak."""
    metrics = _write(
        tmp_path / "m.csv",
        "pretrain,vision,2025-06-03T11:55:00Z,500,524288000,128000,1,7000000000,50000000000,fp8",
    )
    _month_with_metrics(tmp_path, metrics)
    efficiency = finance_api.get(f"/api/v1/runs/{_run('pretrain').pk}/").json()["efficiency"]
    expected = Decimal(50 * 10**9 * 524288000) / Decimal(57600 * 1979 * 10**12)
    assert Decimal(efficiency["mfu"]) == expected.quantize(Decimal("0.000001"))
    assert efficiency["flops_per_token"] == 50000000000
    assert efficiency["peak_flops_per_gpu"] == "1979000000000000"
    assert "H100" in efficiency["peak_source"]


def test_metrics_without_a_team_join_any_teams_run_and_a_teams_own_win() -> None:
    anyone = TrainingRun.objects.create(team_slug="", run_id="pretrain")
    assert training_runs_matching([("vision", "pretrain"), ("speech", "eval")]) == {
        ("vision", "pretrain"): anyone
    }
    own = TrainingRun.objects.create(team_slug="vision", run_id="pretrain")
    matched = training_runs_matching([("vision", "pretrain"), ("speech", "pretrain")])
    assert matched == {("vision", "pretrain"): own, ("speech", "pretrain"): anyone}
