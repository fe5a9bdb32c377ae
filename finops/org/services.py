"""Writes of org-level state shared by every app: the data version (see DataVersion)."""

from __future__ import annotations

from django.db import transaction
from django.db.models import F

from finops.org.models import DATA_VERSION_PK, DataVersion


def _data_version_increment() -> None:
    if not DataVersion.objects.filter(pk=DATA_VERSION_PK).update(number=F("number") + 1):
        DataVersion.objects.get_or_create(pk=DATA_VERSION_PK, defaults={"number": 1})


def data_version_bump() -> None:
    """Make every cached report answer stale, once the current transaction commits (at once
    outside one): a reader keyed by the old number never sees the new rows as missing, and a
    rolled-back write bumps nothing. One UPDATE of one row, outside the writer's transaction,
    so parallel writers never queue on it while they hold their own locks."""
    transaction.on_commit(_data_version_increment)
