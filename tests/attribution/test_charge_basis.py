"""Charge basis per cluster (DESIGN 5.3): `requested` (default) or `used`, hand-computed.

The scene (8-GPU p5.48xlarge nodes, $80 for 2025-06-03 00:00-01:00 UTC each, so $10 per GPU-hour):
- gpu-a (cluster c1): job 1 (vision) holds 4 GPUs all hour, utilisation 50%.
- gpu-b (cluster c2): job 2 (speech) holds 4 GPUs all hour, utilisation 50%.
- gpu-c (cluster c1): job 3 (speech) holds 4 GPUs all hour, no utilisation row.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from billing_ingest.models import CostLineItem, ImportBatch, JobGpuUtilisation, JobRecord
from billing_ingest.services.utilisation import parse_utilisation
from finops.attribution.models import AllocatedCost, ChargeBasis, RunCost
from finops.org.models import Team

pytestmark = pytest.mark.django_db

MONTH = dt.date(2025, 6, 1)
T0 = dt.datetime(2025, 6, 3, tzinfo=dt.UTC)


def at(hours: float) -> dt.datetime:
    return T0 + dt.timedelta(hours=hours)


def node_line(batch: ImportBatch, node: str, cost: str) -> CostLineItem:
    return CostLineItem.objects.create(
        batch=batch, source="aws", billing_period=MONTH,
        billing_period_start=dt.datetime(2025, 6, 1, tzinfo=dt.UTC), provider_name="AWS",
        billing_account_id="111", billing_currency="USD", charge_period_start=at(0),
        charge_period_end=at(1), billed_cost=Decimal(cost), effective_cost=Decimal(cost),
        service_name="Amazon EC2", resource_name=node, x_instance_type="p5.48xlarge",
    )  # fmt: skip


def job(batch: ImportBatch, job_id: str, node: str, account: str, cluster: str) -> JobRecord:
    return JobRecord.objects.create(
        batch=batch, cluster=cluster, job_id=job_id, state="COMPLETED", start=at(0), end=at(1),
        gpus=Decimal(4), nodes=[node], account=account, run_id=f"run-{job_id}",
    )  # fmt: skip


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def ingest(path: Path, cluster: str) -> str:
    out = StringIO()
    call_command(
        "ingest_utilisation", "--format", "csv", str(path), "--cluster", cluster, stdout=out
    )
    return out.getvalue()


@pytest.fixture
def scene(team: Team, other_team: Team, tmp_path: Path) -> dict[str, JobRecord]:
    billing = ImportBatch.objects.create(
        kind="billing", format="focus", source="aws", file_name="f", status="succeeded"
    )
    jobs = ImportBatch.objects.create(
        kind="jobs", format="slurm", source="c1", file_name="j", status="succeeded"
    )
    for node in ("gpu-a", "gpu-b", "gpu-c"):
        node_line(billing, node, "80")
    scene = {
        "job1": job(jobs, "1", "gpu-a", team.slug, "c1"),
        "job2": job(jobs, "2", "gpu-b", other_team.slug, "c2"),
        "job3": job(jobs, "3", "gpu-c", other_team.slug, "c1"),
    }
    ingest(write(tmp_path, "c1.csv", "job_id,utilisation\n1,50%\n"), "c1")
    ingest(write(tmp_path, "c2.csv", "utilisation,job_id\n0.5,2\n"), "c2")
    return scene


def attribute() -> str:
    out = StringIO()
    call_command("attribute", "--month", "2025-06", stdout=out)
    return out.getvalue()


def per_node(category: str) -> dict[str, Decimal]:
    totals: dict[str, Decimal] = {}
    for row in AllocatedCost.objects.filter(category=category):
        totals[row.node] = totals.get(row.node, Decimal(0)) + row.amount
    return totals


def gpu_seconds(job: JobRecord) -> Decimal:
    rows = AllocatedCost.objects.filter(job=job, category="training")
    return sum((r.gpu_seconds for r in rows), Decimal(0))


def test_default_basis_is_requested(scene: dict[str, JobRecord]) -> None:
    # No ChargeBasis rows: 4 of 8 GPUs for the hour of an $80 node -> 40, idle 40, everywhere.
    output = attribute()
    assert per_node("training") == {"gpu-a": 40, "gpu-b": 40, "gpu-c": 40}
    assert per_node("idle") == {"gpu-a": 40, "gpu-b": 40, "gpu-c": 40}
    assert gpu_seconds(scene["job1"]) == 4 * 3600
    assert "difference 0" in output


def test_used_basis_charges_the_utilised_gpus_and_idles_the_rest(
    scene: dict[str, JobRecord],
) -> None:
    ChargeBasis.objects.create(cluster="c1", basis="used")
    ChargeBasis.objects.create(cluster="c2", basis="requested")
    attribute()
    # gpu-a (c1, used): 4 GPUs x 50% = 2 GPU-hours x $10 = 20; idle 80 - 20 = 60.
    # gpu-b (c2, requested): 4 GPU-hours -> 40 / 40 despite its 50% utilisation.
    # gpu-c (c1, used, no utilisation row): charged as requested -> 40 / 40.
    assert per_node("training") == {"gpu-a": 20, "gpu-b": 40, "gpu-c": 40}
    assert per_node("idle") == {"gpu-a": 60, "gpu-b": 40, "gpu-c": 40}
    # GPU-seconds on the ledger are the charged ones.
    assert gpu_seconds(scene["job1"]) == 2 * 3600
    assert gpu_seconds(scene["job2"]) == 4 * 3600
    assert gpu_seconds(scene["job3"]) == 4 * 3600
    run = RunCost.objects.get(run_id="run-1")
    assert (run.cost, run.gpu_seconds) == (Decimal(20), Decimal(7200))


def test_used_basis_stays_exact_for_a_utilisation_with_no_short_form(
    scene: dict[str, JobRecord], tmp_path: Path
) -> None:
    ChargeBasis.objects.create(cluster="c1", basis="used")
    # 1/3 stored as 0.333333: 4 x 0.333333 = 1.333332 GPU-hours x $10 = 13.33332.
    ingest(write(tmp_path, "third.csv", "job_id,utilisation\n1,0.333333\n"), "c1")
    attribute()
    assert per_node("training")["gpu-a"] == Decimal("13.33332")
    assert per_node("idle")["gpu-a"] == Decimal("66.66668")
    assert gpu_seconds(scene["job1"]) == Decimal("4799.9952")


def test_conservation_is_exact_on_every_line(scene: dict[str, JobRecord]) -> None:
    ChargeBasis.objects.create(cluster="c1", basis="used")
    ChargeBasis.objects.create(cluster="c2", basis="used")
    attribute()
    for line in CostLineItem.objects.all():
        rows = AllocatedCost.objects.filter(node=line.resource_name)
        assert sum((r.amount for r in rows), Decimal(0)) == line.effective_cost
    total = sum((r.amount for r in AllocatedCost.objects.all()), Decimal(0))
    assert total == Decimal(240)
    assert per_node("training") == {"gpu-a": 20, "gpu-b": 20, "gpu-c": 40}


def test_zero_utilisation_leaves_the_whole_node_idle(
    scene: dict[str, JobRecord], tmp_path: Path
) -> None:
    ChargeBasis.objects.create(cluster="c1", basis="used")
    ingest(write(tmp_path, "zero.csv", "job_id,utilisation\n1,0%\n"), "c1")
    attribute()
    assert "gpu-a" not in per_node("training")
    assert per_node("idle")["gpu-a"] == 80


def test_a_new_import_replaces_per_job(scene: dict[str, JobRecord], tmp_path: Path) -> None:
    ingest(write(tmp_path, "more.csv", "job_id,utilisation\n1,0.25\n3,75 %\n"), "c1")
    values = {(u.cluster, u.job_id): u.utilisation for u in JobGpuUtilisation.objects.all()}
    assert values == {
        ("c1", "1"): Decimal("0.25"),
        ("c1", "3"): Decimal("0.75"),
        ("c2", "2"): Decimal("0.5"),
    }


def test_the_same_file_twice_is_a_no_op(scene: dict[str, JobRecord], tmp_path: Path) -> None:
    path = tmp_path / "c1.csv"
    assert "skipped" in ingest(path, "c1")
    assert JobGpuUtilisation.objects.count() == 2


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0.5", "0.5"), ("50%", "0.5"), (" 12.5 % ", "0.125"), ("1", "1"), ("100%", "1"),
     ("33.3333333%", "0.333333")],
)  # fmt: skip
def test_utilisation_values(text: str, expected: str) -> None:
    assert parse_utilisation(text) == Decimal(expected)


@pytest.mark.parametrize(
    ("text", "row", "column", "detail"),
    [
        ("job_id,utilisation\n1,0.5\n2,abc\n", 3, "utilisation", "not a number"),
        ("job_id,utilisation\n1,150%\n", 2, "utilisation", "between 0% and 100%"),
        ("job_id,utilisation\n1,1.5\n", 2, "utilisation", "between 0 and 1"),
        ("job_id,utilisation\n1,-0.1\n", 2, "utilisation", "between"),
        ("job_id,utilisation\n,0.5\n", 2, "job_id", "empty"),
        ("job_id,utilisation\n1,0.5\n1,0.6\n", 3, "job_id", "already appears in row 2"),
        ("job_id,utilisation\n1\n", 2, "utilisation", "too few cells"),
        ("job,utilisation\n1,0.5\n", 1, "job_id", "no job_id column"),
    ],
)
def test_csv_errors_name_file_row_and_column(
    tmp_path: Path, text: str, row: int, column: str, detail: str
) -> None:
    path = write(tmp_path, "bad.csv", text)
    with pytest.raises(CommandError) as caught:
        ingest(path, "c1")
    message = str(caught.value)
    assert f"file {path}, row {row}, column {column}: " in message
    assert detail in message
    # Nothing stored, and the failure is on the batch.
    assert not JobGpuUtilisation.objects.exists()
    batch = ImportBatch.objects.get(kind="utilisation")
    assert batch.status == "failed"
    assert f"row {row}" in batch.error


def test_unknown_node_type_is_sized_by_requested_gpus() -> None:
    from fractions import Fraction

    from finops.attribution import engine

    # An unknown node type is sized by the GPUs its jobs hold: 4 requested, not the 2 used.
    # $40 for the hour: job 4 x 50% = 2 of 4 GPUs -> 20, idle 20.
    line = engine.LineItem(id=1, start=0, end=3600, cost=Decimal(40), node="n1", gpus=None)
    used = engine.Job(
        id=1, nodes=("n1",), start=0, end=3600, gpu_micros=4 * engine.GPU_SCALE,
        gpu_denominator=2, requested_gpus=Fraction(4),
    )  # fmt: skip
    shares = engine.allocate([line], [used])
    totals = {s.category: s.amount for s in shares}
    assert totals == {"training": Decimal(20), "idle": Decimal(20)}
