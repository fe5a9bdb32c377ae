"""Anomaly emails through a real SMTP server: leads of the team and finance get one each per
new anomaly (HTML + text, drivers, a link), never twice; digest readers get one a day."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from pytest_django import Settings

from finops.anomalies.emails import digests_send
from finops.anomalies.models import Anomaly
from finops.anomalies.services import anomalies_detect
from finops.notifications.models import NotificationPreference
from finops.org.models import Profile, Team
from tests import anomaly_ledger as ledger
from tests.conftest import CapturedMail

pytestmark = pytest.mark.django_db(transaction=True)

SINCE = ledger.START + dt.timedelta(days=20)


@pytest.fixture
def people(team: Team, other_team: Team, settings: Settings) -> tuple[User, User]:
    settings.SITE_URL = "https://finops.example"
    lead = User.objects.create_user("lead", email="lead@example.com", password="x-123456789")
    Profile.objects.create(user=lead, role=Profile.Role.TEAM_LEAD).teams.add(team)
    stranger = User.objects.create_user("other", email="other@example.com", password="x-1234567")
    Profile.objects.create(user=stranger, role=Profile.Role.TEAM_LEAD).teams.add(other_team)
    finance = User.objects.create_user("fin", email="fin@example.com", password="x-123456789")
    Profile.objects.create(user=finance, role=Profile.Role.FINANCE)
    return lead, finance


def test_lead_and_finance_get_one_email_each_once(
    team: Team, people: tuple[User, User], smtp_server: CapturedMail
) -> None:
    ledger.build(team)
    anomalies_detect(since=SINCE)
    anomalies_detect(since=SINCE)  # a re-run sends nothing again

    anomaly = Anomaly.objects.get()
    assert len(smtp_server.to("lead@example.com")) == 1
    assert len(smtp_server.to("fin@example.com")) == 1
    assert smtp_server.to("other@example.com") == []  # another team's lead
    content = smtp_server.to("lead@example.com")[0].decode()
    assert "multipart/alternative" in content
    assert "text/html" in content
    assert "run-b" in content
    assert "Unexplained" in content
    assert f"https://finops.example/anomalies/{anomaly.pk}/" in content


def test_digest_reader_gets_no_single_email_but_one_digest(
    team: Team, people: tuple[User, User], smtp_server: CapturedMail
) -> None:
    lead, _ = people
    NotificationPreference.objects.create(
        user=lead, anomaly_mode=NotificationPreference.AnomalyMode.DIGEST
    )
    ledger.build(team)
    anomalies_detect(since=SINCE)
    assert smtp_server.to("lead@example.com") == []
    assert len(smtp_server.to("fin@example.com")) == 1

    today = timezone.now().date()
    assert digests_send(day=today) == 1
    assert digests_send(day=today) == 0
    [digest] = smtp_server.to("lead@example.com")
    assert b"Cost anomalies found on" in digest
    assert b"Vision" in digest
    assert digests_send(day=today - dt.timedelta(days=1)) == 0  # nothing created that day
