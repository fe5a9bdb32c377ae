"""Energy tasks: thin wrappers that call one service (finops/energy/services.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from celery import shared_task

from finops.core.errors import ImportFormatError
from finops.energy.prometheus_fetch import EnergyFetchError, energy_fetch, energy_sources
from finops.energy.services import energy_import

# A month of DCGM range data of a cluster: millions of samples at most.
SOFT_TIME_LIMIT = 20 * 60
TIME_LIMIT = SOFT_TIME_LIMIT + 5 * 60


@shared_task(
    name="finops.energy.tasks.ingest_energy_file",
    soft_time_limit=SOFT_TIME_LIMIT,
    time_limit=TIME_LIMIT,
)
def ingest_energy_file(path: str, cluster: str, format: str = "prometheus") -> dict[str, Any]:
    """Import one file of DCGM energy for a cluster; a bad file is a failed batch, its error
    returned (and kept on the batch). Decimal figures are returned as strings."""
    try:
        done = energy_import(path=Path(path), cluster=cluster, format=format)
    except ImportFormatError as exc:
        return {"status": "failed", "error": str(exc)}
    return {
        "status": "duplicate" if done.duplicate else done.batch.status,
        "error": done.batch.error,
        "batch_id": done.batch.pk,
        "rows": done.rows,
        "joules": f"{done.joules:f}",
        "joules_outside_jobs": f"{done.joules_outside_jobs:f}",
        "series_without_job": done.series_without_job,
        "unknown_jobs": list(done.unknown_jobs),
    }


@shared_task(
    name="finops.energy.tasks.fetch_energy_all",
    soft_time_limit=SOFT_TIME_LIMIT,
    time_limit=TIME_LIMIT,
)
def fetch_energy_all() -> dict[str, Any]:
    """Fetch every configured cluster's DCGM energy (finops/energy/prometheus_fetch.py); one
    cluster's failure is reported and does not stop the others."""
    result: dict[str, Any] = {}
    for source in energy_sources():
        try:
            done = energy_fetch(source=source)
        except (EnergyFetchError, ImportFormatError) as exc:
            result[source.cluster] = {"status": "failed", "error": str(exc)}
            continue
        result[source.cluster] = (
            {"status": "empty", "error": ""} if done is None
            else {"status": done.batch.status, "error": done.batch.error, "rows": done.rows}
        )  # fmt: skip
    return result
