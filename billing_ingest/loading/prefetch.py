"""Run a chunk producer one step ahead of its consumer, in a thread.

Loading a billing file alternates two waits: parsing a chunk (pyarrow, mostly outside the GIL)
and PostgreSQL ingesting the previous chunk's COPY (the client sits in a socket wait). Done in
turn they add up; with the parser a chunk ahead they overlap, and the ingest approaches the
speed of whichever is slower. The queue holds at most ``ahead`` chunks, so memory stays a few
chunks whatever the file size.

Only for producers that never touch the database: Django connections belong to their thread,
and a query from the producer thread would run outside the caller's transaction.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Any, TypeVar

T = TypeVar("T")

_POLL_SECONDS = 0.1


class _Done:
    """Marks the end of the producer's chunks."""


def prefetched(chunks: Iterator[T], *, ahead: int = 1) -> Iterator[T]:
    """chunks, in order, produced by a thread up to ``ahead`` chunks early. An exception in the
    producer is raised here, at the point the failing chunk would have been consumed; a
    consumer that stops early stops the producer (and closes its generator) before returning."""
    slots: queue.Queue[tuple[Any, BaseException | None]] = queue.Queue(maxsize=ahead)
    stop = threading.Event()
    thread = threading.Thread(
        target=_produce, args=(chunks, slots, stop), name="chunk-prefetch", daemon=True
    )
    thread.start()
    try:
        while True:
            item, error = slots.get()
            if error is not None:
                raise error
            if isinstance(item, _Done):
                return
            yield item
    finally:
        stop.set()
        _drain(slots)
        thread.join()


def _produce(
    chunks: Iterator[Any], slots: queue.Queue[tuple[Any, BaseException | None]], stop: Any
) -> None:
    try:
        for chunk in chunks:
            if not _put(slots, (chunk, None), stop):
                return
        _put(slots, (_Done(), None), stop)
    except BaseException as exc:  # handed to the consumer, which raises it in its thread
        _put(slots, (None, exc), stop)
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()


def _put(slots: queue.Queue[Any], item: Any, stop: Any) -> bool:
    """Put item, waiting for room unless the consumer has stopped; False when it has."""
    while not stop.is_set():
        try:
            slots.put(item, timeout=_POLL_SECONDS)
            return True
        except queue.Full:
            continue
    return False


def _drain(slots: queue.Queue[Any]) -> None:
    # Frees chunks already produced, and room for a producer blocked in put() to notice stop.
    while True:
        try:
            slots.get_nowait()
        except queue.Empty:
            return
