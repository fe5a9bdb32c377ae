"""Celery's settings (part of finops.settings, which imports every name here): the broker, eager
runs without one, acknowledgement and redelivery, time limits, and the queues tasks are routed
to (docs/running-at-scale.md). Read from the environment as the rest of the settings are."""

import environ

__all__ = [
    "CELERY_BROKER_TRANSPORT_OPTIONS",
    "CELERY_BROKER_URL",
    "CELERY_RESULT_BACKEND",
    "CELERY_TASK_ACKS_LATE",
    "CELERY_TASK_ALWAYS_EAGER",
    "CELERY_TASK_DEFAULT_QUEUE",
    "CELERY_TASK_EAGER_PROPAGATES",
    "CELERY_TASK_REJECT_ON_WORKER_LOST",
    "CELERY_TASK_ROUTES",
    "CELERY_TASK_SOFT_TIME_LIMIT",
    "CELERY_TASK_TIME_LIMIT",
    "CELERY_TIMEZONE",
    "CELERY_WORKER_PREFETCH_MULTIPLIER",
    "FINOPS_TASK_QUEUES",
]

env = environ.Env()

# Celery: no broker configured means eager, in-process execution (the embedded default).
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="")
CELERY_TASK_ALWAYS_EAGER = not CELERY_BROKER_URL
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_RESULT_BACKEND = env.str(
    "CELERY_RESULT_BACKEND", default=CELERY_BROKER_URL if CELERY_BROKER_URL else "cache+memory://"
)
# A task is acknowledged when it ends, and a worker that died (SIGKILL, OOM, lost node) leaves
# it to be delivered again: every task is idempotent, so the redelivery finishes the work.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = env.int("CELERY_TASK_TIME_LIMIT", default=3600)
CELERY_TASK_SOFT_TIME_LIMIT = env.int("CELERY_TASK_SOFT_TIME_LIMIT", default=3300)
# Redis (and SQS) redeliver a message not acknowledged within the visibility timeout, even to a
# second worker while the first still runs it: it must outlast the longest hard time limit,
# fetch_billing_source's 2 h 5 min (tests/pipeline/test_pipeline.py checks every task). A dead
# worker is found long before by its heartbeat; the redelivery only finishes what it left.
_visibility_timeout = env.int("CELERY_VISIBILITY_TIMEOUT", default=3 * 3600)
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": _visibility_timeout,
    # Redis only redelivers when a worker sweeps the unacknowledged messages: kombu sweeps at
    # start, then on every 10th tick of 10 s, so a message came back up to 100 s after its
    # timeout. Sweeping on every tick, ticks at most a quarter of the timeout apart, brings it
    # back within 1.25 x the timeout, a short one too (the crash tests use 6 s).
    "unacked_restore_interval": max(1, min(10, _visibility_timeout // 4)),
    "unacked_restore_throttle": 1,
}
CELERY_TIMEZONE = "UTC"
# Queues by task type, so that a big ingest never delays an alert or an attribution: workers
# are started per queue (docs/running-at-scale.md). Eager runs (no broker) ignore routes.
# A task not routed here goes to the default queue, attribution (compute work).
FINOPS_TASK_QUEUES = ("ingest", "attribution", "notifications")
CELERY_TASK_DEFAULT_QUEUE = "attribution"
CELERY_TASK_ROUTES = {
    # Exact names first: Celery tries them before the patterns.
    "finops.inference.tasks.ingest_inference_batch": {"queue": "ingest"},
    "finops.run_metrics.tasks.ingest_run_metrics_batch": {"queue": "ingest"},
    "finops.energy.tasks.ingest_energy_file": {"queue": "ingest"},
    "finops.energy.tasks.fetch_energy_all": {"queue": "ingest"},
    "finops.anomalies.tasks.send_anomaly_digests": {"queue": "notifications"},
    "billing_ingest.tasks.*": {"queue": "ingest"},
    "finops.currency.tasks.*": {"queue": "ingest"},
    "finops.notifications.tasks.*": {"queue": "notifications"},
    "finops.attribution.tasks.*": {"queue": "attribution"},
    "finops.inference.tasks.*": {"queue": "attribution"},
    "finops.economics.tasks.*": {"queue": "attribution"},
    "finops.anomalies.tasks.*": {"queue": "attribution"},
}
