"""The shown idle of the idle showback (issue 34): on drawn month ledgers the figures equal the
exact Fraction sums of its definition (selectors.idle_showback's docstring) rounded once. On
PostgreSQL that is the server's sum (selectors.idle_shown_sql), elsewhere the Python one: both
equal the same exact figures, so each other. Bounds that round apart (forced with no places)
take the Fraction path and give the same figures."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest
from django.db import connection
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from finops.attribution.models import AllocatedCost, Category
from finops.attribution.selectors import idle_showback as module
from finops.attribution.selectors import idle_shown_sql
from finops.attribution.selectors.idle_showback import IdleShowback, idle_showback
from finops.currency.selectors import money_round
from finops.org.models import Team

pytestmark = pytest.mark.django_db

MONTH = dt.date(2025, 9, 1)
TEAMS = ("red", "green", "blue")
CATEGORIES = (Category.IDLE, Category.TRAINING, Category.INFERENCE, Category.SHARED)
# Amounts as the ledger holds them, credits included; tiny ones and round ones too, which make
# shares that end exactly on the 13th place (ties of the half-even rounding).
amounts = st.one_of(
    st.decimals(min_value=Decimal("-1e6"), max_value=Decimal("1e6"), places=12),
    st.sampled_from([Decimal("0.000000000001"), Decimal("0.000000000003"), Decimal(1), Decimal(2)]),
)
# (node, day, currency, team index or None, category, amount); node "" is a line without one.
# Few node-days, so that most draws share some between teams and idle.
ledger_rows = st.tuples(
    st.sampled_from(["", "gpu-a", "gpu-b"]),
    st.sampled_from([dt.date(2025, 9, 3), dt.date(2025, 9, 4)]),
    st.sampled_from(["USD", "USD", "EUR"]),
    st.one_of(st.none(), st.integers(0, len(TEAMS) - 1)),
    st.sampled_from(CATEGORIES),
    amounts,
)
Row = tuple[str, dt.date, str, int | None, str, Decimal]
Figures = tuple[Decimal, Decimal, Decimal, int]
ExactFigures = tuple[Fraction, Fraction, Fraction, int]


def _ledger(rows: list[Row], teams: list[Team]) -> None:
    AllocatedCost.objects.filter(billing_period=MONTH).delete()
    AllocatedCost.objects.bulk_create(
        AllocatedCost(
            billing_period=MONTH, day=day, category=category, node=node, amount=amount,
            team=None if index is None else teams[index], billing_currency=currency,
        )
        for node, day, currency, index, category, amount in rows
    )  # fmt: skip


def _exact(rows: list[Row], team_ids: set[int]) -> dict[tuple[int, str], ExactFigures]:
    """(shown platform, shown other teams, job cost, nodes) per (team, currency), by the
    definition, in Fractions."""
    jobs: dict[tuple[str, dt.date, str], dict[int | None, Fraction]] = defaultdict(dict)
    idle: dict[tuple[str, dt.date, str], dict[int | None, Fraction]] = defaultdict(dict)
    for node, day, currency, team, category, amount in rows:
        if node and category != Category.SHARED:
            cell = (idle if category == Category.IDLE else jobs)[(node, day, currency)]
            cell[team] = cell.get(team, Fraction(0)) + Fraction(amount)
    sums: dict[tuple[int, str], list[Fraction]] = defaultdict(lambda: [Fraction(0)] * 3)
    nodes: dict[tuple[int, str], set[str]] = defaultdict(set)
    for (node, day, currency), costs in jobs.items():
        total = sum(abs(cost) for cost in costs.values())
        borne = idle.get((node, day, currency), {})
        for team, cost in costs.items():
            if team is None or team not in team_ids or cost == 0:
                continue
            others = sum((v for t, v in borne.items() if t is not None and t != team), Fraction(0))
            acc = sums[(team, currency)]
            acc[0] += borne.get(None, Fraction(0)) * abs(cost) / total
            acc[1] += others * abs(cost) / total
            acc[2] += cost
            nodes[(team, currency)].add(node)
    return {key: (a, b, c, len(nodes[key])) for key, (a, b, c) in sums.items()}


def _expected(rows: list[Row], team_ids: set[int]) -> dict[tuple[int, str], Figures]:
    return {
        key: (money_round(a), money_round(b), money_round(c), n)
        for key, (a, b, c, n) in _exact(rows, team_ids).items()
    }


def _shown(rows: list[IdleShowback]) -> dict[tuple[int, str], Figures]:
    return {
        (r.team.pk, r.currency): (r.shown_platform, r.shown_other_teams, r.job_cost, r.nodes)
        for r in rows
        if r.nodes
    }


@pytest.fixture
def teams() -> list[Team]:
    return [Team.objects.create(slug=name, name=name) for name in TEAMS]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rows=st.lists(ledger_rows, max_size=40), asked=st.sets(st.integers(0, len(TEAMS) - 1)))
def test_shown_idle_is_the_exact_sum_rounded_once(
    teams: list[Team], rows: list[Row], asked: set[int]
) -> None:
    _ledger(rows, teams)
    team_ids = {teams[i].pk for i in asked}
    found = idle_showback(month=MONTH, teams=Team.objects.filter(pk__in=team_ids))
    assert _shown(found) == _expected(_with_pks(rows, teams), team_ids)


def _with_pks(rows: list[Row], teams: list[Team]) -> list[Row]:
    return [(n, d, c, None if i is None else teams[i].pk, k, a) for n, d, c, i, k, a in rows]


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rows=st.lists(ledger_rows, max_size=40), digits=st.integers(0, 4))
def test_server_bounds_hold_the_exact_sums(teams: list[Team], rows: list[Row], digits: int) -> None:
    """At any number of places the server's bounds hold the exact sums, at most a unit of the
    last place per term apart (the floors of negative terms included)."""
    if connection.vendor != "postgresql":
        pytest.skip("the server's sums are PostgreSQL's")
    _ledger(rows, teams)
    team_ids = {team.pk for team in teams}
    exact = _exact(_with_pks(rows, teams), team_ids)
    bounds = idle_shown_sql.shown_bounds(MONTH, team_ids, digits=digits)
    assert bounds.keys() == exact.keys()
    unit = Fraction(1, 10**digits)
    terms = sum(1 for n, _, _, i, k, a in rows if n and i is not None and k != Category.IDLE)
    for key, b in bounds.items():
        platform, others, job_cost, nodes = exact[key]
        assert b.platform_low <= platform <= b.platform_high
        assert b.others_low <= others <= b.others_high
        assert b.platform_high - b.platform_low <= terms * unit
        assert b.others_high - b.others_low <= terms * unit
        assert (b.job_cost, b.nodes) == (job_cost, nodes)


def test_bounds_that_round_apart_take_the_fraction_path(
    teams: list[Team], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no places each floored term is a whole number: the bounds round apart, and those
    keys' figures come from the Fraction sums, the same as with 30 places."""
    if connection.vendor != "postgresql":
        pytest.skip("the server's sums are PostgreSQL's")
    red, green, _ = range(3)
    day = dt.date(2025, 9, 3)
    rows: list[Row] = [
        ("gpu-a", day, "USD", red, Category.TRAINING, Decimal("40")),
        ("gpu-a", day, "USD", green, Category.INFERENCE, Decimal("20")),
        ("gpu-a", day, "USD", None, Category.IDLE, Decimal("20")),
        ("gpu-a", day, "USD", green, Category.IDLE, Decimal("7.000000000001")),
    ]
    _ledger(rows, teams)
    everyone = Team.objects.all()
    decided = idle_showback(month=MONTH, teams=everyone)
    exact_keys: list[set[tuple[int, str]]] = []
    fraction_path = module._shown_exact

    def spy(jobs: Any, idle: Any, by_team: Any, keys: set[tuple[int, str]], row: Any) -> None:
        exact_keys.append(set(keys))
        fraction_path(jobs, idle, by_team, keys, row)

    monkeypatch.setattr(module, "_shown_exact", spy)
    assert idle_showback(month=MONTH, teams=everyone) == decided
    assert exact_keys == []
    monkeypatch.setattr(idle_shown_sql, "SHOWN_DIGITS", 0)
    forced = idle_showback(month=MONTH, teams=everyone)
    assert exact_keys == [{(teams[red].pk, "USD"), (teams[green].pk, "USD")}]
    assert forced == decided
    # red: platform 20 x 40/60, green's idle 7.000000000001 x 40/60.
    assert (forced[1].shown_platform, forced[1].shown_other_teams) == (
        Decimal("13.333333333333"),
        Decimal("4.666666666667"),
    )
