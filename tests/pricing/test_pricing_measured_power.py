"""The on-prem comparison's power from measured kWh where DCGM measured the GPUs (issue 32),
the nameplate watts elsewhere, on the hand-worked scenario fixtures/scenarios/focus-slurm-energy
(README.md there): vision's pretrain drew 2.6 GPU kWh in 16 GPU-hours = 0.1625 kWh per
GPU-hour; speech's eval has no measurement (nameplate)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from finops.pricing.comparisons import assumptions_current
from tests.energy_inputs import energy_month

pytestmark = pytest.mark.django_db


def _pricing(finance_user: User) -> dict[str, dict[str, Any]]:
    api = APIClient()
    api.force_authenticate(finance_user)
    answer = api.get("/api/v1/pricing-comparison/", {"month": "2025-06"})
    assert answer.status_code == 200, answer.content
    return {row["team"]: row for row in answer.json()}


def test_measured_kwh_per_gpu_hour_replaces_the_nameplate(finance_user: User) -> None:
    energy_month()
    rows = _pricing(finance_user)
    a = assumptions_current()
    vision = rows["vision"]["assumptions"]["on_prem"]
    assert vision["power_basis"] == "measured"
    assert Decimal(vision["measured_gpu_kwh"]) == Decimal("2.6")
    assert vision["measured_gpu_hours"] == "16.000000"
    assert vision["kwh_per_gpu_hour"] == "0.162500"
    # TCO per node-month with the measured power, from the assumptions the body shows.
    power = Decimal("0.1625") * a.gpus_per_node * a.pue * 730 * a.price_per_kwh
    fixed = (
        a.node_capex / a.amortisation_months
        + a.rack_per_node_month + a.network_per_node_month + a.staff_per_node_month
    )  # fmt: skip
    assert Decimal(vision["node_month_tco"]) == (fixed + power).quantize(Decimal("0.01"))
    speech = rows["speech"]["assumptions"]["on_prem"]
    assert speech["power_basis"] == "nameplate"
    assert speech["kwh_per_gpu_hour"] == str(a.watts_per_gpu / 1000)
    assert Decimal(speech["node_month_tco"]) == a.node_month_tco.quantize(Decimal("0.01"))
    # The H100's measured 162.5 W per GPU is below its 700 W nameplate: owning costs less.
    assert Decimal(vision["gpu_hour_tco"]) < Decimal(speech["gpu_hour_tco"])


def test_the_run_comparison_uses_the_runs_measured_power(finance_user: User) -> None:
    energy_month()
    api = APIClient()
    api.force_authenticate(finance_user)
    runs = {
        r["run_id"]: r for r in api.get("/api/v1/runs/", {"month": "2025-06"}).json()["results"]
    }
    body = api.get(runs["pretrain"]["url"] + "pricing/").json()
    assert body["assumptions"]["on_prem"]["power_basis"] == "measured"
    assert body["assumptions"]["on_prem"]["kwh_per_gpu_hour"] == "0.162500"
    eval_body = api.get(runs["eval"]["url"] + "pricing/").json()
    assert eval_body["assumptions"]["on_prem"]["power_basis"] == "nameplate"
