"""Waste: a preempted or failed inference pod that served traffic did useful work and is not
waste; a serving pod that answered nothing, and any failed training attempt, are. Serving pods
are inference runs (RunCost.category), not training runs."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from billing_ingest.models import JobRecord
from finops.attribution.models import Category, RunCost
from finops.inference.models import InferenceUsage
from tests.attribution_rows import at, attribute, billing_batch, job, line
from tests.factories import ImportBatchFactory

pytestmark = pytest.mark.django_db


def pod(name: str, state: str, start: float, end: float, endpoint: str = "chat") -> JobRecord:
    return job(
        f"serve/{name}", ["gpu-a"], "4", start, end, state=state, cluster="k8s",
        endpoint=endpoint, namespace="serve", name=name, run_id=name,
    )  # fmt: skip


def usage(at_hour: float, requests: int, pod_name: str = "", endpoint: str = "chat") -> None:
    batch = ImportBatchFactory.create(kind="inference", format="csv", source="k8s")
    InferenceUsage.objects.create(
        batch=batch, cluster="k8s", endpoint=endpoint, namespace="serve" if pod_name else "",
        pod=pod_name, window_start=at(at_hour), window_end=at(at_hour + 1), requests=requests,
    )  # fmt: skip


@pytest.fixture
def node_hours() -> None:
    # Two hours of an 8-GPU node at $80/h: each 4-GPU pod-hour costs $40.
    line(billing_batch(), "160", 0, 2, resource_name="gpu-a", x_instance_type="p5.48xlarge")


def _run(run_id: str) -> RunCost:
    return RunCost.objects.get(run_id=run_id)


def test_preempted_pod_that_served_requests_is_not_waste(node_hours: None) -> None:
    pod("chat-0", "PREEMPTED", 0, 2)
    usage(0, requests=1200, pod_name="chat-0")
    attribute()
    run = _run("chat-0")
    assert run.cost == Decimal("80.00")
    assert run.wasted_cost == 0
    # Still counted as a failed attempt: the state is a fact, waste is a judgement.
    assert run.failed_jobs == 1
    assert run.category == Category.INFERENCE


def test_failed_pod_that_served_nothing_is_waste(node_hours: None) -> None:
    pod("chat-0", "FAILED", 0, 2)
    # Another pod of the endpoint answered; per-pod counters say this one did not.
    usage(0, requests=500, pod_name="chat-9")
    usage(0, requests=0, pod_name="chat-0")
    attribute()
    assert _run("chat-0").wasted_cost == Decimal("80.00")


def test_endpoint_wide_counters_while_the_pod_ran_count_as_served(node_hours: None) -> None:
    pod("chat-0", "FAILED", 0, 1)
    usage(0, requests=10)  # no pod label: the endpoint's traffic in that hour
    pod("chat-1", "FAILED", 1, 2)
    usage(5, requests=10)  # after chat-1 ended: not its traffic
    attribute()
    assert _run("chat-0").wasted_cost == 0
    assert _run("chat-1").wasted_cost == Decimal("40.00")


def test_failed_training_attempt_is_still_waste(node_hours: None) -> None:
    job("7", ["gpu-a"], "4", 0, 2, state="PREEMPTED", run_id="train")
    usage(0, requests=99)  # traffic of an endpoint has nothing to do with a training job
    attribute()
    run = _run("train")
    assert (run.wasted_cost, run.category) == (Decimal("80.00"), Category.TRAINING)


def test_runs_of_serving_pods_are_inference(node_hours: None) -> None:
    pod("chat-0", "RUNNING", 0, 2)
    job("7", ["gpu-a"], "4", 0, 2, run_id="train")
    attribute()
    assert {r.run_id: r.category for r in RunCost.objects.all()} == {
        "chat-0": Category.INFERENCE,
        "train": Category.TRAINING,
    }
    assert dt.date(2025, 6, 1) == _run("train").billing_period
