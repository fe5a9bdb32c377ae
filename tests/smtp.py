"""The mail a test's real SMTP server accepted (the smtp_server fixture of conftest)."""

from __future__ import annotations

from typing import Any


class CapturedMail:
    """What a real SMTP server on a free port accepted: envelope recipients and raw content."""

    def __init__(self) -> None:
        self.messages: list[tuple[list[str], bytes]] = []

    async def handle_DATA(self, server: object, session: object, envelope: Any) -> str:
        self.messages.append((list(envelope.rcpt_tos), bytes(envelope.original_content)))
        return "250 Message accepted for delivery"

    def to(self, address: str) -> list[bytes]:
        return [content for rcpts, content in self.messages if address in rcpts]
