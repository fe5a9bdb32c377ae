"""The Imports page warns of open jobs their cluster's newer job imports did not list (the close
check "open jobs"), on fixtures/scenarios/focus-slurm-pods-unlisted-open-jobs (figures worked
out in its README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from tests.scenario_setup import SCENARIOS, scenario_load

pytestmark = pytest.mark.django_db


def _scenario(name: str, tmp_path: Path) -> None:
    scenario_load(SCENARIOS / name, tmp_path, months=["2025-07"])


def test_imports_page_warns_of_unlisted_open_jobs(finance_client: Client, tmp_path: Path) -> None:
    _scenario("focus-slurm-pods-unlisted-open-jobs", tmp_path)
    html = finance_client.get(reverse("web:imports")).content.decode()
    assert 'data-testid="open-jobs-warning"' in html
    assert "2 jobs have no end" in html
    # July's ledger (the newest month) charges job 500 160 and the pod 160.
    assert '<span data-testid="open-jobs-charged-USD">320.00 USD</span>' in html
    assert "hpc: 1 job, the oldest started 2025-06-30 22:00 UTC" in html
    assert "k8s: 1 job, the oldest started 2025-06-30 23:00 UTC" in html
    assert "sacct -S" in html
    assert reverse("web:close-review", args=["2025-07"]) in html


def test_no_warning_once_the_next_exports_list_them(finance_client: Client, tmp_path: Path) -> None:
    _scenario("focus-slurm-pods-month-crossing", tmp_path)
    html = finance_client.get(reverse("web:imports")).content.decode()
    assert "open-jobs-warning" not in html
