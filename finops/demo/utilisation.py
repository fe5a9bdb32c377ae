"""The demo's measured GPU utilisation of its serving pods (DCGM), as a team would export it:
one CSV per Kubernetes cluster (job_id, utilisation), imported with `ingest_utilisation` before
the month is attributed.

What it shows: llama-70b-chat's replicas were sized for the daily peak and hold whole GPUs all
day, so they average 12-19 % busy (the rightsizing advice: a smaller GPU type serves it); the
MIG slices of the small endpoints are busier. Each pod's value is drawn from its own job id, so
a rebuilt demo measures the same.
"""

from __future__ import annotations

import csv
import datetime as dt
from pathlib import Path
from random import Random

from billing_ingest.models import JobGpuUtilisation, JobRecord
from finops.demo.fleet import Month

# Endpoint -> (lowest, highest) mean DCGM_FI_PROF_GR_ENGINE_ACTIVE of one of its pods.
SERVING_UTILISATION = {
    "llama-70b-chat": (0.12, 0.19),
    "mistral-7b-chat": (0.45, 0.60),
    "whisper-large-v3": (0.30, 0.45),
    "embed-e5-large": (0.50, 0.70),
}


def serving_utilisation_files(*, month: Month, out: Path) -> list[tuple[str, Path]]:
    """(cluster, CSV) per cluster with serving pods that started in the month and have no
    measured utilisation yet."""
    start = dt.datetime(month.year, month.month, 1, tzinfo=dt.UTC)
    end = (start + dt.timedelta(days=32)).replace(day=1)
    pods = JobRecord.objects.filter(
        endpoint__in=SERVING_UTILISATION, start__gte=start, start__lt=end
    ).values_list("cluster", "job_id", "endpoint")
    measured = set(JobGpuUtilisation.objects.values_list("cluster", "job_id"))
    by_cluster: dict[str, list[tuple[str, str]]] = {}
    for cluster, job_id, endpoint in pods.order_by("cluster", "job_id"):
        if (cluster, job_id) in measured:
            continue
        low, high = SERVING_UTILISATION[endpoint]
        value = Random(f"dcgm:{cluster}:{job_id}").uniform(low, high)
        by_cluster.setdefault(cluster, []).append((job_id, f"{value:.4f}"))
    files = []
    for cluster, rows in sorted(by_cluster.items()):
        path = out / month.label / "utilisation" / f"{cluster}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(["job_id", "utilisation"])
            writer.writerows(rows)
        files.append((cluster, path))
    return files
