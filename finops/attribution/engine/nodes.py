"""Which billed resource is which node, and which jobs ran on a node in which hour."""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from fractions import Fraction

from finops.attribution.engine.units import GPU_SCALE
from finops.attribution.engine.values import HOUR, NODE_TAG_KEYS, Job


def match_node(
    *,
    resource_name: str,
    resource_id: str,
    tags: Mapping[str, object],
    node_names: Mapping[str, str],
) -> str | None:
    """The job-log node name a billed resource is, or None.

    node_names maps each node name to itself and its lower-case form to it. Exact matches are
    tried first (resource name, resource id, node-name tags), then the last path segment of an
    id such as an ARN or an Azure resource id (".../virtualMachines/gpu-node-01"), then the same
    case-insensitively (Azure upper-cases resource ids at random).
    """
    candidates: list[str] = [resource_name, resource_id]
    for key in NODE_TAG_KEYS:
        value = tags.get(key)
        if isinstance(value, str):
            candidates.append(value)
    for value in (resource_id, resource_name):
        if "/" in value:
            candidates.append(value.rstrip("/").rsplit("/", 1)[-1])
    candidates.extend(filter(None, map(_scale_set_node_name, candidates)))
    for value in candidates:
        if value and value in node_names:
            return node_names[value]
    for value in candidates:
        if value and value.lower() in node_names:
            return node_names[value.lower()]
    return None


_SCALE_SET_INSTANCE_RE = re.compile(r"^(?P<scale_set>[A-Za-z0-9][A-Za-z0-9-]*)_(?P<id>\d+)$")
_BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"


def _scale_set_node_name(value: str) -> str | None:
    """The host name of an Azure scale set VM billed as "<scale set>_<instance id>": the scale
    set's name (its computer name prefix, as AKS sets it) and the instance id in base 36, six
    digits ("aks-gpu-42850074-vmss_37" -> "aks-gpu-42850074-vmss000011"), which is what the
    node is called in Kubernetes and in Slurm."""
    match = _SCALE_SET_INSTANCE_RE.match(value)
    if match is None:
        return None
    number, digits = int(match["id"]), ""
    while True:
        number, rest = divmod(number, 36)
        digits = _BASE36[rest] + digits
        if not number:
            break
    return match["scale_set"] + digits.rjust(6, "0")


def node_name_map(names: Iterable[str]) -> dict[str, str]:
    """The node_names argument of match_node: exact names win over lower-case aliases."""
    exact = sorted(set(names))
    mapping = {name.lower(): name for name in exact}
    mapping.update({name: name for name in exact})
    return mapping


# A job as stored in the index: (start, end, gpu_micros, node_count, job_id, team_id, category).
Entry = tuple[int, int, int, int, int, "int | None", str]


class JobIndex:
    """Jobs by node and UTC hour, so a line item finds its jobs without scanning."""

    def __init__(self, jobs: Iterable[Job], *, nodes: set[str], horizon: int) -> None:
        self.by_hour: dict[str, dict[int, list[Entry]]] = {}
        self.by_node: dict[str, list[Entry]] = defaultdict(list)
        self._capacity: dict[str, int] = {}
        # Job id -> requested GPUs per node, for jobs charged for fewer (Job.requested_gpus).
        self._requested: dict[int, Fraction] = {}
        for job in sorted(jobs, key=lambda j: j.id):
            # A running job runs until the last charge period ends (cost to date).
            end = horizon if job.end is None else job.end
            job_nodes = list(dict.fromkeys(job.nodes))  # a node listed twice is still one node
            if end <= job.start or job.gpu_micros <= 0 or not job_nodes:
                continue
            # GPUs per node = gpu_micros / (node count x denominator x GPU_SCALE): folding the
            # denominator into the count keeps every weight an integer (K = lcm of counts).
            count = len(job_nodes) * job.gpu_denominator
            entry: Entry = (
                job.start, end, job.gpu_micros, count, job.id, job.team_id, job.category,
            )  # fmt: skip
            if job.requested_gpus is not None:
                self._requested[job.id] = job.requested_gpus / len(job_nodes)
            first_hour, last_hour = job.start // HOUR, (end - 1) // HOUR
            for node in job_nodes:
                if node not in nodes:
                    continue  # no bill for this node: nothing to charge
                self.by_node[node].append(entry)
                hours = self.by_hour.get(node)
                if hours is None:
                    hours = self.by_hour[node] = defaultdict(list)
                for hour in range(first_hour, last_hour + 1):
                    hours[hour].append(entry)

    def fallback_capacity(self, node: str) -> int:
        """GPUs of a node whose type the catalogue does not know: the most GPUs its jobs ever
        held (requested, whatever the charge basis) at the same instant, rounded up to whole GPUs
        (a node has whole GPUs; MIG slices add up), at least 1. Never less than what the jobs
        held, so the jobs are charged in full and idle is whatever remains."""
        if node not in self._capacity:
            events: list[tuple[int, int, Fraction]] = []
            requested = self._requested
            for start, end, micros, count, job_id, _, _ in self.by_node.get(node, ()):
                # What the job requested, not what it is charged for: a node is never sized
                # below the GPUs its jobs were allocated.
                held = requested.get(job_id) or Fraction(micros, count * GPU_SCALE)
                events.append((start, 1, held))
                events.append((end, 0, -held))  # ends sort first at equal times: end exclusive
            events.sort(key=lambda e: (e[0], e[1]))
            peak = level = Fraction(0)
            for _, _, delta in events:
                level += delta
                peak = max(peak, level)
            self._capacity[node] = max(1, math.ceil(peak))
        return self._capacity[node]
