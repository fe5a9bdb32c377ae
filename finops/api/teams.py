"""The teams an API request asks for: those the caller may see, narrowed to the `team` slug
when given (404 when the slug names none of them: an invisible team is not told apart from a
missing one)."""

from __future__ import annotations

from django.db.models import QuerySet
from rest_framework.exceptions import NotFound

from finops.org.models import Team
from finops.org.permissions import AnyUser
from finops.org.selectors import team_list_visible


def teams_asked(*, user: AnyUser, slug: str | None) -> QuerySet[Team]:
    teams = team_list_visible(user=user)
    if slug:
        teams = teams.filter(slug=slug)
        if not teams.exists():
            raise NotFound("no such team")
    return teams
