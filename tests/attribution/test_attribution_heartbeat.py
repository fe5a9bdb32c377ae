"""PostgreSQL: an attribution run's heartbeat lands while the run computes. The run's own
transaction must not hold its row locked, or the heartbeat thread's update waits to the commit
and a run longer than the heartbeat timeout looks dead (the watchdog's update waited too)."""

from __future__ import annotations

import datetime as dt
import threading
import time
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection, connections
from pytest_django import Settings

from finops.attribution.ledger import writer as ledger
from finops.attribution.models import AttributionRun
from finops.attribution.services import attribution_month_run
from tests.factories import CostLineItemFactory

MAY = dt.date(2025, 5, 1)


def _committed_heartbeat(run_id: int) -> dt.datetime | None:
    """The run's heartbeat as another connection sees it (what the watchdog reads)."""
    found: list[dt.datetime | None] = []

    def read() -> None:
        try:
            found.append(AttributionRun.objects.get(pk=run_id).heartbeat_at)
        finally:
            connections.close_all()

    reader = threading.Thread(target=read)
    reader.start()
    reader.join()
    return found[0]


@pytest.mark.django_db(transaction=True)
def test_the_heartbeat_lands_while_the_run_computes(
    monkeypatch: pytest.MonkeyPatch, settings: Settings
) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("the heartbeat thread runs on PostgreSQL only")
    settings.FINOPS_WORKER_HEARTBEAT_SECONDS = 0.1
    CostLineItemFactory(billing_period=MAY, billed_cost=Decimal(3), effective_cost=Decimal(3))
    real_write = ledger.write
    beats: list[tuple[dt.datetime | None, dt.datetime | None]] = []

    def slow_write(*args: Any, **kwargs: Any) -> None:
        run = AttributionRun.objects.get(status=AttributionRun.Status.RUNNING)
        started = _committed_heartbeat(run.pk)
        time.sleep(1.0)  # ten beats
        beats.append((started, _committed_heartbeat(run.pk)))
        real_write(*args, **kwargs)

    monkeypatch.setattr(ledger, "write", slow_write)
    run = attribution_month_run(month=MAY)
    assert run.status == AttributionRun.Status.SUCCEEDED
    [(started, later)] = beats
    assert started is not None
    assert later is not None
    assert later > started
    assert run.inputs_at is not None
    assert AttributionRun.objects.get(pk=run.pk).inputs_at == run.inputs_at
