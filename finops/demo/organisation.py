"""The demo organisation: teams, a finance user, a team lead, and mapping rules.

Idempotent: running it again updates in place and never duplicates teams, users or rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from decimal import Decimal

from django.contrib.auth.models import User
from django.db import transaction

from billing_ingest.models import CoreWeaveRate
from finops.attribution.models import SharedCostRule
from finops.demo.export_coreweave import ContractRate
from finops.demo.workload import TEAMS
from finops.org.models import MappingRule, Profile, Team

FINANCE_USERNAME = "finance"
LEAD_USERNAME = "lead"
# The lead sees these teams only.
LEAD_TEAMS = ("language", "speech")

# Slurm accounts whose names differ from the team they belong to.
SLURM_ACCOUNT_RULES = {
    "cv": "vision",
    "nlp": "language",
    "asr": "speech",
    "speech": "speech",
    "recsys": "recsys",
    "infra": "platform",
}
# (tag key, value) -> team, for tags that do not name the team directly.
TAG_RULES = {("project", "ranker"): "recsys", ("project", "llama"): "language"}
# Sub-accounts (a GCP project) owned by one team as a whole.
SUB_ACCOUNT_RULES = {"acme-speech-prod": "speech"}
# Kubernetes namespaces whose pods carry no team label.
NAMESPACE_RULES = {"gpu-platform": "platform", "cv": "vision", "llm": "language"}
# GCP bills its committed use discount as an hourly fee on no resource: shared out pro rata to
# each team's GPU spend on Google Cloud, the way a FinOps team would book it.
CUD_FEE_RULE = {
    "name": "GCP committed use discount fees (demo)",
    "provider_name": "Google Cloud",
    "sub_account_id": "acme-ml-train",
    "service_name": "Compute Engine",
    "charge_category": "Usage",
}


@dataclass(frozen=True)
class DemoOrganisation:
    teams: dict[str, Team]
    finance: User
    lead: User


def _user_ensure(*, username: str, password: str, email: str, first_name: str) -> User:
    user, _ = User.objects.get_or_create(username=username)
    user.email = email
    user.first_name = first_name
    user.is_active = True
    user.set_password(password)
    user.save()
    return user


def _rule_ensure(*, kind: str, key: str, value: str, team: Team, priority: int) -> None:
    MappingRule.objects.update_or_create(
        kind=kind, key=key, value=value, defaults={"team": team, "priority": priority}
    )


@transaction.atomic
def demo_organisation_ensure(*, finance_password: str, lead_password: str) -> DemoOrganisation:
    teams: dict[str, Team] = {}
    for spec in TEAMS:
        team, _ = Team.objects.update_or_create(slug=spec.slug, defaults={"name": spec.name})
        teams[spec.slug] = team

    finance = _user_ensure(
        username=FINANCE_USERNAME,
        password=finance_password,
        email="finance@example.com",
        first_name="Finance",
    )
    Profile.objects.update_or_create(user=finance, defaults={"role": Profile.Role.FINANCE})
    lead = _user_ensure(
        username=LEAD_USERNAME, password=lead_password, email="lead@example.com", first_name="Lea"
    )
    profile, _ = Profile.objects.update_or_create(
        user=lead, defaults={"role": Profile.Role.TEAM_LEAD}
    )
    profile.teams.set([teams[slug] for slug in LEAD_TEAMS])

    for account, slug in SLURM_ACCOUNT_RULES.items():
        _rule_ensure(
            kind=MappingRule.Kind.SLURM_ACCOUNT, key="", value=account, team=teams[slug],
            priority=50,
        )  # fmt: skip
    for (key, value), slug in TAG_RULES.items():
        _rule_ensure(kind=MappingRule.Kind.TAG, key=key, value=value, team=teams[slug], priority=20)
    for sub_account, slug in SUB_ACCOUNT_RULES.items():
        _rule_ensure(
            kind=MappingRule.Kind.SUB_ACCOUNT, key="", value=sub_account, team=teams[slug],
            priority=40,
        )  # fmt: skip
    for namespace, slug in NAMESPACE_RULES.items():
        _rule_ensure(
            kind=MappingRule.Kind.NAMESPACE, key="", value=namespace, team=teams[slug],
            priority=50,
        )  # fmt: skip
    SharedCostRule.objects.update_or_create(
        name=CUD_FEE_RULE["name"],
        defaults={**CUD_FEE_RULE, "method": SharedCostRule.Method.GPU_SPEND, "priority": 50},
    )
    return DemoOrganisation(teams=teams, finance=finance, lead=lead)


@transaction.atomic
def coreweave_rates_ensure(*, rates: list[ContractRate], first: date, last: date) -> int:
    """The contract rate card the CoreWeave usage is priced with, valid for the demo month."""
    for rate in rates:
        CoreWeaveRate.objects.update_or_create(
            instance_type=rate.instance_type, pricing_category=rate.pricing_category,
            currency="USD", valid_from=first,
            defaults={"rate": Decimal(rate.rate), "unit": rate.unit, "valid_to": last},
        )  # fmt: skip
    return len(rates)
