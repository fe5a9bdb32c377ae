"""Attribution scenarios in the real input formats (DESIGN section 5): FOCUS rows of the June
2025 invoice, `sacct --parsable2` lines, `kubectl get pods -o json` pods, each ingested with the
real command, and `attribute --month 2025-06` with its conservation check.

Most GPU nodes are p5.48xlarge (8 H100); unless said otherwise a line is for 2025-06-03 and times
are UTC (sacct prints the cluster's local time; the clusters here are UTC).
"""

from __future__ import annotations

import csv
import datetime as dt
import json
from io import StringIO
from pathlib import Path
from typing import Any

from django.core.management import call_command

from tests.builders import SACCT_HEADER

MONTH = "2025-06"
P5 = "p5.48xlarge"
FOCUS_COLUMNS = [
    "BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd",
    "BillingAccountId", "SubAccountId", "ProviderName", "ChargeCategory", "PricingCategory",
    "ServiceCategory", "ServiceName", "ResourceId", "ResourceName", "x_InstanceType",
    "BilledCost", "EffectiveCost", "BillingCurrency", "Tags",
]  # fmt: skip


def utc(hour: float, day: int = 3, month: int = 6) -> str:
    """FOCUS time: 2025-06-03T10:30:00Z for utc(10.5)."""
    at = dt.datetime(2025, month, day, tzinfo=dt.UTC) + dt.timedelta(hours=hour)
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def local(hour: float, day: int = 3) -> str:
    """sacct time (the cluster's wall clock, UTC here): 2025-06-03T10:30:00."""
    return utc(hour, day)[:-1]


def line(
    cost: str, start: str, end: str, *, node: str = "", instance: str = P5,
    provider: str = "AWS", account: str = "111111111111", sub: str = "",
    charge: str = "Usage", category: str = "Compute",
    service: str = "Amazon Elastic Compute Cloud", tags: dict[str, str] | None = None,
) -> dict[str, str]:  # fmt: skip
    """One FOCUS row of the June 2025 invoice; a GPU node when `node` is given."""
    return {
        "BillingPeriodStart": "2025-06-01T00:00:00Z",
        "BillingPeriodEnd": "2025-07-01T00:00:00Z",
        "ChargePeriodStart": start,
        "ChargePeriodEnd": end,
        "BillingAccountId": account,
        "SubAccountId": sub,
        "ProviderName": provider,
        "ChargeCategory": charge,
        "PricingCategory": "Standard",
        "ServiceCategory": category,
        "ServiceName": service,
        "ResourceId": f"i-{node}" if node else "",
        "ResourceName": node,
        "x_InstanceType": instance if node else "",
        "BilledCost": cost,
        "EffectiveCost": cost,
        "BillingCurrency": "USD",
        "Tags": json.dumps(tags or {}),
    }


def ingest_bill(tmp_path: Path, rows: list[dict[str, str]]) -> None:
    path = tmp_path / "focus-2025-06.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=FOCUS_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    call_command(
        "ingest_billing", "--format", "focus", str(path), "--no-attribute", stdout=StringIO()
    )


def job(
    job_id: str, account: str, state: str, start: str, end: str, gpus: int, nodes: str,
    *, name: str = "", raw: str = "", wckey: str = "", comment: str = "", node_count: int = 1,
) -> str:  # fmt: skip
    """One `sacct --parsable2` line; AllocTRES gres/gpu is the job's total over its nodes."""
    tres = f"billing={gpus * 8},cpu={gpus * 8},gres/gpu={gpus},mem=512G,node={node_count}"
    fields = [job_id, raw or job_id, name or f"job-{job_id}", account, "user", "gpu", state,
              start, end, tres, nodes, wckey, comment]  # fmt: skip
    return "|".join(fields)


def ingest_sacct(tmp_path: Path, cluster: str, *lines: str) -> None:
    path = tmp_path / f"sacct-{cluster}.txt"
    path.write_text("\n".join([SACCT_HEADER, *lines]) + "\n")
    call_command(
        "ingest_jobs", "--format", "slurm", str(path), "--cluster", cluster, "--no-attribute",
        stdout=StringIO(), stderr=StringIO(),
    )  # fmt: skip


def pod(
    name: str, namespace: str, node: str, resources: dict[str, str], start: str,
    end: str | None = None, *, labels: dict[str, str] | None = None, phase: str = "Succeeded",
    reason: str | None = None,
) -> dict[str, Any]:  # fmt: skip
    """A pod as `kubectl get pods -A -o json` prints it: it holds its GPUs from
    status.startTime to its containers' finishedAt (a running pod: to the end of the period)."""
    container = {"name": "main", "image": "trainer:1", "resources": {"limits": resources}}
    state: dict[str, Any] = {"running": {"startedAt": start}}
    if end is not None:
        state = {"terminated": {"exitCode": 0 if phase == "Succeeded" else 137,
                                "startedAt": start, "finishedAt": end}}  # fmt: skip
    status: dict[str, Any] = {
        "phase": phase,
        "startTime": start,
        "containerStatuses": [{"name": "main", "ready": end is None, "state": state}],
    }
    if reason is not None:
        status["reason"] = reason
    return {
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}",
                     "labels": labels or {}},
        "spec": {"nodeName": node, "containers": [container]},
        "status": status,
    }  # fmt: skip


def ingest_pods(tmp_path: Path, cluster: str, *pods: dict[str, Any], replicas: int = 1) -> None:
    path = tmp_path / f"pods-{cluster}.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": list(pods)}))
    call_command(
        "ingest_jobs", "--format", "kubernetes", str(path), "--cluster", cluster,
        "--gpu-sharing-replicas", str(replicas), "--no-attribute", stdout=StringIO(),
        stderr=StringIO(),
    )  # fmt: skip


def attribute() -> None:
    out = StringIO()
    call_command("attribute", "--month", MONTH, stdout=out)
    assert "conservation check: difference 0" in out.getvalue()
