"""A clock the tests move by hand, for timestamps that servers stamp."""

from __future__ import annotations

from datetime import datetime, timedelta


class Clock:
    """A clock the test moves by hand, for timestamps a server stamps at one-second resolution
    (S3 LastModified, Azure Last-Modified): `tick()` instead of sleeping past the second."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def tick(self, seconds: int = 1) -> None:
        self.now += timedelta(seconds=seconds)
