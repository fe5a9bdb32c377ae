"""Heartbeats: proof that the worker running a long step is alive.

A worker killed with SIGKILL (the OOM killer, a node lost, ``kill -9``) runs no ``except`` or
``finally``: whatever row says "running" stays so. Each long step therefore touches a
``heartbeat_at`` column every FINOPS_WORKER_HEARTBEAT_SECONDS from a thread of its own (with its
own database connection, as the step's connection is busy inside its transaction). A row still
"running" whose heartbeat is older than FINOPS_WORKER_HEARTBEAT_TIMEOUT belongs to a dead worker:
the waiting command, the next run of the same step, or the beat watchdog marks it failed, saying
since when nothing was heard.

On SQLite (the embedded default: one process, eager tasks) there is no other worker to die and
a second writer would only wait for the step's write lock, so no thread is started.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from django.conf import settings
from django.db import connection, connections
from django.utils import timezone

logger = logging.getLogger("finops.billing_ingest")


def heartbeat_interval() -> float:
    return float(settings.FINOPS_WORKER_HEARTBEAT_SECONDS)


def heartbeat_deadline() -> dt.datetime:
    """Rows whose last heartbeat is older than this belong to a dead worker."""
    return timezone.now() - dt.timedelta(seconds=settings.FINOPS_WORKER_HEARTBEAT_TIMEOUT)


def dead_worker_message(last: dt.datetime | None) -> str:
    since = f"{last:%Y-%m-%d %H:%M:%S} UTC" if last is not None else "it started"
    return (
        f"worker died / no heartbeat since {since} "
        f"(timeout {settings.FINOPS_WORKER_HEARTBEAT_TIMEOUT} s); safe to run again"
    )


def _beat(stop: threading.Event, touch: Callable[[], object], interval: float) -> None:
    try:
        while not stop.wait(interval):
            try:
                touch()
            except Exception:  # a missed beat is not fatal; the next one may pass
                logger.warning("heartbeat failed", exc_info=True)
    finally:
        connections.close_all()  # this thread's own connection only


@contextmanager
def heartbeat(touch: Callable[[], object]) -> Iterator[None]:
    """Call ``touch`` (an UPDATE of heartbeat_at) every interval while the block runs."""
    if connection.vendor != "postgresql":
        yield
        return
    stop = threading.Event()
    thread = threading.Thread(
        target=_beat, args=(stop, touch, heartbeat_interval()), name="heartbeat", daemon=True
    )
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
