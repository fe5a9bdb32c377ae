"""A cancelled service attempt (a runner stopped with scancel, a server scaled down) ended the
way a service normally stops: no `cancelled` part, its idle in allocation counted as a
completed one's (docs/attribution-rules.md, the service rule). A training attempt's
cancellation stays `cancelled` (a decision, apart from the total). Hand figures: the runner of
fixtures/scenarios/focus-slurm-service (README.md there), 4 hours at 80 USD an hour = 320 USD,
measured at 25 %: 320 x 0.75 = 240.00 idle, whether it ended COMPLETED or CANCELLED."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from fractions import Fraction

import pytest

from finops.waste.causes import AttemptTimes, Settings, attempt_shares, parts_of

SETTINGS = Settings(checkpoint_interval_minutes=Decimal(24), restart_minutes=Decimal(15))
COST = Decimal(320)


def _at(hour: int) -> dt.datetime:
    return dt.datetime(2025, 6, 3, hour, tzinfo=dt.UTC)


def _parts(state: str, *, service: bool) -> dict[str, Decimal]:
    attempt = AttemptTimes(502, state, _at(12), _at(16), Fraction(1, 4), service=service)
    (shares,) = attempt_shares([attempt], metrics=None, settings=SETTINGS)
    parts = parts_of(shares, COST)
    return {
        "cancelled": parts.cancelled,
        "idle_in_allocation": parts.idle_in_allocation,
        "total": parts.total,
    }


@pytest.mark.parametrize("state", ["COMPLETED", "CANCELLED"])
def test_a_service_ends_the_same_completed_or_cancelled(state: str) -> None:
    assert _parts(state, service=True) == {
        "cancelled": Decimal(0),
        "idle_in_allocation": Decimal("240"),
        "total": Decimal("240"),
    }


def test_a_training_attempt_cancelled_is_still_cancelled() -> None:
    assert _parts("CANCELLED", service=False) == {
        "cancelled": COST,
        "idle_in_allocation": Decimal(0),
        "total": Decimal(0),
    }


def test_a_cancelled_service_still_running_has_nothing_yet() -> None:
    attempt = AttemptTimes(1, "CANCELLED", _at(12), None, Fraction(1, 4), service=True)
    (shares,) = attempt_shares([attempt], metrics=None, settings=SETTINGS)
    assert all(share == 0 for share in shares.shares.values())
