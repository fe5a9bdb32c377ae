"""`make demo` prints the address it serves (HOST, PORT), and the embedded default (no broker)
no longer makes kombu warn "No hostname was supplied" on every command."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from django.conf import settings
from kombu import Connection

from finops.celery import app
from finops.demo.management.commands.demo import demo_url

ROOT = Path(__file__).resolve().parents[2]


def test_demo_url_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FINOPS_DEMO_URL", raising=False)
    assert demo_url() == "http://127.0.0.1:8000"
    monkeypatch.setenv("FINOPS_DEMO_URL", "http://0.0.0.0:9001")
    assert demo_url() == "http://0.0.0.0:9001"


@pytest.mark.skipif(shutil.which("make") is None, reason="make is absent")
def test_make_demo_passes_host_and_port() -> None:
    dry_run = subprocess.run(
        ["make", "-n", "demo", "HOST=0.0.0.0", "PORT=9001"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "MAKEFLAGS": ""},
    ).stdout
    assert "FINOPS_DEMO_URL=http://0.0.0.0:9001 " in dry_run
    assert "runserver --noreload 0.0.0.0:9001" in dry_run


@pytest.mark.skipif(bool(settings.CELERY_BROKER_URL), reason="a broker is configured")
def test_embedded_default_broker_makes_kombu_quiet(caplog: pytest.LogCaptureFixture) -> None:
    assert settings.CELERY_TASK_ALWAYS_EAGER
    with caplog.at_level(logging.WARNING, logger="kombu.connection"):
        Connection(app.conf.broker_url)._info()
    assert "No hostname was supplied" not in caplog.text
