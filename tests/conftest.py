"""Fixtures shared across feature test files. Feature-specific fixtures live in their file."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection

from finops.celery import app as celery_app
from finops.org.models import Profile, Team

# ../shared beside the checkout; FINOPS_SHARED_DIR points elsewhere (a git worktree, whose
# parent folder is not the checkout's).
SHARED_DIR = Path(
    os.environ.get("FINOPS_SHARED_DIR") or Path(__file__).resolve().parent.parent.parent / "shared"
)
SAMPLES_DIR = SHARED_DIR / "samples"


@pytest.fixture(autouse=True)
def celery_eager_unless_worker_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """Run tasks in-process, except in tests marked `worker`, which use a real worker.

    CI's PostgreSQL pass sets CELERY_BROKER_URL for the whole run; without this, every test
    that calls a command would wait on a worker that only the worker tests start.
    """
    eager = request.node.get_closest_marker("worker") is None
    previous = (celery_app.conf.task_always_eager, celery_app.conf.task_eager_propagates)
    celery_app.conf.task_always_eager = eager
    celery_app.conf.task_eager_propagates = True
    yield
    celery_app.conf.task_always_eager, celery_app.conf.task_eager_propagates = previous


@pytest.fixture
def samples_dir() -> Path:
    """../shared/samples, or a clean skip where the checkout has no shared folder beside it,
    unless FINOPS_REQUIRE_SAMPLES=1 (CI), where a missing folder fails the test: a run that
    silently skipped every sample test would pass without testing the real files."""
    if not SAMPLES_DIR.is_dir():
        if os.environ.get("FINOPS_REQUIRE_SAMPLES") == "1":
            pytest.fail(f"FINOPS_REQUIRE_SAMPLES=1 but {SAMPLES_DIR} is absent")
        pytest.skip("../shared/samples is absent")
    return SAMPLES_DIR


@pytest.fixture
def team(db: None) -> Team:
    return Team.objects.create(slug="vision", name="Vision")


@pytest.fixture
def other_team(db: None) -> Team:
    return Team.objects.create(slug="speech", name="Speech")


@pytest.fixture
def finance_user(db: None) -> User:
    user = User.objects.create_user("fin", password="fin-password-123")
    Profile.objects.create(user=user, role=Profile.Role.FINANCE)
    return user


@pytest.fixture
def lead_user(team: Team) -> User:
    user = User.objects.create_user("lead", password="lead-password-123")
    profile = Profile.objects.create(user=user, role=Profile.Role.TEAM_LEAD)
    profile.teams.add(team)
    return user


# A real Celery worker process (CI's PostgreSQL + Redis pass); tests mark themselves `worker`.
WORKER_ROOT = Path(__file__).resolve().parent.parent


def _worker_wanted() -> bool:
    return bool(settings.CELERY_BROKER_URL) and connection.vendor == "postgresql"


# CI runs two workers, one per queue group, as "Running at scale" in the README deploys them:
# a task routed to a queue nobody consumes would hang the test that sends it.
WORKER_QUEUE_GROUPS = {"ingest": "ingest", "compute": "attribution,notifications"}


@pytest.fixture
def celery_worker_process(transactional_db: None, tmp_path: Path) -> Iterator[Path]:
    """Two real worker processes (`-Q ingest` and `-Q attribution,notifications`) over the
    test database; yields the log both append to."""
    if not _worker_wanted():
        if os.environ.get("FINOPS_REQUIRE_WORKER") == "1":
            pytest.fail("FINOPS_REQUIRE_WORKER=1 but no broker or no PostgreSQL configured")
        pytest.skip("needs CELERY_BROKER_URL and PostgreSQL (CI's second pass)")
    test_db = connection.settings_dict
    env = dict(os.environ)
    env["DATABASE_URL"] = (
        f"postgres://{test_db['USER']}@{test_db['HOST'] or '127.0.0.1'}:"
        f"{test_db['PORT'] or 5432}/{test_db['NAME']}"
    )
    with celery_app.connection_for_write() as broker:  # no task left from an earlier test
        for queue in settings.FINOPS_TASK_QUEUES:
            broker.default_channel.queue_purge(queue)
    log = tmp_path / "worker.log"
    workers: list[subprocess.Popen[bytes]] = []
    with log.open("ab") as log_handle:
        try:
            for name, queues in WORKER_QUEUE_GROUPS.items():
                workers.append(_start_worker(name=name, queues=queues, env=env, log=log_handle))
            _wait_for_workers(workers, log)
            yield log
        finally:
            for worker in workers:
                worker.terminate()
            for worker in workers:
                worker.wait(timeout=30)


def _start_worker(*, name: str, queues: str, env: dict[str, str], log: Any) -> Any:
    return subprocess.Popen(
        [
            sys.executable, "-m", "celery", "-A", "finops", "worker", "--pool=solo",
            "--loglevel=INFO", "--without-gossip", "--without-mingle",
            "-Q", queues, "-n", f"{name}@%h",
        ],
        cwd=WORKER_ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )  # fmt: skip


def _wait_for_workers(workers: list[subprocess.Popen[bytes]], log: Path) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if any(worker.poll() is not None for worker in workers):
            raise AssertionError(f"a worker exited early:\n{log.read_text()}")
        if len(celery_app.control.ping(timeout=1.0)) >= len(workers):
            return
    raise AssertionError(f"workers did not all answer a ping in 90 s:\n{log.read_text()}")


class CapturedMail:
    """What a real SMTP server on a free port accepted: envelope recipients and raw content."""

    def __init__(self) -> None:
        self.messages: list[tuple[list[str], bytes]] = []

    async def handle_DATA(self, server: object, session: object, envelope: Any) -> str:
        self.messages.append((list(envelope.rcpt_tos), bytes(envelope.original_content)))
        return "250 Message accepted for delivery"

    def to(self, address: str) -> list[bytes]:
        return [content for rcpts, content in self.messages if address in rcpts]


@pytest.fixture
def smtp_server(settings: Any) -> Iterator[CapturedMail]:
    """aiosmtpd on a free loopback port, with Django's SMTP backend pointed at it."""
    from aiosmtpd.controller import Controller

    handler = CapturedMail()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    controller = Controller(handler, hostname="127.0.0.1", port=port)
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST = "127.0.0.1"
    settings.EMAIL_PORT = port
    settings.EMAIL_USE_TLS = False
    settings.EMAIL_HOST_USER = ""
    settings.EMAIL_HOST_PASSWORD = ""
    try:
        yield handler
    finally:
        controller.stop()
