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


class BatchProgressBar:
    """Parts done of total and rows loaded of one batch, redrawn on each `update()`; draws
    nothing unless `show` (a terminal, or asked for)."""

    def __init__(self, *, batch_id: int, label: str, out: TextIO, show: bool) -> None:
        self.batch_id = batch_id
        self._bar: Progress | None = None
        if show:
            columns = (
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("parts · {task.fields[rows]} rows"),
                TimeElapsedColumn(),
            )
            console = Console(file=out, force_terminal=True)
            self._bar = Progress(*columns, console=console, transient=False)
            self._task = self._bar.add_task(label, total=None, rows="0")

    def __enter__(self) -> BatchProgressBar:
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self.update()
            self._bar.stop()

    def update(self) -> None:
        if self._bar is None:
            return
        progress = batch_progress(batch_id=self.batch_id)
        if progress is not None:
            self._bar.update(
                self._task,
                total=progress.parts_total,
                completed=progress.parts_done,
                rows=f"{progress.rows:,}",
            )


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
    with BatchProgressBar(batch_id=batch_id, label=label, out=out, show=True) as bar:
        while not result.ready():
            bar.update()
            if time.monotonic() >= deadline:
                raise CeleryTimeoutError(f"batch {batch_id} did not finish in {timeout:g} s")
            time.sleep(poll_seconds)
    return result.get(timeout=max(deadline - time.monotonic(), 1.0))
