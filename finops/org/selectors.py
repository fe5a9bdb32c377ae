"""Reads for teams: which teams a user may see. (The dry-run preview of a mapping-rule change is
attribution's: finops/attribution/selectors/rule_preview.py.)"""

from __future__ import annotations

from typing import Any

from django.db.models import IntegerField, QuerySet, Subquery
from django.db.models.functions import Coalesce

from finops.org.models import DATA_VERSION_PK, DataVersion, Team
from finops.org.permissions import AnyUser, token_team_limit, user_has_finance_role, user_profile


def team_list_visible(*, user: AnyUser) -> QuerySet[Team]:
    """Every team for finance; the profile's teams for a team lead; none for anyone else;
    of those, only the teams an API token is limited to (when it is)."""
    if user_has_finance_role(user):
        teams = Team.objects.all()
    else:
        profile = user_profile(user)
        if profile is None:
            return Team.objects.none()
        teams = Team.objects.filter(leads=profile)
    limit = token_team_limit(user)
    return teams if limit is None else teams.filter(pk__in=limit)


def data_version_current() -> int:
    """The number finops.org.services.data_version_bump increments (0 before the first)."""
    number = DataVersion.objects.filter(pk=DATA_VERSION_PK).values_list("number", flat=True)
    return next(iter(number), 0)


# Where a token authentication leaves the data version it read with the token (one query for
# both): finops.api.cache keys the answer by it, so a cached hit costs one round trip.
REQUEST_DATA_VERSION_ATTR = "finops_data_version"


def data_version_expression() -> Coalesce:
    """data_version_current() as an expression, to annotate a query the request makes anyway."""
    number = DataVersion.objects.filter(pk=DATA_VERSION_PK).values("number")[:1]
    return Coalesce(Subquery(number), 0, output_field=IntegerField())


def data_version_of_request(request: Any) -> int:
    """The version read with the request's token, else read now."""
    number = getattr(request, REQUEST_DATA_VERSION_ATTR, None)
    return data_version_current() if number is None else int(number)
