"""Import batches show the file's name and its source, not the server's folders (issue 9,
item 9). The probe saw `file_name: /tmp/...` in /api/v1/import-batches/ and on the imports
page: absolute server paths. Files are ingested through the real command from a folder whose
path the answers must not contain."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from billing_ingest.models import ImportBatch
from finops.core.public_names import public_file_name, public_text
from tests.attribution_inputs import ingest_bill, line, utc

pytestmark = pytest.mark.django_db


@pytest.fixture
def batches(tmp_path: Path) -> Path:
    ingest_bill(tmp_path, [line("80", utc(10), utc(11), node="i1")])  # focus-2025-06.csv
    bad = tmp_path / "sacct-broken.txt"
    bad.write_text("this is not sacct output\n")
    with pytest.raises(CommandError):
        call_command("ingest_jobs", "--format", "slurm", str(bad), "--cluster", "hpc-east",
                     "--no-attribute", stdout=StringIO(), stderr=StringIO())  # fmt: skip
    stored = list(ImportBatch.objects.values_list("file_name", flat=True))
    # The problem is real here: the stored names are absolute server paths.
    assert all(name.startswith(str(tmp_path)) for name in stored), stored
    return tmp_path


def test_api_shows_file_names_and_sources_without_folders(
    batches: Path, finance_user: User
) -> None:
    api = APIClient()
    api.force_authenticate(finance_user)
    response = api.get("/api/v1/import-batches/")
    assert response.status_code == 200
    assert str(batches) not in response.content.decode()
    rows = {row["file_name"]: row for row in response.json()["results"]}
    assert set(rows) == {"focus-2025-06.csv", "sacct-broken.txt"}
    assert rows["sacct-broken.txt"]["source"] == "hpc-east"
    assert rows["sacct-broken.txt"]["status"] == "failed"


def test_imports_page_shows_file_names_without_folders(
    batches: Path, client: Client, finance_user: User
) -> None:
    client.force_login(finance_user)
    html = client.get(reverse("web:imports")).content.decode()
    assert str(batches) not in html
    assert "focus-2025-06.csv" in html
    assert "sacct-broken.txt" in html
    assert "hpc-east" in html


@pytest.mark.parametrize(
    ("stored", "shown"),
    [
        ("/tmp/pytest-1/x/focus-2025-06.csv", "focus-2025-06.csv"),
        ("/srv/finops/var/usage", "usage"),
        ("C:\\exports\\cur\\part-1.csv", "part-1.csv"),
        # Bucket URIs and labels name the source, not the server: kept whole.
        ("s3://billing/cur/2025-06/manifest.json", "s3://billing/cur/2025-06/manifest.json"),
        ("Kubernetes API (https://k8s:6443)", "Kubernetes API (https://k8s:6443)"),
        ("focus.csv", "focus.csv"),
    ],
)
def test_public_file_name(stored: str, shown: str) -> None:
    assert public_file_name(stored) == shown


def test_public_text_strips_folders_of_every_absolute_path() -> None:
    text = "file /tmp/pytest-7/x/focus.csv, line 3: see /var/lib/y.csv, not s3://b/k/z.csv"
    assert public_text(text) == "file focus.csv, line 3: see y.csv, not s3://b/k/z.csv"
