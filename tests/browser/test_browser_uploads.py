"""Uploads from the Imports page: finance sends a billing export or a job log through the same
Celery path as the commands (size-limited, CSRF-checked); the page polls the batch's progress
(parts done of total, rows) as JSON and updates without reloading; the command line draws a
progress bar. The Chromium test of the polling is at the end."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from celery.result import AsyncResult

import io
import time
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from pytest_django import Settings
from pytest_django.live_server_helper import LiveServer
from selenium.webdriver.remote.webdriver import WebDriver

from billing_ingest.loading.progress import wait_with_progress
from billing_ingest.models import CostLineItem, ImportBatch, ImportBatchPart, JobRecord
from billing_ingest.selectors import batch_progress
from finops.attribution.models import AttributionRun
from tests.builders import FIRST_DUMP, csv_text, focus_row
from tests.ui_screens import screenshot


@pytest.fixture(autouse=True)
def data_dir(settings: Settings, tmp_path: Path) -> Path:
    settings.FINOPS_DATA_DIR = tmp_path / "data"
    return settings.FINOPS_DATA_DIR


def _focus_file(rows: int = 3) -> SimpleUploadedFile:
    text = csv_text([focus_row(ResourceId=f"i-{i}", EffectiveCost="1.5") for i in range(rows)])
    return SimpleUploadedFile("september.csv", text.encode(), content_type="text/csv")


def test_billing_upload_runs_the_import_and_attribution(
    finance_client: Client, data_dir: Path
) -> None:
    response = finance_client.post(
        reverse("web:imports-upload"), {"format": "billing:focus", "file": _focus_file(3)}
    )
    batch = ImportBatch.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/imports/?uploaded={batch.pk}"
    # The same path as ingest_billing: a batch of one part, swapped in, source FORMAT:stem.
    assert (batch.status, batch.source, batch.row_count) == ("succeeded", "focus:september", 3)
    assert batch.parts.count() == 1
    assert CostLineItem.objects.filter(batch=batch).count() == 3
    # The stored file lies under FINOPS_DATA_DIR/uploads, its name kept.
    assert Path(batch.file_name).name == "september.csv"
    assert Path(batch.file_name).is_relative_to(data_dir / "uploads")
    # The month it touched was attributed again.
    assert AttributionRun.objects.filter(billing_period="2024-09-01").exists()
    progress = finance_client.get(reverse("web:imports-progress", args=[batch.pk])).json()
    assert progress["finished"] is True
    assert (progress["parts_done"], progress["parts_total"], progress["rows"]) == (1, 1, 3)
    page = finance_client.get(response["Location"]).content.decode()
    assert f'data-progress-url="/imports/{batch.pk}/progress/"' in page
    assert "/static/finops-imports.js" in page


def test_job_log_upload(finance_client: Client) -> None:
    upload = SimpleUploadedFile("sacct.txt", ("\n".join(FIRST_DUMP) + "\n").encode())
    response = finance_client.post(
        reverse("web:imports-upload"),
        {"format": "jobs:slurm", "file": upload, "cluster": "hpc-east"},
    )
    assert response.status_code == 302
    batch = ImportBatch.objects.get()
    assert (batch.kind, batch.source, batch.status) == ("jobs", "hpc-east", "succeeded")
    assert JobRecord.objects.filter(cluster="hpc-east").count() == batch.row_count > 0


def test_same_file_twice_is_a_duplicate(finance_client: Client) -> None:
    for _ in range(2):
        finance_client.post(
            reverse("web:imports-upload"), {"format": "billing:focus", "file": _focus_file(2)}
        )
    assert list(ImportBatch.objects.order_by("id").values_list("status", flat=True)) == [
        "succeeded",
        "duplicate",
    ]


def test_file_over_the_limit_is_refused(finance_client: Client, settings: Settings) -> None:
    settings.FINOPS_UPLOAD_MAX_BYTES = 100
    response = finance_client.post(
        reverse("web:imports-upload"), {"format": "billing:focus", "file": _focus_file(3)}
    )
    assert response.status_code == 400
    assert "uploads are limited to 100\u00a0bytes" in response.content.decode()
    assert not ImportBatch.objects.exists()


def test_request_far_over_the_limit_is_refused_before_reading(
    finance_client: Client, settings: Settings
) -> None:
    settings.FINOPS_UPLOAD_MAX_BYTES = 10
    big = SimpleUploadedFile("big.csv", b"x" * (200 * 1024))
    response = finance_client.post(
        reverse("web:imports-upload"), {"format": "billing:focus", "file": big}
    )
    assert response.status_code == 413
    assert "FINOPS_UPLOAD_MAX_BYTES" in response.content.decode()
    assert not ImportBatch.objects.exists()


def test_upload_needs_the_csrf_token(finance_user: User) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(finance_user)
    response = client.post(
        reverse("web:imports-upload"), {"format": "billing:focus", "file": _focus_file()}
    )
    assert response.status_code == 403
    assert not ImportBatch.objects.exists()


def test_unknown_format_is_a_form_error(finance_client: Client) -> None:
    response = finance_client.post(
        reverse("web:imports-upload"), {"format": "billing:excel", "file": _focus_file()}
    )
    assert response.status_code == 400
    assert 'data-testid="upload-error-format"' in response.content.decode()


def test_team_leads_cannot_upload_or_poll(client: Client, lead_user: User) -> None:
    client.force_login(lead_user)
    response = client.post(
        reverse("web:imports-upload"), {"format": "billing:focus", "file": _focus_file()}
    )
    assert response.status_code == 403
    assert client.get(reverse("web:imports-progress", args=[1])).status_code == 403
    assert not ImportBatch.objects.exists()


def _running_batch(parts: int) -> ImportBatch:
    batch = ImportBatch.objects.create(
        kind="billing", format="focus", source="s", file_name="f", status="running"
    )
    for i in range(parts):
        ImportBatchPart.objects.create(batch=batch, index=i, file_name=f"part-{i}")
    return batch


def _finish_part(batch: ImportBatch, index: int, rows: int) -> None:
    ImportBatchPart.objects.filter(batch=batch, index=index).update(
        status="succeeded", row_count=rows
    )


def test_progress_counts_finished_parts_and_their_rows(db: None) -> None:
    batch = _running_batch(3)
    _finish_part(batch, 0, 1200)
    ImportBatchPart.objects.filter(batch=batch, index=1).update(status="failed")
    progress = batch_progress(batch_id=batch.pk)
    assert progress is not None
    assert progress is not None
    assert (progress.parts_done, progress.parts_total, progress.rows) == (2, 3, 1200)
    assert progress.finished is False
    assert batch_progress(batch_id=batch.pk + 1) is None


class _SlowResult:
    """A chord result that becomes ready once a part has finished between polls."""

    def __init__(self, on_poll: Callable[[int], None]) -> None:
        self.polls = 0
        self.on_poll = on_poll

    def ready(self) -> bool:
        self.polls += 1
        self.on_poll(self.polls)
        return self.polls > 3

    def get(self, timeout: float) -> dict[str, str]:
        return {"status": "succeeded"}


def test_command_line_progress_bar(db: None) -> None:
    batch = _running_batch(3)

    def on_poll(polls: int) -> None:
        if polls <= 3:
            _finish_part(batch, polls - 1, 1000 * polls)

    out = io.StringIO()
    result = wait_with_progress(
        cast("AsyncResult[Any]", _SlowResult(on_poll)),
        batch_id=batch.pk,
        timeout=30,
        label=f"batch {batch.pk}",
        out=out,
        show=True,
        poll_seconds=0,
    )
    assert result == {"status": "succeeded"}
    text = out.getvalue()
    # 1,000 + 2,000 + 3,000 rows from the three parts.
    assert "3/3" in text
    assert "6,000 rows" in text


def test_no_bar_when_not_asked(db: None) -> None:
    batch = _running_batch(1)
    out = io.StringIO()
    wait_with_progress(
        cast("AsyncResult[Any]", _SlowResult(lambda polls: None)), batch_id=batch.pk,
        timeout=5, label="x", out=out, show=False,
    )  # fmt: skip
    assert out.getvalue() == ""


@pytest.mark.worker
def test_upload_runs_on_the_worker_and_the_request_does_not_wait(
    celery_worker_process: Path, finance_user: User
) -> None:
    """CI's PostgreSQL + Redis pass: the upload returns at once; the worker loads the part,
    swaps the batch in and queues the attribution of its month, while the page polls."""
    client = Client()
    client.force_login(finance_user)
    response = client.post(
        reverse("web:imports-upload"), {"format": "billing:focus", "file": _focus_file(4)}
    )
    assert response.status_code == 302
    batch = ImportBatch.objects.get()
    url = reverse("web:imports-progress", args=[batch.pk])
    deadline = time.monotonic() + 120
    progress = client.get(url).json()
    while not progress["finished"] and time.monotonic() < deadline:
        time.sleep(0.5)
        progress = client.get(url).json()
    assert (progress["status"], progress["rows"], progress["parts_done"]) == ("succeeded", 4, 1)
    while time.monotonic() < deadline:
        if AttributionRun.objects.filter(billing_period="2024-09-01", status="succeeded").exists():
            break
        time.sleep(0.5)
    else:
        pytest.fail("the uploaded month was not attributed on the worker")
    log = celery_worker_process.read_text()
    # The settled batch woke the pipeline on the worker, whose first step attributes the month.
    assert "finish_billing_batch" in log
    assert "run_step" in log


@pytest.mark.browser
def test_upload_progress_updates_without_reloading(
    browser: WebDriver, live_server: LiveServer, finance_user: User
) -> None:
    """A batch loading on workers (parts finished here, between polls): the panel's counts
    change while the page stays the same document."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from tests.chromium import _login

    batch = _running_batch(3)
    _login(browser, live_server.url, "fin", "fin-password-123")
    browser.get(f"{live_server.url}/imports/?uploaded={batch.pk}")
    browser.execute_script("window.__samePage = true;")
    parts = browser.find_element(By.CSS_SELECTOR, "[data-testid=progress-parts]")
    WebDriverWait(browser, 10).until(lambda d: parts.text == "0 of 3 parts")
    _finish_part(batch, 0, 1500)
    WebDriverWait(browser, 10).until(lambda d: parts.text == "1 of 3 parts")
    rows = browser.find_element(By.CSS_SELECTOR, "[data-testid=progress-rows]")
    assert rows.text == "1,500 rows"
    screenshot(browser, "upload-progress-running")
    _finish_part(batch, 1, 500)
    _finish_part(batch, 2, 1000)
    ImportBatch.objects.filter(id=batch.pk).update(status="succeeded", row_count=3000)
    status = browser.find_element(By.CSS_SELECTOR, "[data-testid=progress-status]")
    WebDriverWait(browser, 10).until(lambda d: status.text == "succeeded")
    assert parts.text == "3 of 3 parts"
    assert rows.text == "3,000 rows"
    assert browser.execute_script("return window.__samePage === true;")
    screenshot(browser, "upload-progress-done")


@pytest.mark.browser
def test_the_batch_table_follows_the_progress_without_reloading(
    browser: WebDriver, live_server: LiveServer, finance_user: User
) -> None:
    """The table drawn at page load said `running` after the card said `succeeded` (review
    defect 2): its row follows the progress, and once the import has finished the table shows
    what a reload would, the earlier batch it superseded included."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from tests.chromium import _login

    earlier = ImportBatch.objects.create(
        kind="billing", format="focus", source="s", file_name="f", status="succeeded"
    )
    batch = _running_batch(2)
    _login(browser, live_server.url, "fin", "fin-password-123")
    browser.get(f"{live_server.url}/imports/?uploaded={batch.pk}")
    browser.execute_script("window.__samePage = true;")

    def cell(batch_id: int, name: str) -> str:
        # One script reads the cell: the page replaces the table body when the import ends, so
        # a found element can go stale before its text is read (CI failed on that race).
        selector = f"tr[data-batch-id='{batch_id}'] [data-cell={name}]"
        script = "const c = document.querySelector(arguments[0]); return c ? c.innerText : null;"
        return str(browser.execute_script(script, selector)).strip()

    assert cell(batch.pk, "status") == "running"
    _finish_part(batch, 0, 1500)
    WebDriverWait(browser, 10).until(lambda d: cell(batch.pk, "rows") == "1,500")
    assert cell(batch.pk, "status") == "running"
    _finish_part(batch, 1, 500)
    ImportBatch.objects.filter(id=earlier.pk).update(status="superseded")
    ImportBatch.objects.filter(id=batch.pk).update(
        status="succeeded", row_count=2000, billing_periods=["2025-09"]
    )
    WebDriverWait(browser, 10).until(lambda d: cell(batch.pk, "status") == "succeeded")
    WebDriverWait(browser, 10).until(lambda d: cell(earlier.pk, "status") == "superseded")
    status = browser.find_element(By.CSS_SELECTOR, "[data-testid=progress-status]")
    assert status.text == "succeeded"
    assert cell(batch.pk, "rows") == "2,000"
    assert cell(batch.pk, "periods") == "2025-09"
    badge = f"tr[data-batch-id='{batch.pk}'] .status-succeeded"
    assert browser.find_elements(By.CSS_SELECTOR, badge)
    assert browser.execute_script("return window.__samePage === true;")
    screenshot(browser, "imports-table-follows-progress")


def test_progress_error_names_the_file_without_server_folders(db: None) -> None:
    """The progress card shows the error as the batches table does (public_error)."""
    batch = ImportBatch.objects.create(
        kind="billing", format="focus", source="s", file_name="f", status="failed",
        error="/srv/finops/data/uploads/ab12/september.csv: row 3: bad EffectiveCost",
    )  # fmt: skip
    progress = batch_progress(batch_id=batch.pk)
    assert progress is not None
    assert progress.error == batch.public_error
    assert "september.csv: row 3" in progress.error
    assert "/srv/finops" not in progress.error


def test_a_job_log_without_its_cluster_is_refused(finance_client: Client) -> None:
    upload = SimpleUploadedFile("sacct.txt", ("\n".join(FIRST_DUMP) + "\n").encode())
    response = finance_client.post(
        reverse("web:imports-upload"), {"format": "jobs:slurm", "file": upload}
    )
    assert response.status_code == 400
    assert "A job log needs the cluster its jobs ran on" in response.content.decode()
    assert not ImportBatch.objects.exists()


_RUN_METRICS = Path(__file__).resolve().parents[2] / "fixtures" / "run_metrics"


def test_run_metrics_upload(finance_client: Client) -> None:
    from finops.run_metrics.models import TrainingRun

    log = (_RUN_METRICS / "torchtitan-pretrain-attempt-1.log").read_bytes()
    form = {"format": "metrics:torchtitan", "file": SimpleUploadedFile("attempt-1.log", log)}
    response = finance_client.post(reverse("web:imports-upload"), form)
    assert response.status_code == 400
    assert "A torchtitan file names no run: give its run id." in response.content.decode()
    form = {"format": "metrics:torchtitan", "file": SimpleUploadedFile("attempt-1.log", log),
            "run_id": "pretrain", "team": "vision", "model_params": "7000000000"}  # fmt: skip
    response = finance_client.post(reverse("web:imports-upload"), form)
    assert response.status_code == 302
    batch = ImportBatch.objects.get()
    assert (batch.kind, batch.status, batch.row_count) == ("run_metrics", "succeeded", 5)
    run = TrainingRun.objects.get()
    assert (run.team_slug, run.run_id, run.model_params) == ("vision", "pretrain", 7_000_000_000)
    # The MLflow export names its run itself.
    export = _RUN_METRICS / "mlflow-export" / "pretrain" / "run.json"
    form = {"format": "metrics:mlflow",
            "file": SimpleUploadedFile("run.json", export.read_bytes())}  # fmt: skip
    assert finance_client.post(reverse("web:imports-upload"), form).status_code == 302
    assert ImportBatch.objects.order_by("-id").first().status == "succeeded"  # type: ignore[union-attr]
