"""Faults injected into a real worker on PostgreSQL: kill -9 at COPY, at COMMIT and during
attribution; the database connection dropped during COPY and during attribution. Each ends
correct (reconciliation difference 0) or failed with the previous data intact and a message that
says the worker died, found within seconds by heartbeat (short settings here), not after the
broker's visibility timeout. The broker down when work is queued: tests/pipeline/test_pipeline.py.

The worker reads FINOPS_FAULT_INJECT (finops/core/faults.py): "copy" kills it with SIGKILL
when a part's rows are COPYed but not committed, "commit" right after the part committed (its
task not acknowledged), "attribute" when a month's inputs are loaded; ":sleep=N" pauses there
instead, so this test can pg_terminate_backend the worker's connection. FINOPS_FAULT_ONCE makes
each fault fire once, so the redelivered or retried task then runs normally.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from billing_ingest.models import CostLineItem, ImportBatch
from billing_ingest.services.billing import BillingFile, billing_batch_create
from billing_ingest.services.dispatch import billing_batch_dispatch
from finops.attribution.models import AllocatedCost, AttributionRun
from finops.attribution.selectors.reconciliation import reconciliation_for_month
from finops.celery import app as celery_app
from finops.pipeline.models import PipelineRun
from tests.conftest import worker_start, worker_stop

pytestmark = pytest.mark.worker

MAY = "2025-05"
HEARTBEAT_TIMEOUT = 3.0
HEADER = (
    "BillingAccountId,BillingCurrency,BillingPeriodStart,BillingPeriodEnd,ChargeCategory,"
    "ChargePeriodStart,ChargePeriodEnd,ProviderName,ResourceName,ServiceName,BilledCost,"
    "EffectiveCost"
)


def _bill(path: Path, costs: list[str]) -> Path:
    rows = [
        f"1,USD,2025-05-01T00:00:00Z,2025-06-01T00:00:00Z,Usage,2025-05-02T{h:02d}:00:00Z,"
        f"2025-05-02T{h + 1:02d}:00:00Z,AWS,vol-1,S3,{cost},{cost}"
        for h, cost in enumerate(costs)
    ]
    path.write_text(HEADER + "\n" + "\n".join(rows) + "\n")
    return path


def _ingest(path: Path, *extra: str) -> None:
    call_command("ingest_billing", "--format", "focus", str(path), "--source", "acme", *extra)


@pytest.fixture
def fault(request: pytest.FixtureRequest) -> str:
    return str(getattr(request, "param", ""))


@pytest.fixture
def fired(tmp_path: Path) -> Path:
    """Created by the worker when its fault fires (FINOPS_FAULT_ONCE)."""
    return tmp_path / "fault-fired"


@pytest.fixture
def worker_env(fault: str, fired: Path) -> dict[str, str]:
    # Short heartbeats and retries; a visibility timeout short enough that a message of the
    # killed worker is delivered again to the next one within seconds (the tasks here run for
    # well under it).
    return {
        "FINOPS_FAULT_INJECT": fault,
        "FINOPS_FAULT_ONCE": str(fired),
        "FINOPS_WORKER_HEARTBEAT_SECONDS": "0.5",
        "FINOPS_WORKER_HEARTBEAT_TIMEOUT": str(HEARTBEAT_TIMEOUT),
        "FINOPS_PIPELINE_RETRY_SECONDS": "0.5",
        "CELERY_VISIBILITY_TIMEOUT": "6",
    }


@pytest.fixture(autouse=True)
def fast_settings(settings: Any) -> None:
    settings.FINOPS_WORKER_HEARTBEAT_TIMEOUT = HEARTBEAT_TIMEOUT
    settings.FINOPS_COMMAND_POLL_SECONDS = 0.3


@pytest.fixture
def next_worker(tmp_path: Path, worker_env: dict[str, str]) -> Iterator[Callable[[], None]]:
    """Start a second worker (the first was killed); stopped at the end."""
    started: list[Any] = []

    def start() -> None:
        started.append(worker_start(worker_env, tmp_path / "worker-2.log"))

    yield start
    for worker in started:
        worker_stop(worker)


def _eagerly(fn: Callable[[], None]) -> None:
    """Prepare previous data in this process (committed: transactional_db)."""
    celery_app.conf.task_always_eager = True
    try:
        fn()
    finally:
        celery_app.conf.task_always_eager = False


def _wait_for(predicate: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _month_balanced(billed: str) -> None:
    recon = reconciliation_for_month(month=_first(MAY))
    assert recon.total.amortised == Decimal(billed)
    assert recon.total.difference == 0
    assert not recon.stale, recon.stale_reason


def _first(month: str) -> Any:
    import datetime as dt

    return dt.date(int(month[:4]), int(month[5:]), 1)


def _pipeline_succeeded_after(run_id: int) -> bool:
    return PipelineRun.objects.filter(
        id__gt=run_id, month=_first(MAY), status=PipelineRun.Status.SUCCEEDED
    ).exists()


def _last_run_id() -> int:
    last = PipelineRun.objects.order_by("-id").first()
    return last.pk if last is not None else 0


@pytest.mark.parametrize("fault", ["copy"], indirect=True)
def test_kill_at_copy_fails_the_batch_within_seconds_and_keeps_the_month(
    celery_worker_process: Path, tmp_path: Path, next_worker: Callable[[], None]
) -> None:
    _eagerly(lambda: _ingest(_bill(tmp_path / "v1.csv", ["50.00", "30.00"])))
    _month_balanced("80")

    started = time.monotonic()
    with pytest.raises(CommandError, match="worker died / no heartbeat since"):
        _ingest(_bill(tmp_path / "v2.csv", ["60.00", "35.00"]))
    waited = time.monotonic() - started
    assert waited < HEARTBEAT_TIMEOUT + 15, waited  # minutes in production, not the hour
    failed = ImportBatch.objects.order_by("-id").first()
    assert failed is not None
    assert failed.status == "failed"
    assert failed.error.startswith("worker died")
    assert not CostLineItem.objects.filter(batch=failed).exists()
    _month_balanced("80")  # the previous data, intact

    # The killed part is delivered again to the next worker: it finds its batch failed and
    # loads nothing. Importing the same file again then succeeds and is attributed.
    next_worker()
    before = _last_run_id()
    _ingest(_bill(tmp_path / "v2.csv", ["60.00", "35.00"]))
    _wait_for(lambda: _pipeline_succeeded_after(before), 60, "the pipeline of the re-import")
    _month_balanced("95")
    assert not CostLineItem.objects.filter(batch=failed).exists()


@pytest.mark.parametrize("fault", ["commit"], indirect=True)
def test_kill_at_commit_the_redelivered_part_settles_and_re_attributes(
    celery_worker_process: Path, tmp_path: Path, fired: Path, next_worker: Callable[[], None]
) -> None:
    _eagerly(lambda: _ingest(_bill(tmp_path / "v1.csv", ["50.00", "30.00"])))
    before = _last_run_id()
    path = _bill(tmp_path / "v2.csv", ["60.00", "35.00"])
    batch = billing_batch_create(
        format="focus", source="acme", files=[BillingFile(path.resolve(), path.name)]
    )
    billing_batch_dispatch(batch_id=batch.pk)
    _wait_for(fired.exists, 30, "the worker to reach the part's commit")
    time.sleep(1)
    batch.refresh_from_db()
    # The part committed, but nobody settled the batch: its rows are not the bill yet.
    assert batch.status == "running"
    assert batch.parts.get().status == "succeeded"
    assert reconciliation_for_month(month=_first(MAY)).total.amortised == Decimal("80")

    # Nobody runs the command or the watchdog: the broker delivers the part again to the next
    # worker, which settles the batch, and settling starts the pipeline.
    next_worker()
    _wait_for(lambda: _pipeline_succeeded_after(before), 90, "the redelivered part's pipeline")
    batch.refresh_from_db()
    assert batch.status == "succeeded"
    _month_balanced("95")


@pytest.mark.parametrize("fault", ["attribute"], indirect=True)
def test_kill_during_attribution_is_reported_and_the_ledger_kept(
    celery_worker_process: Path, tmp_path: Path, next_worker: Callable[[], None]
) -> None:
    _eagerly(lambda: _ingest(_bill(tmp_path / "v1.csv", ["50.00", "30.00"])))
    _eagerly(lambda: _ingest(_bill(tmp_path / "v2.csv", ["60.00", "35.00"]), "--no-attribute"))

    started = time.monotonic()
    with pytest.raises(CommandError, match="worker died / no heartbeat since"):
        call_command("attribute", "--month", MAY)
    assert time.monotonic() - started < HEARTBEAT_TIMEOUT + 15
    dead = AttributionRun.objects.order_by("-id").first()
    assert dead is not None
    assert dead.status == "failed"
    assert dead.error.startswith("worker died")
    run = PipelineRun.objects.order_by("-id").first()
    assert run is not None
    assert run.status == "failed"
    assert "worker died" in run.error
    # The previous ledger is intact, and the page and API say the month is not final.
    ledger = sum(AllocatedCost.objects.values_list("amount", flat=True), Decimal(0))
    assert ledger == Decimal("80")
    recon = reconciliation_for_month(month=_first(MAY))
    assert recon.stale
    assert "failed" in recon.stale_reason
    assert recon.total.difference == Decimal("15")

    next_worker()
    call_command("attribute", "--month", MAY)
    _month_balanced("95")


def _drop_worker_connection(fired: Path) -> None:
    """Wait for the worker to pause at its fault point, then terminate its database backend
    (the one inside a transaction; this process and the heartbeat threads are idle)."""
    _wait_for(fired.exists, 60, "the worker to reach the fault point")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = "
            "current_database() AND pid <> pg_backend_pid() AND state = 'idle in transaction'"
        )
        assert cursor.fetchall(), "no worker transaction to drop"


def _in_thread(fn: Callable[[], object]) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, errors


@pytest.mark.parametrize("fault", ["copy:sleep=3"], indirect=True)
def test_connection_dropped_during_copy_is_retried_and_the_import_succeeds(
    celery_worker_process: Path, tmp_path: Path, fired: Path
) -> None:
    _eagerly(lambda: _ingest(_bill(tmp_path / "v1.csv", ["50.00", "30.00"])))
    before = _last_run_id()
    thread, errors = _in_thread(lambda: _ingest(_bill(tmp_path / "v2.csv", ["60.00", "35.00"])))
    _drop_worker_connection(fired)
    thread.join(timeout=120)
    assert not thread.is_alive(), errors
    assert not errors, errors
    batch = ImportBatch.objects.order_by("-id").first()
    assert batch is not None
    assert batch.status == "succeeded"
    assert batch.row_count == 2
    assert "Retry" in celery_worker_process.read_text()  # the part was retried on the worker
    _wait_for(lambda: _pipeline_succeeded_after(before), 60, "the pipeline of the import")
    _month_balanced("95")


@pytest.mark.parametrize("fault", ["attribute:sleep=3"], indirect=True)
def test_connection_dropped_during_attribution_is_retried_and_the_month_balances(
    celery_worker_process: Path, tmp_path: Path, fired: Path
) -> None:
    _eagerly(lambda: _ingest(_bill(tmp_path / "v1.csv", ["50.00", "30.00"]), "--no-attribute"))
    thread, errors = _in_thread(lambda: call_command("attribute", "--month", MAY))
    _drop_worker_connection(fired)
    thread.join(timeout=120)
    assert not thread.is_alive(), errors
    assert not errors, errors
    runs = list(AttributionRun.objects.order_by("id").values_list("status", "error"))
    assert [status for status, _ in runs] == ["failed", "succeeded"]
    assert "OperationalError" in runs[0][1]
    step = PipelineRun.objects.get().steps.get(key="attribute")
    assert (step.status, step.attempts) == ("succeeded", 2)
    _month_balanced("80")
