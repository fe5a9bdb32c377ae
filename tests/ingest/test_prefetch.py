"""prefetched(): a producer thread one chunk ahead, same chunks in the same order, errors raised
where they happened, and a consumer that stops early stops (and closes) the producer."""

from __future__ import annotations

import threading
from collections.abc import Generator, Iterator

import pytest

from billing_ingest.loading.prefetch import prefetched


def test_chunks_arrive_in_order_and_complete() -> None:
    assert list(prefetched(iter(range(100)))) == list(range(100))


def test_the_producer_runs_in_another_thread_at_most_one_chunk_ahead() -> None:
    produced: list[int] = []
    threads: set[str] = set()

    def chunks() -> Iterator[int]:
        for index in range(5):
            threads.add(threading.current_thread().name)
            produced.append(index)
            yield index

    consumer = prefetched(chunks(), ahead=1)
    assert next(consumer) == 0
    # One chunk handed over, one queued, at most one more being produced and blocked.
    assert len(produced) <= 3
    assert list(consumer) == [1, 2, 3, 4]
    assert threads == {"chunk-prefetch"}


def test_an_error_is_raised_after_the_chunks_before_it() -> None:
    def chunks() -> Iterator[int]:
        yield 1
        yield 2
        raise ValueError("row 7, column BilledCost: not a number")

    received: list[int] = []
    with pytest.raises(ValueError, match="row 7, column BilledCost"):
        received.extend(prefetched(chunks()))  # keeps what it took before the error
    assert received == [1, 2]


def test_a_consumer_stopping_early_closes_the_producer() -> None:
    closed = threading.Event()

    def chunks() -> Iterator[int]:
        try:
            index = 0
            while True:
                yield index
                index += 1
        finally:
            closed.set()

    consumer = prefetched(chunks())
    assert isinstance(consumer, Generator)  # closable, as a for loop that breaks closes it
    assert next(consumer) == 0
    consumer.close()
    assert closed.is_set()
    assert not any(t.name == "chunk-prefetch" for t in threading.enumerate())
