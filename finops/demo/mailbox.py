"""Where the demo's alert emails go: the console backend (the default without EMAIL_URL) would
print every budget and anomaly email, some 1,600 lines, over the demo's summary. While the demo
runs, they are written to files instead, and the summary says how many and where. Any other
backend (SMTP set by EMAIL_URL, locmem in the tests) is left alone."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

CONSOLE_BACKEND = "django.core.mail.backends.console.EmailBackend"
FILE_BACKEND = "django.core.mail.backends.filebased.EmailBackend"


@dataclass
class DemoMailbox:
    """The folder emails were written to, or None when the configured backend was kept."""

    folder: Path | None


@contextmanager
def demo_mailbox(*, out: Path) -> Iterator[DemoMailbox]:
    """Swap the console email backend for a file backend under `out`/emails while the block
    runs (emails sent in this process: the eager Celery of a demo without a broker)."""
    if settings.EMAIL_BACKEND != CONSOLE_BACKEND:
        yield DemoMailbox(folder=None)
        return
    folder = out / "emails"
    folder.mkdir(parents=True, exist_ok=True)
    saved = (settings.EMAIL_BACKEND, getattr(settings, "EMAIL_FILE_PATH", None))
    settings.EMAIL_BACKEND = FILE_BACKEND
    settings.EMAIL_FILE_PATH = str(folder)
    try:
        yield DemoMailbox(folder=folder)
    finally:
        settings.EMAIL_BACKEND, settings.EMAIL_FILE_PATH = saved
