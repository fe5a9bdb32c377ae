"""Reads of the audit log."""

from __future__ import annotations

from django.db.models import QuerySet

from finops.audit.models import AuditEvent


def audit_event_list(*, action_prefix: str = "") -> QuerySet[AuditEvent]:
    """Events newest first, optionally only actions starting with a prefix ("period.")."""
    events = AuditEvent.objects.all()
    if action_prefix:
        events = events.filter(action__startswith=action_prefix)
    return events.order_by("-at", "-id")
