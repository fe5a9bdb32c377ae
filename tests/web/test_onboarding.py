"""Onboarding from one page (finance): a team, its Slurm account, namespace and tag, an
invitation through the outbox (a real SMTP server) whose link lets the lead choose a password
and then see their team only; leads and viewers change nothing there."""

from __future__ import annotations

import email
import re
from email.message import Message
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from finops.audit.models import AuditEvent
from finops.notifications.models import EmailNotification
from finops.org.models import MappingRule, Profile, SsoRule, Team
from tests.conftest import CapturedMail

pytestmark = pytest.mark.django_db(transaction=True)


def _text(raw: bytes) -> str:
    message: Message = email.message_from_bytes(raw)
    part = next(p for p in message.walk() if p.get_content_type() == "text/plain")
    payload = part.get_payload(decode=True)
    assert isinstance(payload, bytes)
    return payload.decode()


def test_finance_onboards_a_team_and_its_lead_end_to_end(
    finance_client: Client, smtp_server: CapturedMail, team: Team, settings: Any
) -> None:
    answer = finance_client.post("/onboarding/teams/", {"team-name": "Robotics Lab"})
    assert answer.status_code == 302
    robotics = Team.objects.get(slug="robotics-lab")
    for kind, key, value in [
        ("slurm_account", "", "robo-gpu"),
        ("namespace", "", "robotics-train"),
        ("tag", "team", "robotics"),
    ]:
        answer = finance_client.post(
            "/onboarding/mappings/",
            {"mapping-team": "robotics-lab", "mapping-kind": kind, "mapping-key": key,
             "mapping-value": value},
        )  # fmt: skip
        assert answer.status_code == 302, answer.content[:500]
    rules = {(r.kind, r.key, r.value) for r in MappingRule.objects.filter(team=robotics)}
    assert rules == {
        ("slurm_account", "", "robo-gpu"),
        ("namespace", "", "robotics-train"),
        ("tag", "team", "robotics"),
    }

    answer = finance_client.post(
        "/onboarding/invitations/",
        {"invite-email": "robo.lead@example.com", "invite-role": "team_lead",
         "invite-teams": ["robotics-lab"]},
    )  # fmt: skip
    assert answer.status_code == 302, answer.content[:500]
    page = finance_client.get("/onboarding/").content.decode()
    assert "Invited robo.lead@example.com" in page
    assert "robo-gpu" in page
    assert "robotics-train" in page

    outbox = EmailNotification.objects.get(kind="invitation")
    assert outbox.status == EmailNotification.Status.SENT
    [raw] = smtp_server.to("robo.lead@example.com")
    body = _text(raw)
    assert "team lead of Robotics Lab" in body
    link = re.search(r"http://\S+/accounts/invite/\S+/", body)
    assert link, body
    path = link.group(0).removeprefix(settings.FINOPS_BASE_URL)

    invited = Client()
    form = invited.get(path, follow=True)
    assert b"Choose your password" in form.content
    assert b"robo.lead" in form.content
    done = invited.post(
        form.redirect_chain[-1][0],
        {"new_password1": "robotics-lab-secret-42", "new_password2": "robotics-lab-secret-42"},
    )
    assert done.status_code == 302
    assert done["Location"] == "/accounts/login/"
    assert b"no longer valid" in Client().get(path, follow=True).content

    login = invited.post(
        "/accounts/login/", {"username": "robo.lead", "password": "robotics-lab-secret-42"}
    )
    assert login.status_code == 302
    assert invited.get("/teams/robotics-lab/").status_code == 200
    assert invited.get("/teams/vision/").status_code in (403, 404)
    assert invited.get("/onboarding/").status_code == 403
    actions = set(AuditEvent.objects.values_list("action", flat=True))
    assert {"team.create", "mapping_rule.create", "person.invite"} <= actions


def test_bad_input_is_refused_with_the_reason_and_saves_nothing(
    finance_client: Client, team: Team
) -> None:
    answer = finance_client.post(
        "/onboarding/mappings/",
        {"mapping-team": "vision", "mapping-kind": "tag", "mapping-value": "x"},
    )
    assert answer.status_code == 400
    assert b"A tag or label rule names its key." in answer.content
    answer = finance_client.post("/onboarding/teams/", {"team-name": "V", "team-slug": "vision"})
    assert answer.status_code == 400
    assert b"slug &#x27;vision&#x27; exists already" in answer.content
    answer = finance_client.post(
        "/onboarding/invitations/", {"invite-email": "v@example.com", "invite-role": "team_lead"}
    )
    assert answer.status_code == 400
    assert b"Choose the teams this lead owns (at least one)." in answer.content
    answer = finance_client.post(
        "/onboarding/sign-in-rules/",
        {"sso-claim": "groups", "sso-value": "x", "sso-role": "finance", "sso-team": "vision"},
    )
    assert answer.status_code == 400
    assert b"Only a team-lead rule names a team." in answer.content
    assert not MappingRule.objects.exists()
    assert not SsoRule.objects.exists()
    assert Team.objects.count() == 1
    assert not User.objects.filter(email="v@example.com").exists()


def test_finance_keeps_the_sign_in_rules_there(finance_client: Client, team: Team) -> None:
    answer = finance_client.post(
        "/onboarding/sign-in-rules/",
        {"sso-claim": "groups", "sso-value": "vision-leads", "sso-role": "team_lead",
         "sso-team": "vision"},
    )  # fmt: skip
    assert answer.status_code == 302
    rule = SsoRule.objects.get()
    assert (rule.value, rule.role, rule.team) == ("vision-leads", "team_lead", team)
    assert finance_client.post(f"/onboarding/sign-in-rules/{rule.pk}/delete/").status_code == 302
    assert not SsoRule.objects.exists()


def test_leads_and_viewers_change_nothing(
    lead_client: Client, viewer_user: User, team: Team
) -> None:
    assert lead_client.get("/onboarding/").status_code == 403
    assert lead_client.post("/onboarding/teams/", {"team-name": "Mine"}).status_code == 403
    viewer = Client()
    viewer.force_login(viewer_user)
    assert viewer.get("/onboarding/").status_code == 200
    assert viewer.post("/onboarding/teams/", {"team-name": "Mine"}).status_code == 403
    assert Team.objects.count() == 1
    assert Profile.objects.filter(role="team_lead").count() == 1


def test_anonymous_people_are_sent_to_login(client: Client) -> None:
    page = client.get("/onboarding/")
    assert page.status_code == 302
    assert page["Location"].startswith("/accounts/login/")
    post = client.post("/onboarding/teams/", {"team-name": "Sneaky"})
    assert post.status_code == 302
    assert not Team.objects.filter(name="Sneaky").exists()


def test_with_local_passwords_off_the_invitation_links_the_sso_login(
    finance_client: Client, smtp_server: CapturedMail, team: Team, settings: Any
) -> None:
    settings.FINOPS_LOCAL_PASSWORDS = False
    answer = finance_client.post(
        "/onboarding/invitations/", {"invite-email": "vi@example.com", "invite-role": "viewer"}
    )
    assert answer.status_code == 302
    [raw] = smtp_server.to("vi@example.com")
    body = _text(raw)
    assert "as viewer (read-only)" in body
    assert f"{settings.FINOPS_BASE_URL}/accounts/login/" in body.split()
    assert "/accounts/invite/" not in body
    invited = User.objects.get(email="vi@example.com")
    assert not invited.has_usable_password()
    assert invited.finops_profile.role == Profile.Role.VIEWER
