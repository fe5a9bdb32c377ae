"""`ingest_jobs --format kubernetes`: command, stored pods, team mapping for pods, and MIG pods
attributed end to end against a FOCUS bill."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from fractions import Fraction
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from billing_ingest.models import Cluster, ImportBatch, JobRecord
from finops.attribution.inputs.team_mapping import TeamResolver
from finops.attribution.models import AllocatedCost, RunCost
from finops.core.money import MONEY_PLACES
from finops.org.models import MappingRule, Team
from tests.builders import container, pod, pod_list

pytestmark = pytest.mark.django_db


def write(path: Path, document: Any) -> Path:
    path.write_text(json.dumps(document))
    return path


def ingest(path: Path, *args: str) -> str:
    out = StringIO()
    call_command(
        "ingest_jobs", "--format", "kubernetes", str(path), "--cluster", "gke-1", *args,
        "--no-attribute", stdout=out, stderr=out,
    )  # fmt: skip
    return out.getvalue()


# --- the command ------------------------------------------------------------------------------


def test_pod_list_is_stored_one_record_per_started_pod(tmp_path: Path) -> None:
    labels = {"finops.io/run": "llama", "team": "nlp", "finops.io/endpoint": "chat"}
    path = write(
        tmp_path / "pods.json",
        pod_list(
            pod(
                "train-0", containers=[container(**{"nvidia.com/mig-3g.40gb": "1"})], labels=labels
            ),
            pod("waiting", node=None, start=None, phase="Pending"),
        ),
    )
    out = ingest(path)
    assert "2 pods read, 1 jobs stored, 1 unscheduled or not-started pods skipped" in out
    job = JobRecord.objects.get()
    assert (job.cluster, job.job_id, job.namespace, job.account) == (
        "gke-1", "vision/train-0", "vision", "nlp",
    )  # fmt: skip
    assert job.exact_gpus() == Fraction(3, 7)
    assert job.gpus == Decimal("0.428571")
    assert (job.run_id, job.endpoint, job.labels) == ("llama", "chat", labels)
    assert job.nodes == ["gpu-node-1"]
    assert job.end is None
    assert job.state == "RUNNING"
    assert ImportBatch.objects.get().format == "kubernetes"


def test_a_later_dump_finishes_the_running_pod_in_place(tmp_path: Path) -> None:
    ingest(write(tmp_path / "a.json", pod_list(pod("p"))))
    first = JobRecord.objects.get()
    done = pod("p", phase="Succeeded", finished=["2025-06-03T12:00:00Z"])
    ingest(write(tmp_path / "b.json", pod_list(done)))
    job = JobRecord.objects.get()
    assert job.pk == first.pk
    assert job.state == "COMPLETED"
    assert job.end == dt.datetime(2025, 6, 3, 12, tzinfo=dt.UTC)


def test_gpu_sharing_replicas_are_stored_on_the_cluster_and_used(tmp_path: Path) -> None:
    shared = pod(containers=[container(**{"nvidia.com/gpu.shared": "1"})])
    ingest(write(tmp_path / "a.json", pod_list(shared)), "--gpu-sharing-replicas", "4")
    assert Cluster.objects.get(name="gke-1").gpu_sharing_replicas == 4
    assert JobRecord.objects.get().exact_gpus() == Fraction(1, 4)


def test_gpu_sharing_replicas_below_one_are_refused(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="at least 1"):
        ingest(write(tmp_path / "a.json", pod_list(pod())), "--gpu-sharing-replicas", "0")
    assert not ImportBatch.objects.exists()


def test_a_broken_pod_fails_the_batch_and_stores_nothing(tmp_path: Path) -> None:
    bad = pod("bad")
    bad["status"]["startTime"] = "soon"
    path = write(tmp_path / "pods.json", pod_list(pod("good"), bad))
    with pytest.raises(CommandError, match="1 of 1 file"):
        ingest(path)
    batch = ImportBatch.objects.get()
    assert batch.status == ImportBatch.Status.FAILED
    assert "items[1].status.startTime" in batch.error
    assert "pods.json" in batch.error
    assert not JobRecord.objects.exists()


# --- team mapping for pods --------------------------------------------------------------------


def resolve(**job: Any) -> int | str | None:
    resolver = TeamResolver.from_db()
    ref = resolver.job_team(**job)
    resolver.materialise()
    team_id = resolver.team_id(ref)
    return None if team_id is None else Team.objects.get(pk=team_id).slug


def test_namespace_and_label_rules_in_priority_order(team: Team, other_team: Team) -> None:
    MappingRule.objects.create(kind="namespace", value="research", team=team, priority=20)
    MappingRule.objects.create(
        kind="label", key="cost-center", value="asr", team=other_team, priority=10
    )
    pod_job = {"account": "research", "namespace": "research"}
    assert resolve(**pod_job) == "vision"
    assert resolve(**pod_job, labels={"cost-center": "asr"}) == "speech"  # priority 10 first
    assert resolve(**pod_job, labels={"cost-center": "other"}) == "vision"


def test_at_equal_priority_the_namespace_rule_comes_before_the_label_rule(
    team: Team, other_team: Team
) -> None:
    # Created label first: creation order alone would let the label rule win.
    MappingRule.objects.create(kind="label", key="cost-center", value="asr", team=other_team)
    MappingRule.objects.create(kind="namespace", value="research", team=team)
    pod_job = {"account": "research", "namespace": "research", "labels": {"cost-center": "asr"}}
    assert resolve(**pod_job) == "vision"


def test_at_equal_priority_a_tag_rule_comes_before_a_sub_account_rule(
    team: Team, other_team: Team
) -> None:
    MappingRule.objects.create(kind="sub_account", value="123456789012", team=other_team)
    MappingRule.objects.create(kind="tag", key="cost-center", value="cv", team=team)
    resolver = TeamResolver.from_db()
    tagged = resolver.line_team(tags={"cost-center": "cv"}, sub_account="123456789012")
    untagged = resolver.line_team(tags={}, sub_account="123456789012")
    assert (tagged, untagged) == (team.pk, other_team.pk)


def test_account_rules_speak_about_slurm_jobs_only(team: Team, other_team: Team) -> None:
    MappingRule.objects.create(kind="slurm_account", value="ml", team=team)
    MappingRule.objects.create(kind="namespace", value="ml", team=other_team)
    assert resolve(account="ml") == "vision"  # a Slurm job: no namespace
    assert resolve(account="ml", namespace="ml") == "speech"  # a pod in namespace ml


def test_unmapped_pod_is_owned_by_a_team_named_after_its_account() -> None:
    # The parsers set account to the team label when present, else to the namespace.
    assert resolve(account="nlp", namespace="research", labels={"team": "nlp"}) == "nlp"
    assert resolve(account="research", namespace="research") == "research"
    assert Team.objects.get(slug="research").name == "research"


# --- end to end: FOCUS bill + MIG pods -> attribute -------------------------------------------

NODE_COST = Decimal("29.387394000123")  # one a2-highgpu-8g hour (8 A100)
BILL_START = dt.datetime(2025, 6, 3, 10, tzinfo=dt.UTC)
FOCUS_HEADER = (
    "BillingAccountId,BillingCurrency,BillingPeriodStart,BillingPeriodEnd,ChargeCategory,"
    "ChargePeriodStart,ChargePeriodEnd,ProviderName,ResourceName,ServiceName,BilledCost,"
    "EffectiveCost,x_InstanceType"
)
# The 3g pod runs 10:00:00-10:37:13; the 1g pod starts 10:05:00 and is still running (cost to
# date: to the end of the bill's hour).
MIG3_SECONDS = 37 * 60 + 13
MIG1_SECONDS = 55 * 60


def _bill(tmp_path: Path) -> Path:
    path = tmp_path / "bill.csv"
    path.write_text(
        f"{FOCUS_HEADER}\n"
        "acct-1,USD,2025-06-01T00:00:00Z,2025-07-01T00:00:00Z,Usage,2025-06-03T10:00:00Z,"
        f"2025-06-03T11:00:00Z,Google Cloud,gpu-node-1,Compute Engine,{NODE_COST},{NODE_COST},"
        "a2-highgpu-8g\n"
    )
    return path


def _pods(tmp_path: Path) -> Path:
    big = pod(
        "mig3",
        phase="Succeeded",
        containers=[container(**{"nvidia.com/mig-3g.40gb": "1"})],
        finished=["2025-06-03T10:37:13Z"],
        labels={"finops.io/run": "run-3g"},
    )
    small = pod(
        "mig1",
        namespace="speech",
        containers=[container(**{"nvidia.com/mig-1g.10gb": "1"})],
        start="2025-06-03T10:05:00Z",
        labels={"finops.io/run": "run-1g"},
    )
    return write(tmp_path / "pods.json", pod_list(big, small))


def _expected_shares() -> dict[str, int]:
    """Hand computation in MONEY_QUANTUM units: bucket cost x GPU-seconds / (8 GPUs x 3600 s),
    then largest remainder over the two pods and idle (ties to the earlier part)."""
    total = int(NODE_COST.scaleb(MONEY_PLACES))
    weights = {
        "run-3g": Fraction(3, 7) * MIG3_SECONDS,
        "run-1g": Fraction(1, 7) * MIG1_SECONDS,
    }
    capacity = Fraction(8 * 3600)
    weights["idle"] = capacity - sum(weights.values())
    exact = {key: total * w / capacity for key, w in weights.items()}
    parts = {key: int(value) for key, value in exact.items()}  # floor: all positive
    missing = total - sum(parts.values())
    order = sorted(exact, key=lambda key: -(exact[key] - parts[key]))
    for key in order[:missing]:
        parts[key] += 1
    assert sum(parts.values()) == total
    return parts


def _attribute(tmp_path: Path) -> None:
    call_command("ingest_billing", "--format", "focus", str(_bill(tmp_path)), "--no-attribute")
    ingest(_pods(tmp_path))
    call_command("attribute", "--month", "2025-06", stdout=StringIO())


def test_mig_pods_conserve_the_node_bill_and_land_on_their_namespace_teams(
    tmp_path: Path,
) -> None:
    _attribute(tmp_path)
    allocated = sum((row.amount for row in AllocatedCost.objects.all()), Decimal(0))
    assert allocated == NODE_COST
    runs = {run.run_id: run for run in RunCost.objects.select_related("team")}
    assert set(runs) == {"run-3g", "run-1g"}
    # No rule, no team label: the namespace.
    assert {run_id: run.team and run.team.slug for run_id, run in runs.items()} == {
        "run-3g": "vision",
        "run-1g": "speech",
    }
    idle = AllocatedCost.objects.get(category="idle")
    assert idle.amount == NODE_COST - runs["run-3g"].cost - runs["run-1g"].cost
    # The pods hold at most 3/7 + 1/7 of one of the node's 8 GPUs at any time.
    assert Fraction(idle.amount) >= Fraction(NODE_COST) * (1 - Fraction(4, 7) / 8)


def test_mig_pods_are_charged_their_exact_fraction_of_one_gpu(tmp_path: Path) -> None:
    _attribute(tmp_path)
    expected = _expected_shares()
    units = {run.run_id: int(run.cost.scaleb(MONEY_PLACES)) for run in RunCost.objects.all()}
    idle = AllocatedCost.objects.get(category="idle").amount
    assert units == {"run-3g": expected["run-3g"], "run-1g": expected["run-1g"]}
    assert int(idle.scaleb(MONEY_PLACES)) == expected["idle"]
    # GPU-seconds too: 3/7 x 2233 s and 1/7 x 3300 s, to the 6 stored places.
    seconds = {run.run_id: run.gpu_seconds for run in RunCost.objects.all()}
    assert seconds["run-3g"] == six_places(Fraction(3, 7) * MIG3_SECONDS)
    assert seconds["run-1g"] == six_places(Fraction(1, 7) * MIG1_SECONDS)


def six_places(value: Fraction) -> Decimal:
    quotient = Decimal(value.numerator) / Decimal(value.denominator)
    return quotient.quantize(Decimal("0.000001"))
