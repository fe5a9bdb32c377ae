"""Kubernetes pods: the GPUs a pod holds, as an exact fraction (module docstring of
billing_ingest/parsers/kubernetes.py: whole GPUs, MIG slices, time-sliced replicas from the node
label the pod selects, the node pool or the cluster), and the JSON-path access that names a bad
value (FieldError)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction
from typing import Any

from finops.core.money import EXACT

GPU_PLACES = Decimal("0.000001")


NVIDIA_GPU = "nvidia.com/gpu"


WHOLE_GPU_RESOURCES = frozenset({NVIDIA_GPU, "amd.com/gpu"})


SHARED_GPU_RESOURCE = "nvidia.com/gpu.shared"


# What a time-sliced node advertises: the plain name by default, `.shared` with renameByDefault.
TIME_SLICED_RESOURCES = frozenset({NVIDIA_GPU, SHARED_GPU_RESOURCE})


# Node labels that tell a node's replicas per GPU, when a pod selects its node by one: GPU
# Feature Discovery's, and GKE's for time-sharing and MPS node pools.
GFD_REPLICAS_LABEL = "nvidia.com/gpu.replicas"


GKE_STRATEGY_LABEL = "cloud.google.com/gke-gpu-sharing-strategy"


GKE_CLIENTS_LABEL = "cloud.google.com/gke-max-shared-clients-per-gpu"


GKE_SHARING_STRATEGIES = frozenset({"time-sharing", "mps"})


# `nvidia.com/mig-3g.40gb`, `nvidia.com/mig-1c.3g.20gb`, `nvidia.com/mig-1g.10gb.me` (media ext.).
_MIG = re.compile(r"nvidia\.com/mig-(?:(\d+)c\.)?(\d+)g\.(\d+)gb(?:\.[a-z0-9]+)*")


MIG_SLICES = 7


# A30: 4 compute slices; its profiles are the only ones with these names.
_A30_PROFILES = frozenset({(1, 6), (2, 12), (4, 24)})


A30_SLICES = 4


CLUSTER_REPLICAS = "the cluster's replicas"


class FieldError(ValueError):
    """A bad value at a JSON path inside one pod; the parser adds file and item index."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path


@dataclass
class PodGpus:
    """What a pod holds, before it is written: the exact GPU count and the resources behind it."""

    gpus: Fraction = Fraction(0)
    resources: dict[str, int] = field(default_factory=dict)

    def divided(self, replicas: int, *, renamed: bool = False) -> list[str]:
        """The time-sliced resources the pod holds that `replicas` divide (on a `renamed` node
        only `nvidia.com/gpu.shared`)."""
        if replicas <= 1:
            return []
        sliced = {SHARED_GPU_RESOURCE} if renamed else TIME_SLICED_RESOURCES
        return sorted(name for name in self.resources if name in sliced)


@dataclass(frozen=True)
class GpuSharing:
    """How many ways the cluster's GPUs are time-sliced: `replicas` for every node, unless the
    node's name starts with a `pools` prefix (node pool -> replicas; the longest prefix wins)."""

    replicas: int = 1
    pools: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for where, value in (("cluster", self.replicas), *self.pools.items()):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"GPU sharing replicas of {where} must be at least 1: {value!r}")

    @property
    def any_set(self) -> bool:
        return self.replicas > 1 or any(n > 1 for n in self.pools.values())

    def describe(self) -> str:
        pools = ", ".join(f"node pool {p}*: {n}" for p, n in sorted(self.pools.items()))
        return f"cluster: {self.replicas}" + (f", {pools}" if pools else "")

    def for_node(self, node: str) -> tuple[int, str]:
        """(replicas, what says so) for a pod on `node` that selects no sharing label."""
        matches = [prefix for prefix in self.pools if node.startswith(prefix)]
        if matches:
            prefix = max(matches, key=len)
            return self.pools[prefix], f"node pool {prefix}*"
        return self.replicas, CLUSTER_REPLICAS


def gpu_fraction(resource: str, *, shared_replicas: int) -> Fraction | None:
    """GPUs one unit of a resource is, or None when the resource is not a GPU. On a time-sliced
    node (`shared_replicas` > 1) `nvidia.com/gpu` is a replica too, as `.shared` is."""
    if resource in TIME_SLICED_RESOURCES:
        return Fraction(1, shared_replicas)
    if resource in WHOLE_GPU_RESOURCES:
        return Fraction(1)
    match = _MIG.fullmatch(resource)
    if match is None:
        return None
    compute, slices, memory = match.group(1), int(match.group(2)), int(match.group(3))
    total = A30_SLICES if (slices, memory) in _A30_PROFILES else MIG_SLICES
    if slices < 1 or slices > total:
        raise ValueError(f"MIG profile {resource!r} has {slices} of {total} slices")
    used = int(compute) if compute is not None else slices
    if used < 1 or used > slices:
        raise ValueError(f"MIG profile {resource!r} has {used} compute slices of {slices}")
    return Fraction(used, total)


def quantity(value: object) -> int:
    """An extended-resource quantity: Kubernetes only allows whole numbers ("2" or 2)."""
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and value.strip().isdigit():
        number = int(value.strip())
    else:
        raise ValueError(f"not a whole-number quantity: {value!r}")
    if number < 0:
        raise ValueError(f"negative quantity: {value!r}")
    return number


def rounded_gpus(gpus: Fraction) -> Decimal:
    """The 6-place value stored in JobRecord.gpus (the exact one is kept beside it)."""
    exact = EXACT.divide(Decimal(gpus.numerator), Decimal(gpus.denominator))
    return exact.quantize(GPU_PLACES, rounding=ROUND_HALF_EVEN)


def _get(obj: Mapping[str, Any], key: str, path: str, kind: type | tuple[type, ...]) -> Any:
    value = obj.get(key)
    if value is not None and not isinstance(value, kind):
        expected = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise FieldError(f"{path}.{key}", f"expected {expected}, found {type(value).__name__}")
    return value


def _list_of_objects(
    obj: Mapping[str, Any], key: str, path: str
) -> list[tuple[str, dict[str, Any]]]:
    items = _get(obj, key, path, list) or []
    result = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise FieldError(f"{path}.{key}[{i}]", "expected an object")
        result.append((f"{path}.{key}[{i}]", item))
    return result


def _container_resources(container: dict[str, Any], path: str) -> dict[str, int]:
    resources = _get(container, "resources", path, dict) or {}
    limits = _get(resources, "limits", f"{path}.resources", dict) or {}
    requests = _get(resources, "requests", f"{path}.resources", dict) or {}
    held: dict[str, int] = {}
    for source, where in ((requests, "requests"), (limits, "limits")):
        # limits are read last: they win where both are given.
        for name, value in source.items():
            if _is_gpu_resource(name):
                try:
                    gpu_fraction(name, shared_replicas=1)  # a bad MIG profile fails here
                    held[name] = quantity(value)
                except ValueError as exc:
                    raise FieldError(f"{path}.resources.{where}.{name}", str(exc)) from None
    return held


def _is_gpu_resource(name: str) -> bool:
    return (
        name in WHOLE_GPU_RESOURCES
        or name == SHARED_GPU_RESOURCE
        or name.startswith("nvidia.com/mig-")
    )


def pod_gpus(
    spec: dict[str, Any], path: str, *, shared_replicas: int, renamed: bool = False
) -> PodGpus:
    """GPUs a pod holds for its lifetime (module docstring: max, not sum, for init containers).
    On a `renamed` node (renameByDefault: its replicas are `nvidia.com/gpu.shared`),
    `nvidia.com/gpu` is a whole GPU."""
    app: dict[str, int] = {}
    for c_path, container in _list_of_objects(spec, "containers", path):
        for name, count in _container_resources(container, c_path).items():
            app[name] = app.get(name, 0) + count
    sidecars: dict[str, int] = {}
    peak_init: dict[str, int] = {}
    for c_path, container in _list_of_objects(spec, "initContainers", path):
        held = _container_resources(container, c_path)
        if container.get("restartPolicy") == "Always":
            # A sidecar runs beside everything started after it.
            for name, count in held.items():
                sidecars[name] = sidecars.get(name, 0) + count
            continue
        for name in set(held) | set(sidecars):
            during = held.get(name, 0) + sidecars.get(name, 0)
            peak_init[name] = max(peak_init.get(name, 0), during)
    effective: dict[str, int] = {}
    for name in set(app) | set(sidecars) | set(peak_init):
        count = max(app.get(name, 0) + sidecars.get(name, 0), peak_init.get(name, 0))
        if count:
            effective[name] = count
    gpus = Fraction(0)
    for name, count in effective.items():
        whole = renamed and name == NVIDIA_GPU
        unit = gpu_fraction(name, shared_replicas=1 if whole else shared_replicas)
        if unit is not None:
            gpus += unit * count
    return PodGpus(gpus=gpus, resources=dict(sorted(effective.items())))


def pod_replicas(
    spec: dict[str, Any], node: str, path: str, sharing: GpuSharing
) -> tuple[int, str]:
    """(replicas per GPU of the pod's node, what says so): a sharing label the pod selects its
    node by, else the node pool's or the cluster's setting."""
    label = GFD_REPLICAS_LABEL
    value, where = selected_node_label(spec, label, path)
    if not value:
        label = GKE_CLIENTS_LABEL
        value, where = selected_node_label(spec, label, path)
        strategy, _ = selected_node_label(spec, GKE_STRATEGY_LABEL, path)
        if strategy and strategy not in GKE_SHARING_STRATEGIES:
            value = ""
    if not value:
        return sharing.for_node(node)
    try:
        replicas = quantity(value)
    except ValueError as exc:
        raise FieldError(where, str(exc)) from None
    if replicas < 1:
        raise FieldError(where, f"GPU sharing replicas must be at least 1: {value!r}")
    return replicas, f"node label {label}={replicas} the pod selects"


def selected_node_label(spec: dict[str, Any], key: str, path: str) -> tuple[str, str]:
    """(value, JSON path) a pod requires of its node's label `key`: its nodeSelector's, else
    the one value every required node-affinity term names with `In`; ("", "") when neither."""
    selector = _get(spec, "nodeSelector", path, dict) or {}
    value = selector.get(key)
    if isinstance(value, str) and value.strip():
        return value.strip(), f"{path}.nodeSelector.{key}"
    terms = _nested(spec, "affinity", "nodeAffinity", REQUIRED_AFFINITY, "nodeSelectorTerms")
    if not isinstance(terms, list) or not terms:
        return "", ""
    found = {_term_value(term, key) for term in terms}
    if len(found) != 1 or "" in found:
        return "", ""
    return found.pop(), f"{path}.affinity.nodeAffinity.{key}"


REQUIRED_AFFINITY = "requiredDuringSchedulingIgnoredDuringExecution"


def _nested(obj: object, *keys: str) -> object:
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _term_value(term: object, key: str) -> str:
    expressions = _nested(term, "matchExpressions")
    for expression in expressions if isinstance(expressions, list) else []:
        if not isinstance(expression, dict) or expression.get("key") != key:
            continue
        values = expression.get("values")
        if expression.get("operator") == "In" and isinstance(values, list) and len(values) == 1:
            value = values[0]
            return value.strip() if isinstance(value, str) else ""
    return ""
