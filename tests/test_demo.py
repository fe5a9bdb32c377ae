"""The demo generator: bills and sacct logs in the real formats, a sane schedule, and the
end-to-end `manage.py demo` through the real ingest and attribution commands."""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from billing_ingest.models import CostLineItem, ImportBatch, JobRecord
from finops.attribution.models import AllocatedCost
from finops.demo.dataset import DemoDataset, dataset_build, dataset_write
from finops.demo.fleet import CLOUDS, Month, Scale, build_fleet
from finops.demo.generate_focus import FOCUS_COLUMNS
from finops.demo.generate_sacct import SACCT_FIELDS, compress_hostlist
from finops.demo.management.commands.demo import previous_month
from finops.org.models import MappingRule, Profile, Team

MONTH = Month.parse("2025-10")
# Columns the brief and DESIGN section 4 rely on, by their FOCUS names.
REQUIRED_COLUMNS = {
    "BillingAccountId", "BillingAccountName", "BillingCurrency", "BillingPeriodStart",
    "BillingPeriodEnd", "ChargeCategory", "ChargeClass", "ChargeDescription", "ChargeFrequency",
    "ChargePeriodStart", "ChargePeriodEnd", "CommitmentDiscountId", "CommitmentDiscountStatus",
    "CommitmentDiscountType", "CommitmentDiscountCategory", "ConsumedQuantity", "ConsumedUnit",
    "ContractedCost", "ContractedUnitPrice", "EffectiveCost", "BilledCost", "ListCost",
    "ListUnitPrice", "PricingCategory", "PricingQuantity", "PricingUnit", "ProviderName",
    "ServiceProviderName", "PublisherName", "InvoiceIssuerName", "RegionId", "RegionName",
    "ResourceId", "ResourceName", "ResourceType", "ServiceCategory", "ServiceName", "SkuId",
    "SkuPriceId", "SubAccountId", "SubAccountName", "Tags", "x_InstanceType",
}  # fmt: skip
TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")
SACCT_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}$")


@pytest.fixture(scope="module")
def small() -> DemoDataset:
    return dataset_build(seed=42, month=MONTH, scale=Scale.SMALL)


@pytest.fixture(scope="module")
def small_files(small: DemoDataset, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo")
    dataset_write(dataset=small, out=out)
    return out / MONTH.label


def _read_focus(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    raw = path.read_bytes()
    if path.suffix == ".gz":
        raw = gzip.decompress(raw)
    reader = csv.DictReader(io.StringIO(raw.decode("utf-8")))
    rows = list(reader)
    return list(reader.fieldnames or []), rows


def _billing_files(root: Path) -> list[Path]:
    return sorted((root / "billing").iterdir())


def _exact_sum(queryset, field: str) -> Decimal:
    # SQLite SUM() over decimals is a float sum: add the stored values in Python instead.
    return sum(queryset.values_list(field, flat=True), Decimal(0))


def _job_end(job_end: int | None, month: Month) -> int:
    return month.seconds if job_end is None else job_end


# --- billing files ---------------------------------------------------------------------------


def test_one_bill_per_provider_one_gzipped(small_files: Path) -> None:
    names = sorted(p.name for p in _billing_files(small_files))
    assert names == ["aws.csv", "azure.csv", "coreweave.csv", "gcp.csv.gz"]
    assert gzip.decompress((small_files / "billing" / "gcp.csv.gz").read_bytes())


def test_focus_files_parse_with_real_column_names_and_decimal_money(small_files: Path) -> None:
    money_columns = ("BilledCost", "EffectiveCost", "ListCost", "ContractedCost")
    for path in _billing_files(small_files):
        header, rows = _read_focus(path)
        assert header == list(FOCUS_COLUMNS)
        assert set(header) >= REQUIRED_COLUMNS, REQUIRED_COLUMNS - set(header)
        assert rows
        for row in rows:
            for column in money_columns:
                if row[column]:
                    assert "E" not in row[column] and "e" not in row[column]
                    Decimal(row[column])  # parses exactly
            for column in ("ChargePeriodStart", "ChargePeriodEnd", "BillingPeriodStart"):
                assert TIMESTAMP.match(row[column]), row[column]
            assert row["BillingPeriodStart"] == "2025-10-01T00:00:00Z"
            assert row["BillingPeriodEnd"] == "2025-11-01T00:00:00Z"  # exclusive
            assert row["ChargePeriodStart"] < row["ChargePeriodEnd"]
            if row["Tags"]:
                assert isinstance(json.loads(row["Tags"]), dict)


def test_totals_by_provider_balance_cash_and_amortised(small_files: Path) -> None:
    """Over a whole month every commitment fee is fully amortised onto Used/Unused rows, so each
    provider's BilledCost total equals its EffectiveCost total."""
    totals: dict[str, tuple[Decimal, Decimal]] = {}
    for path in _billing_files(small_files):
        _, rows = _read_focus(path)
        billed = sum((Decimal(r["BilledCost"]) for r in rows), Decimal(0))
        effective = sum((Decimal(r["EffectiveCost"]) for r in rows), Decimal(0))
        (provider,) = {r["ProviderName"] for r in rows}
        totals[provider] = (billed, effective)
        assert billed == effective, provider
        assert billed > 0
    assert set(totals) == {"AWS", "GCP", "Azure", "CoreWeave"}


def test_commitments_follow_the_focus_amortisation_model(small_files: Path) -> None:
    purchases: dict[str, Decimal] = {}
    amortised: dict[str, Decimal] = defaultdict(Decimal)
    statuses: dict[str, set[str]] = defaultdict(set)
    for path in _billing_files(small_files):
        for row in _read_focus(path)[1]:
            cid = row["CommitmentDiscountId"]
            if not cid:
                continue
            if row["ChargeCategory"] == "Purchase":
                assert Decimal(row["EffectiveCost"]) == 0
                assert row["ChargeFrequency"] == "Recurring"
                purchases[cid] = Decimal(row["BilledCost"])
            else:
                assert row["ChargeCategory"] == "Usage"
                assert row["PricingCategory"] == "Committed"
                assert Decimal(row["BilledCost"]) == 0
                amortised[cid] += Decimal(row["EffectiveCost"])
                statuses[cid].add(row["CommitmentDiscountStatus"])
                if row["CommitmentDiscountStatus"] == "Unused":
                    assert row["ResourceId"] == cid
    assert len(purchases) == 3  # savings plan, CUD, reservation
    for cid, fee in purchases.items():
        assert amortised[cid] == fee, cid
    assert any("Unused" in s for s in statuses.values())  # the reservation's maintenance gap


def test_bill_mixes_pricing_categories_and_non_gpu_charges(small_files: Path) -> None:
    rows = [r for p in _billing_files(small_files) for r in _read_focus(p)[1]]
    assert {r["PricingCategory"] for r in rows} >= {"Standard", "Dynamic", "Committed"}
    assert {r["ChargeCategory"] for r in rows} == {"Usage", "Purchase", "Tax", "Credit"}
    credits = [Decimal(r["BilledCost"]) for r in rows if r["ChargeCategory"] == "Credit"]
    assert credits and all(c < 0 for c in credits)
    assert any(json.loads(r["Tags"] or "{}").get("team") == "vision" for r in rows)
    untagged_storage = [r for r in rows if r["ServiceCategory"] == "Storage" and not r["Tags"]]
    assert untagged_storage
    assert any(r["ServiceCategory"] == "Networking" for r in rows)
    assert any(r["ServiceSubcategory"] == "Support" for r in rows)
    # Spot is priced 40-60 % below on demand.
    for r in rows:
        if r["PricingCategory"] == "Dynamic":
            ratio = Decimal(r["EffectiveCost"]) / Decimal(r["ListCost"])
            assert Decimal("0.39") <= ratio <= Decimal("0.61")


def test_gpu_rows_name_the_nodes_the_jobs_ran_on(small: DemoDataset, small_files: Path) -> None:
    billed_hours: dict[str, set[str]] = defaultdict(set)
    for path in _billing_files(small_files):
        for row in _read_focus(path)[1]:
            if row["x_InstanceType"]:
                billed_hours[row["ResourceName"]].add(row["ChargePeriodStart"])
    assert set(billed_hours) == {n.hostname for n in small.nodes}
    for node in small.nodes:
        assert len(billed_hours[node.hostname]) == len(node.billed_hours())


# --- sacct files -----------------------------------------------------------------------------


def _sacct_lines(root: Path, cluster: str) -> list[list[str]]:
    text = (root / "jobs" / f"{cluster}.sacct").read_text()
    assert text.endswith("\n")
    return [line.split("|") for line in text.splitlines()]


def test_sacct_has_the_parsable2_shape(small_files: Path) -> None:
    for cloud in CLOUDS:
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
        for cloud in CLOUDS
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
    assert any(r["WCKey"] for r in jobs) and any(r["Comment"].startswith("run=") for r in jobs)
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
    used = sum(
        job.gpus * (_job_end(job.end, MONTH) - job.start)
        for jobs in small.jobs.values()
        for job in jobs
        if job.start is not None and job.nodes
    )
    assert 0.65 <= used / capacity <= 0.90


def test_full_scale_figures() -> None:
    dataset = dataset_build(seed=42, month=MONTH, scale=Scale.FULL)
    assert len(dataset.nodes) >= 64
    assert {n.instance_type.name for n in dataset.nodes} == {
        "p5.48xlarge", "p4d.24xlarge", "a3-highgpu-8g", "a2-highgpu-8g",
        "Standard_ND96isr_H100_v5", "Standard_ND96asr_v4", "gd-8xh100ib-i128",
    }  # fmt: skip
    assert any(len(n.up) > 1 or n.up[0] != (0, MONTH.seconds) for n in dataset.nodes)
    line_items = sum(len(rows) for rows in dataset.bills.values())
    assert line_items < 70_000
    assert sum(len(jobs) for jobs in dataset.jobs.values()) >= 5_000
    assert Decimal(1_000_000) < dataset.billed_total() < Decimal(10_000_000)
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


# --- end to end ------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_demo_end_to_end(tmp_path: Path) -> None:
    out = io.StringIO()
    call_command(
        "demo", "--scale", "small", "--month", "2025-10", "--out", str(tmp_path), stdout=out
    )
    root = tmp_path / MONTH.label
    period = MONTH.start.date()

    # Ingest totals equal the sums over the files.
    for path in _billing_files(root):
        _, rows = _read_focus(path)
        source = path.name.split(".")[0] + "-demo"
        batch = ImportBatch.objects.get(source=source, status=ImportBatch.Status.SUCCEEDED)
        items = CostLineItem.objects.filter(batch=batch)
        assert items.count() == len(rows)
        assert _exact_sum(items, "billed_cost") == sum(
            (Decimal(r["BilledCost"]) for r in rows), Decimal(0)
        )
        assert _exact_sum(items, "effective_cost") == sum(
            (Decimal(r["EffectiveCost"]) for r in rows), Decimal(0)
        )
    for cloud in CLOUDS:
        lines = [f for f in _sacct_lines(root, cloud.cluster)[1:] if "." not in f[0]]
        started = {f[0] for f in lines if f[10] != "None assigned"}
        stored = set(
            JobRecord.objects.filter(cluster=cloud.cluster).values_list("job_id", flat=True)
        )
        assert started <= stored <= {f[0] for f in lines}

    # Attribution conserves every cent of the month.
    effective = _exact_sum(CostLineItem.objects.filter(billing_period=period), "effective_cost")
    allocated = _exact_sum(AllocatedCost.objects.filter(billing_period=period), "amount")
    assert allocated == effective

    # Organisation and logins.
    assert Team.objects.filter(slug__in=["vision", "language", "speech", "recsys", "platform"])
    assert User.objects.get(username="finance").check_password("finance-demo")
    lead = Profile.objects.get(user__username="lead")
    assert lead.role == Profile.Role.TEAM_LEAD and lead.teams.count() == 2
    assert MappingRule.objects.filter(kind=MappingRule.Kind.SLURM_ACCOUNT, value="nlp").exists()
    text = out.getvalue()
    assert "http://127.0.0.1:8000" in text and "finance-demo" in text

    # Idempotent: a second run duplicates nothing.
    counts = (Team.objects.count(), User.objects.count(), MappingRule.objects.count())
    items_before = CostLineItem.objects.count()
    call_command(
        "demo", "--scale", "small", "--month", "2025-10", "--out", str(tmp_path),
        stdout=io.StringIO(),
    )  # fmt: skip
    assert (Team.objects.count(), User.objects.count(), MappingRule.objects.count()) == counts
    assert CostLineItem.objects.count() == items_before
    again = _exact_sum(AllocatedCost.objects.filter(billing_period=period), "amount")
    assert again == effective
