"""Reads for teams: which teams a user may see. (The dry-run preview of a mapping-rule change is
attribution's: finops/attribution/selectors/rule_preview.py.)"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db.models import IntegerField, QuerySet, Subquery
from django.db.models.functions import Coalesce

from finops.org.models import (
    DATA_VERSION_PK,
    DataVersion,
    MappingRule,
    Profile,
    SsoRule,
    Team,
)
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


@dataclass(frozen=True)
class SsoGrant:
    """What a person's provider claims give them here (finops.org.sso)."""

    role: str
    team_ids: frozenset[int]


_ROLE_RANK = (Profile.Role.FINANCE, Profile.Role.VIEWER, Profile.Role.TEAM_LEAD)


def _claim_values(value: object) -> set[str]:
    if isinstance(value, str):
        return {value}
    if isinstance(value, list | tuple):
        return {v for v in value if isinstance(v, str)}
    return set()


def sso_grant_for_claims(claims: Mapping[str, object]) -> SsoGrant | None:
    """The highest role of the SsoRule rows the claims match (finance, viewer, team lead), with
    the teams of every matching team-lead rule; None when no rule matches."""
    matched = [
        rule
        for rule in SsoRule.objects.all()
        if rule.value in _claim_values(claims.get(rule.claim))
    ]
    for role in _ROLE_RANK:
        rules = [r for r in matched if r.role == role]
        if rules:
            teams = frozenset(r.team_id for r in rules if r.team_id is not None)
            return SsoGrant(role=str(role), team_ids=teams)
    return None


@dataclass(frozen=True)
class OnboardingTeam:
    team: Team
    rules: list[MappingRule]
    leads: list[str]
    sso_rules: list[SsoRule]


def onboarding_teams() -> list[OnboardingTeam]:
    """Every team with its mapping rules (in the order they apply), leads and sign-in rules."""
    teams = Team.objects.prefetch_related("mapping_rules", "leads__user", "sso_rules")
    return [
        OnboardingTeam(
            team=team,
            rules=sorted(
                team.mapping_rules.all(),
                key=lambda r: MappingRule.precedence(
                    priority=r.priority, kind=r.kind, rule_id=r.pk
                ),
            ),
            leads=sorted(p.user.email or p.user.get_username() for p in team.leads.all()),
            sso_rules=list(team.sso_rules.all()),
        )
        for team in teams
    ]


def onboarding_people() -> QuerySet[Profile]:
    return (
        Profile.objects.select_related("user")
        .prefetch_related("teams")
        .order_by("role", "user__username")
    )


def sso_rules_org_wide() -> QuerySet[SsoRule]:
    """The finance and viewer sign-in rules (a team lead's are listed with their team)."""
    return SsoRule.objects.filter(team__isnull=True)
