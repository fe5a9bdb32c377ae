"""What tests read from a test client's answer, for helpers that take one: Django's and DRF's
test clients both return responses with these (their stub classes are private)."""

from __future__ import annotations

from typing import Any, Protocol


class Response(Protocol):
    @property
    def status_code(self) -> int: ...

    @property
    def content(self) -> bytes: ...

    def json(self) -> Any: ...

    def __getitem__(self, header: str) -> str: ...
