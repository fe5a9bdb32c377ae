"""The email outbox: one row per email that must be sent exactly once.

Features (budget alerts, anomalies, statements) never call SMTP themselves. They enqueue an
email under a `key` that names the fact it reports (for example
`budget:12:2026-10:actual:80`); the unique constraint on `key` makes "at most one email per fact"
hold under re-runs and concurrent workers, and the row is marked sent only after the SMTP server
accepted the message.
"""

from __future__ import annotations

from django.conf import settings
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
    # A chat or webhook message (kind "channel-<event>") goes through this same outbox: its
    # channel, and the JSON body posted to the channel's URL (built once, at enqueue, so every
    # retry posts the same message). Null for an email. A deleted channel leaves its history.
    channel = models.ForeignKey(
        "NotificationChannel",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="deliveries",
    )
    payload = models.JSONField(null=True, blank=True)
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


class NotificationPreference(models.Model):
    """Which emails a user wants (no row: the defaults). Budget alerts and anomaly emails are
    enqueued under the kinds below; notification_enqueue leaves out the addresses of users
    who do not want an email's kind."""

    class AnomalyMode(models.TextChoices):
        IMMEDIATE = "immediate", "One email per new anomaly"
        DIGEST = "digest", "A daily digest of the new anomalies"
        OFF = "off", "No anomaly emails"

    # Email kinds (EmailNotification.kind) a preference speaks about.
    KIND_BUDGET = "budget"
    KIND_ANOMALY = "anomaly"
    KIND_ANOMALY_DIGEST = "anomaly-digest"

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notification_preference"
    )
    anomaly_mode = models.CharField(
        max_length=16, choices=AnomalyMode.choices, default=AnomalyMode.IMMEDIATE
    )
    budget_emails = models.BooleanField(default=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        budgets = "budget alerts" if self.budget_emails else "no budget alerts"
        return f"{self.user}: anomalies {self.anomaly_mode}, {budgets}"

    def wants(self, kind: str) -> bool:
        """Whether this user wants emails of `kind` (kinds it does not speak about: yes)."""
        if kind == self.KIND_BUDGET:
            return self.budget_emails
        if kind == self.KIND_ANOMALY:
            return self.anomaly_mode == self.AnomalyMode.IMMEDIATE
        if kind == self.KIND_ANOMALY_DIGEST:
            return self.anomaly_mode == self.AnomalyMode.DIGEST
        return True


class NotificationChannel(models.Model):
    """A chat or webhook destination of alerts (issue 33, DESIGN section 10): a team's (its
    events about that team) or the organisation's (team null: every team's events, and the
    organisation's own). Messages go through the outbox above (one per channel and fact)."""

    class Kind(models.TextChoices):
        SLACK = "slack", "Slack incoming webhook"
        TEAMS = "teams", "Microsoft Teams workflow webhook"
        WEBHOOK = "webhook", "Generic JSON webhook"

    class Event(models.TextChoices):
        BUDGET = "budget", "Budget alerts"
        ANOMALY = "anomaly", "Cost anomalies"
        CLOSE = "close", "Month close"

    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    # A secret (Slack's and Teams' webhook URLs carry their own key): shown masked.
    url = models.URLField(max_length=2000)
    team = models.ForeignKey(
        "org.Team",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="notification_channels",
    )
    events = models.JSONField(default=list)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"
