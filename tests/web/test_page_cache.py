"""Panels computed once per data version (finops/web/page_cache.py, issue 29): the same key
answers the stored value, a data version bump or another key computes again, no cache (the
tests' default) always computes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.core.cache import cache
from pytest_django import Settings

from finops.org.services import _data_version_increment
from finops.web.page_cache import panel_cached

pytestmark = pytest.mark.django_db


@pytest.fixture
def cache_on(settings: Settings) -> Iterator[None]:
    settings.FINOPS_API_CACHE_SECONDS = 300
    cache.clear()
    yield
    cache.clear()


def counting(calls: list[int], value: object) -> object:
    calls.append(1)
    return value


def test_same_key_computes_once_and_a_bump_computes_again(cache_on: None) -> None:
    calls: list[int] = []
    assert panel_cached("p", key=lambda: ("a",), compute=lambda: counting(calls, [])) == []
    assert panel_cached("p", key=lambda: ("a",), compute=lambda: counting(calls, [1])) == []
    assert len(calls) == 1  # the empty list was stored, not taken for a miss
    assert panel_cached("p", key=lambda: ("b",), compute=lambda: counting(calls, [2])) == [2]
    assert panel_cached("q", key=lambda: ("a",), compute=lambda: counting(calls, [3])) == [3]
    _data_version_increment()
    assert panel_cached("p", key=lambda: ("a",), compute=lambda: counting(calls, [4])) == [4]
    assert len(calls) == 4


def test_without_cache_it_always_computes_and_reads_no_key() -> None:
    def key() -> tuple[object, ...]:
        raise AssertionError("the key is not read without a cache")

    calls: list[int] = []
    for _ in range(2):
        panel_cached("p", key=key, compute=lambda: counting(calls, 1))
    assert len(calls) == 2
