"""The demo generator: every source in its native format (AWS CUR 2.0, GCP BigQuery export,
Azure EA amortised cost details, CoreWeave usage x contract rates, an Oracle FOCUS file, sacct,
a Kubernetes pod list, vLLM query_range counters), a sane schedule, and the end-to-end
`manage.py demo` through the real ingest and attribution commands."""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
from collections import defaultdict
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db.models import QuerySet

from billing_ingest.models import CostLineItem, ImportBatch, JobRecord
from billing_ingest.parsers import billing_parser
from billing_ingest.parsers.kubernetes import parse_pods
from billing_ingest.parsers.rows import JobRow
from finops.attribution.models import AllocatedCost, SharedCostRule
from finops.demo.dataset import (
    DemoDataset,
    DemoFile,
    Format,
    coreweave_rates,
    dataset_build,
    dataset_write,
)
from finops.demo.fleet import CLOUDS, JobsFormat, Month, Scale, build_fleet
from finops.demo.generate_sacct import SACCT_FIELDS, compress_hostlist
from finops.demo.management.commands.demo import previous_month
from finops.demo.organisation import (
    DEMO_FIXTURE,
    coreweave_rates_ensure,
    demo_organisation_ensure,
)
from finops.demo.selectors import demo_reconciliation
from finops.demo.teams import TEAMS
from finops.inference.models import EndpointCost, InferenceUsage
from finops.inference.parsers.prometheus import parse_prometheus
from finops.org.models import MappingRule, Profile, Team
from tests.money_figures import figures_without_currency

MONTH = Month.parse("2025-10")
SACCT_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}$")
SLURM_CLOUDS = [c for c in CLOUDS if c.jobs_format == JobsFormat.SLURM]
K8S = next(c for c in CLOUDS if c.jobs_format == JobsFormat.KUBERNETES)


@pytest.fixture(scope="module")
def small() -> DemoDataset:
    return dataset_build(seed=42, month=MONTH, scale=Scale.SMALL)


@pytest.fixture(scope="module")
def written(small: DemoDataset, tmp_path_factory: pytest.TempPathFactory) -> list[DemoFile]:
    return dataset_write(dataset=small, out=tmp_path_factory.mktemp("demo"))


@pytest.fixture(scope="module")
def small_files(written: list[DemoFile]) -> Path:
    return written[0].path.parents[5]  # <out>/<month>/billing/aws/<export>/data/<period>/file


def _file(files: list[DemoFile], fmt: str) -> DemoFile:
    (found,) = [f for f in files if f.format == fmt]
    return found


def _csv(path: Path) -> list[dict[str, str]]:
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return list(csv.DictReader(io.StringIO(raw.decode("utf-8-sig"))))


def _exact_sum(queryset: QuerySet[Any], field: str) -> Decimal:
    # SQLite SUM() over decimals is a float sum: add the stored values in Python instead.
    return sum(queryset.values_list(field, flat=True), Decimal(0))


def _job_end(job_end: int | None, month: Month) -> int:
    return month.seconds if job_end is None else job_end


def _parsed_totals(
    file: DemoFile,
) -> tuple[int, dict[tuple[str, str, str], tuple[Decimal, Decimal]]]:
    rows = 0
    totals: dict[tuple[str, str, str], list[Decimal]] = defaultdict(lambda: [Decimal(0)] * 2)
    for chunk in billing_parser(file.format)(file.path, file_label=str(file.path)):
        for item in chunk:
            rows += 1
            key = (item["provider_name"], item["billing_account_id"], item["billing_currency"])
            totals[key][0] += item["billed_cost"]
            totals[key][1] += item["effective_cost"]
    return rows, {k: (v[0], v[1]) for k, v in totals.items()}


# --- billing files: layout and totals ----------------------------------------------------------


def test_every_format_is_written_once(written: list[DemoFile], small_files: Path) -> None:
    formats = sorted(f.format for f in written)
    assert formats == sorted([
        Format.AWS_CUR, Format.GCP_BIGQUERY, Format.AZURE, Format.COREWEAVE, Format.FOCUS,
        Format.SLURM, Format.SLURM, Format.SLURM, Format.KUBERNETES, Format.PROMETHEUS,
    ])  # fmt: skip
    aws = _file(written, Format.AWS_CUR).path
    assert aws.relative_to(small_files).as_posix() == (
        "billing/aws/acme-cur2/data/BILLING_PERIOD=2025-10/acme-cur2-00001.csv.gz"
    )
    assert gzip.decompress(aws.read_bytes())
    assert all(f.path.exists() and f.rows > 0 for f in written)


@pytest.mark.parametrize("fmt", [Format.AWS_CUR, Format.GCP_BIGQUERY, Format.AZURE, Format.FOCUS])
def test_native_bill_parses_to_the_generators_totals(
    written: list[DemoFile], small: DemoDataset, fmt: str
) -> None:
    file = _file(written, fmt)
    rows, totals = _parsed_totals(file)
    assert rows == file.rows
    assert totals == file.totals
    # Amortised, the native file is the FOCUS bill the fleet was priced with.
    key = {Format.AWS_CUR: "aws", Format.GCP_BIGQUERY: "gcp", Format.AZURE: "azure",
           Format.FOCUS: "oci"}[fmt]  # fmt: skip
    ((_, effective),) = totals.values()
    assert effective == small.effective_by_key()[key]


@pytest.mark.django_db
def test_coreweave_usage_is_priced_by_the_demo_rate_card(
    written: list[DemoFile], small: DemoDataset
) -> None:
    file = _file(written, Format.COREWEAVE)
    usage = [r for r in _csv(file.path) if r["ChargeCategory"] == "Usage"]
    assert usage
    assert all(r["BilledCost"] == r["EffectiveCost"] == "" for r in usage)
    coreweave_rates_ensure(
        rates=coreweave_rates(small), first=MONTH.start.date(),
        last=(MONTH.end - timedelta(days=1)).date(),
    )  # fmt: skip
    rows, totals = _parsed_totals(file)
    assert rows == file.rows
    assert totals == file.totals
    ((_, effective),) = totals.values()
    assert effective == small.effective_by_key()["coreweave"]


# --- billing files: what each format looks like ------------------------------------------------


def test_cur2_has_the_line_item_types_and_columns_of_a_real_export(
    written: list[DemoFile], small: DemoDataset
) -> None:
    rows = _csv(_file(written, Format.AWS_CUR).path)
    kinds = {r["line_item_line_item_type"] for r in rows}
    assert kinds == {
        "Usage", "SavingsPlanCoveredUsage", "SavingsPlanNegation", "SavingsPlanRecurringFee",
        "Fee", "Tax", "Credit",
    }  # fmt: skip
    covered = [r for r in rows if r["line_item_line_item_type"] == "SavingsPlanCoveredUsage"]
    negations = [r for r in rows if r["line_item_line_item_type"] == "SavingsPlanNegation"]
    assert len(covered) == len(negations)
    for row in covered:
        assert Decimal(row["savings_plan_savings_plan_effective_cost"]) < Decimal(
            row["line_item_unblended_cost"]
        )
        assert row["product_instance_type"] == "p5.48xlarge"
    spot = [r for r in rows if "SpotUsage" in r["line_item_usage_type"]]
    assert spot
    assert all(r["product_instance_type"] for r in spot)
    tags = [json.loads(r["resource_tags"]) for r in rows if r["resource_tags"]]
    assert any(t.get("user_team") == "vision" for t in tags)
    assert any("user_name" in t for t in tags)
    fees = [r for r in rows if r["line_item_line_item_type"] == "SavingsPlanRecurringFee"]
    assert len(fees) == MONTH.days * 24
    # Amortised, the hourly fees carry exactly the commitment no usage consumed.
    unused = sum(
        (
            Decimal(r["savings_plan_total_commitment_to_date"])
            - Decimal(r["savings_plan_used_commitment"])
            for r in fees
        ),
        Decimal(0),
    )
    focus_unused = [r for r in small.bills["aws"] if r["CommitmentDiscountStatus"] == "Unused"]
    assert unused == sum((Decimal(r["EffectiveCost"]) for r in focus_unused), Decimal(0))


def test_bigquery_export_is_nested_jsonl_with_cud_and_spot_skus(written: list[DemoFile]) -> None:
    path = _file(written, Format.GCP_BIGQUERY).path
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert {r["invoice"]["month"] for r in records} == {"202510"}
    skus = {r["sku"]["description"] for r in records}
    assert any(s.startswith("Commitment v1:") for s in skus)
    assert any("Spot Preemptible" in s for s in skus)
    credit_types = {c["type"] for r in records for c in r["credits"]}
    assert credit_types == {"COMMITTED_USAGE_DISCOUNT", "PROMOTION"}
    assert all(c["amount"] < 0 for r in records for c in r["credits"])
    nodes = [r for r in records if r["system_labels"]]
    assert all(r["resource"]["name"].startswith("gcp-") for r in nodes)
    assert any({"key": "team", "value": "speech"} in r["labels"] for r in records)


def test_azure_amortised_export_has_reservations_spot_and_unused(
    written: list[DemoFile],
) -> None:
    path = _file(written, Format.AZURE).path
    assert path.read_bytes().startswith(b"\xef\xbb\xbf")
    rows = _csv(path)
    assert {r["PricingModel"] for r in rows} == {"OnDemand", "Reservation", "Spot"}
    assert {r["ChargeType"] for r in rows} == {"Usage", "UnusedReservation", "Purchase"}
    assert re.fullmatch(r"\d\d/\d\d/2025", rows[0]["Date"])
    vms = [r for r in rows if r["MeterCategory"] == "Virtual Machines"]
    infos = [json.loads(r["AdditionalInfo"]) for r in vms if r["ChargeType"] == "Usage"]
    assert any(i["ServiceType"] == "Standard_ND96isr_H100_v5" for i in infos)
    assert all(i["VMName"].startswith("azure-") for i in infos)
    tags = [r["Tags"] for r in rows if r["Tags"]]
    assert any(not t.startswith("{") for t in tags)
    assert any(t.startswith("{") for t in tags)


# --- Kubernetes pods and counters --------------------------------------------------------------


def _pod_gpus(row: JobRow) -> Fraction:
    """A pod's GPUs as the exact fraction the parser writes (a pod row always has one)."""
    numerator = row["gpu_numerator"]
    assert numerator is not None
    return Fraction(numerator, row["gpu_denominator"])


def test_pod_list_parses_with_mig_slices_states_and_endpoints(written: list[DemoFile]) -> None:
    path = _file(written, Format.KUBERNETES).path
    document = json.loads(path.read_text())
    assert document["kind"] == "List"
    records = [r for chunk in parse_pods(path, file_label="pods") for r in chunk]
    assert len(records) == sum(1 for p in document["items"] if p["spec"].get("nodeName"))
    fractions = {_pod_gpus(r) for r in records}
    assert {Fraction(3, 7), Fraction(1, 7), Fraction(8)} <= fractions
    limits = {
        k for p in document["items"] for k in p["spec"]["containers"][0]["resources"]["limits"]
    }
    assert {"nvidia.com/gpu", "nvidia.com/mig-3g.40gb", "nvidia.com/mig-1g.10gb"} <= limits
    assert {r["state"] for r in records} >= {"COMPLETED", "FAILED", "RUNNING", "PREEMPTED"}
    assert {r["endpoint"] for r in records} >= {"llama-70b-chat", "mistral-7b-chat"}
    assert any(r["run_id"] and r["labels"].get("finops.io/run") == r["run_id"] for r in records)
    assert {r["namespace"] for r in records} >= {"llm", "speech", "recsys", "gpu-platform"}


def test_pods_never_oversubscribe_a_node(small: DemoDataset) -> None:
    events: dict[str, list[tuple[int, Fraction]]] = defaultdict(list)
    for pod in small.pods[K8S.cluster]:
        if pod.node and pod.start is not None:
            end = _job_end(pod.end, MONTH)
            events[pod.node] += [(pod.start, pod.gpus), (end, -pod.gpus)]
    for node, changes in events.items():
        held = Fraction(0)
        for _, delta in sorted(changes, key=lambda c: (c[0], c[1])):
            held += delta
            assert 0 <= held <= 8, node


def test_counters_parse_to_the_generated_usage_with_one_reset(
    written: list[DemoFile], small: DemoDataset
) -> None:
    folder = _file(written, Format.PROMETHEUS).path
    rows = parse_prometheus(sorted(folder.iterdir()))
    parsed: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for row in rows:
        acc = parsed[row["endpoint"]]
        acc[0] += row["requests"]
        acc[1] += row["prompt_tokens"]
        acc[2] += row["generation_tokens"]
    expected: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for series in small.series[K8S.cluster]:
        for counts in series.hourly.values():
            for i in range(3):
                expected[series.endpoint.name][i] += counts[i]
    assert dict(parsed) == dict(expected)
    assert all(v[0] > 0 for v in parsed.values())
    resets = [
        s for s in small.series[K8S.cluster]
        if any(b < a for a, b in zip(s.requests_stop, s.requests_stop[1:], strict=False))
    ]  # fmt: skip
    assert len(resets) == 1


# --- sacct files -----------------------------------------------------------------------------


def _sacct_lines(root: Path, cluster: str) -> list[list[str]]:
    text = (root / "jobs" / f"{cluster}.sacct").read_text()
    assert text.endswith("\n")
    return [line.split("|") for line in text.splitlines()]


def test_sacct_has_the_parsable2_shape(small_files: Path) -> None:
    for cloud in SLURM_CLOUDS:
        lines = _sacct_lines(small_files, cloud.cluster)
        assert lines[0] == list(SACCT_FIELDS)
        width = len(SACCT_FIELDS)
        for fields in lines[1:]:
            assert len(fields) == width, fields
            record = dict(zip(SACCT_FIELDS, fields, strict=True))
            for column in ("Start", "End"):
                assert record[column] == "Unknown" or SACCT_TIME.match(record[column])


def test_sacct_exercises_every_case_parsers_meet(small_files: Path) -> None:
    records = [
        dict(zip(SACCT_FIELDS, fields, strict=True))
        for cloud in SLURM_CLOUDS
        for fields in _sacct_lines(small_files, cloud.cluster)[1:]
    ]
    steps = [r for r in records if "." in r["JobID"]]
    jobs = [r for r in records if "." not in r["JobID"]]
    assert {r["JobID"].split(".")[1] for r in steps} >= {"batch", "extern", "0", "interactive"}
    assert all(r["User"] == "" for r in steps)
    states = {r["State"].split()[0] for r in jobs}
    assert states >= {"COMPLETED", "FAILED", "CANCELLED", "PREEMPTED", "TIMEOUT", "RUNNING"}
    assert any(re.fullmatch(r"CANCELLED by \d+", r["State"]) for r in jobs)
    assert any(r["State"] == "RUNNING" and r["End"] == "Unknown" for r in jobs)
    assert any(re.fullmatch(r"\d+_\d+", r["JobID"]) for r in jobs)
    assert any("[" in r["NodeList"] for r in jobs)
    assert any(r["WCKey"] for r in jobs)
    assert any(r["Comment"].startswith("run=") for r in jobs)
    assert any(re.search(r"node=([2-9]|\d\d)$", r["AllocTRES"]) for r in jobs)  # multi-node
    single_gpus = {
        int(m.group(1))
        for r in jobs
        if r["AllocTRES"].endswith("node=1") and (m := re.search(r"gres/gpu=(\d+)", r["AllocTRES"]))
    }
    assert {1, 2, 4, 8} <= single_gpus


def test_job_ids_are_unique_per_cluster(small: DemoDataset) -> None:
    for jobs in small.jobs.values():
        assert len({j.job_id for j in jobs}) == len(jobs)
        assert len({j.job_id_raw for j in jobs}) == len(jobs)


def test_alloc_tres_gpu_count_is_the_total_over_nodes(small: DemoDataset) -> None:
    text_jobs = [j for jobs in small.jobs.values() for j in jobs if len(j.nodes) > 1]
    assert text_jobs
    for job in text_jobs:
        assert job.gpus == job.gpus_per_node * len(job.nodes) == 8 * len(job.nodes)


def test_preempted_runs_restart(small: DemoDataset) -> None:
    for jobs in small.jobs.values():
        for job in jobs:
            if job.state != "PREEMPTED":
                continue
            assert job.start is not None
            later = [j for j in jobs if j.run_id == job.run_id and j.start and j.start > job.start]
            assert later or (job.end and job.end > MONTH.seconds - 3 * 86400), job


def test_chicago_cluster_prints_local_time(small: DemoDataset, small_files: Path) -> None:
    lines = _sacct_lines(small_files, "gcp-central")[1:]
    by_id = {fields[0]: fields for fields in lines}
    zone = ZoneInfo("America/Chicago")
    checked = 0
    for job in small.jobs["gcp-central"]:
        if job.start is None or not job.nodes:
            continue
        local = datetime.fromisoformat(by_id[job.job_id][7]).replace(tzinfo=zone)
        assert local.astimezone(UTC) == MONTH.start + timedelta(seconds=job.start)
        checked += 1
    assert checked > 100


def test_hostlist_compression() -> None:
    assert compress_hostlist(["aws-p5-003"]) == "aws-p5-003"
    hosts = ["aws-p5-002", "aws-p5-001", "aws-p5-004", "aws-p5-003", "aws-p5-007"]
    assert compress_hostlist(hosts) == "aws-p5-[001-004,007]"
    assert compress_hostlist(["cw-h100-010", "cw-h100-011"]) == "cw-h100-[010-011]"


# --- schedule --------------------------------------------------------------------------------


def test_no_node_is_oversubscribed_and_jobs_run_only_while_billed(small: DemoDataset) -> None:
    up = {n.hostname: n.up for n in small.nodes}
    events: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for jobs in small.jobs.values():
        for job in jobs:
            if not job.nodes or job.start is None:
                continue
            end = _job_end(job.end, MONTH)
            assert job.start < end
            for host in job.nodes:
                assert any(s <= job.start and end <= e for s, e in up[host]), (job, up[host])
                events[host] += [(job.start, job.gpus_per_node), (end, -job.gpus_per_node)]
    assert events
    for host, changes in events.items():
        held = 0
        for _, delta in sorted(changes, key=lambda c: (c[0], c[1])):  # ends before starts
            held += delta
            assert 0 <= held <= 8, host


def test_utilisation_leaves_realistic_idle(small: DemoDataset) -> None:
    capacity = sum(len(n.billed_hours()) * 3600 * 8 for n in small.nodes)
    used: Fraction | int = sum(
        job.gpus * (_job_end(job.end, MONTH) - job.start)
        for cluster, jobs in small.jobs.items()
        if cluster != K8S.cluster
        for job in jobs
        if job.start is not None and job.nodes
    )
    # The Kubernetes cluster's GPU time is its pods' (training, serving and MIG slices).
    used += sum(
        pod.gpus * (_job_end(pod.end, MONTH) - pod.start)
        for pod in small.pods[K8S.cluster]
        if pod.start is not None and pod.node
    )
    assert 0.65 <= used / capacity <= 0.90


def test_full_scale_figures() -> None:
    dataset = dataset_build(seed=42, month=MONTH, scale=Scale.FULL)
    assert len(dataset.nodes) >= 64
    assert {n.instance_type.name for n in dataset.nodes} == {
        "p5.48xlarge", "p4d.24xlarge", "a3-highgpu-8g", "a2-highgpu-8g",
        "Standard_ND96isr_H100_v5", "Standard_ND96amsr_A100_v4", "gd-8xh100ib-i128",
    }  # fmt: skip
    assert len(dataset.pods[K8S.cluster]) >= 2_000
    assert any(len(n.up) > 1 or n.up[0] != (0, MONTH.seconds) for n in dataset.nodes)
    line_items = sum(len(rows) for rows in dataset.bills.values())
    assert line_items < 70_000
    assert sum(len(jobs) for jobs in dataset.jobs.values()) >= 5_000
    assert Decimal(1_000_000) < dataset.invoiced_total() < Decimal(10_000_000)
    up = {n.hostname: n.up for n in dataset.nodes}
    for jobs in dataset.jobs.values():
        for job in jobs:
            if job.nodes and job.start is not None:
                end = _job_end(job.end, MONTH)
                assert job.start < end, job
                for host in job.nodes:
                    assert any(s <= job.start and end <= e for s, e in up[host]), job


def test_fleet_is_fixed_per_seed() -> None:
    from random import Random

    a = build_fleet(rng=Random(1), month=MONTH, scale=Scale.FULL)
    b = build_fleet(rng=Random(1), month=MONTH, scale=Scale.FULL)
    assert [(n.hostname, n.up) for n in a] == [(n.hostname, n.up) for n in b]


# --- determinism -----------------------------------------------------------------------------


def _all_bytes(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_same_seed_same_bytes(small_files: Path, tmp_path: Path) -> None:
    again = dataset_build(seed=42, month=MONTH, scale=Scale.SMALL)
    dataset_write(dataset=again, out=tmp_path)
    assert _all_bytes(tmp_path / MONTH.label) == _all_bytes(small_files)

    other = dataset_build(seed=7, month=MONTH, scale=Scale.SMALL)
    dataset_write(dataset=other, out=tmp_path / "other")
    assert _all_bytes(tmp_path / "other" / MONTH.label) != _all_bytes(small_files)


def test_previous_month() -> None:
    assert previous_month(datetime(2026, 1, 15, tzinfo=UTC)) == Month(2025, 12)
    assert previous_month(datetime(2025, 11, 1, tzinfo=UTC)) == Month(2025, 10)


# --- organisation (fixtures/django/demo_organisation.json) -----------------------------------


def test_organisation_fixture_names_the_workloads_teams() -> None:
    entries = json.loads(DEMO_FIXTURE.read_text())
    teams = {e["fields"]["slug"]: e["fields"]["name"] for e in entries if e["model"] == "org.team"}
    assert teams == {t.slug: t.name for t in TEAMS}


@pytest.mark.django_db
def test_organisation_fixture_loads_with_loaddata_and_the_demo_updates_it_in_place() -> None:
    call_command("loaddata", "demo_organisation", verbosity=0)
    rules = sorted(MappingRule.objects.values_list("kind", "key", "value", "team__slug"))
    assert ("slurm_account", "", "nlp", "language") in rules
    assert ("tag", "project", "ranker", "recsys") in rules

    org = demo_organisation_ensure(finance_password="f-pass-1", lead_password="l-pass-1")

    again = sorted(MappingRule.objects.values_list("kind", "key", "value", "team__slug"))
    assert again == rules
    assert set(org.teams) == {t.slug for t in TEAMS}
    assert Team.objects.count() == len(TEAMS)
    assert org.finance.check_password("f-pass-1")
    assert org.lead.check_password("l-pass-1")
    assert sorted(org.lead.finops_profile.teams.values_list("slug", flat=True)) == [
        "language", "speech",
    ]  # fmt: skip
    assert SharedCostRule.objects.get().method == SharedCostRule.Method.GPU_SPEND


# --- end to end ------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_demo_end_to_end(tmp_path: Path, settings: Any, capsys: pytest.CaptureFixture[str]) -> None:
    # The default backend without EMAIL_URL: the demo writes its alert emails to files instead.
    settings.EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"
    out = io.StringIO()
    call_command(
        "demo", "--scale", "small", "--month", "2025-10", "--months", "1", "--out", str(tmp_path),
        "--allow-demo-users", stdout=out,
    )  # fmt: skip
    assert "Content-Type:" not in capsys.readouterr().out  # no email printed to the console
    assert settings.EMAIL_BACKEND.endswith("console.EmailBackend")  # restored afterwards
    from finops.notifications.models import EmailNotification

    emails = EmailNotification.objects.count()
    sent = EmailNotification.objects.filter(status=EmailNotification.Status.SENT).count()
    assert sent > 0
    # Django's file backend names a file by second and connection, so two connections in one
    # second can share a file: count the messages (each ends with a line of 79 dashes).
    written = sum(f.read_bytes().count(b"-" * 79 + b"\n") for f in (tmp_path / "emails").iterdir())
    assert written == sent
    assert f"{emails} alert emails queued (budgets, anomalies), written to {tmp_path}" in (
        out.getvalue()
    )
    dataset = dataset_build(seed=42, month=MONTH, scale=Scale.SMALL)
    files = dataset_write(dataset=dataset, out=tmp_path / "again")
    period = MONTH.start.date()

    # Each bill imported as one batch totalling what the generator expects.
    for file in (f for f in files if f.kind == "billing"):
        batch = ImportBatch.objects.get(source=file.source, status=ImportBatch.Status.SUCCEEDED)
        items = CostLineItem.objects.filter(batch=batch)
        assert items.count() == file.rows
        ((_, (billed, effective)),) = file.totals.items()
        assert _exact_sum(items, "billed_cost") == billed, file.format
        assert _exact_sum(items, "effective_cost") == effective, file.format
    for cloud in SLURM_CLOUDS:
        lines = [
            f for f in _sacct_lines(tmp_path / MONTH.label, cloud.cluster)[1:] if "." not in f[0]
        ]
        started = {f[0] for f in lines if f[10] != "None assigned"}
        stored = set(
            JobRecord.objects.filter(cluster=cloud.cluster).values_list("job_id", flat=True)
        )
        assert started <= stored <= {f[0] for f in lines}
    pods = JobRecord.objects.filter(cluster=K8S.cluster)
    assert pods.count() == sum(1 for p in dataset.pods[K8S.cluster] if p.node)
    assert InferenceUsage.objects.filter(cluster=K8S.cluster).exists()

    # Attribution conserves every cent, per provider, billing account and currency.
    balances = demo_reconciliation(month=MONTH)
    assert {b.provider for b in balances} == {
        "AWS",
        "Google Cloud",
        "Microsoft",
        "CoreWeave",
        "Oracle",
    }
    for balance in balances:
        assert balance.difference == 0, balance
        assert balance.effective > 0
    effective = _exact_sum(CostLineItem.objects.filter(billing_period=period), "effective_cost")
    assert effective == dataset.effective_total()
    allocated = _exact_sum(AllocatedCost.objects.filter(billing_period=period), "amount")
    assert allocated == effective

    # The attribution signal rebuilt the endpoint costs.
    endpoints = set(
        EndpointCost.objects.filter(billing_period=period).values_list("endpoint", flat=True)
    )
    assert endpoints == {"llama-70b-chat", "mistral-7b-chat", "whisper-large-v3", "embed-e5-large"}
    assert EndpointCost.objects.filter(cost_per_1k_requests__gt=0).exists()

    # Organisation and logins.
    assert Team.objects.filter(slug__in=["vision", "language", "speech", "recsys", "platform"])
    assert User.objects.get(username="finance").check_password("finance-demo")
    lead = Profile.objects.get(user__username="lead")
    assert lead.role == Profile.Role.TEAM_LEAD
    assert lead.teams.count() == 2
    assert MappingRule.objects.filter(kind=MappingRule.Kind.SLURM_ACCOUNT, value="nlp").exists()
    text = out.getvalue()
    assert "http://127.0.0.1:8000" in text
    assert "finance-demo" in text
    for file in files:
        assert f"{file.format}" in text
    assert "USD per 1k requests" in text
    assert "reconciliation difference: 0" in text
    # Every money figure printed shows its currency (the demo's bills are all in USD).
    assert set(CostLineItem.objects.values_list("billing_currency", flat=True)) == {"USD"}
    assert figures_without_currency(text, currencies={"USD"}) == []

    # Budgets: one per team with cost plus the organisation's, some crossed, alerts sent once.
    from finops.budgets.models import Budget, BudgetAlert
    from finops.budgets.selectors import budget_status

    teams_with_cost = set(
        AllocatedCost.objects.filter(billing_period=period, team__isnull=False).values_list(
            "team__slug", flat=True
        )
    )
    budgets = list(Budget.objects.select_related("team"))
    assert {b.team.slug for b in budgets if b.team} == teams_with_cost
    assert any(b.team is None for b in budgets)
    month_end = date(2025, 10, 31)
    crossed = [b for b in budgets if budget_status(budget=b, as_of=month_end).over]
    assert crossed
    assert len(crossed) < len(budgets)
    alerts = BudgetAlert.objects.count()
    assert BudgetAlert.objects.filter(kind="actual", threshold=100).count() == len(crossed)
    assert "alert sent: actual 100 %" in text

    # Idempotent: a second run duplicates nothing.
    counts = (Team.objects.count(), User.objects.count(), MappingRule.objects.count())
    items_before = CostLineItem.objects.count()
    call_command(
        "demo", "--scale", "small", "--month", "2025-10", "--months", "1", "--out", str(tmp_path),
        "--allow-demo-users", stdout=io.StringIO(),
    )  # fmt: skip
    assert (Team.objects.count(), User.objects.count(), MappingRule.objects.count()) == counts
    assert CostLineItem.objects.count() == items_before
    assert Budget.objects.count() == len(budgets)
    assert BudgetAlert.objects.count() == alerts
    again = _exact_sum(AllocatedCost.objects.filter(billing_period=period), "amount")
    assert again == effective
