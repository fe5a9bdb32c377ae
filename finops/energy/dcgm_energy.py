"""GPU energy from NVIDIA dcgm-exporter metrics in Prometheus form (DESIGN section 9).

Input: text exposition with timestamps (Prometheus /federate, or scrapes saved with their
times) or a `query_range` / `query` JSON response, read by the shared tokenizer
(billing_ingest/parsers/prometheus_text.py). Metrics read:

  DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION  counter, millijoules since the driver loaded. The energy
      between two samples is the increase; a value below the one before is a reset (reboot,
      driver reload): the counter started again from 0, so the energy is the new value (what
      Prometheus' increase() does; the energy between the last sample and the reset is lost).
  DCGM_FI_DEV_POWER_USAGE               watts. The energy between two samples is the trapezoid
      (mean of both x seconds between them); a gap over MAX_POWER_GAP is not bridged (an
      exporter that was down says nothing about the power meanwhile).

A GPU (node + UUID, else node + `gpu` index) of a job with counter samples is measured by the
counter only; power is read for a GPU with no counter sample (older drivers). Whose series it is:
the labels utilisation reads (billing_ingest/parsers/dcgm.py: `hpc_job`, ..., namespace/pod);
the node is `Hostname` (dcgm-exporter's), else `node`, `kubernetes_node`. Samples need a time:
text samples without one are an error (they cannot be placed in a job's time window).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from itertools import pairwise
from pathlib import Path

from billing_ingest.parsers.dcgm import JobKey, _LabelError, job_key
from billing_ingest.parsers.prometheus_text import read_samples
from finops.core.errors import ImportFormatError
from finops.core.money import EXACT

ENERGY = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
POWER = "DCGM_FI_DEV_POWER_USAGE"
METRICS = (ENERGY, POWER)
NODE_LABELS = ("Hostname", "node", "kubernetes_node")
GPU_LABELS = ("UUID", "gpu")
# Longest gap between two power samples that is integrated (milliseconds).
MAX_POWER_GAP_MS = 10 * 60 * 1000
MILLI = Decimal("0.001")


@dataclass(frozen=True, slots=True)
class Interval:
    """Energy (joules) spent evenly between two sample times (milliseconds since the epoch)."""

    start_ms: int
    end_ms: int
    joules: Decimal


@dataclass(slots=True, eq=False)
class GpuSeries:
    """One GPU's samples under one job's labels."""

    job: JobKey
    node: str
    gpu: str
    counter: list[tuple[int, Decimal]] = field(default_factory=list)
    power: list[tuple[int, Decimal]] = field(default_factory=list)

    @property
    def method(self) -> str:
        return "counter" if self.counter else "power"

    def intervals(self) -> Iterator[Interval]:
        if self.counter:
            points = sorted(set(self.counter))
            for (t0, v0), (t1, v1) in pairwise(points):
                if t1 == t0:
                    continue
                increase = v1 - v0 if v1 >= v0 else v1  # a reset (module docstring)
                yield Interval(t0, t1, EXACT.multiply(increase, MILLI))
            return
        points = sorted(set(self.power))
        for (t0, p0), (t1, p1) in pairwise(points):
            if t1 == t0 or t1 - t0 > MAX_POWER_GAP_MS:
                continue
            seconds = Decimal(t1 - t0) / 1000
            yield Interval(t0, t1, EXACT.multiply(EXACT.add(p0, p1) / 2, seconds))


@dataclass(slots=True)
class DcgmEnergy:
    gpus: dict[tuple[JobKey, str, str], GpuSeries] = field(default_factory=dict)
    series_without_job: int = 0
    samples: int = 0


def _first(labels: dict[str, str], names: tuple[str, ...]) -> str:
    for name in names:
        value = labels.get(name, "").strip()
        if value:
            return value
    return ""


def read_dcgm_energy(path: Path, *, file_label: str) -> DcgmEnergy:
    """Every job's GPU samples of one file (module docstring)."""
    result = DcgmEnergy()
    without_job: set[tuple[tuple[str, str], ...]] = set()
    for sample in read_samples(path, file_label=file_label, wanted=METRICS):
        result.samples += 1
        if sample.at_ms is None:
            raise ImportFormatError(
                f"{sample.name} sample has no timestamp: energy needs the time of each sample "
                "(export with Prometheus /federate or query_range)",
                column="timestamp", file=file_label, row=sample.line,
            )  # fmt: skip
        if sample.value < 0:
            raise ImportFormatError(
                f"{sample.name} value {sample.value} is negative",
                column=sample.where,
                file=file_label,
                row=sample.line,
            )
        try:
            key = job_key(sample.labels)
        except _LabelError as exc:
            raise ImportFormatError(
                str(exc), column=exc.label, file=file_label, row=sample.line
            ) from None
        if key is None:
            without_job.add(tuple(sorted(sample.labels.items())))
            continue
        node = _first(sample.labels, NODE_LABELS)
        if not node:
            raise ImportFormatError(
                f"{sample.name} series of job {key[1]} has no node label "
                f"({', '.join(NODE_LABELS)})",
                column="Hostname", file=file_label, row=sample.line,
            )  # fmt: skip
        gpu = _first(sample.labels, GPU_LABELS)
        series = result.gpus.setdefault((key, node, gpu), GpuSeries(key, node, gpu))
        target = series.counter if sample.name == ENERGY else series.power
        target.append((sample.at_ms, sample.value))
    if not result.samples:
        raise ImportFormatError(
            f"has no {ENERGY} or {POWER} samples (is this dcgm-exporter output?)", file=file_label
        )
    result.series_without_job = len(without_job)
    return result
