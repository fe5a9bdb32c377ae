"""/api/v1/anomalies/: the contract fields, the filters, PATCH of status + comment, and who
sees what (a lead only their teams'), plus its place in the OpenAPI schema."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from finops.anomalies.models import Anomaly, AnomalyDriver, AnomalyStatusChange
from finops.org.models import Team
from tests.client_types import Response

pytestmark = pytest.mark.django_db

URL = "/api/v1/anomalies/"


def make(team: Team | None, first: dt.date, **fields: Any) -> Anomaly:
    values: dict[str, Any] = {
        "identity": f"{team.pk if team else '-'}|team||{first}", "team": team,
        "series_kind": "team", "kind": "spike", "first_day": first, "last_day": first,
        "detected_on": first, "currency": "USD", "actual": Decimal("3000.5"),
        "expected": Decimal("1000.25"), "impact": Decimal("2000.25"),
        "unexplained": Decimal("0.25"), "severity": "high",
    }  # fmt: skip
    values.update(fields)
    anomaly = Anomaly.objects.create(**values)
    AnomalyDriver.objects.create(anomaly=anomaly, position=0, dimension="run", key="run-b",
                                 actual=Decimal("2000"), expected=Decimal("0"),
                                 delta=Decimal("2000"))  # fmt: skip
    return anomaly


def client_for(user: User) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_fields_are_the_contract(team: Team, finance_user: User) -> None:
    anomaly = make(team, dt.date(2025, 9, 10))
    body = client_for(finance_user).get(URL).json()
    [item] = body["results"] if isinstance(body, dict) else body
    assert item["id"] == anomaly.pk
    assert item["team"] == "vision"
    assert item["first_day"] == item["last_day"] == "2025-09-10"
    assert Decimal(item["actual"]) == Decimal("3000.5")
    assert isinstance(item["actual"], str)
    assert Decimal(item["expected"]) == Decimal("1000.25")
    assert Decimal(item["impact"]) == Decimal("2000.25")
    assert item["severity"] == "high"
    assert item["status"] == "new"
    [driver] = item["drivers"]
    assert set(driver) == {"dimension", "key", "actual", "expected", "delta"}
    assert driver["dimension"] == "run"
    assert Decimal(driver["delta"]) == 2000
    assert Decimal(item["unexplained"]) + Decimal(driver["delta"]) == Decimal(item["impact"])


def _ids(response: Response) -> list[int]:
    body = response.json()
    items = body["results"] if isinstance(body, dict) else body
    return [item["id"] for item in items]


def test_filters_team_status_since_until(team: Team, other_team: Team, finance_user: User) -> None:
    a = make(team, dt.date(2025, 9, 1))
    b = make(other_team, dt.date(2025, 9, 10), status="acknowledged")
    c = make(team, dt.date(2025, 9, 20), last_day=dt.date(2025, 9, 25))
    client = client_for(finance_user)
    assert sorted(_ids(client.get(URL, {"team": "vision"}))) == sorted([a.pk, c.pk])
    assert _ids(client.get(URL, {"status": "acknowledged"})) == [b.pk]
    assert sorted(_ids(client.get(URL, {"since": "2025-09-10"}))) == sorted([b.pk, c.pk])
    assert sorted(_ids(client.get(URL, {"until": "2025-09-10"}))) == sorted([a.pk, b.pk])
    # An event running 20-25 overlaps a window that starts on the 24th.
    assert _ids(client.get(URL, {"since": "2025-09-24", "until": "2025-09-30"})) == [c.pk]
    assert client.get(URL, {"since": "not-a-date"}).status_code == 400


def test_lead_sees_only_their_teams(team: Team, other_team: Team, lead_user: User) -> None:
    mine = make(team, dt.date(2025, 9, 1))
    theirs = make(other_team, dt.date(2025, 9, 2))
    no_team = make(None, dt.date(2025, 9, 3), series_kind="cluster_idle", series_key="hpc1",
                   identity="-|cluster_idle|hpc1|2025-09-03")  # fmt: skip
    client = client_for(lead_user)
    assert _ids(client.get(URL)) == [mine.pk]
    assert client.get(f"{URL}{theirs.pk}/").status_code == 404
    assert client.get(f"{URL}{no_team.pk}/").status_code == 404
    response = client.patch(f"{URL}{theirs.pk}/", {"status": "acknowledged", "comment": "x"},
                            format="json")  # fmt: skip
    assert response.status_code == 404
    assert Anomaly.objects.get(pk=theirs.pk).status == "new"


def test_anonymous_is_refused() -> None:
    assert APIClient().get(URL).status_code in (401, 403)


def test_patch_status_records_comment_and_user(team: Team, lead_user: User) -> None:
    anomaly = make(team, dt.date(2025, 9, 1))
    client = client_for(lead_user)
    response = client.patch(
        f"{URL}{anomaly.pk}/", {"status": "acknowledged", "comment": "looking"}, format="json"
    )
    assert response.status_code == 200
    assert response.json()["status"] == "acknowledged"
    change = AnomalyStatusChange.objects.get()
    assert (change.from_status, change.to_status) == ("new", "acknowledged")
    assert change.comment == "looking"
    assert change.user == lead_user

    response = client.patch(f"{URL}{anomaly.pk}/", {"status": "expected"}, format="json")
    assert response.status_code == 400  # a comment is required
    response = client.patch(f"{URL}{anomaly.pk}/", {"status": "new", "comment": "x"},
                            format="json")  # fmt: skip
    # Not a move the workflow has from the current status: a conflict with its state.
    assert response.status_code == 409, response.content
    response = client.patch(
        f"{URL}{anomaly.pk}/", {"status": "expected", "comment": "training launch"}, format="json"
    )
    assert response.status_code == 200
    assert Anomaly.objects.get(pk=anomaly.pk).status == "expected"
    assert client.put(f"{URL}{anomaly.pk}/", {}, format="json").status_code == 405


def test_schema_lists_the_endpoint(finance_user: User) -> None:
    response = client_for(finance_user).get("/api/schema/", {"format": "json"})
    paths = response.json()["paths"]
    assert "/api/v1/anomalies/" in paths
    assert "/api/v1/anomalies/{id}/" in paths
    assert "patch" in paths["/api/v1/anomalies/{id}/"]
    names = {p["name"] for p in paths["/api/v1/anomalies/"]["get"]["parameters"]}
    assert {"team", "status", "since", "until"} <= names
