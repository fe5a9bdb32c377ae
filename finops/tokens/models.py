"""Per-user API tokens for dashboards and scripts: only a hash of the key is stored."""

from __future__ import annotations

import hashlib
from datetime import datetime

from django.conf import settings
from django.db import models

from finops.org.models import Team

# Keys start with this so they are recognisable in logs and secret scanners, and so the
# authentication class leaves other "Token" keys (DRF's own authtoken) to their class.
KEY_PREFIX = "fo_"


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class ApiToken(models.Model):
    """A key for `Authorization: Token <key>`. The key itself is shown once, at creation; the
    database keeps its SHA-256 (a random 256-bit key needs no slow hash) and a short prefix
    for people to tell their tokens apart."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16)
    key_hash = models.CharField(max_length=64, unique=True)
    read_only = models.BooleanField(default=False)
    # Empty: every team the user may see. Otherwise a subset of them, checked at creation and
    # again on every request (a lead who loses a team loses it on their tokens too).
    teams = models.ManyToManyField(Team, blank=True, related_name="api_tokens")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…, {self.user})"

    def is_active_at(self, now: datetime) -> bool:
        if self.revoked_at is not None:
            return False
        return self.expires_at is None or now < self.expires_at
