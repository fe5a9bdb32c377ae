"""Read a file whole before the transaction that writes its rows, where writers queue.

SQLite has one writer at a time, and a transaction that has read anything keeps every other
writer from committing until it ends. An import that parsed its file inside its transaction
therefore held the whole site (logins, sessions, the import's own heartbeat) for as long as
the file took to read: a compressed file of blank lines held it for 25 minutes, and every login
answered 500 "database is locked". Here the parser's chunks are produced BEFORE the transaction
opens and kept in a temporary file (pickled, one chunk at a time, so memory stays one chunk);
the transaction then only writes them. A file that fails to parse fails before any transaction.

PostgreSQL writers do not block each other (an import COPYs into tables of its own), so there
the chunks stream inside the transaction as before, and the parser may run ahead in a thread
(billing_ingest/loading/prefetch.py).
"""

from __future__ import annotations

import pickle
import tempfile
from collections.abc import Iterator
from typing import IO, TypeVar

from django.db import connection

T = TypeVar("T")


def writers_queue() -> bool:
    """Whether one open transaction keeps every other writer waiting (SQLite)."""
    return connection.vendor == "sqlite"


def read_before_writing(chunks: Iterator[T]) -> Iterator[T]:
    """On SQLite: every chunk produced now (the parser's errors raise here, outside any
    transaction), replayed from a temporary file; elsewhere `chunks` unchanged."""
    if not writers_queue():
        return chunks
    spool = tempfile.TemporaryFile()  # noqa: SIM115 (closed by _replay)
    try:
        for chunk in chunks:
            pickle.dump(chunk, spool, protocol=pickle.HIGHEST_PROTOCOL)
    except BaseException:
        spool.close()
        raise
    spool.seek(0)
    return _replay(spool)


def _replay(spool: IO[bytes]) -> Iterator[T]:
    with spool:
        while True:
            try:
                chunk: T = pickle.load(spool)
            except EOFError:
                return
            yield chunk
