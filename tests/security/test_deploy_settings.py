"""Deployment security from the environment (issue 9, item 3).

The probe found SECRET_KEY falling back to a public constant with DEBUG off, and the HTTPS
settings not read at all. Settings are read once per process, so each case starts a fresh
`manage.py` with its own environment.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured
from django.test import Client
from django.urls import reverse

from finops.secret_key import PUBLIC_DEFAULT, secret_key_load

ROOT = Path(__file__).resolve().parents[2]
STRONG_KEY = "k" * 20 + "Zq8-Lm2_Xv9pR4tW7yB1nC5dF3gH6jK0sA"  # 55 characters
PRODUCTION_HTTPS = {
    "DJANGO_ALLOWED_HOSTS": "finops.example.com",
    "SESSION_COOKIE_SECURE": "1",
    "CSRF_COOKIE_SECURE": "1",
    "SECURE_HSTS_SECONDS": "31536000",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS": "1",
    "SECURE_HSTS_PRELOAD": "1",
    "SECURE_SSL_REDIRECT": "1",
    "SECURE_PROXY_SSL_HEADER": "HTTP_X_FORWARDED_PROTO,https",
}


def _manage(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "SECURE_"))}
    base.pop("SESSION_COOKIE_SECURE", None)
    base.pop("CSRF_COOKIE_SECURE", None)
    base["FINOPS_DATA_DIR"] = str(tmp_path / "data")
    # The production shape: a database server and a broker (not connected to by `check`).
    base["DATABASE_URL"] = "postgres://postgres@127.0.0.1:5432/finops_deploy_check"
    base["CELERY_BROKER_URL"] = "redis://127.0.0.1:6379/3"
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env={**base, **env},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_check_deploy_passes_clean_with_production_settings(tmp_path: Path) -> None:
    result = _manage(
        tmp_path, "check", "--deploy", "--fail-level", "WARNING",
        DJANGO_SECRET_KEY=STRONG_KEY, **PRODUCTION_HTTPS,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "no issues" in result.stdout


def test_check_deploy_names_each_https_setting_left_off(tmp_path: Path) -> None:
    result = _manage(tmp_path, "check", "--deploy", "--fail-level", "WARNING",
                     DJANGO_SECRET_KEY=STRONG_KEY)  # fmt: skip
    assert result.returncode != 0
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in result.stderr, warning


def test_https_settings_are_read_from_the_environment(tmp_path: Path) -> None:
    code = (
        "from django.conf import settings as s; print(s.SESSION_COOKIE_SECURE, "
        "s.CSRF_COOKIE_SECURE, s.SECURE_HSTS_SECONDS, s.SECURE_HSTS_INCLUDE_SUBDOMAINS, "
        "s.SECURE_HSTS_PRELOAD, s.SECURE_SSL_REDIRECT, s.SECURE_PROXY_SSL_HEADER)"
    )
    result = _manage(tmp_path, "shell", "-c", code, DJANGO_SECRET_KEY=STRONG_KEY,
                     **PRODUCTION_HTTPS)  # fmt: skip
    assert result.returncode == 0, result.stderr
    expected = "True True 31536000 True True True ('HTTP_X_FORWARDED_PROTO', 'https')"
    # (the shell first says what it imported: the answer is the last line)
    assert result.stdout.strip().splitlines()[-1] == expected


@pytest.mark.parametrize("key", [PUBLIC_DEFAULT, "short-key", "django-insecure-" + "x" * 50])
def test_public_or_short_secret_key_refuses_to_start(tmp_path: Path, key: str) -> None:
    result = _manage(tmp_path, "check", DJANGO_SECRET_KEY=key)
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert "DJANGO_SECRET_KEY" in result.stderr


def test_without_a_key_one_is_generated_and_kept_in_the_data_folder(tmp_path: Path) -> None:
    first = secret_key_load(env_value="", data_dir=tmp_path / "data")
    again = secret_key_load(env_value="", data_dir=tmp_path / "data")
    kept = tmp_path / "data" / "secret_key"
    assert first == again == kept.read_text().strip()
    assert len(first) >= 50
    assert first != PUBLIC_DEFAULT
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    # Another data folder, another key: nothing is shared or built in.
    assert secret_key_load(env_value="", data_dir=tmp_path / "other") != first


def test_an_unwritable_data_folder_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(ImproperlyConfigured, match="cannot be kept"):
        secret_key_load(env_value="", data_dir=blocker)


def test_two_processes_starting_together_share_one_key(tmp_path: Path) -> None:
    code = "from django.conf import settings; print(settings.SECRET_KEY)"
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SECRET_KEY"}
    env["FINOPS_DATA_DIR"] = str(tmp_path / "data")
    procs = [
        subprocess.Popen(
            [sys.executable, "manage.py", "shell", "-c", code],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    keys = {p.communicate(timeout=120)[0].strip().splitlines()[-1] for p in procs}
    assert keys == {(tmp_path / "data" / "secret_key").read_text().strip()}


@pytest.mark.django_db
def test_every_response_carries_the_content_security_policy(
    client: Client, finance_user: User
) -> None:
    client.force_login(finance_user)
    for url in (reverse("login"), reverse("web:overview"), "/api/v1/teams/"):
        policy = client.get(url)["Content-Security-Policy"]
        assert "script-src 'self'" in policy
        assert "unsafe-inline" not in policy
        assert "frame-ancestors 'none'" in policy
        assert "object-src 'none'" in policy


def _is_email_template(path: Path) -> bool:
    """Emails and the statement document printed to PDF by WeasyPrint: never served as pages."""
    return path.stem.startswith(("email", "digest")) or path.stem.endswith("_document")


def test_templates_have_no_inline_script_or_style() -> None:
    import re

    offenders = []
    for path in (ROOT / "templates").rglob("*.html"):
        if _is_email_template(path):
            continue  # mail clients and the PDF printer need inline CSS; no browser sees these
        text = path.read_text()
        for pattern in (r"<script(?![^>]*\bsrc=)[^>]*>", r"\sstyle=", r"<style", r"\son\w+="):
            if re.search(pattern, text):
                offenders.append((path.name, pattern))
    assert offenders == []
