"""Idle showback (issue 29): the idle a team is charged under the idle policies, and its share of
the idle others bear on the nodes its jobs ran on; hand-computed, through `attribute --month`,
on the team page (a lead) and the overview (finance, a lead).

The scene (cluster c1, 8-GPU p5.48xlarge nodes, 2025-06-03 00:00-01:00 UTC):
- gpu-a, $80, no policy (keep, untagged line: no team): job 1 (vision, 4 GPUs) -> training 40,
  job 2 (speech, 2 GPUs) -> training 20, idle 20 owned by nobody (the platform bucket).
  Shown: vision 20 x 40/60 = 13.333.. -> 13.33; speech 20 x 20/60 = 6.666.. -> 6.67.
- gpu-b, $32, keep with speech as the pool owner: job 3 (vision, 4 GPUs) -> training 16, idle
  16 charged to speech (kept). Shown to vision: 16 x 16/16 = 16.00, borne by another team.
- gpu-c, $48, spread: job 4 (speech, 4 GPUs) -> training 24, idle 24 spread onto job 4 (speech,
  charged spread).

vision: job cost 40 + 16 = 56.00, charged 0, shown 13.33 + 16.00 = 29.33,
        idle share 29.33 / 85.33 = 34.4 %.
speech: job cost 20 + 24 = 44.00, charged kept 16 + spread 24 = 40.00, shown 6.67 + 0,
        idle share 46.67 / 90.67 = 51.5 %.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.test import Client

from finops.attribution.selectors import idle_shown_sql
from finops.attribution.selectors.idle_showback import idle_showback
from finops.core.bounded_sums import QuotientSum
from finops.org.models import Team
from tests.idle_scene import MONTH, attribute_idle_scene

pytestmark = pytest.mark.django_db


@pytest.fixture
def attributed(team: Team, other_team: Team) -> None:
    # The Slurm accounts are the fixture teams' slugs: vision (team) and speech (other_team).
    attribute_idle_scene(team, other_team)


def test_charged_and_shown_idle_per_team(attributed: None, team: Team, other_team: Team) -> None:
    vision, speech = idle_showback(month=MONTH, teams=Team.objects.order_by("name"))[::-1]
    assert (vision.team, speech.team) == (team, other_team)
    assert (vision.currency, speech.currency) == ("USD", "USD")
    assert (vision.kept, vision.spread, vision.commitment) == (0, 0, 0)
    # Exact to the ledger's 12 places, rounded once.
    assert (vision.shown_platform, vision.shown_other_teams) == (
        Decimal("13.333333333333"),
        Decimal(16),
    )
    assert (vision.job_cost, vision.nodes) == (Decimal("56.00"), 2)
    assert vision.idle_share is not None
    assert round(vision.idle_share * 100, 1) == Decimal("34.4")
    assert (speech.kept, speech.spread, speech.charged) == (
        Decimal(16),
        Decimal(24),
        Decimal(40),
    )
    assert (speech.shown_platform, speech.shown_other_teams) == (
        Decimal("6.666666666667"),
        Decimal(0),
    )
    assert (speech.job_cost, speech.nodes) == (Decimal("44.00"), 2)
    assert speech.idle_share is not None
    assert round(speech.idle_share * 100, 1) == Decimal("51.5")


def test_a_lead_reads_only_their_team(attributed: None, team: Team) -> None:
    [only] = idle_showback(month=MONTH, teams=Team.objects.filter(pk=team.pk))
    assert only.team == team
    assert only.shown == Decimal("29.333333333333")
    assert only.charged == 0


def test_no_ledger_no_rows(team: Team) -> None:
    assert idle_showback(month=MONTH, teams=Team.objects.all()) == []


def test_team_page_shows_the_leads_idle(attributed: None, lead_client: Client, team: Team) -> None:
    html = lead_client.get(f"/teams/{team.slug}/?month=2025-06").content.decode()
    assert 'data-testid="idle-showback"' in html
    assert 'data-testid="idle-charged-vision-USD">0.00<' in html
    # The showback is the one lead-visible figure that moves with other teams' use of the
    # nodes (tests/security/test_lead_isolation.py): shown, labelled as not charged; who bears
    # it (platform 13.33, speech's pool 16.00) is finance's.
    assert ">29.33<" in html
    assert 'data-testid="idle-shown-vision-USD"' in html
    assert 'data-testid="idle-share-vision-USD">34.4 %<' in html
    assert "Showback: your share of idle on the pools your jobs ran on, not charged." in html
    section = html[html.index('data-testid="idle-showback"') :]
    section = section[: section.index("</section>")]
    assert "13.33" not in section
    assert "16.00" not in section
    assert "What to do:" in html


def test_team_page_shows_finance_the_shared_idle(
    attributed: None, finance_client: Client, team: Team
) -> None:
    html = finance_client.get(f"/teams/{team.slug}/?month=2025-06").content.decode()
    assert 'data-testid="idle-shown-vision-USD">29.33<' in html
    assert "Shown, not charged" in html


def test_overview_lists_every_team_for_finance_and_one_for_the_lead(
    attributed: None, finance_user: User, lead_user: User
) -> None:
    finance_client, lead_client = Client(), Client()
    finance_client.force_login(finance_user)
    lead_client.force_login(lead_user)
    finance = finance_client.get("/?month=2025-06").content.decode()
    assert 'data-testid="idle-charged-speech-USD">40.00<' in finance
    assert 'data-testid="idle-shown-speech-USD">6.67<' in finance
    assert 'data-testid="idle-shown-vision-USD">29.33<' in finance
    lead = lead_client.get("/?month=2025-06").content.decode()
    assert 'data-testid="idle-charged-vision-USD">0.00<' in lead
    assert ">29.33<" in lead
    assert "Showback, not charged" in lead
    assert "idle-showback-speech" not in lead


def test_shown_idle_summed_as_fractions_when_the_bounds_disagree(
    attributed: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shown idle's bounds (core.bounded_sums; on PostgreSQL the server's, summed to
    selectors.idle_shown_sql.SHOWN_DIGITS places) are re-summed as Fractions when they round
    apart; forced here (none, no places): the same figures as the bounds give."""
    teams = Team.objects.order_by("name")
    bounded = idle_showback(month=MONTH, teams=teams)
    monkeypatch.setattr(QuotientSum, "rounded", lambda self, round_: None)
    monkeypatch.setattr(idle_shown_sql, "SHOWN_DIGITS", 0)
    exact = idle_showback(month=MONTH, teams=teams)
    assert [(r.team, r.shown_platform, r.shown_other_teams, r.job_cost) for r in exact] == [
        (r.team, r.shown_platform, r.shown_other_teams, r.job_cost) for r in bounded
    ]
    assert exact[1].shown_platform == Decimal("13.333333333333")
