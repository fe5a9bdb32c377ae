"""Reads for teams: which teams a user may see. (The dry-run preview of a mapping-rule change is
attribution's: finops/attribution/rule_preview.py.)"""

from __future__ import annotations

from django.db.models import QuerySet

from finops.org.models import Team
from finops.org.permissions import AnyUser, user_is_finance, user_profile


def team_list_visible(*, user: AnyUser) -> QuerySet[Team]:
    """Every team for finance; the profile's teams for a team lead; none for anyone else."""
    if user_is_finance(user):
        return Team.objects.all()
    profile = user_profile(user)
    if profile is None:
        return Team.objects.none()
    return Team.objects.filter(leads=profile)
