"""Scheduled fetch of DCGM energy from a Prometheus server's HTTP API (issue 32), like the billing
sources' fetch: FINOPS_ENERGY_PROMETHEUS names a Prometheus base URL per cluster
(`hpc=http://prometheus:9090,k8s=https://prom.example/`), set by whoever runs the deployment.

Each fetch asks `/api/v1/query_range` for both DCGM metrics over the last
FINOPS_ENERGY_WINDOW_DAYS (default 35) up to now, at a step that keeps every series under
Prometheus' 11,000 points (at least 60 s), saves the two answers as one `query_range` document
under FINOPS_DATA_DIR/energy/ (kept for audit, like the Kubernetes snapshots) and imports it
with the same service as `ingest_energy`. Each job the window measures gets its energy over the
window (the rows of a job replaced whole), so a daily fetch keeps every job that ended within
the window complete; a job longer than the window keeps only its last FINOPS_ENERGY_WINDOW_DAYS.
"""

from __future__ import annotations

import json
import math
import re
import urllib.parse
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings

from finops.energy.dcgm_energy import METRICS
from finops.energy.services import EnergyImport, energy_import

# Prometheus refuses a range query of more than 11,000 points per series.
MAX_POINTS = 10_000
MIN_STEP_SECONDS = 60
TIMEOUT_SECONDS = 120


class EnergyFetchError(RuntimeError):
    """The server did not answer, or answered with something other than a matrix."""


@dataclass(frozen=True, slots=True)
class EnergySource:
    cluster: str
    base_url: str


def energy_sources() -> list[EnergySource]:
    configured: dict[str, str] = getattr(settings, "FINOPS_ENERGY_PROMETHEUS", {}) or {}
    return [EnergySource(cluster, url) for cluster, url in sorted(configured.items())]


def _step(start: datetime, end: datetime) -> int:
    seconds = (end - start).total_seconds()
    return max(MIN_STEP_SECONDS, math.ceil(seconds / MAX_POINTS))


def _query_range(base_url: str, metric: str, start: datetime, end: datetime) -> list[Any]:
    query = urllib.parse.urlencode(
        {"query": metric, "start": int(start.timestamp()), "end": int(end.timestamp()),
         "step": _step(start, end)}
    )  # fmt: skip
    url = f"{base_url.rstrip('/')}/api/v1/query_range?{query}"
    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        raise EnergyFetchError(f"{base_url}: not an http(s) URL")
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_SECONDS) as response:
            document = json.load(response)
    except (OSError, ValueError) as exc:
        raise EnergyFetchError(f"{url}: {exc}") from exc
    data = document.get("data") if isinstance(document, dict) else None
    if document.get("status") != "success" or not isinstance(data, dict):
        raise EnergyFetchError(f"{url}: answered {str(document)[:200]}")
    if data.get("resultType") != "matrix" or not isinstance(data.get("result"), list):
        raise EnergyFetchError(f"{url}: not a matrix")
    return list(data["result"])


def energy_fetch(*, source: EnergySource, now: datetime | None = None) -> EnergyImport | None:
    """Fetch and import one cluster's window; None when the server had no DCGM series."""
    end = (now or datetime.now(tz=UTC)).replace(microsecond=0)
    start = end - timedelta(days=int(getattr(settings, "FINOPS_ENERGY_WINDOW_DAYS", 35)))
    series: list[Any] = []
    for metric in METRICS:
        series += _query_range(source.base_url, metric, start, end)
    if not series:
        return None
    folder = Path(settings.FINOPS_DATA_DIR) / "energy"
    folder.mkdir(parents=True, exist_ok=True)
    safe = re.sub(r"[^-\w.]", "_", source.cluster)
    path = folder / f"{safe}-{end:%Y%m%dT%H%M%SZ}.json"
    document = {"status": "success", "data": {"resultType": "matrix", "result": series}}
    path.write_text(json.dumps(document))
    return energy_import(path=path, cluster=source.cluster)
