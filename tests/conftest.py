"""Fixtures shared across feature test files. Feature-specific fixtures live in their file."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from pytest_django import Settings
from rest_framework.test import APIClient

from finops.celery import app as celery_app
from finops.org.models import Profile, Team
from tests.clock import Clock
from tests.cur_s3_deliveries import S3_BUCKET
from tests.factories import Scenario, build_month_scenario
from tests.gcs_exports import GCS_BUCKET
from tests.smtp import CapturedMail

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver

# ../shared beside the checkout; FINOPS_SHARED_DIR points elsewhere (a git worktree, whose
# parent folder is not the checkout's).
SHARED_DIR = Path(
    os.environ.get("FINOPS_SHARED_DIR") or Path(__file__).resolve().parent.parent.parent / "shared"
)
SAMPLES_DIR = SHARED_DIR / "samples"
TEAMS_FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "django" / "teams.json"


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


@pytest.fixture(autouse=True)
def api_response_cache_off(settings: Any) -> None:
    """No cached API answers (finops/api/cache.py) unless a test turns them on: the locmem
    cache outlives a test's rolled-back database, and its on_commit version bumps never run
    inside a test's transaction. tests/api/test_api_cache.py tests the cache itself."""
    settings.FINOPS_API_CACHE_SECONDS = 0


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


def _fixture_team(slug: str) -> Team:
    """One team of fixtures/django/teams.json (the scenarios' teams), created on its own so a
    test asking for one team gets exactly one."""
    entries = json.loads(TEAMS_FIXTURE.read_text())
    (fields,) = [e["fields"] for e in entries if e["fields"]["slug"] == slug]
    return Team.objects.create(slug=slug, name=fields["name"])


@pytest.fixture
def team(db: None) -> Team:
    return _fixture_team("vision")


@pytest.fixture
def other_team(db: None) -> Team:
    return _fixture_team("speech")


@pytest.fixture
def finance_user(db: None) -> User:
    user = User.objects.create_user("fin", password="fin-password-123")
    Profile.objects.create(user=user, role=Profile.Role.FINANCE)
    return user


@pytest.fixture
def viewer_user(db: None) -> User:
    user = User.objects.create_user("viewer", password="viewer-password-123")
    Profile.objects.create(user=user, role=Profile.Role.VIEWER)
    return user


@pytest.fixture
def lead_user(team: Team) -> User:
    user = User.objects.create_user("lead", password="lead-password-123")
    profile = Profile.objects.create(user=user, role=Profile.Role.TEAM_LEAD)
    profile.teams.add(team)
    return user


# Logged-in clients: pages through Django's test client (a session), the API through DRF's.


@pytest.fixture
def finance_client(client: Client, finance_user: User) -> Client:
    return _logged_in(client, finance_user)


@pytest.fixture
def lead_client(client: Client, lead_user: User) -> Client:
    return _logged_in(client, lead_user)


def _logged_in(client: Client, user: User) -> Client:
    """pytest-django's one `client`, logged in as user. finance_client and lead_client are
    that same client: a test asking for both would make every request as whichever logged in
    last (one did: its "lead" request ran as finance), so asking for both is refused."""
    other = getattr(client, "finops_user", None)
    if other is not None and other != user.pk:
        raise pytest.UsageError(
            "finance_client and lead_client are one client; log in with client.force_login"
        )
    client.force_login(user)
    client.finops_user = user.pk  # type: ignore[attr-defined]
    return client


@pytest.fixture
def finance_api(finance_user: User) -> APIClient:
    api = APIClient()
    api.force_authenticate(finance_user)
    return api


@pytest.fixture
def lead_api(lead_user: User) -> APIClient:
    api = APIClient()
    api.force_authenticate(lead_user)
    return api


@pytest.fixture
def scenario(team: Team, other_team: Team) -> Scenario:
    """A consistent month of ledger, rollups and runs for both teams (tests/factories.py)."""
    return build_month_scenario(team=team, other_team=other_team)


# A real Celery worker process (CI's PostgreSQL + Redis pass); tests mark themselves `worker`.
WORKER_ROOT = Path(__file__).resolve().parent.parent


def _worker_wanted() -> bool:
    return bool(settings.CELERY_BROKER_URL) and connection.vendor == "postgresql"


# CI runs two workers, one per queue group, as docs/running-at-scale.md deploys them:
# a task routed to a queue nobody consumes would hang the test that sends it.
WORKER_QUEUE_GROUPS = {"ingest": "ingest", "compute": "attribution,notifications"}
ALL_QUEUES = ",".join(WORKER_QUEUE_GROUPS.values())


@pytest.fixture
def worker_env() -> dict[str, str]:
    """Extra environment for the worker processes (a test module may override this fixture,
    e.g. tests/pipeline/test_crash_safety.py sets short heartbeats and a fault to inject)."""
    return {}


@pytest.fixture
def worker_queue_groups() -> dict[str, str]:
    """Worker name -> the queues it consumes (a test module may override this fixture)."""
    return dict(WORKER_QUEUE_GROUPS)


@pytest.fixture
def celery_worker_process(
    transactional_db: None,
    tmp_path: Path,
    worker_env: dict[str, str],
    worker_queue_groups: dict[str, str],
) -> Iterator[Path]:
    """Two real worker processes (`-Q ingest` and `-Q attribution,notifications`) over the
    test database; yields the log both append to."""
    if not _worker_wanted():
        if os.environ.get("FINOPS_REQUIRE_WORKER") == "1":
            pytest.fail("FINOPS_REQUIRE_WORKER=1 but no broker or no PostgreSQL configured")
        pytest.skip("needs CELERY_BROKER_URL and PostgreSQL (CI's second pass)")
    with celery_app.connection_for_write() as broker:  # no task left from an earlier test
        # A kombu virtual channel (Redis) has queue_purge; its stub type StdChannel does not.
        channel = cast(_PurgeableChannel, broker.default_channel)
        for queue in settings.FINOPS_TASK_QUEUES:
            channel.queue_purge(queue)
    log = tmp_path / "worker.log"
    workers: list[subprocess.Popen[bytes]] = []
    try:
        for name, queues in worker_queue_groups.items():
            workers.append(worker_start(worker_env, log, queues=queues, name=name))
        yield log
    finally:
        for worker in workers:
            worker_stop(worker)


class _PurgeableChannel(Protocol):
    def queue_purge(self, queue: str) -> int | None: ...


def worker_start(
    extra_env: dict[str, str], log: Path, *, queues: str = ALL_QUEUES, name: str = "e2e"
) -> subprocess.Popen[bytes]:
    """Start a worker on the test database, consuming `queues`, and wait until it answers a
    ping (by its own name: another worker may already be answering)."""
    test_db = connection.settings_dict
    env = dict(os.environ)
    env["DATABASE_URL"] = (
        f"postgres://{test_db['USER']}@{test_db['HOST'] or '127.0.0.1'}:"
        f"{test_db['PORT'] or 5432}/{test_db['NAME']}"
    )
    env.update(extra_env)
    node = f"{name}-{time.monotonic_ns()}@{socket.gethostname()}"
    with log.open("ab") as log_handle:
        worker = subprocess.Popen(
            [
                sys.executable, "-m", "celery", "-A", "finops", "worker", "--pool=solo",
                "--loglevel=INFO", "--without-gossip", "--without-mingle",
                "-Q", queues, "-n", node,
            ],
            cwd=WORKER_ROOT,
            env=env,
            stdout=log_handle,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        _wait_for_worker(worker, log, node)
    except BaseException:
        worker_stop(worker)
        raise
    return worker


def worker_stop(worker: subprocess.Popen[bytes]) -> None:
    if worker.poll() is None:
        worker.terminate()
    worker.wait(timeout=30)


def _wait_for_worker(worker: subprocess.Popen[bytes], log: Path, node: str) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if worker.poll() is not None:
            raise AssertionError(f"worker exited early:\n{log.read_text()}")
        replies = celery_app.control.ping(timeout=1.0) or []
        if any(node in reply for reply in replies):
            return
    raise AssertionError(f"worker {node} did not answer a ping in 90 s:\n{log.read_text()}")


@pytest.fixture
def smtp_server(settings: Settings) -> Iterator[CapturedMail]:
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


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# --- moto in server mode (S3), in-process: s3:// imports against the real boto3 client ----------


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def s3_clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """Moto's object LastModified (it runs in this process), read from a Clock."""
    import moto.s3.models

    clock = Clock(datetime(2024, 10, 2, 8, 0, tzinfo=UTC))
    monkeypatch.setattr(moto.s3.models, "utcnow", lambda: clock.now.replace(tzinfo=None))
    return clock


@pytest.fixture
def s3(
    s3_endpoint: str, s3_clock: Clock, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[Any]:
    """A bucket (tests.cur_s3_deliveries.S3_BUCKET) on the moto server; the command builds its own
    client from the standard AWS environment variables, which point at moto."""
    import boto3

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3_endpoint)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    client = boto3.client("s3", endpoint_url=s3_endpoint)
    client.create_bucket(Bucket=S3_BUCKET)
    yield client
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=S3_BUCKET):
        for entry in page.get("Contents", []):
            client.delete_object(Bucket=S3_BUCKET, Key=entry["Key"])
    client.delete_bucket(Bucket=S3_BUCKET)


# --- gcp-storage-emulator, in-process: gs:// imports against the real google-cloud-storage ------


@pytest.fixture(scope="module")
def emulator() -> Iterator[tuple[Any, str]]:
    from gcp_storage_emulator.server import create_server

    port = free_port()
    server = create_server("127.0.0.1", port, in_memory=True)
    server.start()
    yield server, f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def bucket(emulator: tuple[Any, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    server, url = emulator
    # The command builds its own client from the environment, as it would against GCS.
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", url)
    client = storage.Client(project="finops-test", credentials=AnonymousCredentials())
    yield client.create_bucket(GCS_BUCKET)
    server.wipe()


@pytest.fixture
def browser() -> Iterator[WebDriver]:
    """A headless Chromium (tests/chromium.py); tests using it are marked `browser`."""
    from tests.chromium import chrome_session

    with chrome_session() as driver:
        yield driver


# --- the pricing comparison's golden month (tests/pricing_golden.py) ------------------------------


@pytest.fixture
def no_catalogue(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The golden figures price with the configured ratios alone: an empty catalogue, unless the
    test asks for real_snapshot to keep the shipped one. Modules opt in with usefixtures."""
    from finops.pricing import snapshot

    if "real_snapshot" not in request.fixturenames:
        monkeypatch.setattr(snapshot, "snapshot", lambda path=None: {"prices": []})


@pytest.fixture
def real_snapshot() -> None:
    """Marker fixture: keep the shipped price snapshot (see no_catalogue)."""


@pytest.fixture
def priced_month(db: None) -> None:
    """The four golden runs of June 2025, attributed (tests/pricing_golden.py)."""
    from tests.pricing_golden import golden_runs_create

    golden_runs_create()


@pytest.fixture
def bills(tmp_path: Path, team: Team, other_team: Team) -> Path:
    """September and October 2025 billed to vision and speech, attributed (tests/close_data.py):
    the month-close tests and the chat messages of a close."""
    from tests.close_data import close_bills

    return close_bills(tmp_path)
