"""Endpoints page, endpoint detail and /api/v1/endpoints/: figures, team visibility, query counts.

The month is built from ledger rows of labelled pods and usage rows, and EndpointCost is written
by the real rollup (endpoint_costs_rebuild); expectations are recomputed from those inputs.
"""

from __future__ import annotations

import datetime as dt
import re
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from pytest_django import DjangoAssertNumQueries
from rest_framework.test import APIClient

from billing_ingest.models import ImportBatch
from finops.attribution.models import Category
from finops.inference.services import endpoint_costs_rebuild
from finops.org.models import Profile, Team
from finops.web.templatetags.finops_tags import money, percent, unit_money
from tests.client_types import Response
from tests.factories import (
    MONTH,
    ImportBatchFactory,
    UserFactory,
    ledger_row,
    serving_pod,
    usage_hour,
)
from tests.page_tables import match

UTC = dt.UTC
DAY1 = dt.date(2025, 9, 3)
DAY2 = dt.date(2025, 9, 4)
Q12 = Decimal("1e-12")


@pytest.fixture
def month_data(team: Team, other_team: Team) -> dict[str, Any]:
    """llm-chat: two Vision pods and a Speech pod on gpu-node-01, which also has idle; its usage
    names the pods on day 1 and no pod on day 2 (when only Vision's chat-b served);
    asr-api: one Speech pod on gpu-node-02; ghost: usage but no pods (no cost)."""
    chat_a = serving_pod("chat-a", "llm-chat")
    chat_b = serving_pod("chat-b", "llm-chat")
    chat_s = serving_pod("chat-s", "llm-chat")
    asr = serving_pod("asr", "asr-api", node="gpu-node-02")
    ledger_row(chat_a, team, DAY1, "300.125")
    ledger_row(chat_b, team, DAY2, "200.000000000007")
    ledger_row(chat_s, other_team, DAY1, "50")
    ledger_row(None, team, DAY1, "49.875", category=Category.IDLE)  # node idle, no job
    ledger_row(asr, other_team, DAY1, "100", node="gpu-node-02")
    batch = ImportBatchFactory.create(kind=ImportBatch.Kind.INFERENCE, format="csv", source="k8s-1")
    usage_hour(batch, "llm-chat", DAY1, 10, 1200, 150_000, 80_000, pod="chat-a")
    usage_hour(batch, "llm-chat", DAY1, 10, 300, 50_000, 20_000, pod="chat-s")
    usage_hour(batch, "llm-chat", DAY2, 10, 1700, 300_000, 50_000)
    usage_hour(batch, "asr-api", DAY1, 9, 400, 0, 0)
    usage_hour(batch, "ghost", DAY2, 11, 10, 5, 5)
    endpoint_costs_rebuild(month=MONTH)
    return {
        # Vision's part of llm-chat: chat-a and chat-b, their usage (day 2's names no pod, and
        # only Vision served that day).
        "chat_cost": Decimal("300.125") + Decimal("200.000000000007"),
        "chat_requests": 1200 + 1700,
        "chat_tokens": 150_000 + 80_000 + 300_000 + 50_000,
        # Finance only: gpu-node-01 on DAY1: 300.125 + 50 + 49.875 idle; DAY2: 200.000000000007.
        "chat_idle_share": Decimal("49.875") / Decimal("600.000000000007"),
        # Speech's part of llm-chat: chat-s and the usage naming it.
        "speech_chat_cost": Decimal("50"),
        "speech_chat_requests": 300,
        "speech_chat_tokens": 70_000,
        "asr_cost": Decimal("100"),
        "asr_requests": 400,
    }


@pytest.fixture
def speech_lead(other_team: Team) -> User:
    profile = Profile.objects.create(user=UserFactory.create(), role=Profile.Role.TEAM_LEAD)
    profile.teams.add(other_team)
    return profile.user


def _text(response: Response) -> str:
    assert response.status_code == 200, response.status_code
    return re.sub(r"\s+", " ", response.content.decode())


def _per(cost: Decimal, units: int, per: int) -> Decimal:
    return (cost * per / units).quantize(Q12, rounding=ROUND_HALF_EVEN)


def _row(html: str, endpoint: str, team: str) -> str:
    match = re.search(rf'<tr data-testid="endpoint-{endpoint}-{team}-USD">(.*?)</tr>', html)
    assert match, f"no row for {endpoint}"
    return match.group(1)


# --- page -----------------------------------------------------------------------------------


def test_finance_sees_every_endpoint_with_unit_costs(
    finance_client: Client, month_data: dict[str, Any]
) -> None:
    html = _text(finance_client.get(reverse("web:endpoints"), {"month": "2025-09"}))
    chat = _row(html, "llm-chat", "vision")
    d = month_data
    assert money(d["chat_cost"]) in chat
    # Counts with thousands separators.
    assert ">2,900<" in chat
    assert ">580,000<" in chat
    assert unit_money(_per(d["chat_cost"], d["chat_requests"], 1000)) in chat  # 172.4569
    assert unit_money(_per(d["chat_cost"], d["chat_tokens"], 1_000_000)) in chat
    assert percent(d["chat_idle_share"]) in chat  # 8.3 %
    assert ">Vision</a>" in chat
    speech_chat = _row(html, "llm-chat", "speech")
    assert money(d["speech_chat_cost"]) in speech_chat
    assert ">300<" in speech_chat
    assert unit_money(_per(Decimal(50), 300, 1000)) in speech_chat  # 166.6667
    # gpu-node-01 on DAY1: 49.875 idle of 400.
    assert percent(Decimal("49.875") / Decimal(400)) in speech_chat
    asr = _row(html, "asr-api", "speech")
    assert money(d["asr_cost"]) in asr
    assert unit_money(_per(d["asr_cost"], d["asr_requests"], 1000)) in asr  # 250.0000
    assert ">Speech</a>" in asr


def test_finance_sees_usage_without_cost_warning(
    finance_client: Client, month_data: dict[str, Any]
) -> None:
    html = _text(finance_client.get(reverse("web:endpoints"), {"month": "2025-09"}))
    box = re.search(r'data-testid="usage-without-cost">(.*?)</div>', html)
    assert box
    assert "<code>ghost</code>: 1 day (4 Sep)" in box.group(1)
    assert "llm-chat" not in box.group(1)


def test_lead_sees_only_own_teams_endpoints(
    lead_client: Client, month_data: dict[str, Any]
) -> None:
    html = _text(lead_client.get(reverse("web:endpoints"), {"month": "2025-09"}))
    chat = _row(html, "llm-chat", "vision")
    assert money(month_data["chat_cost"]) in chat
    assert "asr-api" not in html
    assert "endpoint-llm-chat-speech" not in html
    # The serving nodes' idle share counts other teams' cost there: finance only.
    assert "Idle share" not in html
    assert "%" not in chat
    # The warning names endpoints of every team: finance only.
    assert "usage-without-cost" not in html
    assert "ghost" not in html


def test_minority_team_sees_only_its_part_of_a_shared_endpoint(
    client: Client, speech_lead: User, month_data: dict[str, Any]
) -> None:
    # Speech has a pod behind llm-chat: it sees that pod's cost and usage, none of Vision's.
    client.force_login(speech_lead)
    html = _text(client.get(reverse("web:endpoints"), {"month": "2025-09"}))
    assert 'data-testid="endpoint-asr-api-speech-USD"' in html
    chat = _row(html, "llm-chat", "speech")
    assert money(Decimal(50)) in chat
    assert ">300<" in chat
    assert ">70,000<" in chat
    assert "endpoint-llm-chat-vision" not in html
    assert "Vision" not in html
    detail = _text(client.get(reverse("web:endpoint", args=["llm-chat"]), {"month": "2025-09"}))
    assert f'data-testid="endpoint-cost-speech-USD">{money(Decimal(50))}<' in detail
    assert "Vision" not in detail
    assert money(Decimal("300.125")) not in detail


def test_team_filter_on_page(finance_client: Client, month_data: dict[str, Any]) -> None:
    html = _text(
        finance_client.get(reverse("web:endpoints"), {"month": "2025-09", "team": "speech"})
    )
    assert "asr-api" in html
    assert "endpoint-llm-chat-speech" in html
    assert "endpoint-llm-chat-vision" not in html


def test_detail_has_daily_rows(finance_client: Client, month_data: dict[str, Any]) -> None:
    html = _text(
        finance_client.get(reverse("web:endpoint", args=["llm-chat"]), {"month": "2025-09"})
    )
    table = match(r'data-testid="endpoint-days">(.*?)</table>', html).group(1)
    assert table.count("<tr>") == 4  # header + Vision and Speech on day 1 + Vision on day 2
    assert "Wed 3 Sep" in table
    assert "Thu 4 Sep" in table
    day1_cost = Decimal("300.125")
    assert money(day1_cost) in table
    assert unit_money(_per(day1_cost, 1200, 1000)) in table
    assert f'data-testid="endpoint-cost-vision-USD">{money(month_data["chat_cost"])}<' in html
    assert f'data-testid="endpoint-cost-speech-USD">{money(Decimal(50))}<' in html


def test_lead_cannot_open_other_teams_endpoint(
    lead_client: Client, month_data: dict[str, Any]
) -> None:
    response = lead_client.get(reverse("web:endpoint", args=["asr-api"]), {"month": "2025-09"})
    assert response.status_code == 404
    ok = lead_client.get(reverse("web:endpoint", args=["llm-chat"]), {"month": "2025-09"})
    assert ok.status_code == 200


def test_nav_and_team_page_link_to_endpoints(
    lead_client: Client, month_data: dict[str, Any], team: Team
) -> None:
    html = _text(lead_client.get(reverse("web:team", args=[team.slug]), {"month": "2025-09"}))
    assert f'href="{reverse("web:endpoints")}?month=2025-09"' in html  # nav
    assert f'href="{reverse("web:endpoints")}?month=2025-09&amp;team={team.slug}"' in html


@pytest.mark.parametrize(
    "url", [reverse("web:endpoints"), reverse("web:endpoint", args=["llm-chat"])]
)
def test_pages_require_login(client: Client, month_data: dict[str, Any], url: str) -> None:
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def _more_endpoints(team: Team, n: int) -> None:
    batch = ImportBatchFactory.create(kind=ImportBatch.Kind.INFERENCE, format="csv", source="k8s-2")
    for i in range(n):
        pod = serving_pod(f"extra-{i}", f"extra-{i}", node=f"gpu-node-x{i}")
        ledger_row(pod, team, DAY1, "10", node=f"gpu-node-x{i}")
        usage_hour(batch, f"extra-{i}", DAY1, 8, 100, 1000, 1000)
        usage_hour(batch, f"nocost-{i}", DAY2, 8, 1, 1, 1)
    endpoint_costs_rebuild(month=MONTH)


def test_page_query_count_is_flat(
    finance_client: Client,
    month_data: dict[str, Any],
    team: Team,
    django_assert_max_num_queries: DjangoAssertNumQueries,
) -> None:
    _more_endpoints(team, 25)
    with django_assert_max_num_queries(9):
        html = _text(finance_client.get(reverse("web:endpoints"), {"month": "2025-09"}))
    assert html.count('data-testid="endpoint-') == 28  # llm-chat twice, asr-api, 25 more
    # The detail: 7, and the pods' energy (the ledger by job and node; a fixed few more with
    # jobs: finops/energy/selectors.energies).
    with django_assert_max_num_queries(8):
        _text(finance_client.get(reverse("web:endpoint", args=["extra-3"]), {"month": "2025-09"}))


# --- API ------------------------------------------------------------------------------------


def _api_rows(response: Response) -> dict[tuple[str, str], dict[str, Any]]:
    assert response.status_code == 200, response.content
    return {(row["endpoint"], row["team"]): row for row in response.json()}


def test_api_fields_as_decimal_strings(finance_api: APIClient, month_data: dict[str, Any]) -> None:
    rows = _api_rows(finance_api.get("/api/v1/endpoints/", {"month": "2025-09"}))
    assert set(rows) == {("llm-chat", "vision"), ("llm-chat", "speech"), ("asr-api", "speech")}
    chat = rows[("llm-chat", "vision")]
    d = month_data
    assert (chat["month"], chat["currency"]) == ("2025-09", "USD")
    assert chat["cost"] == "500.125000000007"  # every stored place
    assert (chat["requests"], chat["tokens"]) == (2900, 580_000)
    for key in ("cost", "cost_per_1k_requests", "cost_per_1m_tokens", "idle_share", "gpu_hours"):
        assert isinstance(chat[key], str), key
    assert Decimal(chat["cost_per_1k_requests"]) == _per(d["chat_cost"], 2900, 1000)
    assert Decimal(chat["cost_per_1m_tokens"]) == _per(d["chat_cost"], 580_000, 1_000_000)
    assert Decimal(chat["idle_share"]) == d["chat_idle_share"].quantize(Decimal("1e-6"))
    assert Decimal(chat["node_idle_cost"]) == Decimal("49.875")
    assert Decimal(chat["node_cost"]) == Decimal("600.000000000007")
    speech = rows[("llm-chat", "speech")]
    assert (Decimal(speech["cost"]), speech["requests"]) == (Decimal(50), 300)


def test_api_team_filter_and_lead_visibility(
    finance_api: APIClient, lead_api: APIClient, month_data: dict[str, Any]
) -> None:
    speech = _api_rows(
        finance_api.get("/api/v1/endpoints/", {"month": "2025-09", "team": "speech"})
    )
    assert set(speech) == {("asr-api", "speech"), ("llm-chat", "speech")}
    lead_rows = _api_rows(lead_api.get("/api/v1/endpoints/", {"month": "2025-09"}))
    assert set(lead_rows) == {("llm-chat", "vision")}
    # Node totals hold other teams' cost: null for a lead.
    chat = lead_rows[("llm-chat", "vision")]
    assert (chat["node_cost"], chat["node_idle_cost"], chat["idle_share"]) == (None, None, None)
    # Another team's endpoints: an empty list, not an error that confirms they exist.
    other = lead_api.get("/api/v1/endpoints/", {"month": "2025-09", "team": "speech"})
    assert _api_rows(other) == {}


def test_api_requires_login_and_month(finance_api: APIClient, month_data: dict[str, Any]) -> None:
    assert APIClient().get("/api/v1/endpoints/", {"month": "2025-09"}).status_code in (401, 403)
    assert finance_api.get("/api/v1/endpoints/").status_code == 400
    assert finance_api.get("/api/v1/endpoints/", {"month": "2025-13"}).status_code == 400
    assert _api_rows(finance_api.get("/api/v1/endpoints/", {"month": "2025-08"})) == {}


def test_api_query_count_is_flat(
    finance_api: APIClient,
    month_data: dict[str, Any],
    team: Team,
    django_assert_max_num_queries: DjangoAssertNumQueries,
) -> None:
    _more_endpoints(team, 25)
    with django_assert_max_num_queries(3):
        rows = _api_rows(finance_api.get("/api/v1/endpoints/", {"month": "2025-09"}))
    assert len(rows) == 28


# --- admin ----------------------------------------------------------------------------------


def test_admin_lists_usage_and_costs_read_only(client: Client, month_data: dict[str, Any]) -> None:
    from django.contrib.auth.models import User

    client.force_login(User.objects.create_superuser("root", "r@example.com", "pw-root-123"))
    for model in ("inferenceusage", "endpointcost"):
        response = client.get(reverse(f"admin:inference_{model}_changelist"))
        assert response.status_code == 200
        assert "llm-chat" in response.content.decode()
        assert client.get(reverse(f"admin:inference_{model}_add")).status_code == 403
