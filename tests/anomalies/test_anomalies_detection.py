"""Detection over the ledger: one anomaly per team and event with its drivers, updated in
place by a restated bill, deleted when the restatement takes the event away, idempotent
re-runs (service, command, task), and a level shift marked expected staying put."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from finops.anomalies.models import Anomaly
from finops.anomalies.services import anomalies_detect, anomaly_status_change
from finops.anomalies.tasks import detect_anomalies_for_month
from finops.attribution.models import AllocatedCost
from finops.core.months import month_format
from finops.org.models import Team
from tests import anomaly_ledger as ledger

pytestmark = pytest.mark.django_db

SINCE = ledger.START + dt.timedelta(days=20)


def test_a_spike_is_one_anomaly_with_its_run_as_driver(team: Team) -> None:
    ledger.build(team)
    summary = anomalies_detect(since=SINCE)

    # The team, provider and service series all see it: one anomaly per team and event.
    anomaly = Anomaly.objects.get()
    assert summary.created == 1
    assert anomaly.team == team
    assert anomaly.series_kind == "team"
    assert anomaly.kind == "spike"
    assert anomaly.status == "new"
    assert anomaly.first_day == anomaly.last_day == ledger.SPIKE_DAY
    assert anomaly.actual == ledger.day_total(team, ledger.SPIKE_DAY)
    assert anomaly.impact == anomaly.actual - anomaly.expected
    # run-a is about 1,000 a day (between 0.97 and 1.03 times BASE).
    assert ledger.BASE * Decimal("0.97") <= anomaly.expected <= ledger.BASE * Decimal("1.03")
    drivers = list(anomaly.drivers.all())
    assert (drivers[0].dimension, drivers[0].key) == ("run", "run-b")
    assert drivers[0].actual == ledger.SPIKE
    assert drivers[0].expected == 0
    assert sum(d.delta for d in drivers) + anomaly.unexplained == anomaly.impact
    assert anomaly.currency == "USD"
    assert anomaly.chart
    assert {"day", "actual", "expected", "low", "high"} <= set(anomaly.chart[0])


def test_a_rerun_changes_nothing(team: Team) -> None:
    ledger.build(team)
    anomalies_detect(since=SINCE)
    before = list(Anomaly.objects.values())
    drivers = list(Anomaly.objects.get().drivers.values())

    again = anomalies_detect(since=SINCE)

    assert (again.created, again.updated, again.deleted) == (0, 0, 0)
    assert list(Anomaly.objects.values()) == before
    assert list(Anomaly.objects.get().drivers.values()) == drivers


def test_a_restated_bill_updates_the_anomaly_in_place(team: Team) -> None:
    spike_row = ledger.build(team)
    assert spike_row is not None
    anomalies_detect(since=SINCE)
    anomaly = Anomaly.objects.get()

    spike_row.amount = Decimal("4500")
    spike_row.save()
    summary = anomalies_detect(since=SINCE)

    restated = Anomaly.objects.get()
    assert restated.pk == anomaly.pk
    assert summary.updated == 1
    assert restated.actual == ledger.day_total(team, ledger.SPIKE_DAY)
    assert restated.drivers.get(position=0).actual == Decimal("4500")


def test_a_restatement_that_takes_the_event_away_removes_an_untouched_anomaly(team: Team) -> None:
    spike_row = ledger.build(team)
    assert spike_row is not None
    anomalies_detect(since=SINCE)
    spike_row.delete()
    summary = anomalies_detect(since=SINCE)
    assert summary.deleted == 1
    assert not Anomaly.objects.exists()


def test_an_acknowledged_anomaly_is_kept_when_its_event_goes_away(
    team: Team, lead_user: User
) -> None:
    spike_row = ledger.build(team)
    assert spike_row is not None
    anomalies_detect(since=SINCE)
    anomaly = Anomaly.objects.get()
    anomaly_status_change(anomaly_id=anomaly.pk, status="acknowledged", comment="on it",
                          user=lead_user)  # fmt: skip
    spike_row.delete()
    anomalies_detect(since=SINCE)
    assert Anomaly.objects.get().status == "acknowledged"


def test_level_shift_marked_expected_is_the_new_normal(team: Team, finance_user: User) -> None:
    ledger.build(team, spike=None)
    end = ledger.START + dt.timedelta(days=ledger.DAYS)
    for i in range(10):  # ten more days at twice the level
        ledger.row(team, end + dt.timedelta(days=i), ledger.BASE * 2, run_id="run-a")
    anomalies_detect(since=SINCE)
    shift = Anomaly.objects.get()
    assert shift.kind == "level_shift"
    assert shift.ongoing
    assert shift.first_day == end
    assert shift.last_day == end + dt.timedelta(days=9)

    anomaly_status_change(anomaly_id=shift.pk, status="expected", comment="new cluster",
                          user=finance_user)  # fmt: skip
    later = end + dt.timedelta(days=10)
    for i in range(5):  # still at the new level: normal now
        ledger.row(team, later + dt.timedelta(days=i), ledger.BASE * 2, run_id="run-a")
    summary = anomalies_detect(since=SINCE)

    assert summary.created == 0
    assert Anomaly.objects.count() == 1
    frozen = Anomaly.objects.get()
    assert frozen.status == "expected"
    assert frozen.last_day == shift.last_day


def test_new_service_is_a_new_cost_source(team: Team) -> None:
    ledger.build(team, spike=None)
    # A new service at 30 a day from day 30: too small to move the team's 1,000 a day, and
    # not a spike of its own series (it has none before), but 30 x 10 days clears 100.
    for i in range(30, ledger.DAYS):
        ledger.row(team, ledger.START + dt.timedelta(days=i), Decimal("30"),
                   service_name="Amazon SageMaker", category="tagged")  # fmt: skip
    anomalies_detect(since=SINCE)
    anomaly = Anomaly.objects.get(kind="new_source")
    assert anomaly.first_day == ledger.START + dt.timedelta(days=30)
    [driver] = anomaly.drivers.all()
    assert (driver.dimension, driver.key) == ("service", "Amazon SageMaker")
    assert driver.actual == Decimal("30") * 7 == anomaly.impact  # its first 7 days
    assert anomaly.expected == 0


def test_command_twice_changes_nothing(team: Team) -> None:
    ledger.build(team)
    call_command("detect_anomalies", "--since", SINCE.isoformat())
    first = list(Anomaly.objects.values())
    call_command("detect_anomalies", "--since", SINCE.isoformat())
    assert list(Anomaly.objects.values()) == first
    assert len(first) == 1


def test_command_default_is_the_last_35_days_of_the_ledger(team: Team) -> None:
    ledger.build(team)
    call_command("detect_anomalies")
    assert Anomaly.objects.count() == 1


def test_month_task_is_idempotent_and_limited_to_its_month(team: Team) -> None:
    ledger.build(team)
    month = month_format(ledger.SPIKE_DAY)
    result = detect_anomalies_for_month(month, pipeline_run_id=7)
    again = detect_anomalies_for_month(month)
    assert result["created"] == 1
    assert again["created"] == 0
    assert again["updated"] == 0
    assert result["pipeline_run_id"] == 7
    assert detect_anomalies_for_month("2025-08")["created"] == 0
    assert Anomaly.objects.count() == 1


def test_other_currency_rows_are_converted_to_the_reporting_currency(team: Team) -> None:
    from finops.currency.models import FxRate

    ledger.build(team, spike=None)
    FxRate.objects.create(date=ledger.START, from_currency="EUR", to_currency="USD",
                          rate=Decimal("2"))  # fmt: skip
    ledger.row(team, ledger.SPIKE_DAY, Decimal("1500"), run_id="run-eu",
               billing_currency="EUR")  # fmt: skip
    anomalies_detect(since=SINCE)
    anomaly = Anomaly.objects.get()
    assert anomaly.currency == "USD"
    assert anomaly.drivers.get(key="run-eu").actual == Decimal("3000")
    assert AllocatedCost.objects.filter(billing_currency="EUR").count() == 1


def test_detection_and_digests_run_daily_from_beat() -> None:
    from finops.anomalies.tasks import detect_anomalies_recent, send_anomaly_digests
    from finops.celery import app

    tasks = {e["task"]: e for e in app.conf.beat_schedule.values()}
    for task in (detect_anomalies_recent, send_anomaly_digests):
        entry = tasks[task.name]
        assert entry["options"]["expires"] < 24 * 3600
        assert len(entry["schedule"].hour) == 1
        assert len(entry["schedule"].minute) == 1
