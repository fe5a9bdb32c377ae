"""Celery tasks for imports (autodiscovered as billing_ingest.tasks). Thin: take ids, call one
service. Split by what is imported."""

from billing_ingest.tasks.billing import *  # noqa: F403
from billing_ingest.tasks.jobs import *  # noqa: F403
from billing_ingest.tasks.kubernetes import *  # noqa: F403
from billing_ingest.tasks.sources import *  # noqa: F403
from billing_ingest.tasks.uploads import *  # noqa: F403
