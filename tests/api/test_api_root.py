"""The API root (/api/v1/) lists every endpoint: viewsets and the plain APIViews alike."""

from __future__ import annotations

import re
from collections.abc import Sequence

import pytest
from django.contrib.auth.models import User
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient

from finops.api.routers import ApiRouter


def _collection_paths(patterns: Sequence[URLPattern | URLResolver], prefix: str = "") -> set[str]:
    """Every routed path without a parameter, e.g. 'api/v1/costs/' (detail routes have one)."""
    paths: set[str] = set()
    for p in patterns:
        route = prefix + str(p.pattern)
        if isinstance(p, URLResolver):
            paths |= _collection_paths(p.url_patterns, route)
        elif isinstance(p, URLPattern):
            paths.add(route)
    return paths


def _api_v1_collections() -> set[str]:
    """'costs', 'runs', ...: the first path segment of every endpoint under /api/v1/ (router
    regexes like '^v1/^runs/$' and format-suffix variants reduced to their plain name)."""
    names: set[str] = set()
    for route in _collection_paths(get_resolver().url_patterns):
        plain = re.sub(r"[\^$\\]|\(\?P<format>[^)]*\)|\.\(\?P<format>[^)]*\)/?", "", route)
        match = re.fullmatch(r"api/v1/([\w-]+)/?", plain)
        if match:
            names.add(match.group(1))
    return names


def test_root_lists_the_plain_api_views(finance_api: APIClient) -> None:
    response = finance_api.get("/api/v1/")
    assert response.status_code == 200
    root = response.json()
    for name in ("costs", "endpoints", "reconciliation"):
        assert root[name] == f"http://testserver/api/v1/{name}/"
    assert root["schema"] == "http://testserver/api/schema/"


def test_root_lists_every_endpoint_under_api_v1(finance_api: APIClient) -> None:
    """Found from the URL configuration, so an endpoint added later without a root entry
    fails here."""
    collections = _api_v1_collections()
    assert {"teams", "runs", "costs", "endpoints", "reconciliation"} <= collections
    root = finance_api.get("/api/v1/").json()
    assert collections <= set(root), collections - set(root)
    for name in collections:
        assert root[name] == f"http://testserver/api/v1/{name}/"


def test_every_root_link_answers(finance_api: APIClient, finance_user: User) -> None:
    """Each link on the root resolves to a view that answers the finance user (a 400 for a
    missing required ?month= is an answer, so is a 405 naming POST for an endpoint that takes a
    body, such as run-estimates; a 404 or 5xx is not)."""
    for name, url in finance_api.get("/api/v1/").json().items():
        response = finance_api.get(url)
        if response.status_code == 405:
            assert "POST" in response["Allow"], name
            continue
        assert response.status_code in (200, 400), (name, response.status_code)


def test_root_needs_authentication(db: None) -> None:
    assert APIClient().get("/api/v1/").status_code == 401


def test_a_root_entry_listed_twice_is_refused() -> None:
    """urls.py once listed 'statements' twice; the second silently overwrote the first."""
    router = ApiRouter()
    router.add_root_entry("costs", "api-costs")
    with pytest.raises(ValueError, match="'costs' is listed twice"):
        router.add_root_entry("costs", "api-costs")
