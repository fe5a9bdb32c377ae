"""Imports page (issue 29): a job log upload must name its cluster (it went to "default",
silently), and the banner of the batch just uploaded shows the file's name, not the server's
path where it was stored."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from billing_ingest.models import ImportBatch

pytestmark = pytest.mark.django_db

SACCT = (
    "JobID|JobName|Account|User|State|Start|End|NodeList|AllocTRES\n"
    "1|train|cv|ann|COMPLETED|2025-09-03T08:00:00|2025-09-03T10:00:00|gpu1|gres/gpu=8\n"
)


def test_job_log_without_cluster_is_refused(finance_client: Client) -> None:
    upload = SimpleUploadedFile("jobs.sacct", SACCT.encode())
    response = finance_client.post(
        reverse("web:imports-upload"), {"format": "jobs:slurm", "file": upload, "cluster": " "}
    )
    assert response.status_code == 400
    assert b"A job log needs the cluster its jobs ran on" in response.content
    assert not ImportBatch.objects.exists()


def test_banner_shows_the_file_name_not_the_server_path(
    finance_client: Client, settings: object
) -> None:
    upload = SimpleUploadedFile("jobs.sacct", SACCT.encode())
    response = finance_client.post(
        reverse("web:imports-upload"),
        {"format": "jobs:slurm", "file": upload, "cluster": "hpc-east"},
        follow=True,
    )
    assert response.status_code == 200
    batch = ImportBatch.objects.get()
    assert batch.source == "hpc-east"
    text = response.content.decode()
    assert f"Import #{batch.pk}: jobs.sacct</h2>" in text
    assert "/uploads/" not in text
