"""Schemathesis fuzzes every API operation and method against a live server, as finance and
as a team lead (token auth), with every one of its checks: no 5xx; every status, content type,
header and body as documented; every request the schema calls valid accepted, every one it
calls invalid refused (empty `?until=`, `?format=`, a `"maybe"` for a boolean, ...); methods
the schema does not list answered 405; nothing served without credentials.

The server is pytest-django's live_server (Django's threaded WSGI server on a free loopback
port) over the test database of the run: SQLite in CI's first pass, PostgreSQL in its second.
The data is a small month like the demo's, and a budget. Bounded: the coverage phase's
deterministic cases plus at most FUZZ_MAX_EXAMPLES (20) per operation in the fuzzing phase,
about 2,200-2,500 requests per user and some 35 s of CPU per user (both users, measured on
PostgreSQL: 67 s of CPU, 7-8 min of wall time on a 2-core machine shared at load 12), and
FUZZ_TIMEOUT at most.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest
import yaml
from django.contrib.auth.models import User
from drf_spectacular.generators import SchemaGenerator
from pytest_django.live_server_helper import LiveServer

from finops.anomalies.models import Anomaly, AnomalyDriver
from finops.budgets.models import Budget
from finops.notifications.models import NotificationChannel
from finops.org.models import Team
from finops.tokens.services import api_token_create
from tests.factories import Scenario, TeamDailyCostFactory, build_month_scenario

pytestmark = pytest.mark.fuzz

# Every check schemathesis has (positive_data_acceptance, negative_data_rejection,
# content_type_conformance, unsupported_method, ignored_auth, use_after_free, ...).
CHECKS = "all"
# The exceptions, in the config file: a request the schema calls valid may still break a rule
# no JSON schema can state, answered 400 naming the field. A budget body: a team the caller may
# budget for, an FX rate to its currency, a tag filter only with a team, a provider only
# without one. A cost report: an FX rate from every ledger currency to `currency` (any three
# letters match its pattern). The pricing settings: bounds on decimal strings (a JSON schema's
# minimum does not apply to a string) and the bands' shapes, checked by the model's clean().
# A notification channel: a team the caller may save channels for, and a URL that is https and
# resolves to a public address (a fuzzed string rarely is). A run estimate: a GPU model with a
# published dense peak for the precision, and an MFU given or measured on that GPU before.
# positive_data_acceptance takes a 400 there, and only there.
CONFIG = """
[[operations]]
include-name-regex = "^(POST|PUT|PATCH) /api/v1/budgets/"
checks.positive_data_acceptance.expected-statuses = [
    "200", "201", "400", "401", "403", "404", "409", "429",
]

[[operations]]
include-name = "PATCH /api/v1/pricing-settings/"
checks.positive_data_acceptance.expected-statuses = ["200", "400", "401", "403", "404", "429"]

[[operations]]
include-name = "GET /api/v1/costs/"
checks.positive_data_acceptance.expected-statuses = ["200", "400", "401", "403", "404", "429"]

[[operations]]
include-path = "/api/v1/budgets/{id}/"
parameters = { id = %(budget)d }

[[operations]]
include-name-regex = "^(POST|PUT|PATCH) /api/v1/notification-channels/"
checks.positive_data_acceptance.expected-statuses = [
    "200", "201", "400", "401", "403", "404", "429",
]

[[operations]]
include-name = "POST /api/v1/run-estimates/"
checks.positive_data_acceptance.expected-statuses = ["200", "400", "401", "403", "404", "429"]

[[operations]]
include-path = "/api/v1/notification-channels/{id}/"
parameters = { id = %(channel)d }
"""
FUZZ_MAX_EXAMPLES = int(os.environ.get("FINOPS_FUZZ_MAX_EXAMPLES", "20"))
# A bound, not a budget: st's --max-time would repeat fuzzing until it is spent.
# 600 s: a run takes ~260 s on 2 cores beside the other xdist worker; 300 timed out under load.
FUZZ_TIMEOUT = int(os.environ.get("FINOPS_FUZZ_TIMEOUT", "600"))
ST = Path(sys.executable).with_name("st")


@pytest.fixture
def fuzz_month(team: Team, other_team: Team) -> Scenario:
    """build_month_scenario's month (three providers, two currencies, runs, jobs) plus a
    month of daily rollups and an anomaly with a driver for the detail routes."""
    scenario = build_month_scenario(team=team, other_team=other_team)
    for day in range(1, 31):
        TeamDailyCostFactory.create(team=team, day=scenario.month.replace(day=day))
    first = dt.date(2025, 9, 10)
    anomaly = Anomaly.objects.create(
        identity=f"{team.pk}|team||{first}", team=team, series_kind="team", kind="spike",
        first_day=first, last_day=first, detected_on=first, currency="USD",
        actual=Decimal("3000.5"), expected=Decimal("1000.25"), impact=Decimal("2000.25"),
        unexplained=Decimal("0.25"), severity="high",
    )  # fmt: skip
    AnomalyDriver.objects.create(
        anomaly=anomaly, position=0, dimension="run", key="run-b", actual=Decimal("2000"),
        expected=Decimal("0"), delta=Decimal("2000"),
    )  # fmt: skip
    return scenario


@pytest.fixture
def fuzz_budget(team: Team) -> Budget:
    """A budget of the lead's team, for the operations on /budgets/{id}/ (a fuzzed id finds
    nothing: 404 on every case, so the body and the rules would go untested)."""
    return Budget.objects.create(
        name="Vision monthly", team=team, period=Budget.Period.MONTH, amount=Decimal("1950.00"),
        currency="USD", thresholds=[50, 100], forecast_thresholds=[100], recipients=[],
    )  # fmt: skip


@pytest.fixture
def fuzz_channel(team: Team) -> NotificationChannel:
    """A channel of the lead's team, for the operations on /notification-channels/{id}/ (saved
    directly: the service would resolve its host, and the tests run offline)."""
    return NotificationChannel.objects.create(
        name="vision-alerts", kind="slack", team=team, events=["budget"],
        url="https://hooks.slack.com/services/T0001/B0002/fuzzfuzzfuzz",
    )  # fmt: skip


def _schema_file(tmp_path: Path) -> Path:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    path = tmp_path / "openapi.yaml"
    path.write_text(yaml.safe_dump(schema, sort_keys=False))
    return path


def _fuzz(
    schema: Path, config: Path, base_url: str, key: str, report: Path
) -> subprocess.CompletedProcess:
    command = [
        str(ST), "--config-file", str(config), "run", str(schema), "--url", base_url,
        "--header", f"Authorization: Token {key}",
        "--checks", CHECKS,
        "--phases", "examples,coverage,fuzzing",
        "--max-examples", str(FUZZ_MAX_EXAMPLES),
        "--workers", "1",
        "--seed", "15",
        "--request-timeout", "30",
        "--no-color", "--output-truncate", "false",
    ]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=FUZZ_TIMEOUT, cwd=report)


@pytest.mark.parametrize("who", ["finance", "lead"])
def test_fuzz_every_operation(
    who: str,
    live_server: LiveServer,
    fuzz_month: Scenario,
    fuzz_budget: Budget,
    fuzz_channel: NotificationChannel,
    finance_user: User,
    lead_user: User,
    tmp_path: Path,
) -> None:
    user = finance_user if who == "finance" else lead_user
    key = api_token_create(user=user, name=f"fuzz {who}").key
    schema = _schema_file(tmp_path)
    config = tmp_path / "schemathesis.toml"
    config.write_text(CONFIG % {"budget": fuzz_budget.pk, "channel": fuzz_channel.pk})
    result = _fuzz(schema, config, live_server.url, key, tmp_path)
    output = result.stdout + result.stderr
    if result.returncode != 0 and _only_network_errors(output):
        # Django's live server is the development server: once in CI (PATCH /budgets/0/) a
        # kept-alive connection got Python's HTTP/0.9 error page instead of a status line
        # ("Connection aborted. <!DOCTYPE HTML>"), and the same seed passed on a re-run. One
        # re-run, only when nothing but such errors was found: a failed check (a 5xx, a schema
        # violation) is never retried, and a second network error still fails.
        result = _fuzz(schema, config, live_server.url, key, tmp_path)
        output = result.stdout + result.stderr
    (Path(os.environ.get("FINOPS_FUZZ_LOG_DIR", tmp_path)) / f"fuzz-{who}.log").write_text(output)
    assert result.returncode == 0, output
    assert "No issues found" in output or "passed" in output, output


def _only_network_errors(output: str) -> bool:
    """Schemathesis reported network errors and no failed check."""
    failed = "Failures:" in output or re.search(r"\b\d+ failed\b", output) is not None
    return "Network Error" in output and not failed
