"""Roles: finance edits the configuration in the admin; a viewer sees everything finance sees
and changes nothing; a team lead never opens the admin."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User
from django.http import HttpRequest
from django.test import Client, RequestFactory
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from finops.demo.organisation import demo_organisation_ensure
from finops.org.models import MappingRule, Profile, Team
from finops.org.permissions import user_is_finance, user_may_edit
from finops.org.roles import FINANCE_EDITS, FINANCE_GROUP, VIEWER_GROUP
from tests.factories import Scenario

pytestmark = pytest.mark.django_db

CONFIG_ADMIN = [
    "/admin/org/mappingrule/",
    "/admin/attribution/idlepolicy/",
    "/admin/attribution/sharedcostrule/",
    "/admin/attribution/chargebasis/",
    "/admin/billing_ingest/billingsource/",
    "/admin/billing_ingest/coreweaverate/",
    "/admin/currency/fxrate/",
]
FINANCE_PAGES = [
    "/?month=2025-09",
    "/teams/speech/?month=2025-09",
    "/reconciliation/?month=2025-09",
    "/imports/",
    "/close/",
    "/close/2025-09/",
    "/explorer/?month=2025-09&group_by=region",
    "/audit/",
    "/teams/speech/statements/2025-09/",
]


def test_roles_in_permissions() -> None:
    finance = User.objects.create_user("f")
    viewer = User.objects.create_user("v")
    lead = User.objects.create_user("l")
    for user, role in ((finance, "finance"), (viewer, "viewer"), (lead, "team_lead")):
        Profile.objects.create(user=user, role=role)
    assert [user_is_finance(u) for u in (finance, viewer, lead)] == [True, True, False]
    assert [user_may_edit(u) for u in (finance, viewer, lead)] == [True, False, False]


@pytest.mark.parametrize("url", CONFIG_ADMIN)
def test_finance_opens_and_edits_configuration_in_the_admin(
    client: Client, finance_user: User, url: str
) -> None:
    finance_user.refresh_from_db()
    assert finance_user.is_staff
    assert finance_user.groups.filter(name=FINANCE_GROUP).exists()
    client.force_login(finance_user)
    assert client.get(url).status_code == 200
    assert client.get(url + "add/").status_code == 200


def test_finance_adds_a_rule_but_cannot_touch_users_or_the_ledger(
    client: Client, finance_user: User, team: Team
) -> None:
    client.force_login(finance_user)
    response = client.post(
        "/admin/org/mappingrule/add/",
        {"kind": "namespace", "key": "", "value": "cv", "team": team.pk, "priority": 50},
    )
    assert response.status_code == 302
    assert MappingRule.objects.filter(value="cv", team=team).exists()
    # Users and roles stay with the superuser; the ledger is derived data (view only).
    assert client.get("/admin/auth/user/").status_code == 403
    assert client.get("/admin/org/profile/").status_code == 403
    assert client.get("/admin/attribution/allocatedcost/").status_code == 200
    assert client.get("/admin/attribution/allocatedcost/add/").status_code == 403


def test_lead_cannot_open_the_admin(client: Client, lead_user: User) -> None:
    lead_user.refresh_from_db()
    assert not lead_user.is_staff
    assert not lead_user.groups.exists()
    client.force_login(lead_user)
    response = client.get("/admin/org/mappingrule/")
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


def test_role_change_moves_group_and_admin_access(finance_user: User) -> None:
    profile = finance_user.finops_profile
    profile.role = Profile.Role.TEAM_LEAD
    profile.save()
    finance_user.refresh_from_db()
    assert not finance_user.is_staff
    assert not finance_user.groups.exists()
    profile.role = Profile.Role.VIEWER
    profile.save()
    finance_user.refresh_from_db()
    assert finance_user.is_staff
    assert list(finance_user.groups.values_list("name", flat=True)) == [VIEWER_GROUP]


def test_groups_hold_exactly_their_permissions() -> None:
    finance = Group.objects.get(name=FINANCE_GROUP)
    viewer = Group.objects.get(name=VIEWER_GROUP)
    codes = set(finance.permissions.values_list("codename", flat=True))
    assert {"add_mappingrule", "change_idlepolicy", "delete_billingsource"} <= codes
    assert "change_allocatedcost" not in codes
    assert "view_allocatedcost" in codes
    viewer_codes = set(viewer.permissions.values_list("codename", flat=True))
    assert viewer_codes
    assert all(code.startswith("view_") for code in viewer_codes)
    assert {f"view_{label.split('.')[1]}" for label in FINANCE_EDITS} <= viewer_codes


def test_demo_finance_user_opens_the_admin_and_the_lead_does_not(client: Client) -> None:
    org = demo_organisation_ensure(finance_password="fin-pass-123", lead_password="lead-pass-1")
    org.finance.refresh_from_db()
    org.lead.refresh_from_db()
    assert org.finance.is_staff
    assert not org.finance.is_superuser
    assert not org.lead.is_staff
    assert client.login(request=HttpRequest(), username="finance", password="fin-pass-123")
    assert client.get("/admin/org/mappingrule/").status_code == 200
    assert client.get("/admin/attribution/idlepolicy/add/").status_code == 200


@pytest.mark.parametrize("url", FINANCE_PAGES)
def test_viewer_sees_what_finance_sees(
    client: Client, scenario: Scenario, viewer_user: User, url: str
) -> None:
    client.force_login(viewer_user)
    assert client.get(url).status_code == 200


def test_viewer_changes_nothing(
    client: Client, scenario: Scenario, viewer_user: User, team: Team
) -> None:
    viewer_user.refresh_from_db()
    assert viewer_user.is_staff  # reads the configuration in the admin
    client.force_login(viewer_user)
    assert client.get("/admin/org/mappingrule/").status_code == 200
    assert client.get("/admin/org/mappingrule/add/").status_code == 403
    response = client.post(
        "/admin/org/mappingrule/add/",
        {"kind": "namespace", "key": "", "value": "cv", "team": team.pk, "priority": 50},
    )
    assert response.status_code == 403
    assert not MappingRule.objects.exists()
    assert client.post("/close/2025-09/close/", {"reason": "x"}).status_code == 403
    page = client.get("/close/")
    assert b'data-testid="close-2025-09"' not in page.content
    # Logging out still works.
    assert client.post("/accounts/logout/").status_code == 302


def test_viewer_api_reads_but_every_write_is_refused(
    scenario: Scenario, viewer_user: User, finance_user: User
) -> None:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION="Token " + Token.objects.create(user=viewer_user).key)
    assert api.get("/api/v1/reconciliation/?month=2025-09").status_code == 200
    assert api.get("/api/v1/statements/?month=2025-09").status_code == 200
    for method in ("post", "put", "patch", "delete"):
        assert getattr(api, method)("/api/v1/teams/vision/").status_code == 403
    # Finance is refused only because the endpoint has no such method.
    api.credentials(HTTP_AUTHORIZATION="Token " + Token.objects.create(user=finance_user).key)
    assert api.post("/api/v1/teams/vision/").status_code == 405


def test_is_finance_permission_keeps_viewers_read_only(
    rf: RequestFactory, viewer_user: User, finance_user: User, lead_user: User
) -> None:
    from rest_framework.request import Request
    from rest_framework.views import APIView

    from finops.org.permissions import IsFinance

    def allowed(user: User, method: str) -> bool:
        request = Request(getattr(rf, method)("/"))
        request.user = user
        return IsFinance().has_permission(request, APIView())

    assert [allowed(u, "get") for u in (finance_user, viewer_user, lead_user)] == [
        True,
        True,
        False,
    ]
    assert [allowed(u, "post") for u in (finance_user, viewer_user, lead_user)] == [
        True,
        False,
        False,
    ]
