"""AKS nodes are Azure scale set VMs: the bill names the instance in AdditionalInfo.VMName
("aks-agentpool-42850074-vmss_1") while Kubernetes calls the node by the scale set's computer
name prefix and the instance id in base 36 ("aks-agentpool-42850074-vmss000001"). A pod on that
node is charged the instance's cost."""

from __future__ import annotations

import csv
import io
import json
from decimal import Decimal
from pathlib import Path

import pytest
from django.core.management import call_command

from billing_ingest.models import CostLineItem
from finops.attribution import engine
from finops.attribution.models import AllocatedCost
from tests.builders import pod, pod_list

pytestmark = pytest.mark.django_db

SAMPLE = "azure/ea_amortized_cost_small.csv"
VM_NAME = "aks-agentpool-42850074-vmss_1"
NODE = "aks-agentpool-42850074-vmss000001"


@pytest.mark.parametrize(
    ("billed", "node"),
    [
        ("aks-agentpool-42850074-vmss_1", "aks-agentpool-42850074-vmss000001"),
        ("aks-gpu-12345678-vmss_35", "aks-gpu-12345678-vmss00000z"),
        ("aks-gpu-12345678-vmss_36", "aks-gpu-12345678-vmss000010"),
        ("aks-gpu-12345678-vmss_1296", "aks-gpu-12345678-vmss000100"),
    ],
)
def test_an_instance_name_matches_its_node_name(billed: str, node: str) -> None:
    names = engine.node_name_map([node, "other-node"])
    assert engine.match_node(resource_name=billed, resource_id="", tags={}, node_names=names) == (
        node
    )


def test_a_name_that_is_no_instance_matches_nothing() -> None:
    names = engine.node_name_map(["gpu000001"])
    for billed in ("gpu_x", "gpu-1", "_1"):
        assert (
            engine.match_node(resource_name=billed, resource_id="", tags={}, node_names=names)
            is None
        )


def test_the_parser_names_the_instance_not_the_scale_set(samples_dir: Path) -> None:
    call_command("ingest_billing", "--format", "azure", str(samples_dir / SAMPLE), "--no-attribute")
    names = set(
        CostLineItem.objects.filter(resource_id__iendswith="/aks-agentpool-42850074-vmss")
        .values_list("resource_name", flat=True)
        .distinct()
    )
    assert VM_NAME in names


def test_a_pod_on_the_aks_node_is_charged_the_instance_cost(
    samples_dir: Path, tmp_path: Path
) -> None:
    path = samples_dir / SAMPLE
    with path.open(encoding="utf-8-sig", newline="") as handle:
        (row,) = [
            r for r in csv.DictReader(handle) if f'"VMName":"{VM_NAME}"' in r["AdditionalInfo"]
        ]
    month, day, year = row["Date"].split("/")
    pods = tmp_path / "pods.json"
    serving = pod(
        "etl-0",
        "analytics",
        node=NODE,
        start=f"{year}-{month}-{day}T00:00:00Z",
        phase="Succeeded",
        finished=[f"{year}-{month}-{day}T23:59:59Z"],
        labels={"team": "analytics"},
    )
    pods.write_text(json.dumps(pod_list(serving)))
    call_command("ingest_jobs", "--format", "kubernetes", str(pods), "--no-attribute")
    call_command("ingest_billing", "--format", "azure", str(path), stdout=io.StringIO())

    charged = AllocatedCost.objects.filter(node=NODE, job__isnull=False)
    assert charged.exists()
    assert {c.team and c.team.slug for c in charged} == {"analytics"}
    line = CostLineItem.objects.get(resource_name=VM_NAME)
    total = sum((c.amount for c in AllocatedCost.objects.filter(node=NODE)), Decimal(0))
    assert total == line.effective_cost
