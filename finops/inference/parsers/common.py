"""What the inference usage parsers share: the row key, counts, label lookups, length checks."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

# One BadField for the shared Prometheus tokenizer and the inference parsers (re-exported).
from billing_ingest.parsers.prometheus_text import BadField as BadField
from finops.inference.models import InferenceUsage

COUNT_FIELDS = ("requests", "inferences", "prompt_tokens", "generation_tokens")

# Endpoint id, first present wins. `finops_io_endpoint` is the pod label `finops.io/endpoint`
# after Prometheus' labelmap (dots become underscores); `endpoint` an explicit label; else the
# served model (vLLM `model_name`, Triton `model`).
ENDPOINT_LABELS = ("finops_io_endpoint", "endpoint", "model_name", "model")
MODEL_LABELS = ("model_name", "model")
TEAM_LABELS = ("finops_io_team", "team")
# Kubernetes service discovery relabelled as `pod`/`namespace` (kube-prometheus) or the older
# `kubernetes_pod_name`/`kubernetes_namespace`.
POD_LABELS = ("pod", "kubernetes_pod_name")
NAMESPACE_LABELS = ("namespace", "kubernetes_namespace")

_TEXT_FIELDS = ("endpoint", "model_name", "team_hint", "namespace", "pod")


@dataclass(frozen=True, slots=True)
class UsageKey:
    endpoint: str
    model_name: str
    team_hint: str
    namespace: str
    pod: str
    window_start: datetime
    window_end: datetime


@dataclass(slots=True)
class Counts:
    values: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNT_FIELDS, 0))


def first_label(labels: Mapping[str, str], keys: tuple[str, ...]) -> str:
    for key in keys:
        value = labels.get(key, "").strip()
        if value:
            return value
    return ""


def whole_count(value: Decimal | str, field_name: str) -> int:
    """A counter value or count cell as an int: finite, not negative, whole ("12" or "12.0",
    the way Prometheus prints float counters)."""
    try:
        number = value if isinstance(value, Decimal) else Decimal(value.strip())
    except InvalidOperation:
        raise BadField(field_name, f"not a number: {value!r}") from None
    if not number.is_finite():
        raise BadField(field_name, f"not a finite number: {value!r}")
    if number < 0:
        raise BadField(field_name, f"negative count: {value!r}")
    if number != number.to_integral_value():
        raise BadField(field_name, f"not a whole number: {value!r}")
    return int(number)


def check_lengths(key: UsageKey) -> None:
    for name in _TEXT_FIELDS:
        limit = getattr(InferenceUsage._meta.get_field(name), "max_length", None)
        if limit is not None and len(getattr(key, name)) > limit:
            raise BadField(name, f"{name} longer than {limit} characters")


def merged_team_hints(totals: Mapping[UsageKey, Counts]) -> dict[UsageKey, Counts]:
    """One key per stored row: series that differ only in their team label (relabelled midway)
    are summed under the first non-empty team hint in sort order."""
    hints: dict[tuple[Any, ...], str] = {}
    for key in totals:
        ident = (key.endpoint, key.model_name, key.namespace, key.pod, key.window_start)
        if key.team_hint and (ident not in hints or key.team_hint < hints[ident]):
            hints[ident] = key.team_hint
    result: dict[UsageKey, Counts] = {}
    for key, counts in totals.items():
        ident = (key.endpoint, key.model_name, key.namespace, key.pod, key.window_start)
        one = replace(key, team_hint=hints.get(ident, ""))
        acc = result.setdefault(one, Counts())
        for name, value in counts.values.items():
            acc.values[name] += value
    return result


def rows_of(totals: Mapping[UsageKey, Counts]) -> list[dict[str, Any]]:
    """InferenceUsage field dicts, sorted by window then key for a stable write order."""
    ordered = sorted(
        totals.items(),
        key=lambda item: (item[0].window_start, item[0].endpoint, item[0].model_name,
                          item[0].namespace, item[0].pod),
    )  # fmt: skip
    return [
        {
            "endpoint": key.endpoint,
            "model_name": key.model_name,
            "team_hint": key.team_hint,
            "namespace": key.namespace,
            "pod": key.pod,
            "window_start": key.window_start,
            "window_end": key.window_end,
            **counts.values,
        }
        for key, counts in ordered
    ]
