"""The audit log: who did what to which object, when, and why.

Its own small app that depends on nothing but auth, so every app (org, attribution, budgets,
chargeback, ...) can record into it without imports flowing the wrong way.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class AuditEvent(models.Model):
    at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    # The actor's username at the time: the log stays readable after a user is deleted.
    actor_name = models.CharField(max_length=150, blank=True)
    # Dotted verb, e.g. "period.close", "mapping_rule.change", "budget.delete".
    action = models.CharField(max_length=64, db_index=True)
    obj_repr = models.CharField(max_length=500)
    reason = models.TextField(blank=True)
    # What changed: {"field": [old, new], ...} for edits, figures for a close, ...
    details = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.actor_name or '-'} {self.action} {self.obj_repr}"
