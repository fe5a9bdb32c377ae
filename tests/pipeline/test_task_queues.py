"""Queues by task type: ingest, attribution, notifications. Every task lands on a queue that
the documented workers consume; eager runs ignore the routes; CI runs one worker per group."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings

from finops.celery import app as celery_app
from tests.conftest import WORKER_QUEUE_GROUPS

QUEUES = {"ingest", "attribution", "notifications"}


def _queue_of(task_name: str) -> str:
    return celery_app.amqp.router.route({}, task_name)["queue"].name


def _project_tasks() -> list[str]:
    celery_app.loader.import_default_modules()
    return sorted(n for n in celery_app.tasks if not n.startswith("celery."))


def test_the_queues_are_the_three_task_types() -> None:
    assert set(settings.FINOPS_TASK_QUEUES) == QUEUES
    assert settings.CELERY_TASK_DEFAULT_QUEUE in QUEUES


def test_every_project_task_is_on_a_consumed_queue() -> None:
    tasks = _project_tasks()
    assert len(tasks) >= 15
    consumed = {q for group in WORKER_QUEUE_GROUPS.values() for q in group.split(",")}
    assert consumed == QUEUES
    for name in tasks:
        assert _queue_of(name) in consumed, name


@pytest.mark.parametrize(
    ("task", "queue"),
    [
        ("billing_ingest.tasks.billing.ingest_billing_part", "ingest"),
        ("billing_ingest.tasks.billing.finish_billing_batch", "ingest"),
        ("billing_ingest.tasks.jobs.ingest_jobs_batch", "ingest"),
        ("billing_ingest.tasks.sources.fetch_billing_source", "ingest"),
        ("finops.inference.tasks.ingest_inference_batch", "ingest"),
        ("finops.attribution.tasks.attribute_month", "attribution"),
        ("finops.inference.tasks.rebuild_endpoint_costs", "attribution"),
        ("finops.economics.tasks.refresh_run_economics", "attribution"),
        ("finops.economics.tasks.refresh_run_economics_of_runs", "attribution"),
        ("finops.anomalies.tasks.detect_anomalies_for_month", "attribution"),
        ("finops.notifications.tasks.send_notification", "notifications"),
        ("finops.notifications.tasks.resend_unsent_notifications", "notifications"),
        ("finops.anomalies.tasks.send_anomaly_digests", "notifications"),
    ],
)
def test_task_types_go_to_their_queue(task: str, queue: str) -> None:
    assert _queue_of(task) == queue


def test_an_unrouted_task_goes_to_a_consumed_queue() -> None:
    assert _queue_of("finops.somewhere.tasks.new_task") == "attribution"


def test_beat_schedules_name_routed_tasks() -> None:
    for entry in celery_app.conf.beat_schedule.values():
        assert entry["task"] in _project_tasks()
        assert _queue_of(entry["task"]) in QUEUES


def test_eager_runs_ignore_the_routes(db: None) -> None:
    """No broker: the task runs in-process whatever its queue (the embedded default)."""
    from finops.notifications.tasks import resend_unsent_notifications
    from finops.pipeline.tasks import pipeline_open_months

    assert celery_app.conf.task_always_eager
    assert resend_unsent_notifications.delay().get(timeout=5) == 0
    assert isinstance(pipeline_open_months.delay().get(timeout=5), list)


@pytest.mark.worker
def test_two_workers_consume_their_queue_groups(celery_worker_process: Path) -> None:
    from finops.notifications.tasks import resend_unsent_notifications
    from finops.pipeline.tasks import pipeline_open_months

    replies = celery_app.control.inspect(timeout=2).active_queues()
    assert replies is not None
    consumed = {
        # Node names are "<group>-<unique>@host" (tests/conftest.py worker_start).
        worker.split("@")[0].rsplit("-", 1)[0]: {q["name"] for q in queues}
        for worker, queues in replies.items()
    }
    assert consumed == {name: set(group.split(",")) for name, group in WORKER_QUEUE_GROUPS.items()}
    # A task of each group completes: the notifications one can only have run on `compute`.
    assert resend_unsent_notifications.delay().get(timeout=60) == 0
    assert isinstance(pipeline_open_months.delay().get(timeout=60), list)
    log = celery_worker_process.read_text()
    assert "resend_unsent_notifications" in log
    assert "finops.pipeline.open_months" in log
