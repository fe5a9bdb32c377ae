"""The one way for a service to queue a task: by its registered name.

Tasks import services (a task is thin: take ids, call one service); a service that queued a task
by importing it would import tasks back, and the layers would run in a circle. So services (and
the pipeline's wake/resume contract) name the task instead: ``task_send("finops.pipeline.resume",
run_id)``. Every app whose tasks are queued this way imports its tasks module in its
AppConfig.ready, so the name is registered in every process and an eager Celery (no broker, the
embedded default) runs the task inline, as it would an imported one.

The names are the tasks' explicit ``name=`` strings, which never change (a message already in a
broker's queue is matched by that name).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from celery import chain, chord, signature
from celery.canvas import Signature
from celery.result import AsyncResult


def task_signature(name: str, *args: object, **kwargs: object) -> Signature[Any]:
    """The task registered as ``name`` with these arguments, not yet sent (for a chain or a
    chord; ``.set(immutable=True)`` to keep a previous task's result out of its arguments)."""
    return signature(name, args=args, kwargs=kwargs)


def task_send(name: str, *args: object, **kwargs: object) -> AsyncResult[Any]:
    """Queue the task registered as ``name`` (eager: run it here). Raises what the broker
    raises when it cannot be reached: the caller decides whether that fails its work."""
    return task_signature(name, *args, **kwargs).apply_async()


def tasks_chain_send(*steps: Signature[Any]) -> AsyncResult[Any]:
    """Queue tasks to run one after another, each given the previous one's result unless its
    signature is immutable."""
    return chain(*steps).apply_async()


def tasks_chord_send(header: Sequence[Signature[Any]], body: Signature[Any]) -> AsyncResult[Any]:
    """Queue the header's tasks side by side, then body with the list of their results."""
    return chord(list(header), body).apply_async()
