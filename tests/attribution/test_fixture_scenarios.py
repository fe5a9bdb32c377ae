"""Every hand-made scenario under fixtures/scenarios/, run through the real commands and checked
through the REST API as a finance user.

A scenario is a folder: its input files in their native formats, `setup.json` (Django fixtures
to load, model objects in Django's fixture format, then the commands to run, paths relative to
the folder) and `expected.json` (results worked out by hand, per billing month; the arithmetic is
in the folder's README.md). After the commands, `attribute --month` runs for every month of
expected.json, and each month's keys are checked by the checker of that name in CHECKERS.

A key with no checker fails the test, unless expected.json lists it under "pending" (results of
features that do not exist yet, e.g. budgets and anomalies): a later issue adds its checker to
CHECKERS and removes it from "pending"; a key that is both pending and checkable fails too, so a
pending key never silently stays unchecked.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from finops.org.models import Profile
from tests.scenario_setup import SCENARIOS, load_setup, run_command

# Top-level keys of expected.json that are not results.
META_KEYS = {"_worked", "pending", "months"}

pytestmark = pytest.mark.django_db

Checker = Callable[[APIClient, str, Any], None]


def scenario_names() -> list[str]:
    return sorted(p.name for p in SCENARIOS.iterdir() if (p / "expected.json").is_file())


# --- comparing API values with hand-worked ones --------------------------------------------------


def same(actual: Any, expected: Any) -> bool:
    """Money and quantities as decimal strings compare by value ("10" == "10.000000")."""
    if isinstance(expected, str) and isinstance(actual, str):
        try:
            return Decimal(actual) == Decimal(expected)
        except InvalidOperation:
            return actual == expected
    return bool(actual == expected)


def assert_fields(where: str, actual: dict[str, Any], expected: dict[str, Any]) -> None:
    wrong = {
        key: (actual.get(key), value)
        for key, value in expected.items()
        if not same(actual.get(key), value)
    }
    assert not wrong, f"{where}: (got, expected) {wrong}"


def get_all(api: APIClient, url: str, params: dict[str, str]) -> list[dict[str, Any]]:
    """Every item of a list endpoint, following pagination where there is any."""
    response = api.get(url, params)
    assert response.status_code == 200, response.content
    body = response.json()
    if isinstance(body, list):
        return body
    items = list(body["results"])
    while body.get("next"):
        body = api.get(body["next"]).json()
        items += body["results"]
    return items


# --- checkers: one per key of a month in expected.json --------------------------------------------


def check_reconciliation(api: APIClient, month: str, expected: dict[str, Any]) -> None:
    """Billed, each ledger category (those not named are 0), idle, unallocated; the difference
    is 0 for the month and for every provider x account."""
    body = api.get("/api/v1/reconciliation/", {"month": month}).json()
    expected = dict(expected)
    categories = expected.pop("attributed", {})
    attributed = {k: v for k, v in body["attributed"].items() if Decimal(v)}
    assert {k: Decimal(v) for k, v in attributed.items()} == {
        k: Decimal(v) for k, v in categories.items()
    }, f"{month} attributed"
    assert_fields(f"{month} reconciliation", body, {"difference": "0", **expected})
    assert body["by_account"], f"{month}: no account in the reconciliation"
    assert all(Decimal(row["difference"]) == 0 for row in body["by_account"])


def check_teams(api: APIClient, month: str, expected: dict[str, str]) -> None:
    """Exactly these teams exist, each with this month's total over every category."""
    slugs = {team["slug"] for team in get_all(api, "/api/v1/teams/", {})}
    assert slugs == set(expected), f"teams: {sorted(slugs)}"
    body = api.get("/api/v1/costs/", {"month": month, "group_by": "team"}).json()
    totals = {s["key"]: Decimal(s["total"]) for s in body["series"] if s["key"] is not None}
    assert {k: v for k, v in totals.items() if v} == {
        slug: Decimal(total) for slug, total in expected.items() if Decimal(total)
    }, f"{month} team totals"


def check_runs(api: APIClient, month: str, expected: dict[str, dict[str, Any]]) -> None:
    # Training runs are the list's default; serving pods' runs are asked for as inference.
    runs = {
        run["run_id"]: run
        for category in ("training", "inference")
        for run in get_all(api, "/api/v1/runs/", {"month": month, "category": category})
    }
    assert set(runs) == set(expected), f"{month} runs: {sorted(runs)}"
    for run_id, fields in expected.items():
        assert_fields(f"{month} run {run_id}", runs[run_id], fields)


def check_endpoints(api: APIClient, month: str, expected: dict[str, dict[str, Any]]) -> None:
    rows = {r["endpoint"]: r for r in get_all(api, "/api/v1/endpoints/", {"month": month})}
    assert set(rows) == set(expected), f"{month} endpoints: {sorted(rows)}"
    for endpoint, fields in expected.items():
        assert_fields(f"{month} endpoint {endpoint}", rows[endpoint], fields)


def check_run_efficiency(
    api: APIClient, month: str, expected: dict[str, dict[str, Any] | None]
) -> None:
    """Each run's `efficiency` on `GET /api/v1/runs/{id}/` (null: no metrics), and its headline
    on the runs list the same figures."""
    runs = {r["run_id"]: r for r in get_all(api, "/api/v1/runs/", {"month": month})}
    for run_id, fields in expected.items():
        detail = api.get(runs[run_id]["url"]).json()["efficiency"]
        headline = runs[run_id]["efficiency"]
        if fields is None:
            assert detail is None, f"{month} run {run_id}: {detail}"
            assert headline is None, f"{month} run {run_id}: {headline}"
            continue
        assert detail is not None, f"{month} run {run_id}: no efficiency"
        assert_fields(f"{month} run {run_id} efficiency", detail, fields)
        assert headline == {key: detail[key] for key in headline}, f"{month} run {run_id}"


def _kwh_within_one_percent(where: str, actual: str, expected: str) -> None:
    got, want = Decimal(actual), Decimal(expected)
    assert abs(got - want) <= want / 100, f"{where}: {got} kWh, expected {want} within 1 %"


def check_run_energy(api: APIClient, month: str, expected: dict[str, dict[str, Any]]) -> None:
    """Each run's `energy` on `GET /api/v1/runs/{id}/`: GPU kWh within 1 % of the hand-worked
    figure; facility kWh and CO2e exactly the shown GPU kWh x PUE and x intensity / 1000."""
    places = Decimal("0.000001")
    runs = {r["run_id"]: r for r in get_all(api, "/api/v1/runs/", {"month": month})}
    for run_id, fields in expected.items():
        energy = api.get(runs[run_id]["url"]).json()["energy"]
        where = f"{month} run {run_id} energy"
        assert energy is not None, where
        for kwh in ("gpu_kwh", "measured_kwh", "estimated_kwh"):
            _kwh_within_one_percent(f"{where} {kwh}", energy[kwh], fields[kwh])
        facility = (Decimal(energy["gpu_kwh"]) * Decimal(energy["pue"])).quantize(places)
        assert Decimal(energy["facility_kwh"]) == facility, (where, energy)
        co2e = (facility * Decimal(energy["grid_g_per_kwh"]) / 1000).quantize(places)
        assert Decimal(energy["co2e_kg"]) == co2e, (where, energy)
        exact = {k: v for k, v in fields.items() if not k.endswith("kwh") or k == "facility_kwh"}
        assert_fields(where, energy, exact)
        assert energy["pue_source"], where
        assert energy["grid_source"], where


def check_team_energy(api: APIClient, month: str, expected: dict[str, dict[str, Any]]) -> None:
    rows = {r["team"]: r for r in get_all(api, "/api/v1/energy/", {"month": month})}
    assert set(rows) == set(expected), f"{month} energy teams: {sorted(rows)}"
    for team, fields in expected.items():
        assert_fields(f"{month} team {team} energy", rows[team], fields)


def check_run_waste(api: APIClient, month: str, expected: dict[str, dict[str, Any]]) -> None:
    """Each run's `waste` object on `GET /api/v1/runs/{id}/` and its `attempts` in time order
    (each attempt's fields, its `waste` parts by cause)."""
    runs = {
        run["run_id"]: run
        for category in ("training", "inference")
        for run in get_all(api, "/api/v1/runs/", {"month": month, "category": category})
    }
    for run_id, fields in expected.items():
        detail = api.get(runs[run_id]["url"]).json()
        assert_fields(f"{month} run {run_id} waste", detail["waste"], fields["waste"])
        attempts = detail["attempts"]
        assert len(attempts) == len(fields["attempts"]), f"{month} run {run_id}: {attempts}"
        for index, (got, want) in enumerate(zip(attempts, fields["attempts"], strict=True)):
            want = dict(want)
            where = f"{month} run {run_id} attempt {index + 1}"
            assert_fields(f"{where} waste", got["waste"], want.pop("waste", {}))
            assert_fields(where, got, want)


def check_team_waste(api: APIClient, month: str, expected: dict[str, dict[str, Any]]) -> None:
    """`GET /api/v1/waste/?month=`: exactly these teams, each with its sums by cause."""
    rows = {row["team"]: row for row in get_all(api, "/api/v1/waste/", {"month": month})}
    assert set(rows) == set(expected), f"{month} waste teams: {sorted(rows, key=str)}"
    for slug, fields in expected.items():
        assert_fields(f"{month} team {slug} waste", rows[slug], fields)


def check_waste_advice(api: APIClient, month: str, expected: dict[str, dict[str, Any]]) -> None:
    """`GET /api/v1/waste/advice/?month=`: exactly these rows, keyed `team/cluster/pricing`,
    each with these fields (null: none)."""
    rows = {
        f"{row['team']}/{row['cluster']}/{row['pricing']}": row
        for row in get_all(api, "/api/v1/waste/advice/", {"month": month})
    }
    assert set(rows) == set(expected), f"{month} advice rows: {sorted(rows)}"
    for key, fields in expected.items():
        assert_fields(f"{month} advice {key}", rows[key], fields)


def check_recommendations(api: APIClient, month: str, expected: dict[str, str]) -> None:
    """`GET /api/v1/recommendations/?month=` (the default materiality floor): exactly these
    recommendations, keyed `team/kind/title`, each with its monthly saving (its currency's)."""
    rows = get_all(api, "/api/v1/recommendations/", {"month": month})
    found = {f"{row['team']}/{row['kind']}/{row['title']}": row["monthly_savings"] for row in rows}
    assert set(found) == set(expected), f"{month} recommendations: {sorted(found)}"
    assert_fields(f"{month} recommendations", found, expected)


def check_close_checks(api: APIClient, month: str, expected: dict[str, dict[str, Any]]) -> None:
    """Named checks of `GET /api/v1/periods/YYYY-MM/checks/`: each one's status and figures
    ([label, value, unit], in order)."""
    response = api.get(f"/api/v1/periods/{month}/checks/")
    assert response.status_code == 200, response.content
    checks = {check["name"]: check for check in response.json()["checks"]}
    for name, fields in expected.items():
        check = checks[name]
        figures = [[f["label"], f["value"], f["unit"]] for f in check["figures"]]
        assert check["status"] == fields["status"], f"{month} check {name}: {check}"
        assert figures == fields["figures"], f"{month} check {name}: {figures}"


def check_team_statement(api: APIClient, month: str, expected: dict[str, dict[str, str]]) -> None:
    """Each team's statement CSV (`GET /api/v1/statements/{team}/{month}.csv`): its rows of what
    the runs bought, wasted and burned, keyed `section/item/currency`, `amount_exact` as worked
    out by hand; every one of them outside the total (in_total `no`)."""
    for slug, fields in expected.items():
        answer = api.get(f"/api/v1/statements/{slug}/{month}.csv")
        assert answer.status_code == 200, (slug, answer.status_code)
        rows = list(csv.DictReader(io.StringIO(answer.content.decode())))
        figures = {
            f"{r['section']}/{r['item']}/{r['currency']}": r
            for r in rows
            if r["section"] in ("bought", "wasted", "burned")
        }
        assert {r["in_total"] for r in figures.values()} <= {"no"}, slug
        got = {key: figures[key]["amount_exact"] if key in figures else None for key in fields}
        assert_fields(f"{month} team {slug} statement", got, fields)


CHECKERS: dict[str, Checker] = {
    "team_statement": check_team_statement,
    "run_energy": check_run_energy,
    "team_energy": check_team_energy,
    "reconciliation": check_reconciliation,
    "teams": check_teams,
    "runs": check_runs,
    "endpoints": check_endpoints,
    "run_efficiency": check_run_efficiency,
    "run_waste": check_run_waste,
    "team_waste": check_team_waste,
    "waste_advice": check_waste_advice,
    "recommendations": check_recommendations,
    "close_checks": check_close_checks,
}


# --- running a scenario -------------------------------------------------------------------------


@pytest.fixture
def finance_api(db: None) -> APIClient:
    user = User.objects.create_user("scenario-finance")
    Profile.objects.create(user=user, role=Profile.Role.FINANCE)
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_every_scenario_folder_is_complete() -> None:
    names = scenario_names()
    assert len(names) >= 9
    for name in names:
        folder = SCENARIOS / name
        assert (folder / "setup.json").is_file(), name
        assert (folder / "README.md").is_file(), f"{name}: the arithmetic belongs in README.md"


@pytest.mark.parametrize("name", scenario_names())
def test_scenario(name: str, finance_api: APIClient, tmp_path: Path) -> None:
    folder = SCENARIOS / name
    setup = json.loads((folder / "setup.json").read_text())
    expected = json.loads((folder / "expected.json").read_text())
    pending = set(expected.get("pending", []))
    unknown = set(expected) - META_KEYS - pending
    assert not unknown, f"expected.json keys with no meaning: {unknown}"
    checkable = pending & set(CHECKERS)
    assert not checkable, f"pending keys that have a checker now: {checkable}"

    load_setup(setup, tmp_path)
    for command in setup["commands"]:
        run_command(folder, command)
    for month in expected["months"]:
        out = run_command(folder, ["attribute", "--month", month])
        assert "conservation check: difference 0" in out

    for month, results in expected["months"].items():
        for key, value in results.items():
            if key in pending:
                continue
            assert key in CHECKERS, f"{name} {month}: no checker for {key!r} and not pending"
            CHECKERS[key](finance_api, month, value)
