"""Measured GPU utilisation per job from NVIDIA dcgm-exporter metrics in Prometheus form.

Input: one file of text exposition (a scrape of dcgm-exporter's /metrics, or many scrapes
concatenated) or a Prometheus `/api/v1/query_range` (or `/api/v1/query`) JSON response, read
by the shared tokenizer in parsers/prometheus_text.py. Metrics read, every other one skipped:

  DCGM_FI_PROF_GR_ENGINE_ACTIVE  ratio 0..1 of time a graphics or compute engine was active;
                                 on a MIG instance it is relative to the instance, which is
                                 what a job holding k/7 of a GPU is charged k/7 x u of.
  DCGM_FI_DEV_GPU_UTIL           percentage 0..100 (read as value / 100). Coarser, and not
                                 reported for MIG instances: read only for a job that has no
                                 DCGM_FI_PROF_GR_ENGINE_ACTIVE sample at all, so the two are
                                 never mixed in one job's average.

Whose series it is (dcgm-exporter adds workload labels to each GPU's series):
- Slurm: `hpc_job` (dcgm-exporter's --hpc-job-mapping-dir: one series per job mapped to the
  GPU), else `slurm_job_id`, `slurm_jobid`, `job_id`, `jobid` (prolog scripts, relabelling).
  Never `job`: that is Prometheus' scrape job name. The value is the job id Slurm gave the job
  ($SLURM_JOB_ID); the importer turns an array task's own id (sacct JobIDRaw) into the job
  id sacct prints for it (`123_4`), as JobRecord stores it.
- Kubernetes: `exported_namespace` + `exported_pod` (what Prometheus renames the exporter's
  `namespace` / `pod` labels to when its target labels carry the same names, the default with
  honor_labels false; `namespace` / `pod` are then the exporter's own pod), else `namespace` +
  `pod`, else `pod_namespace` + `pod_name` (--kubernetes-use-old-namespace). The job id is
  `<namespace>/<pod>`, as JobRecord stores pods. `container` is not part of it: a pod's
  containers hold the pod's GPUs.
- A series with a Slurm label and pod labels is the Slurm job's (Slurm run in Kubernetes: the
  pod is the slurmd worker). A series with neither is a GPU no job held: counted, skipped.

The average: a job's utilisation is the arithmetic mean of all its samples, over all its
series (GPUs or MIG instances) and scrapes together: sum of sample values / number of samples.
Each sample is one GPU observed at one scrape, and with a regular scrape interval each stands
for the same length of GPU time, so this mean is the job's busy GPU-time over its observed
GPU-time: exactly the factor the `used` charge basis multiplies its allocated GPUs by. A job
with 8 GPUs has 8 series and 8 samples per scrape; a series with gaps (exporter restart)
weighs by the time it was observed. (The mean of per-GPU means would weigh a GPU seen once as
much as one seen all month; both agree when every series has the same scrapes.) A GPU that
dcgm-exporter maps to two Slurm jobs appears once per job with the whole GPU's activity.

Text samples with a timestamp (Prometheus /federate prints them) count once per series and
time: the same sample read twice (a scrape pasted twice) is one sample; two different values for
one series and time are an error naming both lines. Text samples without a timestamp (as
dcgm-exporter prints them) are each a sample. A range export has one sample per series and time
by construction, so its samples are not tracked (a month of them would not fit in memory).

Errors (ImportFormatError) name the file, the line (text) or JSON path, and the field or label.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

from billing_ingest.models import JobGpuUtilisation
from billing_ingest.parsers.prometheus_text import RawSample, read_samples
from finops.core.errors import ImportFormatError
from finops.core.money import EXACT

ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
# Metric -> the value that means "fully busy".
METRICS: dict[str, Decimal] = {ENGINE_ACTIVE: Decimal(1), GPU_UTIL: Decimal(100)}

SLURM_JOB_LABELS = ("hpc_job", "slurm_job_id", "slurm_jobid", "job_id", "jobid")
# (namespace label, pod label), first pair whose pod label is set wins.
POD_LABELS = (
    ("exported_namespace", "exported_pod"),
    ("namespace", "pod"),
    ("pod_namespace", "pod_name"),
)
SLURM = "slurm"
POD = "pod"
# (SLURM, job id label value) or (POD, "<namespace>/<pod>").
JobKey = tuple[str, str]
SeriesId = tuple[str, tuple[tuple[str, str], ...]]

_MAX_JOB_ID = JobGpuUtilisation._meta.get_field("job_id").max_length or 320


@dataclass(slots=True)
class _Sum:
    total: Decimal = Decimal(0)
    count: int = 0


@dataclass(slots=True)
class JobSamples:
    """One job's samples, per metric: sums of values as a fraction of busy, and counts."""

    engine: _Sum = field(default_factory=_Sum)
    util: _Sum = field(default_factory=_Sum)

    def add(self, metric: str, value: Decimal) -> None:
        acc = self.engine if metric == ENGINE_ACTIVE else self.util
        busy = EXACT.divide(value, METRICS[metric]) if metric == GPU_UTIL else value
        acc.total = EXACT.add(acc.total, busy)
        acc.count += 1

    def merge(self, other: JobSamples) -> None:
        for mine, theirs in ((self.engine, other.engine), (self.util, other.util)):
            mine.total = EXACT.add(mine.total, theirs.total)
            mine.count += theirs.count

    def utilisation(self) -> Fraction:
        """The exact mean (module docstring): engine activity when there is any, else GPU_UTIL."""
        acc = self.engine if self.engine.count else self.util
        if not acc.count:
            raise ValueError("no samples")
        return Fraction(acc.total) / acc.count


@dataclass(slots=True)
class DcgmUtilisation:
    jobs: dict[JobKey, JobSamples] = field(default_factory=dict)
    # Series of the metrics with no job label: GPUs nobody held.
    series_without_job: int = 0


class _LabelError(ValueError):
    def __init__(self, label: str, message: str) -> None:
        super().__init__(message)
        self.label = label


def _label(labels: Mapping[str, str], name: str) -> str:
    return labels.get(name, "").strip()


def job_key(labels: Mapping[str, str]) -> JobKey | None:
    """Whose series this is (module docstring), None for nobody's; _LabelError naming the label
    for a pod label without its namespace, or a job id too long to store."""
    for name in SLURM_JOB_LABELS:
        value = _label(labels, name)
        if value:
            _check_length(name, value)
            return SLURM, value
    for namespace_label, pod_label in POD_LABELS:
        pod = _label(labels, pod_label)
        if not pod:
            continue
        namespace = _label(labels, namespace_label)
        if not namespace:
            raise _LabelError(pod_label, f"label {pod_label} has no {namespace_label} beside it")
        job_id = f"{namespace}/{pod}"
        _check_length(pod_label, job_id)
        return POD, job_id
    return None


def _check_length(label: str, job_id: str) -> None:
    if len(job_id) > _MAX_JOB_ID:
        raise _LabelError(label, f"job id from label {label} is longer than {_MAX_JOB_ID}")


def _label_column(sample: RawSample, label: str) -> str:
    if sample.line is not None:
        return label
    # JSON: the series' path (`data.result[3]`) and the label in its metric object.
    series_path = sample.where.rsplit(".", 1)[0]
    return f"{series_path}.metric.{label}"


def _check_range(sample: RawSample) -> None:
    full = METRICS[sample.name]
    if not 0 <= sample.value <= full:
        kind = "ratio between 0 and 1" if full == 1 else "percentage between 0 and 100"
        raise ImportFormatError(
            f"{sample.name} value {sample.value} is not a {kind}",
            file=sample.file,
            row=sample.line,
            column=sample.where,
        )


def read_dcgm_utilisation(path: Path, *, file_label: str) -> DcgmUtilisation:
    """Samples per job of one file (module docstring)."""
    result = DcgmUtilisation()
    keys: dict[SeriesId, JobKey | None] = {}
    # Text samples with a timestamp, per series: time -> (value, line).
    seen: dict[SeriesId, dict[int, tuple[Decimal, int]]] = {}
    found = 0
    for sample in read_samples(path, file_label=file_label, wanted=METRICS):
        found += 1
        _check_range(sample)
        series = (sample.name, tuple(sorted(sample.labels.items())))
        if series not in keys:
            try:
                keys[series] = job_key(sample.labels)
            except _LabelError as exc:
                raise ImportFormatError(
                    str(exc), file=file_label, row=sample.line,
                    column=_label_column(sample, exc.label),
                ) from None  # fmt: skip
            if keys[series] is None:
                result.series_without_job += 1
        key = keys[series]
        if key is None:
            continue
        if sample.at_ms is not None and sample.line is not None:
            at_series = seen.setdefault(series, {})
            earlier = at_series.get(sample.at_ms)
            if earlier is not None:
                if earlier[0] != sample.value:
                    raise ImportFormatError(
                        f"value {sample.value} differs from {earlier[0]} for the same series "
                        f"and time at line {earlier[1]}",
                        file=file_label,
                        row=sample.line,
                        column=sample.where,
                    )
                continue  # the same sample read twice
            at_series[sample.at_ms] = (sample.value, sample.line)
        result.jobs.setdefault(key, JobSamples()).add(sample.name, sample.value)
    if not found:
        raise ImportFormatError(
            f"has no {ENGINE_ACTIVE} or {GPU_UTIL} samples (is this dcgm-exporter output?)",
            file=file_label,
        )
    return result
