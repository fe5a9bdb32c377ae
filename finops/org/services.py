"""Writes of org-level state shared by every app: the data version (see DataVersion)."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import F

from finops.org.models import DATA_VERSION_PK, DataVersion, Profile
from finops.org.selectors import SsoGrant


def _data_version_increment() -> None:
    if not DataVersion.objects.filter(pk=DATA_VERSION_PK).update(number=F("number") + 1):
        DataVersion.objects.get_or_create(pk=DATA_VERSION_PK, defaults={"number": 1})


def data_version_bump() -> None:
    """Make every cached report answer stale, once the current transaction commits (at once
    outside one): a reader keyed by the old number never sees the new rows as missing, and a
    rolled-back write bumps nothing. One UPDATE of one row, outside the writer's transaction,
    so parallel writers never queue on it while they hold their own locks."""
    transaction.on_commit(_data_version_increment)


@transaction.atomic
def sso_profile_apply(*, user: User, grant: SsoGrant) -> Profile:
    """Give the user the role and teams their provider claims grant (at every SSO sign-in):
    the Profile's post_save puts them in the role's group (finops.org.roles)."""
    profile, _ = Profile.objects.get_or_create(user=user, defaults={"role": grant.role})
    if profile.role != grant.role:
        profile.role = grant.role
        profile.save(update_fields=["role"])
    # No data version bump: cached API answers are keyed by the teams a caller sees.
    profile.teams.set(sorted(grant.team_ids))
    return profile
