"""Writes of the audit log."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, User
from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction

from finops.audit.models import AuditEvent


def audit_record(
    *,
    actor: AbstractBaseUser | AnonymousUser | None,
    action: str,
    obj_repr: str,
    details: Mapping[str, Any] | None = None,
    reason: str = "",
) -> AuditEvent:
    """Record one event. Call it inside the transaction of the change it describes, so the
    log holds an event exactly when the change committed.

    details is stored as JSON; dates, Decimals and the like become strings.
    """
    user = actor if isinstance(actor, User) else None
    clean = json.loads(json.dumps(dict(details or {}), cls=DjangoJSONEncoder))
    with transaction.atomic():
        return AuditEvent.objects.create(
            actor=user,
            actor_name=user.get_username() if user is not None else "",
            action=action,
            obj_repr=str(obj_repr)[:500],
            reason=reason,
            details=clean,
        )
