"""The idle showback stored with the month's ledger (issue 29: cold pages): every attribution of
the month writes every team's rows in its transaction, and the pages read them. The rows read
back are the read-time idle_showback's (value and places) for every team, one team, or none;
a re-attribution replaces them; a month attributed before the store is computed at read time.
On the idle scene of tests/idle_scene.py (figures worked out in test_idle_showback.py)."""

from __future__ import annotations

import re
from dataclasses import fields
from decimal import Decimal
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection
from django.test import Client
from pytest_django import DjangoAssertNumQueries

from finops.attribution.models import IdleShowbackMonth, IdleShowbackRow
from finops.attribution.selectors.idle_showback import (
    IdleShowback,
    idle_showback,
    idle_showback_stored,
)
from finops.org.models import Team
from tests.idle_scene import MONTH, attribute_idle_scene
from tests.query_budgets import STORED_IDLE_SHOWBACK_QUERIES

pytestmark = pytest.mark.django_db


@pytest.fixture
def attributed(team: Team, other_team: Team) -> None:
    attribute_idle_scene(team, other_team)


def _text(rows: list[IdleShowback]) -> list[tuple[str, ...]]:
    """Every field as text: equal Decimals with other places (13.33 and 13.330) differ here."""
    return [tuple(str(getattr(r, f.name)) for f in fields(r)) for r in rows]


@pytest.mark.parametrize("scope", ["all", "vision", "speech", "none"])
def test_the_stored_showback_is_the_read_time_showback(attributed: None, scope: str) -> None:
    teams = {
        "all": Team.objects.all(),
        "none": Team.objects.none(),
    }.get(scope, Team.objects.filter(slug=scope))
    stored = idle_showback_stored(month=MONTH, teams=teams)
    reference = idle_showback(month=MONTH, teams=teams)
    assert stored is not None, "stored by the attribution of the month"
    assert stored == reference
    assert _text(stored) == _text(reference)
    assert len(stored) == {"all": 2, "none": 0}.get(scope, 1)


def test_the_hand_worked_figures_come_back(attributed: None) -> None:
    rows = idle_showback_stored(month=MONTH, teams=Team.objects.all())
    assert rows is not None
    speech, vision = rows  # by team name
    assert (vision.shown_platform, vision.shown_other_teams) == (
        Decimal("13.333333333333"),
        Decimal(16),
    )
    assert str(vision.shown_platform) == "13.333333333333"
    assert (vision.job_cost, vision.nodes) == (Decimal("56.00"), 2)
    assert (speech.kept, speech.spread, speech.charged) == (16, 24, 40)


def test_a_re_attribution_replaces_the_stored_rows(attributed: None) -> None:
    first = IdleShowbackMonth.objects.get(billing_period=MONTH).pk
    IdleShowbackRow.objects.filter(team__slug="vision").update(shown_platform="999")
    call_command("attribute", "--month", "2025-06", stdout=StringIO())
    assert IdleShowbackMonth.objects.get(billing_period=MONTH).pk != first
    assert idle_showback_stored(month=MONTH, teams=Team.objects.all()) == idle_showback(
        month=MONTH, teams=Team.objects.all()
    )


def test_a_month_not_stored_is_computed_at_read_time(
    attributed: None, lead_client: Client, team: Team
) -> None:
    IdleShowbackMonth.objects.all().delete()
    assert idle_showback_stored(month=MONTH, teams=Team.objects.all()) is None
    html = lead_client.get(f"/teams/{team.slug}/?month=2025-06").content.decode()
    assert 'data-testid="idle-shown-vision-USD"' in html
    assert ">29.33<" in html


def test_the_pages_read_the_stored_rows(
    attributed: None, client: Client, lead_user: User, finance_user: User, team: Team
) -> None:
    """A stored figure changed by hand shows on the lead's team page and finance's overview:
    read, not recomputed."""
    IdleShowbackRow.objects.filter(team=team).update(shown_platform="100", shown_other_teams="0")
    client.force_login(lead_user)
    team_page = client.get(f"/teams/{team.slug}/?month=2025-06")
    assert team_page.context["user"] == lead_user
    [row] = team_page.context["idle_showback"]
    assert row.shown == 100
    client.force_login(finance_user)
    overview = client.get("/?month=2025-06").content.decode()
    assert 'data-testid="idle-shown-vision-USD">100.00<' in overview


# A Decimal's text with an exponent, as str() gives it ("0E-12", "1.5E+3").
EXPONENT = re.compile(r"\b\d+(?:\.\d+)?E[-+]?\d+\b")


def test_no_page_prints_a_stored_figure_with_an_exponent(
    attributed: None, client: Client, lead_user: User, finance_user: User, team: Team
) -> None:
    """A zero figure is stored as the computation gives it, with its places: "0E-12"
    (ExactDecimalField). The pages that read the rows (nothing else does: no API, no export)
    format every figure (money, percent; Django's own rendering of a Decimal has no exponent
    either): only str() of it, in a template or a script's data, would print "0E-12"."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT kept, spread, commitment, shown_platform, shown_other_teams, job_cost "
            f"FROM {IdleShowbackRow._meta.db_table}"
        )
        stored = [text for row in cursor.fetchall() for text in row]
    assert "0E-12" in stored  # the case this guards
    pages = []
    for user in (lead_user, finance_user):
        client.force_login(user)
        for url in ("/?month=2025-06", f"/teams/{team.slug}/?month=2025-06"):
            response = client.get(url)
            assert response.context["idle_showback"], url
            pages.append(response.content.decode())
    assert [EXPONENT.findall(html) for html in pages] == [[]] * 4


def test_the_stored_showback_is_two_queries(
    attributed: None, django_assert_num_queries: DjangoAssertNumQueries
) -> None:
    with django_assert_num_queries(STORED_IDLE_SHOWBACK_QUERIES):
        rows = idle_showback_stored(month=MONTH, teams=Team.objects.all())
    assert rows
