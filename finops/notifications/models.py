"""The email outbox: one row per email that must be sent exactly once.

Features (budget alerts, anomalies, statements) never call SMTP themselves. They enqueue an
email under a `key` that names the fact it reports (for example
`budget:12:2026-10:actual:80`); the unique constraint on `key` makes "at most one email per fact"
hold under re-runs and concurrent workers, and the row is marked sent only after the SMTP server
accepted the message.
"""

from __future__ import annotations

from django.db import models


class EmailNotification(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        SENDING = "sending", "Sending"
        SENT = "sent", "Sent"
        FAILED = "failed", "Failed"

    key = models.CharField(max_length=255, unique=True)
    kind = models.CharField(max_length=40, db_index=True)
    recipients = models.JSONField(default=list)
    subject = models.CharField(max_length=255)
    text_body = models.TextField()
    html_body = models.TextField(blank=True, default="")
    status = models.CharField(
        max_length=10, choices=Status.choices, default=Status.PENDING, db_index=True
    )
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.kind}: {self.subject} ({self.status})"
