"""Build the demo month (fleet, jobs, pods, bills, counters) in memory and write it to disk, each
part in the format its source really uses.

The bills are first made as FOCUS 1.2 rows (generate_focus: one fleet, one price list, one
amortisation), then written natively: AWS as CUR 2.0, GCP as the BigQuery export, Azure as an EA
amortised cost-details export, CoreWeave as its usage-only FOCUS export priced by contract
rates; a small Oracle bill stays FOCUS. Each file's expected import totals (per provider,
billing account and currency, computed by that format's own rules) are kept beside it, and the
amortised total of every native file equals its FOCUS rows' EffectiveCost total.

Pure apart from writing files: the same seed, month and scale always give the same bytes
(gzip's header timestamp is pinned), so re-running the demo re-ingests nothing.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from random import Random

from finops.demo import export_aws, export_azure, export_coreweave, export_gcp
from finops.demo.carry import StillOpen, jobs_carried, next_month, pods_carried, still_open
from finops.demo.fleet import CLOUDS, JobsFormat, Month, Node, blocked_intervals, build_fleet
from finops.demo.focus_catalogue import FOCUS_COLUMNS, PROVIDERS, Row
from finops.demo.generate_focus import provider_rows
from finops.demo.generate_kubernetes import (
    Pod,
    Series,
    cluster_pods,
    pod_list_bytes,
    pod_series,
    query_range_bytes,
    serving_nodes,
)
from finops.demo.generate_sacct import render_sacct
from finops.demo.history import MonthPlan
from finops.demo.jobs import Job
from finops.demo.workload import schedule_cluster

# (provider name as stored, billing account id, currency) -> (billed, effective)
Totals = dict[tuple[str, str, str], tuple[Decimal, Decimal]]


class Format:
    """The `--format` of the command that ingests each file."""

    AWS_CUR = "aws-cur"
    GCP_BIGQUERY = "gcp-bigquery"
    AZURE = "azure"
    COREWEAVE = "coreweave"
    FOCUS = "focus"
    SLURM = "slurm"
    KUBERNETES = "kubernetes"
    PROMETHEUS = "prometheus"


@dataclass
class DemoDataset:
    month: Month
    seed: int
    scale: str
    nodes: list[Node]
    # cluster name -> jobs in sacct order (the Kubernetes cluster's training jobs too)
    jobs: dict[str, list[Job]] = field(default_factory=dict)
    # Kubernetes cluster name -> pods, and the counters of its serving pods
    pods: dict[str, list[Pod]] = field(default_factory=dict)
    series: dict[str, list[Series]] = field(default_factory=dict)
    # provider key (aws, gcp, ..., oci) -> FOCUS rows: the one price list behind every format
    bills: dict[str, list[Row]] = field(default_factory=dict)
    # The previous month's jobs and pods still running at its end, as this month's exports list
    # them again (carry.py): in the files only, not in this month's schedule or counters.
    carried_jobs: dict[str, list[Job]] = field(default_factory=dict)
    carried_pods: dict[str, list[Pod]] = field(default_factory=dict)

    def still_open(self) -> StillOpen:
        """What this month's exports list as still running, for the next month's."""
        slurm = {c.cluster for c in CLOUDS if c.jobs_format == JobsFormat.SLURM}
        return still_open(
            seconds=self.month.seconds,
            jobs={
                cluster: self.carried_jobs.get(cluster, []) + jobs
                for cluster, jobs in self.jobs.items()
                if cluster in slurm
            },
            pods={
                cluster: self.carried_pods.get(cluster, []) + pods
                for cluster, pods in self.pods.items()
            },
        )

    def invoiced_total(self) -> Decimal:
        return sum(
            (Decimal(r["BilledCost"]) for rows in self.bills.values() for r in rows), Decimal(0)
        )

    def effective_total(self) -> Decimal:
        return sum(
            (Decimal(r["EffectiveCost"]) for rows in self.bills.values() for r in rows),
            Decimal(0),
        )

    def effective_by_key(self) -> dict[str, Decimal]:
        return {
            key: sum((Decimal(r["EffectiveCost"]) for r in rows), Decimal(0))
            for key, rows in self.bills.items()
        }


@dataclass(frozen=True)
class DemoFile:
    kind: str  # "billing", "jobs" or "inference"
    format: str  # the ingest command's --format
    path: Path
    # Billing: the ingest source name; jobs and inference: the cluster name.
    source: str
    time_zone: str
    rows: int
    # Billing files: what the import must total (see Totals).
    totals: Totals = field(default_factory=dict)


def _suffix(plan: MonthPlan | None) -> str:
    # A month of a history draws its own streams (the single-month demo keeps its bytes).
    return f"@{plan.month.label}" if plan else ""


def _rng(seed: int, part: str) -> Random:
    # A separate stream per part: changing how one part is generated leaves the others as they were.
    return Random(f"{seed}:{part}")


def dataset_build(
    *,
    seed: int,
    month: Month,
    scale: str,
    plan: MonthPlan | None = None,
    carried: StillOpen | None = None,
) -> DemoDataset:
    """One month's data; `plan`: the month's place in a several-month demo (history.py);
    `carried`: what the month before left running, listed again in this month's exports."""
    fleet_plan = plan.fleet if plan else None
    nodes = build_fleet(rng=_rng(seed, f"fleet{_suffix(plan)}"), month=month, scale=scale,
                        plan=fleet_plan)  # fmt: skip
    dataset = DemoDataset(month=month, seed=seed, scale=scale, nodes=nodes)
    idle = {
        n.hostname for n in nodes if fleet_plan and n.pool in [r[0] for r in fleet_plan.runaway]
    }
    for cloud in CLOUDS:
        cloud_nodes = [n for n in nodes if n.cloud.cluster == cloud.cluster]
        serving: list[Node] = []
        mig: Node | None = None
        if cloud.jobs_format == JobsFormat.KUBERNETES:
            serving, mig = serving_nodes(cloud_nodes)
        kept = {n.hostname for n in serving} | ({mig.hostname} if mig else set()) | idle
        dataset.jobs[cloud.cluster] = schedule_cluster(
            rng=_rng(seed, f"jobs:{cloud.cluster}{_suffix(plan)}"),
            month=month,
            cluster=cloud.cluster,
            time_zone=cloud.time_zone,
            nodes=[n for n in cloud_nodes if n.hostname not in kept],
            history=plan.index if plan else None,
            requeue=plan is not None and cloud.jobs_format == JobsFormat.SLURM,
        )
        if cloud.jobs_format == JobsFormat.KUBERNETES:
            pods = cluster_pods(
                rng=_rng(seed, f"pods:{cloud.cluster}{_suffix(plan)}"), month=month,
                jobs=dataset.jobs[cloud.cluster], serving=serving, mig=mig,
            )  # fmt: skip
            dataset.pods[cloud.cluster] = pods
            dataset.series[cloud.cluster] = pod_series(
                rng=_rng(seed, f"counters:{cloud.cluster}{_suffix(plan)}"), pods=pods, month=month
            )
        if carried is not None:
            _carry(dataset, carried, cloud.cluster, cloud.time_zone, cloud_nodes)
        dataset.bills[cloud.key] = provider_rows(
            rng=_rng(seed, f"bill:{cloud.key}{_suffix(plan)}"),
            month=month,
            provider=cloud.provider,
            nodes=cloud_nodes,
            small=scale != "full",
        )
    dataset.bills["oci"] = provider_rows(
        rng=_rng(seed, f"bill:oci{_suffix(plan)}"), month=month, provider="Oracle", nodes=[],
        small=scale != "full",
    )  # fmt: skip
    return dataset


def _carry(
    dataset: DemoDataset, carried: StillOpen, cluster: str, time_zone: str, nodes: list[Node]
) -> None:
    month = dataset.month
    if cluster in dataset.pods:
        pods = dataset.pods[cluster]
        placed = (([p.node] if p.node else [], p.start) for p in pods)
        after = next_month(seconds=month.seconds, nodes=nodes, placed=placed)
        dataset.carried_pods[cluster] = pods_carried(
            carried.pods.get(cluster, []), shift=carried.seconds, after=after
        )
        return
    after = next_month(
        seconds=month.seconds, nodes=nodes,
        placed=((j.nodes, j.start) for j in dataset.jobs[cluster]),
        blocked=blocked_intervals(month, time_zone),
    )  # fmt: skip
    dataset.carried_jobs[cluster] = jobs_carried(
        carried.jobs.get(cluster, []), shift=carried.seconds, after=after
    )


# --- writing ------------------------------------------------------------------------------------


def csv_bytes(rows: Sequence[Row], columns: Sequence[str]) -> bytes:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue().encode("utf-8")


def focus_csv_bytes(rows: list[Row]) -> bytes:
    return csv_bytes(rows, FOCUS_COLUMNS)


def _write(path: Path, data: bytes, compress: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if compress:
        # mtime=0 and no file name in the header: the same data gives the same bytes.
        with path.open("wb") as raw, gzip.GzipFile("", "wb", fileobj=raw, mtime=0) as gz:
            gz.write(data)
    else:
        path.write_bytes(data)


def _totals(
    provider: str, account: str, pairs: Iterable[tuple[Decimal, Decimal]], currency: str = "USD"
) -> Totals:
    invoiced = effective = Decimal(0)
    for b, e in pairs:
        invoiced += b
        effective += e
    return {(provider, account, currency): (invoiced, effective)}


def _write_aws(dataset: DemoDataset, root: Path) -> DemoFile:
    rows = export_aws.cur_rows(focus_rows=dataset.bills["aws"], month=dataset.month)
    label = dataset.month.label
    path = root / "billing" / "aws" / "acme-cur2" / "data" / f"BILLING_PERIOD={label}"
    path = path / "acme-cur2-00001.csv.gz"
    _write(path, csv_bytes(rows, export_aws.CUR_COLUMNS), compress=True)
    totals = _totals(
        "AWS", PROVIDERS["AWS"].billing_account_id,
        ((Decimal(r["line_item_unblended_cost"]), export_aws.amortised_cost(r)) for r in rows),
    )  # fmt: skip
    return DemoFile("billing", Format.AWS_CUR, path, "aws-cur-demo", "UTC", len(rows), totals)


def _write_gcp(dataset: DemoDataset, root: Path) -> DemoFile:
    records = export_gcp.bigquery_records(focus_rows=dataset.bills["gcp"], month=dataset.month)
    data = export_gcp.jsonl_bytes(records)
    path = root / "billing" / "gcp" / f"gcp_billing_export_resource_v1_{dataset.month.label}.jsonl"
    _write(path, data)
    read = [json.loads(line, parse_float=Decimal) for line in data.decode().splitlines()]
    # Google invoices cost + credits: BilledCost and EffectiveCost are both the net.
    totals = _totals(
        "Google Cloud", PROVIDERS["GCP"].billing_account_id,
        ((export_gcp.net_cost(r), export_gcp.net_cost(r)) for r in read),
    )  # fmt: skip
    return DemoFile(
        "billing", Format.GCP_BIGQUERY, path, "gcp-bigquery-demo", "UTC", len(records), totals
    )


def _write_azure(dataset: DemoDataset, root: Path) -> DemoFile:
    rows = export_azure.amortised_rows(focus_rows=dataset.bills["azure"], month=dataset.month)
    compact = dataset.month.label.replace("-", "")
    path = root / "billing" / "azure" / f"acme-amortized-{compact}01-{compact}{dataset.month.days}"
    path = path.with_suffix(".csv")
    # EA exports start with a UTF-8 byte order mark.
    _write(path, b"\xef\xbb\xbf" + csv_bytes(rows, export_azure.EA_COLUMNS))
    totals = _totals(
        "Microsoft", export_azure.ENROLLMENT,
        ((Decimal(r["Cost"]), Decimal(r["Cost"])) for r in rows),
    )  # fmt: skip
    return DemoFile("billing", Format.AZURE, path, "azure-demo", "UTC", len(rows), totals)


def _write_coreweave(dataset: DemoDataset, root: Path) -> DemoFile:
    focus = dataset.bills["coreweave"]
    rows = export_coreweave.usage_rows(focus_rows=focus)
    path = root / "billing" / "coreweave" / f"coreweave-usage-{dataset.month.label}.csv"
    _write(path, focus_csv_bytes(rows))
    # The parser prices each usage row at its contract rate: exactly the FOCUS cost.
    totals = _totals(
        "CoreWeave", PROVIDERS["CoreWeave"].billing_account_id,
        ((Decimal(r["EffectiveCost"]), Decimal(r["EffectiveCost"])) for r in focus),
    )  # fmt: skip
    return DemoFile("billing", Format.COREWEAVE, path, "coreweave-demo", "UTC", len(rows), totals)


def _write_oci(dataset: DemoDataset, root: Path) -> DemoFile:
    rows = dataset.bills["oci"]
    path = root / "billing" / "oci" / f"oci-focus-{dataset.month.label}.csv"
    _write(path, focus_csv_bytes(rows))
    totals = _totals(
        "Oracle", PROVIDERS["Oracle"].billing_account_id,
        ((Decimal(r["BilledCost"]), Decimal(r["EffectiveCost"])) for r in rows),
    )  # fmt: skip
    return DemoFile("billing", Format.FOCUS, path, "oci-focus-demo", "UTC", len(rows), totals)


def aws_restated_write(*, focus_rows: list[Row], month: Month, out: Path) -> Path:
    """The AWS bill of `month` delivered again (as CUR 2.0 re-delivers a restated period),
    beside the first delivery so that both stay on disk."""
    rows = export_aws.cur_rows(focus_rows=focus_rows, month=month)
    path = out / month.label / "billing" / "aws-restated" / "acme-cur2" / "data"
    path = path / f"BILLING_PERIOD={month.label}" / "acme-cur2-00001.csv.gz"
    _write(path, csv_bytes(rows, export_aws.CUR_COLUMNS), compress=True)
    return path


def coreweave_rates(dataset: DemoDataset) -> list[export_coreweave.ContractRate]:
    return export_coreweave.contract_rates(focus_rows=dataset.bills["coreweave"])


def dataset_write(*, dataset: DemoDataset, out: Path) -> list[DemoFile]:
    """Write every file under <out>/<month>/: billing/, jobs/, inference/."""
    root = out / dataset.month.label
    files = [
        _write_aws(dataset, root),
        _write_gcp(dataset, root),
        _write_azure(dataset, root),
        _write_coreweave(dataset, root),
        _write_oci(dataset, root),
    ]
    for cloud in CLOUDS:
        if cloud.jobs_format == JobsFormat.KUBERNETES:
            pods = sorted(
                dataset.carried_pods.get(cloud.cluster, []) + dataset.pods[cloud.cluster],
                key=lambda p: (p.namespace, p.name),
            )
            path = root / "jobs" / f"{cloud.cluster}-pods.json"
            _write(path, pod_list_bytes(pods, dataset.month))
            files.append(DemoFile("jobs", Format.KUBERNETES, path, cloud.cluster, "UTC", len(pods)))
            files.extend(_write_counters(dataset, root, cloud.cluster))
            continue
        jobs = dataset.carried_jobs.get(cloud.cluster, []) + dataset.jobs[cloud.cluster]
        path = root / "jobs" / f"{cloud.cluster}.sacct"
        text = render_sacct(jobs=jobs, month=dataset.month, time_zone=cloud.time_zone)
        _write(path, text.encode("utf-8"))
        files.append(
            DemoFile("jobs", Format.SLURM, path, cloud.cluster, cloud.time_zone, len(jobs))
        )
    return files


def _write_counters(dataset: DemoDataset, root: Path, cluster: str) -> list[DemoFile]:
    """One query_range export per endpoint, in one folder: ingested as one batch."""
    folder = root / "inference" / cluster
    by_endpoint: dict[str, list[Series]] = {}
    for one in dataset.series[cluster]:
        by_endpoint.setdefault(one.endpoint.name, []).append(one)
    samples = 0
    for endpoint, series in sorted(by_endpoint.items()):
        _write(folder / f"{endpoint}.json", query_range_bytes(series, dataset.month))
        samples += sum(len(s.times) for s in series)
    return [DemoFile("inference", Format.PROMETHEUS, folder, cluster, "UTC", samples)]
