"""Writes of the onboarding page (finance): teams, the rules that map Slurm accounts, Kubernetes
namespaces and tags to them, the single sign-on rules, and invitations of leads and viewers
(an email through the outbox with a link: set a password, or sign in through the company's
provider when local passwords are off). Every change is in the audit log."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, User
from django.contrib.auth.tokens import default_token_generator
from django.db import transaction
from django.urls import reverse
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from finops.audit.services import audit_record
from finops.notifications.models import EmailNotification
from finops.notifications.services import notification_enqueue
from finops.org.models import MappingRule, Profile, SsoRule, Team
from finops.org.services import data_version_bump

Actor = AbstractBaseUser | AnonymousUser
INVITATION_KIND = "invitation"


class OnboardingError(ValueError):
    """A change refused, with the reason shown to finance."""


@transaction.atomic
def team_create(*, actor: Actor, name: str, slug: str) -> Team:
    if Team.objects.filter(slug=slug).exists():
        raise OnboardingError(f"A team with the slug {slug!r} exists already.")
    team = Team.objects.create(name=name, slug=slug)
    audit_record(actor=actor, action="team.create", obj_repr=str(team), details={"slug": slug})
    data_version_bump()
    return team


@dataclass(frozen=True)
class MappingInput:
    team: Team
    kind: str
    key: str
    value: str
    priority: int = 100


@transaction.atomic
def mapping_rule_add(*, actor: Actor, rule: MappingInput) -> MappingRule:
    """A rule applies from the next attribution of a month (Pipeline page, or `attribute`)."""
    key = rule.key if rule.kind in MappingRule.KEYED_KINDS else ""
    if MappingRule.objects.filter(kind=rule.kind, key=key, value=rule.value).exists():
        raise OnboardingError(
            f"{rule.kind} {key + '=' if key else ''}{rule.value} is mapped already."
        )
    created = MappingRule.objects.create(
        team=rule.team, kind=rule.kind, key=key, value=rule.value, priority=rule.priority
    )
    audit_record(
        actor=actor,
        action="mapping_rule.create",
        obj_repr=str(created),
        details={"kind": rule.kind, "key": key, "value": rule.value, "team": rule.team.slug},
    )
    return created


@transaction.atomic
def mapping_rule_delete(*, actor: Actor, rule_id: int) -> None:
    rule = MappingRule.objects.select_related("team").filter(pk=rule_id).first()
    if rule is None:
        raise OnboardingError(f"No mapping rule {rule_id}.")
    audit_record(actor=actor, action="mapping_rule.delete", obj_repr=str(rule))
    rule.delete()


@transaction.atomic
def sso_rule_add(*, actor: Actor, claim: str, value: str, role: str, team: Team | None) -> SsoRule:
    rule = SsoRule(claim=claim, value=value, role=role, team=team)
    rule.full_clean()
    rule.save()
    audit_record(actor=actor, action="sso_rule.create", obj_repr=str(rule))
    return rule


@transaction.atomic
def sso_rule_delete(*, actor: Actor, rule_id: int) -> None:
    rule = SsoRule.objects.select_related("team").filter(pk=rule_id).first()
    if rule is None:
        raise OnboardingError(f"No sign-in rule {rule_id}.")
    audit_record(actor=actor, action="sso_rule.delete", obj_repr=str(rule))
    rule.delete()


@dataclass(frozen=True)
class Invitation:
    user: User
    email: EmailNotification | None
    link: str


def _free_username(email: str) -> str:
    base = email.split("@")[0][:140] or "user"
    users = User.objects
    name, n = base, 1
    while users.filter(username__iexact=name).exists():
        n += 1
        name = f"{base}-{n}"
    return name


def invitation_link(user: User) -> str:
    """Set a password (one use: the token dies with the password it replaces), or, with local
    passwords off, the login page and its single sign-on button."""
    base: str = settings.FINOPS_BASE_URL
    if not settings.FINOPS_LOCAL_PASSWORDS:
        return base + reverse("login")
    uid = urlsafe_base64_encode(force_bytes(user.pk))
    token = default_token_generator.make_token(user)
    return base + reverse("invite-accept", args=[uid, token])


@transaction.atomic
def person_invite(*, actor: Actor, email: str, role: str, teams: Sequence[Team]) -> Invitation:
    """Create the account (no usable password) with its role and teams, and email the link."""
    email = email.strip()
    if User.objects.filter(email__iexact=email).exists():
        raise OnboardingError(f"{email} has an account already.")
    if role == Profile.Role.TEAM_LEAD and not teams:
        raise OnboardingError("A team lead is invited to at least one team.")
    if role != Profile.Role.TEAM_LEAD and teams:
        raise OnboardingError("Only a team lead is invited to teams (finance and viewers see all).")
    user = User.objects.create_user(_free_username(email), email=email)
    user.set_unusable_password()
    user.save(update_fields=["password"])
    profile = Profile.objects.create(user=user, role=role)
    profile.teams.set(teams)
    link = invitation_link(user)
    team_names = ", ".join(t.name for t in teams)
    what = f"team lead of {team_names}" if teams else str(Profile.Role(role).label).lower()
    sent = notification_enqueue(
        key=f"invitation:{user.pk}",
        kind=INVITATION_KIND,
        recipients=[email],
        subject=f"You are invited to GPU FinOps as {what}",
        text_body=_invitation_text(actor=actor, what=what, link=link),
    )
    audit_record(
        actor=actor,
        action="person.invite",
        obj_repr=email,
        details={"role": role, "teams": [t.slug for t in teams]},
    )
    return Invitation(user=user, email=sent, link=link)


def _invitation_text(*, actor: Actor, what: str, link: str) -> str:
    by = actor.get_username() if actor.is_authenticated else "finance"
    step = (
        "Choose your password here (the link works once):"
        if settings.FINOPS_LOCAL_PASSWORDS
        else "Sign in with your company account here:"
    )
    return (
        f"Hello,\n\n{by} has invited you to GPU FinOps, the GPU cost chargeback pages, as {what}."
        f"\n\n{step}\n{link}\n"
    )
