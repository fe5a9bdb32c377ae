"""The pipeline's anomalies step (finops.core.steps): re-evaluate the days of a month."""

from __future__ import annotations

import calendar
import datetime as dt
from dataclasses import asdict

from finops.anomalies.services import DetectSummary, anomalies_detect
from finops.core.steps import StepResult


def detect_summary(summary: DetectSummary) -> dict[str, object]:
    """The summary as JSON values (dates as ISO text)."""
    return {k: str(v) if isinstance(v, dt.date) else v for k, v in asdict(summary).items()}


def anomalies_month_step(month: dt.date, pipeline_run_id: int | None) -> StepResult:
    """Re-evaluate the anomalies of the days of the month. Idempotent. pipeline_run_id: the run
    that chained this step (in the summary, for its log)."""
    last = month.replace(day=calendar.monthrange(month.year, month.month)[1])
    summary = detect_summary(anomalies_detect(since=month, until=last))
    summary["pipeline_run_id"] = pipeline_run_id
    return StepResult(month, summary)
