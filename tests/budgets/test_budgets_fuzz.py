"""Hypothesis fuzzes every budgets endpoint (list, create, retrieve, update, partial update,
delete; the API and the pages' form) as finance and as a team lead, with bodies built to break
things: NULs, lone surrogates, control characters, text past every column's length, numbers of
every shape, wrong types, huge lists. No answer may be a 5xx, and what was saved must read back.
On PostgreSQL (CI's second pass) this is what found the 500s of issue 25 item 3; on SQLite the
same bodies were stored as given.
"""

from __future__ import annotations

import json
import os
from datetime import date
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from finops.budgets.models import Budget
from finops.org.models import Team
from tests.budget_data import ledger_days

pytestmark = pytest.mark.django_db
URL = "/api/v1/budgets/"
FUZZ = settings(
    # Per test; a longer run: FINOPS_BUDGET_FUZZ_EXAMPLES=1000.
    max_examples=int(os.environ.get("FINOPS_BUDGET_FUZZ_EXAMPLES", "120")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

NASTY = ["\x00", "\ud800", "\udfff", "\n", "\r\n", "\t", "\x1b", "\u2028", "\x7f", "=", " ",
         "٣", "é", "東", "\U0001f4b8", "'", '"', "\\", "%00", "<script>"]  # fmt: skip

# Text: short and readable, long (past 100, 200 and 500 characters), or made of nasty pieces.
texts = st.one_of(
    st.text(max_size=20),
    st.text(alphabet=st.characters(codec=None, categories=None), max_size=40),
    st.lists(st.sampled_from(NASTY), max_size=8).map("".join),
    st.integers(min_value=90, max_value=620).map(lambda n: "x" * n),
    st.tuples(st.integers(0, 260), st.integers(0, 560)).map(
        lambda kv: "k" * kv[0] + "=" + "v" * kv[1]
    ),
)
numbers = st.one_of(
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.decimals(allow_nan=True, allow_infinity=True).map(str),
    st.sampled_from(["1950.00", "1950.000000000000", "0.001", "1e400", "sNaN", "-0", "٣", ""]),
)
scalars = st.one_of(st.none(), st.booleans(), numbers, texts)
anything: st.SearchStrategy[Any] = st.recursive(
    st.one_of(scalars, st.just([]), st.just({})),
    lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=4),
        st.dictionaries(texts, inner, min_size=1, max_size=3),
    ),
    max_leaves=8,
)
FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "name": st.one_of(texts, anything),
    "team": st.one_of(st.sampled_from(["vision", "speech", None, ""]), texts, anything),
    "tag": st.one_of(texts, st.just("project=x"), anything),
    "provider": st.one_of(st.sampled_from(["", "AWS"]), texts, anything),
    "period": st.one_of(st.sampled_from(["month", "quarter", "year"]), texts, anything),
    "amount": st.one_of(numbers, anything),
    "currency": st.one_of(st.sampled_from(["USD", "EUR", "usd"]), texts, anything),
    "thresholds": st.one_of(
        st.lists(st.integers(-5, 1200), max_size=15),
        st.just(list(range(1, 1001))),
        texts,
        anything,
    ),
    "forecast_thresholds": st.one_of(st.lists(st.integers(-5, 1200), max_size=12), anything),
    "recipients": st.one_of(
        st.lists(
            st.one_of(
                st.sampled_from(["lead@example.com", "cfo@competitor.test", "a\x00@example.com"]),
                st.emails(),
                texts,
            ),
            max_size=25,
        ),
        texts,
        anything,
    ),
    "active": st.one_of(st.booleans(), anything),
}
bodies = st.one_of(
    st.fixed_dictionaries({}, optional=FIELDS),
    # A valid core, so that the other fields get past the required ones.
    st.fixed_dictionaries(
        {"name": st.just("Fuzzed"), "team": st.just("vision"), "amount": st.just("10.00")},
        optional={k: v for k, v in FIELDS.items() if k not in ("name", "team", "amount")},
    ),
    anything,
)


def _sendable(text: str) -> str:
    """What a URL or a form can carry: UTF-8, so no lone surrogate."""
    return text.encode("utf-8", "replace").decode()


url_texts = texts.map(_sendable)
budget_ids = st.one_of(
    st.integers(min_value=-5, max_value=10**12).map(str),
    url_texts.map(lambda t: t.replace("/", "")),
)


@pytest.fixture
def world(team: Team, other_team: Team, finance_user: User, lead_user: User) -> dict[str, Any]:
    lead_user.email = "lead@example.com"
    lead_user.save()
    ledger_days(team=team, first=date(2025, 9, 1), amounts=[100] * 30)
    budget = Budget.objects.create(
        name="Vision", team=team, amount=1000, currency="USD", thresholds=[50, 100]
    )
    clients = {}
    for who, user in (("finance", finance_user), ("lead", lead_user)):
        api = APIClient()
        api.force_authenticate(user)
        page = Client()
        page.force_login(user)
        clients[who] = (api, page)
    return {"budget": budget, "clients": clients}


def _json(body: Any) -> str:
    # ensure_ascii: a lone surrogate goes as "\ud800", as any JSON client may send it.
    return json.dumps(body, ensure_ascii=True, allow_nan=True, default=str)


def _no_server_error(response: Any, what: str) -> None:
    assert response.status_code < 500, f"{what}: {response.status_code} {response.content[:500]!r}"
    if response.status_code in (200, 201) and response["Content-Type"] == "application/json":
        assert isinstance(response.json(), dict | list)


def _reads_back(api: APIClient, response: Any) -> None:
    """A saved budget reads back, through the API and from the database."""
    if response.status_code not in (200, 201):
        return
    budget_id = response.json()["id"]
    again = api.get(f"{URL}{budget_id}/")
    assert again.status_code == 200
    assert again.json()["name"] == response.json()["name"]
    stored = Budget.objects.get(pk=budget_id)
    assert len(stored.name) <= 200
    assert "\x00" not in stored.name
    assert len(stored.tag_key) <= 200
    assert len(stored.tag_value) <= 500
    assert len(stored.provider_name) <= 100
    assert len(stored.thresholds) <= 10
    assert len(stored.forecast_thresholds) <= 10
    assert len(stored.recipients) <= 20


@FUZZ
@given(who=st.sampled_from(["finance", "lead"]), body=bodies)
def test_fuzz_create(world: dict[str, Any], who: str, body: Any) -> None:
    api, _ = world["clients"][who]
    response = api.post(URL, _json(body), content_type="application/json")
    _no_server_error(response, f"POST {body!r}")
    _reads_back(api, response)


@FUZZ
@given(
    who=st.sampled_from(["finance", "lead"]),
    method=st.sampled_from(["patch", "put"]),
    body=bodies,
    own=st.booleans(),
    budget_id=budget_ids,
)
def test_fuzz_update(
    world: dict[str, Any], who: str, method: str, body: Any, own: bool, budget_id: str
) -> None:
    api, _ = world["clients"][who]
    path = f"{URL}{world['budget'].pk if own else budget_id}/"
    response = getattr(api, method)(path, _json(body), content_type="application/json")
    _no_server_error(response, f"{method.upper()} {path} {body!r}")
    _reads_back(api, response)


@FUZZ
@given(
    who=st.sampled_from(["finance", "lead"]),
    as_of=st.one_of(st.dates().map(str), url_texts),
    budget_id=budget_ids,
    extra=st.dictionaries(url_texts, url_texts, max_size=3),
)
def test_fuzz_reads_and_delete(
    world: dict[str, Any], who: str, as_of: str, budget_id: str, extra: dict[str, str]
) -> None:
    api, page = world["clients"][who]
    params = {**extra, "as_of": as_of}
    _no_server_error(api.get(URL, params), f"GET list {params!r}")
    _no_server_error(api.get(f"{URL}{budget_id}/", params), f"GET {budget_id!r}")
    _no_server_error(page.get("/budgets/", params), f"page list {params!r}")
    _no_server_error(page.get(f"/budgets/{budget_id}/", params), f"page {budget_id!r}")
    _no_server_error(api.delete(f"{URL}{budget_id}/"), f"DELETE {budget_id!r}")


@FUZZ
@given(who=st.sampled_from(["finance", "lead"]), form=st.dictionaries(
    st.sampled_from(["name", "team", "tag", "provider", "period", "amount", "currency",
                     "thresholds", "forecast_thresholds", "recipients", "active"]),
    texts, max_size=11,
))  # fmt: skip
def test_fuzz_the_form(world: dict[str, Any], who: str, form: dict[str, str]) -> None:
    _, page = world["clients"][who]
    # Form bodies are text; a lone surrogate cannot be sent as UTF-8, as no browser can.
    form = {k: _sendable(v) for k, v in form.items()}
    for path in ("/budgets/new/", f"/budgets/{world['budget'].pk}/edit/"):
        response = page.post(path, form)
        _no_server_error(response, f"form {path} {form!r}")
        assert response.status_code in (200, 302, 400, 403)
