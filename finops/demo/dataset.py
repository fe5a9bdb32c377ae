"""Build the demo month (fleet, jobs, bills) in memory and write it to disk in the real formats.

Pure apart from writing files: the same seed, month and scale always give the same bytes
(gzip's header timestamp is pinned), so re-running the demo re-ingests nothing.
"""

from __future__ import annotations

import csv
import gzip
import io
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from random import Random

from finops.demo.fleet import CLOUDS, Month, Node, build_fleet
from finops.demo.generate_focus import FOCUS_COLUMNS, Row, provider_rows
from finops.demo.generate_sacct import render_sacct
from finops.demo.workload import Job, schedule_cluster

# The one bill written compressed, so the demo exercises the .csv.gz path.
GZIP_PROVIDER_KEY = "gcp"


@dataclass
class DemoDataset:
    month: Month
    seed: int
    scale: str
    nodes: list[Node]
    # cluster name -> jobs in sacct order
    jobs: dict[str, list[Job]] = field(default_factory=dict)
    # provider key (aws, gcp, ...) -> FOCUS rows
    bills: dict[str, list[Row]] = field(default_factory=dict)

    def billed_total(self) -> Decimal:
        return sum(
            (Decimal(r["BilledCost"]) for rows in self.bills.values() for r in rows), Decimal(0)
        )

    def effective_total(self) -> Decimal:
        return sum(
            (Decimal(r["EffectiveCost"]) for rows in self.bills.values() for r in rows),
            Decimal(0),
        )


@dataclass(frozen=True)
class DemoFile:
    kind: str  # "billing" or "jobs"
    path: Path
    # Billing: the ingest source name; jobs: the cluster name.
    source: str
    time_zone: str
    rows: int


def _rng(seed: int, part: str) -> Random:
    # A separate stream per part: changing how one part is generated leaves the others as they were.
    return Random(f"{seed}:{part}")


def dataset_build(*, seed: int, month: Month, scale: str) -> DemoDataset:
    nodes = build_fleet(rng=_rng(seed, "fleet"), month=month, scale=scale)
    dataset = DemoDataset(month=month, seed=seed, scale=scale, nodes=nodes)
    for cloud in CLOUDS:
        cloud_nodes = [n for n in nodes if n.cloud.cluster == cloud.cluster]
        dataset.jobs[cloud.cluster] = schedule_cluster(
            rng=_rng(seed, f"jobs:{cloud.cluster}"),
            month=month,
            cluster=cloud.cluster,
            time_zone=cloud.time_zone,
            nodes=cloud_nodes,
        )
        dataset.bills[cloud.key] = provider_rows(
            rng=_rng(seed, f"bill:{cloud.key}"),
            month=month,
            provider=cloud.provider,
            nodes=cloud_nodes,
            small=scale != "full",
        )
    return dataset


def focus_csv_bytes(rows: list[Row]) -> bytes:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=FOCUS_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue().encode("utf-8")


def _write(path: Path, data: bytes, compress: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if compress:
        # mtime=0 and no file name in the header: the same data gives the same bytes.
        with path.open("wb") as raw, gzip.GzipFile("", "wb", fileobj=raw, mtime=0) as gz:
            gz.write(data)
    else:
        path.write_bytes(data)


def dataset_write(*, dataset: DemoDataset, out: Path) -> list[DemoFile]:
    """Write bills to <out>/<month>/billing/ and sacct logs to <out>/<month>/jobs/."""
    root = out / dataset.month.label
    files: list[DemoFile] = []
    for cloud in CLOUDS:
        rows = dataset.bills[cloud.key]
        compress = cloud.key == GZIP_PROVIDER_KEY
        path = root / "billing" / (f"{cloud.key}.csv.gz" if compress else f"{cloud.key}.csv")
        _write(path, focus_csv_bytes(rows), compress=compress)
        files.append(DemoFile("billing", path, f"{cloud.key}-demo", "UTC", len(rows)))
    for cloud in CLOUDS:
        jobs = dataset.jobs[cloud.cluster]
        path = root / "jobs" / f"{cloud.cluster}.sacct"
        text = render_sacct(jobs=jobs, month=dataset.month, time_zone=cloud.time_zone)
        _write(path, text.encode("utf-8"))
        files.append(DemoFile("jobs", path, cloud.cluster, cloud.time_zone, len(jobs)))
    return files
