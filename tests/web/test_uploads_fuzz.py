"""Hypothesis fuzzes the Imports page's upload (issue 25: "a fuzz of the budgets and uploads
endpoints finds no 500 on PostgreSQL"): every format, with form fields and file names built to
break things (NULs, lone surrogates, control characters, text past the columns' lengths) and
file bodies that are nearly right (a real header with broken cells, deep JSON, blank lines,
binary noise). The answer is never a 5xx, and every batch the upload made has ended, succeeded
or failed with a message naming the file: none is left running.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pytest_django import Settings

from billing_ingest.models import ImportBatch
from finops.web.upload_views import format_choices
from tests.builders import csv_text, focus_row

pytestmark = pytest.mark.django_db
FUZZ = settings(
    max_examples=int(os.environ.get("FINOPS_UPLOAD_FUZZ_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# No lone surrogate: a form field is sent as UTF-8, which cannot carry one.
NASTY = ["\x00", "\n", "\r\n", "\t", "\x1b", "\u2028", "\x7f", "/", "..", "%00",
         "é", "東", "'", '"', "\\", "<script>"]  # fmt: skip
texts = st.one_of(
    st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=20),
    st.lists(st.sampled_from(NASTY), max_size=8).map("".join),
    st.integers(min_value=90, max_value=400).map(lambda n: "x" * n),
)
FORMATS = [value for _, group in format_choices() for value, _ in group]

_FOCUS_HEADER = csv_text([focus_row()]).splitlines()[0]
bodies = st.one_of(
    st.binary(max_size=300),
    st.text(max_size=300).map(lambda t: t.encode("utf-8", "surrogatepass")),
    # A real FOCUS header, then cells that are nearly right.
    st.lists(st.text(alphabet=",;|\"'0123456789.-eE:TZ \n", max_size=60), max_size=5).map(
        lambda lines: ("\n".join([_FOCUS_HEADER, *lines]) + "\n").encode()
    ),
    st.integers(min_value=1, max_value=400).map(lambda n: ("[" * n + "]" * n).encode()),
    st.sampled_from(
        [b"", b"\n\n\n", b"{}", b"[]", b'{"items": [{}]}', b"null", b"\xef\xbb\xbf", b"\x1f\x8b"]
    ),
)


@pytest.fixture(autouse=True)
def data_dir(settings: Settings, tmp_path: Path) -> Path:
    settings.FINOPS_DATA_DIR = tmp_path / "data"
    return settings.FINOPS_DATA_DIR


@FUZZ
@given(
    fmt=st.one_of(st.sampled_from(FORMATS), texts),
    name=texts,
    body=bodies,
    source=texts,
    cluster=texts,
)
def test_no_upload_answers_a_server_error_or_leaves_a_batch_running(
    client: Client,
    finance_user: User,
    fmt: str,
    name: str,
    body: bytes,
    source: str,
    cluster: str,
) -> None:
    client.force_login(finance_user)
    before = set(ImportBatch.objects.values_list("pk", flat=True))
    # The test client cannot build a file whose base name is empty, "." or ".." (Django's
    # SuspiciousFileOperation, before anything is sent); the server never sees those.
    if os.path.basename(name) in ("", ".", ".."):
        name = f"upload{name}.csv"
    upload = SimpleUploadedFile(name, body, content_type="application/octet-stream")
    response = client.post(
        reverse("web:imports-upload"),
        {"format": fmt, "file": upload, "source": source, "cluster": cluster},
    )
    assert response.status_code < 500, (fmt, name, body[:80])
    made = ImportBatch.objects.exclude(pk__in=before)
    for batch in made:
        assert batch.status in (
            ImportBatch.Status.SUCCEEDED,
            ImportBatch.Status.FAILED,
            ImportBatch.Status.DUPLICATE,
        ), (batch.status, batch.error)
        if batch.status == ImportBatch.Status.FAILED:
            assert batch.error, "a failed batch says why"
