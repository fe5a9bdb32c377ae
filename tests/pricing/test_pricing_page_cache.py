"""The pricing page's comparisons are a cached panel (finops/web/page_cache.py): computed once
per data version, and again at once when what the data version does not follow changes (the
pricing assumptions, the price catalogue), so a finance edit never shows stale figures."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client
from pytest_django import Settings

from finops.org.models import Profile
from finops.pricing.models import PricingAssumptions
from finops.web import pricing_views

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_catalogue")]


@pytest.fixture
def cache_on(settings: Settings) -> Iterator[None]:
    settings.FINOPS_API_CACHE_SECONDS = 300
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def computed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times the page computed its comparisons."""
    calls: list[int] = []
    real = pricing_views.team_month_pricing

    def counting(**kwargs: Any) -> Any:
        calls.append(1)
        return real(**kwargs)

    monkeypatch.setattr(pricing_views, "team_month_pricing", counting)
    return calls


def _spot_row(client: Client) -> str:
    page = client.get("/pricing/?month=2025-06").content.decode()
    return page.split("<td>od-run</td><td>USD</td>")[1].split("</tr>")[0]


def test_comparisons_are_cached_until_the_assumptions_change(
    client: Client, priced_month: None, cache_on: None, computed: list[int]
) -> None:
    user = User.objects.create_user("fin", password="fin-password-123")
    Profile.objects.create(user=user, role=Profile.Role.FINANCE)
    client.force_login(user)
    first = _spot_row(client)
    assert _spot_row(client) == first
    assert len(computed) == 1  # the second view read the stored figures
    row = PricingAssumptions.current()
    row.spot_price_ratio = (row.spot_price_ratio / 2).quantize(Decimal("0.0001"))
    row.save()
    changed = _spot_row(client)
    assert len(computed) == 2
    assert changed != first  # the new spot ratio shows at once, not after the cache expires
