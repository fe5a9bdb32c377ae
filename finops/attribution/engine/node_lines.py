"""A GPU node line item into job shares and idle (package docstring: the split), and any line
spread over the days of its charge period.

split_node_line goes in named steps: the jobs each hour bucket holds (_bucket_hits), their
integer weights on one common scale (_weigh), the exact numerators per (day, job) and idle
(_numerators), then one largest-remainder split into shares (_node_shares). The common case, an
hourly line item with a single bucket, takes a shorter path (_split_one_bucket).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from finops.attribution.engine.fold import ShareFold
from finops.attribution.engine.nodes import Entry, JobIndex
from finops.attribution.engine.units import GPU_SCALE, ZERO, GpuSeconds, split_columns
from finops.attribution.engine.values import DAY, HOUR, IDLE, LineItem, Share, new_share

# An hour bucket of a line's charge period: (start, end, [(job entry, overlap seconds), ...]).
_Bucket = tuple[int, int, list[tuple[Entry, int]]]
# Per (UTC day, job id; None: idle) of a node line.
_ByDayJob = dict[tuple[int, int | None], int]
# Where shares go: a list, or summed into ledger rows as they are made (fold.py).
Out = list[Share] | ShareFold


def spread_by_day(line: LineItem, category: str, team_id: int | None, node: str, out: Out) -> None:
    """The whole line to one owner, spread over the UTC days of its charge period by seconds."""
    if line.end <= line.start:
        # No duration to spread over: all of it on the day the charge period starts.
        days: Sequence[int] = (line.start // DAY,)
        weights = [1]
    else:
        days = range(line.start // DAY, (line.end - 1) // DAY + 1)
        weights = [min(line.end, (d + 1) * DAY) - max(line.start, d * DAY) for d in days]
    cost, listed, contracted = split_columns(line, weights)
    for day, units, list_units, contracted_units in zip(
        days, cost, listed, contracted, strict=True
    ):
        out.append(
            Share(
                line.id, day, category, team_id, None, node, units, ZERO, list_units,
                contracted_units,
            )
        )  # fmt: skip


def split_node_line(
    line: LineItem,
    index: JobIndex,
    counted: set[tuple[str, int, int]],
    seconds_of: GpuSeconds,
    out: Out,
) -> None:
    """Shares of a GPU node line: its jobs' GPU-seconds per hour bucket, the rest idle.

    counted: (node, bucket start, end) whose GPU-seconds an earlier line of the same node
    already reported (the shares of later lines carry 0 GPU-seconds there)."""
    node = line.node
    assert node is not None
    hours = index.by_hour.get(node)
    if not hours or line.end <= line.start:
        spread_by_day(line, IDLE, line.team_id, node, out)
        return
    buckets, node_counts = _bucket_hits(line, hours)
    if not node_counts:
        spread_by_day(line, IDLE, line.team_id, node, out)
        return
    gpus = line.gpus if line.gpus else index.fallback_capacity(node)
    if len(buckets) == 1:
        _split_one_bucket(line, node, gpus, buckets[0], node_counts, counted, seconds_of, out)
        return
    weighed = _weigh(buckets, node_counts, gpus)
    numerators, gpu_weight, owners = _numerators(node, weighed, counted)
    _node_shares(line, node, numerators, gpu_weight, owners, weighed.k * GPU_SCALE, seconds_of, out)


def _bucket_hits(line: LineItem, hours: dict[int, list[Entry]]) -> tuple[list[_Bucket], set[int]]:
    """The line's hour buckets with the jobs overlapping each and by how many seconds, and the
    node counts of those jobs (Entry[3])."""
    buckets: list[_Bucket] = []
    node_counts: set[int] = set()
    start, end = line.start, line.end
    # Conditional expressions rather than min() / max(): this runs for every job of every
    # node hour of the month, where a builtin call costs more than the comparison.
    for hour in range(start // HOUR, (end - 1) // HOUR + 1):
        h_start = hour * HOUR
        h_end = h_start + HOUR
        b_start = start if start > h_start else h_start
        b_end = end if end < h_end else h_end
        entries = hours.get(hour)
        if not entries:
            buckets.append((b_start, b_end, []))
            continue
        hits = [
            (entry, overlap)
            for entry in entries
            if (
                overlap := (entry[1] if entry[1] < b_end else b_end)
                - (entry[0] if entry[0] > b_start else b_start)
            )
            > 0
        ]
        node_counts.update([entry[3] for entry, _ in hits])
        buckets.append((b_start, b_end, hits))
    return buckets, node_counts


@dataclass(frozen=True, slots=True)
class _Weighed:
    """Buckets with integer weights on one scale (see _weigh)."""

    # lcm of the jobs' node counts: a job's weight is micros x (k // node count) x overlap.
    k: int
    # A bucket's capacity per second: GPUs x GPU_SCALE x k.
    per_second: int
    # Common multiple of per_second and every oversubscribed bucket's held weight.
    m: int
    # (start, end, held weight, hits, length) per bucket.
    buckets: list[tuple[int, int, int, list[tuple[Entry, int]], int]]


def _weigh(buckets: list[_Bucket], node_counts: set[int], gpus: int) -> _Weighed:
    """Integer weights: a job's GPU-seconds in a bucket are micros x overlap / node_count;
    scaling every weight by K = lcm(node counts) makes them all integers. A bucket's capacity
    is GPUs x GPU_SCALE x K x L in the same unit.

    Common denominator T x M of all exact shares (see the package docstring):
      job (normal bucket)  = U x w / (T x per_second)   = U x w*(M/per_second) / (T*M)
      idle (normal bucket) = U x (cap - held) / (T x per_second)
      job (oversubscribed) = U x (L/T) x w / held       = U x L*w*(M/held) / (T*M)"""
    k = math.lcm(*node_counts)
    per_second = gpus * GPU_SCALE * k
    weighed: list[tuple[int, int, int, list[tuple[Entry, int]], int]] = []
    oversubscribed: list[int] = []
    for b_start, b_end, hits in buckets:
        held = sum(e[2] * (k // e[3]) * overlap for e, overlap in hits)
        weighed.append((b_start, b_end, held, hits, b_end - b_start))
        if held > per_second * (b_end - b_start):
            oversubscribed.append(held)
    return _Weighed(k, per_second, math.lcm(per_second, *oversubscribed), weighed)


def _numerators(
    node: str, weighed: _Weighed, counted: set[tuple[str, int, int]]
) -> tuple[_ByDayJob, _ByDayJob, dict[int, tuple[int | None, str]]]:
    """Per (day, job) and (day, None) for idle: the numerators over T x M of the line's amount
    (they sum to T x M), and the GPU weights of the buckets not counted yet; and each job's
    (team id, category)."""
    k, m, per_second = weighed.k, weighed.m, weighed.per_second
    normal_factor = m // per_second
    numerators: _ByDayJob = {}
    gpu_weight: _ByDayJob = {}
    owners: dict[int, tuple[int | None, str]] = {}
    for b_start, b_end, held, hits, length in weighed.buckets:
        day = b_start // DAY
        bucket_key = (node, b_start, b_end)
        count_gpu = bucket_key not in counted
        counted.add(bucket_key)
        capacity = per_second * length
        over = held > capacity
        for entry, overlap in hits:
            weight = entry[2] * (k // entry[3]) * overlap
            key = (day, entry[4])
            owners[entry[4]] = (entry[5], entry[6])
            share = length * weight * (m // held) if over else weight * normal_factor
            numerators[key] = numerators.get(key, 0) + share
            if count_gpu:
                gpu_weight[key] = gpu_weight.get(key, 0) + weight
            else:
                gpu_weight.setdefault(key, 0)
        if not over and capacity > held:
            idle_key = (day, None)
            numerators[idle_key] = numerators.get(idle_key, 0) + (capacity - held) * normal_factor
    return numerators, gpu_weight, owners


def _node_shares(
    line: LineItem,
    node: str,
    numerators: _ByDayJob,
    gpu_weight: _ByDayJob,
    owners: dict[int, tuple[int | None, str]],
    gpu_unit: int,
    seconds_of: GpuSeconds,
    out: Out,
) -> None:
    """One largest-remainder split of each column over the numerators, as shares."""
    keys = list(numerators)
    # The numerators sum to T x M by construction, so largest_remainder's denominator is it.
    cost, listed, contracted = split_columns(line, [numerators[key] for key in keys])
    for (day, job_id), units, list_units, contracted_units in zip(
        keys, cost, listed, contracted, strict=True
    ):
        if job_id is None:
            out.append(
                Share(
                    line.id, day, IDLE, line.team_id, None, node, units, ZERO, list_units,
                    contracted_units,
                )
            )  # fmt: skip
        else:
            seconds = seconds_of[(gpu_weight[(day, job_id)], gpu_unit)]
            team_id, category = owners[job_id]
            out.append(
                Share(
                    line.id, day, category, team_id, job_id, node, units, seconds, list_units,
                    contracted_units,
                )
            )  # fmt: skip


def _split_one_bucket(
    line: LineItem,
    node: str,
    gpus: int,
    bucket: _Bucket,
    node_counts: set[int],
    counted: set[tuple[str, int, int]],
    seconds_of: GpuSeconds,
    out: Out,
) -> None:
    """The common case (an hourly line item): the same split as split_node_line with a single
    bucket, where the denominator is simply the capacity, or what the jobs hold when more."""
    b_start, b_end, hits = bucket
    k = math.lcm(*node_counts) if len(node_counts) > 1 else next(iter(node_counts))
    weights = [e[2] * (k // e[3]) * overlap for e, overlap in hits]
    held = sum(weights)
    capacity = gpus * GPU_SCALE * k * (b_end - b_start)
    if capacity > held:
        weights.append(capacity - held)  # idle
    parts, listed, contracted = split_columns(line, weights)
    day = b_start // DAY
    bucket_key = (node, b_start, b_end)
    count_gpu = bucket_key not in counted
    counted.add(bucket_key)
    gpu_unit = k * GPU_SCALE
    line_id = line.id
    if isinstance(out, ShareFold):
        # The month's first pass: no Share tuples for the job shares, straight into rows.
        unit = gpu_unit if count_gpu else None
        out.job_hits(day, node, hits, weights, (parts, listed, contracted), unit, seconds_of)
        if capacity > held:
            out.append(
                new_share(
                    Share,
                    (
                        line_id, day, IDLE, line.team_id, None, node, parts[-1], ZERO,
                        listed[-1], contracted[-1],
                    ),
                )
            )  # fmt: skip
        return
    # One comprehension builds the job shares (hits, weights and parts are in the same order;
    # the parts have one more item, the idle part, when there is idle).
    out.extend([
        new_share(Share, (
            line_id, day, entry[6], entry[5], entry[4], node, units,
            seconds_of[(weight, gpu_unit)] if count_gpu else ZERO, list_units, contracted_units,
        ))
        for (entry, _), weight, units, list_units, contracted_units in zip(
            hits, weights, parts, listed, contracted, strict=False
        )
    ])  # fmt: skip
    if capacity > held:
        out.append(
            new_share(
                Share,
                (
                    line_id, day, IDLE, line.team_id, None, node, parts[-1], ZERO, listed[-1],
                    contracted[-1],
                ),
            )
        )  # fmt: skip
