"""The API takes what its schema says and nothing looser (issue 25 item 11).

- Bodies are JSON only; a boolean is a JSON true/false (no strings, numbers or lists), an
  integer a JSON integer, a decimal a string of ASCII digits, a text a JSON string
  (finops.api.fields). `"active": "maybe"` used to save true, `"active": []` false, and the
  Arabic-Indic digit "٣" saved 3.00.
- Every writable field of every API serializer is one of those strict fields.
- Under /api/ every error is JSON: an unknown path, an id its URL pattern does not take, a
  method the view has not, a server error.
"""

from __future__ import annotations

import json
from datetime import date
from decimal import Decimal
from typing import Any

import pytest
from django.test import Client, RequestFactory
from drf_spectacular.generators import SchemaGenerator
from rest_framework import serializers
from rest_framework.test import APIClient

from finops.api.anomalies import AnomalyStatusSerializer
from finops.api.budgets import BudgetWriteSerializer
from finops.api.fields import (
    AsciiDecimalField,
    StrictBooleanField,
    StrictCharField,
    StrictDateField,
    StrictEmailField,
    StrictIntegerField,
)
from finops.api.notification_channels import NotificationChannelWriteSerializer
from finops.api.preferences import NotificationPreferenceSerializer
from finops.api.pricing_settings import PricingSettingsSerializer
from finops.api.recommendations import RecommendationStatusSerializer
from finops.api.renderers import JSONRenderer
from finops.api.run_estimates import RunEstimateRequestSerializer
from finops.budgets.models import Budget
from finops.notifications.selectors import notification_preference_get
from finops.org.models import Team
from finops.web.errors import server_error
from tests.budget_data import ledger_days

BUDGETS = "/api/v1/budgets/"
BODY = {
    "name": "Vision monthly",
    "team": "vision",
    "period": "month",
    "amount": "1950.00",
    "currency": "USD",
}
PREFERENCES = "/api/v1/me/notification-preferences/"


@pytest.fixture
def september(team: Team) -> None:
    ledger_days(team=team, first=date(2025, 9, 1), amounts=[100] * 30)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"active": "maybe"}, "active"),
        ({"active": []}, "active"),
        ({"active": "true"}, "active"),
        ({"active": 1}, "active"),
        ({"active": None}, "active"),
        ({"amount": "٣"}, "amount"),  # ARABIC-INDIC DIGIT THREE
        ({"amount": "１２"}, "amount"),  # FULLWIDTH DIGITS  # noqa: RUF001
        ({"amount": 1950}, "amount"),
        ({"amount": 1950.5}, "amount"),
        ({"amount": "1e3"}, "amount"),
        ({"amount": " 1950"}, "amount"),
        ({"amount": "NaN"}, "amount"),
        ({"thresholds": ["50"]}, "thresholds"),
        ({"thresholds": [50.0]}, "thresholds"),
        ({"thresholds": [True]}, "thresholds"),
        ({"name": 12}, "name"),
        ({"currency": ["USD"]}, "currency"),
        ({"recipients": [7]}, "recipients"),
    ],
)
def test_loose_budget_values_are_400_and_save_nothing(
    finance_api: APIClient, september: None, change: dict[str, Any], field: str
) -> None:
    response = finance_api.post(BUDGETS, {**BODY, **change}, format="json")

    assert response.status_code == 400, response.content
    assert field in response.json(), response.json()
    assert not Budget.objects.exists()


@pytest.mark.parametrize("active", [True, False])
def test_json_booleans_save_what_they_say(
    finance_api: APIClient, september: None, active: bool
) -> None:
    response = finance_api.post(BUDGETS, {**BODY, "active": active}, format="json")

    assert response.status_code == 201, response.content
    assert Budget.objects.get().active is active
    assert response.json()["active"] is active


def test_ascii_decimal_saves_exactly(finance_api: APIClient, september: None) -> None:
    response = finance_api.post(BUDGETS, {**BODY, "amount": "1950.5"}, format="json")

    assert response.status_code == 201, response.content
    assert Budget.objects.get().amount == Decimal("1950.50")


def test_patch_checks_the_types_of_the_keys_it_sends(
    finance_api: APIClient, september: None
) -> None:
    created = finance_api.post(BUDGETS, BODY, format="json").json()

    response = finance_api.patch(f"{BUDGETS}{created['id']}/", {"active": "no"}, format="json")

    assert response.status_code == 400
    assert "active" in response.json()
    assert Budget.objects.get().active is True


def test_form_bodies_are_415(lead_user: Any) -> None:
    api = APIClient()
    api.force_authenticate(lead_user)

    response = api.patch(PREFERENCES, {"budget_emails": "0"}, format="multipart")

    assert response.status_code == 415
    assert response["Content-Type"].startswith("application/json")


@pytest.mark.parametrize("value", ["false", 0, "off", None, []])
def test_preferences_take_a_json_boolean_only(lead_user: Any, value: Any) -> None:
    api = APIClient()
    api.force_authenticate(lead_user)

    response = api.patch(PREFERENCES, {"budget_emails": value}, format="json")

    assert response.status_code == 400, response.content
    assert "budget_emails" in response.json()
    assert notification_preference_get(user=lead_user).budget_emails is True


def _writable_fields(serializer: Any) -> list[tuple[str, Any]]:
    if isinstance(serializer, serializers.ListSerializer):
        serializer = serializer.child
    found = []
    for name, field in serializer.fields.items():
        if field.read_only:
            continue
        if isinstance(field, serializers.ListField):
            field = field.child
        if isinstance(field, serializers.BaseSerializer):
            found.extend(_writable_fields(field))
        else:
            found.append((f"{type(serializer).__name__}.{name}", field))
    return found


# The fields whose JSON type DRF does not loosen: a choice is matched as a string against its
# choices; ListField refuses a string or an object.
_STRICT = (
    StrictBooleanField,
    StrictIntegerField,
    StrictCharField,
    StrictEmailField,
    StrictDateField,
    AsciiDecimalField,
    serializers.ChoiceField,
    # Any JSON value; its shape is checked by the model's clean() (pricing settings' bands).
    serializers.JSONField,
)
# Every serializer the API reads a body with (the anomaly move's schema is inline, from
# ANOMALY_STATUS_BODY, and read with AnomalyStatusSerializer).
BODY_SERIALIZERS: dict[str, type[serializers.Serializer[Any]]] = {
    "BudgetWrite": BudgetWriteSerializer,
    "NotificationPreference": NotificationPreferenceSerializer,
    "AnomalyStatus": AnomalyStatusSerializer,
    "PricingSettings": PricingSettingsSerializer,
    "RecommendationStatus": RecommendationStatusSerializer,
    "RunEstimateRequest": RunEstimateRequestSerializer,
    "NotificationChannelWrite": NotificationChannelWriteSerializer,
}


def test_every_request_body_is_read_with_strict_fields() -> None:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    bodies = {
        media["schema"]["$ref"].rsplit("/", 1)[-1].removeprefix("Patched")
        for path in schema["paths"].values()
        for operation in path.values()
        for media in operation.get("requestBody", {}).get("content", {}).values()
        if "$ref" in media["schema"]
    }
    # A new body serializer must be added above (and so checked below).
    assert bodies <= set(BODY_SERIALIZERS), bodies - set(BODY_SERIALIZERS)

    writable = [
        (name, field)
        for cls in BODY_SERIALIZERS.values()
        for name, field in _writable_fields(cls())
    ]
    assert {"BudgetWriteSerializer.active", "BudgetWriteSerializer.amount"} <= dict(writable).keys()
    assert [name for name, field in writable if not isinstance(field, _STRICT)] == []


def test_unknown_api_path_is_a_json_404(finance_api: APIClient, db: None) -> None:
    for path in ["/api/v1/no-such-thing/", "/api/v1/runs/1.5/", "/api/v1/anomalies/x/pricing/"]:
        response = finance_api.get(path)
        assert response.status_code == 404, path
        assert response["Content-Type"] == "application/json", path
        assert response.json() == {"detail": "Not found."}


def test_pages_keep_their_html_404(finance_client: Client) -> None:
    response = finance_client.get("/no-such-page/")

    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


def test_api_method_not_allowed_is_json(finance_api: APIClient, team: Team) -> None:
    response = finance_api.post("/api/v1/teams/vision/", {}, format="json")

    assert response.status_code == 405
    assert response["Content-Type"] == "application/json"
    assert "detail" in response.json()


def test_api_server_error_is_json(rf: RequestFactory) -> None:
    response = server_error(rf.get("/api/v1/runs/"))

    assert response.status_code == 500
    assert response["Content-Type"] == "application/json"
    assert b'"detail"' in response.content
    page = server_error(rf.get("/runs/"))
    assert page["Content-Type"].startswith("text/html")


def test_a_lone_surrogate_echoed_in_an_error_is_escaped_not_a_500() -> None:
    """Found by the budgets fuzz on PostgreSQL: a 400 whose message repeats a lone surrogate
    from the body had no UTF-8 form, and rendering it answered 500."""
    body = JSONRenderer().render({"name": ["Not allowed: '\ud800'"]})
    assert b"\\ud800" in body
    assert json.loads(body) == {"name": ["Not allowed: '\ud800'"]}
