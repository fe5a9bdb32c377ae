"""The Celery application and, in one place, every periodic schedule.

Without CELERY_BROKER_URL the tasks run eagerly in-process (the embedded default for a first
run); with a broker they run on real workers. Beat schedules live here and nowhere else so that
what runs when is reviewable in one file.
"""

import os

from celery import Celery
from celery.schedules import crontab

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "finops.settings")

app = Celery("finops")
app.config_from_object("django.conf:settings", namespace="CELERY")
if not app.conf.broker_url:
    # The embedded default runs tasks eagerly and never connects; an empty broker URL would
    # still make kombu print "No hostname was supplied" on every command. Eagerness follows
    # CELERY_BROKER_URL (settings), which stays empty.
    app.conf.update(broker_url="memory://localhost/")
app.autodiscover_tasks()

# Each entry: crontab + expires, and why it runs when it does.
app.conf.beat_schedule = {
    # Providers restate the current and previous month for weeks; running both months' pipeline
    # (attribute, endpoint costs, ...) every night keeps the ledger in step with the newest
    # imports. Expires before the next run so a backlog never piles up duplicate work.
    "attribute-open-months-nightly": {
        "task": "finops.pipeline.open_months",
        "schedule": crontab(minute=30, hour=3),
        "options": {"expires": 6 * 3600},
    },
    # A worker killed mid-task (kill -9, OOM, a lost node) leaves its import batch, attribution
    # run or pipeline run "running", and Redis redelivers its message only after the visibility
    # timeout (hours). Every 2 minutes the watchdog fails those whose heartbeat stopped more
    # than FINOPS_WORKER_HEARTBEAT_TIMEOUT ago (their previous data intact), starts a dead
    # pipeline run again, and starts the pipeline for settled months whose wake-up was lost.
    # Expires before the next run: one sweep at a time is enough.
    "pipeline-watchdog-every-2-minutes": {
        "task": "finops.pipeline.watchdog",
        "schedule": crontab(minute="*/2"),
        "options": {"expires": 100},
    },
    # The Kubernetes API only shows pods that still exist: a finished pod is deleted (by its Job's
    # TTL, a CronJob's history limit, or the pod garbage collector) soon after it ends, and its
    # end time goes with it. Snapshotting every 15 minutes catches pods in their final state, so
    # the running record from the last snapshot is closed with the real end time. One dispatcher
    # fans out a fetch per cluster with an API connection; it expires before the next run, and
    # each fetch's time limit is shorter than the period, so scheduled snapshots of a cluster
    # do not overlap (an older one imported last would reopen a finished pod).
    "fetch-kubernetes-pods-every-15-minutes": {
        "task": "billing_ingest.tasks.kubernetes.fetch_kubernetes_pods_all",
        "schedule": crontab(minute="*/15"),
        "options": {"expires": 10 * 60},
    },
    # AWS refreshes a month's CUR 2.0 / FOCUS export up to several times a day, Azure its
    # exports daily or more, and both restate past months for weeks. Fetching every 6 hours picks
    # each restatement up within hours; a delivery seen before is a duplicate and changes
    # nothing. Minute 17 keeps it off the quarter hours the other schedules use. Expires
    # before the next run, so a backlog never queues two dispatches; the claim on each source
    # keeps a slow fetch and the next one from fetching the same export together.
    "fetch-billing-sources-every-6-hours": {
        "task": "billing_ingest.tasks.sources.fetch_billing_sources_all",
        "schedule": crontab(minute=17, hour="*/6"),
        "options": {"expires": 5 * 3600},
    },
    # GPU energy from each configured Prometheus server (FINOPS_ENERGY_PROMETHEUS), daily over
    # the last FINOPS_ENERGY_WINDOW_DAYS (pages and the API join it at read time); nothing
    # configured: the task does nothing. Expires before the next day's run.
    "fetch-energy-daily": {
        "task": "finops.energy.tasks.fetch_energy_all",
        "schedule": crontab(minute=10, hour=3),
        "options": {"expires": 20 * 3600},
    },
    # A snapshot file is the whole pod list, written every 15 minutes per cluster: kept a week
    # (FINOPS_KUBERNETES_SNAPSHOT_DAYS) for audit, then deleted before the disk fills. Daily at
    # a quiet hour, after the nightly attribution; expires before the next day's run.
    "prune-kubernetes-snapshots-daily": {
        "task": "billing_ingest.tasks.kubernetes.prune_kubernetes_snapshots",
        "schedule": crontab(minute=40, hour=4),
        "options": {"expires": 20 * 3600},
    },
    # An email whose SMTP server was down past its task's retries, or whose worker died, stays
    # unsent in the outbox; every 30 minutes those are queued again (each send claims its row
    # first, so one in flight is not sent twice). Expires before the next run.
    "resend-unsent-emails-every-30-minutes": {
        "task": "finops.notifications.tasks.resend_unsent_notifications",
        "schedule": crontab(minute="5,35"),
        "options": {"expires": 25 * 60},
    },
    # Anomalies: the pipeline evaluates a month right after its attribution; this daily run
    # after the nightly re-attribution (03:30) picks up restatements and moves ongoing level
    # shifts on by a day. Idempotent; expires before the next day's run.
    "detect-anomalies-daily": {
        "task": "finops.anomalies.tasks.detect_anomalies_recent",
        "schedule": crontab(minute=20, hour=5),
        "options": {"expires": 20 * 3600},
    },
    # Digest readers get yesterday's (UTC) anomalies once, in the morning after the detection
    # run. Each digest's outbox key is per user and day, so a re-run sends nothing twice.
    "send-anomaly-digests-daily": {
        "task": "finops.anomalies.tasks.send_anomaly_digests",
        "schedule": crontab(minute=0, hour=7),
        "options": {"expires": 20 * 3600},
    },
    # Budgets are also evaluated after every attribution (the pipeline chains
    # evaluate_budgets_for_month); the daily run catches what no import triggers: a forecast that
    # crosses a threshold as days pass, a quarter or year rolling over, budgets created since.
    # After the nightly attribution (03:30); expires before the next day's run. Alerts are
    # once-only by their unique constraint, so an overlap with a chained run sends nothing twice.
    "check-budgets-daily": {
        "task": "finops.budgets.tasks.check_budgets",
        "schedule": crontab(minute=50, hour=5),
        "options": {"expires": 20 * 3600},
    },
}
