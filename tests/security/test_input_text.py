"""Text from outside (issue 25 item 3): a NUL or an over-long value answered 500 on PostgreSQL
(and was stored on SQLite). Now every way in refuses it with a 400 naming the field: the
budgets API and form (the budgets service, the lengths of the columns), URLs, filters and form
bodies (finops.text.NulRejectMiddleware), API tokens, a close's reason. Runs on SQLite and
PostgreSQL alike (CI's two passes)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.test import Client
from rest_framework.test import APIClient

from billing_ingest.models import ImportBatch
from finops.budgets.models import Budget
from finops.chargeback.models import ClosedPeriod
from finops.org.models import Team
from finops.text import text_clean, text_problem
from finops.tokens.models import ApiToken
from finops.tokens.services import TokenError, api_token_create
from tests.builders import csv_text, focus_row

pytestmark = pytest.mark.django_db
URL = "/api/v1/budgets/"
BODY = {"name": "Vision", "team": "vision", "period": "month", "amount": "100.00",
        "currency": "USD"}  # fmt: skip


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"tag": "k" * 201 + "=v"}, "tag"),
        ({"tag": "k=" + "v" * 501}, "tag"),
        ({"team": None, "provider": "p" * 101}, "provider"),
        ({"name": "n" * 201}, "name"),
        ({"name": "Vision\x00monthly"}, "name"),
        ({"tag": "project\x00=x"}, "tag"),
        ({"tag": "project=x\x00"}, "tag"),
        ({"team": None, "provider": "AWS\x00"}, "provider"),
        ({"team": "vis\x00ion"}, "team"),
        ({"name": "Vision \ud800"}, "name"),
        ({"recipients": ["a\x00@example.com"]}, "recipients"),
    ],
)
def test_budget_api_refuses_long_and_nul_text_naming_the_field(
    finance_api: APIClient, team: Team, change: dict[str, Any], field: str
) -> None:
    # json.dumps escapes a lone surrogate ("\ud800"), as a client in another language may send.
    body = json.dumps({**BODY, **change})
    response = finance_api.post(URL, body, content_type="application/json")

    assert response.status_code == 400, response.content
    assert field in response.json(), response.json()
    assert not Budget.objects.exists()


def test_budget_api_takes_text_at_the_column_lengths(finance_api: APIClient, team: Team) -> None:
    body = {**BODY, "name": "n" * 200, "tag": "k" * 200 + "=" + "v" * 500}
    response = finance_api.post(URL, body, format="json")
    assert response.status_code == 201, response.content
    budget = Budget.objects.get()
    assert (len(budget.name), len(budget.tag_key), len(budget.tag_value)) == (200, 200, 500)
    patched = finance_api.patch(f"{URL}{budget.pk}/", {"tag": "k=" + "v" * 501}, format="json")
    assert patched.status_code == 400
    assert "501 characters" in patched.json()["tag"][0]


def test_budget_form_refuses_an_overlong_tag_on_the_field(
    finance_client: Client, team: Team
) -> None:
    form = {"name": "Vision", "team": "vision", "tag": "k=" + "v" * 501, "period": "month",
            "amount": "100", "currency": "USD", "thresholds": "50",
            "forecast_thresholds": ""}  # fmt: skip
    response = finance_client.post("/budgets/new/", form)
    assert response.status_code == 200
    assert "The tag value has 501 characters" in response.content.decode()
    assert not Budget.objects.exists()


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/endpoints/%00/", "path"),
        ("/runs/vision/%00/", "path"),
        ("/audit/?action=%00", "action"),
        ("/runs/?q=a%00b", "q"),
        ("/budgets/?as_of=%00", "as_of"),
        ("/anomalies/?team=%00", "team"),
        ("/teams/vision/statements/2025-09%00/", "path"),
    ],
)
def test_a_nul_in_a_page_url_is_a_400_naming_it(
    finance_client: Client, team: Team, path: str, field: str
) -> None:
    response = finance_client.get(path)
    assert response.status_code == 400
    assert f"{field}: Null characters are not allowed." in response.content.decode()


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/api/v1/runs/?team=%00", "team"),
        ("/api/v1/budgets/?as_of=2025-09-01%00", "as_of"),
        ("/api/v1/anomalies/?status=%00", "status"),
        ("/api/v1/statements/vision/2025-09%00/", "path"),
        ("/api/v1/costs/?month=2025-09&group_by=%00", "group_by"),
        ("/api/v1/budgets/?%00=1", "(a parameter name)"),
    ],
)
def test_a_nul_in_an_api_url_is_a_json_400_naming_it(
    finance_api: APIClient, team: Team, path: str, field: str
) -> None:
    response = finance_api.get(path)
    assert response.status_code == 400
    assert response.json() == {field: ["Null characters are not allowed."]}


def test_a_nul_in_a_form_field_is_a_400_naming_it(finance_client: Client, team: Team) -> None:
    response = finance_client.post("/close/2025-09/close/", {"reason": "done\x00"})
    assert response.status_code == 400
    assert "reason: Null characters are not allowed." in response.content.decode()
    assert not ClosedPeriod.objects.exists()
    response = finance_client.post("/budgets/new/", {"name": "a\x00", "team": "vision"})
    assert response.status_code == 400
    assert "name: Null characters" in response.content.decode()


def test_token_names_are_one_line_text(finance_user: User, finance_client: Client) -> None:
    for name in ("grafana\nx", "tab\there", "n" * 101, "x\x00"):
        with pytest.raises(TokenError):
            api_token_create(user=finance_user, name=name)
    with pytest.raises(CommandError, match="Control characters"):
        call_command("api_token", "create", "--user", "fin", "--name", "a\rb", stdout=io.StringIO())
    with pytest.raises(CommandError, match="at most 100"):
        call_command("api_token", "create", "--user", "fin", "--name", "n" * 101,
                     stdout=io.StringIO())  # fmt: skip
    with pytest.raises(CommandError, match="control character"):
        call_command("api_token", "create", "--user", "fin", "--team", "vi\x00sion",
                     stdout=io.StringIO())  # fmt: skip
    page = finance_client.post("/account/tokens/", {"name": "two\nlines", "read_only": "on"})
    assert page.status_code == 200
    assert "Control characters" in page.content.decode()
    assert not ApiToken.objects.exists()


def test_text_rules() -> None:
    assert text_problem("Vision monthly · Q3 € 東京") is None
    assert text_problem("a\nb") is not None
    assert text_problem("a\nb\tc", single_line=False) is None
    assert text_problem("a\x07b", single_line=False) is not None
    assert text_problem("a\u2028b") is not None
    assert text_problem("\udc80") is not None
    assert text_clean("  padded  ", field="name", max_length=6) == "padded"
    with pytest.raises(ValidationError) as error:
        text_clean("x" * 7, field="name", max_length=6, label="The name")
    assert error.value.message_dict == {
        "name": ["The name has 7 characters; at most 6 are allowed."]
    }


def test_a_team_name_in_the_admin_is_one_line(admin_client: Client) -> None:
    response = admin_client.post("/admin/org/team/add/", {"name": "Vision\nB", "slug": "vb"})
    assert response.status_code == 200
    assert "Control characters" in response.content.decode()
    assert not Team.objects.filter(slug="vb").exists()
    ok = admin_client.post("/admin/org/team/add/", {"name": "Vision B", "slug": "vb"})
    assert ok.status_code == 302


def test_an_upload_with_a_long_file_name_gets_a_source_that_fits(
    finance_client: Client, settings: Any, tmp_path: Path
) -> None:
    """The default source is "<format>:<file name>": a 250-character name made a 206-character
    source for a 200-character column (a 500 on PostgreSQL)."""
    settings.FINOPS_DATA_DIR = tmp_path / "data"
    text = csv_text([focus_row(ResourceId="i-1", EffectiveCost="1.5")])
    upload = SimpleUploadedFile("a" * 246 + ".csv", text.encode(), content_type="text/csv")
    response = finance_client.post("/imports/upload/", {"format": "billing:focus", "file": upload})
    assert response.status_code == 302
    batch = ImportBatch.objects.get()
    assert batch.source == ("focus:" + "a" * 246)[:200]
    assert batch.status == "succeeded"
