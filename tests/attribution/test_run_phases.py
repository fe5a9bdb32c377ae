"""Where an attribution run's time goes (finops.core.phases): every succeeded run keeps its
seconds per phase, in the order the phases ended; `attribute -v 2` prints them. On the idle
scene (tests/idle_scene.py)."""

from __future__ import annotations

import datetime as dt
from io import StringIO

import pytest
from django.core.management import call_command

from finops.attribution.models import AttributionRun
from finops.attribution.services import attribution_month_run_split
from finops.core.phases import PhaseClock, phase_clock, phase_mark
from finops.org.models import Team
from tests.idle_scene import MONTH, attribute_idle_scene

pytestmark = pytest.mark.django_db

# The phases of a run in one process, in order (the ledger's index swap is PostgreSQL's).
ONE_PROCESS = ["lock_wait", "inputs", "first_pass", "reduce", "conservation_check",
               "rollup_sums", "ledger_clear", "ledger_insert", "rollup_insert"]  # fmt: skip


def _elapsed(run: AttributionRun) -> float:
    assert run.finished_at is not None
    return (run.finished_at - run.started_at).total_seconds()


def test_a_run_keeps_its_phases_in_order(team: Team, other_team: Team) -> None:
    attribute_idle_scene(team, other_team)
    run = AttributionRun.objects.get(billing_period=MONTH)
    names = [name for name, _ in run.phases]
    assert names[: len(ONE_PROCESS)] == ONE_PROCESS
    assert names[-2:] == ["analyze", "idle_showback"]
    assert all(seconds >= 0 for _, seconds in run.phases)
    # The phases are inside the run (its row is created before the clock opens).
    assert sum(seconds for _, seconds in run.phases) <= _elapsed(run) + 0.01


def test_a_split_run_keeps_the_reduce_side(team: Team, other_team: Team) -> None:
    attribute_idle_scene(team, other_team)
    run = attribution_month_run_split(month=MONTH, parts=2)
    names = [name for name, _ in run.phases]
    # The parts ran before the run opened its clock: its phases start at the merge (then, on
    # PostgreSQL, the copy of the rows the parts staged).
    assert "inputs" not in names
    assert "first_pass" not in names
    assert names[:2] == ["lock_wait", "reduce"]
    assert "conservation_check" in names
    assert names[-1] == "idle_showback"


def test_attribute_prints_the_phases_at_verbosity_2(team: Team, other_team: Team) -> None:
    attribute_idle_scene(team, other_team)
    out = StringIO()
    call_command("attribute", "--month", "2025-06", verbosity=2, stdout=out)
    text = out.getvalue()
    run = AttributionRun.objects.filter(billing_period=MONTH).order_by("-id").first()
    assert run is not None
    assert f"attribution run {run.pk}, seconds per phase:" in text
    for name, _ in run.phases:
        assert f"    {name:<22} " in text
    # Each step says how long it took.
    assert "  step attribute        succeeded in " in text


def test_marks_without_a_clock_do_nothing_and_repeated_marks_sum() -> None:
    phase_mark("nowhere")  # no clock open: nothing to record, no error
    with phase_clock() as clock:
        phase_mark("a")
        phase_mark("b")
        phase_mark("a")
    assert [name for name, _ in clock.seconds()] == ["a", "b"]
    assert isinstance(clock, PhaseClock)
    began = dt.datetime.now(dt.UTC)
    with phase_clock() as outer:
        with phase_clock() as inner:
            phase_mark("inner")
        phase_mark("outer")
    assert [name for name, _ in inner.seconds()] == ["inner"]
    [(name, seconds)] = outer.seconds()
    assert name == "outer"
    assert seconds <= (dt.datetime.now(dt.UTC) - began).total_seconds()
