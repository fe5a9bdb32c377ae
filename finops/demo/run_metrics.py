"""Training-run metrics for the demo's runs, in the formats the teams' frameworks write.

- the language team's 70B pre-training logs as Megatron-LM on AWS and as torchtitan on
  CoreWeave (one log per attempt, in a folder per run);
- fine-tunes and the other teams' training runs as the generic CSV, one file per month.

Progress follows the jobs the packer scheduled: an attempt logs nothing for its first minutes
(start-up, loading the checkpoint), then advances at the run's true MFU (30-50 % for the large
H100 runs, less for small ones) and saves a checkpoint at a fixed interval. An attempt that is
preempted, fails or is cancelled loses what it did since its last checkpoint: the next attempt
starts again from there, so runs with many restarts show a lower measured MFU. Pure: files
only, the same seed gives the same bytes.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from random import Random

from finops.demo.fleet import Month
from finops.demo.jobs import Job

# Dense bf16 peaks (finops/run_metrics/peaks.py): tokens/s = MFU x peak x GPUs / FLOPs per token.
PEAK = {"h100": 989e12, "a100": 312e12}
STARTUP = 8 * 60  # seconds before an attempt's first step
LOST = ("PREEMPTED", "FAILED", "CANCELLED", "NODE_FAIL")


@dataclass(frozen=True)
class Model:
    """What one kind of run trains and how it logs."""

    team: str
    format: str  # csv, megatron or torchtitan
    params: int
    seq: int  # tokens per sample (0: the run counts samples only)
    batch: int  # samples per step
    mfu: tuple[float, float]  # the true MFU of its steps, drawn per run
    log_every: int  # seconds between logged steps
    checkpoint_every: int  # seconds between checkpoints


MODELS: dict[str, Model] = {
    "llama-pretrain-70b": Model("language", "megatron", 70_000_000_000, 4096, 1024,
                                (0.42, 0.50), 1800, 3600),
    "llama-pretrain-70b-coreweave": Model("language", "torchtitan", 70_000_000_000, 4096, 1024,
                                          (0.40, 0.48), 1800, 3600),
    "vit-l-pretrain": Model("vision", "csv", 304_000_000, 197, 4096, (0.34, 0.42), 1800, 7200),
    "llama-ft-7b": Model("language", "csv", 7_000_000_000, 4096, 64, (0.28, 0.38), 1800, 3600),
    "sam-ft": Model("vision", "csv", 636_000_000, 4096, 16, (0.18, 0.26), 1800, 3600),
    "whisper-ft-large": Model("speech", "csv", 1_550_000_000, 1500, 256, (0.20, 0.30), 1800,
                              3600),
    "dlrm-train": Model("recsys", "csv", 0, 0, 65536, (0.0, 0.0), 1800, 3600),
}  # fmt: skip


def model_of(run_id: str) -> Model | None:
    """The model of a run id like `llama-ft-7b-gcp-r1003` (a workload, a cluster, a number)."""
    base = run_id.rsplit("-r", 1)[0]
    if base in MODELS:
        return MODELS[base]
    for suffix in ("-aws", "-gcp", "-azure", "-coreweave"):
        if base.endswith(suffix) and base.removesuffix(suffix) in MODELS:
            return MODELS[base.removesuffix(suffix)]
    return None


@dataclass(frozen=True)
class Step:
    at: int  # seconds since the month start
    step: int
    samples: int
    checkpoint: bool


@dataclass
class RunLog:
    run_id: str
    model: Model
    flops_per_token: int
    # One list of steps per attempt (job), in time order.
    attempts: list[list[Step]]


def _step_seconds(model: Model, mfu: float, job: Job) -> float:
    if not model.seq or not mfu:  # samples only: a fixed pace per GPU
        return model.batch / (2000.0 * job.gpus)
    tokens_per_second = mfu * PEAK[job.gpu_model] * job.gpus / (6 * model.params)
    return model.batch * model.seq / tokens_per_second


def _attempt(model: Model, mfu: float, job: Job, end: int, resume: int) -> tuple[list[Step], int]:
    """The logged steps of one attempt, and the step the next attempt resumes from."""
    assert job.start is not None
    seconds = _step_seconds(model, mfu, job)
    steps: list[Step] = []
    saved = resume
    next_checkpoint = job.start + STARTUP + model.checkpoint_every
    at = job.start + STARTUP + model.log_every
    while at <= end:
        step = resume + int((at - job.start - STARTUP) / seconds)
        checkpoint = at >= next_checkpoint
        if checkpoint:
            saved, next_checkpoint = step, next_checkpoint + model.checkpoint_every
        steps.append(Step(at, step, step * model.batch, checkpoint))
        at += model.log_every
    if job.state not in LOST and steps:  # a clean end (or a time limit) saves on the way out
        last = steps[-1]
        steps[-1] = Step(last.at, last.step, last.samples, True)
        saved = last.step
    return steps, saved


def _one_at_a_time(jobs: list[Job], month: Month) -> bool:
    ends = [month.seconds if j.end is None else j.end for j in jobs]
    return all((b.start or 0) >= a_end for a_end, b in zip(ends, jobs[1:], strict=False))


def run_logs(*, rng: Random, jobs: list[Job], month: Month) -> list[RunLog]:
    """Every run with a known model, its attempts' steps from its jobs."""
    by_run: dict[str, list[Job]] = {}
    for job in jobs:
        if job.start is not None and job.nodes and model_of(job.run_id) is not None:
            by_run.setdefault(job.run_id, []).append(job)
    logs = []
    for run_id in sorted(by_run):
        model = model_of(run_id)
        assert model is not None
        ordered = sorted(by_run[run_id], key=lambda j: (j.start or 0, j.job_id))
        if not _one_at_a_time(ordered, month):
            continue  # jobs of one run side by side (seeds, shards): no single progress curve
        mfu = rng.uniform(*model.mfu)
        resume, attempts = 0, []
        for job in ordered:
            end = month.seconds if job.end is None else job.end
            steps, resume = _attempt(model, mfu, job, end, resume)
            attempts.append(steps)
        if any(attempts):
            logs.append(RunLog(run_id, model, 6 * model.params, attempts))
    return logs


def _time(month: Month, seconds: int, sep: str = " ") -> str:
    return (month.start + timedelta(seconds=seconds)).strftime(f"%Y-%m-%d{sep}%H:%M:%S")


def generic_csv_bytes(logs: list[RunLog], month: Month) -> bytes:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["run_id", "team", "timestamp", "step", "tokens", "samples", "checkpoint",
                     "model_params", "flops_per_token", "dtype"])  # fmt: skip
    for log in logs:
        model = log.model
        for steps in log.attempts:
            for s in steps:
                writer.writerow([
                    log.run_id, model.team, _time(month, s.at, "T") + "Z", s.step,
                    s.samples * model.seq if model.seq else "", s.samples,
                    1 if s.checkpoint else 0, model.params or "",
                    log.flops_per_token or "", "bf16",
                ])  # fmt: skip
    return buffer.getvalue().encode("utf-8")


def megatron_lines(log: RunLog, steps: list[Step], month: Month) -> Iterator[str]:
    model = log.model
    yield "------------------------ arguments ------------------------"
    yield "  bf16 ............................................ True"
    yield f"  global_batch_size ............................... {model.batch}"
    yield f"  seq_length ...................................... {model.seq}"
    yield "-------------------- end of arguments ---------------------"
    previous = steps[0].at - STARTUP - 600 if steps else 0
    for s in steps:
        elapsed = (s.at - previous) * 1000 / max(1, s.step - (steps[0].step - 1))
        yield (
            f" [{_time(month, s.at)}] iteration {s.step:>8d}/  100000 | consumed samples: "
            f"{s.samples:>12d} | elapsed time per iteration (ms): {elapsed:.1f} | "
            f"global batch size: {model.batch:>5d} | lm loss: 2.104000E+00 |"
        )
        if s.checkpoint:
            yield f"saving checkpoint at iteration {s.step:>8d} to /ckpt/{log.run_id}"
            yield (
                f"  successfully saved checkpoint from iteration {s.step:>8d} to "
                f"/ckpt/{log.run_id} [ t 1/8, p 1/4 ]"
            )


def torchtitan_lines(log: RunLog, steps: list[Step], month: Month) -> Iterator[str]:
    model = log.model
    prefix = "[rank0]:[titan]"
    if not steps:
        return
    start = _time(month, steps[0].at - STARTUP + 30)
    yield (
        f"{prefix} {start},000 - root - INFO - Trainer is initialized with local batch size 4, "
        f"global batch size {model.batch}, gradient accumulation steps 8, sequence length "
        f"{model.seq}, total steps 100000 (warmup 2000)"
    )
    for s in steps:
        yield (
            f"{prefix} {_time(month, s.at)},000 - root - INFO - step: {s.step}  loss:  2.1040  "
            "grad_norm:  0.4120  memory: 71.20GiB(89.90%)  tps: 1,020  tflops: 430.00  mfu: 43.48%"
        )
        if s.checkpoint:
            yield (
                f"{prefix} {_time(month, s.at)},400 - root - INFO - Saving the checkpoint (or "
                "staging if async is enabled)."
            )


@dataclass(frozen=True)
class MetricsFile:
    format: str
    path: Path  # a file (csv) or a run's folder of attempt logs
    run_id: str
    team: str
    model_params: int
    seq: int
    rows: int


def run_metrics_write(*, logs: list[RunLog], month: Month, out: Path) -> list[MetricsFile]:
    """The month's metrics under <out>/<month>/run_metrics/: one CSV, a folder per logged run."""
    root = out / month.label / "run_metrics"
    files: list[MetricsFile] = []
    generic = [log for log in logs if log.model.format == "csv"]
    if generic:
        path = root / f"training-runs-{month.label}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(generic_csv_bytes(generic, month))
        rows = sum(len(steps) for log in generic for steps in log.attempts)
        files.append(MetricsFile("csv", path, "", "", 0, 0, rows))
    writers = {"megatron": megatron_lines, "torchtitan": torchtitan_lines}
    for log in logs:
        if log.model.format not in writers:
            continue
        folder = root / log.model.format / log.run_id
        folder.mkdir(parents=True, exist_ok=True)
        for number, steps in enumerate(log.attempts, start=1):
            if steps:
                text = "\n".join(writers[log.model.format](log, steps, month)) + "\n"
                (folder / f"attempt-{number}.log").write_text(text, encoding="utf-8")
        rows = sum(len(steps) for steps in log.attempts)
        files.append(
            MetricsFile(log.model.format, folder, log.run_id, log.model.team, log.model.params,
                        log.model.seq, rows)
        )  # fmt: skip
    return files
