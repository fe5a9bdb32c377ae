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
app.autodiscover_tasks()

# Each entry: crontab + expires, and why it runs when it does.
app.conf.beat_schedule = {
    # Providers restate the current and previous month for weeks; re-attributing both every night
    # keeps the ledger in step with the newest imports. Expires before the next run so a backlog
    # never piles up duplicate work.
    "attribute-open-months-nightly": {
        "task": "finops.attribution.tasks.attribute_open_months",
        "schedule": crontab(minute=30, hour=3),
        "options": {"expires": 6 * 3600},
    },
}
