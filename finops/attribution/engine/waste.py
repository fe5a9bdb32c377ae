"""Which jobs' GPU time is wasted work (RunCost.wasted_cost).

A training attempt that failed or was preempted bought nothing: the run redoes the work from its
last checkpoint. An inference pod is different: every request it answered before it failed was
useful, so a serving pod in a waste state is waste only when it served no traffic while it ran.
A service (JobRecord.service: a server or runner) that ends CANCELLED ended as a COMPLETED one
does (scancel, a scale-down: how a service stops), as finops.waste counts it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass

from django.apps import apps

# Attempts whose GPU time bought nothing. TIMEOUT is not here: long training runs are chained
# jobs that hit the wall-clock limit on purpose and resume from their last checkpoint.
WASTE_STATES = frozenset({"FAILED", "CANCELLED", "PREEMPTED", "NODE_FAIL", "OUT_OF_MEMORY"})


def in_waste_state(state: str, service: bool) -> bool:
    """The attempt ended in a waste state: a cancelled service did not (it stopped as designed)."""
    return state in WASTE_STATES and not (service and state == "CANCELLED")


@dataclass(frozen=True, slots=True)
class ServingPod:
    endpoint: str
    # Kubernetes job id: "namespace/pod".
    job_id: str
    start: dt.datetime
    end: dt.datetime | None


def pods_that_served(pods: Mapping[int, ServingPod]) -> set[int]:
    """The ids of `pods` whose endpoint recorded requests while the pod ran: per pod where the
    usage names pods, else (endpoint-wide counters) any request of the endpoint in that time.

    One query. The usage table belongs to finops.inference, which reads the ledger this app
    writes, so it is looked up through the app registry rather than imported (no import cycle).
    """
    if not pods or not apps.is_installed("finops.inference"):
        return set()
    usage_model = apps.get_model("inference", "InferenceUsage")
    first = min(p.start for p in pods.values())
    ends = [p.end for p in pods.values()]
    query = usage_model.objects.filter(
        endpoint__in={p.endpoint for p in pods.values()}, requests__gt=0, window_end__gt=first
    )
    if None not in ends:
        query = query.filter(window_start__lt=max(e for e in ends if e is not None))
    windows: dict[str, list[tuple[str, str, dt.datetime, dt.datetime]]] = {}
    for endpoint, namespace, pod, start, end in query.values_list(
        "endpoint", "namespace", "pod", "window_start", "window_end"
    ).order_by():
        windows.setdefault(endpoint, []).append((namespace, pod, start, end))
    return {pk for pk, pod in pods.items() if _served(pod, windows.get(pod.endpoint, []))}


def _served(pod: ServingPod, windows: list[tuple[str, str, dt.datetime, dt.datetime]]) -> bool:
    namespace, _, name = pod.job_id.rpartition("/")
    for usage_namespace, usage_pod, start, end in windows:
        if end <= pod.start or (pod.end is not None and start >= pod.end):
            continue
        if not usage_pod or (
            usage_pod == name and (not usage_namespace or usage_namespace == namespace)
        ):
            return True
    return False
