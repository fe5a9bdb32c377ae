"""Posting to a chat or webhook URL, safely.

A channel's URL is typed by a user, and the server posts to it: without a check, anyone who may
save a channel could make the server reach the cloud's metadata service, the database or an
admin port on the private network (server-side request forgery). So a URL is refused when its
host resolves to any private, loopback, link-local, reserved or multicast address, unless the
host is listed in FINOPS_WEBHOOK_ALLOWED_HOSTS (e.g. an internal relay). The check runs when a
channel is saved and again at every send; the send connects to the very address it checked
(so a DNS answer that changes between the check and the connection cannot redirect it), and
never follows a redirect. A public host must use https (the URL is a secret).
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import socket
import ssl
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class WebhookRefused(ValueError):
    """The URL may not be posted to (its scheme, its host or the addresses it resolves to)."""


class WebhookDeliveryError(OSError):
    """The post failed (no answer, a refused connection, a non-2xx status): worth retrying.
    An OSError, so the email task's retry policy (TRANSIENT_SMTP_ERRORS) retries it too."""


@dataclass(frozen=True, slots=True)
class Target:
    scheme: str
    host: str
    port: int
    path: str
    address: str


def _allowed(host: str, port: int) -> bool:
    listed = {h.strip().lower() for h in settings.FINOPS_WEBHOOK_ALLOWED_HOSTS if h.strip()}
    return host in listed or f"{host}:{port}" in listed


def _public(address: IpAddress) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_global and not address.is_multicast


def _resolve(host: str, port: int) -> list[IpAddress]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as error:
        raise WebhookDeliveryError(f"The host {host} does not resolve: {error}") from error
    found: list[IpAddress] = []
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if address not in found:
            found.append(address)
    return found


def webhook_target(url: str) -> Target:
    """The address to post `url` to, or WebhookRefused saying why it may not be; a host that
    does not resolve raises WebhookDeliveryError (DNS may come back)."""
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as error:
        raise WebhookRefused(f"The URL is not valid: {error}.") from error
    host = (parts.hostname or "").lower()
    if parts.scheme not in ("http", "https") or not host:
        raise WebhookRefused("The URL must start with https:// and name a host.")
    if parts.username or parts.password:
        raise WebhookRefused("The URL may not carry a user name or password.")
    allowed = _allowed(host, port)
    if parts.scheme != "https" and not allowed:
        raise WebhookRefused(
            "The URL must use https (a webhook URL is a secret); plain http only for a host "
            "listed in FINOPS_WEBHOOK_ALLOWED_HOSTS."
        )
    addresses = _resolve(host, port)
    if not allowed:
        private = [str(a) for a in addresses if not _public(a)]
        if private:
            raise WebhookRefused(
                f"{host} resolves to a private, loopback or reserved address "
                f"({', '.join(private)}): refused unless FINOPS_WEBHOOK_ALLOWED_HOSTS lists it."
            )
    if not addresses:
        raise WebhookDeliveryError(f"The host {host} has no address.")
    path = parts.path or "/"
    if parts.query:
        path = f"{path}?{parts.query}"
    return Target(parts.scheme, host, port, path, str(addresses[0]))


class _PinnedHTTPConnection(http.client.HTTPConnection):
    """Connects to the checked address, whatever the host name resolves to now."""

    def __init__(self, target: Target, timeout: float) -> None:
        super().__init__(target.host, target.port, timeout=timeout)
        self.address = target.address

    def connect(self) -> None:
        self.sock = socket.create_connection((self.address, self.port), self.timeout)


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    """The same over TLS, the certificate checked against the URL's host name."""

    def __init__(self, target: Target, timeout: float) -> None:
        super().__init__(
            target.host, target.port, timeout=timeout, context=ssl.create_default_context()
        )
        self.address = target.address

    def connect(self) -> None:
        sock = socket.create_connection((self.address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)  # type: ignore[attr-defined]


def webhook_post(*, url: str, payload: Any) -> int:
    """POST `payload` as JSON to `url` (checked first); the HTTP status (2xx) or an error:
    WebhookRefused (the URL may not be posted to) or WebhookDeliveryError (try again later)."""
    target = webhook_target(url)
    timeout = settings.FINOPS_WEBHOOK_TIMEOUT
    connection: http.client.HTTPConnection = (
        _PinnedHTTPSConnection(target, timeout)
        if target.scheme == "https"
        else _PinnedHTTPConnection(target, timeout)
    )
    body = json.dumps(payload, ensure_ascii=False).encode()
    headers = {"Content-Type": "application/json; charset=utf-8", "User-Agent": "gpu-finops"}
    try:
        connection.request("POST", target.path, body=body, headers=headers)
        response = connection.getresponse()
        answer = response.read(500).decode("utf-8", "replace")
    except (OSError, http.client.HTTPException) as error:
        raise WebhookDeliveryError(f"{type(error).__name__}: {error}") from error
    finally:
        connection.close()
    if not 200 <= response.status < 300:
        raise WebhookDeliveryError(f"HTTP {response.status} from {target.host}: {answer[:200]}")
    return response.status
