"""A progress bar for long imports on the command line: parts done of total and rows loaded,
read from the batch's parts while its chord runs on the workers. Drawn only on a terminal (or
when asked); eager imports are finished before there is anything to draw."""

from __future__ import annotations

import time
from typing import Any, TextIO

from celery.exceptions import TimeoutError as CeleryTimeoutError
from celery.result import AsyncResult
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

from billing_ingest.selectors import batch_progress

POLL_SECONDS = 0.5


def wait_with_progress(
    result: AsyncResult[Any],
    *,
    batch_id: int,
    timeout: float,
    label: str,
    out: TextIO,
    show: bool,
    poll_seconds: float = POLL_SECONDS,
) -> Any:
    """result.get(timeout), drawing the batch's progress on `out` meanwhile when `show`.
    Raises celery's TimeoutError after `timeout` seconds, as result.get does."""
    if not show or result.ready():
        return result.get(timeout=timeout)
    deadline = time.monotonic() + timeout
    console = Console(file=out, force_terminal=True)
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("parts · {task.fields[rows]} rows"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=False) as bar:
        task = bar.add_task(label, total=None, rows="0")
        while not result.ready():
            progress = batch_progress(batch_id=batch_id)
            if progress is not None:
                bar.update(
                    task,
                    total=progress.parts_total,
                    completed=progress.parts_done,
                    rows=f"{progress.rows:,}",
                )
            if time.monotonic() >= deadline:
                raise CeleryTimeoutError(f"batch {batch_id} did not finish in {timeout:g} s")
            time.sleep(poll_seconds)
        progress = batch_progress(batch_id=batch_id)
        if progress is not None:
            bar.update(
                task,
                total=progress.parts_total,
                completed=progress.parts_done,
                rows=f"{progress.rows:,}",
            )
    return result.get(timeout=max(deadline - time.monotonic(), 1.0))
